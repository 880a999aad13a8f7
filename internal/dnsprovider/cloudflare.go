package dnsprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// CloudflareBaseURL is the v4 API's base address.
const CloudflareBaseURL = "https://api.cloudflare.com/client/v4"

// cloudflareMaxBody bounds how much of an API answer is read.
const cloudflareMaxBody = 4 << 20

// cloudflareRecordGone is the API's error code for a record id that no
// longer exists ("Record does not exist.").
const cloudflareRecordGone = 81044

// CloudflareConfig is a cloudflare connection's configuration.
type CloudflareConfig struct {
	// APIToken is an API token with Zone:Read and DNS:Edit.
	APIToken string `json:"api_token"`
}

// Cloudflare is a Cloudflare connection over the v4 REST API.
type Cloudflare struct {
	token   string
	baseURL string
	client  *http.Client
}

// NewCloudflare checks cfg and returns the connection. client must be the
// SSRF-guarded client; baseURL is CloudflareBaseURL except in tests.
func NewCloudflare(cfg CloudflareConfig, client *http.Client, baseURL string) (*Cloudflare, error) {
	tok := strings.TrimSpace(cfg.APIToken)
	if tok == "" {
		return nil, &FieldError{Field: "api_token", Message: "is required"}
	}
	if strings.ContainsAny(tok, " \r\n\t") {
		return nil, &FieldError{Field: "api_token", Message: "must be a single token"}
	}
	if baseURL == "" {
		baseURL = CloudflareBaseURL
	}
	return &Cloudflare{token: tok, baseURL: strings.TrimSuffix(baseURL, "/"), client: client}, nil
}

// Kind implements Provider.
func (p *Cloudflare) Kind() string { return KindCloudflare }

type cfError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type cfEnvelope struct {
	Success    bool            `json:"success"`
	Errors     []cfError       `json:"errors"`
	Result     json.RawMessage `json:"result"`
	ResultInfo *struct {
		Page       int `json:"page"`
		TotalPages int `json:"total_pages"`
	} `json:"result_info"`
}

type cfRecord struct {
	ID      string `json:"id,omitempty"`
	Name    string `json:"name"`
	Type    string `json:"type"`
	Content string `json:"content"`
	TTL     uint32 `json:"ttl"`
}

// cfAPIError is an unsuccessful API answer.
type cfAPIError struct {
	Status int
	Errors []cfError
}

