//! The streams-group messages (KIP-1071: StreamsGroupHeartbeat, key 88, and
//! StreamsGroupDescribe, key 89, v0-1) that koord adds to the vendored kafka-protocol crate
//! (vendor/README.md): a fully populated message of each, built with the crate's types, encodes
//! at every version to the bytes Apache Kafka 4.4's own generated classes write for the same
//! message, and decodes back to it.
//!
//! The vectors are the output of `proto-tests/java/.../StreamsVectors.java` (kafka-clients
//! 4.4.0), run as its doc says.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::streams_group_describe_response as describe;
use kafka_protocol::messages::streams_group_heartbeat_request as hb_req;
use kafka_protocol::messages::streams_group_heartbeat_response as hb_resp;
use kafka_protocol::messages::{
    GroupId, StreamsGroupDescribeRequest, StreamsGroupDescribeResponse,
    StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

const HEARTBEAT_REQUEST_V0: &[&str] = &[
    "04617070046d2d31000000000000000304692d31037231000493e001000000010202300206696e7075740205696e2e2a",
    "02146170702d73746f72652d6368616e67656c6f67000000000000020f636c65616e75702e706f6c69637908636f6d70",
    "616374000002106170702d7265706172746974696f6e02106170702d7265706172746974696f6e000000040001010002",
    "02000002000002000000000002023003000000000000000200010202300300000000000000020004702d31010a6c6f63",
    "616c686f73749c400002057a6f6e65026100020230000000020000000000000011000202300000000200000000000000",
    "63000100",
];
const HEARTBEAT_RESPONSE_V0: &[&str] = &[
    "000000050000036f6b046d2d310000000700001388000027100000ea600201186d697373696e67206170702d72657061",
    "72746974696f6e0002023003000000010000000300010202300300000001000000030000000003020a6c6f63616c686f",
    "73749c40000206696e70757403000000010000000300010000",
];
const DESCRIBE_REQUEST_V0: &[&str] = &["0304617070066f746865720100"];
const DESCRIBE_RESPONSE_V0: &[&str] = &[
    "00000000020000000461707007537461626c65000000070000000701000000010202300206696e707574010214617070",
    "2d73746f72652d6368616e67656c6f67000000020001010001000002046d2d3100000007000372310b6170702d636c69",
    "656e740b2f3132372e302e302e310000000104702d31010a6c6f63616c686f73749c4000010202300000000000000000",
    "000000050001020230030000000000000001000101000202300300000000000000010001020230030000000000000001",
    "00000000800000000000",
];
const HEARTBEAT_REQUEST_V1: &[&str] = &[
    "04617070046d2d31000000000000000304692d31037231000493e001000000010202300206696e7075740205696e2e2a",
    "02146170702d73746f72652d6368616e67656c6f67000000000000020f636c65616e75702e706f6c69637908636f6d70",
    "616374000002106170702d7265706172746974696f6e02106170702d7265706172746974696f6e000000040001010002",
    "02000002000002000000000002023003000000000000000200010202300300000000000000020004702d31010a6c6f63",
    "616c686f73749c400002057a6f6e65026100020230000000020000000000000011000202300000000200000000000000",
    "63000100",
];
const HEARTBEAT_RESPONSE_V1: &[&str] = &[
    "000000050000036f6b046d2d3100000007000013880000ea6000000000000027100201186d697373696e67206170702d",
    "7265706172746974696f6e000202300300000001000000030001020230030000000100000003000100000003020a6c6f",
    "63616c686f73749c40000206696e70757403000000010000000300010000",
];
const DESCRIBE_REQUEST_V1: &[&str] = &["0304617070066f74686572010000"];
const DESCRIBE_RESPONSE_V1: &[&str] = &[
    "00000000020000000461707007537461626c65000000070000000701000000010202300206696e707574010214617070",
    "2d73746f72652d6368616e67656c6f67000000020001010001000002046d2d3100000007000372310b6170702d636c69",
    "656e740b2f3132372e302e302e310000000104702d31010a6c6f63616c686f73749c4000010202300000000000000000",
    "000000050001020230030000000000000001000101000202300300000000000000010001020230030000000000000001",
    "0000000080000000ff00000000",
];

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn topic(v: &str) -> TopicName {
    TopicName(s(v))
}

fn hex(parts: &[&str]) -> Bytes {
    let h: String = parts.concat();
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("hex"))
        .collect::<Vec<u8>>()
        .into()
}

