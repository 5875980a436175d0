//! CreatePartitions (key 37), v0-3 (the versions differ only in encoding): raises topics'
//! partition counts, answering as Kafka 4.4's `ControllerApis.createPartitions` and
//! `ReplicationControlManager.createPartitions` do.
//!
//! For the request: a name given twice is INVALID_REQUEST ("Duplicate topic name.") and left
//! out. If any topic is left, Kafka's controller call can fail as a whole, which answers every
//! entry of the request alike: a `timeout_ms` of 0 or less is REQUEST_TIMED_OUT, and more than
//! 10000 partitions added to existing topics in all is POLICY_VIOLATION. For each topic: unknown
//! is UNKNOWN_TOPIC_OR_PARTITION; a count that is not larger is INVALID_PARTITIONS; assignments
//! whose number is not the number added, or that name no broker, another broker or this one
//! twice, are INVALID_REPLICA_ASSIGNMENT. `validate_only` answers the same and changes nothing.
//!
//! The valid topics grow together: one durable write, then they are served with their new
//! partitions ([`Broker::add_partitions`]); a failed write is KAFKA_STORAGE_ERROR for each of
//! them and nothing changed. Results come in Kafka's order: the duplicates, then the others,
//! each in the iteration order of the Java `HashSet` Kafka collects the names in.

use std::collections::{HashMap, HashSet};

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreatePartitionsResponse, TopicName,
};
use kafka_protocol::ResponseError;

use super::context::RequestContext;
use super::str_bytes;
use crate::broker::Broker;
use crate::metadata::Topic;
use crate::security::acl::{Operation, ResourceType};

/// A topic's error and its message (`None` where Kafka sends null).
type Failure = (ResponseError, Option<String>);

/// Kafka's cap on the partitions one request may add (`QuorumController.
/// MAX_RECORDS_PER_USER_OP`, checked by `validateTotalNumberOfPartitions`).
const MAX_ADDED_PER_REQUEST: i64 = 10_000;

fn result(name: &TopicName, failure: Option<Failure>) -> CreatePartitionsTopicResult {
    let r = CreatePartitionsTopicResult::default().with_name(name.clone());
    match failure {
        None => r.with_error_message(None),
        Some((e, message)) => r
            .with_error_code(e.code())
            .with_error_message(message.map(str_bytes)),
    }
}

/// Java's `String.hashCode`, over UTF-16 code units.
fn java_hash(s: &str) -> u32 {
    s.encode_utf16()
        .fold(0u32, |h, c| h.wrapping_mul(31).wrapping_add(u32::from(c)))
}

/// The order a `java.util.HashSet<String>` iterates `names` in when they were added in the
/// given order (repeats ignored): by bucket (Java's spread `hashCode` over the table size),
/// then by insertion, the table grown as Java grows it: past 3/4 full, or when a bucket passes
/// 8 names in a table of fewer than 64 buckets. Not followed: a bucket passing 8 names in a
/// larger table, which Java turns into a tree (only names chosen to collide get there).
pub fn java_hash_set_order<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    const TREEIFY_THRESHOLD: usize = 8;
    const MIN_TREEIFY_CAPACITY: usize = 64;
    fn bucket(hash: u32, buckets: usize) -> usize {
        ((hash ^ (hash >> 16)) as usize) & (buckets - 1)
    }
    fn grow(table: &mut Vec<Vec<(u32, &str)>>) {
        // Java splits each bucket in two keeping its order; refilling bucket by bucket does too.
        let buckets = table.len() * 2;
        let mut grown = vec![Vec::new(); buckets];
        for (hash, name) in table.drain(..).flatten() {
            grown[bucket(hash, buckets)].push((hash, name));
        }
        *table = grown;
    }
    let mut table: Vec<Vec<(u32, &str)>> = vec![Vec::new(); 16];
    let mut size = 0;
    for name in names {
        let hash = java_hash(name);
        let i = bucket(hash, table.len());
        if table[i].iter().any(|(_, n)| *n == name) {
            continue;
        }
        table[i].push((hash, name));
        if table[i].len() > TREEIFY_THRESHOLD && table.len() < MIN_TREEIFY_CAPACITY {
            grow(&mut table);
        }
        size += 1;
        if size > table.len() / 4 * 3 {
            grow(&mut table);
        }
    }
    table.into_iter().flatten().map(|(_, name)| name).collect()
}

