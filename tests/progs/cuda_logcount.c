// SPDX-License-Identifier: Apache-2.0
/*
 * cuda_logcount: read an event log and report its library calls, for the
 * -t cuda tests (built static so it runs on hosts without our libraries).
 *
 *   cuda_logcount LOG [--from NS] [--to NS] [--dump]
 *
 * Prints one "count SYMBOL DEPTH N" line per (symbol, depth), then
 * "total N"; --dump also prints every call:
 *   call PID TID TS DUR RET DEPTH CLASS SYMBOL LIB nargs=N a0,a1,... | DECODED | DETAIL
 * DECODED: the typed fields that are not 0 or empty, in schema order:
 * kernel=NAME func=0xH grid=X,Y,Z block=X,Y,Z smem=N stream=0xH bytes=N
 * kind=K (CUpti_ActivityMemcpyKind).
 * --from/--to keep calls that start within [from, to] (CLOCK_MONOTONIC ns).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eventlog/eventlog.h"

#define MAX_KEYS 4096

struct key {
	char sym[128];
	uint32_t depth;
	uint64_t n;
};

static struct key keys[MAX_KEYS];
static size_t n_keys;

static void count(const struct evlog_str *sym, uint32_t depth)
{
	char name[128];
	size_t i;

	snprintf(name, sizeof(name), "%.*s", (int)sym->len, sym->ptr);
	for (i = 0; i < n_keys; i++)
		if (keys[i].depth == depth && !strcmp(keys[i].sym, name)) {
			keys[i].n++;
			return;
		}
	if (n_keys == MAX_KEYS)
		return;
	snprintf(keys[n_keys].sym, sizeof(keys[0].sym), "%s", name);
	keys[n_keys].depth = depth;
	keys[n_keys++].n = 1;
}

static void dump(const struct evlog_event *ev)
{
	const typeof(ev->u.lib_call) *c = &ev->u.lib_call;
	uint32_t i;

	printf("call %u %u %" PRIu64 " %" PRIu64 " %" PRId64 " %u %u %.*s %.*s nargs=%u ", ev->pid,
	       ev->tid, ev->ts, c->dur, (int64_t)c->ret, c->depth, c->lib_class, (int)c->symbol.len,
	       c->symbol.ptr, (int)c->lib.len, c->lib.ptr, c->nargs);
	for (i = 0; i < c->nargs && i < EVLOG_MAX_ARGS; i++)
		printf("%s%" PRIu64, i ? "," : "", c->args[i]);
	printf(" |");
	if (c->kernel.len)
		printf(" kernel=%.*s", (int)c->kernel.len, c->kernel.ptr);
	if (c->func)
		printf(" func=0x%" PRIx64, c->func);
	if (c->grid[0] || c->grid[1] || c->grid[2] || c->block[0] || c->block[1] || c->block[2])
		printf(" grid=%u,%u,%u block=%u,%u,%u", c->grid[0], c->grid[1], c->grid[2],
		       c->block[0], c->block[1], c->block[2]);
	if (c->dynamic_smem)
		printf(" smem=%" PRIu64, c->dynamic_smem);
	if (c->stream)
		printf(" stream=0x%" PRIx64, c->stream);
	if (c->bytes)
		printf(" bytes=%" PRIu64, c->bytes);
	if (c->copy_kind)
		printf(" kind=%u", c->copy_kind);
	printf(" | %.*s\n", (int)c->detail.len, c->detail.ptr);
}

int main(int argc, char **argv)
{
	uint64_t from = 0, to = UINT64_MAX, total = 0;
	const struct evlog_event *ev;
	struct evlog_reader *r;
	char msg[512];
	int i, rc, do_dump = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: cuda_logcount LOG [--from NS] [--to NS] [--dump]\n");
		return 2;
	}
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--dump"))
			do_dump = 1;
		else if (!strcmp(argv[i], "--from") && i + 1 < argc)
			from = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--to") && i + 1 < argc)
			to = strtoull(argv[++i], NULL, 10);
	}
	if (evlog_reader_open(&r, argv[1], msg, sizeof(msg))) {
		fprintf(stderr, "cuda_logcount: %s\n", msg);
		return 1;
	}
	while ((rc = evlog_next(r, &ev)) == 0) {
		if (ev->type != EV_LIB_CALL || ev->ts < from || ev->ts > to)
			continue;
		total++;
		count(&ev->u.lib_call.symbol, ev->u.lib_call.depth);
		if (do_dump)
			dump(ev);
	}
	evlog_reader_close(r);
	for (size_t k = 0; k < n_keys; k++)
		printf("count %s %u %" PRIu64 "\n", keys[k].sym, keys[k].depth, keys[k].n);
	printf("total %" PRIu64 "\n", total);
	return rc == -EVLOG_END ? 0 : 1;
}
