//! A streams group's stored records (KIP-1071): the group's own and each member's.

use crate::vocab::codec::{count, end, err, opt_str, version, DecodeError, Writer, V1};
use crate::vocab::reader::Reader;
use crate::vocab::stored::{GroupKind, RecordChange, StoredRecord};
use crate::vocab::streams::{
    CopartitionGroup, Endpoint, StreamsGroupRecord, StreamsMember, StreamsMemberState, Subtopology,
    TaskId, TaskSet, TopicInfo, Topology,
};
use crate::vocab::{InstanceId, MemberId};

impl Writer {
    fn tasks(&mut self, tasks: &std::collections::BTreeSet<TaskId>) {
        self.u32(tasks.len() as u32);
        for t in tasks {
            self.str(&t.subtopology);
            self.i32(t.partition);
        }
    }
    fn task_set(&mut self, s: &TaskSet) {
        self.tasks(&s.active);
        self.tasks(&s.standby);
        self.tasks(&s.warmup);
    }
    fn task_offsets(&mut self, offsets: &std::collections::BTreeMap<TaskId, i64>) {
        self.u32(offsets.len() as u32);
        for (t, o) in offsets {
            self.str(&t.subtopology);
            self.i32(t.partition);
            self.i64(*o);
        }
    }
    fn pairs(&mut self, pairs: &[(String, String)]) {
        self.u32(pairs.len() as u32);
        for (k, v) in pairs {
            self.str(k);
            self.str(v);
        }
    }
    fn topic_infos(&mut self, topics: &[TopicInfo]) {
        self.u32(topics.len() as u32);
        for t in topics {
            self.str(&t.name);
            self.i32(t.partitions);
            self.i32(i32::from(t.replication_factor));
            self.pairs(&t.configs);
        }
    }
}

fn tasks(
    r: &mut Reader,
    what: &'static str,
) -> Result<std::collections::BTreeSet<TaskId>, DecodeError> {
    let n = count(r, 8, what)?;
    let mut out = std::collections::BTreeSet::new();
    for _ in 0..n {
        let subtopology = r.str_u32(what)?.to_owned();
        out.insert(TaskId::new(subtopology, r.i32(what)?));
    }
    Ok(out)
}

fn task_set(r: &mut Reader, what: &'static str) -> Result<TaskSet, DecodeError> {
    Ok(TaskSet {
        active: tasks(r, what)?,
        standby: tasks(r, what)?,
        warmup: tasks(r, what)?,
    })
}

fn task_offsets(
    r: &mut Reader,
    what: &'static str,
) -> Result<std::collections::BTreeMap<TaskId, i64>, DecodeError> {
    let n = count(r, 16, what)?;
    let mut out = std::collections::BTreeMap::new();
    for _ in 0..n {
        let subtopology = r.str_u32(what)?.to_owned();
        let partition = r.i32(what)?;
        out.insert(TaskId::new(subtopology, partition), r.i64(what)?);
    }
    Ok(out)
}

fn pairs(r: &mut Reader, what: &'static str) -> Result<Vec<(String, String)>, DecodeError> {
    let n = count(r, 8, what)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let k = r.str_u32(what)?.to_owned();
        out.push((k, r.str_u32(what)?.to_owned()));
    }
    Ok(out)
}

fn strings(r: &mut Reader, what: &'static str) -> Result<Vec<String>, DecodeError> {
    let n = count(r, 4, what)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(r.str_u32(what)?.to_owned());
    }
    Ok(out)
}

fn topic_infos(r: &mut Reader, what: &'static str) -> Result<Vec<TopicInfo>, DecodeError> {
    let n = count(r, 16, what)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.str_u32(what)?.to_owned();
        let partitions = r.i32(what)?;
        let replication_factor = i16::try_from(r.i32(what)?)
            .map_err(|_| err(format!("{what}: bad replication factor")))?;
        out.push(TopicInfo {
            name,
            partitions,
            replication_factor,
            configs: pairs(r, what)?,
        });
    }
    Ok(out)
}

