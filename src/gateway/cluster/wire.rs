//! The bytes koord nodes exchange through their upstream group (PURE): a node's join metadata
//! (who it is, where clients reach it, which shards it owns) and the leader's assignment (the
//! node's shards, and the whole table: every shard's owner and every node's endpoints, so each
//! node can answer FindCoordinator for any group).
//!
//! Big-endian, Kafka's primitive types: `i16` version (1; 0 is read too), then
//! - metadata: `i32` node id, endpoints (`i32` count, each listener name, host as `i16`-length
//!   UTF-8 strings and `i32` port, then from version 1 the ports it presents upstream brokers
//!   on: `i32` count, each `i32` broker id and `i32` port), owned shards (`i32` count, `i32`
//!   each);
//! - assignment: this node's shards (`i32` count, `i32` each), the owner of each shard in order
//!   (`i32` count, `i32` node id each, -1 for none yet), the nodes (`i32` count, each its id and
//!   endpoints as in the metadata).
//!
//! Anything else (a newer version, a short or overlong body, a count past what the bytes can
//! hold) is an error, never a panic.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::{Endpoint, Node};

const VERSION: i16 = 1;

/// A node's JoinGroup metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    pub node: Node,
    pub owned: Vec<i32>,
}

/// What the leader assigns one node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assigned {
    pub shards: Vec<i32>,
    /// Index: shard; value: its owner's node id, -1 while none.
    pub owners: Vec<i32>,
    pub nodes: Vec<Node>,
}

fn put_str(b: &mut BytesMut, s: &str) {
    let s = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
    b.put_i16(s.len() as i16);
    b.put_slice(s);
}

fn put_ints(b: &mut BytesMut, v: &[i32]) {
    b.put_i32(v.len() as i32);
    for x in v {
        b.put_i32(*x);
    }
}

fn put_node(b: &mut BytesMut, n: &Node) {
    b.put_i32(n.id);
    b.put_i32(n.endpoints.len() as i32);
    for e in &n.endpoints {
        put_str(b, &e.listener);
        put_str(b, &e.host);
        b.put_i32(e.port);
        b.put_i32(e.presented.len() as i32);
        for (broker, port) in &e.presented {
            b.put_i32(*broker);
            b.put_i32(*port);
        }
    }
}

pub fn encode_metadata(m: &Metadata) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(VERSION);
    put_node(&mut b, &m.node);
    put_ints(&mut b, &m.owned);
    b.freeze()
}

pub fn encode_assigned(a: &Assigned) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(VERSION);
    put_ints(&mut b, &a.shards);
    put_ints(&mut b, &a.owners);
    b.put_i32(a.nodes.len() as i32);
    for n in &a.nodes {
        put_node(&mut b, n);
    }
    b.freeze()
}

/// A reader that fails instead of panicking; `.1` the version read.
struct Reader<'a>(&'a [u8], i16);

