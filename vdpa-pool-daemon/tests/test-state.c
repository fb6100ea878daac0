// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of the state file: claims and their claimants survive a
 * snapshot and a journal; a claim goes back only to its process (same
 * boot, pid and start time); format 1 files are read and their claims
 * released; files that are not state files are refused (and moved aside
 * by vpd_state_open); journal records cut short or damaged are ignored
 * and never merge with the next; a MAC a migration handed over comes back,
 * and so do the hand-over's link and the daemon MACs it swapped (format 3:
 * the snapshot and the journal).
 */
#include "state.h"
#include "proc.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *conf =
	"[pf pf0]\nnum-vfs = 16\n[pf pf1]\nnum-vfs = 2\n"
	"[pool a]\npf = pf0\nvfs = 0-3\nvlans = 100-199\nmac-policy = any\n"
	"[pool b]\npf = pf1\nvfs = 0-1\nmac-policy = any\n"
	"[pool c]\npf = pf0\nvfs = 4-7\nmac-policy = any\nmac-handover = token\n";

#define BOOT "be69aea7-a93a-4d22-8b5a-e15cb451e3a5"
#define OTHER_BOOT "0f0e0d0c-0b0a-4909-8807-060504030201"

struct fixture {
	struct vpd_config *cfg;
	struct vpd_pools *pools;
	struct vpd_state_report report;
	pid_t pid;              /* this process */
	guint64 start;          /* its start time */
	pid_t gone;             /* the pid of a reaped child */
	char *dir;
};

static void setup(struct fixture *f, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	f->cfg = vpd_config_parse(conf, "t.conf", &err);
	g_assert_no_error(err);
	f->pools = vpd_pools_new(f->cfg);
	memset(&f->report, 0, sizeof(f->report));
	f->pid = getpid();
	f->start = vpd_proc_start_time(f->pid);
	g_assert_cmpuint(f->start, >, 0);
	f->gone = fork();
	if (!f->gone)
		_exit(0);
	g_assert_cmpint(waitpid(f->gone, NULL, 0), ==, f->gone);
	f->dir = g_dir_make_tmp("vpd-state-XXXXXX", &err);
	g_assert_no_error(err);
}

static void remove_dir(const char *dir)
{
	g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
	const char *name;

	while (d && (name = g_dir_read_name(d))) {
		g_autofree char *p = g_build_filename(dir, name, NULL);

		g_assert_cmpint(unlink(p), ==, 0);
	}
	g_assert_cmpint(rmdir(dir), ==, 0);
}

static void teardown(struct fixture *f, gconstpointer data)
{
	(void)data;
	vpd_state_report_clear(&f->report);
	vpd_pools_free(f->pools);
	vpd_config_free(f->cfg);
	remove_dir(f->dir);
	g_free(f->dir);
}

static struct vpd_entry *entry(struct fixture *f, const char *pool, unsigned vf)
{
	for (unsigned i = 0; i < f->pools->entries->len; i++) {
		struct vpd_entry *e = f->pools->entries->pdata[i];

		if (e->vf == vf && !strcmp(e->pool->name, pool))
			return e;
	}
	g_assert_not_reached();
}

static unsigned in_use(struct fixture *f, const char *pf)
{
	return GPOINTER_TO_UINT(g_hash_table_lookup(f->report.in_use, pf));
}

/* A claim group of format 2; extra: more lines, or a replacement of one. */
static char *claim(const char *pool, unsigned vf, const char *pf, pid_t pid, guint64 start)
{
	return g_strdup_printf("[claim %s %u]\npf=%s\nowner=vm-%u\nuid=0\npid=%d\n"
			       "start-time=%" G_GUINT64_FORMAT "\nmac=02:00:00:00:%02x:%02x\nvlan=0\n"
			       "qos=0\nvlan-proto=33024\nspoofchk=true\ntrust=false\nlink-state=0\n"
			       "min-tx-rate=0\nmax-tx-rate=0\n\n", pool, vf, pf, vf, (int)pid,
			       start, pool[0], vf + 1);   /* a MAC of its own */
}

