package bench_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"

	"github.com/lambdasaga/lambdasaga/internal/engine"
)

// TestPayloadSize measures how write units and step latency grow with the
// size of a saga's variables, and that a state past the limit fails its
// step with a clear error (and compensates) instead of being written.
// Each step is a message of its own (chains off), so that each is measured:
// a chained step's write bills the same units, and it reads nothing.
func TestPayloadSize(t *testing.T) {
	b := awstest.New(t)
	plan, err := saga.Compile("linear.yaml", []byte(sagatest.LinearSaga(3)), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, kb := range []int{1, 10, 100, 250, 320} {
		reg := engine.NewRegistry()
		blob := strings.Repeat("x", kb<<10)
		reg.MustRegister("work", func(ctx context.Context, c saga.Call) (any, error) {
			if c.Step == "s0" {
				return map[string]any{"blob": blob}, nil
			}
			return map[string]any{"id": c.IdempotencyKey}, nil
		})
		reg.MustRegister("undo", func(context.Context, saga.Call) (any, error) { return nil, nil })
		coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: b.Store, Queue: b.Queue, Actions: reg, ChainSteps: -1})
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("payload-%d", kb)
		_, steps := handleAll(t, b, coord, plan, id, nil)
		st, err := coord.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if kb*1024 > saga.MaxStateBytes {
			// Over the limit: the step that would have grown the state past it
			// fails; its action did succeed, so its compensation comes first
			// (this test handles the advance queue only: it stays pending).
			cur, pending := st.Pending()
			if st.Status != durable.StatusCompensating || st.Failure == nil || st.Failure.Type != lang.ErrorTypeStateTooLarge || !strings.Contains(st.Failure.Message, "bytes") ||
				!pending || !cur.Compensating {
				t.Fatalf("%d KB: %s %+v, want compensating with StateTooLarge, s0's compensation pending", kb, st.Status, st.Failure)
			}
			line := fmt.Sprintf("| %d KB | step s0 fails: %s: %s; the saga compensates, s0 first |", kb, st.Failure.Type, st.Failure.Message)
			t.Log(line)
			report(t, line)
			continue
		}
		if st.Status != durable.StatusSucceeded {
			t.Fatalf("%d KB: %s %+v", kb, st.Status, st.Failure)
		}
		// Steps after s0 carry the blob in their state.
		later := steps[1]
		var total time.Duration
		for _, s := range steps[1:] {
			total += s.took
		}
		line := fmt.Sprintf("| %d KB | state %d bytes | %.0f WRU and %.0f RRU per step | %s per step (Handle, mean of %d) |",
			kb, later.stateBytes, later.wru, later.rru, (total / time.Duration(len(steps)-1)).Round(100*time.Microsecond), len(steps)-1)
		t.Log(line)
		report(t, line)
		if wantWRU := float64((later.stateBytes + 1023 + 300) / 1024); later.wru < wantWRU-1 || later.wru > wantWRU+1 {
			t.Errorf("%d KB: %.0f WRU for a %d-byte state", kb, later.wru, later.stateBytes)
		}
	}
}

func report(t *testing.T, line string) {
	if out := os.Getenv("BENCH_REPORT"); out != "" {
		appendLine(t, out, line)
	}
}
