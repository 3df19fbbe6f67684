/* SPDX-License-Identifier: Apache-2.0 */
/* tb_layout: names, symlink-safe directories, atomic no-clobber publish. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tb_layout/tb_layout.h"
#include "tb_layout/tb_seq.h"
#include "common/io.h"
#include "unit/unit_util.h"

static char tmpdir[256];

static int setup(void **state)
{
	(void)state;
	return ut_mkdtemp(tmpdir, sizeof(tmpdir), "test_tb_layout");
}

static int teardown(void **state)
{
	(void)state;
	return ut_rmtree(tmpdir);
}

static void host_is(const char *in, const char *want)
{
	char out[TB_NAME_MAX + 1];

	assert_int_equal(tb_host_filename(in, out, sizeof(out)), 0);
	assert_string_equal(out, want);
}

static void test_host_names(void **state)
{
	char big[1000], out[TB_NAME_MAX + 1];

	(void)state;
	host_is("node-1", "node-1");
	host_is("gke-pool:10.0.0.1", "gke-pool_10.0.0.1");
	host_is("a/b\\c d\n", "a_b_c_d_");
	host_is("..", "_.");
	host_is(".hidden", "_hidden");
	host_is("", "unknown-host");
	host_is(NULL, "unknown-host");
	host_is("h\xc3\xa9", "h__");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	assert_int_equal(tb_host_filename(big, out, sizeof(out)), 0);
	assert_int_equal(strlen(out), TB_NAME_MAX);
}

static void test_run_names(void **state)
{
	char out[32], err[256];

	(void)state;
	setenv("TZ", "UTC", 1);
	tzset();
	/* 2023-11-14 22:13:20 UTC */
	assert_int_equal(tb_run_name(1700000000123456789ull, out, sizeof(out)), 0);
	assert_string_equal(out, "2023_11_14_22_13_20");
	setenv("TZ", "JST-9", 1);
	tzset();
	assert_int_equal(tb_run_name(1700000000123456789ull, out, sizeof(out)), 0);
	assert_string_equal(out, "2023_11_15_07_13_20");
	assert_int_equal(tb_run_name(1700000000123456789ull, out, 8), -1);
	assert_int_equal(tb_run_name_check("2023_11_15_07_13_20", err, sizeof(err)), 0);
	assert_int_equal(tb_run_name_check("a/b", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "'/'"));
	assert_int_equal(tb_run_name_check("..", err, sizeof(err)), -1);
	assert_int_equal(tb_run_name_check("", err, sizeof(err)), -1);
	assert_int_equal(tb_run_name_check("a\tb", err, sizeof(err)), -1);
}

static void test_paths(void **state)
{
	char out[512];

	(void)state;
	assert_int_equal(tb_run_file_path("/logs", "r1", "h:1", ".xplane.pb", out, sizeof(out)), 0);
	assert_string_equal(out, "/logs/plugins/profile/r1/h_1.xplane.pb");
	assert_int_equal(tb_run_dir_path("/logs", "r1", out, sizeof(out)), 0);
	assert_string_equal(out, "/logs/plugins/profile/r1");
	assert_int_equal(tb_run_dir_path("/logs", "r1", out, 10), -1);
}

