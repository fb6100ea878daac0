// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * state: the claims file (see state.h).
 */
#include "state.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static char *mac_str(const uint8_t *m)
{
	return g_strdup_printf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
			       m[5]);
}

static bool parse_mac(const char *s, uint8_t *m)
{
	unsigned v[6];
	char end;

	if (!s || sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4],
			 &v[5], &end) != 6)
		return false;
	for (int i = 0; i < 6; i++)
		m[i] = v[i];
	return true;
}

bool vpd_state_save(const struct vpd_pools *pools, const char *path, GError **error)
{
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_autofree char *data = NULL;
	g_autofree char *dir = g_path_get_dirname(path);
	gsize len;

	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];
		g_autofree char *group = NULL;
		g_autofree char *mac = NULL;

		if (!e->claimed)
			continue;
		group = g_strdup_printf("claim %s %u", e->pool->name, e->vf);
		mac = mac_str(e->attrs.mac);
		g_key_file_set_string(kf, group, "owner", e->owner ? e->owner : "");
		g_key_file_set_uint64(kf, group, "uid", e->uid);
		g_key_file_set_uint64(kf, group, "pid", e->pid);
		g_key_file_set_string(kf, group, "mac", mac);
		g_key_file_set_uint64(kf, group, "vlan", e->attrs.vlan);
		g_key_file_set_uint64(kf, group, "qos", e->attrs.qos);
		g_key_file_set_uint64(kf, group, "vlan-proto", e->attrs.vlan_proto);
		g_key_file_set_boolean(kf, group, "spoofchk", e->attrs.spoofchk);
		g_key_file_set_boolean(kf, group, "trust", e->attrs.trust);
		g_key_file_set_uint64(kf, group, "link-state", e->attrs.link_state);
		g_key_file_set_uint64(kf, group, "min-tx-rate", e->attrs.min_tx_rate);
		g_key_file_set_uint64(kf, group, "max-tx-rate", e->attrs.max_tx_rate);
	}
	data = g_key_file_to_data(kf, &len, NULL);
	if (g_mkdir_with_parents(dir, 0700) < 0) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "cannot create %s: %s", dir, g_strerror(errno));
		return false;
	}
	return g_file_set_contents_full(path, data, len,
					G_FILE_SET_CONTENTS_CONSISTENT |
					G_FILE_SET_CONTENTS_DURABLE, 0600, error);
}

static struct vpd_entry *find_entry(struct vpd_pools *pools, const char *pool, unsigned vf)
{
	for (unsigned i = 0; i < pools->entries->len; i++) {
		struct vpd_entry *e = pools->entries->pdata[i];

		if (e->vf == vf && !strcmp(e->pool->name, pool))
			return e;
	}
	return NULL;
}

int vpd_state_load(struct vpd_pools *pools, const char *path, GError **error)
{
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_auto(GStrv) groups = NULL;
	GError *err = NULL;
	int restored = 0;

	if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &err)) {
		if (g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
			g_error_free(err);
			return 0;
		}
		g_propagate_prefixed_error(error, err, "state file %s: ", path);
		return -1;
	}
	groups = g_key_file_get_groups(kf, NULL);
	for (char **g = groups; *g; g++) {
		g_auto(GStrv) words = g_strsplit(*g, " ", 3);
		g_autofree char *mac = NULL;
		struct vpd_vf_attrs a = {};
		struct vpd_entry *e;
		guint64 vf;

		if (g_strv_length(words) != 3 || strcmp(words[0], "claim") ||
		    !g_ascii_string_to_unsigned(words[2], 10, 0, 4095, &vf, NULL)) {
			g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_PARSE,
				    "state file %s: unknown group [%s]", path, *g);
			return -1;
		}
		e = find_entry(pools, words[1], vf);
		if (!e) {
			g_warning("state file %s: pool '%s' has no VF %u any more; its claim is "
				  "dropped", path, words[1], (unsigned)vf);
			continue;
		}
		mac = g_key_file_get_string(kf, *g, "mac", NULL);
		if (!parse_mac(mac, a.mac)) {
			g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_PARSE,
				    "state file %s: [%s] has no valid mac", path, *g);
			return -1;
		}
		a.vlan = g_key_file_get_uint64(kf, *g, "vlan", NULL);
		a.qos = g_key_file_get_uint64(kf, *g, "qos", NULL);
		a.vlan_proto = g_key_file_get_uint64(kf, *g, "vlan-proto", NULL);
		a.spoofchk = g_key_file_get_boolean(kf, *g, "spoofchk", NULL);
		a.trust = g_key_file_get_boolean(kf, *g, "trust", NULL);
		a.link_state = g_key_file_get_uint64(kf, *g, "link-state", NULL);
		a.min_tx_rate = g_key_file_get_uint64(kf, *g, "min-tx-rate", NULL);
		a.max_tx_rate = g_key_file_get_uint64(kf, *g, "max-tx-rate", NULL);
		e->claimed = true;
		e->client = 0;
		e->uid = g_key_file_get_uint64(kf, *g, "uid", NULL);
		e->pid = g_key_file_get_uint64(kf, *g, "pid", NULL);
		e->owner = g_key_file_get_string(kf, *g, "owner", NULL);
		/* Re-check what the file says against today's policy. */
		if (!vpd_pools_set_attrs(pools, e, 0, &a, &err)) {
			g_warning("state file %s: [%s]: %s; the VF keeps its defaults", path, *g,
				  err->message);
			g_clear_error(&err);
		}
		restored++;
	}
	return restored;
}
