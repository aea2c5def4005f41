package queuer

import "time"

// Clock tells the engine the time where tests need to move it: when leases end (reserve,
// extend, and the expirer, which releases the leases that ended), where retention cuts,
// and how old a tip to forwarding is. The goroutines still wake on real timers (the
// expirer every expiryTick) and read the clock then. Now must be safe for concurrent use.
type Clock interface {
	Now() time.Time
}

// systemClock is the time of the system, the default Clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
