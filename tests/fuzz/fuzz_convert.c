/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the whole converter (inputs, archive detection, both
 * passes, sorting, trace JSON, Perfetto trace, folded stacks, and, for an
 * input of odd length, the size budget folding all it can) on arbitrary
 * bytes given as one input file. Any crash, leak or sanitizer report is a bug; a clean
 * error is fine. Seeds: small logs from tests/progs/conv_genlog.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "converter/convert.h"

static char in_path[128], out_path[128], pf_path[128], out_dir[96];

static void setup(void)
{
	if (in_path[0])
		return;
	snprintf(out_dir, sizeof(out_dir), "/tmp/fuzz_convert.%d", (int)getpid());
	mkdir(out_dir, 0700);
	snprintf(in_path, sizeof(in_path), "%s/in.log", out_dir);
	snprintf(out_path, sizeof(out_path), "%s/out.json", out_dir);
	snprintf(pf_path, sizeof(pf_path), "%s/out.pftrace", out_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *inputs[1];
	struct conv_request req = { 0 };
	char err[1024];
	int fd;

	setup();
	fd = open(in_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	close(fd);
	inputs[0] = in_path;
	req.inputs = inputs;
	req.n_inputs = 1;
	if (conv_request_out(&req, out_path, err, sizeof(err)) ||
	    conv_request_out(&req, pf_path, err, sizeof(err)))
		abort(); /* one of each kind */
	req.trace_budget = size & 1 ? 1 : UINT64_MAX; /* 1 byte: every foldable call folds */
	req.overwrite = 1;
	req.quiet = 1;
	/* A small sort buffer so the merge of several runs is exercised too. */
	setenv("LLMT_CONV_RUN_MB", "1", 1);
	conv_convert(&req, err, sizeof(err));
	return 0;
}
