package sagactl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/middleware"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// LocalStateFile is where `sagactl local` records the running local
// environment, for `start --local` and `status --local`.
const LocalStateFile = ".lambdasaga/local.json"

// localState is what LocalStateFile holds.
type localState struct {
	PID                int               `json:"pid"`
	DynamoDBEndpoint   string            `json:"dynamodb_endpoint"`
	SQSEndpoint        string            `json:"sqs_endpoint"`
	Table              string            `json:"table"`
	QueueURLs          map[string]string `json:"queue_urls"`
	AdvanceQueueURL    string            `json:"advance_queue_url"`
	CompensateQueueURL string            `json:"compensate_queue_url"`
}

// stackFlags say where the sagas a command reads or acts on are: on a
// deployed stack (--table and the queue URLs, on AWS), on the local loop
// (--local), or on emulators (--dynamodb-endpoint and --sqs-endpoint: the
// table and queues `sagactl run` keeps its sagas in there). Every command
// on sagas registers them on its flag set and opens its client with
// client: start, status, list, cancel, resume, signal, callback, sweep,
// and those to come.
type stackFlags struct {
	fs                          *flag.FlagSet // to tell the flags given from their defaults
	local                       bool
	table                       string
	advanceURL, compURL         string
	dynamoEndpoint, sqsEndpoint string
	queuePrefix                 string
	bucket, s3Endpoint          string
	startURL                    string // registerStartQueue's
}

func (s *stackFlags) register(fs *flag.FlagSet) {
	s.fs = fs
	fs.BoolVar(&s.local, "local", false, "talk to the loop sagactl local runs in this directory ("+LocalStateFile+")")
	fs.StringVar(&s.table, "table", os.Getenv("LAMBDASAGA_TABLE"), "the saga table (stack output TableName; default $LAMBDASAGA_TABLE; on the emulators, "+defaultTable+" as sagactl run)")
	fs.StringVar(&s.advanceURL, "advance-queue-url", os.Getenv("LAMBDASAGA_ADVANCE_QUEUE_URL"), "the advance queue (stack output AdvanceQueueUrl; default $LAMBDASAGA_ADVANCE_QUEUE_URL; on the emulators, found by --queue-prefix)")
	fs.StringVar(&s.compURL, "compensate-queue-url", os.Getenv("LAMBDASAGA_COMPENSATE_QUEUE_URL"), "the compensate queue (stack output CompensateQueueUrl; default $LAMBDASAGA_COMPENSATE_QUEUE_URL; on the emulators, found by --queue-prefix)")
	fs.StringVar(&s.dynamoEndpoint, "dynamodb-endpoint", "", "DynamoDB at this endpoint (an emulator), with --sqs-endpoint: the sagas sagactl run --dynamodb-endpoint kept there")
	fs.StringVar(&s.sqsEndpoint, "sqs-endpoint", "", "SQS at this endpoint (an emulator), with --dynamodb-endpoint")
	fs.StringVar(&s.queuePrefix, "queue-prefix", defaultQueuePrefix, "on the emulators, the queues' name prefix, as sagactl run's --queue-prefix")
	fs.StringVar(&s.bucket, "bucket", os.Getenv("LAMBDASAGA_BUCKET"), "the bucket of the sagas' large values (stack output ValuesBucketName; default $LAMBDASAGA_BUCKET; on the emulators, "+defaultBucket+" as sagactl run): without it, a saga holding such values shows references and cannot be acted on")
	fs.StringVar(&s.s3Endpoint, "s3-endpoint", "", "on the emulators, S3 at this endpoint: the values sagactl run --s3-endpoint kept there")
}

// registerStartQueue adds --start-queue-url, for the commands that read
// the start queue's dead letters (redrive, console) on a deployed stack.
func (s *stackFlags) registerStartQueue(fs *flag.FlagSet) {
	fs.StringVar(&s.startURL, "start-queue-url", os.Getenv("LAMBDASAGA_START_QUEUE_URL"), "the start queue (stack output StartQueueUrl; default $LAMBDASAGA_START_QUEUE_URL), whose dead letters go with the others; on the emulators, found by --queue-prefix")
}

