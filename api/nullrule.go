package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// nullRule says where a JSON request body may hold null, as the document's
// schema of that body says it. encoding/json decodes null into any field as
// its zero value, so without this check a null the document refuses would be
// taken as an absent field (or as "", 0 or false). It is read from the
// document itself (Handle builds it once the route is documented), so the
// two cannot disagree.
type nullRule struct {
	// allowed: this value may be null.
	allowed bool
	// props are an object's members; other is the rule of members not
	// listed (a map), nil when anything goes.
	props map[string]*nullRule
	other *nullRule
	// items are an array's elements.
	items *nullRule
}

// check refuses a null the document does not allow anywhere in body, which
// decodeJSON has already found to be one well-formed object.
func (r *nullRule) check(body []byte) error {
	if r == nil || !bytes.Contains(body, []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil // decodeJSON judged the syntax already
	}
	return r.walk(v, "")
}

func (r *nullRule) walk(v any, path string) error {
	if r == nil {
		return nil
	}
	switch x := v.(type) {
	case nil:
		if !r.allowed {
			return InvalidField(path, "must not be null")
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys) // the first error named is always the same one
		for _, k := range keys {
			sub, listed := r.props[k]
			if !listed {
				sub = r.other
			}
			if err := sub.walk(x[k], joinPath(path, k)); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := r.items.walk(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// nullRuleOf reads the rule of a schema of the document; schemas are the
// document's components. It returns nil where null is allowed at every
// depth, so that most bodies have no rule to walk.
func nullRuleOf(schema map[string]any, schemas map[string]map[string]any, seen []string) *nullRule {
	if ref, ok := schema["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		if slices.Contains(seen, name) {
			return nil // a recursive type: its inner levels are not checked
		}
		target, ok := schemas[name]
		if !ok {
			return nil
		}
		return nullRuleOf(target, schemas, append(seen, name))
	}
	r := &nullRule{allowed: allowsNull(schema)}
	restricted := !r.allowed
	if props, ok := schema["properties"].(map[string]any); ok {
		r.props = map[string]*nullRule{}
		for name, p := range props {
			if ps, ok := p.(map[string]any); ok {
				r.props[name] = nullRuleOf(ps, schemas, seen)
				restricted = restricted || r.props[name] != nil
			}
		}
	}
	if ap, ok := schema["additionalProperties"].(map[string]any); ok {
		r.other = nullRuleOf(ap, schemas, seen)
		restricted = restricted || r.other != nil
	}
	if it, ok := schema["items"].(map[string]any); ok {
		r.items = nullRuleOf(it, schemas, seen)
		restricted = restricted || r.items != nil
	}
	if !restricted {
		return nil
	}
	return r
}

// allowsNull: null is valid against the schema's type (none, or one that
// includes null) and against one of its alternatives, when it has any.
func allowsNull(schema map[string]any) bool {
	ok := true
	switch t := schema["type"].(type) {
	case string:
		ok = t == "null"
	case []any:
		ok = slices.Contains(t, any("null"))
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		alts, isList := schema[key].([]any)
		if !isList {
			continue
		}
		some := false
		for _, a := range alts {
			if as, isMap := a.(map[string]any); isMap && allowsNull(as) {
				some = true
			}
		}
		ok = ok && some
	}
	return ok
}
