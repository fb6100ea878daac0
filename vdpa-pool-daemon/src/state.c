// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * state: the claims file (see state.h).
 */
#include "state.h"
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#define STATE_VERSION 3

G_DEFINE_QUARK(vpd-state-error-quark, vpd_state_error)

guint32 vpd_state_crc32(const char *data, gsize len)
{
	guint32 c = 0xffffffff;

	for (gsize i = 0; i < len; i++) {
		c ^= (guchar)data[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320 & -(c & 1));
	}
	return ~c;
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

/* A decimal number within 0-max, nothing else (no sign, no space). */
static bool parse_num(const char *s, guint64 max, guint64 *out)
{
	return s && g_ascii_isdigit(s[0]) &&
	       g_ascii_string_to_unsigned(s, 10, 0, max, out, NULL);
}

static bool invalid(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

static bool invalid(GError **error, const char *fmt, ...)
{
	va_list ap;
	g_autofree char *msg = NULL;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_set_error_literal(error, VPD_STATE_ERROR, VPD_STATE_ERR_INVALID, msg);
	return false;
}

/*
 * Write a temporary file and rename it over path: a reader (the next
 * daemon) sees the old or the new state, whenever the daemon dies.  No
 * fsync: the state describes claims of running VMs, which a power loss
 * ends along with the VFs themselves (the claims of another boot are
 * released), and fsync would cost every claim milliseconds.
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
 * milliseconds for a few hundred claims; vpd_state_parse() reads it with
 * GKeyFile.
 */
static bool write_snapshot(const struct vpd_pools *pools, const char *path, guint64 gen,
			   const char *boot_id, GError **error)
{
	g_autoptr(GString) out = g_string_sized_new(4096);
	g_autofree char *dir = g_path_get_dirname(path);

	g_string_append_printf(out, "# vdpa-pool-daemon: the claims of running VMs "
			       "(docs/daemon-admin.md); written by the daemon\n"
			       "[state]\nversion=%d\ngeneration=%" G_GUINT64_FORMAT "\n"
			       "boot-id=%s\n\n", STATE_VERSION, gen, boot_id);

	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];
		const struct vpd_vf_attrs *a = &e->attrs;
		const uint8_t *d = e->default_mac;

		if (!e->claimed)
			continue;
		g_string_append_printf(out, "[claim %s %u]\npf=%s\nowner=", e->pool->name, e->vf,
				       e->pool->pf->name);
		append_value(out, e->owner ? e->owner : "");
		g_string_append_printf(out,
				       "\nuid=%u\npid=%d\nstart-time=%" G_GUINT64_FORMAT "\n"
				       "mac=%02x:%02x:%02x:%02x:%02x:%02x\n"
				       "vlan=%u\nqos=%u\nvlan-proto=%u\nspoofchk=%s\ntrust=%s\n"
				       "link-state=%u\nmin-tx-rate=%u\nmax-tx-rate=%u\n"
				       "daemon-mac=%02x:%02x:%02x:%02x:%02x:%02x\nhandover-from=",
				       (unsigned)e->uid, (int)e->pid, e->start_time, a->mac[0],
				       a->mac[1], a->mac[2], a->mac[3], a->mac[4], a->mac[5],
				       a->vlan, a->qos, a->vlan_proto,
				       a->spoofchk ? "true" : "false", a->trust ? "true" : "false",
				       (unsigned)a->link_state, a->min_tx_rate, a->max_tx_rate,
				       d[0], d[1], d[2], d[3], d[4], d[5]);
		if (e->mac_from)
			g_string_append_printf(out, "%u",
					       ((const struct vpd_entry *)
						pools->entries->pdata[e->mac_from - 1])->vf);
		g_string_append(out, "\n\n");
	}
	if (g_mkdir_with_parents(dir, 0700) < 0) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "cannot create %s: %s", dir, g_strerror(errno));
		return false;
	}
	return write_atomically(path, out->str, out->len, error);
}

/* ---- loading ------------------------------------------------------------ */

/* A claim as the file records it. */
struct record {
	const char *pool;
	unsigned vf;
	const char *pf;             /* NULL: not recorded (format 1) */
	const char *owner;
	uid_t uid;
	pid_t pid;
	guint64 start_time;         /* 0: not recorded */
	struct vpd_vf_attrs a;
	bool has_daemon_mac;        /* (format 3) */
	uint8_t daemon_mac[6];      /* the VF's daemon MAC (a hand-over may have swapped it) */
	int handover_from;          /* the VF whose MAC it took over; -1: none */
};

