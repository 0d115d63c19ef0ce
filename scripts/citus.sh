#!/usr/bin/env bash
# citus.sh gets a local Citus cluster ready for mcpsearch's tests on Debian: a
# coordinator and two workers, three PostgreSQL servers on local ports, each
# with Citus and pgvector. It prints the URL of the coordinator's database
# "mcpsearch", and nothing else, on stdout:
#
#	export MCPSEARCH_CITUS_URL="$(scripts/citus.sh)"
#
# Citus must be installed for the machine's PostgreSQL, or buildable: when it
# is missing, the script builds it from a Citus source release,
# citus-<version>.tar.gz, found in MCPSEARCH_CITUS_SRC (a folder, or the
# tarball itself; default: ../shared/citus beside the checkout), after
# applying every *.patch file of that folder in name order (with patch -p1).
# The build is cached outside the clone, in MCPSEARCH_CACHE_DIR (default:
# ~/.cache/mcpsearch), keyed by the source, the patches and the PostgreSQL
# version, so installing it again takes seconds. Without Citus and without a
# source the script says how to get Citus, on one line, and exits with
# status 3.
#
# The servers keep their data in MCPSEARCH_CITUS_DATA (default:
# /var/lib/postgresql/mcpsearch-citus), one folder per node, and listen on
# 127.0.0.1 only, at MCPSEARCH_CITUS_PORT (default 9700) for the coordinator
# and the two ports after it for the workers. The role "mcpsearch" (password
# "mcpsearch", a superuser: CREATE EXTENSION citus and vector need one, and
# tests create databases) owns the database "mcpsearch", in which the workers
# are registered with citus_add_node. The servers reach each other as that
# role through a password file private to the cluster.
#
# Progress goes to stderr. Run it as root or as a user with sudo. It is
# idempotent: a second run starts what is stopped and otherwise changes
# nothing. `scripts/citus.sh stop` stops the three servers.
#
# When MCPSEARCH_CITUS_URL is already set, it prints it and changes nothing,
# so tests can be pointed at any Citus cluster with pgvector.
set -euo pipefail

readonly ROLE=mcpsearch
readonly PASSWORD=mcpsearch
readonly DB=mcpsearch
readonly NODES=(coordinator worker1 worker2)
readonly HOW_TO_GET_CITUS="run the citusdata/citus image (docker compose -f docker-compose.yml -f docker-compose.citus.yml up -d citus-register, then set MCPSEARCH_CITUS_URL=postgres://mcpsearch:\$POSTGRES_PASSWORD@127.0.0.1:9700/mcpsearch) or install Citus's packages for PostgreSQL (https://docs.citusdata.com/en/stable/installation/multi_node.html)"

action="${1:-start}"
case $action in
start | stop) ;;
*)
	printf 'usage: %s [start|stop]\n' "$0" >&2
	exit 2
	;;
esac

if [[ $action == start && -n "${MCPSEARCH_CITUS_URL:-}" ]]; then
	printf '%s\n' "$MCPSEARCH_CITUS_URL"
	exit 0
fi

root="$(cd "$(dirname "$0")/.." && pwd)"
src="${MCPSEARCH_CITUS_SRC:-$root/../shared/citus}"
cache="${MCPSEARCH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mcpsearch}/citus"
data="${MCPSEARCH_CITUS_DATA:-/var/lib/postgresql/mcpsearch-citus}"
base_port="${MCPSEARCH_CITUS_PORT:-9700}"
[[ $base_port =~ ^[0-9]+$ ]] && ((base_port > 0 && base_port < 65534)) || {
	printf 'citus.sh: error: MCPSEARCH_CITUS_PORT=%s is not a port number\n' "$base_port" >&2
	exit 1
}

