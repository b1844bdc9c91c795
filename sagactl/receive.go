package sagactl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// MaxPayloadFileBytes bounds what sagactl reads of a signal's payload or a
// callback's output, inline or @FILE: twice lang.MaxSignalBytes, which is
// then checked on the compact JSON, so indentation fits.
const MaxPayloadFileBytes = 2 * lang.MaxSignalBytes

func runSignal(c *Config, args []string) int {
	fs := flag.NewFlagSet("signal", flag.ContinueOnError)
	payload := fs.String("payload", "", "the signal's payload: JSON, or @FILE (default: none, null)")
	id := fs.String("id", "", "the signal's id: sent again with the same id, it is taken once (default: random)")
	asJSON := fs.Bool("json", false, "print the receipt and the saga as JSON")
	var stack stackFlags
	stack.register(fs)
	pos, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 2 {
		c.errorf("signal: name the saga id and the signal's name (got %d arguments)", len(pos))
		return ExitUsage
	}
	sagaID, name := pos[0], pos[1]
	if !durable.ValidSagaID(sagaID) {
		c.errorf("signal: not a saga id (%d bytes): use 1 to 128 letters, digits, '_', '.', ':' or '-', starting with a letter or digit", len(sagaID))
		return ExitUsage
	}
	raw, ok := c.readPayload("--payload", *payload)
	if !ok {
		return ExitUsage
	}
	if err := checkDelivery(&saga.Delivery{Signal: name, ID: *id}, raw); err != nil {
		c.errorf("signal: %v", err)
		return ExitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := stack.client(ctx, c.APIOptions...)
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	var opts []client.SignalOption
	if *id != "" {
		opts = append(opts, client.SignalID(*id))
	}
	d, err := cl.Signal(ctx, sagaID, name, raw, opts...)
	if err != nil {
		c.errorf("signal %s to saga %s: %s", name, sagaID, deliveryError(err))
		return ExitUsage
	}
	run := "the saga's"
	if d.State != nil && d.State.SagaID != sagaID {
		// A run of the saga's tree took it: a branch, an iteration or a
		// child saga whose await takes it.
		run = "its run " + d.State.SagaID + "'s"
	}
	what := map[saga.Receipt]string{
		saga.ReceiptApplied:   "applied: " + run + " await that waited on it went on",
		saga.ReceiptKept:      "kept: no await waits on it yet; " + run + " next await of " + name + " takes it",
		saga.ReceiptDuplicate: "duplicate: a signal of this id was taken already; nothing changed",
	}[d.Receipt]
	return c.printDelivered(ctx, cl, d, fmt.Sprintf("signal %s to saga %s: %s", name, sagaID, what), *asJSON)
}

func runCallback(c *Config, args []string) int {
	fs := flag.NewFlagSet("callback", flag.ContinueOnError)
	output := fs.String("output", "", "complete the token with this output: JSON, or @FILE")
	errType := fs.String("error", "", "fail the token's attempt with this error type (retry.permanent and catch match it)")
	message := fs.String("message", "", "the failure's message, with --error")
	asJSON := fs.Bool("json", false, "print the receipt and the saga as JSON")
	var stack stackFlags
	stack.register(fs)
	pos, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		c.errorf("callback: name exactly one callback token (got %d arguments)", len(pos))
		return ExitUsage
	}
	token := strings.TrimSpace(pos[0]) // a token pasted with its newline
	ref, err := saga.ParseCallbackToken(token)
	if err != nil {
		c.errorf("callback %s: %v", shortToken(token), err)
		return ExitUsage
	}
	failing := *errType != ""
	switch {
	case failing == (*output != ""):
		c.errorf("callback: say how the work ended: --output JSON|@FILE, or --error TYPE [--message M]")
		return ExitUsage
	case *message != "" && !failing:
		c.errorf("callback: --message goes with --error")
		return ExitUsage
	}
	var raw json.RawMessage
	if !failing {
		if raw, ok = c.readPayload("--output", *output); !ok {
			return ExitUsage
		}
	}
	d := &saga.Delivery{Token: token}
	if failing {
		d.Err = &saga.StepError{Type: *errType, Message: *message}
	}
	if err := checkDelivery(d, raw); err != nil {
		c.errorf("callback %s: %v", shortToken(token), err)
		return ExitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := stack.client(ctx, c.APIOptions...)
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	var got *engine.Delivered
	if failing {
		got, err = cl.FailCallback(ctx, token, *errType, *message)
	} else {
		got, err = cl.CompleteCallback(ctx, token, raw)
	}
	what := fmt.Sprintf("callback %s of saga %s", shortToken(token), ref.SagaID)
	if err != nil {
		c.errorf("%s: %s", what, deliveryError(err))
		return ExitUsage
	}
	if step, err := cl.Step(ctx, got.State, ref.Step); err == nil {
		what = fmt.Sprintf("callback of step %s (attempt %d) of saga %s", step, ref.Attempt, ref.SagaID)
	}
	verb := "completed"
	if failing {
		verb = "failed with " + *errType
	}
	text := map[saga.Receipt]string{
		saga.ReceiptApplied:   "applied: " + verb,
		saga.ReceiptKept:      "kept: " + verb + "; the action that got the token still runs, and its step takes it when it returns",
		saga.ReceiptDuplicate: "duplicate: this token was completed already; nothing changed",
	}[got.Receipt]
	return c.printDelivered(ctx, cl, got, what+": "+text, *asJSON)
}

// deliveryError says what a refused delivery means for the sender; the
// error's own text names the saga and the step, never the payload or the
// token.
func deliveryError(err error) string {
	hint := ""
	switch {
	case errors.Is(err, saga.ErrNotReceiving):
		hint = " (a saga that compensates or has ended takes no signals or callbacks)"
	case errors.Is(err, saga.ErrKeptFull):
		hint = fmt.Sprintf(" (at most %d signals, %d bytes, wait for their awaits)", lang.MaxKeptSignals, lang.MaxKeptSignalBytes)
	case errors.Is(err, saga.ErrTokenNotAwaited):
		hint = " (a token of an earlier visit or attempt, or one that timed out: sagactl status shows the current one)"
	case errors.Is(err, saga.ErrBadToken):
		hint = " (copy the whole token the action got)"
	}
	return err.Error() + hint
}

// checkDelivery checks a delivery as the saga will, before anything is
// sent: the name, the id, the payload's compact size and values.
func checkDelivery(d *saga.Delivery, raw json.RawMessage) error {
	if raw != nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return err
		}
		plain, err := saga.NormalizeJSON(v) // json.Number to the numbers a saga holds
		if err != nil {
			return err
		}
		d.Payload = plain
	}
	return saga.CheckDelivery(d, len(raw))
}

