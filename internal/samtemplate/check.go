package samtemplate

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// logRetentionDays are the values CloudWatch Logs accepts for a log group's
// retention (CloudWatch Logs API Reference, PutRetentionPolicy,
// retentionInDays).
var logRetentionDays = []int{1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}

// Check holds the template to the rules a deployment must keep and
// returns every breach: no wildcard IAM action or resource in an Allow (a
// Deny may use them: it only takes permissions away); every queue a
// function consumes has a dead-letter queue; every SQS event source reports
// batch item failures; a consumed queue's visibility timeout is at least six
// times its function's timeout; the table is encrypted, has point-in-time
// recovery and a TTL attribute; queues are encrypted; every function logs
// to a log group of the template that has a retention CloudWatch Logs
// accepts, and is denied logs:CreateLogGroup, so that no log group without
// a retention can appear (SAM gives every role it makes
// AWSLambdaBasicExecutionRole, which allows logs:CreateLogGroup on every
// group).
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
	for _, b := range t.Buckets {
		if !b.SSE {
			add("bucket %s: no default encryption (BucketEncryption)", b.Name)
		}
		if !b.PublicAccessBlocked {
			add("bucket %s: public access is not blocked (PublicAccessBlockConfiguration, all four true)", b.Name)
		}
		if b.EndedExpiration == (Value{}) {
			add("bucket %s: no enabled lifecycle rule expiring the objects tagged %s=1 (TagFilters, ExpirationInDays): the values of ended sagas would stay forever", b.Name, EndedTag)
		}
		if b.Expiration != (Value{}) {
			add("bucket %s: a lifecycle rule expires every object by its age (ExpirationInDays %s): a saga running or parked for longer would lose its values; put it under a condition, off by default", b.Name, b.Expiration)
		}
	}
	for _, q := range t.Queues {
		if !q.Encrypted {
			add("queue %s: not encrypted (SqsManagedSseEnabled or KmsMasterKeyId)", q.Name)
		}
	}
	for _, lg := range t.LogGroups {
		switch {
		case lg.RetentionInDays == 0:
			add("log group %s: no RetentionInDays: its events would never expire", lg.Name)
		case !slices.Contains(logRetentionDays, lg.RetentionInDays):
			add("log group %s: RetentionInDays %d is not a retention CloudWatch Logs accepts", lg.Name, lg.RetentionInDays)
		}
		for _, v := range t.allowed[lg.RetentionParameter] {
			if d, err := strconv.Atoi(v); err != nil || !slices.Contains(logRetentionDays, d) {
				add("parameter %s: allowed value %q is not a retention CloudWatch Logs accepts", lg.RetentionParameter, v)
			}
		}
	}
	for _, f := range t.Functions {
		switch _, ok := t.LogGroup(f.LogGroup.Ref); {
		case f.LogGroup == (Value{}):
			add("function %s: no LoggingConfig.LogGroup: Lambda would create /aws/lambda/<name>, a log group that never expires", f.Name)
		case !ok:
			add("function %s: LoggingConfig.LogGroup %s is not a log group of this template (with its retention)", f.Name, f.LogGroup)
		}
		if !slices.ContainsFunc(f.Policies, deniesLogGroupCreation) {
			add("function %s: no Deny of logs:CreateLogGroup on \"*\": its role (AWSLambdaBasicExecutionRole) may create a log group that never expires", f.Name)
		}
		for _, st := range f.Policies {
			if st.Effect == "Deny" {
				continue
			}
			for _, a := range st.Actions {
				if strings.Contains(a, "*") {
					add("function %s: policy statement %s: wildcard action %q", f.Name, st.Sid, a)
				}
			}
		}
		for _, w := range t.wildcardResources(f.Name) {
			add("function %s: %s", f.Name, w)
		}
		if f.Scheduled() && f.AsyncRetries > 0 {
			add("function %s: a schedule invokes it asynchronously and Lambda retries a failed run %d times (EventInvokeConfig.MaximumRetryAttempts): a retried tick sends its timers again; set 0, the next run does the work", f.Name, f.AsyncRetries)
		}
		if len(f.Events) == 0 && !f.Scheduled() {
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
			} else if dlq, ok := t.Queue(q.DeadLetterQueue); !ok {
				add("queue %s: dead-letter queue %q is not a queue of this template", q.Name, q.DeadLetterQueue)
			} else if dlq.Retention <= q.Retention {
				// A dead letter expires by its first enqueue time, in
				// its queue (SQS Developer Guide, "Using dead-letter
				// queues"): kept no longer, it may expire on arrival.
				add("queue %s: its dead-letter queue %s keeps messages %ds, not longer than it does (%ds)", q.Name, dlq.Name, dlq.Retention, q.Retention)
			}
			if q.VisibilityTimeout < 6*f.Timeout {
				add("queue %s: VisibilityTimeout %ds is under six times function %s's timeout of %ds", q.Name, q.VisibilityTimeout, f.Name, f.Timeout)
			}
		}
	}
	return problems
}

// qualifierOfAFunction is the one wildcard resource a function may be
// granted: any version or alias of one named function (lambda:NAME:ALIAS
// is authorized against the qualified ARN).
var qualifierOfAFunction = regexp.MustCompile(`^arn:aws:lambda:[^*]+:function:[^:*]+:\*$`)

// wildcardResources lists the wildcard resources the function's Allow
// statements grant, resolved as deployed (with a lambda: action function
// given, so that the statements it switches on are read too).
func (t *Template) wildcardResources(fn string) []string {
	stack := Stack{Region: "us-east-1", Account: "123456789012", Parameters: map[string]string{}}
	if _, ok := t.Parameters["ActionFunctionArns"]; ok {
		stack.Parameters["ActionFunctionArns"] = "arn:aws:lambda:us-east-1:123456789012:function:example"
	}
	pol, err := t.Policy(fn, stack)
	if err != nil {
		return []string{fmt.Sprintf("its policy cannot be resolved: %v", err)}
	}
	var out []string
	for _, x := range pol {
		st, _ := x.(map[string]any)
		if st["Effect"] != "Allow" {
			continue
		}
		var res []any
		switch r := st["Resource"].(type) {
		case string:
			res = []any{r}
		case []any:
			res = r
		}
		for _, r := range res {
			rs, _ := r.(string)
			if strings.Contains(rs, "*") && !qualifierOfAFunction.MatchString(rs) && !t.objectsOfABucket(rs, stack) {
				out = append(out, fmt.Sprintf("policy statement %v: wildcard resource %q", st["Sid"], rs))
			}
		}
	}
	return out
}

// objectsOfABucket reports whether rs is the objects of a bucket of the
// template, "arn:aws:s3:::BUCKET/*": the other wildcard resource a
// function may be granted, its keys being the sagas' own
// (durable.ObjectKey).
func (t *Template) objectsOfABucket(rs string, stack Stack) bool {
	for _, b := range t.Buckets {
		if arn, err := t.ARN(b.Name, stack); err == nil && rs == arn+"/*" {
			return true
		}
	}
	return false
}

// deniesLogGroupCreation reports whether st denies creating any log group.
func deniesLogGroupCreation(st Statement) bool {
	return st.Effect == "Deny" &&
		slices.ContainsFunc(st.Actions, func(a string) bool { return a == "logs:CreateLogGroup" || a == "logs:*" || a == "*" }) &&
		slices.Contains(st.Resources, Value{Literal: "*"})
}
