/*
 * vsriov eswitch: switchdev mode of a virtual PF, and its VF representors
 *
 * With sriov-eswitch=on the PF offers VIRTIO_NET_F_ESWITCH and has, right
 * after virtio-net's control queue, one queue pair per VF it can have: the
 * representor queues (docs/switchdev.md, docs/virtio-spec/).  Its driver
 * switches the PF to switchdev mode by creating the eswitch resource
 * object, and gives VF n a representor by creating a representor object
 * that names the member and a queue pair; destroying them, or a reset of
 * the PF, goes back to legacy mode.
 *
 * A representor's queue pair is connected to a host network backend that
 * the VF's pool names for that VF (a static pool's rep-netdevs): what the
 * driver sends on the representor leaves through that backend, what the
 * backend delivers arrives on the representor.  That the VF's own traffic
 * reaches that backend is the host switch's part (the pool's provider, or
 * the operator's switch for a static pool): QEMU never sees a VF's data
 * path, which runs in its backend (vhost-vdpa).
 *
 * Representor queues are QEMU's own whatever the PF's backend is (like the
 * administration queue): frames are copied in the main loop, at most
 * REP_BATCH per queue and notification, the rest in a bottom half; a
 * receive queue without buffers holds the backend back (can_receive), and
 * what cannot be delivered is counted and dropped, never waited for.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/iov.h"
#include "qemu/main-loop.h"
#include "qapi/error.h"
#include "migration/vmstate.h"
#include "hw/virtio/virtio.h"
#include "hw/virtio/virtio-net.h"
#include "hw/virtio/virtio-pci.h"
#include "net/net.h"
#include "standard-headers/linux/virtio_net.h"
#include "vsriov.h"
#include "eswitch.h"
#include "trace.h"

#define REP_QUEUE_SIZE  256
/* frames moved per queue and notification; the rest in a bottom half */
#define REP_BATCH       64
/* the header before every frame on a representor queue */
#define REP_HDR_LEN     sizeof(struct virtio_net_hdr_v1)

/* A pool's rep_open in flight. */
typedef struct RepOpen {
    VsriovESwitch *esw;     /* NULL: the eswitch went meanwhile */
    VsriovPool *pool;
    uint16_t id;
    uint32_t gen;           /* the representor's when it was asked */
    char *backend;          /* the VF's backend, the pool's key */
    VsriovESwitchDone *done;    /* NULL: nobody waits (a migration's) */
    void *opaque;
    QLIST_ENTRY(RepOpen) next;
} RepOpen;

/* One representor object: its queue pair and the VF it represents. */
typedef struct VsriovRep {
    VsriovESwitch *esw;
    uint16_t id;            /* the object's id: its queue pair */
    int32_t vf;             /* -1: no object with this id */
    bool opening;           /* its host side is asked for (RepOpen) */
    uint32_t gen;           /* bumped when the object goes */
    VirtQueue *rx, *tx;
    NICState *nic;          /* peer: the pool's backend for the VF's */
    NICConf conf;           /* (nic's: it keeps a pointer) */
    char *netdev;           /* ... whose id */
    char *backend;          /* the VF's backend when it was opened */
    VsriovRepStats st;
    /* a rep_open answered within the call: its outcome */
    bool in_open;
    int open_ret;
    Error *open_err;
} VsriovRep;

struct VsriovESwitch {
    VsriovPF *vpf;
    VirtIODevice *vdev;
    bool switchdev;         /* the eswitch object exists */
    uint16_t nreps;         /* representor objects possible: TotalVFs */
    uint16_t base;          /* index of representor 0's receive queue */
    VsriovRep *reps;
    QEMUBH *bh;             /* transmit queues with frames left */
    MemReentrancyGuard guard;
    QLIST_HEAD(, RepOpen) opens;    /* rep_open calls in flight */
};

/* Each PF's eswitch, by its virtio device (the queues' handlers get it). */
static GHashTable *eswitches;
/* rep_open calls of eswitches gone, until they are answered */
static QLIST_HEAD(, RepOpen) orphans = QLIST_HEAD_INITIALIZER(orphans);

