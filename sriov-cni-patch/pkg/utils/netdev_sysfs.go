// Copyright 2026 vsriov contributors
// SPDX-License-Identifier: Apache-2.0

package utils

// Netdev resolution in sysfs for both layouts of a PCI network function:
//
//	plain NIC:   /sys/bus/pci/devices/<fn>/net/<ifname>
//	virtio-net:  /sys/bus/pci/devices/<fn>/virtioN/net/<ifname>
//
// virtio-net binds a virtio_pci driver to the PCI function and creates the
// netdev under the virtio device it registers, one level down.  Code that
// looks only in <fn>/net finds nothing for virtio-net PFs and VFs (the
// virtual PFs of vsriov, and upstream QEMU's sriov-pf composition).
//
// Every function takes the sysfs PCI devices folder (normally
// /sys/bus/pci/devices) so that tests can run them on a fake tree.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var virtioDevDir = regexp.MustCompile(`^virtio[0-9]+$`)

// netDirsOfPCI returns the folders that may hold the netdevs of a PCI
// function: <fn>/net and, for virtio, <fn>/virtioN/net.
func netDirsOfPCI(sysBusPci, pciAddr string) ([]string, error) {
	fnDir := filepath.Join(sysBusPci, pciAddr)
	if _, err := os.Lstat(fnDir); err != nil {
		return nil, fmt.Errorf("PCI device %s not found in %s: %v", pciAddr, sysBusPci, err)
	}
	dirs := []string{filepath.Join(fnDir, "net")}
	entries, err := os.ReadDir(fnDir)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %v", fnDir, err)
	}
	for _, e := range entries {
		if virtioDevDir.MatchString(e.Name()) {
			dirs = append(dirs, filepath.Join(fnDir, e.Name(), "net"))
		}
	}
	return dirs, nil
}

// NetdevNamesOfPCI returns the names of the netdevs of a PCI function, in
// either layout, sorted.  An empty list (and no error) means the function
// has no netdev in this network namespace: its driver is not a network
// driver, or its netdev was moved into another namespace.
func NetdevNamesOfPCI(sysBusPci, pciAddr string) ([]string, error) {
	dirs, err := netDirsOfPCI(sysBusPci, pciAddr)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, fmt.Errorf("failed to read %s: %v", d, err)
		}
		for _, e := range entries {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// NetdevOfPCI returns the netdev name of a PCI function, in either layout,
// or an error saying why there is none.
func NetdevOfPCI(sysBusPci, pciAddr string) (string, error) {
	names, err := NetdevNamesOfPCI(sysBusPci, pciAddr)
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "", fmt.Errorf("PCI device %s has no network device in this network namespace", pciAddr)
	}
	return names[0], nil
}

// PFAddrOfVF returns the PCI address of a VF's physical function.
func PFAddrOfVF(sysBusPci, vfAddr string) (string, error) {
	link := filepath.Join(sysBusPci, vfAddr, "physfn")
	target, err := os.Readlink(link)
	if err != nil {
		return "", fmt.Errorf("%s is not an SR-IOV VF (no physfn link): %v", vfAddr, err)
	}
	return filepath.Base(target), nil
}

// PFNetdevOfVF returns the netdev name of a VF's physical function, in
// either layout.
func PFNetdevOfVF(sysBusPci, vfAddr string) (string, error) {
	pf, err := PFAddrOfVF(sysBusPci, vfAddr)
	if err != nil {
		return "", err
	}
	name, err := NetdevOfPCI(sysBusPci, pf)
	if err != nil {
		return "", fmt.Errorf("PF %s of VF %s: %v", pf, vfAddr, err)
	}
	return name, nil
}

// VFIndex returns N such that <pf>/virtfnN points at vfAddr.
func VFIndex(sysBusPci, pfAddr, vfAddr string) (int, error) {
	links, err := filepath.Glob(filepath.Join(sysBusPci, pfAddr, "virtfn*"))
	if err != nil {
		return -1, err
	}
	for _, l := range links {
		target, err := os.Readlink(l)
		if err != nil || filepath.Base(target) != vfAddr {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(l), "virtfn"))
		if err != nil {
			continue
		}
		return n, nil
	}
	return -1, fmt.Errorf("%s is not a VF of %s", vfAddr, pfAddr)
}

// VFAddr returns the PCI address of VF index of a PF.
func VFAddr(sysBusPci, pfAddr string, index int) (string, error) {
	target, err := os.Readlink(filepath.Join(sysBusPci, pfAddr, fmt.Sprintf("virtfn%d", index)))
	if err != nil {
		return "", fmt.Errorf("PF %s has no VF %d: %v", pfAddr, index, err)
	}
	return filepath.Base(target), nil
}

// PCIAddrOfNetdev returns the PCI address of the function behind a netdev
// (netDir is normally /sys/class/net).  For virtio-net the netdev's device
// link points at the virtioN device; its parent is the PCI function.
func PCIAddrOfNetdev(netDir, ifName string) (string, error) {
	dev, err := filepath.EvalSymlinks(filepath.Join(netDir, ifName, "device"))
	if err != nil {
		return "", fmt.Errorf("netdev %s has no device: %v", ifName, err)
	}
	if virtioDevDir.MatchString(filepath.Base(dev)) {
		dev = filepath.Dir(dev)
	}
	return filepath.Base(dev), nil
}
