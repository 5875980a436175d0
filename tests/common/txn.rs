//! Transactional requests for the wire tests (tests/transactions.rs, and tests/wire.rs's probes),
//! each retried while the server answers with an error Kafka's own clients retry (a coordinator
//! still loading, a transaction still completing), within [`DEADLINE`].

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, CreateTopicsRequest, EndTxnRequest,
    FindCoordinatorRequest, InitProducerIdRequest, MetadataRequest, OffsetFetchRequest,
    TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kafka_protocol::ResponseError;

use super::{err, group_id, s, topic_name, Client, DEADLINE};

/// Errors a client retries: the coordinator is loading or moving, or a transaction of the id
/// is still being completed.
pub fn retriable(e: Option<ResponseError>) -> bool {
    matches!(
        e,
        Some(
            ResponseError::CoordinatorLoadInProgress
                | ResponseError::CoordinatorNotAvailable
                | ResponseError::NotCoordinator
                | ResponseError::ConcurrentTransactions
        )
    )
}

/// Runs `send` until its error is not [`retriable`] (or the deadline passes), returning the
/// last answer's error and the answer.
pub fn retry<T>(
    mut send: impl FnMut() -> (Option<ResponseError>, T),
) -> (Option<ResponseError>, T) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (e, r) = send();
        if !retriable(e) || Instant::now() >= deadline {
            return (e, r);
        }
        // The retry backoff of Kafka's clients (retry.backoff.ms' floor).
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(s(id))
}

/// Creates a topic (name given) with `partitions`, and waits until Metadata names a leader for
/// each of them: Kafka's brokers learn a new topic from the controller a moment after
/// CreateTopics returns, and until then its transaction coordinator answers
/// AddPartitionsToTxn with UNKNOWN_TOPIC_OR_PARTITION (koord knows it at once).
pub fn create_topic(c: &mut Client, name: &str, partitions: i32) {
    let resp = c.send(
        5,
        &CreateTopicsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(topic_name(name))
                .with_num_partitions(partitions)
                .with_replication_factor(1)]),
    );
    assert_eq!(err(resp.topics[0].error_code), None, "{resp:?}");
    let deadline = Instant::now() + DEADLINE;
    loop {
        let meta = c.send(
            12,
            &MetadataRequest::default()
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(topic_name(name)))
                ]))
                .with_allow_auto_topic_creation(false),
        );
        let led = meta.topics.iter().any(|t| {
            t.error_code == 0
                && t.partitions.len() == partitions as usize
                && t.partitions
                    .iter()
                    .all(|p| p.error_code == 0 && p.leader_id.0 >= 0)
        });
        if led {
            return;
        }
        assert!(Instant::now() < deadline, "{name} has no leader: {meta:?}");
        // The retry backoff of Kafka's clients (retry.backoff.ms' floor).
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// FindCoordinator for a transactional id (v3): the node id, once the coordinator is there.
pub fn find_txn_coordinator(c: &mut Client, id: &str) -> i32 {
    let (e, node) = retry(|| {
        let r = c.send(
            3,
            &FindCoordinatorRequest::default()
                .with_key(s(id))
                .with_key_type(1),
        );
        (err(r.error_code), r.node_id.0)
    });
    assert_eq!(e, None, "FindCoordinator(transaction) for {id}");
    node
}

/// InitProducerId at `version` for a transactional id, retried: its error, producer id, epoch.
pub fn init_txn_at(
    c: &mut Client,
    version: i16,
    id: &str,
    timeout_ms: i32,
    expected: Option<(i64, i16)>,
) -> (Option<ResponseError>, i64, i16) {
    let (pid, epoch) = expected.unwrap_or((-1, -1));
    let (e, (p, ep)) = retry(|| {
        let r = c.send(version, &init_txn_request(id, timeout_ms, (pid, epoch)));
        (err(r.error_code), (r.producer_id.0, r.producer_epoch))
    });
    (e, p, ep)
}

/// InitProducerId for a transactional id; `producer` (-1, -1) for none (KIP-360).
pub fn init_txn_request(id: &str, timeout_ms: i32, producer: (i64, i16)) -> InitProducerIdRequest {
    InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(id)))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(producer.0.into())
        .with_producer_epoch(producer.1)
}

/// InitProducerId (v4) that must succeed: (producer id, epoch).
pub fn init_txn(c: &mut Client, id: &str, timeout_ms: i32) -> (i64, i16) {
    find_txn_coordinator(c, id);
    let (e, pid, epoch) = init_txn_at(c, 4, id, timeout_ms, None);
    assert_eq!(e, None, "InitProducerId({id})");
    (pid, epoch)
}

/// AddPartitionsToTxn at `version` (v0-3): every partition's error, in request order.
pub fn add_partitions(
    c: &mut Client,
    version: i16,
    id: &str,
    producer: (i64, i16),
    topic: &str,
    partitions: &[i32],
) -> Vec<Option<ResponseError>> {
    let (_, codes) = retry(|| {
        let r = c.send(
            version,
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(txn_id(id))
                .with_v3_and_below_producer_id(producer.0.into())
                .with_v3_and_below_producer_epoch(producer.1)
                .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(topic_name(topic))
                    .with_partitions(partitions.to_vec())]),
        );
        let codes: Vec<Option<ResponseError>> = r
            .results_by_topic_v3_and_below
            .iter()
            .flat_map(|t| &t.results_by_partition)
            .map(|p| err(p.partition_error_code))
            .collect();
        (codes.first().copied().flatten(), codes)
    });
    codes
}

