package sagactl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/bulk"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// bulkRig is a coordinator on memory with n running sagas of "ship",
// and a Config whose output it keeps.
type bulkRig struct {
	coord       *engine.Coordinator
	c           *Config
	out, errOut bytes.Buffer
}

func newBulkRig(t *testing.T, n int) *bulkRig {
	t.Helper()
	r := &bulkRig{}
	r.c = &Config{Name: "sagactl", Stdout: &r.out, Stderr: &r.errOut}
	var err error
	if r.coord, err = engine.NewCoordinator(engine.CoordinatorConfig{Store: memstore.New(), Queue: memqueue.New(memqueue.Config{}), Actions: engine.NewRegistry()}); err != nil {
		t.Fatal(err)
	}
	plan, err := saga.Compile("ship.yaml", []byte("saga: ship\nsteps:\n  - {id: pack, action: box.pack}\n"), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: fmt.Sprintf("ship-%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *bulkRig) run(ctx context.Context, p bulk.Params) (*bulk.Result, error) {
	return bulk.Run(ctx, r.coord, p)
}

// cancelled counts the sagas whose cancel was requested.
func (r *bulkRig) cancelled(t *testing.T) int {
	t.Helper()
	res, err := r.coord.List(context.Background(), &durable.SagaListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range res.Sagas {
		st, err := r.coord.Get(context.Background(), s.SagaID)
		if err != nil {
			t.Fatal(err)
		}
		if st.CancelRequested {
			n++
		}
	}
	return n
}

func cancelParams() bulk.Params {
	v, _ := bulk.VerbNamed("cancel")
	return bulk.Params{Verb: v, Name: "ship", PageSize: 5}
}

// Without --yes and without a terminal, a bulk cancel says what matches
// and refuses; it acts on nothing.
func TestBulkRefusesWithoutConfirmation(t *testing.T) {
	t.Parallel()
	r := newBulkRig(t, 12)
	notATerminal, err := os.Create(filepath.Join(t.TempDir(), "stdin"))
	if err != nil {
		t.Fatal(err)
	}
	defer notATerminal.Close()
	r.c.Stdin = notATerminal
	if code := r.c.bulk(context.Background(), r.run, cancelParams(), false, false); code != ExitUsage {
		t.Fatalf("exit %d, want %d", code, ExitUsage)
	}
	if got := r.errOut.String(); !strings.Contains(got, "12 sagas match: ship-11 ship-10") || !strings.Contains(got, "and 2 more") || !strings.Contains(got, "stdin is not a terminal: give --yes") {
		t.Errorf("stderr:\n%s", got)
	}
	if n := r.cancelled(t); n != 0 {
		t.Errorf("%d cancelled without a confirmation", n)
	}
}

// On a terminal, the count is confirmed first: "yes" acts on every match,
// with a progress line a page; anything else acts on none.
func TestBulkAsksAndActs(t *testing.T) {
	t.Parallel()
	r := newBulkRig(t, 7)
	r.c.Stdin = strings.NewReader("no\n")
	if code := r.c.bulk(context.Background(), r.run, cancelParams(), false, false); code != ExitUsage || r.cancelled(t) != 0 || !strings.Contains(r.errOut.String(), "not confirmed: nothing done") {
		t.Fatalf("answered no: exit %d, %d cancelled\n%s", code, r.cancelled(t), r.errOut.String())
	}
	r.errOut.Reset()
	r.c.Stdin = strings.NewReader("yes\n")
	if code := r.c.bulk(context.Background(), r.run, cancelParams(), false, false); code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, r.out.String(), r.errOut.String())
	}
	if n := r.cancelled(t); n != 7 {
		t.Errorf("%d cancelled, want 7", n)
	}
	for _, want := range []string{"cancel these 7 sagas? Type yes", "cancel: 5 of 7 (page 1 of running, 5 read): 5 acted", "cancel: 7 of 7 (page 2 of running, 7 read): 7 acted"} {
		if !strings.Contains(r.errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.errOut.String())
		}
	}
	if got := r.out.String(); got != "cancel: 7 acted, 0 skipped, 0 failed (7 matched, 7 read)\n" {
		t.Errorf("summary %q", got)
	}
	// Again, with --yes and --json: every one is skipped, with the reason.
	r.out.Reset()
	if code := r.c.bulk(context.Background(), r.run, cancelParams(), true, true); code != ExitOK {
		t.Fatalf("again: exit %d", code)
	}
	var rep struct {
		Acted   int            `json:"acted"`
		Skipped []bulk.Outcome `json:"skipped"`
		Failed  []bulk.Outcome `json:"failed"`
	}
	if err := json.Unmarshal(r.out.Bytes(), &rep); err != nil || rep.Acted != 0 || len(rep.Skipped) != 7 || rep.Skipped[0].Reason != "cancel already requested" || rep.Failed == nil {
		t.Errorf("again: %+v %v\n%s", rep, err, r.out.String())
	}
}

