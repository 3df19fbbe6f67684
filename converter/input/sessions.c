/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which of the logs found make the profiles given: by session id, never by
 * file time (schemas/eventlog.md 5.1).
 *
 * A profile is one collector log (the "main" log: any log the injected
 * library did not write) and the injected library's logs carrying its
 * session id. Main logs come from the inputs only (a file named, or found
 * in an -i directory or archive); each one named as a file with a session
 * brings the library logs of its session from its own directory (read
 * flat), and --cupti-dir adds more. Everything else found there belongs to
 * other profiles: left out, and named in one line. Main logs without a
 * session (a test's, another producer's) join by host and time instead:
 * --cupti-dir's logs without a session of the same host, last written after
 * the profile started (cv_inputs_filter_cupti). A main log with a session
 * records each library log the collector published (name, size, digest: liblogs.c): of its session, only those join,
 * and any other library log carrying its session id is left out and named
 * with the reason (the id is readable by anyone who can read a log).
 */
#include "converter/conv_int.h"
#include "eventlog/evlog_format.h"

#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LEFT_OUT_NAMED 8 /* names in the "left out" line; the rest are counted */

struct cv_head cv_read_head(int fd, const char *name)
{
	struct cv_head h = { 0 };
	struct evlog_reader *r;
	char msg[256];
	int rfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);

	if (rfd < 0 || evlog_reader_open_fd(&r, rfd, name, msg, sizeof(msg)))
		return h;
	const struct evlog_header *eh = evlog_reader_header(r);

	h.ok = 1;
	h.lib = eh->producer.len == 6 && !memcmp(eh->producer.ptr, "inject", 6);
	memcpy(h.session, eh->session, sizeof(h.session));
	h.records_libs = !h.lib && evlog_session_set(h.session);
	snprintf(h.host, sizeof(h.host), "%.*s", (int)(eh->host.len < 255 ? eh->host.len : 255),
		 eh->host.len ? eh->host.ptr : "");
	evlog_reader_close(r);
	return h;
}

/* The sessions of the profiles given, a small set. */
struct sessions {
	uint8_t (*v)[EVLOG_SESSION_LEN];
	size_t n, cap;
};

static int sessions_has(const struct sessions *s, const uint8_t *id)
{
	for (size_t i = 0; i < s->n; i++)
		if (!memcmp(s->v[i], id, EVLOG_SESSION_LEN))
			return 1;
	return 0;
}

static int sessions_add(struct sessions *s, const uint8_t *id)
{
	if (!evlog_session_set(id) || sessions_has(s, id))
		return 0;
	if (lt_grow((void **)&s->v, &s->cap, s->n + 1, EVLOG_SESSION_LEN, 4))
		return -1;
	memcpy(s->v[s->n++], id, EVLOG_SESSION_LEN);
	return 0;
}

struct select {
	struct cv_inputs *in;
	struct cv_head *head;   /* per log */
	size_t n_head, cap_head;
	struct sessions want;
	int old_mains;          /* main logs without a session */
	const char *old_main;   /* the first of them, for the line that says so */
	struct sessions vouched; /* sessions whose main log records its library logs */
	struct cv_liblogs libs;  /* what those main logs record */
};

/* Read the headers of logs added since the last call. */
static int read_heads(struct select *st)
{
	struct cv_inputs *in = st->in;

	if (lt_grow((void **)&st->head, &st->cap_head, in->n, sizeof(*st->head), 16))
		return -1;
	for (; st->n_head < in->n; st->n_head++)
		st->head[st->n_head] = cv_read_head(in->logs[st->n_head].fd, in->logs[st->n_head].name);
	return 0;
}

static int is_main(const struct cv_log *l, const struct cv_head *h)
{
	return l->origin == CV_FROM_INPUT && !(h->ok && h->lib);
}

/* The directory of each main log named as a file, once each: its other
 * logs are candidates (the library's logs are published beside it). */
static int add_siblings(struct select *st, char *err, size_t errsz)
{
	struct cv_inputs *in = st->in;
	size_t n0 = in->n;
	struct stat *seen = calloc(n0 ? n0 : 1, sizeof(*seen));
	size_t n_seen = 0;
	int rc = 0;

	if (!seen)
		return -1;
	for (size_t i = 0; i < n0 && !rc; i++) {
		struct cv_log *l = &in->logs[i];
		char *copy, *dir;
		struct stat ds;
		int dup = 0;

		if (!l->named || !is_main(l, &st->head[i]) || !evlog_session_set(st->head[i].session))
			continue;
		if (!(copy = strdup(l->path)))
			rc = -1;
		else if (stat((dir = dirname(copy)), &ds) == 0) { /* "." for a bare name */
			for (size_t k = 0; k < n_seen; k++)
				dup |= seen[k].st_dev == ds.st_dev && seen[k].st_ino == ds.st_ino;
			if (!dup) {
				seen[n_seen++] = ds;
				rc = cv_inputs_add(in, dir, CV_FROM_SIBLING, err, errsz);
			}
		}
		free(copy);
	}
	free(seen);
	return rc ? -1 : read_heads(st);
}

