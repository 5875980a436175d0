//! Transactions on the wire, each test also run against Apache Kafka 4.4 (KOORD_BOOTSTRAP, the
//! conformance tier): the happy path with its commit marker, an abort listed to read_committed
//! consumers, fencing by a newer epoch, a transaction that times out, and (koord only) the
//! transactional id's state across `kill -9`. Kafka's observed answers are in
//! docs/transactions-conformance.md.
//!
//! Timed-out transactions: koord is started with the abort check every second, as
//! scripts/kafka.sh configures Kafka.

mod common;

use bytes::Bytes;
use common::txn::{
    add_offsets, add_offsets_request, add_partitions, committed_offset, create_topic, end_txn,
    end_txn_request, find_txn_coordinator, init_txn, init_txn_at, retry, txn_batch,
    txn_offset_commit, txn_offset_commit_request,
};
use common::{err, group_id, s, topic_name, unique, Client, Koord};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{FetchRequest, ListOffsetsRequest, ProduceRequest, TransactionalId};
use kafka_protocol::messages::{JoinGroupRequest, OffsetCommitRequest, SyncGroupRequest};
use kafka_protocol::records::RecordBatchDecoder;
use kafka_protocol::ResponseError;

const SETS: &[&str] = &["transaction.abort.timed.out.transaction.cleanup.interval.ms=1000"];

const READ_UNCOMMITTED: i8 = 0;
const READ_COMMITTED: i8 = 1;

/// Produce of `records` to one partition at `version`, naming the transactional id; retried
/// while the partition has no leader yet (Kafka, right after CreateTopics).
fn produce(
    c: &mut Client,
    version: i16,
    id: &str,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> PartitionProduceResponse {
    let deadline = std::time::Instant::now() + common::DEADLINE;
    loop {
        let r = produce_once(c, version, id, topic, partition, records.clone());
        if err(r.error_code) != Some(ResponseError::NotLeaderOrFollower)
            || std::time::Instant::now() >= deadline
        {
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn produce_once(
    c: &mut Client,
    version: i16,
    id: &str,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> PartitionProduceResponse {
    let resp = c.send(
        version,
        &ProduceRequest::default()
            .with_transactional_id(Some(TransactionalId(s(id))))
            .with_acks(-1)
            .with_timeout_ms(5_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name(topic))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(records))])]),
    );
    resp.responses[0].partition_responses[0].clone()
}

/// Fetch v11 of one partition from `offset`, waiting up to `max_wait_ms` for one byte.
fn fetch(
    c: &mut Client,
    topic: &str,
    offset: i64,
    isolation: i8,
    max_wait_ms: i32,
) -> PartitionData {
    let resp = c.send(
        11,
        &FetchRequest::default()
            .with_replica_id((-1).into())
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_isolation_level(isolation)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])]),
    );
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    let p = resp.responses[0].partitions[0].clone();
    assert_eq!(err(p.error_code), None, "{p:?}");
    p
}

/// The records a fetch returned: `(offset, value)` of data records, `(offset, "COMMIT"/"ABORT")`
/// of markers.
fn records(p: &PartitionData) -> Vec<(i64, String)> {
    let mut buf = p.records.clone().unwrap_or_default();
    let mut out = Vec::new();
    while !buf.is_empty() {
        let set = RecordBatchDecoder::decode(&mut buf).expect("decodable batches");
        for r in set.records {
            let text = if r.control {
                let key = r.key.clone().unwrap_or_default();
                let kind = i16::from_be_bytes([key[2], key[3]]);
                if kind == 1 { "COMMIT" } else { "ABORT" }.to_string()
            } else {
                String::from_utf8_lossy(&r.value.clone().unwrap_or_default()).into_owned()
            };
            out.push((r.offset, text));
        }
    }
    out
}

/// A fetched record: its offset and value (or COMMIT/ABORT for a marker).
type Fetched = (i64, String);

/// Everything a consumer at `isolation` reads from offset 0 up to the last stable offset
/// (read_committed) or the high watermark: the records, and the aborted transactions listed
/// on the way as `(producer id, first offset)`. Kafka may answer a fetch with fewer batches
/// than are readable (it stops at a file position), so this fetches until the end.
fn read_all(c: &mut Client, topic: &str, isolation: i8) -> (Vec<Fetched>, Vec<(i64, i64)>) {
    let (mut out, mut aborted) = (Vec::new(), Vec::new());
    let mut offset = 0;
    loop {
        let p = fetch(c, topic, offset, isolation, 0);
        let end = if isolation == READ_COMMITTED {
            p.last_stable_offset
        } else {
            p.high_watermark
        };
        for a in p.aborted_transactions.iter().flatten() {
            if !aborted.contains(&(a.producer_id.0, a.first_offset)) {
                aborted.push((a.producer_id.0, a.first_offset));
            }
        }
        let got = records(&p);
        match got.last() {
            Some(&(last, _)) => offset = last + 1,
            None => return (out, aborted),
        }
        out.extend(got);
        if offset >= end {
            return (out, aborted);
        }
    }
}

/// Waits (long polls, no sleeping) until the log holds a record at `offset`: a marker after an
/// EndTxn. Kafka answers EndTxn once its decision is durable and writes the markers after;
/// koord answers after the markers, so there the first poll returns at once.
fn wait_for_offset(c: &mut Client, topic: &str, offset: i64) {
    for _ in 0..4 {
        if !records(&fetch(c, topic, offset, READ_UNCOMMITTED, 5_000)).is_empty() {
            return;
        }
    }
    panic!("nothing at offset {offset} of {topic} within 20 s");
}

/// ListOffsets v5 LATEST at `isolation`.
fn latest(c: &mut Client, topic: &str, isolation: i8) -> i64 {
    let resp = c.send(
        5,
        &ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_isolation_level(isolation)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1)])]),
    );
    let p = &resp.topics[0].partitions[0];
    assert_eq!(err(p.error_code), None, "{resp:?}");
    p.offset
}

/// A topic of one partition and a transactional producer on it: (topic, id, producer).
fn setup(c: &mut Client, name: &str, timeout_ms: i32) -> (String, String, (i64, i16)) {
    let topic = unique(name);
    create_topic(c, &topic, 1);
    let id = unique(&format!("{name}-txn"));
    let producer = init_txn(c, &id, timeout_ms);
    (topic, id, producer)
}

