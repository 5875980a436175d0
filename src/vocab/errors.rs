//! [`GroupError`]: every failure the group core can answer with, one variant per Kafka error code.

use thiserror::Error;

/// A Kafka-level group error. Each variant is exactly one Kafka error code ([`GroupError::code`]);
/// `api/` turns it into the response's `ErrorCode` field without any further mapping.
///
/// These are answers to peers, not bugs: they never close a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
pub enum GroupError {
    /// -1: a storage failure that maps to nothing better (Kafka's append-error remap).
    #[error("UNKNOWN_SERVER_ERROR")]
    UnknownServerError,
    /// 3
    #[error("UNKNOWN_TOPIC_OR_PARTITION")]
    UnknownTopicOrPartition,
    /// 12: committed metadata longer than `offset.metadata.max.bytes` (per partition).
    #[error("OFFSET_METADATA_TOO_LARGE")]
    OffsetMetadataTooLarge,
    /// 14
    #[error("COORDINATOR_LOAD_IN_PROGRESS")]
    CoordinatorLoadInProgress,
    /// 15: the group is Dead (unloaded or deleted under the request's feet).
    #[error("COORDINATOR_NOT_AVAILABLE")]
    CoordinatorNotAvailable,
    /// 16: parked requests answered when the group is unloaded.
    #[error("NOT_COORDINATOR")]
    NotCoordinator,
    /// 22
    #[error("ILLEGAL_GENERATION")]
    IllegalGeneration,
    /// 23
    #[error("INCONSISTENT_GROUP_PROTOCOL")]
    InconsistentGroupProtocol,
    /// 24
    #[error("INVALID_GROUP_ID")]
    InvalidGroupId,
    /// 25
    #[error("UNKNOWN_MEMBER_ID")]
    UnknownMemberId,
    /// 26
    #[error("INVALID_SESSION_TIMEOUT")]
    InvalidSessionTimeout,
    /// 27
    #[error("REBALANCE_IN_PROGRESS")]
    RebalanceInProgress,
    /// 29: the principal may not use a topic (the authorizer; never the group core).
    #[error("TOPIC_AUTHORIZATION_FAILED")]
    TopicAuthorizationFailed,
    /// 30: the principal may not use a group (the authorizer; never the group core).
    #[error("GROUP_AUTHORIZATION_FAILED")]
    GroupAuthorizationFailed,
    /// 35
    #[error("UNSUPPORTED_VERSION")]
    UnsupportedVersion,
    /// 42
    #[error("INVALID_REQUEST")]
    InvalidRequest,
    /// 47: a transactional offset commit from an epoch a transaction marker has fenced.
    #[error("INVALID_PRODUCER_EPOCH")]
    InvalidProducerEpoch,
    /// 68
    #[error("NON_EMPTY_GROUP")]
    NonEmptyGroup,
    /// 69
    #[error("GROUP_ID_NOT_FOUND")]
    GroupIdNotFound,
    /// 79: KIP-394, the reply carries the member id to rejoin with.
    #[error("MEMBER_ID_REQUIRED")]
    MemberIdRequired,
    /// 81
    #[error("GROUP_MAX_SIZE_REACHED")]
    GroupMaxSizeReached,
    /// 82: a static member's instance id is now owned by another member id.
    #[error("FENCED_INSTANCE_ID")]
    FencedInstanceId,
    /// 86
    #[error("GROUP_SUBSCRIBED_TO_TOPIC")]
    GroupSubscribedToTopic,
    /// 88
    #[error("UNSTABLE_OFFSET_COMMIT")]
    UnstableOffsetCommit,
    /// 100: a topic named by an id no topic has (OffsetCommit v10+, OffsetFetch v10+,
    /// TxnOffsetCommit v6+).
    #[error("UNKNOWN_TOPIC_ID")]
    UnknownTopicId,
    /// 110: a consumer-group member's epoch is not the coordinator's; it must rejoin.
    #[error("FENCED_MEMBER_EPOCH")]
    FencedMemberEpoch,
    /// 111: a static member's instance id is held by a member that has not left.
    #[error("UNRELEASED_INSTANCE_ID")]
    UnreleasedInstanceId,
    /// 112
    #[error("UNSUPPORTED_ASSIGNOR")]
    UnsupportedAssignor,
    /// 113: an offset commit or fetch at an epoch that is not the member's current one.
    #[error("STALE_MEMBER_EPOCH")]
    StaleMemberEpoch,
    /// 121: a share-group acknowledgement of records the member does not hold acquired.
    #[error("INVALID_RECORD_STATE")]
    InvalidRecordState,
    /// 122: a ShareFetch or ShareAcknowledge names a share session that does not exist.
    #[error("SHARE_SESSION_NOT_FOUND")]
    ShareSessionNotFound,
    /// 123: a share session's epoch is not the one expected.
    #[error("INVALID_SHARE_SESSION_EPOCH")]
    InvalidShareSessionEpoch,
    /// 128
    #[error("INVALID_REGULAR_EXPRESSION")]
    InvalidRegularExpression,
    /// 130: a streams group member sent a topology that cannot be right.
    #[error("STREAMS_INVALID_TOPOLOGY")]
    StreamsInvalidTopology,
}

