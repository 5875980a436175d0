//! The share group (KIP-932): membership as Kafka 4.4's `GroupMetadataManager.shareGroupHeartbeat`
//! runs it, the share sessions its members fetch through (Kafka's `ShareSessionCache`, one per
//! member and broker it fetches from), and the group's share partitions ([`SharePartition`]), all in one pure value owned
//! by the group's shard.
//!
//! Membership, check by check from Kafka:
//! 1. epoch -1 leaves (an unknown member is UNKNOWN_MEMBER_ID); epoch 0 joins, or continues a
//!    member that is still known (a client that restarted with its id); any other epoch must be
//!    the member's current one, or its previous one (FENCED_MEMBER_EPOCH otherwise);
//! 2. a changed subscription, or a change in the subscribed topics, bumps the group epoch;
//! 3. a group epoch ahead of the assignment's computes a new target ([`super::assign`]);
//! 4. the member takes its target at once: a share member has nothing to revoke, its records
//!    are acquired one fetch at a time, so its epoch jumps to the assignment epoch (Kafka's
//!    `ShareGroupAssignmentBuilder`).
//!
//! A member that leaves, is fenced by its session timeout, or closes its share session gives
//! back what it had acquired (Kafka's `ShareGroupListener.onMemberLeave` -> `releaseSession`).
//!
//! Where this differs from Kafka, on purpose: the share sessions live with the group (Kafka's
//! broker keeps them beside the partitions it leads), so a ShareFetch is served by the group's
//! shard; the target is computed in the heartbeat that needs it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};

use super::assign::{assign, Subscriber};
use super::partition::{
    AckBatch, AckError, AckType, AcquireMode, Acquired, DeadLetter, PartitionConfig,
    PartitionState, ReadBatch, SharePartition,
};
use crate::group::core::TopicImage;
use crate::group::modern::{Modern, ModernMember, Refusal};
use crate::vocab::{GroupError, GroupId, InstanceId, MemberId, Partitions, Timestamp, TopicId};

/// `ShareGroupHeartbeatRequest.LEAVE_GROUP_MEMBER_EPOCH`.
pub const LEAVE_EPOCH: i32 = -1;
/// `ShareRequestMetadata.INITIAL_EPOCH`: opens a share session.
pub const INITIAL_SESSION_EPOCH: i32 = 0;
/// `ShareRequestMetadata.FINAL_EPOCH`: closes it.
pub const FINAL_SESSION_EPOCH: i32 = -1;

/// Where a share partition starts when the group first reads it (`share.auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoOffsetReset {
    Earliest,
    /// Kafka's default.
    #[default]
    Latest,
    /// `by_duration:<ISO-8601 duration>`: the first record at most this many milliseconds
    /// old.
    ByDuration(i64),
}

/// A share group's settings: the broker's `group.share.*` defaults with the group's own
/// configs over them (Kafka's `GroupConfig`), resolved by the shell at every call, so that a
/// config altered at run time applies from the next request.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareSettings {
    /// `share.session.timeout.ms` (`group.share.session.timeout.ms`, 45000).
    pub session_timeout_ms: u64,
    /// `share.heartbeat.interval.ms` (`group.share.heartbeat.interval.ms`, 5000).
    pub heartbeat_interval_ms: i32,
    /// `group.share.max.size` (200).
    pub max_size: usize,
    /// `share.auto.offset.reset` (latest).
    pub auto_offset_reset: AutoOffsetReset,
    /// `share.isolation.level`: read_committed delivers no record of an aborted transaction.
    pub read_committed: bool,
    /// The lock duration, delivery-count limit and in-flight limit of its partitions.
    pub partition: PartitionConfig,
    /// Whether the partition logs outlived the last restart. When not (standalone koord's logs
    /// live in memory), a restored group's partitions start over at offset 0 of the new logs:
    /// every record there is new to it, and nothing it acknowledged exists any more.
    pub logs_kept: bool,
}

/// Records of one partition for the dead-letter queue (the shell writes them to the queue the
/// group's configs name when it writes: none, if they were unset meanwhile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetters {
    pub topic: TopicId,
    pub partition: i32,
    pub letters: Vec<DeadLetter>,
}

impl Default for ShareSettings {
    fn default() -> Self {
        ShareSettings {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5000,
            max_size: 200,
            auto_offset_reset: AutoOffsetReset::Latest,
            read_committed: false,
            partition: PartitionConfig::default(),
            logs_kept: true,
        }
    }
}

/// A member of a share group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMember {
    pub member_id: MemberId,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Sorted, without duplicates.
    pub subscribed_topic_names: Vec<String>,
    pub assigned: Partitions,
}

