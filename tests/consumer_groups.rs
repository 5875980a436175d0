//! Raw wire conformance of KIP-848 consumer groups: ConsumerGroupHeartbeat v0-1 and
//! ConsumerGroupDescribe v0-1, and what the classic group APIs answer for a consumer group.
//!
//! Every expectation here was checked against Apache Kafka 4.4 (`scripts/kafka.sh start`, then
//! `KOORD_BOOTSTRAP=$(cat .build/kafka/bootstrap) cargo test --release --test consumer_groups`).
//! Where Kafka's answer is surprising the test says so. docs/kip848-conformance.md summarises
//! Kafka's answers case by case. koord is started with [`CONSUMER_LIKE`], the values
//! `scripts/kafka.sh` gives the broker.
//!
//! Behaviours covered (the test names say the rest):
//! - ApiVersions advertises ConsumerGroupHeartbeat (68) v0-1 and ConsumerGroupDescribe (69) v0-1.
//! - First heartbeat (epoch 0) with a client-generated member id: epoch 2 (not 1) for the first
//!   member subscribing by name, the broker's heartbeat interval, every partition (by topic id)
//!   to the lone member; an empty member id at v0 gets a server-generated id, at v1 is
//!   INVALID_REQUEST.
//! - A second member joining: group epoch bump, the newcomer at the new epoch with nothing, the
//!   first member asked to revoke first (it stays at its epoch), the newcomer gets the revoked
//!   partitions only after the first member's heartbeat no longer owns them.
//! - Incremental heartbeats (null fields) get a null assignment when nothing changed; a full
//!   heartbeat gets the assignment.
//! - INVALID_REQUEST for malformed heartbeats (with Kafka's messages), UNSUPPORTED_ASSIGNOR,
//!   FENCED_MEMBER_EPOCH (too high, too old; the previous epoch with a subset of the assignment
//!   is accepted), UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND for a missing group with epoch > 0 or
//!   -1, UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, INVALID_REGULAR_EXPRESSION.
//! - A heartbeat naming a classic group (non-empty or empty) converts it to a consumer group.
//! - Leave with epoch -1 (group epoch bump; Assigning until a remaining member heartbeats) and
//!   -2 (static: the member stays at epoch -2 with its assignment; the instance rejoining with a
//!   new member id takes it over without a rebalance).
//! - Session timeout: a silent member, and a static member that left and does not come back,
//!   are removed and their partitions go to the rest. Rebalance timeout: a member that does not
//!   revoke in time is removed.
//! - Subscription changes (a topic added, a topic dropped: revoked first), a known member
//!   rejoining with epoch 0, a subscribed topic created later, partitions added by
//!   CreatePartitions (koord has no CreatePartitions yet), regex subscriptions.
//! - ConsumerGroupDescribe: epochs, state, assignor, members, authorized operations; a missing
//!   or classic group is GROUP_ID_NOT_FOUND.
//! - ListGroups v5 type and state filters; DescribeGroups of a consumer group (Dead below v6,
//!   GROUP_ID_NOT_FOUND at v6); the classic Heartbeat, LeaveGroup and JoinGroup on a consumer
//!   group.
//! - OffsetCommit v9 with member epochs (STALE_MEMBER_EPOCH either way), OffsetCommit below v9
//!   (UNSUPPORTED_VERSION), OffsetFetch v9 with member epochs, OffsetDelete of a subscribed topic
//!   (GROUP_SUBSCRIBED_TO_TOPIC), DeleteGroups (NON_EMPTY_GROUP, then OK).
//!
//! Each test uses its own group ids and topics, so they run in parallel. Nothing waits on a
//! fixed sleep: state changes are awaited by polling with a deadline.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use common::{err, group_id, s, topic_name, unique, Client, Koord, DEADLINE};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions as OwnedPartitions;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, ConsumerProtocolSubscription,
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, DeleteGroupsRequest,
    DescribeGroupsRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    ListGroupsRequest, MetadataRequest, MetadataResponse, OffsetDeleteRequest, OffsetFetchRequest,
    SyncGroupRequest,
};
use kafka_protocol::protocol::Encodable;
use kafka_protocol::ResponseError;
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// Server and names
// ---------------------------------------------------------------------------------------------

/// The settings `scripts/kafka.sh` gives the reference broker: no initial rebalance delay, short
/// minimum timeouts, a 6 s consumer session timeout (so an expiry is seen within a test), a 1 s
/// heartbeat interval and at most 5 members in a consumer group. The assignors are Kafka's
/// default list (`uniform` first, which is the default assignor).
const CONSUMER_LIKE: &[&str] = &[
    "group.min.session.timeout.ms=1000",
    "group.initial.rebalance.delay.ms=0",
    "group.consumer.min.session.timeout.ms=1000",
    "group.consumer.min.heartbeat.interval.ms=500",
    "group.consumer.session.timeout.ms=6000",
    "group.consumer.heartbeat.interval.ms=1000",
    "group.consumer.max.size=5",
    "group.consumer.assignors=uniform,range",
];

/// `group.consumer.session.timeout.ms` and `group.consumer.heartbeat.interval.ms` above.
const SESSION_MS: u64 = 6_000;
const HEARTBEAT_INTERVAL_MS: i32 = 1_000;

/// The rebalance timeout members send: long enough that no revocation times out in a test.
const REBALANCE_MS: i32 = 30_000;

/// The client id every connection sends (see `common::request_header`).
const CLIENT_ID: &str = "koord-wire-test";

/// The server under test: koord started with [`CONSUMER_LIKE`], or the `KOORD_BOOTSTRAP` server.
fn server() -> Koord {
    Koord::start(CONSUMER_LIKE)
}

/// koord with classic groups assigned by their leaders, as Kafka's are (koord assigns on the
/// server by default).
fn client_assigned_server() -> Koord {
    let mut settings = CONSUMER_LIKE.to_vec();
    settings.push("group.assignor=client");
    Koord::start(&settings)
}

/// Polls `probe` until it returns `Some`, for at most `within`.
fn eventually_within<T>(what: &str, within: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `probe` until it returns `Some`, for at most [`DEADLINE`].
fn eventually<T>(what: &str, probe: impl FnMut() -> Option<T>) -> T {
    eventually_within(what, DEADLINE, probe)
}

// ---------------------------------------------------------------------------------------------
// Topics
// ---------------------------------------------------------------------------------------------

/// Waits until Metadata shows `name` with `partitions` partitions, each with a leader; its id.
fn await_topic(c: &mut Client, name: &str, partitions: usize) -> Uuid {
    eventually(
        &format!("topic {name} with {partitions} partitions"),
        || {
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
                && t.partitions.len() == partitions
                && t.partitions.iter().all(|p| p.leader_id.0 >= 0))
            .then_some(t.topic_id)
        },
    )
}

/// Waits until the group coordinator assigns `partitions` partitions of `topic`: a throwaway
/// member joins a throwaway group until its first heartbeat is assigned all of them, then
/// leaves. Kafka's group coordinator learns of a new topic (or new partitions) from the
/// metadata image a moment after Metadata shows it; until then a member subscribing to it is
/// assigned nothing (and is given the partitions by a later heartbeat). koord knows at once.
fn await_assignable(c: &mut Client, topic: &str, partitions: usize) {
    let group = unique("g-barrier");
    eventually(
        &format!("{topic}: {partitions} partitions assignable"),
        || {
            let resp = ok_hb(c, &join_request(&group, "barrier", &[topic]));
            let got = assigned(&resp).map(|a| count(&a)).unwrap_or(0);
            let left = ok_hb(c, &heartbeat_request(&group, "barrier", -1, None));
            assert_eq!(left.member_epoch, -1, "{left:?}");
            (got == partitions).then_some(())
        },
    );
}

/// Creates `name` with `partitions`, waits until Metadata shows it and the group coordinator
/// assigns it; its topic id.
fn create_topic(c: &mut Client, name: &str, partitions: i32) -> Uuid {
    let id = create_topic_only(c, name, partitions);
    await_assignable(c, name, partitions as usize);
    id
}

/// Creates `name` with `partitions` and waits until Metadata shows it; its topic id.
fn create_topic_only(c: &mut Client, name: &str, partitions: i32) -> Uuid {
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
    await_topic(c, name, partitions as usize)
}

// ---------------------------------------------------------------------------------------------
// ConsumerGroupHeartbeat
// ---------------------------------------------------------------------------------------------

/// Partitions by topic id, sorted: an assignment or the owned partitions of a heartbeat.
type Parts = BTreeMap<Uuid, BTreeSet<i32>>;

fn parts(topic: Uuid, partitions: impl IntoIterator<Item = i32>) -> Parts {
    let set: BTreeSet<i32> = partitions.into_iter().collect();
    if set.is_empty() {
        Parts::new()
    } else {
        Parts::from([(topic, set)])
    }
}

fn count(p: &Parts) -> usize {
    p.values().map(BTreeSet::len).sum()
}

