package iamcheck_test

import (
	"context"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/iamcheck"
	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// TestScheduleRoleSendsStartRequestsOnly: no emulator runs EventBridge
// Scheduler, so no recording holds its calls; the policy engine judges
// the calls it makes instead. The schedule's role may send to the start
// queue (its requests) and to the start queue's dead-letter queue (its
// dead-letter events), and to no other queue, nor read either.
func TestScheduleRoleSendsStartRequestsOnly(t *testing.T) {
	t.Parallel()
	dir := engine(t)
	tpl, err := samtemplate.Load("../../infra/template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	stack := iamcheck.Stack
	stack.Parameters = map[string]string{"ScheduleExpression": "cron(0 2 * * ? *)", "ScheduleSaga": "report"}
	pol, err := tpl.Policy("ScheduleRole", stack)
	if err != nil {
		t.Fatal(err)
	}
	var cases []iamcheck.Case
	want := map[int]bool{}
	for _, c := range []struct {
		action, queue string
		allowed       bool
	}{
		{"sqs:SendMessage", "StartQueue", true},
		{"sqs:SendMessage", "StartDeadLetterQueue", true},
		{"sqs:SendMessage", "AdvanceQueue", false},
		{"sqs:SendMessage", "CompensateQueue", false},
		{"sqs:ReceiveMessage", "StartQueue", false},
		{"sqs:DeleteMessage", "StartDeadLetterQueue", false},
	} {
		arn, err := tpl.ARN(c.queue, stack)
		if err != nil {
			t.Fatal(err)
		}
		want[len(cases)] = c.allowed
		cases = append(cases, iamcheck.Case{Principal: "ScheduleRole", Policy: pol, Action: c.action, Resource: arn})
	}
	verdicts, err := iamcheck.Evaluate(context.Background(), dir, cases)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range verdicts {
		if v.Allowed() != want[i] {
			t.Errorf("%s on %s: %s (%s), want allowed %v", cases[i].Action, cases[i].Resource, v.Result, v.Error, want[i])
		}
	}
}
