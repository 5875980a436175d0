//! StreamsGroupHeartbeat (key 88), v0-1: the streams group protocol of KIP-1071. Kafka Streams
//! (`group.protocol=streams`) joins, heartbeats and leaves through it; the group core
//! ([`crate::group::streams`]) assigns tasks and reconciles. As Kafka's broker does with its
//! coordinator's answer, the internal topics the topology needs and that do not exist yet are
//! created here, after the reply is built: the next heartbeats see them.

use std::collections::BTreeMap;

use kafka_protocol::messages::streams_group_heartbeat_request::{self as rq, TaskIds as ReqTasks};
use kafka_protocol::messages::streams_group_heartbeat_response::{
    Endpoint as RespEndpoint, EndpointToPartitions, Status, TaskIds, TopicPartition,
};
use kafka_protocol::messages::{
    StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse, TopicName,
};

use super::context::RequestContext;
use super::join_group::client_host;
use super::str_bytes;
use crate::broker::Broker;
use crate::coordinator::KindRefusal;
use crate::group::consumer::Refusal;
use crate::group::streams::group::validate;
use crate::group::streams::sticky::TaskId;
use crate::group::streams::topology::{
    CopartitionGroup, Subtopology, TopicInfo, TopicToCreate, Topology,
};
use crate::group::streams::{
    Endpoint, StreamsGroup, StreamsHeartbeat, StreamsHeartbeatReply, TaskSet,
};
use crate::group::{GroupError, GroupId, MemberId};

/// The heartbeat on the group's shard: one at epoch 0 creates the group (or turns an Empty
/// group of another kind into a streams group); any other for a group that does not exist, or
/// is not a streams group, is GROUP_ID_NOT_FOUND in Kafka's words.
async fn heartbeat(
    broker: &Broker,
    id: &str,
    hb: StreamsHeartbeat,
) -> Result<StreamsHeartbeatReply, Refusal> {
    let create = hb.member_epoch == 0;
    let answer = broker.coordinator.with_kind(
        GroupId::new(id),
        create,
        |g: &mut StreamsGroup, image, now| g.handle_heartbeat(hb, image, now),
    );
    let refusal = |message| Refusal::new(GroupError::GroupIdNotFound, message);
    match answer.await {
        Ok(answer) => answer,
        Err(KindRefusal::Missing) => Err(refusal(format!("Streams group {id} not found."))),
        Err(KindRefusal::OtherKind) => Err(refusal(format!("Group {id} is not a streams group."))),
        Err(KindRefusal::Error(e)) => Err(e.into()),
    }
}

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: StreamsGroupHeartbeatRequest,
    version: i16,
    client_id: &str,
) -> StreamsGroupHeartbeatResponse {
    let regex_sources = req.topology.as_ref().is_some_and(|t| {
        t.subtopologies
            .iter()
            .any(|s| !s.source_topic_regex.is_empty())
    });
    let given = [
        req.active_tasks.is_some(),
        req.standby_tasks.is_some(),
        req.warmup_tasks.is_some(),
    ];
    let all_or_none = given.iter().all(|g| *g) || given.iter().all(|g| !*g);
    let owned = match (&req.active_tasks, &req.standby_tasks, &req.warmup_tasks) {
        (Some(a), Some(s), Some(w)) => Some(TaskSet {
            active: tasks(a),
            standby: tasks(s),
            warmup: tasks(w),
        }),
        _ => None,
    };
    let hb = StreamsHeartbeat {
        member_id: MemberId::new(req.member_id.as_str()),
        member_epoch: req.member_epoch,
        endpoint_information_epoch: req.endpoint_information_epoch,
        instance_id: super::instance_id(&req.instance_id),
        rack_id: super::opt_string(&req.rack_id),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        topology: req.topology.as_ref().map(topology),
        owned,
        process_id: super::opt_string(&req.process_id),
        user_endpoint: req.user_endpoint.as_ref().map(|e| Endpoint {
            host: e.host.to_string(),
            port: e.port,
        }),
        client_tags: req.client_tags.as_ref().map(|tags| {
            tags.iter()
                .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect()
        }),
        task_offsets: req.task_offsets.as_ref().map(|o| offsets(o)),
        task_end_offsets: req.task_end_offsets.as_ref().map(|o| offsets(o)),
        shutdown_application: req.shutdown_application,
        client_id: client_id.to_string(),
        client_host: client_host(ctx.peer),
    };
    let result = match validate(req.group_id.as_str(), &hb, regex_sources, all_or_none) {
        Ok(()) => heartbeat(broker, req.group_id.as_str(), hb).await,
        Err(refusal) => Err(refusal),
    };
    let reply = match result {
        Ok(reply) => reply,
        Err(Refusal { error, message }) => {
            return StreamsGroupHeartbeatResponse::default()
                .with_error_code(error.code())
                .with_error_message(message.map(str_bytes))
        }
    };
    if !reply.to_create.is_empty() {
        create_internal_topics(broker, ctx, &reply.to_create).await;
    }
    let lag = reply.acceptable_recovery_lag;
    let mut resp = StreamsGroupHeartbeatResponse::default()
        .with_member_id(str_bytes(reply.member_id.as_str()))
        .with_member_epoch(reply.member_epoch)
        .with_heartbeat_interval_ms(reply.heartbeat_interval_ms)
        .with_task_offset_interval_ms(reply.task_offset_interval_ms)
        .with_status(Some(
            reply
                .status
                .into_iter()
                .map(|(code, detail)| {
                    Status::default()
                        .with_status_code(code)
                        .with_status_detail(str_bytes(detail))
                })
                .collect(),
        ))
        .with_endpoint_information_epoch(reply.endpoint_information_epoch)
        .with_partitions_by_user_endpoint(reply.partitions_by_endpoint.map(|list| {
            list.into_iter()
                .map(|e| {
                    EndpointToPartitions::default()
                        .with_user_endpoint(
                            RespEndpoint::default()
                                .with_host(str_bytes(e.endpoint.host))
                                .with_port(e.endpoint.port),
                        )
                        .with_active_partitions(topic_partitions(e.active))
                        .with_standby_partitions(topic_partitions(e.standby))
                })
                .collect()
        }));
    if version == 0 {
        resp.acceptable_recovery_lag_legacy = i32::try_from(lag).unwrap_or(i32::MAX);
    } else {
        resp.acceptable_recovery_lag = lag;
    }
    if let Some(a) = reply.assignment {
        resp = resp
            .with_active_tasks(Some(task_ids(&a.active)))
            .with_standby_tasks(Some(task_ids(&a.standby)))
            .with_warmup_tasks(Some(task_ids(&a.warmup)));
    }
    resp
}

