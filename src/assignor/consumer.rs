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
//! A stateful assignor (learner) keeps its state with the group: it comes in with the
//! [`AssignmentInput`] and goes back in the [`AssignOutcome`], with the moment koord must start
//! the next rebalance itself. Members whose protocol name is that of a registered assignor that
//! speaks its own protocol ([`Assignor::speaks_protocol`], e.g. `learner`) are assigned by it
//! whatever the configured choice, as a protocol name names its assignor in Kafka; their
//! subscription's user data is in its format, and so is their assignment's.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use super::protocol::{decode_assignment, decode_subscription, encode_assignment, TopicPartitions};
use super::server::{AssignOutcome, AssignmentInput, ServerAssignor};
use super::{
    Assignor, GroupSpec, MemberSpec, Partition, PlanInput, Registry, TopicIndex, TopicSpec,
};
use crate::vocab::{GroupError, InstanceId, MemberId, Protocol};

/// The protocol names of Kafka's consumer assignors, whose assignments are plain partition
/// lists a server assignor can write.
pub const KAFKA_CONSUMER_PROTOCOLS: &[&str] =
    &["range", "roundrobin", "sticky", "cooperative-sticky"];

/// The protocol names assigned on the server by default: Kafka's consumer assignors' and the
/// registered assignors'.
pub fn server_protocols(registry: &Registry) -> Vec<String> {
    let mut names: Vec<String> = KAFKA_CONSUMER_PROTOCOLS
        .iter()
        .copied()
        .chain(registry.names())
        .map(str::to_owned)
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// The protocol type of Kafka consumer groups, the only one koord assigns.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The `ConsumerProtocolAssignment` version koord writes. Every version has the same fields,
/// so any client reads it; and franz-go, which encodes its own plan at v0 and compares it byte
/// for byte with what a KIP-814 replaced leader gets back, sees equal bytes for equal plans.
pub const ASSIGNMENT_VERSION: i16 = 0;

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

/// Assigns `consumer` groups: with the configured assignor (none: the leader assigns, as in
/// Apache Kafka), and with a registered assignor that speaks its own protocol whenever the
/// members chose its name.
#[derive(Debug, Clone)]
pub struct ConsumerAssignor {
    configured: Option<Arc<dyn Assignor>>,
    registry: Arc<Registry>,
    /// The protocol names `configured` assigns; the leader assigns any other.
    protocols: Arc<[String]>,
    topics: Arc<dyn TopicCatalog>,
}

impl ConsumerAssignor {
    /// Assigns with `assignor` (and with the built-in assignors that speak their own protocol,
    /// when chosen).
    pub fn new(assignor: Arc<dyn Assignor>, topics: Arc<dyn TopicCatalog>) -> ConsumerAssignor {
        let registry = Registry::builtin();
        let protocols = server_protocols(&registry).into();
        ConsumerAssignor::with_registry(Some(assignor), Arc::new(registry), protocols, topics)
    }

    /// `configured` assigns generations whose members chose one of `protocols` (`None`: the
    /// leader does); members that choose the name of an assignor of `registry` that speaks its
    /// own protocol get that one.
    pub fn with_registry(
        configured: Option<Arc<dyn Assignor>>,
        registry: Arc<Registry>,
        protocols: Arc<[String]>,
        topics: Arc<dyn TopicCatalog>,
    ) -> ConsumerAssignor {
        ConsumerAssignor {
            configured,
            registry,
            protocols,
            topics,
        }
    }

    /// The assignor of a generation whose members chose `protocol_name`, and whether they
    /// speak its protocol.
    fn assignor(&self, protocol_name: &str) -> Option<(&dyn Assignor, bool)> {
        if let Some(own) = self.own_protocol(protocol_name) {
            return Some((own, true));
        }
        if !self.protocols.iter().any(|p| p == protocol_name) {
            // A client assignor koord cannot stand in for (Streams' `stream`, a custom one).
            return None;
        }
        self.configured.as_deref().map(|a| (a, false))
    }

    /// The registered assignor that speaks the protocol of this name, if any.
    fn own_protocol(&self, protocol_name: &str) -> Option<&dyn Assignor> {
        self.registry
            .by_name(protocol_name)
            .filter(|a| a.speaks_protocol())
    }
}

impl ServerAssignor for ConsumerAssignor {
    fn serves(&self, protocol_type: &str) -> bool {
        protocol_type == CONSUMER_PROTOCOL_TYPE
    }

    fn assignor_for(&self, protocol_name: &str) -> Option<&str> {
        self.assignor(protocol_name).map(|(a, _)| a.name())
    }

    fn validate(&self, protocols: &[Protocol]) -> Result<(), GroupError> {
        for p in protocols {
            let own = self.own_protocol(&p.name);
            if own.is_none() && self.assignor(&p.name).is_none() {
                // The leader reads it, as in Kafka.
                continue;
            }
            let s = decode_subscription(&p.metadata)
                .map_err(|_| GroupError::InconsistentGroupProtocol)?;
            if let Some(own) = own {
                own.check_user_data(s.user_data.as_ref())?;
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
        let (assignor, capable) = self
            .assignor(input.protocol_name)
            .ok_or(GroupError::InconsistentGroupProtocol)?;
        let built = build_spec(&members, self.topics.as_ref());
        let plan = assignor.plan(&PlanInput {
            spec: &built.spec,
            declared: &built.claimed,
            capable,
            state: input.state,
            now: input.now,
        })?;
        let cooperative = !plan.withholds_held
            && (COOPERATIVE_PROTOCOLS.contains(&input.protocol_name)
                || members.iter().any(|m| {
                    m.subscription
                        .owned_partitions
                        .iter()
                        .any(|(_, ps)| !ps.is_empty())
                }));
        let mut user_data = plan.user_data.into_iter();
        let assignments = members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let mut partitions = plan.assignment[i].to_vec();
                if cooperative {
                    partitions.retain(|p| {
                        built
                            .holders
                            .get(p)
                            .is_none_or(|holders| holders.iter().all(|&h| h == i))
                    });
                }
                let bytes = encode_assignment(
                    &built.spec.by_topic(&partitions),
                    user_data.next().flatten(),
                    ASSIGNMENT_VERSION,
                );
                (m.member_id.clone(), bytes)
            })
            .collect();
        // A stateless assignor keeps no state: a state from an earlier choice is gone.
        Ok(AssignOutcome {
            assignments,
            state: plan.state,
            follow_up: plan.follow_up,
            summary: plan.summary,
            warning: plan.warning,
        })
    }
}

/// A member with its decoded subscription and koord's record of its assignment.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub member_id: MemberId,
    pub instance_id: Option<InstanceId>,
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
