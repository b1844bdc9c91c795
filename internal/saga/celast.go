package saga

import (
	"strings"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
)

// varReads lists the NAMEs of vars.NAME and vars["NAME"] in a checked
// expression; has(vars.NAME) tests presence and does not count.
func varReads(a *cel.Ast) []string {
	var out []string
	var walk func(e celast.Expr)
	walk = func(e celast.Expr) {
		switch e.Kind() {
		case celast.SelectKind:
			s := e.AsSelect()
			if op := s.Operand(); op.Kind() == celast.IdentKind && op.AsIdent() == "vars" {
				if !s.IsTestOnly() {
					out = append(out, s.FieldName())
				}
				return
			}
			walk(s.Operand())
		case celast.CallKind:
			c := e.AsCall()
			if c.FunctionName() == operators.Index && len(c.Args()) == 2 {
				obj, key := c.Args()[0], c.Args()[1]
				if obj.Kind() == celast.IdentKind && obj.AsIdent() == "vars" && key.Kind() == celast.LiteralKind {
					if s, ok := key.AsLiteral().(types.String); ok {
						out = append(out, string(s))
						return
					}
				}
			}
			if c.IsMemberFunction() {
				walk(c.Target())
			}
			for _, arg := range c.Args() {
				walk(arg)
			}
		case celast.ListKind:
			for _, el := range e.AsList().Elements() {
				walk(el)
			}
		case celast.MapKind:
			for _, ent := range e.AsMap().Entries() {
				me := ent.AsMapEntry()
				walk(me.Key())
				walk(me.Value())
			}
		case celast.StructKind:
			for _, f := range e.AsStruct().Fields() {
				walk(f.AsStructField().Value())
			}
		case celast.ComprehensionKind:
			c := e.AsComprehension()
			walk(c.IterRange())
			walk(c.AccuInit())
			walk(c.LoopCondition())
			walk(c.LoopStep())
			walk(c.Result())
		}
	}
	walk(a.NativeRep().Expr())
	return out
}

// uses is what expressions touch of input and vars: the fields named,
// or all of either when one is used whole (passed on, indexed by a value
// known only when it runs, iterated).
type uses struct {
	input, vars       []string
	allInput, allVars bool
}

// add adds o to u.
func (u *uses) add(o uses) {
	u.input, u.vars = append(u.input, o.input...), append(u.vars, o.vars...)
	u.allInput, u.allVars = u.allInput || o.allInput, u.allVars || o.allVars
}

// rootReads lists the NAMEs of root.NAME and root["NAME"] in a checked
// expression, has(root.NAME) included, and reports whether root is used
// otherwise (whole: any field may be read).
func rootReads(a *cel.Ast, root string) (names []string, whole bool) {
	var walk func(e celast.Expr)
	walk = func(e celast.Expr) {
		switch e.Kind() {
		case celast.IdentKind:
			// A declared input field is an identifier of its own
			// (input.NAME), as the checker resolves it.
			if id := e.AsIdent(); id == root {
				whole = true
			} else if f, ok := strings.CutPrefix(id, root+"."); ok {
				names = append(names, f)
			}
		case celast.SelectKind:
			s := e.AsSelect()
			if op := s.Operand(); op.Kind() == celast.IdentKind && op.AsIdent() == root {
				names = append(names, s.FieldName())
				return
			}
			walk(s.Operand())
		case celast.CallKind:
			c := e.AsCall()
			if c.FunctionName() == operators.Index && len(c.Args()) == 2 {
				obj, key := c.Args()[0], c.Args()[1]
				if obj.Kind() == celast.IdentKind && obj.AsIdent() == root && key.Kind() == celast.LiteralKind {
					if s, ok := key.AsLiteral().(types.String); ok {
						names = append(names, string(s))
						return
					}
				}
			}
			if c.IsMemberFunction() {
				walk(c.Target())
			}
			for _, arg := range c.Args() {
				walk(arg)
			}
		case celast.ListKind:
			for _, el := range e.AsList().Elements() {
				walk(el)
			}
		case celast.MapKind:
			for _, ent := range e.AsMap().Entries() {
				me := ent.AsMapEntry()
				walk(me.Key())
				walk(me.Value())
			}
		case celast.StructKind:
			for _, f := range e.AsStruct().Fields() {
				walk(f.AsStructField().Value())
			}
		case celast.ComprehensionKind:
			c := e.AsComprehension()
			walk(c.IterRange())
			walk(c.AccuInit())
			walk(c.LoopCondition())
			walk(c.LoopStep())
			walk(c.Result())
		}
	}
	walk(a.NativeRep().Expr())
	return names, whole
}

// isReference reports whether a checked expression is an identifier or a
// chain of field selections from one (input.items, vars.order.lines).
func isReference(a *cel.Ast) bool {
	e := a.NativeRep().Expr()
	for {
		switch e.Kind() {
		case celast.IdentKind:
			return true
		case celast.SelectKind:
			if e.AsSelect().IsTestOnly() {
				return false
			}
			e = e.AsSelect().Operand()
		default:
			return false
		}
	}
}
