//! The state every API handler shares: configuration, cluster identity, topics, partition logs
//! (which also carry the appends' wake-ups for Fetch long-polls) and the producer id allocator.
//!
//! One `Arc<Broker>` is built at start-up and handed to every connection. Each part guards
//! itself (see each module); no lock is held across an `.await`.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::Config;
use crate::coordinator::{Clock, Coordinator, Settings};
use crate::log::Logs;
use crate::metadata::{CreateError, Topic, Topics};

/// File under the data dir that keeps the generated cluster id.
const CLUSTER_ID_FILE: &str = "cluster.id";

pub struct Broker {
    pub config: Config,
    /// Reported by Metadata (v2+) and DescribeCluster.
    pub cluster_id: String,
    pub topics: Arc<Topics>,
    /// `host`, `port` clients are told to connect to.
    pub advertised_host: String,
    pub advertised_port: i32,
    /// Every partition's in-memory log, bounded by `log.retention.bytes`.
    pub logs: Logs,
    /// Producer ids handed out by InitProducerId.
    pub producer_ids: ProducerIds,
    /// The group directory: every consumer group and its offsets.
    pub coordinator: Arc<Coordinator>,
}

/// Allocates producer ids: a counter, never reusing an id within a run.
///
/// Logs are in memory, but producers outlive a restart and keep their ids; starting the counter
/// at the wall clock in milliseconds keeps a restarted koord from handing a live producer's id to
/// another one (Kafka persists its id blocks instead). Ids stay far below `i64::MAX`.
#[derive(Debug)]
pub struct ProducerIds {
    next: AtomicI64,
}

impl ProducerIds {
    /// A counter starting at `first`.
    pub fn starting_at(first: i64) -> ProducerIds {
        ProducerIds {
            next: AtomicI64::new(first.max(0)),
        }
    }

    /// A counter starting at the current time in milliseconds since the Unix epoch.
    pub fn from_clock() -> ProducerIds {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0));
        ProducerIds::starting_at(ms)
    }

    /// A fresh producer id.
    pub fn allocate(&self) -> i64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

impl Broker {
    /// Builds the node's state: creates the data dir if needed, settles the cluster id and
    /// creates the configured topics.
    ///
    /// # Errors
    /// The data dir cannot be created, or its cluster id file cannot be read or written.
    pub fn new(config: Config) -> io::Result<Broker> {
        std::fs::create_dir_all(&config.data_dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create data dir {}: {e}", config.data_dir.display()),
            )
        })?;
        let cluster_id = if config.cluster_id.is_empty() {
            load_or_create_cluster_id(&config.data_dir)?
        } else {
            config.cluster_id.clone()
        };
        let topics = Arc::new(Topics::default());
        for t in &config.topics {
            topics
                .create(&t.name, t.partitions)
                .map_err(|e| io::Error::other(format!("topic {}: {e:?}", t.name)))?;
        }
        let (advertised_host, advertised_port) = config.advertised();
        let logs = Logs::new(config.log_retention_bytes);
        let coordinator = Coordinator::new(
            Settings::from_config(&config, topics.clone()),
            Clock::system(),
        );
        Ok(Broker {
            config,
            cluster_id,
            topics,
            advertised_host,
            advertised_port,
            logs,
            producer_ids: ProducerIds::from_clock(),
            coordinator,
        })
    }

    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// Looks a topic up; creates it with `num.partitions` when `auto_create` is asked and
    /// `auto.create.topics.enable` allows it.
    pub fn topic_for_metadata(
        &self,
        name: &str,
        auto_create: bool,
    ) -> Result<Option<Topic>, CreateError> {
        if let Some(t) = self.topics.get(name) {
            return Ok(Some(t));
        }
        if !(auto_create && self.config.auto_create_topics_enable) {
            return Ok(None);
        }
        let topic = self
            .topics
            .get_or_create(name, self.config.num_partitions)?;
        tracing::info!(
            topic = name,
            partitions = topic.partitions,
            "auto-created topic"
        );
        Ok(Some(topic))
    }
}

fn load_or_create_cluster_id(dir: &Path) -> io::Result<String> {
    let path = dir.join(CLUSTER_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is empty", path.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let id = base64url(uuid::Uuid::new_v4().as_bytes());
            let tmp = dir.join(format!("{CLUSTER_ID_FILE}.tmp"));
            std::fs::write(&tmp, format!("{id}\n"))?;
            std::fs::rename(&tmp, &path)?;
            Ok(id)
        }
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

/// Kafka's cluster id format: URL-safe base64 of 16 random bytes, no padding (22 characters).
fn base64url(bytes: &[u8; 16]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(22);
    let mut acc = 0u32;
    let mut bits = 0;
    for &b in bytes {
        acc = (acc << 8) | b as u32;
        bits += 8;
        while bits >= 6 {
            bits -= 6;
            out.push(ALPHABET[((acc >> bits) & 63) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((acc << (6 - bits)) & 63) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_id_is_22_url_safe_chars_and_kept() {
        let dir = std::env::temp_dir().join(format!("koord-broker-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = load_or_create_cluster_id(&dir).err();
        assert!(
            first.is_some(),
            "missing dir is an error here; Broker::new creates it"
        );
        std::fs::create_dir_all(&dir).unwrap();
        let id = load_or_create_cluster_id(&dir).unwrap();
        assert_eq!(id.len(), 22);
        assert!(id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(load_or_create_cluster_id(&dir).unwrap(), id);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn producer_ids_are_fresh() {
        let ids = ProducerIds::starting_at(5);
        assert_eq!((ids.allocate(), ids.allocate()), (5, 6));
        assert!(ProducerIds::from_clock().allocate() > 1_600_000_000_000);
    }

    #[test]
    fn base64url_known_value() {
        assert_eq!(base64url(&[0u8; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(base64url(&[0xff; 16]), "_____________________w");
    }
}
