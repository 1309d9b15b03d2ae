# tests/integration/sx_procs.sh: sourced by the scripts that run libsisci programs as
# processes on cluster nodes (sisci_examples.sh, sisci_ivshmem.sh, sisci_compat.sh). They set
# $top (where each program's output goes, as NAME.out) and $pids, and define fail (or call
# sx_sim_cluster, which does all three).

# A simulated cluster for the rest of the script: sx_sim_cluster TAG YAML. Sets $top (a fresh
# directory), $dir (the instance, exported as NTBFAB_DIR) and $pids, defines fail, and takes
# everything down at exit ($ntbfab is the CLI).
sx_sim_cluster() {
	top=$(mktemp -d "/dev/shm/ntbfab-$1-XXXXXX")
	dir=$top/inst
	pids=""
	trap sx_cleanup EXIT
	"$ntbfab" up "$2" --dir "$dir" >"$top/up.log" 2>&1 || fail "ntbfab up: $(cat "$top/up.log")"
	export NTBFAB_DIR="$dir"
}
sx_cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	"$ntbfab" down --dir "$dir" >/dev/null 2>&1
	[ -n "${NTBFAB_KEEP:-}" ] || rm -rf "$top"
}
if ! command -v fail >/dev/null 2>&1; then
	fail() {
		echo "FAIL: $*" >&2
		for f in "$top"/*.out; do [ -f "$f" ] && { echo "== $f" >&2; cat "$f" >&2; }; done
		exit 1
	}
fi

# Start a program on a node in the background: NAME NODE PROGRAM ARGS...
start() {
	name=$1 node=$2
	shift 2
	NTBFAB_NODE=$node timeout 120 "$@" >"$top/$name.out" 2>&1 &
	pids="$pids $!"
	eval "pid_$name=$!"
}
# Run a program on a node in the foreground and keep its output: NAME NODE PROGRAM ARGS...
run() {
	name=$1 node=$2
	shift 2
	NTBFAB_NODE=$node timeout 120 "$@" >"$top/$name.out" 2>&1 || fail "$name exited $?"
}
# Wait for a background program: NAME
finish() {
	eval "p=\$pid_$1"
	wait "$p" || fail "$1 exited $?"
}
# NAME printed TEXT (a grep pattern).
expect() { grep -q "$2" "$top/$1.out" || fail "$1 did not print '$2'"; }
