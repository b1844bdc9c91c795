package bench_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/accounting"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memobjects"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// documentSaga passes a document through 5 steps: each edits it and
// hands the new version on.
const documentSaga = `
saga: document
input: {doc: string}
steps:
  - {id: s0, action: edit, with: {doc: "${input.doc}"}, out: doc}
  - {id: s1, action: edit, with: {doc: "${vars.doc.text}"}, out: doc}
  - {id: s2, action: edit, with: {doc: "${vars.doc.text}"}, out: doc}
  - {id: s3, action: edit, with: {doc: "${vars.doc.text}"}, out: doc}
  - {id: s4, action: edit, with: {doc: "${vars.doc.text}"}, out: doc}
`

// List prices, us-east-1 (docs/COST.md, "Large values", has the sources).
const (
	priceWRU   = 0.625 / 1e6 // DynamoDB on-demand, per write request unit
	priceRRU   = 0.125 / 1e6 // per read request unit
	priceS3Put = 0.005 / 1e3 // S3 Standard PUT
	priceS3Get = 0.0004 / 1e3
)

// TestLargeValueCost runs documentSaga with a 1 MiB document on the
// emulators, its values kept as objects, one message per step (chains
// off) and a cold cache at each step (a new coordinator: another Lambda
// instance, the worst case), and prints per step what DynamoDB bills and
// the S3 requests made, next to what DynamoDB would bill for the same
// saga inline (which cannot run: its item would pass DynamoDB's 400 KB).
// Not parallel: make bench prints its table for bench/README.md.
func TestLargeValueCost(t *testing.T) {
	b := awstest.New(t)
	b.Counter.Skip(accounting.EventualReads) // the pauses' and limits' caches: TestPauseEconomy, TestLimitRequestsAsBilled
	plan, err := saga.Compile("document.yaml", []byte(documentSaga), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistry()
	reg.MustRegister("edit", func(ctx context.Context, c saga.Call) (any, error) {
		doc := c.Input.(map[string]any)["doc"].(string)
		return map[string]any{"text": c.Step + doc[len(c.Step):]}, nil // a new version, as long
	})
	objects := memobjects.New()
	plans := engine.NewPlans(b.Store, saga.Options{}) // warm: a definition is read once per instance
	newCoordinator := func() *engine.Coordinator {
		coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: b.Store, Queue: b.Queue, Actions: reg, ChainSteps: -1, Objects: objects, Plans: plans})
		if err != nil {
			t.Fatal(err)
		}
		return coord
	}
	ctx := context.Background()
	const id = "large-doc"
	// inlineItem is the item the saga would be inline: its state encoded
	// without references, and 300 bytes for the item's other attributes
	// (as TestPayloadSize counts them).
	inlineItem := func() (item, refItem int) {
		rec, err := b.Store.SagaGet(ctx, &durable.SagaGetParams{SagaID: id})
		if err != nil {
			t.Fatal(err)
		}
		st, err := newCoordinator().Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := st.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(enc) + 300, len(rec.State) + 300
	}
	var offTotal, inTotal float64
	// The units inline are the units billed, the saga item's own write
	// and read counted at the inline item's size instead.
	row := func(step string, c stepCost, puts, gets int, prevItem, prevRefItem int) (int, int) {
		item, refItem := inlineItem()
		inWRU := c.billedWRU - accounting.WriteUnits(refItem) + accounting.WriteUnits(item)
		inRRU := c.billedRRU
		if prevItem > 0 {
			inRRU += accounting.ReadUnits(prevItem, true) - accounting.ReadUnits(prevRefItem, true)
		}
		off := c.billedWRU*priceWRU + c.billedRRU*priceRRU + float64(puts)*priceS3Put + float64(gets)*priceS3Get
		in := inWRU*priceWRU + inRRU*priceRRU
		offTotal, inTotal = offTotal+off, inTotal+in
		line := fmt.Sprintf("| %s | %d bytes | %.0f WRU, %.0f RRU | %d PUT, %d GET | $%.2f | %s bytes | %.0f WRU, %.0f RRU | $%.2f |",
			step, refItem-300, c.billedWRU, c.billedRRU, puts, gets, off*1e6, commas(item), inWRU, inRRU, in*1e6)
		t.Log(line)
		report(t, line)
		return item, refItem
	}
	b.Counter.Reset()
	if _, err := newCoordinator().Start(ctx, &engine.StartParams{Plan: plan, SagaID: id, Input: map[string]any{"doc": strings.Repeat("d", 1<<20)}}); err != nil {
		t.Fatal(err)
	}
	s := objects.Stats()
	prevItem, prevRefItem := row("start", snapshot(b, "start"), s.Puts, s.Gets, 0, 0)
	steps := 0
	for range 20 {
		ds, err := b.Queue.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1, Wait: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		msg, _ := durable.DecodeMessage(ds[0].Body)
		b.Counter.Reset()
		before := objects.Stats()
		out, err := newCoordinator().Handle(ctx, ds[0].Body)
		if err == nil && out == engine.HandledExpired {
			// The end: the saga's objects marked to expire with it (a
			// listing and a copy each), not a step of the table's rows.
			_ = b.Queue.Delete(ctx, &durable.DeleteParams{Queue: ds[0].Queue, ReceiptHandle: ds[0].ReceiptHandle})
			continue
		}
		if err != nil || out != engine.HandledStep {
			t.Fatalf("handle %s: %s %v", msg.Step, out, err)
		}
		c := snapshot(b, msg.Step)
		after := objects.Stats()
		_ = b.Queue.Delete(ctx, &durable.DeleteParams{Queue: ds[0].Queue, ReceiptHandle: ds[0].ReceiptHandle})
		if c.reads != 1 || c.writes != 1 || after.Puts-before.Puts != 1 || after.Gets-before.Gets > 2 {
			t.Errorf("step %s: %d reads, %d writes, %d puts, %d gets; want 1, 1, 1 (its new version) and at most 2 (the versions it reads)",
				msg.Step, c.reads, c.writes, after.Puts-before.Puts, after.Gets-before.Gets)
		}
		prevItem, prevRefItem = row(msg.Step, c, after.Puts-before.Puts, after.Gets-before.Gets, prevItem, prevRefItem)
		steps++
	}
	st, err := newCoordinator().Get(ctx, id)
	if err != nil || st.Status != durable.StatusSucceeded || steps != 5 {
		t.Fatalf("%v %v after %d steps", st, err, steps)
	}
	if got := st.Vars["doc"].(map[string]any)["text"].(string); len(got) != 1<<20 || !strings.HasPrefix(got, "s4") {
		t.Fatal("the document did not come through the 5 steps")
	}
	if s := objects.Stats(); s.Objects != 6 || s.Puts != 6 {
		t.Fatalf("objects %+v: want the input and 5 versions, each put once", s)
	}
	line := fmt.Sprintf("| per action step, the start's share included | | | | $%.2f | | | $%.2f (%.0fx) |", offTotal/float64(steps)*1e6, inTotal/float64(steps)*1e6, inTotal/offTotal)
	t.Log(line)
	report(t, line)
}

