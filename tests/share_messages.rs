//! The share-group messages koord regenerated in the vendored kafka-protocol crate from Apache
//! Kafka 4.4's definitions (vendor/README.md): ShareFetch and ShareAcknowledge v1-2,
//! DescribeShareGroupOffsets and ReadShareGroupStateSummary v0-1. A fully populated message of
//! each, built with the crate's types, encodes at every version to the bytes Kafka 4.4's own
//! generated classes write for the same message, and decodes back to it.
//!
//! The vectors are the output of `proto-tests/java/.../ShareVectors.java` (kafka-clients 4.4.0),
//! run as its doc says.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::describe_share_group_offsets_request as dsgo_req;
use kafka_protocol::messages::describe_share_group_offsets_response as dsgo_resp;
use kafka_protocol::messages::read_share_group_state_summary_request as rsum_req;
use kafka_protocol::messages::read_share_group_state_summary_response as rsum_resp;
use kafka_protocol::messages::share_acknowledge_request as ack_req;
use kafka_protocol::messages::share_acknowledge_response as ack_resp;
use kafka_protocol::messages::share_fetch_request as fetch_req;
use kafka_protocol::messages::share_fetch_response as fetch_resp;
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, GroupId,
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse, ShareAcknowledgeRequest,
    ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use uuid::Uuid;

const SHARE_FETCH_REQUEST_V1: &[&str] = &[
    "037367046d2d3100000002000001f40000000103200000000001f400000064020123456789abcdef0fedcba987654321",
    "030000000003000000000000000a000000000000000c0401000200000000000000000d000000000000000d0203000000",
    "00000301000002111111111111111122222222222222220300000001000000020000",
];
const SHARE_FETCH_RESPONSE_V1: &[&str] = &[
    "0000000700000000007530020123456789abcdef0fedcba9876543210300000000000000000000000000010000000500",
    "116e6f742d612d7265616c2d626174636802000000000000000e0000000000000014000100000000000300060b6e6f74",
    "206c6561646572007915696e76616c6964207265636f7264207374617465000000020000000600010100000300000002",
    "0962726f6b65722d320000238403723200000000030962726f6b65722d3300002385000000",
];
const SHARE_ACKNOWLEDGE_REQUEST_V1: &[&str] = &[
    "037367046d2d3100000003020123456789abcdef0fedcba987654321020000000002000000000000000e000000000000",
    "00100401020300000000",
];
const SHARE_ACKNOWLEDGE_RESPONSE_V1: &[&str] = &[
    "00000000000000020123456789abcdef0fedcba987654321030000000000000000000001000000050000000000030006",
    "0b6e6f74206c6561646572000000020000000600000002000000020962726f6b65722d3200002384000000",
];
const SHARE_FETCH_REQUEST_V2: &[&str] = &[
    "037367046d2d3100000002000001f40000000103200000000001f4000000640101020123456789abcdef0fedcba98765",
    "4321030000000003000000000000000a000000000000000c0401000200000000000000000d000000000000000d020400",
    "000000000301000002111111111111111122222222222222220300000001000000020000",
];
const SHARE_FETCH_RESPONSE_V2: &[&str] = &[
    "0000000700000000007530020123456789abcdef0fedcba9876543210300000000000000000000000000010000000500",
    "116e6f742d612d7265616c2d626174636802000000000000000e0000000000000014000100000000000300060b6e6f74",
    "206c6561646572007915696e76616c6964207265636f7264207374617465000000020000000600010100000300000002",
    "0962726f6b65722d320000238403723200000000030962726f6b65722d3300002385000000",
];
const SHARE_ACKNOWLEDGE_REQUEST_V2: &[&str] = &[
    "037367046d2d310000000301020123456789abcdef0fedcba987654321020000000002000000000000000e0000000000",
    "0000100401040300000000",
];
const SHARE_ACKNOWLEDGE_RESPONSE_V2: &[&str] = &[
    "0000000000000000003a98020123456789abcdef0fedcba9876543210300000000000000000000010000000500000000",
    "000300060b6e6f74206c6561646572000000020000000600000002000000020962726f6b65722d3200002384000000",
];
const DESCRIBE_OFFSETS_REQUEST_V0: &[&str] =
    &["0303736702076f7264657273030000000000000001000004616c6c000000"];
