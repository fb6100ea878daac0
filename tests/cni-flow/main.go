// Copyright 2026 vsriov contributors
// SPDX-License-Identifier: Apache-2.0

// Command cni-flow does what sriov-cni does for a pod on ADD and DEL, with
// the same netlink calls (github.com/vishvananda/netlink) and sysfs lookups
// made as the patched sriov-cni makes them (sriov-cni-patch/pkg/utils), so
// that the flow runs in guests without building upstream sriov-cni.
// tests/system/test_l0_k8s_plugins.py runs the patched sriov-cni itself.
//
//	cni-flow add -vf 0000:01:00.1 -netns a -ifname net1 -mac M -vlan V -ip CIDR -state FILE
//	cni-flow del -netns a -ifname net1 -state FILE
//
// ADD: save the VF's netdev name and MAC and its admin MAC (as sriov-cni
// caches them), set MAC and VLAN through the PF, move the VF netdev into the
// pod's netns, rename it, give it the MAC and the IP, bring it up.  DEL:
// rename it back, restore its MAC, move it back, reset MAC and VLAN
// through the PF.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"github.com/vsriov/vsriov/sriov-cni-patch/pkg/utils"
)

const (
	sysBusPci = "/sys/bus/pci/devices"
	netDir    = "/sys/class/net"
)

// state is what ADD leaves for DEL, as sriov-cni's OrigVfState.
type state struct {
	VFAddr     string `json:"vf"`
	PFName     string `json:"pf"`
	VFIndex    int    `json:"vfIndex"`
	HostIfName string `json:"hostIfName"`
	HostMAC    string `json:"hostMac"`
	AdminMAC   string `json:"adminMac"`
	AdminVlan  int    `json:"adminVlan"`
}

func die(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "cni-flow: "+format+"\n", a...)
	os.Exit(1)
}

// inNetns runs f with the calling thread in the named netns.
func inNetns(name string, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	target, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("netns %s: %w", name, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return err
	}
	defer netns.Set(orig) //nolint:errcheck
	return f()
}

func add(vfAddr, nsName, ifName, mac string, vlan int, cidr, stateFile string) error {
	pfName, err := utils.PfName(sysBusPci, vfAddr)
	if err != nil {
		return err
	}
	vfIndex, err := utils.VfIndex(netDir, pfName, vfAddr)
	if err != nil {
		return err
	}
	hostIfName, err := utils.VfLinkName(sysBusPci, vfAddr)
	if err != nil {
		return err
	}
	pf, err := netlink.LinkByName(pfName)
	if err != nil {
		return err
	}
	vfLink, err := netlink.LinkByName(hostIfName)
	if err != nil {
		return err
	}
	if vfIndex >= len(pf.Attrs().Vfs) {
		return fmt.Errorf("PF %s lists %d VFs, not VF %d", pfName, len(pf.Attrs().Vfs), vfIndex)
	}
	vfInfo := pf.Attrs().Vfs[vfIndex]
	st := state{VFAddr: vfAddr, PFName: pfName, VFIndex: vfIndex, HostIfName: hostIfName,
		HostMAC: vfLink.Attrs().HardwareAddr.String(), AdminMAC: vfInfo.Mac.String(),
		AdminVlan: vfInfo.Vlan}

	hw, err := net.ParseMAC(mac)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetVfVlanQosProto(pf, vfIndex, vlan, 0, int(netlink.VLAN_PROTOCOL_8021Q)); err != nil {
		return fmt.Errorf("VF %d vlan %d: %w", vfIndex, vlan, err)
	}
	if err := netlink.LinkSetVfHardwareAddr(pf, vfIndex, hw); err != nil {
		return fmt.Errorf("VF %d mac %s: %w", vfIndex, mac, err)
	}
	ns, err := netns.GetFromName(nsName)
	if err != nil {
		return err
	}
	defer ns.Close()
	if err := netlink.LinkSetDown(vfLink); err != nil {
		return err
	}
	if err := netlink.LinkSetNsFd(vfLink, int(ns)); err != nil {
		return err
	}
	if err := inNetns(nsName, func() error {
		l, err := netlink.LinkByName(hostIfName)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetName(l, ifName); err != nil {
			return err
		}
		if err := netlink.LinkSetHardwareAddr(l, hw); err != nil {
			return err
		}
		addr, err := netlink.ParseAddr(cidr)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, addr); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	}); err != nil {
		return err
	}
	data, _ := json.Marshal(st)
	return os.WriteFile(stateFile, data, 0o600)
}

func del(nsName, ifName, stateFile string) error {
	data, err := os.ReadFile(stateFile)
	if err != nil {
		return err
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return err
	}
	hostMAC, err := net.ParseMAC(st.HostMAC)
	if err != nil {
		return err
	}
	root, err := netns.Get()
	if err != nil {
		return err
	}
	defer root.Close()
	if err := inNetns(nsName, func() error {
		l, err := netlink.LinkByName(ifName)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetDown(l); err != nil {
			return err
		}
		if err := netlink.LinkSetName(l, st.HostIfName); err != nil {
			return err
		}
		if err := netlink.LinkSetHardwareAddr(l, hostMAC); err != nil {
			return err
		}
		return netlink.LinkSetNsFd(l, int(root))
	}); err != nil {
		return err
	}
	pf, err := netlink.LinkByName(st.PFName)
	if err != nil {
		return err
	}
	adminMAC, err := net.ParseMAC(st.AdminMAC)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetVfHardwareAddr(pf, st.VFIndex, adminMAC); err != nil {
		return fmt.Errorf("VF %d mac %s: %w", st.VFIndex, st.AdminMAC, err)
	}
	if err := netlink.LinkSetVfVlanQosProto(pf, st.VFIndex, st.AdminVlan, 0, int(netlink.VLAN_PROTOCOL_8021Q)); err != nil {
		return fmt.Errorf("VF %d vlan %d: %w", st.VFIndex, st.AdminVlan, err)
	}
	return os.Remove(stateFile)
}

func main() {
	if len(os.Args) < 2 {
		die("usage: cni-flow add|del [flags]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	vf := fs.String("vf", "", "PCI address of the VF (the device plugin's deviceID)")
	nsName := fs.String("netns", "", "the pod's network namespace (a name under /var/run/netns)")
	ifName := fs.String("ifname", "net1", "interface name in the pod")
	mac := fs.String("mac", "", "MAC for the VF")
	vlan := fs.Int("vlan", 0, "VLAN for the VF")
	cidr := fs.String("ip", "", "address for the VF in the pod")
	stateFile := fs.String("state", "", "where ADD saves what DEL restores")
	if err := fs.Parse(os.Args[2:]); err != nil {
		die("%v", err)
	}
	var err error
	switch os.Args[1] {
	case "add":
		err = add(*vf, *nsName, *ifName, *mac, *vlan, *cidr, *stateFile)
	case "del":
		err = del(*nsName, *ifName, *stateFile)
	default:
		die("unknown command %q", os.Args[1])
	}
	if err != nil {
		die("%s: %v", os.Args[1], err)
	}
}
