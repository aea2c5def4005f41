package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"opsq/api/apikeys"

	"github.com/jackc/pgx/v5/pgxpool"
)

const keysUsage = `usage: opsq keys create --name NAME --role ROLE [--tenant T | --tenants a,b] [--expires 90d] [--from-env VAR] [--if-missing]
       opsq keys list [--json]
       opsq keys revoke NAME

Manage the API keys (DESIGN.md §8). create prints the new key alone on the first line of
standard output, and only there: keep it, it cannot be shown again. Roles: producer
(submit, status, results, failures, list, cancel, retry, pause, resume — its tenant's
submissions only), consumer (reserve, preview, complete, fail, extend, status — of its
tenants' submissions), admin (everything, every tenant), metrics (GET /metrics). A producer
key belongs to one tenant (--tenant, default "default"); a consumer key works for every
tenant unless --tenants names some. A revoked key is refused by every instance within a
second. These commands talk to the database, not to an instance.

create --from-env VAR takes the key from the environment variable VAR instead of making
one, and prints nothing on standard output; with --if-missing it does nothing when a key of
that name exists already. docker-compose.yml bootstraps its admin key so.

flags:`

func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, keysUsage)
		fs.PrintDefaults()
	}
	var dbURL, devDir, name, role, expires, tenant, tenants string
	var fromEnv string
	var asJSON, ifMissing bool
	envString(fs, &dbURL, "database-url", "OPSQ_DATABASE_URL", "", "PostgreSQL URL")
	envString(fs, &devDir, "dev-cluster", "OPSQ_DEV_CLUSTER", "", "use the local development cluster in this directory when no URL is set (make run's: .data/pg)")
	fs.StringVar(&name, "name", "", "create: the key's name, unique (1-64 of A-Z a-z 0-9 . _ -)")
	fs.StringVar(&role, "role", "", "create: producer, consumer, admin or metrics")
	fs.StringVar(&expires, "expires", "never", "create: how long the key is valid, such as 90d, 12h or never")
	fs.StringVar(&tenant, "tenant", "", "create: a producer key's tenant (default: default)")
	fs.StringVar(&tenants, "tenants", "", "create: the tenants a consumer key may work for, comma-separated (default: all)")
	fs.StringVar(&fromEnv, "from-env", "", "create: take the key from this environment `variable` (at least 32 characters) rather than make one")
	fs.BoolVar(&ifMissing, "if-missing", false, "create: do nothing if a key of that name exists already")
	fs.BoolVar(&asJSON, "json", false, "list: print JSON")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	usageError := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "opsq keys: "+format+"\n\n", a...)
		fs.Usage()
		return errUsage
	}
	if len(pos) == 0 {
		return usageError("missing action: create, list or revoke")
	}
	action := pos[0]
	var r apikeys.Role
	var validFor time.Duration
	switch {
	case action == "create" && len(pos) == 1:
		if name == "" {
			return usageError("create needs --name")
		}
		var err error
		if r, err = apikeys.ParseRole(role); err != nil {
			return usageError("--role: %v", err)
		}
		if validFor, err = parseExpiry(expires); err != nil {
			return usageError("--expires %q: %v", expires, err)
		}
		if tenant != "" && r != apikeys.Producer {
			return usageError("--tenant is a producer key's; a consumer key takes --tenants")
		}
		if tenants != "" && r != apikeys.Consumer {
			return usageError("--tenants is a consumer key's; a producer key takes --tenant")
		}
		if fromEnv != "" && os.Getenv(fromEnv) == "" {
			return fmt.Errorf("--from-env %s: the variable is not set or empty", fromEnv)
		}
	case action == "list" && len(pos) == 1:
	case action == "revoke" && len(pos) == 2:
	case action == "revoke":
		return usageError("revoke takes one key name")
	default:
		return usageError("unknown action or extra arguments: %q", pos)
	}

	pool, err := adminPool(ctx, "keys", dbURL, devDir, stderr)
	if err != nil {
		return err
	}
	defer pool.Close()
	switch action {
	case "create":
		var k apikeys.Key
		var key string
		spec := apikeys.Spec{Name: name, Role: r, Expires: validFor, Tenant: tenant}
		if tenants != "" {
			spec.Tenants = strings.Split(tenants, ",")
		}
		if fromEnv != "" {
			k, err = apikeys.AddSpec(ctx, pool, spec, os.Getenv(fromEnv))
		} else {
			k, key, err = apikeys.CreateSpec(ctx, pool, spec)
		}
		if ifMissing && errors.Is(err, apikeys.ErrExists) {
			fmt.Fprintf(stderr, "an API key named %q exists already; nothing done\n", name)
			return nil
		}
		if err != nil {
			return explainKeysError(err)
		}
		if fromEnv != "" {
			fmt.Fprintf(stderr, "created API key %q (role %s%s, %s) from $%s\n", k.Name, k.Role, tenantText(k), expiryText(k.ExpiresAt), fromEnv)
			return nil
		}
		if _, err := fmt.Fprintln(stdout, key); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "created API key %q (role %s%s, %s); it is shown only this once. Use it as OPSQ_KEY=… or --key, sent as Authorization: Bearer.\n",
			k.Name, k.Role, tenantText(k), expiryText(k.ExpiresAt))
		return nil
	case "list":
		keys, err := apikeys.List(ctx, pool)
		if err != nil {
			return explainKeysError(err)
		}
		if asJSON {
			return printJSON(stdout, keys)
		}
		return printKeys(stdout, keys, time.Now())
	default: // revoke
		k, err := apikeys.Revoke(ctx, pool, pos[1])
		if err != nil {
			return explainKeysError(err)
		}
		fmt.Fprintf(stdout, "revoked %q (role %s) at %s\n", k.Name, k.Role, k.RevokedAt.UTC().Format(timeLayout))
		return nil
	}
}

