package strategy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// The JSON form, DESIGN.md §5:
//
//	"random" | "oldest_first" | "newest_first" | "custom_priority"
//	{"select_only": {"key": "mode", "value": "preview", "then": <strategy>}}
//	{"prefer_distinct": {"key": "company_id", "max": 1, "then": <strategy>}}
//	{"max_simultaneous": {"key": "company_id", "max": 5, "then": <strategy>}}
//	{"or_else": {"first": <strategy>, "fallback": <strategy>}}
//	{"rate_limit": {"key": "company_id", "per_second": 10, "burst": 20, "then": <strategy>}}
//	{"weighted_fair": {"key": "@tenant", "weights": {"acme": 3, "globex": 1}, "default_weight": 1, "then": <strategy>}}
//
// A name in weights is read as a value of the text form: one that is an integer ("42")
// is the int64 42, any other a string. weights may be {} and default_weight left out (1).
//
// "then" may be left out (or null): it is then "random". Every other parameter is
// required. An object names exactly one strategy; unknown and repeated fields are errors.

// params lists the fields of the JSON object of each kind with children, in JSON order.
var params = map[Kind][]string{
	SelectOnly:      {"key", "value", "then"},
	PreferDistinct:  {"key", "max", "then"},
	MaxSimultaneous: {"key", "max", "then"},
	OrElse:          {"first", "fallback"},
	RateLimit:       {"key", "per_second", "burst", "then"},
	WeightedFair:    {"key", "weights", "default_weight", "then"},
}

// Parse reads a strategy's JSON form. path prefixes the node paths in errors, usually
// "strategy". Absent (empty or null) JSON is the default strategy. Errors are *Error.
func Parse(raw json.RawMessage, path string) (Node, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return Default, nil
	}
	if !json.Valid(raw) {
		return Node{}, errorf(path, "not valid JSON")
	}
	return parseJSON(raw, path, 1)
}

// parseJSON reads the node at path, depth nodes from the root, from valid JSON.
func parseJSON(raw json.RawMessage, path string, depth int) (Node, error) {
	if err := checkDepth(path, depth); err != nil {
		return Node{}, err
	}
	switch raw[0] {
	case '"':
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return Node{}, errorf(path, "not valid JSON")
		}
		switch k := Kind(name); {
		case k.Leaf():
			return Node{Kind: k}, nil
		case k.known():
			return Node{}, errorf(path, "%s takes parameters: %s", k, jsonTemplate(k))
		}
		return Node{}, unknownJSONName(path, name)
	case '{':
		return parseJSONObject(raw, path, depth)
	}
	return Node{}, errorf(path, `must be a strategy name such as "random" or an object such as {"select_only": {…}}, not %s`, abbreviate(raw))
}

