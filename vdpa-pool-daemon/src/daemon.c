// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vdpa-pool-daemon: owns the host's SR-IOV VFs and their vDPA devices, and
 * hands vhost-vdpa backends to QEMU (docs/daemon-admin.md).
 *
 *   vdpa-pool-daemon [-c FILE] [--socket PATH] [--state PATH]
 *                    [--fake-vhost-dir DIR [--fake-datapath MS[,N]]]
 *
 * At start: load and check the configuration, take the instance locks
 * (STATE.lock and SOCKET.lock: one daemon per state file and socket),
 * restore the claims of the state file, provision (VFs, switchdev, one
 * vDPA device per pooled VF bound to vhost_vdpa; idempotent, and the
 * number of VFs of a PF is not changed while VFs are in use), make OVS
 * hold each VF's port and flows as the claims say (when ovs-bridge is
 * configured; VDUSE PFs get their vDPA devices only then, once OVS-DPDK
 * has made them), quarantine each unclaimed VF whose device someone holds
 * open, then serve the API socket until SIGTERM or SIGINT.  Stopping does
 * not release claims: VFs in use keep their data plane, and a restarted
 * daemon gives each claim back to its process.
 *
 * --fake-vhost-dir DIR skips provisioning and serves DIR/POOL-VF files as
 * the pooled VFs' backends: for tests of the API without a kernel.  A
 * process holding an exclusive flock on such a file stands for one that
 * holds the device open.  --fake-datapath adds a datapath that answers
 * each change after MS (a slow OVS) and refuses to open VF N.
 */
#include "config.h"
#include "ovs.h"
#include "ovsworker.h"
#include "pool.h"
#include "proc.h"
#include "provision.h"
#include "server.h"
#include "state.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib-unix.h>
#include <grp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static gboolean quit(gpointer loop)
{
	g_message("stopping; claims stay in the state file");
	g_main_loop_quit(loop);
	return G_SOURCE_CONTINUE;
}

/* The server's datapath: OVS, through the worker thread (ovsworker.h). */
static void apply_ovs(const struct vpd_entry *e, void *worker, vpd_applied_fn done,
		      void *opaque)
{
	vpd_ovs_worker_apply(worker, e, done, opaque);
}

static void flows_ovs(GPtrArray *entries, void *worker, vpd_flows_done_fn done, void *opaque)
{
	vpd_ovs_worker_flows(worker, entries, done, opaque);
}

static void port_stats_ovs(GPtrArray *entries, void *worker, vpd_port_stats_done_fn done,
			   void *opaque)
{
	vpd_ovs_worker_port_stats(worker, entries, done, opaque);
}

static void rules_ovs(const struct vpd_rule_change *c, void *worker, vpd_applied_fn done,
		      void *opaque)
{
	vpd_ovs_worker_rules(worker, c, done, opaque);
}

static void rule_stats_ovs(uint8_t table, uint32_t id, void *worker, vpd_rule_counted_fn done,
			   void *opaque)
{
	vpd_ovs_worker_rule_stats(worker, table, id, done, opaque);
}

/*
 * --fake-datapath, for the API's tests: what a slow OVS does to the server
 * (each change answered after delay_ms, in order), and one that refuses
 * to open a VF (a claim of VF fail_vf of any pool).
 */
struct fake_datapath {
	unsigned delay_ms;
	int fail_vf;
	unsigned pending;
};

struct fake_answer {
	struct fake_datapath *f;
	vpd_applied_fn done;
	vpd_flows_done_fn flows_done;
	GPtrArray *flows;
	GError *error;
	void *opaque;
};

static gboolean fake_answer(gpointer data)
{
	struct fake_answer *a = data;

	if (a->done)
		a->done(a->error, a->opaque);
	else
		a->flows_done(a->flows, NULL, a->opaque);
	a->f->pending--;
	g_clear_error(&a->error);
	if (a->flows)
		g_ptr_array_unref(a->flows);
	g_free(a);
	return G_SOURCE_REMOVE;
}

static void apply_fake(const struct vpd_entry *e, void *fake, vpd_applied_fn done,
		       void *opaque)
{
	struct fake_answer *a = g_new0(struct fake_answer, 1);

	a->f = fake;
	a->done = done;
	a->opaque = opaque;
	if (e->claimed && (int)e->vf == a->f->fail_vf)
		g_set_error(&a->error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
			    "fake datapath: VF %u does not open", e->vf);
	a->f->pending++;
	g_timeout_add(a->f->delay_ms, fake_answer, a);
}

