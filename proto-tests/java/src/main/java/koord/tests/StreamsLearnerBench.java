package koord.tests;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The Streams application of bench/streams-learner.sh (the learner effect, issue 19): a
 * stateful aggregation whose store is as large as the input's distinct keys times their value
 * size. Records (String key, String value) of INPUT go through a progress probe (a key-preserving
 * processValues, so no repartition) into groupByKey().reduce((old, new) -> new), a persistent
 * RocksDB store "latest" with its changelog APP_ID-latest-changelog: one subtopology, one
 * stateful task per input partition (0_0 .. 0_N-1).
 *
 * <pre>
 * StreamsLearnerBench BOOTSTRAP APP_ID INPUT STATE_DIR [KEY=VALUE...]   (extra Streams properties)
 * </pre>
 *
 * Streams settings are Kafka's defaults except one stream thread, replication factor 1 and
 * auto.offset.reset=earliest (and what the arguments add, e.g. group.protocol).
 *
 * JSON lines on stdout, each with "ts_ms" (wall clock):
 * {"event":"state","state":S,"old":O}; {"event":"tasks","state":S,"active":[..],"standby":[..]}
 * when the local tasks change (checked every 50 ms); {"event":"progress","task":T,"n":N,
 * "first":MS,"last":MS,"offset":O}: every 50 ms, for each task that processed records since the
 * last sample, how many, the wall time of the first and the last of them and the input offset of
 * the last, and the largest wall time minus record timestamp (the producer's create time) among
 * them (gaps within a 50 ms sample are not visible: the script's gaps are between samples'
 * last and the next's first); {"event":"error",...}; {"event":"closed","clean":B}.
 * With START_ON_STDIN set in the environment, prints {"event":"ready"} and calls
 * KafkaStreams.start() only once a line is read from stdin ({"event":"start"}): the benchmark
 * starts the scaled-out instance's JVM ahead so that its start-up is not in the measured window.
 * Runs until SIGTERM (closes leaving the group).
 */
public final class StreamsLearnerBench {
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    private static String lastTasks = "";

    /** Progress of one task since the last sample; guarded by its own monitor. */
    static final class Progress {
        long n;
        long first;
        long last;
        long offset = -1;
        long maxLatency;
    }

    static final Map<String, Progress> PROGRESS = new ConcurrentHashMap<>();

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String appId = args[1];
        String input = args[2];
        String stateDir = args[3];

        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        for (String arg : Arrays.asList(args).subList(4, args.length)) {
            int eq = arg.indexOf('=');
            p.put(arg.substring(0, eq), arg.substring(eq + 1));
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .processValues(Probe::new)
                .groupByKey()
                .reduce((older, newer) -> newer,
                        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("latest")
                                .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        CountDownLatch stop = new CountDownLatch(1);
        streams.setStateListener((now, old) -> {
            emit("state", "\"state\":" + str(now.name()) + ",\"old\":" + str(old.name()));
            reportTasks(streams);
        });
        streams.setUncaughtExceptionHandler(e -> {
            emit("error", "\"error\":" + str(e.getClass().getName())
                    + ",\"message\":" + str(String.valueOf(e.getMessage())));
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        sun.misc.Signal.handle(new sun.misc.Signal("TERM"), s -> stop.countDown());
        sun.misc.Signal.handle(new sun.misc.Signal("INT"), s -> stop.countDown());

        if (System.getenv("START_ON_STDIN") != null) {
            // Started ahead (the JVM warm, the topology built): KafkaStreams.start() when told.
            emit("ready", "");
            new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
        }
        emit("start", "");
        streams.start();
        while (!stop.await(50, TimeUnit.MILLISECONDS)) {
            sample();
            reportTasks(streams);
        }
        sample();
        boolean clean = streams.close(CloseOptions
                .groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                .withTimeout(Duration.ofSeconds(20)));
        emit("closed", "\"clean\":" + clean);
        OUT.flush();
        System.exit(clean ? 0 : 1);
    }

    /** Records, per task, when its records are processed; forwards them unchanged. */
    static final class Probe implements FixedKeyProcessor<String, String, String> {
        private FixedKeyProcessorContext<String, String> context;
        private Progress progress;

        @Override
        public void init(FixedKeyProcessorContext<String, String> context) {
            this.context = context;
            TaskId id = context.taskId();
            this.progress = PROGRESS.computeIfAbsent(id.subtopology() + "_" + id.partition(),
                    k -> new Progress());
        }

        @Override
        public void process(FixedKeyRecord<String, String> record) {
            long now = System.currentTimeMillis();
            long offset = context.recordMetadata().map(m -> m.offset()).orElse(-1L);
            long latency = now - record.timestamp();
            synchronized (progress) {
                if (progress.n == 0 || latency > progress.maxLatency) {
                    progress.maxLatency = latency;
                }
                if (progress.n == 0) {
                    progress.first = now;
                }
                progress.n++;
                progress.last = now;
                progress.offset = offset;
            }
            context.forward(record);
        }
    }

    private static void sample() {
        for (Map.Entry<String, Progress> e : PROGRESS.entrySet()) {
            Progress pr = e.getValue();
            long n, first, last, offset, latency;
            synchronized (pr) {
                if (pr.n == 0) {
                    continue;
                }
                n = pr.n;
                first = pr.first;
                last = pr.last;
                offset = pr.offset;
                latency = pr.maxLatency;
                pr.n = 0;
            }
            emit("progress", "\"task\":" + str(e.getKey()) + ",\"n\":" + n + ",\"first\":" + first
                    + ",\"last\":" + last + ",\"offset\":" + offset + ",\"latency\":" + latency);
        }
    }

    private static synchronized void reportTasks(KafkaStreams streams) {
        KafkaStreams.State state = streams.state();
        if (!state.isRunningOrRebalancing()) {
            return;
        }
        Set<String> active = new TreeSet<>();
        Set<String> standby = new TreeSet<>();
        try {
            for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                t.activeTasks().forEach(task -> active.add(task.taskId().subtopology() + "_"
                        + task.taskId().partition()));
                t.standbyTasks().forEach(task -> standby.add(task.taskId().subtopology() + "_"
                        + task.taskId().partition()));
            }
        } catch (IllegalStateException e) {
            return;
        }
        String fields = "\"state\":" + str(state.name()) + ",\"active\":" + list(active)
                + ",\"standby\":" + list(standby);
        if (!fields.equals(lastTasks)) {
            lastTasks = fields;
            emit("tasks", fields);
        }
    }

    private static String list(Set<String> items) {
        StringBuilder b = new StringBuilder("[");
        for (String s : items) {
            b.append(b.length() > 1 ? "," : "").append(str(s));
        }
        return b.append(']').toString();
    }

    private static synchronized void emit(String event, String fields) {
        OUT.println("{\"event\":" + str(event) + ",\"ts_ms\":" + System.currentTimeMillis()
                + (fields.isEmpty() ? "" : "," + fields) + "}");
        OUT.flush();
    }

    private static String str(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
