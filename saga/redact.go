package saga

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
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
	add := func(n string) {
		if len(n) >= MinSecretText && !seen[n] {
			seen[n] = true
			needles = append(needles, n)
		}
	}
	for _, v := range values {
		for _, n := range textForms(v) {
			add(n)
		}
	}
	for _, n := range inherited {
		add(n)
	}
	slices.Sort(needles)
	return &Redactor{fields: fields, needles: needles, mask: safeMask(needles)}
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

// textForms lists how v may appear in text: as itself, as JSON writes it
// (escaped, with or without HTML escaping), as Go quotes it (%q); every
// string and number inside a list or map.
func textForms(v any) []string {
	switch t := v.(type) {
	case string:
		forms := []string{t}
		if b, err := json.Marshal(t); err == nil {
			forms = append(forms, string(b[1:len(b)-1]))
		}
		var sb strings.Builder
		enc := json.NewEncoder(&sb)
		enc.SetEscapeHTML(false)
		if enc.Encode(t) == nil {
			s := strings.TrimSuffix(sb.String(), "\n")
			forms = append(forms, s[1:len(s)-1])
		}
		q := strconv.Quote(t)
		return append(forms, q[1:len(q)-1])
	case []byte:
		return []string{string(t), base64.StdEncoding.EncodeToString(t), base64.RawStdEncoding.EncodeToString(t), base64.URLEncoding.EncodeToString(t)}
	case int64:
		return []string{strconv.FormatInt(t, 10)}
	case int:
		return []string{strconv.Itoa(t)}
	case uint64:
		return []string{strconv.FormatUint(t, 10)}
	case float64:
		forms := []string{strconv.FormatFloat(t, 'g', -1, 64)}
		if b, err := json.Marshal(t); err == nil {
			forms = append(forms, string(b))
		}
		return forms
	case time.Time:
		return []string{t.Format(time.RFC3339Nano), t.Format(time.RFC3339), t.String()}
	case time.Duration:
		return []string{t.String()}
	case []any:
		var forms []string
		for _, e := range t {
			forms = append(forms, textForms(e)...)
		}
		return forms
	case map[string]any:
		var forms []string
		for _, k := range slices.Sorted(maps.Keys(t)) {
			forms = append(forms, textForms(k)...) // a key is as secret as its value
			forms = append(forms, textForms(t[k])...)
		}
		return forms
	}
	return nil
}

// Text returns s with every secret value in it replaced by the mask: as
// it is, as JSON or Go would quote it, and, before the mark of a cut
// message ("…(cut)", or JSON's "\u2026(cut)"), the start of one that was
// cut off there (MinSecretText bytes or more): a text that only ends as a
// secret begins is whole, not a secret. Overlapping secrets are masked as
// one. The result holds no secret of MinSecretText bytes or more, whatever
// surrounds it.
func (r *Redactor) Text(s string) string {
	if r == nil || len(r.needles) == 0 || s == "" {
		return s
	}
	for {
		out, changed := r.mask1(s)
		if !changed || r.mask != "" {
			return out
		}
		s = out // deleting may join two halves into a secret: again
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
	for i := 0; ; {
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
// that is a start of n: what is left of n where s was cut. Linear in
// len(n) (Knuth–Morris–Pratt), as secrets may be long.
func secretCutAtEnd(s, n string) int {
	if len(n) < 2 {
		return 0
	}
	if len(s) > len(n)-1 {
		s = s[len(s)-(len(n)-1):]
	}
	fail := make([]int, len(n))
	for i, k := 1, 0; i < len(n); i++ {
		for k > 0 && n[i] != n[k] {
			k = fail[k-1]
		}
		if n[i] == n[k] {
			k++
		}
		fail[i] = k
	}
	k := 0
	for i := 0; i < len(s); i++ {
		for k > 0 && (k == len(n) || s[i] != n[k]) {
			k = fail[k-1]
		}
		if s[i] == n[k] {
			k++
		}
	}
	if k == len(n) {
		return 0 // a whole one: masked as such
	}
	return k
}

// Value returns a deep copy of v (an input, vars, an output, a payload)
// with every string masked as Text masks it, map keys included, and every
// other value whose text is a secret's (an int card number) replaced by
// the mask.
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
// holds a secret), under the key as Text masks it. Two keys may mask
// alike, or like a key out holds already: each then gets the first free
// name of "KEY#2", "KEY#3", ... that shows no secret either, in the order
// of the keys, so that no key is lost or merged with another and the same
// map shows the same way every time.
func (r *Redactor) nameMasked(out map[string]any, masked []string, value func(k string) any) {
	slices.Sort(masked)
	for _, k := range masked {
		base := r.Text(k)
		name := base
		for i := 2; ; i++ {
			if _, taken := out[name]; !taken && r.Text(name) == name {
				break
			}
			name = base + "#" + strconv.Itoa(i)
		}
		out[name] = value(k)
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
// keys and the text forms of its other values, as textForms lists them),
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
