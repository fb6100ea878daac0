// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pool: the claim state machine and the attribute policy.
 *
 * Each VF of each configured pool is an entry, FREE or CLAIMED by one
 * client.  A claim takes n entries or none; a release, explicit or because
 * the client went away, puts the entry's attributes back to the pool's
 * defaults (its own MAC, untagged, spoof checking as configured) so the
 * next claimant starts clean.
 */
#include "pool.h"

#include <string.h>

G_DEFINE_QUARK(vpd-pool-error-quark, vpd_pool_error)

static uint64_t mac_key(const uint8_t mac[6])
{
	uint64_t k = 0;

	for (unsigned i = 0; i < 6; i++)
		k = k << 8 | mac[i];
	return k;
}

/*
 * A stable locally administered MAC per (PF, VF): 02 + 3 bytes of a hash
 * of the PF name + the VF index, so the same VF keeps its MAC across
 * daemon restarts.  PF names can hash alike: a MAC an earlier entry has
 * (in the file's order) moves on to the next 3 bytes until none has it, so
 * the daemon's MACs are distinct and as stable as the file.  taken holds
 * the MACs given so far (mac_key).
 */
static void default_mac(const struct vpd_pool *pool, unsigned vf, GHashTable *taken,
			uint8_t mac[6])
{
	guint h = g_str_hash(pool->pf->name);
	uint64_t *key = g_new(uint64_t, 1);

	for (;; h++) {
		mac[0] = 0x02;
		mac[1] = h >> 16;
		mac[2] = h >> 8;
		mac[3] = h;
		mac[4] = vf >> 8;
		mac[5] = vf;
		*key = mac_key(mac);
		if (!g_hash_table_contains(taken, key))
			break;
	}
	g_hash_table_add(taken, key);
}

void vpd_entry_default_attrs(const struct vpd_entry *e, struct vpd_vf_attrs *out)
{
	memset(out, 0, sizeof(*out));
	memcpy(out->mac, e->default_mac, 6);
	out->vlan_proto = 0x8100;
	out->spoofchk = e->pool->spoof_check;
	out->link_state = VPD_LINK_AUTO;
}

static void entry_free(gpointer data)
{
	struct vpd_entry *e = data;

	g_free(e->owner);
	g_free(e->vdpa_dev);
	g_free(e->vhost_path);
	g_free(e->rep);
	g_free(e->rep_port);
	g_free(e);
}

struct vpd_pools *vpd_pools_new(const struct vpd_config *cfg)
{
	struct vpd_pools *pools = g_new0(struct vpd_pools, 1);
	g_autoptr(GHashTable) taken = g_hash_table_new_full(g_int64_hash, g_int64_equal,
							    g_free, NULL);

	pools->entries = g_ptr_array_new_with_free_func(entry_free);
	for (unsigned i = 0; i < cfg->pools->len; i++) {
		const struct vpd_pool *pool = cfg->pools->pdata[i];

		for (unsigned vf = pool->first_vf; vf <= pool->last_vf; vf++) {
			struct vpd_entry *e = g_new0(struct vpd_entry, 1);

			e->handle = pools->entries->len;
			e->pool = pool;
			e->vf = vf;
			default_mac(pool, vf, taken, e->default_mac);
			vpd_entry_default_attrs(e, &e->attrs);
			g_ptr_array_add(pools->entries, e);
		}
	}
	return pools;
}

struct vpd_entry *vpd_entry_copy(const struct vpd_entry *e)
{
	struct vpd_entry *c = g_memdup2(e, sizeof(*e));

	c->owner = g_strdup(e->owner);
	c->vdpa_dev = g_strdup(e->vdpa_dev);
	c->vhost_path = g_strdup(e->vhost_path);
	c->rep = g_strdup(e->rep);
	c->rep_port = g_strdup(e->rep_port);
	return c;
}

struct vpd_pools *vpd_pools_copy(const GPtrArray *entries)
{
	struct vpd_pools *c = g_new0(struct vpd_pools, 1);

