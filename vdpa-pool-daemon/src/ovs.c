// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ovs: the daemon's OVS side (see ovs.h): the bridge and the VFs' ports
 * kept as policy.h says, over OVSDB (ovsdb.c) and OpenFlow 1.4 (ofconn.c),
 * at start, on each VF change and after ovs-vswitchd restarts.  Requests
 * block the daemon's loop for at most VPD_OVS_TIMEOUT_MS each; a
 * connection that fails is opened again once before the request fails.
 */
#include "ovs.h"
#include "police.h"
#include "conn.h"
#include "json.h"
#include "ofconn.h"
#include "ovsdb.h"
#include "reps.h"
#include "tap.h"

#include <string.h>

/*
 * The tables below know a VF by its handle, not by its entry: what they
 * are given may be a copy of the daemon's entries (ovsworker.h).
 */
#define KEY(e) GUINT_TO_POINTER((e)->handle + 1)

struct vpd_ovs {
	const struct vpd_config *cfg;
	struct vpd_ovsdb db;
	struct vpd_ofconn of; /* the bridge's OpenFlow management socket */
	GHashTable *rows;  /* KEY -> the OVSDB update last committed for it */
	GHashTable *open;  /* KEYs of entries whose allow flow OVS holds */
	GHashTable *dirty; /* KEYs of entries whose last change failed: to do again */
	GHashTable *reps;  /* KEY -> struct rep_row: the representor port OVS may hold */
	struct vpd_held_rules held; /* the guests' rules OVS holds, made again by a sync */
	bool need_sync;    /* ovs-vswitchd came back: its flows are gone */
	bool flows_gone;   /* ... or the audit found some gone */
	unsigned ticks;    /* vpd_ovs_tick() calls, for the audit's period */
	double bridge_cfg; /* next_cfg of the bridge's change not yet applied, or 0 */
	bool started;      /* synced once: the daemon's start is over */
	bool sync_failing; /* the last vpd_ovs_tick() could not restore them */
};

/*
 * A VF's representor port as OVS may hold it: its name, and its Port
 * row's uuid when known (else looked up before it is removed).  Recorded
 * before the transaction that inserts it is sent: whatever becomes of
 * that transaction, removing the port is then not forgotten.
 */
struct rep_row {
	char *name;
	char *uuid;
};

static void rep_row_free(gpointer data)
{
	struct rep_row *r = data;

	g_free(r->name);
	g_free(r->uuid);
	g_free(r);
}

static struct rep_row *rep_row_new(const char *name, const char *uuid)
{
	struct rep_row *r = g_new0(struct rep_row, 1);

	r->name = g_strdup(name);
	r->uuid = g_strdup(uuid);
	return r;
}

/* Whether ovs-vswitchd may have forgotten the flows since the last sync. */
static bool need_sync(const struct vpd_ovs *o)
{
	return o->need_sync || o->of.reconnected;
}

static void add_mod(GPtrArray *mods, uint8_t command, const struct vpd_flow *f,
		    uint64_t cookie_mask)
{
	GByteArray *m = g_byte_array_new();

	vpd_of_flow_mod(m, 0, command, f, cookie_mask);
	g_ptr_array_add(mods, m);
}

static unsigned pf_index(const struct vpd_ovs *o, const struct vpd_pf *pf)
{
	for (unsigned i = 0; i < o->cfg->pfs->len; i++)
		if (o->cfg->pfs->pdata[i] == pf)
			return i;
	g_assert_not_reached();
}

/* ---- OVSDB rows of a VF ------------------------------------------------- */

/*
 * An OVSDB operation (RFC 7047, 5.2) begun in ops, the array of one
 * transaction's operations: {"op": op, "table": table, ... (left open for
 * its other members; op_end() closes it).
 */
static void op_begin(JsonBuilder *ops, const char *op, const char *table)
{
	json_builder_begin_object(ops);
	json_builder_set_member_name(ops, "op");
	json_builder_add_string_value(ops, op);
	json_builder_set_member_name(ops, "table");
	json_builder_add_string_value(ops, table);
}

static void op_end(JsonBuilder *ops)
{
	json_builder_end_object(ops);
}

/* "where": the row named name, or every row (name NULL). */
static void where_name(JsonBuilder *b, const char *name)
{
	json_builder_set_member_name(b, "where");
	json_builder_begin_array(b);
	if (name) {
		json_builder_begin_array(b);
		json_builder_add_string_value(b, "name");
		json_builder_add_string_value(b, "==");
		json_builder_add_string_value(b, name);
		json_builder_end_array(b);
	}
	json_builder_end_array(b);
}

/* "columns": the names, NULL-ended. */
static void columns(JsonBuilder *b, const char *const *names)
{
	json_builder_set_member_name(b, "columns");
	json_builder_begin_array(b);
	for (; *names; names++)
		json_builder_add_string_value(b, *names);
	json_builder_end_array(b);
}

/* A select of columns of the rows of table named name (NULL: all rows). */
static void op_select(JsonBuilder *ops, const char *table, const char *name,
		      const char *const *cols)
{
	op_begin(ops, "select", table);
	where_name(ops, name);
	columns(ops, cols);
	op_end(ops);
}

/* ["named-uuid", "<prefix><n>"], or ["uuid", id] when prefix is NULL. */
static void add_uuid(JsonBuilder *b, const char *prefix, unsigned n, const char *id)
{
	g_autofree char *name = prefix ? g_strdup_printf("%s%u", prefix, n) : NULL;

	json_builder_begin_array(b);
	json_builder_add_string_value(b, prefix ? "named-uuid" : "uuid");
	json_builder_add_string_value(b, prefix ? name : id);
	json_builder_end_array(b);
}

/* A mutation of the bridge's ports: insert or delete a port's uuid. */
static void mutate_ports(JsonBuilder *ops, const char *br, const char *how,
			 const char *prefix, unsigned n, const char *id)
{
	op_begin(ops, "mutate", "Bridge");
	where_name(ops, br);
	json_builder_set_member_name(ops, "mutations");
	json_builder_begin_array(ops);
	json_builder_begin_array(ops);
	json_builder_add_string_value(ops, "ports");
	json_builder_add_string_value(ops, how);
	add_uuid(ops, prefix, n, id);
	json_builder_end_array(ops);
	json_builder_end_array(ops);
	op_end(ops);
}

static JsonBuilder *ops_new(void)
{
	JsonBuilder *ops = json_builder_new();

	json_builder_begin_array(ops);
	return ops;
}

/* The operations of ops, ended (the builder stays the caller's). */
static JsonNode *ops_end(JsonBuilder *ops)
{
	json_builder_end_array(ops);
	return json_builder_get_root(ops);
}

/* The two updates (Port, then Interface) that give e's rows its state. */
static void update_ops(JsonBuilder *ops, const struct vpd_entry *e, uint32_t ofport)
{
	op_begin(ops, "update", "Port");
	where_name(ops, e->rep);
	json_builder_set_member_name(ops, "row");
	json_builder_begin_object(ops);
	vpd_vf_port_columns(ops, e);
	json_builder_end_object(ops);
	op_end(ops);
	op_begin(ops, "update", "Interface");
	where_name(ops, e->rep);
	json_builder_set_member_name(ops, "row");
	json_builder_begin_object(ops);
	vpd_vf_interface_columns(ops, e, ofport);
	json_builder_end_object(ops);
	op_end(ops);
}

/* ---- public ------------------------------------------------------------- */

struct vpd_ovs *vpd_ovs_new(const struct vpd_config *cfg, GError **error)
{
	struct vpd_ovs *o;
	const char *db_path = cfg->ovsdb + strlen("unix:");
	g_autofree char *rundir = NULL;

