package saga_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// historyOf is st's history, one line an entry: version, cause and the
// status the transition moved to (on its first entry), then the step,
// ".undo" for a compensation, its outcome and attempt, and the error type.
func historyOf(t *testing.T, p *saga.Plan, st *saga.State) []string {
	t.Helper()
	entries, err := st.HistoryEntries(p)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	var out []string
	for _, e := range entries {
		line := ""
		if e.Opens {
			line = fmt.Sprintf("v%d %s", e.Version, e.Cause)
			if e.Status != "" {
				line += "->" + string(e.Status)
			}
			line += " | "
		} else {
			line = "  | "
		}
		step := e.Step
		if e.StepIndex < 0 {
			step = "-"
		}
		if e.Compensation {
			step += ".undo"
		}
		line += fmt.Sprintf("%s %s %d", step, e.Outcome, e.Attempt)
		if e.Error != nil {
			line += " " + e.Error.Type
		}
		if e.Signal != "" {
			line += " signal " + e.Signal
		}
		out = append(out, line)
	}
	return out
}

func sameLines(t *testing.T, got, want []string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestHistoryKeepsEveryTransitionInOrder(t *testing.T) {
	t.Parallel()
	p := mustCompileFile(t, "testdata/valid/order.yaml")
	r := drive(t, p, orderIn(1), failing("charge"))
	sameLines(t, historyOf(t, p, r.st), []string{
		"v1 start->running | reserve started 1",
		"v2 result | reserve completed 1",
		"  | route completed 1",
		"  | charge started 1",
		"v3 result->compensating | charge failed 1 Declined",
		"  | reserve.undo started 1",
		"v4 result->compensated | reserve.undo compensated 1",
	})
	if r.st.HistoryDropped != 0 {
		t.Fatalf("%d dropped", r.st.HistoryDropped)
	}
	entries, _ := r.st.HistoryEntries(p)
	// Times are the transitions' (drive moves its clock a second a call).
	if want := t0.Add(2 * time.Second); !entries[4].At.Equal(want) || !entries[5].At.Equal(want) {
		t.Fatalf("charge failed at %v and the undo started at %v, want %v", entries[4].At, entries[5].At, want)
	}
	if e := entries[4].Error; e.Step != "charge" || e.Message != "no" {
		t.Fatalf("error %+v", e)
	}
	if entries[0].Kind != lang.KindAction || entries[2].Kind != lang.KindSwitch || entries[0].FromOutside() {
		t.Fatalf("kinds %s %s, from outside %v", entries[0].Kind, entries[2].Kind, entries[0].FromOutside())
	}
	// Without the plan, entries name steps by index.
	bare, err := r.st.HistoryEntries(nil)
	if err != nil || bare[3].Step != "" || bare[3].StepIndex != entries[3].StepIndex || bare[3].StepIndex < 0 {
		t.Fatalf("without the plan: %+v %v", bare[3], err)
	}
}

func TestHistoryRetriesAndDurations(t *testing.T) {
	t.Parallel()
	p := mustCompileFile(t, "testdata/valid/order.yaml")
	st := &saga.State{}
	in, _ := p.CheckInput(orderIn(1))
	at := t0
	step := func(ev saga.Event) {
		t.Helper()
		ev.Now, ev.Rand = at, 0.5
		if err := p.Advance(st, ev); err != nil {
			t.Fatal(err)
		}
	}
	step(saga.Event{Kind: saga.EventStart, SagaID: "h-1", Input: in})
	at = t0.Add(1500 * time.Millisecond)
	step(saga.Event{Kind: saga.EventResult, Err: errors.New("timeout talking to the warehouse"), Took: 1234 * time.Millisecond})
	at = t0.Add(3 * time.Second)
	step(saga.Event{Kind: saga.EventResult, Output: map[string]any{"id": "r-1"}, Took: 40 * time.Millisecond})
	entries, err := st.HistoryEntries(p)
	if err != nil {
		t.Fatal(err)
	}
	sameLines(t, historyOf(t, p, st), []string{
		"v1 start->running | reserve started 1",
		"v2 result | reserve retrying 1 Error",
		"v3 result | reserve completed 2",
		"  | route completed 1",
		"  | charge started 1",
	})
	retry, done := entries[1], entries[2]
	if !retry.Timed || retry.Took != 1234*time.Millisecond || retry.Delay <= 0 || retry.Error.Message != "timeout talking to the warehouse" {
		t.Fatalf("retry entry %+v", retry)
	}
	if !done.Timed || done.Took != 40*time.Millisecond || !done.At.Equal(t0.Add(3*time.Second)) || entries[3].Timed {
		t.Fatalf("completed entry %+v; the next %+v", done, entries[3])
	}
	if entries[0].Timed {
		t.Fatal("a start took no action call")
	}
}

func TestHistoryOfWhatCameFromOutside(t *testing.T) {
	t.Parallel()
	p := mustCompileFile(t, "testdata/valid/order.yaml")
	st := &saga.State{}
	in, _ := p.CheckInput(orderIn(1))
	step := func(ev saga.Event) {
		t.Helper()
		ev.Now = t0
		if err := p.Advance(st, ev); err != nil {
			t.Fatal(err)
		}
	}
	step(saga.Event{Kind: saga.EventStart, SagaID: "c-1", Input: in})
	step(saga.Event{Kind: saga.EventResult, Output: map[string]any{"id": "r-1"}})
	step(saga.Event{Kind: saga.EventCancel}) // charge pending: waits for its outcome
	step(saga.Event{Kind: saga.EventResult, Output: map[string]any{"id": "p-1", "status": "captured"}})
	step(saga.Event{Kind: saga.EventResult}) // refunded
	step(saga.Event{Kind: saga.EventResult, Err: saga.Permanent(errors.New("warehouse offline"))})
	step(saga.Event{Kind: saga.EventResume, Skip: true})
	sameLines(t, historyOf(t, p, st), []string{
		"v1 start->running | reserve started 1",
		"v2 result | reserve completed 1",
		"  | route completed 1",
		"  | charge started 1",
		"v3 cancel | -  0",
		"v4 result->compensating | charge completed 1",
		"  | charge.undo started 1",
		"v5 result | charge.undo compensated 1",
		"  | reserve.undo started 1",
		"v6 result->compensation_failed | reserve.undo compensation_failed 1 Error",
		"v7 resume->compensated | reserve.undo skipped 0",
	})
	entries, _ := st.HistoryEntries(p)
	if !entries[4].FromOutside() || !entries[10].FromOutside() || entries[5].FromOutside() {
		t.Fatal("FromOutside does not tell the cancel and the resume from the results")
	}
}

func TestHistoryOfSignals(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `saga: s
steps:
  - {id: open, action: acct.open}
  - {id: approve, await: {signal: approved, timeout: 1h}, out: who}
`)
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "sig-1", Input: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	// A signal that comes before its await is kept: the version stays.
	kept := saga.Event{Now: t0.Add(time.Second), Delivery: saga.Delivery{ID: "d-1", Signal: "approved", Payload: "ann"}}
	if got, err := p.Receive(st, &kept); err != nil || got != saga.ReceiptKept {
		t.Fatalf("receive: %s %v", got, err)
	}
	if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	sameLines(t, historyOf(t, p, st), []string{
		"v1 start->running | open started 1",
		"v1 signal | - kept 0 signal approved",
		"v2 result->succeeded | open completed 1",
		"  | approve completed 1",
	})
	// One that the await waits on is applied: a transition from outside.
	st = &saga.State{}
	_ = p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "sig-2", Input: map[string]any{}})
	_ = p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0})
	ev := saga.Event{Now: t0.Add(time.Minute), Delivery: saga.Delivery{ID: "d-2", Signal: "approved", Payload: "bob"}}
	if got, err := p.Receive(st, &ev); err != nil || got != saga.ReceiptApplied {
		t.Fatalf("receive: %s %v", got, err)
	}
	sameLines(t, historyOf(t, p, st), []string{
		"v1 start->running | open started 1",
		"v2 result->waiting | open completed 1",
		"  | approve waiting 1",
		"v3 signal->succeeded | approve completed 1",
	})
}

