package sagactl_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

const coolingFile = "../internal/saga/testdata/valid/cooling.yaml"

// sagactl run, in memory, runs a saga's waits in virtual time: a 36-hour
// cooling-off period passes at once, in order with the steps around it,
// and the summary says how much virtual time passed.
func TestRunWaitsInVirtualTime(t *testing.T) {
	r := runSagactl(t, nil, "run", coolingFile)
	if r.code != sagactl.ExitOK {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	order := []string{"reserve            completed", "cool_off           waiting", "cool_off           completed", "settle             waiting", "settle             completed", "ship               completed"}
	at := 0
	for _, want := range order {
		i := strings.Index(r.stdout[at:], want)
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", want, r.stdout)
		}
		at += i + len(want)
	}
	if !strings.Contains(r.stdout, "(virtual time: its waits and retry delays, 36h1m30s in all, passed at once)") {
		t.Fatalf("no virtual-time line:\n%s", r.stdout)
	}
	r = runSagactl(t, nil, "run", coolingFile, "--json")
	var rep struct {
		Status string
		Steps  []struct{ ID, Status string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Status != "succeeded" || len(rep.Steps) != 6 {
		t.Fatalf("--json: %+v %v\n%s", rep, err, r.stdout)
	}
}

// sagactl graph draws a wait as a flag node with its duration.
func TestGraphDrawsWaits(t *testing.T) {
	r := runSagactl(t, nil, "graph", coolingFile)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, `s1>"cool_off<br/>wait 36h"]`) || !strings.Contains(r.stdout, "s1 --> s2") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
