// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of the server's FLOW_ADD, FLOW_DEL and FLOW_STATS over its
 * real socket, with a datapath that records what it is asked: each
 * refusal's errno (EEXIST, EPERM, EINVAL, ENOENT, ENOSPC, EAGAIN) with
 * nothing asked of the datapath, a table per client, the VFs rerouted
 * through it before its first rule, a VF's rules gone with its
 * representor port, a client's table gone with its connection.
 */
#include "proc.h"
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const char *conf =
	"[daemon]\novs-bridge = br0\n"
	"[pf pf0]\nnum-vfs = 6\n"
	"[pool s]\npf = pf0\nvfs = 0-5\nswitchdev = yes\nvlans = 100-199\n"
	"max-flows = 3\nmax-flow-changes = 10\n";

struct fixture {
	struct vpd_config *cfg;
	struct vpd_pools *pools;
	struct vpd_state_report report;
	struct vpd_state *state;
	struct vpd_server *server;
	char *dir;
	char *sock;
	GString *log;           /* what the datapath was asked, in order */
};

/* The datapath: each VF change and rule change logged, done at once. */
static void apply_log(const struct vpd_entry *e, void *opaque, vpd_applied_fn done,
		      void *done_opaque)
{
	struct fixture *f = opaque;

	if (e->rep_port)
		g_string_append_printf(f->log, "vf%u:%s%u;", e->vf, e->claimed ? "t" : "free",
				       e->flow_table);
	done(NULL, done_opaque);
}

static void rules_log(const struct vpd_rule_change *c, void *opaque, vpd_applied_fn done,
		      void *done_opaque)
{
	struct fixture *f = opaque;

	g_string_append_printf(f->log, "t%u:", c->table);
	if (c->del_table)
		g_string_append(f->log, "clear");
	for (unsigned i = 0; i < c->del->len; i++)
		g_string_append_printf(f->log, "-%u", g_array_index(c->del, uint32_t, i));
	for (unsigned i = 0; i < c->add->len; i++) {
		const struct vpd_rule *r = c->add->pdata[i];

		g_string_append_printf(f->log, "+%u(vf%u>%d)", r->id, r->in_vf,
				       r->out_pf ? (int)r->out_vf : -1);
	}
	g_string_append_c(f->log, ';');
	done(NULL, done_opaque);
}

static void stats_fake(uint8_t table, uint32_t id, void *opaque, vpd_rule_counted_fn done,
		       void *done_opaque)
{
	(void)opaque;
	done(NULL, table * 1000 + id, 60 * (table * 1000 + id), done_opaque);
}

static int rep_open_fake(const char *name, int *ifindex, GError **error)
{
	(void)name;
	(void)error;
	*ifindex = 0;
	return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static bool rep_close_fake(const char *name, int ifindex, GError **error)
{
	(void)name;
	(void)ifindex;
	(void)error;
	return true;
}

static void setup(struct fixture *f, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *boot = vpd_proc_boot_id(&err);
	g_autofree char *state = NULL;

	(void)data;
	f->cfg = vpd_config_parse(conf, "t.conf", &err);
	g_assert_no_error(err);
	f->pools = vpd_pools_new(f->cfg);
	for (unsigned i = 0; i < f->pools->entries->len; i++)
		((struct vpd_entry *)f->pools->entries->pdata[i])->vhost_path =
			g_strdup("/dev/null");
	memset(&f->report, 0, sizeof(f->report));
	f->dir = g_dir_make_tmp("vpd-rules-XXXXXX", &err);
	g_assert_no_error(err);
	state = g_build_filename(f->dir, "state", NULL);
	f->state = vpd_state_open(f->pools, state, boot, &f->report, &err);
	g_assert_no_error(err);
	f->sock = g_build_filename(f->dir, "api.sock", NULL);
	f->server = vpd_server_new(f->pools, f->sock, 0600, 0, f->state, &err);
	g_assert_no_error(err);
	f->log = g_string_new(NULL);
	vpd_server_set_apply(f->server, apply_log, f);
	vpd_server_set_rules(f->server, rules_log, stats_fake, f);
	vpd_server_set_reps(f->server, rep_open_fake, rep_close_fake);
}

static void teardown(struct fixture *f, gconstpointer data)
{
	g_autoptr(GDir) d = NULL;
	const char *name;

	(void)data;
	vpd_server_free(f->server);
	vpd_state_close(f->state);
	vpd_state_report_clear(&f->report);
	vpd_pools_free(f->pools);
	vpd_config_free(f->cfg);
	d = g_dir_open(f->dir, 0, NULL);
	while ((name = g_dir_read_name(d))) {
		g_autofree char *p = g_build_filename(f->dir, name, NULL);

		g_assert_cmpint(unlink(p), ==, 0);
	}
	g_assert_cmpint(rmdir(f->dir), ==, 0);
	g_free(f->dir);
	g_free(f->sock);
	g_string_free(f->log, TRUE);
}

static int connect_to(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	g_assert_cmpint(fd, >=, 0);
	strcpy(addr.sun_path, path);
	g_assert_cmpint(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), ==, 0);
	return fd;
}

