#!/usr/bin/env bash
# testdb-clean.sh drops the databases the Go tests leave on the PostgreSQL
# server of DATABASE_URL (scripts/pg.sh's when it is not set):
#
#	mcpsearch_tmpl_*  the migrated template each test package clones; kept
#	                  on purpose, so the next run skips the migrations
#	mcpsearch_test_*  a test's own database, left only by a killed run
#
#	bash scripts/testdb-clean.sh [PREFIX...]   # default: mcpsearch_tmpl_ mcpsearch_test_
#
# Run it when no test runs against that server: it ends the connections of
# the databases it drops. It never drops the database of DATABASE_URL.
set -euo pipefail

die() {
	printf 'testdb-clean.sh: %s\n' "$*" >&2
	exit 1
}

command -v psql >/dev/null 2>&1 || die "psql not found (Debian: apt-get install postgresql-client)"
url="${DATABASE_URL:-$(bash "$(dirname "$0")/pg.sh")}"
prefixes=("$@")
((${#prefixes[@]} > 0)) || prefixes=(mcpsearch_tmpl_ mcpsearch_test_)

where=""
for p in "${prefixes[@]}"; do
	# Prefixes go into SQL as literals: letters, digits and _ only.
	[[ $p =~ ^[A-Za-z0-9_]+$ ]] || die "bad prefix $p: use letters, digits and _"
	where+="${where:+ OR }starts_with(datname, '$p')"
done

dbs="$(psql "$url" -XAtq -v ON_ERROR_STOP=1 \
	-c "SELECT datname FROM pg_database WHERE ($where) AND datname <> current_database() ORDER BY datname")"
if [[ -z $dbs ]]; then
	printf 'testdb-clean.sh: nothing to drop\n' >&2
	exit 0
fi
# On a Citus coordinator the tests made each database on the workers too:
# it is dropped there first, through the coordinator.
citus="$(psql "$url" -XAtq -v ON_ERROR_STOP=1 -c "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')")"
while IFS= read -r db; do
	# The name came from the catalog; double any quote it holds.
	drop="DROP DATABASE IF EXISTS \"${db//\"/\"\"}\" WITH (FORCE)"
	if [[ $citus == t ]]; then
		psql "$url" -XAtq -v ON_ERROR_STOP=1 -v drop="$drop" <<<"SELECT nodename || ':' || nodeport || ': ' || result FROM run_command_on_workers(:'drop') WHERE NOT success" >&2
	fi
	psql "$url" -Xq -v ON_ERROR_STOP=1 -c "$drop"
	printf 'testdb-clean.sh: dropped %s\n' "$db" >&2
done <<<"$dbs"
