package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"opsq/api/wire"
)

// rawReserver sends the parked workload's reserves as cheaply as a consumer can: a
// request written by hand on a connection of its own, the answer read with
// http.ReadResponse on the caller's goroutine. Go's http.Client keeps two goroutines and
// its buffers per connection, and 10 000 of them share the machine's cores with the
// instances being measured; a real deployment's consumers run elsewhere. The answers are
// the API's own (status, headers, JSON body), checked as the client library checks them.
type rawReserver struct {
	addr string // host:port
	head []byte // the request line and headers, up to Content-Length's value
}

// newRawReserver returns a reserver for the instance at base (http://host:port), sending
// key, if not empty, as its API key.
func newRawReserver(base, key string) (*rawReserver, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("raw reserves speak plain HTTP, not %s (%s)", u.Scheme, base)
	}
	head := fmt.Appendf(nil, "POST /v1/reserve HTTP/1.1\r\nHost: %s\r\nUser-Agent: opsq-bench\r\nContent-Type: application/json\r\n", u.Host)
	if key != "" {
		head = fmt.Appendf(head, "Authorization: Bearer %s\r\n", key)
	}
	return &rawReserver{addr: u.Host, head: append(head, "Content-Length: "...)}, nil
}

// reserve sends req and waits for its answer (at most until ctx ends). sent is called
// once the request is written. The connection is closed by the caller's call of the
// returned close, so that its cost falls after the answer is timed.
func (r *rawReserver) reserve(ctx context.Context, req wire.ReserveRequest, sent func()) (chunks []wire.ReservedChunk, closeConn func(), err error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return nil, nil, err
	}
	closeConn = func() { _ = conn.Close() }
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	msg := fmt.Appendf(append([]byte(nil), r.head...), "%d\r\n\r\n", len(body))
	if _, err := conn.Write(append(msg, body...)); err != nil {
		closeConn()
		return nil, nil, err
	}
	sent()
	res, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), nil)
	if err != nil {
		closeConn()
		return nil, nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		closeConn()
		return nil, nil, err
	}
	if res.StatusCode != http.StatusOK {
		closeConn()
		return nil, nil, fmt.Errorf("reserve: %s: %s", res.Status, data)
	}
	var out wire.Reserved
	if err := json.Unmarshal(data, &out); err != nil {
		closeConn()
		return nil, nil, fmt.Errorf("reserve: decoding the answer: %w", err)
	}
	return out.Chunks, closeConn, nil
}
