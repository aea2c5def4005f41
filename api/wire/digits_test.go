package wire

import (
	"math"
	"testing"
)

func TestGroupDigits(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 312000: "312,000", 1234567: "1,234,567",
		-1234: "-1,234", -999: "-999", math.MinInt64: "-9,223,372,036,854,775,808"} {
		if got := GroupDigits(in, ","); got != want {
			t.Errorf("GroupDigits(%d, \",\") = %q; want %q", in, got, want)
		}
	}
	if got := GroupDigits(1234567, "\u00a0"); got != "1\u00a0234\u00a0567" {
		t.Errorf("GroupDigits with a no-break space = %q", got)
	}
}
