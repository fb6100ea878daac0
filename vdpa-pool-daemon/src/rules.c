// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rules: a guest's offloaded rules, checked and kept (see rules.h).
 */
#include "rules.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

static bool refuse(int *errnum, char **why, int e, const char *fmt, ...) G_GNUC_PRINTF(4, 5);
static bool refuse(int *errnum, char **why, int e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	*errnum = e;
	*why = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	return false;
}

/* value/mask (n bytes each) of attribute type, if present. */
static bool get_masked(const struct vpd_msg *m, uint16_t type, unsigned n, uint8_t *value,
		       uint8_t *mask)
{
	const struct vpd_attr_view *a = vpd_msg_get(m, type);

	if (!a || a->len != 2 * n)
		return false;
	memcpy(value, a->value, n);
	memcpy(mask, a->value + n, n);
	return true;
}

/* Whether value has bits outside mask (n bytes). */
static bool outside(const uint8_t *value, const uint8_t *mask, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (value[i] & ~mask[i])
			return true;
	return false;
}

bool vpd_rule_parse(const struct vpd_msg *m, struct vpd_rule *r, int *errnum, char **why)
{
	static const struct { uint16_t type; unsigned n; size_t v, k; const char *name; } masked[] = {
		{ VPD_A_M_ETH_DST, 6, offsetof(struct vpd_rule_match, eth_dst),
		  offsetof(struct vpd_rule_match, eth_dst_mask), "M_ETH_DST" },
		{ VPD_A_M_ETH_SRC, 6, offsetof(struct vpd_rule_match, eth_src),
		  offsetof(struct vpd_rule_match, eth_src_mask), "M_ETH_SRC" },
		{ VPD_A_M_IPV4_SRC, 4, offsetof(struct vpd_rule_match, ipv4_src),
		  offsetof(struct vpd_rule_match, ipv4_src_mask), "M_IPV4_SRC" },
		{ VPD_A_M_IPV4_DST, 4, offsetof(struct vpd_rule_match, ipv4_dst),
		  offsetof(struct vpd_rule_match, ipv4_dst_mask), "M_IPV4_DST" },
		{ VPD_A_M_IPV6_SRC, 16, offsetof(struct vpd_rule_match, ipv6_src),
		  offsetof(struct vpd_rule_match, ipv6_src_mask), "M_IPV6_SRC" },
		{ VPD_A_M_IPV6_DST, 16, offsetof(struct vpd_rule_match, ipv6_dst),
		  offsetof(struct vpd_rule_match, ipv6_dst_mask), "M_IPV6_DST" },
	};
	struct vpd_rule_match *mt = &r->m;
	bool v4, v6, l4;
	uint8_t u8;
	uint16_t u16;
	uint8_t l4buf[4];

	memset(r, 0, sizeof(*r));
	r->out_handle = UINT_MAX;
	if (!vpd_attr_u32(vpd_msg_get(m, VPD_A_FLOW_ID), &r->id))
		return refuse(errnum, why, EINVAL, "FLOW_ADD needs a FLOW_ID");
	if (!vpd_attr_u16(vpd_msg_get(m, VPD_A_PRIORITY), &r->priority))
		return refuse(errnum, why, EINVAL, "FLOW_ADD needs a PRIORITY");
	if (r->priority == UINT16_MAX)
		return refuse(errnum, why, EINVAL, "PRIORITY 65535 is above the highest a rule "
			      "may have (65534)");
	if (!vpd_attr_u32(vpd_msg_get(m, VPD_A_HANDLE), &r->in_handle))
		return refuse(errnum, why, EINVAL, "FLOW_ADD needs the HANDLE of its source VF");
	if (vpd_msg_get(m, VPD_A_OUT) && !vpd_attr_u32(vpd_msg_get(m, VPD_A_OUT), &r->out_handle))
		return refuse(errnum, why, EINVAL, "OUT is not a handle");
	for (unsigned i = 0; i < G_N_ELEMENTS(masked); i++) {
		uint8_t *v = (uint8_t *)mt + masked[i].v, *k = (uint8_t *)mt + masked[i].k;

		if (!vpd_msg_get(m, masked[i].type))
			continue;
		if (!get_masked(m, masked[i].type, masked[i].n, v, k))
			return refuse(errnum, why, EINVAL, "%s has the wrong size", masked[i].name);
		if (outside(v, k, masked[i].n))
			return refuse(errnum, why, EINVAL, "%s has bits outside its mask",
				      masked[i].name);
	}
	if (vpd_msg_get(m, VPD_A_M_ETH_TYPE) &&
	    (!vpd_attr_u16(vpd_msg_get(m, VPD_A_M_ETH_TYPE), &mt->eth_type) || mt->eth_type < 0x600))
		return refuse(errnum, why, EINVAL, "M_ETH_TYPE 0x%04x is not an EtherType",
			      mt->eth_type);
	if (vpd_msg_get(m, VPD_A_M_VLAN_VID) &&
	    (!vpd_attr_u16(vpd_msg_get(m, VPD_A_M_VLAN_VID), &mt->vlan_vid) ||
	     mt->vlan_vid < 1 || mt->vlan_vid > 4094))
		return refuse(errnum, why, EINVAL, "M_VLAN_VID %u is not a VLAN id (1-4094)",
			      mt->vlan_vid);
	if (vpd_msg_get(m, VPD_A_M_IP_PROTO)) {
		if (!vpd_attr_u8(vpd_msg_get(m, VPD_A_M_IP_PROTO), &mt->ip_proto))
			return refuse(errnum, why, EINVAL, "M_IP_PROTO has the wrong size");
		mt->has_ip_proto = true;
	}
	if (vpd_msg_get(m, VPD_A_M_L4_SRC)) {
		if (!get_masked(m, VPD_A_M_L4_SRC, 2, l4buf, l4buf + 2))
			return refuse(errnum, why, EINVAL, "M_L4_SRC has the wrong size");
		mt->l4_src = l4buf[0] << 8 | l4buf[1];
		mt->l4_src_mask = l4buf[2] << 8 | l4buf[3];
		if (mt->l4_src & ~mt->l4_src_mask)
			return refuse(errnum, why, EINVAL, "M_L4_SRC has bits outside its mask");
	}
	if (vpd_msg_get(m, VPD_A_M_L4_DST)) {
		if (!get_masked(m, VPD_A_M_L4_DST, 2, l4buf, l4buf + 2))
			return refuse(errnum, why, EINVAL, "M_L4_DST has the wrong size");
		mt->l4_dst = l4buf[0] << 8 | l4buf[1];
		mt->l4_dst_mask = l4buf[2] << 8 | l4buf[3];
		if (mt->l4_dst & ~mt->l4_dst_mask)
			return refuse(errnum, why, EINVAL, "M_L4_DST has bits outside its mask");
	}
	if (vpd_msg_get(m, VPD_A_VLAN_POP)) {
		if (!vpd_attr_u8(vpd_msg_get(m, VPD_A_VLAN_POP), &u8) || u8 != 1)
			return refuse(errnum, why, EINVAL, "VLAN_POP must be 1");
		r->vlan_pop = true;
	}
	if (vpd_msg_get(m, VPD_A_VLAN_PUSH)) {
		if (!vpd_attr_u16(vpd_msg_get(m, VPD_A_VLAN_PUSH), &u16) || u16 < 1 || u16 > 4094)
			return refuse(errnum, why, EINVAL, "VLAN_PUSH %u is not a VLAN id (1-4094)",
				      u16);
		r->vlan_push = u16;
	}
	/* OVS's prerequisites (ovs-fields(7)) */
	v4 = vpd_msg_get(m, VPD_A_M_IPV4_SRC) || vpd_msg_get(m, VPD_A_M_IPV4_DST);
	v6 = vpd_msg_get(m, VPD_A_M_IPV6_SRC) || vpd_msg_get(m, VPD_A_M_IPV6_DST);
	l4 = vpd_msg_get(m, VPD_A_M_L4_SRC) || vpd_msg_get(m, VPD_A_M_L4_DST);
	if (v4 && mt->eth_type != 0x0800)
		return refuse(errnum, why, EINVAL, "an IPv4 address match needs M_ETH_TYPE 0x0800");
	if (v6 && mt->eth_type != 0x86dd)
		return refuse(errnum, why, EINVAL, "an IPv6 address match needs M_ETH_TYPE 0x86dd");
	if (mt->has_ip_proto && mt->eth_type != 0x0800 && mt->eth_type != 0x86dd)
		return refuse(errnum, why, EINVAL, "M_IP_PROTO needs M_ETH_TYPE 0x0800 or 0x86dd");
	if (l4 && (!mt->has_ip_proto || (mt->ip_proto != 6 && mt->ip_proto != 17)))
		return refuse(errnum, why, EINVAL, "a port match needs M_IP_PROTO 6 (TCP) or 17 "
			      "(UDP)");
	return true;
}

