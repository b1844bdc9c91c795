// Package chaos is the real-process kill test: the Lambda binaries under
// aws-lambda-rie on the emulators, workers killed with SIGKILL at random
// points while sagas run, then the contract checked against the table,
// the queues and a ledger of every effect the actions applied.
package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// EnvLedgerTable names the ledger table for the function.
const EnvLedgerTable = "CHAOS_LEDGER_TABLE"

// EnvTokenDir names the directory where ledger.do publishes the callback
// tokens it gets, for the kill test's driver to complete.
const EnvTokenDir = "CHAOS_TOKEN_DIR"

// CallbackLinger is how long a ledger.do with a callback token runs after
// its effect: the window in which the driver's completion is kept.
const CallbackLinger = 200 * time.Millisecond

// Ledger records effects in a DynamoDB table: one item per idempotency
// key, written once (a conditional put), with a global sequence number
// for order and a count of every call, duplicates included.
type Ledger struct {
	Client *dynamodb.Client
	Table  string
	// TokenDir is where ledger.do publishes a callback token it gets
	// (TokenFile); empty: it publishes none.
	TokenDir string
}

// Entry is one recorded effect.
type Entry struct {
	Key   string
	Saga  string
	Step  string
	Phase string // "do", "undo", or "refused" (a refusal of ledger.do with `broken`, under its key)
	Seq   int64
	Calls int64
	// Returned: a call with this key returned success to the engine (the
	// ledger marks it just before returning). A call that ran into its
	// deadline after its effect never did.
	Returned bool
	// Note is the input's `note` of the first call with this key.
	Note string
	// Attempts are the attempt numbers of the calls with this key, each
	// once, in order.
	Attempts []int
	// At is when the first call with this key applied it (the clock of
	// the process that ran it: in the kill test, the same machine's).
	At time.Time
}

// CreateTable makes the ledger table.
func (l *Ledger) CreateTable(ctx context.Context) error {
	_, err := l.Client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(l.Table), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		return err
	}
	return dynamodb.NewTableExistsWaiter(l.Client).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(l.Table)}, 30e9)
}

// SlowFor is how long a ledger.do with `slow` runs after its effect: the
// window in which the kill test cancels the saga.
const SlowFor = 1500 * time.Millisecond

// Register adds ledger.do and ledger.undo to reg. Each takes 20 to 50 ms
// after applying its effect, as a real call would, so that kills land in
// the window between an effect and the write that records it.
//
// ledger.do's input says how it behaves: `fail` refuses for good; `hang`
// applies its effect on the first attempt and then runs until its context
// ends (into the invocation's deadline), so its result is lost and the
// attempt is a Timeout; `slow` runs SlowFor after its effect; `note`, a
// string, is recorded with the effect; `echo`, when present, is the
// call's output (nil otherwise), so that a fork's join has outputs to
// put in order; `size`, a number, makes the output a large value instead,
// {"blob": LargeOutput(saga, step, size)}; `check`, any value, is
// recorded as its Fingerprint when there is no note, so that a test sees
// what the action received (a large input whole). ledger.undo records
// the Fingerprint of its input's `check` likewise. A call with a callback token
// publishes the token (TokenFile) before its effect, and runs
// CallbackLinger more after it (unless slow: SlowFor is already as close
// to the kill test's action deadline as it should come), so that
// completions come while it runs.
func (l *Ledger) Register(reg *engine.Registry) {
	reg.MustRegister("ledger.do", func(ctx context.Context, c saga.Call) (any, error) {
		in, _ := c.Input.(map[string]any)
		if in["fail"] == true {
			return nil, saga.Permanent(saga.NewError("Refused", "step "+c.Step+" refuses"))
		}
		if in["broken"] == true && !l.fixed(c) {
			if err := l.refuse(ctx, c); err != nil {
				return nil, err
			}
			return nil, saga.NewError("Unavailable", "step "+c.Step+" is broken until fixed")
		}
		if c.CallbackToken != "" {
			if err := l.publish(c); err != nil {
				return nil, err
			}
		}
		note, _ := in["note"].(string)
		if check, ok := in["check"]; ok && note == "" {
			note = Fingerprint(check)
		}
		if err := l.apply(ctx, c, "do", note); err != nil {
			return nil, err
		}
		if c.CallbackToken != "" && in["slow"] != true {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(CallbackLinger):
			}
		}
		switch {
		case in["hang"] == true && c.Attempt == 1:
			<-ctx.Done()
			return nil, ctx.Err()
		case in["slow"] == true:
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(SlowFor):
			}
		}
		out := in["echo"]
		if n := size(in["size"]); n > 0 {
			out = map[string]any{"blob": LargeOutput(c.SagaID, c.Step, n)}
		}
		return out, l.returned(ctx, c)
	})
	reg.MustRegister("ledger.undo", func(ctx context.Context, c saga.Call) (any, error) {
		in, _ := c.Input.(map[string]any)
		note := ""
		if check, ok := in["check"]; ok {
			note = Fingerprint(check)
		}
		return nil, l.apply(ctx, c, "undo", note)
	})
}

