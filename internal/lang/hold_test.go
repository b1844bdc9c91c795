package lang_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/lang"
)

func TestOnFailureAndHoldForAreChecked(t *testing.T) {
	t.Parallel()
	const steps = "steps:\n  - {id: a, action: a}\n"
	cases := []struct {
		name, head string
		problem    string // "" when valid
		hold       lang.OnFailure
		holdFor    time.Duration
	}{
		{"default", "saga: s\n", "", "", 0},
		{"compensate", "saga: s\non_failure: compensate\n", "", lang.OnFailureCompensate, 0},
		{"hold", "saga: s\non_failure: hold\n", "", lang.OnFailureHold, 0},
		{"hold for", "saga: s\ntimeout: 1h\non_failure: hold\nhold_for: 1h\n", "", lang.OnFailureHold, time.Hour},
		{"unknown value", "saga: s\non_failure: pause\n", `2:13: on_failure: "pause" is not one of compensate, hold`, "", 0},
		{"hold_for without hold", "saga: s\nhold_for: 5m\n", "2:1: hold_for: needs on_failure: hold", "", 5 * time.Minute},
		{"hold_for past the timeout", "saga: s\ntimeout: 10m\non_failure: hold\nhold_for: 11m\n", "4:1: hold_for: 11m is longer than the saga's timeout of 10m", lang.OnFailureHold, 11 * time.Minute},
		{"hold_for past a year", "saga: s\non_failure: hold\nhold_for: 9000h\n", "3:1: hold_for: 9000h is longer than the limit of 8760h (one year)", lang.OnFailureHold, 9000 * time.Hour},
		{"hold_for not a duration", "saga: s\non_failure: hold\nhold_for: soon\n", `3:11: hold_for: "soon" is not a positive duration`, lang.OnFailureHold, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			def, err := lang.Parse("s.yaml", []byte(c.head+steps))
			if c.problem == "" {
				if err != nil {
					t.Fatal(err)
				}
				if def.OnFailure != c.hold || def.HoldFor != c.holdFor {
					t.Fatalf("on_failure %q hold_for %s", def.OnFailure, def.HoldFor)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "s.yaml:"+c.problem) {
				t.Fatalf("got %v, want s.yaml:%s", err, c.problem)
			}
		})
	}
}
