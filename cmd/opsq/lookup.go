package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/progress"
)

// This file holds the commands that look submissions up (results, cancel, list) and what
// every client command shares: the --url flag, argument parsing and error advice.

// urlDefault is where the client commands find opsq unless --url or OPSQ_URL says otherwise.
const urlDefault = "http://localhost:3999"

// clientFlags is the flag set of a client command, with the flags they all share.
type clientFlags struct {
	*flag.FlagSet
	url string
	key string
}

// client returns a client of --url that sends --key.
func (cf *clientFlags) client() *client.Client { return newClient(cf.url, cf.key) }

// newClient returns a client of url that sends key, if any, as Authorization: Bearer.
func newClient(url, key string) *client.Client {
	if key == "" {
		return client.New(url)
	}
	return client.New(url, client.WithKey(key))
}

// newClientFlags returns the flag set of command name, whose usage line ends with args
// and whose -h prints about and every flag.
func newClientFlags(name, args, about string, stderr io.Writer) *clientFlags {
	fs := flag.NewFlagSet("opsq "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := &clientFlags{FlagSet: fs}
	envString(fs, &cf.url, "url", "OPSQ_URL", urlDefault, "`URL` of opsq: an instance or a load balancer")
	cf.key = os.Getenv("OPSQ_KEY") // not shown as the flag's default: -h must not print it
	fs.Func("key", "API `key` sent as Authorization: Bearer (OPSQ_KEY); \"opsq keys create\" makes one", func(v string) error {
		cf.key = v
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\n%s\n\nflags:\n", strings.TrimSpace("opsq "+name+" [flags] "+args), about)
		fs.PrintDefaults()
	}
	return cf
}

// parse parses args, whose flags may come before or after the positional arguments, and
// checks that there are from minArgs to maxArgs of these. It returns flag.ErrHelp for -h
// and errUsage, after saying what is wrong, for bad arguments.
func (cf *clientFlags) parse(args []string, minArgs, maxArgs int) ([]string, error) {
	var pos []string
	for {
		if err := cf.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage // flag has printed the error and the usage
		}
		rest := cf.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...) // everything after "--" is an argument
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	switch {
	case len(pos) < minArgs:
		return nil, cf.usageError("missing arguments")
	case len(pos) > maxArgs:
		return nil, cf.usageError("too many arguments: %q", pos[maxArgs:])
	}
	if u, err := url.Parse(cf.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, cf.usageError("invalid --url %q: want an address such as %s", cf.url, urlDefault)
	}
	return pos, nil
}

// usageError prints a message and the usage, and returns errUsage.
func (cf *clientFlags) usageError(format string, args ...any) error {
	fmt.Fprintf(cf.Output(), "%s: %s\n\n", cf.Name(), fmt.Sprintf(format, args...))
	cf.Usage()
	return errUsage
}

// explain turns an error of the client into one that says what to do next. conflict, if
// not empty, is the advice for a 409 (state conflict) answer.
func explain(err error, baseURL, conflict string) error {
	var apiErr *client.Error
	var opErr *net.OpError
	var dnsErr *net.DNSError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return errors.New("interrupted")
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf(`cannot reach opsq at %s: is "opsq serve" (or "make run") running? set --url or OPSQ_URL`, baseURL)
	case errors.As(err, &dnsErr):
		return fmt.Errorf("cannot reach opsq at %s (%v): check --url or OPSQ_URL", baseURL, dnsErr)
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return fmt.Errorf("cannot reach opsq at %s (%v): check --url or OPSQ_URL, and that the server is running", baseURL, opErr)
	case errors.As(err, &opErr):
		return fmt.Errorf("the connection to opsq at %s broke (%v): retry, and see the server's log if it happens again", baseURL, opErr)
	case errors.As(err, &apiErr):
		return fmt.Errorf("%w; %s", err, advice(apiErr, baseURL, conflict))
	}
	return err
}

