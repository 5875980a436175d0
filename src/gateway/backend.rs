//! Gateway mode's [`Backend`]: the upstream cluster keeps the committed offsets (koord checks
//! the member, upstream answers), has groups of its own (offsets only, or from before koord:
//! listed, described and deleted there as Kafka does it), owns the transactions (it verifies
//! them; koord checks the group) and the topics.
//!
//! An upstream coordinator that moves, loads or cannot be reached is retried for
//! `upstream.write.timeout.ms`, then answered COORDINATOR_LOAD_IN_PROGRESS
//! ([`super::client::UpstreamError::client_code`]), which clients retry; a real refusal is upstream's code,
//! passed on as it came.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::TxnOffsetCommitRequest;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::client::Upstream;
use super::upstream::UpstreamError;
use crate::backend::{
    dead_letter_topic_configs, listed, Backend, DeadLetterTopicError, GroupOffsets, Listed, Local,
    ShareRead, ShareReadResult, ShareReadSpec, SharedRead, TxnCommitRefused, DLQ_ENABLE,
};
use crate::coordinator::TxnOffsetCommit;
use crate::group::share::AutoOffsetReset;
use crate::log::Logs;
use crate::metadata::{Topic, Topics};
use crate::offsets::{FetchedOffset, TopicPartition};
use crate::storage::Mutation;
use crate::vocab::{GroupError, GroupId, MemberId};

/// The upstream cluster behind koord's groups.
pub struct Upstreamed {
    up: Arc<Upstream>,
}

impl Upstreamed {
    pub fn new(up: Arc<Upstream>) -> Upstreamed {
        Upstreamed { up }
    }

    /// Cluster mode: whether this node may still act for `group` upstream outside its store
    /// (the deletion of a group only upstream has): its shard's fence record taken with this
    /// node's producer epoch, in the shard's storage lane, and its lease holding. A node that
    /// lost the shard meanwhile must not delete what the next owner serves. Outside a
    /// cluster, always.
    ///
    /// # Errors
    /// NOT_COORDINATOR when the shard is another node's now, COORDINATOR_LOAD_IN_PROGRESS when
    /// upstream did not take the fence record in time.
    async fn fence(local: Local<'_>, group: &GroupId) -> Result<(), i16> {
        if !local.coordinator.ownership().is_cluster() {
            return Ok(());
        }
        local
            .storage
            .write(vec![Mutation::Fence {
                group: group.clone(),
            }])
            .await
            .map_err(|e| e.group_error().code())?;
        local.coordinator.admit(group).map_err(GroupError::code)
    }
}

/// How long a long poll that upstream failed at once pauses before the fetch reads again.
const FAILED_WAIT_PAUSE: Duration = Duration::from_millis(100);

