/*
 * vsriov-daemon-pool's client of vdpa-pool-daemon: the connection
 *
 * One connection per pool (a QIOChannelSocket), on QEMU's main loop:
 * requests are written without blocking, answers are read by a fd handler
 * as they come, in pieces if they trickle, with at most VPD_MSG_FDS
 * descriptors each, and matched to their request by sequence number.
 * Each request has a deadline (VPD_TIMEOUT_S); a timer fails the ones that
 * pass it.  A request's completion runs from a bottom half, never inside
 * the call that sent it nor inside another request's wait, and in the
 * iohandler context, not the main one: block-layer drains (in a device's
 * reset, say) poll that one, and a completion may replace VFs.
 *
 * Only a pool's creation on the command line, before the machine runs,
 * waits for its answers (vsriov_daemon_transact(), which reads the same
 * stream with poll() up to the request's deadline); everything else,
 * a pool added at run time included, completes in the main loop: nothing
 * waits for the daemon with the BQL held while vCPUs run.  What the
 * answers mean is the pool's (daemon-pool.c): this file knows the
 * framing, the sequence numbers, the deadlines and which late answers
 * were CLAIMs.
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include <poll.h>
#include "io/channel-socket.h"
#include "qapi/error.h"
#include "qemu/main-loop.h"
#include "qemu/sockets.h"
#include "qemu/timer.h"
#include "daemon-client.h"
#include "trace.h"

#include <sys/socket.h>
#include <sys/un.h>

/* timed-out CLAIMs whose VFs come back: all that can be in flight */
#define VPD_MAX_LATE        VPD_MAX_PENDING

struct VsriovDaemonClient {
    Object *owner;          /* referenced while completions run */
    char *id;               /* the owner's, for messages */
    char *socket;           /* its path, or "fd 'NAME'", for messages */
    bool fixed;             /* passed as a file descriptor: no reconnect */
    const VsriovDaemonClientOps *ops;
    void *opaque;
    QIOChannelSocket *sioc; /* connection to the daemon, or NULL */
    uint32_t seq;
    QTAILQ_HEAD(, DaemonReq) pending;   /* sent, in order, not answered */
    unsigned n_pending;
    QTAILQ_HEAD(, DaemonReq) finished;  /* their completion to run */
    QEMUBH *done_bh;
    QEMUTimer *deadline_timer;
    GByteArray *out;        /* bytes not sent yet */
    uint8_t in_hdr[VPD_HEADER_SIZE];    /* the message being read */
    GByteArray *in_payload;
    uint32_t in_got;
    int in_fds[VPD_MSG_FDS];
    int in_nfds;            /* VPD_MSG_FDS + 1: too many came */
    GArray *late_claims;    /* sequence numbers of CLAIMs that timed out */
};

static void conn_readable(void *opaque);
static void conn_writable(void *opaque);

static void req_free(DaemonReq *req)
{
    for (int i = 0; i < req->nfds; i++) {
        close(req->fds[i]);
    }
    g_free(req->fds);
    vpd_msg_free(req->reply);
    error_free(req->error);
    g_free(req);
}

/* Run the completions of what finished; true if one had its answer. */
static bool run_completions(VsriovDaemonClient *c)
{
    DaemonReq *req;
    bool answered = false;

    while ((req = QTAILQ_FIRST(&c->finished))) {
        QTAILQ_REMOVE(&c->finished, req, next);
        answered |= !req->err;
        req->done(req);
        req_free(req);
    }
    return answered;
}

static void done_bh(void *opaque)
{
    VsriovDaemonClient *c = opaque;

    /* a completion may drop what else held the pool */
    object_ref(c->owner);
    if (run_completions(c) && c->ops->answered) {
        c->ops->answered(c->opaque);
    }
    object_unref(c->owner);
}

/*
 * @req is answered or failed (err 0 or a positive errno, @error with it):
 * its waiter sees it now, its completion runs from the bottom half.
 */
