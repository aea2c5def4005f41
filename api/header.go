package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"opsq/api/wire"
	"opsq/queuer"
)

// Bounds of the submission header, checked in parseHeader.
const (
	maxRetriesLimit        = 1_000_000
	maxIdempotencyKeyBytes = 1024
)

// parseHeader validates the fields of a submission other than "chunks" and returns them.
// fields is the body decoded one level deep; each field is decoded on its own so that every
// error names its field. allowChunks says whether a "chunks" field may be present (the JSON
// form) or not (the NDJSON header line). maxChunks bounds chunk_count; now is when a
// not_before given as a duration counts from.
func parseHeader(fields map[string]json.RawMessage, allowChunks bool, maxChunks int64, now time.Time) (queuer.NewSubmission, error) {
	var sub queuer.NewSubmission
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names) // report the same error for the same body
	for _, name := range names {
		raw := fields[name]
		if isNull(raw) {
			continue // a null field is an absent field
		}
		switch name {
		case "chunks":
			if !allowChunks {
				return sub, badRequest("chunks: not allowed in the NDJSON header line; send each chunk on a line of its own")
			}
		case "metadata":
			if err := json.Unmarshal(raw, &sub.Metadata); err != nil {
				return sub, badRequest("metadata: must be a string")
			}
			if err := checkText("metadata", raw, sub.Metadata, MaxMetadataBytes); err != nil {
				return sub, err
			}
		case "strategic_metadata":
			m, err := parseStrategicMetadata(raw)
			if err != nil {
				return sub, err
			}
			sub.StrategicMetadata = m
		case "priority":
			// -2^63 has no negation, and custom_priority's index holds -priority.
			if err := json.Unmarshal(raw, &sub.Priority); err != nil || sub.Priority == math.MinInt64 {
				return sub, badRequest("priority: must be an integer between %d and %d", int64(-math.MaxInt64), int64(math.MaxInt64))
			}
		case "max_retries":
			var n int
			if err := json.Unmarshal(raw, &n); err != nil || n < 0 || n > maxRetriesLimit {
				return sub, badRequest("max_retries: must be an integer between 0 and %d", maxRetriesLimit)
			}
			sub.MaxRetries = &n
		case "idempotency_key":
			if err := json.Unmarshal(raw, &sub.IdempotencyKey); err != nil {
				return sub, badRequest("idempotency_key: must be a string")
			}
			if sub.IdempotencyKey == "" || len(sub.IdempotencyKey) > maxIdempotencyKeyBytes || strings.ContainsRune(sub.IdempotencyKey, 0) {
				return sub, badRequest("idempotency_key: must be 1 to %d bytes without NUL characters", maxIdempotencyKeyBytes)
			}
			if err := checkText("idempotency_key", raw, sub.IdempotencyKey, 0); err != nil {
				return sub, err
			}
		case "prefix":
			if err := json.Unmarshal(raw, &sub.Prefix); err != nil || sub.Prefix == "" || strings.ContainsRune(sub.Prefix, 0) {
				return sub, badRequest("prefix: must be a non-empty string without NUL characters")
			}
			if err := checkText("prefix", raw, sub.Prefix, MaxPrefixBytes); err != nil {
				return sub, err
			}
		case "chunk_count":
			if err := json.Unmarshal(raw, &sub.ChunkCount); err != nil || sub.ChunkCount < 0 || sub.ChunkCount > maxChunks {
				return sub, badRequest("chunk_count: must be an integer between 0 and %d (OPSQ_MAX_SUBMISSION_CHUNKS)", maxChunks)
			}
		case "on_failure":
			policy, echo, err := parseOnFailure(raw)
			if err != nil {
				return sub, err
			}
			sub.Lifecycle.Policy, sub.Lifecycle.OnFailure = policy, echo
		case "retry_backoff":
			b, err := parseBackoff(raw)
			if err != nil {
				return sub, err
			}
			sub.Lifecycle.Backoff = b
		case "tenant":
			if err := json.Unmarshal(raw, &sub.Tenant); err != nil {
				return sub, badRequest("tenant: must be a string")
			}
			if err := queuer.CheckTenant(sub.Tenant); err != nil {
				return sub, badRequest("tenant: %v", err)
			}
		case "not_before":
			t, err := parseNotBefore(raw, now)
			if err != nil {
				return sub, err
			}
			sub.Lifecycle.NotBefore = t
		case "after":
			ids, err := parseAfter(raw)
			if err != nil {
				return sub, err
			}
			sub.After = ids
		case "after_policy":
			if err := json.Unmarshal(raw, &sub.AfterPolicy); err != nil || (sub.AfterPolicy != wire.AfterCompleted && sub.AfterPolicy != wire.AfterFinished) {
				return sub, badRequest("after_policy: must be %q (the default: start once every parent completed) or %q (once every parent finished, whatever its state), not %s",
					wire.AfterCompleted, wire.AfterFinished, abbreviate(raw))
			}
		default:
			return sub, badRequest("%s; a submission has chunks, metadata, strategic_metadata, priority, max_retries, idempotency_key, prefix, chunk_count, on_failure, retry_backoff, not_before, tenant, after and after_policy", unknownField(name))
		}
	}
	_, hasChunks := fields["chunks"]
	_, hasCount := fields["chunk_count"]
	switch {
	case sub.Prefix != "" && hasChunks && !isNull(fields["chunks"]):
		return sub, badRequest("chunks: not allowed with prefix (object-storage mode has chunk_count instead)")
	case sub.Prefix != "" && !hasCount:
		return sub, badRequest("chunk_count: required with prefix")
	case sub.Prefix == "" && hasCount:
		return sub, badRequest("chunk_count: allowed only with prefix")
	}
	return sub, nil
}