	if (cfg->pfs->len * VPD_OFPORT_PER_PF > 65279) {
		vpd_ovs_fail(error, G_IO_ERROR_NOT_SUPPORTED, "OVS: at most %u [pf] sections "
			     "share an OVS bridge (OpenFlow port numbers)",
			     65279 / VPD_OFPORT_PER_PF);
		return NULL;
	}
	o = g_new0(struct vpd_ovs, 1);
	o->cfg = cfg;
	o->rows = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
	o->open = g_hash_table_new(g_direct_hash, g_direct_equal);
	o->dirty = g_hash_table_new(g_direct_hash, g_direct_equal);
	o->reps = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, rep_row_free);
	vpd_held_rules_init(&o->held);
	vpd_ovsdb_init(&o->db, db_path);
	rundir = g_path_get_dirname(db_path);
	vpd_ofconn_init(&o->of, g_strdup_printf("%s/%s.mgmt", rundir, cfg->ovs_bridge),
			cfg->ovs_bridge);
	if (!vpd_ovsdb_connect(&o->db, error)) {
		vpd_ovs_free(o);
		return NULL;
	}
	return o;
}

void vpd_ovs_free(struct vpd_ovs *o)
{
	if (!o)
		return;
	vpd_ovsdb_clear(&o->db);
	vpd_ofconn_clear(&o->of);
	g_hash_table_unref(o->rows);
	g_hash_table_unref(o->open);
	g_hash_table_unref(o->dirty);
	g_hash_table_unref(o->reps);
	vpd_held_rules_clear(&o->held);
	g_free(o);
}

/* Whether a [pf] is served by OVS-DPDK (its VFs are VDUSE devices). */
static bool any_vduse(const struct vpd_config *cfg)
{
	for (unsigned i = 0; i < cfg->pfs->len; i++)
		if (((const struct vpd_pf *)cfg->pfs->pdata[i])->vduse)
			return true;
	return false;
}

/*
 * The bridge (made if missing, as ovs-vsctl add-br would) in secure mode;
 * in OVS's userspace datapath (datapath_type netdev) when VDUSE PFs need
 * OVS-DPDK.
 */
/* A row's column of string value v. */
static void set_str(JsonBuilder *b, const char *column, const char *v)
{
	json_builder_set_member_name(b, column);
	json_builder_add_string_value(b, v);
}

/* An insert of a row named name, left open for its other columns. */
static void insert_begin(JsonBuilder *ops, const char *table, const char *name)
{
	op_begin(ops, "insert", table);
	json_builder_set_member_name(ops, "row");
	json_builder_begin_object(ops);
	set_str(ops, "name", name);
}

/* ... closed, the new row known in the transaction as uuid_name. */
static void insert_end(JsonBuilder *ops, const char *uuid_name)
{
	json_builder_end_object(ops);
	set_str(ops, "uuid-name", uuid_name);
	op_end(ops);
}

/*
 * The insert of e's representor port into the bridge (Interface, Port and
 * the bridge's ports; rows named "ri<n>" and "rp<n>"): 3 operations.
 */
static void rep_insert_ops(struct vpd_ovs *o, JsonBuilder *ops, const struct vpd_entry *e,
			   unsigned n)
{
	g_autofree char *iname = g_strdup_printf("ri%u", n);
	g_autofree char *pname = g_strdup_printf("rp%u", n);

	insert_begin(ops, "Interface", e->rep_port);
	vpd_rep_interface_columns(ops, e, vpd_rep_ofport(pf_index(o, e->pool->pf), e->vf));
	insert_end(ops, iname);
	insert_begin(ops, "Port", e->rep_port);
	json_builder_set_member_name(ops, "interfaces");
	add_uuid(ops, "ri", n, NULL);
	vpd_rep_port_columns(ops, e);
	insert_end(ops, pname);
	mutate_ports(ops, o->cfg->ovs_bridge, "insert", "rp", n, NULL);
}

/* The updates that give e's representor port's rows their columns. */
static void rep_update_ops(struct vpd_ovs *o, JsonBuilder *ops, const struct vpd_entry *e)
{
	op_begin(ops, "update", "Port");
	where_name(ops, e->rep_port);
	json_builder_set_member_name(ops, "row");
	json_builder_begin_object(ops);
	vpd_rep_port_columns(ops, e);
	json_builder_end_object(ops);
	op_end(ops);
	op_begin(ops, "update", "Interface");
	where_name(ops, e->rep_port);
	json_builder_set_member_name(ops, "row");
	json_builder_begin_object(ops);
	vpd_rep_interface_columns(ops, e, vpd_rep_ofport(pf_index(o, e->pool->pf), e->vf));
	json_builder_end_object(ops);
	op_end(ops);
}

/*
 * A new configuration number (next_cfg += 1), and then what it is (a
 * select of next_cfg): 2 operations; wait_applied() waits for it.
 */
static void next_cfg_ops(JsonBuilder *ops)
{
	static const char *const cols[] = { "next_cfg", NULL };

	op_begin(ops, "mutate", "Open_vSwitch");
	where_name(ops, NULL);
	json_builder_set_member_name(ops, "mutations");
	json_builder_begin_array(ops);
	json_builder_begin_array(ops);
	json_builder_add_string_value(ops, "next_cfg");
	json_builder_add_string_value(ops, "+=");
	json_builder_add_int_value(ops, 1);
	json_builder_end_array(ops);
	json_builder_end_array(ops);
	op_end(ops);
	op_select(ops, "Open_vSwitch", NULL, cols);
}

/* Until ovs-vswitchd has applied OVSDB's configuration number cfg. */
static bool wait_applied(struct vpd_ovs *o, double cfg, GError **error)
{
	static const char *const cols[] = { "cur_cfg", NULL };
	gint64 deadline = g_get_monotonic_time() + VPD_OVS_TIMEOUT_MS * 1000ll;
	g_autoptr(JsonBuilder) ops = ops_new();
	g_autoptr(JsonNode) req = NULL;

	op_select(ops, "Open_vSwitch", NULL, cols);
	req = ops_end(ops);
	for (;;) {
		g_autoptr(vpd_json) res = vpd_ovsdb_transact(&o->db, req, error);
		const struct vpd_json *cur = vpd_json_get(vpd_json_at(vpd_json_get(
			vpd_json_at(res, 0), "rows"), 0), "cur_cfg");

		if (!res)
			return false;
		if (cur && cur->type == VPD_JSON_NUMBER && cur->num >= cfg)
			return true;
		if (g_get_monotonic_time() > deadline)
			return vpd_ovs_fail(error, G_IO_ERROR_TIMED_OUT, "OVS: ovs-vswitchd did "
					    "not apply the configuration within %d s",
					    VPD_OVS_TIMEOUT_MS / 1000);
		g_usleep(2000);
	}
}

