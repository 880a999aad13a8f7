package dbutil

import (
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// registerUUID teaches a connection's type map to encode and scan
// google/uuid values as binary UUIDs. Without it pgx goes through
// uuid.UUID's database/sql Valuer and Scanner, a text round trip that made
// primary-key lookups measurably slower.
func registerUUID(m *pgtype.Map) {
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{wrapUUIDEncode}, m.TryWrapEncodePlanFuncs...)
	m.TryWrapScanPlanFuncs = append([]pgtype.TryWrapScanPlanFunc{wrapUUIDScan}, m.TryWrapScanPlanFuncs...)
}

type uuidValue uuid.UUID

func (u uuidValue) UUIDValue() (pgtype.UUID, error) { return pgtype.UUID{Bytes: u, Valid: true}, nil }

type uuidEncodePlan struct{ next pgtype.EncodePlan }

func (p *uuidEncodePlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidEncodePlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(uuidValue(value.(uuid.UUID)), buf)
}

func wrapUUIDEncode(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if u, ok := value.(uuid.UUID); ok {
		return &uuidEncodePlan{}, uuidValue(u), true
	}
	return nil, nil, false
}

type uuidTarget uuid.UUID

func (t *uuidTarget) ScanUUID(v pgtype.UUID) error {
	if !v.Valid {
		return errors.New("cannot scan NULL into uuid.UUID")
	}
	*t = uuidTarget(v.Bytes)
	return nil
}

type uuidScanPlan struct{ next pgtype.ScanPlan }

func (p *uuidScanPlan) SetNext(next pgtype.ScanPlan) { p.next = next }

func (p *uuidScanPlan) Scan(src []byte, dst any) error {
	return p.next.Scan(src, (*uuidTarget)(dst.(*uuid.UUID)))
}

func wrapUUIDScan(target any) (pgtype.WrappedScanPlanNextSetter, any, bool) {
	if t, ok := target.(*uuid.UUID); ok {
		return &uuidScanPlan{}, (*uuidTarget)(t), true
	}
	return nil, nil, false
}