impl Reader<'_> {
    fn need(&self, n: usize) -> Result<(), String> {
        if self.0.remaining() < n {
            return Err("truncated".into());
        }
        Ok(())
    }

    fn i16(&mut self) -> Result<i16, String> {
        self.need(2)?;
        Ok(self.0.get_i16())
    }

    fn i32(&mut self) -> Result<i32, String> {
        self.need(4)?;
        Ok(self.0.get_i32())
    }

    /// A count of items of at least `each` bytes: never more than the bytes left can hold.
    fn count(&mut self, each: usize) -> Result<usize, String> {
        let n = self.i32()?;
        let n = usize::try_from(n).map_err(|_| format!("negative count {n}"))?;
        if n.saturating_mul(each) > self.0.remaining() {
            return Err(format!("count {n} past the end"));
        }
        Ok(n)
    }

    fn str(&mut self) -> Result<String, String> {
        let n = self.i16()?;
        let n = usize::try_from(n).map_err(|_| format!("negative length {n}"))?;
        self.need(n)?;
        let s = std::str::from_utf8(&self.0[..n]).map_err(|_| "not UTF-8")?;
        let s = s.to_string();
        self.0.advance(n);
        Ok(s)
    }

    fn ints(&mut self) -> Result<Vec<i32>, String> {
        let n = self.count(4)?;
        (0..n).map(|_| self.i32()).collect()
    }

    fn node(&mut self) -> Result<Node, String> {
        let id = self.i32()?;
        let n = self.count(8)?;
        let endpoints = (0..n)
            .map(|_| {
                let listener = self.str()?;
                let host = self.str()?;
                let port = self.i32()?;
                let presented = if self.1 >= 1 {
                    let n = self.count(8)?;
                    (0..n)
                        .map(|_| Ok((self.i32()?, self.i32()?)))
                        .collect::<Result<_, String>>()?
                } else {
                    Vec::new()
                };
                Ok(Endpoint {
                    listener,
                    host,
                    port,
                    presented,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Node { id, endpoints })
    }

    fn version(&mut self) -> Result<(), String> {
        match self.i16()? {
            v @ 0..=VERSION => {
                self.1 = v;
                Ok(())
            }
            v => Err(format!("unknown version {v}")),
        }
    }

    fn end(&self) -> Result<(), String> {
        if self.0.has_remaining() {
            return Err(format!("{} bytes past the end", self.0.remaining()));
        }
        Ok(())
    }
}

/// # Errors
/// Bytes that are not a metadata of a known version.
pub fn decode_metadata(bytes: &[u8]) -> Result<Metadata, String> {
    let mut r = Reader(bytes, 0);
    r.version()?;
    let node = r.node()?;
    let owned = r.ints()?;
    r.end()?;
    Ok(Metadata { node, owned })
}

/// # Errors
/// Bytes that are not an assignment of a known version.
pub fn decode_assigned(bytes: &[u8]) -> Result<Assigned, String> {
    let mut r = Reader(bytes, 0);
    r.version()?;
    let shards = r.ints()?;
    let owners = r.ints()?;
    let n = r.count(8)?;
    let nodes = (0..n).map(|_| r.node()).collect::<Result<_, _>>()?;
    r.end()?;
    Ok(Assigned {
        shards,
        owners,
        nodes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn node(id: i32) -> Node {
        Node {
            id,
            endpoints: vec![Endpoint {
                listener: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092 + id,
                presented: vec![(1, 19_001 + id), (2, 19_002 + id)],
            }],
        }
    }

    #[test]
    fn both_round_trip() {
        let m = Metadata {
            node: node(3),
            owned: vec![1, 4],
        };
        assert_eq!(decode_metadata(&encode_metadata(&m)).unwrap(), m);
        let a = Assigned {
            shards: vec![0, 2],
            owners: vec![3, -1, 3, 5],
            nodes: vec![node(3), node(5)],
        };
        assert_eq!(decode_assigned(&encode_assigned(&a)).unwrap(), a);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(decode_metadata(&[]).is_err());
        assert!(decode_metadata(&[0, 2]).unwrap_err().contains("version"));
        // A count of 2^31-1 endpoints in a few bytes.
        let b = [0, 0, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff];
        assert!(decode_metadata(&b).unwrap_err().contains("past the end"));
        let mut m = encode_metadata(&Metadata {
            node: node(1),
            owned: vec![],
        })
        .to_vec();
        m.push(0);
        assert!(decode_metadata(&m).unwrap_err().contains("past the end"));
    }

    #[test]
    fn version_0_has_no_presented_ports() {
        // An older node's metadata: node 7, one endpoint, shard 3 owned.
        let mut b = BytesMut::new();
        b.put_i16(0);
        b.put_i32(7);
        b.put_i32(1);
        put_str(&mut b, "PLAINTEXT");
        put_str(&mut b, "h");
        b.put_i32(9092);
        put_ints(&mut b, &[3]);
        let m = decode_metadata(&b).unwrap();
        assert_eq!(m.node.endpoints[0].port, 9092);
        assert!(m.node.endpoints[0].presented.is_empty());
        assert_eq!(m.owned, vec![3]);
    }

    proptest! {
        #[test]
        fn any_bytes_decode_or_fail_without_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_metadata(&b);
            let _ = decode_assigned(&b);
        }
    }
}
