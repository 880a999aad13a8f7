package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/inbound"
	"github.com/mailwatch/mailwatch/internal/mimetest"
	"github.com/mailwatch/mailwatch/internal/twilio"
)

// rawDo sends a request with exact headers and body through the whole stack
// and checks the response against the OpenAPI document.
func (b *testBundle) rcvRawDo(t *testing.T, req *http.Request) response {
	t.Helper()
	var sent []byte
	if req.Body != nil {
		var err error
		sent, err = io.ReadAll(req.Body)
		require.NoError(t, err)
		req.Body = io.NopCloser(bytes.NewReader(sent))
	}
	resp, err := b.srv.App().Test(req, -1)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := response{Status: resp.StatusCode, Header: resp.Header, Body: body}
	checkConformanceAs(t, b.srv, req.Method, req.URL.RequestURI(), "", req.Header.Get("Content-Type"), sent, out)
	return out
}

// signedEmail builds a Standard Webhooks signed email ingress request.
func signedEmail(t *testing.T, secret, to string, raw []byte, at time.Time) *http.Request {
	t.Helper()
	v, err := inbound.NewWebhookVerifier(secret)
	require.NoError(t, err)
	id := "msg_" + uuid.NewString()
	sig, err := v.Sign(id, at, raw)
	require.NoError(t, err)
	req := httptest.NewRequest("POST", "/api/webhooks/email?to="+url.QueryEscape(to), bytes.NewReader(raw))
	req.Header.Set("Content-Type", "message/rfc822")
	req.Header.Set(inbound.HeaderWebhookID, id)
	req.Header.Set(inbound.HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
	req.Header.Set(inbound.HeaderWebhookSignature, sig)
	return req
}

func TestEmailIngressWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) {
		o.deps = func(d *api.Deps) { d.MaxMessageBytes = 32 << 10 }
	})
	acct := b.createAccount(t)
	r := b.createReceiver(t, acct.Key, nil)
	raw := []byte("From: Bank <alerts@bank.example>\r\nSubject: Login code\r\n\r\nYour login code is 7391.\r\n")

	t.Run("Valid", func(t *testing.T) {
		req := signedEmail(t, testInboundSecret, `"Me" <`+strings.ToUpper(r.Address)+`>`, raw, time.Now())
		resp := b.rcvRawDo(t, req)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var out struct {
			ReceiverID string `json:"receiver_id"`
			MessageID  string `json:"message_id"`
			Duplicate  bool   `json:"duplicate"`
		}
		resp.JSON(t, &out)
		require.Equal(t, r.ID, out.ReceiverID)
		require.False(t, out.Duplicate)

		m := b.do(t, "GET", receiverPath(r.ID, "/messages/", out.MessageID), acct.Key, nil)
		require.Equal(t, http.StatusOK, m.Status)
		var msg messageJSON
		m.JSON(t, &msg)
		require.Equal(t, "alerts@bank.example", msg.Sender)
		require.Equal(t, []string{"7391"}, msg.Codes)

		// The same webhook-id again (a retry, or a replay to another
		// receiver) is stored once.
		again := httptest.NewRequest("POST", "/api/webhooks/email?to="+url.QueryEscape(b.createReceiver(t, acct.Key, nil).Address), bytes.NewReader(raw))
		again.Header = req.Header.Clone()
		resp = b.rcvRawDo(t, again)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var dup struct {
			ReceiverID string `json:"receiver_id"`
			MessageID  string `json:"message_id"`
			Duplicate  bool   `json:"duplicate"`
		}
		resp.JSON(t, &dup)
		require.True(t, dup.Duplicate)
		require.Equal(t, out.MessageID, dup.MessageID)
		require.Equal(t, r.ID, dup.ReceiverID)
	})

	t.Run("BadSignature401", func(t *testing.T) {
		req := signedEmail(t, "whsec_"+strings.Repeat("QUJD", 8), r.Address, raw, time.Now())
		resp := b.rcvRawDo(t, req)
		require.Equal(t, http.StatusUnauthorized, resp.Status)
		require.Contains(t, resp.Detail(t), "signature")

		req = signedEmail(t, testInboundSecret, r.Address, raw, time.Now())
		req.Header.Del(inbound.HeaderWebhookSignature)
		require.Equal(t, http.StatusUnauthorized, b.rcvRawDo(t, req).Status)

		// A body changed after signing.
		req = signedEmail(t, testInboundSecret, r.Address, raw, time.Now())
		tampered := httptest.NewRequest("POST", req.URL.RequestURI(), bytes.NewReader(append(raw, 'x')))
		tampered.Header = req.Header.Clone()
		require.Equal(t, http.StatusUnauthorized, b.rcvRawDo(t, tampered).Status)

		req = signedEmail(t, testInboundSecret, r.Address, raw, time.Now().Add(-10*time.Minute))
		resp = b.rcvRawDo(t, req)
		require.Equal(t, http.StatusUnauthorized, resp.Status)
		require.Contains(t, resp.Detail(t), "timestamp")
	})

	t.Run("RefusedWebhookIDIsConsumed", func(t *testing.T) {
		// `to` is outside the signature: a request refused for its
		// recipient, replayed with another account's address, must not land
		// there. Every answer to a verified request consumes its id.
		other := b.createAccount(t)
		victim := b.createReceiver(t, other.Key, nil)
		for _, first := range []struct {
			to     string
			status int
		}{
			{"nobody@" + testInboundDomain, http.StatusNotFound},
			{"not an address", http.StatusUnprocessableEntity},
		} {
			req := signedEmail(t, testInboundSecret, first.to, raw, time.Now())
			resp := b.rcvRawDo(t, req)
			require.Equal(t, first.status, resp.Status, "%s", resp.Body)

			replay := httptest.NewRequest("POST", "/api/webhooks/email?to="+url.QueryEscape(victim.Address), bytes.NewReader(raw))
			replay.Header = req.Header.Clone()
			resp = b.rcvRawDo(t, replay)
			require.Equal(t, http.StatusConflict, resp.Status, "%s", resp.Body)
			require.Contains(t, resp.Detail(t), "already used by a request that was refused")
		}
		// An unreadable body consumes its id too.
		req := signedEmail(t, testInboundSecret, r.Address, mimetest.Nested(300), time.Now())
		require.Equal(t, http.StatusUnprocessableEntity, b.rcvRawDo(t, req).Status)
		replay := httptest.NewRequest("POST", "/api/webhooks/email?to="+url.QueryEscape(victim.Address), bytes.NewReader(mimetest.Nested(300)))
		replay.Header = req.Header.Clone()
		require.Equal(t, http.StatusConflict, b.rcvRawDo(t, replay).Status)

		var msgs []struct {
			ID string `json:"id"`
		}
		b.do(t, "GET", receiverPath(victim.ID, "/messages"), other.Key, nil).JSON(t, &msgs)
		require.Empty(t, msgs)
	})

	t.Run("UnknownRecipient404", func(t *testing.T) {
		resp := b.rcvRawDo(t, signedEmail(t, testInboundSecret, "nobody@"+testInboundDomain, raw, time.Now()))
		require.Equal(t, http.StatusNotFound, resp.Status)
		resp.Detail(t)
	})

	t.Run("ExpiredRecipient410", func(t *testing.T) {
		x := b.createReceiver(t, acct.Key, nil)
		b.rcvExec(t, "UPDATE receivers SET expires_at = now() - interval '1 second' WHERE id = $1", x.ID)
		resp := b.rcvRawDo(t, signedEmail(t, testInboundSecret, x.Address, raw, time.Now()))
		require.Equal(t, http.StatusGone, resp.Status)
		resp.Detail(t)
	})

	t.Run("Oversize413", func(t *testing.T) {
		big := append([]byte("Subject: big\r\n\r\n"), bytes.Repeat([]byte("x"), 40<<10)...)
		resp := b.rcvRawDo(t, signedEmail(t, testInboundSecret, r.Address, big, time.Now()))
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.Status)
		resp.Detail(t)
	})

	t.Run("Unparseable422", func(t *testing.T) {
		resp := b.rcvRawDo(t, signedEmail(t, testInboundSecret, r.Address, []byte{}, time.Now()))
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
		resp.Detail(t)
	})

	t.Run("DeepNesting422", func(t *testing.T) {
		resp := b.rcvRawDo(t, signedEmail(t, testInboundSecret, r.Address, mimetest.Nested(300), time.Now()))
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
		require.Contains(t, resp.Detail(t), "nesting depth is over the limit of 20 levels")
	})

	t.Run("BadRecipientParameter422", func(t *testing.T) {
		for _, to := range []string{"", "not an address", "a@b, c@d"} {
			resp := b.rcvRawDo(t, signedEmail(t, testInboundSecret, to, raw, time.Now()))
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%q: %s", to, resp.Body)
			require.Contains(t, resp.Detail(t), "to")
		}
	})

	t.Run("NotConfigured503", func(t *testing.T) {
		b2 := setup(t, func(o *setupOpts) { o.deps = func(d *api.Deps) { d.InboundWebhookSecret = "" } })
		resp := b2.rcvRawDo(t, signedEmail(t, testInboundSecret, r.Address, raw, time.Now()))
		require.Equal(t, http.StatusServiceUnavailable, resp.Status)
		resp.Detail(t)
	})
}

