//! The records of a v2 batch, walked without building them: what Kafka's `LogValidator` checks
//! when it decodes every record of a produced batch (`DefaultRecord.readFrom`,
//! `DefaultRecordBatch.RecordIterator`), and the offset and timestamp of each record for
//! ListOffsets.
//!
//! A record (all lengths zigzag varints, as in Kafka):
//!
//! ```text
//! length, attributes (i8), timestamp delta (varlong), offset delta, key length, key,
//! value length, value, header count, headers (key length, key, value length, value)...
//! ```
//!
//! Checks, all INVALID_RECORD as in Kafka: a varint longer than 5 bytes (varlong: 10); a record
//! length that is negative or runs past the bytes left; record `i` with an offset delta other
//! than `i` (deltas `0..=last offset delta`, in order); a key, value or header running past the
//! record; a negative header count, or one larger than the bytes left; a negative header key
//! length; a record whose fields do not fill exactly its length; fewer records than the header's
//! count, or bytes left after that many.
//!
//! Compressed payloads are decompressed as a stream and walked as they come, through a small
//! buffer: nothing is allocated from a length the peer sent, except one snappy block (at most the
//! cap). The decompressed size is capped (`max_decompressed`, `socket.request.max.bytes` in
//! koord): a batch that would decompress to more is refused as MESSAGE_TOO_LARGE once the cap is
//! reached, so a decompression bomb costs at most `max_decompressed` bytes of CPU work and no
//! memory in proportion. Kafka has no such cap. A payload that does not decompress is
//! CORRUPT_MESSAGE; one that ends early (truncated stream) is INVALID_RECORD, as Kafka's
//! "premature EOF".

use std::io::{self, BufRead, BufReader, Read};

/// Why the records of a batch do not walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalkError {
    /// The records are malformed: INVALID_RECORD.
    Invalid(String),
    /// The payload does not decompress: CORRUPT_MESSAGE.
    Corrupt(String),
    /// The payload decompresses to more than the cap: MESSAGE_TOO_LARGE.
    TooLarge(usize),
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::Invalid(m) => write!(f, "invalid record: {m}"),
            WalkError::Corrupt(m) => write!(f, "corrupt compressed payload: {m}"),
            WalkError::TooLarge(cap) => write!(f, "records decompress to more than {cap} bytes"),
        }
    }
}

/// Why a walk stopped, kept small (it travels with every byte read); turned into a
/// [`WalkError`] with the record's index once the walk has failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fail {
    /// The records (decompressed) end before the record does.
    End,
    /// The decompressed bytes reached the cap.
    Cap,
    /// The decompressor failed; the error is kept by the [`Stream`].
    Io,
    /// A record field is wrong.
    Bad(Why),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    LongVarint,
    LongVarlong,
    NegativeLength,
    RecordPastEnd,
    FieldsPastRecord,
    OffsetDelta,
    KeyPastRecord,
    ValuePastRecord,
    NegativeHeaderCount,
    TooManyHeaders,
    NegativeHeaderKey,
    HeaderPastRecord,
    BytesPastFields,
}

impl Why {
    fn message(self) -> &'static str {
        match self {
            Why::LongVarint => "a varint is longer than 5 bytes",
            Why::LongVarlong => "a varlong is longer than 10 bytes",
            Why::NegativeLength => "negative record length",
            Why::RecordPastEnd => "its length runs past the bytes left",
            Why::FieldsPastRecord => "its fields run past its length",
            Why::OffsetDelta => "its offset delta is not its index in the batch",
            Why::KeyPastRecord => "its key runs past its length",
            Why::ValuePastRecord => "its value runs past its length",
            Why::NegativeHeaderCount => "invalid negative number of record headers",
            Why::TooManyHeaders => "its header count is larger than the bytes left of it",
            Why::NegativeHeaderKey => "invalid negative header key size",
            Why::HeaderPastRecord => "a header runs past its length",
            Why::BytesPastFields => "it has bytes past its fields",
        }
    }
}

