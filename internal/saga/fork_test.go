package saga_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// forks are the options of a compile that lets forks compile, as their
// runtime will.
var forks = saga.AllowForks(saga.Options{})

// compileFiles compiles main.yaml of files (path -> source).
func compileFiles(files map[string]string, opts saga.Options) (*saga.Plan, error) {
	fsys := fstest.MapFS{}
	for name, src := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	return saga.CompileFile(fsys, "main.yaml", opts)
}

// filesRefused expects compileFiles to refuse with every one of want.
func filesRefused(t *testing.T, files map[string]string, want ...string) {
	t.Helper()
	_, err := compileFiles(files, forks)
	if !errors.Is(err, lang.ErrInvalidDefinition) {
		t.Fatalf("compiled (err %v), want a refusal mentioning %q", err, want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
}

const tripYAML = `saga: trip
input: {items: list, amount: double}
steps:
  - id: book
    parallel:
      - steps: [{id: hotel, action: hotels.book, out: hotel, compensate: {action: hotels.cancel}}]
      - steps: [{id: flight, action: flights.book, out: flight, compensate: {action: flights.cancel}}]
    out: booked
  - id: ship_all
    foreach: "${input.items}"
    as: item
    concurrency: 10
    steps: [{id: ship_one, action: shipping.send, with: {sku: "${item.sku}", n: "${index}"}, out: parcel,
             compensate: {action: shipping.recall, with: {parcel: "${vars.parcel.id}"}}}]
    out: parcels
  - id: pay
    saga: payment.yaml
    with: {amount: "${input.amount}"}
    out: receipt
  - id: done
    succeed: {output: {booked: "${vars.booked}", parcels: "${vars.parcels}", receipt: "${vars.receipt}"}}
`

const paymentYAML = `saga: payment
input: {amount: double}
steps:
  - id: charge
    action: payments.charge
    with: {amount: "${input.amount}"}
    compensate: {action: payments.refund}
`

// The three fork kinds compile, in a child saga too.
func TestForksCompile(t *testing.T) {
	t.Parallel()
	files := map[string]string{"main.yaml": tripYAML, "payment.yaml": paymentYAML}
	if _, err := compileFiles(files, saga.Options{}); err != nil {
		t.Fatalf("%v", err)
	}
	if _, err := compileFiles(map[string]string{
		"main.yaml": "saga: m\nsteps:\n  - {id: a, saga: c.yaml}\n",
		"c.yaml":    "saga: c\nsteps:\n  - {id: b, parallel: [{steps: [{id: x, action: w}]}]}\n",
	}, saga.Options{}); err != nil {
		t.Fatalf("a fork in a child: %v", err)
	}
}

// The syntax of DESIGN 2.1, field by field: what each fork kind may have,
// and a clear problem naming any other field.
func TestForkFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, steps string
		want        []string
	}{
		{"parallel with retry", "  - {id: p, parallel: [{steps: [{id: a, action: w}]}], retry: {attempts: 2}}\n",
			[]string{"step p: retry: a parallel step has no retry (its fields: id, parallel, out, next, catch)"}},
		{"parallel with steps", "  - {id: p, parallel: [{steps: [{id: a, action: w}]}], steps: [{id: b, action: w}]}\n",
			[]string{"step p: steps: a parallel step's steps are in its branches"}},
		{"parallel empty", "  - {id: p, parallel: []}\n", []string{"step p: parallel: must be a non-empty list of branches"}},
		{"branch without steps", "  - {id: p, parallel: [{stepz: []}]}\n",
			[]string{"step p: parallel[0].stepz: unknown field (expected one of steps)", "step p: parallel[0].steps: missing"}},
		{"branch with empty steps", "  - {id: p, parallel: [{steps: []}]}\n", []string{"step p: parallel[0].steps: must be a non-empty list of steps"}},
		{"foreach with compensate", "  - {id: f, foreach: '${[1]}', steps: [{id: a, action: w}], compensate: {action: u}}\n",
			[]string{"step f: compensate: a foreach step has no compensate (its fields: id, foreach, as, concurrency, steps, out, next, catch)"}},
		{"foreach without steps", "  - {id: f, foreach: '${[1]}'}\n", []string{"step f: steps: missing: a foreach step needs its body"}},
		{"foreach empty expression", "  - {id: f, foreach: '${}', steps: [{id: a, action: w}]}\n", []string{"step f: foreach: empty expression"}},
		{"foreach not a list", "  - {id: f, foreach: '${1 + 2}', steps: [{id: a, action: w}]}\n", []string{"step f: foreach: foreach needs a list, but ${1 + 2} is an int"}},
		{"saga with timeout", "  - {id: s, saga: c.yaml, timeout: 1m}\n", []string{"step s: timeout: a saga step has no timeout (its fields: id, saga, with, out, next, catch)"}},
		{"as on an action", "  - {id: a, action: w, as: x}\n", []string{"step a: as: only foreach steps have as"}},
		{"concurrency on a set", "  - {id: a, set: {x: 1}, concurrency: 2}\n", []string{"step a: concurrency: only foreach steps have concurrency"}},
		{"out not a name", "  - {id: p, parallel: [{steps: [{id: a, action: w}]}], out: 'a b'}\n", []string{"step p: out: \"a b\" is not a valid name"}},
		{"nested step without id", "  - {id: p, parallel: [{steps: [{action: w}]}]}\n", []string{"step p.parallel[0].steps[0]: id: missing"}},
		{"nested unknown field", "  - {id: f, foreach: '${[1]}', steps: [{id: a, action: w, colour: red}]}\n", []string{"test.yaml:3:", "step a: colour: unknown field"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refused(t, "saga: x\nsteps:\n"+tt.steps, forks, tt.want...)
		})
	}
}