// parseJSONObject reads a node of the form {"name": {parameters}}.
func parseJSONObject(raw json.RawMessage, path string, depth int) (Node, error) {
	fields, err := objectFields(raw, path)
	if err != nil {
		return Node{}, err
	}
	switch len(fields) {
	case 0:
		return Node{}, errorf(path, "an empty object names no strategy")
	case 1:
	default:
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = quote(f.name)
		}
		return Node{}, errorf(path, "must name exactly one strategy; got %d keys: %s", len(fields), strings.Join(names, ", "))
	}
	k, body := Kind(fields[0].name), fields[0].raw
	n := Node{Kind: k}
	at := func(field string) string { return n.childPath(path, field) }
	switch {
	case !k.known():
		return Node{}, unknownJSONName(path+"."+fields[0].name, fields[0].name)
	case k.Leaf():
		return Node{}, errorf(path+"."+string(k), "%s takes no parameters: write %q", k, k)
	case body[0] != '{':
		return Node{}, errorf(path+"."+string(k), "must be an object: %s", jsonTemplate(k))
	}
	pf, err := objectFields(body, path+"."+string(k))
	if err != nil {
		return Node{}, err
	}
	got := make(map[string]json.RawMessage, len(pf))
	var unknown []string
	for _, f := range pf {
		if !slices.Contains(params[k], f.name) {
			unknown = append(unknown, quote(f.name))
		}
		if !bytes.Equal(f.raw, []byte("null")) {
			got[f.name] = f.raw
		}
	}
	if len(unknown) > 0 {
		plural := ""
		if len(unknown) > 1 {
			plural = "s"
		}
		return Node{}, errorf(path+"."+string(k), "unknown field%s %s; %s takes %s",
			plural, strings.Join(unknown, ", "), k, strings.Join(params[k], ", "))
	}
	if k != OrElse { // every other kind with parameters has a key
		v, ok := got["key"]
		switch {
		case !ok:
			return Node{}, errorf(at("key"), "required")
		case v[0] != '"':
			return Node{}, errorf(at("key"), "must be a non-empty string")
		}
		_ = json.Unmarshal(v, &n.Key) // valid JSON string
		if err := checkKey(at("key"), n.Key); err != nil {
			return Node{}, err
		}
	}
	switch k {
	case SelectOnly:
		v, ok := got["value"]
		if !ok {
			return Node{}, errorf(at("value"), "required")
		}
		if n.Value, err = parseJSONValue(v, at("value")); err != nil {
			return Node{}, err
		}
	case PreferDistinct, MaxSimultaneous:
		v, ok := got["max"]
		if !ok {
			return Node{}, errorf(at("max"), "required")
		}
		if n.Max, err = parseMax(string(v), at("max")); err != nil {
			return Node{}, err
		}
	case RateLimit:
		v, ok := got["per_second"]
		if !ok {
			return Node{}, errorf(at("per_second"), "required")
		}
		if n.PerSecond, err = parseRate(string(v), at("per_second")); err != nil {
			return Node{}, err
		}
		if v, ok = got["burst"]; !ok {
			return Node{}, errorf(at("burst"), "required")
		}
		if n.Burst, err = parseBurst(string(v), at("burst")); err != nil {
			return Node{}, err
		}
	case WeightedFair:
		v, ok := got["weights"]
		if !ok {
			return Node{}, errorf(at("weights"), "required")
		}
		if n.Weights, err = parseJSONWeights(v, at("weights")); err != nil {
			return Node{}, err
		}
		n.DefaultWeight = 1
		if v, ok = got["default_weight"]; ok {
			if n.DefaultWeight, err = parseWeight(string(v), at("default_weight")); err != nil {
				return Node{}, err
			}
		}
	}
	for _, c := range n.children() {
		v, ok := got[c.field]
		var child Node
		switch {
		case ok:
			child, err = parseJSON(v, at(c.field), depth+1)
		case c.field == "then":
			child, err = Default, checkDepth(at(c.field), depth+1)
		default:
			err = errorf(at(c.field), "required")
		}
		if err != nil {
			return Node{}, err
		}
		switch c.field {
		case "then":
			n.Then = &child
		case "first":
			n.First = &child
		case "fallback":
			n.Fallback = &child
		}
	}
	return n, nil
}

// parseJSONWeights reads weighted_fair's weights, an object of a value's text form to
// its weight.
func parseJSONWeights(raw json.RawMessage, path string) ([]Weight, error) {
	if raw[0] != '{' {
		return nil, errorf(path, `must be an object of values to weights, such as {"acme": 3, "globex": 1}`)
	}
	fields, err := objectFields(raw, path)
	if err != nil {
		return nil, err
	}
	if len(fields) > MaxWeights {
		return nil, errorf(path, "names %d values; at most %d", len(fields), MaxWeights)
	}
	ws := make([]Weight, 0, len(fields))
	for _, f := range fields {
		v := weightValue(f.name)
		at := path + "." + valueText(v)
		if err := checkValue(v, at); err != nil {
			return nil, err
		}
		w, err := parseWeight(string(f.raw), at)
		if err != nil {
			return nil, err
		}
		ws = append(ws, Weight{Value: v, Weight: w})
	}
	if dup, ok := sortWeights(ws); !ok {
		return nil, errorf(path+"."+valueText(dup), "names the value %s more than once", dup)
	}
	return ws, nil
}

// weightValue is the value a name in the JSON form's weights stands for: an int64 if it
// is an integer in range, else the string.
func weightValue(name string) Value {
	if isInteger(name) {
		if i, err := strconv.ParseInt(name, 10, 64); err == nil {
			return IntValue(i)
		}
	}
	return StringValue(name)
}

// parseWeight reads a weight of weighted_fair, in either form.
func parseWeight(s, path string) (int, error) {
	i, err := strconv.ParseInt(s, 10, 64)
	if err != nil || i < 1 || i > MaxWeight {
		return 0, errorf(path, "%s, not %s", weightMessage, abbreviate([]byte(s)))
	}
	return int(i), nil
}

// parseMax reads the max of prefer_distinct or max_simultaneous, in either form.
func parseMax(s, path string) (int, error) {
	i, err := strconv.ParseInt(s, 10, 64)
	if err != nil || i < 1 || i > MaxLimit {
		return 0, errorf(path, "%s", maxMessage)
	}
	return int(i), nil
}

