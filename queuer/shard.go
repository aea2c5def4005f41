package queuer

// ShardOf is the shard of chunk (submissionID, chunkIndex) in a database of shardCount
// shards. A submission's chunks go round-robin over all shards, starting at a shard that a
// hash of the submission id picks, so every submission is spread evenly (its chunks on any
// two shards differ in number by at most one) and small submissions land on random shards.
func ShardOf(submissionID int64, chunkIndex int, shardCount int) int {
	return int((mix(submissionID)%uint64(shardCount) + uint64(chunkIndex)) % uint64(shardCount))
}

// RandomOrder is the chunk's 16-bit position on the ring that the random strategy cuts at a
// random offset ("cutting the deck"). A submission starts at a point that a hash of its id
// (which encodes its insertion time) picks, and its chunks on one shard follow each other
// on the ring. So a random cut lands on any available chunk about equally often, and the
// index on random_order is filled in ascending runs, which keeps inserts cheap (a random
// value per chunk costs twice as much at insert: measured in migrations/README.md).
func RandomOrder(submissionID int64, chunkIndex int, shardCount int) int {
	start := mix(submissionID) >> 48 // the top 16 bits; ShardOf uses the low bits
	return int((start + uint64(chunkIndex/shardCount)) & 0xFFFF)
}

// mix is the splitmix64 finalizer: every bit of the id affects every bit of the result.
func mix(id int64) uint64 {
	z := uint64(id)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
