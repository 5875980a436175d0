//! Heartbeat (key 12), v0-4: keeps a member's session alive and tells it when to rejoin
//! (REBALANCE_IN_PROGRESS).

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::check_group_id;
use crate::broker::Broker;
use crate::group::{Generation, Heartbeat, MemberId};

pub async fn handle(broker: &Broker, req: HeartbeatRequest, _version: i16) -> HeartbeatResponse {
    let result = match check_group_id(&req.group_id) {
        Ok(group) => {
            let hb = Heartbeat {
                member_id: MemberId::new(req.member_id.as_str()),
                instance_id: super::instance_id(&req.group_instance_id),
                generation: Generation(req.generation_id),
            };
            broker.coordinator.heartbeat(group, hb).await
        }
        Err(e) => Err(e),
    };
    HeartbeatResponse::default().with_error_code(result.err().map_or(0, |e| e.code()))
}
