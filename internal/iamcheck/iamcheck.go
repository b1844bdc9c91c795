// Package iamcheck holds infra/template.yaml's policies to the AWS calls
// lambdasaga's code really makes. The emulators check no IAM: a call a
// deployed function would be denied passes every test on them. The tests
// that run the code on the emulators record each call through proxies
// (internal/awscall, tools/withemulators -calls); this package maps each
// recorded call to the ARN of the template's resource it names, and has a
// real policy engine (npm @cloud-copilot/iam-simulate, tools/iamsim, run
// offline) evaluate it against the statements of its principal as the
// stack resolves them.
//
// What neither the recording nor the engine sees: the policies SAM attaches
// by itself (AWSLambdaBasicExecutionRole, the SQS event source's
// AWSLambdaSQSQueueExecutionRole, X-Ray's write access), resource policies
// and KMS key policies (the template encrypts with AWS-owned keys; a
// customer-managed key needs kms:GenerateDataKey and kms:Decrypt, which no
// call here records), service control policies and permission boundaries
// of the user's account. docs/DEPLOY.md, "IAM", says so.
package iamcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lambdasaga/lambdasaga/internal/awscall"
	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// Stack is the deployment the checks resolve the template for.
var Stack = samtemplate.Stack{Region: "us-east-1", Account: "123456789012"}

// Case is one recorded call, as the policy engine evaluates it.
type Case struct {
	Call      awscall.Call   `json:"-"`
	Principal string         `json:"principal"`
	Policy    []any          `json:"policy"`
	Action    string         `json:"action"`
	Resource  string         `json:"resource"`
	Context   map[string]any `json:"context,omitempty"`
}

// Verdict is the engine's answer to a case.
type Verdict struct {
	Result string `json:"result"` // Allowed, ImplicitlyDenied, ExplicitlyDenied
	Error  string `json:"error,omitempty"`
}

// Allowed reports whether the call is allowed.
func (v Verdict) Allowed() bool { return v.Result == "Allowed" }

// Recording is the calls of one or more recordings, each shape once, with
// the schemas of the tables they created and the calls counted by
// principal.
type Recording struct {
	Calls  []awscall.Call
	Counts map[string]int
	Unread []string
	tables map[string]awscall.TableSchema
}

// Read reads recordings (files of awscall entries).
func Read(files ...string) (*Recording, error) {
	r := &Recording{Counts: map[string]int{}, tables: map[string]awscall.TableSchema{}}
	seen := map[string]bool{}
	for _, f := range files {
		entries, err := awscall.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			switch {
			case e.Schema != nil:
				r.tables[e.Schema.Table] = *e.Schema
			case e.Call != nil:
				if k := e.Call.Shape(); !seen[k] {
					seen[k] = true
					r.Calls = append(r.Calls, *e.Call)
				}
			case e.Unread != "":
				r.Unread = append(r.Unread, e.Unread)
			}
			for p, n := range e.Counts {
				r.Counts[p] += n
			}
		}
	}
	return r, nil
}

// SagaTable reports whether table is a saga table: created with the
// by_status and by_due indexes of the template's table. Any other table a
// function's calls name belongs to the user's actions (a ledger of a test
// service, say), whose grants are the user's to give.
func (r *Recording) SagaTable(table string) bool {
	s, ok := r.tables[table]
	if !ok {
		return false
	}
	_, st := s.Indexes["by_status"]
	_, due := s.Indexes["by_due"]
	return st && due
}

// queueOf names the template's queue a queue name stands for: the local
// harness names its queues prefix+logical id (e2e-AdvanceQueue), the
// tests' backends prefix+durable name (t-1a2b-advance, ...-advance-dlq).
func queueOf(name string) (string, bool) {
	for _, q := range []struct{ logical, durable string }{
		{"AdvanceDeadLetterQueue", "advance-dlq"},
		{"CompensateDeadLetterQueue", "compensate-dlq"},
		{"StartDeadLetterQueue", "start-dlq"},
		{"StartQueue", "start"},
		{"AdvanceQueue", "advance"},
		{"CompensateQueue", "compensate"},
	} {
		if strings.HasSuffix(name, q.logical) || strings.HasSuffix(name, q.durable) {
			return q.logical, true
		}
	}
	return "", false
}

// bucketOf names the template's bucket a bucket name stands for: the
// tests name theirs prefix+logical id, lowercased (e2e-valuesbucket), as
// a bucket name has no capitals.
func bucketOf(tpl *samtemplate.Template, name string) (string, bool) {
	for _, b := range tpl.Buckets {
		if strings.HasSuffix(name, strings.ToLower(b.Name)) {
			return b.Name, true
		}
	}
	return "", false
}

