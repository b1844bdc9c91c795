package lang

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/lambdasaga/lambdasaga/durable"
	"go.yaml.in/yaml/v3"
)

var stepFields = []string{"id", "next", "catch", "action", "with", "out", "retry", "timeout", "compensate", "callback", "set", "switch", "assert", "fail", "succeed", "wait", "await",
	"parallel", "foreach", "as", "concurrency", "steps", "saga"}

// kindFields lists, for each kind that has any, the fields beyond id,
// next, catch and the kind's own that a step of that kind may have.
var kindFields = map[StepKind][]string{
	KindAction:   {"with", "out", "retry", "timeout", "compensate", "callback"},
	KindAwait:    {"out"},
	KindParallel: {"out"},
	KindForeach:  {"as", "concurrency", "steps", "out"},
	KindSaga:     {"with", "out"},
}

// extraFields are the step fields that belong to some kinds only, in the
// order their problems are reported.
var extraFields = []string{"with", "out", "retry", "timeout", "compensate", "callback", "as", "concurrency", "steps"}

// stepList reads a list of steps: the saga's, a branch's or a foreach
// body's. where names the list in labels of steps without an id ("" for
// the saga's own, "book.parallel[0]." for a branch); depth is the forks
// around it.
func (p *parser) stepList(n *yaml.Node, where string, depth int) []*Step {
	out := make([]*Step, 0, len(n.Content))
	for i, sn := range n.Content {
		if p.steps++; p.steps == MaxSteps+1 {
			p.errorf(sn, "", "step %d of the definition, counting those in branches and foreach bodies: over the limit of %d steps", p.steps, MaxSteps)
		}
		if p.steps > MaxSteps {
			break
		}
		label := fmt.Sprintf("#%d", i+1)
		if where != "" {
			label = fmt.Sprintf("%ssteps[%d]", where, i)
		}
		out = append(out, p.stepNode(label, sn, depth))
	}
	return out
}

// stepNode reads one step; label names it in problems until its id is
// known, and depth is the number of forks around it.
func (p *parser) stepNode(label string, n *yaml.Node, depth int) *Step {
	s := &Step{Pos: Pos{n.Line, n.Column}, pos: map[string]Pos{}}
	outer := p.step
	p.step = label
	defer func() { p.step = outer }()
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "", "must be a mapping with an id and one of %s", kindList())
		return s
	}
	// The id first, so that every other problem names the step.
	p.idField(s, n)
	fields, ok := p.fieldsAndKind(s, n)
	if !ok {
		return s
	}
	p.checkKindFields(s, fields)
	p.nextAndCatch(s, fields)
	if IsFork(s.Kind) {
		if v, ok := fields["out"]; ok {
			s.Out = p.ident(v, "out")
		}
		if depth+1 > MaxForkDepth {
			p.errorf(fields[string(s.Kind)], string(s.Kind), "a fork %d deep: parallel, foreach and saga steps nest at most %d deep", depth+1, MaxForkDepth)
			return s
		}
	}
	p.kindSpecific(s, n, fields, depth)
	return s
}

// idField reads the id of step n into s, and names the step by it in
// the problems that follow.
func (p *parser) idField(s *Step, n *yaml.Node) {
	for j := 0; j+1 < len(n.Content); j += 2 {
		if n.Content[j].Value == "id" {
			s.ID = p.stepID(n.Content[j+1], "id")
			if s.ID != "" {
				p.step = s.ID
			}
			if strings.HasSuffix(s.ID, compensateSuffix) {
				p.errorf(n.Content[j+1], "id", "the suffix %s is reserved: STEP%s names the compensation of STEP (in sagactl run --fail and in idempotency keys)", compensateSuffix, compensateSuffix)
			}
		}
	}
	if s.ID == "" && !p.hasKey(n, "id") {
		p.errorf(n, "id", "missing: every step needs an id")
	}
}

