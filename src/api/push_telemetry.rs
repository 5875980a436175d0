//! PushTelemetry (key 72), v0: a client's metrics (KIP-714), checked as Kafka 4.4's
//! `ClientMetricsManager` checks a push (an unknown or reserved instance id: INVALID_REQUEST; a
//! push within the interval: THROTTLING_QUOTA_EXCEEDED; another subscription id:
//! UNKNOWN_SUBSCRIPTION_ID; an unknown compression type: UNSUPPORTED_COMPRESSION_TYPE; more than
//! `telemetry.max.bytes`: TELEMETRY_TOO_LARGE; anything after a terminating push:
//! INVALID_REQUEST), then decompressed (to at most the same size, tenfold) and decoded as OTLP
//! metrics: what cannot be read is INVALID_RECORD, as when Kafka's exporter plugin fails.

use kafka_protocol::messages::{PushTelemetryRequest, PushTelemetryResponse};
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use super::get_telemetry_subscriptions::meta;
use crate::broker::Broker;
use crate::telemetry::{otlp, Push};

pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: PushTelemetryRequest,
    client_id: &str,
) -> PushTelemetryResponse {
    let telemetry = &broker.telemetry;
    let now = telemetry.now_ms();
    let id = req.client_instance_id;
    let push = Push {
        id,
        subscription_id: req.subscription_id,
        terminating: req.terminating,
        compression: req.compression_type,
        len: req.metrics.len(),
    };
    let checked = telemetry
        .clients()
        .push(&push, || meta(ctx, client_id), now);
    if let Err((code, _message)) = checked {
        return PushTelemetryResponse::default().with_error_code(code.code());
    }
    if req.metrics.is_empty() {
        return PushTelemetryResponse::default();
    }
    let cap = broker.config.telemetry_max_bytes as usize * 10;
    let pushed =
        crate::log::records::decompress(&req.metrics, i16::from(req.compression_type), cap)
            .ok()
            .and_then(|plain| otlp::decode(&plain).ok());
    let ok = pushed.is_some();
    telemetry.clients().record(id, pushed, now);
    if ok {
        PushTelemetryResponse::default()
    } else {
        PushTelemetryResponse::default().with_error_code(ResponseError::InvalidRecord.code())
    }
}