/* A claim of a VF that no pool has any more: it may still be in use. */
struct stray {
	char *pf;                   /* NULL: unknown */
	pid_t pid;
	guint64 start_time;
};

static void stray_free(gpointer data)
{
	struct stray *s = data;

	g_free(s->pf);
	g_free(s);
}

struct load {
	struct vpd_pools *pools;
	const char *path;
	const char *boot_id;        /* this boot's */
	int version;                /* of the snapshot */
	char *file_boot;            /* the snapshot's boot id (format 2) */
	GHashTable *strays;         /* "POOL VF" -> struct stray * */
	struct vpd_state_report *report;
};

static struct vpd_entry *find_entry(struct vpd_pools *pools, const char *pool, unsigned vf)
{
	for (unsigned i = 0; i < pools->entries->len; i++) {
		struct vpd_entry *e = pools->entries->pdata[i];

		if (e->vf == vf && !strcmp(e->pool->name, pool))
			return e;
	}
	return NULL;
}

/* The PF of a configured pool, NULL when there is no such pool. */
static const char *pool_pf(const struct vpd_pools *pools, const char *pool)
{
	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];

		if (!strcmp(e->pool->name, pool))
			return e->pool->pf->name;
	}
	return NULL;
}

static void forget_claim(struct vpd_entry *e)
{
	e->mac_from = 0;
	g_clear_pointer(&e->owner, g_free);
	e->claimed = false;
	e->client = 0;
	e->uid = 0;
	e->pid = 0;
	e->start_time = 0;
	vpd_entry_default_attrs(e, &e->attrs);
}

/*
 * Mark the VF claimed as the record says; attributes re-checked against
 * today's policy, a MAC handed over between one VM's VFs included (the
 * records come in the order the daemon wrote them, so a migration's
 * source may still hold the MAC its destination took).
 */
static void apply_claim(struct load *ld, const struct record *r, const char *where)
{
	struct vpd_entry *e = find_entry(ld->pools, r->pool, r->vf);
	GError *err = NULL;

	if (!e) {
		struct stray *s = g_new0(struct stray, 1);
		const char *pf = r->pf ? r->pf : pool_pf(ld->pools, r->pool);

		s->pf = g_strdup(pf);
		s->pid = r->pid;
		s->start_time = r->start_time;
		g_hash_table_replace(ld->strays, g_strdup_printf("%s %u", r->pool, r->vf), s);
		return;
	}
	forget_claim(e);
	/* its daemon MAC first (its own MAC: a hand-over's may be its source's) */
	if (r->has_daemon_mac && !vpd_pools_take_default_mac(ld->pools, e, r->daemon_mac))
		g_warning("%s: daemon MAC %02x:%02x:%02x:%02x:%02x:%02x is no free VF's of pool "
			  "'%s'; the VF keeps its own", where, r->daemon_mac[0], r->daemon_mac[1],
			  r->daemon_mac[2], r->daemon_mac[3], r->daemon_mac[4], r->daemon_mac[5],
			  r->pool);
	vpd_entry_default_attrs(e, &e->attrs);
	e->claimed = true;
	e->uid = r->uid;
	e->pid = r->pid;
	e->start_time = r->start_time;
	e->owner = g_strdup(r->owner);
	if (!vpd_pools_set_attrs_from(ld->pools, e, 0, &r->a, VPD_HANDOVER_RESTORED, &err)) {
		g_warning("%s: %s; the VF keeps its defaults", where, err->message);
		g_error_free(err);
	}
	if (r->handover_from >= 0) {
		struct vpd_entry *src = find_entry(ld->pools, r->pool, r->handover_from);

		e->mac_from = src && src != e ? src->handle + 1 : 0;
	}
}

static void apply_free(struct load *ld, const char *pool, unsigned vf)
{
	struct vpd_entry *e = find_entry(ld->pools, pool, vf);
	g_autofree char *key = NULL;

	if (e) {
		forget_claim(e);
		return;
	}
	key = g_strdup_printf("%s %u", pool, vf);
	g_hash_table_remove(ld->strays, key);
}

