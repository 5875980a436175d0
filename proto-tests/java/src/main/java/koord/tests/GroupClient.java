package koord.tests;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;

import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Consumer-group members for proto-tests/test_groups*.py: one JVM hosts any number of
 * KafkaConsumers, each on its own thread, driven by commands on stdin (one per line):
 *
 * <pre>
 * start NAME BOOTSTRAP GROUP TOPIC [--commit] [--stop-after=N] [KEY=VALUE...]
 *         a consumer subscribed to TOPIC; KEY=VALUE are consumer properties. --regex=RE: subscribed
 *         instead to the topics matching RE, resolved by the coordinator (KIP-848
 *         SubscriptionPattern; needs group.protocol=consumer). --commit: commitSync
 *         after every non-empty poll. --stop-after=N: close (cleanly) once N records are consumed.
 *         --print: every "records" event also lists the records themselves (see below).
 * status NAME    the member answers with its generation, member id and assignment
 * close NAME     consumer.close(): a dynamic member sends LeaveGroup
 * </pre>
 *
 * End of stdin closes every member, then the process exits 0. Every event is one JSON line on
 * stdout, {"member": NAME, "event": ..., ...}:
 * assigned / revoked / lost (from the ConsumerRebalanceListener: "partitions" the callback got,
 * "assignment" the member holds once the callback is done, "generation", "member_id",
 * "instance_id"), records ("ranges": [[partition, first offset, last offset, count], ...] of one
 * poll; with --print also "records": [[partition, offset, key, value, [[header key, value],
 * ...]], ...], keys and values as UTF-8 strings), committed ("offsets": {partition: next
 * offset}), commit_failed, status, closed
 * ("consumed"), error. Every event also carries "ts_ms", the JVM's wall clock when it was emitted
 * (for a callback: while it runs), so that tests can time what a member saw.
 * Client logs go to stderr.
 */
