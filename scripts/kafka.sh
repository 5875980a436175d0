#!/usr/bin/env bash
# Apache Kafka 4.4, single-node KRaft, on a free loopback port: the reference koord is compared
# against (conformance tier, side-by-side benchmarks).
#
#   scripts/kafka.sh start    fetch the broker from Maven Central (once, cached in .build/kafka),
#                             format a fresh log dir, start it, wait until its group coordinator
#                             answers; prints the bootstrap address (also in .build/kafka/bootstrap)
#   scripts/kafka.sh stop     stop it (SIGTERM, then SIGKILL after 30 s) by its PID file
#   scripts/kafka.sh status   prints the bootstrap address if it is running
#   scripts/kafka.sh kill N   (KAFKA_BROKERS=N clusters) SIGKILL broker N (node id N, line N of
#                             the PID file) and wait until it is gone: a crash, nothing flushed
#   scripts/kafka.sh restart N  start broker N again on its own ports with its data dir as the
#                             crash left it (killing it first if it still runs), wait until it
#                             answers, and put its new PID on line N of the PID file
#
# Settings: offsets topic replication factor 1, group.initial.rebalance.delay.ms=0 and short
# minimum session timeouts, so tests against it run as fast as against koord. KIP-848 consumer
# groups (tests/consumer_groups.rs, which starts koord with the same values): a 6 s session
# timeout (a member that stops heartbeating is gone within a test's deadline), a 1 s heartbeat
# interval and at most 5 members a group (classic groups keep group.max.size's default), and the
# target assignment computed in the heartbeat that changes the group, as koord does (Kafka 4.4
# by default computes it at most once a second, on a background thread: a member's first
# heartbeat then gets an empty assignment). Timed-out transactions are aborted within a second
# (tests/transactions.rs starts koord with the same value; Kafka's default checks every 10 s).
# Share groups (KIP-932; share.version 2 is on by default in a cluster formatted by 4.4, no
# feature to enable): a group may set share.record.lock.duration.ms down to 1 s (Kafka's
# group.share.min.record.lock.duration.ms is 15 s: proto-tests/test_share_groups.py crashes a
# consumer holding records and waits for their locks to expire), and share members get the
# consumer groups' 6 s session, 1 s heartbeat and assignment in the heartbeat that changes the
# group (Kafka's defaults: 45 s, 5 s, and at most once a second on a background thread, which
# gives a new member an empty assignment until its next heartbeat, 5 s later).
#
# KAFKA_SECURITY=sasl: also a SASL_PLAINTEXT and a SASL_SSL listener (PLAIN, SCRAM-SHA-256 and
# SCRAM-SHA-512; the user alice/alice-secret for all three; a CA and a certificate for 127.0.0.1
# made with openssl under .build/kafka/tls, the CA in ca.pem). Their addresses are written to
# .build/kafka/bootstrap.sasl_plaintext and bootstrap.sasl_ssl (tests/security.rs reads the first
# as KOORD_SASL_BOOTSTRAP). The PLAINTEXT listener stays the bootstrap. ACLs are on, as in a
# secured cluster: Kafka's StandardAuthorizer with super.users User:ANONYMOUS (the PLAINTEXT and
# controller listeners, so every other test tier runs as before) and User:alice, and
# allow.everyone.if.no.acl.found=true (a resource nobody has ACLs on stays open); tests/acls.rs
# starts koord the same way.
#
# KAFKA_BROKERS=N (N > 1): a cluster of N KRaft processes on loopback instead (koord's gateway
# tier, tests/gateway.rs): node ids 1..N, each a combined broker and controller, the N
# controllers a static quorum (controller.quorum.voters); internal topics and new topics
# replicated to min(N, 3) with min.insync.replicas 2; a broker that stops (kill -9) leaves the
# in-sync replicas within 5 s (replica.lag.time.max.ms; Kafka's default 30 s would hold every
# acks=all write, the group coordinators' included, for that long, past the tests' 6 s
# sessions), and its partitions get new leaders within about 3 s (broker.session.timeout.ms,
# after which the controller fences it; Kafka's default is 9 s: koord holds a group's writes
# through that, upstream.write.timeout.ms, and the tests' 6 s sessions must outlast it). The bootstrap file lists every broker,
# comma-separated. KAFKA_SECURITY is not combined with it.
#
# KAFKA_DIR: the directory of this Kafka (default .build/kafka), so that several can run at
# once (each on its own free ports).
#
# KAFKA_READY=broker: start (and restart) wait only until the broker answers ApiVersions, not
# until its group coordinator answers FindCoordinator, which makes Kafka create
# __consumer_offsets: the Kafka starts with no internal topic at all, as a new cluster does
# (proto-tests/test_gateway_faults.py: its groups' first requests create and load it).
#
# KAFKA_CONFIG="key=value ...": broker settings that replace these (bench/vs-kafka.sh's consumer
# protocol scenarios); "key=" with no value drops kafka.sh's line, leaving Kafka's own default.
#
# KAFKA_FEATURES="feature=level ...": feature levels the cluster is formatted with (the gateway
# tier's upstream has share groups off: KAFKA_FEATURES=share.version=0).
#
# KAFKA_VERSION (4.4.0): another Apache Kafka release, fetched into its own KAFKA_DIR (not the
# default one), for koord in gateway mode in front of an older Kafka, by hand:
#   KAFKA_VERSION=3.9.1 KAFKA_DIR=/tmp/k39 scripts/kafka.sh start
#   KOORD_UPSTREAM=$(cat /tmp/k39/bootstrap) KAFKA_DIR=/tmp/k39 \
#     proto-tests/.venv/bin/python -m pytest proto-tests/test_share_groups.py -k 'not cluster'
# (Kafka before 4.0 logs nothing: it reads log4j 1 configuration, not this script's.)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
home="$(realpath -m "${KAFKA_DIR:-$root/.build/kafka}")"
libs="$home/libs"
pidfile="$home/kafka.pid"
features=()
for kv in ${KAFKA_FEATURES:-}; do features+=(--feature "$kv"); done

