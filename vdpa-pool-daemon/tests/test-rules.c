// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of a guest's rules (rules.h): what a FLOW_ADD may ask (each
 * refusal's errno and sentence), whose VFs it may name, the VLAN it may
 * push, the tables, the change budget, the pool options; what OVS holds
 * of them (struct vpd_held_rules): each table made again as it was after
 * ovs-vswitchd restarted, and counters that never go back.
 */
#include "rules.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

/* Pool s: switchdev, VLANs 100-199, 2 rules, 5 changes a second; pool l: legacy. */
static const char *conf =
	"[daemon]\novs-bridge = br0\n"
	"[pf pf0]\nnum-vfs = 8\n"
	"[pool s]\npf = pf0\nvfs = 0-3\nswitchdev = yes\nvlans = 100-199\n"
	"max-flows = 2\nmax-flow-changes = 5\n"
	"[pool l]\npf = pf0\nvfs = 4-7\n";

struct fixture {
	struct vpd_config *cfg;
	struct vpd_pools *pools;
};

/* VFs 0, 1 of pool s claimed by client 1 (0 with a representor port, 1
 * too), VF 2 by client 2 (with one), VF 4 of pool l by client 1. */
static void setup(struct fixture *f, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(GPtrArray) got = g_ptr_array_new();

	(void)data;
	f->cfg = vpd_config_parse(conf, "t.conf", &err);
	g_assert_no_error(err);
	f->pools = vpd_pools_new(f->cfg);
	g_assert_true(vpd_pools_claim(f->pools, "s", 1, 0, 0, 10, 0, "vm1", 2, got, &err));
	g_assert_true(vpd_pools_claim(f->pools, "s", 2, 0, 0, 20, 0, "vm2", 1, got, &err));
	g_assert_true(vpd_pools_claim(f->pools, "l", 1, 0, 0, 10, 0, "vm1", 1, got, &err));
	for (unsigned i = 0; i < 3; i++)
		((struct vpd_entry *)f->pools->entries->pdata[i])->rep_port =
			g_strdup_printf("rep%u", i);
}

static void teardown(struct fixture *f, gconstpointer data)
{
	(void)data;
	vpd_pools_free(f->pools);
	vpd_config_free(f->cfg);
}

/* A FLOW_ADD of id 7, priority 10, HANDLE in, with what add() puts in. */
static struct vpd_msg *flow_add(uint32_t in, void (*add)(struct vpd_builder *b))
{
	struct vpd_builder b;
	g_autoptr(GBytes) bytes = NULL;
	g_autoptr(GError) err = NULL;
	struct vpd_msg *m;

	vpd_builder_init(&b, VPD_MSG_FLOW_ADD, 1);
	vpd_put_u32(&b, VPD_A_FLOW_ID, 7);
	vpd_put_u16(&b, VPD_A_PRIORITY, 10);
	vpd_put_u32(&b, VPD_A_HANDLE, in);
	if (add)
		add(&b);
	bytes = vpd_builder_finish(&b);
	m = vpd_msg_parse(bytes, &err);
	g_assert_no_error(err);
	return m;
}

static void put_ipv4(struct vpd_builder *b)
{
	static const uint8_t a[8] = { 10, 0, 0, 0, 255, 0, 0, 0 };

	vpd_put_bytes(b, VPD_A_M_IPV4_DST, a, 8);
}

static void put_ipv4_typed(struct vpd_builder *b)
{
	vpd_put_u16(b, VPD_A_M_ETH_TYPE, 0x0800);
	put_ipv4(b);
}

static void put_ipv6_as_v4(struct vpd_builder *b)
{
	uint8_t a[32] = { 0 };

	vpd_put_u16(b, VPD_A_M_ETH_TYPE, 0x0800);
	vpd_put_bytes(b, VPD_A_M_IPV6_SRC, a, 32);
}

static void put_proto_no_type(struct vpd_builder *b)
{
	vpd_put_u8(b, VPD_A_M_IP_PROTO, 6);
}

