/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * policy: what OVS holds for each pooled VF in each state (docs/daemon-admin.md,
 * "What the daemon does to OVS"): its OpenFlow port number, its flows and
 * their cookies, and its Port and Interface rows' columns (VLAN, rate
 * limit, the VF's attributes as external_ids).
 *
 * A free VF is default-deny: its port drops all it receives and sits in
 * VLAN 4095, which no claimed VF can be given, so it receives nothing
 * either.  A claimed VF's traffic is switched (NORMAL) in its VLAN, from
 * its MAC only when spoof checking is on.  Pure: no I/O (ovs.c sends it).
 */
#ifndef VPD_POLICY_H
#define VPD_POLICY_H

#include "openflow.h"
#include "pool.h"

#include <json-glib/json-glib.h>

#include <stdint.h>

/* Cookies: "VP" | kind | PF index | VF index. */
#define VPD_COOKIE_MAGIC 0x5650000000000000ull
#define VPD_COOKIE_MAGIC_MASK 0xffff000000000000ull
#define VPD_COOKIE_KIND_MASK 0x0000ff0000000000ull
enum vpd_flow_kind {
	VPD_FLOW_DENY = 1,    /* in_port=VF: drop (always there) */
	VPD_FLOW_ALLOW = 2,   /* in_port=VF[,dl_src=MAC]: NORMAL (claimed) */
	VPD_FLOW_OTHERS = 3,  /* the bridge's other ports: NORMAL */
};
#define VPD_FREE_VLAN 4095     /* the VLAN of free VFs */
#define VPD_OFPORT_PER_PF 1000 /* VF v of the p-th [pf] is port p * 1000 + v + 1 */

uint64_t vpd_flow_cookie(enum vpd_flow_kind kind, unsigned pf_index, unsigned vf);
uint32_t vpd_vf_ofport(unsigned pf_index, unsigned vf);
/* The flows of one VF in its current state (1 or 2); returns how many. */
unsigned vpd_vf_flows(const struct vpd_entry *e, unsigned pf_index, struct vpd_flow out[2]);
/* The bridge's other ports' flow (uplinks...): NORMAL, below every VF's. */
struct vpd_flow vpd_others_flow(void);
/*
 * The ingress policing rate of VF e's port, kbit/s (0: none): what its
 * transmit is held to (vpd_entry_max_tx_rate) while claimed; none while
 * free (it passes nothing then).
 */
uint64_t vpd_vf_policing_rate(const struct vpd_entry *e);

/*
 * The Port row's columns for e's state, as members of the object b is in
 * ("tag": ..., ...).
 */
void vpd_vf_port_columns(JsonBuilder *b, const struct vpd_entry *e);
/* The Interface row's columns for e's state, its port number ofport. */
void vpd_vf_interface_columns(JsonBuilder *b, const struct vpd_entry *e, uint32_t ofport);

#endif