/// Decompressed (or plain) record bytes, read one at a time.
trait Source {
    /// The next byte; [`Fail::End`] at the end.
    fn byte(&mut self) -> Result<u8, Fail>;
    /// Skips `n` bytes; [`Fail::End`] if fewer are left.
    fn skip(&mut self, n: usize) -> Result<(), Fail>;
    /// Whether every byte has been read.
    fn at_end(&mut self) -> Result<bool, Fail>;
    /// The bytes left, when known without reading them.
    fn left(&self) -> Option<usize>;
    /// What made the last [`Fail::Io`].
    fn io_error(&mut self) -> Option<io::Error> {
        None
    }
}

/// An uncompressed payload, walked in place.
struct Slice<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Source for Slice<'_> {
    #[inline]
    fn byte(&mut self) -> Result<u8, Fail> {
        let b = *self.buf.get(self.pos).ok_or(Fail::End)?;
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    fn skip(&mut self, n: usize) -> Result<(), Fail> {
        if n > self.buf.len() - self.pos {
            return Err(Fail::End);
        }
        self.pos += n;
        Ok(())
    }

    fn at_end(&mut self) -> Result<bool, Fail> {
        Ok(self.pos == self.buf.len())
    }

    #[inline]
    fn left(&self) -> Option<usize> {
        Some(self.buf.len() - self.pos)
    }
}

/// A decompressing reader, counted against the cap.
struct Stream<R> {
    r: R,
    read: usize,
    cap: usize,
    error: Option<io::Error>,
}

/// A decompressor's signal that its output would pass the cap.
#[derive(Debug)]
struct CapReached;

impl std::fmt::Display for CapReached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("decompressed size cap reached")
    }
}

impl std::error::Error for CapReached {}

impl<R: BufRead> Stream<R> {
    fn new(r: R, cap: usize) -> Stream<R> {
        Stream {
            r,
            read: 0,
            cap,
            error: None,
        }
    }

    fn fail(&mut self, e: io::Error) -> Fail {
        if e.get_ref().is_some_and(|inner| inner.is::<CapReached>()) {
            Fail::Cap
        } else {
            self.error = Some(e);
            Fail::Io
        }
    }

    /// At least one buffered byte, or why not (at the end, or past the cap).
    fn fill(&mut self) -> Result<usize, Fail> {
        if self.read >= self.cap {
            return Err(Fail::Cap);
        }
        match self.r.fill_buf() {
            Ok([]) => Err(Fail::End),
            Ok(buf) => Ok(buf.len()),
            Err(e) => Err(self.fail(e)),
        }
    }
}

impl<R: BufRead> Source for Stream<R> {
    fn byte(&mut self) -> Result<u8, Fail> {
        self.fill()?;
        let b = self.r.fill_buf().map_err(|_| Fail::End)?[0];
        self.r.consume(1);
        self.read += 1;
        Ok(b)
    }

    fn skip(&mut self, mut n: usize) -> Result<(), Fail> {
        while n > 0 {
            let room = self.cap - self.read.min(self.cap);
            let step = self.fill()?.min(n).min(room);
            self.r.consume(step);
            self.read += step;
            n -= step;
        }
        Ok(())
    }

    fn at_end(&mut self) -> Result<bool, Fail> {
        // Not counted against the cap: anything here is an error anyway.
        match self.r.fill_buf() {
            Ok(buf) => Ok(buf.is_empty()),
            Err(e) => Err(self.fail(e)),
        }
    }

    fn left(&self) -> Option<usize> {
        None
    }

    fn io_error(&mut self) -> Option<io::Error> {
        self.error.take()
    }
}

/// One record's body: reads are counted against its declared length.
struct Body<'s, S> {
    src: &'s mut S,
    left: usize,
}

