package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Forks under crashes, races and limits; the rig is in rig_test.go.

const bigForeachYAML = `saga: big
input: {items: list}
steps:
  - id: open
    action: orders.open
    with: {arg: open}
    compensate: {action: orders.close, with: {arg: close}}
  - id: each
    foreach: "${input.items}"
    concurrency: 5
    steps:
      - id: make
        action: blobs.make
        with: {arg: "${item}"}
        out: blob
        compensate: {action: blobs.drop, with: {arg: "${item}"}}
    out: blobs
`

// The children's outputs take the parent past saga.MaxStateBytes at the
// join (40 outputs of 10 KiB: 400 KiB). The join must fail the fork step
// with StateTooLarge, undo every child and compensate the step before the
// fork: the join is measured against the store's limit. Unmeasured, its
// write would fail with ErrTooLarge on every delivery, the join message
// would go to the dead-letter queue and the parent would wait on its fork
// for ever, its children never undone.
func TestJoinPastMaxStateBytesUndoesTheChildren(t *testing.T) {
	r := newFrig(t, bigForeachYAML, nil)
	r.outs["blobs.make"] = func() any { return strings.Repeat("x", 10<<10) }
	items := []any{}
	for i := range 40 {
		items = append(items, fmt.Sprintf("b%02d", i))
	}
	r.start("p", map[string]any{"items": items})
	r.drain()
	st := r.get("p")
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != lang.ErrorTypeStateTooLarge {
		t.Fatalf("parent %s (failure %+v), %d messages dead-lettered, handle errors:\n%s\nwant compensated with StateTooLarge",
			st.Status, st.Failure, r.dead(), firstLines(r.handleErrors(), 3))
	}
	log := r.effects()
	for _, it := range items {
		if n := countOf(log, fmt.Sprintf("blobs.drop(%v)", it)); n != 1 {
			t.Errorf("child %v dropped %d times, want 1", it, n)
		}
	}
	if log[len(log)-1] != "orders.close(close)" {
		t.Errorf("the step before the fork not undone last: %v", log)
	}
}

const twoBranchYAML = `saga: trip
steps:
  - id: book
    parallel:
      - steps:
          - {id: hotel, action: hotels.book, with: {arg: hotel}, out: h, compensate: {action: hotels.cancel, with: {arg: hotel}}}
      - steps:
          - {id: flight, action: flights.book, with: {arg: flight}, out: f, compensate: {action: flights.cancel, with: {arg: flight}}}
    out: booked
  - {id: pay, action: cards.charge, with: {arg: pay}}
`

// The join message reaches the dead-letter queue (its handler throttled
// on every receive: here ForkGet fails while the queue gives up on it).
// PROTOCOL "The sweep" promises to send again "the message of a saga
// whose message went to a dead-letter queue": for a parent waiting on a
// fork whose lanes are all exhausted, the sweep sends the join again,
// or the parent waits for ever although every child ended.
func TestSweepRecoversAJoinThatWentToTheDeadLetterQueue(t *testing.T) {
	r := newFrig(t, twoBranchYAML, nil)
	forkKey := durable.ForkKey("p", "book", 1)
	reads := 0
	r.store.setHook(func(op, key string) error {
		if op == "forkget" && key == forkKey {
			if reads++; reads > 2 { // the launches' reads pass; the join's fail
				return fmt.Errorf("%w: %w", durable.ErrThrottled, errInjected)
			}
		}
		return nil
	})
	r.start("p", nil)
	r.drain()
	if r.dead() == 0 {
		t.Fatalf("setup: no message dead-lettered (parent %s)", r.get("p").Status)
	}
	r.store.setHook(nil) // the throttling passes
	for range 3 {
		r.sweep()
		r.drain()
	}
	if st := r.get("p"); st.Status != durable.StatusSucceeded {
		t.Fatalf("after three sweeps the parent is %s, waiting on a fork whose children all succeeded: the join is lost for good", st.Status)
	}
}

const waitingBranchYAML = `saga: slow
steps:
  - id: fan
    parallel:
      - steps:
          - {id: book, action: rooms.book, with: {arg: room}, compensate: {action: rooms.cancel, with: {arg: room}}}
          - {id: hold, await: {signal: go, timeout: 72h}}
      - steps:
          - {id: book2, action: cars.book, with: {arg: car}, compensate: {action: cars.cancel, with: {arg: car}}}
  - {id: after, action: after.run, with: {arg: after}}
`

