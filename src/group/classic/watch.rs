//! Two watches over a group's rebalances, for what Kafka has no need of:
//! - the fallback guard: koord assigns a group on the server, but a client it does not know
//!   computes its own plan, compares, and rejoins whenever they differ. When the leader of a
//!   server-assigned generation rejoins with nothing changed, `group.assignment.fallback.rejoins`
//!   generations in a row, koord stops overriding that group's leader and installs the leader's
//!   plans from then on (for as long as the group is loaded), so a group on koord's defaults
//!   never does worse than on Kafka;
//! - rebalance storms: more than `group.rebalance.storm.per.minute` rebalances started within a
//!   minute, of any cause, are reported (at most once a minute).

use std::collections::VecDeque;

use super::ClassicGroup;
use crate::group::output::GroupEvent;
use crate::vocab::Timestamp;

const MINUTE_MS: u64 = 60_000;

#[derive(Debug, Default)]
pub(super) struct Watch {
    /// Server-assigned generations in a row that ended with the leader rejoining unchanged.
    unchanged_rejoins: u32,
    /// The rebalance being started is such a rejoin (set just before it starts).
    rejoin_noted: bool,
    /// The guard tripped: the leader assigns this group from now on.
    pub(super) leader_assigns: bool,
    /// When the rebalances of the last minute started.
    starts: VecDeque<Timestamp>,
    storm_reported: Option<Timestamp>,
}

impl ClassicGroup {
    /// The leader of the current generation rejoins with the metadata it had; called before
    /// the rebalance it causes starts.
    pub(super) fn note_unchanged_leader_rejoin(&mut self) {
        if !self.has_server_assignment() || self.watch.leader_assigns {
            return;
        }
        self.watch.unchanged_rejoins += 1;
        self.watch.rejoin_noted = true;
        let limit = self.config.assignment_fallback_rejoins;
        if limit > 0 && self.watch.unchanged_rejoins >= limit {
            self.watch.leader_assigns = true;
            self.event(GroupEvent::AssignmentFallback {
                generation: self.generation,
                rejoins: self.watch.unchanged_rejoins,
            });
        }
    }

    /// A rebalance starts now: counts it for the storm report, and ends a run of unchanged
    /// rejoins if it has another cause.
    pub(super) fn watch_rebalance_start(&mut self, now: Timestamp) {
        if !std::mem::take(&mut self.watch.rejoin_noted) {
            self.watch.unchanged_rejoins = 0;
        }
        let limit = self.config.rebalance_storm_per_minute;
        if limit == 0 {
            return;
        }
        let starts = &mut self.watch.starts;
        while starts
            .front()
            .is_some_and(|&t| now.as_millis().saturating_sub(t.as_millis()) >= MINUTE_MS)
        {
            starts.pop_front();
        }
        starts.push_back(now);
        let rebalances = starts.len() as u32;
        let due = self
            .watch
            .storm_reported
            .is_none_or(|t| now.as_millis().saturating_sub(t.as_millis()) >= MINUTE_MS);
        if rebalances > limit && due {
            self.watch.storm_reported = Some(now);
            self.event(GroupEvent::RebalanceStorm {
                generation: self.generation,
                rebalances,
                limit,
            });
        }
    }
}
