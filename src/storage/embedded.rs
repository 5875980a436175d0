//! The embedded [`Store`]: one redb file, `koord.redb`, under the data dir.
//!
//! redb (a copy-on-write B-tree with checksummed commits) was measured against fjall on the
//! offset-commit workload (bench/storecmp, BENCHMARKS.md): equal throughput at large batches,
//! a file that stays the size of the live data (freed pages are reused), and a start-up scan of
//! 1M offsets in ~0.15 s against ~5 s for fjall's journal replay.
//!
//! Tables: `offsets` (key: group, topic, partition; see [`super::codec`]), `groups` (key: the
//! group id; classic groups), `consumer_groups` and `consumer_members` (consumer groups: key the
//! group id, and group and member id), `topics` (key: the name), `txns` (key: the transactional
//! id), `acls` (key: the ACL binding), `pending_offsets` (key: group, producer id, topic,
//! partition) and `meta` (the format version).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use redb::{
    Database, DatabaseError, Durability, ReadTransaction, ReadableDatabase, ReadableTable,
    TableDefinition, WriteTransaction,
};

use super::codec;
use super::{
    LoadedConsumerGroup, LoadedGroup, LoadedStreamsGroup, Mutation, Store, StoreError, StoredTopic,
};
use crate::security::credentials::CredentialChange;
use crate::vocab::{GroupId, TxnRecord};

const OFFSETS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("offsets");
const GROUPS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("groups");
const TOPICS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("topics");
const META: TableDefinition<&str, u32> = TableDefinition::new("meta");
/// Consumer groups (KIP-848): the group-level record by group id, and each member's record by
/// group and member id. Tables added to format 1: a file without them gets them when opened.
const CONSUMER_GROUPS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("consumer_groups");
const CONSUMER_MEMBERS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("consumer_members");
/// Streams groups (KIP-1071), laid out as the consumer-group tables. Added to format 1 as those
/// were.
const STREAMS_GROUPS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("streams_groups");
const STREAMS_MEMBERS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("streams_members");
/// SCRAM credentials: key the mechanism's code and the user name, value the credential. Added
/// to format 1 like the consumer-group tables.
const CREDENTIALS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("scram_credentials");
/// Transactional ids' states by transactional id. Added to format 1 as the consumer tables were.
const TXNS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("txns");
/// Pending transactional offsets (TxnOffsetCommit before its marker): key group, producer id,
/// topic, partition. Added to format 1 as the consumer tables were.
const PENDING: TableDefinition<&[u8], &[u8]> = TableDefinition::new("pending_offsets");

/// ACL bindings: the whole binding is the key ([`codec::acl_key`]), the value a version byte.
/// Added to format 1 as the consumer tables were.
const ACLS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("acls");

/// The layout version this build writes and reads.
const FORMAT: u32 = 1;

/// The store file's name under the data dir.
pub const FILE_NAME: &str = "koord.redb";

/// redb's page cache (see [`EmbeddedStore::open`]).
const CACHE_BYTES: usize = 4 << 20;

/// Opens the database file (again).
pub(super) type Opener = Box<dyn Fn() -> Result<Database, String> + Send + Sync>;

pub struct EmbeddedStore {
    /// `None` while closed after a write error (see [`EmbeddedStore::apply`]).
    db: Mutex<Option<Database>>,
    open: Opener,
    path: PathBuf,
}

