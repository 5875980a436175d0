//! The share group core with a manual clock: membership as Kafka's share heartbeat runs it,
//! share sessions, acquisition and acknowledgement through the group, and the records that
//! store it.

use super::group::{ReadPartition, SessionRequest, FINAL_SESSION_EPOCH};
use super::partition::{AckBatch, AckType, AcquireMode, ReadBatch, RecordState};
use super::*;
use crate::group::consumer::tests::Image;
use crate::group::modern::Refusal;
use crate::vocab::{Partitions, TopicId};

const T0: Timestamp = Timestamp(1_000);

fn tid(name: &str) -> TopicId {
    TopicId::new_v5(&TopicId::NAMESPACE_OID, name.as_bytes())
}

fn settings() -> ShareSettings {
    ShareSettings {
        session_timeout_ms: 60_000,
        ..ShareSettings::default()
    }
}

fn join(member: &str, topics: &[&str]) -> ShareHeartbeat {
    ShareHeartbeat {
        member_id: MemberId::new(member),
        member_epoch: 0,
        rack_id: None,
        subscribed_topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
        client_id: "app".into(),
        client_host: "/127.0.0.1".into(),
    }
}

fn beat(member: &str, epoch: i32) -> ShareHeartbeat {
    ShareHeartbeat {
        member_epoch: epoch,
        subscribed_topic_names: None,
        ..join(member, &[])
    }
}

/// The broker every session here is with.
const NODE: i32 = 1;

fn group() -> ShareGroup {
    ShareGroup::new(GroupId::new("g"), settings())
}

fn parts(list: &[(&str, &[i32])]) -> Partitions {
    list.iter().map(|(t, p)| (tid(t), p.to_vec())).collect()
}

fn open(g: &mut ShareGroup, member: &str, partitions: &[(&str, i32)]) -> SessionAnswer {
    g.handle_session(
        SessionRequest {
            member_id: MemberId::new(member),
            node: NODE,
            connection: 1,
            session_epoch: 0,
            fetch: Some(partitions.iter().map(|(t, p)| (tid(t), *p)).collect()),
            forgotten: Vec::new(),
            acks: Vec::new(),
        },
        &settings(),
        T0,
    )
    .unwrap()
}

fn read(topic: &str, partition: i32, first: i64, last: i64) -> ReadPartition {
    ReadPartition {
        topic: tid(topic),
        partition,
        start: 0,
        batches: vec![ReadBatch {
            first,
            last,
            skip: false,
        }],
    }
}

fn ack(
    g: &mut ShareGroup,
    member: &str,
    epoch: i32,
    (first, last, kind): (i64, i64, AckType),
) -> Result<SessionAnswer, Refusal> {
    g.handle_session(
        SessionRequest {
            member_id: MemberId::new(member),
            node: NODE,
            connection: 1,
            session_epoch: epoch,
            fetch: None,
            forgotten: Vec::new(),
            acks: vec![PartitionAcks {
                topic: tid("t"),
                partition: 0,
                batches: vec![AckBatch {
                    first,
                    last,
                    types: vec![kind],
                }],
            }],
        },
        &settings(),
        T0,
    )
}

#[test]
fn members_join_and_share_the_partitions() {
    let image = Image::with(&[("t", 2)]);
    let mut g = group();
    let a = g
        .handle_heartbeat(join("a", &["t"]), &settings(), &image, T0)
        .unwrap();
    assert_eq!(a.member_epoch, 1);
    assert_eq!(a.assignment, Some(parts(&[("t", &[0, 1])])));
    assert_eq!(g.state(), ShareGroupState::Stable);
    for m in ["b", "c", "d"] {
        g.handle_heartbeat(join(m, &["t"]), &settings(), &image, T0)
            .unwrap();
    }
    // Four members on two partitions: each partition goes to two, each member gets one.
    let a = g
        .handle_heartbeat(beat("a", 1), &settings(), &image, T0)
        .unwrap();
    assert_eq!(a.member_epoch, 4, "a member takes its target at once");
    let assigned: Vec<usize> = g
        .members()
        .map(|m| m.assigned.values().map(Vec::len).sum())
        .collect();
    assert_eq!(assigned, vec![1, 1, 1, 1]);
    // A steady heartbeat is told nothing new.
    let a = g
        .handle_heartbeat(beat("a", 4), &settings(), &image, T0)
        .unwrap();
    assert_eq!(a.assignment, None);
}

