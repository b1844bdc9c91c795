package startqueue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// strictSQS takes a message only as SQS does: the body and each string
// attribute valid UTF-8 of the characters SQS allows (#x9, #xA, #xD,
// #x20 to #xD7FF, #xE000 to #xFFFD, #x10000 to #x10FFFF), no empty
// attribute value, and the body with its attributes (name, type, value)
// at most 1 MiB.
type strictSQS struct {
	SQSClient
	sent []*sqs.SendMessageInput
}

func sqsAllows(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	for _, r := range s {
		if !(r == 0x9 || r == 0xA || r == 0xD || (r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)) {
			return fmt.Errorf("invalid character %U", r)
		}
	}
	return nil
}

func (s *strictSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	body := aws.ToString(in.MessageBody)
	if err := sqsAllows(body); err != nil {
		return nil, fmt.Errorf("InvalidMessageContents: body: %w", err)
	}
	size := len(body)
	for k, v := range in.MessageAttributes {
		val := aws.ToString(v.StringValue)
		if val == "" {
			return nil, fmt.Errorf("InvalidParameterValue: attribute %s is empty", k)
		}
		if err := sqsAllows(val); err != nil {
			return nil, fmt.Errorf("InvalidParameterValue: attribute %s: %w", k, err)
		}
		size += len(k) + len(aws.ToString(v.DataType)) + len(val)
	}
	if size > 1<<20 {
		return nil, fmt.Errorf("InvalidParameterValue: message must be shorter than %d bytes, is %d", 1<<20, size)
	}
	s.sent = append(s.sent, in)
	return &sqs.SendMessageOutput{MessageId: aws.String("dl-1")}, nil
}

// TestEveryRefusalFitsTheDeadLetterQueue: whatever a refused request
// holds, the dead-letter queue takes it at once, its body unchanged and
// with a reason, rather than sending it round again until the redrive
// policy moves it without one.
func TestEveryRefusalFitsTheDeadLetterQueue(t *testing.T) {
	padTo := func(prefix, suffix string, n int) string {
		return prefix + strings.Repeat("x", n-len(prefix)-len(suffix)) + suffix
	}
	for _, tc := range []struct {
		name string
		body string
		err  error // what the saga answers
		// noRoom: the body leaves no room for any attribute; it goes
		// without its reason (which the log line still has).
		noRoom bool
	}{
		{"a control character in an unknown key", `{"start\u0000\u001b": 1}`, nil, false},
		{"a noncharacter in an unknown key", `{"start": {"saga": "order", "id": "o-1", "\uffff": 1}}`, nil, false},
		{"a long unicode key, cut inside a rune", `{"` + strings.Repeat("é", 3000) + `": 1}`, nil, false},
		{"an input key the saga refuses", `{"start": {"saga": "order", "id": "o-1", "input": {"\u0001k": 1}}}`, fmt.Errorf("start o-1: %w: input.\x01k: not declared by saga order", saga.ErrInvalidInput), false},
		{"a body of 1 MiB", padTo(`{"start": {"saga": "order", "id": "o-1", "input": {"pad": "`, `"}}}`, 1<<20), durable.ErrExists, true},
		{"a malformed body of 1 MiB", padTo(`{"junk": "`, `"}`, 1<<20), nil, true},
		{"a body 100 bytes short of 1 MiB", padTo(`{"start": {"saga": "order", "id": "o-1", "input": {"pad": "`, `"}}}`, 1<<20-100), durable.ErrExists, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := &strictSQS{}
			h, err := New(Config{Sagas: &fakeSagas{err: tc.err}, DeadLetters: &SQSDeadLetters{Client: client, URL: "dlq"}})
			if err != nil {
				t.Fatal(err)
			}
			out := h.Handle(context.Background(), Message{ID: "m-1", Body: []byte(tc.body), ReceiveCount: 1})
			if out.Verdict != Refused {
				t.Fatalf("verdict %v (%.200v), want refused", out.Verdict, out.Err)
			}
			if len(client.sent) != 1 {
				t.Fatalf("%d messages sent to the dead-letter queue", len(client.sent))
			}
			m := client.sent[0]
			if aws.ToString(m.MessageBody) != tc.body {
				t.Fatalf("the body changed: %.100q", aws.ToString(m.MessageBody))
			}
			if _, ok := m.MessageAttributes[AttrReason]; !ok && !tc.noRoom {
				t.Fatalf("no reason among %d attributes", len(m.MessageAttributes))
			}
		})
	}
}

// TestARefusalOfNearly1MiBOnTheEmulator: the SQS emulator takes the dead
// letter of a refused request whose body leaves no room for attributes at
// once, through the poller, and the start queue is left empty.
func TestARefusalOfNearly1MiBOnTheEmulator(t *testing.T) {
	t.Parallel()
	client := awslocal.SQS(awslocal.Endpoint(t, awslocal.EnvSQS))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var r [6]byte
	_, _ = rand.Read(r[:])
	urls, err := CreateQueues(ctx, client, "dl-"+hex.EncodeToString(r[:])+"-", 5, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"junk": "` + strings.Repeat("x", 1<<20-len(`{"junk": ""}`)) + `"}`
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(urls.Start), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Sagas: &fakeSagas{}, DeadLetters: &SQSDeadLetters{Client: client, URL: urls.DeadLetter}})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Outcome, 1)
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = (&Poller{Client: client, URL: urls.Start, Handler: h, Handled: func(o Outcome) { got <- o; stop() }}).Run(pctx)
	}()
	select {
	case o := <-got:
		if o.Verdict != Refused {
			t.Fatalf("verdict %v (%.200v), want refused", o.Verdict, o.Err)
		}
	case <-ctx.Done():
		t.Fatal("the poller carried out nothing")
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(urls.DeadLetter), WaitTimeSeconds: 2})
	if err != nil || len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != body {
		t.Fatalf("dead letters: %d, %v", len(out.Messages), err)
	}
}
