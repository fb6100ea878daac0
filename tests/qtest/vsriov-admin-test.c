/*
 * QTest: the administration virtqueue of vsriov's virtual PF
 *
 * Drives the PF as a driver would, with a split virtqueue of its own in
 * guest memory: finds the virtio PCI capabilities, negotiates
 * VIRTIO_F_ADMIN_VQ, sets up the queue at the index the common
 * configuration reports, and sends group administration commands
 * (docs/vf-config-channel.md, docs/virtio-spec/): discovery, every
 * member command with good and bad arguments, a SET that fails leaving
 * nothing changed, a driver-restricted capability, the VFs' links as
 * the host changes links, buffers shorter and longer than the
 * structures, a PF reset, and random commands mixed with random writes
 * over the SR-IOV capability.
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
#include "standard-headers/linux/virtio_config.h"
#include "standard-headers/linux/virtio_pci.h"
#include "standard-headers/linux/virtio_net.h"
#include "standard-headers/linux/virtio_ring.h"
#include "vsriov-pcie.h"
#include "admin.h"
#include "eswitch.h"
#include "flow.h"

#define PF_BUS          1               /* the PF: 01:00.0 */
#define PF_DEVFN        0
#define BAR_BASE        0xc0000000ULL   /* the PF's BARs, in the window */
#define QSIZE           16
#define DESC            0x100000ULL     /* the admin queue in guest RAM */
#define AVAIL           0x101000ULL
#define USED            0x102000ULL
#define OUT_BUF         0x110000ULL
#define IN_BUF          0x111000ULL

typedef struct Admin {
    VsriovPcie p;
    QTestState *qts;
    uint64_t common, notify, device;    /* structures, in memory space */
    uint32_t notify_mult;
    uint16_t index;                     /* the admin queue's */
    uint16_t notify_off;
    uint16_t avail_idx, used_idx;
} Admin;

/* A split virtqueue of the PF's other than the admin queue. */
typedef struct Ring {
    uint16_t index;
    uint64_t desc, avail, used;         /* 4 KiB each, then buffers */
    uint16_t notify_off;
    uint16_t avail_idx, used_idx;
} Ring;

typedef struct Res {
    uint16_t status, qualifier;
    uint32_t len;                       /* used length */
    uint8_t result[512];
} Res;

static uint64_t cap_addr(Admin *a, uint8_t cap)
{
    uint8_t bar = vsriov_cfg_readb(&a->p, PF_BUS, PF_DEVFN, cap + 4);
    uint32_t off = vsriov_cfg_readl(&a->p, PF_BUS, PF_DEVFN, cap + 8);

    /* the modern BARs are 64-bit: BAR_BASE plus 16 MiB per BAR pair */
    return BAR_BASE + (bar / 2) * 0x1000000ULL + off;
}

/* Give the root port a window and the PF's 64-bit BARs their place. */
static void map_pf(Admin *a)
{
    VsriovPcie *p = &a->p;

    vsriov_cfg_writew(p, 0, QPCI_DEVFN(2, 0), PCI_PREF_MEMORY_BASE,
                      (BAR_BASE >> 16) & 0xfff0);
    vsriov_cfg_writew(p, 0, QPCI_DEVFN(2, 0), PCI_PREF_MEMORY_LIMIT,
                      ((BAR_BASE + 0x7ffffff) >> 16) & 0xfff0);
    vsriov_cfg_writel(p, 0, QPCI_DEVFN(2, 0), PCI_PREF_BASE_UPPER32, 0);
    vsriov_cfg_writel(p, 0, QPCI_DEVFN(2, 0), PCI_PREF_LIMIT_UPPER32, 0);
    vsriov_cfg_writew(p, 0, QPCI_DEVFN(2, 0), PCI_COMMAND,
                      PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
    for (int bar = 0; bar < 6; bar += 2) {
        int reg = PCI_BASE_ADDRESS_0 + bar * 4;
        uint32_t v = vsriov_cfg_readl(p, PF_BUS, PF_DEVFN, reg);

        if ((v & PCI_BASE_ADDRESS_MEM_TYPE_64) &&
            (v & PCI_BASE_ADDRESS_MEM_PREFETCH)) {
            vsriov_cfg_writel(p, PF_BUS, PF_DEVFN, reg,
                              BAR_BASE + (bar / 2) * 0x1000000ULL);
            vsriov_cfg_writel(p, PF_BUS, PF_DEVFN, reg + 4, 0);
        }
    }
    vsriov_cfg_writew(p, PF_BUS, PF_DEVFN, PCI_COMMAND,
                      PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
}

/* The virtio PCI capabilities: where the structures are. */
static void find_structures(Admin *a)
{
    uint8_t cap = vsriov_cfg_readb(&a->p, PF_BUS, PF_DEVFN,
                                   PCI_CAPABILITY_LIST) & ~3;

    while (cap) {
        if (vsriov_cfg_readb(&a->p, PF_BUS, PF_DEVFN, cap) == PCI_CAP_ID_VNDR) {
            switch (vsriov_cfg_readb(&a->p, PF_BUS, PF_DEVFN, cap + 3)) {
            case VIRTIO_PCI_CAP_COMMON_CFG:
                a->common = cap_addr(a, cap);
                break;
            case VIRTIO_PCI_CAP_NOTIFY_CFG:
                a->notify = cap_addr(a, cap);
                a->notify_mult = vsriov_cfg_readl(&a->p, PF_BUS, PF_DEVFN,
                                                  cap + 16);
                break;
            case VIRTIO_PCI_CAP_DEVICE_CFG:
                a->device = cap_addr(a, cap);
                break;
            }
        }
        cap = vsriov_cfg_readb(&a->p, PF_BUS, PF_DEVFN, cap + 1) & ~3;
    }
    g_assert(a->common && a->notify && a->device);
}

static uint64_t common_reg(Admin *a, unsigned off)
{
    return a->common + off;
}

static void ring_setup(Admin *a, Ring *q)
{
    QTestState *qts = a->qts;

    qtest_writew(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_SELECT), q->index);
    g_assert_cmpuint(qtest_readw(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_SIZE)),
                     >=, QSIZE);
    qtest_writew(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_SIZE), QSIZE);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_DESCLO), q->desc);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_DESCHI), 0);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_AVAILLO), q->avail);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_AVAILHI), 0);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_USEDLO), q->used);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_USEDHI), 0);
    q->notify_off = qtest_readw(qts, common_reg(a,
                                VIRTIO_PCI_COMMON_Q_NOFF));
    qtest_memset(qts, q->avail, 0, 0x1000);
    qtest_memset(qts, q->used, 0, 0x1000);
    q->avail_idx = q->used_idx = 0;
    qtest_writew(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_ENABLE), 1);
}

/*
 * Reset, negotiate @features and feature word 2 @features2, set up the
 * admin queue and @n other queues @rings, DRIVER_OK.
 */
static void driver_start_rings(Admin *a, uint64_t features,
                               uint32_t features2, Ring **rings, int n)
{
    QTestState *qts = a->qts;
    uint64_t have;

    qtest_writeb(qts, common_reg(a, VIRTIO_PCI_COMMON_STATUS), 0);
    qtest_writeb(qts, common_reg(a, VIRTIO_PCI_COMMON_STATUS),
                 VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_DFSELECT), 1);
    have = (uint64_t)qtest_readl(qts, common_reg(a, VIRTIO_PCI_COMMON_DF))
           << 32;
    g_assert(have & (1ull << VIRTIO_F_ADMIN_VQ));
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_GFSELECT), 0);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_GF), features);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_GFSELECT), 1);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_GF), features >> 32);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_GFSELECT), 2);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_GF), features2);
    qtest_writeb(qts, common_reg(a, VIRTIO_PCI_COMMON_STATUS),
                 VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
                 VIRTIO_CONFIG_S_FEATURES_OK);
    g_assert(qtest_readb(qts, common_reg(a, VIRTIO_PCI_COMMON_STATUS)) &
             VIRTIO_CONFIG_S_FEATURES_OK);

    g_assert_cmpuint(qtest_readw(qts, common_reg(a,
                     VIRTIO_PCI_COMMON_ADM_Q_NUM)), ==, 1);
    a->index = qtest_readw(qts, common_reg(a, VIRTIO_PCI_COMMON_ADM_Q_IDX));
    qtest_writew(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_SELECT), a->index);
    g_assert_cmpuint(qtest_readw(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_SIZE)),
                     >=, QSIZE);
    qtest_writew(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_SIZE), QSIZE);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_DESCLO), DESC);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_DESCHI), 0);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_AVAILLO), AVAIL);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_AVAILHI), 0);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_USEDLO), USED);
    qtest_writel(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_USEDHI), 0);
    a->notify_off = qtest_readw(qts, common_reg(a,
                                VIRTIO_PCI_COMMON_Q_NOFF));
    qtest_writew(qts, common_reg(a, VIRTIO_PCI_COMMON_Q_ENABLE), 1);
    qtest_memset(qts, AVAIL, 0, 0x1000);
    qtest_memset(qts, USED, 0, 0x1000);
    a->avail_idx = a->used_idx = 0;
    for (int i = 0; i < n; i++) {
        ring_setup(a, rings[i]);
    }
    qtest_writeb(qts, common_reg(a, VIRTIO_PCI_COMMON_STATUS),
                 VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
                 VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
}

static void driver_start(Admin *a, uint64_t features)
{
    driver_start_rings(a, features, 0, NULL, 0);
}

static void start_with(Admin *a, bool lazy, const char *pf_props)
{
    a->qts = vsriov_start_pf_with(&a->p, lazy, pf_props);
    map_pf(a);
    find_structures(a);
    driver_start(a, 1ull << VIRTIO_F_VERSION_1 | 1ull << VIRTIO_F_ADMIN_VQ);
}

static void start(Admin *a, bool lazy)
{
    start_with(a, lazy, "");
}

static void set_vfs(Admin *a, uint16_t n)
{
    uint16_t cap = vsriov_find_ext_cap(&a->p, PF_BUS, PF_DEVFN,
                                       PCI_EXT_CAP_ID_SRIOV);

    vsriov_cfg_writew(&a->p, PF_BUS, PF_DEVFN, cap + PCI_SRIOV_CTRL, 0);
    vsriov_cfg_writew(&a->p, PF_BUS, PF_DEVFN, cap + PCI_SRIOV_NUM_VF, n);
    if (n) {
        vsriov_cfg_writew(&a->p, PF_BUS, PF_DEVFN, cap + PCI_SRIOV_CTRL,
                          PCI_SRIOV_CTRL_VFE);
    }
}

static void put_desc(Admin *a, int i, uint64_t addr, uint32_t len,
                     uint16_t flags, uint16_t next)
{
    uint64_t d = DESC + i * 16;

    qtest_writeq(a->qts, d, addr);
    qtest_writel(a->qts, d + 8, len);
    qtest_writew(a->qts, d + 12, flags);
    qtest_writew(a->qts, d + 14, next);
}

/*
 * Queue a command of @out_len device-readable bytes (header, then @data)
 * and @in_len device-writable ones (0: none), kick, and wait for the
 * device to use it.
 */
