//! Which node serves a group ([`Ownership`]): every request consults it. Outside a cluster
//! every group is this node's; in cluster mode ([`crate::gateway::cluster`]) a group's shard is its
//! partition of koord's topic ([`partition_of`]), served by the node its membership assigns it
//! to, while that node's lease holds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use crate::vocab::{partition_of, GroupError, Timestamp};

/// Where clients of one of a node's listeners reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub listener: String,
    pub host: String,
    pub port: i32,
    /// The ports this listener presents upstream brokers on (gateway mode): (broker id, port).
    pub presented: Vec<(i32, i32)>,
}

impl Endpoint {
    /// The port it presents upstream broker `broker` on.
    pub fn presenting(&self, broker: i32) -> Option<i32> {
        self.presented
            .iter()
            .find(|(b, _)| *b == broker)
            .map(|(_, p)| *p)
    }
}

/// A koord node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: i32,
    pub endpoints: Vec<Endpoint>,
}

impl Node {
    /// Its endpoint on the listener named `listener`.
    pub fn endpoint(&self, listener: &str) -> Option<&Endpoint> {
        self.endpoints.iter().find(|e| e.listener == listener)
    }
}

/// What this node does with one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardState {
    /// Its groups are served here.
    Owned,
    /// Assigned here; its groups are being read (COORDINATOR_LOAD_IN_PROGRESS).
    Loading,
    /// Another node serves it.
    Elsewhere(i32),
    /// Nobody serves it right now (being handed over, or no assignment yet).
    Unassigned,
}

/// Which node serves a group, as requests need to know it.
#[derive(Debug)]
pub struct Ownership {
    /// `None`: one node serves every group (standalone, or a gateway without `cluster.name`).
    cluster: Option<Cluster>,
}

#[derive(Debug)]
struct Cluster {
    node: i32,
    shards: i32,
    table: RwLock<Table>,
    /// Until when (the coordinator clock's ms) this node may serve its shards: the upstream
    /// group has heard from it within a session of then.
    lease_until: AtomicU64,
}

#[derive(Debug)]
struct Table {
    states: Vec<ShardState>,
    nodes: BTreeMap<i32, Node>,
}

impl Ownership {
    /// Every group is this node's.
    pub fn single() -> Ownership {
        Ownership { cluster: None }
    }

    /// Node `node` of a cluster whose groups are spread over `shards` shards; it serves none
    /// until its membership says so.
    pub fn cluster(node: i32, shards: i32) -> Ownership {
        let shards = shards.max(1);
        Ownership {
            cluster: Some(Cluster {
                node,
                shards,
                table: RwLock::new(Table {
                    states: vec![ShardState::Unassigned; shards as usize],
                    nodes: BTreeMap::new(),
                }),
                lease_until: AtomicU64::new(0),
            }),
        }
    }

    pub fn is_cluster(&self) -> bool {
        self.cluster.is_some()
    }

    /// The number of shards (1 outside a cluster).
    pub fn shards(&self) -> i32 {
        self.cluster.as_ref().map_or(1, |c| c.shards)
    }

    /// The shard of `group`.
    pub fn shard_of(&self, group: &str) -> i32 {
        self.cluster
            .as_ref()
            .map_or(0, |c| partition_of(group, c.shards))
    }

