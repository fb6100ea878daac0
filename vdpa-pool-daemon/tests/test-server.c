// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of the server's claims restored from the state file: a
 * process reconnecting gets them back only with the claimant's pid, uid
 * and start time; the pidfd watch keeps a claim only for the process that
 * made it (not for another one that got its pid) and releases it when that
 * process exits.  (The API itself is tested against the real daemon in
 * tests/unit/test_daemon.py; a recycled pid cannot be provoked there, and
 * the state file's load releases such claims before the watch sees them.)
 * And METRICS: the claims and releases it counts, its histograms, and its
 * refusal to a peer that is not root; VF_STATS: a VF's port's counters for
 * the connection that claimed it only.
 */
#define _GNU_SOURCE
#include "metrics.h"
#include "proc.h"
#include "server.h"

#include <errno.h>
#include <gio/gio.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *conf = "[pf pf0]\nnum-vfs = 4\n[pool a]\npf = pf0\nvfs = 0-3\n";

struct fixture {
	struct vpd_config *cfg;
	struct vpd_pools *pools;
	struct vpd_state_report report;
	struct vpd_state *state;
	struct vpd_server *server;
	char *dir;
	char *sock;
};

static void setup(struct fixture *f, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *boot = vpd_proc_boot_id(&err);
	g_autofree char *state = NULL;

	(void)data;
	g_assert_no_error(err);
	f->cfg = vpd_config_parse(conf, "t.conf", &err);
	g_assert_no_error(err);
	f->pools = vpd_pools_new(f->cfg);
	memset(&f->report, 0, sizeof(f->report));
	f->dir = g_dir_make_tmp("vpd-server-XXXXXX", &err);
	g_assert_no_error(err);
	state = g_build_filename(f->dir, "state", NULL);
	f->state = vpd_state_open(f->pools, state, boot, &f->report, &err);
	g_assert_no_error(err);
	f->sock = g_build_filename(f->dir, "api.sock", NULL);
	f->server = vpd_server_new(f->pools, f->sock, 0600, 0, f->state, &err);
	g_assert_no_error(err);
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
}

/* Entry vf as the state file restores it: claimed by no connection. */
static struct vpd_entry *orphan(struct fixture *f, unsigned vf, pid_t pid, guint64 start)
{
	struct vpd_entry *e = f->pools->entries->pdata[vf];

	e->claimed = true;
	e->client = 0;
	e->uid = getuid();
	e->pid = pid;
	e->start_time = start;
	e->owner = g_strdup("vm");
	return e;
}

static bool released(const struct vpd_entry *e)
{
	return !e->claimed;
}

static bool adopted(const struct vpd_entry *e)
{
	return e->client != 0;
}

/*
 * Run the loop until done(e) holds; the test fails if it does not within
 * 5 s (a deadline for a loaded machine: it takes a few ms).
 */
static void run_until(bool (*done)(const struct vpd_entry *e), const struct vpd_entry *e,
		      const char *what)
{
	gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;

	while (!done(e)) {
		if (g_get_monotonic_time() > deadline)
			g_error("VF %u not %s within 5 s", e->vf, what);
		g_main_context_iteration(NULL, FALSE);
		g_usleep(1000);
	}
}

/* A child that waits until its pipe closes; *fd is the pipe's write end. */
static pid_t waiting_child(int *fd)
{
	int p[2];
	pid_t pid;
	char c;

	g_assert_cmpint(pipe(p), ==, 0);
	pid = fork();
	if (!pid) {
		close(p[1]);
		while (read(p[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(p[0]);
	*fd = p[1];
	/* Its start time is readable once /proc has it. */
	while (!vpd_proc_start_time(pid))
		g_usleep(1000);
	return pid;
}

static void test_watch_checks_start_time(struct fixture *f, gconstpointer data)
{
	struct vpd_entry *e;
	guint64 start;
	pid_t child;
	int fd;

	(void)data;
	child = waiting_child(&fd);
	start = vpd_proc_start_time(child);

	/* The claimant started at another time: child merely has its pid. */
	e = orphan(f, 0, child, start + 1);
	g_test_expect_message(NULL, G_LOG_LEVEL_WARNING,
			      "pid * is another process now (started at *, the claimant at *): "
			      "1 VF(s) it held released");
	vpd_server_watch_orphans(f->server);
	g_test_assert_expected_messages();
	g_assert_false(e->claimed);

	/* Its own claim is watched, and released when it exits. */
	e = orphan(f, 1, child, start);
	vpd_server_watch_orphans(f->server);
	g_assert_true(e->claimed);
	close(fd);
	g_assert_cmpint(waitpid(child, NULL, 0), ==, child);
	run_until(released, e, "released at its claimant's exit");
}

static int connect_to(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	g_assert_cmpint(fd, >=, 0);
	strcpy(addr.sun_path, path);
	g_assert_cmpint(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), ==, 0);
	return fd;
}

static void test_adoption_needs_start_time(struct fixture *f, gconstpointer data)
{
	guint64 start = vpd_proc_start_time(getpid());
	struct vpd_entry *other = orphan(f, 0, getpid(), start - 1);
	struct vpd_entry *mine = orphan(f, 1, getpid(), start);
	int fd;

	(void)data;
	/* No watch: as if this process had got the pid since the state was loaded. */
	fd = connect_to(f->sock);
	/* The connection accepted, it adopts its own claim, not the other. */
	run_until(adopted, mine, "adopted by its connection");
	g_assert_cmpuint(other->client, ==, 0);
	g_assert_true(other->claimed);
	/* What it adopted goes with its connection; the other claim stays. */
	close(fd);
	run_until(released, mine, "released with its connection");
	g_assert_true(other->claimed);
	g_assert_cmpuint(other->client, ==, 0);
}

/* Fake vhost-vdpa devices for the pool's VFs: plain files anyone may open. */
static void fake_devices(struct fixture *f)
{
	for (unsigned i = 0; i < f->pools->entries->len; i++) {
		struct vpd_entry *e = f->pools->entries->pdata[i];

		e->vhost_path = g_strdup_printf("%s/dev-%u", f->dir, i);
		g_assert_true(g_file_set_contents(e->vhost_path, "", 0, NULL));
	}
}

/* Send msg on fd and wait for the answer (another process serves it). */
static struct vpd_msg *ask_blocking(int fd, GBytes *msg)
{
	g_autoptr(GByteArray) in = g_byte_array_new();
	gsize len;
	const uint8_t *data = g_bytes_get_data(msg, &len);
	gssize total = -1;

	if (send(fd, data, len, MSG_NOSIGNAL) != (ssize_t)len)
		_exit(3);
	while (total < 0 || in->len < (gsize)total) {
		uint8_t buf[4096];
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n <= 0)
			_exit(4);
		g_byte_array_append(in, buf, n);
		if (total < 0 && in->len >= VPD_HEADER_SIZE)
			total = vpd_msg_total_len(in->data, in->len, NULL);
	}
	{
		g_autoptr(GBytes) b = g_bytes_new(in->data, in->len);

		return vpd_msg_parse(b, NULL) ?: (_exit(5), NULL);
	}
}

/* Send msg on fd, run the loop until the answer came; returns it parsed. */
static struct vpd_msg *ask(int fd, GBytes *msg)
{
	g_autoptr(GByteArray) in = g_byte_array_new();
	g_autoptr(GError) err = NULL;
	gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
	gsize len;
	const uint8_t *data = g_bytes_get_data(msg, &len);
	gssize total = -1;

	g_assert_cmpint(send(fd, data, len, MSG_NOSIGNAL), ==, (ssize_t)len);
	while (total < 0 || in->len < (gsize)total) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint8_t buf[4096];
		ssize_t n;

		g_assert_cmpint(g_get_monotonic_time(), <, deadline);
		g_main_context_iteration(NULL, FALSE);
		if (poll(&p, 1, 1) <= 0)
			continue;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		g_assert_cmpint(n, >, 0);
		g_byte_array_append(in, buf, n);
		if (total < 0 && in->len >= VPD_HEADER_SIZE)
			total = vpd_msg_total_len(in->data, in->len, NULL);
	}
	{
		g_autoptr(GBytes) b = g_bytes_new(in->data, in->len);
		struct vpd_msg *m = vpd_msg_parse(b, &err);

		g_assert_no_error(err);
		return m;
	}
}

static GBytes *claim_msg(const char *pool, uint32_t n)
{
	struct vpd_builder b;

	vpd_builder_init(&b, VPD_MSG_CLAIM, 1);
	vpd_put_str(&b, VPD_A_POOL, pool);
	vpd_put_str(&b, VPD_A_OWNER, "p0@vm \"1\"");
	vpd_put_u32(&b, VPD_A_COUNT, n);
	return vpd_builder_finish(&b);
}

static GBytes *plain_msg(uint16_t type, int handle)
{
	struct vpd_builder b;

	vpd_builder_init(&b, type, 2);
	if (handle >= 0)
		vpd_put_u32(&b, VPD_A_HANDLE, handle);
	return vpd_builder_finish(&b);
}

/* The handle of the first VF of a CLAIM's answer (closing its fds). */
static uint32_t claimed(struct vpd_msg *m)
{
	g_autoptr(GArray) vf = NULL;
	uint32_t h = 0;

	g_assert_cmpuint(m->type, ==, VPD_MSG_REPLY);
	vf = vpd_attr_nested(vpd_msg_get(m, VPD_A_VF));
	g_assert_true(vpd_attr_u32(&g_array_index(vf, struct vpd_attr_view, 0), &h));
	return h;
}

static void test_metrics(struct fixture *f, gconstpointer data)
{
	g_autoptr(GString) text = g_string_new(NULL);
	g_autoptr(GError) err = NULL;
	g_autoptr(GBytes) req = NULL;
	struct vpd_msg *m;
	uint32_t h;
	int a, b;

	(void)data;
	fake_devices(f);
	a = connect_to(f->sock);
	b = connect_to(f->sock);
	/* granted, released; refused (too many); unknown pool (not counted);
	 * granted, then its connection goes */
	m = ask(a, (req = claim_msg("a", 1)));
	h = claimed(m);
	vpd_msg_free(m);
	g_clear_pointer(&req, g_bytes_unref);
	m = ask(a, (req = plain_msg(VPD_MSG_RELEASE, h)));
	g_assert_cmpuint(m->type, ==, VPD_MSG_REPLY);
	vpd_msg_free(m);
	g_clear_pointer(&req, g_bytes_unref);
	m = ask(a, (req = claim_msg("a", 9)));
	g_assert_cmpuint(m->type, ==, VPD_MSG_ERROR);
	vpd_msg_free(m);
	g_clear_pointer(&req, g_bytes_unref);
	m = ask(a, (req = claim_msg("no such pool", 1)));
	g_assert_cmpuint(m->type, ==, VPD_MSG_ERROR);
	vpd_msg_free(m);
	g_clear_pointer(&req, g_bytes_unref);
	m = ask(b, (req = claim_msg("a", 2)));
	vpd_msg_free(m);
	g_clear_pointer(&req, g_bytes_unref);
	close(b);
	run_until(released, f->pools->entries->pdata[0], "released with its connection");
	run_until(released, f->pools->entries->pdata[1], "released with its connection");

	m = ask(a, (req = plain_msg(VPD_MSG_METRICS, -1)));
	g_assert_true(vpd_metrics_format(m, text, &err));
	g_assert_no_error(err);
	vpd_msg_free(m);
	close(a);
	g_assert_nonnull(strstr(text->str, "vdpa_pool_claims_total{pool=\"a\",result=\"granted\"} 2\n"
				"vdpa_pool_claims_total{pool=\"a\",result=\"refused\"} 1\n"));
	g_assert_nonnull(strstr(text->str, "vdpa_pool_releases_total{pool=\"a\",by=\"request\"} 1\n"
				"vdpa_pool_releases_total{pool=\"a\",by=\"client_gone\"} 2\n"));
	g_assert_nonnull(strstr(text->str, "vdpa_pool_claim_duration_seconds_bucket{pool=\"a\","
				"le=\"+Inf\"} 2\n"));
	g_assert_nonnull(strstr(text->str, "vdpa_pool_claim_duration_seconds_count{pool=\"a\"} 2\n"));
	g_assert_nonnull(strstr(text->str, "vdpa_pool_release_duration_seconds_count{pool=\"a\"} 1\n"));
	g_assert_nonnull(strstr(text->str, "vdpa_pool_vfs{pool=\"a\",state=\"free\"} 4\n"));
	g_assert_null(strstr(text->str, "no such pool"));
	if (getuid() == 0)
		g_assert_nonnull(strstr(text->str, "vdpa_pool_connections{uid=\"0\"} 1\n"));
}

/* A peer that is not root is refused METRICS, and nothing else happens. */
static void test_metrics_root_only(struct fixture *f, gconstpointer data)
{
	g_autoptr(GBytes) req = plain_msg(VPD_MSG_METRICS, -1);
	int status;
	pid_t child;

	(void)data;
	if (getuid() != 0) {
		g_test_skip("needs root: a peer of another uid");
		return;
	}
	g_assert_cmpint(chmod(f->dir, 0711), ==, 0);
	g_assert_cmpint(chmod(f->sock, 0666), ==, 0);
	child = fork();
	if (!child) {
		struct vpd_msg *m;
		int fd;

		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			_exit(2);
		fd = connect_to(f->sock);
		m = ask_blocking(fd, req);
		_exit(m->type == VPD_MSG_ERROR &&
		      !g_strcmp0(vpd_attr_str(vpd_msg_get(m, VPD_A_MESSAGE)),
				 "METRICS is for root only") ? 0 : 1);
	}
	for (;;) {
		pid_t r = waitpid(child, &status, WNOHANG);

		g_assert_cmpint(r, >=, 0);
		if (r == child)
			break;
		g_main_context_iteration(NULL, FALSE);
		g_usleep(1000);
	}
	g_assert_true(WIFEXITED(status));
	g_assert_cmpint(WEXITSTATUS(status), ==, 0);
}

/* OVS's counters, as the daemon's OVS worker would give them, or none. */
struct fake_ports {
	unsigned asked;
	unsigned entries;               /* how many the last question named */
	bool fail;
};

static void fake_port_stats(GPtrArray *entries, void *opaque, vpd_port_stats_done_fn done,
			    void *done_opaque)
{
	struct fake_ports *fp = opaque;
	g_autoptr(GArray) out = g_array_new(FALSE, TRUE, sizeof(struct vpd_port_stats));
	g_autoptr(GError) err = NULL;
	struct vpd_port_stats st = { 0 };

	fp->asked++;
	fp->entries = entries->len;
	if (fp->fail) {
		err = g_error_new_literal(G_IO_ERROR, G_IO_ERROR_FAILED, "ovsdb-server is gone");
		done(NULL, err, done_opaque);
		return;
	}
	/* entry i sent 7 + i packets and received 9 + i */
	for (unsigned i = 0; i < entries->len; i++) {
		st.have = 1u << VPD_PS_RX_PACKETS | 1u << VPD_PS_TX_PACKETS;
		st.v[VPD_PS_RX_PACKETS] = 7 + i;
		st.v[VPD_PS_TX_PACKETS] = 9 + i;
		g_array_append_val(out, st);
	}
	done(out, NULL, done_opaque);
}

static void assert_error(struct vpd_msg *m, uint32_t err, const char *msg)
{
	uint32_t e = 0;

	g_assert_cmpuint(m->type, ==, VPD_MSG_ERROR);
	g_assert_true(vpd_attr_u32(vpd_msg_get(m, VPD_A_ERRNO), &e));
	g_assert_cmpuint(e, ==, err);
	g_assert_cmpstr(vpd_attr_str(vpd_msg_get(m, VPD_A_MESSAGE)), ==, msg);
	vpd_msg_free(m);
}

/* VF_STATS' PORT_STATS value i (1: the first counter), or fail. */
static uint64_t port_stat(struct vpd_msg *m, unsigned i)
{
	uint64_t v = 0;

	g_assert_cmpuint(m->type, ==, VPD_MSG_REPLY);
	g_assert_cmpuint(vpd_attr_u64_count(vpd_msg_get(m, VPD_A_PORT_STATS)), ==, 1 + VPD_PS_N);
	g_assert_true(vpd_attr_u64_at(vpd_msg_get(m, VPD_A_PORT_STATS), i, &v));
	return v;
}

/*
 * VF_STATS: the counters of the VF's own port, for the connection that
 * claimed it only; every entry's read at once and kept a second, so a
 * guest reading its VFs in turn costs OVS one select; none, and why,
 * when OVS cannot say.
 */
static void test_vf_stats(struct fixture *f, gconstpointer data)
{
	struct fake_ports fp = { 0 };
	g_autoptr(GBytes) req = NULL;
	struct vpd_entry *e;
	struct vpd_msg *m;
	uint32_t h, h2;
	int a, b;

	(void)data;
	fake_devices(f);
	for (unsigned i = 0; i < f->pools->entries->len; i++) {
		e = f->pools->entries->pdata[i];
		e->rep = g_strdup_printf("vduse%u", i);
	}
	vpd_server_set_port_stats(f->server, fake_port_stats, &fp);
	a = connect_to(f->sock);
	b = connect_to(f->sock);
	m = ask(a, (req = claim_msg("a", 1)));
	h = claimed(m);
	vpd_msg_free(m);
	g_clear_pointer(&req, g_bytes_unref);

	/* OVS cannot say: no counters, and why (and nothing kept) */
	fp.fail = true;
	m = ask(a, (req = plain_msg(VPD_MSG_VF_STATS, h)));
	g_assert_cmpuint(m->type, ==, VPD_MSG_REPLY);
	g_assert_null(vpd_msg_get(m, VPD_A_PORT_STATS));
	g_assert_cmpstr(vpd_attr_str(vpd_msg_get(m, VPD_A_MESSAGE)), ==, "ovsdb-server is gone");
	vpd_msg_free(m);
	g_assert_cmpuint(fp.asked, ==, 1);
	g_clear_pointer(&req, g_bytes_unref);

	/* its port's counters: have, then the values; every entry's read */
	fp.fail = false;
	m = ask(a, (req = plain_msg(VPD_MSG_VF_STATS, h)));
	g_assert_cmpuint(port_stat(m, 1 + VPD_PS_RX_PACKETS), ==, 7 + h);
	g_assert_cmpuint(port_stat(m, 1 + VPD_PS_TX_PACKETS), ==, 9 + h);
	vpd_msg_free(m);
	g_assert_cmpuint(fp.asked, ==, 2);
	g_assert_cmpuint(fp.entries, ==, f->pools->entries->len);
	g_clear_pointer(&req, g_bytes_unref);

	/* another VF of the connection, right after: from what was read */
	m = ask(a, (req = claim_msg("a", 1)));
	h2 = claimed(m);
	vpd_msg_free(m);
	g_clear_pointer(&req, g_bytes_unref);
	m = ask(a, (req = plain_msg(VPD_MSG_VF_STATS, h2)));
	g_assert_cmpuint(port_stat(m, 1 + VPD_PS_RX_PACKETS), ==, 7 + h2);
	vpd_msg_free(m);
	g_assert_cmpuint(fp.asked, ==, 2);
	g_clear_pointer(&req, g_bytes_unref);
	req = plain_msg(VPD_MSG_VF_STATS, h);

	/* another connection's VF, no VF, no handle: refused, OVS not asked */
	m = ask(b, req);
	e = f->pools->entries->pdata[h];
	{
		g_autofree char *msg = g_strdup_printf("VF %u of pool 'a' is not claimed by "
						       "this client", e->vf);

		assert_error(m, EPERM, msg);
	}
	g_clear_pointer(&req, g_bytes_unref);
	assert_error(ask(a, (req = plain_msg(VPD_MSG_VF_STATS, 99))), ENOENT,
		     "no VF has handle 99");
	g_clear_pointer(&req, g_bytes_unref);
	assert_error(ask(a, (req = plain_msg(VPD_MSG_VF_STATS, -1))), EINVAL,
		     "VF_STATS needs the HANDLE of a VF");
	g_clear_pointer(&req, g_bytes_unref);
	g_assert_cmpuint(fp.asked, ==, 2);

	close(a);
	close(b);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add("/server/watch-checks-start-time", struct fixture, NULL, setup,
		   test_watch_checks_start_time, teardown);
	g_test_add("/server/adoption-needs-start-time", struct fixture, NULL, setup,
		   test_adoption_needs_start_time, teardown);
	g_test_add("/server/metrics", struct fixture, NULL, setup, test_metrics, teardown);
	g_test_add("/server/vf-stats", struct fixture, NULL, setup, test_vf_stats, teardown);
	g_test_add("/server/metrics-root-only", struct fixture, NULL, setup,
		   test_metrics_root_only, teardown);
	return g_test_run();
}
