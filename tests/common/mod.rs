//! Shared harness for the wire tests: a real `koord` process on its own port, and a small
//! blocking Kafka client built on the `kafka-protocol` crate.
//!
//! Each test binary uses a subset of these helpers, hence the `dead_code` allowance.
//!
//! `KOORD_BOOTSTRAP=host:port` points every test at an already running server (for example
//! Apache Kafka) instead of starting koord. Tests that need koord-specific settings ask for
//! [`Koord::start_owned`], which returns `None` (and says why) in that mode.
#![allow(dead_code)]

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, GroupId, RequestHeader, RequestKind,
    ResponseHeader, ResponseKind, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use kafka_protocol::ResponseError;

pub mod sasl;
pub mod txn;

/// How long any single wait in these tests may take before it is a failure.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// What koord logs once its listener is bound (`src/main.rs`).
const LISTENING: &str = "koord listening";

/// What koord logs once the stored groups are loaded (`Coordinator::load`); before it, group
/// requests get COORDINATOR_LOAD_IN_PROGRESS.
pub const LOADED: &str = "groups loaded";

/// The environment variable that points the tests at an external server.
pub const BOOTSTRAP_ENV: &str = "KOORD_BOOTSTRAP";

/// The external server to test, if `KOORD_BOOTSTRAP` names one.
pub fn bootstrap() -> Option<String> {
    std::env::var(BOOTSTRAP_ENV)
        .ok()
        .filter(|s| !s.trim().is_empty())
}

/// A name no other test (and no earlier run against a long-lived server) has used.
pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        nanos % 1_000_000_000
    )
}

/// A server under test: a koord child process (killed on drop) or an external bootstrap.
pub struct Koord {
    addr: SocketAddr,
    child: Option<Child>,
    data_dir: Option<PathBuf>,
    /// The `--set` overrides, kept for a restart.
    sets: Vec<String>,
    /// Where in the log the current process's lines start (the log is kept across restarts).
    log_start: usize,
}

impl Koord {
    /// A server for a test that works against any Kafka-compatible server: koord started with
    /// `sets` (each `KEY=VALUE`), or the `KOORD_BOOTSTRAP` server, where `sets` are ignored.
    pub fn start(sets: &[&str]) -> Koord {
        match bootstrap() {
            Some(addr) => Koord {
                addr: resolve(&addr),
                child: None,
                data_dir: None,
                sets: Vec::new(),
                log_start: 0,
            },
            None => Koord::spawn(sets),
        }
    }

    /// A koord process with `sets`, for a test that relies on koord's configuration or on
    /// owning the process. With `KOORD_BOOTSTRAP` set this prints why `test` is skipped and
    /// returns `None`.
    pub fn start_owned(test: &str, sets: &[&str]) -> Option<Koord> {
        if let Some(addr) = bootstrap() {
            let with = if sets.is_empty() {
                String::new()
            } else {
                format!(" with {}", sets.join(" "))
            };
            eprintln!(
                "SKIPPED {test}: it needs its own koord process{with}, but {BOOTSTRAP_ENV}={addr}"
            );
            return None;
        }
        Some(Koord::spawn(sets))
    }

    /// Whether this is a koord process started by the test (not an external server).
    pub fn is_owned(&self) -> bool {
        self.child.is_some()
    }

    /// A koord process whose settings depend on the address it is started on (`--listen`),
    /// for a test that configures `listeners` itself, the first of them on that address.
    pub fn spawn_with(sets_for: impl Fn(SocketAddr) -> Vec<String>) -> Koord {
        Koord::spawn_sets(&|addr| sets_for(addr))
    }

    fn spawn(sets: &[&str]) -> Koord {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        Koord::spawn_sets(&|_| sets.clone())
    }

