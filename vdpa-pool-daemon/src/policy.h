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
 * its MAC only when spoof checking is on.  A VF with a representor port
 * (switchdev pools) talks to that port only, both ways, and sits in VLAN
 * 4095 meanwhile.  Pure: no I/O (ovs.c sends it).
 */
#ifndef VPD_POLICY_H
#define VPD_POLICY_H

#include "openflow.h"
#include "pool.h"
#include "rules.h"

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
	/* A VF with a representor port (switchdev pools, REP_OPEN): */
	VPD_FLOW_REP_DENY = 4, /* in_port=REP: drop (while it has one) */
	VPD_FLOW_TO_REP = 5,  /* in_port=VF: output:REP (claimed, link not disabled) */
	VPD_FLOW_FROM_REP = 6, /* in_port=REP: output:VF (the same) */
	/*
	 * Its claimant has a table of offloaded rules (e->flow_table, rules.h):
	 * VPD_FLOW_TO_REP is goto_table:T instead, and table T has
	 */
	VPD_FLOW_MISS = 7,    /* table T, priority 0, in_port=VF: output:REP */
	/* A rule of table T: "VP" | 8 | T | FLOW_ID (vpd_rule_cookie()). */
	VPD_FLOW_RULE = 8,
};
#define VPD_RULE_TABLE_MASK 0x000000ff00000000ull
#define VPD_FREE_VLAN 4095     /* the VLAN of free VFs */
#define VPD_OFPORT_PER_PF 1000 /* VF v of the p-th [pf] is port p * 1000 + v + 1 */
#define VPD_OFPORT_REP_BASE 500 /* its representor port, p * 1000 + 500 + v + 1 */
#define VPD_VF_MAX_FLOWS 5     /* flows of one VF (with a representor port) */

uint64_t vpd_flow_cookie(enum vpd_flow_kind kind, unsigned pf_index, unsigned vf);
uint32_t vpd_vf_ofport(unsigned pf_index, unsigned vf);
/* The OpenFlow port number of VF vf's representor port. */
uint32_t vpd_rep_ofport(unsigned pf_index, unsigned vf);
/*
 * The flows of one VF in its current state; returns how many.  Without a
 * representor port: its deny flow, and while it passes (claimed, link not
 * disabled, in a VLAN of its pool) its allow flow.  With one: the deny
 * flows of both ports and, claimed and link not disabled, the two flows
 * that join them; its legacy allow flow is off.
 */
unsigned vpd_vf_flows(const struct vpd_entry *e, unsigned pf_index,
		      struct vpd_flow out[VPD_VF_MAX_FLOWS]);
/*
 * Rule r's flow in its table r->table: in_port its source VF's port
 * in_port (the daemon's, never the client's), priority PRIORITY + 1 (the
 * miss flows have 0), r's matches, then pop_vlan, push_vlan + set_field,
 * output:out_port (0: drop; in_port: IN_PORT, a hairpin).
 */
void vpd_rule_flow(const struct vpd_rule *r, uint32_t in_port, uint32_t out_port,
		   struct vpd_flow *f);
/* The cookie of rule id of table (VPD_FLOW_RULE). */
uint64_t vpd_rule_cookie(uint8_t table, uint32_t id);
/* The cookie and mask that match every rule of table. */
uint64_t vpd_rule_table_cookie(uint8_t table);
#define VPD_RULE_TABLE_COOKIE_MASK \
	(VPD_COOKIE_MAGIC_MASK | VPD_COOKIE_KIND_MASK | VPD_RULE_TABLE_MASK)
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
/*
 * The rows of e's representor port (e->rep_port): a kernel tap the daemon
 * made, an Interface of type "system" (OVS's AF_PACKET on the userspace
 * datapath) with port number ofport; the Port in VLAN 4095 (nothing the
 * switch floods reaches it), named in external_ids.
 */
void vpd_rep_port_columns(JsonBuilder *b, const struct vpd_entry *e);
void vpd_rep_interface_columns(JsonBuilder *b, const struct vpd_entry *e, uint32_t ofport);

#endif
