package ddbmeter_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/lambdasaga/lambdasaga/internal/accounting"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/ddbmeter"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

func str(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// expectedIndexWrites is the by_status index's share of one saga write,
// from the statuses alone (docs/PROTOCOL.md, "What each write bills"): a
// create puts a new entry (1 write), a status change moves it (a delete and
// a put, 2), and a transition that keeps the status leaves it as it was (0).
func expectedIndexWrites(before, after map[string]types.AttributeValue) float64 {
	switch {
	case before == nil:
		return 1
	case str(before, "st") != str(after, "st"):
		return 2
	}
	return 0
}

// TestWireMeterAgreesWithMiddleware runs the order saga and a 10-step
// saga through sagactl run with its DynamoDB endpoint on the meter, and
// the accounting middleware on sagactl's clients: the two bill the same,
// operation by operation, and each saga write bills what the rule says.
func TestWireMeterAgreesWithMiddleware(t *testing.T) {
	t.Parallel()
	dynamoDB := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	sqs := awslocal.Endpoint(t, awslocal.EnvSQS)
	dir := t.TempDir()
	linear := filepath.Join(dir, "linear.yaml")
	if err := os.WriteFile(linear, []byte(sagatest.LinearSaga(10)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, file, input string
		fail              string  // a step to fail for good (sagactl run --fail); empty: none
		code              int     // sagactl run's exit code
		writes            int     // the saga's transitions: its start, then one per action step or compensation
		billed            float64 // write units billed on the saga's item, table and index
	}{
		{"order", "../../examples/order/order.yaml", "@../../examples/order/testdata/ok.json", "", sagactl.ExitOK, 4, 7},
		{"linear-10", linear, "{}", "", sagactl.ExitOK, 11, 14},
		// The path sagactl cost prices at 6 table and 5 index units: two
		// status changes (to compensating, to compensated), each moving the entry.
		{"order-fail-ship", "../../examples/order/order.yaml", "@../../examples/order/testdata/ok.json", "ship", sagactl.ExitCompensated, 6, 11},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			meter, err := ddbmeter.New(ddbmeter.Config{Backend: dynamoDB})
			if err != nil {
				t.Fatal(err)
			}
			proxy := httptest.NewServer(meter)
			defer proxy.Close()
			counter := accounting.New()
			var r [6]byte
			_, _ = rand.Read(r[:])
			table := "m-" + hex.EncodeToString(r[:])
			var out, errs bytes.Buffer
			args := []string{"run", c.file, "--input", c.input, "--id", "meter-" + c.name,
				"--dynamodb-endpoint", proxy.URL, "--sqs-endpoint", sqs, "--table", table, "--queue-prefix", table + "-"}
			if c.fail != "" {
				args = append(args, "--fail", c.fail)
			}
			code := sagactl.Main(args, sagactl.Config{Stdout: &out, Stderr: &errs, APIOptions: []func(*middleware.Stack) error{counter.Register}})
			if code != c.code {
				t.Fatalf("sagactl run: exit %d\n%s%s", code, out.String(), errs.String())
			}

			// Operation by operation, the two meters agree, and bill every call.
			mid, wire := counter.Snapshot(), meter.Snapshot()
			for _, op := range slices.Sorted(maps.Keys(wire)) {
				w, m := wire[op], mid[op]
				if op == "DynamoDB.Query" && m.Errors > w.Errors {
					// The run's end cancels its pollers' queries of what is
					// due: one cancelled before it was sent is a failed call
					// to the middleware only; one cancelled while its answer
					// came back, an answered (billed) call to the wire and a
					// failed one to the middleware. Bounds, then.
					if w.Calls > m.Calls || m.Calls-m.Errors > w.Calls || m.BilledReadUnits > w.BilledReadUnits || w.Unbilled != 0 || m.Unbilled != 0 {
						t.Errorf("%s: wire %+v, middleware %+v", op, w, m)
					}
					continue
				}
				if w.Calls != m.Calls || w.Errors != m.Errors || w.BilledReadUnits != m.BilledReadUnits ||
					w.BilledWriteUnits != m.BilledWriteUnits || w.BilledIndexWriteUnits != m.BilledIndexWriteUnits ||
					w.BilledIndexes["by_status"] != m.BilledIndexes["by_status"] || w.Unbilled != 0 || m.Unbilled != 0 {
					t.Errorf("%s: wire %+v, middleware %+v", op, w, m)
				}
				t.Logf("%-22s %2d calls  billed %4.1f RRU  %4.1f WRU (index %4.1f)", op, w.Calls, w.BilledReadUnits, w.BilledWriteUnits, w.BilledIndexWriteUnits)
			}
			for op := range mid {
				if _, ok := wire[op]; !ok && strings.HasPrefix(op, "DynamoDB.") {
					t.Errorf("%s: seen by the middleware only", op)
				}
			}

			// Each saga write bills 1 unit on the table (its item is under
			// 1 KB) and on the index what the rule says.
			var sagaWrites int
			var table1, index float64
			for _, w := range meter.Writes() {
				if w.Op == "GetItem" || w.Op == "Query" || w.Op == "Scan" {
					continue
				}
				it := w.After
				if it == nil {
					it = w.Before
				}
				if !strings.HasPrefix(str(it, "pk"), "SAGA#") {
					if w.Bill.IndexUnits() != 0 {
						t.Errorf("a definition write billed %v index units; definitions are not indexed", w.Bill.IndexUnits())
					}
					continue
				}
				sagaWrites++
				if size := max(accounting.ItemSize(w.Before), accounting.ItemSize(w.After)); size > 1024 {
					t.Fatalf("a saga item of %d bytes: the expectation assumes items under 1 KB", size)
				}
				want := expectedIndexWrites(w.Before, w.After)
				if w.Op != "PutItem" || w.ConditionFailed || w.Bill.WriteUnits != 1 || w.Bill.IndexUnits() != want || w.Bill.IndexWriteUnits["by_status"] != want {
					t.Errorf("saga write %s -> %s: %s %+v, want 1 table unit and %v on by_status", str(w.Before, "st"), str(w.After, "st"), w.Op, w.Bill, want)
				}
				table1 += w.Bill.WriteUnits
				index += w.Bill.IndexUnits()
			}
			if sagaWrites != c.writes {
				t.Fatalf("%d saga writes, want %d", sagaWrites, c.writes)
			}
			if table1+index != c.billed {
				t.Errorf("the saga's item billed %.0f write units, want %.0f", table1+index, c.billed)
			}
			t.Logf("%s: %d saga writes billed %.0f WRU: %.0f on the table, %.0f on by_status", c.name, sagaWrites, table1+index, table1, index)
		})
	}
}
