package api

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"
)

var textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()

// setScalar parses raw into a path or query field: strings, integers,
// booleans, RFC 3339 times and anything with UnmarshalText (UUIDs), or a
// pointer to one of those.
func setScalar(v reflect.Value, raw string) error {
	if v.Kind() == reflect.Pointer {
		p := reflect.New(v.Type().Elem())
		if err := setScalar(p.Elem(), raw); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	if v.Type() == reflect.TypeFor[time.Time]() {
		t, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			return errors.New("must be an RFC 3339 timestamp such as 2026-01-02T15:04:05Z")
		}
		v.Set(reflect.ValueOf(t.UTC()))
		return nil
	}
	if v.Addr().Type().Implements(textUnmarshalerType) {
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(raw)); err != nil {
			return errors.New("is malformed")
		}
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(raw)
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || v.OverflowInt(n) {
			return errors.New("must be an integer")
		}
		v.SetInt(n)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return errors.New("must be true or false")
		}
		v.SetBool(b)
	default:
		return fmt.Errorf("unsupported parameter type %s", v.Type())
	}
	return nil
}