static VsriovRep *rep_of(VirtIODevice *vdev, VirtQueue *vq)
{
    VsriovESwitch *esw = eswitches ? g_hash_table_lookup(eswitches, vdev)
                                   : NULL;
    unsigned q;

    if (!esw) {
        return NULL;
    }
    q = virtio_get_queue_index(vq) - esw->base;
    return q / 2 < esw->nreps ? &esw->reps[q / 2] : NULL;
}

/* Whether the VF rep represents exists now (VF Enable, 1..NumVFs). */
static bool rep_member_exists(VsriovRep *rep)
{
    return rep->vf >= 0 && rep->vf < vsriov_pf_enabled_vfs(rep->esw->vpf);
}

static bool rep_queue_ready(VsriovRep *rep, VirtQueue *vq)
{
    return rep->esw->vdev->status & VIRTIO_CONFIG_S_DRIVER_OK &&
           virtio_queue_ready(vq);
}

/*
 * Frames the driver sent on rep's transmit queue go to the backend, at
 * most REP_BATCH: true if frames are left.
 */
static bool rep_flush_tx(VsriovRep *rep)
{
    VirtIODevice *vdev = rep->esw->vdev;
    unsigned n;

    if (!rep_queue_ready(rep, rep->tx)) {
        return false;
    }
    for (n = 0; n < REP_BATCH; n++) {
        VirtQueueElement *elem = virtqueue_pop(rep->tx,
                                               sizeof(VirtQueueElement));
        g_autofree struct iovec *iov = NULL;
        size_t len;
        unsigned cnt;

        if (!elem) {
            break;
        }
        len = iov_size(elem->out_sg, elem->out_num);
        iov = g_new(struct iovec, elem->out_num);
        cnt = iov_copy(iov, elem->out_num, elem->out_sg, elem->out_num,
                       REP_HDR_LEN, len);
        if (len <= REP_HDR_LEN || elem->in_num || !rep->nic ||
            !rep_member_exists(rep)) {
            rep->st.tx_dropped++;
        } else {
            /* (queued by the net layer if the backend is busy: copied) */
            qemu_sendv_packet(qemu_get_queue(rep->nic), iov, cnt);
            rep->st.tx_packets++;
            rep->st.tx_bytes += len - REP_HDR_LEN;
        }
        virtqueue_push(rep->tx, elem, 0);
        g_free(elem);
    }
    virtio_notify(vdev, rep->tx);
    return n == REP_BATCH;
}

static void rep_bh(void *opaque)
{
    VsriovESwitch *esw = opaque;
    bool more = false;

    for (unsigned i = 0; i < esw->nreps; i++) {
        more |= rep_flush_tx(&esw->reps[i]);
    }
    if (more) {
        qemu_bh_schedule(esw->bh);
    }
}

static void rep_handle_tx(VirtIODevice *vdev, VirtQueue *vq)
{
    VsriovRep *rep = rep_of(vdev, vq);

    if (rep && rep_flush_tx(rep)) {
        qemu_bh_schedule(rep->esw->bh);
    }
}

/* The driver gave receive buffers: what the backend holds comes now. */
static void rep_handle_rx(VirtIODevice *vdev, VirtQueue *vq)
{
    VsriovRep *rep = rep_of(vdev, vq);

    if (rep && rep->nic) {
        qemu_flush_queued_packets(qemu_get_queue(rep->nic));
    }
}

static bool rep_can_receive(NetClientState *nc)
{
    VsriovRep *rep = qemu_get_nic_opaque(nc);

    /* (not ready, or no member: taken and dropped by rep_receive) */
    return !rep_queue_ready(rep, rep->rx) || !rep_member_exists(rep) ||
           !virtio_queue_empty(rep->rx);
}