// parseRate reads the per_second of rate_limit, a JSON number (in the text form, the
// number before "/s").
func parseRate(s, path string) (float64, error) {
	if s == "" || s[0] == '"' || s[0] == '+' {
		return 0, errorf(path, "%s, not %s", rateMessage, abbreviate([]byte(s)))
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || strings.ContainsAny(s, "xXpPnNiI_") { // no hex, NaN, Inf or separators
		return 0, errorf(path, "%s, not %s", rateMessage, abbreviate([]byte(s)))
	}
	return r, checkRate(path, r)
}

// parseBurst reads the burst of rate_limit, in either form.
func parseBurst(s, path string) (int, error) {
	i, err := strconv.ParseInt(s, 10, 64)
	if err != nil || i < 1 || i > MaxLimit {
		return 0, errorf(path, "%s", burstMessage)
	}
	return int(i), nil
}

// formatRate writes a per_second: the shortest decimal, without an exponent, that reads
// back to it.
func formatRate(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) }

// unknownJSONName is the error for a name that is no strategy, with the JSON form of
// the text form if that is what was written.
func unknownJSONName(path, name string) error {
	msg := fmt.Sprintf("unknown strategy %s; known: %s", quote(name), knownKinds)
	if n, err := ParseText(name); err == nil && !n.Kind.Leaf() {
		msg += fmt.Sprintf("; that is the text form, whose JSON form is %s", n.appendJSON(nil))
	}
	return errorf(path, "%s", msg)
}

// jsonTemplate shows the JSON form of a kind with children.
func jsonTemplate(k Kind) string {
	fields := make([]string, len(params[k]))
	for i, f := range params[k] {
		fields[i] = fmt.Sprintf("%q: …", f)
	}
	return fmt.Sprintf("{%q: {%s}}", k, strings.Join(fields, ", "))
}

// field is one member of a JSON object.
type field struct {
	name string
	raw  json.RawMessage
}

// objectFields returns the members of a valid JSON object in order; a repeated name is
// an error at path.name.
func objectFields(raw json.RawMessage, path string) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return nil, errorf(path, "not valid JSON")
	}
	var fields []field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errorf(path, "not valid JSON")
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, errorf(path, "not valid JSON")
		}
		if slices.ContainsFunc(fields, func(f field) bool { return f.name == name }) {
			return nil, errorf(path+"."+name, "appears more than once")
		}
		fields = append(fields, field{name: name, raw: v})
	}
	if _, err := dec.Token(); err != nil { // }
		return nil, errorf(path, "not valid JSON")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errorf(path, "not valid JSON")
	}
	return fields, nil
}

// MarshalJSON writes the canonical JSON form, without spaces and with the fields in the
// order of DESIGN.md §5; Parse reads it back to an equal tree. The zero Node is null. An
// invalid tree is an error (see Validate).
func (n Node) MarshalJSON() ([]byte, error) {
	if n.Equal(Node{}) {
		return []byte("null"), nil
	}
	if err := n.Validate(); err != nil {
		return nil, err
	}
	return n.appendJSON(nil), nil
}

// UnmarshalJSON reads the JSON form as Parse does, with paths rooted at "strategy". Like
// encoding/json, it leaves n as it is for null.
func (n *Node) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	m, err := Parse(b, "strategy")
	if err != nil {
		return err
	}
	*n = m
	return nil
}

// appendJSON appends the JSON form of a valid tree.
func (n Node) appendJSON(b []byte) []byte {
	if n.Kind.Leaf() {
		return append(append(append(b, '"'), n.Kind...), '"')
	}
	b = append(append(append(b, `{"`...), n.Kind...), `":{`...)
	for i, f := range params[n.Kind] {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, '"'), f...), `":`...)
		switch f {
		case "key":
			b = append(b, jsonString(n.Key)...)
		case "value":
			b = append(b, valueJSON(n.Value)...)
		case "max":
			b = strconv.AppendInt(b, int64(n.Max), 10)
		case "per_second":
			b = append(b, formatRate(n.PerSecond)...)
		case "burst":
			b = strconv.AppendInt(b, int64(n.Burst), 10)
		case "weights":
			b = append(b, '{')
			for i, w := range n.Weights {
				if i > 0 {
					b = append(b, ',')
				}
				name := w.Value.Str()
				if !w.Value.IsString() {
					name = strconv.FormatInt(w.Value.Int64(), 10)
				}
				b = append(append(b, jsonString(name)...), ':')
				b = strconv.AppendInt(b, int64(w.Weight), 10)
			}
			b = append(b, '}')
		case "default_weight":
			b = strconv.AppendInt(b, int64(n.DefaultWeight), 10)
		case "then":
			b = n.Then.appendJSON(b)
		case "first":
			b = n.First.appendJSON(b)
		case "fallback":
			b = n.Fallback.appendJSON(b)
		}
	}
	return append(b, "}}"...)
}
