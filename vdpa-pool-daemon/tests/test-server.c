// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of the server's claims restored from the state file: a
 * process reconnecting gets them back only with the claimant's pid, uid
 * and start time; the pidfd watch keeps a claim only for the process that
 * made it (not for another one that got its pid) and releases it when that
 * process exits.  (The API itself is tested against the real daemon in
 * tests/unit/test_daemon.py; a recycled pid cannot be provoked there, and
 * the state file's load releases such claims before the watch sees them.)
 */
#include "proc.h"
#include "server.h"

#include <string.h>
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

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add("/server/watch-checks-start-time", struct fixture, NULL, setup,
		   test_watch_checks_start_time, teardown);
	g_test_add("/server/adoption-needs-start-time", struct fixture, NULL, setup,
		   test_adoption_needs_start_time, teardown);
	return g_test_run();
}