#[test]
fn transaction_commits_with_a_marker_and_read_committed_waits_for_it() {
    let koord = Koord::start(SETS);
    let mut c = koord.connect();
    let (topic, id, p) = setup(&mut c, "txn-commit", 60_000);
    let node = find_txn_coordinator(&mut c, &id);
    assert!(node >= 0);
    assert_eq!(add_partitions(&mut c, 3, &id, p, &topic, &[0]), vec![None]);
    let r = produce(&mut c, 9, &id, &topic, 0, txn_batch(p, 0, &["a", "b"]));
    assert_eq!((err(r.error_code), r.base_offset), (None, 0), "{r:?}");
    // Open: the last stable offset stays at the transaction's first offset.
    let open = fetch(&mut c, &topic, 0, READ_COMMITTED, 0);
    assert_eq!((open.high_watermark, open.last_stable_offset), (2, 0));
    assert!(records(&open).is_empty(), "nothing committed yet");
    assert_eq!(open.aborted_transactions.as_deref(), Some(&[][..]));
    let uncommitted = fetch(&mut c, &topic, 0, READ_UNCOMMITTED, 0);
    assert_eq!(records(&uncommitted).len(), 2);
    assert_eq!(uncommitted.aborted_transactions, None);
    assert_eq!(latest(&mut c, &topic, READ_COMMITTED), 0);
    assert_eq!(latest(&mut c, &topic, READ_UNCOMMITTED), 2);

    assert_eq!(end_txn(&mut c, 3, &id, p, true), None);
    wait_for_offset(&mut c, &topic, 2);
    let done = fetch(&mut c, &topic, 0, READ_COMMITTED, 0);
    assert_eq!((done.high_watermark, done.last_stable_offset), (3, 3));
    assert_eq!(
        read_all(&mut c, &topic, READ_COMMITTED).0,
        vec![(0, "a".into()), (1, "b".into()), (2, "COMMIT".into())]
    );
    assert_eq!(latest(&mut c, &topic, READ_COMMITTED), 3);
    // A retried EndTxn of the same outcome is answered NONE; the other outcome is refused.
    assert_eq!(end_txn(&mut c, 3, &id, p, true), None);
    assert_eq!(
        end_txn(&mut c, 3, &id, p, false),
        Some(ResponseError::InvalidTxnState)
    );
    // The next transaction of the same producer continues its sequence.
    assert_eq!(add_partitions(&mut c, 3, &id, p, &topic, &[0]), vec![None]);
    let r = produce(&mut c, 9, &id, &topic, 0, txn_batch(p, 2, &["c"]));
    assert_eq!((err(r.error_code), r.base_offset), (None, 3), "{r:?}");
    assert_eq!(end_txn(&mut c, 3, &id, p, true), None);
    wait_for_offset(&mut c, &topic, 4);
    assert_eq!(latest(&mut c, &topic, READ_COMMITTED), 5);
}

#[test]
fn aborted_transaction_is_listed_to_read_committed_fetches() {
    let koord = Koord::start(SETS);
    let mut c = koord.connect();
    let (topic, id, p) = setup(&mut c, "txn-abort", 60_000);
    assert_eq!(add_partitions(&mut c, 3, &id, p, &topic, &[0]), vec![None]);
    let r = produce(&mut c, 9, &id, &topic, 0, txn_batch(p, 0, &["x", "y", "z"]));
    assert_eq!(err(r.error_code), None, "{r:?}");
    assert_eq!(end_txn(&mut c, 3, &id, p, false), None);
    wait_for_offset(&mut c, &topic, 3);
    let read = fetch(&mut c, &topic, 0, READ_COMMITTED, 0);
    assert_eq!((read.high_watermark, read.last_stable_offset), (4, 4));
    assert_eq!(
        read.aborted_transactions.as_ref().map(|a| a.len()),
        Some(1),
        "the first fetch lists the abort: {read:?}"
    );
    let (all, aborted) = read_all(&mut c, &topic, READ_COMMITTED);
    assert_eq!(all.last(), Some(&(3, "ABORT".to_string())));
    assert_eq!(aborted, vec![(p.0, 0)]);
    // A read starting past the aborted transaction's marker lists nothing.
    let after = fetch(&mut c, &topic, 4, READ_COMMITTED, 0);
    assert_eq!(after.aborted_transactions.as_deref(), Some(&[][..]));
}

#[test]
fn produce_to_a_partition_not_in_the_transaction_is_refused() {
    let koord = Koord::start(SETS);
    let mut c = koord.connect();
    let (topic, id, p) = setup(&mut c, "txn-unadded", 60_000);
    let r = produce(&mut c, 9, &id, &topic, 0, txn_batch(p, 0, &["a"]));
    assert_eq!(
        err(r.error_code),
        Some(ResponseError::InvalidTxnState),
        "v9: {r:?}"
    );
    let r = produce(&mut c, 11, &id, &topic, 0, txn_batch(p, 0, &["a"]));
    assert_eq!(
        err(r.error_code),
        Some(ResponseError::TransactionAbortable),
        "v11: {r:?}"
    );
    assert_eq!(latest(&mut c, &topic, READ_UNCOMMITTED), 0);
    // Unknown topic: that partition UNKNOWN_TOPIC_OR_PARTITION.
    let missing = unique("txn-missing");
    assert_eq!(
        add_partitions(&mut c, 3, &id, p, &missing, &[0]),
        vec![Some(ResponseError::UnknownTopicOrPartition)]
    );
    // A partition the topic lacks fails, and the others are not attempted.
    let mut answers = add_partitions(&mut c, 3, &id, p, &topic, &[0, 5, -1]);
    answers.sort_by_key(|e| e.map(|e| e.code()));
    assert_eq!(
        answers,
        vec![
            Some(ResponseError::UnknownTopicOrPartition),
            Some(ResponseError::UnknownTopicOrPartition),
            Some(ResponseError::OperationNotAttempted),
        ]
    );
    let r = produce(&mut c, 9, &id, &topic, 0, txn_batch(p, 0, &["a"]));
    assert_eq!(
        err(r.error_code),
        Some(ResponseError::InvalidTxnState),
        "still not added"
    );
    // Another producer id for the transactional id.
    assert_eq!(
        add_partitions(&mut c, 3, &id, (p.0 + 1_000_000, 0), &topic, &[0]),
        vec![Some(ResponseError::InvalidProducerIdMapping)]
    );
}

