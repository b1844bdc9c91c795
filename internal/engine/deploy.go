package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Deployed is one definition a deploy made the current version of its
// name.
type Deployed struct {
	Name string // the saga's name
	Hash string // the definition's hash, now the current version of Name
	// Changed: Hash was not the current version of Name before (the name
	// had none, or another); false when the deploy changed nothing.
	Changed bool
}

// Deploy stores plan's definition and makes it the current version of its
// name, which starts by name run from then on (StartParams.Name); sagas in
// flight keep the version they pinned. It does the same for each child
// saga the plan bundles, at any depth, each under its own name, before the
// plan itself. It returns what it deployed: the plan first, then its
// children in the order their saga steps come, each once. Deploying the
// current version again changes nothing (Changed false). Two different
// definitions of one name in the bundle are refused before anything is
// written.
func (c *Coordinator) Deploy(ctx context.Context, plan *saga.Plan) ([]Deployed, error) {
	if plan == nil {
		return nil, errors.New("deploy: a plan is required")
	}
	plans := withChildren(plan)
	byName := map[string]*saga.Plan{}
	for _, p := range plans {
		if q, ok := byName[p.Name()]; ok && q.Hash() != p.Hash() {
			return nil, fmt.Errorf("deploy %s: two different definitions of saga %s in its bundle (%s and %s): one name, one definition", plan.Name(), p.Name(), q.Hash(), p.Hash())
		}
		byName[p.Name()] = p
	}
	out := make([]Deployed, len(plans))
	for i := len(plans) - 1; i >= 0; i-- {
		d, err := c.deployOne(ctx, plans[i])
		if err != nil {
			return nil, fmt.Errorf("deploy %s: %w", plans[i].Name(), err)
		}
		out[i] = d
	}
	return out, nil
}

func (c *Coordinator) deployOne(ctx context.Context, p *saga.Plan) (Deployed, error) {
	d := Deployed{Name: p.Name(), Hash: p.Hash()}
	c.cfg.Plans.Add(p)
	if err := c.cfg.Plans.ensureStored(ctx, c.cfg.Store, p); err != nil {
		return d, fmt.Errorf("store definition: %w", err)
	}
	cur, err := c.cfg.Store.DefinitionCurrent(ctx, &durable.DefinitionCurrentParams{Name: d.Name, Consistent: true})
	switch {
	case err == nil:
		d.Changed = cur.Hash != d.Hash
	case errors.Is(err, durable.ErrNotFound):
		d.Changed = true
	default:
		return d, err
	}
	if d.Changed {
		if err := c.cfg.Store.DefinitionDeploy(ctx, &durable.DefinitionDeployParams{Name: d.Name, Hash: d.Hash}); err != nil {
			return d, err
		}
	}
	c.cfg.Plans.setCurrent(d.Name, d.Hash, c.cfg.Clock.Now())
	return d, nil
}

// withChildren returns plan, then each child saga it bundles (children
// of children included), in the order of their saga steps, depth first,
// each hash once.
func withChildren(plan *saga.Plan) []*saga.Plan {
	out := []*saga.Plan{plan}
	seen := map[string]bool{plan.Hash(): true}
	var walk func(p *saga.Plan)
	walk = func(p *saga.Plan) {
		for _, s := range p.Steps() {
			if s.Kind != lang.KindSaga {
				continue
			}
			child, ok := p.Child(s.ID)
			if !ok || seen[child.Hash()] {
				continue
			}
			seen[child.Hash()] = true
			out = append(out, child)
			walk(child)
		}
	}
	walk(plan)
	return out
}
