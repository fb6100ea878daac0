// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * metrics: histograms, port counters and the Prometheus text format (see
 * metrics.h).
 */
#include "metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const uint64_t vpd_hist_bounds_ns[VPD_HIST_BUCKETS] = {
	50000, 100000, 250000, 500000,                  /* 50 us .. 0.5 ms */
	1000000, 2500000, 5000000, 10000000,            /* 1 ms .. 10 ms */
	25000000, 50000000, 100000000, 250000000,       /* 25 ms .. 250 ms */
	500000000, 1000000000, 2500000000u, 10000000000ull, /* 0.5 s .. 10 s */
};

/*
 * OVS's Interface statistics keys; ovs_rx_qos_drops: OVS-DPDK's policer
 * (on the kernel datapath the daemon asks tc: police.h)
 */
const char *const vpd_port_stat_ovs_key[VPD_PS_N] = {
	"rx_packets", "rx_bytes", "rx_dropped", "tx_packets", "tx_bytes", "tx_dropped",
	"ovs_rx_qos_drops",
};

void vpd_hist_observe(struct vpd_hist *h, uint64_t ns)
{
	for (unsigned i = 0; i < VPD_HIST_BUCKETS; i++) {
		if (ns <= vpd_hist_bounds_ns[i]) {
			h->bucket[i]++;
			break;
		}
	}
	h->count++;
	h->sum_ns += ns;
}

void vpd_hist_put(struct vpd_builder *b, uint16_t type, const struct vpd_hist *h)
{
	uint64_t v[2 + 2 * VPD_HIST_BUCKETS];

	G_STATIC_ASSERT(G_N_ELEMENTS(v) <= VPD_MAX_U64S);
	v[0] = h->count;
	v[1] = h->sum_ns;
	for (unsigned i = 0; i < VPD_HIST_BUCKETS; i++) {
		v[2 + 2 * i] = vpd_hist_bounds_ns[i];
		v[3 + 2 * i] = h->bucket[i];
	}
	vpd_put_u64s(b, type, v, G_N_ELEMENTS(v));
}

void vpd_port_stats_put(struct vpd_builder *b, const struct vpd_port_stats *s)
{
	uint64_t v[1 + VPD_PS_N];

	v[0] = s->have;
	memcpy(v + 1, s->v, sizeof(s->v));
	vpd_put_u64s(b, VPD_A_PORT_STATS, v, G_N_ELEMENTS(v));
}

/* ---- the exposition format ---------------------------------------------- */

void vpd_prom_init(struct vpd_prom *p, GString *out)
{
	p->out = out;
	p->seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	p->cur = NULL;
	p->refused = false;
}

void vpd_prom_clear(struct vpd_prom *p)
{
	g_clear_pointer(&p->seen, g_hash_table_unref);
	g_clear_pointer(&p->cur, g_free);
}

void vpd_prom_escape_label(GString *out, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\')
			g_string_append(out, "\\\\");
		else if (*v == '"')
			g_string_append(out, "\\\"");
		else if (*v == '\n')
			g_string_append(out, "\\n");
		else
			g_string_append_c(out, *v);
	}
}

/* HELP's text: \\ and \n escaped (not quotes). */
static void escape_help(GString *out, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\')
			g_string_append(out, "\\\\");
		else if (*v == '\n')
			g_string_append(out, "\\n");
		else
			g_string_append_c(out, *v);
	}
}

bool vpd_prom_family(struct vpd_prom *p, const char *name, const char *type, const char *help)
{
	if (p->cur && !strcmp(p->cur, name)) {
		p->refused = false;
		return true;
	}
	g_clear_pointer(&p->cur, g_free);
	p->cur = g_strdup(name);
	p->refused = g_hash_table_contains(p->seen, name);
	if (p->refused) {
		g_critical("metrics: family %s begun again after another one", name);
		return false;
	}
	g_hash_table_add(p->seen, g_strdup(name));
	g_string_append_printf(p->out, "# HELP %s ", name);
	escape_help(p->out, help);
	g_string_append_printf(p->out, "\n# TYPE %s %s\n", name, type);
	return true;
}

