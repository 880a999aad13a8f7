# Shared set-up for scripts/run, scripts/test and scripts/bench: a private
# Postgres cluster (and, for tests, Redis) under .local/ of the checkout, so
# the scripts work on a bare Debian machine with Go and nothing running, as
# root or as a normal user. Source it; do not run it.

set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# MW_LOCAL_DIR and MW_BIN_DIR move .local/ and bin/ elsewhere (the tests of
# scripts/run use throwaway ones); they default to the checkout's.
local_dir="${MW_LOCAL_DIR:-$repo_root/.local}"
bin_dir="${MW_BIN_DIR:-$repo_root/bin}"
mkdir -p "$local_dir"
local_dir=$(cd "$local_dir" && pwd)

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" -eq 0 ]; }

# as_root runs a command as root (directly, or through sudo).
as_root() {
	if is_root; then "$@"
	elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
	else return 1
	fi
}

# apt_install installs Debian packages quietly: apt's and dpkg's progress
# goes to .local/apt.log, which is shown only when the install fails.
apt_updated=""
apt_install() {
	command -v apt-get >/dev/null 2>&1 || return 1
	local aptlog="$local_dir/apt.log"
	: > "$aptlog"
	if [ -z "$apt_updated" ]; then
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >>"$aptlog" 2>&1 || { cat "$aptlog" >&2; return 1; }
		apt_updated=1
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >>"$aptlog" 2>&1 ||
		{ cat "$aptlog" >&2; return 1; }
}

pg_bindir() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
	if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
	if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then pg_config --bindir; return 0; fi
	return 1
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pg_run runs a Postgres server binary as the cluster's owner: initdb and
# postgres refuse to run as root, so root uses the postgres system user.
pg_run() {
	if is_root; then runuser -u postgres -- "$@"; else "$@"; fi
}

# ensure_postgres starts (or reuses) the private cluster and sets
# MW_PG_URL to a superuser URL of its "postgres" database.
ensure_postgres() {
	local bindir
	if ! bindir=$(pg_bindir); then
		log "PostgreSQL server binaries not found; installing the postgresql package"
		apt_install postgresql >/dev/null || die "could not install postgresql (need root or passwordless sudo)"
		bindir=$(pg_bindir) || die "postgresql installed but initdb not found"
	fi

	local data="$local_dir/pg"
	if is_root; then
		id postgres >/dev/null 2>&1 || die "user postgres missing (install the postgresql package)"
		# The postgres user must reach the data directory; a checkout under a
		# private home (e.g. /root) is not reachable, so use /tmp then.
		if ! runuser -u postgres -- test -x "$local_dir" 2>/dev/null; then
			data="/tmp/mailwatch-pg-$(printf '%s' "$local_dir" | sha256sum | cut -c1-12)"
		fi
	fi
	mkdir -p "$data"
	is_root && chown postgres:postgres "$data" && chmod 700 "$data"

	if [ ! -f "$data/PG_VERSION" ]; then
		log "initialising a private Postgres cluster in $data"
		pg_run "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null 2>&1 ||
			pg_run "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --no-locale >/dev/null
	fi

	# $local_dir/pg.owner names the script that started the cluster and
	# stops it when it ends. A cluster running without a live owner was left
	# by a run that could not stop it: this run adopts it, and stops it.
	local port owner=""
	[ -s "$local_dir/pg.owner" ] && owner=$(head -n 1 "$local_dir/pg.owner")
	if pg_run "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
		port=$(sed -n 4p "$data/postmaster.pid")
		if [ -z "$owner" ] || ! kill -0 "$owner" 2>/dev/null; then
			log "adopting the private Postgres on 127.0.0.1:$port left running by an earlier run (stopped when this one ends)"
			MW_PG_STARTED="$data"
			printf '%s\n%s\n' "$$" "$data" > "$local_dir/pg.owner"
		fi
	else
		# Another script may take the free port first: then try the next.
		local try
		port=55432
		for try in 1 2 3 4 5 6 7 8; do
			while port_in_use "$port"; do port=$((port + 1)); done
			log "starting Postgres on 127.0.0.1:$port"
			rm -f "$data/server.log"
			pg_run "$bindir/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
				-o "-c listen_addresses=127.0.0.1 -p $port -k $data -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=256MB" \
				start >/dev/null && break
			grep -q "Address already in use" "$data/server.log" && [ "$try" -lt 8 ] || { cat "$data/server.log" >&2; die "Postgres did not start"; }
			port=$((port + 1))
		done
		MW_PG_STARTED="$data"
		printf '%s\n%s\n' "$$" "$data" > "$local_dir/pg.owner"
	fi
	MW_PG_BINDIR="$bindir"
	MW_PG_DATA="$data"
	MW_PG_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
	export MW_PG_URL
}

