//! Fetch (key 1), v4-18: record batches from the in-memory logs, with Kafka's long poll.
//!
//! - Topics are named below v13 and identified by id from v13 (unknown: UNKNOWN_TOPIC_OR_PARTITION
//!   / UNKNOWN_TOPIC_ID; a partition the topic lacks: UNKNOWN_TOPIC_OR_PARTITION).
//! - No fetch sessions (KIP-227): every response carries session id 0, which tells the client
//!   that no session was created, so it keeps sending full fetches. A request for an incremental
//!   fetch (session epoch other than 0 or -1) names a session koord cannot have: the top-level
//!   error is FETCH_SESSION_ID_NOT_FOUND, as Kafka answers for an unknown session.
//! - Long poll: the answer waits until `min_bytes` are available, an error shows up, or
//!   `max_wait_ms` passes; appends wake the waiting request ([`AppendWatch`]), no polling.
//! - Sizes: partitions are read in request order, each up to `min(partition_max_bytes, what is
//!   left of max_bytes)`, in whole batches; until some partition returned data, the first batch
//!   of a partition is returned even if larger than both limits (KIP-74), so a consumer always
//!   makes progress. Unlike Kafka, koord never sends a trailing partial batch.
//! - A fetch offset below the log start or above the log end is OFFSET_OUT_OF_RANGE.
//! - `current_leader_epoch` (v9+): negative means none (Kafka's `FetchRequest.optionalEpoch`);
//!   above ours (0) UNKNOWN_LEADER_EPOCH.
//! - `last_fetched_epoch` (v12+, negative: none) is checked as Kafka's `Partition.readRecords`
//!   does: an epoch this node does not know (above 0) or an offset below the log start is
//!   OFFSET_OUT_OF_RANGE; an offset past the end of epoch 0 (the log end) is answered with
//!   `diverging_epoch` {0, log end offset} and no records, so the client detects the truncation
//!   (a log lost in a koord restart, say) instead of resetting blindly.
//! - Each partition reports high watermark = log end offset (one replica), the last stable
//!   offset (the first offset of the oldest open transaction, else the log end), the log start
//!   offset (v5+), `preferred_read_replica` -1 (v11+). `isolation_level` read_committed reads
//!   only below the last stable offset and lists the aborted transactions among the batches
//!   read (an empty list when none); read_uncommitted gets null, as Kafka sends them. Records are never null: an empty partition carries an
//!   empty record set (kafka-python fails on null). Error partitions report -1 offsets.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use kafka_protocol::ResponseError;
use tokio::time::Instant;
use uuid::Uuid;

use super::check_leader_epoch;
use super::context::RequestContext;
use crate::broker::Broker;
use crate::log::{AppendWatch, Partition, Read};
use crate::metadata::LEADER_EPOCH;
use crate::security::acl::Operation;

const READ_COMMITTED: i8 = 1;

/// One requested partition, resolved.
struct PartitionPlan {
    index: i32,
    fetch_offset: i64,
    max_bytes: usize,
    last_fetched_epoch: Option<i32>,
    target: Result<Arc<Partition>, ResponseError>,
}

/// What one partition's read produced.
enum PartitionRead {
    Data(Read),
    /// The fetch offset lies past the end of the last fetched epoch.
    Diverged(Read),
}

struct TopicPlan {
    name: TopicName,
    id: Uuid,
    partitions: Vec<PartitionPlan>,
}

fn plan(broker: &Broker, ctx: &RequestContext, req: &FetchRequest, version: i16) -> Vec<TopicPlan> {
    req.topics
        .iter()
        .map(|t| {
            // A consumer needs READ on the topic (TOPIC_AUTHORIZATION_FAILED), as in Kafka.
            let topic = super::resolve_topic_for(
                broker,
                ctx,
                Operation::Read,
                version >= 13,
                t.topic_id,
                &t.topic,
            );
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let target = topic.as_ref().map_err(|e| *e).and_then(|topic| {
                        let partition = broker
                            .logs
                            .partition(topic, p.partition)
                            .ok_or(ResponseError::UnknownTopicOrPartition)?;
                        let epoch = p.current_leader_epoch;
                        check_leader_epoch((epoch >= 0).then_some(epoch))?;
                        Ok(partition)
                    });
                    PartitionPlan {
                        index: p.partition,
                        fetch_offset: p.fetch_offset,
                        max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0),
                        last_fetched_epoch: (version >= 12 && p.last_fetched_epoch >= 0)
                            .then_some(p.last_fetched_epoch),
                        target,
                    }
                })
                .collect();
            TopicPlan {
                name: t.topic.clone(),
                id: t.topic_id,
                partitions,
            }
        })
        .collect()
}

