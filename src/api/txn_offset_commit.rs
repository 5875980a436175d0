//! TxnOffsetCommit (key 28), v0-4: a transactional producer commits a group's offsets inside
//! its transaction (KIP-98; KIP-447 adds the member, instance and generation in v3 so that a
//! zombie of an old generation is fenced). The offsets stay pending until the transaction's
//! marker: OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT for them meanwhile,
//! and they become committed offsets only if the transaction commits.
//!
//! Checks, in Kafka's order: an empty group id is INVALID_GROUP_ID and an unknown topic or
//! partition UNKNOWN_TOPIC_OR_PARTITION (per partition); the producer must be in an open
//! transaction that added the group (AddOffsetsToTxn; KIP-890's verification); then the group
//! checks the committer as for a transactional commit, and each partition's metadata size.
//! v5 (transaction version 2: the commit adds the group itself) is not served, as EndTxn v5
//! is not.

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::collections::HashMap;

use super::check_group_id;
use super::offset_commit::Committed;
use super::reply::PartitionReplies;
use super::table::RequestContext;
use crate::broker::Broker;
use crate::coordinator::TxnOffsetCommit;
use crate::group::{Generation, MemberId, OffsetCommitAuth};
use crate::offsets::TopicPartition;
use crate::security::acl::{Operation, ResourceType};
use crate::transactions::ShellError;
use crate::txn::{Member, ProducerIdAndEpoch, TxnError};

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: TxnOffsetCommitRequest,
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
            commit.check(broker, &group, readable, &mut reply);
        }
    }
    let partitions = replies.take_items();
    let mut refused = None;
    // Gateway mode: the partitions koord's group checks passed, to go upstream.
    let mut forwarded: Vec<TopicPartition> = Vec::new();
    if let (Ok(group), false) = (group, partitions.is_empty()) {
        let producer = ProducerIdAndEpoch {
            producer_id: req.producer_id.0,
            epoch: req.producer_epoch,
        };
        // Gateway mode: the transaction is upstream's, and so is its verification.
        let verified = match broker.upstream {
            Some(_) => Ok(()),
            None => broker.txns.verify(
                &req.transactional_id,
                producer,
                Member::Group(group.as_str()),
            ),
        };
        let result = match verified {
            Err(e) => Err(verify_error(&e, version)),
            Ok(()) => {
                let commit = TxnOffsetCommit {
                    auth: OffsetCommitAuth {
                        member_id: MemberId::new(req.member_id.as_str()),
                        instance_id: super::instance_id(&req.group_instance_id),
                        generation: Generation(req.generation_id),
                        transactional: true,
                    },
                    producer_id: producer.producer_id,
                    producer_epoch: producer.epoch,
                    partitions,
                    api_version: version,
                    validate_only: broker.upstream.is_some(),
                };
                broker
                    .coordinator
                    .commit_txn_offsets(group, commit)
                    .await
                    .map_err(|e| e.code())
            }
        };
        match result {
            Ok(results) => {
                forwarded = results
                    .iter()
                    .filter(|(_, e)| e.is_none())
                    .map(|(tp, _)| tp.clone())
                    .collect();
                replies.answer(results.into_iter().map(|(_, e)| e));
            }
            Err(code) => refused = Some(code),
        }
    }
    let upstream = match (&broker.upstream, forwarded.is_empty()) {
        (Some(up), false) => Some(upstream_commit(up, &req, version, &forwarded).await),
        _ => None,
    };
    let topics = replies.into_topics(
        req.topics.into_iter().map(|t| t.name),
        |name, partitions| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions)
        },
        |index, code| {
            TxnOffsetCommitResponsePartition::default()
                .with_partition_index(index)
                .with_error_code(code)
        },
    );
    let mut resp = TxnOffsetCommitResponse::default().with_topics(topics);
    if let Some(answered) = upstream {
        // Upstream's answer for each partition it got; the others keep koord's.
        for topic in &mut resp.topics {
            for p in &mut topic.partitions {
                if p.error_code != 0 {
                    continue;
                }
                let tp = TopicPartition::new(topic.name.as_str(), p.partition_index);
                p.error_code = match &answered {
                    Ok(codes) => codes.get(&tp).copied().unwrap_or(0),
                    Err(code) => *code,
                };
            }
        }
    }
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

/// Gateway mode: the `forwarded` partitions of `req` committed inside the producer's upstream
/// transaction, as a commit of no member (generation -1): koord has checked the member, and
/// upstream verifies the transaction. Each partition's code, or the code of them all when
/// upstream could not serve in time (COORDINATOR_LOAD_IN_PROGRESS: clients retry).
async fn upstream_commit(
    up: &crate::gateway::client::Upstream,
    req: &TxnOffsetCommitRequest,
    version: i16,
    forwarded: &[TopicPartition],
) -> Result<HashMap<TopicPartition, i16>, i16> {
    let mut fwd = req.clone();
    fwd.generation_id = -1;
    fwd.member_id = StrBytes::default();
    fwd.group_instance_id = None;
    for t in &mut fwd.topics {
        t.partitions.retain(|p| {
            forwarded.contains(&TopicPartition::new(t.name.as_str(), p.partition_index))
        });
    }
    fwd.topics.retain(|t| !t.partitions.is_empty());
    match up.txn_commit_offsets(&fwd, version).await {
        Ok(resp) => Ok(resp
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    (
                        TopicPartition::new(t.name.as_str(), p.partition_index),
                        p.error_code,
                    )
                })
            })
            .collect()),
        Err(e) => Err(e.answer(req.group_id.as_str(), "TxnOffsetCommit")),
    }
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
        ShellError::Loading => ResponseError::CoordinatorLoadInProgress,
    };
    code.code()
}
