// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * openflow: OpenFlow 1.4 messages encoded and decoded (see openflow.h).
 */
#include "openflow.h"

#include <inttypes.h>
#include <string.h>

#define OFPP_NORMAL 0xfffffffau
#define OFPP_ANY 0xffffffffu
#define OFPG_ANY 0xffffffffu
#define OFP_NO_BUFFER 0xffffffffu
#define OFPBF_ATOMIC 1
#define OFPMP_FLOW 1

char *vpd_flow_to_string(const struct vpd_flow *f)
{
	GString *s = g_string_new(NULL);

	g_string_append_printf(s, "cookie=0x%" G_GINT64_MODIFIER "x, ", f->cookie);
	if (f->table)
		g_string_append_printf(s, "table=%u, ", f->table);
	g_string_append_printf(s, "priority=%u", f->priority);
	if (f->in_port)
		g_string_append_printf(s, ",in_port=%u", f->in_port);
	if (f->match_src)
		g_string_append_printf(s, ",dl_src=%02x:%02x:%02x:%02x:%02x:%02x", f->src[0],
				       f->src[1], f->src[2], f->src[3], f->src[4], f->src[5]);
	if (f->goto_table)
		g_string_append_printf(s, " actions=goto_table:%u", f->goto_table);
	else if (f->output)
		g_string_append_printf(s, " actions=output:%u", f->output);
	else
		g_string_append(s, f->normal ? " actions=NORMAL" : " actions=drop");
	return g_string_free(s, FALSE);
}

/* ---- encoding ----------------------------------------------------------- */

static void put8(GByteArray *b, uint8_t v)
{
	g_byte_array_append(b, &v, 1);
}

static void put16(GByteArray *b, uint16_t v)
{
	uint16_t be = GUINT16_TO_BE(v);

	g_byte_array_append(b, (uint8_t *)&be, 2);
}

static void put32(GByteArray *b, uint32_t v)
{
	uint32_t be = GUINT32_TO_BE(v);

	g_byte_array_append(b, (uint8_t *)&be, 4);
}

static void put64(GByteArray *b, uint64_t v)
{
	uint64_t be = GUINT64_TO_BE(v);

	g_byte_array_append(b, (uint8_t *)&be, 8);
}

static void pad(GByteArray *b, unsigned n)
{
	static const uint8_t zero[8];

	g_byte_array_append(b, zero, n);
}

static void set16(GByteArray *b, guint at, uint16_t v)
{
	b->data[at] = v >> 8;
	b->data[at + 1] = v;
}

void vpd_of_header(GByteArray *out, uint8_t type, uint16_t len, uint32_t xid)
{
	put8(out, VPD_OFP_VERSION);
	put8(out, type);
	put16(out, len);
	put32(out, xid);
}

void vpd_of_hello(GByteArray *out, uint32_t xid)
{
	vpd_of_header(out, VPD_OFPT_HELLO, 8, xid);
}

void vpd_of_echo_reply(GByteArray *out, const uint8_t *req, guint len)
{
	guint start = out->len;

	g_byte_array_append(out, req, len);
	out->data[start + 1] = VPD_OFPT_ECHO_REPLY;
}

void vpd_of_barrier_request(GByteArray *out, uint32_t xid)
{
	vpd_of_header(out, VPD_OFPT_BARRIER_REQUEST, 8, xid);
}

/* OXM_OF_* field numbers (OpenFlow 1.4, 7.2.3.7) */
enum {
	OXM_IN_PORT = 0, OXM_ETH_DST = 3, OXM_ETH_SRC = 4, OXM_ETH_TYPE = 5, OXM_VLAN_VID = 6,
	OXM_IP_PROTO = 10, OXM_IPV4_SRC = 11, OXM_IPV4_DST = 12, OXM_TCP_SRC = 13,
	OXM_TCP_DST = 14, OXM_UDP_SRC = 15, OXM_UDP_DST = 16, OXM_IPV6_SRC = 26,
	OXM_IPV6_DST = 27,
};
#define OFPVID_PRESENT 0x1000

static void put_oxm_header(GByteArray *b, unsigned field, bool hasmask, unsigned len)
{
	put32(b, 0x80000000u | field << 9 | (hasmask ? 1u << 8 : 0) | len);
}

static bool all_ones(const uint8_t *p, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (p[i] != 0xff)
			return false;
	return true;
}

