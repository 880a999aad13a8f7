package dnsprovider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dnsprovider"
	"github.com/mailwatch/mailwatch/internal/netguard"
)

func loopbackClient() *http.Client {
	return dnsprovider.NewHTTPClient(netguard.NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}))
}

// fakeCloudflare answers the v4 API routes the connection uses with the
// shapes of Cloudflare's API reference (envelope {success, errors,
// messages, result, result_info}; error 1000 for a bad token, 81044 for a
// record id that does not exist).
type fakeCloudflare struct {
	mu      sync.Mutex
	token   string
	zoneID  string
	zone    string
	records map[string]map[string]any
	nextID  int
	batches []map[string]any
}

const cfZoneID = "023e105f4ecef8ad9ca31a8372d0c353"

func (f *fakeCloudflare) add(name, typ, content string) string {
	f.nextID++
	id := fmt.Sprintf("%032x", f.nextID)
	f.records[id] = map[string]any{"id": id, "zone_id": f.zoneID, "zone_name": f.zone, "name": name, "type": typ, "content": content, "ttl": 1, "proxied": false, "proxiable": false, "comment": nil, "tags": []string{}, "created_on": "2024-01-01T05:20:00.12345Z", "modified_on": "2024-01-01T05:20:00.12345Z"}
	return id
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func cfFail(w http.ResponseWriter, status, code int, msg string) {
	writeJSON(w, status, map[string]any{"success": false, "errors": []any{map[string]any{"code": code, "message": msg}}, "messages": []any{}, "result": nil})
}

func (f *fakeCloudflare) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+f.token {
		cfFail(w, http.StatusUnauthorized, 1000, "Invalid API Token")
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/client/v4")
	ok := func(result any, info any) {
		body := map[string]any{"success": true, "errors": []any{}, "messages": []any{}, "result": result}
		if info != nil {
			body["result_info"] = info
		}
		writeJSON(w, http.StatusOK, body)
	}
	switch {
	case r.Method == http.MethodGet && path == "/user/tokens/verify":
		ok(map[string]any{"id": "ed17574386854bf78a67040be0a770b0", "status": "active", "expires_on": "2030-01-01T00:00:00Z", "not_before": "2020-01-01T00:00:00Z"}, nil)
	case r.Method == http.MethodGet && path == "/zones":
		zones := []any{}
		if r.URL.Query().Get("name") == f.zone {
			zones = append(zones, map[string]any{"id": f.zoneID, "name": f.zone, "status": "active", "paused": false, "type": "full", "name_servers": []string{"bob.ns.cloudflare.com", "lola.ns.cloudflare.com"}})
		}
		ok(zones, map[string]any{"page": 1, "per_page": 20, "count": len(zones), "total_count": len(zones), "total_pages": 1})
	case r.Method == http.MethodGet && path == "/zones/"+f.zoneID+"/dns_records":
		recs := []any{}
		for _, rec := range f.records {
			if rec["name"] == r.URL.Query().Get("name") && rec["type"] == r.URL.Query().Get("type") {
				recs = append(recs, rec)
			}
		}
		ok(recs, map[string]any{"page": 1, "per_page": 100, "count": len(recs), "total_count": len(recs), "total_pages": 1})
	case r.Method == http.MethodPost && path == "/zones/"+f.zoneID+"/dns_records/batch":
		var body struct {
			Deletes []struct {
				ID string `json:"id"`
			} `json:"deletes"`
			Posts []struct {
				Name    string `json:"name"`
				Type    string `json:"type"`
				Content string `json:"content"`
				TTL     int    `json:"ttl"`
			} `json:"posts"`
		}
		raw := map[string]any{}
		dec := json.NewDecoder(r.Body)
		if err := dec.Decode(&raw); err != nil {
			cfFail(w, http.StatusBadRequest, 9207, "Request body is invalid.")
			return
		}
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &body)
		f.batches = append(f.batches, raw)
		for _, d := range body.Deletes {
			if _, ok := f.records[d.ID]; !ok {
				cfFail(w, http.StatusBadRequest, 81044, "Record does not exist.")
				return
			}
		}
		deleted, posted := []any{}, []any{}
		for _, d := range body.Deletes {
			deleted = append(deleted, f.records[d.ID])
			delete(f.records, d.ID)
		}
		for _, p := range body.Posts {
			id := f.add(p.Name, p.Type, p.Content)
			posted = append(posted, f.records[id])
		}
		ok(map[string]any{"deletes": deleted, "patches": []any{}, "puts": []any{}, "posts": posted}, nil)
	default:
		cfFail(w, http.StatusNotFound, 7003, "Could not route to "+r.URL.Path+", perhaps your object identifier is invalid?")
	}
}

