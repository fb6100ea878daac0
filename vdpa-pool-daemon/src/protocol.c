// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * protocol: build and parse API messages (see protocol.h for the format).
 *
 * Everything that comes from a client is checked before use: the header
 * (magic, version, a known type, a payload length within bounds that
 * matches what was received), each attribute (a known type, the exact size
 * of its kind, strings NUL-terminated UTF-8 without inner NULs, padding
 * inside the payload), and nesting (VF, POOL_STATS and CONNS, one level
 * deep).
 */
#include "protocol.h"

#include <string.h>

G_DEFINE_QUARK(vpd-protocol-error-quark, vpd_protocol_error)

enum kind {
	K_NONE, K_U8, K_U16, K_U32, K_U64, K_MAC, K_STR, K_NEST, K_TOKEN,
	K_B4, K_B8, K_B12, K_B32, K_U64S,
};

static const enum kind attr_kind[VPD_A_MAX + 1] = {
	[VPD_A_POOL] = K_STR,
	[VPD_A_OWNER] = K_STR,
	[VPD_A_COUNT] = K_U32,
	[VPD_A_HANDLE] = K_U32,
	[VPD_A_VF] = K_NEST,
	[VPD_A_VF_INDEX] = K_U32,
	[VPD_A_MAC] = K_MAC,
	[VPD_A_VLAN] = K_U16,
	[VPD_A_QOS] = K_U8,
	[VPD_A_VLAN_PROTO] = K_U16,
	[VPD_A_SPOOFCHK] = K_U8,
	[VPD_A_TRUST] = K_U8,
	[VPD_A_LINK_STATE] = K_U8,
	[VPD_A_MIN_TX_RATE] = K_U32,
	[VPD_A_MAX_TX_RATE] = K_U32,
	[VPD_A_VHOST_PATH] = K_STR,
	[VPD_A_ERRNO] = K_U32,
	[VPD_A_MESSAGE] = K_STR,
	[VPD_A_PORT] = K_STR,
	[VPD_A_FLOW] = K_STR,
	[VPD_A_HANDOVER] = K_TOKEN,
	[VPD_A_REP_PORT] = K_STR,
	[VPD_A_FLOW_ID] = K_U32,
	[VPD_A_PRIORITY] = K_U16,
	[VPD_A_M_ETH_DST] = K_B12,
	[VPD_A_M_ETH_SRC] = K_B12,
	[VPD_A_M_ETH_TYPE] = K_U16,
	[VPD_A_M_VLAN_VID] = K_U16,
	[VPD_A_M_IP_PROTO] = K_U8,
	[VPD_A_M_IPV4_SRC] = K_B8,
	[VPD_A_M_IPV4_DST] = K_B8,
	[VPD_A_M_IPV6_SRC] = K_B32,
	[VPD_A_M_IPV6_DST] = K_B32,
	[VPD_A_M_L4_SRC] = K_B4,
	[VPD_A_M_L4_DST] = K_B4,
	[VPD_A_OUT] = K_U32,
	[VPD_A_VLAN_POP] = K_U8,
	[VPD_A_VLAN_PUSH] = K_U16,
	[VPD_A_PACKETS] = K_U64,
	[VPD_A_BYTES] = K_U64,
	[VPD_A_UID] = K_U32,
	[VPD_A_PORT_STATS] = K_U64S,
	[VPD_A_POOL_STATS] = K_NEST,
	[VPD_A_CLAIMS] = K_U64,
	[VPD_A_CLAIMS_REFUSED] = K_U64,
	[VPD_A_RELEASES] = K_U64,
	[VPD_A_RELEASES_GONE] = K_U64,
	[VPD_A_CLAIM_HIST] = K_U64S,
	[VPD_A_RELEASE_HIST] = K_U64S,
	[VPD_A_CONNS] = K_NEST,
	[VPD_A_START_TIME] = K_U64,
};

#define MAX_STR 1024

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = v;
	p[1] = v >> 8;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	put_le16(p, v);
	put_le16(p + 2, v >> 16);
}

static uint16_t get_le16(const uint8_t *p)
{
	return p[0] | (uint16_t)p[1] << 8;
}

