//! One client connection: length-prefixed frames in, responses out, one request at a time.
//!
//! The 4-byte length is checked against `socket.request.max.bytes` before anything is
//! allocated for the frame, and the frame buffer grows only as bytes actually arrive, so a
//! client that announces a large frame and sends nothing costs nothing. Kafka serves one request
//! per connection at a time and answers in order; so does this loop. Requests a client
//! pipelines arrive in one read and their answers leave in one write: a response is flushed
//! when no further complete request is buffered, or when the next one may wait (JoinGroup,
//! SyncGroup, Fetch). A framing or decoding failure closes only this connection.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tracing::{debug, trace, warn, Instrument};

use super::codec::{self, Decoded};
use crate::api::{self, Outcome};
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

/// Bytes read at once when the buffer holds no partial frame: a few pipelined requests.
const READ_CHUNK: usize = 4096;

/// The length of the complete frame at the start of `buf`, if one is there.
///
/// # Errors
/// [`FrameError::TooLarge`] for a length prefix outside `0..=max`.
fn complete_frame(buf: &[u8], max: usize) -> Result<Option<usize>, FrameError> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(None);
    };
    let len = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    if len < 0 || len as usize > max {
        return Err(FrameError::TooLarge {
            len: len as i64,
            max,
        });
    }
    let len = len as usize;
    Ok((buf.len() >= 4 + len).then_some(len))
}

/// Reads one frame into `buf`, which keeps whatever arrived after it (pipelined requests), so
/// a burst of requests costs one read. `Ok(None)` is a clean close between frames.
///
/// The length prefix is checked before anything is reserved for the frame, and the buffer
/// grows only as bytes actually arrive (at most 64 KiB beyond them at a time), so a client that
/// announces a large frame and sends nothing costs nothing.
async fn read_frame<R: AsyncReadExt + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    max: usize,
) -> Result<Option<Bytes>, FrameError> {
    loop {
        if let Some(len) = complete_frame(buf, max)? {
            let _ = buf.split_to(4);
            return Ok(Some(buf.split_to(len).freeze()));
        }
        let missing = match buf.get(..4) {
            // The prefix was checked by complete_frame.
            Some(p) => 4 + i32::from_be_bytes([p[0], p[1], p[2], p[3]]) as usize - buf.len(),
            None => READ_CHUNK,
        };
        buf.reserve(missing.clamp(READ_CHUNK, 64 * 1024));
        if rd.read_buf(buf).await? == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(FrameError::EofMidFrame)
            };
        }
    }
}

/// Whether the next buffered request is complete and answered without waiting, so the
/// responses so far may wait for it and leave in one write. A request that may wait (a
/// JoinGroup or SyncGroup parked by its group, a long-poll Fetch) never holds answers back.
fn next_is_quick(buf: &[u8], max: usize) -> bool {
    const WAITING: [i16; 3] = [
        ApiKey::Fetch as i16,
        ApiKey::JoinGroup as i16,
        ApiKey::SyncGroup as i16,
    ];
    matches!(complete_frame(buf, max), Ok(Some(len)) if len >= 2
        && !WAITING.contains(&i16::from_be_bytes([buf[4], buf[5]])))
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
                    o = api::dispatch(&broker, &header, peer, body).instrument(span) => o,
                    _ = stop.wait_for(|s| *s) => {
                        debug!(corr, "shutdown while the request waits; closing");
                        break;
                    }
                };
                match outcome {
                    Outcome::Respond(resp) => codec::encode_response(key, version, corr, &resp),
                    Outcome::Silent => {
                        trace!(corr, "no response");
                        // Answers held back for this request leave now.
                        if !next_is_quick(&buf, max) && wr.flush().await.is_err() {
                            break;
                        }
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
            if next_is_quick(&buf, max) {
                Ok(())
            } else {
                wr.flush().await
            }
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
    async fn pipelined_frames_come_out_one_by_one_from_one_read() {
        let mut rd: &[u8] = b"\x00\x00\x00\x02ab\x00\x00\x00\x01c\x00\x00";
        let mut buf = BytesMut::new();
        let first = read_frame(&mut rd, &mut buf, 100).await.unwrap().unwrap();
        assert_eq!(&first[..], b"ab");
        assert!(rd.is_empty(), "everything was read at once");
        let second = read_frame(&mut rd, &mut buf, 100).await.unwrap().unwrap();
        assert_eq!(&second[..], b"c");
        assert!(matches!(
            read_frame(&mut rd, &mut buf, 100).await,
            Err(FrameError::EofMidFrame)
        ));
    }

    #[test]
    fn answers_wait_only_for_a_complete_quick_request() {
        let frame = |key: ApiKey| {
            let mut f = 8i32.to_be_bytes().to_vec();
            f.extend_from_slice(&(key as i16).to_be_bytes());
            f.extend_from_slice(&[0; 6]);
            f
        };
        assert!(next_is_quick(&frame(ApiKey::Heartbeat), 100));
        assert!(next_is_quick(&frame(ApiKey::OffsetCommit), 100));
        assert!(!next_is_quick(&frame(ApiKey::JoinGroup), 100));
        assert!(!next_is_quick(&frame(ApiKey::SyncGroup), 100));
        assert!(!next_is_quick(&frame(ApiKey::Fetch), 100));
        assert!(
            !next_is_quick(&frame(ApiKey::Heartbeat)[..9], 100),
            "incomplete"
        );
        assert!(!next_is_quick(b"", 100));
        assert!(
            !next_is_quick(b"\xff\xff\xff\xff", 100),
            "a bad length flushes"
        );
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
