// SPDX-License-Identifier: Apache-2.0
/*
 * The column numbers of each event type's fields (evlog_columns.h).
 */
#include "eventlog/evlog_columns.h"
#include "eventlog/eventlog.h"
#include "eventlog/evlog_format.h"

/* Which numbers are event types (20, the column mark, is none). */
#define IS_TYPE(N, num, m, track, dur, corr) [EV_##N] = 1,
static const uint8_t evc_is_type[EV_TYPE_MAX + 1] = { EVLOG_TYPES(IS_TYPE) };
#undef IS_TYPE

#define BASE(N, num, m, track, dur, corr) [EV_##N] = EVC_BASE_##m,
const uint8_t evc_base[EV_TYPE_MAX + 1] = { EVLOG_TYPES(BASE) };
#undef BASE
#define NCOLS(N, num, m, track, dur, corr) [EV_##N] = EVC_NF_##m,
const uint8_t evc_ncols[EV_TYPE_MAX + 1] = { EVLOG_TYPES(NCOLS) };
#undef NCOLS

void evc_bases(uint8_t base[EV_TYPE_MAX + 2])
{
	unsigned k = EVC_FIELDS;
	base[0] = (uint8_t)k;
	for (unsigned t = 1; t <= EV_TYPE_MAX; t++) {
		if (evc_is_type[t])
			k = evc_base[t];
		base[t] = (uint8_t)k;
		k += evc_ncols[t];
	}
	base[EV_TYPE_MAX + 1] = (uint8_t)k; /* == EVC_NCOLS */
}
