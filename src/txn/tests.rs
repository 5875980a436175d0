//! Every transition and error of the transaction coordinator, with a manual clock.

use super::*;

/// The coordinator, a manual clock and a producer id counter.
struct Ctx {
    txn: TxnCoordinator,
    now: Timestamp,
    next_id: i64,
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

fn pe(producer_id: i64, epoch: i16) -> ProducerIdAndEpoch {
    ProducerIdAndEpoch { producer_id, epoch }
}

impl Ctx {
    fn new() -> Ctx {
        Ctx {
            txn: TxnCoordinator::new(DEFAULT_MAX_TIMEOUT_MS),
            now: Timestamp(1_000_000),
            next_id: 100,
        }
    }

    fn sleep(&mut self, ms: u64) {
        self.now = self.now.plus_ms(ms);
    }

    fn init_with(
        &mut self,
        id: &str,
        timeout_ms: i32,
        expected: Option<ProducerIdAndEpoch>,
    ) -> Result<Init, TxnError> {
        let next = &mut self.next_id;
        let mut alloc = || {
            *next += 1;
            Some(*next)
        };
        self.txn.init_producer(
            &InitProducer {
                transactional_id: id.into(),
                timeout_ms,
                expected,
            },
            self.now,
            &mut alloc,
        )
    }

    /// InitProducerId that must succeed: (producer id, epoch).
    fn init(&mut self, id: &str) -> ProducerIdAndEpoch {
        match self.init_with(id, 60_000, None) {
            Ok(Init::Ready(r)) => pe(r.producer_id, r.producer_epoch),
            other => panic!("{other:?}"),
        }
    }

    fn add(&mut self, id: &str, p: ProducerIdAndEpoch, parts: &[TopicPartition]) {
        self.txn
            .add_partitions(id, p, parts, self.now)
            .expect("add partitions");
    }

    /// EndTxn at `tv2` (v5+) or below.
    fn end_at(
        &mut self,
        id: &str,
        p: ProducerIdAndEpoch,
        commit: bool,
        tv2: bool,
    ) -> Result<End, TxnError> {
        let next = &mut self.next_id;
        let mut alloc = || {
            *next += 1;
            Some(*next)
        };
        let end = EndTxn {
            transactional_id: id,
            producer: p,
            commit,
            tv2,
        };
        self.txn.end_txn(&end, self.now, &mut alloc)
    }

    /// EndTxn below v5.
    fn end_v1(&mut self, id: &str, p: ProducerIdAndEpoch, commit: bool) -> Result<End, TxnError> {
        self.end_at(id, p, commit, false)
    }

    fn end(&mut self, id: &str, p: ProducerIdAndEpoch, commit: bool) -> Markers {
        match self.end_v1(id, p, commit) {
            Ok(End::Prepared(e)) => e.markers,
            other => panic!("{other:?}"),
        }
    }

    fn state(&self, id: &str) -> TxnState {
        self.txn.get(id).expect("known id").state
    }
}

#[test]
fn init_producer_new_id_gets_a_fresh_producer_id_at_epoch_0() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    assert_eq!(p, pe(101, 0));
    assert_eq!(c.state("tx"), TxnState::Empty);
}

#[test]
fn init_producer_known_id_bumps_the_epoch_and_keeps_the_id() {
    let mut c = Ctx::new();
    let first = c.init("tx");
    let second = c.init("tx");
    assert_eq!(second, pe(first.producer_id, 1));
}

#[test]
fn init_producer_without_a_producer_id_to_hand_out_is_refused_and_keeps_nothing() {
    let mut c = Ctx::new();
    let req = InitProducer {
        transactional_id: "tx".into(),
        timeout_ms: 60_000,
        expected: None,
    };
    assert_eq!(
        c.txn.init_producer(&req, c.now, &mut || None),
        Err(TxnError::ProducerIdsPending)
    );
    assert!(
        c.txn.get("tx").is_none(),
        "no transactional id without a producer id"
    );
    // Asked again once ids are there, it is a new producer at epoch 0.
    assert_eq!(c.init("tx"), pe(101, 0));
}

