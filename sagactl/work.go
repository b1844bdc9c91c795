package sagactl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/startqueue"
)

// workFailUsage is what work --help says of --fail: work serves every saga
// on the queues, of any definition, so a name is matched as it comes.
const workFailUsage = "make the step with this id (or, as STEP.compensate, its compensation) fail for good, by step id in whatever saga runs it: " +
	"no definition is at hand to check the name against, so a misspelt one fails nothing; repeatable"

// runWork runs the workers on the emulators' table and queues, as run's
// embedded runtime does, for the sagas run left there (still running at
// --timeout) and what signal, callback, cancel and resume sent them since.
func runWork(c *Config, args []string) int {
	fs := flag.NewFlagSet("work", flag.ContinueOnError)
	var be backendFlags
	be.register(fs)
	// work runs on what is there: a table or queue it cannot find means the
	// endpoints or names are wrong, and making an empty one would hide it.
	fs.Lookup("dynamodb-endpoint").Usage = "the DynamoDB emulator's endpoint; required"
	fs.Lookup("sqs-endpoint").Usage = "the SQS emulator's endpoint; required"
	fs.Lookup("table").Usage = "DynamoDB table, as run was given it; it must exist"
	fs.Lookup("queue-prefix").Usage = "SQS queue name prefix, as run was given it; the queues must exist"
	fs.Lookup("s3-endpoint").Usage = "the S3 emulator's endpoint, as run was given it: the values kept as objects are there"
	fs.Lookup("bucket").Usage = "S3 bucket, as run was given it; it must exist"
	var fails stringList
	fs.Var(&fails, "fail", workFailUsage)
	forD := fs.Duration("for", 0, "stop after this long (default: at SIGINT or SIGTERM)")
	verbose := fs.Bool("verbose", false, "log every handled message to stderr (ids, step, version, outcome; never values)")
	if code, ok := c.flagsOnly(fs, args); !ok {
		return code
	}
	if be.dynamoEndpoint == "" || be.sqsEndpoint == "" {
		c.errorf("work: --dynamodb-endpoint and --sqs-endpoint are required: work handles the messages of the sagas on the emulators")
		return ExitUsage
	}
	timed := false
	fs.Visit(func(f *flag.Flag) { timed = timed || f.Name == "for" })
	if timed && *forD <= 0 {
		c.errorf("work: --for must be positive")
		return ExitUsage
	}
	failing, ok := c.workFails(fails)
	if !ok {
		return ExitUsage
	}

	// The handler goes in before anything is said to run, so that an
	// interrupt from then on ends work with its summary.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	em := emulatorStack{dynamoEndpoint: be.dynamoEndpoint, sqsEndpoint: be.sqsEndpoint, table: be.table, queuePrefix: be.queuePrefix}
	store, queue, err := em.open(context.Background(), false, c.APIOptions)
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	// The start queue is read when it is there: a table and queues made
	// by an older sagactl have none.
	startURLs, startErr := em.startQueues(context.Background(), false, c.APIOptions)
	var missingQueue *sqstypes.QueueDoesNotExist
	if startErr != nil && !errors.As(startErr, &missingQueue) {
		c.errorf("%v", endpointError("--sqs-endpoint", be.sqsEndpoint, startErr))
		return ExitUsage
	}
	w := &worked{c: c, ended: map[string]durable.Status{}}
	receiver := &countingReceiver{Receiver: queue}
	coord := &coordinatorRef{}
	ready := make(chan struct{})
	// As run's backendFlags.apply sets them on the emulators.
	rtCfg := embedded.Config{Actions: gatedInvoker{ready: ready, next: invoker{reg: c.reg, fail: failing, coord: coord}}, OnStep: w.step,
		Store: store, Queue: queue, Receiver: receiver, Visibility: 30 * time.Second, PollInterval: 20 * time.Millisecond}
	if be.s3Endpoint != "" {
		objects, err := be.objects(context.Background(), c.APIOptions, false)
		if err != nil {
			c.errorf("%v", err)
			return ExitUsage
		}
		rtCfg.Objects = objects
	}
	if *verbose {
		rtCfg.Logger = slog.New(slog.NewTextHandler(c.Stderr, nil))
	}
	until := "until SIGINT or SIGTERM"
	if timed {
		until = "for " + forD.String() + " (or until SIGINT or SIGTERM)"
	}
	// Said before the workers start: from then on they print steps.
	fmt.Fprintf(c.Stdout, "work: handling the messages of table %s and queues %s... %s\n", be.table, be.queuePrefix, until)
	if startErr != nil {
		fmt.Fprintf(c.Stdout, "work: no start queue %s%s: requests are not read (sagactl run --sqs-endpoint makes it)\n", be.queuePrefix, startqueue.QueueName)
	}
	rt, err := embedded.Start(rtCfg)
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	coord.c = rt.Coordinator
	close(ready)
	var polled sync.WaitGroup
	pollCtx, stopPolling := context.WithCancel(context.Background())
	if startErr == nil {
		h, err := startqueue.New(startqueue.Config{Sagas: rt.Coordinator, Logger: rtCfg.Logger,
			DeadLetters: &startqueue.SQSDeadLetters{Client: awslocal.SQS(be.sqsEndpoint, c.APIOptions...), URL: startURLs.DeadLetter}})
		if err != nil {
			c.errorf("%v", err)
			stopPolling()
			rt.Close()
			return ExitUsage
		}
		p := &startqueue.Poller{Client: awslocal.SQS(be.sqsEndpoint, c.APIOptions...), URL: startURLs.Start, Handler: h, Logger: rtCfg.Logger, Handled: w.request}
		polled.Go(func() { _ = p.Run(pollCtx) })
	}
	var timer <-chan time.Time
	if timed {
		timer = time.After(*forD)
	}
	started := time.Now()
	stopped := "after " + forD.String()
	select {
	case <-timer:
	case s := <-sigs:
		stopped = fmt.Sprintf("on %s after %s", signalName(s), time.Since(started).Round(100*time.Millisecond))
	}
	// A second interrupt kills, as usual, while the messages in hand are
	// handled.
	signal.Stop(sigs)
	stopPolling()
	polled.Wait()
	rt.Close()
	w.summary(stopped, receiver)
	return ExitOK
}

