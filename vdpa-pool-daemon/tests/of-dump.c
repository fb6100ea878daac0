// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * of-dump: the OpenFlow 1.4 messages the daemon sends, as its encoder
 * (src/openflow.c) makes them, one a line: "NAME HEX".  The flows are the
 * daemon's own (src/policy.c) for PF index 1, VF 3 (OpenFlow port 1004)
 * in each state, built as src/ovs.c builds them.
 * tests/unit/test_openflow_ofp_print.py hands each to OVS's decoder
 * (ovs-ofctl ofp-print) and checks what OVS reads in it.
 */
#include "ovs.h"

#include <stdio.h>
#include <string.h>

#define PF_INDEX 1
#define VF 3
#define BUNDLE 9

static void dump(const char *name, const GByteArray *m)
{
	printf("%s ", name);
	for (guint i = 0; i < m->len; i++)
		printf("%02x", m->data[i]);
	printf("\n");
}

static void dump_flow_mod(const char *name, uint32_t xid, uint8_t command,
			  const struct vpd_flow *f, uint64_t cookie_mask)
{
	g_autoptr(GByteArray) m = g_byte_array_new();

	vpd_of_flow_mod(m, xid, command, f, cookie_mask);
	dump(name, m);
}

int main(int argc, char **argv)
{
	struct vpd_pf pf = { .name = (char *)"eth0" };
	struct vpd_pool pool = { .name = (char *)"a", .pf = &pf };
	struct vpd_entry e = { .pool = &pool, .vf = VF };
	struct vpd_flow f[VPD_VF_MAX_FLOWS], all = { .cookie = VPD_COOKIE_MAGIC, .table = VPD_OFPTT_ALL }, others = vpd_others_flow();
	struct vpd_flow allow = { .cookie = vpd_flow_cookie(VPD_FLOW_ALLOW, PF_INDEX, VF),
				  .table = VPD_OFPTT_ALL };
	g_autoptr(GByteArray) m = g_byte_array_new();
	g_autoptr(GByteArray) inner = g_byte_array_new();
	static const uint8_t echo_request[] = {
		VPD_OFP_VERSION, VPD_OFPT_ECHO_REQUEST, 0, 12, 0, 0, 0, 0x22,
		0xde, 0xad, 0xbe, 0xef,
	};

	if (argc > 1) {
		fprintf(stderr, "usage: %s\n", argv[0]);
		return 2;
	}
	vpd_of_hello(m, 1);
	dump("hello", m);
	g_byte_array_set_size(m, 0);
	vpd_of_echo_reply(m, echo_request, sizeof(echo_request));
	dump("echo_reply", m);
	g_byte_array_set_size(m, 0);
	vpd_of_barrier_request(m, 2);
	dump("barrier_request", m);
	g_byte_array_set_size(m, 0);
	vpd_of_flow_stats_request(m, 3, VPD_OFPTT_ALL, vpd_flow_cookie(0, PF_INDEX, VF),
				  ~VPD_COOKIE_KIND_MASK);
	dump("flow_stats_request", m);

	/* vpd_ovs_sync(): all of the daemon's flows go, the catch-all comes. */
	dump_flow_mod("delete_all", 4, VPD_OFPFC_DELETE, &all, VPD_COOKIE_MAGIC_MASK);
	dump_flow_mod("add_others", 5, VPD_OFPFC_ADD, &others, 0);
	/* A free VF: its deny flow only. */
	if (vpd_vf_flows(&e, PF_INDEX, f) != 1)
		return 1;
	dump_flow_mod("add_deny", 6, VPD_OFPFC_ADD, &f[0], 0);
	/* Claimed, spoof checking on with a MAC: from that MAC only. */
	e.claimed = true;
	e.attrs.spoofchk = true;
	memcpy(e.attrs.mac, "\x02\x00\x00\x00\x00\x10", 6);
	if (vpd_vf_flows(&e, PF_INDEX, f) != 2 || !f[1].match_src)
		return 1;
	dump_flow_mod("add_allow_mac", 7, VPD_OFPFC_ADD, &f[1], 0);
	/* Spoof checking off: from any source. */
	e.attrs.spoofchk = false;
	if (vpd_vf_flows(&e, PF_INDEX, f) != 2 || f[1].match_src)
		return 1;
	dump_flow_mod("add_allow", 8, VPD_OFPFC_ADD, &f[1], 0);
	/* apply(): the VF's allow flow goes (by its exact cookie). */
	dump_flow_mod("delete_allow", 9, VPD_OFPFC_DELETE, &allow, ~0ull);

	/* One VF's change as a bundle: open, the deletion, the add, commit. */
	g_byte_array_set_size(m, 0);
	vpd_of_bundle_ctrl(m, 10, BUNDLE, VPD_OFPBCT_OPEN_REQUEST);
	dump("bundle_open", m);
	g_byte_array_set_size(m, 0);
	vpd_of_flow_mod(inner, 0, VPD_OFPFC_DELETE, &allow, ~0ull);
	vpd_of_bundle_add(m, 11, BUNDLE, inner);
	dump("bundle_add_delete_allow", m);
	g_byte_array_set_size(m, 0);
	g_byte_array_set_size(inner, 0);
	e.attrs.spoofchk = true;
	vpd_vf_flows(&e, PF_INDEX, f);
	vpd_of_flow_mod(inner, 0, VPD_OFPFC_ADD, &f[1], 0);
	vpd_of_bundle_add(m, 12, BUNDLE, inner);
	dump("bundle_add_allow_mac", m);
	g_byte_array_set_size(m, 0);
	vpd_of_bundle_ctrl(m, 13, BUNDLE, VPD_OFPBCT_COMMIT_REQUEST);
	dump("bundle_commit", m);
	g_byte_array_set_size(m, 0);
	vpd_of_bundle_ctrl(m, 14, BUNDLE, VPD_OFPBCT_DISCARD_REQUEST);
	dump("bundle_discard", m);

	/* A representor port (switchdev): the VF's flows to and from it. */
	e.rep_port = (char *)"vrvpd-sw0-3";
	if (vpd_vf_flows(&e, PF_INDEX, f) != 4)
		return 1;
	dump_flow_mod("add_rep_deny", 15, VPD_OFPFC_ADD, &f[1], 0);
	dump_flow_mod("add_to_rep", 16, VPD_OFPFC_ADD, &f[2], 0);
	dump_flow_mod("add_from_rep", 17, VPD_OFPFC_ADD, &f[3], 0);

	/* Its client has rules in table 5: through that table, a miss flow there. */
	e.flow_table = 5;
	if (vpd_vf_flows(&e, PF_INDEX, f) != 5 || f[3].table != 5)
		return 1;
	dump_flow_mod("add_to_table", 18, VPD_OFPFC_ADD, &f[2], 0);
	dump_flow_mod("add_miss", 19, VPD_OFPFC_ADD, &f[3], 0);
	{
		/* apply() deletes its flows by cookie in every table */
		struct vpd_flow miss = { .cookie = vpd_flow_cookie(VPD_FLOW_MISS, PF_INDEX, VF),
					 .table = VPD_OFPTT_ALL };

		dump_flow_mod("delete_miss", 20, VPD_OFPFC_DELETE, &miss, ~0ull);
	}
	{
		/* A guest's rules (vpd_ovs_rules()): VF 3 -> VF 4 (port 1005). */
		struct vpd_rule r = { .id = 42, .priority = 0xfff0, .table = 5 };
		struct vpd_flow rf, del = { .cookie = vpd_rule_cookie(5, 42), .table = 5 };
		struct vpd_flow tbl = { .cookie = vpd_rule_table_cookie(5), .table = 5 };
		struct vpd_rule_match *mt = &r.m;

		/* everything an IPv4/TCP rule can match, forwarded with a new VLAN tag */
		memcpy(mt->eth_dst, "\x02\x00\x00\x00\x00\x20", 6);
		memcpy(mt->eth_dst_mask, "\xff\xff\xff\xff\xff\xff", 6);
		memcpy(mt->eth_src, "\x02\x00\x00\x00\x00\x00", 6);
		memcpy(mt->eth_src_mask, "\xff\xff\xff\x00\x00\x00", 6);
		mt->eth_type = 0x0800;
		mt->vlan_vid = 100;
		mt->has_ip_proto = true;
		mt->ip_proto = 6;
		memcpy(mt->ipv4_src, "\x0a\x00\x00\x00", 4);
		memcpy(mt->ipv4_src_mask, "\xff\x00\x00\x00", 4);
		memcpy(mt->ipv4_dst, "\x0a\x01\x02\x03", 4);
		memcpy(mt->ipv4_dst_mask, "\xff\xff\xff\xff", 4);
		mt->l4_src = 0x400;
		mt->l4_src_mask = 0xfc00;
		mt->l4_dst = 80;
		mt->l4_dst_mask = 0xffff;
		r.vlan_pop = true;
		r.vlan_push = 200;
		vpd_rule_flow(&r, 1004, 1005, &rf);
		dump_flow_mod("add_rule_tcp", 21, VPD_OFPFC_ADD, &rf, 0);
		/* IPv6/UDP, dropped */
		memset(mt, 0, sizeof(*mt));
		r.vlan_pop = false;
		r.vlan_push = 0;
		r.id = 43;
		r.priority = 7;
		mt->eth_type = 0x86dd;
		mt->has_ip_proto = true;
		mt->ip_proto = 17;
		memcpy(mt->ipv6_src, "\xfd\x00\0\0\0\0\0\0\0\0\0\0\0\0\0\x01", 16);
		memset(mt->ipv6_src_mask, 0xff, 16);
		memcpy(mt->ipv6_dst, "\xfd\x00\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16);
		memset(mt->ipv6_dst_mask, 0xff, 8);
		mt->l4_dst = 53;
		mt->l4_dst_mask = 0xffff;
		vpd_rule_flow(&r, 1004, 0, &rf);
		dump_flow_mod("add_rule_udp6_drop", 22, VPD_OFPFC_ADD, &rf, 0);
		/* hairpin: back out of VF 3's own port */
		vpd_rule_flow(&r, 1004, 1004, &rf);
		dump_flow_mod("add_rule_hairpin", 26, VPD_OFPFC_ADD, &rf, 0);
		dump_flow_mod("delete_rule", 23, VPD_OFPFC_DELETE, &del, ~0ull);
		dump_flow_mod("delete_table", 24, VPD_OFPFC_DELETE, &tbl, VPD_RULE_TABLE_COOKIE_MASK);
		g_byte_array_set_size(m, 0);
		vpd_of_flow_stats_request(m, 25, 5, vpd_rule_cookie(5, 42), ~0ull);
		dump("rule_stats_request", m);
	}
	return 0;
}