pub fn encode_streams_group(g: &StreamsGroupRecord) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(V1);
    w.i32(g.group_epoch);
    w.i32(g.assignment_epoch);
    w.u64(g.metadata_hash);
    match &g.topology {
        None => w.u8(0),
        Some(t) => {
            w.u8(1);
            w.i32(t.epoch);
            w.u32(t.subtopologies.len() as u32);
            for s in &t.subtopologies {
                w.str(&s.id);
                w.u32(s.source_topics.len() as u32);
                for n in &s.source_topics {
                    w.str(n);
                }
                w.u32(s.repartition_sink_topics.len() as u32);
                for n in &s.repartition_sink_topics {
                    w.str(n);
                }
                w.topic_infos(&s.repartition_source_topics);
                w.topic_infos(&s.changelog_topics);
                w.u32(s.copartition_groups.len() as u32);
                for c in &s.copartition_groups {
                    for list in [&c.source_topics, &c.repartition_source_topics] {
                        w.u32(list.len() as u32);
                        for &i in list {
                            w.i32(i32::from(i));
                        }
                    }
                }
            }
        }
    }
    w.0
}

fn indexes(r: &mut Reader, what: &'static str) -> Result<Vec<i16>, DecodeError> {
    let n = count(r, 4, what)?;
    (0..n)
        .map(|_| i16::try_from(r.i32(what)?).map_err(|_| err(format!("{what}: bad topic index"))))
        .collect()
}

pub fn decode_streams_group(value: &[u8]) -> Result<StreamsGroupRecord, DecodeError> {
    const WHAT: &str = "streams group value";
    let mut r = Reader::new(value);
    version(&mut r, WHAT)?;
    let group_epoch = r.i32(WHAT)?;
    let assignment_epoch = r.i32(WHAT)?;
    let metadata_hash = r.u64(WHAT)?;
    let topology = match r.u8(WHAT)? {
        0 => None,
        1 => {
            let epoch = r.i32(WHAT)?;
            let n = count(&mut r, 24, WHAT)?;
            let mut subtopologies = Vec::with_capacity(n);
            for _ in 0..n {
                let id = r.str_u32(WHAT)?.to_owned();
                let source_topics = strings(&mut r, WHAT)?;
                let repartition_sink_topics = strings(&mut r, WHAT)?;
                let repartition_source_topics = topic_infos(&mut r, WHAT)?;
                let changelog_topics = topic_infos(&mut r, WHAT)?;
                let groups = count(&mut r, 8, WHAT)?;
                let mut copartition_groups = Vec::with_capacity(groups);
                for _ in 0..groups {
                    copartition_groups.push(CopartitionGroup {
                        source_topics: indexes(&mut r, WHAT)?,
                        repartition_source_topics: indexes(&mut r, WHAT)?,
                    });
                }
                subtopologies.push(Subtopology {
                    id,
                    source_topics,
                    repartition_sink_topics,
                    repartition_source_topics,
                    changelog_topics,
                    copartition_groups,
                });
            }
            Some(Topology {
                epoch,
                subtopologies,
            })
        }
        t => return Err(err(format!("{WHAT}: bad option tag {t}"))),
    };
    end(&r, WHAT)?;
    Ok(StreamsGroupRecord {
        group_epoch,
        assignment_epoch,
        metadata_hash,
        topology,
    })
}

