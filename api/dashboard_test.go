package api_test

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/domains"
)

// TestAtRiskDescriptionIsTheThreshold: a struct tag cannot name a
// constant, so the documented threshold of at_risk is held to the one the
// query counts with.
func TestAtRiskDescriptionIsTheThreshold(t *testing.T) {
	f, ok := reflect.TypeFor[api.DashboardDomains]().FieldByName("AtRisk")
	require.True(t, ok)
	require.Contains(t, f.Tag.Get("description"), "below "+strconv.Itoa(domains.AtRiskBelow)+".")
}
