/*
 * QTest: the VF-configuration channel of vsriov's virtual PF
 *
 * Speaks the mailbox of docs/vf-config-channel.md directly through the
 * PF's config space: capability layout, every command with good and bad
 * arguments, commands for VFs that do not exist, unknown opcodes and group
 * types, what query-vsriov reports, defaults after VFs are re-enabled, and
 * random writes of every size over the mailbox.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "libqtest.h"
#include "qemu/bswap.h"
#include "qobject/qdict.h"
#include "qobject/qlist.h"
#include "vsriov-pcie.h"
#include "vfcfg.h"

#define NUM_BACKENDS 3

static QTestState *start_pool(VsriovPcie *p, bool lazy)
{
    return vsriov_start_pf(p, lazy);
}

static QTestState *start(VsriovPcie *p)
{
    return start_pool(p, false);
}

static uint16_t vfcfg_cap(VsriovPcie *p)
{
    uint16_t off = 0x100;

    while (off) {
        uint32_t hdr = vsriov_cfg_readl(p, 1, 0, off);

        if (PCI_EXT_CAP_ID(hdr) == PCI_EXT_CAP_ID_VNDR &&
            (vsriov_cfg_readl(p, 1, 0, off + 4) & 0xffff) ==
            VSRIOV_VFCFG_VSEC_ID) {
            return off;
        }
        off = PCI_EXT_CAP_NEXT(hdr);
    }
    return 0;
}

static void set_vfs(VsriovPcie *p, uint16_t n)
{
    uint16_t cap = vsriov_find_ext_cap(p, 1, 0, PCI_EXT_CAP_ID_SRIOV);

    vsriov_cfg_writew(p, 1, 0, cap + PCI_SRIOV_CTRL, 0);
    vsriov_cfg_writew(p, 1, 0, cap + PCI_SRIOV_NUM_VF, n);
    if (n) {
        vsriov_cfg_writew(p, 1, 0, cap + PCI_SRIOV_CTRL, PCI_SRIOV_CTRL_VFE);
    }
}

/* Run one command: @in goes to the data area first, @out gets it after. */
static uint16_t cmd(VsriovPcie *p, uint16_t opcode, uint32_t member,
                    const uint8_t *in, size_t in_len, uint8_t *out)
{
    uint16_t cap = vfcfg_cap(p);
    uint8_t buf[VSRIOV_VFCFG_DATA_SIZE] = {};

    g_assert_cmpuint(in_len, <=, sizeof(buf));
    if (in_len) {
        memcpy(buf, in, in_len);
    }
    vsriov_cfg_writew(p, 1, 0, cap + VSRIOV_VFCFG_GROUP,
                      VSRIOV_VFCFG_GROUP_SRIOV);
    vsriov_cfg_writel(p, 1, 0, cap + VSRIOV_VFCFG_MEMBER, member);
    for (int i = 0; i < sizeof(buf); i += 4) {
        vsriov_cfg_writel(p, 1, 0, cap + VSRIOV_VFCFG_DATA + i,
                          ldl_le_p(buf + i));
    }
    vsriov_cfg_writew(p, 1, 0, cap + VSRIOV_VFCFG_OPCODE, opcode);
    if (out) {
        for (int i = 0; i < VSRIOV_VFCFG_DATA_SIZE; i++) {
            out[i] = vsriov_cfg_readb(p, 1, 0, cap + VSRIOV_VFCFG_DATA + i);
        }
    }
    return vsriov_cfg_readw(p, 1, 0, cap + VSRIOV_VFCFG_STATUS);
}

static uint16_t set_vlan(VsriovPcie *p, uint32_t member, uint16_t vlan,
                         uint8_t qos, uint16_t proto)
{
    uint8_t in[6] = { vlan, vlan >> 8, qos, 0, proto, proto >> 8 };

    return cmd(p, VSRIOV_VFCFG_CMD_SET_VLAN, member, in, sizeof(in), NULL);
}

static uint16_t set_rate(VsriovPcie *p, uint32_t member, uint32_t min,
                         uint32_t max)
{
    uint8_t in[8];

    stl_le_p(in, min);
    stl_le_p(in + 4, max);
    return cmd(p, VSRIOV_VFCFG_CMD_SET_RATE, member, in, sizeof(in), NULL);
}

