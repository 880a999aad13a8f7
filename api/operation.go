package api

import (
	"context"
	"errors"
	"net/http"
	"reflect"

	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/selectors"
)

// Operation is one registered endpoint's function as its HTTP route runs it
// after decoding: the same text check, validation, deadline and function.
// Handle returns it; another adapter over the same rules (the dashboard,
// package web) calls it with a request it built itself, so that no rule of
// the API has a second implementation. The zero Operation (a route this
// server did not register, for want of its configuration) answers 503.
type Operation[Req, Resp any] struct {
	r  *Router
	ep *Endpoint[Req, Resp]
}

// Call runs the operation for caller. A zero caller sets none (the public
// operations: createAccount, verifyNotificationAddress).
func (o Operation[Req, Resp]) Call(ctx context.Context, caller Caller, req *Req) (*Resp, error) {
	if o.ep == nil {
		return nil, &Error{Status: http.StatusServiceUnavailable, Detail: "this action is not available on this server",
			Cause: errors.New("api: operation not registered on this server")}
	}
	if caller != (Caller{}) {
		ctx = WithCaller(ctx, caller)
	}
	return o.run(ctx, req)
}

// run is the route's work after decoding.
func (o Operation[Req, Resp]) run(ctx context.Context, req *Req) (*Resp, error) {
	if err := checkText(reflect.ValueOf(req).Elem(), ""); err != nil {
		return nil, err
	}
	if err := o.r.validate(req); err != nil {
		return nil, err
	}
	if o.ep.Timeout != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), o.ep.Timeout(req))
		defer cancel()
	}
	return o.ep.Call(ctx, req)
}

