//! Wire conformance of KIP-1071 streams groups (StreamsGroupHeartbeat v0-1, key 88;
//! StreamsGroupDescribe v0-1, key 89): every test passes against koord and, in the conformance
//! tier (`KOORD_BOOTSTRAP` at `scripts/kafka.sh`'s broker), against Apache Kafka 4.4.
//! docs/kip1071-conformance.md summarises what Kafka answered.
//!
//! Nothing waits on a fixed sleep: state changes are awaited by heartbeating (as a client does)
//! until they show, with a deadline that only bounds a failure.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::txn::create_topic;
use common::{err, group_id, s, topic_name, unique, Client, Koord, DEADLINE};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::streams_group_heartbeat_request::{Subtopology, TopicInfo, Topology};
use kafka_protocol::messages::streams_group_heartbeat_response::TaskIds;
use kafka_protocol::messages::{
    ApiKey, MetadataRequest, StreamsGroupDescribeRequest, StreamsGroupDescribeResponse,
    StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse,
};
use kafka_protocol::ResponseError;

/// Status codes of StreamsGroupHeartbeatResponse.
const MISSING_SOURCE_TOPICS: i8 = 1;
const MISSING_INTERNAL_TOPICS: i8 = 3;
const ASSIGNMENT_DELAYED: i8 = 5;

/// A word count's topology, as Kafka Streams sends it: subtopology 0 reads `input` and writes
/// the repartition topic, subtopology 1 reads it and counts into a changelogged store.
fn word_count(app: &str, input: &str) -> Topology {
    let repartition = format!("{app}-words-repartition");
    Topology::default().with_epoch(0).with_subtopologies(vec![
        Subtopology::default()
            .with_subtopology_id(s("0"))
            .with_source_topics(vec![topic_name(input)])
            .with_repartition_sink_topics(vec![topic_name(&repartition)]),
        Subtopology::default()
            .with_subtopology_id(s("1"))
            .with_repartition_source_topics(vec![
                TopicInfo::default().with_name(topic_name(&repartition))
            ])
            .with_state_changelog_topics(vec![
                TopicInfo::default().with_name(topic_name(&format!("{app}-counts-changelog")))
            ]),
    ])
}

/// The first heartbeat of `member` (epoch 0, every field a joining member sends).
fn joining(app: &str, input: &str, member: &str) -> StreamsGroupHeartbeatRequest {
    StreamsGroupHeartbeatRequest::default()
        .with_group_id(group_id(app))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_topology(Some(word_count(app, input)))
        .with_active_tasks(Some(vec![]))
        .with_standby_tasks(Some(vec![]))
        .with_warmup_tasks(Some(vec![]))
        .with_process_id(Some(s(&uuid::Uuid::new_v4().to_string())))
        .with_client_tags(Some(vec![]))
        .with_task_offsets(Some(vec![]))
        .with_task_end_offsets(Some(vec![]))
}

/// A heartbeat of a member at `epoch` that changed nothing (every optional field null).
fn steady(app: &str, member: &str, epoch: i32) -> StreamsGroupHeartbeatRequest {
    StreamsGroupHeartbeatRequest::default()
        .with_group_id(group_id(app))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
}

fn heartbeat(c: &mut Client, req: &StreamsGroupHeartbeatRequest) -> StreamsGroupHeartbeatResponse {
    c.send(1, req)
}

fn codes(r: &StreamsGroupHeartbeatResponse) -> Vec<i8> {
    r.status.iter().flatten().map(|s| s.status_code).collect()
}

fn tasks(t: &[TaskIds]) -> BTreeMap<String, Vec<i32>> {
    t.iter()
        .map(|t| (t.subtopology_id.to_string(), t.partitions.clone()))
        .collect()
}

/// The partition count of `topic`, if it exists (asking creates nothing).
fn partitions(c: &mut Client, topic: &str) -> Option<usize> {
    let r = c.send(
        12,
        &MetadataRequest::default()
            .with_allow_auto_topic_creation(false)
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic_name(topic)))
            ])),
    );
    let t = &r.topics[0];
    err(t.error_code).is_none().then_some(t.partitions.len())
}

