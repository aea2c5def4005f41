package pgtest

import (
	"os/exec"
	"path/filepath"
	"testing"

	"opsq/sql/pglocal"
)

// Psql runs the psql script file (an operator's recipe, sql/admin/*.sql) against dbURL
// with -v name=value for each of vars, as an operator would: no psqlrc (-X), and no
// ON_ERROR_STOP but the one the script sets itself. It returns what psql printed (stdout
// and stderr) and its error, an *exec.ExitError when psql exits non-zero. psql is the one
// on the PATH, else the one beside the server binaries; without either the test fails
// saying what to install.
func Psql(t testing.TB, dbURL, file string, vars ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("psql")
	if err != nil {
		dir, derr := pglocal.BinDir()
		if derr != nil {
			t.Fatalf("pgtest: the admin recipes are tested with psql, which is neither on the PATH nor beside the server binaries (install the PostgreSQL client: apt-get install postgresql-client): %v", derr)
		}
		bin = filepath.Join(dir, "psql")
	}
	args := []string{"-X", "-d", dbURL, "-f", file}
	for _, v := range vars {
		args = append(args, "-v", v)
	}
	out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
	return string(out), err
}
