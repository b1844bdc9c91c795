package saga

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// Mask is what a Redactor shows in place of a secret.
const Mask = "[secret]"

// MinSecretText is the shortest secret value a Redactor looks for inside
// text. A shorter one is hidden only where it is the value of its own
// field (Redactor.Input): masking every "7" or "ok" in every message would
// make them unreadable, and a value of one or two bytes is guessed in at
// most 65,536 tries anyway. Three bytes is the size of a card's
// verification code, which must never be shown, so it is masked, at the
// price of an odd "[secret]" where the same three characters happen to
// appear in a message.
const MinSecretText = 3

// Redactor hides the values of a saga's secret input fields (declared
// "secret TYPE", lang.InputField.Secret) in what is shown to a human:
// status, history, logs, error messages. A nil *Redactor, which
// Plan.Redactor returns for a plan without secrets, shows everything: its
// methods return what they are given, at no cost.
//
// Actions still receive the values: a redactor is for display only.
type Redactor struct {
	fields  map[string]bool // the secret input fields
	needles []string        // text forms of the secret values, each at least MinSecretText bytes
	times   []time.Time     // the secret timestamps, found in text at any offset (maskTimes)
	mask    string          // Mask, or a mask no secret can be found in (see newRedactor)
}

// Secrets lists the plan's secret input fields, in declaration order; nil
// when it has none.
func (p *Plan) Secrets() []string {
	var names []string
	for _, f := range p.def.Input {
		if f.Secret {
			names = append(names, f.Name)
		}
	}
	return names
}

// Redactor returns the redactor of a run of the plan: it hides the values
// of st's secret input fields, and the secrets of its ancestors its input
// holds (State.Inherited). A child run's state holds its own secrets (a
// branch or iteration copies its saga's, a child saga declares its own).
// Nil when neither the plan nor st has a secret, or st is nil.
func (p *Plan) Redactor(st *State) *Redactor {
	if p == nil || st == nil {
		return nil
	}
	if len(st.Inherited) == 0 {
		return p.RedactorFor(st.Input)
	}
	fields, values := p.secretValues(st.Input)
	return newRedactor(fields, values, st.Inherited)
}

// RedactorFor returns the redactor of a run of the plan with input (as
// given, or as CheckInput returned it). Nil when the plan declares no
// secret.
func (p *Plan) RedactorFor(input map[string]any) *Redactor {
	if p == nil || !p.secrets {
		return nil
	}
	fields, values := p.secretValues(input)
	return newRedactor(fields, values, nil)
}

// secretValues returns the plan's secret input fields and their values in
// input.
func (p *Plan) secretValues(input map[string]any) (map[string]bool, []any) {
	fields := map[string]bool{}
	var values []any
	for _, f := range p.def.Input {
		if f.Secret {
			fields[f.Name] = true
			if v, ok := input[f.Name]; ok {
				values = append(values, v)
			}
		}
	}
	return fields, values
}

// newRedactor returns the redactor of the secret fields, hiding the text
// forms of values and the texts inherited (State.Inherited).
func newRedactor(fields map[string]bool, values []any, inherited []string) *Redactor {
	seen := map[string]bool{}
	var needles []string
	add := func(text string) {
		for _, n := range quotedForms(text) {
			if len(n) >= MinSecretText && !seen[n] {
				seen[n] = true
				needles = append(needles, n)
			}
		}
	}
	var times []time.Time
	for _, v := range values {
		eachLeaf(v, func(leaf any) {
			forms := leafForms(leaf)
			if len(forms) == 0 || len(forms[0]) < MinSecretText {
				return // too short to look for: masked only as its field's value
			}
			if t, ok := leaf.(time.Time); ok {
				times = append(times, t)
			}
			for _, f := range forms {
				add(f)
			}
		})
	}
	for _, n := range inherited {
		add(n)
		if t, _, l, ok := parseTimestamp(n); ok && l == len(n) {
			times = append(times, t) // an ancestor's secret timestamp, found at any offset here too
		}
	}
	slices.Sort(needles)
	return &Redactor{fields: fields, needles: needles, times: times, mask: safeMask(needles)}
}

