// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * server: the API socket (see server.h).
 */
#define _GNU_SOURCE
#include "server.h"
#include "proc.h"
#include "protocol.h"
#include "state.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <gio/gio.h>
#include <glib-unix.h>
#include <poll.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_FDS 253             /* SCM_MAX_FD */
#define LOG_INTERVAL_US (10 * G_USEC_PER_SEC)
#define QUARANTINE_PROBE_S 2    /* seconds between tries of quarantined VFs */

/* A reply not yet (wholly) sent; it holds its own copies of the fds. */
struct out_msg {
	GBytes *bytes;
	gsize off;
	int fds[MAX_FDS];
	unsigned nfds;
};

struct client {
	struct vpd_server *s;
	uint64_t id;
	int fd;
	guint src;
	GIOCondition watching;
	struct ucred cred;
	GByteArray *in;
	GQueue out;                     /* struct out_msg *, oldest first */
	gint64 last_in;                 /* monotonic: when it last sent bytes */
	gint64 out_since;               /* monotonic: when the oldest reply was queued */
	bool pending;                   /* a request waits for the datapath: no other is read */
	/* given in each CLAIM's REPLY; another client that shows it may take
	 * the MACs of this one's VFs (mac-handover = token) */
	uint8_t handover[VPD_HANDOVER_SIZE];
	bool has_handover;              /* (no randomness at accept: none) */
	struct vpd_rules rules;         /* its offloaded rules and their table */
};

/*
 * A pool's counters and latency histograms (METRICS).  Only the
 * configuration's pools have them: a CLAIM of a pool name the daemon does
 * not have counts nowhere, so no client can make the metrics grow.
 */
struct pool_stats {
	const struct vpd_pool *pool;
	uint64_t claims, refused;       /* CLAIMs granted, refused */
	uint64_t releases, gone;        /* VFs released by RELEASE, as their client went */
	struct vpd_hist claim, release; /* a granted CLAIM's, a RELEASE's time in the daemon */
};

/* At most one log line per interval for what a hostile client can repeat. */
struct ratelimit {
	gint64 last;
	unsigned suppressed;
};

struct vpd_server {
	struct vpd_pools *pools;
	char *socket_path;
	bool socket_owned;              /* made here (else passed by systemd) */
	struct vpd_state *state;
	struct vpd_server_limits limits;
	int listen_fd;
	guint listen_src;
	guint resume_src;               /* accepting paused: fds ran out */
	guint timer_src;                /* timeouts of the clients, each second */
	unsigned ticks;
	bool probing;                   /* quarantined VFs being tried */
	GHashTable *clients;            /* id -> struct client * */
	GHashTable *per_uid;            /* uid -> connections of that uid */
	GHashTable *orphan_watches;     /* pid -> source id */
	uint64_t next_id;
	vpd_apply_fn apply;
	void *apply_opaque;
	vpd_flows_fn flows;
	void *flows_opaque;
	vpd_port_stats_fn port_stats;
	void *port_stats_opaque;
	GArray *vf_stats;               /* each entry's port counters (VF_STATS) ... */
	gint64 vf_stats_at;             /* ... as read then (monotonic, us) */
	GPtrArray *pool_stats;          /* struct pool_stats *, pools in entries' order */
	guint64 start_time;             /* Unix time, s */
	vpd_mac_fn set_mac;
	vpd_rep_open_fn rep_open;
	vpd_rep_close_fn rep_close;
	vpd_rules_fn rules;
	vpd_rule_stats_fn rule_stats;
	void *rules_opaque;
	struct vpd_tables tables;       /* the clients' tables of rules */
	GThreadPool *mac_pool;          /* one thread: the MAC changes in order */
	unsigned mac_jobs;              /* pushed, not yet done in the loop */
	GPtrArray *status_flows;        /* during one STATUS: each entry's flows, by handle */
	char *flows_failed;             /* during one STATUS: why OVS could not say */
	struct ratelimit refused_log, fds_log;
};

static bool ratelimit_ok(struct ratelimit *r, unsigned *suppressed)
{
	gint64 now = g_get_monotonic_time();

	if (r->last && now - r->last < LOG_INTERVAL_US) {
		r->suppressed++;
		return false;
	}
	*suppressed = r->suppressed;
	r->suppressed = 0;
	r->last = now;
	return true;
}

static void out_msg_free(gpointer data)
{
	struct out_msg *o = data;

	for (unsigned i = 0; i < o->nfds; i++)
		close(o->fds[i]);
	g_bytes_unref(o->bytes);
	g_free(o);
}

static void client_free(gpointer data)
{
	struct client *c = data;
	struct vpd_server *s = c->s;
	gpointer key = GUINT_TO_POINTER(c->cred.uid);
	unsigned n = GPOINTER_TO_UINT(g_hash_table_lookup(s->per_uid, key));

	if (n > 1)
		g_hash_table_insert(s->per_uid, key, GUINT_TO_POINTER(n - 1));
	else
		g_hash_table_remove(s->per_uid, key);
	if (c->src)
		g_source_remove(c->src);
	close(c->fd);
	g_byte_array_unref(c->in);
	g_queue_clear_full(&c->out, out_msg_free);
	vpd_rules_clear(&c->rules);
	g_free(c);
}

static struct pool_stats *stats_of(struct vpd_server *s, const struct vpd_pool *pool)
{
	for (unsigned i = 0; i < s->pool_stats->len; i++) {
		struct pool_stats *ps = s->pool_stats->pdata[i];

		if (ps->pool == pool)
			return ps;
	}
	return NULL;
}

/* The statistics of the pool a client named (NULL: the daemon has none). */
static struct pool_stats *stats_named(struct vpd_server *s, const char *name)
{
	for (unsigned i = 0; name && i < s->pool_stats->len; i++) {
		struct pool_stats *ps = s->pool_stats->pdata[i];

		if (!strcmp(ps->pool->name, name))
			return ps;
	}
	return NULL;
}

static void count_refused(struct vpd_server *s, const char *pool)
{
	struct pool_stats *ps = stats_named(s, pool);

	if (ps)
		ps->refused++;
}

/* Write e's claim (or its absence) to the state journal. */
static bool save(struct vpd_server *s, const struct vpd_entry *e)
{
	g_autoptr(GError) err = NULL;

	if (!vpd_state_record(s->state, s->pools, e, &err)) {
		g_warning("%s", err->message);
		return false;
	}
	return true;
}

/* Ask the datapath for e's change; done comes later, or at once. */
static void apply(struct vpd_server *s, struct vpd_entry *e, vpd_applied_fn done,
		  void *opaque)
{
	if (s->apply)
		s->apply(e, s->apply_opaque, done, opaque);
	else
		done(NULL, opaque);
}

/* A change of the datapath that nobody waits for: a failure is logged. */
struct unwaited {
	const struct vpd_entry *e;      /* the server's, which outlive it */
	const char *what;
};

static void unwaited_applied(const GError *error, void *opaque)
{
	struct unwaited *u = opaque;

	if (error)
		g_warning("VF %u of pool '%s': %s failed (tried again each second): %s",
			  u->e->vf, u->e->pool->name, u->what, error->message);
	g_free(u);
}

static void apply_unwaited(struct vpd_server *s, struct vpd_entry *e, const char *what)
{
	struct unwaited *u = g_new0(struct unwaited, 1);

	u->e = e;
	u->what = what;
	apply(s, e, unwaited_applied, u);
}

/* A MAC for a VF's vDPA device; then, for a SET_ATTRS, its datapath. */
struct mac_job {
	struct vpd_server *s;
	struct vpd_entry *e;
	uint8_t mac[6];
	struct attrs_op *op;            /* NULL: a release's, nobody waits */
	GError *error;
};

static void attrs_applied(const GError *error, void *opaque);

static gboolean mac_job_done(gpointer data)
{
	struct mac_job *job = data;
	struct vpd_server *s = job->s;
	bool unsupported = job->error &&
			   g_error_matches(job->error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED);

	s->mac_jobs--;
	if (job->error && !unsupported)
		g_warning("VF %u of pool '%s': %s", job->e->vf, job->e->pool->name,
			  job->error->message);
	if (job->op) {
		if (job->error && !unsupported)
			attrs_applied(job->error, job->op);
		else
			apply(s, job->e, attrs_applied, job->op);
	}
	g_clear_error(&job->error);
	g_free(job);
	return G_SOURCE_REMOVE;
}

/* In the MAC thread. */
static void mac_job_run(gpointer data, gpointer user_data)
{
	struct mac_job *job = data;
	struct vpd_server *s = user_data;

	s->set_mac(job->e->vdpa_dev, job->mac, &job->error);
	g_idle_add(mac_job_done, job);
}

/*
 * Give e's vDPA device mac (asynchronously), then, for op, apply e's
 * datapath; with no way to set it, apply at once.
 */
static void set_vdpa_mac(struct vpd_server *s, struct vpd_entry *e, const uint8_t mac[6],
			 struct attrs_op *op)
{
	struct mac_job *job;

	if (!s->mac_pool || !e->vdpa_dev) {
		if (op)
			apply(s, e, attrs_applied, op);
		return;
	}
	job = g_new0(struct mac_job, 1);
	job->s = s;
	job->e = e;
	memcpy(job->mac, mac, 6);
	job->op = op;
	s->mac_jobs++;
	g_thread_pool_push(s->mac_pool, job, NULL);
}

/* A change of rules that nobody waits for: a failure is logged. */
static void rules_unwaited_done(const GError *error, void *opaque)
{
	if (error)
		g_warning("OVS: removing rules of table %u failed: %s", GPOINTER_TO_UINT(opaque),
			  error->message);
}

static void rules_change(struct vpd_server *s, const struct vpd_rule_change *ch,
			 vpd_applied_fn done, void *opaque)
{
	if (s->rules)
		s->rules(ch, s->rules_opaque, done, opaque);
	else
		done(NULL, opaque);
}

static struct client *client_of(struct vpd_server *s, uint64_t id);

/*
 * The rules of e's claimant that name e (as HANDLE or OUT) go: e is
 * released or its representor port closes.
 */
static void rules_drop_vf(struct vpd_server *s, struct vpd_entry *e)
{
	struct client *c = e->claimed ? client_of(s, e->client) : NULL;
	g_autoptr(GPtrArray) gone = NULL;
	struct vpd_rule_change *ch;

	if (!c || !c->rules.table)
		return;
	gone = vpd_rules_take_vf(&c->rules, e->handle);
	if (!gone->len)
		return;
	ch = vpd_rule_change_new(c->rules.table);
	for (unsigned i = 0; i < gone->len; i++)
		g_array_append_val(ch->del, ((struct vpd_rule *)gone->pdata[i])->id);
	g_message("VF %u of pool '%s': its %u rule(s) in table %u removed", e->vf,
		  e->pool->name, gone->len, c->rules.table);
	rules_change(s, ch, rules_unwaited_done, GUINT_TO_POINTER(ch->table));
	vpd_rule_change_free(ch);
}

