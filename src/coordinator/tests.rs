//! Actor tests: real tasks and channels, tokio's paused clock (timers fire by advancing time, not
//! by waiting for it).

use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::group::{Generation, LeavingMember, Protocol, RequestToken};
use crate::storage::{MemoryStore, Store};

const SESSION: u64 = 10_000;

fn coordinator() -> Arc<Coordinator> {
    Coordinator::new(settings(), Clock::starting_at(1_000_000))
}

/// A coordinator writing to `store`, as a restarted koord would after loading it.
fn coordinator_on(store: &Arc<MemoryStore>) -> Arc<Coordinator> {
    let c = Coordinator::with_storage(
        settings(),
        Clock::starting_at(1_000_000),
        Storage::inline(store.clone()),
        true,
    );
    c.load(store.load_groups().unwrap()).unwrap();
    c
}

fn settings() -> Settings {
    Settings {
        ownership: Arc::new(crate::coordinator::ownership::Ownership::single()),
        group: GroupConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupConfig::default()
        },
        offsets: OffsetConfig {
            retention_ms: 60_000,
            ..OffsetConfig::default()
        },
        // These tests drive the group protocol with opaque metadata: the leader assigns.
        assignment: AssignmentPolicy::new(
            crate::assignor::policy::CLIENT,
            &[],
            crate::assignor::Registry::builtin(),
            Arc::new(std::collections::BTreeMap::<String, u32>::new()),
        ),
        consumer: Arc::default(),
        streams: Arc::default(),
        share: Default::default(),
        image: Arc::new(crate::metadata::Topics::default()),
    }
}

fn gid(s: &str) -> GroupId {
    GroupId::new(s)
}

fn join(member: &MemberId, nonce: &str) -> JoinGroup {
    JoinGroup {
        token: RequestToken(0),
        member_id: member.clone(),
        instance_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![Protocol::new("range", Bytes::from_static(b"sub"))],
        require_known_member_id: false,
        supports_skip_assignment: false,
        reason: None,
        member_id_nonce: nonce.into(),
    }
}

fn sync(
    member: &MemberId,
    generation: Generation,
    assignments: Vec<(MemberId, Bytes)>,
) -> SyncGroup {
    SyncGroup {
        token: RequestToken(0),
        member_id: member.clone(),
        instance_id: None,
        generation,
        protocol_type: None,
        protocol_name: None,
        assignments,
    }
}

fn hb(member: &MemberId, generation: Generation) -> Heartbeat {
    Heartbeat {
        member_id: member.clone(),
        instance_id: None,
        generation,
    }
}

fn anonymous_commit(topic: &str, offset: i64) -> OffsetCommit {
    OffsetCommit {
        auth: OffsetCommitAuth {
            member_id: MemberId::unknown(),
            instance_id: None,
            generation: Generation::NONE,
            transactional: false,
        },
        partitions: vec![PartitionCommit {
            tp: TopicPartition::new(topic, 0),
            offset,
            leader_epoch: None,
            metadata: None,
        }],
        retention_time_ms: -1,
        group_id_not_found_supported: true,
        api_version: 9,
    }
}

