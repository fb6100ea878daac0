// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of the API wire format: round trips, each malformed input
 * refused with a reason, and a mutation run (every byte of valid messages
 * flipped, truncated, extended, at random) that must never crash or read
 * out of bounds (this binary runs under ASan and UBSan).
 */
#include "protocol.h"

#include <string.h>

static GBytes *claim_msg(void)
{
	struct vpd_builder b;

	vpd_builder_init(&b, VPD_MSG_CLAIM, 7);
	vpd_put_str(&b, VPD_A_POOL, "tenant-a");
	vpd_put_str(&b, VPD_A_OWNER, "vm-\xc3\xa9t\xc3\xa9");
	vpd_put_u32(&b, VPD_A_COUNT, 2);
	return vpd_builder_finish(&b);
}

static GBytes *reply_msg(void)
{
	struct vpd_builder b;
	static const uint8_t mac[6] = { 2, 0, 0, 0, 0, 0x10 };

	vpd_builder_init(&b, VPD_MSG_REPLY, 7);
	for (unsigned i = 0; i < 2; i++) {
		g_autofree char *path = g_strdup_printf("/dev/vhost-vdpa-%u", i);

		vpd_nest_start(&b, VPD_A_VF);
		vpd_put_u32(&b, VPD_A_HANDLE, 100 + i);
		vpd_put_u32(&b, VPD_A_VF_INDEX, i);
		vpd_put_bytes(&b, VPD_A_MAC, mac, 6);
		vpd_put_u16(&b, VPD_A_VLAN, 100);
		vpd_put_u8(&b, VPD_A_QOS, 3);
		vpd_put_str(&b, VPD_A_VHOST_PATH, path);
		vpd_nest_end(&b);
	}
	return vpd_builder_finish(&b);
}

/*
 * The golden messages (tests/golden/vpd-messages.txt): this codec, which
 * QEMU's vsriov-daemon-pool compiles too, builds exactly their bytes, as
 * the tests' Python client does (tests/unit/test_vpd_golden.py).
 */