fn owned(p: &Parts) -> Option<Vec<OwnedPartitions>> {
    Some(
        p.iter()
            .map(|(t, ps)| {
                OwnedPartitions::default()
                    .with_topic_id(*t)
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    )
}

/// The assignment of a heartbeat response; `None` when the response carries none (null).
fn assigned(resp: &ConsumerGroupHeartbeatResponse) -> Option<Parts> {
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

/// A full first heartbeat (epoch 0) of member `member_id` subscribing to `topics`.
fn join_request(group: &str, member_id: &str, topics: &[&str]) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(group_id(group))
        .with_member_id(s(member_id))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(REBALANCE_MS)
        .with_subscribed_topic_names(Some(topics.iter().map(|t| topic_name(t)).collect()))
        .with_topic_partitions(Some(vec![]))
}

/// A heartbeat of an existing member that sends only the fields it must (the others null, as
/// the Java client does when they are unchanged) and the partitions it owns.
fn heartbeat_request(
    group: &str,
    member_id: &str,
    epoch: i32,
    owns: Option<&Parts>,
) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(group_id(group))
        .with_member_id(s(member_id))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(-1)
        .with_subscribed_topic_names(None)
        .with_topic_partitions(owns.and_then(owned))
}

fn send_hb(
    c: &mut Client,
    version: i16,
    req: &ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    c.send(version, req)
}

/// A heartbeat that must succeed.
fn ok_hb(c: &mut Client, req: &ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse {
    let resp = send_hb(c, 1, req);
    assert_eq!(err(resp.error_code), None, "{req:?}\n=> {resp:?}");
    resp
}

/// A member as its heartbeats left it.
#[derive(Debug, Clone)]
struct Member {
    id: String,
    epoch: i32,
    /// What it owns: the last assignment it was given.
    owns: Parts,
}

/// A new member joins (epoch 0) subscribing to `topics`.
fn join(c: &mut Client, group: &str, topics: &[&str]) -> Member {
    join_as(c, group, &Uuid::new_v4().to_string(), topics)
}

fn join_as(c: &mut Client, group: &str, member_id: &str, topics: &[&str]) -> Member {
    let resp = ok_hb(c, &join_request(group, member_id, topics));
    assert_eq!(resp.member_id.as_deref(), Some(member_id), "{resp:?}");
    Member {
        id: member_id.to_string(),
        epoch: resp.member_epoch,
        owns: assigned(&resp).expect("a first heartbeat gets an assignment"),
    }
}

/// One heartbeat of `m` declaring what it owns; takes on the epoch and any new assignment.
fn beat(c: &mut Client, group: &str, m: &mut Member) -> ConsumerGroupHeartbeatResponse {
    let resp = ok_hb(c, &heartbeat_request(group, &m.id, m.epoch, Some(&m.owns)));
    m.epoch = resp.member_epoch;
    if let Some(a) = assigned(&resp) {
        m.owns = a;
    }
    resp
}

/// Heartbeats every member in turn until all are at the group's epoch `epoch`, then returns.
fn converge(c: &mut Client, group: &str, members: &mut [Member], epoch: i32) {
    eventually(&format!("{group}: every member at epoch {epoch}"), || {
        for m in members.iter_mut() {
            beat(c, group, m);
        }
        members.iter().all(|m| m.epoch == epoch).then_some(())
    });
}

/// A stable group of `n` members subscribed to `topic` (`partitions` partitions); the members
/// after reconciliation and the group epoch.
fn stable_group(c: &mut Client, group: &str, topic: &str, n: usize) -> (Vec<Member>, i32) {
    let mut members: Vec<Member> = Vec::new();
    for _ in 0..n {
        members.push(join(c, group, &[topic]));
        let epoch = describe_one(c, group).group_epoch;
        converge(c, group, &mut members, epoch);
    }
    let epoch = describe_one(c, group).group_epoch;
    (members, epoch)
}

// ---------------------------------------------------------------------------------------------
// ConsumerGroupDescribe and the classic group APIs
// ---------------------------------------------------------------------------------------------

type Described = kafka_protocol::messages::consumer_group_describe_response::DescribedGroup;

fn describe(c: &mut Client, version: i16, groups: &[&str]) -> ConsumerGroupDescribeResponse {
    c.send(
        version,
        &ConsumerGroupDescribeRequest::default()
            .with_group_ids(groups.iter().map(|g| group_id(g)).collect()),
    )
}

/// ConsumerGroupDescribe v1 of a group that must exist.
fn describe_one(c: &mut Client, group: &str) -> Described {
    let resp = describe(c, 1, &[group]);
    assert_eq!(resp.groups.len(), 1, "{resp:?}");
    let g = resp.groups[0].clone();
    assert_eq!(err(g.error_code), None, "{resp:?}");
    g
}

fn described_parts(
    a: &kafka_protocol::messages::consumer_group_describe_response::Assignment,
) -> Parts {
    let mut out = Parts::new();
    for t in &a.topic_partitions {
        out.entry(t.topic_id)
            .or_default()
            .extend(t.partitions.iter().copied());
    }
    out.retain(|_, ps| !ps.is_empty());
    out
}

/// A consumer-protocol subscription as a classic JoinGroup carries it.
fn subscription(topics: &[&str]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| s(t)).collect())
        .encode(&mut b, 0)
        .expect("encode a subscription");
    b.freeze()
}

/// A classic consumer group with one Stable member (JoinGroup v9 twice, SyncGroup v5); the
/// member id and generation.
fn classic_group(c: &mut Client, group: &str, topic: &str) -> (String, i32) {
    let join = |c: &mut Client, member: &str| classic_join(c, group, member, topic, &[]);
    let first = join(c, "");
    assert_eq!(
        err(first.error_code),
        Some(ResponseError::MemberIdRequired),
        "{first:?}"
    );
    let joined = join(c, first.member_id.as_str());
    assert_eq!(err(joined.error_code), None, "{joined:?}");
    let member = joined.member_id.to_string();
    let sync = c.send(
        5,
        &SyncGroupRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id(joined.generation_id)
            .with_member_id(s(&member))
            .with_protocol_type(Some(s("consumer")))
            .with_protocol_name(Some(s("range")))
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(s(&member))
                .with_assignment(Bytes::new())]),
    );
    assert_eq!(err(sync.error_code), None, "{sync:?}");
    (member, joined.generation_id)
}

// ---------------------------------------------------------------------------------------------
// Offsets
// ---------------------------------------------------------------------------------------------

/// OffsetCommit of partition 0 of `topic` at `version`; the partition's error.
fn commit(
    c: &mut Client,
    version: i16,
    group: &str,
    member_id: &str,
    epoch: i32,
    topic: &str,
) -> Option<ResponseError> {
    common::commit_offset(c, version, group, (member_id, epoch), topic, 7)
}

/// OffsetFetch v9 of partition 0 of `topic` as `member` (None: an admin fetch): the group's
/// error and the committed offset.
fn fetch(
    c: &mut Client,
    group: &str,
    member: Option<(&str, i32)>,
    topic: &str,
) -> (Option<ResponseError>, Option<i64>) {
    let mut g = OffsetFetchRequestGroup::default()
        .with_group_id(group_id(group))
        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
            .with_name(topic_name(topic))
            .with_partition_indexes(vec![0])]));
    if let Some((id, epoch)) = member {
        g = g.with_member_id(Some(s(id))).with_member_epoch(epoch);
    }
    let resp = c.send(9, &OffsetFetchRequest::default().with_groups(vec![g]));
    assert_eq!(resp.groups.len(), 1, "{resp:?}");
    let g = &resp.groups[0];
    let offset = g
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .map(|p| p.committed_offset);
    (err(g.error_code), offset)
}

// ---------------------------------------------------------------------------------------------
// ApiVersions
// ---------------------------------------------------------------------------------------------

#[test]
fn api_versions_advertise_consumer_group_heartbeat_and_describe_v0_to_1() {
    let koord = server();
    let resp = koord.connect().api_versions(3);
    let range = |key: ApiKey| {
        resp.api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| (k.min_version, k.max_version))
    };
    assert_eq!(
        range(ApiKey::ConsumerGroupHeartbeat),
        Some((0, 1)),
        "{resp:?}"
    );
    assert_eq!(
        range(ApiKey::ConsumerGroupDescribe),
        Some((0, 1)),
        "{resp:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Joining and reconciliation
// ---------------------------------------------------------------------------------------------

#[test]
fn first_heartbeat_with_a_client_member_id_gets_epoch_interval_and_every_partition() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-first"), unique("t-first"));
    let tid = create_topic(&mut c, &topic, 4);
    // The Java client (v1) generates the member id: a UUID.
    let id = Uuid::new_v4().to_string();
    let resp = ok_hb(&mut c, &join_request(&group, &id, &[&topic]));
    assert_eq!(resp.member_id.as_deref(), Some(id.as_str()), "{resp:?}");
    // Kafka 4.4: the first member of a new group that subscribes by name is at epoch 2, not 1
    // (also when the topic does not exist yet; a first member with an empty subscription list,
    // or a regex not yet resolved, is at epoch 1), and each later member bumps it by one.
    assert_eq!(resp.member_epoch, 2, "{resp:?}");
    assert_eq!(
        resp.heartbeat_interval_ms, HEARTBEAT_INTERVAL_MS,
        "{resp:?}"
    );
    assert_eq!(assigned(&resp), Some(parts(tid, 0..4)), "{resp:?}");
    let g = describe_one(&mut c, &group);
    assert_eq!((g.group_epoch, g.assignment_epoch), (2, 2), "{g:?}");
    assert_eq!(g.group_state.as_str(), "Stable", "{g:?}");
    // A second member: one bump.
    let second = join(&mut c, &group, &[&topic]);
    assert_eq!(second.epoch, 3, "{second:?}");
    // Only a new group's first member gets the double bump: in a group whose first member
    // subscribed to nothing (epoch 1), the next member subscribing to a topic is at 2; a member
    // joining a group that became Empty is one above the group epoch.
    let other = unique("g-first-empty");
    assert_eq!(join(&mut c, &other, &[]).epoch, 1);
    assert_eq!(join(&mut c, &other, &[&topic]).epoch, 2);
    let again = unique("g-first-again");
    let m = join(&mut c, &again, &[&topic]);
    ok_hb(&mut c, &heartbeat_request(&again, &m.id, -1, None));
    assert_eq!(describe_one(&mut c, &again).group_epoch, 3);
    assert_eq!(join(&mut c, &again, &[&topic]).epoch, 4);
}

#[test]
fn first_heartbeat_without_a_member_id_is_given_one_at_v0_and_invalid_request_at_v1() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-noid"), unique("t-noid"));
    let tid = create_topic(&mut c, &topic, 2);
    let resp = send_hb(&mut c, 1, &join_request(&group, "", &[&topic]));
    assert_eq!(
        err(resp.error_code),
        Some(ResponseError::InvalidRequest),
        "{resp:?}"
    );
    assert_eq!(
        resp.error_message.as_deref(),
        Some("MemberId can't be empty.")
    );
    assert_eq!(
        (resp.member_id.as_deref(), resp.member_epoch),
        (None, 0),
        "{resp:?}"
    );
    // v0: the coordinator generates the id (22 characters: a base64 UUID, as Kafka's
    // Uuid.toString) and the member joins.
    let resp = send_hb(&mut c, 0, &join_request(&group, "", &[&topic]));
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    let id = resp.member_id.clone().expect("a generated member id");
    assert_eq!(id.len(), 22, "{resp:?}");
    assert_eq!(resp.member_epoch, 2, "{resp:?}");
    assert_eq!(assigned(&resp), Some(parts(tid, 0..2)), "{resp:?}");
    let g = describe_one(&mut c, &group);
    assert_eq!(g.members.len(), 1, "{g:?}");
    assert_eq!(g.members[0].member_id.as_str(), id.as_str(), "{g:?}");
}

