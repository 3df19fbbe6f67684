/* SPDX-License-Identifier: Apache-2.0 */
#include "converter/cv_util.h"
#include "eventlog/evlog_format.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ arena */
struct cv_arena_blk {
	struct cv_arena_blk *next;
	size_t used, cap;
	char data[];
};

#define ARENA_BLK (256u << 10)

void *cv_arena_alloc(struct cv_arena *a, size_t n)
{
	struct cv_arena_blk *b = a->head;

	n = (n + 7) & ~(size_t)7;
	if (!b || b->cap - b->used < n) {
		size_t cap = n > ARENA_BLK ? n : ARENA_BLK;

		b = malloc(sizeof(*b) + cap);
		if (!b)
			return NULL;
		b->used = 0;
		b->cap = cap;
		b->next = a->head;
		a->head = b;
	}
	void *p = b->data + b->used;

	b->used += n;
	a->used_total += n;
	return p;
}

char *cv_arena_strndup(struct cv_arena *a, const char *s, size_t len)
{
	char *p = cv_arena_alloc(a, len + 1);

	if (!p)
		return NULL;
	if (len)
		memcpy(p, s, len);
	p[len] = 0;
	return p;
}

void cv_arena_free(struct cv_arena *a)
{
	while (a->head) {
		struct cv_arena_blk *n = a->head->next;

		free(a->head);
		a->head = n;
	}
	a->used_total = 0;
}

/* ---------------------------------------------------------------- hash map */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static inline size_t slot_of(const struct cv_map *m, uint64_t a, uint64_t b)
{
	return (size_t)(mix64(a ^ mix64(b + 0x9e3779b97f4a7c15ULL)) & (m->cap - 1));
}

uint64_t *cv_map_get(const struct cv_map *m, uint64_t a, uint64_t b)
{
	if (!m->cap)
		return NULL;
	for (size_t i = slot_of(m, a, b);; i = (i + 1) & (m->cap - 1)) {
		struct cv_map_ent *e = &m->ents[i];

		if (!e->used)
			return NULL;
		if (e->a == a && e->b == b)
			return &e->val;
	}
}

static int map_grow(struct cv_map *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64;
	struct cv_map nm = { calloc(ncap, sizeof(struct cv_map_ent)), ncap, 0 };

	if (!nm.ents)
		return -1;
	for (size_t i = 0; i < m->cap; i++) {
		struct cv_map_ent *e = &m->ents[i];

		if (!e->used)
			continue;
		size_t j = slot_of(&nm, e->a, e->b);

		while (nm.ents[j].used)
			j = (j + 1) & (ncap - 1);
		nm.ents[j] = *e;
		nm.n++;
	}
	free(m->ents);
	*m = nm;
	return 0;
}

uint64_t *cv_map_put(struct cv_map *m, uint64_t a, uint64_t b, int *is_new)
{
	if ((m->n + 1) * 4 > m->cap * 3 && map_grow(m)) /* at most 3/4 full */
		return NULL;
	for (size_t i = slot_of(m, a, b);; i = (i + 1) & (m->cap - 1)) {
		struct cv_map_ent *e = &m->ents[i];

		if (!e->used) {
			e->used = 1;
			e->a = a;
			e->b = b;
			e->val = 0;
			m->n++;
			if (is_new)
				*is_new = 1;
			return &e->val;
		}
		if (e->a == a && e->b == b) {
			if (is_new)
				*is_new = 0;
			return &e->val;
		}
	}
}

void cv_map_free(struct cv_map *m)
{
	free(m->ents);
	m->ents = NULL;
	m->cap = m->n = 0;
}

/* -------------------------------------------------------- string interning */
uint64_t cv_hash_bytes(const void *p, size_t len)
{
	/* FNV-1a over 8-byte words, finished with a strong mixer. */
	const unsigned char *s = p;
	uint64_t h = 0xcbf29ce484222325ULL ^ len;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t w;

		memcpy(&w, s + i, 8);
		h = (h ^ w) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	for (; i < len; i++)
		h = (h ^ s[i]) * 0x100000001b3ULL;
	return mix64(h);
}

int64_t cv_strtab_intern(struct cv_strtab *t, const char *s, size_t len)
{
	uint64_t h = cv_hash_bytes(s, len);

	/* Equal hashes of different strings chain on the second key. */
	for (uint64_t k = 0;; k++) {
		int is_new;
		uint64_t *v = cv_map_put(&t->map, h, (uint64_t)len | (k << 32), &is_new);

		if (!v)
			return -1;
		if (!is_new) {
			uint32_t idx = (uint32_t)(*v - 1);

			if (t->lens[idx] == len && memcmp(t->strs[idx], s, len) == 0)
				return idx;
			continue;
		}
		if (t->n == t->cap) {
			size_t nc = t->cap ? t->cap * 2 : 256;
			const char **ns = realloc(t->strs, nc * sizeof(*ns));

			if (!ns)
				return -1;
			t->strs = ns;
			uint32_t *nl = realloc(t->lens, nc * sizeof(*nl));

			if (!nl)
				return -1;
			t->lens = nl;
			t->cap = nc;
		}
		char *copy = cv_arena_strndup(&t->arena, s, len);

		if (!copy)
			return -1;
		t->strs[t->n] = copy;
		t->lens[t->n] = (uint32_t)len;
		*v = ++t->n;
		return (int64_t)(t->n - 1);
	}
}

void cv_strtab_free(struct cv_strtab *t)
{
	cv_map_free(&t->map);
	cv_arena_free(&t->arena);
	free(t->strs);
	free(t->lens);
	memset(t, 0, sizeof(*t));
}

/* --------------------------------------------------------- growable buffer */
int cv_buf_reserve(struct cv_buf *b, size_t extra)
{
	return lt_grow((void **)&b->p, &b->cap, b->len + extra, 1, 256);
}

int cv_buf_append(struct cv_buf *b, const void *p, size_t n)
{
	if (cv_buf_reserve(b, n))
		return -1;
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

int cv_buf_printf(struct cv_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || cv_buf_reserve(b, (size_t)n + 1))
		return -1;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

int cv_buf_cstr(struct cv_buf *b)
{
	if (cv_buf_reserve(b, 1))
		return -1;
	b->p[b->len] = 0;
	return 0;
}

void cv_buf_free(struct cv_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}
