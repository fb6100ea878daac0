/*
 * QTest: vsriov's virtual SR-IOV PF (virtio-net-pci with sriov-pool)
 *
 * Capability layout, TotalVFs from the pool, NumVFs/VF Enable semantics,
 * VFs appearing and disappearing, backends held by VFs (query-vsriov,
 * query-vsriov-pools), VSRIOV_VFS_CHANGED, and config-space abuse.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "libqtest.h"
#include "qobject/qdict.h"
#include "qobject/qlist.h"
#include "vsriov-pcie.h"

#define NUM_BACKENDS 4

static QTestState *start_vpf_n(int backends, const char *extra)
{
    g_autoptr(GString) args = g_string_new(
        "-M q35 -nodefaults "
        "-device pcie-root-port,id=rp0,chassis=1,addr=0x2 "
        "-netdev hubport,id=pfnet,hubid=0 ");

    for (int i = 0; i < backends; i++) {
        g_string_append_printf(args, "-netdev hubport,id=b%d,hubid=%d ",
                               i, i + 1);
    }
    g_string_append(args, "-object vsriov-pool,id=p0");
    for (int i = 0; i < backends; i++) {
        g_string_append_printf(args, ",netdevs=b%d", i);
    }
    g_string_append_printf(args, " -device virtio-net-pci,bus=rp0,id=pf0,"
                           "netdev=pfnet,sriov-pool=p0%s", extra);
    return qtest_init(args->str);
}

static QTestState *start_vpf(const char *extra)
{
    return start_vpf_n(NUM_BACKENDS, extra);
}

static uint16_t sriov_cap(VsriovPcie *p)
{
    uint16_t cap = vsriov_find_ext_cap(p, 1, 0, PCI_EXT_CAP_ID_SRIOV);

    g_assert_cmpuint(cap, !=, 0);
    return cap;
}

static void set_vfs(VsriovPcie *p, uint16_t cap, uint16_t n)
{
    vsriov_cfg_writew(p, 1, 0, cap + PCI_SRIOV_CTRL, 0);
    vsriov_cfg_writew(p, 1, 0, cap + PCI_SRIOV_NUM_VF, n);
    if (n) {
        vsriov_cfg_writew(p, 1, 0, cap + PCI_SRIOV_CTRL, PCI_SRIOV_CTRL_VFE);
    }
}

static bool vf_present(VsriovPcie *p, int devfn)
{
    return vsriov_cfg_readl(p, 1, devfn, PCI_CLASS_REVISION) != 0xffffffff;
}

/* The first (only) vPF of query-vsriov; caller unrefs the response. */
static QDict *query_pf(QTestState *qts, QDict **resp)
{
    QList *list;

    *resp = qtest_qmp(qts, "{ 'execute': 'query-vsriov' }");
    g_assert(qdict_haskey(*resp, "return"));
    list = qdict_get_qlist(*resp, "return");
    g_assert_cmpuint(qlist_size(list), ==, 1);
    return qobject_to(QDict, qlist_peek(list));
}

static void assert_vf_states(QTestState *qts, int enabled)
{
    QDict *resp;
    QDict *pf = query_pf(qts, &resp);
    QListEntry *e;
    int i = 0;

    g_assert_cmpint(qdict_get_int(pf, "total-vfs"), ==, NUM_BACKENDS);
    QLIST_FOREACH_ENTRY(qdict_get_qlist(pf, "vfs"), e) {
        QDict *vf = qobject_to(QDict, qlist_entry_obj(e));
        g_autofree char *netdev = g_strdup_printf("b%d", i);

        g_assert_cmpint(qdict_get_int(vf, "index"), ==, i);
        g_assert_cmpint(qdict_get_int(vf, "bus"), ==, 1);
        g_assert_cmpint(qdict_get_int(vf, "devfn"), ==, i + 1);
        g_assert_cmpstr(qdict_get_str(vf, "netdev"), ==, netdev);
        g_assert_cmpstr(qdict_get_str(vf, "backend"), ==, "hubport");
        /* a premapped pool's VF has its backend, enabled or not */
        g_assert_cmpstr(qdict_get_str(vf, "backing"), ==, "bound");
        g_assert_cmpstr(qdict_get_str(vf, "state"), ==,
                        i < enabled ? "enabled" : "disabled");
        i++;
    }
    g_assert_cmpint(i, ==, NUM_BACKENDS);
    qobject_unref(resp);
}