stop_postgres() {
	if [ -n "${MW_PG_STARTED:-}" ]; then
		pg_run "$MW_PG_BINDIR/pg_ctl" -D "$MW_PG_STARTED" -m fast -w stop >/dev/null 2>&1 || true
		rm -f "$local_dir/pg.owner"
		MW_PG_STARTED=""
	fi
}

# ensure_redis sets MW_REDIS_URL to a Redis that answers: REDIS_URL's if
# given, else a throwaway redis-server of ours (installed when missing).
ensure_redis() {
	if ! command -v redis-server >/dev/null 2>&1; then
		log "redis-server not found; installing the redis-server package"
		apt_install redis-server >/dev/null || { log "could not install redis-server; Redis tests will be skipped"; return 0; }
	fi
	local port=56379
	while port_in_use "$port"; do port=$((port + 1)); done
	redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
		--pidfile "$local_dir/redis-$port.pid" --logfile "$local_dir/redis-$port.log" --dir "$local_dir" >/dev/null
	for _ in $(seq 1 50); do port_in_use "$port" && break; sleep 0.1; done
	MW_REDIS_STARTED="$local_dir/redis-$port.pid"
	MW_REDIS_URL="redis://127.0.0.1:$port/0"
	export MW_REDIS_URL
}

stop_redis() {
	if [ -n "${MW_REDIS_STARTED:-}" ] && [ -f "$MW_REDIS_STARTED" ]; then
		kill "$(cat "$MW_REDIS_STARTED")" 2>/dev/null || true
	fi
}

# ensure_spamd installs Debian's SpamAssassin daemon when it is missing: the
# deliverability analysis's spam score is tested against a real spamd.
ensure_spamd() {
	[ -x /usr/sbin/spamd ] && return 0
	log "installing spamassassin (spamd) for the spam score tests"
	apt_install spamassassin spamd >/dev/null || die "could not install spamd (need root or passwordless sudo)"
}

# start_spamd runs spamd for the tests on a Unix socket of its own (no port
# to collide with), network tests off (-L), no user configuration, two
# children; as root it drops to nobody. It waits until spamd has spawned a
# child, then exports SPAMD_TEST_ADDR. stop_spamd ends it.
start_spamd() {
	local dir i
	# Under /tmp, not the checkout: as root, spamd's children run as nobody,
	# who may not traverse the checkout's parents (a clone under /root).
	dir="$(mktemp -d /tmp/mailwatch-spamd.XXXXXX)" && chmod 755 "$dir" || die "could not make spamd's directory"
	MW_SPAMD_DIR="$dir"
	local user=()
	is_root && user=(-u nobody)
	/usr/sbin/spamd --socketpath="$dir/spamd.sock" -L --nouser-config --syslog=stderr \
		--pidfile="$dir/spamd.pid" --helper-home-dir="$dir" -m 2 "${user[@]}" >"$dir/spamd.log" 2>&1 &
	MW_SPAMD_PID=$!
	for i in $(seq 240); do
		grep -q "spawned child" "$dir/spamd.log" 2>/dev/null && [ -S "$dir/spamd.sock" ] && break
		kill -0 "$MW_SPAMD_PID" 2>/dev/null || { tail -5 "$dir/spamd.log" >&2; die "spamd did not start"; }
		sleep 0.5
	done
	[ -S "$dir/spamd.sock" ] || die "spamd did not start within 2 minutes (see $dir/spamd.log)"
	export SPAMD_TEST_ADDR="unix:$dir/spamd.sock"
}

stop_spamd() {
	[ -n "${MW_SPAMD_PID:-}" ] && kill "$MW_SPAMD_PID" 2>/dev/null || true
	[ -n "${MW_SPAMD_DIR:-}" ] && rm -rf "$MW_SPAMD_DIR" || true
}

