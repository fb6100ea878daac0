// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of what `vdpa-poolctl metrics` writes (metrics.h): label
 * values escaped as the exposition format says, histograms' buckets
 * cumulative and ending in +Inf = _count, each family's HELP and TYPE once
 * and its samples together, a METRICS reply as the daemon builds it turned
 * into text, and replies that do not add up refused.
 */
#include "metrics.h"

#include <string.h>

static const uint8_t MAC[6] = { 2, 0, 0, 0, 0, 0x10 };

/* A METRICS reply as server.c builds it: pools a (2 VFs) and b (1 VF). */
static struct vpd_msg *reply(const char *owner, const struct vpd_hist *claim_hist,
			     bool with_stats)
{
	struct vpd_builder b;
	struct vpd_hist none = { 0 };
	g_autoptr(GError) err = NULL;
	g_autoptr(GBytes) bytes = NULL;
	struct vpd_msg *m;

	vpd_builder_init(&b, VPD_MSG_REPLY, 1);
	vpd_put_u64(&b, VPD_A_START_TIME, 1795000000);
	for (unsigned i = 0; i < 3; i++) {
		struct vpd_port_stats st = { .have = (1u << VPD_PS_N) - 1 -
						      (1u << VPD_PS_POLICER_DROPPED) };
		g_autofree char *port = g_strdup_printf("eni0np1pf0vf%u", i);

		for (unsigned s = 0; s < VPD_PS_N; s++)
			st.v[s] = 1000 * i + s;
		vpd_nest_start(&b, VPD_A_VF);
		vpd_put_u32(&b, VPD_A_HANDLE, i);
		vpd_put_u32(&b, VPD_A_VF_INDEX, i);
		vpd_put_str(&b, VPD_A_POOL, i < 2 ? "a" : "b");
		if (i == 0) {
			vpd_put_str(&b, VPD_A_OWNER, owner);
			vpd_put_u32(&b, VPD_A_UID, 64055);
		}
		vpd_put_u32(&b, VPD_A_COUNT, i == 0 ? 1 : i == 1 ? 0 : 3);
		vpd_put_bytes(&b, VPD_A_MAC, MAC, 6);
		vpd_put_u16(&b, VPD_A_VLAN, i == 0 ? 100 : 0);
		vpd_put_str(&b, VPD_A_PORT, port);
		if (with_stats)
			vpd_port_stats_put(&b, &st);
		vpd_nest_end(&b);
	}
	for (unsigned i = 0; i < 2; i++) {
		vpd_nest_start(&b, VPD_A_POOL_STATS);
		vpd_put_str(&b, VPD_A_POOL, i ? "b" : "a");
		vpd_put_u64(&b, VPD_A_CLAIMS, i ? 0 : 3);
		vpd_put_u64(&b, VPD_A_CLAIMS_REFUSED, i ? 0 : 1);
		vpd_put_u64(&b, VPD_A_RELEASES, i ? 0 : 1);
		vpd_put_u64(&b, VPD_A_RELEASES_GONE, i ? 0 : 1);
		vpd_hist_put(&b, VPD_A_CLAIM_HIST, i ? &none : claim_hist);
		vpd_hist_put(&b, VPD_A_RELEASE_HIST, &none);
		vpd_nest_end(&b);
	}
	vpd_nest_start(&b, VPD_A_CONNS);
	vpd_put_u32(&b, VPD_A_UID, 0);
	vpd_put_u32(&b, VPD_A_COUNT, 1);
	vpd_nest_end(&b);
	bytes = vpd_builder_finish(&b);
	m = vpd_msg_parse(bytes, &err);
	g_assert_no_error(err);
	return m;
}

static char *format(const struct vpd_msg *m)
{
	g_autoptr(GError) err = NULL;
	GString *out = g_string_new(NULL);

	g_assert_true(vpd_metrics_format(m, out, &err));
	g_assert_no_error(err);
	return g_string_free(out, false);
}

static void test_escape(void)
{
	g_autoptr(GString) out = g_string_new(NULL);
	struct vpd_prom p;
	const char *labels[] = { "owner", "a\\b\"c\nd\xc3\xa9", "pool", "", NULL };

	vpd_prom_escape_label(out, "x\\\"\n\\n");
	g_assert_cmpstr(out->str, ==, "x\\\\\\\"\\n\\\\n");
	g_string_truncate(out, 0);
	vpd_prom_init(&p, out);
	g_assert_true(vpd_prom_family(&p, "m", "gauge", "back\\slash\nand \"quotes\""));
	vpd_prom_u64(&p, "", labels, 7);
	vpd_prom_clear(&p);
	/* HELP escapes \ and newline, not quotes; label values all three */
	g_assert_cmpstr(out->str, ==,
			"# HELP m back\\\\slash\\nand \"quotes\"\n"
			"# TYPE m gauge\n"
			"m{owner=\"a\\\\b\\\"c\\nd\xc3\xa9\",pool=\"\"} 7\n");
}