/* The VF handle h as this client may use it in a rule, or NULL (refused). */
static const struct vpd_entry *rule_vf(const struct vpd_pools *pools, uint64_t client,
				       unsigned h, const char *role, int *errnum, char **why)
{
	const struct vpd_entry *e;

	if (h >= pools->entries->len) {
		refuse(errnum, why, EPERM, "%s: no VF has handle %u", role, h);
		return NULL;
	}
	e = pools->entries->pdata[h];
	if (!e->claimed || e->client != client) {
		refuse(errnum, why, EPERM, "%s: VF %u of pool '%s' is not claimed by this client",
		       role, e->vf, e->pool->name);
		return NULL;
	}
	if (!e->pool->switchdev) {
		refuse(errnum, why, EPERM, "%s: pool '%s' offloads no rules (switchdev = no)",
		       role, e->pool->name);
		return NULL;
	}
	if (!e->rep_port) {
		refuse(errnum, why, EINVAL, "%s: VF %u of pool '%s' has no representor port", role,
		       e->vf, e->pool->name);
		return NULL;
	}
	return e;
}

bool vpd_rule_check(struct vpd_rule *r, const struct vpd_pools *pools, uint64_t client,
		    int *errnum, char **why)
{
	const struct vpd_entry *in, *out = NULL;

	if (!(in = rule_vf(pools, client, r->in_handle, "HANDLE", errnum, why)))
		return false;
	if (r->out_handle != UINT_MAX &&
	    !(out = rule_vf(pools, client, r->out_handle, "OUT", errnum, why)))
		return false;
	if (r->vlan_push && (r->vlan_push < in->pool->vlan_min || r->vlan_push > in->pool->vlan_max))
		return refuse(errnum, why, EPERM, "VLAN_PUSH %u is outside pool '%s''s range %u-%u",
			      r->vlan_push, in->pool->name, in->pool->vlan_min, in->pool->vlan_max);
	if (r->vlan_push && out && out->pool != in->pool &&
	    (r->vlan_push < out->pool->vlan_min || r->vlan_push > out->pool->vlan_max))
		return refuse(errnum, why, EPERM, "VLAN_PUSH %u is outside pool '%s''s range %u-%u",
			      r->vlan_push, out->pool->name, out->pool->vlan_min,
			      out->pool->vlan_max);
	r->pool = in->pool;
	r->in_pf = in->pool->pf;
	r->in_vf = in->vf;
	if (out) {
		r->out_pf = out->pool->pf;
		r->out_vf = out->vf;
	}
	return true;
}

