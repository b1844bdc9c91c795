package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/emf"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/sqshandler"
)

// EnvIdleFor sets how long a saga must be idle to be swept (default 20m,
// above the longest retry delay of 15 minutes).
const EnvIdleFor = "LAMBDASAGA_SWEEP_IDLE_FOR"

// EnvMaxResends sets how many times the sweep sends one version's messages
// again before it leaves the saga for an operator (default
// engine.DefaultMaxResends).
const EnvMaxResends = "LAMBDASAGA_SWEEP_MAX_RESENDS"

type sweeper struct {
	coord      *engine.Coordinator
	log        *slog.Logger
	idleFor    time.Duration
	maxResends int
	metrics    io.Writer // CloudWatch embedded metric format lines: stdout in Lambda
	function   string    // the function's name, the metrics' dimension
}

func newHandler(ctx context.Context) (*sweeper, error) {
	coord, log, _, err := sqshandler.CoordinatorFromEnvironment(ctx, nil)
	if err != nil {
		return nil, err
	}
	idle := 20 * time.Minute
	if v := os.Getenv(EnvIdleFor); v != "" {
		if idle, err = time.ParseDuration(v); err != nil || idle <= 0 {
			return nil, fmt.Errorf("environment: %s=%q is not a positive duration", EnvIdleFor, v)
		}
	}
	maxResends := engine.DefaultMaxResends
	if v := os.Getenv(EnvMaxResends); v != "" {
		if maxResends, err = strconv.Atoi(v); err != nil || maxResends < 1 {
			return nil, fmt.Errorf("environment: %s=%q is not a whole number of 1 or more", EnvMaxResends, v)
		}
	}
	return &sweeper{coord: coord, log: log, idleFor: idle, maxResends: maxResends, metrics: os.Stdout, function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")}, nil
}

// job is what a scheduled event asks for: its Input in the template.
type job struct {
	Job string `json:"job"` // "tick", "sweep", or empty: both
}

// result is what one invocation did.
type result struct {
	Tick  *engine.TickResult  `json:"tick,omitempty"`  // the timers fired, when it ticked
	Sweep *engine.SweepResult `json:"sweep,omitempty"` // what the sweep did, when it swept
}

// handle runs what the event asks: the tick (every minute: timers due
// within the minute get their messages), the sweep (every 15 minutes), or
// both for an event that names neither.
func (s *sweeper) handle(ctx context.Context, event json.RawMessage) (*result, error) {
	var j job
	_ = json.Unmarshal(event, &j) // a scheduled event without Input: both
	switch j.Job {
	case "", "tick", "sweep":
	default:
		return nil, fmt.Errorf("event asks for job %q: want tick, sweep, or neither (both)", j.Job)
	}
	out := &result{}
	var errs []error
	if j.Job != "sweep" {
		res, err := s.coord.Tick(ctx, &engine.TickParams{})
		out.Tick = res
		errs = append(errs, err)
	}
	if j.Job != "tick" {
		res, err := s.sweep(ctx)
		out.Sweep = res
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// sweep runs one sweep and reports it.
func (s *sweeper) sweep(ctx context.Context) (*engine.SweepResult, error) {
	res, err := s.coord.Sweep(ctx, &engine.SweepParams{IdleFor: s.idleFor, MaxResends: s.maxResends})
	if res != nil {
		s.emitMetrics(res)
	}
	if err != nil {
		return res, err
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "sweep done", slog.Int("checked", res.Checked), slog.Int("resent", res.Resent),
		slog.Int("left_for_operator", res.LeftForOperator), slog.Duration("idle_for", s.idleFor))
	return res, nil
}

// emitMetrics writes the sweep's counts as one line of CloudWatch's
// embedded metric format (the functions' writer, package emf), which
// Lambda's log stream turns into metrics in the namespace lambdasaga, by
// function: no API call.
func (s *sweeper) emitMetrics(res *engine.SweepResult) {
	if err := emf.WriteSweep(s.metrics, s.function, time.Now(), res); err != nil {
		s.log.Warn("sweep metrics not written", slog.String("error", err.Error()))
	}
}