/// Two members form a group: both JoinGroup replies arrive once the phase completes (one was
/// parked while the other joined), the leader's SyncGroup assignment reaches the follower.
#[tokio::test(start_paused = true)]
async fn two_members_form_a_group_through_parked_replies() {
    let c = coordinator();
    let first = c.join(gid("g"), join(&MemberId::unknown(), "a")).await;
    assert_eq!(first.error, None);
    assert_eq!(first.generation, Generation(1));
    let a = first.member_id.clone();
    let a_sync = c.sync(
        gid("g"),
        sync(
            &a,
            Generation(1),
            vec![(a.clone(), Bytes::from_static(b"A"))],
        ),
    );
    assert_eq!(a_sync.await.assignment, Bytes::from_static(b"A"));

    // A second member: its join parks until the first rejoins (found out by heartbeat).
    let c2 = c.clone();
    let b_join =
        tokio::spawn(async move { c2.join(gid("g"), join(&MemberId::unknown(), "b")).await });
    tokio::task::yield_now().await;
    assert_eq!(
        c.heartbeat(gid("g"), hb(&a, Generation(1))).await,
        Err(GroupError::RebalanceInProgress)
    );
    let a_rejoin = c.join(gid("g"), join(&a, "")).await;
    let b_reply = b_join.await.unwrap();
    assert_eq!(a_rejoin.generation, Generation(2));
    assert_eq!(b_reply.generation, Generation(2));
    assert_eq!(a_rejoin.leader, a, "the existing leader is kept");
    assert_eq!(
        a_rejoin.members.len(),
        2,
        "only the leader gets the members"
    );
    assert!(b_reply.members.is_empty());
    let b = b_reply.member_id.clone();

    let c2 = c.clone();
    let b2 = b.clone();
    let b_sync =
        tokio::spawn(async move { c2.sync(gid("g"), sync(&b2, Generation(2), vec![])).await });
    let a_sync = c
        .sync(
            gid("g"),
            sync(
                &a,
                Generation(2),
                vec![
                    (a.clone(), Bytes::from_static(b"A2")),
                    (b.clone(), Bytes::from_static(b"B2")),
                ],
            ),
        )
        .await;
    assert_eq!(a_sync.assignment, Bytes::from_static(b"A2"));
    assert_eq!(b_sync.await.unwrap().assignment, Bytes::from_static(b"B2"));
    assert_eq!(c.heartbeat(gid("g"), hb(&b, Generation(2))).await, Ok(()));
    let listing = c.list();
    assert_eq!(listing.len(), 1);
    assert_eq!(listing[0].state, ListedState::classic(GroupState::Stable));
    assert_eq!(listing[0].protocol_type, "consumer");
    let described = c.describe(gid("g")).await.unwrap();
    assert_eq!(described.protocol, "range");
    assert_eq!(described.members.len(), 2);
}

/// A member that stops heartbeating is removed when its session expires (driven by the actor's
/// own timer), and the group goes back to Empty.
#[tokio::test(start_paused = true)]
async fn session_expiry_removes_a_silent_member() {
    let c = coordinator();
    let a = c
        .join(gid("g"), join(&MemberId::unknown(), "a"))
        .await
        .member_id;
    c.sync(gid("g"), sync(&a, Generation(1), vec![])).await;
    tokio::time::advance(Duration::from_millis(SESSION / 2)).await;
    assert_eq!(c.heartbeat(gid("g"), hb(&a, Generation(1))).await, Ok(()));
    tokio::time::advance(Duration::from_millis(SESSION + 1)).await;
    tokio::task::yield_now().await;
    assert_eq!(
        c.heartbeat(gid("g"), hb(&a, Generation(1))).await,
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(c.describe(gid("g")).await.unwrap().state, GroupState::Empty);
}

/// Requests for a group that does not exist get Kafka's answers and create nothing.
#[tokio::test(start_paused = true)]
async fn missing_group_answers_without_creating_it() {
    let c = coordinator();
    let m = MemberId::new("m-1");
    assert_eq!(
        c.heartbeat(gid("nope"), hb(&m, Generation(1))).await,
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        c.sync(gid("nope"), sync(&m, Generation(1), vec![]))
            .await
            .error,
        Some(GroupError::UnknownMemberId)
    );
    assert_eq!(
        c.join(gid("nope"), join(&m, "x")).await.error,
        Some(GroupError::UnknownMemberId)
    );
    let left = c
        .leave(
            gid("nope"),
            LeaveGroup {
                members: vec![LeavingMember {
                    member_id: m.clone(),
                    instance_id: None,
                    reason: None,
                }],
            },
        )
        .await;
    assert_eq!(left.members[0].error, Some(GroupError::UnknownMemberId));
    let fetched = c
        .fetch_offsets(gid("nope"), Some(vec![TopicPartition::new("t", 0)]))
        .await;
    assert_eq!(fetched[0].offset, -1);
    assert_eq!(c.describe(gid("nope")).await, None);
    assert_eq!(
        c.delete_group(gid("nope")).await,
        Err(GroupError::GroupIdNotFound)
    );
    let mut commit = anonymous_commit("t", 5);
    commit.auth.generation = Generation(3);
    assert_eq!(
        c.commit_offsets(gid("nope"), commit).await,
        Err(GroupError::GroupIdNotFound)
    );
    assert!(c.list().is_empty());
    assert!(c.group_ids().is_empty());
}

/// An OffsetCommit outside group management creates a simple group; its offsets are fetched
/// back; DeleteGroups removes both, and the group is then missing again.
#[tokio::test(start_paused = true)]
async fn simple_group_commit_fetch_delete() {
    let c = coordinator();
    let results = c
        .commit_offsets(gid("s"), anonymous_commit("t", 42))
        .await
        .unwrap();
    assert_eq!(results, vec![(TopicPartition::new("t", 0), None)]);
    let all = c.fetch_offsets(gid("s"), None).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].offset, 42);
    let listing = c.list();
    assert_eq!(
        listing[0].protocol_type, "",
        "a simple group has no protocol type"
    );
    assert_eq!(listing[0].state, ListedState::classic(GroupState::Empty));
    assert_eq!(c.delete_group(gid("s")).await, Ok(()));
    assert_eq!(
        c.delete_group(gid("s")).await,
        Err(GroupError::GroupIdNotFound)
    );
    assert_eq!(c.fetch_offsets(gid("s"), None).await, vec![]);
    assert!(c.list().is_empty());
}

