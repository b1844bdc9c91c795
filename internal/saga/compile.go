package saga

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/lambdasaga/lambdasaga/internal/lang"
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
//
// src is a definition's source, or a bundle (Plan.Source of a definition
// with child sagas), whose children Compile reads from the bundle. A
// definition with a saga step needs its children: give it as a bundle, or
// compile it with CompileFile.
func Compile(file string, src []byte, opts Options) (*Plan, error) {
	if !isBundle(src) {
		return compileRoot(file, src, "", nil, opts)
	}
	root, files, err := parseBundle(src)
	if err != nil {
		return nil, lang.NewDefinitionError([]lang.Problem{{File: file, Message: err.Error()}})
	}
	dir := path.Dir(file)
	srcs := &sources{
		read: func(key string) ([]byte, error) {
			if b, ok := files[key]; ok {
				return b, nil
			}
			return nil, fmt.Errorf("the bundle holds no file %s", key)
		},
		display: func(key string) string { return path.Join(dir, key) },
	}
	p, err := compileRoot(file, root, "", srcs, opts)
	if err == nil && !bytes.Equal(p.Source(), src) {
		return nil, lang.NewDefinitionError([]lang.Problem{{File: file, Message: "the bundle is not as Compile writes it (a file it does not use, out of order, or twice): compile the definition's files again"}})
	}
	return p, err
}

// CompileFile compiles the definition in file name of fsys, with the child
// sagas its saga steps name, read from fsys next to it (each problem names
// the file it is in). The plan's Source is the bundle of them all, and its
// hash covers every child. A definition without children compiles as
// Compile compiles its source, to the same hash.
func CompileFile(fsys fs.FS, name string, opts Options) (*Plan, error) {
	src, err := readSource(fsys, name)
	if err != nil {
		return nil, err
	}
	if isBundle(src) {
		return Compile(name, src, opts)
	}
	dir := path.Dir(name)
	srcs := &sources{
		read:    func(key string) ([]byte, error) { return readChild(fsys, dir, key) },
		display: func(key string) string { return path.Join(dir, key) },
	}
	return compileRoot(name, src, path.Base(name), srcs, opts)
}

// compileRoot compiles the definition src, at key among srcs (nil: it may
// have no children).
func compileRoot(file string, src []byte, key string, srcs *sources, opts Options) (*Plan, error) {
	if srcs == nil {
		srcs = &sources{}
	}
	u := srcs.compile(file, src, key, opts.withDefaults())
	if len(srcs.problems) > 0 {
		return nil, lang.NewDefinitionError(srcs.problems)
	}
	if u.plan == nil {
		return nil, lang.NewDefinitionError([]lang.Problem{{File: file, Message: "cannot compile the definition"}})
	}
	return u.plan, nil
}

type compiler struct {
	def      *lang.Definition
	opts     Options
	env      *cel.Env // of the list of the step being compiled
	problems []lang.Problem
	plan     *Plan
	srcs     *sources // where child sagas are read
	key      string   // this definition's key among srcs

	avail        []map[string]bool // vars some path may have set before each step
	sure         []map[string]bool // vars every path has set before each step
	compensating bool              // the expression being compiled is a compensation's
	allWrites    map[string]bool   // vars any step sets
	listWrites   map[string]int    // vars a step of a branch or body sets: the first such list
	allowed      map[string]bool   // vars the expression being compiled may read, nil: do not check
	reachable    []bool
	children     map[string]bool      // keys of the child sagas, theirs included
	uses         map[*lang.Step]*uses // what each step's expressions touch of input and vars
}

