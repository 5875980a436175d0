//! Kafka's request framing: a 4-byte big-endian length, then that many bytes.
//!
//! The length is checked against `socket.request.max.bytes` before anything is allocated for
//! the frame, and the frame buffer grows only as bytes actually arrive, so a client that
//! announces a large frame and sends nothing costs nothing.

use bytes::{Bytes, BytesMut};
use thiserror::Error;
use tokio::io::AsyncReadExt;

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
pub(super) fn complete_frame(buf: &[u8], max: usize) -> Result<Option<usize>, FrameError> {
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
pub(crate) async fn read_frame<R: AsyncReadExt + Unpin>(
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

    #[tokio::test]
    async fn large_frame_arrives_whole() {
        let mut data = (300_000i32).to_be_bytes().to_vec();
        data.extend((0..300_000).map(|i| i as u8));
        let f = read(&data, 1 << 20).await.unwrap().unwrap();
        assert_eq!(f.len(), 300_000);
        assert_eq!(&f[..], &data[4..]);
    }
}
