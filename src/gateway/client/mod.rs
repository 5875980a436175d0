//! koord's own Kafka client to the upstream cluster, for what gateway mode keeps there: the
//! groups' offsets in the upstream `__consumer_offsets` (OffsetCommit as a standalone commit,
//! OffsetFetch, OffsetDelete, DeleteGroups and TxnOffsetCommit sent to the upstream group
//! coordinator) and koord's group records in its compacted topic (CreateTopics, Produce with
//! acks=all, ListOffsets and Fetch to read it back at start-up).
//!
//! One pipelined connection per upstream broker ([`UpstreamConn`], the gateway's own correlation
//! ids), made on first use and again after it ends. Every operation retries what Kafka calls
//! retriable (a moved leader or coordinator, a broker restarting, too few in-sync replicas)
//! after re-reading where to go, until its deadline; then it fails, and whatever depended on it
//! is not acknowledged.
//!
//! This file is the client's core: [`Upstream`] and its builders, the way to a broker, to any
//! broker and to a group's or a transaction's coordinator, the retry around a group's
//! coordinator, the Metadata refresh of leaders, and the write path of koord's topic (Produce,
//! [`ProducerStamp`]). The operations on upstream's groups (offsets, DeleteGroups, ListGroups,
//! DescribeGroups, TxnOffsetCommit) are in `groups.rs`; creating topics and reading koord's
//! topic back (ListOffsets, Fetch) in `topics.rs`. Both add methods to [`Upstream`].

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    FindCoordinatorRequest, InitProducerIdRequest, MetadataRequest, ProduceRequest, ProducerId,
    TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::ResponseError;
use tracing::debug;

pub use super::upstream::{call_on, UpstreamError};
use super::upstream::{connect, retriable, Pool, UpstreamConn};
use crate::security::client::ClientSecurity;

mod groups;
pub mod records;
mod topics;

/// How long an operation for a group retries upstream's coordinator while it moves or loads,
/// unless [`Upstream::with_retry_for`] says otherwise (`upstream.write.timeout.ms`, Kafka's
/// `offsets.commit.timeout.ms`): long enough for upstream to elect a new leader of the group's
/// `__consumer_offsets` partition and load it.
pub const DEFAULT_RETRY_FOR: Duration = Duration::from_secs(10);
/// Longest pause between two tries of a retried operation.
const MAX_BACKOFF: Duration = Duration::from_millis(500);
/// How long start-up may wait for upstream (creating and reading koord's topic).
pub const STARTUP: Duration = Duration::from_secs(60);
/// How long one try of a group's operation waits for upstream's coordinator before it looks
/// the coordinator up again and retries (within the operation's budget).
const ATTEMPT: Duration = Duration::from_secs(5);
/// How long a request to any broker (Metadata, FindCoordinator, CreateTopics) waits for one
/// broker before it asks the next.
const ANY_TIMEOUT: Duration = Duration::from_secs(5);

/// A record of koord's topic as read back: key and value (`None`: a tombstone).
pub type KeyValue = (Bytes, Option<Bytes>);

/// The client. Cheap to share; every method may be called concurrently.
#[derive(Debug)]
pub struct Upstream {
    bootstrap: Vec<String>,
    /// Broker id -> `host:port`, from the last Metadata answer.
    brokers: RwLock<BTreeMap<i32, String>>,
    conns: Mutex<HashMap<i32, Arc<UpstreamConn>>>,
    /// (topic, partition) -> leader, from the last Metadata answer for the topic.
    leaders: RwLock<HashMap<(String, i32), i32>>,
    /// Group id -> its upstream coordinator.
    coordinators: RwLock<HashMap<String, i32>>,
    next: AtomicUsize,
    /// How every connection is made (`upstream.security.protocol` and the rest).
    security: Arc<ClientSecurity>,
    /// How long a group's operation retries upstream ([`DEFAULT_RETRY_FOR`]).
    retry_for: Duration,
    /// Connections of their own for share groups' reads ([`records`]).
    readers: Pool,
}

