//! ShareGroupDescribe (key 77), v1: share groups (KIP-932) as Kafka 4.4 describes them: state,
//! epochs, the assignor, and every member with its subscriptions and assigned partitions (by
//! topic id and name).

use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName};

use super::context::RequestContext;
use super::str_bytes;
use crate::broker::Broker;
use crate::coordinator::KindRefusal;
use crate::group::modern::Refusal;
use crate::group::share::ShareGroup;
use crate::group::{GroupError, GroupId};
use crate::security::acl::{Operation, ResourceType};

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ShareGroupDescribeRequest,
    _version: i16,
) -> ShareGroupDescribeResponse {
    let mut groups = Vec::with_capacity(req.group_ids.len());
    for id in req.group_ids {
        let base = DescribedGroup::default()
            .with_group_id(id.clone())
            .with_authorized_operations(i32::MIN);
        if !ctx.may(broker, Operation::Describe, ResourceType::Group, &id) {
            groups.push(base.with_error_code(GroupError::GroupAuthorizationFailed.code()));
            continue;
        }
        let described = match describe(broker, id.as_str()).await {
            Ok(d) => d.with_group_id(id.clone()).with_authorized_operations(
                if req.include_authorized_operations {
                    ctx.operations(broker, ResourceType::Group, &id)
                } else {
                    i32::MIN
                },
            ),
            Err(Refusal { error, message }) => base
                .with_error_code(error.code())
                .with_error_message(message.map(str_bytes)),
        };
        groups.push(described);
    }
    ShareGroupDescribeResponse::default().with_groups(groups)
}

/// The group `id`, described on its shard: GROUP_ID_NOT_FOUND, in Kafka's words, when it does
/// not exist or is not a share group.
async fn describe(broker: &Broker, id: &str) -> Result<DescribedGroup, Refusal> {
    let read =
        broker
            .coordinator
            .with_kind(GroupId::new(id), false, |g: &mut ShareGroup, image, _| {
                if g.is_dead() {
                    return None;
                }
                let members = g
                    .members()
                    .map(|m| {
                        let partitions = m
                            .assigned
                            .iter()
                            .map(|(topic, parts)| {
                                TopicPartitions::default()
                                    .with_topic_id(*topic)
                                    .with_topic_name(TopicName(str_bytes(
                                        image.name_of(*topic).unwrap_or_default(),
                                    )))
                                    .with_partitions(parts.clone())
                            })
                            .collect();
                        Member::default()
                            .with_member_id(str_bytes(m.member_id.as_str()))
                            .with_rack_id(m.rack_id.clone().map(str_bytes))
                            .with_member_epoch(m.member_epoch)
                            .with_client_id(str_bytes(m.client_id.clone()))
                            .with_client_host(str_bytes(m.client_host.clone()))
                            .with_subscribed_topic_names(
                                m.subscribed_topic_names
                                    .iter()
                                    .map(|n| TopicName(str_bytes(n.clone())))
                                    .collect(),
                            )
                            .with_assignment(
                                Assignment::default().with_topic_partitions(partitions),
                            )
                    })
                    .collect();
                Some(
                    DescribedGroup::default()
                        .with_group_state(str_bytes(g.state().as_str()))
                        .with_group_epoch(g.group_epoch())
                        .with_assignment_epoch(g.assignment_epoch())
                        .with_assignor_name(str_bytes(g.assignor_name()))
                        .with_members(members),
                )
            });
    let refusal = |message| Refusal::new(GroupError::GroupIdNotFound, message);
    match read.await {
        Ok(Some(described)) => Ok(described),
        Ok(None) | Err(KindRefusal::OtherKind) => {
            Err(refusal(format!("Group {id} is not a share group.")))
        }
        Err(KindRefusal::Missing) => Err(refusal(format!("Group {id} not found."))),
        Err(KindRefusal::Error(e)) => Err(e.into()),
    }
}
