package api

import (
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

// openAPI serves the document. It is checked by the tests, so a failure to convert it is a
// bug of the build, answered as a 500.
func openAPI(c echo.Context) error {
	doc, err := openAPIJSON()
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=300")
	return c.JSONBlob(http.StatusOK, doc)
}
