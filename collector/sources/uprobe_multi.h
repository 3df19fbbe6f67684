/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uprobe_multi: one BPF link probing many offsets of one file (kernel 6.6+),
 * made with the raw bpf(2) call: the libbpf this project builds against
 * (Debian 12's 1.1) predates its support. Attaching and, above all,
 * detaching many functions then costs one RCU grace period, not one each.
 */
#ifndef LLMT_UPROBE_MULTI_H
#define LLMT_UPROBE_MULTI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LT_BPF_TRACE_UPROBE_MULTI 48   /* enum bpf_attach_type BPF_TRACE_UPROBE_MULTI */

/* A link of program `prog_fd` on `n` offsets of `path` (entries, or returns
 * if `ret`), each with its cookie, for process `pid` only (0: every
 * process). The link's fd, or -errno. */
int lt_uprobe_multi_link(int prog_fd, const char *path, const uint64_t *offsets,
			 const uint64_t *cookies, size_t n, bool ret, int pid);

#endif
