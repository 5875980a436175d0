//! Raw wire conformance of the classic group APIs: JoinGroup v0-9, SyncGroup v0-5, Heartbeat
//! v0-4, LeaveGroup v0-5, OffsetCommit v2-9, OffsetFetch v1-9, OffsetDelete v0, DescribeGroups
//! v0-6, ListGroups v0-5 and DeleteGroups v0-2.
//!
//! Every expectation here was checked against Apache Kafka 4.4 (`scripts/kafka.sh start`, then
//! `KOORD_BOOTSTRAP=$(cat .build/kafka/bootstrap) cargo test --release --test groups`): where
//! Kafka and the spec notes disagree, these tests follow Kafka and say so. Most run koord with
//! the leader assigning, as Kafka does; the SkipAssignment tests at the end run it on its
//! defaults (it assigns on the server), where a JoinGroup leader must still get Kafka's answer,
//! and a koord-only test drives its guard for leaders that reject its plan
//! (`group.assignment.fallback.rejoins`).
//!
//! Each test uses its own group ids and topics, so the tests run in parallel, against one koord
//! each or against one shared external broker. Nothing waits on a fixed sleep for correctness:
//! requests that Kafka parks (JoinGroup, SyncGroup) are written on their own connection and
//! their answers read later, and state changes are awaited by polling with a deadline.

mod common;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::Write;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use common::{err, frame, group_id, s, topic_name, unique, Client, Koord, DEADLINE};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedPartitions;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ConsumerProtocolAssignment, ConsumerProtocolSubscription, CreateTopicsRequest,
    CreateTopicsResponse, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, MetadataRequest,
    MetadataResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
    OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest,
    SyncGroupResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request};
use kafka_protocol::ResponseError;

// ---------------------------------------------------------------------------------------------
// Server and names
// ---------------------------------------------------------------------------------------------

/// The settings `scripts/kafka.sh` gives the reference broker, so koord answers under the same
/// configuration: a 1 s minimum session timeout and no initial rebalance delay; and the leader
/// assigns, as in Kafka (these tests send opaque member metadata and check that the leader's
/// assignment comes back; koord's server assignment is tested in tests/assignment.rs).
const KAFKA_LIKE: &[&str] = &[
    "group.min.session.timeout.ms=1000",
    "group.initial.rebalance.delay.ms=0",
    "group.assignor=client",
];

/// The server under test: koord started with [`KAFKA_LIKE`], or the `KOORD_BOOTSTRAP` server.
fn server() -> Koord {
    Koord::start(KAFKA_LIKE)
}

/// The client id every connection sends (see `common::request_header`).
const CLIENT_ID: &str = "koord-wire-test";

/// Session and rebalance timeouts long enough that nothing expires while a test runs, but
/// within both servers' bounds.
const SESSION_MS: i32 = 30_000;
const REBALANCE_MS: i32 = 30_000;

const PROTOCOL_TYPE: &str = "consumer";
const PROTOCOL: &str = "range";

/// Polls `probe` until it returns `Some`, for at most [`DEADLINE`].
fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------------
// Topics
// ---------------------------------------------------------------------------------------------

/// Creates `name` with `partitions` and waits until Metadata shows every partition with a
/// leader: Kafka's metadata is eventually consistent, and OffsetCommit checks it.
fn create_topic(koord: &Koord, name: &str, partitions: i32) {
    let mut c = koord.connect();
    let resp: CreateTopicsResponse = c.call(
        7,
        &CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(topic_name(name))
                .with_num_partitions(partitions)
                .with_replication_factor(1)])
            .with_timeout_ms(10_000),
    );
    assert_eq!(resp.topics.len(), 1, "{resp:?}");
    assert_eq!(
        err(resp.topics[0].error_code),
        None,
        "create {name}: {resp:?}"
    );
    eventually(&format!("topic {name} visible in Metadata"), || {
        let resp: MetadataResponse = c.call(
            12,
            &MetadataRequest::default()
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(topic_name(name)))
                ]))
                .with_allow_auto_topic_creation(false),
        );
        let t = resp.topics.first()?;
        (err(t.error_code).is_none()
            && t.partitions.len() == partitions as usize
            && t.partitions.iter().all(|p| p.leader_id.0 >= 0))
        .then_some(())
    });
}

// ---------------------------------------------------------------------------------------------
// The consumer embedded protocol
// ---------------------------------------------------------------------------------------------

/// A ConsumerProtocolSubscription v0 (the i16 version, then the v0 body: topics, null user
/// data), as a Java consumer sends in JoinGroup metadata.
fn subscription(topics: &[&str]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| s(t)).collect())
        .encode(&mut b, 0)
        .expect("encode a subscription");
    b.freeze()
}

/// A ConsumerProtocolAssignment v0 of `partitions` of `topic`.
fn assignment(topic: &str, partitions: &[i32]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    ConsumerProtocolAssignment::default()
        .with_assigned_partitions(vec![AssignedPartitions::default()
            .with_topic(topic_name(topic))
            .with_partitions(partitions.to_vec())])
        .encode(&mut b, 0)
        .expect("encode an assignment");
    b.freeze()
}

// ---------------------------------------------------------------------------------------------
// Exchanges, optionally traced
// ---------------------------------------------------------------------------------------------

/// With `GROUPS_TRACE=dir`, every exchange is appended to `dir/<test name>.log` (request and
/// response, debug-printed), so runs against Kafka and koord can be diffed field by field,
/// beyond what the assertions check.
const TRACE_ENV: &str = "GROUPS_TRACE";

fn trace(key: ApiKey, version: i16, request: &str, response: &dyn Debug) {
    let Some(dir) = std::env::var_os(TRACE_ENV) else {
        return;
    };
    let test = std::thread::current()
        .name()
        .unwrap_or("main")
        .replace("::", "-");
    let path = std::path::Path::new(&dir).join(format!("{test}.log"));
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    writeln!(f, "{key:?} v{version} {request}\n  => {response:?}").expect("write the trace");
}

/// [`Client::send`], traced.
trait Call {
    fn call<R>(&mut self, version: i16, request: &R) -> R::Response
    where
        R: Request + Debug,
        R::Response: Debug;
}

impl Call for Client {
    fn call<R>(&mut self, version: i16, request: &R) -> R::Response
    where
        R: Request + Debug,
        R::Response: Debug,
    {
        let response = self.send(version, request);
        let key = ApiKey::try_from(R::KEY).expect("a known key");
        trace(key, version, &format!("{request:?}"), &response);
        response
    }
}

// ---------------------------------------------------------------------------------------------
// Parked requests
// ---------------------------------------------------------------------------------------------

/// A request written on its own connection whose answer is read later: how a test holds a
/// JoinGroup or SyncGroup that the coordinator parks, without threads.
struct Pending<R: Request> {
    client: Client,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    /// The request, debug-printed for the trace.
    request: String,
    _request: PhantomData<R>,
}

impl<R> Pending<R>
where
    R: Request + Debug,
    R::Response: Debug,
{
    fn send(koord: &Koord, version: i16, request: &R) -> Pending<R> {
        let mut client = koord.connect();
        let key = ApiKey::try_from(R::KEY).expect("a known key");
        let correlation_id = client.correlation_id();
        client
            .send_bytes(&frame(key, version, correlation_id, |b| {
                request.encode(b, version)
            }))
            .unwrap_or_else(|e| panic!("send {key:?} v{version}: {e}"));
        Pending {
            client,
            key,
            version,
            correlation_id,
            request: format!("{request:?}"),
            _request: PhantomData,
        }
    }

    /// The answer, within [`DEADLINE`].
    fn wait(mut self) -> R::Response {
        let (key, version) = (self.key, self.version);
        let mut body = self
            .client
            .read_response(key, version, self.correlation_id)
            .unwrap_or_else(|e| panic!("{key:?} v{version} answer: {e}"));
        let response = R::Response::decode(&mut body, version)
            .unwrap_or_else(|e| panic!("decode {key:?} v{version} response: {e:#}"));
        trace(
            key,
            version,
            &format!("(parked) {}", self.request),
            &response,
        );
        response
    }
}

// ---------------------------------------------------------------------------------------------
// Classic group requests
// ---------------------------------------------------------------------------------------------

/// A consumer JoinGroup offering the "range" protocol with a subscription to `topics`.
fn join_request(group: &str, member_id: &str, topics: &[&str]) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(group_id(group))
        .with_session_timeout_ms(SESSION_MS)
        .with_rebalance_timeout_ms(REBALANCE_MS)
        .with_member_id(s(member_id))
        .with_protocol_type(s(PROTOCOL_TYPE))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s(PROTOCOL))
            .with_metadata(subscription(topics))])
}

/// A SyncGroup at `version`; v5 names the protocol type and name, as Java clients do.
fn sync_request(
    version: i16,
    group: &str,
    generation: i32,
    member_id: &str,
    assignments: Vec<(String, Bytes)>,
) -> SyncGroupRequest {
    let req = SyncGroupRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id(generation)
        .with_member_id(s(member_id))
        .with_assignments(
            assignments
                .into_iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(s(&m))
                        .with_assignment(a)
                })
                .collect(),
        );
    if version >= 5 {
        req.with_protocol_type(Some(s(PROTOCOL_TYPE)))
            .with_protocol_name(Some(s(PROTOCOL)))
    } else {
        req
    }
}

fn heartbeat(c: &mut Client, version: i16, group: &str, generation: i32, member_id: &str) -> i16 {
    c.call(
        version,
        &HeartbeatRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id(generation)
            .with_member_id(s(member_id)),
    )
    .error_code
}

/// LeaveGroup v3+ for the dynamic members `member_ids`.
fn leave_batch(
    c: &mut Client,
    version: i16,
    group: &str,
    member_ids: &[&str],
) -> LeaveGroupResponse {
    c.call(
        version,
        &LeaveGroupRequest::default()
            .with_group_id(group_id(group))
            .with_members(
                member_ids
                    .iter()
                    .map(|m| {
                        let id = MemberIdentity::default().with_member_id(s(m));
                        if version >= 5 {
                            id.with_reason(Some(s("the test is done with it")))
                        } else {
                            id
                        }
                    })
                    .collect(),
            ),
    )
}

/// LeaveGroup for one dynamic member at any version; its error (top-level at v0-2, the one
/// member's at v3+).
fn leave(c: &mut Client, version: i16, group: &str, member_id: &str) -> Option<ResponseError> {
    if version >= 3 {
        let resp = leave_batch(c, version, group, &[member_id]);
        assert_eq!(err(resp.error_code), None, "{resp:?}");
        assert_eq!(resp.members.len(), 1, "{resp:?}");
        err(resp.members[0].error_code)
    } else {
        let resp: LeaveGroupResponse = c.call(
            version,
            &LeaveGroupRequest::default()
                .with_group_id(group_id(group))
                .with_member_id(s(member_id)),
        );
        err(resp.error_code)
    }
}

fn describe(c: &mut Client, version: i16, groups: &[&str]) -> DescribeGroupsResponse {
    c.call(
        version,
        &DescribeGroupsRequest::default().with_groups(groups.iter().map(|g| group_id(g)).collect()),
    )
}

/// The state DescribeGroups v5 reports for `group` ("Dead" for a missing one).
fn state(c: &mut Client, group: &str) -> String {
    let resp = describe(c, 5, &[group]);
    assert_eq!(resp.groups.len(), 1, "{resp:?}");
    assert_eq!(err(resp.groups[0].error_code), None, "{resp:?}");
    resp.groups[0].group_state.to_string()
}

