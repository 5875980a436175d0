//! The coordinator state S of the learner assignor (learner-spec.md 6.1): who owns each task,
//! who learns it and since when, and which members are leaving and since when. Authoritative:
//! rebuilt from members' echoes never, persisted with the group's assignment.
//!
//! Flat, because a plan writes a whole S at every rebalance: the tasks are the partitions of
//! [`State::topics`] in order, their owners one `u32` each in [`State::owners`] (the plan's own
//! owner vector, moved in, not copied), and the few learners a sorted list beside them.
//!
//! Stored as bytes inside the group record (opaque to the group core): a format version byte,
//! then a member table (S names members by index into it), the leavers, the topics with their
//! partition counts, every task's owner, and the learners; format 3 adds, after them, the tasks
//! whose owner is still cold for them (learner-spec.md 6.5 step 3a). Decoding checks every
//! length against the bytes left and every index against its table.
//!
//! Versions: a state without cold owners (always so with `learner.warmup.ms=0`, the default) is
//! written in format 2, byte for byte as before format 3 existed, so a koord that predates it
//! still reads it; format 3 is written only when some owner is cold. Format 1 (one entry per
//! task with an owner or a learner) is still read.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use crate::vocab::reader::{ReadError, Reader};
use crate::vocab::Timestamp;

/// A task slot without member.
pub const NO_MEMBER: u32 = u32::MAX;

const FORMAT: u8 = 2;
const FORMAT_ENTRIES: u8 = 1;
/// Format 2 followed by the cold owners.
const FORMAT_COLD: u8 = 3;
const MAX_PARTITIONS_V1: usize = 1 << 20;

/// A task's learner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Learner {
    /// Index into [`State::owners`].
    pub task: u32,
    /// Index into [`State::members`].
    pub member: u32,
    /// When the learner was planned (its warm-up starts then).
    pub planned: Timestamp,
}

/// A member that got a task cold (an orphan or a first assignment, restored from nothing; a
/// learner promoted before it was ready; a move of step 3a) and is still restoring it: step 3a
/// moves such a task without a learner. Kept only while `since + learner.warmup.ms` is in the
/// future.
///
/// `member` is the task's owner in S; or, while S names no owner because another member still
/// holds the task (cooperative revoke-then-grant), the member it goes to once given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cold {
    /// Index into [`State::owners`].
    pub task: u32,
    /// Index into [`State::members`].
    pub member: u32,
    /// When it was given to the member.
    pub since: Timestamp,
}

/// A table of names (S's member ids, S's topics) in one buffer. A plan writes S's tables for
/// every member and topic at every rebalance; copying the names' bytes into one string costs
/// less than an `Arc` count (and later its release) on each of 10,000 names scattered over the
/// heap.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Names {
    text: String,
    /// Name `i` is `text[ends[i - 1]..ends[i]]`.
    ends: Vec<u32>,
}

impl Names {
    pub fn with_capacity(names: usize) -> Names {
        Names {
            text: String::with_capacity(names * 16),
            ends: Vec::with_capacity(names),
        }
    }

    /// `same`'s names (copied whole, rather than name by name from 10,000 places on the heap),
    /// then the `name`s of the `items` past as many; sized once.
    pub fn after<T>(same: Option<&Names>, items: &[T], name: impl Fn(&T) -> &str) -> Names {
        let rest = &items[same.map_or(0, Names::len).min(items.len())..];
        let bytes: usize = rest.iter().map(|item| name(item).len()).sum();
        let mut table = Names {
            text: String::with_capacity(same.map_or(0, |s| s.text.len()) + bytes),
            ends: Vec::with_capacity(items.len()),
        };
        if let Some(same) = same {
            table.text.push_str(&same.text);
            table.ends.extend_from_slice(&same.ends);
        }
        for item in rest {
            table.push(name(item));
        }
        table
    }

    pub fn push(&mut self, id: &str) {
        self.text.push_str(id);
        self.ends.push(self.text.len() as u32);
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)? as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        Some(&self.text[start..end])
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.get(i).unwrap_or_default())
    }
}

