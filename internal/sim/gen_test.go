package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// The generated definitions cover every step kind, catches to later and
// to earlier steps (loops), and validation accepts most of them.
func TestGeneratedDefinitionsCoverTheLanguage(t *testing.T) {
	w := &world{cfg: Config{Seed: 7}, rng: rand.New(rand.NewPCG(7, 1)), report: &Report{}}
	plans, err := w.genPlans(200)
	if err != nil {
		t.Fatal(err)
	}
	if w.report.Refused > 50 {
		t.Errorf("validation refused %d of %d generated definitions: the generator wastes its draws; the first:\n%s", w.report.Refused, 200+w.report.Refused, w.report.RefusedExample)
	}
	kinds := map[lang.StepKind]int{}
	var back, forward, outs, comps, timeouts, retries, callbacks, caughtAwaits, deadlines int
	for _, p := range plans {
		if p.Definition().Timeout > 0 {
			deadlines++
		}
		index := map[string]int{}
		for i, s := range p.Definition().Steps {
			index[s.ID] = i
		}
		for i, s := range p.Definition().Steps {
			kinds[s.Kind]++
			for _, c := range s.Catch {
				switch j := index[c.Next]; {
				case j < i:
					back++
				case j > i:
					forward++
				default:
					t.Errorf("%s: step %s catches to itself", p.Name(), s.ID)
				}
			}
			if s.Out != "" {
				outs++
			}
			if s.Compensate != nil {
				comps++
			}
			if s.Timeout > 0 {
				timeouts++
			}
			if s.Retry != nil {
				retries++
			}
			if s.Callback != nil {
				callbacks++
			}
			if s.Kind == lang.KindAwait && len(s.Catch) > 0 {
				caughtAwaits++
			}
		}
	}
	for _, k := range lang.StepKinds() {
		if kinds[k] == 0 {
			t.Errorf("no generated definition has a %s step", k)
		}
	}
	for what, n := range map[string]int{"catch to an earlier step": back, "catch to a later step": forward, "out": outs, "compensate": comps, "timeout": timeouts, "retry": retries,
		"callback": callbacks, "await with a catch": caughtAwaits, "saga with a deadline": deadlines} {
		if n == 0 {
			t.Errorf("no generated action has a %s", what)
		}
	}
}

// The same seed generates the same definitions.
func TestGeneratedDefinitionsReplay(t *testing.T) {
	gen := func() string {
		w := &world{cfg: Config{Seed: 9}, rng: rand.New(rand.NewPCG(9, 1)), report: &Report{}}
		out := ""
		for k := range 20 {
			out += w.genDefinition(k)
		}
		return out
	}
	if a, b := gen(), gen(); a != b {
		t.Fatal("one seed generated two different sets of definitions")
	}
}

// The generated definitions with forks have parallels, foreach loops and
// child sagas, nested, caught and under deadlines, and validation accepts
// most of them.
func TestGeneratedForkDefinitions(t *testing.T) {
	w := &world{cfg: Config{Seed: 7}, rng: rand.New(rand.NewPCG(7, 1)), report: &Report{}}
	plans, err := w.genForkPlans(100)
	if err != nil {
		t.Fatal(err)
	}
	if w.report.Refused > 10 {
		t.Errorf("validation refused %d of %d generated definitions with forks; the first:\n%s", w.report.Refused, 100+w.report.Refused, w.report.RefusedExample)
	}
	kinds := map[lang.StepKind]int{}
	var nested, caught, deadlines, childDeadlines int
	for _, p := range plans {
		if p.Definition().Timeout > 0 {
			deadlines++
		}
		top := map[string]bool{}
		for _, s := range p.Definition().Steps {
			top[s.ID] = true
			if lang.IsFork(s.Kind) && len(s.Catch) > 0 {
				caught++
			}
		}
		for _, s := range p.Steps() {
			kinds[s.Kind]++
			if lang.IsFork(s.Kind) && !top[s.ID] {
				nested++
			}
			if c, ok := p.Child(s.ID); ok && c.Definition().Timeout > 0 {
				childDeadlines++
			}
		}
	}
	for _, k := range []lang.StepKind{lang.KindParallel, lang.KindForeach, lang.KindSaga, lang.KindAction, lang.KindWait} {
		if kinds[k] == 0 {
			t.Errorf("no generated definition has a %s step", k)
		}
	}
	for what, n := range map[string]int{"nested fork": nested, "caught fork": caught, "deadline": deadlines, "child saga with a deadline": childDeadlines} {
		if n == 0 {
			t.Errorf("no generated definition has a %s", what)
		}
	}
}
