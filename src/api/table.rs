//! THE table of supported APIs and version ranges, and the dispatch from a decoded request to
//! its API module. The same table builds the ApiVersions response, so nothing is advertised that
//! is not served and nothing is served that is not advertised. The server decodes only what this
//! table serves and hands it to [`dispatch`].

use std::net::SocketAddr;
use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};

use crate::api;
use crate::broker::Broker;
use crate::security::{Listener, Principal};

/// One supported API: its key and the versions served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Supported {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
}

const fn api(key: ApiKey, min: i16, max: i16) -> Supported {
    Supported { key, min, max }
}

/// Every API koord serves, with the versions Apache Kafka 4.x accepts (as far as the
/// kafka-protocol crate encodes them).
pub const SUPPORTED: &[Supported] = &[
    api(ApiKey::Produce, 3, 13),
    api(ApiKey::Fetch, 4, 18),
    api(ApiKey::ListOffsets, 1, 10),
    api(ApiKey::Metadata, 0, 13),
    api(ApiKey::FindCoordinator, 0, 6),
    api(ApiKey::ApiVersions, 0, 4),
    api(ApiKey::CreateTopics, 2, 7),
    api(ApiKey::DeleteTopics, 1, 6),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::DeleteRecords, 0, 2),
    api(ApiKey::InitProducerId, 0, 5),
    api(ApiKey::AddPartitionsToTxn, 0, 3),
    api(ApiKey::AddOffsetsToTxn, 0, 4),
    api(ApiKey::EndTxn, 0, 4),
    api(ApiKey::TxnOffsetCommit, 0, 4),
    api(ApiKey::OffsetForLeaderEpoch, 2, 4),
    api(ApiKey::DescribeCluster, 0, 2),
    api(ApiKey::DescribeConfigs, 1, 4),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    api(ApiKey::JoinGroup, 0, 9),
    api(ApiKey::SyncGroup, 0, 5),
    api(ApiKey::Heartbeat, 0, 4),
    api(ApiKey::LeaveGroup, 0, 5),
    api(ApiKey::OffsetCommit, 2, 9),
    api(ApiKey::OffsetFetch, 1, 9),
    api(ApiKey::OffsetDelete, 0, 0),
    api(ApiKey::DescribeGroups, 0, 6),
    api(ApiKey::ListGroups, 0, 5),
    api(ApiKey::DeleteGroups, 0, 2),
    api(ApiKey::ConsumerGroupHeartbeat, 0, 1),
    api(ApiKey::ConsumerGroupDescribe, 0, 1),
    api(ApiKey::StreamsGroupHeartbeat, 0, 1),
    api(ApiKey::StreamsGroupDescribe, 0, 1),
    // Transaction admin, Kafka 4.4's full ranges.
    api(ApiKey::DescribeProducers, 0, 0),
    api(ApiKey::DescribeTransactions, 0, 0),
    api(ApiKey::ListTransactions, 0, 2),
    // Answered by the connection's session (src/security/session.rs), on every listener as
    // Kafka advertises them: ILLEGAL_SASL_STATE where there is nothing to authenticate.
    api(ApiKey::SaslHandshake, 0, 1),
    api(ApiKey::SaslAuthenticate, 0, 2),
    api(ApiKey::DescribeUserScramCredentials, 0, 0),
    api(ApiKey::AlterUserScramCredentials, 0, 0),
    api(ApiKey::DescribeAcls, 1, 3),
    api(ApiKey::CreateAcls, 1, 3),
    api(ApiKey::DeleteAcls, 1, 3),
];

/// The served range for `key`, if it is served at all.
pub fn supported(key: ApiKey) -> Option<Supported> {
    SUPPORTED.iter().copied().find(|s| s.key == key)
}

/// Whether `version` of `key` is served.
pub fn is_supported(key: ApiKey, version: i16) -> bool {
    supported(key).is_some_and(|s| (s.min..=s.max).contains(&version))
}

/// What the connection does after a request.
#[derive(Debug)]
pub enum Outcome {
    /// Write this response.
    Respond(Box<ResponseKind>),
    /// Write nothing (Produce with acks=0), read the next request.
    Silent,
    /// Close the connection.
    Close,
}

