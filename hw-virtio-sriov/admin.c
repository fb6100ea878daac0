/*
 * vsriov administration virtqueue
 *
 * The virtual PF is the owner of its SR-IOV group (VIRTIO's group type
 * 0x1) and takes group administration commands on an administration
 * virtqueue (VIRTIO_F_ADMIN_VQ), which QEMU emulates itself whatever the
 * PF's backend is: the queue never reaches a vhost backend.  Besides
 * VIRTIO's LIST_QUERY/LIST_USE and its device capability commands, it
 * takes what docs/virtio-spec/ proposes: a VF's net configuration (MAC,
 * VLAN, link state, spoof check, highest tx rate) and its counters as a
 * member configuration object that each VF has, read and changed with
 * VIRTIO's RESOURCE_OBJ_QUERY and _MODIFY of the SR-IOV group type; the
 * preparation of VFs before VF Enable; and (with an eswitch) the
 * switchdev and flow filter objects of the self group
 * (docs/vf-config-channel.md).
 *
 * Commands run in the order queued, one at a time: those that only read or
 * record what QEMU holds (the list and capability commands, a QUERY of a
 * member's configuration) in the notification, when they are at the head
 * of the queue, the others in the main loop (admin_handle()).  A
 * command the pool's provider has to apply (a host daemon's) completes
 * when the provider answers, which the provider does by its own deadline
 * (VsriovPoolClass.configure); until then the queue waits and no vCPU
 * does.  A command that fails has no side effects: EINVAL and EPERM are
 * checked before anything changes, and after a provider's time-out the
 * recorded configuration is sent again (vf-config.c), so the answer EAGAIN
 * means "nothing changed, try again".
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/iov.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "qemu/timer.h"
#include "qapi/visitor.h"
#include "migration/vmstate.h"
#include "system/runstate.h"
#include "hw/pci/pci.h"
#include "hw/pci/pcie_sriov.h"
#include "hw/virtio/virtio.h"
#include "hw/virtio/virtio-net.h"
#include "hw/virtio/virtio-pci.h"
#include "standard-headers/linux/virtio_pci.h"
#include "standard-headers/linux/virtio_net.h"
#include "vsriov.h"
#include "admin.h"
#include "eswitch.h"
#include "flow.h"
#include "trace.h"

#define AVQ_SIZE            64
/* commands run in one main-loop iteration at most, then it goes on */
#define AVQ_BATCH           16
/* the longest data and result of the commands taken */
/* (a flow classifier with its header) */
#define AVQ_DATA_MAX        256
#define AVQ_RESULT_MAX      ((VSRIOV_NET_MEMBER_CFG_CAP / 64 + 1) * 8)

/* The group types taken: the PF itself (0), its SR-IOV group (1). */
#define GROUPS              2

/* What a command leaves in the status part of its buffer. */
typedef struct AdminStatus {
    uint16_t status;
    uint16_t qualifier;
} AdminStatus;

/* An answer held back (x-sriov-admin-delay, x-sriov-admin-hold). */
typedef struct AdminStatusHeld {
    AdminStatus s;
    uint8_t result[AVQ_RESULT_MAX];
    size_t len;
} AdminStatusHeld;

struct VsriovAdmin {
    VsriovPF *vpf;
    VirtIODevice *vdev;
    VirtQueue *vq;
    QEMUBH *bh;                 /* runs the queue, in the main loop */
    VirtQueueElement *cur;      /* the command waiting for the provider */
    uint16_t cur_opcode;
    uint64_t cur_flags;         /* (a resource object command's flags) */
    uint32_t cur_gen;           /* gen when cur went to a flow provider */
    uint32_t gen;               /* bumped when the queue is reset */
    uint64_t used[GROUPS];      /* per group type: what LIST_USE enabled */
    /* the net member capability as the driver set it (DRIVER_CAP_SET) */
    struct vsriov_net_member_cfg_cap driver_cap;
    bool member_cap_set;        /* ... since the reset: objects usable */
    uint32_t esw_limit, rep_limit;  /* ... and the eswitch's */
    VMChangeStateEntry *vm_state;
    /* testing (x-sriov-admin-delay, x-sriov-admin-hold): answers held */
    QEMUTimer *delay_timer;
    bool hold;                  /* every answer held until it is cleared */
    bool delayed;               /* cur is answered, its answer held */
    AdminStatusHeld held;
};

/* The device capability commands: about the PF itself. */
#define CAP_CMDS    (1ull << VIRTIO_ADMIN_CMD_CAP_ID_LIST_QUERY | \
                     1ull << VIRTIO_ADMIN_CMD_DEVICE_CAP_GET | \
                     1ull << VIRTIO_ADMIN_CMD_DRIVER_CAP_SET)
/* Taken whatever LIST_USE enabled. */
#define LIST_CMDS   (1ull << VIRTIO_ADMIN_CMD_LIST_QUERY | \
                     1ull << VIRTIO_ADMIN_CMD_LIST_USE)

/*
 * Per group type, the commands it takes (all below opcode 64).  The SR-IOV
 * group lists the capability commands too: Linux's virtio_pci (since it
 * has virtio_pci_admin_cmd_cap_init()) keeps one list, the SR-IOV group's,
 * and sends the self group's capability commands only if that list has
 * them (admin_enabled()).
 */
static const uint64_t supported[GROUPS] = {
    [VIRTIO_ADMIN_GROUP_TYPE_SELF] = LIST_CMDS | CAP_CMDS,
    [VIRTIO_ADMIN_GROUP_TYPE_SRIOV] =
        LIST_CMDS | CAP_CMDS |
        1ull << VSRIOV_ADMIN_CMD_RESOURCE_OBJ_MODIFY |
        1ull << VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY |
        1ull << VSRIOV_ADMIN_CMD_SRIOV_MEMBERS_PREPARE,
};

/* The resource object commands: a PF with an eswitch (eswitch.c). */
#define ESW_CMDS    (1ull << VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE | \
                     1ull << VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY | \
                     1ull << VSRIOV_ADMIN_CMD_RESOURCE_OBJ_DESTROY)