// Ops holds the operations the dashboard (package web) calls, each filled
// when its route is registered. The compiler checks every call's request
// and response types.
type Ops struct {
	CreateAccount Operation[CreateAccountRequest, CreateAccountResponse]

	DashboardSummary Operation[emptyRequest, DashboardSummary]
	// MessageDailyVolume is messages.go's.
	MessageDailyVolume Operation[MessageDailyVolumeRequest, MessageDailyVolume]

	ListDomains              Operation[ListDomainsRequest, []Domain]
	CreateDomain             Operation[CreateDomainRequest, Domain]
	GetDomain                Operation[DomainPath, DomainDetail]
	UpdateDomain             Operation[UpdateDomainRequest, Domain]
	DeleteDomain             Operation[DomainPath, NoContent]
	LookupDomainDNS          Operation[DomainPath, DNSLookup]
	ListDomainHealth         Operation[HealthHistoryRequest, []HealthEntry]
	ListDNSRecommendations   Operation[DomainPath, []DNSRecommendation]
	ApplyDNSRecommendation   Operation[ApplyRecommendationRequest, ApplyResult]
	DismissDNSRecommendation Operation[DismissRecommendationRequest, DNSRecommendation]
	ListDMARCSubdomains      Operation[DomainPath, reports.SubdomainList]
	ListDMARCSources         Operation[SourcesRequest, Sources]
	GetDMARCGuidance         Operation[DomainPath, reports.Guidance]
	DMARCDailyVolume         Operation[DMARCDailyRequest, DMARCDaily]
	ListDMARCReporters       Operation[DomainPath, []reports.Reporter]
	ListDKIMSelectors        Operation[DomainPath, []selectors.Selector]
	GetDomainTransport       Operation[DomainPath, Transport]
	GetDomainReputation      Operation[DomainPath, Reputation]
	AddReputationPin         Operation[AddReputationPinRequest, ReputationPin]
	RemoveReputationPin      Operation[ReputationPinQuery, NoContent]

	ListAlerts         Operation[ListAlertsRequest, Page[Alert]]
	AcknowledgeAlert   Operation[AcknowledgeRequest, Alert]
	UnacknowledgeAlert Operation[AlertPath, Alert]
	ListEvents         Operation[ListEventsRequest, Page[Event]]

	ListEventSubscriptions  Operation[emptyRequest, []Subscription]
	CreateEventSubscription Operation[CreateSubscriptionRequest, NewSubscription]
	TestEventSubscription   Operation[SubscriptionPath, SubscriptionTestResult]
	UpdateEventSubscription Operation[UpdateSubscriptionRequest, Subscription]
	DeleteEventSubscription Operation[SubscriptionPath, NoContent]
	RotateSecret            Operation[RotateSecretRequest, RotatedSecret]
	RecoverSubscription     Operation[RecoverSubscriptionRequest, SubscriptionRecovery]
	ListDeliveries          Operation[ListDeliveriesRequest, DeliveryPage]
	GetDelivery             Operation[DeliveryPath, DeliveryDetail]
	RetryDelivery           Operation[DeliveryPath, Delivery]

	ListNotificationChannels  Operation[emptyRequest, []NotificationChannel]
	CreateNotificationChannel Operation[CreateChannelRequest, NotificationChannel]
	DeleteNotificationChannel Operation[ChannelPath, NoContent]
	TestNotificationChannel   Operation[ChannelPath, ChannelTestResult]

	ListReceivers        Operation[ListReceiversRequest, Page[Receiver]]
	ReceiverDailyVolume  Operation[ReceiverDailyRequest, ReceiverDaily]
	CreateReceiver       Operation[CreateReceiverRequest, Receiver]
	GetReceiver          Operation[ReceiverPath, Receiver]
	ListReceiverMessages Operation[ListMessagesRequest, Page[MessageSummary]]
	GetReceiverMessage   Operation[MessagePath, Message]
	// GetReceiverMessageAnalysis is receivers_analysis.go's.
	GetReceiverMessageAnalysis Operation[MessagePath, MessageAnalysis]
	WaitReceiver               Operation[WaitRequest, WaitResponse]

	ListAPIKeys                           Operation[emptyRequest, []APIKey]
	CreateAPIKey                          Operation[CreateAPIKeyRequest, NewAPIKey]
	RevokeAPIKey                          Operation[APIKeyPath, NoContent]
	GetAccountPlan                        Operation[emptyRequest, AccountPlan]
	GetPreferences                        Operation[emptyRequest, notify.Preferences]
	SetChannelMutes                       Operation[ChannelSwitches, notify.Preferences]
	GetWeeklyDigest                       Operation[emptyRequest, WeeklyDigestSettings]
	SetWeeklyDigest                       Operation[WeeklyDigestSettings, WeeklyDigestSettings]
	SetPreferenceGroup                    Operation[PreferenceGroupRequest, notify.Preferences]
	ListNotificationAddresses             Operation[emptyRequest, []notify.Address]
	AddNotificationAddress                Operation[AddNotificationAddressRequest, notify.Address]
	RemoveNotificationAddress             Operation[NotificationAddressPath, NoContent]
	ResendNotificationAddressVerification Operation[NotificationAddressPath, notify.Address]
	VerifyNotificationAddress             Operation[VerifyNotificationAddressRequest, notify.Address]

	ListSendingProviders  Operation[emptyRequest, []SendingProvider]
	CreateSendingProvider Operation[CreateProviderRequest, SendingProvider]
	DeleteSendingProvider Operation[ProviderPath, NoContent]
	LinkSendingProvider   Operation[ProviderLinkRequest, SendingProvider]
	UnlinkSendingProvider Operation[ProviderLinkRequest, SendingProvider]
	MessageTypeBreakdown  Operation[MessageTypeBreakdownRequest, MessageTypeBreakdown]
	CheckSuppression      Operation[SuppressionEmailQuery, SuppressionCheck]
	AddSuppression        Operation[AddSuppressionRequest, SuppressionEntry]
	RemoveSuppression     Operation[SuppressionEmailQuery, NoContent]

	ListDNSProviders  Operation[emptyRequest, []DNSProvider]
	CreateDNSProvider Operation[CreateDNSProviderRequest, DNSProvider]
	DeleteDNSProvider Operation[DNSProviderPath, NoContent]
	LinkDNSProvider   Operation[DNSProviderLinkRequest, DNSProviderLink]
	UnlinkDNSProvider Operation[DNSProviderLinkRequest, NoContent]
}

// Ops returns the server's registered operations, for the dashboard.
func (s *Server) Ops() *Ops { return &s.ops }

// EmptyRequest is the request of the operations that take no parameters.
type EmptyRequest = emptyRequest

// SwitchableGroup names a preference group a caller may switch (the
// {group} of PUT /api/accounts/me/preferences/groups/{group}).
type SwitchableGroup = switchableGroup
