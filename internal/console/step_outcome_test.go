package console_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A step whose compensation failed is drawn apart from the step that
// failed, and the legend names it: the saga parks on it.
func TestGraphDrawsACompensationThatFailed(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(t, "refund", "r-1")
	_, body := get(t, r.srv.URL, "/sagas/r-1")
	for step, want := range map[string]string{"book": "compensation_failed", "pay": "failed"} {
		if got := stepStatus(body, step); got != want {
			t.Errorf("step %s: %q, want %q", step, got, want)
		}
	}
	if !strings.Contains(body, `class="step st-compensation_failed" id="step-book"`) {
		t.Errorf("book is not drawn as a compensation that failed:\n%s", body)
	}
	legend := regexp.MustCompile(`(?s)<p class="legend">.*?</p>`).FindString(body)
	if !strings.Contains(legend, `class="badge st-compensation_failed">compensation failed (parked)<`) {
		t.Errorf("the legend lacks the compensation that failed: %s", legend)
	}
}

// parentSaga runs a child saga, then ends as its input says: a step that
// fails when fail is true, so that the child is undone.
const parentSaga = `saga: parent
input: {order_id: string, fail: bool}
steps:
  - id: kid
    saga: child.yaml
    with: {order_id: "${input.order_id}"}
  - id: decide
    assert: {if: "!input.fail", message: told to fail}
`

const childSaga = `saga: child
input: {order_id: string}
steps:
  - id: hold
    action: stock.reserve
    with: {order_id: "${input.order_id}"}
    compensate: {action: stock.release, with: {order_id: "${input.order_id}"}}
`

// A child saga's step, once its child ended, is coloured by its outcome
// and links to the child's page, which links back.
func TestGraphColoursAndLinksAFinishedChildSaga(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	plan, err := saga.CompileFile(fstest.MapFS{
		"parent.yaml": {Data: []byte(parentSaga)},
		"child.yaml":  {Data: []byte(childSaga)},
	}, "parent.yaml", saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id     string
		fail   bool
		final  durable.Status
		status string
	}{
		{"p-ok", false, durable.StatusSucceeded, "done"},
		{"p-undone", true, durable.StatusCompensated, "compensated"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := r.rt.Coordinator.Start(ctx, &engine.StartParams{Plan: plan, SagaID: tc.id, Input: map[string]any{"order_id": tc.id, "fail": tc.fail}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		r.waitFor(t, tc.id, tc.final)
		_, body := get(t, r.srv.URL, "/sagas/"+tc.id)
		if got := stepStatus(body, "kid"); got != tc.status {
			t.Errorf("%s: step kid %q, want %q", tc.id, got, tc.status)
		}
		link := regexp.MustCompile(`href="/sagas/(` + regexp.QuoteMeta(tc.id) + `\.kid\.[0-9]+\.0)"`).FindStringSubmatch(body)
		if link == nil {
			t.Errorf("%s: step kid does not link to its child's run:\n%s", tc.id, body)
			continue
		}
		code, child := get(t, r.srv.URL, "/sagas/"+link[1])
		if code != http.StatusOK || !strings.Contains(child, `href="/sagas/`+tc.id+`"`) {
			t.Errorf("%s: the child's page %s: %d, or no link back to its parent", tc.id, link[1], code)
		}
	}
}