static GBytes *golden_build(const char *name)
{
	static const uint8_t mac[6] = { 2, 0, 0, 0, 0, 1 };
	static const uint8_t token[16] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };
	struct vpd_builder b;

	if (!strcmp(name, "claim")) {
		vpd_builder_init(&b, VPD_MSG_CLAIM, 7);
		vpd_put_str(&b, VPD_A_POOL, "tenant-a");
		vpd_put_str(&b, VPD_A_OWNER, "/machine/peripheral/pf0/vf[0]");
		vpd_put_u32(&b, VPD_A_COUNT, 1);
	} else if (!strcmp(name, "release")) {
		vpd_builder_init(&b, VPD_MSG_RELEASE, 8);
		vpd_put_u32(&b, VPD_A_HANDLE, 3);
	} else if (!strcmp(name, "set-attrs")) {
		vpd_builder_init(&b, VPD_MSG_SET_ATTRS, 9);
		vpd_put_u32(&b, VPD_A_HANDLE, 3);
		vpd_put_bytes(&b, VPD_A_MAC, mac, 6);
		vpd_put_u16(&b, VPD_A_VLAN, 100);
		vpd_put_u8(&b, VPD_A_QOS, 5);
		vpd_put_u16(&b, VPD_A_VLAN_PROTO, 0x88a8);
		vpd_put_u8(&b, VPD_A_SPOOFCHK, 1);
		vpd_put_u8(&b, VPD_A_TRUST, 0);
		vpd_put_u8(&b, VPD_A_LINK_STATE, 2);
		vpd_put_u32(&b, VPD_A_MIN_TX_RATE, 10);
		vpd_put_u32(&b, VPD_A_MAX_TX_RATE, 1000);
		vpd_put_bytes(&b, VPD_A_HANDOVER, token, sizeof(token));
	} else if (!strcmp(name, "query")) {
		vpd_builder_init(&b, VPD_MSG_QUERY, 10);
	} else if (!strcmp(name, "reply-claim")) {
		vpd_builder_init(&b, VPD_MSG_REPLY, 7);
		vpd_nest_start(&b, VPD_A_VF);
		vpd_put_u32(&b, VPD_A_HANDLE, 3);
		vpd_put_u32(&b, VPD_A_VF_INDEX, 2);
		vpd_put_bytes(&b, VPD_A_MAC, mac, 6);
		vpd_put_u8(&b, VPD_A_SPOOFCHK, 1);
		vpd_put_str(&b, VPD_A_VHOST_PATH, "/dev/vhost-vdpa-2");
		vpd_nest_end(&b);
	} else if (!strcmp(name, "rep-open")) {
		vpd_builder_init(&b, VPD_MSG_REP_OPEN, 12);
		vpd_put_u32(&b, VPD_A_HANDLE, 3);
	} else if (!strcmp(name, "rep-close")) {
		vpd_builder_init(&b, VPD_MSG_REP_CLOSE, 13);
		vpd_put_u32(&b, VPD_A_HANDLE, 3);
	} else if (!strcmp(name, "reply-rep-open")) {
		vpd_builder_init(&b, VPD_MSG_REPLY, 12);
		vpd_put_str(&b, VPD_A_PORT, "vrvpd-sw0-0");
	} else if (!strcmp(name, "flow-add")) {
		static const uint8_t dst[12] = { 2, 0, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
		static const uint8_t ip[8] = { 10, 0, 0, 2, 255, 255, 255, 255 };
		static const uint8_t port[4] = { 0x1f, 0x90, 0xff, 0xff };

		vpd_builder_init(&b, VPD_MSG_FLOW_ADD, 14);
		vpd_put_u32(&b, VPD_A_FLOW_ID, 7);
		vpd_put_u16(&b, VPD_A_PRIORITY, 0xfffe);
		vpd_put_u32(&b, VPD_A_HANDLE, 3);
		vpd_put_bytes(&b, VPD_A_M_ETH_DST, dst, sizeof(dst));
		vpd_put_u16(&b, VPD_A_M_ETH_TYPE, 0x0800);
		vpd_put_u8(&b, VPD_A_M_IP_PROTO, 6);
		vpd_put_bytes(&b, VPD_A_M_IPV4_DST, ip, sizeof(ip));
		vpd_put_bytes(&b, VPD_A_M_L4_DST, port, sizeof(port));
		vpd_put_u32(&b, VPD_A_OUT, 4);
		vpd_put_u8(&b, VPD_A_VLAN_POP, 1);
		vpd_put_u16(&b, VPD_A_VLAN_PUSH, 100);
	} else if (!strcmp(name, "flow-del") || !strcmp(name, "flow-stats")) {
		bool del = !strcmp(name, "flow-del");

		vpd_builder_init(&b, del ? VPD_MSG_FLOW_DEL : VPD_MSG_FLOW_STATS, del ? 15 : 16);
		vpd_put_u32(&b, VPD_A_FLOW_ID, 7);
	} else if (!strcmp(name, "reply-flow-stats")) {
		vpd_builder_init(&b, VPD_MSG_REPLY, 16);
		vpd_put_u64(&b, VPD_A_PACKETS, 3);
		vpd_put_u64(&b, VPD_A_BYTES, (1ull << 40) + 294);
	} else if (!strcmp(name, "vf-stats")) {
		vpd_builder_init(&b, VPD_MSG_VF_STATS, 17);
		vpd_put_u32(&b, VPD_A_HANDLE, 3);
	} else if (!strcmp(name, "error")) {
		vpd_builder_init(&b, VPD_MSG_ERROR, 11);
		vpd_put_u32(&b, VPD_A_ERRNO, 28);
		vpd_put_str(&b, VPD_A_MESSAGE, "pool 'a' has 0 free VF(s), 1 asked");
	} else {
		return NULL;
	}
	return vpd_builder_finish(&b);
}

