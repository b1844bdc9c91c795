// Package sagactl is the sagactl command as a library: validate, run,
// graph, plan and cost saga definitions, and start, inspect, signal,
// cancel and resume sagas and complete their callback tokens on a deployed
// stack, the local loop or the emulators.
// cmd/sagactl is a thin main around Main; a service that wants sagactl to
// run its Go actions for real builds its own main with its registry.
package sagactl

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/aws/smithy-go/middleware"

	"github.com/lambdasaga/lambdasaga"
	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/frontdoor"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Exit codes.
const (
	ExitOK                 = 0
	ExitUsage              = 1 // bad usage, bad input, invalid definition, or an error
	ExitCompensated        = 2 // the saga failed and was compensated
	ExitCompensationFailed = 3 // the saga failed and a compensation failed too
	ExitStillRunning       = 4 // run: the saga was still running at --timeout
	ExitHeld               = 5 // run: the saga is held for an operator (on_failure: hold)
	ExitFindings           = 6 // check --require-compensation: a finding (an action without compensate, ...)
)

// runExitCodes is what run --help says of its exit codes.
const runExitCodes = `
Exit codes:
  0  the saga succeeded
  1  bad usage, bad input, an invalid definition, or an error
  2  the saga failed and was compensated
  3  the saga failed and a compensation failed too (parked)
  4  the saga was still running at --timeout
  5  the saga is held: a step failed and on_failure: hold keeps it for an
     operator (sagactl retry ID or sagactl compensate ID)
`

// MaxInputFileBytes bounds what sagactl reads of an input, inline or
// @FILE. saga.MaxInputBytes is measured on the input's compact JSON and
// checked after; this leaves room for a file's indentation, and keeps a
// huge file (or /dev/zero) out of memory.
const MaxInputFileBytes = 2 * saga.MaxInputBytes

// MaxOffloadInputFileBytes bounds what run reads of an input when it keeps
// large values as objects (in memory, or on --s3-endpoint): the largest
// input then, saga.MaxOffloadInputBytes.
const MaxOffloadInputFileBytes = saga.MaxOffloadInputBytes

// Config is what a sagactl build brings.
type Config struct {
	// Actions are the Go actions run for real; others are simulated.
	Actions *lambdasaga.Actions
	Stdout  io.Writer // the commands' output and help; default os.Stdout
	Stderr  io.Writer // errors, problems and logs; default os.Stderr
	// Stdin answers a bulk command's confirmation; default os.Stdin,
	// asked only when it is a terminal (a reader that is no file counts
	// as one).
	Stdin io.Reader
	// Name is the program name in messages; default "sagactl".
	Name string
	// APIOptions are added to the DynamoDB and SQS clients that every
	// command builds (run for --dynamodb-endpoint and --sqs-endpoint, the
	// commands on sagas for any stack): an accounting.Counter's Register
	// counts their requests, as the meter's tests do.
	APIOptions []func(*middleware.Stack) error

	reg *engine.Registry // Actions' registry
}

// stackArgs stands for where the commands on sagas find them (stackFlags),
// which the usage explains once.
const stackArgs = "STACK"

type command struct {
	name, args, summary string
	run                 func(c *Config, args []string) int
}

