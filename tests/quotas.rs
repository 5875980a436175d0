//! Client quotas on the wire: DescribeClientQuotas (key 48) and AlterClientQuotas (key 49),
//! error by error, and their enforcement: a client over its `producer_byte_rate`,
//! `consumer_byte_rate` or `request_percentage` gets answers with `throttle_time_ms` set (a
//! throttled Fetch answers no records), and its connection is not read until the throttle is
//! over. Each test names its own entities (unique client ids), so they run side by side.
//!
//! With `KOORD_BOOTSTRAP` the same tests run against Apache Kafka 4.4, whose brokers learn a
//! quota from the controller a moment after AlterClientQuotas returns: the tests wait for what
//! they altered to show in DescribeClientQuotas, as clients do, never on a fixed sleep.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{err, s, topic_name, txn, Client, Koord, DEADLINE};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse, FetchRequest, MetadataRequest, ProduceRequest,
};
use kafka_protocol::ResponseError;

/// An entity as `(type, name)` pairs (`None`: the type's default).
type Entity = Vec<(&'static str, Option<String>)>;

fn entity_data(entity: &Entity) -> Vec<EntityData> {
    entity
        .iter()
        .map(|(t, n)| {
            EntityData::default()
                .with_entity_type(s(t))
                .with_entity_name(n.as_deref().map(s))
        })
        .collect()
}

/// An alteration: `Some(v)` sets a key, `None` removes it.
fn entry(entity: &Entity, ops: &[(&str, Option<f64>)]) -> EntryData {
    EntryData::default()
        .with_entity(entity_data(entity))
        .with_ops(
            ops.iter()
                .map(|(k, v)| {
                    OpData::default()
                        .with_key(s(k))
                        .with_value(v.unwrap_or(0.0))
                        .with_remove(v.is_none())
                })
                .collect(),
        )
}

fn alter(
    c: &mut Client,
    version: i16,
    entries: Vec<EntryData>,
    validate_only: bool,
) -> AlterClientQuotasResponse {
    c.send(
        version,
        &AlterClientQuotasRequest::default()
            .with_entries(entries)
            .with_validate_only(validate_only),
    )
}

/// An answered entity (its parts, sorted) with its error and message.
type Answered = (
    BTreeSet<(String, Option<String>)>,
    Option<ResponseError>,
    Option<String>,
);

/// Each answered entity, sorted.
fn results(resp: &AlterClientQuotasResponse) -> Vec<Answered> {
    let mut out: Vec<Answered> = resp
        .entries
        .iter()
        .map(|e| {
            (
                e.entity
                    .iter()
                    .map(|p| {
                        (
                            p.entity_type.to_string(),
                            p.entity_name.as_ref().map(|n| n.to_string()),
                        )
                    })
                    .collect(),
                err(e.error_code),
                e.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn parts(entity: &Entity) -> BTreeSet<(String, Option<String>)> {
    entity
        .iter()
        .map(|(t, n)| (t.to_string(), n.clone()))
        .collect()
}

/// A filter component: match type 0 (exact, `Some`), 1 (default), 2 (any).
fn component(entity_type: &str, match_type: i8, name: Option<&str>) -> ComponentData {
    ComponentData::default()
        .with_entity_type(s(entity_type))
        .with_match_type(match_type)
        .with_match(name.map(s))
}

fn describe(
    c: &mut Client,
    version: i16,
    components: Vec<ComponentData>,
    strict: bool,
) -> DescribeClientQuotasResponse {
    c.send(
        version,
        &DescribeClientQuotasRequest::default()
            .with_components(components)
            .with_strict(strict),
    )
}

/// What a filter finds: each entity's parts with its `(key, value)` quotas, sorted.
type Found = Vec<(BTreeSet<(String, Option<String>)>, Vec<(String, f64)>)>;

fn found(resp: &DescribeClientQuotasResponse) -> Found {
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    let mut out: Found = resp
        .entries
        .as_ref()
        .expect("entries")
        .iter()
        .map(|e| {
            let mut values: Vec<(String, f64)> = e
                .values
                .iter()
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            values.sort_by(|a, b| a.0.cmp(&b.0));
            (
                e.entity
                    .iter()
                    .map(|p| {
                        (
                            p.entity_type.to_string(),
                            p.entity_name.as_ref().map(|n| n.to_string()),
                        )
                    })
                    .collect(),
                values,
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Describes with `components` until the answer is `want` (Kafka's brokers see an alteration a
/// moment after it is acknowledged).
fn await_described(c: &mut Client, components: &[ComponentData], strict: bool, want: &Found) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let got = found(&describe(c, 1, components.to_vec(), strict));
        if &got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "described {got:?}, want {want:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn one(entity: &Entity, values: &[(&str, f64)]) -> Found {
    let mut v: Vec<(String, f64)> = values.iter().map(|(k, x)| (k.to_string(), *x)).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    vec![(parts(entity), v)]
}

#[test]
fn quotas_are_set_described_and_removed() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let app = common::unique("quota-app");
    let user = common::unique("quota-user");
    let by_client: Entity = vec![("client-id", Some(app.clone()))];
    let user_and_client: Entity = vec![
        ("user", Some(user.clone())),
        ("client-id", Some(app.clone())),
    ];
    let user_default_client: Entity = vec![("user", Some(user.clone())), ("client-id", None)];
    // validate_only checks and stores nothing.
    let resp = alter(
        &mut c,
        1,
        vec![entry(&by_client, &[("producer_byte_rate", Some(1024.0))])],
        true,
    );
    assert_eq!(results(&resp), vec![(parts(&by_client), None, None)]);
    let exact_app = [component("client-id", 0, Some(&app))];
    assert_eq!(
        found(&describe(&mut c, 1, exact_app.to_vec(), false)),
        vec![]
    );
    // Set at v0 and v1.
    let resp = alter(
        &mut c,
        0,
        vec![entry(
            &by_client,
            &[
                ("producer_byte_rate", Some(1024.0)),
                ("request_percentage", Some(12.5)),
            ],
        )],
        false,
    );
    assert_eq!(results(&resp), vec![(parts(&by_client), None, None)]);
    let resp = alter(
        &mut c,
        1,
        vec![
            entry(&user_and_client, &[("consumer_byte_rate", Some(2048.0))]),
            entry(
                &user_default_client,
                &[("controller_mutation_rate", Some(3.5))],
            ),
        ],
        false,
    );
    assert_eq!(
        results(&resp),
        // Sorted: the default client id first.
        vec![
            (parts(&user_default_client), None, None),
            (parts(&user_and_client), None, None),
        ]
    );
    await_described(
        &mut c,
        &exact_app,
        true,
        &one(
            &by_client,
            &[("producer_byte_rate", 1024.0), ("request_percentage", 12.5)],
        ),
    );
    // Not strict: every entity with that client id.
    let mut both = one(
        &by_client,
        &[("producer_byte_rate", 1024.0), ("request_percentage", 12.5)],
    );
    both.extend(one(&user_and_client, &[("consumer_byte_rate", 2048.0)]));
    both.sort_by(|a, b| a.0.cmp(&b.0));
    await_described(&mut c, &exact_app, false, &both);
    // The user with the default client id; the user with any client id.
    let exact_user = component("user", 0, Some(&user));
    await_described(
        &mut c,
        &[exact_user.clone(), component("client-id", 1, None)],
        false,
        &one(&user_default_client, &[("controller_mutation_rate", 3.5)]),
    );
    let mut users = one(&user_and_client, &[("consumer_byte_rate", 2048.0)]);
    users.extend(one(
        &user_default_client,
        &[("controller_mutation_rate", 3.5)],
    ));
    users.sort_by(|a, b| a.0.cmp(&b.0));
    await_described(
        &mut c,
        &[exact_user.clone(), component("client-id", 2, None)],
        true,
        &users,
    );
    // The user alone has no quota of its own.
    await_described(&mut c, std::slice::from_ref(&exact_user), true, &vec![]);
    // Change one key, remove another (and one never set).
    let resp = alter(
        &mut c,
        1,
        vec![entry(
            &by_client,
            &[
                ("producer_byte_rate", Some(4096.0)),
                ("request_percentage", None),
                ("consumer_byte_rate", None),
            ],
        )],
        false,
    );
    assert_eq!(results(&resp), vec![(parts(&by_client), None, None)]);
    await_described(
        &mut c,
        &exact_app,
        true,
        &one(&by_client, &[("producer_byte_rate", 4096.0)]),
    );
    // Removing the last key removes the entity.
    alter(
        &mut c,
        1,
        vec![
            entry(&by_client, &[("producer_byte_rate", None)]),
            entry(&user_and_client, &[("consumer_byte_rate", None)]),
            entry(&user_default_client, &[("controller_mutation_rate", None)]),
        ],
        false,
    );
    await_described(&mut c, &exact_app, false, &vec![]);
    await_described(&mut c, &[exact_user], false, &vec![]);
}

/// An alteration and the message Kafka refuses it with.
type BadCase = (Entity, Vec<(&'static str, Option<f64>)>, &'static str);

#[test]
fn bad_alterations_get_kafkas_errors() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let app = common::unique("quota-bad");
    let client: Entity = vec![("client-id", Some(app.clone()))];
    let invalid = Some(ResponseError::InvalidRequest);
    let cases: Vec<BadCase> = vec![
        (vec![], vec![("producer_byte_rate", Some(1.0))], "Invalid empty client quota entity"),
        (vec![("group", Some(app.clone()))], vec![("producer_byte_rate", Some(1.0))], "Unhandled client quota entity type: group"),
        (vec![("user", Some(String::new()))], vec![("producer_byte_rate", Some(1.0))], "Empty user not supported"),
        (
            vec![("ip", Some("127.0.0.1".into())), ("user", Some(app.clone()))],
            vec![("connection_creation_rate", Some(1.0))],
            "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
        ),
        (vec![("ip", Some("127.0.0.1".into()))], vec![("producer_byte_rate", Some(1.0))], "Invalid configuration key producer_byte_rate"),
        (vec![("user", Some(app.clone()))], vec![("no_such_quota", Some(1.0))], "Invalid configuration key no_such_quota"),
        (vec![("user", Some(app.clone()))], vec![("producer_byte_rate", Some(f64::INFINITY))], "Quota producer_byte_rate must be a finite number"),
        (vec![("user", Some(app.clone()))], vec![("producer_byte_rate", Some(-1.0))], "Quota producer_byte_rate must be greater than 0"),
        (vec![("user", Some(app.clone()))], vec![("consumer_byte_rate", Some(1.5))], "consumer_byte_rate cannot be a fractional value."),
        (vec![("user", Some(app.clone()))], vec![("producer_byte_rate", Some(1e19))], "Proposed value for producer_byte_rate is too large for a LONG."),
        (vec![("ip", Some("127.0.0.1".into()))], vec![("connection_creation_rate", Some(3e9))], "Proposed value for connection_creation_rate is too large for an INT."),
    ];
    for (entity, ops, message) in cases {
        let resp = alter(&mut c, 1, vec![entry(&entity, &ops)], false);
        assert_eq!(
            results(&resp),
            vec![(parts(&entity), invalid, Some(message.to_string()))],
            "{entity:?} {ops:?}"
        );
    }
    // A key twice, or the entity twice, is refused; the entity is answered once.
    let resp = alter(
        &mut c,
        1,
        vec![entry(
            &client,
            &[
                ("producer_byte_rate", Some(1.0)),
                ("producer_byte_rate", Some(2.0)),
            ],
        )],
        false,
    );
    let named = format!("Ignoring duplicate entity ClientQuotaEntity(entries={{client-id={app}}})");
    assert_eq!(
        results(&resp),
        vec![(parts(&client), invalid, Some(named.clone()))]
    );
    let resp = alter(
        &mut c,
        1,
        vec![
            entry(&client, &[("request_percentage", Some(5.0))]),
            entry(&client, &[("consumer_byte_rate", Some(2.0))]),
        ],
        false,
    );
    assert_eq!(results(&resp), vec![(parts(&client), invalid, Some(named))]);
    // Yet the first of them applied, as in Kafka.
    await_described(
        &mut c,
        &[component("client-id", 0, Some(&app))],
        true,
        &one(&client, &[("request_percentage", 5.0)]),
    );
    alter(
        &mut c,
        1,
        vec![entry(&client, &[("request_percentage", None)])],
        false,
    );
    await_described(
        &mut c,
        &[component("client-id", 0, Some(&app))],
        true,
        &vec![],
    );
    // Nothing to alter: nothing answered.
    assert!(alter(&mut c, 1, vec![], false).entries.is_empty());
}

#[test]
fn bad_filters_fail_the_whole_describe() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let cases: Vec<(Vec<ComponentData>, ResponseError, &str)> = vec![
        (vec![component("", 0, Some("x"))], ResponseError::InvalidRequest, "Invalid empty entity type."),
        (vec![component("group", 2, None)], ResponseError::UnsupportedVersion, "Unsupported entity type group"),
        (
            vec![component("user", 2, None), component("user", 1, None)],
            ResponseError::InvalidRequest,
            "Entity type user cannot appear more than once in the filter.",
        ),
        (vec![component("user", 0, None)], ResponseError::InvalidRequest, "Request specified MATCH_TYPE_EXACT, but set match string to null."),
        (vec![component("user", 1, Some("a"))], ResponseError::InvalidRequest, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
        (vec![component("user", 2, Some("a"))], ResponseError::InvalidRequest, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
        (vec![component("user", 7, None)], ResponseError::InvalidRequest, "Unknown match type 7"),
        (
            vec![component("ip", 2, None), component("client-id", 2, None)],
            ResponseError::InvalidRequest,
            "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.",
        ),
    ];
    for version in [0, 1] {
        for (components, code, message) in &cases {
            let resp = describe(&mut c, version, components.clone(), false);
            assert_eq!(
                err(resp.error_code),
                Some(*code),
                "v{version} {components:?}"
            );
            assert_eq!(resp.error_message.as_deref(), Some(*message), "v{version}");
            assert!(resp.entries.is_none(), "v{version}: {resp:?}");
        }
    }
}

/// Sets `values` on the client id `app` and waits until the server describes them.
fn set_client_quota(c: &mut Client, app: &str, values: &[(&str, f64)]) {
    let entity: Entity = vec![("client-id", Some(app.to_string()))];
    let ops: Vec<(&str, Option<f64>)> = values.iter().map(|(k, v)| (*k, Some(*v))).collect();
    let resp = alter(c, 1, vec![entry(&entity, &ops)], false);
    assert_eq!(results(&resp), vec![(parts(&entity), None, None)]);
    await_described(
        c,
        &[component("client-id", 0, Some(app))],
        true,
        &one(&entity, values),
    );
}

fn produce_request(topic: &str, records: bytes::Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])])
}

/// Records of `n` bytes' worth of values.
fn records(first: i64, n: usize) -> bytes::Bytes {
    let value = "x".repeat(1000);
    let values: Vec<&str> = (0..n / 1000).map(|_| value.as_str()).collect();
    txn::record_batch(first, &values, None, false)
}

#[test]
fn a_producer_over_its_byte_rate_is_throttled() {
    let koord = Koord::start(&[]);
    let mut admin = koord.connect();
    let topic = common::unique("quota-produce");
    txn::create_topic(&mut admin, &topic, 1);
    let slow = common::unique("quota-slow-producer");
    set_client_quota(&mut admin, &slow, &[("producer_byte_rate", 1000.0)]);
    // Another client id produces as much unthrottled.
    let mut fast = Client::connect(koord.addr()).with_client_id(&common::unique("quota-fast"));
    let resp = fast.send(9, &produce_request(&topic, records(0, 30_000)));
    assert_eq!(
        err(resp.responses[0].partition_responses[0].error_code),
        None
    );
    assert_eq!(resp.throttle_time_ms, 0, "{resp:?}");
    // 30 KB over the ten seconds the rate is measured on is three times 1000 bytes/s: the
    // request is served, and the client told to wait about twenty seconds.
    let mut c = Client::connect(koord.addr()).with_client_id(&slow);
    let resp = c.send(9, &produce_request(&topic, records(0, 30_000)));
    assert_eq!(
        err(resp.responses[0].partition_responses[0].error_code),
        None
    );
    assert!(resp.throttle_time_ms >= 15_000, "{resp:?}");
}

#[test]
fn a_consumer_over_its_byte_rate_gets_nothing_and_waits() {
    let koord = Koord::start(&[]);
    let mut admin = koord.connect();
    let topic = common::unique("quota-fetch");
    txn::create_topic(&mut admin, &topic, 1);
    let resp = admin.send(9, &produce_request(&topic, records(0, 5_000)));
    assert_eq!(
        err(resp.responses[0].partition_responses[0].error_code),
        None
    );
    let slow = common::unique("quota-slow-consumer");
    // 100 bytes/s: a fetch of 5 KB is five times what ten seconds allow.
    set_client_quota(&mut admin, &slow, &[("consumer_byte_rate", 100.0)]);
    let fetch = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(&topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let mut c = Client::connect(koord.addr()).with_client_id(&slow);
    let resp = c.send(12, &fetch);
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    assert!(resp.throttle_time_ms > 0, "{resp:?}");
    assert!(
        resp.responses.is_empty(),
        "a throttled fetch carries no records: {resp:?}"
    );
    // An unthrottled client fetches the records.
    let resp = admin.send(12, &fetch);
    assert_eq!(resp.throttle_time_ms, 0, "{resp:?}");
    assert_eq!(resp.responses.len(), 1, "{resp:?}");
}

#[test]
fn request_time_over_its_share_is_throttled_and_the_connection_waits() {
    let koord = Koord::start(&[]);
    let mut admin = koord.connect();
    let slow = common::unique("quota-busy");
    // A thousandth of a percent of a thread: a tenth of a millisecond over ten seconds.
    set_client_quota(&mut admin, &slow, &[("request_percentage", 0.001)]);
    let mut c = Client::connect(koord.addr()).with_client_id(&slow);
    let metadata = MetadataRequest::default().with_topics(None);
    let deadline = Instant::now() + DEADLINE;
    let throttle = loop {
        let resp = c.send(12, &metadata);
        if resp.throttle_time_ms > 0 {
            break resp.throttle_time_ms;
        }
        assert!(Instant::now() < deadline, "never throttled");
    };
    // At most one window (one second), as Kafka bounds the request quota's throttle.
    assert!(throttle <= 1000, "{throttle}");
    // The next request is read only once the throttle is over.
    let sent = Instant::now();
    c.send(12, &metadata);
    let waited = sent.elapsed();
    assert!(
        waited >= Duration::from_millis(throttle as u64 * 9 / 10),
        "answered after {waited:?}, throttled for {throttle} ms"
    );
}
