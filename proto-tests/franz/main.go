// Command franz-member is one consumer-group member built on franz-go (pkg/kgo), the Go Kafka
// client, for the proto-tests (test_franz.py drives it through groups_util.FranzMember).
//
// franz-go is here because it reads JoinGroup v9's SkipAssignment as Apache Kafka means it
// (KIP-814: a static leader replaced while the group is Stable): a leader told to skip still
// computes its own plan with its balancer, and rejoins when the assignment SyncGroup hands it
// differs from that plan byte for byte. A coordinator that sets the flag for every leader of a
// group it assigns itself therefore sends a franz-go group into an endless rebalance (issue 24).
//
// It joins the group with one balancer (range, roundrobin, sticky or cooperative-sticky),
// consumes the topic (with -regex, every topic matching -topic as a regular expression) from
// the earliest offset (with -from-end, the latest), commits what it consumed after every poll and in
// its revoke callback, and on SIGTERM (or SIGINT) stops polling, commits and leaves the group
// (kgo.Client.Close). It prints one JSON object per line on stdout, in the shape of the Java
// GroupClient's events:
//
//	{"member": NAME, "event": "assigned"|"revoked"|"lost", "partitions": [...],
//	 "assignment": [...], "generation": G, "member_id": ID, ...}
//	{"event": "records", "ranges": [[partition, first offset, last offset, count], ...],
//	 "topics": [the topic of each range, ...]}
//	{"event": "metadata", "internal": [topics Metadata marks internal], "topic_count": N}
//	{"event": "committed", "offsets": {"partition": next offset, ...}}
//	{"event": "commit_failed", "error": ...}, {"event": "started"}, {"event": "closed",
//	 "consumed": N}, {"event": "error", "error": ..., "message": ...}
//
// "partitions" is what the callback was given of -topic ("topics": every topic it was given),
// "assignment" what the member holds once it is done (franz-go hands a cooperative member only
// what it gains or loses). Every event carries
// "member", "client" ("franz-go"), "generation" and "member_id" as kgo.Client.GroupMetadata
// reports them at that moment, and "ts_ms" (wall clock, epoch ms). franz-go's own log (info)
// goes to stderr. Exit code 0 after a clean leave, 1 on an error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var balancers = map[string]func() kgo.GroupBalancer{
	"range":              kgo.RangeBalancer,
	"roundrobin":         kgo.RoundRobinBalancer,
	"sticky":             kgo.StickyBalancer,
	"cooperative-sticky": kgo.CooperativeStickyBalancer,
}

type member struct {
	name  string
	topic string
	cl    *kgo.Client

	mu       sync.Mutex // serialises output lines and guards owned
	owned    map[int32]bool
	consumed int
}

func (m *member) emit(event string, fields map[string]any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.emitLocked(event, fields)
}

func (m *member) emitLocked(event string, fields map[string]any) {
	out := map[string]any{"member": m.name, "event": event, "client": "franz-go",
		"ts_ms": time.Now().UnixMilli()}
	if m.cl != nil {
		id, gen := m.cl.GroupMetadata()
		out["member_id"], out["generation"] = id, gen
	}
	for k, v := range fields {
		out[k] = v
	}
	line, err := json.Marshal(out)
	if err != nil {
		panic(err)
	}
	os.Stdout.Write(append(line, '\n'))
}

func sorted(ps []int32) []int32 {
	out := append([]int32{}, ps...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// callback reports one rebalance callback: `event` with the partitions of our topic it was
// given, and what we hold afterwards.
func (m *member) callback(event string, ps map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	given := sorted(ps[m.topic])
	topics := make([]string, 0, len(ps))
	for t := range ps {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, p := range given {
		if event == "assigned" {
			m.owned[p] = true
		} else {
			delete(m.owned, p)
		}
	}
	held := make([]int32, 0, len(m.owned))
	for p := range m.owned {
		held = append(held, p)
	}
	m.emitLocked(event, map[string]any{"partitions": given, "assignment": sorted(held),
		"topics": topics})
}

// reportInternalTopics asks the cluster for every topic's metadata and reports those it marks
// internal: {"event": "metadata", "internal": [...], "topic_count": N}.
func (m *member) reportInternalTopics(ctx context.Context) {
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, m.cl)
	if err != nil {
		m.emit("client_error", map[string]any{"error": err.Error()})
		return
	}
	internal := []string{}
	for _, t := range resp.Topics {
		if t.IsInternal && t.Topic != nil {
			internal = append(internal, *t.Topic)
		}
	}
	sort.Strings(internal)
	m.emit("metadata", map[string]any{"internal": internal, "topic_count": len(resp.Topics)})
}

// commit commits what has been polled and not yet committed, and reports it.
func (m *member) commit(ctx context.Context) {
	offsets := m.cl.UncommittedOffsets()
	if len(offsets) == 0 {
		return
	}
	m.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest,
		resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			m.emit("commit_failed", map[string]any{"error": err.Error()})
			return
		}
		done := map[string]int64{}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					m.emit("commit_failed", map[string]any{"partition": p.Partition,
						"error_code": p.ErrorCode})
					continue
				}
				done[strconv.Itoa(int(p.Partition))] = offsets[t.Topic][p.Partition].Offset
			}
		}
		if len(done) > 0 {
			m.emit("committed", map[string]any{"offsets": done})
		}
	})
}

