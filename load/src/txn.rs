//! The transactional producer scenario (`koord-load --txn-producers N`, issue 18's benchmark):
//! N transactional producers, one connection and one partition each, run transactions back to
//! back for the measured window: AddPartitionsToTxn (v3), one Produce (v9, acks=-1) of one batch
//! of `--txn-records` records, EndTxn(commit) (v3). Transaction version 1, the protocol koord
//! serves and 4.x clients fall back to.
//!
//! A transaction counts once its EndTxn is answered with no error inside the window. Retries
//! follow Kafka's Java producer: CONCURRENT_TRANSACTIONS (Kafka answers EndTxn before its markers
//! are written, and refuses the next AddPartitionsToTxn until they are) and a coordinator still
//! loading are retried after 20 ms, the producer's backoff for them; the retry is part of the
//! transaction's time. `--txn-retry-backoff-ms` changes that wait (what Kafka could do with
//! clients that retried sooner).
//!
//! The window opens once every producer has committed one transaction. Reported: transactions/s, records/s, EndTxn and whole-transaction latency percentiles, and
//! the server's CPU seconds in the window.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest,
    ProduceRequest, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kafka_protocol::ResponseError;

use crate::conn::Conn;
use crate::stats::{quantile_ms, ProcSample};

/// What the scenario is asked to do.
pub struct TxnPlan {
    pub addr: SocketAddr,
    pub producers: usize,
    pub records: usize,
    pub record_bytes: usize,
    pub topic: String,
    pub duration: Duration,
    pub server_pid: Option<u32>,
    /// The wait before a retried request.
    pub retry_backoff: Duration,
}

/// What one run measured.
pub struct TxnReport {
    pub producers: usize,
    pub records_per_txn: usize,
    pub window: Duration,
    pub transactions: u64,
    /// EndTxn latencies in the window, in microseconds, sorted.
    pub end_txn_us: Vec<u32>,
    /// Whole-transaction latencies (AddPartitionsToTxn to EndTxn answered), sorted.
    pub txn_us: Vec<u32>,
    /// Answers other than success and the retried codes.
    pub failures: u64,
    pub retries: u64,
    pub server: Option<(ProcSample, ProcSample)>,
}

/// The backoff of Kafka's Java producer for CONCURRENT_TRANSACTIONS on a transaction's first
/// AddPartitionsToTxn (`TransactionManager`'s 20 ms), the default of `--txn-retry-backoff-ms`.
pub const DEFAULT_RETRY_BACKOFF_MS: u64 = 20;

fn retried(e: Option<ResponseError>) -> bool {
    matches!(
        e,
        Some(
            ResponseError::ConcurrentTransactions
                | ResponseError::CoordinatorLoadInProgress
                | ResponseError::CoordinatorNotAvailable
                | ResponseError::NotCoordinator
                | ResponseError::NotLeaderOrFollower
        )
    )
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// One transactional batch of `count` records of `size` bytes at sequence `seq`.
fn batch(producer_id: i64, epoch: i16, seq: i32, count: usize, size: usize) -> Result<Bytes> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let value = Bytes::from(vec![b'x'; size]);
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: seq.wrapping_add(i as i32),
            timestamp: now,
            key: None,
            value: Some(value.clone()),
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
    .context("encode a transactional batch")?;
    Ok(buf.freeze())
}

/// What one producer counted.
#[derive(Default)]
struct ProducerStats {
    end_txn_us: Vec<u32>,
    txn_us: Vec<u32>,
    failures: u64,
    retries: u64,
}

struct Shared {
    window_open: AtomicBool,
    stop: AtomicBool,
    committed: AtomicU64,
    /// Producers past their first committed transaction; the window opens when all are.
    ready: AtomicUsize,
    all_ready: tokio::sync::Notify,
    producers: usize,
}

/// FindCoordinator(transaction) then InitProducerId, retried as a client does: (id, epoch).
async fn init(
    conn: &Conn,
    id: &str,
    backoff: Duration,
    stats: &mut ProducerStats,
) -> Result<(i64, i16)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = conn
            .call(
                3,
                &FindCoordinatorRequest::default()
                    .with_key(sb(id))
                    .with_key_type(1),
            )
            .await?;
        if r.error_code == 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "no transaction coordinator for {id}: {:?}",
                r.error_code.err()
            );
        }
        stats.retries += 1;
        tokio::time::sleep(backoff).await;
    }
    loop {
        let r = conn
            .call(
                4,
                &InitProducerIdRequest::default()
                    .with_transactional_id(Some(TransactionalId(sb(id))))
                    .with_transaction_timeout_ms(60_000)
                    .with_producer_id((-1).into())
                    .with_producer_epoch(-1),
            )
            .await?;
        match r.error_code.err() {
            None => return Ok((r.producer_id.0, r.producer_epoch)),
            e if retried(e) && Instant::now() < deadline => {
                stats.retries += 1;
                tokio::time::sleep(backoff).await;
            }
            e => bail!("InitProducerId({id}): {e:?}"),
        }
    }
}

