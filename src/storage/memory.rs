//! A [`Store`] in memory, for tests: same semantics as the embedded store, and writes can be
//! made to fail.

use crate::security::credentials::CredentialChange;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::{LoadedGroup, Mutation, Store, StoreError, StoredTopic};
use crate::vocab::stored::StoredRecord;
use crate::vocab::GroupId;
use crate::vocab::{OffsetAndMetadata, PendingOffset, TopicPartition, TxnRecord};

#[derive(Debug, Default)]
struct Data {
    topics: BTreeMap<String, StoredTopic>,
    group_configs: BTreeMap<String, crate::metadata::group_config::GroupConfigMap>,
    producer_ids_end: Option<i64>,
    /// Groups' records by group, kind and key.
    records: BTreeMap<(GroupId, u8, String), StoredRecord>,
    offsets: BTreeMap<(GroupId, TopicPartition), OffsetAndMetadata>,
    credentials: BTreeMap<
        (String, crate::security::scram::ScramMechanism),
        crate::security::scram::ScramCredential,
    >,
    txns: BTreeMap<String, TxnRecord>,
    acls: std::collections::BTreeSet<crate::security::acl::Acl>,
    client_quotas: BTreeMap<crate::quota::Entity, crate::quota::Values>,
    /// Pending transactional offsets by group, producer id and partition.
    pending: BTreeMap<(GroupId, i64, TopicPartition), (OffsetAndMetadata, bool)>,
}

impl Data {
    /// Every record of the group, of every kind (not its offsets).
    fn clear_group(&mut self, group: &GroupId) {
        self.records.retain(|(g, _, _), _| g != group);
    }
}

#[derive(Debug, Default)]
pub struct MemoryStore {
    data: Mutex<Data>,
    fail: AtomicBool,
}

impl MemoryStore {
    /// From now on every write fails (or succeeds again) with [`StoreError::Io`].
    pub fn fail_writes(&self, fail: bool) {
        self.fail.store(fail, Ordering::SeqCst);
    }

