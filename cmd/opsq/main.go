// Command opsq is the one opsq binary: the server, the migrations, and the producer and
// consumer command-line tools. Run "opsq help" for the list of commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand. run gets the arguments after the command's name.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"serve", "run an opsq instance", runServe},
	{"migrate", "apply or inspect database migrations (up|down|status)", runMigrate},
	{"submit", "submit chunks from a file or stdin, one per line (or NDJSON)", runSubmit},
	{"status", "show a submission's state, optionally waiting until it finishes", runStatus},
	{"results", "print a submission's results as NDJSON (--follow: as the chunks finish)", runResults},
	{"failures", "list a submission's failed chunks and their errors", runFailures},
	{"retry", "retry a submission's failed (or skipped) chunks", runRetry},
	{"pause", "stop handing out a submission's chunks", runPause},
	{"resume", "hand out a paused submission's chunks again", runResume},
	{"cancel", "cancel a submission", runCancel},
	{"list", "list submissions by state and strategic metadata", runList},
	{"bench", "measure opsq end to end against the design's targets", runBench},
	{"work", "consume chunks: run a command once per reserved chunk", runWork},
	{"throttle", "throttle a strategic value cluster-wide, or --lift a throttle", runThrottle},
	{"schedules", "manage schedules: submissions that start themselves (create|list|show|pause|resume|trigger|backfill|delete)", runSchedules},
	{"claims", "show the cluster: instances, their shards, unclaimed shards", runClaims},
	{"keys", "create, list and revoke API keys (create|list|revoke)", runKeys},
	{"tenants", "set and list the tenants' quotas (set|list)", runTenants},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		default:
			fmt.Fprintf(stderr, "opsq %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "opsq: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// errUsage reports bad command-line arguments; the command has already said what is wrong.
var errUsage = errors.New("usage")

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: opsq <command> [flags] [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "opsq <command> -h" for a command's flags.`)
}
