// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "io.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

int lt_write_all(int fd, const void *p, size_t n)
{
	const char *b = p;

	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -(errno = EIO);
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The read/write way, from offset *off of in on. */
static int copy_rw(int out, int in, uint64_t *off, uint64_t end)
{
	char buf[1 << 16];

	while (*off < end) {
		size_t want = end - *off < sizeof(buf) ? (size_t)(end - *off) : sizeof(buf);
		ssize_t r = pread(in, buf, want, (off_t)*off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		int rc = lt_write_all(out, buf, (size_t)r);
		if (rc)
			return rc;
		*off += (uint64_t)r;
	}
	return 0;
}

int lt_copy_range(int out, int in, uint64_t *off, uint64_t end)
{
	while (*off < end) {
		off_t o = (off_t)*off;
		uint64_t left = end - *off;
		ssize_t r = copy_file_range(in, &o, out, NULL, left < (1u << 30) ? left : (1u << 30), 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP ||
			      errno == EBADF || errno == EPERM || errno == ETXTBSY))
			return copy_rw(out, in, off, end); /* not here: the plain way */
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		*off += (uint64_t)r;
	}
	return 0;
}

int lt_copy_bounded(int out, int in, uint64_t max, uint64_t *copied)
{
	*copied = 0;
	return lt_copy_range(out, in, copied, max);
}

/* Whether a failed call means "this file system has no such operation",
 * as opposed to a real refusal (EEXIST, EACCES, ENOSPC, EIO...). */
static int unsupported(int e)
{
	return e == EINVAL || e == ENOSYS || e == EOPNOTSUPP || e == EPERM;
}

/* The weakest way, for file systems with neither rename flags nor hard links
 * (object-store FUSE mounts: s3fs and ossfs refuse both; some SMB servers
 * refuse link): look, then rename. Another client creating `to` between the
 * two steps is not seen: the names the product publishes carry their
 * writer's host (and pid or session), so only a second writer given the
 * very same name can race, and on an object store the last upload of a key
 * wins whatever the client does. */
static int rename_if_free(int sfd, const char *from, int dfd, const char *to)
{
	struct stat st;

	if (fstatat(dfd, to, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return -EEXIST;
	if (errno != ENOENT)
		return -errno;
	return renameat(sfd, from, dfd, to) ? -errno : 0;
}

/* What each file system seen so far lacks, by st_dev: trying rename flags
 * and link again costs an object-store mount 8 requests a file (a failed
 * call still makes the kernel look the name up, 4 requests on s3fs). Only
 * "no such operation" answers are kept (not EPERM, which may be a refusal
 * of this one file). A device number reused by a later mount in the same
 * process at worst makes it use a weaker way. */
enum { PUB_RENAME2, PUB_LINK, PUB_LOOK };
#define PUB_MEMO 16
static struct { dev_t dev; int way; } pub_memo[PUB_MEMO];
static int pub_memo_n;
static pthread_mutex_t pub_memo_mu = PTHREAD_MUTEX_INITIALIZER;

static int pub_way(int dfd, dev_t *dev)
{
	struct stat st;
	int way = PUB_RENAME2;

	*dev = 0;
	if (fstat(dfd, &st))
		return way;
	*dev = st.st_dev;
	pthread_mutex_lock(&pub_memo_mu);
	for (int i = 0; i < pub_memo_n; i++)
		if (pub_memo[i].dev == st.st_dev)
			way = pub_memo[i].way;
	pthread_mutex_unlock(&pub_memo_mu);
	return way;
}

static void pub_lacks(dev_t dev, int way)
{
	int i;

	pthread_mutex_lock(&pub_memo_mu);
	for (i = 0; i < pub_memo_n && pub_memo[i].dev != dev; i++)
		;
	if (i < PUB_MEMO) {
		pub_memo[i].dev = dev;
		pub_memo[i].way = way;
		pub_memo_n += i == pub_memo_n;
	}
	pthread_mutex_unlock(&pub_memo_mu);
}

static int missing(int e)
{
	return e == EINVAL || e == ENOSYS || e == EOPNOTSUPP;
}

/* By capability, strongest first. Local file systems (ext4, xfs, btrfs,
 * tmpfs) take RENAME_NOREPLACE: one atomic step. NFS (v3 and v4) takes no
 * rename flags (EINVAL) but link is atomic on the server and never replaces
 * (EEXIST), and rename is atomic: link, then unlink the old name. FUSE
 * mounts without rename2 give EINVAL; s3fs/ossfs then give EOPNOTSUPP for
 * link and EPERM is what the kernel returns for file systems that have no
 * link at all: rename_if_free. What a file system lacks is remembered. */
int lt_rename_noreplace(int sfd, const char *from, int dfd, const char *to)
{
	dev_t dev;
	int way = pub_way(dfd, &dev);

	if (way == PUB_RENAME2) {
		if (renameat2(sfd, from, dfd, to, RENAME_NOREPLACE) == 0)
			return 0;
		if (!unsupported(errno))
			return -errno;
		if (missing(errno) && dev)
			pub_lacks(dev, PUB_LINK);
	}
	if (way <= PUB_LINK) {
		if (linkat(sfd, from, dfd, to, 0) == 0) {
			unlinkat(sfd, from, 0);
			return 0;
		}
		if (!unsupported(errno))
			return -errno;
		if (missing(errno) && dev)
			pub_lacks(dev, PUB_LOOK);
	}
	return rename_if_free(sfd, from, dfd, to);
}

int lt_publish_noreplace(int dirfd, const char *from, const char *to)
{
	return lt_rename_noreplace(dirfd, from, dirfd, to);
}

/* statfs f_type of the file systems whose calls go over the network. */
static const struct {
	uint32_t magic;
	const char *kind;
} net_fs[] = {
	{ 0x65735546, "FUSE" },    /* s3fs, ossfs, gcsfuse, sshfs, GlusterFS, JuiceFS... */
	{ 0x6969, "NFS" },         /* NFS v2, v3 and v4 */
	{ 0xFF534D42, "CIFS" },    /* SMB through the cifs client */
	{ 0xFE534D42, "SMB2" },    /* SMB 2/3 (the cifs client's newer magic) */
	{ 0x517B, "SMB" },         /* the old smbfs */
	{ 0x00C36400, "Ceph" },    /* CephFS, the kernel client */
	{ 0x01021997, "9P" },      /* v9fs: 9P over a network or a VM's virtio */
	{ 0x5346414F, "AFS" },     /* kAFS */
	{ 0x6B414653, "AFS" },     /* AFS, the fs's own magic */
	{ 0x73757245, "Coda" },    /* Coda */
	{ 0x564C, "NCP" },         /* NetWare */
	{ 0x0BD00BD0, "Lustre" },  /* Lustre (out of tree) */
	{ 0x47504653, "GPFS" },    /* IBM Spectrum Scale (out of tree) */
	{ 0x19830326, "BeeGFS" },  /* BeeGFS (out of tree) */
	{ 0x20030528, "OrangeFS" },/* OrangeFS / PVFS2 */
	{ 0x01161970, "GFS2" },    /* GFS2: a cluster's shared block device */
	{ 0x7461636F, "OCFS2" },   /* OCFS2: the same */
};

int lt_fs_network(int fd, const char **kind)
{
	struct statfs sf;

	if (fstatfs(fd, &sf))
		return -errno;
	for (size_t i = 0; i < sizeof(net_fs) / sizeof(net_fs[0]); i++)
		if ((uint32_t)sf.f_type == net_fs[i].magic) { /* a long, signed on 32 bits */
			if (kind)
				*kind = net_fs[i].kind;
			return 1;
		}
	return 0;
}