/// `app`'s input topic with three partitions, in Metadata. (Kafka's group coordinator may still
/// report it missing on the first heartbeat: its metadata image follows a moment later.)
fn input_topic(c: &mut Client, app: &str) -> String {
    let input = format!("{app}-input");
    create_topic(c, &input, 3);
    let deadline = Instant::now() + DEADLINE;
    while partitions(c, &input) != Some(3) {
        assert!(
            Instant::now() < deadline,
            "{input} never showed in Metadata"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    input
}

#[test]
fn api_versions_advertise_the_streams_group_apis_and_streams_version() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let v = c.api_versions(3);
    for key in [ApiKey::StreamsGroupHeartbeat, ApiKey::StreamsGroupDescribe] {
        let k = v
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .unwrap_or_else(|| panic!("{key:?} not advertised"));
        assert_eq!((k.min_version, k.max_version), (0, 1), "{key:?}");
    }
    let update = ApiKey::StreamsGroupTopologyDescriptionUpdate as i16;
    let k = v.api_keys.iter().find(|k| k.api_key == update);
    assert_eq!(k.map(|k| (k.min_version, k.max_version)), Some((0, 0)));
    let streams = v
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "streams.version")
        .expect("streams.version finalized");
    assert!(streams.max_version_level >= 1, "{streams:?}");
}

#[test]
fn malformed_and_unknown_heartbeats_get_kafkas_errors_and_messages() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let app = unique("streams-errors");
    let input = input_topic(&mut c, &app);
    let refused = |c: &mut Client, req: StreamsGroupHeartbeatRequest| {
        let r = heartbeat(c, &req);
        (err(r.error_code), r.error_message.map(|m| m.to_string()))
    };
    let message = |e: ResponseError, m: &str| (Some(e), Some(m.to_string()));
    assert_eq!(
        refused(&mut c, joining(&app, &input, "m1").with_topology(None)),
        message(
            ResponseError::InvalidRequest,
            "Topology must be non-null when (re-)joining."
        )
    );
    assert_eq!(
        refused(&mut c, joining(&app, &input, "")),
        message(ResponseError::InvalidRequest, "MemberId can't be empty.")
    );
    assert_eq!(
        refused(&mut c, joining("", &input, "m1")),
        message(ResponseError::InvalidRequest, "GroupId can't be empty.")
    );
    assert_eq!(
        refused(
            &mut c,
            joining(&app, &input, "m1").with_rebalance_timeout_ms(-1)
        ),
        message(
            ResponseError::InvalidRequest,
            "RebalanceTimeoutMs must be provided in first request."
        )
    );
    let missing = unique("streams-missing");
    assert_eq!(
        refused(&mut c, steady(&missing, "m1", 3)),
        message(
            ResponseError::GroupIdNotFound,
            &format!("Streams group {missing} not found.")
        )
    );
    let joined = heartbeat(&mut c, &joining(&app, &input, "m1"));
    assert_eq!(err(joined.error_code), None, "{joined:?}");
    let epoch = joined.member_epoch;
    assert_eq!(
        refused(&mut c, steady(&app, "m2", epoch)),
        message(
            ResponseError::UnknownMemberId,
            &format!("Member m2 is not a member of group {app}.")
        )
    );
    assert_eq!(
        refused(&mut c, steady(&app, "m1", epoch + 5)),
        message(
            ResponseError::FencedMemberEpoch,
            &format!(
                "The streams group member has a greater member epoch ({}) than the one known \
                 by the group coordinator ({epoch}). The member must abandon all its partitions \
                 and rejoin.",
                epoch + 5
            )
        )
    );
    let newer = word_count(&app, &input).with_epoch(1);
    assert_eq!(
        refused(
            &mut c,
            joining(&app, &input, "m1").with_topology(Some(newer))
        ),
        message(
            ResponseError::InvalidRequest,
            "Topology updates are not supported yet."
        )
    );
    // Leaving: epoch -1 back; a second leave, or one of a stranger, is UNKNOWN_MEMBER_ID.
    let left = heartbeat(&mut c, &steady(&app, "m1", -1));
    assert_eq!((err(left.error_code), left.member_epoch), (None, -1));
    for member in ["m1", "m9"] {
        assert_eq!(
            refused(&mut c, steady(&app, member, -1)),
            message(
                ResponseError::UnknownMemberId,
                &format!("Member {member} is not a member of group {app}.")
            )
        );
    }
}

