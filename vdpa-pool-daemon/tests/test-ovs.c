// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of the OVS side: the JSON reader OVSDB's replies go through
 * (good, bad and random input), the flows each VF state gives, and the
 * OpenFlow 1.4 messages, decoded back field by field as the OpenFlow 1.4
 * specification lays them out, and a flow statistics reply decoded.  OVS's
 * own decoder reads them in tests/unit/test_openflow_ofp_print.py; OVS
 * itself runs in tests/nested/test_l1_daemon.py.
 */
#include "json.h"
#include "ovs.h"
#include "reps.h"
#include "tap.h"

#include <errno.h>
#include <poll.h>
#include <linux/devlink.h>
#include <netlink/genl/genl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static uint16_t be16(const uint8_t *p)
{
	return p[0] << 8 | p[1];
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)be16(p) << 16 | be16(p + 2);
}

static uint64_t be64(const uint8_t *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static void test_json_good(void)
{
	static const char text[] =
		" {\"id\":7,\"result\":[{\"rows\":[{\"name\":\"a\\\"b\\u00e9\\ud83d\\ude00\","
		"\"_uuid\":[\"uuid\",\"1-2\"],\"ofport\":-1.5e2}]},{\"count\":1}],"
		"\"error\":null,\"t\":true,\"f\":false,\"e\":{},\"a\":[]} ";
	g_autoptr(GError) err = NULL;
	g_autoptr(vpd_json) j = vpd_json_parse(text, strlen(text), &err);
	const struct vpd_json *row;

	g_assert_no_error(err);
	g_assert_cmpint(vpd_json_get(j, "id")->num, ==, 7);
	row = vpd_json_at(vpd_json_get(vpd_json_at(vpd_json_get(j, "result"), 0), "rows"), 0);
	g_assert_cmpstr(vpd_json_get(row, "name")->str, ==, "a\"b\xc3\xa9\xf0\x9f\x98\x80");
	g_assert_cmpstr(vpd_json_at(vpd_json_get(row, "_uuid"), 1)->str, ==, "1-2");
	g_assert_cmpfloat(vpd_json_get(row, "ofport")->num, ==, -150);
	g_assert_cmpint(vpd_json_get(vpd_json_at(vpd_json_get(j, "result"), 1), "count")->num,
			==, 1);
	g_assert_cmpint(vpd_json_get(j, "error")->type, ==, VPD_JSON_NULL);
	g_assert_cmpint(vpd_json_get(j, "t")->type, ==, VPD_JSON_TRUE);
	g_assert_cmpint(vpd_json_get(j, "f")->type, ==, VPD_JSON_FALSE);
	g_assert_cmpuint(vpd_json_len(vpd_json_get(j, "a")), ==, 0);
	g_assert_null(vpd_json_get(j, "missing"));
	g_assert_null(vpd_json_at(j, 0));
	g_assert_cmpint(vpd_json_span(text, strlen(text)), ==, strlen(text) - 1);
}

static void test_json_bad(void)
{
	static const char *const bad[] = {
		"", "{", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "[1 2]", "\"abc", "01", "-", "1.",
		"1e", "tru", "nul", "[\"\\x\"]", "[\"\\ud800\"]", "[\"\\udc00\"]", "[\"\\u0000\"]",
		"[\"a\nb\"]", "{} {}", "{1:2}", "[\"\\u12g4\"]",
	};
	g_autoptr(GString) deep = g_string_new(NULL);

	for (unsigned i = 0; i < G_N_ELEMENTS(bad); i++) {
		g_autoptr(GError) err = NULL;
		g_autoptr(vpd_json) j = vpd_json_parse(bad[i], strlen(bad[i]), &err);

		if (j || !err)
			g_error("'%s' parsed", bad[i]);
		g_assert_true(g_str_has_prefix(err->message, "bad JSON from OVSDB: "));
	}
	for (unsigned i = 0; i < VPD_JSON_MAX_DEPTH + 2; i++)
		g_string_append_c(deep, '[');
	for (unsigned i = 0; i < VPD_JSON_MAX_DEPTH + 2; i++)
		g_string_append_c(deep, ']');
	g_assert_null(vpd_json_parse(deep->str, deep->len, NULL));
	g_assert_cmpint(vpd_json_span(deep->str, deep->len), ==, -1);
	/* Streams: partial values, two back to back, strings with brackets. */
	g_assert_cmpint(vpd_json_span("{\"a\":[1,", 8), ==, 0);
	g_assert_cmpint(vpd_json_span("{\"a\":\"}]\\\"\"}{}", 14), ==, 12);
	g_assert_cmpint(vpd_json_span("  ", 2), ==, 0);
	g_assert_cmpint(vpd_json_span("x", 1), ==, -1);
}

/* Random bytes and mutations of a real reply: never a crash or a leak. */
static void test_json_random(void)
{
	static const char seed[] =
		"{\"id\":1,\"result\":[{\"rows\":[{\"name\":\"pf0vf1\",\"ofport\":2}]}],"
		"\"error\":null}";
	GRand *r = g_rand_new_with_seed(42);
	char buf[sizeof(seed)];

	for (unsigned i = 0; i < 100000; i++) {
		gsize len = sizeof(seed) - 1;
		struct vpd_json *j;

		memcpy(buf, seed, sizeof(seed));
		for (unsigned k = g_rand_int_range(r, 1, 4); k; k--)
			buf[g_rand_int_range(r, 0, len)] = g_rand_int_range(r, 0, 256);
		len = g_rand_int_range(r, 0, len + 1);
		j = vpd_json_parse(buf, len, NULL);
		vpd_json_free(j);
		g_assert_cmpint(vpd_json_span(buf, len), <=, (gssize)len);
	}
	g_rand_free(r);
}

static void test_json_put_str(void)
{
	g_autoptr(GString) s = g_string_new(NULL);
	g_autoptr(vpd_json) j = NULL;

	vpd_json_put_str(s, "a\"b\\c\n\x01");
	g_assert_cmpstr(s->str, ==, "\"a\\\"b\\\\c\\u000a\\u0001\"");
	j = vpd_json_parse(s->str, s->len, NULL);
	g_assert_cmpstr(j->str, ==, "a\"b\\c\n\x01");
}

static void test_vf_flows(void)
{
	struct vpd_pf pf = { .name = (char *)"eth0" };
	struct vpd_pool pool = { .name = (char *)"a", .pf = &pf };
	struct vpd_entry e = { .pool = &pool, .vf = 3 };
	struct vpd_flow f[VPD_VF_MAX_FLOWS];
	g_autofree char *deny = NULL, *allow = NULL;

	g_assert_cmpuint(vpd_vf_ofport(0, 3), ==, 4);
	g_assert_cmpuint(vpd_vf_ofport(2, 0), ==, 2001);
	/* Free: drop only. */
	g_assert_cmpuint(vpd_vf_flows(&e, 1, f), ==, 1);
	deny = vpd_flow_to_string(&f[0]);
	g_assert_cmpstr(deny, ==, "cookie=0x5650010000010003, priority=10,in_port=1004 "
			"actions=drop");
	/* Claimed, spoof checking on with a MAC: from that MAC only. */
	e.claimed = true;
	e.attrs.spoofchk = true;
	memcpy(e.attrs.mac, "\x02\x00\x00\x00\x00\x10", 6);
	g_assert_cmpuint(vpd_vf_flows(&e, 1, f), ==, 2);
	allow = vpd_flow_to_string(&f[1]);
	g_assert_cmpstr(allow, ==, "cookie=0x5650020000010003, priority=100,in_port=1004,"
			"dl_src=02:00:00:00:00:10 actions=NORMAL");
	/* Spoof checking off: any source. */
	e.attrs.spoofchk = false;
	g_assert_cmpuint(vpd_vf_flows(&e, 1, f), ==, 2);
	g_assert_false(f[1].match_src);
	/* Link disabled: dropped like a free VF. */
	e.attrs.link_state = VPD_LINK_DISABLE;
	g_assert_cmpuint(vpd_vf_flows(&e, 1, f), ==, 1);
	/* No VLAN in a pool whose VLANs do not include untagged: dropped. */
	e.attrs.link_state = VPD_LINK_AUTO;
	pool.vlan_min = 100;
	pool.vlan_max = 199;
	g_assert_cmpuint(vpd_vf_flows(&e, 1, f), ==, 1);
	e.attrs.vlan = 150;
	g_assert_cmpuint(vpd_vf_flows(&e, 1, f), ==, 2);
}

/*
 * The port's ingress policing (the VF's transmit) is the pool's max-tx-rate
 * when the client set no rate of its own, the client's rate otherwise, and
 * none while the VF is free (it passes nothing then).
 */
/*
 * A VF with a representor port (switchdev): its traffic goes to that port
 * and what enters that port goes to the VF, nothing else; its legacy
 * allow flow (VLAN, MAC) is off, and comes back when the port goes.
 */
static void test_vf_rep_flows(void)
{
	struct vpd_pf pf = { .name = (char *)"eth0" };
	struct vpd_pool pool = { .name = (char *)"a", .pf = &pf, .switchdev = true };
	struct vpd_entry e = {
		.pool = &pool, .vf = 3, .claimed = true, .rep = (char *)"vpd-sw0-3",
		.attrs = { .mac = { 2, 0, 0, 0, 0, 0x10 }, .spoofchk = true },
	};
	struct vpd_flow f[VPD_VF_MAX_FLOWS];
	const char *const want[] = {
		"cookie=0x5650010000010003, priority=10,in_port=1004 actions=drop",
		"cookie=0x5650040000010003, priority=10,in_port=1504 actions=drop",
		"cookie=0x5650050000010003, priority=100,in_port=1004 actions=output:1504",
		"cookie=0x5650060000010003, priority=100,in_port=1504 actions=output:1004",
	};

	g_assert_cmpuint(vpd_rep_ofport(0, 3), ==, 504);
	g_assert_cmpuint(vpd_rep_ofport(2, 0), ==, 2501);
	/* the highest VF's representor is below the next PF's first VF */
	g_assert_cmpuint(vpd_rep_ofport(0, 255), <, vpd_vf_ofport(1, 0));
	g_assert_cmpuint(vpd_rep_ofport(0, 0), >, vpd_vf_ofport(0, 255));
	e.rep_port = (char *)"vrvpd-sw0-3";
	g_assert_cmpuint(vpd_vf_flows(&e, 1, f), ==, 4);
	for (unsigned i = 0; i < 4; i++) {
		g_autofree char *text = vpd_flow_to_string(&f[i]);

		g_assert_cmpstr(text, ==, want[i]);
		g_assert_false(f[i].normal);
		g_assert_false(f[i].match_src);
	}
	/* its client has rules in table 5: through it, and its miss flow there */
	e.flow_table = 5;
	g_assert_cmpuint(vpd_vf_flows(&e, 1, f), ==, 5);
	{
		const char *const via[] = {
			"cookie=0x5650050000010003, priority=100,in_port=1004 actions=goto_table:5",
			"cookie=0x5650070000010003, table=5, priority=0,in_port=1004 "
			"actions=output:1504",
		};

		for (unsigned i = 0; i < 2; i++) {
			g_autofree char *text = vpd_flow_to_string(&f[2 + i]);

			g_assert_cmpstr(text, ==, via[i]);
		}
	}
	e.flow_table = 0;
	/* link disabled: both ports drop */
	e.attrs.link_state = VPD_LINK_DISABLE;
	g_assert_cmpuint(vpd_vf_flows(&e, 1, f), ==, 2);
	g_assert_cmpuint(f[0].output + f[1].output, ==, 0);
	/* the port gone: the legacy flows again */
	e.attrs.link_state = VPD_LINK_AUTO;
	e.rep_port = NULL;
	g_assert_cmpuint(vpd_vf_flows(&e, 1, f), ==, 2);
	g_assert_true(f[1].normal && f[1].match_src);
}

/* A guest's rule: its cookie, priority, source port and table. */
static void test_rule_flow(void)
{
	struct vpd_rule r = { .id = 0xfffffffe, .priority = 65534, .table = 253 };
	struct vpd_flow f;
	g_autoptr(GByteArray) m = g_byte_array_new();
	uint8_t flow[56] = { 0 };
	uint64_t packets = 0, bytes = 0;
	bool found = false;

	vpd_rule_flow(&r, 1004, 0, &f);
	g_assert_cmphex(f.cookie, ==, 0x565008fdfffffffeull);
	g_assert_cmphex(f.cookie & VPD_RULE_TABLE_COOKIE_MASK, ==, vpd_rule_table_cookie(253));
	g_assert_cmpuint(f.priority, ==, 65535);
	g_assert_cmpuint(f.table, ==, 253);
	g_assert_cmpuint(f.in_port, ==, 1004);
	g_assert_cmpuint(f.output, ==, 0);             /* drop */
	vpd_rule_flow(&r, 1004, 1004, &f);
	g_assert_cmphex(f.output, ==, VPD_OFPP_IN_PORT); /* hairpin */
	vpd_rule_flow(&r, 1004, 1005, &f);
	g_assert_cmpuint(f.output, ==, 1005);
	/* its counters, read from a flow stats reply by its cookie */
	vpd_of_header(m, VPD_OFPT_MULTIPART_REPLY, 0, 1);
	g_byte_array_append(m, (const uint8_t *)"\0\1\0\0\0\0\0\0", 8);
	flow[1] = sizeof(flow);
	for (unsigned j = 0; j < 8; j++) {
		flow[24 + j] = f.cookie >> (56 - 8 * j);
		flow[32 + j] = j == 7 ? 3 : 0;             /* 3 packets */
		flow[40 + j] = j == 7 ? 180 : 0;           /* 180 bytes */
	}
	g_byte_array_append(m, flow, sizeof(flow));
	m->data[2] = m->len >> 8;
	m->data[3] = m->len;
	g_assert_true(vpd_of_flow_stats_counts(m->data, m->len, f.cookie, &packets, &bytes,
					       &found));
	g_assert_true(found);
	g_assert_cmpuint(packets, ==, 3);
	g_assert_cmpuint(bytes, ==, 180);
	found = false;
	g_assert_true(vpd_of_flow_stats_counts(m->data, m->len, f.cookie + 1, &packets, &bytes,
					       &found));
	g_assert_false(found);
	g_assert_false(vpd_of_flow_stats_counts(m->data, m->len - 1, f.cookie, &packets, &bytes,
						&found));
}

/* Representor port names: "vr" + the VF's port, or cut and hashed. */
static void test_rep_port_name(void)
{
	g_autofree char *a = vpd_rep_port_name("vpd-sw0-3");
	g_autofree char *b = vpd_rep_port_name("eni8np1pf0vf0");
	g_autofree char *c = vpd_rep_port_name("vpd-tenant-1-12");
	g_autofree char *d = vpd_rep_port_name("vpd-tenant-1-13");

	g_assert_cmpstr(a, ==, "vrvpd-sw0-3");
	g_assert_cmpstr(b, ==, "vreni8np1pf0vf0");
	g_assert_cmpuint(strlen(c), ==, 15);
	g_assert_true(g_str_has_prefix(c, "vrvpd-t"));
	g_assert_cmpstr(c, !=, d);
}

/*
 * The rows of a VF with a representor port: the VF's port in VLAN 4095
 * (nothing the switch floods reaches it), its Interface naming the port;
 * the representor port's Port (VLAN 4095, pool and VF named) and
 * Interface (a system port, its port number).
 */
static void test_rep_rows(void)
{
	struct vpd_pf pf = { .name = (char *)"sw0" };
	struct vpd_pool pool = { .name = (char *)"a", .pf = &pf, .switchdev = true };
	struct vpd_entry e = {
		.pool = &pool, .vf = 3, .claimed = true, .owner = (char *)"vm1",
		.rep = (char *)"vpd-sw0-3", .rep_port = (char *)"vrvpd-sw0-3",
		.attrs = { .vlan = 0, .vlan_proto = 0x8100 },
	};
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) root = NULL;
	g_autofree char *vf = NULL, *rep = NULL;

	json_builder_begin_object(b);
	vpd_vf_port_columns(b, &e);
	vpd_vf_interface_columns(b, &e, 4);
	json_builder_end_object(b);
	root = json_builder_get_root(b);
	vf = json_to_string(root, FALSE);
	g_assert_nonnull(strstr(vf, "\"tag\":4095"));
	g_assert_nonnull(strstr(vf, "[\"vpd-representor\",\"vrvpd-sw0-3\"]"));
	g_clear_object(&b);
	g_clear_pointer(&root, json_node_unref);
	b = json_builder_new();
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "port");
	json_builder_begin_object(b);
	vpd_rep_port_columns(b, &e);
	json_builder_end_object(b);
	json_builder_set_member_name(b, "iface");
	json_builder_begin_object(b);
	vpd_rep_interface_columns(b, &e, vpd_rep_ofport(0, 3));
	json_builder_end_object(b);
	json_builder_end_object(b);
	root = json_builder_get_root(b);
	rep = json_to_string(root, FALSE);
	g_assert_nonnull(strstr(rep, "\"tag\":4095"));
	g_assert_nonnull(strstr(rep, "\"type\":\"system\""));
	g_assert_nonnull(strstr(rep, "\"ofport_request\":504"));
	g_assert_nonnull(strstr(rep, "[\"vpd-pool\",\"a\"]"));
	g_assert_nonnull(strstr(rep, "[\"vpd-representor-of\",\"vpd-sw0-3\"]"));
	/* without one, the VF's Interface names none (and ends its map there) */
	e.rep_port = NULL;
	g_clear_object(&b);
	g_clear_pointer(&root, json_node_unref);
	b = json_builder_new();
	json_builder_begin_object(b);
	vpd_vf_port_columns(b, &e);
	vpd_vf_interface_columns(b, &e, 4);
	json_builder_end_object(b);
	root = json_builder_get_root(b);
	g_free(vf);
	vf = json_to_string(root, FALSE);
	g_assert_null(strstr(vf, "vpd-representor"));
	g_assert_nonnull(strstr(vf, "\"tag\":0"));
}