void vpd_prom_sample(struct vpd_prom *p, const char *suffix, const char *const *labels,
		     const char *value)
{
	if (!p->cur || p->refused)
		return;
	g_string_append(p->out, p->cur);
	g_string_append(p->out, suffix);
	if (labels && labels[0]) {
		g_string_append_c(p->out, '{');
		for (unsigned i = 0; labels[i] && labels[i + 1]; i += 2) {
			g_string_append_printf(p->out, "%s%s=\"", i ? "," : "", labels[i]);
			vpd_prom_escape_label(p->out, labels[i + 1]);
			g_string_append_c(p->out, '"');
		}
		g_string_append_c(p->out, '}');
	}
	g_string_append_printf(p->out, " %s\n", value);
}

void vpd_prom_u64(struct vpd_prom *p, const char *suffix, const char *const *labels,
		  uint64_t value)
{
	char v[24];

	snprintf(v, sizeof(v), "%" PRIu64, value);
	vpd_prom_sample(p, suffix, labels, v);
}

void vpd_prom_seconds(GString *out, uint64_t ns)
{
	char frac[10];
	int n;

	g_string_append_printf(out, "%" PRIu64, ns / 1000000000u);
	snprintf(frac, sizeof(frac), "%09" PRIu64, ns % 1000000000u);
	for (n = 9; n > 0 && frac[n - 1] == '0'; n--)
		;
	if (n)
		g_string_append_printf(out, ".%.*s", n, frac);
}

/* labels, then name, value, NULL: for the buckets' "le" */
static const char **labels_plus(const char *const *labels, const char *name, const char *value)
{
	unsigned n = 0;
	const char **out;

	while (labels && labels[n])
		n++;
	out = g_new0(const char *, n + 3);
	for (unsigned i = 0; i < n; i++)
		out[i] = labels[i];
	out[n] = name;
	out[n + 1] = value;
	return out;
}

void vpd_prom_histogram(struct vpd_prom *p, const char *const *labels, const uint64_t *bounds_ns,
			const uint64_t *counts, unsigned n, uint64_t count, uint64_t sum_ns)
{
	g_autoptr(GString) le = g_string_new(NULL);
	uint64_t cum = 0;

	for (unsigned i = 0; i < n; i++) {
		g_autofree const char **l = NULL;

		cum += counts[i];
		g_string_truncate(le, 0);
		vpd_prom_seconds(le, bounds_ns[i]);
		l = labels_plus(labels, "le", le->str);
		vpd_prom_u64(p, "_bucket", l, cum);
	}
	{
		g_autofree const char **l = labels_plus(labels, "le", "+Inf");

		vpd_prom_u64(p, "_bucket", l, count);
	}
	g_string_truncate(le, 0);
	vpd_prom_seconds(le, sum_ns);
	vpd_prom_sample(p, "_sum", labels, le->str);
	vpd_prom_u64(p, "_count", labels, count);
}

/* ---- a METRICS reply ---------------------------------------------------- */

static const char *const state_name[] = {
	"free", "claimed", "claimed_not_connected", "quarantined",
};

struct vf_row {
	const char *pool, *owner, *port;
	char vf[12], uid[12], mac[18], vlan[8];
	unsigned state;
	const struct vpd_attr_view *stats;
};

struct pool_row {
	const char *name;
	uint64_t claims, refused, releases, gone;
	const struct vpd_attr_view *claim_hist, *release_hist;
};

static bool fail(GError **error, const char *what)
{
	g_set_error(error, VPD_PROTOCOL_ERROR, 0, "the daemon's METRICS answer: %s", what);
	return false;
}

/* A histogram attribute checked: bounds increasing, buckets within count. */
static bool hist_ok(const struct vpd_attr_view *h)
{
	unsigned n = vpd_attr_u64_count(h);
	uint64_t count, v, sum = 0, last = 0;

	if (n < 2 || n % 2 || !vpd_attr_u64_at(h, 0, &count))
		return false;
	for (unsigned i = 2; i < n; i += 2) {
		vpd_attr_u64_at(h, i, &v);
		if (i > 2 && v <= last)
			return false;
		last = v;
		vpd_attr_u64_at(h, i + 1, &v);
		if (v > count - sum)
			return false;
		sum += v;
	}
	return true;
}

