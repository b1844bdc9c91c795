package sagactl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/emulators"
	"github.com/lambdasaga/lambdasaga/internal/local"
	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// mainsFlag collects --main FUNCTION=PACKAGE.
type mainsFlag map[string]string

func (m mainsFlag) String() string { return fmt.Sprint(map[string]string(m)) }
func (m mainsFlag) Set(v string) error {
	fn, pkg, ok := strings.Cut(v, "=")
	if !ok || fn == "" || pkg == "" {
		return fmt.Errorf("want FUNCTION=PACKAGE, e.g. AdvanceFunction=./examples/order/cmd/orderfn")
	}
	m[fn] = pkg
	return nil
}

// localOptions are local up's flags.
type localOptions struct {
	template      string
	workers       int
	visibility    time.Duration
	emuDir        string
	rie           string
	buildDir      string
	scheduleEvery time.Duration
	logFile       string
	mains         mainsFlag
}

// runLocal runs the deployed shape here (local up, the default) until
// interrupted, or stops the one running (local down).
func runLocal(c *Config, args []string) int {
	sub := "up"
	if len(args) > 0 && (args[0] == "up" || args[0] == "down") {
		sub, args = args[0], args[1:]
	}
	if sub == "down" {
		return localDown(c)
	}
	o, code, ok := c.localFlags(args)
	if !ok {
		return code
	}
	// The template first, read within its limit, so that a bad or endless
	// one is refused before anything starts.
	src, err := readFile(o.template, maxTemplateBytes, "a template")
	if err == nil {
		_, err = samtemplate.Parse(o.template, src)
	}
	if err != nil {
		c.errorf("local: %v", err)
		return ExitUsage
	}
	if err := os.MkdirAll(filepath.Dir(LocalStateFile), 0o755); err != nil {
		c.errorf("local: %v", err)
		return ExitUsage
	}
	lock, held, err := lockLocal()
	if err != nil {
		c.errorf("local: %v", err)
		return ExitUsage
	}
	if !held {
		c.errorf("local: already running here; stop it with: %s local down", c.Name)
		return ExitUsage
	}
	defer lock.Close() // the lock goes with the file
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := os.Stat(o.rie); err != nil {
		fmt.Fprintf(c.Stdout, "building %s ...\n", o.rie)
		if err := local.BuildRIE(ctx, o.rie); err != nil {
			c.errorf("local: %v", err)
			return ExitUsage
		}
	}
	if err := os.MkdirAll(filepath.Dir(o.logFile), 0o755); err != nil {
		c.errorf("local: %v", err)
		return ExitUsage
	}
	logOut, err := os.Create(o.logFile)
	if err != nil {
		c.errorf("local: %v", err)
		return ExitUsage
	}
	defer logOut.Close()
	fmt.Fprintf(c.Stdout, "starting the emulators ...\n")
	emu, err := emulators.Start(ctx, emulators.Config{Dir: o.emuDir, Log: logOut})
	if err != nil {
		c.errorf("local: %v", err)
		return ExitUsage
	}
	defer emu.Stop()
	fmt.Fprintf(c.Stdout, "creating resources from %s and building the functions ...\n", o.template)
	env, err := local.Up(ctx, local.Config{Template: o.template, DynamoDBEndpoint: emu.DynamoDBEndpoint, SQSEndpoint: emu.SQSEndpoint,
		RIE: o.rie, BuildDir: o.buildDir, Mains: o.mains, Workers: o.workers, Visibility: o.visibility, ScheduleEvery: o.scheduleEvery, Log: logOut})
	if err != nil {
		c.errorf("local: %v", err)
		return ExitUsage
	}
	defer env.Down()
	ls := localState{PID: os.Getpid(), DynamoDBEndpoint: emu.DynamoDBEndpoint, SQSEndpoint: emu.SQSEndpoint, Table: env.Table, QueueURLs: env.QueueURLs,
		AdvanceQueueURL: env.QueueURLs["AdvanceQueue"], CompensateQueueURL: env.QueueURLs["CompensateQueue"]}
	b, _ := json.MarshalIndent(ls, "", "  ")
	if err := os.WriteFile(LocalStateFile, b, 0o644); err != nil {
		c.errorf("local: %v", err)
		return ExitUsage
	}
	defer os.Remove(LocalStateFile)
	fmt.Fprintf(c.Stdout, `lambdasaga is running locally (pid %d):
  DynamoDB   %s  table %s
  SQS        %s
  functions  %s under aws-lambda-rie, %d workers per queue
  schedules  %s
  logs       %s
In another terminal:
  %s start --local examples/order/order.yaml --input @examples/order/testdata/ok.json
  %s status --local SAGA_ID
Stop with Ctrl-C or: %s local down
`, ls.PID, ls.DynamoDBEndpoint, ls.Table, ls.SQSEndpoint, strings.Join(env.Functions, ", "), o.workers, strings.Join(env.Schedules, "\n             "), o.logFile, c.Name, c.Name, c.Name)
	<-ctx.Done()
	fmt.Fprintf(c.Stdout, "stopping ...\n")
	return ExitOK
}