static uint16_t set_byte(VsriovPcie *p, uint16_t opcode, uint32_t member,
                         uint8_t v)
{
    return cmd(p, opcode, member, &v, 1, NULL);
}

/* VF @index of query-vsriov's only PF; the caller unrefs *resp. */
static QDict *query_vf(QTestState *qts, int index, QDict **resp)
{
    QList *pfs, *vfs;
    QListEntry *e;

    *resp = qtest_qmp(qts, "{ 'execute': 'query-vsriov' }");
    pfs = qdict_get_qlist(*resp, "return");
    g_assert_cmpuint(qlist_size(pfs), ==, 1);
    vfs = qdict_get_qlist(qobject_to(QDict, qlist_peek(pfs)), "vfs");
    QLIST_FOREACH_ENTRY(vfs, e) {
        QDict *vf = qobject_to(QDict, qlist_entry_obj(e));

        if (qdict_get_int(vf, "index") == index) {
            return vf;
        }
    }
    g_assert_not_reached();
}

static void assert_config(QTestState *qts, int index, const char *mac,
                          int vlan, int qos, const char *link_state,
                          int max_rate)
{
    QDict *resp;
    QDict *vf = query_vf(qts, index, &resp);
    QDict *c = qdict_get_qdict(vf, "config");

    if (mac) {
        g_assert_cmpstr(qdict_get_str(vf, "mac"), ==, mac);
        g_assert_cmpstr(qdict_get_str(c, "mac"), ==, mac);
    } else {
        g_assert(!qdict_haskey(c, "mac"));
    }
    g_assert_cmpint(qdict_get_int(c, "vlan"), ==, vlan);
    g_assert_cmpint(qdict_get_int(c, "qos"), ==, qos);
    g_assert_cmpstr(qdict_get_str(c, "link-state"), ==, link_state);
    g_assert_cmpint(qdict_get_int(c, "max-tx-rate"), ==, max_rate);
    g_assert_cmpstr(qdict_get_str(c, "applied"), ==, "recorded");
    qobject_unref(resp);
}

static char *vf_mac(QTestState *qts, int index)
{
    QDict *resp;
    char *mac = g_strdup(qdict_get_str(query_vf(qts, index, &resp), "mac"));

    qobject_unref(resp);
    return mac;
}

static void test_capability(void)
{
    VsriovPcie p;
    QTestState *qts = start(&p);
    uint16_t sriov = vsriov_find_ext_cap(&p, 1, 0, PCI_EXT_CAP_ID_SRIOV);
    uint16_t cap = vfcfg_cap(&p);
    uint32_t vsec;

    g_assert_cmpuint(cap, !=, 0);
    g_assert_cmpuint(cap, >, sriov);
    vsec = vsriov_cfg_readl(&p, 1, 0, cap + 4);
    g_assert_cmpuint(vsec >> 16 & 0xf, ==, VSRIOV_VFCFG_VSEC_REV);
    g_assert_cmpuint(vsec >> 20, ==, VSRIOV_VFCFG_SIZEOF);
    g_assert_cmpuint(PCI_EXT_CAP_VER(vsriov_cfg_readl(&p, 1, 0, cap)), ==, 1);
    /* The header is read-only. */
    vsriov_cfg_writel(&p, 1, 0, cap + 4, 0);
    g_assert_cmpuint(vsriov_cfg_readl(&p, 1, 0, cap + 4), ==, vsec);
    /* A VF has no such capability: only the PF configures VFs. */
    set_vfs(&p, 1);
    for (uint16_t off = 0x100; off;) {
        uint32_t hdr = vsriov_cfg_readl(&p, 1, 1, off);

        g_assert_cmpuint(PCI_EXT_CAP_ID(hdr), !=, PCI_EXT_CAP_ID_VNDR);
        off = PCI_EXT_CAP_NEXT(hdr);
    }
    qtest_quit(qts);
}

