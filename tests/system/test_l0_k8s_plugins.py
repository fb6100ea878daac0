# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: the real Kubernetes SR-IOV plugins in a guest (issue 17).

The SR-IOV network device plugin (sriovdp) and the SR-IOV CNI, built from
their upstream releases with our series (harness/upstream.py), run in a
guest on the test kernel with a virtual PF, with the rest of Kubernetes
played by stand-ins: the kubelet by tests/kubelet-stub (the kubelet's
side of the device plugin API), the container runtime and Multus by
cnitool (containernetworking/cni's runner) with the configuration Multus
gives the CNI for a pod.  Every step is a block of the recipe in
docs/kubernetes.md ("Running the real plugins in a guest"), run as it is
written there, and the outputs the recipe shows are compared.

The device plugin lists every VF the guest created as a healthy device of
vsriov.io/vf and allocates one with its PCI address in
PCIDEVICE_VSRIOV_IO_VF.  sriovdp looks for devices only when it starts,
so VFs disabled and sriovdp restarted leave the resource no healthy
device, and VFs enabled again come back.  The CNI's ADD moves each pod's
VF into the pod's netns with the pod's MAC and VLAN 100 (as the guest and
QMP's query-vsriov report them), CHECK passes, the two pods ping each
other through the host switch, and DEL gives each VF back as it was."""
import json
import os
import re
import subprocess
import time

import pytest

from harness import paths, upstream
from system.test_l0_vf_control import guest_vfs, qmp_vfs, vf_summary, vpf_args
from system.test_l0_vpf import host_switch

pytestmark = pytest.mark.slow

DOC = os.path.join(paths.SRC, "docs", "kubernetes.md")
RESOURCE = "vsriov.io/vf"
# The variable sriovdp's Allocate gives a container for RESOURCE.
ENV = "PCIDEVICE_VSRIOV_IO_VF"
# The guest's PF and VFs as the recipe names them.
PF, PF_NETDEV = "0000:01:00.0", "eth0"
VFS = ["0000:01:00.1", "0000:01:00.2"]
# Each pod's VF, MAC and IP; the recipe shows pod a.
PODS = {"a": (VFS[0], "02:00:00:00:01:01", "10.56.217.1/24"),
        "b": (VFS[1], "02:00:00:00:01:02", "10.56.217.2/24")}
# Every guest block runs in the shell the recipe's "guest" block sets up.
SESSION = "export PATH=/mnt/k8s:$PATH\n"
# SR-IOV CNI's record of each VF in use: the pod's netns, while it has it.
ALLOCATED = "/var/lib/cni/sriov/pci"
LOGS = ["/tmp/sriovdp.log", "/tmp/kubelet-stub.log", "/tmp/sriov-cni.log",
        "/run/kubelet-stub/devices.json"]


def doc_block(name, kind="recipe"):
    """The block of docs/kubernetes.md that follows <!-- KIND: NAME -->."""
    with open(DOC) as f:
        text = f.read()
    m = re.search(rf"^<!-- {kind}: {re.escape(name)} -->\n```\w*\n(.*?)^```$", text, re.S | re.M)
    assert m, f"{DOC} has no block <!-- {kind}: {name} -->"
    return m.group(1)


def pod_session(pod):
    """The recipe's variables of pod a (its pod-a block), made pod's."""
    block = doc_block("pod-a")
    for old, new in zip(("POD=a",) + PODS["a"], (f"POD={pod}",) + PODS[pod]):
        assert block.count(old) == 1, f"the recipe's pod-a block has no single {old}:\n{block}"
        block = block.replace(old, new)
    return block


@pytest.fixture(scope="module")
def plugins(tmp_path_factory):
    """The recipe's build: the patched sriovdp and sriov, the kubelet
    stub, cnitool and the static IPAM plugin, in a folder for the guest."""
    work = str(tmp_path_factory.mktemp("k8s"))
    upstream.tree("sriov-network-device-plugin", work)
    upstream.tree("sriov-cni", work)
    env = dict(upstream.go_env(), VSRIOV=paths.SRC)
    del env["GOFLAGS"]  # the recipe builds with Go's defaults
    p = subprocess.run(["bash", "-ec", doc_block("build")], cwd=work, env=env,
                       capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, f"the recipe's build failed:\n{p.stdout}{p.stderr}"
    return os.path.join(work, "k8s")


class Node:
    """A guest with a virtual PF of 2 VFs, the kubelet stub and sriovdp,
    set up by the recipe."""

    def __init__(self, g, host, artifacts):
        self.g, self.host, self.artifacts = g, host, artifacts
        assert SESSION in doc_block("guest")
        self.run("guest")
        self.wait_vf_netdevs()
        found = g.check(f"cd /sys/bus/pci/devices/{PF} && ls -d virtfn* && ls virtio*/net/").split()
        assert found == ["virtfn0", "virtfn1", PF_NETDEV], f"not the recipe's PF and VFs: {found}"
        assert [g.check(f"basename $(readlink /sys/bus/pci/devices/{PF}/virtfn{i})").strip()
                for i in range(2)] == VFS
        self.run("kubelet")
        g.wait_until("test -S /var/lib/kubelet/device-plugins/kubelet.sock", timeout=30)
        self.run("sriovdp-config")
        self.run("sriovdp-start")

    def logs(self):
        """The plugins' logs and the stub's device file, for a failure."""
        return "".join(f"\n--- {f}\n" + self.g.run(f"tail -n 40 {f}").stdout for f in LOGS)

    def check(self, cmd, timeout=60):
        res = self.g.run(cmd, timeout)
        assert res.ok, f"{res}{self.logs()}"
        return res.stdout

    def run(self, name, before=""):
        """Run the recipe's block name (after before) in the recipe's shell."""
        return self.check("set -e\n" + SESSION + before + doc_block(name))

    def save_logs(self):
        """The plugins' logs into the test's artifacts folder."""
        for f in LOGS:
            try:
                res = self.g.run(f"cat {f}")
                text = res.stdout + res.stderr
            except Exception as e:  # a guest that died has its own report
                text = f"(not read: {e})\n"
            with open(os.path.join(self.artifacts, os.path.basename(f)), "w") as out:
                out.write(text)

    def wait_vf_netdevs(self):
        self.g.wait_until(f"ls /sys/bus/pci/devices/{PF}/virtfn1/virtio*/net/ 2>/dev/null "
                          f"| grep -q .", timeout=60)

    def restart_sriovdp(self):
        """Stop sriovdp (SIGTERM, as its pod is stopped), start it again."""
        self.run("sriovdp-stop")
        self.g.wait_until("! kill -0 $(cat /run/sriovdp.pid) 2>/dev/null", timeout=30)
        self.run("sriovdp-start")

    def resource(self):
        """What the stub knows of RESOURCE (endpoint, connected, devices)."""
        text = self.g.run("cat /run/kubelet-stub/devices.json").stdout
        return json.loads(text or "{}").get(RESOURCE)

    def wait_resource(self, what, pred, timeout=60):
        """Poll the stub's file until pred(resource) holds, with a deadline."""
        deadline = time.monotonic() + timeout
        while True:
            res = self.resource()
            if res is not None and pred(res):
                return res
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout} s: {what}; {RESOURCE} is {res}"
                                     f"{self.logs()}")
            time.sleep(0.2)

    def allocate(self, *ids):
        """Allocate's answer for one container with ids: the recipe's
        command, which allocates the first VF, for ids."""
        block = doc_block("allocate")
        assert block.count(VFS[0]) == 1, block
        return json.loads(self.check(SESSION + block.replace(VFS[0], " ".join(ids))))


