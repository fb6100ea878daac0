// SPDX-License-Identifier: Apache-2.0

package utils

// Not part of the series: the helpers against the live sysfs of a guest
// whose virtual PF has VFs (tests/system/test_l0_cni_sysfs.py runs this
// binary there with VSRIOV_LIVE_PF set to the PF's PCI address), walking
// the paths that sriov-cni's lookups take.

import (
	"os"
	"path/filepath"
	"testing"
)

const (
	liveSysBusPci = "/sys/bus/pci/devices"
	liveNetDir    = "/sys/class/net"
)

// liveNetdev returns the one network device in the net directory of the
// PCI function at pciDir.
func liveNetdev(t *testing.T, pciDir string) string {
	t.Helper()
	entries, err := os.ReadDir(pciNetDir(pciDir))
	if err != nil || len(entries) != 1 {
		t.Fatalf("net directory of %s: %v, %v", pciDir, entries, err)
	}
	return entries[0].Name()
}

// samePciFunction fails unless the network device ifName resolves to the
// PCI function at pciDir.
func samePciFunction(t *testing.T, ifName, pciDir string) {
	t.Helper()
	got, err := filepath.EvalSymlinks(netDevicePciDir(liveNetDir, ifName))
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.EvalSymlinks(pciDir)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("PCI function of %s is %s; want %s", ifName, got, want)
	}
}

func TestLiveSysfs(t *testing.T) {
	pf := os.Getenv("VSRIOV_LIVE_PF")
	if pf == "" {
		t.Skip("VSRIOV_LIVE_PF not set (only the guest test sets it)")
	}
	pfDir := filepath.Join(liveSysBusPci, pf)
	pfName := liveNetdev(t, pfDir)
	samePciFunction(t, pfName, pfDir)
	// GetSriovNumVfs and GetVfid read these under the PF's PCI function.
	if _, err := os.Stat(filepath.Join(netDevicePciDir(liveNetDir, pfName), "sriov_numvfs")); err != nil {
		t.Fatal(err)
	}
	vfs, _ := filepath.Glob(filepath.Join(netDevicePciDir(liveNetDir, pfName), "virtfn*"))
	if len(vfs) == 0 {
		t.Fatalf("PF %s has no VFs", pf)
	}
	for _, vf := range vfs {
		vfName := liveNetdev(t, vf) // GetVFLinkNamesFromVFID's path
		samePciFunction(t, vfName, vf)
		if got := liveNetdev(t, filepath.Join(vf, "physfn")); got != pfName { // GetPfName's
			t.Fatalf("PF of %s is %s; want %s", vf, got, pfName)
		}
	}
}