/// Sends `req` until its error (read by `code`) is not a retried one; the final error.
async fn call_retrying<R, F>(
    conn: &Conn,
    version: i16,
    req: &R,
    code: F,
    backoff: Duration,
    stats: &mut ProducerStats,
) -> Result<Option<ResponseError>>
where
    R: kafka_protocol::protocol::Request,
    F: Fn(&R::Response) -> i16,
{
    loop {
        let resp = conn.call(version, req).await?;
        let e = code(&resp).err();
        if !retried(e) {
            return Ok(e);
        }
        stats.retries += 1;
        tokio::time::sleep(backoff).await;
    }
}

async fn producer(plan: Arc<TxnPlan>, shared: Arc<Shared>, index: usize) -> Result<ProducerStats> {
    let mut stats = ProducerStats::default();
    let conn = crate::security::connect(plan.addr, "koord-load-txn").await?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let id = format!("load-txn-{:x}-{index}", nanos & 0xffff_ffff);
    let backoff = plan.retry_backoff;
    let (pid, epoch) = init(&conn, &id, backoff, &mut stats).await?;
    let partition = i32::try_from(index % plan.producers.max(1)).unwrap_or(0);
    let topic = TopicName(sb(&plan.topic));
    let add = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(sb(&id)))
        .with_v3_and_below_producer_id(pid.into())
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(topic.clone())
            .with_partitions(vec![partition])]);
    let end = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(sb(&id)))
        .with_producer_id(pid.into())
        .with_producer_epoch(epoch)
        .with_committed(true);
    let mut seq: i32 = 0;
    let mut first = true;
    while !shared.stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let e = call_retrying(
            &conn,
            3,
            &add,
            |r: &kafka_protocol::messages::AddPartitionsToTxnResponse| {
                r.results_by_topic_v3_and_below
                    .iter()
                    .flat_map(|t| &t.results_by_partition)
                    .map(|p| p.partition_error_code)
                    .find(|&c| c != 0)
                    .unwrap_or(0)
            },
            backoff,
            &mut stats,
        )
        .await?;
        if let Some(e) = e {
            bail!("AddPartitionsToTxn({id}): {e:?}");
        }
        let records = batch(pid, epoch, seq, plan.records, plan.record_bytes)?;
        let produce = ProduceRequest::default()
            .with_transactional_id(Some(TransactionalId(sb(&id))))
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic.clone())
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(records))])]);
        let e = call_retrying(
            &conn,
            9,
            &produce,
            |r: &kafka_protocol::messages::ProduceResponse| {
                r.responses
                    .iter()
                    .flat_map(|t| &t.partition_responses)
                    .map(|p| p.error_code)
                    .find(|&c| c != 0)
                    .unwrap_or(0)
            },
            backoff,
            &mut stats,
        )
        .await?;
        if let Some(e) = e {
            bail!("Produce({id}): {e:?}");
        }
        seq = seq.wrapping_add(i32::try_from(plan.records).unwrap_or(i32::MAX));
        let end_started = Instant::now();
        let e = call_retrying(
            &conn,
            3,
            &end,
            |r: &kafka_protocol::messages::EndTxnResponse| r.error_code,
            backoff,
            &mut stats,
        )
        .await?;
        let done = Instant::now();
        if e.is_some() {
            stats.failures += 1;
            bail!("EndTxn({id}): {e:?}");
        }
        if first {
            first = false;
            if shared.ready.fetch_add(1, Ordering::AcqRel) + 1 == shared.producers {
                shared.all_ready.notify_one();
            }
        }
        if shared.window_open.load(Ordering::Relaxed) {
            let us = |d: Duration| u32::try_from(d.as_micros()).unwrap_or(u32::MAX);
            stats.end_txn_us.push(us(done - end_started));
            stats.txn_us.push(us(done - started));
            shared.committed.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(stats)
}

