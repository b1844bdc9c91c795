package samtemplate_test

import (
	"fmt"

	"go.yaml.in/yaml/v3"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

const templateFile = "../../infra/template.yaml"

func TestTemplatePassesChecks(t *testing.T) {
	tpl, err := samtemplate.Load(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	if problems := tpl.Check(); len(problems) > 0 {
		t.Fatalf("infra/template.yaml:\n%s", strings.Join(problems, "\n"))
	}
	if len(tpl.Functions) != 3 || len(tpl.Queues) != 6 || len(tpl.Tables) != 1 || !tpl.Functions[2].Scheduled() {
		t.Fatalf("%d functions, %d queues, %d tables", len(tpl.Functions), len(tpl.Queues), len(tpl.Tables))
	}
	adv := tpl.Functions[0]
	if adv.Name != "AdvanceFunction" || adv.Timeout != 30 || adv.Arch != "arm64" || adv.Runtime != "provided.al2023" || adv.Events[0].Queue != "AdvanceQueue" || adv.Events[0].BatchSize != 10 {
		t.Fatalf("%+v", adv)
	}
	if adv.Environment["LAMBDASAGA_TABLE"].Ref != "SagaTable" {
		t.Fatalf("environment %+v", adv.Environment)
	}
	q, _ := tpl.Queue("AdvanceQueue")
	if q.DeadLetterQueue != "AdvanceDeadLetterQueue" || q.MaxReceiveCount != 5 || q.VisibilityTimeout != 180 {
		t.Fatalf("%+v", q)
	}
	// The advance function reads the start queue, and knows it and its
	// dead-letter queue by URL (internal/sqshandler).
	if len(adv.Events) != 2 || adv.Events[1].Queue != "StartQueue" || adv.Environment["LAMBDASAGA_START_QUEUE_URL"].Ref != "StartQueue" ||
		adv.Environment["LAMBDASAGA_START_DEAD_LETTER_QUEUE_URL"].Ref != "StartDeadLetterQueue" {
		t.Fatalf("advance function: events %+v, environment %+v", adv.Events, adv.Environment)
	}
	if q, _ := tpl.Queue("StartQueue"); q.DeadLetterQueue != "StartDeadLetterQueue" {
		t.Fatalf("%+v", q)
	}
}

// Every function logs to a log group of its own that the template declares
// with the LogRetentionDays retention (30 days by default), and none may
// create a log group itself.
func TestEveryFunctionLogsToALogGroupWithARetention(t *testing.T) {
	tpl, err := samtemplate.Load(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, f := range tpl.Functions {
		lg, ok := tpl.LogGroup(f.LogGroup.Ref)
		if !ok {
			t.Errorf("function %s: LoggingConfig.LogGroup %s is not a log group of the template", f.Name, f.LogGroup)
			continue
		}
		if lg.RetentionInDays != 30 || lg.RetentionParameter != "LogRetentionDays" {
			t.Errorf("function %s: log group %s keeps events %d days (parameter %q), want 30 from LogRetentionDays", f.Name, lg.Name, lg.RetentionInDays, lg.RetentionParameter)
		}
		if other, ok := seen[lg.Name]; ok {
			t.Errorf("functions %s and %s share log group %s", other, f.Name, lg.Name)
		}
		seen[lg.Name] = f.Name
		denied := false
		for _, st := range f.Policies {
			if st.Effect == "Deny" && slices.Contains(st.Actions, "logs:CreateLogGroup") {
				denied = true
			}
		}
		if !denied {
			t.Errorf("function %s: logs:CreateLogGroup is not denied", f.Name)
		}
	}
	if len(seen) != len(tpl.Functions) || len(tpl.Functions) == 0 {
		t.Errorf("%d functions, %d with a log group of their own", len(tpl.Functions), len(seen))
	}
}

// Each rule catches its breach: mutate the real template and look for the problem.
func TestChecksCatchBreaches(t *testing.T) {
	src, err := os.ReadFile(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, from, to, want string
	}{
		{"wildcard action", "Action: [dynamodb:GetItem, dynamodb:PutItem]", "Action: [dynamodb:*]", `wildcard action "dynamodb:*"`},
		{"wildcard resource", "Resource: !GetAtt SagaTable.Arn", `Resource: "*"`, `wildcard resource "*"`},
		{"no dead-letter queue", "      RedrivePolicy:\n        deadLetterTargetArn: !GetAtt AdvanceDeadLetterQueue.Arn\n        maxReceiveCount: !Ref MaxReceiveCount\n", "", "queue AdvanceQueue: no dead-letter queue"},
		{"no batch item failures", "FunctionResponseTypes: [ReportBatchItemFailures]", "FunctionResponseTypes: []", "lacks ReportBatchItemFailures"},
		{"a dead letter expiring no later than in its queue", "VisibilityTimeout: 180 # at least six times the function timeout\n      MessageRetentionPeriod: 345600", "VisibilityTimeout: 180\n      MessageRetentionPeriod: 1209600", "queue AdvanceQueue: its dead-letter queue AdvanceDeadLetterQueue keeps messages 1209600s, not longer than it does (1209600s)"},
		{"a schedule's failed run retried", "      EventInvokeConfig:\n        MaximumRetryAttempts: 0\n", "", "function SweepFunction: a schedule invokes it asynchronously and Lambda retries a failed run 2 times"},
		{"visibility too short", "VisibilityTimeout: 180 # at least six times the function timeout\n      MessageRetentionPeriod: 345600\n      SqsManagedSseEnabled: true\n      RedrivePolicy:\n        deadLetterTargetArn: !GetAtt AdvanceDeadLetterQueue.Arn", "VisibilityTimeout: 60\n      MessageRetentionPeriod: 345600\n      SqsManagedSseEnabled: true\n      RedrivePolicy:\n        deadLetterTargetArn: !GetAtt AdvanceDeadLetterQueue.Arn", "VisibilityTimeout 60s is under six times function AdvanceFunction's timeout of 30s"},
		{"no encryption", "      SSESpecification:\n        SSEEnabled: true\n", "", "SSESpecification.SSEEnabled is not true"},
		{"no TTL", "TimeToLiveSpecification:", "TimeToLiveSpecificationX:", "no TimeToLiveSpecification"},
		{"a wildcard function, not a qualifier of one", "Resource: !Ref ActionFunctionArns", `Resource: "arn:aws:lambda:us-east-1:123456789012:function:*"`, `wildcard resource "arn:aws:lambda:us-east-1:123456789012:function:*"`},
		{"wildcard in a !Sub resource", `!Sub "${SagaTable.Arn}/index/by_status"`, `!Sub "${SagaTable.Arn}/index/*"`, `wildcard resource "arn:aws:dynamodb:us-east-1:123456789012:table/SagaTable/index/*"`},
		{"function without a log group", "      LoggingConfig:\n        LogGroup: !Ref CompensateLogGroup\n", "", "function CompensateFunction: no LoggingConfig.LogGroup"},
		{"log group not in the template", "LogGroup: !Ref SweepLogGroup", "LogGroup: /aws/lambda/sweep", "function SweepFunction: LoggingConfig.LogGroup /aws/lambda/sweep is not a log group of this template"},
		{"log group without retention", "  AdvanceLogGroup:\n    Type: AWS::Logs::LogGroup\n    Properties:\n      RetentionInDays: !Ref LogRetentionDays\n", "  AdvanceLogGroup:\n    Type: AWS::Logs::LogGroup\n", "log group AdvanceLogGroup: no RetentionInDays"},
		{"retention CloudWatch refuses", "    Default: 30\n    # The values CloudWatch Logs accepts", "    Default: 31\n    # The values CloudWatch Logs accepts", "log group AdvanceLogGroup: RetentionInDays 31 is not a retention CloudWatch Logs accepts"},
		{"allowed retention CloudWatch refuses", "AllowedValues: [1, 3, 5,", "AllowedValues: [1, 2, 5,", `parameter LogRetentionDays: allowed value "2" is not a retention CloudWatch Logs accepts`},
		{"bucket without encryption", "      BucketEncryption:\n        ServerSideEncryptionConfiguration:\n          - ServerSideEncryptionByDefault:\n              SSEAlgorithm: AES256\n            BucketKeyEnabled: true\n", "", "bucket ValuesBucket: no default encryption"},
		{"bucket open to the public", "        RestrictPublicBuckets: true", "        RestrictPublicBuckets: false", "bucket ValuesBucket: public access is not blocked"},
		{"bucket whose objects never expire", "            ExpirationInDays: !Ref RetentionDays\n", "", "bucket ValuesBucket: no enabled lifecycle rule expiring the objects tagged lambdasaga-ended=1"},
		{"ended objects expiring under a prefix only", "          - Id: ExpireWithTheSagas\n", "          - Id: ExpireWithTheSagas\n            Prefix: old/\n", "bucket ValuesBucket: no enabled lifecycle rule expiring the objects tagged lambdasaga-ended=1"},
		{"expiry on another tag", "              - Key: lambdasaga-ended\n", "              - Key: ended\n", "bucket ValuesBucket: no enabled lifecycle rule expiring the objects tagged lambdasaga-ended=1"},
		{"every object expiring by its age", "          - !If\n            - ObjectsExpireByAge\n            - Id: ExpireByAge\n              Status: Enabled\n              ExpirationInDays: !Ref ObjectExpirationDays\n            - !Ref AWS::NoValue\n", "          - Id: ExpireByAge\n            Status: Enabled\n            ExpirationInDays: !Ref ObjectExpirationDays\n", "bucket ValuesBucket: a lifecycle rule expires every object by its age"},
		{"a whole bucket's objects of another bucket", `Resource: !Sub "${ValuesBucket.Arn}/*"`, `Resource: "arn:aws:s3:::other/*"`, `wildcard resource "arn:aws:s3:::other/*"`},
		{"log group creation allowed", "              Effect: Deny\n              Action: [logs:CreateLogGroup]", "              Effect: Allow\n              Action: [logs:CreateLogGroup]", "function AdvanceFunction: no Deny of logs:CreateLogGroup"},
		{"log group creation denied on one group only", "              Action: [logs:CreateLogGroup]\n              Resource: \"*\"", "              Action: [logs:CreateLogGroup]\n              Resource: !GetAtt AdvanceLogGroup.Arn", "function AdvanceFunction: no Deny of logs:CreateLogGroup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mutated := strings.Replace(string(src), tt.from, tt.to, 1)
			if mutated == string(src) {
				t.Fatalf("the mutation did not apply: %q not in the template", tt.from)
			}
			tpl, err := samtemplate.Parse("mutated.yaml", []byte(mutated))
			if err != nil {
				t.Fatal(err)
			}
			problems := tpl.Check()
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Fatalf("problems %q lack %q", problems, tt.want)
			}
		})
	}
}

// A wildcard in a Deny takes permissions away, so it is no breach; the same
// wildcard in an Allow is.
func TestWildcardsAreBreachesOnlyInAllows(t *testing.T) {
	src, err := os.ReadFile(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	deny := "              Effect: Deny\n              Action: [logs:CreateLogGroup]\n              Resource: \"*\""
	for _, tt := range []struct {
		to   string
		want []string
	}{
		{"              Effect: Deny\n              Action: [\"logs:*\"]\n              Resource: \"*\"", nil},
		{"              Effect: Allow\n              Action: [\"logs:*\"]\n              Resource: \"*\"", []string{
			`function AdvanceFunction: policy statement NoLogGroupCreation: wildcard action "logs:*"`,
			`function AdvanceFunction: policy statement NoLogGroupCreation: wildcard resource "*"`,
			`function AdvanceFunction: no Deny of logs:CreateLogGroup on "*"`,
		}},
	} {
		mutated := strings.Replace(string(src), deny, tt.to, 1)
		if mutated == string(src) {
			t.Fatal("the mutation did not apply")
		}
		tpl, err := samtemplate.Parse("mutated.yaml", []byte(mutated))
		if err != nil {
			t.Fatal(err)
		}
		got := tpl.Check()
		ok := len(got) == len(tt.want)
		for _, w := range tt.want {
			ok = ok && slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, w) })
		}
		if !ok {
			t.Errorf("%s:\ngot  %q\nwant %q", tt.to, got, tt.want)
		}
	}
}

