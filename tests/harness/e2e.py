# SPDX-License-Identifier: GPL-2.0-or-later
"""The whole system on a switch, as a user runs it, in the emulated host:
OVS-DPDK, vdpa-pool-daemon with a VDUSE PF (each pooled VF a VDUSE device
OVS-DPDK serves; its OVS port is the VF's switch port), and a VM whose PF
is a VDUSE port of the same bridge and whose VFs come from the daemon.
Used by tests/nested/test_l2_e2e.py, scripts/demo and scripts/bench-pods.
"""
import collections
import json
import os
import re
import uuid

from . import golang, paths
from .ovs import L1_OVS_DPDK_START
from .vm import NestedGuest

BRIDGE = "br-vsriov"
# The guest gives its pods' VFs MACs of its own (mac-policy = any; the
# daemon's default, locked, would refuse them); a migration's destination
# takes them over with the source's token (mac-handover, QEMU's handover).  The pools' VLANs are
# disjoint: the daemon refuses pools that share one on its bridge.
CONF = f"""[daemon]
socket = /run/vpd/api.sock
state = /var/lib/vpd/state
ovs-bridge = {BRIDGE}
[pf sw0]
num-vfs = 6
vdpa-mgmtdev = vduse
vduse-msg-timeout = 120
[pool tenant-a]
pf = sw0
vfs = 0-3
allow-uids = 0
vlans = 100-199
mac-policy = any
mac-handover = token
[pool tenant-b]
pf = sw0
vfs = 4-5
vlans = 200-299
mac-policy = any
"""
# Runs in Level 1 with the harness's protocol client.
CLIENT = r"""
import sys
sys.path.insert(0, "/src/tests")
from harness import vpd
c = vpd.Client("/run/vpd/api.sock")
if sys.argv[1] == "free":
    print(sum(1 for v in c.status() if v["POOL"] == sys.argv[2] and v["COUNT"] == 0))
elif sys.argv[1] == "claim":
    got = c.claim(sys.argv[2], int(sys.argv[3]), owner="vm2")
    print(" ".join("vpd-sw0-%d" % v["VF_INDEX"] for v, _ in got))
"""
DAEMON_LOG = "/scratch/vpd.log"
# What System.udp_stream measured: Mbit/s sent and received, and whether
# the sender's last write waited until the end.
Stream = collections.namedtuple("Stream", "sent received blocked")


def l1_path(host_path):
    """Where Level 1 sees a file of this machine's cache (the 9p share)."""
    return "/vsriov" + host_path[len(paths.CACHE):]


def daemon_binary():
    return l1_path(os.path.join(os.environ["VSRIOV_BUILD_OURS"], "vdpa-pool-daemon",
                                "vdpa-pool-daemon"))


def start_daemon(l1, daemon, wait=True):
    """Start the daemon on /tmp/vpd.conf; with wait, until it is ready."""
    l1.check(f"rm -f /scratch/vpd.out; setsid {daemon} -c /tmp/vpd.conf "
             f"> /scratch/vpd.out 2>> {DAEMON_LOG} < /dev/null & echo $! > /tmp/vpd.pid")
    if wait:
        wait_daemon_ready(l1)


def wait_daemon_ready(l1):
    l1.wait_until("grep -qx READY /scratch/vpd.out || ! kill -0 $(cat /tmp/vpd.pid)",
                  timeout=120)
    assert "READY" in l1.check("cat /scratch/vpd.out"), l1.check(f"cat {DAEMON_LOG}")


def stop_daemon(l1):
    l1.check("kill $(cat /tmp/vpd.pid)")
    l1.wait_until("! kill -0 $(cat /tmp/vpd.pid) 2>/dev/null", timeout=60)


def vf_port(vf):
    """The OVS port (and VDUSE and vDPA device) of the daemon's VF vf."""
    return f"vpd-sw0-{vf}"