impl<'a> FromIterator<&'a str> for Names {
    fn from_iter<I: IntoIterator<Item = &'a str>>(names: I) -> Names {
        let names = names.into_iter();
        let mut table = Names::with_capacity(names.size_hint().0);
        for name in names {
            table.push(name);
        }
        table
    }
}

impl fmt::Debug for Names {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// S.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    pub members: Names,
    /// Leaving members (index into `members`) and when they first asked.
    pub leaving: Vec<(u32, Timestamp)>,
    /// S's topics; topic `i`'s tasks are its partitions `0..partitions[i]`.
    pub topics: Names,
    pub partitions: Vec<u32>,
    /// Each task's owner (index into `members`, or [`NO_MEMBER`]): the partitions of `topics`
    /// in order.
    pub owners: Vec<u32>,
    /// Sorted by task, at most one per task.
    pub learners: Vec<Learner>,
    /// Tasks whose owner is still cold for them, sorted by task, at most one per task.
    pub cold: Vec<Cold>,
}

impl State {
    /// Number of learners.
    pub fn learners(&self) -> usize {
        self.learners.len()
    }

    /// Every task as (topic, partition, owner), in task order.
    pub fn tasks(&self) -> impl Iterator<Item = (&str, u32, u32)> + '_ {
        let topics = self.topics.iter().zip(&self.partitions);
        let per_task =
            topics.flat_map(|(name, &partitions)| (0..partitions).map(move |p| (name, p)));
        per_task
            .zip(&self.owners)
            .map(|((name, p), &o)| (name, p, o))
    }

    /// The topic and partition of a task index.
    pub fn task(&self, task: u32) -> Option<(&str, u32)> {
        let mut first = 0u32;
        for (name, &partitions) in self.topics.iter().zip(&self.partitions) {
            if task < first + partitions {
                return Some((name, task - first));
            }
            first += partitions;
        }
        None
    }

    pub fn encode(&self) -> Bytes {
        let mut w = BytesMut::with_capacity(
            32 + 4 * self.owners.len()
                + 16 * self.learners.len()
                + 16 * self.cold.len()
                + 2 * self.members.len()
                + self.members.text.len()
                + 6 * self.topics.len()
                + self.topics.text.len(),
        );
        w.put_u8(if self.cold.is_empty() {
            FORMAT
        } else {
            FORMAT_COLD
        });
        w.put_u32(self.members.len() as u32);
        for m in self.members.iter() {
            put_str(&mut w, m);
        }
        w.put_u32(self.leaving.len() as u32);
        for &(m, since) in &self.leaving {
            w.put_u32(m);
            w.put_u64(since.as_millis());
        }
        w.put_u32(self.topics.len() as u32);
        for (name, &partitions) in self.topics.iter().zip(&self.partitions) {
            put_str(&mut w, name);
            w.put_u32(partitions);
        }
        for &o in &self.owners {
            w.put_u32(o);
        }
        w.put_u32(self.learners.len() as u32);
        for l in &self.learners {
            w.put_u32(l.task);
            w.put_u32(l.member);
            w.put_u64(l.planned.as_millis());
        }
        if !self.cold.is_empty() {
            w.put_u32(self.cold.len() as u32);
            for c in &self.cold {
                w.put_u32(c.task);
                w.put_u32(c.member);
                w.put_u64(c.since.as_millis());
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
        let mut r = Reader::new(bytes);
        let format = r.u8("format").map_err(why)?;
        if ![FORMAT, FORMAT_ENTRIES, FORMAT_COLD].contains(&format) {
            return Err(format!("unknown learner state format {format}"));
        }
        let table = r.count_u32("members", 2).map_err(why)?;
        let mut members = Names::with_capacity(table);
        for _ in 0..table {
            members.push(r.str_u16("string").map_err(why)?);
        }
        let member = |i: u32| -> Result<u32, String> {
            if i == NO_MEMBER || (i as usize) < table {
                Ok(i)
            } else {
                Err(format!("member index {i} outside a table of {table}"))
            }
        };
        let leavers = r.count_u32("leavers", 12).map_err(why)?;
        let mut leaving = Vec::with_capacity(leavers);
        for _ in 0..leavers {
            let m = member(r.u32("leavers").map_err(why)?)?;
            if m == NO_MEMBER {
                return Err("a leaver without member".to_owned());
            }
            leaving.push((m, Timestamp(r.u64("leavers").map_err(why)?)));
        }
        let mut state = if format != FORMAT_ENTRIES {
            let topics_len = r.count_u32("topics", 6).map_err(why)?;
            let mut topics = Names::with_capacity(topics_len);
            let mut partitions = Vec::with_capacity(topics_len);
            let mut tasks = 0u64;
            for _ in 0..topics_len {
                topics.push(r.str_u16("string").map_err(why)?);
                let count = r.u32("topic").map_err(why)?;
                tasks += u64::from(count);
                partitions.push(count);
            }
            // Task indices are u32s; past that the owners cannot be there either.
            let tasks = u32::try_from(tasks).map_err(|_| "truncated owners".to_owned())?;
            let owners_len = r.fits("owners", tasks as usize, 4).map_err(why)?;
            let mut owners = Vec::with_capacity(owners_len);
            for _ in 0..owners_len {
                owners.push(member(r.u32("owners").map_err(why)?)?);
            }
            let learners_len = r.count_u32("learners", 16).map_err(why)?;
            let mut learners: Vec<Learner> = Vec::with_capacity(learners_len);
            for _ in 0..learners_len {
                let task = r.u32("learners").map_err(why)?;
                if task >= tasks || learners.last().is_some_and(|l| l.task >= task) {
                    return Err(format!("learner of task {task} out of order or range"));
                }
                let m = member(r.u32("learners").map_err(why)?)?;
                if m == NO_MEMBER {
                    return Err("a learner without member".to_owned());
                }
                learners.push(Learner {
                    task,
                    member: m,
                    planned: Timestamp(r.u64("learners").map_err(why)?),
                });
            }
            let mut cold: Vec<Cold> = Vec::new();
            if format == FORMAT_COLD {
                let cold_len = r.count_u32("cold owners", 16).map_err(why)?;
                cold.reserve_exact(cold_len);
                for _ in 0..cold_len {
                    let task = r.u32("cold owners").map_err(why)?;
                    if task >= tasks || cold.last().is_some_and(|c| c.task >= task) {
                        return Err(format!("cold owner of task {task} out of order or range"));
                    }
                    let m = member(r.u32("cold owners").map_err(why)?)?;
                    if m == NO_MEMBER {
                        return Err("a cold owner without member".to_owned());
                    }
                    let since = Timestamp(r.u64("cold owners").map_err(why)?);
                    cold.push(Cold {
                        task,
                        member: m,
                        since,
                    });
                }
            }
            State {
                members: Names::default(),
                leaving: Vec::new(),
                topics,
                partitions,
                owners,
                learners,
                cold,
            }
        } else {
            decode_entries(&mut r, &member)?
        };
        if !r.is_empty() {
            return Err(format!("{} bytes after the learner state", r.remaining()));
        }
        state.members = members;
        state.leaving = leaving;
        Ok(state)
    }
}

/// S's messages, as before the shared reader: "truncated members", "string is not UTF-8".
fn why(e: ReadError) -> String {
    match e {
        ReadError::Short { what, .. } => format!("truncated {what}"),
        other => other.to_string(),
    }
}

/// Format 1's topics: per topic, entries (partition, owner, learner, planned) of the tasks
/// that had an owner or a learner. A topic's partition count is its highest entry plus one.
fn decode_entries(
    r: &mut Reader,
    member: &dyn Fn(u32) -> Result<u32, String>,
) -> Result<State, String> {
    let topics_len = r.count_u32("topics", 6).map_err(why)?;
    let mut state = State::default();
    for _ in 0..topics_len {
        let name = r.str_u16("string").map_err(why)?;
        let entries = r.count_u32("tasks", 20).map_err(why)?;
        let first = state.owners.len();
        for _ in 0..entries {
            let partition = r.u32("tasks").map_err(why)? as usize;
            let owner = member(r.u32("tasks").map_err(why)?)?;
            let learner = member(r.u32("tasks").map_err(why)?)?;
            let planned = Timestamp(r.u64("tasks").map_err(why)?);
            // Entries are in partition order; the bound keeps a damaged partition number from
            // allocating gigabytes (Kafka topics stay far below it).
            if partition >= MAX_PARTITIONS_V1 || first + partition < state.owners.len() {
                return Err(format!("task entry {partition} out of order or range"));
            }
            state.owners.resize(first + partition + 1, NO_MEMBER);
            state.owners[first + partition] = owner;
            if learner != NO_MEMBER {
                state.learners.push(Learner {
                    task: (first + partition) as u32,
                    member: learner,
                    planned,
                });
            }
        }
        state.topics.push(name);
        state.partitions.push((state.owners.len() - first) as u32);
    }
    Ok(state)
}

fn put_str(w: &mut BytesMut, s: &str) {
    w.put_u16(s.len().min(u16::MAX as usize) as u16);
    w.put_slice(&s.as_bytes()[..s.len().min(u16::MAX as usize)]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table after a prefix is the prefix's names, then the rest; without one, all names.
    #[test]
    fn a_table_after_the_last_ones_names_keeps_them_and_adds_the_rest() {
        let ids = ["S1", "S4", "a-much-longer-member-id-than-sixteen-bytes", ""];
        let same: Names = ids[..2].iter().copied().collect();
        let table = Names::after(Some(&same), &ids, |id| id);
        assert_eq!(table.iter().collect::<Vec<_>>(), ids);
        assert_eq!(table, ids.iter().copied().collect::<Names>());
        assert_eq!(Names::after(None, &ids, |id| id), table);
        assert_eq!(Names::after(Some(&table), &ids, |id| id), table);
        assert!(Names::after(None, &[] as &[&str], |id| id).is_empty());
    }

    fn sample() -> State {
        State {
            members: ["S1", "S4"].into_iter().collect(),
            leaving: vec![(0, Timestamp(5))],
            topics: ["orders", "users"].into_iter().collect(),
            partitions: vec![3, 1],
            owners: vec![0, 0, NO_MEMBER, 1],
            learners: vec![Learner {
                task: 0,
                member: 1,
                planned: Timestamp(1_700_000_000_000),
            }],
            cold: Vec::new(),
        }
    }

    /// [`sample`] with its owners cold for two tasks (format 3).
    fn sample_cold() -> State {
        State {
            cold: vec![
                Cold {
                    task: 1,
                    member: 0,
                    since: Timestamp(1_700_000_000_500),
                },
                Cold {
                    task: 2,
                    member: 1,
                    since: Timestamp(1_700_000_001_000),
                },
            ],
            ..sample()
        }
    }

    /// Cold owners add format 3; without any, the bytes are format 2's exactly (a koord that
    /// predates cold owners reads them), and format 2's bytes read as no cold owner.
    #[test]
    fn cold_owners_round_trip_in_format_3_and_format_2_is_unchanged() {
        let s = sample_cold();
        let bytes = s.encode();
        assert_eq!(bytes[0], FORMAT_COLD);
        assert_eq!(State::decode(&bytes).unwrap(), s);
        let plain = sample().encode();
        assert_eq!(plain[0], FORMAT);
        assert_eq!(
            &bytes[1..plain.len()],
            &plain[1..],
            "format 2, then the cold owners"
        );
        assert_eq!(bytes.len(), plain.len() + 4 + 2 * 16);
        // Format 2 as written before format 3: this exact layout.
        let mut want = BytesMut::new();
        want.put_u8(2);
        want.put_u32(2);
        put_str(&mut want, "S1");
        put_str(&mut want, "S4");
        want.put_u32(1);
        want.put_u32(0);
        want.put_u64(5);
        want.put_u32(2);
        put_str(&mut want, "orders");
        want.put_u32(3);
        put_str(&mut want, "users");
        want.put_u32(1);
        for o in [0, 0, NO_MEMBER, 1] {
            want.put_u32(o);
        }
        want.put_u32(1);
        want.put_u32(0);
        want.put_u32(1);
        want.put_u64(1_700_000_000_000);
        assert_eq!(plain, want.freeze());
        // A format 3 record with no cold owner reads too (and is written back as format 2).
        let mut empty = plain.to_vec();
        empty[0] = FORMAT_COLD;
        empty.extend(0u32.to_be_bytes());
        assert_eq!(State::decode(&empty).unwrap(), sample());
    }

    #[test]
    fn cold_owners_out_of_order_or_range_are_errors() {
        let mut bad = sample_cold();
        bad.cold[1].task = 4;
        assert_eq!(
            State::decode(&bad.encode()).unwrap_err(),
            "cold owner of task 4 out of order or range"
        );
        let mut bad = sample_cold();
        bad.cold[1].task = 1;
        assert!(State::decode(&bad.encode()).is_err(), "twice");
        let mut bad = sample_cold();
        bad.cold[1].member = 2;
        assert_eq!(
            State::decode(&bad.encode()).unwrap_err(),
            "member index 2 outside a table of 2"
        );
        let bytes = sample_cold().encode();
        assert_eq!(
            State::decode(&bytes[..bytes.len() - 1]).unwrap_err(),
            "truncated cold owners"
        );
    }

    #[test]
    fn round_trips() {
        let s = sample();
        assert_eq!(State::decode(&s.encode()).unwrap(), s);
        assert_eq!(State::decode(&[]).unwrap(), State::default());
        assert_eq!(s.learners(), 1);
        assert_eq!(s.task(2), Some(("orders", 2)));
        assert_eq!(s.task(3), Some(("users", 0)));
        assert_eq!(s.task(4), None);
        let tasks: Vec<_> = s.tasks().collect();
        assert_eq!(
            tasks,
            [
                ("orders", 0, 0),
                ("orders", 1, 0),
                ("orders", 2, NO_MEMBER),
                ("users", 0, 1)
            ]
        );
    }

    #[test]
    fn every_truncation_and_bad_index_is_an_error() {
        let bytes = sample().encode();
        for cut in 1..bytes.len() {
            assert!(State::decode(&bytes[..cut]).is_err(), "{cut}");
        }
        let mut bad = sample();
        bad.learners[0].member = 7;
        assert!(State::decode(&bad.encode()).is_err());
        let mut bad = sample();
        bad.owners[1] = 2;
        assert!(State::decode(&bad.encode()).is_err());
        let mut bad = sample();
        bad.learners[0].task = 4;
        assert!(State::decode(&bad.encode()).is_err());
        let mut bad = sample();
        bad.learners.push(bad.learners[0]);
        assert!(
            State::decode(&bad.encode()).is_err(),
            "two learners of a task"
        );
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert!(State::decode(&longer).is_err());
        assert!(State::decode(&[9]).is_err());
        // A partition count that claims more tasks than there are bytes.
        let mut huge = bytes.to_vec();
        let at = huge.len() - 4 * 4 - 4 - 16 - 4;
        huge[at..at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(State::decode(&huge).is_err());
    }

    /// Format 1 as session 3 wrote it: one 20-byte entry per task with an owner or a learner.
    fn format_1() -> BytesMut {
        let mut w = BytesMut::new();
        w.put_u8(1);
        w.put_u32(2);
        put_str(&mut w, "S1");
        put_str(&mut w, "S4");
        w.put_u32(1);
        w.put_u32(0);
        w.put_u64(5);
        w.put_u32(2);
        put_str(&mut w, "orders");
        w.put_u32(2);
        for (p, o, l, at) in [
            (0u32, 0u32, 1u32, 1_700_000_000_000u64),
            (1, 0, NO_MEMBER, 0),
        ] {
            w.put_u32(p);
            w.put_u32(o);
            w.put_u32(l);
            w.put_u64(at);
        }
        put_str(&mut w, "users");
        w.put_u32(1);
        for v in [0u32, 1, NO_MEMBER] {
            w.put_u32(v);
        }
        w.put_u64(0);
        w
    }

    #[test]
    fn format_1_is_still_read() {
        let w = format_1();
        let s = State::decode(&w).unwrap();
        let mut want = sample();
        want.partitions[0] = 2;
        want.owners = vec![0, 0, 1];
        assert_eq!(s, want);
        // An entry out of order is an error.
        let mut bad = w.to_vec();
        let at = 1 + 4 + 4 + 4 + 4 + 12 + 4 + 8 + 4;
        bad[at..at + 4].copy_from_slice(&5u32.to_be_bytes());
        assert!(State::decode(&bad).is_err());
    }

    /// The reader's errors keep S's messages (a warning names them when S is unreadable).
    #[test]
    fn errors_say_what_is_truncated_or_bad() {
        let bytes = sample().encode();
        let at = |cut: usize| State::decode(&bytes[..cut]).unwrap_err();
        assert_eq!(at(3), "truncated members");
        assert_eq!(at(7), "truncated members");
        assert_eq!(at(10), "truncated string");
        assert_eq!(at(20), "truncated leavers");
        assert_eq!(at(50), "truncated string");
        assert_eq!(at(54), "truncated topic");
        assert_eq!(at(60), "truncated owners");
        assert_eq!(at(74), "truncated learners");
        let mut bad = bytes.to_vec();
        bad[7] = 0xff;
        assert_eq!(State::decode(&bad).unwrap_err(), "string is not UTF-8");
        let mut bad = sample();
        bad.owners[1] = 2;
        assert_eq!(
            State::decode(&bad.encode()).unwrap_err(),
            "member index 2 outside a table of 2"
        );
        let mut longer = bytes.to_vec();
        longer.extend([0, 0]);
        assert_eq!(
            State::decode(&longer).unwrap_err(),
            "2 bytes after the learner state"
        );
        assert_eq!(
            State::decode(&[9]).unwrap_err(),
            "unknown learner state format 9"
        );
        let w = format_1();
        assert_eq!(State::decode(&w[..30]).unwrap_err(), "truncated topics");
        assert_eq!(State::decode(&w[..47]).unwrap_err(), "truncated tasks");
    }

    /// What decodes from damaged bytes is a consistent S: its own encoding reads back as it.
    fn consistent(s: &State) {
        let members = s.members.len() as u32;
        let tasks: u64 = s.partitions.iter().map(|&p| u64::from(p)).sum();
        assert_eq!(s.topics.len(), s.partitions.len());
        assert_eq!(s.owners.len() as u64, tasks);
        assert!(s.owners.iter().all(|&o| o == NO_MEMBER || o < members));
        assert!(s.leaving.iter().all(|&(m, _)| m < members));
        assert!(s.learners.windows(2).all(|w| w[0].task < w[1].task));
        assert!(s
            .learners
            .iter()
            .all(|l| l.member < members && u64::from(l.task) < tasks));
        assert!(s.cold.windows(2).all(|w| w[0].task < w[1].task));
        assert!(s
            .cold
            .iter()
            .all(|c| c.member < members && u64::from(c.task) < tasks));
        assert_eq!(State::decode(&s.encode()).as_ref(), Ok(s));
    }

    /// Every format: every cut is an error, and a byte damaged anywhere (to 0, 0xff, 0x80 or
    /// one bit off), whole or cut there, is an error or a consistent S, never a panic.
    #[test]
    fn truncated_or_damaged_state_of_either_format_is_an_error_not_a_panic() {
        for bytes in [
            sample().encode().to_vec(),
            sample_cold().encode().to_vec(),
            format_1().to_vec(),
        ] {
            for cut in 1..bytes.len() {
                assert!(State::decode(&bytes[..cut]).is_err(), "{cut}");
            }
            for at in 0..bytes.len() {
                for b in [0, 0xff, 0x80, bytes[at] ^ 1] {
                    let mut bad = bytes.clone();
                    bad[at] = b;
                    if let Ok(s) = State::decode(&bad) {
                        consistent(&s);
                    }
                    // A damaged count may make a prefix whole: only no panic is asked of it.
                    if let Ok(s) = State::decode(&bad[..at]) {
                        consistent(&s);
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// Any bytes after a known format byte: an error or a consistent S, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(
            format in proptest::sample::select(vec![FORMAT, FORMAT_ENTRIES, FORMAT_COLD]),
            rest in proptest::collection::vec(proptest::num::u8::ANY, 0..96),
        ) {
            let mut bytes = vec![format];
            bytes.extend(rest);
            if let Ok(s) = State::decode(&bytes) {
                consistent(&s);
            }
        }
    }
}
