package koord.tests;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Configurable;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

/**
 * A client-side assignor that no coordinator knows (protocol name "koord-custom"), for
 * proto-tests/test_streams.py: the group's leader computes the assignment and every member must
 * get exactly what it computed, user data included. Use it as partition.assignment.strategy of a
 * GroupClient member; it reports through that member's event stream (its client.id is the
 * member's name).
 *
 * The plan is one no balancing assignor makes: members sorted by name (each sends its name as
 * subscription user data), the first gets only the lowest partition, the others share the rest
 * round-robin. Each assignment's user data is "plan=NONCE;for=NAME;member=MEMBER_ID;partitions=P"
 * (NONCE fresh at each assign(), P the partition numbers). Events:
 * {"event":"leader_assigned","plan":NONCE,"assignments":{MEMBER_ID:{"name":..,"partitions":[..],
 * "user_data":..}}} from the leader's assign(), and {"event":"custom_assignment","generation":G,
 * "member_id":..,"partitions":[..],"user_data":..} from every member's onAssignment().
 */
public final class CustomAssignor implements ConsumerPartitionAssignor, Configurable {
    private String name = "?";

    @Override
    public void configure(Map<String, ?> configs) {
        Object id = configs.get("client.id");
        if (id != null) {
            name = id.toString();
        }
    }

    @Override
    public String name() {
        return "koord-custom";
    }

    @Override
    public ByteBuffer subscriptionUserData(Set<String> topics) {
        return ByteBuffer.wrap(name.getBytes(StandardCharsets.UTF_8));
    }

    @Override
    public GroupAssignment assign(Cluster metadata, GroupSubscription group) {
        TreeMap<String, String> byName = new TreeMap<>(); // member name -> member id
        List<TopicPartition> partitions = new ArrayList<>();
        for (Map.Entry<String, Subscription> e : group.groupSubscription().entrySet()) {
            byName.put(text(e.getValue().userData()), e.getKey());
            for (String topic : e.getValue().topics()) {
                for (PartitionInfo p : metadata.partitionsForTopic(topic)) {
                    TopicPartition tp = new TopicPartition(topic, p.partition());
                    if (!partitions.contains(tp)) {
                        partitions.add(tp);
                    }
                }
            }
        }
        partitions.sort((a, b) -> a.topic().equals(b.topic())
                ? Integer.compare(a.partition(), b.partition()) : a.topic().compareTo(b.topic()));
        List<String> names = new ArrayList<>(byName.keySet());
        Map<String, List<TopicPartition>> plan = new TreeMap<>();
        names.forEach(n -> plan.put(n, new ArrayList<>()));
        for (int i = 0; i < partitions.size(); i++) {
            String to = i == 0 || names.size() == 1 ? names.get(0)
                    : names.get(1 + (i - 1) % (names.size() - 1));
            plan.get(to).add(partitions.get(i));
        }
        String nonce = UUID.randomUUID().toString();
        Map<String, Assignment> out = new TreeMap<>();
        List<String> reported = new ArrayList<>();
        plan.forEach((n, tps) -> {
            String memberId = byName.get(n);
            String userData = "plan=" + nonce + ";for=" + n + ";member=" + memberId
                    + ";partitions=" + numbers(tps);
            out.put(memberId, new Assignment(tps,
                    ByteBuffer.wrap(userData.getBytes(StandardCharsets.UTF_8))));
            reported.add(GroupClient.str(memberId) + ":{\"name\":" + GroupClient.str(n)
                    + ",\"partitions\":" + numbers(tps) + ",\"user_data\":"
                    + GroupClient.str(userData) + "}");
        });
        GroupClient.emit(name, "leader_assigned", "\"plan\":" + GroupClient.str(nonce)
                + ",\"assignments\":{" + String.join(",", reported) + "}");
        return new GroupAssignment(out);
    }

    @Override
    public void onAssignment(Assignment assignment, ConsumerGroupMetadata metadata) {
        GroupClient.emit(name, "custom_assignment", "\"generation\":" + metadata.generationId()
                + ",\"member_id\":" + GroupClient.str(metadata.memberId())
                + ",\"partitions\":" + numbers(assignment.partitions())
                + ",\"user_data\":" + GroupClient.str(
                        assignment.userData() == null ? null : text(assignment.userData())));
    }

    private static String text(ByteBuffer b) {
        if (b == null) {
            return null;
        }
        byte[] bytes = new byte[b.remaining()];
        b.duplicate().get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static String numbers(List<TopicPartition> tps) {
        List<Integer> ps = new ArrayList<>();
        tps.forEach(tp -> ps.add(tp.partition()));
        ps.sort(null);
        return ps.toString().replace(" ", "");
    }
}