/* A claim group of format 2 with an owner and a MAC of the test's. */
static char *claim_as(const char *pool, unsigned vf, pid_t pid, guint64 start,
		      const char *owner, const char *mac)
{
	return g_strdup_printf("[claim %s %u]\npf=pf0\nowner=%s\nuid=0\npid=%d\n"
			       "start-time=%" G_GUINT64_FORMAT "\nmac=%s\nvlan=0\n"
			       "qos=0\nvlan-proto=33024\nspoofchk=true\ntrust=false\nlink-state=0\n"
			       "min-tx-rate=0\nmax-tx-rate=0\n\n", pool, vf, owner, (int)pid, start,
			       mac);
}

static char *snapshot(const char *boot, const char *claims)
{
	return g_strdup_printf("[state]\nversion=2\ngeneration=5\nboot-id=%s\n\n%s", boot, claims);
}

static bool parse(struct fixture *f, const char *snap, gssize len, const char *journal,
		  GError **error)
{
	guint64 gen;

	return vpd_state_parse(f->pools, "/s", snap, len < 0 ? strlen(snap) : (gsize)len,
			       journal, journal ? strlen(journal) : 0, BOOT, &gen, &f->report,
			       error);
}

static void test_crc32(void)
{
	g_assert_cmphex(vpd_state_crc32("123456789", 9), ==, 0xcbf43926);
	g_assert_cmphex(vpd_state_crc32("", 0), ==, 0);
}

/* Claims, owners and attributes through the journal, then the snapshot. */
static void test_round_trip(struct fixture *f, gconstpointer data)
{
	static const char owner[] = " vm\t1\nwith\\odd [chars] = x \"\303\251\" \\040 ";
	g_autofree char *path = g_build_filename(f->dir, "state", NULL);
	g_autoptr(GPtrArray) got = g_ptr_array_new();
	g_autoptr(GError) err = NULL;
	struct vpd_vf_attrs a;
	struct vpd_state *st;
	struct vpd_entry *e;

	(void)data;
	st = vpd_state_open(f->pools, path, BOOT, &f->report, &err);
	g_assert_no_error(err);
	g_assert_cmpuint(f->report.restored, ==, 0);
	g_assert_true(vpd_pools_claim(f->pools, "a", 1, 0, 0, f->pid, f->start, owner, 2, got,
				      &err));
	e = got->pdata[1];
	a = e->attrs;
	a.vlan = 150;
	a.qos = 5;
	a.max_tx_rate = 77;
	a.link_state = VPD_LINK_DISABLE;
	g_assert_true(vpd_pools_set_attrs(f->pools, e, 1, &a, &err));
	for (unsigned i = 0; i < got->len; i++)
		g_assert_true(vpd_state_record(st, f->pools, got->pdata[i], &err));
	vpd_state_close(st);

	for (int round = 0; round < 2; round++) {   /* from the journal, then the snapshot */
		vpd_pools_free(f->pools);
		f->pools = vpd_pools_new(f->cfg);
		st = vpd_state_open(f->pools, path, BOOT, &f->report, &err);
		g_assert_no_error(err);
		g_assert_cmpuint(f->report.restored, ==, 2);
		g_assert_cmpuint(f->report.released, ==, 0);
		g_assert_cmpuint(f->report.damaged, ==, 0);
		g_assert_cmpuint(in_use(f, "pf0"), ==, 2);
		for (unsigned vf = 0; vf < 2; vf++) {
			e = entry(f, "a", vf);
			g_assert_true(e->claimed);
			g_assert_cmpuint(e->client, ==, 0);
			g_assert_cmpint(e->pid, ==, f->pid);
			g_assert_cmpuint(e->start_time, ==, f->start);
			g_assert_cmpstr(e->owner, ==, owner);
		}
		g_assert_cmpmem(e->attrs.mac, 6, a.mac, 6);
		g_assert_cmpuint(e->attrs.vlan, ==, 150);
		g_assert_cmpuint(e->attrs.qos, ==, 5);
		g_assert_cmpuint(e->attrs.max_tx_rate, ==, 77);
		g_assert_cmpint(e->attrs.link_state, ==, VPD_LINK_DISABLE);
		g_assert_true(e->attrs.spoofchk);
		g_assert_false(entry(f, "a", 2)->claimed);
		vpd_state_close(st);
	}
}