const DESCRIBE_OFFSETS_RESPONSE_V0: &[&str] = &[
    "000000000303736702076f72646572730123456789abcdef0fedcba98765432103000000000000000000000015000000",
    "050000000000000001ffffffffffffffffffffffff000312756e6b6e6f776e20706172746974696f6e00000000000005",
    "676f6e650100451367726f7570206964206e6f7420666f756e640000",
];
const READ_SUMMARY_REQUEST_V0: &[&str] =
    &["037367020123456789abcdef0fedcba9876543210300000000000000050000000001ffffffff000000"];
const READ_SUMMARY_RESPONSE_V0: &[&str] = &[
    "020123456789abcdef0fedcba98765432103000000000000000000000200000005000000000000001500000000010010",
    "106e6f7420636f6f7264696e61746f7200000000ffffffffffffffffffffffff000000",
];
const DESCRIBE_OFFSETS_REQUEST_V1: &[&str] =
    &["0303736702076f7264657273030000000000000001000004616c6c000000"];
const DESCRIBE_OFFSETS_RESPONSE_V1: &[&str] = &[
    "000000000303736702076f72646572730123456789abcdef0fedcba98765432103000000000000000000000015000000",
    "05000000000000002a0000000000000001ffffffffffffffffffffffffffffffffffffffff000312756e6b6e6f776e20",
    "706172746974696f6e00000000000005676f6e650100451367726f7570206964206e6f7420666f756e640000",
];
const READ_SUMMARY_REQUEST_V1: &[&str] =
    &["037367020123456789abcdef0fedcba9876543210300000000000000050000000001ffffffff000000"];
const READ_SUMMARY_RESPONSE_V1: &[&str] = &[
    "020123456789abcdef0fedcba98765432103000000000000000000000200000005000000000000001500000003000000",
    "00010010106e6f7420636f6f7264696e61746f7200000000ffffffffffffffffffffffffffffffff000000",
];

const TOPIC_A: Uuid = Uuid::from_u64_pair(0x0123456789abcdef, 0x0fedcba987654321);
const TOPIC_B: Uuid = Uuid::from_u64_pair(0x1111111111111111, 0x2222222222222222);
/// Opaque bytes for the records field, as ShareVectors.java sets them: neither side parses them.
const RECORDS: &[u8] = b"not-a-real-batch";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
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
    assert_eq!(
        message.compute_size(version).expect("size"),
        expected.len(),
        "size at v{version}"
    );
    let mut bytes = expected.clone();
    let decoded = M::decode(&mut bytes, version).expect("decode");
    assert!(bytes.is_empty(), "{} bytes left at v{version}", bytes.len());
    assert_eq!(&decoded, message, "decoded at v{version}");
}

fn share_fetch_request(version: i16) -> ShareFetchRequest {
    let batches = vec![
        fetch_req::AcknowledgementBatch::default()
            .with_first_offset(10)
            .with_last_offset(12)
            .with_acknowledge_types(vec![1, 0, 2]),
        fetch_req::AcknowledgementBatch::default()
            .with_first_offset(13)
            .with_last_offset(13)
            .with_acknowledge_types(vec![if version >= 2 { 4 } else { 3 }]),
    ];
    ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s("sg"))))
        .with_member_id(Some(s("m-1")))
        .with_share_session_epoch(2)
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(52428800)
        .with_max_records(500)
        .with_batch_size(100)
        .with_share_acquire_mode(if version >= 2 { 1 } else { 0 })
        .with_is_renew_ack(version >= 2)
        .with_topics(vec![fetch_req::FetchTopic::default()
            .with_topic_id(TOPIC_A)
            .with_partitions(vec![
                fetch_req::FetchPartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(batches),
                fetch_req::FetchPartition::default().with_partition_index(3),
            ])])
        .with_forgotten_topics_data(vec![fetch_req::ForgottenTopic::default()
            .with_topic_id(TOPIC_B)
            .with_partitions(vec![1, 2])])
}

