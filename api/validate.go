package api

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/go-playground/validator/v10"
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
		// Namespace is "Req.items[0].name"; drop the type name.
		ns := fe.Namespace()
		if i := strings.IndexByte(ns, '.'); i >= 0 {
			ns = ns[i+1:]
		}
		fields = append(fields, FieldError{Field: ns, Message: validationMessage(fe)})
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