/* c's table and all its rules go (it closed). */
static void rules_drop_client(struct vpd_server *s, struct client *c)
{
	struct vpd_rule_change *ch;

	if (!c->rules.table)
		return;
	ch = vpd_rule_change_new(c->rules.table);
	ch->del_table = true;
	rules_change(s, ch, rules_unwaited_done, GUINT_TO_POINTER(ch->table));
	vpd_rule_change_free(ch);
	g_message("client pid %d: table %u and its %u rule(s) removed", c->cred.pid,
		  c->rules.table, g_hash_table_size(c->rules.by_id));
	vpd_tables_free(&s->tables, c->rules.table);
	g_hash_table_remove_all(c->rules.by_id);
	c->rules.table = 0;
}

/* e's representor port's tap goes, and the port (once applied). */
static void rep_remove(struct vpd_server *s, struct vpd_entry *e)
{
	g_autoptr(GError) err = NULL;

	if (!e->rep_port)
		return;
	rules_drop_vf(s, e);
	if (s->rep_close && !s->rep_close(e->rep_port, e->rep_ifindex, &err))
		g_warning("VF %u of pool '%s': %s", e->vf, e->pool->name, err->message);
	g_message("VF %u of pool '%s': representor port %s removed", e->vf, e->pool->name,
		  e->rep_port);
	g_clear_pointer(&e->rep_port, g_free);
	e->rep_ifindex = 0;
}

/*
 * Back to the pool (attributes to defaults, no representor port), its
 * datapath to default-deny (asked now, done in order before any later
 * claim of it opens it again).
 */
static void release_entry(struct vpd_server *s, struct vpd_entry *e, uint64_t client)
{
	struct vpd_entry *heir = NULL;
	uint8_t mac[6];

	rep_remove(s, e);
	memcpy(mac, e->attrs.mac, 6);
	vpd_pools_release(s->pools, e, client, &heir, NULL);
	if (memcmp(mac, e->attrs.mac, 6))
		set_vdpa_mac(s, e, e->attrs.mac, NULL);
	apply_unwaited(s, e, "resetting its datapath");
	save(s, e);
	if (heir) {
		const uint8_t *m = heir->default_mac;

		g_message("VF %u of pool '%s' took over the MAC of VF %u (a migration's hand-over, "
			  "complete): its daemon MAC is %02x:%02x:%02x:%02x:%02x:%02x now, VF %u's "
			  "%02x:%02x:%02x:%02x:%02x:%02x", heir->vf, heir->pool->name, e->vf,
			  m[0], m[1], m[2], m[3], m[4], m[5], e->vf, e->default_mac[0],
			  e->default_mac[1], e->default_mac[2], e->default_mac[3],
			  e->default_mac[4], e->default_mac[5]);
		save(s, heir);
	}
}

static unsigned release_client(struct vpd_server *s, uint64_t client, pid_t pid)
{
	unsigned n = 0;

	for (unsigned i = 0; i < s->pools->entries->len; i++) {
		struct vpd_entry *e = s->pools->entries->pdata[i];

		if (e->claimed && e->client == client && (client || e->pid == pid)) {
			struct pool_stats *ps = stats_of(s, e->pool);

			release_entry(s, e, client);
			if (ps)
				ps->gone++;
			n++;
		}
	}
	return n;
}

/* ---- replies ------------------------------------------------------------ */

/*
 * Send what can go now without blocking; false when the connection failed.
 * The fds go with the first byte of o.
 */
static bool send_some(struct client *c, struct out_msg *o)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
		struct cmsghdr align;
	} u;
	gsize len;
	const uint8_t *data = g_bytes_get_data(o->bytes, &len);
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	while (o->off < len) {
		iov.iov_base = (void *)(data + o->off);
		iov.iov_len = len - o->off;
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
		if (o->nfds) {
			struct cmsghdr *cm;

			mh.msg_control = u.buf;
			mh.msg_controllen = CMSG_SPACE(sizeof(int) * o->nfds);
			cm = CMSG_FIRSTHDR(&mh);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int) * o->nfds);
			memcpy(CMSG_DATA(cm), o->fds, sizeof(int) * o->nfds);
		}
		n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n <= 0)
			return false;
		o->off += n;
		for (unsigned i = 0; i < o->nfds; i++)
			close(o->fds[i]);
		o->nfds = 0;
	}
	return true;
}

/* Send the queued replies in order; false when the connection failed. */
static bool flush_out(struct client *c)
{
	struct out_msg *o;

	while ((o = g_queue_peek_head(&c->out))) {
		if (!send_some(c, o))
			return false;
		if (o->off < g_bytes_get_size(o->bytes))
			return true;
		out_msg_free(g_queue_pop_head(&c->out));
		c->out_since = g_get_monotonic_time();
	}
	return true;
}

/*
 * Queue a reply (with copies of fds) and send what the socket takes now;
 * never blocks.  A client that does not read its replies is dropped after
 * io-timeout (server_tick); until then it gets no more answers, since no
 * further request of it is read (client_watch).
 */
static bool send_all(struct client *c, GBytes *msg, const int *fds, unsigned nfds)
{
	struct out_msg *o = g_new0(struct out_msg, 1);

	o->bytes = g_bytes_ref(msg);
	for (unsigned i = 0; i < nfds; i++) {
		o->fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 0);
		if (o->fds[i] < 0) {
			g_warning("client pid %d: cannot pass fds: %s", c->cred.pid,
				  g_strerror(errno));
			out_msg_free(o);
			return false;
		}
		o->nfds++;
	}
	if (g_queue_is_empty(&c->out))
		c->out_since = g_get_monotonic_time();
	g_queue_push_tail(&c->out, o);
	return flush_out(c);
}

static bool send_error(struct client *c, uint32_t seq, int errnum, const char *message)
{
	struct vpd_builder b;
	g_autoptr(GBytes) msg = NULL;

	vpd_builder_init(&b, VPD_MSG_ERROR, seq);
	vpd_put_u32(&b, VPD_A_ERRNO, errnum);
	vpd_put_str(&b, VPD_A_MESSAGE, message);
	msg = vpd_builder_finish(&b);
	return send_all(c, msg, NULL, 0);
}

static int pool_errno(const GError *err)
{
	if (err->domain != VPD_POOL_ERROR)
		return EIO;
	switch (err->code) {
	case VPD_POOL_ERR_NO_POOL:
		return ENOENT;
	case VPD_POOL_ERR_DENIED:
	case VPD_POOL_ERR_NOT_OWNER:
		return EPERM;
	case VPD_POOL_ERR_EXHAUSTED:
		return ENOSPC;
	case VPD_POOL_ERR_MAC_IN_USE:
		return EADDRINUSE;
	default:
		return EINVAL;
	}
}

static void put_vf(struct vpd_server *s, struct vpd_builder *b, const struct vpd_entry *e,
		   bool status)
{
	const struct vpd_vf_attrs *a = &e->attrs;

	vpd_nest_start(b, VPD_A_VF);
	vpd_put_u32(b, VPD_A_HANDLE, e->handle);
	vpd_put_u32(b, VPD_A_VF_INDEX, e->vf);
	if (status) {
		vpd_put_str(b, VPD_A_POOL, e->pool->name);
		if (e->claimed && e->owner)
			vpd_put_str(b, VPD_A_OWNER, e->owner);
		vpd_put_u32(b, VPD_A_COUNT, e->claimed ? (e->client ? 1 : 2) :
			    e->quarantined ? 3 : 0);
	}
	vpd_put_bytes(b, VPD_A_MAC, a->mac, 6);
	vpd_put_u16(b, VPD_A_VLAN, a->vlan);
	vpd_put_u8(b, VPD_A_QOS, a->qos);
	vpd_put_u16(b, VPD_A_VLAN_PROTO, a->vlan_proto);
	vpd_put_u8(b, VPD_A_SPOOFCHK, a->spoofchk);
	vpd_put_u8(b, VPD_A_TRUST, a->trust);
	vpd_put_u8(b, VPD_A_LINK_STATE, a->link_state);
	vpd_put_u32(b, VPD_A_MIN_TX_RATE, a->min_tx_rate);
	vpd_put_u32(b, VPD_A_MAX_TX_RATE, a->max_tx_rate);
	if (e->vhost_path)
		vpd_put_str(b, VPD_A_VHOST_PATH, e->vhost_path);
	/* PORT: in STATUS the VF's own port, to its client its representor port */
	if (status && e->rep)
		vpd_put_str(b, VPD_A_PORT, e->rep);
	if (status && e->rep_port)
		vpd_put_str(b, VPD_A_REP_PORT, e->rep_port);
	if (!status && e->rep_port)
		vpd_put_str(b, VPD_A_PORT, e->rep_port);
	if (status && s->status_flows && !s->flows_failed) {
		GPtrArray *flows = e->handle < s->status_flows->len ?
				   s->status_flows->pdata[e->handle] : NULL;

		for (unsigned i = 0; flows && i < flows->len; i++)
			vpd_put_str(b, VPD_A_FLOW, flows->pdata[i]);
	}
	if (status && s->flows_failed)
		vpd_put_str(b, VPD_A_FLOW, s->flows_failed);
	if (status && e->claimed && e->flow_table) {
		const struct client *c = client_of(s, e->client);

		if (c) {
			g_autofree char *line = g_strdup_printf(
				"table=%u: %u rule(s) of its client (pid %d)", e->flow_table,
				g_hash_table_size(c->rules.by_id), c->cred.pid);

			vpd_put_str(b, VPD_A_FLOW, line);
		}
	}
	vpd_nest_end(b);
}

/* ---- requests ----------------------------------------------------------- */

static struct vpd_entry *entry_of(struct vpd_server *s, const struct vpd_msg *m)
{
	uint32_t h;

	if (!vpd_attr_u32(vpd_msg_get(m, VPD_A_HANDLE), &h) || h >= s->pools->entries->len)
		return NULL;
	return s->pools->entries->pdata[h];
}

static struct client *client_of(struct vpd_server *s, uint64_t id)
{
	return g_hash_table_lookup(s->clients, &id);
}

static bool client_process(struct client *c);
static void client_watch(struct client *c);
static void client_gone(struct client *c);

/*
 * The answer to c's pending request has been queued (ok: and the
 * connection is fine).  Inside the request's own handling (the datapath
 * answered at once), its caller goes on; later, c's next requests are
 * read now.
 */
static bool client_answered(struct client *c, bool ok, bool in_request)
{
	c->pending = false;
	if (in_request)
		return ok;
	if (!ok || !client_process(c))
		client_gone(c);
	else
		client_watch(c);
	return ok;
}

