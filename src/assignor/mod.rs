//! Server-side partition assignment: pure, synchronous assignors over a read-only group spec.
//!
//! In Apache Kafka a classic group's leader assigns partitions in the client. koord assigns them
//! on the server: when a group's join phase completes, the group core asks for a plan. The seam
//! every group kind calls is [`Assignor::plan`]: the group's [`GroupSpec`], the assignor's state
//! from the last generation and `now` in; each member's partitions (and the user data of its
//! assignment), the assignor's new state and when it wants the next rebalance out. Classic
//! groups reach it through [`server::ServerAssignor`] (their member metadata is opaque bytes):
//! for `consumer` groups that is a [`consumer::ConsumerAssignor`], which decodes every member's
//! `ConsumerProtocolSubscription`, builds the spec, holds back partitions that a cooperative
//! member must revoke first, and encodes each member's `ConsumerProtocolAssignment`.
//!
//! An assignor sees topics and partitions as dense indices ([`Partition`]), not names: the spec
//! interns every subscribed topic once, so assignors compare and hash small integers and a
//! subscription shared by many members is one `Arc`.
//!
//! Built in ([`Registry::builtin`]), each selected by name only:
//! - [`range`]: Kafka's `RangeAssignor` (per topic, members in order, co-partitioned ranges).
//! - [`roundrobin`]: Kafka's `RoundRobinAssignor`.
//! - [`uniform`]: balanced and sticky, as Kafka's server-side `UniformAssignor`.
//! - [`learner`]: stateful; a partition that must move is first learned by its new owner.
//!
//! Adding one: a file implementing [`Assignor`] (a stateless assignor implements `name` and
//! `assign`; a stateful one also `plan`) and one line in [`Registry::builtin`].

pub mod consumer;
pub mod learner;
pub mod policy;
#[cfg(test)]
mod properties;
pub mod protocol;
pub mod range;
pub mod roundrobin;
pub mod server;
pub mod uniform;

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use self::protocol::TopicPartitions;
use crate::vocab::{GroupError, InstanceId, MemberId, Timestamp};

/// Index of a topic in [`GroupSpec::topics`].
pub type TopicIndex = u32;

/// One partition of a spec's topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Partition {
    pub topic: TopicIndex,
    pub partition: u32,
}

impl Partition {
    pub fn new(topic: TopicIndex, partition: u32) -> Partition {
        Partition { topic, partition }
    }
}

/// A topic some member subscribes to, and how many partitions it has now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    pub name: Arc<str>,
    pub partitions: u32,
}

/// A member as an assignor sees it.
#[derive(Debug, Clone)]
pub struct MemberSpec {
    pub member_id: MemberId,
    pub instance_id: Option<InstanceId>,
    pub rack: Option<String>,
    /// Subscribed topics that exist: sorted, without duplicates. Members with the same
    /// subscription may share one allocation.
    pub subscription: Arc<[TopicIndex]>,
    /// Partitions the member owns now, sorted, each owned by one member only. What sticky
    /// assignors keep in place.
    pub owned: Vec<Partition>,
    /// The member's subscription user data, as sent.
    pub user_data: Option<Bytes>,
}

/// The read-only input of an assignor.
#[derive(Debug, Clone, Default)]
pub struct GroupSpec {
    pub topics: Vec<TopicSpec>,
    /// In no particular order; [`GroupSpec::member_order`] gives Kafka's.
    pub members: Vec<MemberSpec>,
}

impl GroupSpec {
    /// Member indices in Kafka's `MemberInfo` order: static members first by instance id, then
    /// dynamic members by member id. The order range and round-robin assign in.
    pub fn member_order(&self) -> Vec<usize> {
        if self.members.iter().all(|m| m.instance_id.is_none()) {
            // Dynamic members only: by member id, ties by index (as the stable sort below). The
            // ids sit beside the indices, so comparisons do not chase each member's spec.
            let mut keyed: Vec<(&str, usize)> = self
                .members
                .iter()
                .enumerate()
                .map(|(i, m)| (m.member_id.as_str(), i))
                .collect();
            keyed.sort();
            return keyed.into_iter().map(|(_, i)| i).collect();
        }
        let mut order: Vec<usize> = (0..self.members.len()).collect();
        order.sort_by(|&a, &b| member_info_cmp(&self.members[a], &self.members[b]));
        order
    }

