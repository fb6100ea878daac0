// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * policy: each pooled VF's port number, flows and OVSDB columns in each
 * of its states (see policy.h).
 */
#include "policy.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- flows -------------------------------------------------------------- */

uint64_t vpd_flow_cookie(enum vpd_flow_kind kind, unsigned pf_index, unsigned vf)
{
	return VPD_COOKIE_MAGIC | (uint64_t)kind << 40 | (uint64_t)(pf_index & 0xffffff) << 16 |
	       (vf & 0xffff);
}

uint32_t vpd_vf_ofport(unsigned pf_index, unsigned vf)
{
	return pf_index * VPD_OFPORT_PER_PF + vf + 1;
}

uint32_t vpd_rep_ofport(unsigned pf_index, unsigned vf)
{
	return pf_index * VPD_OFPORT_PER_PF + VPD_OFPORT_REP_BASE + vf + 1;
}

unsigned vpd_vf_flows(const struct vpd_entry *e, unsigned pf_index,
		      struct vpd_flow out[VPD_VF_MAX_FLOWS])
{
	static const uint8_t zero[6];
	uint32_t port = vpd_vf_ofport(pf_index, e->vf);
	uint32_t rep = vpd_rep_ofport(pf_index, e->vf);
	unsigned n = 0;

	out[n++] = (struct vpd_flow) {
		.cookie = vpd_flow_cookie(VPD_FLOW_DENY, pf_index, e->vf),
		.priority = 10, .in_port = port,
	};
	if (e->rep_port) {
		/* switchdev: the VF and its representor port, nothing else */
		out[n++] = (struct vpd_flow) {
			.cookie = vpd_flow_cookie(VPD_FLOW_REP_DENY, pf_index, e->vf),
			.priority = 10, .in_port = rep,
		};
		if (e->claimed && e->attrs.link_state != VPD_LINK_DISABLE) {
			/* with a table of rules: through it, its miss flow to REP */
			out[n++] = (struct vpd_flow) {
				.cookie = vpd_flow_cookie(VPD_FLOW_TO_REP, pf_index, e->vf),
				.priority = 100, .in_port = port,
				.output = e->flow_table ? 0 : rep, .goto_table = e->flow_table,
			};
			if (e->flow_table)
				out[n++] = (struct vpd_flow) {
					.cookie = vpd_flow_cookie(VPD_FLOW_MISS, pf_index, e->vf),
					.table = e->flow_table, .priority = 0, .in_port = port,
					.output = rep,
				};
			out[n++] = (struct vpd_flow) {
				.cookie = vpd_flow_cookie(VPD_FLOW_FROM_REP, pf_index, e->vf),
				.priority = 100, .in_port = rep, .output = port,
			};
		}
		return n;
	}
	if (vpd_entry_passes(e)) {
		out[n] = (struct vpd_flow) {
			.cookie = vpd_flow_cookie(VPD_FLOW_ALLOW, pf_index, e->vf),
			.priority = 100, .in_port = port, .normal = true,
		};
		if (e->attrs.spoofchk && memcmp(e->attrs.mac, zero, 6)) {
			out[n].match_src = true;
			memcpy(out[n].src, e->attrs.mac, 6);
		}
		n++;
	}
	return n;
}

uint64_t vpd_rule_cookie(uint8_t table, uint32_t id)
{
	return VPD_COOKIE_MAGIC | (uint64_t)VPD_FLOW_RULE << 40 | (uint64_t)table << 32 | id;
}

uint64_t vpd_rule_table_cookie(uint8_t table)
{
	return vpd_rule_cookie(table, 0);
}

void vpd_rule_flow(const struct vpd_rule *r, uint32_t in_port, uint32_t out_port,
		   struct vpd_flow *f)
{
	const struct vpd_rule_match *m = &r->m;

