//! The HTTP listener (issue 21): `/readyz` while a store of 1M offsets loads, and bad HTTP input
//! that must not touch the Kafka listener. Plain HTTP/1.1 over std sockets, no client library.
//!
//! `/readyz` is checked in-process so that "not ready while loading" is deterministic: the
//! listener serves a broker whose store is opened but not yet loaded (as `koord serve` does in
//! the gap), then the real load of 1M offsets runs while the test polls.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{free_port, http_get as get, http_path as path, s, Koord, DEADLINE};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::{GroupId, HeartbeatRequest, JoinGroupRequest, SyncGroupRequest};
use koord::broker::Broker;
use koord::config::Config;
use koord::storage::{EmbeddedStore, Mutation, Store};
use koord::vocab::{GroupId as DomainGroupId, OffsetAndMetadata, Timestamp, TopicPartition};

const GROUPS: usize = 1_000;
const PARTITIONS: usize = 1_000;

#[test]
fn readyz_is_not_ready_while_a_million_offsets_load_and_ready_after() {
    let dir = std::env::temp_dir().join(common::unique("koord-readyz"));
    std::fs::create_dir_all(&dir).unwrap();
    {
        let store = EmbeddedStore::open(&dir).expect("open the store");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        for g in 0..GROUPS {
            let group = DomainGroupId::new(format!("g{g}"));
            let batch: Vec<Mutation> = (0..PARTITIONS)
                .map(|p| Mutation::PutOffset {
                    group: group.clone(),
                    tp: TopicPartition {
                        topic: "t".into(),
                        partition: p as i32,
                    },
                    offset: OffsetAndMetadata {
                        offset: p as i64,
                        leader_epoch: None,
                        metadata: String::new(),
                        commit_timestamp: Timestamp(now),
                        expire_timestamp: None,
                    },
                })
                .collect();
            store.apply(&batch, false).unwrap();
        }
        store.sync().unwrap();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = Config::load(
            None,
            &[
                format!("data.dir=\"{}\"", dir.display()),
                "topics=t:1000".into(),
            ],
        )
        .unwrap();
        let broker = Arc::new(Broker::open(config).expect("open the broker"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let http = tokio::spawn(koord::observe::http::run(listener, broker.clone(), async {
            let _ = stop_rx.await;
        }));
        let poll = move |p: &'static str| tokio::task::spawn_blocking(move || path(addr, p));

        // Opened, not loaded: what `koord serve` serves between binding and the load's end.
        assert_eq!(poll("/healthz").await.unwrap().0, 200);
        let (status, body) = poll("/readyz").await.unwrap();
        assert_eq!((status, body.as_str()), (503, "loading the store\n"));
        let metrics = poll("/metrics").await.unwrap().1;
        assert!(metrics.contains("koord_store_loading 1"), "{metrics}");

        let started = Instant::now();
        let loader = broker.clone();
        let load = tokio::spawn(async move { loader.load_groups().await });
        let mut seen = Vec::new();
        loop {
            let (status, _) = poll("/readyz").await.unwrap();
            if seen.last() != Some(&status) {
                seen.push(status);
            }
            if status == 200 {
                break;
            }
            assert_eq!(status, 503);
            assert!(started.elapsed() < Duration::from_secs(120), "never ready");
        }
        load.await.unwrap().expect("the store loads");
        // Ready only once every offset is served.
        let (status, body) = poll("/api/groups/g999").await.unwrap();
        assert_eq!(status, 200);
        assert!(
            body.contains(&format!("\"offsets\": {PARTITIONS}")),
            "{body}"
        );
        assert_eq!(broker.coordinator.group_ids().len(), GROUPS);
        eprintln!(
            "readyz answers over the load: {seen:?}; loaded in {:?}",
            started.elapsed()
        );
        let _ = stop_tx.send(());
        http.await.unwrap();
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_http_input_leaves_the_kafka_listener_alone() {
    let port = free_port();
    let http_set = format!("http.listen=127.0.0.1:{port}");
    let Some(koord) = Koord::start_owned(
        "bad_http_input_leaves_the_kafka_listener_alone",
        &[&http_set, "group.initial.rebalance.delay.ms=0"],
    ) else {
        return;
    };
    let http = SocketAddr::from(([127, 0, 0, 1], port));

    // Unknown paths, other methods, bad group ids.
    assert_eq!(path(http, "/nope").0, 404);
    assert_eq!(path(http, "/api/groups/").0, 404);
    assert_eq!(path(http, "/api/groups/%zz").0, 404);
    assert_eq!(path(http, "/api/groups/missing").0, 404);
    assert_eq!(path(http, "/metrics/../x").0, 404);
    assert_eq!(
        get(http, "POST / HTTP/1.1\r\nHost: k\r\nContent-Length: 10000000000\r\nConnection: close\r\n\r\n").0,
        405
    );
    // An oversized request head is refused without being buffered whole.
    let huge = format!(
        "GET / HTTP/1.1\r\nHost: k\r\nX-Big: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    assert_eq!(get(http, &huge).0, 431);
    // Garbage.
    assert_eq!(
        get(http, "\x16\x03\x01\x02\x00\x01\x00\x01\x7f\x03\x03\r\n\r\n").0,
        400
    );

    // Slow clients: request heads that never end.
    let mut slow = Vec::new();
    for _ in 0..8 {
        let mut c = TcpStream::connect(http).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: k\r\nX-Slow: ")
            .unwrap();
        slow.push(c);
    }

    // Meanwhile a Kafka member joins, syncs and heartbeats as usual.
    let mut client = koord.connect();
    let group = GroupId(s("observe-bad-http"));
    let join = JoinGroupRequest::default()
        .with_group_id(group.clone())
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(bytes::Bytes::from_static(&[
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ]))]);
    let first = client.send(5, &join);
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    let joined = client.send(5, &join.clone().with_member_id(first.member_id.clone()));
    assert_eq!(joined.error_code, 0);
    let synced = client.send(
        3,
        &SyncGroupRequest::default()
            .with_group_id(group.clone())
            .with_generation_id(joined.generation_id)
            .with_member_id(joined.member_id.clone()),
    );
    assert_eq!(synced.error_code, 0);
    let started = Instant::now();
    for _ in 0..50 {
        let hb = client.send(
            3,
            &HeartbeatRequest::default()
                .with_group_id(group.clone())
                .with_generation_id(joined.generation_id)
                .with_member_id(joined.member_id.clone()),
        );
        assert_eq!(hb.error_code, 0);
    }
    assert!(started.elapsed() < DEADLINE);
    // The HTTP listener still answers others too.
    assert_eq!(path(http, "/healthz"), (200, "ok\n".to_owned()));
    let (status, body) = path(http, "/api/groups/observe-bad-http");
    assert_eq!(status, 200);
    assert!(body.contains("\"state\": \"Stable\""), "{body}");
    drop(slow);
}

/// An OTLP push as Kafka's Java client makes one: its resource names the group and member, one
/// gauge.
fn otlp_push(group: &str, member: &str, lag: f64) -> Vec<u8> {
    use koord::telemetry::otlp::{
        Any, AnyValue, Gauge, KeyValue, Metric, MetricsData, Number, NumberDataPoint, Resource,
        ResourceMetrics, ScopeMetrics,
    };
    use prost::Message;
    let kv = |k: &str, v: &str| KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(Any::String(v.into())),
        }),
    };
    MetricsData {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![kv("group_id", group), kv("group_member_id", member)],
            }),
            scope_metrics: vec![ScopeMetrics {
                metrics: vec![Metric {
                    name: "org.apache.kafka.consumer.fetch.manager.records.lag.max".into(),
                    gauge: Some(Gauge {
                        data_points: vec![NumberDataPoint {
                            time_unix_nano: 1,
                            value: Some(Number::AsDouble(lag)),
                            attributes: vec![kv("client-id", "otlp-test")],
                        }],
                    }),
                    sum: None,
                }],
            }],
        }],
    }
    .encode_to_vec()
}

