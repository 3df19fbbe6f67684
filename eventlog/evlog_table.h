/* SPDX-License-Identifier: Apache-2.0 */
/*
 * evlog_table.h: the writer's per-chunk interning tables (strings, native
 * stacks, Python stacks): an lt_hmap from a key's hash to its id, emptied
 * in O(1) at each chunk boundary. Keys are not copied: keys[id] holds an
 * offset into storage the writer keeps for the whole chunk (the raw chunk
 * for strings, frame arenas for stacks) and the key's lengths.
 */
#ifndef LLMT_EVLOG_TABLE_H
#define LLMT_EVLOG_TABLE_H

#include "common/grow.h"
#include "common/hmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct evt_key {
	uint32_t off;   /* key storage offset */
	uint32_t a, b;  /* key lengths */
};

struct evt_table {
	struct lt_hmap map;    /* hash -> id */
	struct evt_key *keys;  /* keys[id] */
	size_t cap;
	uint32_t next;         /* next id to hand out in this chunk */
};

static inline int evt_init(struct evt_table *t, uint32_t keys)
{
	*t = (struct evt_table){ 0 };
	return lt_hmap_reserve(&t->map, keys) ||
	       lt_grow((void **)&t->keys, &t->cap, keys, sizeof(*t->keys), keys) ? -1 : 0;
}

static inline void evt_free(struct evt_table *t)
{
	lt_hmap_free(&t->map);
	free(t->keys);
	t->keys = NULL;
}

static inline void evt_reset(struct evt_table *t)
{
	lt_hmap_clear(&t->map);
	t->next = 0;
}

/* Strings' hash (evlog_str_hash), and stacks'. */
static inline uint32_t evt_hash(const void *p, size_t n)
{
	return (uint32_t)lt_hash_bytes(p, n);
}

#define EVT_FIND(t, pos, hash, EQ)                                               \
	do {                                                                     \
		uint32_t id_;                                                    \
		*(pos) = lt_hmap_probe(&(t)->map, (hash));                       \
		while (lt_hmap_next(&(t)->map, (pos), &id_)) {                   \
			const struct evt_key *k = &(t)->keys[id_];               \
			if (EQ)                                                  \
				return (int64_t)id_;                             \
		}                                                                \
		return -1;                                                       \
	} while (0)

/* Each find returns the key's id, or -1 with *pos where evt_insert adds it. */
static inline int64_t evt_find_str(const struct evt_table *t, struct lt_hmap_pos *pos,
				   uint32_t hash, const void *key, uint32_t len, const uint8_t *store)
{
	EVT_FIND(t, pos, hash, k->a == len && (!len || !memcmp(store + k->off, key, len)));
}

static inline int64_t evt_find_u64(const struct evt_table *t, struct lt_hmap_pos *pos,
				   uint32_t hash, const uint64_t *key, uint32_t a, uint32_t b,
				   const uint64_t *store)
{
	EVT_FIND(t, pos, hash, k->a == a && k->b == b &&
		 (!(a + b) || !memcmp(store + k->off, key, (size_t)(a + b) * 8)));
}

static inline int64_t evt_find_u32(const struct evt_table *t, struct lt_hmap_pos *pos,
				   uint32_t hash, const uint32_t *key, uint32_t n, const uint32_t *store)
{
	EVT_FIND(t, pos, hash, k->a == n && (!n || !memcmp(store + k->off, key, (size_t)n * 4)));
}

/* Add the key a find missed at pos. -1 (nothing added) when memory runs
 * out: the caller then simply does not intern this key. */
static inline int evt_insert(struct evt_table *t, struct lt_hmap_pos *pos, uint32_t id,
			     uint32_t off, uint32_t a, uint32_t b)
{
	if (id >= t->cap && lt_grow((void **)&t->keys, &t->cap, (size_t)id + 1, sizeof(*t->keys), 256))
		return -1;
	t->keys[id] = (struct evt_key){ off, a, b };
	return lt_hmap_add(&t->map, pos, id);
}

#endif /* LLMT_EVLOG_TABLE_H */
