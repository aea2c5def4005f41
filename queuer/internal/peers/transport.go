package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"opsq/queuer/internal/handout"
	"opsq/queuer/opsqtype"
)

// The peer transport: the three requests one instance makes of another — a reserve for a
// consumer it has no work for, an extend of chunks the other holds, and a give-back of
// chunks a forwarded reserve took for a consumer that left — over the routes every
// instance serves, marked forwarded and signed (forwardsig.go), through Router.peerHTTP
// with the bounds of DESIGN.md §8. It speaks the REST API's JSON, and nothing else of it.

// reserveBody is a forwarded reserve: no wait (the peer answers at once) and no tenants
// (the caller's identity, signed, confines it at the peer).
type reserveBody struct {
	Max      int             `json:"max"`
	Strategy json.RawMessage `json:"strategy"`
	Lease    string          `json:"lease"`
	Consumer string          `json:"consumer,omitempty"`
}

// reserve forwards req to the instance to at baseURL and returns the chunks it handed
// out, read straight into the engine's form.
func (r *Router) reserve(ctx context.Context, to, baseURL string, req handout.Request) ([]handout.Chunk, error) {
	strat, err := json.Marshal(req.Strategy)
	if err != nil {
		return nil, fmt.Errorf("encoding the strategy to forward: %w", err)
	}
	var out struct {
		Chunks []handout.Chunk `json:"chunks"`
	}
	err = r.post(ctx, to, baseURL, "/v1/reserve", reserveBody{Max: req.Max, Strategy: strat, Lease: req.Lease.String(), Consumer: req.Consumer}, &out)
	return out.Chunks, err
}

// extend forwards an extend of tokens to the instance to at baseURL.
func (r *Router) extend(ctx context.Context, to, baseURL string, tokens []string, lease time.Duration) ([]opsqtype.TokenResult, error) {
	var out struct {
		Results []opsqtype.TokenResult `json:"results"`
	}
	in := struct {
		Tokens []string `json:"tokens"`
		Lease  string   `json:"lease"`
	}{tokens, lease.String()}
	if err := r.post(ctx, to, baseURL, "/v1/extend", in, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != len(tokens) {
		return nil, fmt.Errorf("%s answered %d results for %d tokens", baseURL, len(out.Results), len(tokens))
	}
	return out.Results, nil
}

// post sends in, as JSON, to path of the instance to at baseURL (the destination its
// signature names), and decodes a 2xx answer into
// out (nil: the answer is dropped). Another status is an error naming it, with the
// peer's message; at most peerMaxAnswerBytes of an answer are read, and an answer past
// them is an error.
func (r *Router) post(ctx context.Context, to, baseURL, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("a request to %s: %w", baseURL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(opsqtype.ForwardedToHeader, to)
	resp, err := r.peerHTTP.Do(req)
	if err != nil {
		return err // a *url.Error naming the method and URL
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return peerError(baseURL, path, resp)
	}
	if out == nil {
		return nil
	}
	limited := &io.LimitedReader{R: resp.Body, N: peerMaxAnswerBytes + 1}
	if err := json.NewDecoder(limited).Decode(out); err != nil {
		if limited.N <= 0 {
			return fmt.Errorf("%w: %s%s answered more than %d bytes", errAnswerTooLarge, baseURL, path, peerMaxAnswerBytes)
		}
		return fmt.Errorf("%s%s answered what is not its answer: %w", baseURL, path, err)
	}
	return nil
}

// Errors of the transport that its tests and callers tell apart.
var (
	// errPeerStatus marks an answer of a status other than 2xx.
	errPeerStatus = errors.New("peer answered an error")
	// errAnswerTooLarge marks an answer past peerMaxAnswerBytes.
	errAnswerTooLarge = errors.New("peer's answer too large")
)

// peerError is the error of a peer's answer of another status than 2xx, with the message
// of its error body when it has one (the first 4 KiB are read).
func peerError(baseURL, path string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
		msg = e.Error.Code + ": " + e.Error.Message
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return fmt.Errorf("%w: %s%s answered %d: %s", errPeerStatus, baseURL, path, resp.StatusCode, msg)
}
