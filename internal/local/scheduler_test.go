package local

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// With Input, EventBridge sends the Input as the event, byte for byte;
// without, its scheduled event.
func TestScheduledEvent(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	in := samtemplate.Schedule{Name: "EveryMinute", Input: json.RawMessage(`{"job": "tick"}`)}
	if got := scheduledEvent(in, "SweepFunction", at); string(got) != `{"job": "tick"}` {
		t.Errorf("with Input: %s", got)
	}
	var ev events.CloudWatchEvent
	if err := json.Unmarshal(scheduledEvent(samtemplate.Schedule{Name: "Nightly"}, "ReportFunction", at), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.DetailType != "Scheduled Event" || ev.Source != "aws.events" || !ev.Time.Equal(at) || string(ev.Detail) != "{}" ||
		len(ev.Resources) != 1 || !strings.HasSuffix(ev.Resources[0], ":rule/ReportFunctionNightly") {
		t.Errorf("without Input: %+v", ev)
	}
}

// The local loop runs the enabled rate schedules, and refuses those it
// cannot run as EventBridge would rather than skip them quietly.
func TestSchedulesTheLocalLoopRuns(t *testing.T) {
	fn := samtemplate.Function{Name: "F", Schedules: []samtemplate.Schedule{
		{Name: "Tick", Expression: "rate(1 minute)", Every: time.Minute, Enabled: true},
		{Name: "Off", Expression: "rate(1 hour)", Every: time.Hour},
	}}
	e := &Env{cfg: Config{Log: io.Discard}}
	got, err := e.schedules(fn)
	if err != nil || len(got) != 1 || got[0].Name != "Tick" {
		t.Fatalf("got %+v, %v; want Tick alone", got, err)
	}
	cron := samtemplate.Function{Name: "F", Schedules: []samtemplate.Schedule{{Name: "Nightly", Expression: "cron(0 2 * * ? *)", Enabled: true}}}
	if _, err := e.schedules(cron); err == nil || !strings.Contains(err.Error(), "runs rate(...) schedules only") {
		t.Errorf("cron without ScheduleEvery: %v", err)
	}
	e.cfg.ScheduleEvery = time.Second
	if got, err := e.schedules(cron); err != nil || len(got) != 1 {
		t.Errorf("cron with ScheduleEvery: %+v, %v", got, err)
	}
	v2 := samtemplate.Function{Name: "F", Schedules: []samtemplate.Schedule{{Name: "Next", Expression: "rate(1 hour)", Every: time.Hour, Enabled: true, V2: true}}}
	if _, err := e.schedules(v2); err == nil || !strings.Contains(err.Error(), "without Input") {
		t.Errorf("ScheduleV2 without Input: %v", err)
	}
}

type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A scheduler invokes its function on its period with the schedule's
// event, logs a line per invocation with the answer, and stops when its
// context ends.
func TestSchedulerInvokesOnItsPeriod(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	rie := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"tick":{"Due":0,"Sent":0}}`))
	}))
	defer rie.Close()
	log := &lockedLog{}
	s := &scheduler{env: &Env{cfg: Config{Log: log}}, fn: samtemplate.Function{Name: "SweepFunction", Timeout: 3},
		schedule: samtemplate.Schedule{Name: "EveryMinute", Expression: "rate(1 minute)", Input: json.RawMessage(`{"job": "tick"}`)},
		every:    10 * time.Millisecond, rieURL: rie.URL}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.run(ctx); close(done) }()
	for {
		mu.Lock()
		n := len(bodies)
		mu.Unlock()
		if n >= 3 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done // run returned: it sends nothing more (invoke is synchronous)
	// A request the scheduler wrote just before it stopped may still be on
	// its way to the handler; Close waits for every handler under way, so
	// what is counted below is final.
	rie.Close()
	mu.Lock()
	defer mu.Unlock()
	stopped := len(bodies)
	if stopped < 3 {
		t.Errorf("%d invocations, want at least the 3 waited for", stopped)
	}
	for _, b := range bodies {
		if b != `{"job": "tick"}` {
			t.Errorf("invoked with %s, want the Input", b)
		}
	}
	lines := strings.Count(log.String(), `local: SweepFunction schedule EveryMinute (rate(1 minute), every 10ms): invoked with {"job": "tick"}: {"tick":{"Due":0,"Sent":0}}`)
	if lines < stopped-1 || lines > stopped {
		t.Errorf("%d log lines for %d invocations:\n%s", lines, stopped, log.String())
	}
}
