// SPDX-License-Identifier: Apache-2.0
/*
 * Text dump of events, one line each, for tests and debugging. The format is
 * stable (scripts grep and awk it):
 *
 *   <type_name> ts=<ns> pid=<pid> tid=<tid> key=value ...
 *
 * - Keys are the struct evlog_event field names of the type, in the order
 *   of evlog_schema.h (EVLOG_FIELDS_<type>); every field is printed, even
 *   when zero.
 * - Integers are decimal, except X64 fields (addresses, handles and raw
 *   arguments: syscall arg0..2, symbol addr and offset, lib_call func and
 *   stream) and lists of addresses (stack frames, lib_call args), which are
 *   lower-case hex with 0x. Signed fields
 *   (I64: ret, code) may be negative.
 * - Strings are printed bare (no quotes) with every byte outside 0x21..0x7e,
 *   and the backslash, written as \xNN; so a value never holds a space and
 *   an empty string prints as "key=".
 * - A native stack prints as n_kernel=, n_user=, then stack=0x..,0x..
 *   (kernel frames first, leaf first); a Python stack as n=, then
 *   frames=f0,f1 (leaf first; a ',' inside a frame is written \x2c); an
 *   argument list as nargs=, then args=0x..,0x..; a U32X3 as x,y,z (grid=,
 *   block=). An empty list prints as "key=".
 * - SRC fields (lost.source) print the source's name (syscall, cpu, python,
 *   cuda_lib, cupti, proc, pysample, other).
 *
 * Header lines (evlog_dump_header): "# version=M.m", then host, boot_id,
 * machine, producer, cmdline, options, mono_ns, realtime_ns, producer_pid,
 * each as "# key=value".
 */
#include "eventlog/eventlog.h"

#include <inttypes.h>

static void dump_bytes(FILE *out, struct evlog_str s, int extra)
{
	static const char hex[] = "0123456789abcdef";
	for (uint32_t i = 0; i < s.len; i++) {
		unsigned char c = (unsigned char)s.ptr[i];
		if (c > 0x20 && c < 0x7f && c != '\\' && c != extra) {
			putc(c, out);
		} else {
			putc('\\', out);
			putc('x', out);
			putc(hex[c >> 4], out);
			putc(hex[c & 15], out);
		}
	}
}

void evlog_dump_str(FILE *out, struct evlog_str s)
{
	dump_bytes(out, s, -1);
}

static void kv_s(FILE *out, const char *k, struct evlog_str s)
{
	fprintf(out, " %s=", k);
	dump_bytes(out, s, -1);
}

static void kv_u(FILE *out, const char *k, uint64_t v)
{
	fprintf(out, " %s=%" PRIu64, k, v);
}

static void kv_i(FILE *out, const char *k, int64_t v)
{
	fprintf(out, " %s=%" PRId64, k, v);
}

static void kv_x(FILE *out, const char *k, uint64_t v)
{
	fprintf(out, " %s=0x%" PRIx64, k, v);
}

static void kv_list_u32(FILE *out, const char *k, const uint32_t *v, int n)
{
	fprintf(out, " %s=", k);
	for (int i = 0; i < n; i++)
		fprintf(out, "%s%" PRIu32, i ? "," : "", v[i]);
}

static void kv_list_x(FILE *out, const char *k, const uint64_t *v, uint32_t n)
{
	fprintf(out, " %s=", k);
	for (uint32_t i = 0; i < n; i++)
		fprintf(out, "%s0x%" PRIx64, i ? "," : "", v[i]);
}

static void dump_stack(FILE *out, const char *k, const struct evlog_stack *s)
{
	kv_u(out, "n_kernel", s->n_kernel);
	kv_u(out, "n_user", s->n_user);
	kv_list_x(out, k, s->ips, s->n_kernel + s->n_user);
}

