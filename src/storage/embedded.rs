//! The embedded [`Store`]: one redb file, `koord.redb`, under the data dir.
//!
//! redb (a copy-on-write B-tree with checksummed commits) was measured against fjall on the
//! offset-commit workload (bench/storecmp, BENCHMARKS.md): equal throughput at large batches,
//! a file that stays the size of the live data (freed pages are reused), and a start-up scan of
//! 1M offsets in ~0.15 s against ~5 s for fjall's journal replay.
//!
//! Tables: `offsets` (key: group, topic, partition; see [`super::codec`]), `group_records`
//! (key: group, kind, record key; the value is the kind's own encoding, opaque here), `topics`
//! (key: the name), `txns` (key: the transactional id), `acls` (key: the ACL binding),
//! `client_quotas` (key: the quota entity),
//! `pending_offsets` (key: group, producer id, topic, partition) and `meta` (the format version).
//!
//! Format 1 kept each group kind's records in tables of its own; a format-1 file is converted
//! to format 2 when opened, in one transaction.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use redb::{
    Database, DatabaseError, Durability, ReadTransaction, ReadableDatabase, ReadableTable,
    TableDefinition, WriteTransaction,
};

use super::codec;
use super::{LoadedGroup, Mutation, Store, StoreError, StoredTopic};
use crate::security::credentials::CredentialChange;
use crate::vocab::stored::StoredRecord;
use crate::vocab::{GroupId, TxnRecord};
use bytes::Bytes;

const OFFSETS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("offsets");
/// Groups' records of every kind: key [`codec::group_record_key`], value the kind's encoding.
/// Format 2's, in place of format 1's per-kind tables.
const GROUP_RECORDS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("group_records");
const TOPICS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("topics");
const META: TableDefinition<&str, u32> = TableDefinition::new("meta");
/// Format 1's group tables, by kind: classic groups' records by group id; consumer and streams
/// groups' own records by group id and their members' by group and member id. Read once, when
/// a format-1 file is converted ([`convert_v1`]).
const V1_GROUPS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("groups");
const V1_CONSUMER_GROUPS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("consumer_groups");
const V1_CONSUMER_MEMBERS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("consumer_members");
const V1_STREAMS_GROUPS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("streams_groups");
const V1_STREAMS_MEMBERS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("streams_members");
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

/// Groups' configs (GROUP config resources): key the group id, value
/// [`codec::encode_group_configs`]. Added to format 2 as the tables above were to format 1.
const GROUP_CONFIGS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("group_configs");

/// Client quotas (AlterClientQuotas): key the entity ([`codec::client_quota_key`]), value its
/// quotas ([`codec::encode_client_quotas`]). Added to format 2 as the group configs were.
const CLIENT_QUOTAS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("client_quotas");

