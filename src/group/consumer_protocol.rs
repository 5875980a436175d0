//! Just enough of the embedded consumer protocol (`ConsumerProtocolSubscription`) to know which
//! topics a classic `consumer` group subscribes to: offset retention and OffsetDelete depend on
//! it. Like Kafka, parse the v0 prefix every later version starts with (version, topics), so no
//! future version can break it. Peer bytes: every length is checked before use, nothing is
//! allocated from an unchecked count.

use std::collections::BTreeSet;

/// The topics of a serialized `ConsumerProtocolSubscription` (any version), or `None` if the
/// bytes do not parse.
pub fn subscription_topics(bytes: &[u8]) -> Option<Vec<String>> {
    let mut r = Reader(bytes);
    let _version = r.i16()?;
    let count = r.i32()?;
    if count < 0 {
        return None;
    }
    let mut topics = Vec::new();
    for _ in 0..count {
        let len = r.i16()?;
        let len = usize::try_from(len).ok()?;
        let raw = r.take(len)?;
        topics.push(String::from_utf8(raw.to_vec()).ok()?);
    }
    Some(topics)
}

/// The union of the topics of several subscriptions; `None` if any does not parse.
pub fn union_of_topics<'a>(
    subscriptions: impl IntoIterator<Item = &'a [u8]>,
) -> Option<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for s in subscriptions {
        all.extend(subscription_topics(s)?);
    }
    Some(all)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }

    fn i16(&mut self) -> Option<i16> {
        let b = self.take(2)?;
        Some(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Option<i32> {
        let b = self.take(4)?;
        Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// Serializes a v0 subscription (for tests and tools).
pub fn encode_subscription_v0(topics: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        out.extend_from_slice(&(t.len() as i16).to_be_bytes());
        out.extend_from_slice(t.as_bytes());
    }
    // user_data: null
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_topics_of_a_subscription_and_rejects_garbage() {
        let bytes = encode_subscription_v0(&["orders", "events"]);
        assert_eq!(
            subscription_topics(&bytes),
            Some(vec!["orders".to_owned(), "events".to_owned()])
        );
        // A later version: same prefix, more fields after.
        let mut v3 = bytes.clone();
        v3[1] = 3;
        v3.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 7]);
        assert!(subscription_topics(&v3).is_some());
        assert_eq!(subscription_topics(b"\x00"), None);
        // A huge count with no data behind it allocates nothing and fails.
        assert_eq!(subscription_topics(b"\x00\x00\x7f\xff\xff\xff"), None);
        assert_eq!(
            subscription_topics(b"\x00\x00\x00\x00\x00\x01\x00\x09ab"),
            None
        );
        let all = union_of_topics([bytes.as_slice(), encode_subscription_v0(&["x"]).as_slice()]);
        assert_eq!(all.map(|s| s.len()), Some(3));
    }
}