// A function timeout Lambda would refuse (1 to 900 s) is a parse error, so
// nothing computes with it: 3600 let a 14-minute step validate, and a huge
// number wrapped around to 30 s.
func TestFunctionTimeoutOutsideLambdasRangeIsRefused(t *testing.T) {
	src, err := os.ReadFile(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"0", "901", "3600", "18446744104"} {
		mutated := strings.Replace(string(src), "Timeout: 30", "Timeout: "+bad, 1)
		if mutated == string(src) {
			t.Fatal("the mutation did not apply")
		}
		if _, err := samtemplate.Parse("mutated.yaml", []byte(mutated)); err == nil || !strings.Contains(err.Error(), "Timeout") {
			t.Errorf("Timeout %s: %v, want it refused", bad, err)
		}
	}
}

// The client policy a user's service attaches grants named actions on the
// stack's own table and queues, nothing else: what client.Start, Signal,
// CompleteCallback and FailCallback call.
func TestClientPolicyIsLeastPrivilege(t *testing.T) {
	src, err := os.ReadFile(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Resources map[string]struct {
			Type       string `yaml:"Type"`
			Properties struct {
				PolicyDocument struct {
					Statement []struct {
						Effect   string   `yaml:"Effect"`
						Action   []string `yaml:"Action"`
						Resource any      `yaml:"Resource"`
					} `yaml:"Statement"`
				} `yaml:"PolicyDocument"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
		Outputs map[string]any `yaml:"Outputs"`
	}
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	pol, ok := doc.Resources["SagaClientPolicy"]
	if !ok || pol.Type != "AWS::IAM::ManagedPolicy" || doc.Outputs["SagaClientPolicyArn"] == nil {
		t.Fatalf("no SagaClientPolicy managed policy with its output: %+v", pol)
	}
	var actions []string
	for _, st := range pol.Properties.PolicyDocument.Statement {
		// The one wildcard: the objects of the stack's bucket, whose keys
		// are the sagas' content hashes.
		objects := fmt.Sprint(st.Resource) == "${ValuesBucket.Arn}/*" && slices.Equal(st.Action, []string{"s3:PutObject", "s3:GetObject"})
		if st.Effect != "Allow" || st.Resource == nil || strings.Contains(fmt.Sprint(st.Resource), "*") && !objects {
			t.Errorf("statement %+v: an Allow on named resources only", st)
		}
		actions = append(actions, st.Action...)
	}
	slices.Sort(actions)
	if want := []string{"dynamodb:GetItem", "dynamodb:PutItem", "s3:GetObject", "s3:PutObject", "sqs:SendMessage"}; !slices.Equal(actions, want) {
		t.Fatalf("actions %v, want %v", actions, want)
	}
}