/// The layout version this build writes and reads (format 1 is converted when opened).
/// `end`: the end of the last producer id block reserved ([`Mutation::ReserveProducerIds`]).
/// Added to format 2 as the group configs were.
const PRODUCER_IDS: TableDefinition<&str, i64> = TableDefinition::new("producer_ids");
const FORMAT: u32 = 2;

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
                Some(1) => {
                    convert_v1(&tx).map_err(|e| format!("converting format 1: {e}"))?;
                    meta.insert("format", FORMAT).map_err(|e| e.to_string())?;
                }
                Some(v) => {
                    return Err(format!(
                        "format version {v}, this koord reads version {FORMAT}"
                    ))
                }
            }
            for table in [
                OFFSETS,
                GROUP_RECORDS,
                TOPICS,
                CREDENTIALS,
                TXNS,
                ACLS,
                PENDING,
                GROUP_CONFIGS,
                CLIENT_QUOTAS,
            ] {
                tx.open_table(table).map_err(|e| e.to_string())?;
            }
            tx.open_table(PRODUCER_IDS).map_err(|e| e.to_string())?;
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
        let mut records = tx.open_table(GROUP_RECORDS)?;
        let mut topics = tx.open_table(TOPICS)?;
        let mut credentials = tx.open_table(CREDENTIALS)?;
        let mut txns = tx.open_table(TXNS)?;
        let mut acls = tx.open_table(ACLS)?;
        let mut pending_offsets = tx.open_table(PENDING)?;
        let mut group_configs = tx.open_table(GROUP_CONFIGS)?;
        let mut producer_ids = tx.open_table(PRODUCER_IDS)?;
        let mut client_quotas = tx.open_table(CLIENT_QUOTAS)?;
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
                Mutation::PutGroupRecord { group, record } => {
                    let key = codec::group_record_key(group.as_str(), record.kind.id, &record.key);
                    records.insert(key.as_slice(), &record.value[..])?;
                }
                Mutation::DeleteGroupRecord { group, kind, key } => {
                    let key = codec::group_record_key(group.as_str(), kind.id, key);
                    records.remove(key.as_slice())?;
                }
                Mutation::ClearGroupRecords { group } => {
                    remove_prefix(&mut records, &codec::group_prefix(group.as_str()))?;
                }
                Mutation::DeleteGroup { group } => {
                    let prefix = codec::group_prefix(group.as_str());
                    remove_prefix(&mut records, &prefix)?;
                    remove_prefix(&mut offsets, &prefix)?;
                    remove_prefix(&mut pending_offsets, &prefix)?;
                }
                Mutation::PutTopic { topic, configs } => {
                    let value = codec::encode_topic(topic, configs);
                    topics.insert(topic.name.as_bytes(), value.as_slice())?;
                }
                Mutation::DeleteTopic { name } => {
                    topics.remove(name.as_bytes())?;
                }
                Mutation::PutGroupConfigs { group, configs } if configs.is_empty() => {
                    group_configs.remove(group.as_bytes())?;
                }
                Mutation::PutGroupConfigs { group, configs } => {
                    let value = codec::encode_group_configs(configs);
                    group_configs.insert(group.as_bytes(), value.as_slice())?;
                }
                Mutation::ReserveProducerIds { end } => {
                    let stored = producer_ids.get("end")?.map(|v| v.value());
                    if stored.is_none_or(|s| s < *end) {
                        producer_ids.insert("end", *end)?;
                    }
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
                Mutation::PutClientQuotas { entity, values } if values.is_empty() => {
                    client_quotas.remove(codec::client_quota_key(entity).as_slice())?;
                }
                Mutation::PutClientQuotas { entity, values } => {
                    client_quotas.insert(
                        codec::client_quota_key(entity).as_slice(),
                        codec::encode_client_quotas(values).as_slice(),
                    )?;
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

/// Converts format 1's per-kind group tables into `group_records` (the values are the kinds'
/// encodings as they were) and drops them.
fn convert_v1(tx: &WriteTransaction) -> Result<(), String> {
    use crate::vocab::stored::{CLASSIC, CONSUMER, STREAMS};
    let e = |e: redb::Error| e.to_string();
    let mut records = tx.open_table(GROUP_RECORDS).map_err(|x| e(x.into()))?;
    let own = [
        (V1_GROUPS, CLASSIC),
        (V1_CONSUMER_GROUPS, CONSUMER),
        (V1_STREAMS_GROUPS, STREAMS),
    ];
    for (table, kind) in own {
        let old = tx.open_table(table).map_err(|x| e(x.into()))?;
        for entry in old.iter().map_err(|x| e(x.into()))? {
            let (k, v) = entry.map_err(|x| e(x.into()))?;
            let group = std::str::from_utf8(k.value()).map_err(|_| "a group id is not UTF-8")?;
            let key = codec::group_record_key(group, kind.id, "");
            records
                .insert(key.as_slice(), v.value())
                .map_err(|x| e(x.into()))?;
        }
    }
    let members = [
        (V1_CONSUMER_MEMBERS, CONSUMER),
        (V1_STREAMS_MEMBERS, STREAMS),
    ];
    for (table, kind) in members {
        let old = tx.open_table(table).map_err(|x| e(x.into()))?;
        for entry in old.iter().map_err(|x| e(x.into()))? {
            let (k, v) = entry.map_err(|x| e(x.into()))?;
            let (group, member) = codec::decode_member_key_v1(k.value()).map_err(|x| x.0)?;
            let key = codec::group_record_key(group, kind.id, member);
            records
                .insert(key.as_slice(), v.value())
                .map_err(|x| e(x.into()))?;
        }
    }
    for table in [
        V1_GROUPS,
        V1_CONSUMER_GROUPS,
        V1_CONSUMER_MEMBERS,
        V1_STREAMS_GROUPS,
        V1_STREAMS_MEMBERS,
    ] {
        tx.delete_table(table).map_err(|x| e(x.into()))?;
    }
    Ok(())
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

    fn location(&self) -> PathBuf {
        self.path.clone()
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
            let topic = codec::decode_topic(&name, v.value())
                .map_err(|e| self.corrupt(format!("topic {name}: {e}")))?;
            out.push(topic);
        }
        Ok(out)
    }

    fn load_producer_ids_end(&self) -> Result<Option<i64>, StoreError> {
        let tx = self.read()?;
        let table = tx.open_table(PRODUCER_IDS).map_err(|e| self.corrupt(e))?;
        let end = table.get("end").map_err(|e| self.corrupt(e))?;
        Ok(end.map(|v| v.value()))
    }

    fn load_group_configs(
        &self,
    ) -> Result<Vec<(String, crate::metadata::group_config::GroupConfigMap)>, StoreError> {
        let tx = self.read()?;
        let table = tx.open_table(GROUP_CONFIGS).map_err(|e| self.corrupt(e))?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| self.corrupt(e))? {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            let group = String::from_utf8(k.value().to_vec())
                .map_err(|_| self.corrupt("a group id of group configs is not UTF-8"))?;
            let configs = codec::decode_group_configs(v.value())
                .map_err(|e| self.corrupt(format!("configs of group {group}: {e}")))?;
            out.push((group, configs));
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

    fn load_client_quotas(
        &self,
    ) -> Result<Vec<(crate::quota::Entity, crate::quota::Values)>, StoreError> {
        let tx = self.read()?;
        let table = tx.open_table(CLIENT_QUOTAS).map_err(|e| self.corrupt(e))?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| self.corrupt(e))? {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            let entity = codec::decode_client_quota_key(k.value()).map_err(|e| self.corrupt(e))?;
            let values = codec::decode_client_quotas(v.value())
                .map_err(|e| self.corrupt(format!("client quotas of {entity}: {e}")))?;
            out.push((entity, values));
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
        let records = tx.open_table(GROUP_RECORDS).map_err(|e| self.corrupt(e))?;
        let offsets = tx.open_table(OFFSETS).map_err(|e| self.corrupt(e))?;
        let mut out: Vec<LoadedGroup> = Vec::new();
        for entry in records.iter().map_err(|e| self.corrupt(e))? {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            let (group, kind, key) =
                codec::decode_group_record_key(k.value()).map_err(|e| self.corrupt(e))?;
            let kind = crate::vocab::stored::kind_of(kind)
                .ok_or_else(|| self.corrupt(format!("group {group}: unknown group kind {kind}")))?;
            if out.last().is_none_or(|g| g.id.as_str() != group) {
                out.push(LoadedGroup::new(GroupId::new(group)));
            }
            let record = StoredRecord {
                kind,
                key: key.to_owned(),
                value: Bytes::copy_from_slice(v.value()),
            };
            out.last_mut().expect("pushed").records.push(record);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_producer_id_end_only_rises_and_survives_a_reopen() {
        let dir = std::env::temp_dir().join(format!("koord-embedded-pids-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        {
            let store = EmbeddedStore::open(&dir).unwrap();
            assert_eq!(store.load_producer_ids_end().unwrap(), None);
            store
                .apply(&[Mutation::ReserveProducerIds { end: 3000 }], true)
                .unwrap();
            store
                .apply(&[Mutation::ReserveProducerIds { end: 2000 }], true)
                .unwrap();
        }
        let store = EmbeddedStore::open(&dir).unwrap();
        assert_eq!(store.load_producer_ids_end().unwrap(), Some(3000));
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
    }
    use crate::group::{classic, consumer, streams};
    use crate::vocab::{ConsumerGroupRecord, ConsumerMember, MemberId};

    /// A format-1 file: each kind's records in its own tables, as koord wrote them before
    /// group records became opaque.
    fn write_v1(path: &Path, consumer_group: &[u8], member: &[u8], classic_group: &[u8]) {
        let db = Database::create(path).unwrap();
        let tx = db.begin_write().unwrap();
        {
            tx.open_table(META).unwrap().insert("format", 1).unwrap();
            let mut t = tx.open_table(V1_GROUPS).unwrap();
            t.insert(&b"old"[..], classic_group).unwrap();
            let mut t = tx.open_table(V1_CONSUMER_GROUPS).unwrap();
            t.insert(&b"new"[..], consumer_group).unwrap();
            let mut t = tx.open_table(V1_CONSUMER_MEMBERS).unwrap();
            let mut key = codec::group_prefix("new");
            key.extend_from_slice(&codec::group_prefix("m"));
            t.insert(key.as_slice(), member).unwrap();
            tx.open_table(V1_STREAMS_GROUPS).unwrap();
            tx.open_table(OFFSETS).unwrap();
        }
        tx.commit().unwrap();
    }

    #[test]
    fn a_format_1_file_is_converted_when_opened_and_its_groups_load_as_before() {
        let dir = std::env::temp_dir().join(format!("koord-v1-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let group = ConsumerGroupRecord {
            group_epoch: 3,
            ..ConsumerGroupRecord::default()
        };
        let member = ConsumerMember::new(MemberId::new("m"));
        let old = crate::vocab::GroupMetadataRecord {
            protocol_type: Some("consumer".into()),
            generation: crate::vocab::Generation(2),
            protocol_name: None,
            leader: None,
            state_timestamp: crate::vocab::Timestamp(9),
            members: Vec::new(),
            assignor_state: Bytes::new(),
            follow_up: None,
        };
        let (g, m, c) = (
            consumer::codec::encode_consumer_group(&group),
            consumer::codec::encode_consumer_member(&member),
            classic::codec::encode_group(&old),
        );
        write_v1(&dir.join(FILE_NAME), &g, &m, &c);
        for _ in 0..2 {
            let store = EmbeddedStore::open(&dir).unwrap();
            let groups = store.load_groups().unwrap();
            let ids: Vec<&str> = groups.iter().map(|g| g.id.as_str()).collect();
            assert_eq!(ids, ["new", "old"]);
            assert_eq!(
                consumer::codec::restore(&groups[0].records),
                Ok(Some((group.clone(), vec![member.clone()])))
            );
            assert_eq!(
                classic::codec::restore(&groups[1].records),
                Ok(Some(old.clone()))
            );
            assert_eq!(streams::codec::restore(&groups[0].records), Ok(None));
            let tx = store.read().unwrap();
            assert!(
                tx.open_table(V1_CONSUMER_MEMBERS).is_err(),
                "format 1's tables dropped"
            );
            assert_eq!(
                tx.open_table(META)
                    .unwrap()
                    .get("format")
                    .unwrap()
                    .unwrap()
                    .value(),
                2
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
