package opsqtype

import (
	"fmt"
	"unicode/utf8"
)

// ErrorMax is how much of one failed attempt's error is kept; a longer one is cut, and the
// cut marked (CutError).
const ErrorMax = 8 << 10

// CutError cuts a failed attempt's error to ErrorMax bytes, on a rune boundary, and marks
// the cut with how many bytes it dropped: "… [cut: 1234 bytes]". The api cuts a fail's
// error with it; the engine cuts again what reaches it from elsewhere (harmless on a cut
// one, which fits).
func CutError(s string) string {
	if len(s) <= ErrorMax {
		return s
	}
	// The mark's length depends on the number it holds, which depends on where the cut
	// is: reserve room for the longest number a cut of s can give.
	keep := ErrorMax - len(cutMark(len(s)))
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + cutMark(len(s)-keep)
}

func cutMark(n int) string { return fmt.Sprintf("… [cut: %d bytes]", n) }
