//! The topics this node knows: configured at start-up or created at run time (CreateTopics, or
//! Metadata with auto-creation). This node is the only broker, so it leads every partition at
//! leader epoch 0. Group configs (per-group overrides of group settings) are kept beside them
//! ([`group_config`]).
//!
//! A topic's id is random, given at creation and stored with it, as Kafka's controller does: a
//! topic deleted and created again under the same name is another topic, with another id.
//! Topics stored before ids were keep the id koord derived from their name then
//! ([`name_based_id`]).

pub mod group_config;
pub mod topic_config;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use uuid::Uuid;

use crate::vocab::TopicId;

use topic_config::TopicConfigs;

/// The leader epoch of every partition: one broker, never a leader change.
pub const LEADER_EPOCH: i32 = 0;

/// Kafka's internal topics (`Topic.isInternal`): the groups', the transactions' and the share
/// groups' state.
pub fn is_internal(name: &str) -> bool {
    matches!(
        name,
        "__consumer_offsets" | "__transaction_state" | "__share_group_state"
    )
}

/// Kafka's `Topic.validate`: a legal topic name.
///
/// # Errors
/// A message in Kafka's words when the name is empty, `.` or `..`, longer than 249 characters,
/// or has a character outside `[a-zA-Z0-9._-]`.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return Err("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > 249 {
        return Err(format!(
            "Topic name is illegal, it can't be longer than 249 characters, topic name: {name}"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// A topic: its stable id and partition count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
}

/// Why a topic could not be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateError {
    AlreadyExists,
    InvalidName(String),
}

/// The id koord gave topic `name` before it stored ids (a version-5 UUID in a namespace of
/// koord's own, never the nil id): what a topic stored without an id keeps, and what a
/// gateway's upstream answer without ids is given.
pub fn name_based_id(name: &str) -> Uuid {
    const NAMESPACE: Uuid = Uuid::from_u128(0x6b6f_6f72_645f_746f_7069_635f_6964_7321);
    Uuid::new_v5(&NAMESPACE, name.as_bytes())
}

/// A new topic id: random, never the nil id nor Kafka's sentinel ids (Kafka's
/// `Uuid.randomUuid` skips the same: the reserved `Uuid.METADATA_TOPIC_ID` (1) and ids whose
/// base64 form starts with '-', which command lines take for options).
pub fn new_topic_id() -> Uuid {
    loop {
        let id = Uuid::new_v4();
        if id.as_u128() > 1 && id.as_bytes()[0] >> 2 != 62 {
            return id;
        }
    }
}

/// All topics, by name and by id. Reads vastly outnumber creations, hence the `RwLock`; no lock
/// is held across an `.await`.
#[derive(Debug, Default)]
pub struct Topics {
    inner: RwLock<TopicsInner>,
    /// Bumped by every creation and deletion: consumer groups re-check their subscribed topics
    /// when it moves ([`Topics::version`]).
    version: AtomicU64,
}

#[derive(Debug, Default)]
struct TopicsInner {
    by_name: BTreeMap<String, Topic>,
    by_id: BTreeMap<Uuid, String>,
    /// Each topic's explicitly set configs; a topic without an entry has none.
    configs: BTreeMap<String, TopicConfigs>,
}

impl Topics {
    /// Moves with every creation, deletion and partition count change: consumer groups
    /// re-check their subscribed topics when it does.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The id and partition count of topic `name`, without copying its record.
    pub fn id_and_partitions(&self, name: &str) -> Option<(TopicId, i32)> {
        self.read().by_name.get(name).map(|t| (t.id, t.partitions))
    }