static bool ensure_bridge(struct vpd_ovs *o, GError **error)
{
	static const char *const bridge_cols[] = {
		"name", "protocols", "datapath_type", "fail_mode", NULL
	};
	static const char *const uuid_col[] = { "_uuid", NULL };
	const char *br = o->cfg->ovs_bridge;
	bool netdev = any_vduse(o->cfg);
	g_autoptr(JsonBuilder) ops = ops_new();
	g_autoptr(JsonNode) req = NULL;
	g_autoptr(vpd_json) res = NULL;
	const struct vpd_json *rows, *cfg;
	unsigned n_ops = 0;

	op_select(ops, "Bridge", br, bridge_cols);
	op_select(ops, "Open_vSwitch", NULL, uuid_col);
	req = ops_end(ops);
	res = vpd_ovsdb_transact(&o->db, req, error);
	if (!res)
		return false;
	if (vpd_json_len(vpd_json_get(vpd_json_at(res, 1), "rows")) != 1)
		return vpd_ovs_fail(error, G_IO_ERROR_NOT_INITIALIZED,
				    "OVSDB has no Open_vSwitch row yet (ovs-vsctl init)");
	rows = vpd_json_get(vpd_json_at(res, 0), "rows");
	g_clear_object(&ops);
	ops = ops_new();
	if (vpd_json_len(rows) == 0) {
		insert_begin(ops, "Interface", br);
		set_str(ops, "type", "internal");
		insert_end(ops, "i0");
		insert_begin(ops, "Port", br);
		json_builder_set_member_name(ops, "interfaces");
		add_uuid(ops, "i", 0, NULL);
		insert_end(ops, "p0");
		insert_begin(ops, "Bridge", br);
		json_builder_set_member_name(ops, "ports");
		add_uuid(ops, "p", 0, NULL);
		set_str(ops, "fail_mode", "secure");
		set_str(ops, "datapath_type", netdev ? "netdev" : "");
		json_builder_set_member_name(ops, "protocols");
		json_builder_begin_array(ops);
		json_builder_add_string_value(ops, "set");
		json_builder_begin_array(ops);
		json_builder_add_string_value(ops, "OpenFlow10");
		json_builder_add_string_value(ops, "OpenFlow13");
		json_builder_add_string_value(ops, "OpenFlow14");
		json_builder_end_array(ops);
		json_builder_end_array(ops);
		insert_end(ops, "b0");
		op_begin(ops, "mutate", "Open_vSwitch");
		where_name(ops, NULL);
		json_builder_set_member_name(ops, "mutations");
		json_builder_begin_array(ops);
		json_builder_begin_array(ops);
		json_builder_add_string_value(ops, "bridges");
		json_builder_add_string_value(ops, "insert");
		add_uuid(ops, "b", 0, NULL);
		json_builder_end_array(ops);
		json_builder_end_array(ops);
		op_end(ops);
		n_ops = 4;
		g_message("OVS: bridge %s created", br);
	} else {
		/*
		 * The admin's bridge: secure fail mode, and OpenFlow 1.4 added
		 * when its protocols are a list without it (none listed: OVS
		 * allows 1.0 to 1.5, and the list is left alone).
		 */
		const struct vpd_json *proto = vpd_json_get(vpd_json_at(rows, 0), "protocols");
		const struct vpd_json *dp = vpd_json_get(vpd_json_at(rows, 0), "datapath_type");
		const struct vpd_json *mode = vpd_json_get(vpd_json_at(rows, 0), "fail_mode");
		const struct vpd_json *set = vpd_json_at(proto, 1);
		bool has14 = proto && proto->type == VPD_JSON_STRING &&
			     !strcmp(proto->str, "OpenFlow14");
		bool empty = proto && proto->type == VPD_JSON_ARRAY && !vpd_json_len(set);

		for (unsigned i = 0; i < vpd_json_len(set); i++) {
			const struct vpd_json *v = vpd_json_at(set, i);

			has14 |= v && v->type == VPD_JSON_STRING && !strcmp(v->str, "OpenFlow14");
		}
		if (netdev && (!dp || dp->type != VPD_JSON_STRING || strcmp(dp->str, "netdev")))
			return vpd_ovs_fail(error, G_IO_ERROR_EXISTS,
					    "OVS: bridge %s has datapath_type '%s', but "
					    "VDUSE PFs need OVS-DPDK's userspace datapath "
					    "(datapath_type=netdev)", br,
					    dp && dp->type == VPD_JSON_STRING ? dp->str : "?");
		/*
		 * (ovs-vswitchd deletes every flow of a bridge without
		 * controllers when its fail mode changes: only changed when it
		 * is not secure, and waited for below, before any flow)
		 */
		if (!mode || mode->type != VPD_JSON_STRING || strcmp(mode->str, "secure")) {
			op_begin(ops, "update", "Bridge");
			where_name(ops, br);
			json_builder_set_member_name(ops, "row");
			json_builder_begin_object(ops);
			set_str(ops, "fail_mode", "secure");
			json_builder_end_object(ops);
			op_end(ops);
			n_ops++;
			g_message("OVS: bridge %s set to fail mode secure", br);
		}
		if (!has14 && !empty) {
			op_begin(ops, "mutate", "Bridge");
			where_name(ops, br);
			json_builder_set_member_name(ops, "mutations");
			json_builder_begin_array(ops);
			json_builder_begin_array(ops);
			json_builder_add_string_value(ops, "protocols");
			json_builder_add_string_value(ops, "insert");
			json_builder_begin_array(ops);
			json_builder_add_string_value(ops, "set");
			json_builder_begin_array(ops);
			json_builder_add_string_value(ops, "OpenFlow14");
			json_builder_end_array(ops);
			json_builder_end_array(ops);
			json_builder_end_array(ops);
			json_builder_end_array(ops);
			op_end(ops);
			n_ops++;
		}
	}
	/*
	 * Then ovs-vswitchd done with it (the bridge made, with its
	 * management socket; its flows flushed) before any flow; waited for
	 * again by the next sync when it was not in time.
	 */
	if (n_ops) {
		next_cfg_ops(ops);
		g_clear_pointer(&res, vpd_json_free);
		g_clear_pointer(&req, json_node_unref);
		req = ops_end(ops);
		res = vpd_ovsdb_transact(&o->db, req, error);
		if (!res)
			return false;
		cfg = vpd_json_get(vpd_json_at(vpd_json_get(vpd_json_at(res, n_ops + 1), "rows"),
					       0), "next_cfg");
		if (!cfg || cfg->type != VPD_JSON_NUMBER)
			return vpd_ovs_fail(error, G_IO_ERROR_INVALID_DATA,
					    "OVSDB's reply has no next_cfg");
		o->bridge_cfg = cfg->num;
	}
	if (o->bridge_cfg) {
		if (!wait_applied(o, o->bridge_cfg, error))
			return false;
		o->bridge_cfg = 0;
	}
	return true;
}

/* Whether an OVSDB map (["map", [[k, v], ...]]) has key. */
static bool has_key(const struct vpd_json *map, const char *key)
{
	const struct vpd_json *pairs = vpd_json_at(map, 1);

	for (unsigned i = 0; i < vpd_json_len(pairs); i++) {
		const struct vpd_json *k = vpd_json_at(vpd_json_at(pairs, i), 0);

		if (k && k->type == VPD_JSON_STRING && !strcmp(k->str, key))
			return true;
	}
	return false;
}

/*
 * Ports of the representors of entries (all of them in one transaction):
 * inserted into the bridge when missing, else updated.  A representor
 * that is a port of another bridge is an error.
 */