#[test]
fn epochs_are_checked_as_kafka_checks_them() {
    let image = Image::with(&[("t", 1)]);
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &settings(), &image, T0)
        .unwrap();
    g.handle_heartbeat(join("b", &["t"]), &settings(), &image, T0)
        .unwrap();
    let a = g
        .handle_heartbeat(beat("a", 1), &settings(), &image, T0)
        .unwrap();
    assert_eq!(a.member_epoch, 2);
    // The previous epoch is still accepted; one above, or older than the previous, is not.
    assert!(g
        .handle_heartbeat(beat("a", 1), &settings(), &image, T0)
        .is_ok());
    let e = g
        .handle_heartbeat(beat("a", 3), &settings(), &image, T0)
        .unwrap_err();
    assert_eq!(e.error, GroupError::FencedMemberEpoch);
    let e = g
        .handle_heartbeat(beat("x", 1), &settings(), &image, T0)
        .unwrap_err();
    assert_eq!(e.error, GroupError::UnknownMemberId);
    // Leaving: answered with epoch -1; leaving again is UNKNOWN_MEMBER_ID.
    let left = g
        .handle_heartbeat(beat("a", -1), &settings(), &image, T0)
        .unwrap();
    assert_eq!(left.member_epoch, -1);
    let e = g
        .handle_heartbeat(beat("a", -1), &settings(), &image, T0)
        .unwrap_err();
    assert_eq!(e.error, GroupError::UnknownMemberId);
}

#[test]
fn heartbeat_validation_and_the_size_limit() {
    let mut hb = join("", &["t"]);
    assert_eq!(
        group::validate("g", &hb).unwrap_err().message.as_deref(),
        Some("MemberId can't be empty.")
    );
    hb.member_id = MemberId::new("m");
    assert!(group::validate("", &hb).is_err());
    hb.subscribed_topic_names = Some(Vec::new());
    assert_eq!(
        group::validate("g", &hb).unwrap_err().message.as_deref(),
        Some("SubscribedTopicNames must be set in first request.")
    );
    hb.member_epoch = -2;
    assert!(group::validate("g", &hb).is_err());

    let image = Image::with(&[("t", 1)]);
    let small = ShareSettings {
        max_size: 1,
        ..settings()
    };
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &small, &image, T0)
        .unwrap();
    let e = g
        .handle_heartbeat(join("b", &["t"]), &small, &image, T0)
        .unwrap_err();
    assert_eq!(e.error, GroupError::GroupMaxSizeReached);
}

#[test]
fn session_epochs_follow_kafkas_share_sessions() {
    let image = Image::with(&[("t", 1)]);
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &settings(), &image, T0)
        .unwrap();
    // No session yet: an incremental request or a close is SHARE_SESSION_NOT_FOUND.
    let e = ack(&mut g, "a", 1, (0, 0, AckType::Accept)).unwrap_err();
    assert_eq!(e.error, GroupError::ShareSessionNotFound);
    let opened = open(&mut g, "a", &[("t", 0)]);
    assert!(opened.full);
    assert_eq!(opened.fetch, vec![(tid("t"), 0, None)]);
    // Acknowledgements cannot open a session; a wrong epoch is refused.
    let e = ack(&mut g, "a", 0, (0, 0, AckType::Accept)).unwrap_err();
    assert_eq!(e.error, GroupError::InvalidRequest);
    let e = ack(&mut g, "a", 2, (0, 0, AckType::Accept)).unwrap_err();
    assert_eq!(e.error, GroupError::InvalidShareSessionEpoch);
}

/// A session request of member `member` with broker `node`.
fn session_with(member: &str, node: i32, epoch: i32, fetch: &[(&str, i32)]) -> SessionRequest {
    SessionRequest {
        member_id: MemberId::new(member),
        node,
        connection: u64::try_from(node).unwrap(),
        session_epoch: epoch,
        fetch: Some(fetch.iter().map(|(t, p)| (tid(t), *p)).collect()),
        forgotten: Vec::new(),
        acks: Vec::new(),
    }
}