static ssize_t rep_receive(NetClientState *nc, const uint8_t *buf,
                           size_t size)
{
    VsriovRep *rep = qemu_get_nic_opaque(nc);
    struct virtio_net_hdr_v1 hdr = {
        .gso_type = VIRTIO_NET_HDR_GSO_NONE,
        .num_buffers = cpu_to_le16(1),
    };
    VirtQueueElement *elem;

    if (!rep_queue_ready(rep, rep->rx) || !rep_member_exists(rep)) {
        rep->st.rx_dropped++;
        return size;
    }
    elem = virtqueue_pop(rep->rx, sizeof(VirtQueueElement));
    if (!elem) {
        return 0;   /* held until rep_handle_rx() */
    }
    if (elem->out_num ||
        iov_size(elem->in_sg, elem->in_num) < REP_HDR_LEN + size) {
        /* a buffer too small for the frame: the frame goes */
        virtqueue_push(rep->rx, elem, 0);
        g_free(elem);
        virtio_notify(rep->esw->vdev, rep->rx);
        rep->st.rx_dropped++;
        return size;
    }
    iov_from_buf(elem->in_sg, elem->in_num, 0, &hdr, REP_HDR_LEN);
    iov_from_buf(elem->in_sg, elem->in_num, REP_HDR_LEN, buf, size);
    virtqueue_push(rep->rx, elem, REP_HDR_LEN + size);
    g_free(elem);
    virtio_notify(rep->esw->vdev, rep->rx);
    rep->st.rx_packets++;
    rep->st.rx_bytes += size;
    return size;
}

static NetClientInfo rep_info = {
    .type = NET_CLIENT_DRIVER_NIC,
    .size = sizeof(NICState),
    .can_receive = rep_can_receive,
    .receive = rep_receive,
};

/*
 * rep's object goes: its host side is given back to the pool (a static
 * pool's backend is left without a peer, for the next); an open in flight
 * is dropped when it is answered.
 */
static void rep_unbind(VsriovRep *rep)
{
    if (rep->nic) {
        qemu_del_nic(rep->nic);
        rep->nic = NULL;
    }
    if (rep->netdev) {
        vsriov_pool_rep_close(rep->esw->vpf->pool, rep->backend, rep->netdev);
    }
    g_clear_pointer(&rep->netdev, g_free);
    g_clear_pointer(&rep->backend, g_free);
    rep->vf = -1;
    rep->opening = false;
    rep->gen++;
    memset(&rep->st, 0, sizeof(rep->st));
}

/* Connect rep's queues to netdev @id, the pool's for its VF. */
static int rep_attach(VsriovRep *rep, const char *id, Error **errp)
{
    VsriovPF *vpf = rep->esw->vpf;
    g_autofree char *name = NULL;
    NetClientState *peer = qemu_find_netdev(id);

    if (!peer || peer->info->type == NET_CLIENT_DRIVER_NIC || peer->peer) {
        error_setg(errp, "representor backend '%s' of VF %d %s", id, rep->vf,
                   !peer ? "does not exist" : "is in use");
        return -ENOSPC;
    }
    memset(&rep->conf, 0, sizeof(rep->conf));
    rep->conf.peers.ncs[0] = peer;
    rep->conf.peers.queues = 1;
    vsriov_vf_default_mac(vpf, rep->vf, &rep->conf.macaddr);
    name = g_strdup_printf("%s.rep%d", DEVICE(vpf->pf)->id ?: "vsriov",
                           rep->vf);
    rep->nic = qemu_new_nic(&rep_info, &rep->conf, "vsriov-rep", name,
                            &rep->esw->guard, rep);
    rep->netdev = g_strdup(id);
    memset(&rep->st, 0, sizeof(rep->st));
    return 0;
}

