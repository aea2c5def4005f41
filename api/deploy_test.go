package api

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The operator's files under deploy/: the Grafana dashboard and the Prometheus alerts use
// only metrics a running instance exports, and the alerts pass promtool.

const (
	dashboardFile = "../deploy/grafana/opsq.json"
	alertsFile    = "../deploy/prometheus/alerts.yml"
)

var (
	metricName = regexp.MustCompile(`\b(?:opsq|process|go)_[a-z0-9_]*[a-z0-9]\b`)
	routeLabel = regexp.MustCompile(`route="([^"]+)"`)
)

// dashboardExprs returns every PromQL expression of the dashboard's panels.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	if len(out) < 10 {
		t.Fatalf("%s: %d expressions; the dashboard was not read", dashboardFile, len(out))
	}
	return out
}

func TestDeployMetricsExported(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	postSubmission(t, e, "application/json", `{"chunks": ["a"]}`)
	body := "\n" + scrape(t, e)
	alerts, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string][]string{dashboardFile: dashboardExprs(t), alertsFile: {string(alerts)}}
	routes := registeredRoutes(e.H)
	checked := 0
	for file, texts := range sources {
		for _, text := range texts {
			for _, name := range metricName.FindAllString(text, -1) {
				checked++
				if !strings.Contains(body, "\n"+name+" ") && !strings.Contains(body, "\n"+name+"{") {
					t.Errorf("%s uses %s; a running instance does not export it", file, name)
				}
			}
			for _, m := range routeLabel.FindAllStringSubmatch(text, -1) {
				if !slices.ContainsFunc(routes, func(r string) bool { return strings.HasSuffix(r, " "+m[1]) }) {
					t.Errorf("%s uses route=%q; the server has no such route", file, m[1])
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d metric uses; the files were not read", checked)
	}
}

// TestDeployAlertsPromtool runs promtool check rules on the alerts. It fails, never skips,
// when promtool is missing.
func TestDeployAlertsPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found on the PATH: install it to check %s (Debian: apt-get install prometheus; .ci/run does)", alertsFile)
	}
	out, err := exec.CommandContext(t.Context(), promtool, "check", "rules", alertsFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", alertsFile, err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool check rules %s: %s; want SUCCESS", alertsFile, out)
	}
}