    /// Whether every member subscribes to the same topics.
    pub fn is_homogeneous(&self) -> bool {
        let Some(first) = self.members.first() else {
            return true;
        };
        self.members.iter().all(|m| {
            Arc::ptr_eq(&m.subscription, &first.subscription)
                || m.subscription == first.subscription
        })
    }

    /// The members subscribed to each topic, by topic index, each list in member-index order.
    pub fn subscribers(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); self.topics.len()];
        for (i, m) in self.members.iter().enumerate() {
            for &t in m.subscription.iter() {
                out[t as usize].push(i);
            }
        }
        out
    }

    /// Number of partitions across all topics.
    pub fn partition_count(&self) -> usize {
        self.topics.iter().map(|t| t.partitions as usize).sum()
    }

    /// A partition of a spec topic by name (the topics are in name order), if both exist.
    pub fn partition_of(&self, topic: &str, partition: u32) -> Option<Partition> {
        let t = self
            .topics
            .binary_search_by(|s| (*s.name).cmp(topic))
            .ok()?;
        (partition < self.topics[t].partitions).then(|| Partition::new(t as TopicIndex, partition))
    }

    /// A topic-partition list by name as the spec's partitions (unknown ones dropped), sorted.
    pub fn resolve(&self, list: &TopicPartitions) -> Vec<Partition> {
        let mut out: Vec<Partition> = list
            .iter()
            .flat_map(|(topic, ps)| {
                ps.iter()
                    .filter_map(move |&p| self.partition_of(topic, u32::try_from(p).ok()?))
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Sorted partitions by topic name, topics in name order, partitions ascending.
    pub fn by_topic(&self, partitions: &[Partition]) -> TopicPartitions {
        let mut out: TopicPartitions = Vec::new();
        // Topic indices are in name order and `partitions` is sorted.
        for p in partitions {
            let name = &self.topics[p.topic as usize].name;
            match out.last_mut() {
                Some((t, list)) if **t == **name => list.push(p.partition as i32),
                _ => out.push((name.to_string(), vec![p.partition as i32])),
            }
        }
        out
    }
}

/// Kafka `MemberInfo.compareTo`.
fn member_info_cmp(a: &MemberSpec, b: &MemberSpec) -> Ordering {
    match (&a.instance_id, &b.instance_id) {
        (Some(x), Some(y)) => x.cmp(y).then_with(|| a.member_id.cmp(&b.member_id)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    }
}

/// A target assignment: the partitions of each member, by member index of the spec. Each
/// member's list is sorted.
///
/// Stored flat, every member's list a span of one vector: an assignment of 100,000 partitions
/// to 10,000 members is two allocations, not 10,001 (allocating and freeing the lists one by
/// one cost more than the whole uniform assignment otherwise does).
#[derive(Clone, Default)]
pub struct Assignment {
    partitions: Vec<Partition>,
    /// Per member index: `partitions[start..end]`.
    spans: Vec<(u32, u32)>,
}

impl Assignment {
    /// From each member's list, by member index (lists sorted).
    pub fn from_lists(lists: Vec<Vec<Partition>>) -> Assignment {
        let mut partitions = Vec::with_capacity(lists.iter().map(Vec::len).sum());
        let spans = lists
            .into_iter()
            .map(|l| {
                let start = partitions.len() as u32;
                partitions.extend(l);
                (start, partitions.len() as u32)
            })
            .collect();
        Assignment { partitions, spans }
    }

    /// From all partitions and each member's span of them (each span sorted).
    pub fn from_spans(partitions: Vec<Partition>, spans: Vec<(u32, u32)>) -> Assignment {
        debug_assert!(spans
            .iter()
            .all(|&(s, e)| s <= e && e as usize <= partitions.len()));
        Assignment { partitions, spans }
    }

    /// From (member index, partition) pairs, each member's partitions in the order given
    /// (so sorted if the pairs are in partition order), for `members` members.
    pub fn from_pairs(members: usize, pairs: &[(u32, Partition)]) -> Assignment {
        if pairs.is_empty() {
            return Assignment {
                partitions: Vec::new(),
                spans: vec![(0, 0); members],
            };
        }
        let mut spans = vec![(0u32, 0u32); members];
        for &(m, _) in pairs {
            spans[m as usize].1 += 1;
        }
        let mut at = 0u32;
        for span in &mut spans {
            let count = span.1;
            // The end is the fill cursor until every pair is placed.
            *span = (at, at);
            at += count;
        }
        let mut partitions = vec![Partition::new(0, 0); pairs.len()];
        for &(m, p) in pairs {
            let span = &mut spans[m as usize];
            partitions[span.1 as usize] = p;
            span.1 += 1;
        }
        Assignment { partitions, spans }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The partitions of member `i` (by member index of the spec), sorted.
    pub fn member(&self, i: usize) -> &[Partition] {
        let (s, e) = self.spans[i];
        &self.partitions[s as usize..e as usize]
    }

    /// Each member's partitions, by member index.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[Partition]> + '_ {
        self.spans
            .iter()
            .map(|&(s, e)| &self.partitions[s as usize..e as usize])
    }

    pub fn to_lists(&self) -> Vec<Vec<Partition>> {
        self.iter().map(<[Partition]>::to_vec).collect()
    }
}

impl std::ops::Index<usize> for Assignment {
    type Output = [Partition];

    fn index(&self, i: usize) -> &[Partition] {
        self.member(i)
    }
}

impl PartialEq for Assignment {
    fn eq(&self, other: &Assignment) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Assignment {}

impl PartialEq<Vec<Vec<Partition>>> for Assignment {
    fn eq(&self, other: &Vec<Vec<Partition>>) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == &b[..])
    }
}

impl fmt::Debug for Assignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// What a group core hands an assignor for one generation.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    pub spec: &'a GroupSpec,
    /// What each member says it holds now, by member index (for classic consumers, their
    /// `owned_partitions`): a partition is never granted while another member holds it.
    pub declared: &'a [Vec<Partition>],
    /// The members chose this assignor's own protocol ([`Assignor::speaks_protocol`]): their
    /// user data is in its format, and their assignments carry its user data.
    pub capable: bool,
    /// What the assignor returned as its state at the last installed generation (empty at
    /// first). Its own bytes: anything else may come from a damaged record.
    pub state: &'a [u8],
    /// The time of the rebalance: stateful assignors time warm-ups and deadlines with it.
    pub now: Timestamp,
}

/// One generation's plan.
#[derive(Debug, Clone, Default)]
pub struct PlanOutput {
    /// Each member's partitions, by member index of the spec.
    pub assignment: Assignment,
    /// The user data of each member's assignment, by member index; empty for none at all.
    pub user_data: Vec<Option<Bytes>>,
    /// Whether the plan already grants nothing another member still holds; otherwise the
    /// caller holds such partitions back from cooperative members for a generation.
    pub withholds_held: bool,
    /// The assignor's state once the generation is installed.
    pub state: Bytes,
    /// When the coordinator must start a rebalance by itself (a learner's warm-up ends, a
    /// leaver's deadline passes, a probe comes due), if ever.
    pub follow_up: Option<Timestamp>,
    /// What the assignor did and why, for the generation's log line.
    pub summary: Option<String>,
    /// What an operator should hear of (its state did not decode, so it planned from an empty
    /// state), logged at warn.
    pub warning: Option<String>,
}

/// A partition assignor: the plug-in seam the group cores call. Pure and deterministic: the
/// same input gives the same plan.
pub trait Assignor: Send + Sync + fmt::Debug {
    /// The name groups are configured with (`group.assignor`) and DescribeGroups shows.
    fn name(&self) -> &'static str;

    /// Every partition of every subscribed topic goes to exactly one of its subscribers (a
    /// topic nobody subscribes to is not in the spec). A stateful assignor answers as for a
    /// group it has no state of.
    fn assign(&self, spec: &GroupSpec) -> Assignment;

    /// Plans one generation. A stateless assignor keeps this default: [`Assignor::assign`],
    /// no state, no follow-up.
    ///
    /// # Errors
    /// A member's user data that [`Assignor::check_user_data`] would refuse.
    fn plan(&self, input: &PlanInput<'_>) -> Result<PlanOutput, GroupError> {
        Ok(PlanOutput {
            assignment: self.assign(input.spec),
            ..PlanOutput::default()
        })
    }

    /// Whether clients that choose this assignor's name as their protocol speak its own
    /// user-data format; such groups are always assigned by it, whatever the configuration.
    fn speaks_protocol(&self) -> bool {
        false
    }

    /// Checks the user data of a member that chose this assignor's protocol.
    ///
    /// # Errors
    /// INCONSISTENT_GROUP_PROTOCOL for user data it cannot read.
    fn check_user_data(&self, _user_data: Option<&Bytes>) -> Result<(), GroupError> {
        Ok(())
    }

    /// The learners recorded in this assignor's `state` (what [`Assignor::plan`] returned), for
    /// the status page and metrics. A stateless assignor has none.
    fn learners(&self, _state: &[u8]) -> Vec<LearnerView> {
        Vec::new()
    }
}

/// A task being learned: `member` restores it while `owner` (if any) still processes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LearnerView {
    pub topic: String,
    pub partition: u32,
    pub member: String,
    pub owner: Option<String>,
    /// When the learner was planned: its warm-up started then.
    pub planned: Timestamp,
}

