// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ovs: OVSDB over JSON-RPC and OpenFlow 1.4 over the bridge's management
 * socket, both spoken directly (see ovs.h).  Requests block the daemon's
 * loop for at most IO_TIMEOUT_MS each; a connection that fails is opened
 * again once before the request fails.
 */
#include "ovs.h"
#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <gio/gio.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define IO_TIMEOUT_MS 10000
#define OFPP_NORMAL 0xfffffffau
#define OFPP_ANY 0xffffffffu
#define OFPG_ANY 0xffffffffu
#define OFP_NO_BUFFER 0xffffffffu
#define OFPBCT_OPEN_REQUEST 0
#define OFPBCT_COMMIT_REQUEST 4
#define OFPBCT_DISCARD_REQUEST 6
#define OFPBF_ATOMIC 1
#define OFPMP_FLOW 1

struct conn {
	int fd;
	GByteArray *in;
};

struct vpd_ovs {
	const struct vpd_config *cfg;
	char *db_path;     /* OVSDB's unix socket */
	char *mgmt_path;   /* the bridge's OpenFlow management socket */
	struct conn db, of;
	GHashTable *rows;  /* entry -> the OVSDB update last committed for it */
	GHashTable *open;  /* entries whose allow flow OVS holds */
	GHashTable *dirty; /* entries whose last change failed: to do again */
	bool connected;    /* OpenFlow has been connected once */
	bool need_sync;    /* ovs-vswitchd came back: its flows are gone */
	bool sync_failing; /* the last vpd_ovs_tick() could not restore them */
	unsigned db_id;
	uint32_t xid;
	uint32_t bundle;
};

static bool fail(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

static bool fail(GError **error, const char *fmt, ...)
{
	va_list ap;
	g_autofree char *msg = NULL;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, msg);
	return false;
}

/*
 * OVS not there, not answering or gone: G_IO_ERROR_NOT_CONNECTED,
 * _TIMED_OUT or _CONNECTION_CLOSED, which vpd_ovs_error_is_transient()
 * tells apart from errors that waiting does not mend.
 */
static bool fail_code(GError **error, int code, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

static bool fail_code(GError **error, int code, const char *fmt, ...)
{
	va_list ap;
	g_autofree char *msg = NULL;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_set_error_literal(error, G_IO_ERROR, code, msg);
	return false;
}

bool vpd_ovs_error_is_transient(const GError *err)
{
	return g_error_matches(err, G_IO_ERROR, G_IO_ERROR_NOT_CONNECTED) ||
	       g_error_matches(err, G_IO_ERROR, G_IO_ERROR_TIMED_OUT) ||
	       g_error_matches(err, G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED);
}

/* ---- the flow model ----------------------------------------------------- */

uint64_t vpd_flow_cookie(enum vpd_flow_kind kind, unsigned pf_index, unsigned vf)
{
	return VPD_COOKIE_MAGIC | (uint64_t)kind << 40 | (uint64_t)(pf_index & 0xffffff) << 16 |
	       (vf & 0xffff);
}

uint32_t vpd_vf_ofport(unsigned pf_index, unsigned vf)
{
	return pf_index * VPD_OFPORT_PER_PF + vf + 1;
}

unsigned vpd_vf_flows(const struct vpd_entry *e, unsigned pf_index, struct vpd_flow out[2])
{
	static const uint8_t zero[6];
	uint32_t port = vpd_vf_ofport(pf_index, e->vf);
	unsigned n = 0;

	out[n++] = (struct vpd_flow) {
		.cookie = vpd_flow_cookie(VPD_FLOW_DENY, pf_index, e->vf),
		.priority = 10, .in_port = port,
	};
	if (vpd_entry_passes(e)) {
		out[n] = (struct vpd_flow) {
			.cookie = vpd_flow_cookie(VPD_FLOW_ALLOW, pf_index, e->vf),
			.priority = 100, .in_port = port, .normal = true,
		};
		if (e->attrs.spoofchk && memcmp(e->attrs.mac, zero, 6)) {
			out[n].match_src = true;
			memcpy(out[n].src, e->attrs.mac, 6);
		}
		n++;
	}
	return n;
}

uint64_t vpd_vf_policing_rate(const struct vpd_entry *e)
{
	return e->claimed ? (uint64_t)vpd_entry_max_tx_rate(e) * 1000 : 0;
}

char *vpd_flow_to_string(const struct vpd_flow *f)
{
	GString *s = g_string_new(NULL);

	g_string_append_printf(s, "cookie=0x%" G_GINT64_MODIFIER "x, priority=%u", f->cookie,
			       f->priority);
	if (f->in_port)
		g_string_append_printf(s, ",in_port=%u", f->in_port);
	if (f->match_src)
		g_string_append_printf(s, ",dl_src=%02x:%02x:%02x:%02x:%02x:%02x", f->src[0],
				       f->src[1], f->src[2], f->src[3], f->src[4], f->src[5]);
	g_string_append(s, f->normal ? " actions=NORMAL" : " actions=drop");
	return g_string_free(s, FALSE);
}

/* ---- OpenFlow encoding -------------------------------------------------- */

static void put8(GByteArray *b, uint8_t v)
{
	g_byte_array_append(b, &v, 1);
}

static void put16(GByteArray *b, uint16_t v)
{
	uint16_t be = GUINT16_TO_BE(v);

	g_byte_array_append(b, (uint8_t *)&be, 2);
}

static void put32(GByteArray *b, uint32_t v)
{
	uint32_t be = GUINT32_TO_BE(v);

	g_byte_array_append(b, (uint8_t *)&be, 4);
}

static void put64(GByteArray *b, uint64_t v)
{
	uint64_t be = GUINT64_TO_BE(v);

	g_byte_array_append(b, (uint8_t *)&be, 8);
}

static void pad(GByteArray *b, unsigned n)
{
	static const uint8_t zero[8];

	g_byte_array_append(b, zero, n);
}

static void set16(GByteArray *b, guint at, uint16_t v)
{
	b->data[at] = v >> 8;
	b->data[at + 1] = v;
}

static uint16_t get16(const uint8_t *p)
{
	return p[0] << 8 | p[1];
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

void vpd_of_header(GByteArray *out, uint8_t type, uint16_t len, uint32_t xid)
{
	put8(out, VPD_OFP_VERSION);
	put8(out, type);
	put16(out, len);
	put32(out, xid);
}

/* An OXM match of f (in_port, eth_src), padded to 8 bytes. */
static void put_match(GByteArray *b, const struct vpd_flow *f)
{
	guint start = b->len;

	put16(b, 1);  /* OFPMT_OXM */
	put16(b, 0);
	if (f && f->in_port) {
		put32(b, 0x80000000u | 0 << 9 | 4);   /* OXM_OF_IN_PORT */
		put32(b, f->in_port);
	}
	if (f && f->match_src) {
		put32(b, 0x80000000u | 4 << 9 | 6);   /* OXM_OF_ETH_SRC */
		g_byte_array_append(b, f->src, 6);
	}
	set16(b, start + 2, b->len - start);
	pad(b, (8 - (b->len - start) % 8) % 8);
}

void vpd_of_flow_mod(GByteArray *out, uint32_t xid, uint8_t command, const struct vpd_flow *f,
		     uint64_t cookie_mask)
{
	guint start = out->len;
	bool add = command == VPD_OFPFC_ADD;

	vpd_of_header(out, VPD_OFPT_FLOW_MOD, 0, xid);
	put64(out, f->cookie);
	put64(out, add ? 0 : cookie_mask);
	put8(out, 0);                 /* table 0 */
	put8(out, command);
	put16(out, 0);                /* idle timeout */
	put16(out, 0);                /* hard timeout */
	put16(out, add ? f->priority : 0);
	put32(out, OFP_NO_BUFFER);
	put32(out, OFPP_ANY);         /* out_port: DELETE matches any */
	put32(out, OFPG_ANY);
	put16(out, add ? 4 : 0);      /* OFPFF_RESET_COUNTS */
	put16(out, 0);                /* importance */
	put_match(out, add ? f : NULL);
	if (add && f->normal) {
		put16(out, 4);        /* OFPIT_APPLY_ACTIONS */
		put16(out, 24);
		pad(out, 4);
		put16(out, 0);        /* OFPAT_OUTPUT */
		put16(out, 16);
		put32(out, OFPP_NORMAL);
		put16(out, 0xffff);   /* max_len: no buffering */
		pad(out, 6);
	}
	set16(out, start + 2, out->len - start);
}

void vpd_of_bundle_ctrl(GByteArray *out, uint32_t xid, uint32_t bundle, uint16_t type)
{
	vpd_of_header(out, VPD_OFPT_BUNDLE_CONTROL, 16, xid);
	put32(out, bundle);
	put16(out, type);
	put16(out, OFPBF_ATOMIC);
}

void vpd_of_bundle_add(GByteArray *out, uint32_t xid, uint32_t bundle, const GByteArray *msg)
{
	guint start = out->len;

	vpd_of_header(out, VPD_OFPT_BUNDLE_ADD_MESSAGE, 0, xid);
	put32(out, bundle);
	pad(out, 2);
	put16(out, OFPBF_ATOMIC);
	g_byte_array_append(out, msg->data, msg->len);
	/* The inner message carries the xid of the message that wraps it. */
	memcpy(out->data + start + 20, out->data + start + 4, 4);
	set16(out, start + 2, out->len - start);
}

/* ---- sockets ------------------------------------------------------------ */

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (c->in)
		g_byte_array_set_size(c->in, 0);
}

static bool conn_open(struct conn *c, const char *path, const char *what, GError **error)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = IO_TIMEOUT_MS / 1000 };

	conn_close(c);
	if (!c->in)
		c->in = g_byte_array_new();
	if (strlen(path) >= sizeof(sa.sun_path))
		return fail(error, "%s: socket path %s too long", what, path);
	strcpy(sa.sun_path, path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	/* A peer that stops reading blocks a send at most this long. */
	if (c->fd >= 0)
		setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		conn_close(c);
		return fail_code(error, G_IO_ERROR_NOT_CONNECTED, "%s: cannot connect to %s: %s",
				 what, path, g_strerror(e));
	}
	return true;
}

