package saga_test

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/lambdasaga/lambdasaga/internal/proptest"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// checkOf compiles a definition of testdata/compcheck (child sagas read
// next to it) and checks it.
func checkOf(t *testing.T, name string) *saga.CompensationCheck {
	t.Helper()
	p, err := saga.CompileFile(os.DirFS("testdata/compcheck"), name, saga.Options{})
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	return p.CheckCompensation()
}

// stacksOf renders the failure points of one checked file: "step: stack |
// stack", each stack newest first, "a* " repeated, "a?" only if it took
// effect, "+a" the step itself first, "-" nothing; "@branch 1 of f>f" a
// list inside fork f.
func stacksOf(cf saga.CheckedFile) map[string]string {
	out := map[string]string{}
	for _, fp := range cf.Failures {
		var stacks []string
		for _, s := range fp.Stacks {
			var names []string
			for _, u := range s {
				n := u.Step
				if u.Repeated {
					n += "*"
				}
				if u.IfTookEffect {
					n += "?"
				}
				names = append(names, n)
			}
			if len(names) == 0 {
				names = []string{"-"}
			}
			stacks = append(stacks, strings.Join(names, " "))
		}
		v := strings.Join(stacks, " | ")
		if fp.Self != nil {
			v = "+" + fp.Self.Step + " " + v
		}
		if fp.In != "" {
			v += " @" + fp.In + ">" + fp.Fork
		}
		out[fp.Step] = v
	}
	return out
}

func findingsOf(cf saga.CheckedFile) []string {
	var out []string
	for _, f := range cf.Findings {
		out = append(out, fmt.Sprintf("%s %s %s %d", f.Kind, f.Step, f.Field, f.Line))
	}
	return out
}

// The check lists, for each step that can fail, every distinct stack of
// compensations a failure there meets, newest first, and finds what the
// compensations lack.
func TestCheckCompensationStacksAndFindings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file     string
		stacks   map[string]string // the failure points named (others unchecked)
		absent   []string          // steps that cannot fail
		findings []string
	}{
		{file: "missing.yaml",
			stacks:   map[string]string{"quote": "-", "reserve": "+reserve -", "notify": "reserve", "cool": "reserve"},
			absent:   []string{"done"},
			findings: []string{"missing-compensation notify compensate 14"}},
		{file: "overwritten.yaml",
			stacks:   map[string]string{"again": "+again reserve"},
			absent:   []string{"start", "bump"},
			findings: []string{"overwritten-value reserve compensate.with 11", "overwritten-value audit compensate.with 20"}},
		{file: "callback.yaml",
			stacks:   map[string]string{"ship": "+ship charge"},
			findings: []string{"missing-value charge compensate.with 10"}},
		{file: "switch.yaml",
			stacks: map[string]string{"how": "reserve", "check": "courier reserve | post reserve"}},
		{file: "loop.yaml",
			stacks: map[string]string{"enough": "hold | hold*", "pay": "hold* | hold", "hold": "+hold hold | hold* | -"}},
		{file: "catch.yaml",
			stacks: map[string]string{"manual": "charge | charge?", "ship": "+ship charge"}},
		{file: "forks.yaml",
			stacks: map[string]string{
				"book": "-", "hotel": "+hotel - @branch 1 of book>book", "confirm": "hotel @branch 1 of book>book",
				"ship": "book", "parcel": "+parcel - @the body of ship>ship", "label": "parcel @the body of ship>ship",
			},
			absent:   []string{"note", "done"},
			findings: []string{"missing-compensation label compensate 18"}},
		{file: "paths.yaml",
			stacks: map[string]string{"s2": "a1 | -", "end": "c1 b1 a1 | b1 a1 | c1 a1 | c1 b1 | a1 | b1 | c1 | -"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			c := checkOf(t, tc.file)
			if len(c.Files) != 1 {
				t.Fatalf("%d files checked, want 1", len(c.Files))
			}
			got := stacksOf(c.Files[0])
			for step, want := range tc.stacks {
				if got[step] != want {
					t.Errorf("%s fails: got %q, want %q", step, got[step], want)
				}
			}
			for _, step := range tc.absent {
				if s, ok := got[step]; ok {
					t.Errorf("%s cannot fail, but is listed: %q", step, s)
				}
			}
			if f := findingsOf(c.Files[0]); !reflect.DeepEqual(f, tc.findings) {
				t.Errorf("findings %q, want %q", f, tc.findings)
			}
		})
	}
}