static void test_capability(void)
{
    QTestState *qts = start_vpf("");
    VsriovPcie p;
    uint16_t cap;

    vsriov_pcie_init(&p, qts, 2);
    g_assert_cmphex(vsriov_cfg_readw(&p, 1, 0, PCI_VENDOR_ID), ==, 0x1af4);
    cap = sriov_cap(&p);
    g_assert_cmpuint(vsriov_cfg_readw(&p, 1, 0, cap + PCI_SRIOV_TOTAL_VF),
                     ==, NUM_BACKENDS);
    g_assert_cmpuint(vsriov_cfg_readw(&p, 1, 0, cap + PCI_SRIOV_NUM_VF),
                     ==, 0);
    g_assert_cmpuint(vsriov_cfg_readw(&p, 1, 0, cap + PCI_SRIOV_VF_OFFSET),
                     ==, 1);
    g_assert_cmpuint(vsriov_cfg_readw(&p, 1, 0, cap + PCI_SRIOV_VF_STRIDE),
                     ==, 1);
    g_assert_cmphex(vsriov_cfg_readw(&p, 1, 0, cap + PCI_SRIOV_VF_DID),
                    ==, 0x1041);
    for (int i = 1; i <= NUM_BACKENDS; i++) {
        g_assert_false(vf_present(&p, i));
    }
    /* ARI, for VFs beyond function 7; it survives the reset at start. */
    g_assert_cmpuint(vsriov_find_ext_cap(&p, 1, 0, PCI_EXT_CAP_ID_ARI), !=, 0);
    assert_vf_states(qts, 0);
    qtest_quit(qts);
}

/* More VFs than the 7 functions a device has without ARI. */
static void test_many_vfs(void)
{
    QTestState *qts = start_vpf_n(12, "");
    VsriovPcie p;
    uint16_t cap;
    uint8_t exp;

    vsriov_pcie_init(&p, qts, 2);
    /* The guest enables ARI forwarding in the root port, as Linux does. */
    exp = vsriov_find_cap(&p, 0, QPCI_DEVFN(2, 0), PCI_CAP_ID_EXP);
    g_assert_cmpuint(exp, !=, 0);
    vsriov_cfg_writew(&p, 0, QPCI_DEVFN(2, 0), exp + PCI_EXP_DEVCTL2,
                      PCI_EXP_DEVCTL2_ARI);
    cap = sriov_cap(&p);
    g_assert_cmpuint(vsriov_cfg_readw(&p, 1, 0, cap + PCI_SRIOV_TOTAL_VF),
                     ==, 12);
    set_vfs(&p, cap, 12);
    for (int i = 1; i <= 12; i++) {
        g_assert_true(vf_present(&p, i));
    }
    g_assert_false(vf_present(&p, 13));
    qtest_quit(qts);
}

static void test_totalvfs_property(void)
{
    QTestState *qts = start_vpf(",sriov-totalvfs=2");
    VsriovPcie p;
    QDict *resp;
    QList *pools;
    QDict *pool;

    vsriov_pcie_init(&p, qts, 2);
    g_assert_cmpuint(vsriov_cfg_readw(&p, 1, 0,
                                      sriov_cap(&p) + PCI_SRIOV_TOTAL_VF),
                     ==, 2);
    /* The PF holds two backends; two stay free in the pool. */
    resp = qtest_qmp(qts, "{ 'execute': 'query-vsriov-pools' }");
    pools = qdict_get_qlist(resp, "return");
    g_assert_cmpuint(qlist_size(pools), ==, 1);
    pool = qobject_to(QDict, qlist_peek(pools));
    g_assert_cmpstr(qdict_get_str(pool, "id"), ==, "p0");
    g_assert_cmpint(qdict_get_int(pool, "free"), ==, 2);
    qobject_unref(resp);
    qtest_quit(qts);
}

