//! The gateway's pure rules: which requests koord serves and which go upstream, the API
//! versions advertised, the acks of a Produce request, and the responses rewritten so that a
//! client only ever learns koord's endpoints (Metadata, DescribeCluster, FindCoordinator for
//! transactions). No I/O here.

use std::collections::BTreeMap;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, DescribeClusterResponse, FindCoordinatorResponse,
    MetadataResponse, ProduceResponse, RequestHeader, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use crate::metadata::Topic;

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// koord answers it itself (its groups, and ApiVersions).
    Koord,
    /// Forwarded to an upstream broker, its response passed back.
    Forward,
    /// FindCoordinator: koord for groups, upstream (rewritten) for transactions.
    FindCoordinator,
    /// DescribeConfigs, AlterConfigs, IncrementalAlterConfigs: koord's when every resource
    /// is a group (the groups and their configs are koord's: a share group's
    /// `share.auto.offset.reset`, a consumer group's session timeout), upstream's otherwise.
    Configs,
}

/// The config APIs, routed by their resources ([`Route::Configs`]).
const CONFIG_KEYS: &[ApiKey] = &[
    ApiKey::DescribeConfigs,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
];

/// The resource type of a group in the config APIs.
pub const GROUP_RESOURCE: i8 = 32;

/// The group APIs: every one is koord's own, at koord's versions, whatever upstream offers.
const KOORD_KEYS: &[ApiKey] = &[
    ApiKey::ApiVersions,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::OffsetDelete,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::DeleteGroups,
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::ConsumerGroupDescribe,
    ApiKey::TxnOffsetCommit,
    ApiKey::StreamsGroupHeartbeat,
    ApiKey::StreamsGroupDescribe,
    ApiKey::StreamsGroupTopologyDescriptionUpdate,
    // Share groups: koord is their coordinator and the share-partition leader of every
    // partition they read (it reads the records from upstream), whether or not upstream has
    // share groups of its own.
    ApiKey::ShareGroupHeartbeat,
    ApiKey::ShareGroupDescribe,
    ApiKey::ShareFetch,
    ApiKey::ShareAcknowledge,
    ApiKey::DescribeShareGroupOffsets,
    ApiKey::AlterShareGroupOffsets,
    ApiKey::DeleteShareGroupOffsets,
    // Authentication between client and gateway is koord's (its credentials, its listeners'
    // SASL, the users kafka-configs manages); koord authenticates upstream as itself.
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
    ApiKey::DescribeUserScramCredentials,
    ApiKey::AlterUserScramCredentials,
    // Client telemetry: koord receives the clients' metrics (its /metrics and status page).
    ApiKey::GetTelemetrySubscriptions,
    ApiKey::PushTelemetry,
];

/// The ACL APIs: koord's when koord has an authorizer (its ACLs govern what koord answers),
/// upstream's otherwise.
const ACL_KEYS: &[ApiKey] = &[ApiKey::DescribeAcls, ApiKey::CreateAcls, ApiKey::DeleteAcls];

/// Neither served nor forwarded: what brokers and controllers send one another (the share
/// coordinator's state APIs among them: koord keeps its share groups' states itself).
const NOT_SERVED: &[ApiKey] = &[
    ApiKey::InitializeShareGroupState,
    ApiKey::ReadShareGroupState,
    ApiKey::WriteShareGroupState,
    ApiKey::DeleteShareGroupState,
    ApiKey::ReadShareGroupStateSummary,
    ApiKey::Vote,
    ApiKey::BeginQuorumEpoch,
    ApiKey::EndQuorumEpoch,
    ApiKey::AlterPartition,
    ApiKey::Envelope,
    ApiKey::FetchSnapshot,
    ApiKey::BrokerRegistration,
    ApiKey::BrokerHeartbeat,
    ApiKey::UnregisterBroker,
    ApiKey::AllocateProducerIds,
    ApiKey::ControllerRegistration,
    ApiKey::AssignReplicasToDirs,
];

/// Forwarded versions capped below upstream's: Fetch v16+ answers a moved leader with its
/// endpoint (KIP-951), which would have to be found and rewritten in every answer, records and
/// all; below v16 the client asks Metadata, which is rewritten. Produce's answers are small,
/// and their endpoints are rewritten ([`Decoded::Produce`]): transaction version 2 needs
/// Produce v12.
fn forward_cap(key: ApiKey) -> i16 {
    match key {
        ApiKey::Fetch => 15,
        _ => i16::MAX,
    }
}