bool vpd_bucket_take(struct vpd_bucket *b, unsigned rate, gint64 now)
{
	if (!b->last) {
		b->tokens = rate;
	} else if (now > b->last) {
		b->tokens += (double)(now - b->last) * rate / G_USEC_PER_SEC;
		if (b->tokens > rate)
			b->tokens = rate;
	}
	b->last = now;
	if (b->tokens < 1)
		return false;
	b->tokens -= 1;
	return true;
}

uint8_t vpd_tables_alloc(struct vpd_tables *t)
{
	for (unsigned i = VPD_RULES_TABLE_MIN; i <= VPD_RULES_TABLE_MAX; i++)
		if (!(t->used[i / 8] & 1u << (i % 8))) {
			t->used[i / 8] |= 1u << (i % 8);
			return i;
		}
	return 0;
}

void vpd_tables_free(struct vpd_tables *t, uint8_t table)
{
	t->used[table / 8] &= ~(1u << (table % 8));
}

void vpd_rules_init(struct vpd_rules *rs)
{
	memset(rs, 0, sizeof(*rs));
	rs->by_id = g_hash_table_new_full(g_int_hash, g_int_equal, NULL, g_free);
}

void vpd_rules_clear(struct vpd_rules *rs)
{
	if (rs->by_id)
		g_hash_table_unref(rs->by_id);
	rs->by_id = NULL;
}