	c->entries = g_ptr_array_new_full(entries->len, entry_free);
	for (unsigned i = 0; i < entries->len; i++)
		g_ptr_array_add(c->entries, vpd_entry_copy(entries->pdata[i]));
	return c;
}

void vpd_pools_free(struct vpd_pools *pools)
{
	if (!pools)
		return;
	g_ptr_array_unref(pools->entries);
	g_free(pools);
}

/*
 * Whether e's own MAC is what another, claimed VF uses now: a VF of the
 * same VM took it over (a migration, see same_vm()).  Until that VF lets
 * it go, e is not offered, so that no two VFs ever pass one MAC.
 */
static bool default_mac_lent(const struct vpd_pools *pools, const struct vpd_entry *e)
{
	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *o = pools->entries->pdata[i];

		if (o != e && o->claimed && !memcmp(o->attrs.mac, e->default_mac, 6))
			return true;
	}
	return false;
}

static bool offered(const struct vpd_pools *pools, const struct vpd_entry *e)
{
	return !e->claimed && !e->quarantined && !default_mac_lent(pools, e);
}

unsigned vpd_pools_free_count(const struct vpd_pools *pools, const char *pool)
{
	unsigned n = 0;

	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];

		if (offered(pools, e) && !strcmp(e->pool->name, pool))
			n++;
	}
	return n;
}

bool vpd_pools_claim(struct vpd_pools *pools, const char *pool, uint64_t client,
		     uid_t uid, gid_t gid, pid_t pid, guint64 start_time, const char *owner,
		     unsigned n, GPtrArray *out, GError **error)
{
	const struct vpd_pool *cfg_pool = NULL;
	unsigned avail;

	for (unsigned i = 0; i < pools->entries->len && !cfg_pool; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];

		if (!strcmp(e->pool->name, pool))
			cfg_pool = e->pool;
	}
	if (!cfg_pool) {
		g_set_error(error, VPD_POOL_ERROR, VPD_POOL_ERR_NO_POOL,
			    "no pool named '%s'", pool);
		return false;
	}
	if (!vpd_pool_allows(cfg_pool, uid, gid)) {
		g_set_error(error, VPD_POOL_ERROR, VPD_POOL_ERR_DENIED,
			    "uid %u gid %u may not claim from pool '%s'",
			    (unsigned)uid, (unsigned)gid, pool);
		return false;
	}
	avail = vpd_pools_free_count(pools, pool);
	if (n == 0 || n > avail) {
		g_set_error(error, VPD_POOL_ERROR, VPD_POOL_ERR_EXHAUSTED,
			    "pool '%s' has %u free VF(s), %u asked", pool, avail, n);
		return false;
	}
	for (unsigned i = 0; i < pools->entries->len && n; i++) {
		struct vpd_entry *e = pools->entries->pdata[i];

		if (!offered(pools, e) || e->pool != cfg_pool)
			continue;
		e->claimed = true;
		e->client = client;
		e->uid = uid;
		e->pid = pid;
		e->start_time = start_time;
		e->owner = g_strdup(owner);
		g_ptr_array_add(out, e);
		n--;
	}
	return true;
}

/* e and o swap their daemon MACs; a free one's attributes follow. */
static void swap_default_macs(struct vpd_entry *e, struct vpd_entry *o)
{
	uint8_t mac[6];

	memcpy(mac, e->default_mac, 6);
	memcpy(e->default_mac, o->default_mac, 6);
	memcpy(o->default_mac, mac, 6);
	if (!e->claimed)
		vpd_entry_default_attrs(e, &e->attrs);
	if (!o->claimed)
		vpd_entry_default_attrs(o, &o->attrs);
}

/*
 * e (claimed or not) is let go: the VF that took over its MAC, if any,
 * takes its daemon MAC (see mac_from); returns that VF.  One that uses
 * its own daemon MAC (a change the datapath refused, undone) does not.
 */