static void put_port_no_proto(struct vpd_builder *b)
{
	static const uint8_t p[4] = { 0, 80, 0xff, 0xff };

	vpd_put_u16(b, VPD_A_M_ETH_TYPE, 0x0800);
	vpd_put_bytes(b, VPD_A_M_L4_DST, p, 4);
}

static void put_port_icmp(struct vpd_builder *b)
{
	static const uint8_t p[4] = { 0, 80, 0xff, 0xff };

	vpd_put_u16(b, VPD_A_M_ETH_TYPE, 0x0800);
	vpd_put_u8(b, VPD_A_M_IP_PROTO, 1);
	vpd_put_bytes(b, VPD_A_M_L4_DST, p, 4);
}

static void put_tcp80(struct vpd_builder *b)
{
	static const uint8_t p[4] = { 0, 80, 0xff, 0xff };

	vpd_put_u16(b, VPD_A_M_ETH_TYPE, 0x0800);
	vpd_put_u8(b, VPD_A_M_IP_PROTO, 6);
	vpd_put_bytes(b, VPD_A_M_L4_DST, p, 4);
}

static void put_mac_outside_mask(struct vpd_builder *b)
{
	static const uint8_t a[12] = { 2, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0 };

	vpd_put_bytes(b, VPD_A_M_ETH_DST, a, 12);
}

static void put_vid_4095(struct vpd_builder *b)
{
	vpd_put_u16(b, VPD_A_M_VLAN_VID, 4095);
}

static void put_push_150(struct vpd_builder *b)
{
	vpd_put_u8(b, VPD_A_VLAN_POP, 1);
	vpd_put_u16(b, VPD_A_VLAN_PUSH, 150);
}

static void put_push_300(struct vpd_builder *b)
{
	vpd_put_u16(b, VPD_A_VLAN_PUSH, 300);
}

static void put_pop_2(struct vpd_builder *b)
{
	vpd_put_u8(b, VPD_A_VLAN_POP, 2);
}

static void put_out_1(struct vpd_builder *b)
{
	vpd_put_u32(b, VPD_A_OUT, 1);
}

static void put_out_2(struct vpd_builder *b)
{
	vpd_put_u32(b, VPD_A_OUT, 2);
}

static void put_out_3(struct vpd_builder *b)
{
	vpd_put_u32(b, VPD_A_OUT, 3);
}

/* Each case: what it adds, its source handle, the errno (0: accepted), the sentence. */
static const struct {
	const char *name;
	uint32_t in;
	void (*add)(struct vpd_builder *b);
	int errnum;
	const char *why;
} cases[] = {
	{ "drop", 0, NULL, 0, NULL },
	{ "ipv4", 0, put_ipv4_typed, 0, NULL },
	{ "tcp", 0, put_tcp80, 0, NULL },
	{ "forward", 0, put_out_1, 0, NULL },
	{ "push-in-range", 0, put_push_150, 0, NULL },
	{ "ipv4-no-type", 0, put_ipv4, EINVAL, "an IPv4 address match needs M_ETH_TYPE 0x0800" },
	{ "ipv6-as-v4", 0, put_ipv6_as_v4, EINVAL,
	  "an IPv6 address match needs M_ETH_TYPE 0x86dd" },
	{ "proto-no-type", 0, put_proto_no_type, EINVAL,
	  "M_IP_PROTO needs M_ETH_TYPE 0x0800 or 0x86dd" },
	{ "port-no-proto", 0, put_port_no_proto, EINVAL,
	  "a port match needs M_IP_PROTO 6 (TCP) or 17 (UDP)" },
	{ "port-icmp", 0, put_port_icmp, EINVAL,
	  "a port match needs M_IP_PROTO 6 (TCP) or 17 (UDP)" },
	{ "outside-mask", 0, put_mac_outside_mask, EINVAL, "M_ETH_DST has bits outside its mask" },
	{ "vid-4095", 0, put_vid_4095, EINVAL, "M_VLAN_VID 4095 is not a VLAN id (1-4094)" },
	{ "pop-2", 0, put_pop_2, EINVAL, "VLAN_POP must be 1" },
	{ "push-out-of-range", 0, put_push_300, EPERM,
	  "VLAN_PUSH 300 is outside pool 's''s range 100-199" },
	{ "other-clients-handle", 2, NULL, EPERM,
	  "HANDLE: VF 2 of pool 's' is not claimed by this client" },
	{ "other-clients-out", 0, put_out_2, EPERM,
	  "OUT: VF 2 of pool 's' is not claimed by this client" },
	{ "free-out", 0, put_out_3, EPERM, "OUT: VF 3 of pool 's' is not claimed by this client" },
	{ "no-such-handle", 99, NULL, EPERM, "HANDLE: no VF has handle 99" },
	{ "legacy-pool", 4, NULL, EPERM, "HANDLE: pool 'l' offloads no rules (switchdev = no)" },
};

