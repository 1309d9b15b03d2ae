#!/usr/bin/env python3
"""tests/shadow/shadowtier.py: the kernel tier's shadow-device test (docs/kernel.md).

One QEMU guest with Intel's vIOMMU, QEMU's NVMe, an ivshmem window onto the guest's own RAM
file and a small ivshmem region for the fabric's two adapters. In it, two ntbfabd daemons
(nodes lender and borrower of tests/shadow/loopback.yaml): the lender lends the NVMe through
vfio-pci, the borrower borrows it with --attach, and Debian's unchanged nvme driver binds to
the shadow device that ntbfab_shadow.ko hot-adds. tests/shadow/init.sh is the guest's /init.

The harness (tests/guestkit.py, shared with the VM and kernel NTB tiers): Debian's kernel image
(its modules and PVH vmlinux) and its headers and kbuild are downloaded once into the cache;
ntbfab_shadow.ko is built against them with kernel/'s own Kbuild (from a copy, so the source
tree stays clean); mke2fs and its libraries come from the host's e2fsprogs (Debian's package:
busybox has no mkfs.ext4).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import guestkit as gk  # noqa: E402  (tests/guestkit.py: what the QEMU tiers share)
from guestkit import fail, say  # noqa: E402

# The Debian modules the guest loads (dependencies are added from each .ko's depends=).
MODULES = ["crct10dif_generic", "crc64_rocksoft_generic", "crc32c_generic", "vfio_iommu_type1",
           "vfio-pci", "nvme", "ext4", "nvmet_tcp", "nvme_tcp"]
EXPECTED = ["uapi-refusals", "attach", "nvme-binds-shadow", "budgets-taken", "bar0-real-address",
            "refuses-other-way", "cfg-daemon-stopped",
            "peer-refused", "mkfs-ext4", "files-64mib", "dma-through-window",
            "daemon-death-removes", "restart-reattaches", "peers-both-ways", "peer-dma-map",
            "peer-detach-releases", "detach", "peer-later-whole", "orphan-returned",
            "lender-death-removes",
            "host-map-sysfs"]
RAM = 512 << 20        # the guest's RAM, and the window onto it (a power of two, as BARs are)
CONTROL = 64 << 20     # the ivshmem region of the two adapters (32 MiB windows)
NVME_IMAGE = 256 << 20
NVME2_IMAGE = 16 << 20   # the second NVMe: the peer-to-peer target (slot 0x10)
# The borrower's own device (slot 0x11, init.sh's mem0): an ivshmem-plain on a file of MEM
# bytes. Its BAR2 is too big for the lender's window beside a 16 MiB DMA window (the refused
# peer mapping), and the harness writes random chunks at MEM_OFFS into the file, which the
# guest reads through the backends' BAR host_map (shadowtest barmap; the second offset is
# not page-aligned and its chunk crosses pages); the guest writes the first chunk's
# complement at MEM / 2, which the harness finds in the file after the guest powered off.
MEM = 16 << 20
MEM_CHUNK = 8192
MEM_OFFS = [0, 0x5123, MEM - MEM_CHUNK]
GUEST_TIMEOUT = 300


def host_program(path):
    """A dynamically linked program of the host and what it loads: (files, loader)."""
    r = subprocess.run(["ldd", path], capture_output=True, text=True)
    libs = re.findall(r"=> (/\S+)", r.stdout)
    loader = re.findall(r"^\s*(/\S*ld-linux\S*)", r.stdout, re.M)
    if r.returncode != 0 or not loader:
        fail(f"cannot list what {path} loads (ldd): {r.stderr.strip()}")
    return libs, loader[0]


def initramfs(out, src, busybox, progs, mods, extra=(), mem_ref=b""):
    """tests/shadow/init.sh as /init, the guest programs, Debian's modules and ntbfab_shadow.ko
    (mods, loaded in order), extra modules the guest loads itself (the bench's), mke2fs, and
    the chunks the harness writes into mem0's file (mem_ref) with their offsets."""
    # mkfs.ext4: Debian's e2fsprogs (the host's), with its libraries and loader.
    mke2fs = shutil.which("mke2fs") or "/sbin/mke2fs"
    libs, loader = host_program(mke2fs)
    files = {"/sbin/mke2fs": mke2fs}
    files.update({f: f for f in libs + [loader]})
    files["/etc/ntbfab/loopback.yaml"] = os.path.join(src, "tests", "shadow", "loopback.yaml")
    files["/etc/ntbfab/cluster.key"] = ((os.urandom(32).hex() + "\n").encode(), 0o600)
    files["/etc/ntbfab/mem0.ref"] = (mem_ref, 0o644)
    files["/etc/ntbfab/mem0.offs"] = ((" ".join(hex(o) for o in MEM_OFFS) + "\n").encode(), 0o644)
    return gk.initramfs(out, busybox, os.path.join(src, "tests", "shadow", "init.sh"),
                        progs=progs, files=files, mods=mods, extra_ko=extra)


def qemu_cmd(accel, kern, initrd, log, mode=None, ram=None, control=None, disk=None, mem=None):
    """The guest: its RAM is a shared file, and an ivshmem-plain device on the same file is
    the window through which the device's DMA leaves and comes back (docs/kernel.md). The
    accelerator probe (mode "probe") has none of the devices."""
    cmd = ["qemu-system-x86_64", "-accel", accel, "-cpu", gk.cpu_for(accel),
           "-m", f"{RAM >> 20}M", "-smp", "2", "-nodefaults", "-no-reboot", "-display", "none",
           "-monitor", "none", "-serial", f"file:{log}"]
    if ram:
        cmd += ["-machine", "q35,kernel-irqchip=split,memory-backend=ram",
                "-device", "intel-iommu,intremap=on,caching-mode=on",
                "-object", f"memory-backend-file,id=ram,share=on,mem-path={ram},size={RAM}",
                "-object", f"memory-backend-file,id=win,share=on,mem-path={ram},size={RAM}",
                "-device", "ivshmem-plain,memdev=win",
                "-object",
                f"memory-backend-file,id=ctl,share=on,mem-path={control},size={CONTROL}",
                "-device", "ivshmem-plain,memdev=ctl",
                "-drive", f"file={disk},if=none,id=nvm,format=raw",
                "-device", "nvme,serial=shadow01,drive=nvm",
                "-drive", f"file={disk}2,if=none,id=nvm2,format=raw",
                "-device", "nvme,serial=shadow02,drive=nvm2,addr=0x10",
                "-object", f"memory-backend-file,id=mem0,share=on,mem-path={mem},size={MEM}",
                "-device", "ivshmem-plain,memdev=mem0,addr=0x11"]
    else:
        cmd += ["-machine", "q35"]
    # no_timer_check: as the VM tier (a loaded host can fail the early timer check).
    # The bench: strict IOMMU invalidation for every device, as the shadow device's unmap is,
    # so the two DMA map paths compare like for like.
    cmd += ["-kernel", kern, "-initrd", initrd,
            "-append", "console=ttyS0 intel_iommu=on no_timer_check panic=-1 quiet loglevel=4"
            + (" iommu.strict=1" if mode == "bench" else "")
            + (f" shadowtier.mode={mode}" if mode else "")]
    return cmd


def boot(out, accel, kern, initrd, mem_ref, bench=False):
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else out
    ramdir = tempfile.mkdtemp(prefix="shadowtier-", dir=shm)
    try:
        ram = os.path.join(ramdir, "ram")
        control = os.path.join(out, "control.bin")
        disk = os.path.join(out, "nvme.img")
        mem = os.path.join(out, "mem0.bin")
        for path, size in [(ram, RAM), (control, CONTROL), (disk, NVME_IMAGE),
                           (disk + "2", NVME2_IMAGE), (mem, MEM)]:
            with open(path, "wb") as f:
                f.truncate(size)
        with open(mem, "r+b") as f:
            for i, off in enumerate(MEM_OFFS):
                f.seek(off)
                f.write(mem_ref[i * MEM_CHUNK:(i + 1) * MEM_CHUNK])
        log = os.path.join(out, "guest.log")
        cmd = qemu_cmd(accel, kern, initrd, log, "bench" if bench else None, ram, control, disk,
                       mem)
        wall, errs = gk.boot({"guest": (cmd, log)}, GUEST_TIMEOUT)
    finally:
        shutil.rmtree(ramdir, ignore_errors=True)
    return log, wall["guest"], errs["guest"], mem


def mem_written(mem, mem_ref):
    """The host's view of what the guest wrote through the BAR host_map (shadowtest barmap):
    the first chunk's complement at the middle of mem0's file. A row for gk.check's list."""
    want = bytes(b ^ 0xff for b in mem_ref[:MEM_CHUNK])
    with open(mem, "rb") as f:
        f.seek(MEM // 2)
        got = f.read(MEM_CHUNK)
    same = sum(a == b for a, b in zip(got, want))
    if got == want:
        return ("host", "host-map-write-arrives", True,
                f"the {MEM_CHUNK} bytes the guest stored through the mapping of mem0's BAR2 are "
                f"in its file at 0x{MEM // 2:x}")
    return ("host", "host-map-write-arrives", False,
            f"{same} of {MEM_CHUNK} bytes at 0x{MEM // 2:x} of {mem} are what the guest stored")


def figures_out(path, log, accel, kver, wall, err):
    """The bench's figures, side by side, and their ratios (docs/kernel.md, "Figures")."""
    results, figures, text = gk.parse(log)
    bad = [n for n, (ok, _) in results.items() if not ok]
    need = [f"{w}_{m}" for w in ("shadow", "direct", "nvmf_tcp")
            for m in ("read4k_qd1_median_us", "read128k_mb_s")] + ["dmamap_shadow_ns",
                                                                   "dmamap_plain_iommu_ns"]
    missing = [n for n in need if n not in figures]
    if bad or missing or "SHADOWTIER DONE" not in text:
        print("\n".join(text.splitlines()[-60:]))
        print(err[-2000:])
        fail(f"the bench guest did not report {', '.join(bad + missing) or 'its end'}")
    f = {k: v for k, (v, _) in figures.items()}
    ratios = {
        "shadow_over_direct_read4k_qd1_latency": f["shadow_read4k_qd1_median_us"]
        / f["direct_read4k_qd1_median_us"],
        "shadow_over_direct_read128k_throughput": f["shadow_read128k_mb_s"]
        / f["direct_read128k_mb_s"],
        "dmamap_shadow_over_plain_iommu": f["dmamap_shadow_ns"] / f["dmamap_plain_iommu_ns"],
        "nvmf_tcp_over_shadow_read4k_qd1_latency": f["nvmf_tcp_read4k_qd1_median_us"]
        / f["shadow_read4k_qd1_median_us"],
        "nvmf_tcp_over_shadow_read128k_throughput": f["nvmf_tcp_read128k_mb_s"]
        / f["shadow_read128k_mb_s"],
    }
    print(f"shadow device bench (one guest, {accel}, {kver}; QEMU's NVMe):")
    print(f"  {'':22} {'4 KiB QD1 p50':>14} {'p99':>10} {'128 KiB':>12}")
    for w, label in [("direct", "nvme on the device"), ("shadow", "nvme on the shadow"),
                     ("nvmf_tcp", "nvme-tcp to nvmet")]:
        print(f"  {label:22} {f[w + '_read4k_qd1_median_us']:>11.1f} us "
              f"{f[w + '_read4k_qd1_p99_us']:>7.1f} us {f[w + '_read128k_mb_s']:>7.1f} MB/s")
    print(f"  DMA map+unmap: shadow {f['dmamap_shadow_ns']:.0f} ns, dma-iommu "
          f"{f['dmamap_plain_iommu_ns']:.0f} ns")
    for k, v in ratios.items():
        print(f"  {k}: {v:.2f}")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as out:
        json.dump({"bench": "shadow", "accelerator": accel, "kernel": kver,
                   "guest_wall_s": round(wall, 1),
                   "figures": {k: {"value": v, "unit": u} for k, (v, u) in figures.items()},
                   "ratios": {k: round(v, 3) for k, v in ratios.items()}}, out, indent=1)
    print(f"shadowtier: figures in {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    gk.common_args(ap)
    ap.add_argument("--daemon")
    ap.add_argument("--cli")
    ap.add_argument("--test")
    ap.add_argument("--missing")
    ap.add_argument("--bench", metavar="JSON",
                    help="the figures instead of the tests (bench/run.sh): write them to JSON")
    args = ap.parse_args()
    gk.setup("shadowtier")
    if args.missing:
        fail(f"the guest programs cannot be linked statically: missing {args.missing}")
    t0 = time.monotonic()
    busybox = gk.ensure_tools(need_dgram=False)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    cache = gk.cache_dir(args.cache or os.path.join(args.build, "vm-cache"))
    kver, kern, mods, image_deb = gk.kernel(cache, MODULES)
    kdir = gk.kernel_headers(cache, kver, image_deb)
    # kernel/test/ntbfab_p2p_probe.ko: dma_map_resource() of a shadow device on request
    ko, probe = gk.build_modules(kdir, os.path.join(args.src, "kernel"),
                                 os.path.join(out, "kbuild"),
                                 ["ntbfab_shadow", "test/ntbfab_p2p_probe"],
                                 kbuild_lines="obj-m += test/ntbfab_p2p_probe.o\n")
    ko = [ko]
    extra = gk.build_modules(kdir, os.path.join(args.src, "bench", "kernel"),
                             os.path.join(out, "kbuild-bench"), ["ntbfab_mapbench"]) \
        if args.bench else [probe]
    mem_ref = os.urandom(MEM_CHUNK * len(MEM_OFFS))
    initrd = initramfs(out, args.src, busybox,
                       {"ntbfabd": args.daemon, "ntbfab": args.cli, "shadowtest": args.test},
                       mods + ko, extra, mem_ref)
    probe_log = os.path.join(out, "probe-kvm.log")
    accel, why = gk.accelerator(qemu_cmd("kvm", kern, initrd, probe_log, "probe"), probe_log,
                                "SHADOWTIER_ACCEL")
    say(f"kernel {kver}, ntbfab_shadow.ko built, accelerator {accel} ({why})")
    log, wall, err, mem = boot(out, accel, kern, initrd, mem_ref, bool(args.bench))
    if args.bench:
        return figures_out(args.bench, log, accel, kver, wall, err)
    rows, figures, failed = gk.check({"guest": EXPECTED}, {"guest": log}, "SHADOWTIER DONE")
    rows.append(mem_written(mem, mem_ref))
    if not rows[-1][2]:
        failed = sorted(set(failed + ["guest"]))
    gk.print_rows("Shadow device results (one guest, loopback lending)", rows)
    figures["guest_wall_s"] = (round(wall, 1), "s")
    figures["tier_wall_s"] = (round(time.monotonic() - t0, 1), "s")
    for name, (v, unit) in sorted(figures.items()):
        print(f"  FIGURE {name} {v} {unit}")
    summary = {"accelerator": accel, "kernel": kver,
               "results": [{"guest": r, "name": n, "ok": o, "detail": d} for r, n, o, d in rows],
               "figures": {k: {"value": v, "unit": u} for k, (v, u) in figures.items()},
               "when": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    gk.finish(os.path.join(out, "shadow-results.json"), summary, rows, failed,
              {"guest": log}, {"guest": err})
    print(f"shadow: {len(rows)} passed, 0 failed")

if __name__ == "__main__":
    main()