/// Polls DescribeGroups until `group` is in `want`.
fn await_state(c: &mut Client, group: &str, want: &str) {
    eventually(&format!("{group} in state {want}"), || {
        (state(c, group) == want).then_some(())
    });
}

fn list_groups(c: &mut Client, version: i16, states: &[&str], types: &[&str]) -> Vec<ListedGroup> {
    let resp: ListGroupsResponse = c.call(
        version,
        &ListGroupsRequest::default()
            .with_states_filter(states.iter().map(|v| s(v)).collect())
            .with_types_filter(types.iter().map(|v| s(v)).collect()),
    );
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    resp.groups
}

/// The listed group named `group`, if listed.
fn listed<'a>(groups: &'a [ListedGroup], group: &str) -> Option<&'a ListedGroup> {
    groups.iter().find(|g| g.group_id.0.as_str() == group)
}

fn delete_groups(
    c: &mut Client,
    version: i16,
    groups: &[&str],
) -> BTreeMap<String, Option<ResponseError>> {
    let resp: DeleteGroupsResponse = c.call(
        version,
        &DeleteGroupsRequest::default()
            .with_groups_names(groups.iter().map(|g| group_id(g)).collect()),
    );
    assert_eq!(resp.results.len(), groups.len(), "{resp:?}");
    resp.results
        .iter()
        .map(|r| (r.group_id.0.to_string(), err(r.error_code)))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Offsets
// ---------------------------------------------------------------------------------------------

/// One partition to commit: topic, partition, offset, metadata.
type Offset<'a> = (&'a str, i32, i64, Option<&'a str>);

/// Per (topic, partition) results.
type PerPartition<T> = BTreeMap<(String, i32), T>;

/// OffsetCommit at `version` as member `member_id` of `generation` (-1 and "" for a simple
/// group or an admin commit); the error of each partition.
fn commit(
    c: &mut Client,
    version: i16,
    group: &str,
    generation: i32,
    member_id: &str,
    offsets: &[Offset],
) -> PerPartition<Option<ResponseError>> {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for &(topic, partition, offset, metadata) in offsets {
        let p = OffsetCommitRequestPartition::default()
            .with_partition_index(partition)
            .with_committed_offset(offset)
            .with_committed_metadata(metadata.map(s));
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(topic_name(topic))
                    .with_partitions(vec![p]),
            ),
        }
    }
    let resp: OffsetCommitResponse = c.call(
        version,
        &OffsetCommitRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(s(member_id))
            .with_topics(topics),
    );
    let mut out = BTreeMap::new();
    for t in &resp.topics {
        for p in &t.partitions {
            out.insert((t.name.0.to_string(), p.partition_index), err(p.error_code));
        }
    }
    assert_eq!(
        out.len(),
        offsets.len(),
        "one result per partition: {resp:?}"
    );
    out
}

/// All partitions committed without error.
fn all_ok(offsets: &[Offset]) -> PerPartition<Option<ResponseError>> {
    offsets
        .iter()
        .map(|&(t, p, _, _)| ((t.to_string(), p), None))
        .collect()
}

/// One partition as OffsetFetch reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Committed {
    offset: i64,
    leader_epoch: i32,
    metadata: Option<String>,
    error: Option<ResponseError>,
}

impl Committed {
    /// A committed offset with `metadata` and no leader epoch.
    fn at(offset: i64, metadata: &str) -> Committed {
        Committed {
            offset,
            leader_epoch: -1,
            metadata: Some(metadata.to_string()),
            error: None,
        }
    }

    /// What OffsetFetch answers for a partition with no committed offset.
    fn none() -> Committed {
        Committed::at(-1, "")
    }
}

/// The topics and partitions to fetch; `None` asks for every committed offset (v2+).
type Wanted<'a> = Option<&'a [(&'a str, &'a [i32])]>;

/// One group's OffsetFetch result: the group's error and its partitions.
type Fetched = (Option<ResponseError>, PerPartition<Committed>);

/// OffsetFetch v8+ for several groups at once, in request order.
fn fetch_groups(c: &mut Client, version: i16, groups: &[(&str, Wanted)]) -> Vec<(String, Fetched)> {
    assert!(version >= 8);
    let req = OffsetFetchRequest::default().with_groups(
        groups
            .iter()
            .map(|(g, wanted)| {
                OffsetFetchRequestGroup::default()
                    .with_group_id(group_id(g))
                    .with_topics(wanted.map(|ts| {
                        ts.iter()
                            .map(|(t, ps)| {
                                OffsetFetchRequestTopics::default()
                                    .with_name(topic_name(t))
                                    .with_partition_indexes(ps.to_vec())
                            })
                            .collect()
                    }))
            })
            .collect(),
    );
    let resp: OffsetFetchResponse = c.call(version, &req);
    assert_eq!(resp.groups.len(), groups.len(), "{resp:?}");
    resp.groups
        .iter()
        .map(|g| {
            let mut parts = BTreeMap::new();
            for t in &g.topics {
                for p in &t.partitions {
                    parts.insert(
                        (t.name.0.to_string(), p.partition_index),
                        Committed {
                            offset: p.committed_offset,
                            leader_epoch: p.committed_leader_epoch,
                            metadata: p.metadata.as_ref().map(|m| m.to_string()),
                            error: err(p.error_code),
                        },
                    );
                }
            }
            (g.group_id.0.to_string(), (err(g.error_code), parts))
        })
        .collect()
}

/// OffsetFetch for one group at any version. v1 has no top-level error: `None` there.
fn fetch(c: &mut Client, version: i16, group: &str, wanted: Wanted) -> Fetched {
    if version >= 8 {
        return fetch_groups(c, version, &[(group, wanted)]).remove(0).1;
    }
    let req = OffsetFetchRequest::default()
        .with_group_id(group_id(group))
        .with_topics(wanted.map(|ts| {
            ts.iter()
                .map(|(t, ps)| {
                    OffsetFetchRequestTopic::default()
                        .with_name(topic_name(t))
                        .with_partition_indexes(ps.to_vec())
                })
                .collect()
        }));
    let resp: OffsetFetchResponse = c.call(version, &req);
    let mut parts = BTreeMap::new();
    for t in &resp.topics {
        for p in &t.partitions {
            parts.insert(
                (t.name.0.to_string(), p.partition_index),
                Committed {
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.metadata.as_ref().map(|m| m.to_string()),
                    error: err(p.error_code),
                },
            );
        }
    }
    (err(resp.error_code), parts)
}

fn offset_delete(
    c: &mut Client,
    group: &str,
    partitions: &[(&str, i32)],
) -> (Option<ResponseError>, PerPartition<Option<ResponseError>>) {
    let mut topics: Vec<OffsetDeleteRequestTopic> = Vec::new();
    for &(topic, partition) in partitions {
        let p = OffsetDeleteRequestPartition::default().with_partition_index(partition);
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                OffsetDeleteRequestTopic::default()
                    .with_name(topic_name(topic))
                    .with_partitions(vec![p]),
            ),
        }
    }
    let resp: OffsetDeleteResponse = c.call(
        0,
        &OffsetDeleteRequest::default()
            .with_group_id(group_id(group))
            .with_topics(topics),
    );
    let mut out = BTreeMap::new();
    for t in &resp.topics {
        for p in &t.partitions {
            out.insert((t.name.0.to_string(), p.partition_index), err(p.error_code));
        }
    }
    (err(resp.error_code), out)
}

fn key(topic: &str, partition: i32) -> (String, i32) {
    (topic.to_string(), partition)
}

// ---------------------------------------------------------------------------------------------
// Forming groups
// ---------------------------------------------------------------------------------------------

/// A member of a Stable group, as the last rebalance left it.
#[derive(Debug, Clone)]
struct Member {
    id: String,
    generation: i32,
    /// The member id of the group's leader.
    leader: String,
    /// The assignment SyncGroup returned to this member.
    assignment: Bytes,
}

/// A new dynamic member's id: JoinGroup v9 without one is MEMBER_ID_REQUIRED with the id.
fn member_id_required(c: &mut Client, group: &str, topics: &[&str]) -> String {
    let resp = c.call(9, &join_request(group, "", topics));
    assert_eq!(
        err(resp.error_code),
        Some(ResponseError::MemberIdRequired),
        "{resp:?}"
    );
    assert!(!resp.member_id.is_empty(), "{resp:?}");
    resp.member_id.to_string()
}

/// The SyncGroup round after a join round: followers' SyncGroups are parked first, then the
/// leader assigns partition `i` of `topic` to the `i`th member it was given. The assignments
/// returned, in `joins` order.
fn sync_round(koord: &Koord, group: &str, topic: &str, joins: &[JoinGroupResponse]) -> Vec<Bytes> {
    let generation = joins[0].generation_id;
    let leader = joins
        .iter()
        .position(|j| j.member_id == j.leader)
        .expect("one member is the leader");
    let assignments: Vec<(String, Bytes)> = joins[leader]
        .members
        .iter()
        .enumerate()
        .map(|(i, m)| (m.member_id.to_string(), assignment(topic, &[i as i32])))
        .collect();
    assert_eq!(
        assignments.len(),
        joins.len(),
        "the leader knows every member"
    );
    let followers: Vec<(usize, Pending<SyncGroupRequest>)> = joins
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != leader)
        .map(|(i, j)| {
            let req = sync_request(5, group, generation, &j.member_id, vec![]);
            (i, Pending::send(koord, 5, &req))
        })
        .collect();
    let mut out = vec![Bytes::new(); joins.len()];
    let resp: SyncGroupResponse = koord.connect().call(
        5,
        &sync_request(
            5,
            group,
            generation,
            &joins[leader].member_id,
            assignments.clone(),
        ),
    );
    assert_eq!(err(resp.error_code), None, "leader sync: {resp:?}");
    out[leader] = resp.assignment;
    for (i, pending) in followers {
        let resp = pending.wait();
        assert_eq!(err(resp.error_code), None, "follower sync: {resp:?}");
        out[i] = resp.assignment;
    }
    for (i, j) in joins.iter().enumerate() {
        let want = &assignments
            .iter()
            .find(|(m, _)| m.as_str() == j.member_id.as_str())
            .expect("assigned")
            .1;
        assert_eq!(
            &out[i], want,
            "member {} got its own assignment",
            j.member_id
        );
    }
    out
}

/// A Stable group of `n` dynamic consumer members subscribed to `topic`, joined one at a time
/// with JoinGroup v9 (MEMBER_ID_REQUIRED first) and synced with SyncGroup v5. The first member
/// stays the leader; members are returned in joining order.
fn stable_group(koord: &Koord, group: &str, topic: &str, n: usize) -> Vec<Member> {
    let mut c = koord.connect();
    let mut ids: Vec<String> = Vec::new();
    let mut members = Vec::new();
    for round in 0..n {
        let new_id = member_id_required(&mut c, group, &[topic]);
        // The newcomer's join starts the rebalance; existing members rejoin only once the
        // group is PreparingRebalance (a follower rejoining a Stable group with unchanged
        // metadata is answered at once and would not take part).
        let newcomer = Pending::send(koord, 9, &join_request(group, &new_id, &[topic]));
        if round > 0 {
            await_state(&mut c, group, "PreparingRebalance");
        }
        let rejoins: Vec<_> = ids
            .iter()
            .map(|id| Pending::send(koord, 9, &join_request(group, id, &[topic])))
            .collect();
        ids.push(new_id);
        let mut joins: Vec<JoinGroupResponse> = rejoins.into_iter().map(Pending::wait).collect();
        joins.push(newcomer.wait());
        for j in &joins {
            assert_eq!(err(j.error_code), None, "join round {round}: {j:?}");
            assert_eq!(j.generation_id, joins[0].generation_id, "{joins:?}");
        }
        let assignments = sync_round(koord, group, topic, &joins);
        members = joins
            .iter()
            .zip(assignments)
            .map(|(j, assignment)| Member {
                id: j.member_id.to_string(),
                generation: j.generation_id,
                leader: j.leader.to_string(),
                assignment,
            })
            .collect();
    }
    assert_eq!(
        members[0].leader, members[0].id,
        "the first member stays the leader"
    );
    members
}