static void req_finish(DaemonReq *req, int err, Error *error)
{
    VsriovDaemonClient *c = req->client;

    req->finished = true;
    req->err = err;
    req->error = error;
    if (req->done) {
        QTAILQ_INSERT_TAIL(&c->finished, req, next);
        qemu_bh_schedule(c->done_bh);
    }
}

static void conn_set_handlers(VsriovDaemonClient *c, IOHandler *io_read,
                              IOHandler *io_write)
{
    AioContext *ctx = iohandler_get_aio_context();

    qio_channel_set_aio_fd_handler(QIO_CHANNEL(c->sioc), ctx, io_read,
                                   ctx, io_write, c);
}

static void conn_update_handlers(VsriovDaemonClient *c)
{
    if (c->sioc) {
        conn_set_handlers(c, conn_readable,
                          c->out->len ? conn_writable : NULL);
    }
}

static void conn_reset_reader(VsriovDaemonClient *c)
{
    for (int i = 0; i < MIN(c->in_nfds, VPD_MSG_FDS); i++) {
        close(c->in_fds[i]);
    }
    c->in_nfds = 0;
    c->in_got = 0;
    g_byte_array_set_size(c->in_payload, 0);
}

/*
 * The connection is gone or unusable (@why): every request in flight
 * fails, and the next one connects again.
 */
void vsriov_daemon_client_close(VsriovDaemonClient *c, const char *why)
{
    DaemonReq *req;

    if (!c->sioc) {
        return;
    }
    trace_vsriov_daemon_pool_disconnect(c->id, c->socket, why);
    conn_set_handlers(c, NULL, NULL);
    object_unref(OBJECT(c->sioc));     /* closes it */
    c->sioc = NULL;
    conn_reset_reader(c);
    g_byte_array_set_size(c->out, 0);
    /* no late answer comes on a new connection */
    g_array_set_size(c->late_claims, 0);
    if (c->ops->closed) {
        c->ops->closed(c->opaque);
    }
    while ((req = QTAILQ_FIRST(&c->pending))) {
        Error *err = NULL;

        QTAILQ_REMOVE(&c->pending, req, next);
        c->n_pending--;
        error_setg(&err, "vsriov-daemon-pool '%s': %s: %s", c->id,
                   c->socket, why);
        req_finish(req, EIO, err);
    }
    timer_del(c->deadline_timer);
}

static void conn_flush(VsriovDaemonClient *c)
{
    while (c->sioc && c->out->len) {
        Error *err = NULL;
        ssize_t r = qio_channel_write(QIO_CHANNEL(c->sioc),
                                      (const char *)c->out->data,
                                      c->out->len, &err);

        if (r == QIO_CHANNEL_ERR_BLOCK) {
            break;
        }
        if (r <= 0) {
            g_autofree char *why =
                g_strdup_printf("cannot send: %s",
                                err ? error_get_pretty(err) : "no progress");

            error_free(err);
            vsriov_daemon_client_close(c, why);
            return;
        }
        g_byte_array_remove_range(c->out, 0, r);
    }
    conn_update_handlers(c);
}

static void conn_writable(void *opaque)
{
    conn_flush(opaque);
}

/* The ERROR answer's sentence and errno, as @req's failure. */
static void req_refused(DaemonReq *req, const struct vpd_msg *msg)
{
    const char *text = vpd_attr_str(vpd_msg_get(msg, VPD_A_MESSAGE));
    Error *err = NULL;
    uint32_t e = 0;

    if (!vpd_attr_u32(vpd_msg_get(msg, VPD_A_ERRNO), &e) || !e || e >= 4096) {
        e = EIO;
    }
    error_setg(&err, "vsriov-daemon-pool '%s': the daemon refused: %s",
               req->client->id, text ?: "unknown error");
    req_finish(req, e, err);
}

/*
 * An answer whose request is no longer waited for (it timed out): if it
 * answers a CLAIM, its owner gives its VFs back at once.  (Other answers
 * name VFs too: a late SET_ATTRS answer names the VF it changed, which
 * stays this VM's.)
 */
