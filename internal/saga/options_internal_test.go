package saga

import "testing"

func TestOptionsDefaults(t *testing.T) {
	t.Parallel()
	o := Options{}.withDefaults()
	if o.MaxVisits != DefaultMaxVisits {
		t.Errorf("MaxVisits = %d, want DefaultMaxVisits %d", o.MaxVisits, DefaultMaxVisits)
	}
	if o.MaxStepTimeout != 0 {
		t.Errorf("MaxStepTimeout = %s, want 0 (no limit but the 15-minute cap)", o.MaxStepTimeout)
	}
	if o := (Options{MaxVisits: 7}).withDefaults(); o.MaxVisits != 7 {
		t.Errorf("MaxVisits = %d, want the 7 given", o.MaxVisits)
	}
}
