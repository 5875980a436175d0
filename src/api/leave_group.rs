//! LeaveGroup (key 13), v0-5. v0-2 name one member and answer with one error; v3+ batch members
//! (by member id, or by instance id for administrative removal) and answer each one, so one bad
//! entry does not fail the others.

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use super::{check_group_id, code, opt_string, str_bytes};
use crate::broker::Broker;
use crate::group::{LeaveGroup, LeaveOutcome, LeavingMember, MemberId};

fn response(outcome: LeaveOutcome, version: i16) -> LeaveGroupResponse {
    if version < 3 {
        return LeaveGroupResponse::default().with_error_code(code(outcome.single_member_error()));
    }
    LeaveGroupResponse::default()
        .with_error_code(code(outcome.error))
        .with_members(
            outcome
                .members
                .into_iter()
                .map(|m| {
                    MemberResponse::default()
                        .with_member_id(str_bytes(m.member_id.as_str()))
                        .with_group_instance_id(m.instance_id.map(|i| str_bytes(i.0)))
                        .with_error_code(code(m.error))
                })
                .collect(),
        )
}

pub async fn handle(broker: &Broker, req: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    let group = match check_group_id(&req.group_id) {
        Ok(g) => g,
        Err(e) => {
            return response(
                LeaveOutcome {
                    error: Some(e),
                    members: Vec::new(),
                },
                version,
            )
        }
    };
    let members = if version < 3 {
        vec![LeavingMember {
            member_id: MemberId::new(req.member_id.as_str()),
            instance_id: None,
            reason: None,
        }]
    } else {
        req.members
            .iter()
            .map(|m| LeavingMember {
                member_id: MemberId::new(m.member_id.as_str()),
                instance_id: super::instance_id(&m.group_instance_id),
                reason: opt_string(&m.reason),
            })
            .collect()
    };
    let outcome = broker
        .coordinator
        .leave(group, LeaveGroup { members })
        .await;
    response(outcome, version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::{GroupError, LeaveMemberResult};
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn v0_to_2_report_the_member_error_at_top_level() {
        let outcome = LeaveOutcome {
            error: None,
            members: vec![LeaveMemberResult {
                member_id: MemberId::new("m"),
                instance_id: None,
                error: Some(GroupError::UnknownMemberId),
            }],
        };
        for v in 0..=5 {
            let resp = response(outcome.clone(), v);
            if v < 3 {
                assert_eq!(resp.error_code, GroupError::UnknownMemberId.code());
            } else {
                assert_eq!(resp.error_code, 0);
                assert_eq!(
                    resp.members[0].error_code,
                    GroupError::UnknownMemberId.code()
                );
            }
            let mut buf = bytes::BytesMut::new();
            resp.encode(&mut buf, v).unwrap();
        }
    }
}