@pytest.fixture
def node(netns, guest_factory, artifacts, plugins):
    host = netns("vsr-k8s")
    host_switch(host, 2)
    g = guest_factory("k8s", netns=host.name, qemu_args=vpf_args(2), shares={"k8s": plugins})
    n = Node(g, host, artifacts)
    yield n
    n.save_logs()


def healthy(res):
    return sorted(i for i, h in res["devices"].items() if h == "Healthy")


def test_device_plugin_lists_allocates_and_follows_vfs(node):
    node.wait_resource("sriovdp lists the VFs", lambda r: r["connected"] and r["devices"])
    listed = json.loads(node.run("list"))
    assert listed == json.loads(doc_block("list", "output")), f"{listed}{node.logs()}"

    # A container that asks for a VF gets its PCI address, what Multus
    # gives the CNI as deviceID.
    answer = node.allocate(VFS[0])
    assert answer == json.loads(doc_block("allocate", "output")), answer
    (container,) = node.allocate(VFS[1])["container_responses"]
    assert container["envs"][ENV] == VFS[1], container
    (container,) = node.allocate(*VFS)["container_responses"]
    assert container["envs"][ENV] == ",".join(VFS), container

    # VFs disabled: once sriovdp has started again, none is allocatable.
    node.check(f"echo 0 > /sys/bus/pci/devices/{PF}/sriov_numvfs")
    node.restart_sriovdp()
    node.wait_resource("the disabled VFs are no longer healthy",
                       lambda r: not r["connected"] and not healthy(r))
    node.g.wait_until("grep -q 'no devices in device pool, skipping creating resource server "
                      "for vf' /tmp/sriovdp.log", timeout=30)

    # Enabled again: listed again.
    node.check(f"echo 2 > /sys/bus/pci/devices/{PF}/sriov_numvfs")
    node.wait_vf_netdevs()
    node.restart_sriovdp()
    res = node.wait_resource("the VFs enabled again are listed",
                             lambda r: r["connected"] and healthy(r))
    assert res["devices"] == {vf: "Healthy" for vf in VFS}, f"{res}{node.logs()}"