func (b *testBundle) rcvAdmin(t *testing.T) account {
	t.Helper()
	a := b.createAccount(t)
	b.rcvExec(t, "UPDATE accounts SET is_admin = true WHERE id = $1", a.ID)
	return a
}

func smsRequest(t *testing.T, fullURL, token string, form url.Values) *http.Request {
	t.Helper()
	req := httptest.NewRequest("POST", fullURL, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set(twilio.HeaderSignature, twilio.Signature(token, fullURL, form))
	return req
}

func TestSMSReceivers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.rcvAdmin(t)
	acct := b.createAccount(t)
	const n1, n2 = "+15005550006", "+15005550007"

	t.Run("AdminPool", func(t *testing.T) {
		resp := b.do(t, "POST", "/api/admin/sms-numbers", admin.Key, map[string]string{"phone_number": "+1 (500) 555-0006"})
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
		require.Contains(t, string(resp.Body), n1)
		require.Equal(t, http.StatusConflict, b.do(t, "POST", "/api/admin/sms-numbers", admin.Key, map[string]string{"phone_number": n1}).Status)
		for _, bad := range []string{"5005550006", "+0123456789", "+1", "+1234567890123456", "+1500abc0006"} {
			resp := b.do(t, "POST", "/api/admin/sms-numbers", admin.Key, map[string]string{"phone_number": bad})
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, bad)
		}
		// Not an admin: the route does not exist.
		require.Equal(t, http.StatusNotFound, b.do(t, "GET", "/api/admin/sms-numbers", acct.Key, nil).Status)
	})

	r := b.createReceiver(t, acct.Key, map[string]any{"channel": "sms", "label": "otp"})
	require.Equal(t, "sms", r.Channel)
	require.Equal(t, n1, r.Address)

	t.Run("NoFreeNumber503", func(t *testing.T) {
		resp := b.do(t, "POST", "/api/accounts/me/receivers", acct.Key, map[string]any{"channel": "sms"})
		require.Equal(t, http.StatusServiceUnavailable, resp.Status)
		require.Contains(t, resp.Detail(t), "no SMS number is free")
	})

	t.Run("ListShowsTheHolder", func(t *testing.T) {
		resp := b.do(t, "GET", "/api/admin/sms-numbers", admin.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status)
		var list []struct {
			PhoneNumber string  `json:"phone_number"`
			ReceiverID  *string `json:"receiver_id"`
			AccountID   *string `json:"account_id"`
		}
		resp.JSON(t, &list)
		require.Len(t, list, 1)
		require.Equal(t, r.ID, *list[0].ReceiverID)
		require.Equal(t, acct.ID, *list[0].AccountID)
		// A held number can't be removed.
		resp = b.do(t, "DELETE", "/api/admin/sms-numbers/"+url.PathEscape(n1), admin.Key, nil)
		require.Equal(t, http.StatusConflict, resp.Status, "%s", resp.Body)
	})

	form := url.Values{
		"MessageSid": {"SM" + strings.Repeat("a", 32)}, "AccountSid": {"AC" + strings.Repeat("b", 32)},
		"From": {"+14155550100"}, "To": {n1}, "Body": {"Your code is 123456 https://x.example/a"}, "NumSegments": {"1"}, "NumMedia": {"0"},
	}

	t.Run("SignedWebhookFilesTheMessage", func(t *testing.T) {
		resp := b.rcvRawDo(t, smsRequest(t, "http://mailwatch.test/api/webhooks/sms", testTwilioToken, form))
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		require.Equal(t, "text/xml", resp.Header.Get("Content-Type"))
		require.Contains(t, string(resp.Body), "<Response/>")

		list := b.do(t, "GET", receiverPath(r.ID, "/messages"), acct.Key, nil)
		var msgs []struct {
			ID string `json:"id"`
		}
		list.JSON(t, &msgs)
		require.Len(t, msgs, 1)
		m := b.do(t, "GET", receiverPath(r.ID, "/messages/", msgs[0].ID), acct.Key, nil)
		var msg messageJSON
		m.JSON(t, &msg)
		require.Equal(t, "sms", msg.Channel)
		require.Equal(t, "+14155550100", msg.Sender)
		require.Equal(t, []string{"123456"}, msg.Codes)
		require.Equal(t, []string{"https://x.example/a"}, msg.Links)
		require.Equal(t, http.StatusNotFound, b.do(t, "GET", receiverPath(r.ID, "/messages/", msgs[0].ID, "/raw"), acct.Key, nil).Status)
	})

	t.Run("ReplayStoredOnce", func(t *testing.T) {
		// Twilio signatures carry no timestamp: the same signed form sent
		// again is answered alike, marked, and stored once.
		for range 2 {
			resp := b.rcvRawDo(t, smsRequest(t, "http://mailwatch.test/api/webhooks/sms", testTwilioToken, form))
			require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
			require.Contains(t, string(resp.Body), "<Response/>")
			require.Equal(t, "true", resp.Header.Get(api.HeaderDuplicate))
		}
		var msgs []struct {
			ID string `json:"id"`
		}
		b.do(t, "GET", receiverPath(r.ID, "/messages"), acct.Key, nil).JSON(t, &msgs)
		require.Len(t, msgs, 1)

		// Another MessageSid is another message.
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		f.Set("MessageSid", "SM"+strings.Repeat("c", 32))
		resp := b.rcvRawDo(t, smsRequest(t, "http://mailwatch.test/api/webhooks/sms", testTwilioToken, f))
		require.Equal(t, http.StatusOK, resp.Status)
		require.Empty(t, resp.Header.Get(api.HeaderDuplicate))
		b.do(t, "GET", receiverPath(r.ID, "/messages"), acct.Key, nil).JSON(t, &msgs)
		require.Len(t, msgs, 2)
	})

	t.Run("BadSignature401", func(t *testing.T) {
		resp := b.rcvRawDo(t, smsRequest(t, "http://mailwatch.test/api/webhooks/sms", "wrong-token", form))
		require.Equal(t, http.StatusUnauthorized, resp.Status)
		resp.Detail(t)
		// Signed for another URL.
		req := smsRequest(t, "http://mailwatch.test/api/webhooks/sms?x=1", testTwilioToken, form)
		req.URL.RawQuery = ""
		req.RequestURI = "/api/webhooks/sms"
		require.Equal(t, http.StatusUnauthorized, b.rcvRawDo(t, req).Status)
	})

	t.Run("PublicBaseURLBehindAProxy", func(t *testing.T) {
		bp := setup(t, func(o *setupOpts) {
			o.db = b.db
			o.deps = func(d *api.Deps) { d.PublicBaseURL = "https://sms.example.com/" }
		})
		req := smsRequest(t, "https://sms.example.com/api/webhooks/sms", testTwilioToken, form)
		req.Host = "10.0.0.5:8080" // what the proxy forwards to
		resp := bp.rcvRawDo(t, req)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	})

	t.Run("UnknownNumber404", func(t *testing.T) {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		f.Set("To", n2)
		f.Set("MessageSid", "SM"+strings.Repeat("9", 32)) // the form's own was delivered: a repeat of it is a duplicate
		resp := b.rcvRawDo(t, smsRequest(t, "http://mailwatch.test/api/webhooks/sms", testTwilioToken, f))
		require.Equal(t, http.StatusNotFound, resp.Status)
	})

	t.Run("NotAnInboundMessage422", func(t *testing.T) {
		resp := b.rcvRawDo(t, smsRequest(t, "http://mailwatch.test/api/webhooks/sms", testTwilioToken, url.Values{"Body": {"x"}}))
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
	})

	t.Run("TenantIsolation", func(t *testing.T) {
		other := b.createAccount(t)
		require.Equal(t, http.StatusNotFound, b.do(t, "GET", receiverPath(r.ID, "/messages"), other.Key, nil).Status)
		require.Equal(t, http.StatusNotFound, b.do(t, "DELETE", receiverPath(r.ID), other.Key, nil).Status)
	})

	t.Run("DeleteReleasesTheNumber", func(t *testing.T) {
		require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", receiverPath(r.ID), acct.Key, nil).Status)
		r2 := b.createReceiver(t, acct.Key, map[string]any{"channel": "sms"})
		require.Equal(t, n1, r2.Address)
	})

	t.Run("ExpiryReleasesTheNumber", func(t *testing.T) {
		resp := b.do(t, "GET", "/api/admin/sms-numbers", admin.Key, nil)
		var list []struct {
			ReceiverID *string `json:"receiver_id"`
		}
		resp.JSON(t, &list)
		b.rcvExec(t, "UPDATE receivers SET expires_at = now() - interval '1 second' WHERE id = $1", *list[0].ReceiverID)
		// A new SMS receiver may take it even before the expiry job runs.
		r3 := b.createReceiver(t, acct.Key, map[string]any{"channel": "sms"})
		require.Equal(t, n1, r3.Address)
		require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", receiverPath(r3.ID), acct.Key, nil).Status)
		require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", "/api/admin/sms-numbers/"+url.PathEscape(n1), admin.Key, nil).Status)
		require.Equal(t, http.StatusNotFound, b.do(t, "DELETE", "/api/admin/sms-numbers/"+url.PathEscape(n1), admin.Key, nil).Status)
	})
}

