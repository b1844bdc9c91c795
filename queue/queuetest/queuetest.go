// Package queuetest is the contract every durable.Queue and durable.Receiver
// pair must meet, run against the memory queue and against SQS.
package queuetest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// Harness is one backend, with fresh, empty queues.
type Harness struct {
	Queue    durable.Queue    // sends to the harness's queues
	Receiver durable.Receiver // receives from the same queues and their dead-letter queues
	// SendRaw puts a body on a queue unchanged, as a foreign producer would.
	SendRaw func(ctx context.Context, q durable.QueueName, body []byte) error
	// MaxReceives is the queues' redrive limit: a message received more
	// often moves to its dead-letter queue.
	MaxReceives int
	// Sleep lets time pass: a virtual clock's Advance, or time.Sleep.
	Sleep func(time.Duration)
}

// NewHarness returns a backend with empty queues for one subtest.
type NewHarness func(t *testing.T) *Harness

// Exercise runs the whole suite. Subtests run in parallel: each gets its
// own harness, so a backend's queues must not be shared between harnesses.
func Exercise(t *testing.T, newHarness NewHarness) {
	t.Run("SendReceiveDelete", func(t *testing.T) { t.Parallel(); testSendReceiveDelete(t, newHarness(t)) })
	t.Run("Batch", func(t *testing.T) { t.Parallel(); testBatch(t, newHarness(t)) })
	t.Run("QueuesAreSeparate", func(t *testing.T) { t.Parallel(); testSeparate(t, newHarness(t)) })
	t.Run("Delay", func(t *testing.T) { t.Parallel(); testDelay(t, newHarness(t)) })
	t.Run("VisibilityAndRedelivery", func(t *testing.T) { t.Parallel(); testVisibility(t, newHarness(t)) })
	t.Run("DeadLetter", func(t *testing.T) { t.Parallel(); testDeadLetter(t, newHarness(t)) })
	t.Run("StaleReceipt", func(t *testing.T) { t.Parallel(); testStaleReceipt(t, newHarness(t)) })
	t.Run("LongPoll", func(t *testing.T) { t.Parallel(); testLongPoll(t, newHarness(t)) })
}

func msg(i int) durable.Message {
	return durable.Message{SagaID: fmt.Sprintf("saga-%d", i), Version: uint64(i + 1), Queue: durable.QueueAdvance, Step: "charge", Attempt: 1}
}