#[tokio::test(start_paused = true)]
async fn non_empty_group_cannot_be_deleted() {
    let c = coordinator();
    let a = c
        .join(gid("g"), join(&MemberId::unknown(), "a"))
        .await
        .member_id;
    c.sync(gid("g"), sync(&a, Generation(1), vec![])).await;
    assert_eq!(
        c.delete_group(gid("g")).await,
        Err(GroupError::NonEmptyGroup)
    );
}

/// Offsets of an Empty group expire `offsets.retention.minutes` after it became Empty; the
/// group, left with nothing, is deleted.
#[tokio::test(start_paused = true)]
async fn retention_expires_offsets_and_deletes_the_empty_group() {
    let c = coordinator();
    c.commit_offsets(gid("s"), anonymous_commit("t", 1))
        .await
        .unwrap();
    c.expire_offsets();
    tokio::task::yield_now().await;
    assert_eq!(c.fetch_offsets(gid("s"), None).await.len(), 1, "not yet");
    tokio::time::advance(Duration::from_millis(60_001)).await;
    c.expire_offsets();
    // The fetch queues behind the expiry and finds the group gone.
    assert_eq!(c.fetch_offsets(gid("s"), None).await, vec![]);
    assert!(c.list().is_empty());
}

/// Many groups at once are independent: a commit storm in one does not disturb another.
#[tokio::test(start_paused = true)]
async fn groups_are_independent() {
    let c = coordinator();
    let mut tasks = Vec::new();
    for g in 0..50 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let id = gid(&format!("g{g}"));
            for o in 0..20 {
                c.commit_offsets(id.clone(), anonymous_commit("t", o))
                    .await
                    .unwrap();
            }
            c.fetch_offsets(id, Some(vec![TopicPartition::new("t", 0)]))
                .await[0]
                .offset
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 19);
    }
    assert_eq!(c.list().len(), 50);
}

fn stored_offsets(store: &MemoryStore, group: &str) -> Vec<(TopicPartition, i64)> {
    store
        .load_groups()
        .unwrap()
        .into_iter()
        .filter(|g| g.id.as_str() == group)
        .flat_map(|g| g.offsets)
        .map(|(tp, o)| (tp, o.offset))
        .collect()
}

