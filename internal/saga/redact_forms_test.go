package saga_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"

	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"
)

// assertMasked checks that each form, inside a message, is masked whole.
func assertMasked(t *testing.T, r *saga.Redactor, forms ...string) {
	t.Helper()
	for _, f := range forms {
		text := "declined: " + f + ", try again"
		if got, want := r.Text(text), "declined: "+saga.Mask+", try again"; got != want {
			t.Errorf("Text(%q) = %q, want %q", text, got, want)
		}
	}
}

// assertShown checks that each text, holding no secret, is left as it is.
func assertShown(t *testing.T, r *saga.Redactor, texts ...string) {
	t.Helper()
	for _, text := range texts {
		if got := r.Text(text); got != text {
			t.Errorf("Text(%q) = %q, want it unchanged", text, got)
		}
	}
}

func TestRedactorMasksDurationInEveryForm(t *testing.T) {
	t.Parallel()
	r := redactorOf(t, "d: secret duration", "26h3m4s")
	cel := types.Duration{Duration: 93784e9}
	assertMasked(t, r,
		"26h3m4s",        // Go
		"93784s",         // CEL's string() and protobuf JSON
		"93784000000000", // encoding/json: nanoseconds
		string(cel.ConvertToType(types.StringType).(types.String)),
	)
	if got := r.Text("d is " + types.Format(cel)); strings.Contains(got, "93784") {
		t.Errorf("CEL's format shows as %q", got)
	}
	assertShown(t, r, "waited 93785s", "took 26h3m5s")

	r = redactorOf(t, "d: secret duration", "1.5s")
	assertMasked(t, r, "1.5s", "1.500s", "1500000000")

	r = redactorOf(t, "d: secret duration", "93784.5s")
	assertMasked(t, r, "93784.5s", "93784.500s", "26h3m4.5s")
	assertShown(t, r, "93784s", "took 93785s")
}

func TestRedactorMasksNumberInEveryForm(t *testing.T) {
	t.Parallel()
	r := redactorOf(t, "pin: secret int", json.Number("4242"))
	assertMasked(t, r, "4242", "4242.0", "4.242e+03")
	assertShown(t, r, "order 424", "pin 42")

	r = redactorOf(t, "card: secret int", json.Number("4111111111111111"))
	f := float64(4111111111111111)
	j, _ := json.Marshal(f)
	assertMasked(t, r, "4111111111111111", "4111111111111111.0", "4.111111111111111e+15",
		fmt.Sprint(f), string(j), string(types.Double(f).ConvertToType(types.StringType).(types.String)), types.Format(types.Double(f)))

	r = redactorOf(t, "rate: secret double", json.Number("0.125"))
	assertMasked(t, r, "0.125", "1.25e-01")

	r = redactorOf(t, "big: secret double", json.Number("1e21"))
	j, _ = json.Marshal(1e21)
	assertMasked(t, r, string(j), "1000000000000000000000", "1000000000000000000000.0", "1e+21")

	r = redactorOf(t, "n: secret uint", json.Number("987654"))
	assertMasked(t, r, "987654", "987654u", "987654.0", "9.87654e+05")
}

func TestRedactorMasksTimestampAtAnyOffset(t *testing.T) {
	t.Parallel()
	r := redactorOf(t, "born: secret timestamp", "2026-12-01T20:07:43.5+02:00")
	assertMasked(t, r,
		"2026-12-01T18:07:43.5Z", // RFC 3339 in UTC, as CEL prints it
		"2026-12-01T18:07:43.500Z",
		"2026-12-01T20:07:43.5+02:00",
		"2026-12-01T20:07:43.500000+02:00", // Python's isoformat
		"2026-12-01T13:37:43.5-04:30",
		"2026-12-01 18:07:43.5+00:00", // Python's str
		"2026-12-01T18:07:43.5",       // without an offset: UTC
	)
	for _, text := range []string{"born 2026-12-01 18:07:43.5 +0000 UTC", "born 2026-12-01 20:07:43.5 +0200 +0200"} { // Go's String
		if got := r.Text(text); strings.Contains(got, "43.5") {
			t.Errorf("Text(%q) = %q", text, got)
		}
	}
	assertMasked(t, r, "2026-12-01T18:07:43Z", "2026-12-01T18:07:43.500000Z") // Go's RFC3339, cut to seconds; microseconds
	assertShown(t, r, "2026-12-01T18:07:44Z", "2026-12-01T18:07:43.6Z", "2026-12-01T18:07:43.5+02:00", "on 2026-12-01")

	r = redactorOf(t, "born: secret timestamp", "2026-12-01T20:07:43+02:00")
	assertMasked(t, r, "2026-12-01T18:07:43Z", "2026-12-01T20:07:43+02:00", "2026-12-01T18:07:43.000Z", "2026-12-01t18:07:43z")
	assertShown(t, r, "2026-12-01T18:07:43.5Z", "2026-12-01T18:07:44Z")
}

