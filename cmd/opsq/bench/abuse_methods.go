package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"opsq/cmd/opsq/progress"
)

// The invented methods of the abuse workload (DESIGN.md §3 and §8): --abuse-methods requests to
// /v1/submissions, each with an HTTP method of its own (ABUSE00000, ABUSE00001, …), each
// answered 405, and the size of GET /metrics before and after them, in the note of their
// row: a series per method seen would make it grow.

// inventedMethodsName names the invented methods in the report.
const inventedMethodsName = "invented HTTP methods"

// inventedMethodsCase is the case of the invented methods.
func (a *abuseRun) inventedMethodsCase() abuseCase {
	return abuseCase{
		run: a.inventMethods,
		report: func() {
			a.reportAnswers(inventedMethodsName, "405", func(status string) bool { return status == "405" })
		},
	}
}

// inventMethods sends --abuse-methods requests with invented HTTP methods, and measures
// /metrics before and after.
func (a *abuseRun) inventMethods(ctx context.Context) {
	before := a.metricsSize(ctx)
	for i := range a.r.cfg.AbuseMethods {
		if ctx.Err() != nil {
			return
		}
		inst := a.r.env.instances[i%len(a.r.env.instances)]
		req, _ := http.NewRequestWithContext(ctx, fmt.Sprintf("ABUSE%05d", i), inst.url+"/v1/submissions", nil)
		resp, err := a.hc.Do(req)
		if err != nil {
			a.answered(inventedMethodsName, "error")
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		a.answered(inventedMethodsName, strconv.Itoa(resp.StatusCode))
	}
	a.note(inventedMethodsName, "/metrics %s before, %s after", progress.Bytes(before), progress.Bytes(a.metricsSize(ctx)))
}

// metricsSize returns the size of GET /metrics of the first instance.
func (a *abuseRun) metricsSize(ctx context.Context) int64 {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.r.env.instances[0].url+"/metrics", nil)
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, resp.Body)
	return n
}