// advice says what to do after an error answer.
func advice(e *client.Error, baseURL, conflict string) string {
	switch {
	case strings.HasPrefix(e.Code, "http_") && (e.StatusCode == http.StatusBadGateway || e.StatusCode == http.StatusGatewayTimeout):
		return "a load balancer in front of opsq found no instance to answer (restarting?): retry in a moment"
	case strings.HasPrefix(e.Code, "http_") && e.StatusCode != http.StatusServiceUnavailable:
		return fmt.Sprintf("that is not an answer of opsq: is --url (%s) the address of opsq?", baseURL)
	case e.StatusCode == http.StatusUnauthorized:
		return `give an API key with --key or OPSQ_KEY ("opsq keys create" makes one; "opsq keys list" shows which are revoked or expired)`
	case e.StatusCode == http.StatusForbidden:
		return `use a key of a role that may do this ("opsq keys list" shows the roles)`
	case e.StatusCode == http.StatusNotFound && (e.Code == "unknown_route" || strings.HasPrefix(e.Message, "no route ")):
		// An unknown route, not an unknown id (servers before unknown_route said not_found).
		return fmt.Sprintf("the server has no such route: is --url (%s) the address of opsq, with no path after the port?", baseURL)
	case e.StatusCode == http.StatusNotFound:
		return `check the submission id ("opsq list" shows recent submissions)`
	case e.StatusCode == http.StatusConflict && conflict != "":
		return conflict
	case e.StatusCode == http.StatusRequestEntityTooLarge:
		return "a chunk or the body is over the server's limit (OPSQ_MAX_CHUNK_BYTES, OPSQ_MAX_BODY): split large chunks, or keep them in object storage (--prefix)"
	case e.StatusCode == http.StatusServiceUnavailable:
		return "the server is not ready (database unreachable, or migrations pending): retry in a moment, and see the server's log"
	case e.StatusCode >= 500:
		return "the server failed: see its log, then retry"
	case e.StatusCode >= 400:
		return "fix the request and retry"
	}
	return "retry"
}

func runResults(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newClientFlags("results", "ID", `Print the results of a submission as NDJSON, one line per chunk in chunk order, in
any state: {"chunk_index": 0, "output": "..."} for a completed chunk, else its state
({"chunk_index": 7, "state": "failed", "error": "..."}, "skipped" or "pending"). With
--follow, print each line as soon as its chunk and every chunk before it are finished,
and exit once the submission finishes (progress on stderr).`, stderr)
	outputOnly := fs.Bool("output-only", false, "print only the outputs, one per line (an output that holds a newline spans several lines; a chunk not completed prints an empty line)")
	follow := fs.Bool("follow", false, "print the lines as the chunks finish, until the submission finishes")
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	id := pos[0]
	w := bufio.NewWriterSize(stdout, 64<<10)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	var werr error // the first error writing to stdout
	results := fs.client().Results
	var line *progress.Line
	var lines int64
	var total int64 = -1 // the submission's chunks, when known
	if *follow {
		results = fs.client().ResultsFollow
		line = progress.NewLine(stderr)
		if st, err := fs.client().Status(ctx, id, 0); err == nil {
			total = st.ChunksTotal
		}
		line.Show(followProgress(id, 0, total))
	}
	err = results(ctx, id, func(r wire.Result) error {
		if *follow {
			lines++
			if !r.Completed() {
				line.Note("chunk %d: %s %s", r.ChunkIndex, r.State, oneLine(r.Error, 300))
			}
			line.Show(followProgress(id, lines, total))
		}
		if *outputOnly {
			if r.Output != nil {
				_, werr = w.WriteString(*r.Output)
			}
			if werr == nil {
				werr = w.WriteByte('\n')
			}
		} else {
			werr = enc.Encode(r)
		}
		if werr == nil && *follow {
			werr = w.Flush() // each line as it comes
		}
		return werr
	})
	if line != nil {
		line.Clear()
	}
	if werr == nil {
		werr = w.Flush()
	}
	if werr != nil {
		return fmt.Errorf("writing results: %w", werr)
	}
	return explain(err, fs.url, "")
}

func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newClientFlags("cancel", "ID", "Cancel a submission: its chunks are no longer handed out.", stderr)
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	id := pos[0]
	s, err := fs.client().Cancel(ctx, id)
	if err != nil {
		return explain(err, fs.url, fmt.Sprintf(`"opsq status %s" shows how it ended`, id))
	}
	fmt.Fprintf(stdout, "%s %s: %s / %s chunks done\n", s.State, s.ID, progress.GroupDigits(s.ChunksDone), progress.GroupDigits(s.ChunksTotal))
	return nil
}