impl ShareMember {
    fn new(member_id: MemberId) -> ShareMember {
        ShareMember {
            member_id,
            member_epoch: 0,
            previous_member_epoch: 0,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed_topic_names: Vec::new(),
            assigned: Partitions::new(),
        }
    }
}

impl ModernMember for ShareMember {
    fn member_id(&self) -> &MemberId {
        &self.member_id
    }

    fn instance_id(&self) -> Option<&InstanceId> {
        None
    }
}

/// The group's own stored record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareGroupRecord {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub metadata_hash: u64,
}

/// What the group asks the store to keep, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareRecord {
    Group(ShareGroupRecord),
    Member(ShareMember),
    RemoveMember(MemberId),
    /// A share partition's state (its start offset and the records past it that are not
    /// simply available).
    Partition {
        topic: TopicId,
        partition: i32,
        state: PartitionState,
    },
    /// A share partition's state is gone (DeleteShareGroupOffsets, or an AlterShareGroupOffsets
    /// to no offset, or its topic deleted): the group starts it where `share.auto.offset.reset`
    /// says.
    RemovePartition {
        topic: TopicId,
        partition: i32,
    },
    /// Every stored record of the group is gone; the records after it store it whole.
    Clear,
}

/// What the shell logs and counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareEvent {
    Joined(MemberId),
    Left(MemberId),
    Fenced {
        member: MemberId,
        why: &'static str,
    },
    EpochBumped {
        epoch: i32,
        why: &'static str,
    },
    /// Records a lock timeout made available again, or archived at the delivery limit.
    LocksExpired {
        released: u64,
        archived: u64,
    },
    /// Records a member acquired, those of them delivered before among them.
    Acquired {
        records: u64,
        redelivered: u64,
    },
    /// Records a member acknowledged, by type (GAP and RENEW not counted), and those its
    /// release archived at the delivery limit.
    Acknowledged {
        accepted: u64,
        released: u64,
        rejected: u64,
        archived: u64,
    },
    /// Records a member held when it left or its share session ended: available again, or
    /// archived at the delivery limit.
    Released {
        released: u64,
        archived: u64,
    },
}

impl ShareEvent {
    /// Whether records became available again with it (released, a lock expired, their
    /// member gone): a member waiting for records may take them now.
    pub fn made_available(&self) -> bool {
        match self {
            ShareEvent::LocksExpired { released, .. }
            | ShareEvent::Acknowledged { released, .. }
            | ShareEvent::Released { released, .. } => *released > 0,
            _ => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShareTimer {
    Session(MemberId),
    /// The earliest acquisition lock of a partition.
    Lock(TopicId, i32),
}

/// Kafka's `ShareGroup.ShareGroupState` (ListGroups and ShareGroupDescribe spell it so).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareGroupState {
    Empty,
    Stable,
    Dead,
}

impl ShareGroupState {
    pub fn as_str(self) -> &'static str {
        match self {
            ShareGroupState::Empty => "Empty",
            ShareGroupState::Stable => "Stable",
            ShareGroupState::Dead => "Dead",
        }
    }
}

/// A ShareGroupHeartbeat, normalised.
#[derive(Debug, Clone)]
pub struct ShareHeartbeat {
    pub member_id: MemberId,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    /// `None`: unchanged since the last heartbeat.
    pub subscribed_topic_names: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareHeartbeatReply {
    pub member_id: MemberId,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Sent when the member joins, sends its full state, or its assignment changed.
    pub assignment: Option<Partitions>,
}

/// One partition's acknowledgements in a ShareFetch or ShareAcknowledge.
#[derive(Debug, Clone)]
pub struct PartitionAcks {
    pub topic: TopicId,
    pub partition: i32,
    pub batches: Vec<AckBatch>,
}

/// The share-session part of a ShareFetch or ShareAcknowledge, normalised.
#[derive(Debug, Clone)]
pub struct SessionRequest {
    pub member_id: MemberId,
    /// The broker the member fetches from, as it sees them (its sessions are one per broker
    /// it fetches from: koord's own node standalone, each upstream broker koord presents in
    /// gateway mode).
    pub node: i32,
    /// The connection it came over: a session is closed with the connection that opened it.
    pub connection: u64,
    pub session_epoch: i32,
    /// ShareFetch: the partitions it names (a full request: the session's partitions; an
    /// incremental one: partitions added to it). ShareAcknowledge names none.
    pub fetch: Option<Vec<(TopicId, i32)>>,
    pub forgotten: Vec<(TopicId, i32)>,
    pub acks: Vec<PartitionAcks>,
}

/// What a share session request came to.
#[derive(Debug, Clone, Default)]
pub struct SessionAnswer {
    /// The partitions to fetch from now (none when the session closed, or for an
    /// acknowledgement), each with the offset to read from, or `None` when the group has not
    /// started reading it (the shell resolves `share.auto.offset.reset`).
    pub fetch: Vec<(TopicId, i32, Option<i64>)>,
    /// Each acknowledged partition's outcome.
    pub acks: Vec<(TopicId, i32, Result<(), AckError>)>,
    /// The request's full response lists every partition (a new session); an incremental
    /// one lists only those with something to say.
    pub full: bool,
}

/// One partition's records as the shell read them for an acquisition.
#[derive(Debug, Clone)]
pub struct ReadPartition {
    pub topic: TopicId,
    pub partition: i32,
    /// Where the group starts reading a partition it has not read before (ignored otherwise).
    pub start: i64,
    pub batches: Vec<ReadBatch>,
}

/// The partitions a share session holds.
type Held = BTreeSet<(TopicId, i32)>;

#[derive(Debug, Clone, Copy, Default)]
struct ShareSession {
    epoch: i32,
    /// The connection that opened it.
    connection: u64,
}

/// A share group.
#[derive(Debug)]
pub struct ShareGroup {
    base: Modern<ShareMember, ShareRecord, ShareEvent, ShareTimer>,
    settings: ShareSettings,
    metadata_hash: u64,
    target: BTreeMap<MemberId, Partitions>,
    partitions: BTreeMap<(TopicId, i32), SharePartition>,
    /// Each member's share sessions, one per broker it fetches from, with the partitions each
    /// holds (Kafka's `ShareSessionCache`, which each broker keeps for the partitions it leads).
    sessions: HashMap<(MemberId, i32), (ShareSession, Held)>,
}

impl std::ops::Deref for ShareGroup {
    type Target = Modern<ShareMember, ShareRecord, ShareEvent, ShareTimer>;

