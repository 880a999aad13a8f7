package dnsprovider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/aws-sdk-go-v2/service/route53/types"
	"github.com/aws/smithy-go"
)

// Route53Config is a route53 connection's configuration.
type Route53Config struct {
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	// HostedZoneID, when set, limits the connection to that hosted zone;
	// otherwise zones are found by name.
	HostedZoneID string `json:"hosted_zone_id,omitempty"`
}

// Route53 is a Route 53 connection through the SDK's route53 package.
type Route53 struct {
	client *route53.Client
	zoneID string
}

// NewRoute53 checks cfg and returns the connection. httpClient must be the
// SSRF-guarded client; endpoint is empty except in tests (the SDK's
// default endpoint then).
func NewRoute53(cfg Route53Config, httpClient *http.Client, endpoint string) (*Route53, error) {
	ak, sk := strings.TrimSpace(cfg.AccessKeyID), strings.TrimSpace(cfg.SecretAccessKey)
	if ak == "" {
		return nil, &FieldError{Field: "access_key_id", Message: "is required"}
	}
	if sk == "" {
		return nil, &FieldError{Field: "secret_access_key", Message: "is required"}
	}
	zoneID := strings.TrimPrefix(strings.TrimSpace(cfg.HostedZoneID), "/hostedzone/")
	if strings.ContainsAny(zoneID, "/?# ") {
		return nil, &FieldError{Field: "hosted_zone_id", Message: "must be a hosted zone id such as Z0123456789ABC"}
	}
	opts := route53.Options{
		Region:      "us-east-1", // Route 53 is global; its API is signed for us-east-1
		Credentials: credentials.NewStaticCredentialsProvider(ak, sk, ""),
		HTTPClient:  httpClient,
		Retryer:     aws.NopRetryer{},
	}
	if endpoint != "" {
		opts.BaseEndpoint = aws.String(endpoint)
	}
	return &Route53{client: route53.New(opts), zoneID: zoneID}, nil
}

// Kind implements Provider.
func (p *Route53) Kind() string { return KindRoute53 }

// r53Error turns an API error into a *ProviderError naming what failed.
func r53Error(what string, err error) error {
	var de *smithy.DeserializationError
	if errors.As(err, &de) {
		return fmt.Errorf("%w: %s: Route 53's answer did not decode: %w", ErrBadAnswer, what, err)
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return err
	}
	switch ae.ErrorCode() {
	case "InvalidClientTokenId", "SignatureDoesNotMatch", "AccessDenied", "AccessDeniedException", "UnrecognizedClientException", "IncompleteSignature":
		return &ProviderError{What: "access key", Message: fmt.Sprintf("Route 53 refused the credentials (%s: %s)", ae.ErrorCode(), ae.ErrorMessage())}
	case "NoSuchHostedZone":
		return &ProviderError{What: "hosted zone", Message: ae.ErrorMessage()}
	}
	return &ProviderError{What: what, Message: fmt.Sprintf("%s: %s", ae.ErrorCode(), ae.ErrorMessage())}
}

// Verify implements Provider: reads the configured hosted zone, or lists
// one hosted zone.
func (p *Route53) Verify(ctx context.Context) error {
	if p.zoneID != "" {
		_, err := p.client.GetHostedZone(ctx, &route53.GetHostedZoneInput{Id: aws.String(p.zoneID)})
		if err != nil {
			return r53Error("hosted zone", err)
		}
		return nil
	}
	_, err := p.client.ListHostedZones(ctx, &route53.ListHostedZonesInput{MaxItems: aws.Int32(1)})
	if err != nil {
		return r53Error("hosted zone list", err)
	}
	return nil
}

// FindZone implements Provider: the configured hosted zone when it holds
// name, else the nearest public hosted zone named like an ancestor.
func (p *Route53) FindZone(ctx context.Context, name string) (Zone, error) {
	name = normName(name)
	if p.zoneID != "" {
		out, err := p.client.GetHostedZone(ctx, &route53.GetHostedZoneInput{Id: aws.String(p.zoneID)})
		if err != nil {
			return Zone{}, r53Error("hosted zone", err)
		}
		zn := normName(aws.ToString(out.HostedZone.Name))
		if name == zn || strings.HasSuffix(name, "."+zn) {
			return Zone{Name: zn, ID: p.zoneID}, nil
		}
		return Zone{}, ErrZoneNotFound
	}
	for _, cand := range parents(name) {
		out, err := p.client.ListHostedZonesByName(ctx, &route53.ListHostedZonesByNameInput{DNSName: aws.String(cand), MaxItems: aws.Int32(10)})
		if err != nil {
			return Zone{}, r53Error("hosted zone lookup", err)
		}
		for _, z := range out.HostedZones {
			if normName(aws.ToString(z.Name)) != cand {
				continue
			}
			if z.Config != nil && z.Config.PrivateZone {
				continue
			}
			return Zone{Name: cand, ID: strings.TrimPrefix(aws.ToString(z.Id), "/hostedzone/")}, nil
		}
	}
	return Zone{}, ErrZoneNotFound
}