#[test]
fn second_member_gets_partitions_only_after_the_first_member_revokes_them() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-reconcile"), unique("t-reconcile"));
    let tid = create_topic(&mut c, &topic, 4);
    let mut a = join(&mut c, &group, &[&topic]);
    assert_eq!((a.epoch, a.owns.clone()), (2, parts(tid, 0..4)), "{a:?}");
    // A acknowledges: stable, nothing new.
    let resp = beat(&mut c, &group, &mut a);
    assert_eq!((resp.member_epoch, assigned(&resp)), (2, None), "{resp:?}");

    // B joins: the group epoch is bumped to 3 and B is at it at once, but every partition is
    // still A's, so B is assigned nothing yet.
    let mut b = join(&mut c, &group, &[&topic]);
    assert_eq!((b.epoch, b.owns.clone()), (3, Parts::new()), "{b:?}");
    let g = describe_one(&mut c, &group);
    assert_eq!((g.group_epoch, g.assignment_epoch), (3, 3), "{g:?}");
    assert_eq!(g.group_state.as_str(), "Reconciling", "{g:?}");
    let target = |g: &Described, id: &str| {
        let m = g
            .members
            .iter()
            .find(|m| m.member_id.as_str() == id)
            .expect("member");
        (
            described_parts(&m.assignment),
            described_parts(&m.target_assignment),
            m.member_epoch,
        )
    };
    let (a_current, a_target, a_epoch) = target(&g, &a.id);
    let (b_current, b_target, b_epoch) = target(&g, &b.id);
    assert_eq!((a_current.clone(), a_epoch), (parts(tid, 0..4), 2), "{g:?}");
    assert_eq!((b_current, b_epoch), (Parts::new(), 3), "{g:?}");
    assert_eq!((count(&a_target), count(&b_target)), (2, 2), "{g:?}");

    // B heartbeats before A has revoked: still nothing, and no assignment in the answer (it
    // did not change).
    let resp = beat(&mut c, &group, &mut b);
    assert_eq!((resp.member_epoch, assigned(&resp)), (3, None), "{resp:?}");

    // A heartbeats still owning everything: it stays at epoch 2 and is told to keep only its
    // target (the assignment shrinks: revocation first).
    let resp = ok_hb(&mut c, &heartbeat_request(&group, &a.id, 2, Some(&a.owns)));
    assert_eq!(resp.member_epoch, 2, "{resp:?}");
    assert_eq!(assigned(&resp), Some(a_target.clone()), "{resp:?}");
    // Asked again while still owning everything: the same epoch; the assignment is not
    // repeated.
    let resp = ok_hb(&mut c, &heartbeat_request(&group, &a.id, 2, Some(&a.owns)));
    assert_eq!((resp.member_epoch, assigned(&resp)), (2, None), "{resp:?}");

    // B still gets nothing: A has not yet said it released them.
    let resp = beat(&mut c, &group, &mut b);
    assert_eq!((resp.member_epoch, assigned(&resp)), (3, None), "{resp:?}");
    assert_eq!(b.owns, Parts::new());

    // A reports it owns only its target: it moves to epoch 3, with a null assignment (what it
    // owns is its assignment).
    a.owns = a_target.clone();
    let resp = beat(&mut c, &group, &mut a);
    assert_eq!((resp.member_epoch, assigned(&resp)), (3, None), "{resp:?}");

    // Now B is given the released partitions.
    let resp = beat(&mut c, &group, &mut b);
    assert_eq!(resp.member_epoch, 3, "{resp:?}");
    assert_eq!(assigned(&resp), Some(b_target.clone()), "{resp:?}");
    let resp = beat(&mut c, &group, &mut b);
    assert_eq!((resp.member_epoch, assigned(&resp)), (3, None), "{resp:?}");

    let g = describe_one(&mut c, &group);
    assert_eq!(g.group_state.as_str(), "Stable", "{g:?}");
    assert_eq!((g.group_epoch, g.assignment_epoch), (3, 3), "{g:?}");
    let (a_current, _, a_epoch) = target(&g, &a.id);
    let (b_current, _, b_epoch) = target(&g, &b.id);
    assert_eq!((a_current, a_epoch), (a_target, 3), "{g:?}");
    assert_eq!((b_current, b_epoch), (b_target, 3), "{g:?}");
}

#[test]
fn incremental_heartbeat_gets_no_assignment_and_a_full_one_gets_it() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-incr"), unique("t-incr"));
    let tid = create_topic(&mut c, &topic, 3);
    let a = join(&mut c, &group, &[&topic]);
    // Nothing but the id and epoch (owned partitions null too).
    let resp = ok_hb(&mut c, &heartbeat_request(&group, &a.id, a.epoch, None));
    assert_eq!(
        (resp.member_epoch, assigned(&resp)),
        (a.epoch, None),
        "{resp:?}"
    );
    assert_eq!(
        resp.heartbeat_interval_ms, HEARTBEAT_INTERVAL_MS,
        "{resp:?}"
    );
    // Owned partitions given, same as the assignment: still null.
    let resp = ok_hb(
        &mut c,
        &heartbeat_request(&group, &a.id, a.epoch, Some(&a.owns)),
    );
    assert_eq!(
        (resp.member_epoch, assigned(&resp)),
        (a.epoch, None),
        "{resp:?}"
    );
    // A full heartbeat (every field set, as after a reconnect): the assignment is sent.
    let full = join_request(&group, &a.id, &[&topic])
        .with_member_epoch(a.epoch)
        .with_topic_partitions(owned(&a.owns));
    let resp = ok_hb(&mut c, &full);
    assert_eq!(resp.member_epoch, a.epoch, "{resp:?}");
    assert_eq!(assigned(&resp), Some(parts(tid, 0..3)), "{resp:?}");
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// The error and message of a heartbeat that must fail; the failure carries no member id,
/// epoch 0, interval 0 and no assignment.
fn hb_error(
    c: &mut Client,
    version: i16,
    req: &ConsumerGroupHeartbeatRequest,
) -> (Option<ResponseError>, String) {
    let resp = send_hb(c, version, req);
    assert!(resp.error_code != 0, "{req:?}\n=> {resp:?}");
    assert_eq!(
        (
            resp.member_id.as_deref(),
            resp.member_epoch,
            resp.heartbeat_interval_ms,
            &resp.assignment
        ),
        (None, 0, 0, &None),
        "{resp:?}"
    );
    (
        err(resp.error_code),
        resp.error_message
            .map(|m| m.to_string())
            .unwrap_or_default(),
    )
}

#[test]
fn malformed_heartbeats_are_invalid_request() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-invalid"), unique("t-invalid"));
    let tid = create_topic(&mut c, &topic, 1);
    let base = join_request(&group, "m", &[&topic]);
    let invalid = Some(ResponseError::InvalidRequest);
    let cases: Vec<(&str, ConsumerGroupHeartbeatRequest, &str)> = vec![
        (
            "no rebalance timeout",
            base.clone().with_rebalance_timeout_ms(-1),
            "RebalanceTimeoutMs must be provided in first request.",
        ),
        (
            "owned partitions on epoch 0",
            base.clone().with_topic_partitions(owned(&parts(tid, [0]))),
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            "null owned partitions on epoch 0",
            base.clone().with_topic_partitions(None),
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            "no subscription",
            base.clone().with_subscribed_topic_names(None),
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
        ),
        ("epoch -3", base.clone().with_member_epoch(-3), "MemberEpoch is invalid."),
        ("empty group id", join_request("", "m", &[&topic]), "GroupId can't be empty."),
        (
            "empty instance id",
            base.clone().with_instance_id(Some(s(""))),
            "InstanceId can't be empty.",
        ),
        ("empty rack id", base.clone().with_rack_id(Some(s(""))), "RackId can't be empty."),
        ("empty member id, epoch 0", join_request(&group, "", &[&topic]), "MemberId can't be empty."),
        (
            "empty member id, epoch 1",
            heartbeat_request(&group, "", 1, None),
            "MemberId can't be empty.",
        ),
        (
            "empty member id, epoch -1",
            heartbeat_request(&group, "", -1, None),
            "MemberId can't be empty.",
        ),
        (
            "static leave without an instance id",
            heartbeat_request(&group, "m", -2, None),
            "InstanceId can't be null.",
        ),
    ];
    for (what, req, message) in cases {
        assert_eq!(
            hb_error(&mut c, 1, &req),
            (invalid, message.to_string()),
            "{what}"
        );
    }
    // None of them created the group.
    let resp = describe(&mut c, 1, &[&group]);
    assert_eq!(
        err(resp.groups[0].error_code),
        Some(ResponseError::GroupIdNotFound),
        "{resp:?}"
    );
    // An empty subscription list is valid: the member joins, at epoch 1, with nothing.
    let resp = ok_hb(
        &mut c,
        &base.clone().with_subscribed_topic_names(Some(vec![])),
    );
    assert_eq!(
        (resp.member_epoch, assigned(&resp)),
        (1, Some(Parts::new())),
        "{resp:?}"
    );
}

#[test]
fn unknown_server_assignor_is_unsupported_assignor_and_a_known_one_is_used() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-assignor"), unique("t-assignor"));
    let tid = create_topic(&mut c, &topic, 2);
    let req = join_request(&group, "m", &[&topic]).with_server_assignor(Some(s("sticky")));
    assert_eq!(
        hb_error(&mut c, 1, &req),
        (
            Some(ResponseError::UnsupportedAssignor),
            "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
                .to_string()
        )
    );
    let resp = ok_hb(
        &mut c,
        &join_request(&group, "m", &[&topic]).with_server_assignor(Some(s("range"))),
    );
    assert_eq!(assigned(&resp), Some(parts(tid, 0..2)), "{resp:?}");
    let g = describe_one(&mut c, &group);
    assert_eq!(g.assignor_name.as_str(), "range", "{g:?}");
}

