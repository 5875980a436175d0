package koord.tests;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Transactions with the Java client, for proto-tests/test_transactions.py (through Client's
 * subcommands):
 *
 * <pre>
 * txn-produce BOOTSTRAP TOPIC TXN_ID TRANSACTIONS PER_TXN
 *             a transactional producer: transaction t writes "t:0".."t:PER_TXN-1" round the
 *             partitions; even t commit, odd t abort. One line per transaction: {"txn", "committed"}
 * consume-committed BOOTSTRAP TOPIC COUNT TIMEOUT_MS
 *             an isolation.level=read_committed consumer, assign() every partition from the start,
 *             until COUNT records or the timeout; one line per record: {"partition", "offset", "value"}
 * </pre>
 */
final class TxnClient {
    private TxnClient() {}

    static void produce(String bootstrap, String topic, String txnId, int transactions, int perTxn)
            throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            int partitions = producer.partitionsFor(topic).size();
            for (int t = 0; t < transactions; t++) {
                producer.beginTransaction();
                for (int i = 0; i < perTxn; i++) {
                    producer.send(new ProducerRecord<>(topic, i % partitions, null, t + ":" + i));
                }
                producer.flush();
                boolean commit = t % 2 == 0;
                if (commit) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                Client.print(Client.obj("txn", t, "committed", commit));
            }
        }
    }

    static void consumeCommitted(String bootstrap, String topic, int count, long timeoutMs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("isolation.level", "read_committed");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> parts = new ArrayList<>();
            consumer.partitionsFor(topic).forEach(i -> parts.add(new TopicPartition(topic, i.partition())));
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            long deadline = System.currentTimeMillis() + timeoutMs;
            int seen = 0;
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    Client.print(Client.obj("partition", r.partition(), "offset", r.offset(), "value", r.value()));
                    seen++;
                }
            }
            Map<TopicPartition, Long> ends = consumer.endOffsets(parts);
            StringBuilder sb = new StringBuilder();
            ends.forEach((tp, o) -> sb.append(sb.length() == 0 ? "" : ",").append('"').append(tp.partition())
                    .append("\":").append(o));
            Client.print("{\"end_offsets\":{" + sb + "}}");
        }
    }
}
