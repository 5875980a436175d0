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
    /// Gateway mode: the upstream broker the client's socket stands for (`None`: koord's own
    /// listener). A share consumer keeps a share session per broker it fetches from.
    pub stands_for: Option<i32>,
    /// The share sessions opened over this connection (ShareFetch), given up when it closes.
    pub share_sessions: ShareSessions,
}

/// The share sessions a connection opened, as Kafka's `ShareSessionCache` remembers the
/// connection of each: when the connection closes, the sessions it opened close and what their
/// members had acquired becomes available again (unless a newer connection opened the
/// member's session since).
#[derive(Debug, Clone)]
pub struct ShareSessions {
    /// This connection, as the sessions it opens name it.
    pub connection: u64,
    pub opened: Arc<std::sync::Mutex<std::collections::BTreeSet<(String, crate::vocab::MemberId)>>>,
}

impl Default for ShareSessions {
    fn default() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        ShareSessions {
            connection: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            opened: Arc::default(),
        }
    }
}

impl ShareSessions {
    /// `member` of `group` opened its session over this connection.
    pub fn opened(&self, group: &str, member: &crate::vocab::MemberId) {
        // Nothing is awaited while the lock is held.
        if let Ok(mut set) = self.opened.lock() {
            set.insert((group.to_owned(), member.clone()));
        }
    }

    /// The sessions to close, once the connection is gone.
    pub fn take(&self) -> Vec<(String, crate::vocab::MemberId)> {
        self.opened
            .lock()
            .map(|mut set| std::mem::take(&mut *set).into_iter().collect())
            .unwrap_or_default()
    }
}

impl RequestContext {
    /// The broker the client takes this connection's far end for: the upstream broker the
    /// socket stands for in gateway mode, koord itself otherwise.
    pub fn node(&self, broker: &Broker) -> i32 {
        self.stands_for.unwrap_or_else(|| broker.node_id())
    }

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
            stands_for: None,
            share_sessions: ShareSessions::default(),
        }
    }
}
