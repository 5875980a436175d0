package koord.tests;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * bench/gateway.sh's latency probe, EndToEndLatency's method with microseconds instead of whole
 * milliseconds: COUNT records of SIZE bytes to partition 0 of TOPIC, one at a time; each is sent
 * (acks=all) and waited for until acknowledged, then polled until a consumer assigned to the
 * partition (no group) has it. The first WARMUP records are not counted.
 *
 * <pre>
 * LatencyProbe BOOTSTRAP TOPIC COUNT SIZE WARMUP
 * </pre>
 * Prints one JSON line: {"count", "produce_p50_us", "produce_p99_us", "e2e_p50_us",
 * "e2e_p99_us"}; e2e is from send to the consumer's poll returning the record.
 */
public final class LatencyProbe {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        int size = Integer.parseInt(args[3]);
        int warmup = Integer.parseInt(args[4]);
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("acks", "all");
        pp.put("linger.ms", "0");
        pp.put("key.serializer", ByteArraySerializer.class.getName());
        pp.put("value.serializer", ByteArraySerializer.class.getName());
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("enable.auto.commit", "false");
        cp.put("fetch.min.bytes", "1");
        cp.put("key.deserializer", ByteArrayDeserializer.class.getName());
        cp.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long[] produce = new long[count];
        long[] e2e = new long[count];
        byte[] value = new byte[size];
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp);
             KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            consumer.assign(List.of(tp));
            consumer.seekToEnd(List.of(tp));
            consumer.position(tp);
            for (int i = 0; i < warmup + count; i++) {
                long start = System.nanoTime();
                long offset = producer.send(new ProducerRecord<>(topic, 0, null, value)).get().offset();
                long acked = System.nanoTime();
                boolean seen = false;
                long deadline = acked + 30_000_000_000L;
                while (!seen) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("record " + offset + " not fetched in 30 s");
                    }
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofSeconds(5))) {
                        if (r.offset() == offset) {
                            seen = true;
                        } else if (r.offset() > offset) {
                            throw new IllegalStateException("record " + offset + " skipped");
                        }
                    }
                }
                long got = System.nanoTime();
                if (i >= warmup) {
                    produce[i - warmup] = (acked - start) / 1000;
                    e2e[i - warmup] = (got - start) / 1000;
                }
            }
        }
        Arrays.sort(produce);
        Arrays.sort(e2e);
        System.out.println("{\"count\":" + count + ",\"produce_p50_us\":" + at(produce, 0.50)
                + ",\"produce_p99_us\":" + at(produce, 0.99) + ",\"e2e_p50_us\":" + at(e2e, 0.50)
                + ",\"e2e_p99_us\":" + at(e2e, 0.99) + "}");
    }

    private static long at(long[] sorted, double q) {
        return sorted[Math.min(sorted.length - 1, (int) Math.ceil(q * sorted.length) - 1)];
    }
}