static bool conn_send(struct conn *c, const void *data, gsize len, const char *what,
		      GError **error)
{
	const uint8_t *p = data;

	while (len) {
		ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = errno;

			conn_close(c);
			return fail_code(error, G_IO_ERROR_CONNECTION_CLOSED, "%s: send: %s", what,
					 g_strerror(e));
		}
		p += n;
		len -= n;
	}
	return true;
}

/* Read more into c->in, waiting at most until deadline (monotonic, us). */
static bool conn_recv(struct conn *c, gint64 deadline, const char *what, GError **error)
{
	uint8_t buf[16384];
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	gint64 left = (deadline - g_get_monotonic_time()) / 1000;
	ssize_t n;
	int r;

	if (left <= 0 || (r = poll(&pfd, 1, left)) == 0) {
		conn_close(c);
		return fail_code(error, G_IO_ERROR_TIMED_OUT, "%s: no answer within %d s", what,
				 IO_TIMEOUT_MS / 1000);
	}
	n = r < 0 ? -1 : recv(c->fd, buf, sizeof(buf), 0);
	if (n < 0 && errno == EINTR)
		return true;
	if (n <= 0) {
		int e = n ? errno : 0;

		conn_close(c);
		return fail_code(error, G_IO_ERROR_CONNECTION_CLOSED, "%s: connection closed%s%s",
				 what, e ? ": " : "",
			    e ? g_strerror(e) : "");
	}
	g_byte_array_append(c->in, buf, n);
	return true;
}

/* ---- OVSDB -------------------------------------------------------------- */

static bool db_connect(struct vpd_ovs *o, GError **error)
{
	return o->db.fd >= 0 || conn_open(&o->db, o->db_path, "OVSDB", error);
}

/* Send one "transact" on Open_vSwitch with ops (a JSON array's elements). */
static bool db_send(struct vpd_ovs *o, const char *ops, unsigned *id, GError **error)
{
	g_autoptr(GString) req = g_string_new(NULL);

	if (!db_connect(o, error))
		return false;
	*id = ++o->db_id;
	g_string_printf(req, "{\"method\":\"transact\",\"params\":[\"Open_vSwitch\",%s],"
			"\"id\":%u}", ops, *id);
	return conn_send(&o->db, req->str, req->len, "OVSDB", error);
}

/* The result array of transaction id, each operation's errors turned into error. */
static struct vpd_json *db_wait(struct vpd_ovs *o, unsigned id, GError **error)
{
	gint64 deadline = g_get_monotonic_time() + IO_TIMEOUT_MS * 1000ll;

	for (;;) {
		gssize span = o->db.fd < 0 ? -1 : vpd_json_span((char *)o->db.in->data, o->db.in->len);
		g_autoptr(vpd_json) msg = NULL;
		const struct vpd_json *mid, *method, *result, *err;

		if (o->db.fd < 0) {
			fail(error, "OVSDB: connection lost");
			return NULL;
		}
		if (span < 0) {
			conn_close(&o->db);
			fail(error, "OVSDB sent something that is not JSON-RPC");
			return NULL;
		}
		if (span == 0) {
			if (!conn_recv(&o->db, deadline, "OVSDB", error))
				return NULL;
			continue;
		}
		msg = vpd_json_parse((char *)o->db.in->data, span, error);
		g_byte_array_remove_range(o->db.in, 0, span);
		if (!msg) {
			conn_close(&o->db);
			return NULL;
		}
		method = vpd_json_get(msg, "method");
		mid = vpd_json_get(msg, "id");
		if (method && method->type == VPD_JSON_STRING && !strcmp(method->str, "echo")) {
			/* The server's keep-alive: answer with its own params. */
			g_autoptr(GString) r = g_string_new("{\"id\":");

			if (mid && mid->type == VPD_JSON_STRING)
				vpd_json_put_str(r, mid->str);
			else if (mid && mid->type == VPD_JSON_NUMBER)
				g_string_append_printf(r, "%.0f", mid->num);
			else
				g_string_append(r, "null");
			g_string_append(r, ",\"result\":[],\"error\":null}");
			if (!conn_send(&o->db, r->str, r->len, "OVSDB", error))
				return NULL;
			continue;
		}
		if (!mid || mid->type != VPD_JSON_NUMBER || mid->num != id)
			continue;  /* a notification or an old reply */
		err = vpd_json_get(msg, "error");
		if (err && err->type != VPD_JSON_NULL) {
			fail(error, "OVSDB refused the transaction: %s",
			     err->type == VPD_JSON_STRING ? err->str : "(error)");
			return NULL;
		}
		result = vpd_json_get(msg, "result");
		if (!result || result->type != VPD_JSON_ARRAY) {
			fail(error, "OVSDB's reply has no result");
			return NULL;
		}
		for (unsigned i = 0; i < vpd_json_len(result); i++) {
			const struct vpd_json *r = vpd_json_at(result, i);
			const struct vpd_json *e = vpd_json_get(r, "error");
			const struct vpd_json *d = vpd_json_get(r, "details");

			if (e && e->type == VPD_JSON_STRING) {
				fail(error, "OVSDB: operation %u failed: %s%s%s", i, e->str,
				     d && d->type == VPD_JSON_STRING ? ": " : "",
				     d && d->type == VPD_JSON_STRING ? d->str : "");
				return NULL;
			}
		}
		/* Take the result out of the message before it is freed. */
		for (unsigned i = 0; i < msg->keys->len; i++) {
			if (!strcmp(msg->keys->pdata[i], "result"))
				return g_ptr_array_steal_index(msg->items, i);
		}
		return NULL;
	}
}