/// KIP-714: GetTelemetrySubscriptions and PushTelemetry answered as Kafka 4.4's
/// `ClientMetricsManager` answers them, error by error, and a pushed metric on `/metrics`
/// beside its group and member. koord only: Kafka 4.4 serves these APIs only with a telemetry
/// receiver plugin configured. The waits for the push interval poll until the push is taken.
#[test]
fn pushed_client_metrics_show_on_metrics_and_bad_pushes_get_kafkas_errors() {
    use kafka_protocol::messages::{GetTelemetrySubscriptionsRequest, PushTelemetryRequest};
    use kafka_protocol::ResponseError;
    use std::io::Write as _;
    let port = free_port();
    let http_set = format!("http.listen=127.0.0.1:{port}");
    let Some(koord) = Koord::start_owned(
        "pushed_client_metrics_show_on_metrics",
        &[
            &http_set,
            "telemetry.push.interval.ms=100",
            "telemetry.max.bytes=2000",
        ],
    ) else {
        return;
    };
    let http = SocketAddr::from(([127, 0, 0, 1], port));
    let mut c = koord.connect();
    let code = |c: i16| ResponseError::try_from_code(c);
    let sub = c.send(0, &GetTelemetrySubscriptionsRequest::default());
    assert_eq!(code(sub.error_code), None, "{sub:?}");
    let id = sub.client_instance_id;
    assert!(!id.is_nil());
    assert_eq!(sub.push_interval_ms, 100);
    assert_eq!(sub.telemetry_max_bytes, 2000);
    assert_eq!(sub.accepted_compression_types, vec![4, 3, 1, 2]);
    assert!(!sub.delta_temporality);
    assert!(sub
        .requested_metrics
        .iter()
        .any(|m| m.as_str() == "org.apache.kafka.consumer.fetch.manager.records.lag"));
    // Asking again at once: too early.
    let again = c.send(
        0,
        &GetTelemetrySubscriptionsRequest::default().with_client_instance_id(id),
    );
    assert_eq!(
        code(again.error_code),
        Some(ResponseError::ThrottlingQuotaExceeded)
    );
    let push = |metrics: Vec<u8>, compression: i8, subscription: i32, terminating: bool| {
        PushTelemetryRequest::default()
            .with_client_instance_id(id)
            .with_subscription_id(subscription)
            .with_compression_type(compression)
            .with_terminating(terminating)
            .with_metrics(bytes::Bytes::from(metrics))
    };
    // Pushes until one is past the push interval (each refused one counts as the last push).
    let taken = |c: &mut common::Client, req: &PushTelemetryRequest| {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let r = c.send(0, req);
            if code(r.error_code) != Some(ResponseError::ThrottlingQuotaExceeded) {
                return code(r.error_code);
            }
            assert!(Instant::now() < deadline, "every push throttled");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let id_sub = sub.subscription_id;
    assert_eq!(
        taken(&mut c, &push(Vec::new(), 0, id_sub + 1, false)),
        Some(ResponseError::UnknownSubscriptionId)
    );
    assert_eq!(
        taken(&mut c, &push(otlp_push("g", "m", 1.0), 9, id_sub, false)),
        Some(ResponseError::UnsupportedCompressionType)
    );
    assert_eq!(
        taken(&mut c, &push(vec![0; 2001], 0, id_sub, false)),
        Some(ResponseError::TelemetryTooLarge)
    );
    assert_eq!(
        taken(&mut c, &push(vec![0xff; 100], 0, id_sub, false)),
        Some(ResponseError::InvalidRecord)
    );
    // A gzip push is decoded and shown.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&otlp_push("g-otlp", "m-otlp", 42.0)).unwrap();
    let gz = gz.finish().unwrap();
    assert_eq!(taken(&mut c, &push(gz, 1, id_sub, false)), None);
    let (status, body) = path(http, "/metrics");
    assert_eq!(status, 200);
    let line = format!(
        "koord_client_metric{{name=\"org.apache.kafka.consumer.fetch.manager.records.lag.max\",client_id=\"koord-wire-test\",client_instance_id=\"{id}\",group_id=\"g-otlp\",member_id=\"m-otlp\"}} 42"
    );
    assert!(body.contains(&line), "{body}");
    // A reserved id; a terminating push (taken early), then nothing more.
    let nil = PushTelemetryRequest::default();
    assert_eq!(
        code(c.send(0, &nil).error_code),
        Some(ResponseError::InvalidRequest)
    );
    assert_eq!(
        code(c.send(0, &push(Vec::new(), 0, id_sub, true)).error_code),
        None
    );
    assert_eq!(
        code(c.send(0, &push(Vec::new(), 0, id_sub, true)).error_code),
        Some(ResponseError::InvalidRequest)
    );
}
