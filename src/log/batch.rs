//! The v2 record batch header (magic 2), the only format koord stores.
//!
//! Only the 61-byte header is parsed here ([`super::records`] walks the records); batches are
//! stored as the producer sent them. Layout (big-endian, offsets in bytes):
//!
//! ```text
//!  0 base offset (i64)           27 first timestamp (i64)
//!  8 batch length (i32)          35 max timestamp (i64)
//! 12 partition leader epoch (i32) 43 producer id (i64)
//! 16 magic (i8)                  51 producer epoch (i16)
//! 17 crc (u32, CRC32C of 21..)   53 base sequence (i32)
//! 21 attributes (i16)            57 record count (i32)
//! 23 last offset delta (i32)     61 records...
//! ```
//!
//! The batch length counts the bytes after the length field, so a batch occupies
//! `12 + batch length` bytes. The CRC covers the attributes to the end of the batch, not the base
//! offset or the partition leader epoch, so both can be rewritten on append without touching it.
//!
//! Validation of a produced blob follows Kafka for produce v3+ (`ProduceRequest.validateRecords`,
//! `ByteBufferLogInputStream`, `DefaultRecordBatch.ensureValid`, `LogValidator.validateBatch`):
//! - a negative length, or one shorter than the v2 header: CORRUPT_MESSAGE;
//! - a batch that runs past the end of the blob: CORRUPT_MESSAGE. Kafka silently ignores a
//!   trailing partial batch; koord rejects it, since no correct client sends one;
//! - magic 0 or 1: INVALID_RECORD ("only magic v2"); any other magic but 2: CORRUPT_MESSAGE;
//! - no batch, or more than one batch (even if every one is sound): INVALID_RECORD, for the whole
//!   partition, nothing appended;
//! - zstd before produce v7: UNSUPPORTED_COMPRESSION_TYPE; an unknown codec: CORRUPT_MESSAGE;
//! - CRC32C mismatch: CORRUPT_MESSAGE;
//! - record count not positive or not `last offset delta + 1`, a control batch, or a producer id
//!   with a negative base sequence: INVALID_RECORD;
//! - then the records themselves, decompressed if need be, as Kafka's `LogValidator` decodes
//!   them ([`super::records`]): malformed records INVALID_RECORD, a payload that does not
//!   decompress CORRUPT_MESSAGE, one that decompresses past the cap MESSAGE_TOO_LARGE.

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use thiserror::Error;

use super::records::{self, WalkError};

/// Base offset and batch length: the bytes in front of what the batch length counts.
pub const LOG_OVERHEAD: usize = 12;
/// The whole v2 batch header, records excluded.
pub const HEADER_SIZE: usize = 61;
/// The only batch format stored.
pub const MAGIC_V2: i8 = 2;

const LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 1 << 3;
const TRANSACTIONAL_BIT: i16 = 1 << 4;
const CONTROL_BIT: i16 = 1 << 5;
const ZSTD: i16 = 4;

/// The decompressed size cap [`validate_produce`] applies: koord's default
/// `socket.request.max.bytes`.
pub const DEFAULT_MAX_DECOMPRESSED: usize = 104_857_600;

/// Why a produced batch was refused. Each maps to the error code Kafka answers with.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AppendError {
    #[error("corrupt record batch: {0}")]
    Corrupt(String),
    #[error("invalid record batch: {0}")]
    InvalidRecord(String),
    #[error("produce v{0} cannot carry zstd-compressed batches")]
    UnsupportedCompression(i16),
    #[error("producer epoch {got} is older than the current epoch {current}")]
    InvalidProducerEpoch { got: i16, current: i16 },
    #[error("out of order sequence number {got}; expected {expected}")]
    OutOfOrderSequence { got: i32, expected: String },
    #[error("a transaction marker from epoch {got} is older than the producer's epoch {current}")]
    StaleMarker { got: i16, current: i16 },
    #[error(
        "a transaction marker from coordinator epoch {got}, older than the producer's {current}"
    )]
    StaleCoordinator { got: i32, current: i32 },
    #[error("the records decompress to more than {0} bytes")]
    TooLarge(usize),
    #[error("the record batch is {size} bytes, larger than max.message.bytes {max}")]
    BatchTooLarge { size: usize, max: usize },
}