/// Whether koord serves `key` itself; `own_acls`: koord has an authorizer.
fn is_koords(key: ApiKey, own_acls: bool) -> bool {
    KOORD_KEYS.contains(&key) || (own_acls && ACL_KEYS.contains(&key))
}

/// Where a request with `key` goes; `own_acls`: koord has an authorizer, and the ACL APIs are
/// its own.
pub fn route(key: ApiKey, own_acls: bool) -> Route {
    if key == ApiKey::FindCoordinator {
        Route::FindCoordinator
    } else if CONFIG_KEYS.contains(&key) {
        Route::Configs
    } else if is_koords(key, own_acls) {
        Route::Koord
    } else {
        Route::Forward
    }
}

/// The versions the gateway advertises: koord's own for the group APIs, upstream's (within what
/// koord's protocol crate knows, and [`forward_cap`]) for what is forwarded, the versions both
/// serve for FindCoordinator; nothing neither can serve. `own_acls` as in [`route`].
pub fn advertised(upstream: &[ApiVersion], own_acls: bool) -> Vec<ApiVersion> {
    let mut out: BTreeMap<i16, (i16, i16)> = BTreeMap::new();
    for s in crate::api::SUPPORTED {
        if is_koords(s.key, own_acls) {
            // As koord standalone: Produce is the only one advertised below its minimum.
            out.insert(s.key as i16, (s.min, s.max));
        }
    }
    for u in upstream {
        let Ok(key) = ApiKey::try_from(u.api_key) else {
            continue;
        };
        if is_koords(key, own_acls) || NOT_SERVED.contains(&key) {
            continue;
        }
        let known = key.valid_versions();
        // Produce keeps upstream's minimum: Kafka 4.x advertises v0 though it rejects v0-2,
        // because older librdkafka releases read a minimum above 0 as "no Produce"
        // (KAFKA-18659); such a request is forwarded and upstream rejects it.
        let min = if key == ApiKey::Produce {
            u.min_version
        } else {
            u.min_version.max(known.min)
        };
        let mut range = (min, u.max_version.min(known.max).min(forward_cap(key)));
        // Served by koord or upstream by what the request names: versions both serve.
        if key == ApiKey::FindCoordinator || CONFIG_KEYS.contains(&key) {
            let Some(k) = crate::api::supported(key) else {
                continue;
            };
            range = (range.0.max(k.min), range.1.min(k.max));
        }
        if range.0 <= range.1 {
            out.insert(u.api_key, range);
        }
    }
    out.into_iter()
        .map(|(k, (min, max))| {
            ApiVersion::default()
                .with_api_key(k)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect()
}

/// The transaction protocol upstream runs (its `transaction.version` feature, KIP-890):
/// transactions are upstream's in gateway mode, so clients are told upstream's level, with
/// upstream's finalized-features epoch (a change upstream reaches clients as it would from
/// upstream's brokers).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TransactionFeature {
    pub supported: Option<SupportedFeatureKey>,
    pub finalized: Option<FinalizedFeatureKey>,
    pub epoch: i64,
}

impl TransactionFeature {
    /// The feature as an upstream ApiVersions answer (v3+) gives it.
    pub fn of(upstream: &ApiVersionsResponse) -> TransactionFeature {
        let name = crate::api::api_versions::TRANSACTION_VERSION;
        TransactionFeature {
            supported: upstream
                .supported_features
                .iter()
                .find(|f| f.name.as_str() == name)
                .cloned(),
            finalized: upstream
                .finalized_features
                .iter()
                .find(|f| f.name.as_str() == name)
                .cloned(),
            epoch: upstream.finalized_features_epoch,
        }
    }

    /// koord's ApiVersions answer with upstream's transaction feature in place of koord's own.
    pub fn apply(&self, mut resp: ApiVersionsResponse) -> ApiVersionsResponse {
        let name = crate::api::api_versions::TRANSACTION_VERSION;
        resp = crate::api::api_versions::without_feature(resp, name);
        resp.supported_features.extend(self.supported.clone());
        if let Some(f) = &self.finalized {
            resp.finalized_features.push(f.clone());
            resp.finalized_features_epoch = resp.finalized_features_epoch.max(self.epoch);
        }
        resp
    }
}

/// What the gateway advertises to clients: API versions and upstream's transaction protocol.
#[derive(Debug, Clone, Default)]
pub struct Advertised {
    pub versions: Vec<ApiVersion>,
    pub transaction: TransactionFeature,
}

/// Whether the range `advertised` holds `version` of `key`.
pub fn is_advertised(advertised: &[ApiVersion], key: ApiKey, version: i16) -> bool {
    advertised
        .iter()
        .any(|a| a.api_key == key as i16 && (a.min_version..=a.max_version).contains(&version))
}

/// Whether a Produce request (frame without length prefix, at `version` >= 3) asks for an
/// answer: acks=0 gets none. `None` when the frame cannot be read that far.
pub fn produce_expects_response(frame: &Bytes, version: i16) -> Option<bool> {
    let mut b = frame.clone();
    RequestHeader::decode(&mut b, ApiKey::Produce.request_header_version(version)).ok()?;
    // transactional_id (v3+): a nullable string, compact (unsigned varint of length + 1)
    // from v9.
    if version < 3 {
    } else if version >= 9 {
        let n = read_unsigned_varint(&mut b)?;
        let len = n.saturating_sub(1) as usize;
        if b.remaining() < len {
            return None;
        }
        b.advance(len);
    } else {
        if b.remaining() < 2 {
            return None;
        }
        let len = b.get_i16();
        if len > 0 {
            if b.remaining() < len as usize {
                return None;
            }
            b.advance(len as usize);
        }
    }
    if b.remaining() < 2 {
        return None;
    }
    Some(b.get_i16() != 0)
}

fn read_unsigned_varint(b: &mut Bytes) -> Option<u32> {
    let mut value: u32 = 0;
    for i in 0..5 {
        if !b.has_remaining() {
            return None;
        }
        let byte = b.get_u8();
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// The key type of a FindCoordinator request body (0 group, 1 transaction, 2 share).
pub const KEY_TYPE_TRANSACTION: i8 = 1;

/// What koord presents for each upstream broker: the endpoint clients are told.
pub type Endpoints = BTreeMap<i32, (String, i32)>;

/// koord itself as a broker in gateway mode: its coordinator's id and endpoint, and the name of
/// its group topic upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Own {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub internal_topic: String,
    /// Cluster mode: the other koord nodes (id, host, port on the same listener), listed
    /// beside it as brokers: FindCoordinator may name any of them.
    pub peers: Vec<(i32, String, i32)>,
}

impl Own {
    /// This node and its peers: (id, host, port).
    fn nodes(&self) -> impl Iterator<Item = (i32, &str, i32)> {
        std::iter::once((self.node_id, self.host.as_str(), self.port))
            .chain(self.peers.iter().map(|(id, h, p)| (*id, h.as_str(), *p)))
    }
}

/// An upstream response decoded for rewriting.
#[derive(Debug)]
pub enum Decoded {
    Metadata(MetadataResponse),
    DescribeCluster(DescribeClusterResponse),
    /// With its version: v0-3 name one coordinator at the top level, v4+ a list.
    FindCoordinator(FindCoordinatorResponse, i16),
    /// v10+ with the endpoints of partitions' new leaders (KIP-951); an answer naming none
    /// passes as it came.
    Produce(ProduceResponse),
}

impl Decoded {
    /// Decodes a response `frame` (without length prefix) of `key` at `version`; `None` for a
    /// key that needs no rewrite.
    ///
    /// # Errors
    /// The frame does not decode.
    pub fn decode(key: ApiKey, version: i16, frame: &Bytes) -> anyhow::Result<Option<Decoded>> {
        let produce_endpoints = key == ApiKey::Produce && version >= 10;
        if !produce_endpoints
            && !matches!(
                key,
                ApiKey::Metadata | ApiKey::DescribeCluster | ApiKey::FindCoordinator
            )
        {
            return Ok(None);
        }
        let mut b = frame.clone();
        ResponseHeader::decode(&mut b, key.response_header_version(version))?;
        Ok(Some(match key {
            ApiKey::Metadata => Decoded::Metadata(MetadataResponse::decode(&mut b, version)?),
            ApiKey::DescribeCluster => {
                Decoded::DescribeCluster(DescribeClusterResponse::decode(&mut b, version)?)
            }
            ApiKey::FindCoordinator => {
                Decoded::FindCoordinator(FindCoordinatorResponse::decode(&mut b, version)?, version)
            }
            ApiKey::Produce => {
                let r = ProduceResponse::decode(&mut b, version)?;
                if r.node_endpoints.is_empty() {
                    return Ok(None);
                }
                Decoded::Produce(r)
            }
            _ => return Ok(None),
        }))
    }

    /// The upstream brokers this response names, with their upstream addresses.
    pub fn brokers(&self) -> Vec<(i32, String)> {
        match self {
            Decoded::Metadata(m) => m
                .brokers
                .iter()
                .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
                .collect(),
            Decoded::DescribeCluster(d) => d
                .brokers
                .iter()
                .map(|b| (b.broker_id.0, format!("{}:{}", b.host.as_str(), b.port)))
                .collect(),
            Decoded::FindCoordinator(f, v) if *v >= 4 => f
                .coordinators
                .iter()
                .filter(|c| c.node_id.0 >= 0)
                .map(|c| (c.node_id.0, format!("{}:{}", c.host.as_str(), c.port)))
                .collect(),
            Decoded::FindCoordinator(f, _) if f.node_id.0 >= 0 => {
                vec![(f.node_id.0, format!("{}:{}", f.host.as_str(), f.port))]
            }
            Decoded::FindCoordinator(..) => Vec::new(),
            Decoded::Produce(p) => p
                .node_endpoints
                .iter()
                .map(|e| (e.node_id.0, format!("{}:{}", e.host.as_str(), e.port)))
                .collect(),
        }
    }

    /// The topics a Metadata response describes without error, as koord mirrors them; a
    /// version without topic ids leaves the id nil (unknown: [`crate::metadata::Topics::mirror`]
    /// keeps the one it has).
    pub fn topics(&self) -> Vec<Topic> {
        let Decoded::Metadata(m) = self else {
            return Vec::new();
        };
        m.topics
            .iter()
            .filter(|t| t.error_code == 0)
            .filter_map(|t| {
                let name = t.name.as_ref()?.0.as_str().to_string();
                Some(Topic {
                    name,
                    id: t.topic_id,
                    partitions: i32::try_from(t.partitions.len()).ok()?,
                })
            })
            .collect()
    }

    /// Replaces every upstream endpoint with koord's for that broker. A broker koord has no
    /// endpoint for is left out (Metadata, DescribeCluster, Produce) or made unavailable
    /// (FindCoordinator): a client never learns an upstream address. Metadata and
    /// DescribeCluster also list koord itself (`own`), the group coordinator, as Kafka lists
    /// its coordinators among its brokers (librdkafka forgets a broker Metadata does not name,
    /// and with it an admin request in flight to the coordinator); koord's group topic is
    /// marked internal, so that pattern subscriptions leave it alone.
    pub fn rewrite(self, endpoints: &Endpoints, own: &Own) -> ResponseKind {
        let ep = |id: i32| {
            endpoints
                .get(&id)
                .map(|(h, p)| (StrBytes::from(h.clone()), *p))
        };
        match self {
            Decoded::Metadata(mut m) => {
                m.brokers.retain_mut(|b| match ep(b.node_id.0) {
                    Some((h, p)) => {
                        b.host = h;
                        b.port = p;
                        true
                    }
                    None => false,
                });
                for (id, host, port) in own.nodes() {
                    if !m.brokers.iter().any(|b| b.node_id.0 == id) {
                        m.brokers.push(
                            kafka_protocol::messages::metadata_response::MetadataResponseBroker::default()
                                .with_node_id(id.into())
                                .with_host(StrBytes::from(host.to_string()))
                                .with_port(port),
                        );
                    }
                }
                for t in &mut m.topics {
                    if t.name
                        .as_ref()
                        .is_some_and(|n| n.as_str() == own.internal_topic)
                    {
                        t.is_internal = true;
                    }
                }
                ResponseKind::Metadata(m)
            }
            Decoded::DescribeCluster(mut d) => {
                d.brokers.retain_mut(|b| match ep(b.broker_id.0) {
                    Some((h, p)) => {
                        b.host = h;
                        b.port = p;
                        true
                    }
                    None => false,
                });
                for (id, host, port) in own.nodes() {
                    if !d.brokers.iter().any(|b| b.broker_id.0 == id) {
                        d.brokers.push(
                            kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker::default()
                                .with_broker_id(id.into())
                                .with_host(StrBytes::from(host.to_string()))
                                .with_port(port),
                        );
                    }
                }
                ResponseKind::DescribeCluster(d)
            }
            Decoded::FindCoordinator(mut f, v) => {
                let unavailable = kafka_protocol::ResponseError::CoordinatorNotAvailable.code();
                for c in &mut f.coordinators {
                    if c.node_id.0 < 0 {
                        continue;
                    }
                    match ep(c.node_id.0) {
                        Some((h, p)) => {
                            c.host = h;
                            c.port = p;
                        }
                        None => {
                            c.error_code = unavailable;
                            c.node_id = (-1).into();
                            c.host = StrBytes::default();
                            c.port = -1;
                        }
                    }
                }
                if v < 4 && f.node_id.0 >= 0 {
                    match ep(f.node_id.0) {
                        Some((h, p)) => {
                            f.host = h;
                            f.port = p;
                        }
                        None => {
                            f.error_code = unavailable;
                            f.node_id = (-1).into();
                            f.host = StrBytes::default();
                            f.port = -1;
                        }
                    }
                }
                ResponseKind::FindCoordinator(f)
            }
            Decoded::Produce(mut p) => {
                // A leader koord has no endpoint for is left out: the client asks Metadata.
                p.node_endpoints.retain_mut(|e| match ep(e.node_id.0) {
                    Some((h, port)) => {
                        e.host = h;
                        e.port = port;
                        true
                    }
                    None => false,
                });
                ResponseKind::Produce(p)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::find_coordinator_response::Coordinator;
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{ProduceRequest, TopicName};
    use kafka_protocol::protocol::Encodable;

    fn own() -> Own {
        Own {
            node_id: 1003,
            peers: Vec::new(),
            host: "127.0.0.1".into(),
            port: 9092,
            internal_topic: "__koord_groups".into(),
        }
    }

    fn upstream_versions() -> Vec<ApiVersion> {
        [
            (ApiKey::Produce, 0, 13),
            (ApiKey::Fetch, 4, 18),
            (ApiKey::Metadata, 0, 13),
            (ApiKey::FindCoordinator, 0, 6),
            (ApiKey::JoinGroup, 0, 9),
            (ApiKey::SaslHandshake, 0, 1),
            (ApiKey::ShareFetch, 1, 1),
            (ApiKey::CreateTopics, 2, 7),
        ]
        .into_iter()
        .map(|(k, min, max)| {
            ApiVersion::default()
                .with_api_key(k as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect()
    }

    fn range(adv: &[ApiVersion], key: ApiKey) -> Option<(i16, i16)> {
        adv.iter()
            .find(|a| a.api_key == key as i16)
            .map(|a| (a.min_version, a.max_version))
    }

    #[test]
    fn advertised_is_koords_groups_and_upstreams_data_plane() {
        let adv = advertised(&upstream_versions(), false);
        assert_eq!(
            range(&adv, ApiKey::Produce),
            Some((0, 13)),
            "upstream's: its KIP-951 endpoints are rewritten"
        );
        assert_eq!(
            range(&adv, ApiKey::Fetch),
            Some((4, 15)),
            "capped below KIP-951"
        );
        assert_eq!(range(&adv, ApiKey::CreateTopics), Some((2, 7)));
        let koord_join = crate::api::supported(ApiKey::JoinGroup).unwrap();
        assert_eq!(
            range(&adv, ApiKey::JoinGroup),
            Some((koord_join.min, koord_join.max))
        );
        // koord's group APIs are there even when upstream has none of them.
        assert!(range(&adv, ApiKey::OffsetCommit).is_some());
        assert!(range(&adv, ApiKey::ApiVersions).is_some());
        assert_eq!(
            range(&adv, ApiKey::SaslHandshake),
            Some((0, 1)),
            "koord's own, as standalone"
        );
        let koord_share = crate::api::supported(ApiKey::ShareFetch).unwrap();
        assert_eq!(
            range(&adv, ApiKey::ShareFetch),
            Some((koord_share.min, koord_share.max)),
            "koord's share groups, whatever upstream offers"
        );
        assert!(range(&adv, ApiKey::ShareGroupHeartbeat).is_some());
        assert_eq!(range(&adv, ApiKey::ReadShareGroupState), None);
        // Not offered by upstream, not koord's: not advertised.
        assert_eq!(range(&adv, ApiKey::DeleteRecords), None);
        assert!(is_advertised(&adv, ApiKey::Produce, 13));
        assert!(!is_advertised(&adv, ApiKey::Fetch, 16));
        let scram = crate::api::supported(ApiKey::AlterUserScramCredentials).unwrap();
        assert_eq!(
            range(&adv, ApiKey::AlterUserScramCredentials),
            Some((scram.min, scram.max)),
            "koord's users are koord's"
        );
    }

    #[test]
    fn acl_apis_are_koords_only_with_koords_authorizer() {
        let mut upstream = upstream_versions();
        upstream.push(
            ApiVersion::default()
                .with_api_key(ApiKey::CreateAcls as i16)
                .with_min_version(2)
                .with_max_version(3),
        );
        let koords = crate::api::supported(ApiKey::CreateAcls).unwrap();
        assert_eq!(route(ApiKey::CreateAcls, false), Route::Forward);
        assert_eq!(
            range(&advertised(&upstream, false), ApiKey::CreateAcls),
            Some((2, 3))
        );
        assert_eq!(route(ApiKey::CreateAcls, true), Route::Koord);
        assert_eq!(
            range(&advertised(&upstream, true), ApiKey::CreateAcls),
            Some((koords.min, koords.max))
        );
        assert_eq!(route(ApiKey::Produce, true), Route::Forward);
    }

    fn produce_frame(version: i16, txn: Option<&str>, acks: i16) -> Bytes {
        let mut b = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(0)
            .with_request_api_version(version)
            .with_correlation_id(3)
            .with_client_id(Some(StrBytes::from_static_str("c")))
            .encode(&mut b, ApiKey::Produce.request_header_version(version))
            .unwrap();
        ProduceRequest::default()
            .with_transactional_id(txn.map(|t| StrBytes::from(t.to_string()).into()))
            .with_acks(acks)
            .with_timeout_ms(1000)
            .encode(&mut b, version)
            .unwrap();
        b.freeze()
    }

    #[test]
    fn produce_acks_are_read_at_every_forwarded_version() {
        for v in 3..=13 {
            for txn in [None, Some("tx-1")] {
                assert_eq!(
                    produce_expects_response(&produce_frame(v, txn, 0), v),
                    Some(false)
                );
                assert_eq!(
                    produce_expects_response(&produce_frame(v, txn, -1), v),
                    Some(true)
                );
                assert_eq!(
                    produce_expects_response(&produce_frame(v, txn, 1), v),
                    Some(true)
                );
            }
        }
        let f = produce_frame(9, Some("tx"), 0);
        assert_eq!(produce_expects_response(&f.slice(..f.len() - 20), 9), None);
        assert_eq!(
            produce_expects_response(&Bytes::from_static(b"\0\0"), 9),
            None
        );
    }

    fn encode(key: ApiKey, v: i16, body: &ResponseKind) -> Bytes {
        let mut f = crate::server::codec::encode_response(key, v, 9, body).unwrap();
        f.advance(4);
        f
    }

    fn endpoints() -> Endpoints {
        [
            (1, ("127.0.0.1".to_string(), 7001)),
            (2, ("127.0.0.1".to_string(), 7002)),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn metadata_names_only_koords_endpoints_and_its_topics_are_mirrored() {
        for v in [1, 9, 12, 13] {
            let resp = MetadataResponse::default()
                .with_brokers(
                    [1, 2, 3]
                        .into_iter()
                        .map(|id| {
                            MetadataResponseBroker::default()
                                .with_node_id(id.into())
                                .with_host(StrBytes::from_static_str("10.0.0.9"))
                                .with_port(9092 + id)
                        })
                        .collect(),
                )
                .with_topics(vec![
                    MetadataResponseTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                        .with_topic_id(uuid::Uuid::from_u128(7))
                        .with_partitions(vec![MetadataResponsePartition::default(); 3]),
                    MetadataResponseTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_static_str("__koord_groups"))))
                        .with_topic_id(uuid::Uuid::from_u128(8))
                        .with_partitions(vec![MetadataResponsePartition::default(); 1]),
                ]);
            let frame = encode(ApiKey::Metadata, v, &ResponseKind::Metadata(resp));
            let d = Decoded::decode(ApiKey::Metadata, v, &frame)
                .unwrap()
                .unwrap();
            assert_eq!(d.brokers().len(), 3);
            assert_eq!(d.brokers()[0], (1, "10.0.0.9:9093".to_string()));
            let topics = d.topics();
            assert_eq!(topics.len(), 2);
            assert_eq!(topics[0].partitions, 3);
            let rewritten = d.rewrite(&endpoints(), &own());
            crate::server::codec::encode_response(ApiKey::Metadata, v, 9, &rewritten)
                .expect("the rewritten answer encodes");
            let ResponseKind::Metadata(m) = rewritten else {
                panic!()
            };
            let seen: Vec<(i32, String, i32)> = m
                .brokers
                .iter()
                .map(|b| (b.node_id.0, b.host.to_string(), b.port))
                .collect();
            assert_eq!(
                seen,
                vec![
                    (1, "127.0.0.1".into(), 7001),
                    (2, "127.0.0.1".into(), 7002),
                    (1003, "127.0.0.1".into(), 9092)
                ],
                "v{v}: broker 3 has no koord endpoint and is left out; koord is named"
            );
            let internal: Vec<(String, bool)> = m
                .topics
                .iter()
                .map(|t| (t.name.as_ref().unwrap().to_string(), t.is_internal))
                .collect();
            assert_eq!(
                internal,
                vec![("t".into(), false), ("__koord_groups".into(), true)]
            );
        }
    }

    #[test]
    fn find_coordinator_for_transactions_points_at_koord() {
        let old = FindCoordinatorResponse::default()
            .with_node_id(2.into())
            .with_host(StrBytes::from_static_str("10.0.0.9"))
            .with_port(9094);
        let frame = encode(
            ApiKey::FindCoordinator,
            3,
            &ResponseKind::FindCoordinator(old),
        );
        let d = Decoded::decode(ApiKey::FindCoordinator, 3, &frame)
            .unwrap()
            .unwrap();
        let ResponseKind::FindCoordinator(f) = d.rewrite(&endpoints(), &own()) else {
            panic!()
        };
        assert_eq!(
            (f.node_id.0, f.host.as_str(), f.port),
            (2, "127.0.0.1", 7002)
        );

        let batch = FindCoordinatorResponse::default().with_coordinators(vec![
            Coordinator::default()
                .with_key(StrBytes::from_static_str("a"))
                .with_node_id(1.into())
                .with_host(StrBytes::from_static_str("10.0.0.9"))
                .with_port(9093),
            Coordinator::default()
                .with_key(StrBytes::from_static_str("b"))
                .with_node_id(3.into())
                .with_host(StrBytes::from_static_str("10.0.0.9"))
                .with_port(9095),
        ]);
        let frame = encode(
            ApiKey::FindCoordinator,
            6,
            &ResponseKind::FindCoordinator(batch),
        );
        let d = Decoded::decode(ApiKey::FindCoordinator, 6, &frame)
            .unwrap()
            .unwrap();
        let rewritten = d.rewrite(&endpoints(), &own());
        crate::server::codec::encode_response(ApiKey::FindCoordinator, 6, 9, &rewritten)
            .expect("the rewritten v6 answer encodes");
        let ResponseKind::FindCoordinator(f) = rewritten else {
            panic!()
        };
        assert_eq!(f.coordinators[0].port, 7001);
        assert_eq!(f.coordinators[1].node_id.0, -1, "no endpoint: unavailable");
        assert_eq!(
            f.coordinators[1].error_code,
            kafka_protocol::ResponseError::CoordinatorNotAvailable.code()
        );
    }

    #[test]
    fn describe_cluster_names_only_koords_endpoints() {
        use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
        for v in 0..=2 {
            let resp = DescribeClusterResponse::default()
                .with_controller_id(2.into())
                .with_brokers(
                    [1, 2]
                        .into_iter()
                        .map(|id| {
                            DescribeClusterBroker::default()
                                .with_broker_id(id.into())
                                .with_host(StrBytes::from_static_str("10.0.0.9"))
                                .with_port(9092 + id)
                        })
                        .collect(),
                );
            let frame = encode(
                ApiKey::DescribeCluster,
                v,
                &ResponseKind::DescribeCluster(resp),
            );
            let d = Decoded::decode(ApiKey::DescribeCluster, v, &frame)
                .unwrap()
                .unwrap();
            assert_eq!(d.brokers()[1], (2, "10.0.0.9:9094".to_string()));
            let rewritten = d.rewrite(&endpoints(), &own());
            crate::server::codec::encode_response(ApiKey::DescribeCluster, v, 9, &rewritten)
                .expect("the rewritten answer encodes");
            let ResponseKind::DescribeCluster(d) = rewritten else {
                panic!()
            };
            let seen: Vec<(i32, i32)> = d.brokers.iter().map(|b| (b.broker_id.0, b.port)).collect();
            assert_eq!(
                seen,
                vec![(1, 7001), (2, 7002), (1003, 9092)],
                "v{v}: and koord"
            );
            assert_eq!(d.controller_id.0, 2);
        }
    }

    #[test]
    fn produce_answers_name_koords_endpoints_for_new_leaders() {
        use kafka_protocol::messages::produce_response::{
            LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
        };
        let not_leader = kafka_protocol::ResponseError::NotLeaderOrFollower.code();
        let answer = |endpoints: Vec<i32>| {
            ProduceResponse::default()
                .with_responses(vec![TopicProduceResponse::default()
                    .with_name(TopicName(StrBytes::from_static_str("t")))
                    .with_partition_responses(vec![PartitionProduceResponse::default()
                        .with_index(0)
                        .with_error_code(not_leader)
                        .with_current_leader(
                            LeaderIdAndEpoch::default()
                                .with_leader_id(2.into())
                                .with_leader_epoch(5),
                        )])])
                .with_node_endpoints(
                    endpoints
                        .into_iter()
                        .map(|id| {
                            NodeEndpoint::default()
                                .with_node_id(id.into())
                                .with_host(StrBytes::from_static_str("10.0.0.9"))
                                .with_port(9092 + id)
                        })
                        .collect(),
                )
        };
        for v in 10..=13 {
            let frame = encode(
                ApiKey::Produce,
                v,
                &ResponseKind::Produce(answer(vec![2, 3])),
            );
            let d = Decoded::decode(ApiKey::Produce, v, &frame)
                .unwrap()
                .unwrap();
            assert_eq!(
                d.brokers(),
                vec![
                    (2, "10.0.0.9:9094".to_string()),
                    (3, "10.0.0.9:9095".to_string())
                ],
                "new leaders are presented"
            );
            let rewritten = d.rewrite(&endpoints(), &own());
            crate::server::codec::encode_response(ApiKey::Produce, v, 9, &rewritten)
                .expect("the rewritten answer encodes");
            let ResponseKind::Produce(p) = rewritten else {
                panic!()
            };
            let seen: Vec<(i32, &str, i32)> = p
                .node_endpoints
                .iter()
                .map(|e| (e.node_id.0, e.host.as_str(), e.port))
                .collect();
            assert_eq!(
                seen,
                vec![(2, "127.0.0.1", 7002)],
                "v{v}: koord's endpoint; one koord has none for is left out"
            );
            let partition = &p.responses[0].partition_responses[0];
            assert_eq!(partition.error_code, not_leader);
            assert_eq!(partition.current_leader.leader_id.0, 2);
            // Without endpoints, and below v10, the answer passes as it came.
            let plain = encode(ApiKey::Produce, v, &ResponseKind::Produce(answer(vec![])));
            assert!(Decoded::decode(ApiKey::Produce, v, &plain)
                .unwrap()
                .is_none());
        }
        let v9 = encode(ApiKey::Produce, 9, &ResponseKind::Produce(answer(vec![])));
        assert!(Decoded::decode(ApiKey::Produce, 9, &v9).unwrap().is_none());
    }

    #[test]
    fn clients_are_told_upstreams_transaction_protocol() {
        let koords = || crate::api::api_versions::handle(&Default::default(), 2, None);
        let level = |r: &ApiVersionsResponse| {
            r.finalized_features
                .iter()
                .find(|f| f.name.as_str() == crate::api::api_versions::TRANSACTION_VERSION)
                .map(|f| f.max_version_level)
        };
        assert_eq!(level(&koords()), Some(2), "koord standalone runs version 2");
        let upstream = |finalized: Option<i16>, epoch| {
            let name = || StrBytes::from_static_str(crate::api::api_versions::TRANSACTION_VERSION);
            ApiVersionsResponse::default()
                .with_supported_features(vec![SupportedFeatureKey::default()
                    .with_name(name())
                    .with_min_version(0)
                    .with_max_version(2)])
                .with_finalized_features_epoch(epoch)
                .with_finalized_features(
                    finalized
                        .map(|l| {
                            FinalizedFeatureKey::default()
                                .with_name(name())
                                .with_min_version_level(l)
                                .with_max_version_level(l)
                        })
                        .into_iter()
                        .collect(),
                )
        };
        for (finalized, epoch) in [(Some(2), 41), (Some(1), 7), (None, 3)] {
            let feature = TransactionFeature::of(&upstream(finalized, epoch));
            let answer = feature.apply(koords());
            assert_eq!(level(&answer), finalized, "upstream's level");
            let with_it = finalized.map_or(0, |_| epoch);
            assert_eq!(answer.finalized_features_epoch, with_it);
            assert!(
                answer
                    .finalized_features
                    .iter()
                    .any(|f| f.name.as_str() == "streams.version"),
                "koord's own features stay"
            );
        }
        // An upstream without the feature (Kafka 3.x): none.
        let answer = TransactionFeature::default().apply(koords());
        assert_eq!(level(&answer), None);
        assert!(answer
            .supported_features
            .iter()
            .all(|f| f.name.as_str() != crate::api::api_versions::TRANSACTION_VERSION));
    }

    #[test]
    fn garbage_responses_are_errors() {
        let junk = Bytes::from_static(b"\0\0\0\x09\xff\xff\xff\xff\xff");
        assert!(Decoded::decode(ApiKey::Metadata, 12, &junk).is_err());
        assert!(Decoded::decode(ApiKey::Produce, 9, &junk)
            .unwrap()
            .is_none());
    }
}