// TestSMSReplayAfterTheReceiverIsGone: Twilio signatures carry no
// timestamp, so a captured signed SMS must stay spent once answered, whatever
// the answer was and whatever happens to the receiver afterwards.
func TestSMSReplayAfterTheReceiverIsGone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.rcvAdmin(t)
	acct, other := b.createAccount(t), b.createAccount(t)
	const n1, n2 = "+15005550106", "+15005550107"
	const hook = "http://mailwatch.test/api/webhooks/sms"
	addNumber := func(n string) {
		resp := b.do(t, "POST", "/api/admin/sms-numbers", admin.Key, map[string]string{"phone_number": n})
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	}
	sms := func(sid, to string) url.Values {
		return url.Values{
			"MessageSid": {sid}, "AccountSid": {"AC" + strings.Repeat("b", 32)},
			"From": {"+14155550100"}, "To": {to}, "Body": {"code 424242"}, "NumSegments": {"1"}, "NumMedia": {"0"},
		}
	}
	messages := func(key, receiverID string) int {
		var msgs []struct {
			ID string `json:"id"`
		}
		resp := b.do(t, "GET", receiverPath(receiverID, "/messages"), key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		resp.JSON(t, &msgs)
		return len(msgs)
	}
	addNumber(n1)
	r1 := b.createReceiver(t, acct.Key, map[string]any{"channel": "sms"})
	require.Equal(t, n1, r1.Address)
	delivered := sms("SM"+strings.Repeat("d", 32), n1)
	resp := b.rcvRawDo(t, smsRequest(t, hook, testTwilioToken, delivered))
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.Empty(t, resp.Header.Get(api.HeaderDuplicate))
	require.Equal(t, 1, messages(acct.Key, r1.ID))

	// A number no receiver holds: 404, and the MessageSid is spent.
	refused := sms("SM"+strings.Repeat("e", 32), n2)
	require.Equal(t, http.StatusNotFound, b.rcvRawDo(t, smsRequest(t, hook, testTwilioToken, refused)).Status)

	// The receiver is deleted (its messages with it) and the number goes to
	// another account's receiver.
	require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", receiverPath(r1.ID), acct.Key, nil).Status)
	r2 := b.createReceiver(t, other.Key, map[string]any{"channel": "sms"})
	require.Equal(t, n1, r2.Address)

	t.Run("DeliveredReplayIsADuplicate", func(t *testing.T) {
		resp := b.rcvRawDo(t, smsRequest(t, hook, testTwilioToken, delivered))
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		require.Equal(t, "true", resp.Header.Get(api.HeaderDuplicate))
		require.Equal(t, 0, messages(other.Key, r2.ID), "a replayed SMS was filed under the number's new holder")
	})

	t.Run("RefusedReplayStaysRefused", func(t *testing.T) {
		addNumber(n2)
		r3 := b.createReceiver(t, other.Key, map[string]any{"channel": "sms"})
		require.Equal(t, n2, r3.Address)
		resp := b.rcvRawDo(t, smsRequest(t, hook, testTwilioToken, refused))
		require.Equal(t, http.StatusConflict, resp.Status, "%s", resp.Body)
		require.Contains(t, resp.Detail(t), "refused (unknown recipient)")
		require.Equal(t, 0, messages(other.Key, r3.ID))
	})

	t.Run("ExpiredReplayStaysRefused", func(t *testing.T) {
		b.rcvExec(t, "UPDATE receivers SET expires_at = now() - interval '1 second' WHERE id = $1", r2.ID)
		late := sms("SM"+strings.Repeat("f", 32), n1)
		resp := b.rcvRawDo(t, smsRequest(t, hook, testTwilioToken, late))
		require.Equal(t, http.StatusGone, resp.Status, "%s", resp.Body)
		r4 := b.createReceiver(t, acct.Key, map[string]any{"channel": "sms"})
		require.Equal(t, n1, r4.Address)
		resp = b.rcvRawDo(t, smsRequest(t, hook, testTwilioToken, late))
		require.Equal(t, http.StatusConflict, resp.Status, "%s", resp.Body)
		require.Contains(t, resp.Detail(t), "refused (expired)")
		require.Equal(t, 0, messages(acct.Key, r4.ID))
	})

	t.Run("ClaimsOutliveTheEmailPurge", func(t *testing.T) {
		// Email webhook ids are purged after an hour; MessageSids never.
		require.Equal(t, 3, b.count(t, `SELECT count(*) FROM ingress_webhook_ids WHERE webhook_id LIKE 'twilio:%' AND consumed_at = 'infinity'`))
	})
}

