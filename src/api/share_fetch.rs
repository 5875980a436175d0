//! ShareFetch (key 78), v1-2: records of a share group's partitions, each acquired by the
//! fetching member until its lock runs out (KIP-932), with the acknowledgements of records it
//! was given before.
//!
//! - v2 (KIP-1206, KIP-1222): the acquire mode (`record_limit`: never more than `max_records`
//!   records, a batch split where the limit falls) and RENEW acknowledgements (type 4: the
//!   lock starts again, the record stays the member's), which a request carries only with
//!   `is_renew_ack`, and such a request fetches nothing (its byte, record and wait limits must
//!   be 0, else INVALID_REQUEST; an unknown acquire mode too). Below v2 a type above 3 is
//!   INVALID_REQUEST for its partition.
//! - The share session (epoch 0 opens one with the partitions named, then one up per request,
//!   -1 closes it and gives back what the member had acquired) lives with the group
//!   ([`crate::group::share::ShareGroup::handle_session`]): SHARE_SESSION_NOT_FOUND,
//!   INVALID_SHARE_SESSION_EPOCH and INVALID_REQUEST (acknowledgements in a request that opens
//!   a session) at the top level, as Kafka's `SharePartitionManager.newContext`.
//! - Acknowledgements are applied first and stored before the answer; each partition's outcome
//!   is its `acknowledge_error_code`.
//! - Then, for every partition of the session, the log is read from the group's next offset
//!   (`share.auto.offset.reset` for a partition the group has not read: the log start or end),
//!   whole batches up to the request's byte limits, and the member acquires what is available
//!   of them, up to `max_records` (whole batches in Kafka's default batch-optimized mode). Control
//!   batches and, under `share.isolation.level=read_committed`, aborted transactions' batches
//!   are archived, never delivered.
//! - Long poll: when nothing was acquired the answer waits, up to `max_wait_ms`, for an append
//!   to one of the partitions (upstream's in gateway mode), or for records of the group made
//!   available again (another member's release, an expired lock, a member gone), and tries
//!   again.
//! - A new session's answer lists every partition; a later one only partitions with records,
//!   an error or an acknowledgement outcome (Kafka's `ShareSessionContext`).
//! - READ on the group (top-level GROUP_AUTHORIZATION_FAILED) and on each topic (the
//!   partition's TOPIC_AUTHORIZATION_FAILED); unknown topic ids are UNKNOWN_TOPIC_ID.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{ShareFetchRequest, ShareFetchResponse};
use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::context::RequestContext;
use super::share_group_heartbeat::settings;
use super::str_bytes;
use crate::backend::{ShareRead, ShareReadSpec};
use crate::broker::Broker;
use crate::coordinator::KindRefusal;
use crate::group::modern::Refusal;
use crate::group::share::partition::{AckBatch, AckType, AcquireMode, Acquired, ReadBatch};
use crate::group::share::{
    PartitionAcks, ReadPartition, SessionAnswer, SessionRequest, ShareGroup, ShareSettings,
};
use crate::group::{GroupError, GroupId, MemberId};
use crate::log::batch::BatchHeader;
use crate::metadata::LEADER_EPOCH;
use crate::security::acl::{Operation, ResourceType};
use crate::vocab::TopicId;

/// A partition's outcome so far.
#[derive(Default)]
struct Outcome {
    error: Option<ResponseError>,
    /// It carried acknowledgements: its outcome is answered, success too.
    acknowledged: bool,
    ack_error: Option<GroupError>,
    records: Vec<Bytes>,
    acquired: Vec<Acquired>,
}

