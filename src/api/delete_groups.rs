//! DeleteGroups (key 42), v0-3: each group answered on its own. Missing or Dead:
//! GROUP_ID_NOT_FOUND; not Empty: NON_EMPTY_GROUP; an empty id: INVALID_GROUP_ID; without
//! DELETE on it: GROUP_AUTHORIZATION_FAILED. Gateway mode: a group koord does not have is
//! deleted upstream if upstream has it (a group with offsets only, as Kafka deletes it). v3 adds
//! an error message per group, which Kafka 4.4 leaves null but for a streams group whose
//! topology plugin failed; koord leaves it null.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use super::check_group_id;
use super::context::RequestContext;
use crate::broker::Broker;
use crate::group::GroupError;
use crate::security::acl::{Operation, ResourceType};

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteGroupsRequest,
    _version: i16,
) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(req.groups_names.len());
    for id in req.groups_names {
        // As Kafka: DELETE on each group, else GROUP_AUTHORIZATION_FAILED for it.
        let result = match check_group_id(&id) {
            Ok(_) if !ctx.may(broker, Operation::Delete, ResourceType::Group, &id) => {
                Err(GroupError::GroupAuthorizationFailed.code())
            }
            Ok(group) => broker.backend.delete_group(broker.local(), group).await,
            Err(e) => Err(e.code()),
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(id)
                .with_error_code(result.err().unwrap_or(0)),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
