/*
 * vsriov-daemon-pool: VF backends claimed from vdpa-pool-daemon
 *
 * The second provider of the vsriov-pool interface.  When the object is
 * created it connects to the daemon's API socket, claims @count VFs of the
 * daemon's pool @pool (docs/daemon-protocol.md) and receives one
 * vhost-vdpa file descriptor per VF (in CLAIMs of 16 VFs at most: what
 * QIOChannelSocket takes in one message); the first time a virtual PF asks
 * for backends, each descriptor becomes a vhost-vdpa netdev ("<id>.<n>").  The
 * VF configuration the guest sets through its PF (vf-config.c) goes to the
 * daemon, which checks it against the pool's policy and applies it to the
 * datapath.  The connection stays open for the life of the object: when
 * QEMU exits or the object goes, the daemon releases the VFs.
 *
 *   -object vsriov-daemon-pool,id=p0,socket=/run/vdpa-pool-daemon/api.sock,
 *           pool=tenant-a,count=4
 *
 * Created on the command line, the pool claims before QEMU goes on (the
 * guest does not run yet, and a refusal stops QEMU with the daemon's
 * reason).  Added at run time (object-add), it claims from the main
 * loop instead, one CLAIM after the other: object-add returns at once,
 * the pool is "claiming" (query-vsriov-pools) until the answers came,
 * then VSRIOV_POOL_STATE_CHANGED says "ready" or "failed" and why.  A PF
 * realized on it meanwhile has backend-less VFs, which it gets through
 * claim_async when they came, as a lazy pool's; no migration starts
 * meanwhile (a migration blocker).
 *
 * With lazy=on nothing is claimed at creation: the VFs the guest enables
 * are claimed then (claim_async: one CLAIM of one VF each, all sent at
 * once, their netdevs made from the descriptors when every answer came),
 * and released when the guest disables them (the netdev goes, which
 * closes the descriptor, then RELEASE); @count is the most VFs held.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qapi/qapi-commands-net.h"
#include "qapi/qapi-events-vsriov.h"
#include "qapi/qapi-types-net.h"
#include "qapi/visitor.h"
#include "monitor/monitor.h"
#include "qemu/error-report.h"
#include "qemu/main-loop.h"
#include "qemu/timer.h"
#include "qom/object_interfaces.h"
#include "hw/qdev-core.h"
#include "migration/blocker.h"
#include "system/system.h"
#include "net/net.h"
#include "vsriov.h"
#include "daemon-client.h"
#include "trace.h"

#include <sys/socket.h>
#include <sys/un.h>

#define TYPE_VSRIOV_DAEMON_POOL "vsriov-daemon-pool"
OBJECT_DECLARE_SIMPLE_TYPE(VsriovDaemonPool, VSRIOV_DAEMON_POOL)

/*
 * The daemon's wire format (docs/daemon-protocol.md) is the daemon's own
 * code: vpd-wire/ links its protocol.[ch], so both ends build and parse
 * messages with one implementation.
 */
#define VPD_MAX_COUNT       253     /* VFs per pool */
/* descriptors per message: what QIOChannelSocket takes in one read */
#define VPD_RELEASE_TRIES   5       /* a RELEASE that fails is sent again */

/* What a CLAIM answer says of a VF, besides its handle and descriptor. */
typedef struct DaemonVF {
    MACAddr mac;            /* the daemon's MAC for it (zero: none) */
    bool spoofchk;          /* the daemon checks its source MACs */
} DaemonVF;

struct VsriovDaemonPool {
    VsriovPool parent_obj;

    /* properties */
    char *socket;
    char *fd;               /* or a connection passed as a descriptor */
    char *pool;
    uint32_t count;
    bool handover;          /* ask for the connection's hand-over token */

    /* runtime */
    char *id;               /* the object's id (also once unparented) */
    VsriovDaemonClient *client;     /* the connection (daemon-client.c) */
    unsigned claiming;      /* VFs of claim_async calls not done yet */
    GArray *to_release;     /* LateRelease: RELEASEs to send again */
    int *vhost_fds;         /* until they become netdevs */
    uint32_t *handles;      /* the daemon's handle of each VF */
    DaemonVF *vfs;          /* what the daemon said of each VF */
    bool netdevs_created;
    /* the daemon's token for this connection (a migration sends it) */
    uint8_t token[VSRIOV_HANDOVER_SIZE];
    bool has_token;
    /* the migration source's, shown with MACs (mac-handover = token) */
    uint8_t incoming_token[VSRIOV_HANDOVER_SIZE];
    bool has_incoming_token;
    /* a premapped pool added at run time claims in the main loop */
    VsriovPoolState state;
    uint32_t claimed;       /* VFs whose descriptors came so far */
    uint32_t claim_k;       /* ... and how many the CLAIM in flight asks */
    int claim_ret;          /* failed: a negative errno, */
    Error *claim_err;       /* ... and why */
    Error *mig_blocker;     /* while it claims */
    GSList *waiters;        /* PremappedWait: claim_async calls meanwhile */
};

QEMU_BUILD_BUG_ON(VSRIOV_HANDOVER_SIZE != VPD_HANDOVER_SIZE);

static VsriovPoolClass *parent_class;

static const char *dp_id(VsriovDaemonPool *dp)
{
    return dp->id;
}

/* ---- messages ----------------------------------------------------------- */

/* A request of @type; vsriov_daemon_send() gives it its sequence number. */
static struct vpd_builder *msg_new(uint16_t type)
{
    struct vpd_builder *b = g_new(struct vpd_builder, 1);

    vpd_builder_init(b, type, 0);
    return b;
}

/* A CLAIM of @count VFs for @owner (with handover, asking for the token). */
static struct vpd_builder *claim_msg(VsriovDaemonPool *dp, const char *owner,
                                     uint32_t count)
{
    struct vpd_builder *m = msg_new(VPD_MSG_CLAIM);
    static const uint8_t ask[VPD_HANDOVER_SIZE];

    vpd_put_str(m, VPD_A_POOL, dp->pool);
    vpd_put_str(m, VPD_A_OWNER, owner);
    vpd_put_u32(m, VPD_A_COUNT, count);
    if (dp->handover) {
        vpd_put_bytes(m, VPD_A_HANDOVER, ask, sizeof(ask));
    }
    return m;
}

/* The hand-over token a CLAIM reply carries: this connection's now. */
static void note_token(VsriovDaemonPool *dp, const struct vpd_msg *reply)
{
    const struct vpd_attr_view *v = vpd_msg_get(reply, VPD_A_HANDOVER);

    if (v && v->len == VPD_HANDOVER_SIZE) {
        memcpy(dp->token, v->value, VPD_HANDOVER_SIZE);
        dp->has_token = true;
    }
}

/*
 * The HANDLE of each VF attribute of a CLAIM reply, in order, into
 * @handles (@max at most), and its MAC and spoof check into @vfs unless
 * NULL (zero if it has none): how many.
 */
static uint32_t parse_handles(const struct vpd_msg *msg, uint32_t *handles,
                              DaemonVF *vfs, uint32_t max)
{
    uint32_t found = 0;

    for (guint i = 0; i < msg->attrs->len && found < max; i++) {
        const struct vpd_attr_view *a =
            &g_array_index(msg->attrs, struct vpd_attr_view, i);
        g_autoptr(GArray) in = NULL;
        bool has_handle = false;

        if (a->type != VPD_A_VF) {
            continue;
        }
        if (vfs) {
            memset(&vfs[found], 0, sizeof(vfs[found]));
        }
        in = vpd_attr_nested(a);
        for (guint j = 0; j < in->len; j++) {
            const struct vpd_attr_view *v =
                &g_array_index(in, struct vpd_attr_view, j);
            uint8_t u8;

            if (v->type == VPD_A_HANDLE) {
                has_handle = vpd_attr_u32(v, &handles[found]);
            } else if (v->type == VPD_A_MAC && v->len == 6 && vfs) {
                memcpy(vfs[found].mac.a, v->value, 6);
            } else if (v->type == VPD_A_SPOOFCHK && vfs &&
                       vpd_attr_u8(v, &u8)) {
                vfs[found].spoofchk = u8 == 1;
            }
        }
        found += has_handle;
    }
    return found;
}