/*
 * Send b's message on fd and run the loop until its whole answer came
 * (fds it carries closed); the test fails after 5 s.  Returns the answer.
 */
static struct vpd_msg *request(int fd, struct vpd_builder *b)
{
	g_autoptr(GBytes) out = vpd_builder_finish(b);
	g_autoptr(GByteArray) in = g_byte_array_new();
	gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
	gsize len;
	const uint8_t *data = g_bytes_get_data(out, &len);
	g_autoptr(GError) err = NULL;
	g_autoptr(GBytes) whole = NULL;
	struct vpd_msg *m;

	g_assert_cmpint(send(fd, data, len, MSG_NOSIGNAL), ==, (gssize)len);
	for (;;) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * 16)];
			struct cmsghdr align;
		} u;
		uint8_t buf[4096];
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
				     .msg_controllen = sizeof(u.buf) };
		ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);

		if (n > 0) {
			for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
				for (unsigned i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
					close(((int *)CMSG_DATA(c))[i]);
			g_byte_array_append(in, buf, n);
		}
		if (in->len >= VPD_HEADER_SIZE &&
		    in->len >= (gsize)vpd_msg_total_len(in->data, in->len, NULL))
			break;
		if (g_get_monotonic_time() > deadline)
			g_error("no answer within 5 s");
		g_main_context_iteration(NULL, FALSE);
		if (n <= 0)
			g_usleep(500);
	}
	whole = g_bytes_new(in->data, in->len);
	m = vpd_msg_parse(whole, &err);
	g_assert_no_error(err);
	return m;
}

/* The errno of an ERROR answer, 0 for a REPLY. */
static int answer_errno(const struct vpd_msg *m)
{
	uint32_t e = 0;

	if (m->type == VPD_MSG_REPLY)
		return 0;
	g_assert_cmpuint(m->type, ==, VPD_MSG_ERROR);
	g_assert_true(vpd_attr_u32(vpd_msg_get(m, VPD_A_ERRNO), &e));
	return e;
}

static int simple(int fd, uint16_t type, uint16_t attr, uint32_t v)
{
	struct vpd_builder b;
	g_autoptr(vpd_msg) m = NULL;

	vpd_builder_init(&b, type, 1);
	vpd_put_u32(&b, attr, v);
	m = request(fd, &b);
	return answer_errno(m);
}

static void claim(int fd, unsigned n)
{
	struct vpd_builder b;
	g_autoptr(vpd_msg) m = NULL;

	vpd_builder_init(&b, VPD_MSG_CLAIM, 1);
	vpd_put_str(&b, VPD_A_POOL, "s");
	vpd_put_str(&b, VPD_A_OWNER, "vm");
	vpd_put_u32(&b, VPD_A_COUNT, n);
	m = request(fd, &b);
	g_assert_cmpint(answer_errno(m), ==, 0);
}

/* FLOW_ADD id, HANDLE in, OUT out (-1: drop); its errno. */
static int flow_add(int fd, uint32_t id, uint32_t in, int out)
{
	struct vpd_builder b;
	g_autoptr(vpd_msg) m = NULL;

	vpd_builder_init(&b, VPD_MSG_FLOW_ADD, 1);
	vpd_put_u32(&b, VPD_A_FLOW_ID, id);
	vpd_put_u16(&b, VPD_A_PRIORITY, 100);
	vpd_put_u32(&b, VPD_A_HANDLE, in);
	if (out >= 0)
		vpd_put_u32(&b, VPD_A_OUT, out);
	m = request(fd, &b);
	return answer_errno(m);
}

static bool entry_free(const struct vpd_entry *e)
{
	return !e->claimed;
}

