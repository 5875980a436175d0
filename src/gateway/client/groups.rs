//! The operations on a group upstream: its offsets (OffsetCommit, OffsetFetch, OffsetDelete,
//! TxnOffsetCommit), DeleteGroups, ListGroups and DescribeGroups, with their requests' helpers.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponseGroup;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, GroupId, ListGroupsRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, TopicName, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tracing::debug;

use super::{only_group, retriable, Upstream, UpstreamError, MAX_BACKOFF};
use crate::vocab::{OffsetAndMetadata, TopicPartition};

/// How long ListGroups waits for each upstream broker (a client's ListGroups waits on it).
const LIST_TIMEOUT: Duration = Duration::from_secs(5);

impl Upstream {
    /// Commits `offsets` for `group` as a standalone commit (generation -1, no member), as
    /// admin tools do: upstream keeps them in `__consumer_offsets`.
    ///
    /// # Errors
    /// Any partition refused (after retries), or upstream unreachable until the deadline.
    pub async fn commit_offsets(
        &self,
        group: &str,
        offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
        retry_for: Duration,
    ) -> Result<(), UpstreamError> {
        let topics = by_topic(offsets.iter().map(|(tp, o)| {
            let p = OffsetCommitRequestPartition::default()
                .with_partition_index(tp.partition)
                .with_committed_offset(o.offset)
                .with_committed_leader_epoch(o.leader_epoch.unwrap_or(-1))
                .with_committed_metadata(Some(StrBytes::from_string(o.metadata.clone())));
            (tp, p)
        }));
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(StrBytes::default())
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, ps)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(name)
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        self.with_coordinator(group, retry_for, |node| {
            let req = &req;
            async move {
                let resp = self.call(node, 8, req).await?;
                for t in &resp.topics {
                    for p in &t.partitions {
                        if p.error_code != 0 {
                            return Err(UpstreamError::refused(
                                p.error_code,
                                format!("OffsetCommit {}-{}", t.name.as_str(), p.partition_index),
                            ));
                        }
                    }
                }
                Ok(())
            }
        })
        .await
    }

    /// Deletes `group`'s committed offsets of `partitions` upstream (a group upstream does
    /// not know has none to delete).
    ///
    /// # Errors
    /// Upstream refused, or was unreachable until the deadline.
    pub async fn delete_offsets(
        &self,
        group: &str,
        partitions: &[TopicPartition],
        retry_for: Duration,
    ) -> Result<(), UpstreamError> {
        let req = offset_delete_request(group, partitions);
        self.with_coordinator(group, retry_for, |node| {
            let req = &req;
            async move {
                let codes = match self.offset_delete_on(node, req).await {
                    Err(e) if e.code() == Some(ResponseError::GroupIdNotFound.code()) => {
                        return Ok(())
                    }
                    other => other?,
                };
                match codes.into_iter().find(|(_, c)| *c != 0) {
                    Some((_, c)) => Err(UpstreamError::refused(c, "OffsetDelete")),
                    None => Ok(()),
                }
            }
        })
        .await
    }

    /// OffsetDelete of `group`'s `partitions` upstream, answered as upstream answers it: each
    /// partition's error code (GROUP_SUBSCRIBED_TO_TOPIC for a topic the group consumes
    /// upstream, ...), for a group koord does not have.
    ///
    /// # Errors
    /// Upstream's error for the group (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...), or upstream
    /// unreachable until the deadline.
    pub async fn offset_delete(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, i16)>, UpstreamError> {
        let req = offset_delete_request(group, partitions);
        self.with_coordinator(group, self.retry_for, |node| {
            self.offset_delete_on(node, &req)
        })
        .await
    }

    /// One OffsetDelete to `node`: each partition's code, or the group's error.
    async fn offset_delete_on(
        &self,
        node: i32,
        req: &OffsetDeleteRequest,
    ) -> Result<Vec<(TopicPartition, i16)>, UpstreamError> {
        let resp = self.call(node, 0, req).await?;
        if resp.error_code != 0 {
            return Err(UpstreamError::refused(resp.error_code, "OffsetDelete"));
        }
        Ok(resp
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
            .collect())
    }

    /// Deletes `group` upstream, offsets and all: `true` if upstream had it, `false` if it did
    /// not (nothing to delete: done as well).
    ///
    /// # Errors
    /// Upstream refused (a group with members upstream: NON_EMPTY_GROUP), or was unreachable.
    pub async fn delete_group(
        &self,
        group: &str,
        retry_for: Duration,
    ) -> Result<bool, UpstreamError> {
        let req = DeleteGroupsRequest::default()
            .with_groups_names(vec![GroupId(StrBytes::from_string(group.to_string()))]);
        self.with_coordinator(group, retry_for, |node| {
            let req = &req;
            async move {
                let resp = self.call(node, 2, req).await?;
                match resp.results.first().map(|r| r.error_code) {
                    Some(0) => Ok(true),
                    Some(c) if c == ResponseError::GroupIdNotFound.code() => Ok(false),
                    Some(c) => Err(UpstreamError::refused(c, "DeleteGroups")),
                    None => Err(UpstreamError::Protocol("DeleteGroups: no result".into())),
                }
            }
        })
        .await
    }

    /// Every group upstream has, as its brokers list them (ListGroups v5, unfiltered, to every
    /// known broker: each lists the groups of the `__consumer_offsets` partitions it leads).
    /// A broker that cannot be reached is passed over (once upstream has moved its partitions,
    /// their new leaders list its groups); one that cannot list yet (COORDINATOR_LOAD_IN_PROGRESS
    /// while it loads) is asked again, for up to the client's retry budget.
    ///
    /// # Errors
    /// A broker kept answering an error, or none could be reached.
    pub async fn list_groups(&self) -> Result<Vec<ListedGroup>, UpstreamError> {
        let deadline = tokio::time::Instant::now() + self.retry_for;
        let mut backoff = Duration::from_millis(50);
        loop {
            match self.list_groups_once().await {
                Err(e)
                    if e.is_unavailable() && tokio::time::Instant::now() + backoff < deadline =>
                {
                    debug!(error = %e, "upstream ListGroups: retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                other => return other,
            }
        }
    }

    async fn list_groups_once(&self) -> Result<Vec<ListedGroup>, UpstreamError> {
        let req = ListGroupsRequest::default();
        let asks = self.any_order().into_iter().map(|node| {
            let req = &req;
            async move {
                tokio::time::timeout(LIST_TIMEOUT, self.call(node, 5, req))
                    .await
                    .unwrap_or_else(|_| {
                        Err(UpstreamError::Unreachable(format!(
                            "ListGroups: broker {node} did not answer"
                        )))
                    })
            }
        });
        let mut last = UpstreamError::Unreachable("no upstream broker known".into());
        let mut reached = false;
        let mut groups: BTreeMap<String, ListedGroup> = BTreeMap::new();
        for answer in futures_util::future::join_all(asks).await {
            match answer {
                Ok(r) if r.error_code != 0 => {
                    return Err(UpstreamError::refused(r.error_code, "ListGroups"))
                }
                Ok(r) => {
                    reached = true;
                    for g in r.groups {
                        groups.entry(g.group_id.as_str().to_string()).or_insert(g);
                    }
                }
                Err(e @ UpstreamError::Protocol(_)) => return Err(e),
                Err(e) => last = e,
            }
        }
        if !reached {
            return Err(last);
        }
        Ok(groups.into_values().collect())
    }

    /// `group` as its upstream coordinator describes it (DescribeGroups v5: a group upstream
    /// does not have is state Dead, no error).
    ///
    /// # Errors
    /// The group's error upstream kept answering, or upstream unreachable.
    pub async fn describe_group(&self, group: &str) -> Result<DescribedGroup, UpstreamError> {
        let req = DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(StrBytes::from_string(group.to_string()))]);
        self.with_coordinator(group, self.retry_for, |node| {
            let req = &req;
            async move {
                let resp = self.call(node, 5, req).await?;
                only_group(resp.groups, |g| g.error_code, "DescribeGroups")
            }
        })
        .await
    }

    /// `group`'s committed offsets from upstream: of `topics` (topic, partitions), or all.
    /// With `require_stable`, a partition an open transaction holds an offset for answers
    /// UNSTABLE_OFFSET_COMMIT (upstream's answer, passed on).
    ///
    /// # Errors
    /// The group-level error upstream kept answering, or upstream unreachable.
    pub async fn fetch_offsets(
        &self,
        group: &str,
        topics: Option<&[(String, Vec<i32>)]>,
        require_stable: bool,
    ) -> Result<OffsetFetchResponseGroup, UpstreamError> {
        let req = OffsetFetchRequest::default()
            .with_require_stable(require_stable)
            .with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
                .with_topics(topics.map(|ts| {
                    ts.iter()
                        .map(|(t, ps)| {
                            OffsetFetchRequestTopics::default()
                                .with_name(TopicName(StrBytes::from_string(t.clone())))
                                .with_partition_indexes(ps.clone())
                        })
                        .collect()
                }))]);
        self.with_coordinator(group, self.retry_for, |node| {
            let req = &req;
            async move {
                let resp = self.call(node, 8, req).await?;
                only_group(resp.groups, |g| g.error_code, "OffsetFetch")
            }
        })
        .await
    }

    /// Sends a transactional commit to `group`'s upstream coordinator at `version` and returns
    /// its answer (per-partition errors included: the transaction's checks are upstream's).
    ///
    /// # Errors
    /// Upstream kept answering NOT_COORDINATOR (or the like) until the deadline, or was
    /// unreachable.
    pub async fn txn_commit_offsets(
        &self,
        req: &TxnOffsetCommitRequest,
        version: i16,
    ) -> Result<TxnOffsetCommitResponse, UpstreamError> {
        let group = req.group_id.as_str();
        self.with_coordinator(group, self.retry_for, |node| async move {
            let resp = self.call(node, version, req).await?;
            let code = resp
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.error_code)
                .find(|c| *c != 0 && retriable(*c) && !is_txn_error(*c));
            match code {
                Some(c) => Err(UpstreamError::refused(c, "TxnOffsetCommit")),
                None => Ok(resp),
            }
        })
        .await
    }
}

