package sagactl_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

// validate reads a saga step's child next to its file and reports the
// child's problems in the child's file.
func TestValidateForks(t *testing.T) {
	r := runSagactl(t, nil, "validate", "testdata/forks/trip.yaml")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "trip.yaml: ok") {
		t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "validate", "testdata/forks/broken.yaml")
	if r.code != sagactl.ExitUsage {
		t.Fatalf("exit %d, want %d", r.code, sagactl.ExitUsage)
	}
	for _, w := range []string{
		"testdata/forks/sagas/broken-child.yaml:5:", "step charge: with.amount: reads vars.amount, but no step sets it",
	} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}
}

// status of a saga waiting on a fork lists its children; status of a
// child names its parent. Nothing handles messages here: the children
// stay at their first action.
func TestStatusOfAForkOnEmulators(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	where := []string{"--table", b.Table, "--advance-queue-url", b.URLs[durable.QueueAdvance], "--compensate-queue-url", b.URLs[durable.QueueCompensate],
		"--dynamodb-endpoint", b.DynamoDBEndpoint, "--sqs-endpoint", b.SQSEndpoint}
	r := runSagactl(t, nil, append([]string{"start", "../examples/travel/travel.yaml", "--input", "@../examples/travel/testdata/trip.json", "--id", "trip-1"}, where...)...)
	if r.code != sagactl.ExitOK {
		t.Fatalf("start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, append([]string{"status", "trip-1"}, where...)...)
	for _, want := range []string{"saga trip-1 (travel): waiting", "waiting on: book, 3 children (3 at once), 0 ended",
		"child 0: trip-1.book.1.0 (running)", "child 2: trip-1.book.1.2 (running)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	r = runSagactl(t, nil, append([]string{"status", "trip-1.book.1.1"}, where...)...)
	for _, want := range []string{"saga trip-1.book.1.1 (travel): running", "waiting on: flight (attempt 1)", "child 1 of trip-1's book"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("child status lacks %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	r = runSagactl(t, nil, append([]string{"cancel", "trip-1"}, where...)...)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "a stop message is on its way to its running children") {
		t.Errorf("cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The stop is a message on the advance queue, which nothing handles
	// here: the child runs on until a worker takes it.
	r = runSagactl(t, nil, append([]string{"status", "trip-1.book.1.1"}, where...)...)
	if strings.Contains(r.stdout, "cancel requested") {
		t.Errorf("the child was cancelled with no worker running:\n%s%s", r.stdout, r.stderr)
	}
}