// A cancel of a parent waiting on a fork is written, and the send of its
// stop (the message that does the ForkFail and the cancel of the running
// children) fails; the caller never calls Cancel again. PROTOCOL: the
// sweep closes "a start, cancel or resume whose write landed and whose
// send did not, when the caller never tries again". For a parent waiting
// on a fork, the sweep sends the parent's own outbox (its stop) as well as
// its children's; otherwise the branch that awaits a signal keeps
// waiting, and the cancelled saga only compensates when the await times
// out, 72 hours later.
func TestSweepRedoesTheStopOfACancelWhoseSendFailed(t *testing.T) {
	r := newFrig(t, waitingBranchYAML, nil)
	ctx := context.Background()
	r.start("p", nil)
	r.drain() // branch 0 waits on its signal; branch 1 succeeded
	if st := r.get("p"); st.Status != durable.StatusWaiting {
		t.Fatalf("setup: parent %s", st.Status)
	}
	r.queue.setHook(func(m durable.Message) (bool, error) {
		if m.Kind == durable.KindStop {
			return false, errInjected
		}
		return false, nil
	})
	if _, err := r.coord.Cancel(ctx, "p"); err == nil {
		t.Fatal("setup: the stop's send did not fail")
	}
	r.queue.setHook(nil)
	for range 3 {
		r.sweep()
		r.drain()
	}
	st := r.get("p")
	if st.Status != durable.StatusCompensated {
		t.Fatalf("%s after a cancel and three sweeps (1.5 hours): the fork's children were never stopped; child 0 is %s",
			st.Status, r.get(durable.ChildID("p", "fan", 1, 0)).Status)
	}
}

// The saga's deadline passes while it waits on a fork whose branch awaits
// a signal: the tick sends the parent's timer message (its WakeAt is the
// deadline), and Handle takes it as the deadline firing, though the
// cursor is a fork's, not a wait's. The saga compensates with
// SagaDeadlineExceeded; the message must not be an error on every
// delivery and end in the dead-letter queue.
func TestDeadlineOfAParentWaitingOnAForkCompensates(t *testing.T) {
	src := strings.Replace(waitingBranchYAML, "saga: slow\n", "saga: slow\ntimeout: 2h\n", 1)
	src = strings.Replace(src, "timeout: 72h", "timeout: 119m", 1)
	r := newFrig(t, src, nil)
	ctx := context.Background()
	r.start("p", nil)
	r.drain()
	r.clock.Advance(2*time.Hour + time.Minute)
	if _, err := r.coord.Tick(ctx, &engine.TickParams{}); err != nil {
		t.Fatal(err)
	}
	// Handle the parent's own timer first (the queue gives no order).
	ds, err := r.q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range ds {
		m, err := durable.DecodeMessage(d.Body)
		if err != nil {
			t.Fatal(err)
		}
		if m.SagaID != "p" {
			continue
		}
		found = true
		if out, err := r.coord.Handle(ctx, d.Body); err != nil {
			t.Errorf("the parent's deadline message: %v (outcome %q); want it handled as the deadline firing", err, out)
		}
	}
	if !found {
		t.Fatalf("the tick sent no message for the parent (%d messages)", len(ds))
	}
	r.clock.Advance(time.Minute) // the rest become visible again
	r.drain()
	st := r.get("p")
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != lang.ErrorTypeDeadline {
		t.Fatalf("parent %s %+v; want compensated, deadline", st.Status, st.Failure)
	}
}

const parkingBranchYAML = `saga: park
steps:
  - id: fan
    parallel:
      - steps:
          - {id: a1, action: a.one, with: {arg: a1}, compensate: {action: a.undo, with: {arg: a1}}}
          - {id: a2, action: a.two, with: {arg: a2}}
      - steps:
          - {id: b1, action: b.one, with: {arg: b1}, compensate: {action: b.undo, with: {arg: b1}}}
  - {id: after, action: after.run, with: {arg: after}}
`