impl<S: Source> Body<'_, S> {
    #[inline]
    fn byte(&mut self) -> Result<u8, Fail> {
        if self.left == 0 {
            return Err(Fail::Bad(Why::FieldsPastRecord));
        }
        self.left -= 1;
        self.src.byte()
    }

    #[inline]
    fn skip(&mut self, n: usize, why: Why) -> Result<(), Fail> {
        if n > self.left {
            return Err(Fail::Bad(why));
        }
        self.left -= n;
        self.src.skip(n)
    }

    /// A length field: `None` for a negative (null) length.
    #[inline]
    fn length(&mut self) -> Result<Option<usize>, Fail> {
        let n = varint(|| self.byte())?;
        Ok(usize::try_from(n).ok())
    }
}

/// Kafka's `ByteUtils.readVarint`: at most 5 bytes, the bits past 32 dropped, zigzag decoded.
#[inline]
fn varint(mut byte: impl FnMut() -> Result<u8, Fail>) -> Result<i32, Fail> {
    let mut value: u32 = 0;
    let mut shift = 0;
    loop {
        let b = byte()?;
        if b & 0x80 == 0 {
            value |= u32::from(b) << shift;
            break;
        }
        value |= u32::from(b & 0x7f) << shift;
        shift += 7;
        if shift > 28 {
            return Err(Fail::Bad(Why::LongVarint));
        }
    }
    Ok(((value >> 1) as i32) ^ -((value & 1) as i32))
}

/// Kafka's `ByteUtils.readVarlong`: at most 10 bytes, zigzag decoded.
#[inline]
fn varlong(mut byte: impl FnMut() -> Result<u8, Fail>) -> Result<i64, Fail> {
    let mut value: u64 = 0;
    let mut shift = 0;
    loop {
        let b = byte()?;
        if b & 0x80 == 0 {
            value |= u64::from(b) << shift;
            break;
        }
        value |= u64::from(b & 0x7f) << shift;
        shift += 7;
        if shift > 63 {
            return Err(Fail::Bad(Why::LongVarlong));
        }
    }
    Ok(((value >> 1) as i64) ^ -((value & 1) as i64))
}

/// Reads record `index`: `(offset delta, timestamp delta)`.
#[inline]
fn record<S: Source>(src: &mut S, index: i32) -> Result<(i32, i64), Fail> {
    let length =
        usize::try_from(varint(|| src.byte())?).map_err(|_| Fail::Bad(Why::NegativeLength))?;
    if src.left().is_some_and(|left| length > left) {
        return Err(Fail::Bad(Why::RecordPastEnd));
    }
    let mut body = Body { src, left: length };
    let _attributes = body.byte()?;
    let timestamp_delta = varlong(|| body.byte())?;
    let offset_delta = varint(|| body.byte())?;
    if offset_delta != index {
        return Err(Fail::Bad(Why::OffsetDelta));
    }
    if let Some(n) = body.length()? {
        body.skip(n, Why::KeyPastRecord)?;
    }
    if let Some(n) = body.length()? {
        body.skip(n, Why::ValuePastRecord)?;
    }
    let headers = varint(|| body.byte())?;
    let headers = usize::try_from(headers).map_err(|_| Fail::Bad(Why::NegativeHeaderCount))?;
    if headers > body.left {
        return Err(Fail::Bad(Why::TooManyHeaders));
    }
    for _ in 0..headers {
        let key = body.length()?.ok_or(Fail::Bad(Why::NegativeHeaderKey))?;
        body.skip(key, Why::HeaderPastRecord)?;
        if let Some(n) = body.length()? {
            body.skip(n, Why::HeaderPastRecord)?;
        }
    }
    if body.left != 0 {
        return Err(Fail::Bad(Why::BytesPastFields));
    }
    Ok((offset_delta, timestamp_delta))
}

