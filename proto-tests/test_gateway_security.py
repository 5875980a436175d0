"""Gateway mode secured on both sides, against the conformance tier's secured Kafka 4.4
(KAFKA_SECURITY=sasl scripts/kafka.sh: a SASL_SSL listener, the user alice with SCRAM-SHA-512,
a CA and a certificate for 127.0.0.1 under KAFKA_DIR/tls).

koord has a SASL_SSL listener (Kafka's certificate and key, signed by the same CA) and its own
user bob, and reaches Kafka's SASL_SSL listener as alice with SCRAM-SHA-512, checking Kafka's
certificate against the CA. confluent-kafka, talking only to koord over SASL_SSL as bob,
produces, consumes in a group and commits; the commit is in Kafka's __consumer_offsets. A wrong
upstream password stops koord at start-up with Kafka's own message; a wrong client password
at koord fails the client's authentication, and nothing it sent reaches Kafka. The other
pairing too: clients on koord's SSL listener, koord to Kafka's SASL_PLAINTEXT listener with PLAIN.

Run by scripts/test.sh's conformance tier, which sets KOORD_SECURE_KAFKA_DIR to that Kafka's
directory; skipped without it.
"""

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import KOORD_BIN, Koord, free_port

KAFKA_DIR = os.environ.get("KOORD_SECURE_KAFKA_DIR", "")
pytestmark = pytest.mark.skipif(not KAFKA_DIR,
                                reason="KOORD_SECURE_KAFKA_DIR (a secured Kafka) not set")

DEADLINE = 30.0
UPSTREAM_USER, UPSTREAM_PASSWORD = "alice", "alice-secret"  # scripts/kafka.sh's user
USER, PASSWORD = "bob", "bob-secret"  # koord's own, unknown to Kafka
PARTITIONS = 2


def kafka_file(name):
    return Path(KAFKA_DIR) / name


def upstream_sasl_ssl():
    return kafka_file("bootstrap.sasl_ssl").read_text().strip()


def upstream_plaintext():
    return kafka_file("bootstrap").read_text().strip()


def gateway_sets(sasl_ssl_port, plain_port, upstream_password=UPSTREAM_PASSWORD):
    tls = kafka_file("tls")
    return [
        f"upstream.bootstrap.servers={upstream_sasl_ssl()}",
        "upstream.security.protocol=SASL_SSL",
        "upstream.sasl.mechanism=SCRAM-SHA-512",
        f"upstream.sasl.username={UPSTREAM_USER}",
        f"upstream.sasl.password={upstream_password}",
        f"upstream.ssl.truststore.location={tls / 'ca.pem'}",
        # koord's group records in a topic of this test's own: the tier's other tests share
        # this Kafka.
        "upstream.groups.topic.name=__koord_groups_secured",
        "upstream.groups.topic.partitions=1",
        f"listeners=PLAINTEXT://127.0.0.1:{plain_port},SASL_SSL://127.0.0.1:{sasl_ssl_port}",
        f"ssl.keystore.location={tls / 'keystore.pem'}",
        f"sasl.admin.user={USER}", f"sasl.admin.password={PASSWORD}",
        "group.initial.rebalance.delay.ms=0",
        "connection.failed.authentication.delay.ms=0",
    ]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    """One secured gateway for the module (start-up, discovery and koord's group topic cost
    seconds)."""
    plain, tls = free_port(), free_port()
    k = Koord(tmp_path_factory.mktemp("gwsec"), gateway_sets(tls, plain))
    k.start(port=plain)
    k.sasl_ssl = f"127.0.0.1:{tls}"
    yield k
    k.stop()


def client_config(k, password=PASSWORD, **extra):
    return {"bootstrap.servers": k.sasl_ssl, "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": USER,
            "sasl.password": password, "ssl.ca.location": str(kafka_file("tls") / "ca.pem"),
            **extra}


def create_topic(config, name):
    admin = AdminClient(config)
    admin.create_topics([NewTopic(name, num_partitions=PARTITIONS,
                                  replication_factor=1)])[name].result(timeout=DEADLINE)
    deadline = time.monotonic() + DEADLINE
    while True:
        t = admin.list_topics(name, timeout=DEADLINE).topics[name]
        if t.error is None and len(t.partitions) == PARTITIONS and \
                all(p.leader >= 0 for p in t.partitions.values()):
            return admin
        assert time.monotonic() < deadline, f"topic {name} not in metadata: {t.error}"
        time.sleep(0.05)  # poll interval, not a wait for an outcome


