/*
 * vsriov-daemon-pool: VF backends claimed from vdpa-pool-daemon
 *
 * The second provider of the vsriov-pool interface.  When the object is
 * created it connects to the daemon's API socket, claims @count VFs of the
 * daemon's pool @pool (docs/daemon-protocol.md) and receives one
 * vhost-vdpa file descriptor per VF; the first time a virtual PF asks for
 * backends, each descriptor becomes a vhost-vdpa netdev ("<id>.<n>").  The
 * VF configuration the guest sets through its PF (vfcfg.c) goes to the
 * daemon, which checks it against the pool's policy and applies it to the
 * datapath.  The connection stays open for the life of the object: when
 * QEMU exits or the object goes, the daemon releases the VFs.
 *
 *   -object vsriov-daemon-pool,id=p0,socket=/run/vdpa-pool-daemon/api.sock,
 *           pool=tenant-a,count=4
 *
 * With lazy=on nothing is claimed at creation: each VF the guest enables
 * is claimed then (one CLAIM of one VF, its netdev made from the
 * descriptor), and released when the guest disables it (the netdev goes,
 * which closes the descriptor, then RELEASE); @count is the most VFs held.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include <poll.h>
#include "qapi/error.h"
#include "qapi/qapi-commands-net.h"
#include "qapi/qapi-types-net.h"
#include "qapi/visitor.h"
#include "qemu/error-report.h"
#include "qemu/sockets.h"
#include "qom/object_interfaces.h"
#include "net/net.h"
#include "vsriov.h"
#include "trace.h"

#include <sys/socket.h>
#include <sys/un.h>

#define TYPE_VSRIOV_DAEMON_POOL "vsriov-daemon-pool"
OBJECT_DECLARE_SIMPLE_TYPE(VsriovDaemonPool, VSRIOV_DAEMON_POOL)

/* The daemon's wire format (docs/daemon-protocol.md) */
#define VPD_MAGIC           0x31445056u
#define VPD_VERSION         1
#define VPD_HEADER_SIZE     16
#define VPD_MAX_PAYLOAD     (64 * 1024)
#define VPD_MAX_FDS         253
#define VPD_MSG_CLAIM       1
#define VPD_MSG_RELEASE     2
#define VPD_MSG_SET_ATTRS   3
#define VPD_MSG_REPLY       64
#define VPD_MSG_ERROR       65
#define VPD_A_POOL          1
#define VPD_A_OWNER         2
#define VPD_A_COUNT         3
#define VPD_A_HANDLE        4
#define VPD_A_VF            5
#define VPD_A_MAC           7
#define VPD_A_VLAN          8
#define VPD_A_QOS           9
#define VPD_A_VLAN_PROTO    10
#define VPD_A_SPOOFCHK      11
#define VPD_A_TRUST         12
#define VPD_A_LINK_STATE    13
#define VPD_A_MIN_TX_RATE   14
#define VPD_A_MAX_TX_RATE   15
#define VPD_A_ERRNO         17
#define VPD_A_MESSAGE       18

#define VPD_TIMEOUT_S       5
#define VPD_MAX_LATE        16  /* late answers dropped in one transact */

/* What a CLAIM answer says of a VF, besides its handle and descriptor. */
typedef struct DaemonVF {
    MACAddr mac;            /* the daemon's MAC for it (zero: none) */
    bool spoofchk;          /* the daemon checks its source MACs */
} DaemonVF;

struct VsriovDaemonPool {
    VsriovPool parent_obj;

    /* properties */
    char *socket;
    char *pool;
    uint32_t count;

    /* runtime */
    int fd;                 /* connection to the daemon */
    uint32_t seq;
    GArray *late_handles;   /* VFs of CLAIM answers that came too late */
    GArray *late_claims;    /* sequence numbers of CLAIMs that timed out */
    bool releasing_late;
    int *vhost_fds;         /* until they become netdevs */
    uint32_t *handles;      /* the daemon's handle of each VF */
    DaemonVF *vfs;          /* what the daemon said of each VF */
    bool netdevs_created;
    int last_errno;         /* why the last transact() failed */
};

static VsriovPoolClass *parent_class;

/* ---- messages ----------------------------------------------------------- */

static void put_attr(GByteArray *m, uint16_t type, const void *v, uint16_t len)
{
    uint8_t hdr[4];
    static const uint8_t pad[3];

    stw_le_p(hdr, type);
    stw_le_p(hdr + 2, len);
    g_byte_array_append(m, hdr, 4);
    g_byte_array_append(m, v, len);
    g_byte_array_append(m, pad, (4 - len % 4) % 4);
}