func TestHistoryOfAFork(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `saga: f
steps:
  - id: ship
    parallel:
      - steps: [{id: a, action: w}]
      - steps: [{id: b, action: w}]
`)
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "f-1", Input: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	entries, err := st.HistoryEntries(p)
	if err != nil || len(entries) != 1 {
		t.Fatalf("%+v %v", entries, err)
	}
	e := entries[0]
	if e.Step != "ship" || e.Outcome != saga.OutcomeWaiting || e.Fork == nil || e.Fork.Children != 2 || e.Fork.Seq != st.Cursors[0].Seq {
		t.Fatalf("fork entry %+v (fork %+v)", e, e.Fork)
	}
	// Its children's ids follow from it.
	if id := durable.ChildID(st.SagaID, e.Step, e.Fork.Seq, 1); id != "f-1.ship.1.1" {
		t.Fatalf("child id %s", id)
	}
}

// A long saga keeps its newest whole transitions within the bound and
// counts the entries it dropped.
func TestHistoryKeepsTheNewestWithinItsBound(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `saga: loop
steps:
  - {id: work, action: w, out: n}
  - {id: again, switch: [{if: "true", next: work}]}
`)
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "l-1", Input: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	total := 1
	for i := range 300 {
		if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0.Add(time.Duration(i) * time.Second), Output: int64(i)}); err != nil {
			t.Fatal(err)
		}
		total += 3
		if len(st.History) > saga.DefaultHistoryBytes {
			t.Fatalf("transition %d: history of %d bytes, over %d", i, len(st.History), saga.DefaultHistoryBytes)
		}
	}
	entries, err := st.HistoryEntries(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(entries) + int(st.HistoryDropped); got != total {
		t.Fatalf("%d kept + %d dropped = %d entries, want %d", len(entries), st.HistoryDropped, got, total)
	}
	if !entries[0].Opens || len(entries) < 100 {
		t.Fatalf("%d entries kept, the first opening its transition: %v", len(entries), entries[0].Opens)
	}
	if last := entries[len(entries)-1]; last.Version != st.Version || last.Step != "work" || last.Outcome != saga.OutcomeStarted {
		t.Fatalf("the newest entry %+v, at version %d", last, st.Version)
	}
	// The state round-trips with its history and count.
	b, _ := st.MarshalBinary()
	var got saga.State
	if err := got.UnmarshalBinary(b); err != nil || !reflect.DeepEqual(got.History, st.History) || got.HistoryDropped != st.HistoryDropped {
		t.Fatalf("round trip: %v, dropped %d", err, got.HistoryDropped)
	}
}

