//! Reading the clients' topics upstream for koord's share groups (gateway mode: koord is the
//! share-partition leader, upstream keeps the records): ListOffsets for where a group starts
//! reading, Fetch of whole batches, and a Fetch that waits for appends (a ShareFetch's long
//! poll).
//!
//! Each request goes on a connection of its own, taken from a pool of reading connections and
//! given back: a broker answers a connection's requests in order, so a Fetch waiting for
//! appends would hold up whatever else shared its connection (koord's own writes, its
//! coordinator lookups).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::join_all;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::ResponseError;
use tracing::debug;

use super::super::upstream::{call_on, REQUEST_TIMEOUT};
use super::{retriable, Upstream, UpstreamError};

/// One partition of a Fetch answer: its whole batches (a partial one at the end dropped) and
/// where the log stands.
#[derive(Debug, Clone, Default)]
pub struct Fetched {
    pub batches: Vec<Bytes>,
    /// read_committed: `(producer id, first offset)` of the aborted transactions among them.
    pub aborted: Vec<(i64, i64)>,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
}

/// Why a partition could not be read: upstream's error code (a leader that moved, or none
/// reachable, is NOT_LEADER_OR_FOLLOWER: the client refreshes its metadata and asks again).
pub type ReadError = ResponseError;

/// What a partition's read failed with, for the client: retriable failures (the leader moved,
/// upstream unreachable) as NOT_LEADER_OR_FOLLOWER, which a client retries after refreshing its
/// metadata; anything else as upstream's code.
fn read_error(code: i16) -> ReadError {
    match ResponseError::try_from_code(code) {
        Some(ResponseError::UnknownTopicOrPartition) => ResponseError::UnknownTopicOrPartition,
        Some(_) if retriable(code) => ResponseError::NotLeaderOrFollower,
        Some(ResponseError::Unknown(_)) | None => ResponseError::UnknownServerError,
        Some(e) => e,
    }
}

impl Upstream {
    /// One request to broker `node` on a reading connection.
    async fn call_reading<R: Request>(
        &self,
        node: i32,
        v: i16,
        req: &R,
    ) -> Result<R::Response, UpstreamError> {
        let conn = match self.readers.take(node) {
            Some(c) => c,
            None => self.connect_to(node).await?,
        };
        let answer = call_on(&conn, v, req).await;
        self.readers.put(node, conn);
        answer
    }

    /// The leaders of `partitions` (topic, partition), re-reading upstream's metadata once for
    /// those not known; `None` for a partition with no leader.
    async fn leaders_of(&self, partitions: &[(String, i32)]) -> Vec<Option<i32>> {
        let unknown: Vec<&str> = partitions
            .iter()
            .filter(|(t, p)| self.leader(t, *p).is_none())
            .map(|(t, _)| t.as_str())
            .collect();
        if !unknown.is_empty() {
            let mut topics = unknown;
            topics.sort_unstable();
            topics.dedup();
            if let Err(e) = self.refresh(&topics).await {
                debug!(error = %e, "upstream metadata for share reads");
            }
        }
        partitions.iter().map(|(t, p)| self.leader(t, *p)).collect()
    }

    /// Forgets where `partitions` are led after one failed: the next read asks again.
    fn forget_leaders(&self, partitions: &[(String, i32)]) {
        let mut leaders = self.leaders.write().unwrap_or_else(|e| e.into_inner());
        for (t, p) in partitions {
            leaders.remove(&(t.clone(), *p));
        }
    }

