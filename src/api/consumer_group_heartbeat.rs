//! ConsumerGroupHeartbeat (key 68), v0-1: the consumer group protocol of KIP-848. Joins,
//! heartbeats and leaves go through one request; the group core ([`crate::group::consumer`])
//! assigns and reconciles. v0 members may send no member id (koord draws one, as Kafka does);
//! v1 members generate their own.
//!
//! Authorization beyond READ on the group (checked before dispatch): a member that names a
//! topic it may not DESCRIBE is refused with TOPIC_AUTHORIZATION_FAILED, as Kafka 4.x does
//! (KAFKA-18813), so that it cannot learn of topics it may not see; and a regular expression
//! resolves only to topics the principal may DESCRIBE (the heartbeat carries that question to
//! the group, [`TopicFilter`]).

use std::sync::Arc;

use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::ResponseError;

use super::join_group::client_host;
use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::group::consumer::{validate, ConsumerHeartbeat, Refusal, TopicFilter};
use crate::group::{GroupId, MemberId};
use crate::security::acl::{Operation, Requester, ResourceType};
use crate::vocab::Partitions;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: ConsumerGroupHeartbeatRequest,
    version: i16,
    client_id: &str,
) -> ConsumerGroupHeartbeatResponse {
    let peer = ctx.peer;
    if req.subscribed_topic_names.as_ref().is_some_and(|names| {
        names
            .iter()
            .any(|n| !ctx.may(broker, Operation::Describe, ResourceType::Topic, n))
    }) {
        return ConsumerGroupHeartbeatResponse::default()
            .with_error_code(ResponseError::TopicAuthorizationFailed.code());
    }
    let mut member_id = req.member_id.to_string();
    if member_id.is_empty() && version == 0 {
        // Kafka's coordinator generates the id of a v0 member (`Uuid.randomUuid().toString()`,
        // 22 characters of URL-safe base64).
        member_id = kafka_uuid(uuid::Uuid::new_v4());
    }
    let hb = ConsumerHeartbeat {
        member_id: MemberId::new(member_id),
        member_epoch: req.member_epoch,
        instance_id: super::instance_id(&req.instance_id),
        rack_id: super::opt_string(&req.rack_id),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: req
            .subscribed_topic_names
            .map(|names| names.iter().map(|n| n.to_string()).collect()),
        subscribed_topic_regex: if version >= 1 {
            super::opt_string(&req.subscribed_topic_regex)
        } else {
            None
        },
        server_assignor: super::opt_string(&req.server_assignor),
        owned: req.topic_partitions.map(|tps| {
            let mut owned = Partitions::new();
            for tp in tps {
                let list = owned.entry(tp.topic_id).or_default();
                list.extend(tp.partitions);
                list.sort_unstable();
                list.dedup();
            }
            owned.retain(|_, l| !l.is_empty());
            owned
        }),
        client_id: client_id.to_string(),
        client_host: client_host(peer),
        describable: broker
            .authorizer
            .is_enabled()
            .then(|| describable(broker, ctx)),
    };
    if hb.member_epoch == 0 {
        tracing::debug!(
            member = %hb.member_id,
            names = ?hb.subscribed_topic_names,
            regex = ?hb.subscribed_topic_regex,
            assignor = ?hb.server_assignor,
            "consumer group join"
        );
    }
    let result = match validate(
        req.group_id.as_str(),
        &hb,
        &broker.coordinator.consumer_config(),
    ) {
        Ok(()) => {
            broker
                .coordinator
                .consumer_heartbeat(GroupId::new(req.group_id.as_str()), hb)
                .await
        }
        Err(refusal) => Err(refusal),
    };
    match result {
        Ok(reply) => ConsumerGroupHeartbeatResponse::default()
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
        Err(Refusal { error, message }) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(error.code())
            .with_error_message(message.map(str_bytes)),
    }
}

/// Whether the request's principal may DESCRIBE a topic, asked by the group when it resolves
/// regular expressions. Holds the broker weakly: the group keeps the filter, and the broker
/// owns the groups.
fn describable(broker: &Arc<Broker>, ctx: &RequestContext) -> TopicFilter {
    let broker = Arc::downgrade(broker);
    let (principal, host) = (ctx.principal.clone(), ctx.peer_host.clone());
    TopicFilter(Arc::new(move |topic: &str| {
        broker.upgrade().is_some_and(|b| {
            let who = Requester {
                principal: principal.as_str(),
                host: &host,
            };
            b.authorizer
                .authorize(who, Operation::Describe, ResourceType::Topic, topic)
        })
    }))
}

/// Kafka's `Uuid.toString()`: URL-safe base64 without padding.
fn kafka_uuid(id: uuid::Uuid) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = id.as_bytes();
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &b)| acc | (u32::from(b) << (16 - 8 * i)));
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_member_ids_look_like_kafkas() {
        let id = kafka_uuid(uuid::Uuid::from_u128(0));
        assert_eq!(id, "AAAAAAAAAAAAAAAAAAAAAA");
        let id = kafka_uuid(uuid::Uuid::from_u128(u128::MAX));
        assert_eq!(id, "_____________________w");
        assert_eq!(id.len(), 22);
    }
}
