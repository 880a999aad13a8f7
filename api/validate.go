package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/go-playground/validator/v10"

	"github.com/mailwatch/mailwatch/internal/pgtext"
)

// newValidator returns a validator that names fields as clients spell them.
func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(fieldName)
	return v
}

func fieldName(f reflect.StructField) string {
	for _, tag := range []string{"json", "query", "path"} {
		if name, _, _ := strings.Cut(f.Tag.Get(tag), ","); name != "" && name != "-" {
			return name
		}
	}
	return f.Name
}

func (r *Router) validate(req any) error {
	err := r.validator.Struct(req)
	if err == nil {
		return nil
	}
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		var invalid *validator.InvalidValidationError
		if errors.As(err, &invalid) {
			return nil // not a struct: nothing to validate
		}
		return err
	}
	fields := make([]FieldError, 0, len(verrs))
	for _, fe := range verrs {
		fields = append(fields, FieldError{Field: clientPath(fe.Namespace()), Message: validationMessage(fe)})
	}
	return Invalid(fields...)
}

func validationMessage(fe validator.FieldError) string {
	isString := fe.Kind() == reflect.String
	isList := fe.Kind() == reflect.Slice || fe.Kind() == reflect.Map
	switch fe.Tag() {
	case "required":
		return "is required"
	case "min", "gte":
		if isString {
			return fmt.Sprintf("must be at least %s characters", fe.Param())
		}
		if isList {
			return fmt.Sprintf("must have at least %s items", fe.Param())
		}
		return "must be at least " + fe.Param()
	case "max", "lte":
		if isString {
			return fmt.Sprintf("must be at most %s characters", fe.Param())
		}
		if isList {
			return fmt.Sprintf("must have at most %s items", fe.Param())
		}
		return "must be at most " + fe.Param()
	case "oneof":
		return "must be one of: " + strings.Join(strings.Fields(fe.Param()), ", ")
	case "email":
		return "must be a valid email address"
	case "url", "http_url":
		return "must be an absolute http(s) URL"
	case "uuid":
		return "must be a UUID"
	case "dive":
		return "is invalid"
	}
	return "is invalid (" + fe.Tag() + ")"
}

// clientPath turns a validator namespace ("Req.PageParams.items[0].name")
// into the path a client knows ("items[0].name"): the request type and any
// embedded struct are Go names (exported, so upper case), while every
// field is named by its json/query/path tag, which is lower case.
func clientPath(ns string) string {
	parts := strings.Split(ns, ".")
	out := parts[:0]
	for i, p := range parts {
		if i == 0 || (p != "" && p[0] >= 'A' && p[0] <= 'Z') {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ".")
}

var rawJSONType = reflect.TypeFor[json.RawMessage]()

// checkText refuses text Postgres cannot store (pgtext): NUL characters
// anywhere in a request (a string, or a \u0000 escape inside raw JSON such
// as an event payload), lone surrogate escapes in raw JSON (jsonb refuses
// them) and invalid UTF-8 (query and path values are not checked by the
// JSON decoder). Without it such input reached the database and failed
// there, as a 500.
func checkText(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.String:
		switch pgtext.Check(v.String()) {
		case pgtext.ErrNUL:
			return InvalidField(path, "must not contain NUL characters")
		case pgtext.ErrUTF8:
			return InvalidField(path, "must be valid UTF-8")
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return checkText(v.Elem(), path)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			// Raw JSON kept as bytes (json.RawMessage and types like it).
			if v.Kind() == reflect.Slice && v.Type().ConvertibleTo(rawJSONType) {
				switch pgtext.CheckJSON(v.Bytes()) {
				case pgtext.ErrNUL:
					return InvalidField(path, "must not contain NUL characters (\\u0000)")
				case pgtext.ErrSurrogate:
					return InvalidField(path, "must not contain a \\u escape of a lone UTF-16 surrogate")
				case pgtext.ErrUTF8:
					return InvalidField(path, "must be valid UTF-8")
				}
			}
			return nil
		}
		for i := 0; i < v.Len(); i++ {
			if err := checkText(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			key := fmt.Sprint(iter.Key().Interface())
			if err := checkText(iter.Key(), path); err != nil {
				return err
			}
			if err := checkText(iter.Value(), joinPath(path, key)); err != nil {
				return err
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := path
			if tagged := fieldName(f); tagged != f.Name {
				name = joinPath(path, tagged)
			}
			if err := checkText(v.Field(i), name); err != nil {
				return err
			}
		}
	}
	return nil
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
