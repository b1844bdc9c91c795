// Command withemulators starts the DynamoDB and SQS emulators on free
// 127.0.0.1 ports, runs a command with LAMBDASAGA_DYNAMODB_ENDPOINT and
// LAMBDASAGA_SQS_ENDPOINT set, and stops the emulators afterwards, also
// when the command fails or the run is interrupted. It exits with the
// command's exit code.
//
// With -calls FILE, the endpoints it gives are recording proxies in front
// of the emulators: every AWS call a principal makes through them is
// appended to FILE (internal/awscall), and LAMBDASAGA_AWS_CALLS names FILE
// for fake APIs a test serves itself; internal/iamcheck then evaluates
// the calls against the template's policies.
//
//	go run ./tools/withemulators -- go test ./...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/lambdasaga/lambdasaga/internal/awscall"
	"github.com/lambdasaga/lambdasaga/internal/emulators"
)

func main() { os.Exit(run()) }

func run() int {
	dir := flag.String("dir", "tools/emulators", "where the emulators are installed (npm ci)")
	logFile := flag.String("log", "", "write the emulators' output to this file")
	calls := flag.String("calls", "", "record the AWS calls made through the emulators to this file, for the IAM check")
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "withemulators: name a command to run, e.g. withemulators -- go test ./...")
		return 2
	}
	cfg := emulators.Config{Dir: *dir}
	if *logFile != "" {
		f, err := os.Create(*logFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "withemulators: %v\n", err)
			return 2
		}
		defer f.Close()
		cfg.Log = f
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	emu, err := emulators.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "withemulators: %v\n", err)
		return 2
	}
	defer emu.Stop()
	fmt.Fprintf(os.Stderr, "withemulators: dynalite at %s, fauxqs at %s\n", emu.DynamoDBEndpoint, emu.SQSEndpoint)
	dynamoEndpoint, sqsEndpoint := emu.DynamoDBEndpoint, emu.SQSEndpoint
	var env []string
	if *calls != "" {
		// Absolute: the tests that record too run in their packages' directories.
		file, err := filepath.Abs(*calls)
		if err != nil {
			fmt.Fprintf(os.Stderr, "withemulators: %v\n", err)
			return 2
		}
		rec, err := awscall.Open(file)
		if err != nil {
			fmt.Fprintf(os.Stderr, "withemulators: %v\n", err)
			return 2
		}
		defer rec.Close()
		if dynamoEndpoint, err = proxy(rec, awscall.DynamoDB, dynamoEndpoint); err == nil {
			sqsEndpoint, err = proxy(rec, awscall.SQS, sqsEndpoint)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "withemulators: %v\n", err)
			return 2
		}
		env = append(env, awscall.EnvFile+"="+file)
		fmt.Fprintf(os.Stderr, "withemulators: recording AWS calls to %s through %s and %s\n", *calls, dynamoEndpoint, sqsEndpoint)
	}

	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"LAMBDASAGA_DYNAMODB_ENDPOINT="+dynamoEndpoint,
		"LAMBDASAGA_SQS_ENDPOINT="+sqsEndpoint,
	)
	cmd.Env = append(cmd.Env, env...)
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return exit.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "withemulators: %v\n", err)
		return 1
	}
}

// proxy serves a recording proxy to the emulator at target on a free
// 127.0.0.1 port until the process ends, and returns its endpoint.
func proxy(rec *awscall.Recorder, service awscall.Service, target string) (string, error) {
	h, err := rec.Proxy(service, target)
	if err != nil {
		return "", err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("recording proxy for %s: %w", service, err)
	}
	go func() { _ = http.Serve(l, h) }()
	return "http://" + l.Addr().String(), nil
}
