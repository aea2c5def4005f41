//go:build linux

package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

// TestE2EHaproxy runs opsq as it is deployed (DESIGN.md §7, docker-compose.yml): three
// instances behind haproxy, producers and consumers talking only to haproxy. 10 000 chunks
// in 50 submissions are submitted by 5 producers while 16 consumers complete them.
func TestE2EHaproxy(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatalf("haproxy is not on the PATH: install haproxy (apt-get install haproxy); .ci/run installs it")
	}
	c := clustertest.New(t, opsqBinary, pgtest.NewDB(t))
	insts := c.StartN(3)
	lb := startHaproxy(t, bin, c, insts)
	lbc := client.New(lb, client.WithHTTPClient(c.HTTP))
	ctx := t.Context()
	l := clustertest.NewLedger()

	cs := clustertest.RunConsumers(t, c.HTTP, l, clustertest.ConsumerConfig{N: 16, Targets: clustertest.NewTargets(lb)})
	const producers, perProducer, chunks = 5, 10, 200
	ids := make([]string, producers*perProducer)
	errs := make(chan error, producers)
	var wg sync.WaitGroup
	start := time.Now()
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := make([]string, chunks)
			for i := range in {
				in[i] = fmt.Sprint(i)
			}
			for j := range perProducer {
				created, err := lbc.Submit(ctx, wire.Submission{Chunks: in})
				if err != nil {
					errs <- fmt.Errorf("producer %d, submission %d: %w", p, j, err)
					return
				}
				l.AddSubmission(created.ID, chunks)
				ids[p*perProducer+j] = created.ID
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	took := c.WaitCompleted(120*time.Second, l)
	cs.Stop()
	t.Logf("10 000 chunks in 50 submissions completed through haproxy %s after the first submission (%s after the last)",
		time.Since(start).Round(time.Millisecond), took.Round(time.Millisecond))

	for _, id := range ids {
		st, err := lbc.Status(ctx, id, 0)
		if err != nil {
			t.Fatalf("status of %s through haproxy: %v", id, err)
		}
		if st.State != wire.StateCompleted || st.ChunksDone != chunks {
			t.Errorf("submission %s: %s with %d of %d chunks done; want completed with all", id, st.State, st.ChunksDone, chunks)
		}
	}
	st := l.Check(t, ctx, c.Pool)
	if st.Duplicates > 0 {
		t.Errorf("%d chunks handed out more than once with healthy instances; want none", st.Redelivered)
	}
	t.Logf("consumer request errors: %d", cs.Errors.Load())
}

// startHaproxy starts haproxy in front of insts (round robin, health-checked on /readyz,
// timeouts long enough for long polls) and returns its URL once it answers.
func startHaproxy(t *testing.T, bin string, c *clustertest.Cluster, insts []*clustertest.Instance) string {
	t.Helper()
	// Held until the end of the test, so that no other test's server takes it (haproxy
	// binds it with SO_REUSEADDR, as opsq does: see clustertest.Port).
	port, err := clustertest.HoldPort()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(port.Close)
	var servers strings.Builder
	for _, inst := range insts {
		fmt.Fprintf(&servers, "    server %s %s check\n", inst.ID, strings.TrimPrefix(inst.URL, "http://"))
	}
	cfg := fmt.Sprintf(`global
    maxconn 2000

defaults
    mode http
    timeout connect 5s
    timeout client 75s
    timeout server 75s
    timeout http-keep-alive 75s
    timeout check 2s

frontend opsq
    bind 127.0.0.1:%d
    default_backend instances

backend instances
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 500ms fall 2 rise 1
%s`, port.Num, servers.String())
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c -f %s: %v\n%s\n%s", cfgPath, err, out, cfg)
	}
	logPath := filepath.Join(dir, "haproxy.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-f", cfgPath, "-db")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("starting haproxy: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("---- haproxy log ----\n%s", clustertest.Tail(logPath, 100))
		}
	})

	lb := "http://" + port.Addr()
	clustertest.PollUntil(t, 20*time.Second, "haproxy to answer /readyz", func() string {
		select {
		case <-exited:
			t.Fatalf("haproxy exited: %s", clustertest.Tail(logPath, 30))
		default:
		}
		resp, err := c.HTTP.Get(lb + "/readyz")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return resp.Status
		}
		return ""
	})
	return lb
}