fn stored_group_ids(store: &MemoryStore) -> Vec<String> {
    store
        .load_groups()
        .unwrap()
        .into_iter()
        .map(|g| g.id.0)
        .collect()
}

/// A commit whose write fails is answered with Kafka's mapping of a storage error and changes
/// nothing: the previous offset is still served and stored.
#[tokio::test(start_paused = true)]
async fn a_failed_commit_write_changes_nothing() {
    let store = Arc::new(MemoryStore::default());
    let c = coordinator_on(&store);
    c.commit_offsets(gid("s"), anonymous_commit("t", 1))
        .await
        .unwrap();
    store.fail_writes(true);
    assert_eq!(
        c.commit_offsets(gid("s"), anonymous_commit("t", 2)).await,
        Err(GroupError::NotCoordinator)
    );
    store.fail_writes(false);
    assert_eq!(c.fetch_offsets(gid("s"), None).await[0].offset, 1);
    assert_eq!(
        stored_offsets(&store, "s"),
        vec![(TopicPartition::new("t", 0), 1)]
    );
}

/// A DeleteGroups whose tombstone cannot be stored is answered with the mapped storage error and
/// deletes nothing: the group is still listed (Empty), its offsets are served and stored, and a
/// later DeleteGroups deletes it.
#[tokio::test(start_paused = true)]
async fn a_failed_delete_write_keeps_the_group() {
    let store = Arc::new(MemoryStore::default());
    let c = coordinator_on(&store);
    c.commit_offsets(gid("s"), anonymous_commit("t", 7))
        .await
        .unwrap();
    store.fail_writes(true);
    assert_eq!(
        c.delete_group(gid("s")).await,
        Err(GroupError::NotCoordinator)
    );
    store.fail_writes(false);
    let listing = c.list();
    assert_eq!(listing.len(), 1, "{listing:?}");
    assert_eq!(listing[0].state, ListedState::classic(GroupState::Empty));
    assert_eq!(c.fetch_offsets(gid("s"), None).await[0].offset, 7);
    assert_eq!(stored_group_ids(&store), vec!["s".to_string()]);
    assert_eq!(
        stored_offsets(&store, "s"),
        vec![(TopicPartition::new("t", 0), 7)]
    );
    assert_eq!(c.delete_group(gid("s")).await, Ok(()));
    assert!(c.list().is_empty());
    assert!(stored_group_ids(&store).is_empty());
}

/// The leader's assignment cannot be stored: every member's SyncGroup gets the mapped error and
/// the group does not become Stable with an assignment nobody can reload.
#[tokio::test(start_paused = true)]
async fn a_failed_assignment_write_fails_the_sync_and_rebalances() {
    let store = Arc::new(MemoryStore::default());
    let c = coordinator_on(&store);
    let a = c
        .join(gid("g"), join(&MemberId::unknown(), "a"))
        .await
        .member_id;
    store.fail_writes(true);
    let reply = c
        .sync(
            gid("g"),
            sync(
                &a,
                Generation(1),
                vec![(a.clone(), Bytes::from_static(b"A"))],
            ),
        )
        .await;
    assert_eq!(reply.error, Some(GroupError::NotCoordinator));
    assert_ne!(c.list()[0].state, ListedState::classic(GroupState::Stable));
}

/// Retention with a manual clock removes expired offsets from the store, and the Empty group
/// left with none; DeleteGroups removes a group and its offsets.
#[tokio::test(start_paused = true)]
async fn expiry_and_delete_groups_remove_data_from_the_store() {
    let store = Arc::new(MemoryStore::default());
    let c = coordinator_on(&store);
    c.commit_offsets(gid("old"), anonymous_commit("t", 1))
        .await
        .unwrap();
    c.commit_offsets(gid("gone"), anonymous_commit("t", 1))
        .await
        .unwrap();
    assert_eq!(stored_group_ids(&store), ["gone", "old"]);
    assert_eq!(c.delete_group(gid("gone")).await, Ok(()));
    assert_eq!(stored_group_ids(&store), ["old"]);

    tokio::time::advance(Duration::from_millis(60_001)).await;
    c.expire_offsets();
    // The fetch queues behind the expiry, whose writes complete first.
    assert_eq!(c.fetch_offsets(gid("old"), None).await, vec![]);
    assert!(stored_offsets(&store, "old").is_empty());
    assert!(stored_group_ids(&store).is_empty());
}

