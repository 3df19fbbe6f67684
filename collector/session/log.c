// SPDX-License-Identifier: Apache-2.0
/*
 * glog-style log lines (severity letter, date, time, tid, file:line):
 *   I1202 10:42:42.389890 2948136 file.c:51] message
 * Each line is one write(2), so lines from several threads never interleave.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "session.h"
#include "cli.h"

int lt_verbosity;
int lt_log_fd = STDERR_FILENO;

void lt_log(char level, const char *file, int line, const char *fmt, ...)
{
	char buf[4096];
	struct timespec ts;
	struct tm tm;
	const char *base = strrchr(file, '/');
	va_list ap;
	int n, m;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	/* line 0: a message relayed from elsewhere (libbpf, the injected library) */
	n = snprintf(buf, sizeof(buf), "%c%02d%02d %02d:%02d:%02d.%06ld %d %s", level,
		     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     ts.tv_nsec / 1000, (int)gettid(), base ? base + 1 : file);
	n += snprintf(buf + n, sizeof(buf) - n, line ? ":%d] " : "] ", line);
	va_start(ap, fmt);
	m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += (size_t)m < sizeof(buf) - n - 1 ? m : (int)(sizeof(buf) - n - 2);
	buf[n++] = '\n';
	if (write(lt_log_fd, buf, n) < 0)
		return; /* nowhere left to report it */
}

/* libbpf's own lines, in ours and by our verbosity: its warnings come one
 * per failed probe (hundreds when a process exits while its libraries are
 * armed), each already summed up in one line of ours; -v 1 shows them. */
static int libbpf_line(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char msg[2048];
	int need = level == LIBBPF_WARN ? 1 : level == LIBBPF_INFO ? 2 : 3;
	size_t n;

	if (lt_verbosity < need)
		return 0;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = 0;
	lt_log(level == LIBBPF_WARN ? 'W' : 'I', "libbpf", 0, "%s", msg);
	return 0;
}

void lt_log_libbpf(void)
{
	libbpf_set_print(libbpf_line);
}