impl EmbeddedStore {
    /// Opens (or creates) the store under `dir`, which is created if missing.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming the file: it is damaged or truncated, of an unknown format
    /// version, or open in another process.
    pub fn open(dir: &Path) -> Result<EmbeddedStore, StoreError> {
        let path = dir.join(FILE_NAME);
        let corrupt = |message: String| StoreError::Corrupt {
            path: path.clone(),
            message,
        };
        std::fs::create_dir_all(dir)
            .map_err(|e| corrupt(format!("cannot create the directory: {e}")))?;
        // redb would take an empty file for a new store; ours was truncated to nothing.
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == 0) {
            return Err(corrupt(
                "the file is empty (truncated?); move it away to start with an empty store".into(),
            ));
        }
        // redb's page cache defaults to 1 GiB, filled by every page a transaction touches.
        // Everything koord reads is read once, at start-up (the live state is in the group
        // actors), so a small cache costs nothing: 4 MiB holds the tree's upper levels and the
        // pages being written. At 16 MiB it held every group record written, about 170 B per
        // member with 100,000 idle members.
        let file = path.clone();
        let open = move || {
            Database::builder()
                .set_cache_size(CACHE_BYTES)
                .create(&file)
        };
        EmbeddedStore::open_with(path, Box::new(move || catch_assertion(&open)))
    }

    /// The store opened by `open` (the file at `path` with redb's own I/O, or under test a
    /// backend that can fail).
    pub(super) fn open_with(path: PathBuf, open: Opener) -> Result<EmbeddedStore, StoreError> {
        let corrupt = |message: String| StoreError::Corrupt {
            path: path.clone(),
            message,
        };
        let db = open().map_err(corrupt)?;
        EmbeddedStore::init(&db).map_err(corrupt)?;
        Ok(EmbeddedStore {
            db: Mutex::new(Some(db)),
            open,
            path,
        })
    }

    fn db(&self) -> MutexGuard<'_, Option<Database>> {
        self.db.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the tables and checks (or, in a new file, writes) the format version.
    fn init(db: &Database) -> Result<(), String> {
        let tx = db.begin_write().map_err(|e| e.to_string())?;
        {
            let mut meta = tx.open_table(META).map_err(|e| e.to_string())?;
            let found = meta
                .get("format")
                .map_err(|e| e.to_string())?
                .map(|v| v.value());
            match found {
                None => {
                    meta.insert("format", FORMAT).map_err(|e| e.to_string())?;
                }
                Some(FORMAT) => {}
                Some(v) => {
                    return Err(format!(
                        "format version {v}, this koord reads version {FORMAT}"
                    ))
                }
            }
            for table in [
                OFFSETS,
                GROUPS,
                TOPICS,
                CONSUMER_GROUPS,
                CONSUMER_MEMBERS,
                CREDENTIALS,
                TXNS,
                ACLS,
                PENDING,
                STREAMS_GROUPS,
                STREAMS_MEMBERS,
            ] {
                tx.open_table(table).map_err(|e| e.to_string())?;
            }
        }
        tx.commit().map_err(|e| e.to_string())
    }

    /// A read transaction (reads come at start-up, before any write could have closed it).
    fn read(&self) -> Result<ReadTransaction, StoreError> {
        let db = self.db();
        let db = db
            .as_ref()
            .ok_or_else(|| self.corrupt("the store is closed after a write error"))?;
        db.begin_read().map_err(|e| self.corrupt(e))
    }

    fn corrupt(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            message: message.to_string(),
        }
    }

    fn commit(db: &Database, batch: &[Mutation], durable: bool) -> Result<(), redb::Error> {
        let mut tx = db.begin_write()?;
        if !durable {
            tx.set_durability(Durability::None)?;
        }
        // On an error the transaction is dropped unapplied: nothing of the batch is stored.
        Self::write_batch(&tx, batch)?;
        Ok(tx.commit()?)
    }

    fn write_batch(tx: &WriteTransaction, batch: &[Mutation]) -> Result<(), redb::Error> {
        let mut offsets = tx.open_table(OFFSETS)?;
        let mut groups = tx.open_table(GROUPS)?;
        let mut topics = tx.open_table(TOPICS)?;
        let mut consumer_groups = tx.open_table(CONSUMER_GROUPS)?;
        let mut consumer_members = tx.open_table(CONSUMER_MEMBERS)?;
        let mut credentials = tx.open_table(CREDENTIALS)?;
        let mut txns = tx.open_table(TXNS)?;
        let mut acls = tx.open_table(ACLS)?;
        let mut pending_offsets = tx.open_table(PENDING)?;
        let mut streams_groups = tx.open_table(STREAMS_GROUPS)?;
        let mut streams_members = tx.open_table(STREAMS_MEMBERS)?;
        // Offsets are most of a batch: their keys and values are encoded into these two.
        let (mut key, mut value) = (Vec::new(), Vec::new());
        for m in batch {
            match m {
                Mutation::PutOffset { group, tp, offset } => {
                    codec::offset_key_into(&mut key, group.as_str(), tp);
                    codec::encode_offset_into(&mut value, offset);
                    offsets.insert(key.as_slice(), value.as_slice())?;
                }
                Mutation::DeleteOffset { group, tp } => {
                    offsets.remove(codec::offset_key(group.as_str(), tp).as_slice())?;
                }
                Mutation::PutGroup { group, record } => {
                    groups.insert(
                        group.as_str().as_bytes(),
                        codec::encode_group(record).as_slice(),
                    )?;
                }
                Mutation::ClearGroupRecords { group } => {
                    let prefix = codec::group_prefix(group.as_str());
                    groups.remove(group.as_str().as_bytes())?;
                    consumer_groups.remove(group.as_str().as_bytes())?;
                    remove_prefix(&mut consumer_members, &prefix)?;
                    streams_groups.remove(group.as_str().as_bytes())?;
                    remove_prefix(&mut streams_members, &prefix)?;
                }
                Mutation::PutStreamsGroup { group, record } => {
                    streams_groups.insert(
                        group.as_str().as_bytes(),
                        codec::encode_streams_group(record).as_slice(),
                    )?;
                }
                Mutation::PutStreamsMember { group, member } => {
                    let key = codec::consumer_member_key(group.as_str(), member.member_id.as_str());
                    streams_members.insert(
                        key.as_slice(),
                        codec::encode_streams_member(member).as_slice(),
                    )?;
                }
                Mutation::DeleteStreamsMember { group, member } => {
                    let key = codec::consumer_member_key(group.as_str(), member.as_str());
                    streams_members.remove(key.as_slice())?;
                }
                Mutation::PutConsumerGroup { group, record } => {
                    consumer_groups.insert(
                        group.as_str().as_bytes(),
                        codec::encode_consumer_group(record).as_slice(),
                    )?;
                }
                Mutation::PutConsumerMember { group, member } => {
                    let key = codec::consumer_member_key(group.as_str(), member.member_id.as_str());
                    consumer_members.insert(
                        key.as_slice(),
                        codec::encode_consumer_member(member).as_slice(),
                    )?;
                }
                Mutation::DeleteConsumerMember { group, member } => {
                    let key = codec::consumer_member_key(group.as_str(), member.as_str());
                    consumer_members.remove(key.as_slice())?;
                }
                Mutation::DeleteGroup { group } => {
                    let prefix = codec::group_prefix(group.as_str());
                    groups.remove(group.as_str().as_bytes())?;
                    consumer_groups.remove(group.as_str().as_bytes())?;
                    remove_prefix(&mut consumer_members, &prefix)?;
                    streams_groups.remove(group.as_str().as_bytes())?;
                    remove_prefix(&mut streams_members, &prefix)?;
                    remove_prefix(&mut offsets, &prefix)?;
                    remove_prefix(&mut pending_offsets, &prefix)?;
                }
                Mutation::PutTopic {
                    name,
                    partitions,
                    configs,
                } => {
                    let value = codec::encode_topic(*partitions, configs);
                    topics.insert(name.as_bytes(), value.as_slice())?;
                }
                Mutation::DeleteTopic { name } => {
                    topics.remove(name.as_bytes())?;
                }
                Mutation::Credential(CredentialChange::Put {
                    user,
                    mechanism,
                    credential,
                }) => {
                    let key = codec::credential_key(user, *mechanism);
                    let value = codec::encode_credential(credential);
                    credentials.insert(key.as_slice(), value.as_slice())?;
                }
                Mutation::PutAcl(acl) => {
                    acls.insert(codec::acl_key(acl).as_slice(), codec::ACL_VALUE)?;
                }
                Mutation::DeleteAcl(acl) => {
                    acls.remove(codec::acl_key(acl).as_slice())?;
                }
                Mutation::Credential(CredentialChange::Delete { user, mechanism }) => {
                    credentials.remove(codec::credential_key(user, *mechanism).as_slice())?;
                }
                Mutation::PutTxn(record) => {
                    txns.insert(
                        record.transactional_id.as_bytes(),
                        codec::encode_txn(record).as_slice(),
                    )?;
                }
                Mutation::DeleteTxn { transactional_id } => {
                    txns.remove(transactional_id.as_bytes())?;
                }
                Mutation::Fence { .. } => {}
                Mutation::PutPendingOffset { group, pending } => {
                    let key = codec::pending_key(group.as_str(), pending.producer_id, &pending.tp);
                    let value = codec::encode_pending(&pending.offset, pending.superseded);
                    pending_offsets.insert(key.as_slice(), value.as_slice())?;
                }
                Mutation::DeletePendingOffsets {
                    group,
                    producer_id,
                    tp: Some(tp),
                } => {
                    let key = codec::pending_key(group.as_str(), *producer_id, tp);
                    pending_offsets.remove(key.as_slice())?;
                }
                Mutation::DeletePendingOffsets {
                    group,
                    producer_id,
                    tp: None,
                } => {
                    let prefix = codec::pending_prefix(group.as_str(), *producer_id);
                    remove_prefix(&mut pending_offsets, &prefix)?;
                }
            }
        }
        Ok(())
    }
}

