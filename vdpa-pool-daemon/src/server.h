/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * server: the daemon's API socket (docs/daemon-protocol.md).
 *
 * Runs in a GMainContext: accepts clients on a Unix stream socket, learns
 * who each is from SO_PEERCRED, answers CLAIM (with the vhost-vdpa fds
 * over SCM_RIGHTS), RELEASE, SET_ATTRS, QUERY, STATUS, METRICS (its
 * counters and latency histograms, metrics.h), REP_OPEN (a
 * representor port's tap fd over SCM_RIGHTS), REP_CLOSE and a guest's
 * rules (FLOW_ADD, FLOW_DEL, FLOW_STATS; rules.h), and releases
 * everything a client holds the moment its connection closes.  Every
 * change of the claims is written to the state journal before it is
 * answered.  Claims restored from the state file belong to no connection
 * until their process reconnects (it gets them back) or exits (they are
 * released; a pidfd tells the daemon at once).
 */
#ifndef VPD_SERVER_H
#define VPD_SERVER_H

#include "config.h"
#include "metrics.h"
#include "pool.h"
#include "rules.h"
#include "state.h"

struct vpd_server;

/*
 * What the server asks of the datapath when a VF changes: claimed (with
 * its attributes), its attributes set, released (e->claimed is false,
 * its attributes are the defaults).  The datapath answers later, in the
 * loop's thread, by calling done (error NULL: done; else the change was
 * not made), in the order the changes were asked; it may also answer at
 * once, from within the call.  An error refuses a claim or a change,
 * which the server then undoes and answers with the error; a release
 * happens regardless (and is logged).  The VF's attributes are e->attrs
 * as they are at the call (the datapath keeps a copy).
 */
typedef void (*vpd_applied_fn)(const GError *error, void *opaque);
typedef void (*vpd_apply_fn)(const struct vpd_entry *e, void *opaque, vpd_applied_fn done,
			     void *done_opaque);

/*
 * What STATUS lists as each VF's flows: done gets, for each of entries in
 * order, a GPtrArray of strings, or NULL and an error when the datapath
 * cannot say.  Unset, STATUS lists none; when done has not come within
 * VPD_FLOWS_WAIT_MS, STATUS says the flows are unknown.
 */
#define VPD_FLOWS_WAIT_MS 2000
typedef void (*vpd_flows_done_fn)(GPtrArray *per_entry, const GError *error, void *opaque);
typedef void (*vpd_flows_fn)(GPtrArray *entries, void *opaque, vpd_flows_done_fn done,
			     void *done_opaque);

/*
 * What METRICS gives as each VF's switch port's counters: done gets, for
 * each of entries in order, a struct vpd_port_stats (have 0: OVS has
 * none for it), or NULL and an error when the datapath cannot say.
 * Unset, METRICS gives none; when done has not come within
 * VPD_FLOWS_WAIT_MS, METRICS says they are unknown (as STATUS does).
 */
typedef void (*vpd_port_stats_done_fn)(GArray *per_entry, const GError *error, void *opaque);
typedef void (*vpd_port_stats_fn)(GPtrArray *entries, void *opaque, vpd_port_stats_done_fn done,
				  void *done_opaque);

/*
 * A guest's rules (rules.h): the datapath makes change c (copying what it
 * keeps) and answers with done, in order with the VFs' changes; and reads
 * the counters of rule id of table.  Unset, rules are only kept (tests):
 * each change is done at once, each rule counts 0.
 */
typedef void (*vpd_rules_fn)(const struct vpd_rule_change *c, void *opaque, vpd_applied_fn done,
			     void *done_opaque);
typedef void (*vpd_rule_counted_fn)(const GError *error, uint64_t packets, uint64_t bytes,
				    void *opaque);
typedef void (*vpd_rule_stats_fn)(uint8_t table, uint32_t id, void *opaque,
				  vpd_rule_counted_fn done, void *done_opaque);

/*
 * How a VF's vDPA device (e->vdpa_dev) gets the MAC a client sets, and its
 * default back when released: through the vdpa management API
 * (vpd_vdpa_set_mac()).  It blocks: the server runs it in a thread of its
 * own, one change at a time in order, before it changes the datapath.
 * G_IO_ERROR_NOT_SUPPORTED (a VDUSE device) lets the SET_ATTRS go on;
 * another error fails it.  Unset (tests with fake backends), nothing is
 * set.
 */
typedef bool (*vpd_mac_fn)(const char *vdpa_dev, const uint8_t mac[6], GError **error);

/*
 * How a VF's representor port's tap is made and removed (tap.h:
 * vpd_tap_open(), vpd_tap_remove()): open returns its fd and *ifindex, or
 * -1 with error.  Unset, REP_OPEN is refused (EOPNOTSUPP).
 */
typedef int (*vpd_rep_open_fn)(const char *name, int *ifindex, GError **error);
typedef bool (*vpd_rep_close_fn)(const char *name, int ifindex, GError **error);

/*
 * Limits on API connections (docs/daemon-config.md, [daemon]): at most
 * max_clients in all, of which non-root uids get all but a few, and
 * max_clients_per_uid per non-root uid; a connection holding no VF is
 * closed after idle_timeout s without a request (0: never); one that
 * leaves a request half sent or a reply unread for io_timeout s is
 * dropped (and its VFs released).  Nothing the server does blocks: replies
 * wait in a queue per client, whose further requests are not read until
 * they have gone.
 */
struct vpd_server_limits {
	unsigned max_clients, max_clients_per_uid, idle_timeout, io_timeout;
};

/*
 * Listen on socket_path (made anew: group gid, mode mode), or serve fd,
 * a listening socket passed by systemd's socket activation.  The server
 * records every change of the claims in state (not owned).
 */
struct vpd_server *vpd_server_new(struct vpd_pools *pools, const char *socket_path,
				  unsigned mode, gid_t gid, struct vpd_state *state,
				  GError **error);
struct vpd_server *vpd_server_adopt(struct vpd_pools *pools, int fd, struct vpd_state *state,
				    GError **error);
const char *vpd_server_socket_path(const struct vpd_server *s);
void vpd_server_set_limits(struct vpd_server *s, const struct vpd_server_limits *limits);
void vpd_server_set_apply(struct vpd_server *s, vpd_apply_fn fn, void *opaque);
void vpd_server_set_flows(struct vpd_server *s, vpd_flows_fn fn, void *opaque);
void vpd_server_set_port_stats(struct vpd_server *s, vpd_port_stats_fn fn, void *opaque);
void vpd_server_set_vdpa_mac(struct vpd_server *s, vpd_mac_fn fn);
void vpd_server_set_rules(struct vpd_server *s, vpd_rules_fn rules, vpd_rule_stats_fn stats,
			  void *opaque);
void vpd_server_set_reps(struct vpd_server *s, vpd_rep_open_fn open, vpd_rep_close_fn close);
/* Watch the processes of restored claims; call once the loop runs. */
void vpd_server_watch_orphans(struct vpd_server *s);
void vpd_server_free(struct vpd_server *s);

#endif
