//! A streams-group member, its task sets and the group's stored record: plain values in
//! [`crate::vocab::streams`], shared with the store.

pub use crate::vocab::streams::{
    by_subtopology, Endpoint, StreamsGroupRecord, StreamsMember, StreamsMemberState, TaskSet,
};