	memset(f, 0, sizeof(*f));
	f->cookie = vpd_rule_cookie(r->table, r->id);
	f->table = r->table;
	f->priority = r->priority + 1;
	f->in_port = in_port;
	memcpy(f->dst, m->eth_dst, 6);
	memcpy(f->dst_mask, m->eth_dst_mask, 6);
	f->match_src = memcmp(m->eth_src_mask, (uint8_t[6]) { 0 }, 6) != 0;
	memcpy(f->src, m->eth_src, 6);
	memcpy(f->src_mask, m->eth_src_mask, 6);
	f->eth_type = m->eth_type;
	f->vlan_vid = m->vlan_vid;
	f->match_ip_proto = m->has_ip_proto;
	f->ip_proto = m->ip_proto;
	memcpy(f->ipv4_src, m->ipv4_src, 4);
	memcpy(f->ipv4_src_mask, m->ipv4_src_mask, 4);
	memcpy(f->ipv4_dst, m->ipv4_dst, 4);
	memcpy(f->ipv4_dst_mask, m->ipv4_dst_mask, 4);
	memcpy(f->ipv6_src, m->ipv6_src, 16);
	memcpy(f->ipv6_src_mask, m->ipv6_src_mask, 16);
	memcpy(f->ipv6_dst, m->ipv6_dst, 16);
	memcpy(f->ipv6_dst_mask, m->ipv6_dst_mask, 16);
	f->l4_src = m->l4_src;
	f->l4_src_mask = m->l4_src_mask;
	f->l4_dst = m->l4_dst;
	f->l4_dst_mask = m->l4_dst_mask;
	f->pop_vlan = r->vlan_pop;
	f->push_vid = r->vlan_push;
	/* back out of its own port (hairpin): OVS drops output:in_port */
	f->output = out_port && out_port == in_port ? VPD_OFPP_IN_PORT : out_port;
}

struct vpd_flow vpd_others_flow(void)
{
	return (struct vpd_flow) {
		.cookie = vpd_flow_cookie(VPD_FLOW_OTHERS, 0, 0), .priority = 0, .normal = true,
	};
}

uint64_t vpd_vf_policing_rate(const struct vpd_entry *e)
{
	return e->claimed ? (uint64_t)vpd_entry_max_tx_rate(e) * 1000 : 0;
}

/* ---- OVSDB columns ------------------------------------------------------ */

/* An OVSDB map (["map", [[k, v], ...]]) of string pairs, kv NULL-ended. */
static void add_map(JsonBuilder *b, const char *const *kv)
{
	json_builder_begin_array(b);
	json_builder_add_string_value(b, "map");
	json_builder_begin_array(b);
	for (; kv[0]; kv += 2) {
		json_builder_begin_array(b);
		json_builder_add_string_value(b, kv[0]);
		json_builder_add_string_value(b, kv[1]);
		json_builder_end_array(b);
	}
	json_builder_end_array(b);
	json_builder_end_array(b);
}

void vpd_vf_port_columns(JsonBuilder *b, const struct vpd_entry *e)
{
	bool qinq = e->claimed && !e->rep_port && e->attrs.vlan_proto == 0x88a8 && e->attrs.vlan;
	const char *qinq_kv[] = { "qinq-ethtype", "802.1ad", NULL };
	g_autofree char *vf = g_strdup_printf("%u", e->vf);
	const char *ids[] = { "vpd-pool", e->pool->name, "vpd-vf", vf, NULL };

	/* A VF that may not pass (free, or without a VLAN of its pool) sits
	 * in the VLAN nothing else is in, so it receives nothing either. */
	json_builder_set_member_name(b, "tag");
	if (!e->claimed || e->rep_port || (!e->attrs.vlan && e->pool->vlan_min)) {
		json_builder_add_int_value(b, VPD_FREE_VLAN);
		json_builder_set_member_name(b, "vlan_mode");
		json_builder_add_string_value(b, "access");
	} else {
		json_builder_add_int_value(b, e->attrs.vlan);
		json_builder_set_member_name(b, "vlan_mode");
		json_builder_add_string_value(b, qinq ? "dot1q-tunnel" : "access");
	}
	json_builder_set_member_name(b, "other_config");
	add_map(b, qinq ? qinq_kv : qinq_kv + 2);
	json_builder_set_member_name(b, "external_ids");
	add_map(b, ids);
}

