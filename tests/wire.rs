//! Raw wire conformance: the real `koord` binary, spoken to over TCP with `kafka-protocol`'s
//! client encoders and decoders.
//!
//! Part 1 checks every API of the SUPPORTED table at its lowest and highest version, and the
//! Kafka-visible rules of each (error codes, ids, batching). Part 2 checks the connection layer:
//! malformed frames close only their own connection, `max.connections`, graceful shutdown and
//! pipelining.
//!
//! Every test starts its own koord on its own port, so they run in parallel. Nothing waits on a
//! fixed sleep: waits poll with a deadline. With `KOORD_BOOTSTRAP=host:port` the same tests run
//! against that server; those needing koord's own configuration or process skip themselves.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use common::{
    api_versions_request, err, frame, group_id, s, topic_name, txn, Client, Koord, DEADLINE,
};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::EpochEndOffset;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, ConsumerProtocolSubscription,
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteGroupsRequest, DeleteRecordsRequest, DeleteTopicsRequest, DescribeClusterRequest,
    DescribeGroupsRequest, FetchRequest, FindCoordinatorRequest, HeartbeatRequest,
    InitProducerIdRequest, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    ListGroupsRequest, ListOffsetsRequest, MetadataRequest, MetadataResponse, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest, ProduceRequest,
    ResponseHeader, ResponseKind, SyncGroupRequest, TopicName,
};
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeTransactionsRequest, ListTransactionsRequest, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kafka_protocol::ResponseError;
use koord::api::{Supported, SUPPORTED};
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The versions of `key` this test run exercises: SUPPORTED's range, narrowed to what the
/// server advertises (they are equal for koord; an external server may differ).
fn range(advertised: &ApiVersionsResponse, key: ApiKey) -> Option<(i16, i16)> {
    let ours = SUPPORTED.iter().find(|s| s.key == key)?;
    let theirs = advertised
        .api_keys
        .iter()
        .find(|a| a.api_key == key as i16)?;
    let (lo, hi) = (
        ours.min.max(theirs.min_version),
        ours.max.min(theirs.max_version),
    );
    (lo <= hi).then_some((lo, hi))
}

/// The minimum ApiVersions advertises for a SUPPORTED entry: its own, except Produce, which
/// Kafka 4.x advertises from v0 while serving only v3+ (KAFKA-18659).
fn advertised_min(s: &Supported) -> i16 {
    if s.key == ApiKey::Produce {
        0
    } else {
        s.min
    }
}

/// The lowest and highest version of `key` under test.
fn ends(client: &mut Client, key: ApiKey) -> [i16; 2] {
    let advertised = client.api_versions(3);
    let (lo, hi) =
        range(&advertised, key).unwrap_or_else(|| panic!("the server does not serve {key:?}"));
    [lo, hi]
}

fn all_topics(version: i16) -> MetadataRequest {
    // v0 has no null list: an empty list means every topic.
    let topics = if version == 0 { Some(vec![]) } else { None };
    MetadataRequest::default().with_topics(topics)
}

fn named_topics(names: &[&str]) -> MetadataRequest {
    MetadataRequest::default().with_topics(Some(
        names
            .iter()
            .map(|n| MetadataRequestTopic::default().with_name(Some(topic_name(n))))
            .collect(),
    ))
}

fn metadata(client: &mut Client, version: i16, req: &MetadataRequest) -> MetadataResponse {
    client.send(version, req)
}

/// The one topic entry named `name`.
fn find_topic<'a>(resp: &'a MetadataResponse, name: &str) -> Option<&'a MetadataResponseTopic> {
    resp.topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some(name))
}

/// The broker the server says it is: node id, host, port (Metadata v1).
fn this_broker(client: &mut Client) -> (i32, String, i32) {
    let resp = metadata(client, 1, &all_topics(1));
    assert_eq!(resp.brokers.len(), 1, "one broker: {:?}", resp.brokers);
    let b = &resp.brokers[0];
    (b.node_id.0, b.host.to_string(), b.port)
}

fn creatable(name: &str, partitions: i32, replication: i16) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(partitions)
        .with_replication_factor(replication)
}

fn create_topics(
    client: &mut Client,
    version: i16,
    topics: Vec<CreatableTopic>,
    validate_only: bool,
) -> CreateTopicsResponse {
    client.send(
        version,
        &CreateTopicsRequest::default()
            .with_topics(topics)
            .with_timeout_ms(5_000)
            .with_validate_only(validate_only),
    )
}

fn result<'a>(resp: &'a CreateTopicsResponse, name: &str) -> &'a CreatableTopicResult {
    let matching: Vec<_> = resp
        .topics
        .iter()
        .filter(|t| t.name.0.as_str() == name)
        .collect();
    assert!(!matching.is_empty(), "no result for {name}: {resp:?}");
    matching[0]
}

/// Creates `name` with `partitions` and checks it worked.
fn create_topic(client: &mut Client, name: &str, partitions: i32) -> Uuid {
    let resp = create_topics(client, 7, vec![creatable(name, partitions, 1)], false);
    assert_eq!(err(result(&resp, name).error_code), None, "{resp:?}");
    await_topic(client, name, partitions as usize)
}

/// Whether the broker serves ListOffsets for every partition of `name`: it acts as their
/// leader, not only lists them in its metadata.
fn leads_every_partition(client: &mut Client, name: &str, partitions: usize) -> bool {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(name))
            .with_partitions(
                (0..partitions as i32)
                    .map(|p| {
                        ListOffsetsPartition::default()
                            .with_partition_index(p)
                            .with_timestamp(-1)
                    })
                    .collect(),
            )]);
    let resp = client.send(1, &req);
    resp.topics
        .iter()
        .flat_map(|t| &t.partitions)
        .filter(|p| p.error_code == 0)
        .count()
        == partitions
}

/// Polls Metadata until `name` has an id and a leader for each of its `partitions`; returns
/// the id. koord answers so at once; Kafka propagates a new topic to its metadata cache a moment
/// after CreateTopics returns, and clients wait the same way.
fn await_topic(client: &mut Client, name: &str, partitions: usize) -> Uuid {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let resp = metadata(
            client,
            12,
            &named_topics(&[name]).with_allow_auto_topic_creation(false),
        );
        if let Some(t) = find_topic(&resp, name) {
            if t.error_code == 0
                && !t.topic_id.is_nil()
                && t.partitions.len() == partitions
                && t.partitions.iter().all(|p| p.leader_id.0 >= 0)
                && leads_every_partition(client, name, partitions)
            {
                return t.topic_id;
            }
        }
        assert!(
            Instant::now() < deadline,
            "topic {name} not ready within {DEADLINE:?}: {resp:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Metadata v4+ for `name` without auto-creation: the error, `None` if the topic exists.
fn lookup(client: &mut Client, name: &str) -> Option<ResponseError> {
    let resp = metadata(
        client,
        13,
        &named_topics(&[name]).with_allow_auto_topic_creation(false),
    );
    assert_eq!(resp.topics.len(), 1, "{resp:?}");
    err(resp.topics[0].error_code)
}

/// Asserts that a healthy connection opened earlier still gets answers.
fn assert_still_served(client: &mut Client) {
    let resp = metadata(client, 12, &all_topics(12));
    assert_eq!(resp.brokers.len(), 1, "{resp:?}");
}

/// A healthy connection, proven served before the test misbehaves on another one.
fn healthy(koord: &Koord) -> Client {
    let mut c = koord.connect();
    assert_eq!(err(c.api_versions(3).error_code), None);
    c
}

// --- Data-plane helpers ------------------------------------------------------------------------

/// One v2 record batch holding `values` at offsets `first..` ([`txn::record_batch`]).
fn batch(first: i64, values: &[&str], producer: Option<(i64, i16, i32)>) -> Bytes {
    txn::record_batch(first, values, producer, false)
}

/// A topic to produce to: its name, and its id (nil if the server did not report one).
#[derive(Clone)]
struct TopicRef {
    name: String,
    id: Uuid,
}

/// Creates a topic with `partitions` and learns its id.
fn new_topic(c: &mut Client, prefix: &str, partitions: i32) -> TopicRef {
    let name = common::unique(prefix);
    let id = create_topic(c, &name, partitions);
    TopicRef { name, id }
}

/// Produce of `records` to one partition at `version` (by name below v13, by id from v13).
fn produce_request(
    version: i16,
    topic: &TopicRef,
    partition: i32,
    records: Bytes,
    acks: i16,
) -> ProduceRequest {
    let mut data =
        TopicProduceData::default().with_partition_data(vec![PartitionProduceData::default()
            .with_index(partition)
            .with_records(Some(records))]);
    if version >= 13 {
        data.topic_id = topic.id;
    } else {
        data.name = topic_name(&topic.name);
    }
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![data])
}

/// Produces `records` with acks=-1 and returns the one partition answer.
fn produce(
    c: &mut Client,
    version: i16,
    topic: &TopicRef,
    partition: i32,
    records: Bytes,
) -> PartitionProduceResponse {
    let resp = c.send(
        version,
        &produce_request(version, topic, partition, records, -1),
    );
    assert_eq!(resp.responses.len(), 1, "v{version}: {resp:?}");
    let t = &resp.responses[0];
    if version >= 13 {
        assert_eq!(t.topic_id, topic.id, "v{version}");
    } else {
        assert_eq!(t.name.0.as_str(), topic.name, "v{version}");
    }
    assert_eq!(t.partition_responses.len(), 1, "v{version}: {resp:?}");
    t.partition_responses[0].clone()
}

/// A one-partition Fetch at `version` (by name below v13, by id from v13).
fn fetch_request(
    version: i16,
    topic: &TopicRef,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
) -> FetchRequest {
    let mut t = FetchTopic::default().with_partitions(vec![FetchPartition::default()
        .with_partition(partition)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(1 << 20)]);
    if version >= 13 {
        t.topic_id = topic.id;
    } else {
        t.topic = topic_name(&topic.name);
    }
    FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_topics(vec![t])
}

/// The one partition of a Fetch answer.
fn fetched_partition(
    resp: &kafka_protocol::messages::FetchResponse,
    version: i16,
    topic: &TopicRef,
) -> PartitionData {
    assert_eq!(err(resp.error_code), None, "v{version}: {resp:?}");
    assert_eq!(resp.responses.len(), 1, "v{version}: {resp:?}");
    let t = &resp.responses[0];
    if version >= 13 {
        assert_eq!(t.topic_id, topic.id, "v{version}");
    } else {
        assert_eq!(t.topic.0.as_str(), topic.name, "v{version}");
    }
    assert_eq!(t.partitions.len(), 1, "v{version}: {resp:?}");
    t.partitions[0].clone()
}

fn fetch(
    c: &mut Client,
    version: i16,
    topic: &TopicRef,
    partition: i32,
    offset: i64,
) -> PartitionData {
    let resp = c.send(
        version,
        &fetch_request(version, topic, partition, offset, 0),
    );
    fetched_partition(&resp, version, topic)
}

/// `(offset, value)` of every record in a fetched record set.
fn values(records: &Option<Bytes>) -> Vec<(i64, String)> {
    let mut bytes = records.clone().expect("a record set, never null");
    let mut out = Vec::new();
    for set in RecordBatchDecoder::decode_all(&mut bytes).expect("fetched batches decode") {
        for r in set.records {
            let v = r.value.map(|v| String::from_utf8_lossy(&v).into_owned());
            out.push((r.offset, v.unwrap_or_default()));
        }
    }
    out
}

/// ListOffsets for one partition and `timestamp` at `version`.
fn list_offset(
    c: &mut Client,
    version: i16,
    topic: &TopicRef,
    partition: i32,
    timestamp: i64,
) -> ListOffsetsPartitionResponse {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(&topic.name))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(timestamp)])]);
    let resp = c.send(version, &req);
    assert_eq!(resp.topics.len(), 1, "v{version}: {resp:?}");
    assert_eq!(resp.topics[0].name.0.as_str(), topic.name);
    assert_eq!(resp.topics[0].partitions.len(), 1, "v{version}: {resp:?}");
    resp.topics[0].partitions[0].clone()
}

/// OffsetForLeaderEpoch for one partition and `epoch` at `version`.
fn epoch_end(
    c: &mut Client,
    version: i16,
    topic: &TopicRef,
    partition: i32,
    epoch: i32,
) -> EpochEndOffset {
    let mut req =
        OffsetForLeaderEpochRequest::default().with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(topic_name(&topic.name))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(partition)
                .with_leader_epoch(epoch)])]);
    if version >= 3 {
        req.replica_id = BrokerId(-1); // a consumer
    }
    let resp = c.send(version, &req);
    assert_eq!(resp.topics.len(), 1, "v{version}: {resp:?}");
    assert_eq!(resp.topics[0].partitions.len(), 1, "v{version}: {resp:?}");
    resp.topics[0].partitions[0].clone()
}

/// DeleteRecords for one partition at `version`: `(error, low watermark)`.
fn delete_records(
    c: &mut Client,
    version: i16,
    topic: &str,
    partition: i32,
    offset: i64,
) -> (Option<ResponseError>, i64) {
    let req = DeleteRecordsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(partition)
                .with_offset(offset)])]);
    let resp = c.send(version, &req);
    assert_eq!(resp.topics.len(), 1, "v{version}: {resp:?}");
    assert_eq!(resp.topics[0].name.0.as_str(), topic);
    assert_eq!(resp.topics[0].partitions.len(), 1, "v{version}: {resp:?}");
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.partition_index, partition);
    (err(p.error_code), p.low_watermark)
}

/// DeleteTopics at `version` with raw `topics` (v6+) or `names` (below v6).
fn delete_topics(
    c: &mut Client,
    version: i16,
    names: &[&str],
    topics: Vec<DeleteTopicState>,
) -> Vec<DeletableTopicResult> {
    let req = DeleteTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topic_names(names.iter().map(|n| topic_name(n)).collect())
        .with_topics(topics);
    c.send(version, &req).responses
}

fn by_name_or_id(name: Option<&str>, id: Uuid) -> DeleteTopicState {
    DeleteTopicState::default()
        .with_name(name.map(topic_name))
        .with_topic_id(id)
}

/// Deletes one topic, by id when `by_id` (v6+) and by name otherwise: its one result.
fn delete_topic(
    c: &mut Client,
    version: i16,
    topic: &TopicRef,
    by_id: bool,
) -> DeletableTopicResult {
    let resp = if by_id {
        delete_topics(c, version, &[], vec![by_name_or_id(None, topic.id)])
    } else if version >= 6 {
        delete_topics(
            c,
            version,
            &[],
            vec![by_name_or_id(Some(&topic.name), Uuid::nil())],
        )
    } else {
        delete_topics(c, version, &[&topic.name], vec![])
    };
    assert_eq!(resp.len(), 1, "v{version}: {resp:?}");
    resp[0].clone()
}

/// Polls until Metadata and Fetch answer UNKNOWN_TOPIC_OR_PARTITION for a deleted topic: koord
/// at once; Kafka once the deletion reached its metadata cache.
fn await_deleted(c: &mut Client, name: &str) {
    let deadline = Instant::now() + DEADLINE;
    let topic = TopicRef {
        name: name.to_string(),
        id: Uuid::nil(),
    };
    loop {
        let fetched = c.send(12, &fetch_request(12, &topic, 0, 0, 0));
        let fetch_error = fetched
            .responses
            .first()
            .and_then(|t| t.partitions.first())
            .and_then(|p| err(p.error_code));
        if lookup(c, name) == Some(ResponseError::UnknownTopicOrPartition)
            && fetch_error == Some(ResponseError::UnknownTopicOrPartition)
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} still served {DEADLINE:?} after its deletion: {fetched:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A fresh idempotent producer id: `(id, epoch)`.
///
/// Retries while the answer is COORDINATOR_LOAD_IN_PROGRESS, as producers do: Kafka gives that
/// while its producer-id manager starts up.
fn init_producer_id(c: &mut Client, version: i16) -> (i64, i16) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let resp = c.send(
            version,
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000),
        );
        if err(resp.error_code) == Some(ResponseError::CoordinatorLoadInProgress)
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        assert_eq!(err(resp.error_code), None, "v{version}: {resp:?}");
        return (resp.producer_id.0, resp.producer_epoch);
    }
}

// --- Group helpers (the full group semantics are tested in tests/groups.rs) --------------------

/// koord settings for group exchanges that complete at once, as `scripts/kafka.sh` configures
/// the reference Kafka: no initial rebalance delay, and the leader assigns (as in Kafka; the
/// probes check that the leader's assignment comes back).
const NO_REBALANCE_DELAY: &[&str] = &[
    "group.initial.rebalance.delay.ms=0",
    "group.assignor=client",
];

/// A ConsumerProtocolSubscription v0 to `topic`, as JoinGroup metadata.
fn subscription(topic: &str) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    ConsumerProtocolSubscription::default()
        .with_topics(vec![s(topic)])
        .encode(&mut b, 0)
        .expect("encode a subscription");
    b.freeze()
}

/// A consumer's JoinGroup: session and rebalance timeouts 30 s, the "range" protocol.
fn join_request(group: &str, member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(group_id(group))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_member_id(s(member_id))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(subscription("t"))])
}

/// JoinGroup at `version` as a new consumer (v4+: the MEMBER_ID_REQUIRED round first). The
/// group has no other member, so the answer makes this member the leader of generation 1.
fn join_alone(c: &mut Client, version: i16, group: &str) -> JoinGroupResponse {
    let request = |member_id: &str| {
        let mut r = join_request(group, member_id);
        if version == 0 {
            r.rebalance_timeout_ms = -1; // not in v0
        }
        r
    };
    let mut resp = c.send(version, &request(""));
    if version >= 4 {
        assert_eq!(
            err(resp.error_code),
            Some(ResponseError::MemberIdRequired),
            "v{version}: {resp:?}"
        );
        assert!(!resp.member_id.is_empty(), "v{version}: {resp:?}");
        let member_id = resp.member_id.to_string();
        resp = c.send(version, &request(&member_id));
    }
    assert_eq!(err(resp.error_code), None, "v{version}: {resp:?}");
    resp
}

/// A Stable one-member group: `(generation, member id)`, via JoinGroup and SyncGroup v5.
fn stable_alone(c: &mut Client, group: &str) -> (i32, String) {
    let join = join_alone(c, 9, group);
    let member = join.member_id.to_string();
    let sync = c.send(
        5,
        &sync_request(5, group, join.generation_id, &member, b"mine"),
    );
    assert_eq!(err(sync.error_code), None, "{sync:?}");
    (join.generation_id, member)
}

fn sync_request(
    version: i16,
    group: &str,
    generation: i32,
    member_id: &str,
    assignment: &'static [u8],
) -> SyncGroupRequest {
    let r = SyncGroupRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id(generation)
        .with_member_id(s(member_id))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(s(member_id))
            .with_assignment(Bytes::from_static(assignment))]);
    if version >= 5 {
        r.with_protocol_type(Some(s("consumer")))
            .with_protocol_name(Some(s("range")))
    } else {
        r
    }
}

/// A standalone commit (generation -1, no member) of `offset` for partition 0 of `topic`:
/// this also creates `group`, Empty. Returns the partition's error.
fn commit(
    c: &mut Client,
    version: i16,
    group: &str,
    topic: &str,
    offset: i64,
) -> Option<ResponseError> {
    common::commit_offset(c, version, group, ("", -1), topic, offset)
}

/// The committed offset of partition 0 of `topic` by OffsetFetch at `version`.
fn committed(c: &mut Client, version: i16, group: &str, topic: &str) -> i64 {
    if version >= 8 {
        let mut t = OffsetFetchRequestTopics::default().with_partition_indexes(vec![0]);
        if version >= 10 {
            t.topic_id = common::topic_id(c, topic);
        } else {
            t.name = topic_name(topic);
        }
        let resp = c.send(
            version,
            &OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(group_id(group))
                .with_topics(Some(vec![t]))]),
        );
        assert_eq!(resp.groups.len(), 1, "v{version}: {resp:?}");
        let g = &resp.groups[0];
        assert_eq!(err(g.error_code), None, "v{version}: {resp:?}");
        let p = &g.topics[0].partitions[0];
        assert_eq!(err(p.error_code), None, "v{version}: {resp:?}");
        p.committed_offset
    } else {
        let resp = c.send(
            version,
            &OffsetFetchRequest::default()
                .with_group_id(group_id(group))
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(topic_name(topic))
                    .with_partition_indexes(vec![0])])),
        );
        assert_eq!(err(resp.error_code), None, "v{version}: {resp:?}");
        let p = &resp.topics[0].partitions[0];
        assert_eq!(err(p.error_code), None, "v{version}: {resp:?}");
        p.committed_offset
    }
}

/// A group created by a standalone commit, for the admin APIs: `(group, topic)`.
fn committed_group(c: &mut Client, prefix: &str) -> (String, String) {
    let topic = new_topic(c, prefix, 1).name;
    let group = common::unique(prefix);
    assert_eq!(commit(c, 2, &group, &topic, 7), None);
    (group, topic)
}

// ---------------------------------------------------------------------------------------------
// Part 1: every supported API at its lowest and highest version
// ---------------------------------------------------------------------------------------------

/// A minimal correct exchange with one API at one version.
type Probe = fn(&mut Client, i16);

/// The probe for each API. A key served without a probe here fails
/// `every_supported_api_answers_at_its_lowest_and_highest_version`.
fn probe(key: ApiKey) -> Option<Probe> {
    Some(match key {
        ApiKey::ApiVersions => probe_api_versions,
        ApiKey::Metadata => probe_metadata,
        ApiKey::FindCoordinator => probe_find_coordinator,
        ApiKey::CreateTopics => probe_create_topics,
        ApiKey::DescribeCluster => probe_describe_cluster,
        ApiKey::DescribeTopicPartitions => probe_describe_topic_partitions,
        ApiKey::Produce => probe_produce,
        ApiKey::Fetch => probe_fetch,
        ApiKey::ListOffsets => probe_list_offsets,
        ApiKey::InitProducerId => probe_init_producer_id,
        ApiKey::OffsetForLeaderEpoch => probe_offset_for_leader_epoch,
        ApiKey::JoinGroup => probe_join_group,
        ApiKey::SyncGroup => probe_sync_group,
        ApiKey::Heartbeat => probe_heartbeat,
        ApiKey::LeaveGroup => probe_leave_group,
        ApiKey::OffsetCommit => probe_offset_commit,
        ApiKey::OffsetFetch => probe_offset_fetch,
        ApiKey::OffsetDelete => probe_offset_delete,
        ApiKey::DescribeGroups => probe_describe_groups,
        ApiKey::ListGroups => probe_list_groups,
        ApiKey::DeleteGroups => probe_delete_groups,
        ApiKey::DescribeConfigs => probe_describe_configs,
        ApiKey::AlterConfigs => probe_alter_configs,
        ApiKey::IncrementalAlterConfigs => probe_incremental_alter_configs,
        ApiKey::DeleteRecords => probe_delete_records,
        ApiKey::DeleteTopics => probe_delete_topics,
        ApiKey::CreatePartitions => probe_create_partitions,
        ApiKey::ConsumerGroupHeartbeat => probe_consumer_group_heartbeat,
        ApiKey::ConsumerGroupDescribe => probe_consumer_group_describe,
        ApiKey::StreamsGroupHeartbeat => probe_streams_group_heartbeat,
        ApiKey::StreamsGroupDescribe => probe_streams_group_describe,
        ApiKey::StreamsGroupTopologyDescriptionUpdate => {
            probe_streams_group_topology_description_update
        }
        ApiKey::ShareGroupHeartbeat => probe_share_group_heartbeat,
        ApiKey::ShareGroupDescribe => probe_share_group_describe,
        ApiKey::ShareFetch => probe_share_fetch,
        ApiKey::ShareAcknowledge => probe_share_acknowledge,
        ApiKey::DescribeShareGroupOffsets => probe_describe_share_group_offsets,
        ApiKey::AlterShareGroupOffsets => probe_alter_share_group_offsets,
        ApiKey::DeleteShareGroupOffsets => probe_delete_share_group_offsets,
        ApiKey::DescribeProducers => probe_describe_producers,
        ApiKey::DescribeTransactions => probe_describe_transactions,
        ApiKey::ListTransactions => probe_list_transactions,
        ApiKey::SaslHandshake => probe_sasl_handshake,
        ApiKey::SaslAuthenticate => probe_sasl_authenticate,
        ApiKey::GetTelemetrySubscriptions => probe_get_telemetry_subscriptions,
        ApiKey::PushTelemetry => probe_push_telemetry,
        ApiKey::DescribeClientQuotas => probe_describe_client_quotas,
        ApiKey::AlterClientQuotas => probe_alter_client_quotas,
        ApiKey::DescribeUserScramCredentials => probe_describe_user_scram_credentials,
        ApiKey::AlterUserScramCredentials => probe_alter_user_scram_credentials,
        ApiKey::DescribeAcls => probe_describe_acls,
        ApiKey::CreateAcls => probe_create_acls,
        ApiKey::DeleteAcls => probe_delete_acls,
        ApiKey::AddPartitionsToTxn => probe_add_partitions_to_txn,
        ApiKey::AddOffsetsToTxn => probe_add_offsets_to_txn,
        ApiKey::EndTxn => probe_end_txn,
        ApiKey::TxnOffsetCommit => probe_txn_offset_commit,
        ApiKey::WriteTxnMarkers => probe_write_txn_markers,
        _ => return None,
    })
}