version="${KAFKA_VERSION:-4.4.0}"

fetch() {
  if [ ! -f "$libs/kafka_2.13-$version.jar" ]; then
    echo "kafka.sh: fetching Apache Kafka $version from Maven Central" >&2
    mvn -q -B -f "$root/scripts/kafka/pom.xml" dependency:copy-dependencies \
      -Dkafka.version="$version" -DincludeScope=runtime -DoutputDirectory="$libs" >&2
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Every PID in the PID file is alive (one line per process).
running() {
  [ -f "$pidfile" ] || return 1
  local pid
  while read -r pid; do
    kill -0 "$pid" 2>/dev/null || return 1
  done < "$pidfile"
}

# Sends FindCoordinator v0 for a group until the coordinator answers with no error (with
# KAFKA_READY=broker: ApiVersions v0 until the broker answers it).
wait_ready() {
  python3 - "$1" "$2" "${KAFKA_READY:-}" <<'PY'
import socket, struct, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
broker_only = sys.argv[3] == "broker"
deadline = time.time() + 120
def alive():
    try:
        import os; os.kill(pid, 0); return True
    except OSError:
        return False
while time.time() < deadline:
    if not alive():
        sys.exit("kafka.sh: the broker exited during start-up")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            key = b"koord-probe"
            if broker_only:  # ApiVersions v0: no body
                body = struct.pack(">hhih", 18, 0, 1, 8) + b"kafka.sh"
            else:  # FindCoordinator v0 for the group koord-probe
                body = struct.pack(">hhih", 10, 0, 1, 8) + b"kafka.sh" + struct.pack(">h", len(key)) + key
            s.sendall(struct.pack(">i", len(body)) + body)
            data = b""
            while len(data) < 10:
                chunk = s.recv(64)
                if not chunk:
                    break
                data += chunk
            # length, correlation id, error code
            if len(data) >= 10 and struct.unpack(">h", data[8:10])[0] == 0:
                sys.exit(0)
    except (OSError, struct.error):
        pass
    time.sleep(0.5)
sys.exit("kafka.sh: the group coordinator did not become available within 120 s")
PY
}

# A CA and a server certificate for 127.0.0.1 under $home/tls (KAFKA_SECURITY=sasl).
make_tls() {
  local tls="$home/tls"
  rm -rf "$tls"; mkdir -p "$tls"
  (
    cd "$tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=kafka-sh-ca \
      -keyout ca.key -out ca.pem 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key \
      -out server.csr 2>/dev/null
    echo "subjectAltName=IP:127.0.0.1,DNS:localhost" > ext.cnf
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -extfile ext.cnf -out server.pem 2>/dev/null
    cat server.key server.pem > keystore.pem
  )
}

# The listener settings of KAFKA_SECURITY=sasl for listener $1 (lower case).
sasl_listener_props() {
  local l="$1"
  cat <<PROPS
listener.name.$l.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.$l.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret" user_alice="alice-secret";
listener.name.$l.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.$l.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
PROPS
}

# Kafka's log4j2 configuration: warnings, and the line that says the server started.
write_log_config() {
  cat > "$home/log4j2.yaml" <<'LOG'
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        Pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.server.KafkaRaftServer
        level: INFO
LOG
}

# A fresh Kafka cluster id.
cluster_id() {
  # A Kafka cluster id: URL-safe base64 of a random UUID. Not starting with '-', which the
  # storage tool's argument parser would read as an option (Kafka's own random-uuid avoids it).
  python3 -c 'import base64,uuid
while True:
    c = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not c.startswith("-"):
        print(c)
        break'
}

start() {
  if running; then cat "$home/bootstrap"; return; fi
  fetch
  local port cport sport tport data cluster listeners advertised protocols
  local -a scram=()
  port="$(free_port)"; cport="$(free_port)"
  while [ "$cport" = "$port" ]; do cport="$(free_port)"; done
  listeners="PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport"
  advertised="PLAINTEXT://127.0.0.1:$port"
  protocols="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
  rm -f "$home/bootstrap.sasl_plaintext" "$home/bootstrap.sasl_ssl"
  if [ "${KAFKA_SECURITY:-}" = sasl ]; then
    sport="$(free_port)"; tport="$(free_port)"
    while [ "$sport" = "$port" ] || [ "$sport" = "$cport" ]; do sport="$(free_port)"; done
    while [ "$tport" = "$port" ] || [ "$tport" = "$cport" ] || [ "$tport" = "$sport" ]; do
      tport="$(free_port)"
    done
    listeners="$listeners,SASL_PLAINTEXT://127.0.0.1:$sport,SASL_SSL://127.0.0.1:$tport"
    advertised="$advertised,SASL_PLAINTEXT://127.0.0.1:$sport,SASL_SSL://127.0.0.1:$tport"
    protocols="$protocols,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
    scram=(--add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]'
           --add-scram 'SCRAM-SHA-512=[name=alice,password=alice-secret]')
    make_tls
  fi
  data="$home/data"
  rm -rf "$data"; mkdir -p "$data"
  cat > "$home/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols
log.dirs=$data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
group.consumer.min.session.timeout.ms=1000
group.consumer.min.heartbeat.interval.ms=500
group.consumer.session.timeout.ms=6000
group.consumer.heartbeat.interval.ms=1000
group.consumer.max.size=5
group.consumer.assignment.interval.ms=0
group.consumer.assignor.offload.enable=false
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
group.share.min.record.lock.duration.ms=1000
group.share.min.session.timeout.ms=1000
group.share.session.timeout.ms=6000
group.share.min.heartbeat.interval.ms=500
group.share.heartbeat.interval.ms=1000
group.share.assignment.interval.ms=0
group.share.assignor.offload.enable=false
PROPS
  if [ "${KAFKA_SECURITY:-}" = sasl ]; then
    {
      echo "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
      echo "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"
      echo "super.users=User:ANONYMOUS;User:alice"
      echo "allow.everyone.if.no.acl.found=true"
      echo "ssl.keystore.type=PEM"
      echo "ssl.keystore.location=$home/tls/keystore.pem"
      sasl_listener_props sasl_plaintext
      sasl_listener_props sasl_ssl
    } >> "$home/server.properties"
  fi
  local kv
  for kv in ${KAFKA_CONFIG:-}; do
    grep -v "^${kv%%=*}=" "$home/server.properties" > "$home/server.properties.new" || true
    mv "$home/server.properties.new" "$home/server.properties"
    [ -z "${kv#*=}" ] || echo "$kv" >> "$home/server.properties"
  done
  write_log_config
  cluster="$(cluster_id)"
  java -cp "$libs/*" -Dlog4j2.configurationFile="$home/log4j2.yaml" kafka.tools.StorageTool \
    format -t "$cluster" -c "$home/server.properties" --standalone "${scram[@]}" "${features[@]}" \
    > "$home/format.log" 2>&1 \
    || { cat "$home/format.log" >&2; exit 1; }
  # KAFKA_HEAP_OPTS (Kafka's own name for it): unset gives -Xms512m, which starts the broker
  # quicker for the test tiers; bench/vs-kafka.sh sets it empty for the JVM's default heap.
  # shellcheck disable=SC2086  # the options are words
  nohup java ${KAFKA_HEAP_OPTS--Xms512m} -cp "$libs/*" -Dlog4j2.configurationFile="$home/log4j2.yaml" \
    kafka.Kafka "$home/server.properties" > "$home/kafka.log" 2>&1 &
  echo $! > "$pidfile"
  if ! wait_ready "$port" "$(cat "$pidfile")"; then
    tail -n 40 "$home/kafka.log" >&2
    stop
    exit 1
  fi
  if [ "${KAFKA_SECURITY:-}" = sasl ]; then
    echo "127.0.0.1:$sport" > "$home/bootstrap.sasl_plaintext"
    echo "127.0.0.1:$tport" > "$home/bootstrap.sasl_ssl"
  fi
  echo "127.0.0.1:$port" > "$home/bootstrap"
  cat "$home/bootstrap"
}

