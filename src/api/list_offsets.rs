//! ListOffsets (key 2), v1-11: offsets by timestamp from the in-memory logs.
//!
//! Timestamps, as Kafka 4.x answers them with no tiered storage (`UnifiedLog.
//! fetchOffsetByTimestamp`):
//! - -2 EARLIEST, and -4 EARLIEST_LOCAL (v8+): the log start offset;
//! - -1 LATEST: the high watermark (= log end offset); with isolation level read_committed
//!   (v2+), the last stable offset;
//! - -3 MAX_TIMESTAMP (v7+): the first record carrying the largest timestamp;
//! - -5 LATEST_TIERED (v9+) and -6 EARLIEST_PENDING_UPLOAD (v11+, KIP-1023): nothing is
//!   tiered, so offset -1, timestamp -1, leader epoch -1 (`fetchEarliestPendingUploadOffset`
//!   without remote storage);
//! - another negative value, or a sentinel below the version that introduced it:
//!   UNSUPPORTED_VERSION for that partition (`ReplicaManager.isListOffsetsTimestampUnsupported`);
//! - a timestamp: the first record whose timestamp is at least it, found by the batch max
//!   timestamps and then by decoding that one batch; none: offset -1, timestamp -1.
//!
//! Special timestamps answer timestamp -1. Found offsets carry leader epoch 0 from v4 (-1 when
//! nothing is found). A partition listed twice is INVALID_REQUEST for each copy; an unknown
//! topic or partition UNKNOWN_TOPIC_OR_PARTITION; `current_leader_epoch` (v4+) is checked as
//! Kafka does, -1 meaning none.

use std::collections::HashMap;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::ResponseError;

use super::check_leader_epoch;
use super::context::RequestContext;
use crate::broker::Broker;
use crate::log::Partition;
use crate::metadata::LEADER_EPOCH;
use crate::security::acl::{Operation, ResourceType};

pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL: i64 = -4;
pub const LATEST_TIERED: i64 = -5;
pub const EARLIEST_PENDING_UPLOAD: i64 = -6;
const READ_COMMITTED: i8 = 1;

/// The first version that carries each special timestamp.
fn min_version(timestamp: i64) -> Option<i16> {
    match timestamp {
        LATEST | EARLIEST => Some(1),
        MAX_TIMESTAMP => Some(7),
        EARLIEST_LOCAL => Some(8),
        LATEST_TIERED => Some(9),
        EARLIEST_PENDING_UPLOAD => Some(11),
        _ => None,
    }
}

/// `(offset, timestamp, leader epoch)` for one partition. A compressed batch decodes to
/// `max_decompressed` bytes at most, the cap Produce checked it against.
fn lookup(
    partition: &Partition,
    timestamp: i64,
    max_decompressed: usize,
    read_committed: bool,
) -> (i64, i64, i32) {
    let found = |hit: Option<(i64, i64)>| match hit {
        Some((offset, ts)) => (offset, ts, LEADER_EPOCH),
        None => (-1, -1, -1),
    };
    match timestamp {
        EARLIEST | EARLIEST_LOCAL => (partition.lock().log_start_offset(), -1, LEADER_EPOCH),
        LATEST if read_committed => (partition.lock().last_stable_offset(), -1, LEADER_EPOCH),
        LATEST => (partition.lock().log_end_offset(), -1, LEADER_EPOCH),
        LATEST_TIERED | EARLIEST_PENDING_UPLOAD => (-1, -1, -1),
        MAX_TIMESTAMP => found(partition.offset_of_max_timestamp(max_decompressed)),
        ts => found(partition.offset_for_timestamp(ts, max_decompressed)),
    }
}

pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let read_committed = version >= 2 && req.isolation_level == READ_COMMITTED;
    let mut seen: HashMap<(&str, i32), usize> = HashMap::new();
    for t in &req.topics {
        for p in &t.partitions {
            *seen
                .entry((t.name.as_str(), p.partition_index))
                .or_default() += 1;
        }
    }
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let topic = broker.topics.get(&t.name);
            // As Kafka: DESCRIBE on the topic, checked first (TOPIC_AUTHORIZATION_FAILED).
            let describable = ctx.may(broker, Operation::Describe, ResourceType::Topic, &t.name);
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let base = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    let result = (|| {
                        if !describable {
                            return Err(ResponseError::TopicAuthorizationFailed);
                        }
                        if seen.get(&(t.name.as_str(), p.partition_index)) > Some(&1) {
                            return Err(ResponseError::InvalidRequest);
                        }
                        if p.timestamp < 0
                            && min_version(p.timestamp).is_none_or(|min| version < min)
                        {
                            return Err(ResponseError::UnsupportedVersion);
                        }
                        let partition = topic
                            .as_ref()
                            .and_then(|topic| broker.logs.partition(topic, p.partition_index))
                            .ok_or(ResponseError::UnknownTopicOrPartition)?;
                        let epoch = p.current_leader_epoch;
                        check_leader_epoch((epoch != -1).then_some(epoch))?;
                        Ok(lookup(
                            &partition,
                            p.timestamp,
                            broker.config.socket_request_max_bytes,
                            read_committed,
                        ))
                    })();
                    match result {
                        Ok((offset, timestamp, epoch)) => {
                            let r = base.with_offset(offset).with_timestamp(timestamp);
                            if version >= 4 {
                                r.with_leader_epoch(epoch)
                            } else {
                                r
                            }
                        }
                        Err(e) => base.with_error_code(e.code()),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::broker;
    use crate::log::batch::tests::{batch, Spec};
    use crate::log::batch::validate_produce;
    use bytes::BytesMut;
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use kafka_protocol::records::Compression;

    fn request(parts: &[(i32, i64)]) -> ListOffsetsRequest {
        ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(
                    parts
                        .iter()
                        .map(|(p, ts)| {
                            ListOffsetsPartition::default()
                                .with_partition_index(*p)
                                .with_timestamp(*ts)
                                .with_current_leader_epoch(-1)
                        })
                        .collect(),
                )])
    }

    fn answers(resp: &ListOffsetsResponse) -> Vec<(i16, i64, i64)> {
        resp.topics[0]
            .partitions
            .iter()
            .map(|p| (p.error_code, p.offset, p.timestamp))
            .collect()
    }

    fn loaded() -> Broker {
        let b = broker();
        let topic = b.topics.get("t").unwrap();
        let p = b.logs.partition(&topic, 0).unwrap();
        // Offsets 0..=3 at 100..=130; 4..=7 (lz4) at 500..=530; 8..=9 at 200..=210.
        for (first_ts, records, compression) in [
            (100, 4, Compression::None),
            (500, 4, Compression::Lz4),
            (200, 2, Compression::None),
        ] {
            let bytes = batch(Spec {
                records,
                first_ts,
                compression,
                ..Spec::default()
            });
            p.append(&validate_produce(&bytes, 9).unwrap()).unwrap();
        }
        b
    }

    /// One partition, one timestamp: `(error, offset, timestamp)`.
    fn one(b: &Broker, partition: i32, timestamp: i64, version: i16) -> (i16, i64, i64) {
        answers(&handle(
            b,
            &crate::api::testing::ctx(b),
            request(&[(partition, timestamp)]),
            version,
        ))[0]
    }

    #[test]
    fn encodes_at_every_served_version() {
        let b = loaded();
        for v in 1..=11 {
            let resp = handle(
                &b,
                &crate::api::testing::ctx(&b),
                request(&[(0, 115), (1, -9), (9, LATEST)]),
                v,
            );
            let a = answers(&resp);
            assert_eq!(a[0], (0, 2, 120), "v{v}");
            assert_eq!(a[1].0, ResponseError::UnsupportedVersion.code());
            assert_eq!(a[2].0, ResponseError::UnknownTopicOrPartition.code());
            let epoch = resp.topics[0].partitions[0].leader_epoch;
            assert_eq!(epoch, if v >= 4 { 0 } else { -1 });
            let mut buf = BytesMut::new();
            resp.encode(&mut buf, v)
                .unwrap_or_else(|e| panic!("v{v}: {e}"));
            assert_eq!(one(&b, 0, EARLIEST, v), (0, 0, -1));
            assert_eq!(one(&b, 1, LATEST, v), (0, 0, -1));
        }
    }

    #[test]
    fn timestamps_pick_exact_records() {
        let b = loaded();
        for (partition, ts, expected) in [
            (0, 0, (0, 0, 100)),
            (0, 131, (0, 4, 500)),
            (0, 505, (0, 5, 510)),
            (0, 530, (0, 7, 530)),
            (0, 531, (0, -1, -1)),
            (0, LATEST, (0, 10, -1)),
            (0, MAX_TIMESTAMP, (0, 7, 530)),
            (1, MAX_TIMESTAMP, (0, -1, -1)),
            (0, LATEST_TIERED, (0, -1, -1)),
            (0, EARLIEST_LOCAL, (0, 0, -1)),
            (0, EARLIEST_PENDING_UPLOAD, (0, -1, -1)),
        ] {
            assert_eq!(
                one(&b, partition, ts, 11),
                expected,
                "partition {partition} at {ts}"
            );
        }
        let epoch = |partition, ts| {
            handle(
                &b,
                &crate::api::testing::ctx(&b),
                request(&[(partition, ts)]),
                9,
            )
            .topics[0]
                .partitions[0]
                .leader_epoch
        };
        assert_eq!(epoch(0, LATEST_TIERED), -1);
        assert_eq!(epoch(1, MAX_TIMESTAMP), -1);
        assert_eq!(epoch(0, MAX_TIMESTAMP), 0);
        assert_eq!(epoch(0, 531), -1);
    }

    #[test]
    fn sentinels_need_their_version_and_duplicates_are_invalid() {
        let b = loaded();
        let unsupported = ResponseError::UnsupportedVersion.code();
        let a = answers(&handle(
            &b,
            &crate::api::testing::ctx(&b),
            request(&[(0, MAX_TIMESTAMP), (1, EARLIEST_LOCAL)]),
            6,
        ));
        assert_eq!((a[0].0, a[1].0), (unsupported, unsupported));
        let a = answers(&handle(
            &b,
            &crate::api::testing::ctx(&b),
            request(&[(0, LATEST_TIERED)]),
            8,
        ));
        assert_eq!(
            one(&b, 0, EARLIEST_PENDING_UPLOAD, 10).0,
            unsupported,
            "v11's sentinel at v10"
        );
        assert_eq!(a[0].0, unsupported);
        let a = answers(&handle(
            &b,
            &crate::api::testing::ctx(&b),
            request(&[(0, LATEST), (0, EARLIEST), (1, LATEST)]),
            5,
        ));
        let invalid = ResponseError::InvalidRequest.code();
        assert_eq!((a[0].0, a[1].0, a[2].0), (invalid, invalid, 0));
    }

    #[test]
    fn leader_epoch_checks() {
        let b = loaded();
        for (epoch, code) in [
            (-1, 0),
            (0, 0),
            (1, ResponseError::UnknownLeaderEpoch.code()),
            (-2, ResponseError::FencedLeaderEpoch.code()),
        ] {
            let mut req = request(&[(0, LATEST)]);
            req.topics[0].partitions[0].current_leader_epoch = epoch;
            assert_eq!(
                answers(&handle(&b, &crate::api::testing::ctx(&b), req, 4))[0].0,
                code,
                "epoch {epoch}"
            );
        }
    }
}
