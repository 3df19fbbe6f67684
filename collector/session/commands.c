// SPDX-License-Identifier: Apache-2.0
/* `llmtracker export`: runs llmtracker-convert from the collector's own directory. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int lt_cmd_export(int argc, char **argv)
{
	char self[PATH_MAX], conv[PATH_MAX + 32], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	(void)argc;
	if (n < 0) {
		fprintf(stderr, "llmtracker export: cannot find my own path (/proc/self/exe): %s\n", strerror(errno));
		return 1;
	}
	self[n] = 0;
	slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	else
		strcpy(self, ".");
	snprintf(conv, sizeof(conv), "%s/llmtracker-convert", self);
	argv[0] = conv; /* the rest of argv passes through unchanged */
	execv(conv, argv);
	fprintf(stderr, "llmtracker export: cannot run %s: %s (it is installed next to llmtracker)\n", conv,
		strerror(errno));
	return 1;
}
