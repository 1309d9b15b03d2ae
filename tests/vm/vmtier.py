#!/usr/bin/env python3
"""tests/vm/vmtier.py: the VM tier's harness: a guest kernel, an initramfs, two QEMU guests,
their results, and the figures (docs/vm.md).

One run boots guest A (QEMU's NVMe, Intel vIOMMU, ivshmem) and guest B (ivshmem) once, in
parallel, and runs every guest test in them; then the same driver runs against the simulated
NVMe on the host for comparison. What it shares with the kernel tier is in tests/guestkit.py. Exit status:
0 when every expected result is ok, 1 when one is missing or failed (the guest log's tail
is printed), 77 (meson: skipped) only when QEMU cannot be installed at all.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import guestkit as gk  # noqa: E402  (tests/guestkit.py: what the QEMU tiers share)
from guestkit import fail, say  # noqa: E402

# What each guest must report (tests/vm/init.sh, tests/vm/vmtest.c).
EXPECTED = {
    "a": [
        "lend-refused-in-use", "lend-force", "identify", "msix-eventfd", "blocks-4k", "prp-1m",
        "iommu-blocks-unmapped", "iommu-fault-logged", "nvme-tool-manager", "nvme-tool-identify",
        "nvme-tool-manager-2-clients", "nvme-tool-verify-detects", "nvme-tool-qd1",
        "nvme-tool-manager-stopped", "sisci-nvme_identify", "sisci-nvme_identify-hints",
        "share-queue-pairs",
        "share-client-death", "daemon-cleared-dead-client", "shm-window-readback",
        "shm-copy-acked", "p2p-nvme-window", "p2p-acked", "sisci-peer-reachable",
        "sisci-pingpong", "sisci-memcpy_bw", "sisci-dma-write", "sisci-dma-read",
        "sisci-intlat", "sisci-intlat-data", "restart-keeps-lend", "unlend-restores-driver",
    ],
    "b": ["shm-copy-into-peer", "p2p-nvme-into-peer", "sisci-pingpong-server",
          "sisci-memcpy_bw-server", "sisci-dma-write-server", "sisci-dma-read-server",
          "sisci-intlat-server", "sisci-intlat-data-server"],
}
# Modules the guests load (their dependencies are added, in order, from each .ko's modinfo).
# The two crypto modules are what nvme-core's integrity helpers ask the crypto API for.
MODULES = ["crct10dif_generic", "crc64_rocksoft_generic", "vfio_iommu_type1", "vfio-pci", "nvme",
           "virtio_pci", "virtio_net"]
IVSHMEM_SIZE = 16 << 20
NVME_IMAGE = 64 << 20
GUEST_TIMEOUT = 240


# ---- the initramfs --------------------------------------------------------------------------

def initramfs(out, src, busybox, progs, mods):
    key = os.urandom(32).hex() + "\n"  # what ntbfab keygen writes
    return gk.initramfs(out, busybox, os.path.join(src, "tests", "vm", "init.sh"), progs=progs,
                        files={"/etc/ntbfab/cluster.yaml": os.path.join(src, "tests", "vm",
                                                                        "cluster.yaml"),
                               "/etc/ntbfab/cluster.key": (key.encode(), 0o600)},
                        mods=mods)


# ---- KVM or TCG -----------------------------------------------------------------------------

def accelerator(out, kern, initrd):
    """KVM when it really works here, TCG otherwise (docs/vm.md, guestkit.accelerator)."""
    log = os.path.join(out, "probe-kvm.log")
    return gk.accelerator(qemu_cmd("probe", "kvm", kern, initrd, None, None, log, None), log,
                          "VMTIER_ACCEL")


# ---- the guests -----------------------------------------------------------------------------

def qemu_cmd(role, accel, kern, initrd, shm, disk, log, only, net=None):
    cmd = ["qemu-system-x86_64", "-accel", accel, "-machine", "q35,kernel-irqchip=split",
           "-cpu", gk.cpu_for(accel), "-m", "512M",
           "-smp", "2" if role == "a" else "1", "-nodefaults", "-no-reboot",
           "-display", "none", "-monitor", "none", "-serial", f"file:{log}",
           "-device", "intel-iommu,intremap=on,caching-mode=on"]
    if shm:
        cmd += ["-object",
                f"memory-backend-file,id=hmem,share=on,mem-path={shm},size={IVSHMEM_SIZE}",
                "-device", "ivshmem-plain,memdev=hmem"]
    if net:
        # The guests' network (init.sh gives the guests 10.99.0.4 and 10.99.0.8).
        cmd += gk.guest_net(net, role, 4 if role == "a" else 8, "b" if role == "a" else "a")
    cmd += ["-kernel", kern, "-initrd", initrd,
           # loglevel=3: kernel errors (the expected DMAR faults) stay out of the result lines;
           # init prints them from dmesg. no_timer_check: on a loaded host a TCG guest can fail
           # the early check that the timer interrupt arrives through the interrupt-remapped
           # IO-APIC, and panics ("timer doesn't work through Interrupt-remapped IO-APIC").
           "-append", "console=ttyS0 intel_iommu=on no_timer_check panic=-1 quiet loglevel=3 "
           f"vmtier.role={role}"
           + (f" vmtier.only={only}" if only else "")]
    if role == "a":
        # mdts=8: 1 MiB per command, so the 1 MiB transfer is one command with a PRP list.
        cmd += ["-drive", f"file={disk},if=none,id=nvm,format=raw",
                "-device", "nvme,serial=deadbeef,drive=nvm,mdts=8"]
    return cmd


def boot(out, accel, kern, initrd, only):
    shm = os.path.join(out, "ivshmem.bin")
    disk = os.path.join(out, "nvme.img")
    for path, size in [(shm, IVSHMEM_SIZE), (disk, NVME_IMAGE)]:
        with open(path, "wb") as f:
            f.truncate(size)
    net = gk.short_tmpdir("vmtier-net-")
    try:
        cmds, logs = {}, {}
        for role in ["b", "a"]:
            logs[role] = os.path.join(out, f"guest-{role}.log")
            cmds[role] = (qemu_cmd(role, accel, kern, initrd, shm, disk, logs[role], only, net),
                          logs[role])
        wall, errs = gk.boot(cmds, GUEST_TIMEOUT)
    finally:
        shutil.rmtree(net, ignore_errors=True)
    return logs, wall, errs


# ---- the same driver on the simulated NVMe (host) ------------------------------------------

def free_port(host):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def stop_leftovers(d):
    """Daemons and the device host `ntbfab up` started in d that are still there (an up that
    failed half way): they are this harness's, by the pids in d."""
    pids = []
    for sub in ["run"]:
        for f in os.listdir(os.path.join(d, sub)) if os.path.isdir(os.path.join(d, sub)) else []:
            if f.endswith(".pid"):
                try:
                    pids.append(int(open(os.path.join(d, sub, f)).read().split()[0]))
                except (ValueError, IndexError, OSError):
                    pass
    for sig in [signal.SIGTERM, signal.SIGKILL]:
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in pids):
            time.sleep(0.1)


