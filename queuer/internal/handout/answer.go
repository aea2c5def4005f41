package handout

// A reserve's byte bound (Request.MaxBytes) counts a chunk as the answer writes
// it: JSON, where a string can take up to six times its bytes (\u escapes), plus the
// fields every chunk carries. So the bound holds for the answer as sent, and a forwarded
// answer fits the read limit of the instance that forwarded it (peerMaxAnswerBytes).

// answerChunkOverhead is what one chunk of an answer takes besides its input, prefix,
// metadata and strategic metadata: the field names, the token, the ids, the retries, the
// expiry and the punctuation (about 260 bytes; rounded up).
const answerChunkOverhead = 320