static void test_get_config(void)
{
    VsriovPcie p;
    QTestState *qts = start(&p);
    uint8_t out[VSRIOV_VFCFG_DATA_SIZE];
    g_autofree char *mac = NULL;
    char got[18];

    /* No VF is enabled: there is nothing to configure. */
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_GET_CONFIG, 1, NULL, 0, out),
                     ==, VSRIOV_VFCFG_S_EINVAL);
    set_vfs(&p, 2);
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_GET_CONFIG, 2, NULL, 0, out),
                     ==, VSRIOV_VFCFG_S_OK);
    mac = vf_mac(qts, 1);
    snprintf(got, sizeof(got), "%02x:%02x:%02x:%02x:%02x:%02x",
             out[0], out[1], out[2], out[3], out[4], out[5]);
    g_assert_cmpstr(got, ==, mac);
    g_assert_cmpuint(lduw_le_p(out + VSRIOV_VFCFG_CFG_VLAN), ==, 0);
    g_assert_cmpuint(lduw_le_p(out + VSRIOV_VFCFG_CFG_VLAN_PROTO), ==, 0x8100);
    g_assert_cmpuint(out[VSRIOV_VFCFG_CFG_LINK_STATE], ==,
                     VSRIOV_VFCFG_LINK_AUTO);
    g_assert_cmpuint(ldl_le_p(out + VSRIOV_VFCFG_CFG_MAX_RATE), ==, 0);
    /* VF 3 exists (TotalVFs 3) but is not enabled; member 0 is the PF. */
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_GET_CONFIG, 3, NULL, 0, out),
                     ==, VSRIOV_VFCFG_S_EINVAL);
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_GET_CONFIG, 0, NULL, 0, out),
                     ==, VSRIOV_VFCFG_S_EINVAL);
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_GET_CONFIG, 0xffffffff, NULL, 0,
                         out), ==, VSRIOV_VFCFG_S_EINVAL);
    /* Stats of a backend without counters: zeros, not an error. */
    memset(out, 0xa5, sizeof(out));
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_GET_STATS, 1, NULL, 0, out),
                     ==, VSRIOV_VFCFG_S_OK);
    for (int i = 0; i < sizeof(out); i++) {
        g_assert_cmpuint(out[i], ==, 0);
    }
    qtest_quit(qts);
}

