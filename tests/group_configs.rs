//! Group configs (ConfigResource type GROUP = 32, KIP-848/KIP-932 dynamic group configs):
//! DescribeConfigs, IncrementalAlterConfigs and AlterConfigs on a group, against koord or, with
//! `KOORD_BOOTSTRAP` set, against Kafka 4.4 (`scripts/kafka.sh start`): the same expectations.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{err, s, unique, Client, Koord};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use kafka_protocol::ResponseError;

const GROUP: i8 = 32;
const GROUP_CONFIG: i8 = 8;
const DEFAULT_CONFIG: i8 = 5;
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;

/// `(value, source)` by name.
type Described = BTreeMap<String, (Option<String>, i8)>;

fn describe(c: &mut Client, group: &str) -> Result<Described, (Option<ResponseError>, String)> {
    let resp: DescribeConfigsResponse = c.send(
        4,
        &DescribeConfigsRequest::default()
            .with_include_synonyms(true)
            .with_resources(vec![DescribeConfigsResource::default()
                .with_resource_type(GROUP)
                .with_resource_name(s(group))]),
    );
    let r = &resp.results[0];
    if r.error_code != 0 {
        return Err((
            err(r.error_code),
            r.error_message
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default(),
        ));
    }
    Ok(r.configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                (c.value.as_ref().map(|v| v.to_string()), c.config_source),
            )
        })
        .collect())
}

fn alter(
    c: &mut Client,
    group: &str,
    ops: &[(&str, i8, Option<&str>)],
) -> (Option<ResponseError>, String) {
    let resp: IncrementalAlterConfigsResponse = c.send(
        1,
        &IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(GROUP)
                .with_resource_name(s(group))
                .with_configs(
                    ops.iter()
                        .map(|(k, op, v)| {
                            AlterableConfig::default()
                                .with_name(s(k))
                                .with_config_operation(*op)
                                .with_value(v.map(s))
                        })
                        .collect(),
                ),
        ]),
    );
    let r = &resp.responses[0];
    (
        err(r.error_code),
        r.error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default(),
    )
}

/// The group's configs once `name` is described as `expected`: Kafka applies a change on its
/// brokers after the controller commits it, so a describe right after an alter may lag.
fn settled(c: &mut Client, group: &str, name: &str, expected: (&str, i8)) -> Described {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let configs = describe(c, group).expect("group described");
        let got = configs
            .get(name)
            .map(|(v, src)| (v.clone().unwrap_or_default(), *src));
        if got.as_ref().map(|(v, s)| (v.as_str(), *s)) == Some(expected) {
            return configs;
        }
        assert!(
            Instant::now() < deadline,
            "{group} {name}: {got:?}, expected {expected:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn value<'a>(configs: &'a Described, name: &str) -> (&'a str, i8) {
    let (v, src) = configs
        .get(name)
        .unwrap_or_else(|| panic!("{name} not described: {configs:?}"));
    (v.as_deref().unwrap_or(""), *src)
}

#[test]
fn describe_of_a_group_lists_every_group_config_with_its_default() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let configs = describe(&mut c, &unique("gc-defaults")).expect("described");
    for name in [
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
        "consumer.assignment.interval.ms",
        "share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "share.record.lock.duration.ms",
        "share.delivery.count.limit",
        "share.partition.max.record.locks",
        "share.auto.offset.reset",
        "share.isolation.level",
        "share.renew.acknowledge.enable",
        "share.assignment.interval.ms",
        "streams.session.timeout.ms",
        "streams.heartbeat.interval.ms",
        "streams.num.standby.replicas",
        "streams.initial.rebalance.delay.ms",
        "streams.assignment.interval.ms",
        "streams.rack.aware.assignment.tags",
        "streams.assignor.name",
        "errors.deadletterqueue.topic.name",
        "errors.deadletterqueue.copy.record.enable",
    ] {
        assert!(configs.contains_key(name), "{name} missing: {configs:?}");
    }
    // Internal configs are not listed unless set (on the group, or their broker setting).
    for name in [
        "streams.num.warmup.replicas",
        "streams.task.offset.interval.ms",
    ] {
        assert!(!configs.contains_key(name), "{name} listed: {configs:?}");
    }
    assert_eq!(
        value(&configs, "share.auto.offset.reset"),
        ("latest", DEFAULT_CONFIG)
    );
    assert_eq!(
        value(&configs, "share.isolation.level"),
        ("read_uncommitted", DEFAULT_CONFIG)
    );
    assert_eq!(
        value(&configs, "share.delivery.count.limit"),
        ("5", DEFAULT_CONFIG)
    );
    assert_eq!(
        value(&configs, "share.partition.max.record.locks"),
        ("2000", DEFAULT_CONFIG)
    );
    assert_eq!(
        value(&configs, "errors.deadletterqueue.topic.name"),
        ("", DEFAULT_CONFIG)
    );
    // An empty group name is refused.
    let (e, m) = describe(&mut c, "").expect_err("empty name");
    assert_eq!(
        (e, m.as_str()),
        (
            Some(ResponseError::InvalidRequest),
            "Group name must not be empty"
        )
    );
}

