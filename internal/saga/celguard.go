package saga

import (
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// CEL's cost limit and evaluation deadline are checked between the steps of
// an evaluation; some library functions build their whole result in one
// call (s.replace('', s), l.join(''), format, flatten), so a small input
// can make one call allocate gigabytes before any check runs. guardSizes
// wraps those calls: their arguments are evaluated first, and a call whose
// result would be larger than the evaluation's limit (resultLimit) fails
// without being made.

// resultBounds gives, by function name, an upper bound in bytes of what
// the call builds from its evaluated arguments (receiver first), counted
// up to limit.
var resultBounds = map[string]func(args []ref.Val, limit int) int{
	"replace": func(args []ref.Val, _ int) int {
		s, old, repl := strLen(args, 0), strLen(args, 1), strLen(args, 2)
		if old == 0 {
			return s + (s+1)*repl
		}
		return s + s/old*repl
	},
	"join": func(args []ref.Val, limit int) int {
		n, size := 0, 0
		if l, ok := args[0].(traits.Lister); ok {
			n = listLen(l)
			size = deepSize(l, limit+1)
		}
		return size + n*strLen(args, 1)
	},
	"format": func(args []ref.Val, limit int) int {
		// Each value renders to at most a few times its size.
		return strLen(args, 0) + 4*deepSize(arg(args, 1), limit+1)
	},
	"flatten": func(args []ref.Val, limit int) int { return deepSize(arg(args, 0), limit+1) },
}

// guardSizes is the decorator that wraps the calls of resultBounds.
func guardSizes(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok {
		return i, nil
	}
	bound, ok := resultBounds[call.Function()]
	if !ok {
		return i, nil
	}
	return &sizeGuarded{InterpretableCall: call, bound: bound}, nil
}

type sizeGuarded struct {
	interpreter.InterpretableCall
	bound func(args []ref.Val, limit int) int
}

func (g *sizeGuarded) Exec(f *interpreter.ExecutionFrame) ref.Val {
	return g.run(memoOf(f.Activation), resultLimit(f.Activation), func(a interpreter.InterpretableV2) ref.Val { return a.Exec(f) }, func() ref.Val { return g.InterpretableCall.Exec(f) })
}

func (g *sizeGuarded) Eval(act interpreter.Activation) ref.Val {
	return g.run(memoOf(act), resultLimit(act), func(a interpreter.InterpretableV2) ref.Val { return a.Eval(act) }, func() ref.Val { return g.InterpretableCall.Eval(act) })
}

// guardMemo keeps, for one evaluation, the results of guarded calls made
// while another guarded call checks its arguments, so that the call that
// follows the check finds them instead of evaluating them again. Without
// it each guarded call nested in another's arguments doubled the work (30
// chained replaces: 2^30 evaluations). Evaluation is pure and runs in the
// same order both times, so the results are replayed first in, first out,
// also for calls inside comprehensions.
type guardMemo struct {
	recording, replaying int
	results              map[*sizeGuarded][]ref.Val
}

// memoOf finds the evaluation's memo in its activation (comprehensions
// wrap it); nil when the activation is not a saga's, and then arguments
// are evaluated twice, as before.
func memoOf(a interpreter.Activation) *guardMemo {
	for a != nil {
		if sa, ok := a.(*activation); ok {
			if sa.guards == nil {
				sa.guards = &guardMemo{results: map[*sizeGuarded][]ref.Val{}}
			}
			return sa.guards
		}
		a = a.Parent()
	}
	return nil
}

// resultLimit is the largest result the evaluation in act may build: a
// saga's activation says (an object's limit when the engine keeps large
// values apart), else what a state holds.
func resultLimit(a interpreter.Activation) int {
	for a != nil {
		if sa, ok := a.(*activation); ok {
			return max(maxResultBytes, sa.limit)
		}
		a = a.Parent()
	}
	return maxResultBytes
}

// run checks the call's arguments and makes the call, through m.
func (g *sizeGuarded) run(m *guardMemo, limit int, evalArg func(interpreter.InterpretableV2) ref.Val, call func() ref.Val) ref.Val {
	if m == nil {
		if err := g.check(limit, evalArg); err != nil {
			return err
		}
		return call()
	}
	if m.replaying > 0 {
		if q := m.results[g]; len(q) > 0 {
			m.results[g] = q[1:]
			return q[0]
		}
	}
	m.recording++
	v := g.check(limit, evalArg)
	m.recording--
	if v == nil {
		m.replaying++
		v = call()
		m.replaying--
	}
	switch {
	case m.recording > 0: // an enclosing guarded call is checking its arguments: it replays this
		m.results[g] = append(m.results[g], v)
	case m.replaying == 0: // the outermost guarded call is done
		clear(m.results)
	}
	return v
}

// check evaluates the arguments (pure: the call that follows finds them in
// the memo, or evaluates them again) and refuses a call whose result would
// be too large.
func (g *sizeGuarded) check(limit int, eval func(interpreter.InterpretableV2) ref.Val) ref.Val {
	args := g.Args()
	vals := make([]ref.Val, len(args))
	for i, a := range args {
		v := eval(a)
		if types.IsUnknownOrError(v) {
			return nil // the call reports it
		}
		vals[i] = v
	}
	if n := g.bound(vals, limit); n > limit || n < 0 {
		// No ": " and no quotes, so that redactEvalError keeps the reason.
		return types.NewErr("%s would build a %v", g.Function(), resultTooLarge(limit))
	}
	return nil
}

func arg(args []ref.Val, i int) ref.Val {
	if i < len(args) {
		return args[i]
	}
	return nil
}

func strLen(args []ref.Val, i int) int {
	if s, ok := arg(args, i).(types.String); ok {
		return len(s)
	}
	return 0
}

func listLen(l traits.Lister) int {
	n, _ := l.Size().(types.Int)
	return int(n)
}

// deepSize is about the bytes v takes as plain values, counted up to limit
// (a list sharing one big list many times is not walked past it).
func deepSize(v ref.Val, limit int) int {
	size := 0
	var walk func(v ref.Val)
	walk = func(v ref.Val) {
		if size > limit {
			return
		}
		switch t := v.(type) {
		case types.String:
			size += len(t) + 8
		case types.Bytes:
			size += len(t) + 8
		case traits.Lister:
			size += 8
			for it := t.Iterator(); it.HasNext() == types.True && size <= limit; {
				walk(it.Next())
			}
		case traits.Mapper:
			size += 8
			for it := t.Iterator(); it.HasNext() == types.True && size <= limit; {
				k := it.Next()
				walk(k)
				walk(t.Get(k))
			}
		default:
			size += 8
		}
	}
	if v != nil {
		walk(v)
	}
	return size
}
