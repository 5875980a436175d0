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

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponseGroup;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, DeleteGroupsRequest, DescribeGroupsRequest, FetchRequest,
    FindCoordinatorRequest, GroupId, InitProducerIdRequest, ListGroupsRequest, ListOffsetsRequest,
    MetadataRequest, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest, ProduceRequest,
    ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::records::{Record, RecordBatchDecoder, TimestampType};
use kafka_protocol::ResponseError;
use tracing::{debug, info};

pub use super::upstream::{call_on, UpstreamError};
use super::upstream::{connect, retriable, UpstreamConn};
use crate::security::client::ClientSecurity;
use crate::vocab::{OffsetAndMetadata, TopicPartition};

/// How long an operation for a group retries upstream's coordinator while it moves or loads,
/// unless [`Upstream::with_retry_for`] says otherwise (`upstream.write.timeout.ms`, Kafka's
/// `offsets.commit.timeout.ms`): long enough for upstream to elect a new leader of the group's
/// `__consumer_offsets` partition and load it.
pub const DEFAULT_RETRY_FOR: Duration = Duration::from_secs(10);
/// Longest pause between two tries of a retried operation.
const MAX_BACKOFF: Duration = Duration::from_millis(500);
/// How long start-up may wait for upstream (creating and reading koord's topic).
pub const STARTUP: Duration = Duration::from_secs(60);
/// How long ListGroups waits for each upstream broker (a client's ListGroups waits on it).
const LIST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one try of a group's operation waits for upstream's coordinator before it looks
/// the coordinator up again and retries (within the operation's budget).
const ATTEMPT: Duration = Duration::from_secs(5);
/// How long a request to any broker (Metadata, FindCoordinator, CreateTopics) waits for one
/// broker before it asks the next.
const ANY_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer asked of one Fetch while reading koord's topic back.
const FETCH_MAX_BYTES: i32 = 16 << 20;

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
        let addr = self
            .addr_of(node)
            .ok_or_else(|| UpstreamError::Unreachable(format!("broker {node} unknown")))?;
        let c = Arc::new(
            connect(&addr, &self.security)
                .await
                .map_err(|e| UpstreamError::Unreachable(e.to_string()))?,
        );
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
        let addr = self
            .addr_of(node)
            .ok_or_else(|| UpstreamError::Unreachable(format!("broker {node} unknown")))?;
        connect(&addr, &self.security)
            .await
            .map_err(|e| UpstreamError::Unreachable(e.to_string()))
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

    /// Commits `offsets` for `group` as a standalone commit (generation -1, no member), as
    /// admin tools do: upstream keeps them in `__consumer_offsets`.
    ///
    /// # Errors
    /// Any partition refused (after retries), or upstream unreachable until the deadline.
    pub async fn commit_offsets(
        &self,
        group: &str,
        offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
        retry_for: Duration,
    ) -> Result<(), UpstreamError> {
        let topics = by_topic(offsets.iter().map(|(tp, o)| {
            let p = OffsetCommitRequestPartition::default()
                .with_partition_index(tp.partition)
                .with_committed_offset(o.offset)
                .with_committed_leader_epoch(o.leader_epoch.unwrap_or(-1))
                .with_committed_metadata(Some(StrBytes::from_string(o.metadata.clone())));
            (tp, p)
        }));
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(StrBytes::default())
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, ps)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(name)
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        self.with_coordinator(group, retry_for, |node| {
            let req = &req;
            async move {
                let resp = self.call(node, 8, req).await?;
                for t in &resp.topics {
                    for p in &t.partitions {
                        if p.error_code != 0 {
                            return Err(UpstreamError::refused(
                                p.error_code,
                                format!("OffsetCommit {}-{}", t.name.as_str(), p.partition_index),
                            ));
                        }
                    }
                }
                Ok(())
            }
        })
        .await
    }

    /// Deletes `group`'s committed offsets of `partitions` upstream (a group upstream does
    /// not know has none to delete).
    ///
    /// # Errors
    /// Upstream refused, or was unreachable until the deadline.
    pub async fn delete_offsets(
        &self,
        group: &str,
        partitions: &[TopicPartition],
        retry_for: Duration,
    ) -> Result<(), UpstreamError> {
        let req = offset_delete_request(group, partitions);
        self.with_coordinator(group, retry_for, |node| {
            let req = &req;
            async move {
                let codes = match self.offset_delete_on(node, req).await {
                    Err(e) if e.code() == Some(ResponseError::GroupIdNotFound.code()) => {
                        return Ok(())
                    }
                    other => other?,
                };
                match codes.into_iter().find(|(_, c)| *c != 0) {
                    Some((_, c)) => Err(UpstreamError::refused(c, "OffsetDelete")),
                    None => Ok(()),
                }
            }
        })
        .await
    }

    /// OffsetDelete of `group`'s `partitions` upstream, answered as upstream answers it: each
    /// partition's error code (GROUP_SUBSCRIBED_TO_TOPIC for a topic the group consumes
    /// upstream, ...), for a group koord does not have.
    ///
    /// # Errors
    /// Upstream's error for the group (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...), or upstream
    /// unreachable until the deadline.
    pub async fn offset_delete(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, i16)>, UpstreamError> {
        let req = offset_delete_request(group, partitions);
        self.with_coordinator(group, self.retry_for, |node| {
            self.offset_delete_on(node, &req)
        })
        .await
    }

    /// One OffsetDelete to `node`: each partition's code, or the group's error.
    async fn offset_delete_on(
        &self,
        node: i32,
        req: &OffsetDeleteRequest,
    ) -> Result<Vec<(TopicPartition, i16)>, UpstreamError> {
        let resp = self.call(node, 0, req).await?;
        if resp.error_code != 0 {
            return Err(UpstreamError::refused(resp.error_code, "OffsetDelete"));
        }
        Ok(resp
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    (
                        TopicPartition::new(t.name.as_str(), p.partition_index),
                        p.error_code,
                    )
                })
            })
            .collect())
    }

    /// Deletes `group` upstream, offsets and all: `true` if upstream had it, `false` if it did
    /// not (nothing to delete: done as well).
    ///
    /// # Errors
    /// Upstream refused (a group with members upstream: NON_EMPTY_GROUP), or was unreachable.
    pub async fn delete_group(
        &self,
        group: &str,
        retry_for: Duration,
    ) -> Result<bool, UpstreamError> {
        let req = DeleteGroupsRequest::default()
            .with_groups_names(vec![GroupId(StrBytes::from_string(group.to_string()))]);
        self.with_coordinator(group, retry_for, |node| {
            let req = &req;
            async move {
                let resp = self.call(node, 2, req).await?;
                match resp.results.first().map(|r| r.error_code) {
                    Some(0) => Ok(true),
                    Some(c) if c == ResponseError::GroupIdNotFound.code() => Ok(false),
                    Some(c) => Err(UpstreamError::refused(c, "DeleteGroups")),
                    None => Err(UpstreamError::Protocol("DeleteGroups: no result".into())),
                }
            }
        })
        .await
    }

    /// Every group upstream has, as its brokers list them (ListGroups v5, unfiltered, to every
    /// known broker: each lists the groups of the `__consumer_offsets` partitions it leads).
    /// A broker that cannot be reached is passed over (once upstream has moved its partitions,
    /// their new leaders list its groups); one that cannot list yet (COORDINATOR_LOAD_IN_PROGRESS
    /// while it loads) is asked again, for up to the client's retry budget.
    ///
    /// # Errors
    /// A broker kept answering an error, or none could be reached.
    pub async fn list_groups(&self) -> Result<Vec<ListedGroup>, UpstreamError> {
        let deadline = tokio::time::Instant::now() + self.retry_for;
        let mut backoff = Duration::from_millis(50);
        loop {
            match self.list_groups_once().await {
                Err(e)
                    if e.is_unavailable() && tokio::time::Instant::now() + backoff < deadline =>
                {
                    debug!(error = %e, "upstream ListGroups: retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                other => return other,
            }
        }
    }

    async fn list_groups_once(&self) -> Result<Vec<ListedGroup>, UpstreamError> {
        let req = ListGroupsRequest::default();
        let asks = self.any_order().into_iter().map(|node| {
            let req = &req;
            async move {
                tokio::time::timeout(LIST_TIMEOUT, self.call(node, 5, req))
                    .await
                    .unwrap_or_else(|_| {
                        Err(UpstreamError::Unreachable(format!(
                            "ListGroups: broker {node} did not answer"
                        )))
                    })
            }
        });
        let mut last = UpstreamError::Unreachable("no upstream broker known".into());
        let mut reached = false;
        let mut groups: BTreeMap<String, ListedGroup> = BTreeMap::new();
        for answer in futures_util::future::join_all(asks).await {
            match answer {
                Ok(r) if r.error_code != 0 => {
                    return Err(UpstreamError::refused(r.error_code, "ListGroups"))
                }
                Ok(r) => {
                    reached = true;
                    for g in r.groups {
                        groups.entry(g.group_id.as_str().to_string()).or_insert(g);
                    }
                }
                Err(e @ UpstreamError::Protocol(_)) => return Err(e),
                Err(e) => last = e,
            }
        }
        if !reached {
            return Err(last);
        }
        Ok(groups.into_values().collect())
    }

    /// `group` as its upstream coordinator describes it (DescribeGroups v5: a group upstream
    /// does not have is state Dead, no error).
    ///
    /// # Errors
    /// The group's error upstream kept answering, or upstream unreachable.
    pub async fn describe_group(&self, group: &str) -> Result<DescribedGroup, UpstreamError> {
        let req = DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(StrBytes::from_string(group.to_string()))]);
        self.with_coordinator(group, self.retry_for, |node| {
            let req = &req;
            async move {
                let resp = self.call(node, 5, req).await?;
                only_group(resp.groups, |g| g.error_code, "DescribeGroups")
            }
        })
        .await
    }

    /// `group`'s committed offsets from upstream: of `topics` (topic, partitions), or all.
    /// With `require_stable`, a partition an open transaction holds an offset for answers
    /// UNSTABLE_OFFSET_COMMIT (upstream's answer, passed on).
    ///
    /// # Errors
    /// The group-level error upstream kept answering, or upstream unreachable.
    pub async fn fetch_offsets(
        &self,
        group: &str,
        topics: Option<&[(String, Vec<i32>)]>,
        require_stable: bool,
    ) -> Result<OffsetFetchResponseGroup, UpstreamError> {
        let req = OffsetFetchRequest::default()
            .with_require_stable(require_stable)
            .with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
                .with_topics(topics.map(|ts| {
                    ts.iter()
                        .map(|(t, ps)| {
                            OffsetFetchRequestTopics::default()
                                .with_name(TopicName(StrBytes::from_string(t.clone())))
                                .with_partition_indexes(ps.clone())
                        })
                        .collect()
                }))]);
        self.with_coordinator(group, self.retry_for, |node| {
            let req = &req;
            async move {
                let resp = self.call(node, 8, req).await?;
                only_group(resp.groups, |g| g.error_code, "OffsetFetch")
            }
        })
        .await
    }

    /// Sends a transactional commit to `group`'s upstream coordinator at `version` and returns
    /// its answer (per-partition errors included: the transaction's checks are upstream's).
    ///
    /// # Errors
    /// Upstream kept answering NOT_COORDINATOR (or the like) until the deadline, or was
    /// unreachable.
    pub async fn txn_commit_offsets(
        &self,
        req: &TxnOffsetCommitRequest,
        version: i16,
    ) -> Result<TxnOffsetCommitResponse, UpstreamError> {
        let group = req.group_id.as_str();
        self.with_coordinator(group, self.retry_for, |node| async move {
            let resp = self.call(node, version, req).await?;
            let code = resp
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.error_code)
                .find(|c| *c != 0 && retriable(*c) && !is_txn_error(*c));
            match code {
                Some(c) => Err(UpstreamError::refused(c, "TxnOffsetCommit")),
                None => Ok(resp),
            }
        })
        .await
    }

    /// Creates `topic` upstream with `partitions`, `replication` (-1: upstream's default) and
    /// `configs`; the topic as upstream made it (for koord's mirror of upstream's topics), or
    /// `None` if it existed already.
    ///
    /// # Errors
    /// Upstream refused it (or could not be reached).
    pub async fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        replication: i16,
        configs: &[(String, String)],
    ) -> Result<Option<crate::metadata::Topic>, UpstreamError> {
        let req = CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_num_partitions(partitions)
                .with_replication_factor(replication)
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(StrBytes::from_string(k.clone()))
                                .with_value(Some(StrBytes::from_string(v.clone())))
                        })
                        .collect(),
                )]);
        let deadline = tokio::time::Instant::now() + self.retry_for;
        let mut backoff = Duration::from_millis(50);
        loop {
            let created = async {
                let resp = self.call_any(5, &req).await?;
                let t = resp
                    .topics
                    .first()
                    .ok_or_else(|| UpstreamError::Protocol("CreateTopics: no result".into()))?;
                match t.error_code {
                    0 => Ok(Some(crate::metadata::Topic {
                        name: topic.to_string(),
                        id: t.topic_id,
                        partitions: t.num_partitions,
                    })),
                    c if c == ResponseError::TopicAlreadyExists.code() => Ok(None),
                    c => Err(UpstreamError::refused(c, format!("CreateTopics {topic}"))),
                }
            }
            .await;
            match created {
                // The controller moving, or a broker not reachable: asked again.
                Err(e)
                    if e.is_unavailable() && tokio::time::Instant::now() + backoff < deadline =>
                {
                    debug!(topic, error = %e, "upstream CreateTopics: retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                other => return other,
            }
        }
    }

    /// Creates `topic` (compacted, `partitions`, upstream's default replication) unless it
    /// exists, and waits until every partition has a leader.
    ///
    /// # Errors
    /// Upstream refused the topic, or not every partition had a leader by the deadline.
    pub async fn ensure_compacted_topic(
        &self,
        topic: &str,
        partitions: i32,
    ) -> Result<i32, UpstreamError> {
        let deadline = tokio::time::Instant::now() + STARTUP;
        let req = CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_num_partitions(partitions)
                .with_replication_factor(-1)
                .with_configs(vec![CreatableTopicConfig::default()
                    .with_name(StrBytes::from_static_str("cleanup.policy"))
                    .with_value(Some(StrBytes::from_static_str("compact")))])]);
        loop {
            let created = self.call_any(5, &req).await;
            let code = match &created {
                Ok(r) => r.topics.first().map_or(0, |t| t.error_code),
                Err(_) => -1,
            };
            if code == 0 {
                info!(topic, partitions, "created koord's group topic upstream");
            }
            let done = code == 0 || code == ResponseError::TopicAlreadyExists.code();
            if !done && code >= 0 && !retriable(code) {
                return Err(UpstreamError::refused(
                    code,
                    format!("CreateTopics {topic}"),
                ));
            }
            if done {
                self.refresh(&[topic]).await?;
                let leaders = self.leaders.read().unwrap_or_else(|e| e.into_inner());
                let count = leaders.keys().filter(|(t, _)| t == topic).count() as i32;
                let all_led =
                    count > 0 && (0..count).all(|p| leaders.contains_key(&(topic.to_string(), p)));
                if all_led {
                    return Ok(count);
                }
            }
            if tokio::time::Instant::now() > deadline {
                return Err(match created {
                    Err(e) => e,
                    Ok(_) => {
                        UpstreamError::Unreachable(format!("{topic}: partitions without a leader"))
                    }
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
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
        let mut left: Vec<i32> = records.keys().copied().collect();
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
                let data = ps
                    .iter()
                    .map(|p| {
                        let batch = encode_batch(&records[p], stamps.get(p).copied())?;
                        Ok(PartitionProduceData::default()
                            .with_index(*p)
                            .with_records(Some(batch)))
                    })
                    .collect::<Result<Vec<_>, UpstreamError>>()?;
                let req = ProduceRequest::default()
                    .with_acks(-1)
                    .with_timeout_ms(super::upstream::REQUEST_TIMEOUT.as_millis() as i32)
                    .with_topic_data(vec![TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                        .with_partition_data(data)]);
                let resp = self.call(*leader, 9, &req).await?;
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

    /// Every record of `topic` (its `partitions`), from each partition's start to its end as
    /// of now, in offset order per partition.
    ///
    /// # Errors
    /// A partition could not be read by the deadline.
    pub async fn read_topic(
        &self,
        topic: &str,
        partitions: i32,
    ) -> Result<BTreeMap<i32, Vec<KeyValue>>, UpstreamError> {
        let all: Vec<i32> = (0..partitions).collect();
        self.read_partitions(topic, &all).await
    }

    /// [`Upstream::read_topic`] of `partitions` only.
    ///
    /// # Errors
    /// A partition could not be read by the deadline.
    pub async fn read_partitions(
        &self,
        topic: &str,
        partitions: &[i32],
    ) -> Result<BTreeMap<i32, Vec<KeyValue>>, UpstreamError> {
        let mut out: BTreeMap<i32, Vec<KeyValue>> = BTreeMap::new();
        // Partition -> (next offset to read, end offset).
        let mut todo: BTreeMap<i32, Option<(i64, i64)>> =
            partitions.iter().map(|p| (*p, None)).collect();
        let deadline = tokio::time::Instant::now() + STARTUP;
        let mut last = UpstreamError::Unreachable("no attempt".into());
        self.refresh(&[topic]).await.ok();
        while !todo.is_empty() {
            let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
            for p in todo.keys() {
                if let Some(l) = self.leader(topic, *p) {
                    by_leader.entry(l).or_default().push(*p);
                }
            }
            let mut progressed = false;
            for (leader, ps) in by_leader {
                // Where each partition starts and ends, for those not yet known.
                let unknown: Vec<i32> = ps.iter().copied().filter(|p| todo[p].is_none()).collect();
                if !unknown.is_empty() {
                    match self.bounds(leader, topic, &unknown).await {
                        Ok(bounds) => {
                            for (p, b) in bounds {
                                todo.insert(p, Some(b));
                                progressed = true;
                            }
                        }
                        Err(e) => last = e,
                    }
                }
                let reading: Vec<(i32, i64)> = ps
                    .iter()
                    .filter_map(|p| match todo[p] {
                        Some((next, end)) if next < end => Some((*p, next)),
                        _ => None,
                    })
                    .collect();
                if reading.is_empty() {
                    continue;
                }
                match self.fetch(leader, topic, &reading).await {
                    Ok(fetched) => {
                        for (p, records, next) in fetched {
                            if let Some(Some((at, _))) = todo.get_mut(&p) {
                                if next > *at {
                                    *at = next;
                                    progressed = true;
                                }
                            }
                            out.entry(p).or_default().extend(records);
                        }
                    }
                    Err(e) => last = e,
                }
            }
            todo.retain(|_, b| !matches!(*b, Some((next, end)) if next >= end));
            if todo.is_empty() {
                break;
            }
            if !progressed {
                if tokio::time::Instant::now() > deadline {
                    return Err(last);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                self.refresh(&[topic]).await.ok();
            }
        }
        Ok(out)
    }

    /// Each partition's (log start, high watermark) from its leader.
    async fn bounds(
        &self,
        leader: i32,
        topic: &str,
        partitions: &[i32],
    ) -> Result<Vec<(i32, (i64, i64))>, UpstreamError> {
        let ask = |timestamp: i64| {
            ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_partitions(
                        partitions
                            .iter()
                            .map(|p| {
                                ListOffsetsPartition::default()
                                    .with_partition_index(*p)
                                    .with_current_leader_epoch(-1)
                                    .with_timestamp(timestamp)
                            })
                            .collect(),
                    )])
        };
        let read = |resp: kafka_protocol::messages::ListOffsetsResponse| {
            let mut m = HashMap::new();
            for t in resp.topics {
                for p in t.partitions {
                    if p.error_code != 0 {
                        return Err(UpstreamError::refused(p.error_code, "ListOffsets"));
                    }
                    m.insert(p.partition_index, p.offset);
                }
            }
            Ok(m)
        };
        let earliest = read(self.call(leader, 7, &ask(-2)).await?)?;
        let latest = read(self.call(leader, 7, &ask(-1)).await?)?;
        Ok(partitions
            .iter()
            .filter_map(|p| Some((*p, (*earliest.get(p)?, *latest.get(p)?))))
            .collect())
    }

    /// One Fetch from `leader` of `partitions` (partition, offset): each partition's records
    /// and the offset to read next.
    async fn fetch(
        &self,
        leader: i32,
        topic: &str,
        partitions: &[(i32, i64)],
    ) -> Result<Vec<(i32, Vec<KeyValue>, i64)>, UpstreamError> {
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(FETCH_MAX_BYTES)
            .with_isolation_level(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|(p, offset)| {
                            FetchPartition::default()
                                .with_partition(*p)
                                .with_current_leader_epoch(-1)
                                .with_fetch_offset(*offset)
                                .with_log_start_offset(-1)
                                .with_partition_max_bytes(FETCH_MAX_BYTES)
                        })
                        .collect(),
                )]);
        let resp = self.call(leader, 12, &req).await?;
        if resp.error_code != 0 {
            return Err(UpstreamError::refused(resp.error_code, "Fetch"));
        }
        let mut out = Vec::new();
        for t in resp.responses {
            for p in t.partitions {
                let from = partitions
                    .iter()
                    .find(|(q, _)| *q == p.partition_index)
                    .map_or(0, |(_, o)| *o);
                if p.error_code != 0 {
                    if retriable(p.error_code) {
                        continue;
                    }
                    return Err(UpstreamError::refused(p.error_code, "Fetch"));
                }
                let (records, next) = decode_batches(p.records.unwrap_or_default(), from)?;
                out.push((p.partition_index, records, next));
            }
        }
        Ok(out)
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

/// `items` (a partition and its part of a request) grouped by topic, topics in name order,
/// partitions in the order given: the topics of an offsets request.
fn by_topic<'a, P>(
    items: impl IntoIterator<Item = (&'a TopicPartition, P)>,
) -> Vec<(TopicName, Vec<P>)> {
    let mut topics: BTreeMap<&str, Vec<P>> = BTreeMap::new();
    for (tp, p) in items {
        topics.entry(tp.topic.as_str()).or_default().push(p);
    }
    topics
        .into_iter()
        .map(|(t, ps)| (TopicName(StrBytes::from_string(t.to_string())), ps))
        .collect()
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

/// OffsetDelete of `group`'s `partitions`.
fn offset_delete_request(group: &str, partitions: &[TopicPartition]) -> OffsetDeleteRequest {
    let topics = by_topic(partitions.iter().map(|tp| {
        let p = OffsetDeleteRequestPartition::default().with_partition_index(tp.partition);
        (tp, p)
    }));
    OffsetDeleteRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_topics(
            topics
                .into_iter()
                .map(|(name, ps)| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(name)
                        .with_partitions(ps)
                })
                .collect(),
        )
}

/// Whether `code` is one of the transaction errors a producer must see itself.
fn is_txn_error(code: i16) -> bool {
    ResponseError::try_from_code(code).is_some_and(|e| {
        matches!(
            e,
            ResponseError::ConcurrentTransactions
                | ResponseError::TransactionAbortable
                | ResponseError::InvalidProducerEpoch
                | ResponseError::ProducerFenced
                | ResponseError::InvalidTxnState
        )
    })
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
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: stamp.map_or(-1, |s| s.0),
            producer_epoch: stamp.map_or(-1, |s| s.1),
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // kafka-protocol starts a new batch where offset - sequence changes: this keeps
            // the records in one batch whose base sequence is the stamp's, or -1 (no
            // producer), as Kafka wants a batch from a producer without an id; Kafka rejects
            // any but the first batch of a request's partition (base offset not 0) with
            // INVALID_RECORD.
            sequence: i32::try_from(i)
                .unwrap_or(i32::MAX)
                .wrapping_add(stamp.map_or(-1, |s| s.2)),
            timestamp: now,
            key: Some(k.clone()),
            value: v.clone(),
            headers: Default::default(),
        })
        .collect();
    crate::log::batch::encode_records(&records)
        .map_err(|e| UpstreamError::Protocol(format!("encoding a batch: {e}")))
}