// A branch fails and its own compensation fails for good: the branch parks
// (compensation_failed), a1's effect still in place. The parent then must
// not report that everything was undone, nor let a catch on the fork go
// on: it parks too, so the branch an operator has to repair is not hidden.
// DEFINITIONS: "A child that parks (compensation_failed) parks its
// parent".
func TestABranchThatParksParksItsParent(t *testing.T) {
	r := newFrig(t, parkingBranchYAML, nil)
	r.fail["a.two(a2)"] = true
	r.fail["a.undo(a1)"] = true
	r.start("p", nil)
	r.drain()
	child := r.get(durable.ChildID("p", "fan", 1, 0))
	if child.Status != durable.StatusCompensationFailed {
		t.Fatalf("setup: branch 0 is %s", child.Status)
	}
	if st := r.get("p"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("parent %s (failure %+v) while branch 0 is parked with a1 not undone; want compensation_failed", st.Status, st.Failure)
	}
}

const awaitThenForkYAML = `saga: gated
steps:
  - {id: gate, await: {signal: go, timeout: 72h}}
  - id: fan
    parallel:
      - steps: [{id: x, action: xs.do, with: {arg: x}}]
      - steps: [{id: y, action: ys.do, with: {arg: y}}]
  - {id: after, action: after.run, with: {arg: after}}
`

// A signal leads the saga into a fork; the signal's write lands and its
// outbox (the launches) fails. The error says "send it again, with the
// same id, or the sweep sends it": the retry with the same id is a
// duplicate, and its re-sent outbox launches the children, rather than
// leave them uncreated until the sweep comes.
func TestASignalRetriedWithItsIDLaunchesTheFork(t *testing.T) {
	r := newFrig(t, awaitThenForkYAML, nil)
	ctx := context.Background()
	r.start("p", nil)
	r.drain()
	fails := 1
	r.store.setHook(func(op, key string) error {
		if op == "create" && key != "p" && fails > 0 {
			fails--
			return errInjected
		}
		return nil
	})
	if _, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "p", Name: "go", ID: "go-1"}); err == nil {
		t.Fatal("setup: the launch did not fail")
	}
	d, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "p", Name: "go", ID: "go-1"})
	if err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusSucceeded {
		_, cerr := r.coord.Get(ctx, durable.ChildID("p", "fan", 2, 0))
		t.Fatalf("after the retried signal (%s): parent %s, child 0: %v; want the fork launched and the saga done", d.Receipt, st.Status, cerr)
	}
}

const catchForkYAML = `saga: caught
steps:
  - id: fan
    parallel:
      - steps: [{id: a1, action: a.one, with: {arg: a1}, compensate: {action: a.undo, with: {arg: a1}}}]
      - steps: [{id: b1, action: b.one, with: {arg: b1}}]
    catch: [{errors: [Error], next: sorry}]
  - {id: done, succeed: {output: "ok"}}
  - {id: sorry, succeed: {output: "sorry"}}
`

// A cancel that lands while a failed fork undoes its children (the parent
// is running, the fork's catch will route the failure): the cancel is
// accepted, so it must win over the catch.
func TestCancelWhileAFailedForkUndoesBeatsItsCatch(t *testing.T) {
	r := newFrig(t, catchForkYAML, nil)
	r.fail["b.one(b1)"] = true
	r.start("p", nil)
	undoing := func() bool {
		st := r.get("p")
		cur, ok := st.Pending()
		return ok && cur.Fork && cur.Compensating
	}
	if !r.drainUntil(undoing) {
		t.Fatalf("setup: the parent never undid its children: %s", r.get("p").Status)
	}
	if _, err := r.coord.Cancel(context.Background(), "p"); err != nil {
		t.Logf("cancel refused: %v", err)
		return // refusing is fine too
	}
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != lang.ErrorTypeCancelled {
		t.Fatalf("a cancel accepted while the fork was undone: parent %s, output %v; want compensated, cancelled", st.Status, st.Output)
	}
}

// The join's write lands and its outbox (the parent's next action) is not
// sent (a crash between them). PROTOCOL, crash windows: "the message comes
// back and finds m + 1: the stored outbox is sent (rule 3)". The join
// handler follows rule 3 too: dropped as stale instead, the parent would
// sit in running with its next message unsent until a sweep found it
// idle (20 to 35 minutes, and only with a sweep deployed).
func TestAJoinWhoseOutboxWasLostIsSentOnRedelivery(t *testing.T) {
	r := newFrig(t, twoBranchYAML, nil)
	fails := 1
	r.queue.setHook(func(m durable.Message) (bool, error) {
		if m.SagaID == "p" && m.Step == "pay" && fails > 0 {
			fails--
			return false, errInjected
		}
		return false, nil
	})
	r.start("p", nil)
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusSucceeded {
		t.Fatalf("parent %s at version %d after the join's redelivery, no sweep: want succeeded (handle errors: %s)",
			st.Status, st.Version, firstLines(r.handleErrors(), 2))
	}
}