static void test_set_and_reset(void)
{
    static const uint8_t mac[6] = { 0x02, 0, 0, 0, 0, 0x10 };
    static const uint8_t mcast[6] = { 0x01, 0, 0x5e, 0, 0, 1 };
    static const uint8_t zero[6];
    VsriovPcie p;
    QTestState *qts = start(&p);
    g_autofree char *mac0 = NULL;
    g_autofree char *mac1 = NULL;
    g_autofree char *again = NULL;
    g_autofree char *untouched = NULL;
    uint8_t out[VSRIOV_VFCFG_DATA_SIZE];

    set_vfs(&p, 2);
    mac0 = vf_mac(qts, 0);
    mac1 = vf_mac(qts, 1);

    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_SET_MAC, 1, mac, 6, NULL),
                     ==, VSRIOV_VFCFG_S_OK);
    g_assert_cmpuint(set_vlan(&p, 1, 100, 3, 0x8100), ==, VSRIOV_VFCFG_S_OK);
    g_assert_cmpuint(set_byte(&p, VSRIOV_VFCFG_CMD_SET_SPOOFCHK, 1, 1), ==,
                     VSRIOV_VFCFG_S_OK);
    g_assert_cmpuint(set_byte(&p, VSRIOV_VFCFG_CMD_SET_TRUST, 1, 0), ==,
                     VSRIOV_VFCFG_S_OK);
    g_assert_cmpuint(set_byte(&p, VSRIOV_VFCFG_CMD_SET_LINK_STATE, 1,
                              VSRIOV_VFCFG_LINK_ENABLE), ==,
                     VSRIOV_VFCFG_S_OK);
    g_assert_cmpuint(set_rate(&p, 1, 0, 1000), ==, VSRIOV_VFCFG_S_OK);
    assert_config(qts, 0, "02:00:00:00:00:10", 100, 3, "enable", 1000);
    /* VF 1 kept its defaults. */
    assert_config(qts, 1, NULL, 0, 0, "auto", 0);
    untouched = vf_mac(qts, 1);
    g_assert_cmpstr(untouched, ==, mac1);

    /* Bad values change nothing. */
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_SET_MAC, 1, mcast, 6, NULL),
                     ==, VSRIOV_VFCFG_S_EINVAL);
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_SET_MAC, 1, zero, 6, NULL),
                     ==, VSRIOV_VFCFG_S_EINVAL);
    g_assert_cmpuint(set_vlan(&p, 1, 4095, 0, 0x8100), ==,
                     VSRIOV_VFCFG_S_EINVAL);
    g_assert_cmpuint(set_vlan(&p, 1, 10, 8, 0x8100), ==,
                     VSRIOV_VFCFG_S_EINVAL);
    g_assert_cmpuint(set_vlan(&p, 1, 10, 0, 0x0800), ==,
                     VSRIOV_VFCFG_S_EINVAL);
    g_assert_cmpuint(set_rate(&p, 1, 0, 20000), ==, VSRIOV_VFCFG_S_EINVAL);
    g_assert_cmpuint(set_rate(&p, 1, 500, 100), ==, VSRIOV_VFCFG_S_EINVAL);
    g_assert_cmpuint(set_byte(&p, VSRIOV_VFCFG_CMD_SET_LINK_STATE, 1, 3), ==,
                     VSRIOV_VFCFG_S_EINVAL);
    g_assert_cmpuint(set_byte(&p, VSRIOV_VFCFG_CMD_SET_SPOOFCHK, 1, 2), ==,
                     VSRIOV_VFCFG_S_EINVAL);
    g_assert_cmpuint(cmd(&p, 0x1234, 1, NULL, 0, NULL), ==,
                     VSRIOV_VFCFG_S_EOPNOTSUPP);
    g_assert_cmpuint(set_vlan(&p, 3, 10, 0, 0x8100), ==,
                     VSRIOV_VFCFG_S_EINVAL);
    assert_config(qts, 0, "02:00:00:00:00:10", 100, 3, "enable", 1000);

    /* 802.1ad, and the mailbox reads back what query-vsriov says. */
    g_assert_cmpuint(set_vlan(&p, 2, 4094, 7, 0x88a8), ==, VSRIOV_VFCFG_S_OK);
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_GET_CONFIG, 2, NULL, 0, out),
                     ==, VSRIOV_VFCFG_S_OK);
    g_assert_cmpuint(lduw_le_p(out + VSRIOV_VFCFG_CFG_VLAN), ==, 4094);
    g_assert_cmpuint(out[VSRIOV_VFCFG_CFG_QOS], ==, 7);
    g_assert_cmpuint(lduw_le_p(out + VSRIOV_VFCFG_CFG_VLAN_PROTO), ==, 0x88a8);

    /* VFs disabled and enabled again start over with their pool MAC. */
    set_vfs(&p, 0);
    set_vfs(&p, 2);
    assert_config(qts, 0, NULL, 0, 0, "auto", 0);
    assert_config(qts, 1, NULL, 0, 0, "auto", 0);
    again = vf_mac(qts, 0);
    g_assert_cmpstr(again, ==, mac0);
    qtest_quit(qts);
}

static void test_bad_group(void)
{
    VsriovPcie p;
    QTestState *qts = start(&p);
    uint16_t cap = vfcfg_cap(&p);

    set_vfs(&p, 1);
    vsriov_cfg_writew(&p, 1, 0, cap + VSRIOV_VFCFG_GROUP, 2);
    vsriov_cfg_writel(&p, 1, 0, cap + VSRIOV_VFCFG_MEMBER, 1);
    vsriov_cfg_writew(&p, 1, 0, cap + VSRIOV_VFCFG_OPCODE,
                      VSRIOV_VFCFG_CMD_GET_CONFIG);
    g_assert_cmpuint(vsriov_cfg_readw(&p, 1, 0, cap + VSRIOV_VFCFG_STATUS),
                     ==, VSRIOV_VFCFG_S_EINVAL);
    /* The status is the device's: the guest cannot write it. */
    vsriov_cfg_writew(&p, 1, 0, cap + VSRIOV_VFCFG_STATUS, 0);
    g_assert_cmpuint(vsriov_cfg_readw(&p, 1, 0, cap + VSRIOV_VFCFG_STATUS),
                     ==, VSRIOV_VFCFG_S_EINVAL);
    qtest_quit(qts);
}

/*
 * PREPARE_VFS (member 0: the PF; NumVFs to come) before VF Enable: a pool
 * whose backends QEMU has at hand (static, premapped or lazy) completes it
 * within the write; bad arguments and enabled VFs are refused.
 */
