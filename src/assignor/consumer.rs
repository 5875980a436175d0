//! Server assignment for classic `consumer` groups: the bridge between the group core's
//! [`ServerAssignor`] seam and an [`Assignor`].
//!
//! At the end of a join phase: decode every member's subscription (validated when it joined),
//! intern the subscribed topics that exist (in name order, with their partition counts from the
//! [`TopicCatalog`]), work out who holds what, run the assignor, and encode each member's
//! `ConsumerProtocolAssignment` at the version its subscription was written in.
//!
//! Who holds a partition: a member whose subscription says it owns it (v1+
//! `owned_partitions`), as in Kafka. koord's record of what it last assigned is not proof: a
//! member whose SyncGroup was answered REBALANCE_IN_PROGRESS never received it, and counting it
//! would withhold partitions nobody will ever revoke. The cooperative rule: when the members
//! follow the cooperative protocol, a partition is never handed to a member while another
//! member still holds it. It is left out of both assignments; the holder sees it gone, revokes
//! it and rejoins (cooperative clients rejoin after a revocation), and the next generation, in
//! which nobody holds it, grants it. Eager members revoke everything before they rejoin, so
//! they get the target directly.
//!
//! What sticky assignors keep in place: what a member declares, or for a member that declares
//! nothing (eager clients), what koord last assigned it; a partition claimed twice stays with
//! the first claimant.
//!
//! The members follow the cooperative protocol when the protocol they chose is a cooperative
//! assignor's (`cooperative-sticky`), or when any of them declares owned partitions: an eager
//! client gives up everything before rejoining and declares none.
//!
//! The learner assignor ([`super::learner`]) is stateful: its state S comes in with the
//! [`AssignmentInput`] and goes back in the [`AssignOutcome`], with the moment koord must start
//! the next rebalance itself. Members that chose the protocol `learner` are learner-capable:
//! their subscription's user data is a `LearnerSubscription` and their assignment's a
//! `LearnerAssignment`. Any group whose members chose `learner` is assigned by it, whatever the
//! configured choice, as a protocol name names its assignor in Kafka.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use super::learner::wire::{LearnerAssignment, LearnerSubscription};
use super::learner::{self, LearnerInput};
use super::protocol::{decode_assignment, decode_subscription, encode_assignment, TopicPartitions};
use super::{Assignor, GroupSpec, MemberSpec, Partition, TopicIndex, TopicSpec};
use crate::group::{AssignOutcome, AssignmentInput, ServerAssignor};
use crate::vocab::{GroupError, MemberId, Protocol};

/// The protocol type of Kafka consumer groups, the only one koord assigns.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// Protocol (client assignor) names that follow the cooperative rebalance protocol.
pub const COOPERATIVE_PROTOCOLS: &[&str] = &["cooperative-sticky"];

/// Partition counts of the topics that exist now.
pub trait TopicCatalog: Send + Sync + fmt::Debug {
    /// Partitions of `topic`, or `None` if it does not exist.
    fn partitions(&self, topic: &str) -> Option<u32>;
}

impl TopicCatalog for crate::metadata::Topics {
    fn partitions(&self, topic: &str) -> Option<u32> {
        self.get(topic)
            .and_then(|t| u32::try_from(t.partitions).ok())
    }
}

impl TopicCatalog for BTreeMap<String, u32> {
    fn partitions(&self, topic: &str) -> Option<u32> {
        self.get(topic).copied()
    }
}

/// Who assigns a `consumer` group whose members did not choose `learner`.
#[derive(Debug, Clone)]
pub enum Choice {
    /// Its leader, as in Apache Kafka.
    Client,
    /// A stateless assignor.
    Plain(Arc<dyn Assignor>),
    /// The learner assignor.
    Learner,
}

/// Assigns `consumer` groups: with the configured [`Choice`], and with the learner assignor
/// whenever the members chose `learner`.
#[derive(Debug, Clone)]
pub struct ConsumerAssignor {
    choice: Choice,
    topics: Arc<dyn TopicCatalog>,
    learner: Arc<learner::Settings>,
}