/* Each claim goes back only to its process; the others are released. */
static void test_claimants(struct fixture *f, gconstpointer data)
{
	g_autofree char *c0 = claim("a", 0, "pf0", f->pid, f->start);
	g_autofree char *c1 = claim("a", 1, "pf0", f->pid, f->start - 1);
	g_autofree char *c2 = claim("a", 2, "pf0", f->gone, f->start + 1);
	g_autofree char *c3 = claim("a", 3, "pf0", f->pid, 0);
	g_autofree char *c4 = claim("b", 0, "pf1", f->gone, 0);
	g_autofree char *all = g_strconcat(c0, c1, c2, c3, c4, NULL);
	g_autofree char *snap = snapshot(BOOT, all);
	g_autoptr(GError) err = NULL;

	(void)data;
	g_test_expect_message(NULL, G_LOG_LEVEL_WARNING,
			      "*[claim a 1]: pid * is another process now*released");
	g_test_expect_message(NULL, G_LOG_LEVEL_MESSAGE, "*[claim a 2]: pid * is gone: released");
	g_test_expect_message(NULL, G_LOG_LEVEL_WARNING,
			      "*[claim a 3]: the start time of its claimant * was not known*");
	g_test_expect_message(NULL, G_LOG_LEVEL_WARNING,
			      "*[claim b 0]: the start time of its claimant * was not known*");
	g_assert_true(parse(f, snap, -1, NULL, &err));
	g_assert_no_error(err);
	g_test_assert_expected_messages();
	g_assert_true(entry(f, "a", 0)->claimed);
	for (unsigned vf = 1; vf < 4; vf++)
		g_assert_false(entry(f, "a", vf)->claimed);
	g_assert_cmpuint(f->report.restored, ==, 1);
	g_assert_cmpuint(f->report.released, ==, 4);
	/* In use as far as the daemon can tell: a 0, and the unknown a 3 and b 0. */
	g_assert_cmpuint(in_use(f, "pf0"), ==, 2);
	g_assert_cmpuint(in_use(f, "pf1"), ==, 1);
}

static void test_other_boot(struct fixture *f, gconstpointer data)
{
	g_autofree char *c0 = claim("a", 0, "pf0", f->pid, f->start);
	g_autofree char *snap = snapshot(OTHER_BOOT, c0);
	g_autoptr(GError) err = NULL;

	(void)data;
	g_assert_true(parse(f, snap, -1, NULL, &err));
	g_assert_false(entry(f, "a", 0)->claimed);
	g_assert_cmpuint(f->report.released, ==, 1);
	g_assert_cmpuint(g_hash_table_size(f->report.in_use), ==, 0);
}

/*
 * A MAC that a VM's migration handed over (its source's VF and its
 * destination's, one owner name) comes back with both claims, in a pool
 * with mac-handover, whichever record comes first; another VM's VF with
 * that MAC, or one VM's two VFs in a pool without mac-handover, keep
 * their defaults.
 */
static void test_handed_over_mac(struct fixture *f, gconstpointer data)
{
	static const uint8_t mac[6] = { 2, 0, 0, 0, 0xc, 1 };
	g_autofree char *dst = claim_as("c", 6, f->pid, f->start, "vm-x", "02:00:00:00:0c:01");
	g_autofree char *src = claim_as("c", 4, f->pid, f->start, "vm-x", "02:00:00:00:0c:01");
	g_autofree char *other = claim_as("c", 7, f->pid, f->start, "vm-y", "02:00:00:00:0c:01");
	g_autofree char *a0 = claim_as("a", 0, f->pid, f->start, "vm-z", "02:00:00:00:0a:09");
	g_autofree char *a1 = claim_as("a", 1, f->pid, f->start, "vm-z", "02:00:00:00:0a:09");
	g_autofree char *all = g_strconcat(dst, src, other, a0, a1, NULL);
	g_autofree char *snap = snapshot(BOOT, all);
	g_autoptr(GError) err = NULL;

	(void)data;
	g_test_expect_message(NULL, G_LOG_LEVEL_WARNING, "*[claim c 7]: MAC 02:00:00:00:0c:01 "
			      "is in use by another VF; the VF keeps its defaults");
	g_test_expect_message(NULL, G_LOG_LEVEL_WARNING, "*[claim a 1]: MAC 02:00:00:00:0a:09 "
			      "is in use by another VF; the VF keeps its defaults");
	g_assert_true(parse(f, snap, -1, NULL, &err));
	g_assert_no_error(err);
	g_test_assert_expected_messages();
	g_assert_cmpuint(f->report.restored, ==, 5);
	g_assert_cmpmem(entry(f, "c", 4)->attrs.mac, 6, mac, 6);
	g_assert_cmpmem(entry(f, "c", 6)->attrs.mac, 6, mac, 6);
	g_assert_true(entry(f, "c", 7)->claimed);
	g_assert_cmpmem(entry(f, "c", 7)->attrs.mac, 6, entry(f, "c", 7)->default_mac, 6);
	g_assert_cmpmem(entry(f, "a", 1)->attrs.mac, 6, entry(f, "a", 1)->default_mac, 6);
}