    fn deref(&self) -> &Self::Target {
        &self.base
    }
}

impl ShareGroup {
    pub fn new(id: GroupId, settings: ShareSettings) -> ShareGroup {
        ShareGroup {
            base: Modern::new(id),
            settings,
            metadata_hash: 0,
            target: BTreeMap::new(),
            partitions: BTreeMap::new(),
            sessions: HashMap::new(),
        }
    }

    /// The group as its stored records left it. Members' sessions start again at their
    /// timeout; acquired records of its partitions came back available (their locks died with
    /// the process that granted them).
    pub fn from_records(
        id: GroupId,
        settings: ShareSettings,
        record: ShareGroupRecord,
        members: Vec<ShareMember>,
        partitions: Vec<(TopicId, i32, PartitionState)>,
        now: Timestamp,
    ) -> ShareGroup {
        let mut group = ShareGroup::new(id, settings);
        group.base.group_epoch = record.group_epoch;
        group.base.assignment_epoch = record.assignment_epoch;
        group.metadata_hash = record.metadata_hash;
        for m in members {
            let id = m.member_id.clone();
            group.target.insert(id.clone(), m.assigned.clone());
            group.base.insert_member(m);
            let deadline = now.plus_ms(group.settings.session_timeout_ms);
            group.base.timers.set(ShareTimer::Session(id), deadline);
        }
        for (topic, partition, state) in partitions {
            let p = if group.settings.logs_kept {
                SharePartition::restore(state, group.settings.partition)
            } else {
                SharePartition::new(0, group.settings.partition)
            };
            group.partitions.insert((topic, partition), p);
        }
        group
    }

    pub fn state(&self) -> ShareGroupState {
        if self.base.dead {
            ShareGroupState::Dead
        } else if self.base.members.is_empty() {
            ShareGroupState::Empty
        } else {
            ShareGroupState::Stable
        }
    }

    pub fn settings(&self) -> &ShareSettings {
        &self.settings
    }

    /// The assignor's name, as ShareGroupDescribe reports it.
    pub fn assignor_name(&self) -> &'static str {
        "simple"
    }

    /// Its share partitions with their start offsets (DescribeShareGroupOffsets).
    pub fn partitions(&self) -> impl Iterator<Item = (&(TopicId, i32), &SharePartition)> {
        self.partitions.iter()
    }

    /// The records to persist since the last call, in order.
    pub fn take_records(&mut self) -> Vec<ShareRecord> {
        self.base.take_records()
    }

    pub fn take_events(&mut self) -> Vec<ShareEvent> {
        self.base.take_events()
    }

    /// Every record that stores the group as it is (the group's, each member's, each
    /// partition's).
    pub fn snapshot(&self) -> Vec<ShareRecord> {
        let mut out = vec![ShareRecord::Group(self.group_record())];
        out.extend(self.base.members.values().cloned().map(ShareRecord::Member));
        for ((topic, partition), p) in &self.partitions {
            out.push(ShareRecord::Partition {
                topic: *topic,
                partition: *partition,
                state: p.snapshot(),
            });
        }
        out
    }