/// Creates the internal topics a streams group needs (as Kafka's broker does after its
/// coordinator's answer), when the principal may. One that another heartbeat created first is
/// fine; configs koord does not know are left out rather than failing the topic.
async fn create_internal_topics(
    broker: &Broker,
    ctx: &RequestContext,
    topics: &BTreeMap<String, TopicToCreate>,
) {
    for (name, t) in topics {
        if broker.topics.get(name).is_some() || !ctx.may_create_topic(broker, name) {
            continue;
        }
        let created = broker.backend.create_topic(
            broker.local(),
            name,
            t.partitions,
            t.replication_factor,
            &t.configs,
        );
        match created.await {
            // Where the topics are another's (gateway mode: upstream's), koord's mirror
            // learns of it at once.
            Ok(Some(topic)) => {
                tracing::info!(topic = %name, partitions = t.partitions, "created internal topic");
                broker.topics.mirror(&[topic], false);
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(topic = %name, "internal topic not created: {e}"),
        }
    }
}

fn tasks(list: &[ReqTasks]) -> std::collections::BTreeSet<TaskId> {
    list.iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|&p| TaskId::new(t.subtopology_id.as_str(), p))
        })
        .collect()
}

fn offsets(list: &[rq::TaskOffset]) -> Vec<(TaskId, i64)> {
    list.iter()
        .map(|o| {
            (
                TaskId::new(o.subtopology_id.as_str(), o.partition),
                o.offset,
            )
        })
        .collect()
}

fn topic_info(t: &rq::TopicInfo) -> TopicInfo {
    TopicInfo {
        name: t.name.to_string(),
        partitions: t.partitions,
        replication_factor: t.replication_factor,
        configs: t
            .topic_configs
            .iter()
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect(),
    }
}

fn topology(t: &rq::Topology) -> Topology {
    Topology {
        epoch: t.epoch,
        subtopologies: t
            .subtopologies
            .iter()
            .map(|s| Subtopology {
                id: s.subtopology_id.to_string(),
                source_topics: s.source_topics.iter().map(|n| n.to_string()).collect(),
                repartition_sink_topics: s
                    .repartition_sink_topics
                    .iter()
                    .map(|n| n.to_string())
                    .collect(),
                repartition_source_topics: s
                    .repartition_source_topics
                    .iter()
                    .map(topic_info)
                    .collect(),
                changelog_topics: s.state_changelog_topics.iter().map(topic_info).collect(),
                copartition_groups: s
                    .copartition_groups
                    .iter()
                    .map(|c| CopartitionGroup {
                        source_topics: c.source_topics.clone(),
                        repartition_source_topics: c.repartition_source_topics.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Tasks by subtopology, subtopologies and partitions sorted (as Kafka answers).
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

fn topic_partitions(
    by_topic: BTreeMap<String, std::collections::BTreeSet<i32>>,
) -> Vec<TopicPartition> {
    by_topic
        .into_iter()
        .map(|(topic, ps)| {
            TopicPartition::default()
                .with_topic(TopicName(str_bytes(topic)))
                .with_partitions(ps.into_iter().collect())
        })
        .collect()
}