static void test_mkdir_refuses_symlinks(void **state)
{
	char logdir[400], path[600], err[512];
	int fd;

	(void)state;
	snprintf(logdir, sizeof(logdir), "%s/logs", tmpdir);
	fd = tb_open_run_dir(logdir, "run1", 1, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/plugins/profile/run1", logdir);
	assert_int_equal(access(path, W_OK), 0);
	/* Opening again (create or not) works. */
	fd = tb_open_run_dir(logdir, "run1", 0, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
	/* A logdir several levels deep is created whole. */
	snprintf(path, sizeof(path), "%s/deep/er/logs", tmpdir);
	fd = tb_open_run_dir(path, "r", 1, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
	/* A run that does not exist is an error without create. */
	assert_int_equal(tb_open_run_dir(logdir, "nope", 0, err, sizeof(err)), -1);

	/* A symlink planted as a run directory is never followed. */
	snprintf(path, sizeof(path), "%s/plugins/profile/evil", logdir);
	assert_int_equal(symlink(tmpdir, path), 0);
	assert_int_equal(tb_open_run_dir(logdir, "evil", 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "symlink"));
	/* ...nor one planted higher up. */
	snprintf(logdir, sizeof(logdir), "%s/logs2", tmpdir);
	assert_int_equal(mkdir(logdir, 0755), 0);
	snprintf(path, sizeof(path), "%s/plugins", logdir);
	assert_int_equal(symlink(tmpdir, path), 0);
	assert_int_equal(tb_open_run_dir(logdir, "r", 1, err, sizeof(err)), -1);
	snprintf(path, sizeof(path), "%s/profile", tmpdir);
	assert_int_equal(access(path, F_OK), -1);          /* nothing created through it */
}

static void read_file(int dirfd, const char *name, char *buf, size_t n)
{
	int fd = openat(dirfd, name, O_RDONLY);
	ssize_t r;

	assert_true(fd >= 0);
	r = read(fd, buf, n - 1);
	assert_true(r >= 0);
	buf[r] = 0;
	close(fd);
}

static void test_publish(void **state)
{
	struct tb_tmpfile t;
	char err[512], buf[64];
	int dfd = open(tmpdir, O_RDONLY | O_DIRECTORY);
	struct stat st;

	(void)state;
	assert_int_equal(tb_tmp_open(&t, dfd, "out.pb", 0, err, sizeof(err)), 0);
	assert_int_equal(lt_write_all(t.fd, "first", 5), 0);
	assert_int_equal(fstatat(dfd, "out.pb", &st, 0), -1);  /* invisible until published */
	assert_int_equal(tb_tmp_publish(&t, 0, err, sizeof(err)), 0);
	read_file(dfd, "out.pb", buf, sizeof(buf));
	assert_string_equal(buf, "first");

	/* Refused up front when the final name exists... */
	assert_int_equal(tb_tmp_open(&t, dfd, "out.pb", 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "already exists"));
	/* ...and at rename time when it appeared meanwhile. */
	assert_int_equal(tb_tmp_open(&t, dfd, "race.pb", 0, err, sizeof(err)), 0);
	assert_int_equal(lt_write_all(t.fd, "mine", 4), 0);
	{
		int other = openat(dfd, "race.pb", O_CREAT | O_EXCL | O_WRONLY, 0644);

		assert_true(other >= 0);
		assert_int_equal(write(other, "theirs", 6), 6);
		close(other);
	}
	assert_int_equal(tb_tmp_publish(&t, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "appeared meanwhile"));
	read_file(dfd, "race.pb", buf, sizeof(buf));
	assert_string_equal(buf, "theirs");

	/* Overwrite replaces; discard leaves nothing behind. */
	assert_int_equal(tb_tmp_open(&t, dfd, "out.pb", 1, err, sizeof(err)), 0);
	assert_int_equal(lt_write_all(t.fd, "second", 6), 0);
	assert_int_equal(tb_tmp_publish(&t, 1, err, sizeof(err)), 0);
	read_file(dfd, "out.pb", buf, sizeof(buf));
	assert_string_equal(buf, "second");
	assert_int_equal(tb_tmp_open(&t, dfd, "gone.pb", 0, err, sizeof(err)), 0);
	tb_tmp_discard(&t);
	tb_tmp_discard(&t); /* twice is harmless */
	{
		char cmd[400];

		/* deep logs logs2 out.pb race.pb */
		snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 5", tmpdir);
		assert_int_equal(system(cmd), 0);
	}
	assert_int_equal(tb_tmp_open(&t, dfd, "a/b", 0, err, sizeof(err)), -1);
	close(dfd);
}

/* Does this directory's filesystem take O_DIRECT writes? (Decided apart
 * from tb_seq, to tell a refusal it handled from a switch it missed.) */
static int fs_takes_direct(const char *dir)
{
	char path[512];
	void *b = NULL;
	int fd, ok;

	snprintf(path, sizeof(path), "%s/probe", dir);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_DIRECT, 0600);
	if (fd < 0 || posix_memalign(&b, 4096, 4096)) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	memset(b, 'x', 4096);
	ok = write(fd, b, 4096) == 4096;
	free(b);
	close(fd);
	unlink(path);
	return ok;
}

/* Random-sized writes across the switch to O_DIRECT (at an unaligned
 * offset), patches of bytes already on disk and of bytes still staged,
 * an unaligned tail: the file holds exactly what was written, whatever
 * the threshold ("0", "1" MiB, "off"). */
static void seq_roundtrip(const char *after)
{
	char path[512];
	size_t total = 11 << 20, done = 0;
	unsigned char *want = malloc(total), *got = malloc(total);
	uint64_t rng = 7;
	struct tb_seq s;
	int fd, went_direct = 0;

	assert_non_null(want);
	assert_non_null(got);
	setenv("LLMT_DIRECT_AFTER_MB", after, 1);
	snprintf(path, sizeof(path), "%s/seq-%s", tmpdir, after);
	fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
	assert_true(fd >= 0);
	tb_seq_init(&s, fd);
	for (size_t i = 0; i < total; i++)
		want[i] = (unsigned char)(i * 131 + (i >> 12));
	while (done < total) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		size_t n = (size_t)(rng >> 33) % 300000 + 1;

		if (n > total - done)
			n = total - done;
		assert_int_equal(tb_seq_write(&s, want + done, n), 0);
		done += n;
		went_direct |= s.mode == TB_SEQ_DIRECT;
		/* a 5-byte patch somewhere in what was written, and one at the end */
		for (int k = 0; k < 2 && done >= 5; k++) {
			uint64_t at = k ? done - 5 : (rng >> 7) % (done - 5);

			for (int j = 0; j < 5; j++)
				want[at + j] ^= 0x5a;
			assert_int_equal(tb_seq_pwrite(&s, want + at, 5, at), 0);
		}
	}
	assert_true(tb_seq_size(&s) == total);
	assert_int_equal(tb_seq_finish(&s), 0);
	assert_int_equal(fcntl(fd, F_GETFL) & O_DIRECT, 0);
	assert_int_equal(pread(fd, got, total, 0), (ssize_t)total);
	assert_memory_equal(got, want, total);
	if (strcmp(after, "off") && fs_takes_direct(tmpdir))
		assert_true(went_direct);
	if (!strcmp(after, "off"))
		assert_false(went_direct);
	close(fd);
	unlink(path);
	unsetenv("LLMT_DIRECT_AFTER_MB");
	free(want);
	free(got);
}

static void test_seq_write(void **state)
{
	(void)state;
	seq_roundtrip("0");
	seq_roundtrip("1");
	seq_roundtrip("off");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_names),
		cmocka_unit_test(test_run_names),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_mkdir_refuses_symlinks),
		cmocka_unit_test(test_publish),
		cmocka_unit_test(test_seq_write),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
