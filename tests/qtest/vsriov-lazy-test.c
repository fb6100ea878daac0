/*
 * QTest: a virtual PF with a lazy pool (vsriov-pool lazy=on)
 *
 * Backends are claimed when the guest sets VF Enable and returned when it
 * clears it or the PF is reset; VFs keep their functions and MACs; a pool
 * shared by two PFs refuses VF Enable when it cannot back all VFs, and the
 * PF keeps working; a thousand enable/disable cycles leak nothing (the
 * ASan run).  PF hot-unplug needs a guest's pciehp: tests/system.
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

/* One pool of NUM_BACKENDS hubports; PF pf<i> on root port rp<i>. */
static QTestState *start_lazy(int pfs, const char *pf_extra)
{
    g_autoptr(GString) args = g_string_new("-M q35 -nodefaults ");

    for (int i = 0; i < NUM_BACKENDS; i++) {
        g_string_append_printf(args, "-netdev hubport,id=b%d,hubid=%d ",
                               i, i + 1);
    }
    g_string_append(args, "-object vsriov-pool,id=p0,lazy=on");
    for (int i = 0; i < NUM_BACKENDS; i++) {
        g_string_append_printf(args, ",netdevs=b%d", i);
    }
    for (int i = 0; i < pfs; i++) {
        g_string_append_printf(args,
            " -device pcie-root-port,id=rp%d,chassis=%d,addr=0x%x"
            " -netdev hubport,id=pfnet%d,hubid=%d"
            " -device virtio-net-pci,bus=rp%d,id=pf%d,netdev=pfnet%d,"
            "sriov-pool=p0%s", i, i + 1, i + 2, i, 100 + i, i, i, i,
            pf_extra);
    }
    return qtest_init(args->str);
}

/* Root port at 00:(2+i).0 gets bus 1+i (vsriov_pcie_init did the first). */
static void second_port(VsriovPcie *p, int i)
{
    int devfn = QPCI_DEVFN(2 + i, 0);

    vsriov_cfg_writeb(p, 0, devfn, PCI_PRIMARY_BUS, 0);
    vsriov_cfg_writeb(p, 0, devfn, PCI_SECONDARY_BUS, 1 + i);
    vsriov_cfg_writeb(p, 0, devfn, PCI_SUBORDINATE_BUS, 1 + i);
}

static uint16_t sriov_cap(VsriovPcie *p, int bus)
{
    uint16_t cap = vsriov_find_ext_cap(p, bus, 0, PCI_EXT_CAP_ID_SRIOV);

    g_assert_cmpuint(cap, !=, 0);
    return cap;
}

static void set_vfs(VsriovPcie *p, int bus, uint16_t cap, uint16_t n)
{
    vsriov_cfg_writew(p, bus, 0, cap + PCI_SRIOV_CTRL, 0);
    vsriov_cfg_writew(p, bus, 0, cap + PCI_SRIOV_NUM_VF, n);
    if (n) {
        vsriov_cfg_writew(p, bus, 0, cap + PCI_SRIOV_CTRL,
                          PCI_SRIOV_CTRL_VFE);
    }
}

static bool vfe(VsriovPcie *p, int bus, uint16_t cap)
{
    return vsriov_cfg_readw(p, bus, 0, cap + PCI_SRIOV_CTRL) &
           PCI_SRIOV_CTRL_VFE;
}

static bool vf_present(VsriovPcie *p, int bus, int devfn)
{
    return vsriov_cfg_readl(p, bus, devfn, PCI_CLASS_REVISION) != 0xffffffff;
}

/* How many backends of pool p0 are claimed by PF @pf (NULL: by anyone). */
static int claimed(QTestState *qts, const char *pf)
{
    QDict *resp = qtest_qmp(qts, "{ 'execute': 'query-vsriov-pools' }");
    QDict *pool = qobject_to(QDict,
                             qlist_peek(qdict_get_qlist(resp, "return")));
    g_autofree char *prefix = g_strdup_printf("/machine/peripheral/%s/",
                                              pf ? pf : "");
    QListEntry *e;
    int n = 0;

    g_assert_true(qdict_get_bool(pool, "lazy"));
    QLIST_FOREACH_ENTRY(qdict_get_qlist(pool, "entries"), e) {
        QDict *entry = qobject_to(QDict, qlist_entry_obj(e));
        const char *by = qdict_get_try_str(entry, "claimed-by");

        if (by && (!pf || g_str_has_prefix(by, prefix))) {
            n++;
        }
    }
    g_assert_cmpint(qdict_get_int(pool, "free"), ==,
                    NUM_BACKENDS - (pf ? claimed(qts, NULL) : n));
    qobject_unref(resp);
    return n;
}

