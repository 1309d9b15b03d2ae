#!/bin/sh
# tests/integration/sisci_ivshmem.sh BUILD SRC: libsisci's examples on the ivshmem backend, on
# this host: two ntbfabd (nodes a and b, sisci-ivshmem.yaml) whose adapters share one plain
# file as the ivshmem region. What the VM tier runs between two guests (docs/vm.md), without
# QEMU: segments in the adapters' memory for export, same-node connections through host_map,
# interrupts as watched words (within a node: irq_trigger), and the refusal of a segment larger
# than that memory.
set -u
build=$1
src=$2
daemon=${NTBFAB_DAEMON:-$build/daemon/ntbfabd}
ex=$build/frontends/sisci-compat
top=$(mktemp -d /dev/shm/ntbfab-sxivs-XXXXXX)
dir=$top/inst
pids=""

cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	[ -n "${NTBFAB_KEEP:-}" ] || rm -rf "$top"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	for f in "$top"/*.out "$dir"/log/*.log; do [ -f "$f" ] && { echo "== $f" >&2; cat "$f" >&2; }; done
	exit 1
}

mkdir -p "$dir"
cp "$src/tests/integration/sisci-ivshmem.yaml" "$dir/cluster.yaml"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/cluster.key"
echo >>"$dir/cluster.key"
chmod 600 "$dir/cluster.key"
truncate -s 16M "$top/region"
export NTBFAB_IVSHMEM_FILE="$top/region" NTBFAB_DIR="$dir"
for n in a b; do
	"$daemon" --config "$dir/cluster.yaml" --node $n --dir "$dir" --quiet &
	pids="$pids $!"
	eval "daemon_$n=$!"
done
for i in $(seq 1 200); do
	grep -q "joined the fabric manager" "$dir/log/b.log" 2>/dev/null && break
	sleep 0.05
done
grep -q "joined the fabric manager" "$dir/log/b.log" 2>/dev/null || fail "b never joined a's fabric manager"

. "$src/tests/integration/sx_procs.sh"

echo "pingpong between a and b, and between two processes of a (host_map)"
start pp_server a "$ex/sisci-pingpong" -rn 8 -server -loops 300
run pp_client b "$ex/sisci-pingpong" -rn 4 -loops 300
finish pp_server
expect pp_client "300 round trips of 4 bytes"
cat "$top/pp_client.out"
start pl_server a "$ex/sisci-pingpong" -rn 4 -server -loops 300
run pl_client a "$ex/sisci-pingpong" -rn 4 -loops 300
finish pl_server
expect pl_client "node 4 <-> node 4: 300 round trips of 4 bytes"

echo "memcpy_bw: b copies into a's segment (memcmp of what arrived)"
start bw_server a "$ex/sisci-memcpy_bw" -rn 8 -server -size 1048576
run bw_client b "$ex/sisci-memcpy_bw" -rn 4 -size 1048576 -rounds 3
finish bw_server
expect bw_client "ratio"
cat "$top/bw_client.out"

echo "dma (the library's CPU copy): writes and reads by b into a's segment"
for mode in write read; do
	flag=""
	[ $mode = read ] && flag=-read
	start dma_server a "$ex/sisci-dma" -rn 8 -server -max 1048576
	run dma_client b "$ex/sisci-dma" -rn 4 -max 1048576 $flag
	finish dma_server
	expect dma_client "1048576"
done

echo "intlat: interrupts and data interrupts (watched words of exported memory), from b and from"
echo "a second process of a (a local trigger: the backend's irq_trigger)"
for from in "b 8" "a 4"; do
	set -- $from
	for mode in "" -data; do
		start il_server a "$ex/sisci-intlat" -rn $2 -server $mode -size 64 -loops 50
		run il_client $1 "$ex/sisci-intlat" -rn 4 $mode -size 64 -loops 50
		finish il_server
		expect il_client "round trips with node 4: 50 of them"
		cat "$top/il_client.out"
	done
done

echo "a segment larger than the adapter's memory for export is refused"
NTBFAB_NODE=a timeout 30 "$ex/sisci-memcpy_bw" -rn 8 -server -size 8388608 >"$top/big.out" 2>&1
rc=$?
[ $rc = 1 ] || fail "an 8 MiB segment (the whole half of the region) exited $rc"
expect big "SCICreateSegment failed: out of resources"

kill -TERM $daemon_a $daemon_b
wait $daemon_a $daemon_b
echo "all examples ran on the ivshmem backend"