// ---------------------------------------------------------------------------------------------
// JoinGroup
// ---------------------------------------------------------------------------------------------

#[test]
fn join_group_session_timeout_outside_the_broker_bounds_is_invalid_session_timeout() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-session");
    // Kafka 4.4 under kafka.sh: group.min.session.timeout.ms=1000, max 1800000 (default).
    for version in [0, 9] {
        for timeout in [999, 1_800_001] {
            let resp = c.call(
                version,
                &join_request(&group, "", &[]).with_session_timeout_ms(timeout),
            );
            let at = format!("v{version} session {timeout}: {resp:?}");
            assert_eq!(
                err(resp.error_code),
                Some(ResponseError::InvalidSessionTimeout),
                "{at}"
            );
            assert_eq!(resp.generation_id, -1, "{at}");
            assert_eq!(resp.member_id.as_str(), "", "{at}");
        }
    }
    // Both bounds are inclusive.
    let resp = c.call(
        3,
        &join_request(&group, "", &[]).with_session_timeout_ms(1_000),
    );
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    let resp = c.call(
        3,
        &join_request(&unique("g-session-max"), "", &[]).with_session_timeout_ms(1_800_000),
    );
    assert_eq!(err(resp.error_code), None, "{resp:?}");
}

#[test]
fn join_group_v4_and_later_without_a_member_id_is_member_id_required_then_the_rejoin_is_accepted() {
    let koord = server();
    let mut c = koord.connect();
    for version in [4, 9] {
        let group = unique("g-required");
        let first = c.call(version, &join_request(&group, "", &["t"]));
        assert_eq!(
            err(first.error_code),
            Some(ResponseError::MemberIdRequired),
            "{first:?}"
        );
        assert_eq!(first.generation_id, -1, "{first:?}");
        assert!(
            first.member_id.starts_with(&format!("{CLIENT_ID}-")),
            "a dynamic member id is clientId-UUID: {first:?}"
        );
        // The group exists, Empty: a pending member is not a member yet. Kafka 4.4 shows the
        // new group only once its creation is committed to its log (until then DescribeGroups
        // says Dead), so wait for it; koord shows it at once.
        await_state(&mut c, &group, "Empty");
        let (now, _, members) = described_members(&mut c, &group);
        assert_eq!((now.as_str(), members.len()), ("Empty", 0));
        let id = first.member_id.to_string();

        let rejoin = c.call(version, &join_request(&group, &id, &["t"]));
        assert_eq!(err(rejoin.error_code), None, "v{version}: {rejoin:?}");
        assert_eq!(rejoin.member_id.as_str(), id);
        assert_eq!(rejoin.generation_id, 1);
        assert_eq!(rejoin.leader.as_str(), id, "the only member leads");
        assert_eq!(rejoin.protocol_name.as_deref(), Some(PROTOCOL));
        if version >= 7 {
            assert_eq!(rejoin.protocol_type.as_deref(), Some(PROTOCOL_TYPE));
        }
        assert_eq!(
            rejoin.members.len(),
            1,
            "the leader gets the members: {rejoin:?}"
        );
        assert_eq!(rejoin.members[0].member_id.as_str(), id);
        assert_eq!(rejoin.members[0].metadata, subscription(&["t"]));
        assert!(!rejoin.skip_assignment);
        assert_eq!(state(&mut c, &group), "CompletingRebalance");
    }
}

#[test]
fn join_group_v0_and_v3_without_a_member_id_add_the_member_directly() {
    let koord = server();
    let mut c = koord.connect();
    for version in [0, 3] {
        let group = unique("g-direct");
        let resp = c.call(version, &join_request(&group, "", &["t"]));
        assert_eq!(err(resp.error_code), None, "v{version}: {resp:?}");
        assert!(
            resp.member_id.starts_with(&format!("{CLIENT_ID}-")),
            "v{version}: {resp:?}"
        );
        assert_eq!(resp.generation_id, 1, "{resp:?}");
        assert_eq!(resp.leader, resp.member_id, "{resp:?}");
        assert_eq!(resp.protocol_name.as_deref(), Some(PROTOCOL));
        assert_eq!(resp.members.len(), 1, "{resp:?}");
        assert_eq!(resp.members[0].metadata, subscription(&["t"]));
    }
}

#[test]
fn join_group_with_a_member_id_on_a_missing_group_is_unknown_member_id() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-missing-join");
    for version in [0, 9] {
        let resp = c.call(version, &join_request(&group, "ghost-member", &["t"]));
        assert_eq!(
            err(resp.error_code),
            Some(ResponseError::UnknownMemberId),
            "v{version}: {resp:?}"
        );
        assert_eq!(resp.generation_id, -1, "{resp:?}");
    }
    assert_eq!(state(&mut c, &group), "Dead", "the group was not created");
}

#[test]
fn join_group_with_another_protocol_type_or_no_common_protocol_is_inconsistent_group_protocol() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-inconsistent");
    let members = stable_group(&koord, &group, "t", 1);

    let other_type = join_request(&group, "", &["t"]).with_protocol_type(s("connect"));
    let no_common =
        join_request(&group, "", &["t"]).with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("roundrobin"))
            .with_metadata(subscription(&["t"]))]);
    for (what, req) in [
        ("another protocol type", other_type),
        ("no common protocol", no_common),
    ] {
        for version in [3, 9] {
            let resp = c.call(version, &req);
            assert_eq!(
                err(resp.error_code),
                Some(ResponseError::InconsistentGroupProtocol),
                "{what} v{version}: {resp:?}"
            );
        }
    }
    // The existing member is untouched.
    assert_eq!(
        heartbeat(&mut c, 4, &group, members[0].generation, &members[0].id),
        0
    );
    assert_eq!(state(&mut c, &group), "Stable");

    // An empty group needs a protocol type and at least one protocol.
    let fresh = unique("g-inconsistent-empty");
    let no_type = join_request(&fresh, "", &["t"]).with_protocol_type(s(""));
    let no_protocols = join_request(&fresh, "", &["t"]).with_protocols(vec![]);
    for (what, req) in [
        ("empty protocol type", no_type),
        ("no protocols", no_protocols),
    ] {
        let resp = c.call(9, &req);
        assert_eq!(
            err(resp.error_code),
            Some(ResponseError::InconsistentGroupProtocol),
            "{what}: {resp:?}"
        );
    }
}

#[test]
fn join_group_beyond_group_max_size_is_group_max_size_reached() {
    // Kafka's group.max.size is a broker setting kafka.sh leaves at its default.
    let sets: Vec<&str> = KAFKA_LIKE
        .iter()
        .copied()
        .chain(["group.max.size=2"])
        .collect();
    let Some(koord) = Koord::start_owned(
        "join_group_beyond_group_max_size_is_group_max_size_reached",
        &sets,
    ) else {
        return;
    };
    let mut c = koord.connect();
    let group = unique("g-max-size");
    let members = stable_group(&koord, &group, "t", 2);
    for version in [3, 9] {
        let resp = c.call(version, &join_request(&group, "", &["t"]));
        assert_eq!(
            err(resp.error_code),
            Some(ResponseError::GroupMaxSizeReached),
            "v{version}: {resp:?}"
        );
        assert_eq!(resp.member_id.as_str(), "", "{resp:?}");
    }
    // The two members are still there, Stable.
    for m in &members {
        assert_eq!(err(heartbeat(&mut c, 4, &group, m.generation, &m.id)), None);
    }
    assert_eq!(state(&mut c, &group), "Stable");
}

// ---------------------------------------------------------------------------------------------
// Heartbeat and SyncGroup
// ---------------------------------------------------------------------------------------------

#[test]
fn heartbeat_and_sync_group_from_an_unknown_member_are_unknown_member_id() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-unknown-member");
    let members = stable_group(&koord, &group, "t", 1);
    let generation = members[0].generation;
    for version in [0, 4] {
        assert_eq!(
            err(heartbeat(&mut c, version, &group, generation, "ghost")),
            Some(ResponseError::UnknownMemberId),
            "heartbeat v{version}"
        );
    }
    for version in [0, 5] {
        let resp = c.call(
            version,
            &sync_request(version, &group, generation, "ghost", vec![]),
        );
        assert_eq!(
            err(resp.error_code),
            Some(ResponseError::UnknownMemberId),
            "sync v{version}: {resp:?}"
        );
        assert!(resp.assignment.is_empty());
    }

    // A missing group knows no member either.
    let missing = unique("g-unknown-member-missing");
    assert_eq!(
        err(heartbeat(&mut c, 4, &missing, 1, "ghost")),
        Some(ResponseError::UnknownMemberId)
    );
    let resp = c.call(5, &sync_request(5, &missing, 1, "ghost", vec![]));
    assert_eq!(
        err(resp.error_code),
        Some(ResponseError::UnknownMemberId),
        "{resp:?}"
    );
    assert_eq!(state(&mut c, &missing), "Dead");
}

#[test]
fn heartbeat_and_sync_group_with_a_wrong_generation_are_illegal_generation() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-generation");
    let m = stable_group(&koord, &group, "t", 1).remove(0);
    assert_eq!(m.generation, 1);
    for (version, generation) in [(0, 2), (4, 0), (4, -1)] {
        assert_eq!(
            err(heartbeat(&mut c, version, &group, generation, &m.id)),
            Some(ResponseError::IllegalGeneration),
            "heartbeat v{version} generation {generation}"
        );
    }
    for (version, generation) in [(0, 2), (5, 0)] {
        let resp = c.call(
            version,
            &sync_request(version, &group, generation, &m.id, vec![]),
        );
        assert_eq!(
            err(resp.error_code),
            Some(ResponseError::IllegalGeneration),
            "sync v{version} generation {generation}: {resp:?}"
        );
    }
    // The right generation is still fine, and a Stable group's SyncGroup returns the stored
    // assignment again.
    assert_eq!(err(heartbeat(&mut c, 4, &group, 1, &m.id)), None);
    let resp = c.call(0, &sync_request(0, &group, 1, &m.id, vec![]));
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    assert_eq!(resp.assignment, m.assignment);
}