#[test]
fn a_member_keeps_a_session_per_broker_and_closing_one_releases_only_its_partitions() {
    // Gateway mode: the member fetches partition 0 from one upstream broker's port and 1
    // from another's, with a session (and session epochs) of its own on each.
    let image = Image::with(&[("t", 2)]);
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &settings(), &image, T0)
        .unwrap();
    for (node, partition) in [(1, 0), (2, 1)] {
        let opened = g
            .handle_session(
                session_with("a", node, 0, &[("t", partition)]),
                &settings(),
                T0,
            )
            .unwrap();
        assert_eq!(opened.fetch, vec![(tid("t"), partition, None)]);
    }
    for (node, partition) in [(1, 0), (2, 1)] {
        let got = g.acquire(
            &MemberId::new("a"),
            node,
            vec![read("t", partition, 0, 4)],
            500,
            AcquireMode::BatchOptimized,
            T0,
        );
        assert_eq!(
            got[0].2.len(),
            1,
            "partition {partition} through broker {node}"
        );
    }
    // Each session counts its own epochs.
    for node in [1, 2] {
        g.handle_session(session_with("a", node, 1, &[]), &settings(), T0)
            .unwrap();
    }
    // The session with broker 2 closes: partition 1's records come back, partition 0's stay
    // the member's, and its session with broker 1 goes on.
    g.handle_session(
        session_with("a", 2, FINAL_SESSION_EPOCH, &[]),
        &settings(),
        T0,
    )
    .unwrap();
    let state = |g: &ShareGroup, p: i32| {
        let (_, part) = g.partitions().find(|(k, _)| **k == (tid("t"), p)).unwrap();
        part.state_of(0).unwrap().state
    };
    assert_eq!(state(&g, 0), RecordState::Acquired);
    assert_eq!(state(&g, 1), RecordState::Available);
    assert_eq!(
        g.fetch_offsets(&MemberId::new("a"), 1),
        vec![(tid("t"), 0, Some(5))]
    );
    assert!(g.fetch_offsets(&MemberId::new("a"), 2).is_empty());
    g.handle_session(session_with("a", 1, 2, &[]), &settings(), T0)
        .unwrap();
    // A connection lost closes only the session it opened.
    g.handle_session_lost(&MemberId::new("a"), 1, 99, T0);
    assert_eq!(state(&g, 0), RecordState::Acquired);
    g.handle_session_lost(&MemberId::new("a"), 1, 1, T0);
    assert_eq!(state(&g, 0), RecordState::Available);
}

#[test]
fn acquired_records_are_acknowledged_durably_and_released_when_the_member_leaves() {
    let image = Image::with(&[("t", 1)]);
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &settings(), &image, T0)
        .unwrap();
    g.handle_heartbeat(join("b", &["t"]), &settings(), &image, T0)
        .unwrap();
    open(&mut g, "a", &[("t", 0)]);
    open(&mut g, "b", &[("t", 0)]);
    g.take_records();
    let got = g.acquire(
        &MemberId::new("a"),
        NODE,
        vec![read("t", 0, 0, 9)],
        500,
        AcquireMode::BatchOptimized,
        T0,
    );
    assert_eq!(got[0].2.len(), 1);
    assert_eq!((got[0].2[0].first, got[0].2[0].last), (0, 9));
    // b reads the same batch: nothing left for it.
    let got = g.acquire(
        &MemberId::new("b"),
        NODE,
        vec![read("t", 0, 0, 9)],
        500,
        AcquireMode::BatchOptimized,
        T0,
    );
    assert!(got[0].2.is_empty());
    // a accepts 0..4: stored before the answer; b cannot acknowledge what a holds.
    ack(&mut g, "a", 1, (0, 4, AckType::Accept)).unwrap();
    assert!(g
        .take_records()
        .iter()
        .any(|r| matches!(r, ShareRecord::Partition { state, .. } if state.start_offset == 5)));
    let refused = ack(&mut g, "b", 1, (5, 5, AckType::Accept)).unwrap();
    assert_eq!(
        refused.acks[0].2.unwrap_err().error,
        GroupError::InvalidRecordState
    );
    // a leaves: 5..9 are b's to take, delivered a second time.
    g.handle_heartbeat(beat("a", -1), &settings(), &image, T0)
        .unwrap();
    let again = g.acquire(
        &MemberId::new("b"),
        NODE,
        vec![read("t", 0, 5, 9)],
        500,
        AcquireMode::BatchOptimized,
        T0,
    );
    assert_eq!(again[0].2[0].delivery_count, 2);
    assert_eq!((again[0].2[0].first, again[0].2[0].last), (5, 9));
}

