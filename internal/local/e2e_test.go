package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/awscall"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/local"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/queue/sqsqueue"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// syncBuffer collects the functions' logs from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Two sagas that wait, one a little and one long.
var (
	shortWait = []byte("saga: pause\nsteps:\n  - id: hold\n    wait: {for: 2s}\n  - id: done\n    succeed: {output: \"${'rested'}\"}\n")
	longWait  = []byte("saga: rest\nsteps:\n  - id: hold\n    wait: {for: 20m}\n  - id: done\n    succeed: {output: \"${'rested'}\"}\n")
)

// A saga whose reserve step calls back (the order function's Go action
// returns at once; the test completes the token), and one that awaits a
// signal after its reserve step.
var (
	callbackSaga = []byte(`saga: held
steps:
  - id: reserve
    action: inventory.reserve
    with: {order_id: "${'e2e-callback'}", items: "${['book']}"}
    callback: {timeout: 1h}
    out: reservation
    compensate:
      action: inventory.release
      with: {order_id: "${'e2e-callback'}"}
  - id: done
    succeed: {output: "${vars.reservation}"}
`)
	// A lambda: action with callback: the advance function invokes the
	// function's alias asynchronously (here a fake Lambda Invoke API).
	lambdaCallbackSaga = []byte(`saga: provider
steps:
  - id: pay
    action: lambda:provider:live
    with: {cents: 1200}
    callback: {timeout: 1h}
    out: payment
  - id: done
    succeed: {output: "${vars.payment}"}
`)
	awaitSaga = []byte(`saga: approved
steps:
  - id: reserve
    action: inventory.reserve
    with: {order_id: "${'e2e-await'}", items: "${['pen']}"}
    out: reservation
  - id: approval
    await: {signal: approved, timeout: 1h}
    out: decision
  - id: done
    succeed: {output: "${{'by': vars.decision.by, 'reserved': vars.reservation.order_id}}"}
`)
)