// One transition that runs more pure steps than the bound holds keeps its
// newest entries, under its own header.
func TestHistoryOfOneLongTransition(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("saga: sets\nsteps:\n")
	for i := range 500 {
		fmt.Fprintf(&b, "  - {id: s%d, set: {x: \"${%d}\"}}\n", i, i)
	}
	p := mustCompile(t, b.String())
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "long", Input: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	entries, err := st.HistoryEntries(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.History) > saga.DefaultHistoryBytes+32 || len(entries)+int(st.HistoryDropped) != 500 || st.HistoryDropped == 0 {
		t.Fatalf("%d bytes, %d entries kept, %d dropped", len(st.History), len(entries), st.HistoryDropped)
	}
	if first, last := entries[0], entries[len(entries)-1]; !first.Opens || first.Cause != saga.EventStart || first.Status != durable.StatusSucceeded || last.Step != "s499" {
		t.Fatalf("first %+v, last %+v", first, last)
	}
}

func TestHistoryBoundOption(t *testing.T) {
	t.Parallel()
	src := "saga: s\nsteps:\n  - {id: a, action: w}\n"
	off := mustCompileOpts(t, src, saga.Options{HistoryBytes: -1})
	st := &saga.State{}
	_ = off.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "o", Input: map[string]any{}})
	_ = off.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0})
	if st.History != nil || st.HistoryDropped != 0 {
		t.Fatalf("history kept with HistoryBytes -1: %d bytes", len(st.History))
	}
}

func TestHistoryCutsLongMessages(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, "saga: s\nsteps:\n  - {id: a, action: w}\n")
	st := &saga.State{}
	_ = p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "m", Input: map[string]any{}})
	long := strings.Repeat("é", 500)
	_ = p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0, Err: saga.Permanent(errors.New(long))})
	entries, err := st.HistoryEntries(p)
	if err != nil {
		t.Fatal(err)
	}
	msg := entries[1].Error.Message
	if len(msg) > saga.MaxHistoryMessageBytes || !strings.HasSuffix(msg, "…(cut)") || len(st.Failure.Message) <= saga.MaxHistoryMessageBytes {
		t.Fatalf("history message of %d bytes %q; failure of %d", len(msg), msg, len(st.Failure.Message))
	}
}

func TestHistoryDamagedIsAnError(t *testing.T) {
	t.Parallel()
	p := mustCompileFile(t, "testdata/valid/order.yaml")
	r := drive(t, p, orderIn(1), nil)
	good := r.st.History
	for n := 1; n < len(good); n++ {
		st := &saga.State{History: good[:n]}
		if entries, err := st.HistoryEntries(p); err == nil {
			// A cut on an entry's boundary reads as fewer entries.
			full, _ := r.st.HistoryEntries(p)
			if len(entries) >= len(full) {
				t.Fatalf("a prefix of %d/%d bytes read as the whole history", n, len(good))
			}
		}
	}
	st := &saga.State{History: []byte{0x7f}}
	if _, err := st.HistoryEntries(p); err == nil {
		t.Fatal("a bad head read")
	}
	// Advance goes on over a damaged history, without reading it; the
	// damage drops out with the oldest transitions.
	st = &saga.State{}
	_ = p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "d", Input: orderInChecked(t, p)})
	st.History = append([]byte{0x7f, 0x7f}, st.History...)
	for range 5 {
		if _, ok := st.Pending(); !ok {
			break
		}
		if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0, Output: map[string]any{"id": "x", "status": "captured"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.HistoryEntries(p); err == nil || st.Status != durable.StatusSucceeded {
		t.Fatalf("a damaged history read: %v (%s)", err, st.Status)
	}
}

func orderInChecked(t *testing.T, p *saga.Plan) map[string]any {
	in, err := p.CheckInput(orderIn(1))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func mustCompileOpts(t testing.TB, src string, opts saga.Options) *saga.Plan {
	t.Helper()
	p, err := saga.Compile("s.yaml", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
