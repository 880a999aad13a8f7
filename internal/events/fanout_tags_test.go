package events

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestDeliveryTagAccount(t *testing.T) {
	t.Parallel()
	account, sub := uuid.New(), uuid.New()
	got, ok := DeliveryTagAccount(DeliveryTags(account, TypeReceiverMessageReceived, sub))
	require.True(t, ok)
	require.Equal(t, account, got)
	_, ok = DeliveryTagAccount([]string{"event-x", "account-not-a-uuid"})
	require.False(t, ok)
	_, ok = DeliveryTagAccount(nil)
	require.False(t, ok)
}