// safeMask returns Mask unless a secret could be found in text masked with
// it: one that is part of Mask, or that holds a bracket (it could then
// straddle a mask and the text beside it). It returns then eight of a
// byte that no secret holds: whatever surrounds a mask, a secret found in
// the masked text would hold that byte. Empty when every byte is taken
// (Text then deletes secrets, again until none is left).
func safeMask(needles []string) string {
	safe := true
	var used [256]bool
	for _, n := range needles {
		if strings.ContainsAny(n, "[]") || strings.Contains(Mask, n) {
			safe = false
		}
		for i := 0; i < len(n); i++ {
			used[n[i]] = true
		}
	}
	if safe {
		return Mask
	}
	for _, c := range []byte("*#~%_=+|") {
		if !used[c] {
			return strings.Repeat(string(c), 8)
		}
	}
	for c := 1; c < 256; c++ {
		if !used[c] {
			return strings.Repeat(string([]byte{byte(c)}), 8)
		}
	}
	return ""
}

// eachLeaf calls fn with every value inside v that is not a list or a
// map, and with every map key.
func eachLeaf(v any, fn func(any)) {
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			eachLeaf(e, fn)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			fn(k) // a key is as secret as its value
			eachLeaf(t[k], fn)
		}
	default:
		fn(v)
	}
}

// textForms lists how v may appear in text: every form leafForms lists of
// every string, number, timestamp, duration and bytes inside it (map keys
// included). Not quoted: a redactor's needles are its secrets' quoted
// forms, so a secret quoted inside v is found in v's own text, and a long
// string of v is not copied dozens of times over.
func textForms(v any) []string {
	var forms []string
	eachLeaf(v, func(leaf any) {
		forms = append(forms, leafForms(leaf)...)
	})
	return forms
}

// leafForms lists the texts a plain value prints as, first its own (what
// MinSecretText is measured on): a string as itself; a number as Go,
// CEL, encoding/json and Python print it as an int or a double (42, 42u,
// 42.0, 4.2e+01); a duration as Go (26h3m4s), CEL and protobuf JSON
// (93784s, 1.5s, 1.500s) and encoding/json (nanoseconds) print it; a
// timestamp in RFC 3339 in UTC and as Go prints it (Text finds it at any
// offset and precision too: maskTimes); bytes as themselves, base64 (std and
// URL-safe, padded or not), hex and CEL's octal escapes (b"\303\244"). Nil
// for nil and bools.
func leafForms(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []byte:
		forms := []string{string(t), base64.StdEncoding.EncodeToString(t), base64.RawStdEncoding.EncodeToString(t),
			base64.URLEncoding.EncodeToString(t), base64.RawURLEncoding.EncodeToString(t), hex.EncodeToString(t)}
		if len(t) > 0 {
			var b strings.Builder
			for _, c := range t {
				b.WriteByte('\\')
				b.WriteString(strconv.FormatUint(uint64(c)|0o1000, 8)[1:]) // three octal digits
			}
			forms = append(forms, b.String())
		}
		return forms
	case int64:
		return numberForms(strconv.FormatInt(t, 10), float64(t))
	case int:
		return numberForms(strconv.Itoa(t), float64(t))
	case uint64:
		u := strconv.FormatUint(t, 10)
		return append(numberForms(u, float64(t)), u+"u") // CEL's uint literal
	case float64:
		return numberForms(strconv.FormatFloat(t, 'g', -1, 64), t)
	case time.Time:
		u := t.UTC()
		return []string{u.Format(time.RFC3339Nano), u.Format(time.RFC3339), u.String()}
	case time.Duration:
		return durationForms(t)
	}
	return nil
}

// numberForms lists the forms of a number whose own text is text, f as a
// double: as Go's %v and CEL's string() print it (shortest, exponent
// from 1e21: 4.111111111111111e+15), in plain digits and with ".0" (CEL's
// format, Python's float), in exponent form (Go's %e, Python's large
// floats: 4.2e+01), and as encoding/json writes it.
func numberForms(text string, f float64) []string {
	plain := strconv.FormatFloat(f, 'f', -1, 64)
	forms := []string{text, strconv.FormatFloat(f, 'g', -1, 64), plain, strconv.FormatFloat(f, 'e', -1, 64)}
	if !strings.Contains(plain, ".") {
		forms = append(forms, plain+".0")
	}
	if b, err := json.Marshal(f); err == nil {
		forms = append(forms, string(b))
	}
	return forms
}