// Step ids are unique across the definition: top level, every branch and
// every body.
func TestForkIDsUnique(t *testing.T) {
	t.Parallel()
	refused(t, `saga: x
steps:
  - id: a
    action: w
  - id: p
    parallel:
      - steps: [{id: b, action: w}]
      - steps: [{id: a, action: w}]
  - id: f
    foreach: "${[1]}"
    steps: [{id: b, action: w}]
`, forks, "test.yaml:8:17: step a: id: duplicate step id (first used by step #1 at line 3)",
		"test.yaml:11:13: step b: id: duplicate step id (first used by a step of branch 1 of p at line 7)")
}

// next, catch.next and switch stay in their own list; the end of a
// branch or body ends it.
func TestForkTargetsStayInTheirList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      []string
	}{
		{"next out of a branch", `saga: x
steps:
  - id: p
    parallel:
      - steps: [{id: a, action: w, next: z}]
  - id: z
    action: w
`, []string{"test.yaml:5:", "step a: next: step \"z\" is one of the saga's own steps, and this step one of branch 1 of p: next, catch and switch never cross a branch's boundary"}},
		{"next into a body", `saga: x
steps:
  - id: a
    action: w
    next: b
  - id: f
    foreach: "${[1]}"
    steps: [{id: b, action: w}]
`, []string{"step a: next: step \"b\" is one of the body of f, and this step one of the saga's own steps"}},
		{"catch across branches", `saga: x
steps:
  - id: p
    parallel:
      - steps: [{id: a, action: w, catch: [{errors: ["*"], next: b}]}]
      - steps: [{id: b, action: w}]
`, []string{"step a: catch[0].next: step \"b\" is one of branch 2 of p, and this step one of branch 1 of p"}},
		{"switch out of a body", `saga: x
steps:
  - id: f
    foreach: "${[1]}"
    steps:
      - id: s
        switch: [{if: "${index > 0}", next: z}, {default: t}]
      - id: t
        action: w
  - id: z
    action: w
`, []string{"step s: switch[0].next: step \"z\" is one of the saga's own steps"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { refused(t, tt.src, forks, tt.want...) })
	}
	// Within a list, targets work as at the top level.
	accepted(t, `saga: x
steps:
  - id: f
    foreach: "${[1, 2]}"
    steps:
      - id: s
        switch: [{if: "${index > 0}", next: t}, {default: u}]
      - id: t
        action: w
        catch: [{errors: ["*"], next: u}]
      - id: u
        action: w
    catch: [{errors: ["*"], next: z}]
  - id: z
    action: w
`, forks)
}

