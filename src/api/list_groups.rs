//! ListGroups (key 16), v0-5: every group this node coordinates, optionally filtered by state
//! (v4+, case-insensitive) and by type (v5+: `classic` or `consumer`, case-insensitive).
//!
//! Gateway mode adds the upstream's groups koord does not have (a team's groups from before
//! koord, groups with offsets only), as the upstream lists them: pointed at an existing
//! cluster, `kafka-consumer-groups --list` shows the groups it showed before. A group koord
//! has is listed as koord has it (upstream sees koord's groups only by their offsets).

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::context::RequestContext;
use super::str_bytes;
use crate::broker::Broker;
use crate::group::GroupError;
use crate::security::acl::{Operation, ResourceType};

/// As Kafka: every group for a principal that may DESCRIBE the cluster, else only the groups
/// it may DESCRIBE.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    let all = ctx.may_cluster(broker, Operation::Describe);
    let states: Vec<String> = if version >= 4 {
        req.states_filter.iter().map(|s| s.to_lowercase()).collect()
    } else {
        Vec::new()
    };
    let types: Vec<String> = if version >= 5 {
        req.types_filter.iter().map(|s| s.to_lowercase()).collect()
    } else {
        Vec::new()
    };
    if broker.coordinator.is_loading() {
        return ListGroupsResponse::default()
            .with_error_code(GroupError::CoordinatorLoadInProgress.code());
    }
    // Every group koord has and, in gateway mode, upstream's too; retried for
    // upstream.write.timeout.ms, then COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
    let listed = match broker.backend.list_groups(broker.local()).await {
        Ok(listed) => listed,
        Err(code) => return ListGroupsResponse::default().with_error_code(code),
    };
    let groups = listed
        .into_iter()
        .filter(|g| all || ctx.may(broker, Operation::Describe, ResourceType::Group, &g.id))
        .filter(|g| states.is_empty() || states.contains(&g.state.to_lowercase()))
        .filter(|g| types.is_empty() || types.contains(&g.group_type.to_lowercase()))
        .map(|g| {
            let mut listed = ListedGroup::default()
                .with_group_id(GroupId(str_bytes(g.id)))
                .with_protocol_type(str_bytes(g.protocol_type));
            if version >= 4 {
                listed.group_state = str_bytes(g.state);
            }
            if version >= 5 {
                listed.group_type = str_bytes(g.group_type);
            }
            listed
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
