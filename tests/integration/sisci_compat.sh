#!/bin/sh
# tests/integration/sisci_compat.sh BUILD SRC: the SISCI compatibility suite. Programs written
# the way public SISCI programs use Dolphin's library (tests/integration/sisci_compat), each
# built with -D_REENTRANT (the MT names) and without (the ST names), run across the nodes of
# sisci-compat.yaml; then libsisci installed into a prefix and a program linked against it
# exactly as a Dolphin SDK user links (-L$P/lib64 -lsisci -Wl,-rpath,$P/lib64, nothing else).
set -u
build=$1
src=$2
ntbfab=${NTBFAB:-$build/tools/ntbfab}
bin=$build/tests/integration
. "$src/tests/integration/sx_procs.sh"
sx_sim_cluster sxc "$src/tests/integration/sisci-compat.yaml"

# Node ids: a 4, b 8, c 12 (c lends the NVMe drive).
for v in mt st; do
	echo "== built with the $v names"
	x() { echo "$bin/sxc-$1-$v"; }

	echo "names: the node list is an array, DIS_MAX_NSCIS, the flush flag, SetSciMemCopyFunction"
	run names a "$(x names)" c 12
	expect names "c is node 12"

	echo "remove: a connected segment is removed, its connector is told"
	start rm_server a "$(x remove)" -server
	run rm_client b "$(x remove)" -client 4
	finish rm_server
	expect rm_client "SCI_CB_DISCONNECT"

	echo "rm: reflective memory with a barrier across three nodes"
	start rm1 b "$(x rm)" -rank 1 -nodes 3
	start rm2 c "$(x rm)" -rank 2 -nodes 3
	run rm0 a "$(x rm)" -rank 0 -nodes 3
	finish rm1
	finish rm2
	for r in rm0 rm1 rm2; do expect $r "passed the barrier"; expect $r "50 rounds"; done

	echo "dmavec: 8 to 256 elements on a 4-entry queue"
	start dv_server a "$(x dmavec)" -server
	run dv_client b "$(x dmavec)" -client 4
	finish dv_server
	expect dv_client "vector of 256 elements on a 4-entry queue: done"
	expect dv_client "from process memory: done"

	echo "dintfull: a full receiver queue refuses at once"
	start di_recv a "$(x dintfull)" -recv
	run di_send b "$(x dintfull)" -send 4
	finish di_recv
	expect di_send "refused at once"
	expect di_recv "received 9 messages"

	echo "smartio: the zeroed filter, hint placement, the older generation"
	run smartio b "$(x smartio)"
	expect smartio "placed by 9 hint combinations"

	echo "fork: children of a busy SISCI process each get a library of their own"
	run fork a "$(x fork)" 40
	expect fork "40 children, each with a library of its own"

	echo "rpc: a borrower serves RPCs over the device's shared segment"
	start rpc_server b "$(x rpc)" -server 3
	for i in $(seq 1 200); do
		grep -q serving "$top/rpc_server.out" 2>/dev/null && break
		sleep 0.05
	done
	run rpc_client a "$(x rpc)" -client
	finish rpc_server
	expect rpc_client "3 requests answered by node 8"
done

echo "== installed into a prefix, linked as a Dolphin SDK user links"
P=$top/prefix
DESTDIR=$top/destdir meson install -C "$build" --quiet >"$top/install.out" 2>&1 ||
	fail "meson install"
lib=$(find "$top/destdir" -name libsisci.so.0 | head -1)
api=$(find "$top/destdir" -name sisci_api.h | head -1)
[ -n "$lib" ] && [ -n "$api" ] || fail "libsisci or sisci_api.h not installed"
mkdir -p "$P/lib64" "$P/include"
cp -a "$(dirname "$lib")"/libsisci.so* "$P/lib64/"
cp -a "$(dirname "$api")"/* "$P/include/"
[ -f "$P/include/dis/dis_types.h" ] || fail "no dis/dis_types.h"
readelf -d "$P/lib64/libsisci.so.0" | grep -q 'libntbfab' && fail "libsisci needs libntbfab"
san=""
readelf -d "$P/lib64/libsisci.so.0" | grep -q 'libasan' && san="-fsanitize=address,undefined"
# Only the prefix from here on: no build tree on the library path (meson's test environment
# names it).
unset LD_LIBRARY_PATH
for mode in "-D_REENTRANT" ""; do
	cc $san $mode -I"$P/include" -I"$P/include/dis" "$src/tests/integration/sisci_compat/names.c" \
		-L"$P/lib64" -lsisci -Wl,-rpath,"$P/lib64" -o "$top/names-sdk" >"$top/cc.out" 2>&1 ||
		fail "cc $mode ... -L$P/lib64 -lsisci: $(cat "$top/cc.out")"
	run names_sdk a "$top/names-sdk" b 8
	expect names_sdk "b is node 8"
	ldd "$top/names-sdk" | grep -q "$P/lib64/libsisci.so.0" || fail "not run against the prefix"
done
echo "the compatibility suite passed"
