package local

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// scheduler stands in for an EventBridge rule that invokes a function on a
// rate schedule. EventBridge invokes the function asynchronously; here the
// next invocation waits for the one before (a tick that finds one under way
// is skipped), and a failed invocation is logged, not retried: the next
// tick is its retry.
type scheduler struct {
	env      *Env
	fn       samtemplate.Function
	schedule samtemplate.Schedule
	every    time.Duration // the schedule's period, or Config.ScheduleEvery
	rieURL   string
	worker   int
}

func (s *scheduler) run(ctx context.Context) {
	// Each invocation may run to the function's timeout; Down cuts one under
	// way short (ctx), which a tick or a sweep survives: each is idempotent.
	hc := &http.Client{Timeout: time.Duration(s.fn.Timeout+5) * time.Second}
	// A rate schedule starts when its rule is created and first fires one
	// period later (EventBridge User Guide, "Rate expressions reference").
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.invoke(ctx, hc, now)
		}
	}
}

// invoke sends one scheduled event and logs what the function answered.
func (s *scheduler) invoke(ctx context.Context, hc *http.Client, now time.Time) {
	body := scheduledEvent(s.schedule, s.fn.Name, now)
	out, err := invokeRIE(ctx, hc, s.rieURL, body)
	if ctx.Err() != nil {
		return // stopping
	}
	if err != nil {
		s.env.logf("%s schedule %s (%s, every %s): the invocation broke off: %v", s.fn.Name, s.schedule.Name, s.schedule.Expression, s.every, err)
		return
	}
	const most = 512
	if len(out) > most {
		out = append(out[:most:most], "..."...)
	}
	s.env.logf("%s schedule %s (%s, every %s): invoked with %s: %s", s.fn.Name, s.schedule.Name, s.schedule.Expression, s.every, eventSummary(s.schedule), out)
}

// scheduledEvent is what EventBridge sends the function: the schedule's
// Input when it has one ("the matched event is overridden with this
// constant": EventBridge API Reference, Target, Input), else its scheduled
// event, as a rule would send it at now.
func scheduledEvent(sc samtemplate.Schedule, function string, now time.Time) []byte {
	if sc.Input != nil {
		return sc.Input
	}
	ev := events.CloudWatchEvent{
		Version: "0", ID: now.UTC().Format("20060102T150405.000000000Z"), DetailType: "Scheduled Event", Source: "aws.events",
		AccountID: "000000000000", Time: now.UTC().Truncate(time.Second), Region: "us-east-1",
		Resources: []string{"arn:aws:events:us-east-1:000000000000:rule/" + function + sc.Name},
		Detail:    json.RawMessage("{}"),
	}
	b, _ := json.Marshal(ev)
	return b
}

// eventSummary names the event in the log line.
func eventSummary(sc samtemplate.Schedule) string {
	if sc.Input != nil {
		return string(sc.Input)
	}
	return "its scheduled event"
}
