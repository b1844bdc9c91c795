package saga

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// template compiles a value template; all-literal subtrees fold into one literal.
type template struct {
	kind  lang.ValueKind
	lit   any
	prog  *program
	parts []templatePart
	keys  []string
	items []*template
}

type templatePart struct {
	text string
	prog *program
}

func (c *compiler) template(s *lang.Step, field string, v *lang.Value) *template {
	t := &template{kind: v.Kind}
	switch v.Kind {
	case lang.ValueLiteral:
		t.lit = v.Literal
	case lang.ValueExpr:
		t.prog = c.expr(s, field, v.Expr, v.Pos.Line, v.Column)
	case lang.ValueInterp:
		col := v.Column
		for _, pt := range v.Parts {
			if pt.Expr == "" {
				t.parts = append(t.parts, templatePart{text: pt.Text})
				col += len(pt.Text)
				continue
			}
			prg := c.expr(s, field, pt.Expr, v.Pos.Line, col+2)
			if prg != nil && !interpolatable(prg.outType) {
				c.errorf(lang.Pos{Line: v.Pos.Line, Column: col}, s.ID, field, "${%s} is %s, which cannot be put into text (use it as the whole value instead)", pt.Expr, typeName(prg.outType.TypeName()))
			}
			t.parts = append(t.parts, templatePart{prog: prg})
			col += len(pt.Expr) + 3
		}
	case lang.ValueMap, lang.ValueList:
		allLit := true
		for i, item := range v.Items {
			f := field
			if v.Kind == lang.ValueMap {
				f += "." + v.Keys[i]
			} else {
				f += fmt.Sprintf("[%d]", i)
			}
			ct := c.template(s, f, item)
			allLit = allLit && ct.kind == lang.ValueLiteral
			t.items = append(t.items, ct)
		}
		t.keys = v.Keys
		if allLit {
			t.lit = foldLiteral(t)
			t.kind, t.items, t.keys = lang.ValueLiteral, nil, nil
		}
	}
	return t
}

func foldLiteral(t *template) any {
	if t.kind == lang.ValueLiteral {
		return t.lit
	}
	if t.kind == lang.ValueMap {
		m := make(map[string]any, len(t.keys))
		for i, k := range t.keys {
			m[k] = foldLiteral(t.items[i])
		}
		return m
	}
	l := make([]any, len(t.items))
	for i, it := range t.items {
		l[i] = foldLiteral(it)
	}
	return l
}

func interpolatable(t *cel.Type) bool {
	for _, ok := range []*cel.Type{cel.StringType, cel.IntType, cel.UintType, cel.DoubleType, cel.BoolType, cel.TimestampType, cel.DurationType, cel.DynType, cel.NullType} {
		if t.IsExactType(ok) {
			return true
		}
	}
	return false
}

// eval builds the value a template describes.
func (t *template) eval(act *activation) (any, error) {
	switch t.kind {
	case lang.ValueLiteral:
		return t.lit, nil
	case lang.ValueExpr:
		v, err := t.prog.eval(act)
		if err != nil {
			return nil, err
		}
		out, err := toNative(v, act.limit)
		if err != nil {
			return nil, &ActionError{Type: lang.ErrorTypeExpression, Message: fmt.Sprintf("${%s}: %v", t.prog.src, err)}
		}
		return out, nil
	case lang.ValueInterp:
		var b strings.Builder
		for _, p := range t.parts {
			if p.prog == nil {
				b.WriteString(p.text)
				continue
			}
			v, err := p.prog.eval(act)
			if err != nil {
				return nil, err
			}
			if s, ok := v.ConvertToType(types.StringType).(types.String); ok {
				b.WriteString(string(s))
			} else {
				native, err := toNative(v, act.limit)
				if err != nil {
					return nil, &ActionError{Type: lang.ErrorTypeExpression, Message: fmt.Sprintf("${%s}: %v", p.prog.src, err)}
				}
				fmt.Fprint(&b, native)
			}
			if limit := max(maxResultBytes, act.limit); b.Len() > limit {
				return nil, &ActionError{Type: lang.ErrorTypeExpression, Message: fmt.Sprintf("${%s}: %v", p.prog.src, resultTooLarge(limit))}
			}
		}
		return b.String(), nil
	case lang.ValueMap:
		m := make(map[string]any, len(t.keys))
		for i, k := range t.keys {
			v, err := t.items[i].eval(act)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	case lang.ValueList:
		l := make([]any, len(t.items))
		for i, it := range t.items {
			v, err := it.eval(act)
			if err != nil {
				return nil, err
			}
			l[i] = v
		}
		return l, nil
	}
	return nil, fmt.Errorf("unknown template kind %d", t.kind)
}
