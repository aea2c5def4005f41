package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Flags whose defaults come from OPSQ_* environment variables, so that every setting can be
// given either way; a flag on the command line wins over the variable.

func envString(fs *flag.FlagSet, p *string, name, env, def, usage string) {
	if v, ok := os.LookupEnv(env); ok {
		def = v
	}
	fs.StringVar(p, name, def, fmt.Sprintf("%s (%s)", usage, env))
}

func envBool(fs *flag.FlagSet, p *bool, name, env string, def bool, usage string) error {
	if v, ok := os.LookupEnv(env); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s=%q: must be true or false", env, v)
		}
		def = b
	}
	fs.BoolVar(p, name, def, fmt.Sprintf("%s (%s)", usage, env))
	return nil
}

func envInt(fs *flag.FlagSet, p *int, name, env string, def int, usage string) error {
	if v, ok := os.LookupEnv(env); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s=%q: must be an integer", env, v)
		}
		def = n
	}
	fs.IntVar(p, name, def, fmt.Sprintf("%s (%s)", usage, env))
	return nil
}

// byteSize is a flag value of bytes: a plain number, or one with a KiB, MiB or GiB suffix.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(v string) error {
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(v, suffix) {
			v, mult = strings.TrimSuffix(v, suffix), m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("must be a positive number of bytes such as 1048576 or 1MiB")
	}
	*b = byteSize(n * mult)
	return nil
}

func envBytes(fs *flag.FlagSet, p *byteSize, name, env string, def int64, usage string) error {
	*p = byteSize(def)
	if v, ok := os.LookupEnv(env); ok {
		if err := p.Set(v); err != nil {
			return fmt.Errorf("%s=%q: %w", env, v, err)
		}
	}
	fs.Var(p, name, fmt.Sprintf("%s (%s, default %d)", usage, env, def))
	return nil
}

func envDuration(fs *flag.FlagSet, p *time.Duration, name, env string, def time.Duration, usage string) error {
	if v, ok := os.LookupEnv(env); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s=%q: must be a duration such as 30s", env, v)
		}
		def = d
	}
	fs.DurationVar(p, name, def, fmt.Sprintf("%s (%s)", usage, env))
	return nil
}