void vpd_rules_add(struct vpd_rules *rs, const struct vpd_rule *r)
{
	struct vpd_rule *copy = g_memdup2(r, sizeof(*r));

	g_hash_table_insert(rs->by_id, &copy->id, copy);
}

unsigned vpd_rules_count_pool(const struct vpd_rules *rs, const struct vpd_pool *pool)
{
	GHashTableIter it;
	gpointer v;
	unsigned n = 0;

	g_hash_table_iter_init(&it, rs->by_id);
	while (g_hash_table_iter_next(&it, NULL, &v))
		n += ((struct vpd_rule *)v)->pool == pool;
	return n;
}

GPtrArray *vpd_rules_take_vf(struct vpd_rules *rs, unsigned handle)
{
	GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
	GHashTableIter it;
	gpointer v;

	g_hash_table_iter_init(&it, rs->by_id);
	while (g_hash_table_iter_next(&it, NULL, &v)) {
		struct vpd_rule *r = v;

		if (r->in_handle == handle || r->out_handle == handle) {
			g_hash_table_iter_steal(&it);
			g_ptr_array_add(out, r);
		}
	}
	return out;
}

struct vpd_rule_change *vpd_rule_change_new(uint8_t table)
{
	struct vpd_rule_change *c = g_new0(struct vpd_rule_change, 1);

	c->table = table;
	c->del = g_array_new(false, false, sizeof(uint32_t));
	c->add = g_ptr_array_new_with_free_func(g_free);
	return c;
}

struct vpd_rule_change *vpd_rule_change_copy(const struct vpd_rule_change *c)
{
	struct vpd_rule_change *n = vpd_rule_change_new(c->table);

	n->del_table = c->del_table;
	g_array_append_vals(n->del, c->del->data, c->del->len);
	for (unsigned i = 0; i < c->add->len; i++)
		g_ptr_array_add(n->add, g_memdup2(c->add->pdata[i], sizeof(struct vpd_rule)));
	return n;
}

void vpd_rule_change_free(struct vpd_rule_change *c)
{
	if (!c)
		return;
	g_array_unref(c->del);
	g_ptr_array_unref(c->add);
	g_free(c);
}

/* ---- what OVS holds ------------------------------------------------------ */

struct held_rule {
	struct vpd_rule r;
	uint64_t base_packets, base_bytes; /* counted before OVS last made it */
	uint64_t last_packets, last_bytes; /* OVS's counters, as last read */
};

static GHashTable *held_table_new(void)
{
	return g_hash_table_new_full(g_int_hash, g_int_equal, NULL, g_free);
}

void vpd_held_rules_init(struct vpd_held_rules *h)
{
	h->tables = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
					  (GDestroyNotify)g_hash_table_unref);
}

void vpd_held_rules_clear(struct vpd_held_rules *h)
{
	g_clear_pointer(&h->tables, g_hash_table_unref);
}

