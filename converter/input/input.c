/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inputs: a log file, a directory of logs, or a .tar/.tar.gz/.tar.zst
 * archive of logs (unarchive.c). Every candidate is checked for the
 * event-log magic, so a directory such as /tmp (a usual --cupti-dir) may
 * hold anything else; what is skipped is said. The same file reached twice
 * (-i /tmp/data.json --cupti-dir /tmp) is read once. Which of the logs found
 * belong to the profiles given is sessions.c's choice. A log in segments
 * (schemas/eventlog.md 5.2) is taken whole from the file found last, its
 * earlier segments looked up beside it (among the inputs, an archive's
 * members too, else in its directory) and checked against their records;
 * each segment found on its own is then part of it, not another log.
 *
 * Every input is opened once, without following a symlink in its last
 * component and without blocking, checked on the fd to be a regular file
 * (or a directory, walked through its fd with openat), and read only
 * through that fd: a name swapped for a symlink or a FIFO in a shared
 * directory between looking and reading gets nothing read through it.
 */
#include "converter/conv_int.h"
#include "eventlog/evlog_format.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#define DIR_DEPTH_MAX 4

static int has_magic_fd(int fd)
{
	char m[EVF_MAGIC_LEN];

	return pread(fd, m, sizeof(m), 0) == (ssize_t)sizeof(m) &&
	       memcmp(m, EVF_MAGIC, EVF_MAGIC_LEN) == 0;
}

static const char *kind_of(mode_t mode)
{
	if (S_ISLNK(mode))
		return "is a symbolic link (not followed; name the file it points to)";
	if (S_ISFIFO(mode))
		return "is a FIFO, not an event log file";
	if (S_ISSOCK(mode))
		return "is a socket, not an event log file";
	if (S_ISCHR(mode) || S_ISBLK(mode))
		return "is a device, not an event log file";
	return "is not a regular file";
}

/* Every log found stays open until the end: a directory of many logs may
 * pass the soft limit on open files, which the hard limit allows raising. */
static int raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max)
		return -1;
	rl.rlim_cur = rl.rlim_max;
	return setrlimit(RLIMIT_NOFILE, &rl);
}

int cv_open_input(int dirfd, const char *name, int follow, struct stat *st, const char **why)
{
	int nofollow = follow ? 0 : AT_SYMLINK_NOFOLLOW;
	int fd;

	/* Look first so that a FIFO or a device is not even opened (opening
	 * one has effects on its other end); the fd is checked again below. */
	if (fstatat(dirfd, name, st, nofollow) != 0) {
		*why = strerror(errno);
		return -1;
	}
	if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) {
		*why = kind_of(st->st_mode);
		return -1;
	}
	do
		fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
	while (fd < 0 && errno == EMFILE && raise_nofile() == 0);
	if (fd < 0) {
		/* ELOOP: swapped for a symlink; ENXIO: for a socket. */
		*why = errno == ELOOP ? kind_of(S_IFLNK) : errno == ENXIO ? kind_of(S_IFSOCK)
			: errno == EMFILE ? "too many logs open at once (raise ulimit -n)"
			: strerror(errno);
		return -1;
	}
	if (fstat(fd, st) != 0 || (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))) {
		*why = kind_of(st->st_mode);
		close(fd);
		return -1;
	}
	return fd;
}

int cv_log_reader(const struct cv_log *l, struct evlog_reader **r, char *msg, size_t msgsz)
{
	if (l->chain)
		return evlog_reader_open_chain(r, l->chain, msg, msgsz) ? -1 : 0;
	int fd = fcntl(l->fd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0) {
		snprintf(msg, msgsz, "%s: %s", l->name, strerror(errno));
		return -1;
	}
	return evlog_reader_open_fd(r, fd, l->name, msg, msgsz) ? -1 : 0;
}