// readPayload reads a JSON value, inline or @FILE, and returns it compact;
// nil when arg is empty. Errors name the flag and what was wrong, never
// the value.
func (c *Config) readPayload(flagName, arg string) (json.RawMessage, bool) {
	if arg == "" {
		return nil, true
	}
	src := []byte(arg)
	what := flagName
	if file, ok := strings.CutPrefix(arg, "@"); ok {
		b, err := readFile(file, MaxPayloadFileBytes, "a payload")
		if err != nil {
			c.errorf("%s: %v", flagName, err)
			return nil, false
		}
		src, what = b, flagName+" "+arg
	} else if len(src) > MaxPayloadFileBytes {
		c.errorf("%s: %d bytes, over the limit of %d bytes for a payload", flagName, len(src), MaxPayloadFileBytes)
		return nil, false
	}
	if !json.Valid(src) {
		var v any
		err := json.Unmarshal(src, &v)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			c.errorf("%s: not valid JSON (at byte %d)", what, se.Offset)
		} else {
			c.errorf("%s: not valid JSON", what)
		}
		return nil, false
	}
	var b bytes.Buffer
	if err := json.Compact(&b, src); err != nil {
		c.errorf("%s: not valid JSON", what)
		return nil, false
	}
	if b.Len() > lang.MaxSignalBytes {
		c.errorf("%s: %d bytes of compact JSON, over the limit of %d for a signal's payload or a callback's output", what, b.Len(), lang.MaxSignalBytes)
		return nil, false
	}
	return json.RawMessage(b.Bytes()), true
}

