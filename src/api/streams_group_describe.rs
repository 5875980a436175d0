//! StreamsGroupDescribe (key 89), v0-1: streams groups (KIP-1071) as Kafka 4.4 describes them:
//! epochs, the topology with its internal topics' configured partition counts, and every member
//! with its tasks (active, standby, warm-up), its target and the task offsets it reported, from
//! which kafka-streams-groups shows lags.

use std::collections::BTreeMap;

use kafka_protocol::messages::streams_group_describe_response::{
    Assignment, DescribedGroup, Endpoint, KeyValue, Member, Subtopology, TaskIds, TaskOffset,
    TopicInfo, Topology,
};
use kafka_protocol::messages::{
    StreamsGroupDescribeRequest, StreamsGroupDescribeResponse, TopicName,
};

use super::context::RequestContext;
use super::str_bytes;
use crate::broker::Broker;
use crate::coordinator::KindRefusal;
use crate::group::consumer::Refusal;
use crate::group::streams::sticky::TaskId;
use crate::group::streams::{topology, StreamsGroup, StreamsGroupState, StreamsMember, TaskSet};
use crate::group::{GroupError, GroupId};
use crate::security::acl::{Operation, ResourceType};

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: StreamsGroupDescribeRequest,
    version: i16,
) -> StreamsGroupDescribeResponse {
    let mut groups = Vec::with_capacity(req.group_ids.len());
    for id in req.group_ids {
        let base = DescribedGroup::default()
            .with_group_id(id.clone())
            .with_authorized_operations(i32::MIN);
        if !ctx.may(broker, Operation::Describe, ResourceType::Group, &id) {
            groups.push(
                base.with_error_code(crate::group::GroupError::GroupAuthorizationFailed.code()),
            );
            continue;
        }
        let described = match describe(broker, id.as_str()).await {
            Ok(g) => {
                let partitions = |t: &topology::TopicInfo| {
                    g.internal_partitions
                        .get(&t.name)
                        .copied()
                        .unwrap_or(t.partitions)
                };
                let described = base
                    .with_group_state(str_bytes(g.state.as_str()))
                    .with_group_epoch(g.group_epoch)
                    .with_assignment_epoch(g.assignment_epoch)
                    .with_authorized_operations(if req.include_authorized_operations {
                        ctx.operations(broker, ResourceType::Group, &id)
                    } else {
                        i32::MIN
                    })
                    .with_topology(g.topology.as_ref().map(|t| {
                        Topology::default()
                            .with_epoch(t.epoch)
                            .with_subtopologies(Some(
                                t.subtopologies
                                    .iter()
                                    .map(|s| {
                                        let info = |t: &topology::TopicInfo| {
                                            TopicInfo::default()
                                                .with_name(TopicName(str_bytes(t.name.clone())))
                                                .with_partitions(partitions(t))
                                                .with_replication_factor(t.replication_factor)
                                                .with_topic_configs(
                                                    t.configs
                                                        .iter()
                                                        .map(|(k, v)| {
                                                            KeyValue::default()
                                                                .with_key(str_bytes(k.clone()))
                                                                .with_value(str_bytes(v.clone()))
                                                        })
                                                        .collect(),
                                                )
                                        };
                                        Subtopology::default()
                                            .with_subtopology_id(str_bytes(s.id.clone()))
                                            .with_source_topics(
                                                s.source_topics
                                                    .iter()
                                                    .map(|n| TopicName(str_bytes(n.clone())))
                                                    .collect(),
                                            )
                                            .with_repartition_sink_topics(
                                                s.repartition_sink_topics
                                                    .iter()
                                                    .map(|n| TopicName(str_bytes(n.clone())))
                                                    .collect(),
                                            )
                                            .with_state_changelog_topics(
                                                s.changelog_topics.iter().map(info).collect(),
                                            )
                                            .with_repartition_source_topics(
                                                s.repartition_source_topics
                                                    .iter()
                                                    .map(info)
                                                    .collect(),
                                            )
                                    })
                                    .collect(),
                            ))
                    }))
                    .with_members(
                        g.members
                            .into_iter()
                            .map(|m| {
                                Member::default()
                                    .with_member_id(str_bytes(m.member_id.as_str()))
                                    .with_member_epoch(m.member_epoch)
                                    .with_instance_id(m.instance_id.map(|i| str_bytes(i.as_str())))
                                    .with_rack_id(m.rack_id.map(str_bytes))
                                    .with_client_id(str_bytes(m.client_id))
                                    .with_client_host(str_bytes(m.client_host))
                                    .with_topology_epoch(m.topology_epoch)
                                    .with_process_id(str_bytes(m.process_id))
                                    .with_user_endpoint(m.user_endpoint.map(|e| {
                                        Endpoint::default()
                                            .with_host(str_bytes(e.host))
                                            .with_port(e.port)
                                    }))
                                    .with_client_tags(
                                        m.client_tags
                                            .into_iter()
                                            .map(|(k, v)| {
                                                KeyValue::default()
                                                    .with_key(str_bytes(k))
                                                    .with_value(str_bytes(v))
                                            })
                                            .collect(),
                                    )
                                    .with_task_offsets(task_offsets(&m.task_offsets))
                                    .with_task_end_offsets(task_offsets(&m.task_end_offsets))
                                    .with_assignment(assignment(&m.assigned))
                                    .with_target_assignment(assignment(&m.target))
                            })
                            .collect(),
                    );
                if version >= 1 {
                    // KIP-1331: asked for the topology description, koord (as Kafka 4.4 without a
                    // topology description plugin) has none stored: NOT_STORED (1).
                    let status = if req.include_topology_description {
                        1
                    } else {
                        0
                    };
                    described
                        .with_assignor_name(Some(str_bytes(g.assignor_name)))
                        .with_topology_description_status(status)
                } else {
                    described
                }
            }
            Err(Refusal { error, message }) => base
                .with_error_code(error.code())
                .with_error_message(message.map(str_bytes)),
        };
        groups.push(described);
    }
    StreamsGroupDescribeResponse::default().with_groups(groups)
}