/// Assignors by name. [`Registry::builtin`] has every assignor koord ships; more can be
/// registered (or a built-in one replaced, e.g. with its configured settings) before the server
/// starts.
#[derive(Debug, Clone)]
pub struct Registry {
    by_name: HashMap<&'static str, Arc<dyn Assignor>>,
}

impl Registry {
    pub fn builtin() -> Registry {
        let mut r = Registry {
            by_name: HashMap::new(),
        };
        r.register(Arc::new(range::RangeAssignor));
        r.register(Arc::new(roundrobin::RoundRobinAssignor));
        r.register(Arc::new(uniform::UniformAssignor));
        r.register(Arc::new(learner::LearnerAssignor::default()));
        r
    }

    pub fn register(&mut self, assignor: Arc<dyn Assignor>) {
        self.by_name.insert(assignor.name(), assignor);
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Assignor>> {
        self.by_name.get(name).cloned()
    }

    /// [`Registry::get`] without taking a reference count.
    pub fn by_name(&self, name: &str) -> Option<&dyn Assignor> {
        self.by_name.get(name).map(|a| a.as_ref())
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.by_name.keys().copied().collect();
        names.sort_unstable();
        names
    }
}

/// Test and benchmark support: specs built from plain data.
pub mod testing {
    use std::sync::Arc;