/* A claim of a VF no pool has: dropped, but it counts while its process runs. */
static void test_stray_claims(struct fixture *f, gconstpointer data)
{
	g_autofree char *live = claim("a", 9, "pf0", f->pid, f->start);
	g_autofree char *dead = claim("gone", 1, "pf1", f->gone, f->start + 1);
	g_autofree char *snap = snapshot(BOOT, live);
	g_autoptr(GError) err = NULL;

	(void)data;
	g_test_expect_message(NULL, G_LOG_LEVEL_WARNING,
			      "*no pool has VF 'a 9' any more; the claim of pid * is dropped, but "
			      "that process may still use it: PF pf0 keeps its number of VFs");
	g_assert_true(parse(f, snap, -1, NULL, &err));
	g_test_assert_expected_messages();
	g_assert_cmpuint(in_use(f, "pf0"), ==, 1);
	g_assert_cmpuint(f->report.restored, ==, 0);

	g_clear_pointer(&snap, g_free);
	snap = snapshot(BOOT, dead);
	g_test_expect_message(NULL, G_LOG_LEVEL_WARNING,
			      "*no pool has VF 'gone 1' any more; its claim is dropped");
	g_assert_true(parse(f, snap, -1, NULL, &err));
	g_test_assert_expected_messages();
	g_assert_cmpuint(g_hash_table_size(f->report.in_use), ==, 0);
}

/* What daemons before format 2 wrote: read, and every claim released. */
static void test_format_1(struct fixture *f, gconstpointer data)
{
	g_autofree char *snap = g_strdup_printf(
		"[state]\ngeneration=3\n\n[claim a 0]\nowner=vm\nuid=0\npid=%d\n"
		"mac=02:00:00:00:00:03\nvlan=0\nqos=0\nvlan-proto=33024\nspoofchk=true\n"
		"trust=false\nlink-state=0\nmin-tx-rate=0\nmax-tx-rate=0\n\n", (int)f->pid);
	g_autofree char *journal = g_strdup_printf(
		"3 claim b 1 0 %d 02:00:00:00:00:09 0 0 33024 1 0 0 0 0 vm\\040two\n"
		"3 free a 0\n"
		"2 claim a 3 0 %d 02:00:00:00:00:09 0 0 33024 1 0 0 0 0 old generation\n"
		"3 claim a 2 0 %d 02:00", (int)f->pid, (int)f->pid, (int)f->pid);
	g_autoptr(GError) err = NULL;

	(void)data;
	g_test_expect_message(NULL, G_LOG_LEVEL_WARNING,
			      "*[claim b 1]: the state file (format 1) does not say which process "
			      "claimed it, only its pid*");
	g_assert_true(parse(f, snap, -1, journal, &err));
	g_assert_no_error(err);
	g_test_assert_expected_messages();
	for (unsigned i = 0; i < f->pools->entries->len; i++)
		g_assert_false(((struct vpd_entry *)f->pools->entries->pdata[i])->claimed);
	g_assert_cmpuint(f->report.released, ==, 1);
	g_assert_cmpuint(f->report.damaged, ==, 0);
	g_assert_cmpuint(in_use(f, "pf1"), ==, 1);
}