/*
 * Disabled VFs give their backends back from QEMU's main loop, not in the
 * config write that disabled them: wait until none is claimed.
 */
static void wait_all_returned(QTestState *qts)
{
    gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;

    while (claimed(qts, NULL) && g_get_monotonic_time() < deadline) {
        g_usleep(10 * 1000);
    }
    g_assert_cmpint(claimed(qts, NULL), ==, 0);
}

/*
 * The VFs of PF @pf as query-vsriov reports them: each VF's MAC into
 * @macs (if given), and checks that exactly the first @enabled have a
 * backend (b<n>, hubport, "bound") and are enabled, the others none.
 */
static void check_vfs(QTestState *qts, int pf, int enabled, char **macs)
{
    QDict *resp = qtest_qmp(qts, "{ 'execute': 'query-vsriov' }");
    QList *pfs = qdict_get_qlist(resp, "return");
    QDict *info = NULL;
    QListEntry *e;
    int i = 0;

    for (const QListEntry *pe = qlist_first(pfs); pe; pe = qlist_next(pe)) {
        g_autofree char *id = g_strdup_printf("pf%d", pf);

        info = qobject_to(QDict, qlist_entry_obj(pe));
        if (!strcmp(qdict_get_str(info, "id"), id)) {
            break;
        }
    }
    g_assert_cmpint(qdict_get_int(info, "total-vfs"), ==, NUM_BACKENDS);
    QLIST_FOREACH_ENTRY(qdict_get_qlist(info, "vfs"), e) {
        QDict *vf = qobject_to(QDict, qlist_entry_obj(e));

        g_assert_cmpint(qdict_get_int(vf, "devfn"), ==, i + 1);
        if (i < enabled) {
            g_assert_cmpstr(qdict_get_str(vf, "state"), ==, "enabled");
            g_assert_cmpstr(qdict_get_str(vf, "backing"), ==, "bound");
            g_assert_cmpstr(qdict_get_str(vf, "backend"), ==, "hubport");
            g_assert_true(qdict_haskey(vf, "netdev"));
        } else {
            g_assert_cmpstr(qdict_get_str(vf, "state"), ==, "disabled");
            g_assert_cmpstr(qdict_get_str(vf, "backing"), ==, "none");
            g_assert_cmpstr(qdict_get_str(vf, "backend"), ==, "none");
            g_assert_false(qdict_haskey(vf, "netdev"));
        }
        if (macs) {
            g_free(macs[i]);
            macs[i] = g_strdup(qdict_get_str(vf, "mac"));
        }
        i++;
    }
    g_assert_cmpint(i, ==, NUM_BACKENDS);
    qobject_unref(resp);
}

static void test_enable_claims_disable_returns(void)
{
    QTestState *qts = start_lazy(1, "");
    char *before[NUM_BACKENDS] = {}, *after[NUM_BACKENDS] = {};
    VsriovPcie p;
    uint16_t cap;
    QDict *ev;

    vsriov_pcie_init(&p, qts, 2);
    cap = sriov_cap(&p, 1);
    /* TotalVFs is the pool's size; nothing is claimed before VF Enable. */
    g_assert_cmpuint(vsriov_cfg_readw(&p, 1, 0, cap + PCI_SRIOV_TOTAL_VF),
                     ==, NUM_BACKENDS);
    g_assert_cmpint(claimed(qts, NULL), ==, 0);
    check_vfs(qts, 0, 0, before);

    set_vfs(&p, 1, cap, 3);
    ev = vsriov_vfs_changed_wait(qts);
    g_assert_cmpint(qdict_get_int(qdict_get_qdict(ev, "data"), "num-vfs"),
                    ==, 3);
    qobject_unref(ev);
    g_assert_true(vfe(&p, 1, cap));
    for (int i = 1; i <= NUM_BACKENDS; i++) {
        g_assert_cmpint(vf_present(&p, 1, i), ==, i <= 3);
    }
    /* The new VFs are VFs like the others: IDs, class, ARI. */
    g_assert_cmphex(vsriov_cfg_readw(&p, 1, 2, PCI_VENDOR_ID), ==, 0xffff);
    g_assert_cmphex(vsriov_cfg_readl(&p, 1, 2, PCI_CLASS_REVISION) >> 8,
                    ==, 0x020000);
    g_assert_cmpuint(vsriov_find_ext_cap(&p, 1, 2, PCI_EXT_CAP_ID_ARI),
                     !=, 0);
    g_assert_cmpint(claimed(qts, "pf0"), ==, 3);
    check_vfs(qts, 0, 3, after);
    /* A VF keeps its MAC whether it has a backend or not. */
    for (int i = 0; i < NUM_BACKENDS; i++) {
        g_assert_cmpstr(before[i], ==, after[i]);
    }

    vsriov_cfg_writew(&p, 1, 0, cap + PCI_SRIOV_CTRL, 0);
    ev = vsriov_vfs_changed_wait(qts);
    qobject_unref(ev);
    for (int i = 1; i <= NUM_BACKENDS; i++) {
        g_assert_false(vf_present(&p, 1, i));
    }
    wait_all_returned(qts);
    check_vfs(qts, 0, 0, after);
    for (int i = 0; i < NUM_BACKENDS; i++) {
        g_assert_cmpstr(before[i], ==, after[i]);
        g_free(before[i]);
        g_free(after[i]);
    }
    qtest_quit(qts);
}

