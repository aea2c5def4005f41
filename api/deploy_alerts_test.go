package api

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const alertsTestFile = "../deploy/prometheus/alerts_test.yml"

// promtoolPath returns promtool's path; it fails the test, never skips it, when promtool is
// missing.
func promtoolPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found on the PATH: install Debian's prometheus package (apt-get install prometheus; .ci/run does) to test %s", alertsFile)
	}
	return p
}

// TestDeployAlertsRulesTest runs promtool test rules on deploy/prometheus/alerts_test.yml:
// each rule fires on the faults it is for (a crashed, a frozen, a vanished instance, shards
// unserved, a backlog that stops moving, a database outage…) and not on what it is not.
func TestDeployAlertsRulesTest(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), promtoolPath(t), "test", "rules", alertsTestFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules %s: %v\n%s", alertsTestFile, err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool test rules %s: %s; want SUCCESS", alertsTestFile, out)
	}
}

// TestDeployAlertsEachTested: every rule of alerts.yml has a test case in alerts_test.yml
// where it fires, and every rule has a summary and a description for the operator.
func TestDeployAlertsEachTested(t *testing.T) {
	t.Parallel()
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	for file, into := range map[string]any{alertsFile: &rules, alertsTestFile: &tests} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	var fired []string
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired = append(fired, a.Alertname)
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if !slices.Contains(fired, r.Alert) {
				t.Errorf("%s: no case of %s where %s fires", alertsTestFile, r.Alert, r.Alert)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: %s has no summary or no description saying what to do", alertsFile, r.Alert)
			}
		}
	}
	if n < 10 {
		t.Errorf("%s: %d rules; the file was not read", alertsFile, n)
	}
}

// TestDeployDashboardIngestPost: the ingest panel times POST /v1/submissions only; the
// route also serves the list of submissions (GET).
func TestDeployDashboardIngestPost(t *testing.T) {
	t.Parallel()
	found := 0
	for _, expr := range dashboardExprs(t) {
		if !strings.Contains(expr, `route="/v1/submissions"`) {
			continue
		}
		found++
		if !strings.Contains(expr, `method="POST"`) {
			t.Errorf("%s: %s; want it filtered to method=\"POST\"", dashboardFile, expr)
		}
	}
	if found == 0 {
		t.Errorf("%s: no expression of route /v1/submissions; want the ingest panel's", dashboardFile)
	}
}

// TestDeployPrometheusExample: the example configuration is valid for Prometheus and
// scrapes the instances as alerts.yml expects (job "opsq", every 15s).
func TestDeployPrometheusExample(t *testing.T) {
	t.Parallel()
	const file = "../deploy/prometheus/prometheus.example.yml"
	out, err := exec.CommandContext(t.Context(), promtoolPath(t), "check", "config", "--syntax-only", file).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config %s: %v\n%s", file, err, out)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Global struct {
			ScrapeInterval     string `yaml:"scrape_interval"`
			EvaluationInterval string `yaml:"evaluation_interval"`
		} `yaml:"global"`
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName string `yaml:"job_name"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if cfg.Global.ScrapeInterval != "15s" || cfg.Global.EvaluationInterval != "15s" {
		t.Errorf("%s: scrape_interval %q, evaluation_interval %q; want the 15s alerts.yml assumes", file, cfg.Global.ScrapeInterval, cfg.Global.EvaluationInterval)
	}
	if !slices.Contains(cfg.RuleFiles, "alerts.yml") {
		t.Errorf("%s: rule_files %v; want alerts.yml", file, cfg.RuleFiles)
	}
	if len(cfg.ScrapeConfigs) != 1 || cfg.ScrapeConfigs[0].JobName != "opsq" {
		t.Errorf("%s: scrape configs %+v; want the one job \"opsq\" that alerts.yml selects", file, cfg.ScrapeConfigs)
	}
}
