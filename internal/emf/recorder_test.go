package emf_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/emf"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

type doc struct {
	AWS struct {
		Timestamp         int64
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []struct{ Name, Unit string }
		}
	} `json:"_aws"`
	SagaName, Step string
	StepCompleted  *int
	StepDuration   []float64
}

// A batch of many steps, one of them with more than 100 durations: each
// step gets its own line (its dimension values are members of the line's
// root), and the durations beyond the first 100 go to further lines, as
// the specification allows at most 100 values a metric in one line.
func TestFlushSplitsStepsAndDurations(t *testing.T) {
	var out bytes.Buffer
	rec := emf.New(emf.Config{Out: &out, Function: "f", Now: func() time.Time { return time.UnixMilli(1_000) }})
	ev := func(sagaID, step string, version uint64, took time.Duration) engine.StepEvent {
		return engine.StepEvent{SagaID: sagaID, SagaName: "bulk", Version: version, Status: durable.StatusRunning, Duration: took,
			StepRecord: saga.StepRecord{Step: step, Kind: lang.KindAction, Outcome: saga.OutcomeCompleted, Attempt: 1}}
	}
	for i := range 250 {
		rec.OnStep(ev(fmt.Sprintf("s-%d", i), "hot", 3, time.Duration(i+1)*time.Millisecond))
	}
	for i := range 120 {
		rec.OnStep(ev(fmt.Sprintf("t-%d", i), fmt.Sprintf("step-%03d", i), 3, time.Millisecond))
	}
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1+3+120 { // the function; hot in three lines (100, 100, 50); one line a step
		t.Fatalf("%d lines, want 124", len(lines))
	}
	var durations []float64
	for i, l := range lines[1:4] {
		var d doc
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatal(err)
		}
		if d.Step != "hot" || len(d.StepDuration) != []int{100, 100, 50}[i] || (d.StepCompleted != nil) != (i == 0) {
			t.Fatalf("line %d: %s", i+1, l)
		}
		if n := len(d.AWS.CloudWatchMetrics[0].Metrics); n != []int{2, 1, 1}[i] {
			t.Fatalf("line %d names %d metrics: %s", i+1, n, l)
		}
		durations = append(durations, d.StepDuration...)
	}
	for i, v := range durations {
		if v != float64(i+1) {
			t.Fatalf("duration %d is %v, want %d: each value written once, in order", i, v, i+1)
		}
	}
	var last doc
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Step != "step-119" || *last.StepCompleted != 1 {
		t.Fatalf("%s: %v", lines[len(lines)-1], err)
	}
	// A flush starts over: the next one has the function's line alone.
	out.Reset()
	if err := rec.Flush(); err != nil || strings.Count(out.String(), "\n") != 1 || !strings.Contains(out.String(), `"RecordsHandled":0`) {
		t.Fatalf("second flush: %q %v", out.String(), err)
	}
}

// A saga's outcome is counted once per transition, whatever the number of
// its step events; a compensation is its step's id and "/compensate".
func TestSagaOutcomesOncePerTransition(t *testing.T) {
	var out bytes.Buffer
	rec := emf.New(emf.Config{Out: &out, Function: "f", Now: func() time.Time { return time.UnixMilli(1_000) }})
	for _, step := range []string{"charge", "check", "done"} {
		rec.OnStep(engine.StepEvent{SagaID: "o-1", SagaName: "order", Version: 2, Status: durable.StatusSucceeded,
			StepRecord: saga.StepRecord{Step: step, Kind: lang.KindAction, Outcome: saga.OutcomeCompleted}})
	}
	rec.OnStep(engine.StepEvent{SagaID: "o-2", SagaName: "order", Version: 5, Status: durable.StatusCompensationFailed,
		StepRecord: saga.StepRecord{Step: "reserve", Kind: lang.KindAction, Outcome: saga.OutcomeCompensationFailed, Compensation: true}})
	rec.OnStep(engine.StepEvent{SagaID: "o-3", SagaName: "order", Version: 4, Status: durable.StatusHeld,
		StepRecord: saga.StepRecord{Step: "charge", Kind: lang.KindAction, Outcome: saga.OutcomeFailed}})
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{
		`"SagaName":"order","SagasStarted":1,"SagasSucceeded":1,"SagasParked":1,"SagasHeld":1}`,
		`"SagaName":"order","Step":"charge","StepCompleted":1,"StepFailed":1}`,
		`"SagaName":"order","Step":"check","StepCompleted":1}`,
		`"SagaName":"order","Step":"done","StepCompleted":1}`,
		`"SagaName":"order","Step":"reserve/compensate","StepFailed":1}`,
	}
	if len(lines) != 1+len(want) {
		t.Fatalf("lines:\n%s", out.String())
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i+1], w) {
			t.Errorf("line %d: %s\nwant it to end %s", i+2, lines[i+1], w)
		}
	}
}

// Names reach the line as valid JSON whatever they hold.
func TestWriteSweepEscapes(t *testing.T) {
	var out bytes.Buffer
	if err := emf.WriteSweep(&out, "fn \"quoted\"\n\xff", time.UnixMilli(7), &engine.SweepResult{Checked: 3, Resent: 2, LeftForOperator: 1}); err != nil {
		t.Fatal(err)
	}
	var d struct {
		Function                                        string
		SweepChecked, SweepResent, SagasLeftForOperator int
	}
	if err := json.Unmarshal(out.Bytes(), &d); err != nil || d.Function != "fn \"quoted\"\n\uFFFD" || d.SweepChecked != 3 || d.SweepResent != 2 || d.SagasLeftForOperator != 1 {
		t.Fatalf("%s: %+v %v", out.String(), d, err)
	}
}