// size reads ledger.do's size, an integer or a float as decoded.
func size(v any) int {
	switch n := v.(type) {
	case int64:
		return int(n)
	case float64:
		return int(n)
	}
	return 0
}

// LargeOutput is the large output of ledger.do with size n at step of
// saga sagaID: n bytes, the same for every call.
func LargeOutput(sagaID, step string, n int) string {
	unit := sagaID + "/" + step + " "
	return strings.Repeat(unit, n/len(unit)+1)[:n]
}

// Fingerprint names a value by the length and SHA-256 of its JSON
// encoding: what a ledger entry's note keeps of a large value an action
// received, for a test to compare with the value it expects.
func Fingerprint(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "unencodable: " + err.Error()
	}
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%d bytes, sha256 %x", len(b), sum[:8])
}

// TokenFile is the file where ledger.do publishes the callback token of
// a saga's attempt: one per attempt, written whole (renamed into place).
func TokenFile(dir, sagaID string, attempt int) string {
	return filepath.Join(dir, sagaID+"."+strconv.Itoa(attempt))
}

// publish writes c's callback token where the driver reads it.
func (l *Ledger) publish(c saga.Call) error {
	if l.TokenDir == "" {
		return nil
	}
	name := TokenFile(l.TokenDir, c.SagaID, c.Attempt)
	tmp := name + ".tmp" + strconv.Itoa(rand.IntN(1<<30))
	if err := os.WriteFile(tmp, []byte(c.CallbackToken), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// apply counts the call and records the effect once per key, with note.
func (l *Ledger) apply(ctx context.Context, c saga.Call, phase, note string) (err error) {
	defer func() { time.Sleep(time.Duration(20+rand.IntN(30)) * time.Millisecond) }()
	out, err := l.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.Table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "SEQ"}},
		UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
		ReturnValues: types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return err
	}
	seq := out.Attributes["n"].(*types.AttributeValueMemberN).Value
	_, err = l.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.Table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "EFFECT#" + c.IdempotencyKey}},
		UpdateExpression: aws.String("ADD calls :one, attempts :attempt SET saga = if_not_exists(saga, :saga), step = if_not_exists(step, :step), phase = if_not_exists(phase, :phase), seq = if_not_exists(seq, :seq), note = if_not_exists(note, :note), applied_at = if_not_exists(applied_at, :at)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": &types.AttributeValueMemberN{Value: "1"}, ":saga": &types.AttributeValueMemberS{Value: c.SagaID},
			":attempt": &types.AttributeValueMemberNS{Value: []string{strconv.Itoa(c.Attempt)}},
			":step":    &types.AttributeValueMemberS{Value: c.Step}, ":phase": &types.AttributeValueMemberS{Value: phase},
			":seq": &types.AttributeValueMemberN{Value: seq}, ":note": &types.AttributeValueMemberS{Value: note},
			":at": &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().UnixNano(), 10)},
		},
	})
	return err
}

// FixFile is the file that fixes step of saga sagaID: while it is
// absent, ledger.do with `broken` refuses.
func FixFile(dir, sagaID, step string) string {
	return filepath.Join(dir, sagaID+"."+step+".fixed")
}