void vpd_vf_interface_columns(JsonBuilder *b, const struct vpd_entry *e, uint32_t ofport)
{
	static const char *const link[] = { "auto", "enable", "disable" };
	const struct vpd_vf_attrs *a = &e->attrs;
	uint64_t rate = vpd_vf_policing_rate(e);
	g_autofree char *mac = g_strdup_printf("%02x:%02x:%02x:%02x:%02x:%02x", a->mac[0],
					       a->mac[1], a->mac[2], a->mac[3], a->mac[4],
					       a->mac[5]);
	g_autofree char *vlan = g_strdup_printf("%u", a->vlan);
	g_autofree char *qos = g_strdup_printf("%u", a->qos);
	g_autofree char *min = g_strdup_printf("%u", a->min_tx_rate);
	g_autofree char *max = g_strdup_printf("%u", a->max_tx_rate);
	const char *free_ids[] = { "vpd-state", "free", NULL };
	const char *ids[] = {
		"vpd-state", "claimed",
		"vpd-owner", e->owner ? e->owner : "",
		"attached-mac", mac,
		"vpd-vlan", vlan,
		"vpd-qos", qos,
		"vpd-vlan-proto", a->vlan_proto == 0x88a8 ? "802.1ad" : "802.1Q",
		"vpd-spoofchk", a->spoofchk ? "on" : "off",
		"vpd-trust", a->trust ? "on" : "off",
		"vpd-link-state", link[a->link_state],
		"vpd-min-tx-rate", min,
		"vpd-max-tx-rate", max,
		/* (without a representor port the list ends here) */
		e->rep_port ? "vpd-representor" : NULL, e->rep_port,
		NULL
	};

	json_builder_set_member_name(b, "ofport_request");
	json_builder_add_int_value(b, ofport);
	/*
	 * kbit/s, and a burst of 100 ms at that rate (OVS's default burst, 8000
	 * kbit whatever the rate, would let a 1 Mbit/s VF send 8 s at line
	 * rate before the cap bites).
	 */
	json_builder_set_member_name(b, "ingress_policing_rate");
	json_builder_add_int_value(b, rate);
	json_builder_set_member_name(b, "ingress_policing_burst");
	json_builder_add_int_value(b, rate / 10);
	json_builder_set_member_name(b, "external_ids");
	add_map(b, e->claimed ? ids : free_ids);
}

/* ---- a VF's representor port -------------------------------------------- */

void vpd_rep_port_columns(JsonBuilder *b, const struct vpd_entry *e)
{
	g_autofree char *vf = g_strdup_printf("%u", e->vf);
	const char *ids[] = {
		"vpd-pool", e->pool->name, "vpd-vf", vf, "vpd-representor-of",
		e->rep ? e->rep : "", NULL
	};

	json_builder_set_member_name(b, "tag");
	json_builder_add_int_value(b, VPD_FREE_VLAN);
	json_builder_set_member_name(b, "vlan_mode");
	json_builder_add_string_value(b, "access");
	json_builder_set_member_name(b, "external_ids");
	add_map(b, ids);
}

void vpd_rep_interface_columns(JsonBuilder *b, const struct vpd_entry *e, uint32_t ofport)
{
	const char *ids[] = {
		"vpd-state", "representor", "vpd-owner", e->owner ? e->owner : "",
		"vpd-representor-of", e->rep ? e->rep : "", NULL
	};

	json_builder_set_member_name(b, "type");
	json_builder_add_string_value(b, "system");
	json_builder_set_member_name(b, "ofport_request");
	json_builder_add_int_value(b, ofport);
	json_builder_set_member_name(b, "external_ids");
	add_map(b, ids);
}
