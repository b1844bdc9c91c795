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
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/chaos"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/local"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/objects/s3objects"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
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

// functionTimeout is the functions' timeout in the kill test: short, so
// that an action running into the deadline is cut off within seconds.
const functionTimeout = 4 * time.Second

// killFor bounds how long the killer runs: the sagas start over about ten
// seconds and most finish within a few more.
const killFor = 25 * time.Second

// slowKillFor bounds the slow kills that follow, while fork sagas run.
const slowKillFor = time.Minute

// settleFor bounds how long the test waits for its sagas to end, and for
// a saga's slow step to be pending so that it can be cancelled then: on
// a loaded machine the last iteration of a fork saga's foreach may start
// two minutes after the saga did, and a fork undoing its children after
// many kills may take four.
const settleFor = 6 * time.Minute

// killEvery is the time to the next kill: 100-500 ms while most sagas
// run, 1-2 s once they are final and fork sagas still join and undo their
// children. With the 5 s visibility a message of a killed worker waits
// to come back, and a message received maxReceiveCount (5) times goes to
// the dead-letter queue, so a faster killer would dead-letter live
// messages, not test them.
func killEvery(rng *mrand.Rand, slow bool) time.Duration {
	if slow {
		return time.Duration(1000+rng.IntN(1000)) * time.Millisecond
	}
	return time.Duration(100+rng.IntN(400)) * time.Millisecond
}

// One plain saga (not a fork) in largeEvery, up to maxLarge, carries
// large values: a 1 MiB input, and a 5 MiB output of its step a, each
// kept as an object in S3 (gofakes3 in the test's process). Their checks
// are the others', plus large_values_seen_whole and large_items_small;
// every saga's stored states are held to references_resolve.
const (
	largeEvery       = 8
	maxLarge         = 20
	largeInputBytes  = 1 << 20
	largeOutputBytes = 5 << 20 // chaos.yaml's size
	// putKills is how many of the advance function's puts have its
	// workers killed right after the object is stored.
	putKills = 3
)

// largeInput is the 1 MiB input of saga id.
func largeInput(id string) string {
	return strings.Repeat(id+" input ", largeInputBytes/len(id)+1)[:largeInputBytes]
}

// largeStateBytes bounds the stored state of a large saga: its values
// are references, so it is as small as a small saga's.
const largeStateBytes = 16 << 10

// sweepIdle is how long a saga must be idle for the sweep (run every
// second here) to send its outbox again.
const sweepIdle = 5 * time.Second

