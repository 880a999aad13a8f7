-- When subscription_failing was raised for a subscription's current failing
-- period (internal/deliveries, docs/webhook-delivery.md): set once the
-- subscription has failed, without one success, for a day; cleared with
-- failing_since by the next accepted push, which raises
-- subscription_recovered, or when the subscription is enabled again. NULL
-- while healthy, and while failing for less than a day.
ALTER TABLE event_subscriptions ADD COLUMN failing_notified_at timestamptz;