#[test]
fn closing_the_session_and_lock_timeouts_release_records() {
    let image = Image::with(&[("t", 1)]);
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &settings(), &image, T0)
        .unwrap();
    open(&mut g, "a", &[("t", 0)]);
    g.acquire(
        &MemberId::new("a"),
        NODE,
        vec![read("t", 0, 0, 3)],
        500,
        AcquireMode::BatchOptimized,
        T0,
    );
    // The lock runs out: available again, offered from offset 0.
    let deadline = g.next_deadline().unwrap();
    assert!(deadline <= T0.plus_ms(30_000));
    g.handle_timeout(&image, T0.plus_ms(30_000));
    assert_eq!(
        g.fetch_offsets(&MemberId::new("a"), NODE),
        vec![(tid("t"), 0, Some(0))]
    );
    let got = g.acquire(
        &MemberId::new("a"),
        NODE,
        vec![read("t", 0, 0, 3)],
        500,
        AcquireMode::BatchOptimized,
        T0.plus_ms(30_000),
    );
    assert_eq!(got[0].2[0].delivery_count, 2);
    // Closing the session gives them back and ends the session.
    let closed = g
        .handle_session(
            SessionRequest {
                member_id: MemberId::new("a"),
                node: NODE,
                connection: 1,
                session_epoch: FINAL_SESSION_EPOCH,
                fetch: None,
                forgotten: Vec::new(),
                acks: Vec::new(),
            },
            &settings(),
            T0.plus_ms(30_001),
        )
        .unwrap();
    assert!(closed.fetch.is_empty());
    assert!(g.fetch_offsets(&MemberId::new("a"), NODE).is_empty());
    assert!(g
        .acquire(
            &MemberId::new("a"),
            NODE,
            vec![read("t", 0, 0, 3)],
            500,
            AcquireMode::BatchOptimized,
            T0
        )
        .is_empty());
}

#[test]
fn a_member_whose_session_expires_is_fenced() {
    let image = Image::with(&[("t", 1)]);
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &settings(), &image, T0)
        .unwrap();
    g.take_events();
    g.handle_timeout(&image, T0.plus_ms(60_000));
    assert_eq!(g.state(), ShareGroupState::Empty);
    assert!(g
        .take_events()
        .iter()
        .any(|e| matches!(e, ShareEvent::Fenced { member, .. } if member.as_str() == "a")));
    assert!(g.delete().is_ok());
}

#[test]
fn the_group_comes_back_from_its_records() {
    let image = Image::with(&[("t", 1)]);
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &settings(), &image, T0)
        .unwrap();
    open(&mut g, "a", &[("t", 0)]);
    g.acquire(
        &MemberId::new("a"),
        NODE,
        vec![read("t", 0, 0, 9)],
        500,
        AcquireMode::BatchOptimized,
        T0,
    );
    ack(&mut g, "a", 1, (0, 2, AckType::Accept)).unwrap();
    let stored: Vec<_> = g
        .take_records()
        .into_iter()
        .map(codec::change)
        .filter_map(|c| match c {
            crate::vocab::stored::RecordChange::Put(r) => Some(r),
            _ => None,
        })
        .fold(
            Vec::<crate::vocab::stored::StoredRecord>::new(),
            |mut acc, r| {
                acc.retain(|o| o.key != r.key);
                acc.push(r);
                acc
            },
        );
    // Restored with `settings`, `a` reopens its session and acquires from `read`'s records:
    // where the group reads next, and what `a` got (first, last, delivery count).
    let restart = |settings: ShareSettings, read_to: i64| {
        let (record, members, partitions) = codec::restore(&stored).unwrap().unwrap();
        let mut back =
            ShareGroup::from_records(GroupId::new("g"), settings, record, members, partitions, T0);
        assert_eq!(back.group_epoch(), g.group_epoch());
        assert_eq!(back.members().count(), 1);
        open(&mut back, "a", &[("t", 0)]);
        let next = back.fetch_offsets(&MemberId::new("a"), NODE);
        let got = back.acquire(
            &MemberId::new("a"),
            NODE,
            vec![read("t", 0, 0, read_to)],
            500,
            AcquireMode::BatchOptimized,
            T0,
        );
        let a = &got[0].2[0];
        (next, (a.first, a.last, a.delivery_count))
    };
    // koord's own logs live in memory: after a restart the partitions start over at 0 of the
    // new logs, whatever they had acknowledged (the records are gone, and offset 3 of a new log
    // is a new record).
    let lost = ShareSettings {
        logs_kept: false,
        ..settings()
    };
    assert_eq!(restart(lost, 4), (vec![(tid("t"), 0, Some(0))], (0, 4, 1)));
    // Behind a Kafka whose logs outlive koord, the stored states go on: nothing acknowledged
    // comes again; what was acquired and not acknowledged does.
    assert_eq!(
        restart(settings(), 9),
        (vec![(tid("t"), 0, Some(3))], (3, 9, 2))
    );
}

