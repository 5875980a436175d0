//! Durability (issue 4): acknowledged offset commits and group metadata survive kill -9 and
//! restarts; a damaged store stops koord instead of starting empty.

mod common;

use std::collections::HashMap;
use std::net::TcpStream;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{s, Client, Koord, DEADLINE};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    CreateTopicsRequest, DeleteTopicsRequest, GroupId, MetadataRequest, OffsetCommitRequest,
    OffsetFetchRequest, TopicName,
};

const GROUPS: usize = 10;
const PARTITIONS: i32 = 50;
const TOPIC: &str = "t";

fn commit_request(group: &str, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partitions(
                (0..PARTITIONS)
                    .map(|p| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(p)
                            .with_committed_offset(offset)
                    })
                    .collect(),
            )])
}

/// The committed offset of every partition of `group` (-1 for none).
fn fetch(c: &mut Client, group: &str) -> Vec<i64> {
    let resp = c.send(
        7,
        &OffsetFetchRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partition_indexes((0..PARTITIONS).collect())])),
    );
    assert_eq!(resp.error_code, 0, "{resp:?}");
    let mut out = vec![-1; PARTITIONS as usize];
    for t in &resp.topics {
        for p in &t.partitions {
            assert_eq!(p.error_code, 0, "{p:?}");
            out[p.partition_index as usize] = p.committed_offset;
        }
    }
    out
}

/// Commits `offset` to every partition of `group`; `Ok(true)` when every partition was
/// acknowledged without error.
fn try_commit(c: &mut Client, group: &str, offset: i64) -> std::io::Result<bool> {
    let resp = c.try_send(8, &commit_request(group, offset))?;
    Ok(resp
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .all(|p| p.error_code == 0))
}

