//! Which node owns which shard: the assignment the leader of the nodes' upstream group
//! computes (PURE). Balanced (every node within one shard of every other), sticky (a node keeps
//! what it owns as long as balance allows) and cooperative: a shard a node still owns is never
//! given to another node in the same round; it is taken from its owner first (left unassigned),
//! and the owner, seeing it gone, rejoins, so the next round hands it on. So one shard never has
//! two owners, even for a moment, while shards move.

use std::collections::{BTreeMap, BTreeSet};

/// One member of the nodes' group as the leader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its member id in the upstream group (unique; the order that breaks ties).
    pub member: String,
    /// The shards it says it owns (from its join metadata).
    pub owned: Vec<i32>,
}

/// The round's outcome: each member's shards, and whether some shard was taken from its owner
/// without a new owner yet (another round follows once the owner has let it go).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    pub shards: BTreeMap<String, Vec<i32>>,
    pub revoking: Vec<i32>,
}

/// Assigns shards `0..shards` over `members`.
pub fn assign(shards: i32, members: &[Candidate]) -> Assignment {
    let mut out = Assignment::default();
    if members.is_empty() || shards <= 0 {
        return out;
    }
    let mut order: Vec<&Candidate> = members.iter().collect();
    order.sort_by(|a, b| a.member.cmp(&b.member));
    // A shard claimed by two members (one of them is behind) counts for the first only.
    let mut claimed: BTreeMap<i32, usize> = BTreeMap::new();
    for (i, c) in order.iter().enumerate() {
        for &s in &c.owned {
            if (0..shards).contains(&s) {
                claimed.entry(s).or_insert(i);
            }
        }
    }
    let mut owned: Vec<Vec<i32>> = vec![Vec::new(); order.len()];
    for (&s, &i) in &claimed {
        owned[i].push(s);
    }
    // Quotas: `base` each, one more for `extra` of them, those that own the most first (they
    // keep more without a move).
    let n = order.len() as i32;
    let (base, extra) = (shards / n, shards % n);
    let mut by_owned: Vec<usize> = (0..order.len()).collect();
    by_owned.sort_by_key(|&i| std::cmp::Reverse(owned[i].len()));
    let mut quota = vec![base as usize; order.len()];
    for &i in by_owned.iter().take(extra as usize) {
        quota[i] += 1;
    }
    let mut given: Vec<Vec<i32>> = vec![Vec::new(); order.len()];
    let mut revoking = BTreeSet::new();
    for (i, mine) in owned.iter().enumerate() {
        for (k, &s) in mine.iter().enumerate() {
            if k < quota[i] {
                given[i].push(s);
            } else {
                revoking.insert(s);
            }
        }
    }
    // Shards nobody claims go to whoever is furthest under quota.
    let free: Vec<i32> = (0..shards).filter(|s| !claimed.contains_key(s)).collect();
    for s in free {
        let Some(i) = (0..order.len())
            .filter(|&i| given[i].len() < quota[i])
            .min_by_key(|&i| (given[i].len(), i))
        else {
            break;
        };
        given[i].push(s);
    }
    for (i, c) in order.iter().enumerate() {
        given[i].sort_unstable();
        out.shards
            .insert(c.member.clone(), std::mem::take(&mut given[i]));
    }
    out.revoking = revoking.into_iter().collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn c(member: &str, owned: &[i32]) -> Candidate {
        Candidate {
            member: member.into(),
            owned: owned.to_vec(),
        }
    }

    #[test]
    fn a_first_node_gets_every_shard() {
        let a = assign(4, &[c("a", &[])]);
        assert_eq!(a.shards["a"], vec![0, 1, 2, 3]);
        assert!(a.revoking.is_empty());
    }

    #[test]
    fn a_joining_node_gets_shards_only_after_their_owner_let_them_go() {
        let first = assign(6, &[c("a", &[0, 1, 2, 3, 4, 5]), c("b", &[])]);
        assert_eq!(first.shards["a"], vec![0, 1, 2]);
        assert_eq!(first.shards["b"], Vec::<i32>::new(), "a still owns 3-5");
        assert_eq!(first.revoking, vec![3, 4, 5]);
        let second = assign(6, &[c("a", &[0, 1, 2]), c("b", &[])]);
        assert_eq!(second.shards["a"], vec![0, 1, 2]);
        assert_eq!(second.shards["b"], vec![3, 4, 5]);
        assert!(second.revoking.is_empty());
    }

    #[test]
    fn a_dead_node_s_shards_go_to_the_others_at_once() {
        let a = assign(6, &[c("a", &[0, 1]), c("c", &[4, 5])]);
        assert_eq!(a.shards["a"], vec![0, 1, 2]);
        assert_eq!(a.shards["c"], vec![3, 4, 5]);
        assert!(a.revoking.is_empty());
    }

    #[test]
    fn out_of_range_and_doubly_claimed_shards_are_ignored() {
        let a = assign(2, &[c("a", &[0, 7, -1]), c("b", &[0])]);
        assert_eq!(a.shards["a"], vec![0]);
        assert_eq!(a.shards["b"], vec![1]);
    }

    proptest! {
        /// Whatever the members claim: no shard goes to two members, none goes to a member
        /// while another still claims it, every shard is assigned or being revoked, and once
        /// nothing is being revoked the members are within one shard of each other.
        #[test]
        fn never_two_owners_and_balanced_once_settled(
            shards in 1i32..60,
            claims in proptest::collection::vec(proptest::collection::vec(0i32..70, 0..30), 1..6),
        ) {
            let members: Vec<Candidate> = claims
                .iter()
                .enumerate()
                .map(|(i, owned)| c(&format!("m{i}"), owned))
                .collect();
            let mut members = members;
            let mut round = assign(shards, &members);
            for _ in 0..3 {
                let mut seen = BTreeSet::new();
                for (m, ss) in &round.shards {
                    for s in ss {
                        prop_assert!(seen.insert(*s), "shard {} twice", s);
                        let first_claimant = members_in_order(&members)
                            .find(|c| c.owned.contains(s))
                            .map(|c| c.member.clone());
                        if let Some(owner) = first_claimant {
                            prop_assert_eq!(&owner, m, "shard {} given away while claimed", s);
                        }
                    }
                }
                for s in 0..shards {
                    prop_assert!(seen.contains(&s) || round.revoking.contains(&s));
                }
                if round.revoking.is_empty() {
                    let sizes: Vec<usize> = round.shards.values().map(Vec::len).collect();
                    let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                    prop_assert!(hi - lo <= 1, "unbalanced: {:?}", sizes);
                    break;
                }
                // The owners let the revoked shards go and rejoin with what they were given.
                members = round.shards.iter().map(|(m, ss)| c(m, ss)).collect();
                round = assign(shards, &members);
            }
            prop_assert!(round.revoking.is_empty(), "not settled after a revoking round");
        }
    }

    fn members_in_order(members: &[Candidate]) -> impl Iterator<Item = &Candidate> {
        let mut v: Vec<&Candidate> = members.iter().collect();
        v.sort_by(|a, b| a.member.cmp(&b.member));
        v.into_iter()
    }
}
