# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 1: live migration of a VM whose VFs come from vdpa-pool-daemon
(issue 18).

In the emulated host: the daemon with OVS (its VFs: netdevsim VFs paired
with vdpa_sim_net devices, their representors ports of br-vpd), and two
QEMUs with a vsriov-daemon-pool each, on the same daemon pool, premapped
and lazy (whose destination claims when the migration starts).
The source's "guest" (played through qtest: tests/harness/qtest_pci.py)
enables two VFs and puts VF 0 into VLAN 100.  The VM migrates to the
destination, which claimed VFs of its own at start: the VF configuration
arrives there (QMP), the daemon applies it to the destination's VFs (their
ports get tag 100 and the flows), and once the source QEMU is gone its
VFs are free again, default-deny (VLAN 4095).  A destination that cannot
claim VFs (the pool is empty) never starts, and the source goes on; a lazy
one fails the migration when its claim is refused, before the source
stops.  The migrations run with switchover-ack: the source does not stop
before the destination's VFs are there."""
import json

import pytest

from harness.e2e import daemon_binary, start_daemon, stop_daemon
from harness.ovs import L1_OVS_START
from nested.test_l1_daemon import OVS_CONF, flows

pytestmark = [pytest.mark.slow, pytest.mark.nested]

QEMU = "/vsriov/qemu-build/qemu-system-x86_64"
API = "/run/vpd-ovs/api.sock"
UUID = "6c0b64e2-5f3a-4d8e-9b1f-2f1c8f1e7a01"   # the VM's, on both hosts

def qemu_cmd(name, extra="", lazy=False):
    """A VM of the emulated host whose PF's VFs come from the daemon's pool
    a (premapped: claimed at start; lazy: at VF Enable, or on a migration's
    destination when it starts); vdpa_sim maps shared file-backed RAM."""
    return (f"setsid {QEMU} -M q35 -nodefaults -display none -accel qtest "
            f"-name vm1 -uuid {UUID} "
            f"-qtest unix:/tmp/{name}-qt.sock,server=on,wait=off -qtest-log /dev/null "
            f"-qmp unix:/tmp/{name}-q.sock,server=on,wait=off "
            "-object memory-backend-memfd,id=mem0,size=512M,share=on "
            "-machine memory-backend=mem0 -m 512M "
            f"-object vsriov-daemon-pool,id=p0,socket={API},pool=a,count=2,handover=on"
            f"{',lazy=on' if lazy else ''} "
            "-device pcie-root-port,id=rp0,chassis=1,addr=0x2 -netdev user,id=n0 "
            f"-device virtio-net-pci,bus=rp0,id=pf0,netdev=n0,sriov-pool=p0 {extra} "
            f"> /scratch/qemu-{name}.log 2>&1 < /dev/null & echo $! > /tmp/{name}.pid")


def qmp(l1host, name, cmd, args=None):
    """QMP to the Level 1 QEMU @name (qemu_cmd's sockets and log)."""
    return l1host.qmp_at(f"/tmp/{name}-q.sock", cmd, args,
                      lambda: l1host.check(f"cat /scratch/qemu-{name}.log"))


# The destination acknowledges the switch-over once its VFs are there (a
# lazy pool's claim): the source does not stop before.
ACK = {"capabilities": [{"capability": c, "state": True}
                        for c in ("return-path", "switchover-ack")]}


def claimed_vfs(l1host, poolctl):
    """The VFs of pool a that someone holds."""
    return sorted(v["vf"] for v in json.loads(
        l1host.check(f"{poolctl} status --json --socket {API}"))
        if v["pool"] == "a" and v.get("owner"))


def start_source(l1host, poolctl, lazy=False):
    """The source QEMU: its "guest" enables 2 VFs and puts VF 0 in VLAN 100,
    which the daemon puts on VF 0's switch port.  Returns that port."""
    l1host.check(qemu_cmd("src", lazy=lazy))
    qmp(l1host, "src", "query-status")
    out = l1host.check("python3 /src/tests/harness/qtest_pci.py /tmp/src-qt.sock vfs 2",
                       timeout=120)
    assert out.split()[:2] == ["vfe=1", "present=2"], out
    assert l1host.check("python3 /src/tests/harness/qtest_pci.py /tmp/src-qt.sock "
                        "vlan 0 100", timeout=60).strip() == "status=0"
    # (the daemon's VF with VF 0's MAC)
    mac0 = qmp(l1host, "src", "query-vsriov")[0]["vfs"][0]["mac"]
    (port0,) = [v["port"] for v in json.loads(
        l1host.check(f"{poolctl} status --json --socket {API}"))
        if v["pool"] == "a" and v.get("owner") and v["mac"] == mac0]
    l1host.wait_until(f"test $(ovs-vsctl get Port {port0} tag) = 100", timeout=30)
    return port0


