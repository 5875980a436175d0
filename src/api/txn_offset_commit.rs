//! TxnOffsetCommit (key 28), v0-6: a transactional producer commits a group's offsets inside
//! its transaction (KIP-98; KIP-447 adds the member, instance and generation in v3 so that a
//! zombie of an old generation is fenced). The offsets stay pending until the transaction's
//! marker: OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT for them meanwhile,
//! and they become committed offsets only if the transaction commits.
//!
//! Checks, in Kafka's order: an empty group id is INVALID_GROUP_ID and an unknown topic or
//! partition UNKNOWN_TOPIC_OR_PARTITION (per partition); the producer must be in an open
//! transaction that added the group (AddOffsetsToTxn; KIP-890's verification); then the group
//! checks the committer as for a transactional commit, and each partition's metadata size.
//! v5 is transaction version 2: the commit adds the group to the transaction itself (opening
//! it if need be), where v0-4 need AddOffsetsToTxn first. v6 (KIP-1319) names topics by id
//! (an unknown one: UNKNOWN_TOPIC_ID) and lets the group answer GROUP_ID_NOT_FOUND and
//! STALE_MEMBER_EPOCH where older versions get ILLEGAL_GENERATION.

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::ResponseError;

use super::check_group_id;
use super::context::RequestContext;
use super::offset_commit::{name_by_id, Committed};
use super::reply::PartitionReplies;
use crate::backend::TxnCommitRefused;
use crate::broker::Broker;
use crate::coordinator::TxnOffsetCommit;
use crate::group::{Generation, MemberId, OffsetCommitAuth};
use crate::security::acl::{Operation, ResourceType};
use crate::transactions::ShellError;
use crate::txn::TxnError;

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    mut req: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    // As Kafka: WRITE on the transactional id, then READ on the group, each failing every
    // partition; then READ on each topic.
    let refused_whole = if !ctx.may(
        broker,
        Operation::Write,
        ResourceType::TransactionalId,
        &req.transactional_id,
    ) {
        Some(ResponseError::TransactionalIdAuthorizationFailed.code())
    } else if !ctx.may(broker, Operation::Read, ResourceType::Group, &req.group_id) {
        Some(ResponseError::GroupAuthorizationFailed.code())
    } else {
        None
    };
    if let Some(code) = refused_whole {
        return failed(req, code);
    }
    let by_id = version >= 6;
    if by_id {
        for t in &mut req.topics {
            name_by_id(broker, t.topic_id, &mut t.name);
        }
    }
    let group = check_group_id(&req.group_id);
    let mut replies = PartitionReplies::new();
    for topic in &req.topics {
        let readable = ctx.may(broker, Operation::Read, ResourceType::Topic, &topic.name);
        let mut reply = replies.topic();
        for p in &topic.partitions {
            let commit = Committed {
                topic: topic.name.as_str(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: if version >= 2 {
                    p.committed_leader_epoch
                } else {
                    -1
                },
                metadata: &p.committed_metadata,
            };
            commit.check(broker, &group, by_id, readable, &mut reply);
        }
    }
    let partitions = replies.take_items();
    let mut refused = None;
    if let (Ok(group), false) = (group, partitions.is_empty()) {
        let commit = TxnOffsetCommit {
            auth: OffsetCommitAuth {
                member_id: MemberId::new(req.member_id.as_str()),
                instance_id: super::instance_id(&req.group_instance_id),
                generation: Generation(req.generation_id_or_member_epoch),
                transactional: true,
            },
            producer_id: req.producer_id.0,
            producer_epoch: req.producer_epoch,
            partitions,
            api_version: version,
            validate_only: false,
        };
        match broker
            .backend
            .commit_txn_offsets(broker.local(), group, commit, &req, version)
            .await
        {
            Ok(results) => replies.answer_codes(results.into_iter().map(|(_, code)| code)),
            Err(TxnCommitRefused::Producer(e)) => refused = Some(verify_error(&e, version)),
            Err(TxnCommitRefused::Group(code)) => refused = Some(code),
        }
    }
    let topics = replies.into_topics(
        req.topics.into_iter().map(|t| (t.name, t.topic_id)),
        |(name, id), partitions| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(name)
                .with_topic_id(id)
                .with_partitions(partitions)
        },
        |index, code| {
            TxnOffsetCommitResponsePartition::default()
                .with_partition_index(index)
                .with_error_code(code)
        },
    );
    let mut resp = TxnOffsetCommitResponse::default().with_topics(topics);
    if let Some(code) = refused {
        // A refusal of the whole request: every partition that reached the check gets it.
        for topic in &mut resp.topics {
            for p in &mut topic.partitions {
                if p.error_code == 0 {
                    p.error_code = code;
                }
            }
        }
    }
    resp
}

/// Every partition of the request failed with `code`.
fn failed(req: TxnOffsetCommitRequest, code: i16) -> TxnOffsetCommitResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// The code for a producer that may not commit offsets to the group now.
fn verify_error(e: &ShellError, version: i16) -> i16 {
    let code = match e {
        ShellError::Txn(TxnError::NotInTransaction | TxnError::InvalidTxnState) if version >= 4 => {
            ResponseError::TransactionAbortable
        }
        ShellError::Txn(TxnError::NotInTransaction | TxnError::InvalidTxnState) => {
            ResponseError::InvalidTxnState
        }
        ShellError::Txn(TxnError::ProducerFenced) => ResponseError::InvalidProducerEpoch,
        ShellError::Txn(
            TxnError::InvalidProducerIdMapping
            | TxnError::InvalidRequest
            | TxnError::TransactionalIdNotFound,
        ) => ResponseError::InvalidProducerIdMapping,
        ShellError::Txn(TxnError::ConcurrentTransactions) => ResponseError::ConcurrentTransactions,
        ShellError::Txn(TxnError::InvalidTransactionTimeout) => ResponseError::InvalidRequest,
        ShellError::Store(_) => ResponseError::NotCoordinator,
        ShellError::Loading | ShellError::Txn(TxnError::ProducerIdsPending) => {
            ResponseError::CoordinatorLoadInProgress
        }
    };
    code.code()
}