    /// Every topic's name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.read().by_name.keys().cloned().collect()
    }

    /// The name of the topic with id `id`.
    pub fn name_of(&self, id: TopicId) -> Option<String> {
        self.read().by_id.get(&id).cloned()
    }

    pub fn get(&self, name: &str) -> Option<Topic> {
        self.read().by_name.get(name).cloned()
    }

    pub fn get_by_id(&self, id: Uuid) -> Option<Topic> {
        let inner = self.read();
        inner
            .by_id
            .get(&id)
            .and_then(|n| inner.by_name.get(n))
            .cloned()
    }

    /// Every topic, sorted by name.
    pub fn all(&self) -> Vec<Topic> {
        self.read().by_name.values().cloned().collect()
    }

    /// Creates a topic under a new random id.
    ///
    /// # Errors
    /// [`CreateError::InvalidName`] for a name Kafka rejects, [`CreateError::AlreadyExists`] if it
    /// exists (a racing creator of the same topic sees this).
    pub fn create(&self, name: &str, partitions: i32) -> Result<Topic, CreateError> {
        self.restore(Topic {
            name: name.to_string(),
            id: new_topic_id(),
            partitions,
        })
    }

    /// Adds a topic as it was stored, id and all.
    ///
    /// # Errors
    /// As [`Topics::create`]; [`CreateError::AlreadyExists`] also for an id in use.
    pub fn restore(&self, topic: Topic) -> Result<Topic, CreateError> {
        validate_topic_name(&topic.name).map_err(CreateError::InvalidName)?;
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if inner.by_name.contains_key(&topic.name) || inner.by_id.contains_key(&topic.id) {
            return Err(CreateError::AlreadyExists);
        }
        inner.by_id.insert(topic.id, topic.name.clone());
        inner.by_name.insert(topic.name.clone(), topic.clone());
        self.version.fetch_add(1, Ordering::Release);
        Ok(topic)
    }

    /// Returns the topic, creating it with `partitions` if it does not exist.
    pub fn get_or_create(&self, name: &str, partitions: i32) -> Result<Topic, CreateError> {
        if let Some(t) = self.get(name) {
            return Ok(t);
        }
        match self.create(name, partitions) {
            Err(CreateError::AlreadyExists) => self.get(name).ok_or(CreateError::AlreadyExists),
            other => other,
        }
    }

    /// Raises topic `name` to `partitions` (CreatePartitions); a count that is not larger
    /// changes nothing. Returns the topic as it now is, `None` if it does not exist. The new
    /// partitions' logs are created on first use ([`crate::log::Logs::partition`]).
    pub fn add_partitions(&self, name: &str, partitions: i32) -> Option<Topic> {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let topic = inner.by_name.get_mut(name)?;
        if partitions > topic.partitions {
            topic.partitions = partitions;
            self.version.fetch_add(1, Ordering::Release);
        }
        Some(topic.clone())
    }

    /// The explicitly set configs of topic `name` (empty if none or no such topic).
    pub fn configs(&self, name: &str) -> TopicConfigs {
        self.read().configs.get(name).cloned().unwrap_or_default()
    }

    /// Replaces the explicitly set configs of topic `name`.
    pub fn set_configs(&self, name: &str, configs: TopicConfigs) {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if configs.is_empty() {
            inner.configs.remove(name);
        } else {
            inner.configs.insert(name.to_string(), configs);
        }
    }

    /// Removes a topic (DeleteTopics); `None` if it does not exist.
    pub fn delete(&self, name: &str) -> Option<Topic> {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let topic = inner.by_name.remove(name)?;
        inner.by_id.remove(&topic.id);
        // A topic created again under this name starts with Kafka's defaults.
        inner.configs.remove(name);
        self.version.fetch_add(1, Ordering::Release);
        Some(topic)
    }

    /// Makes these topics what an upstream cluster says they are (gateway mode): each is
    /// added, or its id and partition count updated; with `complete` (the upstream's whole
    /// topic list), topics not among them are removed. A nil id is an answer that carries no
    /// ids (Metadata before v10): the topic keeps the id it has, and one not known yet gets
    /// [`name_based_id`] until an answer with its id comes. In memory only: the upstream owns
    /// them.
    pub fn mirror(&self, topics: &[Topic], complete: bool) {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let mut changed = false;
        for t in topics {
            let known = inner.by_name.get(&t.name).map(|k| k.id);
            let t = &Topic {
                id: match (t.id.is_nil(), known) {
                    (false, _) => t.id,
                    (true, Some(id)) => id,
                    (true, None) => name_based_id(&t.name),
                },
                ..t.clone()
            };
            if inner.by_name.get(&t.name) == Some(t) {
                continue;
            }
            if let Some(old) = inner.by_name.insert(t.name.clone(), t.clone()) {
                inner.by_id.remove(&old.id);
            }
            inner.by_id.insert(t.id, t.name.clone());
            changed = true;
        }
        if complete {
            let keep: std::collections::BTreeSet<&str> =
                topics.iter().map(|t| t.name.as_str()).collect();
            let gone: Vec<String> = inner
                .by_name
                .keys()
                .filter(|n| !keep.contains(n.as_str()))
                .cloned()
                .collect();
            for name in gone {
                if let Some(t) = inner.by_name.remove(&name) {
                    inner.by_id.remove(&t.id);
                    inner.configs.remove(&name);
                    changed = true;
                }
            }
        }
        if changed {
            self.version.fetch_add(1, Ordering::Release);
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, TopicsInner> {
        // A poisoned lock only means another thread panicked mid-read; the map is still whole
        // because every write is a pair of inserts done before the guard drops.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kafka_rules() {
        assert!(validate_topic_name("orders.v1_x-2").is_ok());
        for bad in ["", ".", "..", "a b", "ü", &"x".repeat(250)] {
            assert!(validate_topic_name(bad).is_err(), "{bad:?}");
        }
        assert!(validate_topic_name(&"x".repeat(249)).is_ok());
    }

    #[test]
    fn mirror_follows_upstream_ids_counts_and_deletions() {
        let topics = Topics::default();
        topics.create("local", 1).unwrap();
        let up = |name: &str, id: u128, partitions| Topic {
            name: name.into(),
            id: Uuid::from_u128(id),
            partitions,
        };
        let v0 = topics.version();
        topics.mirror(&[up("a", 1, 3), up("b", 2, 1)], false);
        assert_eq!(topics.get("a"), Some(up("a", 1, 3)));
        assert_eq!(topics.get_by_id(Uuid::from_u128(2)).unwrap().name, "b");
        assert!(
            topics.get("local").is_some(),
            "a partial answer removes nothing"
        );
        assert!(topics.version() > v0);
        let v1 = topics.version();
        topics.mirror(&[up("a", 1, 3)], false);
        assert_eq!(topics.version(), v1, "nothing changed, no new version");
        // Recreated upstream under a new id, with more partitions; b and local are gone.
        topics.mirror(&[up("a", 9, 5)], true);
        assert_eq!(topics.get("a"), Some(up("a", 9, 5)));
        assert!(topics.get_by_id(Uuid::from_u128(1)).is_none());
        assert!(topics.get("b").is_none() && topics.get("local").is_none());
        assert_eq!(topics.all().len(), 1);
        // An answer without ids (Metadata before v10) keeps the id known; a new topic gets
        // the name-based one until its id comes.
        let v2 = topics.version();
        topics.mirror(&[up("a", 0, 5), up("c", 0, 1)], false);
        assert_eq!(topics.get("a"), Some(up("a", 9, 5)));
        let c = topics.get("c").unwrap();
        assert_eq!(c.id, name_based_id("c"));
        topics.mirror(&[up("c", 12, 1)], false);
        assert_eq!(topics.get_by_id(Uuid::from_u128(12)).unwrap().name, "c");
        assert!(topics.get_by_id(name_based_id("c")).is_none());
        assert!(topics.version() > v2);
    }

    #[test]
    fn name_based_ids_are_stable_and_distinct() {
        assert_eq!(name_based_id("a"), name_based_id("a"));
        assert_ne!(name_based_id("a"), name_based_id("b"));
        assert!(!name_based_id("a").is_nil());
    }

    #[test]
    fn a_topic_created_again_is_another_topic() {
        let t = Topics::default();
        let first = t.create("a", 1).unwrap();
        t.delete("a");
        let second = t.create("a", 1).unwrap();
        assert_ne!(first.id, second.id);
        assert!(t.get_by_id(first.id).is_none());
        assert_eq!(t.name_of(second.id).as_deref(), Some("a"));
    }

    #[test]
    fn restore_keeps_the_stored_id_and_refuses_a_taken_one() {
        let t = Topics::default();
        let stored = Topic {
            name: "a".into(),
            id: Uuid::from_u128(42),
            partitions: 2,
        };
        assert_eq!(t.restore(stored.clone()), Ok(stored.clone()));
        assert_eq!(t.get_by_id(Uuid::from_u128(42)), Some(stored.clone()));
        let same_id = Topic {
            name: "b".into(),
            ..stored
        };
        assert_eq!(t.restore(same_id), Err(CreateError::AlreadyExists));
    }

    #[test]
    fn create_and_lookup() {
        let t = Topics::default();
        let a = t.create("a", 3).unwrap();
        assert_eq!(t.create("a", 3), Err(CreateError::AlreadyExists));
        assert_eq!(t.get_by_id(a.id), Some(a.clone()));
        assert_eq!(t.get_or_create("a", 9).unwrap().partitions, 3);
        assert_eq!(t.get_or_create("b", 2).unwrap().partitions, 2);
        assert_eq!(t.all().len(), 2);
        assert!(matches!(
            t.create("bad name", 1),
            Err(CreateError::InvalidName(_))
        ));
    }

    #[test]
    fn add_partitions_only_grows() {
        let t = Topics::default();
        let a = t.create("a", 2).unwrap();
        assert_eq!(t.add_partitions("a", 5).map(|t| t.partitions), Some(5));
        assert_eq!(t.add_partitions("a", 3).map(|t| t.partitions), Some(5));
        assert_eq!(t.get_by_id(a.id).map(|t| t.partitions), Some(5));
        assert_eq!(t.add_partitions("b", 5), None);
    }

    #[test]
    fn delete_removes_by_name_and_id() {
        let t = Topics::default();
        let a = t.create("a", 3).unwrap();
        assert_eq!(t.delete("a"), Some(a.clone()));
        assert_eq!(t.delete("a"), None);
        assert_eq!((t.get("a"), t.get_by_id(a.id)), (None, None));
        assert_eq!(t.create("a", 1).unwrap().partitions, 1);
    }
}