#[test]
fn a_read_older_than_another_members_acquisition_changes_nothing_of_it() {
    // Two members share a partition while records are appended: b read the log when it held
    // offsets 0-4; before b's acquisition reached the group, a read and acquired 0-9. b's older
    // read must not touch a's records (it once started the partition over, and the records
    // went out again with delivery count 1).
    let image = Image::with(&[("t", 1)]);
    let mut g = group();
    for m in ["a", "b"] {
        g.handle_heartbeat(join(m, &["t"]), &settings(), &image, T0)
            .unwrap();
        open(&mut g, m, &[("t", 0)]);
    }
    let acquire = |g: &mut ShareGroup, m: &str, last: i64| {
        g.acquire(
            &MemberId::new(m),
            NODE,
            vec![read("t", 0, 0, last)],
            500,
            AcquireMode::BatchOptimized,
            T0,
        )
    };
    let a = acquire(&mut g, "a", 9);
    assert_eq!((a[0].2[0].first, a[0].2[0].last), (0, 9));
    let first = ack(&mut g, "a", 1, (0, 2, AckType::Accept)).unwrap();
    assert!(first.acks[0].2.is_ok(), "{first:?}");
    assert!(acquire(&mut g, "b", 4)[0].2.is_empty());
    // a's other records are still a's, and it accepts them.
    let rest = ack(&mut g, "a", 2, (3, 9, AckType::Accept)).unwrap();
    assert!(rest.acks[0].2.is_ok(), "{rest:?}");
    assert_eq!(
        g.fetch_offsets(&MemberId::new("b"), NODE),
        vec![(tid("t"), 0, Some(10))]
    );
}

#[test]
fn offsets_are_altered_and_deleted_only_while_the_group_is_empty() {
    let image = Image::with(&[("t", 2), ("u", 1)]);
    let mut g = group();
    // An Empty (new) group: each partition starts over where it is told, and is stored.
    g.alter_offsets(&[(tid("t"), 0, 7), (tid("t"), 1, 0), (tid("u"), 0, 3)])
        .unwrap();
    let records = g.take_records();
    assert!(matches!(records[0], ShareRecord::Group(_)), "{records:?}");
    let stored: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            ShareRecord::Partition {
                topic,
                partition,
                state,
            } => Some((*topic, *partition, state.start_offset)),
            _ => None,
        })
        .collect();
    assert_eq!(
        stored,
        vec![(tid("t"), 0, 7), (tid("t"), 1, 0), (tid("u"), 0, 3)]
    );
    // A negative offset: the partition's state goes (share.auto.offset.reset applies again).
    g.alter_offsets(&[(tid("t"), 1, -1)]).unwrap();
    assert!(g.take_records().iter().any(|r| matches!(
        r,
        ShareRecord::RemovePartition { topic, partition: 1 } if *topic == tid("t")
    )));
    // Delete: per topic, whether the group had state for it.
    assert_eq!(
        g.delete_offsets(&[tid("u"), tid("x")]),
        Ok(vec![true, false])
    );
    assert_eq!(
        g.partitions()
            .map(|(k, p)| (*k, p.start_offset()))
            .collect::<Vec<_>>(),
        vec![((tid("t"), 0), 7)]
    );
    // A member joins: neither is allowed while it is there.
    g.handle_heartbeat(join("a", &["t"]), &settings(), &image, T0)
        .unwrap();
    assert_eq!(
        g.alter_offsets(&[(tid("t"), 0, 0)]),
        Err(GroupError::NonEmptyGroup)
    );
    assert_eq!(
        g.delete_offsets(&[tid("t")]),
        Err(GroupError::NonEmptyGroup)
    );
    open(&mut g, "a", &[("t", 0)]);
    assert_eq!(
        g.fetch_offsets(&MemberId::new("a"), NODE),
        vec![(tid("t"), 0, Some(7))]
    );
}

