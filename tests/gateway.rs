//! Gateway mode over the wire, against a fake upstream broker in this process: what clients are
//! told (only koord's endpoints), what is forwarded (frames as sent, correlation ids mapped,
//! answers in request order), and what happens when the upstream goes away (the client
//! connection is closed unanswered; the next connection reaches the upstream again).
//! A SASL listener in front of it: nothing forwarded before koord's own authentication.
//! The real-cluster scenarios are proto-tests/test_gateway.py, and with TLS and SASL on both
//! sides proto-tests/test_gateway_security.py.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use common::{api_versions_request, frame, free_port, http_path, Client, Koord};
use kafka_protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::produce_response::{NodeEndpoint, TopicProduceResponse};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, GroupId, HeartbeatRequest, LeaveGroupRequest,
    ListGroupsRequest, ListGroupsResponse, ListOffsetsRequest, ListOffsetsResponse,
    MetadataRequest, MetadataResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse,
    ProduceRequest, ProduceResponse, ProducerId, RequestHeader, ResponseHeader, TopicName,
    TransactionalId, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// A fake upstream broker (node 7): ApiVersions, Metadata naming itself, and Produce answered
/// with a marker topic name, unless `drop_produce` is set: then the connection is closed
/// without an answer; or `hold_produce` is above 0: then it is read and never answered. It records every frame it reads. As every group's coordinator it answers
/// OffsetFetch by the group's name ([`offset_fetch_answer`]), and has two groups of its own
/// ([`UPSTREAM_GROUPS`]) that ListGroups lists, DescribeGroups describes and DeleteGroups
/// deletes (any other group: Dead, GROUP_ID_NOT_FOUND).
///
/// Its group coordinator moves on request ([`Moves`]): the next `moving` group requests are
/// answered as a coordinator that moved or is loading, and groups named `moved*` are never
/// served (NOT_COORDINATOR, every time).
struct Upstream {
    addr: SocketAddr,
    drop_produce: Arc<AtomicBool>,
    /// The next this many Produce requests are read and never answered (a paused leader).
    hold_produce: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Bytes>>>,
    moving: Arc<AtomicUsize>,
}

/// How the fake answers group requests while its coordinator moves: the codes it cycles
/// through (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE), and
/// whether a group is served at all.
struct Moves<'a>(&'a AtomicUsize);

impl Moves<'_> {
    /// The error this group request gets, if any.
    fn error(&self, group: &str) -> Option<i16> {
        if group.starts_with("moved") {
            return Some(16);
        }
        let left = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .ok()?;
        Some([16, 14, 15][left % 3])
    }
}

const NODE: i32 = 7;

/// The fake upstream's finalized-features epoch.
const UPSTREAM_FEATURES_EPOCH: i64 = 42;

impl Upstream {
    fn start() -> Upstream {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let up = Upstream {
            addr,
            drop_produce: Arc::new(AtomicBool::new(false)),
            hold_produce: Arc::new(AtomicUsize::new(0)),
            seen: Arc::new(Mutex::new(Vec::new())),
            moving: Arc::new(AtomicUsize::new(0)),
        };
        let (drop_produce, hold_produce, seen, moving) = (
            up.drop_produce.clone(),
            up.hold_produce.clone(),
            up.seen.clone(),
            up.moving.clone(),
        );
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                let (drop_produce, hold_produce, seen, moving) = (
                    drop_produce.clone(),
                    hold_produce.clone(),
                    seen.clone(),
                    moving.clone(),
                );
                std::thread::spawn(move || {
                    let produce = (&*drop_produce, &*hold_produce);
                    serve(s, addr, produce, &seen, &Moves(&moving))
                });
            }
        });
        up
    }

    /// How many requests of `key` it has read.
    fn asked(&self, key: ApiKey) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|f| f[..2] == (key as i16).to_be_bytes())
            .count()
    }
}

