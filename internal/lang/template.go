package lang

import (
	"fmt"
	"strings"
)

// exactExpr reports whether s is exactly one ${expr}, and returns expr.
func exactExpr(s string) (string, bool) {
	if !strings.HasPrefix(s, "${") || !strings.HasSuffix(s, "}") {
		return "", false
	}
	end, ok := exprEnd(s, 2)
	if !ok || end != len(s)-1 {
		return "", false
	}
	return s[2 : len(s)-1], true
}

// exprEnd finds the } closing an expression that starts at i, skipping
// braces inside CEL map literals and string literals.
func exprEnd(s string, i int) (int, bool) {
	depth := 0
	for ; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'', '"':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			i = j
		case '{':
			depth++
		case '}':
			if depth == 0 {
				return i, true
			}
			depth--
		}
	}
	return 0, false
}

// splitTemplate cuts text with ${...} into parts. "$${" stands for a literal "${".
func splitTemplate(s string) ([]InterpPart, error) {
	var parts []InterpPart
	var text strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			text.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end, ok := exprEnd(s, i+2)
			if !ok {
				return nil, fmt.Errorf("unclosed ${ at offset %d (write $${ for a literal ${)", i)
			}
			expr := s[i+2 : end]
			if strings.TrimSpace(expr) == "" {
				return nil, fmt.Errorf("empty expression: the ${} at offset %d holds nothing (write $${} for the text itself)", i)
			}
			if text.Len() > 0 {
				parts = append(parts, InterpPart{Text: text.String()})
				text.Reset()
			}
			parts = append(parts, InterpPart{Expr: expr})
			i = end + 1
		default:
			text.WriteByte(s[i])
			i++
		}
	}
	if text.Len() > 0 {
		parts = append(parts, InterpPart{Text: text.String()})
	}
	return parts, nil
}
