//! The share groups' dead-letter queues (KIP-1191, Kafka 4.4): the shell that writes the
//! records a share group gives up on to the topic its `errors.deadletterqueue.topic.name`
//! names, as Kafka's `ShareGroupDLQStateManager` does.
//!
//! The group decides (a rejected record, or one delivered `share.delivery.count.limit` times,
//! is Archiving: never delivered again, the start offset waiting for it) and hands the ranges
//! out ([`crate::coordinator::DeadLetterJob`]); this task checks the queue topic, writes one
//! record per offset to partition `source partition % queue partitions`, and reports the range
//! back ([`ShareGroup::dead_lettered`]), which archives it durably. A write that keeps failing
//! (five attempts, one second doubling) or a topic Kafka would refuse archives the records
//! regardless, as Kafka does, and is logged. A node that stops between the two steps finds
//! the records Archiving in the group's stored state and writes them again (at least once).
//!
//! Each queue record: the timestamp of the write, the original key and value when
//! `errors.deadletterqueue.copy.record.enable` (else none), and Kafka's headers
//! `__dlq.errors.topic`, `.partition`, `.offset`, `.group`, `.delivery.count`, `.message`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Record, TimestampType};
use tracing::{debug, warn};

use crate::backend::{DeadLetterTopicError, ShareRead, ShareReadSpec};
use crate::broker::Broker;
use crate::coordinator::{DeadLetterJob, KindRefusal};
use crate::group::share::partition::DeadLetter;
use crate::group::share::{AutoOffsetReset, DeadLetters, ShareGroup};
use crate::group::{GroupError, GroupId};
use crate::metadata::Topic;
use crate::metrics::{metrics, ShareOutcome};

/// Attempts at a write before the records are archived without it (Kafka's
/// `MAX_REQUEST_ATTEMPTS`), with a backoff from one second, doubling.
const ATTEMPTS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// Bytes of records in one batch at most, below Kafka's default `max.message.bytes`
/// (1048588); a batch holds one record however large.
const BATCH_BYTES: usize = 1_000_000;

/// Jobs written at once: a restart that finds many Archiving ranges does not send a burst
/// of requests (upstream's in gateway mode).
const CONCURRENT: usize = 4;

/// How long a written range's report waits for a group that is loading (or whose shard's
/// lease is being renewed) before it is given up (its next load finds it Archiving).
const REPORT_FOR: Duration = Duration::from_secs(60);

/// Starts the writer of `broker`'s share groups' dead-letter records (once; a second call does
/// nothing). It ends with the coordinator's shards.
pub fn spawn(broker: &Arc<Broker>) {
    let Some(mut jobs) = broker.coordinator.take_dead_letters() else {
        return;
    };
    let weak = Arc::downgrade(broker);
    let slots = Arc::new(tokio::sync::Semaphore::new(CONCURRENT));
    tokio::spawn(async move {
        while let Some(job) = jobs.recv().await {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                break;
            };
            let Some(broker) = weak.upgrade() else {
                break;
            };
            tokio::spawn(async move {
                write(&broker, job).await;
                drop(slot);
            });
        }
    });
}

/// A share group's dead-letter queue: the topic its records go to
/// (`errors.deadletterqueue.topic.name`), and whether each carries the original record's key
/// and value or only the headers that say where it came from
/// (`errors.deadletterqueue.copy.record.enable`).
struct DeadLetterQueue {
    topic: String,
    copy_record: bool,
}

/// Why a write did not happen.
enum Failure {
    /// Kafka would refuse the queue (its name, a topic without the DLQ config, a missing
    /// topic without auto-creation): not tried again.
    Refused(String),
    /// Tried again, up to [`ATTEMPTS`].
    Failed(String),
}

