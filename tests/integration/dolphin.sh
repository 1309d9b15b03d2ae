#!/bin/sh
# tests/integration/dolphin.sh MODE BUILD SRC: ntbfab on the Dolphin backend (docs/dolphin.md),
# with ntbfab's own libsisci standing for Dolphin's. Two clusters on this host:
#
#   inner  a simulated cluster (ntbfab up, backend sim) whose daemons serve libsisci: it plays
#          eXpressWare and the Dolphin hardware;
#   outer  the cluster under test (backend dolphin): its daemons and programs load libsisci
#          (NTBFAB_SISCI_LIB), each told by NTBFAB_SISCI_ENV which inner node it is (%n: the
#          same node names).
#
# MODE conformance  ntbfab-conformance on two Dolphin adapters (ports 18501-18504)
#      up           ntbfab up with backend dolphin: config/examples/dolphin.yaml over
#                   quickstart.yaml; what is refused, and how it is said; the window's figures
#                   from SCIQuery, or the file's when the operator says so (ports 18511-18516)
#      device       a borrowed accelerator used through the device API, data checked, then
#                   used by its lender (ports 18521-18523)
#      nvme         ntbfab-nvme: a manager and clients share the simulated NVMe (18531-18533)
#      refuse       what the backend refuses (dolphin_refuse.c), each refusal leaving every
#                   segment and connection as it was; broadcast segments on the outer cluster
#                   (ports 18541-18546)
set -u
mode=$1
build=$2
src=$3
ntbfab=${NTBFAB:-$build/tools/ntbfab}
case $mode in
conformance) base=18500 ;;
up) base=18510 ;;
device) base=18520 ;;
nvme) base=18530 ;;
refuse) base=18540 ;;
*)
	echo "usage: dolphin.sh conformance|up|device|nvme|refuse BUILD SRC" >&2
	exit 2
	;;
esac
top=$(mktemp -d /dev/shm/ntbfab-dolphin-XXXXXX)
inner=$top/inner
outer=$top/outer
pids=""

cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	"$ntbfab" down --dir "$outer" >/dev/null 2>&1
	"$ntbfab" down --dir "$inner" >/dev/null 2>&1
	[ -n "${NTBFAB_KEEP:-}" ] || rm -rf "$top"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	for f in "$top"/*.out "$outer"/log/*.log "$outer"/log/*.err "$inner"/log/*.log; do
		[ -s "$f" ] && { echo "== $f" >&2; tail -n 40 "$f" >&2; }
	done
	exit 1
}
# The command's output must hold TEXT (a grep pattern): NAME TEXT
expect() { grep -q -- "$2" "$top/$1.out" || fail "$1 did not say '$2'"; }

export NTBFAB_SISCI_LIB="$build/frontends/sisci-compat/libsisci.so.0"
export NTBFAB_SISCI_ENV="NTBFAB_DIR=$inner NTBFAB_NODE=%n"
unset NTBFAB_DIR NTBFAB_NODE

# The two clusters from the example files, on this test's ports.
sed "s/:7700/:$((base + 1))/" "$src/config/examples/quickstart.yaml" >"$top/inner.yaml"
sed "s/:7790/:$((base + 2))/" "$src/config/examples/dolphin.yaml" >"$top/outer.yaml"
up() { # NAME YAML DIR
	"$ntbfab" up "$2" --dir "$3" >"$top/$1.out" 2>&1 || fail "ntbfab up $1: $(cat "$top/$1.out")"
}

case $mode in
conformance)
	up inner "$src/tests/conformance/dolphin-inner.yaml" "$inner"
	cd "$src" || exit 1
	"$build/tests/conformance/ntbfab-conformance" --backend dolphin \
		--config tests/conformance/dolphin.yaml >"$top/conformance.out" 2>&1 ||
		fail "ntbfab-conformance: $(cat "$top/conformance.out")"
	cat "$top/conformance.out"
	# What the backend claims, and that each claim was checked rather than skipped.
	for c in 'caps.figures' 'mem ' 'xlat.inbound' 'xlat.size' 'map.offset' 'map.process' \
		'irq ' 'window_write' 'dma.copy' 'dma.order' 'dma.error'; do
		grep "^ok .* - $c" "$top/conformance.out" | grep -qv SKIP ||
			fail "conformance check $c did not run and pass"
	done
	expect conformance '# 41 checks: 24 passed, 0 failed, 17 skipped'
	# Mappings of segments do not follow a slot programmed again: not claimed, said so.
	expect conformance 'map.live \[a.ntb0 -> b.ntb0\]: a.ntb0 does not claim NTBF_CAP_MAP_LIVE'
	;;
up)
	up inner "$top/inner.yaml" "$inner"
	up outer "$top/outer.yaml" "$outer"
	expect outer 'lender.ntb0 - borrower.ntb0  up'
	expect outer '0x4001  lender.acc0'
	# Each daemon's log says which figures SISCI gave.
	grep -q 'ntbfab dolphin: adapter lender.ntb0: figures ports 2 from SCIQuery, window 1073741824 bytes in 256 slots from SCIQuery (ATT), DMA MTU' \
		"$outer/log/lender.err" || fail "the lender's log does not say the figures SCIQuery gave"
	"$ntbfab" status --dir "$outer" >"$top/status.out" 2>&1 || fail "ntbfab status failed"
	expect status 'dolphin'
	# A figure of the file that is not what SCIQuery says: the daemon names it and the fix.
	sed "s/slots: 256/slots: 128/; s/:$((base + 2))/:$((base + 3))/" "$top/outer.yaml" >"$top/bad.yaml"
	"$ntbfab" up "$top/bad.yaml" --dir "$top/bad" >"$top/bad.out" 2>&1 &&
		fail "ntbfab up accepted a window of 128 slots where SCIQuery says 256"
	expect bad 'the backend reports 256 slots in window 0, the cluster file 128; set'
	"$ntbfab" down --dir "$top/bad" >/dev/null 2>&1
	# No library: said at once, with what to install or set.
	NTBFAB_SISCI_LIB=$top/nowhere/libsisci.so "$ntbfab" up "$top/outer.yaml" --dir "$top/nolib" \
		>"$top/nolib.out" 2>&1 && fail "ntbfab up without a SISCI library succeeded"
	expect nolib "NTBFAB_SISCI_LIB names $top/nowhere/libsisci.so, which cannot be read"
	if [ ! -e /opt/DIS ]; then
		env -u NTBFAB_SISCI_LIB LD_LIBRARY_PATH= "$ntbfab" up "$top/outer.yaml" \
			--dir "$top/nolib2" >"$top/nolib2.out" 2>&1 &&
			fail "ntbfab up found a SISCI library nowhere installed"
		expect nolib2 "Dolphin's libsisci not found in /opt/DIS/lib64"
		expect nolib2 'install eXpressWare'
	fi
	# A library that is not SISCI's: the first missing function is named.
	NTBFAB_SISCI_LIB=$build/libntbfab.so.0 "$ntbfab" up "$top/outer.yaml" --dir "$top/notsisci" \
		>"$top/notsisci.out" 2>&1 && fail "ntbfab up accepted libntbfab as a SISCI library"
	expect notsisci "libntbfab.so.0 has no _SISCI_PUBLIC_FUNC_MT_SCI.*: not a SISCI 5 library"
	"$ntbfab" down --dir "$top/notsisci" >/dev/null 2>&1
	# A mistake in NTBFAB_SISCI_ENV is named.
	NTBFAB_SISCI_ENV="NTBFAB_DIR=$inner NTBFAB_NODE=%n X=%x" "$ntbfab" up "$top/outer.yaml" \
		--dir "$top/badenv" >"$top/badenv.out" 2>&1 && fail "ntbfab up accepted %x"
	expect badenv "NTBFAB_SISCI_ENV: '%x' is not %n (the node's name), %i (its id) or %%"
	"$ntbfab" down --dir "$top/badenv" >/dev/null 2>&1
	# Dolphin's library serves one host: a whole cluster here needs %n.
	NTBFAB_SISCI_ENV="NTBFAB_DIR=$inner" "$ntbfab" up "$top/outer.yaml" --dir "$top/one" \
		>"$top/one.out" 2>&1 && fail "ntbfab up started a Dolphin cluster on one host without %n"
	expect one 'the dolphin backend runs one node per host'
	# The window's slots are a budget of the core: they come from SCIQuery. A library that
	# does not answer the ATT query (the shim withholds it) is refused, naming the query and
	# what to set; so is an answer the backend cannot use.
	shim=$build/tests/integration/libdolphin-sisci-shim.so
	[ -r "$shim" ] || fail "$shim was not built"
	sed "s/:$((base + 2))/:$((base + 4))/" "$top/outer.yaml" >"$top/noatt.yaml"
	NTBFAB_SISCI_LIB=$shim \
		NTBFAB_SISCI_ENV="$NTBFAB_SISCI_ENV NTBFAB_TEST_SISCI_UNANSWERED=ATT_NUMBER_OF_ENTRIES" \
		"$ntbfab" up "$top/noatt.yaml" --dir "$top/noatt" >"$top/noatt.out" 2>&1 &&
		fail "ntbfab up planned with a window SISCI did not give"
	expect noatt "the window's slots are the budget the core plans with, and the dolphin backend"
	expect noatt 'SCIQuery(SCI_Q_ADAPTER, SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES) failed'
	expect noatt 'add dolphin: {file_figures: true} to the adapter in the cluster file to plan with its window instead (256 slots)'
	grep -q 'NTBFAB_DOLPHIN_FILE_FIGURES' "$top/noatt.out" &&
		fail "the refusal names the environment, which did not decide: $(cat "$top/noatt.out")"
	"$ntbfab" down --dir "$top/noatt" >/dev/null 2>&1
	NTBFAB_SISCI_LIB=$shim NTBFAB_SISCI_ENV="$NTBFAB_SISCI_ENV NTBFAB_TEST_SISCI_ATT_ENTRIES=0" \
		"$ntbfab" up "$top/noatt.yaml" --dir "$top/att0" >"$top/att0.out" 2>&1 &&
		fail "ntbfab up planned with an ATT of 0 entries"
	expect att0 'SCIQuery gave an ATT of 0 entries of 4194304 bytes, which the backend cannot use'
	"$ntbfab" down --dir "$top/att0" >/dev/null 2>&1
	# The operator may plan with the file's window instead, saying so in the cluster file
	# (dolphin: {file_figures: true} on each adapter): then the file's 128 slots stand (where
	# SISCI's 256 refused them above), and each daemon's log says so.
	sed "s/slots: 256/slots: 128/; s/:$((base + 2))/:$((base + 5))/; s/^\( *\)model: dolphin-sisci/&\n\1dolphin: {file_figures: true}/" \
		"$top/outer.yaml" >"$top/filefig.yaml"
	[ "$(grep -c 'dolphin: {file_figures: true}' "$top/filefig.yaml")" = 2 ] ||
		fail "filefig.yaml does not give both adapters file_figures: $(cat "$top/filefig.yaml")"
	# The environment overrides the file (docs/dolphin.md): NTBFAB_DOLPHIN_FILE_FIGURES=0 refuses
	# the window the file allows, and says which of the two decided.
	sed "s/:$((base + 5))/:$((base + 6))/" "$top/filefig.yaml" >"$top/envoff.yaml"
	NTBFAB_DOLPHIN_FILE_FIGURES=0 NTBFAB_SISCI_LIB=$shim \
		NTBFAB_SISCI_ENV="$NTBFAB_SISCI_ENV NTBFAB_TEST_SISCI_UNANSWERED=ATT_NUMBER_OF_ENTRIES" \
		"$ntbfab" up "$top/envoff.yaml" --dir "$top/envoff" >"$top/envoff.out" 2>&1 &&
		fail "ntbfab up planned with the file's window under NTBFAB_DOLPHIN_FILE_FIGURES=0"
	expect envoff "(128 slots); NTBFAB_DOLPHIN_FILE_FIGURES=0 in the environment overrides the cluster file's dolphin: {file_figures}"
	"$ntbfab" down --dir "$top/envoff" >/dev/null 2>&1
	NTBFAB_SISCI_LIB=$shim \
		NTBFAB_SISCI_ENV="$NTBFAB_SISCI_ENV NTBFAB_TEST_SISCI_UNANSWERED=ATT_NUMBER_OF_ENTRIES" \
		"$ntbfab" up "$top/filefig.yaml" --dir "$top/filefig" >"$top/filefig.out" 2>&1 ||
		fail "ntbfab up with dolphin: {file_figures: true}: $(cat "$top/filefig.out")"
	expect filefig 'lender.ntb0 - borrower.ntb0  up'
	for n in lender borrower; do
		grep -q "ntbfab dolphin: WARNING: adapter $n.ntb0: SCIQuery(SCI_Q_ADAPTER, SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES) failed: .*; the core plans with the cluster file's window (128 slots), unchecked, because the cluster file says dolphin: {file_figures: true}" \
			"$top/filefig/log/$n.err" || fail "the daemon of $n did not say the file's window stands for SISCI's"
		grep -q "ntbfab dolphin: adapter $n.ntb0: figures ports 2 from SCIQuery, window: the cluster file's (128 slots)" \
			"$top/filefig/log/$n.err" || fail "the daemon of $n did not say which figures are the file's"
	done
	"$ntbfab" down --dir "$top/filefig" >/dev/null 2>&1 || fail "ntbfab down of the opt-in cluster failed"
	# Broadcast segments (multicast) are not the core's groups: a receiver's segment cannot
	# join its group, the program hears so, and every budget is as it was.
	"$ntbfab" status --dir "$outer" | sed -n '/^budgets:/,/^$/p' >"$top/budgets1.out"
	grep -q 'lender.ntb0    lut        0      256' "$top/budgets1.out" ||
		fail "ntbfab status shows no budgets: $(cat "$top/budgets1.out")"
	NTBFAB_DIR=$outer NTBFAB_NODE=borrower timeout 60 \
		"$build/frontends/sisci-compat/sisci-broadcast" -receiver >"$top/bcast.out" 2>&1 &&
		fail "a broadcast segment joined its group on the dolphin backend"
	expect bcast 'broadcast: SCISetSegmentAvailable failed: not supported on this fabric'
	"$ntbfab" status --dir "$outer" | sed -n '/^budgets:/,/^$/p' >"$top/budgets2.out"
	cmp -s "$top/budgets1.out" "$top/budgets2.out" ||
		fail "the refused broadcast segment changed the budgets: $(diff "$top/budgets1.out" "$top/budgets2.out")"
	# eXpressWare owns the links: no fault injection, said so, the cluster untouched.
	"$ntbfab" fault link-down lender.ntb0 --dir "$outer" >"$top/fault.out" 2>&1 &&
		fail "ntbfab fault link-down succeeded on the dolphin backend"
	expect fault "the 'dolphin' backend cannot inject faults (no fault op)"
	"$ntbfab" status --dir "$outer" >"$top/status2.out" 2>&1 || fail "ntbfab status failed"
	expect status2 'lender.ntb0 - borrower.ntb0  up'
	"$ntbfab" down --dir "$outer" >"$top/down.out" 2>&1 || fail "ntbfab down failed"
	expect down "cluster 'dolphin' is down"
	;;
device)
	up inner "$top/inner.yaml" "$inner"
	up outer "$top/outer.yaml" "$outer"
	"$ntbfab" borrow 0x4001 --node borrower --dir "$outer" >"$top/borrow.out" 2>&1 ||
		fail "ntbfab borrow: $(cat "$top/borrow.out")"
	expect borrow 'mapped by the fabric'
	"$build/tests/integration/dolphin_device" "$outer" 0x4001 borrow >"$top/borrower.out" 2>&1 ||
		fail "the borrower's use of the accelerator failed"
	expect borrower 'borrowed device 0x4001'
	expect borrower 'verified'
	"$ntbfab" return 0x4001 --node borrower --dir "$outer" >"$top/return.out" 2>&1 ||
		fail "ntbfab return: $(cat "$top/return.out")"
	"$build/tests/integration/dolphin_device" "$outer" 0x4001 local >"$top/lender.out" 2>&1 ||
		fail "the lender's use of the accelerator failed"
	expect lender 'local device 0x4001'
	cat "$top/borrower.out" "$top/lender.out"
	;;
nvme)
	up inner "$top/inner.yaml" "$inner"
	up outer "$top/outer.yaml" "$outer"
	nvme=$build/apps/nvme/ntbfab-nvme
	export NTBFAB_DIR="$outer"
	NTBFAB_NODE=lender timeout 120 "$nvme" manager --fdid 0x4000 >"$top/manager.out" 2>&1 &
	pids="$pids $!"
	for i in $(seq 1 300); do
		grep -q 'manager ready' "$top/manager.out" 2>/dev/null && break
		sleep 0.1
	done
	expect manager 'manager ready: lender.nvme0'
	run() { # NAME NODE ARGS...
		name=$1 node=$2
		shift 2
		NTBFAB_NODE=$node timeout 120 "$nvme" "$@" >"$top/$name.out" 2>&1 ||
			fail "ntbfab-nvme $* on $node: $(cat "$top/$name.out")"
	}
	run identify borrower identify --fdid 0x4000
	expect identify 'namespace 1  2097152 blocks of 512 bytes'
	run write borrower write --fdid 0x4000 --lba 0 --blocks 2048 --seed 7 --qd 8
	expect write 'CQ in this host'
	run verify borrower verify --fdid 0x4000 --lba 0 --blocks 2048 --seed 7 --qd 8
	run verify_lender lender verify --fdid 0x4000 --lba 0 --blocks 2048 --seed 7 --qd 4
	# The check can fail: the same blocks against another seed's pattern.
	NTBFAB_NODE=borrower timeout 120 "$nvme" verify --fdid 0x4000 --lba 0 --blocks 256 \
		--seed 8 >"$top/wrong.out" 2>&1 && fail "verify of another seed's pattern passed"
	expect wrong 'read data other than the pattern of seed 8'
	cat "$top/write.out" "$top/verify.out" "$top/verify_lender.out"
	;;
refuse)
	# dolphin-inner.yaml and dolphin.yaml (nodes a and b) on this test's ports; the library is
	# the shim in front of libsisci, counting each node's segments and connections.
	sed "s/:18501/:$((base + 1))/; s/:18502/:$((base + 2))/" \
		"$src/tests/conformance/dolphin-inner.yaml" >"$top/rinner.yaml"
	sed "s/:18503/:$((base + 3))/; s/:18504/:$((base + 4))/" \
		"$src/tests/conformance/dolphin.yaml" >"$top/router.yaml"
	up inner "$top/rinner.yaml" "$inner"
	NTBFAB_SISCI_LIB=$build/tests/integration/libdolphin-sisci-shim.so \
		NTBFAB_SISCI_ENV="$NTBFAB_SISCI_ENV NTBFAB_TEST_SISCI_COUNTS=$top/counts.%n" \
		"$build/tests/integration/dolphin_refuse" "$top/router.yaml" "$top/counts" \
		>"$top/refuse.out" 2>&1 || fail "dolphin_refuse: $(cat "$top/refuse.out")"
	cat "$top/refuse.out"
	expect refuse 'dolphin refusals: all as expected'
	;;
esac
echo "dolphin $mode: ok"