#[test]
fn set_describe_append_and_delete_group_configs() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let group = unique("gc-set");
    let (e, m) = alter(
        &mut c,
        &group,
        &[
            ("share.auto.offset.reset", SET, Some("earliest")),
            ("share.isolation.level", SET, Some("read_committed")),
        ],
    );
    assert_eq!(e, None, "{m}");
    let configs = settled(
        &mut c,
        &group,
        "share.auto.offset.reset",
        ("earliest", GROUP_CONFIG),
    );
    assert_eq!(
        value(&configs, "share.isolation.level"),
        ("read_committed", GROUP_CONFIG)
    );
    // Kafka 4.4 refuses APPEND on every group config, its one LIST config included.
    let (e, m) = alter(
        &mut c,
        &group,
        &[("streams.rack.aware.assignment.tags", APPEND, Some("zone"))],
    );
    assert_eq!(
        (e, m.as_str()),
        (
            Some(ResponseError::InvalidConfig),
            "Can't APPEND to key streams.rack.aware.assignment.tags because its type is not LIST."
        )
    );
    let (e, m) = alter(
        &mut c,
        &group,
        &[("share.isolation.level", APPEND, Some("x"))],
    );
    assert_eq!(
        (e, m.as_str()),
        (
            Some(ResponseError::InvalidConfig),
            "Can't APPEND to key share.isolation.level because its type is not LIST."
        )
    );
    // Deleting goes back to the default.
    let (e, m) = alter(&mut c, &group, &[("share.auto.offset.reset", DELETE, None)]);
    assert_eq!(e, None, "{m}");
    let configs = settled(
        &mut c,
        &group,
        "share.auto.offset.reset",
        ("latest", DEFAULT_CONFIG),
    );
    assert_eq!(
        value(&configs, "share.isolation.level"),
        ("read_committed", GROUP_CONFIG)
    );
}

#[test]
fn bad_group_configs_are_invalid_config_in_kafkas_words() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let group = unique("gc-bad");
    let (e, m) = alter(&mut c, &group, &[("no.such.config", SET, Some("1"))]);
    assert_eq!(
        (e, m.as_str()),
        (
            Some(ResponseError::InvalidConfig),
            "Unknown group config name: no.such.config"
        )
    );
    // Beyond group.share.max.record.lock.duration.ms (60000 by default).
    let (e, m) = alter(
        &mut c,
        &group,
        &[("share.record.lock.duration.ms", SET, Some("999999"))],
    );
    assert_eq!(e, Some(ResponseError::InvalidConfig), "{m}");
    assert!(
        m.starts_with("share.record.lock.duration.ms must be in the range ")
            && m.ends_with(" to 60000 inclusive."),
        "{m}"
    );
    // Below the config's own floor: ConfigDef's message.
    let (e, m) = alter(
        &mut c,
        &group,
        &[("share.record.lock.duration.ms", SET, Some("10"))],
    );
    assert_eq!(
        (e, m.as_str()),
        (
            Some(ResponseError::InvalidConfig),
            "Invalid value 10 for configuration share.record.lock.duration.ms: Value must be at least 1000"
        )
    );
    let (e, m) = alter(
        &mut c,
        &group,
        &[("share.isolation.level", SET, Some("dirty"))],
    );
    assert_eq!(
        (e, m.as_str()),
        (
            Some(ResponseError::InvalidConfig),
            "Invalid value dirty for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"
        )
    );
    let (e, _) = alter(
        &mut c,
        &group,
        &[("share.auto.offset.reset", SET, Some("none"))],
    );
    assert_eq!(e, Some(ResponseError::InvalidConfig));
    let (e, m) = alter(&mut c, &group, &[("share.delivery.count.limit", SET, None)]);
    assert_eq!(
        (e, m.as_str()),
        (
            Some(ResponseError::InvalidRequest),
            "Null value not supported for : share.delivery.count.limit"
        )
    );
    let (e, m) = alter(
        &mut c,
        "",
        &[("share.delivery.count.limit", SET, Some("3"))],
    );
    assert_eq!(
        (e, m.as_str()),
        (
            Some(ResponseError::InvalidRequest),
            "Default group resources are not allowed."
        )
    );
    // Nothing of a refused change was applied.
    let configs = describe(&mut c, &group).expect("described");
    assert_eq!(value(&configs, "share.isolation.level").1, DEFAULT_CONFIG);
}

#[test]
fn group_configs_survive_a_restart() {
    let Some(mut koord) = Koord::start_owned("group_configs_survive_a_restart", &[]) else {
        return;
    };
    let mut c = koord.connect();
    let group = unique("gc-durable");
    let (e, m) = alter(
        &mut c,
        &group,
        &[
            ("share.auto.offset.reset", SET, Some("earliest")),
            ("share.delivery.count.limit", SET, Some("7")),
        ],
    );
    assert_eq!(e, None, "{m}");
    drop(c);
    koord.kill9();
    koord.restart();
    let mut c = koord.connect();
    let configs = describe(&mut c, &group).expect("described");
    assert_eq!(
        value(&configs, "share.auto.offset.reset"),
        ("earliest", GROUP_CONFIG)
    );
    assert_eq!(
        value(&configs, "share.delivery.count.limit"),
        ("7", GROUP_CONFIG)
    );
}

#[test]
fn broker_share_bounds_are_koords_settings() {
    let Some(koord) = Koord::start_owned(
        "broker_share_bounds_are_koords_settings",
        &["group.share.max.delivery.count.limit=20"],
    ) else {
        return;
    };
    let mut c = koord.connect();
    let group = unique("gc-bounds");
    let (e, m) = alter(
        &mut c,
        &group,
        &[("share.delivery.count.limit", SET, Some("15"))],
    );
    assert_eq!(e, None, "{m}");
    let (e, m) = alter(
        &mut c,
        &group,
        &[("share.delivery.count.limit", SET, Some("21"))],
    );
    assert_eq!(
        (e, m.as_str()),
        (
            Some(ResponseError::InvalidConfig),
            "share.delivery.count.limit must be in the range 2 to 20 inclusive."
        )
    );
}
