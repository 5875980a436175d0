//! ListGroups (key 16), v0-5: every group this node coordinates, optionally filtered by state
//! (v4+, case-insensitive) and by type (v5+: `classic` or `consumer`, case-insensitive).

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::str_bytes;
use super::table::RequestContext;
use crate::broker::Broker;
use crate::security::acl::{Operation, ResourceType};

/// As Kafka: every group for a principal that may DESCRIBE the cluster, else only the groups
/// it may DESCRIBE.
pub fn handle(
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
            .with_error_code(crate::group::GroupError::CoordinatorLoadInProgress.code());
    }
    let groups = broker
        .coordinator
        .list()
        .into_iter()
        .filter(|g| {
            all || ctx.may(
                broker,
                Operation::Describe,
                ResourceType::Group,
                &g.group_id.0,
            )
        })
        .filter(|g| states.is_empty() || states.contains(&g.state.as_str().to_lowercase()))
        .filter(|g| types.is_empty() || types.iter().any(|t| t == g.state.group_type()))
        .map(|g| {
            let mut listed = ListedGroup::default()
                .with_group_id(GroupId(str_bytes(g.group_id.0)))
                .with_protocol_type(str_bytes(g.protocol_type));
            if version >= 4 {
                listed.group_state = str_bytes(g.state.as_str());
            }
            if version >= 5 {
                listed.group_type = str_bytes(g.state.group_type());
            }
            listed
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
