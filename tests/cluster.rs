//! Cluster mode's fencing against a real Apache Kafka 4.4 (KOORD_UPSTREAM: its bootstrap list).
//! The tests need it, so they are ignored unless asked for: scripts/test.sh's gateway tier sets
//! it and runs them with `-- --include-ignored`; asked for without it, they fail.
//!
//! Two stores stand for two koord nodes of one cluster writing one shard: the second claims
//! it (a newer epoch of the shard's producer, its fence record written), and from then on
//! upstream refuses the first's writes, which gives the shard up, while the second's land.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use koord::gateway::client::Upstream;
use koord::gateway::store::UpstreamStore;
use koord::group::classic;
use koord::storage::{LoadedGroup, MemoryStore, Mutation};
use koord::vocab::partition_of;
use koord::vocab::records::GroupMetadataRecord;
use koord::vocab::{Generation, GroupError, GroupId, OffsetAndMetadata, Timestamp, TopicPartition};

fn upstream() -> Vec<String> {
    let v = std::env::var("KOORD_UPSTREAM")
        .expect("KOORD_UPSTREAM (a Kafka cluster's bootstrap list) is not set");
    v.split(',').map(str::to_string).collect()
}

fn record(generation: i32) -> GroupMetadataRecord {
    GroupMetadataRecord {
        protocol_type: Some("consumer".into()),
        generation: Generation(generation),
        protocol_name: None,
        leader: None,
        state_timestamp: Timestamp(0),
        members: Vec::new(),
        assignor_state: Bytes::new(),
        follow_up: None,
    }
}

fn put(group: &str, generation: i32) -> Vec<Mutation> {
    vec![Mutation::PutGroupRecord {
        group: GroupId::new(group),
        record: classic::codec::stored(&record(generation)),
    }]
}

/// The generation of a loaded classic group's record.
fn generation(g: &LoadedGroup) -> Generation {
    classic::codec::restore(&g.records)
        .unwrap()
        .unwrap()
        .generation
}

#[test]
#[ignore = "needs a Kafka cluster: KOORD_UPSTREAM"]
fn a_former_owner_s_writes_are_refused_once_the_next_owner_claimed_the_shard() {
    let bootstrap = upstream();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let suffix = format!("{:x}", std::process::id() ^ 0x5eed);
    let topic = format!("__koord_fencing_{suffix}");
    let cluster = format!("fencing-{suffix}");
    let open = |node: i32| {
        rt.block_on(async {
            let view = koord::gateway::discover(
                &bootstrap,
                &koord::security::client::ClientSecurity::plaintext(),
                Duration::from_secs(30),
            )
            .await
            .unwrap();
            let up = Arc::new(Upstream::new(bootstrap.clone(), view.brokers));
            UpstreamStore::open(
                up,
                Arc::new(MemoryStore::default()),
                &topic,
                2,
                Duration::from_secs(10),
            )
            .await
            .unwrap()
            .with_fencing(&cluster, node)
        })
    };
    // A write as a storage lane makes it (awaited on the runtime).
    let apply = |store: &UpstreamStore, batch: &[Mutation]| {
        rt.block_on(store.write(vec![batch.to_vec()], true))
            .pop()
            .unwrap()
    };
    let first = open(1);
    let second = open(2);
    // Its own name per run: its committed offsets stay upstream after it.
    let group = format!("fenced-group-{suffix}");
    let group = group.as_str();
    let shard = partition_of(group, 2);

    // Not claimed: not written.
    assert!(apply(&first, &put(group, 1)).is_err());
    rt.block_on(first.claim(shard)).unwrap();
    apply(&first, &put(group, 1)).unwrap();
    apply(&first, &put(group, 2)).unwrap();

    // The next owner claims the shard: the first one's next write is refused, and it learns
    // the shard is gone.
    rt.block_on(second.claim(shard)).unwrap();
    assert!(apply(&first, &put(group, 3)).is_err());
    assert_eq!(first.take_fenced(), vec![shard]);
    assert!(
        apply(&first, &put(group, 4)).is_err(),
        "a fenced shard is not written again"
    );
    apply(&second, &put(group, 5)).unwrap();

    // What the shard holds: the first owner's writes from before the claim, then the second's.
    let loaded = rt.block_on(second.load_shards(&[shard])).unwrap();
    let g = loaded
        .iter()
        .find(|g| g.id.as_str() == group)
        .expect("the group is stored");
    assert_eq!(generation(g), Generation(5));

    // The first node claims it back (say the assignment returned it): the second is fenced.
    rt.block_on(first.claim(shard)).unwrap();
    assert!(apply(&second, &put(group, 6)).is_err());
    assert_eq!(second.take_fenced(), vec![shard]);
    apply(&first, &put(group, 7)).unwrap();
    let loaded = rt.block_on(first.load_shards(&[shard])).unwrap();
    let g = loaded.iter().find(|g| g.id.as_str() == group).unwrap();
    assert_eq!(generation(g), Generation(7));

    // Offsets are not fenced by the producer epoch: a node whose lease ran out writes none,
    // though it still holds the shard's newest epoch.
    let commit = |offset: i64| {
        vec![Mutation::PutOffset {
            group: GroupId::new(group),
            tp: TopicPartition::new(topic.as_str(), 0),
            offset: OffsetAndMetadata {
                offset,
                leader_epoch: None,
                metadata: String::new(),
                commit_timestamp: Timestamp(0),
                expire_timestamp: None,
            },
        }]
    };
    let lapsed = open(3);
    lapsed.set_lease_check(Box::new(|| false));
    rt.block_on(lapsed.claim(shard)).unwrap();
    assert!(apply(&lapsed, &commit(5)).is_err());
    let fetch = || {
        let view = rt
            .block_on(koord::gateway::discover(
                &bootstrap,
                &koord::security::client::ClientSecurity::plaintext(),
                Duration::from_secs(30),
            ))
            .unwrap();
        let up = Upstream::new(bootstrap.clone(), view.brokers);
        let g = rt.block_on(up.fetch_offsets(group, None, false)).unwrap();
        g.topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.committed_offset))
            .collect::<Vec<i64>>()
    };
    assert_eq!(fetch(), Vec::<i64>::new(), "no offset went upstream");
    let leased = open(4);
    rt.block_on(leased.claim(shard)).unwrap();
    apply(&leased, &commit(7)).unwrap();
    assert_eq!(fetch(), vec![7]);

    // What a node does upstream outside its store for a group (an upstream-only group's
    // deletion) waits for a fence write: done only by the shard's owner within its lease. The
    // others are told the group moved (NOT_COORDINATOR), not that upstream is unavailable.
    let fence = [Mutation::Fence {
        group: GroupId::new(group),
    }];
    apply(&leased, &fence).unwrap();
    for (node, store) in [("fenced", &first), ("lapsed", &lapsed)] {
        let e = apply(store, &fence).unwrap_err();
        assert_eq!(
            e.group_error(),
            GroupError::NotCoordinator,
            "{node} node: {e}"
        );
    }
}
