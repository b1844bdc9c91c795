// Package emulators starts and stops the local DynamoDB (dynalite) and SQS
// (fauxqs) emulators that the integration tests and `sagactl local` use.
// They are npm packages installed under tools/emulators by `npm ci`; both
// listen on free 127.0.0.1 ports. Each is started through a launcher there
// (dynalite-local.mjs, fauxqs-local.mjs) rather than its own command line:
// fauxqs's binds every interface, and dynalite's dies when a client goes away
// mid-request, as workers killed by the chaos test do.
package emulators

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Config says where the emulators are installed and where their logs go.
type Config struct {
	// Dir holds package.json and node_modules (tools/emulators).
	Dir string
	// Log receives both emulators' output; default: discarded.
	Log io.Writer
	// StartTimeout bounds the wait for both to answer; default 30s.
	StartTimeout time.Duration
}

// Emulators are running emulator processes.
type Emulators struct {
	DynamoDBEndpoint string
	SQSEndpoint      string
	procs            []*exec.Cmd
}

// Start launches both emulators and waits until they answer HTTP.
func Start(ctx context.Context, cfg Config) (*Emulators, error) {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	for _, p := range []string{"node_modules/dynalite/package.json", "dynalite-local.mjs", "node_modules/fauxqs/package.json", "fauxqs-local.mjs"} {
		if _, err := os.Stat(filepath.Join(cfg.Dir, p)); err != nil {
			return nil, fmt.Errorf("emulators not installed in %s (run: cd %s && npm ci): %w", cfg.Dir, cfg.Dir, err)
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is needed to run the emulators: %w", err)
	}
	dynPort, err := freePort()
	if err != nil {
		return nil, err
	}
	sqsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	e := &Emulators{
		DynamoDBEndpoint: fmt.Sprintf("http://127.0.0.1:%d", dynPort),
		SQSEndpoint:      fmt.Sprintf("http://127.0.0.1:%d", sqsPort),
	}
	starts := [][]string{
		{"dynalite-local.mjs", "--host", "127.0.0.1", "--port", fmt.Sprint(dynPort), "--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"},
		{"fauxqs-local.mjs", fmt.Sprint(sqsPort)},
	}
	for _, args := range starts {
		cmd := exec.Command(node, args...)
		cmd.Dir = cfg.Dir
		cmd.Stdout, cmd.Stderr = cfg.Log, cfg.Log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			e.Stop()
			return nil, fmt.Errorf("start %s: %w", args[0], err)
		}
		e.procs = append(e.procs, cmd)
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	for _, ep := range []string{e.DynamoDBEndpoint, e.SQSEndpoint} {
		if err := waitHTTP(wctx, ep); err != nil {
			e.Stop()
			return nil, fmt.Errorf("emulator at %s did not start: %w", ep, err)
		}
	}
	return e, nil
}

// Stop ends both emulators (and anything they started) and waits for them.
func (e *Emulators) Stop() {
	for _, cmd := range e.procs {
		if cmd.Process == nil {
			continue
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	e.procs = nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitHTTP waits until something answers HTTP at url, whatever the status.
func waitHTTP(ctx context.Context, url string) error {
	client := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
