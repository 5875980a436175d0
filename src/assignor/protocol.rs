//! The embedded consumer protocol: `ConsumerProtocolSubscription` (a member's JoinGroup
//! metadata) and `ConsumerProtocolAssignment` (its SyncGroup assignment), each a 2-byte version
//! followed by the message at that version.
//!
//! Decoding follows Kafka's `ConsumerProtocol`: a version above the highest known is read as the
//! highest known (later versions only append fields) and bytes after the known fields are
//! ignored; a negative version, a short or malformed body, or a negative partition number is an
//! error. The decoder is the vendored `kafka-protocol` one, whose array lengths are checked
//! against the bytes present before anything is allocated.
//!
//! [`subscription_topics`] is laxer on purpose: offset retention and OffsetDelete only need the
//! topics, so, like Kafka, it parses the v0 prefix every version starts with (version, topics)
//! and ignores the rest, which no future or malformed later field can break.

use std::collections::BTreeSet;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::{
    ConsumerProtocolAssignment, TopicPartition as AssignedTopic,
};
use kafka_protocol::messages::consumer_protocol_subscription::{
    ConsumerProtocolSubscription, TopicPartition as OwnedTopic,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use thiserror::Error;

use crate::vocab::reader::Reader;

/// The highest version of both messages this build knows.
pub const HIGHEST_VERSION: i16 = 3;

/// Why consumer protocol bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProtocolError {
    #[error("{0} bytes: too short for a version")]
    Short(usize),
    #[error("negative version {0}")]
    NegativeVersion(i16),
    #[error("malformed body: {0}")]
    Malformed(String),
    #[error("negative partition {partition} of topic {topic}")]
    NegativePartition { topic: String, partition: i32 },
}

/// A topic and partition numbers, by name.
pub type TopicPartitions = Vec<(String, Vec<i32>)>;

/// A decoded `ConsumerProtocolSubscription`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subscription {
    /// The version the member wrote (possibly above [`HIGHEST_VERSION`]).
    pub version: i16,
    pub topics: Vec<String>,
    pub user_data: Option<Bytes>,
    /// v1+: what the member says it owns (cooperative members keep partitions across joins).
    pub owned_partitions: TopicPartitions,
    /// v2+: the generation of `owned_partitions`; -1 when unknown.
    pub generation: i32,
    /// v3+.
    pub rack: Option<String>,
}

impl Subscription {
    /// The assignment version this member reads: its own subscription version, capped at ours.
    pub fn assignment_version(&self) -> i16 {
        self.version.min(HIGHEST_VERSION)
    }
}

/// Splits off the version prefix and gives the version to decode the body at.
fn version_of(bytes: &mut Bytes) -> Result<(i16, i16), ProtocolError> {
    if bytes.len() < 2 {
        return Err(ProtocolError::Short(bytes.len()));
    }
    let version = bytes.get_i16();
    if version < 0 {
        return Err(ProtocolError::NegativeVersion(version));
    }
    Ok((version, version.min(HIGHEST_VERSION)))
}

/// Decoded `(topic, partitions)` lists, every partition number checked.
fn topic_partitions(
    list: impl Iterator<Item = (TopicName, Vec<i32>)>,
) -> Result<TopicPartitions, ProtocolError> {
    list.map(|(topic, partitions)| {
        let topic = topic.0.to_string();
        if let Some(&partition) = partitions.iter().find(|&&p| p < 0) {
            return Err(ProtocolError::NegativePartition { topic, partition });
        }
        Ok((topic, partitions))
    })
    .collect()
}

/// Decodes a member's subscription.
///
/// # Errors
/// See the module docs; the caller answers INCONSISTENT_GROUP_PROTOCOL.
pub fn decode_subscription(bytes: &Bytes) -> Result<Subscription, ProtocolError> {
    let mut buf = bytes.clone();
    let (version, read_as) = version_of(&mut buf)?;
    let s = ConsumerProtocolSubscription::decode(&mut buf, read_as)
        .map_err(|e| ProtocolError::Malformed(e.to_string()))?;
    let owned_partitions = topic_partitions(
        s.owned_partitions
            .into_iter()
            .map(|tp| (tp.topic, tp.partitions)),
    )?;
    Ok(Subscription {
        version,
        topics: s.topics.into_iter().map(|t| t.to_string()).collect(),
        user_data: s.user_data,
        owned_partitions,
        generation: if read_as >= 2 { s.generation_id } else { -1 },
        rack: s.rack_id.map(|r| r.to_string()),
    })
}

