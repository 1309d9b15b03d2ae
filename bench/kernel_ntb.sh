#!/bin/sh
# bench/kernel_ntb.sh BUILD_DIR [kerneltier.py options...]: the kernel tier's figures
# (docs/linux-ntb.md, "Figures"): two TCG guests joined by the emulated NTB; a process's
# memcpy into a peer window mapped through ntbfab_ntb, and libsisci's memcpy_bw through the
# linux-ntb backend (ntbfabd on both guests), next to ntb_perf's in-kernel copy into the same
# kind of window, in the same guests minutes apart; a doorbell round trip through the
# character device next to ntb_pingpong's without delay; and memcpy_bw on the ivshmem
# backend from the VM tier's last run, when there is one.
# Prints the figures and writes bench/results/kernel_ntb.json. Extra options go to
# kerneltier.py (--prog, --steps-file, --steps, --env: docs/linux-ntb.md, "Adding programs").
set -eu
build=${1:-build}
[ $# -gt 0 ] && shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out="$root/bench/results"
mkdir -p "$out"
raw="$build/bench/kernel_ntb-raw.json"
mkdir -p "$build/bench"
python3 "$root/tests/kernel/kerneltier.py" --src "$root" --build "$build" \
	--out "$build/bench/kernel_ntb" --server "$build/tests/kernel/ntbfab-ivshmem-server" \
	--test "$build/tests/kernel/ntbfab-ntbtest-static" --json "$raw" \
	--prog ntbfabd="$build/tests/vm/ntbfabd-static" --prog ntbfab="$build/tests/vm/ntbfab-static" \
	--prog sisci-pingpong="$build/tests/vm/sisci-pingpong-static" \
	--prog sisci-memcpy_bw="$build/tests/vm/sisci-memcpy_bw-static" \
	--prog sisci-dma="$build/tests/vm/sisci-dma-static" \
	--prog sisci-intlat="$build/tests/vm/sisci-intlat-static" \
	--prog ntbfab-nvmep2p="$build/tests/kernel/ntbfab-nvmep2p-static" \
	--steps ntbfab,lntb,pingpong,perf --env PP_DELAY_MS=0 --env PP_SECONDS=5 \
	--env PERF_TOTAL_ORDER=27 "$@"
python3 - "$raw" "$out/kernel_ntb.json" "$build/tests/vm/out/vm-results.json" <<'PY'
import json, os, sys
raw = json.load(open(sys.argv[1]))
fig = {k: v["value"] for k, v in raw["figures"].items()}
res = {"kernel": raw["kernel"], "accelerator": raw["accelerator"], "when": raw["when"],
       "figures": raw["figures"], "ratios": {}}
for side in (0, 1):
    w, p = fig.get(f"ntbfab_window_memcpy_MBps_side{side}"), fig.get(f"ntb_perf_MBps_side{side}")
    if w and p:
        res["ratios"][f"ntbfab_memcpy_vs_ntb_perf_side{side}"] = w / p
    s = fig.get("lntb_sisci_memcpy_remote_MBps")
    if s and p:
        res["ratios"][f"linux_ntb_sisci_memcpy_vs_ntb_perf_side{side}"] = s / p
for role in "ab":
    rate = fig.get(f"pingpong_per_s_{role}")
    if rate:
        res["figures"][f"pingpong_round_trip_us_{role}"] = {"value": 1e6 / rate, "unit": "us"}
db, pp = fig.get("ntbfab_db_rtt_median_us"), fig.get("pingpong_per_s_a")
if db and pp:
    res["ratios"]["ntbfab_db_rtt_vs_ntb_pingpong"] = db / (1e6 / pp)
# The ivshmem backend's memcpy_bw (the VM tier's last run: other guests, another time).
if os.path.exists(sys.argv[3]):
    vm = json.load(open(sys.argv[3]))["figures"].get("sisci_memcpy_remote_MBps")
    s = fig.get("lntb_sisci_memcpy_remote_MBps")
    if vm and s:
        res["figures"]["ivshmem_sisci_memcpy_remote_MBps_vm_tier"] = vm
        res["ratios"]["linux_ntb_vs_ivshmem_sisci_memcpy"] = s / vm["value"]
json.dump(res, open(sys.argv[2], "w"), indent=2)
print("\nkernel_ntb: two TCG guests, the emulated NTB (ntb_hw_ivshmem); software figures only")
for k in sorted(res["figures"]):
    if not k.endswith("_hash"):
        print(f"  {k:42} {res['figures'][k]['value']:12.2f} {res['figures'][k]['unit']}")
for k, v in sorted(res["ratios"].items()):
    print(f"  {k:42} {v:12.3f} x")
print(f"JSON: {sys.argv[2]}")
PY