#[test]
fn a_newer_epoch_fences_the_old_producer_and_aborts_its_transaction() {
    let koord = Koord::start(SETS);
    let mut c = koord.connect();
    let (topic, id, old) = setup(&mut c, "txn-fence", 60_000);
    assert_eq!(
        add_partitions(&mut c, 3, &id, old, &topic, &[0]),
        vec![None]
    );
    let r = produce(&mut c, 9, &id, &topic, 0, txn_batch(old, 0, &["zombie"]));
    assert_eq!(err(r.error_code), None, "{r:?}");
    // The new producer's first InitProducerId aborts the open transaction; retried (it answers
    // CONCURRENT_TRANSACTIONS first) it gets an epoch past the abort's.
    let (e, pid, epoch) = init_txn_at(&mut c, 4, &id, 60_000, None);
    assert_eq!(e, None);
    assert_eq!(pid, old.0, "same producer id");
    assert_eq!(
        epoch,
        old.1 + 2,
        "bumped by the fencing abort, then by this init"
    );
    assert_eq!(
        add_partitions(&mut c, 3, &id, old, &topic, &[0]),
        vec![Some(ResponseError::ProducerFenced)]
    );
    assert_eq!(
        add_partitions(&mut c, 1, &id, old, &topic, &[0]),
        vec![Some(ResponseError::InvalidProducerEpoch)],
        "below v2: INVALID_PRODUCER_EPOCH"
    );
    assert_eq!(
        end_txn(&mut c, 3, &id, old, true),
        Some(ResponseError::ProducerFenced)
    );
    let r = produce(&mut c, 9, &id, &topic, 0, txn_batch(old, 1, &["late"]));
    assert_eq!(
        err(r.error_code),
        Some(ResponseError::InvalidProducerEpoch),
        "{r:?}"
    );
    let (all, aborted) = read_all(&mut c, &topic, READ_COMMITTED);
    assert_eq!(all, vec![(0, "zombie".into()), (1, "ABORT".into())]);
    assert_eq!(aborted, vec![(old.0, 0)]);
    // KIP-360: the fenced epoch asking for a bump is fenced too.
    let (e, _, _) = init_txn_at(&mut c, 4, &id, 60_000, Some(old));
    assert_eq!(e, Some(ResponseError::ProducerFenced));
    let (e, _, _) = init_txn_at(&mut c, 3, &id, 60_000, Some(old));
    assert_eq!(e, Some(ResponseError::InvalidProducerEpoch), "below v4");
}

#[test]
fn a_transaction_past_its_timeout_is_aborted_by_the_coordinator() {
    let koord = Koord::start(SETS);
    let mut c = koord.connect();
    let (topic, id, p) = setup(&mut c, "txn-timeout", 1_000);
    assert_eq!(add_partitions(&mut c, 3, &id, p, &topic, &[0]), vec![None]);
    let r = produce(&mut c, 9, &id, &topic, 0, txn_batch(p, 0, &["slow"]));
    assert_eq!(err(r.error_code), None, "{r:?}");
    // The abort's marker wakes a long poll past the record (no sleeping here).
    wait_for_offset(&mut c, &topic, 1);
    let marker = fetch(&mut c, &topic, 1, READ_UNCOMMITTED, 0);
    assert_eq!(records(&marker), vec![(1, "ABORT".to_string())]);
    assert_eq!(latest(&mut c, &topic, READ_COMMITTED), 2);
    // The producer was fenced by the abort.
    assert_eq!(
        end_txn(&mut c, 3, &id, p, true),
        Some(ResponseError::ProducerFenced)
    );
}

#[test]
fn invalid_transaction_timeouts_and_ids() {
    let koord = Koord::start(SETS);
    let mut c = koord.connect();
    let id = unique("txn-bad");
    find_txn_coordinator(&mut c, &id);
    for timeout in [0, 900_001] {
        let (e, pid, epoch) = init_txn_at(&mut c, 4, &id, timeout, None);
        assert_eq!(
            (e, pid, epoch),
            (Some(ResponseError::InvalidTransactionTimeout), -1, -1),
            "timeout {timeout}"
        );
    }
    let (e, _, _) = init_txn_at(&mut c, 4, "", 60_000, None);
    assert_eq!(e, Some(ResponseError::InvalidRequest));
    assert_eq!(
        end_txn(&mut c, 3, &unique("txn-never"), (1, 0), true),
        Some(ResponseError::InvalidProducerIdMapping)
    );
    // Ending with nothing open.
    let p = init_txn(&mut c, &id, 60_000);
    assert_eq!(
        end_txn(&mut c, 3, &id, p, true),
        Some(ResponseError::InvalidTxnState)
    );
}

#[test]
fn transactional_ids_survive_kill_9() {
    let Some(mut koord) = Koord::start_owned("transactional_ids_survive_kill_9", SETS) else {
        return;
    };
    let mut c = koord.connect();
    let (topic, committed, p) = setup(&mut c, "txn-crash", 60_000);
    assert_eq!(
        add_partitions(&mut c, 3, &committed, p, &topic, &[0]),
        vec![None]
    );
    assert_eq!(end_txn(&mut c, 3, &committed, p, true), None);
    let open_id = unique("txn-crash-open");
    let q = init_txn(&mut c, &open_id, 60_000);
    assert_eq!(
        add_partitions(&mut c, 3, &open_id, q, &topic, &[0]),
        vec![None]
    );
    koord.kill9();
    koord.restart();
    let mut c = koord.connect();
    // The committed transaction stays committed: a retried EndTxn(commit) is answered NONE.
    assert_eq!(end_txn(&mut c, 3, &committed, p, true), None);
    // The id keeps its producer id; its epoch goes on from the stored one.
    let (e, pid, epoch) = init_txn_at(&mut c, 4, &committed, 60_000, None);
    assert_eq!((e, pid, epoch), (None, p.0, p.1 + 1));
    // The open transaction is still open (Kafka leaves it to time out): its producer can end it.
    assert_eq!(end_txn(&mut c, 3, &open_id, q, false), None);
}