static void test_enable_disable(void)
{
    QTestState *qts = start_vpf("");
    VsriovPcie p;
    QDict *ev;
    uint16_t cap;

    vsriov_pcie_init(&p, qts, 2);
    cap = sriov_cap(&p);

    set_vfs(&p, cap, 3);
    ev = vsriov_vfs_changed_wait(qts);
    g_assert_cmpint(qdict_get_int(qdict_get_qdict(ev, "data"), "num-vfs"),
                    ==, 3);
    g_assert_cmpstr(qdict_get_str(qdict_get_qdict(ev, "data"), "id"),
                    ==, "pf0");
    qobject_unref(ev);
    for (int i = 1; i <= NUM_BACKENDS; i++) {
        g_assert_cmpint(vf_present(&p, i), ==, i <= 3);
    }
    /* VFs read 0xffff as IDs, are network controllers, PCIe with ARI. */
    g_assert_cmphex(vsriov_cfg_readw(&p, 1, 1, PCI_VENDOR_ID), ==, 0xffff);
    g_assert_cmphex(vsriov_cfg_readl(&p, 1, 1, PCI_CLASS_REVISION) >> 8,
                    ==, 0x020000);
    g_assert_cmpuint(vsriov_find_cap(&p, 1, 1, PCI_CAP_ID_EXP), !=, 0);
    g_assert_cmpuint(vsriov_find_ext_cap(&p, 1, 1, PCI_EXT_CAP_ID_ARI),
                     !=, 0);
    assert_vf_states(qts, 3);

    /* NumVFs is read-only while VF Enable is set. */
    vsriov_cfg_writew(&p, 1, 0, cap + PCI_SRIOV_NUM_VF, 1);
    g_assert_cmpuint(vsriov_cfg_readw(&p, 1, 0, cap + PCI_SRIOV_NUM_VF),
                     ==, 3);

    vsriov_cfg_writew(&p, 1, 0, cap + PCI_SRIOV_CTRL, 0);
    ev = vsriov_vfs_changed_wait(qts);
    g_assert_cmpint(qdict_get_int(qdict_get_qdict(ev, "data"), "num-vfs"),
                    ==, 0);
    qobject_unref(ev);
    for (int i = 1; i <= NUM_BACKENDS; i++) {
        g_assert_false(vf_present(&p, i));
    }
    assert_vf_states(qts, 0);
    qtest_quit(qts);
}

static void test_numvfs_above_total(void)
{
    QTestState *qts = start_vpf("");
    VsriovPcie p;
    uint16_t cap;

    vsriov_pcie_init(&p, qts, 2);
    cap = sriov_cap(&p);
    vsriov_cfg_writew(&p, 1, 0, cap + PCI_SRIOV_NUM_VF, NUM_BACKENDS + 1);
    vsriov_cfg_writew(&p, 1, 0, cap + PCI_SRIOV_CTRL, PCI_SRIOV_CTRL_VFE);
    /* VF Enable does not take: no VF appears, no VF beyond TotalVFs. */
    g_assert_cmphex(vsriov_cfg_readw(&p, 1, 0, cap + PCI_SRIOV_CTRL) &
                    PCI_SRIOV_CTRL_VFE, ==, 0);
    for (int i = 1; i <= NUM_BACKENDS + 1; i++) {
        g_assert_false(vf_present(&p, i));
    }
    assert_vf_states(qts, 0);
    /* The device still works after that. */
    set_vfs(&p, cap, 1);
    g_assert_true(vf_present(&p, 1));
    assert_vf_states(qts, 1);
    qtest_quit(qts);
}

static void test_toggle_stress(void)
{
    QTestState *qts = start_vpf("");
    VsriovPcie p;
    uint16_t cap;

    QDict *ev;

    vsriov_pcie_init(&p, qts, 2);
    cap = sriov_cap(&p);
    vsriov_cfg_writew(&p, 1, 0, cap + PCI_SRIOV_NUM_VF, NUM_BACKENDS);
    for (int i = 0; i < 2000; i++) {
        vsriov_cfg_writew(&p, 1, 0, cap + PCI_SRIOV_CTRL,
                          i & 1 ? 0 : PCI_SRIOV_CTRL_VFE);
    }
    assert_vf_states(qts, 0);
    vsriov_cfg_writew(&p, 1, 0, cap + PCI_SRIOV_CTRL, PCI_SRIOV_CTRL_VFE);
    assert_vf_states(qts, NUM_BACKENDS);
    set_vfs(&p, cap, 2);
    /*
     * The monitor holds VSRIOV_VFS_CHANGED back to one a second per PF (a
     * guest flips VF Enable at will): of 2003 changes within a second of
     * the virtual clock, the first is sent at once and the last when the
     * second is over, saying how it ended (2 VFs); no other.
     */
    ev = qtest_qmp_eventwait_ref(qts, "VSRIOV_VFS_CHANGED");
    g_assert_cmpint(qdict_get_int(qdict_get_qdict(ev, "data"), "num-vfs"),
                    ==, NUM_BACKENDS);
    qobject_unref(ev);
    g_assert_null(qtest_qmp_event_ref(qts, "VSRIOV_VFS_CHANGED"));
    ev = vsriov_vfs_changed_wait(qts);
    g_assert_cmpint(qdict_get_int(qdict_get_qdict(ev, "data"), "num-vfs"),
                    ==, 2);
    qobject_unref(ev);
    qtest_clock_step(qts, 2 * NANOSECONDS_PER_SECOND);
    qobject_unref(qtest_qmp(qts, "{ 'execute': 'query-status' }"));
    g_assert_null(qtest_qmp_event_ref(qts, "VSRIOV_VFS_CHANGED"));
    qtest_quit(qts);
}