func commands() []command {
	return []command{
		{"validate", "FILE... [--function-timeout D | --template FILE]", "check definitions, and their step timeouts against the functions' timeout; print every problem, exit 1 on any", runValidate},
		{"run", "FILE --input JSON|@FILE [--fail STEP]... [--json] [--id ID] [--timeout D] [--dynamodb-endpoint URL --sqs-endpoint URL]", "run a saga in this process and watch it", runRun},
		{"work", "--dynamodb-endpoint URL --sqs-endpoint URL [--table T] [--queue-prefix P] [--for D] [--fail STEP]... [--verbose]", "run the workers on the emulators' table and queues, as run does, until SIGINT or SIGTERM (or for D): what run left there at --timeout moves on; --fail matches a step id in any saga, unchecked", runWork},
		{"graph", "FILE", "print the definition as a Mermaid flowchart", runGraph},
		{"check", "FILE... [--require-compensation] [--json]", "walk every path of each definition and its child sagas: what each failing step would undo, actions without compensate, compensations that may read a value they lack; with --require-compensation, exit 6 on any (a CI gate)", runCheck},
		{"plan", "FILE --fail STEP [--input JSON|@FILE] [--signal NAME=JSON|@FILE]...", "show what a failure at STEP would compensate, running nothing", runPlan},
		{"cost", "FILE [--input JSON|@FILE] [--signal NAME=JSON|@FILE]... [--fail STEP]... [--signals-first] [--steps-per-month N | --sagas-per-month N] [--memory MB] [--duration D] [--state-bytes N] [--batch-size N] [--no-chain | --chain-steps N] [--chain-time D] [--function-timeout D] [--json]", "estimate the AWS cost of a saga as AWS bills it, with chained steps and without, next to Step Functions Standard and Express and Lambda durable functions", runCost},
		{"deploy", "FILE... [--json] " + stackArgs, "store each definition (and its child sagas) as the current version of its name, which start NAME runs; print each name, hash, and deployed or unchanged", runDeploy},
		{"start", "FILE|NAME --input JSON|@FILE [--id ID] [--signal NAME=JSON|@FILE [--signal-id ID]] " + stackArgs, "start a saga on a deployed stack, the local loop or the emulators: of a definition file, or the current version of a deployed saga's name; with --signal, signal-with-start: start it unless it exists, and signal it either way", runStart},
		{"status", "ID [--json] " + stackArgs, "show a saga", runStatus},
		{"list", "[--status S] [--name N] [--since D] [--limit N] [--cursor C] [--json] " + stackArgs, "list sagas, the one that entered its status last first; child sagas (saga: FILE) are listed, a parallel's branches and a foreach's iterations are not (status of their parent shows them)", runList},
		{"history", "ID [--json] " + stackArgs, "show what happened to a saga (or a fork's child run), step by step, compensations included", runHistory},
		{"cancel", "ID | " + bulkArgs + " " + stackArgs, "stop a running saga; it compensates. With a filter, every running, waiting or held saga it matches (confirmed first)", runCancel},
		{"resume", "ID [--skip] | " + bulkArgs + " " + stackArgs, "continue a saga parked in compensation_failed. With a filter, every parked saga it matches (confirmed first)", runResume},
		{"retry", "ID | " + bulkArgs + " " + stackArgs, "run the step a held saga failed on again, with a fresh attempt budget (on_failure: hold). With a filter, every held saga it matches (confirmed first)", runRetry},
		{"compensate", "ID | " + bulkArgs + " " + stackArgs, "compensate a held saga, as its failure would have without on_failure: hold. With a filter, every held saga it matches (confirmed first)", runCompensate},
		{"signal", "ID NAME [--payload JSON|@FILE] [--id ID] " + stackArgs, "send a saga a signal: an await of NAME takes it, its payload in the await's out", runSignal},
		{"callback", "TOKEN (--output JSON|@FILE | --error TYPE [--message M]) " + stackArgs, "complete a callback step's token with its output, or fail its attempt", runCallback},
		{"pause", "(--name N | --action A) [--until T|D] [--compensations] | --list [--json] " + stackArgs, "hold the steps of the sagas of a name, or the calls of an action in every saga: deferred, no attempt spent, until unpause (or --until); compensations, deadlines and cancels go on", runPause},
		{"unpause", "(--name N | --action A) " + stackArgs, "lift a pause: the steps it held run within a minute", runUnpause},
		{"pauses", "[--json] " + stackArgs, "list the pauses", runPauses},
		{"limit", limitArgs, "bound the calls of an action across every saga and worker, its compensations included: a call over the limit is deferred a second or two, never failed", runLimit},
		{"sweep", "[--idle-for D] [--max-resends N] " + stackArgs, "re-send the messages of unfinished sagas idle too long (a start or cancel cut off before its send)", runSweep},
		{"redrive", redriveArgs, "move dead letters back to the queues they came from, and say what moved and why the start queue refused what it did", runRedrive},
		{"console", "[--addr 127.0.0.1:8080] [--allow-remote] " + stackArgs, "serve the operator's web console: sagas listed and filtered, each one's graph, history, input and vars; cancel, resume, retry, compensate, signal and callbacks, one saga or every saga a filter matches; pauses, action limits and dead letters; each confirmed", runConsole},
		{"schedule", scheduleArgs, "list when an EventBridge Scheduler expression starts a saga, and the saga ids; print a schedule resource for the template", runSchedule},
		{"local", "[up|down] [--main FUNCTION=PACKAGE]... [--workers N] [--visibility D]", "run the deployed shape here: emulators, the real bootstraps under aws-lambda-rie, queue pollers", runLocal},
		{"help", "", "show this help", nil},
	}
}

