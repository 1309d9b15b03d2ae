#!/usr/bin/env python3
"""tests/integration/hosts.py: a cluster of real hosts on one machine (docs/operations.md).

Every node is a network namespace of its own, cabled to a bridge in a namespace of its own
(veth pairs; the machine's own namespace sees none of it). Each node's daemon is started
exactly as ntbfabd.service starts it: the ExecStart line of the built unit, expanded as
systemd expands it, with the environment systemd gives a service (CONFIGURATION_DIRECTORY,
STATE_DIRECTORY, RUNTIME_DIRECTORY, LOGS_DIRECTORY, NOTIFY_SOCKET and the unit's
EnvironmentFile), in its namespace, with its own /etc/ntbfab, /var/lib/ntbfab and /run/ntbfab
(directories of this test). Nothing names the node: each daemon finds it by the address of
its namespace. The simulated fabric spans the namespaces because they share /dev/shm; on
real hosts the adapters and cables are the fabric.

It then borrows, returns, kills and restarts daemons through the CLI talking to one host's
daemon (NTBFAB_SOCKET), runs a SISCI example between two hosts, and checks the state after
each restart. Needs root (namespaces, the user ntbfab the unit drops to) and iproute2;
exit 77 (skipped) without them. Ports 18100-18102 (tests/README.md), inside the namespaces.
"""

import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

BUILD, SRC = sys.argv[1], sys.argv[2]
NTBFAB = os.path.join(BUILD, "tools", "ntbfab")
SIMD = os.path.join(BUILD, "ntbfab-simd")
UNIT = os.path.join(BUILD, "dist", "ntbfabd.service")
EX = os.path.join(BUILD, "frontends", "sisci-compat")
NODES = {"a": ("10.151.0.1", 4), "b": ("10.151.0.2", 8), "c": ("10.151.0.3", 12)}
TAG = f"ntbh{os.getpid()}"
SW = f"{TAG}-sw"

CLUSTER = """\
# A three-host cluster for tests/integration/hosts.py: each host in a network namespace.
cluster: {name: %(name)s, backend: sim, key_file: cluster.key, manager: a, lease: 4s}
nodes:
  - name: a
    id: 4
    address: 10.151.0.1:18100
    adapters: [{name: ntb0, model: pxh830, window: 1GiB}]
    devices:
      - {name: acc0, bdf: "0000:04:00.0", lend: true, sim: {model: accel, memory: 64MiB}}
  - name: b
    id: 8
    address: 10.151.0.2:18101
    adapters: [{name: ntb0, model: pxh830, window: 1GiB}]
  - name: c
    id: 12
    address: 10.151.0.3:18102
    adapters: [{name: ntb0, model: pxh830, window: 1GiB}]
links:
  - [a.ntb0, b.ntb0]
  - [a.ntb0.1, c.ntb0]
  - [b.ntb0.1, c.ntb0.1]
"""

procs = {}     # node -> Popen of its daemon
namespaces = []
failed = False


def log(msg):
    print(msg, flush=True)


def fail(msg):
    global failed
    failed = True
    print(f"FAIL: {msg}", file=sys.stderr, flush=True)
    for n in NODES:
        p = os.path.join(T, n, "stderr")
        if os.path.exists(p):
            print(f"== {n}'s daemon:\n" + open(p).read()[-3000:], file=sys.stderr)
    raise SystemExit(1)


def sh(*cmd, ns=None, check=True, env=None, timeout=60):
    argv = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    if check and r.returncode:
        fail(f"{' '.join(argv)} exited {r.returncode}: {r.stderr.strip()}")
    return r