    fn spawn_sets(sets_for: &dyn Fn(SocketAddr) -> Vec<String>) -> Koord {
        let data_dir = std::env::temp_dir().join(unique("koord-wire"));
        std::fs::create_dir_all(&data_dir).expect("create the data dir");
        let log = data_dir.join("koord.log");
        // A free port can be taken by a parallel test between probing it and koord binding
        // it; koord then exits at once and we try another port.
        for _ in 0..5 {
            let port = free_port();
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let sets = sets_for(addr);
            let child = launch(
                addr,
                &data_dir,
                &sets,
                File::create(&log).expect("create the log file"),
            );
            let mut koord = Koord {
                addr,
                child: Some(child),
                data_dir: Some(data_dir.clone()),
                sets,
                log_start: 0,
            };
            if koord.wait_ready() {
                return koord;
            }
            // The process exited (port taken): drop it, but keep the data dir for the retry.
            koord.data_dir = None;
        }
        panic!(
            "koord did not start; last log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// Polls until our koord serves its port: it logged that it listens (so the port is its,
    /// not another process's) and answers ApiVersions. `false` if it exited first (port taken).
    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(_)) = child.try_wait() {
                    return false;
                }
            }
            let log = self.log();
            let current = log.get(self.log_start..).unwrap_or_default();
            if current.contains(LISTENING) && current.contains(LOADED) && answers(self.addr) {
                return true;
            }
            assert!(
                Instant::now() < deadline,
                "koord on {} did not start within {DEADLINE:?}; log:\n{}",
                self.addr,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Whether the owned process is still running (always true for an external server).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => true,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// koord's stderr so far (empty for an external server).
    pub fn log(&self) -> String {
        self.data_dir
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.join("koord.log")).ok())
            .unwrap_or_default()
    }

    /// A new client connection.
    pub fn connect(&self) -> Client {
        Client::connect(self.addr)
    }

    /// Sends SIGTERM and waits (up to [`DEADLINE`]) for the process to exit.
    ///
    /// # Panics
    /// If this is not an owned process, or it does not exit in time.
    pub fn terminate(&mut self) -> ExitStatus {
        let child = self.child.as_mut().expect("an owned koord process");
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed: {status}");
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = child.try_wait().expect("wait for koord") {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "koord did not exit within {DEADLINE:?} of SIGTERM; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Koord {
    /// Kills the owned process with SIGKILL (no shutdown of any kind) and reaps it.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("an owned koord process");
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Starts koord again on the same port and data dir (after [`Koord::kill9`] or
    /// [`Koord::terminate`]) and waits until it has loaded its groups.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop koord before restarting it");
        let data_dir = self.data_dir.clone().expect("an owned koord process");
        let log_path = data_dir.join("koord.log");
        self.log_start = self.log().len();
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(&log_path)
            .expect("open the log file");
        self.child = Some(launch(self.addr, &data_dir, &self.sets, log));
        assert!(
            self.wait_ready(),
            "koord did not restart; log:\n{}",
            self.log().get(self.log_start..).unwrap_or_default()
        );
    }

    /// The data dir koord was started with (`--data-dir`).
    pub fn store_dir(&self) -> PathBuf {
        self.data_dir
            .as_ref()
            .expect("an owned koord process")
            .join("data")
    }
}

fn launch(addr: SocketAddr, data_dir: &std::path::Path, sets: &[String], log: File) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_koord"));
    cmd.arg("--listen")
        .arg(addr.to_string())
        .arg("--data-dir")
        .arg(data_dir.join("data"))
        // An HTTP port of its own (a test may still ask for one with its sets).
        .arg("--set")
        .arg("http.listen=127.0.0.1:0");
    for s in sets {
        cmd.arg("--set").arg(s);
    }
    cmd.env("KOORD_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start koord")
}

