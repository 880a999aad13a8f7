package events

// Group names. Every event type belongs to exactly one group; preferences
// switch channels per group, with per-type overrides.
const (
	GroupHealth     = "health"
	GroupSending    = "sending"
	GroupReports    = "reports"
	GroupDeliveries = "deliveries"
	GroupReceivers  = "receivers"
	GroupDNSFixes   = "dns_fixes"
	GroupBilling    = "billing"
	GroupAudit      = "audit"
	GroupSecurity   = "security"
)

// GroupInfo describes one group of event types.
type GroupInfo struct {
	Name string `json:"name"`
	// Title is the group's name for people.
	Title       string `json:"title"`
	Description string `json:"description"`
	// Required groups always go out on every channel: preferences, mutes
	// and overrides cannot stop them.
	Required bool `json:"required"`
}

// groups lists the groups in the order the API and the dashboard show them.
var groups = []GroupInfo{
	{Name: GroupHealth, Title: "Domain health", Description: "Domain health: score changes, DNS record changes, lost MX verification, blocklist listings."},
	{Name: GroupSending, Title: "Sending", Description: "Sending providers: bounce and complaint spikes."},
	{Name: GroupReports, Title: "Reports", Description: "DMARC and TLS-RPT reports, new DMARC sources and new subdomains."},
	{Name: GroupDeliveries, Title: "Webhook deliveries", Description: "Webhook deliveries that failed and subscriptions that were disabled."},
	{Name: GroupReceivers, Title: "Receivers", Description: "Messages arriving at receivers."},
	{Name: GroupDNSFixes, Title: "DNS fixes", Description: "DNS recommendations applied or failed through a DNS connection."},
	{Name: GroupBilling, Title: "Billing", Description: "Plan changes and failed payments."},
	{Name: GroupAudit, Title: "Audit", Description: "Audit trail of actions taken on the account; always sent.", Required: true},
	{Name: GroupSecurity, Title: "Security", Description: "Security notices about the account; always sent.", Required: true},
}

// Groups returns every group, in display order.
func Groups() []GroupInfo { return append([]GroupInfo(nil), groups...) }

// LookupGroup returns the group called name.
func LookupGroup(name string) (GroupInfo, bool) {
	for _, g := range groups {
		if g.Name == name {
			return g, true
		}
	}
	return GroupInfo{}, false
}

// Required reports whether events of type name always go out, whatever
// the account's preferences say.
func Required(name string) bool {
	t, ok := types[name]
	if !ok {
		return false
	}
	g, _ := LookupGroup(t.Group)
	return g.Required
}
