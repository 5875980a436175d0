#!/usr/bin/env bash
# shellcheck disable=SC2317  # the step functions below are called through step()
# The one test command (README, CI's .ci/run). On a fresh Debian machine it installs what the
# tests need (kcat, chromium and prometheus from apt, a Python venv with the pinned clients, the Maven project's
# dependencies, the franz-go test member built with Go), quickly when they are already there.
# Then it builds koord once, in release, and runs every tier against that build:
#   rust    cargo test --release (unit tests and the wire tests under tests/)
#   python  pytest proto-tests/ with real clients against target/release/koord
#   load    koord-load (load/) at a small size against a fresh koord, over PLAINTEXT and over
#           SASL_SSL: every group Stable, no request failed
#   kafka   the raw conformance tier (tests/wire.rs, tests/groups.rs, tests/consumer_groups.rs,
#           tests/share_groups.rs, tests/group_configs.rs), the franz-go groups
#           (proto-tests/test_franz.py), __consumer_offsets read by franz-go and Kafka's
#           formatters (proto-tests/test_offsets_topic.py), share groups with Java's KafkaShareConsumer
#           (proto-tests/test_share_groups.py) and Kafka Streams, a custom assignor
#           and the admin tools (proto-tests/test_streams.py) again, against Apache Kafka 4.4
#           (scripts/kafka.sh), proving their expectations are Kafka's own answers; the same
#           koord-load smoke run against Kafka; and koord in gateway mode in front of that
#           Kafka with TLS and SASL on both sides (proto-tests/test_gateway_security.py)
#   gateway koord in gateway mode in front of a 3-broker Kafka 4.4 (KAFKA_BROKERS=3
#           scripts/kafka.sh, started once for the tier): real clients produce, consume in a
#           group scaled 3 -> 5 -> 3 (also while an upstream broker is killed and restarted)
#           and read metadata only through koord (proto-tests/test_gateway.py); the offsets
#           are upstream's and a group survives koord killed, Kafka Streams exactly_once_v2
#           through koord (proto-tests/test_gateway_state.py); three koord nodes in cluster
#           mode sharing 50 groups of Java and confluent-kafka members, one node killed -9 and
#           restarted under them (proto-tests/test_cluster.py), and a former shard owner's
#           writes refused once the next owner claimed the shard (tests/cluster.rs); upstream's
#           coordinator loading or moving (a fresh single-broker Kafka of its own with both
#           cores busy, the groups' __consumer_offsets leader killed as they join) never
#           reaches librdkafka, Java, franz-go or kafka-python members as an error they do not
#           retry (proto-tests/test_gateway_faults.py); a 75 s chaos soak with a fixed seed
#           (brokers and koord nodes killed and paused, cores starved) under Java, librdkafka
#           and franz-go groups and an exactly-once Streams app: no commit lost, no group
#           stuck, no partition owned twice, the Streams output exact (proto-tests/test_chaos.py,
#           bench/chaos.py; bench/chaos.sh runs it for 10 minutes); share groups in front of
#           that Kafka, formatted with share groups off (share.version=0): the Java share
#           consumer tests pass through koord, which reads the records upstream, and a koord
#           killed -9 mid-stream delivers nothing it had confirmed accepted again
#           (proto-tests/test_share_groups.py)
#   old-kafka the same share-group tests through koord in front of Kafka 3.9.1, a release with
#           no share groups at all (KAFKA_VERSION=3.9.1 scripts/kafka.sh)
# Exits non-zero if any step fails, after printing a summary of all of them.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=proto-tests/.venv
java_dir=proto-tests/java
franz_dir=proto-tests/franz
koord_bin="${CARGO_TARGET_DIR:-$root/target}/release/koord"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
export DEBIAN_FRONTEND=noninteractive

say() { printf '\n==> %s\n' "$*"; }