fn share_fetch_response() -> ShareFetchResponse {
    ShareFetchResponse::default()
        .with_throttle_time_ms(7)
        .with_acquisition_lock_timeout_ms(30000)
        .with_responses(vec![fetch_resp::ShareFetchableTopicResponse::default()
            .with_topic_id(TOPIC_A)
            .with_partitions(vec![
                fetch_resp::PartitionData::default()
                    .with_partition_index(0)
                    .with_current_leader(
                        fetch_resp::LeaderIdAndEpoch::default()
                            .with_leader_id(1)
                            .with_leader_epoch(5),
                    )
                    .with_records(Some(Bytes::from_static(RECORDS)))
                    .with_acquired_records(vec![fetch_resp::AcquiredRecords::default()
                        .with_first_offset(14)
                        .with_last_offset(20)
                        .with_delivery_count(1)]),
                fetch_resp::PartitionData::default()
                    .with_partition_index(3)
                    .with_error_code(6)
                    .with_error_message(Some(s("not leader")))
                    .with_acknowledge_error_code(121)
                    .with_acknowledge_error_message(Some(s("invalid record state")))
                    .with_current_leader(
                        fetch_resp::LeaderIdAndEpoch::default()
                            .with_leader_id(2)
                            .with_leader_epoch(6),
                    )
                    .with_records(Some(Bytes::new())),
            ])])
        .with_node_endpoints(vec![
            fetch_resp::NodeEndpoint::default()
                .with_node_id(BrokerId(2))
                .with_host(s("broker-2"))
                .with_port(9092)
                .with_rack(Some(s("r2"))),
            fetch_resp::NodeEndpoint::default()
                .with_node_id(BrokerId(3))
                .with_host(s("broker-3"))
                .with_port(9093)
                .with_rack(None),
        ])
}

fn share_acknowledge_request(version: i16) -> ShareAcknowledgeRequest {
    ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(s("sg"))))
        .with_member_id(Some(s("m-1")))
        .with_share_session_epoch(3)
        .with_is_renew_ack(version >= 2)
        .with_topics(vec![ack_req::AcknowledgeTopic::default()
            .with_topic_id(TOPIC_A)
            .with_partitions(vec![ack_req::AcknowledgePartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(vec![
                    ack_req::AcknowledgementBatch::default()
                        .with_first_offset(14)
                        .with_last_offset(16)
                        .with_acknowledge_types(vec![1, if version >= 2 { 4 } else { 2 }, 3]),
                ])])])
}

fn share_acknowledge_response(version: i16) -> ShareAcknowledgeResponse {
    ShareAcknowledgeResponse::default()
        .with_acquisition_lock_timeout_ms(if version >= 2 { 15000 } else { 0 })
        .with_responses(vec![ack_resp::ShareAcknowledgeTopicResponse::default()
            .with_topic_id(TOPIC_A)
            .with_partitions(vec![
                ack_resp::PartitionData::default()
                    .with_partition_index(0)
                    .with_current_leader(
                        ack_resp::LeaderIdAndEpoch::default()
                            .with_leader_id(1)
                            .with_leader_epoch(5),
                    ),
                ack_resp::PartitionData::default()
                    .with_partition_index(3)
                    .with_error_code(6)
                    .with_error_message(Some(s("not leader")))
                    .with_current_leader(
                        ack_resp::LeaderIdAndEpoch::default()
                            .with_leader_id(2)
                            .with_leader_epoch(6),
                    ),
            ])])
        .with_node_endpoints(vec![ack_resp::NodeEndpoint::default()
            .with_node_id(BrokerId(2))
            .with_host(s("broker-2"))
            .with_port(9092)
            .with_rack(None)])
}

fn describe_offsets_request() -> DescribeShareGroupOffsetsRequest {
    DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        dsgo_req::DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(s("sg")))
            .with_topics(Some(vec![
                dsgo_req::DescribeShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(TopicName(s("orders")))
                    .with_partitions(vec![0, 1]),
            ])),
        dsgo_req::DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(s("all")))
            .with_topics(None),
    ])
}

fn describe_offsets_response(version: i16) -> DescribeShareGroupOffsetsResponse {
    DescribeShareGroupOffsetsResponse::default().with_groups(vec![
        dsgo_resp::DescribeShareGroupOffsetsResponseGroup::default()
            .with_group_id(GroupId(s("sg")))
            .with_topics(vec![
                dsgo_resp::DescribeShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(TopicName(s("orders")))
                    .with_topic_id(TOPIC_A)
                    .with_partitions(vec![
                        dsgo_resp::DescribeShareGroupOffsetsResponsePartition::default()
                            .with_partition_index(0)
                            .with_start_offset(21)
                            .with_leader_epoch(5)
                            .with_lag(if version >= 1 { 42 } else { -1 }),
                        dsgo_resp::DescribeShareGroupOffsetsResponsePartition::default()
                            .with_partition_index(1)
                            .with_start_offset(-1)
                            .with_leader_epoch(-1)
                            .with_lag(-1)
                            .with_error_code(3)
                            .with_error_message(Some(s("unknown partition"))),
                    ]),
            ]),
        dsgo_resp::DescribeShareGroupOffsetsResponseGroup::default()
            .with_group_id(GroupId(s("gone")))
            .with_error_code(69)
            .with_error_message(Some(s("group id not found"))),
    ])
}