static void prepare_vfs(bool lazy)
{
    VsriovPcie p;
    QTestState *qts = start_pool(&p, lazy);
    uint8_t n[2];

    stw_le_p(n, 2);
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_PREPARE_VFS, 0, n, 2, NULL),
                     ==, VSRIOV_VFCFG_S_OK);
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_PREPARE_VFS, 1, n, 2, NULL),
                     ==, VSRIOV_VFCFG_S_EINVAL);
    stw_le_p(n, 0);
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_PREPARE_VFS, 0, n, 2, NULL),
                     ==, VSRIOV_VFCFG_S_EINVAL);
    stw_le_p(n, NUM_BACKENDS + 1);
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_PREPARE_VFS, 0, n, 2, NULL),
                     ==, VSRIOV_VFCFG_S_EINVAL);
    set_vfs(&p, 2);
    stw_le_p(n, 2);
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_PREPARE_VFS, 0, n, 2, NULL),
                     ==, VSRIOV_VFCFG_S_EINVAL);
    /* the VFs came all the same */
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_GET_CONFIG, 2, NULL, 0, NULL),
                     ==, VSRIOV_VFCFG_S_OK);
    qtest_quit(qts);
}

static void test_prepare_vfs(void)
{
    prepare_vfs(false);
}

static void test_prepare_vfs_lazy(void)
{
    prepare_vfs(true);
}

/*
 * Random writes of every size at every offset of the mailbox and past
 * its end (oversized commands: data runs off the capability), with VF
 * Enable and NumVFs flipped in between: QEMU stays up, the capability's
 * header and the SR-IOV capability's TotalVFs are untouched, and a clean
 * command works afterwards.  VSRIOV_QTEST_OPS operations (default 20000;
 * scripts/fuzz-qemu runs a million, under ASan), for a premapped and a
 * lazy pool.
 */
static void random_writes(bool lazy)
{
    VsriovPcie p;
    QTestState *qts = start_pool(&p, lazy);
    uint16_t cap = vfcfg_cap(&p);
    uint16_t sriov = vsriov_find_ext_cap(&p, 1, 0, PCI_EXT_CAP_ID_SRIOV);
    uint32_t hdr = vsriov_cfg_readl(&p, 1, 0, cap);
    uint32_t vsec = vsriov_cfg_readl(&p, 1, 0, cap + 4);
    const char *env = g_getenv("VSRIOV_QTEST_OPS");
    long ops = env ? atol(env) : 20000;
    GRand *rand = g_rand_new_with_seed(20261122);
    uint8_t out[VSRIOV_VFCFG_DATA_SIZE];
    gint64 t0 = g_get_monotonic_time();

    set_vfs(&p, 3);
    for (long i = 0; i < ops; i++) {
        int off = g_rand_int_range(rand, -8, VSRIOV_VFCFG_SIZEOF + 32);
        uint32_t v = g_rand_int(rand);

        /* Now and then the VFs come and go (the lazy pool's backends too). */
        if (i % 997 == 0) {
            vsriov_cfg_writew(&p, 1, 0, sriov + PCI_SRIOV_CTRL, 0);
            vsriov_cfg_writew(&p, 1, 0, sriov + PCI_SRIOV_NUM_VF, v % 5);
            vsriov_cfg_writew(&p, 1, 0, sriov + PCI_SRIOV_CTRL,
                              (v >> 8) & 1 ? PCI_SRIOV_CTRL_VFE : 0);
            continue;
        }

        /* Aim at the opcode often, so commands run with random input. */
        if (i % 3 == 0) {
            off = VSRIOV_VFCFG_OPCODE;
            v = 0x8000 | (v & 0xf);
        }
        if (i % 5 == 0) {
            vsriov_cfg_writel(&p, 1, 0, cap + VSRIOV_VFCFG_MEMBER, v & 3);
            vsriov_cfg_writew(&p, 1, 0, cap + VSRIOV_VFCFG_GROUP, 1);
        }
        switch (i % 4) {
        case 0:
            vsriov_cfg_writeb(&p, 1, 0, cap + off, v);
            break;
        case 1:
            vsriov_cfg_writew(&p, 1, 0, cap + off, v);
            break;
        default:
            vsriov_cfg_writel(&p, 1, 0, cap + off, v);
            break;
        }
    }
    g_rand_free(rand);
    g_test_message("%ld operations in %.1f s (%s pool)", ops,
                   (g_get_monotonic_time() - t0) / 1e6, lazy ? "lazy" : "premapped");
    set_vfs(&p, 3);
    g_assert_cmpuint(vsriov_cfg_readl(&p, 1, 0, cap), ==, hdr);
    g_assert_cmpuint(vsriov_cfg_readl(&p, 1, 0, cap + 4), ==, vsec);
    g_assert_cmpuint(vsriov_cfg_readw(&p, 1, 0, sriov + PCI_SRIOV_TOTAL_VF),
                     ==, NUM_BACKENDS);
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_GET_CONFIG, 1, NULL, 0, out),
                     ==, VSRIOV_VFCFG_S_OK);
    /* Whatever the random commands set is gone after a re-enable. */
    set_vfs(&p, 0);
    set_vfs(&p, 3);
    assert_config(qts, 2, NULL, 0, 0, "auto", 0);
    qtest_quit(qts);
}

