package sagactl

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// TestFailNamesOneThing: --fail X.compensate fails the compensation of X
// and nothing else, even where a step is named X.compensate (ids that
// validation now refuses, but resolution does not rely on that); a step id
// fails that step only; anything else is refused with the valid names, in
// the definition's order.
func TestFailNamesOneThing(t *testing.T) {
	undo := &lang.Compensation{Action: "x.undo"}
	steps := []*lang.Step{
		{ID: "x", Kind: lang.KindAction, Action: "x.do", Compensate: undo},
		{ID: "x.compensate", Kind: lang.KindAction, Action: "other"},
		{ID: "total", Kind: lang.KindSet},
		{ID: "y", Kind: lang.KindAction, Action: "y.do", Compensate: undo},
		{ID: "z", Kind: lang.KindAction, Action: "z.do"},
	}
	call := func(step string, comp bool) saga.Call { return saga.Call{Step: step, Compensation: comp} }
	tests := []struct {
		fail  string
		fails []saga.Call
		not   []saga.Call
	}{
		{"x", []saga.Call{call("x", false)}, []saga.Call{call("x", true), call("x.compensate", false)}},
		{"x.compensate", []saga.Call{call("x.compensate", false)}, []saga.Call{call("x", true), call("x", false)}},
		{"y.compensate", []saga.Call{call("y", true)}, []saga.Call{call("y", false), call("y.compensate", false)}},
	}
	for _, tt := range tests {
		set, err := resolveFails("s", steps, []string{tt.fail})
		if err != nil {
			t.Fatalf("--fail %s: %v", tt.fail, err)
		}
		for _, c := range tt.fails {
			if !set.fails(c) {
				t.Errorf("--fail %s does not fail %+v", tt.fail, c)
			}
		}
		for _, c := range tt.not {
			if set.fails(c) {
				t.Errorf("--fail %s also fails %+v", tt.fail, c)
			}
		}
	}
	valid := "--fail takes one of: x, x.compensate, y, y.compensate, z"
	for _, tt := range []struct{ fail, want string }{
		{"nosuch", `--fail nosuch: saga s has no action step or compensation by that name; ` + valid},
		{"total", "--fail total: step total is a set step; only action steps and their compensations can be made to fail; " + valid},
		{"z.compensate", "--fail z.compensate: step z declares no compensate; " + valid},
		{"total.compensate", "--fail total.compensate: step total is a set step; only action steps and their compensations can be made to fail; " + valid},
	} {
		_, err := resolveFails("s", steps, []string{tt.fail})
		if err == nil || err.Error() != tt.want {
			t.Errorf("--fail %s: got %v\nwant %s", tt.fail, err, tt.want)
		}
	}
	// The list is the same every time: the definition's order, not a map's.
	_, first := resolveFails("s", steps, []string{"nosuch"})
	for range 20 {
		if _, err := resolveFails("s", steps, []string{"nosuch"}); err.Error() != first.Error() {
			t.Fatalf("the list of valid names changes: %v / %v", err, first)
		}
	}
	if !strings.Contains(first.Error(), "x, x.compensate") {
		t.Fatal(first)
	}
}
