/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who a launched command runs as (`profile --user USER[:GROUP] -- CMD`).
 * The user and its groups are looked up in the collector, before anything
 * starts (the passwd and group databases may need NSS, which a forked child
 * of a threaded process must not call); the child only makes system calls.
 *
 * A command run as a user other than root keeps no capability at all:
 * effective, permitted, inheritable, ambient and bounding sets are empty.
 * no_new_privs is left unset: the user's set-uid and set-gid programs (su,
 * sudo, passwd, crontab) behave as they do in the user's own shell, except
 * that with an empty bounding set none of them gains a capability.
 */
#ifndef LLMT_RUNAS_H
#define LLMT_RUNAS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Supplementary groups kept at most (a user in more is refused). */
#define LT_RUNAS_MAX_GROUPS 256

struct lt_runas {
	char name[64];      /* as given, for messages */
	uid_t uid;
	gid_t gid;
	int n_groups;       /* supplementary groups, the primary one among them */
	gid_t groups[LT_RUNAS_MAX_GROUPS];
};

/* Resolve "USER" or "USER:GROUP" (names or numbers). USER alone takes the
 * account's primary group and its supplementary groups; a uid with no
 * account needs GROUP. Also refuses a collector that could not switch.
 * 0, or -1 with a one-line err. */
int lt_runas_resolve(const char *spec, struct lt_runas *as, char *err, size_t errsz);

/* In the forked child, before execve: groups, gid, uid, then drop every
 * capability (for a uid other than 0). Only system calls. 0, or -1 with
 * err set (the child should then exit). */
int lt_runas_apply(const struct lt_runas *as, char *err, size_t errsz);

#endif