static void test_vf_policing_rate(void)
{
	struct vpd_pf pf = { .name = (char *)"eth0" };
	struct vpd_pool pool = { .name = (char *)"a", .pf = &pf, .max_tx_rate_mbps = 1000 };
	struct vpd_entry e = { .pool = &pool, .vf = 3 };

	g_assert_cmpuint(vpd_vf_policing_rate(&e), ==, 0);
	e.claimed = true;
	g_assert_cmpuint(vpd_vf_policing_rate(&e), ==, 1000000);
	e.attrs.max_tx_rate = 10;
	g_assert_cmpuint(vpd_vf_policing_rate(&e), ==, 10000);
	pool.max_tx_rate_mbps = 0;
	g_assert_cmpuint(vpd_vf_policing_rate(&e), ==, 10000);
	e.attrs.max_tx_rate = 0;
	g_assert_cmpuint(vpd_vf_policing_rate(&e), ==, 0);
}

static void test_flow_mod_add(void)
{
	struct vpd_flow f = {
		.cookie = 0x5650020000000001ull, .priority = 100, .in_port = 2,
		.match_src = true, .src = { 2, 0, 0, 0, 0, 0x10 }, .normal = true,
	};
	g_autoptr(GByteArray) b = g_byte_array_new();
	const uint8_t *m;

	vpd_of_flow_mod(b, 77, VPD_OFPFC_ADD, &f, 0);
	m = b->data;
	g_assert_cmpuint(m[0], ==, 5);
	g_assert_cmpuint(m[1], ==, VPD_OFPT_FLOW_MOD);
	g_assert_cmpuint(be16(m + 2), ==, b->len);
	g_assert_cmpuint(b->len % 8, ==, 0);
	g_assert_cmpuint(be32(m + 4), ==, 77);
	g_assert_cmphex(be64(m + 8), ==, f.cookie);
	g_assert_cmphex(be64(m + 16), ==, 0);
	g_assert_cmpuint(m[24], ==, 0);                   /* table */
	g_assert_cmpuint(m[25], ==, VPD_OFPFC_ADD);
	g_assert_cmpuint(be16(m + 30), ==, 100);          /* priority */
	g_assert_cmphex(be32(m + 32), ==, 0xffffffff);    /* no buffer */
	/* match at 48: OXM, length 4 + 8 + 10 = 22, padded to 24 */
	g_assert_cmpuint(be16(m + 48), ==, 1);
	g_assert_cmpuint(be16(m + 50), ==, 22);
	g_assert_cmphex(be32(m + 52), ==, 0x80000004);    /* IN_PORT */
	g_assert_cmpuint(be32(m + 56), ==, 2);
	g_assert_cmphex(be32(m + 60), ==, 0x80000806);    /* ETH_SRC */
	g_assert_cmpmem(m + 64, 6, f.src, 6);
	/* instructions at 72: APPLY_ACTIONS [OUTPUT:NORMAL] */
	g_assert_cmpuint(be16(m + 72), ==, 4);
	g_assert_cmpuint(be16(m + 74), ==, 24);
	g_assert_cmpuint(be16(m + 80), ==, 0);
	g_assert_cmpuint(be16(m + 82), ==, 16);
	g_assert_cmphex(be32(m + 84), ==, 0xfffffffa);
	g_assert_cmpuint(b->len, ==, 96);
}