#[test]
fn init_producer_empty_id_is_invalid_request() {
    let mut c = Ctx::new();
    assert_eq!(c.init_with("", 1000, None), Err(TxnError::InvalidRequest));
}

#[test]
fn init_producer_timeout_out_of_bounds_is_invalid_transaction_timeout() {
    let mut c = Ctx::new();
    for t in [0, -1, DEFAULT_MAX_TIMEOUT_MS + 1] {
        assert_eq!(
            c.init_with("tx", t, None),
            Err(TxnError::InvalidTransactionTimeout)
        );
    }
    assert!(c.txn.get("tx").is_none(), "nothing created");
}

#[test]
fn init_producer_while_ongoing_fences_and_aborts_then_concurrent_transactions() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    c.add("tx", p, &[tp("a", 0)]);
    let Ok(Init::Fenced { record, markers }) = c.init_with("tx", 60_000, None) else {
        panic!("fence");
    };
    assert_eq!(record.state, TxnState::PrepareAbort);
    assert_eq!(record.producer_epoch, 1, "aborted under a bumped epoch");
    assert!(!markers.commit);
    assert_eq!(markers.partitions, vec![tp("a", 0)]);
    assert_eq!(markers.producer_epoch, 1);
    // While the abort is written: CONCURRENT_TRANSACTIONS.
    assert_eq!(
        c.init_with("tx", 60_000, None),
        Err(TxnError::ConcurrentTransactions)
    );
    // The old producer is fenced at once.
    assert_eq!(
        c.txn.add_partitions("tx", p, &[tp("a", 1)], c.now),
        Err(TxnError::ProducerFenced)
    );
    assert!(c.txn.complete(&markers, c.now).is_some());
    assert_eq!(c.state("tx"), TxnState::CompleteAbort);
    assert_eq!(c.init("tx"), pe(p.producer_id, 2));
}

#[test]
fn init_producer_kip360_expected_epoch_bumps_and_a_retry_gets_the_same_epoch() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    let Ok(Init::Ready(r)) = c.init_with("tx", 60_000, Some(p)) else {
        panic!()
    };
    assert_eq!((r.producer_id, r.producer_epoch), (p.producer_id, 1));
    // The answer was lost; the producer retries with its old epoch.
    let Ok(Init::Ready(again)) = c.init_with("tx", 60_000, Some(p)) else {
        panic!()
    };
    assert_eq!(again.producer_epoch, 1);
}

#[test]
fn init_producer_kip360_stale_epoch_or_other_id_is_producer_fenced() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    c.init("tx"); // epoch 1, last epoch -1: epoch 0 is no longer a retry
    assert_eq!(
        c.init_with("tx", 60_000, Some(p)),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        c.init_with("tx", 60_000, Some(pe(p.producer_id + 7, 1))),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn init_producer_exhausted_epoch_rotates_the_producer_id() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    c.txn.txns.get_mut("tx").unwrap().producer_epoch = i16::MAX - 1;
    let next = c.init("tx");
    assert_ne!(next.producer_id, p.producer_id);
    assert_eq!(next.epoch, 0);
    assert_eq!(c.txn.get("tx").unwrap().previous_producer_id, p.producer_id);
}

#[test]
fn init_producer_kip360_retry_from_the_rotated_id_is_accepted() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    c.txn.txns.get_mut("tx").unwrap().producer_epoch = i16::MAX - 1;
    let old = pe(p.producer_id, i16::MAX - 1);
    let Ok(Init::Ready(rotated)) = c.init_with("tx", 60_000, Some(old)) else {
        panic!()
    };
    assert_eq!(rotated.producer_epoch, 0);
    assert_eq!(rotated.last_producer_epoch, i16::MAX - 1);
    // Same request again (answer lost): the previous id with an exhausted epoch is valid.
    assert!(matches!(
        c.init_with("tx", 60_000, Some(old)),
        Ok(Init::Ready(_))
    ));
}

#[test]
fn init_producer_while_preparing_is_concurrent_transactions() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    c.add("tx", p, &[tp("a", 0)]);
    c.end("tx", p, true);
    assert_eq!(
        c.init_with("tx", 60_000, None),
        Err(TxnError::ConcurrentTransactions)
    );
}

