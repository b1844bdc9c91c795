package sagactl_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// TestScheduleNextListsStartsAndIDs: next lists the firings after
// --after in the zone and in UTC, and the saga id each one starts.
func TestScheduleNextListsStartsAndIDs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"cron(0 9 ? * MON-FRI *)", "--tz", "Europe/Paris", "--after", "2026-12-04T13:00:00Z", "--n", "2", "--id-prefix", "report-"},
			"cron(0 9 ? * MON-FRI *) in Europe/Paris: the next 2 start(s) after 2026-12-04T14:00:00+01:00\n" +
				"  2026-12-07T09:00:00+01:00  2026-12-07T08:00:00Z  report-2026-12-07T08:00:00Z\n" +
				"  2026-12-08T09:00:00+01:00  2026-12-08T08:00:00Z  report-2026-12-08T08:00:00Z\n"},
		// Unquoted, the expression comes in words; --after in the zone.
		{[]string{"cron(30", "2", "*", "*", "?", "*)", "--tz", "America/New_York", "--after", "2027-03-13T03:00:00", "--n", "2"},
			"cron(30 2 * * ? *) in America/New_York: the next 2 start(s) after 2027-03-13T03:00:00-05:00\n" +
				"  2027-03-15T02:30:00-04:00  2027-03-15T06:30:00Z\n" + // the 14th's 02:30 does not exist
				"  2027-03-16T02:30:00-04:00  2027-03-16T06:30:00Z\n"},
		{[]string{"rate(1 day)", "--tz", "America/New_York", "--after", "2027-03-13T12:00:00", "--n", "2", "--id-prefix", "r-"},
			"rate(1 day) in America/New_York, created at 2027-03-13T12:00:00-05:00: its first 2 start(s)\n" +
				"  2027-03-13T12:00:00-05:00  2027-03-13T17:00:00Z  r-2027-03-13T17:00:00Z\n" +
				"  2027-03-14T13:00:00-04:00  2027-03-14T17:00:00Z  r-2027-03-14T17:00:00Z\n"},
		{[]string{"rate(2 hours)", "--start", "2027-01-01T00:00:30Z", "--after", "2027-01-01T03:00:00Z", "--n", "1"},
			"rate(2 hours) in UTC: the next 1 start(s) after 2027-01-01T03:00:00Z\n" +
				"  2027-01-01T04:00:30Z       2027-01-01T04:00:30Z\n"},
		{[]string{"at(2027-01-01T09:00:00)", "--after", "2027-01-02T00:00:00Z"},
			"at(2027-01-01T09:00:00) in UTC: no start after 2027-01-02T00:00:00Z\n"},
	} {
		r := runSagactl(t, nil, append([]string{"schedule", "next"}, tt.args...)...)
		if r.code != sagactl.ExitOK || r.stdout != tt.want || r.stderr != "" {
			t.Errorf("%v: exit %d, stderr %q\n got:\n%s\nwant:\n%s", tt.args, r.code, r.stderr, r.stdout, tt.want)
		}
	}
}