/// OffsetCommit v8 of `offset` into `group` from outside group management; retried while the
/// topic is not known yet (Kafka, right after CreateTopics).
fn plain_commit(c: &mut Client, group: &str, topic: &str, offset: i64) {
    let deadline = std::time::Instant::now() + common::DEADLINE;
    while plain_commit_once(c, group, topic, offset) == Some(ResponseError::UnknownTopicOrPartition)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(plain_commit_once(c, group, topic, offset), None);
}

fn plain_commit_once(
    c: &mut Client,
    group: &str,
    topic: &str,
    offset: i64,
) -> Option<ResponseError> {
    let r = c.send(
        8,
        &OffsetCommitRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(offset)
                    .with_committed_metadata(Some(s("")))])]),
    );
    err(r.topics[0].partitions[0].error_code)
}

/// Polls OffsetFetch with `require_stable` until the partition is stable (Kafka writes the
/// group's marker after answering EndTxn): its committed offset.
fn stable_offset(c: &mut Client, group: &str, topic: &str) -> i64 {
    let deadline = std::time::Instant::now() + common::DEADLINE;
    loop {
        match committed_offset(c, group, topic, 0, true) {
            (None, offset) => return offset,
            (Some(ResponseError::UnstableOffsetCommit), _)
                if std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => panic!("{group}: {other:?}"),
        }
    }
}

/// A classic group of one member, joined and synced: (member id, generation).
fn one_member_group(c: &mut Client, group: &str) -> (String, i32) {
    let join = |c: &mut Client, member: &str| {
        retry(|| {
            let r = c.send(
                5,
                &JoinGroupRequest::default()
                    .with_group_id(group_id(group))
                    .with_session_timeout_ms(30_000)
                    .with_rebalance_timeout_ms(30_000)
                    .with_member_id(s(member))
                    .with_protocol_type(s("consumer"))
                    .with_protocols(vec![JoinGroupRequestProtocol::default()
                        .with_name(s("range"))
                        .with_metadata(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]))]),
            );
            (err(r.error_code), r)
        })
    };
    let (e, first) = join(c, "");
    assert_eq!(e, Some(ResponseError::MemberIdRequired), "{first:?}");
    let (e, joined) = join(c, first.member_id.as_str());
    assert_eq!(e, None, "{joined:?}");
    let r = c.send(
        3,
        &SyncGroupRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id(joined.generation_id)
            .with_member_id(joined.member_id.clone())
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(joined.member_id.clone())
                .with_assignment(Bytes::new())]),
    );
    assert_eq!(err(r.error_code), None, "{r:?}");
    (joined.member_id.to_string(), joined.generation_id)
}

#[test]
fn transactional_offsets_are_committed_only_by_the_commit_marker() {
    let koord = Koord::start(SETS);
    let mut c = koord.connect();
    let (topic, id, p) = setup(&mut c, "txn-offsets", 60_000);
    let group = unique("txn-offsets-group");
    plain_commit(&mut c, &group, &topic, 5);
    assert_eq!(add_offsets(&mut c, 3, &id, p, &group), None);
    assert_eq!(
        txn_offset_commit(&mut c, 3, &id, p, &group, ("", -1), &topic, 0, 10),
        None
    );
    // Pending: unstable to a require_stable fetch, the old value to any other.
    assert_eq!(
        committed_offset(&mut c, &group, &topic, 0, true),
        (Some(ResponseError::UnstableOffsetCommit), -1)
    );
    assert_eq!(
        committed_offset(&mut c, &group, &topic, 0, false),
        (None, 5)
    );
    assert_eq!(end_txn(&mut c, 3, &id, p, true), None);
    assert_eq!(stable_offset(&mut c, &group, &topic), 10);
    assert_eq!(
        committed_offset(&mut c, &group, &topic, 0, false),
        (None, 10)
    );

    // The next transaction aborts: its offset is dropped.
    assert_eq!(add_offsets(&mut c, 3, &id, p, &group), None);
    assert_eq!(
        txn_offset_commit(&mut c, 3, &id, p, &group, ("", -1), &topic, 0, 20),
        None
    );
    assert_eq!(end_txn(&mut c, 3, &id, p, false), None);
    assert_eq!(stable_offset(&mut c, &group, &topic), 10);
}

#[test]
fn a_plain_commit_after_a_transactional_one_is_kept_when_the_transaction_commits() {
    let koord = Koord::start(SETS);
    let mut c = koord.connect();
    let (topic, id, p) = setup(&mut c, "txn-offsets-mixed", 60_000);
    let group = unique("txn-offsets-mixed-group");
    assert_eq!(add_offsets(&mut c, 3, &id, p, &group), None);
    assert_eq!(
        txn_offset_commit(&mut c, 3, &id, p, &group, ("", -1), &topic, 0, 10),
        None
    );
    plain_commit(&mut c, &group, &topic, 7);
    assert_eq!(
        committed_offset(&mut c, &group, &topic, 0, true),
        (Some(ResponseError::UnstableOffsetCommit), -1),
        "still held by the transaction"
    );
    assert_eq!(end_txn(&mut c, 3, &id, p, true), None);
    assert_eq!(stable_offset(&mut c, &group, &topic), 7);
}