// offloads reports whether the commands keep large values by reference:
// a bucket is named, or S3 on the emulators.
func (s *stackFlags) offloads() bool { return s.bucket != "" || s.s3Endpoint != "" }

// given lists the flags among names that the command line set.
func (s *stackFlags) given(names ...string) []string {
	var out []string
	s.fs.Visit(func(f *flag.Flag) {
		if slices.Contains(names, f.Name) {
			out = append(out, "--"+f.Name)
		}
	})
	return out
}

// client builds the client the flags describe. apiOptions are added to its
// AWS clients (Config.APIOptions: an accounting.Counter's Register).
func (s *stackFlags) client(ctx context.Context, apiOptions ...func(*middleware.Stack) error) (*client.Client, error) {
	if s.local {
		if other := s.given("table", "advance-queue-url", "compensate-queue-url", "dynamodb-endpoint", "sqs-endpoint", "queue-prefix"); len(other) > 0 {
			return nil, fmt.Errorf("--local talks to the loop `sagactl local` runs, whose table and queues %s names: drop %s (or drop --local)", LocalStateFile, strings.Join(other, " and "))
		}
		if lock, held, err := lockLocal(); err == nil && held {
			// Nobody holds the lock: no local loop runs here, whatever
			// the state file says (a crashed one left it behind).
			lock.Close()
			return nil, fmt.Errorf("--local: no `sagactl local` is running in this directory (start one, or remove a stale %s)", LocalStateFile)
		}
		b, err := os.ReadFile(LocalStateFile)
		if err != nil {
			return nil, fmt.Errorf("--local: %v (is `sagactl local` running in this directory?)", err)
		}
		var ls localState
		if err := json.Unmarshal(b, &ls); err != nil {
			return nil, fmt.Errorf("--local: %s: %v", LocalStateFile, err)
		}
		return client.NewAWS(client.AWSConfig{AWS: awslocal.ConfigAs(awslocal.OperatorPrincipal, apiOptions...), Table: ls.Table, AdvanceQueueURL: ls.AdvanceQueueURL, CompensateQueueURL: ls.CompensateQueueURL,
			DynamoDBEndpoint: ls.DynamoDBEndpoint, SQSEndpoint: ls.SQSEndpoint, StartQueueURL: ls.QueueURLs["StartQueue"]})
	}
	if s.dynamoEndpoint != "" || s.sqsEndpoint != "" {
		return s.emulatorClient(ctx, apiOptions)
	}
	if s.table == "" || s.advanceURL == "" || s.compURL == "" {
		return nil, errors.New("say where the sagas are: --local, or --table, --advance-queue-url and --compensate-queue-url (the stack's outputs; or set LAMBDASAGA_TABLE, LAMBDASAGA_ADVANCE_QUEUE_URL, LAMBDASAGA_COMPENSATE_QUEUE_URL), or --dynamodb-endpoint and --sqs-endpoint (the emulators sagactl run used)")
	}
	if other := s.given("queue-prefix"); len(other) > 0 {
		return nil, errors.New("--queue-prefix names the queues on the emulators, with --dynamodb-endpoint and --sqs-endpoint; a deployed stack's are --advance-queue-url and --compensate-queue-url")
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	awsCfg.APIOptions = append(awsCfg.APIOptions, apiOptions...)
	return client.NewAWS(client.AWSConfig{AWS: awsCfg, Table: s.table, AdvanceQueueURL: s.advanceURL, CompensateQueueURL: s.compURL, Bucket: s.bucket, StartQueueURL: s.startURL})
}

// emulatorClient is client on the emulators: the table (run's default
// unless --table says otherwise) and queues must be there (a deployed
// stack's $LAMBDASAGA_TABLE and queue URLs do not count here), and each
// missing one, or an endpoint that does not answer, is named.
func (s *stackFlags) emulatorClient(ctx context.Context, apiOptions []func(*middleware.Stack) error) (*client.Client, error) {
	if s.dynamoEndpoint == "" || s.sqsEndpoint == "" {
		return nil, errors.New("--dynamodb-endpoint and --sqs-endpoint go together (the emulators sagactl run --dynamodb-endpoint URL --sqs-endpoint URL used)")
	}
	// The environment's table and queues are a deployed stack's: on the
	// emulators, only what the command line names counts.
	em := emulatorStack{dynamoEndpoint: s.dynamoEndpoint, sqsEndpoint: s.sqsEndpoint, table: defaultTable, queuePrefix: s.queuePrefix, principal: awslocal.OperatorPrincipal}
	if len(s.given("table")) > 0 {
		em.table = s.table
	}
	switch urls := s.given("advance-queue-url", "compensate-queue-url"); {
	case len(urls) == 2 && len(s.given("queue-prefix")) == 0:
		em.urls = map[durable.QueueName]string{durable.QueueAdvance: s.advanceURL, durable.QueueCompensate: s.compURL}
	case len(urls) > 0:
		return nil, errors.New("on the emulators, name the queues by --queue-prefix, or by both --advance-queue-url and --compensate-queue-url")
	}
	store, queue, err := em.open(ctx, false, apiOptions)
	if err != nil {
		return nil, err
	}
	var objects durable.Objects
	if s.s3Endpoint != "" {
		be := backendFlags{s3Endpoint: s.s3Endpoint, bucket: defaultBucket}
		if len(s.given("bucket")) > 0 {
			be.bucket = s.bucket
		}
		if objects, err = be.objects(ctx, apiOptions, false); err != nil {
			return nil, err
		}
	}
	return client.New(client.Config{Store: store, Queue: queue, Objects: objects, DeadLetters: em.deadLetters(apiOptions)})
}

func runStart(c *Config, args []string) int {
	fs := flag.NewFlagSet("start", flag.ContinueOnError)
	input := fs.String("input", "", "saga input: JSON, or @FILE")
	id := fs.String("id", "", "saga id (default: random); starting the same id with the same input again is a no-op")
	var signals stringList
	fs.Var(&signals, "signal", "signal-with-start: send the signal NAME=JSON (or NAME=@FILE) to the saga, which is started unless it exists (then its input is not compared); needs --id")
	signalID := fs.String("signal-id", "", "with --signal, the signal's id: the same start run again delivers it once (default: random)")
	asJSON := fs.Bool("json", false, "print the saga as JSON")
	var stack stackFlags
	stack.register(fs)
	pos, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	if !c.checkID(*id) {
		return ExitUsage
	}
	if len(pos) != 1 {
		c.errorf("start: name exactly one definition file, or the name of a deployed saga (got %d arguments)", len(pos))
		return ExitUsage
	}
	var (
		plan *saga.Plan
		sp   = client.StartParams{SagaID: *id}
	)
	if startsByName(pos[0]) {
		sp.Name = pos[0]
	} else if plan, ok = c.load(pos[0]); !ok {
		return ExitUsage
	} else {
		// The source compiled here, not the file read again.
		sp.File, sp.Definition = filepath.Base(pos[0]), plan.Definition().Source
	}
	// With the sagas' bucket, values over the threshold go by reference:
	// an input may then be as large as run's.
	inputLimit, offload := MaxInputFileBytes, 0
	if stack.offloads() {
		inputLimit, offload = MaxOffloadInputFileBytes, engine.DefaultOffloadBytes
	}
	if sp.Input, ok = c.readInputWithin(*input, inputLimit); !ok {
		return ExitUsage
	}
	if plan != nil {
		if _, err := plan.CheckInputWithin(sp.Input, offload); err != nil {
			c.errorf("%v", err)
			return ExitUsage
		}
	}
	var sig *startSignal
	switch {
	case len(signals) > 1:
		c.errorf("start: --signal at most once (a signal-with-start delivers one signal; send others with %s signal)", c.Name)
		return ExitUsage
	case len(signals) == 1 && *id == "":
		c.errorf("start --signal: a signal-with-start needs the saga's --id (to find the saga if it exists)")
		return ExitUsage
	case len(signals) == 1:
		ss, ok := c.readSignals(plan, signals)
		if !ok {
			return ExitUsage
		}
		sig = &ss[0]
		if err := checkDelivery(&saga.Delivery{Signal: sig.name, ID: *signalID}, sig.payload); err != nil {
			c.errorf("--signal-id: %v", err)
			return ExitUsage
		}
	case *signalID != "":
		c.errorf("start: --signal-id goes with --signal")
		return ExitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := stack.client(ctx, c.APIOptions...)
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	if sig == nil {
		st, err := cl.Start(ctx, sp)
		if err != nil {
			c.errorf("start: %v", err)
			return ExitUsage
		}
		return c.printState(ctx, cl, st, *asJSON)
	}
	var opts []client.SignalOption
	if *signalID != "" {
		opts = append(opts, client.SignalID(*signalID))
	}
	res, err := cl.SignalWithStart(ctx, sp, sig.name, sig.payload, opts...)
	if err != nil {
		c.errorf("start %s --signal %s: %s", *id, sig.name, deliveryError(err))
		return ExitUsage
	}
	started := "existed already, not started again"
	if res.Started {
		started = "started"
	}
	d := res.Delivered
	return c.printStartDelivered(ctx, cl, res.Started, d, fmt.Sprintf("saga %s: %s; signal %s: %s", *id, started, sig.name, d.Receipt), *asJSON)
}

// startsByName reports whether start's argument names a deployed saga
// rather than a definition file: it is no file that exists, has no path
// separator and no definition's extension, and is a saga name.
func startsByName(arg string) bool {
	if _, err := os.Stat(arg); err == nil {
		return false
	}
	if strings.ContainsAny(arg, `/\`) {
		return false
	}
	switch filepath.Ext(arg) {
	case ".yaml", ".yml", ".json":
		return false
	}
	return lang.ValidSagaName(arg)
}

func runStatus(c *Config, args []string) int { return c.sagaCommand("status", args, nil) }

func runCancel(c *Config, args []string) int {
	if isBulk(args) {
		return runBulk(c, "cancel", args)
	}
	return c.sagaCommand("cancel", args, func(ctx context.Context, cl *client.Client, id string) (*saga.State, error) {
		return cl.Cancel(ctx, id)
	})
}

func runResume(c *Config, args []string) int {
	if isBulk(args) {
		return runBulk(c, "resume", args)
	}
	var skip bool
	flags := func(fs *flag.FlagSet) {
		fs.BoolVar(&skip, "skip", false, "do not run the compensation that failed: you undid that step by hand")
	}
	return c.sagaCommand("resume", args, func(ctx context.Context, cl *client.Client, id string) (*saga.State, error) {
		if skip {
			return cl.SkipCompensation(ctx, id)
		}
		return cl.Resume(ctx, id)
	}, flags)
}

func runRetry(c *Config, args []string) int {
	if isBulk(args) {
		return runBulk(c, "retry", args)
	}
	return c.sagaCommand("retry", args, func(ctx context.Context, cl *client.Client, id string) (*saga.State, error) {
		return cl.Retry(ctx, id)
	})
}

func runCompensate(c *Config, args []string) int {
	if isBulk(args) {
		return runBulk(c, "compensate", args)
	}
	return c.sagaCommand("compensate", args, func(ctx context.Context, cl *client.Client, id string) (*saga.State, error) {
		return cl.Compensate(ctx, id)
	})
}

// withClient runs do with a client of the stack, printing its error.
func (c *Config) withClient(stack *stackFlags, do func(context.Context, *client.Client) error) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := stack.client(ctx, c.APIOptions...)
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	if err := do(ctx, cl); err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	return ExitOK
}

// sagaCommand runs a command on one saga by id; act nil only reads it.
// flags, if given, adds the command's own flags.
func (c *Config) sagaCommand(name string, args []string, act func(context.Context, *client.Client, string) (*saga.State, error), flags ...func(*flag.FlagSet)) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the saga as JSON")
	for _, f := range flags {
		f(fs)
	}
	var stack stackFlags
	stack.register(fs)
	ids, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	if len(ids) != 1 {
		c.errorf("%s: name exactly one saga id (got %d)", name, len(ids))
		return ExitUsage
	}
	if !durable.ValidSagaID(ids[0]) {
		c.errorf("%s: not a saga id (%d bytes): use 1 to 128 letters, digits, '_', '.', ':' or '-', starting with a letter or digit", name, len(ids[0]))
		return ExitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := stack.client(ctx, c.APIOptions...)
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	var st *saga.State
	if act != nil {
		st, err = act(ctx, cl, ids[0])
	} else {
		st, err = cl.Status(ctx, ids[0])
	}
	if err != nil {
		c.errorf("%s: %v", name, err)
		return ExitUsage
	}
	return c.printState(ctx, cl, st, *asJSON)
}

// stateReport is the JSON shape of start, status, cancel and resume.
type stateReport struct {
	SagaID            string          `json:"saga_id"`
	Saga              string          `json:"saga"`
	Status            durable.Status  `json:"status"`
	CancelRequested   bool            `json:"cancel_requested,omitempty"`
	Version           uint64          `json:"version"`
	Pending           string          `json:"pending,omitempty"`
	Attempt           int             `json:"attempt,omitempty"`
	Failure           *saga.StepError `json:"failure,omitempty"`
	CompensationError *saga.StepError `json:"compensation_error,omitempty"`
	Output            any             `json:"output,omitempty"`
	DefinitionHash    string          `json:"definition_hash"`
	CreatedAt         time.Time       `json:"created_at"`
	StatusSince       time.Time       `json:"status_since"`
	UpdatedAt         time.Time       `json:"updated_at"`
	// Resends counts the sweep's re-sends of this version's messages:
	// at engine.DefaultMaxResends the sweep stops and leaves the saga for an operator.
	Resends int `json:"resends,omitempty"`
	// Held is what a held saga is held on.
	Held *heldReport `json:"held,omitempty"`
	// Pause is what a waiting saga waits on: a wait, an await's signal, a
	// callback's token.
	Pause *pauseReport `json:"pause,omitempty"`
	// PausedBy is the operator's pause that holds the saga's next step.
	PausedBy *pausedByReport `json:"paused_by,omitempty"`
	// KeptSignals counts the signals kept for awaits to come.
	KeptSignals int `json:"kept_signals,omitempty"`
	// Parent is where a child run of a fork comes from.
	Parent *parentReport `json:"parent,omitempty"`
	// Fork is the fork the saga waits on: its children.
	Fork *engine.ForkStatus `json:"fork,omitempty"`
	// Undoing is the child a compensating saga undoes, as a whole.
	Undoing string `json:"undoing,omitempty"`
}

type parentReport struct {
	SagaID string `json:"saga_id"`
	Step   string `json:"step"`
	Index  int    `json:"index"`
}

// reportOf builds what start, status, cancel, resume, signal and
// callback print of a saga.
func (c *Config) reportOf(ctx context.Context, cl *client.Client, st *saga.State) stateReport {
	raw := st // the callback token is made from its key, which shown drops
	st = shown(ctx, cl, st)
	r := stateReport{SagaID: st.SagaID, Saga: st.Name, Status: st.Status, CancelRequested: st.CancelRequested, Version: st.Version, Failure: st.Failure,
		CompensationError: st.CompensationError, Output: jsonable(st.Output), DefinitionHash: st.DefinitionHash,
		CreatedAt: st.CreatedAt, StatusSince: st.StatusSince, UpdatedAt: st.UpdatedAt, Resends: st.Resends, KeptSignals: keptSignals(st)}
	if cur, ok := st.Pending(); ok {
		if id, err := cl.Step(ctx, st, cur.Step); err == nil {
			r.Pending = id
			if cur.Compensating {
				r.Pending = "undo " + id
			}
			r.Attempt = cur.Attempt
		}
	}
	if plan, err := cl.Plan(ctx, st); err == nil {
		r.Pause = pauseOf(plan, raw)
	}
	r.PausedBy = pausedByOf(ctx, cl, raw)
	if l := st.Parent; l != nil {
		r.Parent = &parentReport{SagaID: l.ID, Step: l.Step, Index: l.Index}
	}
	if cur, ok := st.Pending(); ok && cur.Held {
		r.Held = &heldReport{Step: r.Pending, Attempts: cur.Attempt, Until: st.WakeAt()}
		r.Pending, r.Attempt = "", 0
	}
	if cur, ok := st.Pending(); ok && cur.Fork {
		if cur.Compensating {
			r.Undoing = durable.ChildID(st.SagaID, strings.TrimPrefix(r.Pending, "undo "), cur.Seq, cur.Child)
		} else if fs, err := cl.Fork(ctx, st.SagaID); err == nil {
			r.Fork = fs
		}
	}
	return r
}

// heldReport is what a held saga is held on: the step that failed, its
// attempts so far, and when the hold ends (hold_for or the deadline; zero:
// never by itself).
type heldReport struct {
	Step     string    `json:"step"`
	Attempts int       `json:"attempts"`
	Until    time.Time `json:"until,omitzero"`
}

func (c *Config) printState(ctx context.Context, cl *client.Client, st *saga.State, asJSON bool) int {
	r := c.reportOf(ctx, cl, st)
	if asJSON {
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
		return ExitOK
	}
	fmt.Fprintf(c.Stdout, "saga %s (%s): %s, version %d, updated %s\n", r.SagaID, r.Saga, r.Status, r.Version, r.UpdatedAt.Format(time.RFC3339))
	switch {
	case r.Pause != nil:
		fmt.Fprintf(c.Stdout, "  paused: %s\n", r.Pause.text())
		if r.Pause.Token != "" {
			fmt.Fprintf(c.Stdout, "  token: %s\n  (complete it: %s callback TOKEN --output JSON, or --error TYPE [--message M])\n", r.Pause.Token, c.Name)
		}
	case r.Fork != nil:
		f := r.Fork
		fmt.Fprintf(c.Stdout, "  waiting on: %s, %d children (%d at once), %d ended\n", f.Step, f.Children, f.Lanes, f.Ended)
		for _, ch := range f.Current {
			status := string(ch.Status)
			if status == "" {
				status = "not started yet"
			}
			fmt.Fprintf(c.Stdout, "    child %d: %s (%s)\n", ch.Index, ch.SagaID, status)
		}
		if f.FailedChild >= 0 && f.FailedChild < f.Children {
			fmt.Fprintf(c.Stdout, "    child %d failed: no other starts; the running ones are cancelled\n", f.FailedChild)
		}
	case r.Held != nil:
		fmt.Fprintf(c.Stdout, "  held on: %s after %d attempt(s) (%s retry %s runs it again, with a fresh attempt budget; %s compensate %s undoes the saga)\n", r.Held.Step, r.Held.Attempts, c.Name, r.SagaID, c.Name, r.SagaID)
		if !r.Held.Until.IsZero() {
			fmt.Fprintf(c.Stdout, "  compensates at %s unless an operator acts first\n", r.Held.Until.UTC().Format(time.RFC3339))
		}
	case r.Undoing != "":
		fmt.Fprintf(c.Stdout, "  undoing: %s, a child of %s, as a whole\n", r.Undoing, strings.TrimPrefix(r.Pending, "undo "))
	case r.Pending != "":
		fmt.Fprintf(c.Stdout, "  waiting on: %s (attempt %d)\n", r.Pending, r.Attempt)
	}
	if r.PausedBy != nil {
		fmt.Fprintf(c.Stdout, "  %s\n", r.PausedBy.text())
	}
	if p := r.Parent; p != nil {
		fmt.Fprintf(c.Stdout, "  child %d of %s's %s\n", p.Index, p.SagaID, p.Step)
	}
	if r.KeptSignals > 0 {
		fmt.Fprintf(c.Stdout, "  kept signals: %d, for awaits to come\n", r.KeptSignals)
	}
	switch {
	case r.CancelRequested && r.Fork != nil:
		fmt.Fprintf(c.Stdout, "  cancel requested: a stop message is on its way to its running children; it compensates once they have ended\n")
	case r.CancelRequested:
		fmt.Fprintf(c.Stdout, "  cancel requested: compensates once %s has an outcome\n", r.Pending)
	}
	if r.Resends > 0 {
		fmt.Fprintf(c.Stdout, "  the sweep sent this version's messages again (%s) without progress", timesText(r.Resends))
		if r.Resends >= engine.DefaultMaxResends {
			fmt.Fprintf(c.Stdout, ": a sweep with the default --max-resends (%d) leaves it for an operator (fix what fails it, then redrive the dead-letter queue)", engine.DefaultMaxResends)
		}
		fmt.Fprintln(c.Stdout)
	}
	if r.Failure != nil {
		fmt.Fprintf(c.Stdout, "  failed: %s\n", r.Failure.Error())
	}
	if r.CompensationError != nil {
		fmt.Fprintf(c.Stdout, "  parked: %s (sagactl resume %s retries it; --skip if you undid it by hand)\n", r.CompensationError.Error(), r.SagaID)
	}
	if st.Status == durable.StatusSucceeded {
		out, _ := json.Marshal(r.Output)
		fmt.Fprintf(c.Stdout, "  output: %s\n", out)
	}
	return ExitOK
}

func runSweep(c *Config, args []string) int {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	idle := fs.Duration("idle-for", 20*time.Minute, "pick up unfinished sagas not updated for this long (above the longest retry delay, 15m)")
	maxResends := fs.Int("max-resends", engine.DefaultMaxResends, "send one version's messages again at most this many times; then leave the saga for an operator")
	var stack stackFlags
	stack.register(fs)
	if code, ok := c.flagsOnly(fs, args); !ok {
		return code
	}
	if *idle < 0 {
		c.errorf("sweep: --idle-for must not be negative (a sweep re-sends the messages of sagas idle at least that long; 0: all unfinished sagas)")
		return ExitUsage
	}
	if *maxResends < 1 {
		c.errorf("sweep: --max-resends must be 1 or more (how many times one version's messages are sent again)")
		return ExitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, err := stack.client(ctx, c.APIOptions...)
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	res, err := cl.Sweep(ctx, &engine.SweepParams{IdleFor: *idle, MaxResends: *maxResends})
	if res == nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	// A sweep goes on past sagas it cannot read or send for: say what it
	// did, then what it skipped.
	defer func() {
		if err != nil {
			c.errorf("%v", err)
		}
	}()
	fmt.Fprintf(c.Stdout, "sweep: %d sagas in their status for %s or more checked, %d idle had their messages sent again\n", res.Checked, *idle, res.Resent)
	if res.Paused > 0 {
		fmt.Fprintf(c.Stdout, "sweep: %d idle sagas left alone: their next step is paused (%s pauses), and its message comes back by itself\n", res.Paused, c.Name)
	}
	if res.LeftForOperator > 0 {
		fmt.Fprintf(c.Stdout, "sweep: %d idle sagas left for an operator: their messages were sent again (%s) and they did not move (sagactl status ID; the message is in a dead-letter queue)\n", res.LeftForOperator, timesText(*maxResends))
	}
	if err != nil {
		return ExitUsage
	}
	return ExitOK
}

// timesText is "once", "twice" or "N times".
func timesText(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// shown is st as a human may see it: its secret inputs masked wherever
// they appear (output, failure messages). When the definition that says
// which inputs are secret cannot be read, the output and the messages
// are hidden whole rather than shown unmasked.
func shown(ctx context.Context, cl *client.Client, st *saga.State) *saga.State {
	plan, err := cl.Plan(ctx, st)
	if err == nil {
		return plan.Redactor(st).State(st)
	}
	const hidden = "[hidden: the saga's definition, which says what is secret, could not be read]"
	cp := *st
	if cp.Output != nil {
		cp.Output = hidden
	}
	for _, e := range []**saga.StepError{&cp.Failure, &cp.CompensationError} {
		if *e != nil {
			masked := **e
			masked.Message = hidden
			*e = &masked
		}
	}
	return &cp
}