static bool sync_ports(struct vpd_ovs *o, struct vpd_pools *pools, GError **error)
{
	static const char *const port_cols[] = { "name", "_uuid", "external_ids", NULL };
	static const char *const bridge_cols[] = { "ports", NULL };
	const char *br = o->cfg->ovs_bridge;
	g_autoptr(JsonBuilder) ops = ops_new();
	g_autoptr(JsonNode) req = NULL;
	g_autoptr(GHashTable) ours = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	g_autoptr(GHashTable) exists = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
							     NULL);
	g_autoptr(GHashTable) pooled = g_hash_table_new(g_str_hash, g_str_equal);
	g_autoptr(GPtrArray) stale = g_ptr_array_new_with_free_func(g_free);  /* uuids */
	g_autoptr(vpd_json) res = NULL;
	const struct vpd_json *rows, *ports;
	unsigned n_new = 0, n_ops = 0;

	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];

		g_hash_table_add(pooled, e->rep);
		/* (a representor port of a VF that has none now is stale) */
		if (e->rep_port)
			g_hash_table_add(pooled, e->rep_port);
	}

	/* Which ports exist, and which of them are the bridge's. */
	op_select(ops, "Port", NULL, port_cols);
	op_select(ops, "Bridge", br, bridge_cols);
	req = ops_end(ops);
	res = vpd_ovsdb_transact(&o->db, req, error);
	if (!res)
		return false;
	rows = vpd_json_get(vpd_json_at(res, 0), "rows");
	ports = vpd_json_get(vpd_json_at(vpd_json_get(vpd_json_at(res, 1), "rows"), 0), "ports");
	for (unsigned i = 0; i < vpd_json_len(rows); i++) {
		const struct vpd_json *row = vpd_json_at(rows, i);
		const struct vpd_json *name = vpd_json_get(row, "name");
		const struct vpd_json *uuid = vpd_json_at(vpd_json_get(row, "_uuid"), 1);
		bool in_br = false;
		/* ports: ["uuid", U] (one) or ["set", [["uuid", U], ...]] */
		const struct vpd_json *set = vpd_json_at(ports, 1);

		if (!name || name->type != VPD_JSON_STRING || !uuid || !uuid->str)
			continue;
		if (set && set->type == VPD_JSON_STRING)
			in_br = !strcmp(set->str, uuid->str);
		for (unsigned j = 0; !in_br && j < vpd_json_len(set); j++) {
			const struct vpd_json *u = vpd_json_at(vpd_json_at(set, j), 1);

			in_br = u && u->str && !strcmp(u->str, uuid->str);
		}
		g_hash_table_add(exists, g_strdup(name->str));
		if (in_br)
			g_hash_table_add(ours, g_strdup(name->str));
		/* A port of ours for a VF no longer pooled leaves the bridge. */
		if (in_br && !g_hash_table_contains(pooled, name->str) &&
		    has_key(vpd_json_get(row, "external_ids"), "vpd-pool"))
			g_ptr_array_add(stale, g_strdup(uuid->str));
	}
	g_clear_pointer(&res, vpd_json_free);

	g_clear_pointer(&req, json_node_unref);
	g_clear_object(&ops);
	ops = ops_new();
	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];
		uint32_t ofport = vpd_vf_ofport(pf_index(o, e->pool->pf), e->vf);

		if (e->rep_port && g_hash_table_contains(ours, e->rep_port)) {
			rep_update_ops(o, ops, e);
			n_ops++;
		} else if (e->rep_port && g_hash_table_contains(exists, e->rep_port)) {
			return vpd_ovs_fail(error, G_IO_ERROR_EXISTS,
					    "OVS: representor port %s of VF %u of pool '%s' is a "
					    "port of another bridge than %s", e->rep_port, e->vf,
					    e->pool->name, br);
		} else if (e->rep_port) {
			rep_insert_ops(o, ops, e, i);
			n_ops++;
		}
		n_ops++;
		if (g_hash_table_contains(ours, e->rep)) {
			update_ops(ops, e, ofport);
			continue;
		}
		if (g_hash_table_contains(exists, e->rep))
			return vpd_ovs_fail(error, G_IO_ERROR_EXISTS,
					    "OVS: representor %s of VF %u of PF %s is a "
					    "port of another bridge than %s", e->rep, e->vf,
					    e->pool->pf->name, br);
		insert_begin(ops, "Interface", e->rep);
		if (e->pool->pf->vduse) {
			/*
			 * OVS-DPDK makes the VDUSE device for a vhost-user client
			 * port on /dev/vduse/NAME.  One queue pair: VDUSE refuses
			 * the control queue that more would need.
			 */
			g_autofree char *path = g_strdup_printf("/dev/vduse/%s", e->rep);

			set_str(ops, "type", "dpdkvhostuserclient");
			json_builder_set_member_name(ops, "options");
			json_builder_begin_array(ops);
			json_builder_add_string_value(ops, "map");
			json_builder_begin_array(ops);
			json_builder_begin_array(ops);
			json_builder_add_string_value(ops, "vhost-server-path");
			json_builder_add_string_value(ops, path);
			json_builder_end_array(ops);
			json_builder_begin_array(ops);
			json_builder_add_string_value(ops, "vhost-max-queue-pairs");
			json_builder_add_string_value(ops, "1");
			json_builder_end_array(ops);
			json_builder_end_array(ops);
			json_builder_end_array(ops);
		}
		vpd_vf_interface_columns(ops, e, ofport);
		{
			g_autofree char *iname = g_strdup_printf("i%u", i);
			g_autofree char *pname = g_strdup_printf("p%u", i);

			insert_end(ops, iname);
			insert_begin(ops, "Port", e->rep);
			json_builder_set_member_name(ops, "interfaces");
			add_uuid(ops, "i", i, NULL);
			vpd_vf_port_columns(ops, e);
			insert_end(ops, pname);
		}
		mutate_ports(ops, br, "insert", "p", i, NULL);
		n_new++;
	}
	for (unsigned i = 0; i < stale->len; i++, n_ops++)
		mutate_ports(ops, br, "delete", NULL, 0, stale->pdata[i]);
	if (!n_ops)
		return true;
	req = ops_end(ops);
	res = vpd_ovsdb_transact(&o->db, req, error);
	if (res && n_new)
		g_message("OVS: %u representor(s) added to bridge %s", n_new, br);
	if (res && stale->len)
		g_message("OVS: %u port(s) of VFs no longer pooled removed from bridge %s",
			  stale->len, br);
	return res != NULL;
}

/* Wait until OVS has given every representor its requested port number. */
static bool check_ofports(struct vpd_ovs *o, struct vpd_pools *pools, GError **error)
{
	static const char *const cols[] = { "name", "ofport", "error", NULL };
	gint64 deadline = g_get_monotonic_time() + VPD_OVS_TIMEOUT_MS * 1000ll;
	g_autoptr(JsonBuilder) ops = ops_new();
	g_autoptr(JsonNode) req = NULL;

	op_select(ops, "Interface", NULL, cols);
	req = ops_end(ops);
	for (;;) {
		g_autoptr(vpd_json) res = vpd_ovsdb_transact(&o->db, req, error);
		g_autoptr(GHashTable) port = g_hash_table_new(g_str_hash, g_str_equal);
		const struct vpd_json *rows = vpd_json_get(vpd_json_at(res, 0), "rows");
		const struct vpd_entry *bad = NULL;
		int got = 0;

		if (!res)
			return false;
		for (unsigned i = 0; i < vpd_json_len(rows); i++) {
			const struct vpd_json *r = vpd_json_at(rows, i);
			const struct vpd_json *n = vpd_json_get(r, "name");
			const struct vpd_json *p = vpd_json_get(r, "ofport");

			if (n && n->type == VPD_JSON_STRING)
				g_hash_table_insert(port, n->str, (gpointer)p);
		}
		for (unsigned i = 0; i < pools->entries->len && !bad; i++) {
			const struct vpd_entry *e = pools->entries->pdata[i];
			const struct vpd_json *p = g_hash_table_lookup(port, e->rep);

			got = p && p->type == VPD_JSON_NUMBER ? (int)p->num : 0;
			if (got != (int)vpd_vf_ofport(pf_index(o, e->pool->pf), e->vf))
				bad = e;
		}
		if (!bad)
			return true;
		/* A new or renumbered port takes ovs-vswitchd a moment. */
		if (g_get_monotonic_time() > deadline)
			return vpd_ovs_fail(error, got > 0 ? G_IO_ERROR_EXISTS : G_IO_ERROR_FAILED,
					    "OVS: port %s of VF %u got OpenFlow port %d, "
					    "not %u (%s)", bad->rep, bad->vf, got,
					    vpd_vf_ofport(pf_index(o, bad->pool->pf), bad->vf),
					    got < 0 ? "OVS could not open it: see its Interface error"
					    : "the number is taken on the bridge");
		g_usleep(5000);
	}
}

/*
 * At the daemon's start (the state file's claims restored, their
 * claimants still running): the representor port of a claimed VF of a
 * switchdev pool is kept when its claimant still holds its tap (a client
 * such as QEMU keeps its representor across a daemon restart); any other
 * representor port on the bridge is removed by the sync (its tap went
 * with its client's fd).
 */
