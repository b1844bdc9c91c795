package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/functions/sqshandler"
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

// handle runs one sweep; the scheduled event's content does not matter.
func (s *sweeper) handle(ctx context.Context, _ json.RawMessage) (*engine.SweepResult, error) {
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
// embedded metric format, which Lambda's log stream turns into metrics
// in the namespace lambdasaga, by function: no API call.
func (s *sweeper) emitMetrics(res *engine.SweepResult) {
	type metric struct {
		Name string `json:"Name"`
		Unit string `json:"Unit"`
	}
	line := map[string]any{
		"_aws": map[string]any{
			"Timestamp": time.Now().UnixMilli(),
			"CloudWatchMetrics": []map[string]any{{
				"Namespace":  "lambdasaga",
				"Dimensions": [][]string{{"Function"}},
				"Metrics":    []metric{{"SweepChecked", "Count"}, {"SweepResent", "Count"}, {"SagasLeftForOperator", "Count"}},
			}},
		},
		"Function":             s.function,
		"SweepChecked":         res.Checked,
		"SweepResent":          res.Resent,
		"SagasLeftForOperator": res.LeftForOperator,
	}
	b, _ := json.Marshal(line)
	_, _ = s.metrics.Write(append(b, '\n'))
}