static void test_golden(void)
{
	const char *path = g_getenv("VPD_GOLDEN");
	g_autofree char *text = NULL;
	g_auto(GStrv) lines = NULL;
	GError *err = NULL;
	unsigned n = 0;

	if (!path) {
		g_test_skip("VPD_GOLDEN (tests/golden/vpd-messages.txt) not set");
		return;
	}
	g_assert_true(g_file_get_contents(path, &text, NULL, &err));
	g_assert_no_error(err);
	lines = g_strsplit(text, "\n", -1);
	for (char **l = lines; *l; l++) {
		g_auto(GStrv) f = NULL;
		g_autoptr(GBytes) built = NULL;
		g_autoptr(GBytes) want = NULL;
		g_autoptr(vpd_msg) msg = NULL;
		gsize len;
		guint8 *bytes;

		if (!**l || **l == '#')
			continue;
		f = g_strsplit(*l, " ", 2);
		g_assert_nonnull(f[1]);
		len = strlen(f[1]) / 2;
		bytes = g_malloc(len);
		for (gsize i = 0; i < len; i++)
			bytes[i] = g_ascii_xdigit_value(f[1][2 * i]) << 4 |
				   g_ascii_xdigit_value(f[1][2 * i + 1]);
		want = g_bytes_new_take(bytes, len);
		built = golden_build(f[0]);
		g_assert_nonnull(built);
		if (!g_bytes_equal(built, want))
			g_error("golden message '%s': the codec builds other bytes", f[0]);
		msg = vpd_msg_parse(want, &err);
		g_assert_no_error(err);
		g_assert_nonnull(msg);
		n++;
	}
	g_assert_cmpuint(n, ==, 14);
}

static void test_roundtrip_claim(void)
{
	g_autoptr(GBytes) bytes = claim_msg();
	g_autoptr(GError) err = NULL;
	g_autoptr(vpd_msg) msg = vpd_msg_parse(bytes, &err);
	uint32_t count;
	gsize len;
	const uint8_t *data = g_bytes_get_data(bytes, &len);

	g_assert_no_error(err);
	g_assert_cmpint(vpd_msg_total_len(data, len, NULL), ==, len);
	g_assert_cmpuint(msg->type, ==, VPD_MSG_CLAIM);
	g_assert_cmpuint(msg->seq, ==, 7);
	g_assert_cmpstr(vpd_attr_str(vpd_msg_get(msg, VPD_A_POOL)), ==, "tenant-a");
	g_assert_cmpstr(vpd_attr_str(vpd_msg_get(msg, VPD_A_OWNER)), ==,
			"vm-\xc3\xa9t\xc3\xa9");
	g_assert_true(vpd_attr_u32(vpd_msg_get(msg, VPD_A_COUNT), &count));
	g_assert_cmpuint(count, ==, 2);
	g_assert_null(vpd_msg_get(msg, VPD_A_HANDLE));
	g_assert_null(vpd_attr_str(vpd_msg_get(msg, VPD_A_COUNT)));
	/* every attribute is 4-byte aligned */
	g_assert_cmpuint(len % 4, ==, 0);
}