/* A RELEASE, and how often it was sent (at most VPD_RELEASE_TRIES). */
typedef struct LateRelease {
    VsriovDaemonPool *dp;
    uint32_t handle;
    unsigned tries;
} LateRelease;

static void send_release_tries(VsriovDaemonPool *dp, uint32_t handle,
                               unsigned tries);

static void release_done(DaemonReq *req)
{
    g_autofree LateRelease *r = req->opaque;
    VsriovDaemonPool *dp = r->dp;

    if (!req->err || req->err == EPERM) {
        /* (EPERM: not this client's any more, e.g. released on a close) */
        trace_vsriov_daemon_pool_released(dp_id(dp), r->handle, dp->pool);
        return;
    }
    /*
     * Not given back (the daemon restarting, too many requests, no
     * answer): the VF would stay this process's, so it goes again once a
     * later request of this pool has had its answer.
     */
    if (++r->tries < VPD_RELEASE_TRIES) {
        g_array_append_val(dp->to_release, *r);
    } else {
        error_append_hint(&req->error, "VF handle %u stays claimed until "
                          "QEMU exits\n", r->handle);
    }
    vsriov_report_guest_err(g_steal_pointer(&req->error));
}

/* After an answer came: the RELEASEs that failed go again. */
static void release_again(VsriovDaemonPool *dp)
{
    g_autoptr(GArray) again = dp->to_release;

    dp->to_release = g_array_new(false, false, sizeof(LateRelease));
    for (guint i = 0; i < again->len; i++) {
        LateRelease *l = &g_array_index(again, LateRelease, i);

        send_release_tries(dp, l->handle, l->tries);
    }
}

static void send_release_tries(VsriovDaemonPool *dp, uint32_t handle,
                               unsigned tries)
{
    struct vpd_builder *m = msg_new(VPD_MSG_RELEASE);
    LateRelease *r = g_new(LateRelease, 1);

    r->dp = dp;
    r->handle = handle;
    r->tries = tries;
    vpd_put_u32(m, VPD_A_HANDLE, handle);
    vsriov_daemon_send(dp->client, m, 0, release_done, r);
}

/* Tell the daemon a VF is no longer ours; nobody waits for the answer. */
static void send_release(VsriovDaemonPool *dp, uint32_t handle)
{
    send_release_tries(dp, handle, 0);
}

/* A CLAIM's VFs that nobody takes go back at once. */
static void client_unwanted_claim(void *opaque, const struct vpd_msg *reply)
{
    VsriovDaemonPool *dp = opaque;
    uint32_t handles[VPD_MAX_COUNT];
    uint32_t n = parse_handles(reply, handles, NULL, VPD_MAX_COUNT);

    for (uint32_t i = 0; i < n; i++) {
        send_release(dp, handles[i]);
    }
}

static void client_closed(void *opaque)
{
    VsriovDaemonPool *dp = opaque;

    /* (a new connection's token comes with its first claim) */
    dp->has_token = false;
}

static void client_answered(void *opaque)
{
    VsriovDaemonPool *dp = opaque;

    if (dp->to_release->len) {
        release_again(dp);
    }
}

static const VsriovDaemonClientOps client_ops = {
    .unwanted_claim = client_unwanted_claim,
    .closed = client_closed,
    .answered = client_answered,
};

/* ---- the pool ----------------------------------------------------------- */

static char *entry_netdev(VsriovDaemonPool *dp, uint32_t i)
{
    return g_strdup_printf("%s.%u", dp_id(dp), i);
}

/* Turn the claimed descriptors into vhost-vdpa netdevs, once. */
static bool ensure_netdevs(VsriovDaemonPool *dp, Error **errp)
{
    if (dp->netdevs_created) {
        return true;
    }
    for (uint32_t i = 0; i < dp->count; i++) {
        g_autofree char *id = entry_netdev(dp, i);
        g_autofree char *fd = g_strdup_printf("%d", dp->vhost_fds[i]);
        Netdev nd = {
            .id = id,
            .type = NET_CLIENT_DRIVER_VHOST_VDPA,
            .u.vhost_vdpa.vhostfd = fd,
        };

        if (qemu_find_netdev(id)) {
            continue;
        }
        qmp_netdev_add(&nd, errp);
        dp->vhost_fds[i] = -1;  /* the netdev owns it, or closed it */
        if (!qemu_find_netdev(id)) {
            error_prepend(errp, "vsriov-daemon-pool '%s': VF %u: ",
                dp_id(dp), i);
            return false;
        }
    }
    dp->netdevs_created = true;
    return true;
}

static VsriovPoolEntry *entry(VsriovPool *pool, guint i)
{
    return &g_array_index(pool->entries, VsriovPoolEntry, i);
}

/*
 * Make VF @handle's netdev (in pool slot @i, for @owner) from @fd, which it
 * takes.  NULL with @errp set, the VF given back, if it cannot.
 */
static NetClientState *attach_vf(VsriovDaemonPool *dp, guint i,
                                 uint32_t handle, const DaemonVF *vf, int fd,
                                 const char *owner, Error **errp)
{
    VsriovPool *pool = VSRIOV_POOL(dp);
    g_autofree char *netdev = entry_netdev(dp, i);
    g_autofree char *fd_str = g_strdup_printf("%d", fd);
    Netdev nd = {
        .id = netdev,
        .type = NET_CLIENT_DRIVER_VHOST_VDPA,
        .u.vhost_vdpa.vhostfd = fd_str,
    };
    NetClientState *nc;

    if (qemu_find_netdev(netdev)) {
        /* netdev_add would refuse it before taking the descriptor */
        close(fd);
        send_release(dp, handle);
        error_setg(errp, "vsriov-daemon-pool '%s': a netdev named '%s' "
                   "exists already", dp_id(dp), netdev);
        return NULL;
    }
    qmp_netdev_add(&nd, errp);  /* owns the descriptor from now on */
    nc = qemu_find_netdev(netdev);
    if (!nc) {
        error_prepend(errp, "vsriov-daemon-pool '%s': VF handle %u: ",
                      dp_id(dp), handle);
        send_release(dp, handle);
        return NULL;
    }
    dp->handles[i] = handle;
    dp->vfs[i] = *vf;
    entry(pool, i)->owner = g_strdup(owner);
    trace_vsriov_pool_claim(dp_id(dp), netdev, owner);
    return nc;
}

/*
 * A lazy pool's claim_async: one CLAIM of one VF per owner (so that the
 * daemon knows each VF's owner), all sent at once; the netdevs are made
 * when every answer came, a few per main-loop iteration (each costs
 * milliseconds: its vhost-vdpa device is set up), or everything goes back.
 */
#define VPD_ATTACH_SLICE_NS (10 * SCALE_MS)
#define VPD_ATTACH_PAUSE_NS (1 * SCALE_MS)

typedef struct ClaimBatch ClaimBatch;

typedef struct ClaimPart {
    ClaimBatch *batch;
    char *owner;
    bool got;               /* answered with a VF and its descriptor */
    uint32_t handle;
    DaemonVF vf;
    int fd;
    int slot;               /* the pool entry its netdev is, or -1 */
} ClaimPart;

struct ClaimBatch {
    VsriovDaemonPool *dp;
    unsigned n, answered;
    ClaimPart *parts;
    unsigned attached;      /* parts whose netdev was made (or failed) */
    QEMUTimer *attach_timer;
    int ret;                /* the first failure, and its error */
    Error *err;
    VsriovPoolClaimDone *done;
    void *opaque;
};

static void claim_batch_fail(ClaimBatch *b, int ret, Error *err)
{
    if (b->ret) {
        error_free(err);
        return;
    }
    b->ret = ret;
    b->err = err;
}

