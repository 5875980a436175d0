//! The vocabulary every layer shares: group and member ids, generations, time, the group error
//! enum, the durable records, and the checked byte [`reader`] of koord's hand-written formats. It
//! imports nothing of koord's; `group/`, `assignor/`, `offsets/` and `storage/` depend on it
//! rather than on each other (tests/layers.rs checks it).

pub mod codec;
pub mod errors;
pub mod hash;
pub mod ids;
pub mod offsets_log;
pub mod reader;
pub mod records;
pub mod stored;
pub mod streams;
pub mod time;
pub mod txn;

pub use errors::{error_code, GroupError};
pub use hash::{IdHasher, IdMap};
pub use ids::{partition_of, Generation, GroupId, InstanceId, MemberId, Protocol};
pub use records::{
    ClassicMemberMetadata, ConsumerGroupRecord, ConsumerMember, ConsumerMemberState,
    ExpirationBase, GroupMetadataRecord, MemberRecord, OffsetAndMetadata, Partitions, TopicId,
    TopicPartition,
};
pub use time::Timestamp;
pub use txn::{PendingOffset, TxnRecord, TxnState};