// fieldsAndKind reads the fields of step n, keeping their positions in s, and
// sets the step's kind. It returns the fields by key, and false when the
// step has no kind or more than one.
func (p *parser) fieldsAndKind(s *Step, n *yaml.Node) (map[string]*yaml.Node, bool) {
	var kinds []string
	fields := map[string]*yaml.Node{}
	p.eachField(n, "", stepFields, func(key string, k, v *yaml.Node) {
		s.pos[key] = Pos{k.Line, k.Column}
		fields[key] = v
		if slices.Contains(allKinds(), StepKind(key)) {
			kinds = append(kinds, key)
		}
	})
	switch len(kinds) {
	case 0:
		p.errorf(n, "", "has no kind: give it one of %s", kindList())
		return fields, false
	case 1:
		s.Kind = StepKind(kinds[0])
		return fields, true
	default:
		p.errorf(n, "", "has %d kinds (%s): a step has exactly one", len(kinds), strings.Join(kinds, ", "))
		return fields, false
	}
}

// checkKindFields reports each field that belongs to other kinds than
// the step's.
func (p *parser) checkKindFields(s *Step, fields map[string]*yaml.Node) {
	for _, f := range extraFields {
		v, ok := fields[f]
		if !ok || slices.Contains(kindFields[s.Kind], f) {
			continue
		}
		switch {
		case IsFork(s.Kind) && f == "steps" && s.Kind == KindParallel:
			p.errorf(v, f, "a parallel step's steps are in its branches: parallel: [{steps: [...]}, {steps: [...]}]")
		case IsFork(s.Kind):
			p.errorf(v, f, "a %s step has no %s (its fields: id, %s, next, catch)", s.Kind, f, strings.Join(append([]string{string(s.Kind)}, kindFields[s.Kind]...), ", "))
		case f == "as" || f == "concurrency" || f == "steps":
			p.errorf(v, f, "only foreach steps have %s", f)
		default:
			p.errorf(v, f, "only action steps have %s", f)
		}
	}
}

// nextAndCatch reads the step's next and catch, where its kind allows
// them.
func (p *parser) nextAndCatch(s *Step, fields map[string]*yaml.Node) {
	if v, ok := fields["next"]; ok {
		if s.Kind == KindSwitch || s.Kind == KindFail || s.Kind == KindSucceed {
			p.errorf(v, "next", "a %s step ends its path or picks the next step itself: next is not allowed", s.Kind)
		} else {
			s.Next = p.stepID(v, "next")
		}
	}
	if v, ok := fields["catch"]; ok {
		if s.Kind != KindAction && s.Kind != KindAssert && s.Kind != KindAwait && !IsFork(s.Kind) {
			p.errorf(v, "catch", "only action, assert and await steps, and the forks (parallel, foreach, saga), can fail with an error to catch")
		} else {
			s.Catch = p.catches(v)
		}
	}
}

// kindSpecific reads the field that names the step's kind, and the fields
// that belong to that kind; depth is the number of forks around step n.
func (p *parser) kindSpecific(s *Step, n *yaml.Node, fields map[string]*yaml.Node, depth int) {
	kn := fields[string(s.Kind)]
	switch s.Kind {
	case KindAction:
		p.actionFields(s, kn, fields)
	case KindSet:
		s.Set = p.assignments(kn)
	case KindSwitch:
		s.Switch = p.cases(kn)
	case KindAssert:
		s.Assert = p.assertion(kn)
	case KindFail:
		s.Fail = p.failure(kn)
	case KindWait:
		s.Wait = p.wait(kn)
	case KindAwait:
		s.Await = p.await(kn)
		if v, ok := fields["out"]; ok {
			s.Out = p.ident(v, "out")
		}
	case KindParallel:
		s.Parallel = p.branches(kn, s.ID, depth+1)
	case KindForeach:
		s.Foreach = p.foreach(kn, fields)
		if v, ok := fields["steps"]; ok {
			s.Steps = p.body(v, s.ID, depth+1)
		} else {
			p.errorf(n, "steps", "missing: a foreach step needs its body, steps: [...]")
		}
	case KindSaga:
		s.Saga = p.childPath(kn)
		if v, ok := fields["with"]; ok {
			s.With = p.value(v, "with", 0)
		}
	case KindSucceed:
		s.Succeed = p.succeedOutput(kn)
	}
}