static struct vpd_entry *hand_over(struct vpd_pools *pools, struct vpd_entry *e)
{
	struct vpd_entry *heir = NULL;

	for (unsigned i = 0; i < pools->entries->len; i++) {
		struct vpd_entry *o = pools->entries->pdata[i];

		if (!o->claimed || o->mac_from != e->handle + 1)
			continue;
		o->mac_from = 0;
		if (!heir && memcmp(o->attrs.mac, o->default_mac, 6)) {
			swap_default_macs(e, o);
			heir = o;
		}
	}
	return heir;
}

unsigned vpd_pools_settle_handovers(struct vpd_pools *pools)
{
	unsigned n = 0;

	for (unsigned i = 0; i < pools->entries->len; i++) {
		struct vpd_entry *o = pools->entries->pdata[i];
		struct vpd_entry *src;

		if (!o->claimed || !o->mac_from)
			continue;
		src = o->mac_from - 1 < pools->entries->len ?
		      pools->entries->pdata[o->mac_from - 1] : NULL;
		if (!src || src->pool != o->pool) {
			o->mac_from = 0;
			continue;
		}
		if (!src->claimed)
			n += hand_over(pools, src) != NULL;
	}
	return n;
}

bool vpd_pools_take_default_mac(struct vpd_pools *pools, struct vpd_entry *e,
				const uint8_t mac[6])
{
	if (!memcmp(e->default_mac, mac, 6))
		return true;
	for (unsigned i = 0; i < pools->entries->len; i++) {
		struct vpd_entry *o = pools->entries->pdata[i];

		if (o == e || o->pool != e->pool || memcmp(o->default_mac, mac, 6))
			continue;
		if (o->claimed)
			return false;
		swap_default_macs(e, o);
		return true;
	}
	return false;
}

static void entry_reset(struct vpd_entry *e)
{
	e->claimed = false;
	e->client = 0;
	e->uid = 0;
	e->pid = 0;
	e->start_time = 0;
	g_clear_pointer(&e->owner, g_free);
	g_clear_pointer(&e->rep_port, g_free);
	e->rep_ifindex = 0;
	e->flow_table = 0;
	e->mac_from = 0;
	vpd_entry_default_attrs(e, &e->attrs);
}

static bool check_owner(const struct vpd_entry *e, uint64_t client, GError **error)
{
	if (!e->claimed || e->client != client) {
		g_set_error(error, VPD_POOL_ERROR, VPD_POOL_ERR_NOT_OWNER,
			    "VF %u of pool '%s' is not claimed by this client", e->vf,
			    e->pool->name);
		return false;
	}
	return true;
}

bool vpd_pools_release(struct vpd_pools *pools, struct vpd_entry *e,
		       uint64_t client, struct vpd_entry **heir, GError **error)
{
	struct vpd_entry *h;

	if (!check_owner(e, client, error))
		return false;
	entry_reset(e);
	h = hand_over(pools, e);
	if (heir)
		*heir = h;
	return true;
}

unsigned vpd_pools_release_client(struct vpd_pools *pools, uint64_t client)
{
	unsigned n = 0;

	for (unsigned i = 0; i < pools->entries->len; i++) {
		struct vpd_entry *e = pools->entries->pdata[i];

		if (e->claimed && e->client == client) {
			entry_reset(e);
			hand_over(pools, e);
			n++;
		}
	}
	return n;
}

