package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/functions/sqshandler"
)

// EnvIdleFor sets how long a saga must be idle to be swept (default 20m,
// above the longest retry delay of 15 minutes).
const EnvIdleFor = "LAMBDASAGA_SWEEP_IDLE_FOR"

type sweeper struct {
	coord   *engine.Coordinator
	log     *slog.Logger
	idleFor time.Duration
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
	return &sweeper{coord: coord, log: log, idleFor: idle}, nil
}

// handle runs one sweep; the scheduled event's content does not matter.
func (s *sweeper) handle(ctx context.Context, _ json.RawMessage) (*engine.SweepResult, error) {
	res, err := s.coord.Sweep(ctx, &engine.SweepParams{IdleFor: s.idleFor})
	if err != nil {
		return res, err
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "sweep done", slog.Int("checked", res.Checked), slog.Int("resent", res.Resent), slog.Duration("idle_for", s.idleFor))
	return res, nil
}