#[test]
fn add_partitions_opens_the_transaction_and_records_its_start() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    c.sleep(5);
    let rec = c
        .txn
        .add_partitions("tx", p, &[tp("a", 0), tp("b", 1)], c.now)
        .unwrap()
        .expect("a record");
    assert_eq!(rec.state, TxnState::Ongoing);
    assert_eq!(rec.started, c.now);
    assert_eq!(rec.partitions.len(), 2);
    c.sleep(5);
    let more = c
        .txn
        .add_partitions("tx", p, &[tp("a", 1)], c.now)
        .unwrap()
        .unwrap();
    assert_eq!(more.started, rec.started, "start kept while open");
    assert_eq!(more.partitions.len(), 3);
}

#[test]
fn add_partitions_already_added_needs_no_record() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    c.add("tx", p, &[tp("a", 0)]);
    assert_eq!(
        c.txn.add_partitions("tx", p, &[tp("a", 0)], c.now),
        Ok(None)
    );
}

#[test]
fn add_partitions_unknown_id_or_other_producer_is_invalid_producer_id_mapping() {
    let mut c = Ctx::new();
    assert_eq!(
        c.txn.add_partitions("nope", pe(1, 0), &[tp("a", 0)], c.now),
        Err(TxnError::InvalidProducerIdMapping)
    );
    let p = c.init("tx");
    assert_eq!(
        c.txn
            .add_partitions("tx", pe(p.producer_id + 1, 0), &[tp("a", 0)], c.now),
        Err(TxnError::InvalidProducerIdMapping)
    );
}

#[test]
fn add_partitions_old_epoch_is_producer_fenced() {
    let mut c = Ctx::new();
    let old = c.init("tx");
    c.init("tx");
    assert_eq!(
        c.txn.add_partitions("tx", old, &[tp("a", 0)], c.now),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn add_partitions_while_preparing_is_concurrent_transactions() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    c.add("tx", p, &[tp("a", 0)]);
    c.end("tx", p, false);
    assert_eq!(
        c.txn.add_partitions("tx", p, &[tp("a", 0)], c.now),
        Err(TxnError::ConcurrentTransactions)
    );
}

#[test]
fn add_partitions_empty_id_is_invalid_request() {
    let mut c = Ctx::new();
    assert_eq!(
        c.txn.add_partitions("", pe(1, 0), &[], c.now),
        Err(TxnError::InvalidRequest)
    );
}

#[test]
fn add_offsets_adds_the_group_and_opens_the_transaction() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    let rec = c.txn.add_offsets("tx", p, "g", c.now).unwrap().unwrap();
    assert_eq!(rec.state, TxnState::Ongoing);
    assert!(rec.groups.contains("g"));
    assert_eq!(c.txn.add_offsets("tx", p, "g", c.now), Ok(None));
    let m = c.end("tx", p, true);
    assert_eq!(m.groups, vec!["g".to_string()]);
}

#[test]
fn end_txn_commit_prepares_then_complete_commits() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    c.add("tx", p, &[tp("a", 0)]);
    let m = c.end("tx", p, true);
    assert!(m.commit);
    assert_eq!((m.producer_id, m.producer_epoch), (p.producer_id, p.epoch));
    assert_eq!(c.state("tx"), TxnState::PrepareCommit);
    let done = c.txn.complete(&m, c.now).expect("completed");
    assert_eq!(done.state, TxnState::CompleteCommit);
    assert!(done.partitions.is_empty());
    assert!(
        c.txn.complete(&m, c.now).is_none(),
        "a second completion changes nothing"
    );
}

#[test]
fn end_txn_abort_prepares_then_complete_aborts() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    c.add("tx", p, &[tp("a", 0)]);
    let m = c.end("tx", p, false);
    assert!(!m.commit);
    assert_eq!(c.state("tx"), TxnState::PrepareAbort);
    c.txn.complete(&m, c.now).unwrap();
    assert_eq!(c.state("tx"), TxnState::CompleteAbort);
}