impl Upstream {
    /// A client for the cluster at `bootstrap` (`host:port` each), knowing `brokers` already.
    pub fn new(bootstrap: Vec<String>, brokers: BTreeMap<i32, String>) -> Upstream {
        Upstream {
            bootstrap,
            brokers: RwLock::new(brokers),
            conns: Mutex::new(HashMap::new()),
            leaders: RwLock::new(HashMap::new()),
            coordinators: RwLock::new(HashMap::new()),
            next: AtomicUsize::new(0),
            security: Arc::new(ClientSecurity::plaintext()),
            retry_for: DEFAULT_RETRY_FOR,
            readers: Pool::default(),
        }
    }

    /// This client, retrying a group's operations through upstream's coordinator moves and
    /// loads for `retry_for` (`upstream.write.timeout.ms`) before they fail.
    pub fn with_retry_for(mut self, retry_for: Duration) -> Upstream {
        self.retry_for = retry_for;
        self
    }

    /// How long a group's operation retries upstream.
    pub fn retry_for(&self) -> Duration {
        self.retry_for
    }

    /// This client, connecting with `security` (TLS, SASL) instead of PLAINTEXT.
    pub fn with_security(mut self, security: Arc<ClientSecurity>) -> Upstream {
        self.security = security;
        self
    }

