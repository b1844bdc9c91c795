package saga

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/lambdasaga/lambdasaga/lang"
)

// definitionHash returns the content hash that identifies a definition's source.
func definitionHash(src []byte) string {
	sum := sha256.Sum256(src)
	return hex.EncodeToString(sum[:])
}

// Compile parses and validates a definition and compiles it into a Plan;
// file names the source in problems. The zero Options are the defaults.
// Every problem found is reported at once in a *lang.DefinitionError,
// which matches lang.ErrInvalidDefinition.
func Compile(file string, src []byte, opts Options) (*Plan, error) {
	def, err := lang.Parse(file, src)
	c := &compiler{def: def, opts: opts.withDefaults()}
	if err != nil {
		var de *lang.DefinitionError
		if !errors.As(err, &de) {
			return nil, err
		}
		c.problems = de.Problems
		// Shape problems make further checks noisy; still check what we can.
		if len(def.Steps) == 0 {
			return nil, c.result()
		}
	}
	plan := c.compile()
	if len(c.problems) > 0 {
		return nil, c.result()
	}
	return plan, nil
}

type compiler struct {
	def      *lang.Definition
	opts     Options
	env      *cel.Env
	problems []lang.Problem
	plan     *Plan

	avail        []map[string]bool // vars some path may have set before each step
	sure         []map[string]bool // vars every path has set before each step
	compensating bool              // the expression being compiled is a compensation's
	allWrites    map[string]bool   // vars any step sets
	allowed      map[string]bool   // vars the expression being compiled may read, nil: do not check
	reachable    []bool
}

func (c *compiler) result() error {
	return lang.NewDefinitionError(c.problems)
}