// followProgress is the progress line of "opsq results --follow": the lines written so far
// of the submission's total (-1: not known), and the chunk it waits for, if any.
func followProgress(id string, lines, total int64) string {
	switch {
	case total < 0:
		return fmt.Sprintf("following the results of %s: %s lines, waiting for chunk %d", id, progress.GroupDigits(lines), lines)
	case lines < total:
		return fmt.Sprintf("following the results of %s: %s of %s lines, waiting for chunk %d", id, progress.GroupDigits(lines), progress.GroupDigits(total), lines)
	}
	return fmt.Sprintf("following the results of %s: all %s lines", id, progress.GroupDigits(total))
}

// stateNames lists the submission states, as opsq retry --all's --state accepts them.
func stateNames() string { return joinStates(wire.States()) }

// listStateNames lists what opsq list's --state accepts: the states, and the phases of
// in_progress (running, paused, scheduled).
func listStateNames() string { return joinStates(wire.ListStates()) }

func joinStates(states []wire.State) string {
	var names []string
	for _, s := range states {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

func runList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newClientFlags("list", "", "List submissions, newest first, by state and by strategic metadata.", stderr)
	var opts client.ListOptions
	state := fs.String("state", "", "only submissions in this `state`: "+listStateNames()+
		" (running, paused and scheduled split in_progress: scheduled ones wait for their --not-before)")
	// --meta rather than the API's key= and value=: --key is the API key, as in every
	// client command.
	fs.Func("meta", "only submissions whose strategic metadata has `key=value` (value=42: the integer 42; value='\"42\"': the string)", func(m string) error {
		k, v, ok := strings.Cut(m, "=")
		if !ok || k == "" || v == "" {
			return fmt.Errorf("want key=value, such as company_id=42")
		}
		opts.Key, opts.Value = k, v
		return nil
	})
	fs.IntVar(&opts.Limit, "limit", 0, "at most `N` submissions, up to 1000 (default: the server's, 100)")
	fs.StringVar(&opts.After, "after", "", "the page after submission `ID` (as the previous page says)")
	fs.StringVar(&opts.Tenant, "tenant", "", "only this `tenant`'s submissions (admin keys; a producer key sees its own tenant's only)")
	asJSON := fs.Bool("json", false, "print the JSON answer")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	opts.State = wire.State(*state)
	switch {
	case opts.State != "" && !slices.Contains(wire.ListStates(), opts.State):
		return fs.usageError("unknown --state %q: want one of %s", opts.State, listStateNames())
	case opts.Limit < 0 || opts.Limit > wire.MaxListLimit:
		return fs.usageError("--limit %d: want 1 to %d", opts.Limit, wire.MaxListLimit)
	}
	l, err := fs.client().List(ctx, opts)
	if err != nil {
		return explain(err, fs.url, "")
	}
	if *asJSON {
		return printJSON(stdout, l)
	}
	if err := formatList(stdout, l.Submissions, time.Now()); err != nil {
		return err
	}
	if l.NextAfter != nil {
		fmt.Fprintf(stderr, "more submissions: add --after %s for the next page\n", *l.NextAfter)
	}
	return nil
}

// formatList writes submissions as a table. An in-progress submission that hands nothing
// out says why beside its state, at now: "in_progress (paused)", or "in_progress
// (scheduled for T)" before its not_before.
func formatList(w io.Writer, subs []wire.Status, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tDONE/TOTAL\tCREATED")
	for _, s := range subs {
		state := string(s.State)
		switch s.Phase(now) {
		case wire.ListPaused:
			state += " (paused)"
		case wire.ListScheduled:
			state += " (scheduled for " + s.NotBefore.UTC().Format(timeLayout) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\n", s.ID, state, progress.GroupDigits(s.ChunksDone), progress.GroupDigits(s.ChunksTotal), s.CreatedAt.Format(timeLayout))
	}
	return tw.Flush()
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