// Main runs sagactl with args (without the program name) and returns the exit code.
func Main(args []string, cfg Config) int {
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Name == "" {
		cfg.Name = "sagactl"
	}
	if cfg.Actions == nil {
		cfg.Actions = lambdasaga.NewActions()
	}
	cfg.reg = frontdoor.Registry(cfg.Actions)
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(&cfg, cfg.Stdout)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	for _, cmd := range commands() {
		if cmd.name == args[0] && cmd.run != nil {
			return cmd.run(&cfg, args[1:])
		}
	}
	var names []string
	for _, cmd := range commands() {
		names = append(names, cmd.name)
	}
	cfg.errorf("unknown command %q (commands: %s)", args[0], strings.Join(names, ", "))
	return ExitUsage
}

func usage(c *Config, w io.Writer) {
	fmt.Fprintf(w, "%s: sagas on AWS Lambda, DynamoDB and SQS\n\nUsage:\n", c.Name)
	for _, cmd := range commands() {
		fmt.Fprintf(w, "  %s %s %s\n      %s\n", c.Name, cmd.name, cmd.args, cmd.summary)
	}
	fmt.Fprintf(w, "\nSTACK says where the sagas are:\n"+
		"  --local                         the loop `%s local` runs in this directory\n"+
		"  --table T --advance-queue-url U --compensate-queue-url U\n"+
		"                                  a deployed stack's outputs (or $LAMBDASAGA_TABLE, $LAMBDASAGA_ADVANCE_QUEUE_URL,\n"+
		"                                  $LAMBDASAGA_COMPENSATE_QUEUE_URL)\n"+
		"  --dynamodb-endpoint URL --sqs-endpoint URL\n"+
		"                                  the emulators `%s run --dynamodb-endpoint URL --sqs-endpoint URL` kept them in\n"+
		"                                  (with run's --table and --queue-prefix, if it was given them)\n", c.Name, c.Name)
	fmt.Fprintf(w, "\nExit codes: 0 succeeded, 1 usage or input error, 2 saga compensated, 3 compensation failed.\n")
}

func (c *Config) errorf(format string, args ...any) {
	fmt.Fprintf(c.Stderr, "%s: %s\n", c.Name, fmt.Sprintf(format, args...))
}

// flags parses args with flags and positional arguments in any order.
// When it returns false the command ends with the exit code it returns:
// ExitOK after --help (the command's usage, on stdout), ExitUsage after a
// bad flag.
func (c *Config) flags(fs *flag.FlagSet, args []string) ([]string, int, bool) {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.commandUsage(fs)
				return nil, ExitOK, false
			}
			c.errorf("%s: %s (see %s %s --help)", fs.Name(), err, c.Name, fs.Name())
			return nil, ExitUsage, false
		}
		if fs.NArg() == 0 {
			return positional, ExitOK, true
		}
		if used := len(args) - fs.NArg(); used > 0 && args[used-1] == "--" {
			return append(positional, fs.Args()...), ExitOK, true // after --, names only
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// flagsOnly is flags for a command that takes flags and no other
// argument: one is a usage error.
func (c *Config) flagsOnly(fs *flag.FlagSet, args []string) (int, bool) {
	rest, code, ok := c.flags(fs, args)
	if !ok {
		return code, false
	}
	if len(rest) > 0 {
		c.errorf("%s: unexpected arguments %v", fs.Name(), rest)
		return ExitUsage, false
	}
	return ExitOK, true
}

// commandUsage prints one command's usage and flags on stdout.
func (c *Config) commandUsage(fs *flag.FlagSet) {
	for _, cmd := range commands() {
		if cmd.name == fs.Name() {
			fmt.Fprintf(c.Stdout, "Usage: %s %s %s\n  %s\n", c.Name, cmd.name, cmd.args, cmd.summary)
		}
	}
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	if b.Len() > 0 {
		fmt.Fprintf(c.Stdout, "\nFlags:\n%s", b.String())
	}
	switch fs.Name() {
	case "run":
		fmt.Fprint(c.Stdout, runExitCodes)
	case "schedule":
		fmt.Fprint(c.Stdout, scheduleUsage)
	case "check":
		fmt.Fprint(c.Stdout, checkExitCodes)
	}
}

// checkID refuses an --id that cannot name a saga, before anything starts.
// Empty is fine: the command makes one up.
func (c *Config) checkID(id string) bool {
	if id != "" && !durable.ValidSagaID(id) {
		c.errorf("--id: not a saga id: use 1 to 128 letters, digits, '_', '.', ':' or '-', starting with a letter or digit")
		return false
	}
	return true
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// load reads and compiles a definition, printing every problem.
func (c *Config) load(file string) (*saga.Plan, bool) { return c.loadWith(file, saga.Options{}) }

// loadWith is load with compile options.
func (c *Config) loadWith(file string, opts saga.Options) (*saga.Plan, bool) {
	src, err := readFile(file, lang.MaxDefinitionBytes, "a definition")
	if err != nil {
		c.errorf("definition %v", err)
		return nil, false
	}
	plan, err := saga.CompileFile(definitionFiles{name: file, src: src}, file, opts)
	if err != nil {
		var de *lang.DefinitionError
		if errors.As(err, &de) {
			for _, p := range de.Problems {
				fmt.Fprintln(c.Stderr, p.String())
			}
			c.errorf("%s: %d problem(s)", file, len(de.Problems))
		} else {
			c.errorf("%s: %v", file, err)
		}
		return nil, false
	}
	return plan, true
}

// readFile reads file whole if it holds at most limit bytes; a larger one
// (or an endless one: /dev/zero, a pipe) is refused after limit+1 bytes,
// never read into memory whole. A named pipe is opened without waiting
// for a writer (none: it reads as empty), and a pipe or device that stops
// delivering is given up after readPatience. Errors start with the file's
// name; what says what the file is for.
func readFile(file string, limit int, what string) ([]byte, error) {
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fileError(file, err)
	}
	defer f.Close()
	_ = f.SetReadDeadline(time.Now().Add(readPatience)) // pipes and devices only; a regular file ignores it
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, fmt.Errorf("%s: still not at its end after %s (a pipe whose writer stalled?)", file, readPatience)
	}
	if err != nil {
		return nil, fileError(file, err)
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%s: over the limit of %d bytes for %s", file, limit, what)
	}
	return b, nil
}

