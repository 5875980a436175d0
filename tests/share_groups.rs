//! Wire conformance of KIP-932 share groups: ShareGroupHeartbeat v1 (key 76) and
//! ShareGroupDescribe v1 (key 77), and what ListGroups and DescribeGroups answer for a share
//! group. Every test passes against koord and, in the conformance tier (`KOORD_BOOTSTRAP` at
//! `scripts/kafka.sh`'s broker), against Apache Kafka 4.4. koord is started with
//! [`SHARE_LIKE`], the values `scripts/kafka.sh` gives the broker.
//!
//! What Kafka 4.4 answers, case by case (its `GroupCoordinatorService` and
//! `GroupMetadataManager.shareGroupHeartbeat`):
//! - a malformed heartbeat is INVALID_REQUEST with a message, checked in this order: empty member
//!   id, empty group id, empty rack id, epoch 0 without subscribed topics, epoch below -1;
//! - a member joins with epoch 0; its assignment may be empty at first: Kafka assigns a topic's
//!   partitions only once the share coordinator has initialized their state, and the heartbeat
//!   after that gets them (a new epoch). The simple assignor shares a partition between members
//!   when there are more members than partitions, and splits them otherwise;
//! - UNKNOWN_MEMBER_ID for a member the group does not know (a leave included),
//!   FENCED_MEMBER_EPOCH for an epoch above the member's; GROUP_ID_NOT_FOUND for a missing group
//!   ("Share group X not found." for epoch > 0, "Group X not found." for a leave) and for a group
//!   of another type ("Group X is not a share group."), members or not, whatever the epoch;
//! - ShareGroupDescribe: state, epochs, the assignor `simple`, members with their subscriptions
//!   and assignment (topic ids and names); a missing group is "Group X not found.", a classic or
//!   consumer group "Group X is not a share group." (both GROUP_ID_NOT_FOUND);
//! - ListGroups v5: type `share`, protocol type `share`;
//! - DescribeGroups of a share group: as of a consumer group (no error and Dead below v6,
//!   GROUP_ID_NOT_FOUND "Group X is not a classic group." at v6).
//!
//! Nothing waits on a fixed sleep: state changes are awaited by heartbeating (as a client does)
//! until they show, with a deadline that only bounds a failure.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::{err, group_id, s, topic_name, unique, Client, Koord, DEADLINE};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, CreateTopicsRequest, DescribeGroupsRequest,
    JoinGroupRequest, ListGroupsRequest, MetadataRequest, MetadataResponse, OffsetCommitRequest,
    ShareGroupDescribeRequest, ShareGroupDescribeResponse, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse, SyncGroupRequest,
};
use kafka_protocol::ResponseError;
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// Server, topics
// ---------------------------------------------------------------------------------------------

/// The share-group settings `scripts/kafka.sh` gives the reference broker: a 6 s session, a 1 s
/// heartbeat interval (and minimums that allow them), no initial rebalance delay for the
/// classic groups some tests make.
const SHARE_LIKE: &[&str] = &[
    "group.min.session.timeout.ms=1000",
    "group.initial.rebalance.delay.ms=0",
    "group.share.min.session.timeout.ms=1000",
    "group.share.session.timeout.ms=6000",
    "group.share.min.heartbeat.interval.ms=500",
    "group.share.heartbeat.interval.ms=1000",
];

/// `group.share.heartbeat.interval.ms` above.
const HEARTBEAT_INTERVAL_MS: i32 = 1_000;

/// The client id every connection sends (see `common::request_header`).
const CLIENT_ID: &str = "koord-wire-test";

fn server() -> Koord {
    Koord::start(SHARE_LIKE)
}

/// Polls `probe` until it returns `Some`, for at most [`DEADLINE`].
fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Creates `name` with `partitions` and waits until Metadata shows it with a leader for every
/// partition; its topic id.
fn create_topic(c: &mut Client, name: &str, partitions: i32) -> Uuid {
    let resp = c.send(
        7,
        &CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(topic_name(name))
                .with_num_partitions(partitions)
                .with_replication_factor(1)])
            .with_timeout_ms(10_000),
    );
    assert_eq!(
        err(resp.topics[0].error_code),
        None,
        "create {name}: {resp:?}"
    );
    eventually(&format!("topic {name} in Metadata"), || {
        let resp: MetadataResponse = c.send(
            12,
            &MetadataRequest::default()
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(topic_name(name)))
                ]))
                .with_allow_auto_topic_creation(false),
        );
        let t = resp.topics.first()?;
        (err(t.error_code).is_none()
            && !t.topic_id.is_nil()
            && t.partitions.len() == partitions as usize
            && t.partitions.iter().all(|p| p.leader_id.0 >= 0))
        .then_some(t.topic_id)
    })
}

// ---------------------------------------------------------------------------------------------
// ShareGroupHeartbeat
// ---------------------------------------------------------------------------------------------

/// Partitions by topic id, sorted.
type Parts = BTreeMap<Uuid, BTreeSet<i32>>;

fn parts(topic: Uuid, partitions: impl IntoIterator<Item = i32>) -> Parts {
    Parts::from([(topic, partitions.into_iter().collect())])
}

fn count(p: &Parts) -> usize {
    p.values().map(BTreeSet::len).sum()
}

