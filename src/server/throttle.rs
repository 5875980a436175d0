//! Client quotas at the connection ([`crate::quota`]): what a request costs its client, and
//! the throttle its answer then carries. As Kafka's `KafkaApis`: every request's handling time
//! counts against `request_percentage` (the time the handler spent on a thread, not the time
//! it waited); a Produce request's size against `producer_byte_rate`; a Fetch answer's size
//! against `consumer_byte_rate`, its size first capped at what the quota allows in a window,
//! and a throttled Fetch answers no records (they are fetched again after the wait). The
//! answer's `throttle_time_ms` is the larger throttle; the connection then reads nothing more
//! for that long.

use std::future::Future;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, FetchResponse, RequestKind, ResponseKind};

use crate::quota::{request_percentage, Kind, Quotas};

/// Who a request's usage counts against, while any quota is set.
pub(crate) struct Meter {
    user: String,
    client_id: String,
}

impl Meter {
    /// `None` while no quota is set: nothing is measured then.
    pub(crate) fn new(quotas: &Quotas, user: &str, client_id: &str) -> Option<Meter> {
        quotas.active().then(|| Meter {
            user: user.to_string(),
            client_id: client_id.to_string(),
        })
    }

    /// Caps a Fetch request's size at what the consumer quota allows in one window.
    pub(crate) fn cap(&self, quotas: &Quotas, request: &mut RequestKind) {
        if let RequestKind::Fetch(r) = request {
            if let Some(max) = quotas.max_fetch_bytes(&self.user, &self.client_id) {
                r.max_bytes = r.max_bytes.min(max);
            }
        }
    }

    /// The throttle for a request's handling time `busy` and, for Produce, its size `bytes`.
    pub(crate) fn request(
        &self,
        quotas: &Quotas,
        key: ApiKey,
        busy: Duration,
        bytes: usize,
    ) -> u64 {
        let now = quotas.millis(Instant::now());
        let (user, client) = (self.user.as_str(), self.client_id.as_str());
        let time = quotas.record(Kind::Request, user, client, request_percentage(busy), now);
        if key == ApiKey::Produce {
            time.max(quotas.record(Kind::Produce, user, client, bytes as f64, now))
        } else {
            time
        }
    }

    /// The throttle for a Fetch answer of `bytes`, given the request's throttle `so_far`;
    /// throttled, the bytes are taken back (the answer will carry none).
    pub(crate) fn fetched(&self, quotas: &Quotas, bytes: usize, so_far: u64) -> u64 {
        let now = quotas.millis(Instant::now());
        let (user, client) = (self.user.as_str(), self.client_id.as_str());
        let time = quotas
            .record(Kind::Fetch, user, client, bytes as f64, now)
            .max(so_far);
        if time > 0 {
            quotas.unrecord(Kind::Fetch, user, client, bytes as f64, now);
        }
        time
    }
}

/// A throttled Fetch's answer: nothing fetched, no session (koord keeps none).
pub(crate) fn empty_fetch() -> ResponseKind {
    ResponseKind::Fetch(FetchResponse::default())
}

/// Runs `f` and, when `measure`, adds up the time spent in its polls: the time the handler ran
/// on a thread, without the time it waited (a long poll, a group's answer, a write's sync).
pub(crate) async fn busy_time<F: Future>(f: F, measure: bool) -> (F::Output, Duration) {
    let mut f = std::pin::pin!(f);
    let mut busy = Duration::ZERO;
    let out = std::future::poll_fn(|cx| {
        if !measure {
            return f.as_mut().poll(cx);
        }
        let started = Instant::now();
        let polled = f.as_mut().poll(cx);
        busy += started.elapsed();
        polled
    })
    .await;
    (out, busy)
}

/// Sets `throttle_time_ms` in an answer that has one (every API koord serves but
/// WriteTxnMarkers and the SASL exchange).
pub(crate) fn set_throttle(response: &mut ResponseKind, ms: u64) {
    let ms = i32::try_from(ms).unwrap_or(i32::MAX);
    macro_rules! throttled {
        ($($api:ident),* $(,)?) => {
            match response {
                $(ResponseKind::$api(r) => r.throttle_time_ms = ms,)*
                _ => {}
            }
        };
    }
    throttled!(
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        FindCoordinator,
        ApiVersions,
        CreateTopics,
        DeleteTopics,
        CreatePartitions,
        DeleteRecords,
        InitProducerId,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        TxnOffsetCommit,
        OffsetForLeaderEpoch,
        DescribeCluster,
        DescribeTopicPartitions,
        DescribeConfigs,
        AlterConfigs,
        IncrementalAlterConfigs,
        JoinGroup,
        SyncGroup,
        Heartbeat,
        LeaveGroup,
        OffsetCommit,
        OffsetFetch,
        OffsetDelete,
        DescribeGroups,
        ListGroups,
        DeleteGroups,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
        StreamsGroupHeartbeat,
        StreamsGroupDescribe,
        StreamsGroupTopologyDescriptionUpdate,
        ShareGroupHeartbeat,
        ShareGroupDescribe,
        ShareFetch,
        ShareAcknowledge,
        DescribeShareGroupOffsets,
        AlterShareGroupOffsets,
        DeleteShareGroupOffsets,
        DescribeProducers,
        DescribeTransactions,
        ListTransactions,
        DescribeClientQuotas,
        AlterClientQuotas,
        GetTelemetrySubscriptions,
        PushTelemetry,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SUPPORTED;
    use kafka_protocol::messages::ApiVersionsResponse;

    #[test]
    fn busy_time_leaves_out_waits() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let (_, busy) = rt.block_on(async {
            busy_time(tokio::time::sleep(Duration::from_millis(50)), true).await
        });
        assert!(busy < Duration::from_millis(50), "{busy:?}");
        let (_, none) = rt.block_on(busy_time(async {}, false));
        assert_eq!(none, Duration::ZERO);
    }

    #[test]
    fn throttle_is_set_where_the_answer_has_one() {
        let mut r = ResponseKind::ApiVersions(ApiVersionsResponse::default());
        set_throttle(&mut r, 1234);
        assert!(matches!(r, ResponseKind::ApiVersions(ref a) if a.throttle_time_ms == 1234));
        let mut r = empty_fetch();
        set_throttle(&mut r, u64::MAX);
        assert!(matches!(r, ResponseKind::Fetch(ref f) if f.throttle_time_ms == i32::MAX));
        // Every API served is listed, or has no throttle field.
        let without = [
            ApiKey::WriteTxnMarkers,
            ApiKey::SaslHandshake,
            ApiKey::SaslAuthenticate,
        ];
        assert_eq!(SUPPORTED.len(), 55 + without.len());
    }
}
