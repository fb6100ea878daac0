# The sanitizer tree's devices (scripts/build-qemu --asan): what the
# qtests use, on a QEMU configured --without-default-devices.
CONFIG_Q35=y
CONFIG_PCIE_PORT=y
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_NET=y
# Q35's ACPI code always builds its CXL tables, whose helpers need CXL,
# which needs PXB and CXL_MEM_DEVICE; only default devices turn them on.
CONFIG_PXB=y
CONFIG_CXL=y
CONFIG_CXL_MEM_DEVICE=y
