//! The seam between koord's own groups and what lies behind them, chosen at start-up: nothing
//! in standalone mode ([`Standalone`]: the coordinator's store has every group and offset);
//! the upstream cluster in gateway mode (`crate::gateway::backend`), which keeps the committed
//! offsets, has groups of its own (offsets only, or from before koord) and the transactions.
//!
//! The API handlers and the broker call it; none of them asks which mode it runs in. Each
//! method is what a request needs whole, standalone and gateway alike.

use std::collections::HashMap;

use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::TxnOffsetCommitRequest;
use kafka_protocol::ResponseError;
use tokio::time::Instant;

use crate::coordinator::{Coordinator, TxnOffsetCommit};
use crate::group::share::AutoOffsetReset;
use crate::log::{AppendWatch, Logs};
use crate::metadata::topic_config::TopicConfigs;
use crate::metadata::{CreateError, Topic, Topics};
use crate::offsets::{FetchedOffset, TopicPartition};
use crate::storage::{Storage, StoreError};
use crate::transactions::{ShellError, Transactions};
use crate::txn::{Member, ProducerIdAndEpoch};
use crate::vocab::{error_code, GroupError, GroupId, MemberId};

/// What koord holds itself, which a backend answers from or checks against.
#[derive(Clone, Copy)]
pub struct Local<'a> {
    pub coordinator: &'a Coordinator,
    pub txns: &'a Transactions,
    pub storage: &'a Storage,
    pub topics: &'a dyn OwnTopics,
}

/// koord's own data plane, where a backend that keeps no topics of its own creates one.
pub trait OwnTopics: Sync {
    /// Creates topic `name` with `configs` (each a valid topic config), applied and durable
    /// when this returns (the store's error: the topic is served regardless).
    fn create_own<'a>(
        &'a self,
        name: &'a str,
        partitions: i32,
        configs: TopicConfigs,
    ) -> BoxFuture<'a, OwnCreated>;
}

/// What [`OwnTopics::create_own`] did: the topic, with the store's answer.
pub type OwnCreated = Result<(Topic, Result<(), StoreError>), CreateError>;

/// One group's committed offsets: grouped by topic in request (or stored) order, each
/// partition with its error code. Codes, not [`GroupError`]s: a backend's are passed on as
/// it answered them.
pub type GroupOffsets = Vec<(String, Vec<(FetchedOffset, i16)>)>;

/// A group as ListGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub id: String,
    pub protocol_type: String,
    pub state: String,
    pub group_type: String,
}

/// Why TxnOffsetCommit's offsets were not taken at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnCommitRefused {
    /// The producer may not commit offsets to the group now (its transaction).
    Producer(ShellError),
    /// The group's (or the backend's) code, for every partition.
    Group(i16),
}

/// One partition a share group reads (ShareFetch) from `offset`, the group's next one; `None`
/// when the group has not read it yet (`share.auto.offset.reset` decides).
#[derive(Debug, Clone)]
pub struct ShareRead {
    pub topic: Topic,
    pub partition: i32,
    pub offset: Option<i64>,
}

/// How a share group reads: whole batches within `max_bytes` in all (at least one batch),
/// from where `reset` says in a partition it has not read, only committed records (and the
/// aborted transactions among them) with `read_committed`.
#[derive(Debug, Clone, Copy)]
pub struct ShareReadSpec {
    pub max_bytes: usize,
    pub reset: AutoOffsetReset,
    pub read_committed: bool,
    /// The most a batch may decompress to when searched by timestamp (`by_duration`).
    pub max_decompressed: usize,
}

/// One partition as a share group read it.
#[derive(Debug, Clone, Default)]
pub struct SharedRead {
    /// Where `share.auto.offset.reset` puts a group that has not read the partition (set only
    /// for a read without an offset).
    pub start: i64,
    /// Whole batches, oldest first.
    pub batches: Vec<Bytes>,
    /// read_committed: the aborted transactions overlapping them, `(producer id, first
    /// offset)`.
    pub aborted: Vec<(i64, i64)>,
    /// The log's end as the read saw it: a waiting ShareFetch wakes for records past it.
    pub end: i64,
}

/// A share group's read of one partition: what was read (`None`: nothing to hand the group,
/// the offset is past the log), or the partition's error.
pub type ShareReadResult = Result<Option<SharedRead>, ResponseError>;

/// A request's offsets and groups, where they live. See the module documentation.
pub trait Backend: Send + Sync {
    /// Whether committed offsets are kept behind koord, with that retention: the coordinator
    /// then expires none (it forgets a long-Empty group's records, never its offsets).
    fn keeps_offsets(&self) -> bool;

