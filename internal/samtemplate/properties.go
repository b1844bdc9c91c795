package samtemplate

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Properties returns the Properties of the resource with the logical id as
// plain values, so that a test can hold a whole resource against what code
// builds without this package knowing each property: a mapping is a
// map[string]any, a sequence a []any, a scalar its text (a string), null
// nil. A !Ref (or {Ref: X}) to a parameter with a default becomes that
// default. Any other intrinsic function (!GetAtt, !Sub, !If, Fn::Join, a
// !Ref to a resource or a pseudo parameter) becomes a Value: it is only
// known at deploy time, and it compares unequal to every string.
func (t *Template) Properties(resource string) (map[string]any, error) {
	r, ok := t.resources[resource]
	if !ok {
		return nil, fmt.Errorf("%s: no resource %s", t.File, resource)
	}
	p := get(r, "Properties")
	if p == nil {
		return map[string]any{}, nil
	}
	if p.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: resource %s: Properties is not a mapping", t.File, resource)
	}
	return t.plain(p).(map[string]any), nil
}

func (t *Template) plain(n *yaml.Node) any {
	if n.Kind == yaml.AliasNode {
		return t.plain(n.Alias)
	}
	if intrinsic(n) {
		v := value(n)
		if d, ok := t.Parameters[v.Ref]; ok {
			return d
		}
		return v
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for k, v := range pairs(n) {
			m[k] = t.plain(v)
		}
		return m
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			s = append(s, t.plain(c))
		}
		return s
	}
	if n.Tag == "!!null" {
		return nil
	}
	return n.Value
}

// intrinsic reports whether n is an intrinsic function: in short form a
// tag of CloudFormation's ("!Ref", not YAML's own "!!str"), in long form a
// mapping of one key, Ref or Fn::Something.
func intrinsic(n *yaml.Node) bool {
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		return true
	}
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		return false
	}
	k := n.Content[0].Value
	return k == "Ref" || strings.HasPrefix(k, "Fn::")
}