static void test_check(struct fixture *f, gconstpointer data)
{
	(void)data;
	for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
		g_autoptr(vpd_msg) m = flow_add(cases[i].in, cases[i].add);
		g_autofree char *why = NULL;
		struct vpd_rule r;
		int errnum = 0;
		bool ok;

		g_test_message("case %s", cases[i].name);
		ok = vpd_rule_parse(m, &r, &errnum, &why) &&
		     vpd_rule_check(&r, f->pools, 1, &errnum, &why);
		g_assert_cmpint(ok ? 0 : errnum, ==, cases[i].errnum);
		g_assert_cmpstr(why, ==, cases[i].why);
		if (ok) {
			/* the source port is the HANDLE's VF, whatever else came */
			g_assert_true(r.in_pf == ((struct vpd_pool *)f->cfg->pools->pdata[0])->pf);
			g_assert_cmpuint(r.in_vf, ==, 0);
			g_assert_cmpuint(r.id, ==, 7);
			g_assert_cmpuint(r.priority, ==, 10);
		}
	}
}

/* No representor port: EINVAL, as HANDLE and as OUT. */
static void test_no_rep(struct fixture *f, gconstpointer data)
{
	struct vpd_entry *e1 = f->pools->entries->pdata[1];
	g_autoptr(vpd_msg) m = flow_add(0, put_out_1);
	g_autoptr(vpd_msg) m1 = flow_add(1, NULL);
	g_autofree char *why = NULL, *why1 = NULL;
	struct vpd_rule r;
	int errnum = 0;

	(void)data;
	g_clear_pointer(&e1->rep_port, g_free);
	g_assert_true(vpd_rule_parse(m, &r, &errnum, &why));
	g_assert_false(vpd_rule_check(&r, f->pools, 1, &errnum, &why));
	g_assert_cmpint(errnum, ==, EINVAL);
	g_assert_cmpstr(why, ==, "OUT: VF 1 of pool 's' has no representor port");
	g_assert_true(vpd_rule_parse(m1, &r, &errnum, &why1));
	g_assert_false(vpd_rule_check(&r, f->pools, 1, &errnum, &why1));
	g_assert_cmpstr(why1, ==, "HANDLE: VF 1 of pool 's' has no representor port");
}

static void test_tables(void)
{
	struct vpd_tables t = { 0 };

	for (unsigned i = VPD_RULES_TABLE_MIN; i <= VPD_RULES_TABLE_MAX; i++)
		g_assert_cmpuint(vpd_tables_alloc(&t), ==, i);
	g_assert_cmpuint(vpd_tables_alloc(&t), ==, 0);   /* none free: ENOSPC */
	vpd_tables_free(&t, 17);
	g_assert_cmpuint(vpd_tables_alloc(&t), ==, 17);
	g_assert_cmpuint(vpd_tables_alloc(&t), ==, 0);
}

static void test_bucket(void)
{
	struct vpd_bucket b = { 0 };
	gint64 now = 1000000;
	unsigned n = 0;

	while (vpd_bucket_take(&b, 5, now))
		n++;
	g_assert_cmpuint(n, ==, 5);          /* a burst of one second's worth */
	g_assert_false(vpd_bucket_take(&b, 5, now + 100000));   /* 0.5 token */
	g_assert_true(vpd_bucket_take(&b, 5, now + 200000));    /* 1 token */
	g_assert_false(vpd_bucket_take(&b, 5, now + 200000));
	n = 0;
	while (vpd_bucket_take(&b, 5, now + 60 * G_USEC_PER_SEC))
		n++;
	g_assert_cmpuint(n, ==, 5);          /* never more than a second's worth */
}

