// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * config: parse and validate the daemon's configuration file.
 *
 * The syntax is deliberately small (docs/daemon-config.md): "[section]" or
 * "[kind name]" headers, "key = value" lines, "#" comments.  Values are
 * validated as they are read, and the whole file is checked for
 * consistency (pools within their PF's VFs, no VF in two pools, no VLAN in
 * two pools on the OVS bridge) before it is accepted: a bad file changes
 * nothing.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(vpd-config-error-quark, vpd_config_error)

#define MAX_VFS 256

struct parser {
	const char *file;
	unsigned line;
	struct vpd_config *cfg;
	enum { SEC_NONE, SEC_DAEMON, SEC_PF, SEC_POOL } section;
	struct vpd_pf *pf;
	struct vpd_pool *pool;
	char *pool_pf_name;          /* resolved once every PF is known */
	GPtrArray *pool_pf_names;    /* parallel to cfg->pools */
	GPtrArray *pool_pf_lines;
};

static bool fail(struct parser *p, GError **error, const char *fmt, ...)
	G_GNUC_PRINTF(3, 4);

static bool fail(struct parser *p, GError **error, const char *fmt, ...)
{
	g_autofree char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_set_error(error, VPD_CONFIG_ERROR, 0, "%s:%u: %s", p->file, p->line, msg);
	return false;
}

static bool parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!*s || !isdigit((unsigned char)*s))
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

/* "A" or "A-B", both within [0, max], A <= B. */
static bool parse_range(const char *s, uint64_t max, uint64_t *lo, uint64_t *hi)
{
	g_auto(GStrv) parts = g_strsplit(s, "-", 2);

	if (!parse_uint(g_strstrip(parts[0]), max, lo))
		return false;
	if (!parts[1]) {
		*hi = *lo;
		return true;
	}
	return parse_uint(g_strstrip(parts[1]), max, hi) && *lo <= *hi;
}

static bool parse_bool(const char *s, bool *out)
{
	if (!strcmp(s, "yes") || !strcmp(s, "true") || !strcmp(s, "on")) {
		*out = true;
		return true;
	}
	if (!strcmp(s, "no") || !strcmp(s, "false") || !strcmp(s, "off")) {
		*out = false;
		return true;
	}
	return false;
}

/* Up to 6 bytes "xx:xx:..."; *len is how many were given. */
static bool parse_mac_prefix(const char *s, uint8_t mac[6], unsigned *len)
{
	g_auto(GStrv) parts = g_strsplit(s, ":", -1);
	unsigned n = g_strv_length(parts);

	if (n < 1 || n > 6)
		return false;
	for (unsigned i = 0; i < n; i++) {
		char *end;
		unsigned long b;

		if (strlen(parts[i]) != 2 || !isxdigit((unsigned char)parts[i][0]) ||
		    !isxdigit((unsigned char)parts[i][1]))
			return false;
		b = strtoul(parts[i], &end, 16);
		mac[i] = b;
	}
	*len = n;
	return true;
}

static bool parse_id_list(const char *s, GArray *out)
{
	g_auto(GStrv) parts = g_strsplit(s, ",", -1);

	for (unsigned i = 0; parts[i]; i++) {
		uint64_t v;

		if (!parse_uint(g_strstrip(parts[i]), UINT32_MAX - 1, &v))
			return false;
		g_array_append_val(out, (uint32_t){ v });
	}
	return true;
}

static void pf_free(gpointer data)
{
	struct vpd_pf *pf = data;

	g_free(pf->name);
	g_free(pf->vdpa_mgmtdev);
	g_free(pf);
}

static void pool_free(gpointer data)
{
	struct vpd_pool *pool = data;

	g_free(pool->name);
	g_array_unref(pool->allow_uids);
	g_array_unref(pool->allow_gids);
	g_free(pool);
}

void vpd_config_free(struct vpd_config *cfg)
{
	if (!cfg)
		return;
	g_free(cfg->socket_path);
	g_free(cfg->socket_group);
	g_free(cfg->state_path);
	g_free(cfg->ovs_bridge);
	g_free(cfg->ovsdb);
	g_ptr_array_unref(cfg->pfs);
	g_ptr_array_unref(cfg->pools);
	g_free(cfg);
}