fn serve(
    mut s: TcpStream,
    me: SocketAddr,
    (drop_produce, hold_produce): (&AtomicBool, &AtomicUsize),
    seen: &Mutex<Vec<Bytes>>,
    moves: &Moves,
) {
    loop {
        let mut len = [0u8; 4];
        if s.read_exact(&mut len).is_err() {
            return;
        }
        let mut f = vec![0u8; i32::from_be_bytes(len) as usize];
        if s.read_exact(&mut f).is_err() {
            return;
        }
        let f = Bytes::from(f);
        seen.lock().unwrap().push(f.clone());
        let mut b = f.clone();
        let key = ApiKey::try_from(b.get_i16()).unwrap();
        let v = b.get_i16();
        let mut b = f.clone();
        let header = RequestHeader::decode(&mut b, key.request_header_version(v)).unwrap();
        let mut out = BytesMut::new();
        out.put_i32(0);
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut out, key.response_header_version(v))
            .unwrap();
        match key {
            ApiKey::ApiVersions => {
                let keys = [
                    (ApiKey::Produce, 0, 13),
                    (ApiKey::Metadata, 0, 13),
                    (ApiKey::ApiVersions, 0, 4),
                ];
                ApiVersionsResponse::default()
                    .with_api_keys(
                        keys.iter()
                            .map(|(k, min, max)| {
                                ApiVersion::default()
                                    .with_api_key(*k as i16)
                                    .with_min_version(*min)
                                    .with_max_version(*max)
                            })
                            .collect(),
                    )
                    // Transaction version 2 finalized, as Kafka 4.4 by default.
                    .with_finalized_features_epoch(UPSTREAM_FEATURES_EPOCH)
                    .with_finalized_features(vec![FinalizedFeatureKey::default()
                        .with_name(StrBytes::from_static_str("transaction.version"))
                        .with_min_version_level(2)
                        .with_max_version_level(2)])
                    .encode(&mut out, v)
                    .unwrap();
            }
            ApiKey::Metadata => {
                // A named topic (koord's group topic) has one partition, led by this broker;
                // every topic is "t", two partitions.
                let asked = MetadataRequest::decode(&mut b, v).unwrap().topics;
                let topics = match asked {
                    Some(asked) => asked
                        .into_iter()
                        .filter_map(|t| t.name)
                        .map(|name| {
                            MetadataResponseTopic::default()
                                .with_name(Some(name))
                                .with_partitions(vec![MetadataResponsePartition::default()
                                    .with_leader_id(NODE.into())])
                        })
                        .collect(),
                    None => vec![MetadataResponseTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                        .with_partitions(
                            (0..2)
                                .map(|p| {
                                    MetadataResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_leader_id(NODE.into())
                                })
                                .collect(),
                        )],
                };
                MetadataResponse::default()
                    .with_brokers(vec![MetadataResponseBroker::default()
                        .with_node_id(NODE.into())
                        .with_host(StrBytes::from(me.ip().to_string()))
                        .with_port(me.port() as i32)])
                    .with_controller_id(NODE.into())
                    .with_topics(topics)
                    .encode(&mut out, v)
                    .unwrap()
            }
            // koord's group topic: created, and empty (it starts and ends at offset 0).
            ApiKey::CreateTopics => {
                let req = CreateTopicsRequest::decode(&mut b, v).unwrap();
                CreateTopicsResponse::default()
                    .with_topics(
                        req.topics
                            .into_iter()
                            .map(|t| {
                                CreatableTopicResult::default()
                                    .with_name(t.name)
                                    .with_num_partitions(t.num_partitions)
                            })
                            .collect(),
                    )
                    .encode(&mut out, v)
                    .unwrap()
            }
            ApiKey::ListOffsets => {
                let req = ListOffsetsRequest::decode(&mut b, v).unwrap();
                ListOffsetsResponse::default()
                    .with_topics(
                        req.topics
                            .into_iter()
                            .map(|t| {
                                ListOffsetsTopicResponse::default()
                                    .with_name(t.name)
                                    .with_partitions(
                                        t.partitions
                                            .iter()
                                            .map(|p| {
                                                ListOffsetsPartitionResponse::default()
                                                    .with_partition_index(p.partition_index)
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    )
                    .encode(&mut out, v)
                    .unwrap()
            }
            ApiKey::FindCoordinator => {
                let req = FindCoordinatorRequest::decode(&mut b, v).unwrap();
                FindCoordinatorResponse::default()
                    .with_coordinators(
                        req.coordinator_keys
                            .into_iter()
                            // Groups named found-late* meet the moves in FindCoordinator too.
                            .map(
                                |k| match k.starts_with("found-late").then(|| moves.error(&k)) {
                                    Some(Some(_)) => Coordinator::default()
                                        .with_key(k)
                                        .with_node_id((-1).into())
                                        .with_error_code(15),
                                    _ => Coordinator::default()
                                        .with_key(k)
                                        .with_node_id(NODE.into())
                                        .with_host(StrBytes::from(me.ip().to_string()))
                                        .with_port(i32::from(me.port())),
                                },
                            )
                            .collect(),
                    )
                    .encode(&mut out, v)
                    .unwrap()
            }
            ApiKey::OffsetFetch => {
                let req = OffsetFetchRequest::decode(&mut b, v).unwrap();
                OffsetFetchResponse::default()
                    .with_groups(
                        req.groups
                            .iter()
                            .map(|g| match moves.error(g.group_id.as_str()) {
                                Some(code) => OffsetFetchResponseGroup::default()
                                    .with_group_id(g.group_id.clone())
                                    .with_error_code(code),
                                None => offset_fetch_answer(g, req.require_stable),
                            })
                            .collect(),
                    )
                    .encode(&mut out, v)
                    .unwrap()
            }
            ApiKey::ListGroups => ListGroupsResponse::default()
                .with_error_code(moves.error("").unwrap_or(0))
                .with_groups(
                    UPSTREAM_GROUPS
                        .iter()
                        .map(|(id, state)| {
                            ListedGroup::default()
                                .with_group_id(GroupId(StrBytes::from_static_str(id)))
                                .with_protocol_type(StrBytes::from_static_str("consumer"))
                                .with_group_state(StrBytes::from_static_str(state))
                                .with_group_type(StrBytes::from_static_str("classic"))
                        })
                        .collect(),
                )
                .encode(&mut out, v)
                .unwrap(),
            ApiKey::DescribeGroups => {
                let req = DescribeGroupsRequest::decode(&mut b, v).unwrap();
                DescribeGroupsResponse::default()
                    .with_groups(
                        req.groups
                            .into_iter()
                            .map(|id| {
                                let state = UPSTREAM_GROUPS
                                    .iter()
                                    .find(|(g, _)| *g == id.as_str())
                                    .map_or("Dead", |(_, s)| s);
                                let code = moves.error(id.as_str()).unwrap_or(0);
                                DescribedGroup::default()
                                    .with_group_id(id)
                                    .with_error_code(code)
                                    .with_group_state(StrBytes::from_static_str(state))
                                    .with_protocol_type(StrBytes::from_static_str("consumer"))
                            })
                            .collect(),
                    )
                    .encode(&mut out, v)
                    .unwrap()
            }
            // "legacy" consumes partition 1 of every topic upstream; any other group is missing.
            ApiKey::OffsetDelete => {
                let req = OffsetDeleteRequest::decode(&mut b, v).unwrap();
                if let Some(code) = moves.error(req.group_id.as_str()) {
                    OffsetDeleteResponse::default().with_error_code(code)
                } else if req.group_id.as_str() == "legacy" {
                    OffsetDeleteResponse::default().with_topics(
                        req.topics
                            .into_iter()
                            .map(|t| {
                                OffsetDeleteResponseTopic::default()
                                    .with_name(t.name)
                                    .with_partitions(
                                        t.partitions
                                            .iter()
                                            .map(|p| {
                                                OffsetDeleteResponsePartition::default()
                                                    .with_partition_index(p.partition_index)
                                                    .with_error_code(if p.partition_index == 1 {
                                                        86
                                                    } else {
                                                        0
                                                    })
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    )
                } else {
                    OffsetDeleteResponse::default().with_error_code(69)
                }
                .encode(&mut out, v)
                .unwrap()
            }
            ApiKey::DeleteGroups => {
                let req = DeleteGroupsRequest::decode(&mut b, v).unwrap();
                DeleteGroupsResponse::default()
                    .with_results(
                        req.groups_names
                            .into_iter()
                            .map(|id| {
                                let code =
                                    match UPSTREAM_GROUPS.iter().find(|(g, _)| *g == id.as_str()) {
                                        Some((_, "Empty")) => 0,
                                        Some(_) => 68,
                                        None => 69,
                                    };
                                let code = moves.error(id.as_str()).unwrap_or(code);
                                DeletableGroupResult::default()
                                    .with_group_id(id)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
                    .encode(&mut out, v)
                    .unwrap()
            }
            // Every partition taken, or the group's coordinator error on each.
            ApiKey::OffsetCommit => {
                let req = OffsetCommitRequest::decode(&mut b, v).unwrap();
                let code = moves.error(req.group_id.as_str()).unwrap_or(0);
                OffsetCommitResponse::default()
                    .with_topics(
                        req.topics
                            .into_iter()
                            .map(|t| {
                                OffsetCommitResponseTopic::default()
                                    .with_name(t.name)
                                    .with_partitions(
                                        t.partitions
                                            .iter()
                                            .map(|p| {
                                                OffsetCommitResponsePartition::default()
                                                    .with_partition_index(p.partition_index)
                                                    .with_error_code(code)
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    )
                    .encode(&mut out, v)
                    .unwrap()
            }
            ApiKey::TxnOffsetCommit => {
                let req = TxnOffsetCommitRequest::decode(&mut b, v).unwrap();
                let code = moves.error(req.group_id.as_str()).unwrap_or(0);
                TxnOffsetCommitResponse::default()
                    .with_topics(
                        req.topics
                            .into_iter()
                            .map(|t| {
                                TxnOffsetCommitResponseTopic::default()
                                    .with_name(t.name)
                                    .with_partitions(
                                        t.partitions
                                            .iter()
                                            .map(|p| {
                                                TxnOffsetCommitResponsePartition::default()
                                                    .with_partition_index(p.partition_index)
                                                    .with_error_code(code)
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    )
                    .encode(&mut out, v)
                    .unwrap()
            }
            ApiKey::Produce => {
                if drop_produce.load(Ordering::SeqCst) {
                    return;
                }
                if hold_produce
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
                {
                    continue;
                }
                // As Kafka: acks=0 is not answered.
                if ProduceRequest::decode(&mut b, v).unwrap().acks == 0 {
                    continue;
                }
                let answer = ProduceResponse::default()
                    .with_responses(vec![TopicProduceResponse::default()
                        .with_name(TopicName(StrBytes::from_static_str("from-upstream")))]);
                // v10+ (KIP-951): "partition 0 moved to node NODE, here is where it listens".
                let answer = if v >= 10 {
                    answer.with_node_endpoints(vec![NodeEndpoint::default()
                        .with_node_id(NODE.into())
                        .with_host(StrBytes::from(me.ip().to_string()))
                        .with_port(i32::from(me.port()))])
                } else {
                    answer
                };
                answer.encode(&mut out, v).unwrap()
            }
            _ => return,
        }
        let n = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&n.to_be_bytes());
        if s.write_all(&out).is_err() {
            return;
        }
    }
}

/// The fake upstream's own groups (id, state): a team's group from before koord, Empty with its
/// offsets, and one whose members talk to the upstream directly.
const UPSTREAM_GROUPS: [(&str, &str); 2] = [("legacy", "Empty"), ("direct", "Stable")];

/// KAFKA_STORAGE_ERROR: an error code koord's group core never uses itself.
const STORAGE_ERROR: i16 = 56;

/// The fake upstream coordinator's OffsetFetch answer (v8), by group:
/// - `in-txn`: partition 0 of each topic has an open transaction's offset: with
///   `require_stable` it answers UNSTABLE_OFFSET_COMMIT (-1), else the last committed, 41;
///   partition 1 is 42;
/// - `loading`: COORDINATOR_LOAD_IN_PROGRESS for the group, every time;
/// - `moved`: NOT_COORDINATOR for the group, every time;
/// - `damaged`: KAFKA_STORAGE_ERROR on every partition;
/// - any other: 7 on every partition.
fn offset_fetch_answer(
    g: &OffsetFetchRequestGroup,
    require_stable: bool,
) -> OffsetFetchResponseGroup {
    let group = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
    match g.group_id.as_str() {
        "loading" => return group.with_error_code(14),
        "moved" => return group.with_error_code(16),
        _ => {}
    }
    let topics = g.topics.clone().unwrap_or_else(|| {
        vec![OffsetFetchRequestTopics::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_indexes(vec![0, 1])]
    });
    group.with_topics(
        topics
            .into_iter()
            .map(|t| {
                OffsetFetchResponseTopics::default()
                    .with_name(t.name)
                    .with_partitions(
                        t.partition_indexes
                            .iter()
                            .map(|&p| {
                                let (offset, code) = match (g.group_id.as_str(), p) {
                                    ("in-txn", 0) if require_stable => (-1, 88),
                                    ("in-txn", 0) => (41, 0),
                                    ("in-txn", _) => (42, 0),
                                    ("damaged", _) => (-1, STORAGE_ERROR),
                                    _ => (7, 0),
                                };
                                OffsetFetchResponsePartitions::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(offset)
                                    .with_committed_leader_epoch(-1)
                                    .with_metadata(Some(StrBytes::default()))
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

/// koord in front of `up`; a group's upstream operation retries for at most 1 s.
fn gateway(up: &Upstream) -> Option<Koord> {
    Koord::start_owned(
        "gateway",
        &[
            &format!("upstream.bootstrap.servers=127.0.0.1:{}", up.addr.port()),
            "upstream.groups.topic.partitions=1",
            "upstream.write.timeout.ms=1000",
        ],
    )
}

/// The port koord presents the fake broker on, from Metadata through koord.
fn broker_port(koord: &Koord) -> u16 {
    let md: MetadataResponse = koord
        .connect()
        .send(12, &MetadataRequest::default().with_topics(None));
    // The upstream broker, and koord itself (the group coordinator, as Kafka names its
    // coordinators among its brokers) on its main port.
    assert_eq!(md.brokers.len(), 2);
    let own = &md.brokers[1];
    assert_ne!(own.node_id.0, NODE);
    assert_eq!(own.port, i32::from(koord.addr().port()));
    let b = &md.brokers[0];
    assert_eq!(b.node_id.0, NODE);
    assert_eq!(b.host.as_str(), "127.0.0.1");
    b.port as u16
}

fn produce(acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(1000)
}

#[test]
fn clients_learn_only_koords_endpoints_and_get_upstreams_answers() {
    let up = Upstream::start();
    let Some(koord) = gateway(&up) else { return };
    let port = broker_port(&koord);
    assert_ne!(port, up.addr.port(), "the upstream address is never shown");
    assert_ne!(
        port,
        koord.addr().port(),
        "the broker has a port of its own"
    );

    // ApiVersions: koord's group APIs beside the upstream's (capped) Produce.
    let versions: ApiVersionsResponse = koord.connect().send(3, &api_versions_request());
    let range = |k: ApiKey| {
        versions
            .api_keys
            .iter()
            .find(|a| a.api_key == k as i16)
            .map(|a| (a.min_version, a.max_version))
    };
    assert_eq!(range(ApiKey::Produce), Some((0, 13)));
    assert!(range(ApiKey::JoinGroup).is_some(), "koord's own");
    assert_eq!(range(ApiKey::Fetch), None, "upstream does not offer it");
    // Transactions are upstream's: its transaction protocol, with its features epoch.
    let tv = versions
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map(|f| f.max_version_level);
    assert_eq!(tv, Some(2), "{versions:?}");
    assert_eq!(versions.finalized_features_epoch, UPSTREAM_FEATURES_EPOCH);

    let mut c = Client::connect(SocketAddr::from(([127, 0, 0, 1], port)));
    let r: ProduceResponse = c.send(9, &produce(-1));
    assert_eq!(r.responses[0].name.0.as_str(), "from-upstream");
    // The frame reached upstream as the client sent it, but for the correlation id.
    let sent = frame(ApiKey::Produce, 9, 4242, |b| produce(-1).encode(b, 9));
    let seen = up.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.len(), sent.len() - 4);
    assert_eq!(&seen[..4], &sent[4..8]);
    assert_eq!(&seen[8..], &sent[12..]);
    // From v10 a moved leader comes with its endpoint: koord's, never upstream's.
    for v in [10, 12, 13] {
        let r: ProduceResponse = c.send(v, &produce(-1));
        assert_eq!(
            r.responses.len(),
            1,
            "upstream's answer (by topic id from v13)"
        );
        let named: Vec<(i32, String, i32)> = r
            .node_endpoints
            .iter()
            .map(|e| (e.node_id.0, e.host.to_string(), e.port))
            .collect();
        assert_eq!(
            named,
            vec![(NODE, "127.0.0.1".to_string(), i32::from(port))],
            "v{v}"
        );
    }
}

#[test]
fn upstream_broker_port_base_keeps_a_brokers_port_across_restarts() {
    let up = Upstream::start();
    // A port free now, for the fake broker (node id NODE) to be presented on.
    let want = {
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let base = format!("upstream.broker.port.base={}", want - NODE as u16);
    let sets = [
        format!("upstream.bootstrap.servers=127.0.0.1:{}", up.addr.port()),
        "upstream.groups.topic.partitions=1".to_string(),
        base,
    ];
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    for _ in 0..2 {
        let Some(koord) = Koord::start_owned("gateway", &sets) else {
            return;
        };
        assert_eq!(broker_port(&koord), want);
        // Served there: the fake broker answers through it.
        let mut c = Client::connect(SocketAddr::from(([127, 0, 0, 1], want)));
        let r: ProduceResponse = c.send(9, &produce(-1));
        assert_eq!(r.responses[0].name.0.as_str(), "from-upstream");
        drop(c);
        drop(koord); // stops it, releasing the port for the next start
    }
}

#[test]
fn pipelined_requests_are_answered_in_order_and_acks_0_gets_no_answer() {
    let up = Upstream::start();
    let Some(koord) = gateway(&up) else { return };
    let port = broker_port(&koord);
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(common::DEADLINE)).unwrap();
    // Forwarded, unanswered (acks=0), the gateway's ApiVersions, koord's own (two pipelined
    // Heartbeats and a LeaveGroup, answered by koord while the forwarded one before them
    // is still upstream), forwarded: in one write.
    let heartbeat = |b: &mut BytesMut| {
        HeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("no-such-group")))
            .with_generation_id(1)
            .with_member_id(StrBytes::from_static_str("m"))
            .encode(b, 4)
    };
    let mut burst = Vec::new();
    burst.extend_from_slice(&frame(ApiKey::Produce, 9, 1, |b| produce(-1).encode(b, 9)));
    burst.extend_from_slice(&frame(ApiKey::Produce, 9, 2, |b| produce(0).encode(b, 9)));
    burst.extend_from_slice(&frame(ApiKey::ApiVersions, 3, 3, |b| {
        ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("t"))
            .with_client_software_version(StrBytes::from_static_str("1"))
            .encode(b, 3)
    }));
    burst.extend_from_slice(&frame(ApiKey::Heartbeat, 4, 4, heartbeat));
    burst.extend_from_slice(&frame(ApiKey::Heartbeat, 4, 5, heartbeat));
    burst.extend_from_slice(&frame(ApiKey::LeaveGroup, 3, 6, |b| {
        LeaveGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("no-such-group")))
            .with_members(vec![
                MemberIdentity::default().with_member_id(StrBytes::from_static_str("m"))
            ])
            .encode(b, 3)
    }));
    burst.extend_from_slice(&frame(ApiKey::Produce, 9, 7, |b| produce(1).encode(b, 9)));
    s.write_all(&burst).unwrap();
    let mut c = Client::from_stream(s);
    for (key, v, corr) in [
        (ApiKey::Produce, 9, 1),
        (ApiKey::ApiVersions, 3, 3),
        (ApiKey::Heartbeat, 4, 4),
        (ApiKey::Heartbeat, 4, 5),
        (ApiKey::LeaveGroup, 3, 6),
        (ApiKey::Produce, 9, 7),
    ] {
        c.read_response(key, v, corr)
            .unwrap_or_else(|e| panic!("{key:?} corr {corr}: {e}"));
    }
    // A forwarded request, then koord's own, and nothing after them (as a client asks for
    // Metadata and FindCoordinator at start): both answers leave without a further request.
    let mut burst = Vec::new();
    burst.extend_from_slice(&frame(ApiKey::Produce, 9, 8, |b| produce(-1).encode(b, 9)));
    burst.extend_from_slice(&frame(ApiKey::Heartbeat, 4, 9, heartbeat));
    let mut s = c.stream();
    s.write_all(&burst).unwrap();
    for (key, v, corr) in [(ApiKey::Produce, 9, 8), (ApiKey::Heartbeat, 4, 9)] {
        c.read_response(key, v, corr)
            .unwrap_or_else(|e| panic!("{key:?} corr {corr}: {e}"));
    }
    let produced = up
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|f| f[..2] == [0, 0])
        .count();
    assert_eq!(produced, 4, "the acks=0 request was forwarded too");
}

#[test]
fn an_upstream_that_goes_away_closes_the_client_connection_unanswered() {
    let up = Upstream::start();
    let Some(koord) = gateway(&up) else { return };
    let port = broker_port(&koord);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut c = Client::connect(addr);
    let _: ProduceResponse = c.send(9, &produce(-1));

    up.drop_produce.store(true, Ordering::SeqCst);
    let e = c.try_send::<ProduceRequest>(9, &produce(-1)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{e}");

    // Upstream is back: a new client connection reaches it again.
    up.drop_produce.store(false, Ordering::SeqCst);
    let mut c = Client::connect(addr);
    let r: ProduceResponse = c.send(9, &produce(-1));
    assert_eq!(r.responses[0].name.0.as_str(), "from-upstream");
}

/// OffsetFetch through koord's v8 (several groups) and v7 (one group) paths: each partition's
/// code and each group's code as the upstream coordinator answered them.
#[test]
fn offset_fetch_passes_upstreams_error_codes_on() {
    let up = Upstream::start();
    let Some(koord) = gateway(&up) else { return };
    let mut c = koord.connect();
    let topic = || {
        OffsetFetchRequestTopics::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_indexes(vec![0, 1])
    };
    let group = |id: &'static str| {
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(StrBytes::from_static_str(id)))
            .with_topics(Some(vec![topic()]))
    };
    let ask = |require_stable: bool| {
        OffsetFetchRequest::default()
            .with_require_stable(require_stable)
            .with_groups(
                ["in-txn", "damaged", "loading", "moved", "plain"]
                    .map(group)
                    .into(),
            )
    };
    // (offset, code) per partition, or the group's code.
    let answers = |r: &OffsetFetchResponse| -> Vec<Result<Vec<(i64, i16)>, i16>> {
        r.groups
            .iter()
            .map(|g| {
                if g.error_code != 0 {
                    return Err(g.error_code);
                }
                Ok(g.topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| (p.committed_offset, p.error_code))
                    .collect())
            })
            .collect()
    };
    let stable: OffsetFetchResponse = c.send(8, &ask(true));
    assert_eq!(
        answers(&stable),
        vec![
            Ok(vec![(-1, 88), (42, 0)]),
            Ok(vec![(-1, STORAGE_ERROR), (-1, STORAGE_ERROR)]),
            Err(14),
            Err(14),
            Ok(vec![(7, 0), (7, 0)]),
        ],
        "UNSTABLE_OFFSET_COMMIT and a code koord has no name for reach the client as upstream \
         answered; an upstream coordinator still loading or moved once koord's retries end is \
         COORDINATOR_LOAD_IN_PROGRESS, never NOT_COORDINATOR (koord is the coordinator)"
    );
    let unstable: OffsetFetchResponse = c.send(8, &ask(false));
    assert_eq!(answers(&unstable)[0], Ok(vec![(41, 0), (42, 0)]));

    // v7: one group, the group's code at the top level.
    let one = |id: &'static str| {
        OffsetFetchRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str(id)))
            .with_require_stable(true)
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_indexes(vec![0, 1])]))
    };
    let r: OffsetFetchResponse = c.send(7, &one("in-txn"));
    let codes: Vec<(i64, i16)> = r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.committed_offset, p.error_code))
        .collect();
    assert_eq!((r.error_code, codes), (0, vec![(-1, 88), (42, 0)]));
    let r: OffsetFetchResponse = c.send(7, &one("damaged"));
    assert!(r.topics[0]
        .partitions
        .iter()
        .all(|p| p.error_code == STORAGE_ERROR));
    let r: OffsetFetchResponse = c.send(7, &one("loading"));
    assert_eq!(r.error_code, 14);
}

/// Upstream's group coordinator moving or loading is koord's business, not its clients': every
/// group API koord sends upstream retries through NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS
/// and COORDINATOR_NOT_AVAILABLE (FindCoordinator's too) and answers as if nothing happened;
/// a coordinator that never comes back within `upstream.write.timeout.ms` is answered
/// COORDINATOR_LOAD_IN_PROGRESS, which clients retry on the same coordinator, never
/// NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE.
#[test]
fn upstream_coordinator_moves_are_retried_and_never_reach_the_client() {
    let up = Upstream::start();
    let Some(koord) = gateway(&up) else { return };
    let mut c = koord.connect();
    let gid = |id: &str| GroupId(StrBytes::from_string(id.to_string()));
    let t = || TopicName(StrBytes::from_static_str("t"));
    // Each request below meets three coordinator errors upstream first.
    let moving = |key: ApiKey| {
        up.moving.store(3, Ordering::SeqCst);
        up.asked(key)
    };

    let fetch = |c: &mut Client, id: &str| -> Result<Vec<i64>, i16> {
        let r: OffsetFetchResponse = c.send(
            8,
            &OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(gid(id))
                .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                    .with_name(t())
                    .with_partition_indexes(vec![0, 1])]))]),
        );
        let g = &r.groups[0];
        if g.error_code != 0 {
            return Err(g.error_code);
        }
        Ok(g.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.committed_offset)
            .collect())
    };
    let before = moving(ApiKey::OffsetFetch);
    assert_eq!(fetch(&mut c, "plain"), Ok(vec![7, 7]));
    assert_eq!(
        up.asked(ApiKey::OffsetFetch) - before,
        4,
        "three refused, then served"
    );
    assert_eq!(fetch(&mut c, "moved"), Err(14));

    let commit = |c: &mut Client, id: &str| -> Vec<i16> {
        let r: OffsetCommitResponse = c.send(
            8,
            &OffsetCommitRequest::default()
                .with_group_id(gid(id))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(t())
                    .with_partitions(vec![OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(5)])]),
        );
        r.topics[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect()
    };
    let before = moving(ApiKey::OffsetCommit);
    assert_eq!(commit(&mut c, "committer"), vec![0]);
    assert_eq!(up.asked(ApiKey::OffsetCommit) - before, 4);
    assert_eq!(commit(&mut c, "moved-commit"), vec![14]);

    let txn_commit = |c: &mut Client, id: &str| -> Vec<i16> {
        let r: TxnOffsetCommitResponse = c.send(
            3,
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("tx")))
                .with_group_id(gid(id))
                .with_producer_id(ProducerId(1))
                .with_producer_epoch(0)
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                    .with_name(t())
                    .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(5)])]),
        );
        r.topics[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect()
    };
    let before = moving(ApiKey::TxnOffsetCommit);
    assert_eq!(txn_commit(&mut c, "txn-committer"), vec![0]);
    assert_eq!(up.asked(ApiKey::TxnOffsetCommit) - before, 4);
    assert_eq!(txn_commit(&mut c, "moved-txn"), vec![14]);

    let describe = |c: &mut Client, id: &str| -> (i16, String) {
        let r: DescribeGroupsResponse = c.send(
            5,
            &DescribeGroupsRequest::default().with_groups(vec![gid(id)]),
        );
        (r.groups[0].error_code, r.groups[0].group_state.to_string())
    };
    let before = moving(ApiKey::DescribeGroups);
    assert_eq!(describe(&mut c, "legacy"), (0, "Empty".into()));
    assert_eq!(up.asked(ApiKey::DescribeGroups) - before, 4);
    assert_eq!(describe(&mut c, "moved").0, 14);

    let offset_delete = |c: &mut Client, id: &str| -> (i16, Vec<i16>) {
        let r: OffsetDeleteResponse = c.send(
            0,
            &OffsetDeleteRequest::default()
                .with_group_id(gid(id))
                .with_topics(vec![OffsetDeleteRequestTopic::default()
                    .with_name(t())
                    .with_partitions(vec![
                        OffsetDeleteRequestPartition::default().with_partition_index(0)
                    ])]),
        );
        let codes = r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .collect();
        (r.error_code, codes)
    };
    let before = moving(ApiKey::OffsetDelete);
    assert_eq!(offset_delete(&mut c, "legacy"), (0, vec![0]));
    assert_eq!(up.asked(ApiKey::OffsetDelete) - before, 4);
    assert_eq!(offset_delete(&mut c, "moved").0, 14);

    let delete = |c: &mut Client, id: &str| -> i16 {
        let r: DeleteGroupsResponse = c.send(
            2,
            &DeleteGroupsRequest::default().with_groups_names(vec![gid(id)]),
        );
        r.results[0].error_code
    };
    let before = moving(ApiKey::DeleteGroups);
    assert_eq!(delete(&mut c, "legacy"), 0);
    assert_eq!(up.asked(ApiKey::DeleteGroups) - before, 4);
    assert_eq!(delete(&mut c, "moved"), 14);

    let before = moving(ApiKey::ListGroups);
    let r: ListGroupsResponse = c.send(4, &ListGroupsRequest::default());
    assert_eq!(r.error_code, 0);
    assert!(r.groups.iter().any(|g| g.group_id.as_str() == "legacy"));
    assert_eq!(up.asked(ApiKey::ListGroups) - before, 4);

    // FindCoordinator upstream answering COORDINATOR_NOT_AVAILABLE is retried too.
    let before = moving(ApiKey::OffsetFetch);
    assert_eq!(fetch(&mut c, "found-late"), Ok(vec![7, 7]));
    assert!(up.asked(ApiKey::OffsetFetch) - before >= 1);
    assert!(
        up.moving.load(Ordering::SeqCst) == 0,
        "every upstream error was met"
    );
}