#[test]
fn end_txn_retry_of_a_completed_end_is_already_done() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    c.add("tx", p, &[tp("a", 0)]);
    let m = c.end("tx", p, true);
    assert_eq!(
        c.end_v1("tx", p, true),
        Err(TxnError::ConcurrentTransactions),
        "while the markers are written"
    );
    c.txn.complete(&m, c.now);
    assert_eq!(c.end_v1("tx", p, true), Ok(End::AlreadyDone(p)));
}

#[test]
fn end_txn_other_end_or_empty_is_invalid_txn_state() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    assert_eq!(
        c.end_v1("tx", p, true),
        Err(TxnError::InvalidTxnState),
        "nothing open"
    );
    c.add("tx", p, &[tp("a", 0)]);
    let m = c.end("tx", p, true);
    assert_eq!(c.end_v1("tx", p, false), Err(TxnError::InvalidTxnState));
    c.txn.complete(&m, c.now);
    assert_eq!(c.end_v1("tx", p, false), Err(TxnError::InvalidTxnState));
}

#[test]
fn end_txn_fenced_or_unknown_producer() {
    let mut c = Ctx::new();
    let old = c.init("tx");
    let new = c.init("tx");
    c.add("tx", new, &[tp("a", 0)]);
    assert_eq!(c.end_v1("tx", old, true), Err(TxnError::ProducerFenced));
    assert_eq!(
        c.end_v1("tx", pe(9, 0), true),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(
        c.end_v1("other", new, true),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(c.end_v1("", new, true), Err(TxnError::InvalidRequest));
}

#[test]
fn next_transaction_after_commit_starts_fresh() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    c.add("tx", p, &[tp("a", 0)]);
    let m = c.end("tx", p, true);
    c.txn.complete(&m, c.now);
    c.sleep(10);
    let rec = c
        .txn
        .add_partitions("tx", p, &[tp("b", 0)], c.now)
        .unwrap()
        .unwrap();
    assert_eq!(rec.partitions.iter().collect::<Vec<_>>(), vec![&tp("b", 0)]);
    assert_eq!(rec.started, c.now);
}

#[test]
fn timeout_aborts_with_a_bumped_epoch_only_once_past_the_deadline() {
    let mut c = Ctx::new();
    let Ok(Init::Ready(r)) = c.init_with("tx", 1_000, None) else {
        panic!()
    };
    let p = pe(r.producer_id, r.producer_epoch);
    c.add("tx", p, &[tp("a", 0)]);
    c.sleep(1_000);
    assert!(c.txn.abort_timed_out(c.now).is_empty(), "not yet");
    c.sleep(1);
    let aborted = c.txn.abort_timed_out(c.now);
    assert_eq!(aborted.len(), 1);
    let (record, markers) = &aborted[0];
    assert_eq!(record.state, TxnState::PrepareAbort);
    assert_eq!(markers.producer_epoch, p.epoch + 1);
    assert!(!markers.commit);
    assert!(c.txn.abort_timed_out(c.now).is_empty(), "aborted once");
    c.txn.complete(markers, c.now);
    assert_eq!(c.state("tx"), TxnState::CompleteAbort);
    assert_eq!(
        c.end_v1("tx", p, true),
        Err(TxnError::ProducerFenced),
        "the timed-out producer is fenced"
    );
}

#[test]
fn timeout_leaves_idle_ids_alone() {
    let mut c = Ctx::new();
    c.init_with("tx", 1, None).unwrap();
    c.sleep(10_000);
    assert!(c.txn.abort_timed_out(c.now).is_empty());
}

#[test]
fn expire_ids_forgets_idle_ids_after_the_expiration() {
    let mut c = Ctx::new();
    c.init("idle");
    let p = c.init("open");
    c.add("open", p, &[tp("a", 0)]);
    c.sleep(999);
    assert!(c.txn.expire_ids(c.now, 1_000).is_empty());
    c.sleep(1);
    assert_eq!(c.txn.expire_ids(c.now, 1_000), vec!["idle".to_string()]);
    assert!(c.txn.get("idle").is_none());
    assert!(c.txn.get("open").is_some(), "an open transaction stays");
    assert_eq!(c.init("idle").epoch, 0, "a forgotten id starts over");
}

#[test]
fn verify_needs_the_partition_in_the_open_transaction() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    let a = tp("a", 0);
    assert_eq!(
        c.txn.verify("tx", p, Member::Partition(&a)),
        Err(TxnError::NotInTransaction)
    );
    c.add("tx", p, std::slice::from_ref(&a));
    assert_eq!(c.txn.verify("tx", p, Member::Partition(&a)), Ok(()));
    assert_eq!(
        c.txn.verify("tx", p, Member::Partition(&tp("a", 1))),
        Err(TxnError::NotInTransaction)
    );
    assert_eq!(
        c.txn.verify("tx", p, Member::Group("g")),
        Err(TxnError::NotInTransaction)
    );
    assert_eq!(
        c.txn
            .verify("tx", pe(p.producer_id, 5), Member::Partition(&a)),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        c.txn.verify("zz", p, Member::Partition(&a)),
        Err(TxnError::InvalidProducerIdMapping)
    );
}