static void flows_fake(GPtrArray *entries, void *fake, vpd_flows_done_fn done, void *opaque)
{
	struct fake_answer *a = g_new0(struct fake_answer, 1);

	a->f = fake;
	a->flows_done = done;
	a->opaque = opaque;
	a->flows = g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
	for (unsigned i = 0; i < entries->len; i++) {
		GPtrArray *lines = g_ptr_array_new_with_free_func(g_free);

		g_ptr_array_add(lines, g_strdup_printf("fake flow of VF %u",
						       ((struct vpd_entry *)entries->pdata[i])->vf));
		g_ptr_array_add(a->flows, lines);
	}
	a->f->pending++;
	g_timeout_add(a->f->delay_ms, fake_answer, a);
}

/*
 * --fake-vhost-dir: a representor port's "tap" is one end of a socket
 * pair (the API's tests check the requests' rules, not a device).
 */
static int rep_open_fake(const char *name, int *ifindex, GError **error)
{
	int sv[2];

	(void)name;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "fake tap: %s",
			    g_strerror(errno));
		return -1;
	}
	close(sv[1]);
	*ifindex = 0;
	return sv[0];
}

static bool rep_close_fake(const char *name, int ifindex, GError **error)
{
	(void)name;
	(void)ifindex;
	(void)error;
	return true;
}

/*
 * As many fds as the hard limit allows, and no more clients than they
 * serve: each client is one fd, and claims (up to 253 vhost-vdpa fds at
 * once), OVS and the pidfds of restored claims need some besides.
 */
static void fit_fd_limit(struct vpd_server_limits *l)
{
	const unsigned reserve = 512;
	struct rlimit r;

	if (getrlimit(RLIMIT_NOFILE, &r) < 0)
		return;
	if (r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &r) < 0)
			getrlimit(RLIMIT_NOFILE, &r);
	}
	if (r.rlim_cur != RLIM_INFINITY && l->max_clients + reserve > r.rlim_cur) {
		unsigned fit = r.rlim_cur > reserve + 16 ? r.rlim_cur - reserve : 16;

		g_warning("max-clients = %u does not fit the limit of %llu open files "
			  "(%u kept for claims and OVS): serving at most %u clients",
			  l->max_clients, (unsigned long long)r.rlim_cur, reserve, fit);
		l->max_clients = fit;
	}
}

/*
 * systemd's notification protocol (sd_notify(3)), without libsystemd: one
 * datagram to $NOTIFY_SOCKET ("@" for the abstract namespace).  Nothing
 * when not run by systemd (or Type=notify not set).
 */
static void notify(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static void notify(const char *fmt, ...)
{
	const char *path = g_getenv("NOTIFY_SOCKET");
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	g_autofree char *msg = NULL;
	socklen_t len;
	va_list ap;
	int fd;

	if (!path || (path[0] != '/' && path[0] != '@') ||
	    strlen(path) >= sizeof(addr.sun_path))
		return;
	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	memcpy(addr.sun_path, path, strlen(path));
	if (path[0] == '@')
		addr.sun_path[0] = '\0';
	len = offsetof(struct sockaddr_un, sun_path) + strlen(path);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&addr, len) < 0)
		g_debug("NOTIFY_SOCKET %s: %s", path, g_strerror(errno));
	close(fd);
}

/*
 * The API socket systemd passed (socket activation, sd_listen_fds(3)): fd
 * 3 when $LISTEN_PID is this process and $LISTEN_FDS is 1; -1 when none
 * was passed; -2 (after a message) when what was passed is not usable.
 */
static int listen_fd_passed(void)
{
	const char *pid = g_getenv("LISTEN_PID");
	const char *fds = g_getenv("LISTEN_FDS");

	if (!pid || !fds)
		return -1;
	if (g_ascii_strtoll(pid, NULL, 10) != getpid())
		return -1;
	g_unsetenv("LISTEN_PID");
	g_unsetenv("LISTEN_FDS");
	g_unsetenv("LISTEN_FDNAMES");
	if (strcmp(fds, "1")) {
		fprintf(stderr, "vdpa-pool-daemon: systemd passed %s sockets; the daemon "
			"serves exactly one (ListenStream= in vdpa-pool-daemon.socket)\n", fds);
		return -2;
	}
	return 3;
}