def start_other_vm(l1host):
    """Another VM's QEMU, which holds 3 VFs of pool a."""
    l1host.check(f"setsid {QEMU} -M q35 -nodefaults -display none -accel qtest "
                 "-qmp unix:/tmp/other-q.sock,server=on,wait=off "
                 f"-object vsriov-daemon-pool,id=p9,socket={API},pool=a,count=3 "
                 "> /scratch/qemu-other.log 2>&1 < /dev/null & echo $! > /tmp/other.pid")
    qmp(l1host, "other", "query-status")


def source_as_it_was(l1host, poolctl, claims, flows_before, port0):
    """After a failed migration: the source runs with its VFs (and the
    claims are @claims), the switch's flows are @flows_before, VF 0's port
    @port0 is in VLAN 100, and the guest still configures its VFs through
    the daemon: VF 0's next VLAN reaches that port."""
    assert claimed_vfs(l1host, poolctl) == claims
    assert qmp(l1host, "src", "query-status")["status"] == "running"
    assert flows(l1host) == flows_before
    assert tag(l1host, port0) == "100", f"VF 0's port {port0}"
    assert l1host.check("python3 /src/tests/harness/qtest_pci.py /tmp/src-qt.sock "
                        "vlan 0 101", timeout=60).strip() == "status=0"
    l1host.wait_until(f"test $(ovs-vsctl get Port {port0} tag) = 101", timeout=30)


def migrate_with_ack(l1host, until):
    """Migrate src to dst (started with -incoming defer), both with
    return-path and switchover-ack, until the source's status is @until."""
    for side in ("src", "dst"):
        qmp(l1host, side, "migrate-set-capabilities", ACK)
    qmp(l1host, "dst", "migrate-incoming", {"uri": "unix:/tmp/mig.sock"})
    qmp(l1host, "src", "migrate", {"uri": "unix:/tmp/mig.sock"})
    l1host.wait_until("python3 /src/tests/harness/qmp.py /tmp/src-q.sock query-migrate | "
                      f"grep -q '\"status\": \"{until}\"'", timeout=120)


def tag(l1host, port):
    return l1host.check(f"ovs-vsctl get Port {port} tag").strip()


@pytest.fixture(scope="module")
def daemon_host(l1host):
    """The emulated host with OVS and the daemon (pool a lets a VM's VFs
    pass a MAC between its QEMUs, a migration, with the source's hand-over
    token); yields vdpa-poolctl."""
    daemon = daemon_binary()
    poolctl = daemon.replace("vdpa-pool-daemon/vdpa-pool-daemon", "vdpa-pool-daemon/vdpa-poolctl")
    l1host.check("modprobe -a vhost_vdpa vdpa_sim_net netdevsim openvswitch")
    pf = l1host.new_netdevsim(9)
    conf = OVS_CONF.format(pf=pf).replace("mac-policy = any\n",
                                          "mac-policy = any\nmac-handover = token\n")
    assert "mac-handover" in conf
    l1host.check(f"cat > /tmp/vpd.conf <<'EOF'\n{conf}EOF")
    l1host.check(L1_OVS_START, timeout=120)
    start_daemon(l1host, daemon)
    yield poolctl
    stop_daemon(l1host)


