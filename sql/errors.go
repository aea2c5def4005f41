package sql

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The errors of the statements, translated here once (STYLE.md, "Translate database errors
// once"): a row asked for that does not exist (ErrNotFound), a write the fence refused
// (*FenceError), a database that cannot be reached (IsUnavailable). The API maps them to
// status codes; nothing between translates them again.

// ErrNotFound means that a statement which reads one row found none.
var ErrNotFound = errors.New("not found")

// ErrShardLost means that an instance no longer holds a shard under the generation it
// wrote with: another owner or an operator took it, or it was disabled. A *FenceError is
// ErrShardLost.
var ErrShardLost = errors.New("shard lost")

// FenceError is a write refused by its fence (Temporal's ShardOwnershipLostError): it
// was made under the claim of Shard at Generation, and the shard is no longer held under
// that generation, so the write did nothing. errors.Is(err, ErrShardLost) holds for it.
type FenceError struct {
	Shard      int
	Generation int64
}

func (e *FenceError) Error() string {
	return fmt.Sprintf("shard %d is no longer held under generation %d: the fence refused the write", e.Shard, e.Generation)
}

// Is makes a FenceError ErrShardLost.
func (e *FenceError) Is(target error) bool { return target == ErrShardLost }

// ErrUnavailable means the database cannot be reached now (it is down, restarting, or
// refusing connections): the request may succeed if retried a little later. The API
// answers 503 with Retry-After, never 500 (DESIGN.md §3). Code that finds an outage
// without a driver error returns it; driver errors are recognized by IsUnavailable
// wherever they come from, so that no call site has to translate them.
var ErrUnavailable = errors.New("database unavailable")

// IsUnavailable reports whether err means that the database cannot be reached now:
// ErrUnavailable itself, a failed connection attempt (which is also how the pool reports
// an acquire while the server is down), a connection that was closed or broke (end of
// file, network errors), or a server error of SQLSTATE class 08 (connection exception),
// 57P01 (admin_shutdown), 57P02 (crash_shutdown), 57P03 (cannot_connect_now) or 25006
// (read_only_sql_transaction: a host that turned read-only is lost too, DESIGN.md §4). A server
// error of any other SQLSTATE is not, even inside a failed connection attempt (a wrong
// password is not an outage). Context cancellations and deadlines are not either: they
// are the caller's.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return unavailableState(pgErr.Code) || citusNodeLost(pgErr)
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr),
		errors.Is(err, pgconn.ErrConnClosed),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.As(err, &netErr) && !netErr.Timeout():
		return true
	}
	return false
}

// readOnlyState is SQLSTATE 25006, read_only_sql_transaction: the session's host refuses
// writes. opsq writes only in read-write transactions, so it means the host, not the
// statement: a primary demoted by a failover manager, or a standby.
const readOnlyState = "25006"

// citusNodeLost reports whether a Citus coordinator's error says that a worker it needed
// cannot be reached: Citus reports most such failures as connection exceptions (class 08),
// but a connection lost inside a transaction or a COPY as an internal error (XX000) whose
// message says so (remote_transaction.c, multi_copy.c in Citus 13). The worker may be back
// in a moment, like a restarted server.
func citusNodeLost(e *pgconn.PgError) bool {
	return e.Code == "XX000" && (strings.HasPrefix(e.Message, "failure on connection marked as essential") ||
		strings.HasPrefix(e.Message, "could not connect to any active placements"))
}

// unavailableState reports whether a SQLSTATE says the server cannot serve now.
func unavailableState(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03", readOnlyState:
		return true
	}
	return strings.HasPrefix(code, "08")
}

// notFound translates pgx.ErrNoRows, a single-row read that found nothing, to ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}
