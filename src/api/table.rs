//! The dispatch from a decoded request to its API module. The server decodes only what
//! [`super::supported::SUPPORTED`] serves and hands it to [`dispatch`].

use std::sync::Arc;

use kafka_protocol::messages::{RequestHeader, RequestKind, ResponseKind};

use super::context::{Outcome, RequestContext};
use crate::api;
use crate::broker::Broker;
use crate::security::acl::{Operation, ResourceType};

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
        RequestKind::Produce(r) => return api::produce::handle(broker, ctx, r, v).await,
        RequestKind::Fetch(r) => {
            let named = r.topics.iter().map(|t| (t.topic.as_str(), t.topic_id));
            warm_offsets_topic(broker, ctx, Operation::Read, named).await;
            ResponseKind::Fetch(api::fetch::handle(broker, ctx, r, v).await)
        }
        RequestKind::ListOffsets(r) => {
            let named = r
                .topics
                .iter()
                .map(|t| (t.name.as_str(), uuid::Uuid::nil()));
            warm_offsets_topic(broker, ctx, Operation::Describe, named).await;
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
        RequestKind::WriteTxnMarkers(r) => {
            ResponseKind::WriteTxnMarkers(api::write_txn_markers::handle(broker, ctx, r, v))
        }
        RequestKind::ApiVersions(r) => {
            let me = api::api_versions::Identity {
                cluster_id: &broker.cluster_id,
                node_id: broker.node_id(),
            };
            ResponseKind::ApiVersions(api::api_versions::handle(&r, v, Some(me)))
        }
        RequestKind::Metadata(r) => {
            ResponseKind::Metadata(api::metadata::handle(broker, ctx, r, v).await)
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
        RequestKind::DescribeTopicPartitions(r) => ResponseKind::DescribeTopicPartitions(
            api::describe_topic_partitions::handle(broker, ctx, r, v),
        ),
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
        RequestKind::StreamsGroupTopologyDescriptionUpdate(r) => {
            ResponseKind::StreamsGroupTopologyDescriptionUpdate(
                api::streams_group_topology_description_update::handle(broker, ctx, r),
            )
        }
        RequestKind::ShareGroupHeartbeat(r) => ResponseKind::ShareGroupHeartbeat(
            api::share_group_heartbeat::handle(broker, ctx, r, v, client_id).await,
        ),
        RequestKind::ShareGroupDescribe(r) => ResponseKind::ShareGroupDescribe(
            api::share_group_describe::handle(broker, ctx, r, v).await,
        ),
        RequestKind::ShareFetch(r) => {
            ResponseKind::ShareFetch(api::share_fetch::handle(broker, ctx, r, v).await)
        }
        RequestKind::ShareAcknowledge(r) => {
            ResponseKind::ShareAcknowledge(api::share_acknowledge::handle(broker, ctx, r, v).await)
        }
        RequestKind::DescribeShareGroupOffsets(r) => ResponseKind::DescribeShareGroupOffsets(
            api::describe_share_group_offsets::handle(broker, ctx, r, v).await,
        ),
        RequestKind::AlterShareGroupOffsets(r) => ResponseKind::AlterShareGroupOffsets(
            api::alter_share_group_offsets::handle(broker, ctx, r, v).await,
        ),
        RequestKind::DeleteShareGroupOffsets(r) => ResponseKind::DeleteShareGroupOffsets(
            api::delete_share_group_offsets::handle(broker, ctx, r, v).await,
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
        RequestKind::GetTelemetrySubscriptions(r) => ResponseKind::GetTelemetrySubscriptions(
            api::get_telemetry_subscriptions::handle(broker, ctx, r, client_id),
        ),
        RequestKind::PushTelemetry(r) => {
            ResponseKind::PushTelemetry(api::push_telemetry::handle(broker, ctx, r, client_id))
        }
        RequestKind::DescribeClientQuotas(r) => {
            ResponseKind::DescribeClientQuotas(api::describe_client_quotas::handle(broker, r, v))
        }
        RequestKind::AlterClientQuotas(r) => {
            ResponseKind::AlterClientQuotas(api::alter_client_quotas::handle(broker, r, v).await)
        }
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

/// Before a read naming `__consumer_offsets` or `__transaction_state` (by name, or by id where
/// the name is empty) that the principal may make (`op` on the topic, as the handler checks
/// it): standalone koord writes them from their first read on
/// ([`Broker::reading_offsets_topic`]). Once written, or where koord does not keep them
/// (gateway and cluster mode), one atomic load and nothing else.
async fn warm_offsets_topic<'a>(
    broker: &Broker,
    ctx: &RequestContext,
    op: Operation,
    named: impl Iterator<Item = (&'a str, uuid::Uuid)>,
) {
    use crate::offsets_topic::{is_written, NAME, TRANSACTION_STATE};
    if !broker.offsets_topic_cold() {
        return;
    }
    let by_id = |id: uuid::Uuid| {
        [NAME, TRANSACTION_STATE].into_iter().find(|name| {
            broker
                .topics
                .id_and_partitions(name)
                .is_some_and(|(internal, _)| internal == id)
        })
    };
    let mut wanted = named.filter_map(|(name, id)| {
        if is_written(name) {
            Some(name)
        } else if name.is_empty() && !id.is_nil() {
            by_id(id)
        } else {
            None
        }
    });
    if wanted.any(|name| ctx.may(broker, op, ResourceType::Topic, name)) {
        broker.reading_offsets_topic().await;
    }
}