@pytest.mark.parametrize("lazy", [False, True], ids=["premapped", "lazy"])
def test_daemon_pool_vm_migrates_and_its_flows_follow(l1host, daemon_host, lazy):
    poolctl = daemon_host

    def status():
        return {(v["pool"], v["vf"]): v for v in json.loads(
            l1host.check(f"{poolctl} status --json --socket {API}"))}

    try:
        src_port0 = start_source(l1host, poolctl, lazy=lazy)
        src_vfs = qmp(l1host, "src", "query-vsriov")[0]["vfs"]
        assert [v["backend"] for v in src_vfs] == ["vhost-vdpa"] * 2
        st = status()
        src_owned = sorted(k for k, v in st.items() if v.get("owner") and k[0] == "a")
        assert len(src_owned) == 2, {k: v.get("owner") for k, v in st.items()}
        src_mac0 = src_vfs[0]["mac"]
        # Another client of the same uid, claiming under the VM's own owner
        # name, cannot take the source VF's MAC: only the source's
        # hand-over token lends it, which the migration carries.
        thief = ("import sys; sys.path.insert(0, '/src/tests'); from harness import vpd; "
                 f"c = vpd.Client('{API}'); "
                 f"((vf, fd),) = c.claim('a', 1, owner='p0@{UUID}', handover=True); "
                 f"c.set_attrs(vf['HANDLE'], mac='{src_mac0}')")
        r = l1host.run(f'python3 -c "{thief}"', timeout=60)
        assert r.status != 0 and f"[errno 98] MAC {src_mac0} is in use by another VF" \
            in r.stderr, str(r)

        # A destination whose VFs the daemon cannot give (another VM holds
        # 3 of the 4 left) does not start, and says why; the source runs on.
        # (A lazy destination claims when the migration starts: the next
        # test.)
        start_other_vm(l1host)
        r = l1host.run(qemu_cmd("small", "-incoming defer").replace(
            "> /scratch/qemu-small.log 2>&1 < /dev/null & echo $! > /tmp/small.pid", "")
            .replace("setsid ", ""), timeout=120)
        assert r.status == 1 and "pool 'a' has 1 free VF(s), 2 asked" in r.stderr, str(r)
        assert qmp(l1host, "src", "query-status")["status"] == "running"
        l1host.check("kill $(cat /tmp/other.pid)")
        l1host.wait_until(f"test $({poolctl} status --json --socket {API} | "
                          "python3 -c 'import json,sys; print(sum(1 for v in json.load(sys.stdin) "
                          "if v[\"pool\"] == \"a\" and v[\"owner\"]))') = 2", timeout=30)

        # The destination claims two VFs of its own: premapped when it
        # starts, lazy when the migration starts (the source's count).
        l1host.check(qemu_cmd("dst", "-incoming defer", lazy=lazy))
        qmp(l1host, "dst", "query-status")

        def dst_claims():
            return sorted(k for k, v in status().items() if k[0] == "a" and v.get("owner")
                          and k not in src_owned)
        assert len(dst_claims()) == (0 if lazy else 2)

        migrate_with_ack(l1host, "completed")
        l1host.wait_until("python3 /src/tests/harness/qmp.py /tmp/dst-q.sock query-status | "
                          "grep -q '\"status\": \"running\"'", timeout=60)
        dst_owned = dst_claims()
        assert len(dst_owned) == 2, status()

        # The configuration the guest set arrived, and the daemon applied it
        # to the destination's VF: its port is in VLAN 100.
        dst_info = qmp(l1host, "dst", "query-vsriov")[0]["vfs"]
        assert [v["state"] for v in dst_info] == ["enabled", "enabled"], dst_info
        assert dst_info[0]["config"]["vlan"] == 100, dst_info
        dst_port0 = status()[dst_owned[0]]["port"]
        l1host.wait_until(f"test $(ovs-vsctl get Port {dst_port0} tag) = 100", timeout=30)
        # The VF keeps its MAC, which was the source daemon VF's: the
        # destination's VF is told to take it (spoof checking lets it
        # through there), and QMP says it is set.
        assert dst_info[0]["mac"] == src_mac0 and dst_info[0]["config"]["mac"] == src_mac0, \
            [(v["mac"], v["config"].get("mac"), v["config"]["vlan"], v.get("netdev"))
             for v in src_vfs + dst_info]
        l1host.wait_until(f"ovs-ofctl --no-stats dump-flows br-vpd | grep -q "
                          f"'in_port={dst_owned[0][1] + 1},dl_src={src_mac0} '", timeout=30)
        assert status()[dst_owned[0]]["mac"] == src_mac0

        # The source goes: its VFs are free again, default-deny.
        l1host.check("kill $(cat /tmp/src.pid)")
        l1host.wait_until(f"test $(ovs-vsctl get Port {src_port0} tag) = 4095", timeout=30)
        st = status()
        assert all(not st[k].get("owner") for k in src_owned), st
        assert tag(l1host, dst_port0) == "100"
        # Default-deny for all but the destination's VF 0 (VF 1 has no VLAN
        # of the pool's range, so it passes nothing, as on the source).
        opened = [f for f in flows(l1host) if "actions=NORMAL" in f and "dl_src" in f]
        assert len(opened) == 1 and f"in_port={dst_owned[0][1] + 1},dl_src={src_mac0} " \
            in opened[0], opened
    finally:
        l1host.run("kill $(cat /tmp/src.pid) $(cat /tmp/dst.pid) $(cat /tmp/other.pid) "
                   "2>/dev/null; rm -f /tmp/src.pid /tmp/dst.pid /tmp/other.pid; true")
        # (the next test starts from a pool with nothing claimed)
        l1host.wait_until(f"! {poolctl} status --json --socket {API} | "
                          "grep -q '\"owner\": \"[^\"]'", timeout=30)