/* REP_OPEN and REP_CLOSE, and a STATUS VF with both of its ports. */
static void test_roundtrip_rep(void)
{
	static const uint16_t types[] = { VPD_MSG_REP_OPEN, VPD_MSG_REP_CLOSE };

	for (unsigned i = 0; i < G_N_ELEMENTS(types); i++) {
		struct vpd_builder b;
		g_autoptr(GBytes) bytes = NULL;
		g_autoptr(GError) err = NULL;
		g_autoptr(vpd_msg) msg = NULL;
		uint32_t h = 0;

		vpd_builder_init(&b, types[i], 40 + i);
		vpd_put_u32(&b, VPD_A_HANDLE, 5);
		bytes = vpd_builder_finish(&b);
		msg = vpd_msg_parse(bytes, &err);
		g_assert_no_error(err);
		g_assert_cmpuint(msg->type, ==, types[i]);
		g_assert_cmpuint(msg->seq, ==, 40 + i);
		g_assert_true(vpd_attr_u32(vpd_msg_get(msg, VPD_A_HANDLE), &h));
		g_assert_cmpuint(h, ==, 5);
	}
	{
		struct vpd_builder b;
		g_autoptr(GBytes) bytes = NULL;
		g_autoptr(GError) err = NULL;
		g_autoptr(vpd_msg) msg = NULL;
		g_autoptr(GArray) in = NULL;
		const char *port = NULL, *rep = NULL;

		vpd_builder_init(&b, VPD_MSG_REPLY, 9);
		vpd_nest_start(&b, VPD_A_VF);
		vpd_put_u32(&b, VPD_A_HANDLE, 0);
		vpd_put_str(&b, VPD_A_PORT, "vpd-sw0-0");
		vpd_put_str(&b, VPD_A_REP_PORT, "vrvpd-sw0-0");
		vpd_nest_end(&b);
		bytes = vpd_builder_finish(&b);
		msg = vpd_msg_parse(bytes, &err);
		g_assert_no_error(err);
		in = vpd_attr_nested(vpd_msg_get(msg, VPD_A_VF));
		for (unsigned j = 0; j < in->len; j++) {
			const struct vpd_attr_view *x = &g_array_index(in, struct vpd_attr_view, j);

			if (x->type == VPD_A_PORT)
				port = vpd_attr_str(x);
			else if (x->type == VPD_A_REP_PORT)
				rep = vpd_attr_str(x);
		}
		g_assert_cmpstr(port, ==, "vpd-sw0-0");
		g_assert_cmpstr(rep, ==, "vrvpd-sw0-0");
	}
}

static void test_roundtrip_nested(void)
{
	g_autoptr(GBytes) bytes = reply_msg();
	g_autoptr(GError) err = NULL;
	g_autoptr(vpd_msg) msg = vpd_msg_parse(bytes, &err);
	unsigned vfs = 0;

	g_assert_no_error(err);
	for (unsigned i = 0; i < msg->attrs->len; i++) {
		const struct vpd_attr_view *a = &g_array_index(msg->attrs, struct vpd_attr_view, i);
		g_autoptr(GArray) in = NULL;
		uint32_t handle = 0, index = 0;
		uint16_t vlan = 0;
		uint8_t qos = 0;
		const char *path = NULL;

		g_assert_cmpuint(a->type, ==, VPD_A_VF);
		in = vpd_attr_nested(a);
		g_assert_cmpuint(in->len, ==, 6);
		for (unsigned j = 0; j < in->len; j++) {
			const struct vpd_attr_view *x = &g_array_index(in, struct vpd_attr_view, j);

			switch (x->type) {
			case VPD_A_HANDLE: g_assert_true(vpd_attr_u32(x, &handle)); break;
			case VPD_A_VF_INDEX: g_assert_true(vpd_attr_u32(x, &index)); break;
			case VPD_A_VLAN: g_assert_true(vpd_attr_u16(x, &vlan)); break;
			case VPD_A_QOS: g_assert_true(vpd_attr_u8(x, &qos)); break;
			case VPD_A_VHOST_PATH: path = vpd_attr_str(x); break;
			case VPD_A_MAC: g_assert_cmpuint(x->len, ==, 6); break;
			default: g_assert_not_reached();
			}
		}
		g_assert_cmpuint(handle, ==, 100 + vfs);
		g_assert_cmpuint(index, ==, vfs);
		g_assert_cmpuint(vlan, ==, 100);
		g_assert_cmpuint(qos, ==, 3);
		g_assert_true(g_str_has_prefix(path, "/dev/vhost-vdpa-"));
		vfs++;
	}
	g_assert_cmpuint(vfs, ==, 2);
}

/* A header and a raw payload, for hand-made bad messages. */
static GBytes *raw(uint32_t magic, uint16_t version, uint16_t type,
		   const uint8_t *payload, uint32_t len, int32_t len_delta)
{
	GByteArray *b = g_byte_array_new();
	uint8_t h[16];
	uint32_t hdr_len = len + len_delta;

	memcpy(h, &magic, 4);
	memcpy(h + 4, &version, 2);
	memcpy(h + 6, &type, 2);
	memset(h + 8, 0, 4);
	memcpy(h + 12, &hdr_len, 4);
	g_byte_array_append(b, h, 16);
	g_byte_array_append(b, payload, len);
	return g_byte_array_free_to_bytes(b);
}

