# lib.sh holds what scripts/pg.sh and scripts/citus.sh share: running as root
# or postgres, finding the installed PostgreSQL, installing Debian packages.
# A script sources it after defining log and die, and sets ALTERNATIVE to
# what a user without root or apt can do instead (it ends the error
# messages).

if [[ $EUID -eq 0 ]]; then
	as_root() { "$@"; }
	as_postgres() { (cd / && runuser -u postgres -- "$@"); }
elif command -v sudo >/dev/null 2>&1; then
	as_root() { sudo "$@"; }
	as_postgres() { (cd / && sudo -u postgres "$@"); }
else
	die "run as root or install sudo (or $ALTERNATIVE)"
fi

# pg_version prints the newest PostgreSQL major version whose server is
# installed, or nothing.
pg_version() {
	local d
	for d in /usr/lib/postgresql/*/bin/postgres; do
		[[ -x $d ]] && basename "$(dirname "$(dirname "$d")")"
	done | sort -V | tail -n 1
}

installed() {
	[[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" == installed ]]
}

# apt_refresh runs apt-get update once per run, and only on the way to
# installing something.
apt_updated=0
apt_refresh() {
	command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this script supports Debian; $ALTERNATIVE instead"
	if ((apt_updated == 0)); then
		log "apt-get update"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
		apt_updated=1
	fi
}

# apt_install installs the packages not installed yet.
apt_install() {
	local missing=() p
	for p in "$@"; do
		installed "$p" || missing+=("$p")
	done
	((${#missing[@]} == 0)) && return 0
	apt_refresh
	log "installing ${missing[*]}"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}