/* The pool answered rep_open (within the call, or later). */
static void rep_opened(void *opaque, const char *netdev, int ret, Error *err)
{
    RepOpen *o = opaque;
    VsriovESwitch *esw = o->esw;
    VsriovRep *rep = esw ? &esw->reps[o->id] : NULL;

    QLIST_REMOVE(o, next);
    if (!rep || !rep->opening || rep->gen != o->gen) {
        /* the object (or the PF) went meanwhile: give it back */
        if (!ret) {
            vsriov_pool_rep_close(o->pool, o->backend, netdev);
        }
        error_free(err);
        goto out;
    }
    rep->opening = false;
    if (!ret) {
        ret = rep_attach(rep, netdev, &err);
        if (ret) {
            vsriov_pool_rep_close(o->pool, o->backend, netdev);
        }
    }
    if (ret) {
        rep_unbind(rep);
    } else {
        trace_vsriov_eswitch_rep(DEVICE(esw->vpf->pf)->id, o->id, rep->vf,
                                 rep->netdev);
        /* what the driver queued before the object existed goes now */
        qemu_bh_schedule(esw->bh);
    }
    if (rep->in_open) {
        rep->open_ret = ret;
        rep->open_err = err;
        goto out;
    }
    if (err) {
        error_prepend(&err, "virtual SR-IOV PF '%s': representor %u: ",
                      DEVICE(esw->vpf->pf)->id, o->id);
        vsriov_report_guest_err(err);
    }
    if (o->done && !o->done(esw, ret, o->opaque) && !ret) {
        rep_unbind(rep);    /* nobody wants it any more */
    }
out:
    g_free(o->backend);
    g_free(o);
}

/*
 * Ask the pool for the host side of rep's VF: 0 or a negative errno
 * (@errp set) when it answered at once, 1 when @done will say.
 */
static int rep_open(VsriovRep *rep, VsriovESwitchDone *done, void *opaque,
                    Error **errp)
{
    VsriovESwitch *esw = rep->esw;
    NetClientState *backend = esw->vpf->backends[rep->vf];
    RepOpen *o = g_new0(RepOpen, 1);

    o->esw = esw;
    o->pool = esw->vpf->pool;
    o->id = rep->id;
    o->gen = rep->gen;
    o->done = done;
    o->opaque = opaque;
    o->backend = g_strdup(backend ? backend->name : "");
    rep->backend = g_strdup(o->backend);
    rep->opening = true;
    QLIST_INSERT_HEAD(&esw->opens, o, next);
    rep->in_open = true;
    rep->open_ret = 1;
    vsriov_pool_rep_open(esw->vpf->pool, backend, rep_opened, o);
    rep->in_open = false;
    if (rep->open_err) {
        error_propagate(errp, rep->open_err);
        rep->open_err = NULL;
    }
    return rep->open_ret;
}

int vsriov_eswitch_create(VsriovESwitch *esw, uint16_t type, uint32_t id,
                          const void *data, size_t len,
                          VsriovESwitchDone *done, void *opaque, Error **errp)
{
    const struct vsriov_net_resource_obj_rep *r = data;
    VsriovRep *rep;
    uint32_t member;

    if (!virtio_has_feature_ex(esw->vdev->guest_features_ex,
                               VSRIOV_NET_F_ESWITCH)) {
        return -EOPNOTSUPP;     /* no representor queues for the driver */
    }
    if (type == VSRIOV_NET_RESOURCE_OBJ_ESWITCH) {
        if (id != 0 || len < 8 || ldq_le_p(data)) {
            return -EINVAL;     /* (its 8 reserved bytes are zeros) */
        }
        if (esw->switchdev) {
            return -EEXIST;
        }
        esw->switchdev = true;
        trace_vsriov_eswitch_mode(DEVICE(esw->vpf->pf)->id, true);
        return 0;
    }
    if (type != VSRIOV_NET_RESOURCE_OBJ_REP || len < sizeof(*r)) {
        return -EINVAL;
    }
    member = le32_to_cpu(r->member_id);
    if (id >= esw->nreps || r->eswitch_id || r->reserved ||
        r->reserved2 || !esw->switchdev) {
        return -EINVAL;
    }
    if (!vsriov_pf_enabled_vfs(esw->vpf)) {
        return -EBUSY;      /* VF Enable is clear */
    }
    if (member < 1 || member > vsriov_pf_enabled_vfs(esw->vpf)) {
        return -ENODEV;
    }
    for (unsigned i = 0; i < esw->nreps; i++) {
        if (esw->reps[i].vf == member - 1) {
            return -EEXIST;
        }
    }
    rep = &esw->reps[id];
    if (rep->vf >= 0) {
        return -EEXIST;
    }
    rep->vf = member - 1;
    return rep_open(rep, done, opaque, errp);
}

