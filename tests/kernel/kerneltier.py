#!/usr/bin/env python3
"""tests/kernel/kerneltier.py: the kernel tier's harness (docs/linux-ntb.md): the upstream NTB
stack and ntbfab's modules built at test time, two QEMU guests joined by the emulated NTB
(kernel/test/ntb_hw_ivshmem.c), and the upstream NTB clients and ntbfab_ntb's own test between
them.

One run:
1. tools (guestkit.ensure_tools; exit 77 only when QEMU cannot be installed at all);
2. Debian's packages of the guest kernel: linux-image (shared with the VM tier), its
   linux-headers (with the -common headers and linux-kbuild) and linux-source of the same
   version, downloaded once into the cache (NTBFAB_CACHE, else build/vm-cache); the headers'
   Makefile names the -common headers by absolute path and is rewritten to the unpacked copy;
   only drivers/ntb, drivers/net/ntb_netdev.c and checkpatch are taken out of the source;
3. the upstream NTB core and clients (ntb, ntb_transport, ntb_netdev, ntb_tool, ntb_perf,
   ntb_pingpong) built out of tree once per kernel (cached), ntbfab_ntb.ko and ntb_hw_ivshmem.ko
   built every run against their Module.symvers;
4. an initramfs (tests/kernel/init.sh as /init, ntbfab-ntbtest and any --prog, every module);
5. ntbfab-ivshmem-server and two guests at once, each with its RAM in a shared file that the
   server gives the other guest's ivshmem-doorbell device as its memory; the steps run in both
   guests, in order, each guest reporting RESULT and FIGURE lines;
6. the results (every expected one ok), the figures, and JSON in OUT/kernel-results.json.

--checkpatch runs scripts/checkpatch.pl --strict over kernel/ instead (step 2 only).
--steps chooses steps (default: all), --prog NAME=PATH and --steps-file FILE add programs and
step functions to the guests, --env NAME=VALUE sets a variable for them (docs/linux-ntb.md,
"Adding programs to the guests").
"""

import argparse
import array
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import guestkit as gk  # noqa: E402  (tests/guestkit.py: what the QEMU tiers share)
from guestkit import fail, say  # noqa: E402

STEPS = ["tool", "pingpong", "netdev", "ntbfab", "lntb", "conform", "perf"]
# What each step must report, in both guests unless a role is named.
EXPECTED = {
    None: ["hw-probe"],
    "tool": ["tool-link", "tool-spad", "tool-db", "tool-mw"],
    "pingpong": ["pingpong-count"],
    "netdev": ["netdev-carrier", "netdev-ping", ("a", "netdev-tcp-send"),
               ("b", "netdev-tcp-recv")],
    "ntbfab": ["ntbfab-version", "ntbfab-owner-exclusive", "ntbfab-info",
               "ntbfab-rejects-bad-args", "ntbfab-align-before-link", "ntbfab-link-up",
               "ntbfab-mw-info", "ntbfab-buf-alloc", "ntbfab-trans-wrong-address-refused",
               "ntbfab-trans-set", "ntbfab-spad", "ntbfab-window-fd-child", "ntbfab-window-data",
               "ntbfab-buf-fd-child", "ntbfab-doorbell", "ntbfab-db-mask", "ntbfab-msg",
               "ntbfab-db-set-local", "ntbfab-db-rtt", "ntbfab-events-read",
               "ntbfab-outbound-unsupported", "ntbfab-buf-lifetime", "ntbfab-close-undoes", ("a", "ntbfab-kill-clears"),
               ("a", "ntbfab-kill-hw-clear"), ("a", "ntbfab-window-fd-revoked"),
               ("b", "ntbfab-link-down-seen"), ("b", "ntbfab-peer-kill-link-down"),
               ("b", "ntbfab-link-disable")],
    "lntb": ["lntb-daemon", "lntb-kill-clears"]
    + [("a", f"lntb-sisci-{x}") for x in ["pingpong", "memcpy_bw", "dma-write", "dma-read",
                                          "intlat", "intlat-data"]]
    + [("a", "lntb-nvme-bars"), ("a", "lntb-nvme-map"), ("a", "lntb-nvme-read"), ("b", "lntb-nvme-translated"),
       ("b", "lntb-nvme-bytes"), ("b", "lntb-nvme-unmapped")],
    "conform": [("a", "conform-hw-probe"), ("a", "conform-linux-ntb"),
                ("a", "conform-rev-linux-ntb"), ("a", "conform-stx-switchtec")],
    "perf": ["perf-run"],
}
# Debian's modules the guests load: the management network's NIC.
MODULES = ["virtio_pci", "virtio_net"]
# The upstream NTB stack, built from linux-source (module: its sources there).
UPSTREAM = {
    "ntb": ["drivers/ntb/core.c"],
    "ntb_transport": ["drivers/ntb/ntb_transport.c"],
    "ntb_netdev": ["drivers/net/ntb_netdev.c"],
    "ntb_tool": ["drivers/ntb/test/ntb_tool.c"],
    "ntb_perf": ["drivers/ntb/test/ntb_perf.c"],
    "ntb_pingpong": ["drivers/ntb/test/ntb_pingpong.c"],
}
SOURCE_PARTS = ["drivers/ntb/*", "drivers/net/ntb_netdev.c", "scripts/checkpatch.pl",
                "scripts/spelling.txt", "scripts/const_structs.checkpatch"]