fn read_summary_request() -> ReadShareGroupStateSummaryRequest {
    ReadShareGroupStateSummaryRequest::default()
        .with_group_id(s("sg"))
        .with_topics(vec![rsum_req::ReadStateSummaryData::default()
            .with_topic_id(TOPIC_A)
            .with_partitions(vec![
                rsum_req::PartitionData::default()
                    .with_partition(0)
                    .with_leader_epoch(5),
                rsum_req::PartitionData::default()
                    .with_partition(1)
                    .with_leader_epoch(-1),
            ])])
}

fn read_summary_response(version: i16) -> ReadShareGroupStateSummaryResponse {
    ReadShareGroupStateSummaryResponse::default().with_results(vec![
        rsum_resp::ReadStateSummaryResult::default()
            .with_topic_id(TOPIC_A)
            .with_partitions(vec![
                rsum_resp::PartitionResult::default()
                    .with_partition(0)
                    .with_state_epoch(2)
                    .with_leader_epoch(5)
                    .with_start_offset(21)
                    .with_delivery_complete_count(if version >= 1 { 3 } else { -1 }),
                rsum_resp::PartitionResult::default()
                    .with_partition(1)
                    .with_error_code(16)
                    .with_error_message(Some(s("not coordinator")))
                    .with_state_epoch(0)
                    .with_leader_epoch(-1)
                    .with_start_offset(-1)
                    .with_delivery_complete_count(-1),
            ]),
    ])
}

#[test]
fn crate_version_ranges_are_kafka_4_4s() {
    for (key, min, max) in [
        (ApiKey::ShareFetch, 1, 2),
        (ApiKey::ShareAcknowledge, 1, 2),
        (ApiKey::DescribeShareGroupOffsets, 0, 1),
        (ApiKey::ReadShareGroupStateSummary, 0, 1),
    ] {
        let r = key.valid_versions();
        assert_eq!((r.min, r.max), (min, max), "{key:?}");
    }
}

#[test]
fn share_fetch_request_matches_kafkas_bytes_at_v1_and_v2() {
    check(&share_fetch_request(1), 1, SHARE_FETCH_REQUEST_V1);
    check(&share_fetch_request(2), 2, SHARE_FETCH_REQUEST_V2);
}

#[test]
fn share_fetch_response_matches_kafkas_bytes_at_v1_and_v2() {
    check(&share_fetch_response(), 1, SHARE_FETCH_RESPONSE_V1);
    check(&share_fetch_response(), 2, SHARE_FETCH_RESPONSE_V2);
}

#[test]
fn share_acknowledge_request_matches_kafkas_bytes_at_v1_and_v2() {
    check(
        &share_acknowledge_request(1),
        1,
        SHARE_ACKNOWLEDGE_REQUEST_V1,
    );
    check(
        &share_acknowledge_request(2),
        2,
        SHARE_ACKNOWLEDGE_REQUEST_V2,
    );
}

#[test]
fn share_acknowledge_response_matches_kafkas_bytes_at_v1_and_v2() {
    check(
        &share_acknowledge_response(1),
        1,
        SHARE_ACKNOWLEDGE_RESPONSE_V1,
    );
    check(
        &share_acknowledge_response(2),
        2,
        SHARE_ACKNOWLEDGE_RESPONSE_V2,
    );
}

#[test]
fn describe_share_group_offsets_matches_kafkas_bytes_at_v0_and_v1() {
    check(&describe_offsets_request(), 0, DESCRIBE_OFFSETS_REQUEST_V0);
    check(&describe_offsets_request(), 1, DESCRIBE_OFFSETS_REQUEST_V1);
    check(
        &describe_offsets_response(0),
        0,
        DESCRIBE_OFFSETS_RESPONSE_V0,
    );
    check(
        &describe_offsets_response(1),
        1,
        DESCRIBE_OFFSETS_RESPONSE_V1,
    );
}