static uint32_t get_le32(const uint8_t *p)
{
	return get_le16(p) | (uint32_t)get_le16(p + 2) << 16;
}

void vpd_builder_init(struct vpd_builder *b, uint16_t type, uint32_t seq)
{
	uint8_t hdr[VPD_HEADER_SIZE] = { 0 };

	put_le32(hdr, VPD_MAGIC);
	put_le16(hdr + 4, VPD_VERSION);
	put_le16(hdr + 6, type);
	put_le32(hdr + 8, seq);
	b->buf = g_byte_array_new();
	b->nest = g_array_new(false, false, sizeof(guint));
	g_byte_array_append(b->buf, hdr, sizeof(hdr));
}

static void pad(struct vpd_builder *b)
{
	static const uint8_t zeros[4];

	g_byte_array_append(b->buf, zeros, (4 - b->buf->len % 4) % 4);
}

void vpd_put_bytes(struct vpd_builder *b, uint16_t type, const void *v, uint16_t len)
{
	uint8_t h[4];

	put_le16(h, type);
	put_le16(h + 2, len);
	g_byte_array_append(b->buf, h, 4);
	g_byte_array_append(b->buf, v, len);
	pad(b);
}

void vpd_put_u8(struct vpd_builder *b, uint16_t type, uint8_t v)
{
	vpd_put_bytes(b, type, &v, 1);
}

void vpd_put_u16(struct vpd_builder *b, uint16_t type, uint16_t v)
{
	uint8_t le[2];

	put_le16(le, v);
	vpd_put_bytes(b, type, le, 2);
}

void vpd_put_u32(struct vpd_builder *b, uint16_t type, uint32_t v)
{
	uint8_t le[4];

	put_le32(le, v);
	vpd_put_bytes(b, type, le, 4);
}

void vpd_put_u64(struct vpd_builder *b, uint16_t type, uint64_t v)
{
	uint8_t le[8];

	put_le32(le, v);
	put_le32(le + 4, v >> 32);
	vpd_put_bytes(b, type, le, 8);
}

void vpd_put_u64s(struct vpd_builder *b, uint16_t type, const uint64_t *v, unsigned n)
{
	uint8_t le[8 * VPD_MAX_U64S];

	g_assert(n && n <= VPD_MAX_U64S);
	for (unsigned i = 0; i < n; i++) {
		put_le32(le + 8 * i, v[i]);
		put_le32(le + 8 * i + 4, v[i] >> 32);
	}
	vpd_put_bytes(b, type, le, 8 * n);
}

void vpd_put_str(struct vpd_builder *b, uint16_t type, const char *s)
{
	vpd_put_bytes(b, type, s, strlen(s) + 1);
}

void vpd_nest_start(struct vpd_builder *b, uint16_t type)
{
	guint off = b->buf->len;
	uint8_t h[4];

	put_le16(h, type);
	put_le16(h + 2, 0);
	g_byte_array_append(b->buf, h, 4);
	g_array_append_val(b->nest, off);
}

void vpd_nest_end(struct vpd_builder *b)
{
	guint off = g_array_index(b->nest, guint, b->nest->len - 1);

	g_array_set_size(b->nest, b->nest->len - 1);
	put_le16(b->buf->data + off + 2, b->buf->len - off - 4);
}

GBytes *vpd_builder_finish(struct vpd_builder *b)
{
	g_assert(b->nest->len == 0);
	put_le32(b->buf->data + 12, b->buf->len - VPD_HEADER_SIZE);
	g_array_unref(b->nest);
	b->nest = NULL;
	return g_byte_array_free_to_bytes(g_steal_pointer(&b->buf));
}

static bool known_type(uint16_t type)
{
	switch (type) {
	case VPD_MSG_CLAIM:
	case VPD_MSG_RELEASE:
	case VPD_MSG_SET_ATTRS:
	case VPD_MSG_QUERY:
	case VPD_MSG_STATUS:
	case VPD_MSG_REP_OPEN:
	case VPD_MSG_REP_CLOSE:
	case VPD_MSG_FLOW_ADD:
	case VPD_MSG_FLOW_DEL:
	case VPD_MSG_FLOW_STATS:
	case VPD_MSG_METRICS:
	case VPD_MSG_VF_STATS:
	case VPD_MSG_REPLY:
	case VPD_MSG_ERROR:
		return true;
	}
	return false;
}

