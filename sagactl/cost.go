package sagactl

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/cost"
	"github.com/lambdasaga/lambdasaga/internal/engine"
)

func runCost(c *Config, args []string) int {
	fs := flag.NewFlagSet("cost", flag.ContinueOnError)
	steps := fs.Float64("steps-per-month", 1e6, "action steps per month (sagas = steps / action steps per saga)")
	sagas := fs.Float64("sagas-per-month", 0, "sagas per month (instead of --steps-per-month)")
	memory := fs.Int("memory", 256, "function memory in MB (the template's)")
	duration := fs.Duration("duration", 10*time.Millisecond, "billed duration of one action step (measure yours: the REPORT lines of your function's logs, over the steps each invocation ran)")
	stateBytes := fs.Int("state-bytes", 600, "the saga's state item size in bytes (sagactl status --json shows the version; bench/README.md has measured sizes)")
	batch := fs.Float64("batch-size", 1, "messages per invocation on average (1 under light traffic)")
	input := fs.String("input", "", "the input whose path is costed: JSON or @FILE (default: zero values)")
	signalsFirst := fs.Bool("signals-first", false, "cost the path where each await's signal comes before the saga reaches it (kept, then taken without waiting); default: the await waits and the signal wakes it")
	largeValues := fs.Int("large-values", 0, "values of --large-value-bytes each that pass through the saga (an input document, an action's output): kept as S3 objects over --offload-bytes, inline at or under it")
	largeValueBytes := fs.Int("large-value-bytes", 0, "the size of each of --large-values, in bytes (at most 32 MiB)")
	offloadBytes := fs.Int("offload-bytes", engine.DefaultOffloadBytes, "the threshold over which a value is kept as an object (the functions' LAMBDASAGA_OFFLOAD_BYTES)")
	objectDays := fs.Int("object-days", 30, "days an object is stored after its saga's tree ends (the template's RetentionDays; the saga's own run aside)")
	startQueue := fs.Bool("start-queue", false, "price a saga started, signalled and called back through the start queue (docs/START_QUEUE.md): a message, its share of an invocation and --duration of compute per request")
	noChain := fs.Bool("no-chain", false, "price every action step as a message of its own, as without chains (the figures without chains are shown beside those with them anyway)")
	chainSteps := fs.Int("chain-steps", engine.DefaultChainSteps, "steps a chain runs after its message's own (the coordinator's ChainSteps)")
	chainTime := fs.Duration("chain-time", engine.DefaultChainTime, "a chain's time budget, shared by its batch (the coordinator's ChainTime)")
	functionTimeout := fs.Duration("function-timeout", 30*time.Second, "the functions' timeout (the template's): a step with a timeout chains only while the invocation has that timeout and 3s left")
	asJSON := fs.Bool("json", false, "print the estimate as one JSON object: its fields are cost.Estimate's, described in bench/README.md (\"Cost model\")")
	var fails, signals stringList
	fs.Var(&fails, "fail", "cost the path where STEP fails for good (compensations included); repeatable")
	fs.Var(&signals, "signal", "NAME=JSON or NAME=@FILE: the payload the awaits of signal NAME get, which may choose the path costed (default: null); repeatable")
	files, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	// Every figure is a finite number above zero: a negative, zero or NaN
	// one would print a cost that means nothing.
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	positive := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v > 0 }
	const above0 = "a finite number above zero"
	for _, f := range []struct {
		name, want string
		ok         bool
	}{
		{"steps-per-month", above0, positive(*steps)},
		{"sagas-per-month", above0, !given["sagas-per-month"] || positive(*sagas)}, // unset: from --steps-per-month
		// And within what AWS allows (Lambda Developer Guide, "Lambda
		// quotas": 128 to 10,240 MB, 15 minutes; an SQS event source's
		// batch: at most 10,000) and what a saga holds.
		{"memory", "a number of MB from 128 to 10240 (Lambda's range)", *memory >= 128 && *memory <= 10240},
		{"duration", "a duration above zero, at most 15m (Lambda's longest invocation)", *duration > 0 && *duration <= 15*time.Minute},
		{"state-bytes", fmt.Sprintf("a number of bytes above zero, at most %d (the most a saga's state holds)", durable.MaxRecordStateBytes),
			*stateBytes > 0 && *stateBytes <= durable.MaxRecordStateBytes},
		{"batch-size", "a finite number from 1 to 10000 (messages per invocation; an SQS event source's batch is at most 10,000)", positive(*batch) && *batch >= 1 && *batch <= 10000},
		{"chain-steps", "a number of steps from 1 (--no-chain prices none)", *chainSteps >= 1},
		{"large-values", "a number of values, 0 or more (with --large-value-bytes)", *largeValues >= 0 && (*largeValues == 0) == (*largeValueBytes == 0)},
		{"large-value-bytes", fmt.Sprintf("a number of bytes from 1 to %d (with --large-values)", durable.MaxObjectBytes), *largeValueBytes >= 0 && *largeValueBytes <= durable.MaxObjectBytes},
		{"offload-bytes", "a number of bytes above zero", *offloadBytes > 0},
		{"object-days", "a number of days above zero", *objectDays > 0},
		{"chain-time", "a duration above zero", *chainTime > 0},
		{"function-timeout", "a duration above zero, at most 15m (Lambda's longest invocation)", *functionTimeout > 0 && *functionTimeout <= 15*time.Minute},
	} {
		if !f.ok {
			c.errorf("cost: --%s: must be %s", f.name, f.want)
			return ExitUsage
		}
	}
	plan, _, ok := c.oneDefinition("cost", files)
	if !ok {
		return ExitUsage
	}
	in, ok := c.inputOrZero(plan, *input)
	if !ok {
		return ExitUsage
	}
	failing, ok := c.checkFails(plan, fails)
	if !ok {
		return ExitUsage
	}
	payloads, ok := c.signalPayloads(plan, signals)
	if !ok {
		return ExitUsage
	}
	p := cost.Params{MemoryMB: *memory, Duration: *duration, StateBytes: *stateBytes, BatchSize: *batch, Input: in, SignalsFirst: *signalsFirst, Signals: payloads,
		ChainSteps: *chainSteps, ChainTime: *chainTime, FunctionTimeout: *functionTimeout, StartQueue: *startQueue,
		LargeValues: *largeValues, LargeValueBytes: *largeValueBytes, OffloadBytes: *offloadBytes, ObjectDays: *objectDays}
	if *noChain {
		p.ChainSteps = -1
	}
	s, err := cost.Walk(plan, p, failing.fails)
	if err != nil {
		c.errorf("cost: %v", err)
		return ExitUsage
	}
	n := *sagas
	if n == 0 && s.ActionSteps > 0 {
		n = *steps / float64(s.ActionSteps)
	}
	if *asJSON {
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(s.Estimate(plan.Name(), n)); err != nil {
			c.errorf("cost: %v", err)
			return ExitUsage
		}
		return ExitOK
	}
	s.Report(c.Stdout, plan.Name(), n)
	return ExitOK
}
