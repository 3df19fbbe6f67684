/* SPDX-License-Identifier: Apache-2.0 */
/* File output that survives short writes and signals. */
#ifndef LLMT_COMMON_IO_H
#define LLMT_COMMON_IO_H

#include <stddef.h>

/* Write all n bytes of p to fd, looping over short writes and EINTR:
 * 0, or -errno with errno set (a write that makes no progress: EIO). */
int lt_write_all(int fd, const void *p, size_t n);

#endif