/// A request's acknowledgements, by partition; an invalid type makes the partition's
/// acknowledgement INVALID_REQUEST: one unknown at the request's `version` (RENEW from v2),
/// or a RENEW in a request without `is_renew_ack`.
pub(super) fn acks_of<'a>(
    version: i16,
    renew: bool,
    batches: impl Iterator<Item = (TopicId, i32, Vec<(i64, i64, &'a [i8])>)>,
) -> (Vec<PartitionAcks>, Vec<(TopicId, i32)>) {
    let known = |t: AckType| match t {
        AckType::Renew => version >= 2 && renew,
        _ => true,
    };
    let mut acks = Vec::new();
    let mut invalid = Vec::new();
    for (topic, partition, list) in batches {
        if list.is_empty() {
            continue;
        }
        let parsed: Option<Vec<AckBatch>> = list
            .into_iter()
            .map(|(first, last, types)| {
                let types = types
                    .iter()
                    .map(|t| {
                        u8::try_from(*t)
                            .ok()
                            .and_then(AckType::from_code)
                            .filter(|t| known(*t))
                    })
                    .collect::<Option<Vec<_>>>()?;
                Some(AckBatch { first, last, types })
            })
            .collect();
        match parsed {
            Some(batches) => acks.push(PartitionAcks {
                topic,
                partition,
                batches,
            }),
            None => invalid.push((topic, partition)),
        }
    }
    (acks, invalid)
}

/// Runs the share-session part of a request on the group's shard.
pub(super) async fn session(
    broker: &Broker,
    group: &str,
    req: SessionRequest,
    settings: ShareSettings,
) -> Result<SessionAnswer, Refusal> {
    let answer = broker.coordinator.with_kind(
        GroupId::new(group),
        true,
        move |g: &mut ShareGroup, _, now| g.handle_session(req, &settings, now),
    );
    match answer.await {
        Ok(answer) => answer,
        Err(KindRefusal::Missing | KindRefusal::OtherKind) => Err(Refusal::new(
            GroupError::InvalidRequest,
            format!("Group {group} is not a share group."),
        )),
        Err(KindRefusal::Error(e)) => Err(e.into()),
    }
}

/// What ShareFetch and ShareAcknowledge check before anything else, in Kafka's order: a
/// group id (INVALID_GROUP_ID), READ on the group (GROUP_AUTHORIZATION_FAILED), a member id
/// (INVALID_REQUEST "Member id is empty."). The group and member, or the top-level refusal.
pub(super) fn caller(
    broker: &Broker,
    ctx: &RequestContext,
    group: Option<&kafka_protocol::messages::GroupId>,
    member: Option<&kafka_protocol::protocol::StrBytes>,
) -> Result<(String, MemberId), Refusal> {
    let group = group.map(|g| g.to_string()).unwrap_or_default();
    if group.is_empty() {
        return Err(GroupError::InvalidGroupId.into());
    }
    if !ctx.may(broker, Operation::Read, ResourceType::Group, &group) {
        return Err(GroupError::GroupAuthorizationFailed.into());
    }
    match member.map(|m| m.to_string()) {
        Some(m) if !m.is_empty() => Ok((group, MemberId::new(m))),
        _ => Err(Refusal::new(
            GroupError::InvalidRequest,
            "Member id is empty.".to_string(),
        )),
    }
}

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ShareFetchRequest,
    version: i16,
) -> ShareFetchResponse {
    let top = |error: GroupError, message: Option<String>| {
        ShareFetchResponse::default()
            .with_error_code(error.code())
            .with_error_message(message.map(str_bytes))
    };
    let (group, member) = match caller(broker, ctx, req.group_id.as_ref(), req.member_id.as_ref()) {
        Ok(c) => c,
        Err(Refusal { error, message }) => return top(error, message),
    };
    let renew = version >= 2 && req.is_renew_ack;
    // Kafka logs which limit was not 0; its answer carries no message.
    if renew
        && [
            req.max_bytes,
            req.min_bytes,
            req.max_records,
            req.max_wait_ms,
        ] != [0; 4]
    {
        return top(GroupError::InvalidRequest, None);
    }
    let mode = if version >= 2 {
        match AcquireMode::from_code(req.share_acquire_mode) {
            Some(mode) => mode,
            None => return top(GroupError::InvalidRequest, None),
        }
    } else {
        AcquireMode::BatchOptimized
    };
    let settings = settings(broker, &group);

    // Each partition named, resolved: what cannot be read answers with its error.
    let mut outcomes: BTreeMap<(TopicId, i32), Outcome> = BTreeMap::new();
    let mut named = Vec::new();
    for t in &req.topics {
        let topic = super::resolve_topic_for(broker, ctx, Operation::Read, true, t.topic_id, "");
        for p in &t.partitions {
            let key = (t.topic_id, p.partition_index);
            match &topic {
                Ok(topic) if p.partition_index >= 0 && p.partition_index < topic.partitions => {
                    named.push(key);
                }
                Ok(_) => {
                    outcomes.entry(key).or_default().error =
                        Some(ResponseError::UnknownTopicOrPartition);
                }
                Err(e) => outcomes.entry(key).or_default().error = Some(*e),
            }
        }
    }
    let (acks, invalid) = acks_of(
        version,
        renew,
        req.topics.iter().flat_map(|t| {
            t.partitions.iter().map(|p| {
                let batches = p
                    .acknowledgement_batches
                    .iter()
                    .map(|b| {
                        (
                            b.first_offset,
                            b.last_offset,
                            b.acknowledge_types.as_slice(),
                        )
                    })
                    .collect();
                (t.topic_id, p.partition_index, batches)
            })
        }),
    );
    for key in invalid {
        let o = outcomes.entry(key).or_default();
        o.acknowledged = true;
        o.ack_error = Some(GroupError::InvalidRequest);
    }
    let forgotten = req
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, *p)))
        .collect();
    let request = SessionRequest {
        member_id: member.clone(),
        node: ctx.node(broker),
        connection: ctx.share_sessions.connection,
        session_epoch: req.share_session_epoch,
        fetch: Some(named),
        forgotten,
        acks,
    };
    let answer = match session(broker, &group, request, settings.clone()).await {
        Ok(a) => a,
        Err(Refusal { error, message }) => return top(error, message),
    };
    if req.share_session_epoch == 0 {
        ctx.share_sessions.opened(&group, &member);
    }
    for (topic, partition, result) in &answer.acks {
        let o = outcomes.entry((*topic, *partition)).or_default();
        o.acknowledged = true;
        o.ack_error = result.err().map(|e| e.error);
    }
    // A closing request, and one that only renews locks, fetch nothing.
    let acquired = if req.share_session_epoch == -1 || renew {
        Vec::new()
    } else {
        let node = ctx.node(broker);
        fetch(
            broker,
            &group,
            &member,
            node,
            &req,
            mode,
            &settings,
            answer.fetch,
        )
        .await
    };
    for (key, read) in acquired {
        let o = outcomes.entry(key).or_default();
        match read {
            Ok((records, acquired)) => {
                o.records = records;
                o.acquired = acquired;
            }
            Err(e) => o.error = Some(e),
        }
    }
    respond(ctx.node(broker), outcomes, answer.full, &settings)
}