// durationForms lists d as Go prints it (26h3m4s), as CEL's string() and
// protobuf JSON do (seconds: 93784s, 1.5s, and 1.500s with 3, 6 or 9
// digits), and as encoding/json writes a time.Duration (nanoseconds).
func durationForms(d time.Duration) []string {
	forms := []string{d.String(), strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s", strconv.FormatInt(int64(d), 10)}
	sec, ns := int64(d/time.Second), int64(d%time.Second)
	sign := ""
	if d < 0 {
		sign, sec, ns = "-", -sec, -ns
	}
	whole := sign + strconv.FormatInt(sec, 10)
	if ns == 0 {
		return append(forms, whole+"s") // exact where the double of CEL's form is not
	}
	frac := strconv.FormatInt(ns+1e9, 10)[1:] // nine digits
	for _, n := range []int{3, 6, 9} {
		if strings.TrimRight(frac[n:], "0") == "" {
			forms = append(forms, whole+"."+frac[:n]+"s")
		}
	}
	return forms
}

// quotedForms lists how s may appear inside a quoted string: as itself;
// as encoding/json quotes it, with and without HTML escapes and with
// escaped slashes (\/); as Python's json.dumps does, with its default ASCII
// escapes (\u00e4, surrogate pairs) and without; as Go's %q and
// strconv.QuoteToASCII do; each of those quoted again by any of them
// (JSON inside a JSON string), and that once more by encoding/json, while
// a form is at most maxNestedQuote bytes. Just s when nothing in it is
// escaped by any of them, as for most secrets.
func quotedForms(s string) []string {
	if !needsQuoting(s) {
		return []string{s}
	}
	seen := map[string]bool{s: true}
	forms := []string{s}
	level := forms
	for depth := 0; depth < 3; depth++ {
		qs := quoters
		if depth == 2 {
			qs = quoters[:2] // the third quoting as JSON only: dozens of forms, not hundreds
		}
		var next []string
		for _, f := range level {
			if depth > 0 && len(f) > maxNestedQuote {
				continue
			}
			for _, q := range qs {
				if g := q(f); !seen[g] {
					seen[g] = true
					next = append(next, g)
				}
			}
		}
		forms = append(forms, next...)
		level = next
	}
	return forms
}

// maxNestedQuote bounds a form quoted again (quotedForms): a text every
// encoder escapes doubles at each quoting, and a long secret quoted three
// times over would take a hundred times its size in every redactor built,
// on every message. 4 KiB holds a private key in PEM, and any secret that
// fits in a step error's message (MaxErrorMessageBytes).
const maxNestedQuote = 4 << 10

// needsQuoting reports whether any of quoters changes s.
func needsQuoting(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || strings.IndexByte(`"\/<>&`, c) >= 0 {
			return true
		}
	}
	return false
}

// quoters write a string's body as encoders quote it (see quotedForms).
var quoters = []func(string) string{
	func(s string) string { return jsonQuote(s, true) },
	func(s string) string { return jsonQuote(s, false) },
	func(s string) string { return strings.ReplaceAll(jsonQuote(s, false), "/", `\/`) },
	func(s string) string { return pythonQuote(s, true) },
	func(s string) string { return strings.ReplaceAll(pythonQuote(s, true), "/", `\/`) },
	func(s string) string { return pythonQuote(s, false) },
	func(s string) string { q := strconv.Quote(s); return q[1 : len(q)-1] },
	func(s string) string { q := strconv.QuoteToASCII(s); return q[1 : len(q)-1] },
}