static void claim_batch_finish(ClaimBatch *b)
{
    VsriovDaemonPool *dp = b->dp;
    VsriovPool *pool = VSRIOV_POOL(dp);
    g_autofree NetClientState **ncs = g_new0(NetClientState *, b->n);

    dp->claiming -= b->n - b->attached;
    if (b->attach_timer) {
        timer_free(b->attach_timer);
    }
    /* (looked up again: a netdev may be deleted by hand between slices) */
    for (unsigned j = 0; j < b->n && !b->ret; j++) {
        g_autofree char *name = entry_netdev(dp, b->parts[j].slot);

        ncs[j] = qemu_find_netdev(name);
        if (!ncs[j]) {
            Error *err = NULL;

            error_setg(&err, "vsriov-daemon-pool '%s': netdev '%s' went "
                       "away", dp_id(dp), name);
            claim_batch_fail(b, -EIO, err);
        }
    }
    if (b->ret) {
        /* all or nothing: what came goes back */
        for (unsigned j = 0; j < b->n; j++) {
            if (b->parts[j].got) {
                close(b->parts[j].fd);
                send_release(dp, b->parts[j].handle);
            } else if (b->parts[j].slot >= 0) {
                g_autofree char *name = entry_netdev(dp, b->parts[j].slot);

                VSRIOV_POOL_GET_CLASS(pool)->release(pool, name);
            }
        }
        b->done(b->opaque, NULL, 0, b->ret, b->err);
    } else {
        b->done(b->opaque, ncs, b->n, 0, NULL);
    }
    for (unsigned j = 0; j < b->n; j++) {
        g_free(b->parts[j].owner);
    }
    g_free(b->parts);
    g_free(b);
}

/* Make the netdevs of @b's VFs, for VPD_ATTACH_SLICE_NS at most. */
static void claim_batch_attach(void *opaque)
{
    ClaimBatch *b = opaque;
    VsriovDaemonPool *dp = b->dp;
    VsriovPool *pool = VSRIOV_POOL(dp);
    int64_t end = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                  VPD_ATTACH_SLICE_NS;

    while (b->attached < b->n && !b->ret) {
        ClaimPart *part = &b->parts[b->attached];
        Error *err = NULL;
        guint i;

        if (qemu_clock_get_ns(QEMU_CLOCK_REALTIME) >= end) {
            if (!b->attach_timer) {
                b->attach_timer = timer_new_ns(QEMU_CLOCK_REALTIME,
                                               claim_batch_attach, b);
            }
            timer_mod(b->attach_timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                                       VPD_ATTACH_PAUSE_NS);
            return;
        }
        for (i = 0; i < pool->entries->len && entry(pool, i)->owner; i++) {
            /* first free slot (claiming reserved enough) */
        }
        assert(i < pool->entries->len);
        part->got = false;      /* attach_vf takes the descriptor */
        if (attach_vf(dp, i, part->handle, &part->vf, part->fd, part->owner,
                      &err)) {
            part->slot = i;
        } else {
            claim_batch_fail(b, -EIO, err);
        }
        b->attached++;
        dp->claiming--;         /* it has its slot now, or none */
    }
    claim_batch_finish(b);
}

static void claim_part_done(DaemonReq *req)
{
    ClaimPart *part = req->opaque;
    ClaimBatch *b = part->batch;
    const char *id = dp_id(b->dp);
    Error *err = NULL;

    if (req->err) {
        claim_batch_fail(b, -req->err, g_steal_pointer(&req->error));
    } else if (parse_handles(req->reply, &part->handle, &part->vf, 1) != 1) {
        error_setg(&err, "vsriov-daemon-pool '%s': the daemon's answer to "
                   "CLAIM names no VF", id);
        claim_batch_fail(b, -EIO, err);
    } else if (req->nfds != 1) {
        send_release(b->dp, part->handle);
        error_setg(&err, "vsriov-daemon-pool '%s': the daemon's answer to "
                   "CLAIM has no descriptor", id);
        claim_batch_fail(b, -EIO, err);
    } else {
        part->fd = req->fds[0];
        req->nfds = 0;          /* ours now */
        part->got = true;
        note_token(b->dp, req->reply);
    }
    if (++b->answered == b->n) {
        claim_batch_attach(b);  /* (finishes at once if one failed) */
    }
}

static void claim_batch_refused(void *opaque)
{
    ClaimBatch *b = opaque;

    b->dp->claiming += b->n;    /* (finish takes them off again) */
    claim_batch_finish(b);
}

/*
 * The owner name a CLAIM gives the daemon: what holds the VF in QEMU
 * (the pool, or a lazy pool's VF), "@" the VM: its UUID, else its name
 * (-name), else this process.  The daemon lets VFs claimed under one
 * owner name by one uid pass a MAC between them, which is how a VM's VF
 * keeps its MAC across a migration (both QEMUs have the VM's UUID and
 * name); a process's own name keeps VMs that have neither apart.
 */
static char *owner_name(const char *what)
{
    char uuid[UUID_STR_LEN];

    if (qemu_uuid_set) {
        qemu_uuid_unparse(&qemu_uuid, uuid);
        return g_strdup_printf("%s@%s", what, uuid);
    }
    if (qemu_name) {
        return g_strdup_printf("%s@%s", what, qemu_name);
    }
    return g_strdup_printf("%s@pid-%d", what, (int)getpid());
}

/*
 * A premapped pool's claim_async: its VFs were claimed when it was
 * created, or are being claimed (added at run time); a PF that came
 * meanwhile asks for them this way, and gets them (their netdevs made,
 * as claim does) or the claims' failure when they are done.
 */
typedef struct PremappedWait {
    VsriovDaemonPool *dp;
    char **owners;
    unsigned n;
    VsriovPoolClaimDone *done;
    void *opaque;
} PremappedWait;

static void premapped_serve(PremappedWait *w)
{
    VsriovDaemonPool *dp = w->dp;
    VsriovPool *pool = VSRIOV_POOL(dp);
    g_autofree NetClientState **ncs = g_new0(NetClientState *, w->n);
    Error *err = NULL;
    unsigned k = 0;
    int ret = 0;

    if (dp->state == VSRIOV_POOL_STATE_FAILED) {
        err = error_copy(dp->claim_err);
        ret = dp->claim_ret;
    } else if (!ensure_netdevs(dp, &err)) {
        ret = -EIO;
    } else {
        for (; k < w->n; k++) {
            ncs[k] = parent_class->claim(pool, w->owners[k], &err);
            if (!ncs[k]) {
                ret = -ENOSPC;
                break;
            }
        }
    }
    if (ret) {
        while (k--) {
            parent_class->release(pool, ncs[k]->name);
        }
        w->done(w->opaque, NULL, 0, ret, err);
    } else {
        w->done(w->opaque, ncs, w->n, 0, NULL);
    }
    g_strfreev(w->owners);
    g_free(w);
}

static void premapped_serve_bh(void *opaque)
{
    premapped_serve(opaque);
}

static void premapped_claim_async(VsriovDaemonPool *dp,
                                  const char *const *owners, unsigned n,
                                  VsriovPoolClaimDone *done, void *opaque)
{
    PremappedWait *w = g_new0(PremappedWait, 1);

    w->dp = dp;
    w->n = n;
    w->done = done;
    w->opaque = opaque;
    w->owners = g_new0(char *, n + 1);
    for (unsigned k = 0; k < n; k++) {
        w->owners[k] = g_strdup(owners[k]);
    }
    if (dp->state == VSRIOV_POOL_STATE_CLAIMING) {
        dp->waiters = g_slist_append(dp->waiters, w);   /* creation_end() */
    } else {
        aio_bh_schedule_oneshot(iohandler_get_aio_context(),
                                premapped_serve_bh, w);
    }
}