// A branch or body reads the vars set before the fork and earlier in its
// own list; what it sets stays in it; after the fork, only its out.
func TestForkVars(t *testing.T) {
	t.Parallel()
	accepted(t, `saga: x
steps:
  - id: a
    action: w
    out: before
  - id: p
    parallel:
      - steps:
          - {id: b1, action: w, with: {v: "${vars.before}"}, out: mine}
          - {id: b2, action: w, with: {v: "${vars.mine}"}, compensate: {action: u, with: {v: "${vars.before}", m: "${vars.mine}"}}}
      - steps: [{id: c1, action: w, with: {v: "${vars.before}"}}]
    out: both
  - id: z
    action: w
    with: {v: "${vars.both}", b: "${vars.before}"}
`, forks)
	refused(t, `saga: x
steps:
  - id: p
    parallel:
      - steps: [{id: b1, action: w, out: mine}]
      - steps: [{id: c1, action: w, with: {v: "${vars.mine}"}}]
    out: both
  - id: z
    action: w
    with: {v: "${vars.mine}"}
  - id: y
    action: w
    with: {v: "${vars.both}"}
    next: p
`, forks, "test.yaml:6:", "step c1: with.v: reads vars.mine, but no earlier step sets it here (a step of branch 1 of p sets it",
		"test.yaml:10:", "step z: with.v: reads vars.mine, but no earlier step sets it here (a step of branch 1 of p sets it, and what a branch or foreach body sets stays in it: after the fork, read the fork's out)")
	// A fork's out is not set before the fork, in its own branches.
	refused(t, `saga: x
steps:
  - id: f
    foreach: "${[1]}"
    steps: [{id: b, action: w, with: {v: "${vars.all}"}}]
    out: all
`, forks, "step b: with.v: reads vars.all, but no earlier step sets it")
	// A compensation in a body reads only what every path up to its step set.
	refused(t, `saga: x
steps:
  - id: f
    foreach: "${[1]}"
    steps:
      - {id: s, switch: [{if: "${index == 0}", next: t}, {default: u}]}
      - {id: t, set: {maybe: 1}}
      - {id: u, action: w, compensate: {action: undo, with: {v: "${vars.maybe}"}}}
`, forks, "step u: compensate.with.v: reads vars.maybe, but it may not exist when this compensation runs")
}

// item and index (or the as name) are seen in the body, and in what is
// nested in it, only.
func TestForeachItemScope(t *testing.T) {
	t.Parallel()
	accepted(t, `saga: x
steps:
  - id: f
    foreach: "${[{'sku': 'a'}]}"
    as: order
    steps:
      - {id: a, action: w, with: {sku: "${order.sku}", n: "${index + 1}"}}
      - id: p
        parallel:
          - steps: [{id: b, action: w, with: {sku: "${order.sku}"}}]
          - steps:
              - id: g
                foreach: "${[1, 2]}"
                steps: [{id: c, action: w, with: {o: "${order}", i: "${item}", n: "${index}"}}]
`, forks)
	refused(t, `saga: x
steps:
  - id: f
    foreach: "${[1]}"
    steps: [{id: a, action: w}]
  - id: z
    action: w
    with: {v: "${item}", n: "${index}"}
`, forks, "test.yaml:8:", "step z: with.v: undeclared reference to 'item'", "step z: with.n: undeclared reference to 'index'")
	refused(t, `saga: x
steps:
  - id: f
    foreach: "${[item]}"
    steps: [{id: a, action: w, with: {v: "${elem}"}}]
`, forks, "step f: foreach: undeclared reference to 'item'", "step a: with.v: undeclared reference to 'elem'")
	for _, as := range []string{"input", "vars", "saga", "index", "in", "'null'"} {
		refused(t, "saga: x\nsteps:\n  - {id: f, foreach: '${[1]}', as: "+as+", steps: [{id: a, action: w}]}\n", forks,
			"step f: as: \""+strings.Trim(as, "'")+"\" cannot name the item")
	}
	refused(t, "saga: x\nsteps:\n  - {id: f, foreach: '${[1]}', as: 'a-b', steps: [{id: a, action: w}]}\n", forks, "step f: as: \"a-b\" is not a valid name")
	// An inner foreach's names hide the outer one's.
	accepted(t, `saga: x
steps:
  - id: f
    foreach: "${[[1]]}"
    steps:
      - {id: g, foreach: "${item}", steps: [{id: a, action: w, with: {v: "${item + index}"}}]}
`, forks)
}

