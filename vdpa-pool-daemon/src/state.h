/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * state: the claims that must survive a restart of the daemon.
 *
 * A snapshot and a journal.  The snapshot (PATH) is a key file: a [state]
 * group with the format version, a generation number and the boot id of
 * the host when it was written, and one group per claimed VF ("claim POOL
 * VF") with its claimant (uid, pid, start time: proc.h), attributes, and
 * (format 3) its daemon MAC and the VF whose MAC it took in a hand-over
 * (pool.h's mac_from), so that a migration's hand-over outlives a restart.
 * Formats 1 and 2 are still read.  It is written whole to a temporary
 * file and renamed over the old one, so a crash leaves either the old or
 * the new one.  Every change after it is
 * one record appended to the journal (PATH.journal), tagged with the
 * snapshot's generation: a change costs one short write, not a rewrite of
 * every claim.  When the journal grows long, a new snapshot (generation + 1)
 * is written and the journal emptied; records of an older generation are
 * ignored, so a crash between the two is harmless.
 *
 * A journal record is one line ending in a CRC-32 of the rest, and each
 * write starts with a newline: a record cut short (a failed write) is a
 * line of its own whose checksum does not match, ignored with a warning,
 * and never merges with the record written after it.
 *
 * The snapshot's boot id is every claim's: a daemon lives within one boot,
 * writes a snapshot at each start, and releases the claims of another boot
 * before it does, so no file holds claims of two boots.
 *
 * Loading restores each claim as held by no connection ("orphaned",
 * client 0) when its process still runs: same boot, and the process now
 * with that pid started when the claimant did.  Other claims are released
 * with a log line each: of another boot, of a process that is gone or
 * whose pid another process has now, or whose process the file does not
 * name (format 1, written by older daemons).  The daemon then gives each
 * restored claim back to its process when it reconnects, or releases it
 * when that process exits.
 *
 * A file that is not a state file of this daemon (not a key file, binary,
 * another format, an unknown version, a claim that does not parse) is
 * moved aside to PATH.corrupt-TIME (its journal to PATH.journal.corrupt-TIME)
 * with a warning, and the state starts empty.
 */
#ifndef VPD_STATE_H
#define VPD_STATE_H

#include "pool.h"

#define VPD_STATE_ERROR (vpd_state_error_quark())
GQuark vpd_state_error_quark(void);

enum vpd_state_errc {
	VPD_STATE_ERR_INVALID,      /* not a state file of this daemon */
};

struct vpd_state;

/* What loading found. */
struct vpd_state_report {
	unsigned restored;          /* claims restored, each held by its process */
	unsigned released;          /* claims released: another boot, process gone or unknown */
	unsigned damaged;           /* journal records ignored: cut short or damaged */
	char *moved_to;             /* where an invalid state file went, or NULL */
	/*
	 * PF name -> how many of its VFs the claims say may be in use
	 * (GUINT_TO_POINTER): restored claims, claims whose process the file
	 * does not name, and claims of VFs no pool has any more whose process
	 * still runs.  Provisioning does not change the number of VFs of a PF
	 * listed here.
	 */
	GHashTable *in_use;
};

void vpd_state_report_clear(struct vpd_state_report *r);

/*
 * Restore the claims of the snapshot and journal at path into pools (whose
 * entries are all free), then write a fresh snapshot and open the journal.
 * boot_id is this boot's (proc.h).  A missing file is an empty state; an
 * invalid one is moved aside (see above).  Claims of VFs the configuration
 * no longer has are dropped with a warning each.  report (zeroed, or
 * cleared with vpd_state_report_clear, as the caller must once done) says
 * what was found.  NULL with error for a file that cannot be read, moved
 * or written.
 */
struct vpd_state *vpd_state_open(struct vpd_pools *pools, const char *path,
				 const char *boot_id, struct vpd_state_report *report,
				 GError **error);

/*
 * What vpd_state_open() does with the text of a snapshot and of its
 * journal (NULL: no such file), for tests and fuzzing: restore into pools,
 * the snapshot's generation in *gen.  False with VPD_STATE_ERR_INVALID
 * for a snapshot that is not a state file (pools are then left as they
 * were given: all free).  path names the files in messages.
 */
bool vpd_state_parse(struct vpd_pools *pools, const char *path, const char *snapshot,
		     gsize len, const char *journal, gsize jlen, const char *boot_id,
		     guint64 *gen, struct vpd_state_report *report, GError **error);

/* Record the current claim (or its absence) of entry e. */
bool vpd_state_record(struct vpd_state *st, const struct vpd_pools *pools,
		      const struct vpd_entry *e, GError **error);

void vpd_state_close(struct vpd_state *st);

/* The CRC-32 (IEEE 802.3, as zlib's crc32()) of a journal record. */
guint32 vpd_state_crc32(const char *data, gsize len);

#endif