/// A connection closed: the share sessions it opened close, and what their members had
/// acquired becomes available again (Kafka's `ShareSessionCache` connection listener).
pub fn connection_closed(broker: &std::sync::Arc<Broker>, ctx: &RequestContext) {
    let opened = ctx.share_sessions.take();
    if opened.is_empty() {
        return;
    }
    let connection = ctx.share_sessions.connection;
    let node = ctx.node(broker);
    let broker = broker.clone();
    tokio::spawn(async move {
        for (group, member) in opened {
            let _ = broker
                .coordinator
                .with_kind(
                    GroupId::new(group),
                    false,
                    move |g: &mut ShareGroup, _, now| {
                        g.handle_session_lost(&member, node, connection, now)
                    },
                )
                .await;
        }
    });
}

type Acquisition = Result<(Vec<Bytes>, Vec<Acquired>), ResponseError>;

/// Reads (where the backend keeps the logs) and acquires, waiting for appends while nothing
/// was acquired.
#[allow(clippy::too_many_arguments)]
async fn fetch(
    broker: &Broker,
    group: &str,
    member: &MemberId,
    node: i32,
    req: &ShareFetchRequest,
    mode: AcquireMode,
    settings: &ShareSettings,
    mut plan: Vec<(TopicId, i32, Option<i64>)>,
) -> Vec<((TopicId, i32), Acquisition)> {
    let wait = Duration::from_millis(u64::try_from(req.max_wait_ms).unwrap_or(0));
    let start = Instant::now();
    let deadline = start.checked_add(wait).unwrap_or(start);
    let max_records = u32::try_from(req.max_records).unwrap_or(0).max(1);
    let spec = ShareReadSpec {
        max_bytes: usize::try_from(req.max_bytes).unwrap_or(0).max(1),
        reset: settings.auto_offset_reset,
        read_committed: settings.read_committed,
        max_decompressed: broker.config.socket_request_max_bytes,
    };
    let available = broker.coordinator.share_available(&GroupId::new(group));
    loop {
        // Interest in records made available again (another member's release, an expired
        // lock), registered before the read: one made available meanwhile still wakes the wait.
        let mut made_available = available.as_ref().map(|n| {
            let mut notified = Box::pin(n.notified());
            notified.as_mut().enable();
            notified
        });
        let mut out = Vec::new();
        let mut asks = Vec::new();
        for (topic, partition, offset) in &plan {
            match broker.topics.get_by_id(*topic) {
                Some(t) => asks.push(ShareRead {
                    topic: t,
                    partition: *partition,
                    offset: *offset,
                }),
                None => out.push((
                    (*topic, *partition),
                    Err(ResponseError::UnknownTopicOrPartition),
                )),
            }
        }
        let results = broker
            .backend
            .read_shared(&broker.logs, asks.clone(), spec)
            .await;
        let mut reads = Vec::new();
        let mut ends = Vec::new();
        for (ask, result) in asks.into_iter().zip(results) {
            let key = (ask.topic.id, ask.partition);
            let read = match result {
                Ok(Some(read)) => read,
                Ok(None) => {
                    out.push((key, Ok((Vec::new(), Vec::new()))));
                    continue;
                }
                Err(e) => {
                    out.push((key, Err(e)));
                    continue;
                }
            };
            ends.push((ask.topic.clone(), ask.partition, read.end));
            let batches = batches_of(&read.batches, &read.aborted, settings.read_committed);
            reads.push((
                ReadPartition {
                    topic: key.0,
                    partition: key.1,
                    start: read.start,
                    batches: batches.iter().map(|(b, _)| *b).collect(),
                },
                read.batches,
            ));
        }
        let (partitions, bytes): (Vec<ReadPartition>, Vec<Vec<Bytes>>) = reads.into_iter().unzip();
        // A partition the group has not read yet starts where `share.auto.offset.reset` put it
        // now, so the group is told even when nothing was read.
        let any_read = partitions.iter().any(|r| !r.batches.is_empty())
            || plan.iter().any(|(_, _, offset)| offset.is_none());
        let acquired = if any_read {
            acquire(
                broker,
                group,
                member,
                node,
                partitions.clone(),
                max_records,
                mode,
            )
            .await
        } else {
            partitions
                .iter()
                .map(|r| (r.topic, r.partition, Vec::new()))
                .collect()
        };
        let mut any = false;
        for ((topic, partition, got), batches) in acquired.into_iter().zip(bytes) {
            let records = overlapping(&batches, &got);
            any |= !got.is_empty();
            out.push(((topic, partition), Ok((records, got))));
        }
        if any || Instant::now() >= deadline || ends.is_empty() {
            return out;
        }
        let appended =
            broker
                .backend
                .await_shared(&broker.logs, ends, settings.read_committed, deadline);
        match made_available.as_mut() {
            Some(notified) => {
                tokio::select! {
                    () = appended => {}
                    () = notified.as_mut() => {}
                }
            }
            None => appended.await,
        }
        if Instant::now() >= deadline {
            return out;
        }
        plan = offsets(broker, group, member, node).await;
    }
}

