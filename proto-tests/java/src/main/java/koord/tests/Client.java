package koord.tests;

import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client, driven step by step from proto-tests (pytest). Each subcommand does one step
 * against a bootstrap address and prints JSON lines on stdout; errors are printed as
 * {"error": ExceptionClass, "message": ...} with exit code 1. Client logs go to stderr.
 *
 * <pre>
 * admin-describe BOOTSTRAP                      describeCluster + listTopics + describeTopics
 * create-topics  BOOTSTRAP NAME:PARTITIONS...   one line per topic: {"topic", "ok"} or the error
 * produce        BOOTSTRAP TOPIC COUNT          records 0..COUNT-1 (see record()); one summary line
 * consume-assign BOOTSTRAP TOPIC COUNT TIMEOUT_MS
 *                assign() every partition from the beginning, no group; one line per record,
 *                then {"end_offsets": {...}}
 * txn-produce, consume-committed: transactions (TxnClient.java)
 * streams        BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR [KEY=VALUE...]
 *                a Kafka Streams word count instance that runs until SIGTERM (StreamsApp.java)
 * </pre>
 */
public final class Client {
    private static final PrintWriter OUT = new PrintWriter(
            new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16));
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    public static void main(String[] args) {
        int code = 0;
        try {
            switch (args.length == 0 ? "" : args[0]) {
                case "admin-describe" -> adminDescribe(args[1]);
                case "create-topics" -> createTopics(args[1], List.of(args).subList(2, args.length));
                case "produce" -> produce(args[1], args[2], Integer.parseInt(args[3]));
                case "streams" -> StreamsApp.main(List.of(args).subList(1, args.length)
                        .toArray(new String[0]));
                case "consume-assign" -> consumeAssign(args[1], args[2], Integer.parseInt(args[3]),
                        Long.parseLong(args[4]));
                case "txn-produce" -> TxnClient.produce(args[1], args[2], args[3],
                        Integer.parseInt(args[4]), Integer.parseInt(args[5]));
                case "consume-committed" -> TxnClient.consumeCommitted(args[1], args[2],
                        Integer.parseInt(args[3]), Long.parseLong(args[4]));
                default -> throw new IllegalArgumentException("unknown subcommand; see Client.java");
            }
        } catch (Exception e) {
            Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            OUT.println(obj("error", t.getClass().getSimpleName(), "message", String.valueOf(t.getMessage())));
            code = 1;
        }
        OUT.flush();
        System.exit(code);
    }

    /** One JSON line on stdout. */
    static void print(String line) {
        OUT.println(line);
    }

    private static Properties props(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "koord-proto-tests-java");
        return p;
    }

    static void adminDescribe(String bootstrap) throws Exception {
        try (Admin admin = Admin.create(props(bootstrap))) {
            DescribeClusterResult cluster = admin.describeCluster();
            List<String> nodes = new ArrayList<>();
            for (Node n : cluster.nodes().get()) {
                nodes.add(node(n));
            }
            List<String> names = new ArrayList<>(admin.listTopics().names().get());
            Map<String, TopicDescription> described = admin.describeTopics(names).allTopicNames().get();
            List<String> topics = new ArrayList<>();
            for (TopicDescription d : new TreeMap<>(described).values()) {
                List<String> partitions = new ArrayList<>();
                for (TopicPartitionInfo p : d.partitions()) {
                    List<String> replicas = new ArrayList<>();
                    p.replicas().forEach(r -> replicas.add(String.valueOf(r.id())));
                    partitions.add("{" + kv("partition", p.partition()) + "," + kv("leader", p.leader().id())
                            + ",\"replicas\":[" + String.join(",", replicas) + "]}");
                }
                topics.add("{" + kv("name", d.name()) + "," + kv("internal", d.isInternal())
                        + ",\"partitions\":[" + String.join(",", partitions) + "]}");
            }
            OUT.println("{" + kv("cluster_id", cluster.clusterId().get())
                    + ",\"controller\":" + node(cluster.controller().get())
                    + ",\"nodes\":[" + String.join(",", nodes) + "]"
                    + ",\"listed\":[" + String.join(",", names.stream().sorted().map(Client::str).toList()) + "]"
                    + ",\"topics\":[" + String.join(",", topics) + "]}");
        }
    }

    static void createTopics(String bootstrap, List<String> specs) throws Exception {
        try (Admin admin = Admin.create(props(bootstrap))) {
            // One request per topic, so that each answer is read on its own.
            for (String spec : specs) {
                int colon = spec.lastIndexOf(':');
                String name = spec.substring(0, colon);
                int partitions = Integer.parseInt(spec.substring(colon + 1));
                NewTopic topic = new NewTopic(name, Optional.of(partitions), Optional.empty());
                try {
                    admin.createTopics(List.of(topic)).all().get();
                    OUT.println(obj("topic", name, "ok", true));
                } catch (ExecutionException e) {
                    Throwable t = e.getCause();
                    OUT.println(obj("topic", name, "error", t.getClass().getSimpleName(),
                            "message", String.valueOf(t.getMessage())));
                }
            }
        }
    }

    /** Record i as every producer in proto-tests writes it (test_produce_consume.py). */
    static String value(String src, int i) {
        return src + ":" + i + ":" + "abcdefghij".repeat(i % 10);
    }

    static void produce(String bootstrap, String topic, int count) throws Exception {
        Properties p = props(bootstrap);
        // Idempotence and acks are left at their defaults (on, all): that is what users run.
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("delivery.timeout.ms", "30000");
        p.put("request.timeout.ms", "10000");
        long[][] positions = new long[count][];
        AtomicReference<Exception> firstError = new AtomicReference<>();
        int[] failed = {0};
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                ProducerRecord<String, String> r = new ProducerRecord<>(topic, "key-" + i, value("java", i));
                r.headers().add("idx", String.valueOf(i).getBytes(StandardCharsets.UTF_8));
                r.headers().add("src", "java".getBytes(StandardCharsets.UTF_8));
                final int idx = i;
                producer.send(r, (md, e) -> {
                    synchronized (positions) {
                        if (e != null) {
                            failed[0]++;
                            firstError.compareAndSet(null, e);
                        } else {
                            positions[idx] = new long[] {md.partition(), md.offset()};
                        }
                    }
                });
            }
            producer.flush();
        }
        StringBuilder pos = new StringBuilder("[");
        synchronized (positions) {
            for (int i = 0; i < count; i++) {
                if (i > 0) {
                    pos.append(',');
                }
                pos.append(positions[i] == null ? "null" : "[" + positions[i][0] + "," + positions[i][1] + "]");
            }
        }
        Exception e = firstError.get();
        OUT.println("{" + kv("acked", count - failed[0]) + "," + kv("failed", failed[0]) + ","
                + kv("first_error", e == null ? null : e.getClass().getSimpleName() + ": " + e.getMessage())
                + ",\"positions\":" + pos + "]}");
    }

    static void consumeAssign(String bootstrap, String topic, int count, long timeoutMs) {
        Properties p = props(bootstrap);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, TIMEOUT)) {
                tps.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + timeoutMs;
            int seen = 0;
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    List<String> headers = new ArrayList<>();
                    for (Header h : r.headers()) {
                        headers.add("[" + str(h.key()) + ","
                                + str(h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8)) + "]");
                    }
                    OUT.println("{" + kv("p", r.partition()) + "," + kv("o", r.offset()) + "," + kv("k", r.key())
                            + "," + kv("v", r.value()) + ",\"h\":[" + String.join(",", headers) + "]}");
                    seen++;
                }
            }
            List<String> ends = new ArrayList<>();
            consumer.endOffsets(tps, TIMEOUT).forEach((tp, o) -> ends.add(kv(String.valueOf(tp.partition()), o)));
            OUT.println("{\"end_offsets\":{" + String.join(",", ends) + "}}");
        }
    }

    // --- minimal JSON writing ---

    private static String node(Node n) {
        return "{" + kv("id", n.id()) + "," + kv("host", n.host()) + "," + kv("port", n.port()) + "}";
    }

    static String obj(Object... kvs) {
        List<String> parts = new ArrayList<>();
        for (int i = 0; i < kvs.length; i += 2) {
            parts.add(kv((String) kvs[i], kvs[i + 1]));
        }
        return "{" + String.join(",", parts) + "}";
    }

    private static String kv(String k, Object v) {
        String value = v == null ? "null"
                : v instanceof Number || v instanceof Boolean ? v.toString() : str(v.toString());
        return str(k) + ":" + value;
    }

    private static String str(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }
}
