"""kcat, confluent-kafka and the Java AdminClient see koord as a one-node cluster."""

import json

import pytest
from confluent_kafka.admin import AdminClient

from conftest import Koord, java, run

NODE_ID = 7
TOPICS = {"orders": 3, "events": 1}
# Kafka's internal topics, listed as a Kafka broker lists them once created.
INTERNAL = {"__consumer_offsets": 50, "__transaction_state": 50}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    k = Koord(tmp_path_factory.mktemp("metadata"),
              [f"node.id={NODE_ID}", "topics=" + ",".join(f"{t}:{n}" for t, n in TOPICS.items())])
    k.start()
    yield k
    k.stop()


def test_kcat_metadata(cluster):
    md = json.loads(run(["kcat", "-L", "-J", "-b", cluster.bootstrap]).stdout)
    assert md["brokers"] == [{"id": NODE_ID, "name": cluster.bootstrap}]
    assert md["controllerid"] == NODE_ID
    topics = {t["topic"]: t["partitions"] for t in md["topics"]}
    assert {t: len(ps) for t, ps in topics.items()} == TOPICS | INTERNAL
    for ps in topics.values():
        for p in ps:
            assert (p["leader"], p["replicas"], p["isrs"]) == (NODE_ID, [{"id": NODE_ID}],
                                                               [{"id": NODE_ID}])
        assert sorted(p["partition"] for p in ps) == list(range(len(ps)))


def test_confluent_admin_list_topics(cluster):
    md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10)
    assert md.cluster_id
    assert md.controller_id == NODE_ID
    assert [(b.id, b.host, b.port) for b in md.brokers.values()] == [
        (NODE_ID, "127.0.0.1", cluster.port)]
    assert {t: len(tm.partitions) for t, tm in md.topics.items()} == TOPICS | INTERNAL
    for tm in md.topics.values():
        assert tm.error is None
        for p in tm.partitions.values():
            assert (p.leader, p.replicas, p.isrs, p.error) == (NODE_ID, [NODE_ID], [NODE_ID], None)


def test_java_admin_describe(cluster):
    [d] = java("admin-describe", cluster.bootstrap)
    node = {"id": NODE_ID, "host": "127.0.0.1", "port": cluster.port}
    assert d["cluster_id"]
    assert d["controller"] == node
    assert d["nodes"] == [node]
    assert d["listed"] == sorted(TOPICS)
    assert {t["name"]: len(t["partitions"]) for t in d["topics"]} == TOPICS
    for t in d["topics"]:
        assert not t["internal"]
        assert [(p["partition"], p["leader"], p["replicas"]) for p in t["partitions"]] == [
            (i, NODE_ID, [NODE_ID]) for i in range(TOPICS[t["name"]])]


def test_java_create_topics(koord):
    k = koord("topics=orders:3", "cluster.id=koord-proto-tests")
    results = java("create-topics", k.bootstrap, "fresh:4", "orders:3", "zero:0", "negative:-3")
    by_topic = {r["topic"]: r for r in results}
    assert by_topic["fresh"] == {"topic": "fresh", "ok": True}
    assert by_topic["orders"]["error"] == "TopicExistsException"
    assert by_topic["zero"]["error"] == "InvalidPartitionsException"
    assert by_topic["negative"]["error"] == "InvalidPartitionsException"

    [d] = java("admin-describe", k.bootstrap)
    assert d["cluster_id"] == "koord-proto-tests"
    assert {t["name"]: len(t["partitions"]) for t in d["topics"]} == {"orders": 3, "fresh": 4}