#[test]
fn txn_offset_commit_checks_the_transaction_and_the_committer() {
    let koord = Koord::start(SETS);
    let mut c = koord.connect();
    let (topic, id, p) = setup(&mut c, "txn-offsets-checks", 60_000);
    let group = unique("txn-offsets-checks-group");
    // The group was not added to the transaction.
    assert_eq!(
        txn_offset_commit(&mut c, 3, &id, p, &group, ("", -1), &topic, 0, 1),
        Some(ResponseError::InvalidTxnState),
        "v3"
    );
    assert_eq!(
        txn_offset_commit(&mut c, 4, &id, p, &group, ("", -1), &topic, 0, 1),
        Some(ResponseError::TransactionAbortable),
        "v4"
    );
    assert_eq!(add_offsets(&mut c, 3, &id, p, &group), None);
    // Another producer id, an older epoch.
    assert_eq!(
        txn_offset_commit(
            &mut c,
            3,
            &id,
            (p.0 + 1_000_000, p.1),
            &group,
            ("", -1),
            &topic,
            0,
            1
        ),
        Some(ResponseError::InvalidProducerIdMapping)
    );
    // An unknown topic: that partition only.
    assert_eq!(
        txn_offset_commit(
            &mut c,
            3,
            &id,
            p,
            &group,
            ("", -1),
            &unique("txn-none"),
            0,
            1
        ),
        Some(ResponseError::UnknownTopicOrPartition)
    );
    assert_eq!(
        txn_offset_commit(&mut c, 3, &id, p, "", ("", -1), &topic, 0, 1),
        Some(ResponseError::InvalidGroupId)
    );
    // KIP-447: the committer's membership is checked against the group.
    let member_group = unique("txn-offsets-member");
    let (member, generation) = one_member_group(&mut c, &member_group);
    assert_eq!(add_offsets(&mut c, 3, &id, p, &member_group), None);
    assert_eq!(
        txn_offset_commit(
            &mut c,
            3,
            &id,
            p,
            &member_group,
            (&member, generation + 1),
            &topic,
            0,
            1
        ),
        Some(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        txn_offset_commit(
            &mut c,
            3,
            &id,
            p,
            &member_group,
            ("someone-else", generation),
            &topic,
            0,
            1
        ),
        Some(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        txn_offset_commit(
            &mut c,
            3,
            &id,
            p,
            &member_group,
            (&member, generation),
            &topic,
            0,
            3
        ),
        None
    );
    // A group that does not exist, named with a generation.
    let missing = unique("txn-offsets-missing");
    assert_eq!(add_offsets(&mut c, 3, &id, p, &missing), None);
    assert_eq!(
        txn_offset_commit(&mut c, 3, &id, p, &missing, ("m", 1), &topic, 0, 1),
        Some(ResponseError::IllegalGeneration)
    );
    assert_eq!(end_txn(&mut c, 3, &id, p, true), None);
    assert_eq!(stable_offset(&mut c, &member_group, &topic), 3);
}

#[test]
fn pending_transactional_offsets_survive_kill_9() {
    let Some(mut koord) = Koord::start_owned("pending_transactional_offsets_survive_kill_9", SETS)
    else {
        return;
    };
    let mut c = koord.connect();
    let (topic, id, p) = setup(&mut c, "txn-offsets-crash", 60_000);
    let group = unique("txn-offsets-crash-group");
    plain_commit(&mut c, &group, &topic, 5);
    assert_eq!(add_offsets(&mut c, 3, &id, p, &group), None);
    assert_eq!(
        txn_offset_commit(&mut c, 3, &id, p, &group, ("", -1), &topic, 0, 10),
        None
    );
    koord.kill9();
    koord.restart();
    let mut c = koord.connect();
    let (e, _) = retry(|| committed_offset(&mut c, &group, &topic, 0, true));
    assert_eq!(
        e,
        Some(ResponseError::UnstableOffsetCommit),
        "the transaction still holds the offset"
    );
    assert_eq!(
        committed_offset(&mut c, &group, &topic, 0, false),
        (None, 5)
    );
    assert_eq!(end_txn(&mut c, 3, &id, p, true), None);
    assert_eq!(stable_offset(&mut c, &group, &topic), 10);
    // The committed offset is as durable as any other.
    koord.kill9();
    koord.restart();
    let mut c = koord.connect();
    let (_, offset) = retry(|| committed_offset(&mut c, &group, &topic, 0, true));
    assert_eq!(offset, 10);
}

/// What the crash-cycle client reports of transaction `n`: begun, its EndTxn sent, or its
/// EndTxn answered NONE.
enum Step {
    Begun(i64),
    Ending(i64),
    Ended(i64),
}

/// Transactions `first..` of `id` until the connection breaks: transaction `n` commits offset
/// `n` of `topic`-0 into `group`, and commits if `n` is even, aborts if odd.
fn run_transactions(
    addr: std::net::SocketAddr,
    (id, group, topic): (String, String, String),
    p: (i64, i16),
    first: i64,
    steps: std::sync::mpsc::Sender<Step>,
) {
    let mut c = Client::connect(addr);
    for n in first.. {
        let _ = steps.send(Step::Begun(n));
        let Ok(r) = c.try_send(3, &add_offsets_request(&id, p, &group)) else {
            return;
        };
        assert_eq!(err(r.error_code), None, "AddOffsetsToTxn {n}");
        let req = txn_offset_commit_request(&id, p, &group, ("", -1), (&topic, 0), n);
        let Ok(r) = c.try_send(3, &req) else { return };
        assert_eq!(
            err(r.topics[0].partitions[0].error_code),
            None,
            "TxnOffsetCommit {n}"
        );
        let _ = steps.send(Step::Ending(n));
        let Ok(r) = c.try_send(3, &end_txn_request(&id, p, n % 2 == 0)) else {
            return;
        };
        assert_eq!(err(r.error_code), None, "EndTxn {n}");
        let _ = steps.send(Step::Ended(n));
    }
}

/// What the crash-cycle test knows of the transactions so far.
#[derive(Debug, Default)]
struct Seen {
    /// The last commit answered NONE.
    acknowledged: Option<i64>,
    /// A commit whose EndTxn was sent and not answered: it may or may not have committed.
    in_flight: Option<i64>,
    /// The next transaction's number.
    next: i64,
}

impl Seen {
    fn observe(&mut self, step: &Step) {
        match *step {
            Step::Begun(n) => self.next = n + 1,
            Step::Ending(n) => self.in_flight = (n % 2 == 0).then_some(n),
            Step::Ended(n) => {
                self.in_flight = None;
                if n % 2 == 0 {
                    self.acknowledged = Some(n);
                }
            }
        }
    }

    /// The committed offsets possible now: the last acknowledged commit's (-1: none yet) or
    /// the one in flight. Never an aborted (odd) transaction's, never a half-applied one.
    fn allowed(&self) -> Vec<i64> {
        [Some(self.acknowledged.unwrap_or(-1)), self.in_flight]
            .into_iter()
            .flatten()
            .collect()
    }
}

#[test]
fn acknowledged_transactions_survive_kill_9_cycles() {
    let Some(mut koord) =
        Koord::start_owned("acknowledged_transactions_survive_kill_9_cycles", SETS)
    else {
        return;
    };
    let mut c = koord.connect();
    let topic = unique("txn-cycles");
    create_topic(&mut c, &topic, 1);
    let group = unique("txn-cycles-group");
    let id = unique("txn-cycles-txn");
    let mut seen = Seen {
        next: 1,
        ..Seen::default()
    };
    for cycle in 0..=10 {
        let mut c = koord.connect();
        // A transaction left open by the crash is aborted by this InitProducerId (retried
        // through CONCURRENT_TRANSACTIONS); one found ending was completed at start-up.
        let p = init_txn(&mut c, &id, 60_000);
        let stable = stable_offset(&mut c, &group, &topic);
        assert!(
            seen.allowed().contains(&stable),
            "cycle {cycle}: committed offset {stable}; seen {seen:?}"
        );
        seen.acknowledged = (stable >= 0).then_some(stable);
        seen.in_flight = None;
        if cycle == 10 {
            break;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let names = (id.clone(), group.clone(), topic.clone());
        let addr = koord.addr();
        let first = seen.next;
        let worker = std::thread::spawn(move || run_transactions(addr, names, p, first, tx));
        // Killed once a few transactions went through, wherever the client is then.
        let mut ended = 0;
        for step in rx.iter() {
            seen.observe(&step);
            if matches!(step, Step::Ended(_)) {
                ended += 1;
                if ended == 2 + cycle % 3 {
                    break;
                }
            }
        }
        koord.kill9();
        worker
            .join()
            .expect("the client saw only NONE before the crash");
        for step in rx.try_iter() {
            seen.observe(&step);
        }
        koord.restart();
    }
}

// ---- admin: DescribeTransactions, ListTransactions, DescribeProducers ----

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_producers_response::PartitionResponse;
use kafka_protocol::messages::describe_transactions_response::TransactionState as Described;
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeTransactionsRequest, ListTransactionsRequest,
    ListTransactionsResponse, ProducerId,
};

/// DescribeTransactions (v0) of one transactional id.
fn describe_txn(c: &mut Client, id: &str) -> Described {
    let r = c.send(
        0,
        &DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(s(id))]),
    );
    assert_eq!(r.transaction_states.len(), 1, "{r:?}");
    r.transaction_states[0].clone()
}