// TestChaos: make chaos (CHAOS_SAGAS, CHAOS_SEED size and seed it;
// CHAOS_LOG=FILE keeps the functions' logs).
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
	// The waits below are sized for 200 sagas; a larger run starts its
	// sagas over minutes (about two a second on two cores, with the
	// drivers of those started running), and waits in proportion.
	scale := time.Duration(max(1, (nSagas+199)/200))
	settle := settleFor * scale
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute*scale)
	defer cancel()
	ledger := &chaos.Ledger{Client: awslocal.DynamoDB(dyn), Table: "chaos-ledger-" + tag}
	if err := ledger.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	// S3 for the large values, named as the template's bucket.
	s3 := awstest.NewS3(t, "chaos-"+tag+"-valuesbucket")
	tokenDir := filepath.Join(dir, "tokens")
	if err := os.Mkdir(tokenDir, 0o700); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	if path := os.Getenv("CHAOS_LOG"); path != "" {
		// CHAOS_LOG=FILE keeps the functions' logs, to read a failure.
		defer func() {
			logs.mu.Lock()
			defer logs.mu.Unlock()
			if err := os.WriteFile(path, logs.b.Bytes(), 0o644); err != nil {
				t.Error(err)
			}
		}()
	}
	env, err := local.Up(ctx, local.Config{
		Template: "../../infra/template.yaml", DynamoDBEndpoint: dyn, SQSEndpoint: sq, RIE: rie, BuildDir: dir,
		Mains: map[string]string{"AdvanceFunction": "./fn", "CompensateFunction": "./fn"},
		// The visibility timeout outlasts an invocation (the template keeps
		// it at six times the function timeout; this is shorter, to come
		// back quickly from kills): a message whose action runs into the
		// deadline is not delivered again while it still runs.
		Workers: 3, Visibility: functionTimeout + time.Second, Prefix: "chaos-" + tag + "-", Log: logs,
		// A short function timeout, so that actions running into the
		// invocation's deadline are cut off within seconds.
		// The sweep picks up sagas idle for sweepIdle: it sends the
		// outbox that a driver "killed" between its write and its send
		// never did (the driver's retry, a duplicate, sends it again only
		// as a fallback delayed 15 minutes).
		Env: map[string]string{chaos.EnvLedgerTable: ledger.Table, chaos.EnvTokenDir: tokenDir,
			"AWS_LAMBDA_FUNCTION_TIMEOUT": strconv.Itoa(int(functionTimeout / time.Second)), "LAMBDASAGA_SWEEP_IDLE_FOR": sweepIdle.String(),
			"AWS_ENDPOINT_URL_S3": s3.Endpoint, "LAMBDASAGA_BUCKET": s3.Bucket},
		// The scheduled function ticks (and sweeps) every second: each tick
		// sends again the timers due within its minute, so timers fire from
		// two sources and their copies are dropped by version. Its workers
		// are killed like the others.
		ScheduleEvery: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Down()
	cl, err := client.NewAWS(client.AWSConfig{AWS: awslocal.ConfigAs(awslocal.ClientPrincipal), Table: env.Table, AdvanceQueueURL: env.QueueURLs["AdvanceQueue"],
		CompensateQueueURL: env.QueueURLs["CompensateQueue"], DynamoDBEndpoint: dyn, SQSEndpoint: sq, Bucket: s3.Bucket, S3Endpoint: s3.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	def, err := os.ReadFile("chaos.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// One saga in forkEvery forks (fork.yaml, with its child saga: started
	// from the bundle, as a service holding only bytes starts it).
	forkDef, err := forkBundle()
	if err != nil {
		t.Fatal(err)
	}
	// The driver's second client writes as the first does and sends
	// nothing: a driver killed between its write and its send.
	dropStore, err := dynamo.New(dynamo.Config{Client: awslocal.DynamoDB(dyn), Table: env.Table})
	if err != nil {
		t.Fatal(err)
	}
	objects, err := s3objects.New(s3objects.Config{Client: awslocal.S3(s3.Endpoint), Bucket: s3.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	dropper, err := client.New(client.Config{Store: dropStore, Queue: dropQueue{}, Objects: objects})
	if err != nil {
		t.Fatal(err)
	}
	drv := newDriver(cl, dropper, tokenDir, seed)
	// The pause phase runs beside the starts (pause_test.go), as an
	// operator, whose policy allows the pause item's writes.
	op, err := client.NewAWS(client.AWSConfig{AWS: awslocal.ConfigAs(awslocal.OperatorPrincipal), Table: env.Table, AdvanceQueueURL: env.QueueURLs["AdvanceQueue"],
		CompensateQueueURL: env.QueueURLs["CompensateQueue"], DynamoDBEndpoint: dyn, SQSEndpoint: sq, Bucket: s3.Bucket, S3Endpoint: s3.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	pauses := &pauseWindow{}
	pauseDone := make(chan struct{})
	go func() { defer close(pauseDone); pausePhase(ctx, op, pauses) }()
	switch sabotage := os.Getenv("CHAOS_SABOTAGE"); sabotage {
	case "":
	case "new-id-per-send":
		drv.newIDPerSend = true
		t.Logf("sabotage %s: violations expected", sabotage)
	default:
		t.Fatalf("CHAOS_SABOTAGE=%s: the one sabotage is new-id-per-send", sabotage)
	}
	var driving sync.WaitGroup
	driveCtx, stopDriving := context.WithCancel(ctx)
	defer stopDriving()

	// Kill workers at random while the sagas run.
	began := time.Now()
	var kills atomic.Int64
	killed := &killTimes{}
	stopKilling := make(chan struct{})
	killerDone := make(chan struct{})
	var slowKills atomic.Bool
	// Kills aimed between a put and its write: when the advance function
	// has stored one of the first putKills objects it puts while fast
	// kills run, before the put is answered, its workers are killed (the
	// one that put it among them) and restarted.
	putKill := make(chan chan struct{})
	var putKillsLeft, putKilled atomic.Int64
	putKillsLeft.Store(putKills)
	s3.OnStored(func(principal, key string) {
		if principal != "AdvanceFunction" || slowKills.Load() || putKillsLeft.Add(-1) < 0 {
			return
		}
		done := make(chan struct{})
		select {
		case putKill <- done:
			<-done
		case <-killerDone:
		}
	})
	go func() {
		defer close(killerDone)
		krng := mrand.New(mrand.NewPCG(seed, 11))
		for {
			select {
			case <-stopKilling:
				return
			case done := <-putKill:
				var advance []int
				for i := range env.Workers() {
					if env.WorkerFunction(i) == "AdvanceFunction" && env.Kill(i) == nil {
						kills.Add(1)
						killed.kill()
						advance = append(advance, i)
					}
				}
				putKilled.Add(1)
				close(done)
				for _, i := range advance {
					if err := env.Restart(ctx, i); err != nil {
						t.Errorf("restart worker %d: %v", i, err)
						return
					}
				}
				continue
			case <-time.After(killEvery(krng, slowKills.Load())):
			}
			i := krng.IntN(env.Workers())
			if env.Kill(i) == nil {
				kills.Add(1)
				killed.kill()
			}
			time.Sleep(time.Duration(krng.IntN(100)) * time.Millisecond)
			if err := env.Restart(ctx, i); err != nil {
				t.Errorf("restart worker %d: %v", i, err)
				return
			}
		}
	}()

	// Sagas that hold on failure, and operators who retry, compensate or
	// cancel them, or race two of those verbs (hold_test.go).
	held := startHolds(ctx, t, cl, dropper, tokenDir, seed, heldCount(nSagas), began.Add(settle))

	// Each saga follows a script: fail at a step, or hang at a step (run
	// into the invocation's deadline once), or be cancelled while a slow
	// step runs. Most just fail or succeed.
	failAt, hangAt, cancelAt := map[string]string{}, map[string]string{}, map[string]string{}
	scripts := map[string]script{}
	steps := []string{"", "", "", "a", "b", "c", "d"}
	order := []string{"a", "b", "c", "d"}
	var cancels sync.WaitGroup
	var cancelMu sync.Mutex
	cancelLanded := map[string]bool{}
	forks := map[string]*forkRun{}
	docs := map[string]string{} // the large sagas' inputs
	plain := 0
	for i := range nSagas {
		if i%forkEvery == forkEvery-1 {
			id := fmt.Sprintf("chaosf-%d", i)
			r := &forkRun{sc: drawForkScript(rng)}
			forks[id] = r
			if _, err := cl.Start(ctx, client.StartParams{File: "fork.yaml", Definition: forkDef, SagaID: id, Input: r.sc.input()}); err != nil {
				t.Fatal(err)
			}
			if r.sc.slow != "" {
				// Cancel the parent while a child runs its slow step.
				cancels.Add(1)
				go func() {
					defer cancels.Done()
					landed := cancelDuringChild(ctx, cl, id, r.sc)
					cancelMu.Lock()
					r.cancelLanded = landed
					cancelMu.Unlock()
				}()
			}
			time.Sleep(10 * time.Second / time.Duration(nSagas))
			continue
		}
		id := fmt.Sprintf("chaos-%d", i)
		in := map[string]any{"fail_at": "", "hang_at": "", "slow_at": "", "doc": ""}
		plain++
		large := plain%largeEvery == 0 && len(docs) < maxLarge
		if large {
			docs[id] = largeInput(id)
			in["doc"] = docs[id]
		}
		switch r := rng.IntN(100); {
		case r < 5:
			hangAt[id] = order[rng.IntN(len(order))]
			in["hang_at"] = hangAt[id]
		case r < 10:
			cancelAt[id] = order[rng.IntN(3)]
			in["slow_at"] = cancelAt[id]
		case large:
			// Most large sagas fail after a, so that a's compensation
			// reads both values.
			failAt[id] = []string{"", "b", "c", "d"}[rng.IntN(4)]
			in["fail_at"] = failAt[id]
		default:
			failAt[id] = steps[rng.IntN(len(steps))]
			in["fail_at"] = failAt[id]
		}
		// The driver's script: its callback outcome other than a plain
		// completion only for sagas that reach c and whose c does not hang
		// or run slow (cancelled); a decline only for sagas that fail
		// nowhere else.
		sc := drawScript(rng)
		if f := failAt[id]; hangAt[id] != "" || cancelAt[id] != "" || f != "" && f != "d" || f != "" && sc.cb == cbDecline {
			sc.cb = cbComplete
		}
		if cancelAt[id] == "c" {
			// A signal written and not sent, then a cancel while c should
			// run, leaves the saga running until the cancel's fallback, 15
			// minutes later, by design (engine
			// TestCancelAfterALostSignalSendRunsTheAttemptAtTheFallback):
			// longer than the test runs, so not scripted.
			sc.sigDrop = false
		}
		scripts[id] = sc
		if _, err := cl.Start(ctx, client.StartParams{File: "chaos.yaml", Definition: def, SagaID: id, Input: in}); err != nil {
			t.Fatal(err)
		}
		driving.Add(1)
		go func() {
			defer driving.Done()
			drv.run(driveCtx, id, sc)
		}()
		if step := cancelAt[id]; step != "" {
			// Cancel once the slow step is pending: its action is running
			// (or about to), so the cancel lands during it.
			cancels.Add(1)
			go func() {
				defer cancels.Done()
				for end := time.Now().Add(settle); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
					st, err := cl.Status(ctx, id)
					if err != nil {
						continue
					}
					cur, ok := st.Pending()
					if pending, _ := cl.Step(ctx, st, cur.Step); !ok || pending != step {
						if st.Status.Final() {
							return
						}
						continue
					}
					_, err = cl.Cancel(ctx, id)
					cancelMu.Lock()
					cancelLanded[id] = err == nil
					cancelMu.Unlock()
					return
				}
			}()
		}
		// Paced over about ten seconds, so that kills land while work is in flight.
		time.Sleep(10 * time.Second / time.Duration(nSagas))
	}
	poison := [][]byte{[]byte(`{"v":1,"saga_id":"poison-1",`), []byte("not json at all \u2603")}
	sqc := awslocal.SQS(sq)
	for _, p := range poison {
		if _, err := sqc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.QueueURLs["AdvanceQueue"]), MessageBody: aws.String(string(p))}); err != nil {
			t.Fatal(err)
		}
	}
	// Keep killing until most sagas are done, then let the rest finish.
	final := map[string]*saga.State{}
	deadline := time.Now().Add(2 * time.Minute * scale)
	killing := true
	all := map[string]bool{}
	for _, m := range []map[string]string{failAt, hangAt, cancelAt} {
		for id := range m {
			all[id] = true
		}
	}
	// Past the deadline, the wait goes on while a saga not yet final still
	// moves (its version changed within stillFor), up to hardDeadline: on
	// a loaded machine fork sagas undoing their children after many kills
	// are slow, not lost. A lost saga does not move: the sweep re-sends an
	// idle saga's outbox every few seconds, which moves it if anything can.
	// references_resolve: a stored state's references each name an object
	// of the bucket, sampled while the large sagas run (a kill between a
	// put and the write that refers to it leaves an object no state
	// names, never a reference to nothing), then in every final state.
	refsOf := func(id string) (refs, missing []string, stateBytes int, err error) {
		rec, err := dropStore.SagaGet(ctx, &durable.SagaGetParams{SagaID: id})
		if err != nil {
			return nil, nil, 0, err
		}
		var st saga.State
		if _, err := st.UnmarshalBinaryRefs(rec.State); err != nil {
			return nil, nil, 0, err
		}
		err = st.Hydrate(func(r saga.Ref) (any, error) {
			key := r.Key(id)
			refs = append(refs, key)
			ok, err := s3.Has(key)
			if err == nil && !ok {
				missing = append(missing, fmt.Sprintf("%s (%d bytes) at version %d", key, r.Size, rec.Version))
			}
			return r, err
		})
		return refs, missing, len(rec.State), err
	}
	refSamples, refsSampled := 0, 0
	var sampledMissing []string
	const stillFor = 30 * time.Second
	hardDeadline := began.Add(settle)
	versions := map[string]uint64{}
	lastMove := time.Now()
	look := func(id string) bool {
		st, err := cl.Status(ctx, id)
		if err != nil {
			return false
		}
		if v, ok := versions[id]; !ok || v != st.Version {
			versions[id], lastMove = st.Version, time.Now()
		}
		if st.Status.Final() {
			final[id] = st
			return true
		}
		return false
	}
	for len(final) < nSagas || held.running() > 0 {
		if now := time.Now(); now.After(hardDeadline) || (now.After(deadline) && now.Sub(lastMove) > stillFor) {
			break
		}
		for id := range all {
			if final[id] == nil {
				look(id)
			}
		}
		for id := range docs {
			if final[id] != nil {
				continue
			}
			if refs, missing, _, err := refsOf(id); err == nil {
				refSamples++
				refsSampled += len(refs)
				sampledMissing = append(sampledMissing, missing...)
			}
		}
		forksLeft := 0
		for id := range forks {
			if final[id] == nil && !look(id) {
				forksLeft++
			}
		}
		// Fast kills stop once most sagas are final, or after killFor: a
		// run that drags on would otherwise keep killing the same few
		// messages until they pass maxReceiveCount (5), which tests the
		// redrive policy, not the protocol. Slow kills go on while fork
		// sagas run (their joins and undos come late: each fork is a few
		// queue hops), for at most slowKillFor.
		if killing && !slowKills.Load() && (len(final) >= nSagas*9/10 || time.Since(began) > killFor) {
			slowKills.Store(true)
		}
		if killing && slowKills.Load() && (forksLeft == 0 && held.running() == 0 || time.Since(began) > killFor+slowKillFor) {
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
	t.Logf("%d of %d sagas final %s after the first start", len(final), nSagas, time.Since(began).Round(time.Second))
	// A driver returns when its saga is final; the others stop here.
	stopDriving()
	driving.Wait()
	held.wait()
	<-pauseDone
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
	cancels.Wait()
	checkPaused(t, pauses, ledgerEntries, checked, violate)
	duplicates, hung, hangCut, cancelled, waited, unknownVersions, unknownEffects := 0, 0, 0, 0, 0, 0, 0
	largeUndone, largestState := 0, 0
	for id := range all {
		fail := failAt[id]
		st := final[id]
		checked["no_saga_lost"]++
		if st == nil {
			where := "unread"
			if st, err := cl.Status(ctx, id); err == nil {
				cur, _ := st.Pending()
				step, _ := cl.Step(ctx, st, cur.Step)
				where = fmt.Sprintf("%s at version %d, step %s attempt %d, %d kept; history %s", st.Status, st.Version, step, cur.Attempt, len(st.Kept), historyLine(st))
			}
			violate("no_saga_lost", "saga %s (script %+v, fail_at %q) did not finish: %s (deliveries %s)", id, scripts[id], fail, where, drv.answersFor(id))
			continue
		}
		sc := scripts[id]
		// Each delivery (a signal by its id, a callback attempt's
		// completion by its token) was taken, applied or kept, at most
		// once; and the saga's kept count is the number of keeps its
		// senders were told of: no keep was written twice or lost.
		sigKey := signalKey(id)
		sigApplied, sigKept := drv.taken(sigKey)
		checked["signal_taken_at_most_once"]++
		if sigApplied+sigKept > 1 {
			violate("signal_taken_at_most_once", "saga %s: signal %s taken %d times (%v)", id, sigKey, sigApplied+sigKept, drv.answersOf(sigKey))
		}
		tokens := drv.tokensOf(id)
		keptAll, unknown := sigKept, drv.isUnknown(sigKey)
		for _, tok := range tokens {
			applied, kept := drv.taken(tok)
			checked["callback_taken_at_most_once"]++
			if applied+kept > 1 {
				violate("callback_taken_at_most_once", "saga %s: a callback completion taken %d times (%v)", id, applied+kept, drv.answersOf(tok))
			}
			keptAll += kept
			unknown = unknown || drv.isUnknown(tok)
		}
		if !unknown {
			checked["kept_writes_match_receipts"]++
			if st.Received != uint64(keptAll) {
				violate("kept_writes_match_receipts", "saga %s: %d kept deliveries written, the senders were told of %d", id, st.Received, keptAll)
			}
		}
		// sigWrites is the write the await adds to a saga that passed it:
		// one when the signal was applied to the waiting saga, none when it
		// was kept (the write that ended the wait took it). -1: unknown
		// (an error after which the sender could not tell; and a saga
		// that passed the await without its signal taken is a loss).
		sigWrites := func() int {
			checked["signal_taken_by_the_await"]++
			switch {
			case sigApplied == 1 && sigKept == 0:
				return 1
			case sigApplied == 0 && sigKept == 1:
				return 0
			case !drv.isUnknown(sigKey):
				violate("signal_taken_by_the_await", "saga %s passed its await, its signal's answers %v", id, drv.answersOf(sigKey))
			}
			return -1
		}
		// completionWrites is what a callback attempt whose action returned
		// success writes: the return and the completion, or the return
		// alone when it took a kept completion. -1: unknown.
		completionWrites := func(attempt int) int {
			tok := tokens[attempt]
			applied, kept := drv.taken(tok)
			switch {
			case applied == 1 && kept == 0:
				return 2
			case applied == 0 && kept == 1:
				return 1
			case tok != "" && !drv.isUnknown(tok):
				violate("callback_taken_at_most_once", "saga %s: step c went on past attempt %d, whose completion's answers are %v", id, attempt, drv.answersOf(tok))
			}
			return -1
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
		if doc, ok := docs[id]; ok {
			// a got the input whole; a's compensation got the input and
			// a's output whole (a compensation of a never runs unless a
			// returned success).
			made := map[string]any{"blob": chaos.LargeOutput(id, "a", largeOutputBytes)}
			for _, e := range dos {
				if e.Step == "a" {
					checked["large_values_seen_whole"]++
					if want := chaos.Fingerprint(doc); e.Note != want {
						violate("large_values_seen_whole", "saga %s: a received %s, want the input, %s", id, e.Note, want)
					}
				}
			}
			for _, e := range undos {
				if e.Step == "a" {
					largeUndone++
					checked["large_values_seen_whole"]++
					if want := chaos.Fingerprint([]any{doc, made}); e.Note != want {
						violate("large_values_seen_whole", "saga %s: a's compensation received %s, want the input and a's output, %s", id, e.Note, want)
					}
				}
			}
			checked["large_items_small"]++
			if _, _, n, err := refsOf(id); err != nil || n > largeStateBytes {
				violate("large_items_small", "saga %s: its stored state is %d bytes (%v), want at most %d: a large value kept inline", id, n, err, largeStateBytes)
			} else {
				largestState = max(largestState, n)
			}
		}
		if step := cancelAt[id]; step != "" {
			// Cancelled while step ran: every effect done up to it (or one
			// step further, if the cancel raced its end) is compensated, in
			// reverse, and nothing after that runs.
			cancelMu.Lock()
			landed := cancelLanded[id]
			cancelMu.Unlock()
			if !landed {
				violate("cancel_during_action_compensates_it", "saga %s: the cancel never found %s pending (status %s)", id, step, st.Status)
				continue
			}
			cancelled++
			checked["cancel_during_action_compensates_it"]++
			got := stepsOf(dos)
			// Compensated: every compensable effect. A call that ran into
			// the invocation's deadline after its effect (a Timeout) while
			// the cancel waited is found out under its key as the saga
			// compensates: that call returns, and it is undone.
			for _, e := range dos {
				if !e.Returned {
					unknownEffects++
					violate("cancel_during_action_compensates_it", "saga %s: the effect of %s was never found out (no call under its key returned)", id, e.Step)
				}
			}
			compensable := slices.DeleteFunc(stepsOf(dos), func(s string) bool { return s == "d" })
			wantUndo := slices.Clone(compensable)
			slices.Reverse(wantUndo)
			switch {
			case st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != lang.ErrorTypeCancelled:
				violate("cancel_during_action_compensates_it", "saga %s: ended %s (%v), want compensated after its cancel", id, st.Status, st.Failure)
			case len(got) <= slices.Index(order, step) || !slices.Equal(got, order[:len(got)]):
				violate("cancel_during_action_compensates_it", "saga %s: effects %v, want a prefix through %s (the step the cancel met)", id, got, step)
			case !slices.Equal(stepsOf(undos), wantUndo):
				violate("cancel_during_action_compensates_it", "saga %s: compensations %v, want %v: an effect was left in place", id, stepsOf(undos), wantUndo)
			}
			// The wait's timer fired (one write) if c ran, and the await
			// took its signal (one write, or none if kept): a cancel that
			// meets the saga waiting compensates at once, and the timer's
			// message is dropped. A completion of c's token is refused once
			// the cancel is in (or kept, and dropped when the action
			// returns): one applied means c returned before the cancel.
			extra := 0
			if slices.Contains(got, "c") {
				extra = 1 + sigWrites()
				for _, tok := range tokens {
					applied, _ := drv.taken(tok)
					extra += applied
				}
			}
			// The cancelled step called more than once: a kill's repeat
			// (no version), or an attempt that ran into the invocation's
			// deadline unscripted (a slow machine) and was retried before
			// the cancel (a version more): its versions are not the
			// script's to count.
			if i := slices.IndexFunc(dos, func(e chaos.Entry) bool { return e.Step == step }); i >= 0 && dos[i].Calls > 1 {
				unknown = true
			}
			if n, ok := timedOutAndRetried(st); !ok || n > 0 {
				unknown = true // a slow machine: see timedOutAndRetried
			}
			if extra < 0 || unknown {
				unknownVersions++
				continue
			}
			checked["versions_written_once"]++
			if want := uint64(1 + len(got) + 1 + len(wantUndo) + extra); st.Version != want {
				violate("versions_written_once", "saga %s (cancelled at %s) is at version %d, want %d (deliveries %v; history %s)", id, step, st.Version, want, drv.answersFor(id), historyLine(st))
			}
			continue
		}
		declined := sc.cb == cbDecline
		done := order // steps whose effect must have happened
		switch {
		case fail != "":
			done = order[:slices.Index(order, fail)]
		case declined:
			// c's action returned, then its callback failed for good:
			// c compensated with the rest.
			done = order[:3]
		}
		compensable := []string{}
		for _, s := range done {
			if s != "d" {
				compensable = append(compensable, s)
			}
		}
		want := durable.StatusSucceeded
		if waitWrites(done) == 1 {
			waited++
		}
		// One write per completed step, c's writes counted below, and
		// one for the failing step's.
		wantVersion := 1 + len(done) + waitWrites(done)
		if step := hangAt[id]; step != "" {
			// One attempt ran into the deadline: a Timeout, retried (one
			// more version), and its effect applied once under its key.
			hung++
			wantVersion++
			checked["deadline_attempt_recorded"]++
			i := slices.IndexFunc(dos, func(e chaos.Entry) bool { return e.Step == step })
			if i < 0 {
				violate("deadline_attempt_recorded", "saga %s: step %s, which hangs, has no effect (ledger %v)", id, step, dos)
			} else if cut, ok := hangRecorded(dos[i], st); !ok {
				violate("deadline_attempt_recorded", "saga %s: step %s should have been called again after running into the deadline, its attempt 1 recorded as a Timeout (ledger %v; history %s)", id, step, dos, historyLine(st))
			} else if cut {
				hangCut++
			}
		}
		if fail != "" {
			want = durable.StatusCompensated
			wantVersion += 1 + len(compensable)
		}
		// Past the await: its signal's write. c: each attempt whose action
		// returned writes its return and its completion (or the return
		// alone, having taken a kept completion); c's own write in done is
		// the last attempt's return. The attempt that hung is counted above.
		// d notes the signal the await took and the attempt whose
		// completion c's out holds.
		wantAttempt := 1
		if hangAt[id] == "c" {
			wantAttempt++
		}
		versionKnown := !unknown
		add := func(n int) {
			if n < 0 {
				versionKnown = false
			}
			wantVersion += n
		}
		if slices.Contains(done, "b") {
			add(sigWrites())
		}
		if slices.Contains(done, "c") {
			first := wantAttempt
			if sc.cb == cbFlaky {
				wantAttempt++
			}
			for a := first; a <= wantAttempt; a++ {
				add(completionWrites(a))
			}
			wantVersion-- // counted in done
			for a := range drv.tokensOf(id) {
				if a > wantAttempt {
					// An attempt ran into the invocation's deadline
					// unscripted (a slow machine) and was retried: its
					// writes are not the script's to count.
					versionKnown = false
				}
			}
		}
		if declined {
			want = durable.StatusCompensated
			wantVersion += len(compensable)
		}
		if i := slices.IndexFunc(dos, func(e chaos.Entry) bool { return e.Step == "d" }); i >= 0 {
			checked["await_and_callback_outs_reach_d"]++
			// c's out holds the completion of its last attempt: the
			// scripted ones, or a later one when an attempt ran into the
			// invocation's deadline unscripted (a slow machine) and was
			// retried with a new token, which the driver completed.
			noteAttempt := wantAttempt
			for a := range drv.tokensOf(id) {
				noteAttempt = max(noteAttempt, a)
			}
			if note := fmt.Sprintf("%s/%d", sigKey, noteAttempt); dos[i].Note != note {
				violate("await_and_callback_outs_reach_d", "saga %s: d saw %q, want %q (deliveries %v)", id, dos[i].Note, note, drv.answersFor(id))
			}
		}
		checked["status_as_scripted"]++
		if st.Status != want {
			violate("status_as_scripted", "saga %s (fail_at %q) ended %s, want %s", id, fail, st.Status, want)
		}
		scripted := 0
		if hangAt[id] != "" {
			scripted = 1
		}
		if n, ok := timedOutAndRetried(st); !ok || n > scripted {
			versionKnown = false // a slow machine: see timedOutAndRetried
		}
		// Every transition wrote exactly one version: the count is fixed
		// by the script and the receipts the driver got.
		if !versionKnown {
			unknownVersions++
		} else {
			checked["versions_written_once"]++
			if st.Version != uint64(wantVersion) {
				violate("versions_written_once", "saga %s (fail_at %q, script %+v) is at version %d, want %d (deliveries %v; history %s)", id, fail, sc, st.Version, wantVersion, drv.answersFor(id), historyLine(st))
			}
		}
		checked["effects_once_per_completed_step"]++
		if got := stepsOf(dos); !slices.Equal(got, done) {
			violate("effects_once_per_completed_step", "saga %s (fail_at %q): effects %v, want %v", id, fail, got, done)
		}
		checked["compensation_exact_reverse"]++
		wantUndo := []string{}
		if fail != "" || declined {
			wantUndo = slices.Clone(compensable)
			slices.Reverse(wantUndo)
		}
		if got := stepsOf(undos); !slices.Equal(got, wantUndo) {
			violate("compensation_exact_reverse", "saga %s (fail_at %q): compensations %v, want %v", id, fail, got, wantUndo)
		}
	}
	// Fork sagas: their children, their effects and compensations, their
	// joins and their fork records.
	parents := map[string]bool{}
	for id := range forks {
		parents[id] = true
	}
	children, err := forkChildren(ctx, awslocal.DynamoDB(dyn), env.Table, cl, parents)
	if err != nil {
		t.Fatal(err)
	}
	fc := &forkCheck{violate: violate, checked: checked, fork: func(key string) (*durable.ForkRecord, error) {
		return dropStore.ForkGet(ctx, &durable.ForkGetParams{Key: key})
	}}
	nChildren, forkSucceeded, forkDuplicates, fallbackWaits := 0, 0, 0, 0
	for id, r := range forks {
		checked["no_saga_lost"]++
		r.final, r.children = final[id], children[id]
		nChildren += len(r.children)
		if r.final == nil {
			if waitsOnCancelFallbacks(r.children, ledgerEntries) {
				// Slow by design, not lost: see waitsOnCancelFallback.
				fallbackWaits++
				t.Logf("fork saga %s waits on a child's cancel fallback, 15 minutes on (its launcher was killed between the create and the send)", id)
				continue
			}
			where := "unread"
			if st, err := cl.Status(ctx, id); err == nil {
				cur, _ := st.Pending()
				where = fmt.Sprintf("%s at version %d, %+v; history %s", st.Status, st.Version, cur, historyLine(st))
				if cur.Fork {
					if plan, err := cl.Plan(ctx, st); err != nil {
						where += fmt.Sprintf("; its plan: %v", err)
					} else if _, cs, err := plan.Launch(st, 0); err == nil {
						rec, err := dropStore.ForkGet(ctx, &durable.ForkGetParams{Key: durable.ForkKey(id, cs.Link.Step, cs.Link.Seq)})
						where += fmt.Sprintf("; fork record %+v (%v)", rec, err)
					}
				}
			}
			var kids []string
			for run, ch := range r.children {
				cur, _ := ch.Pending()
				kids = append(kids, fmt.Sprintf("%s: %s v%d cancel=%v pending %+v, history %s", run, ch.Status, ch.Version, ch.CancelRequested, cur, historyLine(ch)))
			}
			sort.Strings(kids)
			violate("no_saga_lost", "fork saga %s (script %+v) did not finish: %s; children: %s", id, r.sc, where, strings.Join(kids, " | "))
			continue
		}
		if r.final.Status == durable.StatusSucceeded {
			forkSucceeded++
		}
		for sagaID, es := range ledgerEntries {
			if sagaID == id || strings.HasPrefix(sagaID, id+".") {
				for _, e := range es {
					forkDuplicates += int(e.Calls - 1)
				}
			}
		}
		fc.check(id, r, ledgerEntries)
	}
	held.check(ctx, ledgerEntries, violate, checked)
	// Every final state's references resolve; and none did while sampled.
	checked["references_resolve"] += refSamples
	for _, m := range sampledMissing {
		violate("references_resolve", "a stored state referred to an object the bucket did not hold: %s", m)
	}
	refsFinal := 0
	for id := range final {
		checked["references_resolve"]++
		refs, missing, _, err := refsOf(id)
		if err != nil {
			violate("references_resolve", "saga %s: its stored state: %v", id, err)
		}
		for _, m := range missing {
			violate("references_resolve", "saga %s ended referring to an object the bucket does not hold: %s", id, m)
		}
		refsFinal += len(refs)
	}
	objectKeys, _, err := s3.Keys("")
	if err != nil {
		t.Fatal(err)
	}
	puts, putAgain := 0, 0
	for _, n := range s3.Puts() {
		puts += n
		if n > 1 {
			putAgain++
		}
	}
	// Dead-letter queues: the poison bodies, byte for byte, and nothing else.
	checked["dead_letters_only_poison"]++
	var dead [][]byte
	for end := time.Now().Add(60 * time.Second); len(dead) < len(poison) && time.Now().Before(end); {
		for _, q := range []string{"AdvanceDeadLetterQueue", "CompensateDeadLetterQueue"} {
			out, err := sqc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(env.QueueURLs[q]), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 600})
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
	scheduledCut := bytes.Count(logs.b.Bytes(), []byte("the invocation broke off"))
	ticks := bytes.Count(logs.b.Bytes(), []byte(`invoked with {"job": "tick"}`))
	idleTicks := bytes.Count(logs.b.Bytes(), []byte(`invoked with {"job": "tick"}: {"tick":{"Due":0,"Sent":0}}`))
	sweepsResent := len(sweepResent.FindAll(logs.b.Bytes(), -1))
	chained := bytes.Count(logs.b.Bytes(), []byte("outcome=chained"))
	carriers := bytes.Count(logs.b.Bytes(), []byte("outcome=carrier"))
	t.Logf("chaos report: %d sagas, %d workers killed with SIGKILL, %d invocations cut off mid-flight, %d duplicate action calls absorbed by idempotency keys, %d actions run into the invocation's deadline (%d of them cut off before their effect), %d sagas cancelled during an action (%d effects never found out), %d sagas waited and went on (not counting cancelled ones), %d ticks of the scheduled function (%d found nothing due; %d scheduled invocations cut off by kills), %d sweeps that sent an idle saga's outbox again", nSagas, kills.Load(), cut, duplicates, hung, hangCut, cancelled, unknownEffects, waited, ticks, idleTicks, scheduledCut, sweepsResent)
	t.Logf("chains: %d steps chained (run in the message of the step before, no queue hop); %d carriers came back to a version their own chain wrote (a worker killed mid-chain, a lost delete, a duplicate) and sent its stored outbox", chained, carriers)
	killsOpen, killsUndoing := killed.during(fc.childSpans), killed.during(fc.undoSpans)
	undoneLogged := bytes.Count(logs.b.Bytes(), []byte("child undone"))
	t.Logf("forks: %d fork sagas (%d succeeded), %d children; %d kills while children ran, %d while parents undid them (by the ledger's times); %d children undone by their parents (%d undo transitions logged, retries included), %d compensated themselves; %d parents cancelled while a child ran, %d child actions run into the deadline (%d cut off before their effect), %d parents waiting on a child's cancel fallback, %d effects never found out, %d duplicate action calls absorbed; %d parents whose own actions timed out unscripted (versions not counted)",
		len(forks), forkSucceeded, nChildren, killsOpen, killsUndoing, fc.undone, undoneLogged, fc.selfCompensated, fc.cancelled, fc.hung, fc.hangCut, fallbackWaits, fc.timedOut, forkDuplicates, fc.slowParents)
	sigs, cbs := drv.counts()
	drv.mu.Lock()
	t.Logf("driver: %d signals (%d sends: %d applied, %d kept, %d duplicate, %d refused, %d errors; %d sends written and dropped, retried later), %d callback attempts (%d sends: %d applied, %d kept, %d duplicate, %d refused, %d errors; %d dropped), %d sagas whose version count the receipts could not fix",
		sigs["deliveries"], drv.sends["signal"], sigs["applied"], sigs["kept"], sigs["duplicate"], sigs["refused"], sigs["error"], drv.sends["signal dropped"],
		cbs["deliveries"], drv.sends["callback"], cbs["applied"], cbs["kept"], cbs["duplicate"], cbs["refused"], cbs["error"], drv.sends["callback dropped"], unknownVersions)
	drv.mu.Unlock()
	t.Logf("large values: %d sagas with a 1 MiB input and a 5 MiB output (%d of them undid a with both), %d objects in the bucket from %d puts (%d objects put again: a worker killed between its put and its write, %d times on purpose, or a write that lost); references: %d in %d states sampled while they ran, %d in the final states; largest stored state of a large saga %d bytes",
		len(docs), largeUndone, len(objectKeys), puts, putAgain, putKilled.Load(), refsSampled, refSamples, refsFinal, largestState)
	for _, k := range []string{"no_saga_lost", "status_as_scripted", "versions_written_once", "effects_once_per_completed_step", "compensation_exact_reverse", "deadline_attempt_recorded", "cancel_during_action_compensates_it",
		"signal_taken_at_most_once", "signal_taken_by_the_await", "callback_taken_at_most_once", "kept_writes_match_receipts", "await_and_callback_outs_reach_d", "dead_letters_only_poison",
		"fork_children_final", "fork_status_as_scripted", "fork_effects_once_per_completed_step", "fork_deadline_attempt_recorded", "fork_output_in_order", "fork_compensated_exactly_once", "fork_undo_order", "fork_join_once", "fork_record_counts",
		"references_resolve", "large_values_seen_whole", "large_items_small", "paused_not_run"} {
		t.Logf("  %-36s checked %5d, violated %d", k, checked[k], violated[k])
	}
	held.report(t, killed)
	for _, k := range holdInvariants {
		t.Logf("  %-36s checked %5d, violated %d", k, checked[k], violated[k])
	}
	logs.mu.Unlock()
	if kills.Load() == 0 {
		t.Error("no worker was killed: the test proved nothing")
	}
	if len(docs) >= putKills && putKilled.Load() == 0 {
		t.Error("no worker was killed between a put and its write: references_resolve met no such crash")
	}
	if len(docs) > 0 && largeUndone == 0 {
		t.Errorf("%d sagas with large values, none undid a: no compensation read them back", len(docs))
	}
	if chained == 0 {
		t.Error("no step was chained: the kill test never met a chain")
	}
	if ticks == 0 || ticks == idleTicks {
		t.Errorf("%d ticks, %d of them found nothing due: the scheduled function never met a waiting saga", ticks, idleTicks)
	}
}

// sweepResent finds, in the functions' logs, a sweep that sent outboxes again.
var sweepResent = regexp.MustCompile(`"Resent":[1-9]`)

// waitWrites is the writes the wait between b and c adds to a saga not
// cancelled, whose completed steps are done: its timer firing, once b
// completed (a saga that failed at c waited first).
func waitWrites(done []string) int {
	if slices.Contains(done, "b") {
		return 1
	}
	return 0
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

// timedOutAndRetried counts the attempts in st's history that ran into a
// timeout and were retried. The script hangs one attempt on purpose; on a
// slow machine (two cores running the race detector beside the kill test)
// an action it did not hang can run into its step's timeout or the
// invocation's deadline too, and its retry writes a version the script
// cannot count. ok is false when the history dropped entries.
func timedOutAndRetried(st *saga.State) (n int, ok bool) {
	if st.HistoryDropped > 0 {
		return 0, false
	}
	es, err := st.HistoryEntries(nil)
	if err != nil {
		return 0, false
	}
	for _, e := range es {
		if e.Outcome == saga.OutcomeRetrying && e.Error != nil && e.Error.Type == lang.ErrorTypeTimeout {
			n++
		}
	}
	return n, true
}

// waitsOnCancelFallbacks reports whether the children of a fork saga that
// did not finish are each final or waiting on their cancel's fallback
// (waitsOnCancelFallback), one at least: the parent then waits on them.
func waitsOnCancelFallbacks(children map[string]*saga.State, ledger map[string][]chaos.Entry) bool {
	waiting := 0
	for _, ch := range children {
		switch {
		case ch.Status.Final():
		case waitsOnCancelFallback(ch, ledger[ch.SagaID]):
			waiting++
		default:
			return false
		}
	}
	return waiting > 0
}

// waitsOnCancelFallback reports whether ch, a fork's child, is the slow
// case a cancel keeps by design (docs/PROTOCOL.md, rule 3): its launcher
// was killed between its create and its send, and its parent's stop
// cancelled it before anything launched it again. The cancel, written on
// its first version, keeps the first attempt pending (it could be
// running) and stores its copy as a fallback 15 minutes on, longer than
// the test waits. So: running at version 2 with a cancel requested, the
// first attempt pending, that fallback in its outbox, and nothing of it
// applied.
func waitsOnCancelFallback(ch *saga.State, effects []chaos.Entry) bool {
	if ch.Status != durable.StatusRunning || ch.Version != 2 || !ch.CancelRequested || len(effects) > 0 {
		return false
	}
	cur, ok := ch.Pending()
	if !ok || cur.Fork || cur.Compensating || cur.Attempt != 1 {
		return false
	}
	return slices.ContainsFunc(ch.Outbox, func(m durable.Message) bool {
		return m.Kind == durable.KindStep && m.Version == 2 && m.Attempt == 1 && m.Delay == durable.MaxDelay
	})
}

// hangRecorded checks the step a script hangs, from its ledger entry e
// and the final state of the run it is in (hangRecordedIn).
func hangRecorded(e chaos.Entry, st *saga.State) (cut, ok bool) {
	if st == nil || st.HistoryDropped > 0 {
		return hangRecordedIn(e, nil, false)
	}
	es, err := st.HistoryEntries(nil)
	if err != nil {
		return !slices.Contains(e.Attempts, 1), false
	}
	return hangRecordedIn(e, es, true)
}

// hangRecordedIn checks the step a script hangs. Its attempt 1 applies
// its effect and runs into the invocation's deadline: a Timeout, retried,
// so the step is called again under the same key (ok: e.Calls >= 2). On
// a slow machine the deadline can cut attempt 1 off before its effect (e
// has no attempt 1; cut): the one effect is then a later attempt's, and
// ok says the run's history es recorded attempt 1 of a forward step as a
// Timeout and retried it. A history not known (it dropped entries)
// cannot say: ok.
func hangRecordedIn(e chaos.Entry, es []saga.HistoryEntry, known bool) (cut, ok bool) {
	if slices.Contains(e.Attempts, 1) {
		return false, e.Calls >= 2
	}
	if !known {
		return true, true
	}
	return true, slices.ContainsFunc(es, func(h saga.HistoryEntry) bool {
		return !h.Compensation && h.Attempt == 1 && h.Outcome == saga.OutcomeRetrying && h.Error != nil && h.Error.Type == lang.ErrorTypeTimeout
	})
}

// historyLine is st's history in one line, for a violation's message:
// version, cause, step index, outcome and attempt of each entry.
func historyLine(st *saga.State) string {
	es, err := st.HistoryEntries(nil)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	if st.HistoryDropped > 0 {
		fmt.Fprintf(&b, "(%d dropped) ", st.HistoryDropped)
	}
	for _, e := range es {
		fmt.Fprintf(&b, "v%d:%s", e.Version, e.Cause)
		if e.StepIndex >= 0 {
			fmt.Fprintf(&b, "/%d:%s#%d", e.StepIndex, e.Outcome, e.Attempt)
		}
		if e.Error != nil {
			fmt.Fprintf(&b, "(%s)", e.Error.Type)
		}
		b.WriteByte(' ')
	}
	return strings.TrimSpace(b.String())
}
