package sagactl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/smithy-go/middleware"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/accounting"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

// listOut is list's --json output.
type listOut struct {
	Sagas      []listedOut `json:"sagas"`
	NextCursor string      `json:"next_cursor"`
	Read       int         `json:"read"`
}

// listedOut is one saga of list's --json output.
type listedOut struct {
	SagaID      string    `json:"saga_id"`
	Saga        string    `json:"saga"`
	Status      string    `json:"status"`
	StatusSince time.Time `json:"status_since"`
}

func (l listOut) ids() []string {
	var ids []string
	for _, s := range l.Sagas {
		ids = append(ids, s.SagaID)
	}
	return ids
}

func decodeList(t *testing.T, r result) listOut {
	t.Helper()
	var l listOut
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || r.code != sagactl.ExitOK {
		t.Fatalf("list: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	return l
}

// Sagas that `sagactl run --dynamodb-endpoint URL --sqs-endpoint URL` left
// on the emulators (waiting on a signal, on a callback, parked) are
// listed, inspected and acted on afterwards with the same endpoint flags:
// list (filters, pages), status, signal, cancel, callback, resume, sweep.
func TestCommandsOnWhatRunLeftOnEmulators(t *testing.T) {
	t.Parallel()
	dyn := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	sq := awslocal.Endpoint(t, awslocal.EnvSQS)
	table := uniqueName("t-")
	where := []string{"--dynamodb-endpoint", dyn, "--sqs-endpoint", sq, "--table", table, "--queue-prefix", table + "-"}
	cmd := func(reg *engine.Registry, args ...string) result {
		return runSagactl(t, reg, append(args, where...)...)
	}

	// The charge's action starts the payment and leaves the token to a
	// webhook that never comes: the saga waits on its callback.
	pending := engine.NewRegistry()
	pending.MustRegister("payments.charge_async", func(ctx context.Context, c saga.Call) (any, error) { return map[string]any{"started": true}, nil })
	// The expense's actions return a claim id, as the saga needs.
	claims := engine.NewRegistry()
	claims.MustRegister("expenses.file", func(ctx context.Context, c saga.Call) (any, error) {
		return map[string]any{"id": "claim-" + c.SagaID}, nil
	})
	runs := []struct {
		reg  *engine.Registry
		args []string
		code int
		want string
	}{
		{claims, []string{"run", expenseFile, "--input", `{"amount": 12}`, "--id", "e-1", "--timeout", "5s"}, sagactl.ExitStillRunning, "saga e-1 still running at --timeout 5s; it stays in table " + table},
		{pending, []string{"run", chargeFile, "--input", `{"amount": 700}`, "--id", "c-1", "--timeout", "5s"}, sagactl.ExitStillRunning, "sagactl status c-1 --dynamodb-endpoint " + dyn},
		{nil, []string{"run", chargeFile, "--input", `{"amount": 5}`, "--id", "p-1", "--fail", "ship", "--fail", "charge.compensate"}, sagactl.ExitCompensationFailed, ""},
		{claims, []string{"run", expenseFile, "--input", `{"amount": 3}`, "--id", "s-1", "--signal", `approved={"by": "ann"}`}, sagactl.ExitOK, ""},
	}
	for _, run := range runs {
		r := cmd(run.reg, run.args...)
		if r.code != run.code || !strings.Contains(r.stderr, run.want) {
			t.Fatalf("%v: exit %d, want %d and %q\n%s%s", run.args, r.code, run.code, run.want, r.stdout, r.stderr)
		}
	}

	r := cmd(nil, "list")
	if r.code != sagactl.ExitOK || !strings.HasPrefix(r.stdout, "ID   NAME     STATUS               SINCE") || strings.Count(r.stdout, "\n") != 5 {
		t.Fatalf("list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, row := range []string{"e-1  expense  waiting ", "c-1  charge   waiting ", "p-1  charge   compensation_failed ", "s-1  expense  succeeded "} {
		if !strings.Contains(r.stdout, row) {
			t.Errorf("list lacks the row %q:\n%s", row, r.stdout)
		}
	}
	all := decodeList(t, cmd(nil, "list", "--json"))
	if got := all.ids(); len(got) != 4 || !slices.IsSortedFunc(all.Sagas, func(a, b listedOut) int { return b.StatusSince.Compare(a.StatusSince) }) || all.NextCursor != "" {
		t.Fatalf("list --json: %+v, want the 4 sagas, newest status first, and no cursor", all)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--status", "waiting"}, []string{"c-1", "e-1"}},
		{[]string{"--name", "charge"}, []string{"c-1", "p-1"}},
		{[]string{"--name", "charge", "--status", "compensation_failed"}, []string{"p-1"}},
		{[]string{"--since", "1h"}, []string{"c-1", "e-1", "p-1", "s-1"}},
		{[]string{"--since", "1ms"}, nil},
		{[]string{"--name", "nobody"}, nil},
	} {
		l := decodeList(t, cmd(nil, append([]string{"list", "--json"}, tc.args...)...))
		got := l.ids()
		slices.Sort(got)
		if !slices.Equal(got, tc.want) || l.NextCursor != "" {
			t.Errorf("list %v: %v (cursor %q), want %v", tc.args, got, l.NextCursor, tc.want)
		}
	}
	// Pages of one: each gives a cursor to the next, and together they are
	// the listing, in its order.
	var paged []string
	args := []string{"list", "--json", "--limit", "1"}
	for range 5 {
		l := decodeList(t, cmd(nil, args...))
		paged = append(paged, l.ids()...)
		if l.NextCursor == "" {
			break
		}
		args = []string{"list", "--json", "--limit", "1", "--cursor", l.NextCursor}
	}
	if !slices.Equal(paged, all.ids()) {
		t.Fatalf("pages of one: %v, want %v", paged, all.ids())
	}
	if r := cmd(nil, "list", "--limit", "3"); r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "more: the same list with --cursor ") {
		t.Fatalf("list --limit 3: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Act on each as left.
	r = cmd(nil, "status", "e-1")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "saga e-1 (expense): waiting") || !strings.Contains(r.stdout, "paused: await signal approved (step approval)") {
		t.Fatalf("status e-1: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cmd(nil, "signal", "e-1", "approved", "--payload", `{"by": "bob"}`)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "signal approved to saga e-1: applied") || !strings.Contains(r.stdout, "waiting on: pay (attempt 1)") {
		t.Fatalf("signal e-1: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cmd(nil, "cancel", "e-1")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "cancel requested: compensates once pay has an outcome") {
		t.Fatalf("cancel e-1: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var st struct {
		Status string
		Pause  struct{ Kind, Token string }
	}
	if r := cmd(nil, "status", "c-1", "--json"); json.Unmarshal([]byte(r.stdout), &st) != nil || st.Status != "waiting" || st.Pause.Kind != "callback" || st.Pause.Token == "" {
		t.Fatalf("status c-1: %+v\n%s%s", st, r.stdout, r.stderr)
	}
	r = cmd(nil, "callback", st.Pause.Token, "--output", `{"id": "pay-9"}`)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "applied") || !strings.Contains(r.stdout, "saga c-1 (charge): running") {
		t.Fatalf("callback c-1: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cmd(nil, "resume", "p-1")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "saga p-1 (charge): compensating") {
		t.Fatalf("resume p-1: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Nothing handles the messages now: the sweep sends the three
	// unfinished sagas' again.
	r = cmd(nil, "sweep", "--idle-for", "0s")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "sweep: 3 sagas in their status for 0s or more checked, 3 idle had their messages sent again") {
		t.Fatalf("sweep: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	l := decodeList(t, cmd(nil, "list", "--json", "--status", "compensating"))
	if got := l.ids(); !slices.Equal(got, []string{"p-1"}) {
		t.Fatalf("compensating after the resume: %v", got)
	}

	// What is missing is named, with where it was looked for.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "--dynamodb-endpoint", dyn, "--sqs-endpoint", sq, "--table", "nosuch"}, "--dynamodb-endpoint " + dyn + ": no table nosuch there (sagactl run --dynamodb-endpoint makes one"},
		{[]string{"status", "e-1", "--dynamodb-endpoint", dyn, "--sqs-endpoint", sq, "--table", table, "--queue-prefix", "nosuch-"}, "--sqs-endpoint " + sq + ": no queue nosuch-advance there"},
		{[]string{"status", "nobody"}, "status: saga nobody: not found"},
	} {
		args := tc.args
		if tc.args[0] == "status" && tc.args[1] == "nobody" {
			args = append(args, where...)
		}
		r := runSagactl(t, nil, args...)
		if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, want %q in:\n%s", args, r.code, tc.want, r.stderr)
		}
	}
}

// Where the sagas are is checked before anything is read: the local loop
// and the endpoints exclude each other, the endpoints go together, and an
// endpoint nothing answers is named with its flag. No emulator needed.
func TestStackFlagsAreChecked(t *testing.T) {
	t.Chdir(t.TempDir())
	down := "http://127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "--local", "--dynamodb-endpoint", down, "--sqs-endpoint", down}, "--local talks to the loop `sagactl local` runs, whose table and queues .lambdasaga/local.json names: drop --dynamodb-endpoint and --sqs-endpoint (or drop --local)"},
		{[]string{"status", "x", "--local", "--table", "t"}, "drop --table (or drop --local)"},
		{[]string{"cancel", "x", "--dynamodb-endpoint", down}, "--dynamodb-endpoint and --sqs-endpoint go together"},
		{[]string{"list", "--dynamodb-endpoint", down, "--sqs-endpoint", down}, "--dynamodb-endpoint " + down + ": nothing answers there (dial tcp 127.0.0.1:1: connect: connection refused)"},
		{[]string{"list", "--dynamodb-endpoint", down, "--sqs-endpoint", down, "--advance-queue-url", "u"}, "name the queues by --queue-prefix, or by both --advance-queue-url and --compensate-queue-url"},
		{[]string{"list"}, "say where the sagas are: --local, or --table"},
		{[]string{"list", "--table", "t", "--advance-queue-url", "a", "--compensate-queue-url", "c", "--queue-prefix", "p-"}, "--queue-prefix names the queues on the emulators"},
		{[]string{"list", "--status", "stuck", "--local"}, "list: --status stuck: not a status; one of running, waiting, compensating, held, succeeded, compensated, compensation_failed"},
		{[]string{"list", "--limit", "0", "--local"}, "list: --limit must be 1 to 10000"},
		{[]string{"list", "--limit", "10001", "--local"}, "list: --limit must be 1 to 10000"},
		{[]string{"list", "--since", "-1h", "--local"}, "list: --since must not be negative"},
		{[]string{"list", "--cursor", "e-1", "--local"}, "list: --cursor: not a cursor a listing printed"},
		{[]string{"list", "waiting", "--local"}, "list: unexpected arguments [waiting]"},
		{[]string{"pause", "--action", "a", "x", "--local"}, "pause: unexpected arguments [x]"},
		{[]string{"unpause", "--action", "a", "x", "--local"}, "unpause: unexpected arguments [x]"},
		{[]string{"pauses", "x", "--local"}, "pauses: unexpected arguments [x]"},
		{[]string{"sweep", "x", "--local"}, "sweep: unexpected arguments [x]"},
		{[]string{"console", "x", "--local"}, "console: unexpected arguments [x]"},
	} {
		t.Setenv("LAMBDASAGA_TABLE", "")
		t.Setenv("LAMBDASAGA_ADVANCE_QUEUE_URL", "")
		t.Setenv("LAMBDASAGA_COMPENSATE_QUEUE_URL", "")
		r := runSagactl(t, nil, tc.args...)
		if r.code != sagactl.ExitUsage || r.stdout != "" || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, want %q in stderr:\n%s", tc.args, r.code, r.stdout, tc.want, r.stderr)
		}
	}
}

// What a listing reads, and bills, on the emulators: 3,200 running sagas,
// one in 100 named refund. A page of a status reads what it lists; every
// status queries 192 shards, and an empty query bills half a unit; a
// --name reads every saga down to its last match.
func TestListReadCost(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	ctx := context.Background()
	const sagas = 3200
	base := time.Now().Add(-time.Hour)
	var wg sync.WaitGroup
	errs := make(chan error, sagas)
	sem := make(chan struct{}, 32)
	for i := range sagas {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			name := "order"
			if i%100 == 0 {
				name = "refund"
			}
			at := base.Add(time.Duration(i) * time.Second)
			errs <- b.Store.SagaCreate(ctx, &durable.SagaCreateParams{Record: durable.SagaRecord{SagaID: fmt.Sprintf("s-%05d", i), Version: 1,
				Status: durable.StatusRunning, Name: name, DefinitionHash: strings.Repeat("ab", 32), CreatedAt: at, StatusSince: at, UpdatedAt: at, State: []byte("x")}})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	where := []string{"--dynamodb-endpoint", b.DynamoDBEndpoint, "--sqs-endpoint", b.SQSEndpoint, "--table", b.Table, "--queue-prefix", b.Table + "-", "--json"}
	type cost struct {
		listed, read, queries int
		units                 float64
	}
	measure := func(args ...string) cost {
		t.Helper()
		counter := accounting.New()
		var out, errb strings.Builder
		code := sagactl.Main(append(append([]string{"list"}, args...), where...), sagactl.Config{Stdout: &out, Stderr: &errb, APIOptions: []func(*middleware.Stack) error{counter.Register}})
		l := decodeList(t, result{code, out.String(), errb.String()})
		q := counter.Snapshot()["DynamoDB.Query"]
		if q.Unbilled > 0 {
			t.Fatalf("%v: %d queries unbilled", args, q.Unbilled)
		}
		c := cost{len(l.Sagas), l.Read, q.Calls, q.BilledReadUnits}
		t.Logf("list %s: %d listed, %d read, %d queries, %.1f read units billed", strings.Join(args, " "), c.listed, c.read, c.queries, c.units)
		return c
	}
	page := measure("--status", "running", "--limit", "50")
	every := measure("--limit", "50")
	named := measure("--status", "running", "--name", "refund", "--limit", "10")
	all := measure("--status", "running", "--name", "refund", "--limit", "100")
	if page.listed != 50 || page.read != 50 {
		t.Errorf("a page of 50 of one status: %+v, want the 50 read listed", page)
	}
	if every.listed != 50 || every.queries < 6*32 || every.units < 6*32/2 {
		t.Errorf("a page of 50 of every status: %+v, want a query of every shard of every status, each billing at least half a unit", every)
	}
	// Newest first, the tenth refund is the thousandth saga.
	if named.listed != 10 || named.read != 1000 || named.units <= page.units {
		t.Errorf("10 of one name in a hundred: %+v, want the 1,000 sagas down to the tenth read, and billed", named)
	}
	if all.listed != 32 || all.read != sagas || all.units <= named.units {
		t.Errorf("every saga of one name: %+v, want 32 listed of all 3,200 read, and billed", all)
	}
}

// --local reaches the table and queues the local loop's state file names
// while the loop holds its lock: here a test holds it, on the emulators.
func TestListAndActOnTheLocalLoop(t *testing.T) {
	b := awstest.New(t)
	order, err := filepath.Abs(orderFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	if err := os.MkdirAll(filepath.Dir(sagactl.LocalStateFile), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(filepath.Dir(sagactl.LocalStateFile), "local.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	state, _ := json.Marshal(map[string]any{"pid": os.Getpid(), "dynamodb_endpoint": b.DynamoDBEndpoint, "sqs_endpoint": b.SQSEndpoint, "table": b.Table,
		"advance_queue_url": b.URLs[durable.QueueAdvance], "compensate_queue_url": b.URLs[durable.QueueCompensate]})
	if err := os.WriteFile(sagactl.LocalStateFile, state, 0o644); err != nil {
		t.Fatal(err)
	}
	// Nothing handles the messages: the saga stays running, at reserve.
	if r := runSagactl(t, nil, "start", order, "--input", "@"+filepath.Join(filepath.Dir(order), "testdata/ok.json"), "--id", "o-1", "--local"); r.code != sagactl.ExitOK {
		t.Fatalf("start --local: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	l := decodeList(t, runSagactl(t, nil, "list", "--local", "--json"))
	if got := l.ids(); !slices.Equal(got, []string{"o-1"}) || l.Sagas[0].Status != "running" || l.Sagas[0].Saga != "order" {
		t.Fatalf("list --local: %+v", l)
	}
	r := runSagactl(t, nil, "cancel", "o-1", "--local")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "cancel requested: compensates once reserve has an outcome") {
		t.Fatalf("cancel --local: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "sweep", "--idle-for", "0s", "--local")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "sweep: 1 sagas in their status for 0s or more checked, 1 idle had their messages sent again") {
		t.Fatalf("sweep --local: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
