//! koord-floor: the floor of the heartbeat benchmark (issue 25). A Kafka server that does nothing
//! but answer: it frames requests as any broker must (pipelined, answered in order, one write per
//! burst), and answers a Heartbeat with a fixed correct response, precomputed per version. Its
//! CPU per 1,000 heartbeats under the koord-load run that measures koord and Kafka is what the
//! kernel, the framing and the runtime cost: no coordinator can heartbeat for less.
//!
//! So that koord-load's members get to heartbeating, the floor also answers what comes before,
//! as simply as a correct answer allows: ApiVersions, Metadata and CreateTopics (one topic with
//! its partitions, this node the leader), FindCoordinator (this node), JoinGroup (a barrier per
//! group: once `--members` members have joined, generation 1, the first to join the leader with
//! every member's metadata), SyncGroup (an empty assignment), LeaveGroup and OffsetCommit
//! (accepted). It keeps no session, generation or membership check: it is not a coordinator.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Result};
use bytes::{Bytes, BytesMut};
use clap::Parser;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, CreateTopicsRequest, CreateTopicsResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupResponse, MetadataRequest, MetadataResponse, OffsetCommitRequest,
    OffsetCommitResponse, RequestHeader, SyncGroupResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// The largest request read.
const MAX_REQUEST: usize = 16 << 20;

/// What the floor answers, at these versions (the ones koord-load sends are inside them).
const SERVED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Metadata, 0, 12),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
];

#[derive(Parser, Debug)]
#[command(about = "The heartbeat benchmark's floor: a Kafka server that only answers")]
struct Args {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:9092")]
    listen: SocketAddr,
    /// Members per group: a group's JoinGroups are answered once this many have joined.
    #[arg(long, default_value_t = 10)]
    members: usize,
    /// Partitions of every topic Metadata and CreateTopics describe.
    #[arg(long, default_value_t = 100)]
    partitions: i32,
}

/// A group's join barrier.
#[derive(Default)]
struct Joining {
    /// (member id, its metadata, where its answer goes), in join order.
    waiting: Vec<(String, Bytes, oneshot::Sender<JoinGroupResponse>)>,
    next_id: u64,
}

struct Floor {
    args: Args,
    /// Heartbeat response bodies by version: the fixed answer.
    heartbeat: Vec<Bytes>,
    groups: Mutex<HashMap<String, Joining>>,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let heartbeat = (0..=4)
        .map(|v| body(&HeartbeatResponse::default(), v))
        .collect::<Result<Vec<_>>>()?;
    let listener = TcpListener::bind(args.listen).await?;
    println!("koord-floor listening on {}", listener.local_addr()?);
    let floor = Arc::new(Floor {
        args,
        heartbeat,
        groups: Mutex::default(),
    });
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let floor = floor.clone();
        tokio::spawn(async move {
            let _ = serve(floor, stream).await;
        });
    }
}

fn body<M: Encodable>(message: &M, version: i16) -> Result<Bytes> {
    let mut buf = BytesMut::new();
    message.encode(&mut buf, version)?;
    Ok(buf.freeze())
}

/// One connection: requests in order, answers in order, one write per burst of requests. A
/// Heartbeat is answered from its first 8 bytes (key, version, correlation id), without
/// decoding it or copying it.
async fn serve(floor: Arc<Floor>, stream: TcpStream) -> Result<()> {
    let (rd, wr) = stream.into_split();
    let mut rd = BufReader::with_capacity(64 << 10, rd);
    let mut wr = BufWriter::with_capacity(64 << 10, wr);
    let mut frame: Vec<u8> = Vec::new();
    loop {
        let len = rd.read_u32().await? as usize;
        if !(8..=MAX_REQUEST).contains(&len) {
            bail!("request of {len} bytes");
        }
        frame.resize(len, 0);
        rd.read_exact(&mut frame).await?;
        let key = i16::from_be_bytes([frame[0], frame[1]]);
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
        let key = ApiKey::try_from(key).map_err(|_| anyhow::anyhow!("api key {key}"))?;
        let answer = match key {
            ApiKey::Heartbeat => floor.heartbeat[version.clamp(0, 4) as usize].clone(),
            ApiKey::JoinGroup => {
                let mut request = Bytes::copy_from_slice(&frame);
                RequestHeader::decode(&mut request, key.request_header_version(version))?;
                // The barrier: flush what is answered, then wait for the group.
                wr.flush().await?;
                let rx = floor.join(JoinGroupRequest::decode(&mut request, version)?);
                body(&rx.await?, version)?
            }
            _ => {
                let mut request = Bytes::copy_from_slice(&frame);
                RequestHeader::decode(&mut request, key.request_header_version(version))?;
                floor.answer(key, version, &mut request)?
            }
        };
        // Response header v0 is the correlation id; v1 adds an empty tagged-field section.
        let flexible = key.response_header_version(version) >= 1;
        wr.write_u32((4 + usize::from(flexible) + answer.len()) as u32)
            .await?;
        wr.write_i32(correlation_id).await?;
        if flexible {
            wr.write_u8(0).await?;
        }
        wr.write_all(&answer).await?;
        if rd.buffer().is_empty() {
            wr.flush().await?;
        }
    }
}

