//! ShareAcknowledge (key 79), v1-2: a share group member acknowledges records it acquired
//! (ACCEPT, RELEASE, REJECT; GAP for offsets without a record; from v2 RENEW, in a request
//! with `is_renew_ack`: the lock starts again) within its share session; with
//! session epoch -1 it also closes the session, and what it still held becomes available
//! again. The acknowledgements are stored before the answer. Session errors are top-level, as
//! for ShareFetch (epoch 0 cannot open a session here: INVALID_SHARE_SESSION_EPOCH); each
//! partition's acknowledgement outcome is its error code. From v2 the answer carries the
//! group's acquisition lock duration, as Kafka's.

use std::collections::BTreeMap;

use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{ShareAcknowledgeRequest, ShareAcknowledgeResponse};
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use super::share_fetch::{acks_of, caller, session};
use super::share_group_heartbeat::settings;
use super::str_bytes;
use crate::broker::Broker;
use crate::group::modern::Refusal;
use crate::group::share::SessionRequest;
use crate::group::GroupError;
use crate::metadata::LEADER_EPOCH;
use crate::security::acl::Operation;
use crate::vocab::TopicId;

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ShareAcknowledgeRequest,
    version: i16,
) -> ShareAcknowledgeResponse {
    let top = |error: GroupError, message: Option<String>| {
        ShareAcknowledgeResponse::default()
            .with_error_code(error.code())
            .with_error_message(message.map(str_bytes))
    };
    let (group, member) = match caller(broker, ctx, req.group_id.as_ref(), req.member_id.as_ref()) {
        Ok(c) => c,
        Err(Refusal { error, message }) => return top(error, message),
    };
    let renew = version >= 2 && req.is_renew_ack;
    let mut outcomes: BTreeMap<(TopicId, i32), Option<i16>> = BTreeMap::new();
    let mut valid = Vec::new();
    for t in &req.topics {
        let topic = super::resolve_topic_for(broker, ctx, Operation::Read, true, t.topic_id, "");
        for p in &t.partitions {
            let key = (t.topic_id, p.partition_index);
            match &topic {
                Ok(topic) if p.partition_index >= 0 && p.partition_index < topic.partitions => {
                    valid.push((t.topic_id, p));
                }
                Ok(_) => {
                    outcomes.insert(key, Some(ResponseError::UnknownTopicOrPartition.code()));
                }
                Err(e) => {
                    outcomes.insert(key, Some(e.code()));
                }
            }
        }
    }
    let (acks, invalid) = acks_of(
        version,
        renew,
        valid.iter().map(|(topic, p)| {
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
            (*topic, p.partition_index, batches)
        }),
    );
    for key in invalid {
        outcomes.insert(key, Some(GroupError::InvalidRequest.code()));
    }
    let request = SessionRequest {
        member_id: member,
        node: ctx.node(broker),
        connection: ctx.share_sessions.connection,
        session_epoch: req.share_session_epoch,
        fetch: None,
        forgotten: Vec::new(),
        acks,
    };
    let settings = settings(broker, &group);
    let lock_ms = i32::try_from(settings.partition.lock_duration_ms).unwrap_or(i32::MAX);
    let answer = match session(broker, &group, request, settings).await {
        Ok(a) => a,
        Err(Refusal { error, message }) => return top(error, message),
    };
    for (topic, partition, result) in answer.acks {
        outcomes.insert((topic, partition), result.err().map(|e| e.error.code()));
    }
    let leader = LeaderIdAndEpoch::default()
        .with_leader_id(ctx.node(broker))
        .with_leader_epoch(LEADER_EPOCH);
    let mut topics: BTreeMap<TopicId, Vec<PartitionData>> = BTreeMap::new();
    for ((topic, partition), error) in outcomes {
        topics.entry(topic).or_default().push(
            PartitionData::default()
                .with_partition_index(partition)
                .with_error_code(error.unwrap_or(0))
                .with_current_leader(leader.clone()),
        );
    }
    ShareAcknowledgeResponse::default()
        .with_acquisition_lock_timeout_ms(lock_ms)
        .with_responses(
            topics
                .into_iter()
                .map(|(topic_id, partitions)| {
                    ShareAcknowledgeTopicResponse::default()
                        .with_topic_id(topic_id)
                        .with_partitions(partitions)
                })
                .collect(),
        )
}