    fn group_record(&self) -> ShareGroupRecord {
        ShareGroupRecord {
            group_epoch: self.base.group_epoch,
            assignment_epoch: self.base.assignment_epoch,
            metadata_hash: self.metadata_hash,
        }
    }

    /// A ShareGroupHeartbeat.
    ///
    /// # Errors
    /// Kafka's refusals: GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH.
    pub fn handle_heartbeat(
        &mut self,
        req: ShareHeartbeat,
        settings: &ShareSettings,
        image: &dyn TopicImage,
        now: Timestamp,
    ) -> Result<ShareHeartbeatReply, Refusal> {
        self.apply_settings(settings);
        if req.member_epoch == LEAVE_EPOCH {
            if !self.base.members.contains_key(&req.member_id) {
                return Err(self.base.unknown_member(&req.member_id));
            }
            self.fence(&req.member_id, "left the group", image, now);
            return Ok(ShareHeartbeatReply {
                member_id: req.member_id,
                member_epoch: LEAVE_EPOCH,
                heartbeat_interval_ms: 0,
                assignment: None,
            });
        }
        let joining = req.member_epoch == 0;
        if self.base.members.len() >= self.settings.max_size
            && !self.base.members.contains_key(&req.member_id)
        {
            return Err(Refusal::new(
                GroupError::GroupMaxSizeReached,
                format!(
                    "The share group has reached its maximum capacity of {} members.",
                    self.settings.max_size
                ),
            ));
        }
        let member = match self.base.members.get(&req.member_id) {
            Some(m) => {
                check_epoch(m, req.member_epoch)?;
                m.clone()
            }
            None if joining => {
                self.base
                    .events
                    .push(ShareEvent::Joined(req.member_id.clone()));
                ShareMember::new(req.member_id.clone())
            }
            None => return Err(self.base.unknown_member(&req.member_id)),
        };
        let is_new = !self.base.members.contains_key(&member.member_id);
        let mut updated = member.clone();
        if req.rack_id.is_some() {
            updated.rack_id = req.rack_id.clone();
        }
        if let Some(names) = &req.subscribed_topic_names {
            let mut names = names.clone();
            names.sort();
            names.dedup();
            updated.subscribed_topic_names = names;
        }
        updated.client_id = req.client_id.clone();
        updated.client_host = req.client_host.clone();
        let subscription_changed =
            is_new || updated.subscribed_topic_names != member.subscribed_topic_names;
        if is_new || updated != member {
            self.base.insert_member(updated.clone());
            self.base.records.push(ShareRecord::Member(updated));
        }
        let hash = self.metadata_hash(image);
        if subscription_changed || hash != self.metadata_hash {
            self.metadata_hash = hash;
            self.bump_epoch(if subscription_changed {
                "a member's subscription changed"
            } else {
                "subscribed topics changed"
            });
        }
        if self.base.group_epoch > self.base.assignment_epoch {
            self.compute_target(image);
        }
        let reassigned = self.reconcile(&req.member_id, image);
        self.base.timers.set(
            ShareTimer::Session(req.member_id.clone()),
            now.plus_ms(self.settings.session_timeout_ms),
        );
        let m = &self.base.members[&req.member_id];
        let full = joining || req.subscribed_topic_names.is_some();
        Ok(ShareHeartbeatReply {
            member_id: m.member_id.clone(),
            member_epoch: m.member_epoch,
            heartbeat_interval_ms: self.settings.heartbeat_interval_ms,
            assignment: (full || reassigned).then(|| m.assigned.clone()),
        })
    }

    /// Expired member sessions fence their members; expired acquisition locks give their
    /// records back.
    pub fn handle_timeout(&mut self, image: &dyn TopicImage, now: Timestamp) {
        while let Some((key, deadline)) = self.base.timers.next() {
            if deadline > now {
                break;
            }
            self.base.timers.cancel(&key);
            match key {
                ShareTimer::Session(member) => {
                    if self.base.members.contains_key(&member) {
                        self.fence(&member, "its session timed out", image, now);
                    }
                }
                ShareTimer::Lock(topic, partition) => {
                    let Some(p) = self.partitions.get_mut(&(topic, partition)) else {
                        continue;
                    };
                    let ended = p.handle_timeout(now);
                    if ended.released + ended.archived > 0 {
                        self.base.events.push(ShareEvent::LocksExpired {
                            released: ended.released,
                            archived: ended.archived,
                        });
                    }
                    self.settle((topic, partition));
                }
            }
        }
    }

