"""Real clients over TLS and SASL against the koord binary.

One koord per test with a PLAINTEXT listener (the harness's own port) and a SASL_SSL listener,
a CA and a server certificate made by openssl for the module, and the user alice created by
sasl.admin.user. confluent-kafka (librdkafka), kcat and the Java 4.4 tools produce, consume in a
group and commit over SASL_SSL with SCRAM-SHA-512 and with PLAIN; kafka-configs adds a SCRAM
user who then logs in. Negative cases check each client's own error: a wrong password, an
unknown user, a mechanism not enabled, plaintext to the TLS listener, a user removed while
connected (the client's next re-authentication fails).
"""

import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from conftest import Koord, free_port, run
from groups_util import java_command

USER, PASSWORD = "alice", "alice-secret"
DEADLINE = 30.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """A CA (ca.pem) and a keystore (certificate and key for 127.0.0.1), made with openssl."""
    d = tmp_path_factory.mktemp("tls")

    def openssl(*args):
        run(["openssl", *args], cwd=d)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=koord-test-ca", "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout",
            "server.key", "-out", "server.csr")
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "server.pem")
    (d / "keystore.pem").write_bytes((d / "server.pem").read_bytes()
                                     + (d / "server.key").read_bytes())
    return d


@pytest.fixture
def secured(tmp_path, certs):
    """Factory: a koord with PLAINTEXT on its own port and SASL_SSL on `.sasl_ssl`."""
    started = []

    def start(*sets):
        plain, tls = free_port(), free_port()
        k = Koord(tmp_path / f"koord{len(started)}", [
            f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{tls}",
            f"ssl.keystore.location={certs / 'keystore.pem'}",
            f"sasl.admin.user={USER}", f"sasl.admin.password={PASSWORD}",
            "group.initial.rebalance.delay.ms=0", "topics=sec:2", *sets])
        started.append(k)
        k.start(port=plain)
        k.sasl_ssl = f"127.0.0.1:{tls}"
        return k

    yield start
    for k in started:
        k.stop()


def ck_config(k, certs, mechanism, user=USER, password=PASSWORD, **extra):
    return {"bootstrap.servers": k.sasl_ssl, "security.protocol": "SASL_SSL",
            "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": str(certs / "ca.pem"), **extra}


def ck_produce(config, topic, n):
    p = Producer({**config, "acks": "all"})
    for i in range(n):
        p.produce(topic, key=f"k{i}", value=f"v{i}")
    assert p.flush(DEADLINE) == 0, "every record acknowledged"


def ck_consume_commit(config, topic, group, n):
    """Consumes n records in `group`, commits synchronously; returns the values."""
    c = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    values = []
    deadline = time.monotonic() + DEADLINE
    try:
        while len(values) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            values.append(m.value().decode())
        c.commit(asynchronous=False)
        committed = c.committed(c.assignment(), timeout=10)
        assert sum(tp.offset for tp in committed) == n, committed
    finally:
        c.close()
    return values


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_confluent_kafka_produces_consumes_and_commits(secured, certs, mechanism):
    k = secured()
    config = ck_config(k, certs, mechanism)
    topic = "sec"
    ck_produce(config, topic, 10)
    values = ck_consume_commit(config, topic, f"g-{uuid.uuid4().hex[:8]}", 10)
    assert sorted(values) == sorted(f"v{i}" for i in range(10))


# kcat over SCRAM is left out: Debian's kcat 1.7.1 (librdkafka 2.0.2) fails SCRAM
# authentication against Apache Kafka 4.4 just as against koord (docs/security-conformance.md),
# while confluent-kafka's librdkafka and the Java client succeed with both.
@pytest.mark.parametrize("mechanism", ["PLAIN"])
def test_kcat_produces_and_consumes_in_a_group(secured, certs, mechanism):
    k = secured()
    common = ["kcat", "-b", k.sasl_ssl, "-X", "security.protocol=SASL_SSL",
              "-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={USER}",
              "-X", f"sasl.password={PASSWORD}", "-X", f"ssl.ca.location={certs / 'ca.pem'}"]
    run(common + ["-P", "-t", "sec", "-K", ":"], input="".join(f"k{i}:v{i}\n" for i in range(5)))
    group = f"kcat-{uuid.uuid4().hex[:8]}"
    out = run(common + ["-G", group, "-X", "auto.offset.reset=earliest", "-c", "5", "-f",
                        "%s\\n", "sec"], timeout=60).stdout
    assert sorted(out.split()) == [f"v{i}" for i in range(5)]
    # The group's commit is seen by another client.
    c = Consumer(ck_config(k, certs, mechanism, **{"group.id": group}))
    try:
        from confluent_kafka import TopicPartition
        committed = c.committed([TopicPartition("sec", 0), TopicPartition("sec", 1)], timeout=10)
        assert sum(max(tp.offset, 0) for tp in committed) == 5, committed
    finally:
        c.close()


