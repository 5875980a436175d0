//! ShareGroupHeartbeat (key 76), v1: the share group protocol of KIP-932. Members generate
//! their own ids, join with epoch 0 and their subscribed topics, heartbeat, and leave with
//! epoch -1; the group core ([`crate::group::share`]) assigns (a partition may go to several
//! members) and hands each member its target at once: share members have nothing to revoke.
//!
//! Authorization beyond READ on the group (checked before dispatch): a member that names a
//! topic it may not DESCRIBE is refused with TOPIC_AUTHORIZATION_FAILED, as Kafka 4.4 does.

use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};
use kafka_protocol::ResponseError;

use super::join_group::client_host;
use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::coordinator::KindRefusal;
use crate::group::modern::Refusal;
use crate::group::share::group::{validate, LEAVE_EPOCH};
use crate::group::share::partition::PartitionConfig;
use crate::group::share::{
    AutoOffsetReset, ShareGroup, ShareHeartbeat, ShareHeartbeatReply, ShareSettings,
};
use crate::group::{GroupError, GroupId, MemberId};
use crate::metadata::group_config::{IsolationLevel, ShareAutoOffsetReset};
use crate::security::acl::{Operation, ResourceType};

/// A share group's settings now: the broker's, with the group's own configs over them
/// (IncrementalAlterConfigs on the GROUP resource).
pub(super) fn settings(broker: &Broker, group: &str) -> ShareSettings {
    let c = broker.group_configs.get(group);
    let positive = |v: i32| u64::try_from(v).unwrap_or(0);
    let base = broker.coordinator.share_settings();
    ShareSettings {
        session_timeout_ms: positive(c.share_session_timeout_ms),
        heartbeat_interval_ms: c.share_heartbeat_interval_ms,
        max_size: base.max_size,
        auto_offset_reset: match c.share_auto_offset_reset {
            ShareAutoOffsetReset::Earliest => AutoOffsetReset::Earliest,
            ShareAutoOffsetReset::Latest => AutoOffsetReset::Latest,
            ShareAutoOffsetReset::ByDuration { ms } => AutoOffsetReset::ByDuration(ms),
        },
        read_committed: c.share_isolation_level == IsolationLevel::ReadCommitted,
        partition: PartitionConfig {
            lock_duration_ms: positive(c.share_record_lock_duration_ms),
            delivery_count_limit: u16::try_from(c.share_delivery_count_limit).unwrap_or(u16::MAX),
            max_in_flight: u32::try_from(c.share_partition_max_record_locks).unwrap_or(0),
            dead_letter: !c.errors_deadletterqueue_topic_name.is_empty(),
        },
        logs_kept: base.logs_kept,
    }
}

/// The heartbeat on the group's shard: one at epoch 0 creates the group (or turns an Empty
/// group of another kind into a share group); any other for a group that does not exist, or
/// is not a share group, is GROUP_ID_NOT_FOUND in Kafka's words.
async fn heartbeat(
    broker: &Broker,
    id: &str,
    hb: ShareHeartbeat,
) -> Result<ShareHeartbeatReply, Refusal> {
    let create = hb.member_epoch == 0;
    // Kafka's leave looks the group up without the heartbeat's wording.
    let missing = if hb.member_epoch == LEAVE_EPOCH {
        format!("Group {id} not found.")
    } else {
        format!("Share group {id} not found.")
    };
    let settings = settings(broker, id);
    let answer = broker.coordinator.with_kind(
        GroupId::new(id),
        create,
        move |g: &mut ShareGroup, image, now| g.handle_heartbeat(hb, &settings, image, now),
    );
    let refusal = |message| Refusal::new(GroupError::GroupIdNotFound, message);
    match answer.await {
        Ok(answer) => answer,
        Err(KindRefusal::Missing) => Err(refusal(missing)),
        Err(KindRefusal::OtherKind) => Err(refusal(format!("Group {id} is not a share group."))),
        Err(KindRefusal::Error(e)) => Err(e.into()),
    }
}

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ShareGroupHeartbeatRequest,
    _version: i16,
    client_id: &str,
) -> ShareGroupHeartbeatResponse {
    if req.subscribed_topic_names.as_ref().is_some_and(|names| {
        names
            .iter()
            .any(|n| !ctx.may(broker, Operation::Describe, ResourceType::Topic, n))
    }) {
        return ShareGroupHeartbeatResponse::default()
            .with_error_code(ResponseError::TopicAuthorizationFailed.code());
    }
    let hb = ShareHeartbeat {
        member_id: MemberId::new(req.member_id.as_str()),
        member_epoch: req.member_epoch,
        rack_id: super::opt_string(&req.rack_id),
        subscribed_topic_names: req
            .subscribed_topic_names
            .map(|names| names.iter().map(|n| n.to_string()).collect()),
        client_id: client_id.to_string(),
        client_host: client_host(ctx.peer),
    };
    // The broker refuses an empty member id before its coordinator would, without a message.
    if hb.member_id.as_str().is_empty() {
        return ShareGroupHeartbeatResponse::default()
            .with_error_code(GroupError::InvalidRequest.code());
    }
    let result = match validate(req.group_id.as_str(), &hb) {
        Ok(()) => heartbeat(broker, req.group_id.as_str(), hb).await,
        Err(refusal) => Err(refusal),
    };
    match result {
        Ok(reply) => ShareGroupHeartbeatResponse::default()
            .with_member_id(Some(str_bytes(reply.member_id.as_str())))
            .with_member_epoch(reply.member_epoch)
            .with_heartbeat_interval_ms(reply.heartbeat_interval_ms)
            .with_assignment(reply.assignment.map(|a| {
                Assignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(topic_id, partitions)| {
                            TopicPartitions::default()
                                .with_topic_id(topic_id)
                                .with_partitions(partitions)
                        })
                        .collect(),
                )
            })),
        Err(Refusal { error, message }) => ShareGroupHeartbeatResponse::default()
            .with_error_code(error.code())
            .with_error_message(message.map(str_bytes)),
    }
}