/// A small deterministic generator for the kill moments (seeded from the clock, printed).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A committer commits continuously to 50 partitions of each of 10 groups (one thread per
/// group, each commit raising the offset); koord is killed with -9 at random moments 20 times
/// and restarted. Every commit whose response the committer received is there afterwards.
#[test]
fn acknowledged_commits_survive_kill_9() {
    let Some(mut koord) = Koord::start_owned(
        "acknowledged_commits_survive_kill_9",
        &["topics=t:50", "offsets.commit.sync=always"],
    ) else {
        return;
    };
    let addr = koord.addr();
    let acked: Arc<Mutex<HashMap<String, i64>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut committers = Vec::new();
    for g in 0..GROUPS {
        let (acked, stop) = (acked.clone(), stop.clone());
        committers.push(std::thread::spawn(move || {
            let group = format!("crash-{g}");
            let mut offset = 0i64;
            let mut client: Option<Client> = None;
            let mut acks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let c = match client.as_mut() {
                    Some(c) => c,
                    None => match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                        Ok(stream) => client.insert(Client::from_stream(stream)),
                        // koord is down: try again (bounded by the test's own rounds).
                        Err(_) => {
                            std::thread::sleep(Duration::from_millis(5));
                            continue;
                        }
                    },
                };
                offset += 1;
                match try_commit(c, &group, offset) {
                    Ok(true) => {
                        acked.lock().unwrap().insert(group.clone(), offset);
                        acks += 1;
                    }
                    // COORDINATOR_LOAD_IN_PROGRESS right after a restart: retry.
                    Ok(false) => {}
                    Err(_) => client = None,
                }
            }
            acks
        }));
    }
    let mut rng = Rng(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64 | 1)
        .unwrap_or(88172645463325252));
    eprintln!("kill moments seeded with {}", rng.0);
    let mut checked = 0;
    for round in 0..20 {
        // Let the committers get some acknowledgements in, then kill at a random moment.
        let before: i64 = acked.lock().unwrap().values().sum();
        let deadline = Instant::now() + DEADLINE;
        while acked.lock().unwrap().values().sum::<i64>() < before + GROUPS as i64 {
            assert!(
                Instant::now() < deadline,
                "round {round}: no commits acknowledged"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(rng.below(150)));
        koord.kill9();
        // No response can arrive while koord is down: this is every acknowledged commit.
        let promised = acked.lock().unwrap().clone();
        koord.restart();
        let mut c = koord.connect();
        for (group, offset) in &promised {
            let fetched = fetch(&mut c, group);
            for (p, got) in fetched.iter().enumerate() {
                assert!(
                    got >= offset,
                    "round {round}: {group} partition {p}: fetched {got}, acknowledged {offset}"
                );
                checked += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let acks: u64 = committers.into_iter().map(|t| t.join().unwrap()).sum();
    eprintln!("{acks} commits acknowledged, {checked} partition offsets checked after restarts");
    assert!(checked > 0);
}

/// Every topic Metadata lists: name, partition count and id, by name; Kafka's internal ones
/// only with `internal`.
fn all_topics(c: &mut Client, internal: bool) -> Vec<(String, usize, uuid::Uuid)> {
    let resp = c.send(12, &MetadataRequest::default().with_topics(None));
    let mut topics: Vec<_> = resp
        .topics
        .iter()
        .filter(|t| internal || !t.is_internal)
        .map(|t| {
            let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            (name, t.partitions.len(), t.topic_id)
        })
        .collect();
    topics.sort();
    topics
}

/// Every topic Metadata lists but Kafka's internal ones.
fn topics(c: &mut Client) -> Vec<(String, usize, uuid::Uuid)> {
    all_topics(c, false)
}

/// A graceful restart keeps offsets, groups and the topics created at run time, configured
/// ones and created ones with the ids they had.
#[test]
fn sigterm_restart_keeps_offsets_and_topics() {
    let Some(mut koord) = Koord::start_owned(
        "sigterm_restart_keeps_offsets_and_topics",
        &[
            "topics=t:50",
            "num.partitions=3",
            "offsets.commit.sync=never",
        ],
    ) else {
        return;
    };
    let mut c = koord.connect();
    assert!(try_commit(&mut c, "kept", 41).unwrap());
    let created = c.send(
        9,
        &MetadataRequest::default()
            .with_topics(Some(vec![
                kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                    .with_name(Some(TopicName(s("auto-created")))),
            ]))
            .with_allow_auto_topic_creation(true),
    );
    assert_eq!(created.topics[0].partitions.len(), 3);
    let before = topics(&mut c);
    let internal_before = all_topics(&mut c, true);
    drop(c);
    assert!(koord.terminate().success());
    koord.restart();
    let mut c = koord.connect();
    assert_eq!(fetch(&mut c, "kept"), vec![41; PARTITIONS as usize]);
    let after = topics(&mut c);
    let shape: Vec<(&str, usize)> = after.iter().map(|(n, p, _)| (n.as_str(), *p)).collect();
    assert_eq!(shape, [("auto-created", 3), ("t", 50)]);
    assert!(after.iter().all(|(_, _, id)| !id.is_nil()));
    assert_eq!(after, before, "the same ids after the restart");
    // __consumer_offsets and __transaction_state too: created once, stored.
    assert_eq!(all_topics(&mut c, true), internal_before);
}

/// Every topic name Metadata lists.
fn topic_names(c: &mut Client) -> Vec<String> {
    let resp = c.send(9, &MetadataRequest::default().with_topics(None));
    let mut names: Vec<String> = resp
        .topics
        .iter()
        .filter(|t| !t.is_internal)
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    names.sort();
    names
}

/// A topic whose deletion was acknowledged stays deleted after kill -9 and a restart; groups'
/// committed offsets of other topics stay.
#[test]
fn a_deleted_topic_stays_deleted_after_kill_9() {
    let Some(mut koord) = Koord::start_owned(
        "a_deleted_topic_stays_deleted_after_kill_9",
        &["topics=t:50"],
    ) else {
        return;
    };
    let mut c = koord.connect();
    for name in ["gone", "stays"] {
        let created = c.send(
            9,
            &MetadataRequest::default()
                .with_topics(Some(vec![
                    kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(TopicName(s(name)))),
                ]))
                .with_allow_auto_topic_creation(true),
        );
        assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    }
    assert!(try_commit(&mut c, "kept", 7).unwrap());
    let gone_id = topics(&mut c)
        .into_iter()
        .find(|(name, _, _)| name == "gone")
        .map(|(_, _, id)| id)
        .unwrap();
    let deleted = c.send(
        5,
        &DeleteTopicsRequest::default()
            .with_timeout_ms(5_000)
            .with_topic_names(vec![TopicName(s("gone"))]),
    );
    assert_eq!(deleted.responses[0].error_code, 0, "{deleted:?}");
    assert_eq!(topic_names(&mut c), ["stays", "t"]);
    drop(c);
    koord.kill9();
    koord.restart();
    let mut c = koord.connect();
    assert_eq!(topic_names(&mut c), ["stays", "t"]);
    assert_eq!(fetch(&mut c, "kept"), vec![7; PARTITIONS as usize]);
    // Created again under its name, the topic is another one, as in Kafka: a new id.
    let created = c.send(
        7,
        &CreateTopicsRequest::default()
            .with_timeout_ms(5_000)
            .with_topics(vec![
                kafka_protocol::messages::create_topics_request::CreatableTopic::default()
                    .with_name(TopicName(s("gone")))
                    .with_num_partitions(1)
                    .with_replication_factor(1),
            ]),
    );
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    assert!(!created.topics[0].topic_id.is_nil());
    assert_ne!(created.topics[0].topic_id, gone_id);
}

/// A topic auto-created by Metadata is answered once stored: killed with -9 the moment the
/// answer arrives, koord comes back with the topic under the id the client was told.
#[test]
fn an_auto_created_topic_keeps_the_id_it_was_answered_with_after_kill_9() {
    let Some(mut koord) = Koord::start_owned(
        "an_auto_created_topic_keeps_the_id_it_was_answered_with_after_kill_9",
        &[],
    ) else {
        return;
    };
    let mut c = koord.connect();
    let created = c.send(
        12,
        &MetadataRequest::default()
            .with_topics(Some(vec![
                kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                    .with_name(Some(TopicName(s("auto")))),
            ]))
            .with_allow_auto_topic_creation(true),
    );
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    let told = created.topics[0].topic_id;
    assert!(!told.is_nil());
    koord.kill9();
    koord.restart();
    let mut c = koord.connect();
    let after = topics(&mut c);
    assert!(
        after
            .iter()
            .any(|(name, _, id)| name == "auto" && *id == told),
        "{after:?} (told {told})"
    );
}

/// A truncated store file: `koord serve` exits non-zero and names the file.
#[test]
fn a_truncated_store_stops_koord_naming_the_file() {
    let Some(mut koord) = Koord::start_owned(
        "a_truncated_store_stops_koord_naming_the_file",
        &["topics=t:50"],
    ) else {
        return;
    };
    let mut c = koord.connect();
    for i in 0..20 {
        assert!(try_commit(&mut c, &format!("g{i}"), i).unwrap());
    }
    drop(c);
    assert!(koord.terminate().success());
    let file = koord.store_dir().join("koord.redb");
    let len = std::fs::metadata(&file).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    let out = Command::new(env!("CARGO_BIN_EXE_koord"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(koord.store_dir())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "koord started on a truncated store:\n{stderr}"
    );
    assert!(
        stderr.contains(&file.display().to_string()),
        "the message names {}:\n{stderr}",
        file.display()
    );
}

/// Topic configs set by CreateTopics and IncrementalAlterConfigs are durable once acknowledged:
/// kill -9, restart, and DescribeConfigs shows them (and the log still applies them).
#[test]
fn acknowledged_topic_configs_survive_kill_9() {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::{
        CreateTopicsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
    };
    let Some(mut koord) = Koord::start_owned("acknowledged_topic_configs_survive_kill_9", &[])
    else {
        return;
    };
    let mut c = koord.connect();
    let created = c.send(
        7,
        &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(s("configured")))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(s("cleanup.policy"))
                .with_value(Some(s("compact")))])]),
    );
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    let altered = c.send(
        1,
        &IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("configured"))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(s("max.message.bytes"))
                    .with_config_operation(0)
                    .with_value(Some(s("5000")))]),
        ]),
    );
    assert_eq!(altered.responses[0].error_code, 0, "{altered:?}");
    drop(c);
    koord.kill9();
    koord.restart();
    let mut c = koord.connect();
    let described = c.send(
        4,
        &DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("configured"))
            .with_configuration_keys(Some(vec![s("cleanup.policy"), s("max.message.bytes")]))]),
    );
    let got: Vec<(String, Option<String>, i8)> = described.results[0]
        .configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                c.value.as_ref().map(|v| v.to_string()),
                c.config_source,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("cleanup.policy".to_string(), Some("compact".to_string()), 1),
            ("max.message.bytes".to_string(), Some("5000".to_string()), 1),
        ]
    );
}

