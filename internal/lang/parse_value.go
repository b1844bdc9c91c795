package lang

import (
	"fmt"
	"math"
	"strings"

	"go.yaml.in/yaml/v3"
)

// value turns a YAML node into a value template.
func (p *parser) value(n *yaml.Node, field string, depth int) *Value {
	v := &Value{Pos: Pos{n.Line, n.Column}}
	if depth > MaxValueDepth {
		p.errorf(n, field, "nested deeper than %d levels", MaxValueDepth)
		return v
	}
	switch n.Kind {
	case yaml.MappingNode:
		v.Kind = ValueMap
		p.eachField(n, field+".", nil, func(key string, k, c *yaml.Node) {
			v.Keys = append(v.Keys, key)
			v.Items = append(v.Items, p.value(c, field+"."+key, depth+1))
		})
	case yaml.SequenceNode:
		v.Kind = ValueList
		for i, c := range n.Content {
			v.Items = append(v.Items, p.value(c, fmt.Sprintf("%s[%d]", field, i), depth+1))
		}
	case yaml.ScalarNode:
		p.scalar(n, field, v)
	default:
		p.errorf(n, field, "unsupported YAML node")
	}
	return v
}

func (p *parser) scalar(n *yaml.Node, field string, v *Value) {
	v.Kind = ValueLiteral
	switch n.ShortTag() {
	case "!!null":
		v.Literal = nil
	case "!!bool":
		v.Literal = n.Value == "true"
	case "!!int":
		if digits := strings.TrimLeft(n.Value, "+-"); len(digits) > 1 && digits[0] == '0' {
			p.errorf(n, field, "integer with a leading zero (YAML may read it as octal or hex): write it without, or quote it for text")
			return
		}
		var i int64
		if err := n.Decode(&i); err != nil {
			var u uint64
			if err := n.Decode(&u); err != nil {
				p.errorf(n, field, "integer %s is out of range", n.Value)
				return
			}
			v.Literal = u
			return
		}
		v.Literal = i
	case "!!float":
		if integerShaped(n.Value) {
			// YAML reads an integer too large for 64 bits as a float,
			// silently rounding it.
			p.errorf(n, field, "integer %s is out of range", n.Value)
			return
		}
		var f float64
		if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			p.errorf(n, field, "number %s is not a finite number", n.Value)
			return
		}
		v.Literal = f
	case "!!str", "!!timestamp":
		// A plain date is text, as written: the YAML library would make it
		// a timestamp the user did not ask for.
		p.template(n, field, v)
	default:
		p.errorf(n, field, "unsupported YAML tag %s", n.ShortTag())
	}
}

// template parses ${...} in a string scalar.
func (p *parser) template(n *yaml.Node, field string, v *Value) {
	s := n.Value
	v.Column = n.Column + quoteOffset(n)
	if inner, ok := exactExpr(s); ok {
		if strings.TrimSpace(inner) == "" {
			p.errorf(n, field, "empty expression: ${} must hold a CEL expression (write $${} for the text itself)")
			return
		}
		if len(inner) > MaxExpressionBytes {
			p.errorf(n, field, "expression is %d bytes, over the limit of %d", len(inner), MaxExpressionBytes)
			return
		}
		v.Kind, v.Expr = ValueExpr, inner
		v.Column += 2
		return
	}
	parts, err := splitTemplate(s)
	if err != nil {
		p.errorf(n, field, "%v", err)
		return
	}
	if len(parts) == 1 && parts[0].Expr == "" {
		v.Literal = parts[0].Text
		return
	}
	if len(parts) == 0 {
		v.Literal = ""
		return
	}
	for _, pt := range parts {
		if len(pt.Expr) > MaxExpressionBytes {
			p.errorf(n, field, "expression is %d bytes, over the limit of %d", len(pt.Expr), MaxExpressionBytes)
			return
		}
	}
	v.Kind, v.Parts = ValueInterp, parts
}

func quoteOffset(n *yaml.Node) int {
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		return 1
	}
	return 0
}

// integerShaped reports whether s is written as an integer: an optional
// sign, then decimal digits only.
func integerShaped(s string) bool {
	s = strings.TrimLeft(s, "+-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