static uint64_t admin_supported(VsriovAdmin *a, uint16_t group)
{
    return supported[group] |
           (group == VIRTIO_ADMIN_GROUP_TYPE_SELF && a->vpf->esw ?
            ESW_CMDS : 0);
}

static const AdminStatus st_ok;

static AdminStatus st(uint16_t status, uint16_t qualifier)
{
    return (AdminStatus) { status, qualifier };
}

/* A provider's (or our own) negative errno, as the spec's status. */
static AdminStatus status_of(int ret)
{
    switch (ret) {
    case 0:
        return st_ok;
    case -EINVAL:
        return st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_FIELD);
    case -EPERM:
    case -EACCES:
    case -EADDRINUSE:
        return st(VSRIOV_ADMIN_STATUS_EPERM, VSRIOV_ADMIN_Q_INVALID_FIELD);
    case -ENOSPC:
    case -ENOMEM:
        return st(VSRIOV_ADMIN_STATUS_ENOMEM, VSRIOV_ADMIN_Q_NORESOURCE);
    case -ETIMEDOUT:
    case -EAGAIN:
    case -ESTALE:
    case -ECONNREFUSED:
    case -ECONNRESET:
    case -ENOTCONN:
    case -EPIPE:
        /* nothing changed (vf-config.c put back what may have) */
        return st(VSRIOV_ADMIN_STATUS_EAGAIN, VSRIOV_ADMIN_Q_TRYAGAIN);
    default:
        /*
         * The provider could not apply it, maybe in part: vf-config.c put
         * the recorded configuration back, so nothing changed.
         */
        return st(VSRIOV_ADMIN_STATUS_EAGAIN, VSRIOV_ADMIN_Q_TRYAGAIN);
    }
}

/*
 * Write status and result into the element's device-writable part.  With
 * x-sriov-admin-delay or x-sriov-admin-hold (testing: a device that
 * answers late, or never), the element stays the queue's current one
 * until the delay is over or the hold is cleared (admin_delay_timer()).
 */
static void admin_complete(VsriovAdmin *a, VirtQueueElement *elem,
                           AdminStatus s, const void *result, size_t len)
{
    struct virtio_admin_cmd_status cs = {
        .status = cpu_to_le16(s.status),
        .status_qualifier = cpu_to_le16(s.qualifier),
    };
    size_t in = iov_size(elem->in_sg, elem->in_num);
    size_t done;

    if ((a->vpf->admin_delay_ms || a->hold) && !a->delayed) {
        a->held.s = s;
        a->held.len = MIN(len, sizeof(a->held.result));
        memcpy(a->held.result, result, a->held.len);
        a->cur = elem;
        a->delayed = true;
        if (!a->hold && a->vpf->admin_delay_ms != UINT32_MAX) {
            timer_mod(a->delay_timer, qemu_clock_get_ms(QEMU_CLOCK_REALTIME) +
                      a->vpf->admin_delay_ms);
        }
        return;
    }
    a->delayed = false;
    if (s.status != VIRTIO_ADMIN_STATUS_OK) {
        len = 0;
    }
    done = iov_from_buf(elem->in_sg, elem->in_num, 0, &cs, sizeof(cs));
    if (done == sizeof(cs) && len) {
        done += iov_from_buf(elem->in_sg, elem->in_num, sizeof(cs), result,
                             len);
    }
    if (in < sizeof(cs)) {
        qemu_log_mask(LOG_GUEST_ERROR, "vsriov: PF '%s': administration "
                      "command with a %zu-byte device-writable part\n",
                      DEVICE(a->vpf->pf)->id, in);
    }
    trace_vsriov_admin_done(DEVICE(a->vpf->pf)->id, a->cur_opcode,
                            a->cur_flags, s.status, s.qualifier);
    virtqueue_push(a->vq, elem, done);
    virtio_notify(a->vdev, a->vq);
    g_free(elem);
}

static void member_cfg_get(VsriovPF *vpf, uint16_t i,
                           struct vsriov_admin_net_member_cfg *r)
{
    const VsriovVFConfig *c = &vpf->cfg.vf[i];

    memset(r, 0, sizeof(*r));
    memcpy(r->mac, vsriov_vf_net(vpf->vfs[i])->mac, sizeof(r->mac));
    r->vlan_id = cpu_to_le16(c->vlan);
    r->vlan_proto = cpu_to_le16(c->vlan ? c->vlan_proto : ETH_P_8021Q);
    r->link_state = c->link_state == VSRIOV_VF_LINK_ENABLE ?
                    VSRIOV_ADMIN_LINK_UP :
                    c->link_state == VSRIOV_VF_LINK_DISABLE ?
                    VSRIOV_ADMIN_LINK_DOWN : VSRIOV_ADMIN_LINK_AUTO;
    r->flags = (c->spoofchk ? VSRIOV_ADMIN_MEMBER_F_SPOOF_CHECK : 0) |
               (c->mac_set ? VSRIOV_ADMIN_MEMBER_F_MAC_ADMIN_SET : 0);
    r->max_tx_rate = cpu_to_le32(c->max_tx_rate);
}

/* The fields a SET takes, and the highest rate (the PF's speed). */
static void member_cfg_cap(VsriovPF *vpf, struct vsriov_net_member_cfg_cap *r)
{
    VirtIONet *n = VIRTIO_NET(virtio_bus_get_device(
        &VIRTIO_PCI(vpf->pf)->bus));

    memset(r, 0, sizeof(*r));
    r->supported_fields = cpu_to_le64(VSRIOV_ADMIN_FIELD_ALL);
    r->max_tx_rate = cpu_to_le32(n->net_conf.speed > 0 ? n->net_conf.speed
                                                        : UINT32_MAX);
    r->vlan_protos = cpu_to_le16(3);
}

/*
 * The configuration a MODIFY asks for: @c is VF @i's with the @fields of
 * @r changed.  -EINVAL for a field or a value outside the capability the
 * driver set, or one a VF cannot have.
 */
