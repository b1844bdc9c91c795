package console_test

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
)

// browserPath finds a Chromium to drive. Without one the test fails where
// it must run (CI, or LAMBDASAGA_BROWSER=1, which make test sets after
// installing Debian's chromium) and is skipped, saying so, elsewhere.
func browserPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" || os.Getenv("LAMBDASAGA_BROWSER") != "" {
		t.Fatal("no chromium on PATH: make browser installs Debian's (apt-get install chromium, as root)")
	}
	t.Skip("no chromium on PATH: the console's browser test is skipped (make browser installs it, as root; make test requires it)")
	return ""
}

// The console in a real headless Chromium: the list shows the sagas, a
// saga's page its steps and history; cancelling from the page, through
// its confirmation, compensates a waiting saga, and resuming continues a
// parked one once its failing action is fixed.
//
// LAMBDASAGA_CONSOLE_SCREENSHOT=FILE saves the saga's page there (make
// console-screenshot writes docs/console.png).
func TestBrowser(t *testing.T) {
	exe := browserPath(t)
	browse(t, exe, newRig(t))
}

// The same, with the sagas on the DynamoDB and SQS emulators (skipped
// without them; make test starts them): sagas run on the emulators are
// found, explained and acted on from the console in a real browser.
func TestBrowserOnEmulators(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	exe := browserPath(t)
	browse(t, exe, newRig(t, b))
}

// browse drives the console of r's runtime in the browser at exe.
func browse(t *testing.T, exe string, r *rig) {
	t.Helper()
	r.start(t, "order", "o-1001")
	r.start(t, "refund", "r-2002")
	r.start(t, "webhook", "w-3003")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox will not start
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 1400),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	// The browser starts on the first call, and lives as long as that
	// call's context: this one, not a step's.
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	// Each call gets 30 seconds: a page that never shows what is waited
	// for fails the test rather than hanging it.
	step := func() (context.Context, context.CancelFunc) { return context.WithTimeout(browser, 30*time.Second) }
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := step()
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			where, _ := chromedp.Run(browser, chromedp.Location())
			body, _ := chromedp.Run(browser, chromedp.OuterHTML(chromedp.CSS("main")))
			t.Fatalf("%s: %v (at %s)\n%s", what, err, where, body)
		}
	}
	text := func(sel string) string {
		t.Helper()
		ctx, cancel := step()
		defer cancel()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	status := func(step string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 30*time.Second)
		defer cancel()
		a, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#step-"+step), "data-status"))
		if err != nil {
			t.Fatalf("status of step %s: %v", step, err)
		}
		return a.Value
	}

	do("the list", chromedp.Navigate(r.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-id="o-1001"]`)))
	list := text("table.sagas")
	for _, want := range []string{"o-1001", "order", "waiting", "r-2002", "refund", "compensation_failed", "w-3003"} {
		if !strings.Contains(list, want) {
			t.Errorf("the list lacks %q:\n%s", want, list)
		}
	}

	do("the waiting saga's page", chromedp.Click(chromedp.CSS(`tr[data-id="o-1001"] a`)), chromedp.WaitVisible(chromedp.CSS("#history")))
	if reserve, approval := status("reserve"), status("approval"); reserve != "done" || approval != "waiting" {
		t.Errorf("steps: reserve %q, approval %q; want done, waiting", reserve, approval)
	}
	if history := text("#history"); !strings.Contains(history, "reserve") || !strings.Contains(history, "completed") || !strings.Contains(history, "waiting") {
		t.Errorf("history:\n%s", history)
	}
	ctx2, cancel2 := step()
	shot, err := chromedp.Run(ctx2, chromedp.FullScreenshot(100))
	cancel2()
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if _, err := png.Decode(bytes.NewReader(shot)); err != nil {
		t.Errorf("the screenshot is not a PNG: %v", err)
	}
	if out := os.Getenv("LAMBDASAGA_CONSOLE_SCREENSHOT"); out != "" {
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	do("cancel, asked", chromedp.Click(chromedp.ID("cancel")), chromedp.WaitVisible(chromedp.ID("confirm")))
	if warning := text("#warning"); !strings.Contains(warning, "compensates") {
		t.Errorf("the cancel's confirmation: %q", warning)
	}
	if st := r.waitFor(t, "o-1001", durable.StatusWaiting); st.CancelRequested {
		t.Fatal("asking to confirm cancelled")
	}
	do("cancel, confirmed", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("result")))
	if result := text("#result"); !strings.HasPrefix(result, "Cancelled") {
		t.Errorf("cancel: %q", result)
	}
	r.waitFor(t, "o-1001", durable.StatusCompensated)
	do("the cancelled saga", chromedp.Navigate(r.srv.URL+"/sagas/o-1001"), chromedp.WaitVisible(chromedp.ID("saga-status")))
	if st, reserve := text("#saga-status"), status("reserve"); st != "compensated" || reserve != "compensated" {
		t.Errorf("after the cancel: saga %q, reserve %q; want compensated, compensated", st, reserve)
	}

	r.fixed.Store(true) // the ledger takes unbookings again
	do("the parked saga", chromedp.Navigate(r.srv.URL+"/sagas/r-2002"), chromedp.WaitVisible(chromedp.ID("parked")))
	if parked := text("#parked"); !strings.Contains(parked, "LedgerDown") {
		t.Errorf("parked: %q", parked)
	}
	do("resume, confirmed", chromedp.Click(chromedp.ID("resume")), chromedp.WaitVisible(chromedp.ID("confirm")),
		chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("result")))
	if result := text("#result"); !strings.HasPrefix(result, "Resumed") {
		t.Errorf("resume: %q", result)
	}
	r.waitFor(t, "r-2002", durable.StatusCompensated)
	do("the resumed saga", chromedp.Navigate(r.srv.URL+"/sagas/r-2002"), chromedp.WaitVisible(chromedp.ID("saga-status")))
	if st, book := text("#saga-status"), status("book"); st != "compensated" || book != "compensated" {
		t.Errorf("after the resume: saga %q, book %q; want compensated, compensated", st, book)
	}

	// Every waiting order at once, from the filtered list: the count is
	// confirmed, then each is cancelled.
	r.start(t, "order", "o-4001")
	r.start(t, "order", "o-4002")
	do("the waiting orders", chromedp.Navigate(r.srv.URL+"/sagas?status=waiting&name=order"), chromedp.WaitVisible(chromedp.CSS(`tr[data-id="o-4002"]`)))
	do("bulk cancel, asked", chromedp.Click(chromedp.ID("bulk-cancel")), chromedp.WaitVisible(chromedp.ID("bulk-confirm")))
	if count := text("#bulk-count"); !strings.Contains(count, "cancel 2 sagas") {
		t.Errorf("the bulk confirmation: %q", count)
	}
	if st := r.waitFor(t, "o-4001", durable.StatusWaiting); st.CancelRequested {
		t.Fatal("asking to confirm the bulk cancel cancelled")
	}
	do("bulk cancel, confirmed", chromedp.Click(chromedp.ID("bulk-confirm")), chromedp.WaitVisible(chromedp.ID("bulk-result")))
	if result := text("#bulk-result"); !strings.HasPrefix(result, "2 acted on, 0 skipped, 0 failed") {
		t.Errorf("bulk cancel: %q", result)
	}
	r.waitFor(t, "o-4001", durable.StatusCompensated)
	r.waitFor(t, "o-4002", durable.StatusCompensated)
}