    /// The settings of a request (the group's configs as they are now): its partitions take
    /// the new limits from now on (locks already granted keep their deadlines).
    fn apply_settings(&mut self, settings: &ShareSettings) {
        if self.settings.partition != settings.partition {
            for p in self.partitions.values_mut() {
                p.set_config(settings.partition);
            }
        }
        self.settings.clone_from(settings);
    }

    /// Records of every partition that became Archiving since the last call (or came back
    /// Archiving from the store), for the shell to write to the group's dead-letter queue and
    /// then report with [`ShareGroup::dead_lettered`].
    pub fn take_dead_letters(&mut self) -> Vec<DeadLetters> {
        self.partitions
            .iter_mut()
            .filter_map(|(&(topic, partition), p)| {
                let letters = p.take_dead_letters();
                (!letters.is_empty()).then_some(DeadLetters {
                    topic,
                    partition,
                    letters,
                })
            })
            .collect()
    }

    /// The dead-letter queue write of `[first, last]` of a partition ended (written, or given
    /// up on): those records are Archived now, durably.
    pub fn dead_lettered(&mut self, topic: TopicId, partition: i32, first: i64, last: i64) {
        let key = (topic, partition);
        if let Some(p) = self.partitions.get_mut(&key) {
            if p.dead_lettered(first, last) {
                self.settle(key);
            }
        }
    }

    /// The share-session part of a ShareFetch (with `fetch`) or a ShareAcknowledge: the
    /// session opened, used or closed, the acknowledgements applied (their records go to the
    /// store before the answer), and what to fetch now.
    ///
    /// # Errors
    /// SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, INVALID_REQUEST (acknowledgements
    /// in a request that opens a session), as Kafka's `SharePartitionManager.newContext`.
    pub fn handle_session(
        &mut self,
        req: SessionRequest,
        settings: &ShareSettings,
        now: Timestamp,
    ) -> Result<SessionAnswer, Refusal> {
        self.apply_settings(settings);
        let member = req.member_id.clone();
        let session = (member.clone(), req.node);
        let mut answer = SessionAnswer::default();
        match req.session_epoch {
            FINAL_SESSION_EPOCH => {
                if !self.sessions.contains_key(&session) {
                    return Err(GroupError::ShareSessionNotFound.into());
                }
            }
            INITIAL_SESSION_EPOCH => {
                if !req.acks.is_empty() {
                    return Err(Refusal::new(
                        GroupError::InvalidRequest,
                        "Acknowledge data present in initial share fetch request.",
                    ));
                }
                if req.fetch.is_some() {
                    self.sessions.insert(
                        session.clone(),
                        (
                            ShareSession {
                                epoch: 1,
                                connection: req.connection,
                            },
                            BTreeSet::new(),
                        ),
                    );
                    answer.full = true;
                } else {
                    // A ShareAcknowledge cannot open a session.
                    return Err(GroupError::InvalidShareSessionEpoch.into());
                }
            }
            epoch => {
                let Some((open, _)) = self.sessions.get_mut(&session) else {
                    return Err(GroupError::ShareSessionNotFound.into());
                };
                if open.epoch != epoch {
                    return Err(GroupError::InvalidShareSessionEpoch.into());
                }
                open.epoch = if epoch == i32::MAX { 1 } else { epoch + 1 };
            }
        }
        for acks in &req.acks {
            let key = (acks.topic, acks.partition);
            let result = match self.partitions.get_mut(&key) {
                Some(p) => p
                    .acknowledge(&member, &acks.batches, now)
                    .map(|()| p.take_archived()),
                None => Err(AckError {
                    error: GroupError::InvalidRecordState,
                    message: "The group has not read this partition.",
                }),
            };
            let result = result.map(|archived| {
                let count =
                    |t: AckType| -> u64 { acks.batches.iter().map(|b| b.count_of(t)).sum() };
                self.base.events.push(ShareEvent::Acknowledged {
                    accepted: count(AckType::Accept),
                    released: count(AckType::Release),
                    rejected: count(AckType::Reject),
                    archived,
                });
                self.settle(key);
            });
            answer.acks.push((acks.topic, acks.partition, result));
        }
        if req.session_epoch == FINAL_SESSION_EPOCH {
            self.close_session(&member, req.node, now);
            return Ok(answer);
        }
        if let (Some(fetch), Some((_, held))) = (&req.fetch, self.sessions.get_mut(&session)) {
            held.extend(fetch.iter().copied());
            for f in &req.forgotten {
                held.remove(f);
            }
            answer.fetch = self.fetch_offsets(&member, req.node);
        }
        Ok(answer)
    }

