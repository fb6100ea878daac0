package utils

import (
	"os"
	"path/filepath"
)

// A virtio-net PCI function does not hold its network device directly:
// virtio_pci binds to the function and registers a virtio device under it,
// and virtio_net creates the network device under that virtio device:
//
//	/sys/bus/pci/devices/<pci addr>/net/<ifname>            most NICs
//	/sys/bus/pci/devices/<pci addr>/virtio<N>/net/<ifname>  virtio-net
//	/sys/class/net/<ifname>/device -> <pci addr>/virtio<N>  virtio-net
//
// This is the layout of the PF and the VFs of a virtio-net device with
// SR-IOV, as seen in a virtual machine. The helpers below resolve both
// layouts; for a NIC whose network device is under the PCI function they
// return the paths that were used before.

// virtioDevicePattern matches the virtio device that virtio_pci registers
// under a PCI function.
const virtioDevicePattern = "virtio[0-9]*"

// pciNetDir returns the directory that holds the network devices of the PCI
// function at pciDir: pciDir/net, or pciDir/virtio<N>/net for virtio-net.
// If there is neither, it returns pciDir/net, so that callers report a
// missing network device as they always did.
func pciNetDir(pciDir string) string {
	netDir := filepath.Join(pciDir, "net")
	if _, err := os.Lstat(netDir); err == nil {
		return netDir
	}
	virtioNetDirs, err := filepath.Glob(filepath.Join(pciDir, virtioDevicePattern, "net"))
	if err != nil || len(virtioNetDirs) == 0 {
		return netDir
	}
	return virtioNetDirs[0]
}

// netDevicePciDir returns the sysfs directory of the PCI function behind the
// network device ifName: netDir/ifName/device, or the parent of the virtio
// device that it points to for virtio-net.
func netDevicePciDir(netDir, ifName string) string {
	deviceDir := filepath.Join(netDir, ifName, "device")
	target, err := filepath.EvalSymlinks(deviceDir)
	if err != nil {
		return deviceDir
	}
	if isVirtio, _ := filepath.Match(virtioDevicePattern, filepath.Base(target)); !isVirtio {
		return deviceDir
	}
	return filepath.Dir(target)
}
