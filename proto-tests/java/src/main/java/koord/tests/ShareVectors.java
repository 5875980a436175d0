package koord.tests;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.message.DescribeShareGroupOffsetsRequestData;
import org.apache.kafka.common.message.DescribeShareGroupOffsetsResponseData;
import org.apache.kafka.common.message.ReadShareGroupStateSummaryRequestData;
import org.apache.kafka.common.message.ReadShareGroupStateSummaryResponseData;
import org.apache.kafka.common.message.ShareAcknowledgeRequestData;
import org.apache.kafka.common.message.ShareAcknowledgeResponseData;
import org.apache.kafka.common.message.ShareFetchRequestData;
import org.apache.kafka.common.message.ShareFetchResponseData;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.record.internal.MemoryRecords;

/**
 * Prints the byte vectors of tests/share_messages.rs: one fully populated message of each
 * share-group message koord regenerated from Kafka 4.4's definitions (vendor/README.md),
 * encoded by Kafka 4.4's own generated classes at each version, as "NAME VERSION HEX" lines.
 * The Rust test builds the same messages with the vendored kafka-protocol types and checks that
 * they encode to these bytes and decode back. A last line records that Kafka refuses to write a
 * ShareFetch v1 with IsRenewAck set (not ignorable), which the Rust test checks of the crate too.
 *
 * <pre>java -cp "$(cat target/classpath.txt):target/classes" koord.tests.ShareVectors</pre>
 */
public final class ShareVectors {
    static final Uuid TOPIC_A = new Uuid(0x0123456789abcdefL, 0x0fedcba987654321L);
    static final Uuid TOPIC_B = new Uuid(0x1111111111111111L, 0x2222222222222222L);
    /** Opaque bytes for the records field: neither side parses them. */
    static final byte[] RECORDS = "not-a-real-batch".getBytes(StandardCharsets.US_ASCII);

