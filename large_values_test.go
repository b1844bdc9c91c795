package lambdasaga_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga"
)

const reportSaga = `
saga: report
input: {doc: string}
steps:
  - id: render
    action: report.render
    with: {doc: "${input.doc}"}
    out: pdf
    compensate: {action: report.shred, with: {pages: "${size(vars.pdf.bytes)}"}}
  - id: mail
    action: report.mail
    with: {pdf: "${vars.pdf.bytes}"}
`

// With LocalOptions.Objects, a saga takes a 1 MiB input and passes a 5
// MiB output on; its compensation reads the output when the last step
// fails. Without, the input is refused.
func TestLocalRunsLargeValuesWithObjects(t *testing.T) {
	t.Parallel()
	var shredded any
	actions := lambdasaga.NewActions()
	actions.MustRegister("report.render", func(ctx context.Context, c lambdasaga.Call) (any, error) {
		return map[string]any{"bytes": strings.Repeat("p", 5<<20)}, nil
	})
	actions.MustRegister("report.mail", func(ctx context.Context, c lambdasaga.Call) (any, error) {
		return nil, lambdasaga.Permanent(errors.New("mailbox full"))
	})
	actions.MustRegister("report.shred", func(ctx context.Context, c lambdasaga.Call) (any, error) {
		shredded = c.Input.(map[string]any)["pages"]
		return nil, nil
	})
	def := parse(t, reportSaga)
	in := map[string]any{"doc": strings.Repeat("d", 1<<20)}

	l, err := lambdasaga.NewLocal(actions, lambdasaga.LocalOptions{VirtualTime: true, Objects: lambdasaga.NewMemoryObjects()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := l.Run(context.Background(), def, lambdasaga.StartOptions{ID: "r-1", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != lambdasaga.StatusCompensated || shredded != int64(5<<20) {
		t.Fatalf("status %s, the compensation got %v: want compensated, with the 5 MiB output's size", s.Status, shredded)
	}

	inline := newLocal(t, actions)
	if _, err := inline.Run(context.Background(), def, lambdasaga.StartOptions{ID: "r-2", Input: in}); err == nil {
		t.Fatal("a 1 MiB input without objects: no error")
	}
}
