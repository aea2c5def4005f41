package tokens

import (
	"testing"

	"go.uber.org/goleak"

	"opsq/sql/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Wrap(m))
}
