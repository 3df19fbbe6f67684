/* SPDX-License-Identifier: Apache-2.0 */
/* lt_hmap's growth and clearing; the probe is inline in hmap.h. */
#include "hmap.h"

#include <stdlib.h>
#include <string.h>

#define HMAP_FIRST 16 /* slots of a map's first allocation */

/* Move the live slots into `slots` (a power of two) fresh ones. */
static int hmap_resize(struct lt_hmap *m, size_t slots)
{
	struct lt_hmap_slot *ns = calloc(slots, sizeof(*ns));
	uint32_t mask = (uint32_t)(slots - 1);

	if (!ns)
		return -1;
	for (size_t i = 0; m->slot && i <= m->mask; i++) {
		const struct lt_hmap_slot *s = &m->slot[i];
		uint32_t j = s->tag & mask;

		if (s->gen != m->gen)
			continue;
		while (ns[j].gen)
			j = (j + 1) & mask;
		ns[j] = (struct lt_hmap_slot){ s->tag, s->val, 1 };
	}
	free(m->slot);
	m->slot = ns;
	m->mask = mask;
	m->gen = 1;
	return 0;
}

int lt_hmap_reserve(struct lt_hmap *m, size_t n)
{
	size_t slots = m->slot ? (size_t)m->mask + 1 : HMAP_FIRST;

	if (n > (m->max ? m->max : LT_HMAP_MAX))
		return -1;
	while (slots < 2 * n)
		slots *= 2;
	return m->slot && slots == (size_t)m->mask + 1 ? 0 : hmap_resize(m, slots);
}

int lt_hmap_add_slow(struct lt_hmap *m, struct lt_hmap_pos *p, uint32_t val)
{
	if (m->n >= (m->max ? m->max : LT_HMAP_MAX) || lt_hmap_reserve(m, (size_t)m->n + 1))
		return -1;
	/* The slots moved: the key's place is the first free one from its home. */
	p->i = p->tag & m->mask;
	while (m->slot[p->i].gen == m->gen)
		p->i = (p->i + 1) & m->mask;
	m->slot[p->i] = (struct lt_hmap_slot){ p->tag, val, m->gen };
	m->n++;
	return 0;
}

void lt_hmap_clear(struct lt_hmap *m)
{
	m->n = 0;
	if (m->slot && ++m->gen == 0) { /* wrapped: slots of gen 1 would be live */
		memset(m->slot, 0, ((size_t)m->mask + 1) * sizeof(*m->slot));
		m->gen = 1;
	}
}

void lt_hmap_free(struct lt_hmap *m)
{
	free(m->slot);
	*m = (struct lt_hmap){ .max = m->max };
}
