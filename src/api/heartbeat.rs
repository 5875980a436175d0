//! Heartbeat (key 12), v0-4: keeps a member's session alive and tells it when to rejoin
//! (REBALANCE_IN_PROGRESS).
//!
//! In two halves, [`submit`] and [`response`], so that a connection can queue every heartbeat a
//! client pipelined before it awaits the first answer (`server::connection`).

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::check_group_id;
use crate::broker::Broker;
use crate::coordinator::HeartbeatSent;
use crate::group::{Generation, Heartbeat, MemberId};

pub async fn handle(broker: &Broker, req: HeartbeatRequest, _version: i16) -> HeartbeatResponse {
    response(submit(broker, &req)).await
}

/// Checks the heartbeat and queues it with its group.
pub fn submit(broker: &Broker, req: &HeartbeatRequest) -> HeartbeatSent {
    match check_group_id(&req.group_id) {
        Ok(group) => {
            let hb = Heartbeat {
                member_id: MemberId::new(req.member_id.as_str()),
                instance_id: super::instance_id(&req.group_instance_id),
                generation: Generation(req.generation_id),
            };
            broker.coordinator.submit_heartbeat(group, hb)
        }
        Err(e) => HeartbeatSent::Answered(Err(e)),
    }
}

/// The answer to a heartbeat [`submit`] took.
pub async fn response(sent: HeartbeatSent) -> HeartbeatResponse {
    let result = sent.answer().await;
    HeartbeatResponse::default().with_error_code(result.err().map_or(0, |e| e.code()))
}