func (c *compiler) errorf(pos lang.Pos, step, field, format string, args ...any) {
	c.problems = append(c.problems, lang.Problem{File: c.def.File, Line: pos.Line, Column: pos.Column, Step: step, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (c *compiler) compile() *Plan {
	def := c.def
	p := &Plan{def: def, opts: c.opts, index: map[string]int{}}
	p.secrets = slices.ContainsFunc(def.Input, func(f lang.InputField) bool { return f.Secret })
	c.plan = p
	c.layout(def.Steps, -1, 0, 0, nil)
	for i, s := range p.steps {
		if s.ID == "" {
			continue
		}
		if j, dup := p.index[s.ID]; dup {
			first := p.steps[j]
			where := fmt.Sprintf("step #%d at line %d", j+1, first.Pos.Line)
			if first.list != 0 {
				where = fmt.Sprintf("a step of %s at line %d", c.listName(first.list), first.Pos.Line)
			}
			c.errorf(s.Pos, s.ID, "id", "duplicate step id (first used by %s): step ids are unique across the definition, its branches and foreach bodies included", where)
			continue
		}
		p.index[s.ID] = i
	}
	if !c.scopeEnvs() {
		return nil
	}
	for _, ps := range p.steps {
		l := &p.lists[ps.list]
		p.callbacks = p.callbacks || ps.Callback != nil
		p.forks = p.forks || lang.IsFork(ps.Kind)
		ps.nextIndex = ps.idx + 1
		if ps.idx+1 == l.first+l.n {
			ps.nextIndex = l.exit()
		}
		if ps.Next != "" {
			ps.nextIndex = c.target(ps, "next", ps.Next)
		}
	}
	c.checkGraph()
	for _, ps := range p.steps {
		c.compileStep(ps)
	}
	markUndoable(p)
	c.markCopies()
	return p
}

// markCopies gives every parallel and foreach step what its children
// must copy of the parent's input and vars: what the expressions of the
// steps in its branches or body, at any depth, touch.
func (c *compiler) markCopies() {
	p := c.plan
	for _, ps := range p.steps {
		u := c.uses[ps.Step]
		if u == nil {
			continue
		}
		for l := p.lists[ps.list]; l.fork >= 0; l = p.lists[p.steps[l.fork].list] {
			f := p.steps[l.fork]
			if f.copies == nil {
				f.copies = &uses{}
			}
			f.copies.add(*u)
		}
	}
}

// markUndoable marks every fork that holds, in its branches or body at
// any depth or in its child saga, a step that declares compensate.
func markUndoable(p *Plan) {
	for _, ps := range p.steps {
		if ps.comp == nil && !(ps.child != nil && ps.child.compensates()) {
			continue
		}
		for l := p.lists[ps.list]; l.fork >= 0; l = p.lists[p.steps[l.fork].list] {
			p.steps[l.fork].undoable = true
		}
		if ps.child != nil {
			ps.undoable = true
		}
	}
}

// compensates reports whether some step of the plan declares compensate,
// in a fork or a child saga included.
func (p *Plan) compensates() bool {
	for _, ps := range p.steps {
		if ps.comp != nil || ps.undoable {
			return true
		}
	}
	return false
}

// target resolves a next, catch or switch target of step ps. A target in
// another list (a branch, a body, or the saga's own steps) is refused:
// lists are run by different child runs.
func (c *compiler) target(ps *planStep, field, id string, at ...lang.Pos) int {
	s := ps.Step
	pos := s.FieldPos(strings.SplitN(field, "[", 2)[0])
	if len(at) > 0 {
		pos = at[0]
	}
	if pos.Line == 0 {
		pos = s.Pos
	}
	exit := c.plan.lists[ps.list].exit()
	i, ok := c.plan.index[id]
	if !ok {
		c.errorf(pos, s.ID, field, "no step has id %q%s", id, c.suggest(id))
		return exit
	}
	if t := c.plan.steps[i]; t.list != ps.list {
		c.errorf(pos, s.ID, field, "step %q is one of %s, and this step one of %s: next, catch and switch never cross a branch's boundary (the end of a branch or foreach body ends it; only the fork's out goes on)",
			id, c.listName(t.list), c.listName(ps.list))
		return exit
	}
	return i
}

// suggest names a step id close to a mistyped one: the closest, and of
// those the first in the definition, so the answer never varies.
func (c *compiler) suggest(id string) string {
	best, bestD := "", 3
	for _, s := range c.plan.steps {
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
	c.env = c.plan.lists[ps.list].env
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
		next := c.plan.lists[ps.list].exit()
		if ct.Next == s.ID && s.ID != "" {
			// A catch back to its own step repeats the step at once, with a
			// new visit each lap and no backoff: that is what retry is for.
			c.errorf(ct.Pos, s.ID, field+".next", "routes a failure back to its own step, a loop with no backoff: to try the step again, use retry (attempts, backoff)")
		} else if ct.Next != "" {
			next = c.target(ps, field+".next", ct.Next, ct.Pos)
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
			cc := compiledCase{nextIndex: c.plan.lists[ps.list].exit()}
			field := fmt.Sprintf("switch[%d]", i)
			if cs.Next != "" {
				f := field + ".next"
				if cs.Default {
					f = field + ".default"
				}
				cc.nextIndex = c.target(ps, f, cs.Next, cs.Pos)
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
				c.errorf(s.Wait.Pos, s.ID, "wait.until", "until must be a timestamp, but ${%s} is %s (timestamp('2026-12-24T09:00:00Z') makes one from text)", s.Wait.Until, typeName(prg.outType.TypeName()))
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
	case lang.KindParallel, lang.KindForeach, lang.KindSaga:
		c.compileFork(ps)
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
		c.errorf(pos, s.ID, field, "condition must be a bool, but ${%s} is %s", src, typeName(prg.outType.TypeName()))
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
	if prg != nil {
		if c.uses == nil {
			c.uses = map[*lang.Step]*uses{}
		}
		if c.uses[s] == nil {
			c.uses[s] = &uses{}
		}
		c.uses[s].add(prg.uses)
	}
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
