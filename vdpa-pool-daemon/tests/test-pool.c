// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of the pool state machine: claims all-or-nothing, ownership,
 * authorisation, release on disconnect, attribute policy.
 */
#include "pool.h"

#include <string.h>

/* Pool b has the default MAC policy (locked), pool c lets clients choose. */
static const char *conf =
	"[pf pf0]\nnum-vfs = 10\n"
	"[pool a]\npf = pf0\nvfs = 0-3\nallow-uids = 1000\nvlans = 100-199\n"
	"mac-policy = prefix 02:aa\nmax-tx-rate = 1000\n"
	"[pool b]\npf = pf0\nvfs = 4-7\nspoof-check = no\nmac-handover = same-owner\n"
	"[pool c]\npf = pf0\nvfs = 8-9\nmac-policy = any\nmac-handover = same-owner\n";

struct fixture {
	struct vpd_config *cfg;
	struct vpd_pools *pools;
};

static void setup(struct fixture *f, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	f->cfg = vpd_config_parse(conf, "t.conf", &err);
	g_assert_no_error(err);
	f->pools = vpd_pools_new(f->cfg);
}

static void teardown(struct fixture *f, gconstpointer data)
{
	(void)data;
	vpd_pools_free(f->pools);
	vpd_config_free(f->cfg);
}