fn assignment(s: &TaskSet) -> Assignment {
    Assignment::default()
        .with_active_tasks(task_ids(&s.active))
        .with_standby_tasks(task_ids(&s.standby))
        .with_warmup_tasks(task_ids(&s.warmup))
}

fn task_ids(tasks: &std::collections::BTreeSet<TaskId>) -> Vec<TaskIds> {
    crate::group::streams::member::by_subtopology(tasks)
        .into_iter()
        .map(|(s, partitions)| {
            TaskIds::default()
                .with_subtopology_id(str_bytes(s))
                .with_partitions(partitions)
        })
        .collect()
}

fn task_offsets(offsets: &BTreeMap<TaskId, i64>) -> Vec<TaskOffset> {
    offsets
        .iter()
        .map(|(t, o)| {
            TaskOffset::default()
                .with_subtopology_id(str_bytes(t.subtopology.clone()))
                .with_partition(t.partition)
                .with_offset(*o)
        })
        .collect()
}

/// A streams group as it is, with its configured topology.
struct View {
    state: StreamsGroupState,
    group_epoch: i32,
    assignment_epoch: i32,
    assignor_name: String,
    topology: Option<topology::Topology>,
    /// Partition counts of the internal topics, once configured.
    internal_partitions: BTreeMap<String, i32>,
    members: Vec<StreamsMember>,
}

/// The group `id`, read on its shard: GROUP_ID_NOT_FOUND, in Kafka's words, when it does not
/// exist or is not a streams group.
async fn describe(broker: &Broker, id: &str) -> Result<View, Refusal> {
    let read =
        broker
            .coordinator
            .with_kind(GroupId::new(id), false, |g: &mut StreamsGroup, _, _| {
                (!g.is_dead()).then(|| view(g))
            });
    let refusal = |message| Refusal::new(GroupError::GroupIdNotFound, message);
    match read.await {
        Ok(Some(view)) => Ok(view),
        Ok(None) | Err(KindRefusal::OtherKind) => {
            Err(refusal(format!("Group {id} is not a streams group.")))
        }
        Err(KindRefusal::Missing) => Err(refusal(format!("Group {id} not found."))),
        Err(KindRefusal::Error(e)) => Err(e.into()),
    }
}

fn view(g: &StreamsGroup) -> View {
    let internal_partitions = g
        .configured()
        .and_then(|c| c.subtopologies.as_ref())
        .map(|subs| {
            subs.values()
                .flat_map(|s| {
                    s.repartition_source_topics
                        .iter()
                        .chain(&s.changelog_topics)
                        .map(|(n, p)| (n.clone(), *p))
                })
                .collect()
        })
        .unwrap_or_default();
    View {
        state: g.state(),
        group_epoch: g.group_epoch(),
        assignment_epoch: g.assignment_epoch(),
        assignor_name: g.assignor_name().to_string(),
        topology: g.topology().cloned(),
        internal_partitions,
        members: g.members().cloned().collect(),
    }
}