/// The records of every whole batch in `data` (a Fetch answer may end in a partial one) at
/// or after `from`, and the offset after the last batch read (`from` if none).
fn decode_batches(mut data: Bytes, from: i64) -> Result<(Vec<KeyValue>, i64), UpstreamError> {
    // Batch header: base offset (8), batch length (4) counting what follows it.
    const LENGTH_END: usize = 12;
    // Then leader epoch (4), magic (1), crc (4), attributes (2), last offset delta (4).
    const LAST_DELTA_AT: usize = 23;
    let mut out = Vec::new();
    let mut next = from;
    while data.len() >= LENGTH_END {
        let base = i64::from_be_bytes(data[..8].try_into().unwrap_or_default());
        let len = i32::from_be_bytes(data[8..12].try_into().unwrap_or_default());
        let Ok(len) = usize::try_from(len) else {
            return Err(UpstreamError::Protocol("negative batch length".into()));
        };
        let total = LENGTH_END + len;
        if data.len() < total {
            break;
        }
        let mut batch = data.split_to(total);
        // The batch's last offset, from its header: compaction may have removed the records
        // at its end, never the batch's place.
        let last_delta = batch
            .get(LAST_DELTA_AT..LAST_DELTA_AT + 4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| UpstreamError::Protocol(format!("batch at {base}: short header")))?;
        let last = base.saturating_add(i64::from(last_delta));
        let set = RecordBatchDecoder::decode(&mut batch)
            .map_err(|e| UpstreamError::Protocol(format!("batch at {base}: {e}")))?;
        for r in set.records {
            if r.control || r.offset < from {
                continue;
            }
            if let Some(k) = r.key {
                out.push((k, r.value));
            }
        }
        next = next.max(last + 1);
    }
    Ok((out, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    #[test]
    fn batches_decode_back_and_a_partial_trailing_batch_waits() {
        let a = encode_batch(
            &[
                (Bytes::from_static(b"k1"), Some(Bytes::from_static(b"v1"))),
                (Bytes::from_static(b"k2"), None),
            ],
            None,
        )
        .unwrap();
        let mut data = BytesMut::new();
        data.extend_from_slice(&a);
        // A second batch at offset 2, cut short.
        let mut b =
            BytesMut::from(&encode_batch(&[(Bytes::from_static(b"k3"), None)], None).unwrap()[..]);
        b[..8].copy_from_slice(&2i64.to_be_bytes());
        data.extend_from_slice(&b[..b.len() - 3]);
        let (records, next) = decode_batches(data.freeze(), 0).unwrap();
        assert_eq!(
            records,
            vec![
                (Bytes::from_static(b"k1"), Some(Bytes::from_static(b"v1"))),
                (Bytes::from_static(b"k2"), None),
            ]
        );
        assert_eq!(next, 2, "the partial batch is read again from its start");
    }

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
    fn records_before_the_fetch_offset_are_skipped() {
        let a = encode_batch(
            &[
                (Bytes::from_static(b"k1"), Some(Bytes::from_static(b"v1"))),
                (Bytes::from_static(b"k2"), Some(Bytes::from_static(b"v2"))),
            ],
            None,
        )
        .unwrap();
        let (records, next) = decode_batches(a, 1).unwrap();
        assert_eq!(
            records,
            vec![(Bytes::from_static(b"k2"), Some(Bytes::from_static(b"v2")))]
        );
        assert_eq!(next, 2);
    }

    #[test]
    fn garbage_is_a_protocol_error_not_a_panic() {
        let mut junk = BytesMut::new();
        junk.extend_from_slice(&0i64.to_be_bytes());
        junk.extend_from_slice(&20i32.to_be_bytes());
        junk.extend_from_slice(&[0xff; 20]);
        assert!(decode_batches(junk.freeze(), 0).is_err());
        let mut negative = BytesMut::new();
        negative.extend_from_slice(&0i64.to_be_bytes());
        negative.extend_from_slice(&(-5i32).to_be_bytes());
        assert!(decode_batches(negative.freeze(), 0).is_err());
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
    fn partitions_group_by_topic_in_name_order_keeping_their_order() {
        let tps = [
            TopicPartition::new("b", 2),
            TopicPartition::new("a", 1),
            TopicPartition::new("b", 0),
        ];
        let topics = by_topic(tps.iter().map(|tp| (tp, tp.partition)));
        let names: Vec<(&str, Vec<i32>)> = topics
            .iter()
            .map(|(t, ps)| (t.as_str(), ps.clone()))
            .collect();
        assert_eq!(names, vec![("a", vec![1]), ("b", vec![2, 0])]);
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
