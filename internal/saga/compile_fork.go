package saga

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// sources reads and compiles the definitions of one compilation: the
// parent and its child sagas, each once, by key (its path relative to the
// parent's directory).
type sources struct {
	read     func(key string) ([]byte, error) // nil: there is no file system, so no child can be read
	display  func(key string) string          // the file name of a key, for problems
	units    map[string]*unit
	stack    []string // the keys being compiled, outermost first: a child already on it closes a cycle
	files    map[string][]byte
	problems []lang.Problem // of every file
}

// unit is one compiled definition of a compilation.
type unit struct {
	plan *Plan // nil when it did not compile
	// ids are its step ids and its children's, each with the file and
	// line that has it.
	ids map[string]idPlace
	// depth is how deeply its forks nest, its children's counted: 0
	// without forks.
	depth int
	// children are the keys of its child sagas, theirs included.
	children map[string]bool
}

type idPlace struct {
	file string
	line int
}

// compile compiles src, the definition at key, into a unit, adding its
// problems to s.problems. A parse problem does not stop the checks that
// can still be made.
func (s *sources) compile(file string, src []byte, key string, opts Options) *unit {
	if s.units == nil {
		s.units, s.files = map[string]*unit{}, map[string][]byte{}
	}
	u := &unit{}
	s.units[key] = u
	s.stack = append(s.stack, key)
	defer func() { s.stack = s.stack[:len(s.stack)-1] }()

	def, err := lang.Parse(file, src)
	c := &compiler{def: def, opts: opts, srcs: s, key: key, children: map[string]bool{}}
	if err != nil {
		var de *lang.DefinitionError
		if !errors.As(err, &de) {
			s.problems = append(s.problems, lang.Problem{File: file, Message: err.Error()})
			return u
		}
		c.problems = de.Problems
		if len(def.Steps) == 0 { // shape problems only: further checks would be noise
			s.problems = append(s.problems, c.problems...)
			return u
		}
	}
	plan := c.compile()
	s.problems = append(s.problems, c.problems...)
	if plan == nil || len(c.problems) > 0 {
		return u
	}
	u.children = c.children
	u.ids = map[string]idPlace{}
	for _, ps := range plan.steps {
		u.ids[ps.ID] = idPlace{file, ps.Pos.Line}
		if !lang.IsFork(ps.Kind) {
			continue
		}
		d := plan.lists[ps.list].depth + 1
		if ps.child != nil {
			cu := s.units[childKey(key, ps.Saga)]
			d += cu.depth
			for id, at := range cu.ids {
				if _, ok := u.ids[id]; !ok {
					u.ids[id] = at
				}
			}
		}
		u.depth = max(u.depth, d)
	}
	// The bundle: this source, and each child's under its path relative
	// to this file's directory.
	dir := path.Dir(key)
	files := map[string][]byte{}
	for k := range c.children {
		rel := k
		if dir != "." {
			rel = strings.TrimPrefix(k, dir+"/")
		}
		files[rel] = s.files[k]
	}
	def.Source = writeBundle(src, files)
	if len(def.Source) > lang.MaxBundleBytes {
		s.problems = append(s.problems, lang.Problem{File: file, Message: fmt.Sprintf("the definition with its child sagas is %d bytes, over the limit of %d", len(def.Source), lang.MaxBundleBytes)})
		return u
	}
	plan.hash = definitionHash(def.Source)
	u.plan = plan
	return u
}

// layout appends the list steps to the plan, then the lists of the forks
// among them (so every list comes after the list holding its fork), and
// returns the new list's index.
func (c *compiler) layout(steps []*lang.Step, fork, branch, depth int, scope []string) int {
	p := c.plan
	li := len(p.lists)
	p.lists = append(p.lists, stepList{fork: fork, branch: branch, first: len(p.steps), n: len(steps), depth: depth, scope: scope})
	first := len(p.steps)
	for _, s := range steps {
		p.steps = append(p.steps, &planStep{Step: s, idx: len(p.steps), list: li, body: branchEnd})
	}
	for k, s := range steps {
		ps := p.steps[first+k]
		switch s.Kind {
		case lang.KindParallel:
			for b, br := range s.Parallel {
				ps.branches = append(ps.branches, p.lists[c.layout(br.Steps, ps.idx, b, depth+1, scope)].first)
			}
		case lang.KindForeach:
			if s.Foreach == nil || len(s.Steps) == 0 {
				continue
			}
			inner := scope
			if as := s.Foreach.As; as != "" && !slices.Contains(scope, as) {
				inner = append(slices.Clip(scope), as)
			}
			ps.as, ps.concurrency = s.Foreach.As, s.Foreach.Concurrency
			ps.body = p.lists[c.layout(s.Steps, ps.idx, 0, depth+1, inner)].first
		}
	}
	return li
}

