// SPDX-License-Identifier: Apache-2.0
/* Prints "<nr> <name>" for every system call of this architecture, from the
 * table generated at build time, so tests can name syscall numbers. */
#include <stdio.h>

#include "syscall_names.h"

int main(void)
{
	for (unsigned i = 0; i < LT_SYSCALL_NAMES_MAX; i++)
		if (lt_syscall_names[i])
			printf("%u %s\n", i, lt_syscall_names[i]);
	return 0;
}