impl AppendError {
    /// The Kafka error code for this refusal.
    pub fn code(&self) -> ResponseError {
        match self {
            AppendError::Corrupt(_) => ResponseError::CorruptMessage,
            AppendError::InvalidRecord(_) => ResponseError::InvalidRecord,
            AppendError::UnsupportedCompression(_) => ResponseError::UnsupportedCompressionType,
            AppendError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
            AppendError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
            AppendError::StaleMarker { .. } => ResponseError::InvalidProducerEpoch,
            AppendError::StaleCoordinator { .. } => ResponseError::TransactionCoordinatorFenced,
            AppendError::TooLarge(_) | AppendError::BatchTooLarge { .. } => {
                ResponseError::MessageTooLarge
            }
        }
    }
}

fn corrupt(msg: impl Into<String>) -> AppendError {
    AppendError::Corrupt(msg.into())
}

fn invalid(msg: impl Into<String>) -> AppendError {
    AppendError::InvalidRecord(msg.into())
}

fn array<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    buf.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn i16_at(buf: &[u8], at: usize) -> Option<i16> {
    array(buf, at).map(i16::from_be_bytes)
}

fn i32_at(buf: &[u8], at: usize) -> Option<i32> {
    array(buf, at).map(i32::from_be_bytes)
}

fn i64_at(buf: &[u8], at: usize) -> Option<i64> {
    array(buf, at).map(i64::from_be_bytes)
}

/// The fixed header of a v2 record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Bytes after the length field: the batch is `LOG_OVERHEAD + batch_length` bytes long.
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub first_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    /// Reads the header from the first [`HEADER_SIZE`] bytes; `None` if there are fewer.
    /// Checks nothing else.
    pub fn parse(buf: &[u8]) -> Option<BatchHeader> {
        Some(BatchHeader {
            base_offset: i64_at(buf, 0)?,
            batch_length: i32_at(buf, 8)?,
            partition_leader_epoch: i32_at(buf, LEADER_EPOCH_AT)?,
            magic: *buf.get(MAGIC_AT)? as i8,
            crc: u32::from_be_bytes(array(buf, CRC_AT)?),
            attributes: i16_at(buf, ATTRIBUTES_AT)?,
            last_offset_delta: i32_at(buf, 23)?,
            first_timestamp: i64_at(buf, 27)?,
            max_timestamp: i64_at(buf, 35)?,
            producer_id: i64_at(buf, 43)?,
            producer_epoch: i16_at(buf, 51)?,
            base_sequence: i32_at(buf, 53)?,
            record_count: i32_at(buf, 57)?,
        })
    }

    /// Compression codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub fn compression(&self) -> i16 {
        self.attributes & COMPRESSION_MASK
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    /// LogAppendTime batches give every record the batch's max timestamp.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_BIT != 0
    }

    /// Idempotent (or transactional) batches carry a producer id.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// Offsets the batch occupies: `last offset delta + 1`, equal to the record count once
    /// validated.
    pub fn offset_span(&self) -> i64 {
        i64::from(self.last_offset_delta) + 1
    }

    /// The sequence number of the batch's last record, wrapping past `i32::MAX` to 0 as
    /// Kafka's `DefaultRecordBatch.incrementSequence` does.
    pub fn last_sequence(&self) -> i32 {
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }

    /// Total bytes of the batch, overhead included.
    pub fn total_size(&self) -> usize {
        LOG_OVERHEAD + self.batch_length.max(0) as usize
    }
}

/// `seq + delta`, wrapping past `i32::MAX` to 0 (sequences are never negative).
pub fn increment_sequence(seq: i32, delta: i32) -> i32 {
    if delta <= 0 {
        return seq;
    }
    if seq > i32::MAX - delta {
        delta - (i32::MAX - seq) - 1
    } else {
        seq + delta
    }
}

