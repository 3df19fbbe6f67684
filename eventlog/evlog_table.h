/* SPDX-License-Identifier: Apache-2.0 */
/*
 * evlog_table.h: the writer's per-chunk interning tables (strings, native
 * stacks, Python stacks). Open addressing with linear probing; a generation
 * number empties a table in O(1) at each chunk boundary. Keys are not copied:
 * a slot holds an offset into storage the writer keeps for the whole chunk
 * (the raw chunk for strings, frame arenas for stacks).
 */
#ifndef LLMT_EVLOG_TABLE_H
#define LLMT_EVLOG_TABLE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct evt_slot {
	uint32_t gen;   /* live iff == table gen */
	uint32_t hash;
	uint32_t id;
	uint32_t off;   /* key storage offset */
	uint32_t a, b;  /* key lengths */
};

struct evt_table {
	struct evt_slot *slots;
	uint32_t mask, count, gen;
	uint32_t next;  /* next id to hand out in this chunk */
};

static inline int evt_init(struct evt_table *t, uint32_t size)
{
	t->slots = calloc(size, sizeof(*t->slots));
	t->mask = size - 1;
	t->count = t->next = 0;
	t->gen = 1;
	return t->slots ? 0 : -1;
}

static inline void evt_free(struct evt_table *t)
{
	free(t->slots);
	t->slots = NULL;
}

static inline void evt_reset(struct evt_table *t)
{
	t->count = t->next = 0;
	if (++t->gen == 0) {
		memset(t->slots, 0, ((size_t)t->mask + 1) * sizeof(*t->slots));
		t->gen = 1;
	}
}

/* Fast non-cryptographic hash, 8 bytes per step. */
static inline uint32_t evt_hash(const void *p, size_t n)
{
	const uint8_t *s = p;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
	while (n >= 8) {
		uint64_t v;
		memcpy(&v, s, 8);
		h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
		s += 8;
		n -= 8;
	}
	if (n) {
		uint64_t v = 0;
		memcpy(&v, s, n);
		h = (h ^ v) * 0x94d049bb133111ebull;
	}
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return (uint32_t)(h ^ (h >> 32));
}

#define EVT_FIND(t, hash, EQ)                                                    \
	do {                                                                     \
		uint32_t i_ = (hash) & (t)->mask;                                \
		for (;;) {                                                       \
			struct evt_slot *s = &(t)->slots[i_];                     \
			if (s->gen != (t)->gen || (s->hash == (hash) && (EQ)))   \
				return s;                                        \
			i_ = (i_ + 1) & (t)->mask;                               \
		}                                                                \
	} while (0)

/* Each find returns the matching live slot, or the empty slot to insert at. */
static inline struct evt_slot *evt_find_str(struct evt_table *t, uint32_t hash,
					    const void *key, uint32_t len, const uint8_t *store)
{
	EVT_FIND(t, hash, s->a == len && (!len || !memcmp(store + s->off, key, len)));
}

static inline struct evt_slot *evt_find_u64(struct evt_table *t, uint32_t hash,
					    const uint64_t *key, uint32_t a, uint32_t b,
					    const uint64_t *store)
{
	EVT_FIND(t, hash, s->a == a && s->b == b &&
		 (!(a + b) || !memcmp(store + s->off, key, (size_t)(a + b) * 8)));
}

static inline struct evt_slot *evt_find_u32(struct evt_table *t, uint32_t hash,
					    const uint32_t *key, uint32_t n, const uint32_t *store)
{
	EVT_FIND(t, hash, s->a == n && (!n || !memcmp(store + s->off, key, (size_t)n * 4)));
}

/* Doubles the table at half load. Returns -1 (nothing inserted) if it
 * cannot grow: the caller then simply does not intern this key. */
static inline int evt_grow(struct evt_table *t)
{
	uint32_t n = (t->mask + 1) * 2;
	struct evt_slot *ns = calloc(n, sizeof(*ns));
	if (!ns)
		return -1;
	for (uint32_t i = 0; i <= t->mask; i++) {
		struct evt_slot *s = &t->slots[i];
		if (s->gen != t->gen)
			continue;
		uint32_t j = s->hash & (n - 1);
		while (ns[j].gen == 1)
			j = (j + 1) & (n - 1);
		ns[j] = *s;
		ns[j].gen = 1;
	}
	free(t->slots);
	t->slots = ns;
	t->mask = n - 1;
	t->gen = 1;
	return 0;
}

static inline int evt_insert(struct evt_table *t, struct evt_slot *s, uint32_t hash,
			     uint32_t id, uint32_t off, uint32_t a, uint32_t b)
{
	if ((t->count + 1) * 2 > t->mask + 1) {
		if (evt_grow(t))
			return -1;
		/* The slot moved: find the new empty one. */
		uint32_t i = hash & t->mask;
		while (t->slots[i].gen == t->gen)
			i = (i + 1) & t->mask;
		s = &t->slots[i];
	}
	*s = (struct evt_slot){ t->gen, hash, id, off, a, b };
	t->count++;
	return 0;
}

#endif /* LLMT_EVLOG_TABLE_H */