/* The sessions wanted: those of the main logs and of library logs named as
 * files; with neither, the one session of the library logs found, if one. */
static int pick_sessions(struct select *st, char *err, size_t errsz)
{
	struct cv_inputs *in = st->in;
	struct sessions found = { 0 };
	int rc = 0;

	for (size_t i = 0; i < in->n && !rc; i++) {
		const struct cv_log *l = &in->logs[i];
		const struct cv_head *h = &st->head[i];

		if (is_main(l, h) && h->ok && !evlog_session_set(h->session) && !st->old_mains++)
			st->old_main = l->name;
		if (is_main(l, h) || l->named)
			rc = sessions_add(&st->want, h->session);
		else if (h->ok && h->lib)
			rc = sessions_add(&found, h->session);
	}
	if (!rc && !st->want.n && !st->old_mains && found.n > 1) {
		char a[EVLOG_SESSION_HEX], b[EVLOG_SESSION_HEX];

		snprintf(err, errsz, "the inputs hold injected-library logs of %zu profiles (sessions "
			 "%s, %s%s) and no collector log to choose one: give the collector's log "
			 "(profile's -o)", found.n, evlog_session_hex(found.v[0], a),
			 evlog_session_hex(found.v[1], b), found.n > 2 ? ", ..." : "");
		rc = -1;
	} else if (!rc && !st->want.n && !st->old_mains && found.n == 1) {
		rc = sessions_add(&st->want, found.v[0]);
	}
	free(found.v);
	if (rc && !*err)
		snprintf(err, errsz, "out of memory choosing the logs of the profile");
	return rc;
}

/* Does a library log of `session` come with the inputs? */
static int has_lib_of(const struct select *st, const uint8_t *session)
{
	for (size_t i = 0; i < st->in->n; i++)
		if (st->head[i].ok && st->head[i].lib &&
		    !memcmp(st->head[i].session, session, EVLOG_SESSION_LEN))
			return 1;
	return 0;
}

/* What the main logs with a session record of their library logs: only
 * those join (liblogs.c). A main log read once per session is enough for
 * the sessions given; each one read adds its own. */
static int read_records(struct select *st)
{
	for (size_t i = 0; i < st->in->n; i++) {
		const struct cv_head *h = &st->head[i];

		if (!is_main(&st->in->logs[i], h) || !h->records_libs)
			continue;
		if (sessions_add(&st->vouched, h->session) ||
		    (has_lib_of(st, h->session) &&
		     cv_liblogs_read(&st->libs, &st->in->logs[i], h->session)))
			return -1;
	}
	return 0;
}

/* A library log of a session whose main log records its library logs, and
 * not among them: why (else NULL). */
static const char *not_recorded(const struct select *st, size_t i)
{
	const struct cv_head *h = &st->head[i];

	if (!h->ok || !h->lib || !sessions_has(&st->vouched, h->session))
		return NULL;
	return cv_liblogs_check(&st->libs, h->session, st->in->logs[i].name, st->in->logs[i].path);
}

/* One line: the library logs of a profile that its main log does not
 * record (forged with its session id, or changed since publishing). */
static void not_recorded_line(struct cv_inputs *in, const size_t *out, const char *const *why,
			      size_t n_out)
{
	if (!n_out)
		return;
	cv_buf_printf(&in->notes, "left out %zu injected-library log%s that the profile's collector "
		      "log does not record (not published by the collector, or changed since):",
		      n_out, n_out == 1 ? "" : "s");
	for (size_t k = 0; k < n_out && k < LEFT_OUT_NAMED; k++)
		cv_buf_printf(&in->notes, "%s %s (%s)", k ? "," : "", in->logs[out[k]].name, why[k]);
	if (n_out > LEFT_OUT_NAMED)
		cv_buf_printf(&in->notes, ", and %zu more", n_out - LEFT_OUT_NAMED);
	cv_buf_printf(&in->notes, "\n");
}

/* Is log i one of the profiles given? */
static int belongs(const struct select *st, size_t i)
{
	const struct cv_log *l = &st->in->logs[i];
	const struct cv_head *h = &st->head[i];
	int has = evlog_session_set(h->session);

	if (!h->ok) /* unreadable: the inputs' and --cupti-dir's say why in pass 1 */
		return l->origin != CV_FROM_SIBLING;
	if (is_main(l, h) || l->named)
		return 1;
	if (has)
		return h->lib && sessions_has(&st->want, h->session);
	if (l->origin == CV_FROM_INPUT) /* a library log without a session in an -i directory */
		return 1;
	/* a log of --cupti-dir without a session: the join by host and time
	 * judges it, for main logs without one (or when there is no main log) */
	return l->origin == CV_FROM_CUPTI && (st->old_mains || !st->want.n);
}

