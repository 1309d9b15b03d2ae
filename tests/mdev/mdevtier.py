#!/usr/bin/env python3
"""tests/mdev/mdevtier.py: the kernel tier's mdev test (docs/kernel.md, "The kernel tier").

One QEMU guest (L1) set up as the shadow test's (Intel's vIOMMU, QEMU's NVMe, an ivshmem
window onto the guest's own RAM file, the fabric's ivshmem region) plus TCG's SVM for KVM and a
read-only virtfs share of this machine's / . In L1, the lender's daemon lends the NVMe through
vfio-pci, the borrower's daemon offers it as an ntbfab_mdev instance, and L1 runs this
machine's own QEMU (chroot into the share) as a nested VM (L2, under KVM when L1 has it) with
-device vfio-pci,sysfsdev=... L2 is Debian's kernel with its unchanged nvme driver. While L2
does I/O, L1 kills the borrower's daemon and starts it again (the new one takes the instance
over); then, as a cold migration, L1 starts L2 a second time with a new instance of the same
device, which reads back what the first L2 left on the device, and stops while no borrower's
daemon runs (the next one returns the borrow).
tests/mdev/init.sh is L1's /init, tests/mdev/l2init.sh L2's.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import guestkit as gk  # noqa: E402  (tests/guestkit.py: what the QEMU tiers share)

L1_MODULES = ["crct10dif_generic", "crc64_rocksoft_generic", "crc32c_generic", "vfio_iommu_type1",
              "vfio-pci", "mdev", "kvm_amd", "9p", "9pnet_virtio", "virtio_pci"]
L2_MODULES = ["crct10dif_generic", "crc64_rocksoft_generic", "nvme"]
EXPECTED = ["mdev-create", "mdev-list", "mdev-create-refused", "no-borrow-before-enable",
            "borrow-while-running", "l2-nvme-identifies", "l2-write-verify", "l2-interrupts",
            "l2-io-through-daemon-death", "daemon-death-keeps-vm", "daemon-restart-takes-over",
            "returned-after-poweroff", "mdev-remove", "migrate-new-instance",
            "migrated-borrow-while-running", "migrated-reads-pattern", "vm-stops-without-daemon",
            "migrated-returned", "kernel-clean"]
# Each L2 boot: the figure its /init prints first, and what L1 judges of it when it dies
# before that /init (the device comes back, the instance goes, L1's kernel stays clean).
L2_BOOTS = [("l2_boot_to_init_s", ["returned-after-poweroff", "mdev-remove", "kernel-clean"]),
            ("l2m_boot_to_init_s", ["migrated-returned", "kernel-clean"])]
PATTERN = 4 << 20      # what the first L2 leaves on the device for the migrated one
RAM = 1 << 30          # L1's RAM and the window onto it (a power of two, as BARs are)
CONTROL = 64 << 20
NVME_IMAGE = 64 << 20
GUEST_TIMEOUT = 900
# L1 prints a line at every step; a run with none for this long is stalled. Seen once (L1
# silent from L2's start to the timeout; nested SVM under TCG suspected, as for an L2 that
# dies): the run is stopped and the tier run once more, and a second stall fails it.
STALL = int(os.environ.get("MDEVTIER_STALL", "300"))  # smaller: to try this path


def say(msg):
    print(f"mdevtier: {msg}", flush=True)


def fail(msg):
    print(f"mdevtier: FAIL: {msg}", flush=True)
    sys.exit(1)


def build_modules(src, out, kdir):
    """ntbfab_shadow.ko and ntbfab_mdev.ko through kernel/'s Makefile, from a copy laid out as
    the DKMS tree is (kernel/ with frontends/mdev as its mdev/)."""
    d = os.path.join(out, "kernel")
    shutil.rmtree(d, ignore_errors=True)
    ign = shutil.ignore_patterns("*.o", "*.ko", "*.mod*", ".*.cmd", "Module.symvers")
    shutil.copytree(os.path.join(src, "kernel"), d, ignore=ign)
    shutil.copytree(os.path.join(src, "frontends", "mdev"), os.path.join(d, "mdev"), ignore=ign)
    r = subprocess.run(["make", "-C", d, f"KDIR={kdir}", "modules"], capture_output=True,
                       text=True)
    kos = [os.path.join(d, "ntbfab_shadow.ko"), os.path.join(d, "mdev", "ntbfab_mdev.ko")]
    if r.returncode != 0 or not all(os.path.exists(k) for k in kos):
        fail(f"building the modules against {kdir} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    if "warning:" in r.stderr:
        fail(f"the modules build with warnings:\n{r.stderr[-2000:]}")
    return kos


def l2_initramfs(out, busybox, mods):
    d = os.path.join(out, "l2initrd")
    shutil.rmtree(d, ignore_errors=True)
    for sub in ["bin", "sbin", "proc", "sys", "dev", "tmp"]:
        os.makedirs(os.path.join(d, sub))
    shutil.copy(busybox, os.path.join(d, "bin", "busybox"))
    gk.modules_into(d, mods)
    with open(os.path.join(d, "pattern"), "wb") as f:
        f.write(os.urandom(PATTERN))  # random each run: a device left as it was cannot pass
    shutil.copy(os.path.join(HERE, "l2init.sh"), os.path.join(d, "init"))
    os.chmod(os.path.join(d, "init"), 0o755)
    return gk.pack(d, os.path.join(out, "l2initrd.cpio"))


def l1_initramfs(out, src, busybox, progs, mods):
    d = os.path.join(out, "initrd")
    shutil.rmtree(d, ignore_errors=True)
    for sub in ["bin", "sbin", "etc/ntbfab", "proc", "sys", "dev", "run", "tmp", "host"]:
        os.makedirs(os.path.join(d, sub))
    shutil.copy(busybox, os.path.join(d, "bin", "busybox"))
    for name, path in progs.items():
        if not gk.is_static(path):
            fail(f"{path} is not statically linked")
        shutil.copy(path, os.path.join(d, "bin", name))
    gk.modules_into(d, mods)
    shutil.copy(os.path.join(HERE, "init.sh"), os.path.join(d, "init"))
    os.chmod(os.path.join(d, "init"), 0o755)
    shutil.copy(os.path.join(src, "tests", "shadow", "loopback.yaml"),
                os.path.join(d, "etc", "ntbfab", "loopback.yaml"))
    with open(os.path.join(d, "etc", "ntbfab", "cluster.key"), "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    os.chmod(os.path.join(d, "etc", "ntbfab", "cluster.key"), 0o600)
    return gk.pack(d, os.path.join(out, "initrd.cpio"))


def boot(out, accel, kern, initrd, l2kern, l2initrd):
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else out
    ramdir = tempfile.mkdtemp(prefix="mdevtier-", dir=shm)
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
           "-device", "nvme,serial=mdev0001,drive=nvm",
           "-virtfs", "local,path=/,mount_tag=host,security_model=none,readonly=on",
           "-kernel", kern, "-initrd", initrd,
           "-append", "console=ttyS0 intel_iommu=on no_timer_check panic=-1 quiet loglevel=4 "
           f"mdevtier.l2kernel={l2kern} mdevtier.l2initrd={l2initrd}"]
    t0 = time.monotonic()
    errlog = os.path.join(out, "qemu-stderr.log")
    with open(errlog, "wb") as ef:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=ef)
    stalled, size, seen = False, -1, t0
    while p.poll() is None:
        time.sleep(2)
        now = time.monotonic()
        grown = os.path.getsize(log) if os.path.exists(log) else 0
        if grown != size:
            size, seen = grown, now
        stalled = now - seen > STALL
        if stalled or now - t0 > GUEST_TIMEOUT:
            p.send_signal(signal.SIGKILL)  # the one we started, by its pid
            p.wait()
            break
    with open(errlog, "rb") as ef:
        err = ef.read().decode(errors="replace")
    if stalled:
        err += f"\nmdevtier: L1 printed nothing for {STALL} s: stopped"
    elif p.returncode == -signal.SIGKILL:
        err += f"\nmdevtier: killed after {GUEST_TIMEOUT} s"
    shutil.rmtree(ramdir, ignore_errors=True)
    return log, time.monotonic() - t0, err, stalled


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--daemon")
    ap.add_argument("--cli")
    ap.add_argument("--missing")
    args = ap.parse_args()
    if args.missing:
        fail(f"the guest programs cannot be linked statically: missing {args.missing}")
    t0 = time.monotonic()
    busybox = gk.ensure_tools(need_dgram=False)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    cache = gk.cache_dir(os.path.join(args.build, "vm-cache"))
    _, _, l2mods, _ = gk.kernel(cache, L2_MODULES)
    kver, kern, mods, image_deb = gk.kernel(cache, L1_MODULES)
    kdir = gk.kernel_headers(cache, kver, image_deb)
    kos = build_modules(args.src, out, kdir)
    l2initrd = l2_initramfs(out, busybox, l2mods)
    l2kern = os.path.join(out, "l2-vmlinux")
    shutil.copy(kern, l2kern)  # under out/: a path the chroot in L1 sees as it is here
    initrd = l1_initramfs(out, args.src, busybox, {"ntbfabd": args.daemon, "ntbfab": args.cli},
                          mods + kos)
    # KVM when a probe guest reaches L1's /init under it (init.sh: mdevtier.mode=probe)
    probe_log = os.path.join(out, "probe-kvm.log")
    accel, why = gk.accelerator(
        ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-m", "256M", "-nodefaults",
         "-no-reboot", "-display", "none", "-monitor", "none", "-serial", f"file:{probe_log}",
         "-kernel", kern, "-initrd", initrd, "-append",
         "console=ttyS0 panic=-1 quiet no_timer_check mdevtier.mode=probe"],
        probe_log, "MDEVTIER_ACCEL")
    say(f"kernel {kver}, ntbfab_shadow.ko and ntbfab_mdev.ko built, L1 under {accel} ({why})")
    log, wall, err, stalled = boot(out, accel, kern, initrd, l2kern, l2initrd)
    results, figures, text = gk.parse(log)
    # The first L2 boot that died before its /init (the migrated one is not started then).
    died = next((b for b in L2_BOOTS if b[0] not in figures), None)
    stalls = 0
    if stalled:
        # Nothing of a stalled run is judged: L1 itself stopped answering.
        stalls = 1
        say(f"L1 printed nothing for {STALL} s (its last line: "
            f"{(text.strip().splitlines() or ['none'])[-1][:200]}); its log is "
            "guest-stalled.log; running the tier once more")
        shutil.copy(log, os.path.join(out, "guest-stalled.log"))
        log, wall2, err, stalled = boot(out, accel, kern, initrd, l2kern, l2initrd)
        wall += wall2
        results, figures, text = gk.parse(log)
        died = next((b for b in L2_BOOTS if b[0] not in figures), None)
    if died and "MDEVTIER DONE" in text and not stalls:
        # L2 died before its /init printed a line (seen once in six runs; cause not found,
        # nested SVM under TCG suspected). What ntbfab owes a VM that dies is still judged on
        # that run (the borrow comes back, the instance is removed, L1's kernel is clean);
        # the rest is judged on a second run of the tier.
        say(f"an L2 never reached its /init ({died[0]} missing); L1's log of that run is "
            "guest-first.log; running the tier once more")
        say("L1's account of it: " + " | ".join(
            ln for ln in text.splitlines() if "L2" in ln or "RESULT" in ln)[-1500:])
        shutil.copy(log, os.path.join(out, "guest-first.log"))
        first = results
        log, wall2, err, stalled = boot(out, accel, kern, initrd, l2kern, l2initrd)
        wall += wall2
        results, figures, text = gk.parse(log)
        for name in died[1]:
            ok, detail = first.get(name, (False, "missing: the guest never reported it"))
            results["died-" + name] = (ok, "the run whose L2 died: " + detail)
    rows, failed = [], False
    for name in EXPECTED:
        ok, detail = results.get(name, (False, "missing: the guest never reported it"))
        rows.append((name, ok, detail))
        failed |= not ok
    for name, (ok, detail) in results.items():
        if name not in EXPECTED:
            rows.append((name, ok, detail))
            failed |= not ok
    if "MDEVTIER DONE" not in text:
        rows.append(("powered-off-cleanly", False,
                     "L1 stalled again" if stalled else "L1 never finished"))
        failed = True
    figures["stalled_runs"] = (stalls, "runs")
    for name, ok, detail in rows:
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail[:300]}")
    figures["guest_wall_s"] = (round(wall, 1), "s")
    figures["tier_wall_s"] = (round(time.monotonic() - t0, 1), "s")
    for name, (v, unit) in sorted(figures.items()):
        print(f"  FIGURE {name} {v} {unit}")
    with open(os.path.join(out, "mdev-results.json"), "w") as f:
        json.dump({"accelerator": accel, "kernel": kver,
                   "results": {n: {"ok": ok, "detail": d} for n, ok, d in rows},
                   "figures": {k: {"value": v, "unit": u} for k, (v, u) in figures.items()}},
                  f, indent=1)
    if failed:
        print("mdevtier: L1's last 120 lines:")
        print("\n".join(text.splitlines()[-120:]))
        print(err[-2000:])
        sys.exit(1)
    print(f"mdev: {sum(ok for _, ok, _ in rows)} passed, 0 failed")


if __name__ == "__main__":
    main()
