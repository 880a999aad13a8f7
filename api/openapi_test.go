package api_test

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/stretchr/testify/require"
)

func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp := b.do(t, "GET", "/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, resp.Status)

	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			SecuritySchemes map[string]map[string]any `json:"securitySchemes"`
		} `json:"components"`
	}
	resp.JSON(t, &doc)
	require.Equal(t, "3.1.0", doc.OpenAPI)
	require.Equal(t, "bearer", doc.Components.SecuritySchemes["bearerAuth"]["scheme"])
	for _, method := range []string{"get", "head"} {
		responses, _ := doc.Paths["/rest/v1/{table}"][method]["responses"].(map[string]any)
		for _, st := range []string{"200", "206", "414", "416"} {
			require.Contains(t, responses, st, "%s /rest/v1/{table} answers %s (a partial page; a query string over its bound)", method, st)
		}
	}

	t.Run("ValidAgainstTheOpenAPISchema", func(t *testing.T) {
		d, err := libopenapi.NewDocument(resp.Body)
		require.NoError(t, err)
		v, errs := validator.NewValidator(d)
		require.Empty(t, errs)
		ok, verrs := v.ValidateDocument()
		require.True(t, ok, "%s", validationText(verrs))
	})

	t.Run("DocumentedPathsAreTheRegisteredRoutes", func(t *testing.T) {
		var documented, registered []string
		for path, ops := range doc.Paths {
			for method := range ops {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
		// The dashboard's HTML routes are left out of the document on purpose
		// (package web): they serve a browser's session, not API keys.
		web := map[string]bool{}
		for _, r := range b.web.Routes() {
			require.False(t, strings.HasPrefix(r.Path, "/api/"), "the API's namespace is the API's: %s", r.Path)
			web[r.Method+" "+r.Path] = true
		}
		require.NotEmpty(t, web)
		heads := map[string]bool{}
		for _, r := range b.srv.App().GetRoutes(true) {
			if r.Method == "HEAD" {
				heads["HEAD "+openAPIPath(r.Path)] = true
				continue // Fiber adds HEAD for every GET: only explicit ones are documented
			}
			if r.Path == "/" || web[r.Method+" "+r.Path] {
				continue // the global middleware; the dashboard
			}
			registered = append(registered, r.Method+" "+openAPIPath(r.Path))
		}
		for _, r := range b.srv.Routes() {
			if r.Method == "HEAD" {
				require.True(t, heads["HEAD "+r.Path], "documented %s %s is not registered", r.Method, r.Path)
				registered = append(registered, "HEAD "+r.Path)
			}
		}
		require.Contains(t, registered, "HEAD /rest/v1/{table}")
		sort.Strings(documented)
		sort.Strings(registered)
		require.Equal(t, registered, documented)
	})

	t.Run("EveryOperationDocumentsItsErrors", func(t *testing.T) {
		for path, ops := range doc.Paths {
			for method, op := range ops {
				responses := op["responses"].(map[string]any)
				if security, _ := op["security"].([]any); len(security) > 0 {
					require.Contains(t, responses, "401", "%s %s", method, path)
					require.Contains(t, responses, "429", "%s %s", method, path)
				}
				require.Contains(t, responses, "500", "%s %s", method, path)
				if method == "head" {
					continue // a HEAD answer has no body to describe
				}
				raw, _ := json.Marshal(responses["500"])
				require.Contains(t, string(raw), "ErrorBody", "%s %s", method, path)
			}
		}
	})
}

// openAPIPath converts Fiber's /a/:id to /a/{id}.
func openAPIPath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, ":") {
			parts[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}
