package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/chaos"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// How the driver completes a saga's callback tokens.
const (
	cbComplete = "complete" // complete every token
	cbFlaky    = "flaky"    // fail attempt 1's token with Flaky (retried), complete the next
	cbDecline  = "decline"  // fail the token with Declined: the step fails, c is compensated
)

// script is what the driver does to one saga, as a user and a payment
// provider would: send its signal and complete its callback tokens.
type script struct {
	sigEarly bool   // signal right after the start, while a runs (kept), else once the saga awaits it
	sigTwice bool   // send the signal again after it was taken (a duplicate)
	sigDrop  bool   // first send through the dropping client: written, never sent; retried later
	cb       string // cbComplete, cbFlaky or cbDecline
	cbEarly  bool   // complete a token as soon as it is published (while the action runs: kept)
	cbTwice  bool   // send each completion again
	cbDrop   bool   // first completion of each token through the dropping client
}

func drawScript(rng *mrand.Rand) script {
	sc := script{
		sigEarly: rng.IntN(3) == 0, sigTwice: rng.IntN(5) == 0, sigDrop: rng.IntN(10) == 0,
		cb: cbComplete, cbEarly: rng.IntN(3) == 0, cbTwice: rng.IntN(5) == 0, cbDrop: rng.IntN(10) == 0,
	}
	switch r := rng.IntN(10); {
	case r == 0:
		sc.cb = cbDecline
	case r < 3:
		sc.cb = cbFlaky
	}
	return sc
}

// dropQueue accepts messages and sends none: a sender killed between its
// write and its send.
type dropQueue struct{}

func (dropQueue) Send(context.Context, []durable.Message) error { return nil }

// driver sends the sagas' signals and completes their callback tokens
// through the client, as users do, retrying with the same id after
// errors. It records every answer it gets, by delivery (the signal's id,
// or the token).
type driver struct {
	cl, dropper *client.Client
	tokenDir    string
	// newIDPerSend sabotages the driver (CHAOS_SABOTAGE=new-id-per-send):
	// each repeat of a signal gets a new id, so it is a second signal,
	// and signal_taken_at_most_once must catch it.
	newIDPerSend bool
	rng          *mrand.Rand
	rngMu        sync.Mutex

	mu       sync.Mutex
	answers  map[string][]string       // delivery -> receipts, or "error: ..."
	unknown  map[string]bool           // a delivery whose write may have landed unseen
	errs     map[string][]string       // delivery -> the errors its sends got
	tokens   map[string]map[int]string // saga -> attempt -> the token the driver handled
	outcomes map[string]string         // token -> "complete" or the failure's type
	sends    map[string]int            // "signal", "callback" -> sends, duplicates and drops included
}

func newDriver(cl, dropper *client.Client, tokenDir string, seed uint64) *driver {
	return &driver{cl: cl, dropper: dropper, tokenDir: tokenDir, rng: mrand.New(mrand.NewPCG(seed, 13)),
		answers: map[string][]string{}, unknown: map[string]bool{}, errs: map[string][]string{}, tokens: map[string]map[int]string{}, outcomes: map[string]string{}, sends: map[string]int{}}
}

func (d *driver) intN(n int) int {
	d.rngMu.Lock()
	defer d.rngMu.Unlock()
	return d.rng.IntN(n)
}

// refused: an answer that is final: the saga will never take this delivery.
func refused(err error) bool {
	return errors.Is(err, saga.ErrNotReceiving) || errors.Is(err, saga.ErrTokenNotAwaited) || errors.Is(err, saga.ErrBadToken) ||
		errors.Is(err, saga.ErrBadDelivery) || errors.Is(err, saga.ErrKeptFull) || errors.Is(err, durable.ErrNotFound)
}

func (d *driver) note(key, kind string, r *engine.Delivered, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sends[kind]++
	if err != nil {
		d.errs[key] = append(d.errs[key], err.Error())
	}
	switch {
	case err == nil:
		d.answers[key] = append(d.answers[key], string(r.Receipt))
	case refused(err):
		d.answers[key] = append(d.answers[key], "refused")
	default:
		// Written or not: the sender cannot tell; its retry, with the
		// same id, says (duplicate) or does it.
		d.answers[key] = append(d.answers[key], "error")
		d.unknown[key] = true
	}
}

