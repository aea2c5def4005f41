package main

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"opsq/api/wire"
)

func TestParseSubmitArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		check   func(t *testing.T, o submitOptions)
		wantErr error
	}{
		{
			name: "stdin by default",
			args: nil,
			check: func(t *testing.T, o submitOptions) {
				if o.input != "" || o.ndjson || o.wait || o.header.MaxRetries != nil {
					t.Errorf("got %+v; want stdin and no options", o)
				}
			},
		},
		{
			name: "every flag, file after the flags",
			args: []string{"--url", "http://q:1", "--ndjson", "--metadata", "m", "--meta", "company_id=42", "--meta", "mode=preview",
				"--priority", "-3", "--max-retries", "0", "--idempotency-key", "k", "--wait", "f.txt"},
			check: func(t *testing.T, o submitOptions) {
				h := o.header
				if o.url != "http://q:1" || !o.ndjson || !o.wait || o.input != "f.txt" || h.Metadata != "m" || h.Priority != -3 ||
					h.IdempotencyKey != "k" || h.MaxRetries == nil || *h.MaxRetries != 0 {
					t.Errorf("got %+v; want every flag set", o)
				}
				if v := h.StrategicMetadata["company_id"]; v.IsString() || v.Int64() != 42 {
					t.Errorf("got company_id %v; want the integer 42", v)
				}
				if v := h.StrategicMetadata["mode"]; !v.IsString() || v.Str() != "preview" {
					t.Errorf("got mode %v; want the string preview", v)
				}
			},
		},
		{
			name: "flags after the file",
			args: []string{"f.txt", "--wait"},
			check: func(t *testing.T, o submitOptions) {
				if o.input != "f.txt" || !o.wait {
					t.Errorf("got input %q, wait %v; want f.txt and true", o.input, o.wait)
				}
			},
		},
		{
			name: "dash after double dash",
			args: []string{"--", "-"},
			check: func(t *testing.T, o submitOptions) {
				if o.input != "-" {
					t.Errorf("got input %q; want -", o.input)
				}
			},
		},
		{
			name: "prefix mode",
			args: []string{"--prefix", "s3://b/run/", "--chunk-count", "1000"},
			check: func(t *testing.T, o submitOptions) {
				if o.header.Prefix != "s3://b/run/" || o.header.ChunkCount != 1000 {
					t.Errorf("got %+v; want prefix and 1000 chunks", o.header)
				}
			},
		},
		{
			name: "after, repeated and comma-separated, with a policy",
			args: []string{"--after", "12,34", "--after", "56", "--after-policy", "finished"},
			check: func(t *testing.T, o submitOptions) {
				if !slices.Equal(o.header.After, []string{"12", "34", "56"}) || o.header.AfterPolicy != "finished" {
					t.Errorf("got after %q, policy %q; want [12 34 56] and finished", o.header.After, o.header.AfterPolicy)
				}
			},
		},
		{name: "after not an id", args: []string{"--after", "12,x"}, wantErr: errUsage},
		{name: "after policy unknown", args: []string{"--after", "12", "--after-policy", "sometimes"}, wantErr: errUsage},
		{name: "after policy alone", args: []string{"--after-policy", "finished"}, wantErr: errUsage},
		{name: "help", args: []string{"-h"}, wantErr: flag.ErrHelp},
		{name: "two files", args: []string{"a", "b"}, wantErr: errUsage},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: errUsage},
		{name: "negative retries", args: []string{"--max-retries", "-1"}, wantErr: errUsage},
		{name: "meta without value", args: []string{"--meta", "k"}, wantErr: errUsage},
		{name: "meta twice", args: []string{"--meta", "k=1", "--meta", "k=2"}, wantErr: errUsage},
		{name: "prefix without count", args: []string{"--prefix", "s3://b/"}, wantErr: errUsage},
		{name: "count without prefix", args: []string{"--chunk-count", "3"}, wantErr: errUsage},
		{name: "prefix with a file", args: []string{"--prefix", "s3://b/", "--chunk-count", "3", "f.txt"}, wantErr: errUsage},
		{name: "bad url", args: []string{"--url", "localhost:3999"}, wantErr: errUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr strings.Builder
			o, err := parseSubmitArgs(tt.args, &stderr)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v; want %v (stderr: %s)", err, tt.wantErr, stderr.String())
			}
			if err != nil {
				if !strings.Contains(stderr.String(), "usage: opsq submit") {
					t.Errorf("stderr %q does not show the usage", stderr.String())
				}
				return
			}
			tt.check(t, o)
		})
	}
}

func TestSubmitHelpListsEveryFlag(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	if _, err := parseSubmitArgs([]string{"-h"}, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("got error %v; want flag.ErrHelp", err)
	}
	for _, f := range []string{"url", "ndjson", "metadata", "meta", "priority", "max-retries", "idempotency-key", "prefix", "chunk-count", "after", "after-policy", "wait"} {
		if !strings.Contains(stderr.String(), "-"+f+" ") && !strings.Contains(stderr.String(), "-"+f+"\n") {
			t.Errorf("usage does not list -%s:\n%s", f, stderr.String())
		}
	}
}

func TestParseMeta(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, key string
		want    wire.MetadataValue
		wantErr bool
	}{
		{in: "company_id=42", key: "company_id", want: wire.Int(42)},
		{in: "n=-7", key: "n", want: wire.Int(-7)},
		{in: "big=99999999999999999999", key: "big", want: wire.String("99999999999999999999")},
		{in: "mode=preview", key: "mode", want: wire.String("preview")},
		{in: "eq=a=b", key: "eq", want: wire.String("a=b")},
		{in: "empty=", key: "empty", want: wire.String("")},
		{in: "f=1.5", key: "f", want: wire.String("1.5")},
		{in: "novalue", wantErr: true},
		{in: "=v", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			k, v, err := parseMeta(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v; want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && (k != tt.key || v != tt.want) {
				t.Errorf("got %s=%v; want %s=%v", k, v, tt.key, tt.want)
			}
		})
	}
}

func TestErrRecorder(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	rec := &errRecorder{r: io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom))}
	if _, err := io.ReadAll(rec); !errors.Is(err, boom) {
		t.Fatalf("got %v; want boom", err)
	}
	if !errors.Is(rec.get(), boom) {
		t.Errorf("recorded %v; want boom", rec.get())
	}
	clean := &errRecorder{r: strings.NewReader("abc")}
	_, _ = io.ReadAll(clean)
	if clean.get() != nil {
		t.Errorf("recorded %v at EOF; want nil", clean.get())
	}
}