impl EmbeddedStore {
    /// Appends the stored consumer groups, each with its members, to `out`.
    fn load_consumer_groups(
        &self,
        tx: &ReadTransaction,
        out: &mut Vec<LoadedGroup>,
    ) -> Result<(), StoreError> {
        let groups = tx
            .open_table(CONSUMER_GROUPS)
            .map_err(|e| self.corrupt(e))?;
        let members = tx
            .open_table(CONSUMER_MEMBERS)
            .map_err(|e| self.corrupt(e))?;
        let mut loaded: std::collections::BTreeMap<String, LoadedConsumerGroup> =
            std::collections::BTreeMap::new();
        for entry in groups.iter().map_err(|e| self.corrupt(e))? {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            let id = String::from_utf8(k.value().to_vec())
                .map_err(|_| self.corrupt("a group id is not UTF-8"))?;
            let record = codec::decode_consumer_group(v.value())
                .map_err(|e| self.corrupt(format!("group {id}: {e}")))?;
            loaded.insert(
                id,
                LoadedConsumerGroup {
                    record,
                    members: Vec::new(),
                },
            );
        }
        for entry in members.iter().map_err(|e| self.corrupt(e))? {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            let (group, member) =
                codec::decode_consumer_member_key(k.value()).map_err(|e| self.corrupt(e))?;
            let record = codec::decode_consumer_member(v.value())
                .map_err(|e| self.corrupt(format!("group {group} member {member}: {e}")))?;
            // A member whose group record is gone is left over from a group that changed kind
            // in the same batch; nothing to load.
            if let Some(g) = loaded.get_mut(group) {
                g.members.push(record);
            }
        }
        for (id, consumer) in loaded {
            out.push(LoadedGroup {
                consumer: Some(consumer),
                ..LoadedGroup::new(GroupId::new(id))
            });
        }
        Ok(())
    }
}

