package lambdasaga_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/lambdasaga/lambdasaga"
	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
)

func newLocal(t *testing.T, actions *lambdasaga.Actions) *lambdasaga.Local {
	t.Helper()
	l, err := lambdasaga.NewLocal(actions, lambdasaga.LocalOptions{VirtualTime: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func parse(t *testing.T, src string) *lambdasaga.Definition {
	t.Helper()
	def, err := lambdasaga.ParseDefinition("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// A secret input is masked wherever a view shows it: the output, a
// failure's message.
func TestSagaViewMasksSecretInputs(t *testing.T) {
	actions := lambdasaga.NewActions()
	actions.MustRegister("svc.echo", func(ctx context.Context, c lambdasaga.Call) (any, error) {
		return c.Input, nil
	})
	actions.MustRegister("svc.refuse", func(ctx context.Context, c lambdasaga.Call) (any, error) {
		return nil, lambdasaga.Permanent(fmt.Errorf("card %v refused", c.Input))
	})
	l := newLocal(t, actions)
	ctx := context.Background()
	ok := parse(t, `
saga: shows
input: {card: secret string}
steps:
  - {id: echo, action: svc.echo, with: "${input.card}", out: seen}
`)
	s, err := l.Run(ctx, ok, lambdasaga.StartOptions{Input: map[string]any{"card": "4242424242424242"}})
	if err != nil {
		t.Fatal(err)
	}
	if out := fmt.Sprint(s.Output); s.Status != lambdasaga.StatusSucceeded || strings.Contains(out, "4242") || !strings.Contains(out, "[secret]") {
		t.Fatalf("%s, output %s: want succeeded, the card masked", s.Status, out)
	}
	bad := parse(t, `
saga: fails
input: {card: secret string}
steps:
  - {id: refuse, action: svc.refuse, with: "${input.card}"}
`)
	s, err = l.Run(ctx, bad, lambdasaga.StartOptions{Input: map[string]any{"card": "4242424242424242"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Failure == nil || s.Failure.Step != "refuse" || strings.Contains(s.Failure.Message, "4242") {
		t.Fatalf("failure %+v: want step refuse, the card masked", s.Failure)
	}
	history, err := l.History(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range history {
		if e.Error != nil && strings.Contains(e.Error.Message, "4242") {
			t.Fatalf("history entry %+v shows the card", e)
		}
	}
}

// A saga that awaits a signal and calls an action with a callback: a test
// sees it wait, signals it, completes the token, and it goes on.
func TestLocalSignalAndCallback(t *testing.T) {
	tokens := make(chan string, 1)
	actions := lambdasaga.NewActions()
	actions.MustRegister("pay.request", func(ctx context.Context, c lambdasaga.Call) (any, error) {
		tokens <- c.CallbackToken
		return map[string]any{"status": "pending"}, nil
	})
	l := newLocal(t, actions)
	ctx := context.Background()
	def := parse(t, `
saga: approve
steps:
  - {id: approval, await: {signal: approved, timeout: 1h}, out: approval}
  - {id: pay, action: pay.request, callback: {timeout: 1h}, out: paid}
  - {id: done, succeed: {output: "${{'by': vars.approval.by, 'paid': vars.paid.ok}}"}}
`)
	if _, err := l.Start(ctx, def, lambdasaga.StartOptions{ID: "a-1"}); err != nil {
		t.Fatal(err)
	}
	if s, err := l.WaitReceiving(ctx, "a-1"); err != nil || s.Status != lambdasaga.StatusWaiting || s.Step != "approval" {
		t.Fatalf("before the signal: %+v %v", s, err)
	}
	d, err := l.Signal(ctx, "a-1", "approved", map[string]any{"by": "mia"}, lambdasaga.SignalOptions{ID: "sig-1"})
	if err != nil || d.Receipt != lambdasaga.ReceiptApplied || d.Saga.ID != "a-1" {
		t.Fatalf("signal: %+v %v", d, err)
	}
	if d, err := l.Signal(ctx, "a-1", "approved", map[string]any{"by": "mia"}, lambdasaga.SignalOptions{ID: "sig-1"}); err != nil || d.Receipt != lambdasaga.ReceiptDuplicate {
		t.Fatalf("the same signal again: %+v %v, want a duplicate", d, err)
	}
	token := <-tokens
	if _, err := l.WaitReceiving(ctx, "a-1"); err != nil {
		t.Fatal(err)
	}
	if d, err := l.CompleteCallback(ctx, token, map[string]any{"ok": true}); err != nil || d.Receipt != lambdasaga.ReceiptApplied {
		t.Fatalf("callback: %+v %v", d, err)
	}
	s, err := l.Wait(ctx, "a-1")
	if err != nil || s.Status != lambdasaga.StatusSucceeded || fmt.Sprint(s.Output) != "map[by:mia paid:true]" {
		t.Fatalf("after both: %+v %v", s, err)
	}
}

// Reads of a saga that does not exist say so; a listing pages by status.
func TestGetUnknownSagaAndList(t *testing.T) {
	l := newLocal(t, lambdasaga.NewActions())
	ctx := context.Background()
	if _, err := l.Get(ctx, "nobody"); !errors.Is(err, lambdasaga.ErrNotFound) {
		t.Fatalf("get of no saga: %v, want ErrNotFound", err)
	}
	if _, err := l.Signal(ctx, "nobody", "go", nil, lambdasaga.SignalOptions{}); !errors.Is(err, lambdasaga.ErrNotFound) {
		t.Fatalf("signal to no saga: %v, want ErrNotFound", err)
	}
	if _, err := lambdasaga.ParseDefinition("bad.yaml", []byte("saga: x\nsteps: []\n")); !errors.Is(err, lambdasaga.ErrInvalidDefinition) {
		t.Fatalf("a definition without steps: %v, want ErrInvalidDefinition", err)
	}
	def := parse(t, "saga: pure\nsteps:\n  - {id: done, succeed: {output: 1}}\n")
	for _, id := range []string{"p-1", "p-2", "p-3"} {
		if _, err := l.Run(ctx, def, lambdasaga.StartOptions{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := l.List(ctx, lambdasaga.ListOptions{Status: lambdasaga.StatusSucceeded, Limit: 2})
	if err != nil || len(page.Sagas) != 2 || page.Next == "" {
		t.Fatalf("first page: %+v %v", page, err)
	}
	rest, err := l.List(ctx, lambdasaga.ListOptions{Status: lambdasaga.StatusSucceeded, Cursor: page.Next})
	if err != nil || len(rest.Sagas) != 1 || rest.Next != "" {
		t.Fatalf("second page: %+v %v", rest, err)
	}
	if none, err := l.List(ctx, lambdasaga.ListOptions{Status: lambdasaga.StatusRunning}); err != nil || len(none.Sagas) != 0 {
		t.Fatalf("running: %+v %v", none, err)
	}
}

// In virtual time, "in their status for an hour" reads the sagas' clock:
// a saga that ended at its start, in 2020, has not been in its status an
// hour on it, years as it has been on the wall clock.
func TestListInStatusForReadsTheSagasClock(t *testing.T) {
	l, err := lambdasaga.NewLocal(lambdasaga.NewActions(), lambdasaga.LocalOptions{VirtualTime: true, Now: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	if _, err := l.Run(ctx, parse(t, "saga: pure\nsteps:\n  - {id: done, succeed: {output: 1}}\n"), lambdasaga.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	if old, err := l.List(ctx, lambdasaga.ListOptions{InStatusFor: time.Hour}); err != nil || len(old.Sagas) != 0 {
		t.Fatalf("in their status for an hour: %+v %v", old, err)
	}
	if all, err := l.List(ctx, lambdasaga.ListOptions{}); err != nil || len(all.Sagas) != 1 {
		t.Fatalf("all: %+v %v", all, err)
	}
}

// An input that does not decode into the typed action's type fails the
// step for good, naming the action.
func TestTypedInputThatDoesNotDecodeFailsTheStep(t *testing.T) {
	actions := lambdasaga.NewActions()
	actions.MustRegister("svc.count", lambdasaga.Typed(func(ctx context.Context, c lambdasaga.Call, in struct{ N int }) (int, error) {
		return in.N + 1, nil
	}))
	l := newLocal(t, actions)
	def := parse(t, "saga: typed\nsteps:\n  - {id: count, action: svc.count, with: {N: \"not a number\"}}\n")
	s, err := l.Run(context.Background(), def, lambdasaga.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != lambdasaga.StatusCompensated || s.Failure == nil || s.Failure.Step != "count" {
		t.Fatalf("%s %+v: want compensated, count failed", s.Status, s.Failure)
	}
}

func TestRegisterRefusesBadActions(t *testing.T) {
	a := lambdasaga.NewActions()
	fn := func(ctx context.Context, c lambdasaga.Call) (any, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		fn   lambdasaga.ActionFunc
	}{{"", fn}, {"svc.nil", nil}, {"9bad", fn}, {"lambda:fn", fn}} {
		if err := a.Register(tc.name, tc.fn); err == nil {
			t.Errorf("Register(%q) took it", tc.name)
		}
	}
	if err := a.Register("svc.ok", fn); err != nil {
		t.Fatal(err)
	}
	if err := a.Register("svc.ok", fn); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Fatalf("a second svc.ok: %v", err)
	}
}

func TestNewClientNeedsTheStackOutputs(t *testing.T) {
	_, err := lambdasaga.NewClient(lambdasaga.ClientConfig{Table: "t", AdvanceQueueURL: "u"})
	if err == nil || !strings.Contains(err.Error(), "CompensateQueueUrl") {
		t.Fatalf("without the compensate queue: %v", err)
	}
}

func TestNewLambdaHandlerNamesWhatTheEnvironmentLacks(t *testing.T) {
	t.Setenv("LAMBDASAGA_TABLE", "")
	_, err := lambdasaga.NewLambdaHandler(context.Background(), lambdasaga.NewActions())
	if err == nil || !strings.Contains(err.Error(), "LAMBDASAGA_TABLE") {
		t.Fatalf("without a table: %v", err)
	}
}

// A client of a deployment, on the emulators: it starts a saga (the first
// version written and its message sent; no function runs it here), reads
// it and lists it.
func TestClientOnTheEmulators(t *testing.T) {
	b := awstest.New(t)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}
	c, err := lambdasaga.NewClient(lambdasaga.ClientConfig{AWS: cfg, Table: b.Table,
		AdvanceQueueURL: b.URLs[durable.QueueAdvance], CompensateQueueURL: b.URLs[durable.QueueCompensate],
		DynamoDBEndpoint: b.DynamoDBEndpoint, SQSEndpoint: b.SQSEndpoint})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	def := parse(t, "saga: remote\ninput: {n: int}\nsteps:\n  - {id: work, action: svc.work, with: \"${input.n}\"}\n")
	s, err := c.Start(ctx, def, lambdasaga.StartOptions{ID: "r-1", Input: map[string]any{"n": 1}})
	if err != nil || s.Status != lambdasaga.StatusRunning || s.Step != "work" || s.Version != 1 {
		t.Fatalf("start: %+v %v", s, err)
	}
	if again, err := c.Start(ctx, def, lambdasaga.StartOptions{ID: "r-1", Input: map[string]any{"n": 1}}); err != nil || again.Version != 1 {
		t.Fatalf("the same start again: %+v %v, want the saga as it is", again, err)
	}
	if _, err := c.Start(ctx, def, lambdasaga.StartOptions{ID: "r-1", Input: map[string]any{"n": 2}}); !errors.Is(err, lambdasaga.ErrExists) {
		t.Fatalf("a start of r-1 with another input: %v, want ErrExists", err)
	}
	if _, err := c.Start(ctx, def, lambdasaga.StartOptions{ID: "r-2", Input: map[string]any{"n": "one"}}); !errors.Is(err, lambdasaga.ErrInvalidInput) {
		t.Fatalf("an input of the wrong type: %v, want ErrInvalidInput", err)
	}
	got, err := c.Get(ctx, "r-1")
	if err != nil || got.Name != "remote" || got.Step != "work" {
		t.Fatalf("get: %+v %v", got, err)
	}
	page, err := c.List(ctx, lambdasaga.ListOptions{Status: lambdasaga.StatusRunning})
	if err != nil || len(page.Sagas) != 1 || page.Sagas[0].ID != "r-1" {
		t.Fatalf("list: %+v %v", page, err)
	}
}
