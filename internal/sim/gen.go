package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// genMaxVisits is the visit bound generated plans are compiled with, so a
// loop through a catch ends after a few dozen laps.
const genMaxVisits = 30

// genBlock is one step of a generated definition before its targets are
// known.
type genBlock struct {
	id, kind string
	lines    []string // the step's fields, without the id line
	// target, when set, is filled with a step id: forward only, or any
	// other step (a catch back to an earlier step makes a loop).
	target    string
	backwards bool
}

// genDefinition writes a definition from a handful of templates with
// random parameters: actions (out, retry, timeout, compensate, catch,
// callback), set, switch, assert, wait, await (timeouts short and long,
// some caught), and a succeed and a fail at the end; a third of them
// have a saga timeout (a deadline), a quarter hold on failure (holds.go). Every choice comes from the world's
// random source.
func (w *world) genDefinition(k int) string {
	r := w.rng
	// A third have a deadline, often short enough to bite: pauses are
	// drawn shorter than it (validation refuses the others).
	var deadline time.Duration
	if r.IntN(3) == 0 {
		deadline = []time.Duration{90 * time.Second, 10 * time.Minute, 2 * time.Hour, 100 * time.Hour}[r.IntN(4)]
	}
	pause := func(short, long time.Duration) string {
		d := short
		if long > 0 && r.IntN(2) == 0 {
			d = long
		}
		if deadline > 0 && d >= deadline {
			d = time.Duration(1+r.Int64N(int64(deadline/time.Second)-1)) * time.Second
		}
		return lang.FormatDuration(d.Truncate(time.Second))
	}
	// An await's or a callback's timeout: short (within a queue's delay,
	// so its own message) or long (the tick's).
	genPause := func() string {
		return pause(time.Duration(5+w.rng.IntN(600))*time.Second, time.Duration(1+w.rng.IntN(48))*time.Hour)
	}
	var blocks []*genBlock
	outs := []string{} // outs of earlier actions
	n := 3 + r.IntN(5)
	for i := 1; i <= n; i++ {
		p := r.Float64()
		switch {
		case p < 0.50 || i == 1:
			b := &genBlock{id: fmt.Sprintf("a%d", i), kind: "action"}
			b.lines = append(b.lines, fmt.Sprintf("action: svc.a%d", i))
			switch q := r.IntN(4); {
			case q == 0:
				b.lines = append(b.lines, `with: {n: "${input.n}", blob: "${input.blob}"}`) // echoed: the state grows with the input
			case q == 1 && len(outs) > 0:
				b.lines = append(b.lines, fmt.Sprintf(`with: {prev: "${vars.%s}"}`, outs[r.IntN(len(outs))]))
			case q == 2:
				b.lines = append(b.lines, `with: {n: "${input.n}"}`)
			}
			out := ""
			if r.IntN(10) < 7 {
				out = fmt.Sprintf("o%d", i)
				b.lines = append(b.lines, "out: "+out)
			}
			retry := fmt.Sprintf("retry: {attempts: %d, backoff: 1s, max_backoff: 4s, jitter: true", 1+r.IntN(4))
			if r.IntN(8) == 0 {
				retry += ", permanent: [Error]"
			}
			b.lines = append(b.lines, retry+"}")
			if r.IntN(3) == 0 {
				b.lines = append(b.lines, fmt.Sprintf("timeout: %ds", 5+r.IntN(20)))
			}
			if r.IntN(5) == 0 {
				// A callback: the action starts the work, its token ends it.
				b.lines = append(b.lines, "callback: {timeout: "+genPause()+"}")
			}
			if r.IntN(10) < 7 {
				comp := fmt.Sprintf("compensate: {action: svc.a%d_undo, retry: {attempts: %d, backoff: 1s, max_backoff: 8s}", i, 2+r.IntN(4))
				if out != "" && r.IntN(2) == 0 {
					comp += fmt.Sprintf(`, with: {ref: "${vars.%s}"}`, out)
				}
				b.lines = append(b.lines, comp+"}")
			}
			if r.IntN(10) < 3 {
				errs := []string{`["*"]`, `[Rejected]`, `[Timeout]`, `[Rejected, Error]`}[r.IntN(4)]
				b.lines = append(b.lines, "catch: [{errors: "+errs+", next: {{T}}}]")
				b.target, b.backwards = "?", r.IntN(2) == 0
			}
			if out != "" {
				outs = append(outs, out)
			}
			blocks = append(blocks, b)
		case p < 0.63:
			b := &genBlock{id: fmt.Sprintf("s%d", i), kind: "set"}
			switch q := r.IntN(3); {
			case q == 0:
				b.lines = append(b.lines, fmt.Sprintf(`set: {g%d: "${input.blob + input.blob}"}`, i)) // grows the state
			case q == 1 && len(outs) > 0:
				b.lines = append(b.lines, fmt.Sprintf(`set: {c%d: "${vars.%s}"}`, i, outs[r.IntN(len(outs))])) // copies an output
			default:
				b.lines = append(b.lines, fmt.Sprintf(`set: {v%d: "${input.n * %d}"}`, i, 2+r.IntN(5)))
			}
			blocks = append(blocks, b)
		case p < 0.73:
			b := &genBlock{id: fmt.Sprintf("w%d", i), kind: "switch", target: "?"}
			cond := fmt.Sprintf("input.n %% %d == %d", 2+r.IntN(4), r.IntN(2))
			line := fmt.Sprintf(`switch: [{if: "%s", next: {{T}}}`, cond)
			if r.IntN(2) == 0 {
				line += ", {default: {{N}}}"
			}
			b.lines = append(b.lines, line+"]")
			blocks = append(blocks, b)
		case p < 0.86:
			// An await of one of the signals the world sends (sim.go),
			// with its timeout short or long, or the default; its out
			// mostly kept; a timeout caught or not.
			b := &genBlock{id: fmt.Sprintf("g%d", i), kind: "await"}
			line := "await: {signal: " + GenSignals[r.IntN(len(GenSignals))]
			if r.IntN(6) > 0 {
				line += ", timeout: " + genPause()
			}
			b.lines = append(b.lines, line+"}")
			if r.IntN(5) > 0 {
				b.lines = append(b.lines, fmt.Sprintf("out: g%d", i))
				outs = append(outs, fmt.Sprintf("g%d", i))
			}
			if r.IntN(2) == 0 {
				b.lines = append(b.lines, "catch: [{errors: ["+[]string{"Timeout", `"*"`}[r.IntN(2)]+"], next: {{T}}}]")
				b.target, b.backwards = "?", r.IntN(3) == 0
			}
			blocks = append(blocks, b)
		case p < 0.91:
			// A wait: within a queue's delay (its own message), or longer
			// (the tick's), or until a time that may have passed.
			b := &genBlock{id: fmt.Sprintf("p%d", i), kind: "wait"}
			switch r.IntN(3) {
			case 0:
				b.lines = append(b.lines, "wait: {for: "+pause(time.Duration(1+r.IntN(900))*time.Second, 0)+"}")
			case 1:
				b.lines = append(b.lines, "wait: {for: "+pause(time.Duration(1+r.IntN(72))*time.Hour, 0)+"}")
			default:
				b.lines = append(b.lines, fmt.Sprintf(`wait: {until: "${timestamp('2026-12-0%dT00:00:00Z')}"}`, 1+r.IntN(9)))
			}
			blocks = append(blocks, b)
		default:
			b := &genBlock{id: fmt.Sprintf("t%d", i), kind: "assert"}
			m := 3 + r.IntN(5)
			line := fmt.Sprintf(`assert: {if: "input.n %% %d != %d", message: "n is %d mod %d"`, m, r.IntN(m), r.IntN(m), m)
			if r.IntN(2) == 0 {
				line += ", error: Unlucky"
			}
			b.lines = append(b.lines, line+"}")
			if r.IntN(2) == 0 {
				b.lines = append(b.lines, "catch: [{errors: ["+[]string{`"*"`, "Unlucky", lang.ErrorTypeAssertion}[r.IntN(3)]+"], next: {{T}}}]")
				b.target = "?"
			}
			blocks = append(blocks, b)
		}
	}
	done := &genBlock{id: "done", kind: "succeed"}
	switch r.IntN(3) {
	case 0:
		done.lines = []string{`succeed: {output: "${vars}"}`}
	case 1:
		done.lines = []string{`succeed: {output: {n: "${input.n}"}}`}
	default:
		done.lines = []string{`succeed: {}`}
	}
	stop := &genBlock{id: "stop", kind: "fail", lines: []string{"fail: {error: Stopped, message: the saga chose to stop}"}}
	ids := make([]string, 0, len(blocks)+2)
	for _, b := range blocks {
		ids = append(ids, b.id)
	}
	ids = append(ids, done.id, stop.id)
	stopUsed := false
	for i, b := range blocks {
		if b.target == "" {
			continue
		}
		var t string
		if b.backwards && i > 0 {
			t = ids[r.IntN(i)] // an earlier step: a loop through the catch
		} else {
			t = ids[i+1+r.IntN(len(ids)-i-1)] // a later one, never itself
		}
		stopUsed = stopUsed || t == stop.id
		for j, l := range b.lines {
			b.lines[j] = strings.NewReplacer("{{T}}", t, "{{N}}", ids[i+1]).Replace(l)
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "saga: gen%d\ninput: {n: int, blob: string}\n", k)
	if deadline > 0 {
		fmt.Fprintf(&sb, "timeout: %s\n", lang.FormatDuration(deadline))
	}
	sb.WriteString(w.genHold(deadline))
	sb.WriteString("steps:\n")
	all := append(blocks, done)
	if stopUsed {
		all = append(all, stop)
	}
	for _, b := range all {
		fmt.Fprintf(&sb, "  - id: %s\n", b.id)
		for _, l := range b.lines {
			fmt.Fprintf(&sb, "    %s\n", l)
		}
	}
	return sb.String()
}

// GenSignals are the signal names generated awaits wait for.
var GenSignals = []string{"ping", "pong"}

// genPlans compiles count generated definitions; a definition validation
// refuses is drawn again (the refusals are counted: only what validation
// accepts must run).
func (w *world) genPlans(count int) ([]*saga.Plan, error) {
	var out []*saga.Plan
	for k := 0; len(out) < count; k++ {
		if k > 20*count+20 {
			return nil, fmt.Errorf("seed %d: validation refused %d of %d generated definitions", w.cfg.Seed, w.report.Refused, k)
		}
		src := w.genDefinition(len(out))
		p, err := saga.Compile(fmt.Sprintf("gen%d.yaml", len(out)), []byte(src), saga.Options{MaxVisits: genMaxVisits})
		if err != nil {
			if w.report.Refused == 0 {
				w.report.RefusedExample = fmt.Sprintf("%v\n%s", err, src)
			}
			w.report.Refused++
			continue
		}
		out = append(out, p)
	}
	return out, nil
}
