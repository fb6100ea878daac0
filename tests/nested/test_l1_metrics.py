# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 1: `vdpa-poolctl metrics` (issue 37, part 3) against OVS's own
counters after real frames.

vdpa-pool-daemon runs as test_l1_datapath.py runs it (harness/l1net.py's
Switch: a netdevsim PF's VF representors on OVS's kernel datapath, every
VF claimed by one client, `l1net`, VF N's frames entering its
representor's receive path).  VFs 0 and 1 get VLAN 100 and a MAC each;
VF 0 sends broadcast frames, which OVS's flows pass to VF 1's port (and
the uplink).  `vdpa-poolctl metrics` is parsed by a strict parser of the
Prometheus text format (below: every line a HELP, TYPE or sample; HELP
and TYPE once per family and before its samples; a family's samples
together; label values with only the format's escapes; no series twice;
each histogram's buckets cumulative and ending at +Inf = _count).

Asserted: each VF's port counters equal what OVS itself reports for the
port (`ovs-vsctl list Interface`'s statistics, read before and after the
scrape, unchanged meanwhile), and VF 1's port's moved by the frames VF 0
sent while the free VLANs' VFs did not move; VF 0's holder, VLAN, MAC and
port; the claim counted and its latency in the histogram; the
connections by uid; the policer's family only where OVS counts it (not
on the kernel datapath).  A non-root peer's METRICS is refused with the
daemon's sentence and a garbled one closes only its own connection; the
daemon answers on.  `--output` replaces the file atomically: a reader
polling it while it is rewritten never sees a partial file, and no
temporary file stays.  Then the daemon restarts: its own counters start
again, OVS's port counters do not go back.  (The package's timer under
systemd: test_l1_systemd.py.)"""
import json
import os
import time

import pytest

from harness import paths
from harness.e2e import daemon_binary, start_daemon, stop_daemon
from harness.l1net import Switch
from harness.prom import one, parse, samples

pytestmark = [pytest.mark.slow, pytest.mark.nested]

SOCK = "/run/vpd-dp/api.sock"
BCAST = "ff:ff:ff:ff:ff:ff"
FRAMES = 40
PORT_KEYS = {"rx_packets": "vdpa_pool_vf_port_rx_packets_total",
             "rx_bytes": "vdpa_pool_vf_port_rx_bytes_total",
             "rx_dropped": "vdpa_pool_vf_port_rx_dropped_total",
             "tx_packets": "vdpa_pool_vf_port_tx_packets_total",
             "tx_bytes": "vdpa_pool_vf_port_tx_bytes_total",
             "tx_dropped": "vdpa_pool_vf_port_tx_dropped_total",
             "ovs_rx_qos_drops": "vdpa_pool_vf_port_policer_dropped_total"}



@pytest.fixture(scope="module")
def switch(l1host):
    sw = Switch(l1host).start()
    yield sw
    sw.stop()


def poolctl():
    return os.path.join(os.path.dirname(daemon_binary()), "vdpa-poolctl")


def mac(vf):
    return f"02:00:00:00:00:{0x20 + vf:02x}"


def ovs_stats(l1):
    """{port: {key: value}}: OVS's own Interface statistics."""
    out = json.loads(l1.check("ovs-vsctl --format=json --columns=name,statistics "
                              "list Interface"))
    return {name: dict(stats[1]) for name, stats in out["data"]}


def scrape(l1, path="/tmp/metrics/vdpa-pool-daemon.prom"):
    """The metrics as the timer writes them, parsed; with the text."""
    l1.check(f"mkdir -p {os.path.dirname(path)} && {poolctl()} metrics --socket {SOCK} "
             f"--output {path}")
    text = l1.check(f"cat {path}")
    return parse(text), text