#[test]
fn heartbeat_of_the_first_member_is_rebalance_in_progress_when_a_second_member_joins() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-rebalance");
    let a = stable_group(&koord, &group, "t", 1).remove(0);

    let b_id = member_id_required(&mut c, &group, &["t"]);
    let b_join = Pending::send(&koord, 9, &join_request(&group, &b_id, &["t"]));
    // B's parked join moves the group to PreparingRebalance; A learns it from its heartbeat.
    eventually("A's heartbeat says REBALANCE_IN_PROGRESS", || {
        match err(heartbeat(&mut c, 4, &group, a.generation, &a.id)) {
            Some(ResponseError::RebalanceInProgress) => Some(()),
            None => None,
            other => panic!("A's heartbeat: {other:?}"),
        }
    });
    assert_eq!(state(&mut c, &group), "PreparingRebalance");

    // A rejoins: every member has joined, the round completes at generation 2, A still leads.
    let a_join = c.call(9, &join_request(&group, &a.id, &["t"]));
    let b_join = b_join.wait();
    for j in [&a_join, &b_join] {
        assert_eq!(err(j.error_code), None, "{j:?}");
        assert_eq!(j.generation_id, 2, "{j:?}");
        assert_eq!(j.leader.as_str(), a.id, "the leader is kept: {j:?}");
    }
    let mut listed: Vec<String> = a_join
        .members
        .iter()
        .map(|m| m.member_id.to_string())
        .collect();
    listed.sort();
    let mut both = vec![a.id.clone(), b_id.clone()];
    both.sort();
    assert_eq!(listed, both, "the leader gets every member");
    assert!(
        b_join.members.is_empty(),
        "a follower gets no members: {b_join:?}"
    );

    sync_round(&koord, &group, "t", &[a_join, b_join]);
    assert_eq!(err(heartbeat(&mut c, 4, &group, 2, &a.id)), None);
    assert_eq!(err(heartbeat(&mut c, 0, &group, 2, &b_id)), None);
    assert_eq!(state(&mut c, &group), "Stable");
}

#[test]
fn static_member_replaced_by_a_new_join_fences_the_old_member_id() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-static");
    let instance = unique("instance");
    let static_join = |member: &str| {
        join_request(&group, member, &["t"]).with_group_instance_id(Some(s(&instance)))
    };

    // A static member never gets MEMBER_ID_REQUIRED; its id is instanceId-UUID.
    let first = c.call(9, &static_join(""));
    assert_eq!(err(first.error_code), None, "{first:?}");
    assert!(
        first.member_id.starts_with(&format!("{instance}-")),
        "{first:?}"
    );
    let old = first.member_id.to_string();
    assert_eq!(first.generation_id, 1);
    let resp = c.call(
        5,
        &sync_request(
            5,
            &group,
            1,
            &old,
            vec![(old.clone(), assignment("t", &[0]))],
        )
        .with_group_instance_id(Some(s(&instance))),
    );
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    assert_eq!(state(&mut c, &group), "Stable");

    // The same instance joins again without a member id: it replaces the old member. The
    // group stays Stable at generation 1 (no rebalance); the replaced member was the leader,
    // so at v9 the new one is told to skip the assignment and just sync (KIP-814).
    let second = c.call(9, &static_join(""));
    assert_eq!(err(second.error_code), None, "{second:?}");
    let new = second.member_id.to_string();
    assert_ne!(new, old);
    assert!(new.starts_with(&format!("{instance}-")), "{second:?}");
    assert_eq!(second.generation_id, 1, "{second:?}");
    assert_eq!(second.leader.as_str(), new, "{second:?}");
    assert!(second.skip_assignment, "{second:?}");
    let listed: Vec<_> = second
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                m.group_instance_id.as_deref().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [(new.clone(), Some(instance.clone()))],
        "{second:?}"
    );
    assert_eq!(state(&mut c, &group), "Stable");
    // The new member id inherits the stored assignment.
    let resp = c.call(
        5,
        &sync_request(5, &group, 1, &new, vec![]).with_group_instance_id(Some(s(&instance))),
    );
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    assert_eq!(resp.assignment, assignment("t", &[0]));

    // The old member id is fenced on every API.
    let hb = |c: &mut Client, member: &str| {
        c.call(
            4,
            &HeartbeatRequest::default()
                .with_group_id(group_id(&group))
                .with_generation_id(second.generation_id)
                .with_member_id(s(member))
                .with_group_instance_id(Some(s(&instance))),
        )
        .error_code
    };
    assert_eq!(err(hb(&mut c, &old)), Some(ResponseError::FencedInstanceId));
    let resp = c.call(9, &static_join(&old));
    assert_eq!(
        err(resp.error_code),
        Some(ResponseError::FencedInstanceId),
        "{resp:?}"
    );
    let resp = c.call(
        5,
        &sync_request(5, &group, second.generation_id, &old, vec![])
            .with_group_instance_id(Some(s(&instance))),
    );
    assert_eq!(
        err(resp.error_code),
        Some(ResponseError::FencedInstanceId),
        "{resp:?}"
    );
    // The new one is the member now.
    assert_eq!(err(hb(&mut c, &new)), None);
}

#[test]
fn static_leader_replaced_below_v9_is_answered_as_a_follower_of_the_old_leader_id() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-static-v5");
    let instance = unique("instance");
    let static_join = |member: &str| {
        join_request(&group, member, &["t"]).with_group_instance_id(Some(s(&instance)))
    };
    let first = c.call(5, &static_join(""));
    assert_eq!(err(first.error_code), None, "{first:?}");
    let old = first.member_id.to_string();
    let resp = c.call(
        5,
        &sync_request(
            5,
            &group,
            1,
            &old,
            vec![(old.clone(), assignment("t", &[0]))],
        )
        .with_group_instance_id(Some(s(&instance))),
    );
    assert_eq!(err(resp.error_code), None, "{resp:?}");

    // Without SkipAssignment (v9), a replacing leader is told the old id leads and gets no
    // members, so it syncs as a follower and keeps the stored assignment.
    let second = c.call(5, &static_join(""));
    assert_eq!(err(second.error_code), None, "{second:?}");
    let new = second.member_id.to_string();
    assert_ne!(new, old);
    assert_eq!(second.generation_id, 1, "{second:?}");
    assert_eq!(second.leader.as_str(), old, "{second:?}");
    assert!(second.members.is_empty(), "{second:?}");
    let resp = c.call(
        5,
        &sync_request(5, &group, 1, &new, vec![]).with_group_instance_id(Some(s(&instance))),
    );
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    assert_eq!(resp.assignment, assignment("t", &[0]));
    assert_eq!(state(&mut c, &group), "Stable");
}

#[test]
fn leader_leaving_during_completing_rebalance_fails_the_parked_follower_sync_with_rebalance_in_progress(
) {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-leader-leaves");
    let members = stable_group(&koord, &group, "t", 2);
    let (a, b) = (&members[0], &members[1]);

    // A new round: the leader's rejoin starts it, then the follower rejoins.
    let a_join = Pending::send(&koord, 9, &join_request(&group, &a.id, &["t"]));
    await_state(&mut c, &group, "PreparingRebalance");
    let b_join = c.call(9, &join_request(&group, &b.id, &["t"]));
    let a_join = a_join.wait();
    assert_eq!(err(a_join.error_code), None, "{a_join:?}");
    assert_eq!(err(b_join.error_code), None, "{b_join:?}");
    let generation = b_join.generation_id;
    assert_eq!(generation, a.generation + 1);
    assert_eq!(state(&mut c, &group), "CompletingRebalance");

    // B's SyncGroup waits for the leader's. B's heartbeat meanwhile is fine (and, answered
    // after the SyncGroup was written, makes it likely that the SyncGroup is parked by now;
    // had it not arrived yet, it would meet PreparingRebalance and get the same answer).
    let b_sync = Pending::send(
        &koord,
        5,
        &sync_request(5, &group, generation, &b.id, vec![]),
    );
    assert_eq!(err(heartbeat(&mut c, 4, &group, generation, &b.id)), None);

    assert_eq!(
        leave(&mut c, 0, &group, &a.id),
        None,
        "the leader leaves (v0)"
    );
    let resp = b_sync.wait();
    assert_eq!(
        err(resp.error_code),
        Some(ResponseError::RebalanceInProgress),
        "{resp:?}"
    );
    assert!(resp.assignment.is_empty(), "{resp:?}");
    assert_eq!(resp.protocol_type, None, "{resp:?}");
    assert_eq!(resp.protocol_name, None, "{resp:?}");

    let resp = describe(&mut c, 5, &[&group]);
    let g = &resp.groups[0];
    assert_eq!(g.group_state.as_str(), "PreparingRebalance", "{resp:?}");
    let ids: Vec<&str> = g.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(ids, [b.id.as_str()], "{resp:?}");
}

// ---------------------------------------------------------------------------------------------
// LeaveGroup
// ---------------------------------------------------------------------------------------------

#[test]
fn leave_group_v3_batch_answers_each_member_and_removes_the_known_one() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-leave-batch");
    let members = stable_group(&koord, &group, "t", 2);
    let (a, b) = (&members[0], &members[1]);

    let resp = leave_batch(&mut c, 3, &group, &["ghost", &b.id]);
    assert_eq!(
        err(resp.error_code),
        None,
        "one bad entry does not fail the batch: {resp:?}"
    );
    let answers: Vec<(&str, Option<ResponseError>)> = resp
        .members
        .iter()
        .map(|m| (m.member_id.as_str(), err(m.error_code)))
        .collect();
    assert_eq!(
        answers,
        [
            ("ghost", Some(ResponseError::UnknownMemberId)),
            (b.id.as_str(), None)
        ],
        "{resp:?}"
    );

    let resp = describe(&mut c, 5, &[&group]);
    let g = &resp.groups[0];
    assert_eq!(g.group_state.as_str(), "PreparingRebalance", "{resp:?}");
    let ids: Vec<&str> = g.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(ids, [a.id.as_str()], "{resp:?}");
    assert_eq!(
        err(heartbeat(&mut c, 4, &group, b.generation, &b.id)),
        Some(ResponseError::UnknownMemberId)
    );

    // A missing group: every entry is UNKNOWN_MEMBER_ID.
    let missing = unique("g-leave-missing");
    let resp = leave_batch(&mut c, 5, &missing, &["x", "y"]);
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    assert!(
        resp.members
            .iter()
            .all(|m| err(m.error_code) == Some(ResponseError::UnknownMemberId)),
        "{resp:?}"
    );
    assert_eq!(resp.members.len(), 2, "{resp:?}");
    assert_eq!(
        leave(&mut c, 0, &missing, "x"),
        Some(ResponseError::UnknownMemberId)
    );
}

// ---------------------------------------------------------------------------------------------
// OffsetCommit and OffsetFetch
// ---------------------------------------------------------------------------------------------

#[test]
fn offset_commit_metadata_over_4096_chars_fails_only_that_partition() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-metadata");
    let topic = unique("t-metadata");
    create_topic(&koord, &topic, 3);
    let too_large = "m".repeat(4097);
    let largest = "m".repeat(4096);
    for version in [2, 9] {
        let g = format!("{group}-v{version}");
        let results = commit(
            &mut c,
            version,
            &g,
            -1,
            "",
            &[
                (&topic, 0, 10, Some(&too_large)),
                (&topic, 1, 11, Some(&largest)),
                (&topic, 2, 12, None),
            ],
        );
        assert_eq!(
            results,
            BTreeMap::from([
                (key(&topic, 0), Some(ResponseError::OffsetMetadataTooLarge)),
                (key(&topic, 1), None),
                (key(&topic, 2), None),
            ]),
            "v{version}"
        );
        let parts: &[i32] = &[0, 1, 2];
        let (group_error, fetched) = fetch(&mut c, version, &g, Some(&[(&topic, parts)]));
        assert_eq!(group_error, None);
        assert_eq!(
            fetched,
            BTreeMap::from([
                (key(&topic, 0), Committed::none()),
                (key(&topic, 1), Committed::at(11, &largest)),
                // A null metadata is stored as "".
                (key(&topic, 2), Committed::at(12, "")),
            ]),
            "v{version}"
        );
    }
}

