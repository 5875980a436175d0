//! DescribeCluster (key 60): one broker, which is also the controller. Asking for controller
//! endpoints (v1+ endpoint type 2) from a broker is MISMATCHED_ENDPOINT_TYPE, as in Kafka.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use super::{str_bytes, AUTHORIZED_OPERATIONS_OMITTED};
use crate::broker::Broker;
use crate::security::acl::{Operation, ResourceType, CLUSTER_NAME};

const BROKERS: i8 = 1;

/// Answers DescribeCluster with this node on the listener the client came in on. As Kafka, it
/// needs no permission; the cluster's authorized operations are 0 without DESCRIBE on it.
pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeClusterRequest,
    version: i16,
) -> DescribeClusterResponse {
    let listener = &*ctx.listener;
    let mut resp = DescribeClusterResponse::default()
        .with_cluster_id(str_bytes(broker.cluster_id.clone()))
        .with_cluster_authorized_operations(if req.include_cluster_authorized_operations {
            if ctx.may_cluster(broker, Operation::Describe) {
                ctx.operations(broker, ResourceType::Cluster, CLUSTER_NAME)
            } else {
                0
            }
        } else {
            AUTHORIZED_OPERATIONS_OMITTED
        });
    if version >= 1 && req.endpoint_type != BROKERS {
        resp.endpoint_type = BROKERS;
        return resp
            .with_error_code(ResponseError::MismatchedEndpointType.code())
            .with_error_message(Some(str_bytes("The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER")))
            .with_controller_id(BrokerId(-1));
    }
    let node = BrokerId(broker.node_id());
    resp.with_controller_id(node)
        .with_brokers(vec![DescribeClusterBroker::default()
            .with_broker_id(node)
            .with_host(str_bytes(listener.advertised_host.clone()))
            .with_port(listener.advertised_port)])
}
