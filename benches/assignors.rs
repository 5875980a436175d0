//! The assignors on a subset of Kafka's `ServerSideAssignorBenchmark` grid (jmh-benchmarks,
//! `org.apache.kafka.jmh.assignor`): members {100, 1000, 10000} x 10 partitions per member x
//! topics {10, 1000}, homogeneous and heterogeneous subscriptions, FULL (no owned partitions)
//! and INCREMENTAL (one member joins a group holding the FULL assignment), range and uniform.
//!
//! As in Kafka's benchmark: every topic has `members * 10 / topics` partitions; member ids are
//! `member{i}` (so member order is not listing order and the assignor's sort is timed);
//! heterogeneous groups are 5 buckets of members, each subscribed to its own fifth of the
//! topics; the INCREMENTAL joiner `newMember` subscribes like `member{count - 2}` (the same
//! subscription object) when heterogeneous and to every topic (an equal, separate one) when
//! homogeneous. Building the spec is not timed; the assignment, including dropping it, is.
//!
//! `learner` (learner-spec.md) runs on the same grid; see [`learner`] for its INCREMENTAL case.
//!
//! One case beyond that grid: homogeneous FULL with 1000 topics and 5000 members, the other
//! figure Kafka publishes.
//!
//! Run: `cargo bench --bench assignors` (a filter after `--` selects cases, e.g. `uniform/`).

use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

use koord::assignor::learner::{plan, LearnerInput, Settings, State};
use koord::assignor::range::RangeAssignor;
use koord::assignor::testing::member;
use koord::assignor::uniform::UniformAssignor;
use koord::assignor::{Assignor, GroupSpec, Partition, TopicIndex, TopicSpec};
use koord::group::Timestamp;

const PARTITIONS_PER_MEMBER: usize = 10;
const MAX_BUCKETS: usize = 5;

/// Kafka's `createAssignmentSpec`, with `count` members.
fn group(count: usize, topics: usize, heterogeneous: bool) -> GroupSpec {
    let partitions = (count * PARTITIONS_PER_MEMBER / topics) as u32;
    let topics_spec = (0..topics)
        .map(|i| TopicSpec {
            name: Arc::from(format!("topic{i}")),
            partitions,
        })
        .collect();
    let mut members = Vec::with_capacity(count + 1);
    if !heterogeneous {
        let all: Arc<[TopicIndex]> = (0..topics as u32).collect();
        members.extend((0..count).map(|i| member(format!("member{i}"), all.clone())));
    } else {
        let buckets = MAX_BUCKETS.min(count);
        let topics_per = topics.div_ceil(buckets);
        let members_per = count.div_ceil(buckets);
        for b in 0..buckets {
            let t = (b * topics_per)..((b + 1) * topics_per).min(topics);
            let sub: Arc<[TopicIndex]> = t.map(|t| t as u32).collect();
            let m = (b * members_per)..((b + 1) * members_per).min(count);
            members.extend(m.map(|i| member(format!("member{i}"), sub.clone())));
        }
    }
    GroupSpec {
        topics: topics_spec,
        members,
    }
}

/// Kafka's `simulateIncrementalRebalance`: `count - 1` members hold the FULL assignment of
/// `assignor`, and `newMember` joins.
fn incremental(
    assignor: &dyn Assignor,
    count: usize,
    topics: usize,
    heterogeneous: bool,
) -> GroupSpec {
    let mut spec = group(count - 1, topics, heterogeneous);
    let full = assignor.assign(&spec);
    for (m, owned) in spec.members.iter_mut().zip(full.iter()) {
        m.owned = owned.to_vec();
    }
    let subscription = if heterogeneous {
        let like = format!("member{}", count - 2);
        let like = spec
            .members
            .iter()
            .find(|m| m.member_id.to_string() == like)
            .expect("member count - 2 exists");
        like.subscription.clone()
    } else {
        (0..topics as u32).collect()
    };
    spec.members.push(member("newMember", subscription));
    spec
}

/// One point of the grid.
#[derive(Clone, Copy)]
struct Case {
    heterogeneous: bool,
    full: bool,
    topics: usize,
    count: usize,
}

impl Case {
    /// The grid, in the order it is reported.
    fn grid() -> Vec<Case> {
        let mut cases = Vec::new();
        for heterogeneous in [false, true] {
            for full in [true, false] {
                for topics in [10, 1000] {
                    // 5000 only where Kafka publishes a figure (homogeneous FULL, 1000 topics).
                    let extra = (!heterogeneous && full && topics == 1000).then_some(5000);
                    for count in [100, 1000].into_iter().chain(extra).chain([10000]) {
                        cases.push(Case {
                            heterogeneous,
                            full,
                            topics,
                            count,
                        });
                    }
                }
            }
        }
        cases
    }

    fn id(&self) -> BenchmarkId {
        let subscriptions = if self.heterogeneous {
            "heterogeneous"
        } else {
            "homogeneous"
        };
        let kind = if self.full { "full" } else { "incremental" };
        BenchmarkId::new(
            format!("{subscriptions}/{kind}/{}t", self.topics),
            self.count,
        )
    }
}

fn configure<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1500));
    g
}

fn assignors(c: &mut Criterion) {
    let all: [(&str, &dyn Assignor); 2] =
        [("range", &RangeAssignor), ("uniform", &UniformAssignor)];
    for (name, assignor) in all {
        let mut g = configure(c, name);
        for case in Case::grid() {
            let spec = if case.full {
                group(case.count, case.topics, case.heterogeneous)
            } else {
                incremental(assignor, case.count, case.topics, case.heterogeneous)
            };
            g.bench_with_input(case.id(), &spec, |b, spec| b.iter(|| assignor.assign(spec)));
        }
        g.finish();
    }
}

/// The learner assignor on the same grid. FULL: a fresh group (empty state S, nothing
/// declared). INCREMENTAL: `count - 1` learner-capable members hold the assignment of a first
/// `plan` (its S, each member declaring what it owns), and `newMember` joins. Timed: one `plan`
/// call (its result dropped), with default settings (budget 2, seed mode).
fn learner(c: &mut Criterion) {
    let settings = Settings::default();
    let now = Timestamp(1_000_000);
    let mut g = configure(c, "learner");
    let capable = |declared: Vec<Partition>| LearnerInput {
        capable: true,
        declared,
        ..LearnerInput::default()
    };
    for case in Case::grid() {
        let Case {
            heterogeneous,
            topics,
            count,
            ..
        } = case;
        let (spec, inputs, prev) = if case.full {
            let spec = group(count, topics, heterogeneous);
            let inputs = vec![capable(Vec::new()); count];
            (spec, inputs, State::default())
        } else {
            let before = group(count - 1, topics, heterogeneous);
            let fresh = vec![capable(Vec::new()); count - 1];
            let settled = plan(&before, &fresh, &State::default(), &settings, now);
            // The joiner as in `incremental` (same subscription rules).
            let mut spec = incremental(&UniformAssignor, count, topics, heterogeneous);
            for m in &mut spec.members {
                m.owned.clear();
            }
            let mut inputs: Vec<LearnerInput> = settled
                .assigned
                .iter()
                .map(|a| capable(a.to_vec()))
                .collect();
            inputs.push(capable(Vec::new()));
            (spec, inputs, settled.state)
        };
        g.bench_with_input(case.id(), &spec, |b, spec| {
            b.iter(|| plan(spec, &inputs, &prev, &settings, now))
        });
    }
    g.finish();
}

criterion_group!(benches, assignors, learner);
criterion_main!(benches);
