package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"opsq/api/wire"
	"opsq/cmd/opsq/progress"
)

// The big reserves of the abuse workload (DESIGN.md §3: a reserve answer stops adding
// chunks at OPSQ_MAX_RESERVE_BYTES): a reserve of max 10 000 (fewer if --abuse-big-chunks
// is smaller) over a backlog of big chunks, each of 1 KiB under 60 KiB of submission
// metadata, both within the bounds. It is sent twice, to the instances in turn, and
// answered 200; its row notes the size of each answer and the chunks it held. The hostile
// inputs case (abuse_inputs.go) sends it; prepareBig makes the backlog.

// Sizes of the big backlog: the metadata of each submission, and each chunk's input.
const (
	abuseBigMetadata = 60 << 10
	abuseBigInput    = 1 << 10
)

// bigReserve is the reserve of max bigMax over the big backlog, whose note says the size
// of the answer and how many chunks it held.
func bigReserve(bigMax int) hostileRequest {
	big := postJSON(fmt.Sprintf("reserve max %d over big chunks", bigMax), "/v1/reserve", 200,
		mustJSON(map[string]any{"max": bigMax, "strategy": strategyFor("abuse-big"), "lease": "1m"}))
	big.answer = func(body io.Reader) string {
		var n int64
		var chunks int
		buf := make([]byte, 64<<10)
		for {
			k, err := body.Read(buf)
			n += int64(k)
			chunks += bytes.Count(buf[:k], []byte(`"token"`))
			if err != nil {
				break
			}
		}
		return fmt.Sprintf("%s answer, %d chunks", progress.Bytes(n), chunks)
	}
	return big
}

// prepareBig submits --abuse-big-chunks chunks of abuseBigInput bytes under
// abuseBigMetadata bytes of metadata (both within the bounds), for the reserve of max
// 10 000 over them.
func (a *abuseRun) prepareBig(ctx context.Context) ([]string, error) {
	n := a.r.cfg.AbuseBigChunks
	metadata := strings.Repeat("m", abuseBigMetadata)
	input := strings.Repeat("i", abuseBigInput)
	var ids []string
	for left := n; left > 0; {
		k := min(left, 1000)
		chunks := make([]string, k)
		for i := range chunks {
			chunks[i] = input
		}
		created, err := a.clients[0].Submit(ctx, wire.Submission{SubmissionHeader: wire.SubmissionHeader{
			Metadata: metadata, StrategicMetadata: benchTagged("abuse-big")}, Chunks: chunks})
		if err != nil {
			return ids, fmt.Errorf("submitting the big backlog: %w", err)
		}
		ids = append(ids, created.ID)
		left -= k
	}
	return ids, nil
}