impl EmbeddedStore {
    /// Appends the stored streams groups, each with its members, to `out`.
    fn load_streams_groups(
        &self,
        tx: &ReadTransaction,
        out: &mut Vec<LoadedGroup>,
    ) -> Result<(), StoreError> {
        let groups = tx.open_table(STREAMS_GROUPS).map_err(|e| self.corrupt(e))?;
        let members = tx
            .open_table(STREAMS_MEMBERS)
            .map_err(|e| self.corrupt(e))?;
        let mut loaded: std::collections::BTreeMap<String, LoadedStreamsGroup> =
            std::collections::BTreeMap::new();
        for entry in groups.iter().map_err(|e| self.corrupt(e))? {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            let id = String::from_utf8(k.value().to_vec())
                .map_err(|_| self.corrupt("a group id is not UTF-8"))?;
            let record = codec::decode_streams_group(v.value())
                .map_err(|e| self.corrupt(format!("group {id}: {e}")))?;
            loaded.insert(
                id,
                LoadedStreamsGroup {
                    record,
                    members: Vec::new(),
                },
            );
        }
        for entry in members.iter().map_err(|e| self.corrupt(e))? {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            let (group, member) =
                codec::decode_consumer_member_key(k.value()).map_err(|e| self.corrupt(e))?;
            let record = codec::decode_streams_member(v.value())
                .map_err(|e| self.corrupt(format!("group {group} member {member}: {e}")))?;
            if let Some(g) = loaded.get_mut(group) {
                g.members.push(record);
            }
        }
        for (id, streams) in loaded {
            out.push(LoadedGroup {
                streams: Some(streams),
                ..LoadedGroup::new(GroupId::new(id))
            });
        }
        Ok(())
    }