// A dry run lists every match and acts on none, asking nothing.
func TestBulkDryRun(t *testing.T) {
	t.Parallel()
	r := newBulkRig(t, 3)
	p := cancelParams()
	p.DryRun = true
	if code := r.c.bulk(context.Background(), r.run, p, false, false); code != ExitOK {
		t.Fatalf("exit %d\n%s", code, r.errOut.String())
	}
	if got, want := r.out.String(), "cancel would act on 3 sagas (3 read), acting on none:\n  ship-02\n  ship-01\n  ship-00\n"; got != want {
		t.Errorf("dry run printed %q, want %q", got, want)
	}
	if r.cancelled(t) != 0 || r.errOut.Len() != 0 {
		t.Errorf("a dry run acted, or wrote %q", r.errOut.String())
	}
}

// A saga that fails is reported, and the exit code says so.
func TestBulkExitsNonZeroOnAFailure(t *testing.T) {
	t.Parallel()
	r := newBulkRig(t, 2)
	run := func(ctx context.Context, p bulk.Params) (*bulk.Result, error) {
		return bulk.Run(ctx, failOne{r.coord}, p)
	}
	if code := r.c.bulk(context.Background(), run, cancelParams(), true, false); code != ExitUsage {
		t.Fatalf("exit %d, want %d", code, ExitUsage)
	}
	if got := r.out.String(); !strings.Contains(got, "1 acted, 0 skipped, 1 failed") || !strings.Contains(got, "failed ship-01: throttled") {
		t.Errorf("summary:\n%s", got)
	}
}

type failOne struct{ *engine.Coordinator }

func (f failOne) Cancel(ctx context.Context, id string) (*saga.State, error) {
	if id == "ship-01" {
		return nil, durable.ErrThrottled
	}
	return f.Coordinator.Cancel(ctx, id)
}

// The filter forms are told from the single-id ones, and what is unsafe
// or ambiguous is refused before any stack is opened.
func TestBulkUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		bulk bool
	}{
		{[]string{"o-1"}, false},
		{[]string{"o-1", "--json"}, false},
		{[]string{"--name", "order"}, true},
		{[]string{"--status=running"}, true},
		{[]string{"-dry-run"}, true},
		{[]string{"--", "--name"}, false},
	} {
		if got := isBulk(c.args); got != c.bulk {
			t.Errorf("isBulk(%q) = %v", c.args, got)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cancel", "o-1", "--name", "order"}, "give a saga id or a filter"},
		{[]string{"cancel", "--status", "compensation_failed"}, "cancel acts on sagas running, waiting or held, not compensation_failed"},
		{[]string{"resume", "--status", "running"}, "resume acts on sagas compensation_failed, not running"},
		{[]string{"cancel", "--since", "1h"}, "too broad"},
		{[]string{"resume", "--name", "order", "--skip"}, "--skip skips one saga's failed compensation"},
		{[]string{"cancel", "--name", "order", "--dry-run", "--yes"}, "drop --yes"},
	} {
		var out, errOut bytes.Buffer
		code := Main(c.args, Config{Stdout: &out, Stderr: &errOut})
		if code != ExitUsage || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%q: exit %d, %q; want %q", c.args, code, errOut.String(), c.want)
		}
	}
}