    /// The offset of each of `partitions` (topic, partition) at `timestamp` (-2: the log
    /// start, -1: the log end, else the first record at or after it, -1 when none), in order.
    pub async fn offsets_at(
        &self,
        partitions: &[(String, i32)],
        timestamp: i64,
    ) -> Vec<Result<i64, ReadError>> {
        let by_leader = by_leader(&self.leaders_of(partitions).await);
        let mut out: Vec<Result<i64, ReadError>> =
            vec![Err(ResponseError::NotLeaderOrFollower); partitions.len()];
        let calls = by_leader.into_iter().map(|(leader, idx)| async move {
            let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            for &i in &idx {
                topics
                    .entry(partitions[i].0.as_str())
                    .or_default()
                    .push(partitions[i].1);
            }
            let req = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(t, ps)| {
                            ListOffsetsTopic::default()
                                .with_name(TopicName(StrBytes::from_string(t.to_string())))
                                .with_partitions(
                                    ps.into_iter()
                                        .map(|p| {
                                            ListOffsetsPartition::default()
                                                .with_partition_index(p)
                                                .with_current_leader_epoch(-1)
                                                .with_timestamp(timestamp)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            (idx, self.call_reading(leader, 7, &req).await)
        });
        for (idx, answer) in join_all(calls).await {
            let resp = match answer {
                Ok(r) => r,
                Err(e) => {
                    debug!(error = %e, "upstream ListOffsets for a share group");
                    let lost: Vec<_> = idx.iter().map(|&i| partitions[i].clone()).collect();
                    self.forget_leaders(&lost);
                    continue;
                }
            };
            for t in resp.topics {
                for p in t.partitions {
                    let Some(&i) = idx.iter().find(|&&i| {
                        partitions[i].0 == t.name.as_str() && partitions[i].1 == p.partition_index
                    }) else {
                        continue;
                    };
                    out[i] = if p.error_code == 0 {
                        Ok(p.offset)
                    } else {
                        if retriable(p.error_code) {
                            self.forget_leaders(&partitions[i..=i]);
                        }
                        Err(read_error(p.error_code))
                    };
                }
            }
        }
        out
    }

    /// One read of each of `reads` (topic, partition, offset) from its leader, at most
    /// `max_bytes` in all per leader (at least one batch), `read_committed` or not; with
    /// `wait` each leader holds its answer until it has a byte to send or `wait` passed. In
    /// order.
    pub async fn fetch_records(
        &self,
        reads: &[(String, i32, i64)],
        max_bytes: usize,
        read_committed: bool,
        wait: Duration,
    ) -> Vec<Result<Fetched, ReadError>> {
        let keys: Vec<(String, i32)> = reads.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
        let by_leader = by_leader(&self.leaders_of(&keys).await);
        let mut out: Vec<Result<Fetched, ReadError>> =
            vec![Err(ResponseError::NotLeaderOrFollower); reads.len()];
        let max = i32::try_from(max_bytes).unwrap_or(i32::MAX).max(1);
        let wait_ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
        let calls = by_leader.into_iter().map(|(leader, idx)| async move {
            let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
            for &i in &idx {
                let (t, p, offset) = &reads[i];
                topics.entry(t.as_str()).or_default().push(
                    FetchPartition::default()
                        .with_partition(*p)
                        .with_current_leader_epoch(-1)
                        .with_fetch_offset(*offset)
                        .with_log_start_offset(-1)
                        .with_partition_max_bytes(max),
                );
            }
            let req = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(wait_ms)
                .with_min_bytes(1)
                .with_max_bytes(max)
                .with_isolation_level(i8::from(read_committed))
                .with_session_epoch(-1)
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(t, ps)| {
                            FetchTopic::default()
                                .with_topic(TopicName(StrBytes::from_string(t.to_string())))
                                .with_partitions(ps)
                        })
                        .collect(),
                );
            // The wait is upstream's; the request's own timeout starts after it.
            let answer =
                tokio::time::timeout(wait + REQUEST_TIMEOUT, self.call_reading(leader, 12, &req))
                    .await
                    .unwrap_or_else(|_| Err(UpstreamError::Unreachable("Fetch timed out".into())));
            (idx, answer)
        });
        for (idx, answer) in join_all(calls).await {
            let resp = match answer {
                Ok(r) if r.error_code == 0 => r,
                Ok(r) => {
                    for &i in &idx {
                        out[i] = Err(read_error(r.error_code));
                    }
                    continue;
                }
                Err(e) => {
                    debug!(error = %e, "upstream Fetch for a share group");
                    let lost: Vec<_> = idx.iter().map(|&i| keys[i].clone()).collect();
                    self.forget_leaders(&lost);
                    continue;
                }
            };
            for t in resp.responses {
                for p in t.partitions {
                    let Some(&i) = idx.iter().find(|&&i| {
                        keys[i].0 == t.topic.as_str() && keys[i].1 == p.partition_index
                    }) else {
                        continue;
                    };
                    if p.error_code != 0 {
                        if retriable(p.error_code) {
                            self.forget_leaders(&keys[i..=i]);
                        }
                        out[i] = Err(read_error(p.error_code));
                        continue;
                    }
                    out[i] = Ok(Fetched {
                        batches: whole_batches(p.records.unwrap_or_default()),
                        aborted: p
                            .aborted_transactions
                            .unwrap_or_default()
                            .iter()
                            .map(|a| (a.producer_id.0, a.first_offset))
                            .collect(),
                        high_watermark: p.high_watermark,
                        last_stable_offset: p.last_stable_offset,
                        log_start_offset: p.log_start_offset,
                    });
                }
            }
        }
        out
    }
}

impl Upstream {
    /// The records of `partition` of `topic` from `from` (one read, waiting up to `wait` for
    /// one), the offset to read next and the partition's high watermark: where a reader that
    /// follows a topic (koord's group configs) goes on. A `from` below the log start reads
    /// from there.
    ///
    /// # Errors
    /// The partition could not be read.
    pub async fn follow(
        &self,
        topic: &str,
        partition: i32,
        from: i64,
        wait: Duration,
    ) -> Result<(Vec<super::KeyValue>, i64, i64), UpstreamError> {
        let read = [(topic.to_string(), partition, from)];
        let fetched = self
            .fetch_records(&read, FOLLOW_MAX_BYTES, false, wait)
            .await
            .pop()
            .unwrap_or(Err(ResponseError::NotLeaderOrFollower));
        match fetched {
            Ok(f) => {
                let mut data = bytes::BytesMut::new();
                for b in &f.batches {
                    data.extend_from_slice(b);
                }
                let (records, next) = super::topics::decode_batches(data.freeze(), from)?;
                Ok((records, next, f.high_watermark))
            }
            Err(ResponseError::OffsetOutOfRange) => {
                let start = self
                    .offsets_at(&[(topic.to_string(), partition)], -2)
                    .await
                    .pop()
                    .unwrap_or(Err(ResponseError::NotLeaderOrFollower))
                    .map_err(|e| UpstreamError::refused(e.code(), "ListOffsets"))?;
                Ok((Vec::new(), start.max(from), -1))
            }
            Err(e) => Err(UpstreamError::refused(e.code(), format!("Fetch {topic}"))),
        }
    }
}

/// At most this much of a followed topic per read.
const FOLLOW_MAX_BYTES: usize = 1 << 20;

/// The indices of partitions by their leader (those with none left out: they answer
/// NOT_LEADER_OR_FOLLOWER).
fn by_leader(leaders: &[Option<i32>]) -> BTreeMap<i32, Vec<usize>> {
    let mut out: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for (i, leader) in leaders.iter().enumerate() {
        if let Some(l) = leader {
            out.entry(*l).or_default().push(i);
        }
    }
    out
}

/// The whole batches of a Fetch answer's records, each its own bytes; a partial batch at the
/// end (a Fetch answer may end in one) and anything unreadable after a whole one are left out.
pub fn whole_batches(mut data: Bytes) -> Vec<Bytes> {
    // Batch header: base offset (8), batch length (4) counting what follows it.
    const LENGTH_END: usize = 12;
    let mut out = Vec::new();
    while data.len() >= LENGTH_END {
        let len = i32::from_be_bytes([data[8], data[9], data[10], data[11]]);
        let Ok(len) = usize::try_from(len) else {
            break;
        };
        let Some(total) = LENGTH_END.checked_add(len) else {
            break;
        };
        if data.len() < total {
            break;
        }
        out.push(data.split_to(total));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    fn batch(base: i64, body: usize) -> Vec<u8> {
        let mut b = base.to_be_bytes().to_vec();
        b.extend_from_slice(&(body as i32).to_be_bytes());
        b.extend(std::iter::repeat_n(7u8, body));
        b
    }

    #[test]
    fn a_fetch_answer_splits_into_its_whole_batches() {
        let mut data = BytesMut::new();
        data.extend_from_slice(&batch(0, 50));
        data.extend_from_slice(&batch(3, 20));
        let cut = batch(9, 40);
        data.extend_from_slice(&cut[..30]);
        let out = whole_batches(data.freeze());
        assert_eq!(out.len(), 2, "the partial third batch is left out");
        assert_eq!(out[0].len(), 62);
        assert_eq!(&out[1][..8], &3i64.to_be_bytes());
    }

    #[test]
    fn garbage_lengths_end_the_split_without_a_panic() {
        let mut data = BytesMut::new();
        data.extend_from_slice(&batch(0, 10));
        data.extend_from_slice(&0i64.to_be_bytes());
        data.extend_from_slice(&(-5i32).to_be_bytes());
        assert_eq!(whole_batches(data.freeze()).len(), 1);
        assert!(whole_batches(Bytes::from_static(&[1, 2, 3])).is_empty());
    }

    #[test]
    fn errors_reach_the_client_as_kafka_codes_it_retries_or_reports() {
        let code = |e: ResponseError| e.code();
        assert_eq!(
            read_error(code(ResponseError::LeaderNotAvailable)),
            ResponseError::NotLeaderOrFollower
        );
        assert_eq!(
            read_error(code(ResponseError::NotLeaderOrFollower)),
            ResponseError::NotLeaderOrFollower
        );
        assert_eq!(
            read_error(code(ResponseError::UnknownTopicOrPartition)),
            ResponseError::UnknownTopicOrPartition
        );
        assert_eq!(
            read_error(code(ResponseError::TopicAuthorizationFailed)),
            ResponseError::TopicAuthorizationFailed
        );
        assert_eq!(read_error(-77), ResponseError::UnknownServerError);
    }
}
