package wire

import (
	"strconv"
	"strings"
)

// GroupDigits writes n with its thousands separated by sep: "1 234 567". The CLI
// separates them with spaces, the dashboard with no-break spaces (so that a number never
// breaks across lines); both write numbers through here, so that they agree.
func GroupDigits(n int64, sep string) string {
	s := strconv.FormatInt(n, 10)
	digits := strings.TrimPrefix(s, "-")
	var b strings.Builder
	b.Grow(len(s) + len(digits)/3*len(sep))
	if len(digits) < len(s) {
		b.WriteByte('-')
	}
	for i := range len(digits) {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteString(sep)
		}
		b.WriteByte(digits[i])
	}
	return b.String()
}
