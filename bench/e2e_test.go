package bench_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestE2EThroughput runs sagas of five action steps through the coordinator
// on the emulators with 1, 2 and 4 workers per queue, and in the same run
// the floor: the same sequence of raw calls per step (receive, consistent
// get, conditional put, send, delete) with no engine. make bench-e2e.
func TestE2EThroughput(t *testing.T) {
	if os.Getenv("LAMBDASAGA_BENCH_E2E") == "" {
		t.Skip("LAMBDASAGA_BENCH_E2E is not set: run make bench-e2e")
	}
	const steps = 5
	n := envInt("BENCH_E2E_SAGAS", 100)
	plan, err := saga.Compile("linear.yaml", []byte(sagatest.LinearSaga(steps)), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 2, 4} {
		eng, lat := runEngine(t, plan, n, steps, workers)
		floor := runFloor(t, n, steps, workers)
		line := fmt.Sprintf("| %d | %d sagas x %d steps | engine %.1f sagas/s (%s) | floor %.1f sagas/s (%s) | engine/floor time %.2f | step latency p50 %s, p99 %s |",
			workers, n, steps, float64(n)/eng.Seconds(), eng.Round(time.Millisecond), float64(n)/floor.Seconds(), floor.Round(time.Millisecond),
			eng.Seconds()/floor.Seconds(), lat[len(lat)/2].Round(100*time.Microsecond), lat[len(lat)*99/100].Round(100*time.Microsecond))
		t.Log(line)
		report(t, line)
	}
}

// runEngine returns the wall time for n sagas and the per-step latencies
// (each saga's time from start to end, divided by its steps).
func runEngine(t *testing.T, plan *saga.Plan, n, steps, workers int) (time.Duration, []time.Duration) {
	b := awstest.New(t)
	reg := engine.NewRegistry()
	reg.MustRegister("work", func(ctx context.Context, c saga.Call) (any, error) { return map[string]any{"ok": true}, nil })
	reg.MustRegister("undo", func(context.Context, saga.Call) (any, error) { return nil, nil })
	// The clock stops when the last saga's last step completes, seen through
	// the step events: polling every saga would load the emulator the
	// workers use and slow the very thing measured.
	last := fmt.Sprintf("s%d", steps-1)
	var mu sync.Mutex
	ended := map[string]bool{}
	var began time.Time
	var finished time.Duration
	onStep := func(ev engine.StepEvent) {
		if ev.Step != last || ev.Outcome != saga.OutcomeCompleted {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !ended[ev.SagaID] {
			ended[ev.SagaID] = true
			if len(ended) == n {
				finished = time.Since(began)
			}
		}
	}
	rt, err := embedded.Start(embedded.Config{Actions: reg, Store: b.Store, Queue: b.Queue, Receiver: b.Queue, Workers: workers, Visibility: 30 * time.Second, PollInterval: 5 * time.Millisecond, OnStep: onStep})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	mu.Lock()
	began = time.Now()
	mu.Unlock()
	for i := range n {
		if _, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: plan, SagaID: fmt.Sprintf("e2e-%d-%d", workers, i)}); err != nil {
			t.Fatal(err)
		}
	}
	var lat []time.Duration
	for i := range n {
		st, err := rt.Wait(ctx, fmt.Sprintf("e2e-%d-%d", workers, i))
		if err != nil || st.Status != durable.StatusSucceeded {
			t.Fatalf("saga %d: %v %v", i, st, err)
		}
		lat = append(lat, st.UpdatedAt.Sub(st.CreatedAt)/time.Duration(steps))
	}
	slices.Sort(lat)
	mu.Lock()
	defer mu.Unlock()
	return finished, lat
}

// runFloor does per step what the engine must at least do, with raw calls.
func runFloor(t *testing.T, n, steps, workers int) time.Duration {
	b := awstest.New(t)
	ctx := context.Background()
	url := b.URLs[durable.QueueAdvance]
	item := func(id string, v int) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "SAGA#" + id}, "sk": &types.AttributeValueMemberS{Value: "STATE"},
			"v": &types.AttributeValueMemberN{Value: strconv.Itoa(v)}, "state": &types.AttributeValueMemberB{Value: make([]byte, 400)},
		}
	}
	began := time.Now()
	for i := range n {
		id := fmt.Sprintf("floor-%d", i)
		if _, err := b.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: &b.Table, Item: item(id, 1)}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(id + " 1")}); err != nil {
			t.Fatal(err)
		}
	}
	var done atomic.Int64
	var finished atomic.Int64 // when the last saga's last step was done (not when the pollers' last long poll returned)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for done.Load() < int64(n) {
				out, err := b.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
				if err != nil {
					t.Error(err)
					return
				}
				for _, m := range out.Messages {
					var id string
					var v int
					fmt.Sscanf(aws.ToString(m.Body), "%s %d", &id, &v)
					key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "SAGA#" + id}, "sk": &types.AttributeValueMemberS{Value: "STATE"}}
					if _, err := b.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: &b.Table, Key: key, ConsistentRead: aws.Bool(true)}); err != nil {
						t.Error(err)
						return
					}
					if _, err := b.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: &b.Table, Item: item(id, v+1),
						ConditionExpression: aws.String("v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: strconv.Itoa(v)}}}); err != nil {
						t.Error(err)
						return
					}
					if v < steps {
						if _, err := b.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(fmt.Sprintf("%s %d", id, v+1))}); err != nil {
							t.Error(err)
							return
						}
					} else if done.Add(1) == int64(n) {
						finished.Store(int64(time.Since(began)))
					}
					if _, err := b.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	return time.Duration(finished.Load())
}