struct bad_case {
	const char *name;
	uint32_t magic;
	uint16_t version, type;
	uint8_t payload[40];
	uint32_t len;
	int32_t len_delta;
	const char *error;
};

#define OK_HDR VPD_MAGIC, VPD_VERSION, VPD_MSG_CLAIM

static const struct bad_case bad_cases[] = {
	{ "magic", 0x12345678, 1, 1, {0}, 0, 0, "bad magic" },
	{ "version", VPD_MAGIC, 2, 1, {0}, 0, 0, "unsupported protocol version" },
	{ "type", VPD_MAGIC, 1, 99, {0}, 0, 0, "unknown message type" },
	{ "type-after-vf-stats", VPD_MAGIC, 1, 13, {0}, 0, 0, "unknown message type" },
	{ "type-zero", VPD_MAGIC, 1, 0, {0}, 0, 0, "unknown message type" },
	{ "rep-port-no-nul", VPD_MAGIC, 1, VPD_MSG_REPLY, { 22, 0, 2, 0, 'v', 'r', 0, 0 }, 8, 0,
	  "string attribute not NUL-terminated or too long" },
	{ "bytes-attr-after", OK_HDR, { 52, 0, 4, 0, 1, 0, 0, 0 }, 8, 0, "unknown attribute" },
	{ "u64s-odd-size", OK_HDR, { 42, 0, 4, 0, 1, 0, 0, 0 }, 8, 0,
	  "u64s attribute of wrong size" },
	{ "u64s-empty", OK_HDR, { 48, 0, 0, 0 }, 4, 0, "u64s attribute of wrong size" },
	{ "match-short", OK_HDR, { 30, 0, 4, 0, 10, 0, 0, 1 }, 8, 0, "match attribute of wrong size" },
	{ "packets-short", OK_HDR, { 39, 0, 4, 0, 1, 0, 0, 0 }, 8, 0, "u64 attribute of wrong size" },
	{ "length-mismatch", OK_HDR, { 3, 0, 4, 0, 1, 0, 0, 0 }, 8, 4,
	  "message length differs from its header" },
	{ "huge-length", OK_HDR, {0}, 0, VPD_MAX_PAYLOAD + 1, "payload too large" },
	{ "truncated-attr-header", OK_HDR, { 3, 0 }, 2, 0, "truncated attribute header" },
	{ "attr-too-long", OK_HDR, { 3, 0, 9, 0, 1, 0, 0, 0 }, 8, 0,
	  "attribute longer than its message" },
	{ "unknown-attr", OK_HDR, { 99, 0, 4, 0, 1, 0, 0, 0 }, 8, 0, "unknown attribute" },
	{ "attr-zero", OK_HDR, { 0, 0, 0, 0 }, 4, 0, "unknown attribute" },
	{ "u32-short", OK_HDR, { 3, 0, 2, 0, 1, 0, 0, 0 }, 8, 0, "u32 attribute of wrong size" },
	{ "str-no-nul", OK_HDR, { 1, 0, 2, 0, 'a', 'b', 0, 0 }, 8, 0,
	  "string attribute not NUL-terminated or too long" },
	{ "str-empty", OK_HDR, { 1, 0, 0, 0 }, 4, 0,
	  "string attribute not NUL-terminated or too long" },
	{ "str-inner-nul", OK_HDR, { 1, 0, 3, 0, 'a', 0, 0, 0 }, 8, 0,
	  "string attribute with an inner NUL" },
	{ "str-not-utf8", OK_HDR, { 1, 0, 3, 0, 0xff, 'a', 0, 0 }, 8, 0,
	  "string attribute not UTF-8" },
	{ "nonzero-padding", OK_HDR, { 9, 0, 1, 0, 3, 1, 0, 0 }, 8, 0, "non-zero padding" },
	{ "nested-too-deep", OK_HDR, { 5, 0, 8, 0, 5, 0, 4, 0, 4, 0, 0, 0 }, 12, 0,
	  "attributes nested too deep" },
	{ "nested-bad-inner", OK_HDR, { 5, 0, 4, 0, 99, 0, 0, 0 }, 8, 0, "unknown attribute" },
};