int vsriov_eswitch_destroy(VsriovESwitch *esw, uint16_t type, uint32_t id)
{
    if (type == VSRIOV_NET_RESOURCE_OBJ_ESWITCH) {
        if (id != 0) {
            return -EINVAL;
        }
        if (!esw->switchdev) {
            return -ENOENT;
        }
        for (unsigned i = 0; i < esw->nreps; i++) {
            if (esw->reps[i].vf >= 0) {
                return -EBUSY;  /* the representors go first */
            }
        }
        esw->switchdev = false;
        trace_vsriov_eswitch_mode(DEVICE(esw->vpf->pf)->id, false);
        return 0;
    }
    if (type != VSRIOV_NET_RESOURCE_OBJ_REP) {
        return -EINVAL;
    }
    if (id >= esw->nreps || esw->reps[id].vf < 0) {
        return -ENOENT;
    }
    trace_vsriov_eswitch_rep(DEVICE(esw->vpf->pf)->id, id, -1, "");
    rep_unbind(&esw->reps[id]);
    return 0;
}

void vsriov_eswitch_cap(VsriovESwitch *esw, struct vsriov_net_eswitch_cap *c)
{
    memset(c, 0, sizeof(*c));
    c->eswitch_limit = cpu_to_le32(1);
    c->rep_limit = cpu_to_le32(esw->nreps);
}

void vsriov_eswitch_reset(VsriovESwitch *esw)
{
    for (unsigned i = 0; i < esw->nreps; i++) {
        if (esw->reps[i].vf >= 0 || esw->reps[i].opening) {
            rep_unbind(&esw->reps[i]);
        }
    }
    if (esw->switchdev) {
        esw->switchdev = false;
        trace_vsriov_eswitch_mode(DEVICE(esw->vpf->pf)->id, false);
    }
}

bool vsriov_eswitch_switchdev(VsriovESwitch *esw)
{
    return esw->switchdev;
}

VsriovPF *vsriov_eswitch_pf(VsriovESwitch *esw)
{
    return esw->vpf;
}

bool vsriov_eswitch_rep_vf(VsriovESwitch *esw, uint32_t id, uint16_t *vf)
{
    if (id >= esw->nreps || esw->reps[id].vf < 0) {
        return false;
    }
    *vf = esw->reps[id].vf;
    return true;
}

bool vsriov_eswitch_vf_rep(VsriovESwitch *esw, uint16_t vf, uint16_t *id,
                           const char **netdev, VsriovRepStats *st)
{
    for (unsigned i = 0; i < esw->nreps; i++) {
        VsriovRep *rep = &esw->reps[i];

        if (rep->vf == vf) {
            *id = rep->id;
            *netdev = rep->netdev;  /* (NULL while it is opened) */
            *st = rep->st;
            return true;
        }
    }
    return false;
}

/*
 * Migration: the mode and which VF each representor object has; the
 * queues themselves migrate with the virtio device.  The destination
 * connects each representor to its own pool's backend for that VF.
 */
static int esw_pre_load(void *opaque)
{
    vsriov_eswitch_reset(opaque);
    return 0;
}

static bool esw_post_load(void *opaque, int version_id, Error **errp)
{
    VsriovESwitch *esw = opaque;

    for (unsigned i = 0; i < esw->nreps; i++) {
        VsriovRep *rep = &esw->reps[i];
        int32_t vf = rep->vf;

        if (vf < 0) {
            continue;
        }
        rep->vf = -1;
        if (vf >= esw->vpf->num_vfs || !esw->switchdev) {
            error_setg(errp, "representor %u of VF %d: not on this PF", i,
                       vf);
            return false;
        }
        /* (a provider that answers later connects it then, or says why) */
        rep->vf = vf;
        if (rep_open(rep, NULL, NULL, errp) < 0) {
            error_prepend(errp, "representor %u: ", i);
            return false;
        }
    }
    return true;
}