/* A flow to one port: its OUTPUT action names the port. */
static void test_flow_mod_output(void)
{
	struct vpd_flow f = { .cookie = 0x5650050000000003ull, .priority = 100, .in_port = 4,
			      .output = 504 };
	g_autoptr(GByteArray) b = g_byte_array_new();
	const uint8_t *m;

	vpd_of_flow_mod(b, 78, VPD_OFPFC_ADD, &f, 0);
	m = b->data;
	g_assert_cmpuint(be16(m + 2), ==, b->len);
	/* match at 48: OXM in_port only, 4 + 8 = 12, padded to 16 */
	g_assert_cmpuint(be16(m + 50), ==, 12);
	/* instructions at 64: APPLY_ACTIONS [OUTPUT:504] */
	g_assert_cmpuint(be16(m + 64), ==, 4);
	g_assert_cmpuint(be16(m + 72), ==, 0);
	g_assert_cmpuint(be32(m + 76), ==, 504);
	g_assert_cmpuint(b->len, ==, 88);
}

static void test_flow_mod_delete_and_bundle(void)
{
	struct vpd_flow f = { .cookie = VPD_COOKIE_MAGIC };
	g_autoptr(GByteArray) del = g_byte_array_new();
	g_autoptr(GByteArray) b = g_byte_array_new();

	vpd_of_flow_mod(del, 1, VPD_OFPFC_DELETE, &f, VPD_COOKIE_MAGIC_MASK);
	g_assert_cmpuint(del->len, ==, 56);               /* no match fields, no actions */
	g_assert_cmpuint(del->data[25], ==, VPD_OFPFC_DELETE);
	g_assert_cmphex(be64(del->data + 16), ==, VPD_COOKIE_MAGIC_MASK);
	g_assert_cmphex(be32(del->data + 36), ==, 0xffffffff);  /* out_port any */
	g_assert_cmpuint(be16(del->data + 50), ==, 4);          /* empty match */

	vpd_of_bundle_ctrl(b, 5, 9, 4);
	g_assert_cmpuint(b->len, ==, 16);
	g_assert_cmpuint(b->data[1], ==, VPD_OFPT_BUNDLE_CONTROL);
	g_assert_cmpuint(be32(b->data + 8), ==, 9);
	g_assert_cmpuint(be16(b->data + 12), ==, 4);      /* commit */
	g_assert_cmpuint(be16(b->data + 14), ==, 1);      /* atomic */
	g_byte_array_set_size(b, 0);
	vpd_of_bundle_add(b, 6, 9, del);
	g_assert_cmpuint(b->len, ==, 16 + del->len);
	g_assert_cmpuint(be16(b->data + 2), ==, b->len);
	g_assert_cmpuint(b->data[1], ==, VPD_OFPT_BUNDLE_ADD_MESSAGE);
	g_assert_cmpmem(b->data + 16, 4, del->data, 4);
	g_assert_cmpuint(be32(b->data + 20), ==, 6);      /* the inner xid is the outer */
	g_assert_cmpmem(b->data + 24, del->len - 8, del->data + 8, del->len - 8);
}

