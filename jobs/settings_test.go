package jobs

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/config"
	"github.com/mailwatch/mailwatch/internal/plans"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// TestSettingsFromCopiesEverySetting: a setting added to Settings but not
// to SettingsFrom would silently run with its default in production.
func TestSettingsFromCopiesEverySetting(t *testing.T) {
	cfg := &config.Config{
		InboundDomain: "inbound.example", EventRetentionDays: 30, DefaultPlan: "pro",
		StripePricePlans: plans.PriceMap{"price_x": "pro"}, BillingGracePeriod: time.Hour,
		DNSCheckInterval: time.Minute, HealthHistoryDays: 7, JobRescueAfter: 2 * time.Minute,
		WebhookLimits: webhook.Limits{PerAccount: 3}, ProviderAccountConcurrency: 4, JWTKeyRotation: time.Hour, JWTTTL: time.Minute,
	}
	s := reflect.ValueOf(SettingsFrom(cfg))
	for i := range s.NumField() {
		require.False(t, s.Field(i).IsZero(), "SettingsFrom leaves %s unset", s.Type().Field(i).Name)
	}
}