async fn acquire(
    broker: &Broker,
    group: &str,
    member: &MemberId,
    node: i32,
    read: Vec<ReadPartition>,
    max_records: u32,
    mode: AcquireMode,
) -> Vec<(TopicId, i32, Vec<Acquired>)> {
    let fallback: Vec<_> = read
        .iter()
        .map(|r| (r.topic, r.partition, Vec::new()))
        .collect();
    let member = member.clone();
    let answer = broker.coordinator.with_kind(
        GroupId::new(group),
        false,
        move |g: &mut ShareGroup, _, now| g.acquire(&member, node, read, max_records, mode, now),
    );
    answer.await.unwrap_or(fallback)
}

async fn offsets(
    broker: &Broker,
    group: &str,
    member: &MemberId,
    node: i32,
) -> Vec<(TopicId, i32, Option<i64>)> {
    let member = member.clone();
    broker
        .coordinator
        .with_kind(
            GroupId::new(group),
            false,
            move |g: &mut ShareGroup, _, _| g.fetch_offsets(&member, node),
        )
        .await
        .unwrap_or_default()
}

/// The read batches' offsets, each marked when it is never to be delivered: a control
/// batch, or (read_committed) a batch of a transaction the read's aborted list names, from
/// its first offset until its producer's marker.
fn batches_of(
    batches: &[Bytes],
    aborted: &[(i64, i64)],
    read_committed: bool,
) -> Vec<(ReadBatch, bool)> {
    let mut open: HashSet<i64> = HashSet::new();
    let mut pending: Vec<(i64, i64)> = aborted.to_vec();
    pending.sort_by_key(|a| a.1);
    let mut next = 0;
    batches
        .iter()
        .filter_map(|b| BatchHeader::parse(b))
        .map(|h| {
            let first = h.base_offset;
            let last = first + i64::from(h.last_offset_delta);
            while read_committed && next < pending.len() && pending[next].1 <= last {
                open.insert(pending[next].0);
                next += 1;
            }
            let aborted = read_committed
                && h.is_transactional()
                && !h.is_control()
                && open.contains(&h.producer_id);
            if h.is_control() {
                open.remove(&h.producer_id);
            }
            let skip = h.is_control() || aborted;
            (ReadBatch { first, last, skip }, skip)
        })
        .collect()
}