static void conn_late_answer(VsriovDaemonClient *c, const struct vpd_msg *msg)
{
    bool claim = false;

    for (guint i = 0; i < c->late_claims->len; i++) {
        if (g_array_index(c->late_claims, uint32_t, i) == msg->seq) {
            g_array_remove_index_fast(c->late_claims, i);
            claim = true;
            break;
        }
    }
    if (claim && msg->type == VPD_MSG_REPLY) {
        c->ops->unwanted_claim(c->opaque, msg);
    }
    trace_vsriov_daemon_pool_late_answer(c->id, msg->seq, claim);
}

/*
 * A whole message was read: it goes to its request.  The reader is reset
 * first (what follows may send, and so read, again).
 */
static void conn_dispatch(VsriovDaemonClient *c)
{
    g_autoptr(GByteArray) bytes = g_byte_array_new();
    g_autoptr(GBytes) whole = NULL;
    g_autoptr(GError) gerr = NULL;
    g_autoptr(vpd_msg) msg = NULL;
    int fds[VPD_MSG_FDS];
    int nfds = c->in_nfds;
    DaemonReq *req = NULL;
    Error *err = NULL;

    g_byte_array_append(bytes, c->in_hdr, VPD_HEADER_SIZE);
    g_byte_array_append(bytes, c->in_payload->data, c->in_payload->len);
    memcpy(fds, c->in_fds, sizeof(int) * MIN(nfds, VPD_MSG_FDS));
    c->in_nfds = 0;
    conn_reset_reader(c);
    whole = g_byte_array_free_to_bytes(g_steal_pointer(&bytes));
    msg = vpd_msg_parse(whole, &gerr);
    if (msg) {
        QTAILQ_FOREACH(req, &c->pending, next) {
            if (req->seq == msg->seq) {
                break;
            }
        }
    }
    if (!msg || !req || nfds > VPD_MSG_FDS || nfds > req->max_fds ||
        msg->type != VPD_MSG_REPLY) {
        for (int i = 0; i < MIN(nfds, VPD_MSG_FDS); i++) {
            close(fds[i]);
        }
    }
    if (!msg) {
        g_autofree char *why = g_strdup_printf("malformed answer: %s",
                                               gerr->message);

        vsriov_daemon_client_close(c, why);
        return;
    }
    if (!req) {
        conn_late_answer(c, msg);
        return;
    }
    QTAILQ_REMOVE(&c->pending, req, next);
    c->n_pending--;
    if (nfds > VPD_MSG_FDS || nfds > req->max_fds) {
        if (req->type == VPD_MSG_CLAIM && msg->type == VPD_MSG_REPLY) {
            c->ops->unwanted_claim(c->opaque, msg);  /* nobody takes them */
        }
        error_setg(&err, "vsriov-daemon-pool '%s': the daemon sent more "
                   "file descriptors than asked for", c->id);
        req_finish(req, EIO, err);
    } else if (msg->type == VPD_MSG_ERROR) {
        req_refused(req, msg);
    } else if (msg->type != VPD_MSG_REPLY) {
        error_setg(&err, "vsriov-daemon-pool '%s': unexpected answer type %u",
                   c->id, msg->type);
        req_finish(req, EIO, err);
    } else {
        req->fds = g_memdup2(fds, sizeof(int) * nfds);
        req->nfds = nfds;
        req->reply = g_steal_pointer(&msg);
        req_finish(req, 0, NULL);
    }
}