// actionFields reads an action step's action (kn) and the fields only
// action steps have.
func (p *parser) actionFields(s *Step, kn *yaml.Node, fields map[string]*yaml.Node) {
	s.Action = p.action(kn, "action")
	if v, ok := fields["with"]; ok {
		s.With = p.value(v, "with", 0)
	}
	if v, ok := fields["out"]; ok {
		s.Out = p.ident(v, "out")
	}
	if v, ok := fields["retry"]; ok {
		s.Retry = p.retry(v, "retry")
	}
	if v, ok := fields["timeout"]; ok {
		s.Timeout = p.duration(v, "timeout", durable.MaxDelay)
	}
	if v, ok := fields["compensate"]; ok {
		if v.Kind == yaml.ScalarNode {
			s.NoCompensation = p.noCompensation(v)
		} else {
			s.Compensate = p.compensation(v)
		}
	}
	if v, ok := fields["callback"]; ok {
		s.Callback = p.callback(v)
	}
}

// assignments reads a set step's {NAME: VALUE, ...}, in order.
func (p *parser) assignments(n *yaml.Node) []Assignment {
	var out []Assignment
	p.eachField(n, "set.", nil, func(key string, k, v *yaml.Node) {
		if !identPattern.MatchString(key) {
			p.errorf(k, "set."+key, "%q is not a valid variable name", key)
			return
		}
		out = append(out, Assignment{Name: key, Value: p.value(v, "set."+key, 0)})
	})
	if n.Kind == yaml.MappingNode && len(n.Content) == 0 {
		p.errorf(n, "set", "assigns nothing")
	}
	return out
}

// assertion reads {if: CEL condition, message: TEXT, error: TYPE}.
func (p *parser) assertion(n *yaml.Node) *Assertion {
	a := &Assertion{Pos: Pos{n.Line, n.Column}, Error: ErrorTypeAssertion}
	p.eachField(n, "assert.", []string{"if", "message", "error"}, func(key string, k, v *yaml.Node) {
		switch key {
		case "if":
			a.If = p.condition(v, "assert.if")
			a.Pos = Pos{v.Line, v.Column + quoteOffset(v)}
		case "message":
			a.Message = p.str(v, "assert.message")
		case "error":
			a.Error = p.str(v, "assert.error")
		}
	})
	if a.If == "" && !p.hasKey(n, "if") {
		p.errorf(n, "assert.if", "missing: an assert needs a condition")
	}
	return a
}

// failure reads {error: TYPE, message: TEXT}.
func (p *parser) failure(n *yaml.Node) *Failure {
	f := &Failure{}
	p.eachField(n, "fail.", []string{"error", "message"}, func(key string, k, v *yaml.Node) {
		if key == "error" {
			f.Error = p.str(v, "fail.error")
		} else {
			f.Message = p.str(v, "fail.message")
		}
	})
	if f.Error == "" && !p.hasKey(n, "error") {
		p.errorf(n, "fail.error", "missing: a fail step names its error type")
	}
	return f
}

// succeedOutput reads a succeed step's {output: VALUE}; nil when it has
// none (succeed: with nothing after it, or no output field).
func (p *parser) succeedOutput(n *yaml.Node) *Value {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	var out *Value
	p.eachField(n, "succeed.", []string{"output"}, func(key string, k, v *yaml.Node) {
		out = p.value(v, "succeed.output", 0)
	})
	return out
}

// wait reads {for: DURATION} or {until: CEL timestamp}.
func (p *parser) wait(n *yaml.Node) *Wait {
	w := &Wait{Pos: Pos{n.Line, n.Column}}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "wait", "must be {for: DURATION} (such as 36h) or {until: \"${CEL timestamp}\"}")
		return w
	}
	p.eachField(n, "wait.", []string{"for", "until"}, func(key string, k, v *yaml.Node) {
		switch key {
		case "for":
			w.For = p.duration(v, "wait.for", MaxWait)
		case "until":
			w.Until = p.expression(v, "wait.until", "until: is a CEL expression that yields a timestamp")
			w.Pos = Pos{v.Line, v.Column + quoteOffset(v)}
		}
	})
	switch hasFor, hasUntil := p.hasKey(n, "for"), p.hasKey(n, "until"); {
	case hasFor && hasUntil:
		p.errorf(n, "wait", "has both for: and until:; give one")
	case !hasFor && !hasUntil:
		p.errorf(n, "wait", "missing: give for: DURATION (such as 36h) or until: \"${CEL timestamp}\"")
	}
	return w
}

