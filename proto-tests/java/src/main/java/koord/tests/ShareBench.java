package koord.tests;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * bench/share.sh's load: share groups (KIP-932) with Java's {@code KafkaShareConsumer} 4.4,
 * the same program against koord and against Apache Kafka 4.4. Each command creates its own
 * topic and sets its group's configs with incrementalAlterConfigs on the GROUP resource
 * ({@code share.auto.offset.reset=earliest}, the lock duration, session timeout and heartbeat
 * interval given), so that both servers run the group with the same settings. The consumers use
 * implicit acknowledgement (share.acknowledgement.mode=implicit, the default: a poll
 * acknowledges the records of the previous one, sent with the next ShareFetch; close() sends the
 * last) and otherwise the client's defaults. Prints one JSON line with the figures; progress and
 * client logs go to stderr. Timestamps are epoch nanoseconds (Instant.now() at start-up, then
 * System.nanoTime()), so that two JVMs on this machine agree on them.
 *
 * <pre>
 * ShareBench run --bootstrap B --topic T --group G [options]
 *   Throughput, then latency, with --consumers consumers (threads of this JVM, one
 *   KafkaShareConsumer each) in one share group on a --partitions topic.
 *   1. The consumers subscribe and poll the empty topic (a share consumer joins its group from
 *      its first poll) until describeShareGroups shows them all, Stable, each with an
 *      assignment and at the group's epoch. Then they stop polling (their clients go on
 *      heartbeating; a ShareFetch already sent may still acquire records), --records N records
 *      of --record-bytes bytes are produced (N/partitions to each partition; acks=all,
 *      linger.ms=5), and they all poll again.
 *   2. Throughput: N divided by the time from that restart until the acknowledgement of the
 *      last of the N records has come back (AcknowledgementCommitCallback, without error).
 *   3. Latency: a producer (acks=all, linger.ms=0) sends --rate records/s (round robin over
 *      the partitions, paced by the clock) for --warmup-s + --seconds seconds, each value
 *      carrying its send time; a record's latency is from that send time until poll() returns
 *      it to a consumer. Records sent during the warm-up are not counted.
 *   --consumers C (1)  --partitions P (4)  --records N (100000)  --record-bytes B (100)
 *   --rate R (1000)  --seconds S (12)  --warmup-s W (2)  --lock-ms L (30000)
 *   --session-ms S (6000)  --heartbeat-ms H (1000)
 *   JSON: consumers, records, throughput_rps, first_record_s, all_acked_s, deliveries,
 *   redeliveries, ack_errors, sent, offered_rps, latency_samples, latency_p50_ms,
 *   latency_p99_ms, latency_max_ms, latency_lost, group_formed_s, duplicates (records
 *   delivered again without their delivery count going up; the first 20 described in
 *   duplicate_deliveries), failed_acks (the first 20 acknowledgements that failed), ...
 *
 * ShareBench kill --bootstrap B --topic T --group G [options]
 *   A consumer killed -9 holding records: how long until another consumer gets them.
 *   1. --records M records are produced (M/partitions to each partition).
 *   2. The victim, a JVM of its own (ShareBench victim), joins alone, polls once (it holds that
 *      poll's records, acquired, unacknowledged) and stops polling; its client keeps
 *      heartbeating.
 *   3. --consumers - 1 survivors (threads of this JVM) join and consume everything else, until
 *      describeShareGroups shows the whole group Stable at its epoch and the survivors have every
 *      record but the victim's (or, if the victim's client holds more than its poll returned, no
 *      new record for 1 s).
 *   4. The victim is killed (Process.destroyForcibly: SIGKILL). Figures: from the kill until
 *      the survivors have had every record they had not had before it (the victim's, delivery
 *      count 2): the first of them, the last of them; the lock duration (--lock-ms) bounds it
 *      from above if the server does not release them when the victim's connections close, the
 *      session timeout (--session-ms) if no survivor may read the victim's partitions until the
 *      victim is removed from the group.
 *   --consumers C (8, the victim included)  --partitions P (4)  --records M (2000)
 *   --lock-ms L (30000)  --session-ms S (6000)  --heartbeat-ms H (1000)
 *   JSON: held, unacked, redelivered_first_s, redelivered_last_s, dead_s, held_before_kill_s,
 *   victim_partitions, sharing (members per victim partition at the kill), ...
 *
 * Every command: --consumer.KEY VALUE sets a consumer property (default: the client's).
 *
 * ShareBench victim --bootstrap B --topic T --group G
 *   (kill's victim) one consumer, client.id "victim": polls until it gets records, prints
 *   {"event": "held", "ts": epoch ns, "records": [[partition, offset], ...]} and then neither
 *   polls nor acknowledges until killed (or end of stdin).
 * </pre>
 */
public final class ShareBench {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    private static final long NANO0 = System.nanoTime();
    private static final long EPOCH0;

    static {
        Instant i = Instant.now();
        EPOCH0 = i.getEpochSecond() * 1_000_000_000L + i.getNano();
    }

    /** Epoch nanoseconds: the same clock in every JVM on this machine. */
    static long now() {
        return EPOCH0 + (System.nanoTime() - NANO0);
    }

    static final byte PHASE_BACKLOG = 1;
    static final byte PHASE_LATENCY = 2;

    private final Map<String, String> opts = new HashMap<>();
    /** run: the consumers stop polling (once) while the backlog is produced, until `go`. */
    private volatile boolean holding;
    private final CountDownLatch go = new CountDownLatch(1);
    private final AtomicInteger parked = new AtomicInteger();

    public static void main(String[] args) throws Exception {
        ShareBench b = new ShareBench();
        for (int i = 1; i < args.length; i++) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --key value, got " + args[i]);
            }
            b.opts.put(args[i].substring(2), args[++i]);
        }
        int code = 0;
        try {
            String json = switch (args.length > 0 ? args[0] : "") {
                case "run" -> b.run();
                case "kill" -> b.kill();
                case "victim" -> {
                    b.victim();
                    yield null;
                }
                default -> throw new IllegalArgumentException("usage: ShareBench run|kill|victim --bootstrap B ...");
            };
            if (json != null) {
                OUT.println(json);
            }
        } catch (Throwable e) {
            e.printStackTrace();
            OUT.println("{" + ShareMember.kv("error", e.getClass().getSimpleName()) + ","
                    + ShareMember.kv("message", String.valueOf(e.getMessage())) + "}");
            code = 1;
        }
        OUT.flush();
        System.err.flush();
        // Consumers closed or not (a deadline passed), the figures are out.
        Runtime.getRuntime().halt(code);
    }

    String opt(String key) {
        String v = opts.get(key);
        if (v == null) {
            throw new IllegalArgumentException("--" + key + " is required");
        }
        return v;
    }

    long num(String key, long dflt) {
        return opts.containsKey(key) ? Long.parseLong(opts.get(key)) : dflt;
    }

    static void log(String s) {
        System.err.printf("[%tT.%<tL] share-bench: %s%n", System.currentTimeMillis(), s);
    }

    // --- set-up ---------------------------------------------------------------------------------

    /** --consumer.KEY VALUE options: more consumer properties (KEY=VALUE), for experiments. */
    void consumerProps(Properties p) {
        opts.forEach((k, v) -> {
            if (k.startsWith("consumer.")) {
                p.put(k.substring("consumer.".length()), v);
            }
        });
    }

    Admin admin() {
        Properties p = new Properties();
        p.put("bootstrap.servers", opt("bootstrap"));
        p.put("client.id", "share-bench-admin");
        return Admin.create(p);
    }

    void createTopic(Admin admin, String topic, int partitions) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(60, TimeUnit.SECONDS);
    }

    void setGroupConfigs(Admin admin, String group) throws Exception {
        Map<String, String> configs = new TreeMap<>();
        configs.put("share.auto.offset.reset", "earliest");
        configs.put("share.record.lock.duration.ms", String.valueOf(num("lock-ms", 30000)));
        configs.put("share.session.timeout.ms", String.valueOf(num("session-ms", 6000)));
        configs.put("share.heartbeat.interval.ms", String.valueOf(num("heartbeat-ms", 1000)));
        List<AlterConfigOp> ops = new ArrayList<>();
        configs.forEach((k, v) -> ops.add(new AlterConfigOp(new ConfigEntry(k, v), AlterConfigOp.OpType.SET)));
        admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group), ops))
                .all().get(60, TimeUnit.SECONDS);
    }

    KafkaProducer<byte[], byte[]> producer(int lingerMs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", opt("bootstrap"));
        p.put("client.id", "share-bench-producer");
        p.put("acks", "all");
        p.put("linger.ms", String.valueOf(lingerMs));
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static byte[] value(byte phase, long ts, int size) {
        ByteBuffer b = ByteBuffer.allocate(Math.max(size, 9));
        b.put(phase).putLong(ts);
        return b.array();
    }

    /** `perPartition` records to each of `partitions` partitions; fails on any send error. */
    void produceBacklog(String topic, int partitions, long perPartition, int size) throws Exception {
        AtomicLong failed = new AtomicLong();
        try (KafkaProducer<byte[], byte[]> p = producer(5)) {
            for (long i = 0; i < perPartition; i++) {
                for (int part = 0; part < partitions; part++) {
                    p.send(new ProducerRecord<>(topic, part, null, value(PHASE_BACKLOG, now(), size)),
                            (md, e) -> {
                                if (e != null) {
                                    failed.incrementAndGet();
                                }
                            });
                }
            }
            p.flush();
        }
        if (failed.get() > 0) {
            throw new IllegalStateException(failed.get() + " records of the backlog not produced");
        }
    }

    /** describeShareGroups until `ready` accepts the description (polling, with a deadline). */
    ShareGroupDescription awaitGroup(Admin admin, String group, long timeoutMs,
                                     java.util.function.Predicate<ShareGroupDescription> ready) throws Exception {
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        ShareGroupDescription last = null;
        while (System.nanoTime() < deadline) {
            try {
                last = admin.describeShareGroups(List.of(group)).describedGroups().get(group).get(10, TimeUnit.SECONDS);
                if (ready.test(last)) {
                    return last;
                }
            } catch (ExecutionException e) {
                last = null; // not there yet (GROUP_ID_NOT_FOUND), or a transient error
            }
            Thread.sleep(50); // between polls of the group's description
        }
        throw new IllegalStateException("group " + group + " not formed within " + timeoutMs + " ms; last: " + last);
    }

    /** Stable, `members` members, each assigned and at the group's epoch. */
    static boolean formed(ShareGroupDescription d, int members) {
        return d.groupState() == GroupState.STABLE && d.members().size() == members
                && d.targetAssignmentEpoch() == d.groupEpoch()
                && d.members().stream().allMatch(m -> !m.assignment().topicPartitions().isEmpty()
                        && m.memberEpoch() == d.groupEpoch());
    }

    static void await(String what, long timeoutMs, BooleanSupplier done) throws InterruptedException {
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("not reached within " + timeoutMs + " ms: " + what);
            }
            Thread.sleep(5); // polling the consumers' counters
        }
    }

    // --- consumers ------------------------------------------------------------------------------

    /** A consumer on a thread of its own: subscribes, then polls until stopped. */
    final class Reader {
        final String name;
        final Thread thread;
        final RecordHandler handler;
        volatile boolean stop;
        volatile KafkaShareConsumer<byte[], byte[]> consumer;
        volatile Throwable failure;
        volatile boolean closed;

        Reader(String name, RecordHandler handler) {
            this.name = name;
            this.handler = handler;
            this.thread = new Thread(this::loop, name);
        }

        void stop() {
            stop = true;
            KafkaShareConsumer<byte[], byte[]> c = consumer;
            if (c != null) {
                c.wakeup();
            }
        }

        void loop() {
            Properties p = new Properties();
            p.put("bootstrap.servers", opt("bootstrap"));
            p.put("group.id", opt("group"));
            p.put("client.id", name);
            p.put("share.acknowledgement.mode", "implicit");
            p.put("key.deserializer", ByteArrayDeserializer.class.getName());
            p.put("value.deserializer", ByteArrayDeserializer.class.getName());
            consumerProps(p);
            try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p)) {
                c.setAcknowledgementCommitCallback(handler::onAcks);
                c.subscribe(List.of(opt("topic")));
                consumer = c;
                boolean held = false;
                while (!stop) {
                    if (holding && !held) {
                        held = true;
                        parked.incrementAndGet();
                        go.await();
                    }
                    ConsumerRecords<byte[], byte[]> records;
                    try {
                        records = c.poll(Duration.ofMillis(100));
                    } catch (WakeupException e) {
                        break;
                    }
                    if (!records.isEmpty()) {
                        long t = now();
                        for (ConsumerRecord<byte[], byte[]> r : records) {
                            handler.onRecord(this, r, t);
                        }
                    }
                }
                consumer = null;
                c.close(Duration.ofSeconds(10));
            } catch (Throwable e) {
                if (!stop) {
                    failure = e;
                    log(name + " failed: " + e);
                }
            }
            closed = true;
        }
    }

    interface RecordHandler {
        void onRecord(Reader reader, ConsumerRecord<byte[], byte[]> r, long receivedAt);

        void onAcks(Map<TopicIdPartition, Set<Long>> offsets, Exception e);
    }

    static void stopAll(List<Reader> readers) throws InterruptedException {
        readers.forEach(Reader::stop);
        for (Reader r : readers) {
            r.thread.join(15_000);
        }
    }

    static String failures(List<Reader> readers) {
        List<String> out = new ArrayList<>();
        for (Reader r : readers) {
            if (r.failure != null) {
                out.add(r.name + ": " + r.failure);
            }
        }
        return String.join("; ", out);
    }

    // --- run: throughput and latency ------------------------------------------------------------

    String run() throws Exception {
        String topic = opt("topic");
        String group = opt("group");
        int consumers = (int) num("consumers", 1);
        int partitions = (int) num("partitions", 4);
        long perPartition = Math.max(1, num("records", 100_000) / partitions);
        long records = perPartition * partitions;
        int size = (int) num("record-bytes", 100);
        long rate = num("rate", 1000);
        long seconds = num("seconds", 12);
        long warmupS = num("warmup-s", 2);
        try (Admin admin = admin()) {
            createTopic(admin, topic, partitions);
            setGroupConfigs(admin, group);
            RunStats s = new RunStats(partitions, perPartition);
            List<Reader> readers = new ArrayList<>();
            long joinStart = now();
            for (int i = 0; i < consumers; i++) {
                Reader r = new Reader("share-bench-" + i, s);
                readers.add(r);
                r.thread.start();
            }
            // A share consumer joins from its first poll: they poll the empty topic until the
            // group is formed.
            awaitGroup(admin, group, 60_000, d -> formed(d, consumers));
            s.groupFormed = now() - joinStart;
            // The backlog is produced while the consumers do not poll (their clients still
            // heartbeat, and may have a ShareFetch in flight).
            holding = true;
            await("every consumer holding", 30_000, () -> parked.get() == consumers);
            log("group formed with " + consumers + " consumers; producing " + records + " records");
            long produceStart = now();
            produceBacklog(topic, partitions, perPartition, size);
            long start = now();
            s.produced = start - produceStart;
            go.countDown();
            await("every backlog record acknowledged", 300_000,
                    () -> s.allAcked.get() != 0 || !failures(readers).isEmpty());
            long allAcked = s.allAcked.get();
            log("backlog acknowledged; latency at " + rate + " records/s");

            // Latency: paced sends, each value carrying its send time.
            long sent = 0;
            long total = rate * (warmupS + seconds);
            long period = 1_000_000_000L / rate;
            AtomicLong sendErrors = new AtomicLong();
            long sendStart;
            long sendEnd;
            try (KafkaProducer<byte[], byte[]> p = producer(0)) {
                // A first record to open the producer's connection and metadata before the clock.
                p.send(new ProducerRecord<>(topic, 0, null, value(PHASE_LATENCY, 0, size))).get();
                s.latencyExpected.incrementAndGet();
                s.measureFrom = now() + warmupS * 1_000_000_000L;
                sendStart = System.nanoTime();
                for (long i = 0; i < total; i++) {
                    long due = sendStart + i * period;
                    long wait;
                    while ((wait = due - System.nanoTime()) > 0) {
                        LockSupport.parkNanos(wait); // pacing the offered rate
                    }
                    p.send(new ProducerRecord<>(topic, (int) (i % partitions), null, value(PHASE_LATENCY, now(), size)),
                            (md, e) -> {
                                if (e != null) {
                                    sendErrors.incrementAndGet();
                                }
                            });
                    sent++;
                }
                sendEnd = System.nanoTime();
                p.flush();
            }
            s.latencyExpected.addAndGet(sent - sendErrors.get());
            log("sent " + sent + " records; waiting for them");
            try {
                await("every latency record received", 30_000,
                        () -> s.latencyReceived.get() >= s.latencyExpected.get() || !failures(readers).isEmpty());
            } catch (IllegalStateException e) {
                log(e.getMessage());
            }
            stopAll(readers);

            long[] lat = s.latencies();
            Json j = new Json();
            j.put("consumers", consumers).put("partitions", partitions).put("records", records)
                    .put("record_bytes", size).put("group_formed_s", s.groupFormed / 1e9)
                    .put("produced_s", s.produced / 1e9)
                    .put("first_record_s", s.firstRecord.get() == 0 ? null : (s.firstRecord.get() - start) / 1e9)
                    .put("all_acked_s", allAcked == 0 ? null : (allAcked - start) / 1e9)
                    .put("last_record_s", (s.lastBacklogRecord.get() - start) / 1e9)
                    .put("throughput_rps", allAcked == 0 ? null : records / ((allAcked - start) / 1e9))
                    .put("deliveries", s.deliveries.get()).put("redeliveries", s.redeliveries.get())
                    .put("ack_errors", s.ackErrors.get()).put("ack_error", s.ackError)
                    .put("failed_acks", String.join("; ", s.failedAcks))
                    .put("duplicates", s.duplicateCount.get())
                    .put("duplicate_deliveries", String.join("; ", s.duplicates))
                    .put("rate", rate).put("sent", sent).put("send_errors", sendErrors.get())
                    .put("offered_rps", sent / ((sendEnd - sendStart) / 1e9))
                    .put("latency_samples", lat.length)
                    .put("latency_p50_ms", pct(lat, 50)).put("latency_p99_ms", pct(lat, 99))
                    .put("latency_max_ms", lat.length == 0 ? null : lat[lat.length - 1] / 1e6)
                    .put("latency_lost", s.latencyExpected.get() - s.latencyReceived.get())
                    .put("per_consumer", s.perConsumer.toString())
                    .put("failures", failures(readers));
            return j.toString();
        }
    }

    static Double pct(long[] sorted, double p) {
        if (sorted.length == 0) {
            return null;
        }
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        return sorted[Math.max(0, rank - 1)] / 1e6;
    }

    /** run's counters, fed by every consumer thread. */
    static final class RunStats implements RecordHandler {
        final long perPartition;
        final long records;
        final BitSet[] acked;
        long ackedCount;
        final AtomicLong allAcked = new AtomicLong();
        final AtomicLong firstRecord = new AtomicLong();
        final AtomicLong lastBacklogRecord = new AtomicLong();
        final AtomicLong deliveries = new AtomicLong();
        final AtomicLong redeliveries = new AtomicLong();
        final AtomicLong ackErrors = new AtomicLong();
        volatile String ackError;
        volatile long measureFrom = Long.MAX_VALUE;
        final AtomicLong latencyExpected = new AtomicLong();
        final AtomicLong latencyReceived = new AtomicLong();
        private long[] samples = new long[1 << 14];
        private int nSamples;
        long groupFormed;
        long produced;
        /** Every delivery's first: (partition << 40 | offset) -> "consumer count epoch-ms". */
        final Map<Long, String> firstBy = new ConcurrentHashMap<>();
        /** Records delivered again with the delivery count they had (at most 20 described). */
        final List<String> duplicates = new ArrayList<>();
        final AtomicLong duplicateCount = new AtomicLong();
        /** Offsets whose acknowledgement failed (at most 20 described). */
        final List<String> failedAcks = new ArrayList<>();
        final Map<String, Long> perConsumer = new ConcurrentHashMap<>();

        RunStats(int partitions, long perPartition) {
            this.perPartition = perPartition;
            this.records = perPartition * partitions;
            this.acked = new BitSet[partitions];
            for (int i = 0; i < partitions; i++) {
                acked[i] = new BitSet();
            }
        }

        @Override
        public void onRecord(Reader reader, ConsumerRecord<byte[], byte[]> r, long t) {
            deliveries.incrementAndGet();
            perConsumer.merge(reader.name, 1L, Long::sum);
            int count = r.deliveryCount().orElse((short) 1);
            String who = reader.name + " count " + count + " at " + t / 1_000_000;
            String first = firstBy.putIfAbsent(((long) r.partition() << 40) | r.offset(), who);
            if (first != null && count <= Integer.parseInt(first.split(" ")[2])) {
                // Delivered before, and its delivery count has not gone up since.
                duplicateCount.incrementAndGet();
                synchronized (duplicates) {
                    if (duplicates.size() < 20) {
                        duplicates.add(r.partition() + "-" + r.offset() + ": " + first + ", then " + who);
                    }
                }
            }
            if (r.deliveryCount().map(c -> c > 1).orElse(false)) {
                redeliveries.incrementAndGet();
            }
            byte[] v = r.value();
            if (v == null || v.length < 9) {
                return;
            }
            if (v[0] == PHASE_BACKLOG) {
                firstRecord.compareAndSet(0, t);
                lastBacklogRecord.accumulateAndGet(t, Math::max);
            } else if (v[0] == PHASE_LATENCY) {
                long sentAt = ByteBuffer.wrap(v, 1, 8).getLong();
                if (sentAt >= measureFrom) {
                    synchronized (this) {
                        if (nSamples == samples.length) {
                            samples = Arrays.copyOf(samples, samples.length * 2);
                        }
                        samples[nSamples++] = t - sentAt;
                    }
                }
                if (r.deliveryCount().orElse((short) 1) == 1) {
                    latencyReceived.incrementAndGet();
                }
            }
        }

        @Override
        public void onAcks(Map<TopicIdPartition, Set<Long>> offsets, Exception e) {
            long t = now();
            if (e != null) {
                ackErrors.addAndGet(offsets.values().stream().mapToLong(Set::size).sum());
                ackError = e.toString();
                synchronized (failedAcks) {
                    offsets.forEach((tp, os) -> {
                        if (failedAcks.size() < 20) {
                            failedAcks.add(tp.partition() + "-" + os + " at " + t / 1_000_000 + ": "
                                    + e.getClass().getSimpleName());
                        }
                    });
                }
                return;
            }
            synchronized (this) {
                for (Map.Entry<TopicIdPartition, Set<Long>> en : offsets.entrySet()) {
                    BitSet b = acked[en.getKey().partition()];
                    for (long o : en.getValue()) {
                        if (o < perPartition && !b.get((int) o)) {
                            b.set((int) o);
                            ackedCount++;
                        }
                    }
                }
                if (ackedCount == records) {
                    allAcked.compareAndSet(0, t);
                }
            }
        }

        synchronized long[] latencies() {
            long[] out = Arrays.copyOf(samples, nSamples);
            Arrays.sort(out);
            return out;
        }
    }

    // --- kill: a consumer killed -9 holding records ----------------------------------------------

    String kill() throws Exception {
        String topic = opt("topic");
        String group = opt("group");
        int consumers = (int) num("consumers", 8);
        int partitions = (int) num("partitions", 4);
        long perPartition = Math.max(1, num("records", 2000) / partitions);
        long records = perPartition * partitions;
        try (Admin admin = admin()) {
            createTopic(admin, topic, partitions);
            setGroupConfigs(admin, group);
            produceBacklog(topic, partitions, perPartition, 100);

            // The victim: a JVM of its own, alone in the group at first.
            String java = ProcessHandle.current().info().command().orElse("java");
            List<String> cmd = new ArrayList<>(List.of(java, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                    "-cp", System.getProperty("java.class.path"), ShareBench.class.getName(), "victim",
                    "--bootstrap", opt("bootstrap"), "--topic", topic, "--group", group));
            opts.forEach((k, v) -> {
                if (k.startsWith("consumer.")) {
                    cmd.addAll(List.of("--" + k, v));
                }
            });
            Process victim = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            Runtime.getRuntime().addShutdownHook(new Thread(victim::destroyForcibly));
            BufferedReader vout = new BufferedReader(new InputStreamReader(victim.getInputStream(), StandardCharsets.UTF_8));
            long[][] held = null;
            long heldAt = 0;
            for (String line; (line = vout.readLine()) != null; ) {
                if (line.contains("\"event\":\"held\"")) {
                    heldAt = Long.parseLong(line.replaceAll(".*\"ts\":(\\d+).*", "$1"));
                    String recs = line.replaceAll(".*\"records\":\\[(.*)\\]\\}.*", "$1");
                    List<long[]> l = new ArrayList<>();
                    for (String pair : recs.split("\\],\\[")) {
                        String[] po = pair.replace("[", "").replace("]", "").split(",");
                        l.add(new long[] {Long.parseLong(po[0].trim()), Long.parseLong(po[1].trim())});
                    }
                    held = l.toArray(new long[0][]);
                    break;
                }
            }
            if (held == null) {
                throw new IllegalStateException("the victim exited before holding records: " + victim.waitFor());
            }
            log("the victim holds " + held.length + " records; starting " + (consumers - 1) + " survivors");

            KillStats s = new KillStats();
            List<Reader> readers = new ArrayList<>();
            for (int i = 0; i < consumers - 1; i++) {
                Reader r = new Reader("survivor-" + i, s);
                readers.add(r);
                r.thread.start();
            }
            ShareGroupDescription d = awaitGroup(admin, group, 60_000, x -> formed(x, consumers));
            // Every record but the victim's delivered to a survivor, or nothing new for 1 s (the
            // victim's client may hold records its poll did not return).
            long heldCount = held.length;
            long quietFrom = System.nanoTime();
            long seen = -1;
            long deadline = System.nanoTime() + 60_000_000_000L;
            while (s.first.size() + heldCount < records) {
                long n = s.first.size();
                if (n != seen) {
                    seen = n;
                    quietFrom = System.nanoTime();
                } else if (System.nanoTime() - quietFrom > 1_000_000_000L) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the survivors did not settle: " + s.first.size());
                }
                Thread.sleep(5); // polling the survivors' counters
            }
            d = awaitGroup(admin, group, 60_000, x -> formed(x, consumers));
            Map<Integer, Integer> sharing = new TreeMap<>();
            List<Integer> victimParts = new ArrayList<>();
            for (ShareMemberDescription m : d.members()) {
                for (TopicPartition tp : m.assignment().topicPartitions()) {
                    sharing.merge(tp.partition(), 1, Integer::sum);
                    if (m.clientId().equals("victim")) {
                        victimParts.add(tp.partition());
                    }
                }
            }
            Set<Long> before = Set.copyOf(s.first.keySet());
            long unacked = records - before.size();
            long heldFor = now() - heldAt;
            log("killing the victim (" + unacked + " records not delivered to a survivor)");
            long killAt = now();
            victim.destroyForcibly();
            victim.waitFor();
            long deadAt = now();
            long timeout = num("lock-ms", 30000) + 60_000;
            try {
                await("every record delivered to a survivor", timeout,
                        () -> s.first.size() >= records || !failures(readers).isEmpty());
            } catch (IllegalStateException e) {
                log(e.getMessage());
            }
            long firstAfter = Long.MAX_VALUE;
            long lastAfter = 0;
            long redeliveredCount2 = 0;
            long got = 0;
            for (Map.Entry<Long, Long> en : s.first.entrySet()) {
                if (!before.contains(en.getKey())) {
                    got++;
                    firstAfter = Math.min(firstAfter, en.getValue());
                    lastAfter = Math.max(lastAfter, en.getValue());
                    if (s.count.getOrDefault(en.getKey(), 1) >= 2) {
                        redeliveredCount2++;
                    }
                }
            }
            stopAll(readers);
            Json j = new Json();
            j.put("consumers", consumers).put("partitions", partitions).put("records", records)
                    .put("lock_ms", num("lock-ms", 30000)).put("session_ms", num("session-ms", 6000))
                    .put("held", heldCount).put("unacked", unacked).put("redelivered", got)
                    .put("redelivered_count2", redeliveredCount2)
                    .put("held_before_kill_s", heldFor / 1e9)
                    .put("dead_s", (deadAt - killAt) / 1e9)
                    .put("redelivered_first_s", got == 0 ? null : (firstAfter - killAt) / 1e9)
                    .put("redelivered_last_s", got < unacked ? null : (lastAfter - killAt) / 1e9)
                    .put("victim_partitions", victimParts.toString()).put("sharing", sharing.toString())
                    .put("survivor_deliveries", s.deliveries.get())
                    .put("failures", failures(readers));
            return j.toString();
        }
    }

    /** kill's survivors: when each record first reached one of them, and with what count. */
    static final class KillStats implements RecordHandler {
        final Map<Long, Long> first = new ConcurrentHashMap<>();
        final Map<Long, Integer> count = new ConcurrentHashMap<>();
        final AtomicLong deliveries = new AtomicLong();

        @Override
        public void onRecord(Reader reader, ConsumerRecord<byte[], byte[]> r, long t) {
            long key = ((long) r.partition() << 40) | r.offset();
            deliveries.incrementAndGet();
            count.merge(key, (int) r.deliveryCount().orElse((short) 1), Math::max);
            first.putIfAbsent(key, t);
        }

        @Override
        public void onAcks(Map<TopicIdPartition, Set<Long>> offsets, Exception e) {
        }
    }

    void victim() throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", opt("bootstrap"));
        p.put("group.id", opt("group"));
        p.put("client.id", "victim");
        p.put("share.acknowledgement.mode", "implicit");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        consumerProps(p);
        KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p);
        c.subscribe(List.of(opt("topic")));
        while (true) {
            ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(100));
            if (records.isEmpty()) {
                continue;
            }
            long t = now();
            List<String> held = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : records) {
                held.add("[" + r.partition() + "," + r.offset() + "]");
            }
            OUT.println("{\"event\":\"held\",\"ts\":" + t + ",\"records\":[" + String.join(",", held) + "]}");
            OUT.flush();
            break;
        }
        // Holding them: no poll, no acknowledgement; the client's background thread heartbeats.
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (in.readLine() != null) {
            // until killed, or end of stdin
        }
        Runtime.getRuntime().halt(0);
    }

    // --- minimal JSON ---------------------------------------------------------------------------

    static final class Json {
        private final List<String> fields = new ArrayList<>();

        Json put(String k, Object v) {
            String value;
            if (v == null) {
                value = "null";
            } else if (v instanceof Double dv) {
                value = dv.isNaN() || dv.isInfinite() ? "null" : String.format(java.util.Locale.ROOT, "%.6f", dv);
            } else if (v instanceof Number || v instanceof Boolean) {
                value = v.toString();
            } else {
                value = ShareMember.str(v.toString());
            }
            fields.add(ShareMember.str(k) + ":" + value);
            return this;
        }

        @Override
        public String toString() {
            return "{" + String.join(",", fields) + "}";
        }
    }
}
