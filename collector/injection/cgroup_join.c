// SPDX-License-Identifier: Apache-2.0
/*
 * cgroup_join: a helper joins a target's cgroups (cgroup_join.h).
 */
#include "cgroup_join.h"

#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CG_MAX_LINES 64          /* /proc/PID/cgroup and mountinfo lines looked at, each */

/* The mount point of the hierarchy a /proc/PID/cgroup line names: cgroup2
 * for "0::", else the v1 mount whose options hold the line's controllers
 * ("cpu,cpuacct" or "name=systemd"). */
static bool cg_mount_of(const char *ctrls, char *mnt, size_t mntsz)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[1024];
	bool found = false;

	for (int n = 0; f && !found && n < 4096 && fgets(line, sizeof(line), f); n++) {
		char point[PATH_MAX / 4], type[32], opts[512];
		const char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*s %*s %*s %*s %1023s", point) != 1 ||
		    sscanf(dash + 3, "%31s %*s %511s", type, opts) != 2)
			continue;
		if (!*ctrls)
			found = !strcmp(type, "cgroup2");
		else if (!strcmp(type, "cgroup")) {
			char want[256], *save = NULL;

			snprintf(want, sizeof(want), "%s", ctrls);
			found = true;
			for (char *c = strtok_r(want, ",", &save); c && found; c = strtok_r(NULL, ",", &save)) {
				char key[64];

				snprintf(key, sizeof(key), ",%s,", c);
				char o[520];
				snprintf(o, sizeof(o), ",%s,", opts);
				found = strstr(o, key) != NULL;
			}
		}
		if (found)
			snprintf(mnt, mntsz, "%s", point);
	}
	if (f)
		fclose(f);
	return found;
}

static bool cg_write_pid(const char *mnt, const char *path, pid_t pid)
{
	char file[PATH_MAX], num[24];
	int fd, len;
	bool ok;

	if (strstr(path, "/../") || (size_t)snprintf(file, sizeof(file), "%s%s/cgroup.procs", mnt, path) >= sizeof(file))
		return false;
	fd = open(file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	len = snprintf(num, sizeof(num), "%d", (int)pid);
	ok = write(fd, num, (size_t)len) == len;
	close(fd);
	return ok;
}

int lt_cg_join_like(pid_t pid, pid_t like)
{
	char file[64], line[1024], mnt[PATH_MAX];
	int joined = 0;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/cgroup", (int)like);
	f = fopen(file, "re");
	for (int n = 0; f && n < CG_MAX_LINES && fgets(line, sizeof(line), f); n++) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL, *nl;

		if (!b)
			continue;
		*b = '\0';
		if ((nl = strchr(b + 1, '\n')))
			*nl = '\0';
		if (cg_mount_of(a + 1, mnt, sizeof(mnt)) && cg_write_pid(mnt, b + 1, pid))
			joined++;
	}
	if (f)
		fclose(f);
	return joined;
}
