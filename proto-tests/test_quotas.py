"""Client quotas with Kafka's own tools: kafka-configs (ConfigCommand) sets and describes them
(AlterClientQuotas, DescribeClientQuotas), and a Java producer over its client id's
`producer_byte_rate` is throttled: its `produce-throttle-time-max` metric, which it takes from
the answers' `throttle_time_ms`, is above zero, while the same load under another client id is
never throttled."""

import re
import subprocess

from groups_util import java_command

CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"  # kafka-configs.sh
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"  # kafka-producer-perf-test.sh
RATE = 10_000  # bytes per second
RECORDS = 150  # of 1,000 bytes: 15 times what the rate allows per second, measured over ten


def tool(main_class, *args):
    p = subprocess.run(java_command(main_class, *args), capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, (f"{main_class} {' '.join(args)} exited {p.returncode}\n"
                               f"stdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-3000:]}")
    return p.stdout


def throttle_max(bootstrap, client_id):
    """Runs kafka-producer-perf-test as `client_id`; its produce-throttle-time-max metric."""
    out = tool(PRODUCER_PERF, "--topic", "q", "--num-records", str(RECORDS), "--record-size",
               "1000", "--throughput", "-1", "--print-metrics", "--producer-props",
               f"bootstrap.servers={bootstrap}", f"client.id={client_id}", "acks=all")
    m = re.search(r"producer-metrics:produce-throttle-time-max:\{client-id=" + re.escape(client_id)
                  + r"\}\s*:\s*([0-9.]+|NaN)", out)
    assert m, out[-3000:]
    return 0.0 if m.group(1) == "NaN" else float(m.group(1))


def test_kafka_configs_sets_a_quota_that_throttles_a_java_producer(koord):
    k = koord("topics=q:1")
    tool(CONFIG_COMMAND, "--bootstrap-server", k.bootstrap, "--alter", "--add-config",
         f"producer_byte_rate={RATE},request_percentage=200", "--entity-type", "clients",
         "--entity-name", "slow-app")
    tool(CONFIG_COMMAND, "--bootstrap-server", k.bootstrap, "--alter", "--add-config",
         "consumer_byte_rate=2048", "--entity-type", "users", "--entity-default")
    out = tool(CONFIG_COMMAND, "--bootstrap-server", k.bootstrap, "--describe",
               "--entity-type", "clients", "--entity-name", "slow-app")
    assert f"producer_byte_rate={RATE}.0" in out and "request_percentage=200.0" in out, out
    out = tool(CONFIG_COMMAND, "--bootstrap-server", k.bootstrap, "--describe",
               "--entity-type", "users")
    assert "default user-principal are consumer_byte_rate=2048.0" in out, out
    assert throttle_max(k.bootstrap, "fast-app") == 0.0
    assert throttle_max(k.bootstrap, "slow-app") > 0.0
    # Removed, the quota no longer applies.
    tool(CONFIG_COMMAND, "--bootstrap-server", k.bootstrap, "--alter", "--delete-config",
         "producer_byte_rate,request_percentage", "--entity-type", "clients", "--entity-name",
         "slow-app")
    out = tool(CONFIG_COMMAND, "--bootstrap-server", k.bootstrap, "--describe",
               "--entity-type", "clients", "--entity-name", "slow-app")
    assert "producer_byte_rate" not in out, out
