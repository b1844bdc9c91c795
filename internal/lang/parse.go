package lang

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Parse reads a YAML or JSON saga definition. It checks the shape of the
// document (known fields, their types, durations, limits); Compile checks the
// rest. All problems are reported at once in a *DefinitionError.
func Parse(file string, src []byte) (*Definition, error) {
	p := &parser{file: file}
	def := p.parse(src)
	if len(p.problems) > 0 {
		return def, NewDefinitionError(p.problems)
	}
	return def, nil
}

type parser struct {
	file     string
	problems []Problem
	step     string
	steps    int // the steps read so far, nested ones included
}

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	pr := Problem{File: p.file, Step: p.step, Field: field, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		pr.Line, pr.Column = n.Line, n.Column
	}
	p.problems = append(p.problems, pr)
}

func (p *parser) parse(src []byte) (def *Definition) {
	def = &Definition{File: p.file, Source: src, pos: map[string]Pos{}}
	defer func() {
		// The YAML library is not ours; whatever it does, the caller gets an error, not a panic.
		if r := recover(); r != nil {
			p.errorf(nil, "", "cannot parse definition: %v", r)
		}
	}()
	if len(src) > MaxDefinitionBytes {
		p.errorf(nil, "", "definition is %d bytes, over the limit of %d", len(src), MaxDefinitionBytes)
		return def
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(src))
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		p.problems = append(p.problems, yamlProblem(p.file, err))
		return def
	}
	// The decoder reads one document; a second one would be ignored.
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.errorf(&extra, "", "a second YAML document starts here: a definition is one YAML document")
	} else if err != io.EOF {
		p.problems = append(p.problems, yamlProblem(p.file, err))
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		p.errorf(nil, "", "definition is empty")
		return def
	}
	root := doc.Content[0]
	if !p.checkNoAliases(root) {
		return def
	}
	if root.Kind != yaml.MappingNode {
		p.errorf(root, "", "definition must be a mapping with saga, input, timeout and steps")
		return def
	}
	var stepsNode *yaml.Node
	p.eachField(root, "", []string{"saga", "input", "timeout", "on_failure", "hold_for", "steps"}, func(key string, k, v *yaml.Node) {
		def.pos[key] = Pos{k.Line, k.Column}
		switch key {
		case "saga":
			def.Name = p.str(v, "saga")
			if def.Name != "" && !namePattern.MatchString(def.Name) {
				p.errorf(v, "saga", "name %q must start with a letter and hold only letters, digits, '_', '.' and '-' (at most 80)", def.Name)
			}
		case "input":
			def.Input = p.input(v)
		case "timeout":
			// Unbounded, a deadline far enough away wraps when stored as Unix
			// nanoseconds and lands in the past.
			def.Timeout = p.duration(v, "timeout", 0)
			if def.Timeout > MaxSagaTimeout {
				p.errorf(v, "timeout", "%s is longer than the limit of %s (one year)", v.Value, FormatDuration(MaxSagaTimeout))
				def.Timeout = 0
			}
		case "on_failure":
			def.OnFailure = p.onFailure(v)
		case "hold_for":
			def.HoldFor = p.duration(v, "hold_for", 0)
		case "steps":
			stepsNode = v
		}
	})
	p.checkHold(def)
	if _, ok := def.pos["saga"]; !ok {
		p.errorf(root, "saga", "missing: every definition needs a saga name")
	}
	if stepsNode == nil {
		p.errorf(root, "steps", "missing: a saga needs at least one step")
		return def
	}
	if stepsNode.Kind != yaml.SequenceNode || len(stepsNode.Content) == 0 {
		p.errorf(stepsNode, "steps", "must be a non-empty list of steps")
		return def
	}
	if len(stepsNode.Content) > MaxSteps {
		p.errorf(stepsNode, "steps", "%d steps, over the limit of %d", len(stepsNode.Content), MaxSteps)
		return def
	}
	def.Steps = p.stepList(stepsNode, "", 0)
	return def
}

func yamlProblem(file string, err error) Problem {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	pr := Problem{File: file, Message: "not valid YAML or JSON: " + msg}
	// yaml.v3 says "line N: ..." for syntax errors.
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, tail, ok := strings.Cut(rest, ":"); ok {
			if line, err := strconv.Atoi(n); err == nil {
				pr.Line, pr.Column = line, 1
				pr.Message = "not valid YAML or JSON:" + tail
			}
		}
	}
	return pr
}

