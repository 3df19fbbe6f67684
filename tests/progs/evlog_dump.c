// SPDX-License-Identifier: Apache-2.0
/*
 * evlog_dump LOG...: print each log as text. Per log: "# file=<path>", the
 * header as "# key=value" lines, one line per event (eventlog/dump.c), then
 * "# events=N chunks_ok=N chunks_bad=N truncated=0|1". Exit 0, or 1 with a
 * message on stderr if a log cannot be read.
 */
#include "eventlog/eventlog.h"

#include <stdio.h>

static int dump_one(const char *path)
{
	char msg[512];
	struct evlog_reader *r;
	if (evlog_reader_open(&r, path, msg, sizeof(msg))) {
		fprintf(stderr, "evlog_dump: %s\n", msg);
		return 1;
	}
	printf("# file=");
	evlog_dump_str(stdout, evlog_s(path));
	putchar('\n');
	evlog_dump_header(stdout, evlog_reader_header(r));
	const struct evlog_event *ev;
	int rc;
	while ((rc = evlog_next(r, &ev)) == 0)
		evlog_dump_event(stdout, ev);
	struct evlog_reader_stats st;
	evlog_reader_stats(r, &st);
	printf("# events=%llu chunks_ok=%llu chunks_bad=%llu truncated=%d\n",
	       (unsigned long long)st.events, (unsigned long long)st.chunks_ok,
	       (unsigned long long)st.chunks_bad, st.truncated);
	int bad = rc != -EVLOG_END;
	if (bad)
		fprintf(stderr, "evlog_dump: %s: %s\n", path, evlog_reader_error(r));
	evlog_reader_close(r);
	return bad;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: evlog_dump LOG...\n");
		return 1;
	}
	int status = 0;
	for (int i = 1; i < argc; i++)
		status |= dump_one(argv[i]);
	if (fflush(stdout) != 0) {
		perror("evlog_dump: stdout");
		status = 1;
	}
	return status;
}