/// The assignment of a heartbeat response; `None` when it carries none (null: unchanged).
fn assigned(resp: &ShareGroupHeartbeatResponse) -> Option<Parts> {
    resp.assignment.as_ref().map(|a| {
        let mut out = Parts::new();
        for t in &a.topic_partitions {
            out.entry(t.topic_id)
                .or_default()
                .extend(t.partitions.iter().copied());
        }
        out.retain(|_, ps| !ps.is_empty());
        out
    })
}

/// The first heartbeat (epoch 0) of `member` subscribing to `topics`.
fn joining(group: &str, member: &str, topics: &[&str]) -> ShareGroupHeartbeatRequest {
    ShareGroupHeartbeatRequest::default()
        .with_group_id(group_id(group))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(topics.iter().map(|t| topic_name(t)).collect()))
}

/// A heartbeat of a member at `epoch` that changed nothing (the subscription null).
fn steady(group: &str, member: &str, epoch: i32) -> ShareGroupHeartbeatRequest {
    ShareGroupHeartbeatRequest::default()
        .with_group_id(group_id(group))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
}

fn heartbeat(c: &mut Client, req: &ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse {
    c.send(1, req)
}

/// A heartbeat that must succeed.
fn ok_hb(c: &mut Client, req: &ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse {
    let resp = heartbeat(c, req);
    assert_eq!(err(resp.error_code), None, "{req:?}\n=> {resp:?}");
    resp
}

/// The error and message of a heartbeat that must fail.
fn refused(
    c: &mut Client,
    req: &ShareGroupHeartbeatRequest,
) -> (Option<ResponseError>, Option<String>) {
    let resp = heartbeat(c, req);
    (
        err(resp.error_code),
        resp.error_message.map(|m| m.to_string()),
    )
}

fn message(e: ResponseError, m: &str) -> (Option<ResponseError>, Option<String>) {
    (Some(e), Some(m.to_string()))
}

/// A share member as its heartbeats left it.
#[derive(Debug, Clone)]
struct Member {
    id: String,
    epoch: i32,
    /// The last assignment it was given.
    owns: Parts,
}

/// `id` joins `group` subscribing to `topics`: the first heartbeat's checks (the member id
/// echoed, an epoch, the broker's heartbeat interval, an assignment, maybe empty).
fn join_as(c: &mut Client, group: &str, id: &str, topics: &[&str]) -> Member {
    let resp = ok_hb(c, &joining(group, id, topics));
    assert_eq!(resp.member_id.as_deref(), Some(id), "{resp:?}");
    assert!(resp.member_epoch > 0, "{resp:?}");
    assert_eq!(
        resp.heartbeat_interval_ms, HEARTBEAT_INTERVAL_MS,
        "{resp:?}"
    );
    Member {
        id: id.to_string(),
        epoch: resp.member_epoch,
        owns: assigned(&resp).expect("a joining member gets its assignment, maybe empty"),
    }
}

fn join(c: &mut Client, group: &str, topics: &[&str]) -> Member {
    join_as(c, group, &Uuid::new_v4().to_string(), topics)
}

/// One heartbeat of `m`; takes on the epoch and any new assignment.
fn beat(c: &mut Client, group: &str, m: &mut Member) -> ShareGroupHeartbeatResponse {
    let resp = ok_hb(c, &steady(group, &m.id, m.epoch));
    m.epoch = resp.member_epoch;
    if let Some(a) = assigned(&resp) {
        m.owns = a;
    }
    resp
}

/// Heartbeats every member in turn until `done` holds for them all.
fn converge(c: &mut Client, group: &str, members: &mut [Member], done: impl Fn(&[Member]) -> bool) {
    if done(members) {
        return;
    }
    eventually(&format!("{group}: members converge"), || {
        for m in members.iter_mut() {
            beat(c, group, m);
        }
        done(members).then_some(())
    });
}

/// Whether every member owns `n` partitions and all are at one epoch.
fn settled(n: usize) -> impl Fn(&[Member]) -> bool {
    move |ms: &[Member]| {
        ms.iter()
            .all(|m| count(&m.owns) == n && m.epoch == ms[0].epoch)
    }
}

// ---------------------------------------------------------------------------------------------
// Classic and consumer groups
// ---------------------------------------------------------------------------------------------

/// A ConsumerProtocolSubscription v0 to no topic, as JoinGroup metadata.
fn subscription() -> bytes::Bytes {
    use kafka_protocol::protocol::Encodable;
    let mut b = bytes::BytesMut::new();
    bytes::BufMut::put_i16(&mut b, 0);
    kafka_protocol::messages::ConsumerProtocolSubscription::default()
        .encode(&mut b, 0)
        .expect("encode a subscription");
    b.freeze()
}

/// A classic group with one Stable member (JoinGroup v3, which takes an empty member id, and
/// SyncGroup v3); the member id.
fn classic_group(c: &mut Client, group: &str) -> String {
    let joined = c.send(
        3,
        &JoinGroupRequest::default()
            .with_group_id(group_id(group))
            .with_session_timeout_ms(30_000)
            .with_rebalance_timeout_ms(30_000)
            .with_member_id(s(""))
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(subscription())]),
    );
    assert_eq!(err(joined.error_code), None, "{joined:?}");
    let member = joined.member_id.to_string();
    let sync = c.send(
        3,
        &SyncGroupRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id(joined.generation_id)
            .with_member_id(s(&member))
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(s(&member))
                .with_assignment(Default::default())]),
    );
    assert_eq!(err(sync.error_code), None, "{sync:?}");
    member
}

