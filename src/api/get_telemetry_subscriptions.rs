//! GetTelemetrySubscriptions (key 71), v0: what a client is to push (KIP-714), as Kafka 4.4's
//! `ClientMetricsManager` answers with koord's one subscription ([`crate::telemetry`]): a new
//! instance id for a client without one, the metric prefixes, the push interval, the accepted
//! compression types (zstd, lz4, gzip, snappy) and the largest push; THROTTLING_QUOTA_EXCEEDED
//! for a request within a push interval of the last one.

use kafka_protocol::messages::{
    GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse,
};

use super::context::RequestContext;
use crate::api::str_bytes;
use crate::broker::Broker;
use crate::telemetry::{ClientMeta, ACCEPTED_COMPRESSION};

/// Who the client is, for a new instance.
pub(crate) fn meta(ctx: &RequestContext, client_id: &str) -> ClientMeta {
    ClientMeta {
        client_id: client_id.to_string(),
        address: ctx.peer.to_string(),
        ..ClientMeta::default()
    }
}

pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: GetTelemetrySubscriptionsRequest,
    client_id: &str,
) -> GetTelemetrySubscriptionsResponse {
    let now = broker.telemetry.now_ms();
    let answer = broker.telemetry.clients().subscribe(
        req.client_instance_id,
        uuid::Uuid::new_v4(),
        || meta(ctx, client_id),
        now,
    );
    match answer {
        Ok(s) => GetTelemetrySubscriptionsResponse::default()
            .with_client_instance_id(s.client_instance_id)
            .with_subscription_id(s.subscription_id)
            .with_accepted_compression_types(ACCEPTED_COMPRESSION.to_vec())
            .with_push_interval_ms(s.push_interval_ms)
            .with_telemetry_max_bytes(s.max_bytes)
            .with_delta_temporality(false)
            .with_requested_metrics(s.metrics.into_iter().map(str_bytes).collect()),
        Err((code, _message)) => {
            GetTelemetrySubscriptionsResponse::default().with_error_code(code.code())
        }
    }
}
