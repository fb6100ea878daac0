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
static bool write_snapshot(const struct vpd_pools *pools, const char *path, guint64 gen,
			   GError **error)
{
	g_autoptr(GString) out = g_string_sized_new(4096);
	g_autofree char *dir = g_path_get_dirname(path);

	g_string_append_printf(out, "[state]\ngeneration=%" G_GUINT64_FORMAT "\n\n", gen);

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

/* Mark e claimed as the state says; attributes re-checked against today's policy. */
static void restore_claim(struct vpd_pools *pools, struct vpd_entry *e, const char *owner,
			  uid_t uid, pid_t pid, const struct vpd_vf_attrs *a, const char *where)
{
	GError *err = NULL;

	g_free(e->owner);
	vpd_entry_default_attrs(e, &e->attrs);
	e->claimed = true;
	e->client = 0;
	e->uid = uid;
	e->pid = pid;
	e->owner = g_strdup(owner);
	if (!vpd_pools_set_attrs(pools, e, 0, a, &err)) {
		g_warning("%s: %s; the VF keeps its defaults", where, err->message);
		g_error_free(err);
	}
}

static void forget_claim(struct vpd_entry *e)
{
	g_clear_pointer(&e->owner, g_free);
	e->claimed = false;
	e->client = 0;
	e->uid = 0;
	e->pid = 0;
	vpd_entry_default_attrs(e, &e->attrs);
}

static int load_snapshot(struct vpd_pools *pools, const char *path, guint64 *gen,
			 GError **error)
{
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_auto(GStrv) groups = NULL;
	GError *err = NULL;
	int restored = 0;

	*gen = 0;
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
		g_autofree char *owner = NULL;
		g_autofree char *where = NULL;
		struct vpd_vf_attrs a = {};
		struct vpd_entry *e;
		guint64 vf;

		if (!strcmp(*g, "state")) {
			*gen = g_key_file_get_uint64(kf, *g, "generation", NULL);
			continue;
		}
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
		owner = g_key_file_get_string(kf, *g, "owner", NULL);
		where = g_strdup_printf("state file %s: [%s]", path, *g);
		restore_claim(pools, e, owner ? owner : "",
			      g_key_file_get_uint64(kf, *g, "uid", NULL),
			      g_key_file_get_uint64(kf, *g, "pid", NULL), &a, where);
		restored++;
	}
	return restored;
}

/*
 * Journal lines:
 *   GEN claim POOL VF UID PID MAC VLAN QOS PROTO SPOOFCHK TRUST LINK MIN MAX OWNER
 *   GEN free POOL VF
 * OWNER is the rest of the line, escaped with g_strescape().  A last line
 * without its newline (a write cut short) is ignored.
 */
static void replay_journal(struct vpd_pools *pools, const char *jpath, guint64 gen)
{
	g_autofree char *text = NULL;
	g_auto(GStrv) lines = NULL;
	unsigned n;

	if (!g_file_get_contents(jpath, &text, NULL, NULL))
		return;
	lines = g_strsplit(text, "\n", -1);
	n = g_strv_length(lines);
	for (unsigned i = 0; i + 1 < n; i++) {   /* lines[n-1] follows the last \n */
		g_auto(GStrv) f = g_strsplit(lines[i], " ", 16);
		g_autofree char *where = g_strdup_printf("journal %s:%u", jpath, i + 1);
		struct vpd_vf_attrs a = {};
		struct vpd_entry *e;
		guint64 g, vf;

		if (g_strv_length(f) < 4 || !g_ascii_string_to_unsigned(f[0], 10, 0, G_MAXUINT64,
									  &g, NULL) ||
		    !g_ascii_string_to_unsigned(f[3], 10, 0, 4095, &vf, NULL)) {
			g_warning("%s: unreadable line ignored", where);
			continue;
		}
		if (g != gen)
			continue;           /* of an older snapshot */
		e = find_entry(pools, f[2], vf);
		if (!e)
			continue;
		if (!strcmp(f[1], "free")) {
			forget_claim(e);
		} else if (!strcmp(f[1], "claim") && g_strv_length(f) == 16 &&
			   parse_mac(f[6], a.mac)) {
			g_autofree char *owner = g_strcompress(f[15]);

			a.vlan = g_ascii_strtoull(f[7], NULL, 10);
			a.qos = g_ascii_strtoull(f[8], NULL, 10);
			a.vlan_proto = g_ascii_strtoull(f[9], NULL, 10);
			a.spoofchk = g_ascii_strtoull(f[10], NULL, 10);
			a.trust = g_ascii_strtoull(f[11], NULL, 10);
			a.link_state = g_ascii_strtoull(f[12], NULL, 10);
			a.min_tx_rate = g_ascii_strtoull(f[13], NULL, 10);
			a.max_tx_rate = g_ascii_strtoull(f[14], NULL, 10);
			restore_claim(pools, e, owner, g_ascii_strtoull(f[4], NULL, 10),
				      g_ascii_strtoll(f[5], NULL, 10), &a, where);
		} else {
			g_warning("%s: unreadable line ignored", where);
		}
	}
}

