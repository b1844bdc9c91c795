package proptest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Case is one generated definition with its input and the behaviour of its
// actions: everything a run needs, so that it replays.
type Case struct {
	Seed  uint64 // the seed it was generated from; 0 for fuzzer bytes
	YAML  []byte
	Input []byte // a JSON object
	// Profiles says how each action behaves: a behaviour is drawn per call.
	Profiles map[string]Profile
	// CancelAt is the handled-message count after which the driver cancels
	// the saga; negative: never.
	CancelAt int
	// Resumes is how often a saga parked in compensation_failed is resumed.
	Resumes int
	// CallSeed seeds the per-call behaviour draws, and the driver's
	// choices of deliveries.
	CallSeed uint64
	// SignalRate is the chance that the driver sends a signal after a
	// handled message, while the saga runs: one an await takes later
	// (kept), one nothing awaits, or one refused.
	SignalRate float64
	// Pauses is how many pauses (an await, a callback) the driver ends,
	// by a delivery or by letting the timer fire; past it, it leaves the
	// saga waiting.
	Pauses int
	// Files are the child sagas the definition's saga steps name, by
	// path next to prop.yaml; nil: none.
	Files map[string][]byte
	// Forks counts the fork steps written (parallel, foreach, saga), in
	// the definition and its children.
	Forks int
	// Calm says the definition has no backward jump and little of what
	// validation refuses (gen_fork.go).
	Calm bool
	// Invalid names the mistake written on purpose that validation must
	// refuse with a file and a line (see gen_fork.go); empty: none.
	Invalid string
}

// Behaviour is what an action call does.
type Behaviour uint8

const (
	Echo       Behaviour = iota // success: the input as output
	Record                      // success: {id: idempotency key, ok: true}
	Big                         // success: an output near or past saga.MaxStateBytes
	Half                        // success: an output of half saga.MaxStateBytes
	Deep                        // success: an output nested 60 to 70 deep
	Unencoded                   // success: an output that is not JSON-like
	Flaky                       // a retryable error of type Flaky
	Declined                    // a permanent error of type Declined
	HugeError                   // an error with a 1 MB message
	Panic                       // panics
	Slow                        // runs past its step timeout, returns the context's error
	SlowOK                      // runs past its step timeout, then returns success
	CancelSaga                  // cancels its own saga while it runs, then returns success
	// The callback behaviours (an action without callback echoes instead):
	// each completes or fails the call's own token while it still runs
	// (the kept path), then returns success.
	EarlyOK    // completes its token, then returns success
	EarlyFail  // fails its token, then returns success
	EarlyTwice // completes its token twice (the second a duplicate), then returns success
	numBehaviours
)

var behaviourNames = [numBehaviours]string{"echo", "record", "big", "half", "deep", "unencoded", "flaky", "declined", "huge_error", "panic", "slow", "slow_ok", "cancel_saga", "early_ok", "early_fail", "early_twice"}

func (b Behaviour) String() string {
	if b < numBehaviours {
		return behaviourNames[b]
	}
	return fmt.Sprintf("behaviour(%d)", uint8(b))
}

// succeeds reports whether a call with this behaviour returns success.
func (b Behaviour) succeeds() bool {
	switch b {
	case Echo, Record, Big, Half, Deep, Unencoded, SlowOK, CancelSaga, EarlyOK, EarlyFail, EarlyTwice:
		return true
	}
	return false
}

// Profile weighs the behaviours of one action.
type Profile [numBehaviours]uint8

func (p Profile) String() string {
	var parts []string
	for b, w := range p {
		if w > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", Behaviour(b), w))
		}
	}
	return strings.Join(parts, " ")
}

func (p Profile) draw(r *rand.Rand) Behaviour {
	total := 0
	for _, w := range p {
		total += int(w)
	}
	if total == 0 {
		return Echo
	}
	n := r.IntN(total)
	for b, w := range p {
		if n < int(w) {
			return Behaviour(b)
		}
		n -= int(w)
	}
	return Echo
}