static bool valid_name(const char *s)
{
	if (!*s || strlen(s) > 64)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("-_.:/", *s))
			return false;
	return true;
}

static struct vpd_pf *find_pf(const struct vpd_config *cfg, const char *name)
{
	for (unsigned i = 0; i < cfg->pfs->len; i++) {
		struct vpd_pf *pf = cfg->pfs->pdata[i];

		if (!strcmp(pf->name, name))
			return pf;
	}
	return NULL;
}

static bool new_pf(struct parser *p, const char *name, GError **error)
{
	struct vpd_pf *other = find_pf(p->cfg, name);

	if (!valid_name(name))
		return fail(p, error, "invalid PF name '%s'", name);
	if (other)
		return fail(p, error, "PF '%s' is already defined at line %u", name, other->line);
	p->pf = g_new0(struct vpd_pf, 1);
	p->pf->name = g_strdup(name);
	p->pf->switchdev = true;
	p->pf->vdpa_mgmtdev = g_strdup("auto");
	p->pf->vduse_msg_timeout = 30;
	p->pf->line = p->line;
	g_ptr_array_add(p->cfg->pfs, p->pf);
	p->section = SEC_PF;
	return true;
}

static bool new_pool(struct parser *p, const char *name, GError **error)
{
	struct vpd_pool *other = vpd_config_find_pool(p->cfg, name);

	if (!valid_name(name))
		return fail(p, error, "invalid pool name '%s'", name);
	if (other)
		return fail(p, error, "pool '%s' is already defined at line %u", name, other->line);
	p->pool = g_new0(struct vpd_pool, 1);
	p->pool->name = g_strdup(name);
	p->pool->allow_uids = g_array_new(false, false, sizeof(uint32_t));
	p->pool->allow_gids = g_array_new(false, false, sizeof(uint32_t));
	p->pool->last_vf = UINT32_MAX;
	p->pool->spoof_check = true;
	p->pool->max_flows = 1024;
	p->pool->max_flow_changes = 200;
	/* A client changes a VF's MAC only where the admin said it may. */
	p->pool->mac_policy = VPD_MAC_LOCKED;
	p->pool->line = p->line;
	g_ptr_array_add(p->cfg->pools, p->pool);
	g_ptr_array_add(p->pool_pf_names, NULL);
	g_ptr_array_add(p->pool_pf_lines, NULL);
	p->section = SEC_POOL;
	return true;
}

/* "[daemon]", "[pf NAME]" or "[pool NAME]" */
static bool section_header(struct parser *p, char *line, GError **error)
{
	char *end = strchr(line, ']');
	g_auto(GStrv) words = NULL;
	const char *kind, *name = NULL;
	unsigned n = 0;

	if (!end || end[1])
		return fail(p, error, "a section header must end with ']'");
	*end = 0;
	words = g_strsplit_set(g_strstrip(line + 1), " \t", -1);
	/* keep the non-empty words (repeated blanks leave empty ones) */
	for (unsigned i = 0; words[i]; i++) {
		if (*words[i])
			words[n++] = words[i];
		else
			g_free(words[i]);
	}
	words[n] = NULL;
	kind = n ? words[0] : "";
	if (n == 2)
		name = words[1];
	p->pf = NULL;
	p->pool = NULL;
	if (n == 1 && !strcmp(kind, "daemon")) {
		p->section = SEC_DAEMON;
		return true;
	}
	if (name && !strcmp(kind, "pf"))
		return new_pf(p, name, error);
	if (name && !strcmp(kind, "pool"))
		return new_pool(p, name, error);
	return fail(p, error, "unknown section '[%s]' (expected [daemon], [pf NAME] or "
		    "[pool NAME])", line + 1);
}

