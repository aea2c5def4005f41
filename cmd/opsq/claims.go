package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"opsq/api/wire"
	"opsq/cmd/opsq/progress"
)

func runClaims(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newClientFlags("claims", "", `Show the cluster: one line per instance (its advertised URL, the age of its heartbeat,
whether it is draining, its shards and their reservations in flight), then the shards
nobody holds.`, stderr)
	asJSON := fs.Bool("json", false, "print the JSON answer")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	cl, err := fs.client().Cluster(ctx)
	if err != nil {
		return explainConsumerAPI(err, fs.url)
	}
	if *asJSON {
		return printJSON(stdout, cl)
	}
	return formatClaims(stdout, cl, time.Now())
}

// formatClaims writes the cluster as a table, then the unclaimed shards; now is used for
// heartbeat ages.
func formatClaims(w io.Writer, cl wire.Cluster, now time.Time) error {
	claimed := 0
	for _, in := range cl.Instances {
		claimed += len(in.Shards)
	}
	instances := fmt.Sprintf("%d instances", len(cl.Instances))
	if len(cl.Instances) == 1 {
		instances = "1 instance"
	}
	fmt.Fprintf(w, "%d shards: %d claimed by %s, %d unclaimed\n\n", cl.ShardCount, claimed, instances, len(cl.Unclaimed))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tURL\tHEARTBEAT\tDRAINING\tSHARDS\tINFLIGHT\tSHARD LIST")
	for _, in := range cl.Instances {
		shards := make([]int, len(in.Shards))
		inflight, draining := 0, 0
		for i, s := range in.Shards {
			shards[i] = s.Shard
			inflight += s.Inflight
			if s.State == wire.ClaimDraining {
				draining++
			}
		}
		heartbeat := "-" // a claimant no longer registered
		if in.HeartbeatAt != nil {
			heartbeat = progress.Duration(max(now.Sub(*in.HeartbeatAt), 0)) + " ago"
		}
		drain := "no"
		switch {
		case in.Draining:
			drain = "yes"
		case draining > 0:
			drain = fmt.Sprintf("%d of %d shards", draining, len(shards))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", in.ID, in.AdvertiseURL, heartbeat, drain, len(shards), inflight, compactRanges(shards))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nunclaimed: %s\n", compactRanges(cl.Unclaimed))
	return err
}

// compactRanges writes shard numbers as sorted ranges: "0-5,9,12-20"; "-" for none.
func compactRanges(shards []int) string {
	if len(shards) == 0 {
		return "-"
	}
	s := slices.Clone(shards)
	slices.Sort(s)
	s = slices.Compact(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return b.String()
}