// TestTwilioSignatureVector checks the published vector through the same
// validation the SMS webhook uses.
func TestTwilioSignatureVector(t *testing.T) {
	t.Parallel()
	raw := corpus.Read(t, "esp/twilio-signature-vector.json")
	var v struct {
		AuthToken string            `json:"auth_token"`
		URL       string            `json:"url"`
		Params    map[string]string `json:"params"`
		Expected  string            `json:"expected_signature"`
	}
	require.NoError(t, json.Unmarshal(raw, &v))
	form := url.Values{}
	for k, val := range v.Params {
		form.Set(k, val)
	}
	require.Equal(t, v.Expected, twilio.Signature(v.AuthToken, v.URL, form))
	require.True(t, twilio.ValidateSignature(v.AuthToken, v.URL, form, v.Expected))
}

func FuzzParseIngressRecipient(f *testing.F) {
	for _, s := range []string{"abc@inbound.example.com", `"Ann" <A@Inbound.Example.COM.>`, "", "a@b, c@d", "<@>", "x@", "@y",
		strings.Repeat("a", 70) + "@x.test", "=?utf-8?q?=C3=A9?= <e@x.test>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		addr, err := api.ParseIngressRecipient(s)
		if err != nil {
			require.Empty(t, addr)
			return
		}
		at := strings.LastIndexByte(addr, '@')
		require.Positive(t, at)
		require.Less(t, at, len(addr)-1)
		require.LessOrEqual(t, at, 64)
		domain := addr[at+1:]
		require.Equal(t, strings.ToLower(domain), domain)
		again, err := api.ParseIngressRecipient(addr)
		require.NoError(t, err, "a parsed address parses again: %q", addr)
		require.Equal(t, addr, again)
	})
}
