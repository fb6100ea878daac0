/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * state: the claims that must survive a restart of the daemon.
 *
 * A key file, one group per claimed VF ("claim POOL VF"), written whole to
 * a temporary file and renamed over the old one, so a crash leaves either
 * the old or the new state.  Loading restores each claim as held by no
 * connection ("orphaned", client 0) with its owner, uid, pid and
 * attributes; the daemon then gives it back to the process that claimed it
 * when it reconnects, or releases it when that process is gone.
 */
#ifndef VPD_STATE_H
#define VPD_STATE_H

#include "pool.h"

bool vpd_state_save(const struct vpd_pools *pools, const char *path, GError **error);

/*
 * Restore the claims of path into pools (whose entries are all free).
 * A missing file is an empty state.  Claims of VFs the configuration no
 * longer has are dropped with a warning each; returns how many were
 * restored, or -1 with error for a file that cannot be read or parsed.
 */
int vpd_state_load(struct vpd_pools *pools, const char *path, GError **error);

#endif
