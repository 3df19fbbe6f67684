/* SPDX-License-Identifier: Apache-2.0 */
/* Folded-stack files (<host>.cpu.folded, <host>.python.folded; after -o beside a trace). */
#ifndef LLMT_CONV_FOLDED_H
#define LLMT_CONV_FOLDED_H

#include <stddef.h>
#include <stdint.h>
#include "converter/sink.h"

#define FOLDED_NAME_MAX 512

/* Files go into the directory dirfd (duplicated; the caller keeps its fd),
 * named <host>.cpu.folded, or after a -o trace when stem is given (kept by
 * the caller): <stem>.cpu.folded for one host, <stem>.<host>.cpu.folded for
 * several. */
struct conv_sink *folded_new(int dirfd, int overwrite, const char *stem, size_t n_hosts,
			     char *err, size_t errsz);
uint64_t folded_files(const struct conv_sink *s); /* files published */
/* 1 if one of host's file names is taken in the directory (name says which). */
int folded_existing(const struct conv_sink *s, const char *host, char *name, size_t n);
void folded_free(struct conv_sink *s);

#endif