def test_sriov_cni_pods_on_allocated_vfs(node):
    g = node.g
    node.wait_resource("sriovdp lists both VFs", lambda r: healthy(r) == VFS)
    names = [g.check(f"ls /sys/bus/pci/devices/{vf}/virtio*/net/").strip() for vf in VFS]
    macs = [g.check(f"cat /sys/class/net/{n}/address").strip() for n in names]

    # ADD: each pod on the VF the device plugin allocated it.
    for i, (pod, (vf, mac, ip)) in enumerate(PODS.items()):
        (container,) = node.allocate(vf)["container_responses"]
        assert container["envs"][ENV] == vf, container
        result = json.loads(node.run("pod-add", before=pod_session(pod)))
        assert result["interfaces"][0]["mac"] == mac and result["ips"][0]["address"] == ip, result
        (link,) = json.loads(g.check(f"ip -n {pod} -j addr show net1"))
        assert link["address"] == mac, link
        assert [f"{a['local']}/{a['prefixlen']}" for a in link["addr_info"]
                if a["family"] == "inet"] == [ip], link
        assert g.run(f"ip link show {names[i]}").status != 0, f"{names[i]} still in the root netns"
        assert g.check(f"cat {ALLOCATED}/{vf}").strip() == f"/run/netns/{pod}"

    # The MAC and VLAN set through the PF, as the guest and QEMU see them.
    vfs = guest_vfs(g, PF_NETDEV)
    q = qmp_vfs(g)
    for i, (_, mac, _) in enumerate(PODS.values()):
        s = vf_summary(vfs[i])
        assert (s["mac"], s["vlan"], s["spoofchk"]) == (mac, 100, True), vfs[i]
        assert q[i]["mac"] == mac, q[i]
        assert (q[i]["config"]["mac"], q[i]["config"]["vlan"], q[i]["config"]["spoof-check"]) \
            == (mac, 100, True), q[i]

    for pod in PODS:
        node.run("pod-check", before=pod_session(pod))

    g.wait_until("ip -n a link show net1 | grep -q LOWER_UP && "
                 "ip -n b link show net1 | grep -q LOWER_UP", timeout=30)
    out = node.run("ping")
    assert " 0% packet loss" in out, out
    fdb = node.host.run("bridge fdb show br br0").stdout
    assert all(mac in fdb for _, mac, _ in PODS.values()), fdb

    # DEL: each VF back in the root netns with its name and MAC, reset
    # through the PF, and no longer among SR-IOV CNI's allocations.
    for pod in PODS:
        node.run("pod-del", before=pod_session(pod))
    for i, vf in enumerate(VFS):
        assert g.check(f"ls /sys/bus/pci/devices/{vf}/virtio*/net/").strip() == names[i]
        assert g.check(f"cat /sys/class/net/{names[i]}/address").strip() == macs[i]
    vfs = guest_vfs(g, PF_NETDEV)
    assert [(vf_summary(v)["mac"], vf_summary(v)["vlan"], vf_summary(v)["spoofchk"])
            for v in vfs] == [(m, 0, False) for m in macs], vfs
    q = qmp_vfs(g)
    assert [(vf["mac"], vf["config"]["vlan"], vf["config"]["spoof-check"]) for vf in q] \
        == [(m, 0, False) for m in macs], q
    for vf in VFS:
        assert g.run(f"test -e {ALLOCATED}/{vf}").status != 0, g.check(f"ls -R {ALLOCATED}")
