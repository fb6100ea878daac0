/*
 * QTest: upstream composable SR-IOV (sriov-pf) on virtio-net-pci, as built
 * by vsriov's patched QEMU.  This is the baseline our virtual PF builds on.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "libqtest.h"
#include "vsriov-pcie.h"

/* PF at 01:00.0 behind root port 00:02.0, VFs declared before the PF. */
#define ARGS_2VF \
    "-M q35 -nodefaults " \
    "-device pcie-root-port,id=rp0,chassis=1,addr=0x2 " \
    "-device virtio-net-pci,bus=rp0,addr=0x0.0x1,sriov-pf=pf0 " \
    "-device virtio-net-pci,bus=rp0,addr=0x0.0x2,sriov-pf=pf0 " \
    "-device virtio-net-pci,bus=rp0,addr=0x0.0x0,id=pf0"

/* A word of the PF's (01:00.0) config space. */
#define PF_READW(off) vsriov_cfg_readw(&pcie, 1, 0, (off))

static void test_capability(void)
{
    QTestState *qts = qtest_init(ARGS_2VF);
    VsriovPcie pcie;
    uint16_t cap;

    vsriov_pcie_init(&pcie, qts, 2);
    g_assert_cmphex(vsriov_cfg_readw(&pcie, 1, 0, PCI_VENDOR_ID), ==, 0x1af4);
    g_assert_cmphex(vsriov_cfg_readw(&pcie, 1, 0, PCI_DEVICE_ID), ==, 0x1041);

    cap = vsriov_find_ext_cap(&pcie, 1, 0, PCI_EXT_CAP_ID_SRIOV);
    g_assert_cmpuint(cap, !=, 0);
    g_assert_cmpuint(PF_READW(cap + PCI_SRIOV_TOTAL_VF), ==, 2);
    g_assert_cmpuint(PF_READW(cap + PCI_SRIOV_INITIAL_VF), ==, 2);
    g_assert_cmpuint(PF_READW(cap + PCI_SRIOV_NUM_VF), ==, 0);
    g_assert_cmpuint(PF_READW(cap + PCI_SRIOV_VF_OFFSET), ==, 1);
    g_assert_cmpuint(PF_READW(cap + PCI_SRIOV_VF_STRIDE), ==, 1);
    g_assert_cmphex(PF_READW(cap + PCI_SRIOV_VF_DID), ==, 0x1041);
    /* The PF's ARI capability survives the reset at machine start. */
    g_assert_cmpuint(vsriov_find_ext_cap(&pcie, 1, 0, PCI_EXT_CAP_ID_ARI),
                     !=, 0);

    qtest_quit(qts);
}

static void test_enable_disable(void)
{
    QTestState *qts = qtest_init(ARGS_2VF);
    VsriovPcie pcie;
    uint16_t cap;
    int i;

    vsriov_pcie_init(&pcie, qts, 2);
    cap = vsriov_find_ext_cap(&pcie, 1, 0, PCI_EXT_CAP_ID_SRIOV);
    g_assert_cmpuint(cap, !=, 0);

    /* Before VF Enable the VFs do not answer. */
    for (i = 1; i <= 2; i++) {
        g_assert_cmphex(vsriov_cfg_readl(&pcie, 1, i, PCI_CLASS_REVISION), ==,
                        0xffffffff);
    }

    vsriov_cfg_writew(&pcie, 1, 0, cap + PCI_SRIOV_NUM_VF, 2);
    vsriov_cfg_writew(&pcie, 1, 0, cap + PCI_SRIOV_CTRL, PCI_SRIOV_CTRL_VFE);
    g_assert_cmpuint(PF_READW(cap + PCI_SRIOV_NUM_VF), ==, 2);

    for (i = 1; i <= 2; i++) {
        /* VFs read 0xffff as vendor and device ID (SR-IOV 1.1, 3.4.1.1). */
        g_assert_cmphex(vsriov_cfg_readw(&pcie, 1, i, PCI_VENDOR_ID),
                        ==, 0xffff);
        g_assert_cmphex(vsriov_cfg_readl(&pcie, 1, i, PCI_CLASS_REVISION) >> 8,
                        ==, 0x020000);
        g_assert_cmpuint(vsriov_find_cap(&pcie, 1, i, PCI_CAP_ID_EXP), !=, 0);
    }

    /* NumVFs is read-only while VFs are enabled. */
    vsriov_cfg_writew(&pcie, 1, 0, cap + PCI_SRIOV_NUM_VF, 1);
    g_assert_cmpuint(PF_READW(cap + PCI_SRIOV_NUM_VF), ==, 2);

    vsriov_cfg_writew(&pcie, 1, 0, cap + PCI_SRIOV_CTRL, 0);
    for (i = 1; i <= 2; i++) {
        g_assert_cmphex(vsriov_cfg_readl(&pcie, 1, i, PCI_CLASS_REVISION), ==,
                        0xffffffff);
    }

    qtest_quit(qts);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/vsriov/upstream-sriov/capability", test_capability);
    qtest_add_func("/vsriov/upstream-sriov/enable-disable",
                   test_enable_disable);
    return g_test_run();
}