// parseExpiry reads 90d, a Go duration such as 12h, or never (0).
func parseExpiry(s string) (time.Duration, error) {
	if s == "never" || s == "" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > 100*365 {
			return 0, errors.New("want a number of days such as 90d, a duration such as 12h, or never")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, errors.New("want a number of days such as 90d, a duration such as 12h, or never")
	}
	return d, nil
}

// tenantText is what a key may see of the tenants, for the message of create: "" when
// its role has no tenant.
func tenantText(k apikeys.Key) string {
	if t := keyTenants(k); t != "-" {
		return ", tenants " + t
	}
	return ""
}

// keyTenants is the TENANTS column of a key: a producer's tenant, a consumer's list or
// "all", "-" for the other roles.
func keyTenants(k apikeys.Key) string {
	switch {
	case k.Role == apikeys.Producer:
		return k.Tenant
	case k.Role == apikeys.Consumer && k.Tenants == nil:
		return "all"
	case k.Role == apikeys.Consumer:
		return strings.Join(k.Tenants, ",")
	}
	return "-"
}

func expiryText(at *time.Time) string {
	if at == nil {
		return "never expires"
	}
	return "expires " + at.UTC().Format(timeLayout)
}

// keyState is what a key is now: active, expired or revoked.
func keyState(k apikeys.Key, now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked"
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		return "expired"
	}
	return "active"
}

func printKeys(w io.Writer, keys []apikeys.Key, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tTENANTS\tSTATE\tCREATED\tEXPIRES\tLAST USED")
	at := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(timeLayout)
	}
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Name, k.Role, keyTenants(k), keyState(k, now), at(&k.CreatedAt), at(k.ExpiresAt), at(k.LastUsedAt))
	}
	return tw.Flush()
}

func explainKeysError(err error) error {
	if strings.Contains(err.Error(), `relation "opsq.api_keys" does not exist`) {
		return fmt.Errorf(`%w; the database has no API keys table yet: run "opsq migrate up" (or start "opsq serve" once)`, err)
	}
	return err
}

// parseInterleaved parses fs's flags wherever they stand among the action and its
// arguments ("opsq keys create NAME --role admin" as well as "--role admin create NAME"),
// and returns the arguments that are not flags, in order.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, parseError(err)
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// adminPool opens the database of a command that administers it directly rather than
// through an instance (opsq keys, opsq tenants: what holds the what): the URL given, or the
// development PostgreSQL of devDir.
func adminPool(ctx context.Context, what, dbURL, devDir string, stderr io.Writer) (*pgxpool.Pool, error) {
	if dbURL == "" && devDir == "" {
		// Not databaseURL's advice to run "make run": that starts a database which this
		// command finds only when told where it is.
		return nil, fmt.Errorf(`no database: the %s are in PostgreSQL, not in an instance; set --database-url or OPSQ_DATABASE_URL (postgres://user@host:5432/db), or, for the development PostgreSQL of "make run", --dev-cluster .data/pg (OPSQ_DEV_CLUSTER)`, what)
	}
	log, err := newLogger("warn", stderr)
	if err != nil {
		return nil, err
	}
	url, err := databaseURL(ctx, dbURL, devDir, log)
	if err != nil {
		return nil, err
	}
	return newPool(ctx, url, nil)
}