void vpd_held_rules_note(struct vpd_held_rules *h, const struct vpd_rule_change *c, bool ok)
{
	gpointer key = GUINT_TO_POINTER(c->table);
	GHashTable *t = g_hash_table_lookup(h->tables, key);

	if (c->del_table && !(ok && c->add->len)) {
		/* (the client's table went with its connection) */
		g_hash_table_remove(h->tables, key);
		return;
	}
	if (!t) {
		if (!ok || !c->add->len)
			return;
		t = held_table_new();
		g_hash_table_insert(h->tables, key, t);
	}
	if (c->del_table)
		g_hash_table_remove_all(t);
	for (unsigned i = 0; i < c->del->len; i++)
		g_hash_table_remove(t, &g_array_index(c->del, uint32_t, i));
	if (!ok)
		return;
	for (unsigned i = 0; i < c->add->len; i++) {
		struct held_rule *hr = g_new0(struct held_rule, 1);

		hr->r = *(const struct vpd_rule *)c->add->pdata[i];
		g_hash_table_replace(t, &hr->r.id, hr);
	}
}

static gint cmp_uint(gconstpointer a, gconstpointer b)
{
	guint x = GPOINTER_TO_UINT(*(const gpointer *)a), y = GPOINTER_TO_UINT(*(const gpointer *)b);

	return x < y ? -1 : x > y;
}

static gint cmp_rule_id(gconstpointer a, gconstpointer b)
{
	const struct vpd_rule *x = *(const struct vpd_rule *const *)a;
	const struct vpd_rule *y = *(const struct vpd_rule *const *)b;

	return x->id < y->id ? -1 : x->id > y->id;
}

GPtrArray *vpd_held_rules_restore(struct vpd_held_rules *h)
{
	GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)vpd_rule_change_free);
	g_autoptr(GPtrArray) tables = g_ptr_array_new();
	GHashTableIter ti;
	gpointer key;

	g_hash_table_iter_init(&ti, h->tables);
	while (g_hash_table_iter_next(&ti, &key, NULL))
		g_ptr_array_add(tables, key);
	g_ptr_array_sort(tables, cmp_uint);
	for (unsigned i = 0; i < tables->len; i++) {
		GHashTable *t = g_hash_table_lookup(h->tables, tables->pdata[i]);
		struct vpd_rule_change *c = vpd_rule_change_new(GPOINTER_TO_UINT(tables->pdata[i]));
		GHashTableIter it;
		gpointer v;

		c->del_table = true;
		g_hash_table_iter_init(&it, t);
		while (g_hash_table_iter_next(&it, NULL, &v)) {
			struct held_rule *hr = v;

			hr->base_packets += hr->last_packets;
			hr->base_bytes += hr->last_bytes;
			hr->last_packets = hr->last_bytes = 0;
			g_ptr_array_add(c->add, g_memdup2(&hr->r, sizeof(hr->r)));
		}
		g_ptr_array_sort(c->add, cmp_rule_id);
		g_ptr_array_add(out, c);
	}
	return out;
}

static struct held_rule *held_rule(const struct vpd_held_rules *h, uint8_t table, uint32_t id)
{
	GHashTable *t = g_hash_table_lookup(h->tables, GUINT_TO_POINTER(table));

	return t ? g_hash_table_lookup(t, &id) : NULL;
}

bool vpd_held_rules_count(struct vpd_held_rules *h, uint8_t table, uint32_t id,
			  uint64_t *packets, uint64_t *bytes)
{
	struct held_rule *hr = held_rule(h, table, id);

	if (!hr)
		return false;
	if (*packets < hr->last_packets || *bytes < hr->last_bytes) {
		hr->base_packets += hr->last_packets;
		hr->base_bytes += hr->last_bytes;
	}
	hr->last_packets = *packets;
	hr->last_bytes = *bytes;
	*packets += hr->base_packets;
	*bytes += hr->base_bytes;
	return true;
}

bool vpd_held_rules_counted(const struct vpd_held_rules *h, uint8_t table, uint32_t id,
			    uint64_t *packets, uint64_t *bytes)
{
	const struct held_rule *hr = held_rule(h, table, id);

	if (!hr)
		return false;
	*packets = hr->base_packets + hr->last_packets;
	*bytes = hr->base_bytes + hr->last_bytes;
	return true;
}