impl ConsumerAssignor {
    pub fn new(assignor: Arc<dyn Assignor>, topics: Arc<dyn TopicCatalog>) -> ConsumerAssignor {
        ConsumerAssignor::with_choice(
            Choice::Plain(assignor),
            topics,
            Arc::new(learner::Settings::default()),
        )
    }

    pub fn with_choice(
        choice: Choice,
        topics: Arc<dyn TopicCatalog>,
        learner: Arc<learner::Settings>,
    ) -> ConsumerAssignor {
        ConsumerAssignor {
            choice,
            topics,
            learner,
        }
    }
}

/// The user data of a learner-capable member's subscription; none is nothing to report.
fn learner_subscription(user_data: Option<&Bytes>) -> Result<LearnerSubscription, GroupError> {
    match user_data {
        Some(b) if !b.is_empty() => {
            LearnerSubscription::decode(b).map_err(|_| GroupError::InconsistentGroupProtocol)
        }
        _ => Ok(LearnerSubscription::default()),
    }
}

impl ServerAssignor for ConsumerAssignor {
    fn serves(&self, protocol_type: &str) -> bool {
        protocol_type == CONSUMER_PROTOCOL_TYPE
    }

    fn assignor_for(&self, protocol_name: &str) -> Option<&str> {
        if protocol_name == learner::NAME {
            return Some(learner::NAME);
        }
        match &self.choice {
            Choice::Client => None,
            Choice::Plain(a) => Some(a.name()),
            Choice::Learner => Some(learner::NAME),
        }
    }

    fn validate(&self, protocols: &[Protocol]) -> Result<(), GroupError> {
        for p in protocols {
            let is_learner = p.name == learner::NAME;
            if matches!(self.choice, Choice::Client) && !is_learner {
                // The leader reads it, as in Kafka.
                continue;
            }
            let s = decode_subscription(&p.metadata)
                .map_err(|_| GroupError::InconsistentGroupProtocol)?;
            if is_learner {
                learner_subscription(s.user_data.as_ref())?;
            }
        }
        Ok(())
    }

    fn assign(&self, input: &AssignmentInput<'_>) -> Result<AssignOutcome, GroupError> {
        let mut members = Vec::with_capacity(input.members.len());
        for m in &input.members {
            let subscription = decode_subscription(m.metadata)
                .map_err(|_| GroupError::InconsistentGroupProtocol)?;
            // koord's own record; unreadable (written by a client leader in another mode)
            // counts as nothing recorded.
            let current = if m.current_assignment.is_empty() {
                Vec::new()
            } else {
                decode_assignment(m.current_assignment)
                    .map(|(p, _)| p)
                    .unwrap_or_default()
            };
            members.push(Decoded {
                member_id: m.member_id.clone(),
                instance_id: m.instance_id.cloned(),
                subscription,
                current,
            });
        }
        let plain = match self.assignor_for(input.protocol_name) {
            Some(learner::NAME) => return self.assign_learner(input, &members),
            Some(_) => match &self.choice {
                Choice::Plain(a) => a,
                _ => return Err(GroupError::InconsistentGroupProtocol),
            },
            None => return Err(GroupError::InconsistentGroupProtocol),
        };
        let cooperative = COOPERATIVE_PROTOCOLS.contains(&input.protocol_name)
            || members.iter().any(|m| {
                m.subscription
                    .owned_partitions
                    .iter()
                    .any(|(_, ps)| !ps.is_empty())
            });
        let built = build_spec(&members, self.topics.as_ref());
        let mut target = plain.assign(&built.spec).to_lists();
        if cooperative {
            for (i, list) in target.iter_mut().enumerate() {
                list.retain(|p| {
                    built
                        .holders
                        .get(p)
                        .is_none_or(|holders| holders.iter().all(|&h| h == i))
                });
            }
        }
        let assignments = members
            .iter()
            .zip(target)
            .map(|(m, mut partitions)| {
                partitions.sort_unstable();
                let bytes = encode_assignment(
                    &by_topic(&built.spec, &partitions),
                    None,
                    m.subscription.assignment_version(),
                );
                (m.member_id.clone(), bytes)
            })
            .collect();
        // A stateless assignor keeps no state: a learner state from an earlier choice is gone.
        Ok(AssignOutcome {
            assignments,
            ..AssignOutcome::default()
        })
    }
}