def cli(node, *args, check=True):
    """ntbfab, in node's namespace, talking to node's daemon only (NTBFAB_SOCKET)."""
    env = dict(os.environ, NTBFAB_SOCKET=sock(node))
    env.pop("NTBFAB_DIR", None)
    r = sh(NTBFAB, *args, ns=ns_of(node), check=False, env=env)
    if check and r.returncode:
        fail(f"ntbfab {' '.join(args)} through {node}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def cli_json(node, verb, *args):
    return json.loads(cli(node, verb, "--json", *args).stdout)


def node_status(node):
    """node.status of node's daemon, or None while it does not answer."""
    r = cli(node, "rpc", "--json", "node.status", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def reachable(node):
    st = node_status(node)
    return bool(st and st["manager_reachable"])


def ns_of(node):
    return f"{TAG}-{node}"


def sock(node):
    return os.path.join(T, node, "run", "ntbfabd.sock")


# ---- the hosts -------------------------------------------------------------------------------

def make_network():
    sh("ip", "netns", "add", SW)
    namespaces.append(SW)
    sh("ip", "link", "add", "br0", "type", "bridge", ns=SW)
    sh("ip", "link", "set", "br0", "up", ns=SW)
    for n, (addr, _) in NODES.items():
        ns = ns_of(n)
        sh("ip", "netns", "add", ns)
        namespaces.append(ns)
        sh("ip", "link", "add", f"v{n}", "type", "veth", "peer", "name", "eth0", "netns", ns,
           ns=SW)
        sh("ip", "link", "set", f"v{n}", "master", "br0", "up", ns=SW)
        sh("ip", "addr", "add", f"{addr}/24", "dev", "eth0", ns=ns)
        sh("ip", "link", "set", "eth0", "up", ns=ns)
        sh("ip", "link", "set", "lo", "up", ns=ns)


def ensure_user():
    """The unit drops to the user ntbfab; the package creates it (sysusers.d), here we do."""
    try:
        return pwd.getpwnam("ntbfab")
    except KeyError:
        sh("useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
           "/var/lib/ntbfab", "--shell", "/usr/sbin/nologin", "ntbfab")
        return pwd.getpwnam("ntbfab")


def exec_start(env):
    """The unit's ExecStart, expanded as systemd does (${VAR} in a word, $VAR as words)."""
    line = next(l for l in open(UNIT) if l.startswith("ExecStart="))[len("ExecStart="):]
    words = []
    for w in shlex.split(line):
        if re.fullmatch(r"\$[A-Za-z_][A-Za-z0-9_]*", w):
            words += env.get(w[1:], "").split()
        else:
            words.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                                lambda m: env.get(m.group(1), ""), w))
    return words


def environment_file():
    """The EnvironmentFile= of the unit, as systemd reads it (KEY=VALUE, # comments)."""
    return [l.split("=", 1)[1].strip() for l in open(UNIT) if l.startswith("EnvironmentFile=")]


def activation_socket(node):
    """What ntbfabd.socket does: the socket made before the daemon, mode 0660."""
    path = sock(node)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o660)
    s.listen(64)
    return s


def start_daemon(node, opts="", expect_ready=True, listen=None):
    base = os.path.join(T, node)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C",
           "CONFIGURATION_DIRECTORY": os.path.join(base, "etc"),
           "STATE_DIRECTORY": os.path.join(base, "state"),
           "RUNTIME_DIRECTORY": os.path.join(base, "run"),
           "LOGS_DIRECTORY": os.path.join(base, "log"),
           "NOTIFY_SOCKET": os.path.join(T, f"notify-{node}"),
           # What /etc/default/ntbfabd holds on such hosts (dist/etc/default-ntbfabd).
           "NTBFAB_SIM_DIR": FABRIC}
    if opts:
        env["NTBFABD_OPTS"] = opts
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if os.path.exists(env["NOTIFY_SOCKET"]):
        os.unlink(env["NOTIFY_SOCKET"])
    notify.bind(env["NOTIFY_SOCKET"])
    os.chmod(env["NOTIFY_SOCKET"], 0o777)  # the daemon says READY=1 as the user ntbfab
    argv = exec_start(env)
    if not (argv[0].endswith("/ntbfabd") and "--node" not in argv):
        fail(f"ExecStart of {UNIT} is not ntbfabd without --node: {argv}")
    argv[0] = os.path.join(BUILD, "daemon", "ntbfabd")  # the built one, not the installed path
    err = open(os.path.join(base, "stderr"), "a")
    pre = None
    if listen:
        # Socket activation as systemd does it: the socket as fd 3, LISTEN_FDS=1 and
        # LISTEN_PID the daemon's own pid (the shell's, which execs it).
        env["LISTEN_FDS"] = "1"
        argv = ["sh", "-c", 'export LISTEN_PID=$$; exec "$@"', "sh"] + argv
        fd = listen.fileno()
        # fd 3, inheritable (Python makes sockets close-on-exec; dup2 onto itself would not
        # clear that).
        pre = (lambda: os.dup2(fd, 3)) if fd != 3 else (lambda: os.set_inheritable(3, True))
    p = subprocess.Popen(["ip", "netns", "exec", ns_of(node), "env", "-i"] +
                         [f"{k}={v}" for k, v in env.items()] + argv,
                         stdout=err, stderr=err, preexec_fn=pre, close_fds=not listen)
    procs[node] = p
    notify.settimeout(1)
    deadline = time.monotonic() + 30
    msgs = ""
    while "READY=1" not in msgs and p.poll() is None and time.monotonic() < deadline:
        try:
            msgs += notify.recv(4096).decode() + "\n"
        except socket.timeout:
            pass
    notify.close()
    if expect_ready and "READY=1" not in msgs:
        fail(f"{node}'s daemon sent no READY=1 (exit {p.poll()}; notifications: {msgs!r})")
    return p, msgs


def wait_for(what, cond, secs=30):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    fail(f"timed out waiting for {what}")


def proc_status(pid):
    st = {}
    for l in open(f"/proc/{pid}/status"):
        k, v = l.split(":", 1)
        st[k] = v.split()
    return st


