package dnsprovider_test

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dnsprovider"
)

const r53NS = "https://route53.amazonaws.com/doc/2013-04-01/"

// fakeRoute53 answers the REST-XML API routes the connection uses with the
// shapes of the Route 53 API reference: ErrorResponse bodies for
// InvalidClientTokenId and NoSuchHostedZone, and the InvalidChangeBatch
// body with its Messages when a DELETE does not match.
type fakeRoute53 struct {
	mu      sync.Mutex
	keyID   string
	zoneID  string
	zone    string
	sets    map[string]r53Set // name + " " + type
	batches []string
}

type r53Set struct {
	TTL    int64
	Values []string // as Route 53 stores them (TXT quoted)
}

type xmlRRSet struct {
	Name            string   `xml:"Name"`
	Type            string   `xml:"Type"`
	TTL             int64    `xml:"TTL"`
	ResourceRecords []string `xml:"ResourceRecords>ResourceRecord>Value"`
}

func r53Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0"?>
<ErrorResponse xmlns="%s"><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>9f2a1c5e-0000-4000-8000-000000000001</RequestId></ErrorResponse>`, r53NS, code, msg)
}

func (f *fakeRoute53) hostedZoneXML() string {
	return fmt.Sprintf(`<HostedZone><Id>/hostedzone/%s</Id><Name>%s.</Name><CallerReference>ref-1</CallerReference><Config><Comment>test</Comment><PrivateZone>false</PrivateZone></Config><ResourceRecordSetCount>%d</ResourceRecordSetCount></HostedZone>`, f.zoneID, f.zone, len(f.sets))
}

func (f *fakeRoute53) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !strings.Contains(r.Header.Get("Authorization"), "Credential="+f.keyID+"/") {
		r53Error(w, http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid.")
		return
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	w.Header().Set("Content-Type", "text/xml")
	switch {
	case r.Method == http.MethodGet && path == "/2013-04-01/hostedzone":
		fmt.Fprintf(w, `<?xml version="1.0"?><ListHostedZonesResponse xmlns="%s"><HostedZones>%s</HostedZones><IsTruncated>false</IsTruncated><MaxItems>1</MaxItems></ListHostedZonesResponse>`, r53NS, f.hostedZoneXML())
	case r.Method == http.MethodGet && path == "/2013-04-01/hostedzone/"+f.zoneID:
		fmt.Fprintf(w, `<?xml version="1.0"?><GetHostedZoneResponse xmlns="%s">%s<DelegationSet><NameServers><NameServer>ns-2048.awsdns-64.com</NameServer></NameServers></DelegationSet></GetHostedZoneResponse>`, r53NS, f.hostedZoneXML())
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/2013-04-01/hostedzone/") && !strings.Contains(strings.TrimPrefix(path, "/2013-04-01/hostedzone/"), "/"):
		r53Error(w, http.StatusNotFound, "NoSuchHostedZone", "No hosted zone found with ID: "+strings.TrimPrefix(path, "/2013-04-01/hostedzone/"))
	case r.Method == http.MethodGet && path == "/2013-04-01/hostedzonesbyname":
		zones := ""
		if strings.TrimSuffix(r.URL.Query().Get("dnsname"), ".") == f.zone {
			zones = f.hostedZoneXML()
		}
		fmt.Fprintf(w, `<?xml version="1.0"?><ListHostedZonesByNameResponse xmlns="%s"><HostedZones>%s</HostedZones><DNSName>%s</DNSName><IsTruncated>false</IsTruncated><MaxItems>10</MaxItems></ListHostedZonesByNameResponse>`, r53NS, zones, r.URL.Query().Get("dnsname"))
	case r.Method == http.MethodGet && path == "/2013-04-01/hostedzone/"+f.zoneID+"/rrset":
		name := strings.TrimSuffix(r.URL.Query().Get("name"), ".")
		typ := r.URL.Query().Get("type")
		// Route 53 lists from the start name in its order; the nearest set
		// at or after (name, type) is enough here.
		keys := make([]string, 0, len(f.sets))
		for k := range f.sets {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := ""
		for _, k := range keys {
			if k >= name+" "+typ {
				s := f.sets[k]
				n, t, _ := strings.Cut(k, " ")
				recs := ""
				for _, v := range s.Values {
					recs += "<ResourceRecord><Value>" + xmlEscape(v) + "</Value></ResourceRecord>"
				}
				out = fmt.Sprintf("<ResourceRecordSet><Name>%s.</Name><Type>%s</Type><TTL>%d</TTL><ResourceRecords>%s</ResourceRecords></ResourceRecordSet>", n, t, s.TTL, recs)
				break
			}
		}
		fmt.Fprintf(w, `<?xml version="1.0"?><ListResourceRecordSetsResponse xmlns="%s"><ResourceRecordSets>%s</ResourceRecordSets><IsTruncated>false</IsTruncated><MaxItems>1</MaxItems></ListResourceRecordSetsResponse>`, r53NS, out)
	case r.Method == http.MethodPost && path == "/2013-04-01/hostedzone/"+f.zoneID+"/rrset":
		var req struct {
			Changes []struct {
				Action string   `xml:"Action"`
				Set    xmlRRSet `xml:"ResourceRecordSet"`
			} `xml:"ChangeBatch>Changes>Change"`
		}
		raw := new(strings.Builder)
		if err := xml.NewDecoder(teeReader(r, raw)).Decode(&req); err != nil {
			r53Error(w, http.StatusBadRequest, "InvalidInput", "Invalid XML")
			return
		}
		f.batches = append(f.batches, raw.String())
		next := map[string]r53Set{}
		for k, v := range f.sets {
			next[k] = v
		}
		var msgs []string
		for _, c := range req.Changes {
			k := strings.TrimSuffix(c.Set.Name, ".") + " " + c.Set.Type
			cur, exists := next[k]
			switch c.Action {
			case "DELETE":
				if !exists || cur.TTL != c.Set.TTL || !dnsprovider.SameSet(cur.Values, c.Set.ResourceRecords) {
					msgs = append(msgs, fmt.Sprintf("Tried to delete resource record set [name='%s', type='%s'] but the values provided do not match the current values", c.Set.Name, c.Set.Type))
					continue
				}
				delete(next, k)
			case "CREATE":
				if exists {
					msgs = append(msgs, fmt.Sprintf("Tried to create resource record set [name='%s', type='%s'] but it already exists", c.Set.Name, c.Set.Type))
					continue
				}
				next[k] = r53Set{TTL: c.Set.TTL, Values: c.Set.ResourceRecords}
			}
		}
		if len(msgs) > 0 {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `<?xml version="1.0"?><InvalidChangeBatch xmlns="%s"><Messages>`, r53NS)
			for _, m := range msgs {
				fmt.Fprintf(w, "<Message>%s</Message>", xmlEscape(m))
			}
			fmt.Fprint(w, `</Messages><RequestId>b25f48e8-84fd-11e6-80d9-574e0c4664cb</RequestId></InvalidChangeBatch>`)
			return
		}
		f.sets = next
		fmt.Fprintf(w, `<?xml version="1.0"?><ChangeResourceRecordSetsResponse xmlns="%s"><ChangeInfo><Id>/change/C2682N5HXP0BZ4</Id><Status>PENDING</Status><SubmittedAt>2024-01-01T00:00:00.000Z</SubmittedAt><Comment>mailwatch DNS fix</Comment></ChangeInfo></ChangeResourceRecordSetsResponse>`, r53NS)
	default:
		r53Error(w, http.StatusNotFound, "NotFound", "unknown route "+r.URL.Path)
	}
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

type teeBody struct {
	r   *http.Request
	out *strings.Builder
}

func (t teeBody) Read(p []byte) (int, error) {
	n, err := t.r.Body.Read(p)
	t.out.Write(p[:n])
	return n, err
}

func teeReader(r *http.Request, out *strings.Builder) teeBody { return teeBody{r, out} }

func TestRoute53(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &fakeRoute53{keyID: "AKIAIOSFODNN7EXAMPLE", zoneID: "Z1D633PJN98FT9", zone: "example.com", sets: map[string]r53Set{
		"example.com TXT": {TTL: 300, Values: []string{`"v=spf1 include:a.example include:b.example ~all"`, `"google-site-verification=abc123"`}},
	}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	newP := func(key, zoneID string) *dnsprovider.Route53 {
		p, err := dnsprovider.NewRoute53(dnsprovider.Route53Config{AccessKeyID: key, SecretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", HostedZoneID: zoneID}, loopbackClient(), srv.URL)
		require.NoError(t, err)
		return p
	}
	p := newP(f.keyID, "")

	t.Run("VerifyAndBadKey", func(t *testing.T) {
		require.NoError(t, p.Verify(ctx))
		require.NoError(t, newP(f.keyID, f.zoneID).Verify(ctx))
		var pe *dnsprovider.ProviderError
		require.ErrorAs(t, newP("AKIAWRONG", "").Verify(ctx), &pe)
		require.Equal(t, "access key", pe.What)
		require.Contains(t, pe.Message, "InvalidClientTokenId")
		require.ErrorAs(t, newP(f.keyID, "ZNOSUCH").Verify(ctx), &pe)
		require.Equal(t, "hosted zone", pe.What)
	})

	zone, err := p.FindZone(ctx, "_dmarc.example.com")
	require.NoError(t, err)
	require.Equal(t, dnsprovider.Zone{Name: "example.com", ID: f.zoneID}, zone)
	_, err = newP(f.keyID, f.zoneID).FindZone(ctx, "example.org")
	require.ErrorIs(t, err, dnsprovider.ErrZoneNotFound)

	t.Run("CreateThenSPFOnly", func(t *testing.T) {
		require.NoError(t, p.Apply(ctx, zone, dnsprovider.Change{Name: "_dmarc.example.com", Type: "TXT", TTL: 600, Add: []string{"v=DMARC1; p=none"}}))
		got, err := p.Read(ctx, zone, "_dmarc.example.com", "TXT")
		require.NoError(t, err)
		require.Equal(t, dnsprovider.RRset{TTL: 600, Values: []string{"v=DMARC1; p=none"}}, got)

		cur, err := p.Read(ctx, zone, "example.com", "TXT")
		require.NoError(t, err)
		require.Equal(t, uint32(300), cur.TTL)
		c := dnsprovider.Change{Name: "example.com", Type: "TXT", Current: cur.Values, Remove: []string{"v=spf1 include:a.example include:b.example ~all"}, Add: []string{"v=spf1 ip4:192.0.2.0/24 -all"}}
		require.NoError(t, p.Apply(ctx, zone, c))
		f.mu.Lock()
		last := f.batches[len(f.batches)-1]
		after := f.sets["example.com TXT"]
		f.mu.Unlock()
		// DELETE of the exact old values (and TTL), CREATE of the new set
		// that keeps the other record.
		require.Contains(t, last, "<Action>DELETE</Action>")
		require.Contains(t, last, "<TTL>300</TTL>")
		require.Contains(t, last, "&#34;v=spf1 include:a.example include:b.example ~all&#34;")
		require.ElementsMatch(t, []string{`"v=spf1 ip4:192.0.2.0/24 -all"`, `"google-site-verification=abc123"`}, after.Values)
		require.Equal(t, int64(300), after.TTL)
	})

	t.Run("ConcurrentEditConflicts", func(t *testing.T) {
		cur, err := p.Read(ctx, zone, "example.com", "TXT")
		require.NoError(t, err)
		f.mu.Lock()
		s := f.sets["example.com TXT"]
		s.Values = append(slices.Clone(s.Values), `"MS=ms1"`)
		f.sets["example.com TXT"] = s
		f.mu.Unlock()
		err = p.Apply(ctx, zone, dnsprovider.Change{Name: "example.com", Type: "TXT", Current: cur.Values, Remove: []string{"v=spf1 ip4:192.0.2.0/24 -all"}, Add: []string{"v=spf1 -all"}})
		var ce *dnsprovider.ConflictError
		require.ErrorAs(t, err, &ce)
		require.Contains(t, ce.Current, "MS=ms1")
	})

	t.Run("InvalidChangeBatchBodyIsConflict", func(t *testing.T) {
		// The record changes between our read and the batch: Route 53's
		// InvalidChangeBatch answer becomes a conflict with the new value.
		client := loopbackClient()
		inner := client.Transport
		client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost {
				f.mu.Lock()
				f.sets["race.example.com TXT"] = r53Set{TTL: 300, Values: []string{`"changed"`}}
				f.mu.Unlock()
			}
			return inner.RoundTrip(r)
		})
		f.mu.Lock()
		f.sets["race.example.com TXT"] = r53Set{TTL: 300, Values: []string{`"orig"`}}
		f.mu.Unlock()
		p2, err := dnsprovider.NewRoute53(dnsprovider.Route53Config{AccessKeyID: f.keyID, SecretAccessKey: "x"}, client, srv.URL)
		require.NoError(t, err)
		err = p2.Apply(ctx, zone, dnsprovider.Change{Name: "race.example.com", Type: "TXT", Current: []string{"orig"}, Remove: []string{"orig"}, Add: []string{"new"}})
		var ce *dnsprovider.ConflictError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, []string{"changed"}, ce.Current)
	})
}
