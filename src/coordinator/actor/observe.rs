//! What a group shows of itself: DescribeGroups' description, the status page's snapshots,
//! the metrics and history its events feed, and its log lines.

use super::*;

impl GroupActor {
    pub(super) fn describe(&self) -> Option<GroupDescription> {
        // DescribeGroups describes classic groups only (Kafka 4.x).
        let group = self.group.get::<ClassicGroup>()?;
        let state = group.state();
        if state == GroupState::Dead {
            return None;
        }
        let stable_protocol = (state == GroupState::Stable)
            .then(|| group.protocol_name())
            .flatten();
        let members = group
            .members()
            .map(|m| MemberDescription {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: stable_protocol.map(|p| m.metadata(p)).unwrap_or_default(),
                // Outside Stable Kafka still shows the assignment the member last received
                // (`ClassicGroupMember.describeNoMetadata`).
                assignment: m.assignment.clone(),
            })
            .collect();
        // A server-assigned group shows the assignor that really assigned it, so that
        // `kafka-consumer-groups --describe` tells the truth.
        let protocol = stable_protocol
            .map(|p| group.server_assignor_name().unwrap_or(p))
            .unwrap_or_default();
        Some(GroupDescription {
            state,
            protocol_type: group.protocol_type().unwrap_or_default().to_string(),
            protocol: protocol.to_string(),
            members,
        })
    }

    /// Follows one of the core's events for the status page's history and the metrics.
    pub(super) fn observe(&mut self, ctx: &Ctx, event: &GroupEvent) {
        let Some(group) = self.group.get::<ClassicGroup>() else {
            return;
        };
        let now = ctx.clock.now();
        self.history.on_event(event, now);
        match event {
            GroupEvent::AssignmentPlanned { assignor, .. } => {
                metrics().assignor_ran(assignor, self.core_call);
            }
            GroupEvent::AssignmentInstalled { generation, .. } => {
                let members = group
                    .members()
                    .map(|m| (m.id.as_str().to_owned(), self.partitions(&m.assignment)))
                    .collect();
                if let Some(done) = self.history.on_installed(generation.0, members, now) {
                    metrics().rebalance_completed("classic", done.took);
                }
                let learners = group
                    .server_assignor_name()
                    .and_then(|name| ctx.settings.assignment.assignor(name))
                    .map(|a| a.learners(group.assignor_state()))
                    .unwrap_or_default();
                let after = learners.len();
                let (before, ended) = self.history.set_learners(learners, now);
                metrics().learners_changed(before, after);
                for took in ended {
                    metrics().learner_finished(took);
                }
            }
            GroupEvent::StateChanged {
                to: GroupState::Empty,
                ..
            } => {
                self.history.on_emptied(group.generation().0, now);
                let (before, ended) = self.history.set_learners(Vec::new(), now);
                metrics().learners_changed(before, 0);
                for took in ended {
                    metrics().learner_finished(took);
                }
            }
            _ => {}
        }
    }

    /// A consumer group's rounds for the status page and metrics: one ends when the group is
    /// Stable at a new target epoch (every member reconciled), or when it empties.
    pub(super) fn observe_consumer(&mut self, ctx: &Ctx) {
        let Some(group) = self.group.get::<ConsumerGroup>() else {
            return;
        };
        let now = ctx.clock.now();
        match group.state() {
            ConsumerGroupState::Stable
                if self.history.installed() != Some(group.assignment_epoch()) =>
            {
                let image = &*ctx.settings.image;
                let members = group
                    .members()
                    .map(|m| {
                        (
                            m.member_id.as_str().to_owned(),
                            partition_refs(&m.assigned, image),
                        )
                    })
                    .collect();
                if let Some(done) =
                    self.history
                        .on_installed(group.assignment_epoch(), members, now)
                {
                    metrics().rebalance_completed("consumer", done.took);
                }
            }
            ConsumerGroupState::Empty if self.history.installed().is_some() => {
                self.history.on_emptied(group.group_epoch(), now);
            }
            _ => {}
        }
    }