    /// The partitions of `member`'s share session with broker `node`, each with the offset to
    /// read from next (`None`: the group has not read it yet).
    pub fn fetch_offsets(&self, member: &MemberId, node: i32) -> Vec<(TopicId, i32, Option<i64>)> {
        let Some((_, held)) = self.sessions.get(&(member.clone(), node)) else {
            return Vec::new();
        };
        held.iter()
            .map(|&(t, p)| {
                let offset = self
                    .partitions
                    .get(&(t, p))
                    .map(SharePartition::next_fetch_offset);
                (t, p, offset)
            })
            .collect()
    }

    /// Acquires for `member`, fetching through its session with broker `node`, what it may
    /// take of the records the shell read, at most `max_records` across the partitions in
    /// `mode`'s way.
    pub fn acquire(
        &mut self,
        member: &MemberId,
        node: i32,
        read: Vec<ReadPartition>,
        max_records: u32,
        mode: AcquireMode,
        now: Timestamp,
    ) -> Vec<(TopicId, i32, Vec<Acquired>)> {
        let mut left = max_records.max(1);
        let mut out = Vec::with_capacity(read.len());
        // A member whose session closed (or that never opened one) acquires nothing.
        if !self.sessions.contains_key(&(member.clone(), node)) {
            return out;
        }
        for r in read {
            let key = (r.topic, r.partition);
            let config = self.settings.partition;
            let p = self
                .partitions
                .entry(key)
                .or_insert_with(|| SharePartition::new(r.start, config));
            let got = if left == 0 {
                Vec::new()
            } else {
                p.acquire_in(mode, member, &r.batches, left, now)
            };
            let n: u64 = got.iter().map(|a| (a.last - a.first + 1) as u64).sum();
            let again: u64 = got
                .iter()
                .filter(|a| a.delivery_count > 1)
                .map(|a| (a.last - a.first + 1) as u64)
                .sum();
            if n > 0 {
                self.base.events.push(ShareEvent::Acquired {
                    records: n,
                    redelivered: again,
                });
            }
            left = left.saturating_sub(n.min(u32::MAX as u64) as u32);
            self.settle(key);
            out.push((r.topic, r.partition, got));
        }
        out
    }

    /// A connection that held a member's share session closed (Kafka's
    /// `ShareSessionCache` connection listener): the session goes, and what it acquired.
    pub fn handle_session_lost(
        &mut self,
        member: &MemberId,
        node: i32,
        connection: u64,
        now: Timestamp,
    ) {
        if self
            .sessions
            .get(&(member.clone(), node))
            .is_some_and(|(s, _)| s.connection == connection)
        {
            self.close_session(member, node, now);
        }
    }

    /// `member`'s session with broker `node` closes: what it acquired of that session's
    /// partitions becomes available again, and everything it holds when it has no other
    /// session left.
    fn close_session(&mut self, member: &MemberId, node: i32, now: Timestamp) {
        let Some((_, held)) = self.sessions.remove(&(member.clone(), node)) else {
            return;
        };
        if self.sessions.keys().any(|(m, _)| m == member) {
            self.release(member, Some(&held), now);
        } else {
            self.release(member, None, now);
        }
    }

    /// Every session of `member` closes (it left the group, or was fenced).
    fn close_sessions(&mut self, member: &MemberId, now: Timestamp) {
        self.sessions.retain(|(m, _), _| m != member);
        self.release(member, None, now);
    }

    /// What `member` had acquired (of the partitions `only`, or all) becomes available again
    /// (or archived at the delivery limit).
    fn release(&mut self, member: &MemberId, only: Option<&Held>, now: Timestamp) {
        let keys: Vec<(TopicId, i32)> = match only {
            Some(only) => only.iter().copied().collect(),
            None => self.partitions.keys().copied().collect(),
        };
        let (mut released, mut archived) = (0, 0);
        for key in keys {
            if let Some(p) = self.partitions.get_mut(&key) {
                let r = p.release_member(member, now);
                released += r.released;
                archived += r.archived;
            }
            self.settle(key);
        }
        if released + archived > 0 {
            self.base
                .events
                .push(ShareEvent::Released { released, archived });
        }
    }

    /// After a partition changed: its durable state to the store when it changed, its lock
    /// timer to its earliest lock.
    fn settle(&mut self, key: (TopicId, i32)) {
        let Some(p) = self.partitions.get_mut(&key) else {
            return;
        };
        if p.take_changed() {
            self.base.records.push(ShareRecord::Partition {
                topic: key.0,
                partition: key.1,
                state: p.snapshot(),
            });
        }
        let timer = ShareTimer::Lock(key.0, key.1);
        match p.next_deadline() {
            Some(d) => self.base.timers.set(timer, d),
            None => {
                self.base.timers.cancel(&timer);
            }
        }
    }

