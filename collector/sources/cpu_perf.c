// SPDX-License-Identifier: Apache-2.0
#include "cpu_perf.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "collector/session/session.h"

static int perf_open_cpu(int cpu, unsigned freq)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	a.freq = 1;
	a.sample_freq = freq;
	return (int)syscall(SYS_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

int lt_cpu_perf_init(struct lt_session *s, struct lt_cpu_perf *p, const char *who)
{
	p->n_cpus = libbpf_num_possible_cpus();
	if (p->n_cpus <= 0)
		return lt_session_errorf(s, "%s: cannot count the CPUs: %s", who, strerror(-p->n_cpus));
	p->pfd = malloc(p->n_cpus * sizeof(*p->pfd));
	p->links = calloc(p->n_cpus, sizeof(*p->links));
	if (!p->pfd || !p->links)
		return lt_session_errorf(s, "%s: out of memory", who);
	for (int c = 0; c < p->n_cpus; c++)
		p->pfd[c] = -1;
	return 0;
}

int lt_cpu_perf_attach(struct lt_session *s, struct lt_cpu_perf *p, struct bpf_program *prog,
		       unsigned freq, const char *who)
{
	int attached = 0, last_err = 0;

	for (int c = 0; c < p->n_cpus; c++) {
		p->pfd[c] = perf_open_cpu(c, freq);
		if (p->pfd[c] < 0) {
			if (errno != ENODEV) /* ENODEV: CPU offline */
				last_err = errno;
			continue;
		}
		p->links[c] = bpf_program__attach_perf_event(prog, p->pfd[c]);
		if (!p->links[c]) {
			last_err = errno;
			continue;
		}
		attached++;
	}
	if (!attached)
		return lt_session_errorf(s, "%s: cannot open the cpu-clock perf event at %u Hz: %s%s",
					 who, freq, strerror(last_err ? last_err : ENODEV),
					 last_err == EACCES || last_err == EPERM ?
					 " (needs root or CAP_PERFMON; see kernel.perf_event_paranoid)" :
					 last_err == EINVAL ?
					 " (is --freq above kernel.perf_event_max_sample_rate?)" : "");
	LT_INFO(1, "%s: sampling at %u Hz on %d CPUs", who, freq, attached);
	return 0;
}

void lt_cpu_perf_detach(struct lt_cpu_perf *p)
{
	for (int c = 0; p->links && c < p->n_cpus; c++) {
		bpf_link__destroy(p->links[c]);
		p->links[c] = NULL;
	}
	for (int c = 0; p->pfd && c < p->n_cpus; c++) {
		if (p->pfd[c] >= 0)
			close(p->pfd[c]);
		p->pfd[c] = -1;
	}
}

void lt_cpu_perf_free(struct lt_cpu_perf *p)
{
	lt_cpu_perf_detach(p);
	free(p->links);
	free(p->pfd);
	p->links = NULL;
	p->pfd = NULL;
}
