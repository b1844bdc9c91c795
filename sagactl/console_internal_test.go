package sagactl

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
)

// lockedBuffer is a bytes.Buffer safe to write from the server's
// goroutine while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The console command serves the client's sagas on the address it
// prints, acts on them through the client, and stops when its context
// ends.
func TestServeConsoleOnAClient(t *testing.T) {
	q := memqueue.New(memqueue.Config{})
	cl, err := client.New(client.Config{Store: memstore.New(), Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := []byte("saga: hold\nsteps:\n  - {id: reserve, action: stock.reserve, compensate: {action: stock.release}}\n")
	if _, err := cl.Start(ctx, client.StartParams{File: "hold.yaml", Definition: src, SagaID: "h-1"}); err != nil {
		t.Fatal(err)
	}
	var out, errb lockedBuffer
	c := &Config{Stdout: &out, Stderr: &errb, Name: "sagactl"}
	serving, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() { done <- c.serveConsole(serving, clientSource{cl}, "127.0.0.1:0", false) }()
	addr := regexp.MustCompile(`console: (http://127\.0\.0\.1:\d+)/`)
	var base string
	for base == "" {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no address printed: %q %q", out.String(), errb.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	body := func(res *http.Response, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d\n%s", res.Request.URL, res.StatusCode, b)
		}
		return string(b)
	}
	if list := body(http.Get(base + "/sagas")); !strings.Contains(list, `data-id="h-1"`) {
		t.Fatalf("the list lacks h-1:\n%s", list)
	}
	page := body(http.Get(base + "/sagas/h-1"))
	tok := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if tok == nil || !strings.Contains(page, `id="step-reserve" data-status="running"`) {
		t.Fatalf("saga page:\n%s", page)
	}
	res := body(http.PostForm(base+"/sagas/h-1/cancel", url.Values{"csrf": {tok[1]}, "confirm": {"yes"}}))
	if !strings.Contains(res, `id="result">Cancelled`) {
		t.Fatalf("cancel:\n%s", res)
	}
	if st, err := cl.Status(ctx, "h-1"); err != nil || !st.CancelRequested {
		t.Errorf("after the cancel: %v, %v", st, err)
	}
	stop()
	if code := <-done; code != ExitOK {
		t.Errorf("serveConsole: exit %d, stderr %q", code, errb.String())
	}
}
