/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proc: which process a pid is, and which boot of the host this is.
 *
 * A pid alone does not name a process: the kernel hands a pid out again
 * once its process is gone, and a state file outlives both the process and
 * (when the host reboots) the boot.  A process is named here by the boot
 * id (/proc/sys/kernel/random/boot_id), its pid and its start time (field
 * 22 of /proc/PID/stat, clock ticks after boot): two processes of one
 * boot with the same pid started at different times, unless the kernel
 * went round every pid within one tick.
 */
#ifndef VPD_PROC_H
#define VPD_PROC_H

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

/*
 * The start time (field 22) in the text of a /proc/PID/stat, len bytes
 * (no NUL needed).  The command name (field 2) is in parentheses and may
 * hold anything, spaces and ')' included: the fields are counted after
 * the last ')'.  False for a text that is not such a line.
 */
bool vpd_proc_parse_start_time(const char *stat, gsize len, guint64 *start_time);

/*
 * The start time of process pid as /proc says now; 0 when there is no
 * such process or /proc cannot say (0 is never a claimant's start time
 * the daemon trusts).  Does not block.
 */
guint64 vpd_proc_start_time(pid_t pid);

/* Whether s is a boot id as the kernel writes it (a UUID, lower case). */
bool vpd_boot_id_valid(const char *s);

/* This boot's id, NULL with error when /proc cannot say. */
char *vpd_proc_boot_id(GError **error);

#endif
