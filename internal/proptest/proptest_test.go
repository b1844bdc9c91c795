package proptest

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/saga"
)

var (
	seed  = flag.Uint64("seed", 0, "run only the case of this seed (replays a failure)")
	defs  = flag.Int("defs", 300, "how many definitions to generate, seeds 1 to defs")
	first = flag.Uint64("first", 1, "the first seed")
)

// TestProperty generates definitions; whatever Compile accepts must run to
// a final status within the bound, with no panic, and compensate every
// action that returned success if it ends compensated; every chained step
// must go from the state the chain holds as from a read, and a run of 50
// definitions or more must chain some. A failing case
// prints its seed, definition, input and calls; replay it with
// go test ./internal/proptest -run TestProperty -seed N -v.
func TestProperty(t *testing.T) {
	if raceEnabled && *seed == 0 && *defs == 300 {
		*defs = 60 // the race detector slows the run tenfold; the concurrency is elsewhere
	}
	seeds := make([]uint64, 0, *defs)
	if *seed != 0 {
		seeds = append(seeds, *seed)
	} else {
		for s := range uint64(*defs) {
			seeds = append(seeds, *first+s)
		}
	}
	type example struct {
		c     *Case
		res   *Result
		count int
	}
	classes := map[string]*example{}
	outcomes := map[string]int{}
	deliveries := map[string]int{}
	runs, timeouts, chained := 0, 0, 0
	withForks, validForks, treeRuns, invalid := 0, 0, 0, 0
	for _, s := range seeds {
		c := NewCase(s)
		res := Run(c)
		if c.Forks > 0 {
			withForks++
			if c.Invalid != "" {
				invalid++
			}
			if res.Outcome != Refused && res.Outcome != Crashed {
				validForks++
			}
			if res.Outcome == Ran && res.Tree {
				treeRuns++
			}
		}
		key := string(res.Outcome)
		if res.Outcome == Ran {
			key += " " + string(res.Status)
		}
		outcomes[key]++
		if res.Outcome == Ran {
			runs++
		}
		timeouts += res.Timeouts
		chained += res.Chained
		for k, n := range res.Deliveries {
			deliveries[k] += n
		}
		if *seed != 0 {
			t.Logf("seed %d:\n%s", s, c.Report(res))
			if res.compileErr != nil {
				t.Logf("compile: %v", res.compileErr)
			}
		}
		for _, v := range res.Violations {
			ex := classes[v.Class]
			if ex == nil {
				ex = &example{}
				classes[v.Class] = ex
			}
			ex.count++
			if ex.c == nil || len(ex.c.YAML) > len(c.YAML) {
				ex.c, ex.res = c, res
			}
		}
	}
	var summary []string
	for k, n := range outcomes {
		summary = append(summary, fmt.Sprintf("%s: %d", k, n))
	}
	slices.Sort(summary)
	t.Logf("%d definitions, %d runs: %s", len(seeds), runs, strings.Join(summary, ", "))
	summary = summary[:0]
	for k, n := range deliveries {
		summary = append(summary, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(summary)
	t.Logf("pauses timed out: %d; deliveries: %s", timeouts, strings.Join(summary, ", "))
	t.Logf("with forks: %d definitions (%d with a mistake validation must refuse), %d valid, %d runs", withForks, invalid, validForks, treeRuns)
	t.Logf("chained steps whose held state was checked against a read: %d", chained)
	if *seed == 0 && len(seeds) >= 50 && chained == 0 {
		// Chains run only the steps ready at once: a run this size has
		// many, and a check that never runs proves nothing.
		t.Errorf("no chained step in %d definitions: the held state was never checked against a read", len(seeds))
	}
	names := sortedKeys(classes)
	slices.SortStableFunc(names, func(a, b string) int { return classes[b].count - classes[a].count })
	for _, name := range names {
		ex := classes[name]
		t.Errorf("%d cases: %s\nsmallest (seed %d):\n%s", ex.count, name, ex.c.Seed, ex.c.Report(ex.res))
	}
}

// FuzzDefinitionsRun is TestProperty driven by a fuzzer's bytes: every
// choice of the generator reads them. Its seed corpus runs in go test.
func FuzzDefinitionsRun(f *testing.F) {
	for s := range uint64(64) {
		r := rand.New(rand.NewPCG(s, 7))
		b := make([]byte, 2048)
		for i := 0; i < len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], r.Uint64())
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := CaseFromBytes(data)
		res := Run(c)
		if len(res.Violations) > 0 {
			t.Fatalf("%s", c.Report(res))
		}
	})
}

// TestGeneratorCoversEveryStepKind: the generator writes every step kind,
// catch loops, empty expressions and inputs at the limits, and the engine
// accepts a fair share of what it writes.
func TestGeneratorCoversEveryStepKind(t *testing.T) {
	want := []string{"action:", "set:", "switch:", "assert:", "fail:", "succeed:", "catch:", `"*"`, "compensate:", "retry:", "timeout:", "next:", `"${}"`, "grow_call", "input:", "await:", "callback:", "signal: sig",
		"parallel:", "foreach:", "saga: child", "as: it", "concurrency:", "signal: shared"}
	mistakes := []string{"cross_branch_read", "next_out", "dup_child_id", "child_cycle"}
	seen := map[string]bool{}
	accepted, overLimit := 0, 0
	for s := range uint64(150) {
		c := NewCase(s + 1)
		seen[c.Invalid] = true
		text := string(c.YAML)
		for _, name := range sortedKeys(c.Files) {
			text += string(c.Files[name])
		}
		for _, w := range want {
			if strings.Contains(text, w) {
				seen[w] = true
			}
		}
		if len(c.Input) > saga.MaxInputBytes {
			overLimit++
		}
		if _, err := saga.CompileFile(c.fsys(), "prop.yaml", saga.Options{}); err == nil {
			accepted++
		}
	}
	for s := range uint64(600) { // mistakes are rarer: generating is cheap
		seen[NewCase(s+1).Invalid] = true
	}
	for _, w := range append(want, mistakes...) {
		if !seen[w] {
			t.Errorf("no generated definition has %s", w)
		}
	}
	if accepted < 40 {
		t.Errorf("Compile accepted %d of 150 definitions: the generator wastes its cases", accepted)
	}
	if overLimit == 0 {
		t.Error("no input past saga.MaxInputBytes")
	}
	if a, b := NewCase(9), NewCase(9); string(a.YAML) != string(b.YAML) || string(a.Input) != string(b.Input) {
		t.Error("one seed generated two different cases")
	}
}