static bool key_num(GKeyFile *kf, const char *g, const char *key, guint64 max, guint64 *out,
		    GError **error)
{
	g_autofree char *v = g_key_file_get_value(kf, g, key, NULL);

	return parse_num(v, max, out) || invalid(error, "[%s] has no valid %s", g, key);
}

static bool key_bool(GKeyFile *kf, const char *g, const char *key, bool *out, GError **error)
{
	g_autofree char *v = g_key_file_get_value(kf, g, key, NULL);

	if (v && (!strcmp(v, "true") || !strcmp(v, "false"))) {
		*out = !strcmp(v, "true");
		return true;
	}
	return invalid(error, "[%s] has no valid %s (true or false)", g, key);
}

/* Group g has each of the keys (a NULL-ended list) and no other. */
static bool keys_are(GKeyFile *kf, const char *g, const char *const *keys, GError **error)
{
	g_auto(GStrv) have = g_key_file_get_keys(kf, g, NULL, NULL);

	for (char **k = have; k && *k; k++)
		if (!g_strv_contains(keys, *k))
			return invalid(error, "[%s] has an unknown key '%s'", g, *k);
	for (const char *const *k = keys; *k; k++)
		if (!g_key_file_has_key(kf, g, *k, NULL))
			return invalid(error, "[%s] has no %s", g, *k);
	return true;
}

static bool parse_state_group(struct load *ld, GKeyFile *kf, guint64 *gen, GError **error)
{
	static const char *const v1_keys[] = { "generation", NULL };
	static const char *const v2_keys[] = { "version", "generation", "boot-id", NULL };
	guint64 version = 1;

	if (!g_key_file_has_group(kf, "state"))
		return invalid(error, "no [state] group");
	/* Format 1 (daemons before version 2) had no version key. */
	if (g_key_file_has_key(kf, "state", "version", NULL)) {
		g_autofree char *v = g_key_file_get_value(kf, "state", "version", NULL);

		if (!parse_num(v, G_MAXINT, &version) || version < 2 || version > STATE_VERSION)
			return invalid(error, "format version '%s' unknown (this daemon reads 1 "
				       "to %d)", v ? v : "", STATE_VERSION);
	}
	ld->version = version;
	if (!keys_are(kf, "state", version == 1 ? v1_keys : v2_keys, error) ||
	    !key_num(kf, "state", "generation", G_MAXUINT64 - 1, gen, error))
		return false;
	if (version == 1)
		return true;
	ld->file_boot = g_key_file_get_value(kf, "state", "boot-id", NULL);
	return vpd_boot_id_valid(ld->file_boot) ||
	       invalid(error, "[state] has no valid boot-id");
}

