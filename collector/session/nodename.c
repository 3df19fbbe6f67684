// SPDX-License-Identifier: Apache-2.0
#include "nodename.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/target/tfile.h"

#define HOST_MAX 255 /* HOST_NAME_MAX (64) on Linux; node names are DNS names */

/* First line of s, printable bytes only, into buf; false if that is empty. */
static bool take_name(char *buf, size_t sz, const char *s)
{
	size_t n = 0;

	while (*s == ' ' || *s == '\t')
		s++;
	for (; *s && *s != '\n' && n + 1 < sz && n < HOST_MAX; s++)
		if (isgraph((unsigned char)*s))
			buf[n++] = *s;
	buf[n] = 0;
	return n > 0;
}

/* The parent of pid from /proc/PID/stat (after the comm's last ')'), or 0. */
static int parent_of(int pid)
{
	char path[64], buf[512], *p;
	int ppid = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), LT_TF_PROC "/%d/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	if ((p = strrchr(buf, ')')) && sscanf(p + 1, " %*c %d", &ppid) != 1)
		ppid = 0;
	return ppid;
}

static bool same_ns(const char *a, const char *b)
{
	struct stat x, y;

	return !stat(a, &x) && !stat(b, &y) && x.st_ino == y.st_ino && x.st_dev == y.st_dev;
}

/* The nearest ancestor of ours in another UTS namespace: in a container
 * seen with the node's pids (hostPID), the runtime's shim (containerd-shim,
 * conmon), which runs in the node's namespaces. Pid 1 itself may be closed
 * to us. 0 if none (we are in the node's namespace). */
static int node_ancestor(void)
{
	char path[64];
	int pid = getppid();

	for (int depth = 0; pid > 1 && depth < 64; depth++, pid = parent_of(pid)) {
		snprintf(path, sizeof(path), LT_TF_PROC "/%d/ns/uts", pid);
		if (!same_ns("/proc/self/ns/uts", path) && access(path, F_OK) == 0)
			return pid;
	}
	return 0;
}

static bool node_etc_hostname(int pid, char *buf, size_t sz)
{
	char err[256], *text = NULL;
	size_t len;
	bool ok = false;
	int root = lt_tf_root_open(LT_TF_PROC, pid), fd;

	if (root < 0)
		return false;
	fd = lt_tf_open(root, "/etc/hostname", NULL, err, sizeof(err));
	if (fd >= 0 && !lt_tf_read_all(fd, 4096, &text, &len, err, sizeof(err)))
		ok = take_name(buf, sz, text);
	free(text);
	if (fd >= 0)
		close(fd);
	close(root);
	return ok;
}

void lt_node_name(char *buf, size_t sz)
{
	const char *env = getenv("LLMT_NODE_NAME");
	char host[HOST_MAX + 1] = "";
	int pid;

	if (env && take_name(buf, sz, env))
		return;
	if ((pid = node_ancestor()) > 0 && node_etc_hostname(pid, buf, sz))
		return;
	if (gethostname(host, sizeof(host) - 1) || !take_name(buf, sz, host))
		snprintf(buf, sz, "unknown");
}
