// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * policy: each pooled VF's port number, flows and OVSDB columns in each
 * of its states (see policy.h).
 */
#include "policy.h"
#include "json.h"

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

unsigned vpd_vf_flows(const struct vpd_entry *e, unsigned pf_index, struct vpd_flow out[2])
{
	static const uint8_t zero[6];
	uint32_t port = vpd_vf_ofport(pf_index, e->vf);
	unsigned n = 0;

	out[n++] = (struct vpd_flow) {
		.cookie = vpd_flow_cookie(VPD_FLOW_DENY, pf_index, e->vf),
		.priority = 10, .in_port = port,
	};
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

static void put_kv(GString *s, const char *k, const char *v, bool *first)
{
	g_string_append(s, *first ? "[" : ",[");
	vpd_json_put_str(s, k);
	g_string_append_c(s, ',');
	vpd_json_put_str(s, v);
	g_string_append_c(s, ']');
	*first = false;
}

void vpd_vf_port_columns(GString *s, const struct vpd_entry *e)
{
	bool first = true;
	char vf[16];

	snprintf(vf, sizeof(vf), "%u", e->vf);
	/* A VF that may not pass (free, or without a VLAN of its pool) sits
	 * in the VLAN nothing else is in, so it receives nothing either. */
	if (!e->claimed || (!e->attrs.vlan && e->pool->vlan_min)) {
		g_string_append_printf(s, "\"tag\":%u,\"vlan_mode\":\"access\"", VPD_FREE_VLAN);
	} else {
		g_string_append_printf(s, "\"tag\":%u,\"vlan_mode\":\"%s\"", e->attrs.vlan,
				       e->attrs.vlan_proto == 0x88a8 && e->attrs.vlan
				       ? "dot1q-tunnel" : "access");
	}
	g_string_append(s, ",\"other_config\":[\"map\",[");
	if (e->claimed && e->attrs.vlan_proto == 0x88a8 && e->attrs.vlan)
		put_kv(s, "qinq-ethtype", "802.1ad", &first);
	g_string_append(s, "]],\"external_ids\":[\"map\",[");
	first = true;
	put_kv(s, "vpd-pool", e->pool->name, &first);
	put_kv(s, "vpd-vf", vf, &first);
	g_string_append(s, "]]");
}

void vpd_vf_interface_columns(GString *s, const struct vpd_entry *e, uint32_t ofport)
{
	static const char *const link[] = { "auto", "enable", "disable" };
	const struct vpd_vf_attrs *a = &e->attrs;
	uint64_t rate = vpd_vf_policing_rate(e);
	bool first = true;
	char mac[18], num[32];

	snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", a->mac[0], a->mac[1],
		 a->mac[2], a->mac[3], a->mac[4], a->mac[5]);
	/*
	 * kbit/s, and a burst of 100 ms at that rate (OVS's default burst, 8000
	 * kbit whatever the rate, would let a 1 Mbit/s VF send 8 s at line
	 * rate before the cap bites).
	 */
	g_string_append_printf(s, "\"ofport_request\":%u,\"ingress_policing_rate\":%" PRIu64
			       ",\"ingress_policing_burst\":%" PRIu64 ",\"external_ids\":[\"map\",[",
			       ofport, rate, rate / 10);
	put_kv(s, "vpd-state", e->claimed ? "claimed" : "free", &first);
	if (e->claimed) {
		put_kv(s, "vpd-owner", e->owner ? e->owner : "", &first);
		put_kv(s, "attached-mac", mac, &first);
		snprintf(num, sizeof(num), "%u", a->vlan);
		put_kv(s, "vpd-vlan", num, &first);
		snprintf(num, sizeof(num), "%u", a->qos);
		put_kv(s, "vpd-qos", num, &first);
		put_kv(s, "vpd-vlan-proto", a->vlan_proto == 0x88a8 ? "802.1ad" : "802.1Q",
		       &first);
		put_kv(s, "vpd-spoofchk", a->spoofchk ? "on" : "off", &first);
		put_kv(s, "vpd-trust", a->trust ? "on" : "off", &first);
		put_kv(s, "vpd-link-state", link[a->link_state], &first);
		snprintf(num, sizeof(num), "%u", a->min_tx_rate);
		put_kv(s, "vpd-min-tx-rate", num, &first);
		snprintf(num, sizeof(num), "%u", a->max_tx_rate);
		put_kv(s, "vpd-max-tx-rate", num, &first);
	}
	g_string_append(s, "]]");
}