func (c *compiler) errorf(pos lang.Pos, step, field, format string, args ...any) {
	c.problems = append(c.problems, lang.Problem{File: c.def.File, Line: pos.Line, Column: pos.Column, Step: step, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (c *compiler) compile() *Plan {
	def := c.def
	p := &Plan{def: def, hash: definitionHash(def.Source), opts: c.opts, index: map[string]int{}}
	c.plan = p
	env, err := newCELEnv(def)
	if err != nil {
		c.errorf(lang.Pos{}, "", "", "cannot build the expression environment: %v", err)
		return nil
	}
	c.env = env
	for i, s := range def.Steps {
		if s.ID == "" {
			continue
		}
		if j, dup := p.index[s.ID]; dup {
			c.errorf(s.Pos, s.ID, "id", "duplicate step id (first used by step #%d at line %d)", j+1, def.Steps[j].Pos.Line)
			continue
		}
		p.index[s.ID] = i
	}
	p.steps = make([]*planStep, len(def.Steps))
	for i, s := range def.Steps {
		ps := &planStep{Step: s, idx: i, nextIndex: i + 1}
		p.callbacks = p.callbacks || s.Callback != nil
		if i+1 == len(def.Steps) {
			ps.nextIndex = end
		}
		if s.Next != "" {
			ps.nextIndex = c.target(s, "next", s.Next)
		}
		p.steps[i] = ps
	}
	c.checkGraph()
	for _, ps := range p.steps {
		c.compileStep(ps)
	}
	return p
}

func (c *compiler) target(s *lang.Step, field, id string, at ...lang.Pos) int {
	i, ok := c.plan.index[id]
	if !ok {
		pos := s.FieldPos(strings.SplitN(field, "[", 2)[0])
		if len(at) > 0 {
			pos = at[0]
		}
		if pos.Line == 0 {
			pos = s.Pos
		}
		c.errorf(pos, s.ID, field, "no step has id %q%s", id, c.suggest(id))
		return end
	}
	return i
}

// suggest names a step id close to a mistyped one: the closest, and of
// those the first in the definition, so the answer never varies.
func (c *compiler) suggest(id string) string {
	best, bestD := "", 3
	for _, s := range c.def.Steps {
		if s.ID == "" {
			continue
		}
		if d := editDistance(id, s.ID); d < bestD {
			best, bestD = s.ID, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func (c *compiler) compileStep(ps *planStep) {
	s := ps.Step
	c.allowed = nil
	if c.reachable[ps.idx] { // an unreachable step is reported as such; its reads would only add noise
		c.allowed = map[string]bool{}
		for name := range c.avail[ps.idx] {
			c.allowed[name] = true
		}
	}
	for i, ct := range s.Catch {
		field := fmt.Sprintf("catch[%d]", i)
		for _, typ := range ct.Errors {
			if lang.Uncatchable(typ) {
				c.errorf(ct.Pos, s.ID, field+".errors", "%s always compensates: no catch can route it, so do not list it", typ)
			}
		}
		next := end
		if ct.Next == s.ID && s.ID != "" {
			// A catch back to its own step repeats the step at once, with a
			// new visit each lap and no backoff: that is what retry is for.
			c.errorf(ct.Pos, s.ID, field+".next", "routes a failure back to its own step, a loop with no backoff: to try the step again, use retry (attempts, backoff)")
		} else if ct.Next != "" {
			next = c.target(s, field+".next", ct.Next, ct.Pos)
		}
		ps.routes = append(ps.routes, compiledCatch{errors: ct.Errors, nextIndex: next})
	}
	switch s.Kind {
	case lang.KindAction:
		c.checkStepTimeout(s, "timeout", s.Timeout, s.FieldPos("timeout"))
		if s.Compensate != nil {
			c.checkStepTimeout(s, "compensate.timeout", s.Compensate.Timeout, s.Compensate.TimeoutPos)
		}
		ps.policy = lang.DefaultRetry
		if s.Retry != nil {
			ps.policy = *s.Retry
		}
		if s.With != nil {
			ps.args = c.template(s, "with", s.With)
		}
		if cb := s.Callback; cb != nil {
			if t := c.def.Timeout; t > 0 && cb.Timeout >= t {
				c.errorf(s.FieldPos("callback"), s.ID, "callback.timeout", "%s is not shorter than the saga's timeout of %s: the saga would reach its deadline first",
					lang.FormatDuration(cb.Timeout), lang.FormatDuration(t))
			}
		}
		if s.Compensate != nil {
			cc := &compiledComp{action: s.Compensate.Action, retry: lang.DefaultCompensateRetry, timeout: s.Compensate.Timeout}
			if s.Compensate.Retry != nil {
				cc.retry = *s.Compensate.Retry
			}
			if s.Compensate.With != nil {
				// Compensation runs at some later time, on whatever path led
				// there: it may read only what every path to this step has
				// written, and the step's own out.
				saved := c.allowed
				if saved != nil {
					c.allowed = maps.Clone(c.sure[ps.idx])
					if s.Out != "" {
						c.allowed[s.Out] = true
					}
				}
				c.compensating = true
				cc.with = c.template(s, "compensate.with", s.Compensate.With)
				c.allowed, c.compensating = saved, false
			}
			ps.comp = cc
		}
	case lang.KindSet:
		for _, a := range s.Set {
			ps.assigns = append(ps.assigns, compiledAssign{name: a.Name, val: c.template(s, "set."+a.Name, a.Value)})
			if c.allowed != nil {
				c.allowed[a.Name] = true
			} // later assignments of the same step see it
		}
	case lang.KindSwitch:
		for i, cs := range s.Switch {
			cc := compiledCase{nextIndex: end}
			field := fmt.Sprintf("switch[%d]", i)
			if cs.Next != "" {
				f := field + ".next"
				if cs.Default {
					f = field + ".default"
				}
				cc.nextIndex = c.target(s, f, cs.Next, cs.Pos)
			}
			if !cs.Default {
				cc.cond = c.condition(s, field+".if", cs.If, cs.Pos)
			}
			ps.cases = append(ps.cases, cc)
		}
	case lang.KindAssert:
		ps.check = c.condition(s, "assert.if", s.Assert.If, s.Assert.Pos)
	case lang.KindSucceed:
		if s.Succeed != nil {
			ps.output = c.template(s, "succeed.output", s.Succeed)
		}
	case lang.KindWait:
		if s.Wait.Until != "" {
			prg := c.expr(s, "wait.until", s.Wait.Until, s.Wait.Pos.Line, s.Wait.Pos.Column)
			if prg != nil && !prg.outType.IsExactType(cel.TimestampType) && !prg.outType.IsExactType(cel.DynType) {
				c.errorf(s.Wait.Pos, s.ID, "wait.until", "until must be a timestamp, but ${%s} is a %s (timestamp('2026-12-24T09:00:00Z') makes one from text)", s.Wait.Until, prg.outType)
				prg = nil
			}
			ps.until = prg
		}
		if t := c.def.Timeout; t > 0 && s.Wait.For >= t {
			c.errorf(s.FieldPos("wait"), s.ID, "wait.for", "%s is not shorter than the saga's timeout of %s: the saga would reach its deadline before it goes on",
				lang.FormatDuration(s.Wait.For), lang.FormatDuration(t))
		}
	case lang.KindAwait:
		if t := c.def.Timeout; t > 0 && s.Await.Timeout >= t {
			c.errorf(s.FieldPos("await"), s.ID, "await.timeout", "%s is not shorter than the saga's timeout of %s: the saga would reach its deadline first",
				lang.FormatDuration(s.Await.Timeout), lang.FormatDuration(t))
		}
	}
}

// checkStepTimeout refuses a step timeout the function running the action
// cannot give it, when Options.MaxStepTimeout says what it can.
func (c *compiler) checkStepTimeout(s *lang.Step, field string, d time.Duration, pos lang.Pos) {
	limit := c.opts.MaxStepTimeout
	if limit <= 0 || d <= limit {
		return
	}
	if pos.Line == 0 {
		pos = s.Pos
	}
	c.errorf(pos, s.ID, field, "%s is longer than the %s the function can give an action (its timeout less %s to load the saga and %s kept to record the result): shorten it, or raise the function's timeout",
		lang.FormatDuration(d), lang.FormatDuration(limit), lang.FormatDuration(StartReserve), lang.FormatDuration(ResultReserve))
}

func (c *compiler) condition(s *lang.Step, field, src string, pos lang.Pos) *program {
	if src == "" {
		return nil
	}
	prg := c.expr(s, field, src, pos.Line, pos.Column)
	if prg != nil && !prg.outType.IsExactType(cel.BoolType) && !prg.outType.IsExactType(cel.DynType) {
		c.errorf(pos, s.ID, field, "condition must be a bool, but ${%s} is a %s", src, prg.outType)
		return nil
	}
	return prg
}

func (c *compiler) expr(s *lang.Step, field, src string, line, col int) *program {
	prg, probs := compileExpr(c.env, src, c.opts)
	for _, pr := range probs {
		l, cl := line, col
		if pr.line == 1 && pr.col >= 0 {
			cl += pr.col
		} else if pr.line > 1 {
			l += pr.line - 1
			cl = pr.col + 1
		}
		c.errorf(lang.Pos{Line: l, Column: cl}, s.ID, field, "%s (in ${%s})", c.explain(pr.msg, src), src)
	}
	c.checkReads(s, field, lang.Pos{Line: line, Column: col}, prg)
	return prg
}

var inputFieldRef = regexp.MustCompile(`\binput\.([A-Za-z_][A-Za-z0-9_]*)`)

// explain rewrites CEL messages that would puzzle a definition author.
func (c *compiler) explain(msg, src string) string {
	msg = strings.ReplaceAll(msg, " (in container '')", "")
	if c.def.Input != nil && strings.Contains(msg, "undeclared reference to 'input'") {
		declared := make([]string, len(c.def.Input))
		for i, f := range c.def.Input {
			declared[i] = f.Name
		}
		for _, m := range inputFieldRef.FindAllStringSubmatch(src, -1) {
			if !slices.Contains(declared, m[1]) {
				return fmt.Sprintf("input has no field %q (declared: %s)", m[1], strings.Join(declared, ", "))
			}
		}
		return "input is used whole, but the definition declares its fields: use input.FIELD"
	}
	return msg
}
