// SPDX-License-Identifier: Apache-2.0
/*
 * A target that tries to get out through whatever the collector handed it
 * (tests/integration/hostile_inject.sh). Loads the fake CUPTI from FAKE_LIB
 * (or "-" for none) and makes a "CUDA call" every millisecond; prints
 * "ready PID"; for each stdin line "probe TAG" it looks at every fd it holds
 * and prints
 *   TAG fd N type=reg|dir|sock|fifo|chr|other link=LINK
 *   TAG escape fd N: HOW          (a way out that worked)
 *   TAG probe done
 * Ways tried per fd it did not hold at its first probe (those are its own
 * business): openat(fd, ".."), open("/proc/self/fd/N/.."), openat(fd, NAME,
 * O_CREAT), creating NAME beside the link's path, and reopening the fd's
 * file and looking for a directory there. The first probe tries none.
 *   seize MODE UID   keeps a copy of every file it was handed an fd of
 *                    ("*.partial", its log; one fd each) past the profile, fchowns it
 *                    to UID and fchmods it to MODE (octal): "seized N"
 *   grow BYTES       writes BYTES more through the kept fds, and fchowns
 *                    and fchmods them again: "grew N"
 * (what a root target in a container can do to a file it was handed).
 * Exits when stdin closes.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PLANT "hostile-planted"

static const char *kind(mode_t m)
{
	return S_ISREG(m) ? "reg" : S_ISDIR(m) ? "dir" : S_ISSOCK(m) ? "sock" : S_ISFIFO(m) ? "fifo"
	       : S_ISCHR(m) ? "chr" : "other";
}

static int own[256], n_own = -1; /* fds held at the first probe */

static int is_own(int fd)
{
	for (int i = 0; i < n_own; i++)
		if (own[i] == fd)
			return 1;
	return n_own < 0; /* the first probe: all its own */
}

static void try_fd(const char *tag, int fd)
{
	char path[64], link[PATH_MAX], beside[PATH_MAX + 32];
	struct stat sb;
	ssize_t n;
	int x;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = 0;
	if (fstat(fd, &sb))
		return;
	printf("%s fd %d type=%s link=%s\n", tag, fd, kind(sb.st_mode), link);
	if (is_own(fd))
		return;
	if ((x = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		printf("%s escape fd %d: openat(fd, \"..\")\n", tag, fd);
		close(x);
	}
	snprintf(beside, sizeof(beside), "%s/..", path);
	if ((x = open(beside, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		printf("%s escape fd %d: %s\n", tag, fd, beside);
		close(x);
	}
	if ((x = openat(fd, PLANT, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) >= 0) {
		printf("%s escape fd %d: created " PLANT " through it\n", tag, fd);
		close(x);
	}
	char *slash = strrchr(link, '/');
	if (link[0] == '/' && slash) {
		snprintf(beside, sizeof(beside), "%.*s/" PLANT, (int)(slash - link), link);
		if ((x = open(beside, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) >= 0) {
			printf("%s escape fd %d: created %s beside its file\n", tag, fd, beside);
			close(x);
		}
	}
	/* The magic link reopens the same file only; a directory there would be a way up. */
	if ((x = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		if (!fstat(x, &sb) && S_ISDIR(sb.st_mode))
			printf("%s escape fd %d: reopened as a directory\n", tag, fd);
		close(x);
	}
}

static int seized[16], n_seized, seize_mode, seize_uid;

/* One fd per file: the library may hold two of one for a moment. */
static int seized_already(int fd)
{
	struct stat a, b;
	for (int i = 0; i < n_seized; i++)
		if (!fstat(fd, &a) && !fstat(seized[i], &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			return 1;
	return 0;
}

/* The owner first: a chown clears the set-uid bit the mode then sets. */
static void fd_attack(int fd)
{
	if (fchown(fd, (uid_t)seize_uid, (gid_t)seize_uid))
		printf("fchown: %s\n", strerror(errno));
	if (fchmod(fd, (mode_t)seize_mode))
		printf("fchmod: %s\n", strerror(errno));
}

/* Keep (dup) every regular file we were handed that ends in ".partial". */
static void seize(const char *args)
{
	char path[64], link[PATH_MAX];
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	seize_mode = (int)strtol(args, NULL, 8);
	seize_uid = atoi(strchr(args, ' ') ? strchr(args, ' ') + 1 : "0");
	while (d && (de = readdir(d)) && n_seized < 16) {
		int fd = atoi(de->d_name);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t n = de->d_name[0] == '.' ? -1 : readlink(path, link, sizeof(link) - 1);
		if (n <= 8 || is_own(fd) || seized_already(fd))
			continue;
		link[n] = 0;
		if (strcmp(link + n - 8, ".partial"))
			continue;
		int kept = fcntl(fd, F_DUPFD_CLOEXEC, 100);
		if (kept >= 0) {
			seized[n_seized++] = kept;
			fd_attack(kept);
		}
	}
	if (d)
		closedir(d);
	printf("seized %d\n", n_seized);
	fflush(stdout);
}

static void grow(long long bytes)
{
	static char junk[1 << 16];
	long long wrote = 0;

	memset(junk, 'Z', sizeof(junk));
	for (int i = 0; i < n_seized; i++) {
		lseek(seized[i], 0, SEEK_END);
		for (long long left = bytes; left > 0;) {
			ssize_t w = write(seized[i], junk, left < (long long)sizeof(junk) ? (size_t)left : sizeof(junk));
			if (w <= 0)
				break;
			left -= w;
			wrote += w;
		}
		fd_attack(seized[i]);
	}
	printf("grew %lld\n", wrote);
	fflush(stdout);
}

static void probe(const char *tag)
{
	int fds[256], n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	while (d && (de = readdir(d)) && n < 256) {
		int fd = atoi(de->d_name);
		if (de->d_name[0] != '.' && fd != dirfd(d))
			fds[n++] = fd;
	}
	if (d)
		closedir(d);
	for (int i = 0; i < n; i++)
		try_fd(tag, fds[i]);
	if (n_own < 0) {
		memcpy(own, fds, sizeof(int) * (size_t)n);
		n_own = n;
	}
	printf("%s probe done\n", tag);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	void (*call)(void) = NULL;
	if (argc < 2) {
		fprintf(stderr, "usage: hostile_target FAKE_LIB|-\n");
		return 2;
	}
	if (strcmp(argv[1], "-")) {
		void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
		call = h ? (void (*)(void))dlsym(h, "fake_cupti_api_call") : NULL;
		if (!call) {
			fprintf(stderr, "hostile_target: %s: %s\n", argv[1], dlerror());
			return 1;
		}
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char line[256];
	size_t have = 0;
	for (;;) {
		struct pollfd p = { 0, POLLIN, 0 };
		if (poll(&p, 1, 1) > 0) {
			ssize_t k = read(0, line + have, sizeof(line) - 1 - have);
			if (k <= 0)
				break;
			have += (size_t)k;
			line[have] = 0;
			char *nl;
			while ((nl = strchr(line, '\n'))) {
				*nl = 0;
				if (!strncmp(line, "probe ", 6))
					probe(line + 6);
				else if (!strncmp(line, "seize ", 6))
					seize(line + 6);
				else if (!strncmp(line, "grow ", 5))
					grow(atoll(line + 5));
				memmove(line, nl + 1, have - (size_t)(nl + 1 - line) + 1);
				have -= (size_t)(nl + 1 - line);
			}
			if (have == sizeof(line) - 1)
				have = 0;
		}
		if (call)
			call();
	}
	return 0;
}