static bool all_zero(const uint8_t *p, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* A field of n bytes: exact when mask is all-ones, else masked; none when 0. */
static void put_oxm_masked(GByteArray *b, unsigned field, const uint8_t *v, const uint8_t *mask,
			   unsigned n)
{
	if (all_zero(mask, n))
		return;
	put_oxm_header(b, field, !all_ones(mask, n), all_ones(mask, n) ? n : 2 * n);
	g_byte_array_append(b, v, n);
	if (!all_ones(mask, n))
		g_byte_array_append(b, mask, n);
}

static void put_oxm_port16(GByteArray *b, unsigned field, uint16_t v, uint16_t mask)
{
	uint8_t vb[2] = { v >> 8, v }, mb[2] = { mask >> 8, mask };

	put_oxm_masked(b, field, vb, mb, 2);
}

/* An OXM match of f, padded to 8 bytes, its prerequisites first. */
static void put_match(GByteArray *b, const struct vpd_flow *f)
{
	static const uint8_t ones[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	guint start = b->len;

	put16(b, 1);  /* OFPMT_OXM */
	put16(b, 0);
	if (f && f->in_port) {
		put_oxm_header(b, OXM_IN_PORT, false, 4);
		put32(b, f->in_port);
	}
	if (f)
		put_oxm_masked(b, OXM_ETH_DST, f->dst, f->dst_mask, 6);
	if (f && f->match_src)
		put_oxm_masked(b, OXM_ETH_SRC, f->src,
			       all_zero(f->src_mask, 6) ? ones : f->src_mask, 6);
	if (f && f->eth_type) {
		put_oxm_header(b, OXM_ETH_TYPE, false, 2);
		put16(b, f->eth_type);
	}
	if (f && f->vlan_vid) {
		put_oxm_header(b, OXM_VLAN_VID, false, 2);
		put16(b, f->vlan_vid | OFPVID_PRESENT);
	} else if (f && f->eth_type) {
		/*
		 * A rule's EtherType without a VLAN id is that of an untagged
		 * frame (the VIRTIO classifier matches the frame's first 14
		 * bytes); OVS would match a tagged frame's inner type too.
		 */
		put_oxm_header(b, OXM_VLAN_VID, false, 2);
		put16(b, 0);    /* OFPVID_NONE */
	}
	if (f && f->match_ip_proto) {
		put_oxm_header(b, OXM_IP_PROTO, false, 1);
		put8(b, f->ip_proto);
	}
	if (f) {
		bool udp = f->ip_proto == 17;

		put_oxm_masked(b, OXM_IPV4_SRC, f->ipv4_src, f->ipv4_src_mask, 4);
		put_oxm_masked(b, OXM_IPV4_DST, f->ipv4_dst, f->ipv4_dst_mask, 4);
		put_oxm_masked(b, OXM_IPV6_SRC, f->ipv6_src, f->ipv6_src_mask, 16);
		put_oxm_masked(b, OXM_IPV6_DST, f->ipv6_dst, f->ipv6_dst_mask, 16);
		put_oxm_port16(b, udp ? OXM_UDP_SRC : OXM_TCP_SRC, f->l4_src, f->l4_src_mask);
		put_oxm_port16(b, udp ? OXM_UDP_DST : OXM_TCP_DST, f->l4_dst, f->l4_dst_mask);
	}
	set16(b, start + 2, b->len - start);
	pad(b, (8 - (b->len - start) % 8) % 8);
}

/* f's instructions: goto_table, or apply_actions (none: drop). */
static void put_instructions(GByteArray *b, const struct vpd_flow *f)
{
	guint start;

	if (f->goto_table) {
		put16(b, 1);          /* OFPIT_GOTO_TABLE */
		put16(b, 8);
		put8(b, f->goto_table);
		pad(b, 3);
		return;
	}
	if (!f->normal && !f->output)
		return;               /* drop: no instruction */
	start = b->len;
	put16(b, 4);                  /* OFPIT_APPLY_ACTIONS */
	put16(b, 0);
	pad(b, 4);
	if (f->pop_vlan) {
		put16(b, 18);         /* OFPAT_POP_VLAN */
		put16(b, 8);
		pad(b, 4);
	}
	if (f->push_vid) {
		put16(b, 17);         /* OFPAT_PUSH_VLAN */
		put16(b, 8);
		put16(b, 0x8100);
		pad(b, 2);
		put16(b, 25);         /* OFPAT_SET_FIELD */
		put16(b, 16);
		put_oxm_header(b, OXM_VLAN_VID, false, 2);
		put16(b, f->push_vid | OFPVID_PRESENT);
		pad(b, 6);
	}
	put16(b, 0);                  /* OFPAT_OUTPUT */
	put16(b, 16);
	put32(b, f->output ? f->output : OFPP_NORMAL);
	put16(b, 0xffff);             /* max_len: no buffering */
	pad(b, 6);
	set16(b, start + 2, b->len - start);
}

void vpd_of_flow_mod(GByteArray *out, uint32_t xid, uint8_t command, const struct vpd_flow *f,
		     uint64_t cookie_mask)
{
	guint start = out->len;
	bool add = command == VPD_OFPFC_ADD;

	vpd_of_header(out, VPD_OFPT_FLOW_MOD, 0, xid);
	put64(out, f->cookie);
	put64(out, add ? 0 : cookie_mask);
	put8(out, f->table);
	put8(out, command);
	put16(out, 0);                /* idle timeout */
	put16(out, 0);                /* hard timeout */
	put16(out, add ? f->priority : 0);
	put32(out, OFP_NO_BUFFER);
	put32(out, OFPP_ANY);         /* out_port: DELETE matches any */
	put32(out, OFPG_ANY);
	put16(out, add ? 4 : 0);      /* OFPFF_RESET_COUNTS */
	put16(out, 0);                /* importance */
	put_match(out, add ? f : NULL);
	if (add)
		put_instructions(out, f);
	set16(out, start + 2, out->len - start);
}

void vpd_of_bundle_ctrl(GByteArray *out, uint32_t xid, uint32_t bundle, uint16_t type)
{
	vpd_of_header(out, VPD_OFPT_BUNDLE_CONTROL, 16, xid);
	put32(out, bundle);
	put16(out, type);
	put16(out, OFPBF_ATOMIC);
}

void vpd_of_bundle_add(GByteArray *out, uint32_t xid, uint32_t bundle, const GByteArray *msg)
{
	guint start = out->len;

	vpd_of_header(out, VPD_OFPT_BUNDLE_ADD_MESSAGE, 0, xid);
	put32(out, bundle);
	pad(out, 2);
	put16(out, OFPBF_ATOMIC);
	g_byte_array_append(out, msg->data, msg->len);
	/* The inner message carries the xid of the message that wraps it. */
	memcpy(out->data + start + 20, out->data + start + 4, 4);
	set16(out, start + 2, out->len - start);
}

void vpd_of_flow_stats_request(GByteArray *out, uint32_t xid, uint8_t table, uint64_t cookie,
			       uint64_t cookie_mask)
{
	guint start = out->len;

	vpd_of_header(out, VPD_OFPT_MULTIPART_REQUEST, 0, xid);
	put16(out, OFPMP_FLOW);
	put16(out, 0);
	pad(out, 4);
	put8(out, table);
	pad(out, 3);
	put32(out, OFPP_ANY);
	put32(out, OFPG_ANY);
	pad(out, 4);
	put64(out, cookie);
	put64(out, cookie_mask);
	put_match(out, NULL);
	set16(out, start + 2, out->len - start);
}

/* ---- decoding ----------------------------------------------------------- */

bool vpd_of_flow_stats_parse(const uint8_t *m, guint len, GHashTable *by_cookie)
{
	guint off = 16;   /* header + multipart header */

	while (off + 48 <= len) {
		const uint8_t *f = m + off;
		uint16_t flen = vpd_of_get16(f);
		uint64_t *cookie;

		if (flen < 48 || off + flen > len)
			return false;
		cookie = g_new(uint64_t, 1);
		*cookie = vpd_of_get64(f + 24);
		g_hash_table_insert(by_cookie, cookie,
				    g_strdup_printf("n_packets=%" PRIu64 ", n_bytes=%" PRIu64,
						    vpd_of_get64(f + 32), vpd_of_get64(f + 40)));
		off += flen;
	}
	return off == len;
}

bool vpd_of_flow_stats_counts(const uint8_t *m, guint len, uint64_t cookie, uint64_t *packets,
			      uint64_t *bytes, bool *found)
{
	guint off = 16;

	while (off + 48 <= len) {
		const uint8_t *f = m + off;
		uint16_t flen = vpd_of_get16(f);

		if (flen < 48 || off + flen > len)
			return false;
		if (vpd_of_get64(f + 24) == cookie) {
			*packets += vpd_of_get64(f + 32);
			*bytes += vpd_of_get64(f + 40);
			*found = true;
		}
		off += flen;
	}
	return off == len;
}