stop() {
  if [ ! -f "$pidfile" ]; then return; fi
  local pid pids
  pids="$(cat "$pidfile")"
  for pid in $pids; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in $pids; do
    for _ in $(seq 1 60); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -f "$pidfile" "$home/bootstrap"
}

# KAFKA_BROKERS=N: N combined broker+controller processes, a static controller quorum.
start_multi() {
  local n="$1"
  if running; then cat "$home/bootstrap"; return; fi
  fetch
  local -a ports=() cports=()
  local used=" " p i voters="" bootstrap="" rf=$(( n < 3 ? n : 3 )) isr
  isr=$(( rf < 2 ? 1 : 2 ))
  for i in $(seq 1 "$n"); do
    for which in ports cports; do
      p="$(free_port)"
      while [[ "$used" == *" $p "* ]]; do p="$(free_port)"; done
      used="$used$p "
      if [ "$which" = ports ]; then ports+=("$p"); else cports+=("$p"); fi
    done
    voters="${voters:+$voters,}$i@127.0.0.1:${cports[$((i-1))]}"
    bootstrap="${bootstrap:+$bootstrap,}127.0.0.1:${ports[$((i-1))]}"
  done
  write_log_config
  local cluster; cluster="$(cluster_id)"
  rm -f "$pidfile"
  for i in $(seq 1 "$n"); do
    local dir="$home/node$i" port="${ports[$((i-1))]}" cport="${cports[$((i-1))]}"
    rm -rf "$dir"; mkdir -p "$dir/data"
    cat > "$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=$isr
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
replica.lag.time.max.ms=5000
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=3000
PROPS
    local kv
    for kv in ${KAFKA_CONFIG:-}; do
      grep -v "^${kv%%=*}=" "$dir/server.properties" > "$dir/server.properties.new" || true
      mv "$dir/server.properties.new" "$dir/server.properties"
      [ -z "${kv#*=}" ] || echo "$kv" >> "$dir/server.properties"
    done
    java -cp "$libs/*" -Dlog4j2.configurationFile="$home/log4j2.yaml" kafka.tools.StorageTool \
      format -t "$cluster" -c "$dir/server.properties" "${features[@]}" > "$dir/format.log" 2>&1 \
      || { cat "$dir/format.log" >&2; stop; exit 1; }
    # shellcheck disable=SC2086  # the options are words
    nohup java ${KAFKA_HEAP_OPTS--Xms256m} -cp "$libs/*" \
      -Dlog4j2.configurationFile="$home/log4j2.yaml" \
      kafka.Kafka "$dir/server.properties" > "$dir/kafka.log" 2>&1 &
    echo $! >> "$pidfile"
  done
  for i in $(seq 1 "$n"); do
    if ! wait_ready "${ports[$((i-1))]}" "$(sed -n "${i}p" "$pidfile")"; then
      tail -n 40 "$home/node$i/kafka.log" >&2
      stop
      exit 1
    fi
  done
  echo "$bootstrap" > "$home/bootstrap"
  cat "$home/bootstrap"
}