/// `items` (a partition and its part of a request) grouped by topic, topics in name order,
/// partitions in the order given: the topics of an offsets request.
fn by_topic<'a, P>(
    items: impl IntoIterator<Item = (&'a TopicPartition, P)>,
) -> Vec<(TopicName, Vec<P>)> {
    let mut topics: BTreeMap<&str, Vec<P>> = BTreeMap::new();
    for (tp, p) in items {
        topics.entry(tp.topic.as_str()).or_default().push(p);
    }
    topics
        .into_iter()
        .map(|(t, ps)| (TopicName(StrBytes::from_string(t.to_string())), ps))
        .collect()
}

/// OffsetDelete of `group`'s `partitions`.
fn offset_delete_request(group: &str, partitions: &[TopicPartition]) -> OffsetDeleteRequest {
    let topics = by_topic(partitions.iter().map(|tp| {
        let p = OffsetDeleteRequestPartition::default().with_partition_index(tp.partition);
        (tp, p)
    }));
    OffsetDeleteRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_topics(
            topics
                .into_iter()
                .map(|(name, ps)| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(name)
                        .with_partitions(ps)
                })
                .collect(),
        )
}

/// Whether `code` is one of the transaction errors a producer must see itself.
fn is_txn_error(code: i16) -> bool {
    ResponseError::try_from_code(code).is_some_and(|e| {
        matches!(
            e,
            ResponseError::ConcurrentTransactions
                | ResponseError::TransactionAbortable
                | ResponseError::InvalidProducerEpoch
                | ResponseError::ProducerFenced
                | ResponseError::InvalidTxnState
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_group_by_topic_in_name_order_keeping_their_order() {
        let tps = [
            TopicPartition::new("b", 2),
            TopicPartition::new("a", 1),
            TopicPartition::new("b", 0),
        ];
        let topics = by_topic(tps.iter().map(|tp| (tp, tp.partition)));
        let names: Vec<(&str, Vec<i32>)> = topics
            .iter()
            .map(|(t, ps)| (t.as_str(), ps.clone()))
            .collect();
        assert_eq!(names, vec![("a", vec![1]), ("b", vec![2, 0])]);
    }
}
