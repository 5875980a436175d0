//! Observability over HTTP: the listener that serves `/metrics` ([`crate::metrics`]), the
//! status page of the groups' snapshots and history ([`crate::coordinator::status`],
//! [`page`]), `/healthz` and `/readyz` ([`http`]).
//!
//! Nothing here runs inside a group core: the actors record what their cores' outputs say.

pub mod http;
pub mod page;