impl ConsumerAssignor {
    /// The learner assignor: S in, plan, S and the follow-up out.
    fn assign_learner(
        &self,
        input: &AssignmentInput<'_>,
        members: &[Decoded],
    ) -> Result<AssignOutcome, GroupError> {
        let capable = input.protocol_name == learner::NAME;
        let built = build_spec(members, self.topics.as_ref());
        let spec = &built.spec;
        let mut inputs = Vec::with_capacity(members.len());
        for (m, declared) in members.iter().zip(&built.claimed) {
            let sub = if capable {
                learner_subscription(m.subscription.user_data.as_ref())?
            } else {
                LearnerSubscription::default()
            };
            inputs.push(LearnerInput {
                capable,
                declared: declared.clone(),
                revoked: resolve(spec, &sub.revoked),
                ready: resolve(spec, &sub.ready),
                lags: sub
                    .lags
                    .iter()
                    .filter_map(|l| {
                        let p = u32::try_from(l.partition).ok()?;
                        Some((partition_of(spec, &l.topic, p)?, l.lag))
                    })
                    .collect(),
                leaving: sub.leaving,
            });
        }
        // S is koord's own bytes; unreadable (a damaged record) starts afresh, and says so.
        let (prev, warning) = match learner::State::decode(input.state) {
            Ok(prev) => (prev, None),
            Err(why) => (
                learner::State::default(),
                Some(format!(
                    "learner state unreadable ({why}): planned from an empty state, learners and marks are lost"
                )),
            ),
        };
        let plan = learner::plan(spec, &inputs, &prev, &self.learner, input.now);
        let probe_ms = plan.probe.map_or(-1, |t| t.as_millis() as i64);
        let seed = self.learner.mode == learner::Mode::Seed;
        let assignments = members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let user_data = capable.then(|| {
                    LearnerAssignment {
                        learning: by_topic(spec, &plan.learning[i]),
                        // Ready-gated: marks stay inside koord; owners keep processing.
                        marks: if seed {
                            by_topic(spec, &plan.marks[i])
                        } else {
                            Vec::new()
                        },
                        probe_ms,
                    }
                    .encode()
                });
                let bytes = encode_assignment(
                    &by_topic(spec, &plan.assigned[i]),
                    user_data,
                    m.subscription.assignment_version(),
                );
                (m.member_id.clone(), bytes)
            })
            .collect();
        let summary = learner::Summary {
            topics: &spec.topics,
            plan: &plan,
        }
        .to_string();
        Ok(AssignOutcome {
            assignments,
            state: plan.state.encode(),
            follow_up: plan.follow_up,
            summary: Some(summary),
            warning,
        })
    }
}

/// A partition of a spec's topic by name (the spec's topics are in name order).
fn partition_of(spec: &GroupSpec, topic: &str, partition: u32) -> Option<Partition> {
    let t = spec
        .topics
        .binary_search_by(|s| (*s.name).cmp(topic))
        .ok()?;
    (partition < spec.topics[t].partitions).then(|| Partition::new(t as TopicIndex, partition))
}

