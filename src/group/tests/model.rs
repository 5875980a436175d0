//! Model-style test: random interleavings of join, sync, heartbeat, leave, commit, static
//! restarts and time passing, from several simulated clients, with the invariants of
//! [`Ctx::drain`] checked after every step (each request answered at most once and only if it
//! was sent; no successful reply to a non-member or for another generation; the leader is a
//! member; generations never go back; every non-parked member has a session timer; a join
//! phase always has a timer that ends it) and, once the clients stop, every parked request
//! eventually answered.
//!
//! A tiny xorshift generator keeps the test dependency-free and every failure reproducible
//! from its seed.

use std::sync::Arc;

use super::*;

/// A server assignor that gives every member its own id back.
#[derive(Debug)]
struct FixedAssignor;

impl ServerAssignor for FixedAssignor {
    fn assignor_for(&self, _protocol_name: &str) -> Option<&str> {
        Some("fixed")
    }

    fn serves(&self, protocol_type: &str) -> bool {
        protocol_type == "consumer"
    }

    fn validate(&self, _protocols: &[crate::group::Protocol]) -> Result<(), GroupError> {
        Ok(())
    }

    fn assign(&self, input: &AssignmentInput<'_>) -> Result<AssignOutcome, GroupError> {
        Ok(AssignOutcome {
            assignments: input
                .members
                .iter()
                .map(|m| {
                    (
                        m.member_id.clone(),
                        Bytes::from(m.member_id.as_str().to_owned()),
                    )
                })
                .collect(),
            ..AssignOutcome::default()
        })
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// What one simulated client believes.
struct Client {
    name: String,
    instance: Option<String>,
    member_id: MemberId,
    generation: Generation,
}

/// Runs one seed; returns its events so the caller can check what was exercised.
fn run(seed: u64, steps: usize) -> Vec<GroupEvent> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    // Every fifth seed has koord assign (the server-assignment seam).
    let assignment = if seed.is_multiple_of(5) {
        AssignmentMode::Server(Arc::new(FixedAssignor))
    } else {
        AssignmentMode::Client
    };
    // Half the seeds drive time like a single-sleep shell (which asks for no timer outputs),
    // half like a keyed-timer shell.
    let single_sleep = seed.is_multiple_of(2);
    let mut ctx = Ctx::with_config(GroupConfig {
        initial_rebalance_delay_ms: DELAY,
        max_size: 4,
        assignment,
        timer_outputs: !single_sleep,
        ..GroupConfig::default()
    });
    // Every third seed has slow storage: writes are acknowledged (or failed) at random later
    // steps, so replies that wait for them interleave with everything else.
    ctx.hold_writes = seed.is_multiple_of(3);
    ctx.single_sleep = single_sleep;
    let mut clients: Vec<Client> = (0..5)
        .map(|i| Client {
            name: format!("c{i}"),
            instance: (i < 2).then(|| format!("i-{i}")),
            member_id: MemberId::unknown(),
            generation: Generation::NONE,
        })
        .collect();
    let mut joins: Vec<(RequestToken, usize)> = Vec::new();

    for _ in 0..steps {
        let c = rng.below(clients.len() as u64) as usize;
        match rng.below(12) {
            0..=2 => {
                let client = &mut clients[c];
                if rng.chance(15) {
                    // The process restarts and forgets its member id.
                    client.member_id = MemberId::unknown();
                }
                let meta: &'static [u8] = if rng.chance(20) { b"v2" } else { b"v1" };
                let mut j = J::new()
                    .client(&client.name)
                    .member(&client.member_id)
                    .rebalance(if rng.chance(50) { 5_000 } else { 20_000 })
                    .protocols(&[("range", meta), ("roundrobin", meta)]);
                j.req.instance_id = client.instance.clone().map(InstanceId);
                if rng.chance(50) {
                    j = j.v4();
                }
                if rng.chance(30) {
                    j.req.supports_skip_assignment = true;
                }
                let t = ctx.join(j);
                joins.push((t, c));
            }
            3 | 4 => {
                let client = &clients[c];
                let assignments: Vec<(MemberId, Bytes)> = if ctx.group.is_leader(&client.member_id)
                {
                    ctx.group
                        .members()
                        .map(|m| (m.id.clone(), Bytes::from(format!("a-{}", m.id))))
                        .collect()
                } else {
                    Vec::new()
                };
                let req = SyncGroup {
                    token: RequestToken(0),
                    member_id: client.member_id.clone(),
                    instance_id: client.instance.clone().map(InstanceId),
                    generation: client.generation,
                    protocol_type: rng.chance(50).then(|| "consumer".to_owned()),
                    protocol_name: None,
                    assignments,
                };
                ctx.sync_req(req);
            }
            5 | 6 => {
                let client = &clients[c];
                let req = Heartbeat {
                    member_id: client.member_id.clone(),
                    instance_id: client.instance.clone().map(InstanceId),
                    generation: client.generation,
                };
                let _ = ctx.group.handle_heartbeat(&req, ctx.now);
                ctx.drain();
            }
            7 => {
                let client = &mut clients[c];
                if rng.chance(30) && client.instance.is_some() {
                    // Admin removal by instance id.
                    let instance = client.instance.clone();
                    ctx.leave(&[("", instance.as_deref())]);
                } else {
                    let id = client.member_id.as_str().to_owned();
                    ctx.leave(&[(id.as_str(), client.instance.as_deref())]);
                    client.member_id = MemberId::unknown();
                }
            }
            8 => {
                let client = &clients[c];
                let _ = ctx.commit(OffsetCommitAuth {
                    member_id: client.member_id.clone(),
                    instance_id: client.instance.clone().map(InstanceId),
                    generation: client.generation,
                    transactional: rng.chance(10),
                });
            }
            9 if !ctx.held_writes.is_empty() => {
                let i = rng.below(ctx.held_writes.len() as u64) as usize;
                let result = if rng.chance(80) {
                    Ok(())
                } else {
                    Err(GroupError::NotCoordinator)
                };
                ctx.complete_write(i, result);
            }
            _ => ctx.sleep(rng.below(8_000)),
        }

        // Clients learn from their answered JoinGroups.
        joins.retain(|(t, owner)| match ctx.join_replies.get(t) {
            None => true,
            Some(reply) => {
                let client = &mut clients[*owner];
                match reply.error {
                    None | Some(GroupError::MemberIdRequired) => {
                        client.member_id = reply.member_id.clone();
                        client.generation = reply.generation;
                    }
                    Some(GroupError::UnknownMemberId) | Some(GroupError::FencedInstanceId) => {
                        client.member_id = MemberId::unknown();
                        client.generation = Generation::NONE;
                    }
                    Some(_) => {}
                }
                false
            }
        });
    }

    // The clients stop and storage catches up: within the longest timeout every parked
    // request is answered.
    ctx.hold_writes = false;
    ctx.complete_held_writes(Ok(()));
    for _ in 0..40 {
        ctx.sleep(30_000);
    }
    assert_eq!(
        ctx.unanswered(),
        Vec::<RequestToken>::new(),
        "seed {seed}: parked forever"
    );
    assert_eq!(
        ctx.group.state(),
        GroupState::Empty,
        "seed {seed}: silent members never expired"
    );
    // Generations are started one at a time, each one above the last.
    let started: Vec<i32> = ctx
        .events
        .iter()
        .filter_map(|e| match e {
            GroupEvent::GenerationStarted { generation, .. } => Some(generation.0),
            _ => None,
        })
        .collect();
    assert!(
        started.windows(2).all(|w| w[1] == w[0] + 1),
        "seed {seed}: generations {started:?}"
    );
    ctx.events
}

#[test]
fn model_random_interleavings_keep_the_group_invariants() {
    let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
    for seed in 1..=300 {
        for e in run(seed, 250) {
            let kind = match e {
                GroupEvent::AssignmentInstalled { .. } => "assignment installed".to_owned(),
                GroupEvent::MemberRemoved { reason, .. } => {
                    let name = format!("{reason:?}");
                    format!(
                        "removed: {}",
                        name.split([' ', '{', '(']).next().unwrap_or("")
                    )
                }
                GroupEvent::MemberAdded {
                    reason: AddReason::ReplacedStatic { .. },
                    ..
                } => "static replaced".to_owned(),
                GroupEvent::LeaderChanged { .. } => "leader changed".to_owned(),
                GroupEvent::RebalanceStarted { reason, .. } => {
                    format!(
                        "rebalance: {}",
                        format!("{reason:?}").split('(').next().unwrap_or("")
                    )
                }
                _ => continue,
            };
            *seen.entry(kind).or_default() += 1;
        }
    }
    // The random walk must reach the interesting places, or it proves nothing.
    for kind in [
        "assignment installed",
        "static replaced",
        "leader changed",
        "removed: SessionExpired",
        "removed: NotRejoined",
        "removed: NotSynced",
        "removed: PendingMemberExpired",
        "removed: GroupMaxSizeReached",
        "rebalance: MembersLeft",
        "rebalance: PendingSyncExpired",
        "rebalance: AssignmentWriteFailed",
        "rebalance: StaticMemberReplaced",
    ] {
        assert!(
            seen.get(kind).copied().unwrap_or(0) > 0,
            "never exercised: {kind}; saw {seen:?}"
        );
    }
}

/// A 3000-member group forms and rebalances in one round each: the join accounting is
/// counter-based (no per-request scan of the members), which keeps this test fast.
#[test]
fn large_group_forms_and_rebalances_in_one_round() {
    let n = 3000;
    let mut group = ClassicGroup::new(GroupId::new("g"), GroupConfig::default(), Timestamp(0));
    let mut replies = 0;
    let mut drain = |group: &mut ClassicGroup, now| {
        while let Some(o) = group.poll_output() {
            match o {
                Output::JoinReply { reply, .. } => {
                    assert!(reply.error.is_none());
                    replies += 1;
                }
                Output::Persist { write, .. } => group.handle_write_complete(write, Ok(()), now),
                _ => {}
            }
        }
    };
    for i in 0..n {
        let mut j = J::new().client(&format!("c{i}"));
        j.req.token = RequestToken(i + 1);
        j.req.member_id_nonce = format!("{i}");
        group.handle_join(j.req, Timestamp(0));
        drain(&mut group, Timestamp(0));
    }
    let mut now = Timestamp(0);
    while group.state() == GroupState::PreparingRebalance {
        now = group.next_deadline().expect("a join phase has a timer");
        group.handle_timeout(now);
        drain(&mut group, now);
    }
    assert_eq!(group.generation(), Generation(1));
    let ids: Vec<MemberId> = group.members().map(|m| m.id.clone()).collect();
    for (i, id) in ids.iter().enumerate() {
        let mut j = J::new().member(id).protocols(&[("range", b"x")]);
        j.req.token = RequestToken(100_000 + i as u64);
        group.handle_join(j.req, now);
        drain(&mut group, now);
    }
    assert_eq!(group.generation(), Generation(2));
    assert_eq!(group.state(), GroupState::CompletingRebalance);
    group.check_counters();
    assert_eq!(replies, 2 * n as usize);
}