/// A produced batch that passed every check: its header and its bytes, as sent.
#[derive(Debug, Clone, Copy)]
pub struct ValidBatch<'a> {
    pub header: BatchHeader,
    pub bytes: &'a [u8],
}

/// One step of the walk over a records blob: the batch bounds and magic, nothing else.
fn next_batch(rest: &[u8]) -> Result<(i8, usize), AppendError> {
    let Some(length) = i32_at(rest, 8) else {
        return Err(corrupt(format!(
            "{} trailing bytes are too few for a batch header",
            rest.len()
        )));
    };
    if length < 0 {
        return Err(corrupt(format!("negative batch length {length}")));
    }
    let total = LOG_OVERHEAD + length as usize;
    if total > rest.len() {
        return Err(corrupt(format!(
            "batch length {length} runs past the {} bytes left",
            rest.len() - LOG_OVERHEAD
        )));
    }
    let magic = rest.get(MAGIC_AT).map(|m| *m as i8);
    match magic {
        Some(MAGIC_V2) => {}
        Some(0 | 1) => {
            return Err(invalid(
                "produce requests are only allowed to contain record batches with magic version 2",
            ))
        }
        Some(m) => return Err(corrupt(format!("invalid magic {m}"))),
        None => return Err(corrupt(format!("batch length {length} is too short"))),
    }
    if total < HEADER_SIZE {
        return Err(corrupt(format!(
            "batch length {length} is smaller than the v2 header ({})",
            HEADER_SIZE - LOG_OVERHEAD
        )));
    }
    Ok((MAGIC_V2, total))
}

impl From<WalkError> for AppendError {
    fn from(e: WalkError) -> AppendError {
        match e {
            WalkError::Invalid(m) => AppendError::InvalidRecord(m),
            WalkError::Corrupt(m) => AppendError::Corrupt(m),
            WalkError::TooLarge(cap) => AppendError::TooLarge(cap),
        }
    }
}

/// [`validate_produce_within`] with the default cap, [`DEFAULT_MAX_DECOMPRESSED`].
///
/// # Errors
/// See [`validate_produce_within`].
pub fn validate_produce(
    records: &[u8],
    produce_version: i16,
) -> Result<ValidBatch<'_>, AppendError> {
    validate_produce_within(records, produce_version, DEFAULT_MAX_DECOMPRESSED)
}

/// Validates the records of one partition of a produce request (v3+): exactly one sound v2
/// batch whose records decode, a compressed payload decompressing to `max_decompressed` bytes
/// at most. See the module doc for the checks and their error codes.
///
/// # Errors
/// The first check that fails, as an [`AppendError`]. Nothing in `records` is trusted: every
/// length is checked before it is used.
pub fn validate_produce_within(
    records: &[u8],
    produce_version: i16,
    max_decompressed: usize,
) -> Result<ValidBatch<'_>, AppendError> {
    let mut pos = 0;
    let mut batches = 0usize;
    let mut first = None;
    while let Some(rest) = records.get(pos..).filter(|r| !r.is_empty()) {
        let (_, total) = next_batch(rest)?;
        if first.is_none() {
            first = rest.get(..total);
        }
        batches += 1;
        pos += total;
    }
    let bytes = match (first, batches) {
        (Some(b), 1) => b,
        (None, _) | (_, 0) => {
            return Err(invalid(format!(
                "produce requests with version {produce_version} must have at least one record batch per partition"
            )))
        }
        _ => {
            return Err(invalid(format!(
                "produce requests with version {produce_version} are only allowed to contain exactly one record batch per partition"
            )))
        }
    };
    let header = BatchHeader::parse(bytes).ok_or_else(|| corrupt("short batch header"))?;
    match header.compression() {
        ZSTD if produce_version < 7 => {
            return Err(AppendError::UnsupportedCompression(produce_version))
        }
        0..=4 => {}
        other => return Err(corrupt(format!("unknown compression codec {other}"))),
    }
    let covered = bytes.get(ATTRIBUTES_AT..).unwrap_or_default();
    let computed = crc32c::crc32c(covered);
    if computed != header.crc {
        return Err(corrupt(format!(
            "record is corrupt (stored crc = {}, computed crc = {computed})",
            header.crc
        )));
    }
    if header.record_count <= 0 {
        return Err(invalid(format!(
            "invalid reported count for record batch: {}",
            header.record_count
        )));
    }
    if header.last_offset_delta < 0 || header.offset_span() != i64::from(header.record_count) {
        return Err(invalid(format!(
            "inconsistent batch offset range [0, {}] and reported count {}",
            header.last_offset_delta, header.record_count
        )));
    }
    if header.is_control() {
        return Err(invalid("clients are not allowed to write control records"));
    }
    if header.has_producer_id() && header.base_sequence < 0 {
        return Err(invalid(format!(
            "invalid sequence number {} in record batch with producer id {}",
            header.base_sequence, header.producer_id
        )));
    }
    records::walk(
        &bytes[HEADER_SIZE..],
        header.compression(),
        header.record_count,
        max_decompressed,
        |_, _| {},
    )?;
    Ok(ValidBatch { header, bytes })
}