// shortToken shortens a callback token for messages: enough to tell
// tokens apart, not enough to complete one.
func shortToken(token string) string {
	if len(token) <= 16 {
		return token
	}
	return token[:16] + "…"
}

// deliveredReport is the JSON shape of signal and callback, and of start
// with --signal.
type deliveredReport struct {
	// Started says, for start --signal, whether it started the saga.
	Started *bool        `json:"started,omitempty"`
	Receipt saga.Receipt `json:"receipt"`
	Saga    stateReport  `json:"saga"`
}

func (c *Config) printDelivered(ctx context.Context, cl *client.Client, d *engine.Delivered, line string, asJSON bool) int {
	return c.printReport(ctx, cl, deliveredReport{Receipt: d.Receipt}, d.State, line, asJSON)
}

// printStartDelivered prints what start --signal did.
func (c *Config) printStartDelivered(ctx context.Context, cl *client.Client, started bool, d *engine.Delivered, line string, asJSON bool) int {
	return c.printReport(ctx, cl, deliveredReport{Started: &started, Receipt: d.Receipt}, d.State, line, asJSON)
}

func (c *Config) printReport(ctx context.Context, cl *client.Client, r deliveredReport, st *saga.State, line string, asJSON bool) int {
	if asJSON {
		r.Saga = c.reportOf(ctx, cl, st)
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
		return ExitOK
	}
	fmt.Fprintln(c.Stdout, line)
	return c.printState(ctx, cl, st, false)
}

// pauseReport is what a waiting saga waits on.
type pauseReport struct {
	Kind    string    `json:"kind"` // wait, await or callback
	Step    string    `json:"step"`
	Signal  string    `json:"signal,omitempty"`  // await
	Attempt int       `json:"attempt,omitempty"` // callback
	Until   time.Time `json:"until"`
	// Token is the callback's token: an operator may complete it by hand
	// (sagactl callback); it is as secret as access to the table.
	Token string `json:"token,omitempty"`
	// Deadline is the saga's deadline when it comes before Until.
	Deadline time.Time `json:"deadline,omitzero"`
}

// pauseOf describes the pause of a waiting saga; nil when it is not paused.
func pauseOf(plan *saga.Plan, st *saga.State) *pauseReport {
	cur, ok := st.Pending()
	steps := plan.Steps()
	if !ok || !cur.Wait || cur.Compensating || st.Status != durable.StatusWaiting || cur.Step < 0 || cur.Step >= len(steps) {
		return nil
	}
	s := steps[cur.Step]
	p := &pauseReport{Kind: "wait", Step: s.ID, Until: cur.Due}
	switch {
	case s.Kind == lang.KindAwait:
		p.Kind, p.Signal = "await", s.Await.Signal
	case s.Callback != nil:
		p.Kind, p.Attempt, p.Token = "callback", cur.Attempt, plan.CallbackToken(st)
	}
	if !st.Deadline.IsZero() && st.Deadline.Before(cur.Due) {
		p.Deadline = st.Deadline
	}
	return p
}

// text is the pause as status prints it.
func (p *pauseReport) text() string {
	var s string
	switch p.Kind {
	case "await":
		s = fmt.Sprintf("await signal %s (step %s) until %s", p.Signal, p.Step, p.Until.Format(time.RFC3339))
	case "callback":
		s = fmt.Sprintf("callback of step %s attempt %d until %s", p.Step, p.Attempt, p.Until.Format(time.RFC3339))
	default:
		s = fmt.Sprintf("wait (step %s) until %s", p.Step, p.Until.Format(time.RFC3339))
	}
	if !p.Deadline.IsZero() {
		s += fmt.Sprintf(", but the saga's deadline comes first, at %s", p.Deadline.Format(time.RFC3339))
	}
	return s
}

// keptSignals counts the signals a saga keeps for awaits to come.
func keptSignals(st *saga.State) int {
	n := 0
	for _, d := range st.Kept {
		if d.Signal != "" {
			n++
		}
	}
	return n
}
