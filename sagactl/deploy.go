package sagactl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// deployReport is one line of deploy's output, and its JSON shape.
type deployReport struct {
	File   string `json:"file"`
	Saga   string `json:"saga"`
	Hash   string `json:"hash"`
	Result string `json:"result"` // deployed or unchanged
}

func runDeploy(c *Config, args []string) int {
	fs := flag.NewFlagSet("deploy", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print what was deployed as JSON")
	var stack stackFlags
	stack.register(fs)
	files, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	if len(files) == 0 {
		c.errorf("deploy: name at least one definition file")
		return ExitUsage
	}
	// Every file compiles before anything is deployed.
	plans := make([]*saga.Plan, len(files))
	for i, f := range files {
		if plans[i], ok = c.load(f); !ok {
			return ExitUsage
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := stack.client(ctx, c.APIOptions...)
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	var out []deployReport
	for i, plan := range plans {
		ds, err := cl.Deploy(ctx, plan)
		if err != nil {
			c.errorf("deploy %s: %v", files[i], err)
			return ExitUsage
		}
		for _, d := range ds {
			out = append(out, deployReport{File: files[i], Saga: d.Name, Hash: d.Hash, Result: deployResult(d)})
		}
	}
	if *asJSON {
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
		return ExitOK
	}
	for _, r := range out {
		fmt.Fprintf(c.Stdout, "%s %s %s\n", r.Saga, r.Hash, r.Result)
	}
	return ExitOK
}

func deployResult(d engine.Deployed) string {
	if d.Changed {
		return "deployed"
	}
	return "unchanged"
}
