/*
 * Config-space access for vsriov's qtests on q35: the extended config space
 * (SR-IOV and ARI capabilities) is only reachable through ECAM, which no
 * firmware sets up under qtest, so these helpers enable MMCONFIG in the MCH
 * and give a root port its bus numbers themselves.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VSRIOV_PCIE_H
#define VSRIOV_PCIE_H

#include "libqtest.h"
#include "qemu/timer.h"
#include "hw/pci/pci_regs.h"
#include "libqos/pci.h"

#define VSRIOV_ECAM_BASE 0xb0000000ULL
#define VSRIOV_MCH_PCIEXBAR 0x60

typedef struct VsriovPcie {
    QTestState *qts;
} VsriovPcie;

static inline uint32_t vsriov_cf8(int bus, int devfn, int off)
{
    return 0x80000000u | (bus << 16) | (devfn << 8) | (off & 0xfc);
}

static inline uint64_t vsriov_ecam(int bus, int devfn, int off)
{
    return VSRIOV_ECAM_BASE + ((uint64_t)bus << 20) + (devfn << 12) + off;
}

static inline uint8_t vsriov_cfg_readb(VsriovPcie *p, int bus, int devfn,
                                       int off)
{
    return qtest_readb(p->qts, vsriov_ecam(bus, devfn, off));
}

static inline uint16_t vsriov_cfg_readw(VsriovPcie *p, int bus, int devfn,
                                        int off)
{
    return qtest_readw(p->qts, vsriov_ecam(bus, devfn, off));
}

static inline uint32_t vsriov_cfg_readl(VsriovPcie *p, int bus, int devfn,
                                        int off)
{
    return qtest_readl(p->qts, vsriov_ecam(bus, devfn, off));
}

static inline void vsriov_cfg_writeb(VsriovPcie *p, int bus, int devfn, int off,
                                     uint8_t v)
{
    qtest_writeb(p->qts, vsriov_ecam(bus, devfn, off), v);
}

static inline void vsriov_cfg_writew(VsriovPcie *p, int bus, int devfn, int off,
                                     uint16_t v)
{
    qtest_writew(p->qts, vsriov_ecam(bus, devfn, off), v);
}

static inline void vsriov_cfg_writel(VsriovPcie *p, int bus, int devfn, int off,
                                     uint32_t v)
{
    qtest_writel(p->qts, vsriov_ecam(bus, devfn, off), v);
}

/*
 * Enable ECAM at VSRIOV_ECAM_BASE (256 MiB, buses 0-255) through the MCH's
 * PCIEXBAR, then give the root port at 00:root_slot.0 secondary bus 1.
 */
static inline void vsriov_pcie_init(VsriovPcie *p, QTestState *qts,
                                    int root_slot)
{
    p->qts = qts;
    qtest_outl(qts, 0xcf8, vsriov_cf8(0, 0, VSRIOV_MCH_PCIEXBAR + 4));
    qtest_outl(qts, 0xcfc, 0);
    qtest_outl(qts, 0xcf8, vsriov_cf8(0, 0, VSRIOV_MCH_PCIEXBAR));
    qtest_outl(qts, 0xcfc, (uint32_t)VSRIOV_ECAM_BASE | 1);
    g_assert_cmphex(vsriov_cfg_readw(p, 0, 0, PCI_VENDOR_ID), ==, 0x8086);

    vsriov_cfg_writeb(p, 0, QPCI_DEVFN(root_slot, 0), PCI_PRIMARY_BUS, 0);
    vsriov_cfg_writeb(p, 0, QPCI_DEVFN(root_slot, 0), PCI_SECONDARY_BUS, 1);
    vsriov_cfg_writeb(p, 0, QPCI_DEVFN(root_slot, 0), PCI_SUBORDINATE_BUS, 1);
}

/*
 * Start q35 with a virtual PF at 01:00.0 behind root port 00:02.0: its
 * pool of three hubport backends (@lazy: claimed at VF Enable), a speed
 * of 10000 Mbit/s for the rate checks, and @pf_props (",prop=value..."
 * or ""); ECAM and the bus numbers set up.
 */
/*
 * A PF with 3 VFs from a pool of hub ports: @pool_props and @pf_props are
 * appended to the pool's and the PF's options, @args to the command line.
 */
static inline QTestState *vsriov_start_pf_full(VsriovPcie *p, bool lazy,
                                               const char *pool_props,
                                               const char *pf_props,
                                               const char *args)
{
    QTestState *qts = qtest_initf(
        "-M q35 -nodefaults "
        "-device pcie-root-port,id=rp0,chassis=1,addr=0x2 "
        "-netdev hubport,id=pfnet,hubid=0 "
        "-netdev hubport,id=b0,hubid=1 -netdev hubport,id=b1,hubid=2 "
        "-netdev hubport,id=b2,hubid=3 %s "
        "-object vsriov-pool,id=p0,netdevs=b0,netdevs=b1,netdevs=b2%s%s "
        "-device virtio-net-pci,bus=rp0,id=pf0,netdev=pfnet,sriov-pool=p0,"
        "speed=10000,duplex=full%s", args, lazy ? ",lazy=on" : "",
        pool_props, pf_props);

    vsriov_pcie_init(p, qts, 2);
    return qts;
}

static inline QTestState *vsriov_start_pf_with(VsriovPcie *p, bool lazy,
                                               const char *pf_props)
{
    return vsriov_start_pf_full(p, lazy, "", pf_props, "");
}

static inline QTestState *vsriov_start_pf(VsriovPcie *p, bool lazy)
{
    return vsriov_start_pf_with(p, lazy, "");
}

/* Offset of a standard capability, or 0. */
static inline uint8_t vsriov_find_cap(VsriovPcie *p, int bus, int devfn,
                                      uint8_t id)
{
    uint8_t pos;
    int guard = 48;

    if (!(vsriov_cfg_readw(p, bus, devfn, PCI_STATUS) & PCI_STATUS_CAP_LIST)) {
        return 0;
    }
    pos = vsriov_cfg_readb(p, bus, devfn, PCI_CAPABILITY_LIST) & ~3;
    while (pos && guard--) {
        if (vsriov_cfg_readb(p, bus, devfn, pos + PCI_CAP_LIST_ID) == id) {
            return pos;
        }
        pos = vsriov_cfg_readb(p, bus, devfn, pos + PCI_CAP_LIST_NEXT) & ~3;
    }
    return 0;
}

/* Offset of an extended capability, or 0. */
static inline uint16_t vsriov_find_ext_cap(VsriovPcie *p, int bus, int devfn,
                                           uint16_t id)
{
    uint16_t pos = 0x100;
    int guard = (0x1000 - 0x100) / 8;

    while (pos && guard--) {
        uint32_t hdr = vsriov_cfg_readl(p, bus, devfn, pos);

        if (hdr == 0 || hdr == 0xffffffff) {
            return 0;
        }
        if (PCI_EXT_CAP_ID(hdr) == id) {
            return pos;
        }
        pos = PCI_EXT_CAP_NEXT(hdr);
    }
    return 0;
}

/*
 * The next VSRIOV_VFS_CHANGED.  The monitor sends at most one a second
 * per PF, timed by the virtual clock under qtest: a second of it goes by
 * first, so that one held back comes (one sent at once is queued).
 */
static inline QDict *vsriov_vfs_changed_wait(QTestState *qts)
{
    qtest_clock_step(qts, NANOSECONDS_PER_SECOND);
    return qtest_qmp_eventwait_ref(qts, "VSRIOV_VFS_CHANGED");
}

#endif /* VSRIOV_PCIE_H */
