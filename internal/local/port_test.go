package local

import (
	"os/exec"
	"testing"
	"time"
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

// exited tells a running process from one that has exited and not yet
// been waited for (a zombie): startRIE starts an RIE again when it exits
// before it listens.
func TestExitedTellsAZombieFromARunningProcess(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	if exited(cmd.Process.Pid) {
		t.Fatal("a running sleep reported exited")
	}
	_ = cmd.Process.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for !exited(cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("a killed sleep never reported exited")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Wait()
	if !exited(cmd.Process.Pid) {
		t.Fatal("a process waited for reported running")
	}
}
