package sagactl_test

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// TestCostRefusesFiguresThatAreNotPositive: each figure must be a finite
// number above zero; the error names the flag.
func TestCostRefusesFiguresThatAreNotPositive(t *testing.T) {
	for _, flag := range []string{"--steps-per-month", "--sagas-per-month", "--batch-size", "--memory", "--state-bytes", "--duration", "--chain-steps", "--chain-time", "--function-timeout"} {
		values := []string{"-1", "0", "NaN", "+Inf", "-Inf"}
		switch flag {
		case "--memory", "--state-bytes", "--chain-steps":
			values = []string{"-1", "0"} // integers: NaN does not parse
		case "--duration", "--chain-time", "--function-timeout":
			values = []string{"-1ms", "0s"}
		}
		for _, v := range values {
			r := runSagactl(t, nil, "cost", orderFile, flag, v)
			if r.code != sagactl.ExitUsage || r.stdout != "" || !strings.Contains(r.stderr, "cost: "+flag+": must be") {
				t.Errorf("cost %s %s: exit %d\nstdout %q\nstderr %q", flag, v, r.code, r.stdout, r.stderr)
			}
		}
	}
	r := runSagactl(t, nil, "cost", orderFile, "--sagas-per-month", "1000", "--batch-size", "2.5", "--memory", "512", "--duration", "20ms", "--state-bytes", "900")
	if r.code != sagactl.ExitOK || strings.Contains(r.stdout, "NaN") || strings.Contains(r.stdout, "Inf") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// costJSON runs sagactl cost --json and decodes its object without the Go
// type, so the field names themselves are checked.
func costJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	r := runSagactl(t, nil, append([]string{"cost", orderFile, "--input", "@../examples/order/testdata/ok.json", "--json"}, args...)...)
	if r.code != sagactl.ExitOK || r.stderr != "" {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	return v
}

// get walks a decoded JSON object by its keys.
func get(t *testing.T, v any, keys ...string) any {
	t.Helper()
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: not an object: %v", k, v)
		}
		if v, ok = m[k]; !ok {
			t.Fatalf("no field %q in %v", k, m)
		}
	}
	return v
}

// TestCostJSON: the order saga's figures by DynamoDB's rule, on the
// succeeding path (index 1 + 2) and where ship fails (1 for the create, 2
// for running -> compensating, 2 for compensating -> compensated). Its
// chains: reserve's message carries charge and ship; when ship fails, the
// first compensation is a message (the compensate queue), which carries
// the second.
func TestCostJSON(t *testing.T) {
	for _, tt := range []struct {
		args                                []string
		table, index, transitions, statuses float64
		chained, messages                   float64
	}{
		{nil, 4, 3, 4, 1, 2, 1},
		{[]string{"--fail", "ship"}, 6, 5, 6, 2, 3, 2},
		{[]string{"--no-chain"}, 4, 3, 4, 1, 0, 3},
	} {
		v := costJSON(t, append(tt.args, "--state-bytes", "472", "--steps-per-month", "3000000")...)
		wu := get(t, v, "per_saga", "write_units")
		if get(t, wu, "table") != tt.table || get(t, wu, "index") != tt.index || get(t, wu, "total") != tt.table+tt.index {
			t.Errorf("%v: write units %v, want table %v, index %v", tt.args, wu, tt.table, tt.index)
		}
		if get(t, v, "per_saga", "transitions") != tt.transitions || get(t, v, "per_saga", "status_changes") != tt.statuses {
			t.Errorf("%v: per_saga %v", tt.args, get(t, v, "per_saga"))
		}
		steps := get(t, v, "per_saga", "action_steps").(float64)
		if n := get(t, v, "sagas_per_month").(float64); n != 3e6/steps {
			t.Errorf("%v: sagas_per_month %v, want %v", tt.args, n, 3e6/steps)
		}
		for _, k := range []string{"lambda_invocations", "sqs", "dynamodb_reads", "dynamodb_writes"} {
			get(t, v, "per_saga", "requests", k)
		}
		if get(t, v, "per_saga", "requests", "dynamodb_writes") != tt.transitions || get(t, v, "per_saga", "read_units") != tt.messages ||
			get(t, v, "per_saga", "chained_steps") != tt.chained || get(t, v, "per_saga", "messages") != tt.messages {
			t.Errorf("%v: requests %v", tt.args, get(t, v, "per_saga"))
		}
		// Without chains, each action step is a message: its read.
		if get(t, v, "unchained", "messages") != steps || get(t, v, "unchained", "read_units") != steps || get(t, v, "unchained", "requests", "dynamodb_writes") != tt.transitions {
			t.Errorf("%v: unchained %v", tt.args, get(t, v, "unchained"))
		}
		chained := 0.0
		for _, r := range get(t, v, "steps").([]any) {
			if get(t, r, "chained") == true {
				chained++
			} else if get(t, r, "why") == "" {
				t.Errorf("%v: step %v neither chained nor said why", tt.args, r)
			}
		}
		if chained != tt.chained {
			t.Errorf("%v: %v steps chained, want %v", tt.args, chained, tt.chained)
		}
		// Per million action steps: --steps-per-month is 3 million.
		if m, s := get(t, v, "usd_per_million_action_steps").(float64), get(t, v, "usd_per_month", "total").(float64); math.Abs(3*m-s) > 1e-9 {
			t.Errorf("%v: $%v per million action steps, $%v for 3 million", tt.args, m, s)
		}
		// The writes' dollars are the units at $0.625 per million.
		perSaga, perMonth := get(t, v, "usd_per_saga"), get(t, v, "usd_per_month")
		if w := get(t, perSaga, "dynamodb_writes").(float64); math.Abs(w-(tt.table+tt.index)*0.625/1e6) > 1e-15 {
			t.Errorf("%v: dynamodb_writes $%v per saga", tt.args, w)
		}
		n := get(t, v, "sagas_per_month").(float64)
		if m, s := get(t, perMonth, "total").(float64), get(t, perSaga, "total").(float64); math.Abs(m-s*n) > 1e-9 {
			t.Errorf("%v: total per month %v, per saga %v x %v", tt.args, m, s, n)
		}
		cmps := get(t, v, "comparisons").([]any)
		var names []string
		for _, c := range cmps {
			names = append(names, get(t, c, "name").(string))
			total := get(t, c, "usd_per_saga").(float64)
			parts := get(t, c, "orchestration_usd_per_saga").(float64) + get(t, c, "lambda_usd_per_saga").(float64)
			if math.Abs(total-parts) > 1e-15 || math.Abs(get(t, c, "usd_per_month").(float64)-total*n) > 1e-9 {
				t.Errorf("%v: comparison %v", tt.args, c)
			}
		}
		// Chains cost less: the same without any.
		u, c := get(t, v, "unchained", "usd_per_saga", "total").(float64), get(t, perSaga, "total").(float64)
		if tt.chained == 0 && u != c || tt.chained > 0 && u <= c {
			t.Errorf("%v: $%v per saga without chains, $%v with", tt.args, u, c)
		}
		if strings.Join(names, ",") != "step_functions_standard,step_functions_express,lambda_durable_functions" {
			t.Errorf("comparisons %v", names)
		}
		// Standard bills a transition per step entered: 6 on the order's
		// path, 5 steps and 2 compensations when ship fails.
		want := 6.0
		if slices.Contains(tt.args, "--fail") {
			want = 7
		}
		if get(t, cmps[0], "billed_units") != want {
			t.Errorf("%v: standard billed %v transitions, want %v", tt.args, get(t, cmps[0], "billed_units"), want)
		}
	}
}
