// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * server: the API socket (see server.h).
 */
#define _GNU_SOURCE
#include "server.h"
#include "proc.h"
#include "protocol.h"
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib-unix.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_FDS 253             /* SCM_MAX_FD */

struct client {
	struct vpd_server *s;
	uint64_t id;
	int fd;
	guint src;
	struct ucred cred;
	GByteArray *in;
};

struct vpd_server {
	struct vpd_pools *pools;
	char *socket_path;
	struct vpd_state *state;
	int listen_fd;
	guint listen_src;
	GHashTable *clients;            /* id -> struct client * */
	GHashTable *orphan_watches;     /* pid -> source id */
	uint64_t next_id;
	vpd_apply_fn apply;
	void *apply_opaque;
	vpd_flows_fn flows;
	void *flows_opaque;
	char *flows_failed;             /* during one STATUS: why OVS could not say */
};

static void client_free(gpointer data)
{
	struct client *c = data;

	if (c->src)
		g_source_remove(c->src);
	close(c->fd);
	g_byte_array_unref(c->in);
	g_free(c);
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

static bool apply(struct vpd_server *s, struct vpd_entry *e, GError **error)
{
	return !s->apply || s->apply(e, s->apply_opaque, error);
}

/* Back to the pool (attributes to defaults), its datapath to default-deny. */
static void release_entry(struct vpd_server *s, struct vpd_entry *e, uint64_t client)
{
	g_autoptr(GError) err = NULL;

	vpd_pools_release(s->pools, e, client, NULL);
	if (!apply(s, e, &err))
		g_warning("VF %u of pool '%s': resetting its datapath failed: %s", e->vf,
			  e->pool->name, err->message);
	save(s, e);
}

static unsigned release_client(struct vpd_server *s, uint64_t client, pid_t pid)
{
	unsigned n = 0;

	for (unsigned i = 0; i < s->pools->entries->len; i++) {
		struct vpd_entry *e = s->pools->entries->pdata[i];

		if (e->claimed && e->client == client && (client || e->pid == pid)) {
			release_entry(s, e, client);
			n++;
		}
	}
	return n;
}

/* ---- replies ------------------------------------------------------------ */

static bool send_all(struct client *c, GBytes *msg, const int *fds, unsigned nfds)
{
	gsize len;
	const uint8_t *data = g_bytes_get_data(msg, &len);
	union {
		char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds) {
		struct cmsghdr *cm;

		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	/* The socket blocks for at most SO_SNDTIMEO: a stuck client is dropped. */
	while (len) {
		n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		len -= n;
		iov.iov_base = (uint8_t *)iov.iov_base + n;
		iov.iov_len = len;
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
	}
	return true;
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
		vpd_put_u32(b, VPD_A_COUNT,
			    e->claimed ? (e->client ? 1 : 2) : e->quarantined ? 3 : 0);
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
	if (status && e->rep)
		vpd_put_str(b, VPD_A_PORT, e->rep);
	if (status && s->flows && !s->flows_failed) {
		g_autoptr(GError) err = NULL;
		g_autoptr(GPtrArray) flows = s->flows(e, s->flows_opaque, &err);

		for (unsigned i = 0; flows && i < flows->len; i++)
			vpd_put_str(b, VPD_A_FLOW, flows->pdata[i]);
		/* Once the datapath fails, the other VFs of this STATUS are not asked. */
		if (!flows)
			s->flows_failed = g_strdup_printf("unknown: %s", err->message);
	}
	if (status && s->flows_failed)
		vpd_put_str(b, VPD_A_FLOW, s->flows_failed);
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

static bool do_claim(struct client *c, const struct vpd_msg *m)
{
	struct vpd_server *s = c->s;
	const char *pool = vpd_attr_str(vpd_msg_get(m, VPD_A_POOL));
	const char *owner = vpd_attr_str(vpd_msg_get(m, VPD_A_OWNER));
	g_autoptr(GPtrArray) got = g_ptr_array_new();
	g_autoptr(GError) err = NULL;
	g_autoptr(GBytes) reply = NULL;
	int fds[MAX_FDS];
	struct vpd_builder b;
	uint32_t n;
	unsigned i;
	bool ok;

	if (!pool || !vpd_attr_u32(vpd_msg_get(m, VPD_A_COUNT), &n))
		return send_error(c, m->seq, EINVAL, "CLAIM needs POOL and COUNT");
	if (n > MAX_FDS)
		return send_error(c, m->seq, EINVAL, "at most 253 VFs per CLAIM");
	if (!vpd_pools_claim(s->pools, pool, c->id, c->cred.uid, c->cred.gid, c->cred.pid,
			     vpd_proc_start_time(c->cred.pid), owner ? owner : "", n, got, &err)) {
		g_message("claim of %u VF(s) from pool '%s' by pid %d uid %u refused: %s", n,
			  pool, c->cred.pid, c->cred.uid, err->message);
		return send_error(c, m->seq, pool_errno(err), err->message);
	}
	for (i = 0; i < got->len; i++) {
		struct vpd_entry *e = got->pdata[i];

		fds[i] = e->vhost_path ? open(e->vhost_path, O_RDWR | O_CLOEXEC) : -1;
		if (fds[i] < 0) {
			g_autofree char *msg = g_strdup_printf(
				"cannot open %s for VF %u of pool '%s': %s",
				e->vhost_path ? e->vhost_path : "(no vhost-vdpa device)", e->vf,
				pool, e->vhost_path ? g_strerror(errno) : "not provisioned");
			int errnum = e->vhost_path ? errno : ENODEV;

			while (i--)
				close(fds[i]);
			for (unsigned j = 0; j < got->len; j++)
				vpd_pools_release(s->pools, got->pdata[j], c->id, NULL);
			g_warning("%s", msg);
			return send_error(c, m->seq, errnum, msg);
		}
	}
	/* Their datapath opens (flows of a claimed VF), all or none. */
	for (i = 0; i < got->len; i++) {
		if (!apply(s, got->pdata[i], &err)) {
			g_autofree char *msg = g_strdup_printf("VF %u of pool '%s': %s",
				((struct vpd_entry *)got->pdata[i])->vf, pool, err->message);

			/* Those applied go back to default-deny; the rest never opened. */
			for (unsigned j = 0; j < got->len; j++) {
				close(fds[j]);
				if (j <= i)
					release_entry(s, got->pdata[j], c->id);
				else
					vpd_pools_release(s->pools, got->pdata[j], c->id, NULL);
			}
			g_warning("claim refused: %s", msg);
			return send_error(c, m->seq, EIO, msg);
		}
	}
	for (i = 0; i < got->len; i++)
		save(s, got->pdata[i]);
	vpd_builder_init(&b, VPD_MSG_REPLY, m->seq);
	for (i = 0; i < got->len; i++)
		put_vf(s, &b, got->pdata[i], false);
	reply = vpd_builder_finish(&b);
	ok = send_all(c, reply, fds, got->len);
	for (i = 0; i < got->len; i++)
		close(fds[i]);
	g_message("pool '%s': %u VF(s) claimed by '%s' (pid %d uid %u)", pool, n,
		  owner ? owner : "", c->cred.pid, c->cred.uid);
	return ok;
}

static bool do_release(struct client *c, const struct vpd_msg *m)
{
	struct vpd_entry *e = entry_of(c->s, m);
	g_autoptr(GError) err = NULL;
	struct vpd_builder b;
	g_autoptr(GBytes) reply = NULL;

	if (!e)
		return send_error(c, m->seq, EINVAL, "RELEASE needs the HANDLE of a VF");
	if (!e->claimed || e->client != c->id)
		return send_error(c, m->seq, EPERM, "that VF is not claimed by this client");
	release_entry(c->s, e, c->id);
	vpd_builder_init(&b, VPD_MSG_REPLY, m->seq);
	reply = vpd_builder_finish(&b);
	return send_all(c, reply, NULL, 0);
}

static bool do_set_attrs(struct client *c, const struct vpd_msg *m)
{
	struct vpd_entry *e = entry_of(c->s, m);
	g_autoptr(GError) err = NULL;
	g_autoptr(GBytes) reply = NULL;
	const struct vpd_attr_view *v;
	struct vpd_vf_attrs a, old;
	struct vpd_builder b;
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
	if (!vpd_pools_set_attrs(c->s->pools, e, c->id, &a, &err))
		return send_error(c, m->seq, pool_errno(err), err->message);
	if (!apply(c->s, e, &err)) {
		g_autoptr(GError) again = NULL;

		/* Back to what was, in the datapath too (best effort). */
		e->attrs = old;
		if (!apply(c->s, e, &again))
			g_warning("VF %u of pool '%s': restoring its datapath failed: %s", e->vf,
				  e->pool->name, again->message);
		return send_error(c, m->seq, EIO, err->message);
	}
	save(c->s, e);
	vpd_builder_init(&b, VPD_MSG_REPLY, m->seq);
	put_vf(c->s, &b, e, false);
	reply = vpd_builder_finish(&b);
	return send_all(c, reply, NULL, 0);
}

static bool do_query(struct client *c, const struct vpd_msg *m, bool all)
{
	struct vpd_server *s = c->s;
	g_autoptr(GBytes) reply = NULL;
	struct vpd_builder b;

	if (all && c->cred.uid != 0)
		return send_error(c, m->seq, EPERM, "STATUS is for root only");
	vpd_builder_init(&b, VPD_MSG_REPLY, m->seq);
	for (unsigned i = 0; i < s->pools->entries->len; i++) {
		const struct vpd_entry *e = s->pools->entries->pdata[i];

		if (all || (e->claimed && e->client == c->id))
			put_vf(s, &b, e, all);
	}
	g_clear_pointer(&s->flows_failed, g_free);
	reply = vpd_builder_finish(&b);
	return send_all(c, reply, NULL, 0);
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
		return do_query(c, m, false);
	case VPD_MSG_STATUS:
		return do_query(c, m, true);
	default:
		return send_error(c, m->seq, EOPNOTSUPP, "unknown request type");
	}
}

/* ---- connections -------------------------------------------------------- */

static void client_gone(struct client *c)
{
	struct vpd_server *s = c->s;
	unsigned n = release_client(s, c->id, 0);

	if (n)
		g_message("client pid %d went away: %u VF(s) released", c->cred.pid, n);
	c->src = 0;
	g_hash_table_remove(s->clients, &c->id);
}

static gboolean client_ready(int fd, GIOCondition cond, gpointer data)
{
	(void)cond;
	struct client *c = data;
	uint8_t buf[4096];
	ssize_t n;

	n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return G_SOURCE_CONTINUE;
	if (n <= 0) {
		client_gone(c);
		return G_SOURCE_REMOVE;
	}
	g_byte_array_append(c->in, buf, n);
	while (c->in->len >= VPD_HEADER_SIZE) {
		g_autoptr(GError) err = NULL;
		gssize total = vpd_msg_total_len(c->in->data, c->in->len, &err);
		g_autoptr(GBytes) msg = NULL;

		if (total < 0) {
			g_message("client pid %d: %s; closing its connection", c->cred.pid,
				  err->message);
			client_gone(c);
			return G_SOURCE_REMOVE;
		}
		if (c->in->len < (gsize)total)
			break;
		msg = g_bytes_new(c->in->data, total);
		g_byte_array_remove_range(c->in, 0, total);
		if (!handle(c, msg)) {
			client_gone(c);
			return G_SOURCE_REMOVE;
		}
	}
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

static gboolean new_client(int fd, GIOCondition cond, gpointer data)
{
	(void)cond;
	struct vpd_server *s = data;
	struct timeval tv = { .tv_sec = 1 };
	socklen_t len = sizeof(struct ucred);
	struct client *c;
	int cfd;

	cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
	if (cfd < 0)
		return G_SOURCE_CONTINUE;
	c = g_new0(struct client, 1);
	c->s = s;
	c->fd = cfd;
	c->in = g_byte_array_new();
	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len) < 0) {
		g_warning("SO_PEERCRED: %s; connection refused", g_strerror(errno));
		client_free(c);
		return G_SOURCE_CONTINUE;
	}
	setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	c->id = ++s->next_id;
	g_hash_table_insert(s->clients, &c->id, c);
	adopt_orphans(s, c);
	c->src = g_unix_fd_add(cfd, G_IO_IN | G_IO_HUP | G_IO_ERR, client_ready, c);
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

struct vpd_server *vpd_server_new(struct vpd_pools *pools, const char *socket_path,
				  struct vpd_state *state, GError **error)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	g_autofree char *dir = g_path_get_dirname(socket_path);
	struct vpd_server *s;
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
	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    chmod(socket_path, 0666) < 0 || listen(fd, 64) < 0) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
			    "cannot listen on %s: %s", socket_path, g_strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	s = g_new0(struct vpd_server, 1);
	s->pools = pools;
	s->socket_path = g_strdup(socket_path);
	s->state = state;
	s->listen_fd = fd;
	s->clients = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, client_free);
	s->orphan_watches = g_hash_table_new_full(NULL, NULL, NULL, remove_source);
	s->listen_src = g_unix_fd_add(fd, G_IO_IN, new_client, s);
	return s;
}

void vpd_server_set_flows(struct vpd_server *s, vpd_flows_fn fn, void *opaque)
{
	s->flows = fn;
	s->flows_opaque = opaque;
}

void vpd_server_set_apply(struct vpd_server *s, vpd_apply_fn fn, void *opaque)
{
	s->apply = fn;
	s->apply_opaque = opaque;
}

void vpd_server_free(struct vpd_server *s)
{
	if (!s)
		return;
	g_source_remove(s->listen_src);
	close(s->listen_fd);
	unlink(s->socket_path);
	g_hash_table_unref(s->clients);
	g_hash_table_unref(s->orphan_watches);
	g_free(s->socket_path);
	g_free(s);
}