func TestRedactorMasksBytesInEveryForm(t *testing.T) {
	t.Parallel()
	key := []byte{0xfb, 0xff, 0xbf, 'k', 'e', 'y', '/'}
	r := redactorOf(t, "key: secret bytes", key)
	std, _ := json.Marshal(key)
	assertMasked(t, r,
		string(std[1:len(std)-1]), // as JSON carries them
		"-_-_a2V5Lw==",            // URL-safe
		"-_-_a2V5Lw",
		"+/+/a2V5Lw",
		`+\/+\/a2V5Lw==`, // JSON escaping its slashes
		"fbffbf6b65792f", // hex
	)
	if got := r.Text("key " + types.Format(types.Bytes(key))); strings.Contains(got, `\373\377`) {
		t.Errorf("CEL's b\"...\" form shows as %q", got)
	}
}

// A secret quoted by another encoder than Go's JSON is masked as well:
// Python's json.dumps (its default ASCII escapes, and without them), an
// escaped slash, JSON quoted as a JSON string, Go's QuoteToASCII.
func TestRedactorMasksEscapedSecrets(t *testing.T) {
	t.Parallel()
	secret := `pä"ss/wörd\😀`
	r := redactorOf(t, "s: secret string", secret)
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	once := quote(secret)
	assertMasked(t, r,
		`p\u00e4\"ss/w\u00f6rd\\\ud83d\ude00`,  // Python's json.dumps
		`pä\"ss/wörd\\😀`,                       // Python's json.dumps, ensure_ascii=False
		`p\u00e4\"ss\/w\u00f6rd\\\ud83d\ude00`, // and an escaped slash
		`pä\"ss\/wörd\\😀`,
		quote(once), // JSON inside a JSON string
		quote(quote(once)),
		`p\\u00e4\\\"ss/w\\u00f6rd\\\\\\ud83d\\ude00`, // Python's, quoted as JSON
		strings.Trim(strconv.QuoteToASCII(secret), `"`),
		strings.Trim(strconv.Quote(once), `"`), // Go's %q of JSON
	)
	assertShown(t, r, `p\u00e4ss`, `pä\"ss`)
}

// A long secret that every encoder escapes is quoted nested only while
// short: its needles stay a few times its size, not hundreds.
func TestRedactorBoundsTheFormsOfALongSecret(t *testing.T) {
	t.Parallel()
	secret := strings.Repeat(`"/ä\`, 16<<10) // 80 KiB, under MaxInputBytes
	r := redactorOf(t, "s: secret string", secret)
	total := 0
	for _, n := range r.Needles() {
		total += len(n)
	}
	if total > 12*len(secret) {
		t.Errorf("%d needles of %d bytes in all for a secret of %d", len(r.Needles()), total, len(secret))
	}
	if got := r.Text("x " + secret + " y"); got != "x "+saga.Mask+" y" {
		t.Errorf("the secret shows: %.40q...", got)
	}
}

// A child saga that inherited a secret timestamp's text finds the instant
// at any offset, as its parent does.
func TestRedactorMasksAnInheritedTimestampAtAnyOffset(t *testing.T) {
	t.Parallel()
	p := sagatest.MustCompile(t, "saga: c\ninput: {note: string}\nsteps: [{id: a, action: w}]\n")
	st := &saga.State{Input: map[string]any{"note": "n"}, Inherited: []string{"2026-12-01 18:07:43.5 +0000 UTC", "2026-12-01T18:07:43.5Z", "2026-12-01T18:07:43Z"}}
	r := p.Redactor(st)
	assertMasked(t, r, "2026-12-01T18:07:43.5Z", "2026-12-01T20:07:43.5+02:00", "2026-12-01T20:07:43.500+02:00")
	assertShown(t, r, "2026-12-01T20:07:44+02:00")
}