static bool parse_claim_group(struct load *ld, GKeyFile *kf, const char *g, GError **error)
{
	static const char *const v1_keys[] = {
		"owner", "uid", "pid", "mac", "vlan", "qos", "vlan-proto", "spoofchk", "trust",
		"link-state", "min-tx-rate", "max-tx-rate", NULL
	};
	static const char *const v2_keys[] = {
		"pf", "owner", "uid", "pid", "start-time", "mac", "vlan", "qos", "vlan-proto",
		"spoofchk", "trust", "link-state", "min-tx-rate", "max-tx-rate", NULL
	};
	static const char *const v3_keys[] = {
		"pf", "owner", "uid", "pid", "start-time", "mac", "vlan", "qos", "vlan-proto",
		"spoofchk", "trust", "link-state", "min-tx-rate", "max-tx-rate", "daemon-mac",
		"handover-from", NULL
	};
	g_auto(GStrv) words = g_strsplit(g, " ", 3);
	g_autofree char *mac = NULL;
	g_autofree char *owner = NULL;
	g_autofree char *pf = NULL;
	g_autofree char *where = g_strdup_printf("state file %s: [%s]", ld->path, g);
	struct record r = { .handover_from = -1 };
	guint64 vf, uid, pid, start = 0, vlan, qos, proto, link, min, max;

	if (g_strv_length(words) != 3 || strcmp(words[0], "claim") ||
	    !parse_num(words[2], 4095, &vf))
		return invalid(error, "unknown group [%s]", g);
	if (!keys_are(kf, g, ld->version == 1 ? v1_keys : ld->version == 2 ? v2_keys : v3_keys,
		      error) ||
	    !key_num(kf, g, "uid", G_MAXUINT32, &uid, error) ||
	    !key_num(kf, g, "pid", G_MAXINT32, &pid, error) ||
	    (ld->version > 1 && !key_num(kf, g, "start-time", G_MAXUINT64, &start, error)) ||
	    !key_num(kf, g, "vlan", G_MAXUINT16, &vlan, error) ||
	    !key_num(kf, g, "qos", G_MAXUINT8, &qos, error) ||
	    !key_num(kf, g, "vlan-proto", G_MAXUINT16, &proto, error) ||
	    !key_num(kf, g, "link-state", VPD_LINK_DISABLE, &link, error) ||
	    !key_num(kf, g, "min-tx-rate", G_MAXUINT32, &min, error) ||
	    !key_num(kf, g, "max-tx-rate", G_MAXUINT32, &max, error) ||
	    !key_bool(kf, g, "spoofchk", &r.a.spoofchk, error) ||
	    !key_bool(kf, g, "trust", &r.a.trust, error))
		return false;
	mac = g_key_file_get_value(kf, g, "mac", NULL);
	if (!parse_mac(mac, r.a.mac))
		return invalid(error, "[%s] has no valid mac", g);
	owner = g_key_file_get_string(kf, g, "owner", NULL);
	if (!owner)
		return invalid(error, "[%s] has no valid owner", g);
	if (ld->version > 1) {
		pf = g_key_file_get_value(kf, g, "pf", NULL);
		if (!pf || !*pf || strchr(pf, ' '))
			return invalid(error, "[%s] has no valid pf", g);
	}
	if (ld->version > 2) {
		g_autofree char *dmac = g_key_file_get_value(kf, g, "daemon-mac", NULL);
		g_autofree char *from = g_key_file_get_value(kf, g, "handover-from", NULL);
		guint64 v;

		if (!parse_mac(dmac, r.daemon_mac))
			return invalid(error, "[%s] has no valid daemon-mac", g);
		r.has_daemon_mac = true;
		if (from && *from && !parse_num(from, 4095, &v))
			return invalid(error, "[%s] has no valid handover-from (a VF or nothing)",
				       g);
		if (from && *from)
			r.handover_from = v;
	}
	r.pool = words[1];
	r.vf = vf;
	r.pf = pf;
	r.owner = owner;
	r.uid = uid;
	r.pid = pid;
	r.start_time = start;
	r.a.vlan = vlan;
	r.a.qos = qos;
	r.a.vlan_proto = proto;
	r.a.link_state = link;
	r.a.min_tx_rate = min;
	r.a.max_tx_rate = max;
	apply_claim(ld, &r, where);
	return true;
}

static bool parse_snapshot(struct load *ld, const char *text, gsize len, guint64 *gen,
			   GError **error)
{
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_auto(GStrv) groups = NULL;
	GError *err = NULL;

	/* GKeyFile stops at a NUL and would take what came before for all. */
	if (memchr(text, 0, len))
		return invalid(error, "binary data");
	if (!g_utf8_validate(text, len, NULL))
		return invalid(error, "not UTF-8 text");
	if (!g_key_file_load_from_data(kf, text, len, G_KEY_FILE_NONE, &err)) {
		invalid(error, "%s", err->message);
		g_error_free(err);
		return false;
	}
	if (!parse_state_group(ld, kf, gen, error))
		return false;
	groups = g_key_file_get_groups(kf, NULL);
	for (char **g = groups; *g; g++)
		if (strcmp(*g, "state") && !parse_claim_group(ld, kf, *g, error))
			return false;
	return true;
}

/*
 * A journal record's attributes, from its MAC field on (both formats):
 *   MAC VLAN QOS PROTO SPOOFCHK TRUST LINK MIN MAX
 */
static bool parse_record_attrs(char **f, struct vpd_vf_attrs *a)
{
	guint64 vlan, qos, proto, spoof, trust, link, min, max;

	if (!parse_mac(f[0], a->mac) || !parse_num(f[1], G_MAXUINT16, &vlan) ||
	    !parse_num(f[2], G_MAXUINT8, &qos) || !parse_num(f[3], G_MAXUINT16, &proto) ||
	    !parse_num(f[4], 1, &spoof) || !parse_num(f[5], 1, &trust) ||
	    !parse_num(f[6], VPD_LINK_DISABLE, &link) ||
	    !parse_num(f[7], G_MAXUINT32, &min) || !parse_num(f[8], G_MAXUINT32, &max))
		return false;
	a->vlan = vlan;
	a->qos = qos;
	a->vlan_proto = proto;
	a->spoofchk = spoof;
	a->trust = trust;
	a->link_state = link;
	a->min_tx_rate = min;
	a->max_tx_rate = max;
	return true;
}

