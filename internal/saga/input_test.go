package saga_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/saga"
)

func TestCheckInputNumbersAtTheirLimits(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `
saga: nums
input: {i: int, u: uint, d: double, a: any, l: list}
steps: [{id: a, set: {x: 1}}]
`)
	check := func(t *testing.T, src string) (map[string]any, error) {
		t.Helper()
		return p.CheckInput(decodeInput(t, src))
	}
	base := `"i": 1, "u": 1, "d": 1, "a": 1, "l": []`
	in, err := check(t, `{"i": -9223372036854775808, "u": 18446744073709551615, "d": 1e308, "a": 18446744073709551615, "l": [9223372036854775808, -1, 1.5]}`)
	if err != nil {
		t.Fatal(err)
	}
	if in["i"] != int64(-1<<63) || in["u"] != uint64(1<<64-1) || in["d"] != 1e308 || in["a"] != uint64(1<<64-1) {
		t.Fatalf("converted %#v", in)
	}
	if l := in["l"].([]any); l[0] != uint64(1<<63) || l[1] != int64(-1) || l[2] != 1.5 {
		t.Fatalf("list %#v", l)
	}
	for _, tc := range []struct{ field, value, want string }{
		{"i", "9223372036854775808", "input.i: number out of range for int"},
		{"i", "-9223372036854775809", "input.i: number out of range for int"},
		{"i", "1e19", "input.i: number out of range for int"},
		{"i", "1e400", "input.i: number out of range for int"},
		{"u", "18446744073709551616", "input.u: number out of range for uint"},
		{"u", "1e400", "input.u: number out of range for uint"},
		{"u", "-1", "input.u: want uint, got a negative int"},
		{"d", "1e400", "input.d: number out of range for double"},
		{"d", "-1e400", "input.d: number out of range for double"},
		{"a", "1e400", "input.a: number out of range"},
		{"l", "[1, [1e400]]", "input.l[1][0]: number out of range"},
	} {
		src := "{" + strings.Replace(base, `"`+tc.field+`": `+map[bool]string{true: "[]", false: "1"}[tc.field == "l"], `"`+tc.field+`": `+tc.value, 1) + "}"
		_, err := check(t, src)
		if !errors.Is(err, saga.ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", src, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), `"`) || strings.Contains(err.Error(), strings.TrimPrefix(tc.value, "-"))) {
			t.Errorf("%s: error echoes the value: %v", src, err)
		}
	}
	// Without declarations a number is checked the same way.
	free := mustCompile(t, "saga: free\nsteps: [{id: a, set: {x: 1}}]\n")
	in, err = free.CheckInput(decodeInput(t, `{"big": 18446744073709551615, "neg": -1}`))
	if err != nil || in["big"] != uint64(1<<64-1) || in["neg"] != int64(-1) {
		t.Fatalf("undeclared: %#v %v", in, err)
	}
	if _, err := free.CheckInput(decodeInput(t, `{"huge": {"x": 1e400}}`)); err == nil || !strings.Contains(err.Error(), "input.huge.x: number out of range") {
		t.Fatalf("undeclared 1e400: %v", err)
	}
	// Action outputs go through NormalizeJSON.
	if _, err := saga.NormalizeJSON(json.Number("1e400")); err == nil {
		t.Fatal("NormalizeJSON accepted 1e400")
	}
}

// Input errors name the field and the type, never the value: inputs carry
// card numbers and addresses, and errors reach logs and stored failures.
func TestCheckInputNeverEchoesValues(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `
saga: secret
input: {card: string, n: int, u: uint, at: timestamp, wait: duration, blob: bytes, tags: list, ok: bool}
steps: [{id: a, set: {x: 1}}]
`)
	const secret = "4111111111111111"
	bad := map[string]any{
		"card": int64(4111111111111111), "n": secret, "u": "-" + secret, "at": secret, "wait": secret + "h",
		"blob": secret + "!", "tags": map[string]any{"k": secret}, "ok": secret,
	}
	_, err := p.CheckInput(bad)
	if !errors.Is(err, saga.ErrInvalidInput) {
		t.Fatalf("err %v", err)
	}
	if strings.Contains(err.Error(), "411111") {
		t.Fatalf("error echoes an input value:\n%v", err)
	}
	for _, want := range []string{"input.card: want string, got an int", "input.n: want int, got a string", "input.at: want an RFC 3339 timestamp, got a string",
		"input.wait: want a duration such as 90s, got a string", "input.tags: want list, got a map", "input.blob: want base64 text"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if !bytes.Contains([]byte(err.Error()), []byte("input.ok: want bool, got a string")) {
		t.Errorf("bool: %v", err)
	}
}

// The size limit holds for inputs JSON cannot encode as they are (a Go
// caller's timestamp past year 9999): the size check was skipped for them.
func TestCheckInputSizeHoldsForValuesJSONCannotEncode(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 1<<20)
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, src := range []string{"saga: s\nsteps: [{id: a, set: {x: 1}}]\n", "saga: s\ninput: {t: timestamp, s: string}\nsteps: [{id: a, set: {x: 1}}]\n"} {
		p := mustCompile(t, src)
		if _, err := p.CheckInput(map[string]any{"t": far, "s": big}); !errors.Is(err, saga.ErrInvalidInput) {
			t.Errorf("1 MiB input with a timestamp past 9999: %v, want ErrInvalidInput", err)
		}
	}
}