/// The topics of a described transaction: `(topic, sorted partitions)`, sorted.
fn described_topics(d: &Described) -> Vec<(String, Vec<i32>)> {
    let mut out: Vec<(String, Vec<i32>)> = d
        .topics
        .iter()
        .map(|t| {
            let mut p = t.partitions.clone();
            p.sort_unstable();
            (t.topic.to_string(), p)
        })
        .collect();
    out.sort();
    out
}

/// ListTransactions at `version`.
fn list_txns(
    c: &mut Client,
    version: i16,
    states: &[&str],
    producers: &[i64],
    duration_ms: i64,
    pattern: Option<&str>,
) -> ListTransactionsResponse {
    c.send(
        version,
        &ListTransactionsRequest::default()
            .with_state_filters(states.iter().map(|x| s(x)).collect())
            .with_producer_id_filters(producers.iter().map(|&p| ProducerId(p)).collect())
            .with_duration_filter(duration_ms)
            .with_transactional_id_pattern(pattern.map(s)),
    )
}

/// The `(transactional id, state)` of a ListTransactions answer, sorted.
fn listed(r: &ListTransactionsResponse) -> Vec<(String, String)> {
    assert_eq!(err(r.error_code), None, "{r:?}");
    let mut out: Vec<(String, String)> = r
        .transaction_states
        .iter()
        .map(|t| {
            (
                t.transactional_id.to_string(),
                t.transaction_state.to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

/// DescribeProducers (v0) of `partitions` of `topic`; retried while a partition has no leader
/// yet (Kafka, right after CreateTopics), as a client would.
fn describe_producers(c: &mut Client, topic: &str, partitions: &[i32]) -> Vec<PartitionResponse> {
    let deadline = std::time::Instant::now() + common::DEADLINE;
    loop {
        let r = c.send(
            0,
            &DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
                .with_name(topic_name(topic))
                .with_partition_indexes(partitions.to_vec())]),
        );
        assert_eq!(r.topics.len(), 1, "{r:?}");
        let parts = r.topics[0].partitions.clone();
        let leaderless = parts
            .iter()
            .any(|p| err(p.error_code) == Some(ResponseError::NotLeaderOrFollower));
        if !leaderless || std::time::Instant::now() >= deadline {
            return parts;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// DescribeTransactions of `id` once its transaction is no longer ending: Kafka answers
/// EndTxn before it writes the markers and completes, so right after it the id may still be in
/// PrepareCommit/PrepareAbort; asked again with a client's backoff until it moved on.
fn describe_settled(c: &mut Client, id: &str) -> Described {
    let deadline = std::time::Instant::now() + common::DEADLINE;
    loop {
        let d = describe_txn(c, id);
        if !d.transaction_state.starts_with("Prepare") || std::time::Instant::now() >= deadline {
            return d;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The wall clock in ms, to bound a reported start time.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[test]
fn describe_transactions_follows_the_transaction_through_its_states() {
    let koord = Koord::start(SETS);
    let mut c = koord.connect();
    let topic = unique("txn-describe");
    create_topic(&mut c, &topic, 2);
    let id = unique("txn-describe-txn");
    let p = init_txn(&mut c, &id, 60_000);
    let d = describe_txn(&mut c, &id);
    assert_eq!(err(d.error_code), None, "{d:?}");
    assert_eq!(d.transactional_id.as_str(), id);
    assert_eq!(
        (
            d.transaction_state.as_str(),
            d.transaction_timeout_ms,
            d.transaction_start_time_ms
        ),
        ("Empty", 60_000, -1),
        "{d:?}"
    );
    assert_eq!((d.producer_id.0, d.producer_epoch), p);
    assert!(d.topics.is_empty());

    let before = now_ms();
    assert_eq!(
        add_partitions(&mut c, 3, &id, p, &topic, &[1, 0]),
        vec![None, None]
    );
    let d = describe_txn(&mut c, &id);
    assert_eq!(d.transaction_state.as_str(), "Ongoing", "{d:?}");
    let started = d.transaction_start_time_ms;
    assert!(
        (before..=now_ms()).contains(&started),
        "started at the AddPartitionsToTxn: {d:?}"
    );
    assert_eq!(described_topics(&d), vec![(topic.clone(), vec![0, 1])]);

    assert_eq!(end_txn(&mut c, 3, &id, p, true), None);
    let d = describe_settled(&mut c, &id);
    assert_eq!(d.transaction_state.as_str(), "CompleteCommit", "{d:?}");
    assert_eq!(
        d.transaction_start_time_ms, started,
        "the last transaction's start"
    );
    assert!(d.topics.is_empty(), "{d:?}");

    // InitProducerId again: Empty, no start time, the epoch bumped.
    let q = init_txn(&mut c, &id, 30_000);
    let d = describe_txn(&mut c, &id);
    assert_eq!(
        (
            d.transaction_state.as_str(),
            d.transaction_timeout_ms,
            d.transaction_start_time_ms,
            d.producer_epoch
        ),
        ("Empty", 30_000, -1, q.1),
        "{d:?}"
    );

    let unknown = unique("txn-describe-unknown");
    let d = describe_txn(&mut c, &unknown);
    assert_eq!(
        err(d.error_code),
        Some(ResponseError::TransactionalIdNotFound)
    );
    assert_eq!(d.transactional_id.as_str(), unknown);
    assert_eq!(
        err(describe_txn(&mut c, "").error_code),
        Some(ResponseError::InvalidRequest)
    );
    let none = c.send(0, &DescribeTransactionsRequest::default());
    assert!(none.transaction_states.is_empty(), "{none:?}");
}

#[test]
fn list_transactions_filters_by_state_producer_duration_and_pattern() {
    let koord = Koord::start(SETS);
    let mut c = koord.connect();
    let (topic, id, p) = setup(&mut c, "txn-list", 60_000);
    let idle_id = unique("txn-list-idle");
    let idle = init_txn(&mut c, &idle_id, 60_000);
    assert_eq!(add_partitions(&mut c, 3, &id, p, &topic, &[0]), vec![None]);
    let ours = [p.0, idle.0];
    let ongoing = (id.clone(), "Ongoing".to_string());
    let empty = (idle_id.clone(), "Empty".to_string());
    let mut both = vec![ongoing.clone(), empty.clone()];
    both.sort();

    // The producer id filter keeps these two ids among whatever else the server has.
    assert_eq!(listed(&list_txns(&mut c, 0, &[], &ours, -1, None)), both);
    // States: unknown names are reported back and ignored; only unknown names match nothing.
    let r = list_txns(&mut c, 0, &["Ongoing", "Bogus"], &ours, -1, None);
    assert_eq!(r.unknown_state_filters, vec![s("Bogus")]);
    assert_eq!(listed(&r), vec![ongoing.clone()]);
    assert_eq!(
        listed(&list_txns(&mut c, 0, &["Empty"], &ours, -1, None)),
        vec![empty.clone()]
    );
    let r = list_txns(&mut c, 0, &["Bogus"], &ours, -1, None);
    assert_eq!(
        (listed(&r), r.unknown_state_filters.clone()),
        (vec![], vec![s("Bogus")])
    );
    // v1 duration: an hour-old transaction there is not; an Empty id has no start time and
    // counts as running since ever.
    assert_eq!(
        listed(&list_txns(&mut c, 1, &[], &ours, 3_600_000, None)),
        vec![empty.clone()]
    );
    // v2 pattern: a regular expression matching the whole id (these ids are `[a-z0-9-]`,
    // literal in a pattern).
    assert_eq!(
        listed(&list_txns(&mut c, 2, &[], &ours, -1, Some(&id))),
        vec![ongoing.clone()]
    );
    let prefix = &id[..id.len() - 3];
    assert_eq!(
        listed(&list_txns(&mut c, 2, &[], &ours, -1, Some(prefix))),
        vec![],
        "a prefix alone does not match"
    );
    assert_eq!(
        listed(&list_txns(
            &mut c,
            2,
            &[],
            &ours,
            -1,
            Some(&format!("{prefix}.*"))
        )),
        vec![ongoing.clone()]
    );
    assert_eq!(
        listed(&list_txns(&mut c, 2, &[], &ours, -1, Some(""))),
        both
    );
    for bad in ["(", "[a"] {
        assert_eq!(
            err(list_txns(&mut c, 2, &[], &ours, -1, Some(bad)).error_code),
            Some(ResponseError::InvalidRegularExpression),
            "{bad}"
        );
    }
    assert_eq!(end_txn(&mut c, 3, &id, p, false), None);
    describe_settled(&mut c, &id);
    assert_eq!(
        listed(&list_txns(&mut c, 0, &["CompleteAbort"], &ours, -1, None)),
        vec![(id, "CompleteAbort".to_string())]
    );
}

#[test]
fn describe_producers_shows_sequences_and_the_open_transaction() {
    let koord = Koord::start(SETS);
    let mut c = koord.connect();
    let topic = unique("txn-producers");
    create_topic(&mut c, &topic, 2);
    let id = unique("txn-producers-txn");
    let p = init_txn(&mut c, &id, 60_000);
    let parts = describe_producers(&mut c, &topic, &[0, 1]);
    assert!(parts
        .iter()
        .all(|x| err(x.error_code).is_none() && x.active_producers.is_empty()));

    assert_eq!(add_partitions(&mut c, 3, &id, p, &topic, &[0]), vec![None]);
    let r = produce(&mut c, 9, &id, &topic, 0, txn_batch(p, 0, &["a", "b"]));
    assert_eq!(err(r.error_code), None, "{r:?}");
    let open = describe_producers(&mut c, &topic, &[0, 1]);
    assert_eq!(open[0].partition_index, 0);
    let state = &open[0].active_producers;
    assert_eq!(state.len(), 1, "{open:?}");
    let s0 = &state[0];
    assert_eq!(
        (
            s0.producer_id.0,
            s0.producer_epoch,
            s0.last_sequence,
            s0.last_timestamp,
            s0.coordinator_epoch,
            s0.current_txn_start_offset
        ),
        (
            p.0,
            i32::from(p.1),
            1,
            common::txn::BASE_TIMESTAMP + 10,
            -1,
            0
        ),
        "{open:?}"
    );
    assert!(open[1].active_producers.is_empty(), "{open:?}");

    let before = now_ms();
    assert_eq!(end_txn(&mut c, 3, &id, p, true), None);
    wait_for_offset(&mut c, &topic, 2);
    let done = describe_producers(&mut c, &topic, &[0]);
    let s1 = &done[0].active_producers[0];
    assert_eq!(
        (
            s1.last_sequence,
            s1.coordinator_epoch,
            s1.current_txn_start_offset
        ),
        (1, 0, -1),
        "{done:?}"
    );
    assert!(s1.last_timestamp >= before, "the marker's time: {done:?}");

    // A new transaction fenced by a newer producer: the abort marker's epoch, no sequence.
    let q = init_txn(&mut c, &id, 60_000);
    assert_eq!(add_partitions(&mut c, 3, &id, q, &topic, &[0]), vec![None]);
    let r = produce(&mut c, 9, &id, &topic, 0, txn_batch(q, 0, &["z"]));
    assert_eq!(err(r.error_code), None, "{r:?}");
    let (e, _, epoch) = init_txn_at(&mut c, 4, &id, 60_000, None);
    assert_eq!(e, None);
    wait_for_offset(&mut c, &topic, 4);
    let fenced = describe_producers(&mut c, &topic, &[0]);
    let s2 = &fenced[0].active_producers[0];
    assert_eq!(
        (
            s2.producer_epoch,
            s2.last_sequence,
            s2.current_txn_start_offset
        ),
        (i32::from(epoch) - 1, -1, -1),
        "{fenced:?}"
    );
}

#[test]
fn describe_producers_of_unknown_or_invalid_partitions() {
    let koord = Koord::start(SETS);
    let mut c = koord.connect();
    let topic = unique("txn-producers-bad");
    create_topic(&mut c, &topic, 1);
    let parts = describe_producers(&mut c, &topic, &[7, -1]);
    for x in &parts {
        assert_eq!(
            (err(x.error_code), x.error_message.as_deref()),
            (Some(ResponseError::UnknownTopicOrPartition), None),
            "{parts:?}"
        );
    }
    let parts = describe_producers(&mut c, &unique("txn-producers-none"), &[0]);
    assert_eq!(
        (err(parts[0].error_code), parts[0].error_message.as_deref()),
        (
            Some(ResponseError::UnknownTopicOrPartition),
            Some("This server does not host this topic-partition.")
        )
    );
    let parts = describe_producers(&mut c, "bad name!", &[0]);
    assert_eq!(
        (err(parts[0].error_code), parts[0].error_message.as_deref()),
        (
            Some(ResponseError::InvalidTopicException),
            Some(
                "Topic name is invalid: 'bad name!' contains one or more characters other than \
                 ASCII alphanumerics, '.', '_' and '-'"
            )
        )
    );
}

/// EndTxn v5: the error and the producer id and epoch it answers.
fn end_txn_v5(
    c: &mut Client,
    id: &str,
    producer: (i64, i16),
    commit: bool,
) -> (Option<ResponseError>, (i64, i16)) {
    retry(|| {
        let r = c.send(5, &end_txn_request(id, producer, commit));
        (err(r.error_code), (r.producer_id.0, r.producer_epoch))
    })
}

/// Transaction version 2 (KIP-890 part 2), as a Kafka 4.4 producer runs it: no
/// AddPartitionsToTxn (Produce v12+ adds the partition), no AddOffsetsToTxn (TxnOffsetCommit v5
/// adds the group), and every EndTxn v5 bumps the epoch, answers it, and fences the old one.
#[test]
fn transaction_version_2_adds_through_its_writes_and_bumps_the_epoch_at_every_end() {
    let koord = Koord::start(SETS);
    let mut c = koord.connect();
    let (topic, id, p) = setup(&mut c, "txn-tv2", 60_000);
    let r = produce(&mut c, 12, &id, &topic, 0, txn_batch(p, 0, &["a"]));
    assert_eq!((err(r.error_code), r.base_offset), (None, 0), "{r:?}");
    let group = unique("txn-tv2-group");
    assert_eq!(
        txn_offset_commit(&mut c, 5, &id, p, &group, ("", -1), &topic, 0, 1),
        None
    );
    assert_eq!(
        committed_offset(&mut c, &group, &topic, 0, true),
        (Some(ResponseError::UnstableOffsetCommit), -1),
        "pending in the open transaction"
    );
    let bumped = (p.0, p.1 + 1);
    assert_eq!(end_txn_v5(&mut c, &id, p, true), (None, bumped));
    wait_for_offset(&mut c, &topic, 1);
    assert_eq!(
        read_all(&mut c, &topic, READ_COMMITTED).0,
        vec![(0, "a".into()), (1, "COMMIT".into())]
    );
    assert_eq!(committed_offset(&mut c, &group, &topic, 0, true), (None, 1));
    // A retry with the old epoch learns the new one; the other outcome is refused.
    assert_eq!(end_txn_v5(&mut c, &id, p, true), (None, bumped));
    assert_eq!(
        end_txn_v5(&mut c, &id, p, false),
        (Some(ResponseError::InvalidTxnState), (-1, -1))
    );
    // The old epoch is fenced where it wrote.
    let r = produce(&mut c, 12, &id, &topic, 0, txn_batch(p, 1, &["zombie"]));
    assert_eq!(
        err(r.error_code),
        Some(ResponseError::InvalidProducerEpoch),
        "{r:?}"
    );
    // The next transaction runs at the bumped epoch, its sequences from 0; its abort bumps again.
    let r = produce(&mut c, 12, &id, &topic, 0, txn_batch(bumped, 0, &["b"]));
    assert_eq!((err(r.error_code), r.base_offset), (None, 2), "{r:?}");
    assert_eq!(
        end_txn_v5(&mut c, &id, bumped, false),
        (None, (p.0, p.1 + 2))
    );
    wait_for_offset(&mut c, &topic, 3);
    let (read, aborted) = read_all(&mut c, &topic, READ_COMMITTED);
    assert_eq!(
        read,
        vec![
            (0, "a".into()),
            (1, "COMMIT".into()),
            (2, "b".into()),
            (3, "ABORT".into())
        ]
    );
    assert_eq!(aborted, vec![(p.0, 2)], "b is listed aborted");
    // An EndTxn v5 with nothing in the transaction: a commit is refused, an abort bumps.
    let now = (p.0, p.1 + 2);
    assert_eq!(
        end_txn_v5(&mut c, &id, now, true),
        (Some(ResponseError::InvalidTxnState), (-1, -1))
    );
    assert_eq!(end_txn_v5(&mut c, &id, now, false), (None, (p.0, p.1 + 3)));
}