static void put_u8(GByteArray *m, uint16_t type, uint8_t v)
{
    put_attr(m, type, &v, 1);
}

static void put_u16(GByteArray *m, uint16_t type, uint16_t v)
{
    uint8_t b[2];

    stw_le_p(b, v);
    put_attr(m, type, b, 2);
}

static void put_u32(GByteArray *m, uint16_t type, uint32_t v)
{
    uint8_t b[4];

    stl_le_p(b, v);
    put_attr(m, type, b, 4);
}

static void put_str(GByteArray *m, uint16_t type, const char *s)
{
    put_attr(m, type, s, strlen(s) + 1);
}

static GByteArray *msg_new(uint16_t type, uint32_t seq)
{
    GByteArray *m = g_byte_array_new();
    uint8_t hdr[VPD_HEADER_SIZE];

    stl_le_p(hdr, VPD_MAGIC);
    stw_le_p(hdr + 4, VPD_VERSION);
    stw_le_p(hdr + 6, type);
    stl_le_p(hdr + 8, seq);
    stl_le_p(hdr + 12, 0);
    g_byte_array_append(m, hdr, sizeof(hdr));
    return m;
}

/*
 * Read one message from the daemon: its header into @hdr, its payload, and
 * the fds that came with it into @fds (VPD_MAX_FDS of them at most; more is
 * an error).  NULL with @errp set on failure, no fds left open.
 */
static GByteArray *recv_answer(VsriovDaemonPool *dp, uint8_t *hdr, int *fds,
                               int *nfds, int64_t deadline, Error **errp)
{
    const int max_fds = VPD_MAX_FDS;
    const char *id = object_get_canonical_path_component(OBJECT(dp));
    union {
        char buf[CMSG_SPACE(sizeof(int) * VPD_MAX_FDS)];
        struct cmsghdr align;
    } u;
    g_autoptr(GByteArray) payload = g_byte_array_new();
    uint32_t len, got = 0;
    int n_fds = 0;

    while (got < VPD_HEADER_SIZE + payload->len || got < VPD_HEADER_SIZE) {
        struct iovec iov;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
                             .msg_control = u.buf,
                             .msg_controllen = sizeof(u.buf) };
        struct cmsghdr *cm;
        ssize_t r;

        if (got < VPD_HEADER_SIZE) {
            iov.iov_base = hdr + got;
            iov.iov_len = VPD_HEADER_SIZE - got;
        } else {
            iov.iov_base = payload->data + got - VPD_HEADER_SIZE;
            iov.iov_len = payload->len - (got - VPD_HEADER_SIZE);
        }
        /* One deadline for the whole request, however the bytes trickle. */
        struct pollfd pfd = { .fd = dp->fd, .events = POLLIN };
        int64_t left = (deadline - g_get_monotonic_time()) / 1000;

        if (left <= 0 || poll(&pfd, 1, left) == 0) {
            dp->last_errno = ETIMEDOUT;
            error_setg(errp, "vsriov-daemon-pool '%s': %s did not answer "
                       "within %d s", id, dp->socket, VPD_TIMEOUT_S);
            goto fail;
        }
        r = recvmsg(dp->fd, &mh, MSG_CMSG_CLOEXEC);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                int k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

                for (int i = 0; i < k; i++) {
                    int fd;

                    memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                    if (n_fds < max_fds) {
                        fds[n_fds++] = fd;
                    } else {
                        close(fd);
                        n_fds = max_fds + 1;
                    }
                }
            }
        }
        if (r <= 0) {
            error_setg(errp, "vsriov-daemon-pool '%s': %s closed the "
                       "connection or did not answer within %d s", id,
                       dp->socket, VPD_TIMEOUT_S);
            goto fail;
        }
        got += r;
        if (got == VPD_HEADER_SIZE) {
            len = ldl_le_p(hdr + 12);
            if (ldl_le_p(hdr) != VPD_MAGIC || len > VPD_MAX_PAYLOAD ||
                (len % 4)) {
                error_setg(errp, "vsriov-daemon-pool '%s': %s does not speak "
                           "the vdpa-pool-daemon protocol", id, dp->socket);
                goto fail;
            }
            g_byte_array_set_size(payload, len);
        }
    }
    if (n_fds > max_fds) {
        error_setg(errp, "vsriov-daemon-pool '%s': the daemon sent more file "
                   "descriptors than the protocol allows", id);
        goto fail;
    }
    *nfds = n_fds;
    return g_steal_pointer(&payload);