# The port of node $1's PLAINTEXT listener, from its server.properties.
node_port() {
  sed -n 's|^listeners=PLAINTEXT://127.0.0.1:\([0-9]*\),.*|\1|p' "$home/node$1/server.properties"
}

# kill N: SIGKILL node N of a KAFKA_BROKERS cluster, then wait until the process is gone.
kill_node() {
  local n="$1" pid
  [ -f "$home/node$n/server.properties" ] && [ -f "$pidfile" ] \
    || { echo "kafka.sh: no broker $n in $home" >&2; exit 1; }
  pid="$(sed -n "${n}p" "$pidfile")"
  kill -KILL "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}

# restart N: node N again, as the crash left its data, on the same ports.
restart_node() {
  local n="$1" dir="$home/node$1" pid
  kill_node "$n"
  # shellcheck disable=SC2086  # the options are words
  nohup java ${KAFKA_HEAP_OPTS--Xms256m} -cp "$libs/*" \
    -Dlog4j2.configurationFile="$home/log4j2.yaml" \
    kafka.Kafka "$dir/server.properties" >> "$dir/kafka.log" 2>&1 &
  pid=$!
  sed -i "${n}s/.*/$pid/" "$pidfile"
  if ! wait_ready "$(node_port "$n")" "$pid"; then
    tail -n 40 "$dir/kafka.log" >&2
    exit 1
  fi
}

case "${1:-}" in
  start)
    if [ "${KAFKA_BROKERS:-1}" -gt 1 ]; then start_multi "$KAFKA_BROKERS"; else start; fi ;;
  stop) stop ;;
  status) if running; then cat "$home/bootstrap"; else echo "not running" >&2; exit 1; fi ;;
  kill) kill_node "${2:?usage: scripts/kafka.sh kill N}" ;;
  restart) restart_node "${2:?usage: scripts/kafka.sh restart N}" ;;
  *) echo "usage: scripts/kafka.sh start|stop|status|kill N|restart N" >&2; exit 2 ;;
esac
