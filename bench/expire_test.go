package bench_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// expireHeld is a queue that keeps back the messages that expire a
// finished tree: a test runs the saga, then walks its tree by hand, so
// that the walk's cost is measured apart from the saga's.
type expireHeld struct {
	durable.Queue
	mu   sync.Mutex
	held []durable.Message
}

func (q *expireHeld) Send(ctx context.Context, msgs []durable.Message) error {
	var pass []durable.Message
	q.mu.Lock()
	for _, m := range msgs {
		if m.Kind == durable.KindExpire {
			q.held = append(q.held, m)
		} else {
			pass = append(pass, m)
		}
	}
	q.mu.Unlock()
	if len(pass) == 0 {
		return nil
	}
	return q.Queue.Send(ctx, pass)
}

// walk handles the held expire messages, and those they send, until
// none is left; it returns how many it handled.
func (q *expireHeld) walk(t *testing.T, c *engine.Coordinator) int {
	t.Helper()
	n := 0
	for ; ; n++ {
		q.mu.Lock()
		if len(q.held) == 0 {
			q.mu.Unlock()
			return n
		}
		m := q.held[0]
		q.held = q.held[1:]
		q.mu.Unlock()
		if _, err := c.Handle(context.Background(), durable.AppendMessage(nil, m)); err != nil {
			t.Fatalf("expire %+v: %v", m, err)
		}
	}
}

// expireTreeYAML forks at two depths: a foreach of 20, two at a time,
// whose body forks a parallel of two.
const expireTreeYAML = `saga: tree
input: {items: list}
steps:
  - id: each
    foreach: "${input.items}"
    concurrency: 2
    steps:
      - id: both
        parallel:
          - steps: [{id: left, action: svc.left, with: {sku: "${item}"}}]
          - steps: [{id: right, action: svc.right, with: {sku: "${item}"}}]
`

// runHeld runs a saga to its end on the backend, as the advance and
// compensate functions would (their principals sign), with the expire
// messages held back.
func runHeld(t *testing.T, b *awstest.Backend, src, id string, n int) (*engine.Coordinator, *expireHeld, *saga.State) {
	t.Helper()
	reg := engine.NewRegistry()
	reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) { return map[string]any{"ok": true}, nil })
	plan, err := saga.Compile(id+".yaml", []byte(src), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store, queue := b.As(t, "AdvanceFunction")
	held := &expireHeld{Queue: queue}
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: store, Queue: held, Actions: reg})
	if err != nil {
		t.Fatal(err)
	}
	cstore, cqueue := b.As(t, "CompensateFunction")
	ccoord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: cstore, Queue: &expireHeld{Queue: cqueue}, Actions: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for q, c := range map[durable.QueueName]*engine.Coordinator{durable.QueueAdvance: coord, durable.QueueCompensate: ccoord} {
		for range 2 {
			wg.Go(func() {
				_ = engine.RunWorker(ctx, engine.WorkerConfig{Coordinator: c, Receiver: b.Queue, Queue: q, Wait: 50 * time.Millisecond, Visibility: 30 * time.Second})
			})
		}
	}
	items := make([]any, n)
	for i := range items {
		items[i] = fmt.Sprintf("sku-%03d", i)
	}
	if _, err := coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: id, Input: map[string]any{"items": items}}); err != nil {
		t.Fatal(err)
	}
	var st *saga.State
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if st, err = coord.Get(ctx, id); err != nil {
			t.Fatal(err)
		}
		if st.Status.Final() || time.Now().After(deadline) {
			break
		}
	}
	cancel()
	wg.Wait()
	if st.Status != durable.StatusSucceeded {
		t.Fatalf("%s %s: %+v", id, st.Status, st.Failure)
	}
	return coord, held, st
}

