"""tests/guestkit.py: what the QEMU test tiers share (tests/vm/vmtier.py, tests/kernel/kerneltier.py,
tests/shadow/shadowtier.py): the tools, Debian's guest kernel, its modules and its kbuild tree,
modules of our own built against it, busybox initramfs images, the accelerator, the guests'
private network, booting guests in parallel and reading their RESULT and FIGURE lines.

A tier calls setup("name") first; its messages then start with "name: ". Downloads go to a cache
directory: NTBFAB_CACHE when set (shared by checkouts; written with atomic renames), else the
directory the tier names (build/vm-cache). Exit status 77 (meson: skipped) only when QEMU cannot
be installed at all.
"""

import contextlib
import fcntl
import glob
import hashlib
import json
import lzma
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

QEMU_PKGS = ["qemu-system-x86", "busybox-static", "cpio", "xz-utils"]
_tier = "guestkit"


def setup(tier):
    global _tier
    _tier = tier


def say(msg):
    print(f"{_tier}: {msg}", flush=True)


def fail(msg):
    print(f"{_tier}: FAIL: {msg}", flush=True)
    sys.exit(1)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def sudo():
    return [] if os.geteuid() == 0 else ["sudo", "-n"]


def common_args(ap):
    """The options every tier's harness takes: the checkout, the build, its output, the
    download cache."""
    ap.add_argument("--src", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cache")


def cache_dir(default):
    """NTBFAB_CACHE when set, else default; created."""
    d = os.path.abspath(os.environ.get("NTBFAB_CACHE") or default)
    os.makedirs(d, exist_ok=True)
    return d


@contextlib.contextmanager
def locked(path):
    """Hold an exclusive lock on path.lock: runs sharing a cache (two tests of make test, two
    checkouts with one NTBFAB_CACHE) wait for each other instead of doing the same work."""
    with open(path + ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def atomic_dir(final, fill):
    """Create directory final by calling fill(tmp) on a fresh directory next to it and renaming
    it: other runs sharing the cache see it complete or not at all."""
    with locked(final):
        if os.path.isdir(final):
            return final
        tmp = tempfile.mkdtemp(prefix=os.path.basename(final) + ".tmp-",
                               dir=os.path.dirname(final))
        try:
            fill(tmp)
            os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


# ---- tools ----------------------------------------------------------------------------------

def apt_install(pkgs):
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = sudo() + ["apt-get", "install", "-y", "--no-install-recommends"] + pkgs
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        subprocess.run(sudo() + ["apt-get", "update"], capture_output=True)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    return r


def ensure_tools(need_dgram=True):
    """QEMU, a static busybox and cpio: installed if missing (make test lists them too). Returns
    busybox's path."""
    need = [p for p, exe in [("qemu-system-x86", "qemu-system-x86_64"),
                             ("busybox-static", "busybox"), ("cpio", "cpio")]
            if not shutil.which(exe)]
    if need:
        say(f"installing {' '.join(QEMU_PKGS)}")
        apt_install(QEMU_PKGS)
    if not shutil.which("qemu-system-x86_64"):
        say("SKIPPED: QEMU cannot be installed here (apt-get install qemu-system-x86 failed); "
            "this tier needs it")
        sys.exit(77)
    if need_dgram:
        # The guests' network is a -netdev dgram pair (QEMU 7.2 and later).
        r = subprocess.run(["qemu-system-x86_64", "-netdev", "help"], capture_output=True,
                           text=True)
        if "dgram" not in r.stdout.split():
            ver = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True,
                                 text=True).stdout.split("\n")[0]
            fail(f"{ver} has no '-netdev dgram' (QEMU 7.2 or later): the guests' network "
                 f"needs it")
    busybox = shutil.which("busybox")
    if not busybox or not is_static(busybox):
        fail(f"busybox ({busybox}) is not statically linked: install busybox-static")
    return busybox


def is_static(path):
    """An ELF executable without a PT_INTERP program header (no dynamic loader)."""
    with open(path, "rb") as f:
        h = f.read(64)
        if h[:4] != b"\x7fELF" or h[4] != 2:
            return False
        phoff, = struct.unpack_from("<Q", h, 32)
        phentsize, phnum = struct.unpack_from("<HH", h, 54)
        f.seek(phoff)
        for _ in range(phnum):
            ph = f.read(phentsize)
            if struct.unpack_from("<I", ph, 0)[0] == 3:  # PT_INTERP
                return False
    return True


# ---- Debian packages ------------------------------------------------------------------------

def image_package():
    """The name of the kernel package linux-image-amd64 depends on."""
    for _ in range(2):
        r = subprocess.run(["apt-cache", "depends", "linux-image-amd64"], capture_output=True,
                           text=True)
        m = re.search(r"Depends: (linux-image-[0-9]\S*)", r.stdout)
        if m:
            return m.group(1)
        subprocess.run(sudo() + ["apt-get", "update"], capture_output=True)
    fail("cannot find Debian's linux-image-amd64 package (apt-cache depends)")


def download(cache, pkg, version=None):
    """The .deb of pkg (at version, when given) in cache: apt-get download once, kept."""
    with locked(os.path.join(cache, pkg)):
        return _download(cache, pkg, version)


def _download(cache, pkg, version):
    def found():
        return sorted(f for f in os.listdir(cache) if f.startswith(pkg + "_")
                      and f.endswith(".deb") and (not version or f.split("_")[1] == version))
    debs = found()
    if not debs:
        say(f"downloading {pkg}{'=' + version if version else ''} (once; kept in {cache})")
        tmp = tempfile.mkdtemp(prefix="apt-", dir=cache)
        try:
            r = subprocess.run(["apt-get", "download", pkg + ("=" + version if version else "")],
                               cwd=tmp, capture_output=True, text=True)
            if r.returncode != 0:
                subprocess.run(sudo() + ["apt-get", "update"], capture_output=True)
                r = subprocess.run(["apt-get", "download",
                                    pkg + ("=" + version if version else "")],
                                   cwd=tmp, capture_output=True, text=True)
            for f in os.listdir(tmp):
                os.rename(os.path.join(tmp, f), os.path.join(cache, f))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        debs = found()
        if not debs:
            fail(f"apt-get download {pkg} failed: {r.stderr.strip()}")
    return os.path.join(cache, debs[-1])


def deb_field(deb, field):
    return subprocess.run(["dpkg-deb", "-f", deb, field], capture_output=True, text=True,
                          check=True).stdout.strip()


# ---- the guest kernel -----------------------------------------------------------------------

def kernel(cache, modules):
    """Debian's guest kernel package, downloaded once into cache, and what the guests need
    taken out of it once: the PVH vmlinux (the bzImage as a fallback) and the .ko files of
    `modules` with their dependencies, in load order. Returns (kver, kernel, module paths,
    the package's .deb)."""
    with locked(os.path.join(cache, "linux-image")):
        return _kernel(cache, modules)


def _kernel(cache, modules):
    pkg = None
    debs = [f for f in os.listdir(cache) if f.startswith("linux-image-") and f.endswith(".deb")]
    if not debs:
        pkg = image_package()
    deb = download(cache, pkg) if pkg else os.path.join(cache, sorted(debs)[-1])
    kver = os.path.basename(deb).split("_")[0][len("linux-image-"):]
    # The modules, resolved for this list; a new list extracts the package again.
    mods_dir = os.path.join(cache, f"modules-{kver}-" + "-".join(m.replace("_", "-")
                                                                for m in modules))
    vmlinux = os.path.join(cache, "vmlinux-" + kver)
    bzimage = os.path.join(cache, "vmlinuz-" + kver)
    if not os.path.exists(os.path.join(mods_dir, "order")) or not os.path.exists(bzimage):
        say(f"extracting {os.path.basename(deb)}")
        root = tempfile.mkdtemp(prefix="kroot-", dir=cache)
        try:
            run(["dpkg-deb", "-x", deb, root])
            if not os.path.exists(bzimage):
                shutil.copy(os.path.join(root, "boot", "vmlinuz-" + kver), bzimage + ".tmp")
                os.rename(bzimage + ".tmp", bzimage)

            def fill(d):
                order = resolve_modules(root, kver, modules)
                for m in order:
                    shutil.copy(m, d)
                with open(os.path.join(d, "order"), "w") as f:
                    f.write("\n".join(os.path.basename(m) for m in order) + "\n")
            if not os.path.exists(os.path.join(mods_dir, "order")):
                shutil.rmtree(mods_dir, ignore_errors=True)
                atomic_dir(mods_dir, fill)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    mods = [os.path.join(mods_dir, line) for line in open(os.path.join(mods_dir, "order"))
            .read().split()]
    if not os.path.exists(vmlinux):
        # The uncompressed PVH ELF boots about 3 s faster under TCG than the bzImage.
        data = open(bzimage, "rb").read()
        off = data.find(b"\xfd7zXZ\x00")
        try:
            elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[off:])
            if off < 0 or elf[:4] != b"\x7fELF":
                raise ValueError("no ELF inside")
            with open(vmlinux + ".tmp", "wb") as f:
                f.write(elf)
            os.rename(vmlinux + ".tmp", vmlinux)
        except (lzma.LZMAError, ValueError) as e:
            say(f"cannot extract the PVH vmlinux ({e}); booting the bzImage (slower)")
            return kver, bzimage, mods, deb
    return kver, vmlinux, mods, deb


