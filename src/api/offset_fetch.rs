//! OffsetFetch (key 9), v1-10. v1-7 ask for one group, v8+ for several, each answered with its
//! own error code. v10 names topics by id (KIP-848): an id no topic has answers UNKNOWN_TOPIC_ID
//! on each of its partitions, and "every offset" leaves out topics that no longer exist. Topics
//! null (v2+) asks for every committed offset. A missing group answers -1 for every partition
//! with no error, as Kafka does. With RequireStable (v7+) a partition that
//! an open transaction holds an offset for answers UNSTABLE_OFFSET_COMMIT, so that an
//! exactly-once consumer does not start from an offset about to change. In gateway mode the
//! offsets and their error codes, the group's and each partition's, are the upstream
//! coordinator's, passed on as they came.

use std::collections::{HashMap, VecDeque};

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use uuid::Uuid;

use super::context::RequestContext;
use super::{check_group_id, str_bytes};
use crate::backend::GroupOffsets;
use crate::broker::Broker;
use crate::group::{GroupError, MemberId};
use crate::offsets::{FetchedOffset, TopicPartition};
use crate::security::acl::{Operation, ResourceType};

/// One group's answer ([`GroupOffsets`]), or the group's error code.
type GroupAnswer = Result<GroupOffsets, i16>;

/// The topic ids of one group's v10 request, to answer by id what the group answers by name.
#[derive(Default)]
struct TopicIds {
    /// The id of each requested topic that has one, by name.
    named: HashMap<String, Uuid>,
    /// The requested ids no topic has, in request order: their topics have no name, and
    /// [`fetch_group`] answers them in that order.
    unknown: VecDeque<Uuid>,
}

impl TopicIds {
    /// The name of requested topic `id`; empty for an id no topic has (the nil id among them).
    fn name(&mut self, broker: &Broker, id: Uuid) -> String {
        match broker.topics.name_of(id) {
            Some(name) => {
                self.named.insert(name.clone(), id);
                name
            }
            None => {
                self.unknown.push_back(id);
                String::new()
            }
        }
    }

    /// The id of answered topic `name`: the requested one, or (every offset) the topic's id
    /// now; `None` for a topic that no longer exists, left out of the answer as Kafka does.
    fn id(&mut self, broker: &Broker, name: &str) -> Option<Uuid> {
        if name.is_empty() {
            return self.unknown.pop_front();
        }
        self.named
            .get(name)
            .copied()
            .or_else(|| broker.topics.id_and_partitions(name).map(|(id, _)| id))
    }
}

/// As Kafka: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED; a named topic the
/// principal may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED on each of its partitions (and
/// is not looked up); "every offset" leaves such topics out. `by_id` (v10): a wanted topic
/// without a name is an id no topic has, answered UNKNOWN_TOPIC_ID. The refused topics follow
/// the group's answer, in request order.
async fn fetch_group(
    broker: &Broker,
    ctx: &RequestContext,
    group_id: &str,
    member: Option<(MemberId, i32)>,
    wanted: Option<Vec<(String, Vec<i32>)>>,
    by_id: bool,
    require_stable: bool,
) -> GroupAnswer {
    if !ctx.may(broker, Operation::Describe, ResourceType::Group, group_id) {
        return Err(GroupError::GroupAuthorizationFailed.code());
    }
    let may_describe = |t: &str| ctx.may(broker, Operation::Describe, ResourceType::Topic, t);
    let refusal = |t: &str| {
        if by_id && t.is_empty() {
            Some(GroupError::UnknownTopicId)
        } else if !may_describe(t) {
            Some(GroupError::TopicAuthorizationFailed)
        } else {
            None
        }
    };
    let mut denied: Vec<(String, Vec<(FetchedOffset, i16)>)> = Vec::new();
    let wanted = wanted.map(|w| {
        let mut ok = Vec::new();
        for (t, ps) in w {
            let Some(error) = refusal(&t) else {
                ok.push((t, ps));
                continue;
            };
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
                    (f, error.code())
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
    broker
        .backend
        .fetch_offsets(broker.local(), group, member, wanted, require_stable)
        .await
}

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    if version >= 8 {
        let mut groups = Vec::with_capacity(req.groups.len());
        let by_id = version >= 10;
        for g in req.groups {
            let mut ids = TopicIds::default();
            let wanted = g.topics.map(|ts| {
                ts.into_iter()
                    .map(|t| {
                        let name = if by_id {
                            ids.name(broker, t.topic_id)
                        } else {
                            t.name.as_str().to_string()
                        };
                        (name, t.partition_indexes)
                    })
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
            let (group_id, stable) = (&g.group_id, req.require_stable);
            let answer = fetch_group(broker, ctx, group_id, member, wanted, by_id, stable).await;
            let group = OffsetFetchResponseGroup::default().with_group_id(g.group_id);
            groups.push(match answer {
                Err(code) => group.with_error_code(code),
                Ok(topics) => group.with_topics(
                    topics
                        .into_iter()
                        .filter_map(|(t, parts)| {
                            let id = if by_id {
                                ids.id(broker, &t)?
                            } else {
                                Uuid::nil()
                            };
                            let topic = OffsetFetchResponseTopics::default()
                                .with_name(TopicName(str_bytes(t)))
                                .with_topic_id(id);
                            Some(
                                topic.with_partitions(
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
                                ),
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
    match fetch_group(
        broker,
        ctx,
        &req.group_id,
        None,
        wanted,
        false,
        require_stable,
    )
    .await
    {
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