impl Upstreamed {
    /// A share group's reads of upstream's partitions (koord is their share-partition
    /// leader): where `spec.reset` puts a partition the group has not read (ListOffsets), then
    /// one Fetch per leader; an offset below a log's start (retention, DeleteRecords) is read
    /// from the start.
    async fn read_upstream(
        &self,
        reads: Vec<ShareRead>,
        spec: ShareReadSpec,
    ) -> Vec<ShareReadResult> {
        let key = |r: &ShareRead| (r.topic.name.clone(), r.partition);
        let mut out: Vec<ShareReadResult> = vec![Ok(None); reads.len()];
        let mut starts: HashMap<usize, i64> = HashMap::new();
        let unread: Vec<usize> = (0..reads.len())
            .filter(|&i| reads[i].offset.is_none())
            .collect();
        if !unread.is_empty() {
            let keys: Vec<(String, i32)> = unread.iter().map(|&i| key(&reads[i])).collect();
            let at = match spec.reset {
                AutoOffsetReset::Earliest => EARLIEST,
                AutoOffsetReset::Latest => LATEST,
                AutoOffsetReset::ByDuration(ms) => crate::log::now_ms().saturating_sub(ms),
            };
            let mut found = self.up.offsets_at(&keys, at).await;
            if matches!(spec.reset, AutoOffsetReset::ByDuration(_)) {
                // No record that recent: the log end.
                let none: Vec<usize> = (0..found.len()).filter(|&j| found[j] == Ok(-1)).collect();
                if !none.is_empty() {
                    let keys: Vec<_> = none.iter().map(|&j| keys[j].clone()).collect();
                    for (j, end) in none
                        .into_iter()
                        .zip(self.up.offsets_at(&keys, LATEST).await)
                    {
                        found[j] = end;
                    }
                }
            }
            for (i, start) in unread.into_iter().zip(found) {
                match start {
                    Ok(start) => {
                        starts.insert(i, start);
                    }
                    Err(e) => out[i] = Err(e),
                }
            }
        }
        let mut asks: Vec<(usize, (String, i32, i64))> = Vec::new();
        for (i, r) in reads.iter().enumerate() {
            if let Some(from) = r.offset.or_else(|| starts.get(&i).copied()) {
                if out[i].is_ok() {
                    asks.push((i, (r.topic.name.clone(), r.partition, from)));
                }
            }
        }
        let mut left = asks;
        // At most twice: an offset below the log's start is read again from the start.
        for _ in 0..2 {
            if left.is_empty() {
                break;
            }
            let wanted: Vec<_> = left.iter().map(|(_, a)| a.clone()).collect();
            let fetched = self
                .up
                .fetch_records(&wanted, spec.max_bytes, spec.read_committed, Duration::ZERO)
                .await;
            let mut below = Vec::new();
            for ((i, ask), f) in left.into_iter().zip(fetched) {
                match f {
                    Ok(f) => {
                        out[i] = Ok(Some(SharedRead {
                            start: starts.get(&i).copied().unwrap_or(ask.2),
                            batches: f.batches,
                            aborted: f.aborted,
                            end: if spec.read_committed {
                                f.last_stable_offset
                            } else {
                                f.high_watermark
                            },
                        }));
                    }
                    Err(ResponseError::OffsetOutOfRange) => below.push((i, ask)),
                    Err(e) => out[i] = Err(e),
                }
            }
            left = Vec::new();
            if below.is_empty() {
                break;
            }
            let keys: Vec<_> = below.iter().map(|(_, (t, p, _))| (t.clone(), *p)).collect();
            for ((i, (t, p, from)), start) in below
                .into_iter()
                .zip(self.up.offsets_at(&keys, EARLIEST).await)
            {
                match start {
                    // Past the log's end (upstream lost records): nothing to read yet.
                    Ok(start) if start <= from => {}
                    Ok(start) => left.push((i, (t, p, start))),
                    Err(e) => out[i] = Err(e),
                }
            }
        }
        out
    }
}

/// ListOffsets' timestamps for a log's start and end.
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;

impl Backend for Upstreamed {
    fn keeps_offsets(&self) -> bool {
        true
    }

    fn keeps_logs(&self) -> bool {
        true
    }

