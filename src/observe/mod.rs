//! Observability: the metrics registry every layer records into ([`metrics`]), the group
//! history and snapshots the status page shows ([`status`], [`page`]), and the HTTP listener
//! that serves them with `/healthz` and `/readyz` ([`http`]).
//!
//! Nothing here runs inside a group core: the actors record what their cores' outputs say.

pub mod http;
pub mod metrics;
pub mod page;
pub mod status;

pub use metrics::metrics;
