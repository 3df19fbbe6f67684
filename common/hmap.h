/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tree's hash map and hash functions.
 *
 * lt_hmap maps a 64-bit hash (the owner's, from lt_hash_bytes, lt_mix64 or
 * lt_hash_pair) to a 32-bit value, most often an index into the array
 * where the owner keeps its keys. The map keeps no keys: a probe yields the
 * values whose slots hold the same 32 bits of hash, and the owner compares
 * keys, so a miss rarely touches one. Open addressing, linear probing, a
 * power-of-two slot array at most half full, doubled from the hash bits
 * each slot keeps (the owner is not asked). A generation number empties the
 * map in O(1). Nothing is removed.
 *
 *	struct lt_hmap_pos p = lt_hmap_probe(&m, hash);
 *	uint32_t i;
 *	while (lt_hmap_next(&m, &p, &i))
 *		if (same_key(&keys[i], key))
 *			return i;
 *	keys[n] = key;                  (the owner's array)
 *	if (lt_hmap_add(&m, &p, n))     (where the probe ended)
 *		... out of memory, or m.max entries: not added ...
 *
 * Between the probe and lt_hmap_add nothing else may be added to the map.
 * A zeroed struct lt_hmap is an empty map for up to LT_HMAP_MAX entries;
 * set max for fewer.
 */
#ifndef LLMT_COMMON_HMAP_H
#define LLMT_COMMON_HMAP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LT_HMAP_MAX (1u << 30) /* entries: 2^31 slots at most */
/* The probe's steps and the hashes' pieces are inlined even where the
 * compiler would not (tests/progs build with -fno-inline). */
#define LT_HMAP_INLINE static inline __attribute__((always_inline))

struct lt_hmap_slot {
	uint32_t tag;  /* the hash's low 32 bits: the home slot is tag & mask */
	uint32_t val;
	uint32_t gen;  /* live while equal to the map's gen */
};

struct lt_hmap {
	struct lt_hmap_slot *slot; /* NULL until the first add */
	uint32_t mask;             /* slots - 1 */
	uint32_t n;                /* live entries */
	uint32_t gen;              /* of live slots; 0 before the first add */
	uint32_t max;              /* entries allowed; 0: LT_HMAP_MAX */
};

/* Where a probe is: the slot it looked at last. */
struct lt_hmap_pos {
	uint32_t i, tag;
};

LT_HMAP_INLINE struct lt_hmap_pos lt_hmap_probe(const struct lt_hmap *m, uint64_t hash)
{
	uint32_t tag = (uint32_t)hash;

	return (struct lt_hmap_pos){ (tag - 1) & m->mask, tag };
}

/* The next value whose slot has the probe's hash bits: 1 and *val, or 0
 * at the empty slot that ends the probe (where lt_hmap_add puts a key). */
LT_HMAP_INLINE int lt_hmap_next(const struct lt_hmap *m, struct lt_hmap_pos *p, uint32_t *val)
{
	if (!m->slot)
		return 0;
	for (;;) {
		const struct lt_hmap_slot *s = &m->slot[p->i = (p->i + 1) & m->mask];

		if (s->gen != m->gen)
			return 0;
		if (s->tag == p->tag) {
			*val = s->val;
			return 1;
		}
	}
}

int lt_hmap_add_slow(struct lt_hmap *m, struct lt_hmap_pos *p, uint32_t val);

/* Add val where the probe p ended (lt_hmap_next returned 0). 0, or -1
 * (nothing added) when memory runs out or the map holds max entries. */
LT_HMAP_INLINE int lt_hmap_add(struct lt_hmap *m, struct lt_hmap_pos *p, uint32_t val)
{
	/* full to half (or no slots yet), or at max (max - 1 wraps when 0) */
	if ((m->n + 1) * 2 > m->mask + 1 || m->n > m->max - 1u)
		return lt_hmap_add_slow(m, p, val);
	m->slot[p->i] = (struct lt_hmap_slot){ p->tag, val, m->gen };
	m->n++;
	return 0;
}

/* Room for n entries without growing: 0, or -1. */
int lt_hmap_reserve(struct lt_hmap *m, size_t n);
/* Empty the map in O(1), keeping its slots. */
void lt_hmap_clear(struct lt_hmap *m);
void lt_hmap_free(struct lt_hmap *m);

/* ----------------------------------------------------------------- hashes */

/* An integer mixed (MurmurHash3's finalizer): a bijection, every output bit
 * depending on every input bit. */
LT_HMAP_INLINE uint64_t lt_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* Two integers, in order. */
LT_HMAP_INLINE uint64_t lt_hash_pair(uint64_t a, uint64_t b)
{
	return lt_mix64(a ^ lt_mix64(b + 0x9e3779b97f4a7c15ull));
}

LT_HMAP_INLINE uint64_t lt_hash_mul(uint64_t a, uint64_t b)
{
	__uint128_t r = (__uint128_t)a * b;

	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

LT_HMAP_INLINE uint64_t lt_hash_rd64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

LT_HMAP_INLINE uint64_t lt_hash_rd32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* n bytes (wyhash's construction, without its seed): 16 bytes per
 * multiply; the last 16, or the only 1-16, read overlapping. */
static inline uint64_t lt_hash_bytes(const void *p, size_t n)
{
	const uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull;
	const unsigned char *s = p;
	uint64_t h = k0 ^ (uint64_t)n, a, b;

	if (n <= 16) {
		if (n >= 4) {
			size_t q = (n >> 3) << 2;

			a = lt_hash_rd32(s) << 32 | lt_hash_rd32(s + q);
			b = lt_hash_rd32(s + n - 4) << 32 | lt_hash_rd32(s + n - 4 - q);
		} else if (n) {
			a = (uint64_t)s[0] << 16 | (uint64_t)s[n >> 1] << 8 | s[n - 1];
			b = 0;
		} else {
			a = b = 0;
		}
	} else {
		size_t i = n;

		for (; i > 16; i -= 16, s += 16)
			h = lt_hash_mul(lt_hash_rd64(s) ^ k1, lt_hash_rd64(s + 8) ^ h);
		a = lt_hash_rd64(s + i - 16);
		b = lt_hash_rd64(s + i - 8);
	}
	return lt_hash_mul(k1 ^ (uint64_t)n, lt_hash_mul(a ^ k1, b ^ h));
}

#endif