// jsonQuote returns s as encoding/json quotes it, without the quotes:
// with html, <, > and & escaped too (json.Marshal), else not
// (Encoder.SetEscapeHTML(false)). Written out rather than calling
// encoding/json, as a hostile secret has dozens of forms to quote.
func jsonQuote(s string, html bool) string {
	const hexDigits = "0123456789abcdef"
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c == '\b':
				b.WriteString(`\b`)
			case c == '\f':
				b.WriteString(`\f`)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c < 0x20 || html && (c == '<' || c == '>' || c == '&'):
				b.WriteString(`\u00`)
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&0xf])
			default:
				b.WriteByte(c)
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			b.WriteString(`\u202`)
			b.WriteByte(hexDigits[r&0xf])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// pythonQuote returns s as Python's json.dumps quotes it, without the
// quotes: with ascii (its default, ensure_ascii) every byte outside
// printable ASCII as \u escapes, lower-case, above U+FFFF as a surrogate
// pair; else only control characters.
func pythonQuote(s string, ascii bool) string {
	var b strings.Builder
	u := func(r rune) {
		b.WriteString(`\u`)
		h := strconv.FormatInt(int64(r)|0x10000, 16)
		b.WriteString(h[1:])
	}
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
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
		case r < 0x20 || ascii && r == 0x7f:
			u(r)
		case !ascii || r < 0x7f:
			b.WriteRune(r)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			u(hi)
			u(lo)
		default:
			u(r)
		}
	}
	return b.String()
}

// Text returns s with every secret value in it replaced by the mask: in
// each of its text forms (leafForms, quotedForms), a secret timestamp at
// any offset and to any coarser precision (maskTimes), and, before the mark
// of a cut message ("…(cut)", or JSON's "\u2026(cut)"; the first
// maxCutMarks of them), the start of one that was cut off there
// (MinSecretText bytes or more): a text that only ends as a secret begins
// is whole, not a secret. Overlapping secrets are masked as one. The
// result holds no secret of MinSecretText bytes or more, whatever
// surrounds it.
func (r *Redactor) Text(s string) string {
	if r == nil || len(r.needles) == 0 || s == "" {
		return s
	}
	for {
		out, changed := r.mask1(s)
		if !changed || r.mask != "" && len(r.times) == 0 {
			return out
		}
		// Deleting may join two halves into a secret, and masking what
		// followed a timestamp may leave one without its offset, read then
		// as UTC: again, until nothing changes (each pass masks more).
		s = out
	}
}

func (r *Redactor) mask1(s string) (string, bool) {
	var cover []bool
	mark := func(from, to int) {
		if cover == nil {
			cover = make([]bool, len(s))
		}
		for i := from; i < to; i++ {
			cover[i] = true
		}
	}
	for _, n := range r.needles {
		done := 0 // marked up to here for n: overlapping finds mark only what is new
		for i := 0; i+len(n) <= len(s); {
			j := strings.Index(s[i:], n)
			if j < 0 {
				break
			}
			mark(max(i+j, done), i+j+len(n))
			done = i + j + len(n)
			i += j + 1
		}
	}
	for i, marks := 0, 0; marks < maxCutMarks; marks++ {
		end, next := cutAt(s, i)
		if next < 0 {
			break
		}
		for _, n := range r.needles {
			if k := secretCutAtEnd(s[:end], n); k >= MinSecretText {
				mark(end-k, end)
			}
		}
		i = next
	}
	if len(r.times) > 0 {
		r.maskTimes(s, mark)
	}
	if cover == nil {
		return s, false
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if !cover[i] {
			j := i
			for j < len(s) && !cover[j] {
				j++
			}
			b.WriteString(s[i:j])
			i = j
			continue
		}
		for i < len(s) && cover[i] {
			i++
		}
		b.WriteString(r.mask)
	}
	return b.String(), true
}

// maxCutMarks bounds the marks of cut messages Text looks before: each
// costs a pass over the text per needle. A message lambdasaga cuts has one;
// a text joins a few at most (an error wrapping a step's).
const maxCutMarks = 8

