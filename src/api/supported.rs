//! THE table of supported APIs and version ranges. The same table builds the ApiVersions
//! response, so nothing is advertised that is not served and nothing is served that is not
//! advertised; the server decodes only what it serves ([`super::dispatch`]).

use kafka_protocol::messages::ApiKey;

/// One supported API: its key and the versions served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Supported {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
}

const fn api(key: ApiKey, min: i16, max: i16) -> Supported {
    Supported { key, min, max }
}

/// Every API koord serves, with the versions Apache Kafka 4.x accepts (as far as the
/// kafka-protocol crate encodes them).
pub const SUPPORTED: &[Supported] = &[
    api(ApiKey::Produce, 3, 13),
    api(ApiKey::Fetch, 4, 18),
    api(ApiKey::ListOffsets, 1, 11),
    api(ApiKey::Metadata, 0, 13),
    api(ApiKey::FindCoordinator, 0, 6),
    api(ApiKey::ApiVersions, 0, 5),
    api(ApiKey::CreateTopics, 2, 7),
    api(ApiKey::DeleteTopics, 1, 6),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::DeleteRecords, 0, 2),
    api(ApiKey::InitProducerId, 0, 5),
    api(ApiKey::AddPartitionsToTxn, 0, 5),
    api(ApiKey::AddOffsetsToTxn, 0, 4),
    api(ApiKey::EndTxn, 0, 5),
    api(ApiKey::TxnOffsetCommit, 0, 6),
    api(ApiKey::WriteTxnMarkers, 1, 2),
    api(ApiKey::OffsetForLeaderEpoch, 2, 4),
    api(ApiKey::DescribeCluster, 0, 2),
    api(ApiKey::DescribeTopicPartitions, 0, 0),
    api(ApiKey::DescribeConfigs, 1, 4),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    api(ApiKey::JoinGroup, 0, 9),
    api(ApiKey::SyncGroup, 0, 5),
    api(ApiKey::Heartbeat, 0, 4),
    api(ApiKey::LeaveGroup, 0, 5),
    api(ApiKey::OffsetCommit, 2, 10),
    api(ApiKey::OffsetFetch, 1, 10),
    api(ApiKey::OffsetDelete, 0, 0),
    api(ApiKey::DescribeGroups, 0, 6),
    api(ApiKey::ListGroups, 0, 5),
    api(ApiKey::DeleteGroups, 0, 3),
    api(ApiKey::ConsumerGroupHeartbeat, 0, 1),
    api(ApiKey::ConsumerGroupDescribe, 0, 1),
    api(ApiKey::StreamsGroupHeartbeat, 0, 1),
    api(ApiKey::StreamsGroupDescribe, 0, 1),
    api(ApiKey::StreamsGroupTopologyDescriptionUpdate, 0, 0),
    api(ApiKey::ShareGroupHeartbeat, 1, 1),
    api(ApiKey::ShareGroupDescribe, 1, 1),
    api(ApiKey::ShareFetch, 1, 2),
    api(ApiKey::ShareAcknowledge, 1, 2),
    api(ApiKey::DescribeShareGroupOffsets, 0, 1),
    api(ApiKey::AlterShareGroupOffsets, 0, 0),
    api(ApiKey::DeleteShareGroupOffsets, 0, 0),
    // Transaction admin, Kafka 4.4's full ranges.
    api(ApiKey::DescribeProducers, 0, 0),
    api(ApiKey::DescribeTransactions, 0, 0),
    api(ApiKey::ListTransactions, 0, 2),
    // Answered by the connection's session (src/security/session.rs), on every listener as
    // Kafka advertises them: ILLEGAL_SASL_STATE where there is nothing to authenticate.
    api(ApiKey::SaslHandshake, 0, 1),
    api(ApiKey::SaslAuthenticate, 0, 2),
    // Client telemetry (KIP-714): Kafka 4.4 with a telemetry receiver configured.
    api(ApiKey::GetTelemetrySubscriptions, 0, 0),
    api(ApiKey::PushTelemetry, 0, 0),
    api(ApiKey::DescribeClientQuotas, 0, 1),
    api(ApiKey::AlterClientQuotas, 0, 1),
    api(ApiKey::DescribeUserScramCredentials, 0, 0),
    api(ApiKey::AlterUserScramCredentials, 0, 0),
    api(ApiKey::DescribeAcls, 1, 3),
    api(ApiKey::CreateAcls, 1, 3),
    api(ApiKey::DeleteAcls, 1, 3),
];

/// The served range for `key`, if it is served at all.
pub fn supported(key: ApiKey) -> Option<Supported> {
    SUPPORTED.iter().copied().find(|s| s.key == key)
}

/// Whether `version` of `key` is served.
pub fn is_supported(key: ApiKey, version: i16) -> bool {
    supported(key).is_some_and(|s| (s.min..=s.max).contains(&version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_within_what_the_crate_encodes() {
        for s in SUPPORTED {
            let crate_range = s.key.valid_versions();
            assert!(
                crate_range.min <= s.min && s.max <= crate_range.max && s.min <= s.max,
                "{:?} {}..={} outside the crate's {}..={}",
                s.key,
                s.min,
                s.max,
                crate_range.min,
                crate_range.max
            );
        }
    }

    #[test]
    fn table_has_no_duplicates() {
        for (i, a) in SUPPORTED.iter().enumerate() {
            assert!(
                SUPPORTED[i + 1..].iter().all(|b| b.key != a.key),
                "{:?}",
                a.key
            );
        }
    }
}