RAM_MIB = 512
# The carve-out both guests reserve; ntb_hw_ivshmem's defaults (carve_base, carve_size). The
# second is side 1's when one guest holds both ends of an emulated NTB (its carve_base1: the
# loopback pair of the conform step).
CARVE = "32M$0x1c000000"
CARVE1 = "32M$0x1a000000"
VECTORS = 6
GUEST_TIMEOUT = 540
# Guest a's QEMU NVMe drive (step lntb): its PCI function (tests/kernel/lntb.yaml names it) and
# the size of its backing file, which holds the generator's words from a seed new every run.
NVME_ADDR = 0x10
NVME_BYTES = 4 << 20


# ---- Debian's kernel headers and source -----------------------------------------------------

def kernel_sources(cache, kver, image_deb):
    """The kbuild tree of the guest kernel (guestkit.kernel_headers) and the parts of its source
    the tier needs, from linux-source of the image's version. Returns (KDIR, source directory)."""
    kdir = gk.kernel_headers(cache, kver, image_deb)
    version = gk.deb_field(image_deb, "Version")
    series = re.match(r"(\d+\.\d+)", kver).group(1)
    src_deb = gk.download(cache, f"linux-source-{series}", version)

    def unpack_source(d):
        say(f"extracting drivers/ntb, ntb_netdev and checkpatch from {os.path.basename(src_deb)}")
        member = f"./usr/src/linux-source-{series}.tar.xz"
        parts = " ".join(f"'linux-source-{series}/{p}'" for p in SOURCE_PARTS)
        gk.run(["bash", "-o", "pipefail", "-c",
                f"dpkg-deb --fsys-tarfile '{src_deb}' | tar -xO '{member}' | "
                f"tar -xJ -C '{d}' --wildcards {parts}"])
    src = gk.atomic_dir(os.path.join(cache, f"linux-source-{version}-ntb"), unpack_source)
    return kdir, os.path.join(src, f"linux-source-{series}")


def upstream_modules(cache, kdir, srcdir):
    """The upstream NTB core and clients, built once per kernel from its source."""
    def build(d):
        say("building the upstream NTB stack from linux-source (once per kernel)")
        lines = ["obj-m := " + " ".join(f"{m}.o" for m in UPSTREAM)]
        for mod, files in UPSTREAM.items():
            for path in files:
                shutil.copy(os.path.join(srcdir, path), d)
            objs = [os.path.basename(p)[:-2] + ".o" for p in files]
            if objs != [mod + ".o"]:
                lines.append(f"{mod}-y := " + " ".join(objs))
        with open(os.path.join(d, "Kbuild"), "w") as f:
            f.write("\n".join(lines) + "\n")
        gk.kbuild(kdir, d)
    # One build per kernel tree, source and module list.
    key = hashlib.sha1(f"{kdir} {srcdir} {sorted(UPSTREAM.items())}".encode()).hexdigest()[:10]
    return gk.atomic_dir(os.path.join(cache, f"ntb-modules-{key}"), build)


def project_modules(src, out, kdir, upstream):
    """ntbfab_ntb.ko and ntb_hw_ivshmem.ko, built with kernel/'s own Kbuild (NTBFAB_NTB=m: the
    NTB core is the upstream one built above, not the kernel's) into out/kbuild."""
    return gk.build_modules(
        kdir, os.path.join(src, "kernel"), os.path.join(out, "kbuild"),
        ["ntbfab_ntb", "ntb_hw_ivshmem"],
        args=["NTBFAB_NTB=m", f"KBUILD_EXTRA_SYMBOLS={os.path.join(upstream, 'Module.symvers')}"],
        also=[os.path.join(src, "kernel", "test", "ntb_hw_ivshmem.c")],
        kbuild_lines="obj-m += ntb_hw_ivshmem.o\n")


