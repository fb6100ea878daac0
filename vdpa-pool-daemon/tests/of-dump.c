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
	struct vpd_flow f[VPD_VF_MAX_FLOWS], all = { .cookie = VPD_COOKIE_MAGIC }, others = vpd_others_flow();
	struct vpd_flow allow = { .cookie = vpd_flow_cookie(VPD_FLOW_ALLOW, PF_INDEX, VF) };
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
	return 0;
}
