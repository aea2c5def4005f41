package clustertest

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Binary is the opsq program the kit runs, built once: an executable and the environment
// it needs besides the instance's own.
type Binary struct {
	Path string   // the executable
	Env  []string // KEY=value, added to every child's environment
}

// Self is the running executable with env added: for a test binary whose TestMain runs
// opsq instead of the tests when env is set (cmd/opsq's does), or for opsq itself.
func Self(env ...string) (Binary, error) {
	exe, err := os.Executable()
	if err != nil {
		return Binary{}, fmt.Errorf("finding this binary, to start opsq serve: %w", err)
	}
	return Binary{Path: exe, Env: env}, nil
}

// Command is the binary run with args; its environment is this process's without the
// OPSQ_ variables (a child gets only the ones it is given), then b.Env, then env. The
// kernel kills it if this process dies (on Linux).
func (b Binary) Command(args []string, env ...string) *exec.Cmd {
	cmd := exec.Command(b.Path, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPSQ_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, b.Env...), env...)
	cmd.SysProcAttr = childProcAttr()
	return cmd
}

// Spec describes one instance to Start.
type Spec struct {
	ID       string   // OPSQ_INSTANCE_ID. Required.
	DBURL    string   // OPSQ_DATABASE_URL. Required.
	Migrate  bool     // OPSQ_MIGRATE
	LogPath  string   // the file its output goes to, created. Required.
	LogLevel string   // OPSQ_LOG_LEVEL. Defaults to debug.
	Grace    string   // OPSQ_SHUTDOWN_GRACE. Defaults to 10s.
	Env      []string // more KEY=value, after the above
	// HTTPS: the instance serves TLS (Env names its OPSQ_TLS_ files); its URL and
	// advertise URL are https://.
	HTTPS bool
	// Auth is OPSQ_AUTH. Defaults to off: the kit's clients send no API key. A test of the
	// keys sets "required" and gives its clients keys.
	Auth string
	// ProcAttr replaces the child's SysProcAttr. Defaults to being killed with this
	// process (Linux).
	ProcAttr *syscall.SysProcAttr
}

// Process is one "opsq serve" child listening on a held Port. It owns the process, its
// log file and its port; one goroutine waits for the process and lives until it exits.
// The port stays held after the exit, until Release. Safe for concurrent use. To stop it
// gracefully, send SIGTERM and wait for Exited; Kill ends it at once (paused or not).
type Process struct {
	ID      string
	URL     string // http://127.0.0.1:port, or https://
	LogPath string
	Cmd     *exec.Cmd // started; for its pid (Signal, Kill and Stop rather than Cmd.Process)

	port    *Port
	exited  chan struct{} // closed when the process has exited
	waitErr error         // set before exited is closed
}

// Start starts an instance of b on a freshly held port, without waiting for it to be
// ready.
func Start(b Binary, s Spec) (*Process, error) {
	port, err := HoldPort()
	if err != nil {
		return nil, err
	}
	scheme := "http://"
	if s.HTTPS {
		scheme = "https://"
	}
	p := &Process{ID: s.ID, URL: scheme + port.Addr(), LogPath: s.LogPath, port: port, exited: make(chan struct{})}
	logFile, err := os.Create(s.LogPath)
	if err != nil {
		port.Close()
		return nil, err
	}
	defer logFile.Close() // the child has its own copy
	p.Cmd = b.Command([]string{"serve"},
		append([]string{
			"OPSQ_DATABASE_URL=" + s.DBURL,
			"OPSQ_LISTEN=" + port.Addr(),
			"OPSQ_ADVERTISE_URL=" + p.URL,
			"OPSQ_INSTANCE_ID=" + s.ID,
			"OPSQ_MIGRATE=" + strconv.FormatBool(s.Migrate),
			"OPSQ_LOG_LEVEL=" + cmp.Or(s.LogLevel, "debug"),
			"OPSQ_SHUTDOWN_GRACE=" + cmp.Or(s.Grace, "10s"),
			"OPSQ_AUTH=" + cmp.Or(s.Auth, "off"),
		}, s.Env...)...)
	if s.ProcAttr != nil {
		p.Cmd.SysProcAttr = s.ProcAttr
	}
	p.Cmd.Stdout, p.Cmd.Stderr = logFile, logFile
	if err := p.Cmd.Start(); err != nil {
		port.Close()
		return nil, fmt.Errorf("starting opsq serve %s: %w", s.ID, err)
	}
	go func() {
		p.waitErr = p.Cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Err is how the process exited (Cmd.Wait's error); nil while it runs.
func (p *Process) Err() error {
	if p.Running() {
		return nil
	}
	return p.waitErr
}

// Signal sends sig to the process: SIGSTOP pauses it, SIGCONT resumes it.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := syscall.Kill(p.Cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("sending %v to %s: %w", sig, p.ID, err)
	}
	return nil
}

// WaitExit waits up to timeout for the process to exit and returns its exit code.
func (p *Process) WaitExit(timeout time.Duration) (int, error) {
	select {
	case <-p.exited:
		return p.Cmd.ProcessState.ExitCode(), nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s did not exit within %s", p.ID, timeout)
	}
}

// Kill sends SIGKILL (a paused process dies too) and waits up to timeout for the exit.
func (p *Process) Kill(timeout time.Duration) error {
	if !p.Running() {
		return nil
	}
	// An error here means that the process is gone already (reaped, its wait goroutine
	// about to say so), or that it cannot be killed, which WaitExit reports.
	_ = p.Signal(syscall.SIGKILL)
	_, err := p.WaitExit(timeout)
	return err
}

// Release gives the port up; call it once the process has exited. Safe twice.
func (p *Process) Release() { p.port.Close() }

// Readyz returns the status and body of GET /readyz through hc (status 0 when
// unreachable), within 2 s.
func (p *Process) Readyz(ctx context.Context, hc *http.Client) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/readyz", nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, strings.TrimSpace(b.String())
}

// WaitReady polls GET /readyz until it answers 200; it fails when the process exits, when
// timeout passes, or when ctx ends.
func (p *Process) WaitReady(ctx context.Context, hc *http.Client, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if !p.Running() {
			return fmt.Errorf("%s exited before it was ready (%v); its log:\n%s", p.ID, p.waitErr, Tail(p.LogPath, 60))
		}
		code, body := p.Readyz(ctx, hc)
		if code == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s; last /readyz: %d %s; its log: %s", p.ID, timeout, code, body, p.LogPath)
		}
		if err := SleepCtx(ctx, 25*time.Millisecond); err != nil {
			return err
		}
	}
}

// LogLines returns the lines of the log that contain s.
func (p *Process) LogLines(s string) []string {
	b, _ := os.ReadFile(p.LogPath)
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// Tail returns the last lines of a file.
func Tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		return fmt.Sprintf("[%d earlier lines in %s]\n", len(all)-lines, path) + strings.Join(all[len(all)-lines:], "\n")
	}
	return strings.Join(all, "\n")
}

// SleepCtx sleeps for d or until ctx ends, and returns ctx's error if it ended.
func SleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
