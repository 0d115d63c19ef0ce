#!/usr/bin/env bash
# compose-env.sh writes the .env file that docker-compose.yml reads, with a
# fresh random value for each secret of the stack:
#
#	MCP_API_KEYS       the bearer key MCP clients send to mcpsearch
#	SEARXNG_SECRET     SearXNG's server.secret_key
#	POSTGRES_PASSWORD  the password of the mcpsearch database role
#
#	bash scripts/compose-env.sh [FILE]   # default: .env beside docker-compose.yml
#
# An existing file is left as it is: the PostgreSQL password is only read
# when the database volume is first created, and clients already hold the
# key. The file is readable by its owner only.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/.env}"

if [[ -e $out ]]; then
	printf 'compose-env.sh: %s exists; leaving it as it is\n' "$out" >&2
	exit 0
fi

# random prints $1 random bytes as hex (URL-safe, so the password can sit
# in DATABASE_URL unescaped).
random() {
	od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'
}

umask 077
tmp="$(mktemp "$out.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
cat >"$tmp" <<-CONF
	# Secrets of the docker compose stack, made by scripts/compose-env.sh.
	# Keep this file private. MCP clients send the key as
	#   Authorization: Bearer <MCP_API_KEYS>
	# (several keys: separate them with commas).
	MCP_API_KEYS=$(random 32)
	SEARXNG_SECRET=$(random 32)
	POSTGRES_PASSWORD=$(random 24)
	# Host port of mcpsearch, published on 127.0.0.1 only.
	MCP_PORT=8080
CONF
mv "$tmp" "$out"
trap - EXIT
printf 'compose-env.sh: wrote %s\n' "$out" >&2
