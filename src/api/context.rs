//! What a request is run with beside itself ([`RequestContext`]), and what the connection does
//! after it ([`Outcome`]): the vocabulary of every API handler and of the dispatch table, kept
//! apart from both so that neither imports the other.

use std::net::SocketAddr;
use std::sync::Arc;

use kafka_protocol::messages::ResponseKind;

use crate::broker::Broker;
use crate::security::{Listener, Principal};

/// What the connection does after a request.
#[derive(Debug)]
pub enum Outcome {
    /// Write this response.
    Respond(Box<ResponseKind>),
    /// Write nothing (Produce with acks=0), read the next request.
    Silent,
    /// Close the connection.
    Close,
}

/// Who sent a request, and over what: what every API may need beyond the request itself.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The client's address (JoinGroup records it as the member's host).
    pub peer: SocketAddr,
    /// The listener the client came in on: Metadata, FindCoordinator and DescribeCluster
    /// advertise it.
    pub listener: Arc<Listener>,
    /// Whom the connection authenticated as (ANONYMOUS without authentication).
    pub principal: Principal,
    /// The client's IP address as ACL hosts name it, made once per connection for the
    /// authorizer.
    pub peer_host: Arc<str>,
}

impl RequestContext {
    /// A context for `peer` on a PLAINTEXT listener advertising `broker`'s address.
    pub fn plaintext(broker: &Broker, peer: SocketAddr) -> RequestContext {
        RequestContext {
            peer,
            peer_host: peer.ip().to_string().into(),
            listener: Arc::new(Listener {
                name: "PLAINTEXT".into(),
                protocol: crate::security::SecurityProtocol::Plaintext,
                bind_host: broker.advertised_host.clone(),
                bind_port: u16::try_from(broker.advertised_port).unwrap_or(0),
                advertised_host: broker.advertised_host.clone(),
                advertised_port: broker.advertised_port,
            }),
            principal: Principal::anonymous(),
        }
    }
}