    fn data(&self) -> std::sync::MutexGuard<'_, Data> {
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Store for MemoryStore {
    fn apply(&self, batch: &[Mutation], _durable: bool) -> Result<(), StoreError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(StoreError::Io("injected failure".into()));
        }
        let mut d = self.data();
        for m in batch {
            match m {
                Mutation::PutOffset { group, tp, offset } => {
                    d.offsets
                        .insert((group.clone(), tp.clone()), offset.clone());
                }
                Mutation::DeleteOffset { group, tp } => {
                    d.offsets.remove(&(group.clone(), tp.clone()));
                }
                Mutation::PutGroupRecord { group, record } => {
                    let key = (group.clone(), record.kind.id, record.key.clone());
                    d.records.insert(key, record.clone());
                }
                Mutation::DeleteGroupRecord { group, kind, key } => {
                    d.records.remove(&(group.clone(), kind.id, key.clone()));
                }
                Mutation::DeleteGroup { group } => {
                    d.clear_group(group);
                    d.offsets.retain(|(g, _), _| g != group);
                    d.pending.retain(|(g, _, _), _| g != group);
                }
                Mutation::ClearGroupRecords { group } => d.clear_group(group),
                Mutation::PutTopic { topic, configs } => {
                    d.topics
                        .insert(topic.name.clone(), (topic.clone(), configs.clone()));
                }
                Mutation::DeleteTopic { name } => {
                    d.topics.remove(name);
                }
                Mutation::PutGroupConfigs { group, configs } if configs.is_empty() => {
                    d.group_configs.remove(group);
                }
                Mutation::PutGroupConfigs { group, configs } => {
                    d.group_configs.insert(group.clone(), configs.clone());
                }
                Mutation::ReserveProducerIds { end } => {
                    d.producer_ids_end = d.producer_ids_end.max(Some(*end));
                }
                Mutation::Credential(CredentialChange::Put {
                    user,
                    mechanism,
                    credential,
                }) => {
                    d.credentials
                        .insert((user.clone(), *mechanism), credential.clone());
                }
                Mutation::PutClientQuotas { entity, values } if values.is_empty() => {
                    d.client_quotas.remove(entity);
                }
                Mutation::PutClientQuotas { entity, values } => {
                    d.client_quotas.insert(entity.clone(), values.clone());
                }
                Mutation::PutAcl(acl) => {
                    d.acls.insert(acl.clone());
                }
                Mutation::DeleteAcl(acl) => {
                    d.acls.remove(acl);
                }
                Mutation::Credential(CredentialChange::Delete { user, mechanism }) => {
                    d.credentials.remove(&(user.clone(), *mechanism));
                }
                Mutation::PutTxn(record) => {
                    d.txns
                        .insert(record.transactional_id.clone(), (**record).clone());
                }
                Mutation::DeleteTxn { transactional_id } => {
                    d.txns.remove(transactional_id);
                }
                Mutation::Fence { .. } => {}
                Mutation::PutPendingOffset { group, pending } => {
                    d.pending.insert(
                        (group.clone(), pending.producer_id, pending.tp.clone()),
                        (pending.offset.clone(), pending.superseded),
                    );
                }
                Mutation::DeletePendingOffsets {
                    group,
                    producer_id,
                    tp,
                } => d.pending.retain(|(g, p, t), _| {
                    !(g == group && p == producer_id && tp.as_ref().is_none_or(|tp| tp == t))
                }),
            }
        }
        Ok(())
    }

    fn sync(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn load_topics(&self) -> Result<Vec<StoredTopic>, StoreError> {
        Ok(self.data().topics.values().cloned().collect())
    }

    fn load_producer_ids_end(&self) -> Result<Option<i64>, StoreError> {
        Ok(self.data().producer_ids_end)
    }

    fn load_group_configs(
        &self,
    ) -> Result<Vec<(String, crate::metadata::group_config::GroupConfigMap)>, StoreError> {
        Ok(self
            .data()
            .group_configs
            .iter()
            .map(|(g, c)| (g.clone(), c.clone()))
            .collect())
    }

    fn load_credentials(&self) -> Result<Vec<super::StoredCredential>, StoreError> {
        Ok(self
            .data()
            .credentials
            .iter()
            .map(|((u, m), c)| (u.clone(), *m, c.clone()))
            .collect())
    }

    fn load_client_quotas(
        &self,
    ) -> Result<Vec<(crate::quota::Entity, crate::quota::Values)>, StoreError> {
        Ok(self.data().client_quotas.clone().into_iter().collect())
    }

    fn load_acls(&self) -> Result<Vec<crate::security::acl::Acl>, StoreError> {
        Ok(self.data().acls.iter().cloned().collect())
    }

    fn load_groups(&self) -> Result<Vec<LoadedGroup>, StoreError> {
        let d = self.data();
        let mut out: BTreeMap<GroupId, LoadedGroup> = BTreeMap::new();
        for ((g, _, _), record) in &d.records {
            out.entry(g.clone())
                .or_insert_with(|| LoadedGroup::new(g.clone()))
                .records
                .push(record.clone());
        }
        for ((g, tp), o) in &d.offsets {
            out.entry(g.clone())
                .or_insert_with(|| LoadedGroup::new(g.clone()))
                .offsets
                .push((tp.clone(), o.clone()));
        }
        for ((g, producer_id, tp), (offset, superseded)) in &d.pending {
            out.entry(g.clone())
                .or_insert_with(|| LoadedGroup::new(g.clone()))
                .pending
                .push(PendingOffset {
                    producer_id: *producer_id,
                    tp: tp.clone(),
                    offset: offset.clone(),
                    superseded: *superseded,
                });
        }
        Ok(out.into_values().collect())
    }

    fn load_txns(&self) -> Result<Vec<TxnRecord>, StoreError> {
        Ok(self.data().txns.values().cloned().collect())
    }
}
