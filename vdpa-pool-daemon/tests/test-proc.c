// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of process identity: the start time in /proc/PID/stat lines
 * (a command name may hold spaces and parentheses), the start time of live
 * and gone processes, boot ids.
 */
#include "proc.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Fields 3-21 of a stat line, then start time 4242 and a few more. */
#define REST "S 1 2 3 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 4242 1000 10 18446744073709551615"

static void test_parse(void)
{
	static const struct {
		const char *line;
		bool ok;
		guint64 start;
	} cases[] = {
		{ "123 (qemu) " REST "\n", true, 4242 },
		{ "123 (qemu-system-x86) " REST, true, 4242 },
		/* The name holds spaces, parentheses and what looks like fields. */
		{ "123 (a b) c) " REST "\n", true, 4242 },
		{ "123 (x) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 77) " REST "\n", true, 4242 },
		{ "123 ()) " REST "\n", true, 4242 },
		{ "1 (init) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 18446744073709551615\n", true,
		  G_MAXUINT64 },
		/* Not stat lines. */
		{ "", false, 0 },
		{ "123 qemu " REST, false, 0 },
		{ "(qemu) " REST, false, 0 },
		{ "123 (qemu) S 1 2 3", false, 0 },
		{ "123 (qemu) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 ", false, 0 },
		{ "123 (qemu) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5 1", false, 0 },
		{ "123 (qemu) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12x 1", false, 0 },
		{ "123 (qemu) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1  0 12 1", false, 0 },
		{ "123 (qemu) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 18446744073709551616", false,
		  0 },
	};

	for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
		guint64 t = 1;

		g_test_message("%s", cases[i].line);
		g_assert_cmpint(vpd_proc_parse_start_time(cases[i].line, strlen(cases[i].line), &t),
				==, cases[i].ok);
		if (cases[i].ok)
			g_assert_cmpuint(t, ==, cases[i].start);
		else
			g_assert_cmpuint(t, ==, 1);
	}
	/* Only len bytes count: the start time cut off is no start time. */
	g_assert_false(vpd_proc_parse_start_time("123 (q) " REST, 8 + 40, &(guint64){ 0 }));
}

static void test_live_and_gone(void)
{
	g_autofree char *self = NULL;
	guint64 mine, t;
	gsize len;
	pid_t child;

	g_assert_true(g_file_get_contents("/proc/self/stat", &self, &len, NULL));
	g_assert_true(vpd_proc_parse_start_time(self, len, &mine));
	g_assert_cmpuint(vpd_proc_start_time(getpid()), ==, mine);
	g_assert_cmpuint(mine, >, 0);
	/* A child started after us; once reaped, its pid names nobody. */
	child = fork();
	if (!child)
		_exit(0);
	g_assert_cmpint(waitpid(child, NULL, 0), ==, child);
	g_assert_cmpuint(vpd_proc_start_time(child), ==, 0);
	g_assert_cmpuint(vpd_proc_start_time(0), ==, 0);
	g_assert_cmpuint(vpd_proc_start_time(-1), ==, 0);
	t = vpd_proc_start_time(1);
	g_assert_cmpuint(t, <=, mine);
}

static void test_boot_id(void)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *id = vpd_proc_boot_id(&err);

	g_assert_no_error(err);
	g_assert_true(vpd_boot_id_valid(id));
	g_assert_true(vpd_boot_id_valid("be69aea7-a93a-4d22-8b5a-e15cb451e3a5"));
	g_assert_false(vpd_boot_id_valid("BE69AEA7-A93A-4D22-8B5A-E15CB451E3A5"));
	g_assert_false(vpd_boot_id_valid("be69aea7-a93a-4d22-8b5a-e15cb451e3a"));
	g_assert_false(vpd_boot_id_valid("be69aea7-a93a-4d22-8b5a-e15cb451e3a5\n"));
	g_assert_false(vpd_boot_id_valid("be69aea7a93a-4d22-8b5a-e15cb451e3a5-"));
	g_assert_false(vpd_boot_id_valid(""));
	g_assert_false(vpd_boot_id_valid(NULL));
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/proc/parse-start-time", test_parse);
	g_test_add_func("/proc/live-and-gone", test_live_and_gone);
	g_test_add_func("/proc/boot-id", test_boot_id);
	return g_test_run();
}