    /// Adds the stored pending transactional offsets to their groups in `out` (`index`: where
    /// each group is), adding the groups that have nothing else stored.
    fn load_pending(
        &self,
        tx: &ReadTransaction,
        out: &mut Vec<LoadedGroup>,
        index: &mut std::collections::HashMap<String, usize>,
    ) -> Result<(), StoreError> {
        let table = tx.open_table(PENDING).map_err(|e| self.corrupt(e))?;
        for entry in table.iter().map_err(|e| self.corrupt(e))? {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            let (group, producer_id, tp) =
                codec::decode_pending_key(k.value()).map_err(|e| self.corrupt(e))?;
            let (offset, superseded) = codec::decode_pending(v.value()).map_err(|e| {
                self.corrupt(format!("group {group} {}-{}: {e}", tp.topic, tp.partition))
            })?;
            let i = *index.entry(group.to_owned()).or_insert_with(|| {
                out.push(LoadedGroup::new(GroupId::new(group)));
                out.len() - 1
            });
            out[i].pending.push(crate::vocab::PendingOffset {
                producer_id,
                tp,
                offset,
                superseded,
            });
        }
        Ok(())
    }
}

/// Removes every key of `table` that starts with `prefix`.
fn remove_prefix(table: &mut redb::Table<&[u8], &[u8]>, prefix: &[u8]) -> Result<(), redb::Error> {
    let keys: Vec<Vec<u8>> = table
        .range(prefix..)?
        .map(|r| r.map(|(k, _)| k.value().to_vec()))
        .take_while(|k| k.as_ref().map_or(true, |k| k.starts_with(prefix)))
        .collect::<Result<_, _>>()?;
    for k in keys {
        table.remove(k.as_slice())?;
    }
    Ok(())
}

/// Some damaged files trip an assertion inside redb instead of an error (seen with a store
/// truncated to half its length): that is still a damaged store, reported with its path, never
/// a crash that names nothing.
fn catch_assertion(open: &dyn Fn() -> Result<Database, DatabaseError>) -> Result<Database, String> {
    match catch_unwind(AssertUnwindSafe(open)) {
        Ok(db) => db.map_err(|e| e.to_string()),
        Err(_) => Err("the store's page allocator state is damaged".into()),
    }
}

impl Store for EmbeddedStore {
    /// After an I/O error (a full disk) redb refuses every later write until the database is
    /// reopened: the store closes it, and the next write opens it again, so writes succeed
    /// again once the disk has room (until then each fails as the disk does). Under
    /// [`super::SyncPolicy::Never`] commits not yet synced are lost with it, as in a crash.
    fn apply(&self, batch: &[Mutation], durable: bool) -> Result<(), StoreError> {
        let io = |e: String| StoreError::Io(format!("{}: {e}", self.path.display()));
        let mut db = self.db();
        if db.is_none() {
            *db = Some((self.open)().map_err(io)?);
            tracing::warn!(path = %self.path.display(), "store reopened after a write error");
        }
        let result = Self::commit(db.as_ref().expect("open"), batch, durable);
        if let Err(redb::Error::Io(_) | redb::Error::PreviousIo) = &result {
            *db = None;
        }
        result.map_err(|e| io(e.to_string()))
    }

    fn sync(&self) -> Result<(), StoreError> {
        // An empty durable commit makes the non-durable ones before it durable.
        self.apply(&[], true)
    }