int cv_inputs_push(struct cv_inputs *in, const char *name, const char *path, int fd)
{
	if (in->n == in->cap) {
		size_t nc = in->cap ? in->cap * 2 : 16;
		struct cv_log *nl = realloc(in->logs, nc * sizeof(*nl));

		if (!nl) {
			close(fd);
			return -1;
		}
		in->logs = nl;
		in->cap = nc;
	}
	struct cv_log *l = &in->logs[in->n];

	memset(l, 0, sizeof(*l));
	l->fd = fd;
	l->name = strdup(name);
	l->path = strdup(path);
	if (!l->name || !l->path) {
		free(l->name);
		free(l->path);
		close(fd);
		return -1;
	}
	in->n++;
	return 0;
}

void cv_log_free(struct cv_log *l)
{
	close(l->fd);
	evlog_chain_close(l->chain);
	free(l->name);
	free(l->path);
	l->chain = NULL;
}

void cv_inputs_drop_from(struct cv_inputs *in, size_t from, int unlink_them)
{
	while (in->n > from) {
		struct cv_log *l = &in->logs[--in->n];

		if (unlink_them)
			unlink(l->path);
		cv_log_free(l);
	}
}

/* Forget log i, keeping the order of the rest. */
static void drop_at(struct cv_inputs *in, size_t i)
{
	cv_log_free(&in->logs[i]);
	memmove(&in->logs[i], &in->logs[i + 1], (in->n - i - 1) * sizeof(in->logs[0]));
	in->n--;
}

/* Already taken (same device and inode)? */
static int seen_before(const struct cv_inputs *in, const struct stat *st)
{
	for (size_t i = 0; i < in->n; i++) {
		struct stat o;

		if (fstat(in->logs[i].fd, &o) == 0 && o.st_dev == st->st_dev &&
		    o.st_ino == st->st_ino)
			return 1;
	}
	return 0;
}

void cv_inputs_note(struct cv_inputs *in, const char *path, const char *why)
{
	in->skipped++;
	cv_buf_printf(&in->notes, "skipped %s: %s\n", path, why);
}

/* A regular file: a log (kept open), an archive, or skipped. Takes fd. */
static int add_file(struct cv_inputs *in, int fd, const char *path, const struct stat *st,
		    int origin, int depth, char *err, size_t errsz)
{
	int quiet_skip = origin != CV_FROM_INPUT && depth > 0;
	int r = 0;

	if (has_magic_fd(fd)) {
		if (seen_before(in, st)) {
			close(fd);
			return 0;
		}
		if (cv_inputs_push(in, path, path, fd))
			return -1;
		in->logs[in->n - 1].origin = origin;
		in->logs[in->n - 1].named = depth == 0 && origin == CV_FROM_INPUT;
		return 0;
	}
	if (quiet_skip)
		in->skipped++;
	else if ((r = cv_unarchive(in, fd, path, err, errsz)) == 0)
		cv_inputs_note(in, path, st->st_size == 0 ? "empty file"
							 : "not an event log (bad magic)");
	close(fd);
	return r < 0 ? -1 : 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	while (n)
		free(names[--n]);
	free(names);
}

/* The names in the directory fd, sorted (a deterministic order): 0, or -1
 * out of memory. A directory that cannot be read lists nothing. */
static int list_names(int fd, char ***out, size_t *n)
{
	int lfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
	struct dirent *de;
	char **names = NULL;
	size_t cap = 0;
	int oom = 0;

	*out = NULL;
	*n = 0;
	if (!d) {
		if (lfd >= 0)
			close(lfd);
		return 0;
	}
	while (!oom && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (*n == cap) {
			char **nn = realloc(names, (cap ? cap * 2 : 64) * sizeof(*nn));

			if (!(oom = !nn)) {
				names = nn;
				cap = cap ? cap * 2 : 64;
			}
		}
		if (!oom && !(oom = !(names[*n] = strdup(de->d_name))))
			(*n)++;
	}
	closedir(d);
	if (oom) {
		free_names(names, *n);
		*n = 0;
		return -1;
	}
	if (names)
		qsort(names, *n, sizeof(*names), cmp_str);
	*out = names;
	return 0;
}

static int add_at(struct cv_inputs *in, int dirfd, const char *name, const char *shown,
		  int depth, int origin, char *err, size_t errsz);