    /// AlterShareGroupOffsets (`kafka-share-groups --reset-offsets`): each partition starts
    /// over at its offset with nothing in flight; at a negative one (Kafka's uninitialized
    /// start offset) the group starts it where `share.auto.offset.reset` says, at its next
    /// read. A group just created by the call is stored with them.
    ///
    /// # Errors
    /// NON_EMPTY_GROUP while the group has members (Kafka's "The group is not empty.").
    pub fn alter_offsets(&mut self, offsets: &[(TopicId, i32, i64)]) -> Result<(), GroupError> {
        if !self.base.members.is_empty() {
            return Err(GroupError::NonEmptyGroup);
        }
        self.base
            .records
            .push(ShareRecord::Group(self.group_record()));
        for &(topic, partition, offset) in offsets {
            if offset < 0 {
                self.remove_partition((topic, partition));
                continue;
            }
            let config = self.settings.partition;
            self.partitions
                .entry((topic, partition))
                .or_insert_with(|| SharePartition::new(offset, config))
                .reset_start(offset);
            self.settle((topic, partition));
        }
        Ok(())
    }

    /// DeleteShareGroupOffsets: the states of every partition of `topics` go. For each topic,
    /// whether the group had any (Kafka answers a topic it had none of with
    /// UNKNOWN_TOPIC_OR_PARTITION).
    ///
    /// # Errors
    /// NON_EMPTY_GROUP while the group has members.
    pub fn delete_offsets(&mut self, topics: &[TopicId]) -> Result<Vec<bool>, GroupError> {
        if !self.base.members.is_empty() {
            return Err(GroupError::NonEmptyGroup);
        }
        Ok(topics
            .iter()
            .map(|topic| {
                let keys: Vec<_> = self
                    .partitions
                    .keys()
                    .filter(|(t, _)| t == topic)
                    .copied()
                    .collect();
                for key in &keys {
                    self.remove_partition(*key);
                }
                !keys.is_empty()
            })
            .collect())
    }

    /// The topic was deleted: its share partitions' states go (durably), whatever the group's
    /// state; a session naming them reads nothing more of them.
    pub fn topic_deleted(&mut self, topic: TopicId) {
        let keys: Vec<_> = self
            .partitions
            .keys()
            .filter(|(t, _)| *t == topic)
            .copied()
            .collect();
        for key in keys {
            self.remove_partition(key);
        }
    }

    fn remove_partition(&mut self, key: (TopicId, i32)) {
        if self.partitions.remove(&key).is_some() {
            self.base.timers.cancel(&ShareTimer::Lock(key.0, key.1));
            self.base.records.push(ShareRecord::RemovePartition {
                topic: key.0,
                partition: key.1,
            });
        }
    }

    /// DeleteGroups: only an Empty group goes; its records go with it.
    pub fn delete(&mut self) -> Result<(), GroupError> {
        if !self.base.members.is_empty() {
            return Err(GroupError::NonEmptyGroup);
        }
        self.base.dead = true;
        Ok(())
    }

    /// The write of the records last taken failed: the group stays as it is in memory (the
    /// members were answered with the error and will retry), and the next write stores it
    /// whole: its stored records cleared, then every record, so a member that left or a
    /// partition removed in the failed write does not come back after a restart.
    pub fn handle_write_failed(&mut self) {
        let mut records = vec![ShareRecord::Clear];
        records.extend(self.snapshot());
        self.base.records = records;
    }

    fn fence(
        &mut self,
        member: &MemberId,
        why: &'static str,
        image: &dyn TopicImage,
        now: Timestamp,
    ) {
        if self.base.remove_member(member).is_none() {
            return;
        }
        self.base
            .timers
            .cancel(&ShareTimer::Session(member.clone()));
        self.target.remove(member);
        self.base
            .records
            .push(ShareRecord::RemoveMember(member.clone()));
        if why == "left the group" {
            self.base.events.push(ShareEvent::Left(member.clone()));
        } else {
            self.base.events.push(ShareEvent::Fenced {
                member: member.clone(),
                why,
            });
        }
        self.close_sessions(member, now);
        self.metadata_hash = self.metadata_hash(image);
        self.bump_epoch("a member left");
    }

    fn bump_epoch(&mut self, why: &'static str) {
        self.base.group_epoch += 1;
        self.base.events.push(ShareEvent::EpochBumped {
            epoch: self.base.group_epoch,
            why,
        });
        self.base
            .records
            .push(ShareRecord::Group(self.group_record()));
    }

    /// The topics members subscribe to that exist, with their ids and partition counts.
    fn subscribed(&self, image: &dyn TopicImage) -> BTreeMap<String, (TopicId, u32)> {
        let mut out = BTreeMap::new();
        for m in self.base.members.values() {
            for name in &m.subscribed_topic_names {
                if out.contains_key(name) {
                    continue;
                }
                if let Some(t) = image.topic(name) {
                    out.insert(name.clone(), t);
                }
            }
        }
        out
    }

