/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup_join: put a helper process of ours into the cgroups of a target,
 * in every hierarchy mounted here (cgroup v2, and each v1 hierarchy of a
 * hybrid host), so that what kills or freezes the collector's cgroup (a
 * pod's deletion, an OOM group kill, a freezer) does not reach it, and
 * what ends the target's does.
 */
#ifndef LLMT_CGROUP_JOIN_H
#define LLMT_CGROUP_JOIN_H

#include <sys/types.h>

/* Move pid into like's cgroups, best effort. Returns how many hierarchies
 * it joined; a hierarchy it could not join is left as it was. */
int lt_cg_join_like(pid_t pid, pid_t like);

#endif
