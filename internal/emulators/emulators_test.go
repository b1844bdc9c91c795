package emulators_test

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/emulators"
)

func TestStartStop(t *testing.T) {
	dir := "../../tools/emulators"
	if _, err := os.Stat(dir + "/node_modules/dynalite"); err != nil {
		t.Skip("emulators not installed (make emulators)")
	}
	e, err := emulators.Start(context.Background(), emulators.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	addrs := []string{strings.TrimPrefix(e.DynamoDBEndpoint, "http://"), strings.TrimPrefix(e.SQSEndpoint, "http://")}
	for _, a := range addrs {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("%s is not on 127.0.0.1", a)
		}
		c, err := net.DialTimeout("tcp", a, time.Second)
		if err != nil {
			t.Fatalf("%s not listening: %v", a, err)
		}
		c.Close()
	}
	e.Stop()
	for _, a := range addrs {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still listening after Stop", a)
		}
	}
}

func TestStartReportsMissingInstall(t *testing.T) {
	_, err := emulators.Start(context.Background(), emulators.Config{Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "npm ci") {
		t.Fatalf("err = %v, want a hint to run npm ci", err)
	}
}