static bool daemon_key(struct parser *p, const char *key, const char *val,
		       GError **error)
{
	static const struct {
		const char *key;
		uint64_t min, max;
		size_t off;
	} limits[] = {
		{ "max-clients", 1, 65536, offsetof(struct vpd_config, max_clients) },
		{ "max-clients-per-uid", 1, 65536,
		  offsetof(struct vpd_config, max_clients_per_uid) },
		{ "idle-timeout", 0, 86400, offsetof(struct vpd_config, idle_timeout) },
		{ "io-timeout", 1, 3600, offsetof(struct vpd_config, io_timeout) },
	};
	char **slot = NULL;
	uint64_t v;

	for (unsigned i = 0; i < G_N_ELEMENTS(limits); i++) {
		if (strcmp(key, limits[i].key))
			continue;
		if (!parse_uint(val, limits[i].max, &v) || v < limits[i].min)
			return fail(p, error, "%s must be a number from %" G_GUINT64_FORMAT
				    " to %" G_GUINT64_FORMAT ", not '%s'", key, limits[i].min,
				    limits[i].max, val);
		*(unsigned *)((char *)p->cfg + limits[i].off) = v;
		return true;
	}
	if (!strcmp(key, "socket-mode")) {
		char *end;
		unsigned long m = strtoul(val, &end, 8);

		/* Read and write for some of owner, group, others; never more. */
		if (!*val || *end || m > 0777 || (m & 0111) || !(m & 0600))
			return fail(p, error, "socket-mode must be an octal mode such as 0660 "
				    "(rw for the owner at least, no x bits), not '%s'", val);
		p->cfg->socket_mode = m;
		return true;
	}
	if (!strcmp(key, "socket-group")) {
		if (!valid_name(val) || strlen(val) > 32 || strpbrk(val, ":/"))
			return fail(p, error, "socket-group must be a group name or gid, "
				    "not '%s'", val);
		g_free(p->cfg->socket_group);
		p->cfg->socket_group = g_strdup(val);
		return true;
	}
	if (!strcmp(key, "socket"))
		slot = &p->cfg->socket_path;
	else if (!strcmp(key, "state"))
		slot = &p->cfg->state_path;
	else if (!strcmp(key, "ovs-bridge"))
		slot = &p->cfg->ovs_bridge;
	else if (!strcmp(key, "ovsdb"))
		slot = &p->cfg->ovsdb;
	else
		return fail(p, error, "unknown key '%s' in [daemon]", key);
	if ((!strcmp(key, "socket") || !strcmp(key, "state")) && val[0] != '/')
		return fail(p, error, "'%s' must be an absolute path", key);
	if (!strcmp(key, "ovs-bridge") && (!valid_name(val) || strlen(val) > 15 ||
					       strpbrk(val, ":/")))
		return fail(p, error, "invalid bridge name '%s' (a netdev name: at most 15 "
			    "of A-Z a-z 0-9 . _ -)", val);
	if (!strcmp(key, "ovsdb") && (!g_str_has_prefix(val, "unix:/") || val[6] == '\0'))
		return fail(p, error, "ovsdb must be unix:/ABSOLUTE/PATH, not '%s'", val);
	g_free(*slot);
	*slot = g_strdup(val);
	return true;
}

static bool pf_key(struct parser *p, const char *key, const char *val,
		   GError **error)
{
	uint64_t v;

	if (!strcmp(key, "num-vfs")) {
		if (!parse_uint(val, MAX_VFS, &v))
			return fail(p, error, "num-vfs must be a number from 0 to %u, not '%s'",
				    MAX_VFS, val);
		p->pf->num_vfs = v;
	} else if (!strcmp(key, "eswitch")) {
		if (!strcmp(val, "switchdev"))
			p->pf->switchdev = true;
		else if (!strcmp(val, "legacy"))
			p->pf->switchdev = false;
		else
			return fail(p, error, "eswitch must be 'switchdev' or 'legacy', not '%s'",
				    val);
	} else if (!strcmp(key, "vdpa-mgmtdev")) {
		if (!valid_name(val))
			return fail(p, error, "invalid vdpa management device '%s'", val);
		g_free(p->pf->vdpa_mgmtdev);
		p->pf->vdpa_mgmtdev = g_strdup(val);
		p->pf->vduse = !strcmp(val, "vduse");
	} else if (!strcmp(key, "vduse-msg-timeout")) {
		if (!parse_uint(val, 3600, &v) || !v)
			return fail(p, error, "vduse-msg-timeout must be 1 to 3600 seconds, "
				    "not '%s'", val);
		p->pf->vduse_msg_timeout = v;
	} else {
		return fail(p, error, "unknown key '%s' in [pf %s]", key, p->pf->name);
	}
	return true;
}