def java_tool(main_class, *args, input=None):
    p = subprocess.run(java_command(main_class, *args), capture_output=True, text=True,
                       timeout=120, input=input)
    assert p.returncode == 0, (f"{main_class} {' '.join(args)} exited {p.returncode}\n"
                               f"stdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-3000:]}")
    return p.stdout


def java_client_config(path, certs, mechanism, user, password):
    module = ("org.apache.kafka.common.security.scram.ScramLoginModule"
              if mechanism.startswith("SCRAM") else
              "org.apache.kafka.common.security.plain.PlainLoginModule")
    path.write_text(
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={mechanism}\n"
        f"sasl.jaas.config={module} required username=\"{user}\" password=\"{password}\";\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={certs / 'ca.pem'}\n")
    return path


def test_java_tools_add_a_scram_user_who_then_produces_and_consumes(secured, certs, tmp_path):
    """kafka-configs (ConfigCommand) as alice adds bob; the Java console producer and a Java
    consumer in a group log in as bob with SCRAM-SHA-512; kafka-consumer-groups sees the
    commit."""
    k = secured()
    admin = java_client_config(tmp_path / "admin.properties", certs, "SCRAM-SHA-512",
                               USER, PASSWORD)
    java_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", k.sasl_ssl,
              "--command-config", str(admin), "--alter", "--add-config",
              "SCRAM-SHA-512=[iterations=8192,password=bob-secret]",
              "--entity-type", "users", "--entity-name", "bob")
    # kafka-configs --describe of a user asks for its client quotas and its SCRAM credentials.
    described = java_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server",
                          k.sasl_ssl, "--command-config", str(admin), "--describe",
                          "--entity-type", "users", "--entity-name", "bob")
    assert "SCRAM-SHA-512=iterations=8192" in described, described
    bob = java_client_config(tmp_path / "bob.properties", certs, "SCRAM-SHA-512", "bob",
                             "bob-secret")
    java_tool("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", k.sasl_ssl,
              "--command-config", str(bob), "--topic", "sec",
              input="".join(f"j{i}\n" for i in range(4)))
    group = f"java-{uuid.uuid4().hex[:8]}"
    out = java_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                    k.sasl_ssl, "--command-config", str(bob), "--topic", "sec", "--group",
                    group, "--from-beginning", "--max-messages", "4", "--timeout-ms", "30000")
    assert sorted(out.split()) == [f"j{i}" for i in range(4)]
    groups = java_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                       "--bootstrap-server", k.sasl_ssl, "--command-config", str(bob),
                       "--describe", "--group", group)
    offsets = [int(line.split()[3]) for line in groups.splitlines()
               if line.startswith(group)]
    assert sum(offsets) == 4, groups


def first_error(config):
    """The first error librdkafka reports for a producer with `config`."""
    errors = []
    p = Producer({**config, "error_cb": errors.append})
    deadline = time.monotonic() + DEADLINE
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors, "the client reported no error"
    return errors[0]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_wrong_password_and_unknown_user_fail_authentication(secured, certs, mechanism):
    k = secured()
    for user, password in [(USER, "wrong"), ("mallory", PASSWORD)]:
        e = first_error(ck_config(k, certs, mechanism, user, password))
        assert e.code() == KafkaError._AUTHENTICATION, e
        assert "Authentication failed" in e.str(), e