fail:
    for (int i = 0; i < MIN(n_fds, max_fds); i++) {
        close(fds[i]);
    }
    return NULL;
}

/*
 * The HANDLE of each VF attribute of a CLAIM reply, in order, into
 * @handles (@max at most), and its MAC and spoof check into @vfs unless
 * NULL (zero if it has none): how many, or 0 if the reply is malformed.
 */
static uint32_t parse_handles(GByteArray *p, uint32_t *handles, DaemonVF *vfs,
                              uint32_t max)
{
    uint32_t found = 0;

    for (uint32_t o = 0; o + 4 <= p->len;) {
        uint16_t t = lduw_le_p(p->data + o);
        uint16_t l = lduw_le_p(p->data + o + 2);

        if (o + 4 + l > p->len) {
            return 0;
        }
        if (t == VPD_A_VF && found < max) {
            bool has_handle = false;

            if (vfs) {
                memset(&vfs[found], 0, sizeof(vfs[found]));
            }
            for (uint32_t i = o + 4; i + 4 <= o + 4 + l;) {
                uint16_t it = lduw_le_p(p->data + i);
                uint16_t il = lduw_le_p(p->data + i + 2);

                if (i + 4 + il > o + 4 + l) {
                    break;
                }
                if (it == VPD_A_HANDLE && il == 4) {
                    handles[found] = ldl_le_p(p->data + i + 4);
                    has_handle = true;
                } else if (it == VPD_A_MAC && il == 6 && vfs) {
                    memcpy(vfs[found].mac.a, p->data + i + 4, 6);
                } else if (it == VPD_A_SPOOFCHK && il == 1 && vfs) {
                    vfs[found].spoofchk = p->data[i + 4] == 1;
                }
                i += 4 + ROUND_UP(il, 4);
            }
            found += has_handle;
        }
        o += 4 + ROUND_UP(l, 4);
    }
    return found;
}

static void release_handle(VsriovDaemonPool *dp, uint32_t handle);

/*
 * Give back the VFs of CLAIM answers that came after their request had
 * timed out (see transact()).  Not again from within release_handle's own
 * transact: what that one finds is given back the next time.
 */
static void release_late(VsriovDaemonPool *dp)
{
    while (dp->late_handles->len && !dp->releasing_late) {
        uint32_t h = g_array_index(dp->late_handles, uint32_t,
                                   dp->late_handles->len - 1);

        g_array_set_size(dp->late_handles, dp->late_handles->len - 1);
        dp->releasing_late = true;
        release_handle(dp, h);
        dp->releasing_late = false;
    }
}

/*
 * An answer to a request that had timed out: drop it; if it answers a
 * CLAIM, keep its VFs' handles, to give them back.  (Other answers name
 * VFs too: a late SET_ATTRS answer names the VF it changed, which stays
 * this VM's.)
 */
static void drop_late_answer(VsriovDaemonPool *dp, const uint8_t *hdr,
                             GByteArray *payload, int *fds, int n_fds)
{
    uint32_t seq = ldl_le_p(hdr + 8);
    uint32_t handles[VPD_MAX_FDS];
    uint32_t n = 0;
    bool claim = false;

    for (int i = 0; i < n_fds; i++) {
        close(fds[i]);
    }
    for (guint i = 0; i < dp->late_claims->len; i++) {
        if (g_array_index(dp->late_claims, uint32_t, i) == seq) {
            g_array_remove_index_fast(dp->late_claims, i);
            claim = true;
            break;
        }
    }
    if (claim && lduw_le_p(hdr + 6) == VPD_MSG_REPLY) {
        /* a CLAIM answer has one VF, and one fd, per VF */
        n = parse_handles(payload, handles, NULL, VPD_MAX_FDS);
        g_array_append_vals(dp->late_handles, handles, n);
    }
    trace_vsriov_daemon_pool_late_answer(
        object_get_canonical_path_component(OBJECT(dp)), ldl_le_p(hdr + 8), n);
}