static bool pool_key(struct parser *p, const char *key, const char *val,
		     GError **error)
{
	struct vpd_pool *pool = p->pool;
	uint64_t lo, hi;
	bool b;

	if (!strcmp(key, "pf")) {
		unsigned i = p->cfg->pools->len - 1;

		g_free(p->pool_pf_names->pdata[i]);
		p->pool_pf_names->pdata[i] = g_strdup(val);
		p->pool_pf_lines->pdata[i] = GUINT_TO_POINTER(p->line);
	} else if (!strcmp(key, "vfs")) {
		if (!parse_range(val, MAX_VFS - 1, &lo, &hi))
			return fail(p, error, "vfs must be a VF index or a range like 0-7, "
				    "not '%s'", val);
		pool->first_vf = lo;
		pool->last_vf = hi;
	} else if (!strcmp(key, "allow-uids")) {
		g_array_set_size(pool->allow_uids, 0);
		if (!parse_id_list(val, pool->allow_uids))
			return fail(p, error, "allow-uids must be a list of numeric uids, not '%s'",
				    val);
	} else if (!strcmp(key, "allow-gids")) {
		g_array_set_size(pool->allow_gids, 0);
		if (!parse_id_list(val, pool->allow_gids))
			return fail(p, error, "allow-gids must be a list of numeric gids, not '%s'",
				    val);
	} else if (!strcmp(key, "vlans")) {
		if (!parse_range(val, 4094, &lo, &hi))
			return fail(p, error, "vlans must be a VLAN id or range within 0-4094, "
				    "not '%s'", val);
		pool->vlan_min = lo;
		pool->vlan_max = hi;
	} else if (!strcmp(key, "mac-policy")) {
		if (!strcmp(val, "any")) {
			pool->mac_policy = VPD_MAC_ANY;
		} else if (!strcmp(val, "locked")) {
			pool->mac_policy = VPD_MAC_LOCKED;
		} else if (g_str_has_prefix(val, "prefix ")) {
			pool->mac_policy = VPD_MAC_PREFIX;
			if (!parse_mac_prefix(g_strstrip((char *)val + 7), pool->mac_prefix,
					      &pool->mac_prefix_len))
				return fail(p, error, "mac-policy prefix must be 1 to 6 bytes like "
					    "02:00:00, not '%s'", val + 7);
			if (pool->mac_prefix[0] & 1)
				return fail(p, error, "mac-policy prefix %s is multicast", val + 7);
		} else {
			return fail(p, error, "mac-policy must be 'any', 'locked' or "
				    "'prefix XX:XX:XX', not '%s'", val);
		}
	} else if (!strcmp(key, "max-tx-rate")) {
		if (!parse_uint(val, 1000000, &lo))
			return fail(p, error, "max-tx-rate must be Mbit/s from 0 to 1000000, "
				    "not '%s'", val);
		pool->max_tx_rate_mbps = lo;
	} else if (!strcmp(key, "spoof-check")) {
		if (!parse_bool(val, &b))
			return fail(p, error, "spoof-check must be yes or no, not '%s'", val);
		pool->spoof_check = b;
	} else if (!strcmp(key, "switchdev")) {
		if (!parse_bool(val, &b))
			return fail(p, error, "switchdev must be yes or no, not '%s'", val);
		pool->switchdev = b;
	} else if (!strcmp(key, "max-flows")) {
		if (!parse_uint(val, 65536, &lo))
			return fail(p, error, "max-flows must be a number of rules from 0 to 65536, "
				    "not '%s'", val);
		pool->max_flows = lo;
	} else if (!strcmp(key, "max-flow-changes")) {
		if (!parse_uint(val, 100000, &lo) || lo < 1)
			return fail(p, error, "max-flow-changes must be changes a second from 1 to "
				    "100000, not '%s'", val);
		pool->max_flow_changes = lo;
	} else if (!strcmp(key, "mac-handover")) {
		if (!strcmp(val, "token"))
			pool->mac_handover = VPD_HANDOVER_TOKEN;
		else if (!strcmp(val, "same-owner"))
			pool->mac_handover = VPD_HANDOVER_SAME_OWNER;
		else if (!strcmp(val, "no"))
			pool->mac_handover = VPD_HANDOVER_NO;
		else
			return fail(p, error,
				    "mac-handover must be no, token or same-owner, not '%s'",
				    val);
	} else {
		return fail(p, error, "unknown key '%s' in [pool %s]", key, pool->name);
	}
	return true;
}