/* A CLAIM whose VFs' datapath is being opened. */
struct claim_op {
	struct vpd_server *s;
	uint64_t client;
	uint32_t seq;
	GPtrArray *got;         /* the entries claimed (the server's) */
	int fds[MAX_FDS];       /* their vhost-vdpa devices, open */
	char *pool, *owner;
	pid_t pid;
	uid_t uid;
	unsigned left;          /* answers of the datapath still to come */
	unsigned answers;       /* answers of the datapath so far */
	GError *error;          /* its first failure */
	unsigned failed;        /* which VF failed */
	bool handover;          /* the CLAIM asked for the hand-over token */
	gint64 t0;              /* monotonic, us: when its request was read */
};

static bool claim_finish(struct claim_op *op, bool in_request)
{
	struct vpd_server *s = op->s;
	struct client *c = client_of(s, op->client);
	unsigned n = op->got->len;
	struct pool_stats *ps;
	bool ok = true;

	if (op->error) {
		const struct vpd_entry *bad = op->got->pdata[op->failed];
		g_autofree char *msg = g_strdup_printf("VF %u of pool '%s': %s", bad->vf,
						       op->pool, op->error->message);

		/* Back to default-deny, those still this client's (it may have gone). */
		for (unsigned j = 0; j < n; j++) {
			struct vpd_entry *e = op->got->pdata[j];

			if (e->claimed && e->client == op->client)
				release_entry(s, e, op->client);
		}
		g_warning("claim refused: %s", msg);
		count_refused(s, op->pool);
		if (c)
			ok = send_error(c, op->seq, EIO, msg);
	} else if (c) {
		struct vpd_builder b;
		g_autoptr(GBytes) reply = NULL;

		for (unsigned j = 0; j < n; j++)
			save(s, op->got->pdata[j]);
		vpd_builder_init(&b, VPD_MSG_REPLY, op->seq);
		for (unsigned j = 0; j < n; j++)
			put_vf(s, &b, op->got->pdata[j], false);
		if (op->handover && c->has_handover)
			vpd_put_bytes(&b, VPD_A_HANDOVER, c->handover, sizeof(c->handover));
		reply = vpd_builder_finish(&b);
		ok = send_all(c, reply, op->fds, n);
		g_message("pool '%s': %u VF(s) claimed by '%s' (pid %d uid %u)", op->pool, n,
			  op->owner, op->pid, op->uid);
		ps = stats_named(s, op->pool);
		if (ps) {
			ps->claims++;
			vpd_hist_observe(&ps->claim, (g_get_monotonic_time() - op->t0) * 1000);
		}
	}
	/* (a client gone meanwhile had its VFs released by client_gone) */
	for (unsigned j = 0; j < n; j++)
		close(op->fds[j]);
	g_ptr_array_unref(op->got);
	g_clear_error(&op->error);
	g_free(op->pool);
	g_free(op->owner);
	g_free(op);
	return c ? client_answered(c, ok, in_request) : true;
}

static void claim_applied(const GError *error, void *opaque)
{
	struct claim_op *op = opaque;

	if (error && !op->error) {
		op->error = g_error_copy(error);
		op->failed = op->answers;  /* the answers come in the order asked */
	}
	op->answers++;
	if (--op->left == 0)
		claim_finish(op, false);
}

static bool do_claim(struct client *c, const struct vpd_msg *m)
{
	struct vpd_server *s = c->s;
	const char *pool = vpd_attr_str(vpd_msg_get(m, VPD_A_POOL));
	const char *owner = vpd_attr_str(vpd_msg_get(m, VPD_A_OWNER));
	g_autoptr(GPtrArray) got = g_ptr_array_new();
	g_autoptr(GError) err = NULL;
	struct claim_op *op;
	gint64 t0 = g_get_monotonic_time();
	int fds[MAX_FDS];
	uint32_t n;
	unsigned i;

	if (!pool || !vpd_attr_u32(vpd_msg_get(m, VPD_A_COUNT), &n)) {
		count_refused(s, pool);
		return send_error(c, m->seq, EINVAL, "CLAIM needs POOL and COUNT");
	}
	if (n > MAX_FDS) {
		count_refused(s, pool);
		return send_error(c, m->seq, EINVAL, "at most 253 VFs per CLAIM");
	}
	/*
	 * A VF whose device cannot be opened (a former claimant still holds
	 * it open: vhost-vdpa has one opener at a time) is quarantined and the
	 * claim tried again without it: one bad VF must not fail every claim.
	 * Each round quarantines one more VF, so this ends.
	 */
retry:
	if (!vpd_pools_claim(s->pools, pool, c->id, c->cred.uid, c->cred.gid, c->cred.pid,
			     vpd_proc_start_time(c->cred.pid), owner ? owner : "", n, got, &err)) {
		g_message("claim of %u VF(s) from pool '%s' by pid %d uid %u refused: %s", n,
			  pool, c->cred.pid, c->cred.uid, err->message);
		count_refused(s, pool);
		return send_error(c, m->seq, pool_errno(err), err->message);
	}
	for (i = 0; i < got->len; i++) {
		struct vpd_entry *e = got->pdata[i];
		int errnum;

		fds[i] = e->vhost_path ? open(e->vhost_path, O_RDWR | O_CLOEXEC) : -1;
		if (fds[i] >= 0)
			continue;
		errnum = errno;
		while (i--)
			close(fds[i]);
		for (unsigned j = 0; j < got->len; j++)
			vpd_pools_release(s->pools, got->pdata[j], c->id, NULL, NULL);
		g_ptr_array_set_size(got, 0);
		if (e->vhost_path) {
			e->quarantined = true;
			g_warning("VF %u of pool '%s' quarantined: cannot open %s: %s", e->vf,
				  pool, e->vhost_path, g_strerror(errnum));
			goto retry;
		} else {
			g_autofree char *msg = g_strdup_printf(
				"cannot open (no vhost-vdpa device) for VF %u of pool '%s': "
				"not provisioned", e->vf, pool);

			g_warning("%s", msg);
			count_refused(s, pool);
			return send_error(c, m->seq, ENODEV, msg);
		}
	}
	/* Their datapath opens (flows of a claimed VF), all or none: later. */
	op = g_new0(struct claim_op, 1);
	op->s = s;
	op->client = c->id;
	op->seq = m->seq;
	op->got = g_steal_pointer(&got);
	memcpy(op->fds, fds, sizeof(int) * op->got->len);
	op->pool = g_strdup(pool);
	op->owner = g_strdup(owner ? owner : "");
	op->pid = c->cred.pid;
	op->uid = c->cred.uid;
	op->t0 = t0;
	/* (only a client that asks gets it: one that does not may not know it) */
	op->handover = vpd_msg_get(m, VPD_A_HANDOVER) != NULL;
	op->left = op->got->len + 1;    /* + 1: until all are asked */
	for (i = 0; i < op->got->len; i++)  /* (through its table, once it has one) */
		((struct vpd_entry *)op->got->pdata[i])->flow_table = c->rules.table;
	c->pending = true;
	for (i = 0; i < op->got->len; i++)
		apply(s, op->got->pdata[i], claim_applied, op);
	if (--op->left == 0)
		return claim_finish(op, true);
	return true;
}

static bool do_release(struct client *c, const struct vpd_msg *m)
{
	struct vpd_entry *e = entry_of(c->s, m);
	gint64 t0 = g_get_monotonic_time();
	g_autoptr(GError) err = NULL;
	struct vpd_builder b;
	g_autoptr(GBytes) reply = NULL;
	struct pool_stats *ps;
	bool ok;

	if (!e)
		return send_error(c, m->seq, EINVAL, "RELEASE needs the HANDLE of a VF");
	if (!e->claimed || e->client != c->id)
		return send_error(c, m->seq, EPERM, "that VF is not claimed by this client");
	release_entry(c->s, e, c->id);
	vpd_builder_init(&b, VPD_MSG_REPLY, m->seq);
	reply = vpd_builder_finish(&b);
	ok = send_all(c, reply, NULL, 0);
	ps = stats_of(c->s, e->pool);
	if (ps) {
		ps->releases++;
		vpd_hist_observe(&ps->release, (g_get_monotonic_time() - t0) * 1000);
	}
	return ok;
}

/*
 * An operation that waits for the datapath (SET_ATTRS, REP_*, FLOW_*):
 * answered within its request, whose handler then returns the outcome,
 * or later, when the client reads on.
 */
struct op_end {
	bool in_request, answered, ok;
};

/* @op (its end @end) was answered; @ok: the reply went out.  Frees @op
 * unless its request's handler is still running. */
static void op_finish(struct client *c, void *op, struct op_end *end, bool ok)
{
	if (end->in_request) {
		end->answered = true;
		end->ok = ok;
		if (c)
			c->pending = false;
		return;
	}
	g_free(op);
	if (c)
		client_answered(c, ok, false);
}

/* The handler's return once the datapath was asked for @op. */
static bool op_asked(void *op, struct op_end *end)
{
	if (end->answered) {
		bool ok = end->ok;

		g_free(op);
		return ok;
	}
	end->in_request = false;
	return true;
}

/* A SET_ATTRS whose VF's datapath is being changed. */
struct attrs_op {
	struct vpd_server *s;
	uint64_t client;
	uint32_t seq;
	struct vpd_entry *e;
	struct vpd_vf_attrs old;        /* to go back to if the datapath fails */
	struct op_end end;
};

static void attrs_applied(const GError *error, void *opaque)
{
	struct attrs_op *op = opaque;
	struct vpd_server *s = op->s;
	struct client *c = client_of(s, op->client);
	struct vpd_entry *e = op->e;
	bool still = e->claimed && e->client == op->client;
	bool ok = true;

	if (error) {
		/* Back to what was, in the datapath too (best effort). */
		if (still) {
			e->attrs = op->old;
			apply_unwaited(s, e, "restoring its datapath");
		}
		if (c)
			ok = send_error(c, op->seq, EIO, error->message);
	} else if (!still) {
		if (c)
			ok = send_error(c, op->seq, EIO, "the VF was released meanwhile");
	} else {
		g_autoptr(GBytes) reply = NULL;
		struct vpd_builder b;

		save(s, e);
		if (c) {
			vpd_builder_init(&b, VPD_MSG_REPLY, op->seq);
			put_vf(s, &b, e, false);
			reply = vpd_builder_finish(&b);
			ok = send_all(c, reply, NULL, 0);
		}
	}
	op_finish(c, op, &op->end, ok);
}

/*
 * The client, other than @c, whose hand-over token @v is; 0: none (a token
 * of a client gone, or made up, lets nothing pass).  Compared in constant
 * time.
 */
static uint64_t handover_client(struct client *c, const struct vpd_attr_view *v)
{
	GHashTableIter it;
	gpointer key, value;
	uint64_t found = 0;

	g_hash_table_iter_init(&it, c->s->clients);
	while (g_hash_table_iter_next(&it, &key, &value)) {
		const struct client *o = value;
		uint8_t diff = 0;

		for (unsigned i = 0; i < VPD_HANDOVER_SIZE; i++)
			diff |= o->handover[i] ^ v->value[i];
		if (!diff && o->has_handover && o != c)
			found = o->id;
	}
	return found;
}