/// Runs the scenario: every producer initialised, then a warm-up second, then the window.
pub async fn run(plan: TxnPlan) -> Result<TxnReport> {
    if plan.producers == 0 || plan.records == 0 {
        bail!("--txn-producers and --txn-records must be at least 1");
    }
    crate::create_topic(
        plan.addr,
        &plan.topic,
        i32::try_from(plan.producers).unwrap_or(i32::MAX),
    )
    .await?;
    let plan = Arc::new(plan);
    let shared = Arc::new(Shared {
        window_open: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        committed: AtomicU64::new(0),
        ready: AtomicUsize::new(0),
        all_ready: tokio::sync::Notify::new(),
        producers: plan.producers,
    });
    let tasks: Vec<_> = (0..plan.producers)
        .map(|i| tokio::spawn(producer(plan.clone(), shared.clone(), i)))
        .collect();
    // Warm-up: the window opens once every producer has committed its first transaction (the
    // coordinator and its log exist), or after a minute with whoever is ready.
    let ready = shared.all_ready.notified();
    if tokio::time::timeout(Duration::from_secs(60), ready)
        .await
        .is_err()
    {
        eprintln!(
            "koord-load: {} of {} producers ready after 60 s",
            shared.ready.load(Ordering::Acquire),
            plan.producers
        );
    }
    let at_start = plan.server_pid.map(crate::stats::sample).transpose()?;
    shared.window_open.store(true, Ordering::Relaxed);
    let window_start = Instant::now();
    tokio::time::sleep(plan.duration).await;
    shared.window_open.store(false, Ordering::Relaxed);
    let window = window_start.elapsed();
    let transactions = shared.committed.load(Ordering::Relaxed);
    let at_end = plan.server_pid.map(crate::stats::sample).transpose()?;
    shared.stop.store(true, Ordering::Relaxed);
    let mut report = TxnReport {
        producers: plan.producers,
        records_per_txn: plan.records,
        window,
        transactions,
        end_txn_us: Vec::new(),
        txn_us: Vec::new(),
        failures: 0,
        retries: 0,
        server: at_start.zip(at_end),
    };
    for t in tasks {
        match t.await {
            Ok(Ok(mut s)) => {
                report.end_txn_us.append(&mut s.end_txn_us);
                report.txn_us.append(&mut s.txn_us);
                report.failures += s.failures;
                report.retries += s.retries;
            }
            Ok(Err(e)) => {
                eprintln!("koord-load: a producer failed: {e:#}");
                report.failures += 1;
            }
            Err(e) => {
                eprintln!("koord-load: a producer panicked: {e}");
                report.failures += 1;
            }
        }
    }
    report.end_txn_us.sort_unstable();
    report.txn_us.sort_unstable();
    Ok(report)
}

impl TxnReport {
    fn per_s(&self, n: f64) -> f64 {
        n / self.window.as_secs_f64().max(1e-9)
    }

    pub fn text(&self) -> String {
        let txns = self.per_s(self.transactions as f64);
        let mut out = format!(
            "{} transactional producers, {} records per transaction, {:.1} s window\n\
             transactions/s {:.1}, records/s {:.0}\n\
             EndTxn p50 {:.2} ms, p99 {:.2} ms; transaction p50 {:.2} ms, p99 {:.2} ms\n\
             retries {}, failures {}\n",
            self.producers,
            self.records_per_txn,
            self.window.as_secs_f64(),
            txns,
            txns * self.records_per_txn as f64,
            quantile_ms(&self.end_txn_us, 0.5),
            quantile_ms(&self.end_txn_us, 0.99),
            quantile_ms(&self.txn_us, 0.5),
            quantile_ms(&self.txn_us, 0.99),
            self.retries,
            self.failures,
        );
        if let Some((a, b)) = self.server {
            out.push_str(&format!(
                "server CPU {:.2} s in the window\n",
                b.cpu_secs - a.cpu_secs
            ));
        }
        out
    }

    pub fn json(&self) -> String {
        let cpu = self.server.map_or("null".to_string(), |(a, b)| {
            format!("{:.3}", b.cpu_secs - a.cpu_secs)
        });
        format!(
            "{{\"producers\":{},\"records_per_txn\":{},\"window_s\":{:.3},\"transactions\":{},\
             \"EndTxn_p50_ms\":{:.3},\"EndTxn_p99_ms\":{:.3},\"txn_p50_ms\":{:.3},\
             \"txn_p99_ms\":{:.3},\"retries\":{},\"failures\":{},\"server_cpu_s\":{}}}\n",
            self.producers,
            self.records_per_txn,
            self.window.as_secs_f64(),
            self.transactions,
            quantile_ms(&self.end_txn_us, 0.5),
            quantile_ms(&self.end_txn_us, 0.99),
            quantile_ms(&self.txn_us, 0.5),
            quantile_ms(&self.txn_us, 0.99),
            self.retries,
            self.failures,
            cpu,
        )
    }
}
