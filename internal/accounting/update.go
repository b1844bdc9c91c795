package accounting

import (
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// errUnsupported marks an update expression this package does not apply,
// so the write is counted as unbilled rather than guessed.
var errUnsupported = errors.New("unsupported update expression")

// ApplyUpdate computes the item an UpdateItem leaves: before (nil when the
// item is missing; the update then creates it from key) with expr applied.
// It supports, on top-level attributes named directly or through
// #placeholders: SET a = operand, SET a = operand + operand (or -), where
// an operand is a path, a :value or if_not_exists(path, operand); ADD a
// :number (or a set, added to the set); REMOVE a. Right-hand sides read
// the item as it was before the update, as DynamoDB evaluates them.
// Anything else (nested paths, list_append, DELETE, ...) is an error.
func ApplyUpdate(before, key map[string]types.AttributeValue, expr string, names map[string]string, values map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	after := maps.Clone(before)
	if after == nil {
		after = maps.Clone(key)
	}
	p := &updateParser{toks: tokenize(expr), names: names, values: values, before: before}
	if p.toks == nil {
		return nil, fmt.Errorf("%w: %q", errUnsupported, expr)
	}
	for !p.done() {
		clause := strings.ToUpper(p.next())
		for {
			switch clause {
			case "SET":
				name, v, err := p.set()
				if err != nil {
					return nil, err
				}
				after[name] = v
			case "REMOVE":
				name, err := p.path()
				if err != nil {
					return nil, err
				}
				delete(after, name)
			case "ADD":
				name, v, err := p.add()
				if err != nil {
					return nil, err
				}
				after[name] = v
			default:
				return nil, fmt.Errorf("%w: clause %q", errUnsupported, clause)
			}
			if p.peek() != "," {
				break
			}
			p.next()
		}
	}
	return after, nil
}

type updateParser struct {
	toks   []string
	names  map[string]string
	values map[string]types.AttributeValue
	before map[string]types.AttributeValue
}

func (p *updateParser) done() bool { return len(p.toks) == 0 }

func (p *updateParser) peek() string {
	if len(p.toks) == 0 {
		return ""
	}
	return p.toks[0]
}

func (p *updateParser) next() string {
	t := p.peek()
	if len(p.toks) > 0 {
		p.toks = p.toks[1:]
	}
	return t
}

func (p *updateParser) expect(tok string) error {
	if t := p.next(); t != tok {
		return fmt.Errorf("%w: %q where %q was expected", errUnsupported, t, tok)
	}
	return nil
}

// path is a top-level attribute name; a nested path is unsupported.
func (p *updateParser) path() (string, error) {
	t := p.next()
	name := t
	switch {
	case strings.HasPrefix(t, "#"):
		n, ok := p.names[t]
		if !ok {
			return "", fmt.Errorf("%w: name %s undefined", errUnsupported, t)
		}
		name = n
	case !isIdent(t):
		return "", fmt.Errorf("%w: %q is not an attribute name", errUnsupported, t)
	}
	if q := p.peek(); q == "." || q == "[" {
		return "", fmt.Errorf("%w: nested path %s%s", errUnsupported, t, q)
	}
	return name, nil
}

func (p *updateParser) set() (string, types.AttributeValue, error) {
	name, err := p.path()
	if err != nil {
		return "", nil, err
	}
	if err := p.expect("="); err != nil {
		return "", nil, err
	}
	v, err := p.operand()
	if err != nil {
		return "", nil, err
	}
	if op := p.peek(); op == "+" || op == "-" {
		p.next()
		w, err := p.operand()
		if err != nil {
			return "", nil, err
		}
		if v, err = arith(v, w, op == "-"); err != nil {
			return "", nil, err
		}
	}
	return name, v, nil
}

func (p *updateParser) operand() (types.AttributeValue, error) {
	t := p.peek()
	switch {
	case strings.HasPrefix(t, ":"):
		p.next()
		v, ok := p.values[t]
		if !ok {
			return nil, fmt.Errorf("%w: value %s undefined", errUnsupported, t)
		}
		return v, nil
	case strings.EqualFold(t, "if_not_exists"):
		p.next()
		if err := p.expect("("); err != nil {
			return nil, err
		}
		name, err := p.path()
		if err != nil {
			return nil, err
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
		dflt, err := p.operand()
		if err != nil {
			return nil, err
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		if v, ok := p.before[name]; ok {
			return v, nil
		}
		return dflt, nil
	}
	if len(p.toks) > 1 && p.toks[1] == "(" {
		return nil, fmt.Errorf("%w: function %s", errUnsupported, t)
	}
	name, err := p.path()
	if err != nil {
		return nil, err
	}
	v, ok := p.before[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s does not exist", errUnsupported, name)
	}
	return v, nil
}

func (p *updateParser) add() (string, types.AttributeValue, error) {
	name, err := p.path()
	if err != nil {
		return "", nil, err
	}
	t := p.next()
	v, ok := p.values[t]
	if !ok {
		return "", nil, fmt.Errorf("%w: ADD %s %q", errUnsupported, name, t)
	}
	old, exists := p.before[name]
	if !exists {
		return name, v, nil
	}
	switch v := v.(type) {
	case *types.AttributeValueMemberN:
		sum, err := arith(old, v, false)
		return name, sum, err
	case *types.AttributeValueMemberSS:
		if o, ok := old.(*types.AttributeValueMemberSS); ok {
			return name, &types.AttributeValueMemberSS{Value: union(o.Value, v.Value)}, nil
		}
	case *types.AttributeValueMemberNS:
		if o, ok := old.(*types.AttributeValueMemberNS); ok {
			return name, &types.AttributeValueMemberNS{Value: union(o.Value, v.Value)}, nil
		}
	}
	return "", nil, fmt.Errorf("%w: ADD of %T to %T", errUnsupported, v, old)
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// arith adds or subtracts two numbers exactly, keeping the larger number
// of decimal places.
func arith(a, b types.AttributeValue, minus bool) (types.AttributeValue, error) {
	x, okx := a.(*types.AttributeValueMemberN)
	y, oky := b.(*types.AttributeValueMemberN)
	if !okx || !oky {
		return nil, fmt.Errorf("%w: arithmetic on a non-number", errUnsupported)
	}
	rx, ok1 := new(big.Rat).SetString(x.Value)
	ry, ok2 := new(big.Rat).SetString(y.Value)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w: number %q or %q", errUnsupported, x.Value, y.Value)
	}
	if minus {
		ry.Neg(ry)
	}
	sum := rx.Add(rx, ry)
	if sum.IsInt() {
		return &types.AttributeValueMemberN{Value: sum.Num().String()}, nil
	}
	text := sum.FloatString(max(decimals(x.Value), decimals(y.Value)))
	return &types.AttributeValueMemberN{Value: strings.TrimRight(text, "0")}, nil
}

func decimals(num string) int {
	mantissa, exp, _ := strings.Cut(strings.ToLower(num), "e")
	_, frac, _ := strings.Cut(mantissa, ".")
	n := len(frac)
	if exp != "" {
		var e int
		if _, err := fmt.Sscan(exp, &e); err == nil {
			n -= e
		}
	}
	return max(n, 0)
}

func isIdent(t string) bool {
	if t == "" {
		return false
	}
	for i, r := range t {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// tokenize splits an update expression into names (#n, :v, words) and
// the punctuation = , + - ( ) . [ ]; nil when it holds anything else.
func tokenize(expr string) []string {
	toks := []string{}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.IndexByte("=,+-().[]", c) >= 0:
			toks = append(toks, string(c))
			i++
		case c == '#' || c == ':' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(expr) && (expr[j] == '_' || expr[j] >= 'a' && expr[j] <= 'z' || expr[j] >= 'A' && expr[j] <= 'Z' || expr[j] >= '0' && expr[j] <= '9') {
				j++
			}
			toks = append(toks, expr[i:j])
			i = j
		case c >= '0' && c <= '9':
			// a list index, as in a[0]: unsupported, but tokenized so the
			// parser reports the nested path
			j := i + 1
			for j < len(expr) && expr[j] >= '0' && expr[j] <= '9' {
				j++
			}
			toks = append(toks, expr[i:j])
			i = j
		default:
			return nil
		}
	}
	return toks
}