/// An Empty classic group that holds a committed offset (an admin commit: generation -1, no
/// member).
fn empty_classic_group(c: &mut Client, group: &str, topic: &str) {
    let resp = c.send(
        8,
        &OffsetCommitRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(s(""))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(0)])]),
    );
    assert_eq!(
        err(resp.topics[0].partitions[0].error_code),
        None,
        "{resp:?}"
    );
}

/// A KIP-848 consumer group with one member subscribed to `topic`.
fn consumer_group(c: &mut Client, group: &str, topic: &str) {
    let resp = c.send(
        1,
        &ConsumerGroupHeartbeatRequest::default()
            .with_group_id(group_id(group))
            .with_member_id(s(&Uuid::new_v4().to_string()))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![topic_name(topic)]))
            .with_topic_partitions(Some(vec![])),
    );
    assert_eq!(err(resp.error_code), None, "{resp:?}");
}

// ---------------------------------------------------------------------------------------------
// ShareGroupDescribe
// ---------------------------------------------------------------------------------------------

type Described = kafka_protocol::messages::share_group_describe_response::DescribedGroup;

fn describe(c: &mut Client, groups: &[&str], operations: bool) -> ShareGroupDescribeResponse {
    c.send(
        1,
        &ShareGroupDescribeRequest::default()
            .with_group_ids(groups.iter().map(|g| group_id(g)).collect())
            .with_include_authorized_operations(operations),
    )
}

/// ShareGroupDescribe of a group that must exist.
fn describe_one(c: &mut Client, group: &str) -> Described {
    let resp = describe(c, &[group], false);
    assert_eq!(resp.groups.len(), 1, "{resp:?}");
    let g = resp.groups[0].clone();
    assert_eq!(err(g.error_code), None, "{resp:?}");
    g
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[test]
fn api_versions_advertise_share_group_heartbeat_and_describe_v1_and_share_version() {
    let koord = server();
    let v = koord.connect().api_versions(3);
    for key in [ApiKey::ShareGroupHeartbeat, ApiKey::ShareGroupDescribe] {
        let k = v
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .unwrap_or_else(|| panic!("{key:?} not advertised"));
        assert_eq!((k.min_version, k.max_version), (1, 1), "{key:?}");
    }
    let share = v
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "share.version")
        .unwrap_or_else(|| panic!("share.version not finalized: {:?}", v.finalized_features));
    // Level 2 (Kafka 4.4's default): share groups with dead-letter queues (KIP-1191).
    assert_eq!(share.max_version_level, 2, "{share:?}");
}

#[test]
fn malformed_heartbeats_are_invalid_request_with_kafkas_messages() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("sg-malformed"), unique("st-malformed"));
    let invalid = |m: &str| match m {
        "" => (Some(ResponseError::InvalidRequest), None),
        m => message(ResponseError::InvalidRequest, m),
    };
    // In Kafka's order: the member id is checked before the group id, and so on. An empty
    // member id gets no message from Kafka 4.4 (its broker refuses it before the group
    // coordinator's check, whose message is "MemberId can't be empty.").
    let cases = [
        ("empty member id", joining(&group, "", &[&topic]), ""),
        (
            "empty group id",
            joining("", "m1", &[&topic]),
            "GroupId can't be empty.",
        ),
        (
            "empty rack id",
            joining(&group, "m1", &[&topic]).with_rack_id(Some(s(""))),
            "RackId can't be empty.",
        ),
        (
            "epoch 0, null topics",
            joining(&group, "m1", &[]).with_subscribed_topic_names(None),
            "SubscribedTopicNames must be set in first request.",
        ),
        (
            "epoch 0, no topics",
            joining(&group, "m1", &[]),
            "SubscribedTopicNames must be set in first request.",
        ),
        (
            "epoch -2",
            steady(&group, "m1", -2),
            "MemberEpoch is invalid.",
        ),
        (
            "epoch MIN",
            steady(&group, "m1", i32::MIN),
            "MemberEpoch is invalid.",
        ),
    ];
    let got: Vec<_> = cases
        .iter()
        .map(|(what, req, _)| (*what, refused(&mut c, req)))
        .collect();
    let want: Vec<_> = cases
        .iter()
        .map(|(what, _, m)| (*what, invalid(m)))
        .collect();
    assert_eq!(got, want);
    // None of them made the group.
    let resp = describe(&mut c, &[&group], false);
    assert_eq!(
        err(resp.groups[0].error_code),
        Some(ResponseError::GroupIdNotFound),
        "{resp:?}"
    );
}

#[test]
fn first_member_gets_every_partition_once_they_are_initialized() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("sg-first"), unique("st-first"));
    let tid = create_topic(&mut c, &topic, 3);
    let mut m = join(&mut c, &group, &[&topic]);
    let joined_epoch = m.epoch;
    // Kafka may hand out the partitions only on a later heartbeat (their share state is
    // initialized first); koord at once.
    converge(&mut c, &group, std::slice::from_mut(&mut m), settled(3));
    assert_eq!(m.owns, parts(tid, 0..3), "{m:?}");
    assert!(m.epoch >= joined_epoch, "{m:?}");
    // Nothing changed: no assignment in the answer, the same epoch.
    let again = beat(&mut c, &group, &mut m);
    assert_eq!(
        (again.assignment.as_ref(), again.member_epoch),
        (None, m.epoch),
        "{again:?}"
    );
    // A full heartbeat (the subscription sent again) gets it whole.
    let full = ok_hb(
        &mut c,
        &steady(&group, &m.id, m.epoch).with_subscribed_topic_names(Some(vec![topic_name(&topic)])),
    );
    assert_eq!(assigned(&full), Some(parts(tid, 0..3)), "{full:?}");
    assert_eq!(full.member_epoch, m.epoch, "{full:?}");
}

