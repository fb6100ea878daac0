/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * police: the drops of a netdev's ingress policer as the kernel counts
 * them, for METRICS (metrics.h) where OVS does not: on OVS's kernel
 * datapath a port's ingress_policing_rate is a tc filter (basic or
 * matchall) with a police action on the netdev's ingress, whose drops OVS
 * leaves out of the Interface statistics.  What `tc -s filter show dev
 * NETDEV ingress` shows as the police action's "dropped".
 */
#ifndef VPD_POLICE_H
#define VPD_POLICE_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * The drops of every police action of the ingress filters of netdev
 * ifname, summed, in *drops; false (no error) when it has none, false with
 * error when it cannot be asked.  One rtnetlink dump; blocks only as long
 * as the kernel takes to answer it (the OVS thread's).
 */
bool vpd_police_drops(const char *ifname, uint64_t *drops, GError **error);

#endif