// readPatience bounds the wait for a pipe or device to deliver a file.
const readPatience = 30 * time.Second

// fileError names file once: the *fs.PathError's own text would repeat it
// after an operation name ("open FILE: ...").
func fileError(file string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s: %w", file, err)
}

// oneDefinition checks that the command named exactly one definition file
// and compiles it, printing every problem.
func (c *Config) oneDefinition(cmd string, files []string) (*saga.Plan, string, bool) {
	if len(files) != 1 {
		c.errorf("%s: name exactly one definition file (got %d)", cmd, len(files))
		return nil, "", false
	}
	plan, ok := c.load(files[0])
	return plan, files[0], ok
}

// inputOrZero reads --input, or makes zero values of the declared fields
// when it is empty (for commands that only walk a definition's path).
func (c *Config) inputOrZero(plan *saga.Plan, arg string) (map[string]any, bool) {
	if arg == "" {
		return zeroInput(plan.Definition()), true
	}
	return c.readInput(arg)
}

// readInput reads --input: inline JSON or @file, at most
// MaxInputFileBytes.
func (c *Config) readInput(arg string) (map[string]any, bool) {
	return c.readInputWithin(arg, MaxInputFileBytes)
}

// readInputWithin reads --input, at most limit bytes.
func (c *Config) readInputWithin(arg string, limit int) (map[string]any, bool) {
	if arg == "" {
		return map[string]any{}, true
	}
	src := []byte(arg)
	what := "--input"
	if file, ok := strings.CutPrefix(arg, "@"); ok {
		b, err := readFile(file, limit, "an input")
		if err != nil {
			c.errorf("--input: %v", err)
			return nil, false
		}
		src, what = b, "--input "+arg
	} else if len(src) > limit {
		c.errorf("--input: %d bytes, over the limit of %d bytes for an input", len(src), limit)
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		c.errorf("%s: not valid JSON: %v", what, err)
		return nil, false
	}
	if dec.More() {
		c.errorf("%s: more than one JSON value", what)
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		c.errorf("%s: must be a JSON object, got %s", what, jsonKind(v))
		return nil, false
	}
	norm, err := saga.NormalizeJSON(m)
	if err != nil {
		c.errorf("%s: %v", what, err)
		return nil, false
	}
	return norm.(map[string]any), true
}

// jsonKind names what a decoded JSON value is, for errors that must not
// echo the value itself.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a bool"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%T", v)
}