/* Files that are not state files of this daemon, and leave no claim behind. */
static void test_invalid(struct fixture *f, gconstpointer data)
{
	g_autofree char *good = claim("a", 0, "pf0", f->pid, f->start);
	g_autofree char *bad_mac = claim("a", 1, "pf0", f->pid, f->start);
	const struct {
		const char *text;
		gsize len;
		const char *why;
	} cases[] = {
		{ "\0\0\0\0[state]\n", 12, "binary data" },
		{ "[state]\nversion=2\n\0", 19, "binary data" },
		{ "[state]\nversion=2\ngeneration=\377\n", 0, "not UTF-8 text" },
		{ "", 0, "no [state] group" },
		{ "hello\n", 0, "*not a key-value pair, group, or comment" },
		{ "[claims]\nvf=1\n", 0, "no [state] group" },
		{ "[state]\nversion=99\ngeneration=1\nboot-id=" BOOT "\n", 0,
		  "format version '99' unknown (this daemon reads 1 to 3)" },
		{ "[state]\nversion=2x\ngeneration=1\nboot-id=" BOOT "\n", 0,
		  "format version '2x' unknown*" },
		{ "[state]\nversion=2\ngeneration=1\n", 0, "[state] has no boot-id" },
		{ "[state]\nversion=2\ngeneration=1\nboot-id=x\n", 0,
		  "[state] has no valid boot-id" },
		{ "[state]\nversion=2\ngeneration=-1\nboot-id=" BOOT "\n", 0,
		  "[state] has no valid generation" },
		{ "[state]\ngeneration=1\nboot-id=" BOOT "\n", 0,
		  "[state] has an unknown key 'boot-id'" },
		{ "[state]\nversion=2\ngeneration=1\nboot-id=" BOOT "\n[foo]\n", 0,
		  "unknown group [foo]" },
		{ "[state]\nversion=2\ngeneration=1\nboot-id=" BOOT "\n[claim a x]\n", 0,
		  "unknown group [claim a x]" },
	};
	g_autofree char *with_bad_mac = NULL;
	g_autofree char *unknown_key = NULL;
	g_autofree char *missing_key = NULL;
	g_autofree char *bad_number = NULL;
	char *p;

	(void)data;
	for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
		g_autoptr(GError) err = NULL;

		g_test_message("case %u: %s", i, cases[i].why);
		g_assert_false(parse(f, cases[i].text, cases[i].len ? (gssize)cases[i].len : -1,
				     NULL, &err));
		g_assert_error(err, VPD_STATE_ERROR, VPD_STATE_ERR_INVALID);
		g_assert_true(g_pattern_match_simple(cases[i].why, err->message));
	}

	/* A valid claim before the bad one is not left claimed. */
	p = strstr(bad_mac, "mac=02");
	memcpy(p, "mac=zz", 6);
	with_bad_mac = g_strconcat("[state]\nversion=2\ngeneration=1\nboot-id=" BOOT "\n", good,
				   bad_mac, NULL);
	unknown_key = g_strconcat("[state]\nversion=2\ngeneration=1\nboot-id=" BOOT "\n", good,
				  "[claim a 2]\nmood=happy\n", NULL);
	missing_key = snapshot(BOOT, "[claim a 2]\npf=pf0\nowner=x\nuid=0\npid=1\n");
	bad_number = snapshot(BOOT, good);
	p = strstr(bad_number, "vlan=0");
	memcpy(p, "vlan=-", 6);
	{
		const char *texts[] = { with_bad_mac, unknown_key, missing_key, bad_number };
		const char *whys[] = { "[claim a 1] has no valid mac",
				       "[claim a 2] has an unknown key 'mood'",
				       "[claim a 2] has no start-time",
				       "[claim a 0] has no valid vlan" };

		for (unsigned i = 0; i < G_N_ELEMENTS(texts); i++) {
			g_autoptr(GError) err = NULL;

			g_assert_false(parse(f, texts[i], -1, NULL, &err));
			g_assert_error(err, VPD_STATE_ERROR, VPD_STATE_ERR_INVALID);
			g_assert_cmpstr(err->message, ==, whys[i]);
			for (unsigned j = 0; j < f->pools->entries->len; j++)
				g_assert_false(((struct vpd_entry *)
						f->pools->entries->pdata[j])->claimed);
		}
	}
}

/* A format 2 journal record as the daemon writes it, checksum and all. */
static char *record(const char *body)
{
	return g_strdup_printf("\n%s %08x\n", body, vpd_state_crc32(body, strlen(body)));
}

