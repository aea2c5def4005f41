package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"opsq/api/wire"
	"opsq/cmd/opsq/clustertest"
	"opsq/queuer"
	"opsq/sql/pgtest"
)

// recorder keeps the last request it sends, as sent (headers and body).
type recorder struct {
	base   http.RoundTripper
	header http.Header
	body   []byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body.Close()
	r.header, r.body = req.Header.Clone(), b
	req.Body = io.NopCloser(bytes.NewReader(b))
	return r.base.RoundTrip(req)
}

// TestForwardedReplayToAnotherInstanceRefused (issue 31, finding 6), on real instances: a
// reserve forwarded to instance 2, captured on its way and replayed without a key to
// instance 1 (which never saw its nonce), is refused with 401 forwarded_signature and
// hands out nothing; sent again to instance 2, it is a replay, refused too.
func TestForwardedReplayToAnotherInstanceRefused(t *testing.T) {
	c := clustertest.New(t, opsqBinary, pgtest.NewDB(t))
	insts := c.StartN(2)
	ctx := t.Context()
	if _, err := insts[0].Client.Submit(ctx, wire.Submission{Chunks: strings.Split(strings.Repeat("x,", 39)+"x", ",")}); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{base: c.HTTP.Transport}
	if rec.base == nil {
		rec.base = http.DefaultTransport
	}
	signing, err := queuer.SigningTransport(ctx, c.Pool, insts[0].ID, rec)
	if err != nil {
		t.Fatal(err)
	}
	send := func(hc *http.Client, url string, h http.Header, body []byte) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/reserve", bytes.NewReader(body))
		req.Header = h.Clone()
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	h := http.Header{"Content-Type": {"application/json"}, wire.ForwardedToHeader: {insts[1].ID}}
	status, body := send(&http.Client{Transport: signing}, insts[1].URL, h, []byte(`{"max": 3}`))
	var got wire.Reserved
	if status != http.StatusOK || json.Unmarshal(body, &got) != nil || len(got.Chunks) == 0 {
		t.Fatalf("the forward to instance 2: %d %s; want its chunks", status, body)
	}
	for _, tc := range []struct{ name, url, want string }{
		{"replayed to instance 1", insts[0].URL, "signed for the instance"},
		{"replayed to instance 2", insts[1].URL, "replay"},
	} {
		status, body := send(c.HTTP, tc.url, rec.header, rec.body)
		if status != http.StatusUnauthorized || !bytes.Contains(body, []byte("forwarded_signature")) || !bytes.Contains(body, []byte(tc.want)) {
			t.Errorf("%s: %d %s; want 401 forwarded_signature (%s)", tc.name, status, body, tc.want)
		}
	}
}