/*
 * A journal record of formats 2 and 3 (between the generation and the
 * checksum):
 *   GEN claim POOL VF PF UID PID START MAC VLAN QOS PROTO SPOOFCHK TRUST LINK MIN MAX OWNER
 *   GEN claim POOL VF PF UID PID START MAC VLAN QOS PROTO SPOOFCHK TRUST LINK MIN MAX
 *       DAEMON_MAC HANDOVER_FROM OWNER                                      (format 3)
 *   GEN free POOL VF
 * OWNER escaped with g_strescape(), its spaces as \040; HANDOVER_FROM a VF
 * index or "-" (none).
 */
static bool replay_record_v2(struct load *ld, char **f, guint64 gen, const char *where)
{
	g_autofree char *owner = NULL;
	guint64 g, vf, uid, pid, start, from;
	struct record r = { .handover_from = -1 };
	unsigned n = g_strv_length(f), n_claim = ld->version > 2 ? 20 : 18;

	if (n < 4 || !parse_num(f[0], G_MAXUINT64, &g) || !parse_num(f[3], 4095, &vf))
		return false;
	if (g != gen)
		return true;            /* of an older snapshot */
	if (!strcmp(f[1], "free") && n == 4) {
		apply_free(ld, f[2], vf);
		return true;
	}
	if (strcmp(f[1], "claim") || n != n_claim || !*f[4] ||
	    !parse_num(f[5], G_MAXUINT32, &uid) || !parse_num(f[6], G_MAXINT32, &pid) ||
	    !parse_num(f[7], G_MAXUINT64, &start) || !parse_record_attrs(f + 8, &r.a))
		return false;
	if (n_claim == 20) {
		if (!parse_mac(f[17], r.daemon_mac) ||
		    (strcmp(f[18], "-") && !parse_num(f[18], 4095, &from)))
			return false;
		r.has_daemon_mac = true;
		if (strcmp(f[18], "-"))
			r.handover_from = from;
	}
	owner = g_strcompress(f[n_claim - 1]);
	if (!g_utf8_validate(owner, -1, NULL))
		return false;
	r.pool = f[2];
	r.vf = vf;
	r.pf = f[4];
	r.owner = owner;
	r.uid = uid;
	r.pid = pid;
	r.start_time = start;
	apply_claim(ld, &r, where);
	return true;
}

/*
 * Format 1 (older daemons), without checksum, process start time or PF:
 *   GEN claim POOL VF UID PID MAC VLAN QOS PROTO SPOOFCHK TRUST LINK MIN MAX OWNER
 *   GEN free POOL VF
 * OWNER is the rest of the line, escaped with g_strescape().
 */
static bool replay_record_v1(struct load *ld, const char *line, guint64 gen, const char *where)
{
	g_auto(GStrv) f = g_strsplit(line, " ", 16);
	g_autofree char *owner = NULL;
	guint64 g, vf, uid, pid;
	struct record r = { .handover_from = -1 };
	unsigned n = g_strv_length(f);

	if (n < 4 || !parse_num(f[0], G_MAXUINT64, &g) || !parse_num(f[3], 4095, &vf))
		return false;
	if (g != gen)
		return true;
	if (!strcmp(f[1], "free")) {
		apply_free(ld, f[2], vf);
		return true;
	}
	if (strcmp(f[1], "claim") || n != 16 || !parse_num(f[4], G_MAXUINT32, &uid) ||
	    !parse_num(f[5], G_MAXINT32, &pid) || !parse_record_attrs(f + 6, &r.a))
		return false;
	owner = g_strcompress(f[15]);
	if (!g_utf8_validate(owner, -1, NULL))
		return false;
	r.pool = f[2];
	r.vf = vf;
	r.owner = owner;
	r.uid = uid;
	r.pid = pid;
	apply_claim(ld, &r, where);
	return true;
}

/*
 * Each line of the journal in turn.  Format 2: a record is a line that
 * ends in the CRC-32 of what comes before its last space; anything else
 * (a write cut short, damage) is ignored with a warning.  Format 1: a last
 * line without its newline is ignored.
 */