// Read implements Provider.
func (p *Route53) Read(ctx context.Context, zone Zone, name, typ string) (RRset, error) {
	out, err := p.client.ListResourceRecordSets(ctx, &route53.ListResourceRecordSetsInput{
		HostedZoneId:    aws.String(zone.ID),
		StartRecordName: aws.String(normName(name) + "."),
		StartRecordType: types.RRType(strings.ToUpper(typ)),
		MaxItems:        aws.Int32(1),
	})
	if err != nil {
		return RRset{}, r53Error("record lookup", err)
	}
	rs := RRset{Values: []string{}}
	for _, set := range out.ResourceRecordSets {
		if normName(aws.ToString(set.Name)) != normName(name) || !strings.EqualFold(string(set.Type), typ) || set.SetIdentifier != nil {
			continue
		}
		rs.TTL = uint32(aws.ToInt64(set.TTL))
		for _, r := range set.ResourceRecords {
			v := aws.ToString(r.Value)
			if strings.EqualFold(typ, "TXT") {
				v = UnquoteTXT(v)
			}
			rs.Values = append(rs.Values, v)
		}
	}
	return rs, nil
}

func r53Records(typ string, values []string) []types.ResourceRecord {
	out := make([]types.ResourceRecord, 0, len(values))
	for _, v := range values {
		if strings.EqualFold(typ, "TXT") {
			v = QuoteTXT(v)
		}
		out = append(out, types.ResourceRecord{Value: aws.String(v)})
	}
	return out
}

// changeBatch is DELETE of the exact current RRset (values and TTL) and
// CREATE of the proposed one: Route 53 refuses the batch as a whole when
// the DELETE does not match what the zone holds.
func (p *Route53) changeBatch(zone Zone, c Change, currentTTL uint32) *route53.ChangeResourceRecordSetsInput {
	name := aws.String(normName(c.Name) + ".")
	typ := types.RRType(strings.ToUpper(c.Type))
	var changes []types.Change
	ttl := c.ttl()
	if len(c.Current) > 0 {
		changes = append(changes, types.Change{Action: types.ChangeActionDelete, ResourceRecordSet: &types.ResourceRecordSet{
			Name: name, Type: typ, TTL: aws.Int64(int64(currentTTL)), ResourceRecords: r53Records(c.Type, c.Current),
		}})
		ttl = currentTTL
	}
	if next := c.Proposed(); len(next) > 0 {
		changes = append(changes, types.Change{Action: types.ChangeActionCreate, ResourceRecordSet: &types.ResourceRecordSet{
			Name: name, Type: typ, TTL: aws.Int64(int64(ttl)), ResourceRecords: r53Records(c.Type, next),
		}})
	}
	return &route53.ChangeResourceRecordSetsInput{
		HostedZoneId: aws.String(zone.ID),
		ChangeBatch:  &types.ChangeBatch{Comment: aws.String("mailwatch DNS fix"), Changes: changes},
	}
}

// Plan implements Provider: the change batch (the DELETE's TTL is the one
// read when the change is applied).
func (p *Route53) Plan(zone Zone, c Change) (any, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return p.changeBatch(zone, c, c.ttl()), nil
}

// Apply implements Provider.
func (p *Route53) Apply(ctx context.Context, zone Zone, c Change) error {
	if err := c.Validate(); err != nil {
		return err
	}
	cur, err := p.Read(ctx, zone, c.Name, c.Type)
	if err != nil {
		return err
	}
	if !sameSet(cur.Values, c.Current) {
		return &ConflictError{Current: cur.Values}
	}
	_, err = p.client.ChangeResourceRecordSets(ctx, p.changeBatch(zone, c, cur.TTL))
	var icb *types.InvalidChangeBatch
	if errors.As(err, &icb) {
		now, rerr := p.Read(ctx, zone, c.Name, c.Type)
		if rerr != nil || sameSet(now.Values, c.Current) {
			// The values still match: the batch was refused for another
			// reason, which the customer must see.
			if rerr == nil {
				return &ProviderError{What: "change batch", Message: strings.Join(icb.Messages, "; ")}
			}
			return &ConflictError{}
		}
		return &ConflictError{Current: now.Values}
	}
	if err != nil {
		return r53Error("change batch", err)
	}
	return nil
}