const threeBranchYAML = `saga: three
steps:
  - {id: first, action: first.do, with: {arg: first}, compensate: {action: first.undo, with: {arg: first}}}
  - id: fan
    parallel:
      - steps: [{id: a, action: a.do, with: {arg: a}, compensate: {action: a.undo, with: {arg: a}}}]
      - steps: [{id: b, action: b.do, with: {arg: b}, compensate: {action: b.undo, with: {arg: b}}}]
      - steps: [{id: c, action: c.do, with: {arg: c}, compensate: {action: c.undo, with: {arg: c}}}]
  - {id: last, action: last.do, with: {arg: last}}
`

// A failed fork undoes the branches that succeeded, highest first (b,
// then a); b's compensation fails for good, b parks and the parent parks.
// The operator fixes b's service and resumes b, then the parent. The rest
// of the failed fork's undo list (UndoNext) survives the park: a is
// undone before the compensation stack (first), or a's booking would
// never be cancelled although the saga ends "compensated".
func TestResumeAfterAParkedUndoOfAFailedForkUndoesTheRest(t *testing.T) {
	r := newFrig(t, threeBranchYAML, nil)
	ctx := context.Background()
	r.fail["c.do(c)"] = true
	r.fail["b.undo(b)"] = true
	r.start("p", nil)
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("setup: parent %s %+v", st.Status, st.Failure)
	}
	r.mu.Lock()
	delete(r.fail, "b.undo(b)")
	r.mu.Unlock()
	b := durable.ChildID("p", "fan", 2, 1)
	if _, err := r.coord.Resume(ctx, b); err != nil {
		t.Fatalf("resume b: %v", err)
	}
	r.drain()
	// b's end goes to the parent, parked on it: the parent goes on by
	// itself (an operator's resume of it then finds nothing parked).
	if _, err := r.coord.Resume(ctx, "p"); err != nil && !errors.Is(err, saga.ErrInvalidEvent) {
		t.Fatalf("resume parent: %v", err)
	}
	r.drain()
	log := r.effects()
	st := r.get("p")
	if st.Status != durable.StatusCompensated || countOf(log, "a.undo(a)") != 1 || countOf(log, "b.undo(b)") != 1 || countOf(log, "first.undo(first)") != 1 {
		t.Fatalf("parent %s, effects %v: want a, b and first each undone once", st.Status, log)
	}
}

const threeBranchLaterFailYAML = `saga: three
steps:
  - {id: first, action: first.do, with: {arg: first}, compensate: {action: first.undo, with: {arg: first}}}
  - id: fan
    parallel:
      - steps: [{id: a, action: a.do, with: {arg: a}, compensate: {action: a.undo, with: {arg: a}}}]
      - steps: [{id: b, action: b.do, with: {arg: b}, compensate: {action: b.undo, with: {arg: b}}}]
      - steps: [{id: c, action: c.do, with: {arg: c}, compensate: {action: c.undo, with: {arg: c}}}]
  - {id: last, action: last.do, with: {arg: last}}
`

// A fork that succeeded is undone child by child when a later step fails
// (c, b, a); b's compensation fails for good and the parent parks. The
// operator undoes b by hand and skips it (SkipCompensation, "without
// running the compensation that failed"). The skip leaves the fork's
// entry on the stack, so a, which nobody undid yet, is still undone.
func TestSkipOfAParkedChildSkipsOnlyThatChild(t *testing.T) {
	r := newFrig(t, threeBranchLaterFailYAML, nil)
	ctx := context.Background()
	r.fail["last.do(last)"] = true
	r.fail["b.undo(b)"] = true
	r.start("p", nil)
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("setup: parent %s %+v", st.Status, st.Failure)
	}
	if _, err := r.coord.SkipCompensation(ctx, "p"); err != nil {
		t.Fatalf("skip: %v", err)
	}
	r.drain()
	log := r.effects()
	if st := r.get("p"); st.Status != durable.StatusCompensated || countOf(log, "a.undo(a)") != 1 || countOf(log, "first.undo(first)") != 1 {
		t.Fatalf("after skipping b: parent %s, effects %v; want a and first undone", st.Status, log)
	}
}