// The loop rule holds in each list: a cycle in a branch needs an action,
// a wait or a fork.
func TestForkLoops(t *testing.T) {
	t.Parallel()
	refused(t, `saga: x
steps:
  - id: p
    parallel:
      - steps:
          - {id: a, set: {n: 1}}
          - {id: b, switch: [{if: "${vars.n > 0}", next: a}, {default: c}]}
          - {id: c, action: w}
`, forks, "step a: loop of steps that do no work between passes (a -> b -> a)")
	accepted(t, `saga: x
steps:
  - id: a
    set: {n: 1}
  - id: f
    foreach: "${[1]}"
    steps: [{id: w, set: {m: 1}}]
  - id: b
    switch: [{if: "${vars.n > 0}", next: a}, {default: c}]
  - id: c
    action: w
`, forks)
	refused(t, `saga: x
steps:
  - id: p
    parallel:
      - steps:
          - {id: a, action: w}
          - {id: b, succeed: {}}
          - {id: c, action: w}
`, forks, "step c: unreachable: no path from the first step of branch 1 of p leads here")
}

// The limits: branches, nesting, concurrency, and steps counted nested.
func TestForkLimits(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("saga: x\nsteps:\n  - id: p\n    parallel:\n")
	for i := range lang.MaxBranches + 1 {
		b.WriteString("      - steps: [{id: s" + string(rune('a'+i)) + ", action: w}]\n")
	}
	refused(t, b.String(), forks, "step p: parallel: 21 branches, over the limit of 20")

	nest := "{id: a, action: w}"
	for i := range lang.MaxForkDepth + 1 {
		nest = "{id: f" + string(rune('0'+i)) + ", foreach: '${[1]}', steps: [" + nest + "]}"
	}
	refused(t, "saga: x\nsteps:\n  - "+nest+"\n", forks, "step f0: foreach: a fork 5 deep: parallel, foreach and saga steps nest at most 4 deep")
	nest = "{id: a, action: w}"
	for i := range lang.MaxForkDepth {
		nest = "{id: f" + string(rune('0'+i)) + ", foreach: '${[1]}', steps: [" + nest + "]}"
	}
	accepted(t, "saga: x\nsteps:\n  - "+nest+"\n", forks)

	for _, c := range []string{"0", "101", "1.5", "'10'"} {
		refused(t, "saga: x\nsteps:\n  - {id: f, foreach: '${[1]}', concurrency: "+c+", steps: [{id: a, action: w}]}\n", forks,
			"step f: concurrency: ", "must be a whole number from 1 to 100")
	}
	accepted(t, "saga: x\nsteps:\n  - {id: f, foreach: '${[1]}', concurrency: 100, steps: [{id: a, action: w}]}\n", forks)

	b.Reset()
	b.WriteString("saga: x\nsteps:\n")
	for i := range 3 {
		b.WriteString("  - id: f" + string(rune('a'+i)) + "\n    foreach: '${[1]}'\n    steps:\n")
		for j := range lang.MaxSteps / 3 {
			b.WriteString("      - {id: s" + string(rune('a'+i)) + strings.Repeat("x", j%7) + itoa(j) + ", action: w}\n")
		}
	}
	refused(t, b.String(), forks, "over the limit of 500 steps")
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var d []byte
	for ; i > 0; i /= 10 {
		d = append([]byte{byte('0' + i%10)}, d...)
	}
	return string(d)
}