// TestScheduleRefusesBadFlags: each error names the flag, or the
// expression's field and token, and nothing is printed on stdout.
func TestScheduleRefusesBadFlags(t *testing.T) {
	t.Parallel()
	snippet := []string{"schedule", "snippet", "--name", "Nightly", "--saga", "report", "--expr", "cron(0 2 * * ? *)"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"schedule"}, "schedule: name next or snippet"},
		{[]string{"schedule", "later"}, `schedule: unknown subcommand "later"`},
		{[]string{"schedule", "next"}, "schedule next: give an expression"},
		{[]string{"schedule", "next", "cron(0 9 * * * *)"}, `day-of-week "*": day-of-month is given (*), so day-of-week must be ?`},
		{[]string{"schedule", "next", "cron(0 25 * * ? *)"}, `hours "25": not a number from 0 to 23`},
		{[]string{"schedule", "next", "rate(5 seconds)"}, `rate unit "seconds"`},
		{[]string{"schedule", "next", "cron(0 9 * * ? *)", "--tz", "Mars/Olympus"}, `--tz: "Mars/Olympus": not an IANA time zone name`},
		{[]string{"schedule", "next", "cron(0 9 * * ? *)", "--n", "0"}, "--n: 0: must be from 1 to 1000"},
		{[]string{"schedule", "next", "cron(0 9 * * ? *)", "--after", "tomorrow"}, `--after: "tomorrow" is not a time`},
		{[]string{"schedule", "next", "rate(1 day)", "--start", "2027-13-01T00:00:00Z"}, `--start: "2027-13-01T00:00:00Z" is not a time`},
		{[]string{"schedule", "next", "cron(0 9 * * ? *)", "--id-prefix", "-r"}, `--id-prefix: "-r": not the start of a saga id`},
		{[]string{"schedule", "next", "cron(0 9 * * ? *)", "--bogus"}, "schedule: flag provided but not defined: -bogus"},
		{snippet[:6], "--expr: required"},
		{[]string{"schedule", "snippet", "--saga", "report", "--expr", "rate(1 day)"}, "--name: required"},
		{append(slices.Clone(snippet), "--name", "Nightly-Report"), `--name: "Nightly-Report": a template's logical id is letters and digits only`},
		{append(slices.Clone(snippet), "--saga", "1report"), `--saga: saga name "1report"`},
		{append(slices.Clone(snippet), "--expr", "cron(0 2 * * ? *"), `--expr: cron(0 2 * * ? *: expression`},
		{append(slices.Clone(snippet), "--expr", "cron(0 2\n* * ? *)"), "--expr: holds a line break"},
		{append(slices.Clone(snippet), "--tz", "Europe"), `--tz: "Europe"`},
		{append(slices.Clone(snippet), "--input", "[1]"), "--input: must be a JSON object"},
		{append(slices.Clone(snippet), "--id-prefix", strings.Repeat("p", 109)), "--id-prefix: \"" + strings.Repeat("p", 109) + "\": 109 bytes, over 108"},
		{append(slices.Clone(snippet), "extra"), `schedule snippet: unexpected argument "extra"`},
	} {
		r := runSagactl(t, nil, tt.args...)
		if r.code != sagactl.ExitUsage || r.stdout != "" || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", tt.args, r.code, r.stdout, r.stderr, tt.want)
		}
	}
}

// TestScheduleHelp: schedule --help and each subcommand's --help show
// the usage, the expression forms and the flags.
func TestScheduleHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"schedule", "--help"}, {"schedule", "next", "--help"}, {"schedule", "snippet", "-h"}} {
		r := runSagactl(t, nil, args...)
		if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "Usage: sagactl schedule next EXPR") || !strings.Contains(r.stdout, "'rate(5 minutes)'") {
			t.Errorf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := runSagactl(t, nil, "schedule", "snippet", "-h"); !strings.Contains(r.stdout, "-saga") {
		t.Errorf("snippet --help lacks its flags:\n%s", r.stdout)
	}
}