def vduse_port(l1, name):
    """A VDUSE device on the bridge, made by hand as an admin would for a
    VM's own NIC: OVS-DPDK makes /dev/vduse/NAME, then the vDPA device on
    it.  Returns its /dev/vhost-vdpa-N."""
    l1.check(f"ovs-vsctl add-port {BRIDGE} {name} -- set Interface {name} "
             f"type=dpdkvhostuserclient options:vhost-server-path=/dev/vduse/{name} "
             "options:vhost-max-queue-pairs=1")
    l1.wait_until(f"test -e /sys/class/vduse/{name}", timeout=60)
    l1.check(f"echo 120 > /sys/class/vduse/{name}/msg_timeout")
    l1.wait_until(f"vdpa dev add name {name} mgmtdev vduse", timeout=60)
    return "/dev/" + l1.wait_until(f"ls /sys/bus/vdpa/devices/{name}/ | grep vhost-vdpa-",
                                   timeout=30).stdout.split()[0]


def port_no(l1, port):
    return int(l1.check(f"ovs-vsctl get Interface {port} ofport"))


def port_stats(l1, port):
    """OVS's live counters of a port (rx: from the VF into the switch)."""
    out = l1.check(f"ovs-ofctl dump-ports {BRIDGE} {port_no(l1, port)}")
    rx = re.search(r"rx pkts=(\d+), bytes=(\d+)", out)
    tx = re.search(r"tx pkts=(\d+), bytes=(\d+), drop=(\d+)", out)
    return {"rx_pkts": int(rx.group(1)), "rx_bytes": int(rx.group(2)),
            "tx_pkts": int(tx.group(1)), "tx_bytes": int(tx.group(2)),
            "tx_drop": int(tx.group(3))}


def drop_count(l1, port):
    """Packets the port's drop flows (default-deny, spoof check) counted."""
    out = l1.check(f"ovs-ofctl -O OpenFlow14 dump-flows {BRIDGE} in_port={port_no(l1, port)}")
    return sum(int(m.group(1)) for m in re.finditer(r"n_packets=(\d+).*actions=drop", out))


def port_flows(l1, port):
    """The OpenFlow rules of the port's traffic into the switch, as
    (priority, actions, n_packets), highest priority first."""
    out = l1.check(f"ovs-ofctl -O OpenFlow14 dump-flows {BRIDGE} in_port={port_no(l1, port)}")
    flows = [(int(re.search(r"priority=(\d+)", f).group(1)),
              re.search(r"actions=(\S+)", f).group(1),
              int(re.search(r"n_packets=(\d+)", f).group(1)))
             for f in out.splitlines() if "actions=" in f]
    return sorted(flows, reverse=True)


def trace(l1, port, src, dst):
    """What the switch does with a frame from src to dst entering at port
    (OVS's own classifier, ofproto/trace): its datapath actions."""
    # (OVS-DPDK's vswitchd names its control socket for its program name)
    ctl = "$(ls /run/openvswitch/ovs-vswitchd*.$(cat /run/openvswitch/ovs-vswitchd.pid).ctl)"
    out = l1.check(f"ovs-appctl -t {ctl} ofproto/trace {BRIDGE} "
                   f"in_port={port_no(l1, port)},dl_src={src},dl_dst={dst}")
    m = re.search(r"^Datapath actions: (.*)$", out, re.M)
    assert m, out
    return m.group(1)


def qos_drops(l1, port):
    """Frames from the VF that OVS-DPDK's ingress policer dropped."""
    out = l1.check(f"ovs-vsctl get Interface {port} statistics")
    m = re.search(r"ovs_rx_qos_drops=(\d+)", out)
    assert m, out
    return int(m.group(1))


