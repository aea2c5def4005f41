// Package opsqtype is opsq's vocabulary: the words that the engine, the wire (api/wire)
// and the clients share, and that none of them owns — a submission's states, what a
// complete, fail or extend did for one token, a strategic metadata value, where a chunk's
// row lives (its shard and its place on the random ring), and how much of a failed
// attempt's error is kept. It imports nothing of opsq, holds no state and does no I/O, so
// that every layer may use it without reaching into another (as River's rivertype).
package opsqtype