static void test_claim_release(struct fixture *f, gconstpointer data)
{
	g_autoptr(GPtrArray) got = g_ptr_array_new();
	g_autoptr(GError) err = NULL;
	struct vpd_entry *e;

	(void)data;
	g_assert_cmpuint(f->pools->entries->len, ==, 10);
	g_assert_cmpuint(vpd_pools_free_count(f->pools, "a"), ==, 4);
	g_assert_true(vpd_pools_claim(f->pools, "a", 1, 1000, 1000, 42, 0, "vm1", 3, got, &err));
	g_assert_no_error(err);
	g_assert_cmpuint(got->len, ==, 3);
	e = got->pdata[0];
	g_assert_true(e->claimed);
	g_assert_cmpuint(e->client, ==, 1);
	g_assert_cmpstr(e->owner, ==, "vm1");
	g_assert_cmpuint(e->vf, ==, 0);
	g_assert_cmpuint(vpd_pools_free_count(f->pools, "a"), ==, 1);

	/* All or nothing: 2 asked, 1 free. */
	g_assert_false(vpd_pools_claim(f->pools, "a", 2, 0, 0, 43, 0, "vm2", 2, got, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_EXHAUSTED);
	g_assert_cmpstr(err->message, ==, "pool 'a' has 1 free VF(s), 2 asked");
	g_clear_error(&err);
	g_assert_cmpuint(vpd_pools_free_count(f->pools, "a"), ==, 1);
	g_assert_cmpuint(got->len, ==, 3);

	/* Only the owner releases. */
	g_assert_false(vpd_pools_release(f->pools, e, 2, NULL, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_NOT_OWNER);
	g_clear_error(&err);
	g_assert_true(vpd_pools_release(f->pools, e, 1, NULL, &err));
	g_assert_false(e->claimed);
	g_assert_null(e->owner);
	g_assert_cmpuint(vpd_pools_free_count(f->pools, "a"), ==, 2);

	/* A client that goes away loses everything it held. */
	g_assert_cmpuint(vpd_pools_release_client(f->pools, 1), ==, 2);
	g_assert_cmpuint(vpd_pools_free_count(f->pools, "a"), ==, 4);
	g_assert_cmpuint(vpd_pools_release_client(f->pools, 1), ==, 0);
}

static void test_claim_refusals(struct fixture *f, gconstpointer data)
{
	g_autoptr(GPtrArray) got = g_ptr_array_new();
	g_autoptr(GError) err = NULL;

	(void)data;
	g_assert_false(vpd_pools_claim(f->pools, "zz", 1, 0, 0, 1, 0, "vm", 1, got, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_NO_POOL);
	g_clear_error(&err);
	g_assert_false(vpd_pools_claim(f->pools, "a", 1, 2000, 2000, 1, 0, "vm", 1, got, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_DENIED);
	g_assert_cmpstr(err->message, ==, "uid 2000 gid 2000 may not claim from pool 'a'");
	g_clear_error(&err);
	g_assert_false(vpd_pools_claim(f->pools, "b", 1, 1000, 1000, 1, 0, "vm", 1, got, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_DENIED);
	g_clear_error(&err);
	g_assert_false(vpd_pools_claim(f->pools, "a", 1, 0, 0, 1, 0, "vm", 0, got, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_EXHAUSTED);
	g_assert_cmpuint(got->len, ==, 0);
}

struct attr_case {
	const char *name;
	const char *pool;
	void (*change)(struct vpd_vf_attrs *a);
	const char *error;  /* NULL: accepted */
};

static void mac_in_prefix(struct vpd_vf_attrs *a)
{
	memcpy(a->mac, (uint8_t[]){ 0x02, 0xaa, 1, 2, 3, 4 }, 6);
}
static void mac_outside_prefix(struct vpd_vf_attrs *a)
{
	memcpy(a->mac, (uint8_t[]){ 0x02, 0xbb, 1, 2, 3, 4 }, 6);
}
static void mac_multicast(struct vpd_vf_attrs *a) { a->mac[0] = 0x03; }
static void mac_zero(struct vpd_vf_attrs *a) { memset(a->mac, 0, 6); }
static void vlan_100_qos_3(struct vpd_vf_attrs *a)
{
	mac_in_prefix(a);
	a->vlan = 100;
	a->qos = 3;
}
/* The VF keeps the daemon's MAC, outside the prefix: always its own. */
static void vlan_100_daemon_mac(struct vpd_vf_attrs *a) { a->vlan = 100; }
static void vlan_99(struct vpd_vf_attrs *a) { mac_in_prefix(a); a->vlan = 99; }
static void vlan_none(struct vpd_vf_attrs *a) { mac_in_prefix(a); a->vlan = 0; }
static void vlan_4095(struct vpd_vf_attrs *a) { mac_in_prefix(a); a->vlan = 4095; }
static void qos_8(struct vpd_vf_attrs *a) { mac_in_prefix(a); a->vlan = 100; a->qos = 8; }
static void proto_qinq(struct vpd_vf_attrs *a)
{
	mac_in_prefix(a);
	a->vlan = 150;
	a->vlan_proto = 0x88a8;
}
static void proto_bad(struct vpd_vf_attrs *a) { vlan_100_qos_3(a); a->vlan_proto = 0x0800; }
static void trust_on(struct vpd_vf_attrs *a) { vlan_100_qos_3(a); a->trust = true; }
static void spoof_off(struct vpd_vf_attrs *a) { vlan_100_qos_3(a); a->spoofchk = false; }
static void rate_ok(struct vpd_vf_attrs *a)
{
	vlan_100_qos_3(a);
	a->min_tx_rate = 100;
	a->max_tx_rate = 1000;
}
static void rate_over(struct vpd_vf_attrs *a) { vlan_100_qos_3(a); a->max_tx_rate = 1001; }
static void rate_min_above_max(struct vpd_vf_attrs *a)
{
	vlan_100_qos_3(a);
	a->min_tx_rate = 500;
	a->max_tx_rate = 400;
}
static void link_down(struct vpd_vf_attrs *a)
{
	a->link_state = VPD_LINK_DISABLE;
	a->spoofchk = false;
}
static void locked_mac_change(struct vpd_vf_attrs *a) { a->mac[5] ^= 1; }
static void unchanged(struct vpd_vf_attrs *a) { (void)a; }

static const struct attr_case attr_cases[] = {
	{ "mac-in-prefix", "a", vlan_100_qos_3, NULL },
	{ "mac-outside-prefix", "a", mac_outside_prefix, "MAC outside pool 'a''s prefix" },
	{ "prefix-daemon-mac", "a", vlan_100_daemon_mac, NULL },
	{ "mac-multicast", "a", mac_multicast, NULL /* message checked by suffix */ },
	{ "mac-zero", "a", mac_zero, "MAC 00:00:00:00:00:00 is not a unicast address" },
	{ "vlan-below-range", "a", vlan_99, "VLAN 99 is outside pool 'a''s range 100-199" },
	{ "vlan-none", "a", vlan_none, NULL /* accepted; passes nothing (test-ovs) */ },
	{ "vlan-4095", "a", vlan_4095, "VLAN 4095 is not a VLAN id (0-4094)" },
	{ "qos-8", "a", qos_8, "QoS 8 is not an 802.1p priority (0-7)" },
	{ "qinq", "a", proto_qinq, NULL },
	{ "proto-bad", "a", proto_bad, "VLAN protocol 0x0800 is neither 802.1Q nor 802.1ad" },
	{ "trust", "a", trust_on, "pool 'a' does not allow trusted VFs" },
	{ "spoof-off-enforced", "a", spoof_off, "pool 'a' enforces spoof checking" },
	{ "rate-ok", "a", rate_ok, NULL },
	{ "rate-over-limit", "a", rate_over, "tx rate above pool 'a''s limit of 1000 Mbit/s" },
	{ "rate-min-above-max", "a", rate_min_above_max, "min tx rate 500 above max tx rate 400" },
	{ "locked-unchanged", "b", unchanged, NULL },
	{ "locked-link-down-spoof-off", "b", link_down, NULL },
	{ "locked-mac-change", "b", locked_mac_change,
	  "pool 'b' does not let clients change VF MACs" },
	{ "any-mac-change", "c", mac_outside_prefix, NULL },
	{ "any-mac-multicast", "c", mac_multicast, NULL /* message checked by suffix */ },
};

static void test_attrs(struct fixture *f, gconstpointer data)
{
	const struct attr_case *c = data;
	g_autoptr(GPtrArray) got = g_ptr_array_new();
	g_autoptr(GError) err = NULL;
	struct vpd_vf_attrs a, before;
	struct vpd_entry *e;
	bool ok;

	g_assert_true(vpd_pools_claim(f->pools, c->pool, 7, 0, 0, 1, 0, "vm", 1, got, &err));
	e = got->pdata[0];
	/* a pool with a VLAN range starts its VFs untagged; untagged is valid
	 * only where the range includes 0, so start from a valid VLAN there */
	vpd_entry_default_attrs(e, &a);
	before = e->attrs;
	c->change(&a);
	ok = vpd_pools_set_attrs(f->pools, e, 7, &a, &err);
	if (!c->error && !g_str_has_suffix(c->name, "mac-multicast")) {
		g_assert_no_error(err);
		g_assert_true(ok);
		g_assert_cmpmem(&e->attrs, sizeof(a), &a, sizeof(a));
	} else {
		g_assert_false(ok);
		g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_INVALID);
		if (c->error)
			g_assert_cmpstr(err->message, ==, c->error);
		else
			g_assert_true(g_str_has_suffix(err->message, "is not a unicast address"));
		/* a refused change leaves the VF as it was */
		g_assert_cmpmem(&e->attrs, sizeof(before), &before, sizeof(before));
	}
	/* Nobody else may change it; releasing restores the defaults. */
	g_clear_error(&err);
	g_assert_false(vpd_pools_set_attrs(f->pools, e, 8, &a, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_NOT_OWNER);
	g_assert_cmpuint(vpd_pools_release_client(f->pools, 7), ==, 1);
	vpd_entry_default_attrs(e, &a);
	g_assert_cmpmem(&e->attrs, sizeof(a), &a, sizeof(a));
}

static void test_default_macs(struct fixture *f, gconstpointer data)
{
	(void)data;
	for (unsigned i = 0; i < f->pools->entries->len; i++) {
		struct vpd_entry *e = f->pools->entries->pdata[i];

		g_assert_cmphex(e->default_mac[0], ==, 0x02);
		for (unsigned j = 0; j < i; j++) {
			struct vpd_entry *o = f->pools->entries->pdata[j];

			g_assert_cmpint(memcmp(e->default_mac, o->default_mac, 6), !=, 0);
		}
	}
}

/*
 * A pool's max-tx-rate caps every claimed VF: one whose client set no rate
 * (0, also a fresh claim's default) is limited to the pool's, one whose
 * client set a lower rate to that; the attribute stays what the client set.
 */
static void test_pool_rate_caps_vfs(struct fixture *f, gconstpointer data)
{
	g_autoptr(GPtrArray) got = g_ptr_array_new();
	g_autoptr(GError) err = NULL;
	struct vpd_vf_attrs a;
	struct vpd_entry *e, *unlimited;

	(void)data;
	g_assert_true(vpd_pools_claim(f->pools, "a", 7, 0, 0, 1, 0, "vm", 1, got, &err));
	e = got->pdata[0];
	g_assert_cmpuint(e->attrs.max_tx_rate, ==, 0);
	g_assert_cmpuint(vpd_entry_max_tx_rate(e), ==, 1000);
	a = e->attrs;
	mac_in_prefix(&a);
	a.vlan = 100;
	a.max_tx_rate = 300;
	g_assert_true(vpd_pools_set_attrs(f->pools, e, 7, &a, &err));
	g_assert_cmpuint(vpd_entry_max_tx_rate(e), ==, 300);
	a.max_tx_rate = 0;
	g_assert_true(vpd_pools_set_attrs(f->pools, e, 7, &a, &err));
	g_assert_cmpuint(e->attrs.max_tx_rate, ==, 0);
	g_assert_cmpuint(vpd_entry_max_tx_rate(e), ==, 1000);
	/* Above the pool's: refused, as before. */
	a.max_tx_rate = 1001;
	g_assert_false(vpd_pools_set_attrs(f->pools, e, 7, &a, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_INVALID);
	g_assert_cmpuint(vpd_entry_max_tx_rate(e), ==, 1000);
	/* A pool without max-tx-rate: what the client set, 0 unlimited. */
	g_ptr_array_set_size(got, 0);
	g_assert_true(vpd_pools_claim(f->pools, "b", 7, 0, 0, 1, 0, "vm", 1, got, NULL));
	unlimited = got->pdata[0];
	g_assert_cmpuint(vpd_entry_max_tx_rate(unlimited), ==, 0);
}

/*
 * No two VFs the daemon manages share a MAC: a client may not take the MAC
 * another VF has (of any pool), nor the daemon's MAC of another VF, free or
 * not (that VF gets it back at its next claim).
 */
static void test_mac_in_use(struct fixture *f, gconstpointer data)
{
	static const uint8_t x[6] = { 0x02, 0, 0, 0, 0, 0x10 };
	g_autoptr(GPtrArray) got = g_ptr_array_new();
	g_autoptr(GError) err = NULL;
	struct vpd_entry *e8, *e9, *b4 = f->pools->entries->pdata[4];
	struct vpd_vf_attrs a;

	(void)data;
	g_assert_true(vpd_pools_claim(f->pools, "c", 7, 0, 0, 1, 0, "vm7", 1, got, &err));
	g_assert_true(vpd_pools_claim(f->pools, "c", 8, 0, 0, 1, 0, "vm8", 1, got, &err));
	e8 = got->pdata[0];
	e9 = got->pdata[1];
	a = e8->attrs;
	memcpy(a.mac, x, 6);
	g_assert_true(vpd_pools_set_attrs(f->pools, e8, 7, &a, &err));
	/* Setting it again (with a change of VLAN) is no conflict with itself. */
	a.vlan = 0;
	a.link_state = VPD_LINK_ENABLE;
	g_assert_true(vpd_pools_set_attrs(f->pools, e8, 7, &a, &err));

	a = e9->attrs;
	memcpy(a.mac, x, 6);
	g_assert_false(vpd_pools_set_attrs(f->pools, e9, 8, &a, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_MAC_IN_USE);
	g_assert_cmpstr(err->message, ==, "MAC 02:00:00:00:00:10 is in use by another VF");
	g_clear_error(&err);
	g_assert_cmpmem(e9->attrs.mac, 6, e9->default_mac, 6);
	/* The daemon's MAC of a free VF of another pool: reserved for it. */
	g_assert_false(b4->claimed);
	memcpy(a.mac, b4->default_mac, 6);
	g_assert_false(vpd_pools_set_attrs(f->pools, e9, 8, &a, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_MAC_IN_USE);
	g_assert_true(g_str_has_suffix(err->message, " is the daemon's MAC of another VF"));
	g_clear_error(&err);
	/* ... and of e8, which has another MAC now. */
	memcpy(a.mac, e8->default_mac, 6);
	g_assert_false(vpd_pools_set_attrs(f->pools, e9, 8, &a, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_MAC_IN_USE);
	g_clear_error(&err);
	/* Once e8 lets go of x (release: back to its own MAC), e9 may take it. */
	g_assert_true(vpd_pools_release(f->pools, e8, 7, NULL, &err));
	memcpy(a.mac, x, 6);
	g_assert_true(vpd_pools_set_attrs(f->pools, e9, 8, &a, &err));
	g_assert_no_error(err);
}

/*
 * A migration's two VFs of pool c: the source's, claimed by client 7 for
 * VM x, and the destination's, by client 8 for @dst_owner; their daemon
 * MACs as they were claimed.
 */
static void claim_src_dst(struct fixture *f, GPtrArray *got, const char *dst_owner,
			  struct vpd_entry **src, struct vpd_entry **dst, uint8_t src_mac[6],
			  uint8_t dst_mac[6])
{
	g_autoptr(GError) err = NULL;

	g_assert_true(vpd_pools_claim(f->pools, "c", 7, 0, 0, 1, 0, "p0@vm-x", 1, got, &err));
	g_assert_true(vpd_pools_claim(f->pools, "c", 8, 0, 0, 2, 0, dst_owner, 1, got, &err));
	g_assert_no_error(err);
	*src = got->pdata[0];
	*dst = got->pdata[1];
	memcpy(src_mac, (*src)->default_mac, 6);
	memcpy(dst_mac, (*dst)->default_mac, 6);
}

/*
 * A VM's VF may take the MAC of another VF claimed by the same uid under
 * the same owner name (a migration: the destination's VF takes the MAC
 * the guest had on the source's); another owner name may not.  Once the
 * source lets its VF go, the hand-over is complete: the destination's VF
 * takes the source's daemon MAC for its own, so the guest may set it back
 * (SR-IOV CNI's DEL does), and the source's VF, with the destination's
 * daemon MAC, is offered again at once.
 */
static void test_mac_passes_within_vm(struct fixture *f, gconstpointer data)
{
	g_autoptr(GPtrArray) got = g_ptr_array_new();
	g_autoptr(GError) err = NULL;
	struct vpd_entry *src, *dst, *heir = NULL;
	uint8_t src_mac[6], dst_mac[6];
	struct vpd_vf_attrs a;

	(void)data;
	claim_src_dst(f, got, "p0@vm-y", &src, &dst, src_mac, dst_mac);
	a = dst->attrs;
	memcpy(a.mac, src->default_mac, 6);
	/* another VM's: refused */
	g_assert_false(vpd_pools_set_attrs(f->pools, dst, 8, &a, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_MAC_IN_USE);
	g_clear_error(&err);
	g_assert_cmpuint(dst->mac_from, ==, 0);
	/* the same VM's (its destination claims under the source's name) */
	g_assert_true(vpd_pools_release(f->pools, dst, 8, &heir, &err));
	g_assert_null(heir);
	g_ptr_array_set_size(got, 1);
	g_assert_true(vpd_pools_claim(f->pools, "c", 8, 0, 0, 2, 0, "p0@vm-x", 1, got, &err));
	g_assert_true(got->pdata[1] == dst);
	g_assert_true(vpd_pools_set_attrs(f->pools, dst, 8, &a, &err));
	g_assert_no_error(err);
	g_assert_cmpmem(dst->attrs.mac, 6, src_mac, 6);
	g_assert_cmpuint(dst->mac_from, ==, src->handle + 1);
	/* (a later change of the destination's VF keeps the MAC it took) */
	a.vlan = 0;
	a.link_state = VPD_LINK_ENABLE;
	g_assert_true(vpd_pools_set_attrs(f->pools, dst, 8, &a, &err));
	g_assert_no_error(err);

	/* The source goes: the two VFs swap their daemon MACs. */
	g_assert_cmpuint(vpd_pools_release_client(f->pools, 7), ==, 1);
	g_assert_false(src->claimed);
	g_assert_cmpmem(dst->default_mac, 6, src_mac, 6);
	g_assert_cmpmem(src->default_mac, 6, dst_mac, 6);
	g_assert_cmpmem(src->attrs.mac, 6, dst_mac, 6);
	g_assert_cmpuint(dst->mac_from, ==, 0);
	g_assert_cmpuint(vpd_pools_free_count(f->pools, "c"), ==, 1);
	/* the guest sets another MAC, then the one it had from the daemon */
	memcpy(a.mac, (uint8_t[6]){ 0x02, 0, 0, 0, 0x0a, 0x01 }, 6);
	g_assert_true(vpd_pools_set_attrs(f->pools, dst, 8, &a, &err));
	memcpy(a.mac, src_mac, 6);
	g_assert_true(vpd_pools_set_attrs(f->pools, dst, 8, &a, &err));
	g_assert_no_error(err);
	/* the source's VF, claimed by another VM, has the other MAC */
	g_ptr_array_set_size(got, 0);
	g_assert_true(vpd_pools_claim(f->pools, "c", 9, 0, 0, 3, 0, "p0@vm-z", 1, got, &err));
	g_assert_true(got->pdata[0] == src);
	g_assert_cmpmem(src->attrs.mac, 6, dst_mac, 6);
	g_assert_cmpuint(vpd_pools_release_client(f->pools, 8), ==, 1);
	g_assert_cmpuint(vpd_pools_release_client(f->pools, 9), ==, 1);
	g_assert_cmpuint(vpd_pools_free_count(f->pools, "c"), ==, 2);
}

/*
 * A migration that fails: the destination's VF goes first.  Nothing is
 * swapped; the source's VF keeps its daemon MAC (the guest may set it
 * back), and while the source uses the guest's MAC, the destination's
 * VF is offered again (its own MAC is nobody's).
 */
static void test_failed_handover_swaps_nothing(struct fixture *f, gconstpointer data)
{
	static const uint8_t pod[6] = { 0x02, 0, 0, 0, 0x0a, 0x01 };
	g_autoptr(GPtrArray) got = g_ptr_array_new();
	g_autoptr(GError) err = NULL;
	struct vpd_entry *src, *dst, *heir = NULL;
	uint8_t src_mac[6], dst_mac[6];
	struct vpd_vf_attrs a;

	(void)data;
	claim_src_dst(f, got, "p0@vm-x", &src, &dst, src_mac, dst_mac);
	a = src->attrs;
	memcpy(a.mac, pod, 6);
	g_assert_true(vpd_pools_set_attrs(f->pools, src, 7, &a, &err));
	a = dst->attrs;
	memcpy(a.mac, pod, 6);
	g_assert_true(vpd_pools_set_attrs(f->pools, dst, 8, &a, &err));
	g_assert_cmpuint(dst->mac_from, ==, src->handle + 1);
	g_assert_true(vpd_pools_release(f->pools, dst, 8, &heir, &err));
	g_assert_null(heir);
	g_assert_cmpmem(src->default_mac, 6, src_mac, 6);
	g_assert_cmpmem(dst->default_mac, 6, dst_mac, 6);
	g_assert_cmpuint(vpd_pools_free_count(f->pools, "c"), ==, 1);
	a = src->attrs;
	memcpy(a.mac, src_mac, 6);
	g_assert_true(vpd_pools_set_attrs(f->pools, src, 7, &a, &err));
	g_assert_no_error(err);
	/* and its release later hands nothing over */
	g_assert_true(vpd_pools_release(f->pools, src, 7, &heir, &err));
	g_assert_null(heir);
	g_assert_cmpmem(src->default_mac, 6, src_mac, 6);
}

/*
 * The hand-over works where clients may not choose MACs (pool b: locked):
 * the MAC is the daemon's own for the same VM's other VF.
 */
static void test_mac_passes_within_vm_locked(struct fixture *f, gconstpointer data)
{
	g_autoptr(GPtrArray) got = g_ptr_array_new();
	g_autoptr(GError) err = NULL;
	struct vpd_entry *src, *dst, *other;
	struct vpd_vf_attrs a;

	(void)data;
	g_assert_true(vpd_pools_claim(f->pools, "b", 7, 0, 0, 1, 0, "p0@vm-x", 1, got, &err));
	g_assert_true(vpd_pools_claim(f->pools, "b", 8, 0, 0, 2, 0, "p0@vm-x", 1, got, &err));
	g_assert_true(vpd_pools_claim(f->pools, "b", 9, 0, 0, 3, 0, "p0@vm-y", 1, got, &err));
	src = got->pdata[0];
	dst = got->pdata[1];
	other = got->pdata[2];
	a = dst->attrs;
	memcpy(a.mac, src->default_mac, 6);
	g_assert_true(vpd_pools_set_attrs(f->pools, dst, 8, &a, &err));
	g_assert_no_error(err);
	/* another VM's VF may not, under the pool's lock */
	a = other->attrs;
	memcpy(a.mac, src->default_mac, 6);
	g_assert_false(vpd_pools_set_attrs(f->pools, other, 9, &a, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_INVALID);
}

/*
 * mac-handover = token: only the VFs of the client whose token a request
 * showed lend their MACs; the same uid and owner name lend nothing.
 */
static void test_mac_passes_with_token(void)
{
	static const char *text =
		"[pf pf0]\nnum-vfs = 4\n"
		"[pool t]\npf = pf0\nvfs = 0-2\nmac-policy = any\nmac-handover = token\n"
		"[pool u]\npf = pf0\nvfs = 3\nmac-policy = any\nmac-handover = token\n";
	g_autoptr(GPtrArray) got = g_ptr_array_new();
	g_autoptr(GError) err = NULL;
	struct vpd_config *cfg = vpd_config_parse(text, "t.conf", &err);
	struct vpd_pools *pools;
	struct vpd_entry *src, *dst, *other, *far;
	struct vpd_vf_attrs a;

	g_assert_no_error(err);
	g_assert_cmpint(((struct vpd_pool *)cfg->pools->pdata[0])->mac_handover, ==,
			VPD_HANDOVER_TOKEN);
	pools = vpd_pools_new(cfg);
	g_assert_true(vpd_pools_claim(pools, "t", 7, 0, 0, 1, 0, "p0@vm-x", 1, got, &err));
	g_assert_true(vpd_pools_claim(pools, "t", 8, 0, 0, 2, 0, "p0@vm-x", 1, got, &err));
	g_assert_true(vpd_pools_claim(pools, "t", 9, 0, 0, 3, 0, "p0@vm-x", 1, got, &err));
	g_assert_true(vpd_pools_claim(pools, "u", 10, 0, 0, 4, 0, "p0@vm-x", 1, got, &err));
	src = got->pdata[0];
	dst = got->pdata[1];
	other = got->pdata[2];
	far = got->pdata[3];
	a = dst->attrs;
	memcpy(a.mac, src->default_mac, 6);
	/* same uid, same owner name, no token (or its own): refused */
	g_assert_false(vpd_pools_set_attrs_from(pools, dst, 8, &a, 0, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_MAC_IN_USE);
	g_clear_error(&err);
	g_assert_false(vpd_pools_set_attrs_from(pools, dst, 8, &a, 8, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_MAC_IN_USE);
	g_clear_error(&err);
	/* another client's token lends that client's MACs only */
	g_assert_false(vpd_pools_set_attrs_from(pools, dst, 8, &a, 9, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_MAC_IN_USE);
	g_clear_error(&err);
	/* the source's: taken */
	g_assert_true(vpd_pools_set_attrs_from(pools, dst, 8, &a, 7, &err));
	g_assert_no_error(err);
	g_assert_cmpmem(dst->attrs.mac, 6, src->default_mac, 6);
	/* not across pools, token or not */
	a = far->attrs;
	memcpy(a.mac, other->default_mac, 6);
	g_assert_false(vpd_pools_set_attrs_from(pools, far, 10, &a, 9, &err));
	g_assert_error(err, VPD_POOL_ERROR, VPD_POOL_ERR_MAC_IN_USE);
	g_clear_error(&err);
	vpd_pools_free(pools);
	vpd_config_free(cfg);
}

/*
 * PF names that g_str_hash() maps alike ("pfaar" and "pfac0") would give
 * their VFs the same MACs: the daemon's MACs are distinct all the same, and
 * stable (the same file gives the same MACs).
 */
static void test_default_macs_distinct_across_pfs(void)
{
	static const char *text =
		"[pf pfaar]\nnum-vfs = 2\n[pf pfac0]\nnum-vfs = 2\n"
		"[pool p]\npf = pfaar\n[pool q]\npf = pfac0\n";
	g_autoptr(vpd_config) cfg = vpd_config_parse(text, "h.conf", NULL);
	g_autoptr(vpd_config) cfg2 = vpd_config_parse(text, "h.conf", NULL);
	g_autoptr(vpd_pools) pools = NULL;
	g_autoptr(vpd_pools) again = NULL;

	g_assert_cmpuint(g_str_hash("pfaar"), ==, g_str_hash("pfac0"));
	pools = vpd_pools_new(cfg);
	again = vpd_pools_new(cfg2);
	for (unsigned i = 0; i < pools->entries->len; i++) {
		struct vpd_entry *e = pools->entries->pdata[i];
		struct vpd_entry *same = again->entries->pdata[i];

		g_assert_cmpmem(e->default_mac, 6, same->default_mac, 6);
		g_assert_cmpmem(e->attrs.mac, 6, e->default_mac, 6);
		for (unsigned j = 0; j < i; j++) {
			struct vpd_entry *o = pools->entries->pdata[j];

			g_assert_cmpint(memcmp(e->default_mac, o->default_mac, 6), !=, 0);
		}
	}
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add("/pool/claim-release", struct fixture, NULL, setup, test_claim_release,
		   teardown);
	g_test_add("/pool/claim-refusals", struct fixture, NULL, setup, test_claim_refusals,
		   teardown);
	g_test_add("/pool/default-macs", struct fixture, NULL, setup, test_default_macs,
		   teardown);
	g_test_add("/pool/rate-cap", struct fixture, NULL, setup, test_pool_rate_caps_vfs,
		   teardown);
	g_test_add("/pool/mac-in-use", struct fixture, NULL, setup, test_mac_in_use, teardown);
	g_test_add("/pool/mac-passes-within-vm", struct fixture, NULL, setup,
		   test_mac_passes_within_vm, teardown);
	g_test_add("/pool/failed-handover-swaps-nothing", struct fixture, NULL, setup,
		   test_failed_handover_swaps_nothing, teardown);
	g_test_add("/pool/mac-passes-within-vm-locked", struct fixture, NULL, setup,
		   test_mac_passes_within_vm_locked, teardown);
	g_test_add_func("/pool/mac-passes-with-token", test_mac_passes_with_token);
	g_test_add_func("/pool/default-macs-distinct-across-pfs",
			test_default_macs_distinct_across_pfs);
	for (unsigned i = 0; i < G_N_ELEMENTS(attr_cases); i++) {
		g_autofree char *path = g_strdup_printf("/pool/attrs/%s", attr_cases[i].name);

		g_test_add(path, struct fixture, &attr_cases[i], setup, test_attrs, teardown);
	}
	return g_test_run();
}
