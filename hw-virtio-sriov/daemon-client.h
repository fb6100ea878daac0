/*
 * vsriov-daemon-pool's client of vdpa-pool-daemon (daemon-client.c)
 *
 * Copyright (c) 2026 vsriov contributors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_VIRTIO_SRIOV_DAEMON_CLIENT_H
#define HW_VIRTIO_SRIOV_DAEMON_CLIENT_H

#include "qemu/queue.h"
#include "qom/object.h"
#include "vpd-wire/protocol.h"

#define VPD_MSG_FDS         16      /* descriptors per message, at most */
#define VPD_TIMEOUT_S       5       /* each request's deadline */
#define VPD_MAX_PENDING     1024    /* requests in flight per connection */

typedef struct VsriovDaemonClient VsriovDaemonClient;
typedef struct DaemonReq DaemonReq;
typedef void DaemonReqDone(DaemonReq *req);

/* A request to the daemon, from its sending to its completion. */
struct DaemonReq {
    VsriovDaemonClient *client;
    uint32_t seq;
    uint16_t type;              /* VPD_MSG_* */
    int max_fds;                /* descriptors its answer may carry */
    int64_t deadline;           /* QEMU_CLOCK_REALTIME, ns */
    DaemonReqDone *done;        /* NULL: the sender waits for it */
    void *opaque;
    /* the outcome */
    bool finished;
    int err;                    /* 0, or a positive errno with @error */
    Error *error;
    struct vpd_msg *reply;      /* a REPLY */
    int *fds;                   /* and its descriptors (the done's to take) */
    int nfds;
    QTAILQ_ENTRY(DaemonReq) next;
};

/* What the client tells its owner, all from the main loop. */
typedef struct VsriovDaemonClientOps {
    /* A CLAIM's REPLY whose VFs nobody takes (late, or malformed). */
    void (*unwanted_claim)(void *opaque, const struct vpd_msg *reply);
    /* The connection closed (the next request connects again). */
    void (*closed)(void *opaque);
    /* Completions ran, one of them with the daemon's answer. */
    void (*answered)(void *opaque);
} VsriovDaemonClientOps;

VsriovDaemonClient *vsriov_daemon_client_new(Object *owner, const char *id,
                                             const char *socket,
                                             const VsriovDaemonClientOps *ops,
                                             void *opaque);
/* Closes the connection; what is in flight fails, its completions run. */
void vsriov_daemon_client_free(VsriovDaemonClient *c);
/* Connect to the daemon at the path @socket. */
bool vsriov_daemon_client_connect(VsriovDaemonClient *c, Error **errp);
/*
 * Take @fd, a Unix stream socket connected to the daemon, as the
 * connection (@fd is taken, also on failure); once the daemon closes it
 * no other is made.
 */
bool vsriov_daemon_client_adopt(VsriovDaemonClient *c, int fd, Error **errp);
/* Every request in flight fails (@why); the next one connects again. */
void vsriov_daemon_client_close(VsriovDaemonClient *c, const char *why);
unsigned vsriov_daemon_client_pending(VsriovDaemonClient *c);

/*
 * Send @m (consumed; its sequence number is set here).  @done gets the
 * outcome from a bottom half, never within this call; at most @max_fds
 * descriptors may come with the answer.
 */
void vsriov_daemon_send(VsriovDaemonClient *c, struct vpd_builder *m,
                        int max_fds, DaemonReqDone *done, void *opaque);
/* @done gets a failure (@err, @error) as if a request had failed. */
void vsriov_daemon_fail(VsriovDaemonClient *c, DaemonReqDone *done,
                        void *opaque, int err, Error *error);
/*
 * Send @m and wait for the answer, in the caller, up to the deadline: the
 * message, and the fds that came with it into @fds (@max_fds at most).
 * NULL with @errp set if it failed or the daemon refused.  Only for a
 * pool's creation on the command line, before the machine runs: it holds
 * the BQL (at run time, vsriov_daemon_send()).
 */
struct vpd_msg *vsriov_daemon_transact(VsriovDaemonClient *c,
                                       struct vpd_builder *m, int *fds,
                                       int max_fds, int *nfds, Error **errp);

#endif /* HW_VIRTIO_SRIOV_DAEMON_CLIENT_H */