static void test_escape_in_reply(void)
{
	struct vpd_hist h = { 0 };
	g_autoptr(vpd_msg) m = reply("p0@vm \"x\"\\\nend", &h, true);
	g_autofree char *text = format(m);
	g_auto(GStrv) lines = NULL;

	g_assert_nonnull(strstr(text, "vdpa_pool_vf_info{pool=\"a\",vf=\"0\",state=\"claimed\","
				"owner=\"p0@vm \\\"x\\\"\\\\\\nend\",uid=\"64055\","
				"mac=\"02:00:00:00:00:10\",vlan=\"100\",port=\"eni0np1pf0vf0\"} 1\n"));
	/* no raw newline inside any sample: every line is a comment or a sample */
	lines = g_strsplit(text, "\n", -1);
	for (char **l = lines; *l; l++)
		g_assert_true(!**l || **l == '#' || g_str_has_prefix(*l, "vdpa_pool_"));
}

static void test_seconds(void)
{
	static const struct { uint64_t ns; const char *s; } cases[] = {
		{ 0, "0" }, { 50000, "0.00005" }, { 2500000000u, "2.5" }, { 10000000000ull, "10" },
		{ 1, "0.000000001" }, { 123456789012ull, "123.456789012" },
	};

	for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
		g_autoptr(GString) out = g_string_new(NULL);

		vpd_prom_seconds(out, cases[i].ns);
		g_assert_cmpstr(out->str, ==, cases[i].s);
	}
}

static void test_histogram(void)
{
	static const uint64_t obs[] = { 40000, 50000, 50001, 3000000, 3000000, 20000000000ull };
	struct vpd_hist h = { 0 };
	g_autoptr(vpd_msg) m = NULL;
	g_autofree char *text = NULL;
	g_auto(GStrv) lines = NULL;
	uint64_t last = 0, sum = 0;
	unsigned buckets = 0;

	for (unsigned i = 0; i < G_N_ELEMENTS(obs); i++) {
		vpd_hist_observe(&h, obs[i]);
		sum += obs[i];
	}
	g_assert_cmpuint(h.count, ==, 6);
	g_assert_cmpuint(h.sum_ns, ==, sum);
	g_assert_cmpuint(h.bucket[0], ==, 2);   /* <= 50 us: the bound is in it */
	g_assert_cmpuint(h.bucket[1], ==, 1);
	m = reply("vm", &h, true);
	text = format(m);
	lines = g_strsplit(text, "\n", -1);
	for (char **l = lines; *l; l++) {
		const char *pre = "vdpa_pool_claim_duration_seconds_bucket{pool=\"a\",le=\"";
		uint64_t v;

		if (!g_str_has_prefix(*l, pre))
			continue;
		v = g_ascii_strtoull(strrchr(*l, ' ') + 1, NULL, 10);
		g_assert_cmpuint(v, >=, last);          /* cumulative */
		last = v;
		buckets++;
	}
	g_assert_cmpuint(buckets, ==, VPD_HIST_BUCKETS + 1);
	g_assert_nonnull(strstr(text, "vdpa_pool_claim_duration_seconds_bucket{pool=\"a\","
				"le=\"0.00005\"} 2\n"));
	g_assert_nonnull(strstr(text, "vdpa_pool_claim_duration_seconds_bucket{pool=\"a\","
				"le=\"0.0001\"} 3\n"));
	g_assert_nonnull(strstr(text, "vdpa_pool_claim_duration_seconds_bucket{pool=\"a\","
				"le=\"0.005\"} 5\n"));
	g_assert_nonnull(strstr(text, "vdpa_pool_claim_duration_seconds_bucket{pool=\"a\","
				"le=\"10\"} 5\n"));
	/* the one over 10 s is only in +Inf and _count */
	g_assert_nonnull(strstr(text, "vdpa_pool_claim_duration_seconds_bucket{pool=\"a\","
				"le=\"+Inf\"} 6\n"
				"vdpa_pool_claim_duration_seconds_sum{pool=\"a\"} 20.006140001\n"
				"vdpa_pool_claim_duration_seconds_count{pool=\"a\"} 6\n"));
	g_assert_cmpuint(last, ==, 6);
}

/*
 * Each family's HELP and TYPE once, before its samples, and its samples
 * together: no sample of a family after another family's lines.
 */
static void check_families(const char *text, unsigned at_least)
{
	g_autoptr(GHashTable) done = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
	g_autofree char *cur = NULL;
	unsigned families = 0;

	for (char **l = lines; *l && **l; l++) {
		g_auto(GStrv) w = g_strsplit(*l, " ", 4);

		if (g_str_has_prefix(*l, "# HELP ")) {
			g_assert_false(g_hash_table_contains(done, w[2]));
			g_hash_table_add(done, g_strdup(w[2]));
			g_free(cur);
			cur = g_strdup(w[2]);
			families++;
			g_assert_true(g_str_has_prefix(l[1], "# TYPE "));
			g_assert_true(g_str_has_prefix(l[1] + 7, cur));
			l++;
			continue;
		}
		g_assert_nonnull(cur);
		/* cur, cur_bucket, cur_sum, cur_count, then { or a space */
		g_assert_true(g_str_has_prefix(*l, cur));
		g_assert_true(strchr("{ _", (*l)[strlen(cur)]));
	}
	g_assert_cmpuint(families, >=, at_least);
}