def test_mechanism_not_enabled(secured, certs):
    k = secured("sasl.enabled.mechanisms=SCRAM-SHA-512")
    e = first_error(ck_config(k, certs, "PLAIN"))
    assert "PLAIN" in e.str() and "SCRAM-SHA-512" in e.str(), e


def test_plaintext_to_the_tls_listener(secured, certs):
    k = secured()
    e = first_error({"bootstrap.servers": k.sasl_ssl, "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanisms": "PLAIN", "sasl.username": USER,
                     "sasl.password": PASSWORD})
    assert e.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), e
    # The PLAINTEXT listener is unaffected.
    p = Producer({"bootstrap.servers": k.bootstrap})
    p.produce("sec", value=b"x")
    assert p.flush(DEADLINE) == 0


def test_a_user_removed_while_connected_loses_access_at_reauthentication(secured, certs):
    """KIP-368: koord tells clients a session lifetime (connections.max.reauth.ms, 3 s here);
    librdkafka re-authenticates before it ends. Once the user's SCRAM credential is deleted
    (AdminClient.alter_user_scram_credentials, as alice), that re-authentication fails and the
    producer, still connected and producing, reports the client's own authentication error."""
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    k = secured("connections.max.reauth.ms=3000")
    admin = AdminClient(ck_config(k, certs, "SCRAM-SHA-512"))
    user = f"gone-{uuid.uuid4().hex[:8]}"
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
            b"gone-secret")]).values():
        f.result(timeout=DEADLINE)
    errors = []
    delivered = []
    p = Producer({**ck_config(k, certs, "SCRAM-SHA-512", user=user, password="gone-secret"),
                  "error_cb": errors.append, "acks": "all"})
    p.produce("sec", value=b"before", on_delivery=lambda e, m: delivered.append(e))
    assert p.flush(DEADLINE) == 0 and delivered == [None], (delivered, errors)
    for f in admin.alter_user_scram_credentials([UserScramCredentialDeletion(
            user, ScramMechanism.SCRAM_SHA_512)]).values():
        f.result(timeout=DEADLINE)
    # Keep the connection busy until the client reports that it lost its authentication.
    deadline = time.monotonic() + DEADLINE
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, f"still authenticated; errors: {errors}"
        p.produce("sec", value=b"after")
        p.poll(0.5)
    lost = next(e for e in errors if e.code() == KafkaError._AUTHENTICATION)
    assert "Authentication failed" in lost.str(), lost
    p.purge()
    p.flush(0)


# --- TLS: client certificates and reload ----------------------------------------------------

def make_cert(d, name, cn, ca="ca"):
    """A key and certificate `name`.pem/.key for subject `cn`, signed by the CA in `d`."""
    run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", cn, "-keyout",
         f"{name}.key", "-out", f"{name}.csr"], cwd=d)
    run(["openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey",
         f"{ca}.key", "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out",
         f"{name}.pem"], cwd=d)
    return d / f"{name}.pem", d / f"{name}.key"


def api_versions_over_tls(addr, ca, cert=None):
    """ApiVersions v0 over TLS: (error code, the server certificate's subject CN)."""
    import socket
    import ssl
    import struct
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    host, port = addr.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            cid = b"py"
            body = struct.pack(">hhih", 18, 0, 7, len(cid)) + cid
            s.sendall(struct.pack(">i", len(body)) + body)
            head = b""
            while len(head) < 10:
                chunk = s.recv(10 - len(head))
                if not chunk:
                    raise ConnectionError("closed")
                head += chunk
            _, corr, code = struct.unpack(">iih", head)
            assert corr == 7
            subject = dict(x[0] for x in s.getpeercert()["subject"])
            return code, subject["commonName"]


def wait_for_log(k, text):
    deadline = time.monotonic() + DEADLINE
    while text not in k.log_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"koord never logged {text!r}\n{k.log_tail()}"
        time.sleep(0.05)  # poll interval, not a wait for an outcome


