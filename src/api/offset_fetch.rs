//! OffsetFetch (key 9), v1-9. v1-7 ask for one group, v8+ for several, each answered with its
//! own error code. Topics null (v2+) asks for every committed offset. A missing group answers -1
//! for every partition with no error, as Kafka does. With RequireStable (v7+) a partition that
//! an open transaction holds an offset for answers UNSTABLE_OFFSET_COMMIT, so that an
//! exactly-once consumer does not start from an offset about to change. In gateway mode the
//! offsets and their error codes, the group's and each partition's, are the upstream
//! coordinator's, passed on as they came.

use std::collections::HashMap;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};

use super::table::RequestContext;
use super::{check_group_id, str_bytes};
use crate::broker::Broker;
use crate::group::{GroupError, MemberId};
use crate::offsets::{FetchedOffset, TopicPartition};
use crate::security::acl::{Operation, ResourceType};
use crate::vocab::error_code;

/// One group's answer: offsets grouped by topic in request (or stored) order, each partition
/// with its error code, or the group's error code. Codes, not [`GroupError`]s: in gateway mode
/// they are the upstream coordinator's, passed on as Kafka answered them.
type GroupAnswer = Result<Vec<(String, Vec<(FetchedOffset, i16)>)>, i16>;

/// A partition's answer with koord's own error (if any) as its code.
fn coded(f: FetchedOffset) -> (FetchedOffset, i16) {
    let code = error_code(f.error);
    (f, code)
}