#[test]
fn load_returns_the_markers_of_preparing_transactions_and_keeps_ongoing_ones() {
    let mut c = Ctx::new();
    let p = c.init("commit");
    c.add("commit", p, &[tp("a", 0)]);
    c.end("commit", p, true);
    let q = c.init("open");
    c.add("open", q, &[tp("b", 0)]);
    let records: Vec<TxnRecord> = ["commit", "open"]
        .iter()
        .map(|id| c.txn.get(id).unwrap().clone())
        .collect();
    let mut loaded = TxnCoordinator::new(DEFAULT_MAX_TIMEOUT_MS);
    let pending = loaded.load(records);
    assert_eq!(pending.len(), 1);
    assert!(pending[0].commit);
    assert_eq!(pending[0].partitions, vec![tp("a", 0)]);
    loaded.complete(&pending[0], c.now).unwrap();
    assert_eq!(
        loaded.get("commit").unwrap().state,
        TxnState::CompleteCommit
    );
    assert_eq!(loaded.get("open").unwrap().state, TxnState::Ongoing);
}

#[test]
fn revert_restores_the_previous_state_unless_it_changed_again() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    let before = c.txn.get("tx").cloned();
    let added = c
        .txn
        .add_partitions("tx", p, &[tp("a", 0)], c.now)
        .unwrap()
        .unwrap();
    c.txn.revert(&added, before.clone());
    assert_eq!(c.txn.get("tx"), before.as_ref(), "back to Empty");
    // A retry after the failed write adds the partition again (not "already added").
    c.sleep(1);
    let again = c.txn.add_partitions("tx", p, &[tp("a", 0)], c.now).unwrap();
    assert!(again.is_some());
    // A revert of an older write changes nothing once the state moved on.
    c.txn.revert(&added, before);
    assert_eq!(c.state("tx"), TxnState::Ongoing);
    // A new id whose first record failed is forgotten.
    let Ok(Init::Ready(fresh)) = c.init_with("new", 60_000, None) else {
        panic!()
    };
    c.txn.revert(&fresh, None);
    assert!(c.txn.get("new").is_none());
}

fn list(ctx: &Ctx, filter: &ListFilter<'_>) -> Vec<(String, TxnState)> {
    ctx.txn
        .list(filter, ctx.now)
        .txns
        .into_iter()
        .map(|l| (l.transactional_id, l.state))
        .collect()
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_string()).collect()
}

#[test]
fn describe_new_id_is_empty_without_start_time() {
    let mut ctx = Ctx::new();
    let p = ctx.init("tx");
    let d = ctx.txn.describe("tx").unwrap();
    assert_eq!(
        d,
        Description {
            state: TxnState::Empty,
            timeout_ms: 60_000,
            start_ms: -1,
            producer_id: p.producer_id,
            producer_epoch: p.epoch,
            partitions: Vec::new(),
        }
    );
}

