#!/usr/bin/env python3
"""tests/switchtec/cli_test.py: `ntbfab switchtec status|lut|rid` reads what the switch has.

The register model (ntbfab-stxmodel) lays out a switch in a GAS file and serves MRPC on a
socket. The test puts entries into the GAS as a switch would hold them (another host's
programming, or what a crash left), then checks that every view shows them, through the
mapping, through MRPC and through a cluster file's `switchtec:`, in text and in JSON.
Usage: cli_test.py NTBFAB STXMODEL
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

NTBFAB, MODEL = sys.argv[1], sys.argv[2]
NTB = 0x10000
GAS_SIZE = 0x134000


def ctrl(p):
    return NTB + 0x4000 + 0x2000 * p


def run(*args, rc=0):
    r = subprocess.run([NTBFAB, "switchtec", *args], capture_output=True, text=True)
    if r.returncode != rc:
        sys.exit(f"ntbfab switchtec {' '.join(args)}: exit {r.returncode}, want {rc}\n"
                 f"{r.stdout}{r.stderr}")
    return r


def main():
    d = tempfile.mkdtemp(prefix="stxcli.")
    gas, sock = os.path.join(d, "gas"), os.path.join(d, "mrpc")
    m = subprocess.Popen([MODEL, "--gas", gas, "--format", "--mrpc", sock, "--ep-map", "0x5"],
                         stdout=subprocess.PIPE, text=True)
    try:
        if m.stdout.readline().strip() != "ready":
            sys.exit("the model did not start")
        with open(gas, "r+b") as f:
            c = ctrl(0)
            # LUT entry 7 -> 0x80010000 in partition 2; requester 03:00.1 at entry 2 with
            # proxy devfn 3; BAR 2: 512 LUT entries of 64 KiB and a 32 MiB direct window.
            f.seek(c + 0x1000 + 8 * 7)
            f.write(struct.pack("<Q", 0x80010000 | 2 << 1 | 1))
            f.seek(c + 0x400 + 4 * 2)
            f.write(struct.pack("<I", 0x0301 << 16 | 3 << 1 | 1))
            f.seek(c + 0x40 + 16 * 2)
            f.write(struct.pack("<II", 1 | 1 << 4 | 1 << 5 | 16 << 8 | 511 << 14,
                                (32 << 20) | 25))
            # The switch refused something: the documented bar_error code.
            f.seek(c + 0x10)
            f.write(struct.pack("<I", 0x00030002))

        for where in (["--gas", gas], ["--mrpc", sock]):
            lut = json.loads(run("lut", "--json", *where).stdout)
            assert lut == [{"entry": 7, "partition": 2, "address": 0x80010000}], lut
            rid = json.loads(run("rid", *where, "--json").stdout)
            assert {"entry": 2, "requester": "03:00.1", "proxy_devfn": 3} in rid, rid
            assert [e["requester"] for e in rid] == ["00:00.0", "00:01.0", "03:00.1"], rid
            st = json.loads(run("status", "--json", *where).stdout)
            assert st["mrpc"] == (where[0] == "--mrpc"), st
            assert st["ep_map"] == 5 and st["status"] == "NORMAL", st
            assert st["bar_error"] == 0x00030002, st
            assert "the LUT window exceeds the size of BAR 2" in st["errors"], st
            assert st["bars"] == [{"bar": 2, "lut_count": 512, "lut_size": 65536,
                                   "direct_size": 32 << 20, "direct_xlate": 0}], st

        text = run("lut", "--gas", gas).stdout
        assert "0x80010000" in text and "7" in text, text
        text = run("status", "--gas", gas).stdout
        assert "bar_error 0x00030002" in text and "partition 0" in text, text
        text = run("rid", "--gas", gas).stdout
        assert "03:00.1" in text and "00.3" in text, text
        # The other partition has nothing but the host's entries.
        assert "no LUT entry enabled in partition 2" in run("lut", "--gas", gas,
                                                           "--partition", "2").stdout

        # Through a cluster file's switchtec: (gas: mrpc goes through the device).
        cl = os.path.join(d, "cluster.yaml")
        with open(cl, "w") as f:
            f.write(f"""cluster: {{name: stx, backend: switchtec}}
nodes:
  - name: a
    id: 4
    address: a:1
    adapters:
      - name: nt0
        model: switchtec-pfx
        switchtec: {{device: {sock}, gas: mrpc, partition: 0}}
      - name: nt1
        model: switchtec-pfx
        bdf: "0000:7e:1f.7"
        switchtec: {{partition: 4}}
  - name: b
    id: 8
    address: b:1
    adapters:
      - name: nt0
        model: switchtec-pfx
        switchtec: {{gas: {gas}, partition: 2}}
links:
  - [a.nt0, b.nt0]
""")
        st = json.loads(run("status", "--json", "-c", cl, "a.nt0").stdout)
        assert st["mrpc"] and st["partition"] == 0, st
        st = json.loads(run("status", "--json", "-c", cl, "b.nt0").stdout)
        assert not st["mrpc"] and st["partition"] == 2 and st["errors"] is None, st

        # Refusals name what is wrong.
        err = run("status", "--gas", gas, "--partition", "1", rc=1).stderr
        assert "partition 1 has no NT endpoint" in err, err
        err = run("status", "--gas", os.path.join(d, "nope"), rc=1).stderr
        assert "cannot open the switch's register space" in err, err
        err = run("status", "-c", cl, "a.nt9", rc=1).stderr
        assert "no adapter 'a.nt9'" in err, err
        # No gas: the switch is looked for in /sys/class/switchtec from the adapter's bdf; this
        # host has none that owns 7e:1f.7, and the sentence says what was looked at and to set gas.
        err = run("status", "-c", cl, "a.nt1", rc=1).stderr
        if os.path.isdir("/sys/class/switchtec"):
            want = "no Switchtec management function is NT function 0000:7e:1f.7"
        else:
            want = "cannot list /sys/class/switchtec to find the switch of NT function 0000:7e:1f.7"
        assert want in err and "switchtec: {gas: ...}" in err and "adapter a.nt1" in err, err
        err = run("routes", "--gas", gas, rc=2).stderr
        assert "unknown switchtec view 'routes'" in err, err
        err = run("lut", rc=2).stderr
        assert "--gas FILE or --mrpc DEVICE" in err, err
        short = os.path.join(d, "short")
        with open(short, "wb") as f:
            f.write(b"\0" * 4096)
        err = run("lut", "--gas", short, rc=1).stderr
        assert "less than the" in err and "resource0" in err, err
    finally:
        m.terminate()
        m.wait(timeout=60)
        subprocess.run(["rm", "-rf", d])
    print("ok")


main()
