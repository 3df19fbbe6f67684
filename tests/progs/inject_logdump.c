// SPDX-License-Identifier: Apache-2.0
/*
 * Prints the GPU-related events of event logs as tab-separated lines, for
 * the GPU validation scripts (tests/gpu/cupti_attach.*):
 *   H producer host producer_pid mono_ns realtime_ns
 *   K ts dur correlation device stream name          (kernel)
 *   M ts dur correlation bytes kind                  (memcpy)
 *   S ts dur correlation bytes                       (memset)
 *   A ts dur pid tid correlation cbid class name     (CUDA API, CUPTI)
 *   U ts dur pid tid correlation symbol              (library call, uprobe)
 *   D device sms clock_khz memory_bytes bandwidth cc_major cc_minor name
 *   L source count                                   (lost)
 *   E reader-error text
 *   inject_logdump LOG ...
 */
#include "eventlog/eventlog.h"

#include <inttypes.h>
#include <stdio.h>

#define S(x) (int)(x).len, (x).ptr

static void dump_event(const struct evlog_event *e)
{
	switch (e->type) {
	case EV_GPU_KERNEL:
		printf("K\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%u\t%u\t%.*s\n", e->ts, e->u.gpu_kernel.dur,
		       e->u.gpu_kernel.correlation_id, e->u.gpu_kernel.device, e->u.gpu_kernel.stream,
		       S(e->u.gpu_kernel.name));
		break;
	case EV_GPU_MEMCPY:
		printf("M\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%u\n", e->ts, e->u.gpu_memcpy.dur,
		       e->u.gpu_memcpy.correlation_id, e->u.gpu_memcpy.bytes, e->u.gpu_memcpy.copy_kind);
		break;
	case EV_GPU_MEMSET:
		printf("S\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n", e->ts, e->u.gpu_memset.dur,
		       e->u.gpu_memset.correlation_id, e->u.gpu_memset.bytes);
		break;
	case EV_GPU_API:
		printf("A\t%" PRIu64 "\t%" PRIu64 "\t%u\t%u\t%" PRIu64 "\t%u\t%u\t%.*s\n", e->ts, e->u.gpu_api.dur,
		       e->pid, e->tid, e->u.gpu_api.correlation_id, e->u.gpu_api.cbid, e->u.gpu_api.api_class,
		       S(e->u.gpu_api.name));
		break;
	case EV_LIB_CALL:
		printf("U\t%" PRIu64 "\t%" PRIu64 "\t%u\t%u\t%" PRIu64 "\t%.*s\n", e->ts, e->u.lib_call.dur,
		       e->pid, e->tid, e->u.lib_call.correlation_id, S(e->u.lib_call.symbol));
		break;
	case EV_GPU_DEVICE:
		printf("D\t%u\t%u\t%u\t%" PRIu64 "\t%" PRIu64 "\t%u\t%u\t%.*s\n", e->u.gpu_device.device,
		       e->u.gpu_device.sm_count, e->u.gpu_device.clock_khz, e->u.gpu_device.memory_bytes,
		       e->u.gpu_device.memory_bandwidth, e->u.gpu_device.cc_major, e->u.gpu_device.cc_minor,
		       S(e->u.gpu_device.name));
		break;
	case EV_LOST:
		printf("L\t%u\t%" PRIu64 "\n", e->u.lost.source, e->u.lost.count);
		break;
	default:
		break;
	}
}

int main(int argc, char **argv)
{
	int rc = 0;
	for (int i = 1; i < argc; i++) {
		struct evlog_reader *r;
		char msg[512];
		if (evlog_reader_open(&r, argv[i], msg, sizeof(msg))) {
			printf("E\t%s: %s\n", argv[i], msg);
			rc = 1;
			continue;
		}
		const struct evlog_header *h = evlog_reader_header(r);
		printf("H\t%.*s\t%.*s\t%u\t%" PRIu64 "\t%" PRIu64 "\n", S(h->producer), S(h->host),
		       h->producer_pid, h->mono_ns, h->realtime_ns);
		const struct evlog_event *e;
		int n;
		while ((n = evlog_next(r, &e)) == 0)
			dump_event(e);
		if (n != -EVLOG_END) {
			printf("E\t%s: %s\n", argv[i], evlog_reader_error(r));
			rc = 1;
		}
		evlog_reader_close(r);
	}
	return rc;
}
