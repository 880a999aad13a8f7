# One image for every role: the container's command picks it
# (api, worker, smtp, ui, migrate, jobs ...). See README "Deploying".
#
#   docker build -t mailwatch .
#   docker run --rm -e DATABASE_URL=... mailwatch migrate

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# A static binary (no cgo): it runs on any base image, and needs no libc.
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags='-s -w' -o /out/mailwatch ./cmd/mailwatch

FROM alpine:3.22
# ca-certificates: webhook pushes and MTA-STS fetches go to HTTPS hosts.
# tzdata: log timestamps and schedules in the operator's zone if TZ is set.
# busybox (in the base) gives the health checks wget and nc.
RUN apk add --no-cache ca-certificates tzdata \
	&& adduser -D -H -u 10001 -s /sbin/nologin mailwatch
COPY --from=build /out/mailwatch /usr/local/bin/mailwatch
USER 10001:10001
# api: LISTEN_ADDR; worker, smtp: METRICS_ADDR (/healthz, /readyz, /metrics);
# smtp: SMTP_ADDR; ui: UI_ADDR.
EXPOSE 8080 9091 2525 8090
ENTRYPOINT ["/usr/local/bin/mailwatch"]
CMD ["api"]