    /// Whether the partition logs outlive koord's process (upstream's in gateway mode; koord's
    /// own live in memory): share groups keep their partitions' delivery states only then.
    fn keeps_logs(&self) -> bool;

    /// OffsetFetch of `group` by `member` (v9+: a consumer-group member names itself and its
    /// epoch), for the `wanted` partitions of each topic (`None`: every committed offset).
    fn fetch_offsets<'a>(
        &'a self,
        local: Local<'a>,
        group: GroupId,
        member: Option<(MemberId, i32)>,
        wanted: Option<Vec<(String, Vec<i32>)>>,
        require_stable: bool,
    ) -> BoxFuture<'a, Result<GroupOffsets, i16>>;

    /// TxnOffsetCommit's `commit` (the partitions that passed the API's checks) for `group`,
    /// from `req` at `version`: each partition's code, in the order of `commit.partitions`.
    fn commit_txn_offsets<'a>(
        &'a self,
        local: Local<'a>,
        group: GroupId,
        commit: TxnOffsetCommit,
        req: &'a TxnOffsetCommitRequest,
        version: i16,
    ) -> BoxFuture<'a, Result<Vec<(TopicPartition, i16)>, TxnCommitRefused>>;

    /// OffsetDelete of `partitions` (each passed the API's checks): each one's error, in
    /// order, or the group's code.
    fn delete_offsets<'a>(
        &'a self,
        local: Local<'a>,
        group: GroupId,
        partitions: Vec<TopicPartition>,
    ) -> BoxFuture<'a, Result<Vec<Option<GroupError>>, i16>>;

    /// DeleteGroups of one group.
    fn delete_group<'a>(
        &'a self,
        local: Local<'a>,
        group: GroupId,
    ) -> BoxFuture<'a, Result<(), i16>>;

    /// Every group there is, sorted by id (ListGroups filters them).
    fn list_groups<'a>(&'a self, local: Local<'a>) -> BoxFuture<'a, Result<Vec<Listed>, i16>>;

    /// A group koord does not hold, described where it lives: `None` if it lives nowhere.
    fn describe_elsewhere<'a>(
        &'a self,
        group: &'a GroupId,
    ) -> BoxFuture<'a, Result<Option<DescribedGroup>, i16>>;

    /// A share group's reads of `reads`, in their order: koord's own logs standalone, the
    /// upstream partitions in gateway mode.
    fn read_shared<'a>(
        &'a self,
        logs: &'a Logs,
        reads: Vec<ShareRead>,
        spec: ShareReadSpec,
    ) -> BoxFuture<'a, Vec<ShareReadResult>>;

    /// Each partition's log end (`None`: not known now), in order: a share group's lag.
    fn log_ends<'a>(
        &'a self,
        logs: &'a Logs,
        partitions: Vec<(Topic, i32)>,
    ) -> BoxFuture<'a, Vec<Option<i64>>>;

    /// Waits until one of the partitions `after` (each with the log end a read saw) has
    /// records past that end, or until `deadline`: a ShareFetch's long poll.
    fn await_shared<'a>(
        &'a self,
        logs: &'a Logs,
        after: Vec<(Topic, i32, i64)>,
        read_committed: bool,
        deadline: Instant,
    ) -> BoxFuture<'a, ()>;

    /// A share group's dead-letter queue topic `name`, as Kafka checks it before writing to it
    /// (`ShareGroupDLQStateManager.validateDlqTopic`): it exists with
    /// `errors.deadletterqueue.group.enable=true`, or it is missing and `create` (the broker's
    /// `errors.deadletterqueue.auto.create.topics.enable`) creates it so, with that many
    /// partitions. Its partition count, or why it cannot be written to (Kafka's message).
    fn dead_letter_topic<'a>(
        &'a self,
        local: Local<'a>,
        topics: &'a Topics,
        name: &'a str,
        create: Option<i32>,
    ) -> BoxFuture<'a, Result<i32, DeadLetterTopicError>>;

    /// Appends the record batch `batch` to `topic`'s `partition` where topics live: koord's
    /// own log standalone, upstream's (acks=all) in gateway mode.
    fn append<'a>(
        &'a self,
        logs: &'a Logs,
        topic: &'a Topic,
        partition: i32,
        batch: Bytes,
    ) -> BoxFuture<'a, Result<(), DeadLetterTopicError>>;

    /// Creates an internal topic a group needs (Kafka Streams' repartition and changelog
    /// topics) where topics live: the topic, or `None` when it existed already.
    fn create_topic<'a>(
        &'a self,
        local: Local<'a>,
        name: &'a str,
        partitions: i32,
        replication: i16,
        configs: &'a [(String, String)],
    ) -> BoxFuture<'a, Result<Option<Topic>, String>>;
}