#[test]
fn describe_ongoing_shows_start_time_and_partitions() {
    let mut ctx = Ctx::new();
    let p = ctx.init("tx");
    ctx.sleep(5);
    let started = ctx.now;
    ctx.add("tx", p, &[tp("b", 1), tp("a", 0), tp("b", 0)]);
    ctx.sleep(5);
    ctx.add("tx", p, &[tp("a", 0)]);
    let d = ctx.txn.describe("tx").unwrap();
    assert_eq!(d.state, TxnState::Ongoing);
    assert_eq!(d.start_ms, started.as_millis() as i64);
    assert_eq!(d.partitions, vec![tp("a", 0), tp("b", 0), tp("b", 1)]);
}

#[test]
fn describe_completed_keeps_start_time_and_drops_partitions_until_reinit() {
    let mut ctx = Ctx::new();
    let p = ctx.init("tx");
    let started = ctx.now;
    ctx.add("tx", p, &[tp("a", 0)]);
    let m = ctx.end("tx", p, true);
    assert_eq!(
        ctx.txn.describe("tx").unwrap().state,
        TxnState::PrepareCommit
    );
    ctx.sleep(10);
    ctx.txn.complete(&m, ctx.now).unwrap();
    let d = ctx.txn.describe("tx").unwrap();
    assert_eq!(d.state, TxnState::CompleteCommit);
    assert_eq!(d.start_ms, started.as_millis() as i64);
    assert!(d.partitions.is_empty());
    let q = ctx.init("tx");
    let d = ctx.txn.describe("tx").unwrap();
    assert_eq!(
        (d.state, d.start_ms, d.producer_epoch),
        (TxnState::Empty, -1, q.epoch)
    );
}

#[test]
fn describe_unknown_id_is_transactional_id_not_found_and_empty_id_invalid_request() {
    let ctx = Ctx::new();
    assert_eq!(
        ctx.txn.describe("nope"),
        Err(TxnError::TransactionalIdNotFound)
    );
    assert_eq!(ctx.txn.describe(""), Err(TxnError::InvalidRequest));
}

#[test]
fn list_without_filters_lists_every_id_sorted() {
    let mut ctx = Ctx::new();
    ctx.init("b");
    ctx.init("a");
    assert_eq!(
        list(
            &ctx,
            &ListFilter {
                min_duration_ms: -1,
                ..ListFilter::default()
            }
        ),
        vec![("a".into(), TxnState::Empty), ("b".into(), TxnState::Empty)]
    );
}

#[test]
fn list_state_filter_reports_unknown_names_and_ignores_them() {
    let mut ctx = Ctx::new();
    let p = ctx.init("open");
    ctx.add("open", p, &[tp("t", 0)]);
    ctx.init("idle");
    let states = names(&["Ongoing", "Bogus", "Bogus", "Dead"]);
    let filter = ListFilter {
        states: &states,
        min_duration_ms: -1,
        ..ListFilter::default()
    };
    let listing = ctx.txn.list(&filter, ctx.now);
    assert_eq!(listing.unknown_states, names(&["Bogus"]), "Dead is Kafka's");
    assert_eq!(
        list(&ctx, &filter),
        vec![("open".into(), TxnState::Ongoing)]
    );
}

#[test]
fn list_state_filter_of_only_unknown_names_matches_nothing() {
    let mut ctx = Ctx::new();
    ctx.init("tx");
    let states = names(&["Bogus"]);
    let filter = ListFilter {
        states: &states,
        min_duration_ms: -1,
        ..ListFilter::default()
    };
    assert!(list(&ctx, &filter).is_empty());
}

#[test]
fn list_producer_id_filter_keeps_those_producers() {
    let mut ctx = Ctx::new();
    let a = ctx.init("a");
    ctx.init("b");
    let ids = [a.producer_id, 999];
    let filter = ListFilter {
        producer_ids: &ids,
        min_duration_ms: -1,
        ..ListFilter::default()
    };
    assert_eq!(list(&ctx, &filter), vec![("a".into(), TxnState::Empty)]);
}