/// Who sent a request, and over what: what every API may need beyond the request itself.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The client's address (JoinGroup records it as the member's host).
    pub peer: SocketAddr,
    /// The listener the client came in on: Metadata, FindCoordinator and DescribeCluster
    /// advertise it.
    pub listener: Arc<Listener>,
    /// Whom the connection authenticated as (ANONYMOUS without authentication).
    pub principal: Principal,
    /// The client's IP address as ACL hosts name it, made once per connection for the
    /// authorizer.
    pub peer_host: Arc<str>,
}

impl RequestContext {
    /// A context for `peer` on a PLAINTEXT listener advertising `broker`'s address.
    pub fn plaintext(broker: &Broker, peer: SocketAddr) -> RequestContext {
        RequestContext {
            peer,
            peer_host: peer.ip().to_string().into(),
            listener: Arc::new(Listener {
                name: "PLAINTEXT".into(),
                protocol: crate::security::SecurityProtocol::Plaintext,
                bind_host: broker.advertised_host.clone(),
                bind_port: u16::try_from(broker.advertised_port).unwrap_or(0),
                advertised_host: broker.advertised_host.clone(),
                advertised_port: broker.advertised_port,
            }),
            principal: Principal::anonymous(),
        }
    }
}

/// Runs one request.
pub async fn dispatch(
    broker: &Arc<Broker>,
    header: &RequestHeader,
    ctx: &RequestContext,
    request: Box<RequestKind>,
) -> Outcome {
    let peer = ctx.peer;
    let v = header.request_api_version;
    let client_id = header.client_id.as_deref().unwrap_or("");
    if let Some(denied) = api::authz::deny_request(broker, ctx, v, &request) {
        return Outcome::Respond(Box::new(denied));
    }
    Outcome::Respond(Box::new(match *request {
        RequestKind::CreateAcls(r) => return api::create_acls::handle(broker, ctx, r, v).await,
        RequestKind::DescribeAcls(r) => return api::describe_acls::handle(broker, ctx, r, v),
        RequestKind::DeleteAcls(r) => return api::delete_acls::handle(broker, ctx, r, v).await,
        // acks=0 answers nothing, or closes the connection on a failure.
        RequestKind::Produce(r) => return api::produce::handle(broker, ctx, r, v),
        RequestKind::Fetch(r) => ResponseKind::Fetch(api::fetch::handle(broker, ctx, r, v).await),
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(api::list_offsets::handle(broker, ctx, r, v))
        }
        RequestKind::OffsetForLeaderEpoch(r) => ResponseKind::OffsetForLeaderEpoch(
            api::offset_for_leader_epoch::handle(broker, ctx, r, v),
        ),
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(api::init_producer_id::handle(broker, r, v).await)
        }
        RequestKind::AddPartitionsToTxn(r) => ResponseKind::AddPartitionsToTxn(
            api::add_partitions_to_txn::handle(broker, ctx, r, v).await,
        ),
        RequestKind::AddOffsetsToTxn(r) => {
            ResponseKind::AddOffsetsToTxn(api::add_offsets_to_txn::handle(broker, r, v).await)
        }
        RequestKind::EndTxn(r) => ResponseKind::EndTxn(api::end_txn::handle(broker, r, v).await),
        RequestKind::TxnOffsetCommit(r) => {
            ResponseKind::TxnOffsetCommit(api::txn_offset_commit::handle(broker, ctx, r, v).await)
        }
        RequestKind::ApiVersions(r) => ResponseKind::ApiVersions(api::api_versions::handle(&r, v)),
        RequestKind::Metadata(r) => {
            ResponseKind::Metadata(api::metadata::handle(broker, ctx, r, v))
        }
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(api::find_coordinator::handle(broker, ctx, r, v))
        }
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(api::create_topics::handle(broker, ctx, r, v).await)
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(api::delete_topics::handle(broker, ctx, r, v).await)
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(api::create_partitions::handle(broker, ctx, r, v).await)
        }
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(api::delete_records::handle(broker, ctx, r, v))
        }
        RequestKind::DescribeCluster(r) => {
            ResponseKind::DescribeCluster(api::describe_cluster::handle(broker, ctx, r, v))
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(api::describe_configs::handle(broker, ctx, r, v))
        }
        RequestKind::AlterConfigs(r) => {
            ResponseKind::AlterConfigs(api::alter_configs::handle(broker, ctx, r, v).await)
        }
        RequestKind::IncrementalAlterConfigs(r) => ResponseKind::IncrementalAlterConfigs(
            api::incremental_alter_configs::handle(broker, ctx, r, v).await,
        ),
        RequestKind::JoinGroup(r) => {
            ResponseKind::JoinGroup(api::join_group::handle(broker, r, v, client_id, peer).await)
        }
        RequestKind::SyncGroup(r) => {
            ResponseKind::SyncGroup(api::sync_group::handle(broker, r, v).await)
        }
        RequestKind::Heartbeat(r) => {
            ResponseKind::Heartbeat(api::heartbeat::handle(broker, r, v).await)
        }
        RequestKind::LeaveGroup(r) => {
            ResponseKind::LeaveGroup(api::leave_group::handle(broker, r, v).await)
        }
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(api::offset_commit::handle(broker, ctx, r, v).await)
        }
        RequestKind::OffsetFetch(r) => {
            ResponseKind::OffsetFetch(api::offset_fetch::handle(broker, ctx, r, v).await)
        }
        RequestKind::OffsetDelete(r) => {
            ResponseKind::OffsetDelete(api::offset_delete::handle(broker, ctx, r, v).await)
        }
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(api::describe_groups::handle(broker, ctx, r, v).await)
        }
        RequestKind::ListGroups(r) => {
            ResponseKind::ListGroups(api::list_groups::handle(broker, ctx, r, v).await)
        }
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(api::delete_groups::handle(broker, ctx, r, v).await)
        }
        RequestKind::ConsumerGroupHeartbeat(r) => ResponseKind::ConsumerGroupHeartbeat(
            api::consumer_group_heartbeat::handle(broker, ctx, r, v, client_id).await,
        ),
        RequestKind::ConsumerGroupDescribe(r) => ResponseKind::ConsumerGroupDescribe(
            api::consumer_group_describe::handle(broker, ctx, r, v).await,
        ),
        RequestKind::StreamsGroupHeartbeat(r) => ResponseKind::StreamsGroupHeartbeat(
            api::streams_group_heartbeat::handle(broker, ctx, r, v, client_id).await,
        ),
        RequestKind::StreamsGroupDescribe(r) => ResponseKind::StreamsGroupDescribe(
            api::streams_group_describe::handle(broker, ctx, r, v).await,
        ),
        RequestKind::DescribeProducers(r) => {
            ResponseKind::DescribeProducers(api::describe_producers::handle(broker, ctx, r, v))
        }
        RequestKind::DescribeTransactions(r) => ResponseKind::DescribeTransactions(
            api::describe_transactions::handle(broker, ctx, r, v),
        ),
        RequestKind::ListTransactions(r) => {
            ResponseKind::ListTransactions(api::list_transactions::handle(broker, ctx, r, v))
        }
        // The connection's session answers these; here only when it did not (no session).
        RequestKind::SaslHandshake(_) => ResponseKind::SaslHandshake(
            kafka_protocol::messages::SaslHandshakeResponse::default()
                .with_error_code(kafka_protocol::ResponseError::IllegalSaslState.code()),
        ),
        RequestKind::SaslAuthenticate(_) => ResponseKind::SaslAuthenticate(
            kafka_protocol::messages::SaslAuthenticateResponse::default()
                .with_error_code(kafka_protocol::ResponseError::IllegalSaslState.code()),
        ),
        RequestKind::DescribeUserScramCredentials(r) => ResponseKind::DescribeUserScramCredentials(
            api::describe_user_scram_credentials::handle(broker, r, v),
        ),
        RequestKind::AlterUserScramCredentials(r) => ResponseKind::AlterUserScramCredentials(
            api::alter_user_scram_credentials::handle(broker, r, v).await,
        ),
        // The codec only hands over requests whose key is in SUPPORTED, so this arm means the
        // table and this match disagree: a bug, answered by closing the connection.
        other => {
            tracing::error!(
                api = header.request_api_key,
                "supported API without a handler"
            );
            drop(other);
            return Outcome::Close;
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_within_what_the_crate_encodes() {
        for s in SUPPORTED {
            let crate_range = s.key.valid_versions();
            assert!(
                crate_range.min <= s.min && s.max <= crate_range.max && s.min <= s.max,
                "{:?} {}..={} outside the crate's {}..={}",
                s.key,
                s.min,
                s.max,
                crate_range.min,
                crate_range.max
            );
        }
    }

    #[test]
    fn table_has_no_duplicates() {
        for (i, a) in SUPPORTED.iter().enumerate() {
            assert!(
                SUPPORTED[i + 1..].iter().all(|b| b.key != a.key),
                "{:?}",
                a.key
            );
        }
    }
}