/*
 * Send @m and read the answer: its payload, and the fds that came with it
 * (at most @max_fds; more is an error).  An ERROR answer becomes @errp
 * with the daemon's sentence.
 *
 * A request that timed out may still be answered later: such an answer has
 * an older sequence number and is dropped here, its fds closed and, for a
 * CLAIM, its VFs given back once this request has its answer.
 */
static bool daemon_connect(VsriovDaemonPool *dp, Error **errp)
{
    const char *id = object_get_canonical_path_component(OBJECT(dp));
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    struct timeval tv = { .tv_sec = VPD_TIMEOUT_S };

    strcpy(addr.sun_path, dp->socket);  /* its length was checked */
    dp->fd = qemu_socket(AF_UNIX, SOCK_STREAM, 0);
    if (dp->fd < 0 ||
        connect(dp->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        error_setg_errno(errp, errno, "vsriov-daemon-pool '%s': cannot "
                         "connect to vdpa-pool-daemon at %s", id, dp->socket);
        if (dp->fd >= 0) {
            close(dp->fd);
            dp->fd = -1;
        }
        return false;
    }
    setsockopt(dp->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(dp->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return true;
}

/*
 * A daemon that was restarted has closed our connection; connected again,
 * it gives this process back what it held (same pid and uid), so a
 * request after a restart works.  An open connection is kept, with any
 * late answers waiting in it.
 */
static bool ensure_connected(VsriovDaemonPool *dp, Error **errp)
{
    char c;
    ssize_t r;

    if (dp->fd >= 0) {
        r = recv(dp->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) {
            return true;
        }
        close(dp->fd);
        dp->fd = -1;
        /* no late answer comes on a new connection */
        g_array_set_size(dp->late_claims, 0);
        trace_vsriov_daemon_pool_reconnect(
            object_get_canonical_path_component(OBJECT(dp)), dp->socket);
    }
    return daemon_connect(dp, errp);
}

static GByteArray *transact(VsriovDaemonPool *dp, GByteArray *m, int *fds,
                            int max_fds, int *nfds, Error **errp)
{
    const char *id = object_get_canonical_path_component(OBJECT(dp));
    uint32_t seq = ldl_le_p(m->data + 8);
    uint8_t hdr[VPD_HEADER_SIZE];
    g_autoptr(GByteArray) payload = NULL;
    int got_fds[VPD_MAX_FDS];
    int n_fds = 0;
    int64_t deadline = g_get_monotonic_time() +
                       VPD_TIMEOUT_S * G_USEC_PER_SEC;

    stl_le_p(m->data + 12, m->len - VPD_HEADER_SIZE);
    dp->last_errno = EIO;
    if (!ensure_connected(dp, errp)) {
        return NULL;
    }
    if (qemu_send_full(dp->fd, m->data, m->len) != m->len) {
        error_setg(errp, "vsriov-daemon-pool '%s': cannot send to %s",
                   id, dp->socket);
        return NULL;
    }
    for (unsigned late = 0;; late++) {
        payload = recv_answer(dp, hdr, got_fds, &n_fds, deadline, errp);
        if (!payload) {
            if (lduw_le_p(m->data + 6) == VPD_MSG_CLAIM &&
                dp->late_claims->len < VPD_MAX_LATE) {
                /* its answer may still come, with VFs to give back */
                g_array_append_val(dp->late_claims, seq);
            }
            return NULL;
        }
        if (ldl_le_p(hdr + 8) == seq) {
            break;
        }
        drop_late_answer(dp, hdr, payload, got_fds, n_fds);
        g_clear_pointer(&payload, g_byte_array_unref);
        n_fds = 0;
        if (late == VPD_MAX_LATE) {
            error_setg(errp, "vsriov-daemon-pool '%s': the daemon's answers "
                       "do not match the requests", id);
            return NULL;
        }
    }
    release_late(dp);       /* in step with the daemon again */
    if (n_fds > max_fds) {
        error_setg(errp, "vsriov-daemon-pool '%s': the daemon sent more file "
                   "descriptors than asked for", id);
        goto fail;
    }
    if (lduw_le_p(hdr + 6) == VPD_MSG_ERROR) {
        const char *msg = "unknown error";

        for (uint32_t o = 0; o + 4 <= payload->len;) {
            uint16_t t = lduw_le_p(payload->data + o);
            uint16_t l = lduw_le_p(payload->data + o + 2);

            if (o + 4 + l > payload->len) {
                break;
            }
            if (t == VPD_A_MESSAGE && l && !payload->data[o + 4 + l - 1]) {
                msg = (const char *)payload->data + o + 4;
            } else if (t == VPD_A_ERRNO && l == 4) {
                uint32_t e = ldl_le_p(payload->data + o + 4);

                if (e && e < 4096) {
                    dp->last_errno = e;
                }
            }
            o += 4 + ROUND_UP(l, 4);
        }
        error_setg(errp, "vsriov-daemon-pool '%s': the daemon refused: %s",
                   id, msg);
        goto fail;
    }
    if (lduw_le_p(hdr + 6) != VPD_MSG_REPLY) {
        error_setg(errp, "vsriov-daemon-pool '%s': unexpected answer type %u",
                   id, lduw_le_p(hdr + 6));
        goto fail;
    }
    if (n_fds) {
        memcpy(fds, got_fds, sizeof(int) * n_fds);
    }
    *nfds = n_fds;
    return g_steal_pointer(&payload);

fail:
    for (int i = 0; i < n_fds; i++) {
        close(got_fds[i]);
    }
    return NULL;
}

/* ---- the pool ----------------------------------------------------------- */

static char *entry_netdev(VsriovDaemonPool *dp, uint32_t i)
{
    return g_strdup_printf("%s.%u",
                           object_get_canonical_path_component(OBJECT(dp)), i);
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
                object_get_canonical_path_component(OBJECT(dp)), i);
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

/* Tell the daemon a VF is no longer ours. */
static void release_handle(VsriovDaemonPool *dp, uint32_t handle)
{
    g_autoptr(GByteArray) m = msg_new(VPD_MSG_RELEASE, ++dp->seq);
    g_autoptr(GByteArray) reply = NULL;
    Error *err = NULL;
    int nfds;

    put_u32(m, VPD_A_HANDLE, handle);
    reply = transact(dp, m, NULL, 0, &nfds, &err);
    if (!reply) {
        vsriov_report_guest_err(err);   /* at a VF disable, too */
    }
}

/* Lazy: claim one VF from the daemon and make its netdev. */
static NetClientState *claim_one(VsriovDaemonPool *dp, const char *owner,
                                 Error **errp)
{
    VsriovPool *pool = VSRIOV_POOL(dp);
    const char *id = object_get_canonical_path_component(OBJECT(dp));
    g_autoptr(GByteArray) m = NULL;
    g_autoptr(GByteArray) reply = NULL;
    g_autofree char *netdev = NULL;
    g_autofree char *fd_str = NULL;
    NetClientState *nc;
    uint32_t handle;
    DaemonVF vf;
    int fd = -1, nfds = 0;
    guint i;

    for (i = 0; i < pool->entries->len && entry(pool, i)->owner; i++) {
        /* first free slot */
    }
    if (i == pool->entries->len) {
        error_setg(errp, "vsriov-daemon-pool '%s': all %u VFs (count) are "
                   "claimed", id, dp->count);
        return NULL;
    }
    m = msg_new(VPD_MSG_CLAIM, ++dp->seq);
    put_str(m, VPD_A_POOL, dp->pool);
    put_str(m, VPD_A_OWNER, owner);
    put_u32(m, VPD_A_COUNT, 1);
    reply = transact(dp, m, &fd, 1, &nfds, errp);
    if (!reply) {
        return NULL;
    }
    if (parse_handles(reply, &handle, &vf, 1) != 1) {
        if (nfds) {
            close(fd);
        }
        error_setg(errp, "vsriov-daemon-pool '%s': the daemon's answer to "
                   "CLAIM names no VF", id);
        return NULL;
    }
    if (nfds != 1) {
        release_handle(dp, handle);
        error_setg(errp, "vsriov-daemon-pool '%s': the daemon's answer to "
                   "CLAIM has no descriptor", id);
        return NULL;
    }
    netdev = entry_netdev(dp, i);
    if (qemu_find_netdev(netdev)) {
        /* netdev_add would refuse it before taking the descriptor */
        close(fd);
        release_handle(dp, handle);
        error_setg(errp, "vsriov-daemon-pool '%s': a netdev named '%s' "
                   "exists already", id, netdev);
        return NULL;
    }
    fd_str = g_strdup_printf("%d", fd);
    {
        Netdev nd = {
            .id = netdev,
            .type = NET_CLIENT_DRIVER_VHOST_VDPA,
            .u.vhost_vdpa.vhostfd = fd_str,
        };

        qmp_netdev_add(&nd, errp);  /* owns the descriptor from now on */
    }
    nc = qemu_find_netdev(netdev);
    if (!nc) {
        error_prepend(errp, "vsriov-daemon-pool '%s': VF handle %u: ", id,
                      handle);
        release_handle(dp, handle);
        return NULL;
    }
    dp->handles[i] = handle;
    dp->vfs[i] = vf;
    entry(pool, i)->owner = g_strdup(owner);
    trace_vsriov_pool_claim(id, netdev, owner);
    return nc;
}

static unsigned daemon_available(VsriovPool *pool)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);
    Error *err = NULL;

    if (pool->lazy) {
        unsigned n = 0;

        for (guint i = 0; i < pool->entries->len; i++) {
            n += !entry(pool, i)->owner;
        }
        return n;
    }
    if (!dp->netdevs_created) {
        /*
         * Their netdevs are made at the first claim, not here: a query
         * (query-vsriov-pools) changes nothing.  None is taken yet.
         */
        return dp->count;
    }
    return parent_class->available(pool);
}

static NetClientState *daemon_claim(VsriovPool *pool, const char *owner,
                                    Error **errp)
{
    if (pool->lazy) {
        return claim_one(VSRIOV_DAEMON_POOL(pool), owner, errp);
    }
    if (!ensure_netdevs(VSRIOV_DAEMON_POOL(pool), errp)) {
        return NULL;
    }
    return parent_class->claim(pool, owner, errp);
}

static void daemon_release(VsriovPool *pool, const char *netdev)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);
    const char *id = object_get_canonical_path_component(OBJECT(dp));

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
            release_handle(dp, dp->handles[i]);
            trace_vsriov_daemon_pool_released(id, dp->handles[i], dp->pool);
            g_free(e->owner);
            e->owner = NULL;
            return;
        }
    }
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

