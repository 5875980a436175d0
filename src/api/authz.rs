//! Authorization as every API asks for it, written once: the questions an API module puts to
//! the node's [`crate::security::authorizer::Authorizer`] about the request's principal and
//! client address, and the whole-request checks that [`super::dispatch`] runs before a module
//! sees a request (the APIs that act on one group, one transactional id or the cluster).
//!
//! An API module that needs a per-item check (a topic of a batch, a group of a list) calls the
//! [`RequestContext`] methods here: `ctx.may(broker, Operation::Read, ResourceType::Topic,
//! name)`, `ctx.may_cluster(broker, Operation::Alter)`. With no authorizer configured every
//! answer is "yes", so modules need no special case for the unsecured set-up.

use kafka_protocol::messages::{RequestKind, ResponseKind};
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use crate::broker::Broker;
use crate::security::acl::{Operation, Requester, ResourceType, CLUSTER_NAME};

impl RequestContext {
    /// Who asks, for the authorizer: borrowed from the connection, allocating nothing.
    fn requester(&self) -> Requester<'_> {
        Requester {
            principal: self.principal.as_str(),
            host: &self.peer_host,
        }
    }

    /// Whether the request's principal may do `op` on the resource `name` of type `rt`.
    pub fn may(&self, broker: &Broker, op: Operation, rt: ResourceType, name: &str) -> bool {
        broker.authorizer.authorize(self.requester(), op, rt, name)
    }

    /// Whether the request's principal may do `op` on the cluster.
    pub fn may_cluster(&self, broker: &Broker, op: Operation) -> bool {
        self.may(broker, op, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Whether the request's principal may do `op` on some resource of type `rt`.
    pub fn may_any(&self, broker: &Broker, op: Operation, rt: ResourceType) -> bool {
        broker.authorizer.authorize_any(self.requester(), op, rt)
    }

    /// The authorized-operations bitfield of a resource for this principal.
    pub fn operations(&self, broker: &Broker, rt: ResourceType, name: &str) -> i32 {
        broker
            .authorizer
            .authorized_operations(self.requester(), rt, name)
    }

    /// The error for a config resource (DescribeConfigs, AlterConfigs,
    /// IncrementalAlterConfigs) the principal may not `op` (DESCRIBE_CONFIGS / ALTER_CONFIGS):
    /// a topic's on the topic (TOPIC_AUTHORIZATION_FAILED), a broker's or broker logger's on
    /// the cluster (CLUSTER_AUTHORIZATION_FAILED), a group's on the group
    /// (GROUP_AUTHORIZATION_FAILED); `None` when allowed or another type.
    pub fn config_denied(
        &self,
        broker: &Broker,
        op: Operation,
        resource_type: i8,
        name: &str,
    ) -> Option<ResponseError> {
        const TOPIC: i8 = 2;
        const BROKER: i8 = 4;
        const BROKER_LOGGER: i8 = 8;
        const GROUP: i8 = 32;
        match resource_type {
            TOPIC if !self.may(broker, op, ResourceType::Topic, name) => {
                Some(ResponseError::TopicAuthorizationFailed)
            }
            BROKER | BROKER_LOGGER if !self.may_cluster(broker, op) => {
                Some(ResponseError::ClusterAuthorizationFailed)
            }
            // As Kafka: DESCRIBE_CONFIGS / ALTER_CONFIGS on the group.
            GROUP if !self.may(broker, op, ResourceType::Group, name) => {
                Some(ResponseError::GroupAuthorizationFailed)
            }
            _ => None,
        }
    }

    /// Topic CREATE, as CreateTopics and auto-creation ask it: on the cluster, or on the topic.
    pub fn may_create_topic(&self, broker: &Broker, name: &str) -> bool {
        self.may_cluster(broker, Operation::Create)
            || self.may(broker, Operation::Create, ResourceType::Topic, name)
    }
}

/// Why CreateAcls or DeleteAcls refuses every binding before looking at them: no ALTER on the
/// cluster, or no authorizer configured (Kafka's codes and messages).
pub(super) fn acl_change_refused(
    broker: &Broker,
    ctx: &RequestContext,
) -> Option<(ResponseError, &'static str)> {
    if !ctx.may_cluster(broker, Operation::Alter) {
        Some((
            ResponseError::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        ))
    } else if !broker.authorizer.is_enabled() {
        Some((
            ResponseError::SecurityDisabled,
            "No Authorizer is configured.",
        ))
    } else {
        None
    }
}

/// The request-level check of APIs that act on one resource: `Some(answer)` when the principal
/// may not, with the API's error in its own response; `None` to go on. Kafka checks these
/// before it looks at anything else in the request.
pub(crate) fn deny_request(
    broker: &Broker,
    ctx: &RequestContext,
    version: i16,
    request: &RequestKind,
) -> Option<ResponseKind> {
    use kafka_protocol::messages as m;
    use Operation::*;
    use ResourceType::{Group, TransactionalId};
    let may = |op, rt, name: &str| ctx.may(broker, op, rt, name);
    let group = ResponseError::GroupAuthorizationFailed.code();
    let txn = ResponseError::TransactionalIdAuthorizationFailed.code();
    let cluster = ResponseError::ClusterAuthorizationFailed.code();
    Some(match request {
        RequestKind::JoinGroup(r) if !may(Read, Group, &r.group_id) => ResponseKind::JoinGroup(
            m::JoinGroupResponse::default()
                .with_error_code(group)
                .with_generation_id(-1)
                .with_protocol_name((version < 7).then(Default::default)),
        ),
        RequestKind::SyncGroup(r) if !may(Read, Group, &r.group_id) => {
            ResponseKind::SyncGroup(m::SyncGroupResponse::default().with_error_code(group))
        }
        RequestKind::Heartbeat(r) if !may(Read, Group, &r.group_id) => {
            ResponseKind::Heartbeat(m::HeartbeatResponse::default().with_error_code(group))
        }
        RequestKind::LeaveGroup(r) if !may(Read, Group, &r.group_id) => {
            ResponseKind::LeaveGroup(m::LeaveGroupResponse::default().with_error_code(group))
        }
        RequestKind::OffsetDelete(r) if !may(Delete, Group, &r.group_id) => {
            ResponseKind::OffsetDelete(m::OffsetDeleteResponse::default().with_error_code(group))
        }
        RequestKind::ConsumerGroupHeartbeat(r) if !may(Read, Group, &r.group_id) => {
            ResponseKind::ConsumerGroupHeartbeat(
                m::ConsumerGroupHeartbeatResponse::default().with_error_code(group),
            )
        }
        RequestKind::ShareGroupHeartbeat(r) if !may(Read, Group, &r.group_id) => {
            ResponseKind::ShareGroupHeartbeat(
                m::ShareGroupHeartbeatResponse::default().with_error_code(group),
            )
        }
        RequestKind::AlterShareGroupOffsets(r) if !may(Read, Group, &r.group_id) => {
            ResponseKind::AlterShareGroupOffsets(
                m::AlterShareGroupOffsetsResponse::default()
                    .with_error_code(group)
                    .with_error_message(Some("Group authorization failed.".into())),
            )
        }
        RequestKind::DeleteShareGroupOffsets(r) if !may(Delete, Group, &r.group_id) => {
            ResponseKind::DeleteShareGroupOffsets(
                m::DeleteShareGroupOffsetsResponse::default()
                    .with_error_code(group)
                    .with_error_message(Some("Group authorization failed.".into())),
            )
        }
        RequestKind::StreamsGroupHeartbeat(r) if !may(Read, Group, &r.group_id) => {
            ResponseKind::StreamsGroupHeartbeat(
                m::StreamsGroupHeartbeatResponse::default().with_error_code(group),
            )
        }
        RequestKind::EndTxn(r) if !may(Write, TransactionalId, &r.transactional_id) => {
            ResponseKind::EndTxn(m::EndTxnResponse::default().with_error_code(txn))
        }
        RequestKind::AddOffsetsToTxn(r) if !may(Write, TransactionalId, &r.transactional_id) => {
            ResponseKind::AddOffsetsToTxn(
                m::AddOffsetsToTxnResponse::default().with_error_code(txn),
            )
        }
        RequestKind::AddOffsetsToTxn(r) if !may(Read, Group, &r.group_id) => {
            ResponseKind::AddOffsetsToTxn(
                m::AddOffsetsToTxnResponse::default().with_error_code(group),
            )
        }
        RequestKind::InitProducerId(r) => match &r.transactional_id {
            Some(id) if !may(Write, TransactionalId, id) => ResponseKind::InitProducerId(
                m::InitProducerIdResponse::default()
                    .with_error_code(txn)
                    .with_producer_id((-1).into())
                    .with_producer_epoch(-1),
            ),
            // Idempotent only: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic.
            None if !ctx.may_cluster(broker, IdempotentWrite)
                && !ctx.may_any(broker, Write, ResourceType::Topic) =>
            {
                ResponseKind::InitProducerId(
                    m::InitProducerIdResponse::default()
                        .with_error_code(cluster)
                        .with_producer_id((-1).into())
                        .with_producer_epoch(-1),
                )
            }
            _ => return None,
        },
        RequestKind::DescribeClientQuotas(_) if !ctx.may_cluster(broker, DescribeConfigs) => {
            ResponseKind::DescribeClientQuotas(
                m::DescribeClientQuotasResponse::default()
                    .with_error_code(cluster)
                    .with_error_message(Some(super::str_bytes("Cluster authorization failed.")))
                    .with_entries(None),
            )
        }
        RequestKind::AlterClientQuotas(r) if !ctx.may_cluster(broker, AlterConfigs) => {
            use m::alter_client_quotas_response::{EntityData, EntryData};
            ResponseKind::AlterClientQuotas(
                m::AlterClientQuotasResponse::default().with_entries(
                    r.entries
                        .iter()
                        .map(|e| {
                            EntryData::default()
                                .with_error_code(cluster)
                                .with_error_message(Some(super::str_bytes(
                                    "Cluster authorization failed.",
                                )))
                                .with_entity(
                                    e.entity
                                        .iter()
                                        .map(|p| {
                                            EntityData::default()
                                                .with_entity_type(p.entity_type.clone())
                                                .with_entity_name(p.entity_name.clone())
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::DescribeUserScramCredentials(_) if !ctx.may_cluster(broker, Describe) => {
            ResponseKind::DescribeUserScramCredentials(
                m::DescribeUserScramCredentialsResponse::default().with_error_code(cluster),
            )
        }
        RequestKind::AlterUserScramCredentials(r) if !ctx.may_cluster(broker, Alter) => {
            use m::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
            let mut users: Vec<&str> = r
                .deletions
                .iter()
                .map(|d| d.name.as_str())
                .chain(r.upsertions.iter().map(|u| u.name.as_str()))
                .collect();
            users.sort_unstable();
            users.dedup();
            ResponseKind::AlterUserScramCredentials(
                m::AlterUserScramCredentialsResponse::default().with_results(
                    users
                        .into_iter()
                        .map(|u| {
                            AlterUserScramCredentialsResult::default()
                                .with_user(super::str_bytes(u))
                                .with_error_code(cluster)
                        })
                        .collect(),
                ),
            )
        }
        _ => return None,
    })
}
