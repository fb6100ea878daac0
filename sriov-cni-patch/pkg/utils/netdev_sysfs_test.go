package utils

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("Netdev sysfs helpers", func() {
	// A sysfs with a NIC's PF and VF, and a virtio-net PF with two VFs,
	// laid out as the kernel shows them.
	var root string

	mkdirs := func(dirs ...string) {
		for _, dir := range dirs {
			Expect(os.MkdirAll(filepath.Join(root, dir), 0755)).To(Succeed())
		}
	}
	symlink := func(link, target string) {
		Expect(os.Symlink(target, filepath.Join(root, link))).To(Succeed())
	}

	BeforeEach(func() {
		var err error
		root, err = filepath.EvalSymlinks(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		mkdirs(
			"class/net",
			"devices/0000:af:00.1/net/enp175s0f1",
			"devices/0000:af:06.0/net/enp175s6",
			"devices/0000:01:00.0/virtio0/net/eth0",
			// a renamed VF
			"devices/0000:01:00.1/virtio1/net/pod0",
			// a VF whose network device is in another network namespace
			"devices/0000:01:00.2/virtio2/net",
			// a function bound to a driver that is not a network driver
			"devices/0000:02:00.0",
		)
		symlink("devices/0000:af:06.0/physfn", "../0000:af:00.1")
		symlink("devices/0000:01:00.1/physfn", "../0000:01:00.0")
		symlink("class/net/enp175s0f1", "../../devices/0000:af:00.1/net/enp175s0f1")
		symlink("devices/0000:af:00.1/net/enp175s0f1/device", "../../../0000:af:00.1")
		symlink("class/net/eth0", "../../devices/0000:01:00.0/virtio0/net/eth0")
		symlink("devices/0000:01:00.0/virtio0/net/eth0/device", "../../../virtio0")
	})

	DescribeTable("finding the net directory of a PCI function",
		func(pciDir, expected string) {
			Expect(pciNetDir(filepath.Join(root, pciDir))).To(Equal(filepath.Join(root, expected)))
		},
		Entry("NIC", "devices/0000:af:00.1", "devices/0000:af:00.1/net"),
		Entry("NIC VF's PF", "devices/0000:af:06.0/physfn", "devices/0000:af:06.0/physfn/net"),
		Entry("virtio-net PF", "devices/0000:01:00.0", "devices/0000:01:00.0/virtio0/net"),
		Entry("virtio-net VF", "devices/0000:01:00.1", "devices/0000:01:00.1/virtio1/net"),
		Entry("virtio-net VF's PF", "devices/0000:01:00.1/physfn", "devices/0000:01:00.1/physfn/virtio0/net"),
		Entry("virtio-net VF in another network namespace", "devices/0000:01:00.2", "devices/0000:01:00.2/virtio2/net"),
		Entry("function without network device", "devices/0000:02:00.0", "devices/0000:02:00.0/net"),
		Entry("no such function", "devices/0000:03:00.0", "devices/0000:03:00.0/net"),
	)

	DescribeTable("finding the PCI function of a network device",
		func(ifName, expected string) {
			Expect(netDevicePciDir(filepath.Join(root, "class", "net"), ifName)).To(Equal(filepath.Join(root, expected)))
		},
		Entry("NIC", "enp175s0f1", "class/net/enp175s0f1/device"),
		Entry("virtio-net", "eth0", "devices/0000:01:00.0"),
		Entry("no such network device", "eth9", "class/net/eth9/device"),
	)
})