func newFakeCloudflare(t *testing.T) (*fakeCloudflare, string) {
	f := &fakeCloudflare{token: "good-token", zoneID: cfZoneID, zone: "example.com", records: map[string]map[string]any{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL + "/client/v4"
}

func TestCloudflare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, base := newFakeCloudflare(t)
	spfID := f.add("example.com", "TXT", `"v=spf1 include:a.example include:b.example ~all"`)
	otherID := f.add("example.com", "TXT", `"google-site-verification=abc123"`)

	p, err := dnsprovider.NewCloudflare(dnsprovider.CloudflareConfig{APIToken: "good-token"}, loopbackClient(), base)
	require.NoError(t, err)

	t.Run("VerifyAndBadToken", func(t *testing.T) {
		require.NoError(t, p.Verify(ctx))
		bad, err := dnsprovider.NewCloudflare(dnsprovider.CloudflareConfig{APIToken: "wrong"}, loopbackClient(), base)
		require.NoError(t, err)
		err = bad.Verify(ctx)
		var pe *dnsprovider.ProviderError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "API token", pe.What)
		require.Contains(t, pe.Message, "Invalid API Token (code 1000)")
	})

	zone, err := p.FindZone(ctx, "_dmarc.example.com")
	require.NoError(t, err)
	require.Equal(t, dnsprovider.Zone{Name: "example.com", ID: cfZoneID}, zone)
	_, err = p.FindZone(ctx, "example.org")
	require.ErrorIs(t, err, dnsprovider.ErrZoneNotFound)

	t.Run("SPFOnlyKeepsOtherTXT", func(t *testing.T) {
		cur, err := p.Read(ctx, zone, "example.com", "TXT")
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"v=spf1 include:a.example include:b.example ~all", "google-site-verification=abc123"}, cur.Values)
		c := dnsprovider.Change{Name: "example.com", Type: "TXT", Current: cur.Values, Remove: []string{"v=spf1 include:a.example include:b.example ~all"}, Add: []string{"v=spf1 ip4:192.0.2.0/24 -all"}}
		require.NoError(t, p.Apply(ctx, zone, c))

		f.mu.Lock()
		last := f.batches[len(f.batches)-1]
		_, kept := f.records[otherID]
		_, gone := f.records[spfID]
		f.mu.Unlock()
		require.True(t, kept)
		require.False(t, gone)
		require.Equal(t, []any{map[string]any{"id": spfID}}, last["deletes"])
		require.Equal(t, []any{map[string]any{"name": "example.com", "type": "TXT", "content": `"v=spf1 ip4:192.0.2.0/24 -all"`, "ttl": float64(3600)}}, last["posts"])

		after, err := p.Read(ctx, zone, "example.com", "TXT")
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"v=spf1 ip4:192.0.2.0/24 -all", "google-site-verification=abc123"}, after.Values)
	})

	t.Run("ConcurrentEditConflicts", func(t *testing.T) {
		cur, err := p.Read(ctx, zone, "example.com", "TXT")
		require.NoError(t, err)
		f.mu.Lock()
		f.add("example.com", "TXT", `"MS=ms1"`)
		n := len(f.batches)
		f.mu.Unlock()
		err = p.Apply(ctx, zone, dnsprovider.Change{Name: "example.com", Type: "TXT", Current: cur.Values, Remove: []string{"v=spf1 ip4:192.0.2.0/24 -all"}, Add: []string{"v=spf1 -all"}})
		var ce *dnsprovider.ConflictError
		require.ErrorAs(t, err, &ce)
		require.Contains(t, ce.Current, "MS=ms1")
		f.mu.Lock()
		require.Len(t, f.batches, n, "no batch is sent after a mismatch")
		f.mu.Unlock()
	})

	t.Run("RecordGoneDuringBatch", func(t *testing.T) {
		// The 81044 error body ("Record does not exist.") is a conflict.
		f.mu.Lock()
		id := f.add("gone.example.com", "TXT", `"x"`)
		f.mu.Unlock()
		c := dnsprovider.Change{Name: "gone.example.com", Type: "TXT", Current: []string{"x"}, Remove: []string{"x"}, Add: []string{"y"}}
		// Delete the record between our read and the batch by wrapping
		// the transport.
		client := loopbackClient()
		inner := client.Transport
		client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasSuffix(r.URL.Path, "/batch") {
				f.mu.Lock()
				delete(f.records, id)
				f.mu.Unlock()
			}
			return inner.RoundTrip(r)
		})
		p2, err := dnsprovider.NewCloudflare(dnsprovider.CloudflareConfig{APIToken: "good-token"}, client, base)
		require.NoError(t, err)
		err = p2.Apply(ctx, zone, c)
		var ce *dnsprovider.ConflictError
		require.ErrorAs(t, err, &ce)
		require.Empty(t, ce.Current)
	})
}