#[test]
fn read_share_group_state_summary_matches_kafkas_bytes_at_v0_and_v1() {
    check(&read_summary_request(), 0, READ_SUMMARY_REQUEST_V0);
    check(&read_summary_request(), 1, READ_SUMMARY_REQUEST_V1);
    check(&read_summary_response(0), 0, READ_SUMMARY_RESPONSE_V0);
    check(&read_summary_response(1), 1, READ_SUMMARY_RESPONSE_V1);
}

/// As in Kafka's classes: a field added as ignorable (ShareAcquireMode, the acknowledge
/// response's AcquisitionLockTimeoutMs, Lag, DeliveryCompleteCount) is dropped when written at
/// an older version; IsRenewAck is not ignorable, so a v1 ShareFetch or ShareAcknowledge with it
/// set is refused (ShareVectors.java prints "share_fetch_request_renew_ack 1 refused").
#[test]
fn fields_added_in_kafka_4_4_at_older_versions_are_dropped_or_refused_as_kafka_does() {
    let mut buf = BytesMut::new();
    share_fetch_request(1)
        .with_share_acquire_mode(1)
        .encode(&mut buf, 1)
        .expect("ignorable: dropped");
    assert_eq!(buf.freeze(), hex(SHARE_FETCH_REQUEST_V1));

    let mut buf = BytesMut::new();
    share_acknowledge_response(1)
        .with_acquisition_lock_timeout_ms(15000)
        .encode(&mut buf, 1)
        .expect("ignorable: dropped");
    assert_eq!(buf.freeze(), hex(SHARE_ACKNOWLEDGE_RESPONSE_V1));

    let mut buf = BytesMut::new();
    describe_offsets_response(1)
        .encode(&mut buf, 0)
        .expect("ignorable: dropped");
    assert_eq!(buf.freeze(), hex(DESCRIBE_OFFSETS_RESPONSE_V0));

    let mut buf = BytesMut::new();
    read_summary_response(1)
        .encode(&mut buf, 0)
        .expect("ignorable: dropped");
    assert_eq!(buf.freeze(), hex(READ_SUMMARY_RESPONSE_V0));

    assert!(share_fetch_request(1)
        .with_is_renew_ack(true)
        .encode(&mut BytesMut::new(), 1)
        .is_err());
    assert!(share_acknowledge_request(1)
        .with_is_renew_ack(true)
        .encode(&mut BytesMut::new(), 1)
        .is_err());
}

#[test]
fn versions_outside_the_ranges_are_refused() {
    assert!(share_fetch_request(2)
        .encode(&mut BytesMut::new(), 3)
        .is_err());
    assert!(share_fetch_request(1)
        .encode(&mut BytesMut::new(), 0)
        .is_err());
    assert!(share_acknowledge_request(2)
        .encode(&mut BytesMut::new(), 3)
        .is_err());
    assert!(describe_offsets_request()
        .encode(&mut BytesMut::new(), 2)
        .is_err());
    assert!(read_summary_request()
        .encode(&mut BytesMut::new(), 2)
        .is_err());
}

#[test]
fn truncated_share_messages_fail_to_decode_without_panicking() {
    let bytes = hex(SHARE_FETCH_REQUEST_V2);
    for n in 0..bytes.len() {
        let mut cut = bytes.slice(..n);
        assert!(ShareFetchRequest::decode(&mut cut, 2).is_err(), "{n}");
    }
    let bytes = hex(SHARE_FETCH_RESPONSE_V2);
    for n in 0..bytes.len() {
        let mut cut = bytes.slice(..n);
        assert!(ShareFetchResponse::decode(&mut cut, 2).is_err(), "{n}");
    }
    let bytes = hex(SHARE_ACKNOWLEDGE_RESPONSE_V2);
    for n in 0..bytes.len() {
        let mut cut = bytes.slice(..n);
        assert!(
            ShareAcknowledgeResponse::decode(&mut cut, 2).is_err(),
            "{n}"
        );
    }
    let bytes = hex(DESCRIBE_OFFSETS_RESPONSE_V1);
    for n in 0..bytes.len() {
        let mut cut = bytes.slice(..n);
        assert!(
            DescribeShareGroupOffsetsResponse::decode(&mut cut, 1).is_err(),
            "{n}"
        );
    }
}
