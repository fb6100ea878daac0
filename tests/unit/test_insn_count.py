# SPDX-License-Identifier: GPL-2.0-or-later
"""The insn-count TCG plugin (tests/insn-count/, scripts/bench-pods):
loaded in our QEMU with a firmware image of known instructions
(tests/insn-count/test-guest.S), it counts them exactly, at the high
("kernel") addresses and the low ones apart, both ways of counting
(per instruction, per block), and tells its socket's readers."""
import os
import subprocess
import sys
import time

import pytest

from harness import paths

sys.path.insert(0, os.path.join(paths.SRC, "tests", "insn-count"))
import insn_read  # noqa: E402

HERE = os.path.join(paths.SRC, "tests", "insn-count")


@pytest.fixture(scope="module")
def plugin():
    return subprocess.run([os.path.join(HERE, "build")], check=True, capture_output=True,
                          text=True).stdout.strip()


def firmware(tmp_path, kloop, uloop):
    obj, out = tmp_path / f"g{kloop}.o", tmp_path / f"g{kloop}-{uloop}.bin"
    subprocess.run(["gcc", "-c", f"-DKLOOP={kloop}", f"-DULOOP={uloop}", "-o", obj,
                    os.path.join(HERE, "test-guest.S")], check=True)
    subprocess.run(["ld", "-e", "0", "-Ttext=0", "--oformat", "binary", "-o", out, obj],
                   check=True)
    assert os.path.getsize(out) == 65536
    return out


def count(plugin, tmp_path, bios, per, icount=None):
    """The plugin's totals once the guest has halted (two reads 0.3 s apart
    agree)."""
    sock = str(tmp_path / f"{os.path.basename(bios)}-{per}.sock")
    p = subprocess.Popen([paths.QEMU_BIN, "-accel", "tcg", "-M", "q35", "-cpu", "max",
                          "-nodefaults", "-display", "none", "-bios", str(bios),
                          "-plugin", f"{plugin},sock={sock},per={per}"] +
                         (["-icount", icount] if icount else []),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, last = time.time() + 60, None
        while time.time() < deadline:
            assert p.poll() is None, p.stdout.read()
            try:
                now = insn_read.read(sock)
            except (FileNotFoundError, ConnectionRefusedError):
                now = None     # (not listening yet)
            if now and now == last and now["user"]:
                return now
            last = now
            time.sleep(0.3)
        pytest.fail(f"the counts did not settle: {last}")
    finally:
        p.kill()
        p.wait()


# (the bench runs its VM with -icount: the counts are the same there)
@pytest.mark.parametrize("per,icount", [("insn", None), ("tb", None),
                                        ("insn", "shift=0,sleep=on")])
def test_counts_a_known_guest_exactly(plugin, tmp_path, per, icount):
    a = count(plugin, tmp_path, firmware(tmp_path, 1000, 5000), per, icount)
    b = count(plugin, tmp_path, firmware(tmp_path, 3000, 2000), per, icount)
    # The high loop and its three instructions around it, nothing else.
    assert a["kernel"] == 2 * 1000 + 3 and b["kernel"] == 2 * 3000 + 3, (a, b)
    # The low loop's iterations are the whole difference of the rest.
    assert a["user"] - b["user"] == 2 * (5000 - 2000), (a, b)
    assert a["vcpus"] == 1


def test_a_bad_option_stops_qemu(plugin):
    p = subprocess.run([paths.QEMU_BIN, "-accel", "tcg", "-M", "none", "-display", "none",
                        "-plugin", f"{plugin},per=bogus"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode != 0 and "unknown option per=bogus" in p.stderr, p


def test_udp_blast_sends_exactly_count(plugin):
    """The bench's sender (built with the plugin): COUNT datagrams of SIZE
    bytes, in batches, then it ends."""
    import socket
    blast = os.path.join(os.path.dirname(plugin), "udp-blast")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as r:
        r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        r.bind(("127.0.0.1", 0))
        r.settimeout(5)
        p = subprocess.run([blast, "127.0.0.1", str(r.getsockname()[1]), "100", "1000", "7"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and p.stdout == "sent 1000\n", p
        got = [len(r.recv(2048)) for _ in range(1000)]
        assert got == [100] * 1000
        r.settimeout(0.2)
        with pytest.raises(socket.timeout):
            r.recv(2048)
    bad = subprocess.run([blast, "127.0.0.1", "9", "100"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr
