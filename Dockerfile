# koord: multi-stage build. The runtime image holds the binary and nothing else of the build.
#   docker build -t koord .
#   docker run -p 9092:9092 -v koord-data:/var/lib/koord koord
FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY vendor ./vendor
COPY src ./src
RUN cargo build --release --locked --bin koord

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home-dir /var/lib/koord --create-home koord
COPY --from=build /src/target/release/koord /usr/local/bin/koord
COPY config/koord.toml /etc/koord/koord.toml
USER koord
VOLUME ["/var/lib/koord"]
EXPOSE 9092
ENTRYPOINT ["/usr/local/bin/koord"]
CMD ["serve", "--config", "/etc/koord/koord.toml", "--listen", "0.0.0.0:9092", \
     "--advertised-listener", "localhost:9092", "--data-dir", "/var/lib/koord"]
