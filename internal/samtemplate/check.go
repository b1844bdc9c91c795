package samtemplate

import (
	"fmt"
	"strings"
)

// Check holds the template to the rules a deployment must keep and
// returns every breach: no wildcard IAM action or resource; every queue a
// function consumes has a dead-letter queue; every SQS event source reports
// batch item failures; a consumed queue's visibility timeout is at least six
// times its function's timeout; the table is encrypted, has point-in-time
// recovery and a TTL attribute; queues are encrypted.
func (t *Template) Check() []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, tb := range t.Tables {
		if !tb.SSE {
			add("table %s: SSESpecification.SSEEnabled is not true", tb.Name)
		}
		if !tb.PointInTimeRecovery {
			add("table %s: point-in-time recovery is not enabled", tb.Name)
		}
		if tb.TTLAttribute == "" {
			add("table %s: no TimeToLiveSpecification: finished sagas would stay forever", tb.Name)
		}
		if tb.BillingMode != "PAY_PER_REQUEST" {
			add("table %s: BillingMode %q, want PAY_PER_REQUEST (on-demand)", tb.Name, tb.BillingMode)
		}
	}
	for _, q := range t.Queues {
		if !q.Encrypted {
			add("queue %s: not encrypted (SqsManagedSseEnabled or KmsMasterKeyId)", q.Name)
		}
	}
	for _, f := range t.Functions {
		for _, st := range f.Policies {
			for _, a := range st.Actions {
				if strings.Contains(a, "*") {
					add("function %s: policy statement %s: wildcard action %q", f.Name, st.Sid, a)
				}
			}
			for _, r := range st.Resources {
				if strings.Contains(r.Literal, "*") {
					add("function %s: policy statement %s: wildcard resource %q", f.Name, st.Sid, r.Literal)
				}
				if r.Other == "!Sub" && strings.Contains(r.Literal, "*") {
					add("function %s: policy statement %s: wildcard resource %q", f.Name, st.Sid, r.Literal)
				}
				if r.Other != "" && r.Other != "!Sub" {
					add("function %s: policy statement %s: resource %s cannot be checked for wildcards", f.Name, st.Sid, r.Other)
				}
			}
		}
		if len(f.Events) == 0 && !f.Scheduled {
			add("function %s: neither an SQS event source nor a schedule", f.Name)
		}
		for _, ev := range f.Events {
			if !ev.ReportBatchItemFailures {
				add("function %s: event %s: FunctionResponseTypes lacks ReportBatchItemFailures (one failed record would redeliver the whole batch)", f.Name, ev.Name)
			}
			q, ok := t.Queue(ev.Queue)
			if !ok {
				add("function %s: event %s: queue %q is not a queue of this template", f.Name, ev.Name, ev.Queue)
				continue
			}
			if q.DeadLetterQueue == "" || q.MaxReceiveCount < 1 {
				add("queue %s: no dead-letter queue (RedrivePolicy with deadLetterTargetArn and maxReceiveCount)", q.Name)
			} else if _, ok := t.Queue(q.DeadLetterQueue); !ok {
				add("queue %s: dead-letter queue %q is not a queue of this template", q.Name, q.DeadLetterQueue)
			}
			if q.VisibilityTimeout < 6*f.Timeout {
				add("queue %s: VisibilityTimeout %ds is under six times function %s's timeout of %ds", q.Name, q.VisibilityTimeout, f.Name, f.Timeout)
			}
		}
	}
	return problems
}