static void daemon_claim_async(VsriovPool *pool, const char *const *owners,
                               unsigned n, VsriovPoolClaimDone *done,
                               void *opaque)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);
    ClaimBatch *b;
    unsigned free_slots = 0;

    if (!pool->lazy) {
        premapped_claim_async(dp, owners, n, done, opaque);
        return;
    }
    b = g_new0(ClaimBatch, 1);
    b->dp = dp;
    b->n = n;
    b->done = done;
    b->opaque = opaque;
    b->parts = g_new0(ClaimPart, n);
    for (unsigned k = 0; k < n; k++) {
        b->parts[k].batch = b;
        b->parts[k].slot = -1;
        b->parts[k].owner = g_strdup(owners[k]);
    }
    for (guint i = 0; i < pool->entries->len; i++) {
        free_slots += !entry(pool, i)->owner;
    }
    if (!n || n + dp->claiming > free_slots) {
        Error *err = NULL;

        error_setg(&err, "vsriov-daemon-pool '%s': %u VF(s) asked, %u of "
                   "its %u (count) are free", dp_id(dp), n,
                   free_slots - MIN(free_slots, dp->claiming), dp->count);
        claim_batch_fail(b, -ENOSPC, err);
        aio_bh_schedule_oneshot(iohandler_get_aio_context(),
                                claim_batch_refused, b);
        return;
    }
    dp->claiming += n;
    for (unsigned k = 0; k < n; k++) {
        g_autofree char *owner = owner_name(owners[k]);

        vsriov_daemon_send(dp->client, claim_msg(dp, owner, 1), 1,
                           claim_part_done,
                 &b->parts[k]);
    }
}

static unsigned daemon_available(VsriovPool *pool)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);

    if (pool->lazy) {
        unsigned n = 0;

        for (guint i = 0; i < pool->entries->len; i++) {
            n += !entry(pool, i)->owner;
        }
        return n - MIN(n, dp->claiming);
    }
    if (dp->state == VSRIOV_POOL_STATE_FAILED) {
        return 0;   /* (unusable says why) */
    }
    if (!dp->netdevs_created) {
        /*
         * Their netdevs are made at the first claim, not here: a query
         * (query-vsriov-pools) changes nothing.  None is taken yet (or,
         * still claiming, none has come yet).
         */
        return dp->count;
    }
    return parent_class->available(pool);
}

static NetClientState *daemon_claim(VsriovPool *pool, const char *owner,
                                    Error **errp)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);

    if (dp->state != VSRIOV_POOL_STATE_READY) {
        /* (vpf.c asks a pool that claims with claim_async) */
        error_setg(errp, "vsriov-daemon-pool '%s' %s", dp_id(dp),
                   dp->state == VSRIOV_POOL_STATE_CLAIMING
                   ? "is still claiming its VFs from the daemon"
                   : "has no VF: its claims failed");
        return NULL;
    }
    if (pool->lazy) {
        /* (vpf.c asks a pool with claim_async that way) */
        error_setg(errp, "lazy vsriov-daemon-pool '%s' hands out backends "
                   "only through claim_async", dp_id(VSRIOV_DAEMON_POOL(pool)));
        return NULL;
    }
    if (!ensure_netdevs(VSRIOV_DAEMON_POOL(pool), errp)) {
        return NULL;
    }
    return parent_class->claim(pool, owner, errp);
}

static void daemon_release(VsriovPool *pool, const char *netdev)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);
    const char *id = dp_id(dp);

    if (!pool->lazy) {
        parent_class->release(pool, netdev);
        return;
    }
    for (guint i = 0; i < pool->entries->len; i++) {
        VsriovPoolEntry *e = entry(pool, i);

        if (e->owner && !strcmp(e->netdev, netdev)) {
            NetClientState *nc = qemu_find_netdev(netdev);

            trace_vsriov_pool_release(id, e->netdev, e->owner);
            /* closes the vhost-vdpa descriptor: the daemon may reuse it */
            if (nc) {
                qemu_del_net_client(nc);
            }
            send_release(dp, dp->handles[i]);
            g_free(e->owner);
            e->owner = NULL;
            return;
        }
    }
}

/* ---- representors (switchdev mode, eswitch.c) ------------------------ */

/* The pool slot whose VF has netdev @netdev, or -1. */
static int slot_of(VsriovDaemonPool *dp, const char *netdev)
{
    for (uint32_t i = 0; i < dp->count; i++) {
        g_autofree char *id = entry_netdev(dp, i);

        if (!strcmp(id, netdev)) {
            return i;
        }
    }
    return -1;
}

static char *rep_netdev(VsriovDaemonPool *dp, uint32_t i)
{
    return g_strdup_printf("%s.rep%u", dp_id(dp), i);
}

typedef struct RepCall {
    VsriovDaemonPool *dp;
    uint32_t slot;
    uint32_t handle;
    VsriovPoolRepDone *done;
    void *opaque;
} RepCall;

static void rep_close_done(DaemonReq *req)
{
    g_autofree RepCall *call = req->opaque;

    /* (ENOENT: it had none any more, e.g. the VF went first) */
    if (req->err && req->err != ENOENT) {
        error_prepend(&req->error, "vsriov-daemon-pool '%s': REP_CLOSE of "
                      "VF handle %u: ", dp_id(call->dp), call->handle);
        vsriov_report_guest_err(g_steal_pointer(&req->error));
    }
}

static void send_rep_close(VsriovDaemonPool *dp, uint32_t handle)
{
    struct vpd_builder *m = msg_new(VPD_MSG_REP_CLOSE);
    RepCall *call = g_new0(RepCall, 1);

    call->dp = dp;
    call->handle = handle;
    vpd_put_u32(m, VPD_A_HANDLE, handle);
    vsriov_daemon_send(dp->client, m, 0, rep_close_done, call);
}

/*
 * REP_OPEN's answer: the representor port's tap, which becomes netdev
 * "<pool>.rep<slot>" (a tap netdev on that descriptor).
 */
static void rep_open_done(DaemonReq *req)
{
    g_autofree RepCall *call = req->opaque;
    VsriovDaemonPool *dp = call->dp;
    g_autofree char *id = rep_netdev(dp, call->slot);
    Error *err = g_steal_pointer(&req->error);
    int ret = -req->err;

    if (!ret && req->nfds != 1) {
        error_setg(&err, "vsriov-daemon-pool '%s': the daemon's answer to "
                   "REP_OPEN has %d descriptor(s), not 1", dp_id(dp),
                   req->nfds);
        ret = -EIO;
    }
    if (!ret) {
        g_autofree char *fd = g_strdup_printf("%d", req->fds[0]);
        Netdev nd = {
            .id = id,
            .type = NET_CLIENT_DRIVER_TAP,
            .u.tap.fd = fd,
        };

        qmp_netdev_add(&nd, &err);
        if (err) {
            error_prepend(&err, "vsriov-daemon-pool '%s': ", dp_id(dp));
        }
        if (!qemu_find_netdev(id)) {
            /* (a tap that took the descriptor closed it) */
            if (fcntl(req->fds[0], F_GETFD) != -1) {
                close(req->fds[0]);
            }
            ret = -EIO;
        }
        req->fds[0] = -1;
        if (ret) {
            send_rep_close(dp, call->handle);
        }
    }
    for (int i = 0; i < req->nfds; i++) {
        if (req->fds[i] >= 0) {
            close(req->fds[i]);
        }
    }
    /* (the daemon's refusals: ENOENT the VF is not ours, EPERM its policy) */
    call->done(call->opaque, ret ? NULL : id,
               ret == -ENOENT ? -EPERM : ret, err);
}

static bool daemon_has_reps(VsriovPool *pool)
{
    return true;    /* the daemon's pool says (switchdev = yes) */
}

static void daemon_rep_open(VsriovPool *pool, const char *netdev,
                            VsriovPoolRepDone *done, void *opaque)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);
    int i = slot_of(dp, netdev);
    RepCall *call;
    struct vpd_builder *m;

    if (i < 0) {
        Error *err = NULL;

        error_setg(&err, "vsriov-daemon-pool '%s': netdev '%s' is not one "
                   "of its VFs", dp_id(dp), netdev);
        done(opaque, NULL, -EPERM, err);
        return;
    }
    call = g_new0(RepCall, 1);
    call->dp = dp;
    call->slot = i;
    call->handle = dp->handles[i];
    call->done = done;
    call->opaque = opaque;
    m = msg_new(VPD_MSG_REP_OPEN);
    vpd_put_u32(m, VPD_A_HANDLE, dp->handles[i]);
    vsriov_daemon_send(dp->client, m, 1, rep_open_done, call);
}

