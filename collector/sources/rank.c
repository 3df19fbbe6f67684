// SPDX-License-Identifier: Apache-2.0
/*
 * Ranks from the environment (rank.h). /proc/PID/environ is procfs on the
 * node (tfile.h: opened non-blocking, never a target's file) and is read in
 * fixed pieces up to LT_RANK_ENV_MAX bytes; only short KEY=VALUE entries are
 * kept while scanning, so memory does not grow with the environment.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rank.h"
#include "collector/target/tfile.h"

#define ENTRY_MAX 64   /* longer entries are not ours: skipped */

enum { F_RANK, F_LOCAL, F_SIZE };

/* In order of trust within each field: the first one set wins. */
static const struct key {
	const char *name;
	int field;
} keys[] = {
	{ "RANK", F_RANK },
	{ "OMPI_COMM_WORLD_RANK", F_RANK },
	{ "PMI_RANK", F_RANK },
	{ "SLURM_PROCID", F_RANK },
	{ "LOCAL_RANK", F_LOCAL },
	{ "OMPI_COMM_WORLD_LOCAL_RANK", F_LOCAL },
	{ "MPI_LOCALRANKID", F_LOCAL },
	{ "SLURM_LOCALID", F_LOCAL },
	{ "WORLD_SIZE", F_SIZE },
	{ "OMPI_COMM_WORLD_SIZE", F_SIZE },
	{ "PMI_SIZE", F_SIZE },
	{ "SLURM_NTASKS", F_SIZE },
};
#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

static int64_t number(const char *s, size_t n)
{
	int64_t v = 0;

	if (!n || n > 10)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v < (1ll << 31) ? v : -1;
}

/* One entry; best[k]: the key index that set field k so far (N_KEYS: none). */
static void entry(const char *e, size_t n, struct lt_rank *r, size_t best[3])
{
	const char *eq = memchr(e, '=', n);

	if (!eq)
		return;
	size_t kl = (size_t)(eq - e);

	for (size_t k = 0; k < N_KEYS; k++) {
		int f = keys[k].field;
		int64_t v;

		if (strlen(keys[k].name) != kl || memcmp(keys[k].name, e, kl) || k >= best[f])
			continue;
		if ((v = number(eq + 1, n - kl - 1)) < 0)
			return;
		best[f] = k;
		if (f == F_RANK) {
			r->rank = v;
			snprintf(r->source, sizeof(r->source), "%s", keys[k].name);
		} else if (f == F_LOCAL) {
			r->local_rank = v;
		} else {
			r->world_size = v;
		}
		return;
	}
}

static void rank_init(struct lt_rank *r)
{
	r->rank = r->local_rank = r->world_size = -1;
	r->source[0] = 0;
}

int lt_rank_read(const char *proc, int pid, struct lt_rank *r)
{
	char buf[16384], cur[ENTRY_MAX + 1];
	size_t best[3] = { N_KEYS, N_KEYS, N_KEYS }, have = 0, total = 0;
	int fd = lt_tf_environ_open(proc, pid), skip = 0;
	ssize_t got;

	rank_init(r);
	if (fd < 0)
		return fd;
	/* Entries may straddle reads: the current one is kept in cur unless it
	 * is too long to be ours. */
	while (total < LT_RANK_ENV_MAX &&
	       (got = read(fd, buf, sizeof(buf) < LT_RANK_ENV_MAX - total ? sizeof(buf)
									  : LT_RANK_ENV_MAX - total)) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;

			close(fd);
			return e;
		}
		total += (size_t)got;
		for (ssize_t i = 0; i < got; i++) {
			if (!buf[i]) {
				if (!skip)
					entry(cur, have, r, best);
				have = 0;
				skip = 0;
			} else if (!skip && have < ENTRY_MAX) {
				cur[have++] = buf[i];
			} else {
				skip = 1;
			}
		}
	}
	if (!skip && have && total < LT_RANK_ENV_MAX) /* a last entry without its NUL */
		entry(cur, have, r, best);
	close(fd);
	return r->rank >= 0 || r->local_rank >= 0 || r->world_size >= 0;
}

void lt_rank_emit(struct lt_session *s, uint64_t ts, int pid)
{
	struct evlog_event ev = { .type = EV_RANK, .ts = ts, .pid = (uint32_t)pid,
				  .tid = (uint32_t)pid };
	struct lt_rank r;

	if (!s->log || lt_rank_read(LT_TF_PROC, pid, &r) <= 0)
		return;
	ev.u.rank.rank = r.rank;
	ev.u.rank.local_rank = r.local_rank;
	ev.u.rank.world_size = r.world_size;
	ev.u.rank.source = evlog_s(r.source);
	evlog_writer_flush(s->log);
	lt_session_emit(s, &ev);
	evlog_writer_flush(s->log);
}