/// Group "g" Stable in generation 1 with member "a" (returned), which committed offset 7 of
/// t-0.
async fn stable_with_commit(c: &Coordinator) -> MemberId {
    let a = c
        .join(gid("g"), join(&MemberId::unknown(), "a"))
        .await
        .member_id;
    let reply = c
        .sync(
            gid("g"),
            sync(
                &a,
                Generation(1),
                vec![(a.clone(), Bytes::from_static(b"A"))],
            ),
        )
        .await;
    assert_eq!(reply.error, None);
    let mut commit = anonymous_commit("t", 7);
    commit.auth.member_id = a.clone();
    commit.auth.generation = Generation(1);
    c.commit_offsets(gid("g"), commit).await.unwrap();
    a
}

/// Gateway mode (offsets kept upstream, with upstream's retention): retention expires no
/// offset and never deletes a group's offsets; a group Empty for `offsets.retention.minutes`
/// is forgotten: its records cleared and it leaves memory, its offsets left where they are.
#[tokio::test(start_paused = true)]
async fn gateway_retention_forgets_a_long_empty_group_but_never_its_offsets() {
    let store = Arc::new(MemoryStore::default());
    let mut s = settings();
    s.offsets.kept_elsewhere = true;
    let c = Coordinator::with_storage(
        s,
        Clock::starting_at(1_000_000),
        Storage::inline(store.clone()),
        true,
    );
    c.load(Vec::new()).unwrap();
    let a = stable_with_commit(&c).await;
    let left = c
        .leave(
            gid("g"),
            LeaveGroup {
                members: vec![LeavingMember {
                    member_id: a.clone(),
                    instance_id: None,
                    reason: None,
                }],
            },
        )
        .await;
    assert_eq!(left.members[0].error, None);
    let record = |store: &MemoryStore| {
        store
            .load_groups()
            .unwrap()
            .into_iter()
            .find(|g| g.id.as_str() == "g")
            .and_then(|g| crate::group::classic::codec::restore(&g.records).unwrap())
    };
    assert!(record(&store).is_some());

    // Long past retention since the commit (standalone would expire the offset and delete the
    // group): the first check that sees the group Empty only starts its clock.
    tokio::time::advance(Duration::from_millis(120_000)).await;
    c.expire_offsets();
    assert_eq!(c.fetch_offsets(gid("g"), None).await.len(), 1);
    assert_eq!(c.list().len(), 1);

    tokio::time::advance(Duration::from_millis(60_001)).await;
    c.expire_offsets();
    // The fetch queues behind the check: the group is gone from memory...
    assert_eq!(c.fetch_offsets(gid("g"), None).await, vec![]);
    assert!(c.list().is_empty());
    // ... and its record from the store, but not its offset.
    assert!(record(&store).is_none());
    assert_eq!(
        stored_offsets(&store, "g"),
        [(TopicPartition::new("t", 0), 7)]
    );
}

