package wire

import "testing"

func TestValidTraceparent(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		in   string
		want bool
	}{
		"the W3C example":  {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		"not sampled":      {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		"a later version":  {"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		"empty":            {"", false},
		"upper-case hex":   {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
		"version ff":       {"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		"zero trace id":    {"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		"zero parent id":   {"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		"too long":         {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", false},
		"too short":        {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1", false},
		"dashes misplaced": {"00-4bf92f3577b34da6a3ce929d0e0e47360-0f067aa0ba902b7-01", false},
		"not hex":          {"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", false},
		"spaces around":    {" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0", false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := ValidTraceparent(tc.in); got != tc.want {
				t.Errorf("ValidTraceparent(%q) = %v; want %v", tc.in, got, tc.want)
			}
		})
	}
}
