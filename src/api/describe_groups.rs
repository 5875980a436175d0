//! DescribeGroups (key 15), v0-6. A group that does not exist is reported as Kafka does: before
//! v6 with no error and state "Dead"; from v6 (KIP-1043) with GROUP_ID_NOT_FOUND and a message.
//! Metadata and assignments are shown only while the group is Stable.
//!
//! Gateway mode: a group koord does not have is described as the upstream describes it (a
//! group with offsets only is Empty there, as in Kafka); one upstream does not have either is
//! missing as above.

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, GroupId};

use super::context::RequestContext;
use super::{check_group_id, str_bytes, AUTHORIZED_OPERATIONS_OMITTED};
use crate::broker::Broker;
use crate::group::GroupError;
use crate::security::acl::{Operation, ResourceType};

async fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    id: GroupId,
    version: i16,
    with_ops: bool,
) -> DescribedGroup {
    // As Kafka: a group the principal may not DESCRIBE gets GROUP_AUTHORIZATION_FAILED and
    // nothing else.
    if !ctx.may(broker, Operation::Describe, ResourceType::Group, &id) {
        return DescribedGroup::default()
            .with_group_id(id)
            .with_error_code(GroupError::GroupAuthorizationFailed.code())
            .with_group_state(str_bytes(""))
            .with_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED);
    }
    let base = DescribedGroup::default()
        .with_group_id(id.clone())
        .with_authorized_operations(if with_ops && version >= 3 {
            ctx.operations(broker, ResourceType::Group, &id)
        } else {
            AUTHORIZED_OPERATIONS_OMITTED
        });
    let group = match check_group_id(&id) {
        Ok(g) => g,
        Err(e) => {
            return base
                .with_error_code(e.code())
                .with_group_state(str_bytes(""))
        }
    };
    if let Err(e) = broker.coordinator.admit(&group) {
        return base
            .with_error_code(e.code())
            .with_group_state(str_bytes(""));
    }
    let described = broker.coordinator.describe(group.clone()).await;
    if described.is_none() && broker.coordinator.listing(&group).is_none() {
        // A group koord does not have may live behind it (gateway mode: upstream's, offsets
        // only or from before koord), described there as Kafka does (Empty, no members).
        match broker.backend.describe_elsewhere(&group).await {
            Ok(Some(g)) => {
                return base
                    .with_group_state(g.group_state)
                    .with_protocol_type(g.protocol_type)
                    .with_protocol_data(g.protocol_data)
                    .with_members(if version >= 4 {
                        g.members
                    } else {
                        g.members
                            .into_iter()
                            .map(|m| m.with_group_instance_id(None))
                            .collect()
                    })
            }
            // Nowhere: answered below as a missing group.
            Ok(None) => {}
            Err(code) => return base.with_error_code(code).with_group_state(str_bytes("")),
        }
    }
    match described {
        Some(d) => base
            .with_group_state(str_bytes(d.state.as_str()))
            .with_protocol_type(str_bytes(d.protocol_type))
            .with_protocol_data(str_bytes(d.protocol))
            .with_members(
                d.members
                    .into_iter()
                    .map(|m| {
                        let member = DescribedGroupMember::default()
                            .with_member_id(str_bytes(m.member_id.as_str()))
                            .with_client_id(str_bytes(m.client_id))
                            .with_client_host(str_bytes(m.client_host))
                            .with_member_metadata(m.metadata)
                            .with_member_assignment(m.assignment);
                        if version >= 4 {
                            member.with_group_instance_id(m.instance_id.map(|i| str_bytes(i.0)))
                        } else {
                            member
                        }
                    })
                    .collect(),
            ),
        None if version >= 6 => {
            let consumer = broker
                .coordinator
                .listing(&crate::group::GroupId::new(id.as_str()))
                .is_some_and(|l| l.state.group_type() != "classic");
            let message = if consumer {
                format!("Group {} is not a classic group.", id.as_str())
            } else {
                format!("Group {} not found.", id.as_str())
            };
            base.with_error_code(GroupError::GroupIdNotFound.code())
                .with_error_message(Some(str_bytes(message)))
                .with_group_state(str_bytes("Dead"))
        }
        None => base.with_group_state(str_bytes("Dead")),
    }
}

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let mut groups = Vec::with_capacity(req.groups.len());
    for id in req.groups {
        groups.push(describe(broker, ctx, id, version, req.include_authorized_operations).await);
    }
    DescribeGroupsResponse::default().with_groups(groups)
}
