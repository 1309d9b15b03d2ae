#!/bin/sh
# tools/run-demo.sh BUILD_DIR: what `make run` shows: the quickstart cluster up, a device borrowed and used, one NVMe shared, down.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
cd "$root"
ntbfab="$build/tools/ntbfab"
cfg=config/examples/quickstart.yaml
dir=$(mktemp -d /dev/shm/ntbfab-run-XXXXXX)
export NTBFAB_DAEMON="$build/daemon/ntbfabd" NTBFAB_SIMD="$build/ntbfab-simd" NTBFAB_DIR="$dir"
step() { printf '\n\033[1m$ ntbfab %s\033[0m\n' "$*"; "$ntbfab" "$@"; }
cleanup() { "$ntbfab" down >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
echo "ntbfab quickstart: the cluster of $cfg, in $dir"
step validate "$cfg"
step path "$cfg" borrower lender.acc0
step up "$cfg"
step devices
step borrow lender.acc0 --node borrower --dma-window 64MiB
step lspci --node borrower
printf '\n\033[1m$ ntbfab-demo --fdid 0x4001\033[0m\n'
"$build/tools/ntbfab-demo" --dir "$dir" --fdid 0x4001 --borrower borrower
step devices
step status

# The distributed NVMe driver (docs/nvme.md): a manager on the lender owns the admin queues;
# a client on the borrower gets its own queue pair and reads with no other software in the way.
nvme="$build/apps/nvme/ntbfab-nvme"
if [ -x "$nvme" ]; then
	printf '\n\033[1m$ NTBFAB_NODE=lender ntbfab-nvme manager --fdid 0x4000 &\033[0m\n'
	NTBFAB_NODE=lender "$nvme" manager --fdid 0x4000 > "$dir/manager.out" 2>&1 &
	mgr=$!
	trap 'kill $mgr 2>/dev/null; cleanup' EXIT INT TERM
	for _ in $(seq 200); do grep -q "manager ready" "$dir/manager.out" && break; sleep 0.1; done
	cat "$dir/manager.out"
	printf '\n\033[1m$ NTBFAB_NODE=borrower ntbfab-nvme identify --fdid 0x4000\033[0m\n'
	NTBFAB_NODE=borrower "$nvme" identify --fdid 0x4000
	printf '\n\033[1m$ ntbfab-nvme bench --rw randread --bs 4KiB --qd 1 --time 2s, on the lender and on the borrower\033[0m\n'
	for n in lender borrower; do
		NTBFAB_NODE=$n "$nvme" bench --fdid 0x4000 --rw randread --bs 4KiB --qd 1 --time 2s \
			> "$dir/bench-$n.out" 2>&1 || { cat "$dir/bench-$n.out"; exit 1; }
	done
	# The fabric's share: the modeled one-way latency from each CPU to the drive.
	model() { "$ntbfab" path "$cfg" "$1" lender.nvme0 | sed -n 's/.*modeled latency: \([0-9]*\) ns.*/\1/p'; }
	printf '  %-9s %-7s %10s %10s %10s %10s %14s\n' node driver median mean p99 IOPS "modeled hops"
	for n in lender borrower; do
		where=remote; [ $n = lender ] && where=local
		awk -v n=$n -v w=$where -v m="$(model $n)" '
			/latency ns/ { for (i = 1; i <= NF; i++) { if ($i == "p50") p50 = $(i+1); if ($i == "mean") mean = $(i+1); if ($i == "p99") p99 = $(i+1) } }
			/ IOPS/ { for (i = 1; i <= NF; i++) if ($i == "IOPS,") iops = $(i-1) }
			END { printf "  %-9s %-7s %7s ns %7s ns %7s ns %10s %11s ns\n", n, w, p50, mean, p99, iops, m }
		' "$dir/bench-$n.out"
	done
	echo "  (4 KiB random reads at queue depth 1; the simulated fabric maps remote memory directly,"
	echo "   so local and remote measure alike; the modeled column is what the NTB path adds on hardware)"
	kill "$mgr"; wait "$mgr" 2>/dev/null || true
	trap cleanup EXIT INT TERM
fi
step down
trap - EXIT INT TERM
rm -rf "$dir"
