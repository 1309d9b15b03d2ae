# tests/integration/sx_procs.sh: sourced by the scripts that run libsisci's examples as
# processes on cluster nodes (sisci_examples.sh, sisci_ivshmem.sh). They set $top (where each
# program's output goes, as NAME.out) and $pids, and define fail.

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