/* Two PFs share one pool of 4: VF Enable takes only what is free. */
static void test_shared_pool(void)
{
    QTestState *qts = start_lazy(2, "");
    VsriovPcie p;
    uint16_t cap0, cap1;

    vsriov_pcie_init(&p, qts, 2);
    second_port(&p, 1);
    cap0 = sriov_cap(&p, 1);
    cap1 = sriov_cap(&p, 2);
    g_assert_cmpuint(vsriov_cfg_readw(&p, 2, 0, cap1 + PCI_SRIOV_TOTAL_VF),
                     ==, NUM_BACKENDS);

    set_vfs(&p, 1, cap0, 3);
    g_assert_true(vfe(&p, 1, cap0));
    g_assert_cmpint(claimed(qts, "pf0"), ==, 3);

    /* pf1 asks for 2, the pool has 1: VF Enable does not take. */
    set_vfs(&p, 2, cap1, 2);
    g_assert_false(vfe(&p, 2, cap1));
    g_assert_false(vf_present(&p, 2, 1));
    g_assert_false(vf_present(&p, 2, 2));
    g_assert_cmpint(claimed(qts, "pf1"), ==, 0);
    g_assert_cmpint(claimed(qts, NULL), ==, 3);
    check_vfs(qts, 1, 0, NULL);
    /* NumVFs stays writable: 1 fits. */
    set_vfs(&p, 2, cap1, 1);
    g_assert_true(vfe(&p, 2, cap1));
    g_assert_true(vf_present(&p, 2, 1));
    g_assert_cmpint(claimed(qts, "pf1"), ==, 1);
    check_vfs(qts, 1, 1, NULL);

    /* pf0 gives its VFs up: pf1 can have 4. */
    set_vfs(&p, 1, cap0, 0);
    set_vfs(&p, 2, cap1, 4);
    g_assert_true(vfe(&p, 2, cap1));
    g_assert_cmpint(claimed(qts, "pf1"), ==, 4);
    check_vfs(qts, 0, 0, NULL);
    check_vfs(qts, 1, 4, NULL);
    qtest_quit(qts);
}

/* A system reset disables the VFs: their backends go back to the pool. */
static void test_reset_returns_backends(void)
{
    QTestState *qts = start_lazy(1, "");
    VsriovPcie p;
    uint16_t cap;

    vsriov_pcie_init(&p, qts, 2);
    cap = sriov_cap(&p, 1);
    set_vfs(&p, 1, cap, 2);
    g_assert_cmpint(claimed(qts, "pf0"), ==, 2);
    qobject_unref(qtest_qmp(qts, "{ 'execute': 'system_reset' }"));
    qtest_qmp_eventwait(qts, "RESET");
    wait_all_returned(qts);
    check_vfs(qts, 0, 0, NULL);

    /* and the PF works after it */
    vsriov_pcie_init(&p, qts, 2);
    set_vfs(&p, 1, cap, 4);
    g_assert_true(vfe(&p, 1, cap));
    g_assert_cmpint(claimed(qts, "pf0"), ==, 4);
    qtest_quit(qts);
}

