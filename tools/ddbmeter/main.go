// Command ddbmeter is a proxy in front of a DynamoDB emulator that prints
// what DynamoDB would bill for the requests through it, index writes
// included (internal/ddbmeter), per operation:
//
//	go run ./tools/ddbmeter -backend http://127.0.0.1:4567 -listen 127.0.0.1:0
//
// Point the application's DynamoDB endpoint at the address it prints.
// GET /_meter on that address prints the figures so far; SIGUSR1 prints
// them on stderr; SIGINT or SIGTERM prints them and stops. It listens on
// 127.0.0.1 only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/ddbmeter"
)

func main() { os.Exit(run()) }

func run() int {
	backend := flag.String("backend", "", "the DynamoDB emulator's endpoint, e.g. http://127.0.0.1:4567 (required)")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on; its host must be 127.0.0.1")
	flag.Parse()
	host, _, err := net.SplitHostPort(*listen)
	if err != nil || host != "127.0.0.1" {
		fmt.Fprintf(os.Stderr, "ddbmeter: -listen %q: listen on 127.0.0.1 only, e.g. 127.0.0.1:0\n", *listen)
		return 2
	}
	meter, err := ddbmeter.New(ddbmeter.Config{Backend: *backend})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ddbmeter: %v\n", err)
		return 2
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_meter", func(w http.ResponseWriter, _ *http.Request) { meter.Report(w) })
	mux.Handle("/", meter)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "ddbmeter: metering %s at http://%s (GET /_meter for the figures)\n", *backend, ln.Addr())

	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGUSR1)
	for {
		select {
		case err := <-done:
			fmt.Fprintf(os.Stderr, "ddbmeter: %v\n", err)
			meter.Report(os.Stderr)
			return 1
		case sig := <-signals:
			meter.Report(os.Stderr)
			if sig == syscall.SIGUSR1 {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := srv.Shutdown(ctx)
			cancel()
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintf(os.Stderr, "ddbmeter: %v\n", err)
			}
			return 0
		}
	}
}