/// Standalone mode: koord's own store holds every group and offset.
pub struct Standalone;

impl Backend for Standalone {
    fn keeps_offsets(&self) -> bool {
        false
    }

    fn keeps_logs(&self) -> bool {
        false
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
            let order: Option<Vec<String>> = wanted
                .as_ref()
                .map(|w| w.iter().map(|(t, _)| t.clone()).collect());
            let partitions = wanted.map(|w| {
                w.into_iter()
                    .flat_map(|(t, ps)| {
                        ps.into_iter()
                            .map(move |p| TopicPartition::new(t.clone(), p))
                    })
                    .collect::<Vec<_>>()
            });
            let fetched = local
                .coordinator
                .fetch_offsets_as(group, member, partitions, require_stable)
                .await
                .map_err(GroupError::code)?;
            // Group by topic in first-seen order; an index keeps this linear for a fetch of
            // every offset of a group with many topics.
            let mut by_topic: GroupOffsets = Vec::new();
            let mut index: HashMap<String, usize> = HashMap::new();
            for f in fetched {
                let i = *index.entry(f.tp.topic.clone()).or_insert_with(|| {
                    by_topic.push((f.tp.topic.clone(), Vec::new()));
                    by_topic.len() - 1
                });
                let code = error_code(f.error);
                by_topic[i].1.push((f, code));
            }
            if let Some(order) = order {
                // Topics named in the request with no partitions still get an (empty) entry.
                for t in order {
                    if !index.contains_key(&t) {
                        index.insert(t.clone(), by_topic.len());
                        by_topic.push((t, Vec::new()));
                    }
                }
            }
            Ok(by_topic)
        })
    }

    fn commit_txn_offsets<'a>(
        &'a self,
        local: Local<'a>,
        group: GroupId,
        commit: TxnOffsetCommit,
        req: &'a TxnOffsetCommitRequest,
        version: i16,
    ) -> BoxFuture<'a, Result<Vec<(TopicPartition, i16)>, TxnCommitRefused>> {
        Box::pin(async move {
            let producer = ProducerIdAndEpoch {
                producer_id: commit.producer_id,
                epoch: commit.producer_epoch,
            };
            if version >= 5 {
                // Transaction version 2: the commit adds the group to the transaction itself,
                // as Kafka's group coordinator does through AddPartitionsToTxnManager.
                local
                    .txns
                    .add_offsets(&req.transactional_id, producer, group.as_str())
                    .await
                    .map_err(TxnCommitRefused::Producer)?;
            }
            local
                .txns
                .verify(
                    &req.transactional_id,
                    producer,
                    Member::Group(group.as_str()),
                )
                .map_err(TxnCommitRefused::Producer)?;
            let results = local
                .coordinator
                .commit_txn_offsets(group, commit)
                .await
                .map_err(|e| TxnCommitRefused::Group(e.code()))?;
            Ok(results
                .into_iter()
                .map(|(tp, e)| (tp, error_code(e)))
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
            let results = local
                .coordinator
                .delete_offsets(group, partitions)
                .await
                .map_err(GroupError::code)?;
            Ok(results.into_iter().map(|(_, e)| e).collect())
        })
    }

    fn delete_group<'a>(
        &'a self,
        local: Local<'a>,
        group: GroupId,
    ) -> BoxFuture<'a, Result<(), i16>> {
        Box::pin(async move {
            local
                .coordinator
                .delete_group(group)
                .await
                .map_err(GroupError::code)
        })
    }

    fn list_groups<'a>(&'a self, local: Local<'a>) -> BoxFuture<'a, Result<Vec<Listed>, i16>> {
        Box::pin(async move { Ok(listed(local.coordinator)) })
    }

    fn read_shared<'a>(
        &'a self,
        logs: &'a Logs,
        reads: Vec<ShareRead>,
        spec: ShareReadSpec,
    ) -> BoxFuture<'a, Vec<ShareReadResult>> {
        Box::pin(async move {
            let mut left = spec.max_bytes.max(1);
            reads
                .into_iter()
                .map(|r| {
                    let log = logs
                        .partition(&r.topic, r.partition)
                        .ok_or(ResponseError::UnknownTopicOrPartition)?;
                    let read = read_own(&log, r.offset, left, spec);
                    if let Some(read) = &read {
                        let bytes: usize = read.batches.iter().map(Bytes::len).sum();
                        left = left.saturating_sub(bytes).max(1);
                    }
                    Ok(read)
                })
                .collect()
        })
    }

    fn log_ends<'a>(
        &'a self,
        logs: &'a Logs,
        partitions: Vec<(Topic, i32)>,
    ) -> BoxFuture<'a, Vec<Option<i64>>> {
        Box::pin(async move {
            partitions
                .iter()
                .map(|(t, p)| Some(logs.partition(t, *p)?.lock().log_end_offset()))
                .collect()
        })
    }

    fn await_shared<'a>(
        &'a self,
        logs: &'a Logs,
        after: Vec<(Topic, i32, i64)>,
        _read_committed: bool,
        deadline: Instant,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let parts: Vec<(Arc<crate::log::Partition>, i64)> = after
                .iter()
                .filter_map(|(t, p, end)| Some((logs.partition(t, *p)?, *end)))
                .collect();
            // Interest first, then the check: an append in between still wakes the wait.
            let mut watch = AppendWatch::new(parts.iter().map(|(p, _)| &**p));
            if parts
                .iter()
                .any(|(p, end)| p.lock().log_end_offset() > *end)
            {
                return;
            }
            tokio::select! {
                _ = watch.appended() => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        })
    }

    fn describe_elsewhere<'a>(
        &'a self,
        _group: &'a GroupId,
    ) -> BoxFuture<'a, Result<Option<DescribedGroup>, i16>> {
        Box::pin(async { Ok(None) })
    }

    fn dead_letter_topic<'a>(
        &'a self,
        local: Local<'a>,
        topics: &'a Topics,
        name: &'a str,
        create: Option<i32>,
    ) -> BoxFuture<'a, Result<i32, DeadLetterTopicError>> {
        Box::pin(async move {
            if let Some(topic) = topics.get(name) {
                return if topics.configs(name).get(DLQ_ENABLE).map(String::as_str) == Some("true") {
                    Ok(topic.partitions)
                } else {
                    Err(DeadLetterTopicError::not_enabled(name))
                };
            }
            let partitions = create.ok_or_else(|| DeadLetterTopicError::missing(name))?;
            match self
                .create_topic(local, name, partitions, -1, &dead_letter_topic_configs())
                .await
                .map_err(DeadLetterTopicError::Refused)?
            {
                Some(topic) => Ok(topic.partitions),
                // Created meanwhile by another: checked as it was made.
                None => Box::pin(self.dead_letter_topic(local, topics, name, None)).await,
            }
        })
    }

    fn append<'a>(
        &'a self,
        logs: &'a Logs,
        topic: &'a Topic,
        partition: i32,
        batch: Bytes,
    ) -> BoxFuture<'a, Result<(), DeadLetterTopicError>> {
        Box::pin(async move {
            let refused = DeadLetterTopicError::Refused;
            let log = logs
                .partition(topic, partition)
                .ok_or_else(|| refused(format!("{}-{partition} does not exist", topic.name)))?;
            let valid = crate::log::batch::validate_produce(&batch, 9)
                .map_err(|e| refused(e.to_string()))?;
            log.append(&valid)
                .map(|_| ())
                .map_err(|e| refused(e.to_string()))
        })
    }

    /// In koord's own data plane; configs it does not know are left out (the topic is
    /// created without them), as the replication factor is.
    fn create_topic<'a>(
        &'a self,
        local: Local<'a>,
        name: &'a str,
        partitions: i32,
        _replication: i16,
        configs: &'a [(String, String)],
    ) -> BoxFuture<'a, Result<Option<Topic>, String>> {
        Box::pin(async move {
            let mut valid = TopicConfigs::new();
            for (k, v) in configs {
                match crate::metadata::topic_config::validate(k, v) {
                    Ok(()) => {
                        valid.insert(k.clone(), v.clone());
                    }
                    Err(e) => tracing::debug!(topic = %name, config = %k, "config left out: {e}"),
                }
            }
            match local.topics.create_own(name, partitions, valid).await {
                Ok((topic, stored)) => {
                    if let Err(e) = stored {
                        tracing::error!(topic = %name, "topic not stored: {e}");
                    }
                    Ok(Some(topic))
                }
                Err(CreateError::AlreadyExists) => Ok(None),
                Err(CreateError::InvalidName(e)) => Err(e),
            }
        })
    }
}