static void adopt_rep_ports(struct vpd_pools *pools)
{
	for (unsigned i = 0; i < pools->entries->len; i++) {
		struct vpd_entry *e = pools->entries->pdata[i];
		g_autofree char *name = NULL;
		int ifindex = 0;

		if (!e->claimed || e->rep_port || !e->rep || !e->pool->switchdev)
			continue;
		name = vpd_rep_port_name(e->rep);
		if (!vpd_tap_held_by(name, e->pid, &ifindex))
			continue;
		g_message("VF %u of pool '%s': representor port %s kept: pid %d still holds its "
			  "tap", e->vf, e->pool->name, name, e->pid);
		e->rep_port = g_steal_pointer(&name);
		e->rep_ifindex = ifindex;
	}
}

static bool send_rules(struct vpd_ovs *o, const struct vpd_rule_change *c, GError **error);

/* The miss flows of table's VFs that pools' entries give (policy.h). */
static unsigned miss_flows(struct vpd_ovs *o, const struct vpd_pools *pools, uint8_t table)
{
	unsigned n_miss = 0;

	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];
		struct vpd_flow f[VPD_VF_MAX_FLOWS];
		unsigned n;

		if (e->flow_table != table)
			continue;
		n = vpd_vf_flows(e, pf_index(o, e->pool->pf), f);
		for (unsigned j = 0; j < n; j++)
			n_miss += f[j].table == table;
	}
	return n_miss;
}

/*
 * Each client's table of rules as the daemon made it (none at the
 * daemon's start), after ovs-vswitchd forgot it: one bundle per table,
 * the table's miss flows being in the VFs' flows already.  Fails only
 * when OVS is not there (the sync is then tried again); a table OVS
 * refuses is left out, with a warning.
 */
static bool restore_rules(struct vpd_ovs *o, const struct vpd_pools *pools, GError **error)
{
	g_autoptr(GPtrArray) tables = vpd_held_rules_restore(&o->held);

	for (unsigned i = 0; i < tables->len; i++) {
		const struct vpd_rule_change *c = tables->pdata[i];
		g_autoptr(GError) err = NULL;

		if (send_rules(o, c, &err)) {
			g_message("OVS: a client's rules in table %u restored after ovs-vswitchd "
				  "came back: %u rule(s), %u miss flow(s)", c->table, c->add->len,
				  miss_flows(o, pools, c->table));
		} else if (vpd_ovs_error_is_transient(err)) {
			g_propagate_error(error, g_steal_pointer(&err));
			return false;
		} else {
			g_warning("OVS: a client's rules in table %u not restored: %s", c->table,
				  err->message);
		}
	}
	return true;
}

bool vpd_ovs_sync(struct vpd_ovs *o, struct vpd_pools *pools, GError **error)
{
	g_autoptr(GPtrArray) mods = g_ptr_array_new_with_free_func(
		(GDestroyNotify)g_byte_array_unref);
	/* (every table: the guests' rules are made again after the ports) */
	struct vpd_flow all = { .cookie = VPD_COOKIE_MAGIC, .table = VPD_OFPTT_ALL };
	struct vpd_flow others = vpd_others_flow();

	for (unsigned i = 0; i < o->cfg->pfs->len; i++)
		if (!vpd_find_reps(pools, o->cfg->pfs->pdata[i], error))
			return false;
	if (!o->started)
		adopt_rep_ports(pools);
	/*
	 * (ovs-vswitchd makes the management socket with the bridge: one
	 * not there yet, ovs-vswitchd starting, fails the sync at once, tried
	 * again a second later, so that no question waits behind it long)
	 */
	if (!ensure_bridge(o, error))
		return false;
	/*
	 * The flows first (they name the port numbers the ports will get), so
	 * that no port is ever on the bridge without its VF's flows.  All of
	 * the daemon's flows are replaced at once: claimed VFs keep passing.
	 */
	add_mod(mods, VPD_OFPFC_DELETE, &all, VPD_COOKIE_MAGIC_MASK);
	add_mod(mods, VPD_OFPFC_ADD, &others, 0);
	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];
		struct vpd_flow f[VPD_VF_MAX_FLOWS];
		unsigned n = vpd_vf_flows(e, pf_index(o, e->pool->pf), f);

		for (unsigned j = 0; j < n; j++)
			add_mod(mods, VPD_OFPFC_ADD, &f[j], 0);
	}
	if (!vpd_ofconn_bundle_checked(&o->of, mods, error) || !sync_ports(o, pools, error) ||
	    !check_ofports(o, pools, error) || !restore_rules(o, pools, error))
		return false;
	g_hash_table_remove_all(o->rows);
	g_hash_table_remove_all(o->dirty);
	/*
	 * (Representor ports' port numbers are not waited for: a tap whose
	 * client closed it is a port OVS cannot open, the client's doing.)
	 */
	g_hash_table_remove_all(o->reps);
	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];

		if (e->rep_port)
			g_hash_table_insert(o->reps, KEY(e), rep_row_new(e->rep_port, NULL));
	}
	o->need_sync = o->of.reconnected = false;
	o->started = true;
	g_message("OVS: bridge %s holds %u VF port(s) and their flows", o->cfg->ovs_bridge,
		  pools->entries->len);
	return true;
}

/* The uuid of the Port row named name (NULL, no error: there is none). */
static char *port_uuid(struct vpd_ovs *o, const char *name, GError **error)
{
	static const char *const cols[] = { "_uuid", NULL };
	g_autoptr(JsonBuilder) ops = ops_new();
	g_autoptr(JsonNode) req = NULL;
	g_autoptr(vpd_json) res = NULL;
	const struct vpd_json *u;

	op_select(ops, "Port", name, cols);
	req = ops_end(ops);
	res = vpd_ovsdb_transact(&o->db, req, error);
	if (!res)
		return NULL;
	u = vpd_json_at(vpd_json_get(vpd_json_at(vpd_json_get(vpd_json_at(res, 0), "rows"), 0),
				     "_uuid"), 1);
	return u && u->type == VPD_JSON_STRING ? g_strdup(u->str) : NULL;
}

/*
 * Whether OVS opened e's new representor port with its port number (once
 * ovs-vswitchd applied the transaction that added it).
 */
static bool check_rep_port(struct vpd_ovs *o, const struct vpd_entry *e, GError **error)
{
	static const char *const cols[] = { "ofport", "error", NULL };
	uint32_t want = vpd_rep_ofport(pf_index(o, e->pool->pf), e->vf);
	gint64 deadline = g_get_monotonic_time() + VPD_OVS_TIMEOUT_MS * 1000ll;
	g_autoptr(JsonBuilder) ops = ops_new();
	g_autoptr(JsonNode) req = NULL;

	op_select(ops, "Interface", e->rep_port, cols);
	req = ops_end(ops);
	for (;;) {
		g_autoptr(vpd_json) res = vpd_ovsdb_transact(&o->db, req, error);
		const struct vpd_json *row = vpd_json_at(vpd_json_get(vpd_json_at(res, 0), "rows"),
							 0);
		const struct vpd_json *p = vpd_json_get(row, "ofport");
		const struct vpd_json *err = vpd_json_get(row, "error");
		int got = p && p->type == VPD_JSON_NUMBER ? (int)p->num : 0;

		if (!res)
			return false;
		if (got == (int)want)
			return true;
		if (got < 0 || g_get_monotonic_time() > deadline)
			return vpd_ovs_fail(error, G_IO_ERROR_FAILED,
					    "OVS: representor port %s of VF %u got OpenFlow port "
					    "%d, not %u (%s)", e->rep_port, e->vf, got, want,
					    err && err->type == VPD_JSON_STRING ? err->str :
					    got > 0 ? "the number is taken on the bridge" :
					    "OVS could not open it");
		g_usleep(2000);
	}
}