#[test]
fn list_duration_filter_keeps_transactions_running_longer_and_every_empty_id() {
    let mut ctx = Ctx::new();
    let p = ctx.init("old");
    ctx.add("old", p, &[tp("t", 0)]);
    ctx.sleep(1_000);
    let q = ctx.init("young");
    ctx.add("young", q, &[tp("t", 0)]);
    ctx.init("idle");
    ctx.sleep(10);
    let filter = ListFilter {
        min_duration_ms: 500,
        ..ListFilter::default()
    };
    assert_eq!(
        list(&ctx, &filter),
        vec![
            ("idle".into(), TxnState::Empty),
            ("old".into(), TxnState::Ongoing)
        ],
        "an Empty id has no start time: Kafka counts it as running since -1"
    );
    let exact = ListFilter {
        min_duration_ms: 1_010,
        ..ListFilter::default()
    };
    assert_eq!(
        list(&ctx, &exact),
        vec![("idle".into(), TxnState::Empty)],
        "strictly longer"
    );
}

#[test]
fn list_pattern_filter_keeps_matching_ids() {
    let mut ctx = Ctx::new();
    ctx.init("app-1");
    ctx.init("app-2");
    ctx.init("other");
    let re = regex::Regex::new("^(?:app-.*)$").unwrap();
    let filter = ListFilter {
        pattern: Some(&re),
        min_duration_ms: -1,
        ..ListFilter::default()
    };
    assert_eq!(
        list(&ctx, &filter),
        vec![
            ("app-1".into(), TxnState::Empty),
            ("app-2".into(), TxnState::Empty)
        ]
    );
}

// Transaction version 2 (EndTxn v5): Kafka 4.4's `TransactionCoordinator.endTransaction` with
// a client transaction version that bumps the epoch.