/* Send with one reconnection if the connection had gone stale. */
static bool db_send_retry(struct vpd_ovs *o, const char *ops, unsigned *id, GError **error)
{
	g_autoptr(GError) first = NULL;

	if (db_send(o, ops, id, &first))
		return true;
	return db_send(o, ops, id, error);
}

static struct vpd_json *db_transact(struct vpd_ovs *o, const char *ops, GError **error)
{
	unsigned id;

	if (!db_send_retry(o, ops, &id, error))
		return NULL;
	return db_wait(o, id, error);
}

/* The "count" of operation i of a transaction's result. */
static int op_count(const struct vpd_json *result, unsigned i)
{
	const struct vpd_json *c = vpd_json_get(vpd_json_at(result, i), "count");

	return c && c->type == VPD_JSON_NUMBER ? (int)c->num : -1;
}

/* ---- OpenFlow ----------------------------------------------------------- */

static bool of_connect(struct vpd_ovs *o, GError **error)
{
	GByteArray *hello;
	gint64 deadline;
	bool ok;

	if (o->of.fd >= 0)
		return true;
	deadline = g_get_monotonic_time() + IO_TIMEOUT_MS * 1000ll;
	if (!conn_open(&o->of, o->mgmt_path, "OpenFlow", error))
		return false;
	hello = g_byte_array_new();
	vpd_of_header(hello, VPD_OFPT_HELLO, 8, ++o->xid);
	ok = conn_send(&o->of, hello->data, hello->len, "OpenFlow", error);
	g_byte_array_unref(hello);
	while (ok && (o->of.in->len < 8 || o->of.in->len < get16(o->of.in->data + 2)))
		ok = conn_recv(&o->of, deadline, "OpenFlow", error);
	if (!ok)
		return false;
	if (o->of.in->data[1] != VPD_OFPT_HELLO || o->of.in->data[0] < VPD_OFP_VERSION) {
		conn_close(&o->of);
		return fail(error, "OpenFlow: bridge %s does not speak OpenFlow 1.4 (add "
			    "OpenFlow14 to its protocols)", o->cfg->ovs_bridge);
	}
	g_byte_array_remove_range(o->of.in, 0, get16(o->of.in->data + 2));
	/* Again: ovs-vswitchd may have restarted, without any of our flows. */
	if (o->connected)
		o->need_sync = true;
	o->connected = true;
	return true;
}

typedef bool (*of_msg_fn)(const uint8_t *msg, guint len, void *opaque);

/*
 * Read messages until the reply of type want to xid has come (for
 * multipart replies: its last part), answering echo requests.  An error
 * reply to xid ends the wait; one to an earlier request of the same batch
 * (first_xid to xid) is remembered and fails the wait once xid's reply has
 * come.  each, if given, sees every message of type want to xid.
 */
static bool of_wait(struct vpd_ovs *o, uint32_t first_xid, uint32_t xid, uint8_t want,
		    of_msg_fn each, void *opaque, GError **error)
{
	gint64 deadline = g_get_monotonic_time() + IO_TIMEOUT_MS * 1000ll;
	g_autofree char *refused = NULL;

	for (;;) {
		const uint8_t *m = o->of.in->data;
		guint len;

		if (o->of.fd < 0)
			return fail(error, "OpenFlow: connection lost");
		if (o->of.in->len < 8 || o->of.in->len < get16(m + 2)) {
			if (!conn_recv(&o->of, deadline, "OpenFlow", error))
				return false;
			continue;
		}
		len = get16(m + 2);
		if (len < 8) {
			conn_close(&o->of);
			return fail(error, "OpenFlow: a message of length %u", len);
		}
		if (m[1] == VPD_OFPT_ECHO_REQUEST) {
			g_autoptr(GByteArray) r = g_byte_array_new();

			g_byte_array_append(r, m, len);
			r->data[1] = VPD_OFPT_ECHO_REPLY;
			g_byte_array_remove_range(o->of.in, 0, len);
			if (!conn_send(&o->of, r->data, r->len, "OpenFlow", error))
				return false;
			continue;
		}
		if (m[1] == VPD_OFPT_ERROR) {
			uint16_t type = len >= 12 ? get16(m + 8) : 0;
			uint16_t code = len >= 12 ? get16(m + 10) : 0;
			uint32_t exid = get32(m + 4);

			g_byte_array_remove_range(o->of.in, 0, len);
			if (exid == xid)
				return fail(error, "OpenFlow: OVS refused request %u: error type %u "
					    "code %u", exid, type, code);
			if (exid >= first_xid && exid < xid && !refused)
				refused = g_strdup_printf("OpenFlow: OVS refused request %u: error "
							  "type %u code %u", exid, type, code);
			continue;
		}
		if (m[1] == want && get32(m + 4) == xid) {
			bool more = want == VPD_OFPT_MULTIPART_REPLY && len >= 12 &&
				    (get16(m + 10) & 1);
			bool ok = !each || each(m, len, opaque);

			g_byte_array_remove_range(o->of.in, 0, len);
			if (!ok)
				return fail(error, "OpenFlow: a malformed reply");
			if (more)
				continue;
			if (refused)
				return fail(error, "%s", refused);
			return true;
		}
		g_byte_array_remove_range(o->of.in, 0, len);
	}
}

/*
 * Run flow_mods as one atomic bundle: open, add each, commit.  OVS leaves
 * out an add it refuses and still commits the rest, so two ways:
 *
 * of_bundle_send() (the hot path of one VF's change) puts it all in one
 * write, and its callers put deletions first, so that a refusal leaves
 * the VF with fewer flows (default-deny), never more; of_wait(first,
 * commit) then waits for the commit and fails on any refusal.
 *
 * of_bundle_checked() (replacing every flow at start) sends a barrier
 * after the adds, so any refusal is known before anything is committed;
 * then the bundle is discarded.
 */
static bool of_bundle_send(struct vpd_ovs *o, const GPtrArray *mods, uint32_t *first,
			   uint32_t *commit, GError **error)
{
	g_autoptr(GByteArray) out = g_byte_array_new();
	uint32_t bundle = ++o->bundle;

	if (!of_connect(o, error))
		return false;
	*first = o->xid + 1;
	vpd_of_bundle_ctrl(out, ++o->xid, bundle, OFPBCT_OPEN_REQUEST);
	for (unsigned i = 0; i < mods->len; i++)
		vpd_of_bundle_add(out, ++o->xid, bundle, mods->pdata[i]);
	*commit = ++o->xid;
	vpd_of_bundle_ctrl(out, *commit, bundle, OFPBCT_COMMIT_REQUEST);
	return conn_send(&o->of, out->data, out->len, "OpenFlow", error);
}

