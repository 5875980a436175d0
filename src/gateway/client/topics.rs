//! The operations on topics upstream: CreateTopics (a client's topic, and koord's compacted
//! one), and reading koord's topic back (ListOffsets for each partition's bounds, then Fetch).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, DescribeConfigsRequest, FetchRequest, ListOffsetsRequest,
    MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use kafka_protocol::ResponseError;
use tracing::{debug, info};

use super::{retriable, KeyValue, Upstream, UpstreamError, MAX_BACKOFF, STARTUP};

/// Largest answer asked of one Fetch while reading koord's topic back.
const FETCH_MAX_BYTES: i32 = 16 << 20;

impl Upstream {
    /// Creates `topic` upstream with `partitions`, `replication` (-1: upstream's default) and
    /// `configs`; the topic as upstream made it (for koord's mirror of upstream's topics), or
    /// `None` if it existed already.
    ///
    /// # Errors
    /// Upstream refused it (or could not be reached).
    pub async fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        replication: i16,
        configs: &[(String, String)],
    ) -> Result<Option<crate::metadata::Topic>, UpstreamError> {
        let req = CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_num_partitions(partitions)
                .with_replication_factor(replication)
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(StrBytes::from_string(k.clone()))
                                .with_value(Some(StrBytes::from_string(v.clone())))
                        })
                        .collect(),
                )]);
        let deadline = tokio::time::Instant::now() + self.retry_for;
        let mut backoff = Duration::from_millis(50);
        loop {
            let created = async {
                let resp = self.call_any(5, &req).await?;
                let t = resp
                    .topics
                    .first()
                    .ok_or_else(|| UpstreamError::Protocol("CreateTopics: no result".into()))?;
                match t.error_code {
                    0 => Ok(Some(crate::metadata::Topic {
                        name: topic.to_string(),
                        id: t.topic_id,
                        partitions: t.num_partitions,
                    })),
                    c if c == ResponseError::TopicAlreadyExists.code() => Ok(None),
                    c => Err(UpstreamError::refused(c, format!("CreateTopics {topic}"))),
                }
            }
            .await;
            match created {
                // The controller moving, or a broker not reachable: asked again.
                Err(e)
                    if e.is_unavailable() && tokio::time::Instant::now() + backoff < deadline =>
                {
                    debug!(topic, error = %e, "upstream CreateTopics: retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                other => return other,
            }
        }
    }

    /// `topic`'s partition count upstream and its config `key`: `None` when the topic does not
    /// exist; the value `None` when upstream does not know the config (an older Kafka).
    ///
    /// # Errors
    /// Upstream could not be asked, or refused.
    pub async fn topic_config(
        &self,
        topic: &str,
        key: &str,
    ) -> Result<Option<(i32, Option<String>)>, UpstreamError> {
        let name = TopicName(StrBytes::from_string(topic.to_string()));
        let md = MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name))
            ]))
            .with_allow_auto_topic_creation(false);
        let md = self.call_any(12, &md).await?;
        let Some(t) = md.topics.first() else {
            return Err(UpstreamError::Protocol("Metadata: no topic".into()));
        };
        match t.error_code {
            0 => {}
            c if c == ResponseError::UnknownTopicOrPartition.code() => return Ok(None),
            c => return Err(UpstreamError::refused(c, format!("Metadata {topic}"))),
        }
        let partitions = i32::try_from(t.partitions.len()).unwrap_or(i32::MAX);
        self.refresh(&[topic]).await?;
        let req = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_string(topic.to_string()))
                .with_configuration_keys(Some(vec![StrBytes::from_string(key.to_string())])),
        ]);
        let resp = self.call_any(4, &req).await?;
        let Some(r) = resp.results.first() else {
            return Err(UpstreamError::Protocol("DescribeConfigs: no result".into()));
        };
        if r.error_code != 0 {
            return Err(UpstreamError::refused(
                r.error_code,
                format!("DescribeConfigs {topic}"),
            ));
        }
        let value = r
            .configs
            .iter()
            .find(|c| c.name.as_str() == key)
            .map(|c| c.value.as_ref().map_or(String::new(), |v| v.to_string()));
        Ok(Some((partitions, value)))
    }

    /// Creates `topic` (compacted, `partitions`, upstream's default replication) unless it
    /// exists, and waits until every partition has a leader.
    ///
    /// # Errors
    /// Upstream refused the topic, or not every partition had a leader by the deadline.
    pub async fn ensure_compacted_topic(
        &self,
        topic: &str,
        partitions: i32,
    ) -> Result<i32, UpstreamError> {
        let deadline = tokio::time::Instant::now() + STARTUP;
        let req = CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_num_partitions(partitions)
                .with_replication_factor(-1)
                .with_configs(vec![CreatableTopicConfig::default()
                    .with_name(StrBytes::from_static_str("cleanup.policy"))
                    .with_value(Some(StrBytes::from_static_str("compact")))])]);
        loop {
            let created = self.call_any(5, &req).await;
            let code = match &created {
                Ok(r) => r.topics.first().map_or(0, |t| t.error_code),
                Err(_) => -1,
            };
            if code == 0 {
                info!(topic, partitions, "created koord's group topic upstream");
            }
            let done = code == 0 || code == ResponseError::TopicAlreadyExists.code();
            if !done && code >= 0 && !retriable(code) {
                return Err(UpstreamError::refused(
                    code,
                    format!("CreateTopics {topic}"),
                ));
            }
            if done {
                self.refresh(&[topic]).await?;
                let leaders = self.leaders.read().unwrap_or_else(|e| e.into_inner());
                let count = leaders.keys().filter(|(t, _)| t == topic).count() as i32;
                let all_led =
                    count > 0 && (0..count).all(|p| leaders.contains_key(&(topic.to_string(), p)));
                if all_led {
                    return Ok(count);
                }
            }
            if tokio::time::Instant::now() > deadline {
                return Err(match created {
                    Err(e) => e,
                    Ok(_) => {
                        UpstreamError::Unreachable(format!("{topic}: partitions without a leader"))
                    }
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Every record of `topic` (its `partitions`), from each partition's start to its end as
    /// of now, in offset order per partition.
    ///
    /// # Errors
    /// A partition could not be read by the deadline.
    pub async fn read_topic(
        &self,
        topic: &str,
        partitions: i32,
    ) -> Result<BTreeMap<i32, Vec<KeyValue>>, UpstreamError> {
        let all: Vec<i32> = (0..partitions).collect();
        self.read_partitions(topic, &all).await
    }

    /// [`Upstream::read_topic`] of `partitions` only.
    ///
    /// # Errors
    /// A partition could not be read by the deadline.
    pub async fn read_partitions(
        &self,
        topic: &str,
        partitions: &[i32],
    ) -> Result<BTreeMap<i32, Vec<KeyValue>>, UpstreamError> {
        let mut out: BTreeMap<i32, Vec<KeyValue>> = BTreeMap::new();
        // Partition -> (next offset to read, end offset).
        let mut todo: BTreeMap<i32, Option<(i64, i64)>> =
            partitions.iter().map(|p| (*p, None)).collect();
        let deadline = tokio::time::Instant::now() + STARTUP;
        let mut last = UpstreamError::Unreachable("no attempt".into());
        self.refresh(&[topic]).await.ok();
        while !todo.is_empty() {
            let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
            for p in todo.keys() {
                if let Some(l) = self.leader(topic, *p) {
                    by_leader.entry(l).or_default().push(*p);
                }
            }
            let mut progressed = false;
            for (leader, ps) in by_leader {
                // Where each partition starts and ends, for those not yet known.
                let unknown: Vec<i32> = ps.iter().copied().filter(|p| todo[p].is_none()).collect();
                if !unknown.is_empty() {
                    match self.bounds(leader, topic, &unknown).await {
                        Ok(bounds) => {
                            for (p, b) in bounds {
                                todo.insert(p, Some(b));
                                progressed = true;
                            }
                        }
                        Err(e) => last = e,
                    }
                }
                let reading: Vec<(i32, i64)> = ps
                    .iter()
                    .filter_map(|p| match todo[p] {
                        Some((next, end)) if next < end => Some((*p, next)),
                        _ => None,
                    })
                    .collect();
                if reading.is_empty() {
                    continue;
                }
                match self.fetch(leader, topic, &reading).await {
                    Ok(fetched) => {
                        for (p, records, next) in fetched {
                            if let Some(Some((at, _))) = todo.get_mut(&p) {
                                if next > *at {
                                    *at = next;
                                    progressed = true;
                                }
                            }
                            out.entry(p).or_default().extend(records);
                        }
                    }
                    Err(e) => last = e,
                }
            }
            todo.retain(|_, b| !matches!(*b, Some((next, end)) if next >= end));
            if todo.is_empty() {
                break;
            }
            if !progressed {
                if tokio::time::Instant::now() > deadline {
                    return Err(last);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                self.refresh(&[topic]).await.ok();
            }
        }
        Ok(out)
    }

    /// Each partition's (log start, high watermark) from its leader.
    async fn bounds(
        &self,
        leader: i32,
        topic: &str,
        partitions: &[i32],
    ) -> Result<Vec<(i32, (i64, i64))>, UpstreamError> {
        let ask = |timestamp: i64| {
            ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_partitions(
                        partitions
                            .iter()
                            .map(|p| {
                                ListOffsetsPartition::default()
                                    .with_partition_index(*p)
                                    .with_current_leader_epoch(-1)
                                    .with_timestamp(timestamp)
                            })
                            .collect(),
                    )])
        };
        let read = |resp: kafka_protocol::messages::ListOffsetsResponse| {
            let mut m = HashMap::new();
            for t in resp.topics {
                for p in t.partitions {
                    if p.error_code != 0 {
                        return Err(UpstreamError::refused(p.error_code, "ListOffsets"));
                    }
                    m.insert(p.partition_index, p.offset);
                }
            }
            Ok(m)
        };
        let earliest = read(self.call(leader, 7, &ask(-2)).await?)?;
        let latest = read(self.call(leader, 7, &ask(-1)).await?)?;
        Ok(partitions
            .iter()
            .filter_map(|p| Some((*p, (*earliest.get(p)?, *latest.get(p)?))))
            .collect())
    }

    /// One Fetch from `leader` of `partitions` (partition, offset): each partition's records
    /// and the offset to read next.
    async fn fetch(
        &self,
        leader: i32,
        topic: &str,
        partitions: &[(i32, i64)],
    ) -> Result<Vec<(i32, Vec<KeyValue>, i64)>, UpstreamError> {
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(FETCH_MAX_BYTES)
            .with_isolation_level(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|(p, offset)| {
                            FetchPartition::default()
                                .with_partition(*p)
                                .with_current_leader_epoch(-1)
                                .with_fetch_offset(*offset)
                                .with_log_start_offset(-1)
                                .with_partition_max_bytes(FETCH_MAX_BYTES)
                        })
                        .collect(),
                )]);
        let resp = self.call(leader, 12, &req).await?;
        if resp.error_code != 0 {
            return Err(UpstreamError::refused(resp.error_code, "Fetch"));
        }
        let mut out = Vec::new();
        for t in resp.responses {
            for p in t.partitions {
                let from = partitions
                    .iter()
                    .find(|(q, _)| *q == p.partition_index)
                    .map_or(0, |(_, o)| *o);
                if p.error_code != 0 {
                    if retriable(p.error_code) {
                        continue;
                    }
                    return Err(UpstreamError::refused(p.error_code, "Fetch"));
                }
                let (records, next) = decode_batches(p.records.unwrap_or_default(), from)?;
                out.push((p.partition_index, records, next));
            }
        }
        Ok(out)
    }
}