static void submit(Admin *a, const void *out, size_t out_len, size_t in_len)
{
    QTestState *qts = a->qts;

    qtest_memwrite(qts, OUT_BUF, out, out_len);
    qtest_memset(qts, IN_BUF, 0xa5, sizeof(((Res *)0)->result) + 8);
    put_desc(a, 0, OUT_BUF, out_len, in_len ? VRING_DESC_F_NEXT : 0, 1);
    put_desc(a, 1, IN_BUF, in_len, VRING_DESC_F_WRITE, 0);
    qtest_writew(qts, AVAIL + 4 + (a->avail_idx % QSIZE) * 2, 0);
    a->avail_idx++;
    qtest_writew(qts, AVAIL + 2, a->avail_idx);
    qtest_writew(qts, a->notify + a->notify_off * a->notify_mult, a->index);
}

/* Wait for the device to use the command submitted last. */
static void collect(Admin *a, size_t in_len, Res *r)
{
    QTestState *qts = a->qts;
    gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    uint16_t head = 0;

    memset(r, 0, sizeof(*r));
    while (qtest_readw(qts, USED + 2) == a->used_idx) {
        g_assert(g_get_monotonic_time() < deadline);
        qtest_clock_step(qts, 100);
    }
    g_assert_cmpuint(qtest_readl(qts, USED + 4 + (a->used_idx % QSIZE) * 8),
                     ==, head);
    r->len = qtest_readl(qts, USED + 8 + (a->used_idx % QSIZE) * 8);
    a->used_idx++;
    g_assert_cmpuint(r->len, <=, in_len);
    if (in_len >= 4 && r->len >= 4) {
        r->status = qtest_readw(qts, IN_BUF);
        r->qualifier = qtest_readw(qts, IN_BUF + 2);
    }
    if (r->len > 8) {
        qtest_memread(qts, IN_BUF + 8, r->result, r->len - 8);
    }
}

static void run_raw(Admin *a, const void *out, size_t out_len, size_t in_len,
                    Res *r)
{
    submit(a, out, out_len, in_len);
    collect(a, in_len, r);
}

static uint16_t run(Admin *a, uint16_t opcode, uint16_t group,
                    uint64_t member, const void *data, size_t len, Res *r)
{
    uint8_t out[24 + 256] = {};

    g_assert_cmpuint(len, <=, sizeof(out) - 24);
    stw_le_p(out, opcode);
    stw_le_p(out + 2, group);
    stq_le_p(out + 16, member);
    if (len) {
        memcpy(out + 24, data, len);
    }
    run_raw(a, out, 24 + len, 8 + sizeof(r->result), r);
    if (r->status != VIRTIO_ADMIN_STATUS_OK) {
        g_assert_cmpuint(r->len, ==, 8);    /* no result with an error */
    }
    return r->status;
}

#define SELF    VIRTIO_ADMIN_GROUP_TYPE_SELF
#define SRIOV   VIRTIO_ADMIN_GROUP_TYPE_SRIOV

/* LIST_QUERY, then LIST_USE of all of it, for @group. */
static uint64_t use_all(Admin *a, uint16_t group)
{
    uint8_t use[8];
    Res r;

    g_assert_cmpuint(run(a, VIRTIO_ADMIN_CMD_LIST_QUERY, group, 0, NULL, 0,
                         &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(r.len, >=, 16);
    memcpy(use, r.result, 8);
    g_assert_cmpuint(run(a, VIRTIO_ADMIN_CMD_LIST_USE, group, 0, use, 8, &r),
                     ==, VIRTIO_ADMIN_STATUS_OK);
    return ldq_le_p(use);
}

/* The driver capability VIRTIO_NET_MEMBER_CFG_CAP set to @cap. */
static uint16_t member_cap_set(Admin *a,
                               const struct vsriov_net_member_cfg_cap *cap,
                               Res *r)
{
    uint8_t set[8 + sizeof(*cap)] = {};

    stw_le_p(set, VSRIOV_NET_MEMBER_CFG_CAP);
    memcpy(set + 8, cap, sizeof(*cap));
    return run(a, VIRTIO_ADMIN_CMD_DRIVER_CAP_SET, SELF, 0, set, sizeof(set),
               r);
}

/*
 * What a driver does before it uses the members' configuration objects:
 * LIST_USE of the SR-IOV group's commands, and the driver capability set
 * to all the device offers.
 */
static void members_ready(Admin *a)
{
    struct vsriov_net_member_cfg_cap cap;
    uint8_t id[8] = {};
    Res r;

    use_all(a, SRIOV);
    stw_le_p(id, VSRIOV_NET_MEMBER_CFG_CAP);
    g_assert_cmpuint(run(a, VIRTIO_ADMIN_CMD_DEVICE_CAP_GET, SELF, 0, id, 8,
                         &r), ==, VIRTIO_ADMIN_STATUS_OK);
    memcpy(&cap, r.result, sizeof(cap));
    g_assert_cmpuint(member_cap_set(a, &cap, &r), ==, VIRTIO_ADMIN_STATUS_OK);
}

/* RESOURCE_OBJ_MODIFY or _QUERY of a member's object: header, flags, data */
static uint16_t member_obj(Admin *a, uint16_t opcode, uint64_t member,
                           uint16_t type, uint32_t id, uint64_t flags,
                           const void *data, size_t len, Res *r)
{
    uint8_t d[16 + sizeof(struct vsriov_admin_net_member_cfg)] = {};

    g_assert_cmpuint(len, <=, sizeof(d) - 16);
    stw_le_p(d, type);
    stl_le_p(d + 4, id);
    stq_le_p(d + 8, flags);
    if (len) {
        memcpy(d + 16, data, len);
    }
    return run(a, opcode, SRIOV, member, d, 16 + len, r);
}

static uint16_t cfg_set(Admin *a, uint64_t member, uint64_t fields,
                        const struct vsriov_admin_net_member_cfg *c, Res *r)
{
    return member_obj(a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_MODIFY, member,
                      VSRIOV_NET_RESOURCE_OBJ_MEMBER_CFG, 0, fields, c,
                      sizeof(*c), r);
}

static uint16_t cfg_query(Admin *a, uint64_t member, uint64_t flags, Res *r)
{
    return member_obj(a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY, member,
                      VSRIOV_NET_RESOURCE_OBJ_MEMBER_CFG, 0, flags, NULL, 0,
                      r);
}

static struct vsriov_admin_net_member_cfg cfg_get(Admin *a, uint64_t member)
{
    struct vsriov_admin_net_member_cfg c;
    Res r;

    g_assert_cmpuint(cfg_query(a, member, 0, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(r.len, ==, 8 + sizeof(c));
    memcpy(&c, r.result, sizeof(c));
    return c;
}

/* query-vsriov's view of VF @index (a reference the caller drops) */
static QDict *qmp_vf(QTestState *qts, int index)
{
    QDict *resp = qtest_qmp(qts, "{ 'execute': 'query-vsriov' }");
    QList *pfs = qdict_get_qlist(resp, "return");
    QList *vfs = qdict_get_qlist(qobject_to(QDict, qlist_peek(pfs)), "vfs");
    QListEntry *e;
    QDict *found = NULL;

    QLIST_FOREACH_ENTRY(vfs, e) {
        QDict *vf = qobject_to(QDict, qlist_entry_obj(e));

        if (qdict_get_int(vf, "index") == index) {
            found = qobject_ref(vf);
        }
    }
    qobject_unref(resp);
    g_assert(found);
    return found;
}

/* ... its VLAN */
static int64_t qmp_vlan(QTestState *qts, int index)
{
    QDict *vf = qmp_vf(qts, index);
    int64_t vlan = qdict_get_int(qdict_get_qdict(vf, "config"), "vlan");

    qobject_unref(vf);
    return vlan;
}

/* ... whether its link is up */
static bool qmp_link_up(QTestState *qts, int index)
{
    QDict *vf = qmp_vf(qts, index);
    bool up = qdict_get_bool(vf, "link-up");

    qobject_unref(vf);
    return up;
}

/* The upstream driver's discovery: LIST_QUERY/USE, capabilities. */
static void test_discovery(void)
{
    struct vsriov_net_member_cfg_cap cap;
    uint8_t id[8] = {};
    Admin a;
    Res r;

    start(&a, false);
    /* the administration virtqueue is the only channel: no VSEC mailbox */
    g_assert_cmpuint(vsriov_find_ext_cap(&a.p, PF_BUS, PF_DEVFN,
                                         PCI_EXT_CAP_ID_VNDR), ==, 0);
    g_assert_cmpuint(a.index, ==, 1023);
    /* LIST_QUERY and LIST_USE are taken whatever LIST_USE enabled */
    memset(id, 0, sizeof(id));
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_LIST_USE, SRIOV, 0, id, 8, &r),
                     ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_LIST_QUERY, SRIOV, 0, NULL, 0,
                         &r), ==, VIRTIO_ADMIN_STATUS_OK);
    /* capabilities are the PF's own: the self group type */
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_CAP_ID_LIST_QUERY, SELF, 0,
                         NULL, 0, &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_OPCODE);
    /*
     * The SR-IOV group lists them too, and what its LIST_USE enables is
     * taken for the self group: Linux's virtio_pci keeps one list.
     */
    g_assert_cmphex(use_all(&a, SRIOV), ==,
                    1ull << VIRTIO_ADMIN_CMD_LIST_QUERY |
                    1ull << VIRTIO_ADMIN_CMD_LIST_USE |
                    1ull << VIRTIO_ADMIN_CMD_CAP_ID_LIST_QUERY |
                    1ull << VIRTIO_ADMIN_CMD_DEVICE_CAP_GET |
                    1ull << VIRTIO_ADMIN_CMD_DRIVER_CAP_SET |
                    1ull << VSRIOV_ADMIN_CMD_RESOURCE_OBJ_MODIFY |
                    1ull << VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY |
                    1ull << VSRIOV_ADMIN_CMD_SRIOV_MEMBERS_PREPARE);
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_CAP_ID_LIST_QUERY, SELF, 0,
                         NULL, 0, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    /* and a driver that enables them for the self group has them */
    driver_start(&a, 1ull << VIRTIO_F_VERSION_1 | 1ull << VIRTIO_F_ADMIN_VQ);
    use_all(&a, SELF);
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_CAP_ID_LIST_QUERY, SELF, 0,
                         NULL, 0, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(r.len, ==, 8 + 33 * 8);
    g_assert_cmphex(ldq_le_p(r.result + 32 * 8), ==, 1ull << 5);
    stw_le_p(id, VSRIOV_NET_MEMBER_CFG_CAP);
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_DEVICE_CAP_GET, SELF, 0, id, 8,
                         &r), ==, VIRTIO_ADMIN_STATUS_OK);
    memcpy(&cap, r.result, sizeof(cap));
    g_assert_cmphex(le64_to_cpu(cap.supported_fields), ==,
                    VSRIOV_ADMIN_FIELD_ALL);
    g_assert_cmpuint(le32_to_cpu(cap.max_tx_rate), ==, 10000);
    g_assert_cmpuint(le16_to_cpu(cap.vlan_protos), ==, 3);
    stw_le_p(id, 0x0803);
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_DEVICE_CAP_GET, SELF, 0, id, 8,
                         &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    qtest_quit(a.qts);
}

