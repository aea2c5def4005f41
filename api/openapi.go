package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"
)

// openAPIYAML is the OpenAPI 3.1 document of the API: the one source, kept in YAML for
// people to read and served as JSON at GET /v1/openapi.json.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// openAPIJSON converts the document to JSON once, the first time it is served.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) { return yamlToJSON(openAPIYAML, "") })

// yamlToJSON converts a YAML document to JSON, keeping the order of every mapping's
// keys: tools read the order of a body's media types (Prism matches a request to the
// first that fits, so */* must come after application/x-ndjson), and people read the
// paths in the order the file gives them. Numbers stay as written (int64 bounds exact).
// A non-empty serverURL replaces the document's servers.
func yamlToJSON(y []byte, serverURL string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(y, &doc); err != nil {
		return nil, fmt.Errorf("reading the OpenAPI document: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("reading the OpenAPI document: not a YAML mapping")
	}
	root := doc.Content[0]
	if serverURL != "" {
		var servers yaml.Node
		if err := servers.Encode([]map[string]string{{
			"url":         serverURL,
			"description": "The instance that served this document (its OPSQ_ADVERTISE_URL).",
		}}); err != nil {
			return nil, err
		}
		found := false
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == "servers" {
				root.Content[i+1], found = &servers, true
			}
		}
		if !found {
			return nil, fmt.Errorf("reading the OpenAPI document: no servers")
		}
	}
	var b bytes.Buffer
	if err := writeJSON(&b, root); err != nil {
		return nil, fmt.Errorf("converting the OpenAPI document: %w", err)
	}
	return b.Bytes(), nil
}

// writeJSON writes the YAML node n as JSON.
func writeJSON(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.AliasNode:
		return writeJSON(b, n.Alias)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(n.Content[i].Value) // a key such as 200 is a string in JSON
			b.Write(key)
			b.WriteByte(':')
			if err := writeJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			b.WriteString("null")
		case "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				return err
			}
			if n.ShortTag() == "!!int" {
				// Written as decoded: a YAML 0x1F is the JSON number 31.
				fmt.Fprint(b, v)
				return nil
			}
			out, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("line %d: %w", n.Line, err)
			}
			b.Write(out)
		default:
			out, _ := json.Marshal(n.Value)
			b.Write(out)
		}
	default:
		return fmt.Errorf("line %d: a YAML node of kind %v", n.Line, n.Kind)
	}
	return nil
}

// servedOpenAPI returns the document as an instance reached at advertiseURL serves it:
// its servers is that URL, so that a tool given the document calls the instance that
// served it. With no advertise URL the document's own servers stay. The document is
// built once, at the first request.
func servedOpenAPI(advertiseURL string) func() ([]byte, error) {
	if advertiseURL == "" {
		return openAPIJSON
	}
	return sync.OnceValues(func() ([]byte, error) { return yamlToJSON(openAPIYAML, advertiseURL) })
}

// openAPI serves the document that doc returns. It is checked by the tests, so a failure
// to build it is a bug of the build, answered as a 500.
func openAPI(doc func() ([]byte, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		b, err := doc()
		if err != nil {
			return err
		}
		c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=300")
		return c.JSONBlob(http.StatusOK, b)
	}
}