#[test]
fn the_simple_assignor_shares_a_partition_between_members_and_splits_several() {
    let koord = server();
    let mut c = koord.connect();
    // One partition, two members: both get it.
    let (group, topic) = (unique("sg-shared"), unique("st-shared"));
    let tid = create_topic(&mut c, &topic, 1);
    let mut members = vec![join(&mut c, &group, &[&topic])];
    converge(&mut c, &group, &mut members, settled(1));
    let first_epoch = members[0].epoch;
    members.push(join(&mut c, &group, &[&topic]));
    converge(&mut c, &group, &mut members, settled(1));
    for m in &members {
        assert_eq!(m.owns, parts(tid, [0]), "{members:?}");
    }
    assert!(
        members[0].epoch > first_epoch,
        "the second member bumped the group epoch: {members:?}"
    );
    // Two partitions, two members: one each.
    let (group, topic) = (unique("sg-split"), unique("st-split"));
    let tid = create_topic(&mut c, &topic, 2);
    let mut members = vec![join(&mut c, &group, &[&topic])];
    converge(&mut c, &group, &mut members, settled(2));
    members.push(join(&mut c, &group, &[&topic]));
    converge(&mut c, &group, &mut members, settled(1));
    let union: BTreeSet<i32> = members
        .iter()
        .flat_map(|m| m.owns[&tid].iter().copied())
        .collect();
    assert_eq!(union, BTreeSet::from([0, 1]), "{members:?}");
}

#[test]
fn unknown_member_fenced_epoch_leave_and_missing_group() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("sg-errors"), unique("st-errors"));
    create_topic(&mut c, &topic, 1);
    let mut m = join(&mut c, &group, &[&topic]);
    converge(&mut c, &group, std::slice::from_mut(&mut m), settled(1));
    let epoch = m.epoch;
    assert_eq!(
        refused(&mut c, &steady(&group, "stranger", epoch)),
        message(
            ResponseError::UnknownMemberId,
            &format!("Member stranger is not a member of group {group}.")
        )
    );
    assert_eq!(
        refused(&mut c, &steady(&group, &m.id, epoch + 5)),
        message(
            ResponseError::FencedMemberEpoch,
            &format!(
                "The share group member has a greater member epoch ({}) than the one known by \
                 the group coordinator ({epoch}). The member must abandon all its partitions \
                 and rejoin.",
                epoch + 5
            )
        )
    );
    // The member is still there, at its epoch.
    let still = beat(&mut c, &group, &mut m);
    assert_eq!(still.member_epoch, epoch, "{still:?}");
    // Leaving: epoch -1 back with the member id; a second leave, or a stranger's, is
    // UNKNOWN_MEMBER_ID.
    let left = ok_hb(&mut c, &steady(&group, &m.id, -1));
    assert_eq!(
        (left.member_id.as_deref(), left.member_epoch),
        (Some(m.id.as_str()), -1),
        "{left:?}"
    );
    for member in [m.id.as_str(), "stranger"] {
        assert_eq!(
            refused(&mut c, &steady(&group, member, -1)),
            message(
                ResponseError::UnknownMemberId,
                &format!("Member {member} is not a member of group {group}.")
            )
        );
    }
    // A heartbeat at an epoch of the member that left: it is unknown now.
    assert_eq!(
        refused(&mut c, &steady(&group, &m.id, epoch)),
        message(
            ResponseError::UnknownMemberId,
            &format!("Member {} is not a member of group {group}.", m.id)
        )
    );
    let missing = unique("sg-missing");
    assert_eq!(
        refused(&mut c, &steady(&missing, "m1", 3)),
        message(
            ResponseError::GroupIdNotFound,
            &format!("Share group {missing} not found.")
        )
    );
    assert_eq!(
        refused(&mut c, &steady(&missing, "m1", -1)),
        message(
            ResponseError::GroupIdNotFound,
            &format!("Group {missing} not found.")
        )
    );
}

#[test]
fn share_heartbeat_to_a_classic_or_consumer_group_with_members_is_group_id_not_found() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("st-other");
    create_topic(&mut c, &topic, 1);
    let classic = unique("sg-classic");
    classic_group(&mut c, &classic);
    let consumer = unique("sg-consumer");
    consumer_group(&mut c, &consumer, &topic);
    for group in [&classic, &consumer] {
        for req in [
            joining(group, "m1", &[&topic]),
            steady(group, "m1", 3),
            steady(group, "m1", -1),
        ] {
            assert_eq!(
                refused(&mut c, &req),
                message(
                    ResponseError::GroupIdNotFound,
                    &format!("Group {group} is not a share group.")
                ),
                "epoch {}",
                req.member_epoch
            );
        }
    }
}