// A child's id is <parent>.<step>.<visit>.<index>, and a saga id may hold
// dots: a saga someone starts as "p.fan.1.0" would be taken for the first
// branch of saga p's fork, the branch would never run, and the fork would
// never close, or join the stranger's output as its branch's. A start
// with an id of a child's form is refused, and the launch checks that a
// saga it meets is its child.
func TestAChildIDCannotBeTakenByAnotherSaga(t *testing.T) {
	r := newFrig(t, twoBranchYAML, nil)
	ctx := context.Background()
	other := mustCompile(t, "saga: other\nsteps:\n  - {id: o, action: others.do, with: {arg: other}}\n")
	// No saga can take a child's id.
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: other, SagaID: "p.book.1.0"}); err == nil || !strings.Contains(err.Error(), "has the form of a child run's id") {
		t.Fatalf("a start with a child's id: %v", err)
	}
	r.start("p", nil)
	r.drain()
	log := r.effects()
	st := r.get("p")
	if !slices.Contains(log, "hotels.book(hotel)") || st.Status != durable.StatusSucceeded {
		t.Fatalf("parent %s, effects %v: the hotel branch never ran (its id belongs to another saga)", st.Status, log)
	}
}

// The same parked branch, seen by an operator: listing the sagas in
// compensation_failed (sagactl list, the alarm's runbook) must show the
// branch or its parent. Branches are unlisted, so the parent must park:
// otherwise the unrepaired a1 is invisible (and the parent expires with
// the table's TTL).
func TestAParkedBranchCanBeFound(t *testing.T) {
	r := newFrig(t, parkingBranchYAML, nil)
	r.fail["a.two(a2)"] = true
	r.fail["a.undo(a1)"] = true
	r.start("p", nil)
	r.drain()
	res, err := r.coord.List(context.Background(), &durable.SagaListParams{Status: durable.StatusCompensationFailed})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sagas) == 0 {
		t.Fatalf("no saga listed in compensation_failed, though branch %s is parked (parent %s)",
			durable.ChildID("p", "fan", 1, 0), r.get("p").Status)
	}
}

// A branch parks while the other branch still waits on a signal; the
// operator repairs the service and resumes the branch while its parent
// still waits on the fork. The branch ends compensated, its repeated end
// is handled, and once the fork closes the parent compensates with both
// branches' effects undone once.
func TestResumeOfAParkedChildWhileItsParentWaits(t *testing.T) {
	src := `saga: park2
steps:
  - id: fan
    parallel:
      - steps:
          - {id: a1, action: a.one, with: {arg: a1}, compensate: {action: a.undo, with: {arg: a1}}}
          - {id: a2, action: a.two, with: {arg: a2}}
      - steps:
          - {id: b1, action: b.one, with: {arg: b1}, compensate: {action: b.undo, with: {arg: b1}}}
          - {id: hold, await: {signal: go, timeout: 72h}}
  - {id: after, action: after.run, with: {arg: after}}
`
	r := newFrig(t, src, nil)
	ctx := context.Background()
	r.fail["a.two(a2)"] = true
	r.fail["a.undo(a1)"] = true
	r.start("p", nil)
	a := durable.ChildID("p", "fan", 1, 0)
	if !r.drainUntil(func() bool { return r.get(a).Status == durable.StatusCompensationFailed }) {
		t.Fatalf("setup: branch 0 is %s", r.get(a).Status)
	}
	r.mu.Lock()
	delete(r.fail, "a.undo(a1)")
	r.mu.Unlock()
	if _, err := r.coord.Resume(ctx, a); err != nil {
		t.Fatal(err)
	}
	r.drain()
	st := r.get("p")
	log := r.effects()
	if st.Status != durable.StatusCompensated || countOf(log, "a.undo(a1)") != 1 || countOf(log, "b.undo(b1)") != 1 {
		t.Fatalf("parent %s, effects %v; handle errors: %s", st.Status, log, firstLines(r.handleErrors(), 3))
	}
}