    /// The partitions in a member's assignment, when the group speaks the consumer protocol.
    pub(super) fn partitions(&self, assignment: &bytes::Bytes) -> Vec<PartitionRef> {
        if self.group.protocol_type() != "consumer" || assignment.is_empty() {
            return Vec::new();
        }
        let Ok((topics, _)) = crate::assignor::protocol::decode_assignment(assignment) else {
            return Vec::new();
        };
        let mut out: Vec<PartitionRef> = topics
            .into_iter()
            .flat_map(|(topic, ps)| {
                ps.into_iter().map(move |partition| PartitionRef {
                    topic: topic.clone(),
                    partition,
                })
            })
            .collect();
        out.sort();
        out
    }

    pub(super) fn snapshot(&self, ctx: &Ctx) -> Option<GroupSnapshot> {
        if self.group.is_dead() {
            return None;
        }
        if let Some(group) = self.group.get::<ConsumerGroup>() {
            return Some(self.consumer_snapshot(ctx, group));
        }
        if let Some(group) = self.group.get::<StreamsGroup>() {
            return Some(self.streams_snapshot(group));
        }
        if let Some(group) = self.group.get::<ShareGroup>() {
            return Some(share_snapshot(ctx, group));
        }
        let group = self.group.get::<ClassicGroup>()?;
        let state = group.state();
        let now = ctx.clock.now();
        Some(GroupSnapshot {
            group_id: group.id().as_str().to_owned(),
            kind: "classic",
            state: state.to_string(),
            epoch: group.generation().0,
            protocol_type: group.protocol_type().unwrap_or_default().to_owned(),
            protocol: group.protocol_name().unwrap_or_default().to_owned(),
            assignor: group.server_assignor_name().map(str::to_owned),
            leader: group.leader().map(|l| l.as_str().to_owned()),
            members: group
                .members()
                .map(|m| MemberSnapshot {
                    member_id: m.id.as_str().to_owned(),
                    instance_id: m.instance_id.as_ref().map(|i| i.as_str().to_owned()),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    partitions: self.partitions(&m.assignment),
                    client_metrics: Vec::new(),
                })
                .collect(),
            learners: self
                .history
                .learners()
                .iter()
                .map(|l| LearnerSnapshot::new(l, now))
                .collect(),
            offsets: self.offsets.count(self.group.id()),
            rebalances: self.history.rebalances(),
            share_partitions: Vec::new(),
        })
    }

    /// A consumer group (KIP-848) for the status page: members with their current partitions.
    fn consumer_snapshot(&self, ctx: &Ctx, group: &ConsumerGroup) -> GroupSnapshot {
        let image = &*ctx.settings.image;
        GroupSnapshot {
            group_id: group.id().as_str().to_owned(),
            kind: "consumer",
            state: group.state().as_str().to_owned(),
            epoch: group.group_epoch(),
            protocol_type: "consumer".to_owned(),
            protocol: String::new(),
            assignor: Some(group.assignor_name().to_owned()),
            leader: None,
            members: group
                .members()
                .map(|m| {
                    let partitions = partition_refs(&m.assigned, image);
                    MemberSnapshot {
                        member_id: m.member_id.as_str().to_owned(),
                        instance_id: m.instance_id.as_ref().map(|i| i.as_str().to_owned()),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        partitions,
                        client_metrics: Vec::new(),
                    }
                })
                .collect(),
            learners: Vec::new(),
            offsets: self.offsets.count(group.id()),
            rebalances: self.history.rebalances(),
            share_partitions: Vec::new(),
        }
    }

    /// A streams group for the status page: members with their active tasks (a task shows as
    /// the partition of its subtopology, topic `subtopology-<id>`).
    fn streams_snapshot(&self, group: &StreamsGroup) -> GroupSnapshot {
        GroupSnapshot {
            group_id: group.id().as_str().to_owned(),
            kind: "streams",
            state: group.state().as_str().to_owned(),
            epoch: group.group_epoch(),
            protocol_type: "streams".to_owned(),
            protocol: String::new(),
            assignor: Some(group.assignor_name().to_owned()),
            leader: None,
            members: group
                .members()
                .map(|m| MemberSnapshot {
                    member_id: m.member_id.as_str().to_owned(),
                    instance_id: m.instance_id.as_ref().map(|i| i.as_str().to_owned()),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    partitions: m
                        .assigned
                        .active
                        .iter()
                        .map(|t| PartitionRef {
                            topic: format!("subtopology-{}", t.subtopology),
                            partition: t.partition,
                        })
                        .collect(),
                    client_metrics: Vec::new(),
                })
                .collect(),
            learners: Vec::new(),
            offsets: self.offsets.count(group.id()),
            rebalances: self.history.rebalances(),
            share_partitions: Vec::new(),
        }
    }
}

