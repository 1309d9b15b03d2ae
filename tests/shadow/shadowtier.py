#!/usr/bin/env python3
"""tests/shadow/shadowtier.py: the kernel tier's shadow-device test (docs/kernel.md).

One QEMU guest with Intel's vIOMMU, QEMU's NVMe, an ivshmem window onto the guest's own RAM
file and a small ivshmem region for the fabric's two adapters. In it, two ntbfabd daemons
(nodes lender and borrower of tests/shadow/loopback.yaml): the lender lends the NVMe through
vfio-pci, the borrower borrows it with --attach, and Debian's unchanged nvme driver binds to
the shadow device that ntbfab_shadow.ko hot-adds. tests/shadow/init.sh is the guest's /init.

The harness: Debian's kernel image (its modules and PVH vmlinux) and its headers and kbuild
are downloaded once into the cache; ntbfab_shadow.ko is built against them from kernel/
(a copy, so the source tree stays clean); mke2fs and its libraries come from the host's
e2fsprogs (Debian's package: busybox has no mkfs.ext4).
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vm"))
import vmtier  # noqa: E402  (the VM tier's kernel download, tools and result parsing)

# The Debian modules the guest loads (dependencies are added from each .ko's depends=).
MODULES = ["crct10dif_generic", "crc64_rocksoft_generic", "crc32c_generic", "vfio_iommu_type1",
           "vfio-pci", "nvme", "ext4", "nvmet_tcp", "nvme_tcp"]
EXPECTED = ["uapi-refusals", "attach", "nvme-binds-shadow", "budgets-taken", "refuses-other-way", "mkfs-ext4",
            "files-64mib", "dma-through-window", "daemon-death-removes", "restart-reattaches",
            "detach", "lender-death-removes"]
RAM = 512 << 20        # the guest's RAM, and the window onto it (a power of two, as BARs are)
CONTROL = 64 << 20     # the ivshmem region of the two adapters (32 MiB windows)
NVME_IMAGE = 256 << 20
GUEST_TIMEOUT = 300


def say(msg):
    print(f"shadowtier: {msg}", flush=True)


def fail(msg):
    print(f"shadowtier: FAIL: {msg}", flush=True)
    sys.exit(1)


def headers(cache, kver):
    """Debian's linux-headers of the guest kernel (with its -common headers and linux-kbuild),
    unpacked once; returns the directory to build modules against."""
    root = os.path.join(cache, f"kbuild-{kver}")
    kdir = os.path.join(root, "usr", "src", f"linux-headers-{kver}")
    if os.path.isfile(os.path.join(kdir, "Makefile")):
        return kdir
    r = subprocess.run(["apt-cache", "depends", f"linux-headers-{kver}"], capture_output=True,
                       text=True)
    pkgs = [f"linux-headers-{kver}"] + re.findall(
        r"Depends: (linux-headers-\S+-common|linux-kbuild-\S+)", r.stdout)
    if len(pkgs) < 3:
        subprocess.run(vmtier.sudo() + ["apt-get", "update"], capture_output=True)
        r = subprocess.run(["apt-cache", "depends", f"linux-headers-{kver}"],
                           capture_output=True, text=True)
        pkgs = [f"linux-headers-{kver}"] + re.findall(
            r"Depends: (linux-headers-\S+-common|linux-kbuild-\S+)", r.stdout)
    tmp = tempfile.mkdtemp(prefix="kbuild-", dir=cache)
    try:
        say(f"downloading {' '.join(pkgs)} (once; kept in {cache})")
        r = subprocess.run(["apt-get", "download"] + pkgs, cwd=tmp, capture_output=True,
                           text=True)
        debs = [f for f in os.listdir(tmp) if f.endswith(".deb")]
        if r.returncode != 0 or len(debs) != len(pkgs):
            fail(f"apt-get download {' '.join(pkgs)} failed: {r.stderr.strip()[-300:]}")
        unpacked = os.path.join(tmp, "root")
        for deb in debs:
            vmtier.run(["dpkg-deb", "-x", os.path.join(tmp, deb), unpacked])
        # The headers' Makefile includes the -common headers' by absolute path.
        mk = os.path.join(unpacked, "usr", "src", f"linux-headers-{kver}", "Makefile")
        text = open(mk).read()
        fixed = re.sub(r"include \S*/(linux-headers-[^/\s]+-common)/Makefile",
                       lambda m: f"include {root}/usr/src/{m.group(1)}/Makefile", text)
        if fixed == text:
            fail(f"{mk} includes no -common headers' Makefile: unknown layout")
        open(mk, "w").write(fixed)
        shutil.rmtree(root, ignore_errors=True)
        os.rename(unpacked, root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return kdir


def build_module(src, out, kdir, sub="kernel", name="ntbfab_shadow"):
    """NAME.ko from a copy of SUB/ (kbuild writes next to the sources)."""
    d = os.path.join(out, sub.replace("/", "-"))
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(os.path.join(src, sub), d,
                    ignore=shutil.ignore_patterns("*.o", "*.ko", "*.mod*", ".*.cmd"))
    r = subprocess.run(["make", "-C", kdir, f"M={d}", "modules"], capture_output=True, text=True)
    ko = os.path.join(d, name + ".ko")
    if r.returncode != 0 or not os.path.exists(ko):
        fail(f"building {name}.ko against {kdir} failed:\n{r.stdout[-2000:]}"
             f"{r.stderr[-2000:]}")
    if re.search(r"\bwarning:", r.stderr):
        fail(f"{name}.ko builds with warnings:\n{r.stderr[-2000:]}")
    return ko


def host_program(path):
    """A dynamically linked program of the host and what it loads: (files, loader)."""
    r = subprocess.run(["ldd", path], capture_output=True, text=True)
    libs = re.findall(r"=> (/\S+)", r.stdout)
    loader = re.findall(r"^\s*(/\S*ld-linux\S*)", r.stdout, re.M)
    if r.returncode != 0 or not loader:
        fail(f"cannot list what {path} loads (ldd): {r.stderr.strip()}")
    return libs, loader[0]


def initramfs(out, src, busybox, progs, mods, ko, extra=()):
    d = os.path.join(out, "initrd")
    shutil.rmtree(d, ignore_errors=True)
    for sub in ["bin", "sbin", "lib/modules", "etc/ntbfab", "proc", "sys", "dev", "run", "tmp",
                "mnt"]:
        os.makedirs(os.path.join(d, sub))
    shutil.copy(busybox, os.path.join(d, "bin", "busybox"))
    for name, path in progs.items():
        if not vmtier.is_static(path):
            fail(f"{path} is not statically linked")
        shutil.copy(path, os.path.join(d, "bin", name))
    # mkfs.ext4: Debian's e2fsprogs (the host's), with its libraries and loader.
    mke2fs = shutil.which("mke2fs") or "/sbin/mke2fs"
    libs, loader = host_program(mke2fs)
    shutil.copy(mke2fs, os.path.join(d, "sbin", "mke2fs"))
    for f in libs + [loader]:
        dst = os.path.join(d, f.lstrip("/"))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(f, dst)
    names = []
    for m in mods + [ko]:
        name = os.path.basename(m)[:-3]
        shutil.copy(m, os.path.join(d, "lib", "modules", name + ".ko"))
        names.append(name)
    with open(os.path.join(d, "lib", "modules", "order"), "w") as f:
        f.write("\n".join(names) + "\n")
    # Modules the guest loads itself, with parameters it finds out (the bench's).
    os.makedirs(os.path.join(d, "lib", "modules", "extra"))
    for m in extra:
        shutil.copy(m, os.path.join(d, "lib", "modules", "extra"))
    shutil.copy(os.path.join(src, "tests", "shadow", "init.sh"), os.path.join(d, "init"))
    os.chmod(os.path.join(d, "init"), 0o755)
    shutil.copy(os.path.join(src, "tests", "shadow", "loopback.yaml"),
                os.path.join(d, "etc", "ntbfab", "loopback.yaml"))
    with open(os.path.join(d, "etc", "ntbfab", "cluster.key"), "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    os.chmod(os.path.join(d, "etc", "ntbfab", "cluster.key"), 0o600)
    img = os.path.join(out, "initrd.cpio")
    files = subprocess.run(["find", "."], cwd=d, capture_output=True, text=True,
                           check=True).stdout
    with open(img, "wb") as f:
        vmtier.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=d, input=files.encode(), stdout=f)
    return img


def boot(out, accel, kern, initrd, bench=False):
    """The guest: its RAM is a shared file, and an ivshmem-plain device on the same file is
    the window through which the device's DMA leaves and comes back (docs/kernel.md)."""
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else out
    ramdir = tempfile.mkdtemp(prefix="shadowtier-", dir=shm)
    ram = os.path.join(ramdir, "ram")
    control = os.path.join(out, "control.bin")
    disk = os.path.join(out, "nvme.img")
    for path, size in [(ram, RAM), (control, CONTROL), (disk, NVME_IMAGE)]:
        with open(path, "wb") as f:
            f.truncate(size)
    log = os.path.join(out, "guest.log")
    if os.path.exists(log):
        os.unlink(log)
    cmd = ["qemu-system-x86_64", "-accel", accel,
           "-machine", "q35,kernel-irqchip=split,memory-backend=ram",
           "-cpu", "host" if accel == "kvm" else "max", "-m", f"{RAM >> 20}M", "-smp", "2",
           "-nodefaults", "-no-reboot", "-display", "none", "-monitor", "none",
           "-serial", f"file:{log}", "-device", "intel-iommu,intremap=on,caching-mode=on",
           "-object", f"memory-backend-file,id=ram,share=on,mem-path={ram},size={RAM}",
           "-object", f"memory-backend-file,id=win,share=on,mem-path={ram},size={RAM}",
           "-device", "ivshmem-plain,memdev=win",
           "-object", f"memory-backend-file,id=ctl,share=on,mem-path={control},size={CONTROL}",
           "-device", "ivshmem-plain,memdev=ctl",
           "-drive", f"file={disk},if=none,id=nvm,format=raw",
           "-device", "nvme,serial=shadow01,drive=nvm",
           "-kernel", kern, "-initrd", initrd,
           # no_timer_check: as the VM tier (a loaded host can fail the early timer check).
           # The bench: strict IOMMU invalidation for every device, as the shadow device's
           # unmap is, so the two DMA map paths compare like for like.
           "-append", "console=ttyS0 intel_iommu=on no_timer_check panic=-1 quiet loglevel=4"
           + (" iommu.strict=1 shadowtier.mode=bench" if bench else "")]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = p.communicate(timeout=GUEST_TIMEOUT)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)  # the one we started, by its pid
        _, err = p.communicate()
        err = (err or b"") + f"\nshadowtier: killed after {GUEST_TIMEOUT} s".encode()
    shutil.rmtree(ramdir, ignore_errors=True)
    return log, time.monotonic() - t0, err.decode(errors="replace")


