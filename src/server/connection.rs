//! One client connection: length-prefixed frames in, responses out, one request at a time.
//!
//! The 4-byte length is checked against `socket.request.max.bytes` before anything is
//! allocated for the frame, and the frame buffer grows only as bytes actually arrive, so a
//! client that announces a large frame and sends nothing costs nothing. Kafka serves one request
//! per connection at a time and answers in order; so does this loop, which reads the next frame
//! only once the previous response is written. A framing or decoding failure closes only this
//! connection.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tracing::{debug, trace, warn, Instrument};

use super::codec::{self, Decoded};
use super::dispatch::{self, Outcome};
use crate::broker::Broker;

/// Why a connection stopped reading.
#[derive(Debug, Error)]
pub enum FrameError {
    #[error("frame length {len} outside 0..={max}")]
    TooLarge { len: i64, max: usize },
    #[error("connection closed in the middle of a frame")]
    EofMidFrame,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads one frame. `Ok(None)` is a clean close between frames.
async fn read_frame<R: AsyncReadExt + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    max: usize,
) -> Result<Option<Bytes>, FrameError> {
    let mut len_bytes = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = rd.read(&mut len_bytes[got..]).await?;
        if n == 0 {
            return if got == 0 {
                Ok(None)
            } else {
                Err(FrameError::EofMidFrame)
            };
        }
        got += n;
    }
    let len = i32::from_be_bytes(len_bytes);
    if len < 0 || len as usize > max {
        return Err(FrameError::TooLarge {
            len: len as i64,
            max,
        });
    }
    let len = len as usize;
    buf.clear();
    buf.reserve(len.min(64 * 1024));
    while buf.len() < len {
        if buf.capacity() == buf.len() {
            buf.reserve((len - buf.len()).min(buf.len().max(64 * 1024)));
        }
        let want = len - buf.len();
        let n = (&mut *rd).take(want as u64).read_buf(buf).await?;
        if n == 0 {
            return Err(FrameError::EofMidFrame);
        }
    }
    Ok(Some(buf.split().freeze()))
}

/// Serves one connection until the peer closes it, it misbehaves, or shutdown is signalled
/// (then the request being served is finished first).
pub async fn serve(stream: TcpStream, broker: Arc<Broker>, mut stop: watch::Receiver<bool>) {
    let peer = match stream.peer_addr() {
        Ok(p) => p,
        Err(e) => {
            debug!(error = %e, "peer address unavailable; closing");
            return;
        }
    };
    if let Err(e) = stream.set_nodelay(true) {
        debug!(error = %e, "set_nodelay failed");
    }
    let (mut rd, wr) = stream.into_split();
    let mut wr = BufWriter::new(wr);
    let mut buf = BytesMut::new();
    let max = broker.config.socket_request_max_bytes;
    let idle = std::time::Duration::from_millis(broker.config.connections_max_idle_ms);
    debug!("connection open");
    loop {
        let frame = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => break,
            f = tokio::time::timeout(idle, read_frame(&mut rd, &mut buf, max)) => match f {
                Ok(f) => f,
                Err(_) => {
                    debug!(idle_ms = idle.as_millis() as u64, "idle; closing");
                    break;
                }
            },
        };
        let frame = match frame {
            Ok(Some(f)) => f,
            Ok(None) => {
                debug!("peer closed");
                break;
            }
            Err(FrameError::Io(e)) => {
                debug!(error = %e, "read failed");
                break;
            }
            Err(e) => {
                debug!(error = %e, "bad frame; closing");
                break;
            }
        };
        let out = match codec::decode_request(frame) {
            Ok(Decoded::UnsupportedApiVersions {
                correlation_id,
                version,
            }) => {
                debug!(
                    v = version,
                    corr = correlation_id,
                    "ApiVersions at unsupported version"
                );
                codec::unsupported_api_versions(correlation_id)
            }
            Ok(Decoded::Request { header, body }) => {
                let key = ApiKey::try_from(header.request_api_key).unwrap_or(ApiKey::ApiVersions);
                let version = header.request_api_version;
                let corr = header.correlation_id;
                let span = tracing::debug_span!(
                    "req",
                    api = ?key,
                    v = version,
                    corr,
                    client_id = header.client_id.as_deref().unwrap_or(""),
                );
                // A request that waits (a long-poll Fetch, a JoinGroup or SyncGroup parked by
                // its group) is dropped on shutdown, as Kafka does, instead of holding the
                // process for up to its timeout. Requests that answer at once win the race.
                let outcome = tokio::select! {
                    biased;
                    o = dispatch::dispatch(&broker, &header, peer, body).instrument(span) => o,
                    _ = stop.wait_for(|s| *s) => {
                        debug!(corr, "shutdown while the request waits; closing");
                        break;
                    }
                };
                match outcome {
                    Outcome::Respond(resp) => codec::encode_response(key, version, corr, &resp),
                    Outcome::Silent => {
                        trace!(corr, "no response");
                        continue;
                    }
                    Outcome::Close => break,
                }
            }
            Err(e) => {
                debug!(error = %e, "undecodable request; closing");
                break;
            }
        };
        let bytes = match out {
            Ok(b) => b,
            Err(e) => {
                warn!(error = %e, "response encoding failed; closing");
                break;
            }
        };
        if let Err(e) = async {
            wr.write_all(&bytes).await?;
            wr.flush().await
        }
        .await
        {
            debug!(error = %e, "write failed");
            break;
        }
    }
    let _ = wr.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(bytes: &[u8], max: usize) -> Result<Option<Bytes>, FrameError> {
        let mut rd = bytes;
        read_frame(&mut rd, &mut BytesMut::new(), max).await
    }

    #[tokio::test]
    async fn frames_and_their_failures() {
        assert!(read(b"", 100).await.unwrap().is_none());
        assert_eq!(
            read(b"\x00\x00\x00\x03abc", 100).await.unwrap().unwrap(),
            Bytes::from_static(b"abc")
        );
        assert!(matches!(
            read(b"\x00\x00", 100).await,
            Err(FrameError::EofMidFrame)
        ));
        assert!(matches!(
            read(b"\x00\x00\x00\x05ab", 100).await,
            Err(FrameError::EofMidFrame)
        ));
        assert!(matches!(
            read(b"\x00\x00\x00\x65", 100).await,
            Err(FrameError::TooLarge { len: 101, .. })
        ));
        assert!(matches!(
            read(b"\xff\xff\xff\xff", 100).await,
            Err(FrameError::TooLarge { .. })
        ));
    }

    #[tokio::test]
    async fn large_frame_arrives_whole() {
        let mut data = (300_000i32).to_be_bytes().to_vec();
        data.extend((0..300_000).map(|i| i as u8));
        let f = read(&data, 1 << 20).await.unwrap().unwrap();
        assert_eq!(f.len(), 300_000);
        assert_eq!(&f[..], &data[4..]);
    }
}
