package koord.tests;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * A stateful Kafka Streams application for proto-tests/test_streams.py: a word count with a
 * repartition step. Sentences (String values) from INPUT are split into lowercase words,
 * re-keyed by word (groupBy, through the repartition topic APP_ID-words-repartition), counted in
 * a persistent RocksDB store "counts" (changelog APP_ID-counts-changelog), and every new count
 * goes to OUTPUT as (word, count as a decimal String). at_least_once, one stream thread, commits
 * every 100 ms, no record cache, committed repartition records purged every 200 ms
 * (DeleteRecords).
 *
 * <pre>
 * StreamsApp BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR [KEY=VALUE...]   (extra Streams properties)
 * </pre>
 *
 * Runs until SIGTERM, then KafkaStreams.close() leaving the group (as a scaled-in instance should:
 * its tasks move at once, not after its session timeout) and exits 0; with the property
 * {@code koord.test.close=remain} (not passed to Streams) close() remains in the group instead,
 * as a static member (group.instance.id) being restarted does. JSON lines on stdout, each
 * with "ts_ms":
 * {"event":"state","state":NEW,"old":OLD} from the StateListener;
 * {"event":"tasks","state":S,"active":["0_1",...],"standby":[...]} whenever the tasks of the local
 * thread or the state change (metadataForLocalThreads(), checked every 50 ms and at each state
 * change); {"event":"error",...} from the uncaught exception handler (the client then shuts
 * down); {"event":"closed","clean":B} once close() returned. Client logs go to stderr.
 */
public final class StreamsApp {
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    private static String lastTasks = "";

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String appId = args[1];
        String input = args[2];
        String output = args[3];
        String stateDir = args[4];

        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        for (String arg : Arrays.asList(args).subList(5, args.length)) {
            int eq = arg.indexOf('=');
            p.put(arg.substring(0, eq), arg.substring(eq + 1));
        }
        boolean remain = "remain".equals(p.remove("koord.test.close"));

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(v -> List.of(v.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((k, word) -> !word.isEmpty())
                .groupBy((k, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
                .toStream()
                .mapValues(String::valueOf)
                .to(output, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        CountDownLatch stop = new CountDownLatch(1);
        streams.setStateListener((now, old) -> {
            emit("state", "\"state\":" + str(now.name()) + ",\"old\":" + str(old.name()));
            reportTasks(streams);
        });
        streams.setUncaughtExceptionHandler(e -> {
            emit("error", "\"error\":" + str(e.getClass().getName())
                    + ",\"message\":" + str(String.valueOf(e.getMessage()))
                    + ",\"cause\":" + str(String.valueOf(rootCause(e))));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        sun.misc.Signal.handle(new sun.misc.Signal("TERM"), s -> stop.countDown());
        sun.misc.Signal.handle(new sun.misc.Signal("INT"), s -> stop.countDown());

        streams.start();
        // The tasks can change without a state change (a follow-up rebalance that only revokes):
        // watch them until told to stop.
        while (!stop.await(50, java.util.concurrent.TimeUnit.MILLISECONDS)) {
            reportTasks(streams);
        }
        boolean clean = streams.close(CloseOptions
                .groupMembershipOperation(remain
                        ? CloseOptions.GroupMembershipOperation.REMAIN_IN_GROUP
                        : CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                .withTimeout(Duration.ofSeconds(30)));
        emit("closed", "\"clean\":" + clean);
        OUT.flush();
        System.exit(clean ? 0 : 1);
    }

    /** Emits a "tasks" line when the state or the local thread's tasks changed since the last. */
    private static synchronized void reportTasks(KafkaStreams streams) {
        KafkaStreams.State state = streams.state();
        if (!state.isRunningOrRebalancing()) {
            return;
        }
        Set<String> active = new TreeSet<>();
        Set<String> standby = new TreeSet<>();
        try {
            for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                t.activeTasks().forEach(task -> active.add(task(task.taskId())));
                t.standbyTasks().forEach(task -> standby.add(task(task.taskId())));
            }
        } catch (IllegalStateException e) {
            return; // stopped meanwhile
        }
        String fields = "\"state\":" + str(state.name()) + ",\"active\":" + list(active)
                + ",\"standby\":" + list(standby);
        if (!fields.equals(lastTasks)) {
            lastTasks = fields;
            emit("tasks", fields);
        }
    }

    private static String task(TaskId id) {
        return id.subtopology() + "_" + id.partition();
    }

    private static Throwable rootCause(Throwable t) {
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t;
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
        if (s == null) {
            return "null";
        }
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