/// `message` encodes to `expected` at `version`, and `expected` decodes to `message`.
fn check<M: Encodable + Decodable + PartialEq + std::fmt::Debug>(
    message: &M,
    version: i16,
    expected: &[&str],
) {
    let expected = hex(expected);
    let mut buf = BytesMut::new();
    message.encode(&mut buf, version).expect("encode");
    assert_eq!(buf.freeze(), expected, "encoded at v{version}");
    let mut bytes = expected.clone();
    let decoded = M::decode(&mut bytes, version).expect("decode");
    assert!(bytes.is_empty(), "{} bytes left at v{version}", bytes.len());
    assert_eq!(&decoded, message, "decoded at v{version}");
}

fn heartbeat_request() -> StreamsGroupHeartbeatRequest {
    let tasks = vec![hb_req::TaskIds::default()
        .with_subtopology_id(s("0"))
        .with_partitions(vec![0, 2])];
    let changelog = hb_req::TopicInfo::default()
        .with_name(topic("app-store-changelog"))
        .with_partitions(0)
        .with_replication_factor(0)
        .with_topic_configs(vec![hb_req::KeyValue::default()
            .with_key(s("cleanup.policy"))
            .with_value(s("compact"))]);
    let subtopology = hb_req::Subtopology::default()
        .with_subtopology_id(s("0"))
        .with_source_topics(vec![topic("input")])
        .with_source_topic_regex(vec![s("in.*")])
        .with_state_changelog_topics(vec![changelog])
        .with_repartition_sink_topics(vec![topic("app-repartition")])
        .with_repartition_source_topics(vec![hb_req::TopicInfo::default()
            .with_name(topic("app-repartition"))
            .with_partitions(4)
            .with_replication_factor(1)])
        .with_copartition_groups(vec![hb_req::CopartitionGroup::default()
            .with_source_topics(vec![0])
            .with_source_topic_regex(vec![0])
            .with_repartition_source_topics(vec![0])]);
    StreamsGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("app")))
        .with_member_id(s("m-1"))
        .with_member_epoch(0)
        .with_endpoint_information_epoch(3)
        .with_instance_id(Some(s("i-1")))
        .with_rack_id(Some(s("r1")))
        .with_rebalance_timeout_ms(300_000)
        .with_topology(Some(
            hb_req::Topology::default()
                .with_epoch(1)
                .with_subtopologies(vec![subtopology]),
        ))
        .with_active_tasks(Some(tasks.clone()))
        .with_standby_tasks(Some(vec![]))
        .with_warmup_tasks(Some(tasks))
        .with_process_id(Some(s("p-1")))
        .with_user_endpoint(Some(
            hb_req::Endpoint::default()
                .with_host(s("localhost"))
                .with_port(40000),
        ))
        .with_client_tags(Some(vec![hb_req::KeyValue::default()
            .with_key(s("zone"))
            .with_value(s("a"))]))
        .with_task_offsets(Some(vec![hb_req::TaskOffset::default()
            .with_subtopology_id(s("0"))
            .with_partition(2)
            .with_offset(17)]))
        .with_task_end_offsets(Some(vec![hb_req::TaskOffset::default()
            .with_subtopology_id(s("0"))
            .with_partition(2)
            .with_offset(99)]))
        .with_shutdown_application(true)
}

fn heartbeat_response(version: i16) -> StreamsGroupHeartbeatResponse {
    let tasks = vec![hb_resp::TaskIds::default()
        .with_subtopology_id(s("0"))
        .with_partitions(vec![1, 3])];
    StreamsGroupHeartbeatResponse::default()
        .with_throttle_time_ms(5)
        .with_error_code(0)
        .with_error_message(Some(s("ok")))
        .with_member_id(s("m-1"))
        .with_member_epoch(7)
        .with_heartbeat_interval_ms(5000)
        .with_acceptable_recovery_lag_legacy(if version == 0 { 10_000 } else { 0 })
        .with_task_offset_interval_ms(60_000)
        .with_acceptable_recovery_lag(if version >= 1 { 10_000 } else { -1 })
        .with_status(Some(vec![hb_resp::Status::default()
            .with_status_code(1)
            .with_status_detail(s("missing app-repartition"))]))
        .with_active_tasks(Some(tasks.clone()))
        .with_standby_tasks(Some(vec![]))
        .with_warmup_tasks(Some(tasks))
        .with_topology_description_required(version >= 1)
        .with_endpoint_information_epoch(3)
        .with_partitions_by_user_endpoint(Some(vec![hb_resp::EndpointToPartitions::default()
            .with_user_endpoint(
                hb_resp::Endpoint::default()
                    .with_host(s("localhost"))
                    .with_port(40000),
            )
            .with_active_partitions(vec![hb_resp::TopicPartition::default()
                .with_topic(topic("input"))
                .with_partitions(vec![1, 3])])
            .with_standby_partitions(vec![])]))
}

