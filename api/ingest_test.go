package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"opsq/api/wire"
)

// TestNDJSONMillionChunksFlatMemory streams a 1 000 000-chunk NDJSON submission of about
// 100 MB through the API and checks that the heap of the process (server and client both)
// grows by far less than the body: the body is streamed into COPY, never held.
func TestNDJSONMillionChunksFlatMemory(t *testing.T) {
	e := setup(t, Config{})
	const chunks = 1_000_000
	const heapBound = 48 << 20
	payload := strings.Repeat("x", 90)

	pr, pw := io.Pipe()
	go func() {
		w := bufio.NewWriterSize(pw, 64<<10)
		fmt.Fprintln(w, `{"metadata": "flat memory", "strategic_metadata": {"test": "ingest"}}`)
		for i := range chunks {
			fmt.Fprintf(w, "\"%07d %s\"\n", i, payload)
		}
		pw.CloseWithError(w.Flush())
	}()

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
			}
		}
	}()

	started := time.Now()
	resp, err := http.Post(e.URL+"/v1/submissions", "application/x-ndjson", pr)
	close(stop)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST: %d %s; want 201", resp.StatusCode, b)
	}
	var created wire.Created
	if err := json.NewDecoder(resp.Body).Decode(&created); err != nil {
		t.Fatal(err)
	}
	if created.ChunksTotal != chunks {
		t.Fatalf("chunks_total %d; want %d", created.ChunksTotal, chunks)
	}
	var n int64
	if err := e.Pool.QueryRow(t.Context(), "SELECT count(*) FROM opsq.chunks").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != chunks {
		t.Fatalf("%d chunk rows; want %d", n, chunks)
	}
	growth := int64(peak.Load()) - int64(base.HeapInuse)
	t.Logf("1M chunks (%d MB body) in %s; heap in use grew by %.1f MiB at most",
		chunks*(len(payload)+11)>>20, time.Since(started).Round(time.Millisecond), float64(growth)/(1<<20))
	if growth > heapBound {
		t.Fatalf("heap grew by %d MiB during the upload; want under %d MiB (is the body buffered?)", growth>>20, heapBound>>20)
	}
}
