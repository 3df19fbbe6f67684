/* SPDX-License-Identifier: Apache-2.0 */
#include "converter/output/trace_ids.h"

#include <stdio.h>
#include <string.h>

uint32_t trace_gpu_pid(const struct conv_host_meta *m, uint32_t device)
{
	for (uint32_t i = 0; i < m->n_gpus; i++)
		if (m->gpus[i].device == device)
			return conv_meta_process(m, device) ? TRACE_GPU_PID_CLASH_BASE + device : device;
	return TRACE_GPU_PID_CLASH_BASE + device;
}

const struct evlog_event *trace_gpu_props(const struct conv_host_meta *m, uint32_t device)
{
	for (uint32_t i = 0; i < m->n_gpus; i++)
		if (m->gpus[i].device == device)
			return m->gpus[i].props;
	return NULL;
}

void trace_process_name(const struct conv_host_meta *m, const struct conv_process *p,
			int with_host, char *buf, size_t n)
{
	if (*p->label) /* a rank's process: "rank R (pid P) comm" */
		snprintf(buf, n, "%s%s%s", p->label, *p->name ? " " : "", p->name);
	else if (*p->name)
		snprintf(buf, n, "%s", p->name);
	else
		snprintf(buf, n, "pid %u", p->pid);
	if (with_host && m->n_hosts > 1)
		snprintf(buf + strlen(buf), n - strlen(buf), " @%s", m->host);
}

void trace_gpu_name(const struct conv_gpu *g, char *buf, size_t n)
{
	int nl = g->props ? (int)(g->props->u.gpu_device.name.len < 200
					  ? g->props->u.gpu_device.name.len : 200) : 0;

	if (nl)
		snprintf(buf, n, "GPU %u (%.*s)", g->device, nl, g->props->u.gpu_device.name.ptr);
	else
		snprintf(buf, n, "GPU %u", g->device);
}