#[test]
fn offset_commit_to_a_missing_group_creates_it_at_generation_minus_one_only() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("t-missing-group");
    create_topic(&koord, &topic, 1);
    let offsets: &[Offset] = &[(&topic, 0, 5, Some("meta"))];

    // Generation >= 0: ILLEGAL_GENERATION below v9, GROUP_ID_NOT_FOUND at v9; nothing created.
    let group = unique("g-missing-commit");
    for (version, want) in [
        (2, ResponseError::IllegalGeneration),
        (8, ResponseError::IllegalGeneration),
        (9, ResponseError::GroupIdNotFound),
    ] {
        for generation in [0, 3] {
            let results = commit(&mut c, version, &group, generation, "some-member", offsets);
            assert_eq!(
                results,
                BTreeMap::from([(key(&topic, 0), Some(want))]),
                "v{version} generation {generation}"
            );
        }
    }
    assert_eq!(state(&mut c, &group), "Dead");

    // Generation -1: a simple group (no protocol type) is created, Empty, with the offset.
    for version in [2, 9] {
        let group = unique("g-simple");
        assert_eq!(
            commit(&mut c, version, &group, -1, "", offsets),
            all_ok(offsets)
        );
        let resp = describe(&mut c, 5, &[&group]);
        let g = &resp.groups[0];
        assert_eq!(g.group_state.as_str(), "Empty", "{resp:?}");
        assert_eq!(g.protocol_type.as_str(), "", "{resp:?}");
        assert!(g.members.is_empty(), "{resp:?}");
        let (_, fetched) = fetch(&mut c, 9, &group, None);
        assert_eq!(
            fetched,
            BTreeMap::from([(key(&topic, 0), Committed::at(5, "meta"))])
        );
    }
}

#[test]
fn offset_commit_to_an_unknown_topic_or_partition_is_unknown_topic_or_partition() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("t-known");
    create_topic(&koord, &topic, 2);
    let unknown = unique("t-never-created");
    for version in [2, 9] {
        let group = unique("g-unknown-topic");
        let results = commit(
            &mut c,
            version,
            &group,
            -1,
            "",
            &[
                (&unknown, 0, 1, None),
                (&topic, 2, 1, None),
                (&topic, 1, 7, None),
            ],
        );
        assert_eq!(
            results,
            BTreeMap::from([
                (
                    key(&unknown, 0),
                    Some(ResponseError::UnknownTopicOrPartition)
                ),
                (key(&topic, 2), Some(ResponseError::UnknownTopicOrPartition)),
                (key(&topic, 1), None),
            ]),
            "v{version}"
        );
        let (_, fetched) = fetch(&mut c, 9, &group, None);
        assert_eq!(
            fetched,
            BTreeMap::from([(key(&topic, 1), Committed::at(7, ""))])
        );

        // Only unknown partitions: the group is not even created.
        let untouched = unique("g-unknown-topic-only");
        let results = commit(
            &mut c,
            version,
            &untouched,
            -1,
            "",
            &[(&unknown, 0, 1, None)],
        );
        assert_eq!(
            results,
            BTreeMap::from([(
                key(&unknown, 0),
                Some(ResponseError::UnknownTopicOrPartition)
            )])
        );
        assert_eq!(state(&mut c, &untouched), "Dead");
    }
}

#[test]
fn offset_fetch_for_an_unknown_group_is_minus_one_with_no_error() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("t-fetch-unknown");
    create_topic(&koord, &topic, 2);
    let group = unique("g-fetch-unknown");
    let parts: &[i32] = &[0, 1];
    for version in [1, 2, 7, 8, 9] {
        let (group_error, fetched) = fetch(&mut c, version, &group, Some(&[(&topic, parts)]));
        assert_eq!(group_error, None, "v{version}");
        assert_eq!(
            fetched,
            BTreeMap::from([
                (key(&topic, 0), Committed::none()),
                (key(&topic, 1), Committed::none())
            ]),
            "v{version}"
        );
    }
    // All offsets of an unknown group: none.
    let (group_error, fetched) = fetch(&mut c, 9, &group, None);
    assert_eq!(group_error, None);
    assert!(fetched.is_empty(), "{fetched:?}");
    assert_eq!(state(&mut c, &group), "Dead", "fetching creates nothing");
}

#[test]
fn offset_fetch_v8_answers_a_known_and_an_unknown_group_in_one_request() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("t-fetch-multi");
    create_topic(&koord, &topic, 2);
    let known = unique("g-fetch-known");
    let unknown = unique("g-fetch-unknown");
    let offsets: &[Offset] = &[(&topic, 0, 42, Some("a")), (&topic, 1, 43, None)];
    assert_eq!(commit(&mut c, 8, &known, -1, "", offsets), all_ok(offsets));

    let parts: &[i32] = &[0, 1];
    let wanted: &[(&str, &[i32])] = &[(&topic, parts)];
    for version in [8, 9] {
        let results = fetch_groups(
            &mut c,
            version,
            &[(&known, Some(wanted)), (&unknown, Some(wanted))],
        );
        assert_eq!(
            results,
            vec![
                (
                    known.clone(),
                    (
                        None,
                        BTreeMap::from([
                            (key(&topic, 0), Committed::at(42, "a")),
                            (key(&topic, 1), Committed::at(43, "")),
                        ])
                    )
                ),
                (
                    unknown.clone(),
                    (
                        None,
                        BTreeMap::from([
                            (key(&topic, 0), Committed::none()),
                            (key(&topic, 1), Committed::none()),
                        ])
                    )
                ),
            ],
            "v{version}"
        );
        // Null topics in one group, named in the other.
        let results = fetch_groups(&mut c, version, &[(&known, None), (&unknown, None)]);
        assert_eq!(results[0].1 .1.len(), 2, "{results:?}");
        assert!(results[1].1 .1.is_empty(), "{results:?}");
    }
}

#[test]
fn offset_fetch_with_null_topics_returns_every_committed_offset() {
    let koord = server();
    let mut c = koord.connect();
    let (t1, t2) = (unique("t-all-1"), unique("t-all-2"));
    create_topic(&koord, &t1, 2);
    create_topic(&koord, &t2, 1);
    let group = unique("g-fetch-all");
    let offsets: &[Offset] = &[
        (&t1, 0, 1, Some("x")),
        (&t1, 1, 2, None),
        (&t2, 0, 3, Some("y")),
    ];
    assert_eq!(commit(&mut c, 9, &group, -1, "", offsets), all_ok(offsets));
    let want = BTreeMap::from([
        (key(&t1, 0), Committed::at(1, "x")),
        (key(&t1, 1), Committed::at(2, "")),
        (key(&t2, 0), Committed::at(3, "y")),
    ]);
    // Null topics exist from v2; v1 names them.
    for version in [2, 7, 8, 9] {
        assert_eq!(
            fetch(&mut c, version, &group, None),
            (None, want.clone()),
            "v{version}"
        );
    }
    let p01: &[i32] = &[0, 1];
    let p0: &[i32] = &[0];
    assert_eq!(
        fetch(&mut c, 1, &group, Some(&[(&t1, p01), (&t2, p0)])),
        (None, want),
        "v1"
    );
}

// ---------------------------------------------------------------------------------------------
// OffsetDelete
// ---------------------------------------------------------------------------------------------

#[test]
fn offset_delete_of_a_subscribed_topic_of_a_stable_consumer_group_is_group_subscribed_to_topic() {
    let koord = server();
    let mut c = koord.connect();
    let (subscribed, other) = (unique("t-subscribed"), unique("t-other"));
    create_topic(&koord, &subscribed, 1);
    create_topic(&koord, &other, 1);
    let group = unique("g-offset-delete");
    let m = stable_group(&koord, &group, &subscribed, 1).remove(0);
    let offsets: &[Offset] = &[(&subscribed, 0, 10, None), (&other, 0, 20, None)];
    assert_eq!(
        commit(&mut c, 9, &group, m.generation, &m.id, offsets),
        all_ok(offsets)
    );

    let (top, parts) = offset_delete(&mut c, &group, &[(&subscribed, 0), (&other, 0)]);
    assert_eq!(top, None);
    assert_eq!(
        parts,
        BTreeMap::from([
            (
                key(&subscribed, 0),
                Some(ResponseError::GroupSubscribedToTopic)
            ),
            (key(&other, 0), None),
        ])
    );
    let (_, fetched) = fetch(&mut c, 9, &group, None);
    assert_eq!(
        fetched,
        BTreeMap::from([(key(&subscribed, 0), Committed::at(10, ""))]),
        "only the unsubscribed topic's offset is gone"
    );

    // Once the group is Empty, the subscribed topic's offsets can go too.
    assert_eq!(leave(&mut c, 5, &group, &m.id), None);
    await_state(&mut c, &group, "Empty");
    let (top, parts) = offset_delete(&mut c, &group, &[(&subscribed, 0)]);
    assert_eq!(top, None);
    assert_eq!(parts, BTreeMap::from([(key(&subscribed, 0), None)]));
    let (_, fetched) = fetch(&mut c, 9, &group, None);
    assert!(fetched.is_empty(), "{fetched:?}");
}

#[test]
fn offset_delete_for_a_missing_group_is_group_id_not_found() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("t-offset-delete-missing");
    create_topic(&koord, &topic, 1);
    let group = unique("g-offset-delete-missing");
    let (top, parts) = offset_delete(&mut c, &group, &[(&topic, 0)]);
    assert_eq!(top, Some(ResponseError::GroupIdNotFound));
    assert!(parts.is_empty(), "{parts:?}");
}

// ---------------------------------------------------------------------------------------------
// DeleteGroups
// ---------------------------------------------------------------------------------------------

#[test]
fn delete_groups_answers_non_empty_missing_and_empty_groups_separately() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("t-delete-groups");
    create_topic(&koord, &topic, 1);
    let live = unique("g-delete-live");
    let emptied = unique("g-delete-emptied");
    let simple = unique("g-delete-simple");
    let missing = unique("g-delete-missing");

    let l = stable_group(&koord, &live, &topic, 1).remove(0);
    let e = stable_group(&koord, &emptied, &topic, 1).remove(0);
    let offsets: &[Offset] = &[(&topic, 0, 9, None)];
    assert_eq!(
        commit(&mut c, 9, &emptied, e.generation, &e.id, offsets),
        all_ok(offsets)
    );
    assert_eq!(leave(&mut c, 5, &emptied, &e.id), None);
    await_state(&mut c, &emptied, "Empty");
    assert_eq!(commit(&mut c, 9, &simple, -1, "", offsets), all_ok(offsets));

    let results = delete_groups(&mut c, 0, &[&live, &missing, &emptied]);
    assert_eq!(
        results,
        BTreeMap::from([
            (live.clone(), Some(ResponseError::NonEmptyGroup)),
            (missing.clone(), Some(ResponseError::GroupIdNotFound)),
            (emptied.clone(), None),
        ])
    );
    let results = delete_groups(&mut c, 2, &[&simple, &emptied]);
    assert_eq!(
        results,
        BTreeMap::from([
            (simple.clone(), None),
            (emptied.clone(), Some(ResponseError::GroupIdNotFound)),
        ]),
        "a deleted group is gone"
    );
    for g in [&emptied, &simple] {
        assert_eq!(state(&mut c, g), "Dead");
        let p0: &[i32] = &[0];
        let (_, fetched) = fetch(&mut c, 9, g, Some(&[(&topic, p0)]));
        assert_eq!(
            fetched,
            BTreeMap::from([(key(&topic, 0), Committed::none())]),
            "its offsets too"
        );
    }
    // The live group is untouched.
    assert_eq!(err(heartbeat(&mut c, 4, &live, l.generation, &l.id)), None);
}

// ---------------------------------------------------------------------------------------------
// DescribeGroups
// ---------------------------------------------------------------------------------------------

