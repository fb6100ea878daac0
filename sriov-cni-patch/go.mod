// The virtio-aware sysfs resolution that sriov-cni-patch/ adds to
// k8snetworkplumbingwg/sriov-cni's pkg/utils, built and tested here on its
// own (standard library only).
module github.com/vsriov/vsriov/sriov-cni-patch

go 1.19