// A child saga is checked in a file of its own, once however many steps
// run it, naming them; a saga step that succeeded is undone as a whole.
func TestCheckCompensationOfChildSagas(t *testing.T) {
	t.Parallel()
	c := checkOf(t, "parent.yaml")
	if len(c.Files) != 2 || c.Files[0].File != "parent.yaml" || c.Files[1].File != "child.yaml" {
		t.Fatalf("files %+v, want parent.yaml then child.yaml", c.Files)
	}
	if got, want := c.Files[1].RunBy, []string{"parent.yaml step first", "parent.yaml step second"}; !reflect.DeepEqual(got, want) {
		t.Errorf("run by %q, want %q", got, want)
	}
	if got := stacksOf(c.Files[0])["second"]; got != "first" {
		t.Errorf("second fails: %q, want first undone", got)
	}
	if u := c.Files[0].Failures[1].Stacks[0][0]; u.Kind != "saga" || u.Child != "child.yaml" {
		t.Errorf("undo %+v: want the saga step, naming its child", u)
	}
	if got := findingsOf(c.Files[1]); !reflect.DeepEqual(got, []string{"missing-compensation log compensate 7"}) || len(c.Files[0].Findings) != 0 {
		t.Errorf("findings %q in the child, %d in the parent; want log's in the child alone", got, len(c.Files[0].Findings))
	}
	if n := len(c.Findings()); n != 1 {
		t.Errorf("Findings() has %d, want 1", n)
	}
}

// A definition with more paths than the walk's bound is checked as far as
// the bound, and says so; its findings are complete all the same.
func TestCheckCompensationStopsAtItsBound(t *testing.T) {
	t.Parallel()
	p, err := saga.CompileFile(os.DirFS("testdata/compcheck"), "paths.yaml", saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if full := saga.CheckCompensationWithin(p, saga.MaxCheckStates); full.Files[0].Truncated {
		t.Fatal("truncated at the default bound")
	}
	cut := saga.CheckCompensationWithin(p, 5).Files[0]
	if !cut.Truncated {
		t.Fatal("not truncated at 5 states")
	}
	if got := stacksOf(cut)["end"]; strings.Count(got, "|") >= 7 {
		t.Errorf("end lists every stack after a cut walk: %q", got)
	}
}

// The check is deterministic, and never panics, on any definition
// validation accepts: the property test's generated definitions, forks,
// loops, catches and child sagas included.
func TestCheckCompensationOfGeneratedDefinitions(t *testing.T) {
	t.Parallel()
	n := 300
	if testing.Short() {
		n = 60
	}
	checked := 0
	for seed := uint64(1); seed <= uint64(n); seed++ {
		if checkGenerated(t, proptest.NewCase(seed)) {
			checked++
		}
	}
	if checked < n/4 {
		t.Fatalf("only %d of %d generated definitions compiled", checked, n)
	}
}

// FuzzCheckCompensation holds the same of the definitions a fuzzer's
// bytes generate (make fuzz).
func FuzzCheckCompensation(f *testing.F) {
	for _, seed := range []string{"", "check", strings.Repeat("\xff", 64)} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkGenerated(t, proptest.CaseFromBytes(data))
	})
}

// checkGenerated checks a generated case's definition twice, if it
// compiles, and reports whether it did: the two checks must agree, and
// every failing step list between one and MaxCheckStacks stacks.
func checkGenerated(t *testing.T, c *proptest.Case) bool {
	t.Helper()
	fsys := fstest.MapFS{"prop.yaml": {Data: c.YAML}}
	for name, src := range c.Files {
		fsys[name] = &fstest.MapFile{Data: src}
	}
	p, err := saga.CompileFile(fsys, "prop.yaml", saga.Options{})
	if err != nil {
		return false
	}
	a, b := p.CheckCompensation(), p.CheckCompensation()
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("seed %d: two checks differ\n%s", c.Seed, c.YAML)
	}
	for _, f := range a.Files {
		for _, fp := range f.Failures {
			if len(fp.Stacks) == 0 || len(fp.Stacks) > saga.MaxCheckStacks {
				t.Fatalf("seed %d: %s fails with %d stacks listed\n%s", c.Seed, fp.Step, len(fp.Stacks), c.YAML)
			}
		}
	}
	return true
}

