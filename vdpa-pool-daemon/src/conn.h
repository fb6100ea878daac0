/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * conn: what the OVS side's files share.  The unix stream socket both
 * clients (ovsdb.c, ofconn.c) talk to OVS over, whose sends and reads are
 * bounded in time and whose failures are the transient errors
 * (vpd_ovs_error_is_transient()); how long any wait for OVS may take; and
 * the error helpers.
 */
#ifndef VPD_CONN_H
#define VPD_CONN_H

#include <gio/gio.h>
#include <stdbool.h>

/* The longest any one request to OVS (or any wait for it) may take. */
#define VPD_OVS_TIMEOUT_MS 10000

struct vpd_conn {
	int fd;             /* -1: closed */
	GByteArray *in;     /* received, not yet consumed */
	char *path;         /* the socket's */
	const char *what;   /* "OVSDB", "OpenFlow": for messages */
};

/* Closed, to path (taken). */
void vpd_conn_init(struct vpd_conn *c, const char *what, char *path);
void vpd_conn_clear(struct vpd_conn *c);
void vpd_conn_close(struct vpd_conn *c);
/* Connect afresh (what was received is dropped). */
bool vpd_conn_open(struct vpd_conn *c, GError **error);
/* Send all of data; on failure the connection is closed. */
bool vpd_conn_send(struct vpd_conn *c, const void *data, gsize len, GError **error);
/* Read more into c->in, waiting at most until deadline (monotonic, us);
 * on failure the connection is closed. */
bool vpd_conn_recv(struct vpd_conn *c, gint64 deadline, GError **error);
/*
 * Without waiting, read into c->in what has come: 1 if something did, 0
 * if nothing, -1 if the peer closed the connection (c is closed too).
 */
int vpd_conn_read_ready(struct vpd_conn *c);

/*
 * Set error (G_IO_ERROR, code: which kind of failure, as ovs.h lists them)
 * and return false.
 */
bool vpd_ovs_fail(GError **error, int code, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

#endif
