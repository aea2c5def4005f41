package bench

import (
	"opsq/api/apikeys"
	"opsq/api/wire"
)

// The API keys of the abuse workload (DESIGN.md §8), when the instances run with
// OPSQ_AUTH=required: a submission without a key (401), a reserve with a key no instance
// knows (401), a consumer's key submitting (403), and a reserve marked as forwarded by
// another instance but not signed (401). The hostile inputs case (abuse_inputs.go) sends
// them.

// authRequests lists the requests without a valid key, with a key of the wrong role, and
// marked forwarded without a signature.
func authRequests() []hostileRequest {
	submit := mustJSON(map[string]any{"chunks": []string{"x"}, "strategic_metadata": abuseTagged("auth")})
	reserve := mustJSON(map[string]any{"max": 1, "strategy": strategyFor("abuse-none")})
	noKey, forged, wrongRole, unsigned := postJSON("no API key", "/v1/submissions", 401, submit), postJSON("unknown API key", "/v1/reserve", 401, reserve),
		postJSON("consumer key submitting", "/v1/submissions", 403, submit), postJSON("reserve marked forwarded, unsigned", "/v1/reserve", 401, reserve)
	noKey.noKey, forged.forgedKey, wrongRole.asRole = true, true, apikeys.Consumer
	unsigned.header = map[string]string{wire.ForwardedHeader: "opsq-abuse"}
	return []hostileRequest{noKey, forged, wrongRole, unsigned}
}