/// A transactional producer on a new one-partition topic: (topic, transactional id, producer).
fn txn_producer(c: &mut Client, prefix: &str) -> (String, String, (i64, i16)) {
    let topic = common::unique(prefix);
    txn::create_topic(c, &topic, 1);
    let id = common::unique(&format!("{prefix}-txn"));
    let producer = txn::init_txn(c, &id, 60_000);
    (topic, id, producer)
}

/// AddPartitionsToTxn: the client's form up to v3; from v4 the broker's batch, one transaction
/// verified (not added: TRANSACTION_ABORTABLE), then added, then verified again.
fn probe_add_partitions_to_txn(c: &mut Client, v: i16) {
    let (topic, id, p) = txn_producer(c, "probe-addparts");
    if v < 4 {
        assert_eq!(
            txn::add_partitions(c, v, &id, p, &topic, &[0]),
            vec![None],
            "v{v}"
        );
    } else {
        assert_eq!(
            txn::add_partitions_batch(c, v, &id, p, &topic, &[0], true),
            (None, vec![Some(ResponseError::TransactionAbortable)]),
            "v{v}: verified before it was added"
        );
        assert_eq!(
            txn::add_partitions_batch(c, v, &id, p, &topic, &[0], false),
            (None, vec![None]),
            "v{v}"
        );
        assert_eq!(
            txn::add_partitions_batch(c, v, &id, p, &topic, &[0], true),
            (None, vec![None]),
            "v{v}: verified once added"
        );
        assert_eq!(
            txn::add_partitions_batch(c, v, &id, (p.0, p.1 + 1), &topic, &[0], true),
            (None, vec![Some(ResponseError::ProducerFenced)]),
            "v{v}: another epoch"
        );
    }
    assert_eq!(txn::end_txn(c, 3, &id, p, false), None, "v{v}");
}

fn probe_add_offsets_to_txn(c: &mut Client, v: i16) {
    let (_, id, p) = txn_producer(c, "probe-addoffsets");
    let group = common::unique("probe-addoffsets-group");
    assert_eq!(txn::add_offsets(c, v, &id, p, &group), None, "v{v}");
    assert_eq!(txn::end_txn(c, 3, &id, p, false), None, "v{v}");
}

/// TxnOffsetCommit: up to v4 after AddOffsetsToTxn; v5 (transaction version 2) adds the group
/// itself. Retried while a new topic is unknown (Kafka's metadata lag).
fn probe_txn_offset_commit(c: &mut Client, v: i16) {
    let (topic, id, p) = txn_producer(c, "probe-txnoffsets");
    let group = common::unique("probe-txnoffsets-group");
    if v < 5 {
        assert_eq!(txn::add_offsets(c, 3, &id, p, &group), None, "v{v}");
    }
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        let e = txn::txn_offset_commit(c, v, &id, p, &group, ("", -1), &topic, 0, 1);
        if e != Some(ResponseError::UnknownTopicOrPartition) || std::time::Instant::now() > deadline
        {
            assert_eq!(e, None, "v{v}");
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(txn::end_txn(c, 3, &id, p, false), None, "v{v}");
}

/// EndTxn of a transaction AddPartitionsToTxn opened, at every served version (v5 bumps the
/// epoch, KIP-890 part 2).
fn probe_end_txn(c: &mut Client, v: i16) {
    let (topic, id, p) = txn_producer(c, "probe-endtxn");
    assert_eq!(
        txn::add_partitions(c, 3, &id, p, &topic, &[0]),
        vec![None],
        "v{v}"
    );
    assert_eq!(txn::end_txn(c, v, &id, p, true), None, "v{v}");
}

/// WriteTxnMarkers (as `kafka-transactions abort` sends it): an abort marker for a producer
/// that wrote a transactional batch to a new topic's partition. Retried while the partition
/// has no leader yet (Kafka, right after CreateTopics).
fn probe_write_txn_markers(c: &mut Client, v: i16) {
    use kafka_protocol::messages::write_txn_markers_request::{
        WritableTxnMarker, WritableTxnMarkerTopic,
    };
    use kafka_protocol::messages::WriteTxnMarkersRequest;
    let (topic, id, p) = txn_producer(c, "probe-markers");
    assert_eq!(txn::add_partitions(c, 3, &id, p, &topic, &[0]), vec![None]);
    let req = WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(p.0.into())
        .with_producer_epoch(p.1)
        .with_transaction_result(false)
        .with_coordinator_epoch(-1)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(topic_name(&topic))
            .with_partition_indexes(vec![0])])]);
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        let r = c.send(v, &req);
        let code = err(r.markers[0].topics[0].partitions[0].error_code);
        if code != Some(ResponseError::NotLeaderOrFollower) || std::time::Instant::now() > deadline
        {
            assert_eq!(code, None, "v{v}: {r:?}");
            assert_eq!(r.markers[0].producer_id.0, p.0);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(txn::end_txn(c, 3, &id, p, false), None, "v{v}");
}

/// DescribeProducers of a new topic; retried while the partition has no leader yet (Kafka,
/// right after CreateTopics, answers NOT_LEADER_OR_FOLLOWER for a moment).
fn probe_describe_producers(c: &mut Client, v: i16) {
    let (topic, _, _) = txn_producer(c, "probe-descprod");
    let req = DescribeProducersRequest::default().with_topics(vec![
        kafka_protocol::messages::describe_producers_request::TopicRequest::default()
            .with_name(topic_name(&topic))
            .with_partition_indexes(vec![0]),
    ]);
    let deadline = std::time::Instant::now() + DEADLINE;
    let mut resp = c.send(v, &req);
    while err(resp.topics[0].partitions[0].error_code) == Some(ResponseError::NotLeaderOrFollower)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
        resp = c.send(v, &req);
    }
    let p = &resp.topics[0].partitions[0];
    assert_eq!(err(p.error_code), None, "v{v}: {resp:?}");
    assert!(p.active_producers.is_empty(), "nothing written: {resp:?}");
}

fn probe_describe_transactions(c: &mut Client, v: i16) {
    let (_, id, p) = txn_producer(c, "probe-desctxn");
    let resp = c.send(
        v,
        &DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(s(&id))]),
    );
    let t = &resp.transaction_states[0];
    assert_eq!(err(t.error_code), None, "v{v}: {resp:?}");
    assert_eq!(
        (t.transaction_state.as_str(), t.producer_id.0),
        ("Empty", p.0),
        "v{v}: {resp:?}"
    );
}

fn probe_list_transactions(c: &mut Client, v: i16) {
    let (_, id, p) = txn_producer(c, "probe-listtxn");
    let resp = c.send(
        v,
        &ListTransactionsRequest::default().with_producer_id_filters(vec![p.0.into()]),
    );
    assert_eq!(err(resp.error_code), None, "v{v}: {resp:?}");
    assert!(
        resp.transaction_states
            .iter()
            .any(|t| t.transactional_id.as_str() == id),
        "v{v}: {resp:?}"
    );
}

fn probe_api_versions(c: &mut Client, v: i16) {
    let resp = c.api_versions(v);
    assert_eq!(err(resp.error_code), None, "v{v}");
    assert!(
        resp.api_keys
            .iter()
            .any(|k| k.api_key == ApiKey::ApiVersions as i16),
        "v{v}: {resp:?}"
    );
}

fn probe_metadata(c: &mut Client, v: i16) {
    let name = common::unique("probe-md");
    create_topic(c, &name, 2);
    let (node, host, port) = this_broker(c);
    let resp = metadata(c, v, &named_topics(&[&name]));
    assert_eq!(resp.brokers.len(), 1, "v{v}: {resp:?}");
    assert_eq!(
        (
            resp.brokers[0].node_id.0,
            resp.brokers[0].host.to_string(),
            resp.brokers[0].port
        ),
        (node, host, port),
        "v{v}"
    );
    if v >= 1 {
        assert_eq!(resp.controller_id.0, node, "v{v}");
    }
    if v >= 2 {
        assert!(resp.cluster_id.is_some(), "v{v}: {resp:?}");
    }
    let topic = find_topic(&resp, &name).unwrap_or_else(|| panic!("v{v}: {resp:?}"));
    assert_eq!(err(topic.error_code), None, "v{v}");
    assert_eq!(topic.partitions.len(), 2, "v{v}: {topic:?}");
    for p in &topic.partitions {
        assert_eq!(err(p.error_code), None, "v{v}");
        assert_eq!(p.leader_id.0, node, "v{v}");
        assert_eq!(p.replica_nodes, vec![BrokerId(node)], "v{v}");
        assert_eq!(p.isr_nodes, vec![BrokerId(node)], "v{v}");
    }
    if v >= 10 {
        assert!(!topic.topic_id.is_nil(), "v{v}: {topic:?}");
    }
}

fn probe_find_coordinator(c: &mut Client, v: i16) {
    let (node, host, port) = this_broker(c);
    let group = common::unique("probe-group");
    let req = if v >= 4 {
        FindCoordinatorRequest::default().with_coordinator_keys(vec![s(&group)])
    } else {
        FindCoordinatorRequest::default().with_key(s(&group))
    };
    let resp = c.send(v, &req);
    if v >= 4 {
        assert_eq!(resp.coordinators.len(), 1, "v{v}: {resp:?}");
        let co = &resp.coordinators[0];
        assert_eq!(co.key.as_str(), group);
        assert_eq!(err(co.error_code), None, "v{v}: {resp:?}");
        assert_eq!(
            (co.node_id.0, co.host.to_string(), co.port),
            (node, host, port)
        );
    } else {
        assert_eq!(err(resp.error_code), None, "v{v}: {resp:?}");
        assert_eq!(
            (resp.node_id.0, resp.host.to_string(), resp.port),
            (node, host, port)
        );
    }
}

fn probe_create_topics(c: &mut Client, v: i16) {
    let name = common::unique("probe-ct");
    let resp = create_topics(c, v, vec![creatable(&name, 3, 1)], false);
    assert_eq!(resp.topics.len(), 1, "v{v}: {resp:?}");
    let r = &resp.topics[0];
    assert_eq!(r.name.0.as_str(), name);
    assert_eq!(err(r.error_code), None, "v{v}: {resp:?}");
    if v >= 5 {
        assert_eq!((r.num_partitions, r.replication_factor), (3, 1), "v{v}");
    }
    let id = await_topic(c, &name, 3);
    if v >= 7 {
        assert_eq!(r.topic_id, id, "v{v}: ids agree");
    }
}

fn probe_describe_cluster(c: &mut Client, v: i16) {
    let (node, host, port) = this_broker(c);
    let md = metadata(c, 2, &all_topics(2));
    let resp = c.send(v, &DescribeClusterRequest::default());
    assert_eq!(err(resp.error_code), None, "v{v}: {resp:?}");
    if v >= 1 {
        assert_eq!(resp.endpoint_type, 1, "v{v}: brokers");
    }
    assert_eq!(
        Some(resp.cluster_id.clone()),
        md.cluster_id,
        "v{v}: same as Metadata"
    );
    assert_eq!(resp.controller_id.0, node, "v{v}");
    assert_eq!(resp.brokers.len(), 1, "v{v}: {resp:?}");
    let b = &resp.brokers[0];
    assert_eq!(
        (b.broker_id.0, b.host.to_string(), b.port),
        (node, host, port)
    );
}

fn probe_produce(c: &mut Client, v: i16) {
    let topic = new_topic(c, "probe-produce", 2);
    let first = produce(c, v, &topic, 1, batch(0, &["a", "b", "c"], None));
    assert_eq!(err(first.error_code), None, "v{v}: {first:?}");
    assert_eq!(first.index, 1);
    assert_eq!(first.base_offset, 0, "v{v}");
    assert_eq!(first.log_append_time_ms, -1, "v{v}: CreateTime topic");
    if v >= 5 {
        assert_eq!(first.log_start_offset, 0, "v{v}");
    }
    let second = produce(c, v, &topic, 1, batch(0, &["d"], None));
    assert_eq!(err(second.error_code), None, "v{v}: {second:?}");
    assert_eq!(second.base_offset, 3, "v{v}: offsets continue");
    let got = values(&fetch(c, 12, &topic, 1, 0).records);
    assert_eq!(
        got,
        vec![
            (0, "a".to_string()),
            (1, "b".to_string()),
            (2, "c".to_string()),
            (3, "d".to_string())
        ],
        "v{v}"
    );
}

fn probe_fetch(c: &mut Client, v: i16) {
    let topic = new_topic(c, "probe-fetch", 1);
    let p = produce(c, 9, &topic, 0, batch(0, &["x", "y", "z"], None));
    assert_eq!(err(p.error_code), None, "{p:?}");
    let part = fetch(c, v, &topic, 0, 0);
    assert_eq!(err(part.error_code), None, "v{v}: {part:?}");
    assert_eq!(part.partition_index, 0);
    assert_eq!(part.high_watermark, 3, "v{v}");
    assert_eq!(part.last_stable_offset, 3, "v{v}");
    if v >= 5 {
        assert_eq!(part.log_start_offset, 0, "v{v}");
    }
    assert_eq!(
        values(&part.records),
        vec![
            (0, "x".to_string()),
            (1, "y".to_string()),
            (2, "z".to_string())
        ],
        "v{v}"
    );
    // From the middle of a batch: the whole batch comes back, as in Kafka.
    assert_eq!(values(&fetch(c, v, &topic, 0, 1).records).len(), 3, "v{v}");
    // At the end, with no wait: an empty record set, not null.
    let end = fetch(c, v, &topic, 0, 3);
    assert_eq!(err(end.error_code), None, "v{v}: {end:?}");
    assert_eq!(end.records.as_ref().map(|r| r.len()), Some(0), "v{v}");
    assert_eq!(end.high_watermark, 3);
}

fn probe_list_offsets(c: &mut Client, v: i16) {
    let topic = new_topic(c, "probe-lo", 1);
    let p = produce(c, 9, &topic, 0, batch(0, &["a", "b", "c"], None));
    assert_eq!(err(p.error_code), None, "{p:?}");
    let earliest = list_offset(c, v, &topic, 0, -2);
    assert_eq!(err(earliest.error_code), None, "v{v}: {earliest:?}");
    assert_eq!(earliest.offset, 0, "v{v}");
    assert_eq!(earliest.timestamp, -1, "v{v}");
    let latest = list_offset(c, v, &topic, 0, -1);
    assert_eq!(err(latest.error_code), None, "v{v}: {latest:?}");
    assert_eq!(latest.offset, 3, "v{v}");
    // By timestamp: the first record at or after it.
    let by_time = list_offset(c, v, &topic, 0, txn::BASE_TIMESTAMP + 15);
    assert_eq!(err(by_time.error_code), None, "v{v}: {by_time:?}");
    assert_eq!(
        (by_time.offset, by_time.timestamp),
        (2, txn::BASE_TIMESTAMP + 20),
        "v{v}"
    );
    if v >= 4 {
        assert_eq!(by_time.leader_epoch, 0, "v{v}");
    }
    let none = list_offset(c, v, &topic, 0, txn::BASE_TIMESTAMP + 1_000);
    assert_eq!((none.offset, none.timestamp), (-1, -1), "v{v}: {none:?}");
}

fn probe_init_producer_id(c: &mut Client, v: i16) {
    let (a, epoch_a) = init_producer_id(c, v);
    let (b, epoch_b) = init_producer_id(c, v);
    assert!(a >= 0 && b >= 0, "v{v}: ids {a} {b}");
    assert_ne!(a, b, "v{v}: each call gets a fresh producer id");
    assert_eq!((epoch_a, epoch_b), (0, 0), "v{v}");
}

fn probe_offset_for_leader_epoch(c: &mut Client, v: i16) {
    let topic = new_topic(c, "probe-ofle", 1);
    let p = produce(c, 9, &topic, 0, batch(0, &["a", "b"], None));
    assert_eq!(err(p.error_code), None, "{p:?}");
    let e = epoch_end(c, v, &topic, 0, 0);
    assert_eq!(err(e.error_code), None, "v{v}: {e:?}");
    assert_eq!(
        (e.partition, e.leader_epoch, e.end_offset),
        (0, 0, 2),
        "v{v}"
    );
}

fn probe_join_group(c: &mut Client, v: i16) {
    let group = common::unique("probe-join");
    let resp = join_alone(c, v, &group);
    assert_eq!(resp.generation_id, 1, "v{v}: {resp:?}");
    assert!(!resp.member_id.is_empty(), "v{v}");
    assert_eq!(resp.leader, resp.member_id, "v{v}: the only member leads");
    assert_eq!(resp.protocol_name.as_deref(), Some("range"), "v{v}");
    if v >= 7 {
        assert_eq!(resp.protocol_type.as_deref(), Some("consumer"), "v{v}");
    }
    assert_eq!(resp.members.len(), 1, "v{v}: the leader gets the members");
    assert_eq!(resp.members[0].member_id, resp.member_id, "v{v}");
    assert_eq!(resp.members[0].metadata, subscription("t"), "v{v}");
}

fn probe_sync_group(c: &mut Client, v: i16) {
    let group = common::unique("probe-sync");
    let join = join_alone(c, 9, &group);
    let member = join.member_id.to_string();
    let resp = c.send(
        v,
        &sync_request(v, &group, join.generation_id, &member, b"assigned"),
    );
    assert_eq!(err(resp.error_code), None, "v{v}: {resp:?}");
    assert_eq!(&resp.assignment[..], b"assigned", "v{v}");
    if v >= 5 {
        assert_eq!(resp.protocol_type.as_deref(), Some("consumer"), "v{v}");
        assert_eq!(resp.protocol_name.as_deref(), Some("range"), "v{v}");
    }
}

fn probe_heartbeat(c: &mut Client, v: i16) {
    let group = common::unique("probe-hb");
    let (generation, member) = stable_alone(c, &group);
    let resp = c.send(
        v,
        &HeartbeatRequest::default()
            .with_group_id(group_id(&group))
            .with_generation_id(generation)
            .with_member_id(s(&member)),
    );
    assert_eq!(err(resp.error_code), None, "v{v}: {resp:?}");
}

fn probe_leave_group(c: &mut Client, v: i16) {
    let group = common::unique("probe-leave");
    let (_, member) = stable_alone(c, &group);
    let req = LeaveGroupRequest::default().with_group_id(group_id(&group));
    let req = if v >= 3 {
        req.with_members(vec![MemberIdentity::default().with_member_id(s(&member))])
    } else {
        req.with_member_id(s(&member))
    };
    let resp = c.send(v, &req);
    assert_eq!(err(resp.error_code), None, "v{v}: {resp:?}");
    if v >= 3 {
        assert_eq!(resp.members.len(), 1, "v{v}: {resp:?}");
        assert_eq!(resp.members[0].member_id.as_str(), member, "v{v}");
        assert_eq!(err(resp.members[0].error_code), None, "v{v}: {resp:?}");
    }
    let described = c.send(
        5,
        &DescribeGroupsRequest::default().with_groups(vec![group_id(&group)]),
    );
    assert_eq!(
        described.groups[0].group_state.as_str(),
        "Empty",
        "v{v}: {described:?}"
    );
}

fn probe_offset_commit(c: &mut Client, v: i16) {
    let topic = new_topic(c, "probe-commit", 1).name;
    let group = common::unique("probe-commit");
    assert_eq!(commit(c, v, &group, &topic, 42), None, "v{v}");
    assert_eq!(committed(c, 5, &group, &topic), 42, "v{v}");
}

fn probe_offset_fetch(c: &mut Client, v: i16) {
    let (group, topic) = committed_group(c, "probe-fetch-offsets");
    assert_eq!(committed(c, v, &group, &topic), 7, "v{v}");
}

fn probe_offset_delete(c: &mut Client, v: i16) {
    let (group, topic) = committed_group(c, "probe-offset-delete");
    let resp = c.send(
        v,
        &OffsetDeleteRequest::default()
            .with_group_id(group_id(&group))
            .with_topics(vec![OffsetDeleteRequestTopic::default()
                .with_name(topic_name(&topic))
                .with_partitions(vec![
                    OffsetDeleteRequestPartition::default().with_partition_index(0)
                ])]),
    );
    assert_eq!(err(resp.error_code), None, "v{v}: {resp:?}");
    assert_eq!(err(resp.topics[0].partitions[0].error_code), None, "v{v}");
    assert_eq!(committed(c, 5, &group, &topic), -1, "v{v}: deleted");
}

fn probe_describe_groups(c: &mut Client, v: i16) {
    let (group, _) = committed_group(c, "probe-describe");
    let resp = c.send(
        v,
        &DescribeGroupsRequest::default().with_groups(vec![group_id(&group)]),
    );
    assert_eq!(resp.groups.len(), 1, "v{v}: {resp:?}");
    let g = &resp.groups[0];
    assert_eq!(err(g.error_code), None, "v{v}: {resp:?}");
    assert_eq!(g.group_id.0.as_str(), group);
    assert_eq!(g.group_state.as_str(), "Empty", "v{v}");
    assert!(g.members.is_empty(), "v{v}");
}

fn probe_list_groups(c: &mut Client, v: i16) {
    let (group, _) = committed_group(c, "probe-list");
    let resp = c.send(v, &ListGroupsRequest::default());
    assert_eq!(err(resp.error_code), None, "v{v}: {resp:?}");
    let listed = resp
        .groups
        .iter()
        .find(|g| g.group_id.0.as_str() == group)
        .unwrap_or_else(|| panic!("v{v}: {group} not listed: {resp:?}"));
    if v >= 4 {
        assert_eq!(listed.group_state.as_str(), "Empty", "v{v}");
    }
}

fn probe_delete_groups(c: &mut Client, v: i16) {
    let (group, topic) = committed_group(c, "probe-delete");
    let resp = c.send(
        v,
        &DeleteGroupsRequest::default().with_groups_names(vec![group_id(&group)]),
    );
    assert_eq!(resp.results.len(), 1, "v{v}: {resp:?}");
    assert_eq!(resp.results[0].group_id.0.as_str(), group);
    assert_eq!(err(resp.results[0].error_code), None, "v{v}: {resp:?}");
    assert_eq!(committed(c, 5, &group, &topic), -1, "v{v}: offsets gone");
}

/// A member joins a new consumer group (KIP-848) on a new topic.
fn consumer_group_member(
    c: &mut Client,
    v: i16,
    what: &str,
) -> (String, ConsumerGroupHeartbeatResponse) {
    let topic = new_topic(c, what, 2);
    let group = common::unique(what);
    let resp = c.send(
        v,
        &ConsumerGroupHeartbeatRequest::default()
            .with_group_id(group_id(&group))
            .with_member_id(StrBytes::from_string(uuid::Uuid::new_v4().to_string()))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_string(
                topic.name.clone(),
            ))]))
            .with_topic_partitions(Some(Vec::new())),
    );
    (group, resp)
}

fn probe_consumer_group_heartbeat(c: &mut Client, v: i16) {
    let (_, resp) = consumer_group_member(c, v, "probe-cghb");
    assert_eq!(err(resp.error_code), None, "v{v}: {resp:?}");
    // (What it is assigned is tests/consumer_groups.rs's subject: Kafka's coordinator may not
    // know a topic this new yet.)
    assert!(resp.member_epoch > 0, "v{v}: {resp:?}");
    assert!(
        resp.assignment.is_some(),
        "v{v}: a joining member gets its assignment"
    );
}

