# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 1: vdpa-pool-daemon under chaos (issue 15).

Three clients (each its own process, as QEMUs are) claim VFs, set their
VLAN and MAC and release them in a loop, against the real daemon on a
netdevsim PF with vdpa_sim_net devices and an OVS bridge (kernel datapath),
while the test kills the daemon with SIGKILL at random moments and restarts
ovs-vswitchd, with the daemon up and with it down.  A client whose
connection breaks reconnects and asks the daemon what it holds (QUERY): a
claim the daemon recorded but never answered is its all the same.  At the
end every pooled VF is either claimed by a live client, which holds it by
its own QUERY, with its port's VLAN and flows as that client set them, or
free with default-deny; no VF is held twice; and once the clients exit,
every VF is free."""
import json
import random

import pytest

from harness.e2e import DAEMON_LOG, daemon_binary, start_daemon
from harness.ovs import L1_OVS_START, restart_vswitchd

pytestmark = [pytest.mark.slow, pytest.mark.nested]

CONF = """[daemon]
socket = /run/vpd-chaos/api.sock
state = /var/lib/vpd-chaos/state
ovs-bridge = br-vpd
[pf {pf}]
num-vfs = 6
eswitch = switchdev
vdpa-mgmtdev = vdpasim_net
[pool a]
pf = {pf}
vfs = 0-5
vlans = 100-199
mac-policy = any
"""
CLIENTS = 3

# One client: claims (at most 2 VFs at a time), sets attributes, releases,
# at random; survives the daemon's deaths (its connection breaks: it
# reconnects) and nothing else: anything else, a breach of the protocol
# (vpd.ProtocolError) among them, ends it with a Traceback and a report
# that says it failed.  Writes what the daemon says it holds to
# /tmp/chaos-N.json at the end, then holds on until told to exit.
CLIENT = r"""
import json, os, random, sys, time, traceback
sys.path.insert(0, "/src/tests")
from harness import vpd

SOCK = "/run/vpd-chaos/api.sock"
me = int(sys.argv[1])
rnd = random.Random(me)
c, held, ops, errors = None, set(), 0, 0


def connect():
    deadline = time.monotonic() + 300
    while True:
        try:
            return vpd.Client(SOCK, timeout=30)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)   # the daemon is restarting


def report(**what):
    with open(f"/tmp/chaos-{me}.json", "w") as f:
        json.dump(what, f)


try:
    while not os.path.exists("/tmp/chaos.stop"):
        try:
            if c is None:
                c = connect()
                held = {v["HANDLE"] for v in c.query()}
            r = rnd.random()
            if len(held) < 2 and r < 0.4:
                got = c.claim("a", 1, owner=f"w{me}")
                vpd.close_fds([fd for _, fd in got])
                held.add(got[0][0]["HANDLE"])
            elif held and r < 0.8:
                h = rnd.choice(sorted(held))
                c.set_attrs(h, vlan=rnd.randint(100, 199),
                            mac=f"02:00:00:{me:02x}:{h:02x}:{ops % 256:02x}")
            elif held:
                h = rnd.choice(sorted(held))
                c.release(h)
                held.discard(h)
            ops += 1
        except vpd.DaemonError as e:
            # Refusals the chaos explains: the pool is empty (ENOSPC), OVS is
            # restarting (EIO: the VF's flows cannot be set).
            errors += 1
            if e.errno not in (28, 5):
                print("ERROR", e, flush=True)
        except ConnectionError:
            # The daemon died in the middle of it: EOF, ECONNRESET or EPIPE.
            if c is not None:
                c.close()
            c = None
    if c is None:
        c = connect()
    final = {v["HANDLE"]: [v["VLAN"], v["MAC"], v["VF_INDEX"]] for v in c.query()}
except Exception:
    traceback.print_exc()   # the test fails on it, with this output
    report(failed=True)
    sys.exit(1)
report(ops=ops, errors=errors, held=final)
print("DONE", flush=True)
while not os.path.exists("/tmp/chaos.exit"):
    time.sleep(0.05)
