package koord.tests;

import java.nio.ByteBuffer;
import java.util.List;

import org.apache.kafka.common.message.StreamsGroupDescribeRequestData;
import org.apache.kafka.common.message.StreamsGroupDescribeResponseData;
import org.apache.kafka.common.message.StreamsGroupHeartbeatRequestData;
import org.apache.kafka.common.message.StreamsGroupHeartbeatResponseData;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;

/**
 * Prints the byte vectors of tests/streams_messages.rs: one fully populated message of each
 * streams-group API (KIP-1071) encoded by Kafka 4.4's own generated classes at each version, as
 * "NAME VERSION HEX" lines. The Rust test builds the same messages with the vendored
 * kafka-protocol types and checks that they encode to these bytes and decode back.
 *
 * <pre>java -cp "$(cat target/classpath.txt):target/classes" koord.tests.StreamsVectors</pre>
 */
public final class StreamsVectors {
    public static void main(String[] args) {
        for (short v = 0; v <= 1; v++) {
            print("heartbeat_request", v, heartbeatRequest());
            print("heartbeat_response", v, heartbeatResponse(v));
            print("describe_request", v, describeRequest());
            print("describe_response", v, describeResponse());
        }
    }

    private static void print(String name, short version, Message message) {
        ByteBuffer buf = MessageUtil.toByteBufferAccessor(message, version).buffer();
        StringBuilder hex = new StringBuilder();
        while (buf.hasRemaining()) {
            hex.append(String.format("%02x", buf.get()));
        }
        System.out.println(name + " " + version + " " + hex);
    }

    static StreamsGroupHeartbeatRequestData heartbeatRequest() {
        var tasks = List.of(new StreamsGroupHeartbeatRequestData.TaskIds()
                .setSubtopologyId("0").setPartitions(List.of(0, 2)));
        var changelog = new StreamsGroupHeartbeatRequestData.TopicInfo()
                .setName("app-store-changelog").setPartitions(0).setReplicationFactor((short) 0)
                .setTopicConfigs(List.of(new StreamsGroupHeartbeatRequestData.KeyValue()
                        .setKey("cleanup.policy").setValue("compact")));
        var subtopology = new StreamsGroupHeartbeatRequestData.Subtopology()
                .setSubtopologyId("0")
                .setSourceTopics(List.of("input"))
                .setSourceTopicRegex(List.of("in.*"))
                .setStateChangelogTopics(List.of(changelog))
                .setRepartitionSinkTopics(List.of("app-repartition"))
                .setRepartitionSourceTopics(List.of(new StreamsGroupHeartbeatRequestData.TopicInfo()
                        .setName("app-repartition").setPartitions(4).setReplicationFactor((short) 1)))
                .setCopartitionGroups(List.of(new StreamsGroupHeartbeatRequestData.CopartitionGroup()
                        .setSourceTopics(List.of((short) 0)).setSourceTopicRegex(List.of((short) 0))
                        .setRepartitionSourceTopics(List.of((short) 0))));
        return new StreamsGroupHeartbeatRequestData()
                .setGroupId("app")
                .setMemberId("m-1")
                .setMemberEpoch(0)
                .setEndpointInformationEpoch(3)
                .setInstanceId("i-1")
                .setRackId("r1")
                .setRebalanceTimeoutMs(300000)
                .setTopology(new StreamsGroupHeartbeatRequestData.Topology()
                        .setEpoch(1).setSubtopologies(List.of(subtopology)))
                .setActiveTasks(tasks)
                .setStandbyTasks(List.of())
                .setWarmupTasks(tasks)
                .setProcessId("p-1")
                .setUserEndpoint(new StreamsGroupHeartbeatRequestData.Endpoint()
                        .setHost("localhost").setPort(40000))
                .setClientTags(List.of(new StreamsGroupHeartbeatRequestData.KeyValue()
                        .setKey("zone").setValue("a")))
                .setTaskOffsets(List.of(new StreamsGroupHeartbeatRequestData.TaskOffset()
                        .setSubtopologyId("0").setPartition(2).setOffset(17)))
                .setTaskEndOffsets(List.of(new StreamsGroupHeartbeatRequestData.TaskOffset()
                        .setSubtopologyId("0").setPartition(2).setOffset(99)))
                .setShutdownApplication(true);
    }

