package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// Config sets up a local environment.
type Config struct {
	// Template is infra/template.yaml.
	Template string
	// DynamoDBEndpoint and SQSEndpoint are the running emulators.
	DynamoDBEndpoint, SQSEndpoint string
	// RIE is the aws-lambda-rie binary.
	RIE string
	// BuildDir receives the bootstraps, one directory per function.
	BuildDir string
	// Mains maps a function's logical id to the Go package to build instead
	// of its CodeUri: a function with your Go actions registered.
	Mains map[string]string
	// Workers per function, each with its own RIE; default 2.
	Workers int
	// Visibility, when set, replaces the queues' visibility timeouts.
	Visibility time.Duration
	// Prefix names the table and queues (default "lambdasaga-").
	Prefix string
	// Log receives the functions' and RIE's output and the pollers' notes.
	Log io.Writer
	// Env adds variables to every function's environment.
	Env map[string]string
	// ScheduleEvery, when set, replaces the period of every schedule of
	// the template (rate(1 minute), rate(15 minutes)), so that a test can
	// tick every second; it also runs cron(...) and at(...) schedules, which
	// otherwise the local loop refuses.
	ScheduleEvery time.Duration
}

// Env is a running local environment.
type Env struct {
	Table     string
	QueueURLs map[string]string // by logical id
	Functions []string
	// Schedules describe the schedules it invokes, one line each:
	// "SweepFunction EveryMinute: rate(1 minute), every 1m0s, with {"job": "tick"}".
	Schedules []string

	cfg     Config
	ries    []*exec.Cmd
	workers []*worker
	cancel  context.CancelFunc
	pollers sync.WaitGroup
	logMu   sync.Mutex
	riesMu  sync.Mutex
}

// worker is one RIE and what it needs to be started again.
type worker struct {
	fn        samtemplate.Function
	index     int
	bootstrap string
	env       []string
	addr      string
	cmd       *exec.Cmd
}