static bool of_bundle_checked_once(struct vpd_ovs *o, const GPtrArray *mods, GError **error)
{
	g_autoptr(GByteArray) out = g_byte_array_new();
	uint32_t bundle = ++o->bundle, first, barrier, commit;
	GError *err = NULL;

	if (!of_connect(o, error))
		return false;
	first = o->xid + 1;
	vpd_of_bundle_ctrl(out, ++o->xid, bundle, OFPBCT_OPEN_REQUEST);
	for (unsigned i = 0; i < mods->len; i++)
		vpd_of_bundle_add(out, ++o->xid, bundle, mods->pdata[i]);
	barrier = ++o->xid;
	vpd_of_header(out, VPD_OFPT_BARRIER_REQUEST, 8, barrier);
	if (!conn_send(&o->of, out->data, out->len, "OpenFlow", error))
		return false;
	if (!of_wait(o, first, barrier, VPD_OFPT_BARRIER_REPLY, NULL, NULL, &err)) {
		g_byte_array_set_size(out, 0);
		vpd_of_bundle_ctrl(out, ++o->xid, bundle, OFPBCT_DISCARD_REQUEST);
		if (o->of.fd >= 0)
			conn_send(&o->of, out->data, out->len, "OpenFlow", NULL);
		g_propagate_error(error, err);
		return false;
	}
	g_byte_array_set_size(out, 0);
	commit = ++o->xid;
	vpd_of_bundle_ctrl(out, commit, bundle, OFPBCT_COMMIT_REQUEST);
	return conn_send(&o->of, out->data, out->len, "OpenFlow", error) &&
	       of_wait(o, commit, commit, VPD_OFPT_BUNDLE_CONTROL, NULL, NULL, error);
}

static bool of_bundle_checked(struct vpd_ovs *o, const GPtrArray *mods, GError **error)
{
	g_autoptr(GError) first = NULL;

	if (of_bundle_checked_once(o, mods, &first))
		return true;
	if (o->of.fd < 0 && !g_str_has_prefix(first->message, "OpenFlow: OVS refused"))
		return of_bundle_checked_once(o, mods, error);  /* it had gone stale */
	g_propagate_error(error, g_steal_pointer(&first));
	return false;
}

static void add_mod(GPtrArray *mods, uint8_t command, const struct vpd_flow *f,
		    uint64_t cookie_mask)
{
	GByteArray *m = g_byte_array_new();

	vpd_of_flow_mod(m, 0, command, f, cookie_mask);
	g_ptr_array_add(mods, m);
}

/* ---- representors ------------------------------------------------------- */

static char *sysfs_line(const char *dir, const char *name)
{
	g_autofree char *path = g_build_filename(dir, name, NULL);
	char *text = NULL;

	if (!g_file_get_contents(path, &text, NULL, NULL))
		return NULL;
	return g_strchomp(text);
}

/* The switch ID of pf (its netdev, or the first netdev of pci/ADDR). */
static char *pf_switch_id(const struct vpd_pf *pf, GError **error)
{
	g_autofree char *dir = NULL;
	char *id;

	if (g_str_has_prefix(pf->name, "pci/")) {
		g_autofree char *nets = g_strdup_printf("/sys/bus/pci/devices/%s/net", pf->name + 4);
		g_autoptr(GDir) d = g_dir_open(nets, 0, NULL);
		const char *n = d ? g_dir_read_name(d) : NULL;

		if (!n) {
			fail(error, "PF %s has no netdev (its driver is not bound?)", pf->name);
			return NULL;
		}
		dir = g_build_filename(nets, n, NULL);
	} else {
		dir = g_strdup_printf("/sys/class/net/%s", pf->name);
	}
	id = sysfs_line(dir, "phys_switch_id");
	if (!id || !*id) {
		g_free(id);
		fail(error, "PF %s has no switch ID: is its eswitch in switchdev mode?", pf->name);
		return NULL;
	}
	return id;
}

/*
 * Fill rep (by VF index) with the representors of switch switch_id.  (PFs
 * that share one switch, as with a multiport eswitch, are not told apart:
 * their representors' pfM is not reliably the PF's own port name.)
 */
static void scan_reps(const char *switch_id, GPtrArray *rep)
{
	g_autoptr(GDir) d = g_dir_open("/sys/class/net", 0, NULL);
	const char *n;

	while (d && (n = g_dir_read_name(d))) {
		g_autofree char *dir = g_build_filename("/sys/class/net", n, NULL);
		g_autofree char *id = sysfs_line(dir, "phys_switch_id");
		g_autofree char *port = NULL;
		unsigned pfn, vf;
		char tail;

		if (!id || strcmp(id, switch_id))
			continue;
		port = sysfs_line(dir, "phys_port_name");
		if (!port || sscanf(port, "pf%uvf%u%c", &pfn, &vf, &tail) != 2 || vf >= rep->len)
			continue;
		g_free(rep->pdata[vf]);
		rep->pdata[vf] = g_strdup(n);
	}
}

static bool set_up(const char *ifname, GError **error)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool ok;

	g_strlcpy(ifr.ifr_name, ifname, sizeof(ifr.ifr_name));
	ok = fd >= 0 && ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
	if (ok && !(ifr.ifr_flags & IFF_UP)) {
		ifr.ifr_flags |= IFF_UP;
		ok = ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
	}
	if (!ok)
		fail(error, "representor %s: cannot set it up: %s", ifname, g_strerror(errno));
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Each pooled VF of pf gets its representor's name in e->rep. */
static bool find_reps(struct vpd_pools *pools, const struct vpd_pf *pf, GError **error)
{
	g_autofree char *sw = NULL;
	g_autoptr(GPtrArray) rep = g_ptr_array_new_with_free_func(g_free);
	gint64 deadline = g_get_monotonic_time() + IO_TIMEOUT_MS * 1000ll;
	unsigned missing;

	if (pf->vduse) {
		/* The OVS port is the VF's own switch port, named as its device. */
		for (unsigned i = 0; i < pools->entries->len; i++) {
			struct vpd_entry *e = pools->entries->pdata[i];

			if (e->pool->pf == pf) {
				g_free(e->rep);
				e->rep = vpd_vdpa_dev_name(pf, e->vf);
			}
		}
		return true;
	}
	sw = pf_switch_id(pf, error);
	if (!sw)
		return false;
	g_ptr_array_set_size(rep, pf->num_vfs);
	/* The driver creates representors as the VFs come; wait for them. */
	for (;;) {
		scan_reps(sw, rep);
		missing = G_MAXUINT;
		for (unsigned i = 0; i < pools->entries->len && missing == G_MAXUINT; i++) {
			struct vpd_entry *e = pools->entries->pdata[i];

			if (e->pool->pf == pf && !rep->pdata[e->vf])
				missing = e->vf;
		}
		if (missing == G_MAXUINT)
			break;
		if (g_get_monotonic_time() > deadline)
			return fail(error, "PF %s: VF %u has no representor (no netdev with "
				    "switch ID %s and port name pfNvf%u)", pf->name, missing,
				    sw, missing);
		g_usleep(10000);
	}
	for (unsigned i = 0; i < pools->entries->len; i++) {
		struct vpd_entry *e = pools->entries->pdata[i];

		if (e->pool->pf != pf)
			continue;
		g_free(e->rep);
		e->rep = g_strdup(rep->pdata[e->vf]);
		if (!set_up(e->rep, error))
			return false;
	}
	return true;
}