static int member_cfg_set(VsriovAdmin *a, uint16_t i, uint64_t fields,
                          const struct vsriov_admin_net_member_cfg *r,
                          VsriovVFConfig *c)
{
    static const uint8_t zero[8];
    VsriovPF *vpf = a->vpf;
    const struct vsriov_net_member_cfg_cap *cap = &a->driver_cap;
    uint16_t vlan = le16_to_cpu(r->vlan_id);
    uint16_t proto = le16_to_cpu(r->vlan_proto);

    *c = vpf->cfg.vf[i];
    if ((fields & ~le64_to_cpu(cap->supported_fields)) ||
        memcmp(r->reserved, zero, sizeof(r->reserved))) {
        return -EINVAL;
    }
    if (fields & VSRIOV_ADMIN_FIELD_VLAN) {
        uint16_t protos = le16_to_cpu(cap->vlan_protos);

        if (!vlan) {
            proto = ETH_P_8021Q;    /* no VLAN: its protocol is moot */
        } else if (!((proto == ETH_P_8021Q && (protos & 1)) ||
                     (proto == ETH_P_8021AD && (protos & 2)))) {
            return -EINVAL;
        }
    }
    if ((fields & VSRIOV_ADMIN_FIELD_TX_RATE) &&
        le32_to_cpu(r->max_tx_rate) > le32_to_cpu(cap->max_tx_rate)) {
        return -EINVAL;
    }
    if (fields & VSRIOV_ADMIN_FIELD_MAC) {
        /* all zero: back to the VF's default MAC */
        c->mac_set = memcmp(r->mac, zero, sizeof(r->mac)) != 0;
        memcpy(c->mac, c->mac_set ? r->mac : zero, sizeof(c->mac));
    }
    if (fields & VSRIOV_ADMIN_FIELD_VLAN) {
        c->vlan = vlan;
        c->vlan_proto = proto;
    }
    if (fields & VSRIOV_ADMIN_FIELD_LINK_STATE) {
        switch (r->link_state) {
        case VSRIOV_ADMIN_LINK_AUTO:
            c->link_state = VSRIOV_VF_LINK_AUTO;
            break;
        case VSRIOV_ADMIN_LINK_UP:
            c->link_state = VSRIOV_VF_LINK_ENABLE;
            break;
        case VSRIOV_ADMIN_LINK_DOWN:
            c->link_state = VSRIOV_VF_LINK_DISABLE;
            break;
        default:
            return -EINVAL;
        }
    }
    if (fields & VSRIOV_ADMIN_FIELD_SPOOF_CHECK) {
        c->spoofchk = !!(r->flags & VSRIOV_ADMIN_MEMBER_F_SPOOF_CHECK);
    }
    if (fields & VSRIOV_ADMIN_FIELD_TX_RATE) {
        c->max_tx_rate = le32_to_cpu(r->max_tx_rate);
    }
    return vsriov_vf_config_check(vpf, c);
}

/* Counters @s as the net device's RX_BASIC and TX_BASIC replies */
static size_t member_stats(const VsriovVFStats *s, uint8_t *out)
{
    struct virtio_net_stats_rx_basic rx = {};
    struct virtio_net_stats_tx_basic tx = {};

    rx.hdr.type = VIRTIO_NET_STATS_TYPE_REPLY_RX_BASIC;
    rx.hdr.size = cpu_to_le16(sizeof(rx));
    rx.rx_packets = cpu_to_le64(s->rx_packets);
    rx.rx_bytes = cpu_to_le64(s->rx_bytes);
    rx.rx_drops = cpu_to_le64(s->rx_dropped);
    tx.hdr.type = VIRTIO_NET_STATS_TYPE_REPLY_TX_BASIC;
    tx.hdr.size = cpu_to_le16(sizeof(tx));
    tx.tx_packets = cpu_to_le64(s->tx_packets);
    tx.tx_bytes = cpu_to_le64(s->tx_bytes);
    tx.tx_drops = cpu_to_le64(s->tx_dropped);
    memcpy(out, &rx, sizeof(rx));
    memcpy(out + sizeof(rx), &tx, sizeof(tx));
    return sizeof(rx) + sizeof(tx);
}

/* The provider answered the command at the head of the queue. */
static void admin_set_done(VsriovPF *vpf, uint16_t vf, int ret, void *opaque)
{
    VsriovAdmin *a = vpf->admin;
    VirtQueueElement *elem;

    if (!a || !a->cur || a->gen != (uintptr_t)opaque) {
        return;     /* the queue was reset meanwhile */
    }
    elem = g_steal_pointer(&a->cur);
    admin_complete(a, elem, status_of(ret), NULL, 0);
    qemu_bh_schedule(a->bh);
}

/* A QUERY's result: VF @vf's configuration, then counters @s if any. */
static size_t member_query(VsriovPF *vpf, uint16_t vf, const VsriovVFStats *s,
                           uint8_t *result)
{
    size_t len = sizeof(struct vsriov_admin_net_member_cfg);

    member_cfg_get(vpf, vf, (void *)result);
    return s ? len + member_stats(s, result + len) : len;
}

/* A QUERY's counters, read off the BQL (vf-stats.c), came. */
static void admin_stats_done(VsriovPF *vpf, uint16_t vf,
                             const VsriovVFStats *s, void *opaque)
{
    VsriovAdmin *a = vpf->admin;
    uint8_t result[sizeof(struct vsriov_admin_net_member_cfg) +
                   sizeof(struct virtio_net_stats_rx_basic) +
                   sizeof(struct virtio_net_stats_tx_basic)];
    size_t len;

    if (!a || !a->cur || a->gen != (uintptr_t)opaque) {
        return;     /* the queue was reset, or the VM stopped, meanwhile */
    }
    len = member_query(vpf, vf, s, result);
    admin_complete(a, g_steal_pointer(&a->cur), st_ok, result, len);
    qemu_bh_schedule(a->bh);
}

