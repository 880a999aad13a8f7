package dnsfix_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

// TestCloudflareConnection creates a connection through Env: the token is
// verified at Cloudflare's verification endpoint (on loopback, with the
// API's documented answers), sealed, and the zone is found on link.
func TestCloudflareConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var proxyDown atomic.Bool // a proxy in front of the API answers its own error page
	cf := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if proxyDown.Load() {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html><body><h1>502 Bad Gateway</h1></body></html>"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer good-token-123456" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"success":false,"errors":[{"code":1000,"message":"Invalid API Token"}],"messages":[],"result":null}`))
			return
		}
		switch r.URL.Path {
		case "/client/v4/user/tokens/verify":
			_, _ = w.Write([]byte(`{"success":true,"errors":[],"messages":[{"code":10000,"message":"This API Token is valid and active","type":null}],"result":{"id":"ed17574386854bf78a67040be0a770b0","status":"active"}}`))
		case "/client/v4/zones":
			res := []map[string]any{}
			if r.URL.Query().Get("name") == "cf.example" {
				res = append(res, map[string]any{"id": "023e105f4ecef8ad9ca31a8372d0c353", "name": "cf.example", "status": "active"})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"success": true, "errors": []any{}, "messages": []any{}, "result": res,
				"result_info": map[string]any{"page": 1, "per_page": 20, "count": len(res), "total_count": len(res), "total_pages": 1}})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(cf.Close)
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{3}, 32))
	require.NoError(t, err)
	env := &dnsfix.Env{Keyring: keyring, Guard: netguard.NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}), CloudflareURL: cf.URL + "/client/v4"}
	tx := newDomainTx(t)
	d := newDomain(t, tx, "www.cf.example")
	now := time.Now()

	_, err = dnsfix.CreateConnection(ctx, tx, env, d.AccountID, dnsfix.ConnectionInput{Kind: "cloudflare", Label: "cf", Config: json.RawMessage(`{"api_token":"bad-token-000000"}`)}, now)
	var ve *dnsfix.VerifyError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "API token", ve.What)
	require.Contains(t, ve.Message, "Invalid API Token")

	conn, err := dnsfix.CreateConnection(ctx, tx, env, d.AccountID, dnsfix.ConnectionInput{Kind: "cloudflare", Label: "cf", Config: json.RawMessage(`{"api_token":"good-token-123456"}`)}, now)
	require.NoError(t, err)
	require.JSONEq(t, `{"api_token_hint":"…3456"}`, string(conn.Config))
	require.NotContains(t, string(conn.SecretCiphertext), "good-token")

	link, name, err := dnsfix.Link(ctx, tx, env, d.AccountID, conn.ID, "www.cf.example")
	require.NoError(t, err)
	require.Equal(t, "www.cf.example", name)
	require.Equal(t, "023e105f4ecef8ad9ca31a8372d0c353", link.ZoneID)
	require.Equal(t, "cf.example", link.ZoneName)

	// An answer that is not Cloudflare's JSON is the provider being unusable
	// now, said to the customer, not a server error.
	proxyDown.Store(true)
	_, _, err = dnsfix.Link(ctx, tx, env, d.AccountID, conn.ID, "www.cf.example")
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "connection", ve.What)
	require.Contains(t, ve.Message, "not its API's response")
	proxyDown.Store(false)

	// The guard applies: without the loopback allowance the call is refused.
	blocked := &dnsfix.Env{Keyring: keyring, Guard: netguard.NewGuard(nil), CloudflareURL: cf.URL + "/client/v4"}
	_, err = dnsfix.CreateConnection(ctx, tx, blocked, d.AccountID, dnsfix.ConnectionInput{Kind: "cloudflare", Label: "cf2", Config: json.RawMessage(`{"api_token":"good-token-123456"}`)}, now)
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "connection", ve.What)
	require.NotContains(t, ve.Message, "127.0.0.1", "no address or Go error text in the answer")

	// A refused port and a silent one read the same: the answer does not
	// let a caller probe which ports are open.
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusedAddr := refused.Addr().String()
	require.NoError(t, refused.Close())
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	short := &dnsfix.Env{Keyring: keyring, Guard: env.Guard, Timeout: 2 * time.Second}
	msgs := map[string]string{}
	for name, addr := range map[string]string{"refused": refusedAddr, "silent": silent.Addr().String()} {
		cfg := fmt.Sprintf(`{"server":%q,"tsig_key_name":"k.","tsig_secret":"c2VjcmV0c2VjcmV0c2VjcmV0"}`, addr)
		_, err = dnsfix.CreateConnection(ctx, tx, short, d.AccountID, dnsfix.ConnectionInput{Kind: "rfc2136", Label: "r-" + name, Config: json.RawMessage(cfg)}, now)
		require.ErrorAs(t, err, &ve, name)
		require.Equal(t, "connection", ve.What, name)
		msgs[name] = ve.Message
	}
	require.Equal(t, msgs["refused"], msgs["silent"])
	require.NotContains(t, msgs["refused"], "127.0.0.1")
}