static void test_odd_config_writes(void)
{
    QTestState *qts = start_vpf("");
    VsriovPcie p;
    uint16_t cap;

    vsriov_pcie_init(&p, qts, 2);
    cap = sriov_cap(&p);
    /* Every size at every offset of the capability and just around it. */
    for (int off = -4; off < 0x44; off++) {
        vsriov_cfg_writeb(&p, 1, 0, cap + off, 0xff);
        vsriov_cfg_writew(&p, 1, 0, cap + off, 0xffff);
        vsriov_cfg_writel(&p, 1, 0, cap + off, 0xffffffff);
    }
    /* Read-only fields kept their values. */
    g_assert_cmpuint(vsriov_cfg_readw(&p, 1, 0, cap + PCI_SRIOV_TOTAL_VF),
                     ==, NUM_BACKENDS);
    g_assert_cmpuint(vsriov_cfg_readw(&p, 1, 0, cap + PCI_SRIOV_VF_OFFSET),
                     ==, 1);
    /* Whatever state that left, a clean sequence works. */
    set_vfs(&p, cap, 0);
    set_vfs(&p, cap, 2);
    assert_vf_states(qts, 2);
    qtest_quit(qts);
}

static void test_pool_in_use_not_deletable(void)
{
    QTestState *qts = start_vpf("");
    VsriovPcie p;
    QDict *resp;

    vsriov_pcie_init(&p, qts, 2);
    resp = qtest_qmp(qts, "{ 'execute': 'object-del',"
                     " 'arguments': { 'id': 'p0' } }");
    g_assert(qdict_haskey(resp, "error"));
    qobject_unref(resp);
    assert_vf_states(qts, 0);
    qtest_quit(qts);
}

/*
 * A VF takes its PF's DMA properties (iommu_platform, ats, packed) and
 * queue sizes: with a vIOMMU its DMA is translated as the PF's is.
 */
static void test_vfs_inherit_dma_properties(void)
{
    static const char *const props[] = {
        "iommu_platform", "ats", "packed", "rx_queue_size", "tx_queue_size",
    };
    VsriovPcie p;
    QTestState *qts = vsriov_start_pf_with(&p, false,
                                           ",iommu_platform=on,ats=on,"
                                           "packed=on,rx_queue_size=1024");

    for (int i = 0; i < 3; i++) {
        g_autofree char *vf = g_strdup_printf("/machine/peripheral/pf0/vf[%d]",
                                              i);

        for (size_t k = 0; k < ARRAY_SIZE(props); k++) {
            QDict *pf_r = qtest_qmp(qts, "{ 'execute': 'qom-get', 'arguments':"
                                    " { 'path': 'pf0', 'property': %s } }",
                                    props[k]);
            QDict *vf_r = qtest_qmp(qts, "{ 'execute': 'qom-get', 'arguments':"
                                    " { 'path': %s, 'property': %s } }",
                                    vf, props[k]);

            g_assert(qobject_is_equal(qdict_get(pf_r, "return"),
                                      qdict_get(vf_r, "return")));
            qobject_unref(pf_r);
            qobject_unref(vf_r);
        }
    }
    qtest_quit(qts);
}

static void test_hmp_info(void)
{
    QTestState *qts = start_vpf("");
    g_autofree char *out = NULL;
    VsriovPcie p;

    vsriov_pcie_init(&p, qts, 2);
    out = qtest_hmp(qts, "info vsriov");

    g_assert_nonnull(strstr(out, "PF pf0"));
    g_assert_nonnull(strstr(out, "TotalVFs 4"));
    g_assert_nonnull(strstr(out, "VF 3: 01:00.4"));
    g_assert_nonnull(strstr(out, "pool p0: 0 free"));
    qtest_quit(qts);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/vsriov/vpf/capability", test_capability);
    qtest_add_func("/vsriov/vpf/totalvfs-property", test_totalvfs_property);
    qtest_add_func("/vsriov/vpf/many-vfs", test_many_vfs);
    qtest_add_func("/vsriov/vpf/enable-disable", test_enable_disable);
    qtest_add_func("/vsriov/vpf/numvfs-above-total", test_numvfs_above_total);
    qtest_add_func("/vsriov/vpf/toggle-stress", test_toggle_stress);
    qtest_add_func("/vsriov/vpf/odd-config-writes", test_odd_config_writes);
    qtest_add_func("/vsriov/vpf/pool-in-use", test_pool_in_use_not_deletable);
    qtest_add_func("/vsriov/vpf/hmp-info", test_hmp_info);
    qtest_add_func("/vsriov/vpf/vfs-inherit-dma-properties",
                   test_vfs_inherit_dma_properties);
    return g_test_run();
}