static void test_random_writes(void)
{
    random_writes(false);
}

static void test_random_writes_lazy(void)
{
    random_writes(true);
}

/*
 * A PF reset disables the VFs; their configuration is back to defaults
 * and VSRIOV_VFS_CHANGED says so at once, not at the guest's next config
 * write (then a VF Enable of as many VFs as before changed nothing).
 */
static void test_pf_reset(void)
{
    static const uint8_t mac[6] = { 0x02, 0, 0, 0, 0, 0x11 };
    VsriovPcie p;
    QTestState *qts = start(&p);
    g_autofree char *before = NULL;
    g_autofree char *after = NULL;
    QDict *ev;

    set_vfs(&p, 2);
    before = vf_mac(qts, 0);
    ev = qtest_qmp_eventwait_ref(qts, "VSRIOV_VFS_CHANGED");
    g_assert_cmpint(qdict_get_int(qdict_get_qdict(ev, "data"), "num-vfs"),
                    ==, 2);
    qobject_unref(ev);
    g_assert_cmpuint(cmd(&p, VSRIOV_VFCFG_CMD_SET_MAC, 1, mac, 6, NULL),
                     ==, VSRIOV_VFCFG_S_OK);
    g_assert_cmpuint(set_vlan(&p, 1, 100, 3, 0x8100), ==, VSRIOV_VFCFG_S_OK);
    g_assert_cmpuint(set_byte(&p, VSRIOV_VFCFG_CMD_SET_LINK_STATE, 1,
                              VSRIOV_VFCFG_LINK_DISABLE), ==,
                     VSRIOV_VFCFG_S_OK);
    assert_config(qts, 0, "02:00:00:00:00:11", 100, 3, "disable", 0);

    qobject_unref(qtest_qmp(qts, "{ 'execute': 'system_reset' }"));
    /* no config access after the reset: the event alone must come */
    ev = qtest_qmp_eventwait_ref(qts, "VSRIOV_VFS_CHANGED");
    g_assert_cmpint(qdict_get_int(qdict_get_qdict(ev, "data"), "num-vfs"),
                    ==, 0);
    qobject_unref(ev);
    assert_config(qts, 0, NULL, 0, 0, "auto", 0);
    after = vf_mac(qts, 0);
    g_assert_cmpstr(after, ==, before);
    qtest_quit(qts);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/vsriov/vfcfg/capability", test_capability);
    qtest_add_func("/vsriov/vfcfg/get-config", test_get_config);
    qtest_add_func("/vsriov/vfcfg/set-and-reset", test_set_and_reset);
    qtest_add_func("/vsriov/vfcfg/pf-reset", test_pf_reset);
    qtest_add_func("/vsriov/vfcfg/bad-group", test_bad_group);
    qtest_add_func("/vsriov/vfcfg/prepare-vfs", test_prepare_vfs);
    qtest_add_func("/vsriov/vfcfg/prepare-vfs-lazy", test_prepare_vfs_lazy);
    qtest_add_func("/vsriov/vfcfg/random-writes", test_random_writes);
    qtest_add_func("/vsriov/vfcfg/random-writes-lazy", test_random_writes_lazy);
    return g_test_run();
}
