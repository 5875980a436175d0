package koord.tests;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Share-group consumers (KIP-932, {@code KafkaShareConsumer}) for proto-tests/test_share_groups.py.
 * One JVM runs {@code --count} consumers of one group, each on its own thread, named NAME-0,
 * NAME-1, ... (just NAME with --count 1); the name is also the consumer's client.id, so that
 * DescribeShareGroups can be matched to it.
 *
 * <pre>
 * ShareMember --bootstrap B --group G --topics T1[,T2...] --name NAME [options] [KEY=VALUE...]
 *   --count N            consumers in this JVM (default 1)
 *   --ack-mode M         explicit (default) or implicit: share.acknowledgement.mode
 *   --release RE         explicit mode: RELEASE records whose value matches RE ...
 *   --release-below N    ... only while their delivery count is below N (default: always)
 *   --reject RE          explicit mode: REJECT records whose value matches RE
 *                        (every other record is ACCEPTed)
 *   --hold               acknowledge nothing: print the first non-empty poll's records, then
 *                        {"event": "halting"} and Runtime.halt(137): a crash holding acquired records
 *   --stall              acknowledge nothing at first: print the first non-empty poll's records,
 *                        then {"event": "stalled"}, and neither poll nor acknowledge (the client's
 *                        background thread still heartbeats) until "resume NAME" on stdin; then
 *                        ACCEPT them, commitSync (its result in a "commit" event) and go on
 *   --commit C           sync (commitSync after each poll), async (commitAsync after each
 *                        poll) or none (default: the acknowledgements go with the next ShareFetch)
 *   --stop-after N       a consumer closes once it has had N deliveries
 *   --idle-ms MS         a consumer closes once it has had no record for MS (after its first one)
 *   --poll-ms MS         poll timeout (default 200)
 *   --report-polls       a "poll" event (records) for each non-empty poll
 *   KEY=VALUE            more consumer properties
 * </pre>
 *
 * stdin: "close NAME" closes that consumer, "resume NAME" resumes a --stall one; end of stdin closes them all. The JVM exits 0 once
 * every consumer has closed (asked to, or on its own with --stop-after / --idle-ms). Every event is one JSON line on stdout with "member", "event" and
 * "ts_ms":
 * <ul>
 * <li>subscribed: after subscribe()
 * <li>joined: the first non-empty poll (a share consumer has no rebalance callback; the group
 *     itself is described with ShareAdmin)
 * <li>record: topic, partition, offset, key, value, delivery_count, ack (ACCEPT, RELEASE,
 *     REJECT, or null: held / implicit)
 * <li>ack: from the AcknowledgementCommitCallback: topic, partition, offsets, type (each
 *     offset's type as this consumer acknowledged it; IMPLICIT in implicit mode), error (the
 *     exception's class, or null), message
 * <li>commit: the result of commitSync: {partition: error or null}
 * <li>halting (--hold), stalled and resumed (--stall), closed (deliveries), error (error, message)
 * </ul>
 * Client logs go to stderr.
 */
public final class ShareMember {
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);

    private static String bootstrap;
    private static String group;
    private static List<String> topics;
    private static String ackMode = "explicit";
    private static Pattern release;
    private static int releaseBelow = Integer.MAX_VALUE;
    private static Pattern reject;
    private static boolean hold;
    private static boolean stall;
    private static String commit = "none";
    private static long stopAfter = Long.MAX_VALUE;
    private static long idleMs = -1;
    private static long pollMs = 200;
    private static boolean reportPolls;
    private static final Properties EXTRA = new Properties();

    public static void main(String[] args) throws Exception {
        String name = "share";
        int count = 1;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--bootstrap" -> bootstrap = args[++i];
                case "--group" -> group = args[++i];
                case "--topics" -> topics = List.of(args[++i].split(","));
                case "--name" -> name = args[++i];
                case "--count" -> count = Integer.parseInt(args[++i]);
                case "--ack-mode" -> ackMode = args[++i];
                case "--release" -> release = Pattern.compile(args[++i]);
                case "--release-below" -> releaseBelow = Integer.parseInt(args[++i]);
                case "--reject" -> reject = Pattern.compile(args[++i]);
                case "--hold" -> hold = true;
                case "--stall" -> stall = true;
                case "--commit" -> commit = args[++i];
                case "--stop-after" -> stopAfter = Long.parseLong(args[++i]);
                case "--idle-ms" -> idleMs = Long.parseLong(args[++i]);
                case "--poll-ms" -> pollMs = Long.parseLong(args[++i]);
                case "--report-polls" -> reportPolls = true;
                default -> {
                    int eq = a.indexOf('=');
                    if (eq <= 0) {
                        throw new IllegalArgumentException("unknown argument " + a);
                    }
                    EXTRA.put(a.substring(0, eq), a.substring(eq + 1));
                }
            }
        }
        if (!ackMode.equals("explicit") && (release != null || reject != null)) {
            throw new IllegalArgumentException("--release and --reject need --ack-mode explicit");
        }
        Map<String, Member> members = new LinkedHashMap<>();
        for (int i = 0; i < count; i++) {
            Member m = new Member(count == 1 ? name : name + "-" + i);
            members.put(m.name, m);
            m.thread.start();
        }
        // stdin on a daemon thread: the JVM exits once every consumer has closed, whether asked
        // to (a "close" line, end of stdin) or on its own (--stop-after, --idle-ms).
        Thread reader = new Thread(() -> {
            try {
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                for (String line; (line = in.readLine()) != null; ) {
                    String[] w = line.trim().split("\\s+");
                    if (w.length == 2 && w[0].equals("close") && members.containsKey(w[1])) {
                        members.get(w[1]).stop();
                    } else if (w.length == 2 && w[0].equals("resume") && members.containsKey(w[1])) {
                        members.get(w[1]).resume.countDown();
                    } else if (!line.isBlank()) {
                        emit("-", "error", "\"error\":\"usage\",\"message\":" + str("unknown command: " + line));
                    }
                }
            } catch (java.io.IOException e) {
                // as end of stdin
            }
            for (Member m : members.values()) {
                m.stop();
            }
        }, "stdin");
        reader.setDaemon(true);
        reader.start();
        for (Member m : members.values()) {
            m.thread.join();
        }
        synchronized (ShareMember.class) {
            OUT.flush();
        }
        System.exit(0);
    }

    private static final class Member {
        final String name;
        final Thread thread;
        volatile boolean stopping;
        final java.util.concurrent.CountDownLatch resume = new java.util.concurrent.CountDownLatch(1);
        boolean stalled;
        volatile KafkaShareConsumer<String, String> consumer;
        /** How this consumer acknowledged each (topic-partition, offset) not yet reported. */
        final Map<String, AcknowledgeType> types = new HashMap<>();

        Member(String name) {
            this.name = name;
            this.thread = new Thread(this::run, "share-" + name);
        }

        void stop() {
            stopping = true;
            resume.countDown();
            KafkaShareConsumer<String, String> c = consumer;
            if (c != null) {
                c.wakeup();
            }
        }

        void run() {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("group.id", group);
            p.put("client.id", name);
            p.put("share.acknowledgement.mode", ackMode);
            p.put("key.deserializer", StringDeserializer.class.getName());
            p.put("value.deserializer", StringDeserializer.class.getName());
            p.putAll(EXTRA);
            long deliveries = 0;
            try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
                consumer = c;
                c.setAcknowledgementCommitCallback(this::onAcks);
                c.subscribe(topics);
                emit(name, "subscribed", "\"topics\":" + list(topics));
                boolean joined = false;
                long lastRecord = System.currentTimeMillis();
                while (!stopping && deliveries < stopAfter) {
                    ConsumerRecords<String, String> records;
                    try {
                        records = c.poll(Duration.ofMillis(pollMs));
                    } catch (WakeupException e) {
                        break;
                    }
                    if (records.isEmpty()) {
                        if (idleMs >= 0 && joined && System.currentTimeMillis() - lastRecord >= idleMs) {
                            break;
                        }
                        continue;
                    }
                    lastRecord = System.currentTimeMillis();
                    if (reportPolls) {
                        emit(name, "poll", kv("records", records.count()));
                    }
                    if (!joined) {
                        joined = true;
                        emit(name, "joined", "\"records\":" + records.count());
                    }
                    for (ConsumerRecord<String, String> r : records) {
                        deliveries++;
                        AcknowledgeType type = null;
                        boolean stallNow = stall && !stalled;
                        if (!hold && !stallNow && ackMode.equals("explicit")) {
                            int count = r.deliveryCount().map(Short::intValue).orElse(-1);
                            String v = r.value() == null ? "" : r.value();
                            if (reject != null && reject.matcher(v).find()) {
                                type = AcknowledgeType.REJECT;
                            } else if (release != null && release.matcher(v).find() && count < releaseBelow) {
                                type = AcknowledgeType.RELEASE;
                            } else {
                                type = AcknowledgeType.ACCEPT;
                            }
                            synchronized (types) {
                                types.put(r.topic() + ":" + r.partition() + ":" + r.offset(), type);
                            }
                            c.acknowledge(r, type);
                        }
                        emit(name, "record", kv("topic", r.topic()) + "," + kv("partition", r.partition())
                                + "," + kv("offset", r.offset()) + "," + kv("key", r.key()) + ","
                                + kv("value", r.value()) + ","
                                + kv("delivery_count", r.deliveryCount().map(Short::intValue).orElse(null))
                                + "," + kv("ack", type == null ? null : type.name()));
                    }
                    if (hold) {
                        emit(name, "halting", kv("held", records.count()));
                        synchronized (ShareMember.class) {
                            OUT.flush();
                            Runtime.getRuntime().halt(137);
                        }
                    }
                    boolean resumed = false;
                    if (stall && !stalled) {
                        stalled = true;
                        emit(name, "stalled", kv("held", records.count()));
                        resume.await();
                        if (stopping) {
                            break;
                        }
                        emit(name, "resumed", "");
                        for (ConsumerRecord<String, String> r : records) {
                            synchronized (types) {
                                types.put(r.topic() + ":" + r.partition() + ":" + r.offset(), AcknowledgeType.ACCEPT);
                            }
                            c.acknowledge(r, AcknowledgeType.ACCEPT);
                        }
                        resumed = true;
                    }
                    try {
                        if (commit.equals("sync") || resumed) {
                            Map<TopicIdPartition, Optional<KafkaException>> res = c.commitSync();
                            List<String> parts = new ArrayList<>();
                            res.forEach((tp, e) -> parts.add(kv(tp.topic() + "-" + tp.partition(),
                                    e.map(x -> x.getClass().getSimpleName()).orElse(null))));
                            emit(name, "commit", "\"result\":{" + String.join(",", parts) + "}");
                        } else if (commit.equals("async")) {
                            c.commitAsync();
                        }
                    } catch (WakeupException e) {
                        break;
                    }
                }
                consumer = null;
            } catch (Exception e) {
                emit(name, "error", kv("error", e.getClass().getSimpleName()) + ","
                        + kv("message", String.valueOf(e.getMessage())));
                return;
            }
            // close() has sent the last acknowledgements and left the group.
            emit(name, "closed", kv("deliveries", deliveries));
        }

        /** AcknowledgementCommitCallback: runs on this consumer's thread (in poll, commitSync or close). */
        void onAcks(Map<TopicIdPartition, Set<Long>> offsets, Exception e) {
            for (Map.Entry<TopicIdPartition, Set<Long>> entry : offsets.entrySet()) {
                TopicIdPartition tp = entry.getKey();
                Map<String, TreeSet<Long>> byType = new HashMap<>();
                synchronized (types) {
                    for (long o : entry.getValue()) {
                        AcknowledgeType t = types.remove(tp.topic() + ":" + tp.partition() + ":" + o);
                        byType.computeIfAbsent(t == null ? "IMPLICIT" : t.name(), k -> new TreeSet<>()).add(o);
                    }
                }
                for (Map.Entry<String, TreeSet<Long>> t : byType.entrySet()) {
                    emit(name, "ack", kv("topic", tp.topic()) + "," + kv("partition", tp.partition()) + ","
                            + kv("type", t.getKey()) + ",\"offsets\":" + t.getValue() + ","
                            + kv("error", e == null ? null : e.getClass().getSimpleName()) + ","
                            + kv("message", e == null ? null : String.valueOf(e.getMessage())));
                }
            }
        }
    }

    // --- minimal JSON writing ---

    static synchronized void emit(String member, String event, String fields) {
        OUT.println("{\"member\":" + str(member) + ",\"event\":" + str(event) + ",\"ts_ms\":"
                + System.currentTimeMillis() + (fields.isEmpty() ? "" : "," + fields) + "}");
        if (!event.equals("record")) {
            OUT.flush();
        }
    }

    /** Flushes records too, a few times a second, so that tests see them while they flow. */
    static {
        Thread flusher = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    return;
                }
                synchronized (ShareMember.class) {
                    OUT.flush();
                }
            }
        }, "flusher");
        flusher.setDaemon(true);
        flusher.start();
    }

    static String list(List<String> xs) {
        List<String> q = new ArrayList<>();
        xs.forEach(x -> q.add(str(x)));
        return "[" + String.join(",", q) + "]";
    }

    static String kv(String k, Object v) {
        String value = v == null ? "null"
                : v instanceof Number || v instanceof Boolean ? v.toString() : str(v.toString());
        return str(k) + ":" + value;
    }

    static String str(String s) {
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