// scanTTL reads the whole table and returns, of its saga and fork
// items, those with a ttl (by key) and the number without one.
func scanTTL(t *testing.T, b *awstest.Backend) (with map[string]int64, without []string) {
	t.Helper()
	with = map[string]int64{}
	var start map[string]types.AttributeValue
	for {
		out, err := b.DynamoDB.Scan(context.Background(), &dynamodb.ScanInput{TableName: &b.Table, ExclusiveStartKey: start, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			pk := it["pk"].(*types.AttributeValueMemberS).Value
			if strings.HasPrefix(pk, "DEF#") {
				continue // a definition is shared by every saga that runs it: it never expires
			}
			if v, ok := it["ttl"].(*types.AttributeValueMemberN); ok {
				ttl, _ := strconv.ParseInt(v.Value, 10, 64)
				with[pk] = ttl
			} else {
				without = append(without, pk)
			}
		}
		if start = out.LastEvaluatedKey; start == nil {
			return with, without
		}
	}
}

// TestForkTreeExpiresWithItsRoot runs a saga that forks at two depths on
// the emulators and scans the table: before the walk, only the root has
// a ttl; after it, every item of its tree has the root's (its end plus
// the retention), fork records included.
func TestForkTreeExpiresWithItsRoot(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	const n = 20
	coord, held, root := runHeld(t, b, expireTreeYAML, "tree-1", n)
	with, without := scanTTL(t, b)
	t.Logf("before the walk: %d items with ttl, %d without", len(with), len(without))
	if len(with) != 1 || len(without) != n+2*n+1+n {
		t.Fatalf("before the walk: %d with ttl, %d without; want the root, and %d without", len(with), len(without), n+2*n+1+n)
	}
	b.Counter.Reset()
	messages := held.walk(t, coord)
	snap := b.Counter.Snapshot()
	var wru, rru float64
	for _, s := range snap {
		wru, rru = wru+s.BilledWriteUnits, rru+s.BilledReadUnits
	}
	t.Logf("the walk: %.0f write units, %.0f read units for %d items; requests:%s", wru, rru, 1+3*n+n, requests(snap))
	with, without = scanTTL(t, b)
	t.Logf("after the walk (%d expire messages): %d items with ttl, %d without", messages, len(with), len(without))
	want := root.UpdatedAt.Add(30 * 24 * time.Hour).Unix()
	if len(without) > 0 {
		t.Errorf("left without ttl: %v", without)
	}
	if len(with) != 1+n+2*n+1+n {
		t.Errorf("%d items with ttl, want %d", len(with), 1+n+2*n+1+n)
	}
	for pk, ttl := range with {
		if ttl != want {
			t.Errorf("%s: ttl %d, want the root's end plus 30 days, %d", pk, ttl, want)
		}
	}
	if messages != 1+n {
		t.Errorf("%d expire messages, want %d: the root's and one per iteration that forked", messages, 1+n)
	}
}

// TestForkTreeExpireCost measures what the walk bills: a foreach of 100
// whose iterations do not fork, walked in one message.
func TestForkTreeExpireCost(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	const n = 100
	coord, held, _ := runHeld(t, b, forkScaleYAML, "fan-x", n)
	b.Counter.Reset()
	messages := held.walk(t, coord)
	snap := b.Counter.Snapshot()
	var wru, index, rru float64
	for op, s := range snap {
		if s.Unbilled > 0 {
			t.Errorf("%s: %d calls unbilled", op, s.Unbilled)
		}
		wru += s.BilledWriteUnits
		index += s.BilledIndexWriteUnits
		rru += s.BilledReadUnits
	}
	t.Logf("the walk of %d children and 1 fork record, %d message: %.0f write units (%.0f on indexes), %.2f per child; %.0f read units; requests:%s",
		n, messages, wru, index, wru/n, rru, requests(snap))
	if updates := snap["DynamoDB.UpdateItem"].Calls; updates != n+1 {
		t.Errorf("%d updates, want %d: one per child and the fork record", updates, n+1)
	}
	if wru != n+1 || index != 0 {
		t.Errorf("%.0f write units (%.0f on indexes), want %d and 0: 1 per child under 1 KB and 1 for the record", wru, index, n+1)
	}
	with, without := scanTTL(t, b)
	if len(without) > 0 || len(with) != n+2 {
		t.Errorf("after the walk: %d with ttl, %d without", len(with), len(without))
	}
}
