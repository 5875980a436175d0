//! A streams group's topology (KIP-1071), as its members send it, and its configuration against
//! the topics that exist: how many tasks each subtopology has, how many partitions each internal
//! (repartition and changelog) topic must have, which of them the coordinator must create, and
//! the status a member is told when the topology cannot run yet. PURE: the topics come in
//! through a lookup.
//!
//! Kafka's rules (`InternalTopicManager.configureTopics` and the classes it uses):
//! - Every source topic must exist, else MISSING_SOURCE_TOPICS ("Source topics A, B are
//!   missing.") and nothing is configured.
//! - A repartition topic with no partition count of its own gets the largest partition count of
//!   the source topics (plain and repartition) of the subtopologies that write to it, repeated
//!   until every count is known (a repartition topic can feed another).
//! - Co-partition groups: topics joined together must have one partition count. If every topic
//!   of a group is a repartition topic, those with a count of their own must agree (else
//!   INCORRECTLY_PARTITIONED_TOPICS) and give it to the others, or the largest count is used;
//!   otherwise the plain source topics must agree and give their count to the repartition ones.
//! - A changelog topic has as many partitions as its subtopology has tasks.
//! - A subtopology has as many tasks as its largest source topic (plain or repartition).
//! - An internal topic that exists with another partition count is
//!   INCORRECTLY_PARTITIONED_TOPICS; those that do not exist are to be created, and until they
//!   are the status is MISSING_INTERNAL_TOPICS ("Internal topics are missing: A, B"), though the
//!   topology is configured.

use std::collections::{BTreeMap, BTreeSet};

pub use crate::vocab::streams::{CopartitionGroup, Subtopology, TopicInfo, Topology};

/// Why a topology cannot run (yet): a StreamsGroupHeartbeat status, with Kafka's detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyProblem {
    /// 1
    MissingSourceTopics(String),
    /// 2
    IncorrectlyPartitionedTopics(String),
    /// 3: the topology is configured; the coordinator is creating these topics.
    MissingInternalTopics(String),
}

impl TopologyProblem {
    /// The status code of StreamsGroupHeartbeatResponse.
    pub fn code(&self) -> i8 {
        match self {
            TopologyProblem::MissingSourceTopics(_) => 1,
            TopologyProblem::IncorrectlyPartitionedTopics(_) => 2,
            TopologyProblem::MissingInternalTopics(_) => 3,
        }
    }

    pub fn detail(&self) -> &str {
        match self {
            TopologyProblem::MissingSourceTopics(d)
            | TopologyProblem::IncorrectlyPartitionedTopics(d)
            | TopologyProblem::MissingInternalTopics(d) => d,
        }
    }
}

/// An internal topic the coordinator creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicToCreate {
    pub partitions: i32,
    /// -1: the broker's default.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

/// A subtopology with its partition counts decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfiguredSubtopology {
    /// Tasks `0..tasks` of the subtopology.
    pub tasks: i32,
    pub source_topics: Vec<String>,
    /// Repartition source topics and changelog topics with their partition counts.
    pub repartition_source_topics: BTreeMap<String, i32>,
    pub changelog_topics: BTreeMap<String, i32>,
}

/// The outcome of [`configure`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfiguredTopology {
    pub epoch: i32,
    /// `None` when the topology cannot be configured (see `problem`).
    pub subtopologies: Option<BTreeMap<String, ConfiguredSubtopology>>,
    pub to_create: BTreeMap<String, TopicToCreate>,
    pub problem: Option<TopologyProblem>,
}

impl ConfiguredTopology {
    /// Whether tasks can be assigned: configured, and every internal topic exists.
    pub fn is_ready(&self) -> bool {
        self.subtopologies.is_some() && self.problem.is_none()
    }
}

