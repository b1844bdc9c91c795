package sagactl_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

// historyJSON is the part of `history --json` the tests read.
type historyJSON struct {
	SagaID  string `json:"saga_id"`
	Status  string `json:"status"`
	Dropped int    `json:"dropped"`
	Entries []struct {
		Version      int    `json:"version"`
		Cause        string `json:"cause"`
		FromOutside  bool   `json:"from_outside"`
		Status       string `json:"status"`
		Step         string `json:"step"`
		Compensation bool   `json:"compensation"`
		Outcome      string `json:"outcome"`
		Attempt      int    `json:"attempt"`
		TookMS       *int64 `json:"took_ms"`
		Error        *struct {
			Type string `json:"type"`
		} `json:"error"`
		Fork *struct {
			Seq      int    `json:"seq"`
			Children int    `json:"children"`
			ChildID  string `json:"child_id"`
		} `json:"fork"`
	} `json:"entries"`
}

// A saga run on the emulators with `sagactl run` is explained step by
// step afterwards, compensations included, in order; and so is a fork's
// child run.
func TestHistoryOnEmulators(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	emu := []string{"--dynamodb-endpoint", b.DynamoDBEndpoint, "--sqs-endpoint", b.SQSEndpoint, "--table", b.Table}
	where := append([]string{"--advance-queue-url", b.URLs[durable.QueueAdvance], "--compensate-queue-url", b.URLs[durable.QueueCompensate]}, emu...)
	r := runSagactl(t, nil, append([]string{"run", orderFile, "--input", "@../examples/order/testdata/ok.json", "--fail", "ship", "--id", "h-1",
		"--queue-prefix", b.Table + "-run-"}, emu...)...)
	if r.code != sagactl.ExitCompensated {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, append([]string{"history", "h-1", "--json"}, where...)...)
	var h historyJSON
	if err := json.Unmarshal([]byte(r.stdout), &h); r.code != sagactl.ExitOK || err != nil {
		t.Fatalf("history --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	var got []string
	for _, e := range h.Entries {
		s := e.Step + ":" + e.Outcome
		if e.Compensation {
			s = "undo " + s
		}
		got = append(got, s)
	}
	want := "reserve:started reserve:completed price:completed charge:started charge:completed check:completed ship:started " +
		"ship:failed undo charge:started undo charge:compensated undo reserve:started undo reserve:compensated"
	if strings.Join(got, " ") != want {
		t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(got, " "), want)
	}
	first, failed, last := h.Entries[0], h.Entries[7], h.Entries[len(h.Entries)-1]
	if first.Cause != "start" || first.Status != "running" || first.Version != 1 || failed.Error == nil || failed.Status != "compensating" ||
		failed.TookMS == nil || last.Status != "compensated" || h.Dropped != 0 || h.Status != "compensated" {
		t.Fatalf("entries: first %+v, ship's failure %+v, last %+v, dropped %d", first, failed, last, h.Dropped)
	}
	// The timeline.
	r = runSagactl(t, nil, append([]string{"history", "h-1"}, where...)...)
	t.Logf("sagactl history h-1:\n%s", r.stdout)
	for _, w := range []string{"saga h-1 (order): compensated", "VERSION", "CAUSE", "undo charge", "compensated", "ship ", "failed"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("history lacks %q:\n%s%s", w, r.stdout, r.stderr)
		}
	}
	// A fork's child run.
	r = runSagactl(t, nil, append([]string{"run", "../examples/travel/travel.yaml", "--input", "@../examples/travel/testdata/trip.json", "--id", "trip-h",
		"--queue-prefix", b.Table + "-run-"}, emu...)...)
	if r.code != sagactl.ExitOK {
		t.Fatalf("run travel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, append([]string{"history", "trip-h", "--json"}, where...)...)
	h = historyJSON{}
	if err := json.Unmarshal([]byte(r.stdout), &h); err != nil || len(h.Entries) == 0 || h.Entries[0].Fork == nil || h.Entries[0].Fork.Children != 3 {
		t.Fatalf("parent: %v %+v\n%s", err, h, r.stderr)
	}
	child := durable.ChildID("trip-h", "book", uint64(h.Entries[0].Fork.Seq), 1)
	r = runSagactl(t, nil, append([]string{"history", child}, where...)...)
	t.Logf("sagactl history %s:\n%s", child, r.stdout)
	for _, w := range []string{"saga " + child + " (travel): succeeded", "child 1 of trip-h's book", "flight", "completed"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("child history lacks %q:\n%s%s", w, r.stdout, r.stderr)
		}
	}
	r = runSagactl(t, nil, append([]string{"history", "nobody"}, where...)...)
	if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "history:") {
		t.Errorf("history of no saga: exit %d %s", r.code, r.stderr)
	}
}
