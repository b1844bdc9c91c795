package iamcheck_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/iamcheck"
	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

const sagaSchema = `{"schema":{"table":"e2e-SagaTable","hash_key":"pk","indexes":{"by_due":"gsi2pk","by_status":"gsi1pk"}}}
`

// A lane count written to a saga's own item (SAGA#...) instead of a fork
// record (FORK#...): ForkRecords tests dynamodb:LeadingKeys, so the check
// must evaluate it even when a call of the same attributes on a fork
// record was recorded first.
func TestCallsDifferingOnlyInLeadingKeysAreEachChecked(t *testing.T) {
	t.Parallel()
	dir := engine(t)
	f := filepath.Join(t.TempDir(), "calls.jsonl")
	if err := os.WriteFile(f, []byte(sagaSchema+
		`{"call":{"principal":"AdvanceFunction","operation":"UpdateItem","action":"dynamodb:UpdateItem","table":"e2e-SagaTable","conditions":{"dynamodb:Attributes":["l0","pk","sk"],"dynamodb:LeadingKeys":["FORK#trip-1#rooms#1"],"dynamodb:ReturnValues":"ALL_OLD"}}}
{"call":{"principal":"AdvanceFunction","operation":"UpdateItem","action":"dynamodb:UpdateItem","table":"e2e-SagaTable","conditions":{"dynamodb:Attributes":["l0","pk","sk"],"dynamodb:LeadingKeys":["SAGA#trip-1"],"dynamodb:ReturnValues":"ALL_OLD"}}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := iamcheck.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	denials, cases, _ := check(t, dir, "../../infra/template.yaml", rec)
	if len(denials) != 1 {
		t.Fatalf("%d cases evaluated, denials %q: want the update of SAGA#trip-1 denied (ForkRecords grants FORK#* only)", len(cases), denials)
	}
}

// A call on the saga table in a recording that lacks the table's
// CreateTable (made by another process, or not recorded) is evaluated or
// reported, never taken silently for a call on a user's own table.
func TestCallOnATableOfUnknownSchemaIsNotSkipped(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "calls.jsonl")
	if err := os.WriteFile(f, []byte(
		`{"call":{"principal":"AdvanceFunction","operation":"DeleteItem","action":"dynamodb:DeleteItem","table":"e2e-SagaTable","conditions":{"dynamodb:Attributes":["pk","sk"]}}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := iamcheck.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := samtemplate.Load("../../infra/template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases, users, unplaced, err := iamcheck.Cases(tpl, rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases)+len(unplaced) == 0 {
		t.Fatalf("a DeleteItem on e2e-SagaTable (no grant in the template) was neither evaluated nor reported: taken as %d call(s) on a user's table, which TestTemplateGrantsEveryRecordedCall drops", len(users))
	}
}
