package client_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"opsq/api"
	"opsq/api/wire"
	"opsq/client"
	"opsq/queuer"
	"opsq/queuer/queuertest"
	"opsq/sql/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m) // for TestExample's instance; the other tests need no database
}

// Example is the Go example of README.md's "## Clients": a producer and a consumer. Its
// lines after the first are the README's, as they are (TestExample checks both).
func Example() {
	ctx := context.Background()
	c := client.New(cmp.Or(os.Getenv("OPSQ_URL"), "http://localhost:3999"), client.WithKey(os.Getenv("OPSQ_KEY")))
	sub, _ := c.Submit(ctx, wire.Submission{Chunks: []string{"hello world"}})
	chunks, _ := c.Reserve(ctx, wire.ReserveRequest{Max: 1, Wait: "10s"}) // [] when none came within the wait
	c.Complete(ctx, wire.Completion{Token: chunks[0].Token, Output: strings.ToUpper(*chunks[0].Input)})
	c.Results(ctx, sub.ID, func(r wire.Result) error { fmt.Println(*r.Output); return nil }) // HELLO WORLD
}

// TestExample runs Example against an instance, as the README tells, and checks that the
// README shows its lines. Not parallel: it sets OPSQ_URL and takes os.Stdout a moment.
func TestExample(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "func Example() {\n\tctx := context.Background()\n")
	body, _, _ = strings.Cut(body, "\n}\n")
	block := strings.ReplaceAll(body, "\n\t", "\n")[1:] + "\n"
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, clients, _ := strings.Cut(string(readme), "\n## Clients\n")
	clients, _, _ = strings.Cut(clients, "\n## ")
	if !strings.Contains(clients, "```go\n"+block+"```\n") {
		t.Errorf("README.md's \"## Clients\" does not show Example's lines as they are; want a go block of\n%s", block)
	}
	if n := strings.Count(block, "\n"); n != 5 {
		t.Errorf("Example shows %d lines; the README promises five", n)
	}

	q := queuertest.Start(t, queuer.Config{})
	srv := httptest.NewServer(api.New(api.Config{Queuer: q}))
	t.Cleanup(srv.Close)
	t.Setenv("OPSQ_URL", srv.URL)
	t.Setenv("OPSQ_KEY", "")

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	printed := make(chan []byte)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, r)
		printed <- b.Bytes()
	}()
	func() {
		defer func() { os.Stdout = stdout; w.Close() }()
		Example()
	}()
	if got, want := string(<-printed), "HELLO WORLD\n"; got != want {
		t.Errorf("Example printed %q; want %q", got, want)
	}
}