static void dump_pystack(FILE *out, const struct evlog_pystack *s)
{
	kv_u(out, "n", s->n);
	fputs(" frames=", out);
	for (uint32_t i = 0; i < s->n; i++) {
		if (i)
			putc(',', out);
		dump_bytes(out, s->frames[i], ',');
	}
}

static void dump_args(FILE *out, const char *nk, const char *k, uint32_t nargs,
		      const uint64_t *args)
{
	kv_u(out, nk, nargs);
	kv_list_x(out, k, args, nargs > EVLOG_MAX_ARGS ? EVLOG_MAX_ARGS : nargs);
}

/* Each field kind's printing (evlog_schema.h). */
#define DUMP_U8(m, f) kv_u(out, #f, u->m.f);
#define DUMP_U32(m, f) kv_u(out, #f, u->m.f);
#define DUMP_U64(m, f) kv_u(out, #f, u->m.f);
#define DUMP_CORR(m, f) kv_u(out, #f, u->m.f);
#define DUMP_X64(m, f) kv_x(out, #f, u->m.f);
#define DUMP_I64(m, f) kv_i(out, #f, u->m.f);
#define DUMP_SRC(m, f) fprintf(out, " " #f "=%s", evlog_source_name(u->m.f));
#define DUMP_STR(m, f) kv_s(out, #f, u->m.f);
#define DUMP_STACK(m, f) dump_stack(out, #f, &u->m.f);
#define DUMP_PYSTACK(m, f) dump_pystack(out, &u->m.f);
#define DUMP_U32X3(m, f) kv_list_u32(out, #f, u->m.f, 3);
#define DUMP_ARGS(m, f) dump_args(out, "n" #f, #f, u->m.n##f, u->m.f);
#define DUMP_FIELD(m, kind, f) DUMP_##kind(m, f)
#define DUMP_TYPE(N, num, m, track, dur, corr) case EV_##N: EVLOG_FIELDS_##m(DUMP_FIELD, m) break;

static void dump_fields(FILE *out, const struct evlog_event *ev)
{
	const typeof(ev->u) *u = &ev->u;
	switch (ev->type) {
	EVLOG_TYPES(DUMP_TYPE)
	default: break;
	}
}

int evlog_dump_event(FILE *out, const struct evlog_event *ev)
{
	if (!out || !ev)
		return -EVLOG_EINVAL;
	const char *tn = evlog_type_name(ev->type);
	if (tn)
		fputs(tn, out);
	else
		fprintf(out, "type%u", ev->type);
	fprintf(out, " ts=%" PRIu64 " pid=%" PRIu32 " tid=%" PRIu32, ev->ts, ev->pid, ev->tid);
	dump_fields(out, ev);
	putc('\n', out);
	return ferror(out) ? -EVLOG_EIO : 0;
}

int evlog_dump_header(FILE *out, const struct evlog_header *h)
{
	if (!out || !h)
		return -EVLOG_EINVAL;
	fprintf(out, "# version=%u.%u\n", h->version_major, h->version_minor);
	const struct evlog_str *s[6] = { &h->host, &h->boot_id, &h->machine,
					 &h->producer, &h->cmdline, &h->options };
	static const char *const k[6] = { "host", "boot_id", "machine",
					  "producer", "cmdline", "options" };
	for (int i = 0; i < 6; i++) {
		fprintf(out, "# %s=", k[i]);
		dump_bytes(out, *s[i], -1);
		putc('\n', out);
	}
	fprintf(out, "# mono_ns=%" PRIu64 "\n# realtime_ns=%" PRIu64 "\n# producer_pid=%" PRIu32 "\n",
		h->mono_ns, h->realtime_ns, h->producer_pid);
	if (evlog_session_set(h->session)) { /* test logs have none */
		char hex[EVLOG_SESSION_HEX];
		fprintf(out, "# session=%s\n", evlog_session_hex(h->session, hex));
	}
	return ferror(out) ? -EVLOG_EIO : 0;
}