/// As Kafka: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED; a named topic the
/// principal may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED on each of its partitions (and
/// is not looked up); "every offset" leaves such topics out.
async fn fetch_group(
    broker: &Broker,
    ctx: &RequestContext,
    group_id: &str,
    member: Option<(MemberId, i32)>,
    wanted: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> GroupAnswer {
    if !ctx.may(broker, Operation::Describe, ResourceType::Group, group_id) {
        return Err(GroupError::GroupAuthorizationFailed.code());
    }
    let may_describe = |t: &str| ctx.may(broker, Operation::Describe, ResourceType::Topic, t);
    let mut denied: Vec<(String, Vec<(FetchedOffset, i16)>)> = Vec::new();
    let wanted = wanted.map(|w| {
        let (ok, no): (Vec<_>, Vec<_>) = w.into_iter().partition(|(t, _)| may_describe(t));
        for (t, ps) in no {
            let offsets = ps
                .into_iter()
                .map(|p| {
                    let f = FetchedOffset {
                        tp: TopicPartition::new(t.clone(), p),
                        offset: -1,
                        leader_epoch: -1,
                        metadata: String::new(),
                        error: None,
                    };
                    (f, GroupError::TopicAuthorizationFailed.code())
                })
                .collect();
            denied.push((t, offsets));
        }
        ok
    });
    let mut answer = fetch_authorized(broker, group_id, member, wanted, require_stable).await?;
    answer.retain(|(t, _)| may_describe(t));
    answer.extend(denied);
    Ok(answer)
}

async fn fetch_authorized(
    broker: &Broker,
    group_id: &str,
    member: Option<(MemberId, i32)>,
    wanted: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> GroupAnswer {
    let group = check_group_id(group_id).map_err(GroupError::code)?;
    broker.coordinator.admit(&group).map_err(GroupError::code)?;
    if let Some(up) = &broker.upstream {
        // Gateway mode: koord checks the member (v9+), upstream has the offsets.
        broker
            .coordinator
            .fetch_offsets_as(group.clone(), member, Some(Vec::new()), false)
            .await
            .map_err(GroupError::code)?;
        return from_upstream(up, group.as_str(), wanted, require_stable).await;
    }
    let order: Option<Vec<String>> = wanted
        .as_ref()
        .map(|w| w.iter().map(|(t, _)| t.clone()).collect());
    let partitions = wanted.map(|w| {
        w.into_iter()
            .flat_map(|(t, ps)| {
                ps.into_iter()
                    .map(move |p| TopicPartition::new(t.clone(), p))
            })
            .collect::<Vec<_>>()
    });
    let fetched = broker
        .coordinator
        .fetch_offsets_as(group, member, partitions, require_stable)
        .await
        .map_err(GroupError::code)?;
    // Group by topic in first-seen order; an index keeps this linear for a fetch of every
    // offset of a group with many topics.
    let mut by_topic: Vec<(String, Vec<(FetchedOffset, i16)>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for f in fetched {
        let i = *index.entry(f.tp.topic.clone()).or_insert_with(|| {
            by_topic.push((f.tp.topic.clone(), Vec::new()));
            by_topic.len() - 1
        });
        by_topic[i].1.push(coded(f));
    }
    if let Some(order) = order {
        // Topics named in the request with no partitions still get an (empty) entry.
        for t in order {
            if !index.contains_key(&t) {
                index.insert(t.clone(), by_topic.len());
                by_topic.push((t, Vec::new()));
            }
        }
    }
    Ok(by_topic)
}

/// The group's offsets as upstream has them (gateway mode), in upstream's order; a topic
/// asked for and not answered gets an empty entry. Upstream's error codes, the group's and each
/// partition's, are passed on as they came (UNSTABLE_OFFSET_COMMIT for an open transaction's
/// offset with `require_stable`, COORDINATOR_LOAD_IN_PROGRESS while upstream loads, ...): a
/// client retries what Kafka tells it to retry. An upstream coordinator that moves, loads or
/// cannot be reached is retried for `upstream.write.timeout.ms`, then answered
/// COORDINATOR_LOAD_IN_PROGRESS ([`crate::gateway::client::UpstreamError::client_code`]).
async fn from_upstream(
    up: &crate::gateway::client::Upstream,
    group: &str,
    wanted: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> GroupAnswer {
    let answer = up
        .fetch_offsets(group, wanted.as_deref(), require_stable)
        .await
        .map_err(|e| e.answer(group, "OffsetFetch"))?;
    let mut by_topic: Vec<(String, Vec<(FetchedOffset, i16)>)> = answer
        .topics
        .into_iter()
        .map(|t| {
            let topic = t.name.as_str().to_string();
            let offsets = t
                .partitions
                .into_iter()
                .map(|p| {
                    let f = FetchedOffset {
                        tp: TopicPartition::new(topic.clone(), p.partition_index),
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.metadata.map(|m| m.to_string()).unwrap_or_default(),
                        error: GroupError::from_code(p.error_code),
                    };
                    (f, p.error_code)
                })
                .collect();
            (topic, offsets)
        })
        .collect();
    for (t, _) in wanted.unwrap_or_default() {
        if !by_topic.iter().any(|(have, _)| *have == t) {
            by_topic.push((t, Vec::new()));
        }
    }
    Ok(by_topic)
}

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    if version >= 8 {
        let mut groups = Vec::with_capacity(req.groups.len());
        for g in req.groups {
            let wanted = g.topics.map(|ts| {
                ts.into_iter()
                    .map(|t| (t.name.as_str().to_string(), t.partition_indexes))
                    .collect()
            });
            // v9: a consumer-group member names itself and its epoch (admin tools do not).
            let member = (version >= 9)
                .then(|| {
                    g.member_id
                        .as_ref()
                        .map(|id| (MemberId::new(id.as_str()), g.member_epoch))
                })
                .flatten();
            let answer =
                fetch_group(broker, ctx, &g.group_id, member, wanted, req.require_stable).await;
            let group = OffsetFetchResponseGroup::default().with_group_id(g.group_id);
            groups.push(match answer {
                Err(code) => group.with_error_code(code),
                Ok(topics) => group.with_topics(
                    topics
                        .into_iter()
                        .map(|(t, parts)| {
                            OffsetFetchResponseTopics::default()
                                .with_name(TopicName(str_bytes(t)))
                                .with_partitions(
                                    parts
                                        .into_iter()
                                        .map(|(f, code)| {
                                            OffsetFetchResponsePartitions::default()
                                                .with_partition_index(f.tp.partition)
                                                .with_committed_offset(f.offset)
                                                .with_committed_leader_epoch(f.leader_epoch)
                                                .with_metadata(Some(str_bytes(f.metadata)))
                                                .with_error_code(code)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            });
        }
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let wanted = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.as_str().to_string(), t.partition_indexes))
            .collect::<Vec<_>>()
    });
    let requested = wanted.clone();
    let partition = |(f, code): &(FetchedOffset, i16)| {
        let p = OffsetFetchResponsePartition::default()
            .with_partition_index(f.tp.partition)
            .with_committed_offset(f.offset)
            .with_metadata(Some(str_bytes(f.metadata.clone())))
            .with_error_code(*code);
        if version >= 5 {
            p.with_committed_leader_epoch(f.leader_epoch)
        } else {
            p
        }
    };
    let require_stable = version >= 7 && req.require_stable;
    match fetch_group(broker, ctx, &req.group_id, None, wanted, require_stable).await {
        Ok(topics) => OffsetFetchResponse::default().with_topics(
            topics
                .into_iter()
                .map(|(t, parts)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(TopicName(str_bytes(t)))
                        .with_partitions(parts.iter().map(partition).collect())
                })
                .collect(),
        ),
        Err(code) => {
            // v2+ has a top-level error; v1 reports it on every requested partition.
            let mut resp = OffsetFetchResponse::default();
            if version >= 2 {
                resp.error_code = code;
            } else {
                resp.topics = requested
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(t, ps)| {
                        OffsetFetchResponseTopic::default()
                            .with_name(TopicName(str_bytes(t)))
                            .with_partitions(
                                ps.into_iter()
                                    .map(|p| {
                                        OffsetFetchResponsePartition::default()
                                            .with_partition_index(p)
                                            .with_committed_offset(-1)
                                            .with_metadata(Some(str_bytes("")))
                                            .with_error_code(code)
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
            }
            resp
        }
    }
}
