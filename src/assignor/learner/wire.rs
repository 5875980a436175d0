//! The learner protocol of learner-spec.md section 11: `LearnerSubscription` (the user data of a
//! learner-capable member's `ConsumerProtocolSubscription`) and `LearnerAssignment` (the user
//! data koord puts in the `ConsumerProtocolAssignment` it returns).
//!
//! Kafka's classic (non-flexible) encoding: int16 version first, arrays as an int32 count then
//! the items, strings as an int16 length then UTF-8. Decoding is strict: only version 0; a
//! truncated field, a length beyond the bytes present, a negative count or length, bad UTF-8, a
//! negative partition or trailing bytes is an error (the member gets
//! INCONSISTENT_GROUP_PROTOCOL), never a panic, and no allocation is sized by an unchecked
//! count.

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

use crate::assignor::protocol::TopicPartitions;
use crate::vocab::reader::{ReadError, Reader};

/// The only version of both structures.
pub const VERSION: i16 = 0;

/// Why learner protocol bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LearnerWireError {
    #[error("truncated {0}")]
    Truncated(&'static str),
    #[error("unknown version {0}")]
    UnknownVersion(i16),
    #[error("negative length {len} of {what}")]
    NegativeLength { what: &'static str, len: i64 },
    #[error("{what} is not UTF-8")]
    NotUtf8 { what: &'static str },
    #[error("negative partition {0}")]
    NegativePartition(i32),
    #[error("invalid boolean {0}")]
    BadBool(u8),
    #[error("{0} bytes after the last field")]
    Trailing(usize),
}

/// One task's reported lag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskLag {
    pub topic: String,
    pub partition: i32,
    pub lag: i64,
}

/// What a learner-capable member reports when it joins.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LearnerSubscription {
    /// Tasks it owned but gave up at this join because they are being learned (seed mode).
    pub revoked: TopicPartitions,
    /// Tasks it is restoring.
    pub learning: TopicPartitions,
    /// Learning tasks that are restored.
    pub ready: TopicPartitions,
    /// Lags of learning tasks, for readiness by `learner.acceptable.recovery.lag`.
    pub lags: Vec<TaskLag>,
    /// The member wants to leave: drain it through learners.
    pub leaving: bool,
}

/// What koord tells a learner-capable member besides its active partitions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LearnerAssignment {
    /// Tasks to restore now.
    pub learning: TopicPartitions,
    /// Assigned tasks that someone else is learning: revoke them at the next join (seed mode).
    pub marks: TopicPartitions,
    /// When koord will re-evaluate on its own (ms since the Unix epoch), or -1.
    pub probe_ms: i64,
}

impl LearnerSubscription {
    /// # Errors
    /// See the module docs.
    pub fn decode(bytes: &[u8]) -> Result<LearnerSubscription, LearnerWireError> {
        let mut r = Fields(Reader::new(bytes));
        r.version()?;
        let revoked = r.topic_partitions()?;
        let learning = r.topic_partitions()?;
        let ready = r.topic_partitions()?;
        let count = r.0.count_i32("lags", 2 + 4 + 8)?;
        let mut lags = Vec::with_capacity(count);
        for _ in 0..count {
            lags.push(TaskLag {
                topic: r.0.str_i16("topic")?.to_owned(),
                partition: r.partition()?,
                lag: r.0.i64("lag")?,
            });
        }
        let leaving = r.bool("leaving")?;
        r.end()?;
        Ok(LearnerSubscription {
            revoked,
            learning,
            ready,
            lags,
            leaving,
        })
    }

    pub fn encode(&self) -> Bytes {
        let mut w = BytesMut::new();
        w.put_i16(VERSION);
        put_topic_partitions(&mut w, &self.revoked);
        put_topic_partitions(&mut w, &self.learning);
        put_topic_partitions(&mut w, &self.ready);
        w.put_i32(len_i32(self.lags.len()));
        for l in &self.lags {
            put_string(&mut w, &l.topic);
            w.put_i32(l.partition);
            w.put_i64(l.lag);
        }
        w.put_u8(u8::from(self.leaving));
        w.freeze()
    }
}