/// The topics of a serialized subscription of any version (even a negative one), from its v0
/// prefix alone; `None` if that prefix does not parse.
pub fn subscription_topics(bytes: &[u8]) -> Option<Vec<String>> {
    let mut r = Reader::new(bytes);
    let _version = r.i16("version").ok()?;
    // Each topic takes at least its 2-byte length.
    let count = r.count_i32("topics", 2).ok()?;
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        topics.push(r.str_i16("topic").ok()?.to_owned());
    }
    Some(topics)
}

/// The union of the topics of several subscriptions; `None` if any does not parse.
pub fn union_of_topics<'a>(
    subscriptions: impl IntoIterator<Item = &'a [u8]>,
) -> Option<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for s in subscriptions {
        all.extend(subscription_topics(s)?);
    }
    Some(all)
}

/// Encodes a subscription at `version` (0..=3), for clients and tests.
pub fn encode_subscription(s: &Subscription, version: i16) -> Bytes {
    let msg = ConsumerProtocolSubscription::default()
        .with_topics(
            s.topics
                .iter()
                .map(|t| StrBytes::from_string(t.clone()))
                .collect(),
        )
        .with_user_data(s.user_data.clone())
        .with_owned_partitions(
            s.owned_partitions
                .iter()
                .map(|(t, ps)| {
                    OwnedTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(t.clone())))
                        .with_partitions(ps.clone())
                })
                .collect(),
        )
        .with_generation_id(s.generation)
        .with_rack_id(s.rack.clone().map(StrBytes::from_string));
    encode(&msg, version)
}

/// Decodes an assignment's partitions.
///
/// # Errors
/// See the module docs.
pub fn decode_assignment(bytes: &Bytes) -> Result<(TopicPartitions, Option<Bytes>), ProtocolError> {
    let mut buf = bytes.clone();
    let (_, read_as) = version_of(&mut buf)?;
    let a = ConsumerProtocolAssignment::decode(&mut buf, read_as)
        .map_err(|e| ProtocolError::Malformed(e.to_string()))?;
    let partitions = topic_partitions(
        a.assigned_partitions
            .into_iter()
            .map(|tp| (tp.topic, tp.partitions)),
    )?;
    Ok((partitions, a.user_data))
}

/// Encodes an assignment at `version` (0..=3; every version has the same fields).
pub fn encode_assignment(
    partitions: &TopicPartitions,
    user_data: Option<Bytes>,
    version: i16,
) -> Bytes {
    let msg = ConsumerProtocolAssignment::default()
        .with_assigned_partitions(
            partitions
                .iter()
                .map(|(t, ps)| {
                    AssignedTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(t.clone())))
                        .with_partitions(ps.clone())
                })
                .collect(),
        )
        .with_user_data(user_data);
    encode(&msg, version)
}

