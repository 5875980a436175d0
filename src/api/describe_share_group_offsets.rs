//! DescribeShareGroupOffsets (key 90), v0-1: each share partition's start offset (the first
//! record not yet acknowledged or archived) and, from v1, its lag (records at or past the
//! start, up to the high watermark, not yet acknowledged or archived), as
//! `kafka-share-groups --describe --offsets` and `Admin.listShareGroupOffsets` show them.
//! Topics null: every partition the group has read; named partitions the group has not read
//! answer start offset -1 (lag -1).
//!
//! DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED for the group) and on each topic
//! (TOPIC_AUTHORIZATION_FAILED for its partitions); a group that does not exist, or is not a
//! share group, is GROUP_ID_NOT_FOUND.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, TopicName,
};
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use super::str_bytes;
use crate::broker::Broker;
use crate::coordinator::KindRefusal;
use crate::group::share::partition::{PartitionState, RecordState};
use crate::group::share::ShareGroup;
use crate::group::{GroupError, GroupId};
use crate::metadata::{Topic, LEADER_EPOCH};
use crate::security::acl::{Operation, ResourceType};
use crate::vocab::TopicId;

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeShareGroupOffsetsRequest,
    _version: i16,
) -> DescribeShareGroupOffsetsResponse {
    let mut groups = Vec::with_capacity(req.groups.len());
    for g in req.groups {
        let base =
            DescribeShareGroupOffsetsResponseGroup::default().with_group_id(g.group_id.clone());
        if !ctx.may(
            broker,
            Operation::Describe,
            ResourceType::Group,
            &g.group_id,
        ) {
            groups.push(base.with_error_code(GroupError::GroupAuthorizationFailed.code()));
            continue;
        }
        let id = g.group_id.to_string();
        let states = match states(broker, &id).await {
            Ok(s) => s,
            Err(message) => {
                groups.push(
                    base.with_error_code(GroupError::GroupIdNotFound.code())
                        .with_error_message(Some(str_bytes(message))),
                );
                continue;
            }
        };
        // The partitions asked for, by topic name: every one the group has read when null.
        let asked: Vec<(String, Vec<i32>)> = match &g.topics {
            Some(topics) => topics
                .iter()
                .map(|t| (t.topic_name.to_string(), t.partitions.clone()))
                .collect(),
            None => {
                let mut by_name: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for (topic, partition) in states.keys() {
                    if let Some(t) = broker.topics.get_by_id(*topic) {
                        by_name.entry(t.name).or_default().push(*partition);
                    }
                }
                by_name.into_iter().collect()
            }
        };
        let resolved: Vec<_> = asked
            .into_iter()
            .map(|(name, partitions)| {
                let topic = super::resolve_topic_for(
                    broker,
                    ctx,
                    Operation::Describe,
                    false,
                    TopicId::nil(),
                    &name,
                );
                (name, partitions, topic)
            })
            .collect();
        // Each read partition's log end (upstream's in gateway mode), for its lag.
        let read: Vec<(Topic, i32)> = resolved
            .iter()
            .filter_map(|(_, partitions, topic)| topic.as_ref().ok().map(|t| (t, partitions)))
            .flat_map(|(t, partitions)| {
                partitions
                    .iter()
                    .filter(|p| states.contains_key(&(t.id, **p)))
                    .map(|p| (t.clone(), *p))
            })
            .collect();
        let ends: HashMap<(TopicId, i32), i64> = read
            .iter()
            .map(|(t, p)| (t.id, *p))
            .zip(broker.backend.log_ends(&broker.logs, read.clone()).await)
            .filter_map(|(key, end)| Some((key, end?)))
            .collect();
        let topics = resolved
            .into_iter()
            .map(|(name, partitions, topic)| {
                let entry = DescribeShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(TopicName(str_bytes(name)));
                let partition = |index: i32| {
                    DescribeShareGroupOffsetsResponsePartition::default()
                        .with_partition_index(index)
                        .with_leader_epoch(LEADER_EPOCH)
                };
                match topic {
                    Ok(t) => entry.with_topic_id(t.id).with_partitions(
                        partitions
                            .into_iter()
                            .map(|p| {
                                let Some(state) = states.get(&(t.id, p)) else {
                                    return partition(p).with_start_offset(-1);
                                };
                                let end =
                                    ends.get(&(t.id, p)).copied().unwrap_or(state.start_offset);
                                partition(p)
                                    .with_start_offset(state.start_offset)
                                    .with_lag(lag(state, end))
                            })
                            .collect(),
                    ),
                    Err(e) => entry.with_partitions(
                        partitions
                            .into_iter()
                            .map(|p| {
                                partition(p)
                                    .with_start_offset(-1)
                                    .with_leader_epoch(-1)
                                    .with_error_code(error_of(e))
                            })
                            .collect(),
                    ),
                }
            })
            .collect();
        groups.push(base.with_topics(topics));
    }
    DescribeShareGroupOffsetsResponse::default().with_groups(groups)
}

fn error_of(e: ResponseError) -> i16 {
    e.code()
}

/// Records from the start offset to `end` that are neither acknowledged nor archived.
fn lag(state: &PartitionState, end: i64) -> i64 {
    let done: i64 = state
        .batches
        .iter()
        .filter(|b| matches!(b.state, RecordState::Acknowledged | RecordState::Archived))
        .map(|b| b.last.min(end - 1) - b.first + 1)
        .filter(|n| *n > 0)
        .sum();
    (end - state.start_offset - done).max(0)
}

/// The group's share partitions' stored state: GROUP_ID_NOT_FOUND's message when there is
/// no such share group.
async fn states(
    broker: &Broker,
    id: &str,
) -> Result<BTreeMap<(TopicId, i32), PartitionState>, String> {
    let read = broker
        .coordinator
        .with_kind(GroupId::new(id), false, |g: &mut ShareGroup, _, _| {
            g.partitions()
                .map(|(key, p)| (*key, p.snapshot()))
                .collect::<BTreeMap<_, _>>()
        });
    match read.await {
        Ok(states) => Ok(states),
        Err(KindRefusal::OtherKind) => Err(format!("Group {id} is not a share group.")),
        Err(_) => Err(format!("Group {id} not found.")),
    }
}
