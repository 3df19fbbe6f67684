// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runas.h"

/* A uid or gid written as digits; (id_t)-1 means "unchanged" to the kernel. */
static bool parse_id(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;

	if (!*s || strspn(s, "0123456789") != strlen(s))
		return false;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v >= 0xffffffffUL)
		return false;
	*out = (unsigned)v;
	return true;
}

static int resolve_group(const char *spec, const char *group, gid_t *gid, char *err, size_t errsz)
{
	struct group *gr;
	unsigned id;

	if (parse_id(group, &id)) {
		*gid = id;
		return 0;
	}
	if (*group && (gr = getgrnam(group))) {
		*gid = gr->gr_gid;
		return 0;
	}
	snprintf(err, errsz, "--user %s: no such group '%s'", spec, group);
	return -1;
}

/* The account of USER (name or uid), NULL when there is none (err set for
 * a name; a bare uid may have no account). */
static struct passwd *find_user(const char *spec, const char *user, unsigned *uid, char *err, size_t errsz)
{
	struct passwd *pw;

	if (parse_id(user, uid))
		return getpwuid(*uid);
	if (*user && (pw = getpwnam(user))) {
		*uid = pw->pw_uid;
		return pw;
	}
	snprintf(err, errsz, "--user %s: no such user '%s'", spec, user);
	return NULL;
}

static int account_groups(const char *spec, const struct passwd *pw, struct lt_runas *as, char *err,
			  size_t errsz)
{
	int n = LT_RUNAS_MAX_GROUPS;

	if (getgrouplist(pw->pw_name, as->gid, as->groups, &n) < 0) {
		snprintf(err, errsz, "--user %s: %s is in more than %d groups", spec, pw->pw_name,
			 LT_RUNAS_MAX_GROUPS);
		return -1;
	}
	as->n_groups = n;
	return 0;
}

static bool have_cap(int cap)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2] = { 0 };

	return !syscall(SYS_capget, &hdr, d) && (d[cap / 32].effective & (1u << (cap % 32)));
}

/* Said here, in one line, rather than by the child after the launch. */
static int check_can_switch(const char *spec, const struct lt_runas *as, char *err, size_t errsz)
{
	if (have_cap(CAP_SETUID) && have_cap(CAP_SETGID) && (as->uid == 0 || have_cap(CAP_SETPCAP)))
		return 0;
	snprintf(err, errsz, "--user %s: running a command as another user needs CAP_SETUID, CAP_SETGID "
		 "and CAP_SETPCAP; run llmtracker as root", spec);
	return -1;
}

int lt_runas_resolve(const char *spec, struct lt_runas *as, char *err, size_t errsz)
{
	char user[sizeof(as->name)];
	const char *colon = strchr(spec, ':');
	struct passwd *pw;
	unsigned uid;

	memset(as, 0, sizeof(*as));
	if (strlen(spec) >= sizeof(user) || !*spec || spec == colon) {
		snprintf(err, errsz, "--user '%.64s': expected USER or USER:GROUP (names or numbers, "
			 "at most %zu characters)", spec, sizeof(user) - 1);
		return -1;
	}
	snprintf(user, sizeof(user), "%.*s", colon ? (int)(colon - spec) : (int)strlen(spec), spec);
	memcpy(as->name, user, sizeof(as->name));
	pw = find_user(spec, user, &uid, err, errsz);
	if (!pw && !parse_id(user, &uid))
		return -1;
	as->uid = uid;
	if (colon ? resolve_group(spec, colon + 1, &as->gid, err, errsz) : 0)
		return -1;
	if (!colon && !pw) {
		snprintf(err, errsz, "--user %s: no account has uid %u, so it has no group: give one "
			 "(--user %u:GID)", spec, uid, uid);
		return -1;
	}
	if (!colon)
		as->gid = pw->pw_gid;
	if (pw && account_groups(spec, pw, as, err, errsz))
		return -1;
	if (!pw) { /* no account: its one group is the one given */
		as->groups[0] = as->gid;
		as->n_groups = 1;
	}
	return check_can_switch(spec, as, err, errsz);
}

/* ------------------------------------------------------- in the child */

static int fail(char *err, size_t errsz, const char *what)
{
	snprintf(err, errsz, "%s: %s", what, strerror(errno));
	return -1;
}

/* Bounding and ambient sets, while CAP_SETPCAP is still held; keep-caps off,
 * so setresuid() to a uid other than 0 empties effective and permitted. */
static int drop_caps(char *err, size_t errsz)
{
	int cap;

	for (cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0))
			return fail(err, errsz, "dropping the capability bounding set");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && errno != EINVAL)
		return fail(err, errsz, "clearing the ambient capabilities");
	if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0))
		return fail(err, errsz, "clearing keep-caps");
	return 0;
}

/* The inheritable set too, and a check: a securebits setting could have
 * kept the others through setresuid(). */
static int clear_all_caps(char *err, size_t errsz)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2] = { 0 };

	if (syscall(SYS_capset, &hdr, d))
		return fail(err, errsz, "clearing the capabilities");
	if (syscall(SYS_capget, &hdr, d) || d[0].permitted || d[1].permitted || d[0].effective ||
	    d[1].effective || d[0].inheritable || d[1].inheritable) {
		snprintf(err, errsz, "capabilities are still held after the switch");
		return -1;
	}
	return 0;
}

int lt_runas_apply(const struct lt_runas *as, char *err, size_t errsz)
{
	if (setgroups((size_t)as->n_groups, as->groups))
		return fail(err, errsz, "setgroups");
	if (setresgid(as->gid, as->gid, as->gid))
		return fail(err, errsz, "setgid");
	if (as->uid != 0 && drop_caps(err, errsz))
		return -1;
	if (setresuid(as->uid, as->uid, as->uid))
		return fail(err, errsz, "setuid");
	return as->uid != 0 ? clear_all_caps(err, errsz) : 0;
}
