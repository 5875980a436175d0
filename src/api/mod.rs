//! One module per Kafka API. Each validates what needs no shared state, does the work against
//! [`crate::broker::Broker`], and builds the response at the request's version, setting
//! version-gated fields only where that version carries them. [`SUPPORTED`] is the table of
//! served APIs and versions, and [`dispatch`] runs a decoded request through its module.

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_share_group_offsets;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub(crate) mod authz;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
mod context;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_share_group_offsets;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_producers;
pub mod describe_share_group_offsets;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod get_telemetry_subscriptions;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod push_telemetry;
mod reply;
pub mod share_acknowledge;
pub mod share_fetch;
pub mod share_group_describe;
pub mod share_group_heartbeat;
pub mod streams_group_describe;
pub mod streams_group_heartbeat;
pub mod streams_group_topology_description_update;
mod supported;
pub mod sync_group;
mod table;
mod txn_errors;
pub mod txn_offset_commit;
pub mod write_txn_markers;

pub use context::{Outcome, RequestContext};
pub use supported::{is_supported, supported, Supported, SUPPORTED};
pub use table::dispatch;

use kafka_protocol::protocol::StrBytes;

use crate::group::{GroupError, GroupId, InstanceId};
use kafka_protocol::ResponseError;

use crate::metadata::LEADER_EPOCH;

/// Bitfield value Kafka sends when authorized operations were not asked for. The bitfields
/// themselves come from the authorizer ([`RequestContext::operations`]); without one, every
/// operation of the resource type, as Kafka reports them
/// ([`crate::security::acl::ResourceType::all_operations_bits`]).
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

pub(crate) fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// The response error code of an optional group error.
pub(crate) fn code(e: Option<GroupError>) -> i16 {
    e.map_or(0, GroupError::code)
}

/// A nullable wire string as an owned domain string.
pub(crate) fn opt_string(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.as_str().to_string())
}

/// The instance id of a static member, from the wire's nullable `group_instance_id`.
pub(crate) fn instance_id(s: &Option<StrBytes>) -> Option<InstanceId> {
    s.as_ref().map(|i| InstanceId::new(i.as_str()))
}

/// A topic named by id (`by_id`, the versions that carry topic ids) or by name, as Produce and
/// Fetch resolve it.
pub(crate) fn resolve_topic(
    broker: &crate::broker::Broker,
    by_id: bool,
    id: uuid::Uuid,
    name: &str,
) -> Result<crate::metadata::Topic, kafka_protocol::ResponseError> {
    if by_id {
        broker
            .topics
            .get_by_id(id)
            .ok_or(kafka_protocol::ResponseError::UnknownTopicId)
    } else {
        broker
            .topics
            .get(name)
            .ok_or(kafka_protocol::ResponseError::UnknownTopicOrPartition)
    }
}

/// [`resolve_topic`] for an API that needs `op` on the topic: a topic named by name is
/// checked before it is looked up (so an unauthorized client cannot learn whether it exists),
/// one named by id after (UNKNOWN_TOPIC_ID first), as Kafka orders them.
pub(crate) fn resolve_topic_for(
    broker: &crate::broker::Broker,
    ctx: &RequestContext,
    op: crate::security::acl::Operation,
    by_id: bool,
    id: uuid::Uuid,
    name: &str,
) -> Result<crate::metadata::Topic, kafka_protocol::ResponseError> {
    use crate::security::acl::ResourceType;
    let denied = kafka_protocol::ResponseError::TopicAuthorizationFailed;
    if !by_id && !ctx.may(broker, op, ResourceType::Topic, name) {
        return Err(denied);
    }
    let topic = resolve_topic(broker, by_id, id, name)?;
    if by_id && !ctx.may(broker, op, ResourceType::Topic, &topic.name) {
        return Err(denied);
    }
    Ok(topic)
}

/// Kafka rejects an empty group id before anything else (`GroupCoordinatorService`).
pub(crate) fn check_group_id(id: &str) -> Result<GroupId, GroupError> {
    if id.is_empty() {
        Err(GroupError::InvalidGroupId)
    } else {
        Ok(GroupId::new(id))
    }
}

/// Kafka's check of the leader epoch a client believes current (`Partition.
/// localLogWithEpochOrThrow`) against this node's, [`LEADER_EPOCH`]: none given passes, a newer
/// one is UNKNOWN_LEADER_EPOCH (the client knows of a leader this node has not heard of), an
/// older one FENCED_LEADER_EPOCH. Callers turn the wire value into `None` the way Kafka does for
/// their API (Fetch: any negative; ListOffsets, OffsetForLeaderEpoch: -1 only).
pub(crate) fn check_leader_epoch(current: Option<i32>) -> Result<(), ResponseError> {
    match current {
        None => Ok(()),
        Some(e) if e > LEADER_EPOCH => Err(ResponseError::UnknownLeaderEpoch),
        Some(e) if e < LEADER_EPOCH => Err(ResponseError::FencedLeaderEpoch),
        Some(_) => Ok(()),
    }
}

/// Helpers for the API tests.
#[cfg(test)]
pub(crate) mod testing {
    use crate::api::RequestContext;
    use crate::broker::Broker;
    use crate::config::Config;

    /// An ALLOW ACL for the unauthenticated local client ([`ctx`]) on one resource.
    pub(crate) fn allow(
        rt: crate::security::acl::ResourceType,
        name: &str,
        op: crate::security::acl::Operation,
    ) -> crate::security::acl::Acl {
        use crate::security::acl::{Acl, PatternType, Permission};
        Acl {
            resource_type: rt,
            pattern: PatternType::Literal,
            name: name.into(),
            principal: "User:ANONYMOUS".into(),
            host: "*".into(),
            operation: op,
            permission: Permission::Allow,
        }
    }

    /// The context of an unauthenticated request from a local client.
    pub(crate) fn ctx(broker: &Broker) -> RequestContext {
        RequestContext::plaintext(broker, std::net::SocketAddr::from(([127, 0, 0, 1], 50_000)))
    }

    /// A broker with topic `t` of 2 partitions, whose id is [`crate::metadata::name_based_id`]
    /// of its name (so that requests by id can be written before the broker is); its data dir
    /// is removed again at once (only the cluster id lives there).
    pub(crate) fn broker() -> Broker {
        let dir = std::env::temp_dir().join(format!(
            "koord-api-test-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        let config = Config {
            data_dir: dir.clone(),
            cluster_id: "test-cluster".into(),
            ..Config::default()
        };
        let b = Broker::new(config).expect("broker");
        let _ = std::fs::remove_dir_all(dir);
        b.topics
            .restore(crate::metadata::Topic {
                name: "t".into(),
                id: crate::metadata::name_based_id("t"),
                partitions: 2,
            })
            .expect("topic t");
        b
    }
}
