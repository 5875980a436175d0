//! AlterClientQuotas (key 49), v0-1: sets and removes client quotas, what `kafka-configs
//! --alter --add-config producer_byte_rate=1024 --entity-type clients --entity-name app`
//! sends. ALTER_CONFIGS on the cluster is checked first (CLUSTER_AUTHORIZATION_FAILED for
//! every entry). Each entity is checked as Kafka 4.4's controller checks it
//! (`ClientQuotaControlManager`: INVALID_REQUEST with its message) and answered once; the
//! valid ones are stored in one durable write before the answer (unless `validate_only`),
//! then enforced.

use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use kafka_protocol::ResponseError;

use crate::api::str_bytes;
use crate::broker::Broker;
use crate::quota::Alteration;

/// Whether an ip entity's name is an address, or a host name that resolves (Kafka's
/// `InetAddress.getByName`).
async fn resolves(host: &str) -> bool {
    host.parse::<std::net::IpAddr>().is_ok()
        || tokio::net::lookup_host((host, 0))
            .await
            .is_ok_and(|mut a| a.next().is_some())
}

pub async fn handle(
    broker: &Broker,
    req: AlterClientQuotasRequest,
    _version: i16,
) -> AlterClientQuotasResponse {
    let alterations: Vec<Alteration> = req
        .entries
        .iter()
        .map(|e| Alteration {
            entity: e
                .entity
                .iter()
                .map(|p| {
                    (
                        p.entity_type.to_string(),
                        p.entity_name.as_ref().map(|n| n.to_string()),
                    )
                })
                .collect(),
            ops: e
                .ops
                .iter()
                .map(|o| (o.key.to_string(), (!o.remove).then_some(o.value)))
                .collect(),
        })
        .collect();
    // The ip names, resolved before the table is read (a lookup may take a while).
    let mut resolvable = Vec::new();
    for a in &alterations {
        for (t, n) in &a.entity {
            if let (true, Some(host)) = (t == "ip", n) {
                if !resolvable.iter().any(|(h, _): &(String, bool)| h == host) {
                    resolvable.push((host.clone(), resolves(host).await));
                }
            }
        }
    }
    let resolves = |h: &str| resolvable.iter().any(|(host, ok)| host == h && *ok);
    let _writes = broker.quotas.writes.lock().await;
    let (results, changes) = broker.quotas.table().alter(&alterations, resolves);
    let stored = if req.validate_only {
        Ok(())
    } else {
        broker.change_client_quotas(changes).await
    };
    let entries = results
        .into_iter()
        .map(|(entity, result)| {
            let entry = EntryData::default().with_entity(
                entity
                    .into_iter()
                    .map(|(t, n)| {
                        EntityData::default()
                            .with_entity_type(str_bytes(t))
                            .with_entity_name(n.map(str_bytes))
                    })
                    .collect(),
            );
            match (&result, &stored) {
                (Err(invalid), _) => entry
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(str_bytes(invalid.0.clone()))),
                (Ok(()), Err(e)) => entry
                    .with_error_code(ResponseError::UnknownServerError.code())
                    .with_error_message(Some(str_bytes(format!("not stored: {e}")))),
                (Ok(()), Ok(())) => entry.with_error_message(None),
            }
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}