#[test]
fn wrong_member_epochs_are_fenced_member_epoch_but_the_previous_epoch_with_a_subset_is_accepted() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-fence"), unique("t-fence"));
    let tid = create_topic(&mut c, &topic, 4);
    let mut a = join(&mut c, &group, &[&topic]);
    assert_eq!(a.epoch, 2);
    let fenced = |smaller: bool, sent: i32, known: i32| {
        (
            Some(ResponseError::FencedMemberEpoch),
            format!(
                "The consumer group member has a {} member epoch ({sent}) than the one known by \
                 the group coordinator ({known}). The member must abandon all its partitions and \
                 rejoin.",
                if smaller { "smaller" } else { "greater" }
            ),
        )
    };
    // Too high.
    let req = heartbeat_request(&group, &a.id, 5, Some(&a.owns));
    assert_eq!(hb_error(&mut c, 1, &req), fenced(false, 5, 2));
    // A second member makes A revoke two partitions and move to epoch 3.
    let mut b = join(&mut c, &group, &[&topic]);
    beat(&mut c, &group, &mut a);
    assert_eq!((a.epoch, count(&a.owns)), (2, 2), "{a:?}");
    beat(&mut c, &group, &mut a);
    assert_eq!(a.epoch, 3, "{a:?}");
    beat(&mut c, &group, &mut b);
    // The previous epoch with owned partitions a subset of the assignment: accepted (the
    // member missed the answer that moved it on), answered with the current epoch.
    let resp = ok_hb(&mut c, &heartbeat_request(&group, &a.id, 2, Some(&a.owns)));
    assert_eq!(resp.member_epoch, 3, "{resp:?}");
    let subset = parts(tid, a.owns[&tid].iter().copied().take(1));
    let resp = ok_hb(&mut c, &heartbeat_request(&group, &a.id, 2, Some(&subset)));
    assert_eq!(resp.member_epoch, 3, "{resp:?}");
    // The previous epoch still owning partitions no longer assigned, or with owned null:
    // fenced.
    let req = heartbeat_request(&group, &a.id, 2, Some(&parts(tid, 0..4)));
    assert_eq!(hb_error(&mut c, 1, &req), fenced(true, 2, 3));
    let req = heartbeat_request(&group, &a.id, 2, None);
    assert_eq!(hb_error(&mut c, 1, &req), fenced(true, 2, 3));
    // Two epochs back: fenced whatever it owns.
    let req = heartbeat_request(&group, &a.id, 1, Some(&Parts::new()));
    assert_eq!(hb_error(&mut c, 1, &req), fenced(true, 1, 3));
    // Fencing answers do not remove the member (it rejoins with epoch 0 itself).
    let g = describe_one(&mut c, &group);
    assert_eq!(g.members.len(), 2, "{g:?}");
    let resp = beat(&mut c, &group, &mut a);
    assert_eq!(resp.member_epoch, 3, "{resp:?}");
}

#[test]
fn unknown_member_and_missing_group_with_epoch_above_zero() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-unknown"), unique("t-unknown"));
    create_topic(&mut c, &topic, 1);
    join(&mut c, &group, &[&topic]);
    let req = heartbeat_request(&group, "nobody", 2, None);
    assert_eq!(
        hb_error(&mut c, 1, &req),
        (
            Some(ResponseError::UnknownMemberId),
            format!("Member nobody is not a member of group {group}.")
        )
    );
    // A group that does not exist: GROUP_ID_NOT_FOUND, with different messages for a
    // heartbeat and a leave.
    let missing = unique("g-missing");
    let req = heartbeat_request(&missing, "nobody", 2, None);
    assert_eq!(
        hb_error(&mut c, 1, &req),
        (
            Some(ResponseError::GroupIdNotFound),
            format!("Consumer group {missing} not found.")
        )
    );
    let req = heartbeat_request(&missing, "nobody", -1, None);
    assert_eq!(
        hb_error(&mut c, 1, &req),
        (
            Some(ResponseError::GroupIdNotFound),
            format!("Group {missing} not found.")
        )
    );
}

#[test]
fn static_member_id_reused_while_the_old_member_is_active_is_unreleased_instance_id() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-unreleased"), unique("t-unreleased"));
    create_topic(&mut c, &topic, 2);
    let resp = ok_hb(
        &mut c,
        &join_request(&group, "s1", &[&topic]).with_instance_id(Some(s("inst"))),
    );
    assert_eq!(resp.member_epoch, 2, "{resp:?}");
    let req = join_request(&group, "s2", &[&topic]).with_instance_id(Some(s("inst")));
    assert_eq!(
        hb_error(&mut c, 1, &req),
        (
            Some(ResponseError::UnreleasedInstanceId),
            "Static member s2 with instance id inst cannot join the group because the instance id \
             is owned by s1 member."
                .to_string()
        )
    );
}

#[test]
fn joining_a_full_group_is_group_max_size_reached() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-max"), unique("t-max"));
    create_topic(&mut c, &topic, 1);
    // group.consumer.max.size=5
    for i in 0..5 {
        let m = join(&mut c, &group, &[&topic]);
        assert_eq!(m.epoch, 2 + i, "{m:?}");
    }
    let req = join_request(&group, "sixth", &[&topic]);
    assert_eq!(
        hb_error(&mut c, 1, &req),
        (
            Some(ResponseError::GroupMaxSizeReached),
            "The consumer group has reached its maximum capacity of 5 members.".to_string()
        )
    );
    assert_eq!(describe_one(&mut c, &group).members.len(), 5);
}

#[test]
fn heartbeat_naming_a_classic_group_converts_it_to_a_consumer_group() {
    let koord = client_assigned_server();
    let mut c = koord.connect();
    let topic = unique("t-classic");
    create_topic(&mut c, &topic, 4);
    // A non-empty classic consumer group (one Stable member): Kafka 4.4's default migration
    // policy (bidirectional) upgrades it to a consumer group; the classic member keeps its
    // (empty) assignment and the new member is assigned its share of the target.
    let group = unique("g-classic");
    classic_group(&mut c, &group, &topic);
    let resp = describe(&mut c, 1, &[&group]);
    assert_eq!(
        err(resp.groups[0].error_code),
        Some(ResponseError::GroupIdNotFound),
        "{resp:?}"
    );
    assert_eq!(
        resp.groups[0].error_message.as_deref(),
        Some(format!("Group {group} is not a consumer group.").as_str())
    );
    let resp = ok_hb(&mut c, &join_request(&group, "m1", &[&topic]));
    assert_eq!(resp.member_epoch, 2, "{resp:?}");
    assert_eq!(assigned(&resp).map(|a| count(&a)), Some(2), "{resp:?}");
    let g = describe_one(&mut c, &group);
    assert_eq!(g.members.len(), 2, "{g:?}");
    assert_eq!(g.group_state.as_str(), "Reconciling", "{g:?}");
    let listed = list_groups(&mut c, &[], &[]);
    assert_eq!(
        listed
            .get(&group)
            .map(|(t, _, ty)| (t.as_str(), ty.as_str())),
        Some(("consumer", "consumer"))
    );
}

#[test]
fn heartbeat_naming_an_empty_classic_group_replaces_it_with_a_consumer_group() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("t-classic-empty");
    let tid = create_topic(&mut c, &topic, 4);
    // An empty classic group (offsets committed with no members): replaced by a consumer
    // group; the member gets everything.
    let group = unique("g-simple");
    assert_eq!(commit(&mut c, 9, &group, "", -1, &topic), None);
    assert_eq!(
        list_groups(&mut c, &[], &[]).get(&group).cloned(),
        Some((String::new(), "Empty".to_string(), "classic".to_string()))
    );
    let resp = ok_hb(&mut c, &join_request(&group, "m1", &[&topic]));
    assert_eq!(
        (resp.member_epoch, assigned(&resp)),
        (2, Some(parts(tid, 0..4))),
        "{resp:?}"
    );
    assert_eq!(
        list_groups(&mut c, &[], &[]).get(&group).cloned(),
        Some((
            "consumer".to_string(),
            "Stable".to_string(),
            "consumer".to_string()
        ))
    );
}

// ---------------------------------------------------------------------------------------------
// Leaving and session timeouts
// ---------------------------------------------------------------------------------------------

#[test]
fn leave_with_epoch_minus_one_removes_the_member_and_bumps_the_group_epoch() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-leave"), unique("t-leave"));
    let tid = create_topic(&mut c, &topic, 4);
    let (mut members, epoch) = stable_group(&mut c, &group, &topic, 2);
    assert_eq!(epoch, 3);
    let b = members.pop().expect("two members");
    let resp = ok_hb(&mut c, &heartbeat_request(&group, &b.id, -1, None));
    assert_eq!(resp.member_id.as_deref(), Some(b.id.as_str()), "{resp:?}");
    assert_eq!(
        (
            resp.member_epoch,
            resp.heartbeat_interval_ms,
            assigned(&resp)
        ),
        (-1, 0, None),
        "{resp:?}"
    );
    // The group epoch is bumped, but the target assignment is only computed by the next
    // heartbeat of a remaining member: until then the group is Assigning.
    let g = describe_one(&mut c, &group);
    assert_eq!((g.group_epoch, g.assignment_epoch), (4, 3), "{g:?}");
    assert_eq!(g.group_state.as_str(), "Assigning", "{g:?}");
    assert_eq!(g.members.len(), 1, "{g:?}");
    let mut a = members.pop().expect("one member");
    let resp = beat(&mut c, &group, &mut a);
    assert_eq!(resp.member_epoch, 4, "{resp:?}");
    assert_eq!(assigned(&resp), Some(parts(tid, 0..4)), "{resp:?}");
    let g = describe_one(&mut c, &group);
    assert_eq!((g.group_epoch, g.assignment_epoch), (4, 4), "{g:?}");
    assert_eq!(g.group_state.as_str(), "Stable", "{g:?}");
    // The member that left is unknown, for heartbeats and a second leave.
    for epoch in [b.epoch, -1] {
        let (e, _) = hb_error(&mut c, 1, &heartbeat_request(&group, &b.id, epoch, None));
        assert_eq!(e, Some(ResponseError::UnknownMemberId));
    }
    // The last member leaves: Empty, and the assignment epoch follows the group epoch.
    let resp = ok_hb(&mut c, &heartbeat_request(&group, &a.id, -1, None));
    assert_eq!(resp.member_epoch, -1, "{resp:?}");
    let g = describe_one(&mut c, &group);
    assert_eq!((g.group_epoch, g.assignment_epoch), (5, 5), "{g:?}");
    assert_eq!(g.group_state.as_str(), "Empty", "{g:?}");
    assert!(g.members.is_empty(), "{g:?}");
}