def consistent(l1, ports, deadline_s=60):
    """A scrape and OVS's statistics of ports read before and after it,
    equal: OVS refreshes its statistics every 5 s, so read again until
    they held still around the scrape."""
    deadline = time.monotonic() + deadline_s
    while True:
        before = {p: s for p, s in ovs_stats(l1).items() if p in ports}
        fams, text = scrape(l1)
        if {p: s for p, s in ovs_stats(l1).items() if p in ports} == before:
            return fams, text, before
        assert time.monotonic() < deadline, "OVS's statistics never held still for a scrape"


def settle(l1, ports, deadline_s=60):
    """Until OVS's statistics of ports (refreshed every 5 s) have caught
    up with the kernel's counters of those netdevs."""
    keys = [(d, k) for d in ("rx", "tx") for k in ("packets", "dropped")]
    deadline = time.monotonic() + deadline_s
    while True:
        kernel = {x["ifname"]: x["stats64"] for x in
                  json.loads(l1.check("ip -j -s link show"))}
        ovs = ovs_stats(l1)
        late = [p for p in ports if any(ovs[p].get(f"{d}_{k}") != kernel[p][d][k]
                                        for d, k in keys)]
        if not late:
            return
        assert time.monotonic() < deadline, f"OVS's statistics of {late} lag the kernel's"
        time.sleep(0.5)


def ovs_counters(row):
    """The port counters of an Interface's statistics, without the
    policer's (port_counters())."""
    return {k: v for k, v in row.items() if k in PORT_KEYS and k != "ovs_rx_qos_drops"}


def port_counters(fams, vf, policer=False):
    """{OVS key: value} of VF vf's port counters in the scrape (with the
    policer's drops: on the kernel datapath the kernel's, not OVS's)."""
    out = {}
    for key, name in PORT_KEYS.items():
        if key == "ovs_rx_qos_drops" and not policer:
            continue
        got = samples(fams, name, pool="a", vf=str(vf)) if name in fams else []
        if got:
            out[key] = got[0][1]
    return out


def test_metrics_equal_ovs_counters_after_frames(switch, l1host):
    l1 = l1host
    reps = switch.reps
    # Nothing but the test's frames: the representors' own IPv6 (router
    # solicitations, MLD) would be sent, and counted, on them.
    l1.check("sysctl -qw " + " ".join(f"net.ipv6.conf.{r}.disable_ipv6=1" for r in reps.values()))
    for vf in (0, 1):
        assert switch.set_attrs(vf, vlan=100, mac=mac(vf), spoofchk=1) == f"OK {vf}"

    # Before: every VF's port counters are OVS's, key by key (once OVS has
    # counted what the kernel counted on them so far).
    settle(l1, reps.values())
    fams0, _, ovs0 = consistent(l1, switch.reps.values())
    for vf, rep in reps.items():
        want = ovs_counters(ovs0[rep])
        assert port_counters(fams0, vf) == want, (vf, rep, ovs0[rep])
    assert one(fams0, "vdpa_pool_ovs_stats_up") == 1

    # VF 0 sends FRAMES broadcast frames; VF 1 (same VLAN) is where they go.
    seen0 = switch.vf_packets(0)
    sent = switch.send(0, BCAST, mac(0), "METRICS", count=FRAMES, size=200)
    assert sent["frames"] == FRAMES
    switch.wait_classified({0: seen0 + FRAMES})
    rep1 = reps[1]
    settle(l1, reps.values())
    fams, text, ovs = consistent(l1, switch.reps.values())
    with open(os.path.join(paths.ARTIFACTS, "l1-metrics.prom"), "w") as f:
        f.write(text)
    # Every VF's port counters are what OVS reports for its port.
    for vf, rep in reps.items():
        want = ovs_counters(ovs[rep])
        assert port_counters(fams, vf) == want, (vf, rep, ovs[rep])
    # ... and VF 1's port moved by the frames VF 0 sent (netdevsim's
    # representor has no peer: what OVS sends it is counted dropped).
    delta = {k: port_counters(fams, 1)[k] - port_counters(fams0, 1)[k]
             for k in ("tx_packets", "tx_dropped")}
    print(f"VF 1's port {rep1} after {FRAMES} frames of VF 0: {delta}; "
          f"OVS: {ovs[rep1]}")
    assert delta["tx_packets"] + delta["tx_dropped"] == FRAMES, delta
    # VFs in no VLAN of the pool pass nothing: their ports did not move.
    for vf in (2, 3, 4, 5):
        assert port_counters(fams, vf) == port_counters(fams0, vf), vf
    # No rate limit, no policer: no policer sample (VFs 0 to 3 have none).
    assert not samples(fams, PORT_KEYS["ovs_rx_qos_drops"], vf="0")

    # Who holds VF 0, its VLAN, MAC and port.
    (info, _), = samples(fams, "vdpa_pool_vf_info", pool="a", vf="0")
    assert info == {"pool": "a", "vf": "0", "state": "claimed", "owner": "l1net", "uid": "0",
                    "mac": mac(0), "vlan": "100", "port": reps[0]}, info
    assert one(fams, "vdpa_pool_vf_vlan", pool="a", vf="1") == 100
    assert one(fams, "vdpa_pool_vf_claimed", pool="a", vf="5") == 1
    assert one(fams, "vdpa_pool_vf_quarantined", pool="a", vf="5") == 0
    assert one(fams, "vdpa_pool_vfs", pool="a", state="claimed") == len(reps)
    # The claim (one CLAIM of every VF) counted and timed in the daemon.
    assert one(fams, "vdpa_pool_claims_total", pool="a", result="granted") == 1
    assert one(fams, "vdpa_pool_claim_duration_seconds_count", pool="a") == 1
    claim_s = one(fams, "vdpa_pool_claim_duration_seconds_sum", pool="a")
    print(f"the claim of {len(reps)} VFs took {claim_s * 1000:.1f} ms in the daemon")
    assert claim_s > 0
    # The connections by uid: the holder's and this scrape's, root's.
    assert one(fams, "vdpa_pool_connections", uid="0") == 2
    assert fams["vdpa_pool_claim_duration_seconds"].type == "histogram"