// commas writes n with thousands separators.
func commas(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestLargeValueCostChained runs documentSaga as a deployed function
// would with chains on (the default): the start's message runs the 5
// steps in one invocation, each from the state it holds, its cache warm.
// It prints what a step costs then; make bench prints it under the table
// of TestLargeValueCost.
func TestLargeValueCostChained(t *testing.T) {
	b := awstest.New(t)
	b.Counter.Skip(accounting.EventualReads) // the pauses' and limits' caches: TestPauseEconomy, TestLimitRequestsAsBilled
	plan, err := saga.Compile("document.yaml", []byte(documentSaga), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistry()
	reg.MustRegister("edit", func(ctx context.Context, c saga.Call) (any, error) {
		doc := c.Input.(map[string]any)["doc"].(string)
		return map[string]any{"text": c.Step + doc[len(c.Step):]}, nil
	})
	objects := memobjects.New()
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: b.Store, Queue: b.Queue, Actions: reg, Objects: objects})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const id = "large-doc-chained"
	if _, err := coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: id, Input: map[string]any{"doc": strings.Repeat("d", 1<<20)}}); err != nil {
		t.Fatal(err)
	}
	ds, err := b.Queue.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1, Wait: time.Second})
	if err != nil || len(ds) != 1 {
		t.Fatalf("%v %v", ds, err)
	}
	b.Counter.Reset()
	before := objects.Stats()
	if out, err := coord.Handle(ctx, ds[0].Body); err != nil || out != engine.HandledStep {
		t.Fatalf("handle: %s %v", out, err)
	}
	c, after := snapshot(b, "chain"), objects.Stats()
	st, err := coord.Get(ctx, id)
	if err != nil || st.Status != durable.StatusSucceeded {
		t.Fatalf("%v %v: the chain did not run the saga to its end", st, err)
	}
	puts, gets := after.Puts-before.Puts, after.Gets-before.Gets
	if c.reads != 1 || c.writes != 5 || puts != 5 || gets != 0 {
		t.Errorf("the chain: %d reads, %d writes, %d puts, %d gets; want 1, 5, 5 (a version each) and 0", c.reads, c.writes, puts, gets)
	}
	off := c.billedWRU*priceWRU + c.billedRRU*priceRRU + float64(puts)*priceS3Put + float64(gets)*priceS3Get
	line := fmt.Sprintf("| chained: the 5 steps in one invocation, per step | | %.1f WRU, %.1f RRU | %.0f PUT, %.0f GET | $%.2f | | | |",
		c.billedWRU/5, c.billedRRU/5, float64(puts)/5, float64(gets)/5, off/5*1e6)
	t.Log(line)
	report(t, line)
}