static bool do_set_attrs(struct client *c, const struct vpd_msg *m)
{
	struct vpd_entry *e = entry_of(c->s, m);
	g_autoptr(GError) err = NULL;
	g_autoptr(GBytes) reply = NULL;
	const struct vpd_attr_view *v;
	struct vpd_vf_attrs a, old;
	struct attrs_op *op;
	uint8_t u8;

	if (!e)
		return send_error(c, m->seq, EINVAL, "SET_ATTRS needs the HANDLE of a VF");
	a = old = e->attrs;
	v = vpd_msg_get(m, VPD_A_MAC);
	if (v) {
		if (v->len != 6)
			return send_error(c, m->seq, EINVAL, "MAC must be 6 bytes");
		memcpy(a.mac, v->value, 6);
	}
	if ((v = vpd_msg_get(m, VPD_A_VLAN)) && !vpd_attr_u16(v, &a.vlan))
		return send_error(c, m->seq, EINVAL, "bad VLAN");
	if ((v = vpd_msg_get(m, VPD_A_QOS)) && !vpd_attr_u8(v, &a.qos))
		return send_error(c, m->seq, EINVAL, "bad QOS");
	if ((v = vpd_msg_get(m, VPD_A_VLAN_PROTO)) && !vpd_attr_u16(v, &a.vlan_proto))
		return send_error(c, m->seq, EINVAL, "bad VLAN_PROTO");
	if ((v = vpd_msg_get(m, VPD_A_SPOOFCHK))) {
		if (!vpd_attr_u8(v, &u8) || u8 > 1)
			return send_error(c, m->seq, EINVAL, "SPOOFCHK is 0 or 1");
		a.spoofchk = u8;
	}
	if ((v = vpd_msg_get(m, VPD_A_TRUST))) {
		if (!vpd_attr_u8(v, &u8) || u8 > 1)
			return send_error(c, m->seq, EINVAL, "TRUST is 0 or 1");
		a.trust = u8;
	}
	if ((v = vpd_msg_get(m, VPD_A_LINK_STATE))) {
		if (!vpd_attr_u8(v, &u8) || u8 > VPD_LINK_DISABLE)
			return send_error(c, m->seq, EINVAL, "LINK_STATE is 0, 1 or 2");
		a.link_state = u8;
	}
	if ((v = vpd_msg_get(m, VPD_A_MIN_TX_RATE)) && !vpd_attr_u32(v, &a.min_tx_rate))
		return send_error(c, m->seq, EINVAL, "bad MIN_TX_RATE");
	if ((v = vpd_msg_get(m, VPD_A_MAX_TX_RATE)) && !vpd_attr_u32(v, &a.max_tx_rate))
		return send_error(c, m->seq, EINVAL, "bad MAX_TX_RATE");
	if (!e->claimed || e->client != c->id)
		return send_error(c, m->seq, EPERM, "that VF is not claimed by this client");
	v = vpd_msg_get(m, VPD_A_HANDOVER);
	if (!vpd_pools_set_attrs_from(c->s->pools, e, c->id, &a, v ? handover_client(c, v) : 0,
				      &err))
		return send_error(c, m->seq, pool_errno(err), err->message);
	op = g_new0(struct attrs_op, 1);
	op->s = c->s;
	op->client = c->id;
	op->seq = m->seq;
	op->e = e;
	op->old = old;
	op->end.in_request = true;
	c->pending = true;
	/* The vDPA device's MAC first, then the datapath. */
	if (memcmp(a.mac, old.mac, 6))
		set_vdpa_mac(c->s, e, a.mac, op);
	else
		apply(c->s, e, attrs_applied, op);
	return op_asked(op, &op->end);
}

/* A REP_OPEN or REP_CLOSE whose VF's datapath is being changed. */
struct rep_op {
	struct vpd_server *s;
	uint64_t client;
	uint32_t seq;
	struct vpd_entry *e;
	int fd;                         /* REP_OPEN: the tap's; -1: a REP_CLOSE */
	char *port;
	struct op_end end;
};

static void rep_applied(const GError *error, void *opaque)
{
	struct rep_op *op = opaque;
	struct vpd_server *s = op->s;
	struct client *c = client_of(s, op->client);
	struct vpd_entry *e = op->e;
	bool still = e->claimed && e->client == op->client;
	g_autoptr(GBytes) reply = NULL;
	struct vpd_builder b;
	bool ok = true;

	if (op->fd >= 0) {
		/* REP_OPEN: the port, as made, must still be the VF's */
		still = still && !g_strcmp0(e->rep_port, op->port);
		if (error || !still) {
			g_warning("VF %u of pool '%s': representor port %s not made: %s", e->vf,
				  e->pool->name, op->port,
				  error ? error->message : "the VF was released meanwhile");
			if (still) {  /* nothing left behind */
				rep_remove(s, e);
				apply_unwaited(s, e, "removing its representor port");
			}
			if (c)
				ok = send_error(c, op->seq, EIO, error ? error->message :
						"the VF was released meanwhile");
		} else if (c) {
			vpd_builder_init(&b, VPD_MSG_REPLY, op->seq);
			vpd_put_str(&b, VPD_A_PORT, op->port);
			reply = vpd_builder_finish(&b);
			ok = send_all(c, reply, &op->fd, 1);
			g_message("VF %u of pool '%s': representor port %s made for '%s' (pid %d)",
				  e->vf, e->pool->name, op->port, e->owner ? e->owner : "",
				  c->cred.pid);
		}
		close(op->fd);  /* (the client's copy went with the reply) */
	} else if (c) {
		if (error) {
			ok = send_error(c, op->seq, EIO, error->message);
		} else {
			vpd_builder_init(&b, VPD_MSG_REPLY, op->seq);
			reply = vpd_builder_finish(&b);
			ok = send_all(c, reply, NULL, 0);
		}
	}
	g_free(op->port);
	op_finish(c, op, &op->end, ok);
}

/* Ask the datapath for op's change; the answer comes now or later. */
static bool rep_apply(struct client *c, struct rep_op *op)
{
	op->s = c->s;
	op->client = c->id;
	op->end.in_request = true;
	c->pending = true;
	apply(c->s, op->e, rep_applied, op);
	return op_asked(op, &op->end);
}

/*
 * The VF of a REP_OPEN or REP_CLOSE, or NULL when it was refused (the
 * error sent, its result in *ok).
 */
static struct vpd_entry *rep_entry(struct client *c, const struct vpd_msg *m,
				   const char *what, bool *ok)
{
	struct vpd_server *s = c->s;
	uint32_t h;
	struct vpd_entry *e;
	g_autofree char *msg = NULL;

	if (!vpd_attr_u32(vpd_msg_get(m, VPD_A_HANDLE), &h)) {
		*ok = send_error(c, m->seq, EINVAL, what);
		return NULL;
	}
	if (h >= s->pools->entries->len) {
		msg = g_strdup_printf("no VF has handle %u", h);
		*ok = send_error(c, m->seq, ENOENT, msg);
		return NULL;
	}
	e = s->pools->entries->pdata[h];
	if (!e->claimed || e->client != c->id) {
		msg = g_strdup_printf("VF %u of pool '%s' is not claimed by this client", e->vf,
				      e->pool->name);
		*ok = send_error(c, m->seq, EPERM, msg);
		return NULL;
	}
	return e;
}

static bool do_rep_open(struct client *c, const struct vpd_msg *m)
{
	struct vpd_server *s = c->s;
	g_autoptr(GError) err = NULL;
	g_autofree char *msg = NULL;
	g_autofree char *name = NULL;
	struct vpd_entry *e;
	struct rep_op *op;
	int fd, ifindex = 0;
	bool ok;

	if (!(e = rep_entry(c, m, "REP_OPEN needs the HANDLE of a VF", &ok)))
		return ok;
	if (!e->pool->switchdev)
		msg = g_strdup_printf("pool '%s' gives no representor ports (switchdev = no)",
				      e->pool->name);
	else if (e->rep_port)
		msg = g_strdup_printf("VF %u of pool '%s' has a representor port already (%s)",
				      e->vf, e->pool->name, e->rep_port);
	else if (!s->rep_open)
		msg = g_strdup("this daemon makes no representor ports (no OVS)");
	if (msg) {
		g_message("REP_OPEN of VF %u of pool '%s' by pid %d refused: %s", e->vf,
			  e->pool->name, c->cred.pid, msg);
		return send_error(c, m->seq, !e->pool->switchdev ? EPERM :
				  e->rep_port ? EEXIST : EOPNOTSUPP, msg);
	}
	/* named after the VF's port (its vDPA device's name without OVS) */
	if (e->rep) {
		name = vpd_rep_port_name(e->rep);
	} else {
		g_autofree char *dev = vpd_vdpa_dev_name(e->pool->pf, e->vf);

		name = vpd_rep_port_name(dev);
	}
	fd = s->rep_open(name, &ifindex, &err);
	if (fd < 0) {
		g_warning("VF %u of pool '%s': %s", e->vf, e->pool->name, err->message);
		return send_error(c, m->seq, EIO, err->message);
	}
	e->rep_port = g_strdup(name);
	e->rep_ifindex = ifindex;
	op = g_new0(struct rep_op, 1);
	op->seq = m->seq;
	op->e = e;
	op->fd = fd;
	op->port = g_steal_pointer(&name);
	return rep_apply(c, op);
}

static bool do_rep_close(struct client *c, const struct vpd_msg *m)
{
	g_autofree char *msg = NULL;
	struct vpd_entry *e;
	struct rep_op *op;
	bool ok;

	if (!(e = rep_entry(c, m, "REP_CLOSE needs the HANDLE of a VF", &ok)))
		return ok;
	if (!e->rep_port) {
		msg = g_strdup_printf("VF %u of pool '%s' has no representor port", e->vf,
				      e->pool->name);
		return send_error(c, m->seq, ENOENT, msg);
	}
	rep_remove(c->s, e);
	op = g_new0(struct rep_op, 1);
	op->seq = m->seq;
	op->e = e;
	op->fd = -1;
	return rep_apply(c, op);
}

/* ---- a guest's rules (rules.h) ------------------------------------------- */

/* A FLOW_ADD, FLOW_DEL or FLOW_STATS waiting for the datapath. */
struct rule_op {
	struct vpd_server *s;
	uint64_t client;
	uint32_t seq;
	uint32_t id;
	uint8_t table;
	bool add;                       /* a FLOW_ADD: undone if OVS refuses it */
	struct op_end end;
};

/* The errno of a datapath's failure: a stuck OVS is EAGAIN (try later). */
static int datapath_errno(const GError *error)
{
	return g_error_matches(error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT) ? EAGAIN : EIO;
}

