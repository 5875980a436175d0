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
    add_partitions, create_topic, end_txn, find_txn_coordinator, init_txn, init_txn_at, txn_batch,
};
use common::{err, s, topic_name, unique, Client, Koord};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{FetchRequest, ListOffsetsRequest, ProduceRequest, TransactionalId};
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
