//! StreamsGroupTopologyDescriptionUpdate (key 93), v0 (KIP-1331): a streams member pushes its
//! topology's description, for a topology description plugin to keep. Kafka 4.4 keeps
//! descriptions only when `group.streams.topology.description.plugin.class` names a plugin;
//! without one (its default) it answers, after READ on the group (else
//! GROUP_AUTHORIZATION_FAILED), UNSUPPORTED_VERSION with the reason, never asks a member for a
//! description in its heartbeats (TopologyDescriptionRequired stays false, so Kafka Streams
//! never sends one), and StreamsGroupDescribe v1 reports NOT_STORED. koord has no such plugin
//! and answers the same.

use kafka_protocol::messages::{
    StreamsGroupTopologyDescriptionUpdateRequest, StreamsGroupTopologyDescriptionUpdateResponse,
};
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use super::str_bytes;
use crate::broker::Broker;
use crate::security::acl::{Operation, ResourceType};

/// Kafka 4.4's reason when no topology description plugin is configured.
const NO_PLUGIN: &str = "The broker has no streams group topology description plugin configured.";

pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: StreamsGroupTopologyDescriptionUpdateRequest,
) -> StreamsGroupTopologyDescriptionUpdateResponse {
    let resp = StreamsGroupTopologyDescriptionUpdateResponse::default();
    if !ctx.may(broker, Operation::Read, ResourceType::Group, &req.group_id) {
        // Kafka's getErrorResponse: the error's default message.
        return resp
            .with_error_code(ResponseError::GroupAuthorizationFailed.code())
            .with_error_message(crate::vocab::errors::kafka_message(30).map(str_bytes));
    }
    resp.with_error_code(ResponseError::UnsupportedVersion.code())
        .with_error_message(Some(str_bytes(NO_PLUGIN)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::{allow, broker, ctx};
    use crate::security::acl::AuthorizerSettings;
    use crate::security::authorizer::Authorizer;
    use kafka_protocol::messages::GroupId;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn answer(b: &Broker) -> (i16, Option<String>) {
        let req = StreamsGroupTopologyDescriptionUpdateRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("app")))
            .with_member_id(StrBytes::from_static_str("m"));
        let resp = handle(b, &ctx(b), req);
        let mut buf = bytes::BytesMut::new();
        resp.encode(&mut buf, 0).unwrap();
        (
            resp.error_code,
            resp.error_message.map(|m| m.as_str().to_string()),
        )
    }

    #[test]
    fn read_on_the_group_then_no_plugin() {
        let mut b = broker();
        b.authorizer = Authorizer::enabled(AuthorizerSettings::default(), vec![]);
        assert_eq!(
            answer(&b),
            (
                ResponseError::GroupAuthorizationFailed.code(),
                Some("Group authorization failed.".into())
            )
        );
        b.authorizer = Authorizer::enabled(
            AuthorizerSettings::default(),
            vec![allow(ResourceType::Group, "app", Operation::Read)],
        );
        assert_eq!(
            answer(&b),
            (
                ResponseError::UnsupportedVersion.code(),
                Some(NO_PLUGIN.into())
            )
        );
    }
}
