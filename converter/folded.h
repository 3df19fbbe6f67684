/* SPDX-License-Identifier: Apache-2.0 */
/* Folded-stack files (<host>.cpu.folded, <host>.python.folded). */
#ifndef LLMT_CONV_FOLDED_H
#define LLMT_CONV_FOLDED_H

#include <stddef.h>
#include <stdint.h>
#include "sink.h"

/* Files go into the directory dirfd (duplicated; the caller keeps its fd). */
struct conv_sink *folded_new(int dirfd, int overwrite, char *err, size_t errsz);
uint64_t folded_files(const struct conv_sink *s); /* files published */
/* Without overwrite, leave a file that already exists alone instead of
 * failing (stacks beside a -o trace may belong to another trace there). */
void folded_keep_existing(struct conv_sink *s);
uint64_t folded_kept(const struct conv_sink *s);  /* files left alone */
void folded_free(struct conv_sink *s);

#endif