/// Walks `count` records, calling `each(offset delta, timestamp delta)` for every one.
fn walk_source<S: Source>(
    src: &mut S,
    count: i32,
    cap: usize,
    mut each: impl FnMut(i32, i64),
) -> Result<(), WalkError> {
    let mut index = 0;
    let result = (|| {
        while index < count {
            let (offset_delta, timestamp_delta) = record(src, index)?;
            each(offset_delta, timestamp_delta);
            index += 1;
        }
        if src.at_end()? {
            Ok(())
        } else {
            Err(Fail::Bad(Why::BytesPastFields))
        }
    })();
    result.map_err(|fail| match fail {
        Fail::Cap => WalkError::TooLarge(cap),
        Fail::Io => match src.io_error() {
            Some(e) if e.kind() == io::ErrorKind::UnexpectedEof => WalkError::Invalid(format!(
                "premature end of the compressed records at record {index}: {e}"
            )),
            Some(e) => WalkError::Corrupt(e.to_string()),
            None => WalkError::Corrupt("decompression failed".into()),
        },
        Fail::End => WalkError::Invalid(format!(
            "premature end of the records at record {index} of {count}"
        )),
        Fail::Bad(Why::BytesPastFields) if index == count => WalkError::Invalid(format!(
            "bytes left after the {count} records the batch declares"
        )),
        Fail::Bad(why) => WalkError::Invalid(format!("record {index}: {}", why.message())),
    })
}

/// Snappy as Kafka's producers write it: xerial framing (a 16-byte header, then blocks each
/// prefixed with its compressed length), or raw snappy without the header. A block is
/// decompressed whole, into a buffer of the length it declares once that length is checked
/// against what the cap leaves.
struct Snappy<'a> {
    rest: &'a [u8],
    framed: bool,
    block: Vec<u8>,
    pos: usize,
    produced: usize,
    cap: usize,
}

const SNAPPY_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";

impl<'a> Snappy<'a> {
    fn new(payload: &'a [u8], cap: usize) -> Snappy<'a> {
        let framed = payload.starts_with(SNAPPY_MAGIC);
        Snappy {
            rest: if framed {
                &payload[SNAPPY_MAGIC.len()..]
            } else {
                payload
            },
            framed,
            block: Vec::new(),
            pos: 0,
            produced: 0,
            cap,
        }
    }

    fn next_block(&mut self) -> io::Result<()> {
        let compressed = if self.framed {
            let (len, rest) = self
                .rest
                .split_first_chunk::<4>()
                .ok_or_else(|| io::Error::other("truncated snappy block length"))?;
            let len = u32::from_be_bytes(*len) as usize;
            if len > rest.len() {
                return Err(io::Error::other("snappy block runs past the payload"));
            }
            let (block, rest) = rest.split_at(len);
            self.rest = rest;
            block
        } else {
            std::mem::take(&mut self.rest)
        };
        let len = snap::raw::decompress_len(compressed).map_err(io::Error::other)?;
        if len > self.cap - self.produced.min(self.cap) {
            return Err(io::Error::other(CapReached));
        }
        self.block.clear();
        self.block.resize(len, 0);
        snap::raw::Decoder::new()
            .decompress(compressed, &mut self.block)
            .map_err(io::Error::other)?;
        self.pos = 0;
        self.produced += len;
        Ok(())
    }
}

impl Read for Snappy<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = {
            let buf = self.fill_buf()?;
            let n = buf.len().min(out.len());
            out[..n].copy_from_slice(&buf[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Snappy<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.pos == self.block.len() && !self.rest.is_empty() {
            self.next_block()?;
        }
        Ok(&self.block[self.pos..])
    }

    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.block.len());
    }
}

/// The read buffer between a decompressor and the walker.
const CHUNK: usize = 32 * 1024;

/// The largest zstd window accepted: enough for any frame whose content fits the cap.
fn zstd_window_log(cap: usize) -> u32 {
    let bits = usize::BITS - cap.saturating_sub(1).leading_zeros();
    bits.clamp(22, 27)
}

