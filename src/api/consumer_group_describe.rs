//! ConsumerGroupDescribe (key 69), v0-1: consumer groups (KIP-848) as Kafka 4.4 describes them:
//! epochs, the assignor, and every member with its assignment and target, by topic id and name.
//! A group naming a topic the principal may not DESCRIBE (subscribed, assigned or targeted) is
//! not described: TOPIC_AUTHORIZATION_FAILED, as Kafka 4.x answers (KAFKA-18813).

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName,
};
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use super::str_bytes;
use crate::broker::Broker;
use crate::coordinator::KindRefusal;
use crate::group::consumer::{ConsumerGroup, ConsumerGroupState, Refusal};
use crate::group::core::GroupCore;
use crate::group::{GroupError, GroupId};
use crate::security::acl::{Operation, ResourceType};
use crate::vocab::{ConsumerMember, Partitions};

/// KIP-1099 `MemberType` of a member that speaks the classic protocol (JoinGroup).
const CLASSIC_MEMBER: i8 = 0;
/// KIP-1099 `MemberType` of a member that speaks the consumer protocol.
const CONSUMER_MEMBER: i8 = 1;

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ConsumerGroupDescribeRequest,
    version: i16,
) -> ConsumerGroupDescribeResponse {
    let mut groups = Vec::with_capacity(req.group_ids.len());
    for id in req.group_ids {
        let base = DescribedGroup::default()
            .with_group_id(id.clone())
            .with_authorized_operations(i32::MIN);
        // As Kafka: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED.
        if !ctx.may(broker, Operation::Describe, ResourceType::Group, &id) {
            groups.push(
                base.with_error_code(crate::group::GroupError::GroupAuthorizationFailed.code()),
            );
            continue;
        }
        let described = match describe(broker, id.as_str()).await {
            Ok(g)
                if g.members.iter().any(|m| {
                    let by_id = |p: &Partitions| {
                        p.keys()
                            .filter_map(|id| broker.topics.get_by_id(*id))
                            .map(|t| t.name)
                            .collect::<Vec<_>>()
                    };
                    m.subscribed_topic_names
                        .iter()
                        .cloned()
                        .chain(by_id(&m.assigned))
                        .chain(by_id(&m.target))
                        .any(|t| !ctx.may(broker, Operation::Describe, ResourceType::Topic, &t))
                }) =>
            {
                base.with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(Some(str_bytes(
                        "The group has described topic(s) that the client is not authorized to describe.",
                    )))
            }
            Ok(g) => base
                .with_group_state(str_bytes(g.state.as_str()))
                .with_group_epoch(g.group_epoch)
                .with_assignment_epoch(g.assignment_epoch)
                .with_assignor_name(str_bytes(g.assignor_name))
                .with_authorized_operations(if req.include_authorized_operations {
                    ctx.operations(broker, ResourceType::Group, &id)
                } else {
                    i32::MIN
                })
                .with_members(
                    g.members
                        .into_iter()
                        .map(|m| {
                            let member_type = if m.uses_classic_protocol() {
                                CLASSIC_MEMBER
                            } else {
                                CONSUMER_MEMBER
                            };
                            let member = Member::default()
                                .with_member_id(str_bytes(m.member_id.as_str()))
                                .with_instance_id(m.instance_id.map(|i| str_bytes(i.as_str())))
                                .with_rack_id(m.rack_id.map(str_bytes))
                                .with_member_epoch(m.member_epoch)
                                .with_client_id(str_bytes(m.client_id))
                                .with_client_host(str_bytes(m.client_host))
                                .with_subscribed_topic_names(
                                    m.subscribed_topic_names
                                        .into_iter()
                                        .map(|n| TopicName(str_bytes(n)))
                                        .collect(),
                                )
                                // Kafka shows "" for a member that subscribes by names.
                                .with_subscribed_topic_regex(Some(str_bytes(
                                    m.subscribed_topic_regex.unwrap_or_default(),
                                )))
                                .with_assignment(assignment(broker, &m.assigned))
                                .with_target_assignment(assignment(broker, &m.target));
                            if version >= 1 {
                                member.with_member_type(member_type)
                            } else {
                                member
                            }
                        })
                        .collect(),
                ),
            Err(Refusal { error, message }) => base
                .with_error_code(error.code())
                .with_error_message(message.map(str_bytes)),
        };
        groups.push(described);
    }
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}

/// A consumer group as it is, members by id.
struct View {
    state: ConsumerGroupState,
    group_epoch: i32,
    assignment_epoch: i32,
    assignor_name: String,
    members: Vec<ConsumerMember>,
}

/// The group `id`, read on its shard: GROUP_ID_NOT_FOUND, in Kafka's words, when it does not
/// exist or is not a consumer group.
async fn describe(broker: &Broker, id: &str) -> Result<View, Refusal> {
    let read =
        broker
            .coordinator
            .with_kind(GroupId::new(id), false, |g: &mut ConsumerGroup, _, _| {
                (!g.is_dead()).then(|| View {
                    state: g.state(),
                    group_epoch: g.group_epoch(),
                    assignment_epoch: g.assignment_epoch(),
                    assignor_name: g.assignor_name().to_string(),
                    members: g.members().cloned().collect(),
                })
            });
    let refusal = |message| Refusal::new(GroupError::GroupIdNotFound, message);
    match read.await {
        Ok(Some(view)) => Ok(view),
        Ok(None) | Err(KindRefusal::OtherKind) => {
            Err(refusal(format!("Group {id} is not a consumer group.")))
        }
        Err(KindRefusal::Missing) => Err(refusal(format!("Group {id} not found."))),
        Err(KindRefusal::Error(e)) => Err(e.into()),
    }
}

/// Partitions by topic id and name; a topic deleted since is left out.
fn assignment(broker: &Broker, partitions: &Partitions) -> Assignment {
    Assignment::default().with_topic_partitions(
        partitions
            .iter()
            .filter_map(|(id, parts)| {
                let topic = broker.topics.get_by_id(*id)?;
                Some(
                    TopicPartitions::default()
                        .with_topic_id(*id)
                        .with_topic_name(TopicName(str_bytes(topic.name)))
                        .with_partitions(parts.clone()),
                )
            })
            .collect(),
    )
}