static void test_rules_kept(struct fixture *f, gconstpointer data)
{
	struct vpd_rules rs;
	struct vpd_rule r = { .id = 1, .in_handle = 0, .out_handle = 1 };
	g_autoptr(GPtrArray) gone = NULL;

	(void)data;
	vpd_rules_init(&rs);
	r.pool = f->cfg->pools->pdata[0];
	vpd_rules_add(&rs, &r);
	r.id = 2;
	r.out_handle = UINT_MAX;
	vpd_rules_add(&rs, &r);
	r.id = 3;
	r.in_handle = 1;
	vpd_rules_add(&rs, &r);
	g_assert_cmpuint(vpd_rules_count_pool(&rs, f->cfg->pools->pdata[0]), ==, 3);
	g_assert_cmpuint(vpd_rules_count_pool(&rs, f->cfg->pools->pdata[1]), ==, 0);
	/* VF 1 goes: the rules naming it as OUT (1) or HANDLE (3) go */
	gone = vpd_rules_take_vf(&rs, 1);
	g_assert_cmpuint(gone->len, ==, 2);
	g_assert_cmpuint(g_hash_table_size(rs.by_id), ==, 1);
	g_assert_nonnull(g_hash_table_lookup(rs.by_id, &(uint32_t) { 2 }));
	vpd_rules_clear(&rs);
}

static void test_config(struct fixture *f, gconstpointer data)
{
	static const char *const bad[][2] = {
		{ "max-flows = 65537", "t.conf:4: max-flows must be a number of rules from 0 to "
		  "65536, not '65537'" },
		{ "max-flow-changes = 0", "t.conf:4: max-flow-changes must be changes a second "
		  "from 1 to 100000, not '0'" },
	};
	const struct vpd_pool *s = f->cfg->pools->pdata[0], *l = f->cfg->pools->pdata[1];

	(void)data;
	g_assert_cmpuint(s->max_flows, ==, 2);
	g_assert_cmpuint(s->max_flow_changes, ==, 5);
	g_assert_cmpuint(l->max_flows, ==, 1024);          /* the defaults */
	g_assert_cmpuint(l->max_flow_changes, ==, 200);
	for (unsigned i = 0; i < G_N_ELEMENTS(bad); i++) {
		g_autoptr(GError) err = NULL;
		g_autofree char *text = g_strdup_printf("[pf a]\nnum-vfs = 1\n[pool p]\n%s\npf = a\n",
							bad[i][0]);
		struct vpd_config *cfg = vpd_config_parse(text, "t.conf", &err);

		g_assert_null(cfg);
		g_assert_cmpstr(err->message, ==, bad[i][1]);
	}
}

/*
 * Random mutations of a FLOW_ADD with every attribute: whatever the codec
 * lets through, vpd_rule_parse() and vpd_rule_check() read only what is
 * there (ASan/UBSan) and either take it or give an errno and a sentence.
 */
