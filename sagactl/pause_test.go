package sagactl_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

// pause, pauses and unpause on a stack: a saga whose next step is paused
// says so in status. Nothing handles messages here: the saga stays at its
// first action.
func TestPauseAndUnpauseOnEmulators(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	where := []string{"--table", b.Table, "--advance-queue-url", b.URLs[durable.QueueAdvance], "--compensate-queue-url", b.URLs[durable.QueueCompensate],
		"--dynamodb-endpoint", b.DynamoDBEndpoint, "--sqs-endpoint", b.SQSEndpoint}
	cmd := func(args ...string) result {
		t.Helper()
		return runSagactl(t, nil, append(args, where...)...)
	}
	if r := cmd("pauses"); r.code != sagactl.ExitOK || r.stdout != "no pauses\n" {
		t.Fatalf("pauses before any: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := cmd("pause", "--action", "inventory.reserve", "--until", "2h")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "paused action inventory.reserve until ") {
		t.Fatalf("pause: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cmd("pause", "--name", "order", "--compensations"); r.code != sagactl.ExitOK {
		t.Fatalf("pause --name: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var listed []struct {
		Kind, Target  string
		Compensations bool
		Until         *string
	}
	if r := cmd("pause", "--list", "--json"); json.Unmarshal([]byte(r.stdout), &listed) != nil || len(listed) != 2 ||
		listed[0].Target != "inventory.reserve" || listed[0].Until == nil || listed[1].Target != "order" || !listed[1].Compensations {
		t.Fatalf("pause --list --json: %+v\n%s%s", listed, r.stdout, r.stderr)
	}
	if r := cmd("start", orderFile, "--input", "@../examples/order/testdata/ok.json", "--id", "o-1"); r.code != sagactl.ExitOK {
		t.Fatalf("start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Held by both: status names one; after its unpause, the other.
	r = cmd("status", "o-1")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "waiting on: reserve (attempt 1)") || !strings.Contains(r.stdout, "paused (by name order): ") {
		t.Fatalf("status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The listing marks a saga its name's pause holds, and names the
	// actions paused (which sagas those hold, status says).
	if r := cmd("list"); !strings.Contains(r.stdout, "running (paused)") || !strings.Contains(r.stdout, "paused actions: inventory.reserve until ") {
		t.Fatalf("list under both pauses: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var l struct {
		Sagas []struct {
			SagaID   string `json:"saga_id"`
			PausedBy *struct {
				Kind, Target string
			} `json:"paused_by"`
		}
		PausedActions []struct{ Kind, Target string } `json:"paused_actions"`
	}
	if r := cmd("list", "--json"); json.Unmarshal([]byte(r.stdout), &l) != nil || len(l.Sagas) != 1 || l.Sagas[0].PausedBy == nil ||
		l.Sagas[0].PausedBy.Kind != "name" || l.Sagas[0].PausedBy.Target != "order" || len(l.PausedActions) != 1 || l.PausedActions[0].Target != "inventory.reserve" {
		t.Fatalf("list --json under both pauses: %+v\n%s%s", l, r.stdout, r.stderr)
	}
	if r := cmd("unpause", "--name", "order"); r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "unpaused name order") {
		t.Fatalf("unpause --name: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cmd("status", "o-1"); !strings.Contains(r.stdout, "paused (by action inventory.reserve until ") {
		t.Fatalf("status after one unpause:\n%s%s", r.stdout, r.stderr)
	}
	if r := cmd("list"); strings.Contains(r.stdout, "(paused)") || !strings.Contains(r.stdout, "paused actions: inventory.reserve") {
		t.Fatalf("list after one unpause:\n%s%s", r.stdout, r.stderr)
	}
	if r := cmd("unpause", "--action", "inventory.reserve"); r.code != sagactl.ExitOK {
		t.Fatalf("unpause --action: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cmd("status", "o-1"); strings.Contains(r.stdout, "paused (by") {
		t.Fatalf("status after the unpauses still paused:\n%s", r.stdout)
	}
	if r := cmd("list"); strings.Contains(r.stdout, "paused") || !strings.Contains(r.stdout, "o-1") {
		t.Fatalf("list after the unpauses:\n%s%s", r.stdout, r.stderr)
	}
	if r := cmd("unpause", "--name", "order"); r.code == sagactl.ExitOK || !strings.Contains(r.stderr, "no pause of name order") {
		t.Fatalf("unpause of nothing: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestPauseUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pause"}, "give --name N or --action A"},
		{[]string{"pause", "--name", "a", "--action", "b"}, "not both"},
		{[]string{"pause", "--name", "a", "--until", "tomorrow"}, "RFC 3339 time"},
		{[]string{"pause", "--name", "a", "--until", "-1h"}, "positive duration"},
		{[]string{"unpause"}, "give --name N or --action A"},
	} {
		r := runSagactl(t, nil, tc.args...)
		if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}
