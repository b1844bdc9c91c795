package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/console"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// dropping is a Source whose sagas say that their history dropped its
// older entries, as a long saga's does past the history's bound.
type dropping struct {
	*console.Coordinator
	dropped uint64
}

func (d dropping) Get(ctx context.Context, id string) (*saga.State, error) {
	st, err := d.Coordinator.Get(ctx, id)
	if err == nil {
		st.HistoryDropped = d.dropped
	}
	return st, err
}

// A saga whose history dropped its older entries: the page's timeline
// must say so and how many (docs/CONSOLE.md, "History": "the newest within
// the history's bound (the dropped ones are counted)"), or the operator
// takes the oldest entry shown for the saga's start.
func TestSagaPageSaysHistoryDropped(t *testing.T) {
	r := newRig(t)
	r.start(t, "order", "o-1")
	con, err := console.New(console.Config{Source: dropping{r.src, 4321}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	defer srv.Close()
	code, body := get(t, srv.URL, "/sagas/o-1")
	if code != http.StatusOK {
		t.Fatalf("GET /sagas/o-1: %d\n%s", code, body)
	}
	if !strings.Contains(body, `id="history"`) {
		t.Fatalf("no timeline on the page:\n%s", body)
	}
	if !strings.Contains(body, "4321") {
		t.Errorf("the page does not say that 4321 older history entries were dropped:\n%s", body)
	}
}