log() { printf 'citus.sh: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
# unavailable ends the run when Citus can be neither found nor built here:
# status 3 lets callers (CI, make) tell "no Citus" from a failure.
unavailable() {
	log "$* To get Citus, $HOW_TO_GET_CITUS."
	exit 3
}

ALTERNATIVE="set MCPSEARCH_CITUS_URL to an existing Citus cluster"
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

# Two runs at once (parallel test jobs) would race on the build and on the
# servers' start; one lock serialises them.
exec 9>"${TMPDIR:-/tmp}/mcpsearch-citus.lock"
flock 9

ver="$(pg_version)"
bindir="/usr/lib/postgresql/$ver/bin"
port_of() {
	local i
	for i in "${!NODES[@]}"; do
		if [[ ${NODES[$i]} == "$1" ]]; then
			printf '%s\n' $((base_port + i))
			return 0
		fi
	done
	return 1
}

# running reports whether node $1's server runs from its data folder.
running() {
	[[ -f $data/$1/PG_VERSION ]] && as_postgres "$bindir/pg_ctl" -D "$data/$1" status >/dev/null 2>&1
}

if [[ $action == stop ]]; then
	[[ -n $ver ]] || exit 0
	for node in "${NODES[@]}"; do
		if running "$node"; then
			log "stopping $node"
			as_postgres "$bindir/pg_ctl" -D "$data/$node" -m fast -w stop >&2
		fi
	done
	exit 0
fi

if [[ -z $ver ]]; then
	unavailable "PostgreSQL is not installed (scripts/pg.sh installs it) and Citus is not either."
fi
pg_config="$bindir/pg_config"

# pgvector: scripts/pg.sh installs (or builds) it for the same PostgreSQL.
# It also starts the machine's own cluster, which the other tests use.
if [[ ! -f "$($pg_config --sharedir 2>/dev/null || echo "/usr/share/postgresql/$ver")/extension/vector.control" ]]; then
	log "pgvector is missing: installing it through scripts/pg.sh"
	env -u DATABASE_URL bash "$root/scripts/pg.sh" >/dev/null
fi
[[ -x $pg_config ]] || apt_install "postgresql-server-dev-$ver"
sharedir="$($pg_config --sharedir)"
pkglibdir="$($pg_config --pkglibdir)"
[[ -f $sharedir/extension/vector.control ]] || die "pgvector is not installed for PostgreSQL $ver"

# source_tarball prints the Citus source release to build: MCPSEARCH_CITUS_SRC
# itself when it is a file, else the newest citus-*.tar.gz in that folder.
source_tarball() {
	if [[ -f $src ]]; then
		printf '%s\n' "$src"
	elif [[ -d $src ]]; then
		{ compgen -G "$src/citus-*.tar.gz" || true; } | sort -V | tail -n 1
	fi
}

# install_citus builds Citus from $1 into the cache, unless a build of the
# same source, patches and PostgreSQL is there, and copies it into the
# machine's PostgreSQL.
install_citus() {
	local tarball=$1 dir patches=() key build
	dir="$(dirname "$tarball")"
	if [[ -d $dir ]]; then
		mapfile -t patches < <({ compgen -G "$dir/*.patch" || true; } | sort)
	fi
	key="$( (
		sha256sum "$tarball" "${patches[@]}" | cut -d' ' -f1
		"$pg_config" --version
		uname -m
	) | sha256sum | cut -c1-16)"
	build="$cache/$(basename "$tarball" .tar.gz)-pg$ver-$key"
	if [[ ! -f $build/done ]]; then
		apt_install build-essential "postgresql-server-dev-$ver" libkrb5-dev liblz4-dev libzstd-dev libssl-dev
		log "building $(basename "$tarball" .tar.gz) for PostgreSQL $ver ($(nproc) cores, a few minutes; log in $build/build.log)"
		rm -rf "$build"
		mkdir -p "$build/src" "$build/stage"
		tar -xzf "$tarball" -C "$build/src" --strip-components=1
		local p
		for p in "${patches[@]}"; do
			log "applying $(basename "$p")"
			patch -s -d "$build/src" -p1 <"$p" >&2
		done
		# libcurl serves only Citus's anonymous usage statistics, which a
		# test cluster must not send.
		if ! (
			cd "$build/src" &&
				./configure --without-libcurl PG_CONFIG="$pg_config" &&
				make -j"$(nproc)" &&
				make install DESTDIR="$build/stage"
		) >"$build/build.log" 2>&1; then
			tail -n 30 "$build/build.log" >&2
			die "building Citus failed (log: $build/build.log)"
		fi
		rm -rf "$build/src"
		touch "$build/done"
	fi
	log "installing Citus from $build"
	as_root cp -a "$build/stage/." /
}

if [[ ! -f $sharedir/extension/citus.control || ! -f $pkglibdir/citus.so ]]; then
	tarball="$(source_tarball)"
	if [[ -z $tarball ]]; then
		unavailable "Citus is not installed for PostgreSQL $ver and no Citus source (citus-<version>.tar.gz) is in ${src} (MCPSEARCH_CITUS_SRC)."
	fi
	install_citus "$tarball"
fi

# The cluster's servers reach each other as $ROLE: libpq in each server reads
# this password file, named in the servers' environment (PGPASSFILE), so
# nothing of the postgres user's own settings changes.
passfile="$data/pgpass"
as_root install -d -o postgres -g postgres -m 0700 "$data"
printf '*:*:*:%s:%s\n' "$ROLE" "$PASSWORD" | as_postgres tee "$passfile" >/dev/null
as_postgres chmod 0600 "$passfile"