// TestCloudflareRaceSeenAfterWrite: Cloudflare writes without a
// precondition, so a record added between the read and the batch is not
// refused; Apply reads back and reports the conflict with what the zone
// now holds instead of claiming success.
func TestCloudflareRaceSeenAfterWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, base := newFakeCloudflare(t)
	f.add("race.example.com", "TXT", `"v=spf1 include:a.example ~all"`)
	zone := dnsprovider.Zone{Name: "example.com", ID: cfZoneID}
	client := loopbackClient()
	inner := client.Transport
	raced := false
	client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.HasSuffix(r.URL.Path, "/batch") && !raced {
			raced = true
			f.mu.Lock()
			f.add("race.example.com", "TXT", `"v=spf1 include:b.example ~all"`)
			f.mu.Unlock()
		}
		return inner.RoundTrip(r)
	})
	p, err := dnsprovider.NewCloudflare(dnsprovider.CloudflareConfig{APIToken: "good-token"}, client, base)
	require.NoError(t, err)
	c := dnsprovider.Change{Name: "race.example.com", Type: "TXT", Current: []string{"v=spf1 include:a.example ~all"},
		Remove: []string{"v=spf1 include:a.example ~all"}, Add: []string{"v=spf1 -all"}}
	err = p.Apply(ctx, zone, c)
	var ce *dnsprovider.ConflictError
	require.ErrorAs(t, err, &ce)
	require.ElementsMatch(t, []string{"v=spf1 include:b.example ~all", "v=spf1 -all"}, ce.Current)

	// Without a race, the read-back matches and Apply succeeds.
	c = dnsprovider.Change{Name: "race.example.com", Type: "TXT", Current: ce.Current, Remove: []string{"v=spf1 include:b.example ~all"}}
	require.NoError(t, p.Apply(ctx, zone, c))
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestTXTQuoting(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 300) + `"\`
	q := dnsprovider.QuoteTXT(long)
	require.True(t, strings.HasPrefix(q, `"`+strings.Repeat("a", 255)+`" "`))
	require.Equal(t, long, dnsprovider.UnquoteTXT(q))
	require.Equal(t, "plain", dnsprovider.UnquoteTXT("plain"))
}