/* The entries of the directory fd (named `path`), each opened through it. */
static int add_dir(struct cv_inputs *in, int fd, const char *path, int depth, int origin,
		   char *err, size_t errsz)
{
	size_t n;
	char **names;
	int rc = 0;

	if (list_names(fd, &names, &n)) {
		snprintf(err, errsz, "out of memory listing %s", path);
		return -1;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		char child[4096];

		if ((size_t)snprintf(child, sizeof(child), "%s/%s", path, names[i]) < sizeof(child))
			rc = add_at(in, fd, names[i], child, depth + 1, origin, err, errsz);
	}
	free_names(names, n);
	return rc;
}

/* One input: `name` in dirfd, shown as `shown`. A final symlink is never
 * followed, except for the directory of a log named as a file (a parent
 * of the user's own path). */
static int add_at(struct cv_inputs *in, int dirfd, const char *name, const char *shown,
		  int depth, int origin, char *err, size_t errsz)
{
	int flat = origin != CV_FROM_INPUT;
	int follow = depth == 0 && origin == CV_FROM_SIBLING;
	const char *why;
	struct stat st;
	int fd = cv_open_input(dirfd, name, follow, &st, &why), rc;

	if (fd < 0) {
		if (depth == 0) {
			snprintf(err, errsz, "input %s: %s", shown, why);
			return -1;
		}
		/* --cupti-dir and a main log's directory (often /tmp) hold
		 * anything: counted, not listed. */
		if (flat)
			in->skipped++;
		else
			cv_inputs_note(in, shown, why);
		return 0;
	}
	if (S_ISREG(st.st_mode))
		return add_file(in, fd, shown, &st, origin, depth, err, errsz);
	/* --cupti-dir and a main log's directory are flat; -i directories
	 * may nest. */
	rc = depth > (flat ? 0 : DIR_DEPTH_MAX) ? 0 : add_dir(in, fd, shown, depth, origin, err, errsz);
	close(fd);
	return rc;
}

/* ------------------------------------------------------------- segments */

/* Where log l's segments are looked for. */
struct seg_lookup {
	const struct cv_inputs *in;
	const struct cv_log *l;
	int dirfd;              /* l's directory (-1: an archive member's, or none) */
};

/* A segment named `name` beside l: one of the inputs of that name (an
 * archive's members are found so, whatever their order), else the file in
 * l's directory. Checked by the chain against its record. */
static int seg_lookup(void *ctx, const char *name)
{
	const struct seg_lookup *sl = ctx;
	/* its directory, or the archive it is a member of: "a.tar!dir/" */
	const char *slash = strrchr(sl->l->name, '/'), *bang = strrchr(sl->l->name, '!');
	if (bang && (!slash || bang > slash))
		slash = bang;
	size_t dlen = slash ? (size_t)(slash - sl->l->name) + 1 : 0, nlen = strlen(name);

	for (size_t i = 0; i < sl->in->n; i++) {
		const char *o = sl->in->logs[i].name;

		if (strlen(o) == dlen + nlen && !strncmp(o, sl->l->name, dlen) && !strcmp(o + dlen, name)) {
			int fd = fcntl(sl->in->logs[i].fd, F_DUPFD_CLOEXEC, 0);
			return fd < 0 ? -errno : fd;
		}
	}
	return sl->dirfd < 0 ? -ENOENT : evlog_chain_lookup_at((void *)&sl->dirfd, name);
}

/* Does log a's chain hold log b's file (other than a's own)? */
static int covers(const struct cv_log *a, const struct cv_log *b)
{
	struct stat sb, sc;

	if (!a->chain || fstat(b->fd, &sb))
		return 0;
	for (size_t k = 0; k + 1 < evlog_chain_count(a->chain); k++)
		if (!fstat(evlog_chain_fd(a->chain, k), &sc) && sc.st_dev == sb.st_dev &&
		    sc.st_ino == sb.st_ino)
			return 1;
	return 0;
}

/* Log i's earlier segments: found and checked, or the conversion stops
 * with the message naming the missing or altered one. */
