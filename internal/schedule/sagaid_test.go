package schedule_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/schedule"
	"github.com/lambdasaga/lambdasaga/internal/startqueue"
)

// deliver does what EventBridge Scheduler does to a target's Input when
// the schedule fires: the scheduled time, written as its User Guide's
// example shows (2022-03-22T18:59:43Z), replaces the context attribute.
func deliver(input string, scheduled time.Time) string {
	u := scheduled.UTC()
	at := fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02dZ", u.Year(), u.Month(), u.Day(), u.Hour(), u.Minute(), u.Second())
	return strings.ReplaceAll(input, "<aws.scheduler.scheduled-time>", at)
}

type startRequest struct {
	Start struct {
		Saga  string         `json:"saga"`
		ID    string         `json:"id"`
		Input map[string]any `json:"input"`
	} `json:"start"`
}

// TestSagaIDIsWhatSchedulerSubstitutes: the id in a delivered request is
// SagaID's, for the User Guide's example time written in any zone.
func TestSagaIDIsWhatSchedulerSubstitutes(t *testing.T) {
	t.Parallel()
	paris, _ := time.LoadLocation("Europe/Paris")
	scheduled := time.Date(2022, 3, 22, 19, 59, 43, 0, paris) // 18:59:43 UTC
	id, err := schedule.SagaID("report-", scheduled)
	if err != nil || id != "report-2022-03-22T18:59:43Z" {
		t.Fatalf("SagaID = %q, %v", id, err)
	}
	input, err := schedule.Request("report", "report-", json.RawMessage(`{ "region": "eu", "top": 10 }`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"start":{"saga":"report","id":"report-<aws.scheduler.scheduled-time>","input":{"region":"eu","top":10}}}`
	if input != want {
		t.Fatalf("Request:\n got %s\nwant %s", input, want)
	}
	var req startRequest
	if err := json.Unmarshal([]byte(deliver(input, scheduled)), &req); err != nil {
		t.Fatal(err)
	}
	if req.Start.ID != id || req.Start.Saga != "report" || req.Start.Input["region"] != "eu" || !durable.ValidSagaID(req.Start.ID) {
		t.Fatalf("delivered %+v, want id %s", req, id)
	}
	// And the start queue reads it so.
	got, err := startqueue.Parse([]byte(deliver(input, scheduled)))
	if err != nil || got.Kind() != "start" || got.Start.Saga != "report" || got.SagaID() != id || string(got.Start.Input) != `{"region":"eu","top":10}` {
		t.Fatalf("startqueue.Parse: %+v, %v", got, err)
	}
}

// TestSameScheduledTimeSameID: every delivery of one firing carries one
// id (a fraction of a second does not show), and each firing of a
// schedule another.
func TestSameScheduledTimeSameID(t *testing.T) {
	t.Parallel()
	s, err := schedule.Parse("rate(1 minute)", schedule.Options{Start: created.Add(123 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	input, err := schedule.Request("report", "report-", nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]time.Time{}
	for _, at := range s.Next(created.Add(-time.Second), 200) {
		first, _ := schedule.SagaID("report-", at)
		again, _ := schedule.SagaID("report-", at.In(time.FixedZone("x", 3600)).Add(999*time.Millisecond))
		var d1, d2 startRequest
		_ = json.Unmarshal([]byte(deliver(input, at)), &d1)
		_ = json.Unmarshal([]byte(deliver(input, at)), &d2)
		if first != again || d1.Start.ID != first || d2.Start.ID != first {
			t.Fatalf("%s: ids %q, %q, delivered %q and %q", at, first, again, d1.Start.ID, d2.Start.ID)
		}
		if prev, dup := seen[first]; dup {
			t.Fatalf("%s and %s share id %s", prev, at, first)
		}
		seen[first] = at
	}
}

// TestIDPrefixLimits: a prefix is what can begin a saga id, short enough
// for the time after it.
func TestIDPrefixLimits(t *testing.T) {
	t.Parallel()
	at := time.Date(2199, 12, 31, 23, 59, 0, 0, time.UTC)
	for _, tt := range []struct {
		prefix string
		ok     bool
	}{
		{"report-", true},
		{"r", true},
		{"nightly.report:eu_1-", true},
		{strings.Repeat("p", schedule.MaxIDPrefixLen), true},
		{strings.Repeat("p", schedule.MaxIDPrefixLen+1), false},
		{"", false},
		{"-report", false},
		{"report/", false},
		{"rapport-été-", false},
		{"report <x>", false},
	} {
		err := schedule.CheckIDPrefix(tt.prefix)
		id, idErr := schedule.SagaID(tt.prefix, at)
		_, reqErr := schedule.Request("report", tt.prefix, nil)
		if (err == nil) != tt.ok || (idErr == nil) != tt.ok || (reqErr == nil) != tt.ok {
			t.Errorf("%q: CheckIDPrefix %v, SagaID %v, Request %v; want ok %v", tt.prefix, err, idErr, reqErr, tt.ok)
		}
		if tt.ok && (!durable.ValidSagaID(id) || len(id) > 128) {
			t.Errorf("%q: id %q is not a saga id", tt.prefix, id)
		}
	}
}

// TestRequestRefusesWhatCannotStart: a saga name no definition can have
// and an input that is not a JSON object are refused.
func TestRequestRefusesWhatCannotStart(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		saga, input, want string
	}{
		{"", `{}`, "saga name"},
		{"1report", `{}`, "saga name"},
		{`rep"ort`, `{}`, "saga name"},
		{strings.Repeat("r", 81), `{}`, "saga name"},
		{"report", `[]`, "input: not a JSON object"},
		{"report", `null`, "input: not a JSON object"},
		{"report", `"x"`, "input: not a JSON object"},
		{"report", `{"a":`, "input: not a JSON object"},
		{"report", `{} {}`, "input: not a JSON object"},
	} {
		_, err := schedule.Request(tt.saga, "report-", json.RawMessage(tt.input))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Request(%q, %s) = %v, want %q", tt.saga, tt.input, err, tt.want)
		}
	}
	got, err := schedule.Request("report", "report-", json.RawMessage(" \n"))
	if err != nil || !strings.HasSuffix(got, `"input":{}}}`) {
		t.Errorf("an empty input is {}: %s, %v", got, err)
	}
	got, _ = schedule.Request("report", "report-", json.RawMessage(`{"html":"<b>&</b>"}`))
	if !strings.Contains(got, `"<b>&</b>"`) {
		t.Errorf("the input is kept as written, not HTML-escaped: %s", got)
	}
}
