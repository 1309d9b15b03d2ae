#!/bin/sh
# bench/run.sh BUILD_DIR [NAME...]: run benchmarks, print their figures, write JSON to bench/results/.
# Figures are measurements on a shared machine: compare ratios measured side by side in one run.
set -eu
build=${1:-build}
shift || true
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out="$root/bench/results"
mkdir -p "$out"
BENCHES=${*:-}
run() { name=$1; shift; if [ -z "$BENCHES" ] || echo " $BENCHES " | grep -q " $name "; then echo "== $name"; "$@"; fi; }

gen="$build/bench/gen1024.yaml"
"$build/bench/genfabric" --nodes 1024 --switches 64 > "$gen"

run load "$build/bench/bench_load" --json "$out/load.json" \
	"$root/config/examples/cluster-60.yaml" "$gen"
run admit "$build/bench/bench_admit" --json "$out/admit.json" \
	"$root/config/examples/cluster-60.yaml" "$gen"
run borrow "$build/bench/bench_borrow" --json "$out/borrow.json" --build "$build" --src "$root"
if echo " $BENCHES " | grep -q " fm " || [ -z "$BENCHES" ]; then
	"$build/bench/genfabric" --nodes 1024 --switches 64 --lenders 128 > "$build/bench/gen1024l.yaml"
fi
run fm "$build/bench/bench_fm" --json "$out/fm.json" --allocs 1000 "$build/bench/gen1024l.yaml"
run sisci "$build/bench/bench_sisci" --json "$out/sisci.json" --build "$build"
# The distributed NVMe driver (when libsisci, and so ntbfab-nvme, is built).
if [ -x "$build/bench/bench_nvme_latency" ]; then
	run nvme_latency "$build/bench/bench_nvme_latency" --json "$out/nvme_latency.json" \
		--build "$build" --src "$root"
	run nvme_scale "$build/bench/bench_nvme_scale" --json "$out/nvme_scale.json" \
		--build "$build" --src "$root"
	run nvme_mcast "$build/bench/bench_nvme_mcast" --json "$out/nvme_mcast.json" \
		--build "$build" --src "$root"
fi
# The shadow device in a QEMU guest (docs/kernel.md, "Figures"): when the guest programs are built.
if [ -x "$build/tests/shadow/ntbfab-shadowtest-static" ]; then
	run shadow python3 "$root/tests/shadow/shadowtier.py" --src "$root" --build "$build" \
		--out "$build/tests/shadow/bench" --daemon "$build/tests/vm/ntbfabd-static" \
		--cli "$build/tests/vm/ntbfab-static" --test "$build/tests/shadow/ntbfab-shadowtest-static" \
		--bench "$out/shadow.json"
fi
for extra in "$build"/bench/bench_memcpy "$build"/bench/bench_nvme "$build"/bench/bench_dmamap; do
	name=$(basename "$extra" | sed 's/^bench_//')
	[ -x "$extra" ] && run "$name" "$extra" --json "$out/$name.json"
done
# Two QEMU guests joined by the emulated NTB (minutes): only when named,
# `sh bench/run.sh build kernel_ntb` (docs/linux-ntb.md, "Figures").
if echo " $BENCHES " | grep -q " kernel_ntb "; then
	echo "== kernel_ntb"
	sh "$here/kernel_ntb.sh" "$build"
fi
echo "JSON results in $out"