static void test_small_messages(void)
{
	static const uint8_t echo[] = { 5, VPD_OFPT_ECHO_REQUEST, 0, 10, 0, 0, 0, 7, 0xab, 0xcd };
	g_autoptr(GByteArray) b = g_byte_array_new();

	vpd_of_hello(b, 3);
	g_assert_cmpuint(b->len, ==, 8);
	g_assert_cmpmem(b->data, 8, "\x05\x00\x00\x08\x00\x00\x00\x03", 8);
	g_byte_array_set_size(b, 0);
	vpd_of_echo_reply(b, echo, sizeof(echo));
	g_assert_cmpuint(b->data[1], ==, VPD_OFPT_ECHO_REPLY);
	g_assert_cmpmem(b->data + 2, b->len - 2, echo + 2, sizeof(echo) - 2);
	g_byte_array_set_size(b, 0);
	vpd_of_flow_stats_request(b, 4, 0, 0x5650000000010003ull, ~VPD_COOKIE_KIND_MASK);
	g_assert_cmpuint(b->len, ==, 56);
	g_assert_cmpuint(be16(b->data + 2), ==, 56);
	g_assert_cmpuint(b->data[1], ==, VPD_OFPT_MULTIPART_REQUEST);
	g_assert_cmpuint(be16(b->data + 8), ==, 1);             /* OFPMP_FLOW */
	g_assert_cmpuint(b->data[16], ==, 0);                   /* table 0 */
	g_assert_cmphex(be64(b->data + 32), ==, 0x5650000000010003ull);
	g_assert_cmphex(be64(b->data + 40), ==, 0xffff00ffffffffffull);
	g_assert_cmpuint(be16(b->data + 50), ==, 4);            /* empty match */
}

