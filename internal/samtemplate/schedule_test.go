package samtemplate_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// The template's scheduled function ticks every minute and sweeps every 15,
// each with its job as the event.
func TestTemplateSchedules(t *testing.T) {
	tpl, err := samtemplate.Load(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	var sweep samtemplate.Function
	for _, f := range tpl.Functions {
		if f.Name == "SweepFunction" {
			sweep = f
		}
		if f.Name != "SweepFunction" && f.Scheduled() {
			t.Errorf("function %s has schedules %+v, want none", f.Name, f.Schedules)
		}
	}
	want := []struct {
		name, expr, input string
		every             time.Duration
	}{
		{"EveryMinute", "rate(1 minute)", `{"job": "tick"}`, time.Minute},
		{"Every15Minutes", "rate(15 minutes)", `{"job": "sweep"}`, 15 * time.Minute},
	}
	if len(sweep.Schedules) != len(want) {
		t.Fatalf("SweepFunction schedules %+v, want %d", sweep.Schedules, len(want))
	}
	for i, w := range want {
		got := sweep.Schedules[i]
		if got.Name != w.name || got.Expression != w.expr || got.Every != w.every || string(got.Input) != w.input || !got.Enabled || got.V2 {
			t.Errorf("schedule %d: %+v (input %s), want %s %s every %s with %s", i, got, got.Input, w.name, w.expr, w.every, w.input)
		}
	}
}

func TestScheduleEvery(t *testing.T) {
	for _, c := range []struct {
		expr  string
		every time.Duration
		err   string
	}{
		{"rate(1 minute)", time.Minute, ""},
		{"rate(15 minutes)", 15 * time.Minute, ""},
		{"rate(1 hour)", time.Hour, ""},
		{"rate(2 days)", 48 * time.Hour, ""},
		{"rate( 5  minutes )", 5 * time.Minute, ""},
		{"cron(0 12 * * ? *)", 0, ""},
		{"at(2030-01-01T00:00:00)", 0, ""},
		{"rate(1 minutes)", 0, "a value of 1 takes the singular"},
		{"rate(5 hour)", 0, "a value over 1 takes the plural"},
		{"rate(0 minutes)", 0, "not a positive whole number"},
		{"rate(-3 minutes)", 0, "not a positive whole number"},
		{"rate(1.5 hours)", 0, "not a positive whole number"},
		{"rate(10 seconds)", 0, "not minute(s), hour(s) or day(s)"},
		{"rate(5)", 0, "want rate(VALUE UNIT)"},
		{"rate(99999999999 days)", 0, "too long a period"},
		{"every 5 minutes", 0, "not a rate(...), cron(...) or at(...) expression"},
		{"", 0, "not a rate(...)"},
	} {
		got, err := samtemplate.ScheduleEvery(c.expr)
		switch {
		case c.err == "" && (err != nil || got != c.every):
			t.Errorf("ScheduleEvery(%q) = %s, %v; want %s", c.expr, got, err, c.every)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ScheduleEvery(%q) = %s, %v; want an error containing %q", c.expr, got, err, c.err)
		}
	}
}

func scheduledTemplate(events string) string {
	return `
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: fn
      Events:
` + events
}

func TestScheduleEvents(t *testing.T) {
	tpl, err := samtemplate.Parse("t.yaml", []byte(scheduledTemplate(`
        Plain:
          Type: Schedule
          Properties:
            Schedule: rate(5 minutes)
        Off:
          Type: Schedule
          Properties:
            Schedule: cron(0 12 * * ? *)
            Enabled: false
            Input: '{"a": [1, 2]}'
        Next:
          Type: ScheduleV2
          Properties:
            ScheduleExpression: rate(1 hour)
            State: DISABLED
`)))
	if err != nil {
		t.Fatal(err)
	}
	s := tpl.Functions[0].Schedules
	if len(s) != 3 || !tpl.Functions[0].Scheduled() {
		t.Fatalf("schedules %+v", s)
	}
	if s[0].Every != 5*time.Minute || s[0].Input != nil || !s[0].Enabled {
		t.Errorf("Plain: %+v", s[0])
	}
	if s[1].Every != 0 || s[1].Expression != "cron(0 12 * * ? *)" || string(s[1].Input) != `{"a": [1, 2]}` || s[1].Enabled {
		t.Errorf("Off: %+v", s[1])
	}
	if !s[2].V2 || s[2].Every != time.Hour || s[2].Enabled {
		t.Errorf("Next: %+v", s[2])
	}
}

// A schedule EventBridge would refuse is refused here, naming the event.
func TestBadScheduleEventsAreRefused(t *testing.T) {
	for _, c := range []struct{ events, want string }{
		{`
        Tick:
          Type: Schedule
          Properties:
            Schedule: rate(1 minutes)
`, "event Tick: Schedule: \"rate(1 minutes)\": a value of 1 takes the singular"},
		{`
        Tick:
          Type: Schedule
          Properties:
            Schedule: rate(1 minute)
            Input: '{"job": tick}'
`, "event Tick: the Input \"{\\\"job\\\": tick}\" is not JSON text"},
		{`
        Tick:
          Type: ScheduleV2
          Properties:
            ScheduleExpression: whenever
`, "event Tick: ScheduleExpression: \"whenever\" is not a rate"},
	} {
		_, err := samtemplate.Parse("t.yaml", []byte(scheduledTemplate(c.events)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
}
