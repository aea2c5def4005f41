package sql

import (
	"strings"
	"testing"
)

func TestPsqlToNamed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"quoted", "-- c :'x'\nUPDATE t SET a = :'instance'", "UPDATE t SET a = @instance"},
		{"plain", "WHERE shard = :shard;", "WHERE shard = @shard;"},
		{"cast and string", "SELECT 'a:b'::text, :n::int", "SELECT 'a:b'::text, @n::int"},
		{"escaped quote", "SELECT 'it''s :x'", "SELECT 'it''s :x'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := psqlToNamed(tc.in)
			if err != nil || got != tc.want {
				t.Errorf("psqlToNamed(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
	if _, err := psqlToNamed("SELECT 'open"); err == nil {
		t.Error("psqlToNamed of an unterminated string = nil error; want one")
	}
}

func TestAdminStatements(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]string{
		"drain": adminDrainInstance, "undrain": adminUndrainInstance,
		"disable": adminDisableShard, "enable": adminEnableShard,
	} {
		if s == "" || strings.Contains(s, ":'") || strings.Contains(s, "--") || strings.Contains(s, `\`) {
			t.Errorf("%s: %q still holds psql variables, comments or meta-commands", name, s)
		}
		if strings.Count(s, ";") != 1 || !strings.HasSuffix(s, ";") {
			t.Errorf("%s: %q is not one statement", name, s)
		}
	}
}

func TestRecipeStatement(t *testing.T) {
	t.Parallel()
	script := "-- Drain.\n--   psql -f x.sql\n\\set ON_ERROR_STOP on\nUPDATE t\n-- why\nSET a = 1\nWHERE id = :'id';\n-- check\nSELECT 'x' WHERE :ROW_COUNT = 0 \\gexec\n"
	want := "UPDATE t\n-- why\nSET a = 1\nWHERE id = :'id';\n"
	if got := RecipeStatement(script); got != want {
		t.Errorf("RecipeStatement = %q; want %q", got, want)
	}
}