// cutAt finds the first mark of a cut message in s from from on: "…(cut)"
// as truncate writes it, or "\u2026(cut)" as JSON's ASCII escapes do (and
// quoted again: "\\u2026(cut)"). It returns where the text cut ends and
// where to look for the next mark; next is -1 when there is none.
func cutAt(s string, from int) (end, next int) {
	for {
		i := strings.Index(s[from:], "(cut)")
		if i < 0 {
			return 0, -1
		}
		i += from
		from = i + len("(cut)")
		switch {
		case strings.HasSuffix(s[:i], "…"):
			return i - len("…"), from
		case strings.HasSuffix(s[:i], `\u2026`):
			end = i - len(`\u2026`)
			for end > 0 && s[end-1] == '\\' {
				end--
			}
			return end, from
		}
	}
}

// secretCutAtEnd returns the length of the longest end of s, shorter than n,
// that is a start of n: what is left of n where s was cut. Linear in the
// shorter of s and n (Knuth–Morris–Pratt), as secrets and texts may be
// long: only a start of n as long as s can be cut off in it.
func secretCutAtEnd(s, n string) int {
	if len(s) > len(n)-1 {
		if len(n) < 2 {
			return 0
		}
		s = s[len(s)-(len(n)-1):]
	}
	if len(s) == 0 {
		return 0
	}
	p := n[:len(s)]
	fail := make([]int, len(p))
	for i, k := 1, 0; i < len(p); i++ {
		for k > 0 && p[i] != p[k] {
			k = fail[k-1]
		}
		if p[i] == p[k] {
			k++
		}
		fail[i] = k
	}
	k := 0
	for i := 0; i < len(s); i++ {
		for k > 0 && (k == len(p) || s[i] != p[k]) {
			k = fail[k-1]
		}
		if s[i] == p[k] {
			k++
		}
	}
	return k
}

// maskTimes marks each timestamp in s that is a secret one: written as
// RFC 3339 or ISO 8601 (T, t or a space between date and time) or as Go
// prints a time.Time, at any offset (Z, +02:00, +0200, " +0200"; none is
// UTC), with any number of fraction digits; one with fewer digits than the
// secret matches it cut to them (Go's RFC3339 drops the fraction,
// JavaScript keeps milliseconds, Python microseconds).
func (r *Redactor) maskTimes(s string, mark func(from, to int)) {
	r.findTimes(s, func(from, to int, _ time.Time) { mark(from, to) })
}

// findTimes calls found with where each secret timestamp is in s (as
// maskTimes finds them) and the secret it is.
func (r *Redactor) findTimes(s string, found func(from, to int, secret time.Time)) {
	for i := 4; i < len(s); {
		j := strings.IndexByte(s[i:], '-')
		if j < 0 {
			return
		}
		start := i + j - 4
		i += j + 1
		t, digits, n, ok := parseTimestamp(s[start:])
		if !ok {
			continue
		}
		for _, secret := range r.times {
			if secret.Equal(t) || digits < 9 && secret.Truncate(time.Duration(pow10[9-digits])).Equal(t) {
				found(start, start+n, secret)
				i = start + n
				break
			}
		}
	}
}

var pow10 = [10]int64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// parseTimestamp reads the timestamp s starts with (see maskTimes): the
// instant, how many fraction digits it has (at most 9 count) and how many
// bytes it takes.
func parseTimestamp(s string) (t time.Time, digits, n int, ok bool) {
	num := func(from, to int) int {
		v := 0
		for i := from; i < to; i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || s[13] != ':' || s[16] != ':' || strings.IndexByte("Tt ", s[10]) < 0 {
		return t, 0, 0, false
	}
	year, month, day, hour, minute, sec := num(0, 4), num(5, 7), num(8, 10), num(11, 13), num(14, 16), num(17, 19)
	if year < 0 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return t, 0, 0, false
	}
	n = 19
	ns := 0
	if n < len(s) && s[n] == '.' {
		k := n + 1
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			if digits < 9 {
				ns = ns*10 + int(s[k]-'0')
				digits++
			}
			k++
		}
		if k == n+1 {
			return t, 0, 0, false
		}
		ns *= int(pow10[9-digits])
		n = k
	}
	offset := 0
	zone := func(at int) int { // "+02:00" or "+0200" at s[at:]: its length, or 0
		if at+5 > len(s) || (s[at] != '+' && s[at] != '-') {
			return 0
		}
		h, m, l := num(at+1, at+3), -1, 0
		if at+6 <= len(s) && s[at+3] == ':' {
			m, l = num(at+4, at+6), 6
		} else {
			m, l = num(at+3, at+5), 5
		}
		if h < 0 || h > 23 || m < 0 || m > 59 {
			return 0
		}
		offset = (h*60 + m) * 60
		if s[at] == '-' {
			offset = -offset
		}
		return l
	}
	switch {
	case n < len(s) && (s[n] == 'Z' || s[n] == 'z'):
		n++
	case n < len(s) && s[n] == ' ':
		if l := zone(n + 1); l > 0 { // Go's " +0200"; else a time without an offset
			n += 1 + l
		}
	default:
		n += zone(n)
	}
	t = time.Date(year, time.Month(month), day, hour, minute, sec, ns, time.UTC).Add(-time.Duration(offset) * time.Second)
	return t, digits, n, true
}

