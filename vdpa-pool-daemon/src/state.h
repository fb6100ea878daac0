/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * state: the claims that must survive a restart of the daemon.
 *
 * A snapshot and a journal.  The snapshot (PATH) is a key file, one group
 * per claimed VF ("claim POOL VF") and a [state] group with a generation
 * number, written whole to a temporary file and renamed over the old one,
 * so a crash leaves either the old or the new one.  Every change after it
 * is one line appended to the journal (PATH.journal), tagged with the
 * snapshot's generation: a change costs one short write, not a rewrite of
 * every claim.  When the journal grows long, a new snapshot (generation + 1)
 * is written and the journal emptied; lines of an older generation are
 * ignored, so a crash between the two is harmless.
 *
 * Loading restores each claim as held by no connection ("orphaned",
 * client 0) with its owner, uid, pid and attributes; the daemon then gives
 * it back to the process that claimed it when it reconnects, or releases it
 * when that process is gone.
 */
#ifndef VPD_STATE_H
#define VPD_STATE_H

#include "pool.h"

struct vpd_state;

/*
 * Restore the claims of the snapshot and journal at path into pools (whose
 * entries are all free), then write a fresh snapshot and open the journal.
 * A missing file is an empty state.  Claims of VFs the configuration no
 * longer has are dropped with a warning each.  *restored is how many were
 * restored.  NULL with error for a file that cannot be read or written.
 */
struct vpd_state *vpd_state_open(struct vpd_pools *pools, const char *path, int *restored,
				 GError **error);

/* Record the current claim (or its absence) of entry e. */
bool vpd_state_record(struct vpd_state *st, const struct vpd_pools *pools,
		      const struct vpd_entry *e, GError **error);

void vpd_state_close(struct vpd_state *st);

#endif