/// A Stable group comes back Stable in the same generation after a restart, with its offsets,
/// and members that keep heartbeating keep their assignment without a rebalance.
#[tokio::test(start_paused = true)]
async fn a_stable_group_survives_a_restart_in_its_generation() {
    let store = Arc::new(MemoryStore::default());
    let before = coordinator_on(&store);
    let a = stable_with_commit(&before).await;
    drop(before);

    let after = coordinator_on(&store);
    assert_eq!(
        after.list()[0].state,
        ListedState::classic(GroupState::Stable)
    );
    for _ in 0..5 {
        tokio::time::advance(Duration::from_millis(SESSION / 2)).await;
        assert_eq!(
            after.heartbeat(gid("g"), hb(&a, Generation(1))).await,
            Ok(())
        );
    }
    let again = after.sync(gid("g"), sync(&a, Generation(1), vec![])).await;
    assert_eq!(
        (again.error, again.assignment),
        (None, Bytes::from_static(b"A"))
    );
    assert_eq!(after.fetch_offsets(gid("g"), None).await[0].offset, 7);
    assert_eq!(
        after.list()[0].state,
        ListedState::classic(GroupState::Stable)
    );
}

/// Until the stored groups are loaded, group requests get COORDINATOR_LOAD_IN_PROGRESS (a
/// heartbeat gets NONE, as in Kafka) and nothing is created.
#[tokio::test(start_paused = true)]
async fn requests_while_loading_get_load_in_progress() {
    let c = Coordinator::with_storage(settings(), Clock::starting_at(0), Storage::memory(), true);
    assert_eq!(
        c.join(gid("g"), join(&MemberId::unknown(), "a"))
            .await
            .error,
        Some(GroupError::CoordinatorLoadInProgress)
    );
    assert_eq!(
        c.commit_offsets(gid("g"), anonymous_commit("t", 1)).await,
        Err(GroupError::CoordinatorLoadInProgress)
    );
    assert_eq!(
        c.heartbeat(gid("g"), hb(&MemberId::new("m"), Generation(1)))
            .await,
        Ok(())
    );
    assert!(c.group_ids().is_empty());
    c.load(Vec::new()).unwrap();
    c.commit_offsets(gid("g"), anonymous_commit("t", 1))
        .await
        .unwrap();
}

/// A group record its kind cannot read fails the load, naming the group: no group is loaded
/// and the directory keeps answering COORDINATOR_LOAD_IN_PROGRESS.
#[tokio::test(start_paused = true)]
async fn a_damaged_group_record_fails_the_load_and_nothing_is_served() {
    use crate::group::consumer::codec::KIND;
    use crate::vocab::stored::StoredRecord;
    let c = Coordinator::with_storage(settings(), Clock::starting_at(0), Storage::memory(), true);
    let good = crate::storage::LoadedGroup::new(gid("a"));
    let damaged = crate::storage::LoadedGroup {
        records: vec![StoredRecord::group(KIND, vec![1, 0, 0])],
        ..crate::storage::LoadedGroup::new(gid("b"))
    };
    let e = c.load(vec![good, damaged]).unwrap_err();
    assert!(
        e.0.starts_with("group b: consumer group value is truncated"),
        "{e}"
    );
    assert!(c.group_ids().is_empty());
    assert_eq!(
        c.commit_offsets(gid("a"), anonymous_commit("t", 1)).await,
        Err(GroupError::CoordinatorLoadInProgress)
    );
}

