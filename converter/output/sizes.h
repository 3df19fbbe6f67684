/* SPDX-License-Identifier: Apache-2.0 */
/* What the sinks are about to get, by a pass over the sorted records (sink.h: plan). */
#ifndef LLMT_CONV_SIZES_H
#define LLMT_CONV_SIZES_H

#include "converter/conv_int.h"
#include "converter/input/spill.h"

/* Read every record of sp once, nested as the emitter nests them, into
 * *sz (zeroed first); sp is rewound after. 0, or -1 with c->err set. */
int cv_sizes_scan(struct cv_core *c, struct cv_spill *sp, struct conv_sizes *sz);

#endif