def test_policer_drops_as_the_kernel_counts_them(switch, l1host):
    """VF 4 held to 2 Mbit/s sends as fast as it can for 2 s: OVS's
    ingress policer on its representor (a tc police action: OVS's kernel
    datapath does not count its drops in the Interface statistics) drops
    most; the metrics' policer counter is what tc counts, and moved."""
    l1 = l1host
    assert switch.set_attrs(4, vlan=102, mac=mac(4), max_tx_rate=2) == "OK 4"
    pol0 = switch.police(4)
    assert pol0 is not None, "OVS put no policer on VF 4's representor"
    fams0, _ = scrape(l1)
    before = one(fams0, PORT_KEYS["ovs_rx_qos_drops"], pool="a", vf="4")
    assert before == pol0["dropped"]
    sent = switch.send(4, BCAST, mac(4), "POLICED", seconds=2)
    l1.wait_until(f"tc -s filter show dev {switch.reps[4]} ingress | "
                  f"grep -q 'bytes {pol0['packets'] + sent['frames']} pkt'", timeout=60)
    fams, _ = scrape(l1)
    pol = switch.police(4)
    got = one(fams, PORT_KEYS["ovs_rx_qos_drops"], pool="a", vf="4")
    print(f"VF 4 sent {sent['frames']} frames at its 2 Mbit/s cap: the policer dropped "
          f"{pol['dropped'] - pol0['dropped']} (tc), the metrics say {got - before}")
    assert got == pol["dropped"] and got > before, (got, pol, pol0)
    assert samples(fams, PORT_KEYS["ovs_rx_qos_drops"], vf="4")[0][0]["port"] == \
        switch.reps[4]