#[test]
fn the_first_member_gets_every_task_once_the_coordinator_created_the_internal_topics() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let app = unique("streams-first");
    let input = input_topic(&mut c, &app);
    let joined = heartbeat(&mut c, &joining(&app, &input, "m1"));
    assert_eq!(err(joined.error_code), None, "{joined:?}");
    assert_eq!(joined.member_epoch, 1);
    assert_eq!(
        (
            joined.heartbeat_interval_ms,
            joined.acceptable_recovery_lag,
            joined.task_offset_interval_ms
        ),
        (5_000, 10_000, 60_000),
        "the broker defaults"
    );
    assert!(
        codes(&joined).contains(&ASSIGNMENT_DELAYED),
        "the initial rebalance delay holds the first assignment back: {:?}",
        joined.status
    );
    assert_eq!(
        joined.active_tasks.as_deref(),
        Some(&[][..]),
        "a joining member gets its (empty) assignment"
    );
    // Heartbeats until the assignment comes; meanwhile the coordinator creates the repartition
    // and changelog topics with the input's partition count.
    let mut epoch = joined.member_epoch;
    let mut statuses = codes(&joined);
    let deadline = Instant::now() + DEADLINE;
    let assigned = loop {
        let r = heartbeat(&mut c, &steady(&app, "m1", epoch));
        assert_eq!(err(r.error_code), None, "{r:?}");
        statuses.extend(codes(&r));
        epoch = r.member_epoch;
        if let Some(active) = &r.active_tasks {
            if !active.is_empty() {
                break r;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no assignment; statuses {statuses:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        tasks(assigned.active_tasks.as_deref().unwrap_or_default()),
        BTreeMap::from([
            ("0".to_string(), vec![0, 1, 2]),
            ("1".to_string(), vec![0, 1, 2])
        ]),
        "every task of both subtopologies, sorted"
    );
    assert_eq!(assigned.standby_tasks.as_deref(), Some(&[][..]));
    assert_eq!(assigned.warmup_tasks.as_deref(), Some(&[][..]));
    assert_eq!(
        assigned.status.as_deref(),
        Some(&[][..]),
        "no status once assigned"
    );
    assert!(
        assigned.member_epoch > 1,
        "the group epoch moved with the topics"
    );
    for internal in ["words-repartition", "counts-changelog"] {
        assert_eq!(
            partitions(&mut c, &format!("{app}-{internal}")),
            Some(3),
            "{internal} created with the input's partition count"
        );
    }
    // Nothing changed: the tasks and statuses are not repeated... except the empty status list.
    let again = heartbeat(&mut c, &steady(&app, "m1", assigned.member_epoch));
    assert_eq!(err(again.error_code), None);
    assert_eq!(again.active_tasks, None);
    assert_eq!(again.member_epoch, assigned.member_epoch);

    let described: StreamsGroupDescribeResponse = c.send(
        0,
        &StreamsGroupDescribeRequest::default().with_group_ids(vec![group_id(&app)]),
    );
    let g = &described.groups[0];
    assert_eq!(err(g.error_code), None, "{g:?}");
    assert_eq!(g.group_state.as_str(), "Stable");
    assert_eq!(g.group_epoch, assigned.member_epoch);
    assert_eq!(g.assignment_epoch, assigned.member_epoch);
    assert_eq!(g.members.len(), 1);
    let m = &g.members[0];
    assert_eq!(
        (m.member_id.as_str(), m.member_epoch),
        ("m1", assigned.member_epoch)
    );
    assert_eq!(tasks_of(&m.assignment.active_tasks).len(), 2);
    let topology = g.topology.as_ref().expect("the topology");
    let subtopologies = topology.subtopologies.as_deref().unwrap_or_default();
    assert_eq!(subtopologies.len(), 2);
    let counts = &subtopologies[1].state_changelog_topics[0];
    assert_eq!(
        (counts.name.as_str(), counts.partitions),
        (format!("{app}-counts-changelog").as_str(), 3),
        "the configured partition count"
    );
}

fn tasks_of(
    t: &[kafka_protocol::messages::streams_group_describe_response::TaskIds],
) -> BTreeMap<String, Vec<i32>> {
    t.iter()
        .map(|t| (t.subtopology_id.to_string(), t.partitions.clone()))
        .collect()
}

#[test]
fn a_source_topic_that_does_not_exist_is_reported_missing_and_nothing_is_assigned() {
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let app = unique("streams-nosource");
    let input = format!("{app}-input");
    let joined = heartbeat(&mut c, &joining(&app, &input, "m1"));
    assert_eq!(err(joined.error_code), None, "{joined:?}");
    let missing = joined
        .status
        .iter()
        .flatten()
        .find(|s| s.status_code == MISSING_SOURCE_TOPICS)
        .unwrap_or_else(|| panic!("{:?}", joined.status));
    assert_eq!(
        missing.status_detail.as_str(),
        format!("Source topics {input} are missing.")
    );
    assert!(!codes(&joined).contains(&MISSING_INTERNAL_TOPICS));
    assert_eq!(
        partitions(&mut c, &format!("{app}-words-repartition")),
        None
    );
    let described: StreamsGroupDescribeResponse = c.send(
        0,
        &StreamsGroupDescribeRequest::default().with_group_ids(vec![group_id(&app)]),
    );
    assert_eq!(described.groups[0].group_state.as_str(), "NotReady");
}

/// koord only (it owns the process): a streams group is durable. After kill -9 and a restart
/// the member heartbeats on at its epoch with its tasks, and the group describes as before.
#[test]
fn a_streams_group_survives_kill_9() {
    let Some(mut koord) = Koord::start_owned(
        "a_streams_group_survives_kill_9",
        &["group.streams.initial.rebalance.delay.ms=0"],
    ) else {
        return;
    };
    let mut c = koord.connect();
    let app = unique("streams-durable");
    let input = input_topic(&mut c, &app);
    let joined = heartbeat(&mut c, &joining(&app, &input, "m1"));
    assert_eq!(err(joined.error_code), None, "{joined:?}");
    // Heartbeat until every task is assigned (the internal topics are created meanwhile).
    let mut epoch = joined.member_epoch;
    let deadline = Instant::now() + DEADLINE;
    let active = loop {
        let r = heartbeat(&mut c, &steady(&app, "m1", epoch));
        assert_eq!(err(r.error_code), None, "{r:?}");
        epoch = r.member_epoch;
        if let Some(active) = r.active_tasks.filter(|a| !a.is_empty()) {
            break tasks(&active);
        }
        assert!(Instant::now() < deadline, "no assignment");
        std::thread::sleep(Duration::from_millis(50));
    };
    koord.kill9();
    koord.restart();
    let mut c = koord.connect();
    let owned = |a: &BTreeMap<String, Vec<i32>>| {
        a.iter()
            .map(|(s, p)| {
                kafka_protocol::messages::streams_group_heartbeat_request::TaskIds::default()
                    .with_subtopology_id(kafka_protocol::protocol::StrBytes::from_string(s.clone()))
                    .with_partitions(p.clone())
            })
            .collect::<Vec<_>>()
    };
    let again = heartbeat(
        &mut c,
        &steady(&app, "m1", epoch)
            .with_active_tasks(Some(owned(&active)))
            .with_standby_tasks(Some(vec![]))
            .with_warmup_tasks(Some(vec![])),
    );
    assert_eq!(err(again.error_code), None, "{again:?}");
    assert_eq!(
        again.member_epoch, epoch,
        "the same epoch after the restart"
    );
    assert_eq!(again.active_tasks, None, "nothing moved");
    let described: StreamsGroupDescribeResponse = c.send(
        0,
        &StreamsGroupDescribeRequest::default().with_group_ids(vec![group_id(&app)]),
    );
    let g = &described.groups[0];
    assert_eq!(g.group_state.as_str(), "Stable", "{g:?}");
    assert_eq!(tasks_of(&g.members[0].assignment.active_tasks), active);
}

/// `app`'s input topic and the answer to member m1's first heartbeat, which joined it.
fn first_member(c: &mut Client, app: &str) -> (String, StreamsGroupHeartbeatResponse) {
    let input = input_topic(c, app);
    let joined = heartbeat(c, &joining(app, &input, "m1"));
    assert_eq!(err(joined.error_code), None, "{joined:?}");
    (input, joined)
}

/// Commits to a streams group with a member, as Kafka 4.4's StreamsGroup checks them: the
/// member commits with OffsetCommit v9+ (below: UNSUPPORTED_VERSION), a commit that names no
/// member is UNKNOWN_MEMBER_ID, and a transactional one that names no member is taken.
#[test]
fn commits_to_a_streams_group_with_a_member() {
    use common::txn;
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let app = unique("streams-commits");
    let (input, joined) = first_member(&mut c, &app);
    let m1 = ("m1", joined.member_epoch);
    assert_eq!(common::commit_offset(&mut c, 9, &app, m1, &input, 7), None);
    assert_eq!(
        common::commit_offset(&mut c, 8, &app, m1, &input, 7),
        Some(ResponseError::UnsupportedVersion)
    );
    assert_eq!(
        common::commit_offset(&mut c, 9, &app, ("", -1), &input, 7),
        Some(ResponseError::UnknownMemberId)
    );
    let id = unique("streams-commits-txn");
    let producer = txn::init_txn(&mut c, &id, 60_000);
    assert_eq!(txn::add_offsets(&mut c, 3, &id, producer, &app), None);
    assert_eq!(
        txn::txn_offset_commit(&mut c, 3, &id, producer, &app, ("", -1), &input, 0, 3),
        None
    );
    assert_eq!(txn::end_txn(&mut c, 3, &id, producer, true), None);
}

/// KIP-1331 without a topology description plugin (Kafka 4.4's default): a member's pushed
/// description is UNSUPPORTED_VERSION with Kafka's reason, heartbeats never ask for one, and
/// StreamsGroupDescribe v1 asked for it says NOT_STORED (1), without one.
#[test]
fn topology_descriptions_without_a_plugin() {
    use kafka_protocol::messages::streams_group_topology_description_update_request::TopologyDescription;
    use kafka_protocol::messages::{
        StreamsGroupTopologyDescriptionUpdateRequest, StreamsGroupTopologyDescriptionUpdateResponse,
    };
    let koord = Koord::start(&[]);
    let mut c = koord.connect();
    let app = unique("streams-description");
    let (_, joined) = first_member(&mut c, &app);
    assert!(!joined.topology_description_required, "{joined:?}");
    let pushed: StreamsGroupTopologyDescriptionUpdateResponse = c.send(
        0,
        &StreamsGroupTopologyDescriptionUpdateRequest::default()
            .with_group_id(group_id(&app))
            .with_member_id(s("m1"))
            .with_topology_epoch(0)
            .with_topology_description(TopologyDescription::default()),
    );
    assert_eq!(
        (
            err(pushed.error_code),
            pushed.error_message.as_ref().map(|m| m.as_str())
        ),
        (
            Some(ResponseError::UnsupportedVersion),
            Some("The broker has no streams group topology description plugin configured.")
        ),
        "{pushed:?}"
    );
    let described: StreamsGroupDescribeResponse = c.send(
        1,
        &StreamsGroupDescribeRequest::default()
            .with_group_ids(vec![group_id(&app)])
            .with_include_topology_description(true),
    );
    let g = &described.groups[0];
    assert_eq!(err(g.error_code), None, "{described:?}");
    assert_eq!(
        (
            g.topology_description_status,
            g.topology_description.is_none()
        ),
        (1, true),
        "{described:?}"
    );
}
