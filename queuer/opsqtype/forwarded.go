package opsqtype

// The headers of a request that one instance forwards to another (DESIGN.md §8, between
// instances): the API reads them, the engine's peers write them.

// ForwardedHeader marks a request that one instance forwarded to another; it is answered
// from the receiving instance's own shards only.
const ForwardedHeader = "Opsq-Forwarded"

// ForwardedSignatureHeader carries the signature of a forwarded request, made with the
// cluster key (DESIGN.md §8): a request marked forwarded without a valid one is refused.
const ForwardedSignatureHeader = "Opsq-Forwarded-Signature"

// ForwardedCallerHeader carries, under the signature of a forwarded request, the identity
// of the caller the forwarding instance authenticated (its key's name and role), in place
// of the caller's key, which never leaves the instance it was given to.
const ForwardedCallerHeader = "Opsq-Forwarded-Caller"

// ForwardedToHeader names, under the signature of a forwarded request, the id of the
// instance it is sent to: an instance refuses a request signed for another, so that a
// copy of one cannot be replayed to the rest of the cluster (issue 31).
const ForwardedToHeader = "Opsq-Forwarded-To"

// ForwardedDigestHeader carries the SHA-256 of a forwarded request's body, in lower-case
// hex, which the signature covers: the receiving instance checks the signature before it
// reads a byte of the body, and the body against it after (issue 31, finding 7).
const ForwardedDigestHeader = "Opsq-Forwarded-Digest"