/* op's answer (REPLY, with the counters for a FLOW_STATS) or ERROR. */
static void rule_answer(struct rule_op *op, const GError *error, bool counters,
			uint64_t packets, uint64_t bytes)
{
	struct client *c = client_of(op->s, op->client);
	g_autoptr(GBytes) reply = NULL;
	struct vpd_builder b;
	bool ok = true;

	if (c && error && op->add && c->rules.table == op->table) {
		/* not made: not kept either (unless a release took it meanwhile) */
		g_hash_table_remove(c->rules.by_id, &op->id);
	}
	if (c && error) {
		g_warning("client pid %d: rule %u: %s", c->cred.pid, op->id, error->message);
		ok = send_error(c, op->seq, datapath_errno(error), error->message);
	} else if (c) {
		vpd_builder_init(&b, VPD_MSG_REPLY, op->seq);
		if (counters) {
			vpd_put_u64(&b, VPD_A_PACKETS, packets);
			vpd_put_u64(&b, VPD_A_BYTES, bytes);
		}
		reply = vpd_builder_finish(&b);
		ok = send_all(c, reply, NULL, 0);
	}
	op_finish(c, op, &op->end, ok);
}

static void rule_applied(const GError *error, void *opaque)
{
	rule_answer(opaque, error, false, 0, 0);
}

static void rule_counted(const GError *error, uint64_t packets, uint64_t bytes, void *opaque)
{
	rule_answer(opaque, error, true, packets, bytes);
}

static struct rule_op *rule_op_new(struct client *c, const struct vpd_msg *m, uint32_t id)
{
	struct rule_op *op = g_new0(struct rule_op, 1);

	op->s = c->s;
	op->client = c->id;
	op->seq = m->seq;
	op->id = id;
	op->table = c->rules.table;
	op->end.in_request = true;
	c->pending = true;
	return op;
}

/* After the datapath was asked: answered already, or later. */
static bool rule_op_asked(struct rule_op *op)
{
	return op_asked(op, &op->end);
}

/* A refused rule request: logged (at most once in 10 s) and answered. */
static bool rule_refuse(struct client *c, const struct vpd_msg *m, int errnum, const char *why)
{
	unsigned suppressed;

	if (ratelimit_ok(&c->s->refused_log, &suppressed))
		g_message("rule request of pid %d refused: %s (%u more refusals not logged)",
			  c->cred.pid, why, suppressed);
	return send_error(c, m->seq, errnum, why);
}

/*
 * The client's table, made at its first rule: its VFs with representor
 * ports go through it from now on (their flows changed in order before
 * the rule's).  0: none free.
 */
static uint8_t client_table(struct client *c)
{
	struct vpd_server *s = c->s;

	if (c->rules.table)
		return c->rules.table;
	c->rules.table = vpd_tables_alloc(&s->tables);
	if (!c->rules.table)
		return 0;
	for (unsigned i = 0; i < s->pools->entries->len; i++) {
		struct vpd_entry *e = s->pools->entries->pdata[i];

		if (!e->claimed || e->client != c->id)
			continue;
		e->flow_table = c->rules.table;
		if (e->rep_port)
			apply_unwaited(s, e, "its flows through its client's table");
	}
	g_message("client pid %d: its rules in OpenFlow table %u", c->cred.pid, c->rules.table);
	return c->rules.table;
}

static bool do_flow_add(struct client *c, const struct vpd_msg *m)
{
	struct vpd_server *s = c->s;
	g_autofree char *why = NULL;
	struct vpd_rule r;
	struct vpd_rule_change *ch;
	struct rule_op *op;
	int errnum;

	if (!vpd_rule_parse(m, &r, &errnum, &why) ||
	    !vpd_rule_check(&r, s->pools, c->id, &errnum, &why))
		return rule_refuse(c, m, errnum, why);
	if (g_hash_table_contains(c->rules.by_id, &r.id)) {
		why = g_strdup_printf("rule %u exists", r.id);
		return rule_refuse(c, m, EEXIST, why);
	}
	if (vpd_rules_count_pool(&c->rules, r.pool) >= r.pool->max_flows) {
		why = g_strdup_printf("pool '%s' allows %u rules per client (max-flows)",
				      r.pool->name, r.pool->max_flows);
		return rule_refuse(c, m, ENOSPC, why);
	}
	if (!vpd_bucket_take(&c->rules.bucket, r.pool->max_flow_changes,
			     g_get_monotonic_time())) {
		why = g_strdup_printf("pool '%s' allows %u rule changes a second per client "
				      "(max-flow-changes)", r.pool->name, r.pool->max_flow_changes);
		return rule_refuse(c, m, EAGAIN, why);
	}
	if (!client_table(c))
		return rule_refuse(c, m, ENOSPC, "no free OpenFlow table for this client's rules "
				   "(each client with rules has one of 253)");
	r.table = c->rules.table;
	vpd_rules_add(&c->rules, &r);
	ch = vpd_rule_change_new(r.table);
	g_ptr_array_add(ch->add, g_memdup2(&r, sizeof(r)));
	op = rule_op_new(c, m, r.id);
	op->add = true;
	rules_change(s, ch, rule_applied, op);
	vpd_rule_change_free(ch);
	return rule_op_asked(op);
}

/* The client's rule of m's FLOW_ID, or NULL (refused: *ok). */
static struct vpd_rule *rule_of(struct client *c, const struct vpd_msg *m, const char *what,
				bool *ok)
{
	g_autofree char *why = NULL;
	struct vpd_rule *r;
	uint32_t id;

	if (!vpd_attr_u32(vpd_msg_get(m, VPD_A_FLOW_ID), &id)) {
		why = g_strdup_printf("%s needs a FLOW_ID", what);
		*ok = rule_refuse(c, m, EINVAL, why);
		return NULL;
	}
	r = g_hash_table_lookup(c->rules.by_id, &id);
	if (!r) {
		why = g_strdup_printf("no rule %u", id);
		*ok = rule_refuse(c, m, ENOENT, why);
	}
	return r;
}

static bool do_flow_del(struct client *c, const struct vpd_msg *m)
{
	g_autofree char *why = NULL;
	struct vpd_rule_change *ch;
	struct vpd_rule *r;
	struct rule_op *op;
	uint32_t id;
	bool ok;

	if (!(r = rule_of(c, m, "FLOW_DEL", &ok)))
		return ok;
	if (!vpd_bucket_take(&c->rules.bucket, r->pool->max_flow_changes,
			     g_get_monotonic_time())) {
		why = g_strdup_printf("pool '%s' allows %u rule changes a second per client "
				      "(max-flow-changes)", r->pool->name, r->pool->max_flow_changes);
		return rule_refuse(c, m, EAGAIN, why);
	}
	id = r->id;
	ch = vpd_rule_change_new(c->rules.table);
	g_array_append_val(ch->del, id);
	g_hash_table_remove(c->rules.by_id, &id);
	op = rule_op_new(c, m, id);
	rules_change(c->s, ch, rule_applied, op);
	vpd_rule_change_free(ch);
	return rule_op_asked(op);
}

static bool do_flow_stats(struct client *c, const struct vpd_msg *m)
{
	struct vpd_server *s = c->s;
	struct vpd_rule *r;
	struct rule_op *op;
	bool ok;

	if (!(r = rule_of(c, m, "FLOW_STATS", &ok)))
		return ok;
	op = rule_op_new(c, m, r->id);
	if (s->rule_stats)
		s->rule_stats(c->rules.table, r->id, s->rules_opaque, rule_counted, op);
	else
		rule_counted(NULL, 0, 0, op);
	return rule_op_asked(op);
}

/* The reply to QUERY (mine) or STATUS (all), each VF's flows as given. */
static GBytes *query_reply(struct vpd_server *s, uint64_t client, uint32_t seq, bool all,
			   GPtrArray *flows, const char *unknown)
{
	struct vpd_builder b;

	s->status_flows = flows;
	s->flows_failed = unknown ? g_strdup_printf("unknown: %s", unknown) : NULL;
	vpd_builder_init(&b, VPD_MSG_REPLY, seq);
	for (unsigned i = 0; i < s->pools->entries->len; i++) {
		const struct vpd_entry *e = s->pools->entries->pdata[i];

		if (all || (e->claimed && e->client == client))
			put_vf(s, &b, e, all);
	}
	s->status_flows = NULL;
	g_clear_pointer(&s->flows_failed, g_free);
	return vpd_builder_finish(&b);
}

/* uid -> connections, in order of uid: METRICS' CONNS */
static gint uid_order(gconstpointer a, gconstpointer b)
{
	guint x = GPOINTER_TO_UINT(a), y = GPOINTER_TO_UINT(b);

	return x < y ? -1 : x > y;
}

/*
 * The reply to METRICS: each pooled VF with its port's counters (stats:
 * a struct vpd_port_stats per entry, or NULL: unknown, why in unknown),
 * each pool's counters and histograms, the connections by uid.  NULL when
 * it would not fit in one message.
 */
static GBytes *metrics_reply(struct vpd_server *s, uint32_t seq, GArray *stats,
			     const char *unknown)
{
	g_autoptr(GList) uids = g_list_sort(g_hash_table_get_keys(s->per_uid), uid_order);
	g_autoptr(GBytes) msg = NULL;
	struct vpd_builder b;

	vpd_builder_init(&b, VPD_MSG_REPLY, seq);
	vpd_put_u64(&b, VPD_A_START_TIME, s->start_time);
	if (unknown)
		vpd_put_str(&b, VPD_A_MESSAGE, unknown);
	for (unsigned i = 0; i < s->pools->entries->len; i++) {
		const struct vpd_entry *e = s->pools->entries->pdata[i];
		const struct vpd_port_stats *ps = stats && i < stats->len ?
			&g_array_index(stats, struct vpd_port_stats, i) : NULL;

		vpd_nest_start(&b, VPD_A_VF);
		vpd_put_u32(&b, VPD_A_HANDLE, e->handle);
		vpd_put_u32(&b, VPD_A_VF_INDEX, e->vf);
		vpd_put_str(&b, VPD_A_POOL, e->pool->name);
		if (e->claimed) {
			if (e->owner)
				vpd_put_str(&b, VPD_A_OWNER, e->owner);
			vpd_put_u32(&b, VPD_A_UID, e->uid);
		}
		vpd_put_u32(&b, VPD_A_COUNT, e->claimed ? (e->client ? 1 : 2) :
			    e->quarantined ? 3 : 0);
		vpd_put_bytes(&b, VPD_A_MAC, e->attrs.mac, 6);
		vpd_put_u16(&b, VPD_A_VLAN, e->attrs.vlan);
		if (e->rep)
			vpd_put_str(&b, VPD_A_PORT, e->rep);
		if (ps && ps->have)
			vpd_port_stats_put(&b, ps);
		vpd_nest_end(&b);
	}
	for (unsigned i = 0; i < s->pool_stats->len; i++) {
		const struct pool_stats *ps = s->pool_stats->pdata[i];

		vpd_nest_start(&b, VPD_A_POOL_STATS);
		vpd_put_str(&b, VPD_A_POOL, ps->pool->name);
		vpd_put_u64(&b, VPD_A_CLAIMS, ps->claims);
		vpd_put_u64(&b, VPD_A_CLAIMS_REFUSED, ps->refused);
		vpd_put_u64(&b, VPD_A_RELEASES, ps->releases);
		vpd_put_u64(&b, VPD_A_RELEASES_GONE, ps->gone);
		vpd_hist_put(&b, VPD_A_CLAIM_HIST, &ps->claim);
		vpd_hist_put(&b, VPD_A_RELEASE_HIST, &ps->release);
		vpd_nest_end(&b);
	}
	for (GList *l = uids; l; l = l->next) {
		vpd_nest_start(&b, VPD_A_CONNS);
		vpd_put_u32(&b, VPD_A_UID, GPOINTER_TO_UINT(l->data));
		vpd_put_u32(&b, VPD_A_COUNT, GPOINTER_TO_UINT(g_hash_table_lookup(s->per_uid,
										   l->data)));
		vpd_nest_end(&b);
	}
	msg = vpd_builder_finish(&b);
	if (g_bytes_get_size(msg) > VPD_HEADER_SIZE + VPD_MAX_PAYLOAD)
		return NULL;
	return g_steal_pointer(&msg);
}