    static StreamsGroupHeartbeatResponseData heartbeatResponse(short version) {
        var tasks = List.of(new StreamsGroupHeartbeatResponseData.TaskIds()
                .setSubtopologyId("0").setPartitions(List.of(1, 3)));
        return new StreamsGroupHeartbeatResponseData()
                .setThrottleTimeMs(5)
                .setErrorCode((short) 0)
                .setErrorMessage("ok")
                .setMemberId("m-1")
                .setMemberEpoch(7)
                .setHeartbeatIntervalMs(5000)
                .setAcceptableRecoveryLagLegacy(version == 0 ? 10000 : 0)
                .setTaskOffsetIntervalMs(60000)
                .setAcceptableRecoveryLag(version >= 1 ? 10000L : -1L)
                .setStatus(List.of(new StreamsGroupHeartbeatResponseData.Status()
                        .setStatusCode((byte) 1).setStatusDetail("missing app-repartition")))
                .setActiveTasks(tasks)
                .setStandbyTasks(List.of())
                .setWarmupTasks(tasks)
                .setTopologyDescriptionRequired(version >= 1)
                .setEndpointInformationEpoch(3)
                .setPartitionsByUserEndpoint(List.of(new StreamsGroupHeartbeatResponseData.EndpointToPartitions()
                        .setUserEndpoint(new StreamsGroupHeartbeatResponseData.Endpoint()
                                .setHost("localhost").setPort(40000))
                        .setActivePartitions(List.of(new StreamsGroupHeartbeatResponseData.TopicPartition()
                                .setTopic("input").setPartitions(List.of(1, 3))))
                        .setStandbyPartitions(List.of())));
    }

    static StreamsGroupDescribeRequestData describeRequest() {
        return new StreamsGroupDescribeRequestData()
                .setGroupIds(List.of("app", "other"))
                .setIncludeAuthorizedOperations(true);
    }

    static StreamsGroupDescribeResponseData describeResponse() {
        var tasks = List.of(new StreamsGroupDescribeResponseData.TaskIds()
                .setSubtopologyId("0").setPartitions(List.of(0, 1)));
        var member = new StreamsGroupDescribeResponseData.Member()
                .setMemberId("m-1")
                .setMemberEpoch(7)
                .setInstanceId(null)
                .setRackId("r1")
                .setClientId("app-client")
                .setClientHost("/127.0.0.1")
                .setTopologyEpoch(1)
                .setProcessId("p-1")
                .setUserEndpoint(new StreamsGroupDescribeResponseData.Endpoint()
                        .setHost("localhost").setPort(40000))
                .setClientTags(List.of())
                .setTaskOffsets(List.of(new StreamsGroupDescribeResponseData.TaskOffset()
                        .setSubtopologyId("0").setPartition(0).setOffset(5)))
                .setTaskEndOffsets(List.of())
                .setAssignment(new StreamsGroupDescribeResponseData.Assignment()
                        .setActiveTasks(tasks).setStandbyTasks(List.of()).setWarmupTasks(List.of()))
                .setTargetAssignment(new StreamsGroupDescribeResponseData.Assignment()
                        .setActiveTasks(tasks).setStandbyTasks(List.of()).setWarmupTasks(tasks))
                .setIsClassic(false);
        var subtopology = new StreamsGroupDescribeResponseData.Subtopology()
                .setSubtopologyId("0")
                .setSourceTopics(List.of("input"))
                .setRepartitionSinkTopics(List.of())
                .setStateChangelogTopics(List.of(new StreamsGroupDescribeResponseData.TopicInfo()
                        .setName("app-store-changelog").setPartitions(2).setReplicationFactor((short) 1)
                        .setTopicConfigs(List.of())))
                .setRepartitionSourceTopics(List.of());
        return new StreamsGroupDescribeResponseData()
                .setThrottleTimeMs(0)
                .setGroups(List.of(new StreamsGroupDescribeResponseData.DescribedGroup()
                        .setErrorCode((short) 0)
                        .setGroupId("app")
                        .setGroupState("Stable")
                        .setGroupEpoch(7)
                        .setAssignmentEpoch(7)
                        .setTopology(new StreamsGroupDescribeResponseData.Topology()
                                .setEpoch(1).setSubtopologies(List.of(subtopology)))
                        .setMembers(List.of(member))
                        .setAuthorizedOperations(-2147483648)));
    }
}