static void test_journal(struct fixture *f, gconstpointer data)
{
	g_autofree char *snap = snapshot(BOOT, "");
	g_autofree char *claim0 = g_strdup_printf("5 claim a 0 pf0 0 %d %" G_GUINT64_FORMAT
						  " 02:00:00:00:00:07 100 0 33024 1 0 0 0 0 vm0",
						  (int)f->pid, f->start);
	g_autofree char *claim1 = g_strdup_printf("5 claim a 1 pf0 0 %d %" G_GUINT64_FORMAT
						  " 02:00:00:00:00:08 110 0 33024 1 0 0 0 0 "
						  "vm\\040one", (int)f->pid, f->start);
	g_autofree char *vlan120 = g_strdup_printf("5 claim a 0 pf0 0 %d %" G_GUINT64_FORMAT
						   " 02:00:00:00:00:07 120 0 33024 1 0 0 0 0 vm0",
						   (int)f->pid, f->start);
	g_autofree char *r0 = record(claim0);
	g_autofree char *r1 = record(claim1);
	g_autofree char *r2 = record(vlan120);
	g_autofree char *old = record("4 free a 0");
	g_autofree char *bad = record("5 free a 1");
	g_autofree char *journal = NULL;
	g_autoptr(GError) err = NULL;

	(void)data;
	bad[strlen(bad) - 2] ^= 1;      /* a bit flipped in the checksum */
	journal = g_strconcat(r0, r1, old,
			      /* A write cut short after what looks like a whole record... */
			      "\n5 free a 0",
			      /* ...does not merge with the next, which starts a line. */
			      r2, bad,
			      /* The last write, cut short. */
			      "\n5 free a 1 1f", NULL);
	g_test_expect_message(NULL, G_LOG_LEVEL_WARNING,
			      "journal /s.journal:8: record damaged or cut short, ignored");
	g_test_expect_message(NULL, G_LOG_LEVEL_WARNING,
			      "journal /s.journal:11: record damaged or cut short, ignored");
	g_test_expect_message(NULL, G_LOG_LEVEL_WARNING,
			      "journal /s.journal:13: record damaged or cut short, ignored");
	g_assert_true(parse(f, snap, -1, journal, &err));
	g_assert_no_error(err);
	g_test_assert_expected_messages();
	g_assert_cmpuint(f->report.damaged, ==, 3);
	g_assert_cmpuint(f->report.restored, ==, 2);
	g_assert_true(entry(f, "a", 0)->claimed);
	g_assert_cmpuint(entry(f, "a", 0)->attrs.vlan, ==, 120);
	g_assert_true(entry(f, "a", 1)->claimed);
	g_assert_cmpstr(entry(f, "a", 1)->owner, ==, "vm one");
}

/* path and its journal copied to copy (the daemon keeps writing path's). */
static void copy_state(const char *path, const char *copy)
{
	g_autofree char *jpath = g_strdup_printf("%s.journal", path);
	g_autofree char *jcopy = g_strdup_printf("%s.journal", copy);
	g_autofree char *text = NULL;
	gsize len;

	g_assert_true(g_file_get_contents(path, &text, &len, NULL));
	g_assert_true(g_file_set_contents(copy, text, len, NULL));
	g_clear_pointer(&text, g_free);
	g_assert_true(g_file_get_contents(jpath, &text, &len, NULL));
	g_assert_true(g_file_set_contents(jcopy, text, len, NULL));
}

/* A fresh set of pools with the state of f's file at path loaded. */
static struct vpd_pools *reload(struct fixture *f, const char *path)
{
	struct vpd_pools *pools = vpd_pools_new(f->cfg);
	struct vpd_state_report report = {};
	g_autoptr(GError) err = NULL;
	struct vpd_state *st = vpd_state_open(pools, path, BOOT, &report, &err);

	g_assert_no_error(err);
	vpd_state_close(st);
	vpd_state_report_clear(&report);
	return pools;
}

static struct vpd_entry *entry_of(struct vpd_pools *pools, const char *pool, unsigned vf)
{
	for (unsigned i = 0; i < pools->entries->len; i++) {
		struct vpd_entry *e = pools->entries->pdata[i];

		if (e->vf == vf && !strcmp(e->pool->name, pool))
			return e;
	}
	g_assert_not_reached();
}

/*
 * A migration's hand-over in the state file (format 3): while both VFs
 * are claimed, the destination's link to the source comes back (journal,
 * then snapshot); once the source is released, the two VFs' swapped
 * daemon MACs come back (the destination's record has it, the free
 * source gets the other), whether the journal or the snapshot says it.
 */