static void put_everything(struct vpd_builder *b)
{
	static const uint8_t mac[12] = { 2, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	static const uint8_t v4[8] = { 10, 0, 0, 1, 255, 255, 255, 255 };
	static const uint8_t port[4] = { 0, 80, 0xff, 0xff };

	vpd_put_bytes(b, VPD_A_M_ETH_DST, mac, 12);
	vpd_put_bytes(b, VPD_A_M_ETH_SRC, mac, 12);
	vpd_put_u16(b, VPD_A_M_ETH_TYPE, 0x0800);
	vpd_put_u16(b, VPD_A_M_VLAN_VID, 100);
	vpd_put_u8(b, VPD_A_M_IP_PROTO, 6);
	vpd_put_bytes(b, VPD_A_M_IPV4_SRC, v4, 8);
	vpd_put_bytes(b, VPD_A_M_IPV4_DST, v4, 8);
	vpd_put_bytes(b, VPD_A_M_L4_SRC, port, 4);
	vpd_put_bytes(b, VPD_A_M_L4_DST, port, 4);
	vpd_put_u32(b, VPD_A_OUT, 1);
	vpd_put_u8(b, VPD_A_VLAN_POP, 1);
	vpd_put_u16(b, VPD_A_VLAN_PUSH, 150);
}

static void test_random(struct fixture *f, gconstpointer data)
{
	g_autoptr(vpd_msg) seed = flow_add(0, put_everything);
	gsize len;
	const uint8_t *orig = g_bytes_get_data(seed->buf, &len);
	GRand *rnd = g_rand_new_with_seed(35);
	unsigned parsed = 0, taken = 0;

	(void)data;
	for (unsigned i = 0; i < 20000; i++) {
		g_autofree uint8_t *m = g_memdup2(orig, len);
		g_autoptr(GBytes) bytes = NULL;
		g_autoptr(vpd_msg) msg = NULL;
		g_autofree char *why = NULL;
		struct vpd_rule r;
		int errnum = 0;

		for (unsigned k = g_rand_int_range(rnd, 1, 4); k; k--)
			m[g_rand_int_range(rnd, VPD_HEADER_SIZE, len)] = g_rand_int(rnd);
		bytes = g_bytes_new(m, len);
		msg = vpd_msg_parse(bytes, NULL);
		if (!msg)
			continue;
		parsed++;
		if (vpd_rule_parse(msg, &r, &errnum, &why) &&
		    vpd_rule_check(&r, f->pools, 1, &errnum, &why)) {
			taken++;
		} else {
			g_assert_true(errnum == EINVAL || errnum == EPERM);
			g_assert_nonnull(why);
		}
	}
	g_test_message("%u of 20000 mutations parsed, %u taken", parsed, taken);
	g_assert_cmpuint(taken, >, 0);      /* (the seed itself is taken) */
	g_rand_free(rnd);
}

/* A change of table: del_table, then ids to delete, then ids to add. */
static struct vpd_rule_change *change(uint8_t table, bool del_table, const uint32_t *del,
				      unsigned n_del, const uint32_t *add, unsigned n_add)
{
	struct vpd_rule_change *c = vpd_rule_change_new(table);

	c->del_table = del_table;
	g_array_append_vals(c->del, del, n_del);
	for (unsigned i = 0; i < n_add; i++) {
		struct vpd_rule r = { .id = add[i], .table = table, .priority = add[i] };

		g_ptr_array_add(c->add, g_memdup2(&r, sizeof(r)));
	}
	return c;
}

static void note(struct vpd_held_rules *h, struct vpd_rule_change *c, bool ok)
{
	vpd_held_rules_note(h, c, ok);
	vpd_rule_change_free(c);
}

/* The tables a restore makes: "T:id,id;" each. */
static char *restore_text(struct vpd_held_rules *h)
{
	g_autoptr(GPtrArray) tables = vpd_held_rules_restore(h);
	GString *s = g_string_new(NULL);

	for (unsigned i = 0; i < tables->len; i++) {
		const struct vpd_rule_change *c = tables->pdata[i];

		g_assert_true(c->del_table);
		g_assert_cmpuint(c->del->len, ==, 0);
		g_string_append_printf(s, "%u:", c->table);
		for (unsigned j = 0; j < c->add->len; j++) {
			const struct vpd_rule *r = c->add->pdata[j];

			g_assert_cmpuint(r->table, ==, c->table);
			g_assert_cmpuint(r->priority, ==, r->id);
			g_string_append_printf(s, "%s%u", j ? "," : "", r->id);
		}
		g_string_append_c(s, ';');
	}
	return g_string_free(s, false);
}

/* Counters as a client sees them, OVS having counted p packets of 100 bytes. */
static uint64_t seen(struct vpd_held_rules *h, uint8_t table, uint32_t id, uint64_t p)
{
	uint64_t packets = p, bytes = 100 * p;

	g_assert_true(vpd_held_rules_count(h, table, id, &packets, &bytes));
	g_assert_cmpuint(bytes, ==, 100 * packets);
	return packets;
}

/*
 * What OVS holds: committed changes, failed adds left out, failed
 * deletions counted; each table made again by a restore as it was, in
 * table order; counters that go on across restores.
 */
static void test_held(void)
{
	static const uint32_t ids123[] = { 1, 2, 3 }, id2[] = { 2 }, id4[] = { 4 }, id9[] = { 9 };
	struct vpd_held_rules h;
	g_autofree char *before = NULL, *after = NULL, *again = NULL, *gone = NULL;
	uint64_t packets, bytes;

	vpd_held_rules_init(&h);
	g_assert_false(vpd_held_rules_count(&h, 1, 1, &(uint64_t){ 0 }, &(uint64_t){ 0 }));
	note(&h, change(7, false, NULL, 0, ids123, 3), true);
	note(&h, change(1, false, NULL, 0, id9, 1), true);
	note(&h, change(7, false, NULL, 0, id4, 1), false);  /* refused: not held */
	note(&h, change(7, false, id2, 1, NULL, 0), false);  /* deleted: the server forgot it */
	note(&h, change(3, false, NULL, 0, id4, 1), false);  /* no table from a refusal */
	before = restore_text(&h);
	g_assert_cmpstr(before, ==, "1:9;7:1,3;");

	/*
	 * OVS counts 5; it restarts; a restore; OVS counts 7 (more than
	 * before the restart) before it is asked: 12
	 */
	g_assert_cmpuint(seen(&h, 7, 1, 5), ==, 5);
	after = restore_text(&h);
	g_assert_cmpstr(after, ==, before);
	g_assert_true(vpd_held_rules_counted(&h, 7, 1, &packets, &bytes));
	g_assert_cmpuint(packets, ==, 5);
	g_assert_cmpuint(bytes, ==, 500);
	g_assert_cmpuint(seen(&h, 7, 1, 7), ==, 12);
	/* twice in a row (a sync that failed after its restore) counts once */
	g_free(restore_text(&h));
	g_free(restore_text(&h));
	g_assert_cmpuint(seen(&h, 7, 1, 1), ==, 13);
	/* OVS's counter went back without a restore: never less than before */
	g_assert_cmpuint(seen(&h, 7, 1, 10), ==, 22);
	g_assert_cmpuint(seen(&h, 7, 1, 3), ==, 25);
	/* another rule's counters are its own */
	g_assert_cmpuint(seen(&h, 7, 3, 1), ==, 1);

	/* deleted and added again: a new rule, counting from 0 */
	note(&h, change(7, false, ids123, 1, NULL, 0), true);
	note(&h, change(7, false, NULL, 0, ids123, 1), true);
	g_assert_cmpuint(seen(&h, 7, 1, 0), ==, 0);
	/* a table cleared (its client closed): gone, even if OVS failed */
	note(&h, change(1, true, NULL, 0, NULL, 0), false);
	gone = restore_text(&h);
	g_assert_cmpstr(gone, ==, "7:1,3;");
	g_assert_false(vpd_held_rules_counted(&h, 1, 9, &packets, &bytes));
	/* a table whose rules were all deleted is still made (it has miss flows) */
	note(&h, change(7, false, ids123, 3, NULL, 0), true);
	again = restore_text(&h);
	g_assert_cmpstr(again, ==, "7:;");
	vpd_held_rules_clear(&h);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add("/rules/check", struct fixture, NULL, setup, test_check, teardown);
	g_test_add("/rules/no-representor", struct fixture, NULL, setup, test_no_rep, teardown);
	g_test_add("/rules/kept", struct fixture, NULL, setup, test_rules_kept, teardown);
	g_test_add("/rules/config", struct fixture, NULL, setup, test_config, teardown);
	g_test_add("/rules/random", struct fixture, NULL, setup, test_random, teardown);
	g_test_add_func("/rules/tables", test_tables);
	g_test_add_func("/rules/bucket", test_bucket);
	g_test_add_func("/rules/held", test_held);
	return g_test_run();
}