#[test]
fn describe_groups_v6_missing_group_is_group_id_not_found_and_v5_is_dead_with_no_error() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-describe-missing");

    let resp = describe(&mut c, 6, &[&group]);
    assert_eq!(resp.groups.len(), 1, "{resp:?}");
    let g = &resp.groups[0];
    assert_eq!(g.group_id.0.as_str(), group);
    assert_eq!(
        err(g.error_code),
        Some(ResponseError::GroupIdNotFound),
        "{resp:?}"
    );
    assert!(g.error_message.is_some(), "v6 explains the error: {resp:?}");

    for version in [0, 5] {
        let resp = describe(&mut c, version, &[&group]);
        let g = &resp.groups[0];
        assert_eq!(err(g.error_code), None, "v{version}: {resp:?}");
        assert_eq!(g.group_state.as_str(), "Dead", "v{version}: {resp:?}");
        assert_eq!(g.protocol_type.as_str(), "", "{resp:?}");
        assert_eq!(g.protocol_data.as_str(), "", "{resp:?}");
        assert!(g.members.is_empty(), "{resp:?}");
    }
}

#[test]
fn describe_groups_of_a_stable_group_shows_protocol_members_metadata_and_assignment() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-describe-stable");
    let topic = "t-described";
    let members = stable_group(&koord, &group, topic, 2);
    for version in [0, 6] {
        let resp = describe(&mut c, version, &[&group]);
        assert_eq!(resp.groups.len(), 1, "{resp:?}");
        let g = &resp.groups[0];
        assert_eq!(err(g.error_code), None, "v{version}: {resp:?}");
        assert_eq!(g.group_state.as_str(), "Stable");
        assert_eq!(g.protocol_type.as_str(), PROTOCOL_TYPE);
        assert_eq!(g.protocol_data.as_str(), PROTOCOL);
        if version >= 3 {
            // Not asked for (IncludeAuthorizedOperations=false): Integer.MIN_VALUE.
            assert_eq!(g.authorized_operations, i32::MIN, "{resp:?}");
        }
        let mut described: Vec<_> = g.members.iter().collect();
        described.sort_by_key(|m| m.member_id.to_string());
        let mut want = members.clone();
        want.sort_by_key(|m| m.id.clone());
        assert_eq!(described.len(), want.len(), "{resp:?}");
        for (d, m) in described.iter().zip(&want) {
            assert_eq!(d.member_id.as_str(), m.id);
            assert_eq!(d.group_instance_id, None);
            assert_eq!(d.client_id.as_str(), CLIENT_ID);
            assert_eq!(
                d.client_host.as_str(),
                "/127.0.0.1",
                "Java's InetAddress.toString()"
            );
            assert_eq!(d.member_metadata, subscription(&[topic]));
            assert_eq!(d.member_assignment, m.assignment);
        }
    }
}

/// Without an authorizer Kafka 4.4 reports READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS and
/// ALTER_CONFIGS on a group (bits 3, 6, 8, 10, 11 = 3400) when asked (v3+).
#[test]
fn describe_groups_reports_the_authorized_operations_when_asked() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-describe-ops");
    stable_group(&koord, &group, "t-ops", 1);
    for version in [3, 6] {
        let resp: DescribeGroupsResponse = c.call(
            version,
            &DescribeGroupsRequest::default()
                .with_groups(vec![group_id(&group)])
                .with_include_authorized_operations(true),
        );
        assert_eq!(err(resp.groups[0].error_code), None, "{resp:?}");
        assert_eq!(
            resp.groups[0].authorized_operations, 3400,
            "v{version}: {resp:?}"
        );
    }
}

/// Starts a new join round in a Stable two-member group: the leader's rejoin is parked and
/// the group awaited in PreparingRebalance. Returns the parked join; the follower has not
/// rejoined yet.
fn start_rebalance(
    koord: &Koord,
    c: &mut Client,
    group: &str,
    leader: &Member,
) -> Pending<JoinGroupRequest> {
    let join = Pending::send(koord, 9, &join_request(group, &leader.id, &["t"]));
    await_state(c, group, "PreparingRebalance");
    join
}

/// The members DescribeGroups v5 lists: (member id, metadata, assignment), sorted by id.
fn described_members(c: &mut Client, group: &str) -> (String, String, Vec<(String, Bytes, Bytes)>) {
    let resp = describe(c, 5, &[group]);
    let g = &resp.groups[0];
    assert_eq!(err(g.error_code), None, "{resp:?}");
    let mut members: Vec<_> = g
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                m.member_metadata.clone(),
                m.member_assignment.clone(),
            )
        })
        .collect();
    members.sort();
    (
        g.group_state.to_string(),
        g.protocol_data.to_string(),
        members,
    )
}

#[test]
fn describe_groups_during_a_rebalance_shows_the_previous_assignments_without_metadata() {
    let koord = server();
    let mut c = koord.connect();
    let group = unique("g-describe-rebalance");
    let members = stable_group(&koord, &group, "t", 2);
    let (a, b) = (&members[0], &members[1]);
    let mut previous: Vec<(String, Bytes, Bytes)> = members
        .iter()
        .map(|m| (m.id.clone(), Bytes::new(), m.assignment.clone()))
        .collect();
    previous.sort();

    // Kafka describes a member outside Stable without metadata and without the protocol name,
    // but with the assignment it last received (ClassicGroupMember.describeNoMetadata).
    let a_join = start_rebalance(&koord, &mut c, &group, a);
    assert_eq!(
        described_members(&mut c, &group),
        (
            "PreparingRebalance".to_string(),
            String::new(),
            previous.clone()
        )
    );
    let b_join = c.call(9, &join_request(&group, &b.id, &["t"]));
    let a_join = a_join.wait();
    assert_eq!(
        described_members(&mut c, &group),
        ("CompletingRebalance".to_string(), String::new(), previous)
    );

    // Once synced, Stable shows the metadata, the protocol and the new assignments.
    let assignments = sync_round(&koord, &group, "t", &[a_join, b_join]);
    let mut now = vec![
        (a.id.clone(), subscription(&["t"]), assignments[0].clone()),
        (b.id.clone(), subscription(&["t"]), assignments[1].clone()),
    ];
    now.sort();
    assert_eq!(
        described_members(&mut c, &group),
        ("Stable".to_string(), PROTOCOL.to_string(), now)
    );
}

#[test]
fn offset_commit_during_a_rebalance_is_accepted_while_preparing_and_rebalance_in_progress_while_completing(
) {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("t-commit-rebalance");
    create_topic(&koord, &topic, 1);
    let group = unique("g-commit-rebalance");
    let members = stable_group(&koord, &group, "t", 2);
    let (a, b) = (&members[0], &members[1]);

    // PreparingRebalance: a commit at the current generation is accepted.
    let a_join = start_rebalance(&koord, &mut c, &group, a);
    let offsets: &[Offset] = &[(&topic, 0, 1, None)];
    assert_eq!(
        commit(&mut c, 9, &group, b.generation, &b.id, offsets),
        all_ok(offsets)
    );

    // CompletingRebalance: REBALANCE_IN_PROGRESS, at the new generation as at the old one.
    let b_join = c.call(9, &join_request(&group, &b.id, &["t"]));
    let a_join = a_join.wait();
    assert_eq!(state(&mut c, &group), "CompletingRebalance");
    for generation in [b_join.generation_id, b.generation] {
        let want = if generation == b_join.generation_id {
            ResponseError::RebalanceInProgress
        } else {
            ResponseError::IllegalGeneration
        };
        assert_eq!(
            commit(
                &mut c,
                9,
                &group,
                generation,
                &b.id,
                &[(&topic, 0, 2, None)]
            ),
            BTreeMap::from([(key(&topic, 0), Some(want))]),
            "generation {generation}"
        );
    }
    sync_round(&koord, &group, "t", &[a_join, b_join.clone()]);
    let offsets: &[Offset] = &[(&topic, 0, 3, None)];
    assert_eq!(
        commit(&mut c, 2, &group, b_join.generation_id, &b.id, offsets),
        all_ok(offsets)
    );
    let (_, fetched) = fetch(&mut c, 9, &group, None);
    assert_eq!(
        fetched,
        BTreeMap::from([(key(&topic, 0), Committed::at(3, ""))])
    );
}

// ---------------------------------------------------------------------------------------------
// ListGroups
// ---------------------------------------------------------------------------------------------

#[test]
fn list_groups_filters_by_state_and_type_and_lists_simple_groups_without_a_protocol_type() {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("t-list");
    create_topic(&koord, &topic, 1);
    let stable = unique("g-list-stable");
    let simple = unique("g-list-simple");
    let emptied = unique("g-list-emptied");
    stable_group(&koord, &stable, &topic, 1);
    let offsets: &[Offset] = &[(&topic, 0, 1, None)];
    assert_eq!(commit(&mut c, 9, &simple, -1, "", offsets), all_ok(offsets));
    let e = stable_group(&koord, &emptied, &topic, 1).remove(0);
    assert_eq!(leave(&mut c, 5, &emptied, &e.id), None);
    await_state(&mut c, &emptied, "Empty");
    let ours = |groups: &[ListedGroup]| -> BTreeMap<String, (String, String, String)> {
        [&stable, &simple, &emptied]
            .into_iter()
            .filter_map(|g| listed(groups, g))
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
    };
    let t = |p: &str, st: &str, ty: &str| (p.to_string(), st.to_string(), ty.to_string());

    // v0: no state or type in the answer.
    assert_eq!(
        ours(&list_groups(&mut c, 0, &[], &[])),
        BTreeMap::from([
            (stable.clone(), t(PROTOCOL_TYPE, "", "")),
            (simple.clone(), t("", "", "")),
            (emptied.clone(), t(PROTOCOL_TYPE, "", "")),
        ])
    );
    // v4: states, filtered case-insensitively.
    assert_eq!(
        ours(&list_groups(&mut c, 4, &["stable"], &[])),
        BTreeMap::from([(stable.clone(), t(PROTOCOL_TYPE, "Stable", ""))])
    );
    assert_eq!(
        ours(&list_groups(&mut c, 4, &["EMPTY"], &[])),
        BTreeMap::from([
            (simple.clone(), t("", "Empty", "")),
            (emptied.clone(), t(PROTOCOL_TYPE, "Empty", "")),
        ])
    );
    // v5: types; all three are classic groups.
    let classic = BTreeMap::from([
        (stable.clone(), t(PROTOCOL_TYPE, "Stable", "classic")),
        (simple.clone(), t("", "Empty", "classic")),
        (emptied.clone(), t(PROTOCOL_TYPE, "Empty", "classic")),
    ]);
    assert_eq!(ours(&list_groups(&mut c, 5, &[], &[])), classic);
    assert_eq!(ours(&list_groups(&mut c, 5, &[], &["classic"])), classic);
    assert_eq!(ours(&list_groups(&mut c, 5, &[], &["CLASSIC"])), classic);
    assert_eq!(
        ours(&list_groups(&mut c, 5, &[], &["consumer"])),
        BTreeMap::new()
    );
    assert_eq!(
        ours(&list_groups(&mut c, 5, &["Stable"], &["classic"])),
        BTreeMap::from([(stable.clone(), t(PROTOCOL_TYPE, "Stable", "classic"))])
    );
}

// ---------------------------------------------------------------------------------------------
// Every API at its lowest and highest version
// ---------------------------------------------------------------------------------------------

/// The version of each group API one lifecycle run uses.
struct Versions {
    join: i16,
    sync: i16,
    heartbeat: i16,
    commit: i16,
    fetch: i16,
    describe: i16,
    list: i16,
    leave: i16,
    delete: i16,
}