/// Whether any whole batch in `records` is transactional. Stops quietly at the first structural
/// problem: validation reports it later.
pub fn any_transactional(records: &[u8]) -> bool {
    let mut pos = 0;
    while let Some(rest) = records.get(pos..).filter(|r| !r.is_empty()) {
        let Ok((_, total)) = next_batch(rest) else {
            return false;
        };
        if i16_at(rest, ATTRIBUTES_AT).is_some_and(|a| a & TRANSACTIONAL_BIT != 0) {
            return true;
        }
        pos += total;
    }
    false
}

/// A copy of a validated batch with its base offset set to `base_offset` and its partition
/// leader epoch to [`crate::metadata::LEADER_EPOCH`]. The CRC stays valid: it does not cover
/// either field.
pub fn rewrite(bytes: &[u8], base_offset: i64) -> Bytes {
    let mut b = BytesMut::from(bytes);
    if let Some(dst) = b.get_mut(0..8) {
        dst.copy_from_slice(&base_offset.to_be_bytes());
    }
    if let Some(dst) = b.get_mut(LEADER_EPOCH_AT..LEADER_EPOCH_AT + 4) {
        dst.copy_from_slice(&crate::metadata::LEADER_EPOCH.to_be_bytes());
    }
    b.freeze()
}

/// Marks a stored batch as LogAppendTime with `now` as its max timestamp (Kafka's
/// `setMaxTimestamp(LOG_APPEND_TIME, now)`), recomputing the CRC those bytes are covered by.
pub fn set_log_append_time(bytes: &Bytes, now: i64) -> Bytes {
    const TIMESTAMP_TYPE: u16 = 0x08;
    const MAX_TIMESTAMP_AT: usize = 35;
    let mut b = BytesMut::from(&bytes[..]);
    if b.len() < HEADER_SIZE {
        return bytes.clone();
    }
    let attributes = u16::from_be_bytes([b[ATTRIBUTES_AT], b[ATTRIBUTES_AT + 1]]) | TIMESTAMP_TYPE;
    b[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    b[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&now.to_be_bytes());
    let crc = crc32c::crc32c(&b[ATTRIBUTES_AT..]);
    b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    b.freeze()
}

/// The records of one stored batch, decoded (and decompressed) by kafka-protocol.
///
/// # Errors
/// A message when the batch does not decode.
pub fn decode_records(batch: &Bytes) -> Result<Vec<kafka_protocol::records::Record>, String> {
    let mut buf = batch.clone();
    kafka_protocol::records::RecordBatchDecoder::decode(&mut buf)
        .map(|set| set.records)
        .map_err(|e| e.to_string())
}

/// A new uncompressed v2 batch of `records` (kept from one batch, offsets as they were, so the
/// batch may have gaps), its leader epoch set as on append.
///
/// # Errors
/// A message when kafka-protocol cannot encode them (records of different producers).
pub fn encode_records(records: &[kafka_protocol::records::Record]) -> Result<Bytes, String> {
    use kafka_protocol::records::{Compression, RecordBatchEncoder, RecordEncodeOptions};
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records, &options).map_err(|e| e.to_string())?;
    Ok(buf.freeze())
}