// saga: FILE reads a child next to the file, checks it in its own file,
// and refuses paths that leave the directory, cycles and clashing ids.
func TestChildSagas(t *testing.T) {
	t.Parallel()
	t.Run("paths", func(t *testing.T) {
		for path, want := range map[string]string{
			"/etc/payment.yaml": "is an absolute path",
			"../payment.yaml":   "leaves this file's directory",
			"a/../../p.yaml":    "leaves this file's directory",
			"sub/":              "names a directory",
			`sub\\payment.yaml`: "backslash",
		} {
			filesRefused(t, map[string]string{"main.yaml": "saga: m\nsteps:\n  - {id: a, saga: \"" + path + "\"}\n"}, "main.yaml:3:", "step a: saga: ", want)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		filesRefused(t, map[string]string{"main.yaml": "saga: m\nsteps:\n  - {id: a, saga: nope.yaml}\n"},
			"main.yaml:3:", "step a: saga: cannot read the child saga: ", "nope.yaml")
	})
	t.Run("child problems in its file", func(t *testing.T) {
		filesRefused(t, map[string]string{
			"main.yaml":     "saga: m\nsteps:\n  - {id: a, saga: sub/pay.yaml}\n",
			"sub/pay.yaml":  "saga: p\nsteps:\n  - {id: b, action: w, with: {v: '${vars.nope}'}}\n  - {id: c, saga: more.yaml}\n",
			"sub/more.yaml": "saga: q\nsteps:\n  - {id: d, acton: w}\n",
		}, "sub/pay.yaml:3:", "step b: with.v: reads vars.nope", "sub/more.yaml:3:", "step d: acton: unknown field")
	})
	t.Run("cycle", func(t *testing.T) {
		filesRefused(t, map[string]string{
			"main.yaml": "saga: m\nsteps:\n  - {id: a, saga: b.yaml}\n",
			"b.yaml":    "saga: b\nsteps:\n  - {id: b, saga: c/c.yaml}\n",
			"c/c.yaml":  "saga: c\nsteps:\n  - {id: c, saga: ../main.yaml}\n",
		}, "c/c.yaml:3:", "leaves this file's directory")
		filesRefused(t, map[string]string{
			"main.yaml": "saga: m\nsteps:\n  - {id: a, saga: b.yaml}\n",
			"b.yaml":    "saga: b\nsteps:\n  - {id: b, saga: main.yaml}\n",
		}, "b.yaml:3:", "step b: saga: child sagas form a cycle: main.yaml -> b.yaml -> main.yaml")
		filesRefused(t, map[string]string{"main.yaml": "saga: m\nsteps:\n  - {id: a, saga: main.yaml}\n"},
			"step a: saga: child sagas form a cycle: main.yaml -> main.yaml")
	})
	t.Run("ids clash", func(t *testing.T) {
		filesRefused(t, map[string]string{
			"main.yaml": "saga: m\nsteps:\n  - {id: charge, action: w}\n  - {id: a, saga: b.yaml}\n",
			"b.yaml":    "saga: b\nsteps:\n  - {id: charge, action: w}\n",
		}, "main.yaml:4:", "step a: saga: step id \"charge\" of b.yaml (line 3) is also a step of this saga (line 3)")
	})
	t.Run("depth counts the child's forks", func(t *testing.T) {
		filesRefused(t, map[string]string{
			"main.yaml": "saga: m\nsteps:\n  - {id: f, foreach: '${[1]}', steps: [{id: g, foreach: '${[1]}', steps: [{id: a, saga: b.yaml}]}]}\n",
			"b.yaml":    "saga: b\nsteps:\n  - {id: p, parallel: [{steps: [{id: q, parallel: [{steps: [{id: w, action: w}]}]}]}]}\n",
		}, "step a: saga: with the forks of b.yaml, forks nest 5 deep here")
	})
	t.Run("input", func(t *testing.T) {
		child := "saga: b\ninput: {amount: double, note: string, at: timestamp}\nsteps:\n  - {id: c, action: w}\n"
		filesRefused(t, map[string]string{
			"main.yaml": `saga: m
input: {n: int, s: string}
steps:
  - id: a
    saga: b.yaml
    with: {amount: "${input.s}", note: 5, extra: 1, at: "${input.n}"}
`, "b.yaml": child},
			"step a: with.amount: saga b declares input amount a double, but this is a string",
			"step a: with.note: saga b declares input note a string, but this is a",
			"step a: with.extra: saga b declares no input extra (it declares amount, at, note)",
			"step a: with.at: saga b declares input at a timestamp, but this is an int")
		filesRefused(t, map[string]string{"main.yaml": "saga: m\nsteps:\n  - {id: a, saga: b.yaml}\n", "b.yaml": child},
			"step a: with.amount: missing: saga b declares input amount (double)", "step a: with.note: missing")
		if _, err := compileFiles(map[string]string{"main.yaml": `saga: m
input: {n: int}
steps:
  - id: a
    saga: b.yaml
    with: {amount: "${input.n}", note: "order ${input.n}", at: "2026-01-01T00:00:00Z"}
`, "b.yaml": child}, forks); err != nil {
			t.Errorf("a fitting input refused: %v", err)
		}
	})
	t.Run("no file system", func(t *testing.T) {
		refused(t, "saga: m\nsteps:\n  - {id: a, saga: b.yaml}\n", forks, "test.yaml:3:", "step a: saga: a child saga is read from a file next to this one, and there is none here")
	})
}

// A definition with children is stored as a bundle: its hash covers every
// child, and Compile reads the bundle back with no file system. One
// without children keeps its source as its bundle, and its hash.
func TestBundles(t *testing.T) {
	t.Parallel()
	files := map[string]string{"main.yaml": tripYAML, "payment.yaml": paymentYAML}
	p, err := compileFiles(files, forks)
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Source()) == tripYAML || !strings.HasPrefix(string(p.Source()), "lambdasaga bundle 1\nsaga ") {
		t.Fatalf("source is not a bundle:\n%s", p.Source())
	}
	back, err := saga.Compile("main.yaml", p.Source(), forks)
	if err != nil {
		t.Fatalf("the bundle does not compile back: %v", err)
	}
	if back.Hash() != p.Hash() || string(back.Source()) != string(p.Source()) {
		t.Errorf("compiled back to hash %s, want %s", back.Hash(), p.Hash())
	}
	if c, ok := back.Child("pay"); !ok || c.Name() != "payment" || c.Hash() != saga.DefinitionHash([]byte(paymentYAML)) {
		t.Errorf("child of pay: %v %v", c, ok)
	}
	// A change in the child changes the parent's hash.
	files["payment.yaml"] = paymentYAML + "  - {id: notify, action: w}\n"
	p2, err := compileFiles(files, forks)
	if err != nil {
		t.Fatal(err)
	}
	if p2.Hash() == p.Hash() {
		t.Error("the parent's hash does not cover its child")
	}
	// Without children: the source, and its hash, as Compile gives it.
	plain := "saga: x\nsteps:\n  - {id: a, action: w}\n"
	q, err := compileFiles(map[string]string{"main.yaml": plain}, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(plain))
	if string(q.Source()) != plain || q.Hash() != hex.EncodeToString(sum[:]) {
		t.Errorf("a definition without children: source %q, hash %s", q.Source(), q.Hash())
	}
	// A bundle that is not as Compile writes it is refused.
	bad := strings.Replace(string(p.Source()), "file ", "file 3 extra.yaml\nabc\nfile ", 1)
	if _, err := saga.Compile("main.yaml", []byte(bad), forks); err == nil || !strings.Contains(err.Error(), "the bundle is not as Compile writes it") {
		t.Errorf("an extra file in a bundle: %v", err)
	}
	for _, cut := range []int{len("lambdasaga bundle 1\n"), len(p.Source()) - 2} {
		if _, err := saga.Compile("main.yaml", p.Source()[:cut], forks); !errors.Is(err, lang.ErrInvalidDefinition) {
			t.Errorf("a bundle cut at %d: %v", cut, err)
		}
	}
}