# ---- the test -------------------------------------------------------------------------------

def main():
    if os.geteuid() != 0 or not shutil.which("ip"):
        print("SKIP: needs root and iproute2 (ip netns)")
        sys.exit(77)
    user = ensure_user()
    make_network()
    cfg = os.path.join(T, "cluster.yaml")
    open(cfg, "w").write(CLUSTER % {"name": TAG})
    sh(NTBFAB, "validate", cfg)
    # The simulated hardware: one fabric in /dev/shm that every namespace sees, owned by the
    # user the daemons become (they open parts of it after dropping root).
    os.makedirs(FABRIC)
    os.chown(FABRIC, user.pw_uid, user.pw_gid)
    simd = subprocess.Popen(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                             "--clear-groups", SIMD, "--config", cfg, "--dir", FABRIC, "--quiet"],
                            stdout=open(os.path.join(T, "simd.log"), "w"), stderr=subprocess.STDOUT)
    procs["simd"] = simd
    wait_for("the simulated fabric", lambda: os.path.exists(os.path.join(FABRIC, "fabric")), 20)
    sh(NTBFAB, "keygen", os.path.join(T, "cluster.key"))
    for n in NODES:
        etc = os.path.join(T, n, "etc")
        os.makedirs(etc)
        shutil.copy(cfg, os.path.join(etc, "cluster.yaml"))
        shutil.copy(os.path.join(T, "cluster.key"), os.path.join(etc, "cluster.key"))

    log("a key others can read is refused, with the chmod that fixes it")
    os.chmod(os.path.join(T, "a", "etc", "cluster.key"), 0o640)
    p, _ = start_daemon("a", expect_ready=False)
    if p.wait(20) != 1:
        fail(f"a's daemon with a 0640 key exited {p.returncode}, not 1")
    err = open(os.path.join(T, "a", "stderr")).read()
    if "chmod 600" not in err:
        fail(f"the refusal does not say 'chmod 600': {err}")
    os.chmod(os.path.join(T, "a", "etc", "cluster.key"), 0o600)

    log("three daemons, started as the unit starts them; c also logs to a file, and gets its "
        "socket from 'systemd' (ntbfabd.socket)")
    c_sock = activation_socket("c")
    for n in NODES:
        start_daemon(n, "--log stderr,file" if n == "c" else "", listen=c_sock if n == "c" else None)
    if "passed by systemd" not in open(os.path.join(T, "c", "stderr")).read():
        fail("c's daemon did not serve the socket it was passed")
    for n in NODES:
        wait_for(f"{n}'s daemon with the manager", lambda: reachable(n))
        me = node_status(n)
        if me["node"] != n:
            fail(f"the daemon in {n}'s namespace says it is {me['node']}")
        ps = proc_status(procs[n].pid)
        if ps["Uid"][1] != str(user.pw_uid) or int(ps["CapEff"][0], 16) != 0:
            fail(f"{n}'s daemon runs as uid {ps['Uid']} with CapEff {ps['CapEff']}, not as "
                 f"ntbfab without capabilities")
    st = cli_json("b", "status")
    if sorted(n for n, x in st["nodes"].items() if x and x["manager_reachable"]) != list(NODES):
        fail(f"b does not see every node up: {st['nodes']}")
    log("  each daemon found its node by its namespace's address, runs as ntbfab, no caps")

    log("b borrows a's accelerator, asked through c's daemon")
    bor = cli_json("c", "borrow", "a.acc0", "--node", "b")
    fdid = bor["fdid"]
    if bor["borrower"] != "b" or bor["lender"] != "a" or not bor["local_bdf"]:
        fail(f"unexpected borrow: {bor}")
    before = cli_json("b", "status")["nodes"]["b"]
    if before["borrows"] != 1 or before["programmed"] < 2:
        fail(f"b after the borrow: {before}")

    log("b's daemon is killed and started again: the borrow and its entries survive")
    procs["b"].send_signal(signal.SIGKILL)
    procs["b"].wait()
    start_daemon("b")
    wait_for("b back with the manager", lambda: reachable("b"))
    after = cli_json("b", "status")["nodes"]["b"]
    borrows = json.loads(cli("b", "rpc", "--json", "device.borrows").stdout)
    if (after["borrows"], after["programmed"]) != (before["borrows"], before["programmed"]) or \
            len(borrows) != 1 or borrows[0]["local_bdf"] != bor["local_bdf"]:
        fail(f"b after its restart: {after}, borrows {borrows}; before: {before}, {bor}")
    devs = cli_json("a", "devices")["devices"]
    if [d["state"] for d in devs if d["fdid"] == fdid] != ["exclusive"]:
        fail(f"the accelerator after b's restart: {devs}")

    log("an upgrade of b: node.shutdown keeping everything, then a start: the borrow survives")
    cli("b", "rpc", "node.shutdown", '{"keep": true}')
    if procs["b"].wait(20) != 0:
        fail(f"b's daemon exited {procs['b'].returncode} after node.shutdown keep")
    start_daemon("b")
    wait_for("b back with the manager", lambda: reachable("b"))
    again = cli_json("b", "status")["nodes"]["b"]
    borrows = json.loads(cli("b", "rpc", "--json", "device.borrows").stdout)
    if (again["borrows"], again["programmed"]) != (before["borrows"], before["programmed"]) or \
            [x["local_bdf"] for x in borrows] != [bor["local_bdf"]]:
        fail(f"b after its upgrade: {again}, borrows {borrows}; before: {before}")

    log("the manager's daemon (a) is killed and started again: the registry is the same")
    procs["a"].send_signal(signal.SIGKILL)
    procs["a"].wait()
    start_daemon("a")
    wait_for("the manager back", lambda: reachable("c") and reachable("b"))
    devs2 = cli_json("c", "devices")["devices"]
    if [(d["fdid"], d["state"], d["borrowers"]) for d in devs2] != \
            [(d["fdid"], d["state"], d["borrowers"]) for d in devs]:
        fail(f"devices after the manager's restart: {devs2}, before: {devs}")

    log("a returns b's borrow through its own daemon; the budgets come back")
    cli("a", "return", hex(fdid), "--node", "b")
    wait_for("the accelerator available", lambda: [d["state"] for d in cli_json(
        "c", "devices")["devices"] if d["fdid"] == fdid] == ["available"])
    st = cli_json("b", "status")
    if st["nodes"]["b"]["borrows"] != 0:
        fail(f"b still borrows: {st['nodes']['b']}")
    for row in st["cluster"]["budgets"]:
        if row["used"] != row["baseline"]:
            fail(f"budget not back after the return: {row}")

    log("SISCI between hosts: pingpong from b to a, each through its own daemon")
    env = dict(os.environ)
    env.pop("NTBFAB_DIR", None)
    srv = subprocess.Popen(["ip", "netns", "exec", ns_of("a"), "env",
                            f"NTBFAB_SOCKET={sock('a')}", "timeout", "60",
                            os.path.join(EX, "sisci-pingpong"), "-rn", "8", "-server", "-loops",
                            "200"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=env)
    cl = sh("env", f"NTBFAB_SOCKET={sock('b')}", "timeout", "60",
            os.path.join(EX, "sisci-pingpong"), "-rn", "4", "-loops", "200", ns=ns_of("b"),
            check=False, env=env)
    out = srv.communicate(timeout=70)[0]
    if cl.returncode or srv.returncode or "200 round trips" not in cl.stdout:
        fail(f"pingpong: client exit {cl.returncode}: {cl.stdout}{cl.stderr}; server exit "
             f"{srv.returncode}: {out}")

    log("SIGHUP reopens c's log file after a rotation")
    logf = os.path.join(T, "c", "log", "ntbfabd.log")
    os.rename(logf, logf + ".1")
    procs["c"].send_signal(signal.SIGHUP)
    wait_for("a new log file", lambda: os.path.exists(logf) and
             "log file reopened" in open(logf).read(), 10)

    log("c's daemon restarts on its activation socket: a client that connects meanwhile waits")
    procs["c"].send_signal(signal.SIGKILL)
    procs["c"].wait()
    early = subprocess.Popen([NTBFAB, "rpc", "--json", "node.status"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, NTBFAB_SOCKET=sock("c")))
    time.sleep(0.3)  # the client is connected (to systemd's socket) before the daemon runs
    start_daemon("c", listen=c_sock)
    out, errs = early.communicate(timeout=30)
    if early.returncode or json.loads(out)["node"] != "c":
        fail(f"a client of c during its restart: exit {early.returncode}: {out}{errs}")
    c_sock.close()

    log("SIGTERM stops every daemon cleanly")
    for n in ["b", "c", "a"]:
        procs[n].send_signal(signal.SIGTERM)
        if procs[n].wait(20) != 0:
            fail(f"{n}'s daemon exited {procs[n].returncode} after SIGTERM")
    print("1 passed, 0 failed")


def cleanup():
    for p in procs.values():
        if p.poll() is None:
            p.kill()
            p.wait()
    for ns in reversed(namespaces):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    if not (failed and os.environ.get("NTBFAB_KEEP")):
        shutil.rmtree(T, ignore_errors=True)
        shutil.rmtree(FABRIC, ignore_errors=True)


T = tempfile.mkdtemp(prefix="ntbfab-hosts-")
os.chmod(T, 0o755)  # the daemons reach their directories after dropping root
FABRIC = f"/dev/shm/ntbfab-hosts-{os.getpid()}"
try:
    main()
finally:
    cleanup()