// Value returns a deep copy of v (an input, vars, an output, a payload)
// with every string masked as Text masks it, map keys included (named as
// nameMasked does), and every other value replaced by the mask when one of
// its text forms (leafForms) holds a secret: an int card number, and, as
// its forms are many, a number whose exponent form holds a secret "+00".
// Bools and nulls are shown as they are.
func (r *Redactor) Value(v any) any {
	if r == nil || len(r.needles) == 0 {
		return v
	}
	return r.value(v)
}

func (r *Redactor) value(v any) any {
	switch t := v.(type) {
	case string:
		return r.Text(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = r.value(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		var masked []string // keys holding a secret, named once the others are in
		for k, e := range t {
			if r.Text(k) != k {
				masked = append(masked, k)
				continue
			}
			out[k] = r.value(e)
		}
		r.nameMasked(out, masked, func(k string) any { return r.value(t[k]) })
		return out
	case nil, bool:
		return v
	}
	for _, f := range textForms(v) {
		if r.Text(f) != f {
			return r.mask
		}
	}
	return v
}

// Input returns a copy of a saga's input with each secret field's value
// replaced by the mask, however short, and the rest, field names
// included, as Value shows it.
func (r *Redactor) Input(input map[string]any) map[string]any {
	if r == nil || input == nil {
		return input
	}
	out := make(map[string]any, len(input))
	var masked []string // a field's name may hold a secret too (a child saga's input)
	for k, v := range input {
		switch {
		case r.fields[k]:
			out[k] = Mask
		case r.Text(k) != k:
			masked = append(masked, k)
		default:
			out[k] = r.Value(v)
		}
	}
	r.nameMasked(out, masked, func(k string) any { return r.Value(input[k]) })
	return out
}

// nameMasked puts into out the value of each key masked (keys whose text
// holds a secret), under the key as Text masks it, or, when out holds that
// already (two keys mask alike, or one masks like a key that holds no
// secret), under a free name (freeName), in the order of the keys: no key
// is lost or merged with another, and the same map shows the same way
// every time.
func (r *Redactor) nameMasked(out map[string]any, masked []string, value func(k string) any) {
	slices.Sort(masked)
	for _, k := range masked {
		out[r.freeName(out, r.Text(k))] = value(k)
	}
}

// maxNameTries bounds the names "KEY#2", "KEY#3", ... freeName tries.
const maxNameTries = 100

// freeName returns base if out does not hold it, else the first of
// "base#2", "base#3", ... that out does not hold and that shows no secret:
// a secret may end in "#" ("ly#" in "[secret] holy#2") or be digits.
// Past maxNameTries of those, base followed by masks, as many as it takes:
// no secret meets a mask (safeMask), so every such name is shown as it
// is. A redactor that deletes secrets (no byte is left for a mask) takes
// the first free "base#N" past the tries, whatever Text would make of it.
func (r *Redactor) freeName(out map[string]any, base string) string {
	name := base
	for i := 2; ; i++ {
		if _, taken := out[name]; !taken && (r.Text(name) == name || r.mask == "" && i > maxNameTries) {
			return name
		}
		if i <= maxNameTries || r.mask == "" {
			name = base + "#" + strconv.Itoa(i)
		} else {
			name = base + strings.Repeat(r.mask, i-maxNameTries)
		}
	}
}

// StepError returns e with its message masked; e itself when nothing in
// it is secret.
func (r *Redactor) StepError(e *StepError) *StepError {
	if r == nil || e == nil {
		return e
	}
	if m := r.Text(e.Message); m != e.Message {
		c := *e
		c.Message = m
		return &c
	}
	return e
}

// Error returns err, or, when its text holds a secret, an error whose
// text is masked and which wraps err (errors.Is and As still see it: do
// not print what they find).
func (r *Redactor) Error(err error) error {
	if r == nil || err == nil {
		return err
	}
	if m := r.Text(err.Error()); m != err.Error() {
		return &redactedError{msg: m, err: err}
	}
	return err
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// State returns a copy of st to show: its input, vars, output, scope,
// fork items, kept deliveries and errors as Input, Value and StepError
// show them, without the key of its callback tokens. It shares what holds
// no value with st; st itself when r is nil.
func (r *Redactor) State(st *State) *State {
	if r == nil || st == nil {
		return st
	}
	c := *st
	c.Input = r.Input(st.Input)
	if st.Vars != nil {
		c.Vars = r.Value(st.Vars).(map[string]any)
	}
	c.Output = r.Value(st.Output)
	if st.Scope != nil {
		c.Scope = r.Value(st.Scope).(map[string]any)
	}
	if st.ForkItems != nil {
		c.ForkItems = r.Value(st.ForkItems).([]any)
	}
	c.Failure, c.CompensationError = r.StepError(st.Failure), r.StepError(st.CompensationError)
	if st.Kept != nil {
		c.Kept = make([]Delivery, len(st.Kept))
		for i, d := range st.Kept {
			d.Payload, d.Err = r.Value(d.Payload), r.StepError(d.Err)
			c.Kept[i] = d
		}
	}
	if st.Stack != nil {
		c.Stack = make([]Completion, len(st.Stack))
		for i, s := range st.Stack {
			s.Out = r.Value(s.Out)
			c.Stack[i] = s
		}
	}
	c.Secret = nil
	return &c
}

// within returns the texts of r's secrets found in v (its strings, map
// keys and the text forms of its other values, as textForms lists them;
// a secret timestamp found at any offset as its RFC 3339 text in UTC),
// sorted: what a child saga given v as its input inherits
// (State.Inherited). Nil when none is.
func (r *Redactor) within(v any) []string {
	if r == nil || len(r.needles) == 0 {
		return nil
	}
	texts := textForms(v)
	var found []string
	for _, n := range r.needles { // sorted
		if slices.ContainsFunc(texts, func(s string) bool { return strings.Contains(s, n) }) {
			found = append(found, n)
		}
	}
	if len(r.times) > 0 {
		n := len(found)
		for _, text := range texts {
			r.findTimes(text, func(_, _ int, secret time.Time) {
				found = append(found, secret.UTC().Format(time.RFC3339Nano)) // a needle, and parsed back as a time
			})
		}
		if len(found) > n {
			slices.Sort(found)
			found = slices.Compact(found)
		}
	}
	return found
}

// inheritedSecrets returns the texts of found that own, the child
// saga's redactor of its own secrets, does not hide already: a secret the
// child declares secret is not stored twice in its item.
func inheritedSecrets(found []string, own *Redactor) []string {
	if own == nil {
		return found
	}
	var out []string
	for _, n := range found {
		if _, ok := slices.BinarySearch(own.needles, n); !ok {
			out = append(out, n)
		}
	}
	return out
}

// copySecrets copies the secret fields of a parent's input into a branch's
// or iteration's, even those its steps never read: the child's vars may
// hold what the parent's actions echoed of them, and its Redactor knows
// only the secrets of its own input.
func (p *Plan) copySecrets(child, parent map[string]any) {
	if !p.secrets {
		return
	}
	for _, f := range p.def.Input {
		if v, ok := parent[f.Name]; ok && f.Secret {
			child[f.Name] = v
		}
	}
}