/* The tap goes (its port's interface with it), then the daemon's port. */
static void daemon_rep_close(VsriovPool *pool, const char *netdev,
                             const char *rep)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);
    NetClientState *nc = qemu_find_netdev(rep);
    int i = slot_of(dp, netdev);

    if (nc && !nc->peer) {
        qemu_del_net_client(nc);
    }
    if (i >= 0) {
        send_rep_close(dp, dp->handles[i]);
    }
}

/* ---- the guest's rules (flow offload, flow.c) ------------------------ */

typedef struct FlowCall {
    VsriovDaemonPool *dp;
    uint32_t id;
    uint16_t type;
    VsriovPoolFlowDone *done;
    void *opaque;
} FlowCall;

static void flow_done(DaemonReq *req)
{
    g_autofree FlowCall *call = req->opaque;
    uint64_t packets = 0, bytes = 0;
    Error *err = g_steal_pointer(&req->error);
    int ret = -req->err;

    if (!ret && call->type == VPD_MSG_FLOW_STATS &&
        (!vpd_attr_u64(vpd_msg_get(req->reply, VPD_A_PACKETS), &packets) ||
         !vpd_attr_u64(vpd_msg_get(req->reply, VPD_A_BYTES), &bytes))) {
        error_setg(&err, "the daemon's answer to FLOW_STATS has no counters");
        ret = -EIO;
    }
    if (err) {
        /* (the client's errors name the pool already) */
        error_prepend(&err, "%s: ", call->type == VPD_MSG_FLOW_ADD ?
                      "FLOW_ADD" : call->type == VPD_MSG_FLOW_DEL ?
                      "FLOW_DEL" : "FLOW_STATS");
    }
    call->done(call->opaque, ret, packets, bytes, err);
}

static FlowCall *flow_call(VsriovDaemonPool *dp, uint16_t type, uint32_t id,
                           VsriovPoolFlowDone *done, void *opaque)
{
    FlowCall *call = g_new0(FlowCall, 1);

    call->dp = dp;
    call->type = type;
    call->id = id;
    call->done = done;
    call->opaque = opaque;
    return call;
}

static void put_masked(struct vpd_builder *m, uint16_t type,
                       const uint8_t *v, const uint8_t *mask, unsigned len)
{
    uint8_t b[32];

    memcpy(b, v, len);
    memcpy(b + len, mask, len);
    vpd_put_bytes(m, type, b, 2 * len);
}

/* FLOW_ADD: the source VF's handle, the matches, the actions. */
static void daemon_flow_add(VsriovPool *pool, const char *src,
                            const char *dst, const VsriovFlowSpec *f,
                            VsriovPoolFlowDone *done, void *opaque)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);
    FlowCall *call = flow_call(dp, VPD_MSG_FLOW_ADD, f->id, done, opaque);
    int i = slot_of(dp, src), o = dst ? slot_of(dp, dst) : -1;
    bool v6 = f->has & (VSRIOV_FM_IPV6_SRC | VSRIOV_FM_IPV6_DST);
    struct vpd_builder *m;

    if (i < 0 || (dst && o < 0)) {
        Error *err = NULL;

        error_setg(&err, "netdev '%s' is not one of this pool's",
                   i < 0 ? src : dst);
        vsriov_daemon_fail(dp->client, flow_done, call, EPERM, err);
        return;
    }
    m = msg_new(VPD_MSG_FLOW_ADD);
    vpd_put_u32(m, VPD_A_FLOW_ID, f->id);
    vpd_put_u16(m, VPD_A_PRIORITY, f->priority);
    vpd_put_u32(m, VPD_A_HANDLE, dp->handles[i]);
    if (f->has & VSRIOV_FM_ETH_DST) {
        put_masked(m, VPD_A_M_ETH_DST, f->eth_dst, f->eth_dst_mask, 6);
    }
    if (f->has & VSRIOV_FM_ETH_SRC) {
        put_masked(m, VPD_A_M_ETH_SRC, f->eth_src, f->eth_src_mask, 6);
    }
    if (f->has & VSRIOV_FM_ETH_TYPE) {
        vpd_put_u16(m, VPD_A_M_ETH_TYPE, f->eth_type);
    }
    if (f->has & VSRIOV_FM_VLAN_VID) {
        vpd_put_u16(m, VPD_A_M_VLAN_VID, f->vlan_vid);
    }
    if (f->has & VSRIOV_FM_IP_PROTO) {
        vpd_put_u8(m, VPD_A_M_IP_PROTO, f->ip_proto);
    }
    if (f->has & (VSRIOV_FM_IPV4_SRC | VSRIOV_FM_IPV6_SRC)) {
        put_masked(m, v6 ? VPD_A_M_IPV6_SRC : VPD_A_M_IPV4_SRC, f->ip_src,
                   f->ip_src_mask, v6 ? 16 : 4);
    }
    if (f->has & (VSRIOV_FM_IPV4_DST | VSRIOV_FM_IPV6_DST)) {
        put_masked(m, v6 ? VPD_A_M_IPV6_DST : VPD_A_M_IPV4_DST, f->ip_dst,
                   f->ip_dst_mask, v6 ? 16 : 4);
    }
    if (f->has & VSRIOV_FM_L4_SRC) {
        put_masked(m, VPD_A_M_L4_SRC, f->l4_src, f->l4_src_mask, 2);
    }
    if (f->has & VSRIOV_FM_L4_DST) {
        put_masked(m, VPD_A_M_L4_DST, f->l4_dst, f->l4_dst_mask, 2);
    }
    if (f->vlan_pop) {
        vpd_put_u8(m, VPD_A_VLAN_POP, 1);
    }
    if (f->vlan_push) {
        vpd_put_u16(m, VPD_A_VLAN_PUSH, f->vlan_push);
    }
    if (o >= 0) {
        vpd_put_u32(m, VPD_A_OUT, dp->handles[o]);
    }
    vsriov_daemon_send(dp->client, m, 0, flow_done, call);
}

/* FLOW_DEL or FLOW_STATS: the rule's id only. */
static void send_flow_id(VsriovPool *pool, uint16_t type, uint32_t id,
                         VsriovPoolFlowDone *done, void *opaque)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);
    struct vpd_builder *m = msg_new(type);

    vpd_put_u32(m, VPD_A_FLOW_ID, id);
    vsriov_daemon_send(dp->client, m, 0, flow_done,
                       flow_call(dp, type, id, done, opaque));
}

static void daemon_flow_del(VsriovPool *pool, uint32_t id,
                            VsriovPoolFlowDone *done, void *opaque)
{
    send_flow_id(pool, VPD_MSG_FLOW_DEL, id, done, opaque);
}

static void daemon_flow_stats(VsriovPool *pool, uint32_t id,
                              VsriovPoolFlowDone *done, void *opaque)
{
    send_flow_id(pool, VPD_MSG_FLOW_STATS, id, done, opaque);
}

/* ---- a VF's counters (vf-stats.c) ------------------------------------- */

typedef struct StatsCall {
    VsriovPoolStatsDone *done;
    void *opaque;
} StatsCall;

/*
 * VF_STATS' answer: the VF's switch port's counters (PORT_STATS: have,
 * then VPD_PS_N values), as the VF sees them: the port's rx is what the
 * VF sent, and what its policer dropped the VF sent too.
 */