// checkNoAliases rejects anchors and aliases (they make documents that
// expand exponentially, and a definition never needs them) and the merge key.
func (p *parser) checkNoAliases(n *yaml.Node) bool {
	ok := true
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		if !ok {
			return
		}
		if depth > MaxValueDepth+8 {
			p.errorf(n, "", "nested deeper than %d levels", MaxValueDepth)
			ok = false
			return
		}
		if n.Kind == yaml.AliasNode || n.Anchor != "" {
			p.errorf(n, "", "YAML anchors and aliases are not supported")
			ok = false
			return
		}
		if n.Style&yaml.TaggedStyle != 0 {
			p.errorf(n, "", "YAML tags (%s) are not supported: write the value plainly, or quote it for text", n.Tag)
			ok = false
			return
		}
		if n.Kind == yaml.MappingNode {
			for i := 0; i < len(n.Content); i += 2 {
				if k := n.Content[i]; k.ShortTag() == "!!merge" {
					// The YAML library would keep "<<" as a literal key.
					p.errorf(k, "", "the merge key << is not supported: write the fields out (quote it, \"<<\", for a key of that name)")
					ok = false
					return
				}
			}
		}
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	return ok
}

// eachField visits the fields of a mapping, reporting unknown and duplicate keys.
func (p *parser) eachField(n *yaml.Node, prefix string, known []string, fn func(key string, k, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, strings.TrimSuffix(prefix, "."), "must be a mapping")
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, strings.TrimSuffix(prefix, "."), "keys must be strings")
			continue
		}
		if seen[key] {
			p.errorf(k, prefix+key, "duplicate field")
			continue
		}
		seen[key] = true
		if known != nil && !slices.Contains(known, key) {
			p.errorf(k, prefix+key, "unknown field (expected one of %s)", strings.Join(known, ", "))
			continue
		}
		fn(key, k, v)
	}
}

func (p *parser) str(n *yaml.Node, field string) string {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		p.errorf(n, field, "must be a string")
		return ""
	}
	if n.Value == "" {
		p.errorf(n, field, "must not be empty")
	}
	return n.Value
}

func (p *parser) ident(n *yaml.Node, field string) string {
	s := p.str(n, field)
	if s != "" && !identPattern.MatchString(s) {
		p.errorf(n, field, "%q is not a valid name (letters, digits and '_', starting with a letter, at most 64)", s)
	}
	return s
}

func (p *parser) stepID(n *yaml.Node, field string) string {
	s := p.str(n, field)
	if s != "" && !namePattern.MatchString(s) {
		p.errorf(n, field, "%q is not a valid step id (a letter, then letters, digits, '_', '.' or '-', at most 80)", s)
	}
	return s
}

func (p *parser) action(n *yaml.Node, field string) string {
	s := p.str(n, field)
	if s != "" && !ValidActionName(s) {
		p.errorf(n, field, "not a valid action name: a Go action is a letter, then letters, digits, '_', '.', '-' or '/' (at most 128); a Lambda action is lambda:FUNCTION, with a function name, partial ARN or ARN and an optional :version or :alias")
	}
	return s
}

func (p *parser) duration(n *yaml.Node, field string, max time.Duration) time.Duration {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		p.errorf(n, field, "must be a duration such as 500ms, 30s, 5m or 24h")
		return 0
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil || d <= 0 {
		p.errorf(n, field, "%q is not a positive duration (such as 500ms, 30s, 5m or 24h)", n.Value)
		return 0
	}
	if max > 0 && d > max {
		p.errorf(n, field, "%s is longer than the limit of %s", n.Value, FormatDuration(max))
	}
	return d
}

// FormatDuration writes d as definitions and their messages do, without
// zero minutes and seconds: 8760h, 15m, 28s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (p *parser) input(n *yaml.Node) []InputField {
	fields := []InputField{}
	p.eachField(n, "input.", nil, func(key string, k, v *yaml.Node) {
		if !identPattern.MatchString(key) {
			p.errorf(k, "input."+key, "%q is not a valid field name", key)
			return
		}
		t := ""
		if v.Kind == yaml.ScalarNode {
			t = v.Value
		}
		words := strings.Fields(t)
		secret := len(words) == 2 && words[0] == SecretWord
		switch {
		case secret:
			t = words[1]
		case len(words) > 1:
			p.errorf(v, "input."+key, "unknown type %q (expected one of %s, or %s before one of them)", t, strings.Join(InputTypes(), ", "), SecretWord)
			return
		case len(words) == 1 && words[0] == SecretWord:
			p.errorf(v, "input."+key, "%s what? write %s before the type: %s string", SecretWord, SecretWord, SecretWord)
			return
		}
		if !slices.Contains(InputTypes(), t) {
			p.errorf(v, "input."+key, "unknown type %q (expected one of %s)", t, strings.Join(InputTypes(), ", "))
			return
		}
		fields = append(fields, InputField{Name: key, Type: t, Secret: secret, Pos: Pos{k.Line, k.Column}})
	})
	return fields
}