// await reads {signal: NAME, timeout: DURATION}.
func (p *parser) await(n *yaml.Node) *Await {
	a := &Await{Pos: Pos{n.Line, n.Column}}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "await", "must be {signal: NAME, timeout: DURATION} (such as {signal: approved, timeout: 72h})")
		return a
	}
	p.eachField(n, "await.", []string{"signal", "timeout"}, func(key string, k, v *yaml.Node) {
		switch key {
		case "signal":
			a.Signal = p.str(v, "await.signal")
			if a.Signal != "" && !SignalNamePattern.MatchString(a.Signal) {
				p.errorf(v, "await.signal", "%q is not a valid signal name (%s)", a.Signal, SignalNameRule)
			}
		case "timeout":
			a.Timeout = p.duration(v, "await.timeout", MaxWait)
		}
	})
	if !p.hasKey(n, "signal") {
		p.errorf(n, "await.signal", "missing: name the signal to wait for")
	}
	return a
}

// callback reads {timeout: DURATION}.
func (p *parser) callback(n *yaml.Node) *Callback {
	cb := &Callback{Pos: Pos{n.Line, n.Column}}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "callback", "must be {timeout: DURATION} (such as {timeout: 1h})")
		return cb
	}
	p.eachField(n, "callback.", []string{"timeout"}, func(key string, k, v *yaml.Node) {
		cb.Timeout = p.duration(v, "callback.timeout", MaxWait)
	})
	return cb
}

func kindList() string {
	names := make([]string, 0, len(allKinds()))
	for _, k := range allKinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

func (p *parser) hasKey(n *yaml.Node, key string) bool {
	if n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return true
		}
	}
	return false
}

func (p *parser) catches(n *yaml.Node) []Catch {
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "catch", "must be a list of {errors: [...], next: step}")
		return nil
	}
	if len(n.Content) > MaxCatchClauses {
		p.errorf(n, "catch", "%d clauses, over the limit of %d", len(n.Content), MaxCatchClauses)
		return nil
	}
	var out []Catch
	for i, cn := range n.Content {
		field := fmt.Sprintf("catch[%d]", i)
		c := Catch{Pos: Pos{cn.Line, cn.Column}}
		p.eachField(cn, field+".", []string{"errors", "next"}, func(key string, k, v *yaml.Node) {
			switch key {
			case "errors":
				if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
					p.errorf(v, field+".errors", "must be a non-empty list of error types (\"*\" for any)")
					return
				}
				for _, e := range v.Content {
					c.Errors = append(c.Errors, p.str(e, field+".errors"))
				}
			case "next":
				c.Next = p.stepID(v, field+".next")
			}
		})
		if cn.Kind == yaml.MappingNode {
			if !p.hasKey(cn, "errors") {
				p.errorf(cn, field+".errors", "missing: list the error types to catch (\"*\" for any)")
			}
			if !p.hasKey(cn, "next") {
				p.errorf(cn, field+".next", "missing: name the step to go to")
			}
		}
		out = append(out, c)
	}
	return out
}

func (p *parser) cases(n *yaml.Node) []Case {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.errorf(n, "switch", "must be a non-empty list of {if: cond, next: step} and a last {default: step}")
		return nil
	}
	if len(n.Content) > MaxSwitchCases {
		p.errorf(n, "switch", "%d cases, over the limit of %d", len(n.Content), MaxSwitchCases)
		return nil
	}
	var out []Case
	for i, cn := range n.Content {
		field := fmt.Sprintf("switch[%d]", i)
		c := Case{Pos: Pos{cn.Line, cn.Column}}
		p.eachField(cn, field+".", []string{"if", "next", "default"}, func(key string, k, v *yaml.Node) {
			switch key {
			case "if":
				c.If = p.condition(v, field+".if")
				c.Pos = Pos{v.Line, v.Column + quoteOffset(v)}
			case "next":
				c.Next = p.stepID(v, field+".next")
			case "default":
				c.Default = true
				c.Next = p.stepID(v, field+".default")
			}
		})
		if cn.Kind != yaml.MappingNode {
			continue
		}
		switch {
		case c.Default && (p.hasKey(cn, "if") || p.hasKey(cn, "next")):
			p.errorf(cn, field, "a default case has only default: step")
		case c.Default && i != len(n.Content)-1:
			p.errorf(cn, field, "the default case must be the last")
		case !c.Default && (!p.hasKey(cn, "if") || !p.hasKey(cn, "next")):
			p.errorf(cn, field, "a case needs both if: and next: (or is the last, {default: step})")
		}
		out = append(out, c)
	}
	return out
}