/// A share group (KIP-932) for the status page: members with the partitions they share, and
/// each share partition's window.
fn share_snapshot(ctx: &Ctx, group: &ShareGroup) -> GroupSnapshot {
    let image = &*ctx.settings.image;
    GroupSnapshot {
        group_id: group.id().as_str().to_owned(),
        kind: "share",
        state: group.state().as_str().to_owned(),
        epoch: group.group_epoch(),
        protocol_type: "share".to_owned(),
        protocol: String::new(),
        assignor: Some("simple".to_owned()),
        leader: None,
        members: group
            .members()
            .map(|m| MemberSnapshot {
                member_id: m.member_id.as_str().to_owned(),
                instance_id: None,
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                partitions: partition_refs(&m.assigned, image),
                client_metrics: Vec::new(),
            })
            .collect(),
        learners: Vec::new(),
        offsets: 0,
        rebalances: Vec::new(),
        share_partitions: group
            .partitions()
            .filter_map(|(&(topic, partition), p)| {
                Some(SharePartitionSnapshot {
                    topic: image.name_of(topic)?,
                    partition,
                    start_offset: p.start_offset(),
                    in_flight: p.in_flight(),
                    acquired: p.acquired_count(),
                    available: p.available_count(),
                    delivered: p.delivered_count(),
                })
            })
            .collect(),
    }
}

/// A consumer-group member's partitions by topic name, sorted; deleted topics left out.
fn partition_refs(
    partitions: &crate::vocab::Partitions,
    image: &dyn crate::group::consumer::TopicImage,
) -> Vec<PartitionRef> {
    let mut out: Vec<PartitionRef> = partitions
        .iter()
        .filter_map(|(id, ps)| Some((image.name_of(*id)?, ps)))
        .flat_map(|(topic, ps)| {
            ps.iter().map(move |&partition| PartitionRef {
                topic: topic.clone(),
                partition,
            })
        })
        .collect();
    out.sort();
    out
}

pub(super) fn log_consumer_event(event: &ConsumerEvent) {
    match event {
        ConsumerEvent::Joined { member, instance } => info!(
            member = %member,
            instance_id = instance.as_ref().map(|i| i.as_str()).unwrap_or(""),
            "member joined the consumer group"
        ),
        ConsumerEvent::Left { member, why } => info!(member = %member, "member removed: {why}"),
        ConsumerEvent::EpochBumped { epoch, why } => {
            info!(epoch, "group epoch bumped: {why}")
        }
        ConsumerEvent::TargetComputed {
            epoch,
            assignor,
            summary,
        } => info!(
            epoch,
            assignor,
            "target assignment computed{}",
            summary
                .as_deref()
                .map(|s| format!(": {s}"))
                .unwrap_or_default()
        ),
    }
}

/// A share group's events: membership logged, record outcomes counted.
pub(super) fn observe_share_events(events: &[ShareEvent]) {
    use crate::metrics::ShareOutcome as O;
    let m = metrics();
    for event in events {
        match event {
            ShareEvent::Joined(member) => info!(member = %member, "member joined the share group"),
            ShareEvent::Left(member) => info!(member = %member, "member left the share group"),
            ShareEvent::Fenced { member, why } => {
                info!(member = %member, "member removed: {why}")
            }
            ShareEvent::EpochBumped { epoch, why } => info!(epoch, "group epoch bumped: {why}"),
            ShareEvent::LocksExpired { released, archived } => {
                debug!(released, archived, "acquisition locks expired");
                m.share_records(O::LockExpired, released + archived);
                m.share_records(O::Archived, *archived);
            }
            ShareEvent::Acquired {
                records,
                redelivered,
            } => {
                m.share_records(O::Acquired, *records);
                m.share_records(O::Redelivered, *redelivered);
            }
            ShareEvent::Acknowledged {
                accepted,
                released,
                rejected,
                archived,
            } => {
                m.share_records(O::Accepted, *accepted);
                m.share_records(O::Released, *released);
                m.share_records(O::Rejected, *rejected);
                m.share_records(O::Archived, *archived);
            }
            ShareEvent::Released { released, archived } => {
                debug!(
                    released,
                    archived, "records of a departed member given back"
                );
                m.share_records(O::Returned, released + archived);
                m.share_records(O::Archived, *archived);
            }
        }
    }
}

