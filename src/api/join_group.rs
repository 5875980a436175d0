//! JoinGroup (key 11), v0-9. Stateless checks first, in Kafka's order (`GroupCoordinatorService`):
//! an empty group id is INVALID_GROUP_ID, a session timeout outside
//! `group.{min,max}.session.timeout.ms` is INVALID_SESSION_TIMEOUT. Version quirks are normalised
//! here: v0 has no rebalance timeout (the session timeout stands in), v4+ asks a dynamic member
//! without an id to rejoin with one (MEMBER_ID_REQUIRED), v9 replies may skip the assignment.

use std::net::SocketAddr;

use bytes::Bytes;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};

use super::{check_group_id, code, opt_string, str_bytes};
use crate::broker::Broker;
use crate::group::{GroupError, JoinGroup, JoinReply, MemberId, Protocol, RequestToken};

/// Kafka's `client_host`: the peer address as Java's `InetAddress.toString()` prints it.
pub(crate) fn client_host(peer: SocketAddr) -> String {
    format!("/{}", peer.ip())
}

fn response(reply: JoinReply, version: i16) -> JoinGroupResponse {
    let mut resp = JoinGroupResponse::default()
        .with_error_code(code(reply.error))
        .with_generation_id(reply.generation.0)
        .with_leader(str_bytes(reply.leader.as_str()))
        .with_member_id(str_bytes(reply.member_id.as_str()))
        .with_members(
            reply
                .members
                .into_iter()
                .map(|m| {
                    JoinGroupResponseMember::default()
                        .with_member_id(str_bytes(m.member_id.as_str()))
                        // v0-4 cannot carry it; a static member in a group with an older
                        // leader is still described by its member id.
                        .with_group_instance_id(
                            m.instance_id
                                .filter(|_| version >= 5)
                                .map(|i| str_bytes(i.0)),
                        )
                        .with_metadata(m.metadata)
                })
                .collect(),
        );
    // v0-6 carry a non-nullable protocol name: "" stands for none, as in Kafka.
    resp.protocol_name = match reply.protocol_name {
        Some(p) => Some(str_bytes(p)),
        None if version < 7 => Some(str_bytes("")),
        None => None,
    };
    if version >= 7 {
        resp.protocol_type = reply.protocol_type.map(str_bytes);
    }
    if version >= 9 {
        resp.skip_assignment = reply.skip_assignment;
    }
    resp
}

fn error(e: GroupError, member_id: &str, version: i16) -> JoinGroupResponse {
    response(JoinReply::error(e, MemberId::new(member_id)), version)
}

pub async fn handle(
    broker: &Broker,
    req: JoinGroupRequest,
    version: i16,
    client_id: &str,
    peer: SocketAddr,
) -> JoinGroupResponse {
    let group = match check_group_id(&req.group_id) {
        Ok(g) => g,
        Err(e) => return error(e, &req.member_id, version),
    };
    let config = &broker.config;
    let session = req.session_timeout_ms;
    if session < 0
        || (session as u64) < config.group_min_session_timeout_ms
        || (session as u64) > config.group_max_session_timeout_ms
    {
        return error(GroupError::InvalidSessionTimeout, &req.member_id, version);
    }
    let rebalance = if version == 0 || req.rebalance_timeout_ms < 0 {
        session
    } else {
        req.rebalance_timeout_ms
    };
    let join = JoinGroup {
        token: RequestToken(0),
        member_id: MemberId::new(req.member_id.as_str()),
        instance_id: super::instance_id(&req.group_instance_id),
        client_id: client_id.to_string(),
        client_host: client_host(peer),
        session_timeout_ms: session as u64,
        rebalance_timeout_ms: rebalance as u64,
        protocol_type: req.protocol_type.as_str().to_string(),
        protocols: req
            .protocols
            .into_iter()
            // Copied out: the group keeps the metadata for the member's lifetime, and a slice
            // of the request would pin the whole read buffer it arrived in.
            .map(|p| Protocol::new(p.name.as_str(), Bytes::copy_from_slice(&p.metadata)))
            .collect(),
        require_known_member_id: version >= 4,
        supports_skip_assignment: version >= 9,
        reason: opt_string(&req.reason),
        member_id_nonce: uuid::Uuid::new_v4().to_string(),
    };
    let reply = broker.coordinator.join(group, join).await;
    response(reply, version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::{Generation, InstanceId, JoinMember};
    use bytes::Bytes;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn replies_encode_at_every_version() {
        for v in 0..=9 {
            let reply = JoinReply {
                error: None,
                generation: Generation(3),
                protocol_type: Some("consumer".into()),
                protocol_name: Some("range".into()),
                leader: MemberId::new("a"),
                skip_assignment: true,
                member_id: MemberId::new("a"),
                members: vec![JoinMember {
                    member_id: MemberId::new("a"),
                    instance_id: Some(InstanceId::new("i")),
                    metadata: Bytes::from_static(b"m"),
                }],
            };
            let mut buf = bytes::BytesMut::new();
            response(reply, v).encode(&mut buf, v).unwrap();
            let mut buf = bytes::BytesMut::new();
            error(GroupError::MemberIdRequired, "c-1", v)
                .encode(&mut buf, v)
                .unwrap();
        }
    }

    #[test]
    fn client_host_looks_like_java() {
        assert_eq!(client_host("127.0.0.1:5".parse().unwrap()), "/127.0.0.1");
    }
}