/// Walks the `count` records of a batch payload (the bytes after the 61-byte header) compressed
/// with `codec` (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd), calling `each(offset delta,
/// timestamp delta)` per record. A compressed payload may decompress to `max_decompressed`
/// bytes at most.
///
/// # Errors
/// The first problem, as a [`WalkError`].
pub fn walk(
    payload: &[u8],
    codec: i16,
    count: i32,
    max_decompressed: usize,
    each: impl FnMut(i32, i64),
) -> Result<(), WalkError> {
    fn stream<R: BufRead>(
        r: R,
        cap: usize,
        count: i32,
        each: impl FnMut(i32, i64),
    ) -> Result<(), WalkError> {
        walk_source(&mut Stream::new(r, cap), count, cap, each)
    }
    let cap = max_decompressed;
    match codec {
        0 => walk_source(
            &mut Slice {
                buf: payload,
                pos: 0,
            },
            count,
            cap,
            each,
        ),
        1 => stream(
            BufReader::with_capacity(CHUNK, flate2::bufread::MultiGzDecoder::new(payload)),
            cap,
            count,
            each,
        ),
        2 => stream(Snappy::new(payload, cap), cap, count, each),
        3 => {
            let d = lz4::Decoder::new(payload).map_err(|e| WalkError::Corrupt(e.to_string()))?;
            stream(BufReader::with_capacity(CHUNK, d), cap, count, each)
        }
        4 => {
            let mut d = zstd::stream::read::Decoder::with_buffer(payload)
                .map_err(|e| WalkError::Corrupt(e.to_string()))?;
            d.window_log_max(zstd_window_log(cap))
                .map_err(|e| WalkError::Corrupt(e.to_string()))?;
            stream(BufReader::with_capacity(CHUNK, d), cap, count, each)
        }
        other => Err(WalkError::Corrupt(format!(
            "unknown compression codec {other}"
        ))),
    }
}

