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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use common::{api_versions_request, frame, Client, Koord};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::TopicProduceResponse;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    ProduceResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// A fake upstream broker (node 7): ApiVersions, Metadata naming itself, and Produce answered
/// with a marker topic name, unless `drop_produce` is set: then the connection is closed
/// without an answer. It records every frame it reads.
struct Upstream {
    addr: SocketAddr,
    drop_produce: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<Bytes>>>,
}

const NODE: i32 = 7;

impl Upstream {
    fn start() -> Upstream {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let up = Upstream {
            addr,
            drop_produce: Arc::new(AtomicBool::new(false)),
            seen: Arc::new(Mutex::new(Vec::new())),
        };
        let (drop_produce, seen) = (up.drop_produce.clone(), up.seen.clone());
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                let (drop_produce, seen) = (drop_produce.clone(), seen.clone());
                std::thread::spawn(move || serve(s, addr, &drop_produce, &seen));
            }
        });
        up
    }
}

fn serve(mut s: TcpStream, me: SocketAddr, drop_produce: &AtomicBool, seen: &Mutex<Vec<Bytes>>) {
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
                    .encode(&mut out, v)
                    .unwrap();
            }
            ApiKey::Metadata => {
                // A named topic (koord's group topic) has one partition, led by this broker.
                let asked = MetadataRequest::decode(&mut b, v).unwrap().topics;
                let topics = asked
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|t| t.name)
                    .map(|name| {
                        MetadataResponseTopic::default()
                            .with_name(Some(name))
                            .with_partitions(vec![
                                MetadataResponsePartition::default().with_leader_id(NODE.into())
                            ])
                    })
                    .collect();
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
            ApiKey::Produce => {
                if drop_produce.load(Ordering::SeqCst) {
                    return;
                }
                // As Kafka: acks=0 is not answered.
                if ProduceRequest::decode(&mut b, v).unwrap().acks == 0 {
                    continue;
                }
                ProduceResponse::default()
                    .with_responses(vec![TopicProduceResponse::default()
                        .with_name(TopicName(StrBytes::from_static_str("from-upstream")))])
                    .encode(&mut out, v)
                    .unwrap()
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

fn gateway(up: &Upstream) -> Option<Koord> {
    Koord::start_owned(
        "gateway",
        &[
            &format!("upstream.bootstrap.servers=127.0.0.1:{}", up.addr.port()),
            "upstream.groups.topic.partitions=1",
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
    assert_eq!(range(ApiKey::Produce), Some((0, 9)));
    assert!(range(ApiKey::JoinGroup).is_some(), "koord's own");
    assert_eq!(range(ApiKey::Fetch), None, "upstream does not offer it");

    let mut c = Client::connect(SocketAddr::from(([127, 0, 0, 1], port)));
    let r: ProduceResponse = c.send(9, &produce(-1));
    assert_eq!(r.responses[0].name.0.as_str(), "from-upstream");
    // The frame reached upstream as the client sent it, but for the correlation id.
    let sent = frame(ApiKey::Produce, 9, 4242, |b| produce(-1).encode(b, 9));
    let seen = up.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.len(), sent.len() - 4);
    assert_eq!(&seen[..4], &sent[4..8]);
    assert_eq!(&seen[8..], &sent[12..]);
}

#[test]
fn pipelined_requests_are_answered_in_order_and_acks_0_gets_no_answer() {
    let up = Upstream::start();
    let Some(koord) = gateway(&up) else { return };
    let port = broker_port(&koord);
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(common::DEADLINE)).unwrap();
    // Forwarded, unanswered (acks=0), koord's own, forwarded: in one write.
    let mut burst = Vec::new();
    burst.extend_from_slice(&frame(ApiKey::Produce, 9, 1, |b| produce(-1).encode(b, 9)));
    burst.extend_from_slice(&frame(ApiKey::Produce, 9, 2, |b| produce(0).encode(b, 9)));
    burst.extend_from_slice(&frame(ApiKey::ApiVersions, 3, 3, |b| {
        ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("t"))
            .with_client_software_version(StrBytes::from_static_str("1"))
            .encode(b, 3)
    }));
    burst.extend_from_slice(&frame(ApiKey::Produce, 9, 4, |b| produce(1).encode(b, 9)));
    s.write_all(&burst).unwrap();
    let mut c = Client::from_stream(s);
    for (key, v, corr) in [
        (ApiKey::Produce, 9, 1),
        (ApiKey::ApiVersions, 3, 3),
        (ApiKey::Produce, 9, 4),
    ] {
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
    assert_eq!(produced, 3, "the acks=0 request was forwarded too");
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