// Fix fixes step of saga sagaID for the functions that publish tokens in
// dir: ledger.do with `broken` runs from then on.
func Fix(dir, sagaID, step string) error {
	return os.WriteFile(FixFile(dir, sagaID, step), nil, 0o600)
}

func (l *Ledger) fixed(c saga.Call) bool {
	if l.TokenDir == "" {
		return false
	}
	_, err := os.Stat(FixFile(l.TokenDir, c.SagaID, c.Step))
	return err == nil
}

// refuse counts a refused call under its key, apart from the key's
// effect: its attempt, and the sequence number of the first refusal.
func (l *Ledger) refuse(ctx context.Context, c saga.Call) error {
	_, err := l.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.Table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "REFUSED#" + c.IdempotencyKey}},
		UpdateExpression: aws.String("ADD calls :one, attempts :attempt SET saga = if_not_exists(saga, :saga), step = if_not_exists(step, :step), applied_at = if_not_exists(applied_at, :at)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": &types.AttributeValueMemberN{Value: "1"}, ":attempt": &types.AttributeValueMemberNS{Value: []string{strconv.Itoa(c.Attempt)}},
			":saga": &types.AttributeValueMemberS{Value: c.SagaID}, ":step": &types.AttributeValueMemberS{Value: c.Step},
			":at": &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().UnixNano(), 10)},
		},
	})
	return err
}

// returned marks that a call with c's key returns success.
func (l *Ledger) returned(ctx context.Context, c saga.Call) error {
	_, err := l.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.Table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "EFFECT#" + c.IdempotencyKey}},
		UpdateExpression:          aws.String("SET returned = :yes"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":yes": &types.AttributeValueMemberBOOL{Value: true}},
	})
	return err
}

// Entries reads the whole ledger, by saga.
func (l *Ledger) Entries(ctx context.Context) (map[string][]Entry, error) {
	out := map[string][]Entry{}
	var start map[string]types.AttributeValue
	for {
		page, err := l.Client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(l.Table), ExclusiveStartKey: start, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			pk := it["pk"].(*types.AttributeValueMemberS).Value
			if pk == "SEQ" {
				continue
			}
			e := Entry{Saga: str(it, "saga"), Step: str(it, "step"), Phase: str(it, "phase"), Note: str(it, "note")}
			var ok bool
			if e.Key, ok = strings.CutPrefix(pk, "EFFECT#"); !ok {
				e.Key, _ = strings.CutPrefix(pk, "REFUSED#")
				e.Phase = "refused"
			}
			if v, ok := it["attempts"].(*types.AttributeValueMemberNS); ok {
				for _, a := range v.Value {
					n, _ := strconv.Atoi(a)
					e.Attempts = append(e.Attempts, n)
				}
				slices.Sort(e.Attempts)
			}
			e.Seq, _ = strconv.ParseInt(num(it, "seq"), 10, 64)
			at, _ := strconv.ParseInt(num(it, "applied_at"), 10, 64)
			e.At = time.Unix(0, at)
			e.Calls, _ = strconv.ParseInt(num(it, "calls"), 10, 64)
			if v, ok := it["returned"].(*types.AttributeValueMemberBOOL); ok {
				e.Returned = v.Value
			}
			out[e.Saga] = append(out[e.Saga], e)
		}
		if page.LastEvaluatedKey == nil {
			return out, nil
		}
		start = page.LastEvaluatedKey
	}
}

func str(it map[string]types.AttributeValue, k string) string {
	if v, ok := it[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func num(it map[string]types.AttributeValue, k string) string {
	if v, ok := it[k].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return "0"
}

var errNoTable = errors.New("ledger table not set")

// FromEnv is the ledger the function's environment names (table, and
// tokenDir, which may be empty).
func FromEnv(client *dynamodb.Client, table, tokenDir string) (*Ledger, error) {
	if table == "" {
		return nil, fmt.Errorf("%w: set %s", errNoTable, EnvLedgerTable)
	}
	return &Ledger{Client: client, Table: table, TokenDir: tokenDir}, nil
}