static int resolve_chain(struct cv_inputs *in, size_t i, char *err, size_t errsz)
{
	struct cv_log *l = &in->logs[i];
	struct seg_lookup sl = { .in = in, .l = l, .dirfd = -1 };
	struct evlog_chain *c;
	char msg[1024];

	if (!strcmp(l->name, l->path)) { /* not an archive member */
		char *copy = strdup(l->path);
		const char *slash = copy ? strrchr(copy, '/') : NULL;

		if (copy && slash)
			copy[slash - copy + (slash == copy)] = 0;
		sl.dirfd = open(copy && slash ? copy : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		free(copy);
	}
	int fd = fcntl(l->fd, F_DUPFD_CLOEXEC, 0);
	int rc = fd < 0 ? -1 : evlog_chain_open(&c, fd, l->name, seg_lookup, &sl, msg, sizeof(msg));

	if (sl.dirfd >= 0)
		close(sl.dirfd);
	if (rc == -EVLOG_ESEGMENT) {
		snprintf(err, errsz, "%s", msg);
		return -1;
	}
	if (rc) /* not readable as a log: pass 1 says why */
		return 0;
	if (evlog_chain_count(c) > 1)
		l->chain = c;
	else
		evlog_chain_close(c);
	return 0;
}

/* The logs added from `from` on, in segments: each segment found on its
 * own belongs to the log its chain ends in. What the user named stands:
 * a log found beside it or in --cupti-dir never replaces it; of two
 * inputs, the longer chain is kept (a dead collector's partial file over
 * its published segments), named if either was. */
/* A log's segment number (its header's; 0 for a first or only file). */
static uint32_t seg_no(const struct cv_log *l)
{
	struct evlog_reader *r;
	char msg[256];
	int fd = fcntl(l->fd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0 || evlog_reader_open_fd(&r, fd, l->name, msg, sizeof(msg)))
		return 0;
	uint32_t k = evlog_reader_header(r)->segment;

	evlog_reader_close(r);
	return k;
}

struct by_seg {
	size_t i;
	uint32_t seg;
};

static int cmp_seg_desc(const void *a, const void *b)
{
	const struct by_seg *x = a, *y = b;

	return x->seg != y->seg ? (x->seg < y->seg ? 1 : -1) : (x->i > y->i) - (x->i < y->i);
}

/* Chains from the latest segment found down, each segment checked once:
 * one that a chain already holds is not followed again. */
static int resolve_chains(struct cv_inputs *in, size_t from, char *err, size_t errsz)
{
	size_t n = in->n - from;
	struct by_seg *o = calloc(n ? n : 1, sizeof(*o));

	if (!o) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	for (size_t k = 0; k < n; k++)
		o[k] = (struct by_seg){ from + k, seg_no(&in->logs[from + k]) };
	qsort(o, n, sizeof(*o), cmp_seg_desc);
	int rc = 0;

	for (size_t k = 0; k < n && !rc; k++) {
		int held = 0;

		for (size_t j = 0; j < in->n && !held && o[k].seg; j++)
			held = covers(&in->logs[j], &in->logs[o[k].i]);
		if (!held)
			rc = resolve_chain(in, o[k].i, err, errsz);
	}
	free(o);
	return rc;
}

static int take_chains(struct cv_inputs *in, size_t from, char *err, size_t errsz)
{
	if (resolve_chains(in, from, err, errsz))
		return -1;
	for (size_t i = from; i < in->n;) {
		struct cv_log *l = &in->logs[i];
		int drop_new = 0;

		for (size_t j = 0; j < in->n && !drop_new; j++) {
			if (j == i || !(covers(&in->logs[j], l) || covers(l, &in->logs[j])))
				continue;
			if (l->origin != CV_FROM_INPUT || covers(&in->logs[j], l)) {
				in->logs[j].named |= l->named && covers(&in->logs[j], l);
				drop_new = 1;
			} else {
				l->named |= in->logs[j].named;
				drop_at(in, j);
				i -= j < i;
				l = &in->logs[i];
				j = (size_t)-1; /* look again from the start */
			}
		}
		if (drop_new)
			drop_at(in, i);
		else
			i++;
	}
	return 0;
}

int cv_inputs_add(struct cv_inputs *in, const char *path, int origin, char *err, size_t errsz)
{
	uint64_t before = in->skipped;
	size_t from = in->n;

	*err = 0;
	if (add_at(in, AT_FDCWD, path, path, 0, origin, err, errsz) ||
	    take_chains(in, from, err, errsz))
		return -1;
	if (origin == CV_FROM_CUPTI && in->skipped > before)
		cv_buf_printf(&in->notes, "%s: ignored %llu files that are not event logs\n", path,
			      (unsigned long long)(in->skipped - before));
	else if (origin == CV_FROM_SIBLING) /* other files beside a log are no news */
		in->skipped = before;
	return 0;
}

struct hdr_info {
	char host[256];
	uint64_t rt;
	int ok;
};

static struct hdr_info read_hdr(const struct cv_log *l)
{
	struct hdr_info hi = { .ok = 0 };
	struct evlog_reader *r;
	char msg[256];

	if (cv_log_reader(l, &r, msg, sizeof(msg)))
		return hi;
	const struct evlog_header *h = evlog_reader_header(r);

	snprintf(hi.host, sizeof(hi.host), "%.*s", (int)(h->host.len < 255 ? h->host.len : 255),
		 h->host.len ? h->host.ptr : "");
	hi.rt = h->realtime_ns;
	hi.ok = 1;
	evlog_reader_close(r);
	return hi;
}

void cv_inputs_filter_cupti(struct cv_inputs *in, const unsigned char *old_join)
{
	uint64_t start = UINT64_MAX;
	size_t n_main = 0;
	char (*hosts)[256] = calloc(in->n ? in->n : 1, sizeof(*hosts));

	if (!hosts)
		return;
	for (size_t i = 0; i < in->n; i++) {
		if (in->logs[i].origin != CV_FROM_INPUT)
			continue;
		struct hdr_info h = read_hdr(&in->logs[i]);

		if (!h.ok)
			continue;
		memcpy(hosts[n_main++], h.host, sizeof(h.host));
		if (h.rt && h.rt < start)
			start = h.rt;
	}
	for (size_t i = 0; n_main && i < in->n; i++) {
		struct cv_log *l = &in->logs[i];
		struct stat st;
		int same_host = 0;

		if (l->origin != CV_FROM_CUPTI || l->bad || !old_join[i])
			continue;
		struct hdr_info h = read_hdr(l);

		for (size_t k = 0; k < n_main && h.ok; k++)
			same_host |= !strcmp(hosts[k], h.host);
		if (h.ok && !same_host) {
			l->bad = 1;
			in->skipped++;
			cv_buf_printf(&in->notes, "skipped %s: from host %s, not the profiled one\n",
				      l->name, h.host);
		} else if (start != UINT64_MAX && fstat(l->fd, &st) == 0 &&
			   (uint64_t)st.st_mtim.tv_sec * 1000000000ULL + (uint64_t)st.st_mtim.tv_nsec +
				   1000000000ULL < start) {
			l->bad = 1;
			in->skipped++;
			cv_buf_printf(&in->notes, "skipped %s: last written before the profile "
				      "started (an older run)\n", l->name);
		}
	}
	free(hosts);
}

/* Our private directory of extracted members (names m<N>), through its fd. */
static void rm_tmpdir(int fd, const char *dir)
{
	int lfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
	struct dirent *de;

	if (d) {
		while ((de = readdir(d)))
			if (de->d_name[0] == 'm')
				unlinkat(fd, de->d_name, 0);
		closedir(d);
	} else if (lfd >= 0) {
		close(lfd);
	}
	close(fd);
	rmdir(dir);
}

void cv_inputs_free(struct cv_inputs *in)
{
	cv_inputs_drop_from(in, 0, 0);
	free(in->logs);
	if (in->tmpdir) {
		rm_tmpdir(in->tmpdir_fd, in->tmpdir);
		free(in->tmpdir);
	}
	cv_buf_free(&in->notes);
	memset(in, 0, sizeof(*in));
}