def test_client_certificates_required_and_their_subject_is_the_principal(
        secured, certs, monkeypatch):
    monkeypatch.setenv("KOORD_LOG", "info,koord::server=debug")
    client = make_cert(certs, "client-one", "/O=Acme/CN=client-one")
    k = secured("ssl.client.auth=required", f"ssl.truststore.location={certs / 'ca.pem'}",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SSL")
    code, _ = api_versions_over_tls(k.sasl_ssl, certs / "ca.pem", client)
    assert code == 0
    wait_for_log(k, "principal=User:CN=client-one,O=Acme")
    with pytest.raises((ConnectionError, OSError)):
        api_versions_over_tls(k.sasl_ssl, certs / "ca.pem")


def test_client_certificates_requested_are_optional(secured, certs, monkeypatch):
    monkeypatch.setenv("KOORD_LOG", "info,koord::server=debug")
    client = make_cert(certs, "client-two", "/CN=client-two")
    k = secured("ssl.client.auth=requested", f"ssl.truststore.location={certs / 'ca.pem'}",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SSL")
    assert api_versions_over_tls(k.sasl_ssl, certs / "ca.pem")[0] == 0
    wait_for_log(k, "principal=User:ANONYMOUS")
    assert api_versions_over_tls(k.sasl_ssl, certs / "ca.pem", client)[0] == 0
    wait_for_log(k, "principal=User:CN=client-two")


def test_sighup_reloads_the_certificate(tmp_path, certs):
    d = tmp_path / "reload"
    d.mkdir()
    for f in ("ca.pem", "ca.key", "ext.cnf"):
        (d / f).write_bytes((certs / f).read_bytes())
    first = make_cert(d, "first", "/CN=first")
    second = make_cert(d, "second", "/CN=second")
    keystore = d / "keystore.pem"
    keystore.write_bytes(first[0].read_bytes() + first[1].read_bytes())
    plain, tls = free_port(), free_port()
    k = Koord(tmp_path / "koord", [f"listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
                                   f"ssl.keystore.location={keystore}"])
    k.start(port=plain)
    try:
        assert api_versions_over_tls(f"127.0.0.1:{tls}", d / "ca.pem") == (0, "first")
        keystore.write_bytes(second[0].read_bytes() + second[1].read_bytes())
        k.proc.send_signal(__import__("signal").SIGHUP)
        wait_for_log(k, "TLS certificate and key reloaded")
        assert api_versions_over_tls(f"127.0.0.1:{tls}", d / "ca.pem") == (0, "second")
    finally:
        k.stop()


def test_kafka_acls_grants_a_consumer_group(secured, certs, tmp_path):
    """ACLs with Kafka's authorizer on: kafka-acls (AclCommand) over SASL_SSL as the super user
    alice grants bob READ on a topic; bob's confluent-kafka consumer then gets
    GROUP_AUTHORIZATION_FAILED for a group he has no ACL on. kafka-acls grants him the group,
    and the same consumer consumes and commits; kafka-acls --list shows both ACLs."""
    k = secured("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                f"super.users=User:{USER}")
    admin = java_client_config(tmp_path / "admin.properties", certs, "SCRAM-SHA-512",
                               USER, PASSWORD)
    java_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", k.sasl_ssl,
              "--command-config", str(admin), "--alter", "--add-config",
              "SCRAM-SHA-512=[iterations=8192,password=bob-secret]",
              "--entity-type", "users", "--entity-name", "bob")
    ck_produce(ck_config(k, certs, "SCRAM-SHA-512"), "sec", 6)

    def acls(*args):
        return java_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", k.sasl_ssl,
                         "--command-config", str(admin), *args)

    acls("--add", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "sec")
    bob = ck_config(k, certs, "SCRAM-SHA-512", user="bob", password="bob-secret")
    group = f"acl-{uuid.uuid4().hex[:8]}"
    c = Consumer({**bob, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["sec"])
    denied = None
    deadline = time.monotonic() + DEADLINE
    try:
        while denied is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is not None:
                denied = m.error()
    finally:
        c.close()
    assert denied is not None and denied.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, denied
    acls("--add", "--allow-principal", "User:bob", "--operation", "Read", "--group", group)
    values = ck_consume_commit(bob, "sec", group, 6)
    assert sorted(values) == sorted(f"v{i}" for i in range(6))
    listed = acls("--list")
    assert "User:bob" in listed and group in listed and "sec" in listed, listed