/// The records of every whole batch in `data` (a Fetch answer may end in a partial one) at
/// or after `from`, and the offset after the last batch read (`from` if none).
pub(super) fn decode_batches(
    mut data: Bytes,
    from: i64,
) -> Result<(Vec<KeyValue>, i64), UpstreamError> {
    // Batch header: base offset (8), batch length (4) counting what follows it.
    const LENGTH_END: usize = 12;
    // Then leader epoch (4), magic (1), crc (4), attributes (2), last offset delta (4).
    const LAST_DELTA_AT: usize = 23;
    let mut out = Vec::new();
    let mut next = from;
    while data.len() >= LENGTH_END {
        let base = i64::from_be_bytes(data[..8].try_into().unwrap_or_default());
        let len = i32::from_be_bytes(data[8..12].try_into().unwrap_or_default());
        let Ok(len) = usize::try_from(len) else {
            return Err(UpstreamError::Protocol("negative batch length".into()));
        };
        let total = LENGTH_END + len;
        if data.len() < total {
            break;
        }
        let mut batch = data.split_to(total);
        // The batch's last offset, from its header: compaction may have removed the records
        // at its end, never the batch's place.
        let last_delta = batch
            .get(LAST_DELTA_AT..LAST_DELTA_AT + 4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| UpstreamError::Protocol(format!("batch at {base}: short header")))?;
        let last = base.saturating_add(i64::from(last_delta));
        let set = RecordBatchDecoder::decode(&mut batch)
            .map_err(|e| UpstreamError::Protocol(format!("batch at {base}: {e}")))?;
        for r in set.records {
            if r.control || r.offset < from {
                continue;
            }
            if let Some(k) = r.key {
                out.push((k, r.value));
            }
        }
        next = next.max(last + 1);
    }
    Ok((out, next))
}