/// A topic-partition list by name, as the spec's partitions (unknown ones dropped), sorted.
fn resolve(spec: &GroupSpec, list: &TopicPartitions) -> Vec<Partition> {
    let mut out: Vec<Partition> = list
        .iter()
        .flat_map(|(topic, ps)| {
            ps.iter()
                .filter_map(move |&p| partition_of(spec, topic, u32::try_from(p).ok()?))
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// A member with its decoded subscription and koord's record of its assignment.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub member_id: MemberId,
    pub instance_id: Option<crate::vocab::InstanceId>,
    pub subscription: super::protocol::Subscription,
    pub current: TopicPartitions,
}

/// A spec and, for every partition someone holds, every member index that holds it.
#[derive(Debug)]
pub struct Built {
    pub spec: GroupSpec,
    pub holders: HashMap<Partition, Vec<usize>>,
    /// What each member says it owns (its `owned_partitions` that exist), by member index.
    pub claimed: Vec<Vec<Partition>>,
}

/// Builds the assignor's input (members in the given order) and the holders of each partition.
pub fn build_spec(members: &[Decoded], catalog: &dyn TopicCatalog) -> Built {
    // Every subscribed topic that exists, once, in name order.
    let mut known: BTreeMap<&str, Option<u32>> = BTreeMap::new();
    for m in members {
        for t in &m.subscription.topics {
            if !known.contains_key(t.as_str()) {
                let partitions = catalog.partitions(t).filter(|&p| p > 0);
                known.insert(t, partitions);
            }
        }
    }
    let mut topics = Vec::new();
    let mut index: HashMap<&str, TopicIndex> = HashMap::new();
    for (name, partitions) in known {
        if let Some(partitions) = partitions {
            index.insert(name, topics.len() as TopicIndex);
            topics.push(TopicSpec {
                name: Arc::from(name),
                partitions,
            });
        }
    }
    let resolve = |list: &TopicPartitions| -> Vec<Partition> {
        let mut out = Vec::new();
        for (topic, partitions) in list {
            let Some(&t) = index.get(topic.as_str()) else {
                continue;
            };
            let count = topics[t as usize].partitions;
            out.extend(
                partitions
                    .iter()
                    .filter_map(|&p| u32::try_from(p).ok())
                    .filter(|&p| p < count)
                    .map(|p| Partition::new(t, p)),
            );
        }
        out
    };

    // Holders: the members' own claims. Stickiness: the claims, else koord's record.
    let claimed: Vec<Vec<Partition>> = members
        .iter()
        .map(|m| resolve(&m.subscription.owned_partitions))
        .collect();
    let mut holders: HashMap<Partition, Vec<usize>> = HashMap::new();
    for (i, list) in claimed.iter().enumerate() {
        for &p in list {
            let h = holders.entry(p).or_default();
            if !h.contains(&i) {
                h.push(i);
            }
        }
    }
    // Every claim before any record: a member's word beats koord's memory of another member.
    let mut owner: HashMap<Partition, usize> = HashMap::new();
    for (i, claims) in claimed.iter().enumerate() {
        for &p in claims {
            owner.entry(p).or_insert(i);
        }
    }
    for (i, (m, claims)) in members.iter().zip(&claimed).enumerate() {
        if claims.is_empty() {
            for p in resolve(&m.current) {
                owner.entry(p).or_insert(i);
            }
        }
    }
    let mut owned: Vec<Vec<Partition>> = vec![Vec::new(); members.len()];
    for (p, i) in owner {
        owned[i].push(p);
    }

    let mut shared: HashMap<Vec<TopicIndex>, Arc<[TopicIndex]>> = HashMap::new();
    let specs = members
        .iter()
        .zip(owned)
        .map(|(m, mut owned)| {
            let mut subscription: Vec<TopicIndex> = m
                .subscription
                .topics
                .iter()
                .filter_map(|t| index.get(t.as_str()).copied())
                .collect();
            subscription.sort_unstable();
            subscription.dedup();
            let subscription = shared
                .entry(subscription)
                .or_insert_with_key(|k| Arc::from(k.as_slice()))
                .clone();
            // Sticky assignors keep only what the member still subscribes to.
            owned.retain(|p| subscription.binary_search(&p.topic).is_ok());
            owned.sort_unstable();
            MemberSpec {
                member_id: m.member_id.clone(),
                instance_id: m.instance_id.clone(),
                rack: m.subscription.rack.clone(),
                subscription,
                owned,
                user_data: m.subscription.user_data.clone(),
            }
        })
        .collect();
    Built {
        spec: GroupSpec {
            topics,
            members: specs,
        },
        holders,
        claimed,
    }
}

/// A member's partitions by topic name, topics in name order, partitions ascending.
fn by_topic(spec: &GroupSpec, partitions: &[Partition]) -> TopicPartitions {
    let mut out: TopicPartitions = Vec::new();
    // Topic indices are in name order and `partitions` is sorted.
    for p in partitions {
        let name = &spec.topics[p.topic as usize].name;
        match out.last_mut() {
            Some((t, list)) if **t == **name => list.push(p.partition as i32),
            _ => out.push((name.to_string(), vec![p.partition as i32])),
        }
    }
    out
}