fn encode<M: Encodable>(msg: &M, version: i16) -> Bytes {
    let version = version.clamp(0, HIGHEST_VERSION);
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&version.to_be_bytes());
    // Every field is representable at every version we write (only defaults are dropped by
    // older versions), and a topic or partition list cannot exceed i32 lengths here.
    msg.encode(&mut buf, version)
        .expect("consumer protocol message encodes");
    buf.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(topics: &[&str], owned: &[(&str, &[i32])]) -> Subscription {
        Subscription {
            version: 3,
            topics: topics.iter().map(|t| t.to_string()).collect(),
            user_data: Some(Bytes::from_static(b"ud")),
            owned_partitions: owned
                .iter()
                .map(|(t, ps)| (t.to_string(), ps.to_vec()))
                .collect(),
            generation: 7,
            rack: Some("r1".into()),
        }
    }

    #[test]
    fn subscription_round_trips_at_every_version() {
        let s = sub(&["a", "b"], &[("a", &[0, 2])]);
        for v in 0..=3 {
            let decoded = decode_subscription(&encode_subscription(&s, v)).unwrap();
            assert_eq!(decoded.version, v);
            assert_eq!(decoded.topics, s.topics);
            assert_eq!(decoded.user_data, s.user_data);
            assert_eq!(decoded.owned_partitions.is_empty(), v < 1);
            assert_eq!(decoded.generation, if v >= 2 { 7 } else { -1 });
            assert_eq!(decoded.rack.is_some(), v >= 3);
        }
    }

    #[test]
    fn a_later_version_reads_as_the_highest_known_and_trailing_bytes_are_ignored() {
        let s = sub(&["a"], &[]);
        let mut raw = BytesMut::from(&encode_subscription(&s, 3)[..]);
        raw[1] = 9;
        raw.extend_from_slice(b"future fields");
        let decoded = decode_subscription(&raw.freeze()).unwrap();
        assert_eq!(decoded.version, 9);
        assert_eq!(decoded.assignment_version(), 3);
        assert_eq!(decoded.topics, vec!["a".to_string()]);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let bad: &[&[u8]] = &[
            b"",
            b"\x00",
            b"\xff\xff\x00\x00\x00\x00",          // version -1
            b"\x00\x00\x7f\xff\xff\xff",          // 2^31-1 topics, no bytes behind
            b"\x00\x00\x00\x00\x00\x01\x00\x09ab", // topic name shorter than its length
            b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x01\x00\x01a\x00\x00\x00\x01\xff\xff\xff\xff",
        ];
        for b in bad {
            assert!(
                decode_subscription(&Bytes::from_static(b)).is_err(),
                "{b:?}"
            );
        }
        for b in &bad[..5] {
            assert!(decode_assignment(&Bytes::from_static(b)).is_err(), "{b:?}");
        }
    }

    /// A v0 subscription of `topics` with no user data.
    fn v0(topics: &[&str]) -> Bytes {
        let s = Subscription {
            topics: topics.iter().map(|t| t.to_string()).collect(),
            ..Subscription::default()
        };
        encode_subscription(&s, 0)
    }

    #[test]
    fn parses_the_topics_of_a_subscription_and_rejects_garbage() {
        let bytes = v0(&["orders", "events"]).to_vec();
        assert_eq!(
            subscription_topics(&bytes),
            Some(vec!["orders".to_owned(), "events".to_owned()])
        );
        // A later version: same prefix, more fields after.
        let mut v3 = bytes.clone();
        v3[1] = 3;
        v3.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 7]);
        assert!(subscription_topics(&v3).is_some());
        assert_eq!(subscription_topics(b"\x00"), None);
        // A huge count with no data behind it allocates nothing and fails.
        assert_eq!(subscription_topics(b"\x00\x00\x7f\xff\xff\xff"), None);
        assert_eq!(
            subscription_topics(b"\x00\x00\x00\x00\x00\x01\x00\x09ab"),
            None
        );
        let all = union_of_topics([bytes.as_slice(), v0(&["x"]).as_ref()]);
        assert_eq!(all.map(|s| s.len()), Some(3));
    }

    #[test]
    fn topics_parse_from_the_prefix_where_the_full_decode_refuses() {
        // Version 0, topics, null user data: the bytes every koord test subscription had.
        assert_eq!(
            v0(&["x"]).as_ref(),
            b"\x00\x00\x00\x00\x00\x01\x00\x01x\xff\xff\xff\xff"
        );
        // v1 with topic "t" and an owned partition -1: the decode refuses, the topics parse.
        let bad_owned = b"\x00\x01\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff\x00\x00\x00\x01\x00\x01a\x00\x00\x00\x01\xff\xff\xff\xff";
        assert!(decode_subscription(&Bytes::from_static(bad_owned)).is_err());
        assert_eq!(subscription_topics(bad_owned), Some(vec!["t".to_owned()]));
        // A negative version, and a v0 body cut after its topics.
        let negative = b"\xff\xff\x00\x00\x00\x01\x00\x01t";
        assert!(decode_subscription(&Bytes::from_static(negative)).is_err());
        assert_eq!(subscription_topics(negative), Some(vec!["t".to_owned()]));
        let cut = b"\x00\x00\x00\x00\x00\x01\x00\x01t";
        assert!(decode_subscription(&Bytes::from_static(cut)).is_err());
        assert_eq!(subscription_topics(cut), Some(vec!["t".to_owned()]));
        // A null topic name (length -1) is no topic list.
        assert_eq!(
            subscription_topics(b"\x00\x00\x00\x00\x00\x01\xff\xff"),
            None
        );
    }

    #[test]
    fn assignment_round_trips() {
        let parts: TopicPartitions = vec![("a".into(), vec![0, 1]), ("b".into(), vec![3])];
        for v in 0..=3 {
            let bytes = encode_assignment(&parts, None, v);
            assert_eq!(&bytes[..2], &v.to_be_bytes());
            assert_eq!(decode_assignment(&bytes).unwrap(), (parts.clone(), None));
        }
    }
}
