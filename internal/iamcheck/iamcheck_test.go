package iamcheck_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/iamcheck"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// EnvCallsDir names the directory of the recordings that make test's
// runs on the emulators leave (bin/aws-calls, one file a run).
const EnvCallsDir = "LAMBDASAGA_AWS_CALLS_DIR"

// The principals whose calls the template must grant, each of them
// reached by some test on the emulators: a recording that misses one
// checks nothing of it.
var principals = []string{"AdvanceFunction", "CompensateFunction", "SweepFunction", awslocal.ClientPrincipal, awslocal.OperatorPrincipal, awslocal.SenderPrincipal}

// engine returns the policy engine's directory, or skips the test where it
// is not installed (and fails it under CI, which installs it).
func engine(t *testing.T) string {
	t.Helper()
	dir, err := iamcheck.Dir()
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := iamcheck.Installed(dir); !ok {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: the IAM check needs it under CI (make iamsim)", why)
		}
		t.Skipf("%s: make iamsim installs it", why)
	}
	return dir
}

// check evaluates a recording against a template and returns what it
// denies, as Denial words it.
func check(t *testing.T, dir, template string, rec *iamcheck.Recording) (denials []string, cases []iamcheck.Case, verdicts []iamcheck.Verdict) {
	t.Helper()
	tpl, err := samtemplate.Load(template)
	if err != nil {
		t.Fatal(err)
	}
	cases, _, unplaced, err := iamcheck.Cases(tpl, rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range unplaced {
		t.Errorf("a recorded call the check cannot place: %s", u)
	}
	verdicts, err = iamcheck.Evaluate(context.Background(), dir, cases)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range verdicts {
		if !v.Allowed() {
			denials = append(denials, iamcheck.Denial(tpl, cases[i], v))
		}
	}
	return denials, cases, verdicts
}

// TestTemplateGrantsEveryRecordedCall evaluates every call that the runs
// on the emulators recorded (make test: the unit tests, the end-to-end
// and kill tests through the real binaries) against the policies of
// infra/template.yaml, and fails naming the call, its principal and the
// grant it lacks.
func TestTemplateGrantsEveryRecordedCall(t *testing.T) {
	dir := os.Getenv(EnvCallsDir)
	if dir == "" {
		t.Skipf("%s is not set: make iam runs this check on what make test's runs recorded", EnvCallsDir)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings in %s (%v): the runs on the emulators record their calls there (withemulators -calls)", dir, err)
	}
	rec, err := iamcheck.Read(files...)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range rec.Unread {
		t.Errorf("a call the recorder could not read: %s", u)
	}
	for _, p := range principals {
		if rec.Counts[p] == 0 {
			t.Errorf("no call of %s was recorded in %s: the check says nothing of its policy", p, dir)
		}
	}
	denials, cases, verdicts := check(t, engine(t), "../../infra/template.yaml", rec)
	for _, d := range denials {
		t.Error(d)
	}
	// The figures: calls by principal, and the verdicts on their shapes
	// by operation.
	shapes, verdict := map[string]int{}, map[string]map[string]int{}
	for i, c := range cases {
		shapes[c.Principal]++
		if verdict[c.Principal] == nil {
			verdict[c.Principal] = map[string]int{}
		}
		verdict[c.Principal][c.Call.Operation+" "+verdicts[i].Result]++
	}
	for _, p := range principals {
		var parts []string
		for k, n := range verdict[p] {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
		slices.Sort(parts)
		t.Logf("%s: %d calls recorded, %d shapes: %s", p, rec.Counts[p], shapes[p], strings.Join(parts, ", "))
	}
}

// TestDeniedCallNamesPrincipalCallAndGrant holds the check to what it
// must find: the calls a fork makes (the advance function's count in the
// fork record, the sweep's repair), denied by the policies the template
// had before them, each named with its principal and the grant it lacks;
// and allowed by infra/template.yaml.
func TestDeniedCallNamesPrincipalCallAndGrant(t *testing.T) {
	t.Parallel()
	dir := engine(t)
	rec, err := iamcheck.Read("testdata/forks.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	denials, _, _ := check(t, dir, "testdata/before.yaml", rec)
	want := []string{
		"AdvanceFunction: UpdateItem (dynamodb:UpdateItem) on table e2e-SagaTable with dynamodb:Attributes=[l0 pk sk], dynamodb:LeadingKeys=[FORK#trip-1#rooms#1], dynamodb:ReturnValues=ALL_OLD is ImplicitlyDenied by testdata/before.yaml: grant dynamodb:UpdateItem on arn:aws:dynamodb:us-east-1:123456789012:table/SagaTable (the request's condition keys: dynamodb:Attributes, dynamodb:LeadingKeys, dynamodb:ReturnValues)",
		"AdvanceFunction: Invoke (lambda:InvokeFunction) on function payments:live is ImplicitlyDenied by testdata/before.yaml: grant lambda:InvokeFunction on arn:aws:lambda:us-east-1:123456789012:function:payments:live",
		"SweepFunction: UpdateItem (dynamodb:UpdateItem) on table e2e-SagaTable with dynamodb:Attributes=[fail pk sk], dynamodb:LeadingKeys=[FORK#trip-1#rooms#1], dynamodb:ReturnValues=ALL_OLD is ImplicitlyDenied by testdata/before.yaml: grant dynamodb:UpdateItem on arn:aws:dynamodb:us-east-1:123456789012:table/SagaTable (the request's condition keys: dynamodb:Attributes, dynamodb:LeadingKeys, dynamodb:ReturnValues)",
		"SweepFunction: PutItem (dynamodb:PutItem) on table e2e-SagaTable with dynamodb:Attributes=[crt def gsi1pk gsi1sk name pk sk st state v], dynamodb:LeadingKeys=[SAGA#trip-1~rooms~1~0] is ImplicitlyDenied by testdata/before.yaml: grant dynamodb:PutItem on arn:aws:dynamodb:us-east-1:123456789012:table/SagaTable (the request's condition keys: dynamodb:Attributes, dynamodb:LeadingKeys)",
	}
	slices.Sort(denials)
	slices.Sort(want)
	if !slices.Equal(denials, want) {
		t.Errorf("the policies before the check:\ngot  %q\nwant %q", denials, want)
	}
	if denials, _, _ := check(t, dir, "../../infra/template.yaml", rec); len(denials) > 0 {
		t.Errorf("infra/template.yaml denies a fork's calls:\n%s", strings.Join(denials, "\n"))
	}
}

// TestTreeExpiryIsGrantedExactly holds the grant of the walk that expires
// a finished tree (internal/engine/expire.go) to what it needs: the advance
// function, which receives the expire messages, may set ttl on a child
// saga and on a fork record; no other attribute with it, and no other
// function.
func TestTreeExpiryIsGrantedExactly(t *testing.T) {
	t.Parallel()
	dir := engine(t)
	rec, err := iamcheck.Read("testdata/expire.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	denials, cases, _ := check(t, dir, "../../infra/template.yaml", rec)
	if len(cases) != 4 {
		t.Fatalf("%d cases, want 4", len(cases))
	}
	want := []string{
		"AdvanceFunction: UpdateItem (dynamodb:UpdateItem) on table e2e-SagaTable with dynamodb:Attributes=[pk sk st ttl], dynamodb:LeadingKeys=[SAGA#tree-1.each.1.19]",
		"CompensateFunction: UpdateItem (dynamodb:UpdateItem) on table e2e-SagaTable with dynamodb:Attributes=[pk sk ttl], dynamodb:LeadingKeys=[SAGA#tree-1.each.1.19]",
	}
	var got []string
	for _, d := range denials {
		got = append(got, strings.SplitN(d, " is ", 2)[0])
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("denied:\ngot  %q\nwant %q", got, want)
	}
}

// ForkRecords grants a fork record's lanes by name, up to the most a fork
// has (lang.MaxConcurrency), and nothing else that merely starts with l.
func TestForkRecordsGrantEveryLaneAndNoOtherAttribute(t *testing.T) {
	t.Parallel()
	dir := engine(t)
	f := filepath.Join(t.TempDir(), "calls.jsonl")
	call := func(attr string) string {
		return fmt.Sprintf(`{"call":{"principal":"AdvanceFunction","operation":"UpdateItem","action":"dynamodb:UpdateItem","table":"e2e-SagaTable","conditions":{"dynamodb:Attributes":["%s","pk","sk"],"dynamodb:LeadingKeys":["FORK#t#s#1"],"dynamodb:ReturnValues":"ALL_OLD"}}}`+"\n", attr)
	}
	lanes := fmt.Sprintf("l%d", lang.MaxConcurrency-1)
	data := `{"schema":{"table":"e2e-SagaTable","hash_key":"pk","indexes":{"by_due":"gsi2pk","by_status":"gsi1pk"}}}` + "\n" + call("l0") + call(lanes) + call("lease")
	if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := iamcheck.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	denials, cases, _ := check(t, dir, "../../infra/template.yaml", rec)
	if len(cases) != 3 || len(denials) != 1 || !strings.Contains(denials[0], "lease") {
		t.Fatalf("%d cases, denials %q: want l0 and %s allowed, lease denied", len(cases), denials, lanes)
	}
}
