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
static inline int64_t map_find(const struct cv_map *m, struct lt_hmap_pos *p, uint64_t a,
			       uint64_t b)
{
	uint32_t i;

	*p = lt_hmap_probe(&m->ix, lt_hash_pair(a, b));
	while (lt_hmap_next(&m->ix, p, &i))
		if (m->ents[i].a == a && m->ents[i].b == b)
			return i;
	return -1;
}

uint64_t *cv_map_get(const struct cv_map *m, uint64_t a, uint64_t b)
{
	struct lt_hmap_pos p;
	int64_t i = map_find(m, &p, a, b);

	return i < 0 ? NULL : &m->ents[i].val;
}

uint64_t *cv_map_put(struct cv_map *m, uint64_t a, uint64_t b, int *is_new)
{
	struct lt_hmap_pos p;
	int64_t i = map_find(m, &p, a, b);

	if (is_new)
		*is_new = i < 0;
	if (i >= 0)
		return &m->ents[i].val;
	if (lt_grow((void **)&m->ents, &m->cap, m->n + 1, sizeof(*m->ents), 16) ||
	    lt_hmap_add(&m->ix, &p, (uint32_t)m->n))
		return NULL;
	m->ents[m->n] = (struct cv_map_ent){ a, b, 0 };
	return &m->ents[m->n++].val;
}

void cv_map_free(struct cv_map *m)
{
	lt_hmap_free(&m->ix);
	free(m->ents);
	m->ents = NULL;
	m->n = m->cap = 0;
}

/* -------------------------------------------------------- string interning */
int64_t cv_strtab_intern(struct cv_strtab *t, const char *s, size_t len)
{
	struct lt_hmap_pos p = lt_hmap_probe(&t->ix, lt_hash_bytes(s, len));
	uint32_t i;

	while (lt_hmap_next(&t->ix, &p, &i))
		if (t->lens[i] == len && memcmp(t->strs[i], s, len) == 0)
			return i;
	if (len > UINT32_MAX)
		return -1;
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

	if (!copy || lt_hmap_add(&t->ix, &p, (uint32_t)t->n))
		return -1;
	t->strs[t->n] = copy;
	t->lens[t->n] = (uint32_t)len;
	return (int64_t)t->n++;
}

void cv_strtab_free(struct cv_strtab *t)
{
	lt_hmap_free(&t->ix);
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