static const VMStateDescription vmstate_vsriov_rep = {
    .name = "vsriov-rep",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_INT32(vf, VsriovRep),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_vsriov_eswitch = {
    .name = "vsriov-pf/eswitch",
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_load = esw_pre_load,
    .post_load_errp = esw_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_BOOL(switchdev, VsriovESwitch),
        VMSTATE_UINT16_EQUAL(nreps, VsriovESwitch,
                             "the destination's PF must have as many "
                             "representor queues as the source's"),
        VMSTATE_STRUCT_VARRAY_POINTER_UINT16(reps, VsriovESwitch, nreps,
                                             vmstate_vsriov_rep, VsriovRep),
        VMSTATE_END_OF_LIST()
    },
};

VsriovESwitch *vsriov_eswitch_init(VsriovPF *vpf, Error **errp)
{
    VirtIODevice *vdev = virtio_bus_get_device(&VIRTIO_PCI(vpf->pf)->bus);
    VirtIONet *n = VIRTIO_NET(vdev);
    VsriovESwitch *esw;

    if (n->max_queue_pairs != 1) {
        error_setg(errp, "sriov-eswitch=on needs a PF with one queue pair "
                   "(its netdev has %u)", n->max_queue_pairs);
        return NULL;
    }
    if (!virtio_host_has_feature(vdev, VIRTIO_NET_F_CTRL_VQ)) {
        error_setg(errp, "sriov-eswitch=on needs the control queue "
                   "(ctrl_vq=on)");
        return NULL;
    }
    if (!vsriov_pool_has_reps(vpf->pool)) {
        error_setg(errp, "sriov-eswitch=on: pool '%s' gives no representor "
                   "backends (rep-netdevs)",
                   object_get_canonical_path_component(OBJECT(vpf->pool)));
        return NULL;
    }
    /* virtio-net's queues: one pair and the control queue, then ours */
    if (virtio_get_num_queues(vdev) != 3) {
        error_setg(errp, "sriov-eswitch=on: the PF has %d queues, not 3",
                   virtio_get_num_queues(vdev));
        return NULL;
    }
    esw = g_new0(VsriovESwitch, 1);
    esw->vpf = vpf;
    esw->vdev = vdev;
    esw->nreps = vpf->num_vfs;
    esw->base = 3;
    esw->reps = g_new0(VsriovRep, esw->nreps);
    esw->bh = virtio_bh_new_guarded(DEVICE(vdev), rep_bh, esw);
    for (unsigned i = 0; i < esw->nreps; i++) {
        VsriovRep *rep = &esw->reps[i];

        rep->esw = esw;
        rep->id = i;
        rep->vf = -1;
        rep->rx = virtio_add_queue(vdev, REP_QUEUE_SIZE, rep_handle_rx);
        rep->tx = virtio_add_queue(vdev, REP_QUEUE_SIZE, rep_handle_tx);
    }
    if (!eswitches) {
        eswitches = g_hash_table_new(NULL, NULL);
    }
    g_hash_table_insert(eswitches, vdev, esw);
    vmstate_register(VMSTATE_IF(vpf->pf), 0, &vmstate_vsriov_eswitch, esw);
    virtio_add_feature_ex(vdev->host_features_ex, VSRIOV_NET_F_ESWITCH);
    return esw;
}

void vsriov_eswitch_exit(VsriovESwitch *esw)
{
    if (!esw) {
        return;
    }
    vsriov_eswitch_reset(esw);
    while (!QLIST_EMPTY(&esw->opens)) {
        RepOpen *o = QLIST_FIRST(&esw->opens);

        o->esw = NULL;  /* its answer gives back what it gets */
        QLIST_REMOVE(o, next);
        QLIST_INSERT_HEAD(&orphans, o, next);
    }
    vmstate_unregister(VMSTATE_IF(esw->vpf->pf), &vmstate_vsriov_eswitch, esw);
    g_hash_table_remove(eswitches, esw->vdev);
    for (unsigned i = 0; i < esw->nreps; i++) {
        virtio_delete_queue(esw->reps[i].rx);
        virtio_delete_queue(esw->reps[i].tx);
    }
    qemu_bh_delete(esw->bh);
    g_free(esw->reps);
    g_free(esw);
}
