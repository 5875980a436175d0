//! A group's offsets: commits (plain and transactional), a transaction's end, deletion,
//! retention, and the deletion of a group left Empty.

use super::*;

/// The store writes of offsets that become committed.
fn put_offsets(group: &GroupId, offsets: &[(TopicPartition, OffsetAndMetadata)]) -> Vec<Mutation> {
    offsets
        .iter()
        .map(|(tp, offset)| Mutation::PutOffset {
            group: group.clone(),
            tp: tp.clone(),
            offset: offset.clone(),
        })
        .collect()
}

impl GroupActor {
    pub(super) fn commit(
        &mut self,
        ctx: &Ctx,
        commit: OffsetCommit,
        reply: oneshot::Sender<Result<PartitionResults, GroupError>>,
    ) {
        let now = ctx.clock.now();
        if let Err(e) = self.group.validate_offset_commit(&commit, now) {
            let _ = reply.send(Err(e));
            return;
        }
        let prepared = offsets::prepare_commit(
            &ctx.settings.offsets,
            commit.partitions,
            commit.retention_time_ms,
            now,
        );
        if prepared.writes.is_empty() {
            let _ = reply.send(Ok(prepared.results));
            return;
        }
        let group = self.group.id().clone();
        let mut batch = put_offsets(&group, &prepared.writes);
        if !self.pending_offsets.is_empty() {
            for (tp, _) in &prepared.writes {
                batch.extend(
                    self.pending_offsets
                        .supersede(tp)
                        .into_iter()
                        .map(|pending| Mutation::PutPendingOffset {
                            group: group.clone(),
                            pending: Box::new(pending),
                        }),
                );
            }
        }
        self.submit(
            ctx,
            batch,
            Pending::Commit {
                reply,
                results: prepared.results,
                writes: prepared.writes,
            },
        );
    }

    /// TxnOffsetCommit: the group checks of a transactional commit, then the offsets are
    /// pending under the producer until its transaction's marker; answered once durable.
    pub(super) fn commit_transactional(
        &mut self,
        ctx: &Ctx,
        commit: TxnOffsetCommit,
        reply: oneshot::Sender<Result<PartitionResults, GroupError>>,
    ) {
        let now = ctx.clock.now();
        if let Err(e) = self.group.validate_txn_offset_commit(&commit, now) {
            let _ = reply.send(Err(e));
            return;
        }
        if self
            .pending_offsets
            .is_fenced(commit.producer_id, commit.producer_epoch)
        {
            // Its transaction was aborted with a newer epoch while the request was on its way.
            let _ = reply.send(Err(GroupError::InvalidProducerEpoch));
            return;
        }
        let prepared = offsets::prepare_commit(&ctx.settings.offsets, commit.partitions, -1, now);
        if prepared.writes.is_empty() || commit.validate_only {
            let _ = reply.send(Ok(prepared.results));
            return;
        }
        let group = self.group.id().clone();
        let batch = prepared
            .writes
            .into_iter()
            .map(|(tp, offset)| Mutation::PutPendingOffset {
                group: group.clone(),
                pending: Box::new(self.pending_offsets.put(commit.producer_id, tp, offset)),
            })
            .collect();
        self.submit(
            ctx,
            batch,
            Pending::TxnCommit {
                reply,
                results: prepared.results,
            },
        );
    }

    /// A transaction that wrote offsets here ended: a commit makes the producer's pending
    /// offsets committed ones, an abort drops them; answered once durable.
    pub(super) fn end_transaction(
        &mut self,
        ctx: &Ctx,
        marker: TxnMarker,
        reply: oneshot::Sender<Result<(), GroupError>>,
    ) {
        let taken = self
            .pending_offsets
            .take(marker.producer_id, marker.producer_epoch);
        if taken.is_empty() {
            let _ = reply.send(Ok(()));
            return;
        }
        let committed = if marker.commit {
            offsets::committed(&taken)
        } else {
            Vec::new()
        };
        let group = self.group.id().clone();
        let mut batch = put_offsets(&group, &committed);
        batch.push(Mutation::DeletePendingOffsets {
            group,
            producer_id: marker.producer_id,
            tp: None,
        });
        {
            let _span = self.log_span();
            debug!(
                producer_id = marker.producer_id,
                commit = marker.commit,
                offsets = committed.len(),
                "transaction marker"
            );
        }
        self.submit(
            ctx,
            batch,
            Pending::TxnMarker {
                reply,
                taken,
                committed,
            },
        );
    }

    pub(super) fn delete_offsets(
        &mut self,
        ctx: &Ctx,
        partitions: Vec<TopicPartition>,
        reply: oneshot::Sender<Result<PartitionResults, GroupError>>,
    ) {
        if let Err(e) = self.group.validate_offset_delete() {
            let _ = reply.send(Err(e));
            return;
        }
        let mut removed = Vec::new();
        let results: PartitionResults = partitions
            .into_iter()
            .map(|tp| {
                if self
                    .group
                    .is_subscribed_to_topic(&tp.topic, &*ctx.settings.image)
                {
                    (tp, Some(GroupError::GroupSubscribedToTopic))
                } else {
                    removed.push(tp.clone());
                    (tp, None)
                }
            })
            .collect();
        self.remove_offsets(ctx, removed, results, reply);
    }