/* A flow stats reply: two flows' counters by cookie; malformed ones fail. */
static void test_flow_stats_parse(void)
{
	g_autoptr(GHashTable) by_cookie = g_hash_table_new_full(g_int64_hash, g_int64_equal,
								g_free, g_free);
	g_autoptr(GByteArray) m = g_byte_array_new();
	uint8_t flow[56] = { 0 };
	uint64_t c = 0x5650020000010003ull;

	vpd_of_header(m, VPD_OFPT_MULTIPART_REPLY, 0, 1);
	g_byte_array_append(m, (const uint8_t *)"\0\1\0\0\0\0\0\0", 8);
	for (unsigned i = 0; i < 2; i++) {
		flow[1] = sizeof(flow);                          /* length */
		for (unsigned j = 0; j < 8; j++) {
			flow[24 + j] = (c + i) >> (56 - 8 * j);   /* cookie */
			flow[32 + j] = j == 7 ? 5 + i : 0;       /* packets */
			flow[40 + j] = j == 7 ? 60 : 0;          /* bytes */
		}
		g_byte_array_append(m, flow, sizeof(flow));
	}
	g_assert_true(vpd_of_flow_stats_parse(m->data, m->len, by_cookie));
	g_assert_cmpuint(g_hash_table_size(by_cookie), ==, 2);
	g_assert_cmpstr(g_hash_table_lookup(by_cookie, &c), ==, "n_packets=5, n_bytes=60");
	c++;
	g_assert_cmpstr(g_hash_table_lookup(by_cookie, &c), ==, "n_packets=6, n_bytes=60");
	/* Cut short, or a flow's length past the end: malformed. */
	g_assert_false(vpd_of_flow_stats_parse(m->data, m->len - 1, by_cookie));
	m->data[16 + 1] = 200;
	g_assert_false(vpd_of_flow_stats_parse(m->data, m->len, by_cookie));
}

/* ---- errors, against a fake ovsdb-server ------------------------------- */

struct fake_db {
	int lfd;
	const char *reply;   /* to the first request; NULL: hang up instead */
};

static gpointer fake_db_serve(gpointer data)
{
	struct fake_db *f = data;
	int c = accept(f->lfd, NULL, NULL);
	char buf[4096];

	if (c < 0)
		return NULL;
	if (read(c, buf, sizeof(buf)) > 0 && f->reply && write(c, f->reply, strlen(f->reply)) < 0)
		g_warning("fake OVSDB: write: %s", g_strerror(errno));
	close(c);
	return NULL;
}

/* The error of vpd_ovs_sync() (no VFs) when OVSDB answers its first
 * request with reply (NULL: hangs up). */