def resolve_modules(root, kver, names):
    """The .ko files names need, dependencies first (from each module's depends=)."""
    base = os.path.join(root, "lib", "modules", kver, "kernel")
    index = {}
    for d, _, files in os.walk(base):
        for f in files:
            if f.endswith(".ko"):
                index[f[:-3].replace("-", "_")] = os.path.join(d, f)
    order, seen = [], set()

    def add(name):
        key = name.replace("-", "_")
        if key in seen:
            return
        seen.add(key)
        if key not in index:
            fail(f"module {name} is not in the kernel package (built in?)")
        m = re.search(rb"depends=([^\x00]*)\x00", open(index[key], "rb").read())
        for dep in (m.group(1).decode().split(",") if m and m.group(1) else []):
            add(dep)
        order.append(index[key])

    for name in names:
        add(name)
    return order


# ---- modules built against the guest kernel --------------------------------------------------

def kernel_headers(cache, kver, image_deb):
    """Debian's kbuild tree of the guest kernel: linux-headers-KVER of the image's version with
    its -common headers and linux-kbuild, unpacked once into cache. Returns KDIR."""
    version = deb_field(image_deb, "Version")
    hdr = download(cache, f"linux-headers-{kver}", version)
    deps = deb_field(hdr, "Depends")
    common = re.search(r"(linux-headers-\S+-common)", deps)
    kbuild = re.search(r"(linux-kbuild-[0-9.]+)", deps)
    if not common or not kbuild:
        fail(f"linux-headers-{kver} depends on no -common headers or linux-kbuild: {deps}")
    debs = [hdr, download(cache, common.group(1), version),
            download(cache, kbuild.group(1), version)]

    def unpack(d):
        for deb in debs:
            run(["dpkg-deb", "-x", deb, d])
    root = atomic_dir(os.path.join(cache, f"kbuild-{kver}-{version}"), unpack)
    kdir = os.path.join(root, "usr", "src", f"linux-headers-{kver}")
    # Its Makefile includes the -common headers' by absolute path (/usr/src/...): point it at
    # the unpacked copy, wherever the cache is now.
    mk = os.path.join(kdir, "Makefile")
    with locked(mk):
        text = open(mk).read()
        fixed = re.sub(r"include \S*/(linux-headers-[^/\s]+-common)/Makefile",
                       lambda m: f"include {root}/usr/src/{m.group(1)}/Makefile", text)
        if fixed == text and f"include {root}/" not in text:
            fail(f"{mk} includes no -common headers' Makefile: unknown layout")
        if fixed != text:
            with open(mk + ".tmp", "w") as f:
                f.write(fixed)
            os.rename(mk + ".tmp", mk)
    return kdir