class System:
    """Level 1 set up, and the VM (Level 2) on it, once start() returned."""

    def __init__(self, l1, pool="tenant-a", count=4, conf=CONF, eswitch=False):
        """conf: the daemon's configuration; eswitch: the VM's PF offers
        switchdev mode (sriov-eswitch=on, docs/switchdev.md)."""
        self.l1, self.pool, self.count = l1, pool, count
        self.conf, self.eswitch = conf, eswitch
        self.l2 = self.pf = self.pf_dev = None

    def start_host(self):
        """OVS-DPDK, the bridge, the daemon with its VDUSE PF, the tools."""
        l1 = self.l1
        tools = os.path.join(l1.scratch, "tools")
        os.makedirs(tools, exist_ok=True)
        for prog in ("cni-flow", "traffic"):
            golang.build_static(os.path.join(paths.SRC, "tests", prog),
                                "build", "-o", os.path.join(tools, prog), ".")
        l1.check("modprobe -a vduse vhost_vdpa")
        l1.check(L1_OVS_DPDK_START, timeout=180)
        l1.check(f"ovs-vsctl add-br {BRIDGE} -- set bridge {BRIDGE} datapath_type=netdev")
        l1.check(f"mkdir -p /run/vpd /var/lib/vpd && cat > /tmp/vpd.conf <<'EOF'\n{self.conf}EOF")
        l1.check(f"cat > /tmp/vpd_client.py <<'EOF'\n{CLIENT}EOF")
        start_daemon(l1, daemon_binary())

    def vm_args(self, name, pf_vhost, mac):
        """The VM's QEMU arguments; its UUID (as libvirt gives one) names
        its daemon claims, the same on a migration's destination."""
        return ["-uuid", str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.vsriov.test")),
                "-object", "memory-backend-memfd,id=mem0,size=512M,share=on",
                "-machine", "memory-backend=mem0",
                # (sriov-eswitch needs a control queue, which OVS-DPDK's
                # VDUSE devices do not offer: the PF's own traffic is then
                # QEMU's user network, the VFs' the switch's)
                "-netdev", ("user,id=pfnet" if self.eswitch else
                            f"vhost-vdpa,vhostdev={pf_vhost},id=pfnet"),
                "-object", f"vsriov-daemon-pool,id=p0,socket=/run/vpd/api.sock,"
                           f"pool={self.pool},count={self.count},lazy=on,handover=on",
                "-device", "pcie-root-port,id=rp0,chassis=1",
                "-device", "virtio-net-pci,bus=rp0,id=pf0,netdev=pfnet,sriov-pool=p0,"
                           f"mac={mac},romfile=" +
                           (",sriov-eswitch=on" if self.eswitch else ""),
                "-virtfs", "local,path=/scratch/tools,mount_tag=tools,security_model=none,"
                           "readonly=on"]

    def start_vm(self, name="vm1", mac="52:54:00:00:01:00"):
        """The VM: its PF a VDUSE port (MAC mac), its VFs from the daemon
        (lazy)."""
        pf_vhost = vduse_port(self.l1, f"{name}-pf")
        self.l2 = self.l1.start_l2(name, qemu_args=self.vm_args(name, pf_vhost, mac),
                                   boot_timeout=600)
        # The tools run from the guest's memory: started from the 9p share
        # (Level 1's own share of this machine's folder) one takes about
        # 16 s under nested TCG, from memory 1 to 2 s (scripts/bench-l2-tools).
        # The share is unmounted after (virtio-9p blocks migration while
        # mounted).
        self.l2.check("mkdir -p /mnt/tools /tmp/tools.9p && "
                      "mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 tools /tmp/tools.9p && "
                      "cp /tmp/tools.9p/* /mnt/tools/ && umount /tmp/tools.9p", timeout=300)
        self.pf = self.l2.check("for d in /sys/bus/pci/devices/*; do "
                                "[ -f $d/sriov_totalvfs ] && basename $d && break; done"
                                ).strip()
        self.pf_dev = self.l2.check(f"ls /sys/bus/pci/devices/{self.pf}/virtio*/net/").strip()
        return self.l2

    def start_destination(self, name="vm1", mac="52:54:00:00:01:00"):
        """The VM's live-migration destination in the same Level 1: a QEMU
        started with -incoming, its PF on a VDUSE port of its own, its VFs
        from the daemon's same pool (claimed when the migration starts)."""
        pf_vhost = vduse_port(self.l1, f"{name}-dst-pf")
        return NestedGuest(self.l1, f"{name}-dst", incoming=True,
                           qemu_args=self.vm_args(name, pf_vhost, mac)).start()

    def stop(self):
        if self.l2:
            self.l2.stop()
        stop_daemon(self.l1)

    # -- in the VM --------------------------------------------------------
    def enable_vfs(self, n, timeout=180):
        self.l2.check(f"echo {n} > /sys/bus/pci/devices/{self.pf}/sriov_numvfs")
        if n:
            self.l2.wait_until(f"ls /sys/bus/pci/devices/{self.pf}/virtfn{n - 1}/virtio*/net/ "
                               "2>/dev/null | grep -q .", timeout=timeout)

    def add_pod(self, pod, vf, mac, vlan, ip):
        """sriov-cni's ADD (tests/cni-flow): VF vf into netns pod as net1."""
        addr = self.l2.check(
            f"basename $(readlink /sys/bus/pci/devices/{self.pf}/virtfn{vf})").strip()
        self.l2.check(f"ip netns add {pod} && ip -n {pod} link set lo up")
        self.l2.check(f"/mnt/tools/cni-flow add -vf {addr} -netns {pod} -ifname net1 "
                      f"-mac {mac} -vlan {vlan} -ip {ip} -state /tmp/{pod}.json", timeout=300)

    def del_pod(self, pod):
        self.l2.check(f"/mnt/tools/cni-flow del -netns {pod} -ifname net1 "
                      f"-state /tmp/{pod}.json", timeout=300)
        self.l2.check(f"ip netns del {pod}")

    def ping(self, src, dst_ip, count=3, wait=5):
        """Replies pod src got from dst_ip to count pings.  A ping that did
        not send all count requests (a missing namespace or interface, no
        route) raises: a negative check must not pass because nothing was
        sent."""
        r = self.l2.run(f"ip netns exec {src} ping -c {count} -W {wait} {dst_ip}",
                        timeout=count * wait + 60)
        m = re.search(r"(\d+) packets transmitted, (\d+) packets received", r.stdout)
        assert m and int(m.group(1)) == count, \
            f"ping from pod {src} to {dst_ip} did not send {count} requests: {r}"
        return int(m.group(2))

    def pod_names(self):
        return set(self.l2.check("ip netns list | cut -d' ' -f1").split())

    def remove_pods(self):
        """DEL every pod (cni-flow's state file says which were added)."""
        for pod in sorted(self.pod_names()):
            if self.l2.run(f"test -f /tmp/{pod}.json").status == 0:
                self.del_pod(pod)
            else:
                self.l2.check(f"ip netns del {pod}")

    def ensure_pods(self, pods):
        """The VM as a test expects to find it, whatever the test before
        it left: the PF's VFs enabled and each pod of pods ({name: (vf,
        mac, vlan, ip)}) on its VF as add_pod made it (the VF's MAC and
        VLAN, link state auto, no rate cap, spoof checking on, MTU 1500 in
        the pod and on the switch, no neighbour cached); other pods are
        removed.  Reads the state in one command per level and changes
        only what differs (each change is a round trip to the daemon)."""
        out = self.l2.check(
            f"d=/sys/bus/pci/devices/{self.pf}; cat $d/sriov_numvfs $d/sriov_totalvfs; "
            f"ip -j link show {self.pf_dev}; echo; "
            "for n in $(ip netns list | cut -d' ' -f1); do ip -n $n neigh flush all; "
            "echo \"$n $(ip -n $n -j addr show net1 2>/dev/null)\"; done")
        lines = out.splitlines()
        numvfs, total = int(lines[0]), int(lines[1])
        (link,) = json.loads(lines[2])
        have = {}
        for line in lines[3:]:
            name, _, addr = line.partition(" ")
            if name:
                have[name] = json.loads(addr)[0] if addr.strip() else None
        if numvfs != total or set(have) - set(pods):
            self.remove_pods()
            if numvfs != total:
                self.enable_vfs(0)
                self.enable_vfs(total)
            return self.ensure_pods(pods)
        vfinfo = {v["vf"]: v for v in link.get("vfinfo_list", [])}
        mtus = self.l1.check("; ".join(f"ovs-vsctl get Interface {vf_port(vf)} mtu"
                                       for vf, _, _, _ in pods.values())).split()
        for (pod, (vf, mac, vlan, ip)), mtu in zip(pods.items(), mtus):
            if mtu != "1500":
                self.l1.check(f"ovs-vsctl set Interface {vf_port(vf)} mtu_request=1500")
            net1 = have.get(pod)
            if pod in have and (not net1 or ip not in
                                [f"{a['local']}/{a['prefixlen']}" for a in net1["addr_info"]]):
                self.l2.check(f"ip netns del {pod}")
                del have[pod]
            if pod not in have:
                self.add_pod(pod, vf, mac, vlan, ip)
                continue
            v = vfinfo.get(vf, {})
            want = {"mac": mac, "vlan": vlan, "spoofchk": True, "link_state": "auto",
                    "max_tx_rate": 0}
            now = {"mac": v.get("address"),
                   "vlan": (v.get("vlan_list") or [{}])[0].get("vlan", 0),
                   "spoofchk": v.get("spoofchk"), "link_state": v.get("link_state"),
                   "max_tx_rate": v.get("rate", {}).get("max_tx")}
            keyword = {"link_state": "state"}   # (ip link's words)
            fix = " ".join(f"{keyword.get(k, k)} {'on' if want[k] is True else want[k]}"
                           for k in want if now[k] != want[k])
            if fix:
                self.l2.check(f"ip link set {self.pf_dev} vf {vf} {fix}")
            if (net1["address"], net1["mtu"], "UP" in net1["flags"]) != (mac, 1500, True):
                self.l2.check(f"ip -n {pod} link set net1 mtu 1500 address {mac} up")
        self.l2.wait_until(" && ".join(f"ip -n {p} link show net1 | grep -q LOWER_UP"
                                       for p in pods) or "true", timeout=60)

    def pin_neighbours(self, pods):
        """Permanent neighbour entries between the pods ({name: (mac, ip)})
        of one VLAN: no ARP request, probe or reply of theirs crosses the
        switch, so a test can count the frames it sends itself."""
        for pod in pods:
            self.l2.check(" && ".join(
                f"ip -n {pod} neigh replace {ip.split('/')[0]} lladdr {mac} dev net1 "
                "nud permanent" for other, (mac, ip) in pods.items() if other != pod))

    def udp_stream(self, src, dst, dst_ip, size=1400, secs=8):
        """A UDP stream of size-byte datagrams from pod src to pod dst, as
        fast as src can send, for secs: a Stream of what src sent and dst
        counted, in Mbit/s, and whether src's last write waited until the
        end (its VF stopped taking frames).  Both programs end by themselves
        (their waits have deadlines); the margin is for a loaded machine's
        nested guest, where starting a program took up to a minute."""
        self.l2.check(f"ip netns exec {dst} /mnt/tools/traffic udp-sink -listen :9000 "
                      f"-duration {secs}s > /tmp/sink.log 2>&1 & echo $! > /tmp/sink.pid")
        out = self.l2.check(f"ip netns exec {src} /mnt/tools/traffic udp-send "
                            f"-to {dst_ip}:9000 -size {size} -duration {secs}s",
                            timeout=secs + 300)
        m = re.search(r"sent (\d+) bytes in ([\d.]+) s", out)
        assert m, out
        # (the sink ends secs after its first datagram, or 60 s after it
        # started when none came)
        self.l2.wait_until("! kill -0 $(cat /tmp/sink.pid) 2>/dev/null", timeout=secs + 300)
        log = self.l2.check("cat /tmp/sink.log")
        got = re.search(r"received (\d+) bytes in ([\d.]+) s", log)
        assert got, log
        sent = int(m.group(1)) * 8 / float(m.group(2)) / 1e6
        received = int(got.group(1)) * 8 / max(float(got.group(2)), 0.001) / 1e6
        return Stream(sent, received, "blocked" in out)

    def set_mtu(self, pods_vfs, mtu):
        """MTU of pods' net1 and of their VFs' OVS ports: {pod: vf}."""
        for pod, vf in pods_vfs.items():
            port = vf_port(vf)
            self.l1.check(f"ovs-vsctl set Interface {port} mtu_request={mtu}")
            self.l1.wait_until(f"test $(ovs-vsctl get Interface {port} mtu) = {mtu}",
                               timeout=60)
            self.l2.check(f"ip -n {pod} link set net1 mtu {mtu}")