async fn write(broker: &Broker, job: DeadLetterJob) {
    let DeadLetters {
        topic,
        partition,
        letters,
    } = job.letters;
    // The group's queue as configured now (a restored group's records too).
    let configs = broker.group_configs.get(job.group.as_str());
    let queue = (!configs.errors_deadletterqueue_topic_name.is_empty()).then(|| DeadLetterQueue {
        topic: configs.errors_deadletterqueue_topic_name.clone(),
        copy_record: configs.errors_deadletterqueue_copy_record_enable,
    });
    let records: u64 = letters.iter().map(|d| span(d.first, d.last)).sum();
    if let Some(queue) = &queue {
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        // Records appended by an earlier attempt are not appended again.
        let mut written = 0;
        loop {
            match deliver(
                broker,
                &job.group,
                topic,
                partition,
                queue,
                &letters,
                &mut written,
            )
            .await
            {
                Ok(()) => {
                    metrics().share_records(ShareOutcome::DeadLettered, records);
                    debug!(group = %job.group, queue = %queue.topic, records, "records written to the share group's dead-letter queue");
                    break;
                }
                Err(Failure::Failed(e)) if attempt < ATTEMPTS => {
                    debug!(group = %job.group, queue = %queue.topic, attempt, "dead-letter queue write failed, trying again: {e}");
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                    attempt += 1;
                }
                Err(Failure::Failed(e) | Failure::Refused(e)) => {
                    metrics().share_records(ShareOutcome::DeadLetterFailed, records);
                    warn!(group = %job.group, queue = %queue.topic, records, "Failed to write to the dead-letter queue, archiving regardless: {e}");
                    break;
                }
            }
        }
    }
    report(broker, &job.group, topic, partition, letters).await;
}

/// Tells the group the ranges are done with: they are Archived, durably. A group loading or
/// briefly not admitted here is asked again for a while; one gone or served elsewhere finds
/// them Archiving where it loads.
async fn report(
    broker: &Broker,
    group: &GroupId,
    topic: crate::vocab::TopicId,
    partition: i32,
    letters: Vec<DeadLetter>,
) {
    let deadline = tokio::time::Instant::now() + REPORT_FOR;
    let mut backoff = Duration::from_millis(100);
    loop {
        let done = letters.clone();
        let reported = broker
            .coordinator
            .with_kind(group.clone(), false, move |g: &mut ShareGroup, _, _| {
                for d in &done {
                    g.dead_lettered(topic, partition, d.first, d.last);
                }
            })
            .await;
        match reported {
            Ok(()) => return,
            Err(KindRefusal::Error(
                e @ (GroupError::CoordinatorLoadInProgress | GroupError::CoordinatorNotAvailable),
            )) if tokio::time::Instant::now() + backoff < deadline => {
                debug!(group = %group, "dead-letter records not reported yet ({e}); asking again");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
            Err(e) => {
                debug!(group = %group, "dead-letter records not reported to the group: {e:?}");
                return;
            }
        }
    }
}

/// One attempt: the queue checked as Kafka checks it, the originals read when copied, the
/// records appended.
async fn deliver(
    broker: &Broker,
    group: &GroupId,
    topic: crate::vocab::TopicId,
    partition: i32,
    queue: &DeadLetterQueue,
    letters: &[DeadLetter],
    written: &mut usize,
) -> Result<(), Failure> {
    let name = queue.topic.as_str();
    let prefix = broker
        .config
        .errors_deadletterqueue_topic_name_prefix
        .as_str();
    if name.starts_with("__") {
        return Err(Failure::Refused(format!(
            "Configured DLQ topic name in share group: {group} cannot start with __, topic: {name}."
        )));
    }
    if !prefix.is_empty() && !name.starts_with(prefix) {
        return Err(Failure::Refused(format!(
            "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: \
             {group}, topic: {name}, prefix: {prefix}."
        )));
    }
    let source = broker
        .topics
        .name_of(topic)
        .and_then(|n| broker.topics.get(&n))
        .ok_or_else(|| Failure::Refused(format!("the topic of {topic} is gone")))?;
    let create = broker
        .config
        .errors_deadletterqueue_auto_create_topics_enable
        .then_some(broker.config.num_partitions);
    let partitions = broker
        .backend
        .dead_letter_topic(broker.local(), &broker.topics, name, create)
        .await
        .map_err(|e| match e {
            DeadLetterTopicError::Refused(e) => Failure::Refused(e),
            DeadLetterTopicError::Unavailable(e) => Failure::Failed(e),
        })?;
    if partitions <= 0 {
        return Err(Failure::Refused(format!(
            "DLQ topic {name} has no partitions"
        )));
    }
    let target = broker.topics.get(name).unwrap_or_else(|| Topic {
        name: name.to_string(),
        id: Default::default(),
        partitions,
    });
    let originals = if queue.copy_record {
        read_originals(broker, &source, partition, letters).await
    } else {
        HashMap::new()
    };
    let now = crate::log::now_ms();
    let mut batch: Vec<Record> = Vec::new();
    let mut bytes = 0;
    let offsets = letters
        .iter()
        .flat_map(|d| (d.first..=d.last).map(move |o| (d, o)))
        .skip(*written);
    for (d, offset) in offsets {
        let (key, value) = originals.get(&offset).cloned().unwrap_or_default();
        let record = dead_letter_record(&source.name, partition, offset, group, d, key, value, now);
        let size = record.key.as_ref().map_or(0, Bytes::len)
            + record.value.as_ref().map_or(0, Bytes::len)
            + 200;
        if !batch.is_empty() && bytes + size > BATCH_BYTES {
            *written += append(broker, &target, partition % partitions, &mut batch).await?;
            bytes = 0;
        }
        bytes += size;
        batch.push(record);
    }
    *written += append(broker, &target, partition % partitions, &mut batch).await?;
    Ok(())
}

/// Appends `records` (emptied) as one batch: how many.
async fn append(
    broker: &Broker,
    target: &Topic,
    partition: i32,
    records: &mut Vec<Record>,
) -> Result<usize, Failure> {
    if records.is_empty() {
        return Ok(0);
    }
    let n = records.len();
    // kafka-protocol starts a new batch where offset - sequence changes: sequence follows the
    // offset, from -1 (no producer) for the first record.
    for (i, r) in records.iter_mut().enumerate() {
        r.offset = i as i64;
        r.sequence = i32::try_from(i).unwrap_or(i32::MAX).wrapping_sub(1);
    }
    let batch = crate::log::batch::encode_records(records).map_err(Failure::Refused)?;
    records.clear();
    broker
        .backend
        .append(&broker.logs, target, partition, batch)
        .await
        .map(|()| n)
        .map_err(|e| match e {
            DeadLetterTopicError::Refused(e) => Failure::Refused(e),
            DeadLetterTopicError::Unavailable(e) => Failure::Failed(e),
        })
}

/// One queue record for `offset` of `source`'s `partition`, as Kafka's
/// `ProduceRequestHandler.topicProduceData` makes it.
#[allow(clippy::too_many_arguments)]
fn dead_letter_record(
    source: &str,
    partition: i32,
    offset: i64,
    group: &GroupId,
    d: &DeadLetter,
    key: Option<Bytes>,
    value: Option<Bytes>,
    now: i64,
) -> Record {
    let header = |v: String| Some(Bytes::from(v));
    let mut headers = IndexMap::new();
    headers.insert(
        StrBytes::from_static_str("__dlq.errors.topic"),
        header(source.to_string()),
    );
    headers.insert(
        StrBytes::from_static_str("__dlq.errors.partition"),
        header(partition.to_string()),
    );
    headers.insert(
        StrBytes::from_static_str("__dlq.errors.offset"),
        header(offset.to_string()),
    );
    headers.insert(
        StrBytes::from_static_str("__dlq.errors.group"),
        header(group.as_str().to_string()),
    );
    headers.insert(
        StrBytes::from_static_str("__dlq.errors.delivery.count"),
        header(d.delivery_count.to_string()),
    );
    headers.insert(
        StrBytes::from_static_str("__dlq.errors.message"),
        header(d.cause.message().to_string()),
    );
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: now,
        key,
        value,
        headers,
    }
}