pub fn encode_streams_member(m: &StreamsMember) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(V1);
    w.str(m.member_id.as_str());
    w.i32(m.member_epoch);
    w.i32(m.previous_member_epoch);
    w.u8(m.state.code());
    w.opt_str(m.instance_id.as_ref().map(|i| i.as_str()));
    w.opt_str(m.rack_id.as_deref());
    w.str(&m.client_id);
    w.str(&m.client_host);
    w.i32(m.rebalance_timeout_ms);
    w.i32(m.topology_epoch);
    w.str(&m.process_id);
    match &m.user_endpoint {
        None => w.u8(0),
        Some(e) => {
            w.u8(1);
            w.str(&e.host);
            w.u32(u32::from(e.port));
        }
    }
    w.pairs(&m.client_tags);
    w.task_offsets(&m.task_offsets);
    w.task_offsets(&m.task_end_offsets);
    w.task_set(&m.assigned);
    w.task_set(&m.pending_revocation);
    w.task_set(&m.target);
    w.0
}

pub fn decode_streams_member(value: &[u8]) -> Result<StreamsMember, DecodeError> {
    const WHAT: &str = "streams member value";
    let mut r = Reader::new(value);
    version(&mut r, WHAT)?;
    let member_id = MemberId::new(r.str_u32(WHAT)?);
    let member_epoch = r.i32(WHAT)?;
    let previous_member_epoch = r.i32(WHAT)?;
    let code = r.u8(WHAT)?;
    let state = StreamsMemberState::from_code(code)
        .ok_or_else(|| err(format!("{WHAT}: unknown member state {code}")))?;
    let instance_id = opt_str(&mut r, WHAT)?.map(InstanceId::new);
    let rack_id = opt_str(&mut r, WHAT)?;
    let client_id = r.str_u32(WHAT)?.to_owned();
    let client_host = r.str_u32(WHAT)?.to_owned();
    let rebalance_timeout_ms = r.i32(WHAT)?;
    let topology_epoch = r.i32(WHAT)?;
    let process_id = r.str_u32(WHAT)?.to_owned();
    let user_endpoint = match r.u8(WHAT)? {
        0 => None,
        1 => {
            let host = r.str_u32(WHAT)?.to_owned();
            let port = u16::try_from(r.u32(WHAT)?).map_err(|_| err(format!("{WHAT}: bad port")))?;
            Some(Endpoint { host, port })
        }
        t => return Err(err(format!("{WHAT}: bad option tag {t}"))),
    };
    let client_tags = pairs(&mut r, WHAT)?;
    let offsets = task_offsets(&mut r, WHAT)?;
    let end_offsets = task_offsets(&mut r, WHAT)?;
    let assigned = task_set(&mut r, WHAT)?;
    let pending_revocation = task_set(&mut r, WHAT)?;
    let target = task_set(&mut r, WHAT)?;
    end(&r, WHAT)?;
    Ok(StreamsMember {
        member_id,
        member_epoch,
        previous_member_epoch,
        state,
        instance_id,
        rack_id,
        client_id,
        client_host,
        rebalance_timeout_ms,
        topology_epoch,
        process_id,
        user_endpoint,
        client_tags,
        task_offsets: offsets,
        task_end_offsets: end_offsets,
        assigned,
        pending_revocation,
        target,
    })
}

/// The streams group kind as stored.
pub const KIND: GroupKind = crate::vocab::stored::STREAMS;

/// The stored form of a record the group wrote.
pub fn change(record: super::group::StreamsRecord) -> RecordChange {
    use super::group::StreamsRecord;
    match record {
        StreamsRecord::Group(g) => {
            RecordChange::Put(StoredRecord::group(KIND, encode_streams_group(&g)))
        }
        StreamsRecord::Member(m) => RecordChange::Put(StoredRecord::member(
            KIND,
            m.member_id.as_str(),
            encode_streams_member(&m),
        )),
        StreamsRecord::RemoveMember(id) => RecordChange::Delete {
            kind: KIND,
            key: id.as_str().to_owned(),
        },
    }
}