#[test]
fn after_a_failed_write_the_group_is_stored_whole_over_a_cleared_slate() {
    // The failed write carried a member's departure and a partition's removal: the next write
    // clears the group's stored records first, so neither comes back from the store.
    let image = Image::with(&[("t", 2)]);
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &settings(), &image, T0)
        .unwrap();
    g.handle_heartbeat(join("b", &["t"]), &settings(), &image, T0)
        .unwrap();
    open(&mut g, "a", &[("t", 0), ("t", 1)]);
    for p in [0, 1] {
        g.acquire(
            &MemberId::new("a"),
            NODE,
            vec![read("t", p, 0, 3)],
            500,
            AcquireMode::BatchOptimized,
            T0,
        );
    }
    g.handle_heartbeat(beat("b", -1), &settings(), &image, T0)
        .unwrap();
    g.take_records(); // the write that fails
    g.handle_write_failed();
    let records = g.take_records();
    assert!(
        matches!(records.first(), Some(ShareRecord::Clear)),
        "{records:?}"
    );
    let changes: Vec<_> = records.into_iter().map(codec::change).collect();
    assert_eq!(changes[0], crate::vocab::stored::RecordChange::Clear);
    let members: Vec<_> = changes
        .iter()
        .filter_map(|c| match c {
            crate::vocab::stored::RecordChange::Put(r)
                if !r.is_group() && !r.key.starts_with('\0') =>
            {
                Some(r.key.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(members, vec!["a".to_string()]);
    assert_eq!(
        crate::storage::Mutation::group_record(GroupId::new("g"), changes[0].clone()),
        crate::storage::Mutation::ClearGroupRecords {
            group: GroupId::new("g")
        }
    );
}

/// A group with a dead-letter queue: a REJECT makes the records Archiving and hands them to the
/// shell once; reported written, they are Archived and stored so. The settings of each request
/// apply to the partitions it finds (the queue set after the partition was first read).
#[test]
fn rejected_records_go_to_the_shell_for_the_dead_letter_queue_then_are_archived() {
    let image = Image::with(&[("t", 1)]);
    let mut g = group();
    g.handle_heartbeat(join("a", &["t"]), &settings(), &image, T0)
        .unwrap();
    open(&mut g, "a", &[("t", 0)]);
    g.acquire(
        &MemberId::new("a"),
        NODE,
        vec![read("t", 0, 0, 9)],
        500,
        AcquireMode::BatchOptimized,
        T0,
    );
    let mut dlq = settings();
    dlq.partition.dead_letter = true;
    let answer = g
        .handle_session(
            SessionRequest {
                member_id: MemberId::new("a"),
                node: NODE,
                connection: 1,
                session_epoch: 1,
                fetch: None,
                forgotten: Vec::new(),
                acks: vec![PartitionAcks {
                    topic: tid("t"),
                    partition: 0,
                    batches: vec![AckBatch {
                        first: 0,
                        last: 9,
                        types: vec![AckType::Reject],
                    }],
                }],
            },
            &dlq,
            T0,
        )
        .unwrap();
    assert!(answer.acks[0].2.is_ok());
    let letters = g.take_dead_letters();
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (
            letters[0].topic,
            letters[0].partition,
            letters[0].letters.len()
        ),
        (tid("t"), 0, 1)
    );
    assert!(g.take_dead_letters().is_empty(), "handed out once");
    let state = |g: &ShareGroup| {
        let (_, part) = g.partitions().next().unwrap();
        (part.start_offset(), part.state_of(0).map(|s| s.state))
    };
    assert_eq!(state(&g), (0, Some(RecordState::Archiving)));
    g.take_records();
    g.dead_lettered(tid("t"), 0, 0, 9);
    assert_eq!(state(&g), (10, None));
    assert!(g
        .take_records()
        .iter()
        .any(|r| matches!(r, ShareRecord::Partition { state, .. } if state.start_offset == 10)));
}