fn describe_request() -> StreamsGroupDescribeRequest {
    StreamsGroupDescribeRequest::default()
        .with_group_ids(vec![GroupId(s("app")), GroupId(s("other"))])
        .with_include_authorized_operations(true)
}

fn describe_response() -> StreamsGroupDescribeResponse {
    let tasks = vec![describe::TaskIds::default()
        .with_subtopology_id(s("0"))
        .with_partitions(vec![0, 1])];
    let member = describe::Member::default()
        .with_member_id(s("m-1"))
        .with_member_epoch(7)
        .with_instance_id(None)
        .with_rack_id(Some(s("r1")))
        .with_client_id(s("app-client"))
        .with_client_host(s("/127.0.0.1"))
        .with_topology_epoch(1)
        .with_process_id(s("p-1"))
        .with_user_endpoint(Some(
            describe::Endpoint::default()
                .with_host(s("localhost"))
                .with_port(40000),
        ))
        .with_client_tags(vec![])
        .with_task_offsets(vec![describe::TaskOffset::default()
            .with_subtopology_id(s("0"))
            .with_partition(0)
            .with_offset(5)])
        .with_task_end_offsets(vec![])
        .with_assignment(
            describe::Assignment::default()
                .with_active_tasks(tasks.clone())
                .with_standby_tasks(vec![])
                .with_warmup_tasks(vec![]),
        )
        .with_target_assignment(
            describe::Assignment::default()
                .with_active_tasks(tasks.clone())
                .with_standby_tasks(vec![])
                .with_warmup_tasks(tasks),
        )
        .with_is_classic(false);
    let subtopology = describe::Subtopology::default()
        .with_subtopology_id(s("0"))
        .with_source_topics(vec![topic("input")])
        .with_repartition_sink_topics(vec![])
        .with_state_changelog_topics(vec![describe::TopicInfo::default()
            .with_name(topic("app-store-changelog"))
            .with_partitions(2)
            .with_replication_factor(1)
            .with_topic_configs(vec![])])
        .with_repartition_source_topics(vec![]);
    StreamsGroupDescribeResponse::default()
        .with_throttle_time_ms(0)
        .with_groups(vec![describe::DescribedGroup::default()
            .with_error_code(0)
            .with_group_id(GroupId(s("app")))
            .with_group_state(s("Stable"))
            .with_group_epoch(7)
            .with_assignment_epoch(7)
            .with_topology(Some(
                describe::Topology::default()
                    .with_epoch(1)
                    .with_subtopologies(Some(vec![subtopology])),
            ))
            .with_members(vec![member])
            .with_authorized_operations(i32::MIN)])
}

#[test]
fn streams_group_heartbeat_request_matches_kafkas_bytes_at_v0_and_v1() {
    check(&heartbeat_request(), 0, HEARTBEAT_REQUEST_V0);
    check(&heartbeat_request(), 1, HEARTBEAT_REQUEST_V1);
}

#[test]
fn streams_group_heartbeat_response_matches_kafkas_bytes_at_v0_and_v1() {
    check(&heartbeat_response(0), 0, HEARTBEAT_RESPONSE_V0);
    check(&heartbeat_response(1), 1, HEARTBEAT_RESPONSE_V1);
}

#[test]
fn streams_group_describe_request_matches_kafkas_bytes_at_v0_and_v1() {
    check(&describe_request(), 0, DESCRIBE_REQUEST_V0);
    check(&describe_request(), 1, DESCRIBE_REQUEST_V1);
}

#[test]
fn streams_group_describe_response_matches_kafkas_bytes_at_v0_and_v1() {
    check(&describe_response(), 0, DESCRIBE_RESPONSE_V0);
    check(&describe_response(), 1, DESCRIBE_RESPONSE_V1);
}

#[test]
fn truncated_streams_messages_fail_to_decode_without_panicking() {
    let bytes = hex(HEARTBEAT_REQUEST_V1);
    for n in 0..bytes.len() {
        let mut cut = bytes.slice(..n);
        assert!(
            StreamsGroupHeartbeatRequest::decode(&mut cut, 1).is_err(),
            "{n}"
        );
    }
    let bytes = hex(DESCRIBE_RESPONSE_V1);
    for n in 0..bytes.len() {
        let mut cut = bytes.slice(..n);
        assert!(
            StreamsGroupDescribeResponse::decode(&mut cut, 1).is_err(),
            "{n}"
        );
    }
}
