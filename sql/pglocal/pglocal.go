// Package pglocal runs a local PostgreSQL cluster from the server binaries (initdb, pg_ctl,
// postgres): an ephemeral one for tests, or the persistent development cluster of `make run`
// (EnsureDev).
//
// A cluster lives in one directory: the data directory "data", the server log "server.log",
// the recorded port "port" (EnsureDev) and the unix socket directory "run". The server
// listens on 127.0.0.1 only and trusts every local connection; its superuser is "postgres".
//
// PostgreSQL refuses to run as root. When the current process is root, every binary runs as
// the OS user "postgres", which then owns the cluster directory; any directory above it
// that the postgres user could not traverse gets the search permission for others (o+x).
package pglocal

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// ErrNotInstalled is returned when the PostgreSQL server binaries cannot be found.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found " +
	"on the PATH, through pg_config --bindir, or under /usr/lib/postgresql/*/bin; " +
	"install them (apt-get install postgresql)")

// DevPortDefault is the port EnsureDev tries first for a new development cluster.
const DevPortDefault = 5433

// MaxConnections is the max_connections of every cluster.
const MaxConnections = 200

// serverBinaries are the binaries a cluster needs; pg_ctl finds postgres beside itself.
var serverBinaries = []string{"initdb", "pg_ctl", "postgres"}

// BinDir returns the directory holding the server binaries: the one of pg_ctl on the PATH,
// else `pg_config --bindir`, else the newest /usr/lib/postgresql/*/bin (where Debian and
// Ubuntu install them). It returns ErrNotInstalled when none holds them all.
func BinDir() (string, error) {
	var candidates []string
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
		return v
	}
	slices.SortFunc(debian, func(a, b string) int { return cmp.Compare(version(b), version(a)) })
	candidates = append(candidates, debian...)
	for _, dir := range candidates {
		if hasServerBinaries(dir) {
			return dir, nil
		}
	}
	return "", ErrNotInstalled
}

func hasServerBinaries(dir string) bool {
	for _, name := range serverBinaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Cluster is a local PostgreSQL cluster. Set its fields, then call Init once and Start; a
// Cluster that describes an existing directory can Start, Stop and report Running from any
// process. A Cluster is not safe for concurrent use. The server it starts is a separate
// process that outlives the Go program until Stop.
type Cluster struct {
	// Dir holds the whole cluster. Required.
	Dir string
	// Port is the TCP port on 127.0.0.1. Defaults to a free port, chosen by Start.
	Port int
	// Durable keeps PostgreSQL's crash safety. When false (tests), the server runs with
	// fsync, synchronous_commit and full_page_writes off. Defaults to false.
	Durable bool
	// Settings are extra server settings (name → value), applied at every Start after the
	// built-in ones, which they override. Defaults to none.
	Settings map[string]string
	// BinDir holds the server binaries. Defaults to BinDir().
	BinDir string

	prepared bool
	dir      string              // Dir, absolute
	cred     *syscall.Credential // the "postgres" user's, when running as root
}

// URL returns the URL of database dbname as the superuser "postgres", over TCP.
func (c *Cluster) URL(dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, url.PathEscape(dbname))
}

// DataDir returns the PostgreSQL data directory.
func (c *Cluster) DataDir() string { return filepath.Join(c.absDir(), "data") }

// LogFile returns the server log.
func (c *Cluster) LogFile() string { return filepath.Join(c.absDir(), "server.log") }

// SocketDir returns the directory of the server's unix socket: "run" in Dir, or, when that
// path would be too long for a unix socket (about 107 bytes), a directory in /tmp named after
// a hash of Dir.
func (c *Cluster) SocketDir() string {
	dir := filepath.Join(c.absDir(), "run")
	if len(dir)+len("/.s.PGSQL.65535.lock") < 100 {
		return dir
	}
	sum := sha256.Sum256([]byte(c.absDir()))
	return filepath.Join("/tmp", "opsq-pg-"+hex.EncodeToString(sum[:6]))
}

func (c *Cluster) absDir() string {
	if c.dir != "" {
		return c.dir
	}
	if abs, err := filepath.Abs(c.Dir); err == nil {
		return abs
	}
	return c.Dir
}

