// SPDX-License-Identifier: Apache-2.0

package utils

// Not part of the series: the three lookups of sriov-cni's ADD that
// tests/cni-flow reproduces (GetPfName, GetVfid, GetVFLinkName), made the
// way the patched sriov-cni makes them, over the series' helpers, for a
// sysfs whose PCI devices are in sysBusPci and network devices in netDir.

import (
	"fmt"
	"os"
	"path/filepath"
)

// firstNetdev returns the first network device in the net directory of
// the PCI function at pciDir, as GetVFLinkName and GetPfName read it.
func firstNetdev(pciDir string) (string, error) {
	entries, err := os.ReadDir(pciNetDir(pciDir))
	if err != nil {
		return "", err
	}
	if len(entries) == 0 {
		return "", fmt.Errorf("%s has no network device in this network namespace", pciDir)
	}
	return entries[0].Name(), nil
}

// PfName is sriov-cni's GetPfName: the network device of a VF's PF.
func PfName(sysBusPci, vf string) (string, error) {
	return firstNetdev(filepath.Join(sysBusPci, vf, "physfn"))
}

// VfLinkName is sriov-cni's GetVFLinkName: a VF's network device.
func VfLinkName(sysBusPci, vf string) (string, error) {
	return firstNetdev(filepath.Join(sysBusPci, vf))
}

// VfIndex is sriov-cni's GetVfid: N such that the virtfnN link of the PCI
// function of the PF's network device pfName points at vf.
func VfIndex(netDir, pfName, vf string) (int, error) {
	pfDir := netDevicePciDir(netDir, pfName)
	for n := 0; ; n++ {
		target, err := os.Readlink(filepath.Join(pfDir, fmt.Sprintf("virtfn%d", n)))
		if err != nil {
			return -1, fmt.Errorf("%s is not a VF of %s", vf, pfName)
		}
		if filepath.Base(target) == vf {
			return n, nil
		}
	}
}