/* Cross-section checks, once the whole file is read. */
static bool check_config(struct parser *p, GError **error)
{
	struct vpd_config *cfg = p->cfg;

	for (unsigned i = 0; i < cfg->pfs->len; i++) {
		const struct vpd_pf *pf = cfg->pfs->pdata[i];

		p->line = pf->line;
		/* Its name is a part of device and port names, never a path. */
		if (pf->vduse && strpbrk(pf->name, ":/"))
			return fail(p, error, "[pf %s] with vdpa-mgmtdev = vduse: the name is a "
				    "label (A-Z a-z 0-9 . _ -), not a netdev or PCI address",
				    pf->name);
		if (pf->vduse && !cfg->ovs_bridge)
			return fail(p, error, "[pf %s] with vdpa-mgmtdev = vduse needs "
				    "ovs-bridge in [daemon]: OVS-DPDK serves its VDUSE devices",
				    pf->name);
	}
	for (unsigned i = 0; i < cfg->pools->len; i++) {
		struct vpd_pool *pool = cfg->pools->pdata[i];
		const char *pf_name = p->pool_pf_names->pdata[i];

		p->line = pool->line;
		if (!pf_name)
			return fail(p, error, "pool '%s' has no 'pf ='", pool->name);
		p->line = GPOINTER_TO_UINT(p->pool_pf_lines->pdata[i]);
		pool->pf = find_pf(cfg, pf_name);
		if (!pool->pf)
			return fail(p, error, "pool '%s' names PF '%s', which no [pf] section "
				    "defines", pool->name, pf_name);
		p->line = pool->line;
		if (pool->switchdev && !cfg->ovs_bridge)
			return fail(p, error, "pool '%s' has switchdev = yes, which needs "
				    "ovs-bridge in [daemon]: representor ports are ports of "
				    "the OVS bridge", pool->name);
		if (pool->last_vf == UINT32_MAX) {
			if (!pool->pf->num_vfs)
				return fail(p, error, "pool '%s': PF '%s' has no VFs", pool->name,
					    pool->pf->name);
			pool->first_vf = 0;
			pool->last_vf = pool->pf->num_vfs - 1;
		}
		if (pool->last_vf >= pool->pf->num_vfs)
			return fail(p, error, "pool '%s' takes VFs %u-%u but PF '%s' has %u",
				    pool->name, pool->first_vf, pool->last_vf, pool->pf->name,
				    pool->pf->num_vfs);
		for (unsigned j = 0; j < i; j++) {
			struct vpd_pool *o = cfg->pools->pdata[j];
			unsigned shared_vlan = MAX(pool->vlan_min, o->vlan_min);

			if (o->pf == pool->pf && pool->first_vf <= o->last_vf &&
			    o->first_vf <= pool->last_vf)
				return fail(p, error, "pool '%s' shares VFs of PF '%s' with pool "
					    "'%s' (line %u)", pool->name, pool->pf->name, o->name,
					    o->line);
			/*
			 * Every pooled VF's port is on the one bridge, switched
			 * by VLAN: a VLAN of two pools (untagged, 0, too) would
			 * be one segment of two tenants.
			 */
			if (cfg->ovs_bridge && shared_vlan <= MIN(pool->vlan_max, o->vlan_max))
				return fail(p, error, "pool '%s' shares VLAN %u%s with pool '%s' "
					    "(line %u) on OVS bridge '%s'", pool->name, shared_vlan,
					    shared_vlan ? "" : " (untagged)", o->name, o->line,
					    cfg->ovs_bridge);
		}
	}
	return true;
}