impl Drop for Koord {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if std::thread::panicking() {
                // Whether koord was still alive when the test failed tells a crash from a
                // wrong answer.
                match child.try_wait() {
                    Ok(Some(status)) => {
                        eprintln!("koord (pid {}) had exited: {status}", child.id())
                    }
                    _ => eprintln!("koord (pid {}) was still running", child.id()),
                }
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(dir) = self.data_dir.take() {
            if std::thread::panicking() {
                eprintln!(
                    "koord log ({}):\n{}",
                    dir.display(),
                    std::fs::read_to_string(dir.join("koord.log")).unwrap_or_default()
                );
            }
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn resolve(addr: &str) -> SocketAddr {
    addr.to_socket_addrs()
        .unwrap_or_else(|e| panic!("{BOOTSTRAP_ENV}={addr}: {e}"))
        .next()
        .unwrap_or_else(|| panic!("{BOOTSTRAP_ENV}={addr} resolves to nothing"))
}

/// A port for koord that no client socket can take before koord binds it.
///
/// A port from `bind(127.0.0.1:0)` lies in the kernel's ephemeral range, which is also where
/// every `connect()` picks its local port. Between probing such a port and koord binding it, a
/// parallel test's client may take it as its local port (koord then fails with "address in
/// use"), and a readiness probe may even connect to itself (TCP self-connect). Ports below the
/// ephemeral range have neither problem. They are handed out in sequence from a random start,
/// so parallel tests in one binary never pick the same one; a clash with another process is
/// caught by [`Koord::wait_ready`] and retried.
pub fn free_port() -> u16 {
    const LOW: u32 = 20_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    if ephemeral_low > LOW + 1_000 {
        let span = ephemeral_low - LOW;
        let start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos() ^ std::process::id().wrapping_mul(0x9e37_79b9))
            .unwrap_or(0)
            % span;
        let _ = NEXT.compare_exchange(u32::MAX, start, Ordering::Relaxed, Ordering::Relaxed);
        for _ in 0..200 {
            let port = (LOW + NEXT.fetch_add(1, Ordering::Relaxed) % span) as u16;
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind an ephemeral port")
        .port()
}

/// Whether a Kafka server answers on `addr`: an ApiVersions v0 round trip with the right
/// correlation id (so neither a half-started server nor a self-connected socket counts).
fn answers(addr: SocketAddr) -> bool {
    let Ok(stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    if stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .is_err()
    {
        return false;
    }
    let mut client = Client {
        stream,
        next_correlation_id: 0x4b4f_4f52,
        client_id: None,
    };
    client.try_send(0, &api_versions_request()).is_ok()
}

/// The request header every client here sends.
pub fn request_header(key: ApiKey, version: i16, correlation_id: i32) -> RequestHeader {
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("koord-wire-test")))
}

/// A request frame, length prefix included.
pub fn frame(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    encode_body: impl FnOnce(&mut BytesMut) -> anyhow::Result<()>,
) -> Bytes {
    frame_with(request_header(key, version, correlation_id), encode_body)
}

/// A request frame with `header`, length prefix included.
pub fn frame_with(
    header: RequestHeader,
    encode_body: impl FnOnce(&mut BytesMut) -> anyhow::Result<()>,
) -> Bytes {
    let key = ApiKey::try_from(header.request_api_key).expect("a known key");
    let version = header.request_api_version;
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header
        .encode(&mut buf, key.request_header_version(version))
        .unwrap_or_else(|e| panic!("encode {key:?} v{version} header: {e:#}"));
    encode_body(&mut buf).unwrap_or_else(|e| panic!("encode {key:?} v{version} body: {e:#}"));
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    buf.freeze()
}

/// An ApiVersions request valid at every version (v3+ needs client software fields).
pub fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("koord-wire-test"))
        .with_client_software_version(StrBytes::from_static_str("1.0"))
}

/// How a read ended when the server was expected to close the connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Closed {
    Eof,
    Reset,
}