static void left_out_line(struct cv_inputs *in, const size_t *out, size_t n_out)
{
	if (!n_out)
		return;
	cv_buf_printf(&in->notes, "left out %zu event log%s of other profiles (another session "
		      "id, or none):", n_out, n_out == 1 ? "" : "s");
	for (size_t k = 0; k < n_out && k < LEFT_OUT_NAMED; k++)
		cv_buf_printf(&in->notes, "%s %s", k ? "," : "", in->logs[out[k]].name);
	if (n_out > LEFT_OUT_NAMED)
		cv_buf_printf(&in->notes, ", and %zu more", n_out - LEFT_OUT_NAMED);
	cv_buf_printf(&in->notes, "\n");
}

/* Main logs found in a directory, of one host and several sessions: two
 * profiles of one machine, converted together as the directory asked.
 * Say so (a directory of several hosts' logs is the usual multi-node run). */
static void same_host_line(const struct select *st)
{
	struct cv_inputs *in = st->in;

	for (size_t i = 0; i < in->n; i++) {
		const struct cv_head *a = &st->head[i];

		if (in->logs[i].named || !is_main(&in->logs[i], a) || !evlog_session_set(a->session))
			continue;
		for (size_t j = i + 1; j < in->n; j++) {
			const struct cv_head *b = &st->head[j];

			if (in->logs[j].named || !is_main(&in->logs[j], b) || strcmp(a->host, b->host) ||
			    !memcmp(a->session, b->session, EVLOG_SESSION_LEN))
				continue;
			cv_buf_printf(&in->notes, "%s and %s: two profiles of host %s "
				      "(different session ids), converted together as the input "
				      "directory holds both; give one of them to convert it alone\n",
				      in->logs[i].name, in->logs[j].name, a->host);
			return;
		}
	}
}

/* Drop the logs not kept, in place, keeping the order of the rest. */
static void compact(struct cv_inputs *in, const unsigned char *keep, unsigned char *old_join)
{
	size_t w = 0;

	for (size_t i = 0; i < in->n; i++) {
		if (!keep[i]) {
			cv_log_free(&in->logs[i]);
			continue;
		}
		old_join[w] = old_join[i];
		in->logs[w++] = in->logs[i];
	}
	in->n = w;
}

int cv_inputs_select(struct cv_inputs *in, const char *cupti_dir, char *err, size_t errsz)
{
	struct select st = { .in = in };
	unsigned char *keep = NULL, *old_join = NULL;
	size_t *out = NULL, n_out = 0, *unrec = NULL, n_unrec = 0;
	const char **why = NULL;
	int rc = -1;

	*err = 0;
	if (read_heads(&st) || add_siblings(&st, err, errsz) ||
	    pick_sessions(&st, err, errsz) || read_records(&st))
		goto done;
	keep = calloc(in->n + 1, 1);
	old_join = calloc(in->n + 1, 1);
	out = calloc(in->n + 1, sizeof(*out));
	unrec = calloc(in->n + 1, sizeof(*unrec));
	why = calloc(in->n + 1, sizeof(*why));
	if (!keep || !old_join || !out || !unrec || !why)
		goto done;
	for (size_t i = 0; i < in->n; i++) {
		keep[i] = (unsigned char)belongs(&st, i);
		if (keep[i] && (why[n_unrec] = not_recorded(&st, i))) {
			keep[i] = 0;
			unrec[n_unrec++] = i;
			continue;
		}
		old_join[i] = keep[i] && in->logs[i].origin == CV_FROM_CUPTI &&
			      !evlog_session_set(st.head[i].session);
		if (!keep[i] && st.head[i].ok) /* an unreadable file beside a log is no news */
			out[n_out++] = i;
	}
	left_out_line(in, out, n_out);
	not_recorded_line(in, unrec, why, n_unrec);
	same_host_line(&st);
	if (st.old_mains && cupti_dir)
		cv_buf_printf(&in->notes, "%s%s has no session id: the logs of --cupti-dir %s "
			      "without one are joined to it by host and file time\n", st.old_main,
			      st.old_mains > 1 ? " (and others)" : "", cupti_dir);
	compact(in, keep, old_join);
	cv_inputs_filter_cupti(in, old_join);
	rc = 0;
done:
	if (rc && !*err)
		snprintf(err, errsz, "out of memory choosing the logs of the profile");
	free(keep);
	free(old_join);
	free(out);
	free(unrec);
	free(why);
	free(st.head);
	free(st.want.v);
	free(st.vouched.v);
	cv_liblogs_free(&st.libs);
	return rc;
}