/* A STATUS waiting for the flows, or a METRICS or VF_STATS for the ports'
 * counters (at most VPD_FLOWS_WAIT_MS). */
struct status_op {
	struct vpd_server *s;
	uint64_t client;
	uint32_t seq;
	guint timer;
	unsigned refs;          /* the datapath's answer, the timer, do_query */
	bool metrics;           /* a METRICS, or a VF_STATS: */
	int vf;                 /* a VF_STATS of this entry, or -1 */
	bool in_request, answered, ok;
};

/*
 * VF_STATS are answered from the counters of every entry that the last
 * METRICS or VF_STATS read, while they are younger than this: one OVSDB
 * select (of every Interface) serves a guest reading each of its VFs'
 * counters in turn, and OVS refreshes them every 5 s anyway.
 */
#define VPD_VF_STATS_MAX_AGE_MS 1000

/*
 * The reply to VF_STATS: the VF's port's counters, or none and why
 * (ps NULL or without any: unknown).
 */
static GBytes *vf_stats_reply(uint32_t seq, const struct vpd_port_stats *ps,
			      const char *unknown)
{
	struct vpd_builder b;

	vpd_builder_init(&b, VPD_MSG_REPLY, seq);
	if (ps && ps->have)
		vpd_port_stats_put(&b, ps);
	else
		vpd_put_str(&b, VPD_A_MESSAGE, unknown ? unknown : "OVS has no counters of its port");
	return vpd_builder_finish(&b);
}

static void status_unref(struct status_op *op)
{
	if (--op->refs == 0)
		g_free(op);
}

static void status_answer(struct status_op *op, GPtrArray *flows, GArray *stats,
			  const char *unknown)
{
	struct client *c = client_of(op->s, op->client);
	g_autoptr(GBytes) reply = NULL;

	op->answered = true;
	if (!c)
		return;
	if (stats && stats->len == op->s->pools->entries->len) {
		g_clear_pointer(&op->s->vf_stats, g_array_unref);
		op->s->vf_stats = g_array_copy(stats);
		op->s->vf_stats_at = g_get_monotonic_time();
	}
	if (op->vf >= 0)
		reply = vf_stats_reply(op->seq, stats && (unsigned)op->vf < stats->len ?
				       &g_array_index(stats, struct vpd_port_stats, op->vf) : NULL,
				       unknown);
	else if (!op->metrics)
		reply = query_reply(op->s, op->client, op->seq, true, flows, unknown);
	else
		reply = metrics_reply(op->s, op->seq, stats, unknown);
	if (reply)
		op->ok = send_all(c, reply, NULL, 0);
	else
		op->ok = send_error(c, op->seq, EMSGSIZE, "too many VFs for one METRICS answer");
	if (op->in_request)
		c->pending = false;
	else
		client_answered(c, op->ok, false);
}

/* The OVS worker's part came (or failed): the answer, unless the timeout gave it. */
static void status_got(struct status_op *op, GPtrArray *flows, GArray *stats,
		       const GError *error)
{
	if (!op->answered) {
		if (op->timer) {
			g_source_remove(op->timer);
			op->timer = 0;
			op->refs--;
		}
		status_answer(op, flows, stats, error ? error->message : NULL);
	}
	status_unref(op);
}

static void status_flows_done(GPtrArray *flows, const GError *error, void *opaque)
{
	status_got(opaque, flows, NULL, error);
}

static void metrics_stats_done(GArray *stats, const GError *error, void *opaque)
{
	status_got(opaque, NULL, stats, error);
}

static gboolean status_timeout(gpointer data)
{
	struct status_op *op = data;

	op->timer = 0;
	if (!op->answered)
		status_answer(op, NULL, NULL, "OVS did not answer in time");
	status_unref(op);
	return G_SOURCE_REMOVE;
}

/*
 * The datapath's part of a STATUS, METRICS or VF_STATS (vf: the VF's
 * entry): the answer waits for it, never longer than VPD_FLOWS_WAIT_MS.
 */
static bool ask_datapath(struct client *c, const struct vpd_msg *m, bool metrics,
			 struct vpd_entry *vf)
{
	struct vpd_server *s = c->s;
	struct status_op *op;
	bool answered, ok;

	op = g_new0(struct status_op, 1);
	op->s = s;
	op->client = c->id;
	op->seq = m->seq;
	op->metrics = metrics || vf;
	op->vf = vf ? (int)vf->handle : -1;
	op->refs = 3;           /* the datapath's answer, the timer, this call */
	op->in_request = true;
	c->pending = true;
	op->timer = g_timeout_add(VPD_FLOWS_WAIT_MS, status_timeout, op);
	if (op->metrics)
		s->port_stats(s->pools->entries, s->port_stats_opaque, metrics_stats_done, op);
	else
		s->flows(s->pools->entries, s->flows_opaque, status_flows_done, op);
	op->in_request = false;
	answered = op->answered;
	ok = op->ok;
	status_unref(op);
	return answered ? ok : true;
}

/*
 * VF_STATS: the counters of a VF the connection claimed, from its port
 * (every entry's read, and kept VPD_VF_STATS_MAX_AGE_MS).
 */
static bool do_vf_stats(struct client *c, const struct vpd_msg *m)
{
	g_autoptr(GBytes) reply = NULL;
	struct vpd_entry *e;
	bool ok;

	if (!(e = rep_entry(c, m, "VF_STATS needs the HANDLE of a VF", &ok)))
		return ok;
	if (!c->s->port_stats || !e->rep) {
		reply = vf_stats_reply(m->seq, NULL, !c->s->port_stats ?
				       "the daemon runs without OVS" : "the VF has no switch port");
		return send_all(c, reply, NULL, 0);
	}
	if (c->s->vf_stats && e->handle < c->s->vf_stats->len &&
	    g_get_monotonic_time() - c->s->vf_stats_at < VPD_VF_STATS_MAX_AGE_MS * 1000) {
		reply = vf_stats_reply(m->seq, &g_array_index(c->s->vf_stats,
							      struct vpd_port_stats, e->handle),
				       NULL);
		return send_all(c, reply, NULL, 0);
	}
	return ask_datapath(c, m, false, e);
}

static bool do_query(struct client *c, const struct vpd_msg *m, bool all, bool metrics)
{
	struct vpd_server *s = c->s;
	g_autoptr(GBytes) reply = NULL;

	if (metrics && c->cred.uid != 0)
		return send_error(c, m->seq, EPERM, "METRICS is for root only");
	if (all && c->cred.uid != 0)
		return send_error(c, m->seq, EPERM, "STATUS is for root only");
	if (metrics && !s->port_stats) {
		reply = metrics_reply(s, m->seq, NULL, NULL);
		if (!reply)
			return send_error(c, m->seq, EMSGSIZE, "too many VFs for one METRICS answer");
		return send_all(c, reply, NULL, 0);
	}
	if (!metrics && (!all || !s->flows)) {
		reply = query_reply(s, c->id, m->seq, all, NULL, NULL);
		return send_all(c, reply, NULL, 0);
	}
	/* The flows or counters, from OVS */
	return ask_datapath(c, m, metrics, NULL);
}

static bool handle(struct client *c, GBytes *bytes)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(vpd_msg) m = vpd_msg_parse(bytes, &err);

	if (!m) {
		g_message("client pid %d: %s; closing its connection", c->cred.pid, err->message);
		return false;
	}
	switch (m->type) {
	case VPD_MSG_CLAIM:
		return do_claim(c, m);
	case VPD_MSG_RELEASE:
		return do_release(c, m);
	case VPD_MSG_SET_ATTRS:
		return do_set_attrs(c, m);
	case VPD_MSG_QUERY:
		return do_query(c, m, false, false);
	case VPD_MSG_STATUS:
		return do_query(c, m, true, false);
	case VPD_MSG_METRICS:
		return do_query(c, m, true, true);
	case VPD_MSG_REP_OPEN:
		return do_rep_open(c, m);
	case VPD_MSG_REP_CLOSE:
		return do_rep_close(c, m);
	case VPD_MSG_FLOW_ADD:
		return do_flow_add(c, m);
	case VPD_MSG_FLOW_DEL:
		return do_flow_del(c, m);
	case VPD_MSG_FLOW_STATS:
		return do_flow_stats(c, m);
	case VPD_MSG_VF_STATS:
		return do_vf_stats(c, m);
	default:
		return send_error(c, m->seq, EOPNOTSUPP, "unknown request type");
	}
}

/* ---- connections -------------------------------------------------------- */

static void client_gone(struct client *c)
{
	struct vpd_server *s = c->s;
	unsigned n;

	rules_drop_client(s, c);
	n = release_client(s, c->id, 0);

	if (n)
		g_message("client pid %d went away: %u VF(s) released", c->cred.pid, n);
	g_hash_table_remove(s->clients, &c->id);
}

static gboolean client_ready(int fd, GIOCondition cond, gpointer data);

/*
 * Watch for what the client's state needs: its replies' sending while
 * some are queued (and nothing of it is read meanwhile, so a client that
 * does not read cannot make the daemon queue more), else its requests.
 */
static void client_watch(struct client *c)
{
	GIOCondition want = (!g_queue_is_empty(&c->out) ? G_IO_OUT : c->pending ? 0 : G_IO_IN) |
			    G_IO_HUP | G_IO_ERR;

	if (c->src && c->watching == want)
		return;
	if (c->src)
		g_source_remove(c->src);
	c->watching = want;
	c->src = g_unix_fd_add(c->fd, want, client_ready, c);
}