/* Read what the daemon sent, without waiting for more. */
static void conn_read(VsriovDaemonClient *c)
{
    while (c->sioc) {
        g_autofree int *fds = NULL;
        size_t nfds = 0;
        struct iovec iov;
        Error *err = NULL;
        ssize_t r;

        if (c->in_got < VPD_HEADER_SIZE) {
            iov.iov_base = c->in_hdr + c->in_got;
            iov.iov_len = VPD_HEADER_SIZE - c->in_got;
        } else {
            iov.iov_base = c->in_payload->data + c->in_got -
                           VPD_HEADER_SIZE;
            iov.iov_len = c->in_payload->len -
                          (c->in_got - VPD_HEADER_SIZE);
        }
        /* (vhost-vdpa descriptors stay as the daemon opened them) */
        r = qio_channel_readv_full(QIO_CHANNEL(c->sioc), &iov, 1, &fds,
                                   &nfds,
                                   QIO_CHANNEL_READ_FLAG_FD_PRESERVE_BLOCKING,
                                   &err);
        if (r == QIO_CHANNEL_ERR_BLOCK) {
            return;
        }
        for (size_t i = 0; i < nfds; i++) {
            if (c->in_nfds < VPD_MSG_FDS) {
                c->in_fds[c->in_nfds++] = fds[i];
            } else {
                close(fds[i]);
                c->in_nfds = VPD_MSG_FDS + 1;
            }
        }
        if (r < 0) {
            g_autofree char *why =
                g_strdup_printf("cannot read: %s", error_get_pretty(err));

            error_free(err);
            vsriov_daemon_client_close(c, why);
            return;
        }
        if (r == 0) {
            vsriov_daemon_client_close(c, "the daemon closed the connection");
            return;
        }
        c->in_got += r;
        if (c->in_got == VPD_HEADER_SIZE) {
            gssize total = vpd_msg_total_len(c->in_hdr, VPD_HEADER_SIZE,
                                             NULL);

            if (total < 0) {
                vsriov_daemon_client_close(c, "the peer does not speak "
                                           "the vdpa-pool-daemon protocol");
                return;
            }
            g_byte_array_set_size(c->in_payload, total - VPD_HEADER_SIZE);
        }
        if (c->in_got == VPD_HEADER_SIZE + c->in_payload->len) {
            conn_dispatch(c);
        }
    }
}

static void conn_readable(void *opaque)
{
    conn_read(opaque);
}

/* Fail the requests whose deadline passed; re-arm for the next one. */
static void conn_expire(VsriovDaemonClient *c)
{
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    DaemonReq *req, *tmp;
    int64_t next = INT64_MAX;

    QTAILQ_FOREACH_SAFE(req, &c->pending, next, tmp) {
        Error *err = NULL;

        if (req->deadline > now) {
            next = MIN(next, req->deadline);
            continue;
        }
        QTAILQ_REMOVE(&c->pending, req, next);
        c->n_pending--;
        if (req->type == VPD_MSG_CLAIM) {
            /* its answer may still come, with VFs to give back */
            if (c->late_claims->len == VPD_MAX_LATE) {
                g_array_remove_index(c->late_claims, 0);
            }
            g_array_append_val(c->late_claims, req->seq);
        }
        error_setg(&err, "vsriov-daemon-pool '%s': %s did not answer within "
                   "%d s", c->id, c->socket, VPD_TIMEOUT_S);
        req_finish(req, ETIMEDOUT, err);
    }
    if (next == INT64_MAX) {
        timer_del(c->deadline_timer);
    } else {
        timer_mod(c->deadline_timer, next);
    }
}

static void deadline_cb(void *opaque)
{
    conn_expire(opaque);
}

/* The connection to the daemon is @fd (taken, also on failure). */
static bool client_take_fd(VsriovDaemonClient *c, int fd, Error **errp)
{
    c->sioc = qio_channel_socket_new_fd(fd, errp);
    if (!c->sioc) {
        close(fd);
        return false;
    }
    qio_channel_set_name(QIO_CHANNEL(c->sioc), "vsriov-daemon-pool");
    /* (only connect_sync and accept set it; ensure_connected() peeks) */
    qio_channel_set_feature(QIO_CHANNEL(c->sioc),
                            QIO_CHANNEL_FEATURE_READ_MSG_PEEK);
    conn_update_handlers(c);
    return true;
}