// A fork that succeeded is undone when a later step fails; b's
// compensation fails for good, b parks and so does the parent. The
// operator repairs b's service and resumes the parent ("Resume continues
// the compensation of a saga parked in compensation_failed"). The
// parent's resume resumes b, which is still parked: an undo sent to a
// parked b would answer at once that it parked, and the parent would park
// again, never making progress.
func TestResumeOfAParentParkedOnAChildResumesTheChild(t *testing.T) {
	r := newFrig(t, threeBranchLaterFailYAML, nil)
	ctx := context.Background()
	r.fail["last.do(last)"] = true
	r.fail["b.undo(b)"] = true
	r.start("p", nil)
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("setup: parent %s %+v", st.Status, st.Failure)
	}
	r.mu.Lock()
	delete(r.fail, "b.undo(b)")
	r.mu.Unlock()
	if _, err := r.coord.Resume(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	log := r.effects()
	if st := r.get("p"); st.Status != durable.StatusCompensated || countOf(log, "b.undo(b)") != 1 || countOf(log, "a.undo(a)") != 1 {
		t.Fatalf("after the parent's resume: parent %s (%v), branch b %s, effects %v",
			st.Status, st.CompensationError, r.get(durable.ChildID("p", "fan", 2, 1)).Status, log)
	}
}

// A fork visited twice (a loop back to it) is two entries on the stack:
// when the saga compensates, the children of both visits are undone, the
// later visit's first.
func TestAForkVisitedTwiceIsUndoneTwice(t *testing.T) {
	src := `saga: twice
steps:
  - {id: init, set: {n: "${0}"}}
  - id: fan
    parallel:
      - steps: [{id: a, action: a.do, with: {arg: "${vars.n}"}, compensate: {action: a.undo, with: {arg: "${vars.n}"}}}]
  - {id: inc, set: {n: "${vars.n + 1}"}}
  - id: again
    switch:
      - {if: "${vars.n < 2}", next: fan}
      - {default: last}
  - {id: last, action: last.do, with: {arg: last}}
`
	r := newFrig(t, src, nil)
	r.fail["last.do(last)"] = true
	r.start("p", nil)
	r.drain()
	log := r.effects()
	want := []string{"a.do(0)", "a.do(1)", "a.undo(1)", "a.undo(0)"}
	if st := r.get("p"); st.Status != durable.StatusCompensated || !slices.Equal(log, want) {
		t.Fatalf("parent %s, effects %v, want %v", st.Status, log, want)
	}
}

// A cancel lands between the fork's write and its launches (the launcher
// died): the cancel's stop creates the children stopped, and the saga
// compensates without running any branch.
func TestCancelBeforeTheLaunchesRunsNoBranch(t *testing.T) {
	r := newFrig(t, twoBranchYAML, nil)
	ctx := context.Background()
	r.store.setHook(func(op, key string) error {
		if op == "create" && key != "p" {
			return errInjected
		}
		return nil
	})
	// The first step forks at once: the start's launches fail.
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: r.plan, SagaID: "p"}); err == nil {
		t.Fatal("setup: the launches did not fail")
	}
	r.store.setHook(nil)
	if _, err := r.coord.Cancel(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	st := r.get("p")
	if st.Status != durable.StatusCompensated || len(r.effects()) != 0 {
		t.Fatalf("parent %s %+v, effects %v", st.Status, st.Failure, r.effects())
	}
}

// A branch awaits a signal; the caller signals the saga it started (the
// parent: branch ids are derived and unlisted, and no document says to
// signal them). The parent, waiting on its fork, must not keep the signal
// for an await of its own that does not exist (ReceiptKept, "delivered")
// while the branch's await times out and the saga compensates. Either the
// signal reaches the branch that awaits it, or the caller is told it went
// nowhere.
func TestASignalForABranchsAwaitIsNotSwallowedByTheParent(t *testing.T) {
	src := `saga: approve
steps:
  - id: fan
    parallel:
      - steps:
          - {id: ask, action: asks.send, with: {arg: ask}}
          - {id: wait_ok, await: {signal: approved, timeout: 1h}, out: ok}
      - steps: [{id: other, action: others.do, with: {arg: other}}]
  - {id: after, action: after.do, with: {arg: after}}
`
	r := newFrig(t, src, nil)
	ctx := context.Background()
	r.start("p", nil)
	r.drain() // the branch waits on its signal
	d, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "p", Name: "approved", Payload: map[string]any{"by": "boss"}, ID: "ok-1"})
	if err != nil {
		t.Logf("the signal was refused (fine): %v", err)
		return
	}
	r.clock.Advance(2 * time.Hour)
	if _, err := r.coord.Tick(ctx, &engine.TickParams{}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusSucceeded {
		t.Fatalf("the signal was answered %s, yet the branch never got it: parent %s %+v", d.Receipt, st.Status, st.Failure)
	}
}

