//! The coordinator state S of the learner assignor (learner-spec.md 6.1): who owns each task,
//! who learns it and since when, and which members are leaving and since when. Authoritative:
//! rebuilt from members' echoes never, persisted with the group's assignment.
//!
//! Stored as bytes inside the group record (opaque to the group core): a format version byte,
//! then a member table (S names members by index into it), the leavers, and per topic the
//! tasks that have an owner or a learner. Decoding checks every length against the bytes left
//! and every member index against the table.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::group::{MemberId, Timestamp};

/// A task slot without member.
pub const NO_MEMBER: u32 = u32::MAX;

const FORMAT: u8 = 1;

/// One task's entry of S.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskEntry {
    pub partition: u32,
    /// Index into [`State::members`], or [`NO_MEMBER`].
    pub owner: u32,
    /// Index into [`State::members`], or [`NO_MEMBER`].
    pub learner: u32,
    /// When the learner was planned (its warm-up starts then).
    pub planned: Timestamp,
}

/// A topic's entries of S, by partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateTopic {
    pub name: String,
    pub tasks: Vec<TaskEntry>,
}

/// S.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    pub members: Vec<MemberId>,
    /// Leaving members (index into `members`) and when they first asked.
    pub leaving: Vec<(u32, Timestamp)>,
    pub topics: Vec<StateTopic>,
}

impl State {
    /// Number of learners.
    pub fn learners(&self) -> usize {
        self.topics
            .iter()
            .flat_map(|t| &t.tasks)
            .filter(|e| e.learner != NO_MEMBER)
            .count()
    }

    /// The member id at `index`, if any.
    pub fn member(&self, index: u32) -> Option<&MemberId> {
        self.members.get(index as usize)
    }

    pub fn encode(&self) -> Bytes {
        let mut w = BytesMut::new();
        w.put_u8(FORMAT);
        w.put_u32(self.members.len() as u32);
        for m in &self.members {
            put_str(&mut w, m.as_str());
        }
        w.put_u32(self.leaving.len() as u32);
        for &(m, since) in &self.leaving {
            w.put_u32(m);
            w.put_u64(since.as_millis());
        }
        w.put_u32(self.topics.len() as u32);
        for t in &self.topics {
            put_str(&mut w, &t.name);
            w.put_u32(t.tasks.len() as u32);
            for e in &t.tasks {
                w.put_u32(e.partition);
                w.put_u32(e.owner);
                w.put_u32(e.learner);
                w.put_u64(e.planned.as_millis());
            }
        }
        w.freeze()
    }

    /// Decodes stored bytes; empty bytes are the empty state.
    ///
    /// # Errors
    /// A description of what is wrong with the bytes.
    pub fn decode(bytes: &[u8]) -> Result<State, String> {
        if bytes.is_empty() {
            return Ok(State::default());
        }
        let mut r = bytes;
        let format = take(&mut r, 1, "format")?.get_u8();
        if format != FORMAT {
            return Err(format!("unknown learner state format {format}"));
        }
        let table = count(&mut r, 2, "members")?;
        let mut members = Vec::with_capacity(table);
        for _ in 0..table {
            members.push(MemberId::new(get_str(&mut r)?));
        }
        let member = |i: u32| -> Result<u32, String> {
            if i == NO_MEMBER || (i as usize) < table {
                Ok(i)
            } else {
                Err(format!("member index {i} outside a table of {table}"))
            }
        };
        let leavers = count(&mut r, 12, "leavers")?;
        let mut leaving = Vec::with_capacity(leavers);
        for _ in 0..leavers {
            let m = member(r.get_u32())?;
            leaving.push((m, Timestamp(r.get_u64())));
        }
        let topics_len = count(&mut r, 6, "topics")?;
        let mut topics = Vec::with_capacity(topics_len);
        for _ in 0..topics_len {
            let name = get_str(&mut r)?;
            let tasks_len = count(&mut r, 20, "tasks")?;
            let mut tasks = Vec::with_capacity(tasks_len);
            for _ in 0..tasks_len {
                let partition = r.get_u32();
                let owner = member(r.get_u32())?;
                let learner = member(r.get_u32())?;
                let planned = Timestamp(r.get_u64());
                tasks.push(TaskEntry {
                    partition,
                    owner,
                    learner,
                    planned,
                });
            }
            topics.push(StateTopic { name, tasks });
        }
        if !r.is_empty() {
            return Err(format!("{} bytes after the learner state", r.len()));
        }
        Ok(State {
            members,
            leaving,
            topics,
        })
    }
}

fn put_str(w: &mut BytesMut, s: &str) {
    w.put_u16(s.len().min(u16::MAX as usize) as u16);
    w.put_slice(&s.as_bytes()[..s.len().min(u16::MAX as usize)]);
}

fn take<'a>(r: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8], String> {
    if r.len() < n {
        return Err(format!("truncated {what}"));
    }
    let (head, rest) = r.split_at(n);
    *r = rest;
    Ok(head)
}

/// A count whose items take at least `min_item` bytes each, checked against the bytes left.
fn count(r: &mut &[u8], min_item: usize, what: &str) -> Result<usize, String> {
    let n = take(r, 4, what)?.get_u32() as usize;
    if n.saturating_mul(min_item) > r.len() {
        return Err(format!("truncated {what}"));
    }
    Ok(n)
}

fn get_str(r: &mut &[u8]) -> Result<String, String> {
    let len = take(r, 2, "string")?.get_u16() as usize;
    let s = take(r, len, "string")?;
    String::from_utf8(s.to_vec()).map_err(|_| "string is not UTF-8".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> State {
        State {
            members: vec![MemberId::new("S1"), MemberId::new("S4")],
            leaving: vec![(0, Timestamp(5))],
            topics: vec![StateTopic {
                name: "orders".into(),
                tasks: vec![
                    TaskEntry {
                        partition: 0,
                        owner: 0,
                        learner: 1,
                        planned: Timestamp(1_700_000_000_000),
                    },
                    TaskEntry {
                        partition: 1,
                        owner: 0,
                        learner: NO_MEMBER,
                        planned: Timestamp(0),
                    },
                ],
            }],
        }
    }

    #[test]
    fn round_trips() {
        let s = sample();
        assert_eq!(State::decode(&s.encode()).unwrap(), s);
        assert_eq!(State::decode(&[]).unwrap(), State::default());
        assert_eq!(s.learners(), 1);
    }

    #[test]
    fn every_truncation_and_bad_index_is_an_error() {
        let bytes = sample().encode();
        for cut in 1..bytes.len() {
            assert!(State::decode(&bytes[..cut]).is_err(), "{cut}");
        }
        let mut bad = sample();
        bad.topics[0].tasks[0].learner = 7;
        assert!(State::decode(&bad.encode()).is_err());
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert!(State::decode(&longer).is_err());
        assert!(State::decode(&[9]).is_err());
    }
}
