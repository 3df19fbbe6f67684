// SPDX-License-Identifier: Apache-2.0
/* common/hmap.h: growth, keys whose hashes collide, O(1) clearing by
 * generation, the entry bound, the hash functions; and the converter's
 * pair-key map built on it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/hmap.h"
#include "converter/cv_util.h"

/* An owner: keys in an array, the map holding their indices. */
struct owner {
	struct lt_hmap m;
	uint64_t *keys;
	uint32_t n, cap;
	uint64_t (*hash)(uint64_t key);
	uint32_t compared;     /* keys compared by the last find */
};

static uint64_t hash_mixed(uint64_t k)
{
	return lt_mix64(k);
}

static uint64_t hash_equal(uint64_t k)
{
	(void)k;
	return 0x1234567800000005ull;
}

/* Same home slot (low bits 5) in a map of up to 2^20 slots, other tags. */
static uint64_t hash_same_home(uint64_t k)
{
	return (k + 1) << 20 | 5;
}

static int64_t find(struct owner *o, uint64_t key, struct lt_hmap_pos *p)
{
	uint32_t i;

	o->compared = 0;
	*p = lt_hmap_probe(&o->m, o->hash(key));
	while (lt_hmap_next(&o->m, p, &i)) {
		o->compared++;
		if (o->keys[i] == key)
			return i;
	}
	return -1;
}

/* The key's index, added if new; -1 when the map refuses it. */
static int64_t intern(struct owner *o, uint64_t key)
{
	struct lt_hmap_pos p;
	int64_t i = find(o, key, &p);

	if (i >= 0)
		return i;
	if (o->n == o->cap) {
		o->cap = o->cap ? o->cap * 2 : 64;
		o->keys = realloc(o->keys, o->cap * sizeof(*o->keys));
		assert_non_null(o->keys);
	}
	if (lt_hmap_add(&o->m, &p, o->n))
		return -1;
	o->keys[o->n] = key;
	return o->n++;
}

static void owner_free(struct owner *o)
{
	lt_hmap_free(&o->m);
	free(o->keys);
}

static void test_growth(void **state)
{
	struct owner o = { .hash = hash_mixed };
	struct lt_hmap_pos p;
	const uint32_t n = 200000;

	(void)state;
	assert_int_equal(find(&o, 7, &p), -1); /* a zeroed map is empty */
	for (uint32_t k = 0; k < n; k++)
		assert_int_equal(intern(&o, (uint64_t)k * 7919), k);
	assert_int_equal(o.m.n, n);
	/* a power of two, at most half full */
	assert_int_equal(o.m.mask & (o.m.mask + 1), 0);
	assert_true((uint64_t)o.m.mask + 1 >= 2ull * n);
	assert_true((uint64_t)o.m.mask + 1 < 4ull * n + 32);
	for (uint32_t k = 0; k < n; k++) {
		assert_int_equal(find(&o, (uint64_t)k * 7919, &p), k);
		assert_int_equal(intern(&o, (uint64_t)k * 7919), k); /* found, not added again */
	}
	assert_int_equal(o.m.n, n);
	assert_int_equal(find(&o, 1, &p), -1);
	owner_free(&o);
}

static void test_equal_hashes(void **state)
{
	struct owner o = { .hash = hash_equal };
	struct lt_hmap_pos p;

	(void)state;
	for (uint32_t k = 0; k < 1000; k++)
		assert_int_equal(intern(&o, k), k);
	/* every key is a candidate: the owner tells them apart */
	for (uint32_t k = 0; k < 1000; k++) {
		assert_int_equal(find(&o, k, &p), k);
		assert_int_equal(o.compared, k + 1);
	}
	assert_int_equal(find(&o, 5000, &p), -1);
	assert_int_equal(o.compared, 1000);
	owner_free(&o);
}

static void test_same_home_other_tags(void **state)
{
	struct owner o = { .hash = hash_same_home };
	struct lt_hmap_pos p;

	(void)state;
	for (uint32_t k = 0; k < 1000; k++)
		assert_int_equal(intern(&o, k), k);
	/* one long run of slots, but only the key with the same hash bits is
	 * ever compared */
	for (uint32_t k = 0; k < 1000; k++) {
		assert_int_equal(find(&o, k, &p), k);
		assert_int_equal(o.compared, 1);
	}
	assert_int_equal(find(&o, 3000, &p), -1); /* (3001 << 20) | 5: no tag like it */
	assert_int_equal(o.compared, 0);
	owner_free(&o);
}

static void test_clear_by_generation(void **state)
{
	struct owner o = { .hash = hash_mixed };
	struct lt_hmap_pos p;

	(void)state;
	assert_int_equal(lt_hmap_reserve(&o.m, 100), 0);
	uint32_t slots = o.m.mask + 1;
	struct lt_hmap_slot *mem = o.m.slot;

	for (int round = 0; round < 3; round++) {
		for (uint32_t k = 0; k < 80; k++)
			assert_int_equal(intern(&o, 1000 * (uint64_t)round + k), k);
		assert_int_equal(o.m.n, 80);
		lt_hmap_clear(&o.m);
		o.n = 0;
		assert_int_equal(o.m.n, 0);
		for (uint32_t k = 0; k < 80; k++)
			assert_int_equal(find(&o, 1000 * (uint64_t)round + k, &p), -1);
	}
	/* cleared in place: no slot was allocated or moved */
	assert_int_equal(o.m.mask + 1, slots);
	assert_ptr_equal(o.m.slot, mem);
	/* the generation wraps: the slots are zeroed, nothing old comes back */
	for (uint32_t k = 0; k < 50; k++)
		assert_int_equal(intern(&o, k), k);
	for (uint32_t i = 0; i <= o.m.mask; i++)
		if (o.m.slot[i].gen == o.m.gen)
			o.m.slot[i].gen = UINT32_MAX;
	o.m.gen = UINT32_MAX;
	assert_int_equal(find(&o, 3, &p), 3);
	lt_hmap_clear(&o.m);
	o.n = 0;
	assert_int_equal(o.m.gen, 1);
	for (uint32_t k = 0; k < 50; k++)
		assert_int_equal(find(&o, k, &p), -1);
	assert_int_equal(intern(&o, 3), 0);
	owner_free(&o);
}