func (e *cfAPIError) Error() string {
	msgs := make([]string, 0, len(e.Errors))
	for _, er := range e.Errors {
		msgs = append(msgs, fmt.Sprintf("%s (code %d)", er.Message, er.Code))
	}
	if len(msgs) == 0 {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return strings.Join(msgs, "; ")
}

func (e *cfAPIError) has(code int) bool {
	for _, er := range e.Errors {
		if er.Code == code {
			return true
		}
	}
	return false
}

func (p *Cloudflare) do(ctx context.Context, method, path string, body any) (*cfEnvelope, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.baseURL+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("error calling Cloudflare: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, cloudflareMaxBody))
	if err != nil {
		return nil, fmt.Errorf("error reading Cloudflare's answer: %w", err)
	}
	env := &cfEnvelope{}
	if err := json.Unmarshal(raw, env); err != nil {
		return nil, fmt.Errorf("%w: Cloudflare answered HTTP %d with a body that is not its JSON envelope", ErrBadAnswer, resp.StatusCode)
	}
	if resp.StatusCode >= 300 || !env.Success {
		apiErr := &cfAPIError{Status: resp.StatusCode, Errors: env.Errors}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			return nil, &ProviderError{What: "API token", Message: "Cloudflare refused the token: " + apiErr.Error()}
		}
		return nil, apiErr
	}
	return env, nil
}

// Verify implements Provider with the token verification endpoint.
func (p *Cloudflare) Verify(ctx context.Context) error {
	env, err := p.do(ctx, http.MethodGet, "/user/tokens/verify", nil)
	if err != nil {
		if ae, ok := err.(*cfAPIError); ok {
			return &ProviderError{What: "API token", Message: "Cloudflare refused the token: " + ae.Error()}
		}
		return err
	}
	var res struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(env.Result, &res)
	if res.Status != "" && res.Status != "active" {
		return &ProviderError{What: "API token", Message: "the token is " + res.Status}
	}
	return nil
}

// FindZone implements Provider: the nearest enclosing zone the token can
// see.
func (p *Cloudflare) FindZone(ctx context.Context, name string) (Zone, error) {
	for _, cand := range parents(name) {
		env, err := p.do(ctx, http.MethodGet, "/zones?name="+url.QueryEscape(cand), nil)
		if err != nil {
			return Zone{}, providerError("zone lookup", err)
		}
		var zones []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(env.Result, &zones); err != nil {
			return Zone{}, fmt.Errorf("error decoding Cloudflare zones: %w", err)
		}
		for _, z := range zones {
			if normName(z.Name) == cand && z.ID != "" {
				return Zone{Name: cand, ID: z.ID}, nil
			}
		}
	}
	return Zone{}, ErrZoneNotFound
}

func providerError(what string, err error) error {
	if ae, ok := err.(*cfAPIError); ok {
		return &ProviderError{What: what, Message: ae.Error()}
	}
	return err
}

func (p *Cloudflare) records(ctx context.Context, zone Zone, name, typ string) ([]cfRecord, error) {
	var out []cfRecord
	for page := 1; page <= 50; page++ {
		q := url.Values{"type": {strings.ToUpper(typ)}, "name": {normName(name)}, "per_page": {"100"}, "page": {fmt.Sprint(page)}}
		env, err := p.do(ctx, http.MethodGet, "/zones/"+url.PathEscape(zone.ID)+"/dns_records?"+q.Encode(), nil)
		if err != nil {
			return nil, providerError("record lookup", err)
		}
		var recs []cfRecord
		if err := json.Unmarshal(env.Result, &recs); err != nil {
			return nil, fmt.Errorf("error decoding Cloudflare records: %w", err)
		}
		for _, r := range recs {
			if normName(r.Name) == normName(name) && strings.EqualFold(r.Type, typ) {
				out = append(out, r)
			}
		}
		if env.ResultInfo == nil || env.ResultInfo.Page >= env.ResultInfo.TotalPages {
			break
		}
	}
	return out, nil
}

func cfValue(typ string, r cfRecord) string {
	if strings.EqualFold(typ, "TXT") {
		return UnquoteTXT(r.Content)
	}
	return r.Content
}

// Read implements Provider.
func (p *Cloudflare) Read(ctx context.Context, zone Zone, name, typ string) (RRset, error) {
	recs, err := p.records(ctx, zone, name, typ)
	if err != nil {
		return RRset{}, err
	}
	out := RRset{Values: []string{}}
	for _, r := range recs {
		out.TTL = r.TTL
		out.Values = append(out.Values, cfValue(typ, r))
	}
	return out, nil
}

// cfBatch is the body of POST /zones/{zone_id}/dns_records/batch, whose
// operations Cloudflare runs in one database transaction (deletes first).
type cfBatch struct {
	Deletes []cfID     `json:"deletes,omitempty"`
	Posts   []cfRecord `json:"posts,omitempty"`
}

type cfID struct {
	ID string `json:"id"`
}

func (p *Cloudflare) batch(c Change, recs []cfRecord) (cfBatch, error) {
	b := cfBatch{Posts: cfPosts(c)}
	used := map[string]bool{}
	for _, v := range c.Remove {
		found := false
		for _, r := range recs {
			if !used[r.ID] && cfValue(c.Type, r) == v {
				used[r.ID] = true
				b.Deletes = append(b.Deletes, cfID{ID: r.ID})
				found = true
				break
			}
		}
		if !found {
			return b, fmt.Errorf("no record holds %q", v)
		}
	}
	return b, nil
}

func cfPosts(c Change) []cfRecord {
	var posts []cfRecord
	for _, v := range c.Add {
		content := v
		if strings.EqualFold(c.Type, "TXT") {
			content = QuoteTXT(v)
		}
		posts = append(posts, cfRecord{Name: normName(c.Name), Type: strings.ToUpper(c.Type), Content: content, TTL: c.ttl()})
	}
	return posts
}

// Plan implements Provider: the batch request. Plan reads nothing, so the
// ids of removed records are written as "<id of the record ...>"; Apply
// finds them when it runs.
func (p *Cloudflare) Plan(zone Zone, c Change) (any, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	b := cfBatch{Posts: cfPosts(c)}
	for _, v := range c.Remove {
		b.Deletes = append(b.Deletes, cfID{ID: fmt.Sprintf("<id of the record %q>", v)})
	}
	return map[string]any{"method": "POST", "path": "/zones/" + zone.ID + "/dns_records/batch", "body": b, "precondition": map[string]any{"name": c.Name, "type": c.Type, "current": c.Current}}, nil
}

// Apply implements Provider: it reads the records at the name, compares
// them with c.Current, and sends one batch naming the ids of the records
// it removes. A record deleted between the read and the batch makes
// Cloudflare refuse the whole batch, which is reported as a conflict.
// Cloudflare has no conditional write, so a record added, or edited in
// place (same id), between the read and the batch is not refused: Apply
// reads the records back and reports a conflict, with what the zone now
// holds, when they are not what the change makes of what it read.
func (p *Cloudflare) Apply(ctx context.Context, zone Zone, c Change) error {
	if err := c.Validate(); err != nil {
		return err
	}
	recs, err := p.records(ctx, zone, c.Name, c.Type)
	if err != nil {
		return err
	}
	cur := make([]string, 0, len(recs))
	for _, r := range recs {
		cur = append(cur, cfValue(c.Type, r))
	}
	if !sameSet(cur, c.Current) {
		return &ConflictError{Current: cur}
	}
	b, err := p.batch(c, recs)
	if err != nil {
		return &ConflictError{Current: cur}
	}
	_, err = p.do(ctx, http.MethodPost, "/zones/"+url.PathEscape(zone.ID)+"/dns_records/batch", b)
	if ae, ok := err.(*cfAPIError); ok {
		if ae.has(cloudflareRecordGone) {
			now, rerr := p.Read(ctx, zone, c.Name, c.Type)
			if rerr != nil {
				return &ConflictError{}
			}
			return &ConflictError{Current: now.Values}
		}
		return &ProviderError{What: "record update", Message: ae.Error()}
	}
	if err != nil {
		return err
	}
	after, err := p.Read(ctx, zone, c.Name, c.Type)
	if err != nil {
		return nil // written; the re-check that follows sees the outcome
	}
	if !sameSet(after.Values, applied(cur, c)) {
		return &ConflictError{Current: after.Values}
	}
	return nil
}

// applied is values after c: one of each of c.Remove removed, c.Add added.
func applied(values []string, c Change) []string {
	out := slices.Clone(values)
	for _, v := range c.Remove {
		if i := slices.Index(out, v); i >= 0 {
			out = slices.Delete(out, i, i+1)
		}
	}
	return append(out, c.Add...)
}
