package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"opsq/api/wire"
)

// encodingJSON is what echo's c.JSON writes for v: encoding/json's Encoder, HTML escaping
// on, a newline at the end.
func encodingJSON(t testing.TB, v any) []byte {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestReservedJSONAsEncodingJSON(t *testing.T) {
	t.Parallel()
	in, prefix := "line one\n\"quoted\" <b>&amp;</b>\t\x00\x1f\x7f é \u2028\u2029 \xff\xfe end", "s3://bucket/a&b/"
	at := time.Date(2026, 11, 28, 14, 30, 5, 120_000_000, time.UTC)
	cases := map[string]wire.Reserved{
		"no chunks":  {Chunks: []wire.ReservedChunk{}},
		"nil chunks": {},
		"every field": {Chunks: []wire.ReservedChunk{{
			Token: "tok.1", SubmissionID: "123", ChunkIndex: 7, Input: &in, Metadata: `{"a": "<x>"}`,
			StrategicMetadata: map[string]wire.MetadataValue{"zeta": wire.Int(-3), "alpha": wire.String("x\"y<"), "ä": wire.Int(1 << 40)},
			Retries:           2, ExpiresAt: at, Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		}}},
		"prefix, empty metadata, whole seconds": {Chunks: []wire.ReservedChunk{
			{Token: "a", SubmissionID: "1", Prefix: &prefix, StrategicMetadata: map[string]wire.MetadataValue{}, ExpiresAt: at.Truncate(time.Second)},
			{Token: "b", SubmissionID: "2", ChunkIndex: 1 << 30, Input: new(string), ExpiresAt: at.Add(time.Nanosecond)},
		}},
	}
	for name, r := range cases {
		want, got := encodingJSON(t, r), appendReserved(nil, r)
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

// Any strings, as encoding/json writes them.
func FuzzReservedJSON(f *testing.F) {
	for _, s := range []string{"", "plain", "<&>", "\x00\x08\x0c\x1b", "é\u2028\xed\xa0\x80", strings.Repeat("\\\"", 3), "\xf0\x9f\x98"} {
		f.Add(s, s, int64(len(s)))
	}
	f.Fuzz(func(t *testing.T, s, key string, n int64) {
		r := wire.Reserved{Chunks: []wire.ReservedChunk{{
			Token: s, SubmissionID: key, ChunkIndex: n, Input: &s, Metadata: s,
			StrategicMetadata: map[string]wire.MetadataValue{key: wire.String(s), s: wire.Int(n)},
			Retries:           -n, ExpiresAt: time.Unix(0, n).UTC(), Traceparent: key,
		}}}
		if want, got := encodingJSON(t, r), appendReserved(nil, r); !bytes.Equal(got, want) {
			t.Errorf("got %q\nwant %q", got, want)
		}
	})
}

// BenchmarkReservedAnswer: a reserve's answer of 50 one-line chunks, as appendReserved
// writes it and as encoding/json did.
func BenchmarkReservedAnswer(b *testing.B) {
	r := wire.Reserved{}
	for i := range 50 {
		in := fmt.Sprintf(`{"op":"resize","image":"img-%06d.png","sizes":[64,128]}`, i)
		r.Chunks = append(r.Chunks, wire.ReservedChunk{
			Token: strings.Repeat("t", 96), SubmissionID: "7251099373285052416", ChunkIndex: int64(i), Input: &in,
			StrategicMetadata: map[string]wire.MetadataValue{"company_id": wire.Int(42)},
			ExpiresAt:         time.Date(2026, 11, 28, 14, 30, 5, 123456789, time.UTC),
		})
	}
	b.Run("appendReserved", func(b *testing.B) {
		for b.Loop() {
			appendReserved(nil, r)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			encodingJSON(b, r)
		}
	})
}

func TestTokenResultsJSONAsEncodingJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 14, 30, 5, 120_000_000, time.FixedZone("x", 3600))
	cases := map[string]wire.TokenResults{
		"nil":  {},
		"none": {Results: []wire.TokenResult{}},
		"some": {Results: []wire.TokenResult{
			{Token: "v3.abc-_=", Status: wire.StatusCompleted},
			{Token: "<&>\"\\\x01\u2028\xff", Status: wire.StatusUnknown},
			{Token: "e", Status: "extended", ExpiresAt: &at},
		}},
	}
	for name, r := range cases {
		if want, got := encodingJSON(t, r), appendTokenResults(nil, r); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

// Any tokens and statuses, as encoding/json writes them.
func FuzzTokenResultsJSON(f *testing.F) {
	for _, s := range []string{"", "v3.plain", "<&>", "\x00\x1f", "é\u2029\xed\xa0\x80"} {
		f.Add(s, s, int64(len(s)))
	}
	f.Fuzz(func(t *testing.T, token, status string, n int64) {
		at := time.Unix(0, n).UTC()
		r := wire.TokenResults{Results: []wire.TokenResult{{Token: token, Status: wire.TokenStatus(status)}, {Token: status, Status: wire.TokenStatus(token), ExpiresAt: &at}}}
		if want, got := encodingJSON(t, r), appendTokenResults(nil, r); !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}