static void vf_stats_done(DaemonReq *req)
{
    g_autofree StatsCall *call = req->opaque;
    const struct vpd_attr_view *a = NULL;
    Error *err = g_steal_pointer(&req->error);
    uint64_t v[1 + VPD_PS_N] = { 0 };
    VsriovVFStats st = { 0 };
    int ret = -req->err;

    if (!ret) {
        a = vpd_msg_get(req->reply, VPD_A_PORT_STATS);
        if (!a) {
            const char *why = vpd_attr_str(vpd_msg_get(req->reply,
                                                       VPD_A_MESSAGE));

            error_setg(&err, "the daemon has no counters of its port: %s",
                       why ? why : "(no reason given)");
            ret = -ENODATA;
        } else if (vpd_attr_u64_count(a) != G_N_ELEMENTS(v)) {
            error_setg(&err, "the daemon's PORT_STATS has %u values, not %zu",
                       vpd_attr_u64_count(a), G_N_ELEMENTS(v));
            ret = -EIO;
        }
    }
    if (ret) {
        error_prepend(&err, "VF_STATS: ");
        call->done(call->opaque, ret, NULL, err);
        return;
    }
    for (unsigned i = 0; i < G_N_ELEMENTS(v); i++) {
        vpd_attr_u64_at(a, i, &v[i]);
    }
    st.tx_packets = v[1 + VPD_PS_RX_PACKETS];
    st.tx_bytes = v[1 + VPD_PS_RX_BYTES];
    st.tx_dropped = v[1 + VPD_PS_RX_DROPPED] + v[1 + VPD_PS_POLICER_DROPPED];
    st.rx_packets = v[1 + VPD_PS_TX_PACKETS];
    st.rx_bytes = v[1 + VPD_PS_TX_BYTES];
    st.rx_dropped = v[1 + VPD_PS_TX_DROPPED];
    call->done(call->opaque, 0, &st, NULL);
}

static void daemon_vf_stats(VsriovPool *pool, const char *netdev,
                            VsriovPoolStatsDone *done, void *opaque)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);
    StatsCall *call = g_new0(StatsCall, 1);
    int i = slot_of(dp, netdev);
    struct vpd_builder *m;

    call->done = done;
    call->opaque = opaque;
    if (i < 0) {
        Error *err = NULL;

        error_setg(&err, "netdev '%s' is not one of this pool's", netdev);
        vsriov_daemon_fail(dp->client, vf_stats_done, call, ENODEV, err);
        return;
    }
    m = msg_new(VPD_MSG_VF_STATS);
    vpd_put_u32(m, VPD_A_HANDLE, dp->handles[i]);
    vsriov_daemon_send(dp->client, m, 0, vf_stats_done, call);
}

/* The daemon's MAC for its VF: what a VDUSE device cannot carry itself. */
static bool daemon_backend_mac(VsriovPool *pool, const char *netdev,
                               MACAddr *mac)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);
    static const MACAddr zero;

    for (uint32_t i = 0; dp->vfs && i < dp->count; i++) {
        g_autofree char *id = entry_netdev(dp, i);

        if (!strcmp(id, netdev)) {
            if (!memcmp(&dp->vfs[i].mac, &zero, sizeof(zero))) {
                return false;
            }
            *mac = dp->vfs[i].mac;
            return true;
        }
    }
    return false;
}

/* The daemon's defaults for its VF: it checks spoofing when its pool does. */
static void daemon_backend_config(VsriovPool *pool, const char *netdev,
                                  VsriovVFConfig *cfg)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);

    for (uint32_t i = 0; dp->vfs && i < dp->count; i++) {
        g_autofree char *id = entry_netdev(dp, i);

        if (!strcmp(id, netdev)) {
            cfg->spoofchk = dp->vfs[i].spoofchk;
            return;
        }
    }
}

/* A configure call's completion, as the provider interface has it. */
typedef struct ConfigureCall {
    VsriovPoolDone *done;
    void *opaque;
} ConfigureCall;

static void configure_done(DaemonReq *req)
{
    ConfigureCall *call = req->opaque;
    int ret = -req->err;

    /*
     * QEMU checked the values already: what the daemon calls invalid
     * (EINVAL: outside the pool's policy, docs/daemon-protocol.md) is its
     * policy's refusal.
     */
    if (req->err == EINVAL) {
        ret = -EPERM;
    }
    call->done(call->opaque, ret, g_steal_pointer(&req->error));
    g_free(call);
}

/* SET_ATTRS of the changed attributes; the answer completes it. */
static void daemon_configure(VsriovPool *pool, NetClientState *nc,
                             const VsriovVFConfig *c, uint32_t changed,
                             VsriovPoolDone *done, void *opaque)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);
    ConfigureCall *call = g_new(ConfigureCall, 1);
    struct vpd_builder *m;
    uint32_t i;

    call->done = done;
    call->opaque = opaque;
    for (i = 0; i < dp->count; i++) {
        g_autofree char *id = entry_netdev(dp, i);

        if (!strcmp(id, nc->name)) {
            break;
        }
    }
    if (i == dp->count) {
        Error *err = NULL;

        error_setg(&err, "netdev '%s' is not one of this pool's", nc->name);
        vsriov_daemon_fail(dp->client, configure_done, call, EINVAL, err);
        return;
    }
    m = msg_new(VPD_MSG_SET_ATTRS);
    vpd_put_u32(m, VPD_A_HANDLE, dp->handles[i]);
    if ((changed & VSRIOV_VF_CFG_MAC) && c->mac_set) {
        vpd_put_bytes(m, VPD_A_MAC, c->mac, 6);
        if (dp->has_incoming_token) {
            /* (the MAC may be one the source's VF has) */
            vpd_put_bytes(m, VPD_A_HANDOVER, dp->incoming_token,
                          VPD_HANDOVER_SIZE);
        }
    }
    if (changed & VSRIOV_VF_CFG_VLAN) {
        vpd_put_u16(m, VPD_A_VLAN, c->vlan);
        vpd_put_u8(m, VPD_A_QOS, c->qos);
        vpd_put_u16(m, VPD_A_VLAN_PROTO, c->vlan_proto);
    }
    if (changed & VSRIOV_VF_CFG_SPOOFCHK) {
        vpd_put_u8(m, VPD_A_SPOOFCHK, c->spoofchk);
    }
    if (changed & VSRIOV_VF_CFG_TRUST) {
        vpd_put_u8(m, VPD_A_TRUST, c->trust);
    }
    if (changed & VSRIOV_VF_CFG_LINK_STATE) {
        /* (the wire's: 0 auto, 1 enable, 2 disable) */
        vpd_put_u8(m, VPD_A_LINK_STATE,
                   c->link_state == VSRIOV_VF_LINK_ENABLE ? 1 :
                   c->link_state == VSRIOV_VF_LINK_DISABLE ? 2 : 0);
    }
    if (changed & VSRIOV_VF_CFG_RATE) {
        vpd_put_u32(m, VPD_A_MIN_TX_RATE, c->min_tx_rate);
        vpd_put_u32(m, VPD_A_MAX_TX_RATE, c->max_tx_rate);
    }
    vsriov_daemon_send(dp->client, m, 0, configure_done, call);
}

static bool daemon_handover_token(VsriovPool *pool,
                                  uint8_t token[VSRIOV_HANDOVER_SIZE])
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);

    if (dp->has_token) {
        memcpy(token, dp->token, VSRIOV_HANDOVER_SIZE);
    }
    return dp->has_token;
}

static void daemon_set_incoming_handover(
    VsriovPool *pool, const uint8_t token[VSRIOV_HANDOVER_SIZE])
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);

    memcpy(dp->incoming_token, token, VSRIOV_HANDOVER_SIZE);
    /* (only with handover=on: a daemon of an earlier release refuses it) */
    dp->has_incoming_token = dp->handover;
}

static VsriovPoolState daemon_state(VsriovPool *pool, const char **error)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);

    *error = dp->claim_err ? error_get_pretty(dp->claim_err) : NULL;
    return dp->state;
}

static char *daemon_unusable(VsriovPool *pool)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);

    if (dp->state != VSRIOV_POOL_STATE_FAILED) {
        return NULL;
    }
    return g_strdup_printf("its claims failed: %s",
                           error_get_pretty(dp->claim_err));
}

/* ---- a premapped pool's creation at run time -------------------------- */

static void creation_send(VsriovDaemonPool *dp);

/*
 * The claims are done (@ret 0) or failed (@ret a negative errno, @err
 * why): the pool is ready or failed, management learns it, and the PFs
 * that asked meanwhile get their VFs or the failure.
 */