static bool bad(GError **error, const char *msg)
{
	g_set_error_literal(error, VPD_PROTOCOL_ERROR, 0, msg);
	return false;
}

gssize vpd_msg_total_len(const uint8_t *data, gsize len, GError **error)
{
	uint32_t payload;

	if (len < VPD_HEADER_SIZE)
		return bad(error, "short header"), -1;
	if (get_le32(data) != VPD_MAGIC)
		return bad(error, "bad magic"), -1;
	if (get_le16(data + 4) != VPD_VERSION)
		return bad(error, "unsupported protocol version"), -1;
	if (!known_type(get_le16(data + 6)))
		return bad(error, "unknown message type"), -1;
	payload = get_le32(data + 12);
	if (payload > VPD_MAX_PAYLOAD)
		return bad(error, "payload too large"), -1;
	return VPD_HEADER_SIZE + payload;
}

static bool check_value(enum kind k, const uint8_t *v, uint16_t len, int depth,
			GError **error);

/* Walk the attributes of [p, p+len); with out, record the top level. */
static bool walk(const uint8_t *p, gsize len, int depth, GArray *out, GError **error)
{
	gsize off = 0;

	while (off < len) {
		struct vpd_attr_view a;
		gsize padded;

		if (len - off < 4)
			return bad(error, "truncated attribute header");
		a.type = get_le16(p + off);
		a.len = get_le16(p + off + 2);
		a.value = p + off + 4;
		if (a.len > len - off - 4)
			return bad(error, "attribute longer than its message");
		if (a.type == 0 || a.type > VPD_A_MAX || attr_kind[a.type] == K_NONE)
			return bad(error, "unknown attribute");
		if (!check_value(attr_kind[a.type], a.value, a.len, depth, error))
			return false;
		padded = 4 + ((a.len + 3u) & ~3u);
		if (padded > len - off) {
			/* the last attribute may end without padding */
			if (off + 4 + a.len != len)
				return bad(error, "attribute padding past the message");
			padded = len - off;
		}
		for (gsize i = 4 + a.len; i < padded; i++)
			if (p[off + i])
				return bad(error, "non-zero padding");
		if (out)
			g_array_append_val(out, a);
		off += padded;
	}
	return true;
}

static bool check_value(enum kind k, const uint8_t *v, uint16_t len, int depth,
			GError **error)
{
	switch (k) {
	case K_U8:
		return len == 1 || bad(error, "u8 attribute of wrong size");
	case K_U16:
		return len == 2 || bad(error, "u16 attribute of wrong size");
	case K_U32:
		return len == 4 || bad(error, "u32 attribute of wrong size");
	case K_U64:
		return len == 8 || bad(error, "u64 attribute of wrong size");
	case K_MAC:
		return len == 6 || bad(error, "MAC attribute of wrong size");
	case K_B4:
	case K_B8:
	case K_B12:
	case K_B32:
		return len == (k == K_B4 ? 4 : k == K_B8 ? 8 : k == K_B12 ? 12 : 32) ||
		       bad(error, "match attribute of wrong size");
	case K_U64S:
		return (len && len % 8 == 0 && len / 8 <= VPD_MAX_U64S) ||
		       bad(error, "u64s attribute of wrong size");
	case K_TOKEN:
		return len == VPD_HANDOVER_SIZE ||
		       bad(error, "HANDOVER attribute of wrong size");
	case K_STR:
		if (len < 1 || len > MAX_STR || v[len - 1] != 0)
			return bad(error, "string attribute not NUL-terminated or too long");
		if (memchr(v, 0, len - 1))
			return bad(error, "string attribute with an inner NUL");
		return g_utf8_validate((const char *)v, len - 1, NULL) ||
		       bad(error, "string attribute not UTF-8");
	case K_NEST:
		if (depth + 1 >= VPD_MAX_DEPTH)
			return bad(error, "attributes nested too deep");
		return walk(v, len, depth + 1, NULL, error);
	case K_NONE:
		break;
	}
	return bad(error, "unknown attribute");
}