static int daemon_configure(VsriovPool *pool, NetClientState *nc,
                            const VsriovVFConfig *c, uint32_t changed,
                            Error **errp)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(pool);
    g_autoptr(GByteArray) m = NULL;
    g_autoptr(GByteArray) reply = NULL;
    uint32_t i;
    int nfds;

    for (i = 0; i < dp->count; i++) {
        g_autofree char *id = entry_netdev(dp, i);

        if (!strcmp(id, nc->name)) {
            break;
        }
    }
    if (i == dp->count) {
        error_setg(errp, "netdev '%s' is not one of this pool's", nc->name);
        return -EINVAL;
    }
    m = msg_new(VPD_MSG_SET_ATTRS, ++dp->seq);
    put_u32(m, VPD_A_HANDLE, dp->handles[i]);
    if ((changed & VSRIOV_VF_CFG_MAC) && c->mac_set) {
        put_attr(m, VPD_A_MAC, c->mac, 6);
    }
    if (changed & VSRIOV_VF_CFG_VLAN) {
        put_u16(m, VPD_A_VLAN, c->vlan);
        put_u8(m, VPD_A_QOS, c->qos);
        put_u16(m, VPD_A_VLAN_PROTO, c->vlan_proto);
    }
    if (changed & VSRIOV_VF_CFG_SPOOFCHK) {
        put_u8(m, VPD_A_SPOOFCHK, c->spoofchk);
    }
    if (changed & VSRIOV_VF_CFG_TRUST) {
        put_u8(m, VPD_A_TRUST, c->trust);
    }
    if (changed & VSRIOV_VF_CFG_LINK_STATE) {
        put_u8(m, VPD_A_LINK_STATE, c->link_state);
    }
    if (changed & VSRIOV_VF_CFG_RATE) {
        put_u32(m, VPD_A_MIN_TX_RATE, c->min_tx_rate);
        put_u32(m, VPD_A_MAX_TX_RATE, c->max_tx_rate);
    }
    reply = transact(dp, m, NULL, 0, &nfds, errp);
    if (reply) {
        return 0;
    }
    /*
     * QEMU checked the values already: what the daemon calls invalid
     * (EINVAL: outside the pool's policy, docs/daemon-protocol.md) is its
     * policy's refusal.
     */
    return dp->last_errno == EINVAL ? -EPERM : -dp->last_errno;
}