struct vpd_state {
	char *path;
	char *jpath;
	guint64 gen;
	int fd;                 /* the journal, O_APPEND */
	unsigned lines;
};

/* A new snapshot of everything, then an empty journal. */
static bool compact(struct vpd_state *st, const struct vpd_pools *pools, GError **error)
{
	if (!write_snapshot(pools, st->path, st->gen + 1, error))
		return false;
	st->gen++;
	if (st->fd >= 0 && ftruncate(st->fd, 0) < 0) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "cannot empty %s: %s", st->jpath, g_strerror(errno));
		return false;
	}
	st->lines = 0;
	return true;
}

struct vpd_state *vpd_state_open(struct vpd_pools *pools, const char *path, int *restored,
				 GError **error)
{
	struct vpd_state *st = g_new0(struct vpd_state, 1);
	unsigned n = 0;

	st->path = g_strdup(path);
	st->jpath = g_strdup_printf("%s.journal", path);
	st->fd = -1;
	if (load_snapshot(pools, path, &st->gen, error) < 0) {
		vpd_state_close(st);
		return NULL;
	}
	replay_journal(pools, st->jpath, st->gen);
	for (unsigned i = 0; i < pools->entries->len; i++)
		n += ((struct vpd_entry *)pools->entries->pdata[i])->claimed;
	*restored = n;
	if (!compact(st, pools, error)) {
		vpd_state_close(st);
		return NULL;
	}
	st->fd = open(st->jpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (st->fd < 0) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "cannot open %s: %s", st->jpath, g_strerror(errno));
		vpd_state_close(st);
		return NULL;
	}
	return st;
}

bool vpd_state_record(struct vpd_state *st, const struct vpd_pools *pools,
		      const struct vpd_entry *e, GError **error)
{
	g_autofree char *line = NULL;
	const struct vpd_vf_attrs *a = &e->attrs;
	size_t len;

	if (e->claimed) {
		g_autofree char *owner = g_strescape(e->owner ? e->owner : "", NULL);

		line = g_strdup_printf("%" G_GUINT64_FORMAT " claim %s %u %u %d "
				       "%02x:%02x:%02x:%02x:%02x:%02x %u %u %u %u %u %u %u %u %s\n",
				       st->gen, e->pool->name, e->vf, (unsigned)e->uid, (int)e->pid,
				       a->mac[0], a->mac[1], a->mac[2], a->mac[3], a->mac[4],
				       a->mac[5], a->vlan, a->qos, a->vlan_proto, a->spoofchk,
				       a->trust, (unsigned)a->link_state, a->min_tx_rate,
				       a->max_tx_rate, owner);
	} else {
		line = g_strdup_printf("%" G_GUINT64_FORMAT " free %s %u\n", st->gen,
				       e->pool->name, e->vf);
	}
	len = strlen(line);
	if (write(st->fd, line, len) != (ssize_t)len) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "cannot append to %s: %s", st->jpath, g_strerror(errno));
		return false;
	}
	if (++st->lines > MAX(256u, 4 * pools->entries->len))
		return compact(st, pools, error);
	return true;
}

void vpd_state_close(struct vpd_state *st)
{
	if (!st)
		return;
	if (st->fd >= 0)
		close(st->fd);
	g_free(st->path);
	g_free(st->jpath);
	g_free(st);
}
