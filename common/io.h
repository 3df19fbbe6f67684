/* SPDX-License-Identifier: Apache-2.0 */
/* File output that survives short writes and signals, and publishing a
 * finished file under its final name without replacing anything. */
#ifndef LLMT_COMMON_IO_H
#define LLMT_COMMON_IO_H

#include <stddef.h>
#include <stdint.h>

/* Write all n bytes of p to fd, looping over short writes and EINTR:
 * 0, or -errno with errno set (a write that makes no progress: EIO). */
int lt_write_all(int fd, const void *p, size_t n);

/* Copy at most `max` bytes of `in` from offset 0 to `out` at its offset
 * (copy_file_range where the file systems take it, else read/write; in's
 * own offset is left alone): the bytes copied in *copied (fewer where in
 * is shorter). 0 or -errno. */
int lt_copy_bounded(int out, int in, uint64_t max, uint64_t *copied);
/* The same from *off of in up to end, *off moved past what was copied. */
int lt_copy_range(int out, int in, uint64_t *off, uint64_t end);

/* Give sfd/from the name dfd/to, never replacing a file already there, by
 * what the file system can do: renameat2(RENAME_NOREPLACE) (local), link
 * and unlink (NFS), or look and rename (object-store FUSE mounts, which
 * have neither; see io.c for what each guarantees). 0 or -errno (-EEXIST:
 * `to` exists, `from` is left as it is). */
int lt_rename_noreplace(int sfd, const char *from, int dfd, const char *to);

/* lt_rename_noreplace within one directory. */
int lt_publish_noreplace(int dirfd, const char *from, const char *to);

/* Is the file system of fd one whose calls go over the network (a FUSE
 * mount such as s3fs or ossfs, NFS, SMB, ...: io.c lists them), where a
 * close may wait for an upload and any call for a stalled server? 1 (with
 * *kind its name), 0 local, -errno. */
int lt_fs_network(int fd, const char **kind);

#endif
