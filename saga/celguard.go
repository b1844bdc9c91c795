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
// result would be larger than maxResultBytes fails without being made.

// resultBounds gives, by function name, an upper bound in bytes of what
// the call builds from its evaluated arguments (receiver first).
var resultBounds = map[string]func(args []ref.Val) int{
	"replace": func(args []ref.Val) int {
		s, old, repl := strLen(args, 0), strLen(args, 1), strLen(args, 2)
		if old == 0 {
			return s + (s+1)*repl
		}
		return s + s/old*repl
	},
	"join": func(args []ref.Val) int {
		n, size := 0, 0
		if l, ok := args[0].(traits.Lister); ok {
			n = listLen(l)
			size = deepSize(l, maxResultBytes+1)
		}
		return size + n*strLen(args, 1)
	},
	"format": func(args []ref.Val) int {
		// Each value renders to at most a few times its size.
		return strLen(args, 0) + 4*deepSize(arg(args, 1), maxResultBytes+1)
	},
	"flatten": func(args []ref.Val) int { return deepSize(arg(args, 0), maxResultBytes+1) },
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
	bound func([]ref.Val) int
}

func (g *sizeGuarded) Exec(f *interpreter.ExecutionFrame) ref.Val {
	if err := g.check(func(a interpreter.InterpretableV2) ref.Val { return a.Exec(f) }); err != nil {
		return err
	}
	return g.InterpretableCall.Exec(f)
}

func (g *sizeGuarded) Eval(act interpreter.Activation) ref.Val {
	if err := g.check(func(a interpreter.InterpretableV2) ref.Val { return a.Eval(act) }); err != nil {
		return err
	}
	return g.InterpretableCall.Eval(act)
}

// check evaluates the arguments (pure, so evaluating them again in the
// call is harmless) and refuses a call whose result would be too large.
func (g *sizeGuarded) check(eval func(interpreter.InterpretableV2) ref.Val) ref.Val {
	args := g.Args()
	vals := make([]ref.Val, len(args))
	for i, a := range args {
		v := eval(a)
		if types.IsUnknownOrError(v) {
			return nil // the call reports it
		}
		vals[i] = v
	}
	if n := g.bound(vals); n > maxResultBytes || n < 0 {
		return types.NewErr("%s: its result would be larger than %d bytes, more than a saga's state can hold", g.Function(), maxResultBytes)
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
