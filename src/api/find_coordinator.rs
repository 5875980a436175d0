//! FindCoordinator (key 10): this node coordinates every group and every transactional id. v0-3
//! carry one key; v4+ a batch of keys, each answered on its own.
//!
//! Share (2) coordinators are not hosted here: each such key gets COORDINATOR_NOT_AVAILABLE,
//! which is what a Kafka broker answers while the coordinator for a key is not available, and
//! clients retry it. An unknown key type is INVALID_REQUEST.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use super::str_bytes;
use crate::broker::Broker;
use crate::security::acl::{Operation, ResourceType};

const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;
const SHARE: i8 = 2;

/// The answer for one key: `Ok(())` when this node is its coordinator. As Kafka, the principal
/// must first be allowed to DESCRIBE the group or transactional id.
/// The node that coordinates `key`: this one, or in a cluster the node its group's shard is
/// assigned to (its endpoint on the listener the request came in on).
fn lookup(
    broker: &Broker,
    ctx: &RequestContext,
    key: &str,
    key_type: i8,
) -> Result<(i32, StrBytes, i32), (ResponseError, String)> {
    check(broker, ctx, key, key_type)?;
    let listener = &*ctx.listener;
    let own = || {
        (
            broker.node_id(),
            str_bytes(listener.advertised_host.clone()),
            listener.advertised_port,
        )
    };
    if key_type != GROUP {
        return Ok(own());
    }
    match broker.coordinator.ownership().coordinator(
        key,
        &listener.name,
        broker.coordinator.clock().now(),
    ) {
        Ok(None) => Ok(own()),
        Ok(Some((node, e))) => Ok((node, str_bytes(e.host), e.port)),
        Err(e) => {
            let e = ResponseError::try_from_code(e.code())
                .unwrap_or(ResponseError::CoordinatorNotAvailable);
            Err((e, "the group's shard is moving between koord nodes".into()))
        }
    }
}

fn check(
    broker: &Broker,
    ctx: &RequestContext,
    key: &str,
    key_type: i8,
) -> Result<(), (ResponseError, String)> {
    let may = |rt| ctx.may(broker, Operation::Describe, rt, key);
    match key_type {
        GROUP if !may(ResourceType::Group) => Err((
            ResponseError::GroupAuthorizationFailed,
            ResponseError::GroupAuthorizationFailed.to_string(),
        )),
        TRANSACTION if !may(ResourceType::TransactionalId) => Err((
            ResponseError::TransactionalIdAuthorizationFailed,
            ResponseError::TransactionalIdAuthorizationFailed.to_string(),
        )),
        GROUP if key.is_empty() => Err((ResponseError::InvalidGroupId, "group id is empty".into())),
        GROUP | TRANSACTION => Ok(()),
        SHARE => Err((
            ResponseError::CoordinatorNotAvailable,
            "koord hosts no share coordinator".into(),
        )),
        other => Err((
            ResponseError::InvalidRequest,
            format!("unknown key type {other}"),
        )),
    }
}

/// Answers FindCoordinator with this node on the listener the client came in on.
pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    if version >= 4 {
        let coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key| match lookup(broker, ctx, &key, req.key_type) {
                // Kafka sets no message in a batched answer: the field's default, "".
                Ok((node, host, port)) => Coordinator::default()
                    .with_key(key)
                    .with_node_id(node.into())
                    .with_host(host)
                    .with_port(port)
                    .with_error_message(Some(StrBytes::default())),
                Err((e, msg)) => Coordinator::default()
                    .with_key(key)
                    .with_node_id((-1).into())
                    .with_host(StrBytes::default())
                    .with_port(-1)
                    .with_error_code(e.code())
                    .with_error_message(Some(str_bytes(msg))),
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    // v0 has no key type: it is always a group.
    let key_type = if version >= 1 { req.key_type } else { GROUP };
    let resp = FindCoordinatorResponse::default();
    match lookup(broker, ctx, &req.key, key_type) {
        // Kafka fills the message from its error, Errors.NONE's "NONE" too (v1-3).
        Ok((node, host, port)) => resp
            .with_node_id(node.into())
            .with_host(host)
            .with_port(port)
            .with_error_message(Some(str_bytes("NONE"))),
        Err((e, msg)) => resp
            .with_error_code(e.code())
            .with_node_id((-1).into())
            .with_host(StrBytes::default())
            .with_port(-1)
            .with_error_message(Some(str_bytes(msg))),
    }
}
