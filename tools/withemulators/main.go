// Command withemulators starts the DynamoDB and SQS emulators on free
// 127.0.0.1 ports, runs a command with LAMBDASAGA_DYNAMODB_ENDPOINT and
// LAMBDASAGA_SQS_ENDPOINT set, and stops the emulators afterwards, also
// when the command fails or the run is interrupted. It exits with the
// command's exit code.
//
//	go run ./tools/withemulators -- go test ./...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/lambdasaga/lambdasaga/internal/emulators"
)

func main() { os.Exit(run()) }

func run() int {
	dir := flag.String("dir", "tools/emulators", "where the emulators are installed (npm ci)")
	logFile := flag.String("log", "", "write the emulators' output to this file")
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

	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"LAMBDASAGA_DYNAMODB_ENDPOINT="+emu.DynamoDBEndpoint,
		"LAMBDASAGA_SQS_ENDPOINT="+emu.SQSEndpoint,
	)
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
