//! A group changing kind (an Empty classic group becoming a consumer or streams group, a
//! consumer group upgraded from or downgraded to classic), and the consumer core's records
//! and answers on their way to the store.

use super::*;
use crate::coordinator::registry::KindEntry;
use crate::coordinator::KindRefusal;
use crate::group::classic;
use crate::group::core::{Kind, TopicImage};

impl GroupActor {
    /// An Empty group of another kind becomes a new group of `entry`'s kind (Kafka's
    /// conversion of an empty group), keeping its offsets.
    pub(super) fn become_kind(&mut self, ctx: &Ctx, entry: &KindEntry) {
        if self.group.kind() != entry.kind {
            let group = (entry.create)(self.group.id(), &ctx.settings, ctx.clock.now());
            self.change_kind(ctx, group, entry.kind.name);
        }
    }

    /// Runs a kind's own request ([`super::super::Coordinator::with_kind`]) on the group as a
    /// `K`, first making it one with `create`; `f`'s answer goes out once the records it made
    /// the group write, and every write of the group's before them, are durable.
    pub(in crate::coordinator) fn run_as<K: Kind, R: Send + 'static>(
        &mut self,
        ctx: &Ctx,
        create: Option<&KindEntry>,
        f: impl FnOnce(&mut K, &dyn TopicImage, Timestamp) -> R,
        reply: oneshot::Sender<Result<R, KindRefusal>>,
    ) {
        if let Some(entry) = create.filter(|_| K::CONVERTS) {
            self.become_kind(ctx, entry);
        }
        let Some(group) = self.group.get_mut::<K>() else {
            let _ = reply.send(Err(KindRefusal::OtherKind));
            return;
        };
        let started = Instant::now();
        let answer = f(group, &*ctx.settings.image, ctx.clock.now());
        self.core_call = started.elapsed();
        self.flush_records(
            ctx,
            Vec::new(),
            Some(Box::new(move |error| {
                let _ = reply.send(error.map_or(Ok(answer), |e| Err(KindRefusal::Error(e))));
            })),
        );
    }

    /// Replaces an Empty group by `group` of another kind; its stored records go (not its
    /// offsets). A group with members keeps its kind.
    fn change_kind(&mut self, ctx: &Ctx, group: Core, kind: &'static str) {
        if !self.group.is_empty() {
            return;
        }
        let id = self.group.id().clone();
        self.group = group;
        let _span = self.log_span();
        info!(kind, "empty group changes kind");
        self.submit_records(
            ctx,
            vec![Mutation::ClearGroupRecords { group: id }],
            Vec::new(),
            None,
        );
    }

    /// A classic group upgraded to `group` (a heartbeat joined it): what the classic group
    /// had parked is told to join again, and the mutation that clears its stored records is
    /// returned, to go before the consumer group's.
    pub(super) fn upgrade(&mut self, group: ConsumerGroup) -> Mutation {
        self.answer_parked(GroupError::RebalanceInProgress);
        let id = group.id().clone();
        self.group = Core::new(group);
        let _span = self.log_span();
        info!("classic group upgraded to a consumer group");
        Mutation::ClearGroupRecords { group: id }
    }

    /// A consumer group whose last consumer-protocol member left becomes the classic group of
    /// its classic members; the mutations that store it in place of the consumer group.
    fn downgrade(&mut self, ctx: &Ctx) -> Option<Vec<Mutation>> {
        let group = self.group.get_mut::<ConsumerGroup>()?;
        let downgrade = group.take_downgrade()?;
        let id = group.id().clone();
        let classic = ClassicGroup::from_consumer_group(
            id.clone(),
            ctx.settings.group_config(&id),
            downgrade.generation,
            downgrade.members,
            ctx.clock.now(),
        );
        let record = classic.metadata_record();
        self.group = Core::new(classic);
        let _span = self.log_span();
        info!(
            "consumer group downgraded to a classic group: its last consumer-protocol member left"
        );
        Some(vec![
            Mutation::ClearGroupRecords { group: id.clone() },
            Mutation::PutGroupRecord {
                group: id,
                record: classic::codec::stored(&record),
            },
        ])
    }

    /// Sends `first` and the group's records in stored form to the store (for a consumer
    /// group that just turned classic, the classic group's record in their place); `reply`
    /// goes out once they, and every such write of the group's before them, are durable.
    pub(super) fn flush_records(
        &mut self,
        ctx: &Ctx,
        mut first: Vec<Mutation>,
        reply: Option<Deferred>,
    ) {
        match self.downgrade(ctx) {
            Some(batch) => first.extend(batch),
            None => first.extend(self.record_mutations()),
        }
        let replies: Vec<Deferred> = reply.into_iter().collect();
        if !first.is_empty() {
            self.submit_records(ctx, first, replies, None);
            return;
        }
        if let Some(Pending::Records {
            replies: waiting, ..
        }) = self
            .last_records_write
            .and_then(|id| self.pending.get_mut(&id))
        {
            waiting.extend(replies);
            return;
        }
        for reply in replies {
            reply(None);
        }
    }

    /// The group's records as mutations (none for a classic group: its record goes out
    /// through its outputs).
    fn record_mutations(&mut self) -> Vec<Mutation> {
        let stored = self.group.take_stored();
        if stored.is_empty() {
            // Every input of every group comes here (a classic heartbeat too): no copy of
            // the id for nothing.
            return Vec::new();
        }
        let id = self.group.id();
        stored
            .into_iter()
            .map(|c| Mutation::group_record(id.clone(), c))
            .collect()
    }

    pub(super) fn submit_records(
        &mut self,
        ctx: &Ctx,
        batch: Vec<Mutation>,
        replies: Vec<Deferred>,
        delete_reply: Option<oneshot::Sender<Result<(), GroupError>>>,
    ) {
        let id = self.next_submission;
        self.submit(
            ctx,
            batch,
            Pending::Records {
                replies,
                delete_reply,
            },
        );
        self.last_records_write = Some(id);
    }
}
