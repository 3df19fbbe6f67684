/* SPDX-License-Identifier: Apache-2.0 */
/* Display names: system calls, library categories, C++ demangling, folded
 * stacks (CUDA's copy, memory and synchronization kinds: cudacorr.c). */
#include "converter/conv_int.h"

#include <stdlib.h>
#include <string.h>

#include "syscall_names.h"

/* libstdc++'s demangler (the C ABI entry point). */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

const char *cv_syscall_name(int table, uint32_t nr, char *buf, size_t bufsz)
{
	if (table && nr < LT_SYSCALL_NAMES_MAX && lt_syscall_names[nr])
		return lt_syscall_names[nr];
	snprintf(buf, bufsz, "syscall_%u", nr);
	return buf;
}

/* "/usr/lib/libnccl.so.2" -> "nccl". */
static const char *lib_stem(const char *lib, char *buf, size_t bufsz)
{
	const char *b = strrchr(lib, '/');
	size_t n;

	b = b ? b + 1 : lib;
	if (!strncmp(b, "lib", 3))
		b += 3;
	n = strcspn(b, ".");
	if (!n || n >= bufsz)
		return NULL;
	/* a category is a plain word: the trace writes it unescaped */
	for (size_t i = 0; i < n; i++) {
		char c = b[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			 c == '_' || c == '-' || c == '+';
		buf[i] = ok ? c : '_';
	}
	buf[n] = 0;
	return buf;
}

const char *cv_lib_category(uint8_t lib_class, const char *lib, char *buf, size_t bufsz)
{
	switch (lib_class) {
	case EVLIB_CUDA_RUNTIME: return "cuda_runtime";
	case EVLIB_CUDA_DRIVER: return "cuda_driver";
	case EVLIB_NCCL: return "nccl";
	case EVLIB_CUBLAS: return "cublas";
	case EVLIB_CUDNN: return "cudnn";
	default: {
		const char *s = lib ? lib_stem(lib, buf, bufsz) : NULL;

		return s ? s : "library";
	}
	}
}

const char *cv_demangle(struct cv_core *c, const char *name, size_t len)
{
	if (len < 2 || name[0] != '_' || name[1] != 'Z')
		return NULL;
	uint64_t h = lt_hash_bytes(name, len);
	uint64_t *v = cv_map_get(&c->demangle_cache, h, len);

	/* The value holds the mangled name too: a (hash, length) clash of two
	 * names is told apart, and only costs a demangle. */
	if (v && !memcmp(cv_strtab_get(&c->names, (uint32_t)(*v >> 32)), name, len))
		return cv_strtab_get(&c->names, (uint32_t)*v);
	char *copy = strndup(name, len), *d = NULL;
	int status = -1;

	if (copy)
		d = __cxa_demangle(copy, NULL, NULL, &status);
	free(copy);
	const char *out = status == 0 && d ? d : NULL;
	int64_t idx = out ? cv_strtab_intern(&c->names, out, strlen(out)) : -1;
	int64_t midx = idx >= 0 ? cv_strtab_intern(&c->names, name, len) : -1;

	free(d);
	if (idx < 0 || midx < 0)
		return NULL;
	if (!v)
		v = cv_map_put(&c->demangle_cache, h, len, NULL);
	if (v && !*v)
		*v = (uint64_t)midx << 32 | (uint64_t)idx;
	return cv_strtab_get(&c->names, (uint32_t)idx);
}

/* Append one frame, keeping the folded format intact (';' separates frames,
 * a newline ends a stack). */
static int put_frame(struct cv_buf *out, const char *s, size_t n)
{
	if (out->len && cv_buf_putc(out, ';'))
		return -1;
	if (cv_buf_reserve(out, n))
		return -1;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];

		out->p[out->len++] = ch == ';' ? ':' : (ch == '\n' || ch == '\r') ? ' ' : ch;
	}
	return 0;
}

static int put_native(struct cv_buf *out, const struct cv_host *h, uint32_t pid, uint64_t ip,
		      int kernel)
{
	const struct cv_sym *s = cv_sym_find(h, kernel ? 0 : pid, ip);
	char tmp[512];
	int n;

	if (!s && kernel)
		s = cv_sym_find(h, pid, ip);
	if (s && *s->name)
		n = snprintf(tmp, sizeof(tmp), "%s%s", s->name, kernel ? "_[k]" : "");
	else if (s && *s->module) {
		const char *b = strrchr(s->module, '/');

		n = snprintf(tmp, sizeof(tmp), "%s+0x%llx%s", b ? b + 1 : s->module,
			     (unsigned long long)s->offset, kernel ? "_[k]" : "");
	} else {
		n = snprintf(tmp, sizeof(tmp), "0x%llx%s", (unsigned long long)ip,
			     kernel ? "_[k]" : "");
	}
	if (s && *s->name && (size_t)n >= sizeof(tmp)) /* long C++ names: no truncation */
		return put_frame(out, s->name, strlen(s->name));
	return put_frame(out, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

int cv_fold_cpu(const struct cv_host *h, uint32_t pid, const struct evlog_stack *st,
		struct cv_buf *out)
{
	uint32_t nk = st->n_kernel, nu = st->n_user;

	out->len = 0;
	if ((uint64_t)nk + nu > EVLOG_MAX_FRAMES || (nk + nu && !st->ips))
		return put_frame(out, "[bad stack]", 11);
	for (uint32_t i = nu; i-- > 0;)
		if (put_native(out, h, pid, st->ips[nk + i], 0))
			return -1;
	for (uint32_t i = nk; i-- > 0;)
		if (put_native(out, h, pid, st->ips[i], 1))
			return -1;
	if (!out->len)
		return put_frame(out, "[no frames]", 11);
	return 0;
}

int cv_fold_py(const struct evlog_pystack *st, struct cv_buf *out)
{
	out->len = 0;
	if (st->n > EVLOG_MAX_FRAMES || (st->n && !st->frames))
		return put_frame(out, "[bad stack]", 11);
	for (uint32_t i = st->n; i-- > 0;) {
		const struct evlog_str *f = &st->frames[i];

		if (put_frame(out, f->len ? f->ptr : "?", f->len ? f->len : 1))
			return -1;
	}
	if (!out->len)
		return put_frame(out, "[no frames]", 11);
	return 0;
}
