/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ovs: each pooled VF's switch port, in Open vSwitch (docs/daemon-admin.md,
 * "What the daemon does to OVS").
 *
 * Every VF representor is a port of the configured bridge, with a fixed
 * OpenFlow port number.  OVSDB (JSON-RPC, RFC 7047) holds the port's VLAN
 * and rate limit and the VF's attributes as external_ids; OpenFlow 1.4 holds
 * the flows.  A free VF is default-deny: its port drops all it receives and
 * sits in VLAN 4095, which no claimed VF can be given, so it receives
 * nothing either.  A claimed VF's traffic is switched (NORMAL) in its VLAN,
 * from its MAC only when spoof checking is on.  Each VF change is one OVSDB
 * transaction and one atomic OpenFlow bundle, answered only when OVS has
 * committed both.
 *
 * The parts: policy.h says what OVS holds for each VF, openflow.h encodes
 * the OpenFlow messages, ofconn.h and ovsdb.h talk to OVS, reps.h finds
 * the representors; ovs.c puts them together.
 */
#ifndef VPD_OVS_H
#define VPD_OVS_H

#include "config.h"
#include "metrics.h"    /* the ports' counters */
#include "openflow.h"   /* the OpenFlow messages and the flow model */
#include "policy.h"     /* each VF's port number, flows and rows */
#include "pool.h"

#include <gio/gio.h>    /* G_IO_ERROR: the errors' domain */

struct vpd_ovs;

/* Connect to OVSDB (cfg->ovsdb) for cfg->ovs_bridge. */
struct vpd_ovs *vpd_ovs_new(const struct vpd_config *cfg, GError **error);
void vpd_ovs_free(struct vpd_ovs *o);
/*
 * Make OVS hold every pooled VF's port and flows as the pools say now
 * (claims included): the bridge if missing, one OVSDB transaction for all
 * ports, one bundle that replaces all of the daemon's flows (every
 * table), then one bundle per client's table of rules that
 * vpd_ovs_rules() made (none at the daemon's start: after ovs-vswitchd
 * restarted), logged one line each.  Finds each VF's representor first.
 * Idempotent; a restart does not disturb claimed VFs' traffic (the
 * bundle is atomic).
 */
bool vpd_ovs_sync(struct vpd_ovs *o, struct vpd_pools *pools, GError **error);
/*
 * One VF's port and flows after its claim or attributes changed.  The
 * functions here know a VF by its handle: e may be a copy of the entry.
 */
bool vpd_ovs_apply(struct vpd_ovs *o, struct vpd_entry *e, GError **error);
/*
 * Call every second: when ovs-vswitchd has restarted (it forgets flows),
 * everything is synced again; a VF whose last change failed is tried again.
 * Every VPD_OVS_AUDIT_TICKS calls, the flows that make default-deny are
 * looked for in OVS, and everything is synced again when one is gone
 * (deleted by someone else).  OVS's keep-alive requests (echo) that came
 * meanwhile are answered.
 */
#define VPD_OVS_AUDIT_TICKS 5
void vpd_ovs_tick(struct vpd_ovs *o, struct vpd_pools *pools);
/* A change of e not made (it waited too long): vpd_ovs_tick() makes it. */
void vpd_ovs_set_dirty(struct vpd_ovs *o, const struct vpd_entry *e);
/* While nothing is asked of OVS: answer its keep-alive requests (echo). */
void vpd_ovs_idle(struct vpd_ovs *o);
/*
 * The VF's flows as OVS holds them, one line each in ovs-ofctl's words with
 * OVS's packet and byte counters; a flow the daemon expects that OVS does
 * not have is listed with "MISSING".  NULL with error if OVS cannot say.
 */
GPtrArray *vpd_ovs_vf_flows(struct vpd_ovs *o, const struct vpd_entry *e, GError **error);

/*
 * Each of pools' entries' switch port's counters (metrics.h), as OVS's
 * Interface statistics hold them (ovs-vswitchd refreshes them every
 * other_config:stats-update-interval, 5 s by default): one OVSDB select,
 * out set to a struct vpd_port_stats per entry, in order (have 0: OVS has
 * none for it).  Blocks (the worker thread's).
 */
bool vpd_ovs_port_stats(struct vpd_ovs *o, const struct vpd_pools *pools, GArray *out,
			GError **error);

/*
 * A change of a guest's rules (rules.h) as one atomic bundle, answered
 * once OVS committed it, and held (struct vpd_held_rules) so that a sync
 * makes the table again.  Blocks (the worker thread's).
 */
bool vpd_ovs_rules(struct vpd_ovs *o, const struct vpd_rule_change *c, GError **error);
/*
 * The counters of rule id of table: OVS's (its flow statistics, by
 * cookie) plus what OVS had counted before it last restarted, so never
 * less than an earlier answer.  NOT_FOUND when OVS lacks the flow, unless
 * ovs-vswitchd came back and the sync has not made it again yet (then
 * the counters as last answered).  Blocks.
 */
bool vpd_ovs_rule_stats(struct vpd_ovs *o, uint8_t table, uint32_t id, uint64_t *packets,
			uint64_t *bytes, GError **error);

/*
 * The errors of these functions are G_IO_ERROR, their code saying which
 * kind of failure it is:
 *
 *   NOT_CONNECTED, TIMED_OUT,   OVS is not there, not answering, or gone,
 *   CONNECTION_CLOSED,          or OVSDB's Open_vSwitch row is not there
 *   NOT_INITIALIZED             yet (vpd_ovs_error_is_transient())
 *   INVALID_ARGUMENT            OVS refused a request (an OpenFlow error
 *                               reply, an OVSDB transaction's error)
 *   INVALID_DATA                OVS sent what the daemon cannot read
 *   NOT_SUPPORTED               the bridge does not speak OpenFlow 1.4; more
 *                               [pf] sections than port numbers allow
 *   NOT_FOUND                   a PF's netdev or switch ID, a VF's
 *                               representor or port is not there
 *   EXISTS                      OVS holds something in the way: the
 *                               representor is another bridge's port, its
 *                               port number is taken, the bridge has
 *                               another datapath type
 *   FILENAME_TOO_LONG           the OVSDB socket's path
 *   FAILED                      OVS could not open a VF's port
 *   (from errno)                a representor cannot be set up
 */

/*
 * Whether err only says that OVS is not there or not answering (yet):
 * waiting and trying again may mend it.
 */
bool vpd_ovs_error_is_transient(const GError *err);

#endif