/* Handle the complete requests received, while their replies go out. */
static bool client_process(struct client *c)
{
	while (!c->pending && g_queue_is_empty(&c->out) && c->in->len >= VPD_HEADER_SIZE) {
		g_autoptr(GError) err = NULL;
		gssize total = vpd_msg_total_len(c->in->data, c->in->len, &err);
		g_autoptr(GBytes) msg = NULL;

		if (total < 0) {
			g_message("client pid %d: %s; closing its connection", c->cred.pid,
				  err->message);
			return false;
		}
		if (c->in->len < (gsize)total)
			break;
		msg = g_bytes_new(c->in->data, total);
		g_byte_array_remove_range(c->in, 0, total);
		if (!handle(c, msg))
			return false;
	}
	return true;
}

/*
 * The source's callback may destroy its own source (client_watch, and
 * client_free through client_gone): it always answers CONTINUE and never
 * touches c once c is gone.
 */
static gboolean client_ready(int fd, GIOCondition cond, gpointer data)
{
	struct client *c = data;
	uint8_t buf[4096];
	ssize_t n;

	if (cond & G_IO_OUT) {
		if (!flush_out(c)) {
			client_gone(c);
			return G_SOURCE_CONTINUE;
		}
	} else if (cond & (G_IO_IN | G_IO_HUP | G_IO_ERR)) {
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return G_SOURCE_CONTINUE;
		if (n <= 0) {
			client_gone(c);
			return G_SOURCE_CONTINUE;
		}
		c->last_in = g_get_monotonic_time();
		g_byte_array_append(c->in, buf, n);
	}
	if ((cond & (G_IO_HUP | G_IO_ERR)) && !(cond & G_IO_IN) && !g_queue_is_empty(&c->out)) {
		client_gone(c);
		return G_SOURCE_CONTINUE;
	}
	if (!client_process(c)) {
		client_gone(c);
		return G_SOURCE_CONTINUE;
	}
	client_watch(c);
	return G_SOURCE_CONTINUE;
}

static unsigned claims_of(struct vpd_server *s, uint64_t client)
{
	unsigned n = 0;

	for (unsigned i = 0; i < s->pools->entries->len; i++) {
		const struct vpd_entry *e = s->pools->entries->pdata[i];

		n += e->claimed && e->client == client;
	}
	return n;
}

/* ---- quarantined VFs ----------------------------------------------------- */

struct probe {
	GArray *handles;        /* unsigned: entries probed */
	GPtrArray *paths;       /* their vhost-vdpa devices */
	GArray *usable;         /* unsigned: those that opened */
};

static void probe_free(gpointer data)
{
	struct probe *p = data;

	g_array_unref(p->handles);
	g_ptr_array_unref(p->paths);
	g_array_unref(p->usable);
	g_free(p);
}

/* In a worker thread: opening a vDPA device resets it, which may wait. */
static void probe_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancel)
{
	(void)source;
	(void)cancel;
	struct probe *p = data;

	for (unsigned i = 0; i < p->paths->len; i++) {
		int fd = open(p->paths->pdata[i], O_RDWR | O_CLOEXEC);
		/*
		 * A lock someone holds on it means in use too: what the tests'
		 * fake devices do (daemon.c's check at start does the same).
		 */
		bool usable = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0;

		if (fd >= 0)
			close(fd);
		if (usable)
			g_array_append_val(p->usable, g_array_index(p->handles, unsigned, i));
	}
	g_task_return_boolean(task, true);
}

static void probe_done(GObject *source, GAsyncResult *res, gpointer data)
{
	(void)source;
	struct vpd_server *s = data;
	struct probe *p = g_task_get_task_data(G_TASK(res));

	s->probing = false;
	for (unsigned i = 0; i < p->usable->len; i++) {
		struct vpd_entry *e = s->pools->entries->pdata[g_array_index(p->usable,
									     unsigned, i)];

		if (e->quarantined) {
			e->quarantined = false;
			g_message("VF %u of pool '%s' usable again: back in the pool", e->vf,
				  e->pool->name);
		}
	}
}

/* Try the quarantined VFs' devices again, off the loop's thread. */
static void probe_quarantined(struct vpd_server *s)
{
	struct probe *p;
	GTask *task;

	if (s->probing)
		return;
	p = g_new0(struct probe, 1);
	p->handles = g_array_new(false, false, sizeof(unsigned));
	p->paths = g_ptr_array_new_with_free_func(g_free);
	p->usable = g_array_new(false, false, sizeof(unsigned));
	for (unsigned i = 0; i < s->pools->entries->len; i++) {
		const struct vpd_entry *e = s->pools->entries->pdata[i];

		if (e->quarantined && e->vhost_path) {
			g_array_append_val(p->handles, e->handle);
			g_ptr_array_add(p->paths, g_strdup(e->vhost_path));
		}
	}
	if (!p->paths->len) {
		probe_free(p);
		return;
	}
	s->probing = true;
	task = g_task_new(NULL, NULL, probe_done, s);
	g_task_set_task_data(task, p, probe_free);
	g_task_run_in_thread(task, probe_thread);
	g_object_unref(task);
}

/* Each second: drop clients stuck half-way, close idle ones. */
static gboolean server_tick(gpointer data)
{
	struct vpd_server *s = data;
	const struct vpd_server_limits *l = &s->limits;
	gint64 now = g_get_monotonic_time();
	gint64 io = (gint64)l->io_timeout * G_USEC_PER_SEC;
	gint64 idle = (gint64)l->idle_timeout * G_USEC_PER_SEC;
	g_autoptr(GPtrArray) drop = g_ptr_array_new();
	GHashTableIter it;
	gpointer value;

	g_hash_table_iter_init(&it, s->clients);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		struct client *c = value;

		if (!g_queue_is_empty(&c->out) && now - c->out_since > io) {
			g_message("client pid %d uid %u has not read its reply for %u s; "
				  "dropping it", c->cred.pid, c->cred.uid, l->io_timeout);
			g_ptr_array_add(drop, c);
		} else if (c->in->len && !c->pending && now - c->last_in > io) {
			g_message("client pid %d uid %u left a request half sent for %u s; "
				  "dropping it", c->cred.pid, c->cred.uid, l->io_timeout);
			g_ptr_array_add(drop, c);
		} else if (idle && !c->pending && g_queue_is_empty(&c->out) &&
			   now - c->last_in > idle &&
			   !claims_of(s, c->id)) {
			g_debug("client pid %d uid %u idle for %u s, holding no VF: closing",
				c->cred.pid, c->cred.uid, l->idle_timeout);
			g_ptr_array_add(drop, c);
		}
	}
	for (unsigned i = 0; i < drop->len; i++)
		client_gone(drop->pdata[i]);
	if (++s->ticks % QUARANTINE_PROBE_S == 0)
		probe_quarantined(s);
	return G_SOURCE_CONTINUE;
}

/*
 * A reconnecting process gets back what it held before a restart: the
 * same pid, uid and start time (another process that got the pid of a
 * claimant does not).
 */
static void adopt_orphans(struct vpd_server *s, struct client *c)
{
	guint64 start_time = 0;
	unsigned n = 0;

	for (unsigned i = 0; i < s->pools->entries->len; i++) {
		struct vpd_entry *e = s->pools->entries->pdata[i];

		if (!e->claimed || e->client || e->pid != c->cred.pid || e->uid != c->cred.uid)
			continue;
		if (!start_time)
			start_time = vpd_proc_start_time(c->cred.pid);
		if (start_time && e->start_time == start_time) {
			e->client = c->id;
			n++;
		}
	}
	if (n) {
		/* Its pidfd watch goes (the table's destroy function removes it). */
		g_hash_table_remove(s->orphan_watches, GINT_TO_POINTER(c->cred.pid));
		g_message("pid %d reconnected: it holds %u VF(s) again", c->cred.pid, n);
	}
}

static gboolean new_client(int fd, GIOCondition cond, gpointer data);

static gboolean resume_accepting(gpointer data)
{
	struct vpd_server *s = data;

	s->resume_src = 0;
	s->listen_src = g_unix_fd_add(s->listen_fd, G_IO_IN, new_client, s);
	return G_SOURCE_REMOVE;
}

/*
 * Out of file descriptors: the pending connection would wake the loop
 * again at once, so stop watching the socket for a moment (connections
 * wait in its backlog) instead of spinning.
 */
static void pause_accepting(struct vpd_server *s, int errnum)
{
	unsigned suppressed;

	if (ratelimit_ok(&s->fds_log, &suppressed))
		g_warning("cannot accept connections: %s (%u clients); pausing 250 ms%s",
			  g_strerror(errnum), g_hash_table_size(s->clients),
			  suppressed ? " (and earlier times not logged)" : "");
	g_source_remove(s->listen_src);
	s->listen_src = 0;
	s->resume_src = g_timeout_add(250, resume_accepting, s);
}

/* Tell a refused peer why (best effort, never blocking), then close. */
static void refuse(struct vpd_server *s, int fd, const struct ucred *cred, int errnum,
		   const char *why)
{
	struct vpd_builder b;
	g_autoptr(GBytes) msg = NULL;
	const void *data;
	gsize len;
	unsigned suppressed;

	vpd_builder_init(&b, VPD_MSG_ERROR, 0);
	vpd_put_u32(&b, VPD_A_ERRNO, errnum);
	vpd_put_str(&b, VPD_A_MESSAGE, why);
	msg = vpd_builder_finish(&b);
	data = g_bytes_get_data(msg, &len);
	if (send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		g_debug("refused connection: %s", g_strerror(errno));
	close(fd);
	if (ratelimit_ok(&s->refused_log, &suppressed))
		g_message("connection of pid %d uid %u refused: %s%s", cred->pid, cred->uid,
			  why, suppressed ? " (and earlier ones not logged)" : "");
}

/* Whether one more connection of cred fits the limits; why not in why. */
static bool admit(struct vpd_server *s, const struct ucred *cred, char **why)
{
	const struct vpd_server_limits *l = &s->limits;
	unsigned total = g_hash_table_size(s->clients);
	unsigned reserve = MIN(8, l->max_clients / 2);
	unsigned mine = GPOINTER_TO_UINT(g_hash_table_lookup(s->per_uid,
							     GUINT_TO_POINTER(cred->uid)));

	/* root keeps a few connections for itself (vdpa-poolctl status). */
	if (cred->uid == 0) {
		if (total < l->max_clients)
			return true;
	} else if (mine >= l->max_clients_per_uid) {
		*why = g_strdup_printf("too many connections from uid %u (max-clients-per-uid "
				       "= %u)", cred->uid, l->max_clients_per_uid);
		return false;
	} else if (total < l->max_clients - reserve) {
		return true;
	}
	*why = g_strdup_printf("too many connections (max-clients = %u)", l->max_clients);
	return false;
}

static gboolean new_client(int fd, GIOCondition cond, gpointer data)
{
	(void)cond;
	struct vpd_server *s = data;
	socklen_t len;
	struct ucred cred;
	struct client *c;
	int cfd;

	/* A batch per wake-up: a flood of connections cannot starve the rest. */
	for (unsigned i = 0; i < 32; i++) {
		g_autofree char *why = NULL;
		unsigned mine;

		cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (cfd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM)
				pause_accepting(s, errno);
			/* EAGAIN: none left; ECONNABORTED, EINTR, ...: the next one. */
			if (errno == EAGAIN || errno == EWOULDBLOCK || !s->listen_src)
				return G_SOURCE_CONTINUE;
			continue;
		}
		len = sizeof(cred);
		if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
			g_warning("SO_PEERCRED: %s; connection refused", g_strerror(errno));
			close(cfd);
			continue;
		}
		if (!admit(s, &cred, &why)) {
			refuse(s, cfd, &cred, EUSERS, why);
			continue;
		}
		c = g_new0(struct client, 1);
		vpd_rules_init(&c->rules);
		c->s = s;
		c->fd = cfd;
		c->cred = cred;
		c->in = g_byte_array_new();
		g_queue_init(&c->out);
		c->last_in = g_get_monotonic_time();
		c->id = ++s->next_id;
		/* (never blocks: before the kernel's pool is ready, no token) */
		c->has_handover = getrandom(c->handover, sizeof(c->handover), GRND_NONBLOCK) ==
				  (ssize_t)sizeof(c->handover);
		if (!c->has_handover)
			g_warning("client %" G_GUINT64_FORMAT ": no randomness for a hand-over token",
				  c->id);
		mine = GPOINTER_TO_UINT(g_hash_table_lookup(s->per_uid,
							    GUINT_TO_POINTER(cred.uid)));
		g_hash_table_insert(s->per_uid, GUINT_TO_POINTER(cred.uid),
				    GUINT_TO_POINTER(mine + 1));
		g_hash_table_insert(s->clients, &c->id, c);
		adopt_orphans(s, c);
		client_watch(c);
	}
	return G_SOURCE_CONTINUE;
}