/// One member's whole life at the given versions: join, sync, heartbeat, commit, fetch,
/// describe, list, leave, OffsetDelete (v0 only) and DeleteGroups.
fn lifecycle(v: Versions) {
    let koord = server();
    let mut c = koord.connect();
    let topic = unique("t-life");
    create_topic(&koord, &topic, 2);
    let group = unique("g-life");

    let mut join = c.call(v.join, &join_request(&group, "", &[&topic]));
    if v.join >= 4 {
        assert_eq!(
            err(join.error_code),
            Some(ResponseError::MemberIdRequired),
            "{join:?}"
        );
        let id = join.member_id.to_string();
        join = c.call(v.join, &join_request(&group, &id, &[&topic]));
    }
    assert_eq!(err(join.error_code), None, "{join:?}");
    let (id, generation) = (join.member_id.to_string(), join.generation_id);
    assert_eq!(join.leader.as_str(), id);

    let mine = assignment(&topic, &[0, 1]);
    let sync = c.call(
        v.sync,
        &sync_request(
            v.sync,
            &group,
            generation,
            &id,
            vec![(id.clone(), mine.clone())],
        ),
    );
    assert_eq!(err(sync.error_code), None, "{sync:?}");
    assert_eq!(sync.assignment, mine);
    if v.sync >= 5 {
        assert_eq!(sync.protocol_type.as_deref(), Some(PROTOCOL_TYPE));
        assert_eq!(sync.protocol_name.as_deref(), Some(PROTOCOL));
    }
    assert_eq!(
        err(heartbeat(&mut c, v.heartbeat, &group, generation, &id)),
        None
    );

    let offsets: &[Offset] = &[(&topic, 0, 100, Some("zero")), (&topic, 1, 200, None)];
    assert_eq!(
        commit(&mut c, v.commit, &group, generation, &id, offsets),
        all_ok(offsets)
    );
    let parts: &[i32] = &[0, 1];
    assert_eq!(
        fetch(&mut c, v.fetch, &group, Some(&[(&topic, parts)])),
        (
            None,
            BTreeMap::from([
                (key(&topic, 0), Committed::at(100, "zero")),
                (key(&topic, 1), Committed::at(200, "")),
            ])
        )
    );

    let resp = describe(&mut c, v.describe, &[&group]);
    assert_eq!(resp.groups[0].group_state.as_str(), "Stable", "{resp:?}");
    assert_eq!(resp.groups[0].members.len(), 1, "{resp:?}");
    assert!(listed(&list_groups(&mut c, v.list, &[], &[]), &group).is_some());

    assert_eq!(leave(&mut c, v.leave, &group, &id), None);
    await_state(&mut c, &group, "Empty");

    let (top, deleted) = offset_delete(&mut c, &group, &[(&topic, 1)]);
    assert_eq!(
        (top, deleted),
        (None, BTreeMap::from([(key(&topic, 1), None)]))
    );
    let (_, fetched) = fetch(&mut c, v.fetch, &group, Some(&[(&topic, parts)]));
    assert_eq!(fetched[&key(&topic, 1)], Committed::none());

    assert_eq!(
        delete_groups(&mut c, v.delete, &[&group]),
        BTreeMap::from([(group.clone(), None)])
    );
    assert_eq!(state(&mut c, &group), "Dead");
}

#[test]
fn every_group_api_at_its_lowest_version() {
    lifecycle(Versions {
        join: 0,
        sync: 0,
        heartbeat: 0,
        commit: 2,
        fetch: 1,
        describe: 0,
        list: 0,
        leave: 0,
        delete: 0,
    });
}

#[test]
fn every_group_api_at_its_highest_version() {
    lifecycle(Versions {
        join: 9,
        sync: 5,
        heartbeat: 4,
        commit: 9,
        fetch: 9,
        describe: 6,
        list: 5,
        leave: 5,
        delete: 2,
    });
}

// ---------------------------------------------------------------------------------------------
// Server assignment (koord only: Kafka's classic groups are assigned by their leader)
// ---------------------------------------------------------------------------------------------

/// A decoded ConsumerProtocolAssignment: `(topic, partition)` pairs.
fn assigned_partitions(bytes: &Bytes) -> Vec<(String, i32)> {
    let mut b = bytes.clone();
    let version = b.get_i16();
    let a = ConsumerProtocolAssignment::decode(&mut b, version).expect("an assignment");
    a.assigned_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().map(|&p| (t.topic.0.to_string(), p)))
        .collect()
}

#[test]
fn server_assigned_group_answers_every_sync_with_the_server_assignment() {
    let test = "server_assigned_group_answers_every_sync_with_the_server_assignment";
    let Some(koord) = Koord::start_owned(
        test,
        &[
            "group.initial.rebalance.delay.ms=0",
            "group.assignor=uniform",
            "topics=sa-t:6",
        ],
    ) else {
        return;
    };
    let mut c = koord.connect();
    let group = unique("g-server");
    let a = member_id_required(&mut c, &group, &["sa-t"]);
    let first = c.call(9, &join_request(&group, &a, &["sa-t"]));
    assert_eq!(err(first.error_code), None, "{first:?}");
    assert!(
        !first.skip_assignment,
        "SkipAssignment is for a replaced static leader only (KIP-814): {first:?}"
    );
    assert_eq!(first.members.len(), 1, "the leader still gets the members");

    // A second member: both rejoin into generation 2.
    let b = member_id_required(&mut c, &group, &["sa-t"]);
    let newcomer = Pending::send(&koord, 9, &join_request(&group, &b, &["sa-t"]));
    await_state(&mut c, &group, "PreparingRebalance");
    let rejoin = c.call(9, &join_request(&group, &a, &["sa-t"]));
    let newcomer = newcomer.wait();
    assert_eq!(err(rejoin.error_code), None, "{rejoin:?}");
    assert_eq!(rejoin.generation_id, newcomer.generation_id);
    let generation = rejoin.generation_id;
    let leader_join = if rejoin.member_id == rejoin.leader {
        &rejoin
    } else {
        &newcomer
    };
    assert!(!leader_join.skip_assignment);
    assert_eq!(leader_join.members.len(), 2);

    // Whatever the leader sends is ignored; every member gets the server's assignment.
    let garbage = vec![(b.clone(), assignment("sa-t", &[0, 1, 2, 3, 4, 5]))];
    let mut got = Vec::new();
    for (id, sent) in [(&a, garbage.clone()), (&b, garbage)] {
        let resp = c.call(5, &sync_request(5, &group, generation, id, sent));
        assert_eq!(err(resp.error_code), None, "{resp:?}");
        assert_eq!(resp.protocol_name.as_deref(), Some(PROTOCOL));
        got.push(assigned_partitions(&resp.assignment));
    }
    assert_eq!(got[0].len(), 3, "{got:?}");
    assert_eq!(got[1].len(), 3, "{got:?}");
    let mut all: Vec<_> = got.concat();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 6, "every partition exactly once: {got:?}");

    // DescribeGroups shows the assignor that assigned, and the assignments sent.
    let resp = describe(&mut c, 5, &[&group]);
    let g = &resp.groups[0];
    assert_eq!(g.group_state.as_str(), "Stable");
    assert_eq!(g.protocol_data.as_str(), "uniform");
    for m in &g.members {
        let want = if m.member_id.as_str() == a {
            &got[0]
        } else {
            &got[1]
        };
        assert_eq!(&assigned_partitions(&m.member_assignment), want);
    }
}

#[test]
fn server_assigned_group_refuses_a_subscription_it_cannot_decode() {
    let test = "server_assigned_group_refuses_a_subscription_it_cannot_decode";
    let Some(koord) = Koord::start_owned(test, &["group.initial.rebalance.delay.ms=0"]) else {
        return;
    };
    let mut c = koord.connect();
    let group = unique("g-server-bad");
    for metadata in [
        &b""[..],
        b"\x00",
        b"\xff\xff\x00\x00\x00\x00",
        b"\x00\x00\x7f\xff\xff\xff",
    ] {
        let req =
            join_request(&group, "", &[]).with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(s(PROTOCOL))
                .with_metadata(Bytes::copy_from_slice(metadata))]);
        let resp = c.call(9, &req);
        assert_eq!(
            err(resp.error_code),
            Some(ResponseError::InconsistentGroupProtocol),
            "{metadata:?}: {resp:?}"
        );
    }
    // The refused joins left nothing behind; a well-formed member still joins.
    let id = member_id_required(&mut c, &group, &["x"]);
    let resp = c.call(9, &join_request(&group, &id, &["x"]));
    assert_eq!(err(resp.error_code), None, "{resp:?}");
}

/// Kafka Streams (`stream`) and custom client assignors put user data only they can write in
/// every assignment; on koord's defaults such a group is assigned by its leader exactly as
/// Kafka does: no SkipAssignment, and the leader's assignment comes back byte for byte.
#[test]
fn a_client_assignor_koord_cannot_stand_in_for_is_left_to_the_leader() {
    let koord = Koord::start(&["group.initial.rebalance.delay.ms=0", "topics=ca-t:2"]);
    let mut c = koord.connect();
    for protocol in ["stream", "my-custom-assignor"] {
        let group = unique("g-client-assignor");
        let join = |member: &str| {
            let mut req = join_request(&group, member, &["ca-t"]);
            req.protocols[0].name = s(protocol);
            req
        };
        let resp = c.call(9, &join(""));
        assert_eq!(
            err(resp.error_code),
            Some(ResponseError::MemberIdRequired),
            "{resp:?}"
        );
        let member = resp.member_id.to_string();
        let joined = c.call(9, &join(&member));
        assert_eq!(err(joined.error_code), None, "{joined:?}");
        assert_eq!(joined.protocol_name.as_deref(), Some(protocol));
        assert!(!joined.skip_assignment, "{protocol}: {joined:?}");
        assert_eq!(joined.members.len(), 1, "the leader gets the members");

        // An assignment with user data only this client's assignor understands.
        let mut mine = BytesMut::new();
        mine.put_i16(0);
        ConsumerProtocolAssignment::default()
            .with_assigned_partitions(vec![AssignedPartitions::default()
                .with_topic(topic_name("ca-t"))
                .with_partitions(vec![1])])
            .with_user_data(Some(Bytes::from_static(b"\x00\x0bAssignmentInfo")))
            .encode(&mut mine, 0)
            .expect("encode an assignment");
        let mine = mine.freeze();
        let mut sync = sync_request(
            5,
            &group,
            joined.generation_id,
            &member,
            vec![(member.clone(), mine.clone())],
        );
        sync.protocol_name = Some(s(protocol));
        let synced: SyncGroupResponse = c.call(5, &sync);
        assert_eq!(err(synced.error_code), None, "{synced:?}");
        assert_eq!(
            synced.assignment, mine,
            "{protocol}: the leader's bytes, as sent"
        );
        let described = describe(&mut c, 5, &[&group]);
        assert_eq!(described.groups[0].protocol_data.as_str(), protocol);
    }
}

// ---------------------------------------------------------------------------------------------
// SkipAssignment (JoinGroup v9) on koord's defaults: only for KIP-814
// ---------------------------------------------------------------------------------------------

/// koord's defaults as every group test runs them: only the quick-rebalance settings, so koord
/// assigns on the server (`group.assignor` unset). A JoinGroup leader must still see exactly what
/// Kafka answers: franz-go reads SkipAssignment as KIP-814 (a replaced static leader) and
/// rejoins whenever the SyncGroup assignment differs from the plan it computes anyway (issue 24).
const DEFAULTS: &[&str] = &[
    "group.min.session.timeout.ms=1000",
    "group.initial.rebalance.delay.ms=0",
];

