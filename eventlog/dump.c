// SPDX-License-Identifier: Apache-2.0
/*
 * Text dump of events, one line each, for tests and debugging. The format is
 * stable (scripts grep and awk it):
 *
 *   <type_name> ts=<ns> pid=<pid> tid=<tid> key=value ...
 *
 * - Keys are the struct evlog_event field names of the type, in struct order
 *   (see the list below); every field is printed, even when zero.
 * - Integers are decimal, except addresses and raw arguments, which are
 *   lower-case hex with 0x (syscall arg0..2, lib_call args, symbol addr and
 *   offset, stack frames). Signed fields (ret, code) may be negative.
 * - Strings are printed bare (no quotes) with every byte outside 0x21..0x7e,
 *   and the backslash, written as \xNN; so a value never holds a space and
 *   an empty string prints as "key=".
 * - Lists are comma separated: stack=0x..,0x.. (kernel frames first, leaf
 *   first; n_kernel/n_user tell them apart), frames=f0,f1 (Python frames,
 *   leaf first; a ',' inside a frame is written \x2c), args=0x..,0x..,
 *   grid=x,y,z, block=x,y,z. An empty list prints as "key=".
 * - lost.source prints its name (syscall, cpu, python, cuda_lib, cupti,
 *   proc, pysample, other).
 *
 *   process      ppid name cmdline exe is_exec
 *   process_exit code
 *   thread       name is_new
 *   thread_exit  (none)
 *   syscall      nr dur ret arg0 arg1 arg2
 *   cpu_sample   cpu n_kernel n_user stack
 *   py_enter     func file line
 *   py_exit      func
 *   py_sample    n frames
 *   lib_call     lib_class lib symbol dur ret depth nargs args detail correlation_id
 *   gpu_kernel   dur device context stream correlation_id name grid block
 *                registers static_smem dynamic_smem graph_id
 *   gpu_memcpy   dur device context stream correlation_id bytes copy_kind src_kind dst_kind
 *   gpu_memset   dur device context stream correlation_id bytes value
 *   gpu_api      dur api_class cbid correlation_id ret name
 *   gpu_device   device name uuid sm_count clock_khz memory_bytes memory_bandwidth
 *                cc_major cc_minor max_threads_per_sm max_regs_per_sm max_smem_per_sm
 *   lost         source count
 *   symbol       addr name module offset
 *   marker       name text dur value
 *   clock        realtime_ns
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

static void dump_gpu_common(FILE *out, uint64_t dur, uint32_t dev, uint32_t ctx,
			    uint32_t stream, uint64_t corr)
{
	kv_u(out, "dur", dur);
	kv_u(out, "device", dev);
	kv_u(out, "context", ctx);
	kv_u(out, "stream", stream);
	kv_u(out, "correlation_id", corr);
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

static void dump_lib_call(FILE *out, const struct evlog_event *ev)
{
	const typeof(ev->u.lib_call) *l = &ev->u.lib_call;
	uint32_t n = l->nargs > EVLOG_MAX_ARGS ? EVLOG_MAX_ARGS : l->nargs;
	kv_u(out, "lib_class", l->lib_class);
	kv_s(out, "lib", l->lib);
	kv_s(out, "symbol", l->symbol);
	kv_u(out, "dur", l->dur);
	kv_u(out, "ret", l->ret);
	kv_u(out, "depth", l->depth);
	kv_u(out, "nargs", l->nargs);
	kv_list_x(out, "args", l->args, n);
	kv_s(out, "detail", l->detail);
	kv_u(out, "correlation_id", l->correlation_id);
}

static void dump_gpu_kernel(FILE *out, const struct evlog_event *ev)
{
	const typeof(ev->u.gpu_kernel) *k = &ev->u.gpu_kernel;
	dump_gpu_common(out, k->dur, k->device, k->context, k->stream, k->correlation_id);
	kv_s(out, "name", k->name);
	kv_list_u32(out, "grid", k->grid, 3);
	kv_list_u32(out, "block", k->block, 3);
	kv_u(out, "registers", k->registers);
	kv_u(out, "static_smem", k->static_smem);
	kv_u(out, "dynamic_smem", k->dynamic_smem);
	kv_u(out, "graph_id", k->graph_id);
}

static void dump_gpu_device(FILE *out, const struct evlog_event *ev)
{
	const typeof(ev->u.gpu_device) *d = &ev->u.gpu_device;
	kv_u(out, "device", d->device);
	kv_s(out, "name", d->name);
	kv_s(out, "uuid", d->uuid);
	kv_u(out, "sm_count", d->sm_count);
	kv_u(out, "clock_khz", d->clock_khz);
	kv_u(out, "memory_bytes", d->memory_bytes);
	kv_u(out, "memory_bandwidth", d->memory_bandwidth);
	kv_u(out, "cc_major", d->cc_major);
	kv_u(out, "cc_minor", d->cc_minor);
	kv_u(out, "max_threads_per_sm", d->max_threads_per_sm);
	kv_u(out, "max_regs_per_sm", d->max_regs_per_sm);
	kv_u(out, "max_smem_per_sm", d->max_smem_per_sm);
}

static void dump_fields(FILE *out, const struct evlog_event *ev)
{
	const typeof(ev->u) *u = &ev->u;
	switch (ev->type) {
	case EV_PROCESS:
		kv_u(out, "ppid", u->process.ppid);
		kv_s(out, "name", u->process.name);
		kv_s(out, "cmdline", u->process.cmdline);
		kv_s(out, "exe", u->process.exe);
		kv_u(out, "is_exec", u->process.is_exec);
		break;
	case EV_PROCESS_EXIT: kv_i(out, "code", u->process_exit.code); break;
	case EV_THREAD:
		kv_s(out, "name", u->thread.name);
		kv_u(out, "is_new", u->thread.is_new);
		break;
	case EV_SYSCALL:
		kv_u(out, "nr", u->syscall.nr);
		kv_u(out, "dur", u->syscall.dur);
		kv_i(out, "ret", u->syscall.ret);
		kv_x(out, "arg0", u->syscall.arg0);
		kv_x(out, "arg1", u->syscall.arg1);
		kv_x(out, "arg2", u->syscall.arg2);
		break;
	case EV_CPU_SAMPLE: {
		const struct evlog_stack *s = &u->cpu_sample.stack;
		kv_u(out, "cpu", u->cpu_sample.cpu);
		kv_u(out, "n_kernel", s->n_kernel);
		kv_u(out, "n_user", s->n_user);
		kv_list_x(out, "stack", s->ips, s->n_kernel + s->n_user);
		break;
	}
	case EV_PY_ENTER:
		kv_s(out, "func", u->py_enter.func);
		kv_s(out, "file", u->py_enter.file);
		kv_u(out, "line", u->py_enter.line);
		break;
	case EV_PY_EXIT: kv_s(out, "func", u->py_exit.func); break;
	case EV_PY_SAMPLE: dump_pystack(out, &u->py_sample.stack); break;
	case EV_LIB_CALL: dump_lib_call(out, ev); break;
	case EV_GPU_KERNEL: dump_gpu_kernel(out, ev); break;
	case EV_GPU_MEMCPY: {
		const typeof(u->gpu_memcpy) *m = &u->gpu_memcpy;
		dump_gpu_common(out, m->dur, m->device, m->context, m->stream, m->correlation_id);
		kv_u(out, "bytes", m->bytes);
		kv_u(out, "copy_kind", m->copy_kind);
		kv_u(out, "src_kind", m->src_kind);
		kv_u(out, "dst_kind", m->dst_kind);
		break;
	}
	case EV_GPU_MEMSET: {
		const typeof(u->gpu_memset) *m = &u->gpu_memset;
		dump_gpu_common(out, m->dur, m->device, m->context, m->stream, m->correlation_id);
		kv_u(out, "bytes", m->bytes);
		kv_u(out, "value", m->value);
		break;
	}
	case EV_GPU_API:
		kv_u(out, "dur", u->gpu_api.dur);
		kv_u(out, "api_class", u->gpu_api.api_class);
		kv_u(out, "cbid", u->gpu_api.cbid);
		kv_u(out, "correlation_id", u->gpu_api.correlation_id);
		kv_i(out, "ret", u->gpu_api.ret);
		kv_s(out, "name", u->gpu_api.name);
		break;
	case EV_GPU_DEVICE: dump_gpu_device(out, ev); break;
	case EV_LOST:
		fprintf(out, " source=%s", evlog_source_name(u->lost.source));
		kv_u(out, "count", u->lost.count);
		break;
	case EV_SYMBOL:
		kv_x(out, "addr", u->symbol.addr);
		kv_s(out, "name", u->symbol.name);
		kv_s(out, "module", u->symbol.module);
		kv_x(out, "offset", u->symbol.offset);
		break;
	case EV_MARKER:
		kv_s(out, "name", u->marker.name);
		kv_s(out, "text", u->marker.text);
		kv_u(out, "dur", u->marker.dur);
		kv_u(out, "value", u->marker.value);
		break;
	case EV_CLOCK: kv_u(out, "realtime_ns", u->clock.realtime_ns); break;
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
	if (evlog_session_set(h->session)) { /* logs before 1.2 have none: their dump is as it was */
		char hex[EVLOG_SESSION_HEX];
		fprintf(out, "# session=%s\n", evlog_session_hex(h->session, hex));
	}
	return ferror(out) ? -EVLOG_EIO : 0;
}
