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
	if err := oneDefinitionPerName(files, plans); err != nil {
		c.errorf("deploy: %v", err)
		return ExitUsage
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

// oneDefinitionPerName refuses files whose definitions, with the child
// sagas they call, hold two different definitions of one name: each file
// is deployed in turn, so the last would be current, and the report of
// the one before would say "deployed" of a version that is not.
// (Coordinator.Deploy refuses that within one file's bundle.)
func oneDefinitionPerName(files []string, plans []*saga.Plan) error {
	type first struct{ file, hash string }
	seen := map[string]first{}
	for i, root := range plans {
		var walk func(p *saga.Plan) error
		walk = func(p *saga.Plan) error {
			f, ok := seen[p.Name()]
			switch {
			case ok && f.hash != p.Hash():
				return fmt.Errorf("two different definitions of saga %s: in %s (%s) and in %s (%s); deploy one name, one definition", p.Name(), f.file, f.hash, files[i], p.Hash())
			case ok:
				return nil // seen already, with its children
			}
			seen[p.Name()] = first{files[i], p.Hash()}
			for _, s := range p.Steps() {
				if child, ok := p.Child(s.ID); ok {
					if err := walk(child); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if err := walk(root); err != nil {
			return err
		}
	}
	return nil
}
