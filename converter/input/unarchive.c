/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Archive inputs (.tar, .tar.gz, .tar.zst): their event-log members are
 * extracted into a private temporary directory under TMPDIR, removed at the
 * end (cv_inputs_free). What an archive may expand to is bounded twice: by
 * fixed bounds per member and in all (a few KiB of zstd can hold terabytes
 * of zeros), and by the room left on TMPDIR's file system, in bytes and in
 * inodes, checked before each member is written (its size is in its header)
 * and again should it grow past that. A margin of that file system is left
 * free: TMPDIR is shared with everything else on the node, the
 * conversion's own temporaries included. An archive refused is removed
 * from TMPDIR whole.
 */
#include "converter/conv_int.h"
#include "eventlog/evlog_format.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Bounds on what archives may expand to, per member and for all members of
 * a conversion, in MiB, raised or lowered through the environment. */
#define ARCHIVE_MEMBER_MB_DEFAULT (16u << 10)
#define ARCHIVE_TOTAL_MB_DEFAULT (64u << 10)
/* The share of TMPDIR's file system (blocks and inodes) left free. */
#define ROOM_MARGIN_DIV 32
/* Room is asked for in steps of this much past a member's announced size. */
#define ROOM_STEP (1u << 20)

static int ensure_tmpdir(struct cv_inputs *in, char *err, size_t errsz)
{
	if (in->tmpdir)
		return 0;
	const char *t = getenv("TMPDIR");
	char tmpl[4096];
	int fd;

	snprintf(tmpl, sizeof(tmpl), "%s/llmt-convert.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(tmpl)) {
		snprintf(err, errsz, "cannot create a temporary directory for archive members (%s): %s; "
			 "set TMPDIR to a writable directory", tmpl, strerror(errno));
		return -1;
	}
	fd = open(tmpl, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(in->tmpdir = strdup(tmpl))) {
		snprintf(err, errsz, "cannot open the temporary directory %s: %s", tmpl,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		rmdir(tmpl);
		return -1;
	}
	in->tmpdir_fd = fd;
	return 0;
}

static uint64_t bound_mb(const char *env, unsigned dflt)
{
	const char *s = getenv(env);
	char *end;
	unsigned long long mb = s && *s ? strtoull(s, &end, 10) : 0;

	return (uint64_t)(mb > 0 && mb < (1ull << 30) && !*end ? mb : dflt) << 20;
}

/* The member would pass a bound once n more bytes are written: say which. */
static int past_bound(struct cv_inputs *in, const char *shown, uint64_t member, size_t n,
		      char *err, size_t errsz)
{
	uint64_t mmax = bound_mb("LLMT_ARCHIVE_MEMBER_MB", ARCHIVE_MEMBER_MB_DEFAULT);
	uint64_t tmax = bound_mb("LLMT_ARCHIVE_TOTAL_MB", ARCHIVE_TOTAL_MB_DEFAULT);

	if (member + n > mmax)
		snprintf(err, errsz, "%s: expands past %llu MiB, the bound on one archive member "
			 "(LLMT_ARCHIVE_MEMBER_MB raises it); nothing converted", shown,
			 (unsigned long long)(mmax >> 20));
	else if (in->extracted + n > tmax)
		snprintf(err, errsz, "%s: archive members expand past %llu MiB in all, the bound on "
			 "extraction (LLMT_ARCHIVE_TOTAL_MB raises it); nothing converted", shown,
			 (unsigned long long)(tmax >> 20));
	else
		return 0;
	return 1;
}

#define KIB(x) ((unsigned long long)(((x) + 1023) >> 10))

/* Is there room in TMPDIR for `bytes` more and `inodes` more files, with
 * the margin kept? 1, or 0 with err set. A file system that cannot say
 * (statvfs fails, or counts no inodes) is not judged on that count. */
static int room_for(const struct cv_inputs *in, const char *shown, uint64_t bytes,
		    uint64_t inodes, char *err, size_t errsz)
{
	struct statvfs sv;

	if (fstatvfs(in->tmpdir_fd, &sv) != 0)
		return 1;
	uint64_t bs = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
	uint64_t need = (bytes + bs - 1) / bs, keep = sv.f_blocks / ROOM_MARGIN_DIV;
	uint64_t keep_ino = sv.f_files / ROOM_MARGIN_DIV + 1;

	if (sv.f_bavail < need + keep)
		snprintf(err, errsz, "%s: needs %llu KiB in TMPDIR (%s), whose file system has "
			 "%llu KiB free and keeps %llu KiB of it free; nothing converted (set TMPDIR "
			 "to a larger file system)", shown, KIB(need * bs), in->tmpdir,
			 KIB(sv.f_bavail * bs), KIB(keep * bs));
	else if (sv.f_files && sv.f_favail < inodes + keep_ino)
		snprintf(err, errsz, "%s: needs %llu more inode(s) in TMPDIR (%s), whose file system "
			 "has %llu free inodes and keeps %llu of them free; nothing converted (set "
			 "TMPDIR to a larger file system)", shown, (unsigned long long)inodes,
			 in->tmpdir, (unsigned long long)sv.f_favail, (unsigned long long)keep_ino);
	else
		return 1;
	return 0;
}

static int write_chunk(int fd, const char *buf, size_t n, const char *shown, char *err,
		       size_t errsz)
{
	for (size_t off = 0; off < n;) {
		ssize_t w = write(fd, buf + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			snprintf(err, errsz, "%s: writing it to TMPDIR failed: %s; nothing converted",
				 shown, w < 0 ? strerror(errno) : "short write");
			return -1;
		}
		off += (size_t)w;
	}
	return 0;
}

/* Copy the rest of the current member (`buf` holds its first n bytes) into
 * fd, within the bounds and the room; 0, or -1 with err set. */
static int copy_member(struct cv_inputs *in, struct archive *a, int fd, char *buf, size_t cap,
		       ssize_t n, uint64_t reserved, const char *shown, char *err, size_t errsz)
{
	uint64_t member = 0;

	for (; n > 0; n = archive_read_data(a, buf, cap)) {
		if (past_bound(in, shown, member, (size_t)n, err, errsz))
			return -1;
		if (member + (uint64_t)n > reserved) {
			uint64_t more = member + (uint64_t)n - reserved + ROOM_STEP;

			if (!room_for(in, shown, more, 0, err, errsz))
				return -1;
			reserved += more;
		}
		if (write_chunk(fd, buf, (size_t)n, shown, err, errsz))
			return -1;
		member += (uint64_t)n;
		in->extracted += (uint64_t)n;
	}
	if (n < 0)
		cv_buf_printf(&in->notes, "archive member cut short: %s (kept what was read)\n",
			      shown);
	return 0;
}

/* The current member, if it is an event log, into a fresh file of the
 * temporary directory, added to the inputs: 1. 0: not a log (nothing
 * written). -1 with err set: past a bound, no room, or a failed write (the
 * member's file removed). */
static int extract_member(struct cv_inputs *in, struct archive *a, struct archive_entry *e,
			  const char *shown, char *err, size_t errsz)
{
	char buf[1 << 16];
	ssize_t n = archive_read_data(a, buf, sizeof(buf));
	uint64_t announced = archive_entry_size_is_set(e) ? (uint64_t)archive_entry_size(e) : 0;
	char name[32], dst[4200];
	int fd;

	if (n < EVF_MAGIC_LEN || memcmp(buf, EVF_MAGIC, EVF_MAGIC_LEN) != 0)
		return 0;
	/* The bounds first (refused whatever the room), on the size its header
	 * announces, then the room; both checked again as it is written. */
	if (past_bound(in, shown, 0, announced, err, errsz) || ensure_tmpdir(in, err, errsz) ||
	    !room_for(in, shown, announced, 1, err, errsz))
		return -1;
	snprintf(name, sizeof(name), "m%zu", in->n);
	snprintf(dst, sizeof(dst), "%s/%s", in->tmpdir, name);
	fd = openat(in->tmpdir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errsz, "%s: cannot create %s: %s; nothing converted", shown, dst,
			 strerror(errno));
		return -1;
	}
	if (copy_member(in, a, fd, buf, sizeof(buf), n, announced, shown, err, errsz)) {
		close(fd);
		unlinkat(in->tmpdir_fd, name, 0);
		return -1;
	}
	if (cv_inputs_push(in, shown, dst, fd)) {
		unlinkat(in->tmpdir_fd, name, 0);
		snprintf(err, errsz, "out of memory reading %s", shown);
		return -1;
	}
	return 1;
}

