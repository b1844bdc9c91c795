package chaos_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdasaga/lambdasaga/client"
	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/chaos"
	"github.com/lambdasaga/lambdasaga/internal/local"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestChaos: make chaos (CHAOS_SAGAS, CHAOS_SEED size and seed it).
func TestChaos(t *testing.T) {
	if os.Getenv("LAMBDASAGA_CHAOS") == "" {
		t.Skip("LAMBDASAGA_CHAOS is not set: run make chaos")
	}
	dyn := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	sq := awslocal.Endpoint(t, awslocal.EnvSQS)
	nSagas, seed := envInt("CHAOS_SAGAS", 200), uint64(envInt("CHAOS_SEED", int(time.Now().UnixNano()%100000)))
	rng := mrand.New(mrand.NewPCG(seed, 7))
	t.Logf("chaos: %d sagas, seed %d (CHAOS_SEED=%d replays the plan; kill timing is real time)", nSagas, seed, seed)

	dir := t.TempDir()
	rie := filepath.Join(dir, "aws-lambda-rie")
	if err := local.BuildRIE(context.Background(), rie); err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ledger := &chaos.Ledger{Client: awslocal.DynamoDB(dyn), Table: "chaos-ledger-" + tag}
	if err := ledger.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	env, err := local.Up(ctx, local.Config{
		Template: "../../infra/template.yaml", DynamoDBEndpoint: dyn, SQSEndpoint: sq, RIE: rie, BuildDir: dir,
		Mains:   map[string]string{"AdvanceFunction": "./fn", "CompensateFunction": "./fn"},
		Workers: 3, Visibility: 2 * time.Second, Prefix: "chaos-" + tag + "-", Log: logs,
		Env: map[string]string{chaos.EnvLedgerTable: ledger.Table},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Down()
	cl, err := client.NewAWS(client.AWSConfig{AWS: awslocal.Config(), Table: env.Table, AdvanceQueueURL: env.QueueURLs["AdvanceQueue"],
		CompensateQueueURL: env.QueueURLs["CompensateQueue"], DynamoDBEndpoint: dyn, SQSEndpoint: sq})
	if err != nil {
		t.Fatal(err)
	}
	def, err := os.ReadFile("chaos.yaml")
	if err != nil {
		t.Fatal(err)
	}

	// Kill workers at random while the sagas run.
	var kills atomic.Int64
	stopKilling := make(chan struct{})
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		krng := mrand.New(mrand.NewPCG(seed, 11))
		for {
			select {
			case <-stopKilling:
				return
			case <-time.After(time.Duration(50+krng.IntN(250)) * time.Millisecond):
			}
			i := krng.IntN(env.Workers())
			if env.Kill(i) == nil {
				kills.Add(1)
			}
			time.Sleep(time.Duration(krng.IntN(100)) * time.Millisecond)
			if err := env.Restart(ctx, i); err != nil {
				t.Errorf("restart worker %d: %v", i, err)
				return
			}
		}
	}()

	failAt := map[string]string{}
	steps := []string{"", "", "", "a", "b", "c", "d"}
	for i := range nSagas {
		id := fmt.Sprintf("chaos-%d", i)
		failAt[id] = steps[rng.IntN(len(steps))]
		if _, err := cl.Start(ctx, client.StartParams{File: "chaos.yaml", Definition: def, SagaID: id, Input: map[string]any{"fail_at": failAt[id]}}); err != nil {
			t.Fatal(err)
		}
		// Paced over about ten seconds, so that kills land while work is in flight.
		time.Sleep(10 * time.Second / time.Duration(nSagas))
	}
	poison := [][]byte{[]byte(`{"v":1,"saga_id":"poison-1",`), []byte("not json at all \u2603")}
	sqc := awslocal.SQS(sq)
	for _, p := range poison {
		if _, err := sqc.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(env.QueueURLs["AdvanceQueue"]), MessageBody: aws.String(string(p))}); err != nil {
			t.Fatal(err)
		}
	}
	// Keep killing until most sagas are done, then let the rest finish.
	final := map[string]*engine.State{}
	deadline := time.Now().Add(2 * time.Minute)
	killing := true
	for len(final) < nSagas && time.Now().Before(deadline) {
		for id := range failAt {
			if final[id] != nil {
				continue
			}
			st, err := cl.Status(ctx, id)
			if err == nil && st.Status.Final() {
				final[id] = st
			}
		}
		if killing && len(final) >= nSagas*9/10 {
			close(stopKilling)
			<-killerDone
			killing = false
		}
		time.Sleep(200 * time.Millisecond)
	}
	if killing {
		close(stopKilling)
		<-killerDone
	}
	ledgerEntries, err := ledger.Entries(ctx)
	if err != nil {
		t.Fatal(err)
	}

	checked := map[string]int{}
	violated := map[string]int{}
	violate := func(inv, format string, args ...any) {
		violated[inv]++
		if violated[inv] <= 5 {
			t.Errorf("%s: %s", inv, fmt.Sprintf(format, args...))
		}
	}
	duplicates := 0
	order := []string{"a", "b", "c", "d"}
	for id, fail := range failAt {
		st := final[id]
		checked["no_saga_lost"]++
		if st == nil {
			violate("no_saga_lost", "saga %s did not finish", id)
			continue
		}
		done := order // steps whose effect must have happened
		if fail != "" {
			done = order[:slices.Index(order, fail)]
		}
		compensable := []string{}
		for _, s := range done {
			if s != "d" {
				compensable = append(compensable, s)
			}
		}
		want := engine.StatusSucceeded
		wantVersion := uint64(1 + len(done))
		if fail != "" {
			want = engine.StatusCompensated
			wantVersion = uint64(1 + len(done) + 1 + len(compensable))
		}
		checked["status_as_scripted"]++
		if st.Status != want {
			violate("status_as_scripted", "saga %s (fail_at %q) ended %s, want %s", id, fail, st.Status, want)
		}
		// Every transition wrote exactly one version: the count is fixed by the script.
		checked["versions_written_once"]++
		if st.Version != wantVersion {
			violate("versions_written_once", "saga %s (fail_at %q) is at version %d, want %d", id, fail, st.Version, wantVersion)
		}
		var dos, undos []chaos.Entry
		for _, e := range ledgerEntries[id] {
			duplicates += int(e.Calls - 1)
			if e.Phase == "do" {
				dos = append(dos, e)
			} else {
				undos = append(undos, e)
			}
		}
		sort.Slice(dos, func(i, j int) bool { return dos[i].Seq < dos[j].Seq })
		sort.Slice(undos, func(i, j int) bool { return undos[i].Seq < undos[j].Seq })
		checked["effects_once_per_completed_step"]++
		if got := stepsOf(dos); !slices.Equal(got, done) {
			violate("effects_once_per_completed_step", "saga %s (fail_at %q): effects %v, want %v", id, fail, got, done)
		}
		checked["compensation_exact_reverse"]++
		wantUndo := []string{}
		if fail != "" {
			wantUndo = slices.Clone(compensable)
			slices.Reverse(wantUndo)
		}
		if got := stepsOf(undos); !slices.Equal(got, wantUndo) {
			violate("compensation_exact_reverse", "saga %s (fail_at %q): compensations %v, want %v", id, fail, got, wantUndo)
		}
	}
	// Dead-letter queues: the poison bodies, byte for byte, and nothing else.
	checked["dead_letters_only_poison"]++
	var dead [][]byte
	for end := time.Now().Add(60 * time.Second); len(dead) < len(poison) && time.Now().Before(end); {
		for _, q := range []string{"AdvanceDeadLetterQueue", "CompensateDeadLetterQueue"} {
			out, err := sqc.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(env.QueueURLs[q]), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 600})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range out.Messages {
				dead = append(dead, []byte(aws.ToString(m.Body)))
			}
		}
	}
	if len(dead) != len(poison) || !containsAll(dead, poison) {
		violate("dead_letters_only_poison", "dead-letter queues hold %q, want %q", dead, poison)
	}
	logs.mu.Lock()
	cut := bytes.Count(logs.b.Bytes(), []byte("invocation failed"))
	logs.mu.Unlock()
	t.Logf("chaos report: %d sagas, %d workers killed with SIGKILL, %d invocations cut off mid-flight, %d duplicate action calls absorbed by idempotency keys", nSagas, kills.Load(), cut, duplicates)
	for _, k := range []string{"no_saga_lost", "status_as_scripted", "versions_written_once", "effects_once_per_completed_step", "compensation_exact_reverse", "dead_letters_only_poison"} {
		t.Logf("  %-32s checked %5d, violated %d", k, checked[k], violated[k])
	}
	if kills.Load() == 0 {
		t.Error("no worker was killed: the test proved nothing")
	}
}

func stepsOf(es []chaos.Entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Step)
	}
	return out
}

func containsAll(have, want [][]byte) bool {
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h []byte) bool { return bytes.Equal(h, w) }) {
			return false
		}
	}
	return true
}
