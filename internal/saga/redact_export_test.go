package saga

// For FuzzRedactorText: what a redactor looks for, and its JSON quoting,
// which the target holds to encoding/json's.
var JSONQuote = jsonQuote

func (r *Redactor) Needles() []string { return r.needles }