static void creation_end(VsriovDaemonPool *dp, int ret, Error *err)
{
    GSList *waiters = dp->waiters;

    dp->waiters = NULL;
    migrate_del_blocker(&dp->mig_blocker);
    if (ret) {
        for (uint32_t i = 0; i < dp->count; i++) {
            if (dp->vhost_fds[i] >= 0) {
                close(dp->vhost_fds[i]);
            }
            dp->vhost_fds[i] = -1;
        }
        /* the daemon takes back what the earlier CLAIMs gave */
        vsriov_daemon_client_close(dp->client, "the pool's creation failed");
        dp->state = VSRIOV_POOL_STATE_FAILED;
        dp->claim_ret = ret;
        dp->claim_err = err;
        error_report("%s", error_get_pretty(err));
        qapi_event_send_vsriov_pool_state_changed(dp_id(dp), dp->state,
                                                  error_get_pretty(err));
    } else {
        dp->state = VSRIOV_POOL_STATE_READY;
        trace_vsriov_daemon_pool_claimed(dp_id(dp), dp->count, dp->pool);
        qapi_event_send_vsriov_pool_state_changed(dp_id(dp), dp->state,
                                                  NULL);
    }
    for (GSList *l = waiters; l; l = l->next) {
        premapped_serve(l->data);
    }
    g_slist_free(waiters);
}

static void creation_claim_done(DaemonReq *req)
{
    VsriovDaemonPool *dp = req->opaque;
    uint32_t k = dp->claim_k;
    Error *err = NULL;

    trace_vsriov_daemon_pool_claiming(dp_id(dp), dp->claimed, k, req->err);
    if (req->err) {
        creation_end(dp, -req->err, g_steal_pointer(&req->error));
        return;
    }
    if (req->nfds != k ||
        parse_handles(req->reply, dp->handles + dp->claimed,
                      dp->vfs + dp->claimed, k) != k) {
        error_setg(&err, "vsriov-daemon-pool '%s': the daemon's answer "
                   "to CLAIM has %d descriptor(s) for %u VF(s)", dp_id(dp),
                   req->nfds, k);
        creation_end(dp, -EIO, err);
        return;
    }
    memcpy(dp->vhost_fds + dp->claimed, req->fds, sizeof(int) * k);
    req->nfds = 0;              /* ours now */
    note_token(dp, req->reply);
    dp->claimed += k;
    if (dp->claimed < dp->count) {
        creation_send(dp);
    } else {
        creation_end(dp, 0, NULL);
    }
}

/*
 * The next CLAIM, of VPD_MSG_FDS VFs at most, once the one before was
 * answered: each has the daemon's deadline from when it is sent, as the
 * command line's have.
 */
static void creation_send(VsriovDaemonPool *dp)
{
    g_autofree char *owner = owner_name(dp_id(dp));

    dp->claim_k = MIN(dp->count - dp->claimed, VPD_MSG_FDS);
    vsriov_daemon_send(dp->client, claim_msg(dp, owner, dp->claim_k),
                       dp->claim_k, creation_claim_done, dp);
}

/*
 * Added at run time: the pool exists at once, claiming; nothing waits
 * for the daemon with the BQL held (the guest's vCPUs and the monitor go
 * on).  A migration would find a PF on it half made: none starts until
 * the claims are done.
 */
static void creation_start(VsriovDaemonPool *dp)
{
    g_autofree char *why = g_strdup_printf("vsriov-daemon-pool '%s' is "
                                           "still claiming its VFs from "
                                           "vdpa-pool-daemon", dp_id(dp));

    dp->state = VSRIOV_POOL_STATE_CLAIMING;
    error_setg(&dp->mig_blocker, "%s", why);
    /*
     * (a migration already running: device_add waits for its end, so no
     * PF uses the pool in it; one that started later and finds a PF
     * waiting for the pool fails in its pre_save)
     */
    if (migrate_add_blocker_internal(&dp->mig_blocker, NULL) < 0) {
        dp->mig_blocker = NULL;
    }
    creation_send(dp);
}

/*
 * Connect to the daemon: at the socket's path, or through the connection
 * passed as a file descriptor (which cannot be made again).
 */
static bool daemon_connect(VsriovDaemonPool *dp, Error **errp)
{
    struct sockaddr_un sun;
    g_autofree char *label = NULL;
    int fd;

    if (dp->socket) {
        if (strlen(dp->socket) >= sizeof(sun.sun_path)) {
            error_setg(errp, "vsriov-daemon-pool '%s': socket path too long",
                       dp->id);
            return false;
        }
        dp->client = vsriov_daemon_client_new(OBJECT(dp), dp->id, dp->socket,
                                              &client_ops, dp);
        return vsriov_daemon_client_connect(dp->client, errp);
    }
    label = g_strdup_printf("fd '%s'", dp->fd);
    dp->client = vsriov_daemon_client_new(OBJECT(dp), dp->id, label,
                                          &client_ops, dp);
    /* (the monitor's descriptor is ours now; a number: inherited) */
    fd = monitor_fd_param(monitor_cur(), dp->fd, errp);
    return fd >= 0 && vsriov_daemon_client_adopt(dp->client, fd, errp);
}

static void daemon_pool_complete(UserCreatable *uc, Error **errp)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(uc);
    VsriovPool *pool = VSRIOV_POOL(uc);
    const char *id = object_get_canonical_path_component(OBJECT(uc));
    struct vpd_builder *m;
    Error *err = NULL;

    dp->id = g_strdup(id);
    if (pool->entries->len) {
        error_setg(errp, "vsriov-daemon-pool '%s' takes its backends from "
                   "the daemon, not from 'netdevs'", id);
        return;
    }
    if (!(dp->socket || dp->fd) || !dp->pool || !dp->count) {
        error_setg(errp, "vsriov-daemon-pool '%s' needs socket (or fd), "
                   "pool and count", id);
        return;
    }
    if (dp->socket && dp->fd) {
        error_setg(errp, "vsriov-daemon-pool '%s' takes socket or fd, not "
                   "both", id);
        return;
    }
    if (dp->count > VPD_MAX_COUNT) {
        error_setg(errp, "vsriov-daemon-pool '%s': count is at most %d",
                   id, VPD_MAX_COUNT);
        return;
    }
    if (!daemon_connect(dp, errp)) {
        return;
    }

    if (pool->lazy) {
        /* VFs are claimed one by one when the guest enables them. */
        dp->vhost_fds = g_new(int, dp->count);
        dp->handles = g_new0(uint32_t, dp->count);
        dp->vfs = g_new0(DaemonVF, dp->count);
        for (uint32_t i = 0; i < dp->count; i++) {
            VsriovPoolEntry e = { .netdev = entry_netdev(dp, i) };

            dp->vhost_fds[i] = -1;
            g_array_append_val(pool->entries, e);
        }
        USER_CREATABLE_CLASS(parent_class)->complete(uc, errp);
        return;
    }

    dp->vhost_fds = g_new(int, dp->count);
    for (uint32_t i = 0; i < dp->count; i++) {
        dp->vhost_fds[i] = -1;
    }
    dp->handles = g_new0(uint32_t, dp->count);
    dp->vfs = g_new0(DaemonVF, dp->count);
    if (phase_check(PHASE_MACHINE_READY)) {
        /* object-add: claimed from the main loop (creation_start()) */
        for (uint32_t i = 0; i < dp->count; i++) {
            VsriovPoolEntry e = { .netdev = entry_netdev(dp, i) };

            g_array_append_val(pool->entries, e);
        }
        USER_CREATABLE_CLASS(parent_class)->complete(uc, &err);
        if (err) {
            error_propagate(errp, err);
            return;
        }
        creation_start(dp);
        return;
    }
    /*
     * On the command line: in CLAIMs of VPD_MSG_FDS VFs at most (one
     * descriptor each in the answer), each waited for here, so that a
     * refusal stops QEMU's start.  If one fails, closing the connection
     * gives the daemon back what the others got.
     */
    for (uint32_t done = 0, k; done < dp->count; done += k) {
        g_autoptr(vpd_msg) reply = NULL;
        int nfds = 0;

        k = MIN(dp->count - done, VPD_MSG_FDS);
        g_autofree char *owner = owner_name(id);

        m = claim_msg(dp, owner, k);
        reply = vsriov_daemon_transact(dp->client, m, dp->vhost_fds + done,
                                       k, &nfds, errp);
        if (reply && (nfds != k ||
                      parse_handles(reply, dp->handles + done,
                                    dp->vfs + done, k) != k)) {
            error_setg(errp, "vsriov-daemon-pool '%s': the daemon's answer "
                       "to CLAIM has %d descriptor(s) for %u VF(s)", id,
                       nfds, k);
            g_clear_pointer(&reply, vpd_msg_free);
        }
        if (reply) {
            note_token(dp, reply);
        }
        if (!reply) {
            for (uint32_t i = 0; i < dp->count; i++) {
                if (dp->vhost_fds[i] >= 0) {
                    close(dp->vhost_fds[i]);
                }
                dp->vhost_fds[i] = -1;
            }
            vsriov_daemon_client_close(dp->client,
                                       "the pool's creation failed");
            return;
        }
    }
    for (uint32_t i = 0; i < dp->count; i++) {
        VsriovPoolEntry e = { .netdev = entry_netdev(dp, i) };

        g_array_append_val(pool->entries, e);
    }
    trace_vsriov_daemon_pool_claimed(id, dp->count, dp->pool);
    USER_CREATABLE_CLASS(parent_class)->complete(uc, errp);
}

