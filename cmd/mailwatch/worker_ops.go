package main

import (
	"github.com/gofiber/fiber/v2"

	"github.com/mailwatch/mailwatch/jobs"
)

// workerReadyz answers a worker's /readyz from its River observer: 200 while
// River runs, fetches and reaches the database, 503 with the reason (and
// the same report) once any of them has failed for jobs.UnreadyAfter.
func workerReadyz(o *jobs.Observer) fiber.Handler {
	return func(c *fiber.Ctx) error {
		h := o.Health()
		if !h.Ready {
			c.Set(fiber.HeaderRetryAfter, "5")
			return c.Status(fiber.StatusServiceUnavailable).JSON(h)
		}
		return c.JSON(h)
	}
}