/// The key and value of each offset of `letters` still in `source`'s log (Kafka's
/// `ShareGroupDLQRecordFetcher`); what cannot be read is left out, and its queue record
/// carries the headers only, as in Kafka.
async fn read_originals(
    broker: &Broker,
    source: &Topic,
    partition: i32,
    letters: &[DeadLetter],
) -> HashMap<i64, (Option<Bytes>, Option<Bytes>)> {
    let mut out = HashMap::new();
    let spec = ShareReadSpec {
        max_bytes: 1 << 20,
        reset: AutoOffsetReset::Earliest,
        read_committed: false,
        max_decompressed: broker.config.socket_request_max_bytes,
    };
    for d in letters {
        let mut next = d.first;
        while next <= d.last {
            let read = ShareRead {
                topic: source.clone(),
                partition,
                offset: Some(next),
            };
            let mut results = broker
                .backend
                .read_shared(&broker.logs, vec![read], spec)
                .await;
            let Some(Ok(Some(read))) = results.pop() else {
                break;
            };
            let mut last_seen = None;
            for batch in &read.batches {
                let Ok(records) = crate::log::batch::decode_records(batch) else {
                    continue;
                };
                for r in records {
                    last_seen = Some(r.offset);
                    if (d.first..=d.last).contains(&r.offset) && !r.control {
                        out.insert(r.offset, (r.key, r.value));
                    }
                }
            }
            match last_seen {
                Some(o) if o >= next => next = o + 1,
                _ => break,
            }
        }
    }
    out
}

