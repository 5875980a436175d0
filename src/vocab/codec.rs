//! The primitives of koord's stored byte layouts (the store's keys and values, and each group
//! kind's records): a writer of fixed-width integers and length-prefixed strings, and the
//! checked reads that turn damage into a [`DecodeError`] naming the value, never a panic or an
//! unchecked allocation.

use super::reader::{ReadError, Reader};
use super::records::{Partitions, TopicId};

/// The version byte every value starts with.
pub const V1: u8 = 1;

/// Why a stored key or value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

pub fn err(what: impl Into<String>) -> DecodeError {
    DecodeError(what.into())
}

#[derive(Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub fn bytes(&mut self, b: &[u8]) {
        // Kafka strings and byte fields are far below 4 GiB (request frames are capped).
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
    }
    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    pub fn opt_str(&mut self, s: Option<&str>) {
        match s {
            None => self.u8(0),
            Some(s) => {
                self.u8(1);
                self.str(s);
            }
        }
    }
}

/// The store's own messages, naming the value (each decoder's `what`) rather than the field.
impl From<ReadError> for DecodeError {
    fn from(e: ReadError) -> DecodeError {
        match e {
            ReadError::Short { what, needed, left } => err(format!(
                "{what} is truncated (needs {needed} more bytes, has {left})"
            )),
            ReadError::NotUtf8 { what } => err(format!("{what}: a string is not UTF-8")),
            ReadError::NegativeLength { what, len } => {
                err(format!("{what}: negative length {len}"))
            }
        }
    }
}

pub fn opt_str(r: &mut Reader, what: &'static str) -> Result<Option<String>, DecodeError> {
    match r.u8(what)? {
        0 => Ok(None),
        1 => Ok(Some(r.str_u32(what)?.to_owned())),
        t => Err(err(format!("{what}: bad option tag {t}"))),
    }
}

pub fn version(r: &mut Reader, what: &'static str) -> Result<(), DecodeError> {
    match r.u8(what)? {
        V1 => Ok(()),
        v => Err(err(format!("{what}: unknown format version {v}"))),
    }
}

pub fn end(r: &Reader, what: &'static str) -> Result<(), DecodeError> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(err(format!("{what}: {} trailing bytes", r.remaining())))
    }
}

/// A count of items each at least `min` bytes long, checked against what is left.
pub fn count(r: &mut Reader, min: usize, what: &'static str) -> Result<usize, DecodeError> {
    let n = r.u32(what)? as usize;
    if n > r.remaining() / min.max(1) {
        return Err(err(format!("{what}: {n} items in {} bytes", r.remaining())));
    }
    Ok(n)
}

impl Writer {
    /// Partitions by topic id: a count, then each topic's 16-byte id and its partitions.
    pub fn partitions(&mut self, p: &Partitions) {
        self.u32(p.len() as u32);
        for (topic, parts) in p {
            self.0.extend_from_slice(topic.as_bytes());
            self.u32(parts.len() as u32);
            for &part in parts {
                self.i32(part);
            }
        }
    }
}

/// [`Writer::partitions`] read back; counts are checked against what is left.
pub fn partitions(r: &mut Reader, what: &'static str) -> Result<Partitions, DecodeError> {
    let topics = r.u32(what)?;
    let mut out = Partitions::new();
    for _ in 0..topics {
        let id: [u8; 16] = r
            .take(16, what)?
            .try_into()
            .map_err(|_| err(format!("{what}: bad topic id")))?;
        let count = r.u32(what)? as usize;
        // Each partition takes 4 bytes: a count beyond what is left is damage.
        if count > r.remaining() / 4 {
            return Err(err(format!(
                "{what}: {count} partitions in {} bytes",
                r.remaining()
            )));
        }
        let mut parts = Vec::with_capacity(count);
        for _ in 0..count {
            parts.push(r.i32(what)?);
        }
        out.insert(TopicId::from_bytes(id), parts);
    }
    Ok(out)
}
