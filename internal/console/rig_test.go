package console_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/console"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// orderSaga holds stock, then waits for an approval, then ships: a saga
// that waits (await) until it is signalled or cancelled.
const orderSaga = `saga: order
input: {order_id: string}
steps:
  - id: reserve
    action: stock.reserve
    with: {order_id: "${input.order_id}"}
    compensate: {action: stock.release, with: {order_id: "${input.order_id}"}}
  - id: approval
    await: {signal: approved, timeout: 1h}
    out: decision
  - id: ship
    action: shipping.send
    with: {order_id: "${input.order_id}"}
`

// refundSaga books a refund, then fails; the booking's compensation fails
// until the rig's stock service is fixed: the saga parks in
// compensation_failed.
const refundSaga = `saga: refund
input: {order_id: string}
steps:
  - id: book
    action: ledger.book
    with: {order_id: "${input.order_id}"}
    compensate: {action: ledger.unbook, with: {order_id: "${input.order_id}"}, retry: {attempts: 1}}
  - id: pay
    action: payments.refund
    with: {order_id: "${input.order_id}"}
    retry: {attempts: 1}
`

// webhookSaga waits for its charge's callback.
const webhookSaga = `saga: webhook
input: {order_id: string}
steps:
  - id: charge
    action: payments.request
    with: {order_id: "${input.order_id}"}
    callback: {timeout: 1h}
    out: payment
`

// cardSaga charges a card, marked secret, and echoes what it charged in
// its vars; the gateway declines it, naming the card.
const cardSaga = `saga: card
input: {order_id: string, card: secret string}
steps:
  - id: hold
    action: stock.reserve
    with: {order_id: "${input.order_id}", card: "${input.card}"}
    out: held
    compensate: {action: stock.release, with: {order_id: "${input.order_id}"}}
  - id: charge
    action: payments.decline
    with: {card: "${input.card}"}
`

// heldSaga books, then pays; the payment fails until the rig's ledger is
// fixed, and the saga is held for an operator.
const heldSaga = `saga: held
input: {order_id: string}
on_failure: hold
steps:
  - id: book
    action: ledger.book
    with: {order_id: "${input.order_id}"}
    compensate: {action: ledger.cancel, with: {order_id: "${input.order_id}"}}
  - id: pay
    action: payments.flaky
    with: {order_id: "${input.order_id}"}
    retry: {attempts: 1}
`

// rig is an in-process runtime on memory, its console, and a server.
type rig struct {
	rt    *embedded.Runtime
	src   *console.Coordinator
	con   *console.Server
	srv   *httptest.Server
	fixed atomic.Bool // ledger.unbook succeeds
	plans map[string]*saga.Plan
}

// newRig runs the runtime on memory, or, given a backend, on its table
// and queues on the emulators.
func newRig(t *testing.T, on ...*awstest.Backend) *rig {
	t.Helper()
	r := &rig{plans: map[string]*saga.Plan{}}
	actions := engine.NewRegistry()
	actions.SetFallback(func(ctx context.Context, call saga.Call) (any, error) {
		switch call.Action {
		case "ledger.unbook":
			if !r.fixed.Load() {
				return nil, saga.Permanent(saga.NewError("LedgerDown", "the ledger refuses unbookings"))
			}
		case "payments.flaky":
			if !r.fixed.Load() {
				return nil, saga.NewError("PaymentsDown", "the payment service is down")
			}
		case "payments.refund":
			return nil, saga.Permanent(saga.NewError("CardExpired", "the card expired"))
		case "payments.decline":
			card, _ := call.Input.(map[string]any)["card"].(string)
			return nil, saga.Permanent(saga.NewError("CardDeclined", "card "+card+" declined"))
		case "stock.reserve":
			return call.Input, nil // the service echoes what it got, card included
		}
		return map[string]any{"ok": true}, nil
	})
	rec := &console.Recorder{}
	cfg := embedded.Config{Actions: actions, Workers: 1, OnStep: rec.OnStep, TickInterval: 20 * time.Millisecond}
	for _, b := range on {
		cfg.Store, cfg.Queue, cfg.Receiver = b.Store, b.Queue, b.Queue
		cfg.Visibility, cfg.PollInterval = 5*time.Second, 20*time.Millisecond
	}
	rt, err := embedded.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	r.rt = rt
	r.src = &console.Coordinator{Coord: rt.Coordinator, Plans: engine.NewPlans(rt.Store, saga.Options{}), Recorder: rec}
	r.con, err = console.New(console.Config{Source: r.src})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(r.con)
	t.Cleanup(r.srv.Close)
	for name, src := range map[string]string{"order": orderSaga, "refund": refundSaga, "webhook": webhookSaga, "card": cardSaga, "held": heldSaga} {
		p, err := saga.Compile(name+".yaml", []byte(src), saga.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r.plans[name] = p
	}
	return r
}

// start starts a saga of the named definition and waits until it waits
// on a signal or a callback, or is final.
func (r *rig) start(t *testing.T, def, id string) *saga.State {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := r.rt.Coordinator.Start(ctx, &engine.StartParams{Plan: r.plans[def], SagaID: id, Input: map[string]any{"order_id": id}}); err != nil {
		t.Fatal(err)
	}
	st, err := r.rt.WaitReceiving(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitFor polls a saga until it is in status want.
func (r *rig) waitFor(t *testing.T, id string, want durable.Status) *saga.State {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		st, err := r.rt.Coordinator.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status == want && !r.rt.Coordinator.Unreported(id) {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("saga %s: %s, want %s", id, st.Status, want)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