/// Configures `topology` against the topics `partitions_of` knows (their partition counts).
pub fn configure(
    topology: &Topology,
    partitions_of: &dyn Fn(&str) -> Option<i32>,
) -> ConfiguredTopology {
    let failed = |problem| ConfiguredTopology {
        epoch: topology.epoch,
        subtopologies: None,
        to_create: BTreeMap::new(),
        problem: Some(problem),
    };
    let missing: BTreeSet<&str> = topology
        .subtopologies
        .iter()
        .flat_map(|s| &s.source_topics)
        .filter(|t| partitions_of(t).is_none())
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return failed(TopologyProblem::MissingSourceTopics(format!(
            "Source topics {} are missing.",
            summarize(missing)
        )));
    }
    let mut decided = Decided {
        existing: partitions_of,
        internal: BTreeMap::new(),
    };
    if let Err(e) = decided.repartition_topics(topology) {
        return failed(TopologyProblem::IncorrectlyPartitionedTopics(e));
    }
    for subtopology in &topology.subtopologies {
        for group in &subtopology.copartition_groups {
            if let Err(e) = decided.copartition(topology, subtopology, group) {
                return failed(TopologyProblem::IncorrectlyPartitionedTopics(e));
            }
        }
    }
    let mut subtopologies = BTreeMap::new();
    let mut declared: Vec<(String, TopicToCreate)> = Vec::new();
    for s in &topology.subtopologies {
        let inputs = s
            .source_topics
            .iter()
            .chain(s.repartition_source_topics.iter().map(|t| &t.name));
        let tasks = inputs.filter_map(|t| decided.count(t)).max().unwrap_or(0);
        let repartition: BTreeMap<String, i32> = s
            .repartition_source_topics
            .iter()
            .map(|t| (t.name.clone(), decided.count(&t.name).unwrap_or(tasks)))
            .collect();
        let changelog: BTreeMap<String, i32> = s
            .changelog_topics
            .iter()
            .filter(|t| !s.source_topics.contains(&t.name))
            .map(|t| (t.name.clone(), tasks))
            .collect();
        for t in &s.repartition_source_topics {
            declared.push((t.name.clone(), to_create(t, repartition[&t.name])));
        }
        for t in s
            .changelog_topics
            .iter()
            .filter(|t| changelog.contains_key(&t.name))
        {
            declared.push((t.name.clone(), to_create(t, tasks)));
        }
        subtopologies.insert(
            s.id.clone(),
            ConfiguredSubtopology {
                tasks,
                source_topics: s.source_topics.clone(),
                repartition_source_topics: repartition,
                changelog_topics: changelog,
            },
        );
    }
    let mut to_create = BTreeMap::new();
    let mut order = Vec::new();
    for (name, topic) in declared {
        match partitions_of(&name) {
            Some(found) if found != topic.partitions => {
                return failed(TopologyProblem::IncorrectlyPartitionedTopics(format!(
                    "Existing topic {name} has different number of partitions: expected {}, \
                     found {found}",
                    topic.partitions
                )));
            }
            Some(_) => {}
            None => {
                if !to_create.contains_key(&name) {
                    order.push(name.clone());
                }
                to_create.insert(name, topic);
            }
        }
    }
    let problem = (!order.is_empty()).then(|| {
        TopologyProblem::MissingInternalTopics(format!(
            "Internal topics are missing: {}",
            order.join(", ")
        ))
    });
    ConfiguredTopology {
        epoch: topology.epoch,
        subtopologies: Some(subtopologies),
        to_create,
        problem,
    }
}

fn to_create(t: &TopicInfo, partitions: i32) -> TopicToCreate {
    TopicToCreate {
        partitions,
        replication_factor: if t.replication_factor == 0 {
            -1
        } else {
            t.replication_factor
        },
        configs: t.configs.clone(),
    }
}

/// Topic names for a status detail, in order, comma-separated.
fn summarize<'a>(topics: impl IntoIterator<Item = &'a str>) -> String {
    topics.into_iter().collect::<Vec<_>>().join(", ")
}

/// Partition counts: the existing topics', and those decided for repartition topics.
struct Decided<'a> {
    existing: &'a dyn Fn(&str) -> Option<i32>,
    internal: BTreeMap<String, i32>,
}