// prepare resolves the binaries and, when running as root, the user to run them as.
func (c *Cluster) prepare() error {
	if c.prepared {
		return nil
	}
	if c.Dir == "" {
		return errors.New("cluster directory not set")
	}
	abs, err := filepath.Abs(c.Dir)
	if err != nil {
		return fmt.Errorf("cluster directory %s: %w", c.Dir, err)
	}
	if c.BinDir == "" {
		if c.BinDir, err = BinDir(); err != nil {
			return err
		}
	}
	if os.Geteuid() == 0 {
		if c.cred, err = postgresUser(); err != nil {
			return err
		}
	}
	c.dir, c.prepared = abs, true
	return nil
}

func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, which PostgreSQL refuses, and no OS user \"postgres\" "+
			"to run it as: create one (useradd postgres) or use an existing server "+
			"(OPSQ_DATABASE_URL, OPSQ_TEST_DATABASE_URL): %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user postgres: uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user postgres: gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// mkdir creates dir and, when running as root, hands it to the postgres user.
func (c *Cluster) mkdir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	return c.chown(dir)
}

func (c *Cluster) chown(path string) error {
	if c.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
		return fmt.Errorf("handing %s to user postgres: %w", path, err)
	}
	return nil
}

// makeTraversable lets the postgres user reach dir: it adds the search bit for others to
// every ancestor that denies it.
func (c *Cluster) makeTraversable(dir string) error {
	if c.cred == nil {
		return nil
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("checking %s: %w", d, err)
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		ownedByPostgres := st != nil && st.Uid == c.cred.Uid
		if !ownedByPostgres && fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("letting user postgres traverse %s: %w", d, err)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// run runs one of the server binaries, as the postgres user when running as root.
func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.binary(name), args...)
	cmd.Dir = c.dir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// Initialized reports whether Dir holds an initialized data directory.
func (c *Cluster) Initialized() bool {
	_, err := os.Stat(filepath.Join(c.DataDir(), "PG_VERSION"))
	return err == nil
}

// Init creates the cluster with initdb. Dir may exist but must not hold a cluster yet.
func (c *Cluster) Init(ctx context.Context) error {
	if err := c.prepare(); err != nil {
		return err
	}
	if c.Initialized() {
		return fmt.Errorf("initializing %s: already holds a cluster", c.dir)
	}
	if err := c.mkdir(c.dir); err != nil {
		return err
	}
	if err := c.makeTraversable(c.dir); err != nil {
		return err
	}
	args := []string{"-D", c.DataDir(), "--username=postgres", "--auth=trust",
		"--encoding=UTF8", "--no-locale", "--no-instructions"}
	if !c.Durable {
		args = append(args, "--no-sync")
	}
	if _, err := c.run(ctx, "initdb", args...); err != nil {
		return fmt.Errorf("initializing %s: %w", c.dir, err)
	}
	// Start rewrites opsq.conf with the settings of the moment.
	conf, err := os.OpenFile(filepath.Join(c.DataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("initializing %s: %w", c.dir, err)
	}
	defer conf.Close()
	if _, err := io.WriteString(conf, "\ninclude_if_exists = 'opsq.conf'\n"); err != nil {
		return fmt.Errorf("initializing %s: %w", c.dir, err)
	}
	return conf.Close()
}

// settings returns the server settings, built-in first.
func (c *Cluster) settings() [][2]string {
	s := [][2]string{
		{"listen_addresses", "127.0.0.1"},
		{"port", strconv.Itoa(c.Port)},
		{"unix_socket_directories", c.SocketDir()},
		{"max_connections", strconv.Itoa(MaxConnections)},
	}
	if !c.Durable {
		s = append(s, [2]string{"fsync", "off"}, [2]string{"synchronous_commit", "off"},
			[2]string{"full_page_writes", "off"})
	}
	for _, name := range slices.Sorted(maps.Keys(c.Settings)) {
		s = append(s, [2]string{name, c.Settings[name]})
	}
	return s
}

func (c *Cluster) writeConf() error {
	var b strings.Builder
	b.WriteString("# Written by opsq's pglocal at every start.\n")
	for _, kv := range c.settings() {
		fmt.Fprintf(&b, "%s = '%s'\n", kv[0], strings.ReplaceAll(kv[1], "'", "''"))
	}
	path := filepath.Join(c.DataDir(), "opsq.conf")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return c.chown(path)
}

// Start starts the server and waits until it accepts connections. When Port is zero it
// picks a free port, and another if that one is taken by the time the server binds it.
func (c *Cluster) Start(ctx context.Context) error {
	if err := c.prepare(); err != nil {
		return err
	}
	auto := c.Port == 0
	for attempt := 1; ; attempt++ {
		if auto {
			port, err := FreePort()
			if err != nil {
				return err
			}
			c.Port = port
		}
		err := c.start(ctx)
		taken := err != nil && strings.Contains(err.Error(), "Address already in use")
		if !taken || !auto || attempt == 3 {
			return err
		}
	}
}

func (c *Cluster) start(ctx context.Context) error {
	if err := c.mkdir(c.SocketDir()); err != nil {
		return err
	}
	if err := c.writeConf(); err != nil {
		return err
	}
	_, err := c.run(ctx, "pg_ctl", "start", "-D", c.DataDir(), "-l", c.LogFile(), "-w", "-t", "60")
	if err != nil {
		return fmt.Errorf("starting PostgreSQL in %s on port %d: %w\n%s", c.dir, c.Port, err, c.logTail(20))
	}
	return nil
}

// logTail returns the last lines of the server log.
func (c *Cluster) logTail(lines int) string {
	f, err := os.Open(c.LogFile())
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > 64<<10 {
		f.Seek(fi.Size()-64<<10, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	all = all[max(0, len(all)-lines):]
	return "last lines of " + c.LogFile() + ":\n" + strings.Join(all, "\n")
}

// Running reports whether the server of the cluster runs (pg_ctl status).
func (c *Cluster) Running(ctx context.Context) (bool, error) {
	if !c.Initialized() {
		return false, nil
	}
	if err := c.prepare(); err != nil {
		return false, err
	}
	_, err := c.run(ctx, "pg_ctl", "status", "-D", c.DataDir())
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 { // not running
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking PostgreSQL in %s: %w", c.dir, err)
	}
	return true, nil
}

// Stop stops the server (fast shutdown: sessions are disconnected) and waits for it to
// exit. Stopping a cluster that does not run, or does not exist, does nothing.
func (c *Cluster) Stop(ctx context.Context) error {
	running, err := c.Running(ctx)
	if err != nil || !running {
		return err
	}
	if _, err := c.run(ctx, "pg_ctl", "stop", "-D", c.DataDir(), "-m", "fast", "-w", "-t", "60"); err != nil {
		return fmt.Errorf("stopping PostgreSQL in %s: %w", c.dir, err)
	}
	if sock := c.SocketDir(); !strings.HasPrefix(sock, c.dir+string(filepath.Separator)) {
		os.RemoveAll(sock)
	}
	return nil
}

// EnsureDev returns the running persistent development cluster in dir (durable, with a
// larger max_wal_size and shared_buffers): it creates it if missing, starts it if stopped,
// and reuses it if running. A new cluster listens on port if not zero, else on
// DevPortDefault if free, else on a free port; the port is recorded in dir and reused by
// later calls while it is free.
func EnsureDev(ctx context.Context, dir string, port int) (*Cluster, error) {
	c := &Cluster{
		Dir:      dir,
		Durable:  true,
		Settings: map[string]string{"max_wal_size": "4GB", "shared_buffers": "256MB"},
	}
	portFile := filepath.Join(c.absDir(), "port")
	recorded := 0
	if b, err := os.ReadFile(portFile); err == nil {
		recorded, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	running, err := c.Running(ctx)
	if err != nil {
		return nil, err
	}
	if running {
		if recorded == 0 {
			return nil, fmt.Errorf("development cluster in %s runs, but its port is not recorded in %s", dir, portFile)
		}
		c.Port = recorded
		return c, nil
	}
	if !c.Initialized() {
		if err := c.Init(ctx); err != nil {
			return nil, err
		}
	}
	switch {
	case port != 0:
		c.Port = port
	case recorded != 0 && portFree(recorded):
		c.Port = recorded
	case portFree(DevPortDefault):
		c.Port = DevPortDefault
	default:
		if c.Port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(portFile, []byte(strconv.Itoa(c.Port)+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("recording the port of %s: %w", dir, err)
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