    /// A topic was deleted: the group's committed offsets of it go, whatever its state or
    /// subscription, with the transactional offsets pending for it (Kafka 4.4's
    /// `OffsetMetadataManager.onTopicsDeleted`); a share group's states of it go too.
    /// Answered once durable.
    pub(super) fn forget_topic(
        &mut self,
        ctx: &Ctx,
        topic: &crate::metadata::Topic,
        reply: oneshot::Sender<Result<PartitionResults, GroupError>>,
    ) {
        if let Some(share) = self.group.get_mut::<crate::group::share::ShareGroup>() {
            share.topic_deleted(topic.id);
            self.flush_records(ctx, Vec::new(), None);
        }
        let id = self.group.id().clone();
        let mut removed: Vec<TopicPartition> = self
            .offsets
            .group_offsets(&id)
            .into_iter()
            .map(|(tp, _)| tp)
            .chain(self.pending_offsets.partitions())
            .filter(|tp| tp.topic == topic.name)
            .collect();
        removed.sort();
        removed.dedup();
        let results = removed.iter().map(|tp| (tp.clone(), None)).collect();
        self.remove_offsets(ctx, removed, results, reply);
    }

    /// Deletes the offsets of `removed` (and the transactional offsets pending for them),
    /// answering `results` once durable.
    fn remove_offsets(
        &mut self,
        ctx: &Ctx,
        removed: Vec<TopicPartition>,
        results: PartitionResults,
        reply: oneshot::Sender<Result<PartitionResults, GroupError>>,
    ) {
        if removed.is_empty() {
            let _ = reply.send(Ok(results));
            return;
        }
        let group = self.group.id().clone();
        let mut batch = Vec::new();
        for tp in &removed {
            batch.push(Mutation::DeleteOffset {
                group: group.clone(),
                tp: tp.clone(),
            });
            for producer_id in self.pending_offsets.remove_partition(tp) {
                batch.push(Mutation::DeletePendingOffsets {
                    group: group.clone(),
                    producer_id,
                    tp: Some(tp.clone()),
                });
            }
        }
        self.submit(
            ctx,
            batch,
            Pending::DeleteOffsets {
                reply,
                results,
                removed,
            },
        );
    }

    pub(super) fn expire_offsets(&mut self, ctx: &Ctx) {
        let now = ctx.clock.now();
        if ctx.settings.offsets.kept_elsewhere {
            self.forget_if_long_empty(ctx, now);
            return;
        }
        let id = self.group.id().clone();
        let current = self.offsets.group_offsets(&id);
        // An offset with a commit still on its way to disk is not expired under it.
        let in_flight: std::collections::HashSet<&TopicPartition> = self
            .pending
            .values()
            .filter_map(|p| match p {
                Pending::Commit { writes, .. } => Some(writes.iter().map(|(tp, _)| tp)),
                _ => None,
            })
            .flatten()
            .collect();
        let current: Vec<_> = current
            .into_iter()
            .filter(|(tp, _)| !in_flight.contains(tp))
            .collect();
        let expired = offsets::expired_offsets(
            &current,
            self.group.offset_expiration_base(),
            |topic| {
                self.group
                    .is_subscribed_to_topic(topic, &*ctx.settings.image)
            },
            |tp| self.pending_offsets.is_pending(tp),
            now,
            ctx.settings.offsets.retention_ms,
        );
        if !expired.expired.is_empty() {
            let batch = expired
                .expired
                .iter()
                .map(|tp| Mutation::DeleteOffset {
                    group: id.clone(),
                    tp: tp.clone(),
                })
                .collect();
            self.submit(ctx, batch, Pending::Expired(expired.expired));
        }
        // A group with an open transaction's offsets stays (Kafka's cleanupGroupMetadata).
        if expired.all_expired
            && self.group.is_empty()
            && self.pending_offsets.is_empty()
            && self.delete_empty(ctx, now, false)
        {
            let _span = self.log_span();
            info!("empty group with no offsets left deleted");
        }
    }

    /// Gateway mode's retention: an Empty group (with no transaction's offsets pending) that
    /// retention has seen Empty for `offsets.retention.minutes` is forgotten. Its records are
    /// cleared and it leaves koord's memory; its offsets stay upstream (koord holds only those
    /// committed since it started, so it cannot tell whether upstream's have expired, and
    /// deleting the group upstream could lose them). The clock starts at the first check that
    /// sees the group Empty, so a restart only delays it.
    fn forget_if_long_empty(&mut self, ctx: &Ctx, now: Timestamp) {
        if self.group.is_dead() || !self.group.is_empty() || !self.pending_offsets.is_empty() {
            self.empty_since = None;
            return;
        }
        let since = *self.empty_since.get_or_insert(now);
        if now.as_millis().saturating_sub(since.as_millis()) < ctx.settings.offsets.retention_ms {
            return;
        }
        if self.delete_empty(ctx, now, true) {
            let id = self.group.id().clone();
            let offsets = self.offsets.remove_group(&id);
            let _span = self.log_span();
            info!(
                offsets_in_memory = offsets,
                "group Empty for offsets.retention.minutes forgotten (its offsets stay upstream)"
            );
        }
    }

    /// Deletes this Empty group, true when it is gone. Its tombstone deletes its records and
    /// offsets, or with `forget` (gateway retention) clears only its records: its offsets stay
    /// upstream. A classic group's tombstone comes out of the core as Output::Persist.
    fn delete_empty(&mut self, ctx: &Ctx, now: Timestamp, forget: bool) -> bool {
        let group = self.group.id().clone();
        self.forgetting = forget;
        let deleted = match self.group.delete_by_shell() {
            Some(result) => {
                if result.is_ok() {
                    let tombstone = if forget {
                        Mutation::ClearGroupRecords { group }
                    } else {
                        Mutation::DeleteGroup { group }
                    };
                    self.submit_records(ctx, vec![tombstone], Vec::new(), None);
                }
                result.is_ok()
            }
            None => self
                .group
                .get_mut::<ClassicGroup>()
                .is_some_and(|group| group.handle_delete(now).is_ok()),
        };
        self.forgetting &= deleted;
        deleted
    }
}