impl Decided<'_> {
    fn count(&self, topic: &str) -> Option<i32> {
        self.internal
            .get(topic)
            .copied()
            .or_else(|| (self.existing)(topic))
    }

    /// Every repartition topic's count: its own, or the largest input of its writers.
    fn repartition_topics(&mut self, topology: &Topology) -> Result<(), String> {
        let mut unknown: Vec<&str> = Vec::new();
        for t in topology
            .subtopologies
            .iter()
            .flat_map(|s| &s.repartition_source_topics)
        {
            if t.partitions > 0 {
                self.internal.insert(t.name.clone(), t.partitions);
            } else if !unknown.contains(&t.name.as_str()) {
                unknown.push(&t.name);
            }
        }
        while !unknown.is_empty() {
            let before = unknown.len();
            unknown.retain(|topic| match self.largest_writer_input(topology, topic) {
                Some(n) => {
                    self.internal.insert((*topic).to_owned(), n);
                    false
                }
                None => true,
            });
            if unknown.len() == before {
                return Err(
                    "Failed to compute number of partitions for all repartition topics, \
                            make sure all user input topics are created and all Pattern \
                            subscriptions match at least one topic in the cluster"
                        .into(),
                );
            }
        }
        Ok(())
    }

    /// The largest known input count of the subtopologies writing to `topic`.
    fn largest_writer_input(&self, topology: &Topology, topic: &str) -> Option<i32> {
        topology
            .subtopologies
            .iter()
            .filter(|s| s.repartition_sink_topics.iter().any(|t| t == topic))
            .flat_map(|s| {
                s.source_topics
                    .iter()
                    .chain(s.repartition_source_topics.iter().map(|t| &t.name))
            })
            .filter_map(|t| self.count(t))
            .max()
    }

    /// One co-partition group of `subtopology` gets one partition count.
    fn copartition(
        &mut self,
        topology: &Topology,
        subtopology: &Subtopology,
        group: &CopartitionGroup,
    ) -> Result<(), String> {
        let repartition_names: Vec<String> = subtopology
            .repartition_source_topics
            .iter()
            .map(|t| t.name.clone())
            .collect();
        let sources: BTreeSet<&String> = group
            .source_topics
            .iter()
            .filter_map(|i| pick(&subtopology.source_topics, *i))
            .collect();
        let repartitions: BTreeSet<&String> = group
            .repartition_source_topics
            .iter()
            .filter_map(|i| pick(&repartition_names, *i))
            .collect();
        if sources.is_empty() && repartitions.is_empty() {
            return Ok(());
        }
        let fixed: BTreeMap<&String, i32> = repartitions
            .iter()
            .filter_map(|t| declared_count(topology, t).map(|n| (*t, n)))
            .collect();
        let count = if sources.is_empty() {
            if fixed.is_empty() {
                repartitions
                    .iter()
                    .filter_map(|t| self.count(t))
                    .max()
                    .unwrap_or(0)
            } else {
                let first = *fixed.values().next().unwrap_or(&0);
                if fixed.values().any(|&n| n != first) {
                    let all: BTreeMap<&String, i32> = repartitions
                        .iter()
                        .filter_map(|t| self.count(t).map(|n| (*t, n)))
                        .collect();
                    return Err(format!(
                        "Following topics do not have the same number of partitions: [{}]",
                        java_map(&all)
                    ));
                }
                first
            }
        } else {
            let counts: BTreeMap<&String, i32> = sources
                .iter()
                .map(|t| (*t, self.count(t).unwrap_or(0)))
                .collect();
            let first = *counts.values().next().unwrap_or(&0);
            if counts.values().any(|&n| n != first) {
                return Err(format!(
                    "Topics not co-partitioned: [{}]",
                    java_map(&counts)
                ));
            }
            first
        };
        for t in repartitions {
            if let Some(&n) = fixed.get(t) {
                if n != count {
                    return Err(format!(
                        "Number of partitions [{n}] of repartition topic [{t}] doesn't match \
                         number of partitions [{count}] of the source topic."
                    ));
                }
            }
            self.internal.insert(t.clone(), count);
        }
        Ok(())
    }
}

/// The topic at index `i` of `list` (a co-partition group's index; out of range: none).
fn pick(list: &[String], i: i16) -> Option<&String> {
    usize::try_from(i).ok().and_then(|i| list.get(i))
}

/// A repartition topic's own partition count, if the topology gives one.
fn declared_count(topology: &Topology, topic: &str) -> Option<i32> {
    topology
        .subtopologies
        .iter()
        .flat_map(|s| &s.repartition_source_topics)
        .find(|t| t.name == topic && t.partitions > 0)
        .map(|t| t.partitions)
}