// What a dry run compensates when a step fails is one of the stacks the
// check lists for that step: the check is the dry run's exhaustive
// counterpart. Each generated definition without forks runs once with
// every action succeeding and once per action step failing for good
// there; wherever the run fails, its compensations, newest first, must be
// a stack the check lists at that step (less the entries it marks as
// undone only if they took effect, which a run without timeouts never
// meets).
func TestCheckCompensationAgreesWithDryRuns(t *testing.T) {
	t.Parallel()
	n := 200
	if testing.Short() {
		n = 40
	}
	compared := 0
	for seed := uint64(1); seed <= uint64(n); seed++ {
		c := proptest.NewCase(seed)
		if c.Files != nil || c.Forks > 0 {
			continue
		}
		p, err := saga.Compile("prop.yaml", c.YAML, saga.Options{MaxVisits: 50})
		if err != nil {
			continue
		}
		in, err := p.CheckInput(decodeInput(t, string(c.Input)))
		if err != nil {
			continue
		}
		stacks := map[string][]string{}
		omitted := map[string]bool{}
		for _, fp := range p.CheckCompensation().Files[0].Failures {
			omitted[fp.Step] = fp.Omitted > 0
			for _, s := range fp.Stacks {
				stacks[fp.Step] = append(stacks[fp.Step], definiteStack(s))
			}
		}
		fails := []string{""}
		for _, s := range p.Definition().Steps {
			if s.Kind == "action" {
				fails = append(fails, s.ID)
			}
		}
		for _, fail := range fails {
			var undone []string
			st, err := p.DryRun(saga.DryRunParams{
				Input: in,
				Act: func(call saga.Call) (any, error) {
					if call.Step == fail && !call.Compensation {
						return nil, saga.Permanent(saga.NewError("Forced", "forced"))
					}
					return call.Input, nil
				},
				OnStep: func(rec saga.StepRecord) {
					if rec.Compensation && rec.Outcome == saga.OutcomeCompensated {
						undone = append(undone, rec.Step)
					}
				},
			})
			if err != nil || st.Failure == nil || st.Status != "compensated" || omitted[st.Failure.Step] {
				continue // a loop the dry run could not leave, no failure, or stacks not all listed
			}
			compared++
			got := distinctPushes(undone)
			if !slices.Contains(stacks[st.Failure.Step], got) {
				t.Fatalf("seed %d, %q failing: the run failed at %s and undid %q; the check lists %q\n%s",
					seed, fail, st.Failure.Step, got, stacks[st.Failure.Step], c.YAML)
			}
		}
	}
	if compared < n/4 {
		t.Fatalf("only %d runs compared", compared)
	}
	t.Logf("%d runs of %d definitions compared", compared, n)
}

// definiteStack renders a stack as the steps a run undoes when nothing
// timed out: each entry's step once (a repeated one is compared with a
// run's by distinctPushes), those undone only if they took effect left
// out.
func definiteStack(s []saga.Undo) string {
	var names []string
	for _, u := range s {
		if !u.IfTookEffect {
			names = append(names, u.Step)
		}
	}
	return strings.Join(names, " ")
}

// distinctPushes renders what a run undid, newest first, as the check
// keeps a stack: each step once, where it was first pushed (a loop's later
// visits fold into its first).
func distinctPushes(undone []string) string {
	var pushed []string
	for i := len(undone) - 1; i >= 0; i-- {
		if !slices.Contains(pushed, undone[i]) {
			pushed = append(pushed, undone[i])
		}
	}
	slices.Reverse(pushed)
	return strings.Join(pushed, " ")
}