// A cancel of a saga whose fork's branch itself waits on a fork must
// reach every level although one store call among the many it makes
// fails once, and the caller does not call Cancel again (a client gives
// up; the sweep is not due for an hour). The stop is a queued message:
// Cancel writes the saga and sends it, and its handler, retried as any
// message is, stops one level. Done inside the caller's Cancel, one
// failure anywhere in the tree would fail the whole call, and the
// grandchild would keep waiting, its parents with it, until the sweep.
func TestACancelReachesEveryLevelOfNestedForksWithoutTheCaller(t *testing.T) {
	const src = `saga: nest
steps:
  - id: outer
    parallel:
      - steps:
          - {id: book, action: rooms.book, with: {arg: room}, compensate: {action: rooms.cancel, with: {arg: room}}}
          - id: inner
            parallel:
              - steps:
                  - {id: hold, await: {signal: go, timeout: 72h}}
              - steps:
                  - {id: pay, action: cards.charge, with: {arg: card}, compensate: {action: cards.refund, with: {arg: card}}}
      - steps:
          - {id: car, action: cars.book, with: {arg: car}, compensate: {action: cars.cancel, with: {arg: car}}}
`
	r := newFrig(t, src, nil)
	ctx := context.Background()
	r.start("p", nil)
	r.drain() // the grandchild awaits its signal; everything else succeeded
	branch := durable.ChildID("p", "outer", 1, 0)
	held := durable.ChildID(branch, "inner", 2, 0)
	if st := r.get(held); st.Status != durable.StatusWaiting {
		t.Fatalf("setup: the grandchild is %s", st.Status)
	}
	failed := false
	r.store.setHook(func(op, key string) error {
		if op == "update" && key == held && !failed {
			failed = true
			return errInjected // the grandchild's cancel fails, once
		}
		return nil
	})
	_, err := r.coord.Cancel(ctx, "p")
	t.Logf("cancel: %v", err) // the caller does not try again
	r.drain()
	for _, id := range []string{"p", branch, held} {
		if st := r.get(id); !st.Status.Final() {
			t.Errorf("%s is %s after the cancel and every message handled: the cancel never reached it (handle errors: %s)", id, st.Status, r.handleErrors())
		}
	}
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Errorf("the saga is %s, want compensated", st.Status)
	}
	if e := r.effects(); countOf(e, "rooms.cancel(room)") != 1 || countOf(e, "cards.refund(card)") != 1 || countOf(e, "cars.cancel(car)") != 1 {
		t.Errorf("effects %v: want each booking undone once", e)
	}
}

// A cancel's stop records the fork's failure, and then fails to cancel a
// running branch until the stop is dead-lettered. The sweep must cancel
// that branch: the fork record says the fork failed, so the sweep's
// check for a lost stop (no failure recorded) does not see it, and the
// branch's own outbox, sent again, does not stop it.
func TestSweepCancelsABranchItsForksStopMissed(t *testing.T) {
	r := newFrig(t, waitingBranchYAML, nil)
	ctx := context.Background()
	r.start("p", nil)
	r.drain() // branch 0 waits on its signal; branch 1 succeeded
	held := durable.ChildID("p", "fan", 1, 0)
	r.store.setHook(func(op, key string) error {
		if op == "update" && key == held {
			return errInjected
		}
		return nil
	})
	if _, err := r.coord.Cancel(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if r.dead() == 0 || r.get(held).Status != durable.StatusWaiting {
		t.Fatalf("setup: %d dead letters, branch %s", r.dead(), r.get(held).Status)
	}
	r.store.setHook(nil)
	for range 3 {
		r.sweep()
		r.drain()
	}
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("%s after a cancel and three sweeps: branch 0 is %s, never stopped", st.Status, r.get(held).Status)
	}
}

