package saga

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// Bounds on CEL evaluation. A program whose worst case, estimated when the
// plan is compiled, stays under the cost limit runs without runtime tracking;
// any other program is tracked and interrupted at the limit or the deadline.
const (
	DefaultCostLimit   = 1_000_000
	DefaultEvalTimeout = 100 * time.Millisecond
	// maxDataSize bounds the size of any string, list or map a saga holds: no
	// saga state may exceed it, so cost estimates can rely on it.
	maxDataSize = 400 << 10
)

func celType(name string) *cel.Type {
	switch name {
	case "string":
		return cel.StringType
	case "int":
		return cel.IntType
	case "uint":
		return cel.UintType
	case "double":
		return cel.DoubleType
	case "bool":
		return cel.BoolType
	case "bytes":
		return cel.BytesType
	case "list":
		return cel.ListType(cel.DynType)
	case "map":
		return cel.MapType(cel.StringType, cel.DynType)
	case "timestamp":
		return cel.TimestampType
	case "duration":
		return cel.DurationType
	}
	return cel.DynType
}

// newCELEnv declares what expressions see: input (field by field when the
// definition declares its input, so types are checked), vars and saga;
// inside a foreach body, also the items of scope (the as names of the
// foreach steps around it, of any type) and index (an int).
func newCELEnv(def *lang.Definition, scope ...string) (*cel.Env, error) {
	opts := []cel.EnvOption{
		cel.Variable("vars", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("saga.id", cel.StringType),
		cel.Variable("saga.name", cel.StringType),
		cel.Variable("saga.attempt", cel.IntType),
		cel.Variable("saga.now", cel.TimestampType),
		ext.Strings(), ext.Math(), ext.Lists(), ext.Sets(), ext.Encoders(),
	}
	if def.Input == nil {
		opts = append(opts, cel.Variable("input", cel.MapType(cel.StringType, cel.DynType)))
	}
	for _, f := range def.Input {
		opts = append(opts, cel.Variable("input."+f.Name, celType(f.Type)))
	}
	for _, name := range scope {
		opts = append(opts, cel.Variable(name, cel.DynType))
	}
	if len(scope) > 0 {
		opts = append(opts, cel.Variable("index", cel.IntType))
	}
	return cel.NewEnv(opts...)
}

// program is one compiled expression.
type program struct {
	src     string
	prg     cel.Program
	outType *cel.Type
	tracked bool // worst-case cost unknown or over the limit: evaluate with tracking and a deadline
	timeout time.Duration
	reads   []string // vars.NAME this expression reads
	// uses says which fields of input and vars the expression may touch
	// (has() included), for what a fork copies into its children.
	uses uses
	// stable: the expression is a reference to input or vars (which do
	// not change while a saga waits on a fork), cheap to evaluate again.
	stable bool
}

type sizeBound struct{}

func (sizeBound) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: maxDataSize}
}
func (sizeBound) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// compileExpr compiles and checks src. Problems carry positions within src.
func compileExpr(env *cel.Env, src string, limits Options) (*program, []exprProblem) {
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		var out []exprProblem
		for _, e := range iss.Errors() {
			out = append(out, exprProblem{line: e.Location.Line(), col: e.Location.Column(), msg: e.Message})
		}
		return nil, out
	}
	p := &program{src: src, outType: ast.OutputType(), timeout: limits.EvalTimeout}
	est, err := env.EstimateCost(ast, sizeBound{})
	p.tracked = err != nil || est.Max > limits.CostLimit
	popts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize), cel.CustomDecoratorV2(guardSizes)}
	if p.tracked {
		popts = append(popts, cel.CostLimit(limits.CostLimit), cel.InterruptCheckFrequency(64))
	}
	prg, err := env.Program(ast, popts...)
	if err != nil {
		return nil, []exprProblem{{line: 1, msg: err.Error()}}
	}
	p.prg = prg
	p.reads = varReads(ast)
	p.uses.input, p.uses.allInput = rootReads(ast, "input")
	p.uses.vars, p.uses.allVars = rootReads(ast, "vars")
	sagaFields, sagaWhole := rootReads(ast, "saga")
	// Re-evaluated at each child's launch only when that is cheap: a
	// reference (input.items, vars.order.lines), not a computed list,
	// which would cost the list's length at every launch.
	p.stable = !sagaWhole && !slices.Contains(sagaFields, "now") && !slices.Contains(sagaFields, "attempt") && isReference(ast)
	return p, nil
}

