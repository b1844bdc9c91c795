package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/console"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/redrive"
)

// deadLetterSource is a console source whose dead letters are a memory
// queue's; it reads no saga.
type deadLetterSource struct {
	console.Source
	q *memqueue.Queue
}

func (s deadLetterSource) Redrive(ctx context.Context, queues []redrive.Queue, p redrive.Params) (*redrive.Result, error) {
	return redrive.RedriveFound(ctx, &redrive.MemoryQueues{Queue: s.q}, queues, p)
}

// The dead-letter page shows each queue's depth; a redrive is asked to be
// confirmed, carries the CSRF token, and moves the letters back.
func TestDeadLettersPageRedrivesOnConfirm(t *testing.T) {
	t.Parallel()
	q := memqueue.New(memqueue.Config{})
	for i := range 3 {
		if err := q.SendBody(t.Context(), durable.DeadLetter(durable.QueueAdvance), fmt.Appendf(nil, "a-%d", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	con, err := console.New(console.Config{Source: deadLetterSource{q: q}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	defer srv.Close()

	code, body := get(t, srv.URL, "/dead-letters")
	if code != http.StatusOK || !strings.Contains(body, `data-queue="advance"><td>advance</td><td class="depth">3</td>`) ||
		!strings.Contains(body, "not known here") {
		t.Fatalf("dead-letter page: %d\n%s", code, body)
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token on the dead-letter page")
	}
	if code, _ := post(t, srv.URL, "/dead-letters/redrive", url.Values{"confirm": {"yes"}}, nil); code != http.StatusForbidden {
		t.Errorf("a redrive without the token: %d, want 403", code)
	}
	code, body = post(t, srv.URL, "/dead-letters/redrive", url.Values{"csrf": {m[1]}, "queue": {"advance"}, "max": {"2"}}, nil)
	if code != http.StatusOK || !strings.Contains(body, `id="confirm"`) || !strings.Contains(body, "at most 2") || q.Len(durable.QueueAdvance) != 0 {
		t.Fatalf("asking: %d, %d moved\n%s", code, q.Len(durable.QueueAdvance), body)
	}
	code, body = post(t, srv.URL, "/dead-letters/redrive", url.Values{"csrf": {m[1]}, "queue": {"advance"}, "max": {"2"}, "confirm": {"yes"}}, nil)
	if code != http.StatusOK || !strings.Contains(body, "2 moved back.") || q.Len(durable.QueueAdvance) != 2 || q.Len(durable.DeadLetter(durable.QueueAdvance)) != 1 {
		t.Fatalf("confirmed: %d, advance %d\n%s", code, q.Len(durable.QueueAdvance), body)
	}
	if code, _ := post(t, srv.URL, "/dead-letters/redrive", url.Values{"csrf": {m[1]}, "queue": {"nosuch"}}, nil); code != http.StatusBadRequest {
		t.Errorf("an unknown queue: %d, want 400", code)
	}
}

// A console whose source has no dead letters says so.
func TestDeadLettersPageWithoutDeadLetters(t *testing.T) {
	t.Parallel()
	con, err := console.New(console.Config{Source: failing{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	defer srv.Close()
	if code, body := get(t, srv.URL, "/dead-letters"); code != http.StatusNotFound || !strings.Contains(body, "no dead-letter queues") {
		t.Fatalf("%d\n%s", code, body)
	}
}