#[test]
fn share_heartbeat_to_an_empty_classic_group_is_group_id_not_found() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("st-empty-classic");
    create_topic(&mut c, &topic, 1);
    let group = unique("sg-empty-classic");
    empty_classic_group(&mut c, &group, &topic);
    // Kafka turns no group of another type into a share group, empty or not.
    assert_eq!(
        refused(&mut c, &joining(&group, "m1", &[&topic])),
        message(
            ResponseError::GroupIdNotFound,
            &format!("Group {group} is not a share group.")
        )
    );
}

#[test]
fn share_group_describe_shows_state_epochs_assignor_and_members() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("sg-describe"), unique("st-describe"));
    let tid = create_topic(&mut c, &topic, 1);
    let with_rack = ok_hb(
        &mut c,
        &joining(&group, "member-a", &[&topic]).with_rack_id(Some(s("r1"))),
    );
    let mut members = vec![Member {
        id: "member-a".into(),
        epoch: with_rack.member_epoch,
        owns: assigned(&with_rack).expect("an assignment"),
    }];
    members.push(join_as(&mut c, &group, "member-b", &[&topic]));
    converge(&mut c, &group, &mut members, settled(1));
    let epoch = members[0].epoch;
    let g = describe_one(&mut c, &group);
    assert_eq!(g.error_message, None, "{g:?}");
    assert_eq!(g.group_id.0.as_str(), group, "{g:?}");
    assert_eq!(g.group_state.as_str(), "Stable", "{g:?}");
    assert_eq!((g.group_epoch, g.assignment_epoch), (epoch, epoch), "{g:?}");
    assert_eq!(g.assignor_name.as_str(), "simple", "{g:?}");
    assert_eq!(g.authorized_operations, i32::MIN, "not asked for: {g:?}");
    let mut described = g.members.clone();
    described.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    assert_eq!(described.len(), 2, "{g:?}");
    for (m, rack) in described.iter().zip([Some("r1"), None]) {
        assert_eq!(m.member_epoch, epoch, "{m:?}");
        assert_eq!(m.rack_id.as_deref(), rack, "{m:?}");
        assert_eq!(m.client_id.as_str(), CLIENT_ID, "{m:?}");
        // Java's InetAddress.toString(): a leading slash.
        assert_eq!(m.client_host.as_str(), "/127.0.0.1", "{m:?}");
        assert_eq!(m.subscribed_topic_names, vec![topic_name(&topic)], "{m:?}");
        let a: Vec<_> = m
            .assignment
            .topic_partitions
            .iter()
            .map(|t| (t.topic_id, t.topic_name.0.to_string(), t.partitions.clone()))
            .collect();
        assert_eq!(a, vec![(tid, topic.clone(), vec![0])], "{m:?}");
    }
    assert_eq!(
        described
            .iter()
            .map(|m| m.member_id.as_str())
            .collect::<Vec<_>>(),
        ["member-a", "member-b"]
    );
    // Asked for, with no authorizer: READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS,
    // as for any group.
    let asked = describe(&mut c, &[&group], true);
    assert_eq!(asked.groups[0].authorized_operations, 3400, "{asked:?}");
    // Once both left: Empty, no members, the epochs moved on.
    for m in &members {
        ok_hb(&mut c, &steady(&group, &m.id, -1));
    }
    let g = describe_one(&mut c, &group);
    assert_eq!(
        (
            g.group_state.as_str(),
            g.members.len(),
            g.assignor_name.as_str()
        ),
        ("Empty", 0, "simple"),
        "{g:?}"
    );
    assert!(g.group_epoch > epoch, "{g:?}");
}

#[test]
fn share_group_describe_of_a_missing_classic_or_consumer_group_is_group_id_not_found() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("st-describe-other");
    create_topic(&mut c, &topic, 1);
    let missing = unique("sg-describe-missing");
    let classic = unique("sg-describe-classic");
    classic_group(&mut c, &classic);
    let consumer = unique("sg-describe-consumer");
    consumer_group(&mut c, &consumer, &topic);
    let resp = describe(&mut c, &[&missing, &classic, &consumer], false);
    let answers: Vec<_> = resp
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.0.to_string(),
                err(g.error_code),
                g.error_message.as_ref().map(|m| m.to_string()),
                g.group_state.to_string(),
                (g.group_epoch, g.assignment_epoch),
                g.assignor_name.to_string(),
                g.members.len(),
                g.authorized_operations,
            )
        })
        .collect();
    let not_found = |g: &str, m: String| {
        (
            g.to_string(),
            Some(ResponseError::GroupIdNotFound),
            Some(m),
            String::new(),
            (0, 0),
            String::new(),
            0,
            i32::MIN,
        )
    };
    assert_eq!(
        answers,
        vec![
            not_found(&missing, format!("Group {missing} not found.")),
            not_found(&classic, format!("Group {classic} is not a share group.")),
            not_found(&consumer, format!("Group {consumer} is not a share group.")),
        ]
    );
}

/// ListGroups v5 with filters: group id -> (protocol type, state, type), of `ours` only.
fn list_groups(
    c: &mut Client,
    states: &[&str],
    types: &[&str],
    ours: &[&str],
) -> BTreeMap<String, (String, String, String)> {
    let resp = c.send(
        5,
        &ListGroupsRequest::default()
            .with_states_filter(states.iter().map(|v| s(v)).collect())
            .with_types_filter(types.iter().map(|v| s(v)).collect()),
    );
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    resp.groups
        .iter()
        .filter(|g| ours.contains(&g.group_id.0.as_str()))
        .map(|g| {
            (
                g.group_id.0.to_string(),
                (
                    g.protocol_type.to_string(),
                    g.group_state.to_string(),
                    g.group_type.to_string(),
                ),
            )
        })
        .collect()
}