/// Cluster mode: a group is served only while its shard is this node's. Taken away, the
/// member parked in JoinGroup is told NOT_COORDINATOR, every later request too (no group is
/// created for it again here), and the group is gone from memory; given back, its stored
/// record brings it back Stable in the same generation, so the member keeps its place.
#[tokio::test(start_paused = true)]
async fn a_group_whose_shard_moves_away_is_refused_and_dropped_and_comes_back_loaded() {
    use crate::coordinator::ownership::{Ownership, ShardState};
    let ownership = Arc::new(Ownership::cluster(1, 4));
    let store = Arc::new(MemoryStore::default());
    let c = Coordinator::with_storage(
        Settings {
            ownership: ownership.clone(),
            ..settings()
        },
        Clock::starting_at(1_000_000),
        Storage::inline(store.clone()),
        true,
    );
    c.load(Vec::new()).unwrap();
    let shard = ownership.shard_of("g");
    let lease = crate::group::Timestamp(10_000_000);
    ownership.renew_lease(lease);
    assert_eq!(
        c.join(gid("g"), join(&MemberId::unknown(), "a"))
            .await
            .error,
        Some(GroupError::NotCoordinator),
        "no shard is this node's yet"
    );
    ownership.set(&[shard], ShardState::Owned);
    let a = c
        .join(gid("g"), join(&MemberId::unknown(), "a"))
        .await
        .member_id;
    c.sync(gid("g"), sync(&a, Generation(1), vec![])).await;
    // A second member parks in JoinGroup.
    let c2 = c.clone();
    let parked =
        tokio::spawn(async move { c2.join(gid("g"), join(&MemberId::unknown(), "b")).await });
    tokio::task::yield_now().await;

    ownership.set(&[shard], ShardState::Elsewhere(2));
    assert_eq!(c.unload(&[shard]), 1);
    assert_eq!(
        parked.await.unwrap().error,
        Some(GroupError::NotCoordinator)
    );
    assert_eq!(
        c.heartbeat(gid("g"), hb(&a, Generation(1))).await,
        Err(GroupError::NotCoordinator)
    );
    assert_eq!(
        c.commit_offsets(gid("g"), anonymous_commit("t", 1))
            .await
            .err(),
        Some(GroupError::NotCoordinator),
        "a commit would have created a simple group"
    );
    assert!(c.list().is_empty(), "the group left memory");

    // Given back: loaded from what was stored, Stable in generation 1 (the rebalance the
    // parked member started was never stored), the member heartbeats on.
    ownership.set(&[shard], ShardState::Loading);
    assert_eq!(
        c.heartbeat(gid("g"), hb(&a, Generation(1))).await,
        Ok(()),
        "Kafka answers a heartbeat NONE while loading"
    );
    let loaded: Vec<LoadedGroup> = store
        .load_groups()
        .unwrap()
        .into_iter()
        .filter(|g| ownership.shard_of(g.id.as_str()) == shard)
        .collect();
    assert_eq!(c.load_more(loaded), Ok(1));
    ownership.set(&[shard], ShardState::Owned);
    assert_eq!(c.heartbeat(gid("g"), hb(&a, Generation(1))).await, Ok(()));
    // The lease runs out: nothing is served, though the shard is still held.
    tokio::time::advance(Duration::from_millis(lease.as_millis() - 1_000_000)).await;
    assert_eq!(
        c.heartbeat(gid("g"), hb(&a, Generation(1))).await,
        Err(GroupError::NotCoordinator)
    );
}

/// A kind's own request reaches a group of that kind only: none is created without `create`,
/// a group of another kind with members is refused, an Empty one (a simple group) becomes the
/// kind and keeps its offsets.
#[tokio::test(start_paused = true)]
async fn with_kind_creates_converts_and_refuses_by_kind() {
    use crate::group::streams::StreamsGroup;
    let c = coordinator();
    let epoch = |g: &mut StreamsGroup, _: &dyn TopicImage, _| g.group_epoch();
    assert_eq!(
        c.with_kind(gid("none"), false, epoch).await,
        Err(KindRefusal::Missing)
    );
    assert!(c.listing(&gid("none")).is_none());
    assert_eq!(c.with_kind(gid("new"), true, epoch).await, Ok(0));
    assert_eq!(
        c.listing(&gid("new")).unwrap().state.group_type(),
        "streams"
    );

    c.commit_offsets(gid("s"), anonymous_commit("t", 1))
        .await
        .unwrap();
    assert_eq!(
        c.with_kind(gid("s"), false, epoch).await,
        Err(KindRefusal::OtherKind)
    );
    assert_eq!(c.with_kind(gid("s"), true, epoch).await, Ok(0));
    assert_eq!(c.listing(&gid("s")).unwrap().state.group_type(), "streams");
    assert_eq!(c.fetch_offsets(gid("s"), None).await[0].offset, 1);

    stable_with_commit(&c).await;
    assert_eq!(
        c.with_kind(gid("g"), true, epoch).await,
        Err(KindRefusal::OtherKind)
    );
    assert_eq!(c.listing(&gid("g")).unwrap().state.group_type(), "classic");
}