static void replay_journal(struct load *ld, const char *jpath, const char *text, gsize len,
			   guint64 gen)
{
	const char *end = text + len;
	unsigned lineno = 0;

	for (const char *line = text; line < end; lineno++) {
		const char *nl = memchr(line, '\n', end - line);
		gsize n = (nl ? nl : end) - line;
		g_autofree char *s = g_strndup(line, n);
		g_autofree char *where = g_strdup_printf("journal %s:%u", jpath, lineno + 1);
		char *crc;
		guint64 sum;
		bool ok;

		line += n + 1;
		if (n == 0)
			continue;
		if (ld->version == 1) {
			if (!nl)
				continue;   /* cut short */
			ok = strlen(s) == n && replay_record_v1(ld, s, gen, where);
		} else {
			g_auto(GStrv) f = NULL;

			crc = strrchr(s, ' ');
			ok = nl && strlen(s) == n && crc && strlen(crc + 1) == 8 &&
			     g_ascii_string_to_unsigned(crc + 1, 16, 0, G_MAXUINT32, &sum, NULL) &&
			     sum == vpd_state_crc32(s, crc - s);
			if (ok) {
				*crc = 0;
				f = g_strsplit(s, " ", -1);
				ok = replay_record_v2(ld, f, gen, where);
			}
		}
		if (!ok) {
			g_warning("%s: record damaged or cut short, ignored", where);
			ld->report->damaged++;
		}
	}
}

enum identity { ID_OK, ID_UNKNOWN, ID_OTHER_BOOT, ID_GONE, ID_OTHER_PROCESS };

/* Whether the claimant (pid, start_time) of the file is the process of that pid now. */
static enum identity identify(const struct load *ld, pid_t pid, guint64 start_time,
			      guint64 *now)
{
	*now = 0;
	if (ld->version < 2)
		return ID_UNKNOWN;
	if (strcmp(ld->file_boot, ld->boot_id))
		return ID_OTHER_BOOT;
	if (!start_time)
		return ID_UNKNOWN;
	*now = vpd_proc_start_time(pid);
	if (!*now)
		return ID_GONE;
	return *now == start_time ? ID_OK : ID_OTHER_PROCESS;
}

static void count_in_use(struct load *ld, const char *pf)
{
	gpointer n = g_hash_table_lookup(ld->report->in_use, pf);

	g_hash_table_replace(ld->report->in_use, g_strdup(pf),
			     GUINT_TO_POINTER(GPOINTER_TO_UINT(n) + 1));
}

/* Release each claim whose process is not the claimant; count what may be in use. */
static void check_claimants(struct load *ld)
{
	GHashTableIter it;
	gpointer key, value;

	for (unsigned i = 0; i < ld->pools->entries->len; i++) {
		struct vpd_entry *e = ld->pools->entries->pdata[i];
		g_autofree char *where = NULL;
		guint64 now;

		if (!e->claimed)
			continue;
		where = g_strdup_printf("state file %s: [claim %s %u]", ld->path, e->pool->name,
					e->vf);
		switch (identify(ld, e->pid, e->start_time, &now)) {
		case ID_OK:
			ld->report->restored++;
			count_in_use(ld, e->pool->pf->name);
			continue;
		case ID_UNKNOWN:
			if (ld->version < 2)
				g_warning("%s: the state file (format 1) does not say which "
					  "process claimed it, only its pid (%d): released; if "
					  "that process still holds the VF's device, the VF is "
					  "quarantined", where, (int)e->pid);
			else
				g_warning("%s: the start time of its claimant (pid %d) was not "
					  "known: released; if that process still holds the VF's "
					  "device, the VF is quarantined", where, (int)e->pid);
			count_in_use(ld, e->pool->pf->name);
			break;
		case ID_OTHER_BOOT:
			g_message("%s: claimed during another boot of the host (boot id %s): "
				  "released", where, ld->file_boot);
			break;
		case ID_GONE:
			g_message("%s: pid %d is gone: released", where, (int)e->pid);
			break;
		case ID_OTHER_PROCESS:
			g_warning("%s: pid %d is another process now (started at %"
				  G_GUINT64_FORMAT ", the claimant at %" G_GUINT64_FORMAT
				  "): released", where, (int)e->pid, now, e->start_time);
			break;
		}
		forget_claim(e);
		ld->report->released++;
	}
	g_hash_table_iter_init(&it, ld->strays);
	while (g_hash_table_iter_next(&it, &key, &value)) {
		struct stray *s = value;
		enum identity id;
		guint64 now;

		id = identify(ld, s->pid, s->start_time, &now);
		if ((id == ID_OK || id == ID_UNKNOWN) && s->pf) {
			count_in_use(ld, s->pf);
			g_warning("state file %s: no pool has VF '%s' any more; the claim of "
				  "pid %d is dropped, but that process may still use it: PF %s "
				  "keeps its number of VFs", ld->path, (const char *)key,
				  (int)s->pid, s->pf);
		} else {
			g_warning("state file %s: no pool has VF '%s' any more; its claim is "
				  "dropped", ld->path, (const char *)key);
		}
	}
}