/// On a PLAINTEXT listener there is nothing to authenticate: ILLEGAL_SASL_STATE, and the
/// connection goes on (tests/security.rs has the SASL listener's exchange).
fn probe_sasl_handshake(c: &mut Client, v: i16) {
    let resp = c.send(
        v,
        &kafka_protocol::messages::SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
    );
    assert_eq!(
        err(resp.error_code),
        Some(ResponseError::IllegalSaslState),
        "v{v}: {resp:?}"
    );
}

fn probe_sasl_authenticate(c: &mut Client, v: i16) {
    let resp = c.send(
        v,
        &kafka_protocol::messages::SaslAuthenticateRequest::default()
            .with_auth_bytes(bytes::Bytes::from_static(b"\0u\0p")),
    );
    assert_eq!(
        err(resp.error_code),
        Some(ResponseError::IllegalSaslState),
        "v{v}: {resp:?}"
    );
}

/// tests/telemetry.rs checks the telemetry APIs error by error.
fn probe_get_telemetry_subscriptions(c: &mut Client, v: i16) {
    let resp = c.send(
        v,
        &kafka_protocol::messages::GetTelemetrySubscriptionsRequest::default(),
    );
    assert_eq!(err(resp.error_code), None, "v{v}: {resp:?}");
    assert!(!resp.client_instance_id.is_nil(), "v{v}: {resp:?}");
    assert!(resp.push_interval_ms > 0, "v{v}: {resp:?}");
}

fn probe_push_telemetry(c: &mut Client, v: i16) {
    let resp = c.send(
        v,
        &kafka_protocol::messages::PushTelemetryRequest::default(),
    );
    assert_eq!(
        err(resp.error_code),
        Some(ResponseError::InvalidRequest),
        "v{v}: {resp:?}"
    );
}

/// tests/quotas.rs checks the client quota APIs error by error.
fn probe_describe_client_quotas(c: &mut Client, v: i16) {
    use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
    let app = common::unique("probe-app");
    let resp = c.send(
        v,
        &kafka_protocol::messages::DescribeClientQuotasRequest::default().with_components(vec![
            ComponentData::default()
                .with_entity_type(s("client-id"))
                .with_match_type(0)
                .with_match(Some(s(&app))),
        ]),
    );
    assert_eq!(err(resp.error_code), None, "v{v}: {resp:?}");
    assert_eq!(resp.entries.map(|e| e.len()), Some(0), "v{v}");
}

fn probe_alter_client_quotas(c: &mut Client, v: i16) {
    use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
    let app = common::unique("probe-app");
    // validate_only: nothing stored.
    let resp = c.send(
        v,
        &kafka_protocol::messages::AlterClientQuotasRequest::default()
            .with_validate_only(true)
            .with_entries(vec![EntryData::default()
                .with_entity(vec![EntityData::default()
                    .with_entity_type(s("client-id"))
                    .with_entity_name(Some(s(&app)))])
                .with_ops(vec![OpData::default()
                    .with_key(s("producer_byte_rate"))
                    .with_value(1024.0)])]),
    );
    assert_eq!(resp.entries.len(), 1, "v{v}: {resp:?}");
    assert_eq!(err(resp.entries[0].error_code), None, "v{v}: {resp:?}");
}

fn probe_describe_user_scram_credentials(c: &mut Client, v: i16) {
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    let user = common::unique("probe-user");
    let resp = c.send(
        v,
        &kafka_protocol::messages::DescribeUserScramCredentialsRequest::default()
            .with_users(Some(vec![UserName::default().with_name(s(&user))])),
    );
    assert_eq!(err(resp.error_code), None, "v{v}: {resp:?}");
    assert_eq!(resp.results.len(), 1, "v{v}: {resp:?}");
    assert_eq!(
        err(resp.results[0].error_code),
        Some(ResponseError::ResourceNotFound),
        "v{v}: {resp:?}"
    );
}

fn probe_alter_user_scram_credentials(c: &mut Client, v: i16) {
    use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialDeletion;
    let user = common::unique("probe-user");
    let resp = c.send(
        v,
        &kafka_protocol::messages::AlterUserScramCredentialsRequest::default().with_deletions(
            vec![ScramCredentialDeletion::default()
                .with_name(s(&user))
                .with_mechanism(2)],
        ),
    );
    assert_eq!(resp.results.len(), 1, "v{v}: {resp:?}");
    assert_eq!(
        err(resp.results[0].error_code),
        Some(ResponseError::ResourceNotFound),
        "v{v}: {resp:?}"
    );
}

/// The ACL APIs' answer on this connection: SECURITY_DISABLED from a server without an
/// authorizer (koord by default), success from one with an authorizer where this connection's
/// principal may administer ACLs (scripts/kafka.sh's Kafka: ANONYMOUS is a super user).
/// tests/acls.rs checks both servers' ACL semantics.
fn acl_answer(code: i16) -> bool {
    match err(code) {
        None => true,
        Some(ResponseError::SecurityDisabled) => false,
        other => panic!("neither success nor SECURITY_DISABLED: {other:?}"),
    }
}

/// A filter for the ACLs of a principal no test grants anything.
fn nobody_filter() -> (kafka_protocol::messages::DescribeAclsRequest, String) {
    let nobody = format!("User:{}", common::unique("probe-nobody"));
    (
        kafka_protocol::messages::DescribeAclsRequest::default()
            .with_resource_type_filter(1)
            .with_resource_name_filter(None)
            .with_pattern_type_filter(1)
            .with_principal_filter(Some(s(&nobody)))
            .with_host_filter(None)
            .with_operation(1)
            .with_permission_type(1),
        nobody,
    )
}

fn probe_describe_acls(c: &mut Client, v: i16) {
    let (filter, _) = nobody_filter();
    let resp = c.send(v, &filter);
    if acl_answer(resp.error_code) {
        assert!(resp.resources.is_empty(), "v{v}: {resp:?}");
    }
}

fn probe_create_acls(c: &mut Client, v: i16) {
    use kafka_protocol::messages::create_acls_request::AclCreation;
    // An invalid binding (empty resource name), so nothing is left behind on either server.
    let resp = c.send(
        v,
        &kafka_protocol::messages::CreateAclsRequest::default().with_creations(vec![
            AclCreation::default()
                .with_resource_type(3)
                .with_resource_name(s(""))
                .with_resource_pattern_type(3)
                .with_principal(s("User:probe"))
                .with_host(s("*"))
                .with_operation(3)
                .with_permission_type(3),
        ]),
    );
    assert_eq!(resp.results.len(), 1, "v{v}: {resp:?}");
    let code = resp.results[0].error_code;
    if err(code) != Some(ResponseError::SecurityDisabled) {
        assert_eq!(
            err(code),
            Some(ResponseError::InvalidRequest),
            "v{v}: {resp:?}"
        );
    }
}

fn probe_delete_acls(c: &mut Client, v: i16) {
    use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
    let (_, nobody) = nobody_filter();
    let resp = c.send(
        v,
        &kafka_protocol::messages::DeleteAclsRequest::default().with_filters(vec![
            DeleteAclsFilter::default()
                .with_resource_type_filter(1)
                .with_resource_name_filter(None)
                .with_pattern_type_filter(1)
                .with_principal_filter(Some(s(&nobody)))
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1),
        ]),
    );
    assert_eq!(resp.filter_results.len(), 1, "v{v}: {resp:?}");
    if acl_answer(resp.filter_results[0].error_code) {
        assert!(
            resp.filter_results[0].matching_acls.is_empty(),
            "v{v}: {resp:?}"
        );
    }
}

fn probe_consumer_group_describe(c: &mut Client, v: i16) {
    let (group, _) = consumer_group_member(c, 1, "probe-cgdesc");
    let resp = c.send(
        v,
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![group_id(&group)]),
    );
    assert_eq!(resp.groups.len(), 1, "v{v}: {resp:?}");
    assert_eq!(err(resp.groups[0].error_code), None, "v{v}: {resp:?}");
    assert_eq!(
        resp.groups[0].group_state.as_str(),
        "Stable",
        "v{v}: {resp:?}"
    );
    assert_eq!(resp.groups[0].members.len(), 1, "v{v}: {resp:?}");
}

/// A streams group with one member (joined at `v`) whose one subtopology reads a new topic;
/// returns the group id.
fn streams_group_member(c: &mut Client, v: i16, prefix: &str) -> String {
    use kafka_protocol::messages::streams_group_heartbeat_request::{Subtopology, Topology};
    use kafka_protocol::messages::StreamsGroupHeartbeatRequest;
    let topic = new_topic(c, prefix, 1);
    let group = common::unique(prefix);
    let r = c.send(
        v,
        &StreamsGroupHeartbeatRequest::default()
            .with_group_id(group_id(&group))
            .with_member_id(s("probe-member"))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_topology(Some(Topology::default().with_subtopologies(vec![
                Subtopology::default()
                    .with_subtopology_id(s("0"))
                    .with_source_topics(vec![topic_name(&topic.name)]),
            ])))
            .with_active_tasks(Some(vec![]))
            .with_standby_tasks(Some(vec![]))
            .with_warmup_tasks(Some(vec![]))
            .with_process_id(Some(s("probe-process")))
            .with_client_tags(Some(vec![])),
    );
    assert_eq!(err(r.error_code), None, "v{v}: {r:?}");
    assert!(r.member_epoch >= 1, "v{v}: {r:?}");
    group
}

fn probe_streams_group_heartbeat(c: &mut Client, v: i16) {
    streams_group_member(c, v, "probe-sghb");
}

fn probe_streams_group_describe(c: &mut Client, v: i16) {
    use kafka_protocol::messages::{StreamsGroupDescribeRequest, StreamsGroupDescribeResponse};
    let group = streams_group_member(c, 1, "probe-sgdesc");
    let resp: StreamsGroupDescribeResponse = c.send(
        v,
        &StreamsGroupDescribeRequest::default().with_group_ids(vec![group_id(&group)]),
    );
    assert_eq!(resp.groups.len(), 1, "v{v}: {resp:?}");
    assert_eq!(err(resp.groups[0].error_code), None, "v{v}: {resp:?}");
    assert_eq!(resp.groups[0].members.len(), 1, "v{v}: {resp:?}");
}

/// StreamsGroupTopologyDescriptionUpdate of a member: Kafka 4.4 without a topology description
/// plugin (its default) refuses it with UNSUPPORTED_VERSION, as koord does
/// (tests/streams_groups.rs has the message and the describe side).
fn probe_streams_group_topology_description_update(c: &mut Client, v: i16) {
    use kafka_protocol::messages::{
        StreamsGroupTopologyDescriptionUpdateRequest, StreamsGroupTopologyDescriptionUpdateResponse,
    };
    let group = streams_group_member(c, 1, "probe-sgtdu");
    let resp: StreamsGroupTopologyDescriptionUpdateResponse = c.send(
        v,
        &StreamsGroupTopologyDescriptionUpdateRequest::default()
            .with_group_id(group_id(&group))
            .with_member_id(s("m"))
            .with_topology_description(Default::default()),
    );
    assert_eq!(
        err(resp.error_code),
        Some(ResponseError::UnsupportedVersion),
        "v{v}: {resp:?}"
    );
}

/// A member id as Kafka's clients make them (`Uuid.randomUuid().toString()`: 16 random bytes,
/// URL-safe base64 without padding).
fn kafka_member_id() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bits = u128::from_be_bytes(*Uuid::new_v4().as_bytes());
    // 22 sextets: the 128 bits, then 4 zero bits.
    (0..22)
        .map(|i| {
            let shift = 128 - 6 * (i + 1);
            let sextet = if shift >= 0 {
                (bits >> shift) & 0x3f
            } else {
                (bits << -shift) & 0x3f
            };
            ALPHABET[sextet as usize] as char
        })
        .collect()
}

/// A ShareGroupHeartbeat (v1) of `member` in `group` at `epoch`; at epoch 0 it subscribes to
/// `topic`.
fn share_heartbeat(
    c: &mut Client,
    v: i16,
    group: &str,
    member: &str,
    epoch: i32,
    topic: &TopicRef,
) -> kafka_protocol::messages::ShareGroupHeartbeatResponse {
    use kafka_protocol::messages::ShareGroupHeartbeatRequest;
    let req = ShareGroupHeartbeatRequest::default()
        .with_group_id(group_id(group))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_subscribed_topic_names((epoch == 0).then(|| vec![topic_name(&topic.name)]));
    let resp = c.send(v, &req);
    assert_eq!(err(resp.error_code), None, "v{v}: {req:?}\n=> {resp:?}");
    resp
}

/// A member joins `group` (a share group, KIP-932) subscribing to `topic` and heartbeats until
/// it is assigned all `partitions` of it (Kafka assigns a new topic's partitions once their
/// share state is initialized, a heartbeat or two after the join); its member id and epoch.
fn share_member(
    c: &mut Client,
    v: i16,
    group: &str,
    topic: &TopicRef,
    partitions: usize,
) -> (String, i32) {
    let member = kafka_member_id();
    let joined = share_heartbeat(c, v, group, &member, 0, topic);
    assert_eq!(
        joined.member_id.as_deref(),
        Some(member.as_str()),
        "v{v}: {joined:?}"
    );
    assert!(joined.member_epoch > 0, "v{v}: {joined:?}");
    let count = |a: &kafka_protocol::messages::share_group_heartbeat_response::Assignment| {
        a.topic_partitions
            .iter()
            .filter(|t| t.topic_id == topic.id)
            .map(|t| t.partitions.len())
            .sum::<usize>()
    };
    let mut owned = count(
        joined
            .assignment
            .as_ref()
            .expect("a joining member gets its assignment"),
    );
    let mut epoch = joined.member_epoch;
    let deadline = Instant::now() + DEADLINE;
    while owned < partitions {
        assert!(
            Instant::now() < deadline,
            "v{v}: {member} not assigned {partitions} partitions of {} within {DEADLINE:?}",
            topic.name
        );
        std::thread::sleep(Duration::from_millis(50));
        let r = share_heartbeat(c, v, group, &member, epoch, topic);
        epoch = r.member_epoch;
        if let Some(a) = &r.assignment {
            owned = count(a);
        }
    }
    (member, epoch)
}

fn probe_share_group_heartbeat(c: &mut Client, v: i16) {
    let topic = new_topic(c, "probe-sghb", 2);
    let group = common::unique("probe-sghb");
    let (member, _) = share_member(c, v, &group, &topic, 2);
    let left = share_heartbeat(c, v, &group, &member, -1, &topic);
    assert_eq!(left.member_epoch, -1, "v{v}: {left:?}");
}

fn probe_share_group_describe(c: &mut Client, v: i16) {
    use kafka_protocol::messages::{ShareGroupDescribeRequest, ShareGroupDescribeResponse};
    let topic = new_topic(c, "probe-sgdesc", 1);
    let group = common::unique("probe-sgdesc");
    let (member, epoch) = share_member(c, 1, &group, &topic, 1);
    let resp: ShareGroupDescribeResponse = c.send(
        v,
        &ShareGroupDescribeRequest::default().with_group_ids(vec![group_id(&group)]),
    );
    assert_eq!(resp.groups.len(), 1, "v{v}: {resp:?}");
    let g = &resp.groups[0];
    assert_eq!(err(g.error_code), None, "v{v}: {resp:?}");
    assert_eq!(
        (
            g.group_state.as_str(),
            g.assignor_name.as_str(),
            g.members.len()
        ),
        ("Stable", "simple", 1),
        "v{v}: {resp:?}"
    );
    let m = &g.members[0];
    assert_eq!(
        (m.member_id.as_str(), m.member_epoch),
        (member.as_str(), epoch),
        "v{v}: {resp:?}"
    );
}

/// A ShareFetch of partition 0 of `topic` for `member` of `group` at `session_epoch`, checked
/// free of errors; the partition, `None` when the answer leaves it out (Kafka 4.4 answers a
/// fetch that found nothing with no partition at all).
fn share_fetch(
    c: &mut Client,
    v: i16,
    group: &str,
    member: &str,
    session_epoch: i32,
    topic: &TopicRef,
    max_wait_ms: i32,
) -> Option<kafka_protocol::messages::share_fetch_response::PartitionData> {
    use kafka_protocol::messages::share_fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::ShareFetchRequest;
    let req = ShareFetchRequest::default()
        .with_group_id(Some(group_id(group)))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(session_epoch)
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_max_records(500)
        .with_batch_size(500)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(topic.id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition_index(0)
                .with_partition_max_bytes(1 << 20)])]);
    let resp = c.send(v, &req);
    assert_eq!(
        (err(resp.error_code), resp.error_message.as_deref()),
        (None, None),
        "v{v}: {resp:?}"
    );
    assert!(resp.acquisition_lock_timeout_ms > 0, "v{v}: {resp:?}");
    assert!(resp.responses.len() <= 1, "v{v}: {resp:?}");
    let t = resp.responses.first()?;
    assert_eq!(t.topic_id, topic.id, "v{v}: {resp:?}");
    assert_eq!(t.partitions.len(), 1, "v{v}: {resp:?}");
    let p = t.partitions[0].clone();
    assert_eq!(p.partition_index, 0, "v{v}: {resp:?}");
    assert_eq!(
        (err(p.error_code), err(p.acknowledge_error_code)),
        (None, None),
        "v{v}: {resp:?}"
    );
    Some(p)
}

/// `(first offset, last offset, delivery count)` of each acquired range.
fn acquired(
    p: &Option<kafka_protocol::messages::share_fetch_response::PartitionData>,
) -> Vec<(i64, i64, i16)> {
    p.iter()
        .flat_map(|p| &p.acquired_records)
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect()
}

/// Two members of a new share group on a new one-partition topic (both assigned it: the simple
/// assignor shares a partition between more members than partitions); the first opens its share
/// session on the still empty partition, which sets the group's start there (the default
/// `share.auto.offset.reset` is latest: a partition starts where it ends when first fetched);
/// three records are produced; the second member's first ShareFetch (session epoch 0) acquires
/// them. The group, that member and the topic.
fn share_records_acquired(c: &mut Client, v: i16, prefix: &str) -> (String, String, TopicRef) {
    let topic = new_topic(c, prefix, 1);
    let group = common::unique(prefix);
    let (first, _) = share_member(c, 1, &group, &topic, 1);
    let (second, _) = share_member(c, 1, &group, &topic, 1);
    let opened = share_fetch(c, v, &group, &first, 0, &topic, 500);
    assert_eq!(acquired(&opened), vec![], "v{v}: {opened:?}");
    let written = produce(c, 9, &topic, 0, batch(0, &["a", "b", "c"], None));
    assert_eq!(
        (err(written.error_code), written.base_offset),
        (None, 0),
        "{written:?}"
    );
    let p = share_fetch(c, v, &group, &second, 0, &topic, 5_000);
    assert_eq!(acquired(&p), vec![(0, 2, 1)], "v{v}: {p:?}");
    assert_eq!(
        values(&p.and_then(|p| p.records)),
        vec![(0, "a".into()), (1, "b".into()), (2, "c".into())],
        "v{v}"
    );
    (group, second, topic)
}

fn probe_share_fetch(c: &mut Client, v: i16) {
    share_records_acquired(c, v, "probe-sfetch");
}

fn probe_share_acknowledge(c: &mut Client, v: i16) {
    use kafka_protocol::messages::share_acknowledge_request::{
        AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch,
    };
    use kafka_protocol::messages::ShareAcknowledgeRequest;
    let (group, member, topic) = share_records_acquired(c, 1, "probe-sack");
    // ACCEPT (1) the three records, in the session opened by the fetch (epoch 0, so now 1).
    let resp = c.send(
        v,
        &ShareAcknowledgeRequest::default()
            .with_group_id(Some(group_id(&group)))
            .with_member_id(Some(s(&member)))
            .with_share_session_epoch(1)
            .with_topics(vec![AcknowledgeTopic::default()
                .with_topic_id(topic.id)
                .with_partitions(vec![AcknowledgePartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(vec![
                        AcknowledgementBatch::default()
                            .with_first_offset(0)
                            .with_last_offset(2)
                            .with_acknowledge_types(vec![1]),
                    ])])]),
    );
    assert_eq!(
        (err(resp.error_code), resp.error_message.as_deref()),
        (None, None),
        "v{v}: {resp:?}"
    );
    assert_eq!(resp.responses.len(), 1, "v{v}: {resp:?}");
    let t = &resp.responses[0];
    assert_eq!(t.topic_id, topic.id, "v{v}: {resp:?}");
    assert_eq!(
        t.partitions
            .iter()
            .map(|p| (p.partition_index, err(p.error_code)))
            .collect::<Vec<_>>(),
        vec![(0, None)],
        "v{v}: {resp:?}"
    );
    if v >= 2 {
        // The group's lock duration (Kafka 4.4's default, 30 s: the group sets none).
        assert_eq!(resp.acquisition_lock_timeout_ms, 30_000, "v{v}: {resp:?}");
    }
    // Accepted: nothing left to acquire (epoch 2: the acknowledgement moved the session on).
    let after = share_fetch(c, 1, &group, &member, 2, &topic, 100);
    assert_eq!(acquired(&after), vec![], "v{v}: {after:?}");
}

/// A share group that acquired three records: DescribeShareGroupOffsets (topics null: every
/// partition the group has read) lists its partition with a start offset within the log
/// (Kafka's share coordinator may report -1 until it has initialized the partition's state).
fn probe_describe_share_group_offsets(c: &mut Client, v: i16) {
    use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
    use kafka_protocol::messages::DescribeShareGroupOffsetsRequest;
    let (group, _, topic) = share_records_acquired(c, 1, "probe-dsgo");
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        let resp = c.send(
            v,
            &DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(group_id(&group))
                    .with_topics(None),
            ]),
        );
        assert_eq!(resp.groups.len(), 1, "v{v}: {resp:?}");
        let g = &resp.groups[0];
        assert_eq!(err(g.error_code), None, "v{v}: {resp:?}");
        let listed: Vec<(uuid::Uuid, i32, i64)> = g
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.topic_id, p.partition_index, p.start_offset))
            })
            .collect();
        // Kafka's share coordinator learns of the partition a moment after the fetch.
        if listed.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
            continue;
        }
        assert_eq!(listed.len(), 1, "v{v}: {resp:?}");
        assert_eq!((listed[0].0, listed[0].1), (topic.id, 0), "v{v}: {resp:?}");
        // -1 while Kafka's share coordinator has not initialized the partition's state.
        assert!((-1..=3).contains(&listed[0].2), "v{v}: {resp:?}");
        break;
    }
}

/// AlterShareGroupOffsets of a new group (created Empty) to start offset 2 of a new topic's
/// partition 0 (retried while Kafka's group coordinator has not learnt of the topic yet).
fn share_offsets_altered(c: &mut Client, v: i16) -> (String, TopicRef) {
    use kafka_protocol::messages::alter_share_group_offsets_request::{
        AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
    };
    use kafka_protocol::messages::AlterShareGroupOffsetsRequest;
    let topic = new_topic(c, "probe-asgo", 1);
    let group = common::unique("probe-asgo");
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        let resp = c.send(
            v,
            &AlterShareGroupOffsetsRequest::default()
                .with_group_id(group_id(&group))
                .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(topic_name(&topic.name))
                    .with_partitions(vec![
                        AlterShareGroupOffsetsRequestPartition::default()
                            .with_partition_index(0)
                            .with_start_offset(2),
                    ])]),
        );
        assert_eq!(err(resp.error_code), None, "v{v}: {resp:?}");
        let code = err(resp.responses[0].partitions[0].error_code);
        if code == Some(ResponseError::UnknownTopicOrPartition)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
            continue;
        }
        assert_eq!(code, None, "v{v}: {resp:?}");
        assert_eq!(resp.responses[0].topic_id, topic.id, "v{v}: {resp:?}");
        return (group, topic);
    }
}

fn probe_alter_share_group_offsets(c: &mut Client, v: i16) {
    share_offsets_altered(c, v);
}