bool vsriov_daemon_client_adopt(VsriovDaemonClient *c, int fd, Error **errp)
{
    struct sockaddr_storage peer;
    socklen_t dlen = sizeof(int), tlen = sizeof(int), len;
    int domain = -1, type = -1;

    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dlen) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0 ||
        domain != AF_UNIX || type != SOCK_STREAM) {
        error_setg(errp, "vsriov-daemon-pool '%s': %s is not a Unix stream "
                   "socket", c->id, c->socket);
        close(fd);
        return false;
    }
    len = sizeof(peer);
    if (getpeername(fd, (struct sockaddr *)&peer, &len) < 0) {
        error_setg_errno(errp, errno, "vsriov-daemon-pool '%s': %s is not "
                         "connected to vdpa-pool-daemon", c->id, c->socket);
        close(fd);
        return false;
    }
    if (!qemu_set_blocking(fd, false, errp)) {
        close(fd);
        return false;
    }
    c->fixed = true;
    return client_take_fd(c, fd, errp);
}

bool vsriov_daemon_client_connect(VsriovDaemonClient *c, Error **errp)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    int fd;

    if (c->fixed) {
        error_setg(errp, "vsriov-daemon-pool '%s': the daemon closed the "
                   "connection passed as %s, and QEMU cannot make it again",
                   c->id, c->socket);
        error_append_hint(errp, "Give the pool a path to connect to, or "
                          "add a new pool.\n");
        return false;
    }

    strcpy(addr.sun_path, c->socket);  /* its length was checked */
    fd = qemu_socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) {
        error_setg_errno(errp, errno, "vsriov-daemon-pool '%s': cannot "
                         "create a socket", c->id);
        return false;
    }
    /* not even connect() may wait: a daemon whose backlog is full fails */
    if (!qemu_set_blocking(fd, false, errp)) {
        close(fd);
        return false;
    }
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        error_setg_errno(errp, errno, "vsriov-daemon-pool '%s': cannot "
                         "connect to vdpa-pool-daemon at %s", c->id,
                         c->socket);
        close(fd);
        return false;
    }
    return client_take_fd(c, fd, errp);
}

/*
 * A daemon that was restarted has closed our connection; connected again,
 * it gives this process back what it held (same pid and uid), so a
 * request after a restart works.
 */
static bool ensure_connected(VsriovDaemonClient *c, Error **errp)
{
    char byte;
    struct iovec iov = { .iov_base = &byte, .iov_len = 1 };

    /* a close the main loop did not notice yet (nothing is read here) */
    if (c->sioc &&
        qio_channel_readv_full(QIO_CHANNEL(c->sioc), &iov, 1, NULL, NULL,
                               QIO_CHANNEL_READ_FLAG_MSG_PEEK, NULL) == 0) {
        vsriov_daemon_client_close(c, "the daemon closed the connection");
    }
    if (c->sioc) {
        return true;
    }
    return vsriov_daemon_client_connect(c, errp);
}

/*
 * Send @m (consumed) as a request of @type.  Its outcome goes to @done
 * from a bottom half, or, with @done NULL, is left in the request for
 * req_wait().  At most @max_fds descriptors may come with the answer.
 * Never NULL; a request that cannot be sent is finished at once.
 */
static DaemonReq *req_send(VsriovDaemonClient *c, struct vpd_builder *m,
                           int max_fds, DaemonReqDone *done, void *opaque)
{
    DaemonReq *req = g_new0(DaemonReq, 1);
    g_autoptr(GBytes) bytes = vpd_builder_finish(m);
    gsize len;
    const uint8_t *data = g_bytes_get_data(bytes, &len);
    guint at = c->out->len;
    Error *err = NULL;

    g_free(m);
    req->client = c;
    req->seq = ++c->seq;
    req->type = lduw_le_p(data + 6);
    req->max_fds = max_fds;
    req->done = done;
    req->opaque = opaque;
    req->deadline = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                    VPD_TIMEOUT_S * NANOSECONDS_PER_SECOND;

    if (c->n_pending >= VPD_MAX_PENDING) {
        error_setg(&err, "vsriov-daemon-pool '%s': %u requests to %s are "
                   "waiting for their answer already", c->id,
                   c->n_pending, c->socket);
        req_finish(req, EAGAIN, err);
    } else if (!ensure_connected(c, &err)) {
        req_finish(req, EIO, err);
    } else {
        g_byte_array_append(c->out, data, len);
        stl_le_p(c->out->data + at + 8, req->seq);
        QTAILQ_INSERT_TAIL(&c->pending, req, next);
        c->n_pending++;
        if (!timer_pending(c->deadline_timer)) {
            timer_mod(c->deadline_timer, req->deadline);
        }
        conn_flush(c);     /* may fail it (and all others) */
    }
    return req;
}