static void test_families(void)
{
	struct vpd_hist h = { 0 };
	g_autoptr(vpd_msg) m = NULL;
	g_autofree char *text = NULL;
	g_autoptr(GString) out = g_string_new(NULL);
	struct vpd_prom p;

	vpd_hist_observe(&h, 1000000);
	m = reply("vm", &h, true);
	text = format(m);
	check_families(text, 19);
	g_assert_nonnull(strstr(text, "vdpa_pool_vf_port_tx_dropped_total{pool=\"a\",vf=\"1\","
				"port=\"eni0np1pf0vf1\"} 1005\n"));
	g_assert_nonnull(strstr(text, "vdpa_pool_vfs{pool=\"b\",state=\"quarantined\"} 1\n"));
	g_assert_nonnull(strstr(text, "vdpa_pool_claims_total{pool=\"a\",result=\"refused\"} 1\n"));
	g_assert_nonnull(strstr(text, "vdpa_pool_connections{uid=\"0\"} 1\n"));
	g_assert_nonnull(strstr(text, "vdpa_pool_ovs_stats_up 1\n"));
	/* OVS gave no policer counter: no sample, the family's lines only */
	g_assert_null(strstr(text, "vdpa_pool_vf_port_policer_dropped_total{"));

	/* the writer: a family again at once is one family; after another, refused */
	vpd_prom_init(&p, out);
	vpd_prom_family(&p, "x", "counter", "x");
	vpd_prom_u64(&p, "", NULL, 1);
	vpd_prom_family(&p, "x", "counter", "x");
	vpd_prom_u64(&p, "", NULL, 2);
	vpd_prom_family(&p, "y", "gauge", "y");
	g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_CRITICAL, "*family x begun again*");
	g_assert_false(vpd_prom_family(&p, "x", "counter", "x"));
	g_test_assert_expected_messages();
	vpd_prom_u64(&p, "", NULL, 3);
	vpd_prom_clear(&p);
	g_assert_cmpstr(out->str, ==, "# HELP x x\n# TYPE x counter\nx 1\nx 2\n"
			"# HELP y y\n# TYPE y gauge\n");
	check_families(out->str, 2);
}

static void test_without_ovs(void)
{
	struct vpd_hist h = { 0 };
	g_autoptr(vpd_msg) m = reply("vm", &h, false);
	g_autofree char *text = format(m);

	check_families(text, 11);
	g_assert_null(strstr(text, "vdpa_pool_ovs_stats_up"));
	g_assert_null(strstr(text, "vdpa_pool_vf_port_"));
}

static void test_bad_reply(void)
{
	struct vpd_hist h = { 0 };
	struct vpd_builder b;
	g_autoptr(GBytes) bytes = NULL;
	g_autoptr(vpd_msg) m = NULL;
	g_autoptr(GError) err = NULL;
	g_autoptr(GString) out = g_string_new(NULL);
	uint64_t v[2 + 2 * VPD_HIST_BUCKETS] = { 1, 5 };

	/* buckets holding more than count */
	vpd_hist_observe(&h, 1);
	for (unsigned i = 0; i < VPD_HIST_BUCKETS; i++) {
		v[2 + 2 * i] = vpd_hist_bounds_ns[i];
		v[3 + 2 * i] = 1;
	}
	vpd_builder_init(&b, VPD_MSG_REPLY, 1);
	vpd_nest_start(&b, VPD_A_POOL_STATS);
	vpd_put_str(&b, VPD_A_POOL, "a");
	vpd_put_u64s(&b, VPD_A_CLAIM_HIST, v, G_N_ELEMENTS(v));
	vpd_hist_put(&b, VPD_A_RELEASE_HIST, &h);
	vpd_nest_end(&b);
	bytes = vpd_builder_finish(&b);
	m = vpd_msg_parse(bytes, &err);
	g_assert_no_error(err);
	g_assert_false(vpd_metrics_format(m, out, &err));
	g_assert_nonnull(strstr(err->message, "does not add up"));
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/metrics/escape", test_escape);
	g_test_add_func("/metrics/escape-in-reply", test_escape_in_reply);
	g_test_add_func("/metrics/seconds", test_seconds);
	g_test_add_func("/metrics/histogram", test_histogram);
	g_test_add_func("/metrics/families", test_families);
	g_test_add_func("/metrics/without-ovs", test_without_ovs);
	g_test_add_func("/metrics/bad-reply", test_bad_reply);
	return g_test_run();
}
