package reports_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dmarc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/reports"
)

// txtResolver answers TXT lookups from a map; a missing name fails.
type txtResolver struct {
	dnscheck.Resolver
	txt map[string][]string
}

func (r txtResolver) LookupTXT(_ context.Context, name string) ([]string, error) {
	if v, ok := r.txt[name]; ok {
		return v, nil
	}
	return nil, errors.New("server failure")
}

func domainWith(t *testing.T, account uuid.UUID, dmarcRec string, tlsRUA ...string) dbsqlc.Domain {
	t.Helper()
	parsed, err := dmarc.ParseRecord(dmarcRec)
	require.NoError(t, err)
	res := dnscheck.Results{
		DMARC:  &dnscheck.DMARCResult{Result: dnscheck.Result{Records: []string{dmarcRec}}, Parsed: parsed},
		TLSRPT: &dnscheck.TLSRPTResult{RUA: tlsRUA},
	}
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	return dbsqlc.Domain{ID: uuid.New(), AccountID: account, Name: "example.com", Results: raw}
}

// TestInstructions: the rua to publish keeps the record's destinations as
// written (size limits included) and adds ours; the TLS-RPT record keeps
// the current destinations; an address of ours already named adds nothing.
func TestInstructions(t *testing.T) {
	t.Parallel()
	account := uuid.New()
	signer := &reports.Signer{Keyring: ring(t, key(1)), Domain: "inbound.mailwatch.test"}
	authName := "example.com._report._dmarc.inbound.mailwatch.test"
	svc := &reports.Service{Signer: signer, Resolver: txtResolver{txt: map[string][]string{authName: {" V=DMARC1"}}}}
	dmarcAddr := signer.Address(signer.Current(reports.KindDMARC, account, "example.com"))
	tlsAddr := signer.Address(signer.Current(reports.KindTLSRPT, account, "example.com"))

	d := domainWith(t, account, "v=DMARC1; p=none; rua=mailto:a@example.com!10m, mailto:b@example.com", "https://tls.example.com/r")
	in := svc.Instructions(context.Background(), d, nil)
	require.Equal(t, []string{"mailto:a@example.com", "mailto:b@example.com"}, in.DMARC.CurrentRUA)
	require.Equal(t, "mailto:a@example.com!10m, mailto:b@example.com,mailto:"+dmarcAddr, in.DMARC.Value,
		"destinations as written, the size limit kept")
	require.False(t, in.DMARC.NamesAddress)
	require.Equal(t, "v=TLSRPTv1; rua=https://tls.example.com/r,mailto:"+tlsAddr, in.TLSRPT.Value)
	require.Equal(t, authName, in.Authorization.Name)
	require.NotNil(t, in.Authorization.Published)
	require.True(t, *in.Authorization.Published)
	require.Equal(t, []reports.Address{}, in.Addresses)

	d = domainWith(t, account, "v=DMARC1; p=none; rua=mailto:"+dmarcAddr, "MAILTO:"+tlsAddr)
	svc.Resolver = txtResolver{}
	in = svc.Instructions(context.Background(), d, nil)
	require.True(t, in.DMARC.NamesAddress)
	require.Equal(t, "mailto:"+dmarcAddr, in.DMARC.Value)
	require.True(t, in.TLSRPT.NamesAddress)
	require.Equal(t, "v=TLSRPTv1; rua=MAILTO:"+tlsAddr, in.TLSRPT.Value)
	require.Nil(t, in.Authorization.Published)
	require.Error(t, in.Authorization.LookupErr)
}
