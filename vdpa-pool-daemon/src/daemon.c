// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vdpa-pool-daemon: owns the host's SR-IOV VFs and their vDPA devices, and
 * hands vhost-vdpa backends to QEMU (docs/daemon-admin.md).
 *
 *   vdpa-pool-daemon [-c FILE] [--socket PATH] [--state PATH]
 *                    [--fake-vhost-dir DIR]
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
 * holds the device open.
 */
#include "config.h"
#include "ovs.h"
#include "pool.h"
#include "provision.h"
#include "server.h"
#include "state.h"

#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

static gboolean quit(gpointer loop)
{
	g_message("stopping; claims stay in the state file");
	g_main_loop_quit(loop);
	return G_SOURCE_CONTINUE;
}

static bool apply_ovs(struct vpd_entry *e, void *ovs, GError **error)
{
	return vpd_ovs_apply(ovs, e, error);
}

static GPtrArray *flows_ovs(const struct vpd_entry *e, void *ovs, GError **error)
{
	return vpd_ovs_vf_flows(ovs, e, error);
}

struct ovs_tick {
	struct vpd_ovs *ovs;
	struct vpd_pools *pools;
};

static gboolean tick_ovs(gpointer data)
{
	struct ovs_tick *t = data;

	vpd_ovs_tick(t->ovs, t->pools);
	return G_SOURCE_CONTINUE;
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
 * until a start finds it free.  Returns how many.
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
			  "know: quarantined (not offered; a restart checks it again)", e->vf,
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
	GOptionEntry options[] = {
		{ "config", 'c', 0, G_OPTION_ARG_FILENAME, &config_path,
		  "configuration file (default /etc/vdpa-pool-daemon.conf)", "FILE" },
		{ "socket", 0, 0, G_OPTION_ARG_FILENAME, &socket_path,
		  "API socket, instead of the configuration's", "PATH" },
		{ "state", 0, 0, G_OPTION_ARG_FILENAME, &state_path,
		  "state file, instead of the configuration's", "PATH" },
		{ "fake-vhost-dir", 0, 0, G_OPTION_ARG_FILENAME, &fake_dir,
		  "tests: no provisioning; backends are DIR/POOL-VF", "DIR" },
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
	const char *failed = "";
	struct ovs_tick tick;
	GMainLoop *loop;
	unsigned quarantined;
	int rc = 1;

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
		ovs = vpd_ovs_new(cfg, &err);
		if (!ovs || !vpd_ovs_sync(ovs, pools, &err))
			goto out;
		/* VDUSE devices exist once OVS-DPDK holds their ports. */
		failed = "provisioning failed: ";
		if (!vpd_provision_vduse(prov, pools, &err))
			goto out;
	}
	failed = "";
	quarantined = quarantine_held(pools, fake_dir != NULL);
	server = vpd_server_new(pools, socket_path, state, &err);
	if (!server)
		goto out;
	if (ovs) {
		vpd_server_set_apply(server, apply_ovs, ovs);
		vpd_server_set_flows(server, flows_ovs, ovs);
		tick.ovs = ovs;
		tick.pools = pools;
		g_timeout_add_seconds(1, tick_ovs, &tick);
	}

	loop = g_main_loop_new(NULL, FALSE);
	g_unix_signal_add(SIGTERM, quit, loop);
	g_unix_signal_add(SIGINT, quit, loop);
	vpd_server_watch_orphans(server);
	g_message("ready: %u pooled VF(s), %u claim(s) restored, %u released, %u VF(s) "
		  "quarantined, socket %s", pools->entries->len, report.restored, report.released,
		  quarantined, socket_path);
	/* For supervisors and tests: one line on stdout once the socket is up. */
	printf("READY\n");
	fflush(stdout);
	g_main_loop_run(loop);
	g_main_loop_unref(loop);
	rc = 0;
out:
	if (err)
		fprintf(stderr, "vdpa-pool-daemon: %s%s\n", failed, err->message);
	vpd_server_free(server);
	vpd_state_close(state);
	vpd_ovs_free(ovs);
	vpd_provision_free(prov);
	vpd_state_report_clear(&report);
	return rc;
}