/// One blocking connection. Every read and write is bounded by [`DEADLINE`].
pub struct Client {
    stream: TcpStream,
    next_correlation_id: i32,
    /// The client id its requests carry (`koord-wire-test` unless set).
    client_id: Option<StrBytes>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect_timeout(&addr, DEADLINE)
            .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
        Client::from_stream(stream)
    }

    pub fn from_stream(stream: TcpStream) -> Client {
        stream.set_read_timeout(Some(DEADLINE)).expect("timeout");
        stream.set_write_timeout(Some(DEADLINE)).expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Client {
            stream,
            next_correlation_id: 1,
            client_id: None,
        }
    }

    /// The same client, its requests carrying `client_id`.
    pub fn with_client_id(mut self, client_id: &str) -> Client {
        self.client_id = Some(StrBytes::from_string(client_id.to_string()));
        self
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// A fresh correlation id.
    pub fn correlation_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id += 1;
        id
    }

    /// Sends a typed request and decodes its response, checking the correlation id and that
    /// the body is consumed exactly.
    ///
    /// # Panics
    /// On any I/O, encoding or decoding failure: the server answered wrongly or not at all.
    pub fn send<R: Request>(&mut self, version: i16, request: &R) -> R::Response {
        self.try_send(version, request)
            .unwrap_or_else(|e| panic!("{:?} v{version}: {e}", ApiKey::try_from(R::KEY).ok()))
    }

    /// [`Client::send`] that returns I/O failures (a closed connection) instead of panicking.
    pub fn try_send<R: Request>(&mut self, version: i16, request: &R) -> io::Result<R::Response> {
        let key = ApiKey::try_from(R::KEY).expect("a known key");
        let mut body = self.round_trip(key, version, |b| request.encode(b, version))?;
        let response = R::Response::decode(&mut body, version)
            .unwrap_or_else(|e| panic!("decode {key:?} v{version} response: {e:#}"));
        assert!(
            !body.has_remaining(),
            "{key:?} v{version} response has {} bytes after its body",
            body.remaining()
        );
        Ok(response)
    }

    /// Sends any request by key and decodes the response the same way as [`Client::send`].
    pub fn send_kind(&mut self, key: ApiKey, version: i16, request: &RequestKind) -> ResponseKind {
        let mut body = self
            .round_trip(key, version, |b| request.encode(b, version))
            .unwrap_or_else(|e| panic!("{key:?} v{version}: {e}"));
        let response = ResponseKind::decode(key, &mut body, version)
            .unwrap_or_else(|e| panic!("decode {key:?} v{version} response: {e:#}"));
        assert!(
            !body.has_remaining(),
            "{key:?} v{version} response has {} bytes after its body",
            body.remaining()
        );
        response
    }

    /// ApiVersions at `version` (0..=4), header v0 as KIP-511 requires.
    pub fn api_versions(&mut self, version: i16) -> ApiVersionsResponse {
        self.send(version, &api_versions_request())
    }

    /// Writes one request and reads its response; returns the body after the response header.
    pub fn round_trip(
        &mut self,
        key: ApiKey,
        version: i16,
        encode_body: impl FnOnce(&mut BytesMut) -> anyhow::Result<()>,
    ) -> io::Result<Bytes> {
        let corr = self.correlation_id();
        let mut header = request_header(key, version, corr);
        if let Some(id) = &self.client_id {
            header.client_id = Some(id.clone());
        }
        self.send_bytes(&frame_with(header, encode_body))?;
        self.read_response(key, version, corr)
    }

    /// Reads one response frame and checks its header.
    pub fn read_response(
        &mut self,
        key: ApiKey,
        version: i16,
        correlation_id: i32,
    ) -> io::Result<Bytes> {
        let mut frame = self.read_frame()?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("connection closed instead of answering {key:?} v{version}"),
            )
        })?;
        let header = ResponseHeader::decode(&mut frame, key.response_header_version(version))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{e:#}")))?;
        if header.correlation_id != correlation_id {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{key:?} v{version}: correlation id {} in the response, {correlation_id} sent",
                    header.correlation_id
                ),
            ));
        }
        Ok(frame)
    }

    /// Reads one length-prefixed frame; `None` on a clean EOF before its first byte.
    pub fn read_frame(&mut self) -> io::Result<Option<Bytes>> {
        let mut len = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            let n = self.stream.read(&mut len[got..])?;
            if n == 0 {
                return if got == 0 {
                    Ok(None)
                } else {
                    Err(io::ErrorKind::UnexpectedEof.into())
                };
            }
            got += n;
        }
        let len = i32::from_be_bytes(len);
        if !(0..=(64 << 20)).contains(&len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("response length {len}"),
            ));
        }
        let mut body = vec![0u8; len as usize];
        self.stream.read_exact(&mut body)?;
        Ok(Some(Bytes::from(body)))
    }

    /// Writes raw bytes.
    pub fn send_bytes(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Closes our sending side; the server reads EOF.
    pub fn half_close(&self) {
        self.stream
            .shutdown(Shutdown::Write)
            .expect("shut down writes");
    }

    /// Waits for the server to close the connection, without sending anything.
    ///
    /// # Panics
    /// If data arrives or nothing happens within [`DEADLINE`].
    pub fn expect_closed(&mut self) -> Closed {
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => Closed::Eof,
            Ok(_) => panic!("expected the server to close the connection; it sent data"),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ) =>
            {
                Closed::Reset
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                panic!("the server kept the connection open for {DEADLINE:?}")
            }
            Err(e) => panic!("expected the server to close the connection: {e}"),
        }
    }
}