for node in "${NODES[@]}"; do
	dir="$data/$node"
	port="$(port_of "$node")"
	if running "$node"; then
		continue
	fi
	if pg_isready -q -h 127.0.0.1 -p "$port" 2>/dev/null; then
		die "port $port is taken by another server: set MCPSEARCH_CITUS_PORT to the first of three free ports"
	fi
	if ! as_root test -f "$dir/PG_VERSION"; then
		log "creating $node (port $port) in $dir"
		as_postgres "$bindir/initdb" -D "$dir" -U postgres --auth-local=peer --auth-host=scram-sha-256 \
			--encoding=UTF8 --locale=C.UTF-8 >/dev/null
		# Settings of this cluster; wal_level logical lets Citus move shards
		# (citus_rebalance_start) between the nodes.
		as_postgres tee -a "$dir/postgresql.conf" >/dev/null <<-CONF

			# mcpsearch test cluster ($node)
			port = $port
			listen_addresses = '127.0.0.1'
			unix_socket_directories = '$dir'
			shared_preload_libraries = 'citus'
			wal_level = logical
			max_connections = 200
			# Where a node reaches itself (CREATE DATABASE propagation, for one).
			citus.local_hostname = '127.0.0.1'
		CONF
	fi
	log "starting $node on 127.0.0.1:$port"
	# 9>&-: the server must not inherit the lock, or it would hold it forever.
	as_postgres env PGPASSFILE="$passfile" "$bindir/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >/dev/null 9>&- ||
		die "could not start $node (see $dir/server.log)"
done

# node_sql runs SQL from stdin on node $1, database $2, as postgres over the
# node's own socket; role_sql does the same as $ROLE over TCP. A failure
# ends the run with status 1: psql's own status 3 must not read as "no Citus".
node_sql() {
	as_postgres "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$data/$1" -p "$(port_of "$1")" -d "$2" >&2 ||
		die "SQL on $1 failed (see $data/$1/server.log)"
}
role_sql() {
	PGPASSWORD=$PASSWORD "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(port_of "$1")" -U "$ROLE" -d "$2" >/dev/null ||
		die "SQL on $1 failed (see $data/$1/server.log)"
}

for node in "${NODES[@]}"; do
	node_sql "$node" postgres <<-SQL
		SET client_min_messages = warning;
		DO \$\$
		BEGIN
			IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$ROLE') THEN
				CREATE ROLE $ROLE LOGIN SUPERUSER PASSWORD '$PASSWORD';
			END IF;
		END
		\$\$;
		SELECT 'CREATE DATABASE $DB OWNER $ROLE' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$DB') \gexec
		-- Workers build their shards' vector indexes with their own
		-- maintenance_work_mem: Citus does not pass mcpsearch's to them.
		ALTER SYSTEM SET maintenance_work_mem = '1GB';
		-- A cluster for tests: what a crash would lose is made again by the
		-- next run, and waiting for the disk on every commit and on every
		-- copy of a test database (each written on three servers) was a
		-- fifth of the documents suite's time here.
		ALTER SYSTEM SET fsync = off;
		ALTER SYSTEM SET synchronous_commit = off;
		ALTER SYSTEM SET full_page_writes = off;
		SELECT pg_reload_conf() \gset
	SQL
	# The extensions are created by $ROLE: Citus's background work connects
	# to the other nodes as the extension's owner. Once a worker holds
	# Citus's metadata it refuses DDL, even a CREATE EXTENSION IF NOT EXISTS
	# that would do nothing, hence the test first.
	role_sql "$node" "$DB" <<-SQL
		SET client_min_messages = warning;
		SELECT format('CREATE EXTENSION %I', e) FROM unnest(ARRAY['citus', 'vector']) AS e
		WHERE NOT EXISTS (SELECT FROM pg_extension WHERE extname = e) \gexec
	SQL
done

coord_port="$(port_of coordinator)"
{
	printf "SET client_min_messages = warning;\n"
	printf "SELECT citus_set_coordinator_host('127.0.0.1', %d) WHERE NOT EXISTS (SELECT FROM pg_dist_node WHERE groupid = 0);\n" "$coord_port"
	for node in "${NODES[@]:1}"; do
		printf "SELECT citus_add_node('127.0.0.1', %d) WHERE NOT EXISTS (SELECT FROM pg_dist_node WHERE nodename = '127.0.0.1' AND nodeport = %d);\n" \
			"$(port_of "$node")" "$(port_of "$node")"
	done
} | role_sql coordinator "$DB"

printf 'postgres://%s:%s@127.0.0.1:%s/%s?sslmode=disable\n' "$ROLE" "$PASSWORD" "$coord_port" "$DB"
