package dataapi

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// searchEvents gives an account five events made for the filter operators;
// it returns their ids by name (e1..e5).
func searchEvents(t *testing.T, db dbutil.Executor, account uuid.UUID) map[uuid.UUID]string {
	t.Helper()
	names := map[uuid.UUID]string{}
	for _, e := range []struct {
		name, typ, severity string
		domain              *string
		tags                []string
		payload             string
		note                *string
	}{
		{"e1", "bounce_spike", "info", ptr("shop.example.com"), []string{"prod", "eu"}, `{"k": "e1", "provider": "ses", "rate": 5}`, nil},
		{"e2", "health_score_changed", "info", ptr("blog.example.org"), []string{"prod"}, `{"k": "e2", "score": 80}`, nil},
		{"e3", "dmarc_failure", "info", ptr("100%_off.example.net"), []string{}, `{"k": "e3", "provider": "ses", "note": "the quick brown foxes"}`, nil},
		{"e4", "bounce_spike", "info", ptr("1000_off.example.net"), []string{"us"}, `{"k": "e4"}`, nil},
		{"e5", "health_score_changed", "critical", nil, []string{"eu"}, `{"k": "e5"}`, ptr("Looked at it")},
	} {
		id := uuid.Must(uuid.NewV7())
		_, err := db.Exec(context.Background(), `INSERT INTO events (id, account_id, event_type, severity, domain, tags, payload,
			rendered, acknowledged_at, acknowledged_note)
			VALUES ($1, $2, $3, $4, $5, $6, $7, '{}', CASE WHEN $8::text IS NULL THEN NULL ELSE now() END, $8)`,
			id, account, e.typ, e.severity, e.domain, e.tags, e.payload, e.note)
		require.NoError(t, err)
		names[id] = e.name
	}
	return names
}

func ptr(s string) *string { return &s }

