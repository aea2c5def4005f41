package opsqtype

// ShardOf is the shard of chunk (submissionID, chunkIndex) in a database of shardCount
// shards. A submission's chunks go round-robin over all shards, starting at a shard that a
// hash of the submission id picks, so every submission is spread evenly (its chunks on any
// two shards differ in number by at most one) and small submissions land on random shards.
func ShardOf(submissionID int64, chunkIndex int, shardCount int) int {
	return int((mix(submissionID)%uint64(shardCount) + uint64(chunkIndex)) % uint64(shardCount))
}

// RandomOrder is the chunk's 16-bit position on the ring that the random strategy cuts at a
// random offset ("cutting the deck"). The chunks of a submission on one shard come in runs
// of randomRun consecutive positions, and the runs are spread over the whole ring by a
// golden-ratio stride from a start that a hash of the submission id picks (the id encodes
// its insertion time). So a random cut lands in about the same place of a large submission
// as of many small ones, consumers cutting at different places rarely meet, and the index
// on random_order is still filled in ascending runs of randomRun entries, which keeps
// inserts cheap (a random value per chunk costs markedly more: migrations/README.md).
func RandomOrder(submissionID int64, chunkIndex int, shardCount int) int {
	start := mix(submissionID) >> 48 // the top 16 bits; ShardOf uses the low bits
	// Each shard starts elsewhere, so that the few runs of a small submission on a window
	// of shards are spread over the ring too.
	start += uint64(ShardOf(submissionID, chunkIndex, shardCount)) * shardStride
	pos := uint64(chunkIndex / shardCount)
	return int((start + pos/randomRun*goldenStride + pos%randomRun) & 0xFFFF)
}

const (
	// randomRun is the length of a run of consecutive random_order positions.
	randomRun = 64
	// goldenStride is 65536 divided by the golden ratio, made odd: successive runs land far
	// apart and fill the ring evenly.
	goldenStride = 40503
	// shardStride offsets the shards' starts: 65536·(√2−1), made odd, unrelated to
	// goldenStride so that the runs of different shards do not line up.
	shardStride = 27145
)

// mix is the splitmix64 finalizer: every bit of the id affects every bit of the result.
func mix(id int64) uint64 {
	z := uint64(id)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
