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

// openAPIJSON converts the document to JSON once, the first time a server is made.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) { return yamlToJSON(openAPIYAML) })

// yamlToJSON converts a YAML document to JSON. Mapping keys become strings (a YAML key
// such as 200 is an integer), as JSON has only string keys.
func yamlToJSON(y []byte) ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(y, &doc); err != nil {
		return nil, fmt.Errorf("reading the OpenAPI document: %w", err)
	}
	return json.Marshal(jsonable(doc))
}

func jsonable(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonable(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = jsonable(e)
		}
		return v
	}
	return v
}

// servedOpenAPI returns the document as an instance reached at advertiseURL serves it:
// its servers is that URL, so that a tool given the document calls the instance that
// served it. With no advertise URL the document's own servers stay. The document is
// built once, at the first request.
func servedOpenAPI(advertiseURL string) func() ([]byte, error) {
	return sync.OnceValues(func() ([]byte, error) {
		raw, err := openAPIJSON()
		if err != nil || advertiseURL == "" {
			return raw, err
		}
		var doc map[string]any
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber() // the int64 bounds (minimum: -9223372036854775807) stay exact
		if err := d.Decode(&doc); err != nil {
			return nil, fmt.Errorf("reading the OpenAPI document: %w", err)
		}
		doc["servers"] = []any{map[string]any{
			"url":         advertiseURL,
			"description": "The instance that served this document (its OPSQ_ADVERTISE_URL).",
		}}
		return json.Marshal(doc)
	})
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
