# SPDX-License-Identifier: GPL-2.0-or-later
"""Shell snippets run inside test guests (busybox + iproute2)."""

# Prints the PCI address of the first function with an SR-IOV capability.
FIND_PF = ("for d in /sys/bus/pci/devices/*; do "
           "[ -f $d/sriov_totalvfs ] && basename $d && break; done")


def vf_netdev(pf, index):
    """Shell expression: the netdev name of VF index of PF (virtio layout:
    the netdev sits under .../virtioN/net/, not under the PCI function)."""
    return f"$(ls /sys/bus/pci/devices/{pf}/virtfn{index}/virtio*/net/)"


def enable_vfs(guest, pf, n, timeout=60):
    """echo n > sriov_numvfs, then wait until every VF has its netdev."""
    guest.check(f"echo {n} > /sys/bus/pci/devices/{pf}/sriov_numvfs")
    if n:
        guest.wait_until(f"ls /sys/bus/pci/devices/{pf}/virtfn{n - 1}/virtio*/net/ 2>/dev/null "
                         f"| grep -q .", timeout=timeout)


def vf_into_netns(guest, pf, index, ns, ip):
    dev = vf_netdev(pf, index)
    guest.check(f"ip netns add {ns} && d={dev} && ip link set $d netns {ns} && "
                f"ip -n {ns} link set $d name pod0 && ip -n {ns} addr add {ip} dev pod0 && "
                f"ip -n {ns} link set pod0 up && ip -n {ns} link set lo up")