static bool invalid(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

static bool invalid(GError **error, const char *fmt, ...)
{
	va_list ap;
	g_autofree char *msg = NULL;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_set_error_literal(error, VPD_POOL_ERROR, VPD_POOL_ERR_INVALID, msg);
	return false;
}

/*
 * Whether mac is another entry's than e: the MAC it has while claimed, or
 * the daemon's MAC of it (which a free entry has); *current says which.
 * The zero MAC (none) is nobody's.
 */
/*
 * Whether claimed VFs e and o belong to one VM, in pools that let MACs
 * pass (mac-handover), for a request of e's client that showed the
 * hand-over token of client handover_from (0: none).  The destination's
 * VF may then take the MAC the guest had on the source's.
 * - token: o is handover_from's.  The daemon gives a connection's token
 *   to that connection only (CLAIM's REPLY); the source QEMU sends it to
 *   the destination in the migration stream, so only a client that the
 *   source's owner trusted with it can show it.
 * - same-owner: two clients of the same uid claimed them under the same
 *   owner name (a VM's QEMU names its claims after the VM's UUID or name,
 *   which a migration's destination shares with its source).  The owner
 *   name is the client's word: the pool's uids are trusted not to borrow
 *   another VM's (docs/daemon-config.md).
 */
static bool same_owner(const struct vpd_entry *e, const struct vpd_entry *o)
{
	return e->uid == o->uid && e->owner && o->owner && *e->owner &&
	       !strcmp(e->owner, o->owner);
}

static bool same_vm(const struct vpd_entry *e, const struct vpd_entry *o,
		    uint64_t handover_from)
{
	if (o->pool != e->pool || !e->claimed || !o->claimed)
		return false;
	if (handover_from == VPD_HANDOVER_RESTORED)
		return e->pool->mac_handover != VPD_HANDOVER_NO && same_owner(e, o);
	if (e->client == o->client)
		return false;
	switch (e->pool->mac_handover) {
	case VPD_HANDOVER_TOKEN:
		return handover_from && o->client == handover_from;
	case VPD_HANDOVER_SAME_OWNER:
		return same_owner(e, o);
	case VPD_HANDOVER_NO:
		break;
	}
	return false;
}

/* The VF of e's VM whose daemon's or current MAC mac is; NULL: none. */
static const struct vpd_entry *vm_mac(const struct vpd_pools *pools, const struct vpd_entry *e,
				      const uint8_t mac[6], uint64_t handover_from)
{
	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *o = pools->entries->pdata[i];

		if (o != e && same_vm(e, o, handover_from) &&
		    (!memcmp(mac, o->default_mac, 6) || !memcmp(mac, o->attrs.mac, 6)))
			return o;
	}
	return NULL;
}

static bool mac_taken(const struct vpd_pools *pools, const struct vpd_entry *e,
		      const uint8_t mac[6], uint64_t handover_from, bool *current)
{
	static const uint8_t zero[6];

	if (!memcmp(mac, zero, 6))
		return false;
	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *o = pools->entries->pdata[i];

		if (o == e || same_vm(e, o, handover_from))
			continue;
		*current = o->claimed && !memcmp(mac, o->attrs.mac, 6);
		if (*current || !memcmp(mac, o->default_mac, 6))
			return true;
	}
	return false;
}

bool vpd_pools_set_attrs(struct vpd_pools *pools, struct vpd_entry *e,
			 uint64_t client, const struct vpd_vf_attrs *a,
			 GError **error)
{
	return vpd_pools_set_attrs_from(pools, e, client, a, 0, error);
}