/// Kafka's `validateManualPartitionAssignment` with one broker, `node`: the ids are checked in
/// ascending order, each registered and none twice, so the first failure is the smallest id
/// below `node`, else `node` twice, else the smallest id above it (found in one pass, no sort of
/// a list the peer sized). Its last check, as many replicas as the topic's other partitions
/// have, cannot fail here: more than one id means a stranger or a repeat.
fn check_replicas(ids: &[BrokerId], node: i32) -> Result<(), Failure> {
    let invalid = |m: String| Err((ResponseError::InvalidReplicaAssignment, Some(m)));
    let unknown = |id: i32| {
        invalid(format!(
            "The manual partition assignment includes broker {id}, but no such broker is registered."
        ))
    };
    if ids.is_empty() {
        return invalid("The manual partition assignment includes an empty replica list.".into());
    }
    let (mut below, mut this, mut above) = (None::<i32>, 0usize, None::<i32>);
    for &BrokerId(id) in ids {
        match id.cmp(&node) {
            std::cmp::Ordering::Less => below = Some(below.map_or(id, |b| b.min(id))),
            std::cmp::Ordering::Equal => this += 1,
            std::cmp::Ordering::Greater => above = Some(above.map_or(id, |a| a.min(id))),
        }
    }
    if let Some(id) = below {
        return unknown(id);
    }
    if this > 1 {
        return invalid(format!(
            "The manual partition assignment includes the broker {node} more than once."
        ));
    }
    match above {
        Some(id) => unknown(id),
        None => Ok(()),
    }
}

/// The topic `t` names, if `t` is a valid increase of it.
fn check(broker: &Broker, t: &CreatePartitionsTopic) -> Result<Topic, Failure> {
    let name = t.name.as_str();
    let Some(topic) = broker.topics.get(name) else {
        return Err((ResponseError::UnknownTopicOrPartition, None));
    };
    let (current, count) = (topic.partitions, t.count);
    if count == current {
        return Err((
            ResponseError::InvalidPartitions,
            Some(format!("Topic already has {current} partition(s).")),
        ));
    }
    if count < current {
        return Err((
            ResponseError::InvalidPartitions,
            Some(format!(
                "The topic {name} currently has {current} partition(s); {count} would not be an increase."
            )),
        ));
    }
    let additional = i64::from(count) - i64::from(current);
    if let Some(assignments) = &t.assignments {
        if assignments.len() as i64 != additional {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                Some(format!(
                    "Attempted to add {additional} additional partition(s), but only {} assignment(s) were specified.",
                    assignments.len()
                )),
            ));
        }
        for a in assignments {
            check_replicas(&a.broker_ids, broker.node_id())?;
        }
    }
    Ok(topic)
}

/// The partitions `topics` would add to existing topics, as Kafka counts them: negative counts
/// and unknown topics are left to the per-topic checks.
fn added(broker: &Broker, topics: &[&CreatePartitionsTopic]) -> i64 {
    topics
        .iter()
        .filter(|t| t.count >= 0)
        .filter_map(|t| {
            let current = broker.topics.get(t.name.as_str())?.partitions;
            Some(i64::from(t.count) - i64::from(current)).filter(|n| *n > 0)
        })
        .sum()
}

/// Every entry of the request answered with one error, as Kafka answers a failed controller
/// call (`CreatePartitionsRequest.getErrorResponse`).
fn all_failed(req: &CreatePartitionsRequest, failure: Failure) -> CreatePartitionsResponse {
    CreatePartitionsResponse::default().with_results(
        req.topics
            .iter()
            .map(|t| result(&t.name, Some(failure.clone())))
            .collect(),
    )
}

pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: CreatePartitionsRequest,
    _version: i16,
) -> CreatePartitionsResponse {
    let mut first: HashMap<&str, &CreatePartitionsTopic> = HashMap::new();
    let mut repeats = Vec::new();
    for t in &req.topics {
        if first.insert(t.name.as_str(), t).is_some() {
            repeats.push(t);
        }
    }
    let duplicated: HashSet<&str> = repeats.iter().map(|t| t.name.as_str()).collect();
    let mut results: Vec<CreatePartitionsTopicResult> =
        java_hash_set_order(repeats.iter().map(|t| t.name.as_str()))
            .into_iter()
            .filter_map(|n| first.get(n))
            .map(|t| {
                let e = (
                    ResponseError::InvalidRequest,
                    Some("Duplicate topic name.".into()),
                );
                result(&t.name, Some(e))
            })
            .collect();
    let topics: Vec<&CreatePartitionsTopic> =
        java_hash_set_order(req.topics.iter().map(|t| t.name.as_str()))
            .into_iter()
            .filter(|n| !duplicated.contains(n))
            .filter_map(|n| first.get(n).copied())
            .collect();
    if topics.is_empty() {
        return CreatePartitionsResponse::default().with_results(results);
    }
    // One node: the change is complete when the reply goes out, so only a deadline that has
    // passed before the work starts can fail it.
    if req.timeout_ms <= 0 {
        return all_failed(&req, (ResponseError::RequestTimedOut, None));
    }
    let writes = broker.topic_writes().await;
    if added(broker, &topics) > MAX_ADDED_PER_REQUEST {
        let m = "Excessively large number of additional partitions per request.";
        return all_failed(&req, (ResponseError::PolicyViolation, Some(m.into())));
    }
    let mut grow = Vec::new();
    let mut outcomes = Vec::with_capacity(topics.len());
    for t in &topics {
        // As Kafka: ALTER on the topic (TOPIC_AUTHORIZATION_FAILED).
        let outcome = if ctx.may(broker, Operation::Alter, ResourceType::Topic, &t.name) {
            check(broker, t).map(|topic| grow.push((topic, t.count)))
        } else {
            Err((ResponseError::TopicAuthorizationFailed, None))
        };
        outcomes.push((*t, outcome.err()));
    }
    if !req.validate_only && !grow.is_empty() {
        if let Err(e) = broker.add_partitions(&writes, &grow).await {
            tracing::warn!("partitions not added: {e}");
            let failed = (
                ResponseError::KafkaStorageError,
                Some("Disk error when trying to access log file on the disk.".to_string()),
            );
            for (_, outcome) in &mut outcomes {
                outcome.get_or_insert_with(|| failed.clone());
            }
        }
    }
    drop(writes);
    results.extend(outcomes.into_iter().map(|(t, f)| result(&t.name, f)));
    CreatePartitionsResponse::default().with_results(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::broker;
    use bytes::BytesMut;
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment;
    use kafka_protocol::protocol::Encodable;

    fn topic(name: &str, count: i32, assignments: Option<Vec<Vec<i32>>>) -> CreatePartitionsTopic {
        CreatePartitionsTopic::default()
            .with_name(TopicName(str_bytes(name)))
            .with_count(count)
            .with_assignments(assignments.map(|a| {
                a.into_iter()
                    .map(|ids| {
                        CreatePartitionsAssignment::default()
                            .with_broker_ids(ids.into_iter().map(BrokerId).collect())
                    })
                    .collect()
            }))
    }

    fn request(topics: Vec<CreatePartitionsTopic>, validate_only: bool) -> CreatePartitionsRequest {
        CreatePartitionsRequest::default()
            .with_topics(topics)
            .with_timeout_ms(5_000)
            .with_validate_only(validate_only)
    }

    fn answers(resp: &CreatePartitionsResponse) -> Vec<(String, i16, Option<String>)> {
        resp.results
            .iter()
            .map(|r| {
                (
                    r.name.as_str().to_string(),
                    r.error_code,
                    r.error_message.as_ref().map(|m| m.to_string()),
                )
            })
            .collect()
    }

    /// Orders printed by `java.util.HashSet<String>` (OpenJDK 17) for names added in order.
    #[test]
    fn java_hash_set_order_matches_java() {
        let cases: [(&str, &str); 5] = [
            (
                "b,a,c,orders,payments,x-1,x-2,x-3",
                "a,b,c,payments,orders,x-2,x-1,x-3",
            ),
            (
                "topic-0,topic-1,topic-2,topic-3,topic-4,topic-5,topic-6,topic-7,topic-8,topic-9,topic-10,topic-11,topic-12",
                "topic-6,topic-7,topic-8,topic-9,topic-0,topic-1,topic-2,topic-3,topic-10,topic-4,topic-11,topic-5,topic-12",
            ),
            (
                "t0,t1,t2,t3,t4,t5,t6,t7,t8,t9,t10,t11,t12,t13,t14,t15,t16,t17,t18,t19,t20,t21,t22,t23,t24,t25,t26,t27,t28,t29,t30,t31,t32,t33,t34,t35,t36,t37,t38,t39",
                "t4,t5,t6,t7,t8,t9,t30,t10,t32,t31,t12,t34,t11,t33,t14,t36,t13,t35,t16,t38,t15,t37,t18,t17,t39,t19,t21,t20,t23,t22,t25,t24,t27,t26,t29,t28,t0,t1,t2,t3",
            ),
            // Nine names of one hash: the ninth in a bucket grows the table of 16.
            (
                "AaAaAaAa,AaAaAaBB,AaAaBBAa,AaAaBBBB,AaBBAaAa,AaBBAaBB,AaBBBBAa,AaBBBBBB,BBAaAaAa,z1,z2",
                "AaAaAaAa,AaAaAaBB,AaAaBBAa,AaAaBBBB,AaBBAaAa,AaBBAaBB,AaBBBBAa,AaBBBBBB,BBAaAaAa,z1,z2",
            ),
            ("ü-topic,日本,a", "a,日本,ü-topic"),
        ];
        for (added, iterated) in cases {
            let mut names: Vec<&str> = added.split(',').collect();
            names.push(names[0]);
            assert_eq!(java_hash_set_order(names).join(","), iterated);
        }
    }

    #[test]
    fn replicas_fail_as_kafkas_sorted_walk_does() {
        let node = 5;
        let message = |ids: &[i32]| {
            let ids: Vec<BrokerId> = ids.iter().copied().map(BrokerId).collect();
            check_replicas(&ids, node).err().and_then(|(_, m)| m)
        };
        let unknown = |id: i32| {
            Some(format!(
                "The manual partition assignment includes broker {id}, but no such broker is registered."
            ))
        };
        let twice = Some(format!(
            "The manual partition assignment includes the broker {node} more than once."
        ));
        assert_eq!(message(&[5]), None);
        assert_eq!(message(&[9, 5, 5, 3, 1]), unknown(1));
        assert_eq!(message(&[9, 5, 5, 7]), twice);
        assert_eq!(message(&[9, 5, 7]), unknown(7));
        assert_eq!(message(&[i32::MAX, i32::MIN]), unknown(i32::MIN));
    }

    #[tokio::test]
    async fn grows_and_answers_kafkas_errors() {
        let b = broker();
        let node = b.node_id();
        let resp = handle(
            &b,
            &crate::api::testing::ctx(&b),
            request(
                vec![
                    topic("t", 2, None),
                    topic("t", 5, None),
                    topic("nope", 3, None),
                ],
                false,
            ),
            3,
        )
        .await;
        let invalid = ResponseError::InvalidRequest.code();
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        assert_eq!(
            answers(&resp),
            vec![
                ("t".into(), invalid, Some("Duplicate topic name.".into())),
                ("nope".into(), unknown, None),
            ]
        );
        let resp = handle(
            &b,
            &crate::api::testing::ctx(&b),
            request(
                vec![topic("t", 4, Some(vec![vec![node], vec![node]]))],
                false,
            ),
            0,
        )
        .await;
        assert_eq!(answers(&resp), vec![("t".into(), 0, None)]);
        assert_eq!(b.topics.get("t").unwrap().partitions, 4);
        let t = b.topics.get("t").unwrap();
        assert!(b.logs.partition(&t, 3).is_some());
        for (count, message) in [
            (4, "Topic already has 4 partition(s).".to_string()),
            (
                -1,
                "The topic t currently has 4 partition(s); -1 would not be an increase.".into(),
            ),
        ] {
            let resp = handle(
                &b,
                &crate::api::testing::ctx(&b),
                request(vec![topic("t", count, None)], false),
                2,
            )
            .await;
            let e = ResponseError::InvalidPartitions.code();
            assert_eq!(answers(&resp), vec![("t".into(), e, Some(message))]);
        }
        let bad = ResponseError::InvalidReplicaAssignment.code();
        for (assignments, message) in [
            (vec![vec![node]], "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.".to_string()),
            (vec![vec![node], vec![]], "The manual partition assignment includes an empty replica list.".into()),
            (vec![vec![node], vec![node + 1, node]], format!("The manual partition assignment includes broker {}, but no such broker is registered.", node + 1)),
            (vec![vec![node, node], vec![node]], format!("The manual partition assignment includes the broker {node} more than once.")),
        ] {
            let resp = handle(&b, &crate::api::testing::ctx(&b), request(vec![topic("t", 6, Some(assignments))], false), 1).await;
            assert_eq!(answers(&resp), vec![("t".into(), bad, Some(message))]);
        }
        let resp = handle(
            &b,
            &crate::api::testing::ctx(&b),
            request(vec![topic("t", 6, None)], true),
            3,
        )
        .await;
        assert_eq!(answers(&resp), vec![("t".into(), 0, None)]);
        assert_eq!(b.topics.get("t").unwrap().partitions, 4, "validate_only");
    }

    #[tokio::test]
    async fn whole_request_failures_answer_every_entry() {
        let b = broker();
        let mut req = request(
            vec![
                topic("t", 3, None),
                topic("x", 3, None),
                topic("t", 3, None),
            ],
            false,
        );
        req.timeout_ms = 0;
        let resp = handle(&b, &crate::api::testing::ctx(&b), req, 3).await;
        let timed_out = ResponseError::RequestTimedOut.code();
        assert_eq!(
            answers(&resp),
            vec![
                ("t".into(), timed_out, None),
                ("x".into(), timed_out, None),
                ("t".into(), timed_out, None)
            ]
        );
        // Nothing left but duplicates: no controller call, so no timeout.
        let mut req = request(vec![topic("t", 3, None), topic("t", 3, None)], false);
        req.timeout_ms = -1;
        let resp = handle(&b, &crate::api::testing::ctx(&b), req, 3).await;
        assert_eq!(
            resp.results[0].error_code,
            ResponseError::InvalidRequest.code()
        );
        let policy = ResponseError::PolicyViolation.code();
        for (count, code) in [(10_002, 0), (10_003, policy), (i32::MAX, policy)] {
            let resp = handle(
                &b,
                &crate::api::testing::ctx(&b),
                request(
                    vec![topic("t", count, None), topic("nope", i32::MAX, None)],
                    true,
                ),
                3,
            )
            .await;
            let mut codes: Vec<(String, i16)> =
                answers(&resp).into_iter().map(|(n, c, _)| (n, c)).collect();
            codes.sort();
            let unknown = ResponseError::UnknownTopicOrPartition.code();
            let (nope, t) = if code == 0 {
                (unknown, 0)
            } else {
                (policy, policy)
            };
            assert_eq!(
                codes,
                vec![("nope".into(), nope), ("t".into(), t)],
                "{count}"
            );
        }
        assert_eq!(b.topics.get("t").unwrap().partitions, 2);
    }

    #[tokio::test]
    async fn encodes_at_every_served_version() {
        for v in 0..=3 {
            let b = broker();
            let resp = handle(
                &b,
                &crate::api::testing::ctx(&b),
                request(vec![topic("t", 3, None), topic("nope", 3, None)], false),
                v,
            )
            .await;
            let mut buf = BytesMut::new();
            resp.encode(&mut buf, v)
                .unwrap_or_else(|e| panic!("v{v}: {e}"));
        }
    }
}