/// The upstream's groups koord does not have: listed through koord as upstream lists them
/// (filters applied), described as upstream describes them, their offsets and themselves
/// deleted upstream with upstream's answers.
#[test]
fn upstream_groups_koord_does_not_have_are_listed_described_and_deleted_upstream() {
    let up = Upstream::start();
    let Some(koord) = gateway(&up) else { return };
    let mut c = koord.connect();
    let list = |c: &mut Client, v: i16, states: &[&'static str]| -> Vec<(String, String)> {
        let r: ListGroupsResponse = c.send(
            v,
            &ListGroupsRequest::default().with_states_filter(
                states
                    .iter()
                    .map(|s| StrBytes::from_static_str(s))
                    .collect(),
            ),
        );
        assert_eq!(r.error_code, 0);
        r.groups
            .iter()
            .map(|g| (g.group_id.as_str().to_string(), g.group_state.to_string()))
            .collect()
    };
    let both = vec![
        ("direct".to_string(), "Stable".to_string()),
        ("legacy".to_string(), "Empty".to_string()),
    ];
    assert_eq!(list(&mut c, 5, &[]), both);
    assert_eq!(list(&mut c, 4, &["empty"]), vec![both[1].clone()]);
    assert_eq!(
        list(&mut c, 3, &[]),
        vec![
            ("direct".into(), String::new()),
            ("legacy".into(), String::new())
        ],
        "no state before v4"
    );

    let describe = |c: &mut Client, v: i16, id: &'static str| -> (i16, String, String) {
        let r: DescribeGroupsResponse = c.send(
            v,
            &DescribeGroupsRequest::default()
                .with_groups(vec![GroupId(StrBytes::from_static_str(id))]),
        );
        let g = &r.groups[0];
        (
            g.error_code,
            g.group_state.to_string(),
            g.protocol_type.to_string(),
        )
    };
    assert_eq!(
        describe(&mut c, 5, "legacy"),
        (0, "Empty".into(), "consumer".into())
    );
    assert_eq!(
        describe(&mut c, 6, "legacy"),
        (0, "Empty".into(), "consumer".into())
    );
    // Not upstream either: missing, as koord answers a missing group.
    assert_eq!(
        describe(&mut c, 5, "gone"),
        (0, "Dead".into(), String::new())
    );
    assert_eq!(describe(&mut c, 6, "gone").0, 69);

    let offset_delete = |c: &mut Client, id: &'static str| -> (i16, Vec<i16>) {
        let r: OffsetDeleteResponse = c.send(
            0,
            &OffsetDeleteRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str(id)))
                .with_topics(vec![OffsetDeleteRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str("t")))
                    .with_partitions(
                        (0..3)
                            .map(|p| {
                                OffsetDeleteRequestPartition::default().with_partition_index(p)
                            })
                            .collect(),
                    )]),
        );
        let codes = r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .collect();
        (r.error_code, codes)
    };
    assert_eq!(
        offset_delete(&mut c, "legacy"),
        (0, vec![0, 86, 3]),
        "deleted upstream; GROUP_SUBSCRIBED_TO_TOPIC from upstream; a partition t does not have"
    );
    assert_eq!(offset_delete(&mut c, "gone"), (69, vec![]));

    let r: DeleteGroupsResponse = c.send(
        2,
        &DeleteGroupsRequest::default().with_groups_names(
            ["legacy", "direct", "gone"]
                .map(|g| GroupId(StrBytes::from_static_str(g)))
                .into(),
        ),
    );
    let codes: Vec<i16> = r.results.iter().map(|r| r.error_code).collect();
    assert_eq!(
        codes,
        vec![0, 68, 69],
        "deleted upstream; NON_EMPTY_GROUP from upstream; GROUP_ID_NOT_FOUND"
    );
    let asked = up
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|f| f[..2] == (ApiKey::DeleteGroups as i16).to_be_bytes())
        .count();
    assert_eq!(
        asked, 3,
        "each group koord does not have was asked of upstream"
    );
}

