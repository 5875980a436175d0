//! Server assignment for classic `consumer` groups: the bridge between the group core's
//! [`ServerAssignor`] seam and an [`Assignor`].
//!
//! At the end of a join phase: decode every member's subscription (validated when it joined),
//! intern the subscribed topics that exist (in name order, with their partition counts from the
//! [`TopicCatalog`]), work out who holds what, run the assignor, and encode each member's
//! `ConsumerProtocolAssignment` at the version its subscription was written in.
//!
//! Who holds a partition: the member koord last assigned it to, and any member whose
//! subscription says it owns it (v1+ `owned_partitions`). The first is what sticky assignors
//! keep in place (a partition claimed by two members is kept by koord's record, else by the
//! first claimant). Both count for the cooperative rule: when the members follow the
//! cooperative protocol, a partition is never handed to a member while another member still
//! holds it. It is left out of both assignments; the holder sees it gone, revokes it and rejoins
//! (cooperative clients rejoin after a revocation), and the next generation, in which nobody
//! holds it, grants it. Eager members revoke everything before they rejoin, so they get the
//! target directly.
//!
//! The members follow the cooperative protocol when the protocol they chose is a cooperative
//! assignor's (`cooperative-sticky`), or when any of them declares owned partitions: an eager
//! client gives up everything before rejoining and declares none.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use super::protocol::{decode_assignment, decode_subscription, encode_assignment, TopicPartitions};
use super::{Assignor, GroupSpec, MemberSpec, Partition, TopicIndex, TopicSpec};
use crate::group::{AssignmentInput, GroupError, MemberId, Protocol, ServerAssignor};

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

/// Assigns `consumer` groups with an [`Assignor`].
#[derive(Debug, Clone)]
pub struct ConsumerAssignor {
    assignor: Arc<dyn Assignor>,
    topics: Arc<dyn TopicCatalog>,
}

impl ConsumerAssignor {
    pub fn new(assignor: Arc<dyn Assignor>, topics: Arc<dyn TopicCatalog>) -> ConsumerAssignor {
        ConsumerAssignor { assignor, topics }
    }
}

impl ServerAssignor for ConsumerAssignor {
    fn name(&self) -> &str {
        self.assignor.name()
    }

    fn serves(&self, protocol_type: &str) -> bool {
        protocol_type == CONSUMER_PROTOCOL_TYPE
    }

    fn validate(&self, protocols: &[Protocol]) -> Result<(), GroupError> {
        for p in protocols {
            decode_subscription(&p.metadata).map_err(|_| GroupError::InconsistentGroupProtocol)?;
        }
        Ok(())
    }

    fn assign(&self, input: &AssignmentInput<'_>) -> Result<Vec<(MemberId, Bytes)>, GroupError> {
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
        let cooperative = COOPERATIVE_PROTOCOLS.contains(&input.protocol_name)
            || members.iter().any(|m| {
                m.subscription
                    .owned_partitions
                    .iter()
                    .any(|(_, ps)| !ps.is_empty())
            });
        let built = build_spec(&members, self.topics.as_ref());
        let mut target = self.assignor.assign(&built.spec).to_lists();
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
        Ok(members
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
            .collect())
    }
}

/// A member with its decoded subscription and koord's record of its assignment.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub member_id: MemberId,
    pub instance_id: Option<crate::group::InstanceId>,
    pub subscription: super::protocol::Subscription,
    pub current: TopicPartitions,
}

/// A spec and, for every partition someone holds, every member index that holds it.
#[derive(Debug)]
pub struct Built {
    pub spec: GroupSpec,
    pub holders: HashMap<Partition, Vec<usize>>,
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

    // Ownership: koord's record first, then the members' own claims.
    let recorded: Vec<Vec<Partition>> = members.iter().map(|m| resolve(&m.current)).collect();
    let claimed: Vec<Vec<Partition>> = members
        .iter()
        .map(|m| resolve(&m.subscription.owned_partitions))
        .collect();
    let mut holders: HashMap<Partition, Vec<usize>> = HashMap::new();
    let mut owner: HashMap<Partition, usize> = HashMap::new();
    for source in [&recorded, &claimed] {
        for (i, list) in source.iter().enumerate() {
            for &p in list {
                let h = holders.entry(p).or_default();
                if !h.contains(&i) {
                    h.push(i);
                }
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
