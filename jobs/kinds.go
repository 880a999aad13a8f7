package jobs

import (
	"reflect"
	"slices"
	"sync"
)

// Kinds returns the job kinds this binary works, sorted: what `mailwatch
// jobs list --kind` accepts. River keeps its registry private, so the kinds
// are read from the Workers bundle's map by reflection (read-only);
// TestKindsListsEveryWorker checks it against known kinds.
var Kinds = sync.OnceValue(func() []string {
	m := reflect.ValueOf(Workers(Deps{})).Elem().FieldByName("workersMap")
	if !m.IsValid() || m.Kind() != reflect.Map {
		return nil
	}
	out := make([]string, 0, m.Len())
	for _, k := range m.MapKeys() {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
})
