package dynamo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

const templateFile = "../../infra/template.yaml"

// The table CreateTable makes on emulators and in tests is the table
// infra/template.yaml deploys: the same keys, attribute types, index,
// projection and billing mode, and the template's time to live reads the
// attribute the store writes on finished sagas. Neither side is copied
// here: the template's properties and tableInput are compared whole, so a
// property added to one side only shows up as a difference too.
func TestTableMatchesTemplate(t *testing.T) {
	src, err := os.ReadFile(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := templateDrift(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}

// Each kind of drift is caught and named: mutate the real template, look
// for the difference.
func TestTableDriftIsReported(t *testing.T) {
	src, err := os.ReadFile(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, from, to, want string
	}{
		{"billing mode", "BillingMode: PAY_PER_REQUEST", "BillingMode: PROVISIONED",
			`BillingMode: template "PROVISIONED", CreateTable "PAY_PER_REQUEST"`},
		{"attribute type", "{AttributeName: gsi1sk, AttributeType: S}", "{AttributeName: gsi1sk, AttributeType: N}",
			`AttributeDefinitions[gsi1sk].AttributeType: template "N", CreateTable "S"`},
		{"attribute missing", "        - {AttributeName: gsi1sk, AttributeType: S}\n", "",
			`AttributeDefinitions[gsi1sk]: template (absent), CreateTable {"AttributeName":"gsi1sk","AttributeType":"S"}`},
		{"table key", "- {AttributeName: sk, KeyType: RANGE}", "- {AttributeName: sk2, KeyType: RANGE}",
			`KeySchema[1].AttributeName: template "sk2", CreateTable "sk"`},
		{"index name", "IndexName: by_status", "IndexName: by_state",
			`GlobalSecondaryIndexes[by_state]: template {`},
		{"index key", "- {AttributeName: gsi1sk, KeyType: RANGE}", "- {AttributeName: gsi1sk, KeyType: HASH}",
			`GlobalSecondaryIndexes[by_status].KeySchema[1].KeyType: template "HASH", CreateTable "RANGE"`},
		{"projection", "ProjectionType: INCLUDE", "ProjectionType: ALL",
			`GlobalSecondaryIndexes[by_status].Projection.ProjectionType: template "ALL", CreateTable "INCLUDE"`},
		{"projected attribute", "NonKeyAttributes: [st, name, def, crt]", "NonKeyAttributes: [st, name, def]",
			`GlobalSecondaryIndexes[by_status].Projection.NonKeyAttributes: template ["st","name","def"], CreateTable ["st","name","def","crt"]`},
		{"sparse index projection", "ProjectionType: KEYS_ONLY", "ProjectionType: ALL",
			`GlobalSecondaryIndexes[by_due].Projection.ProjectionType: template "ALL", CreateTable "KEYS_ONLY"`},
		{"sparse index missing", "        - {AttributeName: gsi2sk, AttributeType: S}\n", "",
			`AttributeDefinitions[gsi2sk]: template (absent), CreateTable {"AttributeName":"gsi2sk","AttributeType":"S"}`},
		{"time to live", "AttributeName: ttl", "AttributeName: expires",
			`TimeToLiveSpecification.AttributeName: template "expires", CreateTable "ttl"`},
		{"time to live off", "AttributeName: ttl\n        Enabled: true", "AttributeName: ttl\n        Enabled: false",
			`TimeToLiveSpecification.Enabled: template "false", CreateTable "true"`},
		{"a property only the template has", "      BillingMode: PAY_PER_REQUEST\n", "      BillingMode: PAY_PER_REQUEST\n      StreamSpecification: {StreamViewType: NEW_IMAGE}\n",
			`StreamSpecification: template {"StreamViewType":"NEW_IMAGE"}, CreateTable (absent)`},
		{"an intrinsic function", "BillingMode: PAY_PER_REQUEST", "BillingMode: !If [Prod, PAY_PER_REQUEST, PROVISIONED]",
			`BillingMode: template !If, CreateTable "PAY_PER_REQUEST" (an intrinsic function`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mutated := strings.Replace(string(src), tt.from, tt.to, 1)
			if mutated == string(src) {
				t.Fatalf("the mutation did not apply: %q not in the template", tt.from)
			}
			diffs, err := templateDrift([]byte(mutated))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(diffs, func(d string) bool { return strings.Contains(d, tt.want) }) {
				t.Fatalf("differences %q lack %q", diffs, tt.want)
			}
		})
	}
}

// templateDrift returns the differences between the template's one table
// and tableInput, one line each, naming the property and both values.
func templateDrift(src []byte) ([]string, error) {
	tpl, err := samtemplate.Parse(templateFile, src)
	if err != nil {
		return nil, err
	}
	if len(tpl.Tables) != 1 {
		return nil, fmt.Errorf("%s: %d tables, want the one the store uses", templateFile, len(tpl.Tables))
	}
	raw, err := tpl.Properties(tpl.Tables[0].Name)
	if err != nil {
		return nil, err
	}
	built, err := plainInput(tableInput("t"))
	if err != nil {
		return nil, err
	}
	declared, _ := prune(raw)
	tmpl, _ := declared.(map[string]any)
	// CloudFormation names the table; the store is given the name.
	delete(tmpl, "TableName")
	delete(built, "TableName")
	// Only AWS needs these: emulators and tests neither encrypt at rest nor
	// restore (samtemplate.Check holds the template to both).
	delete(tmpl, "SSESpecification")
	delete(tmpl, "PointInTimeRecoverySpecification")
	// TTL is not part of CreateTable (UpdateTimeToLive turns it on, and
	// CreateTable leaves it off), but the store writes TTLAttribute on
	// finished sagas: the template must expire items by that attribute.
	built["TimeToLiveSpecification"] = map[string]any{"AttributeName": TTLAttribute, "Enabled": "true"}

	var diffs []string
	compare("", tmpl, built, func(d string) { diffs = append(diffs, d) })
	return diffs, nil
}

// plainInput turns the input to the values samtemplate.Properties gives.
// CloudFormation's AWS::DynamoDB::Table properties carry the names of the
// API's fields (AttributeDefinitions, KeySchema, IndexName, ...), so the
// input's JSON encoding, scalars as text, is comparable as it is.
func plainInput(in *dynamodb.CreateTableInput) (map[string]any, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	v, _ = prune(v)
	m, _ := v.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// prune drops what is unset (nil, "", empty lists and mappings) and turns
// numbers and booleans into their text, as in the template. It reports
// whether anything is left.
func prune(v any) (any, bool) {
	switch v := v.(type) {
	case nil:
		return nil, false
	case string:
		return v, v != ""
	case bool, json.Number:
		return fmt.Sprint(v), true
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if e, ok := prune(e); ok {
				out[k] = e
			}
		}
		return out, len(out) > 0
	case []any:
		var out []any
		for _, e := range v {
			if e, ok := prune(e); ok {
				out = append(out, e)
			}
		}
		return out, len(out) > 0
	}
	return v, true // a samtemplate.Value
}

// unordered holds the lists whose order does not matter, by property
// name, with the field that names an element ("" for a list of names).
// Key schemas are ordered: the hash key comes first.
var unordered = map[string]string{
	"AttributeDefinitions":   "AttributeName",
	"GlobalSecondaryIndexes": "IndexName",
	"NonKeyAttributes":       "",
}

// compare reports every difference under path between the template's
// value and CreateTable's.
func compare(path string, tmpl, built any, report func(string)) {
	switch tv := tmpl.(type) {
	case map[string]any:
		bv, ok := built.(map[string]any)
		if !ok {
			break
		}
		for _, k := range slices.Sorted(keysOf(tv, bv)) {
			compare(strings.TrimPrefix(path+"."+k, "."), tv[k], bv[k], report)
		}
		return
	case []any:
		bv, ok := built.([]any)
		if !ok {
			break
		}
		name, set := unordered[path[strings.LastIndex(path, ".")+1:]]
		switch {
		case set && name == "":
			if !slices.Equal(sortedText(tv), sortedText(bv)) {
				report(fmt.Sprintf("%s: template %s, CreateTable %s", path, show(tv), show(bv)))
			}
			return
		case set:
			tm, bm := byName(tv, name), byName(bv, name)
			for _, k := range slices.Sorted(keysOf(tm, bm)) {
				compare(path+"["+k+"]", tm[k], bm[k], report)
			}
			return
		case len(tv) == len(bv):
			for i := range tv {
				compare(fmt.Sprintf("%s[%d]", path, i), tv[i], bv[i], report)
			}
			return
		}
	}
	if !reflect.DeepEqual(tmpl, built) {
		d := fmt.Sprintf("%s: template %s, CreateTable %s", path, show(tmpl), show(built))
		if _, ok := tmpl.(samtemplate.Value); ok {
			d += " (an intrinsic function: known only at deploy time, so this test cannot compare it; write the literal, or resolve it here)"
		}
		report(d)
	}
}

// keysOf yields the keys of both mappings, once each.
func keysOf(a, b map[string]any) iter.Seq[string] {
	return func(yield func(string) bool) {
		for k := range a {
			if !yield(k) {
				return
			}
		}
		for k := range b {
			if _, dup := a[k]; !dup && !yield(k) {
				return
			}
		}
	}
}

// byName keys a list's elements by their field name (an attribute's or an
// index's name); an element without one is keyed by its text.
func byName(list []any, name string) map[string]any {
	m := make(map[string]any, len(list))
	for _, e := range list {
		fields, _ := e.(map[string]any)
		k, ok := fields[name].(string)
		if !ok {
			k = show(e)
		}
		m[k] = e
	}
	return m
}

func sortedText(list []any) []string {
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = show(e)
	}
	slices.Sort(out)
	return out
}

// show renders a value for a message: strings quoted, lists and mappings
// as compact JSON, intrinsic functions as written.
func show(v any) string {
	switch v := v.(type) {
	case nil:
		return "(absent)"
	case samtemplate.Value:
		return v.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