/* The backends SRIOV_MEMBERS_PREPARE waited for came, or not. */
static void admin_prepared(VsriovPF *vpf, int ret, Error *err, void *opaque)
{
    VsriovAdmin *a = vpf->admin;

    if (err) {
        error_prepend(&err, "virtual SR-IOV PF '%s': SRIOV_MEMBERS_PREPARE "
                      "failed: ", DEVICE(vpf->pf)->id);
        vsriov_report_guest_err(err);
    }
    if (!a || !a->cur || a->gen != (uintptr_t)opaque) {
        return;     /* the queue was reset meanwhile */
    }
    admin_complete(a, g_steal_pointer(&a->cur), status_of(ret), NULL, 0);
    qemu_bh_schedule(a->bh);
}

/* DRIVER_CAP_SET of the eswitch capability: the driver may take less. */
static AdminStatus admin_eswitch_cap_set(VsriovAdmin *a,
                                         const struct vsriov_net_eswitch_cap *d)
{
    struct vsriov_net_eswitch_cap dev;

    vsriov_eswitch_cap(a->vpf->esw, &dev);
    if (le32_to_cpu(d->eswitch_limit) > le32_to_cpu(dev.eswitch_limit) ||
        le32_to_cpu(d->rep_limit) > le32_to_cpu(dev.rep_limit) ||
        d->reserved) {
        return st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_FIELD);
    }
    a->esw_limit = le32_to_cpu(d->eswitch_limit);
    a->rep_limit = le32_to_cpu(d->rep_limit);
    return st_ok;
}

/* An eswitch call's errno as the spec's status. */
static AdminStatus obj_status(int ret)
{
    switch (ret) {
    case 0:
        return st_ok;
    case -EINVAL:
    case -ENODEV:
        return st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_FIELD);
    case -EOPNOTSUPP:
    case -EEXIST:
    case -ENOENT:
    case -EBUSY:
        return st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_COMMAND);
    default:
        return status_of(ret);  /* EPERM, ENOSPC, ETIMEDOUT... */
    }
}

/* A representor's creation that waited for the pool's provider ended. */
static bool admin_obj_done(VsriovESwitch *esw, int ret, void *opaque)
{
    VsriovAdmin *a = vsriov_eswitch_pf(esw)->admin;

    if (!a || !a->cur || a->gen != (uintptr_t)opaque) {
        return false;   /* the queue was reset, or the VM stopped */
    }
    admin_complete(a, g_steal_pointer(&a->cur), obj_status(ret), NULL, 0);
    qemu_bh_schedule(a->bh);
    return true;
}

/* A flow object's command that waited for the pool's provider ended. */
static bool admin_flow_done(void *opaque, int ret, const void *result,
                            size_t len)
{
    VsriovAdmin *a = opaque;

    if (!a->cur || a->cur_gen != a->gen) {
        return false;   /* the queue was reset, or the VM stopped */
    }
    admin_complete(a, g_steal_pointer(&a->cur), obj_status(ret), result, len);
    qemu_bh_schedule(a->bh);
    return true;
}

/*
 * RESOURCE_OBJ_CREATE, _QUERY and _DESTROY of the eswitch's objects
 * (eswitch.c) and its flow objects (flow.c): @data is the common header,
 * then (CREATE, QUERY) the flags and (CREATE) the object's own data.
 * True if it waits for the pool's provider (admin_obj_done(),
 * admin_flow_done()), else its status in @s and a QUERY's result in
 * @result (@rlen bytes).
 */
static bool admin_resource_obj(VsriovAdmin *a, uint16_t opcode,
                               const uint8_t *data, AdminStatus *s,
                               void *result, size_t *rlen)
{
    VsriovESwitch *esw = a->vpf->esw;
    VsriovFlowTable *ft = a->vpf->flows;
    uint16_t type = lduw_le_p(data);
    uint32_t id = ldl_le_p(data + 4);
    Error *err = NULL;
    int ret;

    if (lduw_le_p(data + 2) ||
        (type != VSRIOV_NET_RESOURCE_OBJ_ESWITCH &&
         type != VSRIOV_NET_RESOURCE_OBJ_REP && !vsriov_flow_is_obj(type)) ||
        (type == VSRIOV_NET_RESOURCE_OBJ_REP && id >= a->rep_limit) ||
        (type == VSRIOV_NET_RESOURCE_OBJ_ESWITCH && id >= a->esw_limit)) {
        *s = st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_FIELD);
        return false;
    }
    if (opcode != VSRIOV_ADMIN_CMD_RESOURCE_OBJ_DESTROY && ldq_le_p(data + 8)) {
        ret = -EINVAL;  /* no flags are defined */
    } else if (vsriov_flow_is_obj(type) &&
               !virtio_has_feature_ex(a->vdev->guest_features_ex,
                                      VSRIOV_NET_F_ESWITCH)) {
        ret = -EOPNOTSUPP;
    } else if (vsriov_flow_is_obj(type)) {
        a->cur_gen = a->gen;
        if (opcode == VSRIOV_ADMIN_CMD_RESOURCE_OBJ_DESTROY) {
            ret = vsriov_flow_destroy(ft, type, id, admin_flow_done, a, &err);
        } else if (opcode == VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY) {
            ret = vsriov_flow_query(ft, type, id, result, rlen,
                                    admin_flow_done, a, &err);
        } else {
            ret = vsriov_flow_create(ft, type, id, data + 16,
                                     AVQ_DATA_MAX - 16, admin_flow_done, a,
                                     &err);
        }
        if (ret > 0) {
            return true;
        }
    } else if (opcode == VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY) {
        ret = -EOPNOTSUPP;  /* (nothing to read of them) */
    } else if (opcode == VSRIOV_ADMIN_CMD_RESOURCE_OBJ_DESTROY) {
        uint16_t vf = 0;

        /* the rules that name a representor's VF go first, then all */
        if (type == VSRIOV_NET_RESOURCE_OBJ_REP &&
            vsriov_eswitch_rep_vf(esw, id, &vf) &&
            vsriov_flow_names_vf(ft, vf)) {
            ret = -EBUSY;
        } else if (type == VSRIOV_NET_RESOURCE_OBJ_ESWITCH &&
                   vsriov_flow_in_use(ft)) {
            ret = -EBUSY;
        } else {
            ret = vsriov_eswitch_destroy(esw, type, id);
        }
    } else {
        ret = vsriov_eswitch_create(esw, type, id, data + 16,
                                    AVQ_DATA_MAX - 16, admin_obj_done,
                                    (void *)(uintptr_t)a->gen, &err);
        if (ret > 0) {
            return true;
        }
    }
    if (err) {
        error_prepend(&err, "virtual SR-IOV PF '%s': %s %u: ",
                      DEVICE(a->vpf->pf)->id,
                      vsriov_flow_is_obj(type) ? "flow object" : "representor",
                      id);
        vsriov_report_guest_err(err);
    }
    *s = obj_status(ret);
    return false;
}