/// Java's `TreeMap.toString()`: `{a=1, b=2}`.
fn java_map(m: &BTreeMap<&String, i32>) -> String {
    let entries: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", entries.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics(existing: &[(&str, i32)]) -> impl Fn(&str) -> Option<i32> {
        let map: BTreeMap<String, i32> = existing
            .iter()
            .map(|(t, n)| ((*t).to_string(), *n))
            .collect();
        move |t| map.get(t).copied()
    }

    /// The word count: input -> (0) -> repartition -> (1, changelog).
    fn word_count() -> Topology {
        Topology {
            epoch: 0,
            subtopologies: vec![
                Subtopology {
                    id: "0".into(),
                    source_topics: vec!["input".into()],
                    repartition_sink_topics: vec!["app-words-repartition".into()],
                    ..Subtopology::default()
                },
                Subtopology {
                    id: "1".into(),
                    repartition_source_topics: vec![TopicInfo::named("app-words-repartition")],
                    changelog_topics: vec![TopicInfo::named("app-counts-changelog")],
                    ..Subtopology::default()
                },
            ],
        }
    }

    #[test]
    fn missing_source_topics_are_named_and_nothing_is_configured() {
        let c = configure(&word_count(), &topics(&[]));
        assert_eq!(
            c.problem,
            Some(TopologyProblem::MissingSourceTopics(
                "Source topics input are missing.".into()
            ))
        );
        assert_eq!(c.problem.as_ref().map(TopologyProblem::code), Some(1));
        assert!(c.subtopologies.is_none() && c.to_create.is_empty());
        assert!(!c.is_ready());
    }

    #[test]
    fn internal_topics_take_the_partition_count_of_their_inputs_and_are_to_be_created() {
        let c = configure(&word_count(), &topics(&[("input", 3)]));
        let subs = c.subtopologies.as_ref().unwrap();
        assert_eq!(subs["0"].tasks, 3);
        assert_eq!(subs["1"].tasks, 3);
        assert_eq!(subs["1"].changelog_topics["app-counts-changelog"], 3);
        assert_eq!(
            c.to_create.keys().collect::<Vec<_>>(),
            ["app-counts-changelog", "app-words-repartition"]
        );
        assert_eq!(c.to_create["app-words-repartition"].replication_factor, -1);
        assert_eq!(
            c.problem,
            Some(TopologyProblem::MissingInternalTopics(
                "Internal topics are missing: app-words-repartition, app-counts-changelog".into()
            ))
        );
        assert!(!c.is_ready());
    }

    #[test]
    fn once_the_internal_topics_exist_the_topology_is_ready() {
        let existing = [
            ("input", 3),
            ("app-words-repartition", 3),
            ("app-counts-changelog", 3),
        ];
        let c = configure(&word_count(), &topics(&existing));
        assert_eq!(c.problem, None);
        assert!(c.is_ready() && c.to_create.is_empty());
    }

    #[test]
    fn an_internal_topic_with_another_partition_count_is_incorrectly_partitioned() {
        let existing = [("input", 3), ("app-counts-changelog", 5)];
        let c = configure(&word_count(), &topics(&existing));
        assert_eq!(
            c.problem,
            Some(TopologyProblem::IncorrectlyPartitionedTopics(
                "Existing topic app-counts-changelog has different number of partitions: \
                 expected 3, found 5"
                    .into()
            ))
        );
        assert!(c.subtopologies.is_none());
    }

    #[test]
    fn a_repartition_topic_with_its_own_count_keeps_it_and_its_reader_has_that_many_tasks() {
        let mut t = word_count();
        t.subtopologies[1].repartition_source_topics[0].partitions = 6;
        let c = configure(&t, &topics(&[("input", 3)]));
        let subs = c.subtopologies.unwrap();
        assert_eq!(subs["1"].tasks, 6);
        assert_eq!(c.to_create["app-counts-changelog"].partitions, 6);
    }

    #[test]
    fn a_repartition_topic_fed_by_another_waits_for_its_count() {
        // input(4) -> 0 -> r1 -> 1 -> r2 -> 2
        let t = Topology {
            epoch: 0,
            subtopologies: vec![
                Subtopology {
                    id: "2".into(),
                    repartition_source_topics: vec![TopicInfo::named("r2")],
                    ..Subtopology::default()
                },
                Subtopology {
                    id: "1".into(),
                    repartition_source_topics: vec![TopicInfo::named("r1")],
                    repartition_sink_topics: vec!["r2".into()],
                    ..Subtopology::default()
                },
                Subtopology {
                    id: "0".into(),
                    source_topics: vec!["input".into()],
                    repartition_sink_topics: vec!["r1".into()],
                    ..Subtopology::default()
                },
            ],
        };
        let c = configure(&t, &topics(&[("input", 4)]));
        let subs = c.subtopologies.unwrap();
        assert_eq!((subs["1"].tasks, subs["2"].tasks), (4, 4));
    }

    #[test]
    fn a_repartition_topic_nobody_writes_cannot_be_configured() {
        let t = Topology {
            epoch: 0,
            subtopologies: vec![Subtopology {
                id: "0".into(),
                repartition_source_topics: vec![TopicInfo::named("orphan")],
                ..Subtopology::default()
            }],
        };
        let c = configure(&t, &topics(&[]));
        assert_eq!(c.problem.as_ref().map(TopologyProblem::code), Some(2));
    }

    fn join(copartition: CopartitionGroup, existing: &[(&str, i32)]) -> ConfiguredTopology {
        let t = Topology {
            epoch: 0,
            subtopologies: vec![
                Subtopology {
                    id: "0".into(),
                    source_topics: vec!["other".into()],
                    repartition_sink_topics: vec!["r".into()],
                    ..Subtopology::default()
                },
                Subtopology {
                    id: "1".into(),
                    source_topics: vec!["left".into(), "right".into()],
                    repartition_source_topics: vec![TopicInfo::named("r")],
                    copartition_groups: vec![copartition],
                    ..Subtopology::default()
                },
            ],
        };
        configure(&t, &topics(existing))
    }

    #[test]
    fn co_partitioned_source_topics_must_agree() {
        let group = CopartitionGroup {
            source_topics: vec![0, 1],
            repartition_source_topics: vec![],
        };
        let c = join(group, &[("other", 2), ("left", 3), ("right", 4)]);
        assert_eq!(
            c.problem,
            Some(TopologyProblem::IncorrectlyPartitionedTopics(
                "Topics not co-partitioned: [{left=3, right=4}]".into()
            ))
        );
    }

    #[test]
    fn a_repartition_topic_joined_with_source_topics_takes_their_count() {
        let group = CopartitionGroup {
            source_topics: vec![0, 1],
            repartition_source_topics: vec![0],
        };
        // The writer of r reads 8 partitions; the join needs r at the sources' 3.
        let c = join(group, &[("other", 8), ("left", 3), ("right", 3)]);
        assert_eq!(c.problem.as_ref().map(TopologyProblem::code), Some(3));
        let subs = c.subtopologies.unwrap();
        assert_eq!(subs["1"].repartition_source_topics["r"], 3);
        assert_eq!(c.to_create["r"].partitions, 3);
    }

    #[test]
    fn co_partition_indexes_out_of_range_are_ignored() {
        let group = CopartitionGroup {
            source_topics: vec![7, -1],
            repartition_source_topics: vec![9],
        };
        let c = join(group, &[("other", 2), ("left", 3), ("right", 3)]);
        assert_eq!(c.problem.as_ref().map(TopologyProblem::code), Some(3));
    }

    #[test]
    fn a_changelog_that_is_also_a_source_topic_is_not_created() {
        let t = Topology {
            epoch: 0,
            subtopologies: vec![Subtopology {
                id: "0".into(),
                source_topics: vec!["table".into()],
                changelog_topics: vec![TopicInfo::named("table")],
                ..Subtopology::default()
            }],
        };
        let c = configure(&t, &topics(&[("table", 2)]));
        assert!(c.is_ready(), "{c:?}");
        assert!(c.subtopologies.unwrap()["0"].changelog_topics.is_empty());
    }
}
