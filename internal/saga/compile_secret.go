package saga

import (
	"slices"

	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// inputReads is what t's expressions read of input: the fields named, and
// whether input is used whole.
func (t *template) inputReads() (names []string, whole bool) {
	if t == nil {
		return nil, false
	}
	add := func(p *program) {
		if p != nil {
			names = append(names, p.uses.input...)
			whole = whole || p.uses.allInput
		}
	}
	add(t.prog)
	for _, pt := range t.parts {
		add(pt.prog)
	}
	for _, it := range t.items {
		n, w := it.inputReads()
		names, whole = append(names, n...), whole || w
	}
	return names, whole
}

// checkChildSecrets refuses a saga step that gives a secret input field of
// this saga to a field of its child saga not declared secret: the child's
// status, history and logs would show it (a child run's Redactor knows
// only the secrets its own definition declares).
func (c *compiler) checkChildSecrets(ps *planStep) {
	s, child := ps.Step, ps.child
	secrets := c.plan.Secrets()
	if len(secrets) == 0 || s.With == nil || ps.args == nil {
		return
	}
	leaks := func(t *template) string {
		names, whole := t.inputReads()
		if whole {
			return secrets[0]
		}
		for _, n := range names {
			if slices.Contains(secrets, n) {
				return n
			}
		}
		return ""
	}
	childSecret := map[string]bool{}
	for _, f := range child.def.Input {
		childSecret[f.Name] = f.Secret
	}
	if ps.args.kind != lang.ValueMap || child.def.Input == nil {
		if secret := leaks(ps.args); secret != "" {
			c.errorf(s.FieldPos("with"), s.ID, "with", "reads secret input.%s: give saga %s its fields one by one (with: {FIELD: ...}), each reading a secret declared secret there", secret, child.def.Name)
		}
		return
	}
	for i, k := range ps.args.keys {
		if childSecret[k] {
			continue
		}
		if secret := leaks(ps.args.items[i]); secret != "" {
			c.errorf(s.With.Items[i].Pos, s.ID, "with."+k, "reads secret input.%s, but saga %s declares input %s without secret: declare it %s %s there", secret, child.def.Name, k, lang.SecretWord, inputType(child.def, k))
		}
	}
}

func inputType(def *lang.Definition, name string) string {
	for _, f := range def.Input {
		if f.Name == name {
			return f.Type
		}
	}
	return "any"
}