impl LearnerAssignment {
    /// # Errors
    /// See the module docs.
    pub fn decode(bytes: &[u8]) -> Result<LearnerAssignment, LearnerWireError> {
        let mut r = Fields(Reader::new(bytes));
        r.version()?;
        let learning = r.topic_partitions()?;
        let marks = r.topic_partitions()?;
        let probe_ms = r.0.i64("probe_ms")?;
        r.end()?;
        Ok(LearnerAssignment {
            learning,
            marks,
            probe_ms,
        })
    }

    pub fn encode(&self) -> Bytes {
        let mut w = BytesMut::new();
        w.put_i16(VERSION);
        put_topic_partitions(&mut w, &self.learning);
        put_topic_partitions(&mut w, &self.marks);
        w.put_i64(self.probe_ms);
        w.freeze()
    }
}

/// Lengths we write come from lists we built; a list beyond i32 cannot be encoded by Kafka
/// either, so it is clamped rather than wrapped (never reached in practice).
fn len_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn put_string(w: &mut BytesMut, s: &str) {
    let bytes = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
    w.put_i16(bytes.len() as i16);
    w.put_slice(bytes);
}

fn put_topic_partitions(w: &mut BytesMut, list: &TopicPartitions) {
    w.put_i32(len_i32(list.len()));
    for (topic, partitions) in list {
        put_string(w, topic);
        w.put_i32(len_i32(partitions.len()));
        for &p in partitions {
            w.put_i32(p);
        }
    }
}

/// A failed read is the learner error of the same name, keeping the field it names.
impl From<ReadError> for LearnerWireError {
    fn from(e: ReadError) -> LearnerWireError {
        match e {
            ReadError::Short { what, .. } => LearnerWireError::Truncated(what),
            ReadError::NegativeLength { what, len } => {
                LearnerWireError::NegativeLength { what, len }
            }
            ReadError::NotUtf8 { what } => LearnerWireError::NotUtf8 { what },
        }
    }
}

/// The learner format's fields over the shared byte reader.
struct Fields<'a>(Reader<'a>);

