package events

import "time"

// SetPageCacheClock replaces the cache's clock, for tests of its TTL.
func SetPageCacheClock(c *FirstPages, now func() time.Time) { c.now = now }
