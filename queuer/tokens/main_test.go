package tokens

import (
	"testing"

	"go.uber.org/goleak"

	"opsq/migrations/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Wrap(m))
}