impl Ctx {
    /// EndTxn v5 that must prepare: its markers and the answer's producer id and epoch.
    fn end_v2(
        &mut self,
        id: &str,
        p: ProducerIdAndEpoch,
        commit: bool,
    ) -> (Markers, ProducerIdAndEpoch) {
        match self.end_at(id, p, commit, true) {
            Ok(End::Prepared(e)) => (e.markers, e.answer),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn tv2_end_bumps_the_epoch_marks_with_it_and_answers_it() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    c.add("tx", p, &[tp("a", 0)]);
    let (m, answer) = c.end_v2("tx", p, true);
    let bumped = pe(p.producer_id, p.epoch + 1);
    assert_eq!(answer, bumped);
    assert_eq!(
        (m.producer_id, m.producer_epoch),
        (p.producer_id, p.epoch + 1)
    );
    assert_eq!(m.partitions, vec![tp("a", 0)]);
    assert_eq!(c.txn.get("tx").unwrap().last_producer_epoch, p.epoch);
    assert_eq!(
        c.end_at("tx", p, true, true),
        Err(TxnError::ConcurrentTransactions),
        "a retry while the markers are written"
    );
    assert_eq!(
        c.end_at("tx", p, false, true),
        Err(TxnError::InvalidTxnState),
        "the other end while the markers are written"
    );
    let done = c.txn.complete(&m, c.now).unwrap();
    assert_eq!(
        (done.state, done.producer_epoch),
        (TxnState::CompleteCommit, p.epoch + 1)
    );
    assert_eq!(
        c.end_at("tx", p, true, true),
        Ok(End::AlreadyDone(bumped)),
        "a retry of the commit learns the bumped epoch"
    );
    assert_eq!(
        c.end_at("tx", p, false, true),
        Err(TxnError::InvalidTxnState),
        "an abort retried after a commit"
    );
    // The next transaction runs at the bumped epoch; the old one is fenced.
    c.add("tx", bumped, &[tp("a", 1)]);
    assert_eq!(c.end_at("tx", p, true, true), Err(TxnError::ProducerFenced));
    let (_, next) = c.end_v2("tx", bumped, false);
    assert_eq!(next, pe(p.producer_id, p.epoch + 2));
}

#[test]
fn tv2_abort_without_a_transaction_bumps_the_epoch_and_marks_nothing() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    assert_eq!(
        c.end_at("tx", p, true, true),
        Err(TxnError::InvalidTxnState)
    );
    let (m, answer) = c.end_v2("tx", p, false);
    assert!(m.partitions.is_empty() && m.groups.is_empty());
    assert_eq!(answer, pe(p.producer_id, p.epoch + 1));
    c.txn.complete(&m, c.now).unwrap();
    assert_eq!(c.state("tx"), TxnState::CompleteAbort);
    // An abort after a commit, at the current epoch, is a new (empty) abort.
    let q = answer;
    c.add("tx", q, &[tp("a", 0)]);
    let (m, q2) = c.end_v2("tx", q, true);
    c.txn.complete(&m, c.now).unwrap();
    let (m, q3) = c.end_v2("tx", q2, false);
    assert!(m.partitions.is_empty());
    assert_eq!(q3.epoch, q2.epoch + 1);
}

#[test]
fn tv2_end_checks_producer_id_then_epoch() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    c.add("tx", p, &[tp("a", 0)]);
    assert_eq!(
        c.end_at("tx", pe(p.producer_id + 1, p.epoch), true, true),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(
        c.end_at("tx", pe(p.producer_id, p.epoch - 1), true, true),
        Err(TxnError::ProducerFenced),
        "an older epoch while Ongoing"
    );
    assert_eq!(
        c.end_at("nope", p, true, true),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(c.end_at("", p, true, true), Err(TxnError::InvalidRequest));
    assert_eq!(c.state("tx"), TxnState::Ongoing, "nothing changed");
}

#[test]
fn tv2_exhausted_epoch_hands_over_to_a_new_producer_id() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    let exhausted = i16::MAX - 1;
    c.txn.txns.get_mut("tx").unwrap().producer_epoch = exhausted;
    let old = pe(p.producer_id, exhausted);
    c.add("tx", old, &[tp("a", 0)]);
    let (m, answer) = c.end_v2("tx", old, true);
    assert_eq!(m.producer_epoch, i16::MAX, "marked at the last epoch");
    assert_eq!(answer.epoch, 0);
    assert_ne!(answer.producer_id, p.producer_id);
    assert_eq!(
        c.txn.get("tx").unwrap().next_producer_id,
        answer.producer_id
    );
    let done = c.txn.complete(&m, c.now).unwrap();
    assert_eq!(
        (
            done.producer_id,
            done.producer_epoch,
            done.previous_producer_id
        ),
        (answer.producer_id, 0, p.producer_id)
    );
    assert_eq!(done.next_producer_id, NO_PRODUCER_ID);
    assert_eq!(
        c.end_at("tx", old, true, true),
        Ok(End::AlreadyDone(answer)),
        "a retry from the old id learns the new one"
    );
}

#[test]
fn tv2_exhausted_epoch_without_an_id_to_hand_out_changes_nothing() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    let old = pe(p.producer_id, i16::MAX - 1);
    c.txn.txns.get_mut("tx").unwrap().producer_epoch = old.epoch;
    c.add("tx", old, &[tp("a", 0)]);
    let end = EndTxn {
        transactional_id: "tx",
        producer: old,
        commit: true,
        tv2: true,
    };
    assert_eq!(
        c.txn.end_txn(&end, c.now, &mut || None),
        Err(TxnError::ProducerIdsPending)
    );
    assert_eq!(c.state("tx"), TxnState::Ongoing);
    assert_eq!(c.txn.get("tx").unwrap().producer_epoch, old.epoch);
}

#[test]
fn tv2_after_a_timeout_the_producers_abort_learns_the_fenced_epoch() {
    let mut c = Ctx::new();
    let p = c.init("tx");
    c.add("tx", p, &[tp("a", 0)]);
    c.sleep(60_001);
    let (_, m) = c.txn.abort_timed_out(c.now).pop().unwrap();
    c.txn.complete(&m, c.now).unwrap();
    assert_eq!(c.state("tx"), TxnState::CompleteAbort);
    assert_eq!(
        c.end_at("tx", p, false, true),
        Ok(End::AlreadyDone(pe(p.producer_id, p.epoch + 1))),
        "Kafka 4.4 answers the old epoch's abort as a retry"
    );
    assert_eq!(
        c.end_at("tx", p, true, true),
        Err(TxnError::InvalidTxnState)
    );
}