type exprProblem struct {
	line, col int
	msg       string
}

// eval runs the program against the activation.
func (p *program) eval(act *activation) (ref.Val, error) {
	var (
		v   ref.Val
		err error
	)
	if p.tracked {
		ctx, cancel := context.WithTimeout(context.Background(), p.scaledTimeout(act))
		v, _, err = p.prg.ContextEval(ctx, act)
		cancel()
	} else {
		v, _, err = p.prg.Eval(act)
	}
	if err != nil {
		msg := redactEvalError(err.Error())
		var stopped interpreter.EvalCancelledError
		switch {
		case errors.As(err, &stopped) && stopped.Cause == interpreter.CostLimitExceeded:
			msg = "expression exceeded its cost limit (runaway expression?)"
		case errors.As(err, &stopped) || errors.Is(err, context.DeadlineExceeded):
			msg = "expression exceeded its evaluation deadline"
		}
		return nil, &ActionError{Type: lang.ErrorTypeExpression, Message: fmt.Sprintf("${%s}: %s", p.src, msg)}
	}
	return v, nil
}

// CEL's runtime cost tracking keeps a stack that its comprehensions do not
// always pop (cel-go v0.31: interpreter.refValStack.drop searches it for
// ids that are not there), so a tracked comprehension takes time quadratic
// in the elements it walks: a map over 10,000 elements, the most a foreach
// iterates, takes 50 to 200 ms here, past the 100 ms deadline, while its
// cost (about 14 per element) is far under the limit. The deadline scales
// with the square of the elements the expression may read, by thousands
// past timeoutScaleElements, up to maxTimeoutScale times: the cost limit
// stays what bounds the work (a simple map stops at about 70,000
// elements), the deadline what bounds the time of the rest.
const (
	timeoutScaleElements = 2000
	maxTimeoutScale      = 25
)

// scaledTimeout is the deadline of a tracked evaluation against act.
func (p *program) scaledTimeout(act *activation) time.Duration {
	limit := timeoutScaleElements * 8 // past this the scale is at its cap
	n := 0
	count := func(v any) {
		if n < limit {
			n += elements(v, limit-n)
		}
	}
	if p.uses.allInput {
		count(act.st.Input)
	} else {
		for _, f := range p.uses.input {
			count(act.st.Input[f])
		}
	}
	if p.uses.allVars {
		count(act.vars)
	} else {
		for _, f := range p.uses.vars {
			count(act.vars[f])
		}
	}
	for _, v := range act.st.Scope {
		count(v)
	}
	k := int64(n / timeoutScaleElements)
	if k <= 1 {
		return p.timeout
	}
	return p.timeout * time.Duration(min(k*k, maxTimeoutScale))
}

// elements counts the list elements and map entries in v, at any depth,
// stopping past limit.
func elements(v any, limit int) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case []any:
			n += len(t)
			for _, x := range t {
				if n > limit {
					return
				}
				walk(x)
			}
		case map[string]any:
			n += len(t)
			for _, x := range t {
				if n > limit {
					return
				}
				walk(x)
			}
		}
	}
	walk(v)
	return n
}

// redactEvalError keeps what went wrong in an evaluation and drops the
// values CEL quotes in its messages (a missing key, an index, the text that
// failed to parse), which come from inputs and vars: failures are stored
// and logged, values never are.
func redactEvalError(msg string) string {
	if strings.HasPrefix(msg, "no such overload") || strings.HasPrefix(msg, "found no matching overload") {
		return msg // CEL's own overload errors name functions and types only
	}
	if i := strings.IndexAny(msg, "\"'"); i >= 0 {
		msg = msg[:i]
	}
	if i := strings.Index(msg, ": "); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimRight(msg, " :")
}

// activation resolves the names expressions see, without copying the state.
type activation struct {
	st      *State
	vars    map[string]any
	attempt int64
	now     time.Time
	limit   int        // the largest result, encoded; 0: maxResultBytes
	guards  *guardMemo // made by the first guarded call (celguard.go)
}