impl GroupError {
    /// Every variant, for tests and for `from_code`.
    pub const ALL: [GroupError; 34] = [
        GroupError::UnknownServerError,
        GroupError::UnknownTopicOrPartition,
        GroupError::OffsetMetadataTooLarge,
        GroupError::CoordinatorLoadInProgress,
        GroupError::CoordinatorNotAvailable,
        GroupError::NotCoordinator,
        GroupError::IllegalGeneration,
        GroupError::InconsistentGroupProtocol,
        GroupError::InvalidGroupId,
        GroupError::UnknownMemberId,
        GroupError::InvalidSessionTimeout,
        GroupError::RebalanceInProgress,
        GroupError::TopicAuthorizationFailed,
        GroupError::GroupAuthorizationFailed,
        GroupError::UnsupportedVersion,
        GroupError::InvalidRequest,
        GroupError::InvalidProducerEpoch,
        GroupError::NonEmptyGroup,
        GroupError::GroupIdNotFound,
        GroupError::MemberIdRequired,
        GroupError::GroupMaxSizeReached,
        GroupError::FencedInstanceId,
        GroupError::GroupSubscribedToTopic,
        GroupError::UnstableOffsetCommit,
        GroupError::UnknownTopicId,
        GroupError::FencedMemberEpoch,
        GroupError::UnreleasedInstanceId,
        GroupError::UnsupportedAssignor,
        GroupError::StaleMemberEpoch,
        GroupError::InvalidRecordState,
        GroupError::ShareSessionNotFound,
        GroupError::InvalidShareSessionEpoch,
        GroupError::InvalidRegularExpression,
        GroupError::StreamsInvalidTopology,
    ];

    /// The Kafka error code (clients/.../common/protocol/Errors.java).
    pub fn code(self) -> i16 {
        match self {
            GroupError::UnknownServerError => -1,
            GroupError::UnknownTopicOrPartition => 3,
            GroupError::OffsetMetadataTooLarge => 12,
            GroupError::CoordinatorLoadInProgress => 14,
            GroupError::CoordinatorNotAvailable => 15,
            GroupError::NotCoordinator => 16,
            GroupError::IllegalGeneration => 22,
            GroupError::InconsistentGroupProtocol => 23,
            GroupError::InvalidGroupId => 24,
            GroupError::UnknownMemberId => 25,
            GroupError::InvalidSessionTimeout => 26,
            GroupError::RebalanceInProgress => 27,
            GroupError::TopicAuthorizationFailed => 29,
            GroupError::GroupAuthorizationFailed => 30,
            GroupError::UnsupportedVersion => 35,
            GroupError::InvalidRequest => 42,
            GroupError::InvalidProducerEpoch => 47,
            GroupError::NonEmptyGroup => 68,
            GroupError::GroupIdNotFound => 69,
            GroupError::MemberIdRequired => 79,
            GroupError::GroupMaxSizeReached => 81,
            GroupError::FencedInstanceId => 82,
            GroupError::GroupSubscribedToTopic => 86,
            GroupError::UnstableOffsetCommit => 88,
            GroupError::UnknownTopicId => 100,
            GroupError::FencedMemberEpoch => 110,
            GroupError::UnreleasedInstanceId => 111,
            GroupError::UnsupportedAssignor => 112,
            GroupError::StaleMemberEpoch => 113,
            GroupError::InvalidRecordState => 121,
            GroupError::ShareSessionNotFound => 122,
            GroupError::InvalidShareSessionEpoch => 123,
            GroupError::InvalidRegularExpression => 128,
            GroupError::StreamsInvalidTopology => 130,
        }
    }

    /// The variant for a Kafka error code, if the group core uses it.
    pub fn from_code(code: i16) -> Option<GroupError> {
        GroupError::ALL.into_iter().find(|e| e.code() == code)
    }
}

/// The error code of an optional error: 0 (NONE) when there is none.
pub fn error_code(error: Option<GroupError>) -> i16 {
    error.map_or(0, GroupError::code)
}

/// Kafka's own wording of an error code (`Errors.message()`), for the answers whose
/// `ErrorMessage` Kafka fills with it; `None` for a code not listed here.
pub fn kafka_message(code: i16) -> Option<&'static str> {
    Some(match code {
        -1 => "The server experienced an unexpected error when processing the request.",
        3 => "This server does not host this topic-partition.",
        14 => "The coordinator is loading and hence can't process requests.",
        15 => "The coordinator is not available.",
        16 => "This is not the correct coordinator.",
        24 => "The group id is invalid.",
        29 => "Topic authorization failed.",
        30 => "Group authorization failed.",
        68 => "The group is not empty.",
        69 => "The group id does not exist.",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_kafka_and_round_trip() {
        assert_eq!(GroupError::UnknownMemberId.code(), 25);
        assert_eq!(GroupError::MemberIdRequired.code(), 79);
        assert_eq!(GroupError::FencedInstanceId.code(), 82);
        assert_eq!(error_code(None), 0);
        for e in GroupError::ALL {
            assert_eq!(GroupError::from_code(e.code()), Some(e));
        }
        assert_eq!(GroupError::from_code(0), None);
    }
}