/* The gid of the configuration's socket-group (a name or a number). */
static bool socket_gid(const struct vpd_config *cfg, gid_t *gid, GError **error)
{
	const struct group *gr;
	guint64 v;

	*gid = 0;
	if (!cfg->socket_group)
		return true;
	if (g_ascii_string_to_unsigned(cfg->socket_group, 10, 0, UINT32_MAX - 1, &v, NULL)) {
		*gid = v;
		return true;
	}
	gr = getgrnam(cfg->socket_group);
	if (!gr) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
			    "socket-group '%s': no such group", cfg->socket_group);
		return false;
	}
	*gid = gr->gr_gid;
	return true;
}

/*
 * Connect to OVS and make the bridge hold the pools' ports and flows.  OVS
 * not running yet (or not answering) is waited for, every 2 s, saying so
 * in the log (every 30 s) and in systemd's status; any other error is
 * returned.  A SIGTERM meanwhile stops the daemon (nothing to undo yet).
 */
static struct vpd_ovs *start_ovs(const struct vpd_config *cfg, struct vpd_pools *pools,
				 GError **error)
{
	gint64 next_log = 0;

	for (unsigned tries = 0;; tries++) {
		g_autoptr(GError) err = NULL;
		struct vpd_ovs *ovs = vpd_ovs_new(cfg, &err);
		gint64 now;

		if (ovs && vpd_ovs_sync(ovs, pools, &err)) {
			if (tries)
				g_message("OVS is up: bridge %s synced after %u tries",
					  cfg->ovs_bridge, tries + 1);
			return ovs;
		}
		vpd_ovs_free(ovs);
		if (!vpd_ovs_error_is_transient(err)) {
			g_propagate_error(error, g_steal_pointer(&err));
			return NULL;
		}
		now = g_get_monotonic_time();
		if (now >= next_log) {
			g_warning("waiting for OVS (%s): %s; trying again every 2 s",
				  cfg->ovsdb, err->message);
			next_log = now + 30 * G_USEC_PER_SEC;
		}
		notify("STATUS=waiting for OVS: %s", err->message);
		g_usleep(2 * G_USEC_PER_SEC);
	}
}

static void fake_backends(struct vpd_pools *pools, const char *dir)
{
	for (unsigned i = 0; i < pools->entries->len; i++) {
		struct vpd_entry *e = pools->entries->pdata[i];

		e->vhost_path = g_strdup_printf("%s/%s-%u", dir, e->pool->name, e->vf);
	}
}

/*
 * One daemon per state file and per socket: an exclusive flock on
 * PATH.lock (created in dir_mode folders), which the kernel drops when
 * the daemon exits, however it exits.  The file holds the holder's pid,
 * for a second daemon's message; root's only (0600), so that no user can
 * hold the lock and keep the daemon from starting.  The fd, or -1 with
 * error.
 */
static int take_lock(const char *path, int dir_mode, GError **error)
{
	g_autofree char *lock = g_strdup_printf("%s.lock", path);
	g_autofree char *dir = g_path_get_dirname(lock);
	char holder[16] = "";
	ssize_t n;
	int fd;

	if (g_mkdir_with_parents(dir, dir_mode) < 0) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "cannot create %s: %s", dir, g_strerror(errno));
		return -1;
	}
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "cannot open lock file %s: %s", lock, g_strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int err = errno;

		n = pread(fd, holder, sizeof(holder) - 1, 0);
		holder[MAX(n, 0)] = 0;
		g_strchomp(holder);
		if (err == EWOULDBLOCK)
			g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
				    "another vdpa-pool-daemon (pid %s) holds the lock %s: this one "
				    "stops, leaving its socket and state file alone",
				    *holder ? holder : "unknown", lock);
		else
			g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(err),
				    "cannot lock %s: %s", lock, g_strerror(err));
		close(fd);
		return -1;
	}
	g_snprintf(holder, sizeof(holder), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, holder, strlen(holder), 0) < 0)
		g_warning("cannot write the pid to %s: %s", lock, g_strerror(errno));
	return fd;
}

/*
 * Whether the device at path is held open by someone: vhost-vdpa lets one
 * process open a device and answers others EBUSY.  Opening a free one
 * resets it, which a free VF does not mind.  fake: the plain files of
 * --fake-vhost-dir, which anyone may open; an exclusive flock on one
 * stands for holding it.
 */