#[test]
fn list_groups_v5_lists_share_groups_with_type_and_protocol_type_share() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("st-list");
    create_topic(&mut c, &topic, 1);
    let share = unique("sg-list-share");
    join(&mut c, &share, &[&topic]);
    let consumer = unique("sg-list-consumer");
    consumer_group(&mut c, &consumer, &topic);
    let ours = [share.as_str(), consumer.as_str()];
    let row = |p: &str, st: &str, ty: &str| (p.to_string(), st.to_string(), ty.to_string());
    let all = list_groups(&mut c, &[], &[], &ours);
    assert_eq!(
        all.get(&share),
        Some(&row("share", "Stable", "share")),
        "{all:?}"
    );
    for types in [&["share"][..], &["Share"], &["SHARE", "classic"]] {
        let got = list_groups(&mut c, &[], types, &ours);
        assert_eq!(got.keys().collect::<Vec<_>>(), vec![&share], "{types:?}");
    }
    let got = list_groups(&mut c, &[], &["consumer"], &ours);
    assert_eq!(got.keys().collect::<Vec<_>>(), vec![&consumer]);
    let got = list_groups(&mut c, &["stable"], &["share"], &ours);
    assert_eq!(got.keys().collect::<Vec<_>>(), vec![&share]);
    let got = list_groups(&mut c, &["Empty"], &["share"], &ours);
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn describe_groups_of_a_share_group_is_dead_below_v6_and_group_id_not_found_at_v6() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("sg-classic-describe"), unique("st-classic-describe"));
    create_topic(&mut c, &topic, 1);
    join(&mut c, &group, &[&topic]);
    for version in 0..=6 {
        let resp = c.send(
            version,
            &DescribeGroupsRequest::default().with_groups(vec![group_id(&group)]),
        );
        assert_eq!(resp.groups.len(), 1, "{resp:?}");
        let g = &resp.groups[0];
        let want = if version >= 6 {
            (
                Some(ResponseError::GroupIdNotFound),
                Some(format!("Group {group} is not a classic group.")),
            )
        } else {
            (None, None)
        };
        assert_eq!(
            (
                err(g.error_code),
                g.error_message.as_ref().map(|m| m.to_string())
            ),
            want,
            "v{version}: {g:?}"
        );
        assert_eq!(
            (
                g.group_state.as_str(),
                g.protocol_type.as_str(),
                g.protocol_data.as_str(),
                g.members.len()
            ),
            ("Dead", "", "", 0),
            "v{version}: {g:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups
// ---------------------------------------------------------------------------------------------

/// AlterShareGroupOffsets v0 of `group`: (topic, [(partition, start offset)]).
fn alter_offsets(
    c: &mut Client,
    group: &str,
    topics: &[(&str, &[(i32, i64)])],
) -> kafka_protocol::messages::AlterShareGroupOffsetsResponse {
    use kafka_protocol::messages::alter_share_group_offsets_request::{
        AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
    };
    c.send(
        0,
        &kafka_protocol::messages::AlterShareGroupOffsetsRequest::default()
            .with_group_id(group_id(group))
            .with_topics(
                topics
                    .iter()
                    .map(|(t, ps)| {
                        AlterShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(topic_name(t))
                            .with_partitions(
                                ps.iter()
                                    .map(|&(p, o)| {
                                        AlterShareGroupOffsetsRequestPartition::default()
                                            .with_partition_index(p)
                                            .with_start_offset(o)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            ),
    )
}

/// DeleteShareGroupOffsets v0 of `group`'s `topics`.
fn delete_offsets(
    c: &mut Client,
    group: &str,
    topics: &[&str],
) -> kafka_protocol::messages::DeleteShareGroupOffsetsResponse {
    use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
    c.send(
        0,
        &kafka_protocol::messages::DeleteShareGroupOffsetsRequest::default()
            .with_group_id(group_id(group))
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        DeleteShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(topic_name(t))
                    })
                    .collect(),
            ),
    )
}

/// DescribeShareGroupOffsets v1 of every partition `group` has state for:
/// (topic id, partition) -> start offset.
fn share_offsets(c: &mut Client, group: &str) -> BTreeMap<(Uuid, i32), i64> {
    use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
    let resp = c.send(
        1,
        &kafka_protocol::messages::DescribeShareGroupOffsetsRequest::default().with_groups(vec![
            DescribeShareGroupOffsetsRequestGroup::default()
                .with_group_id(group_id(group))
                .with_topics(None),
        ]),
    );
    let g = &resp.groups[0];
    assert_eq!(err(g.error_code), None, "{resp:?}");
    g.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| ((t.topic_id, p.partition_index), p.start_offset))
        })
        .collect()
}

fn top_level(
    code: i16,
    message: &Option<kafka_protocol::protocol::StrBytes>,
) -> (Option<ResponseError>, Option<String>) {
    (err(code), message.as_ref().map(|m| m.to_string()))
}

#[test]
fn alter_share_group_offsets_creates_the_group_and_sets_start_offsets() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("st-alter");
    let id = create_topic(&mut c, &topic, 2);
    let missing = unique("st-alter-missing");
    let group = unique("sg-alter");
    // Kafka's group coordinator learns of a new topic a moment after Metadata shows it, and
    // until then answers its partitions UNKNOWN_TOPIC_OR_PARTITION.
    let resp = eventually("the new topic known to the group coordinator", || {
        let resp = alter_offsets(
            &mut c,
            &group,
            &[(&topic, &[(0, 5), (1, 0), (7, 3)]), (&missing, &[(0, 1)])],
        );
        let known = resp
            .responses
            .iter()
            .any(|t| t.partitions.iter().any(|p| p.error_code == 0));
        known.then_some(resp)
    });
    assert_eq!(
        top_level(resp.error_code, &resp.error_message),
        (None, None),
        "{resp:?}"
    );
    let unknown = Some("This server does not host this topic-partition.".to_string());
    let got: Vec<_> = resp
        .responses
        .iter()
        .map(|t| {
            (
                t.topic_name.to_string(),
                t.topic_id,
                t.partitions
                    .iter()
                    .map(|p| {
                        (
                            p.partition_index,
                            err(p.error_code),
                            p.error_message.as_ref().map(|m| m.to_string()),
                        )
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                missing.clone(),
                Uuid::nil(),
                vec![(
                    0,
                    Some(ResponseError::UnknownTopicOrPartition),
                    unknown.clone()
                )]
            ),
            (
                topic.clone(),
                id,
                vec![
                    (0, None, None),
                    (1, None, None),
                    (7, Some(ResponseError::UnknownTopicOrPartition), unknown)
                ]
            ),
        ],
        "{resp:?}"
    );
    // The group exists now, an Empty share group, and starts where it was told.
    let row = (
        "share".to_string(),
        "Empty".to_string(),
        "share".to_string(),
    );
    assert_eq!(
        list_groups(&mut c, &[], &[], &[&group]).get(&group),
        Some(&row)
    );
    let want = BTreeMap::from([((id, 0), 5), ((id, 1), 0)]);
    eventually("the altered start offsets described", || {
        let got = share_offsets(&mut c, &group);
        (got == want).then_some(())
    });
    // Again, to other offsets: they replace the first ones.
    let resp = alter_offsets(&mut c, &group, &[(&topic, &[(0, 2)])]);
    assert_eq!(
        top_level(resp.error_code, &resp.error_message),
        (None, None),
        "{resp:?}"
    );
    let want = BTreeMap::from([((id, 0), 2), ((id, 1), 0)]);
    eventually("the second start offsets described", || {
        (share_offsets(&mut c, &group) == want).then_some(())
    });
}

#[test]
fn alter_and_delete_share_group_offsets_refuse_as_kafka_does() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("st-alter-ref");
    create_topic(&mut c, &topic, 1);
    // A share group with a member: NON_EMPTY_GROUP for both.
    let group = unique("sg-alter-ref");
    join(&mut c, &group, &[&topic]);
    let not_empty = message(ResponseError::NonEmptyGroup, "The group is not empty.");
    let resp = alter_offsets(&mut c, &group, &[(&topic, &[(0, 0)])]);
    assert_eq!(
        top_level(resp.error_code, &resp.error_message),
        not_empty,
        "{resp:?}"
    );
    assert!(resp.responses.is_empty(), "{resp:?}");
    let resp = delete_offsets(&mut c, &group, &[&topic]);
    assert_eq!(
        top_level(resp.error_code, &resp.error_message),
        not_empty,
        "{resp:?}"
    );
    assert!(resp.responses.is_empty(), "{resp:?}");
    // A classic group: not a share group.
    let classic = unique("sg-alter-classic");
    classic_group(&mut c, &classic);
    let other = message(
        ResponseError::GroupIdNotFound,
        &format!("Group {classic} is not a share group."),
    );
    let resp = alter_offsets(&mut c, &classic, &[(&topic, &[(0, 0)])]);
    assert_eq!(
        top_level(resp.error_code, &resp.error_message),
        other,
        "{resp:?}"
    );
    let resp = delete_offsets(&mut c, &classic, &[&topic]);
    assert_eq!(
        top_level(resp.error_code, &resp.error_message),
        other,
        "{resp:?}"
    );
    // No such group: DeleteShareGroupOffsets does not create one.
    let nobody = unique("sg-alter-nobody");
    let resp = delete_offsets(&mut c, &nobody, &[&topic]);
    assert_eq!(
        top_level(resp.error_code, &resp.error_message),
        message(
            ResponseError::GroupIdNotFound,
            &format!("Group {nobody} not found.")
        ),
        "{resp:?}"
    );
    assert!(list_groups(&mut c, &[], &[], &[&nobody]).is_empty());
    // An empty group id.
    let invalid = message(ResponseError::InvalidGroupId, "The group id is invalid.");
    let resp = alter_offsets(&mut c, "", &[(&topic, &[(0, 0)])]);
    assert_eq!(
        top_level(resp.error_code, &resp.error_message),
        invalid,
        "{resp:?}"
    );
    let resp = delete_offsets(&mut c, "", &[&topic]);
    assert_eq!(
        top_level(resp.error_code, &resp.error_message),
        invalid,
        "{resp:?}"
    );
}

#[test]
fn delete_share_group_offsets_drops_the_topics_state() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("st-delo");
    let id = create_topic(&mut c, &topic, 2);
    let untouched = unique("st-delo-none");
    create_topic(&mut c, &untouched, 1);
    let missing = unique("st-delo-missing");
    let group = unique("sg-delo");
    eventually("the new topic known to the group coordinator", || {
        let resp = alter_offsets(&mut c, &group, &[(&topic, &[(0, 3), (1, 4)])]);
        assert_eq!(
            top_level(resp.error_code, &resp.error_message),
            (None, None),
            "{resp:?}"
        );
        resp.responses[0]
            .partitions
            .iter()
            .all(|p| p.error_code == 0)
            .then_some(())
    });
    eventually("the altered offsets described", || {
        (share_offsets(&mut c, &group).len() == 2).then_some(())
    });
    // Kafka marks the altered topic's state initialized a moment after the answer; until then
    // it has "no offset information to delete" for it.
    let resp = eventually("the altered topic's state initialized", || {
        let resp = delete_offsets(&mut c, &group, &[&untouched, &missing, &topic]);
        let deleted = resp
            .responses
            .iter()
            .any(|t| t.topic_name.as_str() == topic && t.error_code == 0);
        deleted.then_some(resp)
    });
    assert_eq!(
        top_level(resp.error_code, &resp.error_message),
        (None, None),
        "{resp:?}"
    );
    let got: Vec<_> = resp
        .responses
        .iter()
        .map(|t| {
            (
                t.topic_name.to_string(),
                t.topic_id,
                err(t.error_code),
                t.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect();
    let unknown = Some(ResponseError::UnknownTopicOrPartition);
    assert_eq!(
        got,
        vec![
            (topic.clone(), id, None, None),
            (
                untouched.clone(),
                Uuid::nil(),
                unknown,
                Some("There is no offset information to delete.".to_string())
            ),
            (
                missing.clone(),
                Uuid::nil(),
                unknown,
                Some("This server does not host this topic-partition.".to_string())
            ),
        ],
        "{resp:?}"
    );
    assert_eq!(share_offsets(&mut c, &group), BTreeMap::new());
    // Nothing left to delete now.
    let resp = delete_offsets(&mut c, &group, &[&topic]);
    assert_eq!(
        resp.responses
            .iter()
            .map(|t| (
                err(t.error_code),
                t.error_message.as_ref().map(|m| m.to_string())
            ))
            .collect::<Vec<_>>(),
        vec![(
            unknown,
            Some("There is no offset information to delete.".to_string())
        )],
        "{resp:?}"
    );
}

#[test]
fn delete_groups_deletes_an_empty_share_group_not_one_with_members() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("st-delg");
    create_topic(&mut c, &topic, 1);
    let group = unique("sg-delg");
    let mut m = join(&mut c, &group, &[&topic]);
    let delete = |c: &mut Client| {
        let resp = c.send(
            2,
            &kafka_protocol::messages::DeleteGroupsRequest::default()
                .with_groups_names(vec![group_id(&group)]),
        );
        err(resp.results[0].error_code)
    };
    assert_eq!(delete(&mut c), Some(ResponseError::NonEmptyGroup));
    // The member leaves (epoch -1): the group is Empty, and goes.
    let resp = heartbeat(&mut c, &steady(&group, &m.id, -1));
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    m.epoch = -1;
    assert_eq!(delete(&mut c), None);
    assert!(list_groups(&mut c, &[], &[], &[&group]).is_empty());
    assert_eq!(delete(&mut c), Some(ResponseError::GroupIdNotFound));
}

/// A deleted topic's share-partition states go with it (Kafka 4.4's
/// `maybeCleanupShareGroupState` on topic deletion): the topic created again under its name
/// (with koord's name-derived ids, the same id) has none, and the group reads it from where
/// `share.auto.offset.reset` says.
#[test]
fn a_deleted_topics_share_states_go_with_it() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("st-deltopic");
    let group = unique("sg-deltopic");
    create_topic(&mut c, &topic, 1);
    eventually("the new topic known to the group coordinator", || {
        let resp = alter_offsets(&mut c, &group, &[(&topic, &[(0, 3)])]);
        resp.responses[0]
            .partitions
            .iter()
            .all(|p| p.error_code == 0)
            .then_some(())
    });
    eventually("the altered offset described", || {
        (share_offsets(&mut c, &group).values().eq([&3])).then_some(())
    });
    let resp: kafka_protocol::messages::DeleteTopicsResponse = c.send(
        5,
        &kafka_protocol::messages::DeleteTopicsRequest::default()
            .with_topic_names(vec![topic_name(&topic)])
            .with_timeout_ms(10_000),
    );
    assert_eq!(err(resp.responses[0].error_code), None, "{resp:?}");
    eventually("the deleted topic's share state gone", || {
        share_offsets(&mut c, &group).is_empty().then_some(())
    });
    // Created again (Kafka finishes deleting the old one first).
    eventually("the topic created again", || {
        let resp: kafka_protocol::messages::CreateTopicsResponse = c.send(
            7,
            &CreateTopicsRequest::default()
                .with_topics(vec![CreatableTopic::default()
                    .with_name(topic_name(&topic))
                    .with_num_partitions(1)
                    .with_replication_factor(1)])
                .with_timeout_ms(10_000),
        );
        (err(resp.topics[0].error_code) != Some(ResponseError::TopicAlreadyExists)).then_some(())
    });
    assert_eq!(share_offsets(&mut c, &group), BTreeMap::new());
}
