//! The hasher of maps keyed by ids that clients choose: group, member and instance ids, and the
//! timers named after members.
//!
//! A heartbeat finds its group and its member by id in several maps (the directory, its shard's
//! index, the group's members and timers). With std's SipHash-1-3 those hashes and their
//! compares were about a fifth of a heartbeat's CPU (BENCHMARKS.md, issue 25). foldhash is the
//! hasher hashbrown itself defaults to, several times faster on short strings. Because a client
//! chooses these ids, the hash must not be predictable: every map gets its own seed, and the
//! process-wide secret comes from std's `RandomState` (the OS random number generator), not
//! from foldhash's own fallback (addresses and the clock). Hash values never leave the process.

use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;

use foldhash::fast::{FoldHasher, SeedableRandomState};
use foldhash::SharedSeed;

/// A [`BuildHasher`] for id-keyed maps: foldhash with a per-map seed and a per-process secret,
/// both drawn from the OS random number generator. Iteration order is as arbitrary as with
/// std's `RandomState`.
#[derive(Debug, Clone)]
pub struct IdHasher(SeedableRandomState);

/// The per-process secret every [`IdHasher`] shares.
fn secret() -> &'static SharedSeed {
    static SECRET: OnceLock<SharedSeed> = OnceLock::new();
    SECRET.get_or_init(|| SharedSeed::from_u64(RandomState::new().hash_one(0x6b6f6f7264u64)))
}

impl Default for IdHasher {
    fn default() -> Self {
        // std's RandomState: OS-random keys, different for every instance.
        let per_map = RandomState::new().hash_one(0x6d6170u64);
        IdHasher(SeedableRandomState::with_seed(per_map, secret()))
    }
}

impl BuildHasher for IdHasher {
    type Hasher = FoldHasher<'static>;

    #[inline]
    fn build_hasher(&self) -> FoldHasher<'static> {
        self.0.build_hasher()
    }
}

/// A `HashMap` keyed by client-chosen ids.
pub type IdMap<K, V> = std::collections::HashMap<K, V, IdHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_are_seeded_apart_and_consistent_within() {
        let (a, b) = (IdHasher::default(), IdHasher::default());
        let id = "consumer-1-7d0a3c4e-5f61-4b8e-9c2d-0e1f2a3b4c5d";
        assert_eq!(
            a.hash_one(id),
            a.hash_one(id),
            "one map hashes an id one way"
        );
        assert_ne!(a.hash_one(id), b.hash_one(id), "two maps are seeded apart");
        let mut m: IdMap<String, u32> = IdMap::default();
        m.insert(id.to_string(), 1);
        assert_eq!(m.get(id), Some(&1));
    }
}