def test_lazy_destination_without_vfs_fails_the_migration_early(l1host, daemon_host):
    """A lazy destination claims its VFs when the source's shape arrives,
    while the source runs; when the daemon cannot give them (another VM
    holds 3 of the 4 left) the migration fails then, before the source
    stops: the destination says which pool and why, and exits; the source
    runs on with its VFs and their VLAN; nothing else stays claimed.  With
    switchover-ack the source could not have stopped before the claim's
    answer."""
    poolctl = daemon_host

    try:
        port0 = start_source(l1host, poolctl)
        start_other_vm(l1host)
        before_claims, before_flows = claimed_vfs(l1host, poolctl), flows(l1host)
        assert len(before_claims) == 5
        l1host.check(qemu_cmd("dst", "-incoming defer", lazy=True))
        qmp(l1host, "dst", "query-status")
        migrate_with_ack(l1host, "failed")
        l1host.wait_until("! kill -0 $(cat /tmp/dst.pid) 2>/dev/null", timeout=60)
        log = l1host.check("cat /scratch/qemu-dst.log")
        assert "virtual SR-IOV PF 'pf0': pool 'p0' did not give the 2 VF(s) the " \
            "migration's source has enabled: vsriov-daemon-pool 'p0': the daemon refused: " \
            "pool 'a' has 0 free VF(s), 1 asked" in log, log
        source_as_it_was(l1host, poolctl, before_claims, before_flows, port0)
    finally:
        l1host.run("kill $(cat /tmp/src.pid) $(cat /tmp/dst.pid) $(cat /tmp/other.pid) "
                   "2>/dev/null; rm -f /tmp/src.pid /tmp/dst.pid /tmp/other.pid /tmp/mig.sock; "
                   "true")
        l1host.wait_until(f"! {poolctl} status --json --socket {API} | "
                          "grep -q '\"owner\": \"[^\"]'", timeout=30)


@pytest.mark.parametrize("how", ["cancel", "destination-killed"])
def test_failed_daemon_pool_migration_leaks_nothing(l1host, daemon_host, how):
    """A migration cancelled, or whose destination is killed, in the middle
    (at 200 KB/s): the source runs on with its VFs, their port VLAN and
    flows; the destination's claims go back to the daemon once it is gone;
    nothing else is claimed."""
    poolctl = daemon_host

    try:
        port0 = start_source(l1host, poolctl)
        src_claims = claimed_vfs(l1host, poolctl)
        assert len(src_claims) == 2
        before = flows(l1host)
        l1host.check(qemu_cmd("dst", "-incoming defer"))
        qmp(l1host, "dst", "query-status")
        assert len(claimed_vfs(l1host, poolctl)) == 4
        qmp(l1host, "src", "migrate-set-parameters", {"max-bandwidth": 200 * 1024})
        qmp(l1host, "dst", "migrate-incoming", {"uri": "unix:/tmp/mig.sock"})
        qmp(l1host, "src", "migrate", {"uri": "unix:/tmp/mig.sock"})
        l1host.wait_until("python3 /src/tests/harness/qmp.py /tmp/src-q.sock query-migrate | "
                          "python3 -c 'import json,sys; r=json.load(sys.stdin)[\"return\"]; "
                          "sys.exit(r.get(\"ram\", {}).get(\"transferred\", 0) < 100000)'",
                          timeout=60)
        if how == "cancel":
            qmp(l1host, "src", "migrate_cancel")
            want = "cancelled"
        else:
            l1host.check("kill -9 $(cat /tmp/dst.pid)")
            want = "failed"
        l1host.wait_until("python3 /src/tests/harness/qmp.py /tmp/src-q.sock query-migrate | "
                          f"grep -q '\"status\": \"{want}\"'", timeout=60)
        # (a cancelled migration's destination waits on: management ends it)
        l1host.run("kill $(cat /tmp/dst.pid) 2>/dev/null; true")
        l1host.wait_until(f"test \"$({poolctl} status --json --socket {API} | python3 -c "
                          "'import json,sys; print(sum(1 for v in json.load(sys.stdin) "
                          "if v[\"pool\"] == \"a\" and v[\"owner\"]))')\" = 2", timeout=30)
        source_as_it_was(l1host, poolctl, src_claims, before, port0)
    finally:
        l1host.run("kill $(cat /tmp/src.pid) $(cat /tmp/dst.pid) 2>/dev/null; "
                   "rm -f /tmp/src.pid /tmp/dst.pid /tmp/mig.sock; true")
        l1host.wait_until(f"! {poolctl} status --json --socket {API} | "
                          "grep -q '\"owner\": \"[^\"]'", timeout=30)