/* ---- OVSDB rows of a VF ------------------------------------------------- */

static unsigned pf_index(const struct vpd_ovs *o, const struct vpd_pf *pf)
{
	for (unsigned i = 0; i < o->cfg->pfs->len; i++)
		if (o->cfg->pfs->pdata[i] == pf)
			return i;
	g_assert_not_reached();
}

static void put_kv(GString *s, const char *k, const char *v, bool *first)
{
	g_string_append(s, *first ? "[" : ",[");
	vpd_json_put_str(s, k);
	g_string_append_c(s, ',');
	vpd_json_put_str(s, v);
	g_string_append_c(s, ']');
	*first = false;
}

/* The Port row's columns for e's state: "tag":..,"vlan_mode":.. */
static void port_columns(GString *s, const struct vpd_entry *e)
{
	bool first = true;
	char vf[16];

	snprintf(vf, sizeof(vf), "%u", e->vf);
	/* A VF that may not pass (free, or without a VLAN of its pool) sits
	 * in the VLAN nothing else is in, so it receives nothing either. */
	if (!e->claimed || (!e->attrs.vlan && e->pool->vlan_min)) {
		g_string_append_printf(s, "\"tag\":%u,\"vlan_mode\":\"access\"", VPD_FREE_VLAN);
	} else {
		g_string_append_printf(s, "\"tag\":%u,\"vlan_mode\":\"%s\"", e->attrs.vlan,
				       e->attrs.vlan_proto == 0x88a8 && e->attrs.vlan
				       ? "dot1q-tunnel" : "access");
	}
	g_string_append(s, ",\"other_config\":[\"map\",[");
	if (e->claimed && e->attrs.vlan_proto == 0x88a8 && e->attrs.vlan)
		put_kv(s, "qinq-ethtype", "802.1ad", &first);
	g_string_append(s, "]],\"external_ids\":[\"map\",[");
	first = true;
	put_kv(s, "vpd-pool", e->pool->name, &first);
	put_kv(s, "vpd-vf", vf, &first);
	g_string_append(s, "]]");
}

static void interface_columns(GString *s, const struct vpd_entry *e, uint32_t ofport)
{
	static const char *const link[] = { "auto", "enable", "disable" };
	const struct vpd_vf_attrs *a = &e->attrs;
	uint64_t rate = vpd_vf_policing_rate(e);
	bool first = true;
	char mac[18], num[32];

	snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", a->mac[0], a->mac[1],
		 a->mac[2], a->mac[3], a->mac[4], a->mac[5]);
	/*
	 * kbit/s, and a burst of 100 ms at that rate (OVS's default burst, 8000
	 * kbit whatever the rate, would let a 1 Mbit/s VF send 8 s at line
	 * rate before the cap bites).
	 */
	g_string_append_printf(s, "\"ofport_request\":%u,\"ingress_policing_rate\":%" PRIu64
			       ",\"ingress_policing_burst\":%" PRIu64 ",\"external_ids\":[\"map\",[",
			       ofport, rate, rate / 10);
	put_kv(s, "vpd-state", e->claimed ? "claimed" : "free", &first);
	if (e->claimed) {
		put_kv(s, "vpd-owner", e->owner ? e->owner : "", &first);
		put_kv(s, "attached-mac", mac, &first);
		snprintf(num, sizeof(num), "%u", a->vlan);
		put_kv(s, "vpd-vlan", num, &first);
		snprintf(num, sizeof(num), "%u", a->qos);
		put_kv(s, "vpd-qos", num, &first);
		put_kv(s, "vpd-vlan-proto", a->vlan_proto == 0x88a8 ? "802.1ad" : "802.1Q",
		       &first);
		put_kv(s, "vpd-spoofchk", a->spoofchk ? "on" : "off", &first);
		put_kv(s, "vpd-trust", a->trust ? "on" : "off", &first);
		put_kv(s, "vpd-link-state", link[a->link_state], &first);
		snprintf(num, sizeof(num), "%u", a->min_tx_rate);
		put_kv(s, "vpd-min-tx-rate", num, &first);
		snprintf(num, sizeof(num), "%u", a->max_tx_rate);
		put_kv(s, "vpd-max-tx-rate", num, &first);
	}
	g_string_append(s, "]]");
}

static void where_name(GString *s, const char *name)
{
	g_string_append(s, "\"where\":[[\"name\",\"==\",");
	vpd_json_put_str(s, name);
	g_string_append(s, "]]");
}

/* The two updates (Port, then Interface) that give e's rows its state. */
static void update_ops(GString *ops, const struct vpd_entry *e, uint32_t ofport)
{
	g_string_append(ops, "{\"op\":\"update\",\"table\":\"Port\",");
	where_name(ops, e->rep);
	g_string_append(ops, ",\"row\":{");
	port_columns(ops, e);
	g_string_append(ops, "}},{\"op\":\"update\",\"table\":\"Interface\",");
	where_name(ops, e->rep);
	g_string_append(ops, ",\"row\":{");
	interface_columns(ops, e, ofport);
	g_string_append(ops, "}}");
}

/* ---- public ------------------------------------------------------------- */

struct vpd_ovs *vpd_ovs_new(const struct vpd_config *cfg, GError **error)
{
	struct vpd_ovs *o = g_new0(struct vpd_ovs, 1);
	g_autofree char *rundir = NULL;

	if (cfg->pfs->len * VPD_OFPORT_PER_PF > 65279) {
		fail(error, "OVS: at most %u [pf] sections share an OVS bridge (OpenFlow port "
		     "numbers)", 65279 / VPD_OFPORT_PER_PF);
		g_free(o);
		return NULL;
	}
	o->cfg = cfg;
	o->db.fd = o->of.fd = -1;
	o->rows = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
	o->open = g_hash_table_new(g_direct_hash, g_direct_equal);
	o->dirty = g_hash_table_new(g_direct_hash, g_direct_equal);
	o->db_path = g_strdup(cfg->ovsdb + strlen("unix:"));
	rundir = g_path_get_dirname(o->db_path);
	o->mgmt_path = g_strdup_printf("%s/%s.mgmt", rundir, cfg->ovs_bridge);
	if (!db_connect(o, error)) {
		vpd_ovs_free(o);
		return NULL;
	}
	return o;
}