struct vpd_config *vpd_config_parse(const char *text, const char *filename,
				    GError **error)
{
	struct parser p = { .file = filename };
	g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
	struct vpd_config *cfg = g_new0(struct vpd_config, 1);
	bool ok = true;

	cfg->pfs = g_ptr_array_new_with_free_func(pf_free);
	cfg->pools = g_ptr_array_new_with_free_func(pool_free);
	cfg->socket_path = g_strdup("/run/vdpa-pool-daemon/api.sock");
	cfg->state_path = g_strdup("/var/lib/vdpa-pool-daemon/state");
	cfg->ovsdb = g_strdup("unix:/run/openvswitch/db.sock");
	cfg->socket_mode = 0660;
	cfg->max_clients = 256;
	cfg->max_clients_per_uid = 16;
	cfg->idle_timeout = 300;
	cfg->io_timeout = 10;
	p.cfg = cfg;
	p.pool_pf_names = g_ptr_array_new_with_free_func(g_free);
	p.pool_pf_lines = g_ptr_array_new();

	for (unsigned i = 0; ok && lines[i]; i++) {
		char *line = lines[i], *eq, *hash;

		p.line = i + 1;
		if (!g_utf8_validate(line, -1, NULL)) {
			ok = fail(&p, error, "not valid UTF-8");
			break;
		}
		hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		g_strstrip(line);
		if (!*line)
			continue;
		if (*line == '[') {
			ok = section_header(&p, line, error);
			continue;
		}
		eq = strchr(line, '=');
		if (!eq) {
			ok = fail(&p, error, "expected 'key = value' or a [section]");
			break;
		}
		*eq = 0;
		g_strstrip(line);
		g_strstrip(eq + 1);
		if (!*line) {
			ok = fail(&p, error, "missing key before '='");
		} else if (!*(eq + 1)) {
			ok = fail(&p, error, "missing value for '%s'", line);
		} else {
			switch (p.section) {
			case SEC_NONE:
				ok = fail(&p, error, "'%s' outside any section", line);
				break;
			case SEC_DAEMON:
				ok = daemon_key(&p, line, eq + 1, error);
				break;
			case SEC_PF:
				ok = pf_key(&p, line, eq + 1, error);
				break;
			case SEC_POOL:
				ok = pool_key(&p, line, eq + 1, error);
				break;
			}
		}
	}
	if (ok)
		ok = check_config(&p, error);
	g_ptr_array_unref(p.pool_pf_names);
	g_ptr_array_unref(p.pool_pf_lines);
	if (!ok) {
		vpd_config_free(cfg);
		return NULL;
	}
	return cfg;
}

struct vpd_config *vpd_config_load(const char *path, GError **error)
{
	g_autofree char *text = NULL;
	gsize len;

	if (!g_file_get_contents(path, &text, &len, error))
		return NULL;
	if (strlen(text) != len) {
		g_set_error(error, VPD_CONFIG_ERROR, 0, "%s: contains a NUL byte", path);
		return NULL;
	}
	return vpd_config_parse(text, path, error);
}

struct vpd_pool *vpd_config_find_pool(const struct vpd_config *cfg, const char *name)
{
	for (unsigned i = 0; i < cfg->pools->len; i++) {
		struct vpd_pool *pool = cfg->pools->pdata[i];

		if (!strcmp(pool->name, name))
			return pool;
	}
	return NULL;
}

bool vpd_pool_allows(const struct vpd_pool *pool, uid_t uid, gid_t gid)
{
	if (uid == 0)
		return true;
	for (unsigned i = 0; i < pool->allow_uids->len; i++)
		if (g_array_index(pool->allow_uids, uint32_t, i) == uid)
			return true;
	for (unsigned i = 0; i < pool->allow_gids->len; i++)
		if (g_array_index(pool->allow_gids, uint32_t, i) == gid)
			return true;
	return false;
}

char *vpd_vdpa_dev_name(const struct vpd_pf *pf, unsigned vf)
{
	g_autofree char *name = g_strdup(pf->name);

	g_strdelimit(name, "/:.", '-');
	return g_strdup_printf("vpd-%s-%u", name, vf);
}
