package lambdaaction_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/lambdasaga/lambdasaga/lambdaaction"
	"github.com/lambdasaga/lambdasaga/lang"
	"github.com/lambdasaga/lambdasaga/saga"
)

func TestDecode(t *testing.T) {
	out, err := lambdaaction.Decode(nil, []byte(`{"id": "p-1", "cents": 1200, "rate": 1.5}`))
	m, _ := out.(map[string]any)
	if err != nil || m["id"] != "p-1" || m["cents"] != int64(1200) || m["rate"] != 1.5 {
		t.Fatalf("%#v %v", out, err)
	}
	if out, err := lambdaaction.Decode(nil, nil); out != nil || err != nil {
		t.Fatalf("empty payload: %v %v", out, err)
	}
	_, err = lambdaaction.Decode(aws.String("Handled"), []byte(`{"errorType": "CardDeclined", "errorMessage": "no funds"}`))
	var ae *saga.ActionError
	if !errors.As(err, &ae) || ae.Type != "CardDeclined" || ae.Message != "no funds" || saga.IsPermanent(err) {
		t.Fatalf("function error: %v (typed, not permanent by itself: retry.permanent decides)", err)
	}
	_, err = lambdaaction.Decode(aws.String("Unhandled"), []byte(`not json`))
	if saga.ErrorType(err) != "Unhandled" {
		t.Fatalf("crash: %v", err)
	}
	if _, err = lambdaaction.Decode(nil, []byte(`{oops`)); !saga.IsPermanent(err) || saga.ErrorType(err) != lang.ErrorTypeOutputFormat {
		t.Fatalf("bad output: %v", err)
	}
}
