//! CreateAcls (key 30), v1-3: adds ACL bindings, as kafka-acls `--add` sends them. Needs ALTER
//! on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every creation); without an authorizer
//! every creation gets SECURITY_DISABLED, as in Kafka. A bad binding gets INVALID_REQUEST with
//! Kafka's reason; the others are stored durably before the answer. A creation carrying a
//! filter-only value (ANY, MATCH) fails the whole request with UNKNOWN_SERVER_ERROR, as in Kafka
//! 4.4.

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use kafka_protocol::ResponseError;

use super::context::{Outcome, RequestContext};
use crate::api::str_bytes;
use crate::broker::Broker;
use crate::security::acl::{Acl, Operation, PatternType, Permission, ResourceType};
use crate::storage::Mutation;

/// The binding a creation asks for.
fn binding(c: &AclCreation) -> Acl {
    Acl {
        resource_type: ResourceType::from_code(c.resource_type),
        pattern: PatternType::from_code(c.resource_pattern_type),
        name: c.resource_name.as_str().to_owned(),
        principal: c.principal.as_str().to_owned(),
        host: c.host.as_str().to_owned(),
        operation: Operation::from_code(c.operation),
        permission: Permission::from_code(c.permission_type),
    }
}

fn failed(e: ResponseError, message: impl Into<String>) -> AclCreationResult {
    AclCreationResult::default()
        .with_error_code(e.code())
        .with_error_message(Some(str_bytes(message)))
}

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: CreateAclsRequest,
    _version: i16,
) -> Outcome {
    // Kafka refuses to parse a request naming an UNKNOWN (code 0) part, and closes.
    if req.creations.iter().any(|c| {
        c.resource_type == 0
            || c.resource_pattern_type == 0
            || c.operation == 0
            || c.permission_type == 0
    }) {
        return Outcome::Close;
    }
    let answer = |results: Vec<AclCreationResult>| {
        Outcome::Respond(Box::new(
            kafka_protocol::messages::ResponseKind::CreateAcls(
                CreateAclsResponse::default().with_results(results),
            ),
        ))
    };
    let all =
        |e: ResponseError, m: &str| answer(req.creations.iter().map(|_| failed(e, m)).collect());
    if let Some((e, message)) = super::authz::acl_change_refused(broker, ctx) {
        return all(e, message);
    }
    // A binding with a filter-only value (resource type ANY, pattern ANY or MATCH, operation
    // or permission ANY) makes Kafka 4.4 fail the whole request with UNKNOWN_SERVER_ERROR and
    // no message (its binding constructors throw); koord answers the same.
    if req.creations.iter().map(binding).any(|a| {
        a.resource_type == ResourceType::Any
            || matches!(a.pattern, PatternType::Any | PatternType::Match)
            || a.operation == Operation::Any
            || a.permission == Permission::Any
    }) {
        let crashed = AclCreationResult::default()
            .with_error_code(ResponseError::UnknownServerError.code())
            .with_error_message(None);
        return answer(req.creations.iter().map(|_| crashed.clone()).collect());
    }
    let _writes = broker.authorizer.writes.lock().await;
    let mut results = Vec::with_capacity(req.creations.len());
    let mut added: Vec<Acl> = Vec::new();
    for c in &req.creations {
        let acl = binding(c);
        match acl.validate() {
            Err(e) => results.push(failed(ResponseError::InvalidRequest, e.0)),
            Ok(()) => {
                if !broker.authorizer.acls().contains(&acl) && !added.contains(&acl) {
                    added.push(acl);
                }
                results.push(AclCreationResult::default());
            }
        }
    }
    if !added.is_empty() {
        let batch = added.iter().cloned().map(Mutation::PutAcl).collect();
        if let Err(e) = broker.storage.write(batch).await {
            tracing::warn!("ACLs not stored: {e}");
            return all(
                ResponseError::UnknownServerError,
                "the ACLs could not be stored",
            );
        }
        broker.authorizer.apply(&added, &[]);
        tracing::info!(principal = %ctx.principal, added = added.len(), "ACLs created");
    }
    answer(results)
}