// parseAfter reads after: an array of at most wire.MaxAfter submission ids, each a decimal
// string as the API writes ids. Whether each names a submission of the tenant the engine
// checks (queuer.ParentError).
func parseAfter(raw json.RawMessage) ([]int64, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("after: must be an array of submission ids (decimal strings), not %s", abbreviate(raw))
	}
	if len(items) > wire.MaxAfter {
		return nil, badRequest("after: %d parents is over the limit of %d", len(items), wire.MaxAfter)
	}
	ids := make([]int64, len(items))
	for i, item := range items {
		var v string
		if err := json.Unmarshal(item, &v); err != nil {
			return nil, badRequest("after[%d]: must be a submission id as a decimal string, such as \"123\", not %s", i, abbreviate(item))
		}
		id, err := parseID(v, fmt.Sprintf("after[%d]", i))
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	return ids, nil
}

// parseStrategicMetadata checks that raw is an object of at most MaxStrategicKeys integer or
// string values, its keys and string values text within their bounds, and returns it in
// canonical form.
func parseStrategicMetadata(raw json.RawMessage) (json.RawMessage, error) {
	// The keys are checked in raw, before decoding replaces what is not UTF-8.
	if p := textProblem(raw); p != "" {
		return nil, badRequest("strategic_metadata: %s", p)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, badRequest("strategic_metadata: must be an object of integer or string values")
	}
	if len(fields) > MaxStrategicKeys {
		return nil, badRequest("strategic_metadata: %d keys is over the limit of %d", len(fields), MaxStrategicKeys)
	}
	keys := make([]string, 0, len(fields))
	for key := range fields {
		keys = append(keys, key)
	}
	sort.Strings(keys) // report the same error for the same body
	values := make(map[string]wire.MetadataValue, len(fields))
	for _, key := range keys {
		v := fields[key]
		if key == "" || len(key) > MaxStrategicKeyBytes || strings.ContainsRune(key, 0) {
			return nil, badRequest("strategic_metadata: a key must be 1 to %d bytes without NUL characters, not %q", MaxStrategicKeyBytes, abbreviate([]byte(key)))
		}
		if key == queuer.TenantKey {
			return nil, badRequest("strategic_metadata: the key %s is reserved: it is the submission's tenant (the field tenant, or the producer key's)", key)
		}
		var mv wire.MetadataValue
		if err := json.Unmarshal(v, &mv); err != nil {
			return nil, badRequest("%s: must be an integer (int64) or a string, not %s", strategicField(key), abbreviate(v))
		}
		if mv.IsString() {
			if err := checkText(strategicField(key), nil, mv.Str(), MaxStrategicValueBytes); err != nil {
				return nil, err
			}
		}
		values[key] = mv
	}
	return json.Marshal(values)
}

// plainName matches a field name that can start an error message as it is.
var plainName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// unknownField says that a body has a field of that name it should not have, naming the
// field first when its name allows it.
func unknownField(name string) string {
	if plainName.MatchString(name) {
		return name + ": unknown field"
	}
	return "body: unknown field " + strconv.Quote(abbreviate([]byte(name)))
}

// strategicField names the strategic metadata value of key in an error message:
// strategic_metadata.mode, or strategic_metadata["a key"] when the key is no plain name.
func strategicField(key string) string {
	if plainName.MatchString(key) {
		return "strategic_metadata." + key
	}
	return "strategic_metadata[" + strconv.Quote(abbreviate([]byte(key))) + "]"
}

func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// abbreviate quotes at most 40 bytes of raw input for an error message.
func abbreviate(raw []byte) string {
	if len(raw) > 40 {
		return fmt.Sprintf("%s…", raw[:40])
	}
	return string(raw)
}