static void test_handover_kept(struct fixture *f, gconstpointer data)
{
	static const uint8_t pod[6] = { 2, 0, 0, 0, 0xa, 1 };
	g_autofree char *path = g_build_filename(f->dir, "state", NULL);
	g_autofree char *copy = g_build_filename(f->dir, "copy", NULL);
	g_autoptr(GPtrArray) got = g_ptr_array_new();
	g_autoptr(GError) err = NULL;
	struct vpd_state_report report = {};
	struct vpd_entry *src, *dst, *heir = NULL;
	uint8_t src_mac[6], dst_mac[6];
	struct vpd_vf_attrs a;
	struct vpd_state *st;

	(void)data;
	st = vpd_state_open(f->pools, path, BOOT, &report, &err);
	g_assert_no_error(err);
	vpd_state_report_clear(&report);
	g_assert_true(vpd_pools_claim(f->pools, "c", 7, 0, 0, f->pid, f->start, "vm-x", 1, got,
				      &err));
	g_assert_true(vpd_pools_claim(f->pools, "c", 8, 0, 0, f->pid, f->start, "vm-x", 1, got,
				      &err));
	src = got->pdata[0];
	dst = got->pdata[1];
	memcpy(src_mac, src->default_mac, 6);
	memcpy(dst_mac, dst->default_mac, 6);
	a = src->attrs;
	memcpy(a.mac, pod, 6);
	g_assert_true(vpd_pools_set_attrs(f->pools, src, 7, &a, &err));
	g_assert_true(vpd_pools_set_attrs_from(f->pools, dst, 8, &a, 7, &err));
	g_assert_no_error(err);
	g_assert_true(vpd_state_record(st, f->pools, src, &err));
	g_assert_true(vpd_state_record(st, f->pools, dst, &err));
	copy_state(path, copy);
	for (int pass = 0; pass < 2; pass++) {
		/* pass 0 from the journal; its reload writes a snapshot: pass 1 from that */
		g_autoptr(vpd_pools) p = reload(f, copy);

		g_assert_true(entry_of(p, "c", dst->vf)->claimed);
		g_assert_cmpuint(entry_of(p, "c", dst->vf)->mac_from, ==,
				 entry_of(p, "c", src->vf)->handle + 1);
		g_assert_cmpmem(entry_of(p, "c", dst->vf)->default_mac, 6, dst_mac, 6);
		g_assert_cmpmem(entry_of(p, "c", dst->vf)->attrs.mac, 6, pod, 6);
	}

	/* The source goes: its record, then its heir's, as the server writes them. */
	g_assert_true(vpd_pools_release(f->pools, src, 7, &heir, &err));
	g_assert_true(heir == dst);
	g_assert_true(vpd_state_record(st, f->pools, src, &err));
	g_assert_true(vpd_state_record(st, f->pools, dst, &err));
	copy_state(path, copy);
	for (int pass = 0; pass < 2; pass++) {
		g_autoptr(vpd_pools) p = reload(f, copy);

		g_assert_false(entry_of(p, "c", src->vf)->claimed);
		g_assert_cmpuint(entry_of(p, "c", dst->vf)->mac_from, ==, 0);
		g_assert_cmpmem(entry_of(p, "c", dst->vf)->default_mac, 6, src_mac, 6);
		g_assert_cmpmem(entry_of(p, "c", src->vf)->default_mac, 6, dst_mac, 6);
		g_assert_cmpmem(entry_of(p, "c", src->vf)->attrs.mac, 6, dst_mac, 6);
		/* the guest may set back the MAC it had from the daemon (CNI DEL) */
		a = entry_of(p, "c", dst->vf)->attrs;
		memcpy(a.mac, src_mac, 6);
		entry_of(p, "c", dst->vf)->client = 8;
		g_assert_true(vpd_pools_set_attrs(p, entry_of(p, "c", dst->vf), 8, &a, &err));
		g_assert_no_error(err);
	}
	vpd_state_close(st);
}

/*
 * The source's claimant went while the daemon was away: the hand-over
 * completes at load (the destination takes the source's daemon MAC);
 * a format 2 file, without the fields, loads as before.
 */