/// Decompresses a whole payload compressed with `codec` (as [`walk`] numbers them, Kafka's
/// framing of each), to at most `cap` bytes: what a client's pushed telemetry carries.
///
/// # Errors
/// [`WalkError::Corrupt`] for a payload that does not decompress, [`WalkError::TooLarge`] past
/// the cap.
pub fn decompress(payload: &[u8], codec: i16, cap: usize) -> Result<Vec<u8>, WalkError> {
    fn all(r: impl Read, cap: usize) -> Result<Vec<u8>, WalkError> {
        let mut out = Vec::new();
        r.take(cap as u64 + 1).read_to_end(&mut out).map_err(|e| {
            match e.get_ref().is_some_and(|e| e.is::<CapReached>()) {
                true => WalkError::TooLarge(cap),
                false => WalkError::Corrupt(e.to_string()),
            }
        })?;
        if out.len() > cap {
            return Err(WalkError::TooLarge(cap));
        }
        Ok(out)
    }
    let corrupt = |e: io::Error| WalkError::Corrupt(e.to_string());
    match codec {
        0 => all(payload, cap),
        1 => all(flate2::bufread::MultiGzDecoder::new(payload), cap),
        2 => all(Snappy::new(payload, cap), cap),
        3 => all(lz4::Decoder::new(payload).map_err(corrupt)?, cap),
        4 => {
            let mut d = zstd::stream::read::Decoder::with_buffer(payload).map_err(corrupt)?;
            d.window_log_max(zstd_window_log(cap)).map_err(corrupt)?;
            all(d, cap)
        }
        other => Err(WalkError::Corrupt(format!(
            "unknown compression codec {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::tests::{batch, Spec};
    use crate::log::batch::{validate_produce, validate_produce_within, HEADER_SIZE};
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    use kafka_protocol::ResponseError;

    const CODECS: [Compression; 4] = [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    fn put_varint(out: &mut Vec<u8>, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            out.push((z as u8) | 0x80);
            z >>= 7;
        }
        out.push(z as u8);
    }

    /// One record as Kafka encodes it, with no key, the given value and headers.
    fn record(offset_delta: i64, value: &[u8], headers: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut body = vec![0u8]; // attributes
        put_varint(&mut body, 5); // timestamp delta
        put_varint(&mut body, offset_delta);
        put_varint(&mut body, -1); // null key
        put_varint(&mut body, value.len() as i64);
        body.extend_from_slice(value);
        put_varint(&mut body, headers.len() as i64);
        for (k, v) in headers {
            put_varint(&mut body, k.len() as i64);
            body.extend_from_slice(k);
            put_varint(&mut body, v.len() as i64);
            body.extend_from_slice(v);
        }
        let mut out = Vec::new();
        put_varint(&mut out, body.len() as i64);
        out.extend_from_slice(&body);
        out
    }

    /// An uncompressed batch around `payload`, declaring `count` records (last offset delta
    /// `count - 1`), with a correct length and CRC.
    fn raw_batch(payload: &[u8], count: i32) -> Vec<u8> {
        let mut b = batch(Spec {
            records: 1,
            ..Spec::default()
        })[..HEADER_SIZE]
            .to_vec();
        b.extend_from_slice(payload);
        let len = (b.len() - 12) as i32;
        b[8..12].copy_from_slice(&len.to_be_bytes());
        b[23..27].copy_from_slice(&(count - 1).to_be_bytes());
        b[57..61].copy_from_slice(&count.to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    fn code(b: &[u8]) -> Option<ResponseError> {
        validate_produce(b, 9).err().map(|e| e.code())
    }

    fn encode(records: &[Record], compression: Compression) -> Bytes {
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            records,
            &RecordEncodeOptions {
                version: 2,
                compression,
            },
        )
        .unwrap();
        buf.freeze()
    }

    fn plain_record(offset: i64, value: Bytes) -> Record {
        let mut headers = IndexMap::new();
        headers.insert(
            StrBytes::from_static_str("h"),
            Some(Bytes::from_static(b"v")),
        );
        headers.insert(StrBytes::from_static_str("null"), None);
        Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset,
            sequence: offset as i32 - 1,
            timestamp: 1_000 + offset,
            key: (offset % 2 == 0).then(|| Bytes::from(format!("k{offset}"))),
            value: Some(value),
            headers,
            delete_horizon: false,
        }
    }

    #[test]
    fn hand_built_records_are_accepted() {
        let mut p = record(0, b"abc", &[(b"h", b"v")]);
        p.extend(record(1, b"", &[]));
        assert_eq!(code(&raw_batch(&p, 2)), None);
    }

    #[test]
    fn forged_header_count_is_invalid() {
        // Header count 0x7fffffff, as in the wire test: varint fe ff ff ff 0f.
        let mut body = vec![0u8, 10, 0, 1, 2, b'v'];
        body.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]);
        let mut p = vec![body.len() as u8 * 2];
        p.extend_from_slice(&body);
        assert_eq!(code(&raw_batch(&p, 1)), Some(ResponseError::InvalidRecord));
        // Negative header count, and a negative header key length.
        let mut neg = record(0, b"v", &[]);
        *neg.last_mut().unwrap() = 1; // zigzag -1
        assert_eq!(
            code(&raw_batch(&neg, 1)),
            Some(ResponseError::InvalidRecord)
        );
        let mut p = record(0, b"v", &[(b"k", b"")]);
        let at = p.len() - 4; // header key length
        p[at] = 1;
        assert_eq!(code(&raw_batch(&p, 1)), Some(ResponseError::InvalidRecord));
        // A varint longer than 5 bytes.
        let mut p = vec![12u8, 0, 10, 0, 1, 2, b'v'];
        p.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]);
        p[0] = ((p.len() - 1) * 2) as u8;
        assert_eq!(code(&raw_batch(&p, 1)), Some(ResponseError::InvalidRecord));
    }

    #[test]
    fn record_count_must_match_the_records() {
        let three: Vec<u8> = (0..3).flat_map(|i| record(i, b"val", &[])).collect();
        assert_eq!(code(&raw_batch(&three, 3)), None);
        // Fewer records than declared, and more.
        assert_eq!(
            code(&raw_batch(&three, 4)),
            Some(ResponseError::InvalidRecord)
        );
        assert_eq!(
            code(&raw_batch(&three, 2)),
            Some(ResponseError::InvalidRecord)
        );
        // The same on a compressed batch: the count edited after encoding.
        for c in CODECS {
            let b = encode(
                &(0..3)
                    .map(|i| plain_record(i, Bytes::from_static(b"x")))
                    .collect::<Vec<_>>(),
                c,
            );
            for count in [2i32, 4] {
                let mut m = b.to_vec();
                m[23..27].copy_from_slice(&(count - 1).to_be_bytes());
                m[57..61].copy_from_slice(&count.to_be_bytes());
                let crc = crc32c::crc32c(&m[21..]);
                m[17..21].copy_from_slice(&crc.to_be_bytes());
                assert_eq!(
                    code(&m),
                    Some(ResponseError::InvalidRecord),
                    "{c:?} {count}"
                );
            }
        }
    }

    #[test]
    fn offset_deltas_must_run_in_order() {
        for deltas in [[1, 0, 2], [0, 2, 1], [0, 1, 1], [0, 1, 3], [0, 1, -1]] {
            let p: Vec<u8> = deltas.iter().flat_map(|d| record(*d, b"v", &[])).collect();
            assert_eq!(
                code(&raw_batch(&p, 3)),
                Some(ResponseError::InvalidRecord),
                "{deltas:?}"
            );
        }
    }

    #[test]
    fn truncated_or_overlong_records_are_invalid() {
        let two: Vec<u8> = (0..2)
            .flat_map(|i| record(i, b"value", &[(b"h", b"x")]))
            .collect();
        let first = record(0, b"value", &[(b"h", b"x")]).len();
        for cut in 1..two.len() {
            let b = raw_batch(&two[..cut], 2);
            assert_eq!(code(&b), Some(ResponseError::InvalidRecord), "cut at {cut}");
        }
        // A record length one short or one long of its fields.
        for delta in [-2i64, 2] {
            let mut p = two.clone();
            let len = i64::from(p[0] / 2) + delta / 2;
            p[0] = (len * 2) as u8;
            assert_eq!(code(&raw_batch(&p, 2)), Some(ResponseError::InvalidRecord));
        }
        // A value length past the record.
        let mut p = record(0, b"value", &[]);
        p[5] = 40; // value length 20
        assert_eq!(code(&raw_batch(&p, 1)), Some(ResponseError::InvalidRecord));
        assert!(first < two.len());
    }

    #[test]
    fn valid_compressed_batches_of_every_codec() {
        for c in CODECS {
            let records: Vec<Record> = (0..200)
                .map(|i| plain_record(i, Bytes::from(vec![b'a' + (i % 26) as u8; 300])))
                .collect();
            let b = encode(&records, c);
            let v = validate_produce(&b, 9).unwrap_or_else(|e| panic!("{c:?}: {e}"));
            let stored = crate::log::batch::rewrite(v.bytes, 50);
            let ts = crate::log::batch::record_timestamps(&stored, 1 << 20).unwrap();
            assert_eq!(ts.len(), 200, "{c:?}");
            assert_eq!(ts[199], (249, 1_199), "{c:?}");
        }
    }

    #[test]
    fn whole_payloads_decompress_within_the_cap() {
        use std::io::Write;
        let plain = b"telemetry ".repeat(1000);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&plain).unwrap();
        let gz = gz.finish().unwrap();
        let mut lz = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
        lz.write_all(&plain).unwrap();
        let (lz, done) = lz.finish();
        done.unwrap();
        let zs = zstd::encode_all(&plain[..], 3).unwrap();
        for (codec, payload) in [(0, plain.clone()), (1, gz), (3, lz), (4, zs)] {
            assert_eq!(
                decompress(&payload, codec, 1 << 20).unwrap(),
                plain,
                "{codec}"
            );
            assert_eq!(
                decompress(&payload, codec, plain.len() - 1),
                Err(WalkError::TooLarge(plain.len() - 1)),
                "{codec}"
            );
        }
        assert!(matches!(
            decompress(b"nope", 1, 100),
            Err(WalkError::Corrupt(_))
        ));
        assert!(matches!(
            decompress(b"nope", 9, 100),
            Err(WalkError::Corrupt(_))
        ));
    }

    #[test]
    fn decompression_bombs_stop_at_the_cap() {
        // One record whose value is 10 MiB of zeros: about 10 KiB compressed with gzip.
        let bomb = vec![plain_record(0, Bytes::from(vec![0u8; 10 << 20]))];
        for c in CODECS {
            let b = encode(&bomb, c);
            assert!(b.len() < 1 << 20, "{c:?} compresses to {}", b.len());
            let err = validate_produce_within(&b, 9, 1 << 20).unwrap_err();
            assert_eq!(err.code(), ResponseError::MessageTooLarge, "{c:?}: {err}");
            let stored = crate::log::batch::rewrite(&b, 0);
            assert!(crate::log::batch::record_timestamps(&stored, 1 << 20).is_err());
            // Under a cap that fits it, the same batch is fine.
            assert!(validate_produce_within(&b, 9, 11 << 20).is_ok(), "{c:?}");
        }
        // The cap is on the stream: one byte short of the records is refused too.
        let small = encode(
            &[plain_record(0, Bytes::from(vec![0u8; 1000]))],
            Compression::Gzip,
        );
        let size = {
            let mut n = 0;
            walk(&small[HEADER_SIZE..], 1, 1, usize::MAX, |_, _| n += 1).unwrap();
            assert_eq!(n, 1);
            (1..2000)
                .find(|cap| walk(&small[HEADER_SIZE..], 1, 1, *cap, |_, _| {}).is_ok())
                .unwrap()
        };
        assert!(size > 1000);
        assert_eq!(
            walk(&small[HEADER_SIZE..], 1, 1, size - 1, |_, _| {}),
            Err(WalkError::TooLarge(size - 1))
        );
    }

    #[test]
    fn undecompressable_payloads_are_corrupt_and_truncated_ones_refused() {
        for (codec, c) in (1i16..=4).zip(CODECS) {
            let b = encode(
                &(0..20)
                    .map(|i| plain_record(i, Bytes::from(vec![b'z'; 100])))
                    .collect::<Vec<_>>(),
                c,
            );
            let payload = &b[HEADER_SIZE..];
            let garbage = vec![0x5au8; payload.len()];
            assert!(
                matches!(
                    walk(&garbage, codec, 20, 1 << 20, |_, _| {}),
                    Err(WalkError::Corrupt(_) | WalkError::Invalid(_))
                ),
                "{c:?}"
            );
            // (Cut only inside the records: lz4 takes a frame missing its end mark as ended.)
            for cut in [0, payload.len() / 2] {
                assert!(
                    walk(&payload[..cut], codec, 20, 1 << 20, |_, _| {}).is_err(),
                    "{c:?} cut at {cut}"
                );
            }
        }
        // A gzip stream with a broken deflate body is CORRUPT_MESSAGE.
        let mut m = encode(
            &[plain_record(0, Bytes::from(vec![b'q'; 500]))],
            Compression::Gzip,
        )
        .to_vec();
        for byte in &mut m[HEADER_SIZE + 10..HEADER_SIZE + 14] {
            *byte = 0xff;
        }
        let crc = crc32c::crc32c(&m[21..]);
        m[17..21].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(code(&m), Some(ResponseError::CorruptMessage));
    }
}