static void daemon_pool_complete(UserCreatable *uc, Error **errp)
{
    VsriovDaemonPool *dp = VSRIOV_DAEMON_POOL(uc);
    VsriovPool *pool = VSRIOV_POOL(uc);
    const char *id = object_get_canonical_path_component(OBJECT(uc));
    struct sockaddr_un addr;
    g_autoptr(GByteArray) m = NULL;
    g_autoptr(GByteArray) reply = NULL;
    int nfds = 0;

    if (pool->entries->len) {
        error_setg(errp, "vsriov-daemon-pool '%s' takes its backends from "
                   "the daemon, not from 'netdevs'", id);
        return;
    }
    if (!dp->socket || !dp->pool || !dp->count) {
        error_setg(errp, "vsriov-daemon-pool '%s' needs socket, pool and "
                   "count", id);
        return;
    }
    if (dp->count > VPD_MAX_FDS) {
        error_setg(errp, "vsriov-daemon-pool '%s': count is at most %d",
                   id, VPD_MAX_FDS);
        return;
    }
    if (strlen(dp->socket) >= sizeof(addr.sun_path)) {
        error_setg(errp, "vsriov-daemon-pool '%s': socket path too long", id);
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

    m = msg_new(VPD_MSG_CLAIM, ++dp->seq);
    put_str(m, VPD_A_POOL, dp->pool);
    put_str(m, VPD_A_OWNER, id);
    put_u32(m, VPD_A_COUNT, dp->count);
    dp->vhost_fds = g_new(int, dp->count);
    for (uint32_t i = 0; i < dp->count; i++) {
        dp->vhost_fds[i] = -1;
    }
    dp->handles = g_new0(uint32_t, dp->count);
    dp->vfs = g_new0(DaemonVF, dp->count);
    reply = transact(dp, m, dp->vhost_fds, dp->count, &nfds, errp);
    if (!reply) {
        for (uint32_t i = 0; i < dp->count; i++) {
            dp->vhost_fds[i] = -1;  /* transact closed what it got */
        }
        return;
    }
    if (nfds != dp->count ||
        parse_handles(reply, dp->handles, dp->vfs, dp->count) != dp->count) {
        for (int i = 0; i < nfds; i++) {
            close(dp->vhost_fds[i]);
            dp->vhost_fds[i] = -1;
        }
        error_setg(errp, "vsriov-daemon-pool '%s': the daemon's answer to "
                   "CLAIM has %d descriptor(s) for %u VF(s)", id, nfds,
                   dp->count);
        return;
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

    dp->fd = -1;
    dp->late_handles = g_array_new(false, false, sizeof(uint32_t));
    dp->late_claims = g_array_new(false, false, sizeof(uint32_t));
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
    /* Closing the connection releases the VFs in the daemon. */
    if (dp->fd >= 0) {
        close(dp->fd);
    }
    g_array_unref(dp->late_handles);
    g_array_unref(dp->late_claims);
    g_free(dp->vhost_fds);
    g_free(dp->handles);
    g_free(dp->vfs);
    g_free(dp->socket);
    g_free(dp->pool);
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

static char *get_pool(Object *obj, Error **errp)
{
    return g_strdup(VSRIOV_DAEMON_POOL(obj)->pool);
}

static void set_pool(Object *obj, const char *v, Error **errp)
{
    g_free(VSRIOV_DAEMON_POOL(obj)->pool);
    VSRIOV_DAEMON_POOL(obj)->pool = g_strdup(v);
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

static void daemon_pool_class_init(ObjectClass *oc, const void *data)
{
    UserCreatableClass *ucc = USER_CREATABLE_CLASS(oc);
    VsriovPoolClass *pc = VSRIOV_POOL_CLASS(oc);

    parent_class = VSRIOV_POOL_CLASS(object_class_get_parent(oc));
    ucc->complete = daemon_pool_complete;
    pc->available = daemon_available;
    pc->claim = daemon_claim;
    pc->release = daemon_release;
    pc->configure = daemon_configure;
    pc->backend_config = daemon_backend_config;
    pc->backend_mac = daemon_backend_mac;
    pc->unusable = NULL;    /* its backends are the daemon's, made here */

    object_class_property_add_str(oc, "socket", get_socket, set_socket);
    object_class_property_set_description(oc, "socket",
        "path of vdpa-pool-daemon's API socket");
    object_class_property_add_str(oc, "pool", get_pool, set_pool);
    object_class_property_set_description(oc, "pool",
        "name of the daemon's pool to claim VFs from");
    object_class_property_add(oc, "count", "uint32", get_count, set_count,
                              NULL, NULL);
    object_class_property_set_description(oc, "count",
        "how many VFs to claim");
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