#[test]
fn static_leave_keeps_the_assignment_for_the_instance_rejoining_with_a_new_member_id() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-static"), unique("t-static"));
    create_topic(&mut c, &topic, 4);
    let resp = ok_hb(
        &mut c,
        &join_request(&group, "s1", &[&topic]).with_instance_id(Some(s("i1"))),
    );
    let s1 = Member {
        id: "s1".into(),
        epoch: resp.member_epoch,
        owns: assigned(&resp).unwrap_or_default(),
    };
    let other = join(&mut c, &group, &[&topic]);
    let mut members = [s1, other];
    let epoch = describe_one(&mut c, &group).group_epoch;
    converge(&mut c, &group, &mut members, epoch);
    let [s1, mut other] = members;
    assert_eq!((count(&s1.owns), count(&other.owns)), (2, 2));
    let epoch = describe_one(&mut c, &group).group_epoch;
    // Static leave: epoch -2 answered, the member stays (epoch -2 in Describe) with its
    // assignment; no epoch bump. Kafka then reports the group Reconciling.
    let resp = ok_hb(
        &mut c,
        &heartbeat_request(&group, "s1", -2, None).with_instance_id(Some(s("i1"))),
    );
    assert_eq!(
        (
            resp.member_id.as_deref(),
            resp.member_epoch,
            resp.heartbeat_interval_ms
        ),
        (Some("s1"), -2, 0),
        "{resp:?}"
    );
    let g = describe_one(&mut c, &group);
    assert_eq!(g.group_epoch, epoch, "{g:?}");
    assert_eq!(g.group_state.as_str(), "Reconciling", "{g:?}");
    let m = g
        .members
        .iter()
        .find(|m| m.member_id.as_str() == "s1")
        .expect("s1 stays");
    assert_eq!(m.member_epoch, -2, "{g:?}");
    assert_eq!(m.instance_id.as_deref(), Some("i1"), "{g:?}");
    assert_eq!(described_parts(&m.assignment), s1.owns, "{g:?}");
    // The same instance rejoins with a new member id: it takes over s1's partitions at the
    // same epoch, no rebalance: the other member is untouched.
    let resp = ok_hb(
        &mut c,
        &join_request(&group, "s2", &[&topic]).with_instance_id(Some(s("i1"))),
    );
    assert_eq!(resp.member_epoch, epoch, "{resp:?}");
    assert_eq!(assigned(&resp), Some(s1.owns.clone()), "{resp:?}");
    let g = describe_one(&mut c, &group);
    assert_eq!(g.group_epoch, epoch, "{g:?}");
    assert_eq!(g.group_state.as_str(), "Stable", "{g:?}");
    let ids: BTreeSet<&str> = g.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(ids, BTreeSet::from(["s2", other.id.as_str()]), "{g:?}");
    let resp = beat(&mut c, &group, &mut other);
    assert_eq!(
        (resp.member_epoch, assigned(&resp)),
        (epoch, None),
        "{resp:?}"
    );
    // The old member id is gone.
    let (e, _) = hb_error(&mut c, 1, &heartbeat_request(&group, "s1", s1.epoch, None));
    assert_eq!(e, Some(ResponseError::UnknownMemberId));
}

#[test]
fn member_that_stops_heartbeating_is_removed_after_the_session_timeout() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-session"), unique("t-session"));
    let tid = create_topic(&mut c, &topic, 4);
    let (mut members, _) = stable_group(&mut c, &group, &topic, 2);
    let silent = members.pop().expect("two members");
    let mut alive = members.pop().expect("two members");
    let started = Instant::now();
    // The live member keeps heartbeating; the other is gone once the session timeout passes.
    eventually_within(
        "the silent member expires",
        Duration::from_millis(SESSION_MS) + DEADLINE,
        || {
            beat(&mut c, &group, &mut alive);
            let g = describe_one(&mut c, &group);
            (!g.members.iter().any(|m| m.member_id.as_str() == silent.id)).then_some(())
        },
    );
    assert!(
        started.elapsed() >= Duration::from_millis(SESSION_MS) - Duration::from_millis(1500),
        "expired after {:?}, before the session timeout",
        started.elapsed()
    );
    // Its partitions go to the live member.
    eventually("the live member owns every partition", || {
        beat(&mut c, &group, &mut alive);
        (alive.owns == parts(tid, 0..4)).then_some(())
    });
    let (e, _) = hb_error(
        &mut c,
        1,
        &heartbeat_request(&group, &silent.id, silent.epoch, None),
    );
    assert_eq!(e, Some(ResponseError::UnknownMemberId));
}

// ---------------------------------------------------------------------------------------------
// ConsumerGroupDescribe, ListGroups, DescribeGroups
// ---------------------------------------------------------------------------------------------

#[test]
fn consumer_group_describe_shows_epochs_state_assignor_and_members() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-describe"), unique("t-describe"));
    let tid = create_topic(&mut c, &topic, 2);
    let resp = ok_hb(
        &mut c,
        &join_request(&group, "m1", &[&topic])
            .with_instance_id(Some(s("i1")))
            .with_rack_id(Some(s("r1"))),
    );
    assert_eq!(resp.member_epoch, 2);
    for version in [0, 1] {
        let resp = describe(&mut c, version, &[&group]);
        assert_eq!(resp.groups.len(), 1, "{resp:?}");
        let g = &resp.groups[0];
        assert_eq!(
            (err(g.error_code), g.error_message.as_deref()),
            (None, None),
            "{g:?}"
        );
        assert_eq!(g.group_id.0.as_str(), group, "{g:?}");
        assert_eq!(g.group_state.as_str(), "Stable", "{g:?}");
        assert_eq!((g.group_epoch, g.assignment_epoch), (2, 2), "{g:?}");
        assert_eq!(g.assignor_name.as_str(), "uniform", "{g:?}");
        // Not asked for: i32::MIN.
        assert_eq!(g.authorized_operations, i32::MIN, "{g:?}");
        // Asked for, with no authorizer: READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS and
        // ALTER_CONFIGS, as DescribeGroups answers (tests/groups.rs).
        let asked = c.send(
            version,
            &ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![group_id(&group)])
                .with_include_authorized_operations(true),
        );
        assert_eq!(asked.groups[0].authorized_operations, 3400, "{asked:?}");
        assert_eq!(g.members.len(), 1, "{g:?}");
        let m = &g.members[0];
        assert_eq!(m.member_id.as_str(), "m1", "{m:?}");
        assert_eq!(m.instance_id.as_deref(), Some("i1"), "{m:?}");
        assert_eq!(m.rack_id.as_deref(), Some("r1"), "{m:?}");
        assert_eq!(m.member_epoch, 2, "{m:?}");
        assert_eq!(m.client_id.as_str(), CLIENT_ID, "{m:?}");
        // Java's InetAddress.toString(): a leading slash.
        assert_eq!(m.client_host.as_str(), "/127.0.0.1", "{m:?}");
        assert_eq!(m.subscribed_topic_names, vec![topic_name(&topic)], "{m:?}");
        // Subscribed by names: the regex is the empty string, not null.
        assert_eq!(m.subscribed_topic_regex.as_deref(), Some(""), "{m:?}");
        assert_eq!(described_parts(&m.assignment), parts(tid, 0..2), "{m:?}");
        assert_eq!(
            described_parts(&m.target_assignment),
            parts(tid, 0..2),
            "{m:?}"
        );
        // Describe names the topics too.
        assert_eq!(
            m.assignment.topic_partitions[0].topic_name.0.as_str(),
            topic,
            "{m:?}"
        );
        assert_eq!(
            m.target_assignment.topic_partitions[0]
                .topic_name
                .0
                .as_str(),
            topic,
            "{m:?}"
        );
        if version >= 1 {
            // MemberType (v1): 1, a consumer-protocol member (0 is a classic one).
            assert_eq!(m.member_type, 1, "{m:?}");
        }
    }
    // States: Assigning after a leave (the target is computed by the next heartbeat),
    // Reconciling while members move, Empty once all left.
    let b = join(&mut c, &group, &[&topic]);
    assert_eq!(
        describe_one(&mut c, &group).group_state.as_str(),
        "Reconciling"
    );
    ok_hb(&mut c, &heartbeat_request(&group, &b.id, -1, None));
    assert_eq!(
        describe_one(&mut c, &group).group_state.as_str(),
        "Assigning"
    );
    ok_hb(&mut c, &heartbeat_request(&group, "m1", -1, None));
    let g = describe_one(&mut c, &group);
    assert_eq!(g.group_state.as_str(), "Empty", "{g:?}");
    assert_eq!(g.assignor_name.as_str(), "uniform", "{g:?}");
}

#[test]
fn consumer_group_describe_of_a_missing_or_classic_group_is_group_id_not_found() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("t-describe-missing");
    create_topic(&mut c, &topic, 1);
    let missing = unique("g-describe-missing");
    let classic = unique("g-describe-classic");
    classic_group(&mut c, &classic, &topic);
    for version in [0, 1] {
        let resp = describe(&mut c, version, &[&missing, &classic]);
        assert_eq!(resp.groups.len(), 2, "{resp:?}");
        let answers: Vec<_> = resp
            .groups
            .iter()
            .map(|g| {
                (
                    err(g.error_code),
                    g.error_message.as_ref().map(|m| m.to_string()),
                    g.group_id.0.as_str(),
                    g.group_state.as_str(),
                    g.group_epoch,
                    g.members.len(),
                )
            })
            .collect();
        assert_eq!(
            answers,
            vec![
                (
                    Some(ResponseError::GroupIdNotFound),
                    Some(format!("Group {missing} not found.")),
                    missing.as_str(),
                    "",
                    0,
                    0
                ),
                (
                    Some(ResponseError::GroupIdNotFound),
                    Some(format!("Group {classic} is not a consumer group.")),
                    classic.as_str(),
                    "",
                    0,
                    0
                ),
            ]
        );
    }
}

/// ListGroups v5 with filters: group id -> (protocol type, state, type).
fn list_groups(
    c: &mut Client,
    states: &[&str],
    types: &[&str],
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
fn list_groups_filters_consumer_groups_by_type_and_state() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("t-list");
    create_topic(&mut c, &topic, 2);
    let stable = unique("g-list-stable");
    join(&mut c, &stable, &[&topic]);
    let reconciling = unique("g-list-reconciling");
    join(&mut c, &reconciling, &[&topic]);
    join(&mut c, &reconciling, &[&topic]);
    let classic = unique("g-list-classic");
    classic_group(&mut c, &classic, &topic);
    let ours = |l: BTreeMap<String, (String, String, String)>| -> BTreeMap<String, (String, String, String)> {
        l.into_iter()
            .filter(|(g, _)| [&stable, &reconciling, &classic].contains(&g))
            .collect()
    };
    let row = |p: &str, st: &str, ty: &str| (p.to_string(), st.to_string(), ty.to_string());
    let all = ours(list_groups(&mut c, &[], &[]));
    assert_eq!(
        all,
        BTreeMap::from([
            (stable.clone(), row("consumer", "Stable", "consumer")),
            (
                reconciling.clone(),
                row("consumer", "Reconciling", "consumer")
            ),
            (classic.clone(), row("consumer", "Stable", "classic")),
        ])
    );
    // Type filter, case-insensitive.
    for types in [&["consumer"][..], &["Consumer"], &["CONSUMER", "share"]] {
        let got = ours(list_groups(&mut c, &[], types));
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            {
                let mut v = vec![&stable, &reconciling];
                v.sort();
                v
            },
            "{types:?}"
        );
    }
    let got = ours(list_groups(&mut c, &[], &["classic"]));
    assert_eq!(got.keys().collect::<Vec<_>>(), vec![&classic]);
    // State filter, case-insensitive, across both kinds of group.
    for states in [&["Stable"][..], &["stable"]] {
        let got = ours(list_groups(&mut c, states, &[]));
        let mut want = vec![&stable, &classic];
        want.sort();
        assert_eq!(got.keys().collect::<Vec<_>>(), want, "{states:?}");
    }
    let got = ours(list_groups(&mut c, &["Reconciling"], &["consumer"]));
    assert_eq!(got.keys().collect::<Vec<_>>(), vec![&reconciling]);
    let got = ours(list_groups(&mut c, &["Stable"], &["consumer"]));
    assert_eq!(got.keys().collect::<Vec<_>>(), vec![&stable]);
}

