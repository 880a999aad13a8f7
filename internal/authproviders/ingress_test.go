package authproviders

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseEvent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body string
		want Event
	}{
		{`{"type":"user.created","data":{"id":"user_1","primary_email_address_id":"b","email_addresses":[{"id":"a","email_address":"x@e.com"},{"id":"b","email_address":"Y@E.com"}]}}`,
			Event{Type: "user.created", Action: ActionUpsert, Subject: "user_1", Email: "y@e.com"}},
		{`{"id":"event_1","event":"user.deleted","data":{"id":"user_2","email":"z@e.com"}}`,
			Event{ID: "event_1", Type: "user.deleted", Action: ActionDelete, Subject: "user_2", Email: "z@e.com"}},
		{`{"type":"UPDATE","table":"users","record":{"id":"u3","email":"n@e.com","updated_at":"t1"},"old_record":{"id":"u3"}}`,
			Event{ID: "user.updated:u3:t1", Type: "user.updated", Action: ActionUpsert, Subject: "u3", Email: "n@e.com"}},
		{`{"type":"DELETE","table":"users","record":null,"old_record":{"id":"u4","updated_at":"t2"}}`,
			Event{ID: "user.deleted:u4:t2", Type: "user.deleted", Action: ActionDelete, Subject: "u4"}},
		{`{"type":"INSERT","table":"profiles","record":{"id":"p"}}`, Event{Type: "INSERT"}},
		{`{"type":"session.created","data":{"id":"s"}}`, Event{Type: "session.created"}},
	} {
		got, err := ParseEvent([]byte(c.body))
		require.NoError(t, err, c.body)
		require.Equal(t, c.want, got, c.body)
	}
	for _, bad := range []string{`nope`, `{"type":"user.created"}`, `{"type":"user.created","data":{"email":"x@e.com"}}`,
		`{"type":"user.created","data":` + strings.Repeat("[", MaxBodyBytes) + `}`} {
		_, err := ParseEvent([]byte(bad))
		require.Error(t, err)
	}
}

func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(`{"type":"user.created","data":{"id":"user_1","email_addresses":[{"id":"a","email_address":"x@e.com"}]}}`))
	f.Add([]byte(`{"id":"event_1","event":"user.deleted","data":{"id":"user_2"}}`))
	f.Add([]byte(`{"type":"INSERT","table":"users","record":{"id":"u3","email":"n@e.com"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := ParseEvent(body)
		if err == nil && ev.Action != ActionIgnore && ev.Subject == "" {
			t.Fatalf("an applied event without a subject: %q", body)
		}
	})
}