/// DeleteShareGroupOffsets of the topic of a group altered a moment before: deleted.
fn probe_delete_share_group_offsets(c: &mut Client, v: i16) {
    use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
    use kafka_protocol::messages::DeleteShareGroupOffsetsRequest;
    let (group, topic) = share_offsets_altered(c, 0);
    // Kafka marks the altered topic's state initialized a moment after the answer; until then
    // it has no offset information to delete for it.
    let deadline = std::time::Instant::now() + DEADLINE;
    let resp = loop {
        let resp = c.send(
            v,
            &DeleteShareGroupOffsetsRequest::default()
                .with_group_id(group_id(&group))
                .with_topics(vec![DeleteShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(topic_name(&topic.name))]),
        );
        let pending = resp.responses.iter().any(|t| t.error_code != 0);
        if !pending || std::time::Instant::now() >= deadline {
            break resp;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(err(resp.error_code), None, "v{v}: {resp:?}");
    assert_eq!(
        resp.responses
            .iter()
            .map(|t| (t.topic_id, err(t.error_code)))
            .collect::<Vec<_>>(),
        vec![(topic.id, None)],
        "v{v}: {resp:?}"
    );
}

fn probe_delete_records(c: &mut Client, v: i16) {
    let topic = new_topic(c, "probe-delrec", 1);
    produce(c, 9, &topic, 0, batch(0, &["a", "b", "c"], None));
    assert_eq!(delete_records(c, v, &topic.name, 0, 1), (None, 1), "v{v}");
}

fn probe_delete_topics(c: &mut Client, v: i16) {
    let topic = new_topic(c, "probe-deltop", 1);
    let r = delete_topic(c, v, &topic, v >= 6);
    assert_eq!(err(r.error_code), None, "v{v}: {r:?}");
    await_deleted(c, &topic.name);
}

#[test]
fn every_supported_api_answers_at_its_lowest_and_highest_version() {
    let koord = Koord::start(NO_REBALANCE_DELAY);
    let mut c = koord.connect();
    let advertised = c.api_versions(3);
    let mut missing = Vec::new();
    for s in SUPPORTED {
        let Some(probe) = probe(s.key) else {
            missing.push(s.key);
            continue;
        };
        let Some((lo, hi)) = range(&advertised, s.key) else {
            if !koord.is_owned() && WITH_A_PLUGIN.contains(&s.key) {
                continue;
            }
            panic!("{:?} is in SUPPORTED but not advertised", s.key);
        };
        for v in [lo, hi] {
            probe(&mut c, v);
        }
    }
    assert!(
        missing.is_empty(),
        "APIs in SUPPORTED without a wire test: {missing:?}"
    );
}

/// What Kafka 4.4 advertises only with a plugin configured: the telemetry APIs, with a
/// telemetry receiver (koord is one).
const WITH_A_PLUGIN: [ApiKey; 2] = [ApiKey::GetTelemetrySubscriptions, ApiKey::PushTelemetry];

#[test]
fn api_versions_at_every_version_advertises_exactly_the_supported_table() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let ours: BTreeSet<(i16, i16, i16)> = SUPPORTED
        .iter()
        .map(|s: &Supported| (s.key as i16, advertised_min(s), s.max))
        .collect();
    for v in 0..=4 {
        assert_eq!(
            ApiKey::ApiVersions.response_header_version(v),
            0,
            "KIP-511: ApiVersions responses use header v0"
        );
        let resp = c.api_versions(v);
        assert_eq!(err(resp.error_code), None, "v{v}");
        let theirs: BTreeSet<(i16, i16, i16)> = resp
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        assert_eq!(theirs.len(), resp.api_keys.len(), "v{v}: duplicate keys");
        if koord.is_owned() {
            assert_eq!(theirs, ours, "v{v}: advertised list vs api::SUPPORTED");
        } else {
            for s in SUPPORTED.iter().filter(|s| !WITH_A_PLUGIN.contains(&s.key)) {
                assert!(
                    theirs.iter().any(|k| k.0 == s.key as i16),
                    "v{v}: {:?} not advertised",
                    s.key
                );
            }
        }
    }
}

#[test]
fn api_versions_v3_with_invalid_client_software_name_is_invalid_request() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let req = api_versions_request().with_client_software_name(s("-bad name"));
    let resp = c.send(3, &req);
    assert_eq!(err(resp.error_code), Some(ResponseError::InvalidRequest));
    // The connection stays usable.
    assert_eq!(err(c.api_versions(3).error_code), None);
}

#[test]
fn api_versions_at_version_127_answers_v0_unsupported_version_and_keeps_the_connection() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let corr = c.correlation_id();
    // A future client: header v2 (flexible), body as v4 would encode it.
    let req = api_versions_request();
    let mut bytes = BytesMut::new();
    bytes.put_i32(0);
    common::request_header(ApiKey::ApiVersions, 127, corr)
        .encode(&mut bytes, 2)
        .expect("header");
    req.encode(&mut bytes, 4).expect("body");
    let len = (bytes.len() - 4) as i32;
    bytes[..4].copy_from_slice(&len.to_be_bytes());
    c.send_bytes(&bytes).expect("send");

    let mut body = c
        .read_frame()
        .expect("read")
        .expect("an answer, not a close");
    let header = ResponseHeader::decode(&mut body, 0).expect("response header v0");
    assert_eq!(header.correlation_id, corr);
    let resp = ApiVersionsResponse::decode(&mut body, 0).expect("a v0 body");
    assert!(body.is_empty(), "{} bytes after the v0 body", body.len());
    assert_eq!(
        err(resp.error_code),
        Some(ResponseError::UnsupportedVersion)
    );
    let api_versions = resp
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::ApiVersions as i16)
        .expect("the list names ApiVersions");
    assert_eq!(api_versions.min_version, 0);
    if koord.is_owned() {
        assert_eq!(resp.api_keys.len(), SUPPORTED.len());
    }

    // The same socket then speaks v3 normally.
    let resp = c.api_versions(3);
    assert_eq!(err(resp.error_code), None);
    assert!(!resp.api_keys.is_empty());
}

// --- Metadata --------------------------------------------------------------------------------

#[test]
fn metadata_all_topics_lists_every_topic_at_lowest_and_highest_version() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let a = common::unique("all-a");
    let b = common::unique("all-b");
    create_topic(&mut c, &a, 1);
    create_topic(&mut c, &b, 4);
    for v in ends(&mut c, ApiKey::Metadata) {
        let resp = metadata(&mut c, v, &all_topics(v));
        for (name, n) in [(&a, 1), (&b, 4)] {
            let t = find_topic(&resp, name).unwrap_or_else(|| panic!("v{v}: {name} missing"));
            assert_eq!(err(t.error_code), None);
            assert_eq!(t.partitions.len(), n, "v{v}");
            let mut idx: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
            idx.sort_unstable();
            assert_eq!(idx, (0..n as i32).collect::<Vec<_>>(), "v{v}");
        }
    }
}

#[test]
fn metadata_configured_topics_exist_at_start() {
    let Some(koord) = Koord::start_owned(
        "metadata_configured_topics_exist_at_start",
        &["topics=orders:3,events"],
    ) else {
        return;
    };
    let mut c = koord.connect();
    let resp = metadata(&mut c, 1, &all_topics(1));
    let names: BTreeSet<String> = resp
        .topics
        .iter()
        .filter(|t| !t.is_internal)
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["events".to_string(), "orders".to_string()])
    );
    // Beside them, Kafka's internal topics with Kafka's default partition counts.
    for name in ["__consumer_offsets", "__transaction_state"] {
        let t = find_topic(&resp, name).unwrap_or_else(|| panic!("{name} missing: {resp:?}"));
        assert!(t.is_internal, "{t:?}");
        assert_eq!(t.partitions.len(), 50, "{name}");
    }
    assert_eq!(find_topic(&resp, "orders").unwrap().partitions.len(), 3);
    assert_eq!(find_topic(&resp, "events").unwrap().partitions.len(), 1);
    // The advertised address defaults to the listen address.
    assert_eq!(
        (resp.brokers[0].host.to_string(), resp.brokers[0].port),
        (
            koord.addr().ip().to_string(),
            i32::from(koord.addr().port())
        )
    );
}

/// `__consumer_offsets` as clients see it once a group asked for its coordinator (Kafka
/// creates it then): listed and marked internal at every Metadata version, every partition
/// led; Produce and DeleteRecords refused with INVALID_TOPIC_EXCEPTION (only the coordinator
/// writes it). Its records (Kafka's format) are read by Kafka's own formatters in
/// proto-tests/test_offsets_topic.py.
#[test]
fn the_offsets_topic_is_listed_internal_and_refuses_produce_and_delete_records() {
    const OFFSETS: &str = "__consumer_offsets";
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let group = common::unique("creates-offsets-topic");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let resp = c.send(
            3,
            &FindCoordinatorRequest::default()
                .with_key(s(&group))
                .with_key_type(0),
        );
        let listed = find_topic(&metadata(&mut c, 1, &all_topics(1)), OFFSETS).is_some();
        if err(resp.error_code).is_none() && listed {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{OFFSETS} never listed: {resp:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let mut partitions = 0;
    for v in ends(&mut c, ApiKey::Metadata) {
        let resp = metadata(&mut c, v, &all_topics(v));
        let t = find_topic(&resp, OFFSETS).unwrap_or_else(|| panic!("v{v}: {resp:?}"));
        assert_eq!(err(t.error_code), None, "v{v}");
        // The flag exists from v1.
        assert_eq!(t.is_internal, v >= 1, "v{v}: {t:?}");
        assert!(!t.partitions.is_empty(), "v{v}");
        assert!(
            t.partitions.iter().all(|p| p.leader_id.0 >= 0),
            "v{v}: {t:?}"
        );
        partitions = t.partitions.len() as i32;
        // Named, too.
        let named = metadata(&mut c, v, &named_topics(&[OFFSETS]));
        assert!(
            find_topic(&named, OFFSETS).is_some_and(|t| t.is_internal == (v >= 1)),
            "v{v}"
        );
    }
    let offsets = TopicRef {
        name: OFFSETS.into(),
        id: common::topic_id(&mut c, OFFSETS),
    };
    for v in ends(&mut c, ApiKey::Produce) {
        let p = produce(&mut c, v, &offsets, partitions - 1, batch(0, &["x"], None));
        assert_eq!(
            err(p.error_code),
            Some(ResponseError::InvalidTopicException),
            "v{v}: {p:?}"
        );
    }
    for v in ends(&mut c, ApiKey::DeleteRecords) {
        let (error, _) = delete_records(&mut c, v, OFFSETS, 0, 0);
        assert_eq!(error, Some(ResponseError::InvalidTopicException), "v{v}");
    }
}

#[test]
fn metadata_named_topics_returns_exactly_those() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let a = common::unique("named-a");
    let b = common::unique("named-b");
    let other = common::unique("named-other");
    for t in [&a, &b, &other] {
        create_topic(&mut c, t, 2);
    }
    for v in ends(&mut c, ApiKey::Metadata) {
        let resp = metadata(&mut c, v, &named_topics(&[&a, &b]));
        let names: BTreeSet<String> = resp
            .topics
            .iter()
            .map(|t| t.name.as_ref().expect("named").0.to_string())
            .collect();
        assert_eq!(names, BTreeSet::from([a.clone(), b.clone()]), "v{v}");
        assert!(resp.topics.iter().all(|t| t.error_code == 0), "v{v}");
    }
}

#[test]
fn metadata_without_allow_auto_topic_creation_is_unknown_topic_or_partition() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let name = common::unique("no-auto");
    for v in [4, 13] {
        let resp = metadata(
            &mut c,
            v,
            &named_topics(&[&name]).with_allow_auto_topic_creation(false),
        );
        assert_eq!(resp.topics.len(), 1);
        assert_eq!(
            err(resp.topics[0].error_code),
            Some(ResponseError::UnknownTopicOrPartition),
            "v{v}"
        );
        assert!(resp.topics[0].partitions.is_empty());
    }
    // And the lookup created nothing.
    let resp = metadata(&mut c, 1, &all_topics(1));
    assert!(find_topic(&resp, &name).is_none());
}

#[test]
fn metadata_auto_creates_unknown_topic_with_num_partitions() {
    let Some(koord) = Koord::start_owned(
        "metadata_auto_creates_unknown_topic_with_num_partitions",
        &["num.partitions=3"],
    ) else {
        return;
    };
    let mut c = koord.connect();
    // v0 (always auto-creates) and v13 (asks to).
    for v in [0, 13] {
        let name = common::unique("auto");
        let resp = metadata(&mut c, v, &named_topics(&[&name]));
        let t = find_topic(&resp, &name).expect("the topic");
        assert_eq!(err(t.error_code), None, "v{v}");
        assert_eq!(t.partitions.len(), 3, "v{v}");
        assert_eq!(lookup(&mut c, &name), None, "v{v}: it now exists");
    }
}

#[test]
fn metadata_with_auto_create_disabled_is_unknown_topic_or_partition() {
    let Some(koord) = Koord::start_owned(
        "metadata_with_auto_create_disabled_is_unknown_topic_or_partition",
        &["auto.create.topics.enable=false"],
    ) else {
        return;
    };
    let mut c = koord.connect();
    let name = common::unique("off");
    for v in [0, 13] {
        // The request allows it (v0 always does); the server setting forbids it.
        let resp = metadata(&mut c, v, &named_topics(&[&name]));
        assert_eq!(
            err(resp.topics[0].error_code),
            Some(ResponseError::UnknownTopicOrPartition),
            "v{v}"
        );
    }
    assert_eq!(
        lookup(&mut c, &name),
        Some(ResponseError::UnknownTopicOrPartition)
    );
}

#[test]
fn metadata_invalid_topic_name_is_invalid_topic_exception() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let long = "x".repeat(250);
    for v in ends(&mut c, ApiKey::Metadata) {
        for bad in ["bad name", "a/b", "..", long.as_str()] {
            let resp = metadata(&mut c, v, &named_topics(&[bad]));
            assert_eq!(resp.topics.len(), 1);
            assert_eq!(
                err(resp.topics[0].error_code),
                Some(ResponseError::InvalidTopicException),
                "v{v} {bad:?}"
            );
        }
    }
}

#[test]
fn metadata_by_topic_id_at_v12_and_v13() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let name = common::unique("by-id");
    let id = create_topic(&mut c, &name, 2);
    // The Java consumer names a topic it knows only by id (a KIP-848 regex subscription's) with
    // an empty name rather than a null one: also a lookup by id.
    for (v, empty_name) in [(12, false), (13, false), (12, true), (13, true)] {
        let name_field = empty_name.then(|| TopicName(StrBytes::from_static_str("")));
        let req =
            MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
                .with_topic_id(id)
                .with_name(name_field)]));
        let resp = metadata(&mut c, v, &req);
        assert_eq!(resp.topics.len(), 1, "v{v}: {resp:?}");
        let t = &resp.topics[0];
        assert_eq!(err(t.error_code), None, "v{v}");
        assert_eq!(t.topic_id, id, "v{v}");
        assert_eq!(t.name.as_ref().map(|n| n.0.to_string()), Some(name.clone()));
        assert_eq!(t.partitions.len(), 2);
    }
}

#[test]
fn metadata_unknown_topic_id_is_unknown_topic_id() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let id = Uuid::new_v4();
    // The Java consumer names a topic it knows only by id (a KIP-848 regex subscription's) with
    // an empty name rather than a null one: also a lookup by id.
    for (v, empty_name) in [(12, false), (13, false), (12, true), (13, true)] {
        let name_field = empty_name.then(|| TopicName(StrBytes::from_static_str("")));
        let req =
            MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
                .with_topic_id(id)
                .with_name(name_field)]));
        let resp = metadata(&mut c, v, &req);
        assert_eq!(resp.topics.len(), 1, "v{v}: {resp:?}");
        assert_eq!(
            err(resp.topics[0].error_code),
            Some(ResponseError::UnknownTopicId),
            "v{v}"
        );
        assert_eq!(resp.topics[0].topic_id, id, "v{v}");
        assert!(resp.topics[0].name.is_none(), "v{v}");
    }
}

// --- FindCoordinator -------------------------------------------------------------------------

#[test]
fn find_coordinator_v0_names_this_broker_for_a_group() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let (node, host, port) = this_broker(&mut c);
    let resp = c.send(
        0,
        &FindCoordinatorRequest::default().with_key(s("group-v0")),
    );
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    assert_eq!(
        (resp.node_id.0, resp.host.to_string(), resp.port),
        (node, host, port)
    );
}

#[test]
fn find_coordinator_v3_group_key_and_transaction_key() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let (node, _, _) = this_broker(&mut c);
    let resp = c.send(
        3,
        &FindCoordinatorRequest::default()
            .with_key(s("group-v3"))
            .with_key_type(0),
    );
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    assert_eq!(resp.node_id.0, node);
    // Kafka's message for its error, NONE's too.
    assert_eq!(resp.error_message.as_deref(), Some("NONE"), "{resp:?}");
    // This node coordinates transactional ids too (Kafka once its transaction log is up).
    assert_eq!(txn::find_txn_coordinator(&mut c, "txn-v3"), node);
}

#[test]
fn find_coordinator_v4_batches_answer_each_key() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let (node, host, port) = this_broker(&mut c);
    let groups = ["batch-a", "batch-b", "batch-c"];
    for v in ends(&mut c, ApiKey::FindCoordinator).map(|v| v.max(4)) {
        let resp = c.send(
            v,
            &FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(groups.iter().map(|g| s(g)).collect()),
        );
        let keys: Vec<&str> = resp.coordinators.iter().map(|k| k.key.as_str()).collect();
        assert_eq!(keys, groups, "v{v}: one answer per key, in order");
        for co in &resp.coordinators {
            assert_eq!(err(co.error_code), None, "v{v}: {co:?}");
            assert_eq!(
                (co.node_id.0, co.host.to_string(), co.port),
                (node, host.clone(), port)
            );
            // Batched answers carry no message: the field's default.
            assert_eq!(co.error_message.as_deref(), Some(""), "v{v}: {co:?}");
        }
        let txns = ["txn-a", "txn-b"];
        txn::find_txn_coordinator(&mut c, txns[0]);
        let resp = c.send(
            v,
            &FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_coordinator_keys(txns.iter().map(|t| s(t)).collect()),
        );
        let keys: Vec<&str> = resp.coordinators.iter().map(|k| k.key.as_str()).collect();
        assert_eq!(keys, txns, "v{v}");
        for co in &resp.coordinators {
            assert_eq!(err(co.error_code), None, "v{v}: {co:?}");
            assert_eq!(co.node_id.0, node);
        }
    }
}

// --- CreateTopics ----------------------------------------------------------------------------

#[test]
fn create_topics_creates_at_lowest_and_highest_version() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::CreateTopics) {
        probe_create_topics(&mut c, v);
    }
}

#[test]
fn create_topics_default_partitions_and_replication() {
    let Some(koord) = Koord::start_owned(
        "create_topics_default_partitions_and_replication",
        &["num.partitions=5"],
    ) else {
        return;
    };
    let mut c = koord.connect();
    // -1 for both means the server defaults (v4+).
    for v in [4, 7] {
        let name = common::unique("defaults");
        let resp = create_topics(&mut c, v, vec![creatable(&name, -1, -1)], false);
        let r = result(&resp, &name);
        assert_eq!(err(r.error_code), None, "v{v}: {r:?}");
        if v >= 5 {
            assert_eq!((r.num_partitions, r.replication_factor), (5, 1));
        }
        let md = metadata(&mut c, 1, &named_topics(&[&name]));
        assert_eq!(find_topic(&md, &name).unwrap().partitions.len(), 5);
    }
}

#[test]
fn create_topics_existing_topic_is_topic_already_exists() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let name = common::unique("exists");
    create_topic(&mut c, &name, 2);
    for v in ends(&mut c, ApiKey::CreateTopics) {
        let resp = create_topics(&mut c, v, vec![creatable(&name, 5, 1)], false);
        assert_eq!(
            err(result(&resp, &name).error_code),
            Some(ResponseError::TopicAlreadyExists),
            "v{v}"
        );
    }
    // The original stays as it was.
    let md = metadata(&mut c, 1, &named_topics(&[&name]));
    assert_eq!(find_topic(&md, &name).unwrap().partitions.len(), 2);
}

#[test]
fn create_topics_bad_counts_are_invalid_partitions_and_replication_factor() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::CreateTopics) {
        let zero_parts = common::unique("zero-parts");
        let neg_parts = common::unique("neg-parts");
        let zero_rf = common::unique("zero-rf");
        let big_rf = common::unique("big-rf");
        let resp = create_topics(
            &mut c,
            v,
            vec![
                creatable(&zero_parts, 0, 1),
                creatable(&neg_parts, -2, 1),
                creatable(&zero_rf, 1, 0),
                creatable(&big_rf, 1, 3),
            ],
            false,
        );
        assert_eq!(resp.topics.len(), 4, "v{v}: {resp:?}");
        for (name, expected) in [
            (&zero_parts, ResponseError::InvalidPartitions),
            (&neg_parts, ResponseError::InvalidPartitions),
            (&zero_rf, ResponseError::InvalidReplicationFactor),
            (&big_rf, ResponseError::InvalidReplicationFactor),
        ] {
            let r = result(&resp, name);
            assert_eq!(err(r.error_code), Some(expected), "v{v} {name}: {r:?}");
            assert_eq!(
                lookup(&mut c, name),
                Some(ResponseError::UnknownTopicOrPartition),
                "v{v}: {name} must not exist"
            );
        }
    }
}

#[test]
fn create_topics_invalid_name_is_invalid_topic_exception() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let long = "y".repeat(250);
    for v in ends(&mut c, ApiKey::CreateTopics) {
        let bad = ["bad name", "a/b", ".", "", long.as_str()];
        let resp = create_topics(
            &mut c,
            v,
            bad.iter().map(|n| creatable(n, 1, 1)).collect(),
            false,
        );
        assert_eq!(resp.topics.len(), bad.len(), "v{v}: {resp:?}");
        for name in bad {
            assert_eq!(
                err(result(&resp, name).error_code),
                Some(ResponseError::InvalidTopicException),
                "v{v} {name:?}"
            );
        }
    }
}

#[test]
fn create_topics_validate_only_creates_nothing() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::CreateTopics) {
        let name = common::unique("validate");
        let resp = create_topics(&mut c, v, vec![creatable(&name, 3, 1)], true);
        let r = result(&resp, &name);
        assert_eq!(err(r.error_code), None, "v{v}: {r:?}");
        if v >= 5 {
            assert_eq!(r.num_partitions, 3, "v{v}");
        }
        assert_eq!(
            lookup(&mut c, &name),
            Some(ResponseError::UnknownTopicOrPartition),
            "v{v}: validate_only created {name}"
        );
        // Validation still reports errors.
        let resp = create_topics(&mut c, v, vec![creatable(&name, 0, 1)], true);
        assert_eq!(
            err(result(&resp, &name).error_code),
            Some(ResponseError::InvalidPartitions)
        );
    }
}

#[test]
fn create_topics_duplicate_names_are_invalid_request() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::CreateTopics) {
        let dup = common::unique("dup");
        let fine = common::unique("fine");
        let resp = create_topics(
            &mut c,
            v,
            vec![
                creatable(&dup, 1, 1),
                creatable(&fine, 1, 1),
                creatable(&dup, 2, 1),
            ],
            false,
        );
        let dups: Vec<_> = resp
            .topics
            .iter()
            .filter(|t| t.name.0.as_str() == dup)
            .collect();
        assert!(!dups.is_empty(), "v{v}: {resp:?}");
        for d in dups {
            assert_eq!(
                err(d.error_code),
                Some(ResponseError::InvalidRequest),
                "v{v}: {d:?}"
            );
        }
        assert_eq!(
            lookup(&mut c, &dup),
            Some(ResponseError::UnknownTopicOrPartition)
        );
        // The rest of the request is served.
        assert_eq!(err(result(&resp, &fine).error_code), None, "v{v}");
        await_topic(&mut c, &fine, 1);
    }
}

// --- CreatePartitions ------------------------------------------------------------------------

