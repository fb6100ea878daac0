// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * state: the claims file (see state.h).
 */
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

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

/*
 * Write a temporary file and rename it over path: a reader (the next
 * daemon) sees the old or the new state, whenever the daemon dies.  No
 * fsync: the state describes claims of running VMs, which a power loss
 * ends along with the VFs themselves, and fsync would cost every claim
 * milliseconds.
 */
static bool write_atomically(const char *path, const char *data, gsize len,
			     GError **error)
{
	g_autofree char *tmp = g_strdup_printf("%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	gsize done = 0;

	if (fd < 0)
		goto fail;
	while (done < len) {
		ssize_t n = write(fd, data + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			close(fd);
			goto fail;
		}
		done += n;
	}
	if (close(fd) < 0 || rename(tmp, path) < 0)
		goto fail;
	return true;
fail:
	g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
		    "cannot write state file %s: %s", path, g_strerror(errno));
	unlink(tmp);
	return false;
}

/* A string as a key file value (what GKeyFile reads back unchanged). */
static void append_value(GString *out, const char *v)
{
	for (const char *c = v; *c; c++) {
		switch (*c) {
		case '\\':
			g_string_append(out, "\\\\");
			break;
		case '\n':
			g_string_append(out, "\\n");
			break;
		case '\r':
			g_string_append(out, "\\r");
			break;
		case '\t':
			g_string_append(out, "\\t");
			break;
		case ' ':
			g_string_append(out, c == v ? "\\s" : " ");
			break;
		default:
			g_string_append_c(out, *c);
		}
	}
}

/*
 * Formatted by hand rather than with GKeyFile's setters, which cost
 * milliseconds for a few hundred claims; vpd_state_load() reads it with
 * GKeyFile.
 */
bool vpd_state_save(const struct vpd_pools *pools, const char *path, GError **error)
{
	g_autoptr(GString) out = g_string_sized_new(4096);
	g_autofree char *dir = g_path_get_dirname(path);

	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];
		const struct vpd_vf_attrs *a = &e->attrs;

		if (!e->claimed)
			continue;
		g_string_append_printf(out, "[claim %s %u]\nowner=", e->pool->name, e->vf);
		append_value(out, e->owner ? e->owner : "");
		g_string_append_printf(out,
				       "\nuid=%u\npid=%d\nmac=%02x:%02x:%02x:%02x:%02x:%02x\n"
				       "vlan=%u\nqos=%u\nvlan-proto=%u\nspoofchk=%s\ntrust=%s\n"
				       "link-state=%u\nmin-tx-rate=%u\nmax-tx-rate=%u\n\n",
				       (unsigned)e->uid, (int)e->pid, a->mac[0], a->mac[1],
				       a->mac[2], a->mac[3], a->mac[4], a->mac[5], a->vlan, a->qos,
				       a->vlan_proto, a->spoofchk ? "true" : "false",
				       a->trust ? "true" : "false", (unsigned)a->link_state,
				       a->min_tx_rate, a->max_tx_rate);
	}
	if (g_mkdir_with_parents(dir, 0700) < 0) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "cannot create %s: %s", dir, g_strerror(errno));
		return false;
	}
	return write_atomically(path, out->str, out->len, error);
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