// send delivers one signal or completion: first through the dropping
// client when drop (then again later, as a sender that restarts), retried
// with the same id after errors until an answer, and sent once more when
// twice.
func (d *driver) send(ctx context.Context, key, kind string, drop, twice bool, do func(*client.Client) (*engine.Delivered, error)) {
	if drop {
		d.mu.Lock()
		d.sends[kind+" dropped"]++
		d.mu.Unlock()
		r, err := do(d.dropper)
		d.note(key, kind, r, err)
		time.Sleep(time.Duration(500+d.intN(1500)) * time.Millisecond)
	}
	for end := time.Now().Add(30 * time.Second); ; {
		r, err := do(d.cl)
		d.note(key, kind, r, err)
		if err == nil || refused(err) || time.Now().After(end) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if twice {
		r, err := do(d.cl)
		d.note(key, kind, r, err)
	}
}

func signalKey(sagaID string) string { return "sig-" + sagaID }

// run drives one saga until it is final: its signal (early, or once it
// awaits), then each callback token ledger.do publishes (at once, or once
// the saga waits on it).
func (d *driver) run(ctx context.Context, id string, sc script) {
	signal := func() {
		key, sent := signalKey(id), 0
		d.send(ctx, key, "signal", sc.sigDrop, sc.sigTwice, func(c *client.Client) (*engine.Delivered, error) {
			sent++
			sid := key
			if d.newIDPerSend && sent > 1 {
				sid = fmt.Sprintf("%s-%d", key, sent)
			}
			return c.Signal(ctx, id, "go", map[string]any{"id": sid}, client.SignalID(sid))
		})
	}
	signalled := false
	if sc.sigEarly {
		signal()
		signalled = true
	}
	handled := map[int]bool{}
	var st *saga.State
	for tick := 0; ctx.Err() == nil; tick++ {
		if tick%5 == 0 {
			if s, err := d.cl.Status(ctx, id); err == nil {
				st = s
			}
			if st != nil && st.Status.Final() {
				return
			}
		}
		pendingStep, attempt := "", 0
		if st != nil && st.Status == durable.StatusWaiting {
			if cur, ok := st.Pending(); ok {
				pendingStep, _ = d.cl.Step(ctx, st, cur.Step)
				attempt = cur.Attempt
			}
		}
		if !signalled && pendingStep == "approve" {
			signal()
			signalled = true
		}
		for a := 1; a <= 3; a++ {
			if handled[a] {
				continue
			}
			tok, err := os.ReadFile(chaos.TokenFile(d.tokenDir, id, a))
			if err != nil || !(sc.cbEarly || pendingStep == "c" && attempt == a) {
				continue
			}
			handled[a] = true
			d.callback(ctx, id, a, string(tok), sc)
		}
		time.Sleep(40 * time.Millisecond)
	}
}

// callback completes or fails one token, as the script says.
func (d *driver) callback(ctx context.Context, id string, attempt int, token string, sc script) {
	outcome := "complete"
	switch {
	case sc.cb == cbDecline:
		outcome = "Declined"
	case sc.cb == cbFlaky && attempt == 1:
		outcome = "Flaky"
	}
	d.mu.Lock()
	if d.tokens[id] == nil {
		d.tokens[id] = map[int]string{}
	}
	d.tokens[id][attempt] = token
	d.outcomes[token] = outcome
	d.mu.Unlock()
	d.send(ctx, token, "callback", sc.cbDrop, sc.cbTwice, func(c *client.Client) (*engine.Delivered, error) {
		if outcome == "complete" {
			return c.CompleteCallback(ctx, token, map[string]any{"attempt": strconv.Itoa(attempt)})
		}
		return c.FailCallback(ctx, token, outcome, fmt.Sprintf("the provider says %s (attempt %d)", outcome, attempt))
	})
}

// taken counts a delivery's answers that took it (applied or kept).
func (d *driver) taken(key string) (applied, kept int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range d.answers[key] {
		switch a {
		case string(saga.ReceiptApplied):
			applied++
		case string(saga.ReceiptKept):
			kept++
		}
	}
	return applied, kept
}

// answersOf is the answers a delivery got, in order.
func (d *driver) answersOf(key string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.answers[key])
}

// isUnknown: a send of the delivery ended in an error after which its
// sender could not tell whether it was written.
func (d *driver) isUnknown(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.unknown[key]
}

// tokensOf is the tokens of a saga the driver handled, by attempt.
func (d *driver) tokensOf(sagaID string) map[int]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.tokens[sagaID])
}

// answersFor says, for a report, what a saga's deliveries were answered.
func (d *driver) answersFor(sagaID string) string {
	out := fmt.Sprintf("signal %v", d.answersOf(signalKey(sagaID)))
	d.mu.Lock()
	if errs := d.errs[signalKey(sagaID)]; len(errs) > 0 {
		out += fmt.Sprintf(" %q", errs)
	}
	d.mu.Unlock()
	tokens := d.tokensOf(sagaID)
	for a := 1; a <= 3; a++ {
		if tok, ok := tokens[a]; ok {
			d.mu.Lock()
			outcome := d.outcomes[tok]
			d.mu.Unlock()
			out += fmt.Sprintf(", attempt %d %s %v", a, outcome, d.answersOf(tok))
		}
	}
	return out
}

// counts sums the answers of every delivery of a kind ("sig-" keys are
// signals, the others tokens).
func (d *driver) counts() (signals, callbacks map[string]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	signals, callbacks = map[string]int{}, map[string]int{}
	for key, as := range d.answers {
		m := callbacks
		if strings.HasPrefix(key, "sig-") {
			m = signals
		}
		m["deliveries"]++
		for _, a := range as {
			m[a]++
		}
	}
	return signals, callbacks
}
