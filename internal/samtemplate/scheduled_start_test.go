package samtemplate_test

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
	"github.com/lambdasaga/lambdasaga/internal/schedule"
)

// TestScheduleParametersStartASagaThroughTheStartQueue: the template's
// optional schedule is off by default, and when ScheduleExpression is
// set it sends the start queue exactly the request schedule.Request
// renders (so its ids are schedule.SagaID's), in ScheduleTimezone, with
// no flexible window, Scheduler's retries and the start queue's
// dead-letter queue.
func TestScheduleParametersStartASagaThroughTheStartQueue(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	params := node(t, root, "Parameters")
	for name, def := range map[string]string{"ScheduleExpression": "", "ScheduleTimezone": "UTC", "ScheduleSaga": "", "ScheduleInput": "{}"} {
		if got := node(t, node(t, params, name), "Default").Value; got != def {
			t.Errorf("parameter %s defaults to %q, want %q", name, got, def)
		}
	}
	if c := node(t, node(t, root, "Conditions"), "HasSchedule"); !strings.Contains(yamlText(t, c), "ScheduleExpression") {
		t.Errorf("HasSchedule is %s", yamlText(t, c))
	}
	res := node(t, root, "Resources")
	for _, name := range []string{"Schedule", "ScheduleRole"} {
		if c := node(t, node(t, res, name), "Condition").Value; c != "HasSchedule" {
			t.Errorf("%s has condition %q, want HasSchedule", name, c)
		}
	}
	props := node(t, node(t, res, "Schedule"), "Properties")
	target := node(t, props, "Target")
	for _, c := range []struct {
		n         *yaml.Node
		tag, want string
	}{
		{node(t, node(t, res, "Schedule"), "Type"), "!!str", "AWS::Scheduler::Schedule"},
		{node(t, props, "ScheduleExpression"), "!Ref", "ScheduleExpression"},
		{node(t, props, "ScheduleExpressionTimezone"), "!Ref", "ScheduleTimezone"},
		{node(t, node(t, props, "FlexibleTimeWindow"), "Mode"), "!!str", "OFF"},
		{node(t, target, "Arn"), "!GetAtt", "StartQueue.Arn"},
		{node(t, target, "RoleArn"), "!GetAtt", "ScheduleRole.Arn"},
		{node(t, node(t, target, "DeadLetterConfig"), "Arn"), "!GetAtt", "StartDeadLetterQueue.Arn"},
		{node(t, node(t, target, "RetryPolicy"), "MaximumRetryAttempts"), "!!int", "185"},
		{node(t, node(t, target, "RetryPolicy"), "MaximumEventAgeInSeconds"), "!!int", "86400"},
	} {
		if c.n.Tag != c.tag || c.n.Value != c.want {
			t.Errorf("line %d: %s %q, want %s %q", c.n.Line, c.n.Tag, c.n.Value, c.tag, c.want)
		}
	}
	input := node(t, target, "Input")
	if input.Tag != "!Sub" {
		t.Fatalf("Input is %s, want !Sub", input.Tag)
	}
	sagaInput := `{ "region": "eu", "top": 10 }`
	deployed := strings.NewReplacer("${ScheduleSaga}", "report", "${ScheduleInput}", sagaInput).Replace(input.Value)
	want, err := schedule.Request("report", "report-", json.RawMessage(sagaInput))
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(deployed)); err != nil {
		t.Fatalf("the Input, deployed, is not JSON: %v: %s", err, deployed)
	}
	if compact.String() != want {
		t.Errorf("the template's Input, deployed with ScheduleSaga report:\n %s\nwant what schedule.Request renders:\n %s", compact.String(), want)
	}
}

// TestScheduleRoleMaySendToTheStartQueuesOnly: the schedule's role is
// granted sqs:SendMessage on the start queue and its dead-letter queue,
// as deployed, and nothing else; a stack with a schedule but no saga is
// refused by the template's Rules.
func TestScheduleRoleMaySendToTheStartQueuesOnly(t *testing.T) {
	t.Parallel()
	tpl, err := samtemplate.Load(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	stack := samtemplate.Stack{Region: "eu-west-1", Account: "123456789012", Parameters: map[string]string{"ScheduleExpression": "cron(0 2 * * ? *)", "ScheduleSaga": "report"}}
	pol, err := tpl.Policy("ScheduleRole", stack)
	if err != nil {
		t.Fatal(err)
	}
	var arns []any
	for _, q := range []string{"StartQueue", "StartDeadLetterQueue"} {
		arn, err := tpl.ARN(q, stack)
		if err != nil {
			t.Fatal(err)
		}
		arns = append(arns, arn)
	}
	if len(pol) != 1 {
		t.Fatalf("%d statements: %v", len(pol), pol)
	}
	st := pol[0].(map[string]any)
	if st["Effect"] != "Allow" || !slices.Equal(st["Action"].([]any), []any{"sqs:SendMessage"}) || !slices.Equal(st["Resource"].([]any), arns) {
		t.Errorf("the role's statement %v, want sqs:SendMessage on %v", st, arns)
	}
	stack.Parameters["ScheduleSaga"] = ""
	if _, err := tpl.Policy("ScheduleRole", stack); err == nil || !strings.Contains(err.Error(), "ScheduleSaga") {
		t.Errorf("a schedule without a saga: %v, want the rule's refusal", err)
	}
}

// node is a mapping node's value for key.
func node(t *testing.T, m *yaml.Node, key string) *yaml.Node {
	t.Helper()
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	t.Fatalf("line %d: no %s", m.Line, key)
	return nil
}

// yamlText is n written as YAML, for messages.
func yamlText(t *testing.T, n *yaml.Node) string {
	t.Helper()
	b, err := yaml.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