static void test_handover_settled_at_load(struct fixture *f, gconstpointer data)
{
	g_autofree char *src = claim_as("c", 4, f->gone, f->start, "vm-x", "02:00:00:00:0c:01");
	g_autofree char *dst = claim_as("c", 6, f->pid, f->start, "vm-x", "02:00:00:00:0c:01");
	g_autofree char *dst3 = NULL;
	g_autofree char *all = NULL;
	g_autofree char *snap = NULL;
	g_autoptr(GError) err = NULL;
	uint8_t mac4[6], mac6[6];

	(void)data;
	memcpy(mac4, entry(f, "c", 4)->default_mac, 6);
	memcpy(mac6, entry(f, "c", 6)->default_mac, 6);
	dst3 = g_strdup_printf("%.*sdaemon-mac=%02x:%02x:%02x:%02x:%02x:%02x\nhandover-from=4\n\n",
			       (int)strlen(dst) - 1, dst, mac6[0], mac6[1], mac6[2], mac6[3],
			       mac6[4], mac6[5]);
	/* (src's record: its daemon MAC, no hand-over) */
	all = g_strdup_printf("%.*sdaemon-mac=%02x:%02x:%02x:%02x:%02x:%02x\nhandover-from=\n\n%s",
			      (int)strlen(src) - 1, src, mac4[0], mac4[1], mac4[2], mac4[3],
			      mac4[4], mac4[5], dst3);
	snap = g_strdup_printf("[state]\nversion=3\ngeneration=5\nboot-id=%s\n\n%s", BOOT, all);
	g_assert_true(parse(f, snap, -1, NULL, &err));
	g_assert_no_error(err);
	g_assert_false(entry(f, "c", 4)->claimed);
	g_assert_true(entry(f, "c", 6)->claimed);
	g_assert_cmpuint(entry(f, "c", 6)->mac_from, ==, 0);
	g_assert_cmpmem(entry(f, "c", 6)->default_mac, 6, mac4, 6);
	g_assert_cmpmem(entry(f, "c", 4)->default_mac, 6, mac6, 6);
	g_assert_cmpmem(entry(f, "c", 4)->attrs.mac, 6, mac6, 6);
}

/* vpd_state_open moves an invalid file and its journal aside and starts empty. */
static void test_open_moves_invalid_aside(struct fixture *f, gconstpointer data)
{
	static const char garbage[] = "\0\001\002garbage";
	g_autofree char *path = g_build_filename(f->dir, "state", NULL);
	g_autofree char *jpath = g_build_filename(f->dir, "state.journal", NULL);
	g_autofree char *text = NULL;
	g_autofree char *jaside = NULL;
	g_autoptr(GError) err = NULL;
	struct vpd_state *st;
	gsize len;

	(void)data;
	g_assert_true(g_file_set_contents(path, garbage, sizeof(garbage), NULL));
	g_assert_true(g_file_set_contents(jpath, "journal", -1, NULL));
	g_test_expect_message(NULL, G_LOG_LEVEL_WARNING,
			      "state file */state is not a state file of this daemon "
			      "(binary data): moved to */state.corrupt-*, its journal to "
			      "*/state.journal.corrupt-*; the claims it held are lost*");
	st = vpd_state_open(f->pools, path, BOOT, &f->report, &err);
	g_assert_no_error(err);
	g_test_assert_expected_messages();
	g_assert_nonnull(f->report.moved_to);
	g_assert_true(g_file_get_contents(f->report.moved_to, &text, &len, NULL));
	g_assert_cmpmem(text, len, garbage, sizeof(garbage));
	jaside = g_strdup_printf("%s.journal.corrupt-%s", path,
				 strrchr(f->report.moved_to, '-') + 1);
	g_assert_true(g_file_test(jaside, G_FILE_TEST_EXISTS));
	g_clear_pointer(&text, g_free);
	g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
	g_assert_nonnull(strstr(text, "[state]\nversion=3\ngeneration=1\nboot-id=" BOOT "\n"));
	vpd_state_close(st);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/state/crc32", test_crc32);
#define ADD(name, fn) g_test_add("/state/" name, struct fixture, NULL, setup, fn, teardown)
	ADD("round-trip", test_round_trip);
	ADD("claimants", test_claimants);
	ADD("other-boot", test_other_boot);
	ADD("stray-claims", test_stray_claims);
	ADD("handed-over-mac", test_handed_over_mac);
	ADD("handover-kept", test_handover_kept);
	ADD("handover-settled-at-load", test_handover_settled_at_load);
	ADD("format-1", test_format_1);
	ADD("invalid", test_invalid);
	ADD("journal", test_journal);
	ADD("open-moves-invalid-aside", test_open_moves_invalid_aside);
	return g_test_run();
}