// condition reads an if: field. It is CEL with or without ${ }.
func (p *parser) condition(n *yaml.Node, field string) string {
	return p.expression(n, field, "a condition is a CEL expression that yields a bool")
}

// expression reads a field that holds one CEL expression, with or without
// ${ }; what says what it must be, for the error when it is empty.
func (p *parser) expression(n *yaml.Node, field, what string) string {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		return n.Value
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		p.str(n, field) // reports the wrong type
		return ""
	}
	s := n.Value
	if inner, ok := exactExpr(s); ok {
		s = inner
	}
	if strings.TrimSpace(s) == "" {
		// An empty condition would compile to no program at all.
		p.errorf(n, field, "empty expression: %s", what)
		return ""
	}
	if len(s) > MaxExpressionBytes {
		p.errorf(n, field, "expression is %d bytes, over the limit of %d", len(s), MaxExpressionBytes)
		return ""
	}
	return s
}

func (p *parser) retry(n *yaml.Node, field string) *RetryPolicy {
	r := DefaultRetry
	if field != "retry" {
		r = DefaultCompensateRetry
	}
	p.eachField(n, field+".", []string{"attempts", "backoff", "max_backoff", "jitter", "permanent"}, func(key string, k, v *yaml.Node) {
		switch key {
		case "attempts":
			a, err := strconv.Atoi(v.Value)
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || err != nil || a < 1 || a > MaxRetryAttempts {
				p.errorf(v, field+".attempts", "%q must be a whole number from 1 to %d", v.Value, MaxRetryAttempts)
				return
			}
			r.Attempts = a
		case "backoff":
			r.Backoff = p.duration(v, field+".backoff", durable.MaxDelay)
		case "max_backoff":
			r.MaxBackoff = p.duration(v, field+".max_backoff", durable.MaxDelay)
		case "jitter":
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
				p.errorf(v, field+".jitter", "must be true or false")
				return
			}
			r.Jitter = v.Value == "true"
		case "permanent":
			if v.Kind != yaml.SequenceNode {
				p.errorf(v, field+".permanent", "must be a list of error types")
				return
			}
			for _, e := range v.Content {
				r.Permanent = append(r.Permanent, p.str(e, field+".permanent"))
			}
		}
	})
	if r.Backoff > 0 && r.MaxBackoff > 0 && r.MaxBackoff < r.Backoff {
		p.errorf(n, field+".max_backoff", "%s is shorter than backoff %s", r.MaxBackoff, r.Backoff)
	}
	return &r
}

// NoCompensation is the word that says a step needs no undo:
// compensate: none.
const NoCompensation = "none"

// noCompensation reads a compensate that is not a mapping: none, or a
// mistake (false, null, a typo), refused with what may stand there.
func (p *parser) noCompensation(n *yaml.Node) bool {
	if n.ShortTag() == "!!str" && n.Value == NoCompensation {
		return true
	}
	hint := ""
	if strings.EqualFold(n.Value, NoCompensation) {
		hint = " (did you mean none?)"
	}
	p.errorf(n, "compensate", "must be a mapping {action: NAME, with: ...} that undoes the step, or none to say it needs no undo%s", hint)
	return false
}

func (p *parser) compensation(n *yaml.Node) *Compensation {
	c := &Compensation{Pos: Pos{n.Line, n.Column}}
	p.eachField(n, "compensate.", []string{"action", "with", "retry", "timeout"}, func(key string, k, v *yaml.Node) {
		switch key {
		case "action":
			c.Action = p.action(v, "compensate.action")
		case "with":
			c.With = p.value(v, "compensate.with", 0)
		case "retry":
			c.Retry = p.retry(v, "compensate.retry")
		case "timeout":
			c.Timeout = p.duration(v, "compensate.timeout", durable.MaxDelay)
			c.TimeoutPos = Pos{v.Line, v.Column}
		}
	})
	if n.Kind == yaml.MappingNode && !p.hasKey(n, "action") {
		p.errorf(n, "compensate.action", "missing: name the action that undoes this step")
	}
	return c
}