/// Partitions added by CreatePartitions are durable once acknowledged: kill -9, restart, and
/// Metadata serves the new counts, for a created topic (its configs kept) and for one from
/// `topics` (the stored count wins over the configured one).
#[test]
fn added_partitions_survive_kill_9() {
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::{
        CreatePartitionsRequest, CreateTopicsRequest, DescribeConfigsRequest,
    };
    let Some(mut koord) = Koord::start_owned("added_partitions_survive_kill_9", &["topics=t:50"])
    else {
        return;
    };
    let mut c = koord.connect();
    let created = c.send(
        7,
        &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(s("grown")))
            .with_num_partitions(2)
            .with_replication_factor(1)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(s("cleanup.policy"))
                .with_value(Some(s("compact")))])]),
    );
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    // (Without assignments the entries need `None`: the crate's default, like Java's, is an
    // empty list, which asks for no new partitions at all.)
    let grown = c.send(
        3,
        &CreatePartitionsRequest::default()
            .with_timeout_ms(5_000)
            .with_topics(vec![
                CreatePartitionsTopic::default()
                    .with_name(TopicName(s("grown")))
                    .with_count(5)
                    .with_assignments(None),
                CreatePartitionsTopic::default()
                    .with_name(TopicName(s(TOPIC)))
                    .with_count(60)
                    .with_assignments(None),
            ]),
    );
    assert!(grown.results.iter().all(|r| r.error_code == 0), "{grown:?}");
    let counts = |c: &mut Client| {
        let resp = c.send(9, &MetadataRequest::default().with_topics(None));
        let mut counts: Vec<(String, usize)> = resp
            .topics
            .iter()
            .filter(|t| !t.is_internal)
            .map(|t| {
                (
                    t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                    t.partitions.len(),
                )
            })
            .collect();
        counts.sort();
        counts
    };
    let expected = vec![("grown".to_string(), 5), ("t".to_string(), 60)];
    assert_eq!(counts(&mut c), expected);
    drop(c);
    koord.kill9();
    koord.restart();
    let mut c = koord.connect();
    assert_eq!(counts(&mut c), expected);
    let described = c.send(
        4,
        &DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("grown"))
            .with_configuration_keys(Some(vec![s("cleanup.policy")]))]),
    );
    let policy = &described.results[0].configs[0];
    assert_eq!(
        (policy.value.as_deref(), policy.config_source),
        (Some("compact"), 1),
        "{described:?}"
    );
}
