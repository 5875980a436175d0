//! Cluster mode (`cluster.name`, gateway mode): several koord nodes in front of one Kafka share
//! the groups, with Kafka itself as the distributed engine.
//!
//! A group's shard is its partition of koord's topic (`upstream.groups.topic.name`,
//! [`crate::vocab::partition_of`]). The nodes of one cluster are the members of a
//! classic group upstream (`koord-cluster-<cluster.name>`), and the shards assigned to a node
//! are the groups it serves: its leader assigns them ([`assign`]), cooperatively, so a shard
//! leaves its owner before the next one takes it. A node that gains a shard loads its groups
//! from the topic (COORDINATOR_LOAD_IN_PROGRESS meanwhile); one that loses it answers
//! NOT_COORDINATOR at once, lets its writes for the shard finish, drops its groups, and only
//! then gives it up. A node that has not heard from the upstream group for a session stops
//! serving everything before upstream could give its shards away (its lease).
//!
//! - [`assign`]: the leader's assignment (pure);
//! - [`wire`]: the join metadata and assignment bytes (pure);
//! - [`member`]: the node's membership in the upstream group, and the loading and dropping of
//!   shards it decides;
//! - [`Ownership`]: the table every request consults: which shards this node serves, who
//!   serves the others, and where clients reach each node (and the ports on which it presents
//!   each upstream broker, where another node passes on a share group's fetches:
//!   [`crate::gateway::conn`]).

pub mod assign;
pub mod member;
pub mod wire;

pub use crate::coordinator::ownership::{Endpoint, Node, Ownership, ShardState};