public final class GroupClient {
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);

    public static void main(String[] args) throws Exception {
        Map<String, Member> members = new LinkedHashMap<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] w = line.trim().split("\\s+");
            switch (w[0]) {
                case "start" -> {
                    try {
                        Member m = new Member(w);
                        members.put(m.name, m);
                        m.thread.start();
                    } catch (Exception e) {
                        emit(w[1], "error", "\"error\":" + str(e.getClass().getSimpleName())
                                + ",\"message\":" + str(String.valueOf(e.getMessage())));
                    }
                }
                case "status", "close" -> members.get(w[1]).commands.add(w[0]);
                case "" -> { }
                default -> emit("-", "error", "\"message\":" + str("unknown command: " + line));
            }
        }
        for (Member m : members.values()) {
            m.commands.add("close");
        }
        for (Member m : members.values()) {
            m.thread.join();
        }
        OUT.flush();
        System.exit(0);
    }

    /** One consumer and the thread that polls it; commands reach it through a queue. */
    static final class Member implements ConsumerRebalanceListener {
        final String name;
        final String topic;
        final KafkaConsumer<byte[], byte[]> consumer;
        final Thread thread;
        final ConcurrentLinkedQueue<String> commands = new ConcurrentLinkedQueue<>();
        boolean commit;
        boolean print;
        long stopAfter = Long.MAX_VALUE;
        long consumed;
        String regex;
        /** Offsets whose commit a rebalance in progress deferred; see {@link #commit}. */
        final Map<TopicPartition, OffsetAndMetadata> deferred = new LinkedHashMap<>();

        Member(String[] w) {
            name = w[1];
            topic = w[4];
            Properties p = new Properties();
            p.put("bootstrap.servers", w[2]);
            p.put("group.id", w[3]);
            p.put("client.id", name);
            p.put("group.protocol", "classic");
            p.put("enable.auto.commit", "false");
            p.put("auto.offset.reset", "earliest");
            p.put("key.deserializer", ByteArrayDeserializer.class.getName());
            p.put("value.deserializer", ByteArrayDeserializer.class.getName());
            for (String arg : List.of(w).subList(5, w.length)) {
                if (arg.equals("--commit")) {
                    commit = true;
                } else if (arg.equals("--print")) {
                    print = true;
                } else if (arg.startsWith("--regex=")) {
                    regex = arg.substring("--regex=".length());
                } else if (arg.startsWith("--stop-after=")) {
                    stopAfter = Long.parseLong(arg.substring("--stop-after=".length()));
                } else {
                    int eq = arg.indexOf('=');
                    p.put(arg.substring(0, eq), arg.substring(eq + 1));
                }
            }
            consumer = new KafkaConsumer<>(p);
            thread = new Thread(this::run, name);
        }

        void run() {
            try {
                if (regex != null) {
                    consumer.subscribe(new SubscriptionPattern(regex), this);
                } else {
                    consumer.subscribe(List.of(topic), this);
                }
                while (true) {
                    String command = commands.poll();
                    if ("close".equals(command) || consumed >= stopAfter) {
                        break;
                    }
                    if ("status".equals(command)) {
                        emit(name, "status", groupFields() + ",\"assignment\":"
                                + partitions(consumer.assignment()) + ",\"topic_partitions\":"
                                + topicPartitions(consumer.assignment()));
                    }
                    poll();
                }
                consumer.close();
                emit(name, "closed", "\"consumed\":" + consumed);
            } catch (Exception e) {
                emit(name, "error", "\"error\":" + str(e.getClass().getSimpleName())
                        + ",\"message\":" + str(String.valueOf(e.getMessage())));
            }
        }

        void poll() {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
            if (records.isEmpty()) {
                if (commit && !deferred.isEmpty()) {
                    commit(Map.of());
                }
                return;
            }
            List<String> ranges = new ArrayList<>();
            Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
            for (TopicPartition tp : records.partitions()) {
                List<ConsumerRecord<byte[], byte[]>> rs = records.records(tp);
                long first = rs.get(0).offset();
                long last = rs.get(rs.size() - 1).offset();
                ranges.add("[" + tp.partition() + "," + first + "," + last + "," + rs.size() + "]");
                offsets.put(tp, new OffsetAndMetadata(last + 1));
            }
            consumed += records.count();
            emit(name, "records", "\"ranges\":[" + String.join(",", ranges) + "]"
                    + (print ? ",\"records\":" + printed(records) : ""));
            if (commit) {
                commit(offsets);
            }
        }

        /**
         * Commits these offsets, after any a rebalance deferred. A commit the client refuses
         * while a cooperative rebalance runs (RebalanceInProgressException), or a consumer-
         * protocol commit whose member epoch moved on meanwhile, is no failure: as the
         * exception asks, its offsets are committed after the next poll, or when their
         * partitions are revoked.
         */
        void commit(Map<TopicPartition, OffsetAndMetadata> offsets) {
            Map<TopicPartition, OffsetAndMetadata> all = new LinkedHashMap<>(deferred);
            all.putAll(offsets);
            deferred.clear();
            try {
                consumer.commitSync(all);
                emitCommitted(all);
            } catch (RebalanceInProgressException e) {
                deferred.putAll(all);
            } catch (CommitFailedException e) {
                // The consumer protocol's STALE_MEMBER_EPOCH: the member's epoch moved on while
                // the commit was in flight, and it "must retry after receiving its updated
                // member epoch" (the client's own words; it has no exception class of its own).
                if (String.valueOf(e.getMessage()).contains("stale member epoch")) {
                    deferred.putAll(all);
                } else {
                    emitCommitFailed(e);
                }
            } catch (Exception e) {
                emitCommitFailed(e);
            }
        }

        private void emitCommitted(Map<TopicPartition, OffsetAndMetadata> offsets) {
            List<String> committed = new ArrayList<>();
            offsets.forEach((tp, o) ->
                    committed.add(str(String.valueOf(tp.partition())) + ":" + o.offset()));
            emit(name, "committed", "\"offsets\":{" + String.join(",", committed) + "}");
        }

        private void emitCommitFailed(Exception e) {
            emit(name, "commit_failed", "\"error\":" + str(e.getClass().getSimpleName())
                    + ",\"message\":" + str(String.valueOf(e.getMessage())));
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            callback("assigned", partitions, consumer.assignment());
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            Map<TopicPartition, OffsetAndMetadata> leaving = new LinkedHashMap<>();
            for (TopicPartition tp : partitions) {
                OffsetAndMetadata o = deferred.remove(tp);
                if (o != null) {
                    leaving.put(tp, o);
                }
            }
            if (!leaving.isEmpty()) {
                try {
                    consumer.commitSync(leaving);
                    emitCommitted(leaving);
                } catch (Exception e) {
                    emitCommitFailed(e);
                }
            }
            callback("revoked", partitions, without(consumer.assignment(), partitions));
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            deferred.keySet().removeAll(partitions);
            callback("lost", partitions, without(consumer.assignment(), partitions));
        }

        private void callback(String event, Collection<TopicPartition> partitions,
                              Collection<TopicPartition> assignment) {
            emit(name, event, "\"partitions\":" + partitions(partitions) + ",\"assignment\":"
                    + partitions(assignment) + "," + groupFields());
        }

        private String groupFields() {
            var g = consumer.groupMetadata();
            return "\"generation\":" + g.generationId() + ",\"member_id\":" + str(g.memberId())
                    + ",\"instance_id\":" + str(g.groupInstanceId().orElse(null));
        }
    }

    /** [[partition, offset, key, value, [[header key, value], ...]], ...] of one poll. */
    private static String printed(ConsumerRecords<byte[], byte[]> records) {
        List<String> out = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : records) {
            List<String> headers = new ArrayList<>();
            r.headers().forEach(h -> headers.add("[" + str(h.key()) + "," + utf8(h.value()) + "]"));
            out.add("[" + r.partition() + "," + r.offset() + "," + utf8(r.key()) + ","
                    + utf8(r.value()) + ",[" + String.join(",", headers) + "]]");
        }
        return "[" + String.join(",", out) + "]";
    }

    private static String utf8(byte[] b) {
        return b == null ? "null" : str(new String(b, StandardCharsets.UTF_8));
    }

    private static List<TopicPartition> without(Collection<TopicPartition> all,
                                                Collection<TopicPartition> gone) {
        List<TopicPartition> rest = new ArrayList<>(all);
        rest.removeAll(gone);
        return rest;
    }

    /** ["topic:partition", ...], sorted: the assignment of a member with several topics. */
    private static String topicPartitions(Collection<TopicPartition> tps) {
        TreeSet<String> ps = new TreeSet<>();
        tps.forEach(tp -> ps.add(str(tp.topic() + ":" + tp.partition())));
        return ps.toString().replace(" ", "");
    }

    private static String partitions(Collection<TopicPartition> tps) {
        TreeSet<Integer> ps = new TreeSet<>();
        tps.forEach(tp -> ps.add(tp.partition()));
        return ps.toString().replace(" ", "");
    }

    static synchronized void emit(String member, String event, String fields) {
        OUT.println("{\"member\":" + str(member) + ",\"event\":" + str(event)
                + ",\"ts_ms\":" + System.currentTimeMillis()
                + (fields.isEmpty() ? "" : "," + fields) + "}");
        OUT.flush();
    }

    static String str(String s) {
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
