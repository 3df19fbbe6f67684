// SPDX-License-Identifier: Apache-2.0
/* The dynamic linker's search inside a target's root (ldsearch.h) and link
 * resolution inside it (lt_tf_realpath), on a directory made the root: its
 * absolute links must resolve inside it, never on the node. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "collector/target/elfsym.h"
#include "collector/target/ldsearch.h"
#include "unit/unit_util.h"
#include "collector/target/tfile.h"

static char root[PATH_MAX];

static void put(const char *rel, const char *text)
{
	char p[PATH_MAX * 2], cmd[PATH_MAX * 3];

	snprintf(p, sizeof(p), "%s%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", p);
	assert_int_equal(system(cmd), 0);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void link_(const char *target, const char *rel)
{
	char p[PATH_MAX * 2];

	snprintf(p, sizeof(p), "%s%s", root, rel);
	assert_int_equal(symlink(target, p), 0);
}

static int setup(void **state)
{
	(void)state;
	assert_int_equal(ut_mkdtemp(root, sizeof(root), "ldsearch"), 0);
	put("/usr/lib/x/libfoo.so.1.2", "a");
	put("/env/libfoo.so.1", "b");
	put("/conf/libfoo.so.1", "c");
	put("/opt/app/rp/libfoo.so.1", "d");
	put("/opt/app/old/libfoo.so.1", "e");
	put("/opt/app/bin/prog", "f");
	put("/etc/ld.so.conf", "# comment\ninclude /etc/ld.so.conf.d/*.conf\n");
	put("/etc/ld.so.conf.d/a.conf", "/conf\n");
	link_("/usr/lib/x/libfoo.so.1.2", "/usr/lib/x/libfoo.so.1"); /* absolute: inside the root */
	link_("x/libfoo.so.1", "/usr/lib/libfoo.so.1");              /* relative, then absolute */
	link_("/etc/hostname", "/usr/lib/dangling"); /* a node file, absent in the root */
	link_("loop2", "/usr/lib/loop1");
	link_("loop1", "/usr/lib/loop2");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return ut_rmtree(root);
}

static void realpath_in_root(void **state)
{
	int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	char out[PATH_MAX];

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(lt_tf_realpath(fd, "/usr/lib/libfoo.so.1", out, sizeof(out)), 0);
	assert_string_equal(out, "/usr/lib/x/libfoo.so.1.2");
	assert_int_equal(lt_tf_realpath(fd, "/usr/lib/../lib/./x/libfoo.so.1", out, sizeof(out)), 0);
	assert_string_equal(out, "/usr/lib/x/libfoo.so.1.2");
	assert_int_equal(lt_tf_realpath(fd, "/../../usr/lib/x/libfoo.so.1.2", out, sizeof(out)), 0);
	assert_string_equal(out, "/usr/lib/x/libfoo.so.1.2"); /* ".." stops at the root */
	assert_int_equal(lt_tf_realpath(fd, "/usr/lib/dangling", out, sizeof(out)), -ENOENT);
	assert_int_equal(lt_tf_realpath(fd, "/usr/lib/loop1", out, sizeof(out)), -ELOOP);
	close(fd);
}

static void search_order(void **state)
{
	int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct lt_elf loader = { 0 };
	struct lt_ldsearch l;
	char out[PATH_MAX];

	(void)state;
	assert_true(fd >= 0);
	/* ld.so.conf (through its include), then the defaults */
	lt_lds_init(&l, fd, NULL, NULL);
	assert_true(lt_lds_resolve(&l, NULL, "/opt/app/bin/prog", "libfoo.so.1", out, sizeof(out)));
	assert_string_equal(out, "/conf/libfoo.so.1");
	lt_lds_free(&l);
	/* LD_LIBRARY_PATH first (':' and ';' separate; relative entries left out) */
	lt_lds_init(&l, fd, "rel:/nowhere;/env", NULL);
	assert_true(lt_lds_resolve(&l, NULL, "/opt/app/bin/prog", "libfoo.so.1", out, sizeof(out)));
	assert_string_equal(out, "/env/libfoo.so.1");
	/* DT_RPATH before LD_LIBRARY_PATH, with $ORIGIN */
	loader.rpath = "$ORIGIN/../old";
	assert_true(lt_lds_resolve(&l, &loader, "/opt/app/bin/prog", "libfoo.so.1", out, sizeof(out)));
	assert_string_equal(out, "/opt/app/bin/../old/libfoo.so.1");
	/* ... but ignored when there is a DT_RUNPATH, which comes after LD_LIBRARY_PATH */
	loader.runpath = "${ORIGIN}/../rp";
	assert_true(lt_lds_resolve(&l, &loader, "/opt/app/bin/prog", "libfoo.so.1", out, sizeof(out)));
	assert_string_equal(out, "/env/libfoo.so.1");
	lt_lds_free(&l);
	lt_lds_init(&l, fd, NULL, NULL);
	assert_true(lt_lds_resolve(&l, &loader, "/opt/app/bin/prog", "libfoo.so.1", out, sizeof(out)));
	assert_string_equal(out, "/opt/app/bin/../rp/libfoo.so.1");
	/* a name found nowhere; a link out of the root is not a file */
	assert_false(lt_lds_resolve(&l, NULL, "/p", "libnone.so.1", out, sizeof(out)));
	assert_false(lt_lds_resolve(&l, NULL, "/p", "/usr/lib/dangling", out, sizeof(out)));
	lt_lds_free(&l);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(realpath_in_root),
		cmocka_unit_test(search_order),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
