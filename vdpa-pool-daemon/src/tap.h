/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tap: the kernel tap devices behind VF representor ports (switchdev
 * pools, REP_OPEN; docs/daemon-protocol.md).  The daemon makes each tap,
 * hands its fd to the client (QEMU: the representor's host backend) and
 * closes its own: the tap is not persistent, so it lives as long as the
 * client's fd, and OVS switches it as a port of the bridge (ovs.h).
 */
#ifndef VPD_TAP_H
#define VPD_TAP_H

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

/*
 * The name of the representor port of the VF whose own port (or vDPA
 * device) is vf_port: "vr" + vf_port when that fits a netdev name (15
 * bytes), else "vr", its first 5 characters and 8 hex digits of the
 * FNV-1a hash of all of it.
 */
char *vpd_rep_port_name(const char *vf_port);

/*
 * A new tap (IFF_TAP | IFF_NO_PI, not persistent) named name, up: its fd
 * (close-on-exec) and *ifindex; -1 with error if it cannot be made (a
 * netdev of that name exists: G_IO_ERROR_EXISTS).  Made under a name the
 * kernel picks, then renamed: an existing device of that name is never
 * taken over.
 */
int vpd_tap_open(const char *name, int *ifindex, GError **error);

/*
 * Remove the tap of ifindex if it still has name (its client may hold
 * its fd still; then the client's fd goes dead).  Gone already: true.
 */
bool vpd_tap_remove(const char *name, int ifindex, GError **error);

/*
 * Whether process pid holds a tap fd of the tap named name (its
 * /proc/PID/fdinfo says "iff: NAME"; where the daemon may not look at
 * pid's fds, whether that tap exists); its *ifindex then.  A restarted
 * daemon keeps the representor port of a restored claim whose claimant
 * still holds the tap (ovs.c).
 */
bool vpd_tap_held_by(const char *name, pid_t pid, int *ifindex);

#endif