# ensure_go checks the Go toolchain.
ensure_go() {
	if ! command -v go >/dev/null 2>&1; then
		[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH" || die "Go is required (https://go.dev/dl)"
	fi
	export PATH="$(go env GOPATH)/bin:$PATH"
}

# ensure_bind installs BIND 9 when named is missing: the DNS-fix tests write
# through RFC 2136 to a real named on loopback (internal/bindtest), and with
# BINDTEST_REQUIRED set they fail instead of skipping when it is absent.
ensure_bind() {
	if command -v named >/dev/null 2>&1 || [ -x /usr/sbin/named ]; then return 0; fi
	log "installing bind9 (named) for the DNS-fix tests"
	apt_install bind9 >/dev/null || die "could not install bind9 (need root or passwordless sudo)"
}

# ensure_compose installs Debian's docker-compose (v1.29, which reads every
# key compose.yaml uses) when neither it nor the `docker compose` plugin is
# there: the deploy test validates compose.yaml with Compose's own `config`,
# no container engine needed; with COMPOSE_TEST_REQUIRED set it fails
# instead of skipping without it.
ensure_compose() {
	command -v docker-compose >/dev/null 2>&1 && return 0
	docker compose version >/dev/null 2>&1 && return 0
	log "installing docker-compose to validate compose.yaml"
	apt_install docker-compose >/dev/null || die "could not install docker-compose (need root or passwordless sudo)"
}

# ensure_chromium installs Debian's Chromium when no browser is found: the
# dashboard's browser tests drive it headless (chromedp), and with
# DASHBOARD_TEST_REQUIRED set they fail instead of skipping without it.
ensure_chromium() {
	local b
	for b in chromium chromium-browser google-chrome; do
		command -v "$b" >/dev/null 2>&1 && return 0
	done
	log "installing chromium for the dashboard's browser tests"
	apt_install chromium >/dev/null || die "could not install chromium (need root or passwordless sudo)"
}

# ensure_jq installs jq and openssl when they are missing: the README's
# walk-through and its test read ids out of JSON answers with jq and sign a
# provider webhook with openssl.
ensure_jq() {
	local missing=""
	command -v jq >/dev/null 2>&1 || missing="jq"
	command -v openssl >/dev/null 2>&1 || missing="$missing openssl"
	[ -n "$missing" ] || return 0
	log "installing ${missing# } (the README's examples use them)"
	# shellcheck disable=SC2086
	apt_install $missing >/dev/null || log "could not install ${missing# } (need root or passwordless sudo); the README's examples use them"
}

# dev_env exports the settings scripts/run gives `mailwatch dev` unless they
# are already set: everything on loopback, readable logs, and webhook
# destinations on this machine allowed (a local-only instance). The README
# test starts its `mailwatch dev` through this function too.
dev_env() {
	export LISTEN_ADDR="${LISTEN_ADDR:-127.0.0.1:8080}"
	export SMTP_ADDR="${SMTP_ADDR:-127.0.0.1:2525}"
	export UI_ADDR="${UI_ADDR:-127.0.0.1:8081}"
	export LOG_FORMAT="${LOG_FORMAT:-text}"
	# Set but empty keeps the strict default (no loopback destinations).
	export WEBHOOK_ALLOWED_CIDRS="${WEBHOOK_ALLOWED_CIDRS-127.0.0.0/8,::1/128}"
	# A local-only Stripe webhook secret and price map, so the README's signed
	# Stripe example runs; a real deployment sets its own (Stripe dashboard).
	export STRIPE_WEBHOOK_SECRET="${STRIPE_WEBHOOK_SECRET-whsec_local_dev_only}"
	export STRIPE_PRICE_PLANS="${STRIPE_PRICE_PLANS-price_local_pro=pro,price_local_business=business}"
	# That secret would make the default plan free; a local instance is a
	# team's own tool, not a trial.
	export DEFAULT_PLAN="${DEFAULT_PLAN-unlimited}"
}

# loopback_url SCHEME ADDR turns a listen address into a URL a local client
# can use (":8080" and "0.0.0.0:8080" become 127.0.0.1:8080).
loopback_url() {
	local host="${2%:*}" port="${2##*:}"
	case "$host" in "" | 0.0.0.0 | "[::]" | "::") host=127.0.0.1 ;; esac
	printf '%s://%s:%s' "$1" "$host" "$port"
}

# shell_quote prints its argument in single quotes, for any POSIX shell.
shell_quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# write_local_env FILE BINDIR writes the shell settings a second terminal
# needs to use the running instance: `source FILE` sets BASE (the API),
# SMTP_URL (the SMTP listener), UI (River UI), and puts BINDIR, holding the
# mailwatch binary, first on PATH. The README's blocks rely on these names.
# It also exports every mailwatch setting set in this environment (what the
# processes get: DATABASE_URL, LISTEN_ADDR, WEBHOOK_ALLOWED_CIDRS, ...), so
# `mailwatch config` and the CLI see what the running instance uses. The
# file may hold secrets (MAILWATCH_SECRET_KEY): it is readable by its owner
# only.
write_local_env() {
	local file="$1" bindir="$2" name
	mkdir -p "$(dirname "$file")"
	(
		umask 077
		{
			echo "# Written by scripts/run for the mailwatch it runs. In another shell: source .local/env"
			echo "export BASE=$(shell_quote "$(loopback_url http "$LISTEN_ADDR")")"
			echo "export SMTP_URL=$(shell_quote "$(loopback_url smtp "$SMTP_ADDR")")"
			echo "export UI=$(shell_quote "$(loopback_url http "${UI_ADDR:-127.0.0.1:8081}")")"
			echo "# The settings the running instance was given."
			for name in $("$bindir/mailwatch" config table | sed -n 's/^| `\([A-Z0-9_]*\)` |.*/\1/p'); do
				[ -n "${!name+set}" ] && echo "export $name=$(shell_quote "${!name}")"
			done
			echo "case \":\$PATH:\" in *$(shell_quote ":$bindir:")*) ;; *) export PATH=$(shell_quote "$bindir"):\"\$PATH\" ;; esac"
		} > "$file.tmp"
	)
	chmod 600 "$file.tmp"
	mv "$file.tmp" "$file"
}