/// The batches holding any acquired offset.
fn overlapping(batches: &[Bytes], acquired: &[Acquired]) -> Vec<Bytes> {
    if acquired.is_empty() {
        return Vec::new();
    }
    batches
        .iter()
        .filter(|b| {
            BatchHeader::parse(b).is_some_and(|h| {
                let (first, last) = (
                    h.base_offset,
                    h.base_offset + i64::from(h.last_offset_delta),
                );
                acquired.iter().any(|a| a.first <= last && a.last >= first)
            })
        })
        .cloned()
        .collect()
}

fn concat(batches: Vec<Bytes>) -> Bytes {
    match <[Bytes; 1]>::try_from(batches) {
        Ok([one]) => one,
        Err(many) => {
            let mut out = BytesMut::with_capacity(many.iter().map(Bytes::len).sum());
            for b in many {
                out.extend_from_slice(&b);
            }
            out.freeze()
        }
    }
}

fn respond(
    leader: i32,
    outcomes: BTreeMap<(TopicId, i32), Outcome>,
    full: bool,
    settings: &ShareSettings,
) -> ShareFetchResponse {
    let leader = LeaderIdAndEpoch::default()
        .with_leader_id(leader)
        .with_leader_epoch(LEADER_EPOCH);
    let mut topics: BTreeMap<TopicId, Vec<PartitionData>> = BTreeMap::new();
    for ((topic, partition), o) in outcomes {
        let something = o.error.is_some() || o.acknowledged || !o.acquired.is_empty();
        if !full && !something {
            continue;
        }
        let data = PartitionData::default()
            .with_partition_index(partition)
            .with_error_code(o.error.map_or(0, |e| e.code()))
            .with_acknowledge_error_code(o.ack_error.map_or(0, GroupError::code))
            .with_current_leader(leader.clone())
            .with_records(Some(concat(o.records)))
            .with_acquired_records(
                o.acquired
                    .iter()
                    .map(|a| {
                        AcquiredRecords::default()
                            .with_first_offset(a.first)
                            .with_last_offset(a.last)
                            .with_delivery_count(
                                i16::try_from(a.delivery_count).unwrap_or(i16::MAX),
                            )
                    })
                    .collect(),
            );
        topics.entry(topic).or_default().push(data);
    }
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(
            i32::try_from(settings.partition.lock_duration_ms).unwrap_or(i32::MAX),
        )
        .with_responses(
            topics
                .into_iter()
                .map(|(topic_id, partitions)| {
                    ShareFetchableTopicResponse::default()
                        .with_topic_id(topic_id)
                        .with_partitions(partitions)
                })
                .collect(),
        )
}