void vpd_ovs_free(struct vpd_ovs *o)
{
	if (!o)
		return;
	conn_close(&o->db);
	conn_close(&o->of);
	if (o->db.in)
		g_byte_array_unref(o->db.in);
	if (o->of.in)
		g_byte_array_unref(o->of.in);
	g_hash_table_unref(o->rows);
	g_hash_table_unref(o->open);
	g_hash_table_unref(o->dirty);
	g_free(o->db_path);
	g_free(o->mgmt_path);
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
static bool ensure_bridge(struct vpd_ovs *o, GError **error)
{
	const char *br = o->cfg->ovs_bridge;
	bool netdev = any_vduse(o->cfg);
	g_autoptr(GString) ops = g_string_new(NULL);
	g_autoptr(vpd_json) res = NULL;
	const struct vpd_json *rows;

	g_string_append(ops, "{\"op\":\"select\",\"table\":\"Bridge\",");
	where_name(ops, br);
	g_string_append(ops, ",\"columns\":[\"name\",\"protocols\",\"datapath_type\"]},"
			"{\"op\":\"select\",\"table\":\"Open_vSwitch\",\"where\":[],"
			"\"columns\":[\"_uuid\"]}");
	res = db_transact(o, ops->str, error);
	if (!res)
		return false;
	if (vpd_json_len(vpd_json_get(vpd_json_at(res, 1), "rows")) != 1)
		return fail(error, "OVSDB has no Open_vSwitch row (run ovs-vsctl init)");
	rows = vpd_json_get(vpd_json_at(res, 0), "rows");
	g_string_truncate(ops, 0);
	if (vpd_json_len(rows) == 0) {
		g_string_append(ops, "{\"op\":\"insert\",\"table\":\"Interface\",\"row\":{\"name\":");
		vpd_json_put_str(ops, br);
		g_string_append(ops, ",\"type\":\"internal\"},\"uuid-name\":\"i\"},"
				"{\"op\":\"insert\",\"table\":\"Port\",\"row\":{\"name\":");
		vpd_json_put_str(ops, br);
		g_string_append(ops, ",\"interfaces\":[\"named-uuid\",\"i\"]},\"uuid-name\":\"p\"},"
				"{\"op\":\"insert\",\"table\":\"Bridge\",\"row\":{\"name\":");
		vpd_json_put_str(ops, br);
		g_string_append_printf(ops, ",\"ports\":[\"named-uuid\",\"p\"],\"fail_mode\":\"secure\","
				       "\"datapath_type\":\"%s\",", netdev ? "netdev" : "");
		g_string_append(ops, "\"protocols\":[\"set\",[\"OpenFlow10\",\"OpenFlow13\",\"OpenFlow14\"]]},"
				"\"uuid-name\":\"b\"},"
				"{\"op\":\"mutate\",\"table\":\"Open_vSwitch\",\"where\":[],"
				"\"mutations\":[[\"bridges\",\"insert\",[\"named-uuid\",\"b\"]]]}");
		g_message("OVS: bridge %s created", br);
	} else {
		/*
		 * The admin's bridge: secure fail mode, and OpenFlow 1.4 added
		 * when its protocols are a list without it (none listed: OVS
		 * allows 1.0 to 1.5, and the list is left alone).
		 */
		const struct vpd_json *proto = vpd_json_get(vpd_json_at(rows, 0), "protocols");
		const struct vpd_json *dp = vpd_json_get(vpd_json_at(rows, 0), "datapath_type");
		const struct vpd_json *set = vpd_json_at(proto, 1);
		bool has14 = proto && proto->type == VPD_JSON_STRING &&
			     !strcmp(proto->str, "OpenFlow14");
		bool empty = proto && proto->type == VPD_JSON_ARRAY && !vpd_json_len(set);

		for (unsigned i = 0; i < vpd_json_len(set); i++) {
			const struct vpd_json *v = vpd_json_at(set, i);

			has14 |= v && v->type == VPD_JSON_STRING && !strcmp(v->str, "OpenFlow14");
		}
		if (netdev && (!dp || dp->type != VPD_JSON_STRING || strcmp(dp->str, "netdev")))
			return fail(error, "OVS: bridge %s has datapath_type '%s', but VDUSE PFs "
				    "need OVS-DPDK's userspace datapath (datapath_type=netdev)", br,
				    dp && dp->type == VPD_JSON_STRING ? dp->str : "?");
		g_string_append(ops, "{\"op\":\"update\",\"table\":\"Bridge\",");
		where_name(ops, br);
		g_string_append(ops, ",\"row\":{\"fail_mode\":\"secure\"}}");
		if (!has14 && !empty) {
			g_string_append(ops, ",{\"op\":\"mutate\",\"table\":\"Bridge\",");
			where_name(ops, br);
			g_string_append(ops, ",\"mutations\":[[\"protocols\",\"insert\","
					"[\"set\",[\"OpenFlow14\"]]]]}");
		}
	}
	g_clear_pointer(&res, vpd_json_free);
	res = db_transact(o, ops->str, error);
	return res != NULL;
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
	const char *br = o->cfg->ovs_bridge;
	g_autoptr(GString) ops = g_string_new(NULL);
	g_autoptr(GHashTable) ours = g_hash_table_new(g_str_hash, g_str_equal);
	g_autoptr(GHashTable) exists = g_hash_table_new(g_str_hash, g_str_equal);
	g_autoptr(GHashTable) pooled = g_hash_table_new(g_str_hash, g_str_equal);
	g_autoptr(GString) stale = g_string_new(NULL);
	g_autoptr(vpd_json) res = NULL;
	const struct vpd_json *rows, *ports;
	unsigned n_new = 0, n_stale = 0;

	for (unsigned i = 0; i < pools->entries->len; i++)
		g_hash_table_add(pooled, ((struct vpd_entry *)pools->entries->pdata[i])->rep);

	/* Which ports exist, and which of them are the bridge's. */
	g_string_append(ops, "{\"op\":\"select\",\"table\":\"Port\",\"where\":[],"
			"\"columns\":[\"name\",\"_uuid\",\"external_ids\"]},"
			"{\"op\":\"select\",\"table\":\"Bridge\",");
	where_name(ops, br);
	g_string_append(ops, ",\"columns\":[\"ports\"]}");
	res = db_transact(o, ops->str, error);
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
		g_hash_table_add(exists, name->str);
		if (in_br)
			g_hash_table_add(ours, name->str);
		/* A port of ours for a VF no longer pooled leaves the bridge. */
		if (in_br && !g_hash_table_contains(pooled, name->str) &&
		    has_key(vpd_json_get(row, "external_ids"), "vpd-pool")) {
			g_string_append(stale, ",{\"op\":\"mutate\",\"table\":\"Bridge\",");
			where_name(stale, br);
			g_string_append(stale, ",\"mutations\":[[\"ports\",\"delete\",[\"uuid\",");
			vpd_json_put_str(stale, uuid->str);
			g_string_append(stale, "]]]}");
			n_stale++;
		}
	}

	g_string_truncate(ops, 0);
	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];
		uint32_t ofport = vpd_vf_ofport(pf_index(o, e->pool->pf), e->vf);

		if (ops->len)
			g_string_append_c(ops, ',');
		if (g_hash_table_contains(ours, e->rep)) {
			update_ops(ops, e, ofport);
			continue;
		}
		if (g_hash_table_contains(exists, e->rep))
			return fail(error, "OVS: representor %s of VF %u of PF %s is a port of "
				    "another bridge than %s", e->rep, e->vf, e->pool->pf->name, br);
		g_string_append(ops, "{\"op\":\"insert\",\"table\":\"Interface\",\"row\":{\"name\":");
		vpd_json_put_str(ops, e->rep);
		g_string_append_c(ops, ',');
		if (e->pool->pf->vduse) {
			/*
			 * OVS-DPDK makes the VDUSE device for a vhost-user client
			 * port on /dev/vduse/NAME.  One queue pair: VDUSE refuses
			 * the control queue that more would need.
			 */
			g_autofree char *path = g_strdup_printf("/dev/vduse/%s", e->rep);

			g_string_append(ops, "\"type\":\"dpdkvhostuserclient\","
					"\"options\":[\"map\",[[\"vhost-server-path\",");
			vpd_json_put_str(ops, path);
			g_string_append(ops, "],[\"vhost-max-queue-pairs\",\"1\"]]],");
		}
		interface_columns(ops, e, ofport);
		g_string_append_printf(ops, "},\"uuid-name\":\"i%u\"},"
				       "{\"op\":\"insert\",\"table\":\"Port\",\"row\":{\"name\":",
				       i);
		vpd_json_put_str(ops, e->rep);
		g_string_append_printf(ops, ",\"interfaces\":[\"named-uuid\",\"i%u\"],", i);
		port_columns(ops, e);
		g_string_append_printf(ops, "},\"uuid-name\":\"p%u\"},"
				       "{\"op\":\"mutate\",\"table\":\"Bridge\",", i);
		where_name(ops, br);
		g_string_append_printf(ops, ",\"mutations\":[[\"ports\",\"insert\","
				       "[\"named-uuid\",\"p%u\"]]]}", i);
		n_new++;
	}
	if (ops->len && stale->len)
		g_string_append(ops, stale->str);
	else if (stale->len)
		g_string_append(ops, stale->str + 1);
	if (!ops->len)
		return true;
	g_clear_pointer(&res, vpd_json_free);
	res = db_transact(o, ops->str, error);
	if (res && n_new)
		g_message("OVS: %u representor(s) added to bridge %s", n_new, br);
	if (res && n_stale)
		g_message("OVS: %u port(s) of VFs no longer pooled removed from bridge %s", n_stale,
			  br);
	return res != NULL;
}