// Cases maps each call of the recording to what the engine evaluates:
// the ARN of the template's resource it names and its principal's
// statements. Calls that name the user's own resources (tables that are
// not saga tables) are returned apart; so are those whose resource this
// package cannot place, with the reason. Functions a lambda: action names
// are given to the stack as ActionFunctionArns, unqualified, as a user
// lists them.
func Cases(tpl *samtemplate.Template, rec *Recording) (cases []Case, users []awscall.Call, unplaced []string, err error) {
	stack := Stack
	stack.Parameters = map[string]string{}
	var fns []string
	for _, c := range rec.Calls {
		if c.Function != "" {
			arn := fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", stack.Region, stack.Account, c.Function)
			if !slices.Contains(fns, arn) {
				fns = append(fns, arn)
			}
		}
	}
	slices.Sort(fns)
	stack.Parameters["ActionFunctionArns"] = strings.Join(fns, ",")
	policies := map[string][]any{}
	for _, c := range rec.Calls {
		pol, ok := policies[c.Principal]
		if !ok {
			if pol, err = tpl.Policy(c.Principal, stack); err != nil {
				return nil, nil, nil, err
			}
			policies[c.Principal] = pol
		}
		var arn string
		switch {
		case c.Table != "":
			if _, known := rec.tables[c.Table]; !known {
				// Neither a saga table nor one known as the user's: a
				// recording that missed its CreateTable places nothing.
				unplaced = append(unplaced, fmt.Sprintf("%s: %s: the recording holds no CreateTable of %s, so it cannot tell a saga table from a user's", c.Principal, c, c.Table))
				continue
			}
			if !rec.SagaTable(c.Table) {
				users = append(users, c)
				continue
			}
			table := tpl.Tables[0].Name
			if arn, err = tpl.ARN(table, stack); err != nil {
				return nil, nil, nil, err
			}
			if c.Index != "" {
				arn += "/index/" + c.Index
			}
		case c.Queue != "":
			q, ok := queueOf(c.Queue)
			if !ok {
				unplaced = append(unplaced, fmt.Sprintf("%s: %s: no queue of the template is named like %s", c.Principal, c, c.Queue))
				continue
			}
			if arn, err = tpl.ARN(q, stack); err != nil {
				return nil, nil, nil, err
			}
		case c.Function != "":
			arn = fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", stack.Region, stack.Account, c.Function)
			if c.Qualifier != "" {
				arn += ":" + c.Qualifier
			}
		case c.Bucket != "":
			b, ok := bucketOf(tpl, c.Bucket)
			if !ok {
				unplaced = append(unplaced, fmt.Sprintf("%s: %s: no bucket of the template is named like %s", c.Principal, c, c.Bucket))
				continue
			}
			if arn, err = tpl.ARN(b, stack); err != nil {
				return nil, nil, nil, err
			}
			if c.Object != "" {
				arn += "/" + c.Object
			}
		default:
			unplaced = append(unplaced, fmt.Sprintf("%s: %s names no resource", c.Principal, c))
			continue
		}
		cases = append(cases, Case{Call: c, Principal: c.Principal, Policy: pol, Action: c.Action, Resource: arn, Context: c.Conditions})
	}
	return cases, users, unplaced, nil
}

// Dir returns tools/iamsim, where the policy engine is installed, from
// the module's root found above the working directory.
func Dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "tools", "iamsim"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}

// Installed reports whether the policy engine is installed in dir, and
// how to install it when it is not.
func Installed(dir string) (bool, string) {
	if _, err := exec.LookPath("node"); err != nil {
		return false, "node is not installed"
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@cloud-copilot", "iam-simulate", "package.json")); err != nil {
		return false, fmt.Sprintf("the policy engine is not installed in %s (make iamsim)", dir)
	}
	return true, ""
}

// Evaluate has the policy engine in dir evaluate the cases, in one run.
func Evaluate(ctx context.Context, dir string, cases []Case) ([]Verdict, error) {
	in, err := json.Marshal(cases)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "node", "evaluate.mjs")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("policy engine (%s/evaluate.mjs): %w: %s", dir, err, stderr.String())
	}
	var verdicts []Verdict
	if err := json.Unmarshal(out, &verdicts); err != nil {
		return nil, fmt.Errorf("policy engine's answer: %w", err)
	}
	if len(verdicts) != len(cases) {
		return nil, fmt.Errorf("policy engine answered %d cases of %d", len(verdicts), len(cases))
	}
	return verdicts, nil
}

// Denial says what a denied case lacks: the call, its principal, and the
// grant that would allow it.
func Denial(tpl *samtemplate.Template, c Case, v Verdict) string {
	if v.Error != "" {
		return fmt.Sprintf("%s: %s: the policy engine could not evaluate it (%s)", c.Principal, c.Call, v.Error)
	}
	grant := fmt.Sprintf("%s on %s", c.Action, c.Resource)
	var keys []string
	for k := range c.Context {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) > 0 {
		grant += " (the request's condition keys: " + strings.Join(keys, ", ") + ")"
	}
	return fmt.Sprintf("%s: %s is %s by %s: grant %s", c.Principal, c.Call, v.Result, tpl.File, grant)
}