def checkpatch(src, srcdir):
    # From kernel/, laid out like a kernel tree: checkpatch knows include/uapi/ by its path.
    top = os.path.join(src, "kernel")
    files = sorted(os.path.relpath(f, top) for f in
                   glob.glob(os.path.join(top, "**", "*.[ch]"), recursive=True))
    script = os.path.join(srcdir, "scripts", "checkpatch.pl")
    r = subprocess.run(["perl", script, "--strict", "--no-tree", "--terse", "--show-types",
                        "-f"] + files, capture_output=True, text=True, cwd=top)
    out = (r.stdout + r.stderr).strip()
    bad = [line for line in out.splitlines()
           if re.search(r": (ERROR|WARNING|CHECK):", line)]
    for line in out.splitlines():
        print(line)
    if bad or r.returncode != 0:
        fail(f"checkpatch.pl --strict: {len(bad)} problem(s) in kernel/")
    say(f"checkpatch.pl --strict: {len(files)} files of kernel/ clean")


# ---- the guests -----------------------------------------------------------------------------

def drive_pattern(seed, size):
    """The NVMe drive's bytes: word i (64-bit, little-endian) is the i-th output of splitmix64
    seeded with seed, which tests/kernel/nvmep2p.c computes again in guest b to check them."""
    mask, out, x = (1 << 64) - 1, array.array("Q"), seed
    for _ in range(size // 8):
        x = (x + 0x9E3779B97F4A7C15) & mask
        z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        out.append(z ^ (z >> 31))
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


def qemu_cmd(role, accel, kern, initrd, log, ram=None, socks=None, net=None, steps=(), env=(),
             drive=None):
    cmd = ["qemu-system-x86_64", "-accel", accel, "-cpu", gk.cpu_for(accel),
           "-m", f"{RAM_MIB}M", "-smp", "1", "-nodefaults", "-no-reboot", "-display", "none",
           "-monitor", "none", "-serial", f"file:{log}"]
    if ram:
        # The guest's RAM is a shared file: the peer's ivshmem device maps it as its window.
        cmd += ["-machine", "q35,memory-backend=ram", "-object",
                f"memory-backend-file,id=ram,share=on,mem-path={ram},size={RAM_MIB}M",
                "-chardev", f"socket,path={socks[0]},id=ivsh",
                "-device", f"ivshmem-doorbell,chardev=ivsh,vectors={VECTORS}"]
    else:
        cmd += ["-machine", "q35"]
    if net:
        peer = "b" if role == "a" else "a"
        cmd += gk.guest_net(net, role, 4 if role == "a" else 8, peer)
    # The loopback pair: two more ivshmem-doorbell devices on this guest's own RAM, both ends
    # of one emulated NTB (ntb_hw_ivshmem pair=1 in guest a; guest b has the same devices,
    # unused, so that both guests lay out their PCI devices alike).
    for i, sock in enumerate((socks or [])[1:]):
        cmd += ["-chardev", f"socket,path={sock},id=loop{i}",
                "-device", f"ivshmem-doorbell,chardev=loop{i},vectors={VECTORS}"]
    if drive:
        # QEMU's NVMe controller at a fixed function, 512-byte blocks (tests/kernel/nvmep2p.c)
        cmd += ["-drive", f"file={drive},if=none,id=nvm,format=raw",
                "-device", f"nvme,drive=nvm,serial=ntbfab-ktier,addr={NVME_ADDR:#x},"
                f"logical_block_size=512,physical_block_size=512"]
    cmd += ["-kernel", kern, "-initrd", initrd, "-append",
            f"console=ttyS0 panic=-1 quiet loglevel=3 memmap={CARVE} memmap={CARVE1} kt.role={role} "
            f"kt.steps={','.join(steps)}" + (f" kt.env={','.join(env)}" if env else "")]
    return cmd


def start_server(server, d, a_ram, b_ram):
    """ntbfab-ivshmem-server: guest a is peer 0 and gets b's RAM, guest b peer 1 with a's (the
    emulated NTB between the guests, ntb_hw_ivshmem pair 0); guest a is also peers 2 and 3 with
    its own RAM (pair 1: both ends in guest a), guest b peers 4 and 5 with its own."""
    rams = {"a": a_ram, "b": b_ram}
    socks = {r: [os.path.join(d, f"{r}{i}.sock") for i in range(3)] for r in "ab"}
    peers = ["--peer", f"0:{socks['a'][0]}:{b_ram}", "--peer", f"1:{socks['b'][0]}:{a_ram}"]
    for n, r in enumerate("ab"):
        for i in (1, 2):
            peers += ["--peer", f"{2 + 2 * n + i - 1}:{socks[r][i]}:{rams[r]}"]
    log = open(os.path.join(d, "server.log"), "w+")
    p = subprocess.Popen([server, "--vectors", str(VECTORS)] + peers,
                         stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and p.poll() is None:
        log.seek(0)
        if "serving" in log.read():
            return p, socks, log
        time.sleep(0.05)
    log.seek(0)
    text = log.read()
    if p.poll() is None:
        p.terminate()
        p.wait()
    fail(f"ntbfab-ivshmem-server did not start: {text.strip()}")


def boot(args, out, accel, kern, initrd, steps):
    d = gk.short_tmpdir("ktier-")
    ramdir = os.path.join("/dev/shm" if os.path.isdir("/dev/shm") else d,
                          os.path.basename(d) + "-ram")
    os.makedirs(ramdir, exist_ok=True)
    server = None
    try:
        rams = {r: os.path.join(ramdir, f"{r}.ram") for r in "ab"}
        for path in rams.values():
            with open(path, "wb") as f:
                f.truncate(RAM_MIB << 20)
        server, socks, slog = start_server(args.server, d, rams["a"], rams["b"])
        net = os.path.join(d, "net")
        os.makedirs(net)
        env, drive = list(args.env), None
        if "lntb" in steps:
            # guest a's NVMe drive, its bytes from a seed of this run only (guest b knows it)
            seed = int.from_bytes(os.urandom(8), "little")
            drive = os.path.join(ramdir, "nvme.img")
            with open(drive, "wb") as f:
                f.write(drive_pattern(seed, NVME_BYTES))
            env.append(f"NVME_SEED={seed:#x}")
        cmds, logs = {}, {}
        for role in "ab":
            logs[role] = os.path.join(out, f"guest-{role}.log")
            cmds[role] = (qemu_cmd(role, accel, kern, initrd, logs[role], rams[role],
                                   socks[role], net, steps, env,
                                   drive if role == "a" else None), logs[role])
        wall, errs = gk.boot(cmds, GUEST_TIMEOUT)
        slog.seek(0)
        with open(os.path.join(out, "server.log"), "w") as f:
            f.write(slog.read())
    finally:
        if server and server.poll() is None:
            server.terminate()  # the one we started, by its pid
            server.wait()
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(ramdir, ignore_errors=True)
    return logs, wall, errs


def expected(steps, extra):
    want = {"a": [], "b": []}
    for step in [None] + list(steps):
        for item in EXPECTED.get(step, []):
            roles, name = ((item[0],), item[1]) if isinstance(item, tuple) else ("ab", item)
            for r in roles:
                want[r].append(name)
    for item in extra:
        role, _, name = item.partition(":")
        for r in ("ab" if role == "both" else role):
            want[r].append(name)
    return want


# ---- main -----------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    gk.common_args(ap)
    ap.add_argument("--checkpatch", action="store_true",
                    help="run scripts/checkpatch.pl --strict over kernel/ and nothing else")
    ap.add_argument("--server", help="ntbfab-ivshmem-server")
    ap.add_argument("--test", help="ntbfab-ntbtest, statically linked")
    ap.add_argument("--prog", action="append", default=[], metavar="NAME=PATH",
                    help="another static program for the guests' /bin")
    ap.add_argument("--steps-file", action="append", default=[], metavar="FILE",
                    help="shell functions step_NAME that /init sources (docs/linux-ntb.md)")
    ap.add_argument("--steps", default=",".join(STEPS),
                    help=f"the steps to run, in order (default {','.join(STEPS)})")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="a variable for the guests' steps (PP_DELAY_MS, PERF_TOTAL_ORDER, ...)")
    ap.add_argument("--expect", action="append", default=[], metavar="ROLE:NAME",
                    help="a result a guest must report (ROLE a, b or both)")
    ap.add_argument("--json", help="where to write the results (default OUT/kernel-results.json)")
    ap.add_argument("--missing")
    args = ap.parse_args()
    gk.setup("kerneltier")
    for item in args.env:
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*=[A-Za-z0-9_.:/-]*", item):
            fail(f"--env {item}: NAME=VALUE with NAME in capitals and no spaces or commas")
    t_start = time.monotonic()
    if args.missing:
        fail(f"the guest programs cannot be linked statically: missing {args.missing}; install "
             f"the static libraries (make test's DEPS list the packages)")
    busybox = gk.ensure_tools()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    cache = gk.cache_dir(args.cache or os.path.join(args.build, "vm-cache"))
    kver, kern, mods, image_deb = gk.kernel(cache, MODULES)
    kdir, srcdir = kernel_sources(cache, kver, image_deb)
    if args.checkpatch:
        checkpatch(args.src, srcdir)
        return
    if not args.server or not args.test:
        fail("--server and --test are needed to boot the guests")
    steps = [s for s in args.steps.split(",") if s]
    t_fetch = time.monotonic()
    upstream = upstream_modules(cache, kdir, srcdir)
    ours = project_modules(args.src, out, kdir, upstream)
    t_build = time.monotonic()
    progs = {"ntbfab-ntbtest": args.test}
    for item in args.prog:
        name, _, path = item.partition("=")
        progs[name] = path
    files = {f"/etc/kernel-tier/{i:02d}-{os.path.basename(f)}": f
             for i, f in enumerate(args.steps_file)}
    # The lntb step's cluster (ntbfabd on backend linux-ntb) and its key.
    files["/etc/ntbfab/lntb.yaml"] = os.path.join(args.src, "tests", "kernel", "lntb.yaml")
    # The conform step's cluster: both ends of the loopback pair in guest a.
    files["/etc/ntbfab/conform.yaml"] = os.path.join(args.src, "tests", "kernel", "conform.yaml")
    files["/etc/ntbfab/conform-stx.yaml"] = os.path.join(args.src, "tests", "kernel",
                                                         "conform-stx.yaml")
    files["/etc/ntbfab/cluster.key"] = ((os.urandom(32).hex() + "\n").encode(), 0o600)
    kos = [os.path.join(upstream, f"{m}.ko") for m in UPSTREAM] + ours
    initrd = gk.initramfs(out, busybox, os.path.join(args.src, "tests", "kernel", "init.sh"),
                          progs=progs, files=files, mods=mods, extra_ko=kos)
    probe_log = os.path.join(out, "probe-kvm.log")
    accel, why = gk.accelerator(qemu_cmd("probe", "kvm", kern, initrd, probe_log), probe_log,
                                "KTIER_ACCEL")
    say(f"kernel {kver}, accelerator {accel} ({why}), steps {','.join(steps)}")
    logs, wall, errs = boot(args, out, accel, kern, initrd, steps)
    t_end = time.monotonic()

    rows, figures, failed = gk.check(expected(steps, args.expect), logs, "KTIER DONE")
    # The bytes sent over ntb_netdev and the bytes received, hashed on each side.
    if "netdev" in steps:
        sent = figures.get("netdev_tcp_sent_hash")
        got = figures.get("netdev_tcp_received_hash")
        ok = sent is not None and sent == got
        rows.append(("host", "netdev-tcp-hash", ok,
                     f"guest a sent and guest b received 64 MiB with hash {sent and sent[0]:.0f}"
                     if ok else f"sent hash {sent}, received hash {got}"))
    gk.print_rows("Kernel tier results (two guests joined by the emulated NTB, ntb_hw_ivshmem)",
                  rows)
    print()
    print("Figures")
    for name in sorted(figures):
        v, unit = figures[name]
        if not name.endswith("_hash"):
            print(f"  {name:40} {v:14.3f} {unit}")
    print()
    for role in "ab":
        print(f"  guest {role} wall time (QEMU start to power-off) {wall[role]:8.2f} s")
    print(f"  packages {t_fetch - t_start:.2f} s, module builds {t_build - t_fetch:.2f} s, "
          f"guests {t_end - t_build:.2f} s, total {t_end - t_start:.2f} s")
    summary = {
        "kernel": kver, "accelerator": accel, "accelerator_reason": why, "steps": steps,
        "results": [{"guest": r, "name": n, "ok": o, "detail": d} for r, n, o, d in rows],
        "figures": {k: {"value": v, "unit": u} for k, (v, u) in figures.items()},
        "guest_wall_s": wall, "total_s": t_end - t_start,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    gk.finish(args.json or os.path.join(out, "kernel-results.json"), summary, rows, failed,
              logs, errs)


if __name__ == "__main__":
    main()