// A failed fork with a catch undoes its children before the catch takes
// the failure, the saga "running" meanwhile. Its undo parks on a child,
// and an operator resumes it after the saga's deadline. The deadline goes
// past every catch, so the saga compensates from the resume on: the
// resume must not set it running again for the catch to take the failure.
func TestAResumePastTheDeadlineOfACaughtForksUndoCompensates(t *testing.T) {
	src := strings.Replace(catchForkYAML, "saga: caught\n", "saga: caught\ntimeout: 10m\n", 1)
	r := newFrig(t, src, nil)
	r.fail["b.one(b1)"] = true
	r.fail["a.undo(a1)"] = true
	r.start("p", nil)
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("setup: parent %s, want parked on branch 0's undo", st.Status)
	}
	r.fail["a.undo(a1)"] = false
	r.clock.Advance(time.Hour)
	st, err := r.coord.Resume(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status == durable.StatusRunning {
		t.Errorf("the resume past the deadline set the saga running")
	}
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensated || st.Output == "sorry" {
		t.Fatalf("parent %s, output %v: want compensated (its deadline passed)", st.Status, st.Output)
	}
}

// A resume of a parent parked on a child resumes the child first. The
// operator's resume fails after the child's resume was written and
// before its message was sent; the operator resumes again, and that
// resume's own send fails too; then once more. Each repeat goes on as a
// resume repeated after a lost send does, its stored messages sent
// again: a child found compensating, not parked, is sent its message
// again (not taken for resumed and sent nothing), and a parent whose
// resume set it running (a caught fork's undo) accepts the repeat (not
// refused as invalid, its own lost send never redone).
func TestARepeatedResumeSendsWhatALostSendDidNot(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		fail      []string
		want      durable.Status
	}{
		{"compensating", threeBranchLaterFailYAML, []string{"last.do(last)", "b.undo(b)"}, durable.StatusCompensated},
		{"caught", catchForkYAML, []string{"b.one(b1)", "a.undo(a1)"}, durable.StatusSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFrig(t, tc.src, nil)
			ctx := context.Background()
			for _, f := range tc.fail {
				r.fail[f] = true
			}
			r.start("p", nil)
			r.drain()
			if st := r.get("p"); st.Status != durable.StatusCompensationFailed {
				t.Fatalf("setup: parent %s %+v", st.Status, st.Failure)
			}
			r.mu.Lock()
			delete(r.fail, tc.fail[1])
			r.mu.Unlock()
			r.queue.setHook(func(durable.Message) (bool, error) { return false, errInjected })
			for range 2 {
				if _, err := r.coord.Resume(ctx, "p"); err == nil {
					t.Fatal("setup: the resume's send did not fail")
				}
			}
			r.queue.setHook(nil)
			if _, err := r.coord.Resume(ctx, "p"); err != nil {
				t.Fatalf("a resume repeated after lost sends: %v", err)
			}
			r.drain()
			if st := r.get("p"); st.Status != tc.want {
				t.Fatalf("parent %s after the resumes, want %s; effects %v", st.Status, tc.want, r.effects())
			}
		})
	}
}

// A fork stopped from outside (a cancel) while a lane's child has ended
// uncounted (its end's message lost): the stop sends that child's
// message again. When the read of the child it needs for that fails, the
// stop fails with it and comes back, rather than going on without it and
// leaving the saga waiting on the fork for good.
func TestForkStopRetriesWhenItCannotReadAnEndedChild(t *testing.T) {
	r := newFrig(t, twoBranchYAML, nil)
	flight := durable.ChildID("p", "book", 1, 1)
	r.queue.setHook(func(m durable.Message) (bool, error) {
		return m.Kind == durable.KindEnded && m.SagaID == flight, nil // its end's message is lost
	})
	r.start("p", nil)
	r.drain()
	r.queue.setHook(nil)
	if st := r.get("p"); st.Status != durable.StatusWaiting {
		t.Fatalf("the saga is %s, want waiting on the fork", st.Status)
	}
	gets := 0
	r.store.setHook(func(op, key string) error {
		if op == "get" && key == flight {
			if gets++; gets == 2 { // the cancel's read passes; the stop's, after it, fails
				return fmt.Errorf("%w: %w", durable.ErrThrottled, errInjected)
			}
		}
		return nil
	})
	if _, err := r.coord.Cancel(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("the saga is %s after its cancel (%d reads of the flight), want compensated", st.Status, gets)
	}
}