static void daemon_pool_instance_init(Object *obj)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(obj);

    dp->to_release = g_array_new(false, false, sizeof(LateRelease));
}

static void daemon_pool_instance_finalize(Object *obj)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(obj);
    VsriovPool *pool = VSRIOV_POOL(obj);

    /* (unparented by now: the entries have the netdevs' ids) */
    for (uint32_t i = 0; dp->vhost_fds && i < dp->count; i++) {
        VsriovPoolEntry *e = i < pool->entries->len ? entry(pool, i) : NULL;
        NetClientState *nc = e ? qemu_find_netdev(e->netdev) : NULL;

        if (dp->vhost_fds[i] >= 0) {
            close(dp->vhost_fds[i]);
        }
        if (nc && !nc->peer) {
            qemu_del_net_client(nc);
        }
    }
    /*
     * Closing the connection releases the VFs in the daemon; what was
     * still in flight completes (fails) now.
     */
    vsriov_daemon_client_free(dp->client);
    migrate_del_blocker(&dp->mig_blocker);
    error_free(dp->claim_err);
    g_array_unref(dp->to_release);
    g_free(dp->vhost_fds);
    g_free(dp->handles);
    g_free(dp->vfs);
    g_free(dp->socket);
    g_free(dp->fd);
    g_free(dp->pool);
    g_free(dp->id);
}

static char *get_socket(Object *obj, Error **errp)
{
    return g_strdup(VSRIOV_DAEMON_POOL(obj)->socket);
}

static void set_socket(Object *obj, const char *v, Error **errp)
{
    g_free(VSRIOV_DAEMON_POOL(obj)->socket);
    VSRIOV_DAEMON_POOL(obj)->socket = g_strdup(v);
}

static char *get_fd(Object *obj, Error **errp)
{
    return g_strdup(VSRIOV_DAEMON_POOL(obj)->fd);
}

static void set_fd(Object *obj, const char *v, Error **errp)
{
    g_free(VSRIOV_DAEMON_POOL(obj)->fd);
    VSRIOV_DAEMON_POOL(obj)->fd = g_strdup(v);
}

static char *get_pool(Object *obj, Error **errp)
{
    return g_strdup(VSRIOV_DAEMON_POOL(obj)->pool);
}

static void set_pool(Object *obj, const char *v, Error **errp)
{
    g_free(VSRIOV_DAEMON_POOL(obj)->pool);
    VSRIOV_DAEMON_POOL(obj)->pool = g_strdup(v);
}

static bool get_handover(Object *obj, Error **errp)
{
    return VSRIOV_DAEMON_POOL(obj)->handover;
}

static void set_handover(Object *obj, bool v, Error **errp)
{
    VSRIOV_DAEMON_POOL(obj)->handover = v;
}

static void get_count(Object *obj, Visitor *v, const char *name,
                      void *opaque, Error **errp)
{
    visit_type_uint32(v, name, &VSRIOV_DAEMON_POOL(obj)->count, errp);
}

static void set_count(Object *obj, Visitor *v, const char *name,
                      void *opaque, Error **errp)
{
    visit_type_uint32(v, name, &VSRIOV_DAEMON_POOL(obj)->count, errp);
}

/* Not while the daemon has still to answer: completions need the pool. */
static bool daemon_can_be_deleted(UserCreatable *uc)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(uc);

    return !dp->claiming && dp->state != VSRIOV_POOL_STATE_CLAIMING &&
           !(dp->client && vsriov_daemon_client_pending(dp->client)) &&
           USER_CREATABLE_CLASS(parent_class)->can_be_deleted(uc);
}

static void daemon_pool_class_init(ObjectClass *oc, const void *data)
{
    UserCreatableClass *ucc = USER_CREATABLE_CLASS(oc);
    VsriovPoolClass *pc = VSRIOV_POOL_CLASS(oc);

    parent_class = VSRIOV_POOL_CLASS(object_class_get_parent(oc));
    ucc->complete = daemon_pool_complete;
    ucc->can_be_deleted = daemon_can_be_deleted;
    pc->available = daemon_available;
    pc->claim = daemon_claim;
    pc->claim_async = daemon_claim_async;
    pc->release = daemon_release;
    pc->configure = daemon_configure;
    pc->backend_config = daemon_backend_config;
    pc->backend_mac = daemon_backend_mac;
    pc->handover_token = daemon_handover_token;
    pc->set_incoming_handover = daemon_set_incoming_handover;
    pc->unusable = daemon_unusable; /* (only its failed claims) */
    pc->state = daemon_state;
    pc->has_reps = daemon_has_reps;
    pc->rep_open = daemon_rep_open;
    pc->rep_close = daemon_rep_close;
    pc->flow_add = daemon_flow_add;
    pc->flow_del = daemon_flow_del;
    pc->flow_stats = daemon_flow_stats;
    pc->vf_stats = daemon_vf_stats;

    object_class_property_add_str(oc, "socket", get_socket, set_socket);
    object_class_property_set_description(oc, "socket",
        "path of vdpa-pool-daemon's API socket");
    object_class_property_add_str(oc, "fd", get_fd, set_fd);
    object_class_property_set_description(oc, "fd",
        "instead of socket: a connection to the daemon passed as a file "
        "descriptor (its monitor name, or number)");
    object_class_property_add_str(oc, "pool", get_pool, set_pool);
    object_class_property_set_description(oc, "pool",
        "name of the daemon's pool to claim VFs from");
    object_class_property_add(oc, "count", "uint32", get_count, set_count,
                              NULL, NULL);
    object_class_property_set_description(oc, "count",
        "how many VFs to claim");
    object_class_property_add_bool(oc, "handover", get_handover,
                                   set_handover);
    object_class_property_set_description(oc, "handover",
        "get the daemon's hand-over token with each claim, so that a "
        "migration's destination may take the MACs of this QEMU's VFs "
        "(the daemon's mac-handover = token)");
}

static const TypeInfo daemon_pool_info = {
    .name = TYPE_VSRIOV_DAEMON_POOL,
    .parent = TYPE_VSRIOV_POOL,
    .instance_size = sizeof(VsriovDaemonPool),
    .instance_init = daemon_pool_instance_init,
    .instance_finalize = daemon_pool_instance_finalize,
    .class_init = daemon_pool_class_init,
};

static void vsriov_daemon_pool_register_types(void)
{
    type_register_static(&daemon_pool_info);
}

type_init(vsriov_daemon_pool_register_types);
