package claims

import (
	"testing"

	opsqsql "opsq/sql"
)

// The claims transactions run SERIALIZABLE with the short timeouts of retry.go.
func TestRetrySerializableSettings(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	var iso, lock, idle string
	err := retrySerializable(t.Context(), f.pool, func(q opsqsql.Queries) error {
		s, err := q.TransactionSettings(t.Context())
		iso, lock, idle = s.Isolation, s.LockTimeout, s.IdleInTransactionSessionTimeout
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if iso != "serializable" || lock != lockTimeout || idle != idleInTxTimeout {
		t.Errorf("isolation %s, lock_timeout %s, idle_in_transaction_session_timeout %s; want serializable, %s, %s", iso, lock, idle, lockTimeout, idleInTxTimeout)
	}
	// SET LOCAL ends with the transaction.
	if err := f.pool.QueryRow(t.Context(), "SELECT current_setting('lock_timeout')").Scan(&lock); err != nil || lock != "0" {
		t.Errorf("lock_timeout after the transaction = %s, %v; want 0", lock, err)
	}
}
