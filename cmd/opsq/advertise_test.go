package main

import (
	"strings"
	"testing"
)

func TestCheckAdvertiseURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"http://opsq-1.internal:3999", "https://10.0.0.7:443", "http://[::1]:3999", "http://host", "http://host:3999/"} {
		if err := checkAdvertiseURL(u); err != nil {
			t.Errorf("checkAdvertiseURL(%q) = %v; want nil", u, err)
		}
	}
	for _, u := range []string{"", "localhost:3999", "opsq-1.internal", "/v1", "ftp://host:21", "http://", "http://:3999",
		"http://user:secret@host:3999", "http://host:3999?x=1", "http://host:3999#f", "http://host:3999/%zz", "tcp://host:1"} {
		err := checkAdvertiseURL(u)
		if err == nil || !strings.Contains(err.Error(), "OPSQ_ADVERTISE_URL") {
			t.Errorf("checkAdvertiseURL(%q) = %v; want an error naming OPSQ_ADVERTISE_URL", u, err)
		}
	}
}

// TestServeRefusesRelativeAdvertiseURL: the check runs at start, before the database.
func TestServeRefusesRelativeAdvertiseURL(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	err := runServe(t.Context(), []string{"--advertise-url", "opsq-1:3999", "--database-url", "postgres://nowhere.invalid/x"}, &stderr, &stderr)
	if err == nil || !strings.Contains(err.Error(), "advertise URL") {
		t.Errorf("opsq serve --advertise-url opsq-1:3999: got %v; want the advertise URL refused", err)
	}
}

// TestServeRefusesAnswerBoundsThatCannotBeForwarded: an instance reads at most 16 MiB of a
// forwarded reserve's answer, so the reserve bound may not be raised past it, and one chunk
// written as JSON must fit in an answer. The checks run at start, before the database.
func TestServeRefusesAnswerBoundsThatCannotBeForwarded(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-reserve-bytes", "33554432"}, "OPSQ_MAX_RESERVE_BYTES"},
		{[]string{"--max-chunk-bytes", "4194304"}, "OPSQ_MAX_CHUNK_BYTES"},
		{[]string{"--max-reserve-bytes", "4194304"}, "OPSQ_MAX_CHUNK_BYTES"}, // the default 1 MiB chunk no longer fits
	} {
		var stderr strings.Builder
		err := runServe(t.Context(), append(c.args, "--database-url", "postgres://nowhere.invalid/x"), &stderr, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("opsq serve %s: got %v; want an error naming %s", strings.Join(c.args, " "), err, c.want)
		}
	}
}
