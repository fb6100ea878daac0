/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ovsdb: a client of ovsdb-server over its unix socket, JSON-RPC (RFC
 * 7047): "transact" requests on the Open_vSwitch database and their
 * replies, the server's echo keep-alives answered meanwhile.  What the
 * operations say is ovs.c's business.
 */
#ifndef VPD_OVSDB_H
#define VPD_OVSDB_H

#include "conn.h"
#include "json.h"

#include <json-glib/json-glib.h>

struct vpd_ovsdb {
	struct vpd_conn c;
	unsigned id;        /* of the last request */
};

/* Not connected yet, to the socket at path. */
void vpd_ovsdb_init(struct vpd_ovsdb *db, const char *path);
void vpd_ovsdb_clear(struct vpd_ovsdb *db);
/* Connected already, or connect now. */
bool vpd_ovsdb_connect(struct vpd_ovsdb *db, GError **error);
/*
 * Send one "transact" with ops (a JSON array of operations, RFC 7047
 * 5.2), connecting again once if the connection had gone stale; *id is
 * the request's, for vpd_ovsdb_wait().  Requests are written with
 * json-glib; replies are read with json.h (a stream of JSON texts).
 */
bool vpd_ovsdb_send(struct vpd_ovsdb *db, JsonNode *ops, unsigned *id, GError **error);
/* The result array of request id; each operation's error is an error. */
struct vpd_json *vpd_ovsdb_wait(struct vpd_ovsdb *db, unsigned id, GError **error);
/* Both. */
struct vpd_json *vpd_ovsdb_transact(struct vpd_ovsdb *db, JsonNode *ops, GError **error);
/*
 * While no request waits: read what ovsdb-server sent, answering its echo
 * requests (its keep-alive; unanswered, it drops the connection) and
 * dropping the rest.  Does not wait.
 */
void vpd_ovsdb_idle(struct vpd_ovsdb *db);
/* The "count" of operation i of a transaction's result (-1: none). */
int vpd_ovsdb_count(const struct vpd_json *result, unsigned i);

#endif
