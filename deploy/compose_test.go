// Package deploy holds what deploys opsq beside the code: docker-compose.yml (at the root of
// the repository) and the dashboards and alerts here. Its tests check the compose file as
// "docker compose" itself loads it (compose-go), since no test here runs Docker.
package deploy

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"opsq/migrations"
)

// root is the repository's root, where docker-compose.yml, Dockerfile and .dockerignore are.
const root = ".."

// apiPort is the one port the compose file publishes: haproxy in front of the instances.
const apiPort = "haproxy:3999->3999"

// load loads a compose file's content as "docker compose" does, with the variable that the
// file requires set and profiles active.
func load(t *testing.T, content []byte, profiles ...string) *types.Project {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(t.Context(), types.ConfigDetails{
		WorkingDir:  abs,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(abs, "docker-compose.yml"), Content: content}},
		Environment: types.Mapping{"OPSQ_BOOTSTRAP_ADMIN_KEY": "opsq_" + strings.Repeat("k", 43)},
	}, func(o *loader.Options) { o.SetProjectName("opsq", true); o.Profiles = profiles })
	if err != nil {
		t.Fatalf("loading docker-compose.yml: %v", err)
	}
	return p
}

// drainTimeout is the default drain_timeout, as the first migration sets it.
func drainTimeout(t *testing.T) time.Duration {
	t.Helper()
	schema, err := fs.ReadFile(migrations.FS, "00001_schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\('drain_timeout',\s*'([^']+)'\)`).FindSubmatch(schema)
	if m == nil {
		t.Fatal("00001_schema.sql sets no drain_timeout")
	}
	d, err := time.ParseDuration(string(m[1]))
	if err != nil {
		t.Fatalf("drain_timeout %q: %v", m[1], err)
	}
	return d
}

// problems lists what is wrong with the compose project p (DESIGN.md §7): a health check
// of PostgreSQL that does not wait for TCP, a migration that does not wait for a healthy
// database, an instance that Docker kills before its drain ends, a port published besides
// the API's.
func problems(p *types.Project, drain time.Duration) []string {
	var out []string
	pg, err := p.GetService("postgres")
	if err != nil {
		return []string{err.Error()}
	}
	if hc := pg.HealthCheck; hc == nil || hc.Disable || !slices.Contains(hc.Test, "pg_isready") {
		out = append(out, "postgres: no pg_isready health check")
	} else if i := slices.Index(hc.Test, "-h"); i < 0 || i+1 >= len(hc.Test) || strings.HasPrefix(hc.Test[i+1], "/") {
		out = append(out, fmt.Sprintf("postgres: health check %q asks the socket, which answers before PostgreSQL listens on TCP; want -h 127.0.0.1", hc.Test))
	}

	migrate, err := p.GetService("migrate")
	if err != nil {
		return append(out, err.Error())
	}
	if dep, ok := migrate.DependsOn["postgres"]; !ok || dep.Condition != types.ServiceConditionHealthy {
		out = append(out, fmt.Sprintf("migrate: depends on postgres %+v; want condition %s", dep, types.ServiceConditionHealthy))
	}

	instances := 0
	for name, s := range p.Services {
		if s.Image != migrate.Image || !slices.Equal(s.Command, nil) && !slices.Equal(s.Command, types.ShellCommand{"serve"}) {
			continue // not an instance: "opsq serve" is the image's default command
		}
		instances++
		if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= drain {
			out = append(out, fmt.Sprintf("%s: stop_grace_period %v; want more than drain_timeout (%s), else Docker kills it draining", name, s.StopGracePeriod, drain))
		}
	}
	if instances == 0 {
		out = append(out, "no opsq instance (a service of the image running serve)")
	}

	var published []string
	for name, s := range p.Services {
		for _, port := range s.Ports {
			if port.Published != "" {
				published = append(published, fmt.Sprintf("%s:%s->%d", name, port.Published, port.Target))
			}
		}
	}
	if !slices.Equal(published, []string{apiPort}) {
		out = append(out, fmt.Sprintf("published ports %q; want only the API's, %s", published, apiPort))
	}
	slices.Sort(out)
	return out
}

func TestCompose(t *testing.T) {
	t.Parallel()
	content, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	drain := drainTimeout(t)
	if got := problems(load(t, content), drain); len(got) > 0 {
		t.Errorf("docker-compose.yml:\n%s", strings.Join(got, "\n"))
	}

	// Each check finds what it is there for: the file broken one way at a time.
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"health check over the socket", `"pg_isready", "-h", "127.0.0.1",`, `"pg_isready",`, "asks the socket"},
		{"health check on a socket directory", `"-h", "127.0.0.1"`, `"-h", "/var/run/postgresql"`, "asks the socket"},
		{"migration started at once", "        condition: service_healthy\n", "        condition: service_started\n", "migrate: depends on postgres"},
		{"Docker's 10s grace", "  stop_grace_period: 75s\n", "", "stop_grace_period <nil>"},
		{"a grace within the drain", "stop_grace_period: 75s", "stop_grace_period: 60s", "want more than drain_timeout"},
		{"stats published", `ports: ["3999:3999"]`, `ports: ["3999:3999", "8404:8404"]`, "want only the API's"},
		{"a database published", "    image: postgres:16\n", "    image: postgres:16\n    ports: [\"5432:5432\"]\n", "want only the API's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(string(content), tc.old) {
				t.Fatalf("docker-compose.yml has no %q to break", tc.old)
			}
			got := problems(load(t, []byte(strings.Replace(string(content), tc.old, tc.new, 1))), drain)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("problems = %q; want one saying %q", got, tc.want)
			}
		})
	}
}