static void test_bad(gconstpointer data)
{
	const struct bad_case *c = data;
	g_autoptr(GBytes) bytes = raw(c->magic, c->version, c->type, c->payload, c->len,
				      c->len_delta);
	g_autoptr(GError) err = NULL;
	g_autoptr(vpd_msg) msg = vpd_msg_parse(bytes, &err);

	g_assert_null(msg);
	g_assert_error(err, VPD_PROTOCOL_ERROR, 0);
	g_assert_cmpstr(err->message, ==, c->error);
}

static void test_short_input(void)
{
	g_autoptr(GBytes) bytes = claim_msg();
	gsize len;
	const uint8_t *data = g_bytes_get_data(bytes, &len);

	for (gsize n = 0; n < len; n++) {
		g_autoptr(GBytes) part = g_bytes_new(data, n);
		g_autoptr(GError) err = NULL;
		g_autoptr(vpd_msg) msg = vpd_msg_parse(part, &err);

		g_assert_null(msg);
		g_assert_nonnull(err);
	}
}

/*
 * Random mutations of valid messages: the parser must refuse or accept
 * each without undefined behaviour, and what it accepts must read back
 * within its buffer.
 */
static void test_mutations(void)
{
	GBytes *seeds[2] = { claim_msg(), reply_msg() };
	GRand *rand = g_rand_new_with_seed(20261122);
	unsigned accepted = 0;

	for (unsigned iter = 0; iter < 200000; iter++) {
		gsize len;
		const uint8_t *src = g_bytes_get_data(seeds[iter % 2], &len);
		g_autofree uint8_t *buf = g_malloc(len + 16);
		g_autoptr(GBytes) bytes = NULL;
		g_autoptr(vpd_msg) msg = NULL;
		unsigned flips = g_rand_int_range(rand, 1, 4);

		memcpy(buf, src, len);
		for (unsigned f = 0; f < flips; f++)
			buf[g_rand_int_range(rand, 0, len)] = g_rand_int_range(rand, 0, 256);
		switch (g_rand_int_range(rand, 0, 3)) {
		case 0:
			len = g_rand_int_range(rand, 0, len + 1);
			break;
		case 1:
			for (unsigned i = 0; i < 16; i++)
				buf[len + i] = g_rand_int_range(rand, 0, 256);
			len += g_rand_int_range(rand, 0, 17);
			break;
		}
		bytes = g_bytes_new(buf, len);
		msg = vpd_msg_parse(bytes, NULL);
		if (msg) {
			accepted++;
			for (unsigned i = 0; i < msg->attrs->len; i++) {
				const struct vpd_attr_view *a =
					&g_array_index(msg->attrs, struct vpd_attr_view, i);
				g_autoptr(GArray) in = vpd_attr_nested(a);
				const char *s = vpd_attr_str(a);

				if (s)
					g_assert_cmpuint(strlen(s) + 1, ==, a->len);
			}
		}
	}
	/* flips of values keep many messages valid: the run reached the parser's end */
	g_assert_cmpuint(accepted, >, 1000);
	g_rand_free(rand);
	g_bytes_unref(seeds[0]);
	g_bytes_unref(seeds[1]);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/protocol/golden", test_golden);
	g_test_add_func("/protocol/roundtrip-claim", test_roundtrip_claim);
	g_test_add_func("/protocol/roundtrip-nested", test_roundtrip_nested);
	g_test_add_func("/protocol/roundtrip-rep", test_roundtrip_rep);
	g_test_add_func("/protocol/short-input", test_short_input);
	g_test_add_func("/protocol/mutations", test_mutations);
	for (unsigned i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
		g_autofree char *path = g_strdup_printf("/protocol/bad/%s", bad_cases[i].name);

		g_test_add_data_func(path, &bad_cases[i], test_bad);
	}
	return g_test_run();
}