/// An entry of a CreatePartitions request: `name` to `count` partitions, with `assignments`
/// (broker ids per new partition) if given.
fn grow(name: &str, count: i32, assignments: Option<Vec<Vec<i32>>>) -> CreatePartitionsTopic {
    CreatePartitionsTopic::default()
        .with_name(topic_name(name))
        .with_count(count)
        .with_assignments(assignments.map(|a| {
            a.into_iter()
                .map(|ids| {
                    CreatePartitionsAssignment::default()
                        .with_broker_ids(ids.into_iter().map(BrokerId).collect())
                })
                .collect()
        }))
}

fn create_partitions(
    c: &mut Client,
    version: i16,
    topics: Vec<CreatePartitionsTopic>,
    timeout_ms: i32,
    validate_only: bool,
) -> CreatePartitionsResponse {
    c.send(
        version,
        &CreatePartitionsRequest::default()
            .with_topics(topics)
            .with_timeout_ms(timeout_ms)
            .with_validate_only(validate_only),
    )
}

/// Each result of a CreatePartitions answer, in order: name, error, message.
fn grown(resp: &CreatePartitionsResponse) -> Vec<(String, Option<ResponseError>, Option<String>)> {
    resp.results
        .iter()
        .map(|r| {
            (
                r.name.0.to_string(),
                err(r.error_code),
                r.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

/// The one result of a CreatePartitions of `topics` that must all be answered alike.
fn grow_one(
    c: &mut Client,
    version: i16,
    topic: CreatePartitionsTopic,
    validate_only: bool,
) -> (Option<ResponseError>, Option<String>) {
    let name = topic.name.0.to_string();
    let resp = create_partitions(c, version, vec![topic], 5_000, validate_only);
    let mut results = grown(&resp);
    assert_eq!(results.len(), 1, "v{version}: {resp:?}");
    let (n, e, m) = results.remove(0);
    assert_eq!(n, name, "v{version}");
    (e, m)
}

/// Creates a topic with one partition, raises it to 3 at `v`, and produces to and fetches from
/// the new last partition.
fn probe_create_partitions(c: &mut Client, v: i16) {
    let topic = new_topic(c, "probe-cp", 1);
    assert_eq!(
        grow_one(c, v, grow(&topic.name, 3, None), false),
        (None, None),
        "v{v}"
    );
    await_topic(c, &topic.name, 3);
    let p = produce(c, 9, &topic, 2, batch(0, &["new"], None));
    assert_eq!((err(p.error_code), p.base_offset), (None, 0), "v{v}: {p:?}");
    let f = fetch(c, 12, &topic, 2, 0);
    assert_eq!(values(&f.records), vec![(0, "new".to_string())], "v{v}");
}

#[test]
fn create_partitions_at_lowest_and_highest_version() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::CreatePartitions) {
        probe_create_partitions(&mut c, v);
    }
}

/// Every partition of a grown topic is served: Metadata lists them, and each takes a produce
/// and gives it back; the old partitions keep their records.
#[test]
fn create_partitions_new_partitions_are_served_and_old_ones_kept() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let topic = new_topic(&mut c, "cp-served", 2);
    produce(&mut c, 9, &topic, 1, batch(0, &["old"], None));
    assert_eq!(
        grow_one(&mut c, 3, grow(&topic.name, 6, None), false),
        (None, None)
    );
    await_topic(&mut c, &topic.name, 6);
    let md = metadata(&mut c, 12, &named_topics(&[&topic.name]));
    let indexes: Vec<i32> = find_topic(&md, &topic.name)
        .unwrap()
        .partitions
        .iter()
        .map(|p| p.partition_index)
        .collect();
    assert_eq!(indexes, (0..6).collect::<Vec<_>>());
    for p in 2..6 {
        let r = produce(&mut c, 9, &topic, p, batch(0, &["new"], None));
        assert_eq!(err(r.error_code), None, "partition {p}: {r:?}");
        let f = fetch(&mut c, 12, &topic, p, 0);
        assert_eq!(
            values(&f.records),
            vec![(0, "new".to_string())],
            "partition {p}"
        );
    }
    let f = fetch(&mut c, 12, &topic, 1, 0);
    assert_eq!(values(&f.records), vec![(0, "old".to_string())]);
}

#[test]
fn create_partitions_not_an_increase_unknown_and_duplicate_names() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let invalid = Some(ResponseError::InvalidPartitions);
    for v in ends(&mut c, ApiKey::CreatePartitions) {
        let name = common::unique("cp-counts");
        create_topic(&mut c, &name, 3);
        let same = Some("Topic already has 3 partition(s).".to_string());
        assert_eq!(
            grow_one(&mut c, v, grow(&name, 3, None), false),
            (invalid, same)
        );
        for count in [2, 0, -1, i32::MIN] {
            let lower = format!(
                "The topic {name} currently has 3 partition(s); {count} would not be an increase."
            );
            assert_eq!(
                grow_one(&mut c, v, grow(&name, count, None), false),
                (invalid, Some(lower)),
                "v{v} {count}"
            );
        }
        let nope = common::unique("cp-nope");
        let unknown = Some(ResponseError::UnknownTopicOrPartition);
        for count in [1, 5, i32::MAX] {
            assert_eq!(
                grow_one(&mut c, v, grow(&nope, count, None), false),
                (unknown, None),
                "v{v} {count}"
            );
        }
        // A name given twice is refused, once; the rest of the request is served.
        let other = common::unique("cp-other");
        create_topic(&mut c, &other, 1);
        let resp = create_partitions(
            &mut c,
            v,
            vec![
                grow(&name, 4, None),
                grow(&other, 2, None),
                grow(&name, 5, None),
            ],
            5_000,
            false,
        );
        assert_eq!(
            grown(&resp),
            vec![
                (
                    name.clone(),
                    Some(ResponseError::InvalidRequest),
                    Some("Duplicate topic name.".to_string())
                ),
                (other.clone(), None, None),
            ],
            "v{v}"
        );
        await_topic(&mut c, &other, 2);
        let md = metadata(&mut c, 12, &named_topics(&[&name]));
        assert_eq!(find_topic(&md, &name).unwrap().partitions.len(), 3, "v{v}");
    }
}

#[test]
fn create_partitions_manual_assignments_must_name_this_broker_once_per_new_partition() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let (node, _, _) = this_broker(&mut c);
    let bad = Some(ResponseError::InvalidReplicaAssignment);
    let stranger = node + 1;
    for v in ends(&mut c, ApiKey::CreatePartitions) {
        let name = common::unique("cp-assign");
        create_topic(&mut c, &name, 1);
        for (assignments, message) in [
            (vec![vec![node]], "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.".to_string()),
            (vec![], "Attempted to add 2 additional partition(s), but only 0 assignment(s) were specified.".to_string()),
            (vec![vec![node]; 3], "Attempted to add 2 additional partition(s), but only 3 assignment(s) were specified.".to_string()),
            (vec![vec![node], vec![]], "The manual partition assignment includes an empty replica list.".to_string()),
            (vec![vec![node], vec![stranger]], format!("The manual partition assignment includes broker {stranger}, but no such broker is registered.")),
            (vec![vec![node], vec![stranger, node]], format!("The manual partition assignment includes broker {stranger}, but no such broker is registered.")),
            (vec![vec![node], vec![-1]], "The manual partition assignment includes broker -1, but no such broker is registered.".to_string()),
            (vec![vec![node, node], vec![node]], format!("The manual partition assignment includes the broker {node} more than once.")),
        ] {
            for validate_only in [true, false] {
                assert_eq!(
                    grow_one(&mut c, v, grow(&name, 3, Some(assignments.clone())), validate_only),
                    (bad, Some(message.clone())),
                    "v{v} {assignments:?}"
                );
            }
        }
        let md = metadata(&mut c, 12, &named_topics(&[&name]));
        assert_eq!(find_topic(&md, &name).unwrap().partitions.len(), 1, "v{v}");
        let ok = grow(&name, 3, Some(vec![vec![node], vec![node]]));
        assert_eq!(grow_one(&mut c, v, ok, false), (None, None), "v{v}");
        await_topic(&mut c, &name, 3);
    }
}

#[test]
fn create_partitions_validate_only_changes_nothing() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::CreatePartitions) {
        let name = common::unique("cp-validate");
        create_topic(&mut c, &name, 2);
        assert_eq!(
            grow_one(&mut c, v, grow(&name, 5, None), true),
            (None, None),
            "v{v}"
        );
        // Still 2: the same increase is valid again, and a count of 2 is no increase.
        assert_eq!(
            grow_one(&mut c, v, grow(&name, 5, None), true),
            (None, None),
            "v{v}"
        );
        assert_eq!(
            grow_one(&mut c, v, grow(&name, 2, None), true),
            (
                Some(ResponseError::InvalidPartitions),
                Some("Topic already has 2 partition(s).".to_string())
            ),
            "v{v}"
        );
        let md = metadata(&mut c, 12, &named_topics(&[&name]));
        assert_eq!(find_topic(&md, &name).unwrap().partitions.len(), 2, "v{v}");
    }
}

/// Kafka's controller call fails as a whole: every entry of the request (duplicates too, in
/// request order) gets REQUEST_TIMED_OUT for a timeout of 0 or less, POLICY_VIOLATION when more
/// than 10000 partitions would be added in all. Neither applies when only duplicates are left.
#[test]
fn create_partitions_timeout_and_too_many_partitions_fail_the_whole_request() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let [lo, hi] = ends(&mut c, ApiKey::CreatePartitions);
    let a = common::unique("cp-whole-a");
    let b = common::unique("cp-whole-b");
    create_topic(&mut c, &a, 1);
    create_topic(&mut c, &b, 1);
    let nope = common::unique("cp-whole-nope");
    let every = |resp: &CreatePartitionsResponse, e: ResponseError, m: Option<&str>| {
        grown(resp)
            .into_iter()
            .map(|(n, got, message)| {
                assert_eq!((got, message.as_deref()), (Some(e), m), "{n}: {resp:?}");
                n
            })
            .collect::<Vec<_>>()
    };
    for v in [lo, hi] {
        for timeout in [0, -1] {
            let resp = create_partitions(
                &mut c,
                v,
                vec![grow(&a, 2, None), grow(&nope, 2, None), grow(&a, 3, None)],
                timeout,
                false,
            );
            let names = every(&resp, ResponseError::RequestTimedOut, None);
            assert_eq!(names, [a.clone(), nope.clone(), a.clone()], "v{v}");
            let resp = create_partitions(
                &mut c,
                v,
                vec![grow(&a, 2, None), grow(&a, 3, None)],
                timeout,
                false,
            );
            assert_eq!(
                grown(&resp),
                vec![(
                    a.clone(),
                    Some(ResponseError::InvalidRequest),
                    Some("Duplicate topic name.".to_string())
                )],
                "v{v}"
            );
        }
        let policy = Some("Excessively large number of additional partitions per request.");
        for topics in [
            vec![grow(&a, 10_002, None)],
            vec![grow(&a, i32::MAX, None)],
            vec![
                grow(&a, 6_000, None),
                grow(&nope, 3, None),
                grow(&b, 6_000, None),
            ],
            vec![grow(&a, 10_002, Some(vec![vec![1]; 10_001]))],
        ] {
            let asked: Vec<String> = topics.iter().map(|t| t.name.0.to_string()).collect();
            for validate_only in [true, false] {
                let resp = create_partitions(&mut c, v, topics.clone(), 5_000, validate_only);
                let names = every(&resp, ResponseError::PolicyViolation, policy);
                assert_eq!(names, asked, "v{v}");
            }
        }
        // Exactly 10000 more, and counts the cap does not see (no increase, unknown topics).
        let resp = create_partitions(
            &mut c,
            v,
            vec![
                grow(&a, 5_001, None),
                grow(&b, 5_001, None),
                grow(&nope, i32::MAX, None),
            ],
            5_000,
            true,
        );
        let mut results = grown(&resp);
        results.sort_by(|x, y| x.0.cmp(&y.0));
        let mut expected = vec![
            (a.clone(), None, None),
            (b.clone(), None, None),
            (
                nope.clone(),
                Some(ResponseError::UnknownTopicOrPartition),
                None,
            ),
        ];
        expected.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(results, expected, "v{v}");
    }
    let md = metadata(&mut c, 12, &named_topics(&[&a, &b]));
    assert_eq!(find_topic(&md, &a).unwrap().partitions.len(), 1);
    assert_eq!(find_topic(&md, &b).unwrap().partitions.len(), 1);
}

/// Results come in the order Kafka's `ControllerApis` produces: the duplicated names, then the
/// others, each in the iteration order of the Java `HashSet` that collected them.
#[test]
fn create_partitions_results_come_in_kafkas_order() {
    use koord::api::create_partitions::java_hash_set_order;
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let known = common::unique("cp-order");
    create_topic(&mut c, &known, 1);
    let base = common::unique("cp-order");
    let mut names: Vec<String> = (0..30).map(|i| format!("{base}-{i}")).collect();
    names.insert(7, known.clone());
    let repeated = [names[20].clone(), names[3].clone(), names[11].clone()];
    let mut topics: Vec<CreatePartitionsTopic> = names.iter().map(|n| grow(n, 2, None)).collect();
    topics.extend(repeated.iter().map(|n| grow(n, 2, None)));
    let resp = create_partitions(&mut c, 3, topics, 5_000, true);
    let got: Vec<String> = grown(&resp).into_iter().map(|(n, _, _)| n).collect();
    let mut expected: Vec<&str> = java_hash_set_order(repeated.iter().map(String::as_str));
    expected.extend(
        java_hash_set_order(names.iter().map(String::as_str))
            .into_iter()
            .filter(|n| !repeated.iter().any(|r| r == n)),
    );
    assert_eq!(got, expected);
}

// --- DescribeCluster -------------------------------------------------------------------------

#[test]
fn describe_cluster_v0_and_v2_describe_this_broker() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::DescribeCluster) {
        probe_describe_cluster(&mut c, v);
    }
}

#[test]
fn describe_cluster_controller_endpoint_type_is_mismatched_endpoint_type() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let [_, hi] = ends(&mut c, ApiKey::DescribeCluster);
    for v in 1..=hi {
        let resp = c.send(v, &DescribeClusterRequest::default().with_endpoint_type(2));
        assert_eq!(
            err(resp.error_code),
            Some(ResponseError::MismatchedEndpointType),
            "v{v}: {resp:?}"
        );
        assert!(resp.brokers.is_empty(), "v{v}: {resp:?}");
    }
    // The connection is still fine.
    assert_eq!(
        err(c.send(0, &DescribeClusterRequest::default()).error_code),
        None
    );
}

// --- Data plane: Produce, Fetch, ListOffsets, InitProducerId, OffsetForLeaderEpoch -------------

#[test]
fn produce_at_lowest_and_highest_version() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::Produce) {
        probe_produce(&mut c, v);
    }
}

#[test]
fn fetch_at_lowest_and_highest_version() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::Fetch) {
        probe_fetch(&mut c, v);
    }
}

#[test]
fn list_offsets_at_lowest_and_highest_version() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::ListOffsets) {
        probe_list_offsets(&mut c, v);
    }
}

#[test]
fn init_producer_id_at_lowest_and_highest_version() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::InitProducerId) {
        probe_init_producer_id(&mut c, v);
    }
}

#[test]
fn offset_for_leader_epoch_at_lowest_and_highest_version() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::OffsetForLeaderEpoch) {
        probe_offset_for_leader_epoch(&mut c, v);
    }
}

#[test]
fn produce_to_an_unknown_topic_partition_or_topic_id_is_answered_per_partition() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let topic = new_topic(&mut c, "known", 1);
    let [lo, hi] = ends(&mut c, ApiKey::Produce);
    let unknown = TopicRef {
        name: common::unique("unknown"),
        id: Uuid::new_v4(),
    };
    for v in [lo, hi.min(12)] {
        let p = produce(&mut c, v, &unknown, 0, batch(0, &["a"], None));
        assert_eq!(
            err(p.error_code),
            Some(ResponseError::UnknownTopicOrPartition),
            "v{v}: {p:?}"
        );
        assert_eq!(p.base_offset, -1, "v{v}");
    }
    // Produce never creates topics.
    assert_eq!(
        lookup(&mut c, &unknown.name),
        Some(ResponseError::UnknownTopicOrPartition)
    );
    for v in [lo, hi] {
        let p = produce(&mut c, v, &topic, 7, batch(0, &["a"], None));
        assert_eq!(
            err(p.error_code),
            Some(ResponseError::UnknownTopicOrPartition),
            "v{v}: partition 7 of 1: {p:?}"
        );
    }
    if hi >= 13 {
        let p = produce(&mut c, hi, &unknown, 0, batch(0, &["a"], None));
        assert_eq!(
            err(p.error_code),
            Some(ResponseError::UnknownTopicId),
            "v{hi}: {p:?}"
        );
    }
}

#[test]
fn produce_with_acks_0_is_not_answered_but_appended() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let topic = new_topic(&mut c, "acks0", 1);
    let [lo, hi] = ends(&mut c, ApiKey::Produce);
    let mut bytes = Vec::new();
    for (i, v) in [lo, hi].into_iter().enumerate() {
        let req = produce_request(v, &topic, 0, batch(0, &["fire", "forget"], None), 0);
        bytes.extend_from_slice(&frame(ApiKey::Produce, v, 500 + i as i32, |b| {
            req.encode(b, v)
        }));
    }
    // The next response on the connection belongs to the request after the two produces.
    let corr = c.correlation_id();
    bytes.extend_from_slice(&frame(ApiKey::ApiVersions, 3, corr, |b| {
        api_versions_request().encode(b, 3)
    }));
    c.send_bytes(&bytes).expect("send");
    let mut body = c
        .read_response(ApiKey::ApiVersions, 3, corr)
        .expect("the ApiVersions answer comes first: acks=0 produces are not answered");
    ApiVersionsResponse::decode(&mut body, 3).expect("ApiVersions v3 body");
    let got = fetch(&mut c, 12, &topic, 0, 0);
    assert_eq!(got.high_watermark, 4, "both acks=0 batches were appended");
}

#[test]
fn idempotent_producer_retry_gets_the_original_offset_and_a_gap_is_out_of_order() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let topic = new_topic(&mut c, "idem", 1);
    let [_, hi] = ends(&mut c, ApiKey::Produce);
    let (pid, epoch) = init_producer_id(&mut c, 4);
    let first = batch(0, &["a", "b"], Some((pid, epoch, 0)));
    let p = produce(&mut c, hi, &topic, 0, first.clone());
    assert_eq!((err(p.error_code), p.base_offset), (None, 0), "{p:?}");
    // The same batch again (a retry after a lost response): the original offset, no copy.
    let retry = produce(&mut c, hi, &topic, 0, first);
    assert_eq!(
        (err(retry.error_code), retry.base_offset),
        (None, 0),
        "{retry:?}"
    );
    let next = produce(
        &mut c,
        hi,
        &topic,
        0,
        batch(0, &["c"], Some((pid, epoch, 2))),
    );
    assert_eq!(
        (err(next.error_code), next.base_offset),
        (None, 2),
        "{next:?}"
    );
    assert_eq!(fetch(&mut c, 12, &topic, 0, 0).high_watermark, 3);
    // Sequence 10 after 2: a gap.
    let gap = produce(
        &mut c,
        hi,
        &topic,
        0,
        batch(0, &["z"], Some((pid, epoch, 10))),
    );
    assert_eq!(
        err(gap.error_code),
        Some(ResponseError::OutOfOrderSequenceNumber),
        "{gap:?}"
    );
    assert_eq!(fetch(&mut c, 12, &topic, 0, 0).high_watermark, 3);
}

#[test]
fn fetch_long_poll_is_woken_by_a_produce() {
    let koord = Koord::start(&[]);
    let mut setup = koord.connect();
    let topic = new_topic(&mut setup, "long-poll", 1);
    let [_, hi] = ends(&mut setup, ApiKey::Fetch);
    let mut consumer = koord.connect();
    let corr = consumer.correlation_id();
    let req = fetch_request(hi, &topic, 0, 0, 20_000);
    let started = Instant::now();
    consumer
        .send_bytes(&frame(ApiKey::Fetch, hi, corr, |b| req.encode(b, hi)))
        .expect("send the fetch");
    let p = produce(&mut setup, 9, &topic, 0, batch(0, &["wake"], None));
    assert_eq!(err(p.error_code), None);
    let mut body = consumer
        .read_response(ApiKey::Fetch, hi, corr)
        .expect("the parked fetch is answered");
    let resp =
        kafka_protocol::messages::FetchResponse::decode(&mut body, hi).expect("a Fetch body");
    let part = fetched_partition(&resp, hi, &topic);
    assert_eq!(
        values(&part.records),
        vec![(0, "wake".to_string())],
        "after {:?}: {part:?}",
        started.elapsed()
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "answered by the append, not by max_wait_ms: {:?}",
        started.elapsed()
    );
}

#[test]
fn fetch_with_nothing_new_waits_max_wait_ms_then_answers_empty() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let topic = new_topic(&mut c, "wait", 1);
    let [_, hi] = ends(&mut c, ApiKey::Fetch);
    let started = Instant::now();
    let resp = c.send(hi, &fetch_request(hi, &topic, 0, 0, 150));
    let waited = started.elapsed();
    let part = fetched_partition(&resp, hi, &topic);
    assert_eq!(err(part.error_code), None);
    assert_eq!(part.records.as_ref().map(|r| r.len()), Some(0));
    assert!(
        waited >= Duration::from_millis(140),
        "answered after {waited:?}, before max_wait_ms 150"
    );
}

#[test]
fn fetch_beyond_the_log_end_is_offset_out_of_range() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let topic = new_topic(&mut c, "oor", 1);
    let p = produce(&mut c, 9, &topic, 0, batch(0, &["a", "b"], None));
    assert_eq!(err(p.error_code), None);
    for v in ends(&mut c, ApiKey::Fetch) {
        let part = fetch(&mut c, v, &topic, 0, 10);
        assert_eq!(
            err(part.error_code),
            Some(ResponseError::OffsetOutOfRange),
            "v{v}: {part:?}"
        );
        let unknown = fetch(&mut c, v, &topic, 3, 0);
        assert_eq!(
            err(unknown.error_code),
            Some(ResponseError::UnknownTopicOrPartition),
            "v{v}: {unknown:?}"
        );
    }
}

#[test]
fn list_offsets_and_offset_for_leader_epoch_of_an_unknown_partition() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let topic = new_topic(&mut c, "unknown-part", 1);
    for v in ends(&mut c, ApiKey::ListOffsets) {
        let r = list_offset(&mut c, v, &topic, 4, -1);
        assert_eq!(
            err(r.error_code),
            Some(ResponseError::UnknownTopicOrPartition),
            "v{v}: {r:?}"
        );
    }
    for v in ends(&mut c, ApiKey::OffsetForLeaderEpoch) {
        let e = epoch_end(&mut c, v, &topic, 4, 0);
        assert_eq!(
            err(e.error_code),
            Some(ResponseError::UnknownTopicOrPartition),
            "v{v}: {e:?}"
        );
    }
}