func main() {
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "bootstrap server")
	group := flag.String("group", "", "consumer group id")
	topic := flag.String("topic", "", "topic to consume")
	balancer := flag.String("balancer", "range", "range, roundrobin, sticky or cooperative-sticky")
	name := flag.String("name", "m", "member name in the output (also the client id)")
	sessionMs := flag.Int("session-ms", 6000, "session.timeout.ms")
	heartbeatMs := flag.Int("heartbeat-ms", 500, "heartbeat interval, ms")
	rebalanceMs := flag.Int("rebalance-ms", 20000, "rebalance.timeout.ms")
	regex := flag.Bool("regex", false, "-topic is a regular expression (kgo.ConsumeRegex)")
	fromEnd := flag.Bool("from-end", false, "partitions without a committed offset start at the end")
	flag.Parse()
	m := &member{name: *name, topic: *topic, owned: map[int32]bool{}}
	newBalancer, ok := balancers[*balancer]
	if *group == "" || *topic == "" || !ok {
		m.emit("error", map[string]any{"error": "usage",
			"message": fmt.Sprintf("need -group, -topic and a known -balancer (got %q)", *balancer)})
		os.Exit(1)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	reset := kgo.NewOffset().AtStart()
	if *fromEnd {
		reset = kgo.NewOffset().AtEnd()
	}
	opts := []kgo.Opt{}
	if *regex {
		opts = append(opts, kgo.ConsumeRegex())
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.SeedBrokers(*bootstrap),
		kgo.ClientID(*name),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*topic),
		kgo.Balancers(newBalancer()),
		kgo.SessionTimeout(time.Duration(*sessionMs)*time.Millisecond),
		kgo.HeartbeatInterval(time.Duration(*heartbeatMs)*time.Millisecond),
		kgo.RebalanceTimeout(time.Duration(*rebalanceMs)*time.Millisecond),
		kgo.ConsumeResetOffset(reset),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.callback("assigned", ps)
		}),
		kgo.OnPartitionsRevoked(func(cctx context.Context, _ *kgo.Client, ps map[string][]int32) {
			// Eager members revoke everything before each join: hand over what was read.
			m.commit(cctx)
			m.callback("revoked", ps)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.callback("lost", ps)
		}),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)),
	)...)
	if err != nil {
		m.emit("error", map[string]any{"error": "NewClient", "message": err.Error()})
		os.Exit(1)
	}
	m.mu.Lock()
	m.cl = cl
	m.mu.Unlock()
	m.emit("started", nil)
	m.reportInternalTopics(ctx)

	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fetches.EachError(func(t string, p int32, err error) {
			m.emit("client_error", map[string]any{"topic": t, "partition": p,
				"error": err.Error()})
		})
		var ranges [][4]int64
		var topics []string
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			topics = append(topics, p.Topic)
			first, last := p.Records[0].Offset, p.Records[len(p.Records)-1].Offset
			ranges = append(ranges, [4]int64{int64(p.Partition), first, last,
				int64(len(p.Records))})
		})
		if len(ranges) > 0 {
			m.mu.Lock()
			for _, r := range ranges {
				m.consumed += int(r[3])
			}
			m.emitLocked("records", map[string]any{"ranges": ranges, "topics": topics})
			m.mu.Unlock()
			m.commit(ctx)
		}
	}

	// Leaving: commit what was read, then leave the group (Close revokes everything first).
	m.commit(context.Background())
	cl.Close()
	m.mu.Lock()
	consumed := m.consumed
	m.mu.Unlock()
	m.emit("closed", map[string]any{"consumed": consumed})
}