    fn load_topics(&self) -> Result<Vec<StoredTopic>, StoreError> {
        let tx = self.read()?;
        let table = tx.open_table(TOPICS).map_err(|e| self.corrupt(e))?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| self.corrupt(e))? {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            let name = String::from_utf8(k.value().to_vec())
                .map_err(|_| self.corrupt("a topic name is not UTF-8"))?;
            let (partitions, configs) = codec::decode_topic(v.value())
                .map_err(|e| self.corrupt(format!("topic {name}: {e}")))?;
            out.push((name, partitions, configs));
        }
        Ok(out)
    }

    fn load_credentials(&self) -> Result<Vec<super::StoredCredential>, StoreError> {
        let tx = self.read()?;
        let table = tx.open_table(CREDENTIALS).map_err(|e| self.corrupt(e))?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| self.corrupt(e))? {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            let (user, mechanism) =
                codec::decode_credential_key(k.value()).map_err(|e| self.corrupt(e.to_string()))?;
            let credential = codec::decode_credential(v.value())
                .map_err(|e| self.corrupt(format!("credential of {user}: {e}")))?;
            out.push((user, mechanism, credential));
        }
        Ok(out)
    }

    fn load_acls(&self) -> Result<Vec<crate::security::acl::Acl>, StoreError> {
        let tx = self.read()?;
        let table = tx.open_table(ACLS).map_err(|e| self.corrupt(e))?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| self.corrupt(e))? {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            if v.value() != codec::ACL_VALUE {
                return Err(self.corrupt("acl value: unknown format version"));
            }
            out.push(codec::decode_acl_key(k.value()).map_err(|e| self.corrupt(e))?);
        }
        Ok(out)
    }

    fn load_groups(&self) -> Result<Vec<LoadedGroup>, StoreError> {
        let tx = self.read()?;
        let groups = tx.open_table(GROUPS).map_err(|e| self.corrupt(e))?;
        let offsets = tx.open_table(OFFSETS).map_err(|e| self.corrupt(e))?;
        let mut out: Vec<LoadedGroup> = Vec::new();
        for entry in groups.iter().map_err(|e| self.corrupt(e))? {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            let id = String::from_utf8(k.value().to_vec())
                .map_err(|_| self.corrupt("a group id is not UTF-8"))?;
            let record = codec::decode_group(v.value())
                .map_err(|e| self.corrupt(format!("group {id}: {e}")))?;
            out.push(LoadedGroup {
                metadata: Some(record),
                ..LoadedGroup::new(GroupId::new(id))
            });
        }
        self.load_consumer_groups(&tx, &mut out)?;
        self.load_streams_groups(&tx, &mut out)?;
        // Both tables are ordered by group id (offsets by its length-prefixed form, so compare
        // ids, not keys): merge them with one index. A group's offsets are contiguous, so the
        // index is consulted once per group, not once per offset.
        let mut index: std::collections::HashMap<String, usize> = out
            .iter()
            .enumerate()
            .map(|(i, g)| (g.id.as_str().to_string(), i))
            .collect();
        let mut current: Option<usize> = None;
        for entry in offsets.iter().map_err(|e| self.corrupt(e))? {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            let (group, tp) = codec::decode_offset_key(k.value()).map_err(|e| self.corrupt(e))?;
            let offset = codec::decode_offset(v.value()).map_err(|e| {
                self.corrupt(format!("group {group} {}-{}: {e}", tp.topic, tp.partition))
            })?;
            let i = match current.filter(|&i| out[i].id.as_str() == group) {
                Some(i) => i,
                None => {
                    let i = match index.get(group) {
                        Some(&i) => i,
                        None => {
                            out.push(LoadedGroup::new(GroupId::new(group)));
                            index.insert(group.to_owned(), out.len() - 1);
                            out.len() - 1
                        }
                    };
                    current = Some(i);
                    i
                }
            };
            out[i].offsets.push((tp, offset));
        }
        self.load_pending(&tx, &mut out, &mut index)?;
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    fn load_txns(&self) -> Result<Vec<TxnRecord>, StoreError> {
        let tx = self.read()?;
        let table = tx.open_table(TXNS).map_err(|e| self.corrupt(e))?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| self.corrupt(e))? {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            let id = String::from_utf8_lossy(k.value()).into_owned();
            let record = codec::decode_txn(v.value())
                .map_err(|e| self.corrupt(format!("transactional id {id}: {e}")))?;
            out.push(record);
        }
        Ok(out)
    }
}