/*
 * RESOURCE_OBJ_QUERY and _MODIFY of the SR-IOV group: VF @vf's member
 * configuration object (@data is the common header, then the flags and,
 * for MODIFY, the configuration).  True if it waits for the pool's
 * provider (admin_set_done()), else its status in @s and a QUERY's
 * result in @result (@rlen bytes).
 */
static bool admin_member_obj(VsriovAdmin *a, uint16_t opcode, uint16_t vf,
                             const uint8_t *data, AdminStatus *s,
                             uint8_t *result, size_t *rlen)
{
    uint64_t flags = ldq_le_p(data + 8);
    VsriovVFConfig c;
    int ret;

    if (lduw_le_p(data) != VSRIOV_NET_RESOURCE_OBJ_MEMBER_CFG ||
        lduw_le_p(data + 2)) {
        *s = st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_FIELD);
        return false;
    }
    if (ldl_le_p(data + 4)) {
        /* each VF has one, id 0 */
        *s = st(VSRIOV_ADMIN_STATUS_ENXIO, VSRIOV_ADMIN_Q_INVALID_FIELD);
        return false;
    }
    if (!a->member_cap_set) {
        /* the driver sets the capability before it uses the objects */
        *s = st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_COMMAND);
        return false;
    }
    if (opcode == VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY) {
        if (flags & ~VSRIOV_ADMIN_MEMBER_QUERY_F_STATS) {
            *s = st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_FIELD);
            return false;
        }
        if (flags & VSRIOV_ADMIN_MEMBER_QUERY_F_STATS) {
            VsriovVFStats stats;

            if (!vsriov_vf_stats(a->vpf, vf, &stats, admin_stats_done,
                                 (void *)(uintptr_t)a->gen)) {
                return true;    /* admin_stats_done() */
            }
            *rlen = member_query(a->vpf, vf, &stats, result);
        } else {
            *rlen = member_query(a->vpf, vf, NULL, result);
        }
        *s = st_ok;
        return false;
    }
    if (member_cfg_set(a, vf, flags, (const void *)(data + 16), &c)) {
        *s = st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_FIELD);
        return false;
    }
    ret = vsriov_vf_config_change(a->vpf, vf, &c, admin_set_done,
                                  (void *)(uintptr_t)a->gen);
    if (ret > 0) {
        return true;    /* admin_set_done() */
    }
    *s = status_of(ret);
    return false;
}

/*
 * Whether the driver may send @opcode for @group now: LIST_QUERY and
 * LIST_USE always; the others once LIST_USE enabled them for the group.
 * A driver that sends the self group's capability commands having
 * enabled them through the SR-IOV group's LIST_USE only (Linux's
 * virtio_pci, which keeps one list) has them too: the specification
 * leaves it to the device, and refusing would cost that driver nothing
 * but a line in its log, this device nothing to allow.
 */
static bool admin_enabled(VsriovAdmin *a, uint16_t group, uint16_t opcode)
{
    uint64_t bit = opcode < 64 ? 1ull << opcode : 0;

    if (!(admin_supported(a, group) & bit)) {
        return false;
    }
    if ((LIST_CMDS & bit) || (a->used[group] & bit)) {
        return true;
    }
    return group == VIRTIO_ADMIN_GROUP_TYPE_SELF && (CAP_CMDS & bit) &&
           (a->used[VIRTIO_ADMIN_GROUP_TYPE_SRIOV] & bit);
}

/*
 * Run the command in @elem: true if it waits for the provider (a->cur),
 * false if it completed.
 */
