package receivers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// ErrNoLabelledReceiver: a label-wide wait found no live receiver of the
// account with the label.
var ErrNoLabelledReceiver = errors.New("no live receiver has this label")

// matchBatch is how many messages one read of a matching wait takes.
const matchBatch = 100

// MatchRequest is a matching long poll: on one receiver (ReceiverID), or
// on every live receiver of the account with a label (Label set; the set is
// taken when the wait starts).
type MatchRequest struct {
	AccountID  uuid.UUID
	ReceiverID uuid.UUID
	Label      *string
	// After (one receiver only) is the last message seen, as in
	// WaitRequest; it replaces Match.Since's default.
	After   *uuid.UUID
	Match   Match
	Timeout time.Duration
	Now     func() time.Time
}

// watched is one receiver of a matching wait and how far it was read.
type watched struct {
	id        uuid.UUID
	afterSeq  int64
	expiresAt time.Time
}

// WaitMatching returns the first Match.Count messages (oldest first) that
// pass Match's filters, at once when they are stored already, otherwise as
// soon as the last of them arrives; nil when they are not all there within
// req.Timeout. Without Match.Since and req.After, only messages that arrive
// after the wait started count. Filters are applied in memory each time the
// hub wakes the wait; every message is read once, and no database
// connection is held while it waits. It fails with a *FilterError for a
// filter out of bounds; for one receiver as Wait; for a label with
// ErrNoLabelledReceiver, or, when every receiver of the label expired or was
// deleted during the wait, with the error of the last one (as Get).
func WaitMatching(ctx context.Context, db dbsqlc.DBTX, hub *Hub, req MatchRequest) ([]Message, error) {
	if err := req.Match.Validate(); err != nil {
		return nil, err
	}
	deadline := time.NewTimer(req.Timeout)
	defer deadline.Stop()
	// Where each receiver stands is read before registering: a message
	// stored after that read has a greater seq (seq order is commit order),
	// so the first scan, made once registered, finds it if no wake-up does.
	set, err := startWatching(ctx, db, req)
	if err != nil {
		return nil, err
	}
	ids := make([]uuid.UUID, len(set))
	for i, w := range set {
		ids[i] = w.id
	}
	w, err := hub.Register(ids...)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	st := &matchState{req: req, set: set, fresh: true, cut: map[uuid.UUID]bool{}}
	for {
		if done, err := st.scan(ctx, db); err != nil || done {
			return st.found, err
		}
		expiry.Reset(time.Until(earliestExpiry(st.set)) + time.Millisecond)
		select {
		case <-w.C:
		case <-expiry.C: // the next scan sees it expired
		case <-deadline.C:
			return nil, nil
		case <-hub.Done():
			return nil, ErrHubClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// matchState is a matching wait between wake-ups.
type matchState struct {
	req MatchRequest
	set []watched
	// fresh: the receivers were just read (startWatching); the first scan
	// need not re-check them.
	fresh bool
	found []Message
	// cut holds the found messages whose bodies were read cut short.
	cut map[uuid.UUID]bool
}

// startWatching reads the receivers a wait watches and where each one's
// wait starts: after req.After, at the start when Match.Since is set, and
// otherwise after the last message stored now.
func startWatching(ctx context.Context, db dbsqlc.DBTX, req MatchRequest) ([]watched, error) {
	if req.Label != nil {
		return labelledReceivers(ctx, db, req)
	}
	r, err := Get(ctx, db, req.AccountID, req.ReceiverID, req.Now())
	if err != nil {
		return nil, err
	}
	w := watched{id: r.ID, afterSeq: r.LastSeq, expiresAt: r.ExpiresAt}
	switch {
	case req.After != nil:
		if w.afterSeq, err = MessageSeq(ctx, db, r.ID, *req.After); err != nil {
			return nil, err
		}
	case req.Match.Since != nil:
		w.afterSeq = 0
	}
	return []watched{w}, nil
}

// labelledReceivers is startWatching for a label-wide wait.
func labelledReceivers(ctx context.Context, db dbsqlc.DBTX, req MatchRequest) ([]watched, error) {
	if req.After != nil {
		return nil, &FilterError{"after", "names a message of one receiver: it cannot be given with label"}
	}
	rows, err := dbsqlc.New().ReceiverListLiveByLabel(ctx, db, dbsqlc.ReceiverListLiveByLabelParams{
		AccountID: req.AccountID, Label: *req.Label, Now: req.Now(), Max: MaxLabelReceivers + 1,
	})
	if err != nil {
		return nil, fmt.Errorf("listing receivers by label: %w", err)
	}
	if len(rows) == 0 {
		return nil, ErrNoLabelledReceiver
	}
	if len(rows) > MaxLabelReceivers {
		return nil, &FilterError{"label", fmt.Sprintf("is carried by more than %d live receivers; a wait watches at most %d", MaxLabelReceivers, MaxLabelReceivers)}
	}
	set := make([]watched, len(rows))
	for i, r := range rows {
		set[i] = watched{id: r.ID, afterSeq: r.LastSeq, expiresAt: r.ExpiresAt}
		if req.Match.Since != nil {
			set[i].afterSeq = 0
		}
	}
	return set, nil
}

// scan re-checks the watched receivers (dropping, for a label, those gone),
// reads their new messages and adds the matches to found. done is true
// when found holds the answer (the first Match.Count, read whole).
func (st *matchState) scan(ctx context.Context, db dbsqlc.DBTX) (done bool, _ error) {
	if !st.fresh {
		set, err := recheck(ctx, db, st.req, st.set)
		if err != nil {
			return false, err
		}
		st.set = set
	}
	st.fresh = false
	q := dbsqlc.New()
	want := st.req.Match.want()
	for {
		p := dbsqlc.MessageListForMatchParams{BodyChars: BodyExaminedBytes, Max: matchBatch}
		for _, w := range st.set {
			p.ReceiverIds, p.AfterSeqs = append(p.ReceiverIds, w.id), append(p.AfterSeqs, w.afterSeq)
		}
		rows, err := q.MessageListForMatch(ctx, db, p)
		if err != nil {
			return false, fmt.Errorf("reading messages to match: %w", err)
		}
		for _, row := range rows {
			m, err := messageFromRow(dbsqlc.MessageGetRow{
				ID: row.ID, ReceiverID: row.ReceiverID, AccountID: row.AccountID, Seq: row.Seq, Channel: row.Channel,
				Sender: row.Sender, Subject: row.Subject, TextBody: row.TextBody, HtmlBody: row.HtmlBody, Parsed: row.Parsed,
				SizeBytes: row.SizeBytes, ReceivedAt: row.ReceivedAt,
			})
			if err != nil {
				return false, err
			}
			advance(st.set, m.ReceiverID, m.Seq)
			if st.req.Match.Matches(m) {
				st.found = append(st.found, *m)
				if row.Cut {
					st.cut[m.ID] = true
				}
			}
		}
		if len(st.found) >= want || len(rows) < matchBatch {
			break
		}
	}
	for len(st.found) >= want {
		answer, vanished, err := readWhole(ctx, db, st.found, want, st.cut)
		if err != nil || vanished == nil {
			if err == nil {
				st.found = answer
			}
			return err == nil, err
		}
		// Deleted since it was matched: it no longer counts.
		st.found = slices.DeleteFunc(st.found, func(m Message) bool { return m.ID == *vanished })
	}
	return false, nil
}

// recheck drops the receivers that expired or were deleted; for one
// receiver, or when none is left, it fails as Get.
func recheck(ctx context.Context, db dbsqlc.DBTX, req MatchRequest, set []watched) ([]watched, error) {
	ids := make([]uuid.UUID, len(set))
	for i, w := range set {
		ids[i] = w.id
	}
	rows, err := dbsqlc.New().ReceiverListForWait(ctx, db, dbsqlc.ReceiverListForWaitParams{AccountID: req.AccountID, Ids: ids})
	if err != nil {
		return set, fmt.Errorf("reading receivers: %w", err)
	}
	now := req.Now()
	var last error = ErrNotFound
	kept := set[:0]
	for _, w := range set {
		i := slices.IndexFunc(rows, func(r dbsqlc.ReceiverListForWaitRow) bool { return r.ID == w.id })
		switch {
		case i < 0:
			last = ErrNotFound
		case !now.Before(rows[i].ExpiresAt):
			last = &GoneError{ExpiresAt: rows[i].ExpiresAt}
		default:
			w.expiresAt = rows[i].ExpiresAt // it may have changed
			kept = append(kept, w)
			continue
		}
		if req.Label == nil {
			return nil, last
		}
	}
	if len(kept) == 0 {
		return nil, last
	}
	return kept, nil
}

func advance(set []watched, id uuid.UUID, seq int64) {
	for i := range set {
		if set[i].id == id && seq > set[i].afterSeq {
			set[i].afterSeq = seq
		}
	}
}

func earliestExpiry(set []watched) time.Time {
	t := set[0].expiresAt
	for _, w := range set[1:] {
		if w.expiresAt.Before(t) {
			t = w.expiresAt
		}
	}
	return t
}

// readWhole returns the first n of found (oldest first), those whose bodies
// matching read cut short (cut) read again whole. vanished names one that
// was deleted meanwhile (and out is then nil).
func readWhole(ctx context.Context, db dbsqlc.DBTX, found []Message, n int, cut map[uuid.UUID]bool) (out []Message, vanished *uuid.UUID, _ error) {
	// One receiver's messages are in seq (commit) order already; several
	// receivers' are merged by received_at.
	slices.SortStableFunc(found, func(a, b Message) int {
		if a.ReceiverID == b.ReceiverID {
			return cmp.Compare(a.Seq, b.Seq)
		}
		if c := a.ReceivedAt.Compare(b.ReceivedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ReceiverID.String(), b.ReceiverID.String())
	})
	out = make([]Message, n)
	q := dbsqlc.New()
	for i, m := range found[:n] {
		if !cut[m.ID] {
			out[i] = m
			continue
		}
		row, err := q.MessageGet(ctx, db, dbsqlc.MessageGetParams{ID: m.ID, ReceiverID: m.ReceiverID, AccountID: m.AccountID})
		if dbutil.IsNotFound(err) {
			return nil, &m.ID, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading a matched message: %w", err)
		}
		whole, err := messageFromRow(row)
		if err != nil {
			return nil, nil, err
		}
		out[i] = *whole
	}
	return out, nil, nil
}