// scopeEnvs gives each list the expression environment of its scope.
func (c *compiler) scopeEnvs() bool {
	envs := map[string]*cel.Env{}
	for i := range c.plan.lists {
		l := &c.plan.lists[i]
		k := strings.Join(l.scope, " ")
		if envs[k] == nil {
			env, err := newCELEnv(c.def, l.scope...)
			if err != nil {
				c.errorf(lang.Pos{}, "", "", "cannot build the expression environment: %v", err)
				return false
			}
			envs[k] = env
		}
		l.env = envs[k]
	}
	return true
}

// listName names a list in problems: "the saga's own steps", "branch 2 of
// book", "the body of ship_all".
func (c *compiler) listName(li int) string { return c.plan.listName(li) }

// listName names list li: "the saga's own steps", "branch 2 of book", "the
// body of ship_all".
func (p *Plan) listName(li int) string {
	l := p.lists[li]
	switch {
	case l.fork < 0:
		return "the saga's own steps"
	case p.steps[l.fork].Kind == lang.KindForeach:
		return fmt.Sprintf("the body of %s", p.steps[l.fork].ID)
	}
	return fmt.Sprintf("branch %d of %s", l.branch+1, p.steps[l.fork].ID)
}

// compileFork compiles what a parallel, foreach or saga step adds to the
// fields every step has.
func (c *compiler) compileFork(ps *planStep) {
	s := ps.Step
	switch s.Kind {
	case lang.KindForeach:
		fe := s.Foreach
		if fe == nil || fe.Items == "" {
			return
		}
		prg := c.expr(s, "foreach", fe.Items, fe.Pos.Line, fe.Pos.Column)
		if prg != nil && prg.outType.Kind() != types.ListKind && !prg.outType.IsExactType(cel.DynType) {
			c.errorf(fe.Pos, s.ID, "foreach", "foreach needs a list, but ${%s} is %s", fe.Items, typeName(prg.outType.TypeName()))
			prg = nil
		}
		ps.items = prg
	case lang.KindSaga:
		if s.With != nil {
			ps.args = c.template(s, "with", s.With)
		}
		c.child(ps)
	}
}

// child reads and compiles the child saga of saga step ps, and checks how
// the parent uses it: the fork depth, the step ids, the input.
func (c *compiler) child(ps *planStep) {
	s := ps.Step
	if s.Saga == "" {
		return
	}
	pos := s.FieldPos("saga")
	if c.srcs.read == nil {
		c.errorf(pos, s.ID, "saga", "a child saga is read from a file next to this one, and there is none here: compile the definition from its file (saga.CompileFile; sagactl does), or from its bundle")
		return
	}
	key := childKey(c.key, s.Saga)
	if i := slices.Index(c.srcs.stack, key); i >= 0 {
		names := make([]string, 0, len(c.srcs.stack)-i+1)
		for _, k := range append(slices.Clone(c.srcs.stack[i:]), key) {
			names = append(names, c.srcs.display(k))
		}
		c.errorf(pos, s.ID, "saga", "child sagas form a cycle: %s", strings.Join(names, " -> "))
		return
	}
	u, done := c.srcs.units[key]
	if !done {
		src, err := c.srcs.read(key)
		if err != nil {
			c.errorf(pos, s.ID, "saga", "cannot read the child saga: %v", err)
			c.srcs.units[key] = &unit{}
			return
		}
		c.srcs.files[key] = src
		u = c.srcs.compile(c.srcs.display(key), src, key, c.opts)
	}
	if u.plan == nil {
		return // its problems are reported, in its file
	}
	c.children[key] = true
	for k := range u.children {
		c.children[k] = true
	}
	if d := c.plan.lists[ps.list].depth + 1 + u.depth; d > lang.MaxForkDepth {
		c.errorf(pos, s.ID, "saga", "with the forks of %s, forks nest %d deep here: parallel, foreach and saga steps nest at most %d deep", c.srcs.display(key), d, lang.MaxForkDepth)
	}
	for _, id := range slices.Sorted(maps.Keys(u.ids)) {
		if j, clash := c.plan.index[id]; clash {
			at := u.ids[id]
			c.errorf(pos, s.ID, "saga", "step id %q of %s (line %d) is also a step of this saga (line %d): step ids are unique across a saga and its children",
				id, at.file, at.line, c.plan.steps[j].Pos.Line)
		}
	}
	ps.child = u.plan
	c.checkChildInput(ps)
	c.checkChildSecrets(ps)
}