// receiveAll drains visible messages from q (up to want, in several calls).
func receiveAll(t *testing.T, h *Harness, q durable.QueueName, want int, vis time.Duration) []durable.Delivery {
	t.Helper()
	var out []durable.Delivery
	empty := 0
	for range 20 {
		// SQS may answer a receive with fewer messages than it holds, or
		// none (it samples its servers): only several empty long polls in
		// a row mean there is nothing more.
		got, err := h.Receiver.Receive(context.Background(), &durable.ReceiveParams{Queue: q, Max: 10, Visibility: vis, Wait: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, got...)
		if len(out) >= want {
			break
		}
		if len(got) == 0 {
			if empty++; empty == 3 {
				break
			}
		} else {
			empty = 0
		}
	}
	return out
}

// receiveNow makes one receive that does not wait: for checking that a
// message is not there yet (a patient receive would wait past a delay or a
// visibility timeout under test).
func receiveNow(t *testing.T, h *Harness, q durable.QueueName, vis time.Duration) []durable.Delivery {
	t.Helper()
	got, err := h.Receiver.Receive(context.Background(), &durable.ReceiveParams{Queue: q, Max: 10, Visibility: vis})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func testSendReceiveDelete(t *testing.T, h *Harness) {
	ctx := context.Background()
	m := msg(1)
	if err := h.Queue.Send(ctx, []durable.Message{m}); err != nil {
		t.Fatal(err)
	}
	got := receiveAll(t, h, durable.QueueAdvance, 1, time.Second)
	if len(got) != 1 {
		t.Fatalf("received %d messages, want 1", len(got))
	}
	d := got[0]
	back, err := durable.DecodeMessage(d.Body)
	if err != nil {
		t.Fatal(err)
	}
	if back != m {
		t.Fatalf("message %+v, want %+v", back, m)
	}
	if d.ReceiveCount != 1 || d.ReceiptHandle == "" || d.MessageID == "" || d.Queue != durable.QueueAdvance {
		t.Fatalf("delivery %+v", d)
	}
	if err := h.Receiver.Delete(ctx, &durable.DeleteParams{Queue: durable.QueueAdvance, ReceiptHandle: d.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	h.Sleep(2 * time.Second)
	if again := receiveNow(t, h, durable.QueueAdvance, time.Second); len(again) != 0 {
		t.Fatalf("deleted message came back: %+v", again)
	}
}

func testBatch(t *testing.T, h *Harness) {
	ctx := context.Background()
	var batch []durable.Message
	for i := range 13 {
		batch = append(batch, msg(i))
	}
	if err := h.Queue.Send(ctx, batch); err != nil {
		t.Fatal(err)
	}
	got := receiveAll(t, h, durable.QueueAdvance, 13, 30*time.Second)
	seen := map[string]bool{}
	for _, d := range got {
		m, err := durable.DecodeMessage(d.Body)
		if err != nil {
			t.Fatal(err)
		}
		seen[m.SagaID] = true
	}
	if len(seen) != 13 {
		t.Fatalf("received %d distinct messages of 13", len(seen))
	}
}

func testSeparate(t *testing.T, h *Harness) {
	ctx := context.Background()
	m := msg(1)
	m.Queue = durable.QueueCompensate
	if err := h.Queue.Send(ctx, []durable.Message{m}); err != nil {
		t.Fatal(err)
	}
	if got := receiveNow(t, h, durable.QueueAdvance, time.Second); len(got) != 0 {
		t.Fatal("a compensate message arrived on the advance queue")
	}
	if got := receiveAll(t, h, durable.QueueCompensate, 1, time.Second); len(got) != 1 {
		t.Fatalf("compensate queue gave %d messages", len(got))
	}
}

func testDelay(t *testing.T, h *Harness) {
	ctx := context.Background()
	m := msg(1)
	m.Delay = 2 * time.Second
	if err := h.Queue.Send(ctx, []durable.Message{m}); err != nil {
		t.Fatal(err)
	}
	if got := receiveNow(t, h, durable.QueueAdvance, time.Second); len(got) != 0 {
		t.Fatal("a delayed message arrived before its delay")
	}
	h.Sleep(3 * time.Second)
	if got := receiveAll(t, h, durable.QueueAdvance, 1, time.Second); len(got) != 1 {
		t.Fatalf("after the delay: %d messages", len(got))
	}
	m.Delay = durable.MaxDelay + time.Second
	if err := h.Queue.Send(ctx, []durable.Message{m}); err == nil {
		t.Fatal("a delay over the maximum was accepted")
	}
}

func testVisibility(t *testing.T, h *Harness) {
	ctx := context.Background()
	if err := h.Queue.Send(ctx, []durable.Message{msg(1)}); err != nil {
		t.Fatal(err)
	}
	first := receiveAll(t, h, durable.QueueAdvance, 1, 2*time.Second)
	if len(first) != 1 {
		t.Fatalf("first receive: %d", len(first))
	}
	if got := receiveNow(t, h, durable.QueueAdvance, 2*time.Second); len(got) != 0 {
		t.Fatal("a received message was visible again at once")
	}
	h.Sleep(3 * time.Second)
	second := receiveAll(t, h, durable.QueueAdvance, 1, 2*time.Second)
	if len(second) != 1 || second[0].ReceiveCount != 2 || !bytes.Equal(second[0].Body, first[0].Body) {
		t.Fatalf("redelivery %+v", second)
	}
	if second[0].ReceiptHandle == first[0].ReceiptHandle {
		t.Fatal("redelivery kept the old receipt handle")
	}
}

func testDeadLetter(t *testing.T, h *Harness) {
	ctx := context.Background()
	// Not a message, but text SQS accepts (it refuses NUL and some other characters).
	poison := []byte("{\"v\":1,\"saga_id\": truncated \u2603 \t\r\n")
	if err := h.SendRaw(ctx, durable.QueueAdvance, poison); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= h.MaxReceives; i++ {
		got := receiveAll(t, h, durable.QueueAdvance, 1, time.Second)
		if len(got) != 1 || got[0].ReceiveCount != i {
			t.Fatalf("receive %d: %+v", i, got)
		}
		h.Sleep(2 * time.Second)
	}
	if got := receiveNow(t, h, durable.QueueAdvance, time.Second); len(got) != 0 {
		t.Fatalf("received %d times more than the limit", len(got))
	}
	var dead []durable.Delivery
	for range 5 {
		dead = receiveAll(t, h, durable.DeadLetter(durable.QueueAdvance), 1, time.Second)
		if len(dead) > 0 {
			break
		}
		h.Sleep(time.Second)
	}
	if len(dead) != 1 || !bytes.Equal(dead[0].Body, poison) {
		t.Fatalf("dead-letter queue holds %+v, want the poison body byte for byte", dead)
	}
}

func testStaleReceipt(t *testing.T, h *Harness) {
	ctx := context.Background()
	if err := h.Queue.Send(ctx, []durable.Message{msg(1)}); err != nil {
		t.Fatal(err)
	}
	first := receiveAll(t, h, durable.QueueAdvance, 1, time.Second)
	h.Sleep(2 * time.Second)
	second := receiveAll(t, h, durable.QueueAdvance, 1, 2*time.Second)
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("receives %d %d", len(first), len(second))
	}
	// Deleting with the first, stale handle is not an error.
	_ = h.Receiver.Delete(ctx, &durable.DeleteParams{Queue: durable.QueueAdvance, ReceiptHandle: first[0].ReceiptHandle})
	if err := h.Receiver.Delete(ctx, &durable.DeleteParams{Queue: durable.QueueAdvance, ReceiptHandle: second[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	h.Sleep(3 * time.Second)
	if got := receiveNow(t, h, durable.QueueAdvance, time.Second); len(got) != 0 {
		t.Fatal("deleted message came back")
	}
}

func testLongPoll(t *testing.T, h *Harness) {
	ctx := context.Background()
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = h.Queue.Send(ctx, []durable.Message{msg(7)})
	}()
	got, err := h.Receiver.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("long poll returned %d messages; a message was sent while it waited", len(got))
	}
}