fn concat(batches: Vec<Bytes>, len: usize) -> Bytes {
    match <[Bytes; 1]>::try_from(batches) {
        Ok([one]) => one,
        Err(many) => {
            let mut out = BytesMut::with_capacity(len);
            for b in many {
                out.extend_from_slice(&b);
            }
            out.freeze()
        }
    }
}

fn error_partition(index: i32, error: ResponseError) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(error.code())
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_aborted_transactions(None)
        .with_records(Some(Bytes::new()))
}

/// Reads one partition under its lock, after the last-fetched-epoch check.
fn read_partition(
    plan: &PartitionPlan,
    partition: &Partition,
    max_bytes: usize,
    min_one: bool,
    read_committed: bool,
) -> Result<PartitionRead, ResponseError> {
    let mut log = partition.lock();
    // retention.ms applies on read too: a quiet partition still loses its expired batches.
    log.expire(crate::log::now_ms());
    let offset = plan.fetch_offset;
    if let Some(epoch) = plan.last_fetched_epoch {
        if epoch != LEADER_EPOCH || offset < log.log_start_offset() {
            return Err(ResponseError::OffsetOutOfRange);
        }
        if offset > log.log_end_offset() {
            return Ok(PartitionRead::Diverged(Read {
                high_watermark: log.log_end_offset(),
                last_stable_offset: log.last_stable_offset(),
                log_start_offset: log.log_start_offset(),
                ..Read::default()
            }));
        }
    }
    log.read_isolated(offset, max_bytes, min_one, read_committed)
        .map(PartitionRead::Data)
        .map_err(|_| ResponseError::OffsetOutOfRange)
}

fn data_partition(index: i32, read: Read, read_committed: bool, version: i16) -> PartitionData {
    let mut p = PartitionData::default()
        .with_partition_index(index)
        .with_high_watermark(read.high_watermark)
        .with_last_stable_offset(read.last_stable_offset)
        .with_aborted_transactions(read_committed.then(|| {
            read.aborted
                .iter()
                .map(|&(producer_id, first_offset)| {
                    AbortedTransaction::default()
                        .with_producer_id(producer_id.into())
                        .with_first_offset(first_offset)
                })
                .collect()
        }))
        .with_records(Some(concat(read.batches, read.bytes)));
    if version >= 5 {
        p.log_start_offset = read.log_start_offset;
    }
    p
}

/// One pass over every partition: the response topics, the bytes read and whether any
/// partition has an error.
fn read_all(
    plans: &[TopicPlan],
    max_bytes: i32,
    read_committed: bool,
    version: i16,
) -> (Vec<FetchableTopicResponse>, usize, bool) {
    let mut left = usize::try_from(max_bytes).unwrap_or(0);
    let mut min_one = true;
    let mut total = 0usize;
    let mut any_error = false;
    let topics = plans
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let read = p.target.as_ref().map_err(|e| *e).and_then(|partition| {
                        read_partition(p, partition, p.max_bytes.min(left), min_one, read_committed)
                    });
                    match read {
                        Ok(PartitionRead::Diverged(read)) => {
                            // Answered at once, as an error would be (Kafka's `hasDivergingEpoch`).
                            any_error = true;
                            let end = EpochEndOffset::default()
                                .with_epoch(LEADER_EPOCH)
                                .with_end_offset(read.high_watermark);
                            data_partition(p.index, read, read_committed, version)
                                .with_diverging_epoch(end)
                        }
                        Ok(PartitionRead::Data(read)) => {
                            if read.bytes > 0 {
                                min_one = false;
                            }
                            left = left.saturating_sub(read.bytes);
                            total += read.bytes;
                            data_partition(p.index, read, read_committed, version)
                        }
                        Err(e) => {
                            any_error = true;
                            error_partition(p.index, e)
                        }
                    }
                })
                .collect();
            let entry = FetchableTopicResponse::default().with_partitions(partitions);
            if version >= 13 {
                entry.with_topic_id(t.id)
            } else {
                entry.with_topic(t.name.clone())
            }
        })
        .collect();
    (topics, total, any_error)
}