// localFlags parses local up's arguments and checks its flags; when it
// returns false, local ends with the exit code it returns.
func (c *Config) localFlags(args []string) (localOptions, int, bool) {
	o := localOptions{mains: mainsFlag{}}
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	fs.StringVar(&o.template, "template", "infra/template.yaml", "the SAM template: the one source of the table, queues and functions")
	fs.IntVar(&o.workers, "workers", 2, "workers per function, each with its own aws-lambda-rie")
	fs.DurationVar(&o.visibility, "visibility", 0, "replace the queues' visibility timeout (e.g. 5s, so failed messages come back soon); default: the template's")
	fs.StringVar(&o.emuDir, "emulators-dir", "tools/emulators", "where the npm emulators are installed (make emulators)")
	fs.StringVar(&o.rie, "rie", "bin/aws-lambda-rie", "the aws-lambda-rie binary; built from the version tools/mod/go.mod pins if missing")
	fs.StringVar(&o.buildDir, "build-dir", "bin/local", "where the bootstraps are built")
	fs.DurationVar(&o.scheduleEvery, "schedule-every", 0, "invoke every scheduled function this often instead of on its template schedule (e.g. 5s; also runs cron schedules); default: the template's rates")
	fs.StringVar(&o.logFile, "log", ".lambdasaga/local.log", "where the functions' output goes")
	fs.Var(o.mains, "main", "build FUNCTION from PACKAGE instead of its CodeUri (your function with Go actions); repeatable")
	if rest, code, ok := c.flags(fs, args); !ok {
		return o, code, false
	} else if len(rest) > 0 {
		c.errorf("local: unexpected arguments %v", rest)
		return o, ExitUsage, false
	}
	if o.visibility < 0 || o.scheduleEvery < 0 || o.workers < 1 {
		c.errorf("local: --visibility and --schedule-every must not be negative and --workers must be at least 1")
		return o, ExitUsage, false
	}
	return o, ExitOK, true
}

// localLockFile is held (flock) by a running `sagactl local` for as long
// as it runs: a state file is trusted only while its lock is held, so a
// stale one never makes anyone signal a pid that was reused.
const localLockFile = ".lambdasaga/local.lock"

// lockLocal takes the local loop's lock; held is false when another
// process has it.
func lockLocal() (f *os.File, held bool, err error) {
	f, err = os.OpenFile(localLockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("%s: %w", localLockFile, err)
	}
	return f, true, nil
}

func localDown(c *Config) int {
	if lock, held, err := lockLocal(); err == nil && held {
		// Nobody holds the lock: no local loop runs here, whatever pid the
		// state file names.
		lock.Close()
		if os.Remove(LocalStateFile) == nil {
			fmt.Fprintf(c.Stdout, "local: was not running; cleaned up its state file\n")
			return ExitOK
		}
		c.errorf("local down: nothing is running here")
		return ExitUsage
	}
	b, err := os.ReadFile(LocalStateFile)
	if err != nil {
		c.errorf("local down: nothing is running here (%v)", err)
		return ExitUsage
	}
	var ls localState
	if err := json.Unmarshal(b, &ls); err != nil || ls.PID <= 0 {
		c.errorf("local down: %s is damaged; remove it", LocalStateFile)
		return ExitUsage
	}
	if err := syscall.Kill(ls.PID, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			os.Remove(LocalStateFile)
			fmt.Fprintf(c.Stdout, "local: was not running (pid %d gone); cleaned up\n", ls.PID)
			return ExitOK
		}
		c.errorf("local down: %v", err)
		return ExitUsage
	}
	for range 300 {
		if _, err := os.Stat(LocalStateFile); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(c.Stdout, "local: stopped\n")
			return ExitOK
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.errorf("local down: pid %d did not stop within 30s", ls.PID)
	return ExitUsage
}