static void write_hist(struct vpd_prom *p, const char *pool, const struct vpd_attr_view *h)
{
	const char *labels[] = { "pool", pool, NULL };
	unsigned n = (vpd_attr_u64_count(h) - 2) / 2;
	g_autofree uint64_t *bounds = g_new0(uint64_t, n + 1);
	g_autofree uint64_t *counts = g_new0(uint64_t, n + 1);
	uint64_t count, sum;

	vpd_attr_u64_at(h, 0, &count);
	vpd_attr_u64_at(h, 1, &sum);
	for (unsigned i = 0; i < n; i++) {
		vpd_attr_u64_at(h, 2 + 2 * i, &bounds[i]);
		vpd_attr_u64_at(h, 3 + 2 * i, &counts[i]);
	}
	vpd_prom_histogram(p, labels, bounds, counts, n, count, sum);
}

static const struct {
	const char *name, *help;
} port_family[VPD_PS_N] = {
	{ "vdpa_pool_vf_port_rx_packets_total",
	  "Packets OVS received on the VF's switch port (what the VF sent), as OVS counts them." },
	{ "vdpa_pool_vf_port_rx_bytes_total", "Bytes OVS received on the VF's switch port." },
	{ "vdpa_pool_vf_port_rx_dropped_total",
	  "Packets received on the VF's switch port and dropped, as OVS counts them." },
	{ "vdpa_pool_vf_port_tx_packets_total",
	  "Packets OVS sent on the VF's switch port (to the VF)." },
	{ "vdpa_pool_vf_port_tx_bytes_total", "Bytes OVS sent on the VF's switch port." },
	{ "vdpa_pool_vf_port_tx_dropped_total",
	  "Packets OVS was to send on the VF's switch port and dropped." },
	{ "vdpa_pool_vf_port_policer_dropped_total",
	  "Packets the ingress policer of the VF's switch port (its max_tx_rate) dropped: "
	  "OVS-DPDK's ovs_rx_qos_drops; on OVS's kernel datapath its tc police action's." },
};