/// One uncompressed v2 batch of keyed records (a `None` value is a tombstone), all stamped
/// `timestamp` and `partition_leader_epoch`, from `producer` (id, epoch, base sequence) or from
/// none. The records' sequences run on from the base (-1 without a producer): kafka-protocol's
/// encoder starts a new batch wherever offset - sequence changes, and Kafka wants a batch
/// without a producer at base sequence -1.
///
/// # Errors
/// A message when kafka-protocol cannot encode it.
pub fn keyed_batch(
    records: &[(Bytes, Option<Bytes>)],
    producer: Option<(i64, i16, i32)>,
    partition_leader_epoch: i32,
    timestamp: i64,
) -> Result<Bytes, String> {
    let records: Vec<kafka_protocol::records::Record> = records
        .iter()
        .enumerate()
        .map(|(i, (key, value))| kafka_protocol::records::Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch,
            producer_id: producer.map_or(-1, |p| p.0),
            producer_epoch: producer.map_or(-1, |p| p.1),
            timestamp_type: kafka_protocol::records::TimestampType::Creation,
            offset: i as i64,
            sequence: i32::try_from(i)
                .unwrap_or(i32::MAX)
                .wrapping_add(producer.map_or(-1, |p| p.2)),
            timestamp,
            key: Some(key.clone()),
            value: value.clone(),
            headers: Default::default(),
        })
        .collect();
    encode_records(&records)
}

/// A control batch holding one transaction marker (Kafka's `EndTransactionMarker`): key
/// version 0 and type (0 abort, 1 commit), value version 0 and the coordinator epoch; the
/// batch is transactional and control, from the producer, base sequence -1.
///
/// # Errors
/// A message when kafka-protocol cannot encode it.
pub fn control_batch(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    timestamp: i64,
) -> Result<Bytes, String> {
    let mut key = BytesMut::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&i16::from(commit).to_be_bytes());
    let mut value = BytesMut::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let record = kafka_protocol::records::Record {
        transactional: true,
        control: true,
        partition_leader_epoch: crate::metadata::LEADER_EPOCH,
        producer_id,
        producer_epoch,
        timestamp_type: kafka_protocol::records::TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp,
        key: Some(key.freeze()),
        value: Some(value.freeze()),
        headers: Default::default(),
        delete_horizon: false,
    };
    encode_records(std::slice::from_ref(&record))
}