    fn table(c: &Cluster) -> std::sync::RwLockReadGuard<'_, Table> {
        c.table.read().unwrap_or_else(|e| e.into_inner())
    }

    fn table_mut(c: &Cluster) -> std::sync::RwLockWriteGuard<'_, Table> {
        c.table.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether this node serves `group` at `now`: NOT_COORDINATOR when another node does (or
    /// none, or this node's lease ran out), COORDINATOR_LOAD_IN_PROGRESS while it loads.
    ///
    /// # Errors
    /// Those two.
    pub fn admit(&self, group: &str, now: Timestamp) -> Result<(), GroupError> {
        let Some(c) = &self.cluster else {
            return Ok(());
        };
        let state = Self::table(c).states[partition_of(group, c.shards) as usize];
        match state {
            ShardState::Owned | ShardState::Loading
                if now.as_millis() >= c.lease_until.load(Ordering::Acquire) =>
            {
                Err(GroupError::NotCoordinator)
            }
            ShardState::Owned => Ok(()),
            ShardState::Loading => Err(GroupError::CoordinatorLoadInProgress),
            ShardState::Elsewhere(_) | ShardState::Unassigned => Err(GroupError::NotCoordinator),
        }
    }

    /// The node that serves `group` at `now`: `None` for this one (or outside a cluster), else
    /// the other node and its endpoint on listener `listener`.
    ///
    /// # Errors
    /// COORDINATOR_NOT_AVAILABLE while nobody serves it (or its node has no such listener),
    /// and while this node holds its shard with its lease run out (it answers NOT_COORDINATOR
    /// until it has rejoined; naming itself would send the client back to it).
    pub fn coordinator(
        &self,
        group: &str,
        listener: &str,
        now: Timestamp,
    ) -> Result<Option<(i32, Endpoint)>, GroupError> {
        let Some(c) = &self.cluster else {
            return Ok(None);
        };
        let table = Self::table(c);
        match table.states[partition_of(group, c.shards) as usize] {
            ShardState::Owned | ShardState::Loading
                if now.as_millis() >= c.lease_until.load(Ordering::Acquire) =>
            {
                Err(GroupError::CoordinatorNotAvailable)
            }
            ShardState::Owned | ShardState::Loading => Ok(None),
            ShardState::Elsewhere(n) => table
                .nodes
                .get(&n)
                .and_then(|node| node.endpoint(listener))
                .map(|e| Some((n, e.clone())))
                .ok_or(GroupError::CoordinatorNotAvailable),
            ShardState::Unassigned => Err(GroupError::CoordinatorNotAvailable),
        }
    }

    /// Every other node of the cluster, by id.
    pub fn others(&self) -> Vec<Node> {
        let Some(c) = &self.cluster else {
            return Vec::new();
        };
        Self::table(c)
            .nodes
            .values()
            .filter(|n| n.id != c.node)
            .cloned()
            .collect()
    }

    /// Each shard's state.
    pub fn states(&self) -> Vec<ShardState> {
        self.cluster.as_ref().map_or_else(
            || vec![ShardState::Owned],
            |c| Self::table(c).states.clone(),
        )
    }

    /// The shards this node has (owned or loading).
    pub fn held(&self) -> Vec<i32> {
        self.states()
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, ShardState::Owned | ShardState::Loading))
            .map(|(i, _)| i as i32)
            .collect()
    }

    /// Sets the state of `shards`.
    pub fn set(&self, shards: &[i32], state: ShardState) {
        let Some(c) = &self.cluster else { return };
        let mut t = Self::table_mut(c);
        for &s in shards {
            if let Some(slot) = t.states.get_mut(s as usize) {
                *slot = state;
            }
        }
    }

    /// Takes in the leader's table: the nodes, and who owns each shard this node does not
    /// hold (its own shards' states are the caller's to set).
    pub fn set_table(&self, owners: &[i32], nodes: Vec<Node>) {
        let Some(c) = &self.cluster else { return };
        let mut t = Self::table_mut(c);
        t.nodes = nodes.into_iter().map(|n| (n.id, n)).collect();
        for (shard, slot) in t.states.iter_mut().enumerate() {
            if matches!(slot, ShardState::Owned | ShardState::Loading) {
                continue;
            }
            *slot = match owners.get(shard) {
                Some(&n) if n >= 0 && n != c.node => ShardState::Elsewhere(n),
                _ => ShardState::Unassigned,
            };
        }
    }

    /// This node may serve its shards until `until` (the coordinator clock's ms).
    pub fn renew_lease(&self, until: Timestamp) {
        if let Some(c) = &self.cluster {
            c.lease_until.store(until.as_millis(), Ordering::Release);
        }
    }

    /// Whether the lease has run out at `now`.
    pub fn lease_expired(&self, now: Timestamp) -> bool {
        self.cluster
            .as_ref()
            .is_some_and(|c| now.as_millis() >= c.lease_until.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: i32, port: i32) -> Node {
        Node {
            id,
            endpoints: vec![Endpoint {
                listener: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port,
                presented: Vec::new(),
            }],
        }
    }

    #[test]
    fn outside_a_cluster_every_group_is_served_here() {
        let o = Ownership::single();
        assert_eq!(o.admit("g", Timestamp(0)), Ok(()));
        assert_eq!(o.coordinator("g", "PLAINTEXT", Timestamp(10)), Ok(None));
    }

    #[test]
    fn a_group_is_served_only_by_its_shard_s_owner_within_its_lease() {
        let o = Ownership::cluster(1, 2);
        let (mine, theirs) = ("a", "b");
        let (m, t) = (o.shard_of(mine), o.shard_of(theirs));
        assert_ne!(m, t, "the test needs two shards");
        assert_eq!(
            o.admit(mine, Timestamp(0)),
            Err(GroupError::NotCoordinator),
            "no assignment yet"
        );
        assert_eq!(
            o.coordinator(mine, "PLAINTEXT", Timestamp(10)),
            Err(GroupError::CoordinatorNotAvailable)
        );
        o.renew_lease(Timestamp(1_000));
        o.set(&[m], ShardState::Loading);
        let mut owners = vec![-1, -1];
        owners[t as usize] = 2;
        o.set_table(&owners, vec![node(1, 9001), node(2, 9002)]);
        assert_eq!(
            o.admit(mine, Timestamp(10)),
            Err(GroupError::CoordinatorLoadInProgress)
        );
        o.set(&[m], ShardState::Owned);
        assert_eq!(o.admit(mine, Timestamp(10)), Ok(()));
        assert_eq!(o.coordinator(mine, "PLAINTEXT", Timestamp(10)), Ok(None));
        assert_eq!(
            o.admit(theirs, Timestamp(10)),
            Err(GroupError::NotCoordinator)
        );
        let (n, e) = o
            .coordinator(theirs, "PLAINTEXT", Timestamp(10))
            .unwrap()
            .unwrap();
        assert_eq!((n, e.port), (2, 9002));
        assert_eq!(
            o.coordinator(theirs, "SSL", Timestamp(10)),
            Err(GroupError::CoordinatorNotAvailable)
        );
        assert_eq!(o.others(), vec![node(2, 9002)]);
        assert_eq!(o.held(), vec![m]);
        // The lease ran out: nothing is served here, even what the table says is owned, and
        // FindCoordinator names nobody until the node rejoined.
        assert_eq!(
            o.admit(mine, Timestamp(1_000)),
            Err(GroupError::NotCoordinator)
        );
        assert_eq!(
            o.coordinator(mine, "PLAINTEXT", Timestamp(1_000)),
            Err(GroupError::CoordinatorNotAvailable)
        );
        assert_eq!(
            o.coordinator(theirs, "PLAINTEXT", Timestamp(1_000))
                .map(|c| c.map(|(n, _)| n)),
            Ok(Some(2)),
            "another node's shard is named as before"
        );
        assert!(o.lease_expired(Timestamp(1_000)));
    }
}
