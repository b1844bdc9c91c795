package sagactl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

const (
	secretFile = "testdata/secret.yaml"
	secretCard = "4111111111111111"
	cardInput  = `{"order_id": "o-1", "card_number": "` + secretCard + `"}`
)

// What run prints of a failing run, its progress, its JSON report and its
// --verbose log, never shows the card number; the action got it.
func TestRunHidesSecretInput(t *testing.T) {
	var got []string
	reg := engine.NewRegistry()
	reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) { return c.Input, nil })
	reg.MustRegister("payments.charge", func(ctx context.Context, c saga.Call) (any, error) {
		card, _ := c.Input.(map[string]any)["card"].(string)
		got = append(got, card)
		if len(got)%2 == 1 {
			return nil, fmt.Errorf("gateway timeout for card %s", card)
		}
		return nil, saga.Permanent(saga.NewError("CardDeclined", "card "+card+" declined"))
	})
	for _, args := range [][]string{{}, {"--json"}, {"--verbose"}} {
		r := runSagactl(t, reg, append([]string{"run", secretFile, "--input", cardInput}, args...)...)
		if r.code != sagactl.ExitCompensated {
			t.Fatalf("run %v: exit %d\n%s\n%s", args, r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, secretCard) {
			t.Errorf("run %v shows the card number:\n%s\n%s", args, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "card [secret] declined") && args == nil {
			t.Errorf("run shows no masked failure:\n%s", r.stdout)
		}
	}
	if len(got) != 6 || got[5] != secretCard {
		t.Fatalf("the charge got %q", got)
	}
}

// A succeeding run whose output holds what the action echoed of the card
// prints it masked.
func TestRunHidesSecretInOutput(t *testing.T) {
	reg := engine.NewRegistry()
	reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) { return c.Input, nil })
	r := runSagactl(t, reg, "run", secretFile, "--input", cardInput)
	if r.code != sagactl.ExitOK || strings.Contains(r.stdout+r.stderr, secretCard) || !strings.Contains(r.stdout, `"card":"[secret]"`) {
		t.Fatalf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// An input that is not what the definition declares is refused naming the
// field, never printing the value.
func TestRunRefusesSecretInputWithoutShowingIt(t *testing.T) {
	for _, in := range []string{
		`{"order_id": "o-1", "card_number": ` + secretCard + `}`,
		`{"order_id": "o-1", "card_number": ["` + secretCard + `"]}`,
		`{"order_id": "o-1", "card_number": "` + secretCard + `", "cvv": "` + secretCard + `"}`,
	} {
		r := runSagactl(t, nil, "run", secretFile, "--input", in)
		if r.code != sagactl.ExitUsage || strings.Contains(r.stdout+r.stderr, "4111") || !strings.Contains(r.stderr, "input.") {
			t.Errorf("input %s: exit %d\n%s\n%s", in, r.code, r.stdout, r.stderr)
		}
	}
}

// validate refuses a misused secret with file, line and field.
func TestValidateRefusesSecretMisuse(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(file, []byte("saga: x\ninput:\n  card: string secret\nsteps: [{id: a, action: w}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runSagactl(t, nil, "validate", file)
	if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "bad.yaml:3:") || !strings.Contains(r.stderr, "input.card") || !strings.Contains(r.stderr, "secret") {
		t.Fatalf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "validate", secretFile)
	if r.code != sagactl.ExitOK {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
}

// status and history of a saga run on the emulators, whose output holds
// what its actions echoed of the card and whose failure message names
// it, show neither: only the masked text.
func TestStatusHidesSecretsOnEmulators(t *testing.T) {
	t.Parallel()
	dyn := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	sq := awslocal.Endpoint(t, awslocal.EnvSQS)
	table := uniqueName("t-")
	where := []string{"--dynamodb-endpoint", dyn, "--sqs-endpoint", sq, "--table", table, "--queue-prefix", table + "-"}
	echo := engine.NewRegistry()
	echo.SetFallback(func(ctx context.Context, c saga.Call) (any, error) { return c.Input, nil })
	declined := engine.NewRegistry()
	declined.SetFallback(func(ctx context.Context, c saga.Call) (any, error) { return c.Input, nil })
	declined.MustRegister("payments.charge", func(ctx context.Context, c saga.Call) (any, error) {
		card, _ := c.Input.(map[string]any)["card"].(string)
		return nil, saga.Permanent(saga.NewError("CardDeclined", "card "+card+" declined"))
	})
	for _, run := range []struct {
		reg  *engine.Registry
		id   string
		code int
		want string
	}{
		{echo, "ok-1", sagactl.ExitOK, `"card":"[secret]"`},
		{declined, "no-1", sagactl.ExitCompensated, "card [secret] declined"},
	} {
		r := runSagactl(t, run.reg, append([]string{"run", secretFile, "--input", cardInput, "--id", run.id}, where...)...)
		if r.code != run.code {
			t.Fatalf("run %s: exit %d\n%s%s", run.id, r.code, r.stdout, r.stderr)
		}
		for _, args := range [][]string{{"status", run.id}, {"status", run.id, "--json"}, {"history", run.id}, {"history", run.id, "--json"}, {"list", "--json"}} {
			r := runSagactl(t, nil, append(args, where...)...)
			if r.code != sagactl.ExitOK || strings.Contains(r.stdout+r.stderr, secretCard) {
				t.Errorf("%v: exit %d, shows the card or failed:\n%s%s", args, r.code, r.stdout, r.stderr)
			}
			if args[0] == "status" && len(args) == 2 && !strings.Contains(r.stdout, run.want) {
				t.Errorf("%v lacks %q:\n%s", args, run.want, r.stdout)
			}
			if args[0] == "history" && len(args) == 2 && run.id == "no-1" && !strings.Contains(r.stdout, "CardDeclined: card [secret] declined") {
				t.Errorf("%v lacks the masked failure:\n%s", args, r.stdout)
			}
		}
	}
}