static GError *sync_error(const char *reply)
{
	g_autofree char *dir = g_dir_make_tmp("test-ovs-XXXXXX", NULL);
	g_autofree char *path = g_build_filename(dir, "db.sock", NULL);
	g_autoptr(GPtrArray) pfs = g_ptr_array_new();
	g_autoptr(GPtrArray) entries = g_ptr_array_new();
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct fake_db f = { .lfd = socket(AF_UNIX, SOCK_STREAM, 0), .reply = reply };
	struct vpd_config cfg = { .ovs_bridge = (char *)"br0", .pfs = pfs };
	struct vpd_pools pools = { .entries = entries };
	g_autofree char *remote = g_strdup_printf("unix:%s", path);
	struct vpd_ovs *o;
	GThread *t;
	GError *err = NULL;

	g_assert_nonnull(dir);
	g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	g_assert_cmpint(bind(f.lfd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
	g_assert_cmpint(listen(f.lfd, 1), ==, 0);
	t = g_thread_new("fake-ovsdb", fake_db_serve, &f);
	cfg.ovsdb = remote;
	o = vpd_ovs_new(&cfg, &err);
	g_assert_no_error(err);
	g_assert_false(vpd_ovs_sync(o, &pools, &err));
	g_assert_nonnull(err);
	vpd_ovs_free(o);
	g_thread_join(t);
	close(f.lfd);
	unlink(path);
	rmdir(dir);
	return err;
}

static void test_errors(void)
{
	static const struct {
		const char *reply;
		int code;
		const char *message;
	} cases[] = {
		{ NULL, G_IO_ERROR_CONNECTION_CLOSED, "OVSDB: connection closed" },
		{ "]", G_IO_ERROR_INVALID_DATA, "OVSDB sent something that is not JSON-RPC" },
		{ "{\"id\":1,\"result\":{},\"error\":null}", G_IO_ERROR_INVALID_DATA,
		  "OVSDB's reply has no result" },
		{ "{\"id\":1,\"result\":null,\"error\":\"unknown database\"}",
		  G_IO_ERROR_INVALID_ARGUMENT, "OVSDB refused the transaction: unknown database" },
		{ "{\"id\":1,\"result\":[{\"error\":\"constraint violation\",\"details\":\"x\"}],"
		  "\"error\":null}", G_IO_ERROR_INVALID_ARGUMENT,
		  "OVSDB: operation 0 failed: constraint violation: x" },
		{ "{\"id\":1,\"result\":[{\"rows\":[]},{\"rows\":[]}],\"error\":null}",
		  G_IO_ERROR_NOT_INITIALIZED, "OVSDB has no Open_vSwitch row yet (ovs-vsctl init)" },
	};
	g_autofree char *long_path = g_strdup_printf("unix:/%0200d", 0);
	struct vpd_config cfg = { .ovs_bridge = (char *)"br0", .pfs = g_ptr_array_new() };
	GError *err = NULL;

	/* Not there: transient; a path no socket can have: not. */
	cfg.ovsdb = (char *)"unix:/nonexistent/db.sock";
	g_assert_null(vpd_ovs_new(&cfg, &err));
	g_assert_error(err, G_IO_ERROR, G_IO_ERROR_NOT_CONNECTED);
	g_assert_true(vpd_ovs_error_is_transient(err));
	g_clear_error(&err);
	cfg.ovsdb = long_path;
	g_assert_null(vpd_ovs_new(&cfg, &err));
	g_assert_error(err, G_IO_ERROR, G_IO_ERROR_FILENAME_TOO_LONG);
	g_assert_false(vpd_ovs_error_is_transient(err));
	g_clear_error(&err);
	g_ptr_array_unref(cfg.pfs);

	for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
		err = sync_error(cases[i].reply);
		g_assert_error(err, G_IO_ERROR, cases[i].code);
		g_assert_true(g_str_has_prefix(err->message, cases[i].message));
		/* OVS gone, or starting (its database not initialised yet) */
		g_assert_true(vpd_ovs_error_is_transient(err) ==
			      (cases[i].code == G_IO_ERROR_CONNECTION_CLOSED ||
			       cases[i].code == G_IO_ERROR_NOT_INITIALIZED));
		g_clear_error(&err);
	}
}

/* A VF's OVSDB rows, written with json-glib: what OVS is to hold. */
/* ---- the admin's bridge, against a fake ovsdb-server and ovs-vswitchd --- */

/*
 * ovs-vswitchd deletes every flow of a bridge without controllers when its
 * fail mode changes (ofproto/connmgr.c, connmgr_set_fail_mode()), in its
 * own time after OVSDB committed the change.  The fake: an OVSDB that
 * holds one bridge and an Open_vSwitch row whose cur_cfg (what
 * ovs-vswitchd applied) catches up with next_cfg one read at a time, and
 * a bridge management socket that notes the daemon's first OpenFlow
 * connection.  Everything asked is logged in order.
 */
struct fake_ovs {
	int db_lfd, of_lfd, stop[2];
	const char *fail_mode;  /* the bridge's, as JSON */
	double next_cfg, cur_cfg;
	GString *log;
};

static void fake_ovs_op(struct fake_ovs *f, const struct vpd_json *op, GString *out)
{
	const char *kind = vpd_json_get(op, "op")->str;
	const char *table = vpd_json_get(op, "table")->str;
	const struct vpd_json *cols = vpd_json_get(op, "columns");
	const char *col = cols ? vpd_json_at(cols, 0)->str : "";

	if (!strcmp(kind, "select") && !strcmp(table, "Bridge")) {
		g_string_append(f->log, "select Bridge; ");
		g_string_append_printf(out, "{\"rows\":[{\"name\":\"br0\",\"protocols\":"
				       "[\"set\",[]],\"datapath_type\":\"\",\"fail_mode\":%s}]}",
				       f->fail_mode);
	} else if (!strcmp(kind, "select") && !strcmp(col, "_uuid")) {
		g_string_append(f->log, "select Open_vSwitch; ");
		g_string_append(out, "{\"rows\":[{\"_uuid\":[\"uuid\",\"0\"]}]}");
	} else if (!strcmp(kind, "select") && !strcmp(col, "next_cfg")) {
		g_string_append_printf(f->log, "next_cfg %g; ", f->next_cfg);
		g_string_append_printf(out, "{\"rows\":[{\"next_cfg\":%g}]}", f->next_cfg);
	} else if (!strcmp(kind, "select") && !strcmp(col, "cur_cfg")) {
		g_string_append_printf(f->log, "cur_cfg %g; ", f->cur_cfg);
		g_string_append_printf(out, "{\"rows\":[{\"cur_cfg\":%g}]}", f->cur_cfg);
		f->cur_cfg = MIN(f->cur_cfg + 1, f->next_cfg);
	} else {
		if (!strcmp(kind, "mutate") && !strcmp(table, "Open_vSwitch"))
			f->next_cfg++;
		else if (!strcmp(kind, "update"))
			f->fail_mode = "\"secure\"";
		g_string_append_printf(f->log, "%s %s; ", kind, table);
		g_string_append(out, "{\"count\":1}");
	}
}

static gpointer fake_ovs_serve(gpointer data)
{
	struct fake_ovs *f = data;
	g_autoptr(GString) in = g_string_new(NULL);
	int db = -1;

	for (;;) {
		struct pollfd p[] = {
			{ .fd = db >= 0 ? db : f->db_lfd, .events = POLLIN },
			{ .fd = f->of_lfd, .events = POLLIN },
			{ .fd = f->stop[0], .events = POLLIN },
		};
		char buf[4096];
		gssize n;

		g_assert_cmpint(poll(p, G_N_ELEMENTS(p), -1), >, 0);
		if (p[2].revents)
			break;
		if (p[1].revents) {
			int c = accept(f->of_lfd, NULL, NULL);

			/* (the first: the daemon connects again once) */
			if (!g_str_has_suffix(f->log->str, "OpenFlow"))
				g_string_append(f->log, "OpenFlow");
			close(c);
			continue;
		}
		if (db < 0) {
			db = accept(f->db_lfd, NULL, NULL);
			continue;
		}
		n = read(db, buf, sizeof(buf));
		if (n <= 0) {
			close(db);
			db = -1;
			continue;
		}
		g_string_append_len(in, buf, n);
		while ((n = vpd_json_span(in->str, in->len)) > 0) {
			g_autoptr(vpd_json) req = vpd_json_parse(in->str, n, NULL);
			const struct vpd_json *params = vpd_json_get(req, "params");
			g_autoptr(GString) out = g_string_new(NULL);

			g_string_append_printf(out, "{\"id\":%g,\"error\":null,\"result\":[",
					       vpd_json_get(req, "id")->num);
			for (unsigned i = 1; i < vpd_json_len(params); i++) {
				if (i > 1)
					g_string_append_c(out, ',');
				fake_ovs_op(f, vpd_json_at(params, i), out);
			}
			g_string_append(out, "]}");
			g_assert_cmpint(write(db, out->str, out->len), ==, out->len);
			g_string_erase(in, 0, n);
		}
	}
	if (db >= 0)
		close(db);
	return NULL;
}

static int listen_at(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	g_assert_cmpint(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
	g_assert_cmpint(listen(fd, 4), ==, 0);
	return fd;
}

/* What vpd_ovs_sync() (no VFs) asks of a bridge in fail mode fail_mode. */
static char *sync_on_bridge(const char *fail_mode)
{
	g_autofree char *dir = g_dir_make_tmp("test-ovs-XXXXXX", NULL);
	g_autofree char *db_path = g_build_filename(dir, "db.sock", NULL);
	g_autofree char *of_path = g_build_filename(dir, "br0.mgmt", NULL);
	g_autofree char *remote = g_strdup_printf("unix:%s", db_path);
	g_autoptr(GPtrArray) pfs = g_ptr_array_new();
	g_autoptr(GPtrArray) entries = g_ptr_array_new();
	struct vpd_config cfg = { .ovs_bridge = (char *)"br0", .pfs = pfs, .ovsdb = remote };
	struct vpd_pools pools = { .entries = entries };
	struct fake_ovs f = {
		.db_lfd = listen_at(db_path), .of_lfd = listen_at(of_path),
		.fail_mode = fail_mode, .next_cfg = 5, .cur_cfg = 5, .log = g_string_new(NULL),
	};
	g_autoptr(GError) err = NULL;
	struct vpd_ovs *o;
	GThread *t;

	g_assert_cmpint(pipe(f.stop), ==, 0);
	t = g_thread_new("fake-ovs", fake_ovs_serve, &f);
	o = vpd_ovs_new(&cfg, &err);
	g_assert_no_error(err);
	/* (the fake hangs up on OpenFlow's hello) */
	g_assert_false(vpd_ovs_sync(o, &pools, &err));
	g_assert_error(err, G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED);
	vpd_ovs_free(o);
	g_assert_cmpint(write(f.stop[1], "", 1), ==, 1);
	g_thread_join(t);
	close(f.stop[0]);
	close(f.stop[1]);
	close(f.db_lfd);
	close(f.of_lfd);
	unlink(db_path);
	unlink(of_path);
	rmdir(dir);
	return g_string_free(f.log, FALSE);
}

/*
 * An admin's bridge in standalone mode is set to secure, and the daemon
 * waits until ovs-vswitchd has applied that (and flushed its flows)
 * before it sends any flow: else the flush may remove the VFs' deny flows
 * it has just added.  A bridge already secure is left alone.
 */
static void test_bridge_fail_mode(void)
{
	g_autofree char *standalone = sync_on_bridge("[\"set\",[]]");
	g_autofree char *secure = sync_on_bridge("\"secure\"");

	g_assert_cmpstr(standalone, ==, "select Bridge; select Open_vSwitch; update Bridge; "
			"mutate Open_vSwitch; next_cfg 6; cur_cfg 5; cur_cfg 6; OpenFlow");
	g_assert_cmpstr(secure, ==, "select Bridge; select Open_vSwitch; OpenFlow");
}

static void test_vf_rows(void)
{
	struct vpd_pf pf = { .name = (char *)"eth0" };
	struct vpd_pool pool = { .name = (char *)"t\"a", .pf = &pf, .vlan_min = 100,
				 .vlan_max = 199, .max_tx_rate_mbps = 1000 };
	struct vpd_entry e = {
		.pool = &pool, .vf = 3, .claimed = true, .owner = (char *)"vm \"1\"\n\xc3\xa9",
		.attrs = { .mac = { 2, 0, 0, 0, 0, 0x10 }, .vlan = 150, .vlan_proto = 0x88a8,
			   .spoofchk = true, .max_tx_rate = 500 },
	};
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonParser) p = json_parser_new();
	g_autoptr(JsonNode) root = NULL;
	g_autofree char *text = NULL;
	JsonObject *port, *iface;
	JsonArray *ids;

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "port");
	json_builder_begin_object(b);
	vpd_vf_port_columns(b, &e);
	json_builder_end_object(b);
	json_builder_set_member_name(b, "iface");
	json_builder_begin_object(b);
	vpd_vf_interface_columns(b, &e, 4);
	json_builder_end_object(b);
	json_builder_end_object(b);
	root = json_builder_get_root(b);
	text = json_to_string(root, FALSE);
	/* OVSDB reads it back as written: valid JSON whatever the names hold */
	g_assert_true(json_parser_load_from_data(p, text, -1, NULL));
	port = json_object_get_object_member(json_node_get_object(json_parser_get_root(p)), "port");
	iface = json_object_get_object_member(json_node_get_object(json_parser_get_root(p)), "iface");
	g_assert_cmpint(json_object_get_int_member(port, "tag"), ==, 150);
	g_assert_cmpstr(json_object_get_string_member(port, "vlan_mode"), ==, "dot1q-tunnel");
	ids = json_array_get_array_element(json_object_get_array_member(port, "external_ids"), 1);
	g_assert_cmpstr(json_array_get_string_element(json_array_get_array_element(ids, 0), 1),
			==, "t\"a");
	g_assert_cmpint(json_object_get_int_member(iface, "ofport_request"), ==, 4);
	g_assert_cmpint(json_object_get_int_member(iface, "ingress_policing_rate"), ==, 500000);
	g_assert_cmpint(json_object_get_int_member(iface, "ingress_policing_burst"), ==, 50000);
	ids = json_array_get_array_element(json_object_get_array_member(iface, "external_ids"), 1);
	g_assert_cmpstr(json_array_get_string_element(json_array_get_array_element(ids, 1), 1),
			==, "vm \"1\"\n\xc3\xa9");
	/* free: VLAN 4095, nothing of the last claimant */
	e.claimed = false;
	g_clear_object(&b);
	b = json_builder_new();
	json_builder_begin_object(b);
	vpd_vf_port_columns(b, &e);
	vpd_vf_interface_columns(b, &e, 4);
	json_builder_end_object(b);
	g_clear_pointer(&root, json_node_unref);
	root = json_builder_get_root(b);
	g_free(text);
	text = json_to_string(root, FALSE);
	g_assert_nonnull(strstr(text, "\"tag\":4095"));
	g_assert_null(strstr(text, "vm "));
	g_assert_nonnull(strstr(text, "\"ingress_policing_rate\":0"));
}