/*
 * One VF's change: its OVSDB rows (skipped when they would not change,
 * e.g. a link state change) and its flows (one bundle).  Usually both go
 * out together and are waited for together: one round trip to OVS.  When
 * the VF's port opens (claimed, link up), OVSDB goes first and
 * ovs-vswitchd must have applied it (its VLAN leaves 4095) before the
 * allow flow comes; when it shuts (also: a representor port comes), the
 * allow flow goes first.  A representor port that comes or goes is in
 * the same transaction; one that comes must have been opened by
 * ovs-vswitchd, with its port number, before the change is done.  A
 * change that fails is kept and done again by vpd_ovs_tick().
 */
static bool apply(struct vpd_ovs *o, struct vpd_entry *e, GError **error)
{
	static const enum vpd_flow_kind gone[] = {
		VPD_FLOW_ALLOW, VPD_FLOW_REP_DENY, VPD_FLOW_TO_REP, VPD_FLOW_FROM_REP,
		VPD_FLOW_MISS,
	};
	unsigned pfi = pf_index(o, e->pool->pf);
	g_autoptr(JsonBuilder) ops = ops_new();
	g_autoptr(JsonNode) rows_ops = NULL;
	g_autoptr(JsonNode) req = NULL;
	g_autofree char *rows = NULL;
	g_autofree char *del_uuid = NULL;
	g_autoptr(vpd_json) res = NULL;
	g_autoptr(GPtrArray) mods = g_ptr_array_new_with_free_func(
		(GDestroyNotify)g_byte_array_unref);
	g_autoptr(GError) stale = NULL;
	struct vpd_flow f[VPD_VF_MAX_FLOWS];
	struct rep_row *had = g_hash_table_lookup(o->reps, KEY(e));
	bool rep_add, rep_del;
	const char *last;
	gint64 t0 = g_get_monotonic_time();
	uint32_t first = 0, commit = 0;
	unsigned n, id = 0, n_ops = 2, at_insert = 0, at_cfg = 0;
	bool db, opening, closing, need_cfg, allow = false, flows_sent = false;

	if (!e->rep)
		return vpd_ovs_fail(error, G_IO_ERROR_NOT_FOUND,
				    "VF %u of pool '%s' has no representor", e->vf, e->pool->name);
	if (had && !had->uuid) {
		/* Whether OVS holds it after all (a sync, a transaction not answered). */
		g_autoptr(GError) lookup = NULL;

		had->uuid = port_uuid(o, had->name, &lookup);
		if (lookup) {
			g_propagate_error(error, g_steal_pointer(&lookup));
			return false;
		}
		if (!had->uuid) {
			g_hash_table_remove(o->reps, KEY(e));
			had = NULL;
		}
	}
	rep_add = e->rep_port && (!had || strcmp(had->name, e->rep_port));
	rep_del = had && (!e->rep_port || strcmp(had->name, e->rep_port));
	if (rep_del)
		del_uuid = g_strdup(had->uuid);
	{
		/* the rows as they are to be: compared with the last committed */
		g_autoptr(JsonBuilder) b = ops_new();
		JsonArray *a;

		update_ops(b, e, vpd_vf_ofport(pfi, e->vf));
		rows_ops = ops_end(b);
		rows = json_to_string(rows_ops, FALSE);
		a = json_node_get_array(rows_ops);
		for (guint i = 0; i < json_array_get_length(a); i++)
			json_builder_add_value(ops, json_array_dup_element(a, i));
	}
	last = g_hash_table_lookup(o->rows, KEY(e));
	db = !last || strcmp(last, rows) || rep_add || rep_del;
	g_hash_table_remove(o->rows, KEY(e));
	/* deletion first: every flow of the VF but its deny flow */
	for (unsigned j = 0; j < G_N_ELEMENTS(gone); j++) {
		struct vpd_flow del = { .cookie = vpd_flow_cookie(gone[j], pfi, e->vf),
					.table = VPD_OFPTT_ALL };

		add_mod(mods, VPD_OFPFC_DELETE, &del, ~0ull);
	}
	n = vpd_vf_flows(e, pfi, f);
	for (unsigned j = 1; j < n; j++) {  /* f[0], the deny flow, stays */
		add_mod(mods, VPD_OFPFC_ADD, &f[j], 0);
		allow |= f[j].normal;
	}
	opening = allow && !g_hash_table_contains(o->open, KEY(e)) && db;
	closing = !allow && g_hash_table_contains(o->open, KEY(e));
	need_cfg = opening || rep_add;
	g_hash_table_remove(o->open, KEY(e));  /* unknown until committed */

	if (rep_del) {
		mutate_ports(ops, o->cfg->ovs_bridge, "delete", NULL, 0, del_uuid);
		n_ops++;
	}
	if (rep_add) {
		rep_insert_ops(o, ops, e, 0);
		at_insert = n_ops + 1;  /* the Port's insert */
		n_ops += 3;
		/* (removed later even if what becomes of this is never known) */
		g_hash_table_insert(o->reps, KEY(e), rep_row_new(e->rep_port, NULL));
	} else if (rep_del) {
		g_hash_table_remove(o->reps, KEY(e));
	}
	if (need_cfg) {  /* also: the new configuration's number */
		next_cfg_ops(ops);
		at_cfg = n_ops + 1;
	}
	req = ops_end(ops);
	if (closing) {
		if (!vpd_ofconn_bundle_send(&o->of, mods, &first, &commit, &stale) &&
		    !vpd_ofconn_bundle_send(&o->of, mods, &first, &commit, error))
			return false;
		if (!vpd_ofconn_wait(&o->of, first, commit, VPD_OFPT_BUNDLE_CONTROL, NULL, NULL,
				     error))
			return false;
	}
	if (db && !vpd_ovsdb_send(&o->db, req, &id, error))
		return false;
	if (!closing && !opening) {
		if (!vpd_ofconn_bundle_send(&o->of, mods, &first, &commit, &stale) &&
		    !vpd_ofconn_bundle_send(&o->of, mods, &first, &commit, error)) {
			if (db)
				vpd_json_free(vpd_ovsdb_wait(&o->db, id, NULL));
			return false;
		}
		flows_sent = true;
	}
	if (db) {
		res = vpd_ovsdb_wait(&o->db, id, error);
		if (res && (vpd_ovsdb_count(res, 0) != 1 || vpd_ovsdb_count(res, 1) != 1)) {
			vpd_ovs_fail(error, G_IO_ERROR_NOT_FOUND,
				     "OVS: port %s of VF %u is gone from OVSDB", e->rep, e->vf);
			g_clear_pointer(&res, vpd_json_free);
		}
		if (res && rep_add) {
			const struct vpd_json *u = vpd_json_at(vpd_json_get(vpd_json_at(res, at_insert),
									   "uuid"), 1);

			if (u && u->type == VPD_JSON_STRING)
				g_hash_table_insert(o->reps, KEY(e), rep_row_new(e->rep_port, u->str));
		}
		if (res && need_cfg) {
			const struct vpd_json *cfg = vpd_json_get(vpd_json_at(vpd_json_get(
				vpd_json_at(res, at_cfg), "rows"), 0), "next_cfg");

			if (!cfg || cfg->type != VPD_JSON_NUMBER) {
				vpd_ovs_fail(error, G_IO_ERROR_INVALID_DATA,
					     "OVSDB's reply has no next_cfg");
				g_clear_pointer(&res, vpd_json_free);
			} else if (!wait_applied(o, cfg->num, error)) {
				g_clear_pointer(&res, vpd_json_free);
			}
		}
		if (res && rep_add && !check_rep_port(o, e, error))
			g_clear_pointer(&res, vpd_json_free);
		if (!res) {
			if (flows_sent)
				vpd_ofconn_wait(&o->of, first, commit, VPD_OFPT_BUNDLE_CONTROL,
						NULL, NULL, NULL);
			return false;
		}
	}
	if (opening) {
		if (!vpd_ofconn_bundle_send(&o->of, mods, &first, &commit, &stale) &&
		    !vpd_ofconn_bundle_send(&o->of, mods, &first, &commit, error))
			return false;
		flows_sent = true;
	}
	if (flows_sent && !vpd_ofconn_wait(&o->of, first, commit, VPD_OFPT_BUNDLE_CONTROL, NULL,
					   NULL, error))
		return false;
	if (db)
		g_hash_table_insert(o->rows, KEY(e), g_steal_pointer(&rows));
	if (allow)
		g_hash_table_add(o->open, KEY(e));
	g_debug("VF %u of pool '%s': %s and flows committed in %.2f ms", e->vf, e->pool->name,
		db ? "port" : "(port unchanged)", (g_get_monotonic_time() - t0) / 1000.0);
	return true;
}