// workFails reads work's --fail names as they are: a step id, or
// STEP.compensate for its compensation. A name is not resolved against a
// definition (resolveFails), since work serves sagas of any.
func (c *Config) workFails(names []string) (failSet, bool) {
	set := failSet{steps: map[string]bool{}, comps: map[string]bool{}}
	for _, name := range names {
		id, comp := strings.CutSuffix(name, ".compensate")
		if id == "" {
			c.errorf("work: --fail: name a step id, or STEP.compensate (got %q)", name)
			return failSet{}, false
		}
		if comp {
			set.comps[id] = true
		} else {
			set.steps[id] = true
		}
	}
	return set, true
}

func signalName(s os.Signal) string {
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

// worked prints the steps work runs, each saga's under a line naming it,
// and keeps how the sagas that ended did.
type worked struct {
	c     *Config
	mu    sync.Mutex
	last  string                    // the saga whose steps were printed last
	ended map[string]durable.Status // the sagas that ended here, fork children aside
	// requests counts the start queue's requests carried out or refused
	// (and so deleted), refused those refused.
	requests, refused int
}

func (w *worked) step(ev engine.StepEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// A fork's child runs (parallel branches, foreach iterations) end
	// within their parent, which list shows and this counts.
	if ev.Status.Final() && !durable.IsChildID(ev.SagaID) {
		w.ended[ev.SagaID] = ev.Status
	}
	if ev.Outcome == saga.OutcomeStarted {
		return
	}
	if ev.SagaID != w.last {
		// Workers run several sagas at once: the line says whose steps
		// follow. A fork child's id names its parent, fork and index.
		fmt.Fprintf(w.c.Stdout, "saga %s (%s)\n", ev.SagaID, ev.SagaName)
		w.last = ev.SagaID
	}
	printStep(w.c, ev, ev.Step)
}

// request prints what became of a start queue request.
func (w *worked) request(o startqueue.Outcome) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = ""
	// A request that could not be read names neither.
	what := strings.TrimSpace("request " + strings.TrimSpace(o.Kind+" "+o.SagaID))
	switch o.Verdict {
	case startqueue.Done:
		w.requests++
		receipt := ""
		if o.Receipt != "" {
			receipt = " (" + string(o.Receipt) + ")"
		}
		fmt.Fprintf(w.c.Stdout, "%s: done%s\n", what, receipt)
	case startqueue.Refused:
		w.requests++
		w.refused++
		fmt.Fprintf(w.c.Stdout, "%s: refused, moved to the dead-letter queue: %v\n", what, o.Err)
	default:
		fmt.Fprintf(w.c.Stdout, "%s: not carried out, it comes again: %v\n", what, o.Err)
	}
}