#[test]
fn describe_groups_of_a_consumer_group_is_dead_below_v6_and_group_id_not_found_at_v6() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-classic-describe"), unique("t-classic-describe"));
    create_topic(&mut c, &topic, 1);
    join(&mut c, &group, &[&topic]);
    for version in 0..=6 {
        let resp = c.send(
            version,
            &DescribeGroupsRequest::default().with_groups(vec![group_id(&group)]),
        );
        assert_eq!(resp.groups.len(), 1, "{resp:?}");
        let g = &resp.groups[0];
        // Kafka answers as for a group that does not exist: no error and state Dead below v6,
        // GROUP_ID_NOT_FOUND at v6 (with state Dead too).
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
// Offsets and deletion
// ---------------------------------------------------------------------------------------------

#[test]
fn offset_commit_v9_checks_the_member_epoch_and_older_versions_are_unsupported() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-commit"), unique("t-commit"));
    create_topic(&mut c, &topic, 1);
    let a = join(&mut c, &group, &[&topic]);
    assert_eq!(commit(&mut c, 9, &group, &a.id, a.epoch, &topic), None);
    assert_eq!(
        commit(&mut c, 9, &group, &a.id, a.epoch - 1, &topic),
        Some(ResponseError::StaleMemberEpoch)
    );
    // A newer epoch than the member's is STALE_MEMBER_EPOCH as well (not FENCED_MEMBER_EPOCH).
    assert_eq!(
        commit(&mut c, 9, &group, &a.id, a.epoch + 1, &topic),
        Some(ResponseError::StaleMemberEpoch)
    );
    assert_eq!(
        commit(&mut c, 9, &group, "nobody", a.epoch, &topic),
        Some(ResponseError::UnknownMemberId)
    );
    // An admin commit (no member, epoch -1) to a group with members: UNKNOWN_MEMBER_ID.
    assert_eq!(
        commit(&mut c, 9, &group, "", -1, &topic),
        Some(ResponseError::UnknownMemberId)
    );
    // Below v9 a member of a consumer group cannot commit; an admin commit is as at v9.
    for version in [2, 5, 8] {
        assert_eq!(
            commit(&mut c, version, &group, &a.id, a.epoch, &topic),
            Some(ResponseError::UnsupportedVersion),
            "v{version}"
        );
        assert_eq!(
            commit(&mut c, version, &group, "", -1, &topic),
            Some(ResponseError::UnknownMemberId),
            "v{version}"
        );
    }
    // Once the group is empty, admin commits work at any version.
    ok_hb(&mut c, &heartbeat_request(&group, &a.id, -1, None));
    assert_eq!(commit(&mut c, 9, &group, "", -1, &topic), None);
    assert_eq!(commit(&mut c, 2, &group, "", -1, &topic), None);
}

/// TxnOffsetCommit to a consumer group, as Kafka 4.4 checks it: a commit that names no member
/// (generation -1, no member or instance id) is taken while the group has members; a member's
/// newer epoch is ILLEGAL_GENERATION up to v5 and STALE_MEMBER_EPOCH at v6 (KIP-1319); the
/// member at its epoch commits at any version.
#[test]
fn txn_offset_commit_to_a_consumer_group_with_members() {
    use common::txn;
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-txncommit"), unique("t-txncommit"));
    create_topic(&mut c, &topic, 1);
    let a = join(&mut c, &group, &[&topic]);
    let id = unique("txncommit");
    let producer = txn::init_txn(&mut c, &id, 60_000);
    assert_eq!(txn::add_offsets(&mut c, 3, &id, producer, &group), None);
    let commit = |c: &mut Client, v: i16, member: (&str, i32)| {
        txn::txn_offset_commit(c, v, &id, producer, &group, member, &topic, 0, 3)
    };
    assert_eq!(commit(&mut c, 3, ("", -1)), None);
    assert_eq!(commit(&mut c, 6, ("", -1)), None);
    assert_eq!(
        commit(&mut c, 5, (&a.id, a.epoch + 1)),
        Some(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        commit(&mut c, 6, (&a.id, a.epoch + 1)),
        Some(ResponseError::StaleMemberEpoch)
    );
    assert_eq!(
        commit(&mut c, 6, ("nobody", a.epoch)),
        Some(ResponseError::UnknownMemberId)
    );
    for v in [3, 6] {
        assert_eq!(commit(&mut c, v, (&a.id, a.epoch)), None, "v{v}");
    }
    assert_eq!(txn::end_txn(&mut c, 3, &id, producer, true), None);
}

#[test]
fn offset_fetch_v9_checks_the_member_epoch_and_an_admin_fetch_works() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-fetch"), unique("t-fetch"));
    create_topic(&mut c, &topic, 1);
    let a = join(&mut c, &group, &[&topic]);
    assert_eq!(commit(&mut c, 9, &group, &a.id, a.epoch, &topic), None);
    assert_eq!(
        fetch(&mut c, &group, Some((&a.id, a.epoch)), &topic),
        (None, Some(7))
    );
    // A wrong epoch, older or newer: STALE_MEMBER_EPOCH for the group, no topics.
    for epoch in [a.epoch - 1, a.epoch + 1] {
        assert_eq!(
            fetch(&mut c, &group, Some((&a.id, epoch)), &topic),
            (Some(ResponseError::StaleMemberEpoch), None),
            "epoch {epoch}"
        );
    }
    assert_eq!(
        fetch(&mut c, &group, Some(("nobody", a.epoch)), &topic),
        (Some(ResponseError::UnknownMemberId), None)
    );
    // Without a member id and epoch (an admin): the offsets.
    assert_eq!(fetch(&mut c, &group, None, &topic), (None, Some(7)));
}

fn offset_delete(
    c: &mut Client,
    group: &str,
    topic: &str,
) -> (Option<ResponseError>, Vec<Option<ResponseError>>) {
    let resp = c.send(
        0,
        &OffsetDeleteRequest::default()
            .with_group_id(group_id(group))
            .with_topics(vec![OffsetDeleteRequestTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![
                    OffsetDeleteRequestPartition::default().with_partition_index(0)
                ])]),
    );
    (
        err(resp.error_code),
        resp.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| err(p.error_code))
            .collect(),
    )
}

fn delete_group(c: &mut Client, group: &str) -> Option<ResponseError> {
    let resp = c.send(
        2,
        &DeleteGroupsRequest::default().with_groups_names(vec![group_id(group)]),
    );
    assert_eq!(resp.results.len(), 1, "{resp:?}");
    err(resp.results[0].error_code)
}

#[test]
fn offset_delete_and_delete_groups_while_members_are_subscribed_and_once_empty() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-delete"), unique("t-delete"));
    create_topic(&mut c, &topic, 1);
    let a = join(&mut c, &group, &[&topic]);
    assert_eq!(commit(&mut c, 9, &group, &a.id, a.epoch, &topic), None);
    assert_eq!(
        offset_delete(&mut c, &group, &topic),
        (None, vec![Some(ResponseError::GroupSubscribedToTopic)])
    );
    assert_eq!(
        delete_group(&mut c, &group),
        Some(ResponseError::NonEmptyGroup)
    );
    ok_hb(&mut c, &heartbeat_request(&group, &a.id, -1, None));
    assert_eq!(offset_delete(&mut c, &group, &topic), (None, vec![None]));
    assert_eq!(delete_group(&mut c, &group), None);
    let resp = describe(&mut c, 1, &[&group]);
    assert_eq!(
        err(resp.groups[0].error_code),
        Some(ResponseError::GroupIdNotFound),
        "{resp:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Regular expressions and new partitions
// ---------------------------------------------------------------------------------------------

/// How long Kafka takes to resolve a subscribed regex: it refreshes a group's regexes at most
/// every 10 s (REGEX_BATCH_REFRESH_MIN_INTERVAL_MS, not configurable), so a member's regex
/// (and a topic created later that matches it) is resolved up to ~10 s later.
const REGEX_DEADLINE: Duration = Duration::from_secs(25);

#[test]
fn regex_subscription_assigns_matching_topics_including_one_created_later() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-regex");
    let prefix = unique("rx");
    let first = create_topic(&mut c, &format!("{prefix}-a"), 1);
    create_topic(&mut c, &unique("other"), 1);
    let req = join_request(&group, "m1", &[])
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(Some(s(&format!("{prefix}-.*"))));
    let resp = ok_hb(&mut c, &req);
    // The regex is resolved asynchronously: the first answer is epoch 1 with nothing.
    assert!(resp.member_epoch >= 1, "{resp:?}");
    let mut m = Member {
        id: "m1".into(),
        epoch: resp.member_epoch,
        owns: assigned(&resp).unwrap_or_default(),
    };
    eventually_within("the matching topic is assigned", REGEX_DEADLINE, || {
        beat(&mut c, &group, &mut m);
        (m.owns == parts(first, [0])).then_some(())
    });
    let g = describe_one(&mut c, &group);
    assert_eq!(
        g.members[0].subscribed_topic_regex.as_deref(),
        Some(format!("{prefix}-.*").as_str()),
        "{g:?}"
    );
    assert!(g.members[0].subscribed_topic_names.is_empty(), "{g:?}");
    // A topic created after the group formed that matches: assigned too.
    let later = create_topic_only(&mut c, &format!("{prefix}-b"), 2);
    let epoch = m.epoch;
    eventually_within("the later topic is assigned", REGEX_DEADLINE, || {
        beat(&mut c, &group, &mut m);
        let mut want = parts(first, [0]);
        want.extend(parts(later, [0, 1]));
        (m.owns == want).then_some(())
    });
    assert!(m.epoch > epoch, "{m:?}");
}

