//! DescribeAcls (key 29), v1-3: the ACL bindings a filter matches (kafka-acls `--list`),
//! grouped by resource pattern. Needs DESCRIBE on the cluster (else
//! CLUSTER_AUTHORIZATION_FAILED); without an authorizer SECURITY_DISABLED, as in Kafka.

use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse, ResponseKind};
use kafka_protocol::ResponseError;

use super::context::{Outcome, RequestContext};
use crate::api::str_bytes;
use crate::broker::Broker;
use crate::security::acl::{AclFilter, Operation, PatternType, Permission, ResourceType};

pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeAclsRequest,
    _version: i16,
) -> Outcome {
    // Kafka refuses to parse a filter naming an UNKNOWN (code 0) part, and closes.
    if req.resource_type_filter == 0
        || req.pattern_type_filter == 0
        || req.operation == 0
        || req.permission_type == 0
    {
        return Outcome::Close;
    }
    let error = |e: ResponseError, m: &str| {
        DescribeAclsResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(str_bytes(m)))
    };
    let resp = if !ctx.may_cluster(broker, Operation::Describe) {
        error(
            ResponseError::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        )
    } else if !broker.authorizer.is_enabled() {
        error(
            ResponseError::SecurityDisabled,
            "No Authorizer is configured on the broker",
        )
    } else {
        let filter = AclFilter {
            resource_type: ResourceType::from_code(req.resource_type_filter),
            name: req
                .resource_name_filter
                .as_ref()
                .map(|s| s.as_str().to_owned()),
            pattern: PatternType::from_code(req.pattern_type_filter),
            principal: req.principal_filter.as_ref().map(|s| s.as_str().to_owned()),
            host: req.host_filter.as_ref().map(|s| s.as_str().to_owned()),
            operation: Operation::from_code(req.operation),
            permission: Permission::from_code(req.permission_type),
        };
        let acls = broker.authorizer.acls();
        let mut resources: Vec<DescribeAclsResource> = Vec::new();
        for a in acls.matching(&filter) {
            let description = AclDescription::default()
                .with_principal(str_bytes(a.principal.clone()))
                .with_host(str_bytes(a.host.clone()))
                .with_operation(a.operation.code())
                .with_permission_type(a.permission.code());
            // The set is sorted by resource type, pattern type and name first, so one
            // resource's ACLs are adjacent.
            match resources.last_mut() {
                Some(r)
                    if r.resource_type == a.resource_type.code()
                        && r.pattern_type == a.pattern.code()
                        && r.resource_name.as_str() == a.name =>
                {
                    r.acls.push(description)
                }
                _ => resources.push(
                    DescribeAclsResource::default()
                        .with_resource_type(a.resource_type.code())
                        .with_resource_name(str_bytes(a.name.clone()))
                        .with_pattern_type(a.pattern.code())
                        .with_acls(vec![description]),
                ),
            }
        }
        DescribeAclsResponse::default().with_resources(resources)
    };
    Outcome::Respond(Box::new(ResponseKind::DescribeAcls(resp)))
}