void vpd_state_report_clear(struct vpd_state_report *r)
{
	g_clear_pointer(&r->moved_to, g_free);
	g_clear_pointer(&r->in_use, g_hash_table_unref);
	memset(r, 0, sizeof(*r));
}

static void report_init(struct vpd_state_report *r)
{
	vpd_state_report_clear(r);
	r->in_use = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
}

bool vpd_state_parse(struct vpd_pools *pools, const char *path, const char *snapshot,
		     gsize len, const char *journal, gsize jlen, const char *boot_id,
		     guint64 *gen, struct vpd_state_report *report, GError **error)
{
	g_autofree char *jpath = g_strdup_printf("%s.journal", path);
	struct load ld = {
		.pools = pools,
		.path = path,
		.boot_id = boot_id,
		.version = STATE_VERSION,
		.report = report,
	};

	/* (the daemon's MACs as given: a refused file leaves them so) */
	g_autofree uint8_t *given = g_malloc(6 * pools->entries->len + 1);

	for (unsigned i = 0; i < pools->entries->len; i++)
		memcpy(given + 6 * i, ((struct vpd_entry *)pools->entries->pdata[i])->default_mac, 6);
	report_init(report);
	ld.strays = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, stray_free);
	*gen = 0;
	if (snapshot && !parse_snapshot(&ld, snapshot, len, gen, error)) {
		for (unsigned i = 0; i < pools->entries->len; i++) {
			struct vpd_entry *e = pools->entries->pdata[i];

			forget_claim(e);
			memcpy(e->default_mac, given + 6 * i, 6);
			vpd_entry_default_attrs(e, &e->attrs);
		}
		g_hash_table_unref(ld.strays);
		g_free(ld.file_boot);
		return false;
	}
	if (!ld.file_boot)
		ld.file_boot = g_strdup(boot_id);
	if (journal)
		replay_journal(&ld, jpath, journal, jlen, *gen);
	check_claimants(&ld);
	/* hand-overs whose source's claimant went while the daemon was away */
	vpd_pools_settle_handovers(pools);
	g_hash_table_unref(ld.strays);
	g_free(ld.file_boot);
	return true;
}

/* ---- the open state ----------------------------------------------------- */

struct vpd_state {
	char *path;
	char *jpath;
	char *boot_id;
	guint64 gen;
	int fd;                 /* the journal, O_APPEND */
	unsigned lines;
};

/* A new snapshot of everything, then an empty journal. */
static bool compact(struct vpd_state *st, const struct vpd_pools *pools, GError **error)
{
	if (!write_snapshot(pools, st->path, st->gen + 1, st->boot_id, error))
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

/* The contents of path, NULL without error when there is no such file. */
static bool read_if_there(const char *path, char **text, gsize *len, GError **error)
{
	GError *err = NULL;

	*text = NULL;
	*len = 0;
	if (g_file_get_contents(path, text, len, &err))
		return true;
	if (g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
		g_error_free(err);
		return true;
	}
	g_propagate_prefixed_error(error, err, "state file: ");
	return false;
}

/* Rename path to path.corrupt-TIME (made unique), which is returned. */
static char *move_aside(const char *path, const char *stamp, GError **error)
{
	g_autofree char *to = g_strdup_printf("%s.corrupt-%s", path, stamp);

	for (unsigned i = 2; g_file_test(to, G_FILE_TEST_EXISTS); i++) {
		g_free(to);
		to = g_strdup_printf("%s.corrupt-%s-%u", path, stamp, i);
	}
	if (rename(path, to) < 0) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "cannot move the invalid state file %s aside: %s", path,
			    g_strerror(errno));
		return NULL;
	}
	return g_steal_pointer(&to);
}

