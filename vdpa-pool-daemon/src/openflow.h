/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * openflow: the OpenFlow 1.4 messages the daemon sends and reads, byte for
 * byte (big endian, as the OpenFlow 1.4 specification lays them out), and
 * the flow model they carry.
 *
 * A flow of the daemon matches at most an input port and an Ethernet
 * source and drops, goes to NORMAL or to one port; which flows each VF gets is
 * policy.h's business, sending them ofconn.h's.  No I/O here.  Decoded
 * back field by field in tests/test-ovs.c, and by OVS's own decoder
 * (ovs-ofctl ofp-print) in tests/unit/test_openflow_ofp_print.py.
 */
#ifndef VPD_OPENFLOW_H
#define VPD_OPENFLOW_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

struct vpd_flow {
	uint64_t cookie;
	uint8_t table;        /* the flow's table (a DELETE: VPD_OFPTT_ALL for all) */
	uint16_t priority;
	uint32_t in_port;     /* 0: any */
	bool match_src;
	uint8_t src[6];
	/*
	 * A guest's rule (rules.h) matches more: each field below with a
	 * zero mask (or 0 / false) is not matched.  src_mask, with
	 * match_src: all-zero means exact.
	 */
	uint8_t src_mask[6];
	uint8_t dst[6], dst_mask[6];
	uint16_t eth_type;
	uint16_t vlan_vid;    /* 1..4094 */
	bool match_ip_proto;
	uint8_t ip_proto;
	uint8_t ipv4_src[4], ipv4_src_mask[4], ipv4_dst[4], ipv4_dst_mask[4];
	uint8_t ipv6_src[16], ipv6_src_mask[16], ipv6_dst[16], ipv6_dst_mask[16];
	uint16_t l4_src, l4_src_mask, l4_dst, l4_dst_mask; /* TCP or UDP by ip_proto */
	/* actions, in this order: pop_vlan, push_vlan + set_field, ... */
	bool pop_vlan;
	uint16_t push_vid;    /* 0: none */
	bool normal;          /* actions=NORMAL; else drop ... */
	uint32_t output;      /* ... or, not 0, actions=output:PORT ... */
	uint8_t goto_table;   /* ... or, not 0, goto_table:T */
};
#define VPD_OFPTT_ALL 0xff
#define VPD_OFPP_IN_PORT 0xfffffff8u   /* output: back out of in_port */

/* A flow as ovs-ofctl prints it (without counters). */
char *vpd_flow_to_string(const struct vpd_flow *f);

#define VPD_OFP_VERSION 0x05
enum {
	VPD_OFPT_HELLO = 0, VPD_OFPT_ERROR = 1, VPD_OFPT_ECHO_REQUEST = 2,
	VPD_OFPT_ECHO_REPLY = 3, VPD_OFPT_FLOW_MOD = 14, VPD_OFPT_MULTIPART_REQUEST = 18,
	VPD_OFPT_MULTIPART_REPLY = 19, VPD_OFPT_BARRIER_REQUEST = 20,
	VPD_OFPT_BARRIER_REPLY = 21, VPD_OFPT_BUNDLE_CONTROL = 33,
	VPD_OFPT_BUNDLE_ADD_MESSAGE = 34,
};
enum { VPD_OFPFC_ADD = 0, VPD_OFPFC_DELETE = 3, VPD_OFPFC_DELETE_STRICT = 4 };
/* Bundle control types. */
enum {
	VPD_OFPBCT_OPEN_REQUEST = 0, VPD_OFPBCT_COMMIT_REQUEST = 4,
	VPD_OFPBCT_DISCARD_REQUEST = 6,
};

/* Big-endian fields of a message read. */
static inline uint16_t vpd_of_get16(const uint8_t *p)
{
	return p[0] << 8 | p[1];
}

static inline uint32_t vpd_of_get32(const uint8_t *p)
{
	return (uint32_t)vpd_of_get16(p) << 16 | vpd_of_get16(p + 2);
}

static inline uint64_t vpd_of_get64(const uint8_t *p)
{
	return (uint64_t)vpd_of_get32(p) << 32 | vpd_of_get32(p + 4);
}

/* Each appends one message to out. */
void vpd_of_header(GByteArray *out, uint8_t type, uint16_t len, uint32_t xid);
void vpd_of_hello(GByteArray *out, uint32_t xid);
/* The reply to the echo request req (len bytes, whole): the same bytes
 * but the type. */
void vpd_of_echo_reply(GByteArray *out, const uint8_t *req, guint len);
void vpd_of_barrier_request(GByteArray *out, uint32_t xid);
/* ADD f, or DELETE (non-strict) every flow of table f->table (VPD_OFPTT_ALL:
 * of every table) whose cookie matches f->cookie under cookie_mask. */
void vpd_of_flow_mod(GByteArray *out, uint32_t xid, uint8_t command, const struct vpd_flow *f,
		     uint64_t cookie_mask);
void vpd_of_bundle_ctrl(GByteArray *out, uint32_t xid, uint32_t bundle, uint16_t type);
/* Wrap the message msg (whole, with its header) into bundle; the copy
 * gets xid. */
void vpd_of_bundle_add(GByteArray *out, uint32_t xid, uint32_t bundle, const GByteArray *msg);
/* The statistics of table's flows whose cookie matches under cookie_mask. */
void vpd_of_flow_stats_request(GByteArray *out, uint32_t xid, uint8_t table, uint64_t cookie,
			       uint64_t cookie_mask);
/*
 * One flow statistics reply (m, len bytes, whole): each flow's counters go
 * into by_cookie (a g_int64_hash table owning its keys and values), cookie
 * -> "n_packets=.., n_bytes=..".  False if the reply is malformed.
 */
bool vpd_of_flow_stats_parse(const uint8_t *m, guint len, GHashTable *by_cookie);
/*
 * The same reply's counters of the flow with cookie, added to *packets and
 * *bytes (*found set when it is there).  False if the reply is malformed.
 */
bool vpd_of_flow_stats_counts(const uint8_t *m, guint len, uint64_t cookie, uint64_t *packets,
			      uint64_t *bytes, bool *found);

#endif
