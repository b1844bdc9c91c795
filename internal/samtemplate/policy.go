package samtemplate

import (
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Stack is what a deployed stack's intrinsic functions resolve to. Every
// resource's physical name is its logical id, so an ARN names the resource
// of the template it stands for.
type Stack struct {
	Region, Account string
	// Parameters are the values given at deploy time; a parameter not
	// given takes its default.
	Parameters map[string]string
}

// ARN returns the ARN of the template's resource with the logical id, as
// !GetAtt X.Arn gives it in stack.
func (t *Template) ARN(logicalID string, stack Stack) (string, error) {
	r, ok := t.resources[logicalID]
	if !ok {
		return "", fmt.Errorf("%s: no resource %s", t.File, logicalID)
	}
	switch typ := scalar(get(r, "Type")); typ {
	case "AWS::DynamoDB::Table":
		return fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", stack.Region, stack.Account, logicalID), nil
	case "AWS::SQS::Queue":
		return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", stack.Region, stack.Account, logicalID), nil
	case "AWS::Serverless::Function", "AWS::Lambda::Function":
		return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", stack.Region, stack.Account, logicalID), nil
	case "AWS::SNS::Topic":
		return fmt.Sprintf("arn:aws:sns:%s:%s:%s", stack.Region, stack.Account, logicalID), nil
	case "AWS::S3::Bucket":
		// CloudFormation names the bucket; here it is the logical id,
		// lowercased (a bucket name has no capitals).
		return "arn:aws:s3:::" + strings.ToLower(logicalID), nil
	default:
		return "", fmt.Errorf("%s: the ARN of %s, a %s, is not known here", t.File, logicalID, typ)
	}
}

// Policy returns the IAM statements that principal is granted: a
// function's Policies (SAM policy templates and managed policies it names
// excepted), an AWS::IAM::Role's inline Policies (managed ones it names
// excepted) or an AWS::IAM::ManagedPolicy's document, with every intrinsic
// function resolved for stack (conditions decided, AWS::NoValue dropped),
// as IAM receives them once deployed.
func (t *Template) Policy(principal string, stack Stack) ([]any, error) {
	r, ok := t.resources[principal]
	if !ok {
		return nil, fmt.Errorf("%s: no resource %s", t.File, principal)
	}
	rv := resolver{t: t, stack: stack}
	if err := t.checkRules(rv); err != nil {
		return nil, err
	}
	var docs []*yaml.Node
	switch typ := scalar(get(r, "Type")); typ {
	case "AWS::Serverless::Function":
		docs = list(get(get(r, "Properties"), "Policies"))
	case "AWS::IAM::ManagedPolicy", "AWS::IAM::Policy":
		docs = []*yaml.Node{get(get(r, "Properties"), "PolicyDocument")}
	case "AWS::IAM::Role":
		for _, p := range list(get(get(r, "Properties"), "Policies")) {
			docs = append(docs, get(p, "PolicyDocument"))
		}
	default:
		return nil, fmt.Errorf("%s: %s is a %s, not a function, a role or a policy", t.File, principal, typ)
	}
	var out []any
	for _, d := range docs {
		doc, err := rv.resolve(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %s's policy: %w", t.File, principal, err)
		}
		m, ok := doc.(map[string]any)
		if !ok { // a managed policy's ARN or a SAM policy template
			continue
		}
		switch st := m["Statement"].(type) {
		case []any:
			out = append(out, st...)
		case map[string]any:
			out = append(out, st)
		}
	}
	return out, nil
}

// checkRules refuses a stack the template's Rules refuse, as CloudFormation
// does before it deploys anything.
func (t *Template) checkRules(rv resolver) error {
	for name, rule := range pairs(get(t.rootNode, "Rules")) {
		if c := get(rule, "RuleCondition"); c != nil {
			v, err := rv.resolve(c)
			if err != nil {
				return fmt.Errorf("%s: rule %s: %w", t.File, name, err)
			}
			if v != true {
				continue
			}
		}
		for _, a := range list(get(rule, "Assertions")) {
			v, err := rv.resolve(get(a, "Assert"))
			if err != nil {
				return fmt.Errorf("%s: rule %s: %w", t.File, name, err)
			}
			if v != true {
				return fmt.Errorf("%s: rule %s refuses the stack: %s", t.File, name, scalar(get(a, "AssertDescription")))
			}
		}
	}
	return nil
}

// noValue is what !Ref AWS::NoValue resolves to: the property is dropped.
type noValue struct{}

type resolver struct {
	t     *Template
	stack Stack
}

func (rv resolver) param(name string) (string, bool) {
	if v, ok := rv.stack.Parameters[name]; ok {
		return v, true
	}
	v, ok := rv.t.Parameters[name]
	return v, ok
}

// ref resolves !Ref name: a parameter's value (a CommaDelimitedList's as a
// list), a pseudo parameter, or a resource's physical name.
func (rv resolver) ref(name string) (any, error) {
	switch name {
	case "AWS::NoValue":
		return noValue{}, nil
	case "AWS::Region":
		return rv.stack.Region, nil
	case "AWS::AccountId":
		return rv.stack.Account, nil
	case "AWS::Partition":
		return "aws", nil
	case "AWS::StackName":
		return "lambdasaga", nil
	}
	if v, ok := rv.param(name); ok {
		if p := get(get(rv.t.root(), "Parameters"), name); scalar(get(p, "Type")) == "CommaDelimitedList" {
			if v == "" {
				return []any{""}, nil // as CloudFormation splits "": one empty element
			}
			var out []any
			for _, s := range strings.Split(v, ",") {
				out = append(out, strings.TrimSpace(s))
			}
			return out, nil
		}
		return v, nil
	}
	if _, ok := rv.t.resources[name]; ok {
		return name, nil
	}
	return nil, fmt.Errorf("!Ref %s: no such parameter or resource", name)
}

func (rv resolver) getAtt(target string) (any, error) {
	res, attr, _ := strings.Cut(target, ".")
	switch attr {
	case "Arn":
		return rv.t.ARN(res, rv.stack)
	case "QueueName":
		return res, nil
	}
	return nil, fmt.Errorf("!GetAtt %s: the attribute is not known here", target)
}

var subVar = regexp.MustCompile(`\$\{([^}!]+)\}`)

func (rv resolver) sub(text string, vars map[string]any) (any, error) {
	var err error
	out := subVar.ReplaceAllStringFunc(text, func(m string) string {
		name := m[2 : len(m)-1]
		var v any
		var e error
		switch {
		case vars[name] != nil:
			v = vars[name]
		case strings.Contains(name, "."):
			v, e = rv.getAtt(name)
		default:
			v, e = rv.ref(name)
		}
		s, ok := v.(string)
		if e == nil && !ok {
			e = fmt.Errorf("!Sub ${%s} is not a string", name)
		}
		if e != nil && err == nil {
			err = e
		}
		return s
	})
	return out, err
}

func (rv resolver) condition(name string) (bool, error) {
	c, ok := rv.t.conditions[name]
	if !ok {
		return false, fmt.Errorf("no condition %s", name)
	}
	v, err := rv.resolve(c)
	if err != nil {
		return false, fmt.Errorf("condition %s: %w", name, err)
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("condition %s is not a boolean", name)
	}
	return b, nil
}

// resolve turns a template node into plain values, intrinsics resolved.
func (rv resolver) resolve(n *yaml.Node) (any, error) {
	if n == nil {
		return nil, nil
	}
	if n.Kind == yaml.AliasNode {
		return rv.resolve(n.Alias)
	}
	fn, arg := n.Tag, n
	if !strings.HasPrefix(fn, "!") || strings.HasPrefix(fn, "!!") {
		fn = ""
		if n.Kind == yaml.MappingNode && len(n.Content) == 2 {
			switch k := n.Content[0].Value; {
			case k == "Ref":
				fn, arg = "!Ref", n.Content[1]
			case strings.HasPrefix(k, "Fn::"):
				fn, arg = "!"+strings.TrimPrefix(k, "Fn::"), n.Content[1]
			case k == "Condition":
				fn, arg = "!Condition", n.Content[1]
			}
		}
	}
	if fn != "" {
		return rv.intrinsic(fn, arg)
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for k, v := range pairs(n) {
			x, err := rv.resolve(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if _, drop := x.(noValue); !drop {
				m[k] = x
			}
		}
		return m, nil
	case yaml.SequenceNode:
		s := []any{}
		for _, c := range n.Content {
			x, err := rv.resolve(c)
			if err != nil {
				return nil, err
			}
			if _, drop := x.(noValue); !drop {
				s = append(s, x)
			}
		}
		return s, nil
	}
	return n.Value, nil
}

func (rv resolver) args(n *yaml.Node, want int, fn string) ([]any, error) {
	if n.Kind != yaml.SequenceNode || (want > 0 && len(n.Content) != want) {
		return nil, fmt.Errorf("%s takes a list of %d", fn, want)
	}
	var out []any
	for _, c := range n.Content {
		x, err := rv.resolve(c)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

func (rv resolver) intrinsic(fn string, n *yaml.Node) (any, error) {
	switch fn {
	case "!Ref":
		return rv.ref(n.Value)
	case "!GetAtt":
		if n.Kind == yaml.SequenceNode && len(n.Content) == 2 {
			return rv.getAtt(n.Content[0].Value + "." + n.Content[1].Value)
		}
		return rv.getAtt(n.Value)
	case "!Sub":
		if n.Kind == yaml.ScalarNode {
			return rv.sub(n.Value, nil)
		}
		a, err := rv.args(n, 2, fn)
		if err != nil {
			return nil, err
		}
		text, _ := a[0].(string)
		vars, _ := a[1].(map[string]any)
		return rv.sub(text, vars)
	case "!If":
		if n.Kind != yaml.SequenceNode || len(n.Content) != 3 {
			return nil, fmt.Errorf("!If takes a condition and two values")
		}
		ok, err := rv.condition(n.Content[0].Value)
		if err != nil {
			return nil, err
		}
		if ok {
			return rv.resolve(n.Content[1])
		}
		return rv.resolve(n.Content[2])
	case "!Condition":
		return rv.condition(n.Value)
	case "!Equals":
		a, err := rv.args(n, 2, fn)
		if err != nil {
			return nil, err
		}
		return fmt.Sprint(a[0]) == fmt.Sprint(a[1]), nil
	case "!Not", "!And", "!Or":
		a, err := rv.args(n, 0, fn)
		if err != nil {
			return nil, err
		}
		res := fn == "!And"
		for _, x := range a {
			b, ok := x.(bool)
			if !ok {
				return nil, fmt.Errorf("%s of a value that is not a condition", fn)
			}
			switch fn {
			case "!Not":
				return !b, nil
			case "!And":
				res = res && b
			case "!Or":
				res = res || b
			}
		}
		return res, nil
	case "!Contains":
		a, err := rv.args(n, 2, fn)
		if err != nil {
			return nil, err
		}
		items, _ := a[0].([]any)
		for _, x := range items {
			if fmt.Sprint(x) == fmt.Sprint(a[1]) {
				return true, nil
			}
		}
		return false, nil
	case "!Join":
		a, err := rv.args(n, 2, fn)
		if err != nil {
			return nil, err
		}
		sep, _ := a[0].(string)
		items, _ := a[1].([]any)
		var parts []string
		for _, x := range items {
			parts = append(parts, fmt.Sprint(x))
		}
		return strings.Join(parts, sep), nil
	case "!Split":
		a, err := rv.args(n, 2, fn)
		if err != nil {
			return nil, err
		}
		sep, _ := a[0].(string)
		text, _ := a[1].(string)
		var out []any
		for _, s := range strings.Split(text, sep) {
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("the intrinsic %s is not known here", fn)
}

func (t *Template) root() *yaml.Node { return t.rootNode }