/*
 * Wait for @req (sent with no @done) until its deadline, reading every
 * answer that comes meanwhile.  For a pool's creation on the command
 * line only: it holds up its caller, and the BQL.
 */
static void req_wait(VsriovDaemonClient *c, DaemonReq *req)
{
    while (!req->finished) {
        struct pollfd pfd = {
            .fd = c->sioc ? c->sioc->fd : -1,
            .events = POLLIN | (c->out->len ? POLLOUT : 0),
        };
        int64_t left = req->deadline - qemu_clock_get_ns(QEMU_CLOCK_REALTIME);

        if (left > 0 && c->sioc &&
            poll(&pfd, 1, DIV_ROUND_UP(left, SCALE_MS)) != 0) {
            conn_flush(c);
            conn_read(c);
        } else {
            conn_expire(c);
        }
    }
}

/*
 * Send @m and wait for the answer: the message, and the fds that came with
 * it into @fds (@max_fds at most).  NULL with @errp set if it failed or
 * the daemon refused.
 */
struct vpd_msg *vsriov_daemon_transact(VsriovDaemonClient *c,
                                       struct vpd_builder *m, int *fds,
                                       int max_fds, int *nfds, Error **errp)
{
    DaemonReq *req = req_send(c, m, max_fds, NULL, NULL);
    struct vpd_msg *reply = NULL;

    req_wait(c, req);
    if (req->err) {
        error_propagate(errp, g_steal_pointer(&req->error));
    } else {
        memcpy(fds, req->fds, sizeof(int) * req->nfds);
        *nfds = req->nfds;
        req->nfds = 0;
        reply = g_steal_pointer(&req->reply);
    }
    req_free(req);
    return reply;
}


void vsriov_daemon_send(VsriovDaemonClient *c, struct vpd_builder *m,
                        int max_fds, DaemonReqDone *done, void *opaque)
{
    req_send(c, m, max_fds, done, opaque);
}

void vsriov_daemon_fail(VsriovDaemonClient *c, DaemonReqDone *done,
                        void *opaque, int err, Error *error)
{
    DaemonReq *req = g_new0(DaemonReq, 1);

    req->client = c;
    req->done = done;
    req->opaque = opaque;
    req_finish(req, err, error);
}

unsigned vsriov_daemon_client_pending(VsriovDaemonClient *c)
{
    return c->n_pending;
}

VsriovDaemonClient *vsriov_daemon_client_new(Object *owner, const char *id,
                                             const char *socket,
                                             const VsriovDaemonClientOps *ops,
                                             void *opaque)
{
    VsriovDaemonClient *c = g_new0(VsriovDaemonClient, 1);

    c->owner = owner;
    c->id = g_strdup(id);
    c->socket = g_strdup(socket);
    c->ops = ops;
    c->opaque = opaque;
    QTAILQ_INIT(&c->pending);
    QTAILQ_INIT(&c->finished);
    c->out = g_byte_array_new();
    c->in_payload = g_byte_array_new();
    c->late_claims = g_array_new(false, false, sizeof(uint32_t));
    c->done_bh = aio_bh_new(iohandler_get_aio_context(), done_bh, c);
    c->deadline_timer = timer_new_ns(QEMU_CLOCK_REALTIME, deadline_cb, c);
    return c;
}

void vsriov_daemon_client_free(VsriovDaemonClient *c)
{
    if (!c) {
        return;
    }
    /* what was still in flight completes (fails) now */
    vsriov_daemon_client_close(c, "the pool is going away");
    run_completions(c);
    qemu_bh_delete(c->done_bh);
    timer_free(c->deadline_timer);
    g_byte_array_unref(c->out);
    g_byte_array_unref(c->in_payload);
    g_array_unref(c->late_claims);
    g_free(c->id);
    g_free(c->socket);
    g_free(c);
}
