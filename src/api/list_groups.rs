//! ListGroups (key 16), v0-5: every group this node coordinates, optionally filtered by state
//! (v4+, case-insensitive) and by type (v5+: `classic` or `consumer`, case-insensitive).
//!
//! Gateway mode adds the upstream's groups koord does not have (a team's groups from before
//! koord, groups with offsets only), as the upstream lists them: pointed at an existing
//! cluster, `kafka-consumer-groups --list` shows the groups it showed before. A group koord
//! has is listed as koord has it (upstream sees koord's groups only by their offsets).

use std::collections::HashSet;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::str_bytes;
use super::table::RequestContext;
use crate::broker::Broker;
use crate::group::GroupError;
use crate::security::acl::{Operation, ResourceType};

/// One listed group, before the request's filters and version.
struct Listed {
    id: String,
    protocol_type: String,
    state: String,
    group_type: String,
}

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
    let mut listed: Vec<Listed> = broker
        .coordinator
        .list()
        .into_iter()
        .map(|g| Listed {
            id: g.group_id.0,
            protocol_type: g.protocol_type,
            state: g.state.as_str().to_string(),
            group_type: g.state.group_type().to_string(),
        })
        .collect();
    if let Some(up) = &broker.upstream {
        match up.list_groups().await {
            Ok(upstream) => {
                // Every group koord has, whatever the filters: upstream's view of it (an
                // offsets-only Empty group) is not the group's.
                let own: HashSet<String> = listed.iter().map(|g| g.id.clone()).collect();
                listed.extend(
                    upstream
                        .into_iter()
                        .filter(|g| !own.contains(g.group_id.as_str()))
                        .map(|g| Listed {
                            id: g.group_id.as_str().to_string(),
                            protocol_type: g.protocol_type.to_string(),
                            state: g.group_state.to_string(),
                            group_type: g.group_type.to_string(),
                        }),
                );
                listed.sort_by(|a, b| a.id.cmp(&b.id));
            }
            // Retried for upstream.write.timeout.ms, then COORDINATOR_LOAD_IN_PROGRESS, which
            // clients retry.
            Err(e) => {
                return ListGroupsResponse::default().with_error_code(e.answer("", "ListGroups"))
            }
        }
    }
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
