//! SyncGroup (key 14), v0-5. The leader's assignments go to the group; every member's reply is
//! parked until the generation's assignment is installed. v5 carries protocol type and name
//! both ways.

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};

use super::{check_group_id, code, opt_string, str_bytes};
use crate::broker::Broker;
use crate::group::{Generation, MemberId, RequestToken, SyncGroup, SyncReply};

fn response(reply: SyncReply, version: i16) -> SyncGroupResponse {
    let mut resp = SyncGroupResponse::default()
        .with_error_code(code(reply.error))
        .with_assignment(reply.assignment);
    if version >= 5 {
        resp.protocol_type = reply.protocol_type.map(str_bytes);
        resp.protocol_name = reply.protocol_name.map(str_bytes);
    }
    resp
}

pub async fn handle(broker: &Broker, req: SyncGroupRequest, version: i16) -> SyncGroupResponse {
    let group = match check_group_id(&req.group_id) {
        Ok(g) => g,
        Err(e) => return response(SyncReply::error(e), version),
    };
    let sync = SyncGroup {
        token: RequestToken(0),
        member_id: MemberId::new(req.member_id.as_str()),
        instance_id: super::instance_id(&req.group_instance_id),
        generation: Generation(req.generation_id),
        protocol_type: if version >= 5 {
            opt_string(&req.protocol_type)
        } else {
            None
        },
        protocol_name: if version >= 5 {
            opt_string(&req.protocol_name)
        } else {
            None
        },
        assignments: req
            .assignments
            .into_iter()
            // Copied out, as JoinGroup metadata: kept for the generation, it must not pin the
            // request's read buffer.
            .map(|a| {
                (
                    MemberId::new(a.member_id.as_str()),
                    bytes::Bytes::copy_from_slice(&a.assignment),
                )
            })
            .collect(),
    };
    response(broker.coordinator.sync(group, sync).await, version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::GroupError;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn replies_encode_at_every_version() {
        for v in 0..=5 {
            for reply in [
                SyncReply {
                    error: None,
                    protocol_type: Some("consumer".into()),
                    protocol_name: Some("range".into()),
                    assignment: bytes::Bytes::from_static(b"x"),
                },
                SyncReply::error(GroupError::RebalanceInProgress),
            ] {
                let mut buf = bytes::BytesMut::new();
                response(reply, v).encode(&mut buf, v).unwrap();
            }
        }
    }
}
