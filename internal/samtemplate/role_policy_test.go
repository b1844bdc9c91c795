package samtemplate_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// TestRolePolicyIsItsInlinePolicies: an AWS::IAM::Role is granted the
// statements of its inline Policies, resolved for the stack; the managed
// policies it names are not read.
func TestRolePolicyIsItsInlinePolicies(t *testing.T) {
	t.Parallel()
	tpl, err := samtemplate.Parse("t.yaml", []byte(`
Resources:
  Q:
    Type: AWS::SQS::Queue
    Properties:
      SqsManagedSseEnabled: true
  R:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument:
        Statement:
          - {Effect: Allow, Principal: {Service: scheduler.amazonaws.com}, Action: sts:AssumeRole}
      ManagedPolicyArns: [arn:aws:iam::aws:policy/AdministratorAccess]
      Policies:
        - PolicyName: one
          PolicyDocument:
            Statement:
              - {Sid: Send, Effect: Allow, Action: [sqs:SendMessage], Resource: !GetAtt Q.Arn}
        - PolicyName: two
          PolicyDocument:
            Statement: {Sid: Deny, Effect: Deny, Action: "sqs:*", Resource: "*"}
`))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := tpl.Policy("R", samtemplate.Stack{Region: "eu-west-1", Account: "123456789012"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pol) != 2 {
		t.Fatalf("%d statements, want 2: %v", len(pol), pol)
	}
	send := pol[0].(map[string]any)
	if send["Sid"] != "Send" || send["Resource"] != "arn:aws:sqs:eu-west-1:123456789012:Q" || pol[1].(map[string]any)["Sid"] != "Deny" {
		t.Errorf("%v", pol)
	}
	if _, err := tpl.Policy("Q", samtemplate.Stack{}); err == nil || !strings.Contains(err.Error(), "not a function, a role or a policy") {
		t.Errorf("a queue's policy: %v", err)
	}
}
