// SPDX-License-Identifier: Apache-2.0
#include "uprobe_multi.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LT_BPF_LINK_CREATE 28           /* enum bpf_cmd */
#define LT_BPF_F_UPROBE_MULTI_RETURN 1

int lt_uprobe_multi_link(int prog_fd, const char *path, const uint64_t *offsets,
			 const uint64_t *cookies, size_t n, bool ret, int pid)
{
	struct { /* union bpf_attr's link_create with its uprobe_multi part */
		uint32_t prog_fd, target_fd, attach_type, flags;
		uint64_t path, offsets, ref_ctr_offsets, cookies;
		uint32_t cnt, um_flags, pid;
		uint32_t pad;
	} attr;

	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = (uint32_t)prog_fd;
	attr.attach_type = LT_BPF_TRACE_UPROBE_MULTI;
	attr.path = (uint64_t)(uintptr_t)path;
	attr.offsets = (uint64_t)(uintptr_t)offsets;
	attr.cookies = (uint64_t)(uintptr_t)cookies;
	attr.cnt = (uint32_t)n;
	attr.um_flags = ret ? LT_BPF_F_UPROBE_MULTI_RETURN : 0;
	attr.pid = (uint32_t)pid;
	int fd = (int)syscall(SYS_bpf, LT_BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : fd;
}