/// Why a dead-letter queue topic cannot be written to now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadLetterTopicError {
    /// As Kafka refuses it (its message): the records are archived without it.
    Refused(String),
    /// Not reachable now (gateway mode): worth another attempt.
    Unavailable(String),
}

impl DeadLetterTopicError {
    pub fn not_enabled(name: &str) -> DeadLetterTopicError {
        DeadLetterTopicError::Refused(format!(
            "DLQ is not enabled on configured DLQ topic {name} ({DLQ_ENABLE} is not true)."
        ))
    }

    pub fn missing(name: &str) -> DeadLetterTopicError {
        DeadLetterTopicError::Refused(format!(
            "DLQ topic {name} does not exist and auto create is disabled \
             (errors.deadletterqueue.auto.create.topics.enable)."
        ))
    }
}

/// The topic config that lets share groups use a topic as their dead-letter queue (Kafka 4.4).
pub const DLQ_ENABLE: &str = "errors.deadletterqueue.group.enable";

/// The configs of a dead-letter queue topic koord creates, as Kafka's
/// (`ShareGroupDLQStateManager.createTopicBuilder`).
pub fn dead_letter_topic_configs() -> Vec<(String, String)> {
    vec![
        (DLQ_ENABLE.to_string(), "true".to_string()),
        (
            "message.timestamp.type".to_string(),
            "CreateTime".to_string(),
        ),
    ]
}