impl Floor {
    /// A member joins its group's barrier; answered once the group is full.
    fn join(&self, req: JoinGroupRequest) -> oneshot::Receiver<JoinGroupResponse> {
        let (tx, rx) = oneshot::channel();
        let mut groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        let group = groups.entry(req.group_id.to_string()).or_default();
        let member_id = if req.member_id.is_empty() {
            group.next_id += 1;
            format!("m-{}", group.next_id)
        } else {
            req.member_id.to_string()
        };
        let metadata = req
            .protocols
            .first()
            .map(|p| p.metadata.clone())
            .unwrap_or_default();
        group.waiting.push((member_id, metadata, tx));
        if group.waiting.len() >= self.args.members {
            let waiting = std::mem::take(&mut group.waiting);
            let leader = waiting[0].0.clone();
            let members: Vec<JoinGroupResponseMember> = waiting
                .iter()
                .map(|(id, metadata, _)| {
                    JoinGroupResponseMember::default()
                        .with_member_id(StrBytes::from_string(id.clone()))
                        .with_metadata(metadata.clone())
                })
                .collect();
            for (id, _, tx) in waiting {
                let answer = JoinGroupResponse::default()
                    .with_generation_id(1)
                    .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
                    .with_protocol_name(Some(StrBytes::from_static_str("range")))
                    .with_leader(StrBytes::from_string(leader.clone()))
                    .with_members(if id == leader {
                        members.clone()
                    } else {
                        Vec::new()
                    })
                    .with_member_id(StrBytes::from_string(id));
                let _ = tx.send(answer);
            }
        }
        rx
    }

    /// Every other request: a fixed, correct answer.
    fn answer(&self, key: ApiKey, version: i16, request: &mut Bytes) -> Result<Bytes> {
        let node = BrokerId(1);
        let port = i32::from(self.args.listen.port());
        let host = StrBytes::from_string(self.args.listen.ip().to_string());
        match key {
            ApiKey::ApiVersions => body(
                &ApiVersionsResponse::default().with_api_keys(
                    SERVED
                        .iter()
                        .map(|&(k, min, max)| {
                            ApiVersion::default()
                                .with_api_key(k as i16)
                                .with_min_version(min)
                                .with_max_version(max)
                        })
                        .collect(),
                ),
                version,
            ),
            ApiKey::Metadata => {
                let req = MetadataRequest::decode(request, version)?;
                let topics = req
                    .topics
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|t| t.name)
                    .map(|name| {
                        MetadataResponseTopic::default()
                            .with_name(Some(name))
                            .with_partitions(
                                (0..self.args.partitions)
                                    .map(|p| {
                                        MetadataResponsePartition::default()
                                            .with_partition_index(p)
                                            .with_leader_id(node)
                                            .with_replica_nodes(vec![node])
                                            .with_isr_nodes(vec![node])
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
                body(
                    &MetadataResponse::default()
                        .with_brokers(vec![MetadataResponseBroker::default()
                            .with_node_id(node)
                            .with_host(host)
                            .with_port(port)])
                        .with_controller_id(node)
                        .with_topics(topics),
                    version,
                )
            }
            ApiKey::CreateTopics => {
                let req = CreateTopicsRequest::decode(request, version)?;
                body(
                    &CreateTopicsResponse::default().with_topics(
                        req.topics
                            .into_iter()
                            .map(|t| CreatableTopicResult::default().with_name(t.name))
                            .collect(),
                    ),
                    version,
                )
            }
            ApiKey::FindCoordinator => {
                let req = FindCoordinatorRequest::decode(request, version)?;
                let resp = if version >= 4 {
                    FindCoordinatorResponse::default().with_coordinators(
                        req.coordinator_keys
                            .into_iter()
                            .map(|k| {
                                Coordinator::default()
                                    .with_key(k)
                                    .with_node_id(node)
                                    .with_host(host.clone())
                                    .with_port(port)
                            })
                            .collect(),
                    )
                } else {
                    FindCoordinatorResponse::default()
                        .with_node_id(node)
                        .with_host(host)
                        .with_port(port)
                };
                body(&resp, version)
            }
            ApiKey::SyncGroup => body(
                &SyncGroupResponse::default()
                    .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
                    .with_protocol_name(Some(StrBytes::from_static_str("range"))),
                version,
            ),
            ApiKey::LeaveGroup => body(&LeaveGroupResponse::default(), version),
            ApiKey::OffsetCommit => {
                let req = OffsetCommitRequest::decode(request, version)?;
                body(
                    &OffsetCommitResponse::default().with_topics(
                        req.topics
                            .into_iter()
                            .map(|t| {
                                OffsetCommitResponseTopic::default()
                                    .with_name(t.name)
                                    .with_partitions(
                                        t.partitions
                                            .into_iter()
                                            .map(|p| {
                                                OffsetCommitResponsePartition::default()
                                                    .with_partition_index(p.partition_index)
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    ),
                    version,
                )
            }
            other => bail!("{other:?} is not served by the floor"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heartbeat_answer_is_a_correct_heartbeat_response_at_every_version() {
        for v in 0..=4 {
            let mut bytes = body(&HeartbeatResponse::default(), v).unwrap();
            let decoded = HeartbeatResponse::decode(&mut bytes, v).unwrap();
            assert_eq!(decoded.error_code, 0);
            assert!(bytes.is_empty());
        }
    }
}