// checkChildInput checks a saga step's with against the input its child
// declares, where it can: the fields, and the types of literals and of
// expressions whose type is known.
func (c *compiler) checkChildInput(ps *planStep) {
	s, child := ps.Step, ps.child
	if child.def.Input == nil {
		if s.With != nil && s.With.Kind != lang.ValueMap && s.With.Kind != lang.ValueExpr {
			c.errorf(s.FieldPos("with"), s.ID, "with", "is the child saga's input: a mapping")
		}
		return
	}
	name := child.def.Name
	given := map[string]*lang.Value{}
	var tmpl map[string]*template
	switch {
	case s.With == nil:
	case s.With.Kind == lang.ValueMap:
		tmpl = map[string]*template{}
		for i, k := range s.With.Keys {
			given[k] = s.With.Items[i]
			if ps.args != nil && ps.args.kind == lang.ValueMap {
				tmpl[k] = ps.args.items[i]
			}
		}
	case s.With.Kind == lang.ValueExpr:
		return // a whole map from an expression: its fields are known when it runs
	default:
		c.errorf(s.FieldPos("with"), s.ID, "with", "is the input of saga %s: a mapping of its declared fields", name)
		return
	}
	declared := map[string]string{}
	for _, f := range child.def.Input {
		declared[f.Name] = f.Type
		if _, ok := given[f.Name]; !ok {
			c.errorf(s.FieldPos("with"), s.ID, "with."+f.Name, "missing: saga %s declares input %s (%s)", name, f.Name, f.Type)
		}
	}
	if s.With == nil {
		return
	}
	for _, k := range s.With.Keys {
		typ, ok := declared[k]
		v := given[k]
		if !ok {
			c.errorf(v.Pos, s.ID, "with."+k, "saga %s declares no input %s (it declares %s)", name, k, strings.Join(slices.Sorted(maps.Keys(declared)), ", "))
			continue
		}
		if got, fits := c.fitsInput(typ, v, tmpl[k]); !fits {
			c.errorf(v.Pos, s.ID, "with."+k, "saga %s declares input %s %s, but this is %s", name, k, typeName(typ), got)
		}
	}
}

// fitsInput reports whether a with value can be the child's input of
// declared type typ, as far as compiling shows, and what it is when not,
// in the language's words ("a string", "an int").
func (c *compiler) fitsInput(typ string, v *lang.Value, t *template) (string, bool) {
	if typ == "any" {
		return "", true
	}
	switch v.Kind {
	case lang.ValueInterp:
		return "a string", typ == "string" || typ == "timestamp" || typ == "duration" || typ == "bytes"
	case lang.ValueMap:
		return "a map", typ == "map"
	case lang.ValueList:
		return "a list", typ == "list"
	case lang.ValueLiteral:
		if v.Literal == nil {
			return "null", false
		}
		lit, err := normalizeJSON(v.Literal)
		if err == nil {
			_, err = convertInput(typ, lit)
		}
		return describe(v.Literal), err == nil
	}
	if t == nil || t.prog == nil {
		return "", true
	}
	out := t.prog.outType
	if out.IsExactType(cel.DynType) {
		return "", true
	}
	want := celType(typ)
	number := func(t *cel.Type) bool {
		return t.IsExactType(cel.IntType) || t.IsExactType(cel.UintType) || t.IsExactType(cel.DoubleType)
	}
	switch {
	case number(want) && number(out):
		return "", true
	case typ == "timestamp" || typ == "duration" || typ == "bytes":
		// JSON carries them as text, and the child converts it.
		return typeName(out.TypeName()), out.IsExactType(want) || out.IsExactType(cel.StringType)
	}
	return typeName(out.TypeName()), out.Kind() == want.Kind()
}
