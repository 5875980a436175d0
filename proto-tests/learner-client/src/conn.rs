//! One Kafka connection, one request at a time (a member has at most one request in flight:
//! its JoinGroup waits inside the coordinator, and nothing else needs sending meanwhile).
//!
//! Every failure is an error, never a panic: a short or oversized frame, a correlation id that
//! does not match, a body that does not decode or has bytes left over.

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest response accepted (a coordinator's answers to one member are small).
const MAX_RESPONSE: usize = 16 << 20;

pub struct Conn {
    stream: TcpStream,
    next_id: i32,
    client_id: StrBytes,
}

impl Conn {
    pub async fn connect(addr: &str, client_id: &str) -> Result<Conn> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connect to {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            next_id: 1,
            client_id: StrBytes::from_string(client_id.to_owned()),
        })
    }

    /// Sends `request` at `version` and reads its response. After an error (or a cancelled
    /// call) the connection must be dropped: its state is unknown.
    pub async fn call<R: Request>(&mut self, version: i16, request: &R) -> Result<R::Response> {
        let key = ApiKey::try_from(R::KEY).map_err(|_| anyhow!("unknown api key {}", R::KEY))?;
        let correlation_id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let mut buf = BytesMut::with_capacity(256);
        buf.put_i32(0);
        RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()))
            .encode(&mut buf, key.request_header_version(version))?;
        request.encode(&mut buf, version)?;
        let len = i32::try_from(buf.len() - 4).map_err(|_| anyhow!("request too large"))?;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        self.stream.write_all(&buf).await.context("send")?;

        let len = self
            .stream
            .read_i32()
            .await
            .context("read response length")?;
        let len = usize::try_from(len).map_err(|_| anyhow!("negative frame length {len}"))?;
        if len > MAX_RESPONSE {
            bail!("response frame of {len} bytes");
        }
        let mut frame = vec![0u8; len];
        self.stream
            .read_exact(&mut frame)
            .await
            .context("read response")?;
        let mut frame = Bytes::from(frame);
        let header = ResponseHeader::decode(&mut frame, key.response_header_version(version))
            .with_context(|| format!("{key:?} v{version} response header"))?;
        if header.correlation_id != correlation_id {
            bail!(
                "{key:?}: correlation id {} for {correlation_id} sent",
                header.correlation_id
            );
        }
        let response = R::Response::decode(&mut frame, version)
            .with_context(|| format!("{key:?} v{version} response"))?;
        if frame.has_remaining() {
            bail!(
                "{key:?} v{version}: {} bytes after the response",
                frame.remaining()
            );
        }
        Ok(response)
    }
}
