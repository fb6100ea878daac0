/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ovsworker: the daemon's OVS side (ovs.h) in a thread of its own, so that
 * OVS being slow, hung or gone never holds up the API: the loop's thread
 * asks, the worker thread talks to OVS, and each answer comes back as a
 * callback in the loop's thread (the default main context), in the order
 * asked.
 *
 * The worker owns the struct vpd_ovs.  It never touches the daemon's
 * entries: each request carries copies of the entries it is about, taken
 * when it is asked (vpd_pools_copy()), and the representors the worker
 * finds come back to the daemon's entries with the answer of a tick.
 *
 * Every second the loop's thread hands the worker a tick (vpd_ovs_tick():
 * OVS restarted, changes to make again), unless the last one is still
 * queued.  While it has nothing to do, the worker answers OVS's
 * keep-alive requests.  A change that waited in the queue longer than
 * VPD_OVS_TIMEOUT_MS (OVS hung on the ones before it) fails at once, not
 * tried: the tick makes it once OVS answers again.
 */
#ifndef VPD_OVSWORKER_H
#define VPD_OVSWORKER_H

#include "ovs.h"

struct vpd_ovs_worker;

typedef void (*vpd_ovs_done_fn)(const GError *error, void *opaque);
typedef void (*vpd_ovs_stats_fn)(const GError *error, uint64_t packets, uint64_t bytes,
				 void *opaque);
/* For each entry asked about, in order, a GPtrArray of lines (borrowed). */
typedef void (*vpd_ovs_flows_fn)(GPtrArray *per_entry, const GError *error, void *opaque);

/*
 * Start the worker on ovs (taken), synced already (vpd_ovs_sync()) with
 * pools (the daemon's, which must outlive the worker; used in the loop's
 * thread only).
 */
struct vpd_ovs_worker *vpd_ovs_worker_new(struct vpd_ovs *ovs, struct vpd_pools *pools);
/*
 * Stop the worker (waiting for what it is doing, at most as long as one
 * request to OVS takes) and deliver the answers it still had: call from
 * the loop's thread, before what the callbacks use goes.
 */
void vpd_ovs_worker_free(struct vpd_ovs_worker *w);
/* e's port and flows as e is now (vpd_ovs_apply()); done comes later. */
void vpd_ovs_worker_apply(struct vpd_ovs_worker *w, const struct vpd_entry *e,
			  vpd_ovs_done_fn done, void *opaque);
/*
 * Each of entries' flows as OVS holds them (vpd_ovs_vf_flows()); not
 * asked when the question waited VPD_FLOWS_WAIT_MS (server.h) in the
 * queue: STATUS has answered without them by then.
 */
void vpd_ovs_worker_flows(struct vpd_ovs_worker *w, const GPtrArray *entries,
			  vpd_ovs_flows_fn done, void *opaque);
/*
 * Each of entries' switch port's counters (vpd_ovs_port_stats()): for each
 * entry asked about, in order, a struct vpd_port_stats (borrowed); not
 * asked when the question waited VPD_FLOWS_WAIT_MS (METRICS has answered
 * without them by then).
 */
typedef void (*vpd_ovs_port_stats_fn)(GArray *per_entry, const GError *error, void *opaque);
void vpd_ovs_worker_port_stats(struct vpd_ovs_worker *w, const GPtrArray *entries,
			       vpd_ovs_port_stats_fn done, void *opaque);
/* A change of a guest's rules (vpd_ovs_rules(); c is copied); done later. */
void vpd_ovs_worker_rules(struct vpd_ovs_worker *w, const struct vpd_rule_change *c,
			  vpd_ovs_done_fn done, void *opaque);
/* OVS's counters of rule id of table (vpd_ovs_rule_stats()); done later. */
void vpd_ovs_worker_rule_stats(struct vpd_ovs_worker *w, uint8_t table, uint32_t id,
			       vpd_ovs_stats_fn done, void *opaque);

#endif
