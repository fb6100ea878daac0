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
 */
#ifndef VPD_OVS_H
#define VPD_OVS_H

#include "config.h"
#include "pool.h"

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

struct vpd_flow {
	uint64_t cookie;
	uint16_t priority;
	uint32_t in_port;     /* 0: any */
	bool match_src;
	uint8_t src[6];
	bool normal;          /* actions=NORMAL; else drop */
};

uint64_t vpd_flow_cookie(enum vpd_flow_kind kind, unsigned pf_index, unsigned vf);
uint32_t vpd_vf_ofport(unsigned pf_index, unsigned vf);
/* The flows of one VF in its current state (1 or 2); returns how many. */
unsigned vpd_vf_flows(const struct vpd_entry *e, unsigned pf_index, struct vpd_flow out[2]);
/*
 * The ingress policing rate of VF e's port, kbit/s (0: none): what its
 * transmit is held to (vpd_entry_max_tx_rate) while claimed; none while
 * free (it passes nothing then).
 */
uint64_t vpd_vf_policing_rate(const struct vpd_entry *e);
/* A flow as ovs-ofctl prints it (without counters). */
char *vpd_flow_to_string(const struct vpd_flow *f);

/* OpenFlow 1.4 messages (big endian), appended to out; also unit-tested. */
#define VPD_OFP_VERSION 0x05
enum {
	VPD_OFPT_HELLO = 0, VPD_OFPT_ERROR = 1, VPD_OFPT_ECHO_REQUEST = 2,
	VPD_OFPT_ECHO_REPLY = 3, VPD_OFPT_FLOW_MOD = 14, VPD_OFPT_MULTIPART_REQUEST = 18,
	VPD_OFPT_MULTIPART_REPLY = 19, VPD_OFPT_BARRIER_REQUEST = 20,
	VPD_OFPT_BARRIER_REPLY = 21, VPD_OFPT_BUNDLE_CONTROL = 33,
	VPD_OFPT_BUNDLE_ADD_MESSAGE = 34,
};
enum { VPD_OFPFC_ADD = 0, VPD_OFPFC_DELETE = 3 };
void vpd_of_header(GByteArray *out, uint8_t type, uint16_t len, uint32_t xid);
/* ADD f, or DELETE (non-strict) every flow whose cookie matches f->cookie
 * under cookie_mask. */
void vpd_of_flow_mod(GByteArray *out, uint32_t xid, uint8_t command, const struct vpd_flow *f,
		     uint64_t cookie_mask);
void vpd_of_bundle_ctrl(GByteArray *out, uint32_t xid, uint32_t bundle, uint16_t type);
/* Wrap the message msg (whole, with its header) into bundle; the copy
 * gets xid. */
void vpd_of_bundle_add(GByteArray *out, uint32_t xid, uint32_t bundle, const GByteArray *msg);

struct vpd_ovs;

/* Connect to OVSDB (cfg->ovsdb) for cfg->ovs_bridge. */
struct vpd_ovs *vpd_ovs_new(const struct vpd_config *cfg, GError **error);
void vpd_ovs_free(struct vpd_ovs *o);
/*
 * Make OVS hold every pooled VF's port and flows as the pools say now
 * (claims included): the bridge if missing, one OVSDB transaction for all
 * ports, one bundle that replaces all of the daemon's flows.  Finds each
 * VF's representor first.  Idempotent; a restart does not disturb claimed
 * VFs' traffic (the bundle is atomic).
 */
bool vpd_ovs_sync(struct vpd_ovs *o, struct vpd_pools *pools, GError **error);
/* One VF's port and flows after its claim or attributes changed. */
bool vpd_ovs_apply(struct vpd_ovs *o, struct vpd_entry *e, GError **error);
/*
 * Call every second: when ovs-vswitchd has restarted (it forgets flows),
 * everything is synced again; a VF whose last change failed is tried again.
 */
void vpd_ovs_tick(struct vpd_ovs *o, struct vpd_pools *pools);
/*
 * The VF's flows as OVS holds them, one line each in ovs-ofctl's words with
 * OVS's packet and byte counters; a flow the daemon expects that OVS does
 * not have is listed with "MISSING".  NULL with error if OVS cannot say.
 */
GPtrArray *vpd_ovs_vf_flows(struct vpd_ovs *o, const struct vpd_entry *e, GError **error);

/*
 * Whether err only says that OVS is not there or not answering (yet):
 * waiting and trying again may mend it.
 */
bool vpd_ovs_error_is_transient(const GError *err);

#endif