/* A devlink port message as the kernel sends it in a dump. */
static struct nl_msg *port_msg(const char *bus, const char *dev, int flavour, int vf,
			       int external, const char *netdev)
{
	struct nl_msg *m = nlmsg_alloc();

	g_assert_nonnull(genlmsg_put(m, NL_AUTO_PORT, NL_AUTO_SEQ, 20, 0, 0,
				     DEVLINK_CMD_PORT_NEW, DEVLINK_GENL_VERSION));
	nla_put_string(m, DEVLINK_ATTR_BUS_NAME, bus);
	nla_put_string(m, DEVLINK_ATTR_DEV_NAME, dev);
	nla_put_u32(m, DEVLINK_ATTR_PORT_INDEX, 7);
	nla_put_u16(m, DEVLINK_ATTR_PORT_FLAVOUR, flavour);
	if (vf >= 0) {
		nla_put_u16(m, DEVLINK_ATTR_PORT_PCI_PF_NUMBER, 0);
		nla_put_u16(m, DEVLINK_ATTR_PORT_PCI_VF_NUMBER, vf);
	}
	if (external >= 0)
		nla_put_u8(m, DEVLINK_ATTR_PORT_EXTERNAL, external);
	if (netdev)
		nla_put_string(m, DEVLINK_ATTR_PORT_NETDEV_NAME, netdev);
	return m;
}