/// A Kafka string from a `&str`.
pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub fn group_id(v: &str) -> GroupId {
    GroupId(s(v))
}

pub fn topic_name(v: &str) -> TopicName {
    TopicName(s(v))
}

/// OffsetCommit at `version` of `offset` for partition 0 of `topic`, as `member` (member id
/// and generation or member epoch; `("", -1)`: a standalone commit, which also creates an
/// Empty group): the partition's error. v10+ names the topic by id.
pub fn commit_offset(
    c: &mut Client,
    version: i16,
    group: &str,
    (member, epoch): (&str, i32),
    topic: &str,
    offset: i64,
) -> Option<ResponseError> {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    let mut t = OffsetCommitRequestTopic::default().with_partitions(vec![
        OffsetCommitRequestPartition::default()
            .with_partition_index(0)
            .with_committed_offset(offset),
    ]);
    if version >= 10 {
        t.topic_id = topic_id(c, topic);
    } else {
        t.name = topic_name(topic);
    }
    let resp = c.send(
        version,
        &kafka_protocol::messages::OffsetCommitRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id_or_member_epoch(epoch)
            .with_member_id(s(member))
            .with_topics(vec![t]),
    );
    assert_eq!(resp.topics.len(), 1, "v{version}: {resp:?}");
    assert_eq!(resp.topics[0].partitions.len(), 1, "v{version}: {resp:?}");
    err(resp.topics[0].partitions[0].error_code)
}

/// The id of topic `name` (Metadata v12), for the versions that name topics by id; the nil id
/// if there is no such topic.
pub fn topic_id(c: &mut Client, name: &str) -> uuid::Uuid {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let resp = c.send(
        12,
        &kafka_protocol::messages::MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic_name(name)))
            ]))
            .with_allow_auto_topic_creation(false),
    );
    resp.topics
        .first()
        .map_or(uuid::Uuid::nil(), |t| t.topic_id)
}

/// The error a response code stands for, `None` for success: readable assertion failures.
pub fn err(code: i16) -> Option<ResponseError> {
    code.err()
}

/// One raw HTTP/1.1 request on a fresh connection; the status code and the body.
pub fn http_get(addr: SocketAddr, raw: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the HTTP listener");
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    s.write_all(raw.as_bytes()).expect("send the request");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// GET `p` (a path) on the HTTP listener at `addr`.
pub fn http_path(addr: SocketAddr, p: &str) -> (u16, String) {
    http_get(
        addr,
        &format!("GET {p} HTTP/1.1\r\nHost: koord\r\nConnection: close\r\n\r\n"),
    )
}