def test_metrics_refused_to_non_root_and_garbage(switch, l1host):
    """A non-root peer gets the daemon's sentence (exit 1); a malformed
    METRICS closes that connection only; root is answered on."""
    l1 = l1host
    l1.check(f"chmod 666 {SOCK}")
    r = l1.run(f"setpriv --reuid=65534 --regid=65534 --clear-groups {poolctl()} metrics "
               f"--socket {SOCK}")
    assert r.status == 1 and "the daemon refused: METRICS is for root only" in r.stdout + \
        r.stderr, r
    # METRICS (type 11) with an attribute of a wrong size: the stream is
    # not trusted any more and closed, nothing else happens.
    out = l1.check("python3 -c '"
                   "import socket, struct\n"
                   f"s = socket.socket(socket.AF_UNIX); s.connect(\"{SOCK}\")\n"
                   "s.send(struct.pack(\"<IHHII\", 0x31445056, 1, 11, 9, 8) + "
                   "struct.pack(\"<HH\", 42, 4) + bytes(4))\n"
                   "print(\"closed\" if s.recv(100) == b\"\" else \"answered\")'")
    assert out.strip() == "closed", out
    fams, _ = scrape(l1)
    assert one(fams, "vdpa_pool_vfs", pool="a", state="claimed") == len(switch.reps)


# Runs in Level 1: reads the file until done exists; prints how many
# reads and how many were not a whole file (empty, not ending with a
# newline, not starting with the first family or with a HELP without its
# TYPE: what a reader of a file written in place would see).
READER = r"""
import os, sys
d = sys.argv[1]
n = bad = 0
while not os.path.exists(d + "/done"):
    t = open(d + "/v.prom").read()
    n += 1
    bad += not t.endswith("\n") or t.count("# TYPE ") != t.count("# HELP ") or \
        t.count("# TYPE ") < 11 or \
        not t.startswith("# HELP vdpa_pool_daemon_start_time_seconds ")
print(n, bad)
"""


def test_output_is_replaced_atomically(switch, l1host):
    """While --output rewrites the file 30 times, a reader polling it sees
    only whole files, and no temporary file is left in the folder."""
    l1 = l1host
    d = "/tmp/metrics-atomic"
    l1.check(f"rm -rf {d} && mkdir -p {d} && cat > /tmp/reader.py <<'EOF'\n{READER}EOF")
    out = l1.check(
        f"{poolctl()} metrics --socket {SOCK} --output {d}/v.prom && "
        f"(for i in $(seq 30); do {poolctl()} metrics --socket {SOCK} --output {d}/v.prom "
        f"|| exit 1; done; touch {d}/done) & python3 /tmp/reader.py {d}; wait", timeout=300)
    reads, bad = map(int, out.split())
    print(f"{reads} reads while the file was rewritten 30 times, {bad} partial")
    assert reads > 0 and bad == 0, out
    assert sorted(l1.check(f"ls -A {d}").split()) == ["done", "v.prom"]


def test_daemon_restart_resets_its_counters_not_ovs(switch, l1host):
    """The daemon's own counters live in the daemon: a restart starts them
    again (its start time says so; Prometheus takes it as a counter reset);
    the ports' counters are OVS's and go on."""
    l1 = l1host
    fams0, _, _ = consistent(l1, switch.reps.values())
    start0 = one(fams0, "vdpa_pool_daemon_start_time_seconds")
    stop_daemon(l1)
    start_daemon(l1, daemon_binary())
    fams, _, ovs = consistent(l1, switch.reps.values())
    # (whole seconds: the same second when it restarted within it)
    assert one(fams, "vdpa_pool_daemon_start_time_seconds") >= start0
    assert one(fams, "vdpa_pool_claims_total", pool="a", result="granted") == 0
    assert one(fams, "vdpa_pool_claim_duration_seconds_count", pool="a") == 0
    # the claims themselves were restored from the state file
    assert one(fams, "vdpa_pool_vfs", pool="a", state="claimed") + \
        one(fams, "vdpa_pool_vfs", pool="a", state="claimed_not_connected") == len(switch.reps)
    for vf, rep in switch.reps.items():
        now, before = port_counters(fams, vf), port_counters(fams0, vf)
        assert all(now[k] >= before[k] for k in before), (vf, before, now)
        assert now == ovs_counters(ovs[rep])