    fn addr_of(&self, node: i32) -> Option<String> {
        self.brokers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&node)
            .cloned()
    }

    /// A new connection to broker `node`.
    async fn connect_to(&self, node: i32) -> Result<UpstreamConn, UpstreamError> {
        let addr = self
            .addr_of(node)
            .ok_or_else(|| UpstreamError::Unreachable(format!("broker {node} unknown")))?;
        connect(&addr, &self.security)
            .await
            .map_err(|e| UpstreamError::Unreachable(e.to_string()))
    }

    /// The live connection to `node`, connecting if there is none.
    async fn conn(&self, node: i32) -> Result<Arc<UpstreamConn>, UpstreamError> {
        if let Some(c) = self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&node)
            .filter(|c| c.is_alive())
        {
            return Ok(c.clone());
        }
        let c = Arc::new(self.connect_to(node).await?);
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(node, c.clone());
        Ok(c)
    }

    /// One request to broker `node` at version `v`, its answer decoded.
    async fn call<R: Request>(
        &self,
        node: i32,
        v: i16,
        req: &R,
    ) -> Result<R::Response, UpstreamError> {
        let conn = self.conn(node).await?;
        call_on(&conn, v, req).await
    }

    /// Every known broker, starting at a rotating one.
    fn any_order(&self) -> Vec<i32> {
        let ids: Vec<i32> = self
            .brokers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .copied()
            .collect();
        rotated(ids, &self.next)
    }

    /// A request to whichever broker answers first (admin requests any broker serves).
    async fn call_any<R: Request>(&self, v: i16, req: &R) -> Result<R::Response, UpstreamError> {
        let mut last = UpstreamError::Unreachable("no upstream broker known".into());
        for node in self.any_order() {
            match tokio::time::timeout(ANY_TIMEOUT, self.call(node, v, req)).await {
                Ok(Ok(r)) => return Ok(r),
                Ok(Err(e)) => last = e,
                Err(_) => {
                    last = UpstreamError::Unreachable(format!("broker {node} did not answer"))
                }
            }
        }
        // Every known broker failed: the bootstrap servers, in case the cluster moved.
        for addr in &self.bootstrap {
            let once = async {
                let c = connect(addr, &self.security)
                    .await
                    .map_err(|e| UpstreamError::Unreachable(e.to_string()))?;
                call_on(&c, v, req).await
            };
            match tokio::time::timeout(ANY_TIMEOUT, once).await {
                Ok(Ok(r)) => return Ok(r),
                Ok(Err(e)) => last = e,
                Err(_) => last = UpstreamError::Unreachable(format!("{addr} did not answer")),
            }
        }
        Err(last)
    }

    /// Re-reads the brokers and the leaders of `topics` (none: brokers only).
    async fn refresh(&self, topics: &[&str]) -> Result<(), UpstreamError> {
        let req = MetadataRequest::default().with_topics(Some(
            topics
                .iter()
                .map(|t| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string((*t).to_string()))))
                })
                .collect(),
        ));
        let md = self.call_any(12, &req).await?;
        let brokers: BTreeMap<i32, String> = md
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        if !brokers.is_empty() {
            let mut known = self.brokers.write().unwrap_or_else(|e| e.into_inner());
            let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
            for (id, addr) in &brokers {
                if known.get(id) != Some(addr) {
                    conns.remove(id);
                }
            }
            *known = brokers;
        }
        let mut leaders = self.leaders.write().unwrap_or_else(|e| e.into_inner());
        for t in &md.topics {
            let Some(name) = &t.name else { continue };
            for p in &t.partitions {
                let key = (name.as_str().to_string(), p.partition_index);
                if p.error_code == 0 && p.leader_id.0 >= 0 {
                    leaders.insert(key, p.leader_id.0);
                } else {
                    leaders.remove(&key);
                }
            }
        }
        Ok(())
    }

    fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.leaders
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(topic.to_string(), partition))
            .copied()
    }

    /// The upstream coordinator of `group`, asking FindCoordinator when not known.
    async fn coordinator(&self, group: &str) -> Result<i32, UpstreamError> {
        if let Some(n) = self
            .coordinators
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(group)
        {
            return Ok(*n);
        }
        let req = FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![StrBytes::from_string(group.to_string())]);
        let resp = self.call_any(4, &req).await?;
        let c = resp
            .coordinators
            .first()
            .ok_or_else(|| UpstreamError::Protocol("FindCoordinator: no coordinator".into()))?;
        if c.error_code != 0 {
            return Err(UpstreamError::refused(c.error_code, "FindCoordinator"));
        }
        let node = c.node_id.0;
        let addr = format!("{}:{}", c.host.as_str(), c.port);
        {
            let mut brokers = self.brokers.write().unwrap_or_else(|e| e.into_inner());
            if brokers.get(&node) != Some(&addr) {
                brokers.insert(node, addr);
                self.conns
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&node);
            }
        }
        self.coordinators
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(group.to_string(), node);
        Ok(node)
    }

    /// InitProducerId for `transactional_id`: its producer id and a new epoch, which fences
    /// every holder of an older one. With `current` (the id and epoch the caller holds, KIP-360)
    /// upstream bumps the epoch only if it is still the newest, and answers PRODUCER_FENCED if
    /// another has taken a newer one. Retried while the transaction coordinator moves or loads.
    ///
    /// # Errors
    /// Upstream refused, or did not answer by `retry_for`.
    pub async fn init_producer_id(
        &self,
        transactional_id: &str,
        current: Option<(i64, i16)>,
        retry_for: Duration,
    ) -> Result<(i64, i16), UpstreamError> {
        let (current_id, current_epoch) = current.unwrap_or((-1, -1));
        let deadline = tokio::time::Instant::now() + retry_for;
        let mut backoff = Duration::from_millis(50);
        loop {
            let result = async {
                let find = FindCoordinatorRequest::default()
                    .with_key_type(1)
                    .with_coordinator_keys(vec![StrBytes::from_string(
                        transactional_id.to_string(),
                    )]);
                let found = self.call_any(4, &find).await?;
                let c = only_group(found.coordinators, |c| c.error_code, "FindCoordinator")?;
                let node = c.node_id.0;
                self.brokers
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(node)
                    .or_insert_with(|| format!("{}:{}", c.host.as_str(), c.port));
                let req = InitProducerIdRequest::default()
                    .with_transactional_id(Some(TransactionalId(StrBytes::from_string(
                        transactional_id.to_string(),
                    ))))
                    .with_transaction_timeout_ms(60_000)
                    .with_producer_id(ProducerId(current_id))
                    .with_producer_epoch(current_epoch);
                let resp = self.call(node, 4, &req).await?;
                if resp.error_code != 0 {
                    return Err(UpstreamError::refused(resp.error_code, "InitProducerId"));
                }
                Ok((resp.producer_id.0, resp.producer_epoch))
            }
            .await;
            match result {
                Ok(r) => return Ok(r),
                Err(e) => {
                    let again = match &e {
                        UpstreamError::Refused { error, .. } => {
                            retriable(*error)
                                || *error == ResponseError::ConcurrentTransactions.code()
                        }
                        UpstreamError::Unreachable(_) => true,
                        UpstreamError::Protocol(_) => false,
                    };
                    if !again || tokio::time::Instant::now() + backoff > deadline {
                        return Err(e);
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// A connection of its own to `group`'s upstream coordinator, looked up afresh: for a
    /// member of that group, whose JoinGroup holds the connection until the rebalance ends.
    ///
    /// # Errors
    /// No coordinator could be found or reached.
    pub async fn coordinator_conn(&self, group: &str) -> Result<UpstreamConn, UpstreamError> {
        self.forget_coordinator(group);
        let node = self.coordinator(group).await?;
        self.connect_to(node).await
    }

    fn forget_coordinator(&self, group: &str) {
        self.coordinators
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(group);
    }

    /// Runs `op` against `group`'s coordinator until it succeeds, fails for good, or
    /// `retry_for` passes; a retriable failure (or an unreachable broker) looks the
    /// coordinator up again first.
    async fn with_coordinator<T, F, Fut>(
        &self,
        group: &str,
        retry_for: Duration,
        op: F,
    ) -> Result<T, UpstreamError>
    where
        F: Fn(i32) -> Fut,
        Fut: std::future::Future<Output = Result<T, UpstreamError>>,
    {
        let deadline = tokio::time::Instant::now() + retry_for;
        let mut backoff = Duration::from_millis(50);
        loop {
            // A coordinator that does not answer (a broker paused, or cut off) is given up
            // after ATTEMPT and looked up again: upstream moves its groups once it fences it.
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let attempt = async {
                let node = self.coordinator(group).await?;
                op(node).await
            };
            let result = tokio::time::timeout(left.min(ATTEMPT), attempt)
                .await
                .unwrap_or_else(|_| {
                    Err(UpstreamError::Unreachable(format!(
                        "{group}'s coordinator did not answer"
                    )))
                });
            match result {
                Ok(t) => return Ok(t),
                Err(e) => {
                    let again = match &e {
                        UpstreamError::Refused { error, .. } => retriable(*error),
                        UpstreamError::Unreachable(_) => true,
                        UpstreamError::Protocol(_) => false,
                    };
                    if !again || tokio::time::Instant::now() + backoff > deadline {
                        return Err(e);
                    }
                    debug!(group, error = %e, "upstream coordinator: retrying");
                    self.forget_coordinator(group);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// Appends `records` to `topic`'s partitions (partition -> records, in order) with
    /// acks=all, retrying a moved leader or too few in-sync replicas until the deadline.
    ///
    /// # Errors
    /// A partition's append failed for good or did not succeed by the deadline.
    ///
    /// `stamps` gives a partition's batch an idempotent producer's id, epoch and base sequence
    /// (cluster mode: the shard's producer, so that a former owner's writes are refused with
    /// INVALID_PRODUCER_EPOCH once the next owner wrote with a newer epoch); a retried batch
    /// keeps its sequence, so upstream appends it once. Partitions without one are written
    /// without a producer.
    pub async fn produce(
        &self,
        topic: &str,
        records: &BTreeMap<i32, Vec<KeyValue>>,
        stamps: &BTreeMap<i32, ProducerStamp>,
        retry_for: Duration,
    ) -> Result<(), UpstreamError> {
        let batches = records
            .iter()
            .map(|(p, r)| Ok((*p, encode_batch(r, stamps.get(p).copied())?)))
            .collect::<Result<BTreeMap<i32, Bytes>, UpstreamError>>()?;
        self.produce_batches(topic, &batches, retry_for).await
    }

    /// [`Upstream::produce`] of batches already encoded, one per partition.
    ///
    /// # Errors
    /// As [`Upstream::produce`].
    pub async fn produce_batches(
        &self,
        topic: &str,
        batches: &BTreeMap<i32, Bytes>,
        retry_for: Duration,
    ) -> Result<(), UpstreamError> {
        let mut left: Vec<i32> = batches.keys().copied().collect();
        let deadline = tokio::time::Instant::now() + retry_for;
        let mut backoff = Duration::from_millis(50);
        let mut last = UpstreamError::Unreachable("no attempt".into());
        while !left.is_empty() {
            // Per leader, one request with every partition it leads.
            let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
            let mut unknown = false;
            for p in &left {
                match self.leader(topic, *p) {
                    Some(l) => by_leader.entry(l).or_default().push(*p),
                    None => unknown = true,
                }
            }
            let sends = by_leader.iter().map(|(leader, ps)| async move {
                let data: Vec<PartitionProduceData> = ps
                    .iter()
                    .map(|p| {
                        PartitionProduceData::default()
                            .with_index(*p)
                            .with_records(Some(batches[p].clone()))
                    })
                    .collect();
                let req = ProduceRequest::default()
                    .with_acks(-1)
                    .with_timeout_ms(super::upstream::REQUEST_TIMEOUT.as_millis() as i32)
                    .with_topic_data(vec![TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                        .with_partition_data(data)]);
                // A leader that does not answer (paused, or gone without closing the
                // connection) is given up after ATTEMPT, and the partition's leader looked up
                // again, as a group's coordinator is: upstream moves its leaderships once it
                // fences the broker.
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let limit = left.min(ATTEMPT);
                let resp = tokio::time::timeout(limit, self.call(*leader, 9, &req))
                    .await
                    .unwrap_or_else(|_| {
                        Err(UpstreamError::Unreachable(format!(
                            "broker {leader}: no answer to Produce within {} ms",
                            limit.as_millis()
                        )))
                    })?;
                let mut failed = Vec::new();
                for t in &resp.responses {
                    for p in &t.partition_responses {
                        if p.error_code != 0 {
                            let why = p
                                .record_errors
                                .iter()
                                .filter_map(|e| e.batch_index_error_message.as_ref())
                                .chain(p.error_message.as_ref())
                                .map(|m| m.to_string())
                                .collect::<Vec<_>>()
                                .join("; ");
                            failed.push((p.index, p.error_code, why));
                        }
                    }
                }
                Ok::<_, UpstreamError>(failed)
            });
            let results = futures_util::future::join_all(sends).await;
            let mut retry = Vec::new();
            let mut refresh = unknown;
            for ((_, ps), result) in by_leader.iter().zip(results) {
                match result {
                    Ok(failed) => {
                        for (p, code, why) in failed {
                            if !retriable(code) {
                                return Err(UpstreamError::refused(
                                    code,
                                    format!("Produce {topic}-{p}: {why}"),
                                ));
                            }
                            last = UpstreamError::refused(code, format!("Produce {topic}-{p}"));
                            retry.push(p);
                            refresh = true;
                        }
                    }
                    Err(e @ UpstreamError::Protocol(_)) => return Err(e),
                    Err(e) => {
                        last = e;
                        retry.extend(ps.iter().copied());
                        refresh = true;
                    }
                }
            }
            if unknown {
                retry.extend(
                    left.iter()
                        .copied()
                        .filter(|p| self.leader(topic, *p).is_none()),
                );
                last = UpstreamError::Unreachable(format!("{topic}: a partition has no leader"));
            }
            retry.sort_unstable();
            retry.dedup();
            left = retry;
            if left.is_empty() {
                break;
            }
            if tokio::time::Instant::now() + backoff > deadline {
                return Err(last);
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
            if refresh {
                if let Err(e) = self.refresh(&[topic]).await {
                    debug!(error = %e, "metadata refresh failed");
                }
            }
        }
        Ok(())
    }
}

/// `ids` starting at a rotating one (`next` counts the turns), so that "any broker" requests
/// spread over the brokers.
pub fn rotated(ids: Vec<i32>, next: &AtomicUsize) -> Vec<i32> {
    if ids.is_empty() {
        return ids;
    }
    let start = next.fetch_add(1, Ordering::Relaxed) % ids.len();
    ids[start..].iter().chain(&ids[..start]).copied().collect()
}

/// The one group of an answer about one group (`error` its code), or that code as the error.
fn only_group<G>(
    mut groups: Vec<G>,
    error: impl Fn(&G) -> i16,
    what: &str,
) -> Result<G, UpstreamError> {
    let g = groups
        .pop()
        .ok_or_else(|| UpstreamError::Protocol(format!("{what}: no group")))?;
    match error(&g) {
        0 => Ok(g),
        code => Err(UpstreamError::refused(code, what)),
    }
}

/// A producer's id, epoch and the base sequence of one batch.
pub type ProducerStamp = (i64, i16, i32);

/// One uncompressed v2 batch of `records`, from producer `stamp` (or none: a retried append
/// of the same key and value is harmless to a compacted topic).
fn encode_batch(
    records: &[KeyValue],
    stamp: Option<ProducerStamp>,
) -> Result<Bytes, UpstreamError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    // One batch whose base sequence is the stamp's, or -1 (no producer): Kafka rejects any but
    // the first batch of a request's partition (base offset not 0) with INVALID_RECORD.
    crate::log::batch::keyed_batch(records, stamp, -1, now)
        .map_err(|e| UpstreamError::Protocol(format!("encoding a batch: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;

    #[test]
    fn records_go_in_one_batch_at_base_offset_0_without_a_sequence() {
        let records: Vec<KeyValue> = (0..5)
            .map(|i| (Bytes::from(format!("k{i}")), Some(Bytes::from_static(b"v"))))
            .collect();
        let mut b = encode_batch(&records, None).unwrap();
        let info = RecordBatchDecoder::decode_batch_info(&mut b).unwrap();
        assert_eq!(info.len(), 1, "one batch: {info:?}");
        assert_eq!(info[0].min_offset, 0);
        assert_eq!(info[0].record_count, 5);
        assert_eq!(info[0].base_sequence, -1);
        assert_eq!(info[0].producer_id, -1);
    }

    #[test]
    fn a_stamped_batch_is_one_batch_from_its_producer_at_its_base_sequence() {
        let records: Vec<KeyValue> = (0..3)
            .map(|i| (Bytes::from(format!("k{i}")), None))
            .collect();
        let mut b = encode_batch(&records, Some((42, 7, 10))).unwrap();
        let info = RecordBatchDecoder::decode_batch_info(&mut b).unwrap();
        assert_eq!(info.len(), 1, "one batch: {info:?}");
        assert_eq!(info[0].min_offset, 0);
        assert_eq!(info[0].record_count, 3);
        assert_eq!(
            (
                info[0].producer_id,
                info[0].producer_epoch,
                info[0].base_sequence
            ),
            (42, 7, 10)
        );
    }

    #[test]
    fn rotation_starts_at_each_broker_in_turn_and_keeps_them_all() {
        let next = AtomicUsize::new(0);
        let turns: Vec<Vec<i32>> = (0..4).map(|_| rotated(vec![1, 2, 3], &next)).collect();
        assert_eq!(
            turns,
            vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2], vec![1, 2, 3]]
        );
        assert!(rotated(Vec::new(), &next).is_empty());
    }

    #[test]
    fn coordinator_moves_and_broker_restarts_are_retriable() {
        assert!(retriable(ResponseError::NotCoordinator.code()));
        assert!(retriable(ResponseError::NotLeaderOrFollower.code()));
        assert!(retriable(ResponseError::NotEnoughReplicas.code()));
        assert!(!retriable(ResponseError::GroupAuthorizationFailed.code()));
        assert!(!retriable(ResponseError::OffsetMetadataTooLarge.code()));
    }
}