/* Opcodes, group types and members that are not: EINVAL, qualified. */
static void test_bad_commands(void)
{
    Admin a;
    Res r;

    start(&a, false);
    /* before LIST_USE only the list commands are used */
    g_assert_cmpuint(cfg_query(&a, 1, 0, &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_OPCODE);
    use_all(&a, SRIOV);
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_LIST_QUERY, 7, 0, NULL, 0, &r),
                     ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_GROUP);
    g_assert_cmpuint(run(&a, 0x40, SRIOV, 1, NULL, 0, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_OPCODE);
    g_assert_cmpuint(run(&a, 0xffff, SRIOV, 1, NULL, 0, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    /* the legacy access commands are not this device's */
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_LEGACY_COMMON_CFG_READ, SRIOV,
                         1, NULL, 0, &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_OPCODE);
    /* LIST_USE of a command the device does not have */
    {
        uint8_t use[8];

        stq_le_p(use, 1ull << VIRTIO_ADMIN_CMD_LEGACY_COMMON_CFG_READ | 3);
        g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_LIST_USE, SRIOV, 0, use, 8,
                             &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
        g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    }
    /* no member while VF Enable is clear */
    g_assert_cmpuint(cfg_query(&a, 1, 0, &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_GROUP);
    set_vfs(&a, 2);
    for (uint64_t m = 0; m < 5; m += 3) {
        g_assert_cmpuint(cfg_query(&a, m, 0, &r), ==,
                         VSRIOV_ADMIN_STATUS_EINVAL);
        g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_MEMBER);
    }
    g_assert_cmpuint(cfg_query(&a, 1ull << 40 | 1, 0, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    /* the objects are not the driver's to use before it set the capability */
    g_assert_cmpuint(cfg_query(&a, 1, 0, &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    {
        struct vsriov_admin_net_member_cfg c = {};

        g_assert_cmpuint(cfg_set(&a, 1, 0, &c, &r), ==,
                         VSRIOV_ADMIN_STATUS_EINVAL);
        g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    }
    members_ready(&a);
    g_assert_cmpuint(cfg_query(&a, 1, 0, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    /* one object per VF, id 0, of its own type; nothing else to ask */
    g_assert_cmpuint(member_obj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY, 1,
                                VSRIOV_NET_RESOURCE_OBJ_MEMBER_CFG, 1, 0,
                                NULL, 0, &r), ==, VSRIOV_ADMIN_STATUS_ENXIO);
    g_assert_cmpuint(member_obj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY, 1,
                                0x0206, 0, 0, NULL, 0, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    g_assert_cmpuint(cfg_query(&a, 1, 1ull << 1, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    /* the device makes them: the SR-IOV group has no CREATE or DESTROY */
    g_assert_cmpuint(member_obj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE, 1,
                                VSRIOV_NET_RESOURCE_OBJ_MEMBER_CFG, 0, 0,
                                NULL, 0, &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_OPCODE);
    g_assert_cmpuint(member_obj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_DESTROY, 1,
                                VSRIOV_NET_RESOURCE_OBJ_MEMBER_CFG, 0, 0,
                                NULL, 0, &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_OPCODE);
    /* PREPARE: the group's, before VF Enable only */
    {
        uint8_t n[8] = { 2 };

        g_assert_cmpuint(run(&a, VSRIOV_ADMIN_CMD_SRIOV_MEMBERS_PREPARE,
                             SRIOV, 0, n, 8, &r), ==,
                         VSRIOV_ADMIN_STATUS_EINVAL);
        g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
        g_assert_cmpuint(run(&a, VSRIOV_ADMIN_CMD_SRIOV_MEMBERS_PREPARE,
                             SRIOV, 1, n, 8, &r), ==,
                         VSRIOV_ADMIN_STATUS_EINVAL);
        g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_MEMBER);
    }
    qtest_quit(a.qts);
}

/* MODIFY with a field mask, QUERY, defaults, all-or-nothing. */
static void test_set_get(void)
{
    static const uint8_t mac[6] = { 0x02, 0, 0, 0, 0, 0x21 };
    struct vsriov_admin_net_member_cfg c = {}, got, before;
    Admin a;
    Res r;

    start(&a, false);
    members_ready(&a);
    set_vfs(&a, 2);
    before = cfg_get(&a, 2);
    g_assert_cmpuint(before.flags & VSRIOV_ADMIN_MEMBER_F_MAC_ADMIN_SET, ==,
                     0);
    g_assert_cmpuint(le16_to_cpu(before.vlan_proto), ==, 0x8100);

    memcpy(c.mac, mac, 6);
    c.vlan_id = cpu_to_le16(100);
    c.vlan_proto = cpu_to_le16(0x8100);
    c.link_state = VSRIOV_ADMIN_LINK_DOWN;      /* not in the mask */
    g_assert_cmpuint(cfg_set(&a, 2, VSRIOV_ADMIN_FIELD_MAC |
                             VSRIOV_ADMIN_FIELD_VLAN, &c, &r), ==,
                     VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(r.len, ==, 8);
    got = cfg_get(&a, 2);
    g_assert(!memcmp(got.mac, mac, 6));
    g_assert_cmpuint(le16_to_cpu(got.vlan_id), ==, 100);
    g_assert_cmpuint(got.link_state, ==, VSRIOV_ADMIN_LINK_AUTO);
    g_assert_cmpuint(got.flags & VSRIOV_ADMIN_MEMBER_F_MAC_ADMIN_SET, !=, 0);
    g_assert_cmpint(qmp_vlan(a.qts, 1), ==, 100);
    /* the other VF is untouched */
    got = cfg_get(&a, 1);
    g_assert_cmpuint(le16_to_cpu(got.vlan_id), ==, 0);

    /* one bad part: nothing changes, neither the good part */
    memset(&c, 0, sizeof(c));
    c.vlan_id = cpu_to_le16(200);
    c.vlan_proto = cpu_to_le16(0x8100);
    c.max_tx_rate = cpu_to_le32(20000);         /* above the PF's speed */
    g_assert_cmpuint(cfg_set(&a, 2, VSRIOV_ADMIN_FIELD_VLAN |
                             VSRIOV_ADMIN_FIELD_TX_RATE, &c, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    got = cfg_get(&a, 2);
    g_assert_cmpuint(le16_to_cpu(got.vlan_id), ==, 100);
    g_assert_cmpuint(le32_to_cpu(got.max_tx_rate), ==, 0);
    g_assert_cmpint(qmp_vlan(a.qts, 1), ==, 100);

    /* values a VF cannot have */
    c.max_tx_rate = 0;
    c.vlan_id = cpu_to_le16(4095);
    g_assert_cmpuint(cfg_set(&a, 2, VSRIOV_ADMIN_FIELD_VLAN, &c, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    c.vlan_id = cpu_to_le16(7);
    c.vlan_proto = cpu_to_le16(0x0800);
    g_assert_cmpuint(cfg_set(&a, 2, VSRIOV_ADMIN_FIELD_VLAN, &c, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    c.vlan_proto = cpu_to_le16(0x8100);
    c.reserved[7] = 1;          /* reserved for later fields */
    g_assert_cmpuint(cfg_set(&a, 2, VSRIOV_ADMIN_FIELD_VLAN, &c, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    c.reserved[7] = 0;
    c.mac[0] = 1;               /* multicast */
    g_assert_cmpuint(cfg_set(&a, 2, VSRIOV_ADMIN_FIELD_MAC, &c, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    c.link_state = 3;
    g_assert_cmpuint(cfg_set(&a, 2, VSRIOV_ADMIN_FIELD_LINK_STATE, &c, &r),
                     ==, VSRIOV_ADMIN_STATUS_EINVAL);
    /* (what trust and min_tx_rate had: no field now) */
    g_assert_cmpuint(cfg_set(&a, 2, 1ull << 5, &c, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    got = cfg_get(&a, 2);
    g_assert(!memcmp(got.mac, mac, 6));
    g_assert_cmpuint(le16_to_cpu(got.vlan_id), ==, 100);

    /* no fields: nothing changes, and that succeeds */
    g_assert_cmpuint(cfg_set(&a, 2, 0, &c, &r), ==, VIRTIO_ADMIN_STATUS_OK);

    /* the rest, then a zero MAC: back to the default */
    memset(&c, 0, sizeof(c));
    c.flags = VSRIOV_ADMIN_MEMBER_F_SPOOF_CHECK |
              VSRIOV_ADMIN_MEMBER_F_MAC_ADMIN_SET;  /* (read-only: ignored) */
    c.link_state = VSRIOV_ADMIN_LINK_DOWN;
    c.max_tx_rate = cpu_to_le32(1000);
    g_assert_cmpuint(cfg_set(&a, 2, VSRIOV_ADMIN_FIELD_ALL &
                             ~VSRIOV_ADMIN_FIELD_VLAN, &c, &r), ==,
                     VIRTIO_ADMIN_STATUS_OK);
    got = cfg_get(&a, 2);
    g_assert(!memcmp(got.mac, before.mac, 6));
    g_assert_cmpuint(got.flags, ==, VSRIOV_ADMIN_MEMBER_F_SPOOF_CHECK);
    g_assert_cmpuint(got.link_state, ==, VSRIOV_ADMIN_LINK_DOWN);
    g_assert_cmpuint(le32_to_cpu(got.max_tx_rate), ==, 1000);
    g_assert_cmpuint(le16_to_cpu(got.vlan_id), ==, 100);

    /* VFs disabled and enabled again start from the defaults */
    set_vfs(&a, 0);
    set_vfs(&a, 2);
    got = cfg_get(&a, 2);
    g_assert(!memcmp(&got, &before, sizeof(got)));
    qtest_quit(a.qts);
}

static void set_link(QTestState *qts, const char *netdev, bool up)
{
    qtest_qmp_assert_success(qts, "{ 'execute': 'set_link', 'arguments': "
                             "{ 'name': %s, 'up': %i } }", netdev, up);
}

static void link_state(Admin *a, uint64_t member, uint8_t state)
{
    struct vsriov_admin_net_member_cfg c = { .link_state = state };
    Res r;

    g_assert_cmpuint(cfg_set(a, member, VSRIOV_ADMIN_FIELD_LINK_STATE, &c,
                             &r), ==, VIRTIO_ADMIN_STATUS_OK);
}

/*
 * The VFs' links when the host changes links later (set_link): an auto
 * VF follows the PF's, an up one keeps its own, and the host's set_link
 * of a backend never lifts a VF the driver set down; nor does the driver
 * lift one the host holds down.
 */
static void test_link(void)
{
    Admin a;

    start(&a, false);
    members_ready(&a);
    set_vfs(&a, 2);
    g_assert(qmp_link_up(a.qts, 0) && qmp_link_up(a.qts, 1));
    link_state(&a, 2, VSRIOV_ADMIN_LINK_UP);
    set_link(a.qts, "pfnet", false);
    g_assert(!qmp_link_up(a.qts, 0));
    g_assert(qmp_link_up(a.qts, 1));
    set_link(a.qts, "pfnet", true);
    g_assert(qmp_link_up(a.qts, 0));

    link_state(&a, 2, VSRIOV_ADMIN_LINK_DOWN);
    g_assert(!qmp_link_up(a.qts, 1));
    set_link(a.qts, "b1", false);
    set_link(a.qts, "b1", true);
    g_assert(!qmp_link_up(a.qts, 1));
    link_state(&a, 2, VSRIOV_ADMIN_LINK_UP);
    g_assert(qmp_link_up(a.qts, 1));

    set_link(a.qts, "b1", false);
    g_assert(!qmp_link_up(a.qts, 1));
    link_state(&a, 2, VSRIOV_ADMIN_LINK_AUTO);
    g_assert(!qmp_link_up(a.qts, 1));
    set_link(a.qts, "b1", true);
    g_assert(qmp_link_up(a.qts, 1));
    qtest_quit(a.qts);
}

/*
 * DRIVER_CAP_SET restricts what MODIFY takes, and is needed first; a reset
 * of the PF needs it again, and keeps the VFs' configuration.
 */
static void test_driver_cap(void)
{
    struct vsriov_admin_net_member_cfg c = {};
    struct vsriov_net_member_cfg_cap cap = {};
    Admin a;
    Res r;

    start(&a, false);
    use_all(&a, SELF);
    use_all(&a, SRIOV);
    set_vfs(&a, 1);
    cap.supported_fields = cpu_to_le64(VSRIOV_ADMIN_FIELD_MAC |
                                       VSRIOV_ADMIN_FIELD_VLAN);
    cap.vlan_protos = cpu_to_le16(1);          /* 802.1Q only */
    g_assert_cmpuint(member_cap_set(&a, &cap, &r), ==,
                     VIRTIO_ADMIN_STATUS_OK);
    c.flags = VSRIOV_ADMIN_MEMBER_F_SPOOF_CHECK;
    g_assert_cmpuint(cfg_set(&a, 1, VSRIOV_ADMIN_FIELD_SPOOF_CHECK, &c, &r),
                     ==, VSRIOV_ADMIN_STATUS_EINVAL);
    c.vlan_id = cpu_to_le16(5);
    c.vlan_proto = cpu_to_le16(0x88a8);
    g_assert_cmpuint(cfg_set(&a, 1, VSRIOV_ADMIN_FIELD_VLAN, &c, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    c.vlan_proto = cpu_to_le16(0x8100);
    g_assert_cmpuint(cfg_set(&a, 1, VSRIOV_ADMIN_FIELD_VLAN, &c, &r), ==,
                     VIRTIO_ADMIN_STATUS_OK);
    /* more than the device offers is refused, and changes nothing */
    cap.supported_fields = cpu_to_le64(VSRIOV_ADMIN_FIELD_ALL | 1ull << 9);
    g_assert_cmpuint(member_cap_set(&a, &cap, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    cap.supported_fields = cpu_to_le64(VSRIOV_ADMIN_FIELD_TX_RATE);
    cap.max_tx_rate = cpu_to_le32(10001);       /* the PF's speed + 1 */
    g_assert_cmpuint(member_cap_set(&a, &cap, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(cfg_set(&a, 1, VSRIOV_ADMIN_FIELD_SPOOF_CHECK, &c, &r),
                     ==, VSRIOV_ADMIN_STATUS_EINVAL);

    /* a reset: the lists are the defaults, and the capability is unset */
    driver_start(&a, 1ull << VIRTIO_F_VERSION_1 | 1ull << VIRTIO_F_ADMIN_VQ);
    g_assert_cmpuint(cfg_set(&a, 1, VSRIOV_ADMIN_FIELD_SPOOF_CHECK, &c, &r),
                     ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_OPCODE);
    use_all(&a, SRIOV);
    g_assert_cmpuint(cfg_set(&a, 1, VSRIOV_ADMIN_FIELD_SPOOF_CHECK, &c, &r),
                     ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    members_ready(&a);
    g_assert_cmpuint(cfg_set(&a, 1, VSRIOV_ADMIN_FIELD_SPOOF_CHECK, &c, &r),
                     ==, VIRTIO_ADMIN_STATUS_OK);
    /* the VF kept what was set before the PF's reset */
    g_assert_cmpuint(le16_to_cpu(cfg_get(&a, 1).vlan_id), ==, 5);
    qtest_quit(a.qts);
}

/* Counters: RX_BASIC then TX_BASIC after the configuration, if asked. */
static void test_stats(void)
{
    const size_t cfg = sizeof(struct vsriov_admin_net_member_cfg);
    Admin a;
    Res r;

    start(&a, false);
    members_ready(&a);
    set_vfs(&a, 1);
    g_assert_cmpuint(cfg_query(&a, 1, VSRIOV_ADMIN_MEMBER_QUERY_F_STATS, &r),
                     ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(r.len, ==, 8 + cfg + 2 * 56);
    g_assert_cmpuint(r.result[cfg], ==, VIRTIO_NET_STATS_TYPE_REPLY_RX_BASIC);
    g_assert_cmpuint(lduw_le_p(r.result + cfg + 6), ==, 56);
    g_assert_cmpuint(r.result[cfg + 56], ==,
                     VIRTIO_NET_STATS_TYPE_REPLY_TX_BASIC);
    g_assert_cmpuint(lduw_le_p(r.result + cfg + 56 + 6), ==, 56);
    g_assert_cmpuint(cfg_query(&a, 1, 0, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(r.len, ==, 8 + cfg);
    qtest_quit(a.qts);
}

/* PREPARE of a lazy pool's VFs, and of none. */
static void test_prepare(void)
{
    uint8_t n[8] = {};
    Admin a;
    Res r;

    start(&a, true);
    members_ready(&a);
    stw_le_p(n, 2);
    g_assert_cmpuint(run(&a, VSRIOV_ADMIN_CMD_SRIOV_MEMBERS_PREPARE, SRIOV,
                         0, n, 8, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    stw_le_p(n, 0);
    g_assert_cmpuint(run(&a, VSRIOV_ADMIN_CMD_SRIOV_MEMBERS_PREPARE, SRIOV,
                         0, n, 8, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    stw_le_p(n, 4);                             /* more than TotalVFs */
    g_assert_cmpuint(run(&a, VSRIOV_ADMIN_CMD_SRIOV_MEMBERS_PREPARE, SRIOV,
                         0, n, 8, &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    set_vfs(&a, 2);
    g_assert_cmpuint(le16_to_cpu(cfg_get(&a, 2).vlan_proto), ==, 0x8100);
    qtest_quit(a.qts);
}

/*
 * Buffers shorter and longer than the structures: missing bytes read as
 * zeros, extra ones are ignored, the device writes only what fits.
 */
static void test_buffer_sizes(void)
{
    uint8_t out[256] = {};
    Admin a;
    Res r;

    start(&a, false);
    members_ready(&a);
    set_vfs(&a, 1);
    /* a QUERY whose result part is 4 bytes: only the status, cut */
    stw_le_p(out, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY);
    stw_le_p(out + 2, SRIOV);
    stq_le_p(out + 16, 1);
    stw_le_p(out + 24, VSRIOV_NET_RESOURCE_OBJ_MEMBER_CFG);
    run_raw(&a, out, 24 + 16, 4, &r);
    g_assert_cmpuint(r.len, ==, 4);
    g_assert_cmpuint(r.status, ==, VIRTIO_ADMIN_STATUS_OK);
    /* no device-writable part at all: used, with length 0 */
    run_raw(&a, out, 24 + 16, 0, &r);
    g_assert_cmpuint(r.len, ==, 0);
    /* a header cut short: member 0, so EINVAL */
    run_raw(&a, out, 10, 8, &r);
    g_assert_cmpuint(r.status, ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_MEMBER);
    /* a MODIFY without its data: no object type, EINVAL */
    stw_le_p(out, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_MODIFY);
    run_raw(&a, out, 24, 8, &r);
    g_assert_cmpuint(r.status, ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    /* ... with its header only: no fields, nothing changes */
    run_raw(&a, out, 24 + 8, 8, &r);
    g_assert_cmpuint(r.status, ==, VIRTIO_ADMIN_STATUS_OK);
    /* longer than asked for: the rest is ignored */
    stq_le_p(out + 24 + 8, VSRIOV_ADMIN_FIELD_VLAN);
    stw_le_p(out + 40 + 6, 9);
    stw_le_p(out + 40 + 8, 0x8100);
    memset(out + 64, 0xff, sizeof(out) - 64);
    run_raw(&a, out, sizeof(out), 8, &r);
    g_assert_cmpuint(r.status, ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(le16_to_cpu(cfg_get(&a, 1).vlan_id), ==, 9);

    /*
     * A zero-sized buffer is a driver's bug: the device needs a reset
     * (and says so), the VM runs on, and the reset brings it back.
     */
    submit(&a, out, 0, 8);
    while (!(qtest_readb(a.qts, common_reg(&a, VIRTIO_PCI_COMMON_STATUS)) &
             VIRTIO_CONFIG_S_NEEDS_RESET)) {
        qtest_clock_step(a.qts, 100);
    }
    driver_start(&a, 1ull << VIRTIO_F_VERSION_1 | 1ull << VIRTIO_F_ADMIN_VQ);
    members_ready(&a);
    g_assert_cmpuint(le16_to_cpu(cfg_get(&a, 1).vlan_id), ==, 9);
    qtest_quit(a.qts);
}

/*
 * Random commands, with random writes of every size over the SR-IOV
 * capability (VF Enable and NumVFs among them) and VFs coming and going
 * in between: each command is answered, the capability's header and
 * TotalVFs stay, and the device keeps working.  VSRIOV_QTEST_OPS
 * operations (default 20000; scripts/fuzz-qemu runs many more, under
 * ASan), for a lazy and a premapped pool.
 */
static void random_commands(bool lazy)
{
    const char *env = g_getenv("VSRIOV_QTEST_OPS");
    long ops = env ? atol(env) : 20000;
    GRand *rnd = g_rand_new_with_seed(0x5646);
    gint64 t0 = g_get_monotonic_time();
    uint16_t sriov;
    uint32_t hdr;
    uint16_t total;
    uint8_t out[64];
    Admin a;
    Res r;

    start(&a, lazy);
    sriov = vsriov_find_ext_cap(&a.p, PF_BUS, PF_DEVFN, PCI_EXT_CAP_ID_SRIOV);
    hdr = vsriov_cfg_readl(&a.p, PF_BUS, PF_DEVFN, sriov);
    total = vsriov_cfg_readw(&a.p, PF_BUS, PF_DEVFN,
                             sriov + PCI_SRIOV_TOTAL_VF);
    use_all(&a, SELF);
    members_ready(&a);
    set_vfs(&a, 2);
    for (long i = 0; i < ops; i++) {
        if (i % 4 == 3) {
            int off = sriov + g_rand_int_range(rnd, -8,
                                               PCI_EXT_CAP_SRIOV_SIZEOF + 32);
            uint32_t v = g_rand_int(rnd);

            switch (g_rand_int_range(rnd, 0, 3)) {
            case 0:
                vsriov_cfg_writeb(&a.p, PF_BUS, PF_DEVFN, off, v);
                break;
            case 1:
                vsriov_cfg_writew(&a.p, PF_BUS, PF_DEVFN, off, v);
                break;
            default:
                vsriov_cfg_writel(&a.p, PF_BUS, PF_DEVFN, off, v);
                break;
            }
            continue;
        }
        for (int j = 0; j < sizeof(out); j++) {
            out[j] = g_rand_int(rnd);
        }
        /* mostly our opcodes and group types, to get past the checks */
        stw_le_p(out, g_rand_int_range(rnd, 0, 0x18));
        stw_le_p(out + 2, g_rand_int_range(rnd, 0, 3));
        stq_le_p(out + 16, g_rand_int_range(rnd, 0, 4));
        size_t in_len = g_rand_int_range(rnd, 0, 300);

        run_raw(&a, out, g_rand_int_range(rnd, 1, sizeof(out) + 1), in_len,
                &r);
        /* a status (cut to the buffer), and a result only with OK */
        g_assert_cmpuint(r.len, >=, MIN(in_len, 8));
        if (r.len >= 4 && r.status != VIRTIO_ADMIN_STATUS_OK) {
            g_assert_cmpuint(r.len, ==, MIN(in_len, 8));
        }
        if (g_rand_int_range(rnd, 0, 50) == 0) {
            set_vfs(&a, g_rand_int_range(rnd, 0, 4));
        }
    }
    g_test_message("%ld operations in %.1f s (%s pool)", ops,
                   (g_get_monotonic_time() - t0) / 1e6,
                   lazy ? "lazy" : "premapped");
    g_assert_cmphex(vsriov_cfg_readl(&a.p, PF_BUS, PF_DEVFN, sriov), ==, hdr);
    g_assert_cmpuint(vsriov_cfg_readw(&a.p, PF_BUS, PF_DEVFN,
                                      sriov + PCI_SRIOV_TOTAL_VF), ==, total);
    /* (a random LIST_USE may have left out even LIST_QUERY: reset) */
    map_pf(&a);
    driver_start(&a, 1ull << VIRTIO_F_VERSION_1 | 1ull << VIRTIO_F_ADMIN_VQ);
    members_ready(&a);
    set_vfs(&a, 0);
    set_vfs(&a, 2);
    /* whatever the random commands set is gone after a re-enable */
    g_assert_cmpuint(le16_to_cpu(cfg_get(&a, 2).vlan_id), ==, 0);
    g_assert_cmpint(qmp_vlan(a.qts, 1), ==, 0);
    g_rand_free(rnd);
    qtest_quit(a.qts);
}

static void test_random_commands(void)
{
    random_commands(true);
}

static void test_random_commands_premapped(void)
{
    random_commands(false);
}

/* Whether the device used the command queued last (without waiting). */
static bool answered(Admin *a)
{
    return qtest_readw(a->qts, USED + 2) != a->used_idx;
}

/*
 * x-sriov-admin-delay, the knob that makes the PF a device that answers
 * late or never (for the guest driver's tests): a held answer is not in
 * the used ring, the commands behind it wait, and it comes whole; one
 * that never comes goes with a queue reset, after which the queue works.
 */
static void test_answer_delay(void)
{
    uint8_t out[24] = {};
    Admin a;
    Res r;

    start_with(&a, false, ",x-sriov-admin-delay=300");
    stw_le_p(out, VIRTIO_ADMIN_CMD_LIST_QUERY);
    stw_le_p(out + 2, SRIOV);
    submit(&a, out, sizeof(out), 8 + sizeof(r.result));
    /* a quick command: without the delay it is answered in the kick */
    g_assert_false(answered(&a));
    collect(&a, 8 + sizeof(r.result), &r);
    g_assert_cmpuint(r.status, ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(r.len, ==, 16);
    g_assert(ldq_le_p(r.result) & 1ull << VIRTIO_ADMIN_CMD_LIST_QUERY);
    qtest_quit(a.qts);

    start_with(&a, false, ",x-sriov-admin-delay=4294967295");
    submit(&a, out, sizeof(out), 8 + sizeof(r.result));
    for (int i = 0; i < 100; i++) {
        qtest_clock_step(a.qts, 10 * 1000 * 1000);
        g_assert_false(answered(&a));
    }
    /* the driver gives up: a reset takes the command back */
    driver_start(&a, 1ull << VIRTIO_F_VERSION_1 | 1ull << VIRTIO_F_ADMIN_VQ);
    g_assert_false(answered(&a));
    qtest_quit(a.qts);
}

/*
 * A PF reset disables the VFs; their configuration is back to defaults
 * and VSRIOV_VFS_CHANGED says so at once, not at the guest's next config
 * write; the VF's MAC is the one it had before the guest set one.
 */
static void test_pf_reset(void)
{
    struct vsriov_admin_net_member_cfg c = {
        .mac = { 0x02, 0, 0, 0, 0, 0x11 },
        .vlan_id = cpu_to_le16(100),
        .vlan_proto = cpu_to_le16(0x8100),
        .link_state = VSRIOV_ADMIN_LINK_DOWN,
    };
    g_autofree char *before = NULL;
    g_autofree char *after = NULL;
    QDict *ev, *vf;
    Admin a;
    Res r;

    start(&a, false);
    members_ready(&a);
    set_vfs(&a, 2);
    ev = vsriov_vfs_changed_wait(a.qts);
    g_assert_cmpint(qdict_get_int(qdict_get_qdict(ev, "data"), "num-vfs"),
                    ==, 2);
    qobject_unref(ev);
    vf = qmp_vf(a.qts, 0);
    before = g_strdup(qdict_get_str(vf, "mac"));
    qobject_unref(vf);
    g_assert_cmpuint(cfg_set(&a, 1, VSRIOV_ADMIN_FIELD_MAC |
                             VSRIOV_ADMIN_FIELD_VLAN |
                             VSRIOV_ADMIN_FIELD_LINK_STATE, &c, &r),
                     ==, VIRTIO_ADMIN_STATUS_OK);
    vf = qmp_vf(a.qts, 0);
    g_assert_cmpstr(qdict_get_str(vf, "mac"), ==, "02:00:00:00:00:11");
    g_assert_cmpstr(qdict_get_str(qdict_get_qdict(vf, "config"),
                                  "link-state"), ==, "disable");
    qobject_unref(vf);
    g_assert_cmpint(qmp_vlan(a.qts, 0), ==, 100);

    qobject_unref(qtest_qmp(a.qts, "{ 'execute': 'system_reset' }"));
    /* no config access after the reset: the event alone must come */
    ev = vsriov_vfs_changed_wait(a.qts);
    g_assert_cmpint(qdict_get_int(qdict_get_qdict(ev, "data"), "num-vfs"),
                    ==, 0);
    qobject_unref(ev);
    vf = qmp_vf(a.qts, 0);
    g_assert_cmpint(qdict_get_int(qdict_get_qdict(vf, "config"), "vlan"),
                    ==, 0);
    g_assert_cmpstr(qdict_get_str(qdict_get_qdict(vf, "config"),
                                  "link-state"), ==, "auto");
    g_assert_false(qdict_haskey(qdict_get_qdict(vf, "config"), "mac"));
    after = g_strdup(qdict_get_str(vf, "mac"));
    qobject_unref(vf);
    g_assert_cmpstr(after, ==, before);
    qtest_quit(a.qts);
}

/* Switchdev mode: the eswitch and representor objects (eswitch.c) */

#define REP_RX_BASE     0x200000ULL     /* representor 0's queues */
#define REP_TX_BASE     0x210000ULL
#define REP_BUF         0x208000ULL     /* (in each ring's area) */
#define F2_ESWITCH      (1u << (VSRIOV_NET_F_ESWITCH - 64))

static uint16_t obj(Admin *a, uint16_t opcode, uint16_t type, uint32_t id,
                    uint64_t flags, const void *data, size_t len, Res *r)
{
    uint8_t d[16 + 16] = {};

    g_assert_cmpuint(len, <=, 16);
    stw_le_p(d, type);
    stl_le_p(d + 4, id);
    stq_le_p(d + 8, flags);
    if (data) {
        memcpy(d + 16, data, len);
    }
    return run(a, opcode, SELF, 0, d,
               opcode == VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE ? 16 + len : 8,
               r);
}

static uint16_t rep_create(Admin *a, uint32_t id, uint32_t member,
                           uint16_t esw_id, Res *r)
{
    struct vsriov_net_resource_obj_rep rep = {
        .eswitch_id = cpu_to_le16(esw_id),
        .member_id = cpu_to_le32(member),
    };

    return obj(a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
               VSRIOV_NET_RESOURCE_OBJ_REP, id, 0, &rep, sizeof(rep), r);
}

static uint16_t esw_create(Admin *a, Res *r)
{
    return obj(a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
               VSRIOV_NET_RESOURCE_OBJ_ESWITCH, 0, 0, NULL, 8, r);
}

static uint16_t obj_destroy(Admin *a, uint16_t type, uint32_t id, Res *r)
{
    return obj(a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_DESTROY, type, id, 0, NULL,
               0, r);
}

static const char *qmp_eswitch_mode(QTestState *qts)
{
    static char mode[16];
    QDict *resp = qtest_qmp(qts, "{ 'execute': 'query-vsriov' }");
    QDict *pf = qobject_to(QDict, qlist_peek(qdict_get_qlist(resp,
                                                             "return")));

    if (qdict_haskey(pf, "eswitch-mode")) {
        g_strlcpy(mode, qdict_get_str(pf, "eswitch-mode"), sizeof(mode));
    } else {
        g_strlcpy(mode, "absent", sizeof(mode));
    }
    qobject_unref(resp);
    return mode;
}

/* VF @index's representor (a new reference), or NULL. */
static QDict *qmp_vf_rep(QTestState *qts, int index)
{
    QDict *vf = qmp_vf(qts, index);
    QDict *rep = qdict_haskey(vf, "representor") ?
                 qdict_get_qdict(vf, "representor") : NULL;

    qobject_ref(rep);
    qobject_unref(vf);
    return rep;
}

static void ring_kick(Admin *a, Ring *q)
{
    qtest_writew(a->qts, a->notify + q->notify_off * a->notify_mult,
                 q->index);
}

/* One buffer of @len bytes at @addr, device-writable if @in. */
static void ring_add(Admin *a, Ring *q, uint64_t addr, uint32_t len, bool in)
{
    int i = q->avail_idx % QSIZE;

    qtest_writeq(a->qts, q->desc + i * 16, addr);
    qtest_writel(a->qts, q->desc + i * 16 + 8, len);
    qtest_writew(a->qts, q->desc + i * 16 + 12, in ? VRING_DESC_F_WRITE : 0);
    qtest_writew(a->qts, q->avail + 4 + i * 2, i);
    q->avail_idx++;
    qtest_writew(a->qts, q->avail + 2, q->avail_idx);
    ring_kick(a, q);
}

/* Wait for the device to use the next buffer: its used length. */
static uint32_t ring_used(Admin *a, Ring *q)
{
    gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    uint32_t len;

    while (qtest_readw(a->qts, q->used + 2) == q->used_idx) {
        g_assert(g_get_monotonic_time() < deadline);
        qtest_clock_step(a->qts, 100);
    }
    len = qtest_readl(a->qts, q->used + 8 + (q->used_idx % QSIZE) * 8);
    q->used_idx++;
    return len;
}

static void start_eswitch(Admin *a, int *sock, uint32_t features2,
                          Ring *rx, Ring *tx)
{
    Ring *rings[] = { rx, tx };
    int sv[2];
    g_autofree char *args = NULL;

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    args = g_strdup_printf("-netdev socket,id=r0,fd=%d "
                           "-netdev hubport,id=r1,hubid=5 "
                           "-netdev hubport,id=r2,hubid=6", sv[1]);
    a->qts = vsriov_start_pf_full(&a->p, false,
                                  ",rep-netdevs=r0,rep-netdevs=r1,"
                                  "rep-netdevs=r2", ",sriov-eswitch=on", args);
    close(sv[1]);
    *sock = sv[0];
    map_pf(a);
    find_structures(a);
    /* representor 0: receive queue 3, transmit queue 4 */
    *rx = (Ring) { .index = 3, .desc = REP_RX_BASE,
                   .avail = REP_RX_BASE + 0x1000,
                   .used = REP_RX_BASE + 0x2000 };
    *tx = (Ring) { .index = 4, .desc = REP_TX_BASE,
                   .avail = REP_TX_BASE + 0x1000,
                   .used = REP_TX_BASE + 0x2000 };
    driver_start_rings(a, 1ull << VIRTIO_F_VERSION_1 |
                       1ull << VIRTIO_F_ADMIN_VQ |
                       1ull << VIRTIO_NET_F_CTRL_VQ, features2,
                       rings, 2);
}

/* Discovery, the objects' rules, and a reset back to legacy mode. */
static void test_eswitch_objects(void)
{
    struct vsriov_net_eswitch_cap cap;
    uint8_t id[8] = {};
    QDict *rep, *ev;
    Ring rx, tx;
    Admin a;
    Res r;
    int sock;

    start_eswitch(&a, &sock, F2_ESWITCH, &rx, &tx);
    g_assert_cmphex(use_all(&a, SELF) & (1ull << 0xa | 1ull << 0xd), ==,
                    1ull << 0xa | 1ull << 0xd);
    use_all(&a, SRIOV);
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_CAP_ID_LIST_QUERY, SELF, 0,
                         NULL, 0, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_true(r.result[VSRIOV_NET_ESWITCH_CAP / 8] &
                  1u << (VSRIOV_NET_ESWITCH_CAP % 8));
    stw_le_p(id, VSRIOV_NET_ESWITCH_CAP);
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_DEVICE_CAP_GET, SELF, 0, id, 8,
                         &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(r.len, ==, 8 + sizeof(cap));
    memcpy(&cap, r.result, sizeof(cap));
    g_assert_cmpuint(le32_to_cpu(cap.eswitch_limit), ==, 1);
    g_assert_cmpuint(le32_to_cpu(cap.rep_limit), ==, 3);
    g_assert_cmpstr(qmp_eswitch_mode(a.qts), ==, "legacy");

    /* a driver that takes no eswitch gets none */
    {
        uint8_t set[8 + sizeof(cap)] = {};
        uint8_t junk[8] = { 1 };

        stw_le_p(set, VSRIOV_NET_ESWITCH_CAP);
        stl_le_p(set + 8 + 4, 3);       /* eswitch_limit 0, rep_limit 3 */
        g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_DRIVER_CAP_SET, SELF, 0,
                             set, sizeof(set), &r), ==,
                         VIRTIO_ADMIN_STATUS_OK);
        g_assert_cmpuint(esw_create(&a, &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
        g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
        stl_le_p(set + 8, 2);           /* more than the device has */
        g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_DRIVER_CAP_SET, SELF, 0,
                             set, sizeof(set), &r), ==,
                         VSRIOV_ADMIN_STATUS_EINVAL);
        stl_le_p(set + 8, 1);
        g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_DRIVER_CAP_SET, SELF, 0,
                             set, sizeof(set), &r), ==,
                         VIRTIO_ADMIN_STATUS_OK);
        /* the eswitch's reserved bytes are zeros */
        g_assert_cmpuint(obj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
                             VSRIOV_NET_RESOURCE_OBJ_ESWITCH, 0, 0, junk, 8,
                             &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
        g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    }
    g_assert_cmpstr(qmp_eswitch_mode(a.qts), ==, "legacy");

    /* switchdev mode; no representor while VF Enable is clear */
    g_assert_cmpuint(esw_create(&a, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpstr(qmp_eswitch_mode(a.qts), ==, "switchdev");
    g_assert_cmpuint(esw_create(&a, &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    g_assert_cmpuint(rep_create(&a, 0, 1, 0, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);

    set_vfs(&a, 2);
    ev = vsriov_vfs_changed_wait(a.qts);
    qobject_unref(ev);
    /* bad fields: nothing is created */
    g_assert_cmpuint(rep_create(&a, 0, 3, 0, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);      /* member > NumVFs */
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    g_assert_cmpuint(rep_create(&a, 0, 0, 0, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);      /* member 0 */
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    g_assert_cmpuint(rep_create(&a, 3, 1, 0, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);      /* id >= rep_limit */
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    g_assert_cmpuint(rep_create(&a, 0, 1, 1, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);      /* no eswitch 1 */
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    g_assert_cmpuint(obj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
                         VSRIOV_NET_RESOURCE_OBJ_REP, 0, 1, NULL, 16, &r),
                     ==, VSRIOV_ADMIN_STATUS_EINVAL);  /* flags */
    g_assert_cmpuint(obj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE, 0x0200, 0,
                         0, NULL, 16, &r),
                     ==, VSRIOV_ADMIN_STATUS_EINVAL);  /* not ours */
    g_assert_null(qmp_vf_rep(a.qts, 0));

    g_assert_cmpuint(rep_create(&a, 0, 1, 0, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    rep = qmp_vf_rep(a.qts, 0);
    g_assert_nonnull(rep);
    g_assert_cmpint(qdict_get_int(rep, "id"), ==, 0);
    g_assert_cmpstr(qdict_get_str(rep, "netdev"), ==, "r0");
    qobject_unref(rep);
    /* one representor per VF, one VF per representor */
    g_assert_cmpuint(rep_create(&a, 1, 1, 0, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    g_assert_cmpuint(rep_create(&a, 0, 2, 0, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    /* the eswitch goes last */
    g_assert_cmpuint(obj_destroy(&a, VSRIOV_NET_RESOURCE_OBJ_ESWITCH, 0, &r),
                     ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    g_assert_cmpuint(obj_destroy(&a, VSRIOV_NET_RESOURCE_OBJ_ESWITCH, 1, &r),
                     ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    g_assert_cmpstr(qmp_eswitch_mode(a.qts), ==, "switchdev");
    g_assert_cmpuint(rep_create(&a, 2, 2, 0, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(obj_destroy(&a, VSRIOV_NET_RESOURCE_OBJ_REP, 2, &r), ==,
                     VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(obj_destroy(&a, VSRIOV_NET_RESOURCE_OBJ_REP, 2, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_null(qmp_vf_rep(a.qts, 1));

    /* a reset of the PF: legacy mode, the representor's backend free */
    qobject_unref(qtest_qmp(a.qts, "{ 'execute': 'system_reset' }"));
    ev = vsriov_vfs_changed_wait(a.qts);
    qobject_unref(ev);
    g_assert_cmpstr(qmp_eswitch_mode(a.qts), ==, "legacy");
    g_assert_null(qmp_vf_rep(a.qts, 0));
    close(sock);
    qtest_quit(a.qts);
}

/* A driver that did not negotiate VIRTIO_NET_F_ESWITCH gets no objects. */
static void test_eswitch_not_negotiated(void)
{
    Ring rx, tx;
    Admin a;
    Res r;
    int sock;

    start_eswitch(&a, &sock, 0, &rx, &tx);
    use_all(&a, SELF);
    g_assert_cmpuint(esw_create(&a, &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    g_assert_cmpstr(qmp_eswitch_mode(a.qts), ==, "legacy");
    close(sock);
    qtest_quit(a.qts);
}

/* Without sriov-eswitch: no commands, no capability, no mode. */
static void test_eswitch_off(void)
{
    Admin a;
    Res r;

    start(&a, false);
    g_assert_cmphex(use_all(&a, SELF) & (1ull << 0xa | 1ull << 0xd), ==, 0);
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_CAP_ID_LIST_QUERY, SELF, 0,
                         NULL, 0, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_false(r.result[VSRIOV_NET_ESWITCH_CAP / 8] &
                   1u << (VSRIOV_NET_ESWITCH_CAP % 8));
    g_assert_cmpuint(esw_create(&a, &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_OPCODE);
    g_assert_cmpstr(qmp_eswitch_mode(a.qts), ==, "absent");
    qtest_quit(a.qts);
}

/* The stream netdev's framing: a big-endian length, then the frame. */
static void sock_send(int sock, const uint8_t *frame, uint32_t len)
{
    uint32_t be = cpu_to_be32(len);

    g_assert_cmpint(write(sock, &be, 4), ==, 4);
    g_assert_cmpint(write(sock, frame, len), ==, len);
}

static uint32_t sock_recv(Admin *a, int sock, uint8_t *frame, uint32_t max)
{
    gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    uint32_t be;
    ssize_t n;

    g_unix_set_fd_nonblocking(sock, true, NULL);
    while ((n = read(sock, &be, 4)) < 0 && errno == EAGAIN) {
        g_assert(g_get_monotonic_time() < deadline);
        qtest_clock_step(a->qts, 100);
    }
    g_assert_cmpint(n, ==, 4);
    g_unix_set_fd_nonblocking(sock, false, NULL);
    g_assert_cmpuint(be32_to_cpu(be), <=, max);
    g_assert_cmpint(read(sock, frame, be32_to_cpu(be)), ==, be32_to_cpu(be));
    return be32_to_cpu(be);
}

/* Frames both ways through representor 0 and its host backend. */
static void test_eswitch_datapath(void)
{
    uint8_t frame[60], got[64], hdr[12];
    QDict *rep;
    Ring rx, tx;
    Admin a;
    Res r;
    int sock;

    for (int i = 0; i < sizeof(frame); i++) {
        frame[i] = i * 7 + 1;
    }
    start_eswitch(&a, &sock, F2_ESWITCH, &rx, &tx);
    use_all(&a, SELF);
    use_all(&a, SRIOV);
    set_vfs(&a, 2);
    qobject_unref(vsriov_vfs_changed_wait(a.qts));
    g_assert_cmpuint(esw_create(&a, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(rep_create(&a, 0, 1, 0, &r), ==, VIRTIO_ADMIN_STATUS_OK);

    /* host -> representor: the header, then the frame */
    ring_add(&a, &rx, REP_RX_BASE + 0x3000, 12 + 1522, true);
    sock_send(sock, frame, sizeof(frame));
    g_assert_cmpuint(ring_used(&a, &rx), ==, 12 + sizeof(frame));
    qtest_memread(a.qts, REP_RX_BASE + 0x3000, hdr, 12);
    g_assert_cmpuint(hdr[0], ==, 0);                    /* flags */
    g_assert_cmpuint(hdr[1], ==, VIRTIO_NET_HDR_GSO_NONE);
    g_assert_cmpuint(lduw_le_p(hdr + 10), ==, 1);       /* num_buffers */
    qtest_memread(a.qts, REP_RX_BASE + 0x3000 + 12, got, sizeof(frame));
    g_assert_cmpmem(got, sizeof(frame), frame, sizeof(frame));

    /* a buffer too small: the frame is dropped and counted */
    ring_add(&a, &rx, REP_RX_BASE + 0x3000, 12 + 20, true);
    sock_send(sock, frame, sizeof(frame));
    g_assert_cmpuint(ring_used(&a, &rx), ==, 0);

    /* representor -> host: the header is not sent */
    qtest_memset(a.qts, REP_TX_BASE + 0x3000, 0, 12);
    frame[0] ^= 0xff;
    qtest_memwrite(a.qts, REP_TX_BASE + 0x3000 + 12, frame, sizeof(frame));
    ring_add(&a, &tx, REP_TX_BASE + 0x3000, 12 + sizeof(frame), false);
    g_assert_cmpuint(ring_used(&a, &tx), ==, 0);
    g_assert_cmpuint(sock_recv(&a, sock, got, sizeof(got)), ==,
                     sizeof(frame));
    g_assert_cmpmem(got, sizeof(frame), frame, sizeof(frame));

    rep = qmp_vf_rep(a.qts, 0);
    g_assert_cmpint(qdict_get_int(rep, "rx-packets"), ==, 1);
    g_assert_cmpint(qdict_get_int(rep, "rx-bytes"), ==, sizeof(frame));
    g_assert_cmpint(qdict_get_int(rep, "rx-dropped"), ==, 1);
    g_assert_cmpint(qdict_get_int(rep, "tx-packets"), ==, 1);
    g_assert_cmpint(qdict_get_int(rep, "tx-dropped"), ==, 0);
    qobject_unref(rep);

    /* the representor gone: what the driver sends goes nowhere */
    g_assert_cmpuint(obj_destroy(&a, VSRIOV_NET_RESOURCE_OBJ_REP, 0, &r), ==,
                     VIRTIO_ADMIN_STATUS_OK);
    ring_add(&a, &tx, REP_TX_BASE + 0x3000, 12 + sizeof(frame), false);
    g_assert_cmpuint(ring_used(&a, &tx), ==, 0);
    g_assert_cmpuint(obj_destroy(&a, VSRIOV_NET_RESOURCE_OBJ_ESWITCH, 0, &r),
                     ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpstr(qmp_eswitch_mode(a.qts), ==, "legacy");
    close(sock);
    qtest_quit(a.qts);
}

/* Flow offload: the flow filter objects in the eswitch domain (flow.c) */

/* CREATE (or QUERY, with @len 0) of object @type @id with @len bytes. */
static uint16_t fobj(Admin *a, uint16_t opcode, uint16_t type, uint32_t id,
                     const void *data, size_t len, Res *r)
{
    uint8_t d[16 + 240] = {};

    g_assert_cmpuint(len, <=, 240);
    stw_le_p(d, type);
    stl_le_p(d + 4, id);
    if (len) {
        memcpy(d + 16, data, len);
    }
    return run(a, opcode, SELF, 0, d,
               opcode == VSRIOV_ADMIN_CMD_RESOURCE_OBJ_DESTROY ? 8 : 16 + len,
               r);
}

static uint16_t group_create(Admin *a, uint32_t id, uint16_t prio,
                             uint8_t domain, Res *r)
{
    struct vsriov_net_resource_obj_ff_group g = {
        .group_priority = cpu_to_le16(prio),
        .domain = domain,
    };

    return fobj(a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
                VSRIOV_NET_RESOURCE_OBJ_FF_GROUP, id, &g, sizeof(g), r);
}

/* Append selector @type (@len bytes of mask @mask) to @b at *@off. */
static void put_sel(uint8_t *b, size_t *off, uint8_t type, uint8_t flags,
                    const uint8_t *mask, uint8_t len)
{
    memset(b + *off, 0, 8);
    b[*off] = type;
    b[*off + 1] = flags;
    b[*off + 4] = len;
    memcpy(b + *off + 8, mask, len);
    *off += 8 + len;
    b[0]++;
}

/*
 * A classifier: the source port, Ethernet type, IPv4 protocol and
 * destination, TCP destination port (keys of 4 + 14 + 20 + 20 bytes).
 */
static size_t tcp_classifier(uint8_t *b)
{
    uint8_t port[4] = { 0xff, 0xff, 0xff, 0xff }, eth[14] = {};
    uint8_t ip[20] = {}, tcp[20] = {};
    size_t off = 8;

    memset(b, 0, 8);
    eth[12] = eth[13] = 0xff;
    ip[9] = 0xff;
    memset(ip + 16, 0xff, 4);
    tcp[2] = tcp[3] = 0xff;
    put_sel(b, &off, VSRIOV_NET_FF_MASK_TYPE_PORT, 0, port, 4);
    put_sel(b, &off, VSRIOV_NET_FF_MASK_TYPE_ETH, 0, eth, 14);
    put_sel(b, &off, VSRIOV_NET_FF_MASK_TYPE_IPV4, 0, ip, 20);
    put_sel(b, &off, VSRIOV_NET_FF_MASK_TYPE_TCP, 0, tcp, 20);
    return off;
}

/* A rule of tcp_classifier(): VF @src's TCP to 10.0.0.2:@dport. */
static size_t tcp_rule(uint8_t *b, uint32_t group, uint32_t cls,
                       uint32_t src, uint16_t dport, uint8_t action,
                       uint16_t port)
{
    struct vsriov_net_resource_obj_ff_rule h = {
        .group_id = cpu_to_le32(group),
        .classifier_id = cpu_to_le32(cls),
        .key_length = 58,
        .action = action,
        .port = cpu_to_le16(port),
    };
    uint8_t *k = b + sizeof(h);

    memcpy(b, &h, sizeof(h));
    memset(k, 0, 58);
    stl_le_p(k, src);
    stw_be_p(k + 4 + 12, 0x0800);
    k[4 + 14 + 9] = 6;
    k[4 + 14 + 16] = 10;
    k[4 + 14 + 19] = 2;
    stw_be_p(k + 4 + 14 + 20 + 2, dport);
    return sizeof(h) + 58;
}

static void test_flow_objects(void)
{
    struct vsriov_net_ff_cap_data cap;
    uint8_t id[8] = {}, b[240];
    size_t len;
    Ring rx, tx;
    Ring *rings[] = { &rx, &tx };
    Admin a;
    Res r;
    int sock;

    start_eswitch(&a, &sock, F2_ESWITCH, &rx, &tx);
    g_assert_cmphex(use_all(&a, SELF) & 1ull << 0xc, ==, 1ull << 0xc);
    use_all(&a, SRIOV);
    /* the capabilities: limits, selectors, actions */
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_CAP_ID_LIST_QUERY, SELF, 0,
                         NULL, 0, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmphex(r.result[VSRIOV_NET_FF_RESOURCE_CAP / 8] & 7, ==, 7);
    stw_le_p(id, VSRIOV_NET_FF_RESOURCE_CAP);
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_DEVICE_CAP_GET, SELF, 0, id, 8,
                         &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(r.len, ==, 8 + sizeof(cap));
    memcpy(&cap, r.result, sizeof(cap));
    g_assert_cmpuint(le32_to_cpu(cap.groups_limit), ==, 64);
    g_assert_cmpuint(le32_to_cpu(cap.rules_limit), ==, 1024);
    g_assert_cmpuint(cap.last_rule_priority, ==, 0);
    g_assert_cmpuint(cap.selectors_per_classifier_limit, ==, 6);
    stw_le_p(id, VSRIOV_NET_FF_SELECTOR_CAP);
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_DEVICE_CAP_GET, SELF, 0, id, 8,
                         &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(r.result[0], ==, 7);
    g_assert_cmpuint(r.result[8], ==, VSRIOV_NET_FF_MASK_TYPE_ETH);
    g_assert_cmpuint(r.result[8 + 4], ==, 14);
    stw_le_p(id, VSRIOV_NET_FF_ACTION_CAP);
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_DEVICE_CAP_GET, SELF, 0, id, 8,
                         &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(r.result[0], ==, 2);
    g_assert_cmpuint(r.result[8], ==, VSRIOV_NET_FF_ACTION_DROP);
    g_assert_cmpuint(r.result[9], ==, VSRIOV_NET_FF_ACTION_FORWARD_TO_PORT);
    /* the driver may take fewer groups, not more */
    memset(b, 0, 8 + sizeof(cap));
    stw_le_p(b, VSRIOV_NET_FF_RESOURCE_CAP);
    cap.groups_limit = cpu_to_le32(65);
    memcpy(b + 8, &cap, sizeof(cap));
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_DRIVER_CAP_SET, SELF, 0, b,
                         8 + sizeof(cap), &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    cap.groups_limit = cpu_to_le32(4);
    memcpy(b + 8, &cap, sizeof(cap));
    g_assert_cmpuint(run(&a, VIRTIO_ADMIN_CMD_DRIVER_CAP_SET, SELF, 0, b,
                         8 + sizeof(cap), &r), ==, VIRTIO_ADMIN_STATUS_OK);

    /* legacy mode: no flow objects */
    g_assert_cmpuint(group_create(&a, 0, 100, VSRIOV_NET_FF_DOMAIN_ESWITCH,
                                  &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    set_vfs(&a, 2);
    g_assert_cmpuint(esw_create(&a, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(rep_create(&a, 0, 1, 0, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(rep_create(&a, 1, 2, 0, &r), ==, VIRTIO_ADMIN_STATUS_OK);

    /* groups: the eswitch's domain, distinct priorities, the limit */
    g_assert_cmpuint(group_create(&a, 0, 100, 0, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);     /* receive domain */
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    g_assert_cmpuint(group_create(&a, 0, 100, VSRIOV_NET_FF_DOMAIN_ESWITCH,
                                  &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(group_create(&a, 1, 100, VSRIOV_NET_FF_DOMAIN_ESWITCH,
                                  &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    g_assert_cmpuint(group_create(&a, 4, 7, VSRIOV_NET_FF_DOMAIN_ESWITCH,
                                  &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY,
                          VSRIOV_NET_RESOURCE_OBJ_FF_GROUP, 0, NULL, 0, &r),
                     ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(r.len, ==, 8 + 8);
    g_assert_cmpuint(lduw_le_p(r.result), ==, 100);

    /* classifiers: the source port first, masks within the capability */
    len = tcp_classifier(b);
    g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
                          VSRIOV_NET_RESOURCE_OBJ_FF_CLASSIFIER, 0, b, len,
                          &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY,
                          VSRIOV_NET_RESOURCE_OBJ_FF_CLASSIFIER, 0, NULL, 0,
                          &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(r.len, ==, 8 + len);
    g_assert_cmpmem(r.result, len, b, len);
    b[8 + 12 + 22 + 8 + 8] = 0xff;  /* the IPv4 TTL: not offered */
    g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
                          VSRIOV_NET_RESOURCE_OBJ_FF_CLASSIFIER, 1, b, len,
                          &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    len = tcp_classifier(b);
    b[8] = VSRIOV_NET_FF_MASK_TYPE_ETH;     /* no source port first */
    g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
                          VSRIOV_NET_RESOURCE_OBJ_FF_CLASSIFIER, 1, b, len,
                          &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);

    /* rules: checked first, then a static pool offloads none */
    len = tcp_rule(b, 0, 0, 1, 8080, VSRIOV_NET_FF_ACTION_FORWARD_TO_PORT, 2);
    g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
                          VSRIOV_NET_RESOURCE_OBJ_FF_RULE, 0, b, len, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    b[16 + 4 + 14 + 8] = 64;        /* a key bit outside the mask */
    g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
                          VSRIOV_NET_RESOURCE_OBJ_FF_RULE, 0, b, len, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    len = tcp_rule(b, 0, 0, 1, 22, VSRIOV_NET_FF_ACTION_FORWARD_TO_PORT, 4);
    g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
                          VSRIOV_NET_RESOURCE_OBJ_FF_RULE, 0, b, len, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);   /* no VF 4 */
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
    len = tcp_rule(b, 0, 0, 1, 22, VSRIOV_NET_FF_ACTION_FORWARD_TO_PORT, 3);
    g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
                          VSRIOV_NET_RESOURCE_OBJ_FF_RULE, 0, b, len, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);   /* VF 3: not enabled */
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    len = tcp_rule(b, 0, 0, 0, 22, VSRIOV_NET_FF_ACTION_DROP, 0);
    g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
                          VSRIOV_NET_RESOURCE_OBJ_FF_RULE, 0, b, len, &r), ==,
                     VSRIOV_ADMIN_STATUS_EINVAL);   /* the uplink's */
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY,
                          VSRIOV_NET_RESOURCE_OBJ_FF_RULE, 0, NULL, 0, &r),
                     ==, VSRIOV_ADMIN_STATUS_EINVAL);   /* none */

    /* a tagged frame: by a VLAN selector, not by EtherType 0x8100 */
    {
        static const uint8_t port[4] = { 0xff, 0xff, 0xff, 0xff };
        uint8_t eth[14] = { [12] = 0xff, [13] = 0xff };
        struct vsriov_net_resource_obj_ff_rule h = {
            .key_length = 18, .action = VSRIOV_NET_FF_ACTION_DROP,
            .classifier_id = cpu_to_le32(2),
        };
        size_t off = 8;

        memset(b, 0, 8);
        put_sel(b, &off, VSRIOV_NET_FF_MASK_TYPE_PORT, 0, port, 4);
        put_sel(b, &off, VSRIOV_NET_FF_MASK_TYPE_ETH, 0, eth, 14);
        g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
                              VSRIOV_NET_RESOURCE_OBJ_FF_CLASSIFIER, 2, b, off,
                              &r), ==, VIRTIO_ADMIN_STATUS_OK);
        memset(b, 0, sizeof(h) + 18);
        memcpy(b, &h, sizeof(h));
        stl_le_p(b + sizeof(h), 1);
        stw_be_p(b + sizeof(h) + 4 + 12, 0x8100);
        g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
                              VSRIOV_NET_RESOURCE_OBJ_FF_RULE, 0, b,
                              sizeof(h) + 18, &r), ==,
                         VSRIOV_ADMIN_STATUS_EINVAL);
        g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_FIELD);
        stw_be_p(b + sizeof(h) + 4 + 12, 0x88b5);   /* past the checks */
        g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE,
                              VSRIOV_NET_RESOURCE_OBJ_FF_RULE, 0, b,
                              sizeof(h) + 18, &r), ==,
                         VSRIOV_ADMIN_STATUS_EINVAL);
        g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
        g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_DESTROY,
                              VSRIOV_NET_RESOURCE_OBJ_FF_CLASSIFIER, 2, NULL, 0,
                              &r), ==, VIRTIO_ADMIN_STATUS_OK);
    }

    /* in use: the classifier, the group, the eswitch */
    g_assert_cmpuint(esw_create(&a, &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(obj_destroy(&a, VSRIOV_NET_RESOURCE_OBJ_REP, 0, &r), ==,
                     VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(obj_destroy(&a, VSRIOV_NET_RESOURCE_OBJ_REP, 1, &r), ==,
                     VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(obj_destroy(&a, VSRIOV_NET_RESOURCE_OBJ_ESWITCH, 0, &r),
                     ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_DESTROY,
                          VSRIOV_NET_RESOURCE_OBJ_FF_CLASSIFIER, 0, NULL, 0,
                          &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_DESTROY,
                          VSRIOV_NET_RESOURCE_OBJ_FF_GROUP, 0, NULL, 0, &r),
                     ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(obj_destroy(&a, VSRIOV_NET_RESOURCE_OBJ_ESWITCH, 0, &r),
                     ==, VIRTIO_ADMIN_STATUS_OK);

    /* a reset of the PF: everything goes */
    g_assert_cmpuint(esw_create(&a, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(group_create(&a, 3, 9, VSRIOV_NET_FF_DOMAIN_ESWITCH,
                                  &r), ==, VIRTIO_ADMIN_STATUS_OK);
    map_pf(&a);
    driver_start_rings(&a, 1ull << VIRTIO_F_VERSION_1 |
                       1ull << VIRTIO_F_ADMIN_VQ |
                       1ull << VIRTIO_NET_F_CTRL_VQ, F2_ESWITCH, rings, 2);
    use_all(&a, SELF);
    use_all(&a, SRIOV);
    set_vfs(&a, 2);
    g_assert_cmpuint(esw_create(&a, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(fobj(&a, VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY,
                          VSRIOV_NET_RESOURCE_OBJ_FF_GROUP, 3, NULL, 0, &r),
                     ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(obj_destroy(&a, VSRIOV_NET_RESOURCE_OBJ_ESWITCH, 0, &r),
                     ==, VIRTIO_ADMIN_STATUS_OK);
    close(sock);
    qtest_quit(a.qts);
}

/* A driver that did not negotiate VIRTIO_NET_F_ESWITCH has no flows. */
static void test_flow_not_negotiated(void)
{
    Ring rx, tx;
    Admin a;
    Res r;
    int sock;

    start_eswitch(&a, &sock, 0, &rx, &tx);
    use_all(&a, SELF);
    g_assert_cmpuint(group_create(&a, 0, 1, VSRIOV_NET_FF_DOMAIN_ESWITCH,
                                  &r), ==, VSRIOV_ADMIN_STATUS_EINVAL);
    g_assert_cmpuint(r.qualifier, ==, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    close(sock);
    qtest_quit(a.qts);
}

/*
 * A hostile driver of a switchdev PF: random eswitch, representor and
 * flow objects, frames on a representor, VF Enable flips and resets of the PF,
 * mixed.  QEMU stays up, and at the end a reset PF gives a representor
 * that carries frames: nothing was left bound.
 */
static void test_random_eswitch(void)
{
    const char *env = g_getenv("VSRIOV_QTEST_OPS");
    long ops = env ? atol(env) : 20000;
    GRand *rnd = g_rand_new_with_seed(0x4553);
    uint8_t out[64], frame[60] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
    uint64_t features = 1ull << VIRTIO_F_VERSION_1 |
                        1ull << VIRTIO_F_ADMIN_VQ |
                        1ull << VIRTIO_NET_F_CTRL_VQ;
    long reps_made = 0;
    Ring rx, tx;
    Ring *rings[] = { &rx, &tx };
    Admin a;
    Res r;
    int sock;

    start_eswitch(&a, &sock, F2_ESWITCH, &rx, &tx);
    g_unix_set_fd_nonblocking(sock, true, NULL);
    use_all(&a, SELF);
    use_all(&a, SRIOV);
    set_vfs(&a, 2);
    for (long i = 0; i < ops; i++) {
        uint16_t tx_used = qtest_readw(a.qts, tx.used + 2);
        int what = g_rand_int_range(rnd, 0, 100);

        if (what < 10 && (uint16_t)(tx.avail_idx - tx_used) < QSIZE) {
            qtest_memwrite(a.qts, REP_TX_BASE + 0x3000 + 12, frame,
                           sizeof(frame));
            ring_add(&a, &tx, REP_TX_BASE + 0x3000,
                     g_rand_int_range(rnd, 1, 12 + sizeof(frame) + 1), false);
            continue;
        }
        if (what < 12) {
            set_vfs(&a, g_rand_int_range(rnd, 0, 4));
            continue;
        }
        if (what < 13) {
            map_pf(&a);
            driver_start_rings(&a, features, g_rand_boolean(rnd) ?
                               F2_ESWITCH : 0, rings, 2);
            use_all(&a, SELF);
            use_all(&a, SRIOV);
            continue;
        }
        for (int j = 0; j < sizeof(out); j++) {
            out[j] = g_rand_int(rnd);
        }
        stw_le_p(out, g_rand_int_range(rnd, 0, 5) < 2 ?
                 VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE :
                 g_rand_boolean(rnd) ? VSRIOV_ADMIN_CMD_RESOURCE_OBJ_DESTROY :
                 VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY);
        stw_le_p(out + 2, g_rand_int_range(rnd, 0, 10) ? SELF : SRIOV);
        stq_le_p(out + 16, g_rand_int_range(rnd, 0, 10) ? 0 : 1);
        /* mostly the objects' own types and fields, to get past checks */
        /* (the flow objects' too: 0x200-0x202) */
        stw_le_p(out + 24, g_rand_int_range(rnd, 0x200, 0x208));
        stw_le_p(out + 26, g_rand_int_range(rnd, 0, 10) ? 0 : 1);
        stl_le_p(out + 28, g_rand_int_range(rnd, 0, 5));
        stq_le_p(out + 32, g_rand_int_range(rnd, 0, 10) ? 0 : 2);
        stw_le_p(out + 40, g_rand_int_range(rnd, 0, 10) ? 0 : 1);
        stw_le_p(out + 42, 0);
        stl_le_p(out + 44, g_rand_int_range(rnd, 0, 5));
        stq_le_p(out + 48, g_rand_int_range(rnd, 0, 10) ? 0 : 3);
        run_raw(&a, out, g_rand_int_range(rnd, 24, sizeof(out) + 1), 8, &r);
        g_assert_cmpuint(r.len, ==, 8);
        reps_made += r.status == VIRTIO_ADMIN_STATUS_OK &&
                     lduw_le_p(out) == VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE &&
                     lduw_le_p(out + 24) == VSRIOV_NET_RESOURCE_OBJ_REP;
    }
    g_test_message("%ld operations, %ld representors made", ops, reps_made);
    g_assert_cmpint(reps_made, >, 0);     /* the deep paths were reached */
    /* drain what the backend got */
    while (read(sock, out, sizeof(out)) > 0) {
        continue;
    }
    g_unix_set_fd_nonblocking(sock, false, NULL);

    map_pf(&a);
    driver_start_rings(&a, features, F2_ESWITCH, rings, 2);
    g_assert_cmpstr(qmp_eswitch_mode(a.qts), ==, "legacy");
    g_assert_null(qmp_vf_rep(a.qts, 0));
    use_all(&a, SELF);
    use_all(&a, SRIOV);
    set_vfs(&a, 0);
    set_vfs(&a, 2);
    g_assert_cmpuint(esw_create(&a, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    g_assert_cmpuint(rep_create(&a, 0, 1, 0, &r), ==, VIRTIO_ADMIN_STATUS_OK);
    qtest_memwrite(a.qts, REP_TX_BASE + 0x3000 + 12, frame, sizeof(frame));
    ring_add(&a, &tx, REP_TX_BASE + 0x3000, 12 + sizeof(frame), false);
    g_assert_cmpuint(ring_used(&a, &tx), ==, 0);
    g_assert_cmpuint(sock_recv(&a, sock, out, sizeof(out)), ==,
                     sizeof(frame));
    g_rand_free(rnd);
    close(sock);
    qtest_quit(a.qts);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/vsriov/admin/discovery", test_discovery);
    qtest_add_func("/vsriov/admin/bad-commands", test_bad_commands);
    qtest_add_func("/vsriov/admin/set-get", test_set_get);
    qtest_add_func("/vsriov/admin/driver-cap", test_driver_cap);
    qtest_add_func("/vsriov/admin/link", test_link);
    qtest_add_func("/vsriov/admin/stats", test_stats);
    qtest_add_func("/vsriov/admin/prepare", test_prepare);
    qtest_add_func("/vsriov/admin/buffer-sizes", test_buffer_sizes);
    qtest_add_func("/vsriov/admin/pf-reset", test_pf_reset);
    qtest_add_func("/vsriov/admin/eswitch-objects", test_eswitch_objects);
    qtest_add_func("/vsriov/admin/eswitch-not-negotiated",
                   test_eswitch_not_negotiated);
    qtest_add_func("/vsriov/admin/eswitch-off", test_eswitch_off);
    qtest_add_func("/vsriov/admin/eswitch-datapath", test_eswitch_datapath);
    qtest_add_func("/vsriov/admin/random-eswitch", test_random_eswitch);
    qtest_add_func("/vsriov/admin/flow-objects", test_flow_objects);
    qtest_add_func("/vsriov/admin/flow-not-negotiated",
                   test_flow_not_negotiated);
    qtest_add_func("/vsriov/admin/answer-delay", test_answer_delay);
    qtest_add_func("/vsriov/admin/random-commands", test_random_commands);
    qtest_add_func("/vsriov/admin/random-commands-premapped",
                   test_random_commands_premapped);
    return g_test_run();
}