/* Wait until OVS has given every representor its requested port number. */
static bool check_ofports(struct vpd_ovs *o, struct vpd_pools *pools, GError **error)
{
	gint64 deadline = g_get_monotonic_time() + IO_TIMEOUT_MS * 1000ll;
	g_autoptr(GString) ops = g_string_new(NULL);

	g_string_append(ops, "{\"op\":\"select\",\"table\":\"Interface\",\"where\":[],"
			"\"columns\":[\"name\",\"ofport\",\"error\"]}");
	for (;;) {
		g_autoptr(vpd_json) res = db_transact(o, ops->str, error);
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
			return fail(error, "OVS: port %s of VF %u got OpenFlow port %d, not %u "
				    "(%s)", bad->rep, bad->vf, got,
				    vpd_vf_ofport(pf_index(o, bad->pool->pf), bad->vf),
				    got < 0 ? "OVS could not open it: see its Interface error"
				    : "the number is taken on the bridge");
		g_usleep(5000);
	}
}

bool vpd_ovs_sync(struct vpd_ovs *o, struct vpd_pools *pools, GError **error)
{
	g_autoptr(GPtrArray) mods = g_ptr_array_new_with_free_func(
		(GDestroyNotify)g_byte_array_unref);
	struct vpd_flow all = { .cookie = VPD_COOKIE_MAGIC };
	struct vpd_flow others = {
		.cookie = vpd_flow_cookie(VPD_FLOW_OTHERS, 0, 0), .priority = 0, .normal = true,
	};
	gint64 deadline;

	for (unsigned i = 0; i < o->cfg->pfs->len; i++)
		if (!find_reps(pools, o->cfg->pfs->pdata[i], error))
			return false;
	if (!ensure_bridge(o, error))
		return false;
	/* ovs-vswitchd makes the management socket with the bridge. */
	deadline = g_get_monotonic_time() + IO_TIMEOUT_MS * 1000ll;
	while (!g_file_test(o->mgmt_path, G_FILE_TEST_EXISTS) &&
	       g_get_monotonic_time() < deadline)
		g_usleep(10000);
	/*
	 * The flows first (they name the port numbers the ports will get), so
	 * that no port is ever on the bridge without its VF's flows.  All of
	 * the daemon's flows are replaced at once: claimed VFs keep passing.
	 */
	add_mod(mods, VPD_OFPFC_DELETE, &all, VPD_COOKIE_MAGIC_MASK);
	add_mod(mods, VPD_OFPFC_ADD, &others, 0);
	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];
		struct vpd_flow f[2];
		unsigned n = vpd_vf_flows(e, pf_index(o, e->pool->pf), f);

		for (unsigned j = 0; j < n; j++)
			add_mod(mods, VPD_OFPFC_ADD, &f[j], 0);
	}
	if (!of_bundle_checked(o, mods, error) || !sync_ports(o, pools, error) ||
	    !check_ofports(o, pools, error))
		return false;
	g_hash_table_remove_all(o->rows);
	g_hash_table_remove_all(o->dirty);
	o->need_sync = false;
	g_message("OVS: bridge %s holds %u VF port(s) and their flows", o->cfg->ovs_bridge,
		  pools->entries->len);
	return true;
}

/* Until ovs-vswitchd has applied OVSDB's configuration number cfg. */
static bool wait_applied(struct vpd_ovs *o, double cfg, GError **error)
{
	gint64 deadline = g_get_monotonic_time() + IO_TIMEOUT_MS * 1000ll;

	for (;;) {
		g_autoptr(vpd_json) res = db_transact(o, "{\"op\":\"select\",\"table\":"
						      "\"Open_vSwitch\",\"where\":[],\"columns\":"
						      "[\"cur_cfg\"]}", error);
		const struct vpd_json *cur = vpd_json_get(vpd_json_at(vpd_json_get(
			vpd_json_at(res, 0), "rows"), 0), "cur_cfg");

		if (!res)
			return false;
		if (cur && cur->type == VPD_JSON_NUMBER && cur->num >= cfg)
			return true;
		if (g_get_monotonic_time() > deadline)
			return fail_code(error, G_IO_ERROR_TIMED_OUT, "OVS: ovs-vswitchd did not "
					 "apply the configuration within %d s",
					 IO_TIMEOUT_MS / 1000);
		g_usleep(2000);
	}
}

/*
 * One VF's change: its OVSDB rows (skipped when they would not change,
 * e.g. a link state change) and its flows (one bundle).  Usually both go
 * out together and are waited for together: one round trip to OVS.  When
 * the VF's port opens (claimed, link up), OVSDB goes first and
 * ovs-vswitchd must have applied it (its VLAN leaves 4095) before the
 * allow flow comes; when it shuts, the allow flow goes first.  A change
 * that fails is kept and done again by vpd_ovs_tick().
 */