// TestRunOperators runs every operator against Postgres under RLS: the rows
// each one selects, and the refusals, as PostgREST answers them. Bob has
// the same rows as Alice; every answer is also computed with the builder's
// own account filter removed, and must be the same, so none of the
// operators (or=/and= included) reaches another account's rows.
func TestRunOperators(t *testing.T) {
	t.Parallel()
	db := dbtest.Tx(t)
	alice, bob := seed(t, db, 0), seed(t, db, 0)
	names := searchEvents(t, db, alice.id)
	searchEvents(t, db, bob.id)
	r := &Runner{DB: db}
	buggy := &Runner{DB: db, opts: buildOptions{omitAccountFilter: true}}

	q := url.QueryEscape
	for raw, want := range map[string][]string{
		// * is %; % and _ keep their LIKE meaning; \ escapes them.
		"domain=like.*example.com":                                {"e1"},
		"domain=like." + q("100%*"):                               {"e3", "e4"},
		"domain=like." + q(`100\%*`):                              {"e3"},
		"domain=like.100__off*":                                   {"e3", "e4"},
		"domain=like." + q(`100\%\_off*`):                         {"e3"},
		"domain=like." + q(`1000\_off.example.net`):               {"e4"},
		"domain=ilike.*EXAMPLE.COM":                               {"e1"},
		"domain=like.*EXAMPLE.COM":                                {},
		"domain=not.ilike.*example.net":                           {"e1", "e2"},
		"domain=like(any)." + q("{shop*,blog*}"):                  {"e1", "e2"},
		"domain=like(all)." + q("{*off*,1000*}"):                  {"e4"},
		"note=ilike.looked*":                                      {"e5"},
		"event_type=eq(any)." + q("{bounce_spike,dmarc_failure}"): {"e1", "e3", "e4"},
		"created_at=lt(all)." + q("{2999-01-01,3000-01-01}"):      {"e1", "e2", "e3", "e4", "e5"},
		"domain=isdistinct.shop.example.com":                      {"e2", "e3", "e4", "e5"},
		"domain=not.isdistinct.shop.example.com":                  {"e1"},
		"domain=is.not_null":                                      {"e1", "e2", "e3", "e4"},
		"domain=not.is.null":                                      {"e1", "e2", "e3", "e4"},
		"event_type=eq.bounce_spike&domain=eq.shop.example.com":   {"e1"},
		"event_type=in.(bounce_spike,dmarc_failure)":              {"e1", "e3", "e4"},
		"event_type=not.in.(bounce_spike,dmarc_failure)":          {"e2", "e5"},
		// Containment and overlap on an array and on jsonb.
		"tags=cs.{prod}":                            {"e1", "e2"},
		"tags=cd.{prod,eu}":                         {"e1", "e2", "e3", "e5"},
		"tags=ov.{eu,us}":                           {"e1", "e4", "e5"},
		"tags=not.ov.{eu}":                          {"e2", "e3", "e4"},
		"payload=cs." + q(`{"provider":"ses"}`):     {"e1", "e3"},
		"payload=cd." + q(`{"k":"e4","x":1}`):       {"e4"},
		"payload=not.cs." + q(`{"provider":"ses"}`): {"e2", "e4", "e5"},
		// Full text, on jsonb's strings and on text.
		"payload=plfts(english)." + q("quick fox"):   {"e3"},
		"payload=fts(english)." + q("brown & fox"):   {"e3"},
		"payload=phfts(english)." + q("brown foxes"): {"e3"},
		"payload=phfts(english)." + q("foxes brown"): {},
		"payload=wfts(english)." + q("quick -slow"):  {"e3"},
		"acknowledged_note=fts(simple).looked":       {"e5"},
		"payload=not.plfts." + q("quick fox"):        {"e1", "e2", "e4", "e5"},
		// or=/and=, nested and negated; several of them all hold.
		"or=(event_type.eq.dmarc_failure,domain.ilike.*BLOG*)":                                       {"e2", "e3"},
		"or=(and(event_type.eq.bounce_spike,tags.cs.{eu}),domain.is.null)":                           {"e1", "e5"},
		"and=(tags.cs.{prod},not.or(domain.like.shop*,severity.eq.critical))":                        {"e2"},
		"not.or=(event_type.eq.bounce_spike,domain.is.null)":                                         {"e2", "e3"},
		"or=(event_type.eq.bounce_spike,tags.cs.{eu})&or=(domain.is.null,tags.cs.{prod})":            {"e1", "e5"},
		"or=(" + q(`domain.in.("100%_off.example.net",shop.example.com),severity.eq.critical`) + ")": {"e1", "e3", "e5"},
		"or=(" + q(`domain.eq."100%_off.example.net",domain.like.1000*`) + ")":                       {"e3", "e4"},
		"or=(account_id.eq." + bob.id.String() + ",event_type.eq.bounce_spike)":                      {"e1", "e4"},
		"or=(payload.plfts(english).fox,tags.ov.{us})":                                               {"e3", "e4"},
	} {
		for _, runner := range []*Runner{r, buggy} {
			res, err := run(t, runner, alice, "events", "select=id,account_id&"+raw, false, false)
			require.NoError(t, err, raw)
			got := []string{}
			for _, row := range rowsOf(t, res) {
				require.Equal(t, alice.id.String(), row["account_id"], raw)
				got = append(got, names[uuid.MustParse(row["id"].(string))])
			}
			sort.Strings(got)
			require.Equal(t, want, got, "%s (account filter removed: %v)", raw, runner == buggy)
		}
	}

	// The count reads the same conditions, with the same arguments.
	res, err := run(t, r, alice, "events", "limit=1&domain=like.100*&or=("+q("payload.plfts(english).fox,tags.ov.{us}")+")", true, false)
	require.NoError(t, err)
	require.Equal(t, "0-0/2", res.ContentRange)

	for raw, code := range map[string]string{
		"domain=like." + q(`*\`):              "22025", // LIKE's own refusal: a trailing escape
		"id=ilike.*a*":                        "42883",
		"tags=like.x":                         "42883",
		"domain=cs.x":                         "42883",
		"payload=ov.{}":                       "42883",
		"tags=sl.(1,2)":                       "42883",
		"tags=adj.(1,2)":                      "42883",
		"created_at=fts.x":                    "42883",
		"tags=eq(any).{a}":                    "42883",
		"severity=is.true":                    "42883",
		"payload=fts(english)." + q("a & (b"): "42601",
		"payload=fts(nope).a":                 "42704",
		"domain=eq(any).notalist":             "22P02",
		"payload=cs.{bad":                     "22P02",
		"or=(nope.eq.1)":                      "42703",
		"not.and=(domain.eq.x,or(created_at.gt.never))": "22007",
	} {
		_, err := run(t, r, alice, "events", raw, false, false)
		require.Error(t, err, raw)
		requireCode(t, err, http.StatusBadRequest, code)
	}
}
