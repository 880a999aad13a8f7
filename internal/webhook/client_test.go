package webhook

import (
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/netguard"
)

func TestNewClient(t *testing.T) {
	t.Parallel()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		client := NewClient(netguard.NewGuard(nil), ClientOptions{})
		require.Equal(t, 15*time.Second, client.Timeout)
		require.ErrorIs(t, client.CheckRedirect(nil, nil), http.ErrUseLastResponse)

		tr, ok := client.Transport.(*http.Transport)
		require.True(t, ok)
		require.Nil(t, tr.Proxy, "never a proxy, whatever HTTP_PROXY says")
		require.NotNil(t, tr.DialContext)
		require.False(t, tr.DisableKeepAlives)
		require.Equal(t, 256, tr.MaxIdleConnsPerHost)
		require.Equal(t, 1024, tr.MaxIdleConns)
		require.Zero(t, tr.MaxConnsPerHost)
		require.Equal(t, uint16(tls.VersionTLS12), tr.TLSClientConfig.MinVersion)
		require.True(t, tr.ForceAttemptHTTP2)
	})

	t.Run("Options", func(t *testing.T) {
		t.Parallel()
		client := NewClient(nil, ClientOptions{Timeout: time.Second, MaxIdleConnsPerHost: 8, MaxIdleConns: 16, MaxConnsPerHost: 32})
		require.Equal(t, time.Second, client.Timeout)
		tr := client.Transport.(*http.Transport)
		require.Equal(t, 8, tr.MaxIdleConnsPerHost)
		require.Equal(t, 16, tr.MaxIdleConns)
		require.Equal(t, 32, tr.MaxConnsPerHost)
		require.Equal(t, time.Second, tr.TLSHandshakeTimeout)
	})
}