static bool device_held(const char *path, bool fake)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	bool held;

	if (fd < 0)
		return errno == EBUSY;
	held = fake && flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return held;
}

/*
 * Every VF that no claim holds is checked before it is offered: its device
 * held open means a process the daemon does not know of uses it (the
 * state file was lost or damaged, or did not name that process), and
 * handing it out would give one VF to two VMs.  Such a VF is quarantined
 * until the server finds it free (it tries every 2 s).  Returns how many.
 */
static unsigned quarantine_held(struct vpd_pools *pools, bool fake)
{
	unsigned n = 0;

	for (unsigned i = 0; i < pools->entries->len; i++) {
		struct vpd_entry *e = pools->entries->pdata[i];

		if (e->claimed || e->quarantined || !e->vhost_path ||
		    !device_held(e->vhost_path, fake))
			continue;
		e->quarantined = true;
		g_warning("VF %u of pool '%s': %s is held open by a process the daemon does not "
			  "know: quarantined (not offered; tried again every 2 s)", e->vf,
			  e->pool->name, e->vhost_path);
		n++;
	}
	return n;
}

int main(int argc, char **argv)
{
	g_autofree char *config_path = NULL;
	g_autofree char *socket_path = NULL;
	g_autofree char *state_path = NULL;
	g_autofree char *fake_dir = NULL;
	g_autofree char *fake_dp = NULL;
	struct fake_datapath fake = { .fail_vf = -1 };
	GOptionEntry options[] = {
		{ "config", 'c', 0, G_OPTION_ARG_FILENAME, &config_path,
		  "configuration file (default /etc/vdpa-pool-daemon.conf)", "FILE" },
		{ "socket", 0, 0, G_OPTION_ARG_FILENAME, &socket_path,
		  "API socket, instead of the configuration's", "PATH" },
		{ "state", 0, 0, G_OPTION_ARG_FILENAME, &state_path,
		  "state file, instead of the configuration's", "PATH" },
		{ "fake-vhost-dir", 0, 0, G_OPTION_ARG_FILENAME, &fake_dir,
		  "tests: no provisioning; backends are DIR/POOL-VF", "DIR" },
		{ "fake-datapath", 0, 0, G_OPTION_ARG_STRING, &fake_dp,
		  "tests, with --fake-vhost-dir: a datapath that answers each change "
		  "after MS, and refuses to open VF N of any pool", "MS[,N]" },
		{ NULL }
	};
	g_autoptr(GOptionContext) ctx = g_option_context_new("- vDPA VF pool daemon");
	g_autoptr(GError) err = NULL;
	g_autoptr(vpd_config) cfg = NULL;
	g_autoptr(vpd_pools) pools = NULL;
	g_autofree char *boot_id = NULL;
	struct vpd_state_report report = {};
	struct vpd_provision *prov = NULL;
	struct vpd_state *state = NULL;
	struct vpd_server *server = NULL;
	struct vpd_ovs *ovs = NULL;
	struct vpd_server_limits limits;
	const char *failed = "";
	struct vpd_ovs_worker *worker = NULL;
	GMainLoop *loop;
	unsigned quarantined;
	bool socket_given;
	int passed_fd;
	int rc = 1;
	gid_t gid;

	g_option_context_add_main_entries(ctx, options, NULL);
	if (!g_option_context_parse(ctx, &argc, &argv, &err) || argc > 1) {
		fprintf(stderr, "vdpa-pool-daemon: %s\n",
			err ? err->message : "unexpected argument");
		return 2;
	}
	cfg = vpd_config_load(config_path ? config_path : "/etc/vdpa-pool-daemon.conf", &err);
	if (!cfg) {
		fprintf(stderr, "vdpa-pool-daemon: %s\n", err->message);
		return 1;
	}
	socket_given = socket_path != NULL;
	if (!state_path)
		state_path = g_strdup(cfg->state_path);
	if (!socket_path)
		socket_path = g_strdup(cfg->socket_path);
	/* Before anything touches the state, the socket or the NIC; held until exit. */
	if (take_lock(state_path, 0700, &err) < 0 || take_lock(socket_path, 0755, &err) < 0)
		goto out;
	boot_id = vpd_proc_boot_id(&err);
	if (!boot_id)
		goto out;
	pools = vpd_pools_new(cfg);

	/* The claims first: provisioning must know which VFs are in use. */
	state = vpd_state_open(pools, state_path, boot_id, &report, &err);
	if (!state)
		goto out;
	if (fake_dir) {
		fake_backends(pools, fake_dir);
	} else {
		failed = "provisioning failed: ";
		prov = vpd_provision_new(cfg, &err);
		if (!prov || !vpd_provision_run(prov, pools, report.in_use, &err))
			goto out;
	}
	if (cfg->ovs_bridge && !fake_dir) {
		failed = "OVS: ";
		ovs = start_ovs(cfg, pools, &err);
		if (!ovs)
			goto out;
		/* VDUSE devices exist once OVS-DPDK holds their ports. */
		failed = "provisioning failed: ";
		if (!vpd_provision_vduse(prov, pools, &err))
			goto out;
	}
	failed = "";
	quarantined = quarantine_held(pools, fake_dir != NULL);
	passed_fd = socket_given ? -1 : listen_fd_passed();
	if (passed_fd >= 0) {
		server = vpd_server_adopt(pools, passed_fd, state, &err);
	} else if (passed_fd == -1 && socket_gid(cfg, &gid, &err)) {
		server = vpd_server_new(pools, socket_path, cfg->socket_mode, gid, state, &err);
	} else if (!err) {
		g_set_error(&err, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "no usable API socket");
	}
	if (!server)
		goto out;
	limits = (struct vpd_server_limits) {
		.max_clients = cfg->max_clients,
		.max_clients_per_uid = cfg->max_clients_per_uid,
		.idle_timeout = cfg->idle_timeout,
		.io_timeout = cfg->io_timeout,
	};
	fit_fd_limit(&limits);
	vpd_server_set_limits(server, &limits);
	if (fake_dp) {
		char *end;

		errno = 0;
		fake.delay_ms = strtoul(fake_dp, &end, 10);
		if (*end == ',' && end[1])
			fake.fail_vf = strtol(end + 1, &end, 10);
		if (!fake_dir || errno || end == fake_dp || *end || fake.delay_ms > 600000) {
			g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
				    "--fake-datapath %s: wants MS[,N] (MS at most 600000) and "
				    "--fake-vhost-dir", fake_dp);
			goto out;
		}
		vpd_server_set_apply(server, apply_fake, &fake);
		vpd_server_set_flows(server, flows_fake, &fake);
	}
	if (!fake_dir)
		vpd_server_set_vdpa_mac(server, vpd_vdpa_set_mac);
	if (fake_dir)
		vpd_server_set_reps(server, rep_open_fake, rep_close_fake);
	if (ovs) {
		/* From here on, OVS is the worker thread's. */
		worker = vpd_ovs_worker_new(g_steal_pointer(&ovs), pools);
		vpd_server_set_apply(server, apply_ovs, worker);
		vpd_server_set_flows(server, flows_ovs, worker);
		vpd_server_set_port_stats(server, port_stats_ovs, worker);
		vpd_server_set_rules(server, rules_ovs, rule_stats_ovs, worker);
		vpd_server_set_reps(server, vpd_tap_open, vpd_tap_remove);
	}

	loop = g_main_loop_new(NULL, FALSE);
	g_unix_signal_add(SIGTERM, quit, loop);
	g_unix_signal_add(SIGINT, quit, loop);
	vpd_server_watch_orphans(server);
	g_message("ready: %u pooled VF(s), %u claim(s) restored, %u released, %u VF(s) "
		  "quarantined, socket %s%s", pools->entries->len, report.restored,
		  report.released, quarantined, vpd_server_socket_path(server),
		  passed_fd >= 0 ? " (passed by systemd)" : "");
	notify("READY=1\nSTATUS=serving %u pooled VF(s), %u claim(s) restored",
	       pools->entries->len, report.restored);
	/* For supervisors and tests: one line on stdout once the socket is up. */
	printf("READY\n");
	fflush(stdout);
	g_main_loop_run(loop);
	notify("STOPPING=1");
	g_main_loop_unref(loop);
	rc = 0;
out:
	if (err)
		fprintf(stderr, "vdpa-pool-daemon: %s%s\n", failed, err->message);
	vpd_ovs_worker_free(worker);    /* its last answers still go to the server */
	while (fake.pending)
		g_main_context_iteration(NULL, TRUE);
	vpd_server_free(server);
	vpd_state_close(state);
	vpd_ovs_free(ovs);
	vpd_provision_free(prov);
	vpd_state_report_clear(&report);
	return rc;
}