/// The group's record and its members' from its stored records of this kind (`None` without
/// the group's record: members left over from a group that changed kind).
///
/// # Errors
/// A record does not decode, or a member's record is stored under another member's key.
pub fn restore(
    records: &[StoredRecord],
) -> Result<Option<(StreamsGroupRecord, Vec<StreamsMember>)>, DecodeError> {
    crate::group::modern::restore(KIND, records, decode_streams_group, decode_streams_member)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A streams group with a full topology and a member holding tasks of every kind.
    fn streams_group() -> (
        crate::vocab::streams::StreamsGroupRecord,
        crate::vocab::streams::StreamsMember,
    ) {
        use crate::vocab::streams::{
            CopartitionGroup, Endpoint, StreamsMember, StreamsMemberState, Subtopology, TaskId,
            TaskSet, TopicInfo, Topology,
        };
        let record = crate::vocab::streams::StreamsGroupRecord {
            group_epoch: 7,
            assignment_epoch: 6,
            metadata_hash: 0xfeed,
            topology: Some(Topology {
                epoch: 2,
                subtopologies: vec![Subtopology {
                    id: "1".into(),
                    source_topics: vec!["a".into(), "b".into()],
                    repartition_sink_topics: vec!["r2".into()],
                    repartition_source_topics: vec![TopicInfo {
                        name: "r".into(),
                        partitions: 4,
                        replication_factor: 3,
                        configs: vec![("cleanup.policy".into(), "delete".into())],
                    }],
                    changelog_topics: vec![TopicInfo::named("c")],
                    copartition_groups: vec![CopartitionGroup {
                        source_topics: vec![0, 1],
                        repartition_source_topics: vec![0],
                    }],
                }],
            }),
        };
        let t = |s: &str, p| TaskId::new(s, p);
        let member = StreamsMember {
            member_epoch: 6,
            previous_member_epoch: 5,
            state: StreamsMemberState::UnrevokedTasks,
            instance_id: Some(crate::vocab::InstanceId::new("i")),
            rack_id: None,
            client_id: "c".into(),
            client_host: "/1.2.3.4".into(),
            rebalance_timeout_ms: 30_000,
            topology_epoch: 2,
            process_id: "p".into(),
            user_endpoint: Some(Endpoint {
                host: "h".into(),
                port: 8080,
            }),
            client_tags: vec![("zone".into(), "z1".into())],
            task_offsets: [(t("1", 0), -2), (t("1", 1), 40)].into(),
            task_end_offsets: [(t("1", 1), 50)].into(),
            assigned: TaskSet {
                active: [t("1", 0)].into(),
                standby: [t("1", 2)].into(),
                warmup: [t("1", 1)].into(),
            },
            pending_revocation: TaskSet {
                active: [t("1", 3)].into(),
                ..TaskSet::default()
            },
            target: TaskSet {
                active: [t("1", 0), t("1", 1)].into(),
                ..TaskSet::default()
            },
            ..StreamsMember::new(crate::vocab::MemberId::new("m"))
        };
        (record, member)
    }

    #[test]
    fn a_damaged_streams_value_is_an_error_not_a_panic() {
        let (record, member) = streams_group();
        let group_value = encode_streams_group(&record);
        for cut in 0..group_value.len() {
            assert!(decode_streams_group(&group_value[..cut]).is_err());
        }
        let member_value = encode_streams_member(&member);
        for cut in 0..member_value.len() {
            assert!(decode_streams_member(&member_value[..cut]).is_err());
        }
        assert_eq!(
            decode_streams_member(&encode_streams_member(&member)),
            Ok(member.clone())
        );
        let stored = [
            change(crate::group::streams::StreamsRecord::Member(Box::new(
                member.clone(),
            ))),
            change(crate::group::streams::StreamsRecord::Group(Box::new(
                record.clone(),
            ))),
        ]
        .map(|c| match c {
            RecordChange::Put(r) => r,
            other => unreachable!("{other:?}"),
        });
        assert_eq!(restore(&stored), Ok(Some((record, vec![member]))));
        assert_eq!(
            restore(&stored[..1]),
            Ok(None),
            "a member without its group"
        );
    }
}