    use super::{GroupSpec, MemberSpec, Partition, TopicIndex, TopicSpec};
    use crate::vocab::MemberId;

    /// Topics `t0..` of the given partition counts.
    pub fn topics(partitions: &[u32]) -> Vec<TopicSpec> {
        partitions
            .iter()
            .enumerate()
            .map(|(i, &p)| TopicSpec {
                name: Arc::from(format!("t{i}")),
                partitions: p,
            })
            .collect()
    }

    /// A dynamic member owning nothing.
    pub fn member(id: impl Into<Arc<str>>, subscription: Arc<[TopicIndex]>) -> MemberSpec {
        MemberSpec {
            member_id: MemberId::new(id),
            instance_id: None,
            rack: None,
            subscription,
            owned: Vec::new(),
            user_data: None,
        }
    }

    /// A spec with topics `t0..` of the given partition counts and one member per
    /// subscription (`m000..`), owning `owned[i]` (or nothing).
    pub fn spec(
        partitions: &[u32],
        subscriptions: &[Vec<u32>],
        owned: &[Vec<Partition>],
    ) -> GroupSpec {
        let topics = topics(partitions);
        let members = subscriptions
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut s = s.clone();
                s.sort_unstable();
                s.dedup();
                let mut owned = owned.get(i).cloned().unwrap_or_default();
                owned.sort_unstable();
                MemberSpec {
                    owned,
                    ..member(format!("m{i:06}"), Arc::from(s))
                }
            })
            .collect();
        GroupSpec { topics, members }
    }
}