static void test_bounds(void **state)
{
	struct owner o = { .hash = hash_mixed, .m = { .max = 100 } };
	struct lt_hmap_pos p;

	(void)state;
	for (uint32_t k = 0; k < 100; k++)
		assert_int_equal(intern(&o, k), k);
	assert_int_equal(intern(&o, 100), -1); /* full: refused, nothing added */
	assert_int_equal(o.m.n, 100);
	assert_int_equal(find(&o, 100, &p), -1);
	assert_int_equal(intern(&o, 99), 99);  /* what it holds is still found */
	assert_int_equal(lt_hmap_reserve(&o.m, 101), -1);
	lt_hmap_free(&o.m);
	assert_int_equal(o.m.max, 100);         /* the bound outlives the slots */
	assert_null(o.m.slot);
	assert_int_equal(lt_hmap_reserve(&o.m, (size_t)LT_HMAP_MAX + 1), -1);
	o.m.max = 0;
	assert_int_equal(lt_hmap_reserve(&o.m, (size_t)LT_HMAP_MAX + 1), -1);
	owner_free(&o);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static size_t duplicates(uint64_t *v, size_t n)
{
	size_t d = 0;

	qsort(v, n, sizeof(*v), cmp_u64);
	for (size_t i = 1; i < n; i++)
		d += v[i] == v[i - 1];
	return d;
}

static void test_hash_functions(void **state)
{
	enum { N = 100000 };
	uint64_t *h = malloc(N * sizeof(*h));
	char s[32];

	(void)state;
	assert_non_null(h);
	/* every length reads its own bytes only (ASan checks the heap copy),
	 * and each length of one buffer hashes differently */
	for (size_t n = 0; n <= 80; n++) {
		unsigned char *b = malloc(n ? n : 1);

		assert_non_null(b);
		memset(b, 'a', n);
		h[n] = lt_hash_bytes(b, n);
		free(b);
	}
	assert_int_equal(duplicates(h, 81), 0);
	/* names alike but for a digit or two */
	for (int i = 0; i < N; i++)
		h[i] = lt_hash_bytes(s, (size_t)snprintf(s, sizeof(s), "frame%d", i));
	assert_int_equal(duplicates(h, N), 0);
	/* and in their low 32 bits, the map's tags, no more than chance:
	 * ~N^2 / 2^33 = 1.2 */
	for (int i = 0; i < N; i++)
		h[i] = (uint32_t)lt_hash_bytes(s, (size_t)snprintf(s, sizeof(s), "frame%d", i));
	assert_true(duplicates(h, N) < 10);
	/* one bit flipped anywhere in 24 bytes */
	unsigned char b[24] = { 0 };
	uint64_t base = lt_hash_bytes(b, sizeof(b));

	for (int bit = 0; bit < 24 * 8; bit++) {
		b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		assert_true(lt_hash_bytes(b, sizeof(b)) != base);
		b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
	}
	/* integers: a bijection; pairs told apart by order */
	for (int i = 0; i < N; i++)
		h[i] = lt_mix64((uint64_t)i);
	assert_int_equal(duplicates(h, N), 0);
	assert_true(lt_hash_pair(1, 2) != lt_hash_pair(2, 1));
	assert_true(lt_hash_pair(0, 0) != lt_hash_pair(0, 1));
	free(h);
}

static void test_cv_map_order(void **state)
{
	struct cv_map m = { 0 };
	int is_new;

	(void)state;
	assert_null(cv_map_get(&m, 1, 2));
	for (uint64_t k = 0; k < 5000; k++) {
		uint64_t *v = cv_map_put(&m, k % 7, k, &is_new);

		assert_non_null(v);
		assert_true(is_new);
		*v = k * 3;
	}
	for (uint64_t k = 0; k < 5000; k++) {
		assert_int_equal(*cv_map_get(&m, k % 7, k), k * 3);
		assert_non_null(cv_map_put(&m, k % 7, k, &is_new));
		assert_false(is_new);
	}
	assert_null(cv_map_get(&m, 1, 0)); /* (0, 0) is there, (1, 0) not */
	assert_int_equal(m.n, 5000);
	for (size_t i = 0; i < m.n; i++) /* in the order added */
		assert_int_equal(m.ents[i].b, i);
	cv_map_free(&m);
	assert_null(cv_map_get(&m, 0, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_growth),
		cmocka_unit_test(test_equal_hashes),
		cmocka_unit_test(test_same_home_other_tags),
		cmocka_unit_test(test_clear_by_generation),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_hash_functions),
		cmocka_unit_test(test_cv_map_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