bool vpd_pools_set_attrs_from(struct vpd_pools *pools, struct vpd_entry *e,
			      uint64_t client, const struct vpd_vf_attrs *a,
			      uint64_t handover_from, GError **error)
{
	const struct vpd_pool *p = e->pool;
	static const uint8_t zero[6];
	const struct vpd_entry *from = NULL;
	bool keep_mac, own_mac, current;

	if (!check_owner(e, client, error))
		return false;
	if ((a->mac[0] & 1) || !memcmp(a->mac, zero, 6))
		return invalid(error, "MAC %02x:%02x:%02x:%02x:%02x:%02x is not a unicast address",
			       a->mac[0], a->mac[1], a->mac[2], a->mac[3], a->mac[4], a->mac[5]);
	/*
	 * The daemon's MAC for the VF is its own under every policy: a client
	 * may keep it, or go back to it (as SR-IOV CNI's DEL does).  So is the
	 * MAC the VF has now (a SET of other attributes keeps it), and one
	 * that another VF of the same VM has (a migration's hand-over).
	 */
	keep_mac = !memcmp(a->mac, e->attrs.mac, 6);
	own_mac = keep_mac || !memcmp(a->mac, e->default_mac, 6);
	if (!own_mac)
		own_mac = (from = vm_mac(pools, e, a->mac, handover_from)) != NULL;
	if (p->mac_policy == VPD_MAC_LOCKED && !own_mac)
		return invalid(error, "pool '%s' does not let clients change VF MACs", p->name);
	if (p->mac_policy == VPD_MAC_PREFIX && !own_mac &&
	    memcmp(a->mac, p->mac_prefix, p->mac_prefix_len))
		return invalid(error, "MAC outside pool '%s''s prefix", p->name);
	if (!keep_mac && mac_taken(pools, e, a->mac, handover_from, &current)) {
		g_set_error(error, VPD_POOL_ERROR, VPD_POOL_ERR_MAC_IN_USE,
			    "MAC %02x:%02x:%02x:%02x:%02x:%02x %s", a->mac[0], a->mac[1],
			    a->mac[2], a->mac[3], a->mac[4], a->mac[5],
			    current ? "is in use by another VF" :
			    "is the daemon's MAC of another VF");
		return false;
	}
	if (a->vlan > 4094)
		return invalid(error, "VLAN %u is not a VLAN id (0-4094)", a->vlan);
	/*
	 * VLAN 0 is "no VLAN" (ip link set ... vlan 0): always accepted, and
	 * passes traffic only where the pool has untagged (vpd_entry_passes).
	 */
	if (a->vlan && (a->vlan < p->vlan_min || a->vlan > p->vlan_max))
		return invalid(error, "VLAN %u is outside pool '%s''s range %u-%u", a->vlan,
			       p->name, p->vlan_min, p->vlan_max);
	if (a->qos > 7)
		return invalid(error, "QoS %u is not an 802.1p priority (0-7)", a->qos);
	if (a->vlan_proto != 0x8100 && a->vlan_proto != 0x88a8)
		return invalid(error, "VLAN protocol 0x%04x is neither 802.1Q nor 802.1ad",
			       a->vlan_proto);
	if (a->trust)
		return invalid(error, "pool '%s' does not allow trusted VFs", p->name);
	if (!a->spoofchk && p->spoof_check)
		return invalid(error, "pool '%s' enforces spoof checking", p->name);
	if (a->link_state > VPD_LINK_DISABLE)
		return invalid(error, "link state %d unknown", a->link_state);
	/*
	 * max_tx_rate 0 means "no limit of the client's own": the pool's
	 * applies (vpd_entry_max_tx_rate), so a client cannot lift it.
	 */
	if (p->max_tx_rate_mbps && a->max_tx_rate > p->max_tx_rate_mbps)
		return invalid(error, "tx rate above pool '%s''s limit of %llu Mbit/s", p->name,
			       (unsigned long long)p->max_tx_rate_mbps);
	if (a->max_tx_rate && a->min_tx_rate > a->max_tx_rate)
		return invalid(error, "min tx rate %u above max tx rate %u", a->min_tx_rate,
			       a->max_tx_rate);
	e->attrs = *a;
	/*
	 * A hand-over: the VF it came from is the one whose daemon MAC this
	 * one takes when that one goes (a migration's source, or the VF that
	 * took it before).  Restored claims have theirs from the state file.
	 */
	if (from && handover_from != VPD_HANDOVER_RESTORED)
		e->mac_from = from->handle + 1;
	return true;
}

bool vpd_entry_passes(const struct vpd_entry *e)
{
	return e->claimed && e->attrs.link_state != VPD_LINK_DISABLE &&
	       (e->attrs.vlan || e->pool->vlan_min == 0);
}

uint32_t vpd_entry_max_tx_rate(const struct vpd_entry *e)
{
	uint64_t cap = e->pool->max_tx_rate_mbps;
	uint32_t asked = e->attrs.max_tx_rate;

	if (cap && (!asked || asked > cap))
		return cap;
	return asked;
}
