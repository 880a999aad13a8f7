package events

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// ErrInvalidPayload is wrapped by every payload validation failure.
var ErrInvalidPayload = errors.New("invalid event payload")

// PayloadProblem is one way a payload breaks its type's schema.
type PayloadProblem struct {
	// Path is a JSON Pointer into the payload ("" is the payload itself).
	Path    string
	Message string
}

// PayloadError lists why a payload does not match its type's schema.
type PayloadError struct {
	Type     string
	Problems []PayloadProblem
}

func (e *PayloadError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		at := p.Path
		if at == "" {
			at = "(payload)"
		}
		parts[i] = at + ": " + p.Message
	}
	return fmt.Sprintf("%s payload does not match its schema: %s", e.Type, strings.Join(parts, "; "))
}

func (e *PayloadError) Unwrap() error { return ErrInvalidPayload }

var (
	compileOnce sync.Once
	compiled    map[string]*jsonschema.Schema
	compileErr  error
	printer     = message.NewPrinter(language.English)
)

func schemaURL(name string) string {
	return "https://mailwatch.invalid/schemas/events/" + name + ".json"
}

// compileSchemas compiles every registered payload schema (JSON Schema
// 2020-12, with format assertions so "uuid" and "date-time" are checked).
func compileSchemas() (map[string]*jsonschema.Schema, error) {
	compileOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat()
		out := make(map[string]*jsonschema.Schema, len(types))
		for name, t := range types {
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(t.PayloadSchema))
			if err != nil {
				compileErr = fmt.Errorf("events: schema of %s is not JSON: %w", name, err)
				return
			}
			if err := c.AddResource(schemaURL(name), doc); err != nil {
				compileErr = fmt.Errorf("events: schema of %s: %w", name, err)
				return
			}
		}
		for name := range types {
			s, err := c.Compile(schemaURL(name))
			if err != nil {
				compileErr = fmt.Errorf("events: schema of %s does not compile: %w", name, err)
				return
			}
			out[name] = s
		}
		compiled = out
	})
	return compiled, compileErr
}

// ValidatePayload checks payload (JSON) against the schema of the
// registered type typeName. It returns an error wrapping ErrUnknownType for
// an unregistered type and a *PayloadError for a payload that does not
// match.
func ValidatePayload(typeName string, payload []byte) error {
	if _, ok := Lookup(typeName); !ok {
		return fmt.Errorf("%w: %q", ErrUnknownType, typeName)
	}
	schemas, err := compileSchemas()
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return &PayloadError{Type: typeName, Problems: []PayloadProblem{{Message: "is not valid JSON"}}}
	}
	err = schemas[typeName].Validate(inst)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return fmt.Errorf("events: validating %s payload: %w", typeName, err)
	}
	pe := &PayloadError{Type: typeName}
	collectProblems(verr, &pe.Problems)
	sort.SliceStable(pe.Problems, func(i, j int) bool { return pe.Problems[i].Path < pe.Problems[j].Path })
	return pe
}

// collectProblems keeps the leaves of the error tree: the specific
// keywords that failed, not the "doesn't validate" wrappers above them.
func collectProblems(e *jsonschema.ValidationError, out *[]PayloadProblem) {
	if len(e.Causes) == 0 {
		*out = append(*out, PayloadProblem{Path: pointer(e.InstanceLocation), Message: e.ErrorKind.LocalizedString(printer)})
		return
	}
	for _, c := range e.Causes {
		collectProblems(c, out)
	}
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}