/// /metrics counts every request a gateway serves, koord's own and forwarded alike, per API
/// and version, with its latency.
#[test]
fn metrics_count_every_request_forwarded_or_not() {
    let up = Upstream::start();
    let port = free_port();
    let Some(koord) = Koord::start_owned(
        "metrics_count_every_request_forwarded_or_not",
        &[
            &format!("upstream.bootstrap.servers=127.0.0.1:{}", up.addr.port()),
            "upstream.groups.topic.partitions=1",
            &format!("http.listen=127.0.0.1:{port}"),
        ],
    ) else {
        return;
    };
    let http = SocketAddr::from(([127, 0, 0, 1], port));
    let fake = broker_port(&koord);
    // Forwarded: Produce (acks=1 answered, acks=0 not) on the fake broker's port.
    let mut b = Client::connect(SocketAddr::from(([127, 0, 0, 1], fake)));
    let _: ProduceResponse = b.send(9, &produce(1));
    let corr = b.correlation_id();
    b.send_bytes(&frame(ApiKey::Produce, 9, corr, |w| {
        produce(0).encode(w, 9)
    }))
    .unwrap();
    // koord's own: OffsetFetch (answered from upstream's offsets) and DescribeGroups.
    let mut c = koord.connect();
    let _: OffsetFetchResponse = c.send(
        8,
        &OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(StrBytes::from_static_str("plain")))]),
    );
    // Answered after the acks=0 one was forwarded: every Produce has been counted.
    let _: ProduceResponse = b.send(9, &produce(1));
    let text = http_path(http, "/metrics").1;
    let count = |api: &str, v: i16| -> u64 {
        let line = format!("koord_requests_total{{api=\"{api}\",version=\"{v}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    };
    assert_eq!(
        count("Produce", 9),
        3,
        "forwarded, acks=0 included:\n{text}"
    );
    assert_eq!(count("OffsetFetch", 8), 1, "koord's own:\n{text}");
    assert!(
        count("Metadata", 12) >= 1,
        "forwarded and rewritten:\n{text}"
    );
    assert!(
        text.contains("koord_request_duration_seconds_count{api=\"Produce\"}"),
        "latency too:\n{text}"
    );
}

/// Metadata (every topic) over `c`.
fn metadata_over(c: &mut Client) -> MetadataResponse {
    c.send(12, &MetadataRequest::default().with_topics(None))
}

/// A gateway with a SASL_PLAINTEXT listener beside the PLAINTEXT one: each listener has its
/// own port for the upstream broker and tells its clients only its own ports; on the SASL
/// listener nothing is forwarded before koord's own authentication succeeds (not after a
/// wrong password either), and after it the requests reach upstream.
#[test]
fn a_sasl_listener_forwards_nothing_before_authentication() {
    use common::sasl::login;
    if common::bootstrap().is_some() {
        eprintln!("SKIPPED a_sasl_listener_forwards_nothing_before_authentication: it needs its own koord");
        return;
    }
    let up = Upstream::start();
    let sasl_port = common::free_port();
    let koord = Koord::spawn_with(|addr| {
        vec![
            format!("upstream.bootstrap.servers=127.0.0.1:{}", up.addr.port()),
            "upstream.groups.topic.partitions=1".into(),
            format!("listeners=PLAINTEXT://{addr},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"),
            "sasl.admin.user=alice".into(),
            "sasl.admin.password=alice-secret".into(),
            "connection.failed.authentication.delay.ms=0".into(),
        ]
    });
    let plain_port = broker_port(&koord);
    let sasl_addr = SocketAddr::from(([127, 0, 0, 1], sasl_port));
    let produced = || {
        up.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|f| f[..2] == [0, 0])
            .count()
    };

    // Metadata on the SASL listener: its own ports, never the PLAINTEXT listener's.
    let mut c = Client::connect(sasl_addr);
    assert_eq!(
        login(&mut c, "SCRAM-SHA-512", "alice", "alice-secret").error_code,
        0
    );
    let md = metadata_over(&mut c);
    let sasl_broker = md.brokers.iter().find(|b| b.node_id.0 == NODE).unwrap();
    let own = md.brokers.iter().find(|b| b.node_id.0 != NODE).unwrap();
    assert_eq!(
        own.port,
        i32::from(sasl_port),
        "koord on the client's listener"
    );
    let sasl_broker_port = sasl_broker.port as u16;
    assert_ne!(sasl_broker_port, plain_port, "a port per listener");
    assert_ne!(sasl_broker_port, up.addr.port());
    let broker_addr = SocketAddr::from(([127, 0, 0, 1], sasl_broker_port));

    // Unauthenticated: ApiVersions is answered (and names the SASL APIs), a Produce closes.
    let mut c = Client::connect(broker_addr);
    let versions: ApiVersionsResponse = c.send(3, &api_versions_request());
    assert!(versions
        .api_keys
        .iter()
        .any(|a| a.api_key == ApiKey::SaslHandshake as i16));
    let before = produced();
    c.send_bytes(&frame(ApiKey::Produce, 9, 1, |b| produce(-1).encode(b, 9)))
        .unwrap();
    c.expect_closed();

    // A wrong password: refused, closed, nothing forwarded.
    let mut c = Client::connect(broker_addr);
    let r = login(&mut c, "PLAIN", "alice", "wrong");
    assert_eq!(
        common::err(r.error_code),
        Some(kafka_protocol::ResponseError::SaslAuthenticationFailed)
    );
    c.expect_closed();
    assert_eq!(produced(), before, "nothing reached upstream");

    // Authenticated: forwarded.
    let mut c = Client::connect(broker_addr);
    assert_eq!(
        login(&mut c, "PLAIN", "alice", "alice-secret").error_code,
        0
    );
    let r: ProduceResponse = c.send(9, &produce(-1));
    assert_eq!(r.responses[0].name.0.as_str(), "from-upstream");
    assert_eq!(produced(), before + 1);
    // The users are koord's (upstream, which does not even offer the API, is not asked).
    let users: kafka_protocol::messages::DescribeUserScramCredentialsResponse = c.send(
        0,
        &kafka_protocol::messages::DescribeUserScramCredentialsRequest::default(),
    );
    let names: Vec<&str> = users.results.iter().map(|r| r.user.as_str()).collect();
    assert_eq!(names, ["alice"]);
}

/// A write of koord's group records whose partition leader reads the Produce and never
/// answers (paused, or gone without closing the connection) is given up after one try's
/// limit and sent again, within the write's budget: it is not held until the connection's
/// 30 s request timeout, past any budget.
#[test]
fn a_produce_the_leader_never_answers_is_sent_again_within_the_budget() {
    let up = Upstream::start();
    up.hold_produce.store(1, Ordering::SeqCst);
    let client = koord::gateway::client::Upstream::new(
        vec![up.addr.to_string()],
        std::collections::BTreeMap::from([(NODE, up.addr.to_string())]),
    );
    let records = std::collections::BTreeMap::from([(
        0,
        vec![(Bytes::from_static(b"k"), Some(Bytes::from_static(b"v")))],
    )]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let written = rt.block_on(client.produce(
        "__koord_groups",
        &records,
        &std::collections::BTreeMap::new(),
        std::time::Duration::from_secs(15),
    ));
    assert!(written.is_ok(), "{written:?}");
    assert_eq!(
        up.asked(ApiKey::Produce),
        2,
        "the held request, then the one answered"
    );
}