/// A kind's answer waits for the group's writes before it and carries their failure: an
/// Empty group converted while the store refuses writes (its old records cannot be cleared)
/// is answered with the mapped storage error.
#[tokio::test(start_paused = true)]
async fn with_kind_answers_once_the_writes_before_it_are_durable() {
    use crate::group::streams::StreamsGroup;
    let store = Arc::new(MemoryStore::default());
    let c = coordinator_on(&store);
    c.commit_offsets(gid("s"), anonymous_commit("t", 1))
        .await
        .unwrap();
    store.fail_writes(true);
    let epoch = |g: &mut StreamsGroup, _: &dyn TopicImage, _| g.group_epoch();
    assert_eq!(
        c.with_kind(gid("s"), true, epoch).await,
        Err(KindRefusal::Error(GroupError::NotCoordinator))
    );
    store.fail_writes(false);
    assert_eq!(c.with_kind(gid("s"), false, epoch).await, Ok(0));
}

/// A ShareFetch waiting for records wakes when the group makes some available again: the
/// group's notify fires for a RELEASE (and a member gone, a lock expired), not for an
/// acquisition.
#[tokio::test(start_paused = true)]
async fn a_share_groups_released_records_wake_its_waiting_fetches() {
    use crate::group::share::partition::{AckBatch, AckType, AcquireMode, ReadBatch};
    use crate::group::share::{PartitionAcks, ReadPartition, SessionRequest, ShareGroup};
    use futures_util::FutureExt;
    let c = coordinator();
    let id = gid("sg-wake");
    let topic = crate::metadata::name_based_id("t");
    let share = c.share_settings().clone();
    let session = move |epoch: i32, acks: Vec<PartitionAcks>| SessionRequest {
        member_id: MemberId::new("a"),
        node: 1,
        connection: 1,
        session_epoch: epoch,
        fetch: (epoch == 0).then(|| vec![(topic, 0)]),
        forgotten: Vec::new(),
        acks,
    };
    let read = move || {
        vec![ReadPartition {
            topic,
            partition: 0,
            start: 0,
            batches: vec![ReadBatch {
                first: 0,
                last: 4,
                skip: false,
            }],
        }]
    };
    let (s, open) = (share.clone(), session);
    let got = c
        .with_kind(id.clone(), true, move |g: &mut ShareGroup, _, now| {
            g.handle_session(open(0, Vec::new()), &s, now).unwrap();
            g.acquire(
                &MemberId::new("a"),
                1,
                read(),
                10,
                AcquireMode::BatchOptimized,
                now,
            )
        })
        .await
        .unwrap();
    assert_eq!(got[0].2.len(), 1, "{got:?}");
    let available = c.share_available(&id).expect("the group's notify");
    let mut woken = Box::pin(available.notified());
    woken.as_mut().enable();
    // Another acquisition (nothing left to take) wakes nobody.
    c.with_kind(id.clone(), false, move |g: &mut ShareGroup, _, now| {
        g.acquire(
            &MemberId::new("a"),
            1,
            read(),
            10,
            AcquireMode::BatchOptimized,
            now,
        )
    })
    .await
    .unwrap();
    assert!(woken.as_mut().now_or_never().is_none());
    let release = vec![PartitionAcks {
        topic,
        partition: 0,
        batches: vec![AckBatch {
            first: 0,
            last: 4,
            types: vec![AckType::Release],
        }],
    }];
    c.with_kind(id.clone(), false, move |g: &mut ShareGroup, _, now| {
        g.handle_session(session(1, release), &share, now).unwrap();
    })
    .await
    .unwrap();
    assert!(
        woken.as_mut().now_or_never().is_some(),
        "the release wakes the waiter"
    );
}
