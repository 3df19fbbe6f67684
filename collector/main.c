// SPDX-License-Identifier: Apache-2.0
/* llmtracker: the node-side collector CLI. */
#include <stdio.h>
#include <string.h>

#include "collector/session/cli.h"
#include "lt_version.h"
#include "collector/sources/probefile.h"

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	if (!cmd) {
		lt_cli_usage(stderr);
		return 2;
	}
	if (!strcmp(cmd, "profile"))
		return lt_cmd_profile(argc - 1, argv + 1);
	if (!strcmp(cmd, "export"))
		return lt_cmd_export(argc - 1, argv + 1);
	if (!strcmp(cmd, "generateCommand") || !strcmp(cmd, "generate-command"))
		return lt_cmd_generate(argc - 1, argv + 1);
	if (!strcmp(cmd, "generateProbe") || !strcmp(cmd, "generate-probe"))
		return lt_generate_probe_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
		printf("llmtracker %s\n", LT_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		lt_cli_usage(stdout);
		return 0;
	}
	fprintf(stderr, "llmtracker: unknown command '%s' (expected profile, export, generateCommand or generateProbe)\n", cmd);
	return 2;
}