pub(super) fn log_event(event: &GroupEvent) {
    match event {
        GroupEvent::GenerationStarted {
            generation,
            protocol_type,
            protocol_name,
            leader,
            members,
        } => info!(
            generation = generation.0,
            protocol_type = protocol_type.as_deref().unwrap_or(""),
            protocol = protocol_name.as_deref().unwrap_or(""),
            leader = leader.as_ref().map(|l| l.as_str()).unwrap_or(""),
            members = ?members.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
            "new generation"
        ),
        GroupEvent::MemberAdded {
            member,
            instance_id,
            reason,
        } => info!(
            member = %member,
            instance_id = instance_id.as_ref().map(|i| i.as_str()).unwrap_or(""),
            reason = ?reason,
            "member added"
        ),
        GroupEvent::MemberRemoved {
            member,
            instance_id,
            reason,
        } => info!(
            member = %member,
            instance_id = instance_id.as_ref().map(|i| i.as_str()).unwrap_or(""),
            reason = %reason,
            "member removed"
        ),
        GroupEvent::RebalanceStarted { generation, reason } => {
            info!(generation = generation.0, reason = ?reason, "rebalance started")
        }
        GroupEvent::StateChanged { from, to } => debug!(%from, %to, "state changed"),
        GroupEvent::LeaderChanged { old, new } => debug!(?old, ?new, "leader changed"),
        GroupEvent::PendingMemberAdded { member } => debug!(member = %member, "pending member"),
        GroupEvent::AssignmentInstalled {
            generation,
            assigned_by,
        } => info!(
            generation = generation.0,
            assigned_by = assigned_by.as_deref().unwrap_or("leader"),
            "assignment installed"
        ),
        GroupEvent::LeaderAssignmentIgnored {
            generation,
            entries,
        } => debug!(
            generation = generation.0,
            entries, "leader's assignment ignored: the server assigns this group"
        ),
        GroupEvent::AssignorWarning {
            generation,
            assignor,
            warning,
        } => warn!(generation = generation.0, assignor = %assignor, "{warning}"),
        GroupEvent::AssignmentFallback {
            generation,
            rejoins,
        } => warn!(
            generation = generation.0,
            rejoins,
            "the leader rejoined unchanged after each of the last {rejoins} server assignments: \
             its plan is installed from now on (group.assignment.fallback.rejoins)"
        ),
        GroupEvent::RebalanceStorm {
            generation,
            rebalances,
            limit,
        } => info!(
            generation = generation.0,
            rebalances,
            limit,
            "rebalance storm: {rebalances} rebalances started within a minute (group.rebalance.storm.per.minute)"
        ),
        GroupEvent::AssignmentPlanned {
            generation,
            assignor,
            summary,
        } => info!(
            generation = generation.0,
            assignor = %assignor,
            "assignment: {summary}"
        ),
    }
}

/// StreamsGroupDescribe's view of a streams group.
/// A streams group's event as a log line: membership, epochs and targets at info (warm-ups
/// being planned and promoted are what an operator watches a scale-out by), the rest at debug.
pub(super) fn log_streams_event(event: &StreamsEvent) {
    match event {
        StreamsEvent::Joined { member, process } => {
            info!(%member, %process, "streams member joined");
        }
        StreamsEvent::Left { member, why } => info!(%member, why, "streams member left"),
        StreamsEvent::EpochBumped { epoch, why } => debug!(epoch, why, "group epoch bumped"),
        StreamsEvent::TargetComputed {
            epoch,
            assignor,
            tasks,
            members,
        } => info!(
            epoch,
            assignor, tasks, members, "target assignment computed"
        ),
        StreamsEvent::WarmingUp {
            task,
            learner,
            owner,
        } => info!(
            task = %format_args!("{}_{}", task.subtopology, task.partition),
            %learner,
            %owner,
            "warm-up planned: the task stays with its owner while the learner restores its state"
        ),
        StreamsEvent::Promoted { task, learner } => info!(
            task = %format_args!("{}_{}", task.subtopology, task.partition),
            %learner,
            "warm-up promoted: caught up, the task moves to its learner"
        ),
    }
}