def test_sasl_ssl_on_both_sides_produce_consume_commit(gateway):
    k = gateway
    config = client_config(k)
    topic = f"gwsec-{uuid.uuid4().hex[:8]}"
    admin = create_topic(config, topic)
    # The client is told only koord's endpoints.
    md = admin.list_topics(topic, timeout=DEADLINE)
    upstream_ports = {int(a.rsplit(":", 1)[1]) for a in (upstream_sasl_ssl(), upstream_plaintext())}
    ports = {b.port for b in md.brokers.values()}
    assert int(k.sasl_ssl.rsplit(":", 1)[1]) in ports
    assert not ports & upstream_ports, md.brokers

    p = Producer({**config, "acks": "all"})
    for i in range(20):
        p.produce(topic, key=f"k{i}", value=f"v{i}")
    assert p.flush(DEADLINE) == 0, "every record acknowledged"

    group = f"gwsec-group-{uuid.uuid4().hex[:8]}"
    c = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    values = []
    deadline = time.monotonic() + DEADLINE
    try:
        while len(values) < 20:
            assert time.monotonic() < deadline, f"read {len(values)} of 20"
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            values.append(m.value().decode())
        c.commit(asynchronous=False)
    finally:
        c.close()
    assert sorted(values) == sorted(f"v{i}" for i in range(20))

    # The commit is upstream's: Kafka's own group coordinator answers it, asked directly.
    upstream = Consumer({"bootstrap.servers": upstream_plaintext(), "group.id": group})
    try:
        committed = upstream.committed(
            [CkTopicPartition(topic, q) for q in range(PARTITIONS)], timeout=DEADLINE)
        assert sum(max(tp.offset, 0) for tp in committed) == 20, committed
    finally:
        upstream.close()


def test_a_wrong_client_password_forwards_nothing(gateway):
    k = gateway
    topic = f"gwsec-neg-{uuid.uuid4().hex[:8]}"
    create_topic(client_config(k), topic)
    errors = []
    p = Producer({**client_config(k, password="wrong"), "acks": "all",
                  "error_cb": errors.append})
    p.produce(topic, value="must not arrive")
    deadline = time.monotonic() + DEADLINE
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, f"no authentication error: {errors}"
        p.poll(0.2)
    assert "SASL authentication error" in str(errors) or "Authentication failed" in str(errors), \
        errors
    p.purge()
    p.flush(0)
    # Kafka has nothing in the topic.
    upstream = Consumer({"bootstrap.servers": upstream_plaintext(), "group.id": "gwsec-probe"})
    try:
        for q in range(PARTITIONS):
            low, high = upstream.get_watermark_offsets(CkTopicPartition(topic, q),
                                                       timeout=DEADLINE)
            assert (low, high) == (0, 0), f"partition {q}: {low}..{high}"
    finally:
        upstream.close()


def test_ssl_listener_and_sasl_plaintext_plain_upstream(tmp_path):
    """The other pairing: clients on an SSL listener (no SASL: they are ANONYMOUS to koord),
    koord to Kafka's SASL_PLAINTEXT listener with PLAIN."""
    tls = kafka_file("tls")
    plain, ssl = free_port(), free_port()
    k = Koord(tmp_path / "koord", [
        f"upstream.bootstrap.servers={kafka_file('bootstrap.sasl_plaintext').read_text().strip()}",
        "upstream.security.protocol=SASL_PLAINTEXT", "upstream.sasl.mechanism=PLAIN",
        f"upstream.sasl.username={UPSTREAM_USER}", f"upstream.sasl.password={UPSTREAM_PASSWORD}",
        "upstream.groups.topic.name=__koord_groups_secured",
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl}",
        f"ssl.keystore.location={tls / 'keystore.pem'}", "group.initial.rebalance.delay.ms=0"])
    k.start(port=plain)
    try:
        ssl_roundtrip(ssl, tls)
    finally:
        k.stop()


def ssl_roundtrip(ssl, tls):
    """Through koord's SSL listener: a topic, five records produced and consumed in a group."""
    config = {"bootstrap.servers": f"127.0.0.1:{ssl}", "security.protocol": "SSL",
              "ssl.ca.location": str(tls / "ca.pem")}
    topic = f"gwsec-ssl-{uuid.uuid4().hex[:8]}"
    create_topic(config, topic)
    p = Producer({**config, "acks": "all"})
    for i in range(5):
        p.produce(topic, value=f"v{i}")
    assert p.flush(DEADLINE) == 0
    c = Consumer({**config, "group.id": f"gwsec-ssl-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    values = []
    deadline = time.monotonic() + DEADLINE
    try:
        while len(values) < 5:
            assert time.monotonic() < deadline, f"read {len(values)} of 5"
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                values.append(m.value().decode())
    finally:
        c.close()
    assert sorted(values) == [f"v{i}" for i in range(5)]


def test_a_wrong_upstream_password_stops_koord_with_kafkas_message(tmp_path):
    plain, tls = free_port(), free_port()
    cmd = [str(KOORD_BIN), "--data-dir", str(tmp_path / "data")]
    for kv in gateway_sets(tls, plain, upstream_password="wrong") + ["http.listen=none"]:
        cmd += ["--set", kv]
    # koord exits by itself: the test waits for that, bounded.
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "SASL authentication to" in out and f"as {UPSTREAM_USER} failed" in out, out
    # Kafka's own message for a wrong SCRAM password.
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in out, out
