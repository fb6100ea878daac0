/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ofconn: a client of one bridge's OpenFlow management socket
 * (RUNDIR/BRIDGE.mgmt), OpenFlow 1.4: the hello, waiting for a request's
 * reply (answering echo requests, noting errors meanwhile), and flow_mods
 * sent as one atomic bundle.  The messages themselves are openflow.h's.
 */
#ifndef VPD_OFCONN_H
#define VPD_OFCONN_H

#include "conn.h"
#include "openflow.h"

struct vpd_ofconn {
	struct vpd_conn c;
	const char *bridge;   /* for messages */
	bool connected;       /* has been connected once */
	/*
	 * Connected again since its owner last cleared this: ovs-vswitchd
	 * may have restarted, without any of the daemon's flows.
	 */
	bool reconnected;
	uint32_t xid;         /* of the last request */
	uint32_t bundle;      /* the last bundle's id */
};

/* Not connected yet, to the socket at path (taken), of bridge (kept). */
void vpd_ofconn_init(struct vpd_ofconn *of, char *path, const char *bridge);
void vpd_ofconn_clear(struct vpd_ofconn *of);
/* Connected already, or connect now (hello exchanged: OpenFlow 1.4). */
bool vpd_ofconn_connect(struct vpd_ofconn *of, GError **error);
bool vpd_ofconn_send(struct vpd_ofconn *of, const GByteArray *msgs, GError **error);
/*
 * Whether OVS has closed the connection (it then is closed here too);
 * does not wait.  What OVS sent meanwhile is read: its echo requests are
 * answered, anything else dropped.
 */
bool vpd_ofconn_closed_by_peer(struct vpd_ofconn *of);

typedef bool (*vpd_of_msg_fn)(const uint8_t *msg, guint len, void *opaque);

/*
 * Read messages until the reply of type want to xid has come (for
 * multipart replies: its last part), answering echo requests.  An error
 * reply to xid ends the wait; one to an earlier request of the same batch
 * (first_xid to xid) is remembered and fails the wait once xid's reply has
 * come.  each, if given, sees every message of type want to xid.
 */
bool vpd_ofconn_wait(struct vpd_ofconn *of, uint32_t first_xid, uint32_t xid, uint8_t want,
		     vpd_of_msg_fn each, void *opaque, GError **error);

/*
 * Run flow_mods mods (each a whole message; their xids do not matter) as
 * one atomic bundle: open, add each, commit.  OVS leaves out an add it
 * refuses and still commits the rest, so two ways:
 *
 * vpd_ofconn_bundle_send() (the hot path of one VF's change) puts it all
 * in one write, and its callers put deletions first, so that a refusal
 * leaves the VF with fewer flows (default-deny), never more;
 * vpd_ofconn_wait(first, commit, VPD_OFPT_BUNDLE_CONTROL) then waits for
 * the commit and fails on any refusal.
 *
 * vpd_ofconn_bundle_checked() (replacing every flow at start) sends a
 * barrier after the adds, so any refusal is known before anything is
 * committed; then the bundle is discarded.  It connects again once if the
 * connection had gone stale.
 */
bool vpd_ofconn_bundle_send(struct vpd_ofconn *of, const GPtrArray *mods, uint32_t *first,
			    uint32_t *commit, GError **error);
bool vpd_ofconn_bundle_checked(struct vpd_ofconn *of, const GPtrArray *mods, GError **error);

#endif