bool vpd_metrics_format(const struct vpd_msg *reply, GString *out, GError **error)
{
	g_autoptr(GArray) vfs = g_array_new(false, true, sizeof(struct vf_row));
	g_autoptr(GArray) pools = g_array_new(false, true, sizeof(struct pool_row));
	g_autoptr(GPtrArray) nests = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
	g_autoptr(GArray) conns = g_array_new(false, true, sizeof(uint32_t) * 2);
	const struct vpd_attr_view *ovs_error = vpd_msg_get(reply, VPD_A_MESSAGE);
	bool any_stats = false;
	struct vpd_prom p;
	uint64_t start = 0;

	if (reply->type != VPD_MSG_REPLY)
		return fail(error, "not a REPLY");
	for (guint i = 0; i < reply->attrs->len; i++) {
		const struct vpd_attr_view *v = &g_array_index(reply->attrs, struct vpd_attr_view, i);
		GArray *a;

		if (v->type != VPD_A_VF && v->type != VPD_A_POOL_STATS && v->type != VPD_A_CONNS)
			continue;
		a = vpd_attr_nested(v);
		g_ptr_array_add(nests, a);
		if (v->type == VPD_A_VF) {
			struct vf_row r = { 0 };
			const struct vpd_attr_view *mac = vpd_nested_get(a, VPD_A_MAC);
			uint16_t vlan = 0;

			r.pool = vpd_attr_str(vpd_nested_get(a, VPD_A_POOL));
			if (!r.pool)
				return fail(error, "a VF without its POOL");
			r.owner = vpd_attr_str(vpd_nested_get(a, VPD_A_OWNER)) ?: "";
			r.port = vpd_attr_str(vpd_nested_get(a, VPD_A_PORT)) ?: "";
			r.state = MIN(vpd_nested_u32(a, VPD_A_COUNT), 3u);
			snprintf(r.vf, sizeof(r.vf), "%u", vpd_nested_u32(a, VPD_A_VF_INDEX));
			if (vpd_nested_get(a, VPD_A_UID))
				snprintf(r.uid, sizeof(r.uid), "%u", vpd_nested_u32(a, VPD_A_UID));
			if (mac && mac->len == 6)
				snprintf(r.mac, sizeof(r.mac), "%02x:%02x:%02x:%02x:%02x:%02x",
					 mac->value[0], mac->value[1], mac->value[2],
					 mac->value[3], mac->value[4], mac->value[5]);
			vpd_attr_u16(vpd_nested_get(a, VPD_A_VLAN), &vlan);
			snprintf(r.vlan, sizeof(r.vlan), "%u", vlan);
			r.stats = vpd_nested_get(a, VPD_A_PORT_STATS);
			if (r.stats && vpd_attr_u64_count(r.stats) != 1 + VPD_PS_N)
				return fail(error, "PORT_STATS of the wrong size");
			any_stats |= r.stats != NULL;
			g_array_append_val(vfs, r);
		} else if (v->type == VPD_A_POOL_STATS) {
			struct pool_row r = { 0 };

			r.name = vpd_attr_str(vpd_nested_get(a, VPD_A_POOL));
			r.claims = vpd_nested_u64(a, VPD_A_CLAIMS);
			r.refused = vpd_nested_u64(a, VPD_A_CLAIMS_REFUSED);
			r.releases = vpd_nested_u64(a, VPD_A_RELEASES);
			r.gone = vpd_nested_u64(a, VPD_A_RELEASES_GONE);
			r.claim_hist = vpd_nested_get(a, VPD_A_CLAIM_HIST);
			r.release_hist = vpd_nested_get(a, VPD_A_RELEASE_HIST);
			if (!r.name || !hist_ok(r.claim_hist) || !hist_ok(r.release_hist))
				return fail(error, "a pool's statistics without its name or with a "
					    "histogram that does not add up");
			g_array_append_val(pools, r);
		} else {
			uint32_t c[2] = { vpd_nested_u32(a, VPD_A_UID), vpd_nested_u32(a, VPD_A_COUNT) };

			g_array_append_val(conns, c);
		}
	}
	vpd_attr_u64(vpd_msg_get(reply, VPD_A_START_TIME), &start);

	vpd_prom_init(&p, out);
	vpd_prom_family(&p, "vdpa_pool_daemon_start_time_seconds", "gauge",
			"When the daemon started, Unix time: its own counters start again at "
			"0 then.");
	vpd_prom_u64(&p, "", NULL, start);

	vpd_prom_family(&p, "vdpa_pool_connections", "gauge",
			"The daemon's API connections, by the uid of their peer.");
	for (guint i = 0; i < conns->len; i++) {
		const uint32_t *c = &g_array_index(conns, uint32_t, 2 * i);
		char uid[12];
		const char *labels[] = { "uid", uid, NULL };

		snprintf(uid, sizeof(uid), "%u", c[0]);
		vpd_prom_u64(&p, "", labels, c[1]);
	}

	vpd_prom_family(&p, "vdpa_pool_vfs", "gauge", "The pool's VFs in each state.");
	for (guint i = 0; i < pools->len; i++) {
		const struct pool_row *r = &g_array_index(pools, struct pool_row, i);

		for (unsigned s = 0; s < G_N_ELEMENTS(state_name); s++) {
			const char *labels[] = { "pool", r->name, "state", state_name[s], NULL };
			uint64_t n = 0;

			for (guint j = 0; j < vfs->len; j++) {
				const struct vf_row *v = &g_array_index(vfs, struct vf_row, j);

				n += !strcmp(v->pool, r->name) && v->state == s;
			}
			vpd_prom_u64(&p, "", labels, n);
		}
	}

	vpd_prom_family(&p, "vdpa_pool_claims_total", "counter",
			"CLAIM requests of the pool, granted or refused.");
	for (guint i = 0; i < pools->len; i++) {
		const struct pool_row *r = &g_array_index(pools, struct pool_row, i);
		const char *ok[] = { "pool", r->name, "result", "granted", NULL };
		const char *no[] = { "pool", r->name, "result", "refused", NULL };

		vpd_prom_u64(&p, "", ok, r->claims);
		vpd_prom_u64(&p, "", no, r->refused);
	}

	vpd_prom_family(&p, "vdpa_pool_releases_total", "counter",
			"VFs of the pool released: by a RELEASE request, or because their "
			"client went (connection closed, claimant exited).");
	for (guint i = 0; i < pools->len; i++) {
		const struct pool_row *r = &g_array_index(pools, struct pool_row, i);
		const char *req[] = { "pool", r->name, "by", "request", NULL };
		const char *gone[] = { "pool", r->name, "by", "client_gone", NULL };

		vpd_prom_u64(&p, "", req, r->releases);
		vpd_prom_u64(&p, "", gone, r->gone);
	}

	vpd_prom_family(&p, "vdpa_pool_claim_duration_seconds", "histogram",
			"Time from a granted CLAIM's request read to its reply queued, in the "
			"daemon (OVS's flows included).");
	for (guint i = 0; i < pools->len; i++) {
		const struct pool_row *r = &g_array_index(pools, struct pool_row, i);

		write_hist(&p, r->name, r->claim_hist);
	}
	vpd_prom_family(&p, "vdpa_pool_release_duration_seconds", "histogram",
			"Time from a RELEASE request read to its reply queued, in the daemon.");
	for (guint i = 0; i < pools->len; i++) {
		const struct pool_row *r = &g_array_index(pools, struct pool_row, i);

		write_hist(&p, r->name, r->release_hist);
	}

	vpd_prom_family(&p, "vdpa_pool_vf_info", "gauge",
			"A pooled VF (value 1): its state, who holds it (the client's OWNER, "
			"e.g. QEMU's pool@VM, and uid), its MAC, VLAN and switch port.");
	for (guint j = 0; j < vfs->len; j++) {
		const struct vf_row *v = &g_array_index(vfs, struct vf_row, j);
		const char *labels[] = { "pool", v->pool, "vf", v->vf, "state", state_name[v->state],
					 "owner", v->owner, "uid", v->uid, "mac", v->mac,
					 "vlan", v->vlan, "port", v->port, NULL };

		vpd_prom_u64(&p, "", labels, 1);
	}
	vpd_prom_family(&p, "vdpa_pool_vf_claimed", "gauge", "Whether the VF is claimed (1) or not.");
	for (guint j = 0; j < vfs->len; j++) {
		const struct vf_row *v = &g_array_index(vfs, struct vf_row, j);
		const char *labels[] = { "pool", v->pool, "vf", v->vf, NULL };

		vpd_prom_u64(&p, "", labels, v->state == 1 || v->state == 2);
	}
	vpd_prom_family(&p, "vdpa_pool_vf_quarantined", "gauge",
			"Whether the VF is quarantined (1): not offered, its vhost-vdpa device "
			"held open by a process the daemon does not know, or missing.");
	for (guint j = 0; j < vfs->len; j++) {
		const struct vf_row *v = &g_array_index(vfs, struct vf_row, j);
		const char *labels[] = { "pool", v->pool, "vf", v->vf, NULL };

		vpd_prom_u64(&p, "", labels, v->state == 3);
	}
	vpd_prom_family(&p, "vdpa_pool_vf_vlan", "gauge", "The VF's VLAN (0: untagged).");
	for (guint j = 0; j < vfs->len; j++) {
		const struct vf_row *v = &g_array_index(vfs, struct vf_row, j);
		const char *labels[] = { "pool", v->pool, "vf", v->vf, NULL };

		vpd_prom_sample(&p, "", labels, v->vlan);
	}

	if (any_stats || ovs_error) {
		vpd_prom_family(&p, "vdpa_pool_ovs_stats_up", "gauge",
				"Whether OVS gave the ports' counters this time (1); when 0, the "
				"vdpa_pool_vf_port_* samples are left out.");
		vpd_prom_u64(&p, "", NULL, ovs_error == NULL);
	}
	for (unsigned s = 0; s < VPD_PS_N && any_stats; s++) {
		vpd_prom_family(&p, port_family[s].name, "counter", port_family[s].help);
		for (guint j = 0; j < vfs->len; j++) {
			const struct vf_row *v = &g_array_index(vfs, struct vf_row, j);
			const char *labels[] = { "pool", v->pool, "vf", v->vf, "port", v->port, NULL };
			uint64_t have = 0, val = 0;

			if (!v->stats || !vpd_attr_u64_at(v->stats, 0, &have) ||
			    !(have & (1u << s)))
				continue;
			vpd_attr_u64_at(v->stats, 1 + s, &val);
			vpd_prom_u64(&p, "", labels, val);
		}
	}
	vpd_prom_clear(&p);
	return true;
}