/* ---- claims restored from the state file -------------------------------- */

struct orphan {
	struct vpd_server *s;
	pid_t pid;
	int pidfd;
};

static gboolean orphan_ready(int fd, GIOCondition cond, gpointer data)
{
	(void)fd;
	(void)cond;
	struct orphan *o = data;
	unsigned n = release_client(o->s, 0, o->pid);

	g_message("pid %d exited while the daemon was away: %u VF(s) released", o->pid, n);
	g_hash_table_remove(o->s->orphan_watches, GINT_TO_POINTER(o->pid));
	return G_SOURCE_REMOVE;
}

static void orphan_free(gpointer data)
{
	struct orphan *o = data;

	close(o->pidfd);
	g_free(o);
}

/*
 * A pidfd of the claimant of e, or -1 when it is gone: the process now of
 * that pid must have the claimant's start time, read while the pidfd's
 * process still runs (its pid was not yet free to be given again).
 */
static int orphan_pidfd(const struct vpd_entry *e, guint64 *start_time)
{
	struct pollfd p = { .events = POLLIN };

	*start_time = 0;
	p.fd = e->pid > 0 ? syscall(SYS_pidfd_open, e->pid, 0) : -1;
	if (p.fd < 0)
		return -1;
	*start_time = vpd_proc_start_time(e->pid);
	/* POLLIN: the pidfd's process has exited. */
	if (*start_time != e->start_time || poll(&p, 1, 0) != 0) {
		close(p.fd);
		return -1;
	}
	return p.fd;
}

void vpd_server_watch_orphans(struct vpd_server *s)
{
	for (unsigned i = 0; i < s->pools->entries->len; i++) {
		struct vpd_entry *e = s->pools->entries->pdata[i];
		struct orphan *o;
		guint64 start_time;
		int pidfd;

		if (!e->claimed || e->client ||
		    g_hash_table_contains(s->orphan_watches, GINT_TO_POINTER(e->pid)))
			continue;
		pidfd = orphan_pidfd(e, &start_time);
		if (pidfd < 0) {
			guint64 claimant = e->start_time;
			pid_t pid = e->pid;
			unsigned n = release_client(s, 0, pid);

			if (start_time && start_time != claimant)
				g_warning("pid %d is another process now (started at %"
					  G_GUINT64_FORMAT ", the claimant at %" G_GUINT64_FORMAT
					  "): %u VF(s) it held released", pid, start_time,
					  claimant, n);
			else
				g_message("pid %d is gone: %u VF(s) it held released", pid, n);
			continue;
		}
		o = g_new0(struct orphan, 1);
		o->s = s;
		o->pid = e->pid;
		o->pidfd = pidfd;
		g_hash_table_insert(s->orphan_watches, GINT_TO_POINTER(e->pid),
				    GUINT_TO_POINTER(g_unix_fd_add_full(G_PRIORITY_DEFAULT, pidfd,
								     G_IO_IN, orphan_ready,
								     o, orphan_free)));
	}
}

/* ---- life cycle --------------------------------------------------------- */

static void remove_source(gpointer id)
{
	g_source_remove(GPOINTER_TO_UINT(id));
}

static struct vpd_server *server_new(struct vpd_pools *pools, const char *socket_path,
				     bool owned, struct vpd_state *state, int fd)
{
	struct vpd_server *s = g_new0(struct vpd_server, 1);

	s->pools = pools;
	s->socket_path = g_strdup(socket_path);
	s->socket_owned = owned;
	s->state = state;
	s->listen_fd = fd;
	s->limits = (struct vpd_server_limits) {
		.max_clients = 256, .max_clients_per_uid = 16,
		.idle_timeout = 300, .io_timeout = 10,
	};
	s->clients = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, client_free);
	s->per_uid = g_hash_table_new(NULL, NULL);
	s->timer_src = g_timeout_add_seconds(1, server_tick, s);
	s->orphan_watches = g_hash_table_new_full(NULL, NULL, NULL, remove_source);
	s->pool_stats = g_ptr_array_new_with_free_func(g_free);
	s->start_time = g_get_real_time() / G_USEC_PER_SEC;
	for (unsigned i = 0; i < pools->entries->len; i++) {
		const struct vpd_entry *e = pools->entries->pdata[i];

		if (!stats_of(s, e->pool)) {
			struct pool_stats *ps = g_new0(struct pool_stats, 1);

			ps->pool = e->pool;
			g_ptr_array_add(s->pool_stats, ps);
		}
	}
	s->listen_src = g_unix_fd_add(fd, G_IO_IN, new_client, s);
	return s;
}

struct vpd_server *vpd_server_new(struct vpd_pools *pools, const char *socket_path,
				  unsigned mode, gid_t gid, struct vpd_state *state,
				  GError **error)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	g_autofree char *dir = g_path_get_dirname(socket_path);
	int fd;

	if (strlen(socket_path) >= sizeof(addr.sun_path)) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
			    "socket path %s is too long", socket_path);
		return NULL;
	}
	strcpy(addr.sun_path, socket_path);
	if (g_mkdir_with_parents(dir, 0755) < 0) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
			    "cannot create %s: %s", dir, g_strerror(errno));
		return NULL;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	unlink(socket_path);
	/* Group and mode before listen(): nobody connects in between. */
	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    chown(socket_path, 0, gid) < 0 || chmod(socket_path, mode) < 0 ||
	    listen(fd, SOMAXCONN) < 0) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
			    "cannot listen on %s: %s", socket_path, g_strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	return server_new(pools, socket_path, true, state, fd);
}

struct vpd_server *vpd_server_adopt(struct vpd_pools *pools, int fd, struct vpd_state *state,
				    GError **error)
{
	struct sockaddr_un addr;
	socklen_t len = sizeof(addr);
	int type, listening;
	socklen_t olen = sizeof(int);

	if (getsockname(fd, (struct sockaddr *)&addr, &len) < 0 ||
	    addr.sun_family != AF_UNIX ||
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &olen) < 0 || type != SOCK_STREAM ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &olen) < 0 || !listening) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
			    "the socket passed as fd %d is not a listening Unix stream socket",
			    fd);
		return NULL;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
			    "the socket passed as fd %d: %s", fd, g_strerror(errno));
		return NULL;
	}
	if (len <= offsetof(struct sockaddr_un, sun_path) || !addr.sun_path[0])
		strcpy(addr.sun_path, "(unnamed)");
	return server_new(pools, addr.sun_path, false, state, fd);
}

const char *vpd_server_socket_path(const struct vpd_server *s)
{
	return s->socket_path;
}

void vpd_server_set_flows(struct vpd_server *s, vpd_flows_fn fn, void *opaque)
{
	s->flows = fn;
	s->flows_opaque = opaque;
}

void vpd_server_set_port_stats(struct vpd_server *s, vpd_port_stats_fn fn, void *opaque)
{
	s->port_stats = fn;
	s->port_stats_opaque = opaque;
}

void vpd_server_set_limits(struct vpd_server *s, const struct vpd_server_limits *limits)
{
	s->limits = *limits;
}

void vpd_server_set_apply(struct vpd_server *s, vpd_apply_fn fn, void *opaque)
{
	s->apply = fn;
	s->apply_opaque = opaque;
}

void vpd_server_set_vdpa_mac(struct vpd_server *s, vpd_mac_fn fn)
{
	s->set_mac = fn;
	if (!s->mac_pool)
		s->mac_pool = g_thread_pool_new(mac_job_run, s, 1, FALSE, NULL);
}

void vpd_server_set_rules(struct vpd_server *s, vpd_rules_fn rules, vpd_rule_stats_fn stats,
			  void *opaque)
{
	s->rules = rules;
	s->rule_stats = stats;
	s->rules_opaque = opaque;
}

void vpd_server_set_reps(struct vpd_server *s, vpd_rep_open_fn open, vpd_rep_close_fn close)
{
	s->rep_open = open;
	s->rep_close = close;
}

void vpd_server_free(struct vpd_server *s)
{
	if (!s)
		return;
	if (s->listen_src)
		g_source_remove(s->listen_src);
	if (s->resume_src)
		g_source_remove(s->resume_src);
	/* A probe or MAC change still running would complete into freed memory. */
	if (s->mac_pool)
		g_thread_pool_free(s->mac_pool, FALSE, TRUE);
	while (s->probing || s->mac_jobs)
		g_main_context_iteration(NULL, true);
	g_source_remove(s->timer_src);
	close(s->listen_fd);
	/* An inherited socket is its supervisor's (systemd's) to remove. */
	if (s->socket_owned)
		unlink(s->socket_path);
	g_hash_table_unref(s->clients);
	g_hash_table_unref(s->per_uid);
	g_hash_table_unref(s->orphan_watches);
	g_ptr_array_unref(s->pool_stats);
	if (s->vf_stats)
		g_array_unref(s->vf_stats);
	g_free(s->socket_path);
	g_free(s);
}