def host_sim(args, out):
    d = tempfile.mkdtemp(prefix="ntbfab-vmtier-sim-", dir="/dev/shm")
    # Free ports of the moment: engineers' test clusters share this machine's loopback.
    text = open(os.path.join(args.src, "tests", "vm", "sim-nvme.yaml")).read()
    text = text.replace("127.0.0.1:17761", f"127.0.0.1:{free_port('127.0.0.1')}")
    text = text.replace("127.0.0.2:17762", f"127.0.0.2:{free_port('127.0.0.2')}")
    cfg = os.path.join(out, "sim-nvme.yaml")
    with open(cfg, "w") as f:
        f.write(text)
    try:
        r = subprocess.run([args.ntbfab, "up", cfg, "--dir", d], capture_output=True, text=True)
        if r.returncode != 0:
            return {}, {"sim": (False, "ntbfab up failed: " + r.stderr.strip())}
        env = dict(os.environ, NTBFAB_DIR=d, NTBFAB_NODE="lender")
        r = subprocess.run([args.host_test, "sim", "0000:03:00.0"], env=env,
                           capture_output=True, text=True, timeout=120)
        with open(os.path.join(out, "host-sim.log"), "w") as f:
            f.write(r.stdout + r.stderr)
        results, figures, _ = gk.parse(os.path.join(out, "host-sim.log"))
        return figures, results
    finally:
        subprocess.run([args.ntbfab, "down", "--dir", d], capture_output=True)
        stop_leftovers(d)
        shutil.rmtree(d, ignore_errors=True)