#[cfg(test)]
mod tests {
    use super::super::encode_batch;
    use super::*;
    use bytes::BytesMut;

    #[test]
    fn batches_decode_back_and_a_partial_trailing_batch_waits() {
        let a = encode_batch(
            &[
                (Bytes::from_static(b"k1"), Some(Bytes::from_static(b"v1"))),
                (Bytes::from_static(b"k2"), None),
            ],
            None,
        )
        .unwrap();
        let mut data = BytesMut::new();
        data.extend_from_slice(&a);
        // A second batch at offset 2, cut short.
        let mut b =
            BytesMut::from(&encode_batch(&[(Bytes::from_static(b"k3"), None)], None).unwrap()[..]);
        b[..8].copy_from_slice(&2i64.to_be_bytes());
        data.extend_from_slice(&b[..b.len() - 3]);
        let (records, next) = decode_batches(data.freeze(), 0).unwrap();
        assert_eq!(
            records,
            vec![
                (Bytes::from_static(b"k1"), Some(Bytes::from_static(b"v1"))),
                (Bytes::from_static(b"k2"), None),
            ]
        );
        assert_eq!(next, 2, "the partial batch is read again from its start");
    }

    #[test]
    fn records_before_the_fetch_offset_are_skipped() {
        let a = encode_batch(
            &[
                (Bytes::from_static(b"k1"), Some(Bytes::from_static(b"v1"))),
                (Bytes::from_static(b"k2"), Some(Bytes::from_static(b"v2"))),
            ],
            None,
        )
        .unwrap();
        let (records, next) = decode_batches(a, 1).unwrap();
        assert_eq!(
            records,
            vec![(Bytes::from_static(b"k2"), Some(Bytes::from_static(b"v2")))]
        );
        assert_eq!(next, 2);
    }

    #[test]
    fn garbage_is_a_protocol_error_not_a_panic() {
        let mut junk = BytesMut::new();
        junk.extend_from_slice(&0i64.to_be_bytes());
        junk.extend_from_slice(&20i32.to_be_bytes());
        junk.extend_from_slice(&[0xff; 20]);
        assert!(decode_batches(junk.freeze(), 0).is_err());
        let mut negative = BytesMut::new();
        negative.extend_from_slice(&0i64.to_be_bytes());
        negative.extend_from_slice(&(-5i32).to_be_bytes());
        assert!(decode_batches(negative.freeze(), 0).is_err());
    }
}