func (a *activation) ResolveName(name string) (any, bool) {
	if field, ok := strings.CutPrefix(name, "input."); ok {
		v, ok := a.st.Input[field]
		return v, ok
	}
	switch name {
	case "vars":
		return a.vars, true
	case "input":
		return a.st.Input, true
	case "saga.id":
		return a.st.SagaID, true
	case "saga.name":
		return a.st.Name, true
	case "saga.attempt":
		return a.attempt, true
	case "saga.now":
		return a.now, true
	}
	if v, ok := a.st.Scope[name]; ok {
		return v, true // a foreach body's item, or index
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// toNative turns a CEL result into the plain values state holds: nil, bool,
// int64, uint64, float64, string, []byte, time.Time, time.Duration, []any and
// map[string]any.
func toNative(v ref.Val, limit int) (any, error) {
	budget := maxResultBytes
	if limit > 0 {
		budget = limit
	}
	out, err := toNativeAt(v, 0, &budget)
	if err == errResultTooLarge {
		return nil, resultTooLarge(max(maxResultBytes, limit))
	}
	return out, err
}

// maxResultBytes bounds the size of one expression's result as state would
// hold it: as much as a failed saga's state may (a compensation's input
// may be an output kept there). CEL's cost limit bounds evaluation, but a result can share one
// list many times over (input.l.map(a, input.l)); expanding it must stop
// long before memory does.
const maxResultBytes = maxSettledStateBytes

// errResultTooLarge is the error of a result past its budget, within
// toNativeAt; toNative names the limit (resultTooLarge).
var errResultTooLarge = errors.New("result too large")

// resultTooLargeError is a result past limit: a state's (maxResultBytes),
// or an object's when the engine keeps large values apart.
type resultTooLargeError struct{ limit int }

func resultTooLarge(limit int) error { return resultTooLargeError{limit} }

func (e resultTooLargeError) Error() string {
	what := "a saga's state"
	if e.limit > maxResultBytes {
		what = "a value kept as an object"
	}
	return fmt.Sprintf("result larger than %d bytes, more than %s can hold", e.limit, what)
}

// toNativeAt converts v found depth levels down, refusing values nested
// past MaxDataDepth as CheckValue does, and charging each part to budget.
func toNativeAt(v ref.Val, depth int, budget *int) (any, error) {
	if depth > MaxDataDepth {
		return nil, errTooDeep
	}
	if *budget -= 8; *budget < 0 {
		return nil, errResultTooLarge
	}
	switch t := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(t), nil
	case types.Int:
		return int64(t), nil
	case types.Uint:
		return uint64(t), nil
	case types.Double:
		if math.IsNaN(float64(t)) || math.IsInf(float64(t), 0) {
			return nil, fmt.Errorf("result %v is not a finite number", float64(t))
		}
		return float64(t), nil
	case types.String:
		if *budget -= len(t); *budget < 0 {
			return nil, errResultTooLarge
		}
		return string(t), nil
	case types.Bytes:
		if *budget -= len(t); *budget < 0 {
			return nil, errResultTooLarge
		}
		return []byte(t), nil
	case types.Timestamp:
		// timestamp('...+02:00') keeps its offset: in UTC, as a read of
		// the state gives it (CheckValue).
		return t.Time.UTC(), nil
	case types.Duration:
		return t.Duration, nil
	case *types.Err:
		return nil, t
	}
	switch t := v.(type) {
	case traits.Mapper:
		out := make(map[string]any)
		it := t.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("a map key is %s: only string keys can be stored", typeName(k.Type().TypeName()))
			}
			if *budget -= len(ks); *budget < 0 {
				return nil, errResultTooLarge
			}
			ev, err := toNativeAt(t.Get(k), depth+1, budget)
			if err != nil {
				return nil, err
			}
			out[string(ks)] = ev
		}
		return out, nil
	case traits.Lister:
		n, _ := t.Size().(types.Int)
		out := make([]any, 0, int(n))
		it := t.Iterator()
		for it.HasNext() == types.True {
			ev, err := toNativeAt(it.Next(), depth+1, budget)
			if err != nil {
				return nil, err
			}
			out = append(out, ev)
		}
		return out, nil
	}
	if native, err := v.ConvertToNative(reflect.TypeFor[any]()); err == nil {
		return CheckValue(native)
	}
	return nil, fmt.Errorf("the result is %s, which cannot be stored", typeName(v.Type().TypeName()))
}
