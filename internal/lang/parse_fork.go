package lang

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// celReserved are CEL's reserved words and the names every expression
// already sees: none of them can name a foreach item.
var celReserved = []string{
	"input", "vars", "saga", "index",
	"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if",
	"import", "let", "loop", "package", "namespace", "return", "var", "void", "while",
}

// branches reads a parallel step's list of {steps: [...]}.
func (p *parser) branches(n *yaml.Node, id string, depth int) []*Branch {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.errorf(n, "parallel", "must be a non-empty list of branches, each {steps: [STEP, ...]}")
		return nil
	}
	if len(n.Content) > MaxBranches {
		p.errorf(n, "parallel", "%d branches, over the limit of %d", len(n.Content), MaxBranches)
		return nil
	}
	out := make([]*Branch, 0, len(n.Content))
	for i, bn := range n.Content {
		field := fmt.Sprintf("parallel[%d]", i)
		b := &Branch{Pos: Pos{bn.Line, bn.Column}}
		p.eachField(bn, field+".", []string{"steps"}, func(key string, k, v *yaml.Node) {
			b.Steps = p.body(v, id, depth, field+".steps")
		})
		if bn.Kind == yaml.MappingNode && !p.hasKey(bn, "steps") {
			p.errorf(bn, field+".steps", "missing: a branch is {steps: [STEP, ...]}")
		}
		out = append(out, b)
	}
	return out
}

// body reads the steps of a branch or of a foreach body; field says which
// ("parallel[1].steps"; "steps" when not given).
func (p *parser) body(n *yaml.Node, id string, depth int, field ...string) []*Step {
	f := "steps"
	if len(field) > 0 {
		f = field[0]
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.errorf(n, f, "must be a non-empty list of steps")
		return nil
	}
	owner := id
	if owner == "" {
		owner = p.step
	}
	return p.stepList(n, owner+"."+strings.TrimSuffix(f, "steps"), depth)
}

// foreach reads the list expression of a foreach step and its as and
// concurrency fields.
func (p *parser) foreach(n *yaml.Node, fields map[string]*yaml.Node) *Foreach {
	fe := &Foreach{Pos: Pos{n.Line, n.Column + quoteOffset(n)}, As: DefaultAs, Concurrency: DefaultConcurrency}
	fe.Items = p.expression(n, "foreach", "foreach: is a CEL expression that yields a list")
	if v, ok := fields["as"]; ok {
		fe.As = p.ident(v, "as")
		if slices.Contains(celReserved, fe.As) {
			p.errorf(v, "as", "%q cannot name the item: expressions already see input, vars, saga and index, and CEL reserves its keywords", fe.As)
		}
	}
	if v, ok := fields["concurrency"]; ok {
		c, err := strconv.Atoi(v.Value)
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || err != nil || c < 1 || c > MaxConcurrency {
			p.errorf(v, "concurrency", "%q must be a whole number from 1 to %d", v.Value, MaxConcurrency)
		} else {
			fe.Concurrency = c
		}
	}
	return fe
}

// childPath reads a saga step's file: a relative path that stays in the
// directory of the file naming it (or below), with '/' between names.
func (p *parser) childPath(n *yaml.Node) string {
	s := p.str(n, "saga")
	if s == "" {
		return ""
	}
	if problem := ChildPathProblem(s); problem != "" {
		p.errorf(n, "saga", "%q %s", s, problem)
		return ""
	}
	return s
}

// ChildPathProblem says what is wrong with a saga step's file name, or
// returns "" when it is a relative path, with '/' between names, that
// stays in the directory of the file naming it.
func ChildPathProblem(name string) string {
	clean := path.Clean(name)
	switch {
	case strings.HasPrefix(name, "/") || (len(name) > 1 && name[1] == ':'):
		return "is an absolute path: name the child relative to this file's directory (payment.yaml, sagas/payment.yaml)"
	case strings.ContainsAny(name, "\\\n\x00"):
		return "holds a backslash or a control character: separate names with '/'"
	case clean == ".." || strings.HasPrefix(clean, "../"):
		return "leaves this file's directory: a child saga is in the same directory or below it"
	case clean == "." || strings.HasSuffix(name, "/"):
		return "names a directory, not a file"
	}
	return ""
}
