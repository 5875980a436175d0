//! OffsetCommit load for BENCHMARKS.md (bench/durability.sh runs it against a release koord).
//!
//!   commitbench ADDR throughput COMMITTERS PARTITIONS SECONDS
//!       COMMITTERS threads, each committing PARTITIONS partitions of topic `bench` per request
//!       for its own simple group, back to back; prints requests/s, partition offsets/s and the
//!       p50/p99 request latency.
//!   commitbench ADDR fill GROUPS PARTITIONS ROUNDS
//!       ROUNDS commits of PARTITIONS partitions to each of GROUPS groups (GROUPS x PARTITIONS
//!       keys, GROUPS x PARTITIONS x ROUNDS partition offsets), from 8 threads.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ApiKey, GroupId, OffsetCommitRequest, OffsetCommitResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

const VERSION: i16 = 8;

struct Conn {
    stream: TcpStream,
    corr: i32,
}

impl Conn {
    fn connect(addr: &str) -> Conn {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Conn { stream, corr: 0 }
    }

    /// Commits `offset` to partitions 0..partitions of `bench`; panics on any error code.
    fn commit(&mut self, group: &str, partitions: i32, offset: i64) {
        self.corr += 1;
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("bench")))
                .with_partitions(
                    (0..partitions)
                        .map(|p| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(offset)
                        })
                        .collect(),
                )]);
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        RequestHeader::default()
            .with_request_api_key(ApiKey::OffsetCommit as i16)
            .with_request_api_version(VERSION)
            .with_correlation_id(self.corr)
            .encode(
                &mut buf,
                ApiKey::OffsetCommit.request_header_version(VERSION),
            )
            .unwrap();
        req.encode(&mut buf, VERSION).unwrap();
        let len = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        self.stream.write_all(&buf).expect("write");
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).expect("read");
        let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut body).expect("read");
        let mut body = bytes::Bytes::from(body);
        let header_version = ApiKey::OffsetCommit.response_header_version(VERSION);
        let _ =
            kafka_protocol::messages::ResponseHeader::decode(&mut body, header_version).unwrap();
        let resp = OffsetCommitResponse::decode(&mut body, VERSION).unwrap();
        assert!(!body.has_remaining());
        for t in &resp.topics {
            for p in &t.partitions {
                assert_eq!(p.error_code, 0, "commit failed: {p:?}");
            }
        }
    }
}

fn pct(v: &[Duration], p: f64) -> Duration {
    v[((v.len() as f64 * p) as usize).min(v.len() - 1)]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "commitbench ADDR (throughput COMMITTERS PARTITIONS SECONDS | fill GROUPS PARTITIONS ROUNDS)";
    let n = |i: usize| -> u64 { args.get(i).and_then(|a| a.parse().ok()).expect(usage) };
    let addr = args.get(1).expect(usage).clone();
    match args.get(2).map(String::as_str) {
        Some("throughput") => {
            let (committers, partitions, secs) = (n(3), n(4) as i32, n(5));
            let start = Instant::now();
            let until = start + Duration::from_secs(secs);
            let threads: Vec<_> = (0..committers)
                .map(|i| {
                    let addr = addr.clone();
                    std::thread::spawn(move || {
                        let mut c = Conn::connect(&addr);
                        let group = format!("tp-{committers}-{partitions}-{i}");
                        let mut lat = Vec::new();
                        let mut offset = 0;
                        while Instant::now() < until {
                            offset += 1;
                            let t = Instant::now();
                            c.commit(&group, partitions, offset);
                            lat.push(t.elapsed());
                        }
                        lat
                    })
                })
                .collect();
            let mut lat: Vec<Duration> = threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect();
            let elapsed = start.elapsed().as_secs_f64();
            lat.sort();
            println!(
                "committers {committers:>3} partitions/request {partitions:>3}: {:>8.0} commits/s {:>9.0} partition offsets/s  p50 {:.2} ms  p99 {:.2} ms",
                lat.len() as f64 / elapsed,
                lat.len() as f64 * partitions as f64 / elapsed,
                pct(&lat, 0.5).as_secs_f64() * 1000.0,
                pct(&lat, 0.99).as_secs_f64() * 1000.0
            );
        }
        Some("fill") => {
            let (groups, partitions, rounds) = (n(3), n(4) as i32, n(5));
            let start = Instant::now();
            let threads: Vec<_> = (0..8u64)
                .map(|t| {
                    let addr = addr.clone();
                    std::thread::spawn(move || {
                        let mut c = Conn::connect(&addr);
                        for round in 0..rounds {
                            for g in (t..groups).step_by(8) {
                                c.commit(&format!("fill-{g}"), partitions, round as i64);
                            }
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            let total = groups * partitions as u64 * rounds;
            println!(
                "{total} partition offsets over {} keys in {:.1} s",
                groups * partitions as u64,
                start.elapsed().as_secs_f64()
            );
        }
        _ => panic!("{usage}"),
    }
}
