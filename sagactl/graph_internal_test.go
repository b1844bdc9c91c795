package sagactl

import (
	"os"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// The graph draws a parallel step's branches, a foreach body and a child
// saga as subgraphs whose ends lead to the fork's join. (sagactl graph
// refuses forks until their runtime lands, so this draws parsed
// definitions.)
func TestGraphForks(t *testing.T) {
	parse := func(file string) *lang.Definition {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		def, err := lang.Parse(file, src)
		if err != nil {
			t.Fatal(err)
		}
		return def
	}
	trip, payment := parse("testdata/forks/trip.yaml"), parse("testdata/forks/sagas/payment.yaml")
	var b strings.Builder
	writeMermaid(&b, trip, func(s *lang.Step) *lang.Definition {
		if s.Saga == "sagas/payment.yaml" {
			return payment
		}
		return nil
	})
	out := b.String()
	for _, want := range []string{
		// the saga's own steps keep s0, s1, s2; nested steps follow
		`    start((start)) --> s0`,
		`    s0[["book<br/>parallel, 2 branches"]]`,
		`    subgraph s0b0 ["book: branch 1"]`,
		`        s3["hotel<br/>hotels.book"]`,
		`        s3 --> js0`,
		`        u3[/"undo hotel<br/>hotels.cancel"/]`,
		`    subgraph s0b1 ["book: branch 2"]`,
		`        s4 --> js0`,
		`    s0 --> s3`,
		`    s0 --> s4`,
		`    js0 --> s1`,
		`    s1[["ship_all<br/>foreach item in input.items, 10 at once"]]`,
		`    subgraph s1body ["ship_all: each item"]`,
		`        s5 --> js1`,
		`    js1 --> s2`,
		`    subgraph s2child ["pay: saga payment (sagas/payment.yaml)"]`,
		`        c1s0["charge<br/>payments.charge"]`,
		`        c1s0 --> js2`,
		`        c1u0[/"undo charge<br/>payments.refund"/]`,
		`    s2 --> c1s0`,
		`    js2 --> succeeded`,
		`    js2 -->|fails| compensate`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("graph lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}