"""

STATUS = r"""
import json, sys
sys.path.insert(0, "/src/tests")
from harness import vpd
print(json.dumps(vpd.Client("/run/vpd-chaos/api.sock", timeout=60).status()))
"""


def status(l1):
    return json.loads(l1.check("python3 /tmp/chaos-status.py", timeout=120))


def test_chaos_kills_restarts_no_lost_or_double_claim(l1host):
    l1 = l1host
    rnd = random.Random(15)
    l1.check("modprobe -a vhost_vdpa vdpa_sim_net netdevsim openvswitch")
    l1.check(L1_OVS_START, timeout=120)
    pf = l1.new_netdevsim(6)
    l1.check("rm -rf /run/vpd-chaos /var/lib/vpd-chaos /tmp/chaos*; "
             "mkdir -p /run/vpd-chaos /var/lib/vpd-chaos")
    l1.check(f"cat > /tmp/vpd.conf <<'EOF'\n{CONF.format(pf=pf)}EOF")
    l1.check(f"cat > /tmp/chaos-client.py <<'EOF'\n{CLIENT}EOF")
    l1.check(f"cat > /tmp/chaos-status.py <<'EOF'\n{STATUS}EOF")
    daemon = daemon_binary()
    start_daemon(l1, daemon)
    for n in range(CLIENTS):
        l1.check(f"setsid python3 /tmp/chaos-client.py {n} > /scratch/chaos-{n}.out 2>&1 "
                 "< /dev/null &")

    # Six deaths of the daemon at random moments; OVS restarted twice while
    # the daemon runs and once while it is down.
    for rnd_i in range(6):
        # Random moments are the point here: this is not synchronisation.
        l1.check(f"sleep {rnd.uniform(0.3, 3.0):.2f}")
        if rnd_i in (1, 4):
            restart_vswitchd(l1)
            l1.check(f"sleep {rnd.uniform(0.3, 2.0):.2f}")
        l1.check("kill -9 $(cat /tmp/vpd.pid)")
        if rnd_i == 2:
            restart_vswitchd(l1)
        start_daemon(l1, daemon)

    l1.check("touch /tmp/chaos.stop")
    l1.wait_until(" && ".join(f"test -f /tmp/chaos-{n}.json" for n in range(CLIENTS)),
                  timeout=300)
    reports = [json.loads(l1.check(f"cat /tmp/chaos-{n}.json")) for n in range(CLIENTS)]
    for n in range(CLIENTS):
        out = l1.check(f"cat /scratch/chaos-{n}.out")
        assert "ERROR" not in out and "Traceback" not in out, out
        assert "failed" not in reports[n], out
    ops = sum(r["ops"] for r in reports)
    print(f"chaos: {ops} operations by {CLIENTS} clients, "
          f"{sum(r['errors'] for r in reports)} refused (pool empty, OVS restarting)")
    assert ops >= 30, reports

    # Nothing held twice; what each client holds, the daemon says it holds.
    holders = {}
    for n, r in enumerate(reports):
        for h in r["held"]:
            assert h not in holders, (h, holders[h], n)
            holders[h] = n
    st = {v["HANDLE"]: v for v in status(l1) if v["POOL"] == "a"}
    assert len(st) == 6
    for h, v in st.items():
        if str(h) in holders:
            n = holders[str(h)]
            vlan, mac, _ = reports[n]["held"][str(h)]
            assert v["COUNT"] == 1 and v["OWNER"] == f"w{n}", v
            assert (v["VLAN"], v["MAC"]) == (vlan, mac), (v, vlan, mac)
            port = v["PORT"]
            tag = l1.check(f"ovs-vsctl get Port {port} tag").strip()
            if vlan:
                assert tag == str(vlan), (v, tag)
                assert any("actions=NORMAL" in f and f"dl_src={mac}" in f
                           for f in v["FLOWS"]), v
            else:
                assert tag == "4095", (v, tag)   # pool a passes no untagged VF
        else:
            assert v["COUNT"] == 0, v
            assert l1.check(f"ovs-vsctl get Port {v['PORT']} tag").strip() == "4095", v
            assert all("actions=drop" in f for f in v["FLOWS"]), v

    # The clients exit: every VF goes back to the pool, default-deny.
    l1.check("touch /tmp/chaos.exit")
    l1.wait_until("python3 /tmp/chaos-status.py | python3 -c "
                  "'import json,sys; sys.exit(any(v[\"COUNT\"] for v in json.load(sys.stdin)))'",
                  timeout=60)
    log = l1.check(f"cat {DAEMON_LOG}")
    assert "AddressSanitizer" not in log and "runtime error" not in log