static bool admin_run_one(VsriovAdmin *a, VirtQueueElement *elem)
{
    VsriovPF *vpf = a->vpf;
    struct virtio_admin_cmd_hdr hdr = {};
    /* (aligned for the structures they hold) */
    uint64_t data64[AVQ_DATA_MAX / 8] = {};
    uint64_t result64[AVQ_RESULT_MAX / 8] = {};
    uint8_t *data = (uint8_t *)data64;
    uint8_t *result = (uint8_t *)result64;
    size_t rlen = 0;
    uint16_t opcode, group, enabled;
    uint64_t member;
    AdminStatus s = st_ok;
    int ret;

    /* shorter parts read as zeros, longer ones are cut (the spec's rule) */
    iov_to_buf(elem->out_sg, elem->out_num, 0, &hdr, sizeof(hdr));
    iov_to_buf(elem->out_sg, elem->out_num, sizeof(hdr), data, sizeof(data64));
    opcode = le16_to_cpu(hdr.opcode);
    group = le16_to_cpu(hdr.group_type);
    member = le64_to_cpu(hdr.group_member_id);
    a->cur_opcode = opcode;
    a->cur_flags = opcode >= VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE &&
                   opcode <= VSRIOV_ADMIN_CMD_RESOURCE_OBJ_DESTROY ?
                   ldq_le_p(data + 8) : 0;
    trace_vsriov_admin_cmd(DEVICE(vpf->pf)->id, opcode, a->cur_flags, member);

    if (group >= GROUPS) {
        s = st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_GROUP);
        goto out;
    }
    if (!admin_enabled(a, group, opcode)) {
        s = st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_OPCODE);
        goto out;
    }

    /* commands about a group type or the PF, VF Enable set or not */
    switch (opcode) {
    case VIRTIO_ADMIN_CMD_LIST_QUERY:
        stq_le_p(result, admin_supported(a, group));
        rlen = 8;
        goto out;
    case VIRTIO_ADMIN_CMD_LIST_USE: {
        /* (the words after the first name no command of ours) */
        uint64_t use = ldq_le_p(data);

        if (use & ~admin_supported(a, group)) {
            s = st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_FIELD);
        } else {
            a->used[group] = use;
        }
        goto out;
    }
    case VIRTIO_ADMIN_CMD_CAP_ID_LIST_QUERY:
        QEMU_BUILD_BUG_ON(VSRIOV_NET_FF_RESOURCE_CAP / 64 !=
                          VSRIOV_NET_MEMBER_CFG_CAP / 64);
        stq_le_p(result + VSRIOV_NET_MEMBER_CFG_CAP / 64 * 8,
                 1ull << (VSRIOV_NET_MEMBER_CFG_CAP % 64) |
                 (vpf->esw ? 1ull << (VSRIOV_NET_ESWITCH_CAP % 64) |
                             vsriov_flow_cap_ids() : 0));
        rlen = AVQ_RESULT_MAX;
        goto out;
    case VIRTIO_ADMIN_CMD_DEVICE_CAP_GET:
        if (lduw_le_p(data) == VSRIOV_NET_ESWITCH_CAP && vpf->esw) {
            vsriov_eswitch_cap(vpf->esw, (void *)result);
            rlen = sizeof(struct vsriov_net_eswitch_cap);
        } else if (vpf->flows &&
                   lduw_le_p(data) >= VSRIOV_NET_FF_RESOURCE_CAP &&
                   lduw_le_p(data) <= VSRIOV_NET_FF_ACTION_CAP) {
            rlen = vsriov_flow_cap_get(vpf->flows, lduw_le_p(data), result);
        } else if (lduw_le_p(data) != VSRIOV_NET_MEMBER_CFG_CAP) {
            s = st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_FIELD);
        } else {
            member_cfg_cap(vpf, (void *)result);
            rlen = sizeof(struct vsriov_net_member_cfg_cap);
        }
        goto out;
    case VIRTIO_ADMIN_CMD_DRIVER_CAP_SET: {
        struct vsriov_net_member_cfg_cap dev, *drv = (void *)(data + 8);

        if (lduw_le_p(data) == VSRIOV_NET_ESWITCH_CAP && vpf->esw) {
            s = admin_eswitch_cap_set(a, (void *)(data + 8));
            goto out;
        }
        if (vpf->flows && lduw_le_p(data) >= VSRIOV_NET_FF_RESOURCE_CAP &&
            lduw_le_p(data) <= VSRIOV_NET_FF_ACTION_CAP) {
            if (vsriov_flow_cap_set(vpf->flows, lduw_le_p(data), data + 8,
                                    AVQ_DATA_MAX - 8)) {
                s = st(VSRIOV_ADMIN_STATUS_EINVAL,
                       VSRIOV_ADMIN_Q_INVALID_FIELD);
            }
            goto out;
        }

        member_cfg_cap(vpf, &dev);
        /* the driver may only take less than the device offers */
        if (lduw_le_p(data) != VSRIOV_NET_MEMBER_CFG_CAP ||
            (drv->supported_fields & ~dev.supported_fields) ||
            (drv->vlan_protos & ~dev.vlan_protos) ||
            le32_to_cpu(drv->max_tx_rate) > le32_to_cpu(dev.max_tx_rate)) {
            s = st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_FIELD);
        } else {
            a->driver_cap = *drv;
            a->member_cap_set = true;
        }
        goto out;
    }
    case VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY:
        if (group == VIRTIO_ADMIN_GROUP_TYPE_SRIOV) {
            break;  /* a member's configuration object, below */
        }
        /* fall through */
    case VSRIOV_ADMIN_CMD_RESOURCE_OBJ_CREATE:
    case VSRIOV_ADMIN_CMD_RESOURCE_OBJ_DESTROY:
        if (member) {
            s = st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_MEMBER);
        } else if (admin_resource_obj(a, opcode, data, &s, result, &rlen)) {
            return true;    /* admin_obj_done(), admin_flow_done() */
        }
        goto out;
    case VSRIOV_ADMIN_CMD_SRIOV_MEMBERS_PREPARE: {
        uint16_t num_vfs = lduw_le_p(data);

        if (member) {
            s = st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_MEMBER);
        } else if (vsriov_pf_enabled_vfs(vpf) ||
                   pci_get_word(vpf->pf->config + vpf->sriov_cap +
                                PCI_SRIOV_CTRL) & PCI_SRIOV_CTRL_VFE) {
            s = st(VSRIOV_ADMIN_STATUS_EINVAL,
                   VSRIOV_ADMIN_Q_INVALID_COMMAND);
        } else if (num_vfs > vpf->num_vfs) {
            s = st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_FIELD);
        } else {
            ret = vsriov_pf_stage_vfs(vpf, num_vfs, admin_prepared,
                                      (void *)(uintptr_t)a->gen);
            if (ret > 0) {
                return true;    /* admin_prepared() */
            }
            s = status_of(ret);
        }
        goto out;
    }
    }

    /* commands about one member: VF Enable set, 1..NumVFs */
    enabled = vsriov_pf_enabled_vfs(vpf);
    if (!enabled) {
        s = st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_GROUP);
        goto out;
    }
    if (member < 1 || member > enabled) {
        s = st(VSRIOV_ADMIN_STATUS_EINVAL, VSRIOV_ADMIN_Q_INVALID_MEMBER);
        goto out;
    }
    /* (RESOURCE_OBJ_QUERY or _MODIFY: the SR-IOV group has no other) */
    if (admin_member_obj(a, opcode, member - 1, data, &s, result, &rlen)) {
        return true;    /* admin_set_done() */
    }
out:
    admin_complete(a, elem, s, result, rlen);
    return false;
}

/* A held answer goes to the driver now; the queue goes on. */
static void admin_delay_timer(void *opaque)
{
    VsriovAdmin *a = opaque;

    if (a->delayed && a->cur) {
        admin_complete(a, g_steal_pointer(&a->cur), a->held.s,
                       a->held.result, a->held.len);
        qemu_bh_schedule(a->bh);
    }
}