static bool is_vf_port(struct nl_msg *m, unsigned *vf, const char **netdev)
{
	struct nlattr *tb[DEVLINK_ATTR_MAX + 1];

	g_assert_cmpint(vpd_devlink_port_parse(m, tb), ==, 0);
	return vpd_devlink_vf_port(tb, "pci", "0000:08:00.0", vf, netdev);
}

/* Representors from devlink ports: only the PF's instance's VF ports. */
static void test_devlink_ports(void)
{
	struct {
		const char *bus, *dev;
		int flavour, vf, external;
		const char *netdev;
		bool want;
	} cases[] = {
		{ "pci", "0000:08:00.0", DEVLINK_PORT_FLAVOUR_PCI_VF, 3, -1, "eth5", true },
		{ "pci", "0000:08:00.0", DEVLINK_PORT_FLAVOUR_PCI_VF, 3, 0, "eth5", true },
		/* the other PF of a multiport eswitch: same switch ID, not ours */
		{ "pci", "0000:08:00.1", DEVLINK_PORT_FLAVOUR_PCI_VF, 3, -1, "eth9", false },
		{ "pci", "0000:08:00.0", DEVLINK_PORT_FLAVOUR_PCI_VF, 3, 1, "eth5", false },
		{ "pci", "0000:08:00.0", DEVLINK_PORT_FLAVOUR_PHYSICAL, -1, -1, "p0", false },
		{ "pci", "0000:08:00.0", DEVLINK_PORT_FLAVOUR_PCI_SF, 3, -1, "sf3", false },
		{ "pci", "0000:08:00.0", DEVLINK_PORT_FLAVOUR_PCI_VF, 3, -1, NULL, false },
		{ "netdevsim", "0000:08:00.0", DEVLINK_PORT_FLAVOUR_PCI_VF, 3, -1, "eth5", false },
	};
	struct nl_msg *req = vpd_msg_port_dump(20);
	struct nlmsghdr *h = nlmsg_hdr(req);

	g_assert_cmphex(h->nlmsg_flags & NLM_F_DUMP, ==, NLM_F_DUMP);
	g_assert_cmpuint(((struct genlmsghdr *)nlmsg_data(h))->cmd, ==, DEVLINK_CMD_PORT_GET);
	nlmsg_free(req);
	for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
		struct nl_msg *m = port_msg(cases[i].bus, cases[i].dev, cases[i].flavour,
					    cases[i].vf, cases[i].external, cases[i].netdev);
		const char *netdev = NULL;
		unsigned vf = 99;

		g_assert_cmpint(is_vf_port(m, &vf, &netdev), ==, cases[i].want);
		if (cases[i].want) {
			g_assert_cmpuint(vf, ==, 3);
			g_assert_cmpstr(netdev, ==, "eth5");
		}
		nlmsg_free(m);
	}
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/ovs/json/good", test_json_good);
	g_test_add_func("/ovs/json/bad", test_json_bad);
	g_test_add_func("/ovs/json/random", test_json_random);
	g_test_add_func("/ovs/json/put-str", test_json_put_str);
	g_test_add_func("/ovs/vf-flows", test_vf_flows);
	g_test_add_func("/ovs/vf-policing-rate", test_vf_policing_rate);
	g_test_add_func("/ovs/vf-rep-flows", test_vf_rep_flows);
	g_test_add_func("/ovs/rep-port-name", test_rep_port_name);
	g_test_add_func("/ovs/rule-flow", test_rule_flow);
	g_test_add_func("/ovs/rep-rows", test_rep_rows);
	g_test_add_func("/ovs/flow-mod-output", test_flow_mod_output);
	g_test_add_func("/ovs/flow-mod-add", test_flow_mod_add);
	g_test_add_func("/ovs/flow-mod-delete-and-bundle", test_flow_mod_delete_and_bundle);
	g_test_add_func("/ovs/small-messages", test_small_messages);
	g_test_add_func("/ovs/flow-stats-parse", test_flow_stats_parse);
	g_test_add_func("/ovs/errors", test_errors);
	g_test_add_func("/ovs/bridge-fail-mode", test_bridge_fail_mode);
	g_test_add_func("/ovs/devlink-ports", test_devlink_ports);
	g_test_add_func("/ovs/vf-rows", test_vf_rows);
	return g_test_run();
}