struct vpd_msg *vpd_msg_parse(GBytes *bytes, GError **error)
{
	gsize len;
	const uint8_t *data = g_bytes_get_data(bytes, &len);
	gssize total = vpd_msg_total_len(data, len, error);
	struct vpd_msg *msg;

	if (total < 0)
		return NULL;
	if ((gsize)total != len) {
		bad(error, "message length differs from its header");
		return NULL;
	}
	msg = g_new0(struct vpd_msg, 1);
	msg->type = get_le16(data + 6);
	msg->seq = get_le32(data + 8);
	msg->attrs = g_array_new(false, false, sizeof(struct vpd_attr_view));
	msg->buf = g_bytes_ref(bytes);
	if (!walk(data + VPD_HEADER_SIZE, len - VPD_HEADER_SIZE, 0, msg->attrs, error)) {
		vpd_msg_free(msg);
		return NULL;
	}
	return msg;
}

void vpd_msg_free(struct vpd_msg *msg)
{
	if (!msg)
		return;
	g_array_unref(msg->attrs);
	g_bytes_unref(msg->buf);
	g_free(msg);
}

const struct vpd_attr_view *vpd_msg_get(const struct vpd_msg *msg, uint16_t type)
{
	for (unsigned i = 0; i < msg->attrs->len; i++) {
		const struct vpd_attr_view *a =
			&g_array_index(msg->attrs, struct vpd_attr_view, i);

		if (a->type == type)
			return a;
	}
	return NULL;
}

bool vpd_attr_u32(const struct vpd_attr_view *a, uint32_t *out)
{
	if (!a || a->len != 4)
		return false;
	*out = get_le32(a->value);
	return true;
}

bool vpd_attr_u64(const struct vpd_attr_view *a, uint64_t *out)
{
	if (!a || a->len != 8)
		return false;
	*out = get_le32(a->value) | (uint64_t)get_le32(a->value + 4) << 32;
	return true;
}

unsigned vpd_attr_u64_count(const struct vpd_attr_view *a)
{
	if (!a || attr_kind[a->type] != K_U64S)
		return 0;
	return a->len / 8;      /* validated by the parser */
}

bool vpd_attr_u64_at(const struct vpd_attr_view *a, unsigned i, uint64_t *out)
{
	const uint8_t *p;

	if (i >= vpd_attr_u64_count(a))
		return false;
	p = a->value + 8 * i;
	*out = get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
	return true;
}

bool vpd_attr_u16(const struct vpd_attr_view *a, uint16_t *out)
{
	if (!a || a->len != 2)
		return false;
	*out = get_le16(a->value);
	return true;
}

bool vpd_attr_u8(const struct vpd_attr_view *a, uint8_t *out)
{
	if (!a || a->len != 1)
		return false;
	*out = a->value[0];
	return true;
}

const char *vpd_attr_str(const struct vpd_attr_view *a)
{
	if (!a || attr_kind[a->type] != K_STR)
		return NULL;
	return (const char *)a->value;  /* validated by the parser */
}

GArray *vpd_attr_nested(const struct vpd_attr_view *a)
{
	GArray *out = g_array_new(false, false, sizeof(struct vpd_attr_view));

	if (a && attr_kind[a->type] == K_NEST)
		walk(a->value, a->len, 1, out, NULL);
	return out;
}

const struct vpd_attr_view *vpd_nested_get(GArray *a, uint16_t type)
{
	for (guint i = 0; i < a->len; i++) {
		const struct vpd_attr_view *v = &g_array_index(a, struct vpd_attr_view, i);

		if (v->type == type)
			return v;
	}
	return NULL;
}

uint32_t vpd_nested_u32(GArray *a, uint16_t type)
{
	uint32_t v = 0;

	vpd_attr_u32(vpd_nested_get(a, type), &v);
	return v;
}

uint64_t vpd_nested_u64(GArray *a, uint16_t type)
{
	uint64_t v = 0;

	vpd_attr_u64(vpd_nested_get(a, type), &v);
	return v;
}