impl Fields<'_> {
    fn version(&mut self) -> Result<(), LearnerWireError> {
        match self.0.i16("version")? {
            VERSION => Ok(()),
            v => Err(LearnerWireError::UnknownVersion(v)),
        }
    }

    fn bool(&mut self, what: &'static str) -> Result<bool, LearnerWireError> {
        match self.0.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(LearnerWireError::BadBool(b)),
        }
    }

    fn partition(&mut self) -> Result<i32, LearnerWireError> {
        let p = self.0.i32("partition")?;
        if p < 0 {
            return Err(LearnerWireError::NegativePartition(p));
        }
        Ok(p)
    }

    fn topic_partitions(&mut self) -> Result<TopicPartitions, LearnerWireError> {
        let topics = self.0.count_i32("topic-partitions", 2 + 4)?;
        let mut out = Vec::with_capacity(topics);
        for _ in 0..topics {
            let topic = self.0.str_i16("topic")?.to_owned();
            let n = self.0.count_i32("partitions", 4)?;
            let mut partitions = Vec::with_capacity(n);
            for _ in 0..n {
                partitions.push(self.partition()?);
            }
            out.push((topic, partitions));
        }
        Ok(out)
    }

    fn end(&self) -> Result<(), LearnerWireError> {
        match self.0.remaining() {
            0 => Ok(()),
            n => Err(LearnerWireError::Trailing(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assignor::protocol::{decode_subscription, encode_subscription, Subscription};

    /// The vectors of learner-vectors.md, verbatim.
    const NOTHING: &str = "00000000000000000000000000000000000000";
    const REVOKED_AND_LEARNING: &str = "00000000000100066f726465727300000001000000000000000100066f72646572730000000200000002000000040000000100066f726465727300000001000000040000000100066f72646572730000000200000000000005dc00";
    const LEAVING: &str = "00000000000000000000000000000000000001";
    const ASSIGNMENT: &str = "00000000000100066f726465727300000001000000010000000100066f72646572730000000100000003ffffffffffffffff";
    const SUBSCRIPTION_V1: &str = "00010000000100066f72646572730000002300000000000100066f72646572730000000100000000000000000000000000000000000000000100066f7264657273000000020000000300000005";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn orders(ps: &[i32]) -> TopicPartitions {
        vec![("orders".to_owned(), ps.to_vec())]
    }

    #[test]
    fn subscription_vectors() {
        let cases = [
            (NOTHING, LearnerSubscription::default()),
            (
                REVOKED_AND_LEARNING,
                LearnerSubscription {
                    revoked: orders(&[0]),
                    learning: orders(&[2, 4]),
                    ready: orders(&[4]),
                    lags: vec![TaskLag {
                        topic: "orders".into(),
                        partition: 2,
                        lag: 1500,
                    }],
                    leaving: false,
                },
            ),
            (
                LEAVING,
                LearnerSubscription {
                    leaving: true,
                    ..Default::default()
                },
            ),
        ];
        for (vector, value) in cases {
            assert_eq!(value.encode().as_ref(), hex(vector).as_slice());
            assert_eq!(LearnerSubscription::decode(&hex(vector)).unwrap(), value);
        }
    }

    #[test]
    fn assignment_vector() {
        let value = LearnerAssignment {
            learning: orders(&[1]),
            marks: orders(&[3]),
            probe_ms: -1,
        };
        assert_eq!(value.encode().as_ref(), hex(ASSIGNMENT).as_slice());
        assert_eq!(LearnerAssignment::decode(&hex(ASSIGNMENT)).unwrap(), value);
    }

    #[test]
    fn inside_the_consumer_protocol_envelope() {
        let inner = LearnerSubscription {
            revoked: orders(&[0]),
            ..Default::default()
        };
        let outer = Subscription {
            version: 1,
            topics: vec!["orders".into()],
            user_data: Some(inner.encode()),
            owned_partitions: orders(&[3, 5]),
            generation: -1,
            rack: None,
        };
        let bytes = encode_subscription(&outer, 1);
        assert_eq!(bytes.as_ref(), hex(SUBSCRIPTION_V1).as_slice());
        let decoded = decode_subscription(&bytes).unwrap();
        assert_eq!(decoded.owned_partitions, orders(&[3, 5]));
        let user_data = decoded.user_data.unwrap();
        assert_eq!(LearnerSubscription::decode(&user_data).unwrap(), inner);
    }

    #[test]
    fn every_truncation_and_extension_is_refused() {
        for vector in [NOTHING, REVOKED_AND_LEARNING, LEAVING] {
            let bytes = hex(vector);
            for cut in 0..bytes.len() {
                assert!(LearnerSubscription::decode(&bytes[..cut]).is_err(), "{cut}");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert_eq!(
                LearnerSubscription::decode(&longer),
                Err(LearnerWireError::Trailing(1))
            );
        }
        let bytes = hex(ASSIGNMENT);
        for cut in 0..bytes.len() {
            assert!(LearnerAssignment::decode(&bytes[..cut]).is_err(), "{cut}");
        }
        let mut longer = bytes.clone();
        longer.extend_from_slice(b"xx");
        assert!(LearnerAssignment::decode(&longer).is_err());
    }

    #[test]
    fn bad_fields_are_errors() {
        let mut v1 = hex(NOTHING);
        v1[1] = 1;
        assert_eq!(
            LearnerSubscription::decode(&v1),
            Err(LearnerWireError::UnknownVersion(1))
        );
        let mut negative = hex(NOTHING);
        negative[2..6].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(matches!(
            LearnerSubscription::decode(&negative),
            Err(LearnerWireError::NegativeLength { .. })
        ));
        let mut huge = hex(NOTHING);
        huge[2..6].copy_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(
            LearnerSubscription::decode(&huge),
            Err(LearnerWireError::Truncated("topic-partitions"))
        );
        let mut flag = hex(LEAVING);
        *flag.last_mut().unwrap() = 2;
        assert_eq!(
            LearnerSubscription::decode(&flag),
            Err(LearnerWireError::BadBool(2))
        );
        // orders[-1] as revoked.
        let mut neg_partition = hex(REVOKED_AND_LEARNING);
        neg_partition[18..22].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(
            LearnerSubscription::decode(&neg_partition),
            Err(LearnerWireError::NegativePartition(-1))
        );
        // A topic name that is not UTF-8.
        let mut utf8 = hex(REVOKED_AND_LEARNING);
        utf8[8] = 0xff;
        assert!(matches!(
            LearnerSubscription::decode(&utf8),
            Err(LearnerWireError::NotUtf8 { .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = LearnerSubscription::decode(&bytes);
            let _ = LearnerAssignment::decode(&bytes);
        }
    }
}
