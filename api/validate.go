package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strings"

	"github.com/go-playground/validator/v10"
	"github.com/swaggest/jsonschema-go"

	"github.com/mailwatch/mailwatch/internal/domainname"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
	"github.com/mailwatch/mailwatch/internal/pgtext"
	"github.com/mailwatch/mailwatch/internal/providers"
)

// newValidator returns a validator that names fields as clients spell them
// and knows this package's own rules (textRules).
func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(fieldName)
	// A PATCH field's rules apply to its value, when it is a value.
	v.RegisterCustomTypeFunc(func(f reflect.Value) any {
		o := f.Interface().(OptionalString)
		if !o.Set || o.Null {
			return nil
		}
		return o.Value
	}, OptionalString{})
	v.RegisterCustomTypeFunc(func(f reflect.Value) any {
		o := f.Interface().(OptionalStrings)
		if !o.Set || o.Null {
			return nil
		}
		return o.Value
	}, OptionalStrings{})
	v.RegisterCustomTypeFunc(func(f reflect.Value) any {
		o := f.Interface().(OptionalInt)
		if !o.Set || o.Null {
			return nil
		}
		return o.Value
	}, OptionalInt{})
	for name, rule := range textRules {
		check := rule.check
		if err := v.RegisterValidation(name, func(fl validator.FieldLevel) bool {
			return fl.Field().Kind() == reflect.String && check(fl.Field().String()) == nil
		}); err != nil {
			panic("api: registering validation " + name + ": " + err.Error())
		}
	}
	return v
}

// textRule is a validate tag of this package's own for a string: the
// server's check, and what JSON Schema can say of it (applyValidateTag), so
// that the tag on a field both enforces and documents it.
type textRule struct {
	// check says why s is refused, or nil; it is the capability's own rule.
	check func(s string) error
	// format and pattern document the rule. A pattern is written for RE2 and
	// ECMA-262 alike (ASCII classes only).
	format, pattern string
}

func (r textRule) document(s *jsonschema.Schema) {
	if r.format != "" {
		s.WithFormat(r.format)
	}
	if r.pattern != "" {
		s.WithPattern(r.pattern)
	}
}

// The patterns of the text rules. A pattern documents what the server
// accepts, so it admits at least that (the test suite checks every accepted
// request against the document): where the rule is more than a pattern can
// say (IDNA, public suffixes, address parsing), the pattern is the wider
// shape and the field's description says the rest. e164Input is exact: it
// is the check itself.
const (
	// e164Input is a number the server reads as E.164 once it has removed
	// spaces, dots, dashes and parentheses: +, a country code not starting
	// with 0 and 7 to 15 digits in all (ITU-T E.164 section 6).
	e164Input = `^[ ().-]*\+[ ().-]*[1-9]([ ().-]*[0-9]){6,14}[ ().-]*$`
	// domainName is two or more labels separated by dots (or the
	// ideographic, full-width and half-width dots IDNA maps to one, written
	// as themselves: RE2, ECMA-262 and Python spell escapes beyond ASCII
	// differently), around which spaces are trimmed. A label is ASCII letters, digits and hyphens, or anything
	// beyond ASCII (a Unicode name, stored as its A-labels).
	domainName  = `^\s*` + domainLabel + `([.。．｡]` + domainLabel + `)+[.。．｡]?\s*$`
	domainLabel = `[^\x00-\x2c\x2e\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]+`
	// emailAddress is a sign-in or notification address: one @ and a dotted
	// domain, around which spaces are trimmed (it is lower-cased too).
	emailAddress = `^\s*[^\s@]+@[^\s@.\[][^\s@]*\.[^\s@.]+\s*$`
	// bareAddress is a suppressed address: one @ between two non-empty parts.
	bareAddress = `^\s*[^\s@]+@[^\s@]+\s*$`
	// webURL is an absolute http(s) URL with a host and no credentials,
	// written in the characters RFC 3986 allows (non-ASCII is
	// percent-encoded), so that it is also a format: uri.
	webURL = `^[Hh][Tt][Tt][Pp][Ss]?://[A-Za-z0-9._~!$&'()*+,;=%:\[\]-]+([/?#][A-Za-z0-9._~!$&'()*+,;=%:@/?#\[\]-]*)?$`
)

var e164Re = regexp.MustCompile(e164Input)

// textRules are this package's validate tags. Each check is the rule the
// handler applies (they normalise after it), so the validator refuses what
// the handler would, and the document carries what JSON Schema can say.
var textRules = map[string]textRule{
	// A sign-in or notification address (normalizeEmail).
	"email_address": {check: func(s string) error { _, err := normalizeEmail("", s); return err }, pattern: emailAddress},
	// A suppressed address: any bare address (providers.CheckEmail).
	"bare_address": {check: func(s string) error { _, err := providers.CheckEmail(s); return err }, pattern: bareAddress},
	// A domain name (internal/domainname).
	"domain_name": {check: func(s string) error { _, err := domainname.Normalize(s); return err }, pattern: domainName},
	// A webhook or JWKS destination: absolute http(s) (netguard checks the
	// address it resolves to when it is used).
	"web_url": {check: checkWebURL, format: "uri", pattern: webURL},
	// An E.164 number, separators allowed (receivers.NormalizeE164).
	"e164": {check: func(s string) error {
		if !e164Re.MatchString(s) {
			return errors.New("must be an E.164 number such as +14155550100")
		}
		return nil
	}, pattern: e164Input},
	// Text that must say something: not empty once trimmed, as the
	// handlers that trim it require.
	"not_blank": {check: func(s string) error {
		if strings.TrimSpace(s) == "" {
			return errors.New("must not be blank")
		}
		return nil
	}, pattern: `\S`},
	// An SNS topic ARN (internal/esp/ses).
	"sns_topic_arn": {check: func(s string) error {
		if !ses.ValidTopicARN(s) {
			return errors.New("is not an SNS topic ARN (arn:aws:sns:<region>:<account>:<topic>)")
		}
		return nil
	}, pattern: ses.TopicARNPattern},
}

// checkWebURL is the URL rule of subscriptions and JWKS: absolute http(s)
// with a host and no user information, in the characters webURL allows.
func checkWebURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Scheme == "" || u.Opaque != "":
		return errors.New("must be an absolute URL such as https://example.com/webhooks")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("must use http or https, not %q", u.Scheme)
	case u.User != nil:
		return errors.New("must not contain a user name or password; put credentials in the path or query, or rely on the signature")
	case u.Host == "":
		return errors.New("must have a host")
	case !webURLRe.MatchString(s):
		return errors.New("must be written in the characters RFC 3986 allows (percent-encode the others), without spaces")
	}
	return nil
}

var webURLRe = regexp.MustCompile(webURL)

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
		return checkAtLeastOne(req)
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
	if r, ok := textRules[fe.Tag()]; ok {
		if s, isString := fe.Value().(string); isString {
			if err := r.check(s); err != nil {
				return ruleMessage(err)
			}
		}
	}
	return "is invalid (" + fe.Tag() + ")"
}

// ruleMessage is a check's error as the message of a field error.
func ruleMessage(err error) string {
	var apiErr *Error
	if errors.As(err, &apiErr) && len(apiErr.Fields) == 1 {
		return apiErr.Fields[0].Message
	}
	return err.Error()
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