#[test]
fn bad_regex_is_invalid_regular_expression_and_names_with_a_regex_are_accepted() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-bad-regex");
    let req = join_request(&group, "m1", &[])
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(Some(s("[a-")));
    // The reason after the colon is the regex engine's own wording: Kafka's is Java's
    // ("missing closing ]."), koord's is the regex crate's ("unclosed character class.").
    let (error, message) = hb_error(&mut c, 1, &req);
    assert_eq!(error, Some(ResponseError::InvalidRegularExpression));
    assert!(
        message.starts_with("SubscribedTopicRegex `[a-` is not a valid regular expression: "),
        "{message}"
    );
    // Names and a regex together: accepted.
    let topic = unique("t-names-and-regex");
    let tid = create_topic(&mut c, &topic, 1);
    let req = join_request(&group, "m1", &[&topic])
        .with_subscribed_topic_regex(Some(s(&format!("{topic}-nothing-.*"))));
    let resp = ok_hb(&mut c, &req);
    assert_eq!(assigned(&resp), Some(parts(tid, [0])), "{resp:?}");
}

#[test]
fn partitions_added_to_a_subscribed_topic_are_assigned() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-grow"), unique("t-grow"));
    let tid = create_topic(&mut c, &topic, 2);
    let mut m = join(&mut c, &group, &[&topic]);
    assert_eq!((m.epoch, m.owns.clone()), (2, parts(tid, 0..2)));
    let resp: CreatePartitionsResponse = c.send(
        3,
        &CreatePartitionsRequest::default()
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(topic_name(&topic))
                .with_count(4)
                .with_assignments(None)])
            .with_timeout_ms(10_000),
    );
    assert_eq!(err(resp.results[0].error_code), None, "{resp:?}");
    // The next heartbeats (once the coordinator sees the new partitions) bump the epoch and
    // assign them.
    eventually("the new partitions are assigned", || {
        beat(&mut c, &group, &mut m);
        (m.owns == parts(tid, 0..4)).then_some(())
    });
    assert_eq!(m.epoch, 3, "{m:?}");
    let g = describe_one(&mut c, &group);
    assert_eq!((g.group_epoch, g.assignment_epoch), (3, 3), "{g:?}");
}

// ---------------------------------------------------------------------------------------------
// Rebalance timeout, subscription changes, rejoining
// ---------------------------------------------------------------------------------------------

#[test]
fn member_that_does_not_revoke_within_its_rebalance_timeout_is_removed() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-revoke-timeout"), unique("t-revoke-timeout"));
    let tid = create_topic(&mut c, &topic, 4);
    let resp = ok_hb(
        &mut c,
        &join_request(&group, "slow", &[&topic]).with_rebalance_timeout_ms(2_000),
    );
    let everything = assigned(&resp).expect("an assignment");
    assert_eq!(everything, parts(tid, 0..4));
    let mut b = join(&mut c, &group, &[&topic]);
    // A is asked to revoke and keeps heartbeating without doing so: once its rebalance timeout
    // has passed it is removed from the group.
    let resp = ok_hb(
        &mut c,
        &heartbeat_request(&group, "slow", 2, Some(&everything)),
    );
    assert_eq!(
        (resp.member_epoch, assigned(&resp).map(|a| count(&a))),
        (2, Some(2)),
        "{resp:?}"
    );
    let started = Instant::now();
    let answer = eventually_within(
        "the slow member is removed",
        Duration::from_millis(2_000) + DEADLINE,
        || {
            let resp = send_hb(
                &mut c,
                1,
                &heartbeat_request(&group, "slow", 2, Some(&everything)),
            );
            (resp.error_code != 0).then(|| {
                (
                    err(resp.error_code),
                    resp.error_message.map(|m| m.to_string()),
                )
            })
        },
    );
    assert_eq!(
        answer,
        (
            Some(ResponseError::UnknownMemberId),
            Some(format!("Member slow is not a member of group {group}."))
        )
    );
    assert!(
        started.elapsed() >= Duration::from_millis(1_500),
        "{:?}",
        started.elapsed()
    );
    eventually("the other member owns every partition", || {
        beat(&mut c, &group, &mut b);
        (b.owns == parts(tid, 0..4)).then_some(())
    });
}

#[test]
fn changing_the_subscription_bumps_the_group_epoch_and_assigns_the_new_topic() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-resubscribe");
    let (t1, t2) = (unique("t-resub1"), unique("t-resub2"));
    let id1 = create_topic(&mut c, &t1, 2);
    let id2 = create_topic(&mut c, &t2, 1);
    let m = join(&mut c, &group, &[&t1]);
    assert_eq!((m.epoch, m.owns.clone()), (2, parts(id1, 0..2)));
    let req = heartbeat_request(&group, &m.id, m.epoch, Some(&m.owns))
        .with_subscribed_topic_names(Some(vec![topic_name(&t1), topic_name(&t2)]));
    let resp = ok_hb(&mut c, &req);
    let mut want = parts(id1, 0..2);
    want.extend(parts(id2, [0]));
    assert_eq!(
        (resp.member_epoch, assigned(&resp)),
        (3, Some(want)),
        "{resp:?}"
    );
    // Dropping t1: the group epoch is bumped to 4, but the member stays at 3 and is told to keep
    // only t2 (t1 must be revoked first); once it no longer owns t1, it is at 4.
    let req = heartbeat_request(&group, &m.id, 3, None)
        .with_subscribed_topic_names(Some(vec![topic_name(&t2)]));
    let resp = ok_hb(&mut c, &req);
    assert_eq!(
        (resp.member_epoch, assigned(&resp)),
        (3, Some(parts(id2, [0]))),
        "{resp:?}"
    );
    assert_eq!(describe_one(&mut c, &group).group_epoch, 4);
    let resp = ok_hb(
        &mut c,
        &heartbeat_request(&group, &m.id, 3, Some(&parts(id2, [0]))),
    );
    assert_eq!(resp.member_epoch, 4, "{resp:?}");
    let g = describe_one(&mut c, &group);
    assert_eq!(
        g.members[0].subscribed_topic_names,
        vec![topic_name(&t2)],
        "{g:?}"
    );
}

#[test]
fn a_known_member_rejoining_with_epoch_zero_gets_its_assignment_back() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-rejoin"), unique("t-rejoin"));
    let tid = create_topic(&mut c, &topic, 2);
    let m = join(&mut c, &group, &[&topic]);
    // Fenced (too high an epoch), the member rejoins with epoch 0 and the same id.
    let (e, _) = hb_error(
        &mut c,
        1,
        &heartbeat_request(&group, &m.id, m.epoch + 1, None),
    );
    assert_eq!(e, Some(ResponseError::FencedMemberEpoch));
    let resp = ok_hb(&mut c, &join_request(&group, &m.id, &[&topic]));
    assert_eq!(
        (resp.member_epoch, assigned(&resp)),
        (m.epoch, Some(parts(tid, 0..2))),
        "{resp:?}"
    );
    let g = describe_one(&mut c, &group);
    assert_eq!((g.group_epoch, g.members.len()), (m.epoch, 1), "{g:?}");
}

#[test]
fn subscribing_to_a_missing_topic_assigns_nothing_until_it_is_created() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-missing-topic"), unique("t-missing-topic"));
    // Epoch 2, as for an existing topic (see the first test), with nothing assigned.
    let resp = ok_hb(&mut c, &join_request(&group, "m1", &[&topic]));
    assert_eq!(
        (resp.member_epoch, assigned(&resp)),
        (2, Some(Parts::new())),
        "{resp:?}"
    );
    let mut m = Member {
        id: "m1".into(),
        epoch: 2,
        owns: Parts::new(),
    };
    let tid = create_topic_only(&mut c, &topic, 2);
    eventually("the created topic is assigned", || {
        beat(&mut c, &group, &mut m);
        (m.owns == parts(tid, 0..2)).then_some(())
    });
    assert_eq!(m.epoch, 3, "{m:?}");
}

#[test]
fn classic_heartbeat_leave_and_join_on_a_consumer_group() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-classic-apis"), unique("t-classic-apis"));
    create_topic(&mut c, &topic, 2);
    let a = join(&mut c, &group, &[&topic]);
    let b = join(&mut c, &group, &[&topic]);
    // A classic Heartbeat from a consumer-protocol member: UNKNOWN_MEMBER_ID.
    let resp = c.send(
        4,
        &HeartbeatRequest::default()
            .with_group_id(group_id(&group))
            .with_generation_id(a.epoch)
            .with_member_id(s(&a.id)),
    );
    assert_eq!(
        err(resp.error_code),
        Some(ResponseError::UnknownMemberId),
        "{resp:?}"
    );
    // A classic LeaveGroup (v5, batch) of a consumer-protocol member: accepted, the member is
    // removed as by a heartbeat with epoch -1.
    let resp = c.send(
        5,
        &LeaveGroupRequest::default()
            .with_group_id(group_id(&group))
            .with_members(vec![MemberIdentity::default().with_member_id(s(&b.id))]),
    );
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    assert_eq!(resp.members.len(), 1, "{resp:?}");
    assert_eq!(err(resp.members[0].error_code), None, "{resp:?}");
    let g = describe_one(&mut c, &group);
    let ids: Vec<&str> = g.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(ids, vec![a.id.as_str()], "{g:?}");
}

#[test]
fn classic_join_of_a_consumer_group_makes_a_mixed_group() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-mixed"), unique("t-mixed"));
    create_topic(&mut c, &topic, 2);
    stable_group(&mut c, &group, &topic, 1);
    // A classic JoinGroup (v9, no member id): a classic consumer member may join a consumer
    // group (a mixed group): MEMBER_ID_REQUIRED with a generated id, as for a classic group.
    // With another protocol type: INCONSISTENT_GROUP_PROTOCOL.
    let join = |c: &mut Client, protocol_type: &str| {
        c.send(
            9,
            &JoinGroupRequest::default()
                .with_group_id(group_id(&group))
                .with_session_timeout_ms(30_000)
                .with_rebalance_timeout_ms(30_000)
                .with_member_id(s(""))
                .with_protocol_type(s(protocol_type))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(s("range"))
                    .with_metadata(subscription(&[&topic]))]),
        )
    };
    let resp = join(&mut c, "consumer");
    assert_eq!(
        err(resp.error_code),
        Some(ResponseError::MemberIdRequired),
        "{resp:?}"
    );
    assert!(!resp.member_id.is_empty(), "{resp:?}");
    let resp = join(&mut c, "connect");
    assert_eq!(
        err(resp.error_code),
        Some(ResponseError::InconsistentGroupProtocol),
        "{resp:?}"
    );
    assert_eq!(resp.member_id.as_str(), "", "{resp:?}");
}