#[test]
fn delete_records_answers_error_codes_and_moves_the_log_start() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let topic = new_topic(&mut c, "delrec", 2);
    assert_eq!(
        err(produce(&mut c, 9, &topic, 0, batch(0, &["a", "b", "c"], None)).error_code),
        None
    );
    assert_eq!(
        err(produce(&mut c, 9, &topic, 0, batch(0, &["d", "e"], None)).error_code),
        None
    );
    let unknown = Some(ResponseError::UnknownTopicOrPartition);
    let out_of_range = Some(ResponseError::OffsetOutOfRange);
    for v in ends(&mut c, ApiKey::DeleteRecords) {
        let missing = common::unique("delrec-missing");
        assert_eq!(
            delete_records(&mut c, v, &missing, 0, 0),
            (unknown, -1),
            "v{v}"
        );
        assert_eq!(
            delete_records(&mut c, v, &topic.name, 2, 0),
            (unknown, -1),
            "v{v}"
        );
        assert_eq!(
            delete_records(&mut c, v, &topic.name, 0, 6),
            (out_of_range, -1),
            "v{v}"
        );
        assert_eq!(
            delete_records(&mut c, v, &topic.name, 0, -2),
            (out_of_range, -1),
            "v{v}"
        );
        assert_eq!(
            delete_records(&mut c, v, &topic.name, 1, 0),
            (None, 0),
            "v{v}: empty"
        );
    }
    // Offset 4 is inside the batch 3..=4: the start moves to it, the batch stays readable.
    assert_eq!(delete_records(&mut c, 2, &topic.name, 0, 4), (None, 4));
    assert_eq!(
        delete_records(&mut c, 0, &topic.name, 0, 1),
        (None, 4),
        "backwards"
    );
    for v in ends(&mut c, ApiKey::Fetch) {
        let below = fetch(&mut c, v, &topic, 0, 3);
        assert_eq!(err(below.error_code), out_of_range, "v{v}: {below:?}");
        let at = fetch(&mut c, v, &topic, 0, 4);
        assert_eq!(err(at.error_code), None, "v{v}: {at:?}");
        if v >= 5 {
            assert_eq!(at.log_start_offset, 4, "v{v}");
        }
        assert_eq!(at.high_watermark, 5, "v{v}");
        assert_eq!(
            values(&at.records),
            vec![(3, "d".into()), (4, "e".into())],
            "v{v}"
        );
    }
    for v in ends(&mut c, ApiKey::ListOffsets) {
        let earliest = list_offset(&mut c, v, &topic, 0, -2);
        assert_eq!(
            (err(earliest.error_code), earliest.offset),
            (None, 4),
            "v{v}"
        );
    }
    // -1: up to the high watermark; nothing is left to read, appends go on at the log end.
    assert_eq!(delete_records(&mut c, 1, &topic.name, 0, -1), (None, 5));
    let earliest = list_offset(&mut c, 7, &topic, 0, -2);
    assert_eq!(earliest.offset, 5);
    let empty = fetch(&mut c, 12, &topic, 0, 5);
    assert_eq!((err(empty.error_code), empty.log_start_offset), (None, 5));
    assert!(values(&empty.records).is_empty());
    assert_eq!(
        produce(&mut c, 9, &topic, 0, batch(0, &["f"], None)).base_offset,
        5
    );
    let after = fetch(&mut c, 12, &topic, 0, 5);
    assert_eq!(values(&after.records), vec![(5, "f".into())]);
}

/// Deleting a topic deletes every group's committed offsets of it (Kafka 4.4's
/// `OffsetMetadataManager.onTopicsDeleted`), an Empty group's and a member's alike; offsets of
/// other topics stay.
#[test]
fn a_deleted_topics_committed_offsets_go_with_it() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let (group, topic) = committed_group(&mut c, "deltop-offsets");
    let kept = new_topic(&mut c, "deltop-offsets-kept", 1).name;
    assert_eq!(commit(&mut c, 2, &group, &kept, 9), None);
    let other = common::unique("deltop-offsets-g2");
    assert_eq!(commit(&mut c, 2, &other, &topic, 3), None);
    assert_eq!(committed(&mut c, 9, &group, &topic), 7);
    let deleted = delete_topics(&mut c, 5, &[&topic], vec![]);
    assert_eq!(err(deleted[0].error_code), None, "{deleted:?}");
    await_deleted(&mut c, &topic);
    // Kafka deletes them once the controller's deletion reaches its group coordinator.
    let deadline = Instant::now() + DEADLINE;
    while committed(&mut c, 9, &group, &topic) != -1 || committed(&mut c, 9, &other, &topic) != -1 {
        assert!(
            Instant::now() < deadline,
            "the deleted topic's offsets are still there"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(committed(&mut c, 9, &group, &kept), 9);
}

#[test]
fn delete_topics_by_name_and_by_id_with_kafkas_error_codes() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let invalid = Some(ResponseError::InvalidRequest);
    let unknown = Some(ResponseError::UnknownTopicOrPartition);
    let missing = common::unique("deltop-missing");
    for v in ends(&mut c, ApiKey::DeleteTopics) {
        let r = if v >= 6 {
            delete_topics(
                &mut c,
                v,
                &[],
                vec![by_name_or_id(Some(&missing), Uuid::nil())],
            )
        } else {
            delete_topics(&mut c, v, &[&missing], vec![])
        };
        assert_eq!(r.len(), 1, "v{v}: {r:?}");
        assert_eq!(err(r[0].error_code), unknown, "v{v}: {r:?}");
        assert_eq!(
            r[0].name.as_ref().map(|n| n.0.as_str()),
            Some(missing.as_str())
        );
    }
    let kept = new_topic(&mut c, "deltop-kept", 1);
    let neither = delete_topics(&mut c, 6, &[], vec![by_name_or_id(None, Uuid::nil())]);
    assert_eq!(neither.len(), 1, "{neither:?}");
    assert_eq!(err(neither[0].error_code), invalid, "{neither:?}");
    let both = delete_topics(
        &mut c,
        6,
        &[],
        vec![by_name_or_id(Some(&kept.name), kept.id)],
    );
    assert_eq!(both.len(), 1, "{both:?}");
    assert_eq!(err(both[0].error_code), invalid, "{both:?}");
    let unknown_id = Uuid::new_v4();
    let r = delete_topics(&mut c, 6, &[], vec![by_name_or_id(None, unknown_id)]);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(
        (err(r[0].error_code), r[0].topic_id),
        (Some(ResponseError::UnknownTopicId), unknown_id),
        "{r:?}"
    );
    assert_eq!(
        lookup(&mut c, &kept.name),
        None,
        "malformed deletes delete nothing"
    );

    // By name (v1 and v6) and by id (v6): each reports the topic's name, and at v6 its id.
    let by_name_v1 = new_topic(&mut c, "deltop-name", 2);
    let by_name_v6 = new_topic(&mut c, "deltop-name6", 1);
    let by_id = new_topic(&mut c, "deltop-id", 1);
    produce(&mut c, 9, &by_name_v1, 1, batch(0, &["a", "b"], None));
    for (topic, version, use_id) in [
        (&by_name_v1, 1, false),
        (&by_name_v6, 6, false),
        (&by_id, 6, true),
    ] {
        let r = delete_topic(&mut c, version, topic, use_id);
        assert_eq!(err(r.error_code), None, "{r:?}");
        assert_eq!(
            r.name.as_ref().map(|n| n.0.as_str()),
            Some(topic.name.as_str()),
            "{r:?}"
        );
        if version >= 6 {
            assert_eq!(r.topic_id, topic.id, "{r:?}");
        }
        await_deleted(&mut c, &topic.name);
    }
    let again = delete_topic(&mut c, 6, &by_id, true);
    assert_eq!(
        err(again.error_code),
        Some(ResponseError::UnknownTopicId),
        "{again:?}"
    );
    let again = delete_topic(&mut c, 5, &by_name_v1, false);
    assert_eq!(err(again.error_code), unknown, "{again:?}");
    assert_eq!(lookup(&mut c, &kept.name), None, "other topics stay");

    // Created again, the topic starts empty.
    let recreated = TopicRef {
        name: by_name_v1.name.clone(),
        id: create_topic(&mut c, &by_name_v1.name, 2),
    };
    let latest = list_offset(&mut c, 7, &recreated, 1, -1);
    assert_eq!(
        (err(latest.error_code), latest.offset),
        (None, 0),
        "{latest:?}"
    );
    let p = produce(&mut c, 9, &recreated, 1, batch(0, &["new"], None));
    assert_eq!((err(p.error_code), p.base_offset), (None, 0), "{p:?}");
    let got = fetch(&mut c, 12, &recreated, 1, 0);
    assert_eq!(values(&got.records), vec![(0, "new".into())]);
}

#[test]
fn produce_of_a_partition_listed_twice_appends_it_once() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let topic = new_topic(&mut c, "produce-twice", 2);
    let mut req = produce_request(9, &topic, 0, batch(0, &["first"], None), -1);
    req.topic_data[0].partition_data.push(
        PartitionProduceData::default()
            .with_index(0)
            .with_records(Some(batch(0, &["second", "x"], None))),
    );
    let again = produce_request(9, &topic, 1, batch(0, &["p1-first"], None), -1);
    let again2 = produce_request(9, &topic, 1, batch(0, &["p1-second", "y", "z"], None), -1);
    req.topic_data.extend(again.topic_data);
    req.topic_data.extend(again2.topic_data);
    let resp = c.send(9, &req);
    let answered: Vec<(i32, i16, i64)> = resp
        .responses
        .iter()
        .flat_map(|t| &t.partition_responses)
        .map(|p| (p.index, p.error_code, p.base_offset))
        .collect();
    let mut sorted = answered.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, vec![(0, 0, 0), (1, 0, 0)], "{resp:?}");
    assert_eq!(resp.responses.len(), 1, "{resp:?}");
    let p0 = fetch(&mut c, 12, &topic, 0, 0);
    assert_eq!(
        values(&p0.records),
        vec![(0, "second".into()), (1, "x".into())]
    );
    let p1 = fetch(&mut c, 12, &topic, 1, 0);
    assert_eq!(
        values(&p1.records),
        vec![(0, "p1-second".into()), (1, "y".into()), (2, "z".into())]
    );
}

/// A v2 batch with one record whose header count says 0x7fffffff, with a correct CRC.
fn batch_with_forged_header_count() -> Bytes {
    // Record: length 11, attributes 0, timestamp delta 0, offset delta 0, key null (-1),
    // value length 1, "v", header count zigzag(0x7fffffff).
    let record: &[u8] = &[
        0x16, 0x00, 0x00, 0x00, 0x01, 0x02, b'v', 0xfe, 0xff, 0xff, 0xff, 0x0f,
    ];
    let mut after_crc = BytesMut::new();
    after_crc.put_i16(0); // attributes: no compression, CreateTime
    after_crc.put_i32(0); // last offset delta
    after_crc.put_i64(txn::BASE_TIMESTAMP); // first timestamp
    after_crc.put_i64(txn::BASE_TIMESTAMP); // max timestamp
    after_crc.put_i64(-1); // producer id
    after_crc.put_i16(-1); // producer epoch
    after_crc.put_i32(-1); // base sequence
    after_crc.put_i32(1); // record count
    after_crc.put_slice(record);
    let mut b = BytesMut::new();
    b.put_i64(0); // base offset
    b.put_i32((4 + 1 + 4 + after_crc.len()) as i32); // batch length
    b.put_i32(-1); // partition leader epoch
    b.put_i8(2); // magic
    b.put_u32(crc32c::crc32c(&after_crc));
    b.put_slice(&after_crc);
    b.freeze()
}

#[test]
fn forged_record_header_count_in_a_produced_batch_does_not_crash_koord() {
    let mut koord = Koord::start(&[]);
    let mut c = koord.connect();
    let topic = new_topic(&mut c, "forged-headers", 1);
    let [_, hi] = ends(&mut c, ApiKey::ListOffsets);
    // koord stores batches without decoding records (Kafka may reject this one); either way
    // the request is answered.
    let p = produce(&mut c, 9, &topic, 0, batch_with_forged_header_count());
    eprintln!("produce of the forged batch: {:?}", err(p.error_code));
    // Finding an offset by timestamp decodes the stored batch's records.
    let by_time = list_offset(&mut c, hi, &topic, 0, txn::BASE_TIMESTAMP);
    eprintln!("ListOffsets by timestamp: {by_time:?}");
    let max = list_offset(&mut c, hi, &topic, 0, -3);
    eprintln!("ListOffsets max timestamp: {max:?}");
    assert!(koord.is_running(), "koord died; log:\n{}", koord.log());
    assert_still_served(&mut c);
    assert_still_served(&mut koord.connect());
}

/// What Apache Kafka 4.4 answers to the batch above (checked with `KOORD_BOOTSTRAP`): the
/// records of an uncompressed batch are decoded on produce, and this one is INVALID_RECORD;
/// nothing is appended.
#[test]
fn produced_batch_whose_records_do_not_decode_is_invalid_record() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let topic = new_topic(&mut c, "undecodable", 1);
    for v in ends(&mut c, ApiKey::Produce) {
        let p = produce(&mut c, v, &topic, 0, batch_with_forged_header_count());
        assert_eq!(
            err(p.error_code),
            Some(ResponseError::InvalidRecord),
            "v{v}: {p:?}"
        );
    }
    assert_eq!(fetch(&mut c, 12, &topic, 0, 0).high_watermark, 0);
}

// ---------------------------------------------------------------------------------------------
// Part 2: the connection layer
// ---------------------------------------------------------------------------------------------

/// Runs `misbehave` on a fresh connection, expects the server to close exactly that one, and
/// checks that a connection opened (and served) before still works and that new ones do too.
fn closes_only_its_own_connection(koord: &mut Koord, misbehave: impl FnOnce(&mut Client)) {
    let mut bystander = healthy(koord);
    let mut culprit = koord.connect();
    misbehave(&mut culprit);
    culprit.expect_closed();
    assert_still_served(&mut bystander);
    assert!(koord.is_running(), "koord exited; log:\n{}", koord.log());
    let mut fresh = koord.connect();
    assert_still_served(&mut fresh);
}

/// A frame whose header is Kafka-shaped (key, version, correlation id, client id) and whose
/// body is `body`.
fn raw_frame(key: i16, version: i16, header_version: i16, body: &[u8]) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_i32(0);
    b.put_i16(key);
    b.put_i16(version);
    b.put_i32(99);
    b.put_i16(4);
    b.put_slice(b"test");
    if header_version >= 2 {
        b.put_u8(0); // no tagged fields
    }
    b.put_slice(body);
    let len = (b.len() - 4) as i32;
    b[..4].copy_from_slice(&len.to_be_bytes());
    b.to_vec()
}

#[test]
fn oversized_frame_closes_only_its_connection() {
    let mut koord = Koord::start(&["socket.request.max.bytes=1024"]);
    // 1 MiB against koord's 1 KiB cap; an external server's cap is unknown, so exceed any.
    let len: i32 = if koord.is_owned() { 1 << 20 } else { i32::MAX };
    closes_only_its_own_connection(&mut koord, |c| {
        c.send_bytes(&len.to_be_bytes()).expect("send the length");
    });
}

#[test]
fn negative_frame_length_closes_only_its_connection() {
    let mut koord = Koord::start(&[]);
    closes_only_its_own_connection(&mut koord, |c| {
        c.send_bytes(&(-5i32).to_be_bytes()).expect("send");
    });
}

#[test]
fn frame_at_the_size_cap_is_served_and_one_byte_over_is_not() {
    let Some(mut koord) = Koord::start_owned(
        "frame_at_the_size_cap_is_served_and_one_byte_over_is_not",
        &["socket.request.max.bytes=1024"],
    ) else {
        return;
    };
    // Metadata v1 whose header carries a client id padded so the frame is exactly `size`.
    let padded = |size: usize| {
        let fixed = 2 + 2 + 4 + 2 + 4; // key, version, correlation id, client id length, body
        let mut b = BytesMut::new();
        b.put_i32(size as i32);
        b.put_i16(ApiKey::Metadata as i16);
        b.put_i16(1);
        b.put_i32(7);
        b.put_i16((size - fixed) as i16);
        b.put_bytes(b'x', size - fixed);
        b.put_i32(-1); // null topic list: all topics
        b.to_vec()
    };
    let mut c = koord.connect();
    c.send_bytes(&padded(1024)).expect("send");
    let mut body = c.read_response(ApiKey::Metadata, 1, 7).expect("served");
    MetadataResponse::decode(&mut body, 1).expect("a Metadata v1 body");
    closes_only_its_own_connection(&mut koord, |c| {
        c.send_bytes(&padded(1025)).expect("send");
    });
}

#[test]
fn zero_length_frame_closes_only_its_connection() {
    let mut koord = Koord::start(&[]);
    closes_only_its_own_connection(&mut koord, |c| {
        c.send_bytes(&0i32.to_be_bytes()).expect("send");
    });
}

#[test]
fn null_client_id_is_served() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    // Metadata v1, header v1 with client id length -1 (null), body: null topic list.
    let mut b = BytesMut::new();
    b.put_i32(2 + 2 + 4 + 2 + 4);
    b.put_i16(ApiKey::Metadata as i16);
    b.put_i16(1);
    b.put_i32(77);
    b.put_i16(-1);
    b.put_i32(-1);
    c.send_bytes(&b).expect("send");
    let mut body = c.read_response(ApiKey::Metadata, 1, 77).expect("served");
    let resp = MetadataResponse::decode(&mut body, 1).expect("a Metadata v1 body");
    assert_eq!(resp.brokers.len(), 1);
}

#[test]
fn truncated_frame_then_half_close_closes_only_its_connection() {
    let mut koord = Koord::start(&[]);
    closes_only_its_own_connection(&mut koord, |c| {
        let mut b = 100i32.to_be_bytes().to_vec();
        b.extend_from_slice(&[0, 3, 0, 1, 0, 0, 0, 1, 0, 0]);
        c.send_bytes(&b).expect("send");
        c.half_close();
    });
}

#[test]
fn unknown_api_key_closes_only_its_connection() {
    let mut koord = Koord::start(&[]);
    closes_only_its_own_connection(&mut koord, |c| {
        c.send_bytes(&raw_frame(32_000, 0, 1, &[])).expect("send");
    });
}

#[test]
fn garbage_body_for_a_known_key_closes_only_its_connection() {
    let mut koord = Koord::start(&[]);
    closes_only_its_own_connection(&mut koord, |c| {
        // Metadata v1: five topics, the first a 31354-byte name, then nothing.
        c.send_bytes(&raw_frame(
            ApiKey::Metadata as i16,
            1,
            1,
            b"\x00\x00\x00\x05zz\xff\x01",
        ))
        .expect("send");
    });
}

#[test]
fn unsupported_version_of_a_non_api_versions_api_closes_only_its_connection() {
    let mut koord = Koord::start(&[]);
    let mut c = koord.connect();
    let [lo, hi] = ends(&mut c, ApiKey::Metadata);
    assert_eq!(lo, 0);
    let above = hi + 1;
    closes_only_its_own_connection(&mut koord, |c| {
        let header_version = ApiKey::Metadata.request_header_version(above);
        c.send_bytes(&raw_frame(
            ApiKey::Metadata as i16,
            above,
            header_version,
            &[1, 0, 0],
        ))
        .expect("send");
    });
    // And below the range: CreateTopics v0/v1 are gone in Kafka 4 and not served by koord.
    let [ct_lo, _] = ends(&mut c, ApiKey::CreateTopics);
    assert!(ct_lo > 0);
    closes_only_its_own_connection(&mut koord, |c| {
        c.send_bytes(&raw_frame(
            ApiKey::CreateTopics as i16,
            ct_lo - 1,
            1,
            &[0, 0, 0, 0, 0, 0, 0, 0],
        ))
        .expect("send");
    });
}

#[test]
fn produce_below_v3_closes_only_its_connection_although_advertised_from_v0() {
    let mut koord = Koord::start(&[]);
    let mut c = koord.connect();
    let advertised = c.api_versions(3);
    let produce = advertised
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::Produce as i16)
        .expect("Produce is advertised");
    // Kafka 4.x advertises Produce from v0 (KAFKA-18659) but serves v3+ only.
    assert_eq!(produce.min_version, 0);
    closes_only_its_own_connection(&mut koord, |c| {
        // Produce v2: acks -1, timeout 5000, no topics.
        c.send_bytes(&raw_frame(
            ApiKey::Produce as i16,
            2,
            1,
            &[0xff, 0xff, 0, 0, 0x13, 0x88, 0, 0, 0, 0],
        ))
        .expect("send");
    });
}

#[test]
fn forged_huge_array_length_closes_the_connection_and_koord_survives() {
    let mut koord = Koord::start(&[]);
    // Metadata v1: topics array count 0x7fffffff, and nothing after it.
    closes_only_its_own_connection(&mut koord, |c| {
        c.send_bytes(&raw_frame(
            ApiKey::Metadata as i16,
            1,
            1,
            &0x7fff_ffffi32.to_be_bytes(),
        ))
        .expect("send");
    });
    // Metadata v12 (flexible): compact array count 0x7fffffff, as unsigned varint N+1.
    closes_only_its_own_connection(&mut koord, |c| {
        c.send_bytes(&raw_frame(
            ApiKey::Metadata as i16,
            12,
            2,
            &[0x80, 0x80, 0x80, 0x80, 0x08],
        ))
        .expect("send");
    });
}

#[test]
fn max_connections_closes_extra_connections_and_recovers() {
    let Some(koord) = Koord::start_owned(
        "max_connections_closes_extra_connections_and_recovers",
        &["max.connections=50"],
    ) else {
        return;
    };
    const LIMIT: usize = 50;
    // koord frees a slot when it reads a closed connection's EOF, a moment after the close (the
    // start-up probe's slot, say), so fill the limit with retries until the deadline.
    let mut served = fill_connections(&koord, LIMIT);

    // Over the limit: the server accepts and closes at once. Each sends a request first, which
    // must not be answered.
    let extra: Vec<Client> = (0..200)
        .map(|_| {
            let mut c = koord.connect();
            c.stream()
                .set_read_timeout(Some(Duration::from_secs(5)))
                .expect("timeout");
            // The server may already have closed it; a failed write is as good as a close.
            let _ = c.send_bytes(&frame(ApiKey::ApiVersions, 3, 1, |b| {
                api_versions_request().encode(b, 3)
            }));
            c
        })
        .collect();
    for mut c in extra {
        c.expect_closed();
    }

    for c in &mut served {
        assert_eq!(err(c.api_versions(3).error_code), None);
    }

    // Once the first ones close, the limit frees up again: LIMIT new connections are served.
    drop(served);
    fill_connections(&koord, LIMIT);
}