sudo_if_needed() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=no
apt_install() {
    if [ "$apt_updated" = no ]; then
        sudo_if_needed apt-get update -qq
        apt_updated=yes
    fi
    sudo_if_needed apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# Runs "$@" quietly; on failure shows its output and fails.
quiet() {
    local log
    log="$logs/$(date +%s%N).log"
    if ! "$@" >"$log" 2>&1; then
        echo "FAILED: $*" >&2
        tail -n 60 "$log" >&2
        return 1
    fi
}

install_tools() {
    say "tools"
    local missing=()
    command -v kcat >/dev/null || missing+=(kcat)
    command -v java >/dev/null || missing+=(default-jdk-headless)
    command -v mvn >/dev/null || missing+=(maven)
    # The status page test (proto-tests/test_observe.py) renders it in a real browser.
    command -v chromium >/dev/null || missing+=(chromium)
    # ... and a Prometheus server scrapes koord in it.
    command -v prometheus >/dev/null || missing+=(prometheus)
    # Certificates for the TLS tests (tests/security.rs, proto-tests/test_security.py) and
    # scripts/kafka.sh's SASL_SSL listener.
    command -v openssl >/dev/null || missing+=(openssl)
    if [ ${#missing[@]} -gt 0 ]; then
        echo "installing from apt: ${missing[*]}"
        apt_install "${missing[@]}"
    fi
    local tool
    for tool in kcat java mvn chromium prometheus openssl; do
        command -v "$tool" >/dev/null || {
            echo "$tool not found after apt-get install" >&2
            return 1
        }
    done
    command -v cargo >/dev/null || {
        echo "cargo not found: install Rust (rustup) first" >&2
        return 1
    }
    echo "kcat: $(command -v kcat); java: $(command -v java); mvn: $(command -v mvn)"
}

install_python() {
    say "python venv ($venv)"
    if [ ! -x "$venv/bin/python" ]; then
        if ! python3 -m venv "$venv" 2>/dev/null; then
            # Debian's python3 keeps venv (ensurepip) in a package of its own.
            rm -rf "$venv"
            apt_install python3-venv
            python3 -m venv "$venv"
        fi
    fi
    # Reinstall only when the pins change.
    local want have=""
    want=$(sha256sum proto-tests/requirements.txt | cut -d' ' -f1)
    [ -f "$venv/.requirements.sha256" ] && have=$(cat "$venv/.requirements.sha256")
    if [ "$want" != "$have" ]; then
        quiet "$venv/bin/pip" install -q --disable-pip-version-check -r proto-tests/requirements.txt
        echo "$want" >"$venv/.requirements.sha256"
    fi
    "$venv/bin/python" -c 'from importlib.metadata import version as v
print(*(f"{p} {v(p)}" for p in ("pytest", "confluent-kafka", "kafka-python")), sep=", ")'
}

mvn_compile() {
    (cd "$java_dir" && mvn "$@" -q -B compile)
}

# The classes and classpath are current: built after the last change to pom.xml or src/, and
# every jar on the classpath is still in ~/.m2.
java_up_to_date() {
    local stamp=$java_dir/target/.built jar jars
    [ -f "$stamp" ] && [ -f "$java_dir/target/classpath.txt" ] || return 1
    [ -z "$(find "$java_dir/pom.xml" "$java_dir/src" -newer "$stamp" -print -quit)" ] || return 1
    IFS=: read -ra jars <"$java_dir/target/classpath.txt"
    for jar in "${jars[@]}"; do
        [ -f "$jar" ] || return 1
    done
}

build_java() {
    say "java client ($java_dir)"
    if java_up_to_date; then
        echo "up to date: $java_dir/target/classes"
        return 0
    fi
    rm -f "$java_dir/target/.built"
    # Offline first: after the first run every artifact is in ~/.m2 and this is quick.
    if ! mvn_compile -o >"$logs/mvn-offline.log" 2>&1; then
        echo "resolving Maven dependencies into ~/.m2"
        quiet mvn_compile
    fi
    test -s "$java_dir/target/classpath.txt"
    touch "$java_dir/target/.built"
    echo "built $java_dir/target/classes; classpath in $java_dir/target/classpath.txt"
}

# The franz-go member (proto-tests/franz, test_franz.py): Go from Debian's golang-go if there is
# no go at all (go.mod says which Go it needs; an older one fails the build, saying so), modules
# from the Go module proxy into the default module cache. Rebuilt only when a source is newer.
build_franz() {
    say "franz-go member ($franz_dir)"
    if ! command -v go >/dev/null; then
        echo "installing from apt: golang-go"
        apt_install golang-go
    fi
    local bin=$franz_dir/bin/franz-member
    if [ -x "$bin" ] && [ -z "$(find "$franz_dir/go.mod" "$franz_dir/go.sum" "$franz_dir/main.go" \
        -newer "$bin" -print -quit)" ]; then
        echo "up to date: $bin"
        return 0
    fi
    (cd "$franz_dir" && quiet go build -o bin/franz-member .)
    echo "built $bin with $(go version)"
}

# --- run ---------------------------------------------------------------------------------------

names=()
results=()
times=()
failed=0

# step NAME COMMAND...: runs COMMAND in a subshell with errexit on, records its result in
# last_rc, results and times; never fails itself. (Never call it in `if` or `||`: bash would
# then ignore errexit inside COMMAND.)
last_rc=0
step() {
    local name=$1 start
    shift
    start=$SECONDS
    set +e
    (
        set -e
        "$@"
    )
    last_rc=$?
    set -e
    names+=("$name")
    times+=("$((SECONDS - start))s")
    if [ "$last_rc" -eq 0 ]; then
        results+=(ok)
    else
        results+=("FAILED (exit $last_rc)")
        failed=1
    fi
}

skip() {
    names+=("$1")
    results+=("skipped (an earlier step failed)")
    times+=("-")
}

summary() {
    say "summary"
    local i
    for i in "${!names[@]}"; do
        printf '  %-16s %-34s %s\n' "${names[$i]}" "${results[$i]}" "${times[$i]}"
    done
    printf '  %-16s %s\n' "total" "${SECONDS}s"
    if [ "$failed" -ne 0 ]; then
        echo "RESULT: FAILED"
    else
        echo "RESULT: all tiers passed"
    fi
}

cargo_build() {
    say "cargo build --release --workspace"
    cargo build --release --workspace
    # `cargo run --release` (koord alone, as README says) must reuse this build. It recompiles
    # when a workspace member asks a shared dependency for other features: declare those in
    # [workspace.dependencies] (Cargo.toml). A no-op here costs well under a second.
    local out
    out=$(cargo build --release 2>&1)
    if grep -E '^ *Compiling ' <<<"$out"; then
        echo "FAILED: cargo build --release recompiled the above after the workspace build:" \
            "the members resolve shared dependencies with different features" >&2
        return 1
    fi
    echo "cargo build --release after the workspace build: nothing to compile"
}

rust_tests() {
    say "rust tier: cargo test --release --workspace"
    cargo test --release --workspace
}

# The koord-load smoke run: small, but every step of a member's life (join with
# MEMBER_ID_REQUIRED, sync, heartbeats, commits) against BOOTSTRAP; fails unless every group is
# Stable and no request failed.
load_smoke_run() {
    "${CARGO_TARGET_DIR:-$root/target}/release/koord-load" --bootstrap "$1" --check \
        --groups 20 --members 5 --heartbeat-ms 100 --commit-ms 200 --partitions 100 \
        --topic load-smoke --duration 3 --join-timeout 60
    # Consumer protocol (KIP-848): --check fails unless every group is reconciled (its members
    # agree and ConsumerGroupDescribe says Stable) and no request failed. 5 members a group:
    # scripts/kafka.sh sets group.consumer.max.size=5; both servers heartbeat every 1 s.
    "${CARGO_TARGET_DIR:-$root/target}/release/koord-load" --bootstrap "$1" --check \
        --protocol consumer --groups 20 --members 5 --partitions 20 --topic load-smoke-cg \
        --duration 1 --join-timeout 60
}

# koord-load's TLS and SASL client (load/src/security.rs, bench/tls.sh) against the SASL_SSL
# listener at $1 whose certificate the CA file $2 signed, as alice (SCRAM-SHA-512): every group
# Stable, no request failed.
load_smoke_tls_run() {
    "${CARGO_TARGET_DIR:-$root/target}/release/koord-load" --bootstrap "$1" --check \
        --security-protocol SASL_SSL --ssl-ca "$2" --sasl-mechanism SCRAM-SHA-512 \
        --sasl-user alice --sasl-password alice-secret \
        --groups 5 --members 5 --heartbeat-ms 100 --duration 2 --connections 4 --join-timeout 60
}

# A CA (ca.pem) and a certificate for 127.0.0.1 with its key (keystore.pem) in $1.
make_tls() {
    (
        cd "$1"
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=test-sh-ca \
            -keyout ca.key -out ca.pem 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key \
            -out server.csr 2>/dev/null
        echo "subjectAltName=IP:127.0.0.1,DNS:localhost" >ext.cnf
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
            -extfile ext.cnf -out server.pem 2>/dev/null
        cat server.pem server.key >keystore.pem
    )
}

load_smoke() {
    say "load tier: koord-load smoke run against koord"
    local port tls_port data pid
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    tls_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    data=$(mktemp -d)
    mkdir "$data/tls"
    make_tls "$data/tls"
    "$koord_bin" --listen "127.0.0.1:$port" --data-dir "$data" \
        --set "listeners=PLAINTEXT://127.0.0.1:$port,SASL_SSL://127.0.0.1:$tls_port" \
        --set "ssl.keystore.location=$data/tls/keystore.pem" \
        --set sasl.admin.user=alice --set sasl.admin.password=alice-secret \
        --set group.initial.rebalance.delay.ms=0 \
        --set group.consumer.heartbeat.interval.ms=1000 \
        --set group.consumer.min.heartbeat.interval.ms=500 >"$logs/load-koord.log" 2>&1 &
    pid=$!
    # Expanded now: the trap runs after this function's locals are gone.
    # shellcheck disable=SC2064
    trap "kill $pid 2>/dev/null; rm -rf '$data'" EXIT
    for _ in $(seq 1 100); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
    load_smoke_run "127.0.0.1:$port"
    load_smoke_tls_run "127.0.0.1:$tls_port" "$data/tls/ca.pem"
    # The heartbeat benchmark's floor (load/src/floor.rs, issue 25) must carry the same
    # members to Stable and answer their heartbeats without a failure.
    local floor_port floor_pid
    floor_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "${CARGO_TARGET_DIR:-$root/target}/release/koord-floor" --listen "127.0.0.1:$floor_port" \
        --members 5 >"$logs/floor.log" 2>&1 &
    floor_pid=$!
    # shellcheck disable=SC2064
    trap "kill $pid $floor_pid 2>/dev/null; rm -rf '$data'" EXIT
    for _ in $(seq 1 100); do (echo >"/dev/tcp/127.0.0.1/$floor_port") 2>/dev/null && break; sleep 0.05; done
    "${CARGO_TARGET_DIR:-$root/target}/release/koord-load" --bootstrap "127.0.0.1:$floor_port" \
        --check --groups 20 --members 5 --heartbeat-ms 0 --duration 1 --join-timeout 60
    kill "$floor_pid" 2>/dev/null || true
}

python_tests() {
    say "python tier: pytest proto-tests (real clients, KOORD_BIN=$koord_bin)"
    # Exit code 5 (no test collected) fails this step too: a tier that ran nothing has not passed.
    KOORD_BIN="$koord_bin" "$venv/bin/python" -m pytest proto-tests -ra --tb=short \
        -p no:cacheprovider
}

kafka_conformance() {
    say "conformance tier against Apache Kafka 4.4 (scripts/kafka.sh)"
    local bootstrap
    # One Kafka for the whole tier, with SASL_PLAINTEXT and SASL_SSL listeners beside PLAINTEXT.
    bootstrap=$(KAFKA_SECURITY=sasl scripts/kafka.sh start)
    # step() runs this in a subshell: stop the broker whenever it exits, failed or not.
    trap 'scripts/kafka.sh stop' EXIT
    echo "Kafka 4.4 at $bootstrap"
    say "SASL, SCRAM users, ACLs and client quotas against Kafka 4.4 (tests/security.rs, tests/acls.rs, tests/quotas.rs)"
    KOORD_BOOTSTRAP="$bootstrap" \
        KOORD_SASL_BOOTSTRAP="$(cat "${KAFKA_DIR:-.build/kafka}/bootstrap.sasl_plaintext")" \
        cargo test --release --workspace --test security --test acls --test quotas
    KOORD_BOOTSTRAP="$bootstrap" cargo test --release --workspace --test wire --test groups \
        --test transactions
    # What koord does not do yet is #[ignore]d for koord and still proven against Kafka here.
    KOORD_BOOTSTRAP="$bootstrap" cargo test --release --workspace --test consumer_groups \
        --test streams_groups --test share_groups --test group_configs -- --include-ignored
    say "franz-go groups, __consumer_offsets, consumer-protocol (KIP-848) and share (KIP-932) groups against Kafka 4.4"
    KOORD_BOOTSTRAP="$bootstrap" "$venv/bin/python" -m pytest proto-tests/test_franz.py \
        proto-tests/test_offsets_topic.py \
        proto-tests/test_consumer_protocol.py proto-tests/test_share_groups.py -ra \
        --tb=short -p no:cacheprovider
    say "koord-load smoke run against Kafka 4.4 (PLAINTEXT, then SASL_SSL)"
    load_smoke_run "$bootstrap"
    load_smoke_tls_run "$(cat "${KAFKA_DIR:-.build/kafka}/bootstrap.sasl_ssl")" \
        "${KAFKA_DIR:-.build/kafka}/tls/ca.pem"
    # koord in gateway mode in front of this Kafka, secured on both sides: SASL_SSL clients
    # of koord, koord to Kafka's SASL_SSL listener as alice (SCRAM-SHA-512).
    say "gateway with TLS and SASL on both sides against Kafka 4.4 (proto-tests/test_gateway_security.py)"
    KOORD_BIN="$koord_bin" KOORD_SECURE_KAFKA_DIR="${KAFKA_DIR:-$root/.build/kafka}" \
        "$venv/bin/python" -m pytest proto-tests/test_gateway_security.py -ra --tb=short \
        -p no:cacheprovider
    # Kafka Streams, a client-side custom assignor, kafka-topics and kafka-configs: the same
    # expectations koord is held to in the python tier are Kafka's own behaviour.
    say "Kafka Streams (classic and streams groups), a custom assignor, the admin tools against Kafka 4.4"
    KOORD_BOOTSTRAP="$bootstrap" "$venv/bin/python" -m pytest proto-tests/test_streams.py \
        proto-tests/test_streams_groups.py -ra --tb=short -p no:cacheprovider
}

gateway_tier() {
    say "gateway tier: koord in front of a 3-broker Kafka 4.4 (KAFKA_BROKERS=3 scripts/kafka.sh)"
    local dir=.build/kafka-gateway bootstrap
    mkdir -p "$dir"
    # Its own directory (and ports), so it never meets the conformance tier's broker; the
    # broker jars are shared with .build/kafka when that already has them.
    if [ ! -e "$dir/libs" ] && [ -d .build/kafka/libs ]; then
        ln -s "$root/.build/kafka/libs" "$dir/libs"
    fi
    # Share groups off upstream (share.version=0): koord serves them in front of it.
    bootstrap=$(KAFKA_DIR="$dir" KAFKA_BROKERS=3 KAFKA_FEATURES=share.version=0 scripts/kafka.sh start)
    # shellcheck disable=SC2064  # expanded now
    trap "KAFKA_DIR='$dir' scripts/kafka.sh stop" EXIT
    echo "Kafka 4.4 cluster at $bootstrap"
    # Cluster mode's fencing: a former shard owner's writes refused by Kafka itself.
    KOORD_UPSTREAM="$bootstrap" cargo test --release --workspace --test cluster -- --include-ignored
    KOORD_BIN="$koord_bin" KOORD_UPSTREAM="$bootstrap" KAFKA_DIR="$dir" "$venv/bin/python" -m pytest \
        proto-tests/test_gateway.py proto-tests/test_gateway_state.py proto-tests/test_cluster.py \
        proto-tests/test_gateway_faults.py proto-tests/test_chaos.py \
        proto-tests/test_share_groups.py -ra --tb=short -p no:cacheprovider
}

old_kafka_tier() {
    say "old-kafka tier: share groups through koord in front of Kafka 3.9.1, which has none"
    local dir=.build/kafka-3.9 bootstrap
    bootstrap=$(KAFKA_VERSION=3.9.1 KAFKA_DIR="$dir" scripts/kafka.sh start)
    # shellcheck disable=SC2064  # expanded now
    trap "KAFKA_DIR='$dir' scripts/kafka.sh stop" EXIT
    echo "Kafka 3.9.1 at $bootstrap"
    # Cluster mode's share test is the gateway tier's (it needs no older Kafka to prove).
    KOORD_BIN="$koord_bin" KOORD_UPSTREAM="$bootstrap" KAFKA_DIR="$dir" "$venv/bin/python" -m pytest \
        proto-tests/test_share_groups.py -k 'not cluster' -ra --tb=short -p no:cacheprovider
}

step install-tools install_tools
step python-venv install_python
step java-client build_java
step franz-client build_franz
setup_failed=$failed

step cargo-build cargo_build
if [ "$last_rc" -eq 0 ]; then
    step rust-tests rust_tests
    if [ "$setup_failed" -eq 0 ]; then
        step python-tests python_tests
        step load-smoke load_smoke
        step kafka-conformance kafka_conformance
        step gateway gateway_tier
        step old-kafka old_kafka_tier
    else
        skip python-tests
        skip load-smoke
        skip kafka-conformance
        skip gateway
        skip old-kafka
    fi
else
    skip rust-tests
    skip python-tests
    skip load-smoke
    skip kafka-conformance
    skip gateway
    skip old-kafka
fi

summary
exit "$failed"