/// Answers one Fetch request, waiting up to `max_wait_ms` for `min_bytes`.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: FetchRequest,
    version: i16,
) -> FetchResponse {
    if version >= 7 && !matches!(req.session_epoch, 0 | -1) {
        return FetchResponse::default()
            .with_error_code(ResponseError::FetchSessionIdNotFound.code())
            .with_session_id(0);
    }
    let plans = plan(broker, ctx, &req, version);
    let read_committed = req.isolation_level == READ_COMMITTED;
    let wait = Duration::from_millis(u64::try_from(req.max_wait_ms).unwrap_or(0));
    let start = Instant::now();
    let deadline = start.checked_add(wait).unwrap_or(start);
    let min_bytes = usize::try_from(req.min_bytes).unwrap_or(0);
    let any_partition = plans.iter().any(|t| !t.partitions.is_empty());
    loop {
        // Registered before the read, so an append between the read and the wait counts.
        let mut watch = AppendWatch::new(
            plans
                .iter()
                .flat_map(|t| &t.partitions)
                .filter_map(|p| p.target.as_ref().ok())
                .map(|p| &**p),
        );
        let (topics, total, any_error) = read_all(&plans, req.max_bytes, read_committed, version);
        if total >= min_bytes || any_error || !any_partition || Instant::now() >= deadline {
            return FetchResponse::default().with_responses(topics);
        }
        tokio::select! {
            _ = watch.appended() => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::broker;
    use crate::log::batch::tests::simple;
    use crate::log::batch::{validate_produce, BatchHeader};
    use crate::metadata::name_based_id as topic_id;
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn request(
        version: i16,
        parts: &[(i32, i64)],
        max_wait_ms: i32,
        min_bytes: i32,
    ) -> FetchRequest {
        let mut topic = FetchTopic::default().with_partitions(
            parts
                .iter()
                .map(|(p, offset)| {
                    FetchPartition::default()
                        .with_partition(*p)
                        .with_fetch_offset(*offset)
                        .with_partition_max_bytes(1 << 20)
                })
                .collect(),
        );
        if version >= 13 {
            topic.topic_id = topic_id("t");
        } else {
            topic.topic = TopicName(StrBytes::from_static_str("t"));
        }
        FetchRequest::default()
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(min_bytes)
            .with_max_bytes(50 << 20)
            .with_topics(vec![topic])
    }

    fn produce(broker: &Broker, partition: i32, records: usize) {
        let topic = broker.topics.get("t").unwrap();
        let b = simple(records);
        broker
            .logs
            .partition(&topic, partition)
            .unwrap()
            .append(&validate_produce(&b, 9).unwrap())
            .unwrap();
    }

    fn partitions(resp: &FetchResponse) -> Vec<&PartitionData> {
        resp.responses.iter().flat_map(|t| &t.partitions).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn encodes_at_every_served_version() {
        let b = broker();
        produce(&b, 0, 3);
        produce(&b, 0, 2);
        for v in 4..=18 {
            for isolation in [0, 1] {
                let mut req = request(v, &[(0, 0), (1, 0), (0, 99), (5, 0)], 0, 0);
                req.isolation_level = isolation;
                let resp = handle(&b, &crate::api::testing::ctx(&b), req, v).await;
                let p = partitions(&resp);
                assert_eq!(p[0].error_code, 0);
                assert_eq!(p[0].high_watermark, 5);
                assert_eq!(p[0].last_stable_offset, 5);
                assert_eq!(p[0].aborted_transactions.is_some(), isolation == 1);
                assert_eq!(p[1].records.as_ref().map(Bytes::len), Some(0), "never null");
                assert_eq!(p[2].error_code, ResponseError::OffsetOutOfRange.code());
                assert_eq!(
                    p[3].error_code,
                    ResponseError::UnknownTopicOrPartition.code()
                );
                let mut buf = BytesMut::new();
                resp.encode(&mut buf, v)
                    .unwrap_or_else(|e| panic!("v{v}: {e}"));
            }
        }
        let unknown_session = handle(
            &b,
            &crate::api::testing::ctx(&b),
            request(7, &[(0, 0)], 0, 0)
                .with_session_id(5)
                .with_session_epoch(3),
            7,
        )
        .await;
        assert_eq!(
            unknown_session.error_code,
            ResponseError::FetchSessionIdNotFound.code()
        );
        unknown_session.encode(&mut BytesMut::new(), 7).unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn unknown_topic_id_and_leader_epochs() {
        let b = broker();
        let mut req = request(13, &[(0, 0)], 0, 0);
        req.topics[0].topic_id = Uuid::from_u128(42);
        let resp = handle(&b, &crate::api::testing::ctx(&b), req, 13).await;
        assert_eq!(resp.responses[0].topic_id, Uuid::from_u128(42));
        assert_eq!(
            partitions(&resp)[0].error_code,
            ResponseError::UnknownTopicId.code()
        );

        for (epoch, code) in [
            (-1, 0),
            (-7, 0),
            (0, 0),
            (1, ResponseError::UnknownLeaderEpoch.code()),
        ] {
            let mut req = request(12, &[(0, 0)], 0, 0);
            req.topics[0].partitions[0].current_leader_epoch = epoch;
            let resp = handle(&b, &crate::api::testing::ctx(&b), req, 12).await;
            assert_eq!(partitions(&resp)[0].error_code, code, "epoch {epoch}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn last_fetched_epoch_detects_a_truncated_log() {
        let b = broker();
        produce(&b, 0, 3);
        let ctx = crate::api::testing::ctx(&b);
        let fetch = |offset: i64, epoch: i32| {
            let mut req = request(12, &[(0, offset)], 10_000, 1);
            req.topics[0].partitions[0].last_fetched_epoch = epoch;
            handle(&b, &ctx, req, 12)
        };
        let start = Instant::now();
        let resp = fetch(50, 0).await;
        assert_eq!(start.elapsed(), Duration::ZERO, "answered at once");
        let p = partitions(&resp)[0];
        assert_eq!(p.error_code, 0);
        assert_eq!(
            (p.diverging_epoch.epoch, p.diverging_epoch.end_offset),
            (0, 3)
        );
        assert_eq!(p.records.as_ref().map(Bytes::len), Some(0));
        resp.encode(&mut BytesMut::new(), 12).unwrap();
        let p = fetch(50, -1).await;
        assert_eq!(
            partitions(&p)[0].error_code,
            ResponseError::OffsetOutOfRange.code()
        );
        let p = fetch(1, 4).await;
        assert_eq!(
            partitions(&p)[0].error_code,
            ResponseError::OffsetOutOfRange.code()
        );
        let p = fetch(1, 0).await;
        assert_eq!(partitions(&p)[0].diverging_epoch.epoch, -1);
        assert_eq!(partitions(&p)[0].high_watermark, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn max_bytes_caps_but_one_batch_always_comes_back() {
        let b = broker();
        for _ in 0..4 {
            produce(&b, 0, 3);
        }
        produce(&b, 1, 3);
        let batch_len = simple(3).len();
        // max_bytes of 1: still the first batch of the first non-empty partition, nothing more.
        let mut req = request(11, &[(0, 0), (1, 0)], 0, 0);
        req.max_bytes = 1;
        let resp = handle(&b, &crate::api::testing::ctx(&b), req, 11).await;
        let p = partitions(&resp);
        assert_eq!(p[0].records.as_ref().unwrap().len(), batch_len);
        assert_eq!(p[1].records.as_ref().unwrap().len(), 0);
        // partition_max_bytes bounds each partition in whole batches.
        let mut req = request(11, &[(0, 0), (1, 0)], 0, 0);
        req.topics[0].partitions[0].partition_max_bytes = (batch_len * 2 + 5) as i32;
        let resp = handle(&b, &crate::api::testing::ctx(&b), req, 11).await;
        let p = partitions(&resp);
        let data = p[0].records.clone().unwrap();
        assert_eq!(data.len(), batch_len * 2);
        let second = BatchHeader::parse(&data[batch_len..]).unwrap();
        assert_eq!(second.base_offset, 3);
        assert_eq!(p[1].records.as_ref().unwrap().len(), batch_len);
    }

    #[tokio::test(start_paused = true)]
    async fn long_poll_waits_for_data_and_wakes_on_append() {
        let b = Arc::new(broker());
        // Nothing to read: waits the whole max_wait, then answers empty.
        let start = Instant::now();
        let resp = handle(
            &b,
            &crate::api::testing::ctx(&b),
            request(12, &[(0, 0)], 500, 1),
            12,
        )
        .await;
        assert_eq!(start.elapsed(), Duration::from_millis(500));
        assert_eq!(partitions(&resp)[0].records.as_ref().unwrap().len(), 0);

        let fetcher = {
            let b = b.clone();
            tokio::spawn(async move {
                let start = Instant::now();
                let resp = handle(
                    &b,
                    &crate::api::testing::ctx(&b),
                    request(12, &[(0, 0), (1, 0)], 30_000, 1),
                    12,
                )
                .await;
                (start.elapsed(), resp)
            })
        };
        tokio::time::sleep(Duration::from_secs(2)).await;
        produce(&b, 1, 2);
        let (elapsed, resp) = fetcher.await.unwrap();
        assert_eq!(
            elapsed,
            Duration::from_secs(2),
            "woken by the append, not the timeout"
        );
        let p = partitions(&resp);
        assert_eq!(p[1].high_watermark, 2);
        assert!(!p[1].records.as_ref().unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn min_bytes_not_reached_keeps_waiting() {
        let b = Arc::new(broker());
        let fetcher = {
            let b = b.clone();
            tokio::spawn(async move {
                let start = Instant::now();
                handle(
                    &b,
                    &crate::api::testing::ctx(&b),
                    request(12, &[(0, 0)], 10_000, 1 << 20),
                    12,
                )
                .await;
                start.elapsed()
            })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        produce(&b, 0, 1);
        assert_eq!(fetcher.await.unwrap(), Duration::from_secs(10));
    }
}