// Up creates the resources, builds and starts the functions, and starts
// the pollers. Call Down to stop what it started.
func Up(ctx context.Context, cfg Config) (env *Env, err error) {
	if cfg.Workers == 0 {
		cfg.Workers = 2
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "lambdasaga-"
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.DynamoDBEndpoint == "" || cfg.SQSEndpoint == "" {
		return nil, errors.New("local: the DynamoDB and SQS endpoints are required")
	}
	// The RIEs run in their bootstrap's directory: resolve paths first.
	if cfg.RIE, err = filepath.Abs(cfg.RIE); err != nil {
		return nil, err
	}
	if _, err := os.Stat(cfg.RIE); err != nil {
		return nil, fmt.Errorf("local: aws-lambda-rie: %w", err)
	}
	tpl, err := samtemplate.Load(cfg.Template)
	if err != nil {
		return nil, err
	}
	if problems := tpl.Check(); len(problems) > 0 {
		return nil, fmt.Errorf("%s does not pass its checks: %v", cfg.Template, problems)
	}
	if len(tpl.Tables) != 1 {
		return nil, fmt.Errorf("%s: want one table, found %d", cfg.Template, len(tpl.Tables))
	}
	e := &Env{cfg: cfg, Table: cfg.Prefix + tpl.Tables[0].Name}
	ddb := awslocal.DynamoDB(cfg.DynamoDBEndpoint)
	sq := awslocal.SQS(cfg.SQSEndpoint)
	if err := createTable(ctx, ddb, tpl.Tables[0], e.Table); err != nil {
		return nil, err
	}
	if e.QueueURLs, err = createQueues(ctx, sq, tpl, cfg.Prefix, cfg.Visibility); err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	defer func() {
		if err != nil {
			e.Down()
		}
	}()
	for _, fn := range tpl.Functions {
		if err := e.startFunction(ctx, pctx, tpl, sq, fn); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// startFunction builds fn and starts its workers, each under an RIE of
// its own: those that poll its queues and those that invoke it on its
// schedules. A function with neither is not run. The pollers and
// schedulers run until pctx ends.
func (e *Env) startFunction(ctx, pctx context.Context, tpl *samtemplate.Template, sq *sqs.Client, fn samtemplate.Function) error {
	schedules, err := e.schedules(fn)
	if err != nil {
		return err
	}
	if len(fn.Events) == 0 && len(schedules) == 0 {
		e.logf("%s has neither an SQS event source nor an enabled schedule: not run", fn.Name)
		return nil
	}
	bootstrap, err := e.build(ctx, fn)
	if err != nil {
		return err
	}
	envVars, err := e.environment(tpl, fn)
	if err != nil {
		return err
	}
	e.Functions = append(e.Functions, fn.Name)
	if err := e.startPollers(ctx, pctx, sq, fn, bootstrap, envVars); err != nil {
		return err
	}
	return e.startSchedulers(ctx, pctx, fn, schedules, bootstrap, envVars)
}

// startPollers starts Config.Workers workers of fn, each with a poller
// on every queue of fn's event sources.
func (e *Env) startPollers(ctx, pctx context.Context, sq *sqs.Client, fn samtemplate.Function, bootstrap string, envVars []string) error {
	for w := range e.cfg.Workers {
		wk := &worker{fn: fn, index: w, bootstrap: bootstrap, env: envVars}
		addr, err := e.startRIE(ctx, wk, "")
		if err != nil {
			return err
		}
		e.workers = append(e.workers, wk)
		busy := &sync.Mutex{} // the advance function reads two queues
		for _, ev := range fn.Events {
			p := &poller{env: e, client: sq, fn: fn, event: ev, queueURL: e.QueueURLs[ev.Queue], rieURL: "http://" + addr + "/2015-03-31/functions/function/invocations", worker: w, busy: busy}
			e.pollers.Go(func() { p.run(pctx) })
		}
	}
	return nil
}

// startSchedulers starts one worker of fn per schedule, with a scheduler
// that invokes it on that schedule (or every Config.ScheduleEvery), so
// that the tick and the sweep of one function do not wait for each other
// (in Lambda they run in environments of their own).
func (e *Env) startSchedulers(ctx, pctx context.Context, fn samtemplate.Function, schedules []samtemplate.Schedule, bootstrap string, envVars []string) error {
	for i, sc := range schedules {
		wk := &worker{fn: fn, index: i, bootstrap: bootstrap, env: envVars}
		if len(fn.Events) > 0 {
			wk.index += e.cfg.Workers // after the pollers' workers
		}
		addr, err := e.startRIE(ctx, wk, "")
		if err != nil {
			return err
		}
		e.workers = append(e.workers, wk)
		every := sc.Every
		if e.cfg.ScheduleEvery > 0 {
			every = e.cfg.ScheduleEvery
		}
		s := &scheduler{env: e, fn: fn, schedule: sc, every: every, rieURL: "http://" + addr + "/2015-03-31/functions/function/invocations", worker: wk.index}
		line := fmt.Sprintf("%s %s: %s, every %s, with %s", fn.Name, sc.Name, sc.Expression, every, eventSummary(sc))
		e.Schedules = append(e.Schedules, line)
		e.logf("schedule %s", line)
		e.pollers.Go(func() { s.run(pctx) })
	}
	return nil
}

// schedules returns the function's schedules that the local loop runs:
// the enabled ones. It refuses, rather than skips, a schedule it cannot
// run as EventBridge would: a cron(...) or at(...) expression (unless
// Config.ScheduleEvery gives a period), and a ScheduleV2 event without
// Input (EventBridge Scheduler then sends its own notification, not
// emulated here).
func (e *Env) schedules(fn samtemplate.Function) ([]samtemplate.Schedule, error) {
	var out []samtemplate.Schedule
	for _, sc := range fn.Schedules {
		switch {
		case !sc.Enabled:
			e.logf("%s schedule %s (%s) is disabled: not invoked", fn.Name, sc.Name, sc.Expression)
			continue
		case sc.Every == 0 && e.cfg.ScheduleEvery == 0:
			return nil, fmt.Errorf("function %s: schedule %s: %s: the local loop runs rate(...) schedules only; give a period for it (Config.ScheduleEvery, sagactl local --schedule-every)", fn.Name, sc.Name, sc.Expression)
		case sc.V2 && sc.Input == nil:
			return nil, fmt.Errorf("function %s: schedule %s: a ScheduleV2 event without Input: what EventBridge Scheduler sends then is not emulated; set Input", fn.Name, sc.Name)
		}
		out = append(out, sc)
	}
	return out, nil
}

// Down stops the pollers (each finishes the batch in hand), the schedules
// (an invocation under way is cut short) and the RIEs.
func (e *Env) Down() {
	if e.cancel != nil {
		e.cancel()
	}
	e.pollers.Wait()
	e.riesMu.Lock()
	defer e.riesMu.Unlock()
	for _, cmd := range e.ries {
		// The functions run in process groups of their own (RIE makes them):
		// end them first, then RIE.
		for _, d := range descendants(cmd.Process.Pid) {
			_ = syscall.Kill(-d, syscall.SIGTERM)
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			killTree(cmd.Process.Pid)
			<-done
		}
	}
	e.ries = nil
}

func (e *Env) logf(format string, args ...any) {
	e.logMu.Lock()
	defer e.logMu.Unlock()
	fmt.Fprintf(e.cfg.Log, "local: "+format+"\n", args...)
}

// build compiles the function for this machine (RIE runs it here), as sam
// build would for Lambda but with the host's GOOS and GOARCH, and with the
// environment's CGO_ENABLED and no -trimpath. Neither matters to a function
// run here against 127.0.0.1 (-trimpath strips file paths from stack
// traces; with cgo the binary links this machine's libc and may resolve
// names through it), and a build with the flags of go test reuses every
// package the tests compiled instead of compiling the whole dependency
// graph again (minutes on a cold build cache). make build makes the
// static, trimmed arm64 bootstraps that deploy.
func (e *Env) build(ctx context.Context, fn samtemplate.Function) (string, error) {
	pkg := e.cfg.Mains[fn.Name]
	if pkg == "" {
		pkg = filepath.Join(filepath.Dir(e.cfg.Template), fn.CodeURI)
		if !filepath.IsAbs(pkg) && !filepath.IsLocal(pkg) {
			abs, err := filepath.Abs(pkg)
			if err != nil {
				return "", err
			}
			pkg = abs
		} else if !filepath.IsAbs(pkg) {
			pkg = "./" + pkg
		}
	}
	out, err := filepath.Abs(filepath.Join(e.cfg.BuildDir, fn.Name, "bootstrap"))
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s from %s: %v\n%s", fn.Name, pkg, err, msg)
	}
	return out, nil
}

// environment is what the function sees: the template's variables with
// references resolved to the local resources, and the emulators' endpoints.
func (e *Env) environment(tpl *samtemplate.Template, fn samtemplate.Function) ([]string, error) {
	vars := []string{
		"AWS_ENDPOINT_URL_DYNAMODB=" + e.cfg.DynamoDBEndpoint,
		"AWS_ENDPOINT_URL_SQS=" + e.cfg.SQSEndpoint,
		"AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1",
		// The access key id names the function: the recording proxies
		// attribute its calls by it (internal/awscall); the emulators
		// accept any key.
		"AWS_ACCESS_KEY_ID=" + fn.Name, "AWS_SECRET_ACCESS_KEY=local",
		"AWS_LAMBDA_FUNCTION_NAME=" + fn.Name,
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(fn.Timeout),
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(fn.MemorySize),
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
	}
	for k, v := range e.cfg.Env {
		vars = append(vars, k+"="+v)
	}
	for k, v := range fn.Environment {
		var s string
		switch {
		case v.Ref != "" && slices.ContainsFunc(tpl.Buckets, func(b samtemplate.Bucket) bool { return b.Name == v.Ref }):
			// No S3 emulator runs here: without the bucket, the
			// functions keep every value inline.
			continue
		case v.Literal != "":
			s = v.Literal
		case v.Ref != "" && v.Ref == tpl.Tables[0].Name:
			s = e.Table
		case v.Ref != "" && e.QueueURLs[v.Ref] != "":
			s = e.QueueURLs[v.Ref]
		case v.Ref != "":
			d, ok := tpl.Parameters[v.Ref]
			if !ok {
				return nil, fmt.Errorf("function %s: environment %s: cannot resolve !Ref %s locally", fn.Name, k, v.Ref)
			}
			s = d
		default:
			return nil, fmt.Errorf("function %s: environment %s: cannot resolve %s locally", fn.Name, k, v)
		}
		vars = append(vars, k+"="+s)
	}
	return vars, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// listenPort returns a port of 127.0.0.1 that nothing listens on, below
// the kernel's ephemeral range (from 10,000) when there is room: a
// worker's RIE is started again on its port after a kill, and a port of
// that range may meanwhile become the source port of one of the many
// connections to the emulators, which the kernel picks there (the RIE
// then cannot listen: address in use). Outside it, only a listener can
// take the port, and none of ours is started meanwhile.
func listenPort() (int, error) {
	const from = 10_000
	if low := ephemeralLow(); low > from+1000 {
		for range 100 {
			p := from + rand.IntN(low-from)
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				continue // taken: another
			}
			l.Close()
			return p, nil
		}
	}
	return freePort()
}

// ephemeralLow is the first port of the kernel's ephemeral range, where
// it picks the source ports of outgoing connections: Linux's setting, or
// its default (32768) where it cannot be read (and BSD's and macOS's
// 49152 is above that).
func ephemeralLow() int {
	b, _ := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	return parseEphemeralLow(string(b))
}

func parseEphemeralLow(text string) int {
	if f := strings.Fields(text); len(f) == 2 {
		if n, err := strconv.Atoi(f[0]); err == nil && n > 0 {
			return n
		}
	}
	return 32768
}

// startRIE runs one worker's RIE on 127.0.0.1 (on addr, when restarting
// it, so its poller finds it again) and waits for it to listen. An RIE
// that exits before it listens (its port taken a moment: its own runtime
// API port drawn equal, or a socket not yet released on a loaded machine)
// is started again, on a new API port, until the deadline.
func (e *Env) startRIE(ctx context.Context, wk *worker, addr string) (string, error) {
	if addr == "" {
		port, err := listenPort()
		if err != nil {
			return "", err
		}
		addr = fmt.Sprintf("127.0.0.1:%d", port)
	}
	deadline := time.Now().Add(30 * time.Second)
	for starts := 1; ; starts++ {
		cmd, err := e.spawnRIE(wk, addr)
		if err != nil {
			return "", err
		}
		for {
			c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
			if err == nil {
				c.Close()
				return addr, nil
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return "", fmt.Errorf("aws-lambda-rie for %s did not listen on %s (%d starts)", wk.fn.Name, addr, starts)
			}
			if exited(cmd.Process.Pid) {
				_ = cmd.Wait()
				e.forget(cmd)
				wk.cmd = nil
				time.Sleep(100 * time.Millisecond)
				break // start it again
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// spawnRIE starts one RIE for wk listening on addr, with a runtime API
// port of its own (never addr's).
func (e *Env) spawnRIE(wk *worker, addr string) (*exec.Cmd, error) {
	var apiAddr string
	for {
		apiPort, err := listenPort()
		if err != nil {
			return nil, err
		}
		if apiAddr = fmt.Sprintf("127.0.0.1:%d", apiPort); apiAddr != addr {
			break
		}
	}
	cmd := exec.Command(e.cfg.RIE, "--runtime-interface-emulator-address", addr, "--runtime-api-address", apiAddr, "--log-level", "warn", wk.bootstrap)
	cmd.Env = wk.env
	cmd.Dir = filepath.Dir(wk.bootstrap)
	w := &prefixWriter{env: e, prefix: fmt.Sprintf("%s/%d: ", wk.fn.Name, wk.index)}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", e.cfg.RIE, err)
	}
	e.riesMu.Lock()
	e.ries = append(e.ries, cmd)
	e.riesMu.Unlock()
	wk.cmd, wk.addr = cmd, addr
	return cmd, nil
}

// forget drops cmd, which has exited and been waited for, from the RIEs
// to stop.
func (e *Env) forget(cmd *exec.Cmd) {
	e.riesMu.Lock()
	defer e.riesMu.Unlock()
	e.ries = slices.DeleteFunc(e.ries, func(c *exec.Cmd) bool { return c == cmd })
}

// exited reports whether process pid has exited (a zombie not yet waited
// for, or gone).
func exited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command, which is in parentheses.
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z' || b[i+2] == 'X'
	}
	return false
}

// prefixWriter writes each line of a process's output with a prefix.
type prefixWriter struct {
	env    *Env
	prefix string
	buf    []byte
	mu     sync.Mutex
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.env.logMu.Lock()
		fmt.Fprintf(w.env.cfg.Log, "%s%s\n", w.prefix, w.buf[:i])
		w.env.logMu.Unlock()
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// Workers counts the running workers (RIEs).
func (e *Env) Workers() int { return len(e.workers) }

// WorkerFunction names worker i's function (its logical id), for a test
// that kills the workers of one function.
func (e *Env) WorkerFunction(i int) string { return e.workers[i].fn.Name }

// Kill ends worker i's RIE and its function with SIGKILL, wherever they
// are, as a crashed Lambda execution environment would end.
func (e *Env) Kill(i int) error {
	wk := e.workers[i]
	if wk.cmd == nil || wk.cmd.Process == nil {
		return fmt.Errorf("worker %d is not running", i)
	}
	killTree(wk.cmd.Process.Pid)
	_ = wk.cmd.Wait()
	e.riesMu.Lock()
	for j, c := range e.ries {
		if c == wk.cmd {
			e.ries = append(e.ries[:j], e.ries[j+1:]...)
			break
		}
	}
	e.riesMu.Unlock()
	wk.cmd = nil
	return nil
}

// Restart starts worker i again on the same address (a cold start).
func (e *Env) Restart(ctx context.Context, i int) error {
	wk := e.workers[i]
	_, err := e.startRIE(ctx, wk, wk.addr)
	return err
}

// RIEModule is the Go package of aws-lambda-rie, pinned as a tool in
// ToolsModfile.
const RIEModule = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"

// ToolsModfile is the go.mod, relative to the module root, that pins the
// developer tools (aws-lambda-rie, staticcheck). They live apart from the
// module's own go.mod so that importers of the library do not inherit their
// requirements.
const ToolsModfile = "tools/mod/go.mod"

// BuildRIE builds aws-lambda-rie into path from the version ToolsModfile
// pins. It must run inside this module, in any of its directories.
func BuildRIE(ctx context.Context, path string) error {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("build aws-lambda-rie: go env GOMOD: %w", err)
	}
	gomod := string(bytes.TrimSpace(out))
	if gomod == "" || gomod == os.DevNull {
		return errors.New("build aws-lambda-rie: not inside the lambdasaga module (its " + ToolsModfile + " pins the version)")
	}
	modfile := filepath.Join(filepath.Dir(gomod), filepath.FromSlash(ToolsModfile))
	if out, err := exec.CommandContext(ctx, "go", "build", "-modfile="+modfile, "-o", path, RIEModule).CombinedOutput(); err != nil {
		return fmt.Errorf("build aws-lambda-rie: %v\n%s", err, out)
	}
	return nil
}