# ---- main -----------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    gk.common_args(ap)
    ap.add_argument("--daemon")
    ap.add_argument("--cli")
    ap.add_argument("--test")
    ap.add_argument("--nvme-tool")
    ap.add_argument("--sisci", action="append", default=[],
                    help="a static SISCI example (sisci-NAME-static), installed as sisci-NAME")
    ap.add_argument("--host-test", required=True)
    ap.add_argument("--ntbfab", required=True)
    ap.add_argument("--missing")
    ap.add_argument("--only", help="development: run one step of the guests (tool, nvme, share, window, "
                    "sisci) "
                    "and check only what is reported")
    args = ap.parse_args()
    t_start = time.monotonic()
    if args.missing:
        fail(f"the guest programs cannot be linked statically: missing {args.missing}; "
             f"install the static libraries (make test's DEPS list the packages)")
    gk.setup("vmtier")
    busybox = gk.ensure_tools()
    out = args.out
    os.makedirs(out, exist_ok=True)
    cache = gk.cache_dir(args.cache or os.path.join(args.build, "vm-cache"))
    kver, kern, mods, _ = gk.kernel(cache, MODULES)
    t_prep = time.monotonic()
    progs = {"ntbfabd": args.daemon, "ntbfab": args.cli, "ntbfab-vmtest": args.test,
             "ntbfab-nvme": args.nvme_tool}
    for path in args.sisci:
        progs[os.path.basename(path).replace("-static", "")] = path
    initrd = initramfs(out, args.src, busybox, progs, mods)
    accel, why = accelerator(out, kern, initrd)
    say(f"kernel {kver}, {len(mods)} modules, accelerator {accel} ({why})")
    logs, wall, errs = boot(out, accel, kern, initrd, args.only)
    t_guests = time.monotonic()
    sim_figs, sim_results = ({}, {}) if args.only else host_sim(args, out)
    t_end = time.monotonic()

    # Every expected result ok, anything else a guest reported ok too (a client's failure,
    # say), both guests finished.
    rows, figures, failed = gk.check({} if args.only else EXPECTED, logs, "VMTIER DONE")
    for name, (ok, detail) in sim_results.items():
        rows.append(("host", name, ok, detail))
    figures.update(sim_figs)
    # Every byte some check compared with what it should be, in either guest.
    parts = ["bytes_verified", "share_bytes_verified", "window_bytes_verified",
             "peer_bytes_verified", "nvme_tool_bytes_verified", "sisci_bytes_verified_memcpy",
             "sisci_bytes_verified_dma_write", "sisci_bytes_verified_dma_read"]
    if any(p in figures for p in parts):
        figures["total_bytes_verified"] = (sum(figures[p][0] for p in parts if p in figures),
                                           "bytes")

    gk.print_rows("VM tier results (guest a: NVMe + vIOMMU + ivshmem; guest b: ivshmem)", rows)
    print()
    print("Figures")
    for name in sorted(figures):
        v, unit = figures[name]
        print(f"  {name:34} {v:12.3f} {unit}")
    def fig(name):
        return f"{figures[name][0]:9.1f}" if name in figures else "      n/a"
    print()
    print("The same driver (tests/integration/nvme_drv.c through the device API), median / p99 us")
    print(f"  {'':28} {'QEMU NVMe, VFIO, TCG guest':>30} {'simulated NVMe, host':>26}")
    for what, g, h in [("admin identify", "identify", "sim_identify"),
                       ("4 KiB read, QD1", "vfio_read4k_qd1", "sim_read4k_qd1")]:
        key = "identify" if g == "identify" else g
        print(f"  {what:28} {fig(key + '_median_us')} / {fig(key + '_p99_us')}        "
              f"{fig(h + '_median_us')} / {fig(h + '_p99_us')}")
    print()
    print("The distributed NVMe driver, unchanged (ntbfab-nvme over libsisci, QEMU NVMe, VFIO)")
    print(f"  identify, whole process     {fig('nvme_tool_identify_process_ms')} ms")
    print(f"  4 KiB read, QD1             {fig('nvme_tool_read4k_qd1_median_us')} / "
          f"{fig('nvme_tool_read4k_qd1_p99_us')} us (median / p99)")
    print("SISCI examples, guest a to guest b over the ivshmem adapters")
    print(f"  pingpong round trip         {fig('sisci_pingpong_rtt_median_us')} / "
          f"{fig('sisci_pingpong_rtt_p99_us')} us (median / p99)")
    print(f"  memcpy 1 MiB                {fig('sisci_memcpy_remote_MBps')} MB/s from guest a, "
          f"{fig('sisci_memcpy_owner_MBps')} MB/s by guest b itself")
    print(f"  DMA (CPU copy) 1 MiB        {fig('sisci_dma_write_1MiB_MBps')} MB/s write, "
          f"{fig('sisci_dma_read_1MiB_MBps')} MB/s read")
    print(f"  interrupt round trip        {fig('sisci_intlat_rtt_median_us')} / "
          f"{fig('sisci_intlat_rtt_p99_us')} us (median / p99)")
    print(f"  data interrupt, 64 bytes    {fig('sisci_intlat_data_rtt_median_us')} / "
          f"{fig('sisci_intlat_data_rtt_p99_us')} us (median / p99)")
    print()
    for role in ["a", "b"]:
        print(f"  guest {role} wall time (QEMU start to power-off) {wall[role]:8.2f} s")
    print(f"  preparation (kernel, modules) {t_prep - t_start:.2f} s, guests "
          f"{t_guests - t_prep:.2f} s, host sim comparison {t_end - t_guests:.2f} s, "
          f"total {t_end - t_start:.2f} s")
    summary = {
        "kernel": kver, "accelerator": accel, "accelerator_reason": why,
        "results": [{"guest": r, "name": n, "ok": o, "detail": d} for r, n, o, d in rows],
        "figures": {k: {"value": v, "unit": u} for k, (v, u) in figures.items()},
        "guest_wall_s": wall, "total_s": t_end - t_start,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    gk.finish(os.path.join(out, "vm-results.json"), summary, rows, failed, logs, errs)


if __name__ == "__main__":
    main()