static struct archive *open_archive(int fd)
{
	struct archive *a = archive_read_new();

	if (!a)
		return NULL;
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_none(a);
	archive_read_support_format_tar(a);
	if (lseek(fd, 0, SEEK_SET) != 0 || archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK) {
		archive_read_free(a);
		return NULL;
	}
	return a;
}

int cv_unarchive(struct cv_inputs *in, int fd, const char *shown, char *err, size_t errsz)
{
	struct archive *a = open_archive(fd);
	struct archive_entry *e;
	size_t first = in->n;
	int members = 0, logs = 0, r;

	if (!a || archive_read_next_header(a, &e) != ARCHIVE_OK) {
		archive_read_free(a);
		return 0;
	}
	do {
		const char *mname = archive_entry_pathname(e);
		char mshown[8400];

		members++;
		if (archive_entry_filetype(e) != AE_IFREG)
			continue;
		snprintf(mshown, sizeof(mshown), "%s!%s", shown, mname ? mname : "?");
		r = extract_member(in, a, e, mshown, err, errsz);
		if (r < 0) {
			cv_inputs_drop_from(in, first, 1);
			archive_read_free(a);
			return -1;
		}
		if (r > 0)
			logs++;
		else
			cv_inputs_note(in, mshown, "not an event log");
	} while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK);
	if (r != ARCHIVE_EOF)
		cv_buf_printf(&in->notes, "%s: archive damaged after %d members: %s\n", shown,
			      members, archive_error_string(a) ? archive_error_string(a) : "?");
	archive_read_free(a);
	if (!logs)
		cv_inputs_note(in, shown, "archive holds no event logs");
	return 1;
}
