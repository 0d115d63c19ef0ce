#!/usr/bin/env bash
# pg.sh gets a local PostgreSQL with pgvector ready for mcpsearch on Debian
# (bookworm or later) and prints the DATABASE_URL to use, and nothing else, on
# stdout:
#
#	export DATABASE_URL="$(scripts/pg.sh)"
#
# It installs what is missing (PostgreSQL from Debian; pgvector built from
# Debian's trixie source package when no pgvector is installed, because
# bookworm ships no pgvector binary package), starts the local cluster, and
# creates the role and database "mcpsearch". Progress goes to stderr. Run it as
# root or as a user with sudo. It is idempotent and takes well under two
# seconds when everything is already in place.
#
# When DATABASE_URL is already set, it prints it and changes nothing, so
# `make test` can be pointed at any PostgreSQL with pgvector >= 0.7.
set -euo pipefail

if [[ -n "${DATABASE_URL:-}" ]]; then
	printf '%s\n' "$DATABASE_URL"
	exit 0
fi

readonly ROLE=mcpsearch
readonly DB=mcpsearch
readonly SRC_SUITE=trixie

log() { printf 'pg.sh: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

ALTERNATIVE="set DATABASE_URL to an existing PostgreSQL with pgvector"
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

# Two runs at once (for example parallel test jobs) would race on apt and on
# cluster start; one lock serialises them.
exec 9>"${TMPDIR:-/tmp}/mcpsearch-pg.lock"
flock 9

# debian_mirror prints the URI of the machine's Debian archive, read from the
# deb822 .sources files apt already uses (so no host name is hard-coded here),
# falling back to one-line sources.list entries.
debian_mirror() {
	local parts codename uri=""
	eval "$(apt-config shell parts Dir::Etc::sourceparts/d)"
	codename="$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")"
	if [[ -n ${parts:-} ]] && compgen -G "${parts}*.sources" >/dev/null; then
		# Paragraph mode: one record per stanza. Prefer a stanza of type deb
		# for the release's own suite; otherwise any deb stanza whose URI
		# ends in /debian and is not the security archive.
		uri="$(awk -v code="$codename" '
			BEGIN { RS = ""; FS = "\n" }
			{
				uris = ""; suites = ""; types = ""; enabled = "yes"
				for (i = 1; i <= NF; i++) {
					line = $i
					if (line ~ /^[ \t#]/) continue
					key = tolower(line); sub(/:.*/, "", key)
					sub(/^[^:]*:[ \t]*/, "", line)
					if (key == "uris") uris = line
					else if (key == "suites") suites = line
					else if (key == "types") types = line
					else if (key == "enabled") enabled = tolower(line)
				}
				if (enabled == "no" || (" " types " ") !~ / deb /) next
				split(uris, u, /[ \t]+/)
				if (u[1] == "" || u[1] ~ /-security/) next
				if (code != "" && (" " suites " ") ~ (" " code " ")) { print u[1]; found = 1; exit }
				if (fallback == "" && u[1] ~ /\/debian\/?$/) fallback = u[1]
			}
			END { if (!found && fallback != "") print fallback }
		' "${parts}"*.sources)"
	fi
	if [[ -z $uri && -r /etc/apt/sources.list ]]; then
		# Skip the optional [key=value ...] block; the next field is the URI.
		uri="$(awk '$1 == "deb" {
			inopts = 0
			for (i = 2; i <= NF; i++) {
				if ($i ~ /^\[/) inopts = 1
				if (inopts) { if ($i ~ /\]$/) inopts = 0; continue }
				if ($i !~ /-security/) { print $i; exit }
				next
			}
		}' /etc/apt/sources.list)"
	fi
	[[ -n $uri ]] || die "could not find a Debian mirror in the apt sources"
	printf '%s\n' "$uri"
}

# build_pgvector builds and installs pgvector for PostgreSQL $1 from Debian's
# trixie source package. A private sources file and lists folder keep the
# system's apt configuration and package lists untouched.
build_pgvector() {
	local ver=$1 pgconfig mirror tmp
	apt_install "postgresql-server-dev-$ver" build-essential dpkg-dev
	pgconfig="/usr/lib/postgresql/$ver/bin/pg_config"
	[[ -x $pgconfig ]] || die "$pgconfig missing after installing postgresql-server-dev-$ver"
	mirror="$(debian_mirror)"
	tmp="$(mktemp -d)"
	# The trap runs after the function returns, when tmp is out of scope, so
	# the path is expanded now.
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" EXIT
	mkdir -p "$tmp/lists/partial" "$tmp/download"
	# apt downloads as the unprivileged _apt user when it can write the
	# target folder, and warns when it cannot.
	chmod 0755 "$tmp"
	if id -u _apt >/dev/null 2>&1; then
		as_root chown _apt "$tmp/download"
	fi
	cat >"$tmp/pgvector.sources" <<-EOF
		Types: deb-src
		URIs: $mirror
		Suites: $SRC_SUITE
		Components: main
	EOF
	local apt_opts=(
		-o "Dir::Etc::sourcelist=$tmp/pgvector.sources"
		-o "Dir::Etc::sourceparts=-"
		-o "Dir::State::Lists=$tmp/lists"
	)
	log "fetching the pgvector source package from $mirror ($SRC_SUITE)"
	as_root apt-get "${apt_opts[@]}" update -qq >&2
	(cd "$tmp/download" && as_root apt-get "${apt_opts[@]}" source --download-only -qq pgvector >&2)
	local orig
	orig="$(compgen -G "$tmp/download/pgvector_*.orig.tar.*" | head -n 1)" || true
	[[ -n $orig ]] || die "the pgvector source package has no orig tarball"
	mkdir "$tmp/src"
	tar -xf "$orig" -C "$tmp/src" --strip-components=1
	log "building pgvector $(basename "$orig" | sed 's/^pgvector_//; s/\.orig.*//') for PostgreSQL $ver"
	make -s -C "$tmp/src" -j"$(nproc)" PG_CONFIG="$pgconfig" >&2
	as_root make -s -C "$tmp/src" install PG_CONFIG="$pgconfig" >&2
}

ver="$(pg_version)"
if [[ -z $ver ]]; then
	apt_install postgresql
	ver="$(pg_version)"
	[[ -n $ver ]] || die "PostgreSQL server not found after installing the postgresql package"
fi

sharedir="/usr/share/postgresql/$ver"
if [[ -x /usr/lib/postgresql/$ver/bin/pg_config ]]; then
	sharedir="$(/usr/lib/postgresql/$ver/bin/pg_config --sharedir)"
fi
if [[ ! -f $sharedir/extension/vector.control ]]; then
	# Debian from trixie on, and the PGDG repository, ship pgvector as a
	# binary package; bookworm does not, so it is built from source there.
	apt_refresh
	if [[ "$(apt-cache policy "postgresql-$ver-pgvector" 2>/dev/null | awk '/Candidate:/ { print $2 }')" =~ ^[0-9] ]]; then
		apt_install "postgresql-$ver-pgvector"
	else
		build_pgvector "$ver"
	fi
fi

# cluster_field prints column $1 (1-based) of "pg_lsclusters -h" for $ver/main.
cluster_field() {
	pg_lsclusters -h 2>/dev/null | awk -v v="$ver" -v f="$1" '$1 == v && $2 == "main" { print $f; exit }'
}

if [[ -z "$(cluster_field 2)" ]]; then
	log "creating cluster $ver/main"
	as_root pg_createcluster "$ver" main >&2 9>&-
fi
if [[ "$(cluster_field 4)" != online ]]; then
	log "starting cluster $ver/main"
	start=(pg_ctlcluster)
	# Without systemd (containers) pg_ctlcluster must run the server itself;
	# with it, systemd should own the service.
	[[ -d /run/systemd/system ]] || start+=(--skip-systemctl-redirect)
	# Exit status 2 means it is already running: someone else started it.
	rc=0
	# 9>&-: the server must not inherit the lock, or it would hold it forever.
	as_root "${start[@]}" "$ver" main start >&2 9>&- || rc=$?
	((rc == 0 || rc == 2)) || die "could not start cluster $ver/main (see /var/log/postgresql/postgresql-$ver-main.log)"
fi
port="$(cluster_field 3)"
for _ in $(seq 1 60); do
	pg_isready -q -h 127.0.0.1 -p "$port" && break
	sleep 0.5
done
pg_isready -q -h 127.0.0.1 -p "$port" || die "PostgreSQL $ver/main does not accept connections on 127.0.0.1:$port"

# The role is a superuser because CREATE EXTENSION vector needs one (pgvector
# is not a trusted extension) and every test package creates fresh databases
# and installs the extension in them through migrations. This cluster is a
# local development one, reachable only from this machine.
as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "$port" -d postgres >&2 <<-SQL
	SET client_min_messages = warning;
	DO \$\$
	BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$ROLE') THEN
			CREATE ROLE $ROLE LOGIN SUPERUSER PASSWORD '$ROLE';
		ELSE
			ALTER ROLE $ROLE LOGIN SUPERUSER PASSWORD '$ROLE';
		END IF;
	END
	\$\$;
	SELECT 'CREATE DATABASE $DB OWNER $ROLE' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$DB') \gexec
	\connect $DB
	SET client_min_messages = warning;
	CREATE EXTENSION IF NOT EXISTS vector;
SQL

printf 'postgres://%s:%s@127.0.0.1:%s/%s?sslmode=disable\n' "$ROLE" "$ROLE" "$port" "$DB"
