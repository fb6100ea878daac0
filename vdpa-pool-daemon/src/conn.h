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

/* Set error (G_IO_ERROR_FAILED) and return false. */
bool vpd_ovs_fail(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
/*
 * The same with code.  OVS not there, not answering or gone:
 * G_IO_ERROR_NOT_CONNECTED, _TIMED_OUT or _CONNECTION_CLOSED, which
 * vpd_ovs_error_is_transient() tells apart from errors that waiting does
 * not mend.
 */
bool vpd_ovs_fail_code(GError **error, int code, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

#endif