// TestE2E runs the order saga through the real Lambda binaries under
// aws-lambda-rie, on dynalite and fauxqs, with resources made from
// infra/template.yaml (make e2e), and the scheduled function on its
// schedules, sped up to every second.
//
// Waits: a 2-second wait is its own delayed message, so it completes here
// through the advance function. A 20-minute wait (past a queue's 15-minute
// delay) sends no message: it is in the by_due index until a tick, within a
// minute of its due time, sends one. Here it is checked to wait with no
// message while the scheduled function ticks and finds nothing due; its
// firing is not covered end to end: the binaries read the system clock,
// which a test cannot move, and 20 minutes is too long to wait. The engine
// tests (internal/engine/wait_test.go: ticks, a timer sent twice, a cancel while
// waiting) and the embedded runtime's virtual-time tests cover the firing.
//
// Deliveries: a saga with a callback step parks once the advance function
// has run its action; the test completes the token (read from the stored
// saga with Plan.CallbackToken) and a saga awaiting a signal gets it, both
// through a coordinator on the same table and queues, as a service would,
// and the advance function finishes both. A lambda: action with callback
// is invoked asynchronously (InvocationType Event) on a fake Lambda Invoke
// API (AWS_ENDPOINT_URL_LAMBDA in the functions' environment), which hands
// the test the token from the payload.
func TestE2E(t *testing.T) {
	if os.Getenv("LAMBDASAGA_E2E") == "" {
		t.Skip("LAMBDASAGA_E2E is not set: run make e2e")
	}
	t.Parallel() // beside TestE2EForks, on tables and queues of its own
	dyn := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	sq := awslocal.Endpoint(t, awslocal.EnvSQS)
	dir := t.TempDir()
	rie := filepath.Join(dir, "aws-lambda-rie")
	if err := local.BuildRIE(context.Background(), rie); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	// Building the functions takes minutes on a cold build cache; the
	// test's deadline starts once they run.
	setup := t.Context()
	lambdaAPI := newFakeLambda(t)
	defer lambdaAPI.Close()
	fn := "../../examples/order/cmd/orderfn"
	env, err := local.Up(setup, local.Config{
		Template: "../../infra/template.yaml", DynamoDBEndpoint: dyn, SQSEndpoint: sq, RIE: rie, BuildDir: dir,
		Mains:   map[string]string{"AdvanceFunction": fn, "CompensateFunction": fn},
		Workers: 2, Visibility: 2 * time.Second, Prefix: "e2e-", Log: logs,
		// The tick (rate(1 minute)) and the sweep (rate(15 minutes)) every second.
		ScheduleEvery: time.Second,
		// lambda: actions go to the fake Lambda Invoke API.
		Env: map[string]string{"AWS_ENDPOINT_URL_LAMBDA": lambdaAPI.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Down()
	ctx, cancel := context.WithTimeout(setup, 3*time.Minute)
	defer cancel()
	defer func() {
		if t.Failed() {
			t.Logf("function logs:\n%s", logs.String())
		}
	}()
	c, err := client.NewAWS(client.AWSConfig{AWS: awslocal.ConfigAs(awslocal.ClientPrincipal), Table: env.Table, AdvanceQueueURL: env.QueueURLs["AdvanceQueue"],
		CompensateQueueURL: env.QueueURLs["CompensateQueue"], DynamoDBEndpoint: dyn, SQSEndpoint: sq})
	if err != nil {
		t.Fatal(err)
	}
	runs := []struct {
		id, input string
		status    durable.Status
		failure   string
	}{
		{"e2e-ok", "ok.json", durable.StatusSucceeded, ""},
		{"e2e-declined", "declined.json", durable.StatusCompensated, "charge CardDeclined"},
		{"e2e-unshippable", "unshippable.json", durable.StatusCompensated, "ship Unshippable"},
	}
	for _, r := range runs {
		raw, err := os.ReadFile("../../examples/order/testdata/" + r.input)
		if err != nil {
			t.Fatal(err)
		}
		var in map[string]any
		_ = json.Unmarshal(raw, &in)
		if _, err := c.Start(ctx, client.StartParams{File: "order.yaml", Definition: order.Definition, SagaID: r.id, Input: in}); err != nil {
			t.Fatal(err)
		}
	}
	waits := []struct {
		id  string
		def []byte
	}{{"e2e-wait-short", shortWait}, {"e2e-wait-long", longWait}, {"e2e-callback", callbackSaga}, {"e2e-await", awaitSaga}, {"e2e-lambda-callback", lambdaCallbackSaga}}
	for _, w := range waits {
		if _, err := c.Start(ctx, client.StartParams{File: w.id + ".yaml", Definition: w.def, SagaID: w.id}); err != nil {
			t.Fatal(err)
		}
	}
	// Poison: a body that is no message. It must reach the dead-letter queue as it was.
	poison := `{"v":1,"saga_id": "broken` + " \u2603"
	sqc := awslocal.SQS(sq)
	if _, err := sqc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.QueueURLs["AdvanceQueue"]), MessageBody: aws.String(poison)}); err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		st := waitFinal(t, ctx, c, r.id)
		got := ""
		if st.Failure != nil {
			got = st.Failure.Step + " " + st.Failure.Type
		}
		if st.Status != r.status || got != r.failure {
			t.Errorf("%s: %s %q, want %s %q", r.id, st.Status, got, r.status, r.failure)
		}
	}
	// The unshippable order was undone newest first: refund, then release.
	re := regexp.MustCompile(`^CompensateFunction/\d: .*message="message handled".*saga_id=e2e-unshippable step=(\w+) .*outcome=(?:step|chained)`)
	// The saga reads compensated as soon as its last write lands; the
	// line the function logs after it may still be on its way.
	var undone []string
	for wait := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		undone = undone[:0]
		for _, line := range strings.Split(logs.String(), "\n") {
			if m := re.FindStringSubmatch(line); m != nil {
				undone = append(undone, m[1])
			}
		}
		if len(undone) >= 2 || time.Now().After(wait) {
			break
		}
	}
	if !slices.Equal(undone, []string{"charge", "reserve"}) {
		t.Errorf("compensations ran %v, want [charge reserve]", undone)
	}
	// Poison in the dead-letter queue, body intact (after maxReceiveCount receives, 2s apart).
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := sqc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(env.QueueURLs["AdvanceDeadLetterQueue"]), WaitTimeSeconds: 2, MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) > 0 {
			if len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != poison {
				t.Fatalf("dead-letter queue holds %d messages, first %q; want the poison body", len(out.Messages), aws.ToString(out.Messages[0].Body))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the poison message did not reach the dead-letter queue")
		}
	}
	checkDeliveries(t, ctx, c, env, dyn, sq, lambdaAPI)
	checkStartQueue(t, ctx, c, env, sq)
	checkWaits(t, ctx, c, env, logs)
}