/// The coordinator's groups as ListGroups shows them, sorted by id.
pub fn listed(coordinator: &Coordinator) -> Vec<Listed> {
    coordinator
        .list()
        .into_iter()
        .map(|g| Listed {
            id: g.group_id.0,
            protocol_type: g.protocol_type,
            state: g.state.as_str().to_string(),
            group_type: g.state.group_type().to_string(),
        })
        .collect()
}

/// A share group's read of koord's own log `log` from `offset` (`None`: where `spec.reset`
/// puts it), within `max_bytes`.
fn read_own(
    log: &crate::log::Partition,
    offset: Option<i64>,
    max_bytes: usize,
    spec: ShareReadSpec,
) -> Option<SharedRead> {
    let now = crate::log::now_ms();
    // `by_duration`: the first record at most that old (none: the log end), searched before
    // the log is locked for the read (the search locks it batch by batch).
    let by_time = match (offset, spec.reset) {
        (None, AutoOffsetReset::ByDuration(ms)) => log
            .offset_for_timestamp(now.saturating_sub(ms), spec.max_decompressed)
            .map(|(offset, _)| offset),
        _ => None,
    };
    let mut log = log.lock();
    log.expire(now);
    let start = match spec.reset {
        AutoOffsetReset::Earliest => log.log_start_offset(),
        AutoOffsetReset::Latest => log.log_end_offset(),
        AutoOffsetReset::ByDuration(_) => by_time.unwrap_or(log.log_end_offset()),
    };
    // Below the log's start, records went (the group archives what it had not delivered of
    // them). The group's offset never passes a log's end: koord's own logs start over only
    // with koord, and its share groups with them (`ShareSettings::logs_kept`).
    let from = offset.map_or(start, |o| o.max(log.log_start_offset()));
    let end = log.log_end_offset();
    let read = log
        .read_isolated(from, max_bytes, true, spec.read_committed)
        .ok()?;
    Some(SharedRead {
        start,
        batches: read.batches,
        aborted: read.aborted,
        end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::Broker;
    use crate::config::Config;

    /// A dead-letter queue topic standalone: one made with the DLQ config serves, one without
    /// is refused, a missing one is refused unless auto-creation makes it (with the config).
    #[tokio::test]
    async fn dead_letter_topics_are_checked_and_created_as_kafka_does() {
        let dir = std::env::temp_dir().join(format!("koord-dlq-{}", uuid::Uuid::new_v4()));
        let broker = Broker::new(Config {
            data_dir: dir.clone(),
            ..Config::default()
        })
        .unwrap();
        let check = |name: &'static str, create: Option<i32>| {
            let broker = &broker;
            async move {
                Standalone
                    .dead_letter_topic(broker.local(), &broker.topics, name, create)
                    .await
            }
        };
        assert!(matches!(
            check("dlq.missing", None).await,
            Err(DeadLetterTopicError::Refused(_))
        ));
        assert_eq!(check("dlq.made", Some(3)).await, Ok(3));
        assert_eq!(
            broker
                .topics
                .configs("dlq.made")
                .get(DLQ_ENABLE)
                .map(String::as_str),
            Some("true")
        );
        assert_eq!(check("dlq.made", None).await, Ok(3));
        let (_, stored) = broker
            .create_topic("dlq.plain", 2, TopicConfigs::new())
            .await
            .unwrap();
        stored.unwrap();
        assert!(matches!(
            check("dlq.plain", Some(1)).await,
            Err(DeadLetterTopicError::Refused(_))
        ));
        let _ = std::fs::remove_dir_all(dir);
    }
}