bool vpd_ovs_apply(struct vpd_ovs *o, struct vpd_entry *e, GError **error)
{
	if (!apply(o, e, error)) {
		g_hash_table_add(o->dirty, KEY(e));
		return false;
	}
	g_hash_table_remove(o->dirty, KEY(e));
	return true;
}

void vpd_ovs_set_dirty(struct vpd_ovs *o, const struct vpd_entry *e)
{
	g_hash_table_add(o->dirty, KEY(e));
}

void vpd_ovs_idle(struct vpd_ovs *o)
{
	vpd_ovsdb_idle(&o->db);
}

static bool flow_stats_cb(const uint8_t *m, guint len, void *by_cookie)
{
	return vpd_of_flow_stats_parse(m, len, by_cookie);
}

/*
 * A flow statistics request of table (VPD_OFPTT_ALL: every one) for the
 * flows whose cookie matches cookie under mask, each reply message to
 * each(opaque); a connection that fails is opened again once, after
 * restart(opaque) forgets what the failed try gave.
 */
static bool request_flow_stats(struct vpd_ovs *o, uint8_t table, uint64_t cookie, uint64_t mask,
			       vpd_of_msg_fn each, void (*restart)(void *opaque), void *opaque,
			       GError **error)
{
	g_autoptr(GByteArray) req = g_byte_array_new();

	for (int attempt = 0; attempt < 2; attempt++) {
		g_autoptr(GError) err = NULL;
		uint32_t xid;

		if (!vpd_ofconn_connect(&o->of, error))
			return false;
		g_byte_array_set_size(req, 0);
		xid = ++o->of.xid;
		restart(opaque);
		vpd_of_flow_stats_request(req, xid, table, cookie, mask);
		if (vpd_ofconn_send(&o->of, req, &err) &&
		    vpd_ofconn_wait(&o->of, xid, xid, VPD_OFPT_MULTIPART_REPLY, each, opaque, &err))
			return true;
		if (o->of.c.fd >= 0 || attempt) {
			g_propagate_error(error, g_steal_pointer(&err));
			return false;
		}
	}
	g_assert_not_reached();
}

static void forget_flows(void *by_cookie)
{
	g_hash_table_remove_all(by_cookie);
}

/*
 * The flows of every table whose cookie matches cookie under mask, into
 * by_cookie (cookie -> its counters, flow_stats_cb()).
 */
static bool dump_flows(struct vpd_ovs *o, uint64_t cookie, uint64_t mask,
		       GHashTable *by_cookie, GError **error)
{
	return request_flow_stats(o, VPD_OFPTT_ALL, cookie, mask, flow_stats_cb, forget_flows,
				  by_cookie, error);
}


/*
 * Whether OVS still holds each VF's deny flow (and its representor
 * port's) and the bridge's other ports' flow, the flows that make
 * default-deny (without a VF's deny flow, its frames would take the
 * other ports' NORMAL): OVS forgets flows without closing the
 * connection when someone deletes them (ovs-ofctl del-flows) or changes
 * the bridge's fail mode.  False, with
 * the first one missing in *what, when one is; an error leaves *what
 * NULL.
 */
static bool audit_flows(struct vpd_ovs *o, const struct vpd_pools *pools, char **what,
			GError **error)
{
	/* the VFs' own flows (kinds below VPD_FLOW_RULE): a few per VF */
	const uint64_t mask = VPD_COOKIE_MAGIC_MASK | 0xf8ull << 40;
	g_autoptr(GHashTable) by_cookie = g_hash_table_new_full(g_int64_hash, g_int64_equal,
								g_free, g_free);
	uint64_t others = vpd_others_flow().cookie;

	*what = NULL;
	if (!dump_flows(o, VPD_COOKIE_MAGIC, mask, by_cookie, error))
		return false;
	if (!g_hash_table_contains(by_cookie, &others)) {
		*what = g_strdup("the bridge's other ports' flow");
		return false;
	}
	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];
		unsigned pfi = pf_index(o, e->pool->pf);
		uint64_t deny = vpd_flow_cookie(VPD_FLOW_DENY, pfi, e->vf);
		uint64_t rep_deny = vpd_flow_cookie(VPD_FLOW_REP_DENY, pfi, e->vf);

		if (!g_hash_table_contains(by_cookie, &deny)) {
			*what = g_strdup_printf("the deny flow of VF %u of pool '%s'", e->vf,
						e->pool->name);
			return false;
		}
		/* (a representor port whose change is still to be made: not yet) */
		if (e->rep_port && !g_hash_table_contains(o->dirty, KEY(e)) &&
		    g_hash_table_contains(o->reps, KEY(e)) &&
		    !g_hash_table_contains(by_cookie, &rep_deny)) {
			*what = g_strdup_printf("the deny flow of the representor port of VF %u "
						"of pool '%s'", e->vf, e->pool->name);
			return false;
		}
	}
	return true;
}

void vpd_ovs_tick(struct vpd_ovs *o, struct vpd_pools *pools)
{
	g_autoptr(GError) err = NULL;
	GHashTableIter it;
	gpointer key;

	/* ovs-vswitchd closes our connection when it stops. */
	if (vpd_ofconn_closed_by_peer(&o->of))
		o->need_sync = true;
	if (o->of.c.fd < 0 && o->of.connected)
		o->need_sync = true;
	if (!need_sync(o) && ++o->ticks % VPD_OVS_AUDIT_TICKS == 0) {
		g_autofree char *what = NULL;

		if (!audit_flows(o, pools, &what, &err) && what) {
			g_warning("OVS: %s is gone from bridge %s (someone deleted flows, or "
				  "changed its fail mode): making all of the daemon's flows again",
				  what, o->cfg->ovs_bridge);
			o->need_sync = o->flows_gone = true;
		}
		g_clear_error(&err);  /* (OVS gone: the next tick finds out) */
	}
	if (need_sync(o)) {
		if (vpd_ovs_sync(o, pools, &err) && o->flows_gone) {
			g_message("OVS: flows made again on bridge %s", o->cfg->ovs_bridge);
			o->flows_gone = false;
		} else if (!err) {
			g_message("OVS: flows restored after ovs-vswitchd came back");
		} else if (!o->sync_failing) {
			g_warning("OVS: cannot restore the flows (trying every second): %s",
				  err->message);
		}
		o->sync_failing = need_sync(o);
		return;
	}
	g_hash_table_iter_init(&it, o->dirty);
	while (g_hash_table_iter_next(&it, &key, NULL)) {
		unsigned handle = GPOINTER_TO_UINT(key) - 1;
		struct vpd_entry *entry = handle < pools->entries->len ?
					  pools->entries->pdata[handle] : NULL;
		g_autoptr(GError) again = NULL;

		if (!entry) {
			g_hash_table_iter_remove(&it);
			continue;
		}
		if (apply(o, entry, &again)) {
			g_message("OVS: VF %u of pool '%s' is as it should be again", entry->vf,
				  entry->pool->name);
			g_hash_table_iter_remove(&it);
		}
	}
}