// checkDeliveries: the callback saga parks on its token once its action
// (run by the advance function) returns, and the await saga on its await;
// the token's completion and the signal, sent as a service would (a
// coordinator on the same table and queues), wake them, and the advance
// function finishes them.
func checkDeliveries(t *testing.T, ctx context.Context, c *client.Client, env *local.Env, dyn, sq string, lambdaAPI *fakeLambda) {
	t.Helper()
	store, err := dynamo.New(dynamo.Config{Client: awslocal.DynamoDB(dyn), Table: env.Table})
	if err != nil {
		t.Fatal(err)
	}
	queue, err := sqsqueue.New(sqsqueue.Config{Client: awslocal.SQS(sq), URLs: map[durable.QueueName]string{
		durable.QueueAdvance: env.QueueURLs["AdvanceQueue"], durable.QueueCompensate: env.QueueURLs["CompensateQueue"]}})
	if err != nil {
		t.Fatal(err)
	}
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: store, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}

	st := waitStatus(t, ctx, c, "e2e-callback", durable.StatusWaiting)
	plan, err := saga.Compile("e2e-callback.yaml", callbackSaga, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	token := plan.CallbackToken(st)
	if token == "" {
		t.Fatalf("e2e-callback waits (v%d) with no callback token pending", st.Version)
	}
	if r, _ := st.Vars["reservation"].(map[string]any); r["order_id"] != "e2e-callback" {
		t.Errorf("e2e-callback: out while it waits is %v, want the action's own output", st.Vars["reservation"])
	}
	d, err := coord.CompleteCallback(ctx, token, map[string]any{"order_id": "e2e-callback", "confirmed": "by the provider"})
	if err != nil || d.Receipt != saga.ReceiptApplied {
		t.Fatalf("complete the token: %+v %v", d, err)
	}
	if st := waitFinal(t, ctx, c, "e2e-callback"); st.Status != durable.StatusSucceeded || st.Output.(map[string]any)["confirmed"] != "by the provider" {
		t.Errorf("e2e-callback: %s, output %v; want succeeded with the completion's output", st.Status, st.Output)
	}
	// The same token again: a duplicate, nothing applied.
	if d, err := coord.CompleteCallback(ctx, token, map[string]any{"order_id": "again"}); err != nil || d.Receipt != saga.ReceiptDuplicate {
		t.Errorf("the token completed twice: %+v %v; want a duplicate", d, err)
	}

	// The lambda: action with callback: invoked asynchronously, with the
	// token in its payload; its output is null until the token completes.
	var inv invocation
	select {
	case inv = <-lambdaAPI.invoked:
	case <-ctx.Done():
		t.Fatal("the advance function did not invoke lambda:provider")
	}
	lt, _ := inv.payload["callback_token"].(string)
	if inv.function != "provider:live" || inv.invocationType != "Event" || inv.payload["saga_id"] != "e2e-lambda-callback" || lt == "" ||
		inv.payload["callback_timeout_ms"] != float64(time.Hour/time.Millisecond) {
		t.Fatalf("lambda:provider invoked %s as %q with %v; want an Event invoke with the token and its timeout", inv.function, inv.invocationType, inv.payload)
	}
	if st := waitStatus(t, ctx, c, "e2e-lambda-callback", durable.StatusWaiting); st.Vars["payment"] != nil {
		t.Errorf("e2e-lambda-callback: out while it waits is %v, want null (an asynchronous invoke has no output)", st.Vars["payment"])
	}
	if d, err := coord.CompleteCallback(ctx, lt, map[string]any{"paid": 1200}); err != nil || d.Receipt != saga.ReceiptApplied {
		t.Fatalf("complete lambda:provider's token: %+v %v", d, err)
	}
	if st := waitFinal(t, ctx, c, "e2e-lambda-callback"); st.Status != durable.StatusSucceeded || fmt.Sprint(st.Output) != "map[paid:1200]" {
		t.Errorf("e2e-lambda-callback: %s, output %v; want succeeded with the completion's output", st.Status, st.Output)
	}
	select {
	case inv := <-lambdaAPI.invoked:
		t.Errorf("a second invoke of %s: %v", inv.function, inv.payload)
	default:
	}

	waitStatus(t, ctx, c, "e2e-await", durable.StatusWaiting)
	d, err = coord.Signal(ctx, &engine.SignalParams{SagaID: "e2e-await", Name: "approved", Payload: map[string]any{"by": "ann"}, ID: "e2e-mail-1"})
	if err != nil || d.Receipt != saga.ReceiptApplied {
		t.Fatalf("signal: %+v %v", d, err)
	}
	if st := waitFinal(t, ctx, c, "e2e-await"); st.Status != durable.StatusSucceeded || st.Output.(map[string]any)["by"] != "ann" || st.Output.(map[string]any)["reserved"] != "e2e-await" {
		t.Errorf("e2e-await: %s, output %v; want succeeded, approved by ann", st.Status, st.Output)
	}
}

