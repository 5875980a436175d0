//! DeleteAcls (key 31), v1-3: deletes the ACL bindings each filter matches (kafka-acls
//! `--remove`) and lists them per filter. Needs ALTER on the cluster (else
//! CLUSTER_AUTHORIZATION_FAILED for every filter); without an authorizer SECURITY_DISABLED, as
//! in Kafka. A filter with an unknown part gets INVALID_REQUEST. The deletions are durable
//! before the answer.

use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse, ResponseKind};
use kafka_protocol::ResponseError;

use super::context::{Outcome, RequestContext};
use crate::api::str_bytes;
use crate::broker::Broker;
use crate::security::acl::{Acl, AclFilter, Operation, PatternType, Permission, ResourceType};
use crate::storage::Mutation;

fn filter(f: &DeleteAclsFilter) -> AclFilter {
    AclFilter {
        resource_type: ResourceType::from_code(f.resource_type_filter),
        name: f
            .resource_name_filter
            .as_ref()
            .map(|s| s.as_str().to_owned()),
        pattern: PatternType::from_code(f.pattern_type_filter),
        principal: f.principal_filter.as_ref().map(|s| s.as_str().to_owned()),
        host: f.host_filter.as_ref().map(|s| s.as_str().to_owned()),
        operation: Operation::from_code(f.operation),
        permission: Permission::from_code(f.permission_type),
    }
}

fn failed(e: ResponseError, message: &str) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult::default()
        .with_error_code(e.code())
        .with_error_message(Some(str_bytes(message)))
}

fn matching(a: &Acl) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(a.resource_type.code())
        .with_resource_name(str_bytes(a.name.clone()))
        .with_pattern_type(a.pattern.code())
        .with_principal(str_bytes(a.principal.clone()))
        .with_host(str_bytes(a.host.clone()))
        .with_operation(a.operation.code())
        .with_permission_type(a.permission.code())
}

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteAclsRequest,
    _version: i16,
) -> Outcome {
    // Kafka refuses to parse a filter naming an UNKNOWN (code 0) part, and closes.
    if req.filters.iter().any(|f| {
        f.resource_type_filter == 0
            || f.pattern_type_filter == 0
            || f.operation == 0
            || f.permission_type == 0
    }) {
        return Outcome::Close;
    }
    let answer = |results: Vec<DeleteAclsFilterResult>| {
        Outcome::Respond(Box::new(ResponseKind::DeleteAcls(
            DeleteAclsResponse::default().with_filter_results(results),
        )))
    };
    let all =
        |e: ResponseError, m: &str| answer(req.filters.iter().map(|_| failed(e, m)).collect());
    if let Some((e, message)) = super::authz::acl_change_refused(broker, ctx) {
        return all(e, message);
    }
    let _writes = broker.authorizer.writes.lock().await;
    let mut removed: Vec<Acl> = Vec::new();
    let mut results = Vec::with_capacity(req.filters.len());
    {
        let acls = broker.authorizer.acls();
        for f in req.filters.iter().map(filter) {
            if f.is_unknown() {
                let what = if f.resource_type == ResourceType::Unknown
                    || f.pattern == PatternType::Unknown
                {
                    "Unknown patternFilter."
                } else {
                    "Unknown entryFilter."
                };
                results.push(failed(ResponseError::InvalidRequest, what));
                continue;
            }
            let found: Vec<Acl> = acls.matching(&f).cloned().collect();
            for a in &found {
                if !removed.contains(a) {
                    removed.push(a.clone());
                }
            }
            results.push(
                DeleteAclsFilterResult::default()
                    .with_matching_acls(found.iter().map(matching).collect()),
            );
        }
    }
    if !removed.is_empty() {
        let batch = removed.iter().cloned().map(Mutation::DeleteAcl).collect();
        if let Err(e) = broker.storage.write(batch).await {
            tracing::warn!("ACL deletions not stored: {e}");
            return all(
                ResponseError::UnknownServerError,
                "the ACLs could not be deleted",
            );
        }
        broker.authorizer.apply(&[], &removed);
        tracing::info!(principal = %ctx.principal, removed = removed.len(), "ACLs deleted");
    }
    answer(results)
}
