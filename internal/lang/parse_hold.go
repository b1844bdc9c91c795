package lang

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// onFailure reads on_failure: compensate or hold.
func (p *parser) onFailure(n *yaml.Node) OnFailure {
	v := OnFailure(p.str(n, "on_failure"))
	for _, f := range OnFailures() {
		if v == f {
			return v
		}
	}
	if v != "" {
		names := make([]string, 0, len(OnFailures()))
		for _, f := range OnFailures() {
			names = append(names, string(f))
		}
		p.errorf(n, "on_failure", "%q is not one of %s", v, strings.Join(names, ", "))
	}
	return ""
}

// checkHold checks hold_for against on_failure and the saga's timeout: a
// hold that outlasts the deadline would never end by itself, since the
// deadline compensates first.
func (p *parser) checkHold(def *Definition) {
	if def.HoldFor == 0 {
		return
	}
	at := def.pos["hold_for"]
	n := &yaml.Node{Line: at.Line, Column: at.Column}
	switch {
	case def.OnFailure != OnFailureHold:
		p.errorf(n, "hold_for", "needs on_failure: hold (a saga that compensates at once holds nothing)")
	case def.HoldFor > MaxSagaTimeout:
		p.errorf(n, "hold_for", "%s is longer than the limit of %s (one year)", FormatDuration(def.HoldFor), FormatDuration(MaxSagaTimeout))
	case def.Timeout > 0 && def.HoldFor > def.Timeout:
		p.errorf(n, "hold_for", "%s is longer than the saga's timeout of %s: the deadline compensates first", FormatDuration(def.HoldFor), FormatDuration(def.Timeout))
	}
}