// fakeLambda speaks the Lambda Invoke API (POST
// /2015-03-31/functions/NAME/invocations): it answers an Event invoke with
// 202 and a synchronous one with null, and passes each on.
type fakeLambda struct {
	*httptest.Server
	invoked chan invocation
}

type invocation struct {
	function, invocationType string
	payload                  map[string]any
}

// newFakeLambda serves the Invoke API; its calls are recorded for the IAM
// check where the run records AWS calls (awscall.EnvFile).
func newFakeLambda(t *testing.T) *fakeLambda {
	rec, err := awscall.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Close() })
	f := &fakeLambda{invoked: make(chan invocation, 16)}
	f.Server = httptest.NewServer(rec.Handler(awscall.Lambda, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, _ := strings.CutPrefix(r.URL.Path, "/2015-03-31/functions/")
		name, ok := strings.CutSuffix(name, "/invocations")
		var payload map[string]any
		if body, _ := io.ReadAll(r.Body); r.Method != http.MethodPost || !ok || json.Unmarshal(body, &payload) != nil {
			http.Error(w, "not an Invoke", http.StatusBadRequest)
			return
		}
		typ := r.Header.Get("X-Amz-Invocation-Type")
		f.invoked <- invocation{function: name, invocationType: typ, payload: payload}
		if typ == "Event" {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		_, _ = io.WriteString(w, "null")
	})))
	return f
}

// waitStatus polls a saga until it has the status.
func waitStatus(t *testing.T, ctx context.Context, c *client.Client, id string, want durable.Status) *saga.State {
	t.Helper()
	for {
		st, err := c.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status == want {
			return st
		}
		if st.Status.Final() {
			t.Fatalf("saga %s is %s (%+v), want %s", id, st.Status, st.Failure, want)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("saga %s still %s, want %s", id, st.Status, want)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkWaits: the short wait completed; the long one waits with no message
// anywhere, and the scheduled function ticks and finds nothing due.
func checkWaits(t *testing.T, ctx context.Context, c *client.Client, env *local.Env, logs *syncBuffer) {
	t.Helper()
	if st := waitFinal(t, ctx, c, "e2e-wait-short"); st.Status != durable.StatusSucceeded || st.Output != "rested" {
		t.Errorf("e2e-wait-short: %s, output %v; want succeeded with rested", st.Status, st.Output)
	}
	st, err := c.Status(ctx, "e2e-wait-long")
	if err != nil {
		t.Fatal(err)
	}
	// Written once (its start, which reached the wait), with nothing to send.
	if st.Status != durable.StatusWaiting || st.Version != 1 || len(st.Outbox) != 0 || time.Until(st.WakeAt()) < 15*time.Minute {
		t.Errorf("e2e-wait-long: %s v%d, outbox %v, wakes at %s; want waiting at v1 with no message, waking in 15 to 20 minutes", st.Status, st.Version, st.Outbox, st.WakeAt())
	}
	// Every other saga is done, the poison dead-lettered: the queues are
	// empty, delayed messages counted, so no message waits for the long saga.
	sqc := awslocal.SQS(awslocal.Endpoint(t, awslocal.EnvSQS))
	for _, q := range []string{"AdvanceQueue", "CompensateQueue"} {
		out, err := sqc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(env.QueueURLs[q]), AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range out.Attributes {
			if v != "0" {
				t.Errorf("%s: %s is %s, want 0", q, k, v)
			}
		}
	}
	// The tick runs (every second here) and, the short wait over, finds
	// nothing due: the long wait is not within its minute.
	from := len(logs.String())
	tick := regexp.MustCompile(`local: SweepFunction schedule EveryMinute \(rate\(1 minute\), every 1s\): invoked with \{"job": "tick"\}: (.*)`)
	for {
		if m := tick.FindStringSubmatch(logs.String()[from:]); m != nil {
			if m[1] != `{"tick":{"Due":0,"Sent":0}}` {
				t.Errorf("the tick answered %s, want nothing due", m[1])
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the scheduled function's tick was not invoked")
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !strings.Contains(logs.String(), `local: SweepFunction schedule Every15Minutes (rate(15 minutes), every 1s): invoked with {"job": "sweep"}: {"sweep":`) {
		t.Error("the scheduled function's sweep was not invoked")
	}
	if st, err := c.Status(ctx, "e2e-wait-long"); err != nil || st.Status != durable.StatusWaiting || st.Version != 1 {
		t.Errorf("e2e-wait-long after the ticks: %v, %v; want still waiting at v1", st, err)
	}
}

func waitFinal(t *testing.T, ctx context.Context, c *client.Client, id string) *saga.State {
	t.Helper()
	for {
		st, err := c.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status.Final() {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("saga %s still %s", id, st.Status)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