def figures_out(path, log, accel, kver, wall, err):
    """The bench's figures, side by side, and their ratios (docs/kernel.md, "Figures")."""
    results, figures, text = vmtier.parse(log)
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
    ap.add_argument("--src", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--daemon")
    ap.add_argument("--cli")
    ap.add_argument("--test")
    ap.add_argument("--missing")
    ap.add_argument("--bench", metavar="JSON",
                    help="the figures instead of the tests (bench/run.sh): write them to JSON")
    args = ap.parse_args()
    if args.missing:
        fail(f"the guest programs cannot be linked statically: missing {args.missing}")
    t0 = time.monotonic()
    busybox = vmtier.ensure_tools()
    out = args.out
    os.makedirs(out, exist_ok=True)
    cache = os.path.abspath(os.environ.get("NTBFAB_CACHE") or os.path.join(args.build,
                                                                           "vm-cache"))
    vmtier.MODULES = MODULES
    kver, kern, mods = vmtier.kernel(cache)
    kdir = headers(cache, kver)
    ko = build_module(args.src, out, kdir)
    extra = [build_module(args.src, out, kdir, "bench/kernel", "ntbfab_mapbench")] \
        if args.bench else []
    initrd = initramfs(out, args.src, busybox,
                       {"ntbfabd": args.daemon, "ntbfab": args.cli, "shadowtest": args.test},
                       mods, ko, extra)
    accel, why = vmtier.accelerator(out, kern, initrd)
    say(f"kernel {kver}, ntbfab_shadow.ko built, accelerator {accel} ({why})")
    log, wall, err = boot(out, accel, kern, initrd, bool(args.bench))
    if args.bench:
        return figures_out(args.bench, log, accel, kver, wall, err)
    results, figures, text = vmtier.parse(log)
    rows, failed = [], False
    for name in EXPECTED:
        ok, detail = results.get(name, (False, "missing: the guest never reported it"))
        rows.append((name, ok, detail))
        failed |= not ok
    for name, (ok, detail) in results.items():
        if name not in EXPECTED:
            rows.append((name, ok, detail))
            failed |= not ok
    if "SHADOWTIER DONE" not in text:
        rows.append(("powered-off-cleanly", False, "the guest never finished"))
        failed = True
    for name, ok, detail in rows:
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail[:300]}")
    figures["guest_wall_s"] = (round(wall, 1), "s")
    figures["tier_wall_s"] = (round(time.monotonic() - t0, 1), "s")
    for name, (v, unit) in sorted(figures.items()):
        print(f"  FIGURE {name} {v} {unit}")
    with open(os.path.join(out, "shadow-results.json"), "w") as f:
        json.dump({"accelerator": accel, "kernel": kver,
                   "results": {n: {"ok": ok, "detail": d} for n, ok, d in rows},
                   "figures": {k: {"value": v, "unit": u} for k, (v, u) in figures.items()}},
                  f, indent=1)
    if failed:
        print("shadowtier: the guest's last 80 lines:")
        print("\n".join(text.splitlines()[-80:]))
        print(err[-2000:])
        sys.exit(1)
    passed = sum(ok for _, ok, _ in rows)
    print(f"shadow: {passed} passed, 0 failed")


if __name__ == "__main__":
    main()