/* Run what the driver queued, in order, a batch per iteration. */
static void admin_bh(void *opaque)
{
    VsriovAdmin *a = opaque;

    for (int n = 0; !a->cur; n++) {
        VirtQueueElement *elem;

        if (n == AVQ_BATCH) {
            qemu_bh_schedule(a->bh);
            return;
        }
        elem = virtqueue_pop(a->vq, sizeof(VirtQueueElement));
        if (!elem) {
            return;
        }
        if (admin_run_one(a, elem)) {
            a->cur = elem;
        }
    }
}

/* Each PF's queue state, by its virtio device (the queue's handlers get it). */
static GHashTable *admins;

static VsriovAdmin *admin_of(VirtIODevice *vdev)
{
    return admins ? g_hash_table_lookup(admins, vdev) : NULL;
}

/*
 * Whether the command in @elem only reads or records what QEMU holds (no
 * provider, no I/O), so that it may be answered in the notification.
 */
static bool admin_quick(VirtQueueElement *elem)
{
    struct virtio_admin_cmd_hdr hdr = {};

    uint64_t flags = 0;

    iov_to_buf(elem->out_sg, elem->out_num, 0, &hdr, sizeof(hdr));
    switch (le16_to_cpu(hdr.opcode)) {
    case VIRTIO_ADMIN_CMD_LIST_QUERY:
    case VIRTIO_ADMIN_CMD_LIST_USE:
    case VIRTIO_ADMIN_CMD_CAP_ID_LIST_QUERY:
    case VIRTIO_ADMIN_CMD_DEVICE_CAP_GET:
    case VIRTIO_ADMIN_CMD_DRIVER_CAP_SET:
        return true;
    case VSRIOV_ADMIN_CMD_RESOURCE_OBJ_QUERY:
        /* a member's configuration (its counters come from the backend) */
        iov_to_buf(elem->out_sg, elem->out_num, sizeof(hdr) + 8, &flags,
                   sizeof(flags));
        return le16_to_cpu(hdr.group_type) == VIRTIO_ADMIN_GROUP_TYPE_SRIOV &&
               !le64_to_cpu(flags);
    }
    return false;
}

/*
 * The driver's notification (a vCPU's, under TCG).  The commands at the
 * head of the queue that need no provider and no I/O are answered here,
 * as a config read would be (a driver that reads each VF's configuration
 * sleeps until each is answered); from the
 * first other one on, the main loop runs them (admin_bh), in order.
 */
static void admin_handle(VirtIODevice *vdev, VirtQueue *vq)
{
    VsriovAdmin *a = admin_of(vdev);

    if (!a) {
        return;
    }
    for (int n = 0; !a->cur && n < AVQ_BATCH; n++) {
        VirtQueueElement *elem = virtqueue_pop(vq, sizeof(VirtQueueElement));

        if (!elem) {
            return;
        }
        if (!admin_quick(elem)) {
            virtqueue_unpop(vq, elem, 0);
            g_free(elem);
            break;
        }
        admin_run_one(a, elem);     /* (answered: it never waits) */
    }
    qemu_bh_schedule(a->bh);
}

/* The queue is reset: the driver takes back what it queued. */
static void admin_reset(VirtIODevice *vdev, VirtQueue *vq)
{
    VsriovAdmin *a = admin_of(vdev);

    if (!a) {
        return;
    }
    a->gen++;
    a->delayed = false;
    timer_del(a->delay_timer);
    if (a->cur) {
        virtqueue_detach_element(vq, a->cur, 0);
        g_free(a->cur);
        a->cur = NULL;
    }
    for (int g = 0; g < GROUPS; g++) {
        a->used[g] = 1ull << VIRTIO_ADMIN_CMD_LIST_QUERY |
                     1ull << VIRTIO_ADMIN_CMD_LIST_USE;
    }
    member_cfg_cap(a->vpf, &a->driver_cap);
    a->member_cap_set = false;
    if (a->vpf->esw) {
        struct vsriov_net_eswitch_cap c;

        vsriov_eswitch_cap(a->vpf->esw, &c);
        a->esw_limit = le32_to_cpu(c.eswitch_limit);
        a->rep_limit = le32_to_cpu(c.rep_limit);
        if (!vdev->status) {
            /* a reset of the device (not of this queue alone): legacy */
            vsriov_flow_reset(a->vpf->flows);
            vsriov_eswitch_reset(a->vpf->esw);
        }
    }
}

/*
 * Commands the driver queued while the VM stopped, e.g. the last ones on a
 * migration's source, run when it runs (on the destination).
 */
static void admin_vm_state(void *opaque, bool running, RunState state)
{
    VsriovAdmin *a = opaque;

    if (running) {
        qemu_bh_schedule(a->bh);
        return;
    }
    /*
     * The VM stops (a migration's switch-over, or any stop): the command
     * that waits for its provider (or whose answer is held) goes back to
     * the queue, and runs again when the VM runs, here or on a migration's
     * destination, which applies the whole configuration anyway.  The
     * provider's late answer to it is dropped (gen).  So a guest that
     * keeps a command in flight cannot hold its VM's migration.
     */
    if (a->cur) {
        trace_vsriov_admin_requeued(DEVICE(a->vpf->pf)->id, a->cur_opcode);
        virtqueue_unpop(a->vq, a->cur, 0);
        g_free(a->cur);
        a->cur = NULL;
        a->gen++;
        a->delayed = false;
        timer_del(a->delay_timer);
    }
}

/*
 * Migration: what LIST_USE and DRIVER_CAP_SET set (the queue itself is the
 * device's: qemu-patches/0012).  A command that waits for the provider
 * cannot move: its answer would come to the source.
 */
static bool admin_pre_save(void *opaque, Error **errp)
{
    VsriovAdmin *a = opaque;

    /* (the VM stopped first: a command in flight went back to the queue) */
    if (a->cur) {
        error_setg(errp, "virtual SR-IOV PF '%s': an administration command "
                   "is in flight while the VM runs", DEVICE(a->vpf->pf)->id);
        return false;
    }
    return true;
}

