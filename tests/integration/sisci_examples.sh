#!/bin/sh
# tests/integration/sisci_examples.sh BUILD SRC: libsisci's examples across simulated nodes, and
# programs built the way users build them (cc ... -lsisci with and without -D_REENTRANT; cc with
# pkg-config against a `meson install` of the headers and library).
set -u
build=$1
src=$2
ntbfab=${NTBFAB:-$build/tools/ntbfab}
ex=$build/frontends/sisci-compat
. "$src/tests/integration/sx_procs.sh"
sx_sim_cluster sxex "$src/tests/integration/sisci-examples.yaml"

echo "pingpong: an ST-built server on a, an MT-built client on b"
start pp_server a "$ex/sisci-pingpong-st" -rn 8 -server -loops 500
run pp_client b "$ex/sisci-pingpong" -rn 4 -loops 500
finish pp_server
expect pp_client "500 round trips of 4 bytes"
cat "$top/pp_client.out"

echo "memcpy_bw: a serves, b copies"
start bw_server a "$ex/sisci-memcpy_bw" -rn 8 -server -size 4194304
run bw_client b "$ex/sisci-memcpy_bw-st" -rn 4 -size 4194304 -rounds 5
finish bw_server
expect bw_client "ratio"
cat "$top/bw_client.out"

echo "dma: writes and reads by b into a's segment, 4 KiB to 4 MiB"
for mode in write read; do
	flag=""
	[ $mode = read ] && flag=-read
	start dma_server a "$ex/sisci-dma" -rn 8 -server -max 4194304
	run dma_client b "$ex/sisci-dma-st" -rn 4 -max 4194304 $flag
	finish dma_server
	expect dma_client "4194304"
done

echo "intlat: interrupts and data interrupts between a and c"
for mode in "" -data; do
	start il_server a "$ex/sisci-intlat-st" -rn 12 -server $mode -size 64 -loops 100
	run il_client c "$ex/sisci-intlat" -rn 4 $mode -size 64 -loops 100
	finish il_server
	expect il_client "round trips"
	cat "$top/il_client.out"
done

echo "broadcast: one write from a reaches b and c (by CPU, then by DMA)"
for mode in "" -dma; do
	start bc_b b "$ex/sisci-broadcast" -receiver -size 65536
	start bc_c c "$ex/sisci-broadcast-st" -receiver -size 65536
	for i in $(seq 1 200); do
		grep -q member "$top/bc_b.out" 2>/dev/null && grep -q member "$top/bc_c.out" 2>/dev/null && break
		sleep 0.05
	done
	run bc_a a "$ex/sisci-broadcast" -sender -size 65536 $mode
	finish bc_b
	finish bc_c
	expect bc_b "node 8: received 65536 bytes"
	expect bc_c "node 12: received 65536 bytes"
done

echo "nvme_identify: the drive of c, borrowed by b and used by c itself, with and without hints"
for node in b c; do
	for mode in "" -hints; do
		run nvme_$node "$node" "$ex/sisci-nvme_identify" $mode
		expect nvme_$node "model: ntbfab simulated NVMe"
		expect nvme_$node "serial: NTBF"
	done
done
cat "$top/nvme_b.out"

echo "a program built with cc, with and without -D_REENTRANT"
# A sanitizer build's library needs its runtime first: programs built here get it too.
san=""
readelf -d "$ex/libsisci.so" | grep -q 'libasan' && san="-fsanitize=address,undefined"
inc="-I$src/frontends/sisci-compat/include -I$src/frontends/sisci-compat/include/dis"
lib="-L$ex -lsisci -Wl,-rpath,$ex -Wl,-rpath-link,$build"
cc $san -D_REENTRANT $inc "$src/frontends/sisci-compat/examples/pingpong.c" $lib -o "$top/pp-mt" ||
	fail "cc -D_REENTRANT"
cc $san $inc "$src/frontends/sisci-compat/examples/pingpong.c" $lib -o "$top/pp-st" || fail "cc"
nm -u "$top/pp-mt" | grep -q _SISCI_PUBLIC_FUNC_MT_SCIConnectSegment || fail "MT names"
nm -u "$top/pp-st" | grep -q _SISCI_PUBLIC_FUNC_ST_SCIConnectSegment || fail "ST names"
if nm -u "$top/pp-st" | grep -q _SISCI_PUBLIC_FUNC_MT_; then fail "ST build uses MT names"; fi
start cc_server c "$top/pp-st" -rn 8 -server -loops 100
run cc_client b "$top/pp-mt" -rn 12 -loops 100
finish cc_server
expect cc_client "100 round trips"

echo "meson install, then cc with pkg-config"
inst=$top/destdir
DESTDIR=$inst meson install -C "$build" --quiet >"$top/install.out" 2>&1 || fail "meson install"
pcdir=$(dirname "$(find "$inst" -name sisci.pc | head -1)")
[ -f "$pcdir/sisci.pc" ] || fail "no sisci.pc installed"
for h in sisci/sisci_api.h sisci/sisci_types.h sisci/sisci_error.h sisci/dis_types.h sisci/dis/dis_types.h; do
	find "$inst" -path "*/include/$h" | grep -q . || fail "$h not installed"
done
flags=$(PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$inst pkg-config --cflags --libs sisci) ||
	fail "pkg-config sisci"
libdir=$(dirname "$(find "$inst" -name 'libsisci.so.0' | head -1)")
cc $san -D_REENTRANT "$src/frontends/sisci-compat/examples/intlat.c" $flags -Wl,-rpath,"$libdir" \
	-Wl,-rpath-link,"$libdir" -o "$top/il-pc" || fail "cc with pkg-config ($flags)"
readelf -d "$top/il-pc" | grep -q 'libsisci.so.0' || fail "not linked against libsisci.so.0"
# The installed libraries alone (not the build tree's, which meson's LD_LIBRARY_PATH names).
LD_LIBRARY_PATH=$libdir start pc_server a "$top/il-pc" -rn 8 -server -loops 20
run pc_client b "$ex/sisci-intlat-st" -rn 4 -loops 20
finish pc_server
expect pc_client "round trips"
echo "all examples ran"