// summary prints what work did: the messages it handled and how the sagas
// that ended did.
func (w *worked) summary(stopped string, r *countingReceiver) {
	w.mu.Lock()
	defer w.mu.Unlock()
	handled := r.deleted.Load()
	line := fmt.Sprintf("work: stopped %s; %s handled", stopped, plural(handled, "message"))
	if w.requests > 0 {
		line += fmt.Sprintf(", %s (%d refused)", plural(int64(w.requests), "start queue request"), w.refused)
	}
	if left := r.received.Load() - handled; left == 1 {
		line += ", 1 delivery not (left on its queue to come again)"
	} else if left > 1 {
		line += fmt.Sprintf(", %d deliveries not (left on their queues to come again)", left)
	}
	ids := make([]string, 0, len(w.ended))
	for id := range w.ended {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	switch {
	case len(ids) == 0:
		line += "; no saga ended"
	case len(ids) <= maxEndedListed:
		var each []string
		for _, id := range ids {
			each = append(each, id+" "+string(w.ended[id]))
		}
		line += fmt.Sprintf("; %s ended: %s", plural(int64(len(ids)), "saga"), strings.Join(each, ", "))
	default:
		// Too many to name: how many of each final status.
		var each []string
		for _, s := range durable.Statuses() {
			n := 0
			for _, id := range ids {
				if w.ended[id] == s {
					n++
				}
			}
			if n > 0 {
				each = append(each, fmt.Sprintf("%d %s", n, s))
			}
		}
		line += fmt.Sprintf("; %d sagas ended: %s", len(ids), strings.Join(each, ", "))
	}
	fmt.Fprintln(w.c.Stdout, line)
}

// maxEndedListed is how many ended sagas work's summary names one by one.
const maxEndedListed = 10

func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// gatedInvoker holds the actions back until ready is closed: the queues
// may hold work when the runtime starts, and a simulated callback needs
// the coordinator the runtime made (invoker's coord) set first.
type gatedInvoker struct {
	ready <-chan struct{}
	next  invoker
}

func (g gatedInvoker) Invoke(ctx context.Context, call saga.Call) (any, error) {
	select {
	case <-g.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.next.Invoke(ctx, call)
}

// countingReceiver counts the messages the workers receive and those they
// handle (and so delete).
type countingReceiver struct {
	durable.Receiver
	received, deleted atomic.Int64
}

func (r *countingReceiver) Receive(ctx context.Context, p *durable.ReceiveParams) ([]durable.Delivery, error) {
	ds, err := r.Receiver.Receive(ctx, p)
	r.received.Add(int64(len(ds)))
	return ds, err
}

func (r *countingReceiver) Delete(ctx context.Context, p *durable.DeleteParams) error {
	r.deleted.Add(1)
	return r.Receiver.Delete(ctx, p)
}
