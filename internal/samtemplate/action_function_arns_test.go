package samtemplate_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// The advance function's grant of its action functions, for the values
// ActionFunctionArns is deployed with: none, one, several, and a list
// with an empty member (a trailing comma from a script that joins ARNs):
// every resource is an ARN of a given function or of its qualified forms,
// never "" or ":*" (IAM refuses such a policy: the stack fails to deploy).
func TestActionFunctionGrantIsWellFormedForEveryList(t *testing.T) {
	tpl, err := samtemplate.Load(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	const f = "arn:aws:lambda:us-east-1:123456789012:function:"
	for _, arns := range []string{"", f + "a", f + "a," + f + "b", f + "a,", f + "a,," + f + "b"} {
		t.Run(fmt.Sprintf("%q", arns), func(t *testing.T) {
			pol, err := tpl.Policy("AdvanceFunction", samtemplate.Stack{Region: "us-east-1", Account: "123456789012", Parameters: map[string]string{"ActionFunctionArns": arns}})
			blank := arns != "" && strings.Contains(","+arns+",", ",,")
			switch {
			case blank && err == nil:
				t.Fatal("a list with a blank member deploys: its rule should refuse it")
			case blank && !strings.Contains(err.Error(), "ActionFunctionArnsHaveNoBlank"):
				t.Fatalf("refused, but not by its rule: %v", err)
			case blank:
				return
			case err != nil:
				t.Fatal(err)
			}
			for _, s := range pol {
				m := s.(map[string]any)
				if !strings.HasPrefix(fmt.Sprint(m["Sid"]), "LambdaAction") {
					continue
				}
				res, ok := m["Resource"].([]any)
				if !ok {
					res = []any{m["Resource"]}
				}
				for _, r := range res {
					if rs := fmt.Sprint(r); !strings.HasPrefix(rs, f) {
						t.Errorf("statement %s grants resource %q", m["Sid"], rs)
					}
				}
			}
		})
	}
}
