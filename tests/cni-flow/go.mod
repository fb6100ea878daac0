// The SR-IOV CNI flow (ADD and DEL of sriov-cni's pkg/sriov) reproduced on
// top of the virtio-aware sysfs resolution that sriov-cni-patch/ adds, for
// the Level 0 test that runs it in a guest (tests/system/test_l0_cni_flow.py).
module github.com/vsriov/vsriov/tests/cni-flow

go 1.23.0

require (
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	github.com/vsriov/vsriov/sriov-cni-patch v0.0.0
)

require golang.org/x/sys v0.32.0 // indirect

replace github.com/vsriov/vsriov/sriov-cni-patch => ../../sriov-cni-patch
