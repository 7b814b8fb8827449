# Sourced by the scripts that ask apt for something: apt_retry CMD [ARGS...]
# runs CMD up to three times, 20 s apart (SBT_APT_PAUSE): 0 once it
# succeeds, 1 when the third try failed too. A Debian mirror caught
# mid-sync serves an index or a package of the wrong size for a while; a
# second try usually gets it.
apt_retry() {
	local try
	for try in 1 2 3; do
		"$@" && return 0
		[ "$try" -lt 3 ] || return 1
		echo "apt: '$*' failed (try $try of 3); again in ${SBT_APT_PAUSE:-20} s" >&2
		sleep "${SBT_APT_PAUSE:-20}"
	done
}