def kbuild(kdir, m_dir, args=()):
    """make -C KDIR M=m_dir modules ARGS; fails on an error or on any warning (the log is
    m_dir/build.log)."""
    cmd = ["make", "-C", kdir, f"M={os.path.abspath(m_dir)}", "-j2", "modules"] + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True)
    with open(os.path.join(m_dir, "build.log"), "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        fail(f"building the modules in {m_dir} failed:\n{(r.stdout + r.stderr)[-4000:]}")
    warnings = [line for line in (r.stdout + r.stderr).splitlines()
                if "warning:" in line or "WARNING:" in line]
    if warnings:
        fail(f"the modules in {m_dir} build with warnings:\n" + "\n".join(warnings))


def build_modules(kdir, src_dir, out_dir, names, args=(), also=(), kbuild_lines=""):
    """names (.ko files) built from a copy of src_dir in out_dir (kbuild writes next to the
    sources, and the checkout stays clean), with the files also copied in beside them and
    kbuild_lines added to its Kbuild. Built again only when a source or the kernel tree
    changed. Returns the .ko paths, in the order of names."""
    h = hashlib.sha1(f"{kdir} {list(args)} {kbuild_lines}".encode())
    for f in sorted(glob.glob(os.path.join(src_dir, "**", "*"), recursive=True)) + list(also):
        if os.path.isfile(f) and not re.search(r"\.(o|ko|cmd)$|\.mod|build\.log$", f):
            h.update(f.encode() + b"\0" + open(f, "rb").read())
    kos = [os.path.join(out_dir, n + ".ko") for n in names]
    stamp = os.path.join(out_dir, "sources.sha1")
    if all(map(os.path.exists, kos + [stamp])) and open(stamp).read() == h.hexdigest():
        return kos
    shutil.rmtree(out_dir, ignore_errors=True)
    shutil.copytree(src_dir, out_dir,
                    ignore=shutil.ignore_patterns("*.ko", "*.o", "*.mod*", ".*.cmd"))
    for f in also:
        shutil.copy(f, out_dir)
    if kbuild_lines:
        with open(os.path.join(out_dir, "Kbuild"), "a") as f:
            f.write(kbuild_lines)
    kbuild(kdir, out_dir, args)
    missing = [k for k in kos if not os.path.exists(k)]
    if missing:
        fail(f"the build in {out_dir} made no {', '.join(map(os.path.basename, missing))}")
    with open(stamp, "w") as f:
        f.write(h.hexdigest())
    return kos


# ---- the initramfs --------------------------------------------------------------------------

def initramfs(out, busybox, init, progs=None, files=None, mods=(), extra_ko=()):
    """An uncompressed newc initramfs in out/initrd.cpio: static busybox, init as /init,
    progs {name: path} in /bin (each must be static), files {guest path: host path, bytes, or
    (either, mode)},
    mods (Debian's, in load order) in /lib/modules with /lib/modules/order, extra_ko (.ko files
    of our own or built from source) in /lib/modules/extra."""
    d = os.path.join(out, "initrd")
    shutil.rmtree(d, ignore_errors=True)
    for sub in ["bin", "lib/modules/extra", "etc", "proc", "sys", "dev", "run", "tmp"]:
        os.makedirs(os.path.join(d, sub))
    shutil.copy(busybox, os.path.join(d, "bin", "busybox"))
    for name, path in (progs or {}).items():
        if not is_static(path):
            fail(f"{path} is not statically linked; the guests have no shared libraries")
        shutil.copy(path, os.path.join(d, "bin", name))
    modules_into(d, mods)
    for ko in extra_ko:
        shutil.copy(ko, os.path.join(d, "lib", "modules", "extra"))
    for dst, src in (files or {}).items():
        path = os.path.join(d, dst.lstrip("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        src, mode = src if isinstance(src, tuple) else (src, None)
        if isinstance(src, bytes):
            with open(path, "wb") as f:
                f.write(src)
        else:
            shutil.copy(src, path)
        if mode is not None:
            os.chmod(path, mode)
    shutil.copy(init, os.path.join(d, "init"))
    os.chmod(os.path.join(d, "init"), 0o755)
    return pack(d, os.path.join(out, "initrd.cpio"))


def modules_into(d, mods):
    """Copy the kernel modules mods into d/lib/modules, with the order /init loads them in."""
    os.makedirs(os.path.join(d, "lib", "modules"), exist_ok=True)
    names = []
    for m in mods:
        name = os.path.basename(m)[:-3]
        shutil.copy(m, os.path.join(d, "lib", "modules", name + ".ko"))
        names.append(name)
    with open(os.path.join(d, "lib", "modules", "order"), "w") as f:
        f.write("\n".join(names) + "\n")


def pack(d, img):
    """The directory d as the newc cpio archive img (an initramfs); returns img."""
    names = subprocess.run(["find", "."], cwd=d, capture_output=True, text=True,
                           check=True).stdout
    # Uncompressed: the guest would spend longer inflating it than QEMU spends loading it.
    with open(img, "wb") as f:
        run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=d, input=names.encode(), stdout=f)
    return img


# ---- KVM or TCG -----------------------------------------------------------------------------

def accelerator(probe_cmd, log, env_var):
    """KVM when it really works here, TCG otherwise: /dev/kvm usable, the CPU advertising vmx
    or svm, and a probe guest (probe_cmd, a QEMU command under KVM writing its console to log)
    printing "VMTIER PROBE OK". env_var (tcg|kvm) overrides. Returns (accel, why)."""
    if os.environ.get(env_var) in ("tcg", "kvm"):
        return os.environ[env_var], env_var
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg", "no usable /dev/kvm"
    flags = open("/proc/cpuinfo").read()
    if not re.search(r"^flags\s*:.*\b(vmx|svm)\b", flags, re.M):
        what = "kvm_pvm" if os.path.exists("/sys/module/kvm_pvm") else "a software backend"
        return "tcg", (f"/dev/kvm is {what} and the CPU has no vmx/svm: a stock kernel cannot "
                       f"run on it")
    if os.path.exists(log):
        os.unlink(log)
    p = subprocess.Popen(probe_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)  # the one we started, by its pid
        p.communicate()
        return "tcg", "a KVM guest did not reach /init within 60 s"
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    if "VMTIER PROBE OK" in text:
        return "kvm", "a probe guest booted under KVM"
    return "tcg", f"a KVM guest failed: {err.decode(errors='replace').strip()[-200:]}"


def cpu_for(accel):
    return "host" if accel == "kvm" else "max"


def guest_net(net, role, mac_last, peer_role):
    """QEMU arguments of a NIC on the guests' private network: a datagram pair over two Unix
    sockets in the run's directory net (no host port, no bridge, nothing else on it)."""
    me, peer = os.path.join(net, role), os.path.join(net, peer_role)
    return ["-netdev", f"dgram,id=n0,local.type=unix,local.path={me},"
            f"remote.type=unix,remote.path={peer}",
            "-device", f"virtio-net-pci,netdev=n0,mac=52:54:00:99:00:{mac_last:02x}"]


def short_tmpdir(prefix):
    """A directory under /tmp for Unix sockets (their paths are limited to 107 bytes)."""
    return tempfile.mkdtemp(prefix=prefix, dir="/tmp")


def boot(cmds, timeout):
    """Run the QEMU commands {role: (cmd, log)} at once; each may run for timeout seconds
    (then it is killed by its pid). Returns ({role: wall seconds}, {role: QEMU's stderr})."""
    procs, t0 = {}, time.monotonic()
    for role, (cmd, log) in cmds.items():
        if os.path.exists(log):
            os.unlink(log)
        procs[role] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall, errs = {}, {}
    for role, p in procs.items():
        left = max(1, timeout - (time.monotonic() - t0))
        try:
            _, err = p.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)  # the one we started, by its pid
            _, err = p.communicate()
            err = (err or b"") + f"\n{_tier}: killed after {timeout} s".encode()
        wall[role] = time.monotonic() - t0
        errs[role] = err.decode(errors="replace")
    return wall, errs


def parse(log):
    """A guest's RESULT name ok|FAIL detail and FIGURE name value unit lines."""
    results, figures = {}, {}
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    for line in text.splitlines():
        m = re.match(r"RESULT (\S+) (ok|FAIL) ?(.*)", line)
        if m:
            results[m.group(1)] = (m.group(2) == "ok", m.group(3))
        m = re.match(r"FIGURE (\S+) (\S+) (\S+)", line)
        if m:
            try:
                figures[m.group(1)] = (float(m.group(2)), m.group(3))
            except ValueError:
                pass
    return results, figures, text


def check(expected, logs, done_marker):
    """The rows of a run: every expected result (per role) must be there and ok, every other
    result reported must be ok, and each guest must print done_marker + role. Returns (rows
    [(role, name, ok, detail)], figures {name: (value, unit)}, the roles that failed)."""
    rows, figures, failed = [], {}, []
    for role in sorted(logs):
        results, figs, text = parse(logs[role])
        figures.update(figs)
        for name in expected.get(role, []):
            ok, detail = results.get(name, (False, "missing: the guest never reported it"))
            rows.append((role, name, ok, detail))
            if not ok:
                failed.append(role)
        for name, (ok, detail) in results.items():
            if name not in expected.get(role, []):
                rows.append((role, name, ok, detail))
                if not ok:
                    failed.append(role)
        if f"{done_marker} {role}" not in text:
            failed.append(role)
            rows.append((role, "powered-off-cleanly", False, "the guest never finished"))
    return rows, figures, sorted(set(failed))


def print_rows(title, rows):
    print()
    print(title)
    for role, name, ok, detail in rows:
        print(f"  [{role:4}] {'ok  ' if ok else 'FAIL'} {name}: {detail[:300]}")


def print_tails(roles, logs, errs, lines=60):
    for role in roles:
        tail = open(logs[role], errors="replace").read().splitlines()[-lines:] \
            if os.path.exists(logs[role]) else []
        print(f"\n---- guest {role}: the last {len(tail)} lines of {logs[role]}")
        print("\n".join(tail))
        if errs.get(role, "").strip():
            print(f"---- guest {role}: QEMU's stderr\n{errs[role].strip()[-3000:]}")


def finish(path, summary, rows, failed, logs, errs):
    """The end of a run: summary as JSON in path, the failed guests' logs, exit 1 on any
    failure."""
    with open(path, "w") as f:
        json.dump(summary, f, indent=2)
    print(f"  JSON: {path}")
    print_tails(failed, logs, errs)
    if failed or not all(ok for _, _, ok, _ in rows):
        sys.exit(1)