/* Each cycle creates and destroys 2 x N devices; ASan counts the bytes. */
static void test_toggle_stress(void)
{
    QTestState *qts = start_lazy(1, "");
    VsriovPcie p;
    uint16_t cap;

    vsriov_pcie_init(&p, qts, 2);
    cap = sriov_cap(&p, 1);
    vsriov_cfg_writew(&p, 1, 0, cap + PCI_SRIOV_NUM_VF, NUM_BACKENDS);
    for (int i = 0; i < 1000; i++) {
        vsriov_cfg_writew(&p, 1, 0, cap + PCI_SRIOV_CTRL,
                          i & 1 ? 0 : PCI_SRIOV_CTRL_VFE);
    }
    wait_all_returned(qts);
    vsriov_cfg_writew(&p, 1, 0, cap + PCI_SRIOV_CTRL, PCI_SRIOV_CTRL_VFE);
    g_assert_cmpint(claimed(qts, "pf0"), ==, NUM_BACKENDS);
    check_vfs(qts, 0, NUM_BACKENDS, NULL);
    qtest_quit(qts);
}

/* A pool's mode and backends are fixed once it exists. */
static void test_properties_fixed(void)
{
    QTestState *qts = start_lazy(1, "");
    QDict *resp;

    resp = qtest_qmp(qts, "{ 'execute': 'qom-set', 'arguments': {"
                     " 'path': '/objects/p0', 'property': 'lazy',"
                     " 'value': false } }");
    g_assert_nonnull(strstr(qdict_get_str(qdict_get_qdict(resp, "error"),
                                          "desc"),
                            "'lazy' cannot change once the pool exists"));
    qobject_unref(resp);
    resp = qtest_qmp(qts, "{ 'execute': 'qom-set', 'arguments': {"
                     " 'path': '/objects/p0', 'property': 'netdevs',"
                     " 'value': [ 'b0' ] } }");
    g_assert(qdict_haskey(resp, "error"));
    qobject_unref(resp);
    /* Nothing is claimed, but a PF takes from it at VF Enable: it stays. */
    resp = qtest_qmp(qts, "{ 'execute': 'object-del',"
                     " 'arguments': { 'id': 'p0' } }");
    g_assert(qdict_haskey(resp, "error"));
    qobject_unref(resp);
    g_assert_cmpint(claimed(qts, NULL), ==, 0);
    check_vfs(qts, 0, 0, NULL);
    qtest_quit(qts);
}

/*
 * VFs are made and removed while the guest may have locked the root
 * port's slot (electromechanical interlock): that is the slot's business,
 * not the VFs'.
 */
static void test_slot_interlock(void)
{
    QTestState *qts = start_lazy(1, "");
    int port = QPCI_DEVFN(2, 0);
    VsriovPcie p;
    uint16_t cap, ctl;
    uint8_t exp;

    vsriov_pcie_init(&p, qts, 2);
    cap = sriov_cap(&p, 1);
    exp = vsriov_find_cap(&p, 0, port, PCI_CAP_ID_EXP);
    ctl = vsriov_cfg_readw(&p, 0, port, exp + PCI_EXP_SLTCTL);
    vsriov_cfg_writew(&p, 0, port, exp + PCI_EXP_SLTCTL,
                      ctl | PCI_EXP_SLTCTL_EIC);
    g_assert_true(vsriov_cfg_readw(&p, 0, port, exp + PCI_EXP_SLTSTA) &
                  PCI_EXP_SLTSTA_EIS);
    set_vfs(&p, 1, cap, 2);
    g_assert_true(vfe(&p, 1, cap));
    g_assert_cmpint(claimed(qts, "pf0"), ==, 2);
    set_vfs(&p, 1, cap, 0);
    wait_all_returned(qts);
    check_vfs(qts, 0, 0, NULL);
    qtest_quit(qts);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/vsriov/lazy/enable-claims-disable-returns",
                   test_enable_claims_disable_returns);
    qtest_add_func("/vsriov/lazy/shared-pool", test_shared_pool);
    qtest_add_func("/vsriov/lazy/reset", test_reset_returns_backends);
    qtest_add_func("/vsriov/lazy/toggle-stress", test_toggle_stress);
    qtest_add_func("/vsriov/lazy/properties-fixed", test_properties_fixed);
    qtest_add_func("/vsriov/lazy/slot-interlock", test_slot_interlock);
    return g_test_run();
}
