//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

// The alerts of deploy/prometheus/alerts.yml against real instances: a real Prometheus
// scrapes two "opsq serve" processes (OPSQ_AUTH=required, a key of role metrics, job
// "opsq", every second) with the rules loaded; one is killed (SIGKILL) and the other
// frozen (SIGSTOP), and OpsqInstanceDown must fire for each — what an audit found no rule
// did.

const alertsRules = "../../deploy/prometheus/alerts.yml"

// prometheusServer is a Prometheus process of a test, on a held port, killed at cleanup.
type prometheusServer struct {
	URL string
	hc  *http.Client
}

// startPrometheus starts Prometheus with config (YAML) on a held loopback port and waits
// until it is ready. It fails the test, never skips it, when prometheus is missing.
func startPrometheus(t *testing.T, config string) *prometheusServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus not found on the PATH: install Debian's prometheus package (apt-get install prometheus; .ci/run does) to test the alerts against real instances")
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	// The port stays held (bound, not listening) while Prometheus runs: its Go listener
	// shares it (SO_REUSEADDR), and nobody else can take it meanwhile.
	port, err := clustertest.HoldPort()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(port.Close)
	logPath := filepath.Join(dir, "prometheus.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+port.Addr(),
		"--log.level=info")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("---- log of prometheus ----\n%s", clustertest.Tail(logPath, 3000))
		}
	})
	p := &prometheusServer{URL: "http://" + port.Addr(), hc: &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true},
	}}
	pgtest.WaitFor(t, 60*time.Second, "prometheus ready", func() string {
		select {
		case <-exited:
			t.Fatalf("prometheus exited before it was ready:\n%s", clustertest.Tail(logPath, 3000))
		default:
		}
		resp, err := p.hc.Get(p.URL + "/-/ready")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return resp.Status
		}
		return ""
	})
	return p
}

// get decodes the data of a Prometheus API answer.
func (p *prometheusServer) get(path string, data any) error {
	resp, err := p.hc.Get(p.URL + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("GET %s: %d: %w", path, resp.StatusCode, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("GET %s: %s %s", path, body.Status, body.Error)
	}
	return json.Unmarshal(body.Data, data)
}

// promAlert is one alert of GET /api/v1/alerts.
type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func (p *prometheusServer) alerts() ([]promAlert, error) {
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	err := p.get("/api/v1/alerts", &data)
	return data.Alerts, err
}

// firing reports the instances for which alert name fires.
func (p *prometheusServer) firing(name string) ([]string, error) {
	as, err := p.alerts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range as {
		if a.Labels["alertname"] == name && a.State == "firing" {
			out = append(out, a.Labels["instance"])
		}
	}
	slices.Sort(out)
	return out, nil
}

func TestAlertsFireOnCrashAndFreeze(t *testing.T) {
	dbURL := pgtest.NewDB(t)
	adminKey := createKey(t, dbURL, "test-admin", "admin")
	metricsKey := createKey(t, dbURL, "test-metrics", "metrics")
	c := clustertest.New(t, opsqBinary, dbURL)
	c.Env = append(c.Env, "OPSQ_AUTH=required")
	c.Key = adminKey
	insts := c.StartN(2)
	killed, frozen := insts[0], insts[1]
	target := func(inst *clustertest.Instance) string {
		u, err := url.Parse(inst.URL)
		if err != nil {
			t.Fatal(err)
		}
		return u.Host
	}

	rules, err := filepath.Abs(alertsRules)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "metrics.key")
	if err := os.WriteFile(keyPath, []byte(metricsKey), 0o600); err != nil {
		t.Fatal(err)
	}
	// Every second, so that the test takes seconds; alerts.yml assumes 15s in production.
	prom := startPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: opsq
    authorization:
      type: Bearer
      credentials_file: %q
    static_configs:
      - targets: [%q, %q]
`, rules, keyPath, target(killed), target(frozen)))

	// Both targets are scraped, with the key, and nothing is down.
	pgtest.WaitFor(t, 60*time.Second, "prometheus scraping both instances", func() string {
		var data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		}
		if err := prom.get("/api/v1/query?query="+url.QueryEscape(`up{job="opsq"} == 1`), &data); err != nil {
			return err.Error()
		}
		if len(data.Result) != 2 {
			return fmt.Sprintf("%d targets up", len(data.Result))
		}
		return ""
	})
	var rulesLoaded struct {
		Groups []struct {
			Rules []struct {
				Name string `json:"name"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := prom.get("/api/v1/rules", &rulesLoaded); err != nil {
		t.Fatal(err)
	}
	if n := len(rulesLoaded.Groups); n == 0 || len(rulesLoaded.Groups[0].Rules) < 10 {
		t.Fatalf("prometheus loaded %+v from %s; want its rules", rulesLoaded, rules)
	}
	if down, err := prom.firing("OpsqInstanceDown"); err != nil || len(down) > 0 {
		t.Fatalf("OpsqInstanceDown firing for %v (%v) with both instances up; want none", down, err)
	}

	// The crash.
	killed.Kill()
	took := pgtest.WaitFor(t, 60*time.Second, "OpsqInstanceDown firing for the killed "+killed.ID, func() string {
		down, err := prom.firing("OpsqInstanceDown")
		if err != nil {
			return err.Error()
		}
		if !slices.Equal(down, []string{target(killed)}) {
			return fmt.Sprintf("firing for %v", down)
		}
		return ""
	})
	t.Logf("OpsqInstanceDown fired %s after %s was killed", took.Round(time.Millisecond), killed.ID)

	// The freeze: alive, its port open, answering nothing.
	frozen.Signal(syscall.SIGSTOP)
	took = pgtest.WaitFor(t, 60*time.Second, "OpsqInstanceDown firing for the frozen "+frozen.ID, func() string {
		down, err := prom.firing("OpsqInstanceDown")
		if err != nil {
			return err.Error()
		}
		if !slices.Contains(down, target(frozen)) {
			return fmt.Sprintf("firing for %v", down)
		}
		return ""
	})
	frozen.Signal(syscall.SIGCONT)
	t.Logf("OpsqInstanceDown fired %s after %s was frozen", took.Round(time.Millisecond), frozen.ID)
}