/* ---- flow statistics ---------------------------------------------------- */

GPtrArray *vpd_ovs_vf_flows(struct vpd_ovs *o, const struct vpd_entry *e, GError **error)
{
	unsigned pfi = pf_index(o, e->pool->pf);
	GHashTable *by_cookie = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
						      g_free);  /* cookie -> counters */
	struct vpd_flow f[VPD_VF_MAX_FLOWS];
	GPtrArray *lines = NULL;
	unsigned n;

	if (dump_flows(o, vpd_flow_cookie(0, pfi, e->vf), ~VPD_COOKIE_KIND_MASK, by_cookie,
		       error))
		lines = g_ptr_array_new_with_free_func(g_free);
	if (lines) {
		n = vpd_vf_flows(e, pfi, f);
		for (unsigned j = 0; j < n; j++) {
			g_autofree char *text = vpd_flow_to_string(&f[j]);
			const char *c = g_hash_table_lookup(by_cookie, &f[j].cookie);

			g_ptr_array_add(lines, g_strdup_printf("%s (%s)", text,
							       c ? c : "MISSING in OVS"));
		}
	}
	g_hash_table_unref(by_cookie);
	return lines;
}

bool vpd_ovs_port_stats(struct vpd_ovs *o, const struct vpd_pools *pools, GArray *out,
			GError **error)
{
	static const char *const cols[] = { "name", "statistics", NULL };
	g_autoptr(JsonBuilder) ops = ops_new();
	g_autoptr(JsonNode) req = NULL;
	g_autoptr(vpd_json) res = NULL;
	g_autoptr(GHashTable) by_name = g_hash_table_new(g_str_hash, g_str_equal);
	const struct vpd_json *rows;

	op_select(ops, "Interface", NULL, cols);
	req = ops_end(ops);
	res = vpd_ovsdb_transact(&o->db, req, error);
	if (!res)
		return false;
	rows = vpd_json_get(vpd_json_at(res, 0), "rows");
	for (unsigned i = 0; i < vpd_json_len(rows); i++) {
		const struct vpd_json *r = vpd_json_at(rows, i);
		const struct vpd_json *n = vpd_json_get(r, "name");

		if (n && n->type == VPD_JSON_STRING)
			g_hash_table_insert(by_name, n->str, (gpointer)vpd_json_get(r, "statistics"));
	}
	g_array_set_size(out, 0);
	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];
		/* ["map", [[key, value], ...]] (RFC 7047 5.1) */
		const struct vpd_json *map = e->rep ? g_hash_table_lookup(by_name, e->rep) : NULL;
		const struct vpd_json *pairs = vpd_json_at(map, 1);
		struct vpd_port_stats st = { 0 };

		for (unsigned j = 0; j < vpd_json_len(pairs); j++) {
			const struct vpd_json *k = vpd_json_at(vpd_json_at(pairs, j), 0);
			const struct vpd_json *v = vpd_json_at(vpd_json_at(pairs, j), 1);

			if (!k || k->type != VPD_JSON_STRING || !v || v->type != VPD_JSON_NUMBER ||
			    v->num < 0)
				continue;
			for (unsigned s = 0; s < VPD_PS_N; s++) {
				if (!strcmp(k->str, vpd_port_stat_ovs_key[s])) {
					st.have |= 1u << s;
					st.v[s] = (uint64_t)v->num;
				}
			}
		}
		/* the kernel datapath's policer: a tc filter whose drops OVS leaves out */
		if (e->rep && !(st.have & 1u << VPD_PS_POLICER_DROPPED)) {
			g_autoptr(GError) err = NULL;

			if (vpd_police_drops(e->rep, &st.v[VPD_PS_POLICER_DROPPED], &err))
				st.have |= 1u << VPD_PS_POLICER_DROPPED;
			else if (err)
				g_debug("VF %u of pool '%s': %s", e->vf, e->pool->name, err->message);
		}
		g_array_append_val(out, st);
	}
	return true;
}

/* ---- a guest's rules ---------------------------------------------------- */

/* Change c as one atomic bundle, committed (no note of it taken). */
static bool send_rules(struct vpd_ovs *o, const struct vpd_rule_change *c, GError **error)
{
	g_autoptr(GPtrArray) mods = g_ptr_array_new_with_free_func(
		(GDestroyNotify)g_byte_array_unref);
	g_autoptr(GError) stale = NULL;
	uint32_t first = 0, commit = 0;

	if (c->del_table) {
		struct vpd_flow del = { .cookie = vpd_rule_table_cookie(c->table),
					.table = c->table };

		add_mod(mods, VPD_OFPFC_DELETE, &del, VPD_RULE_TABLE_COOKIE_MASK);
	}
	for (unsigned i = 0; i < c->del->len; i++) {
		struct vpd_flow del = {
			.cookie = vpd_rule_cookie(c->table, g_array_index(c->del, uint32_t, i)),
			.table = c->table,
		};

		add_mod(mods, VPD_OFPFC_DELETE, &del, ~0ull);
	}
	for (unsigned i = 0; i < c->add->len; i++) {
		const struct vpd_rule *r = c->add->pdata[i];
		struct vpd_flow f;

		vpd_rule_flow(r, vpd_vf_ofport(pf_index(o, r->in_pf), r->in_vf),
			      r->out_pf ? vpd_vf_ofport(pf_index(o, r->out_pf), r->out_vf) : 0, &f);
		add_mod(mods, VPD_OFPFC_ADD, &f, 0);
	}
	if (!mods->len)
		return true;
	if (!vpd_ofconn_bundle_send(&o->of, mods, &first, &commit, &stale) &&
	    !vpd_ofconn_bundle_send(&o->of, mods, &first, &commit, error))
		return false;
	return vpd_ofconn_wait(&o->of, first, commit, VPD_OFPT_BUNDLE_CONTROL, NULL, NULL, error);
}

bool vpd_ovs_rules(struct vpd_ovs *o, const struct vpd_rule_change *c, GError **error)
{
	bool ok = send_rules(o, c, error);

	vpd_held_rules_note(&o->held, c, ok);
	return ok;
}

struct counts {
	uint64_t cookie, packets, bytes;
	bool found, malformed;
};

static bool counts_cb(const uint8_t *m, guint len, void *opaque)
{
	struct counts *c = opaque;

	if (!vpd_of_flow_stats_counts(m, len, c->cookie, &c->packets, &c->bytes, &c->found))
		c->malformed = true;
	return !c->malformed;
}

static void forget_counts(void *opaque)
{
	struct counts *c = opaque;

	c->packets = c->bytes = 0;
	c->found = c->malformed = false;
}

bool vpd_ovs_rule_stats(struct vpd_ovs *o, uint8_t table, uint32_t id, uint64_t *packets,
			uint64_t *bytes, GError **error)
{
	struct counts c = { .cookie = vpd_rule_cookie(table, id) };

	if (!request_flow_stats(o, table, c.cookie, ~0ull, counts_cb, forget_counts, &c, error))
		return false;
	if (c.malformed)
		return vpd_ovs_fail(error, G_IO_ERROR_INVALID_DATA,
				    "OVS: a malformed flow statistics reply");
	/* (ovs-vswitchd came back, the sync has not made its tables again yet) */
	if (!c.found && need_sync(o) && vpd_held_rules_counted(&o->held, table, id, packets, bytes))
		return true;
	if (!c.found)
		return vpd_ovs_fail(error, G_IO_ERROR_NOT_FOUND, "OVS: rule %u of table %u is "
				    "missing in OVS", id, table);
	/* what OVS counted before it last restarted, and since */
	vpd_held_rules_count(&o->held, table, id, &c.packets, &c.bytes);
	*packets = c.packets;
	*bytes = c.bytes;
	return true;
}
