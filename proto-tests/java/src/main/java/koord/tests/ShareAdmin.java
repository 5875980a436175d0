package koord.tests;

import static koord.tests.ShareMember.kv;
import static koord.tests.ShareMember.str;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Share-group administration through the Java Admin client, for test_share_groups.py. One
 * command per JVM, JSON lines on stdout; a failure prints {"error": ExceptionClass, "message"}
 * and exits 1.
 *
 * <pre>
 * ShareAdmin set-config BOOTSTRAP GROUP KEY=VALUE...
 *     incrementalAlterConfigs(SET) on ConfigResource(GROUP, GROUP), then describeConfigs of it:
 *     {"configs": {KEY: VALUE, ...}} (the group's configs as described, every key); with no
 *     KEY=VALUE it only describes them
 * ShareAdmin describe BOOTSTRAP GROUP
 *     describeShareGroups: {"group", "state", "group_epoch", "assignment_epoch", "coordinator",
 *     "members": [{"member_id", "client_id", "host", "member_epoch", "assignment": ["t-p",..]}]}
 * ShareAdmin list BOOTSTRAP
 *     listGroups(ListGroupsOptions.forShareGroups()) and listGroups() (every type):
 *     {"share": [{"group", "type", "state", "protocol"}], "all": [...]}
 * ShareAdmin offsets BOOTSTRAP GROUP
 *     listShareGroupOffsets (every partition the group has state for):
 *     {"offsets": {"t-p": {"start_offset", "lag"}}}
 * </pre>
 */
public final class ShareAdmin {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

    public static void main(String[] args) {
        int code = 0;
        Properties p = new Properties();
        p.put("bootstrap.servers", args[1]);
        p.put("client.id", "koord-share-admin");
        try (Admin admin = Admin.create(p)) {
            switch (args[0]) {
                case "set-config" -> setConfig(admin, args[2], List.of(args).subList(3, args.length));
                case "describe" -> describe(admin, args[2]);
                case "list" -> list(admin);
                case "offsets" -> offsets(admin, args[2]);
                default -> throw new IllegalArgumentException("unknown subcommand; see ShareAdmin.java");
            }
        } catch (Exception e) {
            Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            OUT.println("{" + kv("error", t.getClass().getSimpleName()) + ","
                    + kv("message", String.valueOf(t.getMessage())) + "}");
            code = 1;
        }
        OUT.flush();
        System.exit(code);
    }

    static void setConfig(Admin admin, String group, List<String> kvs) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        List<AlterConfigOp> ops = new ArrayList<>();
        for (String s : kvs) {
            int eq = s.indexOf('=');
            ops.add(new AlterConfigOp(new ConfigEntry(s.substring(0, eq), s.substring(eq + 1)),
                    AlterConfigOp.OpType.SET));
        }
        if (!ops.isEmpty()) {
            admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get();
        }
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        List<String> entries = new ArrayList<>();
        config.entries().stream().sorted(Comparator.comparing(ConfigEntry::name))
                .forEach(e -> entries.add(kv(e.name(), e.value())));
        OUT.println("{\"configs\":{" + String.join(",", entries) + "}}");
    }

    static void describe(Admin admin, String group) throws Exception {
        ShareGroupDescription d = admin.describeShareGroups(List.of(group)).describedGroups().get(group).get();
        List<String> members = new ArrayList<>();
        for (ShareMemberDescription m : d.members()) {
            List<String> parts = new ArrayList<>();
            m.assignment().topicPartitions().stream()
                    .sorted(Comparator.comparing(TopicPartition::toString))
                    .forEach(tp -> parts.add(str(tp.toString())));
            members.add("{" + kv("member_id", m.consumerId()) + "," + kv("client_id", m.clientId()) + ","
                    + kv("host", m.host()) + "," + kv("member_epoch", m.memberEpoch())
                    + ",\"assignment\":[" + String.join(",", parts) + "]}");
        }
        OUT.println("{" + kv("group", d.groupId()) + "," + kv("state", String.valueOf(d.groupState())) + ","
                + kv("group_epoch", d.groupEpoch()) + "," + kv("assignment_epoch", d.targetAssignmentEpoch())
                + "," + kv("coordinator", d.coordinator() == null ? null : d.coordinator().id())
                + ",\"members\":[" + String.join(",", members) + "]}");
    }

    static void list(Admin admin) throws Exception {
        String share = listings(admin.listGroups(ListGroupsOptions.forShareGroups()).all().get());
        String all = listings(admin.listGroups().all().get());
        OUT.println("{\"share\":" + share + ",\"all\":" + all + "}");
    }

    private static String listings(java.util.Collection<GroupListing> groups) {
        List<String> out = new ArrayList<>();
        for (GroupListing g : groups) {
            out.add("{" + kv("group", g.groupId()) + ","
                    + kv("type", g.type().map(Object::toString).orElse(null)) + ","
                    + kv("state", g.groupState().map(Object::toString).orElse(null)) + ","
                    + kv("protocol", g.protocol()) + "}");
        }
        return "[" + String.join(",", out) + "]";
    }

    static void offsets(Admin admin, String group) throws Exception {
        Map<TopicPartition, SharePartitionOffsetInfo> res = admin
                .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                .partitionsToOffsetInfo(group).get();
        List<String> out = new ArrayList<>();
        res.entrySet().stream().sorted(Comparator.comparing(e -> e.getKey().toString())).forEach(e -> {
            SharePartitionOffsetInfo i = e.getValue();
            out.add(str(e.getKey().toString()) + ":{"
                    + kv("start_offset", i == null ? null : i.startOffset()) + ","
                    + kv("lag", i == null ? null : i.lag().orElse(null)) + "}");
        });
        OUT.println("{\"offsets\":{" + String.join(",", out) + "}}");
    }
}
