package saga_test

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"
)

const card = "4111111111111111"

const cardYAML = `saga: pay
input: {order_id: string, card_number: secret string, cvv: secret string, pin: secret int}
steps:
  - id: charge
    action: payments.charge
    with: {order_id: "${input.order_id}", card: "${input.card_number}", cvv: "${input.cvv}"}
    out: payment
`

func cardInput() map[string]any {
	return map[string]any{"order_id": "o-1", "card_number": card, "cvv": "737", "pin": int64(12)}
}

func TestPlanWithoutSecretsHasNilRedactor(t *testing.T) {
	t.Parallel()
	p := sagatest.MustCompile(t, "saga: x\ninput: {card: string}\nsteps: [{id: a, action: w}]\n")
	if r := p.RedactorFor(map[string]any{"card": card}); r != nil {
		t.Fatalf("redactor %v for a plan without secrets", r)
	}
	var r *saga.Redactor
	err := errors.New("card " + card)
	if r.Text(card) != card || r.Error(err) != err || r.Value("x "+card) != "x "+card || r.Input(nil) != nil {
		t.Fatal("a nil redactor changed what it was given")
	}
	if got := p.Secrets(); got != nil {
		t.Fatalf("Secrets() = %v", got)
	}
}

func TestRedactorText(t *testing.T) {
	t.Parallel()
	p := sagatest.MustCompile(t, cardYAML)
	if got := strings.Join(p.Secrets(), ","); got != "card_number,cvv,pin" {
		t.Fatalf("Secrets() = %s", got)
	}
	r := p.RedactorFor(cardInput())
	for in, want := range map[string]string{
		"card " + card + " declined":          "card [secret] declined",
		`{"card":"` + card + `","cvv":"737"}`: `{"card":"[secret]","cvv":"[secret]"}`,
		card + card:                           "[secret]",
		"cvv 737, pin 12, order o-1":          "cvv [secret], pin 12, order o-1", // 12 is under MinSecretText
		"declined: 411111111111…(cut)":        "declined: [secret]…(cut)",        // the start of a cut-off card
		"declined: 4111111111":                "declined: 4111111111",            // not cut: not a card
		"amount 41…(cut)":                     "amount 41…(cut)",                 // too short a start to mask
		"nothing secret here":                 "nothing secret here",
		fmt.Sprintf("%q", "card "+card):       `"card [secret]"`,
	} {
		if got := r.Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

// A secret holding what JSON escapes is masked in its JSON form too.
func TestRedactorTextJSONForm(t *testing.T) {
	t.Parallel()
	p := sagatest.MustCompile(t, "saga: x\ninput: {s: secret string}\nsteps: [{id: a, action: w}]\n")
	secret := `pa"ss<wo>rd\`
	r := p.RedactorFor(map[string]any{"s": secret})
	b, _ := json.Marshal(map[string]any{"password": secret})
	if got := r.Text(string(b)); got != `{"password":"[secret]"}` {
		t.Fatalf("Text(%s) = %s", b, got)
	}
}

func TestRedactorValueAndState(t *testing.T) {
	t.Parallel()
	p := sagatest.MustCompile(t, cardYAML)
	in, err := p.CheckInput(cardInput())
	if err != nil {
		t.Fatal(err)
	}
	st := &saga.State{
		SagaID:  "s-1",
		Input:   in,
		Vars:    map[string]any{"payment": map[string]any{"echo": "card " + card, "last": int64(4111111111111111), "ok": true, card: "key"}},
		Failure: &saga.StepError{Step: "charge", Type: "CardDeclined", Message: "card " + card + " declined"},
		Secret:  []byte("k"),
	}
	r := p.Redactor(st)
	shown := r.State(st)
	b, err := json.Marshal(map[string]any{"input": shown.Input, "vars": shown.Vars, "failure": shown.Failure})
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{card, "737", "4111"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("shown state holds %q: %s", secret, b)
		}
	}
	if shown.Input["pin"] != saga.Mask || shown.Input["order_id"] != "o-1" || shown.Secret != nil {
		t.Errorf("input shown %v, secret %v", shown.Input, shown.Secret)
	}
	if st.Input["card_number"] != card || st.Failure.Message != "card "+card+" declined" || st.Vars["payment"].(map[string]any)["echo"] != "card "+card {
		t.Error("State changed the state it was given")
	}
	err = r.Error(fmt.Errorf("wrapped: %w", saga.NewError("CardDeclined", card)))
	var ae *saga.ActionError
	if strings.Contains(err.Error(), card) || !errors.As(err, &ae) {
		t.Errorf("Error: %q (still an ActionError: %v)", err, ae != nil)
	}
}

// A secret that could be found again in the mask (part of it, or a
// bracket beside it) gets a mask of a byte it does not hold.
func TestRedactorMaskNeverHoldsASecret(t *testing.T) {
	t.Parallel()
	p := sagatest.MustCompile(t, "saga: x\ninput: {a: secret string, b: secret string}\nsteps: [{id: a, action: w}]\n")
	for _, in := range []map[string]any{
		{"a": "secr", "b": "t]xy"},
		{"a": "ret]", "b": "[sec"},
		{"a": "***", "b": "*]*"},
	} {
		r := p.RedactorFor(in)
		text := fmt.Sprintf("%s%sxy %s [secret] %s", in["a"], in["b"], in["b"], in["a"])
		got := r.Text(text)
		for _, s := range in {
			if strings.Contains(got, s.(string)) {
				t.Errorf("Text(%q) = %q holds %q", text, got, s)
			}
		}
	}
}

// Whatever surrounds them, no secret of MinSecretText bytes or more is
// left in what Text returns, in any form a secret of each type prints as
// (secretForms); a text holding none of them, no cut mark and no date is
// left as it is; masking a map's keys or an input's field names never drops
// or merges one.
func FuzzRedactorText(f *testing.F) {
	p := sagatest.MustCompile(f, "saga: x\ninput: {a: secret string, b: secret any, d: secret duration, n: secret int, x: secret double, t: secret timestamp, y: secret bytes}\nsteps: [{id: a, action: w}]\n")
	f.Add("card 4111111111111111 declined", "4111111111111111", "737", int64(93784e9), int64(4242), 0.125, int64(1796148463500000000), int16(120), []byte("key/+"))
	f.Add("secret]]x[secret", "ret]", "[se", int64(1500e6), int64(-12), 1e21, int64(0), int16(-270), []byte{0xfb, 0xff})
	f.Add("aaaaaaaaab", "aaab", "aab", int64(-1), int64(1<<62), -0.5, int64(-1), int16(0), []byte{})
	f.Add(`"a\"b"`, `a"b`, "x", int64(0), int64(0), 0.0, int64(1), int16(1439), []byte("abc"))
	f.Add("amount 411", "4111", `p\u00e4"/\`, int64(60e9), int64(411), 4.2e-7, int64(math.MinInt64), int16(-1439), []byte("ä"))
	f.Add("x: 2026-12-01T20:07:43.5+02:00 …(cut)", "pä\"ss/wörd\\😀", "\u2028<&>", int64(1), int64(987654), 42.0, int64(1796148463500000000), int16(90), []byte{0})
	f.Add("holy", "alpha", "ly#", int64(0), int64(0), 0.0, int64(0), int16(0), []byte{}) // "[secret] holy#2" holds "ly#"
	f.Fuzz(func(t *testing.T, text, a, b string, d, n int64, x float64, ts int64, off int16, y []byte) {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			x = 0 // a double input is finite: CheckInput refuses the others
		}
		key := b + "k" // a secret any's map key is as secret as its values
		born := time.Unix(0, ts).UTC()
		r := p.RedactorFor(map[string]any{"a": a, "b": []any{b, map[string]any{key: int64(1)}}, "d": time.Duration(d), "n": n, "x": x, "t": born, "y": y})
		zone := time.FixedZone("", int(off)%(24*60)*60)
		forms := slices.DeleteFunc(slices.Concat(stringForms(a), stringForms(b), stringForms(key), durationForms(time.Duration(d)),
			numberForms(strconv.FormatInt(n, 10), float64(n)), numberForms(strconv.FormatFloat(x, 'g', -1, 64), x),
			timestampForms(born, zone), bytesForms(y)),
			func(form string) bool { return len(form) < saga.MinSecretText }) // -1 of a -1ns duration

		for _, form := range forms {
			in := text[:len(text)/2] + form + text[len(text)/2:]
			if got := r.Text(in); strings.Contains(got, form) {
				t.Fatalf("Text(%q) = %q: holds %q", in, got, form)
			}
		}
		if !slices.ContainsFunc(forms, func(form string) bool { return strings.Contains(text, form) }) &&
			!strings.Contains(text, "(cut)") && !datePattern.MatchString(text) {
			if got := r.Text(text); got != text {
				t.Fatalf("Text(%q) = %q, holding no secret (needles %q)", text, got, r.Needles())
			}
		}

		m := map[string]any{}
		for i, k := range []string{text, text + a, a + text, a + " " + text, saga.Mask + " " + text, b, key, a, saga.Mask, saga.Mask + "#2", text + "#2", born.Format(time.RFC3339Nano)} {
			m[k] = []any{i&1 == 1, i&2 == 2, i&4 == 4, i&8 == 8} // bools: a value no secret masks
		}
		shown := r.Value(m).(map[string]any)
		if len(shown) != len(m) {
			t.Fatalf("Value(%q) = %q: lost a key", m, shown)
		}
		values := map[string]bool{}
		for name, v := range shown {
			values[fmt.Sprint(v)] = true
			for _, form := range forms {
				if strings.Contains(name, form) {
					t.Fatalf("Value(%q) shows a key as %q: holds %q", m, name, form)
				}
			}
		}
		if len(values) != len(m) {
			t.Fatalf("Value(%q) = %q: merged values", m, shown)
		}
		in := map[string]any{text: "v", a: "w", saga.Mask: "x"}
		if got := r.Input(in); len(got) != len(in) {
			t.Fatalf("Input(%q) = %q: lost a field", in, got)
		}

		for _, html := range []bool{true, false} {
			if got, want := saga.JSONQuote(text, html), jsonBody(text, html); got != want {
				t.Fatalf("jsonQuote(%q, %v) = %q, encoding/json writes %q", text, html, got, want)
			}
		}
	})
}

var datePattern = regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}`)

// stringForms lists how the text of a secret string shows, as other
// programs than the redactor write it: as itself, quoted by encoding/json
// (with and without HTML escapes, with escaped slashes), by Python's
// json.dumps, by Go's %q and QuoteToASCII, and JSON inside JSON. None when
// it is shorter than MinSecretText.
func stringForms(s string) []string {
	if len(s) < saga.MinSecretText {
		return nil
	}
	goQuote := func(q string) string { return q[1 : len(q)-1] }
	j := jsonBody(s, false)
	forms := []string{s, jsonBody(s, true), j, strings.ReplaceAll(j, "/", `\/`), pythonDumps(s),
		goQuote(strconv.Quote(s)), goQuote(strconv.QuoteToASCII(s))}
	short := func(inner ...string) bool {
		return !slices.ContainsFunc(inner, func(f string) bool { return len(f) > 4<<10 })
	}
	if short(jsonBody(s, true), j, jsonBody(j, false), pythonDumps(s)) { // quoted again only while short (maxNestedQuote)
		forms = append(forms, jsonBody(jsonBody(s, true), true), jsonBody(jsonBody(j, false), false),
			jsonBody(pythonDumps(s), false), goQuote(strconv.Quote(j)))
	}
	return forms
}

// jsonBody is s as encoding/json quotes it, without the quotes.
func jsonBody(s string, html bool) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(s); err != nil {
		panic(err)
	}
	q := strings.TrimSuffix(b.String(), "\n")
	return q[1 : len(q)-1]
}

// pythonDumps is s as Python's json.dumps quotes it, without the quotes.
func pythonDumps(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// durationForms lists how a secret duration shows: as Go, CEL (string()
// and its format) and encoding/json write it.
func durationForms(d time.Duration) []string {
	if len(d.String()) < saga.MinSecretText {
		return nil
	}
	j, _ := json.Marshal(d)
	return []string{d.String(), celString(types.Duration{Duration: d}), types.Format(types.Duration{Duration: d}), string(j)}
}

// numberForms lists how a secret number whose own text is text shows: as
// it is, and as a double as CEL (string() and its format), Go's %v and
// encoding/json write it.
func numberForms(text string, x float64) []string {
	if len(text) < saga.MinSecretText {
		return nil
	}
	j, _ := json.Marshal(x)
	return []string{text, celString(types.Double(x)), types.Format(types.Double(x)), fmt.Sprint(x), string(j)}
}

// timestampForms lists how a secret timestamp shows: as CEL writes it (in
// UTC), and in zone in RFC 3339 with all its digits, with milliseconds,
// without its fraction, and as Go prints a time.Time.
func timestampForms(t time.Time, zone *time.Location) []string {
	in := t.In(zone)
	return []string{celString(types.Timestamp{Time: t}), in.Format(time.RFC3339Nano), in.Format("2006-01-02T15:04:05.000Z07:00"),
		in.Format(time.RFC3339), in.String()}
}

// bytesForms lists how secret bytes show: as they are (CEL's string() of
// UTF-8 bytes), as JSON carries them (base64), URL-safe, without padding,
// with JSON's escaped slashes, in hex, and as CEL formats them (octal
// escapes).
func bytesForms(y []byte) []string {
	if len(y) < saga.MinSecretText {
		return nil
	}
	std := base64.StdEncoding.EncodeToString(y)
	return []string{string(y), std, base64.URLEncoding.EncodeToString(y), base64.RawStdEncoding.EncodeToString(y), base64.RawURLEncoding.EncodeToString(y),
		strings.ReplaceAll(std, "/", `\/`), hex.EncodeToString(y), strings.TrimSuffix(strings.TrimPrefix(types.Format(types.Bytes(y)), `b"`), `"`)}
}

func celString(v ref.Val) string { return string(v.ConvertToType(types.StringType).(types.String)) }

// A plan without secrets pays nothing for redaction: no allocation.
func TestRedactorWithoutSecretsAllocatesNothing(t *testing.T) {
	p := sagatest.MustCompile(t, "saga: x\ninput: {card: string}\nsteps: [{id: a, action: w}]\n")
	st := &saga.State{Input: map[string]any{"card": card}, Failure: &saga.StepError{Message: card}}
	err := errors.New(card)
	if n := testing.AllocsPerRun(100, func() {
		r := p.Redactor(st)
		_, _, _, _ = r.Text(card), r.Error(err), r.State(st), r.StepError(st.Failure)
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// BenchmarkRedactorText masks a 1 KiB error message (the most a step
// error keeps) holding a card number, with a plan of three secrets.
func BenchmarkRedactorText(b *testing.B) {
	p := sagatest.MustCompile(b, cardYAML)
	r := p.RedactorFor(cardInput())
	msg := strings.Repeat("x", 500) + " card " + card + " " + strings.Repeat("y", 500)
	b.ReportAllocs()
	for b.Loop() {
		_ = r.Text(msg)
	}
}

// BenchmarkRedactorTextCutMarks masks a 1 KiB message made of cut
// messages' marks beside a long secret that every encoder escapes: the
// worst a message can make of the search for cut-off secrets.
func BenchmarkRedactorTextCutMarks(b *testing.B) {
	p := sagatest.MustCompile(b, "saga: x\ninput: {s: secret string}\nsteps: [{id: a, action: w}]\n")
	r := p.RedactorFor(map[string]any{"s": strings.Repeat(`"/ä\`, 16<<10)})
	msg := strings.Repeat(`"/…(cut)`, 1024/10)
	b.ReportAllocs()
	for b.Loop() {
		_ = r.Text(msg)
	}
}

// BenchmarkRedactorBuild builds the redactor of a run, as each handled
// message of a plan with secrets does.
func BenchmarkRedactorBuild(b *testing.B) {
	p := sagatest.MustCompile(b, cardYAML)
	st := &saga.State{Input: cardInput()}
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Redactor(st)
	}
}

// redactorOf compiles a saga with the one input field decl ("d: secret
// duration") and returns the redactor of a run given value, as CheckInput
// converts it.
func redactorOf(t *testing.T, decl string, value any) *saga.Redactor {
	t.Helper()
	p := sagatest.MustCompile(t, "saga: x\ninput: {"+decl+"}\nsteps: [{id: a, action: w}]\n")
	name, _, _ := strings.Cut(decl, ":")
	in, err := p.CheckInput(map[string]any{name: value})
	if err != nil {
		t.Fatal(err)
	}
	return p.RedactorFor(in)
}

// The start of a secret is masked only where a message was cut: a text
// that merely ends as a secret begins is whole.
func TestRedactorMasksACutSecretOnlyWhereMarked(t *testing.T) {
	t.Parallel()
	r := redactorOf(t, "card: secret string", card)
	for in, want := range map[string]string{
		"declined: 41111111…(cut)":                 "declined: " + saga.Mask + "…(cut)",
		"step a: T: declined: 411111…(cut): retry": "step a: T: declined: " + saga.Mask + "…(cut): retry",
		`{"error":"declined: 411111\u2026(cut)"}`:  `{"error":"declined: ` + saga.Mask + `\u2026(cut)"}`,
		"amount 411":           "amount 411",
		"declined: 4111111111": "declined: 4111111111",
	} {
		if got := r.Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
	if got := r.Value(int64(411)); got != int64(411) {
		t.Errorf("Value(411) = %v, want it shown", got)
	}
}

// Keys that mask alike all stay, each under its own name, and a key that
// holds no secret keeps its name.
func TestRedactorKeepsKeysThatMaskAlike(t *testing.T) {
	t.Parallel()
	p := sagatest.MustCompile(t, "saga: x\ninput: {a: secret string, b: secret string, note: string}\nsteps: [{id: s, action: w}]\n")
	r := p.RedactorFor(map[string]any{"a": "alpha", "b": "bravo", "note": "n"})
	m := map[string]any{"alpha": 1, "bravo": 2, saga.Mask: 3, saga.Mask + "#2": 4, "x alpha": 5, "x bravo": 6}
	shown := r.Value(m).(map[string]any)
	if len(shown) != len(m) {
		t.Fatalf("Value(%v) = %v: lost a key", m, shown)
	}
	if shown[saga.Mask] != 3 || shown[saga.Mask+"#2"] != 4 {
		t.Errorf("Value(%v) = %v: renamed a key that holds no secret", m, shown)
	}
	seen := map[any]bool{}
	for k, v := range shown {
		if strings.Contains(k, "alpha") || strings.Contains(k, "bravo") {
			t.Errorf("key %q shows a secret", k)
		}
		seen[v] = true
	}
	if len(seen) != len(m) {
		t.Errorf("Value(%v) = %v: merged values", m, shown)
	}
	if again := r.Value(m); fmt.Sprint(again) != fmt.Sprint(shown) {
		t.Errorf("Value is not deterministic: %v, then %v", shown, again)
	}
	in := map[string]any{"a": "alpha", "b": "bravo", "note": "n", "alpha": "x", "bravo": "y"}
	if got := r.Input(in); len(got) != len(in) {
		t.Errorf("Input(%v) = %v: lost a field", in, got)
	}
}

// A masked key's suffix can meet a secret: "KEY#2" holds "ly#" when a key
// masks to "[secret] holy" and "ly#" is secret. It still gets a name, one
// that shows no secret.
func TestRedactorNamesAKeyWhoseSuffixMeetsASecret(t *testing.T) {
	t.Parallel()
	p := sagatest.MustCompile(t, "saga: x\ninput: {a: secret string, b: secret string}\nsteps: [{id: s, action: w}]\n")
	r := p.RedactorFor(map[string]any{"a": "alpha", "b": "ly#"})
	m := map[string]any{saga.Mask + " holy": 1, "alpha holy": 2, "beta": 3}
	done := make(chan map[string]any, 1)
	go func() { done <- r.Value(m).(map[string]any) }()
	select {
	case shown := <-done:
		if len(shown) != len(m) {
			t.Fatalf("Value(%v) = %v: lost a key", m, shown)
		}
		for k := range shown {
			if r.Text(k) != k {
				t.Errorf("key %q shows a secret", k)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Value never named the key")
	}
}

// A child saga whose input holds its parent's secret timestamp at another
// offset than UTC inherits it, and masks it at any offset.
func TestChildSagaInheritsASecretTimestampAtAnyOffset(t *testing.T) {
	t.Parallel()
	p, err := compileFiles(map[string]string{
		"main.yaml": "saga: m\ninput: {born: secret timestamp, note: string}\nsteps:\n  - id: pay\n    saga: pay.yaml\n    with: {ref: \"${input.note}\"}\n",
		"pay.yaml":  "saga: p\ninput: {ref: string}\nsteps: [{id: a, action: w}]\n",
	}, forks)
	if err != nil {
		t.Fatal(err)
	}
	in, err := p.CheckInput(map[string]any{"born": "2026-12-01T18:07:43.5Z", "note": "born 2026-12-01T20:07:43.5+02:00"})
	if err != nil {
		t.Fatal(err)
	}
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1", Input: in}); err != nil {
		t.Fatal(err)
	}
	cp, cs, err := p.Launch(st, 0)
	if err != nil {
		t.Fatal(err)
	}
	child := &saga.State{}
	if err := cp.Advance(child, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1.pay", Input: cs.Input, Child: cs}); err != nil {
		t.Fatal(err)
	}
	r := cp.Redactor(child)
	if got := r.State(child).Input["ref"]; got != "born "+saga.Mask {
		t.Errorf("the child's input shows as %q (inherited %q)", got, child.Inherited)
	}
	if got := r.Text("born 2026-12-01T13:07:43.5-05:00"); got != "born "+saga.Mask {
		t.Errorf("the child shows %q", got)
	}
}

// The map keys inside a secret any are secrets too. A secret field
// holding {"tok_live_9f8e7d6c": ...} (an API key used as a key, a card
// number mapping to its holder) must not show wherever the saga copies
// it: its vars in status and the console, an error message.
// docs/DEFINITIONS.md, "Secrets: what is hidden where": the Redactor
// masks "every string and number inside a secret any".
func TestSecretAnyMasksItsMapKeys(t *testing.T) {
	t.Parallel()
	p, err := compileFiles(map[string]string{"main.yaml": `saga: m
input: {extra: secret any}
steps:
  - id: keep
    set: {copy: "${input.extra}"}
  - id: a
    action: w
`}, forks)
	if err != nil {
		t.Fatal(err)
	}
	const key = "tok_live_9f8e7d6c"
	in, err := p.CheckInput(map[string]any{"extra": map[string]any{key: "holder"}})
	if err != nil {
		t.Fatal(err)
	}
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1", Input: in}); err != nil {
		t.Fatal(err)
	}
	red := p.Redactor(st)
	shown := red.State(st)
	b, _ := json.Marshal(shown.Vars)
	if strings.Contains(string(b), key) {
		t.Errorf("the shown vars %s hold the secret input's key %s", b, key)
	}
	if msg := red.Text("declined: unknown token " + key); strings.Contains(msg, key) {
		t.Errorf("a message masked as %q still holds the secret input's key", msg)
	}
}