/// The offset and timestamp of every record of one stored batch, in order, walked as on
/// produce ([`records::walk`], the same cap on decompression).
///
/// # Errors
/// A message when the batch does not decode.
pub fn record_timestamps(batch: &[u8], max_decompressed: usize) -> Result<Vec<(i64, i64)>, String> {
    let header = BatchHeader::parse(batch).ok_or("short batch header")?;
    let payload = batch.get(HEADER_SIZE..).unwrap_or_default();
    let mut out = Vec::new();
    records::walk(
        payload,
        header.compression(),
        header.record_count,
        max_decompressed,
        |offset_delta, timestamp_delta| {
            let ts = if header.is_log_append_time() {
                header.max_timestamp
            } else {
                header.first_timestamp.wrapping_add(timestamp_delta)
            };
            out.push((header.base_offset.wrapping_add(i64::from(offset_delta)), ts));
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    /// Options for [`batch`].
    #[derive(Clone, Copy)]
    pub(crate) struct Spec {
        pub records: usize,
        pub first_ts: i64,
        pub producer_id: i64,
        pub producer_epoch: i16,
        pub base_sequence: i32,
        pub compression: Compression,
        pub transactional: bool,
        pub value_len: usize,
    }

    impl Default for Spec {
        fn default() -> Self {
            Spec {
                records: 3,
                first_ts: 1_000,
                producer_id: -1,
                producer_epoch: -1,
                base_sequence: -1,
                compression: Compression::None,
                transactional: false,
                value_len: 10,
            }
        }
    }

    /// A real v2 batch, encoded by kafka-protocol (as a client would), base offset 0, record
    /// `i` timestamped `first_ts + i * 10`.
    pub(crate) fn batch(spec: Spec) -> Bytes {
        let records: Vec<Record> = (0..spec.records)
            .map(|i| Record {
                transactional: spec.transactional,
                control: false,
                partition_leader_epoch: -1,
                producer_id: spec.producer_id,
                producer_epoch: spec.producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // The encoder starts a new batch when offset - sequence changes; base
                // sequence -1 (no producer) is written as -1, 0, 1, ...
                sequence: if spec.base_sequence < 0 {
                    i as i32 - 1
                } else {
                    increment_sequence(spec.base_sequence, i as i32)
                },
                timestamp: spec.first_ts + 10 * i as i64,
                key: Some(Bytes::from(format!("k{i}"))),
                value: Some(Bytes::from(vec![b'v'; spec.value_len])),
                headers: IndexMap::new(),
                delete_horizon: false,
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: spec.compression,
            },
        )
        .unwrap();
        buf.freeze()
    }

    /// One record from a transactional producer (id 1, epoch 0, sequence 0).
    pub(crate) fn transactional() -> Bytes {
        batch(Spec {
            producer_id: 1,
            producer_epoch: 0,
            base_sequence: 0,
            transactional: true,
            ..Spec::default()
        })
    }

    pub(crate) fn simple(records: usize) -> Bytes {
        batch(Spec {
            records,
            ..Spec::default()
        })
    }

    /// Recomputes the CRC after a test edits the covered bytes.
    fn fix_crc(b: &mut [u8]) {
        let crc = crc32c::crc32c(&b[ATTRIBUTES_AT..]);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    }

    fn code(records: &[u8]) -> ResponseError {
        validate_produce(records, 9).unwrap_err().code()
    }

    #[test]
    fn header_of_an_encoded_batch() {
        let b = batch(Spec {
            records: 4,
            producer_id: 7,
            producer_epoch: 2,
            base_sequence: 10,
            ..Spec::default()
        });
        let v = validate_produce(&b, 9).unwrap();
        let h = v.header;
        assert_eq!(h.magic, 2);
        assert_eq!(h.record_count, 4);
        assert_eq!(h.last_offset_delta, 3);
        assert_eq!((h.first_timestamp, h.max_timestamp), (1_000, 1_030));
        assert_eq!((h.producer_id, h.producer_epoch), (7, 2));
        assert_eq!((h.base_sequence, h.last_sequence()), (10, 13));
        assert_eq!(h.total_size(), b.len());
        assert_eq!(v.bytes.len(), b.len());
    }

    #[test]
    fn rewrite_keeps_the_crc_valid() {
        let b = simple(2);
        let mut with_epoch = b.to_vec();
        with_epoch[12..16].copy_from_slice(&7i32.to_be_bytes());
        let out = rewrite(&with_epoch, 1234);
        let h = BatchHeader::parse(&out).unwrap();
        assert_eq!(h.base_offset, 1234);
        assert_eq!(h.partition_leader_epoch, crate::metadata::LEADER_EPOCH);
        assert!(validate_produce(&out, 9).is_ok());
        let decoded = record_timestamps(&out, DEFAULT_MAX_DECOMPRESSED).unwrap();
        assert_eq!(decoded, vec![(1234, 1_000), (1235, 1_010)]);
    }

    #[test]
    fn every_truncation_is_refused_without_panic() {
        let b = simple(3);
        for len in 0..b.len() {
            let err = validate_produce(&b[..len], 9).unwrap_err();
            let expected = if len == 0 {
                ResponseError::InvalidRecord
            } else {
                ResponseError::CorruptMessage
            };
            assert_eq!(err.code(), expected, "truncated to {len}: {err}");
            assert!(!any_transactional(&b[..len]));
        }
    }

    #[test]
    fn lengths_negative_short_or_oversized() {
        let b = simple(3);
        for bad_len in [-1i32, i32::MIN, 0, 4, 48, b.len() as i32, i32::MAX] {
            let mut m = b.to_vec();
            m[8..12].copy_from_slice(&bad_len.to_be_bytes());
            assert_eq!(code(&m), ResponseError::CorruptMessage, "length {bad_len}");
        }
    }

    #[test]
    fn magic_other_than_2() {
        let b = simple(1);
        for (magic, expected) in [
            (0u8, ResponseError::InvalidRecord),
            (1, ResponseError::InvalidRecord),
            (3, ResponseError::CorruptMessage),
            (0xff, ResponseError::CorruptMessage),
        ] {
            let mut m = b.to_vec();
            m[MAGIC_AT] = magic;
            assert_eq!(code(&m), expected, "magic {magic}");
        }
    }

    #[test]
    fn crc_mismatch_is_corrupt() {
        let b = simple(2);
        let mut m = b.to_vec();
        let last = m.len() - 1;
        m[last] ^= 0x55;
        assert_eq!(code(&m), ResponseError::CorruptMessage);
        let mut m = b.to_vec();
        m[CRC_AT] ^= 1;
        assert_eq!(code(&m), ResponseError::CorruptMessage);
    }

    #[test]
    fn more_than_one_batch_rejects_the_whole_blob() {
        let good = simple(2);
        let mut two_good = good.to_vec();
        two_good.extend_from_slice(&good);
        assert_eq!(code(&two_good), ResponseError::InvalidRecord);

        let mut bad = good.to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let mut good_then_bad_crc = good.to_vec();
        good_then_bad_crc.extend_from_slice(&bad);
        assert_eq!(code(&good_then_bad_crc), ResponseError::InvalidRecord);

        let mut good_then_garbage = good.to_vec();
        good_then_garbage.extend_from_slice(&[0xff; 20]);
        assert_eq!(code(&good_then_garbage), ResponseError::CorruptMessage);

        let mut good_then_partial = good.to_vec();
        good_then_partial.extend_from_slice(&good[..30]);
        assert_eq!(code(&good_then_partial), ResponseError::CorruptMessage);
    }

    #[test]
    fn batch_rules_kafka_checks() {
        // Record count disagreeing with the offset delta.
        let mut m = simple(3).to_vec();
        m[57..61].copy_from_slice(&5i32.to_be_bytes());
        fix_crc(&mut m);
        assert_eq!(code(&m), ResponseError::InvalidRecord);
        // A forged count that the payload cannot hold: the records run out (Kafka's
        // "premature EOF").
        let mut m = simple(3).to_vec();
        m[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
        m[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        fix_crc(&mut m);
        assert_eq!(code(&m), ResponseError::InvalidRecord);
        // Zero records.
        let mut m = simple(1).to_vec();
        m[23..27].copy_from_slice(&(-1i32).to_be_bytes());
        m[57..61].copy_from_slice(&0i32.to_be_bytes());
        fix_crc(&mut m);
        assert_eq!(code(&m), ResponseError::InvalidRecord);
        // Control batch.
        let mut m = simple(1).to_vec();
        m[22] |= CONTROL_BIT as u8;
        fix_crc(&mut m);
        assert_eq!(code(&m), ResponseError::InvalidRecord);
        // Unknown codec.
        let mut m = simple(1).to_vec();
        m[22] |= 0x07;
        fix_crc(&mut m);
        assert_eq!(code(&m), ResponseError::CorruptMessage);
        // Producer id with a negative sequence.
        let mut m = batch(Spec {
            producer_id: 3,
            producer_epoch: 0,
            base_sequence: 0,
            ..Spec::default()
        })
        .to_vec();
        m[53..57].copy_from_slice(&(-5i32).to_be_bytes());
        fix_crc(&mut m);
        assert_eq!(code(&m), ResponseError::InvalidRecord);
    }

    #[test]
    fn zstd_needs_produce_v7() {
        let z = batch(Spec {
            compression: Compression::Zstd,
            ..Spec::default()
        });
        assert_eq!(
            validate_produce(&z, 6).unwrap_err().code(),
            ResponseError::UnsupportedCompressionType
        );
        assert!(validate_produce(&z, 7).is_ok());
    }

    #[test]
    fn transactional_detection() {
        let t = transactional();
        assert!(any_transactional(&t));
        assert!(!any_transactional(&simple(2)));
        let mut both = simple(1).to_vec();
        both.extend_from_slice(&t);
        assert!(any_transactional(&both));
    }

    #[test]
    fn compressed_batches_decode_to_exact_offsets() {
        for compression in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let b = batch(Spec {
                records: 50,
                compression,
                ..Spec::default()
            });
            let v = validate_produce(&b, 9).unwrap();
            let stored = rewrite(v.bytes, 100);
            let ts = record_timestamps(&stored, DEFAULT_MAX_DECOMPRESSED).unwrap();
            assert_eq!(ts.len(), 50, "{compression:?}");
            assert_eq!(ts[7], (107, 1_070), "{compression:?}");
        }
    }

    #[test]
    fn forged_count_never_reaches_the_decoder() {
        let mut m = batch(Spec {
            records: 3,
            compression: Compression::Gzip,
            ..Spec::default()
        })
        .to_vec();
        m[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
        m[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        fix_crc(&mut m);
        assert!(record_timestamps(&m, DEFAULT_MAX_DECOMPRESSED).is_err());
    }

    /// Deterministic fuzzing: random edits of real batches (any byte, the length field, the
    /// record count, truncation, concatenation), with the CRC recomputed half of the time so that
    /// edits also reach the checks behind it and the record decoder. Nothing may panic, and what
    /// is accepted must hold together.
    #[test]
    fn random_edits_never_panic() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let seeds = [
            simple(1),
            simple(7),
            batch(Spec {
                records: 20,
                compression: Compression::Gzip,
                ..Spec::default()
            }),
            batch(Spec {
                records: 20,
                compression: Compression::Snappy,
                ..Spec::default()
            }),
            batch(Spec {
                records: 20,
                compression: Compression::Lz4,
                ..Spec::default()
            }),
            batch(Spec {
                records: 20,
                compression: Compression::Zstd,
                ..Spec::default()
            }),
        ];
        let mut accepted = 0;
        for i in 0..20_000 {
            let seed = &seeds[i % seeds.len()];
            let mut m = seed.to_vec();
            for _ in 0..1 + next() % 3 {
                let r = next();
                match r % 5 {
                    0 => {
                        let at = (r >> 8) as usize % m.len();
                        m[at] = (r >> 32) as u8;
                    }
                    1 => m[8..12].copy_from_slice(&((r >> 8) as i32).to_be_bytes()),
                    2 => m[57..61].copy_from_slice(&((r >> 8) as i32).to_be_bytes()),
                    3 => m.truncate((r >> 8) as usize % (m.len() + 1)),
                    _ => m.extend_from_slice(&seed[..(r >> 8) as usize % seed.len()]),
                }
                if m.len() < HEADER_SIZE {
                    break;
                }
            }
            if next() % 2 == 0 && m.len() >= HEADER_SIZE {
                fix_crc(&mut m);
            }
            assert!(!any_transactional(&m) || m.len() >= HEADER_SIZE);
            if let Ok(v) = validate_produce(&m, 9) {
                accepted += 1;
                assert_eq!(v.bytes.len(), v.header.total_size());
                assert_eq!(v.header.offset_span(), i64::from(v.header.record_count));
                let stored = rewrite(v.bytes, 1_000);
                // May fail on edited records; must not panic or over-allocate.
                let _ = record_timestamps(&stored, DEFAULT_MAX_DECOMPRESSED);
            }
        }
        assert!(accepted > 0, "some edits keep the batch valid");
    }

    #[test]
    fn sequences_wrap() {
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(increment_sequence(9, 0), 9);
    }
}
