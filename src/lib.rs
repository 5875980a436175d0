//! koord: a standalone Kafka group coordinator.
//!
//! One binary that speaks the Kafka wire protocol, so that unmodified Kafka clients can connect,
//! see topics, produce, consume and (in later modules) form consumer groups against it.
//!
//! Crate map:
//! - [`config`]: typed configuration. One table of keys (dotted Kafka-style names, defaults,
//!   the Apache Kafka setting each mirrors) serves the TOML file, `--set KEY=VALUE` and
//!   `koord check-config`.
//! - [`server`]: the async shell. [`server::run`] accepts connections up to `max.connections`;
//!   [`server::connection`] serves any byte stream one request at a time, in order, and decides
//!   when answers are flushed; [`server::frame`] cuts requests out of it (4-byte length,
//!   `socket.request.max.bytes` cap checked before any allocation); [`server::codec`] decodes
//!   headers and bodies with the `kafka-protocol` crate and encodes responses.
//! - [`api`]: one module per Kafka API. Stateless validation, then the answer at the request's
//!   version. [`api::SUPPORTED`] is THE table of supported APIs and versions, which also builds
//!   the ApiVersions response; [`api::dispatch`] hands a decoded request to its module.
//! - [`security`]: listeners per security protocol (Kafka's `listeners` settings), TLS
//!   (rustls), SASL PLAIN and SCRAM-SHA-256/512 with re-authentication, the SCRAM users, the
//!   [`security::Principal`] every request is dispatched with, and the ACLs with Kafka's
//!   authorization rules ([`security::acl`], pure; [`security::authorizer`], opt-in with
//!   `authorizer.class.name`), which every API asks through `api::RequestContext::may`.
//! - [`backend`]: what lies behind koord's own groups, chosen at start-up: nothing standalone,
//!   the upstream cluster in gateway mode (offsets kept there, upstream's own groups, its
//!   transactions and topics). Handlers call it and never ask which mode they run in.
//! - [`broker`]: the state every API shares: configuration, topics, partition logs, producer ids.
//! - [`metadata`]: the topics this node knows (configured or created at run time), their ids and
//!   partition counts, and Kafka's topic-name rules.
//! - [`coordinator`]: the group directory (`DashMap`) and the shard tasks that own the groups
//!   (each group has one owner, the shard its id hashes to): a group's core and offsets, its
//!   parked JoinGroup/SyncGroup replies, and the core's timers.
//! - [`group`]: the PURE group state machines (no tokio, no clock, no I/O): the classic
//!   consumer-group protocol ([`group::ClassicGroup`]: JoinGroup, SyncGroup, Heartbeat,
//!   LeaveGroup, the group checks of OffsetCommit), driven by `handle_*` inputs that take `now`
//!   and drained through `poll_output` (replies to parked requests, keyed timers, records).
//! - [`assignor`]: server-side assignment, PURE: the [`assignor::Assignor`] trait over an
//!   interned group spec, the built-in `range`, `roundrobin` and `uniform`, the consumer
//!   protocol codec, the bridge the group core calls when a join phase ends (with the cooperative
//!   two-step rule), and which assignor serves which group.
//! - [`offsets`]: committed offsets, pure: the per-partition OffsetCommit rules (metadata size,
//!   v2-4 retention), OffsetFetch, retention, and the [`offsets::OffsetStore`] trait.
//! - [`offsets_topic`]: `__consumer_offsets` in standalone mode, written from the store's writes
//!   in Kafka's record format.
//! - [`log`]: the in-memory partition logs behind Produce, Fetch, ListOffsets and
//!   OffsetForLeaderEpoch: v2 batch validation (lengths, magic, CRC32C), contiguous offsets,
//!   idempotent producer state, retention by `log.retention.bytes` per partition, and the
//!   append wake-ups that end Fetch long-polls. Memory-only by design.
//! - [`simulate`]: `koord simulate`, a deterministic simulator of rebalances over the same
//!   group core and assignors (simulated clock, members and store; no sockets): rebalance
//!   counts, per-task downtime, time until balanced, and an SVG timeline.
//! - [`metrics`]: the metrics registry every layer records into (Prometheus text at
//!   `/metrics`): a leaf, so the lowest layers may record.
//! - [`observe`]: the HTTP listener (`http.listen`) serving the metrics, the groups' status
//!   snapshots and rebalance history ([`coordinator::status`]) with `/healthz`, `/readyz` and a
//!   self-refreshing status page.
//! - [`txn`]: the PURE transaction coordinator (no tokio, no clock, no I/O): transactional ids,
//!   producer epochs and fencing, the transaction states and timeouts; its inputs take `now` and
//!   return the records to persist and the markers to write.
//! - [`transactions`]: the transaction coordinator's shell: the pure core behind a lock, its
//!   records made durable before any answer, its markers written into the partition logs, and
//!   the timers that abort timed-out transactions and forget expired ids.
//! - [`gateway`]: gateway mode (`upstream.bootstrap.servers`): koord in front of an existing
//!   Kafka cluster, one listener port per upstream broker; partition and admin requests
//!   forwarded over pooled upstream connections (bytes passed through, correlation ids mapped),
//!   Metadata, DescribeCluster and FindCoordinator(transaction) rewritten to koord's endpoints,
//!   the groups koord's own.
//! - [`dead_letter`]: the share groups' dead-letter queues (KIP-1191): the records a group
//!   gives up on, written to its queue topic and then archived.
//! - [`svg`]: the SVG pieces the simulator's timeline and the status page share.

pub mod api;
pub mod assignor;
pub mod backend;
pub mod broker;
pub mod config;
pub mod coordinator;
pub mod dead_letter;
pub mod gateway;
pub mod group;
pub mod log;
pub mod metadata;
pub mod metrics;
pub mod observe;
pub mod offsets;
pub mod offsets_topic;
pub mod quota;
pub mod security;
pub mod server;
pub mod simulate;
pub mod storage;
pub mod svg;
pub mod telemetry;
pub mod transactions;
pub mod txn;
pub mod vocab;
