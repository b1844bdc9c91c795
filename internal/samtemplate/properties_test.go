package samtemplate_test

import (
	"reflect"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

func TestPropertiesArePlainValues(t *testing.T) {
	src := `
Parameters:
  Mode: {Type: String, Default: PAY_PER_REQUEST}
  NoDefault: {Type: String}
Resources:
  T:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: !Ref Mode
      Long: {Ref: Mode}
      Keys:
        - {AttributeName: pk, KeyType: HASH}
      Count: 5
      On: true
      Nothing: ~
      Projection: {ProjectionType: ALL}
      Name: !Sub "${AWS::StackName}-sagas"
      Joined: {"Fn::Join": ["-", [a, b]]}
      Unresolved: !Ref NoDefault
      Arn: !GetAtt Other.Arn
      Choice: !If [Cond, a, b]
  Empty:
    Type: AWS::SQS::Queue
`
	tpl, err := samtemplate.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Properties("T")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"BillingMode": "PAY_PER_REQUEST",
		"Long":        "PAY_PER_REQUEST",
		"Keys":        []any{map[string]any{"AttributeName": "pk", "KeyType": "HASH"}},
		"Count":       "5",
		"On":          "true",
		"Nothing":     nil,
		"Projection":  map[string]any{"ProjectionType": "ALL"}, // one key, but not an intrinsic
		"Name":        samtemplate.Value{Other: "!Sub", Literal: "${AWS::StackName}-sagas"},
		"Joined":      samtemplate.Value{Other: "Fn::Join"},
		"Unresolved":  samtemplate.Value{Ref: "NoDefault"},
		"Arn":         samtemplate.Value{GetAtt: "Other.Arn"},
		"Choice":      samtemplate.Value{Other: "!If"},
	}
	for k := range want {
		if !reflect.DeepEqual(got[k], want[k]) {
			t.Errorf("%s: got %#v, want %#v", k, got[k], want[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d properties, want %d: %v", len(got), len(want), got)
	}
	if p, err := tpl.Properties("Empty"); err != nil || len(p) != 0 {
		t.Errorf("a resource without Properties: %v, %v", p, err)
	}
	if _, err := tpl.Properties("Missing"); err == nil {
		t.Error("no error for a resource that is not there")
	}
}