// TestScheduleSnippetIsAScheduleOnTheStartQueue: the snippet is YAML of
// two resources: the schedule, its target the start queue with the start
// request as Input, no flexible window, retries and the start queue's
// dead-letter queue; and a role Scheduler alone assumes, that may send
// to those two queues and nothing else.
func TestScheduleSnippetIsAScheduleOnTheStartQueue(t *testing.T) {
	t.Parallel()
	r := runSagactl(t, nil, "schedule", "snippet", "--name", "NightlyReport", "--saga", "report", "--expr", "cron(0 2 ? * MON-FRI *)",
		"--tz", "Europe/Paris", "--input", `{"region": "eu", "note": "it's <b>"}`)
	if r.code != sagactl.ExitOK || r.stderr != "" {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "(report-2027-01-01T01:00:00Z)") {
		t.Errorf("the example id is not the first firing of 2027:\n%s", r.stdout)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("Resources:\n"+r.stdout), &doc); err != nil {
		t.Fatalf("not YAML: %v\n%s", err, r.stdout)
	}
	res := lookup(t, doc.Content[0], "Resources")
	sched := lookup(t, res, "NightlyReport")
	props := lookup(t, sched, "Properties")
	target := lookup(t, props, "Target")
	for _, c := range []struct {
		node      *yaml.Node
		tag, want string
	}{
		{lookup(t, sched, "Type"), "!!str", "AWS::Scheduler::Schedule"},
		{lookup(t, props, "ScheduleExpression"), "!!str", "cron(0 2 ? * MON-FRI *)"},
		{lookup(t, props, "ScheduleExpressionTimezone"), "!!str", "Europe/Paris"},
		{lookup(t, lookup(t, props, "FlexibleTimeWindow"), "Mode"), "!!str", "OFF"},
		{lookup(t, target, "Arn"), "!GetAtt", "StartQueue.Arn"},
		{lookup(t, target, "RoleArn"), "!GetAtt", "NightlyReportRole.Arn"},
		{lookup(t, lookup(t, target, "DeadLetterConfig"), "Arn"), "!GetAtt", "StartDeadLetterQueue.Arn"},
		{lookup(t, lookup(t, target, "RetryPolicy"), "MaximumRetryAttempts"), "!!int", "185"},
		{lookup(t, lookup(t, res, "NightlyReportRole"), "Type"), "!!str", "AWS::IAM::Role"},
	} {
		if c.node.Tag != c.tag || c.node.Value != c.want {
			t.Errorf("line %d: %s %q, want %s %q", c.node.Line, c.node.Tag, c.node.Value, c.tag, c.want)
		}
	}
	var req struct {
		Start struct {
			Saga, ID string
			Input    map[string]string
		}
	}
	if err := json.Unmarshal([]byte(lookup(t, target, "Input").Value), &req); err != nil {
		t.Fatalf("Input is not JSON: %v", err)
	}
	if req.Start.Saga != "report" || req.Start.ID != "report-<aws.scheduler.scheduled-time>" || req.Start.Input["note"] != "it's <b>" || req.Start.Input["region"] != "eu" {
		t.Errorf("Input %+v", req)
	}
	role := lookup(t, lookup(t, res, "NightlyReportRole"), "Properties")
	trust := lookup(t, role, "AssumeRolePolicyDocument").Content[3].Content[0]
	if lookup(t, lookup(t, trust, "Principal"), "Service").Value != "scheduler.amazonaws.com" || lookup(t, trust, "Action").Value != "sts:AssumeRole" {
		t.Errorf("the role is not for EventBridge Scheduler alone")
	}
	stmts := lookup(t, lookup(t, role, "Policies").Content[0], "PolicyDocument")
	stmts = lookup(t, stmts, "Statement")
	if len(stmts.Content) != 1 {
		t.Fatalf("%d statements, want 1", len(stmts.Content))
	}
	st := stmts.Content[0]
	var resources []string
	for _, n := range lookup(t, st, "Resource").Content {
		resources = append(resources, n.Tag+" "+n.Value)
	}
	if lookup(t, st, "Effect").Value != "Allow" || len(lookup(t, st, "Action").Content) != 1 || lookup(t, st, "Action").Content[0].Value != "sqs:SendMessage" ||
		!slices.Equal(resources, []string{"!GetAtt StartQueue.Arn", "!GetAtt StartDeadLetterQueue.Arn"}) {
		t.Errorf("the role's statement grants %s on %v", lookup(t, st, "Action").Content[0].Value, resources)
	}
}

// lookup is a mapping node's value for key.
func lookup(t *testing.T, m *yaml.Node, key string) *yaml.Node {
	t.Helper()
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	t.Fatalf("line %d: no %s", m.Line, key)
	return nil
}