    public static void main(String[] args) {
        for (short v = 1; v <= 2; v++) {
            print("share_fetch_request", v, shareFetchRequest(v));
            print("share_fetch_response", v, shareFetchResponse());
            print("share_acknowledge_request", v, shareAcknowledgeRequest(v));
            print("share_acknowledge_response", v, shareAcknowledgeResponse(v));
        }
        for (short v = 0; v <= 1; v++) {
            print("describe_offsets_request", v, describeOffsetsRequest());
            print("describe_offsets_response", v, describeOffsetsResponse(v));
            print("read_summary_request", v, readSummaryRequest());
            print("read_summary_response", v, readSummaryResponse(v));
        }
        try {
            MessageUtil.toByteBufferAccessor(shareFetchRequest((short) 2), (short) 1);
            System.out.println("share_fetch_request_renew_ack 1 written");
        } catch (UnsupportedVersionException e) {
            System.out.println("share_fetch_request_renew_ack 1 refused");
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

    static ShareFetchRequestData shareFetchRequest(short version) {
        var batches = List.of(
                new ShareFetchRequestData.AcknowledgementBatch()
                        .setFirstOffset(10).setLastOffset(12)
                        .setAcknowledgeTypes(List.of((byte) 1, (byte) 0, (byte) 2)),
                new ShareFetchRequestData.AcknowledgementBatch()
                        .setFirstOffset(13).setLastOffset(13)
                        .setAcknowledgeTypes(List.of(version >= 2 ? (byte) 4 : (byte) 3)));
        var partitions = new ShareFetchRequestData.FetchPartitionCollection(List.of(
                new ShareFetchRequestData.FetchPartition()
                        .setPartitionIndex(0).setAcknowledgementBatches(batches),
                new ShareFetchRequestData.FetchPartition()
                        .setPartitionIndex(3).setAcknowledgementBatches(List.of())).iterator());
        return new ShareFetchRequestData()
                .setGroupId("sg")
                .setMemberId("m-1")
                .setShareSessionEpoch(2)
                .setMaxWaitMs(500)
                .setMinBytes(1)
                .setMaxBytes(52428800)
                .setMaxRecords(500)
                .setBatchSize(100)
                .setShareAcquireMode(version >= 2 ? (byte) 1 : (byte) 0)
                .setIsRenewAck(version >= 2)
                .setTopics(new ShareFetchRequestData.FetchTopicCollection(List.of(
                        new ShareFetchRequestData.FetchTopic()
                                .setTopicId(TOPIC_A).setPartitions(partitions)).iterator()))
                .setForgottenTopicsData(List.of(new ShareFetchRequestData.ForgottenTopic()
                        .setTopicId(TOPIC_B).setPartitions(List.of(1, 2))));
    }

    static ShareFetchResponseData shareFetchResponse() {
        var partitions = List.of(
                new ShareFetchResponseData.PartitionData()
                        .setPartitionIndex(0)
                        .setErrorCode((short) 0)
                        .setErrorMessage(null)
                        .setAcknowledgeErrorCode((short) 0)
                        .setAcknowledgeErrorMessage(null)
                        .setCurrentLeader(new ShareFetchResponseData.LeaderIdAndEpoch()
                                .setLeaderId(1).setLeaderEpoch(5))
                        .setRecords(MemoryRecords.readableRecords(ByteBuffer.wrap(RECORDS)))
                        .setAcquiredRecords(List.of(new ShareFetchResponseData.AcquiredRecords()
                                .setFirstOffset(14).setLastOffset(20).setDeliveryCount((short) 1))),
                new ShareFetchResponseData.PartitionData()
                        .setPartitionIndex(3)
                        .setErrorCode((short) 6)
                        .setErrorMessage("not leader")
                        .setAcknowledgeErrorCode((short) 121)
                        .setAcknowledgeErrorMessage("invalid record state")
                        .setCurrentLeader(new ShareFetchResponseData.LeaderIdAndEpoch()
                                .setLeaderId(2).setLeaderEpoch(6))
                        .setRecords(MemoryRecords.EMPTY)
                        .setAcquiredRecords(List.of()));
        return new ShareFetchResponseData()
                .setThrottleTimeMs(7)
                .setErrorCode((short) 0)
                .setErrorMessage(null)
                .setAcquisitionLockTimeoutMs(30000)
                .setResponses(new ShareFetchResponseData.ShareFetchableTopicResponseCollection(List.of(
                        new ShareFetchResponseData.ShareFetchableTopicResponse()
                                .setTopicId(TOPIC_A).setPartitions(partitions)).iterator()))
                .setNodeEndpoints(new ShareFetchResponseData.NodeEndpointCollection(List.of(
                        new ShareFetchResponseData.NodeEndpoint()
                                .setNodeId(2).setHost("broker-2").setPort(9092).setRack("r2"),
                        new ShareFetchResponseData.NodeEndpoint()
                                .setNodeId(3).setHost("broker-3").setPort(9093).setRack(null)).iterator()));
    }

    static ShareAcknowledgeRequestData shareAcknowledgeRequest(short version) {
        var batches = List.of(new ShareAcknowledgeRequestData.AcknowledgementBatch()
                .setFirstOffset(14).setLastOffset(16)
                .setAcknowledgeTypes(List.of((byte) 1, version >= 2 ? (byte) 4 : (byte) 2, (byte) 3)));
        return new ShareAcknowledgeRequestData()
                .setGroupId("sg")
                .setMemberId("m-1")
                .setShareSessionEpoch(3)
                .setIsRenewAck(version >= 2)
                .setTopics(new ShareAcknowledgeRequestData.AcknowledgeTopicCollection(List.of(
                        new ShareAcknowledgeRequestData.AcknowledgeTopic()
                                .setTopicId(TOPIC_A)
                                .setPartitions(new ShareAcknowledgeRequestData.AcknowledgePartitionCollection(List.of(
                                        new ShareAcknowledgeRequestData.AcknowledgePartition()
                                                .setPartitionIndex(0)
                                                .setAcknowledgementBatches(batches)).iterator()))).iterator()));
    }

    static ShareAcknowledgeResponseData shareAcknowledgeResponse(short version) {
        return new ShareAcknowledgeResponseData()
                .setThrottleTimeMs(0)
                .setErrorCode((short) 0)
                .setErrorMessage(null)
                .setAcquisitionLockTimeoutMs(version >= 2 ? 15000 : 0)
                .setResponses(new ShareAcknowledgeResponseData.ShareAcknowledgeTopicResponseCollection(List.of(
                        new ShareAcknowledgeResponseData.ShareAcknowledgeTopicResponse()
                                .setTopicId(TOPIC_A)
                                .setPartitions(List.of(
                                        new ShareAcknowledgeResponseData.PartitionData()
                                                .setPartitionIndex(0).setErrorCode((short) 0).setErrorMessage(null)
                                                .setCurrentLeader(new ShareAcknowledgeResponseData.LeaderIdAndEpoch()
                                                        .setLeaderId(1).setLeaderEpoch(5)),
                                        new ShareAcknowledgeResponseData.PartitionData()
                                                .setPartitionIndex(3).setErrorCode((short) 6).setErrorMessage("not leader")
                                                .setCurrentLeader(new ShareAcknowledgeResponseData.LeaderIdAndEpoch()
                                                        .setLeaderId(2).setLeaderEpoch(6))))).iterator()))
                .setNodeEndpoints(new ShareAcknowledgeResponseData.NodeEndpointCollection(List.of(
                        new ShareAcknowledgeResponseData.NodeEndpoint()
                                .setNodeId(2).setHost("broker-2").setPort(9092).setRack(null)).iterator()));
    }

    static DescribeShareGroupOffsetsRequestData describeOffsetsRequest() {
        return new DescribeShareGroupOffsetsRequestData()
                .setGroups(List.of(
                        new DescribeShareGroupOffsetsRequestData.DescribeShareGroupOffsetsRequestGroup()
                                .setGroupId("sg")
                                .setTopics(List.of(new DescribeShareGroupOffsetsRequestData.DescribeShareGroupOffsetsRequestTopic()
                                        .setTopicName("orders").setPartitions(List.of(0, 1)))),
                        new DescribeShareGroupOffsetsRequestData.DescribeShareGroupOffsetsRequestGroup()
                                .setGroupId("all")
                                .setTopics(null)));
    }

    static DescribeShareGroupOffsetsResponseData describeOffsetsResponse(short version) {
        return new DescribeShareGroupOffsetsResponseData()
                .setThrottleTimeMs(0)
                .setGroups(List.of(
                        new DescribeShareGroupOffsetsResponseData.DescribeShareGroupOffsetsResponseGroup()
                                .setGroupId("sg")
                                .setTopics(List.of(new DescribeShareGroupOffsetsResponseData.DescribeShareGroupOffsetsResponseTopic()
                                        .setTopicName("orders")
                                        .setTopicId(TOPIC_A)
                                        .setPartitions(List.of(
                                                new DescribeShareGroupOffsetsResponseData.DescribeShareGroupOffsetsResponsePartition()
                                                        .setPartitionIndex(0).setStartOffset(21).setLeaderEpoch(5)
                                                        .setLag(version >= 1 ? 42L : -1L)
                                                        .setErrorCode((short) 0).setErrorMessage(null),
                                                new DescribeShareGroupOffsetsResponseData.DescribeShareGroupOffsetsResponsePartition()
                                                        .setPartitionIndex(1).setStartOffset(-1).setLeaderEpoch(-1)
                                                        .setLag(-1L)
                                                        .setErrorCode((short) 3).setErrorMessage("unknown partition")))))
                                .setErrorCode((short) 0)
                                .setErrorMessage(null),
                        new DescribeShareGroupOffsetsResponseData.DescribeShareGroupOffsetsResponseGroup()
                                .setGroupId("gone")
                                .setTopics(List.of())
                                .setErrorCode((short) 69)
                                .setErrorMessage("group id not found")));
    }

    static ReadShareGroupStateSummaryRequestData readSummaryRequest() {
        return new ReadShareGroupStateSummaryRequestData()
                .setGroupId("sg")
                .setTopics(List.of(new ReadShareGroupStateSummaryRequestData.ReadStateSummaryData()
                        .setTopicId(TOPIC_A)
                        .setPartitions(List.of(
                                new ReadShareGroupStateSummaryRequestData.PartitionData()
                                        .setPartition(0).setLeaderEpoch(5),
                                new ReadShareGroupStateSummaryRequestData.PartitionData()
                                        .setPartition(1).setLeaderEpoch(-1)))));
    }

    static ReadShareGroupStateSummaryResponseData readSummaryResponse(short version) {
        return new ReadShareGroupStateSummaryResponseData()
                .setResults(List.of(new ReadShareGroupStateSummaryResponseData.ReadStateSummaryResult()
                        .setTopicId(TOPIC_A)
                        .setPartitions(List.of(
                                new ReadShareGroupStateSummaryResponseData.PartitionResult()
                                        .setPartition(0).setErrorCode((short) 0).setErrorMessage(null)
                                        .setStateEpoch(2).setLeaderEpoch(5).setStartOffset(21)
                                        .setDeliveryCompleteCount(version >= 1 ? 3 : -1),
                                new ReadShareGroupStateSummaryResponseData.PartitionResult()
                                        .setPartition(1).setErrorCode((short) 16).setErrorMessage("not coordinator")
                                        .setStateEpoch(0).setLeaderEpoch(-1).setStartOffset(-1)
                                        .setDeliveryCompleteCount(-1)))));
    }
}
