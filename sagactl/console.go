package sagactl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/console"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

func runConsole(c *Config, args []string) int {
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "listen on this address (host:port; port 0 picks a free one)")
	allowRemote := fs.Bool("allow-remote", false, "allow an address that is not on loopback: the console has no authentication, and anyone who reaches it can cancel and resume sagas and complete their callbacks")
	var stack stackFlags
	stack.register(fs)
	stack.registerStartQueue(fs)
	if code, ok := c.flagsOnly(fs, args); !ok {
		return code
	}
	if err := console.CheckAddr(*addr, *allowRemote); err != nil {
		c.errorf("console: %v", err)
		return ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cl, err := stack.client(ctx, c.APIOptions...)
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	return c.serveConsole(ctx, clientSource{cl}, *addr, *allowRemote)
}

// serveConsole serves the console on src at addr until ctx ends: the
// command's wiring, apart from how the backend is chosen.
func (c *Config) serveConsole(ctx context.Context, src console.Source, addr string, allowRemote bool) int {
	logger := slog.New(slog.NewTextHandler(c.Stderr, nil))
	con, err := console.New(console.Config{Source: src, Logger: logger, AllowRemote: allowRemote})
	if err != nil {
		c.errorf("console: %v", err)
		return ExitUsage
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		c.errorf("console: %v", err)
		return ExitUsage
	}
	srv := &http.Server{Handler: con, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	fmt.Fprintf(c.Stdout, "console: http://%s/ (Ctrl-C stops it)\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = srv.Shutdown(shutdown)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		c.errorf("console: %v", err)
		return ExitUsage
	}
	return ExitOK
}

// clientSource is a console.Source on a deployed stack, the local loop or
// the emulators, through the client status and cancel use. Its history is
// what the saga's state tells (console.StateHistory).
type clientSource struct{ cl *client.Client }

var _ console.Source = clientSource{}

func (s clientSource) List(ctx context.Context, p *durable.SagaListParams) (*durable.SagaListResult, error) {
	return s.cl.List(ctx, p)
}

func (s clientSource) Get(ctx context.Context, sagaID string) (*saga.State, error) {
	return s.cl.Status(ctx, sagaID)
}

func (s clientSource) History(ctx context.Context, sagaID string) ([]console.Entry, error) {
	st, err := s.cl.Status(ctx, sagaID)
	if err != nil {
		return nil, err
	}
	plan, err := s.cl.Plan(ctx, st)
	if err != nil {
		return nil, err
	}
	return console.StateHistory(plan, st), nil
}

func (s clientSource) Plan(ctx context.Context, hash string) (*saga.Plan, error) {
	return s.cl.Plan(ctx, &saga.State{DefinitionHash: hash}) // the client reads the hash only
}

func (s clientSource) Cancel(ctx context.Context, sagaID string) (*saga.State, error) {
	return s.cl.Cancel(ctx, sagaID)
}

func (s clientSource) Resume(ctx context.Context, sagaID string) (*saga.State, error) {
	return s.cl.Resume(ctx, sagaID)
}

func (s clientSource) Retry(ctx context.Context, sagaID string) (*saga.State, error) {
	return s.cl.Retry(ctx, sagaID)
}

func (s clientSource) Compensate(ctx context.Context, sagaID string) (*saga.State, error) {
	return s.cl.Compensate(ctx, sagaID)
}

func (s clientSource) Signal(ctx context.Context, p *engine.SignalParams) (*engine.Delivered, error) {
	var opts []client.SignalOption
	if p.ID != "" {
		opts = append(opts, client.SignalID(p.ID))
	}
	return s.cl.Signal(ctx, p.SagaID, p.Name, p.Payload, opts...)
}

func (s clientSource) CompleteCallback(ctx context.Context, token string, output any) (*engine.Delivered, error) {
	return s.cl.CompleteCallback(ctx, token, output)
}

func (s clientSource) FailCallback(ctx context.Context, token, errorType, message string) (*engine.Delivered, error) {
	return s.cl.FailCallback(ctx, token, errorType, message)
}

var _ console.PauseSource = clientSource{}

func (s clientSource) Pauses(ctx context.Context) ([]durable.Pause, error) {
	return s.cl.Pauses(ctx)
}

func (s clientSource) Pause(ctx context.Context, p *engine.PauseParams) error {
	return s.cl.Pause(ctx, p)
}

func (s clientSource) Unpause(ctx context.Context, kind durable.PauseKind, target string) error {
	return s.cl.Unpause(ctx, kind, target)
}

func (s clientSource) PausedBy(ctx context.Context, st *saga.State) (durable.Pause, bool, error) {
	return s.cl.PausedBy(ctx, st)
}