/// A classic JoinGroup (v9) of a consumer-protocol member offering `range`, owning `owns`
/// (ConsumerProtocolSubscription v1, as a cooperative client sends it).
fn classic_join(
    c: &mut Client,
    group: &str,
    member: &str,
    topic: &str,
    owns: &[i32],
) -> kafka_protocol::messages::JoinGroupResponse {
    use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition;
    let mut b = BytesMut::new();
    b.put_i16(1);
    ConsumerProtocolSubscription::default()
        .with_topics(vec![s(topic)])
        .with_owned_partitions(if owns.is_empty() {
            vec![]
        } else {
            vec![TopicPartition::default()
                .with_topic(topic_name(topic))
                .with_partitions(owns.to_vec())]
        })
        .encode(&mut b, 1)
        .expect("encode a subscription");
    c.send(
        9,
        &JoinGroupRequest::default()
            .with_group_id(group_id(group))
            .with_session_timeout_ms(30_000)
            .with_rebalance_timeout_ms(30_000)
            .with_member_id(s(member))
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(b.freeze())]),
    )
}

/// A classic SyncGroup (v5) as a follower: the error and the partitions of `topic` assigned.
fn classic_sync(
    c: &mut Client,
    group: &str,
    member: &str,
    generation: i32,
    topic: &str,
) -> (Option<ResponseError>, Vec<i32>) {
    use kafka_protocol::messages::ConsumerProtocolAssignment;
    use kafka_protocol::protocol::Decodable;
    let resp = c.send(
        5,
        &SyncGroupRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id(generation)
            .with_member_id(s(member))
            .with_protocol_type(Some(s("consumer")))
            .with_protocol_name(Some(s("range"))),
    );
    if resp.error_code != 0 {
        return (err(resp.error_code), Vec::new());
    }
    let mut bytes = resp.assignment.clone();
    assert!(bytes.len() >= 2, "{resp:?}");
    let version = i16::from_be_bytes([bytes[0], bytes[1]]);
    let _ = bytes.split_to(2);
    let a = ConsumerProtocolAssignment::decode(&mut bytes, version.min(3)).expect("an assignment");
    let mut out: Vec<i32> = a
        .assigned_partitions
        .iter()
        .filter(|t| t.topic.as_str() == topic)
        .flat_map(|t| t.partitions.iter().copied())
        .collect();
    out.sort_unstable();
    (None, out)
}

fn classic_heartbeat(
    c: &mut Client,
    group: &str,
    member: &str,
    generation: i32,
) -> Option<ResponseError> {
    let resp: kafka_protocol::messages::HeartbeatResponse = c.send(
        4,
        &HeartbeatRequest::default()
            .with_group_id(group_id(group))
            .with_member_id(s(member))
            .with_generation_id(generation),
    );
    err(resp.error_code)
}

#[test]
fn a_classic_member_of_a_consumer_group_joins_syncs_and_heartbeats_by_its_member_epoch() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-mixed-flow"), unique("t-mixed-flow"));
    let tid = create_topic(&mut c, &topic, 2);
    let (mut members, epoch) = stable_group(&mut c, &group, &topic, 1);
    assert_eq!(epoch, 2);
    let first = classic_join(&mut c, &group, "", &topic, &[]);
    assert_eq!(
        err(first.error_code),
        Some(ResponseError::MemberIdRequired),
        "{first:?}"
    );
    let id = first.member_id.to_string();
    // Joining bumps the group epoch; its generation is its member epoch, it is no leader and
    // gets no members: it syncs as a follower. Its partition is still the other member's.
    let joined = classic_join(&mut c, &group, &id, &topic, &[]);
    assert_eq!(err(joined.error_code), None, "{joined:?}");
    assert_eq!(joined.generation_id, 3, "{joined:?}");
    assert_eq!(
        joined.protocol_type.as_deref(),
        Some("consumer"),
        "{joined:?}"
    );
    assert_eq!(joined.protocol_name.as_deref(), Some("range"), "{joined:?}");
    assert_eq!(joined.leader.as_str(), "", "{joined:?}");
    assert!(joined.members.is_empty(), "{joined:?}");
    assert_eq!(classic_sync(&mut c, &group, &id, 3, &topic), (None, vec![]));
    assert_eq!(
        classic_sync(&mut c, &group, &id, 2, &topic).0,
        Some(ResponseError::IllegalGeneration)
    );
    // While the partition is held elsewhere its heartbeat is fine...
    assert_eq!(classic_heartbeat(&mut c, &group, &id, 3), None);
    assert_eq!(
        classic_heartbeat(&mut c, &group, &id, 2),
        Some(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        classic_heartbeat(&mut c, &group, "nobody", 3),
        Some(ResponseError::UnknownMemberId)
    );
    // ...until the consumer member revoked it: then it must join again to get it.
    converge(&mut c, &group, &mut members, 3);
    assert_eq!(count(&members[0].owns), 1);
    eventually("the classic member is told to rejoin", || {
        (classic_heartbeat(&mut c, &group, &id, 3) == Some(ResponseError::RebalanceInProgress))
            .then_some(())
    });
    let joined = classic_join(&mut c, &group, &id, &topic, &[]);
    assert_eq!((err(joined.error_code), joined.generation_id), (None, 3));
    let (error, got) = classic_sync(&mut c, &group, &id, 3, &topic);
    assert_eq!(error, None);
    assert_eq!(got.len(), 1);
    assert!(!members[0].owns[&tid].contains(&got[0]));
    assert_eq!(classic_heartbeat(&mut c, &group, &id, 3), None);
    let g = describe_one(&mut c, &group);
    assert_eq!(g.group_state.as_str(), "Stable", "{g:?}");
    let classic = g
        .members
        .iter()
        .find(|m| m.member_id.as_str() == id)
        .expect("listed");
    assert_eq!(classic.member_type, 0, "{classic:?}");
    assert_eq!(classic.member_epoch, 3, "{classic:?}");
}

#[test]
fn the_last_consumer_member_leaving_a_mixed_group_downgrades_it_to_a_classic_group() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-downgrade"), unique("t-downgrade"));
    create_topic(&mut c, &topic, 2);
    let (members, _) = stable_group(&mut c, &group, &topic, 1);
    let first = classic_join(&mut c, &group, "", &topic, &[]);
    let id = first.member_id.to_string();
    let joined = classic_join(&mut c, &group, &id, &topic, &[]);
    assert_eq!(err(joined.error_code), None, "{joined:?}");
    let m = &members[0];
    let resp = send_hb(
        &mut c,
        1,
        &heartbeat_request(&group, &m.id, -1, Some(&m.owns)),
    );
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    // Now a classic group of one member, rebalancing: ListGroups says so, ConsumerGroupDescribe
    // no longer describes it, and the member is told to join again.
    let listed = list_groups(&mut c, &[], &[]);
    assert_eq!(
        listed
            .get(&group)
            .map(|(t, st, ty)| (t.as_str(), st.as_str(), ty.as_str())),
        Some(("consumer", "PreparingRebalance", "classic")),
        "{listed:?}"
    );
    let resp = describe(&mut c, 1, &[&group]);
    assert_eq!(
        err(resp.groups[0].error_code),
        Some(ResponseError::GroupIdNotFound),
        "{resp:?}"
    );
    assert_eq!(
        classic_heartbeat(&mut c, &group, &id, joined.generation_id),
        Some(ResponseError::RebalanceInProgress)
    );
    // It rejoins the classic way and leads the next generation.
    let rejoined = classic_join(&mut c, &group, &id, &topic, &[]);
    assert_eq!(err(rejoined.error_code), None, "{rejoined:?}");
    assert_eq!(
        rejoined.generation_id,
        joined.generation_id + 1,
        "{rejoined:?}"
    );
    assert_eq!(rejoined.leader.as_str(), id, "{rejoined:?}");
}

#[test]
fn the_status_page_shows_a_consumer_groups_rounds_and_moves() {
    let port = common::free_port();
    let http_set = format!("http.listen=127.0.0.1:{port}");
    let mut sets = CONSUMER_LIKE.to_vec();
    sets.push(&http_set);
    let Some(koord) = Koord::start_owned(
        "the_status_page_shows_a_consumer_groups_rounds_and_moves",
        &sets,
    ) else {
        return;
    };
    let mut c = koord.connect();
    let (group, topic) = (unique("g-status"), unique("t-status"));
    create_topic(&mut c, &topic, 4);
    let (_, epoch) = stable_group(&mut c, &group, &topic, 2);
    let http = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let (status, body) = common::http_path(http, &format!("/api/groups/{group}"));
    assert_eq!(status, 200, "{body}");
    let view: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(view["kind"], "consumer", "{view}");
    let rounds = view["rebalances"].as_array().expect("rebalances");
    // One round a member: the first gets every partition, the second takes half of them.
    assert_eq!(rounds.len(), 2, "{view}");
    let last = &rounds[1];
    assert_eq!(last["epoch"], epoch, "{view}");
    assert_eq!(last["members"].as_array().map(Vec::len), Some(2), "{view}");
    assert_eq!(last["moves"].as_array().map(Vec::len), Some(2), "{view}");
    assert_eq!(last["assignor"], "uniform", "{view}");
}

#[test]
fn static_member_that_left_and_does_not_come_back_is_removed_after_the_session_timeout() {
    let koord = server();
    let mut c = koord.connect();
    let (group, topic) = (unique("g-static-expiry"), unique("t-static-expiry"));
    let tid = create_topic(&mut c, &topic, 2);
    let resp = ok_hb(
        &mut c,
        &join_request(&group, "s1", &[&topic]).with_instance_id(Some(s("i1"))),
    );
    assert_eq!(resp.member_epoch, 2, "{resp:?}");
    let mut other = join(&mut c, &group, &[&topic]);
    let mut members = [
        Member {
            id: "s1".into(),
            epoch: 2,
            owns: assigned(&resp).unwrap_or_default(),
        },
        other.clone(),
    ];
    let epoch = describe_one(&mut c, &group).group_epoch;
    converge(&mut c, &group, &mut members, epoch);
    other = members[1].clone();
    ok_hb(
        &mut c,
        &heartbeat_request(&group, "s1", -2, None).with_instance_id(Some(s("i1"))),
    );
    eventually_within(
        "the departed static member expires",
        Duration::from_millis(SESSION_MS) + DEADLINE,
        || {
            beat(&mut c, &group, &mut other);
            let g = describe_one(&mut c, &group);
            (g.members.len() == 1).then_some(())
        },
    );
    eventually("the other member owns every partition", || {
        beat(&mut c, &group, &mut other);
        (other.owns == parts(tid, 0..2)).then_some(())
    });
    assert!(other.epoch > epoch, "{other:?}");
    // The instance now joins as a new member, at a new epoch.
    let resp = ok_hb(
        &mut c,
        &join_request(&group, "s2", &[&topic]).with_instance_id(Some(s("i1"))),
    );
    assert_eq!(resp.member_epoch, other.epoch + 1, "{resp:?}");
}