    fn metadata_hash(&self, image: &dyn TopicImage) -> u64 {
        let mut h = DefaultHasher::new();
        self.subscribed(image).hash(&mut h);
        h.finish()
    }

    fn compute_target(&mut self, image: &dyn TopicImage) {
        let topics = self.subscribed(image);
        let counts: BTreeMap<TopicId, u32> = topics.values().copied().collect();
        let empty = Partitions::new();
        let members: Vec<Subscriber<'_>> = self
            .base
            .members
            .values()
            .map(|m| Subscriber {
                id: &m.member_id,
                topics: m
                    .subscribed_topic_names
                    .iter()
                    .filter_map(|n| topics.get(n).map(|(id, _)| *id))
                    .collect(),
                current: self.target.get(&m.member_id).unwrap_or(&empty),
            })
            .collect();
        self.target = assign(&members, &counts);
        self.base.assignment_epoch = self.base.group_epoch;
        self.base
            .records
            .push(ShareRecord::Group(self.group_record()));
    }

    /// The member takes its target (only partitions of topics it still subscribes to); true
    /// when its assignment changed.
    fn reconcile(&mut self, id: &MemberId, image: &dyn TopicImage) -> bool {
        let epoch = self.base.assignment_epoch;
        let Some(m) = self.base.members.get(id) else {
            return false;
        };
        let subscribed: BTreeSet<TopicId> = m
            .subscribed_topic_names
            .iter()
            .filter_map(|n| image.topic(n).map(|(t, _)| t))
            .collect();
        let target: Partitions = self
            .target
            .get(id)
            .map(|t| {
                t.iter()
                    .filter(|(topic, _)| subscribed.contains(topic))
                    .map(|(t, p)| (*t, p.clone()))
                    .collect()
            })
            .unwrap_or_default();
        if m.member_epoch == epoch && m.assigned == target {
            return false;
        }
        let changed = m.assigned != target;
        let mut updated = m.clone();
        if updated.member_epoch != epoch {
            updated.previous_member_epoch = updated.member_epoch;
            updated.member_epoch = epoch;
        }
        updated.assigned = target;
        self.base.insert_member(updated.clone());
        self.base.records.push(ShareRecord::Member(updated));
        changed
    }

    /// Whether a member reads `topic` (offset deletion refuses a topic in use).
    pub fn reads_topic(&self, topic: &str) -> bool {
        self.base
            .members
            .values()
            .any(|m| m.subscribed_topic_names.iter().any(|n| n == topic))
    }
}

/// Kafka's `throwIfShareGroupMemberEpochIsInvalid`.
fn check_epoch(m: &ShareMember, epoch: i32) -> Result<(), Refusal> {
    if epoch == 0 {
        return Ok(());
    }
    if epoch > m.member_epoch {
        return Err(Refusal::new(
            GroupError::FencedMemberEpoch,
            format!(
                "The share group member has a greater member epoch ({epoch}) than the one known \
                 by the group coordinator ({}). The member must abandon all its partitions and \
                 rejoin.",
                m.member_epoch
            ),
        ));
    }
    if epoch < m.member_epoch && epoch != m.previous_member_epoch {
        return Err(Refusal::new(
            GroupError::FencedMemberEpoch,
            format!(
                "The share group member has a smaller member epoch ({epoch}) than the one known \
                 by the group coordinator ({}), and it does not match the previous member epoch \
                 ({}). The member must abandon all its partitions and rejoin.",
                m.member_epoch, m.previous_member_epoch
            ),
        ));
    }
    Ok(())
}

/// Kafka's `throwIfShareGroupHeartbeatRequestIsInvalid`: what needs no group.
///
/// # Errors
/// INVALID_REQUEST with Kafka's message.
pub fn validate(group_id: &str, hb: &ShareHeartbeat) -> Result<(), Refusal> {
    if hb.member_id.as_str().is_empty() {
        return Err(Refusal::invalid("MemberId can't be empty."));
    }
    if group_id.is_empty() {
        return Err(Refusal::invalid("GroupId can't be empty."));
    }
    if hb.rack_id.as_deref() == Some("") {
        return Err(Refusal::invalid("RackId can't be empty."));
    }
    if hb.member_epoch == 0 {
        if hb.subscribed_topic_names.as_ref().is_none_or(Vec::is_empty) {
            return Err(Refusal::invalid(
                "SubscribedTopicNames must be set in first request.",
            ));
        }
    } else if hb.member_epoch < LEAVE_EPOCH {
        return Err(Refusal::invalid("MemberEpoch is invalid."));
    }
    Ok(())
}