// NewCase generates the case for a seed.
func NewCase(seed uint64) *Case {
	c := generate(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
	c.Seed = seed
	return c
}

// CaseFromBytes generates a case from a fuzzer's bytes: every choice reads
// the next eight bytes, so that a mutation of the bytes changes a choice;
// once they run out, a generator seeded with their hash goes on.
func CaseFromBytes(data []byte) *Case {
	sum := sha256.Sum256(data)
	rest := rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16]))
	return generate(rand.New(&byteSource{data: data, rest: rest}))
}

type byteSource struct {
	data []byte
	rest rand.Source
}

func (s *byteSource) Uint64() uint64 {
	if len(s.data) < 8 {
		return s.rest.Uint64()
	}
	v := binary.LittleEndian.Uint64(s.data)
	s.data = s.data[8:]
	return v
}

// gen writes one definition.
type gen struct {
	r        *rand.Rand
	ids      []string
	kinds    []string
	known    [][]string        // vars written by the steps before each step, in list order
	declared map[string]string // declared input fields and their types; nil: none declared
	profiles map[string]Profile
	actions  int
	// sagaTimeout is the saga's timeout: as written; empty: none.
	sagaTimeout string
	// wild cases also write what validation should refuse (syntax and
	// type errors, reads of vars nobody writes, values nested too deep);
	// tame ones mostly what it should accept, odd at run time.
	wild bool
	forkState
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func (g *gen) pick(options ...string) string { return options[g.r.IntN(len(options))] }

// inputFields are the fields inputs have, with the type a declaration gives them.
var inputFields = []struct{ name, typ string }{
	{"n", "int"}, {"s", "string"}, {"flag", "bool"}, {"items", "list"}, {"at", "timestamp"}, {"m", "map"},
}

func generate(r *rand.Rand) *Case {
	g := &gen{r: r, profiles: map[string]Profile{}}
	g.wild = g.chance(0.2)
	c := &Case{CancelAt: -1}
	var b strings.Builder
	b.WriteString("saga: prop\n")
	if g.chance(0.15) {
		g.sagaTimeout = g.pick("1h", "30m", "2h", "24h")
		fmt.Fprintf(&b, "timeout: %s\n", g.sagaTimeout)
	}
	if g.chance(0.25) {
		g.declared = map[string]string{}
		b.WriteString("input:\n")
		for _, f := range inputFields {
			if g.chance(0.6) {
				typ := f.typ
				if g.chance(0.1) {
					typ = g.pick("any", "double", "uint", "string")
				}
				g.declared[f.name] = typ
				fmt.Fprintf(&b, "  %s: %s\n", f.name, typ)
			}
		}
		if len(g.declared) == 0 {
			g.declared["n"] = "int"
			b.WriteString("  n: int\n")
		}
	}

	// The step list: plain steps s0..sN, and sometimes a loop that grows a
	// string towards and past the state limit.
	n := 1 + g.r.IntN(6)
	if g.chance(0.2) {
		n += g.r.IntN(8)
	}
	kinds := make([]string, n)
	for i := range kinds {
		kinds[i] = g.kind(i, n)
	}
	if g.chance(forkShare) {
		g.files = map[string][]byte{}
		g.maxDepth = 2
		if g.chance(0.25) {
			g.maxDepth = 3
		}
		g.invalid = ""
		if g.chance(0.25) {
			g.invalid = "pending" // the first fork that can takes one
		}
		for range 1 + g.r.IntN(2) {
			kinds = slices.Insert(kinds, g.r.IntN(len(kinds)), g.forkKind())
		}
		if g.chance(0.35) {
			// Fail after the forks: the saga undoes the forks that
			// succeeded, child by child.
			kinds = append(kinds, "fail")
		}
		g.calm = !g.wild && g.chance(0.75)
		g.plain = g.calm && g.chance(0.4)
		if last := len(kinds) - 1; g.calm && kinds[last] == "switch" {
			kinds[last] = "set"
		}
	}
	if g.chance(0.12) {
		kinds = slices.Insert(kinds, g.r.IntN(len(kinds)+1), "grow_init", "grow", "grow_check", "grow_call", "grow_done")
	}
	g.kinds = kinds
	g.ids = make([]string, len(kinds))
	for i, k := range kinds {
		if strings.HasPrefix(k, "grow") {
			g.ids[i] = k
		} else {
			g.ids[i] = fmt.Sprintf("s%d", i)
		}
	}
	// The vars each step writes, to read mostly vars that may exist.
	writes := g.writesOf(kinds, "")
	g.known = knownBefore(nil, writes)

	b.WriteString("steps:\n")
	for i, k := range kinds {
		g.step(&b, i, k, writes[i])
	}
	c.YAML = []byte(b.String())
	if g.files != nil {
		c.Files = g.files
		c.Forks, c.Calm = g.forks, g.calm
		c.Pauses = 200 // a tree has many pauses
		if g.invalid != "pending" {
			c.Invalid = g.invalid
		}
	}
	c.Input = g.input()
	c.Profiles = g.profiles
	if g.chance(0.15) {
		c.CancelAt = g.r.IntN(12)
	}
	if g.chance(0.5) {
		c.Resumes = 1 + g.r.IntN(2)
	}
	c.CallSeed = g.r.Uint64()
	if g.chance(0.5) {
		c.SignalRate = g.pick2(0.05, 0.5)
	}
	if c.Files != nil {
		// Signals sent before a fork's children start are kept by the
		// saga and handed to the child that may take them.
		c.SignalRate = g.pick2(0.2, 0.6)
	}
	if c.Pauses == 0 {
		c.Pauses = 40
	}
	if g.chance(0.05) {
		c.Pauses = g.r.IntN(3) // a saga left waiting is a result too
	}
	return c
}

func (g *gen) pick2(lo, hi float64) float64 { return lo + (hi-lo)*g.r.Float64() }

func (g *gen) kind(i, n int) string {
	last := i == n-1
	if !last && g.chance(0.14) {
		return "await"
	}
	x := g.r.IntN(100)
	switch {
	case x < 48:
		return "action"
	case x < 66:
		return "set"
	case x < 78:
		return "switch"
	case x < 90:
		return "assert"
	case x < 95 && (last || g.chance(0.1)):
		return "fail"
	case last || g.chance(0.1):
		return "succeed"
	}
	return "action"
}

// target picks a step for step i to jump to: forward mostly, the step
// itself or an earlier action sometimes (a loop validation accepts needs an
// action in it), and any step now and then.
func (g *gen) target(i int, catch bool) string {
	if g.calm {
		// Forward only, so that no loop and no unreachable step is
		// written: a catch a few steps on, else the next step; from the
		// last step of a list, nowhere.
		switch {
		case i+1 >= len(g.ids):
			return ""
		case catch:
			return g.entry(i + 1 + g.r.IntN(min(3, len(g.ids)-i-1)))
		}
		return g.entry(i + 1)
	}
	self := 0.0
	if catch && g.kinds[i] == "action" {
		self = 0.25 // catch to self: a retry loop through the catch
	}
	switch {
	case g.chance(self):
		return g.ids[i]
	case g.chance(0.25):
		var actions []int
		for j := range i {
			if g.kinds[j] == "action" {
				actions = append(actions, j)
			}
		}
		if len(actions) > 0 {
			return g.ids[actions[g.r.IntN(len(actions))]]
		}
	case g.chance(0.1):
		return g.entry(g.r.IntN(len(g.ids)))
	}
	if i+1 < len(g.ids) {
		if g.chance(0.6) {
			return g.entry(i + 1)
		}
		return g.entry(i + 1 + g.r.IntN(min(3, len(g.ids)-i-1)))
	}
	return g.entry(g.r.IntN(len(g.ids)))
}

// entry is step j, or the start of the loop that grows if j is inside it
// (jumping past its first set would read a var nobody wrote).
func (g *gen) entry(j int) string {
	for j > 0 && strings.HasPrefix(g.kinds[j], "grow") && g.kinds[j] != "grow_init" && g.kinds[j] != "grow_done" {
		j--
	}
	return g.ids[j]
}

func (g *gen) step(b *strings.Builder, i int, kind string, writes []string) {
	id := g.ids[i]
	fmt.Fprintf(b, "  - id: %s\n", id)
	line := func(format string, args ...any) {
		b.WriteString("    ")
		fmt.Fprintf(b, format, args...)
		b.WriteByte('\n')
	}
	switch kind {
	case "action":
		callback := g.chance(0.35)
		name := ""
		if callback {
			name = g.callbackAction()
		} else {
			name = g.action()
		}
		line("action: %s", name)
		if callback {
			if g.chance(0.85) {
				line("callback: {timeout: %s}", g.pauseTimeout())
			} else {
				line("callback: {}")
			}
		}
		if g.chance(0.7) {
			line("with: %s", g.render(g.value(i, 0)))
		}
		if len(writes) > 0 {
			line("out: %s", writes[0])
		}
		if g.chance(0.4) {
			line("retry: %s", g.retry())
		}
		if g.chance(0.45) {
			line("timeout: %s", g.stepTimeout())
		}
		if g.chance(0.6) {
			line("compensate: %s", g.compensation(i, writes))
		}
		g.catches(line, i)
		g.next(line, i, 0.12)
	case "await":
		switch {
		case g.wild && g.chance(0.1):
			line("await: {signal: %s}", g.pick("bad name", "\"\"", "9lives"))
		case g.chance(0.15):
			line("await: {signal: %s}", g.signalName(i)) // lang.MaxWait: the tick fires it
		default:
			line("await: {signal: %s, timeout: %s}", g.signalName(i), g.pauseTimeout())
		}
		if len(writes) > 0 {
			line("out: %s", writes[0])
		}
		if g.chance(0.45) {
			line("catch:")
			errs := g.pick(`[Timeout]`, `[Timeout]`, `["*"]`, `[Declined]`, `[Timeout, StateTooLarge]`)
			line("  - {errors: %s, next: %s}", errs, g.target(i, true))
		}
		g.next(line, i, 0.12)
	case "set":
		var parts []string
		for _, w := range writes {
			parts = append(parts, fmt.Sprintf("%s: %s", w, g.render(g.value(i, 0))))
		}
		line("set: {%s}", strings.Join(parts, ", "))
		g.next(line, i, 0.12)
	case "switch":
		line("switch:")
		for range 1 + g.r.IntN(3) {
			line("  - {if: %s, next: %s}", g.condition(i), g.target(i, false))
		}
		if g.chance(0.6) {
			line("  - {default: %s}", g.target(i, false))
		}
	case "assert":
		parts := []string{"if: " + g.condition(i)}
		if g.chance(0.5) {
			parts = append(parts, "message: "+g.render(g.pick("not so", "value ${input}", "not so")))
		}
		if g.chance(0.4) {
			parts = append(parts, "error: "+g.pick("Invalid", "AssertionFailed", "Declined", "Flaky"))
		}
		line("assert: {%s}", strings.Join(parts, ", "))
		g.catches(line, i)
		g.next(line, i, 0.12)
	case "fail":
		if g.chance(0.5) {
			line("fail: {error: %s, message: %s}", g.pick("Rejected", "Declined", "Flaky"), g.render(g.pick("no", "declined", "x")))
		} else {
			line("fail: {error: %s}", g.pick("Rejected", "Cancelled", "Timeout"))
		}
	case "succeed":
		if g.chance(0.3) {
			line("succeed:")
		} else {
			line("succeed: {output: %s}", g.render(g.value(i, 0)))
		}
	case "grow_init":
		line("set: {big: %s}", g.render(strings.Repeat("x", 1<<uint(8+g.r.IntN(5)))))
	case "grow":
		line("set: {big: %s}", g.render(g.pick("${vars.big + vars.big}", "${vars.big + vars.big + 'x'}")))
	case "grow_check":
		line("switch:")
		line("  - {if: \"size(vars.big) < %d\", next: grow_call}", g.r.IntN(700<<10))
		line("  - {default: grow_done}")
	case "grow_call":
		name := g.action()
		line("action: %s", name)
		line("with: %s", g.render(g.pick("${size(vars.big)}", "${vars.big}", "${vars}")))
		if len(writes) > 0 {
			line("out: %s", writes[0])
		}
		if g.chance(0.5) {
			line("compensate: {action: %s, with: %s}", g.undoAction(), g.render("${size(vars.big)}"))
		}
		if g.chance(0.4) {
			line("catch: [{errors: [\"*\"], next: grow}]")
		}
		line("next: grow")
	case "grow_done":
		line("set: {grown: \"${size(vars.big)}\"}")
	case "parallel", "foreach", "child":
		g.fork(b, line, i, kind, writes)
	}
}

func (g *gen) catches(line func(string, ...any), i int) {
	if !g.chance(0.35) || g.calm && i == len(g.ids)-1 {
		return
	}
	line("catch:")
	for range 1 + g.r.IntN(2) {
		errs := g.pick(`["*"]`, `[Flaky]`, `[Declined]`, `[Timeout]`, `[ExpressionError]`, `[AssertionFailed, Invalid]`, `[Error]`, `[InvalidOutput]`, `[Declined, "*"]`)
		line("  - {errors: %s, next: %s}", errs, g.target(i, true))
	}
}

// action names an action: a new one with its own profile, or one used before.
func (g *gen) action() string {
	if g.actions > 0 && g.chance(0.3) {
		return fmt.Sprintf("svc.a%d", g.r.IntN(g.actions))
	}
	name := fmt.Sprintf("svc.a%d", g.actions)
	g.actions++
	g.profiles[name] = g.profile(false)
	return name
}

// signalName is the signal the await step i waits for: one name per
// await of the saga's own list, so that the oracle knows which await
// takes which signal; in a fork's list, the step's own name or one that
// awaits of other branches, iterations and children share.
func (g *gen) signalName(i int) string {
	if g.depth == 0 {
		return fmt.Sprintf("sig%d", i)
	}
	if g.chance(0.3) {
		return sharedSignal
	}
	return "sig_" + g.ids[i]
}

// strayName is a signal no await waits for.
const strayName = "stray"

// callbackAction names a new action for a step with callback, with a
// profile of behaviours whose outcome the oracle knows: small outputs,
// errors, panics, a cancel, and completions of its own token while it runs.
func (g *gen) callbackAction() string {
	name := fmt.Sprintf("svc.cb%d", len(g.profiles))
	var p Profile
	p[Echo], p[Record] = 4, 4
	extra := []Behaviour{Flaky, Declined, Panic, CancelSaga, EarlyOK, EarlyOK, EarlyFail, EarlyTwice}
	for range g.r.IntN(4) {
		p[extra[g.r.IntN(len(extra))]] += uint8(1 + g.r.IntN(3))
	}
	g.profiles[name] = p
	return name
}

// pauseTimeout is how long an await or a callback waits: within the 15
// minutes a delayed message covers, or past it (the tick fires it).
func (g *gen) pauseTimeout() string {
	options := []string{"1s", "5m", "14m", "16m", "2h", "30h"}
	if g.sagaTimeout != "" && !g.wild {
		// Validation refuses a pause as long as the saga's timeout.
		limit, _ := time.ParseDuration(g.sagaTimeout)
		options = slices.DeleteFunc(options, func(o string) bool {
			d, err := time.ParseDuration(strings.Replace(o, "30h", "1800m", 1))
			return err != nil || d >= limit
		})
	}
	return g.pick(options...)
}

func (g *gen) undoAction() string {
	name := fmt.Sprintf("svc.undo%d", len(g.profiles))
	g.profiles[name] = g.profile(true)
	return name
}

// profile weighs the behaviours of a new action. Most actions mostly
// succeed; some always fail; compensations fail less.
func (g *gen) profile(undo bool) Profile {
	var p Profile
	switch {
	case g.chance(0.08):
		p[g.either(Flaky, Declined)] = 1 // always fails
		return p
	case undo:
		p[Echo] = 12
	default:
		p[Echo], p[Record] = 6, 6
	}
	for range g.r.IntN(4) {
		b := Behaviour(g.r.IntN(int(numBehaviours)))
		if b >= EarlyOK {
			b = Record // the callback behaviours are for callback steps
		}
		if undo && b == CancelSaga {
			continue
		}
		p[b] += uint8(1 + g.r.IntN(3))
	}
	return p
}

func (g *gen) either(a, b Behaviour) Behaviour {
	if g.chance(0.5) {
		return a
	}
	return b
}

func (g *gen) retry() string {
	parts := []string{fmt.Sprintf("attempts: %d", 1+g.r.IntN(5))}
	if g.chance(0.5) {
		parts = append(parts, "backoff: "+g.pick("1ms", "200ms", "1s", "10s"))
	}
	if g.chance(0.3) {
		parts = append(parts, "permanent: ["+g.pick("Declined", "Flaky", "Timeout", "Huge")+"]")
	}
	if g.chance(0.3) {
		parts = append(parts, "jitter: "+g.pick("true", "false"))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// stepTimeout is short (so that slow actions run past it fast) or long.
func (g *gen) stepTimeout() string {
	if g.chance(0.8) {
		return g.pick("2ms", "5ms", "10ms", "20ms")
	}
	return g.pick("30s", "15m")
}

func (g *gen) compensation(i int, writes []string) string {
	parts := []string{"action: " + g.undoAction()}
	if g.calm && g.chance(0.7) {
		// Only its own step's var: what a later step writes may not
		// exist when the compensation runs.
		if len(writes) > 0 {
			parts = append(parts, "with: "+g.render("${has(vars."+writes[0]+") ? vars."+writes[0]+" : null}"))
		}
	} else if g.chance(0.7) {
		var with any
		switch {
		case len(writes) > 0 && g.chance(0.5):
			with = map[string]any{"id": "${vars." + writes[0] + g.pick("", ".id", "") + "}"}
		case len(writes) > 0 && g.chance(0.3):
			with = "${has(vars." + writes[0] + ") ? vars." + writes[0] + " : null}"
		default:
			with = g.value(i+1, 0) // may read what only a later step writes
		}
		parts = append(parts, "with: "+g.render(with))
	}
	if g.chance(0.3) {
		parts = append(parts, "retry: "+g.retry())
	}
	if g.chance(0.3) {
		parts = append(parts, "timeout: "+g.stepTimeout())
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// readable names a var for step i to read: mostly one an earlier step
// writes, sometimes any.
func (g *gen) readable(i int) string {
	known := g.known[min(i, len(g.known)-1)]
	if len(known) > 0 && (!g.wild || g.chance(0.85)) {
		return known[g.r.IntN(len(known))]
	}
	if !g.wild && g.chance(0.9) {
		return "" // read the input instead
	}
	return g.pick("v0", "v1", "o0", "o1", "nope")
}

// value is a value template: literals, expressions, interpolations, and
// nesting up to and past lang.MaxValueDepth.
func (g *gen) value(i, depth int) any {
	if depth > 3 {
		return "${" + g.expr(i) + "}"
	}
	if len(g.scope) > 0 && g.chance(0.15) {
		return "${" + g.scope[g.r.IntN(len(g.scope))] + "}" // a foreach body's item or index
	}
	if g.calm {
		return g.calmValue(i, depth)
	}
	switch g.r.IntN(12) {
	case 0:
		return g.pickAny(int64(g.r.IntN(100)), "lit")
	case 1, 2, 3, 4:
		return "${" + g.expr(i) + "}"
	case 5:
		return "order ${" + g.expr(i) + "} of ${" + g.expr(i) + "}"
	case 6:
		m := map[string]any{}
		for j := range 1 + g.r.IntN(3) {
			m[fmt.Sprintf("k%d", j)] = g.value(i, depth+1)
		}
		return m
	case 7:
		var l []any
		for range g.r.IntN(3) {
			l = append(l, g.value(i, depth+1))
		}
		return l
	case 8:
		if g.chance(0.3) {
			if g.wild {
				return nestList(lang.MaxValueDepth-2+g.r.IntN(4), int64(1))
			}
			return nestList(lang.MaxValueDepth-2, int64(1))
		}
		return nestList(1+g.r.IntN(5), int64(1))
	case 9:
		if g.wild && g.chance(0.2) {
			return "${}" // refused in a value
		}
		return "${" + g.expr(i) + "}"
	case 10:
		return "$${not an expression}"
	default:
		return nil
	}
}

func (g *gen) pickAny(a, b any) any {
	if g.chance(0.5) {
		return a
	}
	return b
}

// expr is a CEL expression, often an odd one.
func (g *gen) expr(i int) string {
	v := func() string {
		if x := g.readable(i); x != "" {
			return "vars." + x
		}
		return "input.n"
	}
	if g.calm {
		return g.calmExpr(func() string {
			if x := g.readable(i); x != "" {
				return "vars." + x
			}
			return g.in("n")
		})
	}
	switch g.r.IntN(24) {
	case 0:
		return "input"
	case 1:
		return "input." + g.pick("n", "s", "flag", "items", "at", "m")
	case 2, 3:
		return v()
	case 4:
		x := v()
		return "has(" + x + ") ? " + x + " : 0"
	case 5:
		return g.pick("1 / 0", "input.n / 0", "input.n % 0", "1.0 / 0.0")
	case 6:
		return g.pick("input.s + 1", "input.n + 'x'", "input.flag + input.n", "int(input.s)", "timestamp('never')", "duration(input.s)")
	case 7:
		return "9223372036854775807 + " + g.pick("1", "input.n")
	case 8:
		return nestCEL(g.intOf(1, 5, 30, 62, 63, 64, 65, 70))
	case 9:
		d := g.intOf(3, 31, 32, 33, 62, 63, 64, 65)
		return strings.Repeat("{'a': ", d) + "1" + strings.Repeat("}", d)
	case 10:
		return "size(" + g.pick("input.s", "input.items", v()) + ")"
	case 11:
		// A time with an offset: state holds it in UTC, as a read gives it.
		return g.pick("saga.id", "saga.name", "saga.attempt", "saga.now", "string(saga.now)", "timestamp('2024-01-01T00:00:00+02:00')")
	case 12:
		x := v()
		return x + " + " + x
	case 13:
		return g.pick("''", "'x'", "b'bytes'", "null", "[]", "{}", "3.5", "-0.0", "18446744073709551615u")
	case 14:
		return "input.items.map(x, x)"
	case 15:
		return "dyn(input.n) * 2"
	case 16:
		// The last four build huge values in one library call when the
		// input is large.
		return g.pick("[1, 2, 3].map(x, [x, x, x])", "input.items.filter(x, x == 1)", "{'k': input}",
			"string(input.s).replace('', string(input.s))", "input.items.map(x, string(input.s)).join('')",
			"input.items.map(x, input.items).flatten()", "'%s'.format([input.items.map(x, input.items)])")
	case 17:
		return g.pick("double(input.n) * 1e308 * 10.0", "math.greatest(1, 2)", "input.s.size()")
	case 18:
		return g.pick("input.m.missing", "input.items[99]", "input.s[0]")
	case 19:
		return g.pick("vars", "{'all': vars, 'in': input}")
	case 20:
		if g.wild {
			return g.pick("'x' * 3", "undefined_fn(1)", "input.", "((1)", "'a'.repeat(3)")
		}
		return "input.n"
	default:
		return g.pick("1", "'text'", "true", "input.n > 0")
	}
}

func (g *gen) intOf(options ...int) int { return options[g.r.IntN(len(options))] }

// condition is an if: (YAML text): CEL with or without ${ }, often odd.
func (g *gen) condition(i int) string {
	x := "vars." + g.readable(i)
	if x == "vars." {
		x = "input.s"
	}
	if g.calm {
		src := g.pick("true", "false", g.in("n")+" > 3", g.in("flag")+" == true", "1 / 0 == 0", g.in("s")+" == 'go'")
		if strings.HasPrefix(x, "vars.") {
			src = g.pick(src, "has("+x+")")
		}
		if g.chance(0.4) {
			src = "${" + src + "}"
		}
		return g.render(src)
	}
	src := ""
	switch g.r.IntN(16) {
	case 0, 1:
		return g.render("${}")
	case 2:
		return g.pick("true", "false")
	case 3:
		src = "has(" + x + ")"
	case 4:
		src = x + " == 'x'"
	case 5:
		src = "input.flag"
	case 6:
		src = "input.n > 3"
	case 7:
		src = "1 / 0 == 0"
	case 8:
		src = "size(input.s) > 100"
	case 9:
		src = "saga.attempt >= 1"
	case 10:
		src = x
	case 11:
		if g.wild {
			src = g.pick("", " ", "${ }", "${true}", "${input.flag}")
		} else {
			src = "${}"
		}
	case 12:
		src = "has(" + x + ") && size(" + x + ") > 2"
	default:
		src = g.pick("true", "false", "input.n % 2 == 0", "input.s == 'go'")
	}
	if g.chance(0.4) {
		src = "${" + src + "}"
	}
	return g.render(src)
}

// input is a JSON object with the usual fields, sometimes near or past
// saga.MaxInputBytes, or nested near saga.MaxDataDepth.
func (g *gen) input() []byte {
	in := map[string]any{}
	for _, f := range inputFields {
		if g.declared != nil && g.declared[f.name] == "" && !g.chance(0.05) {
			continue
		}
		if g.declared == nil && g.chance(0.3) {
			continue
		}
		in[f.name] = g.field(f.name)
	}
	if g.chance(0.05) {
		in["extra"] = "x"
	}
	switch {
	case g.chance(0.1):
		// Pad s so that the input is a few bytes either side of the limit.
		want := saga.MaxInputBytes - 64 + g.r.IntN(128)
		in["s"] = ""
		base := len(mustJSON(in))
		if pad := want - base; pad > 0 {
			in["s"] = strings.Repeat("a", pad)
		}
	case g.chance(0.05):
		in["s"] = strings.Repeat("b", saga.MaxInputBytes/2)
	}
	if g.chance(0.1) {
		in["items"] = nestList(saga.MaxDataDepth-3+g.r.IntN(5), int64(7))
	}
	return mustJSON(in)
}

func (g *gen) field(name string) any {
	switch name {
	case "n":
		return g.anyOf(int64(3), int64(-1), int64(9223372036854775807), 2.5, json.Number("1e400"), "3", json.Number("18446744073709551615"))
	case "s":
		return g.anyOf("go", "", "x", strings.Repeat("s", 200), 5)
	case "flag":
		return g.anyOf(true, false, "yes", nil)
	case "items":
		return g.anyOf([]any{int64(1), int64(2)}, []any{}, []any{[]any{int64(1)}}, "none")
	case "at":
		return g.anyOf("2024-01-01T00:00:00Z", "2024-01-01T00:00:00+02:00", "yesterday", int64(0))
	case "m":
		return g.anyOf(map[string]any{"k": int64(1)}, map[string]any{}, []any{})
	}
	return nil
}

func (g *gen) anyOf(options ...any) any { return options[g.r.IntN(len(options))] }

// render writes a value as YAML flow text (JSON is YAML).
func (g *gen) render(v any) string { return string(mustJSON(v)) }

func mustJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// nestList is v inside depth lists.
func nestList(depth int, v any) any {
	for range depth {
		v = []any{v}
	}
	return v
}

// nestCEL is a CEL list literal depth deep.
func nestCEL(depth int) string {
	return strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth)
}
