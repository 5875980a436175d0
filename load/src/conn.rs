//! One pipelined Kafka connection: any number of requests in flight, answered in order.
//!
//! A writer task batches queued frames into one write; a reader task reads length-prefixed
//! response frames and hands each to the oldest request in flight (Kafka answers a connection's
//! requests in the order they were sent), after checking the correlation id. With TLS or SASL
//! configured ([`crate::security`]) the connection is encrypted and authenticated before it
//! is handed out.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

/// The largest response accepted (the coordinator's answers are small).
const MAX_RESPONSE: usize = 64 << 20;

type Reply = oneshot::Sender<Result<Bytes>>;

struct InFlight {
    correlation_id: i32,
    key: ApiKey,
    version: i16,
    reply: Reply,
}

struct Queued {
    frame: Bytes,
    in_flight: InFlight,
}

/// A cheap handle to one connection; clones share it.
#[derive(Clone)]
pub struct Conn {
    tx: mpsc::UnboundedSender<Queued>,
    next_id: Arc<std::sync::atomic::AtomicI32>,
    client_id: StrBytes,
}

impl Conn {
    /// Starts the writer and reader tasks of a connection over `rd` and `wr`.
    pub fn spawn<R, W>(rd: R, mut wr: W, client_id: &str) -> Conn
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, mut rx) = mpsc::unbounded_channel::<Queued>();
        let pending: Arc<Mutex<VecDeque<InFlight>>> = Arc::default();

        let writer_pending = pending.clone();
        tokio::spawn(async move {
            let mut buf = BytesMut::new();
            while let Some(first) = rx.recv().await {
                buf.clear();
                let mut next = Some(first);
                while let Some(q) = next {
                    buf.extend_from_slice(&q.frame);
                    lock(&writer_pending).push_back(q.in_flight);
                    next = if buf.len() < 64 << 10 {
                        rx.try_recv().ok()
                    } else {
                        None
                    };
                }
                if wr.write_all(&buf).await.is_err() {
                    break;
                }
            }
            // Closed or failed: whatever is in flight fails when the reader sees the end.
            let _ = wr.shutdown().await;
        });

        tokio::spawn(async move {
            let mut rd = BufReader::with_capacity(64 << 10, rd);
            let result: Result<()> = async {
                loop {
                    let len = match rd.read_i32().await {
                        Ok(len) => len,
                        Err(_) => bail!("connection closed"),
                    };
                    let len = usize::try_from(len).map_err(|_| anyhow!("negative frame length"))?;
                    if len > MAX_RESPONSE {
                        bail!("response frame of {len} bytes");
                    }
                    let mut frame = vec![0u8; len];
                    rd.read_exact(&mut frame).await?;
                    let mut frame = Bytes::from(frame);
                    let Some(f) = lock(&pending).pop_front() else {
                        bail!("a response nobody asked for");
                    };
                    let header = ResponseHeader::decode(
                        &mut frame,
                        f.key.response_header_version(f.version),
                    )?;
                    if header.correlation_id != f.correlation_id {
                        let _ = f.reply.send(Err(anyhow!(
                            "correlation id {} for {} sent",
                            header.correlation_id,
                            f.correlation_id
                        )));
                        bail!("out of order response");
                    }
                    let _ = f.reply.send(Ok(frame));
                }
            }
            .await;
            let e = result.err().unwrap_or_else(|| anyhow!("reader stopped"));
            for f in lock(&pending).drain(..) {
                let _ = f.reply.send(Err(anyhow!("{e}")));
            }
        });

        Conn {
            tx,
            next_id: Arc::new(std::sync::atomic::AtomicI32::new(1)),
            client_id: StrBytes::from_string(client_id.to_owned()),
        }
    }

    /// Sends `request` at `version` and waits for its decoded response.
    pub async fn call<R: Request>(&self, version: i16, request: &R) -> Result<R::Response> {
        let key = ApiKey::try_from(R::KEY).map_err(|_| anyhow!("unknown api key {}", R::KEY))?;
        let correlation_id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut buf = BytesMut::with_capacity(128);
        buf.put_i32(0);
        RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()))
            .encode(&mut buf, key.request_header_version(version))?;
        request.encode(&mut buf, version)?;
        let len = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Queued {
                frame: buf.freeze(),
                in_flight: InFlight {
                    correlation_id,
                    key,
                    version,
                    reply,
                },
            })
            .map_err(|_| anyhow!("connection closed"))?;
        let mut body = rx.await.map_err(|_| anyhow!("connection closed"))??;
        let response = R::Response::decode(&mut body, version)?;
        if body.has_remaining() {
            bail!(
                "{key:?} v{version}: {} bytes after the response",
                body.remaining()
            );
        }
        Ok(response)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
