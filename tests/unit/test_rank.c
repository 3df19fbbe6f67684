// SPDX-License-Identifier: Apache-2.0
/* Ranks from a process's environment (collector/sources/rank.h), read from a proc
 * tree made here: which variable wins, values that are no rank, entries
 * longer than any of ours, entries across the reader's pieces, the bound
 * on bytes read, a process without an environ file. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "collector/sources/rank.h"
#include "unit/unit_util.h"

static char root[PATH_MAX];

/* PID's environ: n bytes of env (NULs inside). */
static void environ_of(int pid, const char *env, size_t n)
{
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/%d", root, pid);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/%d/environ", root, pid);
	FILE *f = fopen(p, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(env, 1, n, f), n);
	fclose(f);
}

#define ENV(pid, lit) environ_of(pid, lit, sizeof(lit) - 1)

static int setup(void **state)
{
	(void)state;
	return ut_mkdtemp(root, sizeof(root), "rank");
}

static int teardown(void **state)
{
	(void)state;
	return ut_rmtree(root);
}

static void torchrun(void **state)
{
	struct lt_rank r;

	(void)state;
	ENV(1, "PATH=/bin\0SLURM_PROCID=7\0RANK=3\0LOCAL_RANK=1\0WORLD_SIZE=8\0HOME=/root\0");
	assert_int_equal(lt_rank_read(root, 1, &r), 1);
	assert_int_equal(r.rank, 3);
	assert_int_equal(r.local_rank, 1);
	assert_int_equal(r.world_size, 8);
	assert_string_equal(r.source, "RANK");
}

static void launchers(void **state)
{
	struct lt_rank r;

	(void)state;
	ENV(2, "OMPI_COMM_WORLD_SIZE=4\0OMPI_COMM_WORLD_LOCAL_RANK=2\0PMI_RANK=9\0OMPI_COMM_WORLD_RANK=2\0");
	assert_int_equal(lt_rank_read(root, 2, &r), 1);
	assert_int_equal(r.rank, 2);
	assert_string_equal(r.source, "OMPI_COMM_WORLD_RANK");
	assert_int_equal(r.local_rank, 2);
	assert_int_equal(r.world_size, 4);
	ENV(3, "SLURM_NTASKS=16\0SLURM_LOCALID=0\0SLURM_PROCID=12"); /* no final NUL */
	assert_int_equal(lt_rank_read(root, 3, &r), 1);
	assert_int_equal(r.rank, 12);
	assert_string_equal(r.source, "SLURM_PROCID");
	assert_int_equal(r.world_size, 16);
}

static void not_ranks(void **state)
{
	struct lt_rank r;

	(void)state;
	/* a bad RANK leaves the next variable its turn; a prefix is not the key */
	ENV(4, "RANK=x1\0RANKS=5\0XRANK=6\0PMI_RANK=-1\0SLURM_PROCID=99999999999\0LOCAL_RANK=0\0");
	assert_int_equal(lt_rank_read(root, 4, &r), 1);
	assert_int_equal(r.rank, -1);
	assert_string_equal(r.source, "");
	assert_int_equal(r.local_rank, 0);
	ENV(5, "PATH=/bin\0HOME=/\0");
	assert_int_equal(lt_rank_read(root, 5, &r), 0);
	assert_true(lt_rank_read(root, 6, &r) < 0); /* no such process */
}

/* An entry of n bytes of c at env + *o, and its NUL. */
static void fill(char *env, size_t *o, const char *head, char c, size_t n)
{
	size_t hl = strlen(head);

	memcpy(env + *o, head, hl);
	memset(env + *o + hl, c, n - hl);
	*o += n;
	env[(*o)++] = 0;
}

/* Long entries are skipped whole, entries across the reader's 16 KiB
 * pieces are read, and nothing past LT_RANK_ENV_MAX is. */
static void bounds(void **state)
{
	size_t n = LT_RANK_ENV_MAX + 4096, o = 0;
	char *env = malloc(n);
	struct lt_rank r;

	(void)state;
	assert_non_null(env);
	fill(env, &o, "X=", 'a', 16379);              /* the next entry starts at 16380 */
	fill(env, &o, "RANK=42", 0, 7);               /* across 16384 */
	fill(env, &o, "LOCAL_RANK=5", 'b', 100);      /* too long to be a value of ours */
	while (o + 200 < LT_RANK_ENV_MAX)
		fill(env, &o, "PAD=", 'p', 60);
	fill(env, &o, "Y=", 'c', LT_RANK_ENV_MAX - o - 1); /* ends at the bound */
	fill(env, &o, "WORLD_SIZE=2", 0, 12);         /* past it: unseen */
	environ_of(7, env, o);
	assert_int_equal(lt_rank_read(root, 7, &r), 1);
	assert_int_equal(r.rank, 42);
	assert_int_equal(r.local_rank, -1);
	assert_int_equal(r.world_size, -1);
	free(env);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(torchrun),
		cmocka_unit_test(launchers),
		cmocka_unit_test(not_ranks),
		cmocka_unit_test(bounds),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