    fn fetch_offsets<'a>(
        &'a self,
        local: Local<'a>,
        group: GroupId,
        member: Option<(MemberId, i32)>,
        wanted: Option<Vec<(String, Vec<i32>)>>,
        require_stable: bool,
    ) -> BoxFuture<'a, Result<GroupOffsets, i16>> {
        Box::pin(async move {
            // koord checks the member (v9+), upstream has the offsets.
            local
                .coordinator
                .fetch_offsets_as(group.clone(), member, Some(Vec::new()), false)
                .await
                .map_err(GroupError::code)?;
            // Upstream's order; its error codes, the group's and each partition's, passed on
            // as they came (UNSTABLE_OFFSET_COMMIT for an open transaction's offset with
            // `require_stable`, COORDINATOR_LOAD_IN_PROGRESS while upstream loads, ...).
            let answer = self
                .up
                .fetch_offsets(group.as_str(), wanted.as_deref(), require_stable)
                .await
                .map_err(|e| e.answer(group.as_str(), "OffsetFetch"))?;
            let mut by_topic: GroupOffsets = answer
                .topics
                .into_iter()
                .map(|t| {
                    let topic = t.name.as_str().to_string();
                    let offsets = t
                        .partitions
                        .into_iter()
                        .map(|p| {
                            let f = FetchedOffset {
                                tp: TopicPartition::new(topic.clone(), p.partition_index),
                                offset: p.committed_offset,
                                leader_epoch: p.committed_leader_epoch,
                                metadata: p.metadata.map(|m| m.to_string()).unwrap_or_default(),
                                error: GroupError::from_code(p.error_code),
                            };
                            (f, p.error_code)
                        })
                        .collect();
                    (topic, offsets)
                })
                .collect();
            // A topic asked for and not answered gets an empty entry.
            for (t, _) in wanted.unwrap_or_default() {
                if !by_topic.iter().any(|(have, _)| *have == t) {
                    by_topic.push((t, Vec::new()));
                }
            }
            Ok(by_topic)
        })
    }

    fn commit_txn_offsets<'a>(
        &'a self,
        local: Local<'a>,
        group: GroupId,
        mut commit: TxnOffsetCommit,
        req: &'a TxnOffsetCommitRequest,
        version: i16,
    ) -> BoxFuture<'a, Result<Vec<(TopicPartition, i16)>, TxnCommitRefused>> {
        Box::pin(async move {
            // The transaction is upstream's, and so is its verification: koord checks the
            // group only, and upstream stores the offsets inside the transaction.
            commit.validate_only = true;
            let checked = local
                .coordinator
                .commit_txn_offsets(group, commit)
                .await
                .map_err(|e| TxnCommitRefused::Group(e.code()))?;
            let forwarded: Vec<TopicPartition> = checked
                .iter()
                .filter(|(_, e)| e.is_none())
                .map(|(tp, _)| tp.clone())
                .collect();
            let answered = if forwarded.is_empty() {
                Ok(HashMap::new())
            } else {
                self.upstream_commit(req, version, &forwarded).await
            };
            // Upstream's answer for each partition it got; the others keep koord's.
            Ok(checked
                .into_iter()
                .map(|(tp, e)| {
                    let code = match (e, &answered) {
                        (Some(e), _) => e.code(),
                        (None, Ok(codes)) => codes.get(&tp).copied().unwrap_or(0),
                        (None, Err(code)) => *code,
                    };
                    (tp, code)
                })
                .collect())
        })
    }

    fn delete_offsets<'a>(
        &'a self,
        local: Local<'a>,
        group: GroupId,
        partitions: Vec<TopicPartition>,
    ) -> BoxFuture<'a, Result<Vec<Option<GroupError>>, i16>> {
        Box::pin(async move {
            match local
                .coordinator
                .delete_offsets(group.clone(), partitions.clone())
                .await
            {
                Ok(results) => Ok(results.into_iter().map(|(_, e)| e).collect()),
                Err(GroupError::GroupIdNotFound) => {
                    self.delete_offsets_upstream(local, &group, &partitions)
                        .await
                }
                Err(e) => Err(e.code()),
            }
        })
    }

    fn delete_group<'a>(
        &'a self,
        local: Local<'a>,
        group: GroupId,
    ) -> BoxFuture<'a, Result<(), i16>> {
        Box::pin(async move {
            match local.coordinator.delete_group(group.clone()).await {
                Err(GroupError::GroupIdNotFound) => {
                    // A group koord does not have: the upstream's (offsets only, or from
                    // before koord), deleted there as Kafka deletes it; GROUP_ID_NOT_FOUND if
                    // upstream has none either, upstream's code if it refuses
                    // (NON_EMPTY_GROUP: members talking to it directly). Cluster mode: only
                    // while the group's shard is still this node's.
                    Self::fence(local, &group).await?;
                    match self
                        .up
                        .delete_group(group.as_str(), self.up.retry_for())
                        .await
                    {
                        Ok(true) => Ok(()),
                        Ok(false) => Err(GroupError::GroupIdNotFound.code()),
                        Err(e) => Err(e.answer(group.as_str(), "DeleteGroups")),
                    }
                }
                other => other.map_err(GroupError::code),
            }
        })
    }

    fn read_shared<'a>(
        &'a self,
        _logs: &'a Logs,
        reads: Vec<ShareRead>,
        spec: ShareReadSpec,
    ) -> BoxFuture<'a, Vec<ShareReadResult>> {
        Box::pin(self.read_upstream(reads, spec))
    }

    fn log_ends<'a>(
        &'a self,
        _logs: &'a Logs,
        partitions: Vec<(Topic, i32)>,
    ) -> BoxFuture<'a, Vec<Option<i64>>> {
        Box::pin(async move {
            let keys: Vec<(String, i32)> =
                partitions.into_iter().map(|(t, p)| (t.name, p)).collect();
            self.up
                .offsets_at(&keys, LATEST)
                .await
                .into_iter()
                .map(Result::ok)
                .collect()
        })
    }

    fn await_shared<'a>(
        &'a self,
        _logs: &'a Logs,
        after: Vec<(Topic, i32, i64)>,
        read_committed: bool,
        deadline: Instant,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let from: Vec<(String, i32, i64)> = after
                .into_iter()
                .map(|(t, p, end)| (t.name, p, end))
                .collect();
            let began = Instant::now();
            let wait = deadline.saturating_duration_since(began);
            // Upstream holds the answer until a partition has a byte past its end, or `wait`;
            // what it sends is read again by the caller, from the group's offsets.
            let answered = self.up.fetch_records(&from, 1, read_committed, wait).await;
            if answered.iter().all(Result::is_err) && began.elapsed() < FAILED_WAIT_PAUSE {
                // Upstream failed at once: no tight loop of reads against it.
                tokio::time::sleep_until(deadline.min(began + FAILED_WAIT_PAUSE)).await;
            }
        })
    }

    fn list_groups<'a>(&'a self, local: Local<'a>) -> BoxFuture<'a, Result<Vec<Listed>, i16>> {
        Box::pin(async move {
            let mut groups = listed(local.coordinator);
            let upstream = self
                .up
                .list_groups()
                .await
                .map_err(|e| e.answer("", "ListGroups"))?;
            // Every group koord has, whatever the filters: upstream's view of it (an
            // offsets-only Empty group) is not the group's.
            let own: HashSet<String> = groups.iter().map(|g| g.id.clone()).collect();
            groups.extend(
                upstream
                    .into_iter()
                    .filter(|g| !own.contains(g.group_id.as_str()))
                    .map(|g| Listed {
                        id: g.group_id.as_str().to_string(),
                        protocol_type: g.protocol_type.to_string(),
                        state: g.group_state.to_string(),
                        group_type: g.group_type.to_string(),
                    }),
            );
            groups.sort_by(|a, b| a.id.cmp(&b.id));
            Ok(groups)
        })
    }

    fn describe_elsewhere<'a>(
        &'a self,
        group: &'a GroupId,
    ) -> BoxFuture<'a, Result<Option<DescribedGroup>, i16>> {
        Box::pin(async move {
            // Upstream describes a group of its own as Kafka does (Empty, no members).
            match self.up.describe_group(group.as_str()).await {
                Ok(g) if g.group_state.as_str() != "Dead" => Ok(Some(g)),
                Ok(_) => Ok(None),
                Err(e) => Err(e.answer(group.as_str(), "DescribeGroups")),
            }
        })
    }

    /// Upstream: the topics are upstream's.
    /// Asked of upstream each time (a topic's configs are upstream's); an upstream that does
    /// not know the config (a Kafka before 4.4) lets any existing topic serve, and a topic
    /// koord creates there gets only the timestamp type.
    fn dead_letter_topic<'a>(
        &'a self,
        _local: Local<'a>,
        _topics: &'a Topics,
        name: &'a str,
        create: Option<i32>,
    ) -> BoxFuture<'a, Result<i32, DeadLetterTopicError>> {
        Box::pin(async move {
            let found = self.up.topic_config(name, DLQ_ENABLE).await;
            if let Some(checked) = as_queue(name, found.map_err(dlq_error)?) {
                return checked;
            }
            // Upstream's default partition count, as Kafka's own queue topics get.
            create.ok_or_else(|| DeadLetterTopicError::missing(name))?;
            let configs = dead_letter_topic_configs();
            let made = match self.up.create_topic(name, -1, -1, &configs).await {
                // An older Kafka refuses the config it does not know.
                Err(e) if e.code() == Some(ResponseError::InvalidConfig.code()) => {
                    self.up.create_topic(name, -1, -1, &configs[1..]).await
                }
                other => other,
            };
            made.map_err(dlq_error)?;
            // Checked as made (or as another made it meanwhile).
            let found = self.up.topic_config(name, DLQ_ENABLE).await;
            as_queue(name, found.map_err(dlq_error)?).unwrap_or_else(|| {
                Err(DeadLetterTopicError::Unavailable(format!(
                    "DLQ topic {name} not seen yet after its creation"
                )))
            })
        })
    }

    fn append<'a>(
        &'a self,
        _logs: &'a Logs,
        topic: &'a Topic,
        partition: i32,
        batch: Bytes,
    ) -> BoxFuture<'a, Result<(), DeadLetterTopicError>> {
        Box::pin(async move {
            let batches = BTreeMap::from([(partition, batch)]);
            self.up
                .produce_batches(&topic.name, &batches, self.up.retry_for())
                .await
                .map_err(dlq_error)
        })
    }

    fn create_topic<'a>(
        &'a self,
        _local: Local<'a>,
        name: &'a str,
        partitions: i32,
        replication: i16,
        configs: &'a [(String, String)],
    ) -> BoxFuture<'a, Result<Option<Topic>, String>> {
        Box::pin(async move {
            self.up
                .create_topic(name, partitions, replication, configs)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// An upstream failure for the dead-letter queue writer: tried again only when upstream could
/// not be reached.
fn dlq_error(e: UpstreamError) -> DeadLetterTopicError {
    if e.is_unavailable() {
        DeadLetterTopicError::Unavailable(e.to_string())
    } else {
        DeadLetterTopicError::Refused(e.to_string())
    }
}

/// Whether upstream's answer about topic `name` (its partition count and DLQ config, `None`
/// when it does not exist) lets it serve as a queue: an upstream that does not know the
/// config (a Kafka before 4.4) lets any topic serve.
fn as_queue(
    name: &str,
    found: Option<(i32, Option<String>)>,
) -> Option<Result<i32, DeadLetterTopicError>> {
    let (partitions, enabled) = found?;
    Some(match enabled.as_deref() {
        Some("true") | None => Ok(partitions),
        Some(_) => Err(DeadLetterTopicError::not_enabled(name)),
    })
}

impl Upstreamed {
    /// The `forwarded` partitions of `req` committed inside the producer's upstream
    /// transaction, as a commit of no member (generation -1): koord has checked the member,
    /// and upstream verifies the transaction. Each partition's code, or the code of them all.
    /// Sent by topic name (at most v5: `api/` has named v6's topics by their ids).
    async fn upstream_commit(
        &self,
        req: &TxnOffsetCommitRequest,
        version: i16,
        forwarded: &[TopicPartition],
    ) -> Result<HashMap<TopicPartition, i16>, i16> {
        let mut fwd = req.clone();
        fwd.generation_id_or_member_epoch = -1;
        fwd.member_id = StrBytes::default();
        fwd.group_instance_id = None;
        for t in &mut fwd.topics {
            t.partitions.retain(|p| {
                forwarded.contains(&TopicPartition::new(t.name.as_str(), p.partition_index))
            });
        }
        fwd.topics.retain(|t| !t.partitions.is_empty());
        match self.up.txn_commit_offsets(&fwd, version.min(5)).await {
            Ok(resp) => Ok(resp
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
                .collect()),
            Err(e) => Err(e.answer(req.group_id.as_str(), "TxnOffsetCommit")),
        }
    }

    /// A group koord does not have: the upstream's (offsets only, or from before koord), its
    /// offsets deleted there as Kafka deletes them. Each partition's error as upstream
    /// answered it (a code koord has no name for as UNKNOWN_SERVER_ERROR), or the group's
    /// code: upstream's (GROUP_ID_NOT_FOUND when it has none either).
    async fn delete_offsets_upstream(
        &self,
        local: Local<'_>,
        group: &GroupId,
        partitions: &[TopicPartition],
    ) -> Result<Vec<Option<GroupError>>, i16> {
        // Cluster mode: only while the group's shard is still this node's.
        Self::fence(local, group).await?;
        let answered = self
            .up
            .offset_delete(group.as_str(), partitions)
            .await
            .map_err(|e| e.answer(group.as_str(), "OffsetDelete"))?;
        let code_of: HashMap<&TopicPartition, i16> =
            answered.iter().map(|(tp, c)| (tp, *c)).collect();
        Ok(partitions
            .iter()
            .map(|tp| match code_of.get(tp).copied().unwrap_or(0) {
                0 => None,
                c => Some(GroupError::from_code(c).unwrap_or(GroupError::UnknownServerError)),
            })
            .collect())
    }
}