struct vpd_state *vpd_state_open(struct vpd_pools *pools, const char *path,
				 const char *boot_id, struct vpd_state_report *report,
				 GError **error)
{
	struct vpd_state *st = g_new0(struct vpd_state, 1);
	g_autofree char *snapshot = NULL;
	g_autofree char *journal = NULL;
	g_autoptr(GError) err = NULL;
	gsize len, jlen;

	st->path = g_strdup(path);
	st->jpath = g_strdup_printf("%s.journal", path);
	st->boot_id = g_strdup(boot_id);
	st->fd = -1;
	if (!read_if_there(path, &snapshot, &len, error) ||
	    !read_if_there(st->jpath, &journal, &jlen, error))
		goto fail;
	if (!vpd_state_parse(pools, path, snapshot, len, journal, jlen, boot_id, &st->gen,
			     report, &err)) {
		g_autoptr(GDateTime) now = g_date_time_new_now_utc();
		g_autofree char *stamp = g_date_time_format(now, "%Y%m%dT%H%M%SZ");
		g_autofree char *jaside = NULL;

		if (!g_error_matches(err, VPD_STATE_ERROR, VPD_STATE_ERR_INVALID)) {
			g_propagate_error(error, g_steal_pointer(&err));
			goto fail;
		}
		report->moved_to = move_aside(path, stamp, error);
		if (!report->moved_to)
			goto fail;
		if (journal && !(jaside = move_aside(st->jpath, stamp, error)))
			goto fail;
		g_warning("state file %s is not a state file of this daemon (%s): moved to %s%s%s; "
			  "the claims it held are lost: a VF whose device is held open is "
			  "quarantined", path, err->message, report->moved_to,
			  jaside ? ", its journal to " : "", jaside ? jaside : "");
		st->gen = 0;
	}
	if (!compact(st, pools, error))
		goto fail;
	st->fd = open(st->jpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (st->fd < 0) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "cannot open %s: %s", st->jpath, g_strerror(errno));
		goto fail;
	}
	return st;
fail:
	vpd_state_close(st);
	return NULL;
}

bool vpd_state_record(struct vpd_state *st, const struct vpd_pools *pools,
		      const struct vpd_entry *e, GError **error)
{
	g_autofree char *body = NULL;
	g_autofree char *line = NULL;
	const struct vpd_vf_attrs *a = &e->attrs;
	size_t len;

	if (e->claimed) {
		g_autofree char *escaped = g_strescape(e->owner ? e->owner : "", NULL);
		g_auto(GStrv) words = g_strsplit(escaped, " ", -1);
		g_autofree char *owner = g_strjoinv("\\040", words);

		const uint8_t *d = e->default_mac;
		g_autofree char *from = e->mac_from ?
			g_strdup_printf("%u", ((const struct vpd_entry *)
					       pools->entries->pdata[e->mac_from - 1])->vf) :
			g_strdup("-");

		body = g_strdup_printf("%" G_GUINT64_FORMAT " claim %s %u %s %u %d %"
				       G_GUINT64_FORMAT " %02x:%02x:%02x:%02x:%02x:%02x "
				       "%u %u %u %u %u %u %u %u "
				       "%02x:%02x:%02x:%02x:%02x:%02x %s %s",
				       st->gen, e->pool->name, e->vf, e->pool->pf->name,
				       (unsigned)e->uid, (int)e->pid, e->start_time, a->mac[0],
				       a->mac[1], a->mac[2], a->mac[3], a->mac[4], a->mac[5],
				       a->vlan, a->qos, a->vlan_proto, a->spoofchk, a->trust,
				       (unsigned)a->link_state, a->min_tx_rate, a->max_tx_rate,
				       d[0], d[1], d[2], d[3], d[4], d[5], from, owner);
	} else {
		body = g_strdup_printf("%" G_GUINT64_FORMAT " free %s %u", st->gen, e->pool->name,
				       e->vf);
	}
	/* The leading newline ends whatever a write cut short left behind. */
	line = g_strdup_printf("\n%s %08x\n", body, vpd_state_crc32(body, strlen(body)));
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
	g_free(st->boot_id);
	g_free(st);
}