/// `n` connections that each completed an ApiVersions round trip. A connection the server
/// closes instead (no free slot yet) is retried until [`DEADLINE`].
fn fill_connections(koord: &Koord, n: usize) -> Vec<Client> {
    let deadline = Instant::now() + DEADLINE;
    let mut served = Vec::new();
    while served.len() < n {
        let mut c = koord.connect();
        match c.try_send(3, &api_versions_request()) {
            Ok(resp) => {
                assert_eq!(err(resp.error_code), None);
                served.push(c);
            }
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "only {} of {n} connections served: {e}",
                    served.len()
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    served
}

#[test]
fn sigterm_with_a_client_connected_exits_zero_and_stops_listening() {
    let Some(mut koord) = Koord::start_owned(
        "sigterm_with_a_client_connected_exits_zero_and_stops_listening",
        &[],
    ) else {
        return;
    };
    let mut c = healthy(&koord);
    let status = koord.terminate();
    assert_eq!(status.code(), Some(0), "exit status {status}");
    c.expect_closed();
    match TcpStream::connect_timeout(&koord.addr(), Duration::from_secs(2)) {
        Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}"),
        Ok(_) => panic!("{} still accepts after shutdown", koord.addr()),
    }
}

#[test]
fn sigterm_during_a_parked_fetch_exits_promptly() {
    let Some(mut koord) = Koord::start_owned("sigterm_during_a_parked_fetch_exits_promptly", &[])
    else {
        return;
    };
    let mut c = koord.connect();
    let topic = new_topic(&mut c, "parked", 1);
    let corr = c.correlation_id();
    let req = fetch_request(12, &topic, 0, 0, 60_000);
    c.send_bytes(&frame(ApiKey::Fetch, 12, corr, |b| req.encode(b, 12)))
        .expect("send a fetch that waits up to 60 s");
    // koord reads the fetch as soon as it arrives, so by the time another connection has been
    // served it is parked. (Had it not been read yet, shutdown would close the connection
    // before reading it, which passes too.)
    assert_still_served(&mut koord.connect());
    let started = Instant::now();
    let status = koord.terminate();
    assert_eq!(status.code(), Some(0), "exit status {status}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown waited {:?} for a fetch parked for 60 s",
        started.elapsed()
    );
}

#[test]
fn sigterm_during_a_parked_join_group_exits_promptly() {
    let Some(mut koord) = Koord::start_owned(
        "sigterm_during_a_parked_join_group_exits_promptly",
        NO_REBALANCE_DELAY,
    ) else {
        return;
    };
    let mut first = koord.connect();
    let group = common::unique("parked-join");
    stable_alone(&mut first, &group);
    // A second member's join starts a rebalance and waits (up to the 30 s rebalance timeout)
    // for the first member to rejoin, which it never does.
    let mut second = koord.connect();
    let required = second.send(9, &join_request(&group, ""));
    assert_eq!(
        err(required.error_code),
        Some(ResponseError::MemberIdRequired)
    );
    let req = join_request(&group, &required.member_id);
    second
        .send_bytes(&frame(ApiKey::JoinGroup, 9, 99, |b| req.encode(b, 9)))
        .expect("send the join that parks");
    assert_still_served(&mut koord.connect());
    let started = Instant::now();
    let status = koord.terminate();
    assert_eq!(status.code(), Some(0), "exit status {status}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown waited {:?} for a parked JoinGroup",
        started.elapsed()
    );
}

#[test]
fn pipelined_requests_are_answered_in_request_order() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let topic = common::unique("pipe");
    create_topic(&mut c, &topic, 1);
    // A mix of APIs and header versions; correlation ids deliberately not ascending.
    let mut sent: Vec<(ApiKey, i16, i32)> = Vec::new();
    let mut bytes = Vec::new();
    for i in 0..40 {
        let corr = 1_000_000 - i * 7919;
        let (key, v) = match i % 6 {
            0 => (ApiKey::ApiVersions, 0),
            1 => (ApiKey::Metadata, 1),
            2 => (ApiKey::Metadata, 12),
            3 => (ApiKey::FindCoordinator, 4),
            4 => (ApiKey::DescribeCluster, 0),
            _ => (ApiKey::ApiVersions, 3),
        };
        let f = match key {
            ApiKey::ApiVersions => frame(key, v, corr, |b| api_versions_request().encode(b, v)),
            ApiKey::Metadata => frame(key, v, corr, |b| named_topics(&[&topic]).encode(b, v)),
            ApiKey::FindCoordinator => frame(key, v, corr, |b| {
                FindCoordinatorRequest::default()
                    .with_coordinator_keys(vec![s(&format!("g{i}"))])
                    .encode(b, v)
            }),
            _ => frame(key, v, corr, |b| {
                DescribeClusterRequest::default().encode(b, v)
            }),
        };
        bytes.extend_from_slice(&f);
        sent.push((key, v, corr));
    }
    c.send_bytes(&bytes).expect("send all at once");
    for (i, (key, v, corr)) in sent.into_iter().enumerate() {
        let mut body = c
            .read_response(key, v, corr)
            .unwrap_or_else(|e| panic!("response {i}: {e}"));
        let resp = ResponseKind::decode(key, &mut body, v)
            .unwrap_or_else(|e| panic!("response {i} ({key:?} v{v}): {e:#}"));
        assert!(body.is_empty(), "response {i}: trailing bytes");
        match (key, resp) {
            (ApiKey::Metadata, ResponseKind::Metadata(m)) => {
                assert!(find_topic(&m, &topic).is_some(), "response {i}")
            }
            (ApiKey::FindCoordinator, ResponseKind::FindCoordinator(f)) => {
                assert_eq!(f.coordinators[0].key.as_str(), format!("g{i}"))
            }
            (ApiKey::ApiVersions, ResponseKind::ApiVersions(a)) => {
                assert_eq!(err(a.error_code), None)
            }
            (ApiKey::DescribeCluster, ResponseKind::DescribeCluster(d)) => {
                assert_eq!(err(d.error_code), None)
            }
            (key, other) => panic!("response {i}: {key:?} answered with {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Topic configuration: CreateTopics with configs, DescribeConfigs, AlterConfigs,
// IncrementalAlterConfigs
// ---------------------------------------------------------------------------------------------

/// `(value, source)` of every config described, by name.
type Described = BTreeMap<String, (Option<String>, i8)>;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// DescribeConfigs config sources.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DEFAULT_CONFIG: i8 = 5;

fn with_configs(mut t: CreatableTopic, configs: &[(&str, &str)]) -> CreatableTopic {
    t.configs = configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(s(k))
                .with_value(Some(s(v)))
        })
        .collect();
    t
}

/// `(value, source)` of every config DescribeConfigs reports for a resource, or its error.
fn describe_configs(
    c: &mut Client,
    version: i16,
    resource_type: i8,
    name: &str,
) -> Result<Described, (Option<ResponseError>, String)> {
    let resp: DescribeConfigsResponse = c.send(
        version,
        &DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(name))]),
    );
    assert_eq!(resp.results.len(), 1, "{resp:?}");
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

fn topic_configs(c: &mut Client, name: &str) -> BTreeMap<String, (Option<String>, i8)> {
    describe_configs(c, 4, RESOURCE_TOPIC, name).expect("topic described")
}

/// The topic's configs once `name` is described as `(value, source)`: Kafka applies a change on
/// its brokers after the controller commits it, so a describe right after an alter may lag.
fn settled(
    c: &mut Client,
    topic: &str,
    name: &str,
    expected: (&str, i8),
) -> BTreeMap<String, (Option<String>, i8)> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let configs = topic_configs(c, topic);
        if config(&configs, name) == expected || Instant::now() > deadline {
            assert_eq!(config(&configs, name), expected, "{topic} {name}");
            return configs;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn config<'a>(configs: &'a BTreeMap<String, (Option<String>, i8)>, name: &str) -> (&'a str, i8) {
    let (v, src) = configs
        .get(name)
        .unwrap_or_else(|| panic!("{name} not described: {configs:?}"));
    (v.as_deref().unwrap_or(""), *src)
}

fn alter_configs(
    c: &mut Client,
    version: i16,
    resource_type: i8,
    name: &str,
    configs: &[(&str, &str)],
    validate_only: bool,
) -> (Option<ResponseError>, String) {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let resp: AlterConfigsResponse = c.send(
        version,
        &AlterConfigsRequest::default()
            .with_validate_only(validate_only)
            .with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(s(name))
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            AlterableConfig::default()
                                .with_name(s(k))
                                .with_value(Some(s(v)))
                        })
                        .collect(),
                )]),
    );
    assert_eq!(resp.responses.len(), 1, "{resp:?}");
    let r = &resp.responses[0];
    (
        err(r.error_code),
        r.error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default(),
    )
}

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

fn incremental_alter(
    c: &mut Client,
    version: i16,
    resource_type: i8,
    name: &str,
    ops: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> (Option<ResponseError>, String) {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    let resp: IncrementalAlterConfigsResponse = c.send(
        version,
        &IncrementalAlterConfigsRequest::default()
            .with_validate_only(validate_only)
            .with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(s(name))
                .with_configs(
                    ops.iter()
                        .map(|(k, op, v)| {
                            AlterableConfig::default()
                                .with_name(s(k))
                                .with_config_operation(*op)
                                .with_value(v.map(s))
                        })
                        .collect(),
                )]),
    );
    assert_eq!(resp.responses.len(), 1, "{resp:?}");
    let r = &resp.responses[0];
    (
        err(r.error_code),
        r.error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default(),
    )
}

fn probe_describe_configs(c: &mut Client, v: i16) {
    let t = new_topic(c, "probe-describe-configs", 1);
    let configs = describe_configs(c, v, RESOURCE_TOPIC, &t.name).expect("described");
    assert_eq!(
        config(&configs, "cleanup.policy"),
        ("delete", DEFAULT_CONFIG),
        "v{v}"
    );
}

fn probe_alter_configs(c: &mut Client, v: i16) {
    let t = new_topic(c, "probe-alter-configs", 1);
    let r = alter_configs(
        c,
        v,
        RESOURCE_TOPIC,
        &t.name,
        &[("retention.ms", "100000000")],
        false,
    );
    assert_eq!(r.0, None, "v{v}: {r:?}");
    settled(
        c,
        &t.name,
        "retention.ms",
        ("100000000", DYNAMIC_TOPIC_CONFIG),
    );
}

fn probe_incremental_alter_configs(c: &mut Client, v: i16) {
    let t = new_topic(c, "probe-incremental-alter", 1);
    let r = incremental_alter(
        c,
        v,
        RESOURCE_TOPIC,
        &t.name,
        &[("retention.ms", SET, Some("100000000"))],
        false,
    );
    assert_eq!(r.0, None, "v{v}: {r:?}");
    settled(
        c,
        &t.name,
        "retention.ms",
        ("100000000", DYNAMIC_TOPIC_CONFIG),
    );
}

#[test]
fn create_topics_with_configs_returns_and_keeps_them() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::CreateTopics) {
        let name = common::unique("configs");
        let t = with_configs(
            creatable(&name, 1, 1),
            &[("retention.ms", "100000000"), ("cleanup.policy", "compact")],
        );
        let resp = create_topics(&mut c, v, vec![t], false);
        let r = result(&resp, &name);
        assert_eq!(err(r.error_code), None, "v{v}: {r:?}");
        if v >= 5 {
            let configs = r.configs.as_ref().expect("v5+ returns the configs");
            let get = |n: &str| {
                configs.iter().find(|c| c.name.as_str() == n).map(|c| {
                    (
                        c.value.as_ref().map(|v| v.to_string()),
                        c.config_source,
                        c.read_only,
                    )
                })
            };
            assert_eq!(
                get("retention.ms"),
                Some((Some("100000000".into()), DYNAMIC_TOPIC_CONFIG, false)),
                "v{v}"
            );
            assert_eq!(
                get("cleanup.policy"),
                Some((Some("compact".into()), DYNAMIC_TOPIC_CONFIG, false)),
                "v{v}"
            );
            assert_eq!(
                get("segment.bytes"),
                Some((Some("1073741824".into()), DEFAULT_CONFIG, false)),
                "v{v}"
            );
            assert_eq!(
                get("max.message.bytes"),
                Some((Some("1048588".into()), DEFAULT_CONFIG, false)),
                "v{v}"
            );
        }
        await_topic(&mut c, &name, 1);
        let configs = topic_configs(&mut c, &name);
        assert_eq!(
            config(&configs, "retention.ms"),
            ("100000000", DYNAMIC_TOPIC_CONFIG)
        );
        assert_eq!(
            config(&configs, "cleanup.policy"),
            ("compact", DYNAMIC_TOPIC_CONFIG)
        );
        assert_eq!(
            config(&configs, "message.timestamp.type"),
            ("CreateTime", DEFAULT_CONFIG)
        );
    }
}

#[test]
fn create_topics_unknown_config_or_bad_value_is_invalid_config() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::CreateTopics) {
        for validate_only in [false, true] {
            for (k, val, message) in [
                ("no.such.config", "1", "Unknown topic config name: no.such.config"),
                ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
                ("retention.ms", "-5", "Invalid value -5 for configuration retention.ms: Value must be at least -1"),
                ("cleanup.policy", "bogus", "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete"),
                ("message.timestamp.type", "Now", "Invalid value Now for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"),
            ] {
                let name = common::unique("badconfig");
                let resp = create_topics(&mut c, v, vec![with_configs(creatable(&name, 1, 1), &[(k, val)])], validate_only);
                let r = result(&resp, &name);
                eprintln!("v{v} {k}={val}: {:?} {:?}", err(r.error_code), r.error_message);
                assert_eq!(err(r.error_code), Some(ResponseError::InvalidConfig), "v{v} {k}={val}: {r:?}");
                assert_eq!(r.error_message.as_ref().map(|m| m.as_str()), Some(message), "v{v}");
                assert_eq!(lookup(&mut c, &name), Some(ResponseError::UnknownTopicOrPartition));
            }
        }
    }
}

#[test]
fn create_topics_validate_only_with_configs_creates_nothing() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let name = common::unique("validate-configs");
    let t = with_configs(creatable(&name, 1, 1), &[("retention.ms", "100000000")]);
    let resp = create_topics(&mut c, 7, vec![t], true);
    let r = result(&resp, &name);
    assert_eq!(err(r.error_code), None, "{r:?}");
    let configs = r.configs.as_ref().expect("configs");
    assert!(configs
        .iter()
        .any(|c| c.name.as_str() == "retention.ms" && c.value.as_deref() == Some("100000000")));
    assert_eq!(
        lookup(&mut c, &name),
        Some(ResponseError::UnknownTopicOrPartition)
    );
}

#[test]
fn describe_configs_at_every_end_and_unknown_topic() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let t = new_topic(&mut c, "describe", 1);
    for v in ends(&mut c, ApiKey::DescribeConfigs) {
        let configs = describe_configs(&mut c, v, RESOURCE_TOPIC, &t.name).expect("described");
        for name in [
            "cleanup.policy",
            "retention.ms",
            "retention.bytes",
            "max.message.bytes",
            "segment.bytes",
            "message.timestamp.type",
            "delete.retention.ms",
            "min.insync.replicas",
            "compression.type",
            "min.cleanable.dirty.ratio",
        ] {
            assert!(
                configs.contains_key(name),
                "v{v}: {name} missing: {configs:?}"
            );
        }
        assert_eq!(
            config(&configs, "delete.retention.ms"),
            ("86400000", DEFAULT_CONFIG)
        );
        let missing =
            describe_configs(&mut c, v, RESOURCE_TOPIC, &common::unique("nope")).unwrap_err();
        eprintln!("v{v} unknown topic: {missing:?}");
        assert_eq!(missing.1, "", "v{v}: Kafka gives the code alone");
        assert_eq!(
            missing.0,
            Some(ResponseError::UnknownTopicOrPartition),
            "v{v}"
        );
    }
}

#[test]
fn describe_configs_synonyms_and_documentation_when_asked() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let t = new_topic(&mut c, "synonyms", 1);
    let r = alter_configs(
        &mut c,
        2,
        RESOURCE_TOPIC,
        &t.name,
        &[("retention.ms", "100000000")],
        false,
    );
    assert_eq!(r.0, None, "{r:?}");
    settled(
        &mut c,
        &t.name,
        "retention.ms",
        ("100000000", DYNAMIC_TOPIC_CONFIG),
    );
    let resp: DescribeConfigsResponse = c.send(
        4,
        &DescribeConfigsRequest::default()
            .with_include_synonyms(true)
            .with_include_documentation(true)
            .with_resources(vec![DescribeConfigsResource::default()
                .with_resource_type(RESOURCE_TOPIC)
                .with_resource_name(s(&t.name))
                .with_configuration_keys(Some(vec![s("retention.ms")]))]),
    );
    let configs = &resp.results[0].configs;
    assert_eq!(configs.len(), 1, "{configs:?}");
    let rc = &configs[0];
    assert_eq!(rc.config_type, 5, "LONG");
    assert!(rc.documentation.as_ref().is_some_and(|d| !d.is_empty()));
    let syn: Vec<(String, i8)> = rc
        .synonyms
        .iter()
        .map(|s| (s.name.to_string(), s.source))
        .collect();
    // Kafka lists the topic's own value, then broker settings only where the broker sets them.
    assert_eq!(syn, [("retention.ms".to_string(), DYNAMIC_TOPIC_CONFIG)]);
}

#[test]
fn describe_configs_broker_this_node_and_another() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let (node, _, _) = this_broker(&mut c);
    let configs =
        describe_configs(&mut c, 4, RESOURCE_BROKER, &node.to_string()).expect("broker described");
    assert!(configs.contains_key("num.partitions"), "{configs:?}");
    assert!(
        configs.contains_key("auto.create.topics.enable"),
        "{configs:?}"
    );
    let other = describe_configs(&mut c, 4, RESOURCE_BROKER, &(node + 1000).to_string());
    eprintln!("another broker id: {other:?}");
    assert_eq!(other.unwrap_err().0, Some(ResponseError::InvalidRequest));
}

#[test]
fn alter_configs_replaces_the_whole_set_validates_and_honours_validate_only() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::AlterConfigs) {
        let t = new_topic(&mut c, "alter", 1);
        let r = alter_configs(
            &mut c,
            v,
            RESOURCE_TOPIC,
            &t.name,
            &[("retention.ms", "100000000"), ("cleanup.policy", "compact")],
            false,
        );
        assert_eq!(r.0, None, "v{v}: {r:?}");
        let r = alter_configs(
            &mut c,
            v,
            RESOURCE_TOPIC,
            &t.name,
            &[("max.message.bytes", "2000000")],
            false,
        );
        assert_eq!(r.0, None, "v{v}: {r:?}");
        let configs = settled(
            &mut c,
            &t.name,
            "max.message.bytes",
            ("2000000", DYNAMIC_TOPIC_CONFIG),
        );
        assert_eq!(
            config(&configs, "retention.ms"),
            ("604800000", DEFAULT_CONFIG),
            "v{v}: AlterConfigs replaces the set"
        );
        assert_eq!(
            config(&configs, "cleanup.policy"),
            ("delete", DEFAULT_CONFIG)
        );
        // validate_only changes nothing.
        let r = alter_configs(
            &mut c,
            v,
            RESOURCE_TOPIC,
            &t.name,
            &[("retention.ms", "5000000")],
            true,
        );
        assert_eq!(r.0, None, "v{v}: {r:?}");
        assert_eq!(topic_configs(&mut c, &t.name), configs, "v{v}");
        // Bad value and unknown name: INVALID_CONFIG, nothing changes.
        for (k, val) in [("retention.ms", "abc"), ("no.such.config", "1")] {
            let r = alter_configs(&mut c, v, RESOURCE_TOPIC, &t.name, &[(k, val)], false);
            eprintln!("AlterConfigs v{v} {k}={val}: {r:?}");
            assert_eq!(r.0, Some(ResponseError::InvalidConfig), "v{v} {k}: {r:?}");
        }
        assert_eq!(topic_configs(&mut c, &t.name), configs, "v{v}");
        let r = alter_configs(
            &mut c,
            v,
            RESOURCE_TOPIC,
            &common::unique("nope"),
            &[("retention.ms", "1000")],
            false,
        );
        eprintln!("AlterConfigs v{v} unknown topic: {r:?}");
        assert_eq!(
            r.0,
            Some(ResponseError::UnknownTopicOrPartition),
            "v{v}: {r:?}"
        );
    }
}

#[test]
fn incremental_alter_configs_set_delete_append_subtract() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    for v in ends(&mut c, ApiKey::IncrementalAlterConfigs) {
        let t = new_topic(&mut c, "incremental", 1);
        let r = incremental_alter(
            &mut c,
            v,
            RESOURCE_TOPIC,
            &t.name,
            &[
                ("retention.ms", SET, Some("100000000")),
                ("max.message.bytes", SET, Some("2000000")),
            ],
            false,
        );
        assert_eq!(r.0, None, "v{v}: {r:?}");
        // Only what is named changes.
        let r = incremental_alter(
            &mut c,
            v,
            RESOURCE_TOPIC,
            &t.name,
            &[("retention.ms", DELETE, None)],
            false,
        );
        assert_eq!(r.0, None, "v{v}: {r:?}");
        // DELETE returns to the default.
        let configs = settled(
            &mut c,
            &t.name,
            "retention.ms",
            ("604800000", DEFAULT_CONFIG),
        );
        assert_eq!(
            config(&configs, "max.message.bytes"),
            ("2000000", DYNAMIC_TOPIC_CONFIG)
        );
        let r = incremental_alter(
            &mut c,
            v,
            RESOURCE_TOPIC,
            &t.name,
            &[("cleanup.policy", APPEND, Some("compact"))],
            false,
        );
        assert_eq!(r.0, None, "v{v}: {r:?}");
        settled(
            &mut c,
            &t.name,
            "cleanup.policy",
            ("delete,compact", DYNAMIC_TOPIC_CONFIG),
        );
        let r = incremental_alter(
            &mut c,
            v,
            RESOURCE_TOPIC,
            &t.name,
            &[("cleanup.policy", SUBTRACT, Some("delete"))],
            false,
        );
        assert_eq!(r.0, None, "v{v}: {r:?}");
        let configs = settled(
            &mut c,
            &t.name,
            "cleanup.policy",
            ("compact", DYNAMIC_TOPIC_CONFIG),
        );
        // validate_only changes nothing.
        let r = incremental_alter(
            &mut c,
            v,
            RESOURCE_TOPIC,
            &t.name,
            &[("cleanup.policy", DELETE, None)],
            true,
        );
        assert_eq!(r.0, None, "v{v}: {r:?}");
        assert_eq!(topic_configs(&mut c, &t.name), configs);
        for (k, op, val) in [
            ("retention.ms", SET, Some("abc")),
            ("no.such.config", SET, Some("1")),
            ("retention.ms", APPEND, Some("1")),
        ] {
            let r = incremental_alter(&mut c, v, RESOURCE_TOPIC, &t.name, &[(k, op, val)], false);
            eprintln!("IncrementalAlterConfigs v{v} {k} op {op} {val:?}: {r:?}");
            assert_eq!(r.0, Some(ResponseError::InvalidConfig), "v{v} {k}: {r:?}");
            if op == APPEND {
                assert_eq!(
                    r.1,
                    "Can't APPEND to key retention.ms because its type is not LIST."
                );
            }
        }
        assert_eq!(topic_configs(&mut c, &t.name), configs);
        let r = incremental_alter(
            &mut c,
            v,
            RESOURCE_TOPIC,
            &common::unique("nope"),
            &[("retention.ms", SET, Some("1000"))],
            false,
        );
        eprintln!("IncrementalAlterConfigs v{v} unknown topic: {r:?}");
        assert_eq!(
            r.0,
            Some(ResponseError::UnknownTopicOrPartition),
            "v{v}: {r:?}"
        );
    }
}

#[test]
fn altering_a_static_broker_config_is_refused() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let (node, _, _) = this_broker(&mut c);
    let r = incremental_alter(
        &mut c,
        1,
        RESOURCE_BROKER,
        &node.to_string(),
        &[("auto.create.topics.enable", SET, Some("false"))],
        false,
    );
    eprintln!("IncrementalAlterConfigs broker auto.create.topics.enable: {r:?}");
    assert_eq!(r.0, Some(ResponseError::InvalidRequest), "{r:?}");
    let r = alter_configs(
        &mut c,
        2,
        RESOURCE_BROKER,
        &node.to_string(),
        &[("auto.create.topics.enable", "false")],
        false,
    );
    eprintln!("AlterConfigs broker auto.create.topics.enable: {r:?}");
    assert_eq!(r.0, Some(ResponseError::InvalidRequest), "{r:?}");
    assert_eq!(
        r.1,
        "Cannot update these configs dynamically: [auto.create.topics.enable]"
    );
}

/// A topic created with `configs`, with its id.
fn configured_topic(c: &mut Client, prefix: &str, configs: &[(&str, &str)]) -> TopicRef {
    let name = common::unique(prefix);
    let resp = create_topics(
        c,
        7,
        vec![with_configs(creatable(&name, 1, 1), configs)],
        false,
    );
    assert_eq!(err(result(&resp, &name).error_code), None, "{resp:?}");
    let id = await_topic(c, &name, 1);
    TopicRef { name, id }
}

#[test]
fn max_message_bytes_refuses_a_larger_batch_with_message_too_large() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let t = configured_topic(&mut c, "maxmsg", &[("max.message.bytes", "200")]);
    let big = "x".repeat(500);
    let p = produce(&mut c, 9, &t, 0, batch(0, &[&big], None));
    assert_eq!(
        err(p.error_code),
        Some(ResponseError::MessageTooLarge),
        "{p:?}"
    );
    let p = produce(&mut c, 9, &t, 0, batch(0, &["small"], None));
    assert_eq!(err(p.error_code), None, "{p:?}");
}

#[test]
fn log_append_time_topic_stamps_batches_with_the_broker_time() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let t = configured_topic(
        &mut c,
        "appendtime",
        &[("message.timestamp.type", "LogAppendTime")],
    );
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let p = produce(&mut c, 9, &t, 0, batch(0, &["a", "b"], None));
    assert_eq!(err(p.error_code), None, "{p:?}");
    assert!(p.log_append_time_ms >= before - 1000, "{p:?}");
    let f = fetch(&mut c, 12, &t, 0, 0);
    let bytes = f.records.clone().expect("records");
    // The batch's max timestamp (bytes 35..43 of a v2 batch) is the broker's time.
    let max_timestamp = i64::from_be_bytes(bytes[35..43].try_into().unwrap());
    assert_eq!(max_timestamp, p.log_append_time_ms);
    let mut bytes = bytes;
    let sets = RecordBatchDecoder::decode_all(&mut bytes).expect("decodes, CRC included");
    for r in sets.iter().flat_map(|s| &s.records) {
        assert_eq!(r.timestamp_type, TimestampType::LogAppend);
    }
}

