package local

import (
	"testing"
)

// A worker's RIE is restarted on its own port after the kill test kills
// it; a port of the kernel's ephemeral range may meanwhile become the
// source port of a connection to the emulators, and the restart then
// fails (aws-lambda-rie ... did not listen). The ports the workers listen
// on lie below that range.
func TestListenPortsAreBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low <= 11000 {
		t.Skipf("the ephemeral range starts at %d: no room below it", low)
	}
	seen := map[int]bool{}
	for range 50 {
		p, err := listenPort()
		if err != nil {
			t.Fatal(err)
		}
		if p < 10000 || p >= low {
			t.Fatalf("port %d: not in [10000, %d)", p, low)
		}
		seen[p] = true
	}
	if len(seen) < 40 {
		t.Errorf("50 picks gave %d ports: not spread", len(seen))
	}
}

func TestEphemeralLowParsesTheKernelsRange(t *testing.T) {
	for text, want := range map[string]int{"32768\t60999\n": 32768, "49152 65535": 49152, "": 32768, "x y": 32768} {
		if got := parseEphemeralLow(text); got != want {
			t.Errorf("%q: %d, want %d", text, got, want)
		}
	}
}
