// Copyright 2026 vsriov contributors
// SPDX-License-Identifier: Apache-2.0

package utils

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A fake sysfs: folders, files and symlinks relative to its root, in the
// shape the kernel gives them.  The virtio layouts follow what a guest with
// vsriov's virtual PF shows (recorded with `ls -l` in a Level 0 test guest):
//
//	/sys/bus/pci/devices/0000:01:00.0 -> ../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0
//	/sys/devices/.../0000:01:00.0/virtio1/net/eth0
//	/sys/devices/.../0000:01:00.0/virtfn0 -> ../0000:01:00.1
//	/sys/devices/.../0000:01:00.1/physfn -> ../0000:01:00.0
//	/sys/class/net/eth0 -> ../../devices/.../0000:01:00.0/virtio1/net/eth0
type fakeSysfs struct {
	t    *testing.T
	root string
}

const port = "devices/pci0000:00/0000:00:01.0"

func newFakeSysfs(t *testing.T) *fakeSysfs {
	root := t.TempDir()
	for _, d := range []string{"bus/pci/devices", "class/net", port} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &fakeSysfs{t: t, root: root}
}

func (f *fakeSysfs) mkdir(rel string) {
	if err := os.MkdirAll(filepath.Join(f.root, rel), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeSysfs) link(rel, target string) {
	f.mkdir(filepath.Dir(rel))
	if err := os.Symlink(target, filepath.Join(f.root, rel)); err != nil {
		f.t.Fatal(err)
	}
}

// function adds a PCI function; virtioN >= 0 puts its netdev (if any)
// under virtio<virtioN>/net, the virtio-net layout.
func (f *fakeSysfs) function(addr string, virtioN int, netdev string) {
	fn := filepath.Join(port, addr)
	f.mkdir(fn)
	f.link(filepath.Join("bus/pci/devices", addr), "../../../"+fn)
	netParent := fn
	if virtioN >= 0 {
		netParent = filepath.Join(fn, "virtio"+strconv.Itoa(virtioN))
		f.mkdir(netParent)
	}
	f.mkdir(filepath.Join(netParent, "net"))
	if netdev != "" {
		f.mkdir(filepath.Join(netParent, "net", netdev))
		f.link(filepath.Join("class/net", netdev), "../../"+filepath.Join(netParent, "net", netdev))
		// <parent>/net/<netdev>/device -> <parent>: the PCI function, or
		// the virtio device whose parent the PCI function is.
		f.link(filepath.Join(netParent, "net", netdev, "device"), "../..")
	}
}

func (f *fakeSysfs) vf(pf string, index int, vf string) {
	f.link(filepath.Join(port, pf, "virtfn"+strconv.Itoa(index)), "../"+vf)
	f.link(filepath.Join(port, vf, "physfn"), "../"+pf)
}

func (f *fakeSysfs) pci() string { return filepath.Join(f.root, "bus/pci/devices") }
func (f *fakeSysfs) net() string { return filepath.Join(f.root, "class/net") }

// tree builds a PF with two VFs.  virtio selects the layout; the VF
// netdevs are named vfNames (an empty name: moved to another netns).
func tree(t *testing.T, virtio bool, pfName string, vfNames [2]string) *fakeSysfs {
	f := newFakeSysfs(t)
	v := func(n int) int {
		if virtio {
			return n
		}
		return -1
	}
	f.function("0000:01:00.0", v(1), pfName)
	f.function("0000:01:00.1", v(2), vfNames[0])
	f.function("0000:01:00.2", v(3), vfNames[1])
	f.vf("0000:01:00.0", 0, "0000:01:00.1")
	f.vf("0000:01:00.0", 1, "0000:01:00.2")
	return f
}

func TestNetdevOfPCI(t *testing.T) {
	cases := []struct {
		name    string
		virtio  bool
		pf      string
		vfs     [2]string
		addr    string
		want    string
		wantErr string
	}{
		{"plain PF", false, "ens1f0", [2]string{"ens1f0v0", "ens1f0v1"}, "0000:01:00.0", "ens1f0", ""},
		{"plain VF", false, "ens1f0", [2]string{"ens1f0v0", "ens1f0v1"}, "0000:01:00.2", "ens1f0v1", ""},
		{"virtio PF", true, "eth0", [2]string{"eth1", "eth2"}, "0000:01:00.0", "eth0", ""},
		{"virtio VF", true, "eth0", [2]string{"eth1", "eth2"}, "0000:01:00.1", "eth1", ""},
		{"virtio VF renamed", true, "eth0", [2]string{"pod0", "eth2"}, "0000:01:00.1", "pod0", ""},
		{"virtio VF in another netns", true, "eth0", [2]string{"", "eth2"}, "0000:01:00.1", "",
			"no network device in this network namespace"},
		{"plain VF in another netns", false, "ens1f0", [2]string{"", "x"}, "0000:01:00.1", "",
			"no network device in this network namespace"},
		{"unknown function", true, "eth0", [2]string{"eth1", "eth2"}, "0000:09:00.0", "", "not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := tree(t, c.virtio, c.pf, c.vfs)
			got, err := NetdevOfPCI(f.pci(), c.addr)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("want error containing %q, got %q, %v", c.wantErr, got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestPFNetdevOfVF(t *testing.T) {
	for _, virtio := range []bool{false, true} {
		f := tree(t, virtio, "pf0", [2]string{"a", "b"})
		got, err := PFNetdevOfVF(f.pci(), "0000:01:00.2")
		if err != nil || got != "pf0" {
			t.Fatalf("virtio=%v: got %q, %v", virtio, got, err)
		}
		if _, err := PFNetdevOfVF(f.pci(), "0000:01:00.0"); err == nil ||
			!strings.Contains(err.Error(), "not an SR-IOV VF") {
			t.Fatalf("virtio=%v: a PF resolved as a VF: %v", virtio, err)
		}
	}
}

func TestVFIndexAndAddr(t *testing.T) {
	for _, virtio := range []bool{false, true} {
		f := tree(t, virtio, "pf0", [2]string{"a", "b"})
		for i, vf := range []string{"0000:01:00.1", "0000:01:00.2"} {
			n, err := VFIndex(f.pci(), "0000:01:00.0", vf)
			if err != nil || n != i {
				t.Fatalf("VFIndex(%s) = %d, %v; want %d", vf, n, err, i)
			}
			addr, err := VFAddr(f.pci(), "0000:01:00.0", i)
			if err != nil || addr != vf {
				t.Fatalf("VFAddr(%d) = %q, %v; want %s", i, addr, err, vf)
			}
		}
		if _, err := VFIndex(f.pci(), "0000:01:00.0", "0000:01:00.0"); err == nil {
			t.Fatal("the PF was found as its own VF")
		}
		if _, err := VFAddr(f.pci(), "0000:01:00.0", 2); err == nil {
			t.Fatal("VF 2 of a PF with two VFs was found")
		}
	}
}

func TestPCIAddrOfNetdev(t *testing.T) {
	for _, virtio := range []bool{false, true} {
		f := tree(t, virtio, "pf0", [2]string{"vfa", "vfb"})
		for name, want := range map[string]string{"pf0": "0000:01:00.0", "vfb": "0000:01:00.2"} {
			got, err := PCIAddrOfNetdev(f.net(), name)
			if err != nil || got != want {
				t.Fatalf("virtio=%v: PCIAddrOfNetdev(%s) = %q, %v; want %s", virtio, name, got, err, want)
			}
		}
		if _, err := PCIAddrOfNetdev(f.net(), "nope"); err == nil {
			t.Fatal("a missing netdev resolved")
		}
	}
}

// On a live system (the Level 0 guest test runs this binary with
// VSRIOV_LIVE_PF set): the same resolution against the real sysfs.
func TestLiveSysfs(t *testing.T) {
	pf := os.Getenv("VSRIOV_LIVE_PF")
	if pf == "" {
		t.Skip("VSRIOV_LIVE_PF not set (only the guest test sets it)")
	}
	const pci, net = "/sys/bus/pci/devices", "/sys/class/net"
	pfName, err := NetdevOfPCI(pci, pf)
	if err != nil {
		t.Fatal(err)
	}
	if addr, err := PCIAddrOfNetdev(net, pfName); err != nil || addr != pf {
		t.Fatalf("PCIAddrOfNetdev(%s) = %q, %v; want %s", pfName, addr, err, pf)
	}
	vfs, _ := filepath.Glob(filepath.Join(pci, pf, "virtfn*"))
	if len(vfs) == 0 {
		t.Fatalf("PF %s has no VFs", pf)
	}
	for i := range vfs {
		vf, err := VFAddr(pci, pf, i)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := VFIndex(pci, pf, vf); err != nil || n != i {
			t.Fatalf("VFIndex(%s) = %d, %v; want %d", vf, n, err, i)
		}
		if got, err := PFNetdevOfVF(pci, vf); err != nil || got != pfName {
			t.Fatalf("PFNetdevOfVF(%s) = %q, %v; want %s", vf, got, err, pfName)
		}
		name, err := NetdevOfPCI(pci, vf)
		if err != nil {
			t.Fatal(err)
		}
		if addr, err := PCIAddrOfNetdev(net, name); err != nil || addr != vf {
			t.Fatalf("PCIAddrOfNetdev(%s) = %q, %v; want %s", name, addr, err, vf)
		}
	}
}