static void test_rules(struct fixture *f, gconstpointer data)
{
	struct vpd_entry *vf0 = f->pools->entries->pdata[0];
	struct vpd_entry *vf3 = f->pools->entries->pdata[3];
	int a = connect_to(f->sock), b = connect_to(f->sock), c;
	struct vpd_builder bl;
	g_autoptr(vpd_msg) stats = NULL;
	uint64_t packets = 0, bytes = 0;
	gint64 deadline;
	unsigned i;

	(void)data;
	claim(a, 3);            /* VFs 0, 1, 2: representor ports on 0 and 1 */
	claim(b, 1);            /* VF 3, with one */
	g_assert_cmpint(simple(a, VPD_MSG_REP_OPEN, VPD_A_HANDLE, 0), ==, 0);
	g_assert_cmpint(simple(a, VPD_MSG_REP_OPEN, VPD_A_HANDLE, 1), ==, 0);
	g_assert_cmpint(simple(b, VPD_MSG_REP_OPEN, VPD_A_HANDLE, 3), ==, 0);
	g_string_truncate(f->log, 0);

	/* The first rule: the client's VFs through table 1 first, then the rule. */
	g_assert_cmpint(flow_add(a, 1, 0, 1), ==, 0);
	g_assert_cmpstr(f->log->str, ==, "vf0:t1;vf1:t1;t1:+1(vf0>1);");
	g_assert_cmpuint(vf0->flow_table, ==, 1);
	g_string_truncate(f->log, 0);

	/* Refusals: nothing asked of the datapath. */
	g_assert_cmpint(flow_add(a, 1, 0, -1), ==, EEXIST);
	g_assert_cmpint(flow_add(a, 5, 0, 3), ==, EPERM);     /* b's VF as OUT */
	g_assert_cmpint(flow_add(a, 5, 3, 0), ==, EPERM);     /* b's VF as HANDLE */
	g_assert_cmpint(flow_add(a, 5, 4, -1), ==, EPERM);    /* a free VF */
	g_assert_cmpint(flow_add(a, 5, 2, -1), ==, EINVAL);   /* no representor port */
	g_assert_cmpint(simple(a, VPD_MSG_FLOW_DEL, VPD_A_FLOW_ID, 9), ==, ENOENT);
	g_assert_cmpint(simple(a, VPD_MSG_FLOW_STATS, VPD_A_FLOW_ID, 9), ==, ENOENT);
	g_assert_cmpint(simple(b, VPD_MSG_FLOW_DEL, VPD_A_FLOW_ID, 1), ==, ENOENT); /* a's */
	g_assert_cmpstr(f->log->str, ==, "");

	/* Counters, from the datapath's rule of the client's table. */
	vpd_builder_init(&bl, VPD_MSG_FLOW_STATS, 1);
	vpd_put_u32(&bl, VPD_A_FLOW_ID, 1);
	stats = request(a, &bl);
	g_assert_cmpint(answer_errno(stats), ==, 0);
	g_assert_true(vpd_attr_u64(vpd_msg_get(stats, VPD_A_PACKETS), &packets));
	g_assert_true(vpd_attr_u64(vpd_msg_get(stats, VPD_A_BYTES), &bytes));
	g_assert_cmpuint(packets, ==, 1001);
	g_assert_cmpuint(bytes, ==, 60060);

	/* max-flows = 3: the fourth ENOSPC, nothing asked */
	g_assert_cmpint(flow_add(a, 2, 0, -1), ==, 0);
	g_assert_cmpint(flow_add(a, 3, 1, -1), ==, 0);
	g_string_truncate(f->log, 0);
	g_assert_cmpint(flow_add(a, 4, 0, -1), ==, ENOSPC);
	g_assert_cmpstr(f->log->str, ==, "");

	/* b has a table of its own */
	g_assert_cmpint(flow_add(b, 1, 3, -1), ==, 0);
	g_assert_cmpstr(f->log->str, ==, "vf3:t2;t2:+1(vf3>-1);");
	g_assert_cmpuint(vf3->flow_table, ==, 2);

	/* max-flow-changes = 10 a second: a churn runs into EAGAIN */
	for (i = 0; i < 200; i++)
		if (simple(a, VPD_MSG_FLOW_DEL, VPD_A_FLOW_ID, 2) == EAGAIN ||
		    flow_add(a, 2, 0, -1) == EAGAIN)
			break;
	g_assert_cmpuint(i, <, 200);
	/* ... and b's budget is its own */
	g_assert_cmpint(simple(b, VPD_MSG_FLOW_DEL, VPD_A_FLOW_ID, 1), ==, 0);

	/* VF 1's representor port goes: rule 1 (OUT) and 3 (HANDLE) with it */
	g_string_truncate(f->log, 0);
	g_assert_cmpint(simple(a, VPD_MSG_REP_CLOSE, VPD_A_HANDLE, 1), ==, 0);
	g_assert_true(g_str_has_prefix(f->log->str, "t1:-1-3;") ||
		      g_str_has_prefix(f->log->str, "t1:-3-1;"));
	g_assert_cmpint(simple(a, VPD_MSG_FLOW_STATS, VPD_A_FLOW_ID, 1), ==, ENOENT);

	/* a closes: its table is cleared and free again */
	g_string_truncate(f->log, 0);
	close(a);
	deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
	while (!entry_free(vf0) && g_get_monotonic_time() < deadline) {
		g_main_context_iteration(NULL, FALSE);
		g_usleep(500);
	}
	g_assert_true(entry_free(vf0));
	g_assert_true(g_str_has_prefix(f->log->str, "t1:clear;"));
	g_assert_cmpuint(vf0->flow_table, ==, 0);
	c = connect_to(f->sock);
	claim(c, 1);
	g_assert_cmpint(simple(c, VPD_MSG_REP_OPEN, VPD_A_HANDLE, 0), ==, 0);
	g_assert_cmpint(flow_add(c, 7, 0, -1), ==, 0);
	g_assert_cmpuint(vf0->flow_table, ==, 1);
	close(b);
	close(c);
	deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
	while ((!entry_free(vf0) || !entry_free(vf3)) && g_get_monotonic_time() < deadline) {
		g_main_context_iteration(NULL, FALSE);
		g_usleep(500);
	}
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add("/server-rules/rules", struct fixture, NULL, setup, test_rules, teardown);
	return g_test_run();
}