// TestDockerignore: the build context ("docker build .", COPY . .) leaves out the
// development database, the binaries and the history, and keeps the source.
func TestDockerignore(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatalf("no .dockerignore: the build context would carry .data/ (the development PostgreSQL) and bin/: %v", err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f) // as docker build reads it
	if err != nil {
		t.Fatal(err)
	}
	m, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	for path, excluded := range map[string]bool{
		".data/pg/data/base/1/1259":    true,
		"bin/opsq":                     true,
		".git/HEAD":                    true,
		"go.mod":                       false,
		"go.sum":                       false,
		"cmd/opsq/main.go":             false,
		"sql/admin/drain_instance.sql": false,
		"migrations/00001_schema.sql":  false,
		"api/openapi.yaml":             false,
		"client/typescript/node_modules/typescript/package.json": true,
		"client/typescript/src/client.ts":                        false,
	} {
		got, err := m.MatchesOrParentMatches(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != excluded {
			t.Errorf(".dockerignore excludes %s: %t; want %t", path, got, excluded)
		}
	}
}

// The "citus" profile (docs/operations.md, "Running on Citus"): its services and what each
// must wait for.
const (
	citusProfile  = "citus"
	citusAPIPort  = "citus-opsq:4999->3999"
	citusDBHost   = "@citus-coordinator:5432/"
	citusInstance = "citus-opsq"
)

// citusProblems lists what is wrong with the citus profile of project p (loaded with it
// active): nodes whose health check does not wait for TCP, workers registered before every
// node is ready, a migration before the workers are registered or not at the coordinator,
// an instance not at the coordinator or killed while it drains, a port published besides
// its API's.
func citusProblems(p *types.Project, drain time.Duration) []string {
	var out []string
	nodes := []string{"citus-coordinator", "citus-worker1", "citus-worker2"}
	for _, name := range nodes {
		s, err := p.GetService(name)
		if err != nil {
			return []string{err.Error()}
		}
		if !strings.HasPrefix(s.Image, "citusdata/citus:") {
			out = append(out, fmt.Sprintf("%s: image %q; want citusdata/citus", name, s.Image))
		}
		if hc := s.HealthCheck; hc == nil || hc.Disable || !slices.Contains(hc.Test, "pg_isready") {
			out = append(out, name+": no pg_isready health check")
		} else if i := slices.Index(hc.Test, "-h"); i < 0 || i+1 >= len(hc.Test) || strings.HasPrefix(hc.Test[i+1], "/") {
			out = append(out, fmt.Sprintf("%s: health check %q asks the socket; want -h 127.0.0.1", name, hc.Test))
		}
	}
	waits := func(name, on string, cond string) {
		s, err := p.GetService(name)
		if err != nil {
			out = append(out, err.Error())
			return
		}
		if dep, ok := s.DependsOn[on]; !ok || dep.Condition != cond {
			out = append(out, fmt.Sprintf("%s: depends on %s %+v; want condition %s", name, on, dep, cond))
		}
	}
	for _, n := range nodes {
		waits("citus-nodes", n, types.ServiceConditionHealthy)
	}
	waits("citus-migrate", "citus-nodes", types.ServiceConditionCompletedSuccessfully)
	waits("citus-keys", "citus-migrate", types.ServiceConditionCompletedSuccessfully)
	waits(citusInstance, "citus-keys", types.ServiceConditionCompletedSuccessfully)
	if s, err := p.GetService("citus-nodes"); err == nil {
		cmd := strings.Join(s.Command, " ")
		for _, w := range nodes[1:] {
			if !strings.Contains(cmd, "citus_add_node('"+w+"'") {
				out = append(out, fmt.Sprintf("citus-nodes: %q registers no %s", cmd, w))
			}
		}
	}
	for _, name := range []string{"citus-migrate", "citus-keys", citusInstance} {
		s, err := p.GetService(name)
		if err != nil {
			out = append(out, err.Error())
			continue
		}
		if u := s.Environment["OPSQ_DATABASE_URL"]; u == nil || !strings.Contains(*u, citusDBHost) {
			out = append(out, fmt.Sprintf("%s: OPSQ_DATABASE_URL %v; want the coordinator (%s)", name, u, citusDBHost))
		}
	}
	if s, err := p.GetService(citusInstance); err == nil {
		if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= drain {
			out = append(out, fmt.Sprintf("%s: stop_grace_period %v; want more than drain_timeout (%s)", citusInstance, s.StopGracePeriod, drain))
		}
		if len(s.Command) != 0 {
			out = append(out, fmt.Sprintf("%s: command %q; want the image's, serve", citusInstance, s.Command))
		}
	}
	var published []string
	for name, s := range p.Services {
		if !slices.Contains(s.Profiles, citusProfile) {
			continue
		}
		for _, port := range s.Ports {
			if port.Published != "" {
				published = append(published, fmt.Sprintf("%s:%s->%d", name, port.Published, port.Target))
			}
		}
	}
	if !slices.Equal(published, []string{citusAPIPort}) {
		out = append(out, fmt.Sprintf("citus profile: published ports %q; want only the API's, %s", published, citusAPIPort))
	}
	slices.Sort(out)
	return out
}

func TestComposeCitus(t *testing.T) {
	t.Parallel()
	content, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// Without the profile, "docker compose up" starts none of it.
	for name, s := range load(t, content).Services {
		if slices.Contains(s.Profiles, citusProfile) || strings.HasPrefix(name, "citus-") {
			t.Errorf("service %s starts without --profile %s", name, citusProfile)
		}
	}
	drain := drainTimeout(t)
	if got := citusProblems(load(t, content, citusProfile), drain); len(got) > 0 {
		t.Errorf("docker-compose.yml, profile %s:\n%s", citusProfile, strings.Join(got, "\n"))
	}

	// Each check finds what it is there for: the file broken one way at a time.
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"a node's health check over the socket", `"pg_isready", "-h", "127.0.0.1", "-U", "opsq", "-d", "opsq"]
      interval: 1s
      retries: 60`, `"pg_isready", "-U", "opsq", "-d", "opsq"]
      interval: 1s
      retries: 60`, "citus-worker2: health check"},
		{"workers registered at once", "      citus-worker2: {condition: service_healthy}\n", "      citus-worker2: {condition: service_started}\n", "citus-nodes: depends on citus-worker2"},
		{"a worker left out", "      - SELECT citus_add_node('citus-worker2', 5432)\n", "", "registers no citus-worker2"},
		{"migrated before the workers are in", "      citus-nodes: {condition: service_completed_successfully}\n", "      citus-nodes: {condition: service_started}\n", "citus-migrate: depends on citus-nodes"},
		{"migrated elsewhere", "      OPSQ_DATABASE_URL: postgres://opsq@citus-coordinator:5432/opsq?sslmode=disable\n    # After", "      OPSQ_DATABASE_URL: postgres://opsq@citus-worker1:5432/opsq?sslmode=disable\n    # After", "citus-migrate: OPSQ_DATABASE_URL"},
		{"the instance on the default database", "      OPSQ_DATABASE_URL: postgres://opsq@citus-coordinator:5432/opsq?sslmode=disable\n      OPSQ_INSTANCE_ID", "      OPSQ_INSTANCE_ID", "citus-opsq: OPSQ_DATABASE_URL"},
		{"a node published", "    image: citusdata/citus:13.0\n    environment:\n", "    image: citusdata/citus:13.0\n    ports: [\"5432:5432\"]\n    environment:\n", "want only the API's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(string(content), tc.old) {
				t.Fatalf("docker-compose.yml has no %q to break", tc.old)
			}
			got := citusProblems(load(t, []byte(strings.Replace(string(content), tc.old, tc.new, 1)), citusProfile), drain)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("problems = %q; want one saying %q", got, tc.want)
			}
		})
	}
}