static bool admin_post_load(void *opaque, int version_id, Error **errp)
{
    VsriovAdmin *a = opaque;
    struct vsriov_net_member_cfg_cap dev;
    const struct vsriov_net_member_cfg_cap *drv = &a->driver_cap;

    member_cfg_cap(a->vpf, &dev);
    for (int g = 0; g < GROUPS; g++) {
        if (a->used[g] & ~admin_supported(a, g)) {
            error_setg(errp, "virtual SR-IOV PF '%s': incoming commands in "
                       "use 0x%" PRIx64 " for group type %d, of 0x%" PRIx64,
                       DEVICE(a->vpf->pf)->id, a->used[g], g,
                       admin_supported(a, g));
            return false;
        }
    }
    if ((drv->supported_fields & ~dev.supported_fields) ||
        (drv->vlan_protos & ~dev.vlan_protos) ||
        le32_to_cpu(drv->max_tx_rate) > le32_to_cpu(dev.max_tx_rate)) {
        error_setg(errp, "virtual SR-IOV PF '%s': the incoming driver "
                   "capability exceeds what this device offers (a different "
                   "speed?)", DEVICE(a->vpf->pf)->id);
        return false;
    }
    return true;
}

static bool admin_esw_needed(void *opaque)
{
    VsriovAdmin *a = opaque;

    return a->vpf->esw;
}

static bool admin_esw_post_load(void *opaque, int version_id, Error **errp)
{
    VsriovAdmin *a = opaque;
    struct vsriov_net_eswitch_cap dev;

    vsriov_eswitch_cap(a->vpf->esw, &dev);
    if (a->esw_limit > le32_to_cpu(dev.eswitch_limit) ||
        a->rep_limit > le32_to_cpu(dev.rep_limit)) {
        error_setg(errp, "virtual SR-IOV PF '%s': the incoming eswitch "
                   "capability exceeds what this device offers",
                   DEVICE(a->vpf->pf)->id);
        return false;
    }
    return true;
}

static bool admin_member_cap_needed(void *opaque)
{
    VsriovAdmin *a = opaque;

    return a->member_cap_set;
}

/* The driver set the net member capability: its objects are usable. */
static const VMStateDescription vmstate_vsriov_admin_member_cap = {
    .name = "vsriov-admin/member-cap",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = admin_member_cap_needed,
    .fields = (const VMStateField[]) {
        VMSTATE_BOOL(member_cap_set, VsriovAdmin),
        VMSTATE_END_OF_LIST()
    }
};

/* The eswitch capability as the driver set it (DRIVER_CAP_SET). */
static const VMStateDescription vmstate_vsriov_admin_esw = {
    .name = "vsriov-admin/eswitch",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = admin_esw_needed,
    .post_load_errp = admin_esw_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(esw_limit, VsriovAdmin),
        VMSTATE_UINT32(rep_limit, VsriovAdmin),
        VMSTATE_END_OF_LIST()
    }
};

static const VMStateDescription vmstate_vsriov_admin = {
    .name = "vsriov-admin",
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_save_errp = admin_pre_save,
    .post_load_errp = admin_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64_ARRAY(used, VsriovAdmin, GROUPS),
        VMSTATE_BUFFER_UNSAFE(driver_cap, VsriovAdmin, 0,
                              sizeof(struct vsriov_net_member_cfg_cap)),
        VMSTATE_END_OF_LIST()
    },
    .subsections = (const VMStateDescription * const []) {
        &vmstate_vsriov_admin_esw,
        &vmstate_vsriov_admin_member_cap,
        NULL
    }
};

/* testing: x-sriov-admin-hold, set on a running VM (qom-set) */
static void admin_get_hold(Object *obj, Visitor *v, const char *name,
                           void *opaque, Error **errp)
{
    VsriovAdmin *a = opaque;
    bool hold = a->hold;

    visit_type_bool(v, name, &hold, errp);
}

static void admin_set_hold(Object *obj, Visitor *v, const char *name,
                           void *opaque, Error **errp)
{
    VsriovAdmin *a = opaque;
    bool hold;

    if (!visit_type_bool(v, name, &hold, errp)) {
        return;
    }
    a->hold = hold;
    if (!hold && a->delayed) {
        admin_delay_timer(a);   /* the held answer goes now */
    }
}

void vsriov_admin_init(VsriovPF *vpf)
{
    VsriovAdmin *a = g_new0(VsriovAdmin, 1);

    a->vpf = vpf;
    a->vdev = virtio_bus_get_device(&VIRTIO_PCI(vpf->pf)->bus);
    a->bh = aio_bh_new(iohandler_get_aio_context(), admin_bh, a);
    a->delay_timer = timer_new_ms(QEMU_CLOCK_REALTIME, admin_delay_timer, a);
    vpf->admin = a;
    if (!admins) {
        admins = g_hash_table_new(NULL, NULL);
    }
    g_hash_table_insert(admins, a->vdev, a);
    a->vq = virtio_add_admin_queue(a->vdev, AVQ_SIZE, admin_handle,
                                   admin_reset);
    admin_reset(a->vdev, a->vq);
    a->vm_state = qemu_add_vm_change_state_handler(admin_vm_state, a);
    vmstate_register(VMSTATE_IF(vpf->pf), 0, &vmstate_vsriov_admin, a);
    object_property_add(OBJECT(vpf->pf), "x-sriov-admin-hold", "bool",
                        admin_get_hold, admin_set_hold, NULL, a);
}

void vsriov_admin_exit(VsriovPF *vpf)
{
    VsriovAdmin *a = vpf->admin;

    if (!a) {
        return;
    }
    object_property_del(OBJECT(vpf->pf), "x-sriov-admin-hold");
    vmstate_unregister(VMSTATE_IF(vpf->pf), &vmstate_vsriov_admin, a);
    qemu_del_vm_change_state_handler(a->vm_state);
    admin_reset(a->vdev, a->vq);
    virtio_delete_queue(a->vq);
    virtio_clear_feature(&a->vdev->host_features, VIRTIO_F_ADMIN_VQ);
    qemu_bh_delete(a->bh);
    timer_free(a->delay_timer);
    g_hash_table_remove(admins, a->vdev);
    vpf->admin = NULL;
    g_free(a);
}