/// AddOffsetsToTxn at `version`: its error.
pub fn add_offsets(
    c: &mut Client,
    version: i16,
    id: &str,
    producer: (i64, i16),
    group: &str,
) -> Option<ResponseError> {
    retry(|| {
        let r = c.send(version, &add_offsets_request(id, producer, group));
        (err(r.error_code), ())
    })
    .0
}

pub fn add_offsets_request(id: &str, producer: (i64, i16), group: &str) -> AddOffsetsToTxnRequest {
    AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(producer.0.into())
        .with_producer_epoch(producer.1)
        .with_group_id(group_id(group))
}

/// AddPartitionsToTxn at `version` (v4+, the broker's batch) of one transaction, added or only
/// verified: the top-level error and every partition's, in request order.
pub fn add_partitions_batch(
    c: &mut Client,
    version: i16,
    id: &str,
    producer: (i64, i16),
    topic: &str,
    partitions: &[i32],
    verify_only: bool,
) -> (Option<ResponseError>, Vec<Option<ResponseError>>) {
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTransaction;
    let r = c.send(
        version,
        &AddPartitionsToTxnRequest::default().with_transactions(vec![
            AddPartitionsToTxnTransaction::default()
                .with_transactional_id(txn_id(id))
                .with_producer_id(producer.0.into())
                .with_producer_epoch(producer.1)
                .with_verify_only(verify_only)
                .with_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(topic_name(topic))
                    .with_partitions(partitions.to_vec())]),
        ]),
    );
    let codes = r
        .results_by_transaction
        .iter()
        .flat_map(|t| &t.topic_results)
        .flat_map(|t| &t.results_by_partition)
        .map(|p| err(p.partition_error_code))
        .collect();
    (err(r.error_code), codes)
}

/// EndTxn at `version`: its error.
pub fn end_txn(
    c: &mut Client,
    version: i16,
    id: &str,
    producer: (i64, i16),
    commit: bool,
) -> Option<ResponseError> {
    retry(|| {
        let r = c.send(version, &end_txn_request(id, producer, commit));
        (err(r.error_code), ())
    })
    .0
}

pub fn end_txn_request(id: &str, producer: (i64, i16), commit: bool) -> EndTxnRequest {
    EndTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(producer.0.into())
        .with_producer_epoch(producer.1)
        .with_committed(commit)
}

/// A transactional batch of `values` from `producer` (id, epoch) starting at sequence `seq`.
pub fn txn_batch(producer: (i64, i16), seq: i32, values: &[&str]) -> Bytes {
    record_batch(0, values, Some((producer.0, producer.1, seq)), true)
}

/// The create time of the first record every test batch carries; record `i` is 10 ms later.
pub const BASE_TIMESTAMP: i64 = 1_700_000_000_000;

/// One v2 record batch holding `values`, at offsets `first..` and timestamps
/// `BASE_TIMESTAMP + 10 * offset`, keys `k{offset}`. `producer` is `(id, epoch, base sequence)`
/// for an idempotent or transactional producer; `None` for a plain one.
pub fn record_batch(
    first: i64,
    values: &[&str],
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
) -> Bytes {
    let (producer_id, producer_epoch, base_sequence) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: first + i as i64,
            // The encoder keeps records in one batch while offset - sequence is constant.
            sequence: base_sequence.wrapping_add(i as i32),
            timestamp: BASE_TIMESTAMP + 10 * (first + i as i64),
            key: Some(Bytes::from(format!("k{}", first + i as i64))),
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("encode a record batch");
    buf.freeze()
}

/// Who commits in a TxnOffsetCommit: member id and generation (`("", -1)`: outside group
/// management).
pub type Committer<'a> = (&'a str, i32);

/// TxnOffsetCommit at `version` of `offset` for `topic`-`partition` into `group`: the
/// partition's error.
#[allow(clippy::too_many_arguments)]
pub fn txn_offset_commit(
    c: &mut Client,
    version: i16,
    id: &str,
    producer: (i64, i16),
    group: &str,
    committer: Committer<'_>,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Option<ResponseError> {
    let mut req =
        txn_offset_commit_request(id, producer, group, committer, (topic, partition), offset);
    if version >= 6 {
        // v6 names the topic by id (KIP-1319).
        req.topics[0].topic_id = super::topic_id(c, topic);
    }
    retry(|| {
        let r = c.send(version, &req);
        (err(r.topics[0].partitions[0].error_code), ())
    })
    .0
}

/// TxnOffsetCommit of `offset` for one partition.
pub fn txn_offset_commit_request(
    id: &str,
    producer: (i64, i16),
    group: &str,
    committer: Committer<'_>,
    (topic, partition): (&str, i32),
    offset: i64,
) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest::default()
        .with_transactional_id(txn_id(id))
        .with_group_id(group_id(group))
        .with_producer_id(producer.0.into())
        .with_producer_epoch(producer.1)
        .with_member_id(s(committer.0))
        .with_generation_id_or_member_epoch(committer.1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(s("")))])])
}

/// OffsetFetch v7 of one partition of `group`: the partition's error and committed offset.
pub fn committed_offset(
    c: &mut Client,
    group: &str,
    topic: &str,
    partition: i32,
    require_stable: bool,
) -> (Option<ResponseError>, i64) {
    let r = c.send(
        7,
        &OffsetFetchRequest::default()
            .with_group_id(group_id(group))
            .with_require_stable(require_stable)
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(topic_name(topic))
                .with_partition_indexes(vec![partition])])),
    );
    assert_eq!(err(r.error_code), None, "{r:?}");
    let p = &r.topics[0].partitions[0];
    (err(p.error_code), p.committed_offset)
}