#[test]
fn retention_ms_drops_batches_older_than_it() {
    let Some(koord) = Koord::start_owned("retention_ms_drops_batches_older_than_it", &[]) else {
        return;
    };
    let mut c = koord.connect();
    // txn::BASE_TIMESTAMP is in 2023: older than an hour.
    let t = configured_topic(&mut c, "retention", &[("retention.ms", "3600000")]);
    let p = produce(&mut c, 9, &t, 0, batch(0, &["old"], None));
    assert_eq!(err(p.error_code), None, "{p:?}");
    let f = fetch(&mut c, 12, &t, 0, 1);
    assert_eq!((f.log_start_offset, f.high_watermark), (1, 1), "{f:?}");
}

#[test]
fn compacted_topic_keeps_the_last_value_of_every_key() {
    let Some(koord) = Koord::start_owned("compacted_topic_keeps_the_last_value_of_every_key", &[])
    else {
        return;
    };
    let mut c = koord.connect();
    let t = configured_topic(
        &mut c,
        "compacted",
        &[("cleanup.policy", "compact"), ("segment.bytes", "1048576")],
    );
    const RECORDS: i64 = 100_000;
    const KEYS: i64 = 1_000;
    const PER_BATCH: i64 = 500;
    let value = |i: i64| format!("{i:0>100}");
    let mut next = 0;
    while next < RECORDS {
        let records: Vec<Record> = (next..next + PER_BATCH)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i - next,
                // The encoder keeps records in one batch while offset - sequence is constant.
                sequence: (i - next) as i32 - 1,
                timestamp: txn::BASE_TIMESTAMP + i,
                key: Some(Bytes::from(format!("key-{}", i % KEYS))),
                value: Some(Bytes::from(value(i))),
                headers: IndexMap::new(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::Lz4,
            },
        )
        .unwrap();
        let p = produce(&mut c, 9, &t, 0, buf.freeze());
        assert_eq!(err(p.error_code), None, "{p:?}");
        next += PER_BATCH;
    }
    let mut last: BTreeMap<String, (i64, String)> = BTreeMap::new();
    let mut count = 0;
    let mut offset = 0;
    let mut previous = -1;
    while offset < RECORDS {
        let f = fetch(&mut c, 12, &t, 0, offset);
        assert_eq!(err(f.error_code), None, "{f:?}");
        let mut bytes = f.records.clone().expect("records");
        let sets = RecordBatchDecoder::decode_all(&mut bytes).expect("compacted batches decode");
        assert!(!sets.is_empty(), "fetch at {offset} returned nothing");
        for r in sets.into_iter().flat_map(|s| s.records) {
            if r.offset < offset {
                continue;
            }
            assert!(r.offset > previous, "offsets increase");
            previous = r.offset;
            count += 1;
            let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
            let value = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
            last.insert(key, (r.offset, value));
            offset = r.offset + 1;
        }
    }
    assert_eq!(last.len(), KEYS as usize);
    for (key, (off, v)) in &last {
        let k: i64 = key.trim_start_matches("key-").parse().unwrap();
        let expected = RECORDS - KEYS + k;
        assert_eq!((*off, v.clone()), (expected, value(expected)), "{key}");
    }
    assert!(count < RECORDS / 4, "{count} records kept of {RECORDS}");
}

/// Every topic config Kafka 4.4 describes for a new topic (as Kafka 4.4 listed them).
const KAFKA_TOPIC_CONFIGS: &[&str] = &[
    "cleanup.policy",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "delete.retention.ms",
    "errors.deadletterqueue.group.enable",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.decompressed.message.bytes",
    "max.message.bytes",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.copy.lag.bytes",
    "remote.copy.lag.ms",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
];

#[test]
fn describe_configs_lists_every_kafka_topic_config() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let t = new_topic(&mut c, "every-config", 1);
    let described = topic_configs(&mut c, &t.name);
    let names: BTreeSet<&str> = described.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = KAFKA_TOPIC_CONFIGS.iter().copied().collect();
    assert_eq!(names, expected);
}

#[test]
fn null_values_unknown_operations_and_duplicate_keys_are_refused_as_kafka_does() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let name = common::unique("nullcfg");
    let mut t = creatable(&name, 1, 1);
    t.configs = vec![CreatableTopicConfig::default()
        .with_name(s("retention.ms"))
        .with_value(None)];
    let resp = create_topics(&mut c, 7, vec![t], false);
    let r = result(&resp, &name);
    assert_eq!(err(r.error_code), Some(ResponseError::InvalidConfig));
    assert_eq!(
        r.error_message.as_deref(),
        Some("Null value not supported for topic configs: retention.ms")
    );
    let t = new_topic(&mut c, "nullalter", 1);
    let r = incremental_alter(
        &mut c,
        1,
        RESOURCE_TOPIC,
        &t.name,
        &[("retention.ms", SET, None)],
        false,
    );
    assert_eq!(
        r,
        (
            Some(ResponseError::InvalidRequest),
            "Null value not supported for : retention.ms".to_string()
        )
    );
    let r = incremental_alter(
        &mut c,
        1,
        RESOURCE_TOPIC,
        &t.name,
        &[("retention.ms", 9, Some("1"))],
        false,
    );
    assert_eq!(r.0, Some(ResponseError::UnknownServerError), "{r:?}");
    let r = incremental_alter(
        &mut c,
        1,
        RESOURCE_TOPIC,
        &t.name,
        &[
            ("retention.ms", SET, Some("1")),
            ("retention.ms", SET, Some("2")),
        ],
        false,
    );
    assert_eq!(
        r,
        (
            Some(ResponseError::InvalidRequest),
            "Error due to duplicate config keys".to_string()
        )
    );
}

#[test]
fn a_compacted_topic_refuses_records_without_a_key() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let t = configured_topic(&mut c, "keyless", &[("cleanup.policy", "compact")]);
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: txn::BASE_TIMESTAMP,
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: IndexMap::new(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [&record],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    let p = produce(&mut c, 9, &t, 0, buf.freeze());
    assert_eq!(
        err(p.error_code),
        Some(ResponseError::InvalidRecord),
        "{p:?}"
    );
    let p = produce(&mut c, 9, &t, 0, batch(0, &["keyed"], None));
    assert_eq!(err(p.error_code), None, "{p:?}");
}

/// A ShareFetch v2 of partition 0 of `topic`: `mode` 0 (batch-optimized) or 1 (record limit)
/// up to `max_records`, with `acks` (first, last, types) on it, `renew` its is_renew_ack (then
/// every limit 0, as Kafka requires).
#[allow(clippy::too_many_arguments)]
fn share_fetch_v2(
    c: &mut Client,
    group: &str,
    member: &str,
    session_epoch: i32,
    topic: &TopicRef,
    mode: i8,
    max_records: i32,
    acks: &[(i64, i64, Vec<i8>)],
    renew: bool,
) -> kafka_protocol::messages::ShareFetchResponse {
    use kafka_protocol::messages::share_fetch_request::{
        AcknowledgementBatch, FetchPartition, FetchTopic,
    };
    use kafka_protocol::messages::ShareFetchRequest;
    let limit = |v: i32| if renew { 0 } else { v };
    let req = ShareFetchRequest::default()
        .with_group_id(Some(group_id(group)))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(session_epoch)
        .with_max_wait_ms(limit(5_000))
        .with_min_bytes(limit(1))
        .with_max_bytes(limit(1 << 20))
        .with_max_records(limit(max_records))
        .with_batch_size(500)
        .with_share_acquire_mode(mode)
        .with_is_renew_ack(renew)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(topic.id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(
                    acks.iter()
                        .map(|(first, last, types)| {
                            AcknowledgementBatch::default()
                                .with_first_offset(*first)
                                .with_last_offset(*last)
                                .with_acknowledge_types(types.clone())
                        })
                        .collect(),
                )])]);
    c.send(2, &req)
}

/// A share-fetched partition: (error, acknowledge error, acquired ranges).
type Fetched = (
    Option<ResponseError>,
    Option<ResponseError>,
    Vec<(i64, i64, i16)>,
);

/// The one partition of a ShareFetch answer: (error, acknowledge error, acquired ranges).
fn fetched(resp: &kafka_protocol::messages::ShareFetchResponse) -> Fetched {
    assert_eq!(
        (err(resp.error_code), resp.error_message.as_deref()),
        (None, None),
        "{resp:?}"
    );
    let p = resp
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .next()
        .unwrap_or_else(|| panic!("no partition in {resp:?}"));
    (
        err(p.error_code),
        err(p.acknowledge_error_code),
        acquired(&Some(p.clone())),
    )
}

/// ShareFetch v2's record-limit acquire mode: a fetch takes at most max_records records,
/// splitting the batch; the next fetch (another member) takes the next ones; batch-optimized
/// takes what is left of the batch whatever the limit.
#[test]
fn share_fetch_v2_record_limit_splits_a_batch() {
    let koord = Koord::start(NO_REBALANCE_DELAY);
    let mut c = koord.connect();
    let topic = new_topic(&mut c, "sf2-limit", 1);
    let group = common::unique("sf2-limit");
    let (a, _) = share_member(&mut c, 1, &group, &topic, 1);
    let (b, _) = share_member(&mut c, 1, &group, &topic, 1);
    // a's session starts the group at the (empty) log's end.
    let opened = share_fetch(&mut c, 1, &group, &a, 0, &topic, 500);
    assert_eq!(acquired(&opened), vec![]);
    let written = produce(
        &mut c,
        9,
        &topic,
        0,
        batch(0, &["a", "b", "c", "d", "e"], None),
    );
    assert_eq!(err(written.error_code), None, "{written:?}");
    let r = share_fetch_v2(&mut c, &group, &a, 1, &topic, 1, 2, &[], false);
    assert_eq!(fetched(&r), (None, None, vec![(0, 1, 1)]));
    let r = share_fetch_v2(&mut c, &group, &b, 0, &topic, 1, 2, &[], false);
    assert_eq!(fetched(&r), (None, None, vec![(2, 3, 1)]));
    let r = share_fetch_v2(&mut c, &group, &a, 2, &topic, 0, 1, &[], false);
    assert_eq!(fetched(&r), (None, None, vec![(4, 4, 1)]));
}

/// RENEW acknowledgements (type 4, KIP-1222): INVALID_REQUEST for the partition at v1 and at
/// v2 without is_renew_ack; at v2 with it, in ShareAcknowledge (whose answer carries the lock
/// duration) and in a ShareFetch that fetches nothing (its limits must be 0, else a top-level
/// INVALID_REQUEST); the renewed records stay the member's, which accepts them.
#[test]
fn renew_acknowledgements_need_v2_and_is_renew_ack() {
    use kafka_protocol::messages::share_acknowledge_request::{
        AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch,
    };
    use kafka_protocol::messages::{ShareAcknowledgeRequest, ShareAcknowledgeResponse};
    let koord = Koord::start(NO_REBALANCE_DELAY);
    let mut c = koord.connect();
    let (group, member, topic) = share_records_acquired(&mut c, 1, "renew");
    let ack = |c: &mut Client, v: i16, epoch: i32, kind: i8, renew: bool| {
        let resp: ShareAcknowledgeResponse = c.send(
            v,
            &ShareAcknowledgeRequest::default()
                .with_group_id(Some(group_id(&group)))
                .with_member_id(Some(s(&member)))
                .with_share_session_epoch(epoch)
                .with_is_renew_ack(renew)
                .with_topics(vec![AcknowledgeTopic::default()
                    .with_topic_id(topic.id)
                    .with_partitions(vec![AcknowledgePartition::default()
                        .with_partition_index(0)
                        .with_acknowledgement_batches(vec![
                            AcknowledgementBatch::default()
                                .with_first_offset(0)
                                .with_last_offset(2)
                                .with_acknowledge_types(vec![kind]),
                        ])])]),
        );
        assert_eq!(err(resp.error_code), None, "v{v}: {resp:?}");
        let code = err(resp.responses[0].partitions[0].error_code);
        (code, resp.acquisition_lock_timeout_ms)
    };
    let invalid = Some(ResponseError::InvalidRequest);
    assert_eq!(ack(&mut c, 1, 1, 4, false).0, invalid);
    assert_eq!(ack(&mut c, 2, 2, 4, false).0, invalid);
    assert_eq!(ack(&mut c, 2, 3, 4, true), (None, 30_000));
    // A renewing ShareFetch with limits is refused before its session moves on.
    let refused: kafka_protocol::messages::ShareFetchResponse = c.send(
        2,
        &kafka_protocol::messages::ShareFetchRequest::default()
            .with_group_id(Some(group_id(&group)))
            .with_member_id(Some(s(&member)))
            .with_share_session_epoch(4)
            .with_max_bytes(1)
            .with_max_wait_ms(100)
            .with_is_renew_ack(true),
    );
    assert_eq!(
        (
            err(refused.error_code),
            refused.error_message.as_deref().map(str::to_string)
        ),
        (invalid, None),
        "{refused:?}"
    );
    let renewed = share_fetch_v2(
        &mut c,
        &group,
        &member,
        4,
        &topic,
        0,
        0,
        &[(0, 2, vec![4])],
        true,
    );
    assert_eq!(fetched(&renewed), (None, None, vec![]));
    // Still the member's: it accepts them, and nothing is left to acquire.
    assert_eq!(ack(&mut c, 2, 5, 1, false), (None, 30_000));
    let after = share_fetch(&mut c, 1, &group, &member, 6, &topic, 100);
    assert_eq!(acquired(&after), vec![], "{after:?}");
}

/// ApiVersions v5 (KIP-1242): a client that names the cluster id and node id it meant to reach
/// is answered as usual when they are this node's, and REBOOTSTRAP_REQUIRED (no API list) when
/// either is not; naming neither is not checked, naming one alone is INVALID_REQUEST.
#[test]
fn api_versions_v5_checks_the_cluster_and_node_a_client_names() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let meta = c.send(
        12,
        &kafka_protocol::messages::MetadataRequest::default().with_topics(Some(vec![])),
    );
    let cluster = meta.cluster_id.clone().expect("a cluster id");
    let [node] = meta.brokers.iter().map(|b| b.node_id.0).collect::<Vec<_>>()[..] else {
        panic!("one broker: {:?}", meta.brokers);
    };
    let ask = |c: &mut Client, cluster: Option<StrBytes>, node: i32| {
        c.send(
            5,
            &common::api_versions_request()
                .with_cluster_id(cluster)
                .with_node_id(node),
        )
    };
    let ok = ask(&mut c, Some(cluster.clone()), node);
    assert_eq!(err(ok.error_code), None);
    assert!(!ok.api_keys.is_empty());
    assert_eq!(err(ask(&mut c, None, -1).error_code), None);
    for (cluster, node) in [(None, node), (Some(cluster.clone()), -1)] {
        let r = ask(&mut c, cluster, node);
        assert_eq!(
            err(r.error_code),
            Some(ResponseError::InvalidRequest),
            "both or neither"
        );
        assert!(r.api_keys.is_empty(), "{r:?}");
    }
    for (cluster, node) in [
        (Some(StrBytes::from_static_str("another-cluster")), node),
        (Some(cluster.clone()), node + 1),
    ] {
        let r = ask(&mut c, cluster, node);
        assert_eq!(err(r.error_code), Some(ResponseError::RebootstrapRequired));
        assert!(r.api_keys.is_empty(), "{r:?}");
    }
}

/// One topic of a DescribeTopicPartitions answer: (error, name, partition indexes).
type DescribedPartitions = (Option<ResponseError>, String, Vec<i32>);

/// DescribeTopicPartitions of named topics, `limit` partitions a page, from `cursor`: each
/// answered topic, and the next cursor.
fn describe_partitions(
    c: &mut Client,
    v: i16,
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> (Vec<DescribedPartitions>, Option<(String, i32)>) {
    use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
    use kafka_protocol::messages::DescribeTopicPartitionsRequest;
    let req = DescribeTopicPartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|t| TopicRequest::default().with_name(topic_name(t)))
                .collect(),
        )
        .with_response_partition_limit(limit)
        .with_cursor(cursor.map(|(t, p)| {
            Cursor::default()
                .with_topic_name(topic_name(t))
                .with_partition_index(p)
        }));
    let r = c.send(v, &req);
    let topics = r
        .topics
        .iter()
        .map(|t| {
            (
                err(t.error_code),
                t.name.as_ref().map(|n| n.to_string()).unwrap_or_default(),
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    let next = r
        .next_cursor
        .map(|c| (c.topic_name.to_string(), c.partition_index));
    (topics, next)
}

/// DescribeTopicPartitions (as Kafka 4.x's `kafka-topics --describe` pages through topics):
/// two topics of 3 and 1 partitions two partitions at a time, an unknown and an illegal name,
/// and a cursor naming a topic not asked for.
fn probe_describe_topic_partitions(c: &mut Client, v: i16) {
    let a = new_topic(c, "probe-dtp-a", 3).name;
    let b = new_topic(c, "probe-dtp-b", 1).name;
    let (first, second) = if a < b { (&a, &b) } else { (&b, &a) };
    let parts = |name: &str| if name == a { 3 } else { 1 };
    // Kafka learns a new topic's partitions from its controller a moment after CreateTopics.
    let deadline = std::time::Instant::now() + DEADLINE;
    let page = loop {
        let page = describe_partitions(c, v, &[&b, &a, &a], 2, None);
        if page.0.iter().all(|t| t.0.is_none()) || std::time::Instant::now() > deadline {
            break page;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut seen: Vec<(String, i32)> = Vec::new();
    let mut page = page;
    loop {
        for (e, name, partitions) in &page.0 {
            assert_eq!(*e, None, "v{v}: {page:?}");
            seen.extend(partitions.iter().map(|p| (name.clone(), *p)));
        }
        let Some((topic, partition)) = page.1.clone() else {
            break;
        };
        assert!(seen.len() < 10, "v{v}: pages do not end: {page:?}");
        page = describe_partitions(c, v, &[&b, &a], 2, Some((&topic, partition)));
    }
    let expected: Vec<(String, i32)> = [first, second]
        .iter()
        .flat_map(|n| (0..parts(n)).map(move |p| (n.to_string(), p)))
        .collect();
    assert_eq!(seen, expected, "v{v}: every partition once, in name order");
    let unknown = common::unique("probe-dtp-none");
    let (topics, next) = describe_partitions(c, v, &[&unknown, "bad name!"], 10, None);
    assert_eq!(next, None);
    assert_eq!(
        topics,
        vec![
            (
                Some(ResponseError::InvalidTopicException),
                "bad name!".to_string(),
                vec![]
            ),
            (
                Some(ResponseError::UnknownTopicOrPartition),
                unknown.clone(),
                vec![]
            ),
        ]
    );
    let (topics, _) = describe_partitions(c, v, &[&a], 10, Some((&b, 0)));
    assert_eq!(
        topics,
        vec![(Some(ResponseError::InvalidRequest), a.clone(), vec![])],
        "v{v}: a cursor on a topic not asked for"
    );
}

/// Each partition of an OffsetCommit v10 answer by topic id: its error (Kafka's answer groups
/// partitions by topic in its own order, so the comparison is by id and index).
fn commit_answers_by_id(
    resp: &kafka_protocol::messages::OffsetCommitResponse,
) -> BTreeMap<(Uuid, i32), Option<ResponseError>> {
    resp.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| ((t.topic_id, p.partition_index), err(p.error_code)))
        })
        .collect()
}

/// OffsetCommit v10 and OffsetFetch v10 name topics by id (KIP-848): an id no topic has is
/// UNKNOWN_TOPIC_ID on each of its partitions, answers carry the ids asked for, "every offset"
/// answers by id, and a topic deleted and created again under its name is another topic whose
/// offsets start empty. TxnOffsetCommit v6 (KIP-1319) names topics by id too and says
/// GROUP_ID_NOT_FOUND where v5 says ILLEGAL_GENERATION.
#[test]
fn offsets_by_topic_id() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let topic = new_topic(&mut c, "byid-offsets", 1);
    let group = common::unique("byid-offsets");
    let unknown = Uuid::new_v4();
    let partition = |p: i32| {
        OffsetCommitRequestPartition::default()
            .with_partition_index(p)
            .with_committed_offset(42)
    };
    let by_id = |id: Uuid, ps: Vec<OffsetCommitRequestPartition>| {
        OffsetCommitRequestTopic::default()
            .with_topic_id(id)
            .with_partitions(ps)
    };
    let resp: kafka_protocol::messages::OffsetCommitResponse = c.send(
        10,
        &OffsetCommitRequest::default()
            .with_group_id(group_id(&group))
            .with_topics(vec![
                by_id(topic.id, vec![partition(0), partition(5)]),
                by_id(unknown, vec![partition(0)]),
                by_id(Uuid::nil(), vec![partition(1)]),
            ]),
    );
    let expected: BTreeMap<_, _> = [
        ((topic.id, 0), None),
        ((topic.id, 5), Some(ResponseError::UnknownTopicOrPartition)),
        ((unknown, 0), Some(ResponseError::UnknownTopicId)),
        ((Uuid::nil(), 1), Some(ResponseError::UnknownTopicId)),
    ]
    .into();
    assert_eq!(commit_answers_by_id(&resp), expected, "{resp:?}");
    assert_eq!(committed(&mut c, 9, &group, &topic.name), 42);

    let fetch_topic = |id: Uuid| {
        OffsetFetchRequestTopics::default()
            .with_topic_id(id)
            .with_partition_indexes(vec![0])
    };
    let fetch = |c: &mut Client, topics: Option<Vec<OffsetFetchRequestTopics>>| {
        let resp: kafka_protocol::messages::OffsetFetchResponse = c.send(
            10,
            &OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(group_id(&group))
                .with_topics(topics)]),
        );
        assert_eq!(resp.groups.len(), 1, "{resp:?}");
        assert_eq!(err(resp.groups[0].error_code), None, "{resp:?}");
        resp.groups[0]
            .topics
            .iter()
            .map(|t| {
                assert_eq!(t.partitions.len(), 1, "{resp:?}");
                let p = &t.partitions[0];
                (t.topic_id, p.committed_offset, err(p.error_code))
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        fetch(
            &mut c,
            Some(vec![fetch_topic(topic.id), fetch_topic(unknown)])
        ),
        [
            (topic.id, 42, None),
            (unknown, -1, Some(ResponseError::UnknownTopicId))
        ]
    );
    assert_eq!(fetch(&mut c, None), [(topic.id, 42, None)]);

    // TxnOffsetCommit v6: by id; a group that does not exist, claimed with a generation.
    let (txn_topic, txn_id, producer) = txn_producer(&mut c, "byid-txn");
    let txn_group = common::unique("byid-txn-group");
    let v6 = |c: &mut Client, group: &str, committer, id: Uuid| {
        let mut req =
            txn::txn_offset_commit_request(&txn_id, producer, group, committer, ("", 0), 5);
        req.topics[0].topic_id = id;
        let resp: kafka_protocol::messages::TxnOffsetCommitResponse = c.send(6, &req);
        assert_eq!(resp.topics[0].topic_id, id, "{resp:?}");
        err(resp.topics[0].partitions[0].error_code)
    };
    assert_eq!(
        v6(&mut c, &txn_group, ("", -1), unknown),
        Some(ResponseError::UnknownTopicId)
    );
    let txn_topic_id = common::topic_id(&mut c, &txn_topic);
    assert_eq!(
        v6(&mut c, &common::unique("byid-none"), ("m", 1), txn_topic_id),
        Some(ResponseError::GroupIdNotFound)
    );
    assert_eq!(
        txn::txn_offset_commit(
            &mut c,
            5,
            &txn_id,
            producer,
            &common::unique("byid-none"),
            ("m", 1),
            &txn_topic,
            0,
            5
        ),
        Some(ResponseError::IllegalGeneration)
    );
    assert_eq!(v6(&mut c, &txn_group, ("", -1), txn_topic_id), None);
    assert_eq!(txn::end_txn(&mut c, 3, &txn_id, producer, false), None);

    // Deleted and created again: another id, no offsets.
    let deleted = delete_topics(&mut c, 5, &[&topic.name], vec![]);
    assert_eq!(err(deleted[0].error_code), None, "{deleted:?}");
    await_deleted(&mut c, &topic.name);
    let again = create_topic(&mut c, &topic.name, 1);
    assert_ne!(again, topic.id);
    assert_eq!(
        fetch(&mut c, Some(vec![fetch_topic(again)])),
        [(again, -1, None)]
    );
}