fn span(first: i64, last: i64) -> u64 {
    u64::try_from(last - first + 1).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Backend, Standalone};
    use crate::config::Config;
    use crate::group::share::partition::DeadCause;
    use crate::metadata::topic_config::TopicConfigs;

    fn record(i: usize, key: &str, value: &str) -> Record {
        let mut r = dead_letter_record(
            "",
            0,
            0,
            &GroupId::new("x"),
            &DeadLetter {
                first: 0,
                last: 0,
                delivery_count: 1,
                cause: DeadCause::Rejected,
            },
            Some(Bytes::from(key.to_string())),
            Some(Bytes::from(value.to_string())),
            0,
        );
        r.headers.clear();
        r.offset = i as i64;
        r.sequence = i as i32 - 1;
        r
    }

    /// Two records of a source partition go to the queue with their key and value copied and
    /// Kafka's headers, to partition `source partition % queue partitions`.
    #[tokio::test]
    async fn records_go_to_the_queue_with_kafkas_headers_and_the_originals() {
        let dir = std::env::temp_dir().join(format!("koord-dlqw-{}", uuid::Uuid::new_v4()));
        let broker = Broker::new(Config {
            data_dir: dir.clone(),
            ..Config::default()
        })
        .unwrap();
        let (source, stored) = broker
            .create_topic("src", 2, TopicConfigs::new())
            .await
            .unwrap();
        stored.unwrap();
        let batch = crate::log::batch::encode_records(&[
            record(0, "k0", "v0"),
            record(1, "k1", "v1"),
            record(2, "k2", "v2"),
        ])
        .unwrap();
        Standalone
            .append(&broker.logs, &source, 1, batch)
            .await
            .unwrap();
        assert_eq!(
            Standalone
                .dead_letter_topic(broker.local(), &broker.topics, "dlq.q", Some(1))
                .await,
            Ok(1)
        );
        let queue = DeadLetterQueue {
            topic: "dlq.q".into(),
            copy_record: true,
        };
        let letters = [DeadLetter {
            first: 1,
            last: 2,
            delivery_count: 2,
            cause: DeadCause::DeliveryLimit,
        }];
        let group = GroupId::new("g");
        let mut written = 0;
        assert!(deliver(
            &broker,
            &group,
            source.id,
            1,
            &queue,
            &letters,
            &mut written
        )
        .await
        .is_ok());
        assert_eq!(written, 2);
        let target = broker.topics.get("dlq.q").unwrap();
        let spec = ShareReadSpec {
            max_bytes: 1 << 20,
            reset: AutoOffsetReset::Earliest,
            read_committed: false,
            max_decompressed: 1 << 20,
        };
        let read = ShareRead {
            topic: target,
            partition: 0,
            offset: Some(0),
        };
        let got = Standalone.read_shared(&broker.logs, vec![read], spec).await;
        let Some(Ok(Some(read))) = got.into_iter().next() else {
            panic!("nothing read");
        };
        let records: Vec<Record> = read
            .batches
            .iter()
            .flat_map(|b| crate::log::batch::decode_records(b).unwrap())
            .collect();
        assert_eq!(records.len(), 2);
        for (r, offset) in records.iter().zip([1, 2]) {
            assert_eq!(r.key.as_deref(), Some(format!("k{offset}").as_bytes()));
            assert_eq!(r.value.as_deref(), Some(format!("v{offset}").as_bytes()));
            let h = |k: &str| {
                let v = r
                    .headers
                    .iter()
                    .find(|(name, _)| name.as_str() == k)
                    .and_then(|(_, v)| v.clone())
                    .unwrap_or_default();
                String::from_utf8(v.to_vec()).unwrap()
            };
            assert_eq!(h("__dlq.errors.topic"), "src");
            assert_eq!(h("__dlq.errors.partition"), "1");
            assert_eq!(h("__dlq.errors.offset"), offset.to_string());
            assert_eq!(h("__dlq.errors.group"), "g");
            assert_eq!(h("__dlq.errors.delivery.count"), "2");
            assert_eq!(
                h("__dlq.errors.message"),
                "Offset delivery count exceeded the threshold."
            );
        }
        // A name without the prefix, or an internal one, is refused before anything is asked.
        for bad in ["q", "__q"] {
            let queue = DeadLetterQueue {
                topic: bad.into(),
                copy_record: false,
            };
            assert!(matches!(
                deliver(&broker, &group, source.id, 1, &queue, &letters, &mut 0).await,
                Err(Failure::Refused(_))
            ));
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