static bool apply(struct vpd_ovs *o, struct vpd_entry *e, GError **error)
{
	unsigned pfi = pf_index(o, e->pool->pf);
	g_autoptr(GString) ops = g_string_new(NULL);
	g_autoptr(vpd_json) res = NULL;
	g_autoptr(GPtrArray) mods = g_ptr_array_new_with_free_func(
		(GDestroyNotify)g_byte_array_unref);
	g_autoptr(GError) stale = NULL;
	struct vpd_flow f[2], allow = { .cookie = vpd_flow_cookie(VPD_FLOW_ALLOW, pfi, e->vf) };
	const char *last;
	gint64 t0 = g_get_monotonic_time();
	uint32_t first = 0, commit = 0;
	unsigned n, id = 0;
	bool db, opening, closing, flows_sent = false;

	if (!e->rep)
		return fail(error, "VF %u of pool '%s' has no representor", e->vf, e->pool->name);
	update_ops(ops, e, vpd_vf_ofport(pfi, e->vf));
	last = g_hash_table_lookup(o->rows, e);
	db = !last || strcmp(last, ops->str);
	g_hash_table_remove(o->rows, e);
	add_mod(mods, VPD_OFPFC_DELETE, &allow, ~0ull);  /* deletion first */
	n = vpd_vf_flows(e, pfi, f);
	for (unsigned j = 1; j < n; j++)   /* f[0], the deny flow, stays */
		add_mod(mods, VPD_OFPFC_ADD, &f[j], 0);
	opening = n == 2 && !g_hash_table_contains(o->open, e) && db;
	closing = n == 1 && g_hash_table_contains(o->open, e);
	g_hash_table_remove(o->open, e);  /* unknown until committed */

	if (opening)  /* also: the new configuration's number */
		g_string_append(ops, ",{\"op\":\"mutate\",\"table\":\"Open_vSwitch\","
				"\"where\":[],\"mutations\":[[\"next_cfg\",\"+=\",1]]},"
				"{\"op\":\"select\",\"table\":\"Open_vSwitch\",\"where\":[],"
				"\"columns\":[\"next_cfg\"]}");
	if (closing) {
		if (!of_bundle_send(o, mods, &first, &commit, &stale) &&
		    !of_bundle_send(o, mods, &first, &commit, error))
			return false;
		if (!of_wait(o, first, commit, VPD_OFPT_BUNDLE_CONTROL, NULL, NULL, error))
			return false;
	}
	if (db && !db_send_retry(o, ops->str, &id, error))
		return false;
	if (!closing && !opening) {
		if (!of_bundle_send(o, mods, &first, &commit, &stale) &&
		    !of_bundle_send(o, mods, &first, &commit, error)) {
			if (db)
				vpd_json_free(db_wait(o, id, NULL));
			return false;
		}
		flows_sent = true;
	}
	if (db) {
		res = db_wait(o, id, error);
		if (res && (op_count(res, 0) != 1 || op_count(res, 1) != 1)) {
			fail(error, "OVS: port %s of VF %u is gone from OVSDB", e->rep, e->vf);
			g_clear_pointer(&res, vpd_json_free);
		}
		if (res && opening) {
			const struct vpd_json *cfg = vpd_json_get(vpd_json_at(vpd_json_get(
				vpd_json_at(res, 3), "rows"), 0), "next_cfg");

			if (!cfg || cfg->type != VPD_JSON_NUMBER || !wait_applied(o, cfg->num, error))
				g_clear_pointer(&res, vpd_json_free);
		}
		if (!res) {
			if (flows_sent)
				of_wait(o, first, commit, VPD_OFPT_BUNDLE_CONTROL, NULL, NULL, NULL);
			return false;
		}
	}
	if (opening) {
		if (!of_bundle_send(o, mods, &first, &commit, &stale) &&
		    !of_bundle_send(o, mods, &first, &commit, error))
			return false;
		flows_sent = true;
	}
	if (flows_sent && !of_wait(o, first, commit, VPD_OFPT_BUNDLE_CONTROL, NULL, NULL, error))
		return false;
	if (db)
		g_hash_table_insert(o->rows, e, g_string_free(g_steal_pointer(&ops), FALSE));
	if (n == 2)
		g_hash_table_add(o->open, e);
	g_debug("VF %u of pool '%s': %s and flows committed in %.2f ms", e->vf, e->pool->name,
		db ? "port" : "(port unchanged)", (g_get_monotonic_time() - t0) / 1000.0);
	return true;
}

bool vpd_ovs_apply(struct vpd_ovs *o, struct vpd_entry *e, GError **error)
{
	if (!apply(o, e, error)) {
		g_hash_table_add(o->dirty, e);
		return false;
	}
	g_hash_table_remove(o->dirty, e);
	return true;
}

void vpd_ovs_tick(struct vpd_ovs *o, struct vpd_pools *pools)
{
	struct pollfd pfd = { .fd = o->of.fd, .events = POLLIN };
	g_autoptr(GError) err = NULL;
	GHashTableIter it;
	gpointer e;

	/* ovs-vswitchd closes our connection when it stops. */
	if (o->of.fd >= 0 && poll(&pfd, 1, 0) == 1) {
		char c;

		if (recv(o->of.fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
			conn_close(&o->of);
			o->need_sync = true;
		}
	}
	if (o->of.fd < 0 && o->connected)
		o->need_sync = true;
	if (o->need_sync) {
		if (vpd_ovs_sync(o, pools, &err)) {
			g_message("OVS: flows restored after ovs-vswitchd came back");
		} else if (!o->sync_failing) {
			g_warning("OVS: cannot restore the flows (trying every second): %s",
				  err->message);
		}
		o->sync_failing = o->need_sync;
		return;
	}
	g_hash_table_iter_init(&it, o->dirty);
	while (g_hash_table_iter_next(&it, &e, NULL)) {
		struct vpd_entry *entry = e;
		g_autoptr(GError) again = NULL;

		if (apply(o, entry, &again)) {
			g_message("OVS: VF %u of pool '%s' is as it should be again", entry->vf,
				  entry->pool->name);
			g_hash_table_iter_remove(&it);
		}
	}
}

/* ---- flow statistics ---------------------------------------------------- */

struct stats {
	GHashTable *by_cookie;   /* cookie -> "n_packets=.., n_bytes=.." */
};

static bool flow_stats_cb(const uint8_t *m, guint len, void *opaque)
{
	struct stats *st = opaque;
	guint off = 16;   /* header + multipart header */

	while (off + 48 <= len) {
		const uint8_t *f = m + off;
		uint16_t flen = get16(f);
		uint64_t *cookie;

		if (flen < 48 || off + flen > len)
			return false;
		cookie = g_new(uint64_t, 1);
		*cookie = get64(f + 24);
		g_hash_table_insert(st->by_cookie, cookie,
				    g_strdup_printf("n_packets=%" PRIu64 ", n_bytes=%" PRIu64,
						    get64(f + 32), get64(f + 40)));
		off += flen;
	}
	return off == len;
}

GPtrArray *vpd_ovs_vf_flows(struct vpd_ovs *o, const struct vpd_entry *e, GError **error)
{
	unsigned pfi = pf_index(o, e->pool->pf);
	g_autoptr(GByteArray) req = g_byte_array_new();
	struct stats st = {
		.by_cookie = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free),
	};
	struct vpd_flow f[2];
	GPtrArray *lines = NULL;
	uint32_t xid;
	unsigned n;

	for (int attempt = 0; attempt < 2 && !lines; attempt++) {
		g_autoptr(GError) err = NULL;

		if (!of_connect(o, error))
			break;
		g_byte_array_set_size(req, 0);
		xid = ++o->xid;
		vpd_of_header(req, VPD_OFPT_MULTIPART_REQUEST, 0, xid);
		put16(req, OFPMP_FLOW);
		put16(req, 0);
		pad(req, 4);
		put8(req, 0);             /* table 0 */
		pad(req, 3);
		put32(req, OFPP_ANY);
		put32(req, OFPG_ANY);
		pad(req, 4);
		put64(req, vpd_flow_cookie(0, pfi, e->vf));
		put64(req, ~VPD_COOKIE_KIND_MASK);
		put_match(req, NULL);
		set16(req, 2, req->len);
		if (conn_send(&o->of, req->data, req->len, "OpenFlow", &err) &&
		    of_wait(o, xid, xid, VPD_OFPT_MULTIPART_REPLY, flow_stats_cb, &st, &err)) {
			lines = g_ptr_array_new_with_free_func(g_free);
		} else if (o->of.fd >= 0 || attempt) {
			g_propagate_error(error, g_steal_pointer(&err));
			break;
		}
	}
	if (lines) {
		n = vpd_vf_flows(e, pfi, f);
		for (unsigned j = 0; j < n; j++) {
			g_autofree char *text = vpd_flow_to_string(&f[j]);
			const char *c = g_hash_table_lookup(st.by_cookie, &f[j].cookie);

			g_ptr_array_add(lines, g_strdup_printf("%s (%s)", text,
							       c ? c : "MISSING in OVS"));
		}
	}
	g_hash_table_unref(st.by_cookie);
	return lines;
}