/// A ConsumerProtocolSubscription v3 as a Java 4.x consumer sends it: `topics`, null user data,
/// the partitions of `topic` it owns, its generation and no rack.
fn subscription_v3(topics: &[&str], owned: &[i32], generation: i32) -> Bytes {
    use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as Owned;
    let mut b = BytesMut::new();
    b.put_i16(3);
    let owned = if owned.is_empty() {
        vec![]
    } else {
        vec![Owned::default()
            .with_topic(topic_name(topics[0]))
            .with_partitions(owned.to_vec())]
    };
    ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| s(t)).collect())
        .with_owned_partitions(owned)
        .with_generation_id(generation)
        .encode(&mut b, 3)
        .expect("encode a subscription");
    b.freeze()
}

/// A consumer JoinGroup offering "range" with a real (v3) subscription to `topic`.
fn consumer_join(group: &str, member_id: &str, topic: &str, metadata: Bytes) -> JoinGroupRequest {
    join_request(group, member_id, &[topic]).with_protocols(vec![
        JoinGroupRequestProtocol::default()
            .with_name(s(PROTOCOL))
            .with_metadata(metadata),
    ])
}

#[test]
fn dynamic_consumer_leader_at_v9_is_not_told_to_skip_assignment() {
    let koord = Koord::start(DEFAULTS);
    let mut c = koord.connect();
    let group = unique("g-skip-dynamic");
    let topic = unique("skip-t");
    create_topic(&koord, &topic, 6);

    // One member: generation 1, it leads, and it is told to assign (no SkipAssignment).
    let a = member_id_required(&mut c, &group, &[&topic]);
    let first = c.call(
        9,
        &consumer_join(&group, &a, &topic, subscription_v3(&[&topic], &[], -1)),
    );
    assert_eq!(err(first.error_code), None, "{first:?}");
    assert_eq!(
        (first.generation_id, first.leader.as_str()),
        (1, a.as_str()),
        "{first:?}"
    );
    assert!(
        !first.skip_assignment,
        "a dynamic leader must assign: {first:?}"
    );
    assert_eq!(first.members.len(), 1, "{first:?}");
    let plan = vec![(a.clone(), assignment(&topic, &[0, 1, 2, 3, 4, 5]))];
    let resp = c.call(5, &sync_request(5, &group, 1, &a, plan));
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    assert!(!resp.assignment.is_empty(), "{resp:?}");
    let owned: Vec<i32> = assigned_partitions(&resp.assignment)
        .iter()
        .map(|(_, p)| *p)
        .collect();

    // A second member: both join generation 2 (the first declaring what it owns); the leader is
    // again told to assign, and the follower is not told to skip either.
    let b = member_id_required(&mut c, &group, &[&topic]);
    let newcomer = Pending::send(
        &koord,
        9,
        &consumer_join(&group, &b, &topic, subscription_v3(&[&topic], &[], -1)),
    );
    await_state(&mut c, &group, "PreparingRebalance");
    let rejoin = c.call(
        9,
        &consumer_join(&group, &a, &topic, subscription_v3(&[&topic], &owned, 1)),
    );
    let newcomer = newcomer.wait();
    for j in [&rejoin, &newcomer] {
        assert_eq!(err(j.error_code), None, "{j:?}");
        assert_eq!(j.generation_id, 2, "{j:?}");
        assert!(
            !j.skip_assignment,
            "no member of a dynamic group skips: {j:?}"
        );
    }
    let leader = if rejoin.member_id == rejoin.leader {
        &rejoin
    } else {
        &newcomer
    };
    assert_eq!(
        leader.members.len(),
        2,
        "the leader gets every member: {leader:?}"
    );
    let follower = if rejoin.member_id == rejoin.leader {
        &newcomer
    } else {
        &rejoin
    };
    assert!(follower.members.is_empty(), "{follower:?}");
}

#[test]
fn replaced_static_leader_at_v9_is_told_to_skip_assignment_with_the_members() {
    let koord = Koord::start(DEFAULTS);
    let mut c = koord.connect();
    let group = unique("g-skip-static");
    let topic = unique("skip-st");
    create_topic(&koord, &topic, 6);
    let instance = unique("instance");
    let metadata = subscription_v3(&[&topic], &[], -1);
    let static_join = |member: &str| {
        consumer_join(&group, member, &topic, metadata.clone())
            .with_group_instance_id(Some(s(&instance)))
    };

    // The static member's first join: it leads generation 1 and is told to assign.
    let first = c.call(9, &static_join(""));
    assert_eq!(err(first.error_code), None, "{first:?}");
    assert_eq!(first.generation_id, 1, "{first:?}");
    assert_eq!(first.leader, first.member_id, "{first:?}");
    assert!(
        !first.skip_assignment,
        "a first join must assign: {first:?}"
    );
    let old = first.member_id.to_string();
    let plan = vec![(old.clone(), assignment(&topic, &[0, 1, 2, 3, 4, 5]))];
    let synced = c.call(
        5,
        &sync_request(5, &group, 1, &old, plan).with_group_instance_id(Some(s(&instance))),
    );
    assert_eq!(err(synced.error_code), None, "{synced:?}");
    assert_eq!(state(&mut c, &group), "Stable");

    // The same instance joins again without a member id while the group is Stable: it replaces
    // the leader with no rebalance, and v9 tells it to skip assigning but still lists the members
    // with their metadata (KIP-814), so it can follow the group's subscriptions.
    let second = c.call(9, &static_join(""));
    assert_eq!(err(second.error_code), None, "{second:?}");
    let new = second.member_id.to_string();
    assert_ne!(new, old);
    assert_eq!(second.generation_id, 1, "{second:?}");
    assert_eq!(second.leader.as_str(), new, "{second:?}");
    assert!(second.skip_assignment, "KIP-814: {second:?}");
    let listed: Vec<_> = second
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                m.group_instance_id.as_deref().map(str::to_string),
                m.metadata.clone(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [(new.clone(), Some(instance.clone()), metadata)],
        "{second:?}"
    );
    assert_eq!(state(&mut c, &group), "Stable");

    // Its SyncGroup, with no assignments, returns the assignment the group already has.
    let resp = c.call(
        5,
        &sync_request(5, &group, 1, &new, vec![]).with_group_instance_id(Some(s(&instance))),
    );
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    assert_eq!(resp.assignment, synced.assignment);
    assert_eq!(state(&mut c, &group), "Stable");
}

/// The fallback setting under test: small, so the test is short.
const FALLBACK_REJOINS: i32 = 3;

#[test]
fn server_assigned_group_falls_back_to_the_plan_of_a_leader_that_rejoins_over_every_other() {
    // A client that does what franz-go does when told to skip assigning, or any client that
    // insists on its own plan: as leader it computes a plan, and after every SyncGroup whose
    // assignment is not (byte for byte) the one its plan gave it, it rejoins with the same
    // subscription. koord must stop overriding it after group.assignment.fallback.rejoins such
    // generations, install the leader's plan and warn; then the group stays in that generation.
    let test =
        "server_assigned_group_falls_back_to_the_plan_of_a_leader_that_rejoins_over_every_other";
    let fallback = format!("group.assignment.fallback.rejoins={FALLBACK_REJOINS}");
    let mut sets = DEFAULTS.to_vec();
    sets.push(&fallback);
    let Some(koord) = Koord::start_owned(test, &sets) else {
        return;
    };
    let mut c = koord.connect();
    let group = unique("g-fallback");
    let topic = unique("fb-t");
    create_topic(&koord, &topic, 6);
    let join = |member: &str| consumer_join(&group, member, &topic, subscription(&[&topic]));

    // Setup: a leads generation 1 alone; b joins, and both are in generation 2.
    let a = member_id_required(&mut c, &group, &[&topic]);
    let first = c.call(9, &join(&a));
    assert_eq!(err(first.error_code), None, "{first:?}");
    let resp = c.call(5, &sync_request(5, &group, 1, &a, vec![]));
    assert_eq!(err(resp.error_code), None, "{resp:?}");
    let b = member_id_required(&mut c, &group, &[&topic]);
    let mut joins = vec![Pending::send(&koord, 9, &join(&b))];
    await_state(&mut c, &group, "PreparingRebalance");
    joins.push(Pending::send(&koord, 9, &join(&a)));

    // The leader's plan, which no balanced assignor makes: 5 partitions for itself, 1 for the
    // other member.
    let plan = |leader: &str, other: &str| {
        vec![
            (leader.to_string(), assignment(&topic, &[0, 1, 2, 3, 4])),
            (other.to_string(), assignment(&topic, &[5])),
        ]
    };
    let mut rejoins = 0;
    let (generation, leader, follower) = loop {
        let js: Vec<JoinGroupResponse> = joins.drain(..).map(Pending::wait).collect();
        for j in &js {
            assert_eq!(err(j.error_code), None, "{j:?}");
            assert_eq!(j.generation_id, js[0].generation_id, "{js:?}");
        }
        let generation = js[0].generation_id;
        let leader = js[0].leader.to_string();
        let follower = if leader == a { b.clone() } else { a.clone() };
        let parked = Pending::send(
            &koord,
            5,
            &sync_request(5, &group, generation, &follower, vec![]),
        );
        let sent = plan(&leader, &follower);
        let resp = c.call(
            5,
            &sync_request(5, &group, generation, &leader, sent.clone()),
        );
        assert_eq!(err(resp.error_code), None, "{resp:?}");
        let follower_got = parked.wait();
        assert_eq!(err(follower_got.error_code), None, "{follower_got:?}");
        if resp.assignment == sent[0].1 {
            assert_eq!(
                follower_got.assignment, sent[1].1,
                "the leader's plan, whole"
            );
            break (generation, leader, follower);
        }
        // Not its plan: the leader rejoins, unchanged; the follower follows the rebalance.
        rejoins += 1;
        assert!(
            rejoins <= FALLBACK_REJOINS,
            "koord still overrides the leader's plan after {FALLBACK_REJOINS} rejoins in a row \
             (generation {generation}: {:?})\n{}",
            assigned_partitions(&resp.assignment),
            koord.log()
        );
        joins.push(Pending::send(&koord, 9, &join(&leader)));
        await_state(&mut c, &group, "PreparingRebalance");
        joins.push(Pending::send(&koord, 9, &join(&follower)));
    };
    assert_eq!(
        rejoins, FALLBACK_REJOINS,
        "the leader's plan is installed after exactly group.assignment.fallback.rejoins \
         generations that ended in its unchanged rejoin"
    );
    let log = koord.log();
    assert!(
        log.lines().any(|l| l.contains("WARN")
            && l.contains(&group)
            && l.contains("group.assignment.fallback.rejoins")),
        "koord warns when it falls back:\n{log}"
    );

    // Fallen back: no more rebalances. Both members' heartbeats find the group at the same
    // generation, Stable, with the leader's plan installed.
    for _ in 0..2 {
        for member in [&leader, &follower] {
            assert_eq!(err(heartbeat(&mut c, 4, &group, generation, member)), None);
        }
        assert_eq!(state(&mut c, &group), "Stable");
    }
    let resp = describe(&mut c, 5, &[&group]);
    let installed: BTreeMap<String, Vec<(String, i32)>> = resp.groups[0]
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                assigned_partitions(&m.member_assignment),
            )
        })
        .collect();
    let want: BTreeMap<String, Vec<(String, i32)>> = plan(&leader, &follower)
        .iter()
        .map(|(m, bytes)| (m.clone(), assigned_partitions(bytes)))
        .collect();
    assert_eq!(installed, want);
}
