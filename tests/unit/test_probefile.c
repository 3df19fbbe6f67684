// SPDX-License-Identifier: Apache-2.0
/* Probe file parsing and errors, library/symbol matching, argument
 * decoding (and the converter's text of it), and the ELF reader on the
 * real CUDA runtime. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "collector/sources/cudadecode.h"
#include "collector/target/elfsym.h"
#include "collector/sources/probefile.h"
#include "converter/pairing/cudacorr.h"
#include "eventlog/eventlog.h"

static struct lt_probefile *parse(const char *text, char *err, size_t n)
{
	struct lt_probefile *pf = NULL;

	err[0] = 0;
	lt_probefile_parse(text, strlen(text), "p.json", &pf, err, n);
	return pf;
}

static void default_file_parses(void **state)
{
	struct lt_probefile *pf = NULL;
	char err[512] = "";
	size_t i;
	int found = 0;

	(void)state;
	assert_int_equal(lt_probefile_load("examples/probes.json", &pf, err, sizeof(err)), 0);
	assert_non_null(pf);
	for (i = 0; i < pf->n_libs; i++) {
		if (!strcmp(pf->libs[i].spec, "libcudart.so")) {
			found |= 1;
			assert_int_equal(pf->libs[i].lib_class, EVLIB_CUDA_RUNTIME);
			/* launches at both layers: the collector probes one
			 * (cudaprobe.c, launch_layer) */
			assert_non_null(lt_plib_select(&pf->libs[i], "cudaLaunchKernel", true));
			assert_non_null(lt_plib_select(&pf->libs[i], "cudaMemcpyAsync", true));
			/* hot trivial functions stay out */
			assert_null(lt_plib_select(&pf->libs[i], "cudaGetLastError", true));
			assert_null(lt_plib_select(&pf->libs[i], "cudaGetDevice", true));
		}
		if (!strcmp(pf->libs[i].spec, "libnccl.so")) {
			found |= 2;
			assert_non_null(lt_plib_select(&pf->libs[i], "ncclAllReduce", true));
			assert_null(lt_plib_select(&pf->libs[i], "ncclCommGetAsyncError", true));
		}
		if (!strcmp(pf->libs[i].spec, "libcuda.so")) {
			found |= 4;
			assert_null(lt_plib_select(&pf->libs[i], "cuCtxGetCurrent", true));
			/* copies at the runtime (not the driver call it makes),
			 * driver-only calls, launches (see above) */
			assert_non_null(lt_plib_select(&pf->libs[i], "cuLaunchKernel", true));
			assert_non_null(lt_plib_select(&pf->libs[i], "cuLaunchKernelEx_ptsz", true));
			assert_null(lt_plib_select(&pf->libs[i], "cuMemcpyHtoDAsync_v2", true));
			assert_non_null(lt_plib_select(&pf->libs[i], "cuModuleLoadData", true));
		}
		if (!strcmp(pf->libs[i].spec, "libcublas.so"))
			found |= 8;
	}
	assert_int_equal(found, 15);
	lt_probefile_free(pf);
	/* the driver layer, for launches straight through it */
	assert_int_equal(lt_probefile_load("examples/probes-driver.json", &pf, err, sizeof(err)), 0);
	assert_int_equal(pf->n_libs, 1);
	assert_string_equal(pf->libs[0].spec, "libcuda.so");
	assert_non_null(lt_plib_select(&pf->libs[0], "cuLaunchKernel", true));
	assert_non_null(lt_plib_select(&pf->libs[0], "cuMemcpyHtoDAsync_v2", true));
	lt_probefile_free(pf);
}

static void seed_style_and_options(void **state)
{
	char err[512];
	struct lt_probefile *pf = parse(
		"{\"uprobe\": [{\"path\": \"/opt/x/libnccl.so.2\", \"funcs\": [\"pncclAllReduce\","
		" {\"name\": \"ncclSend\", \"args\": [0, 1, 6], \"class\": \"other\"}]}],"
		" \"kprobe\": [\"tcp_sendmsg\", {\"name\": \"vfs_read\"}]}", err, sizeof(err));

	(void)state;
	assert_non_null(pf);
	assert_int_equal(pf->n_libs, 1);
	assert_true(pf->libs[0].is_path);
	assert_int_equal(pf->libs[0].lib_class, EVLIB_NCCL);
	assert_int_equal(pf->libs[0].syms[1].nargs, 3);
	assert_int_equal(pf->libs[0].syms[1].argidx[2], 6);
	assert_int_equal(pf->libs[0].syms[1].lib_class, EVLIB_OTHER);
	assert_int_equal(pf->n_kprobes, 2);
	assert_string_equal(pf->kprobes[1], "vfs_read");
	assert_true(lt_plib_matches(&pf->libs[0], "/opt/x/libnccl.so.2", NULL));
	assert_false(lt_plib_matches(&pf->libs[0], "/usr/lib/libnccl.so.2", NULL));
	lt_probefile_free(pf);
}

static void expect_error(const char *text, const char *want)
{
	char err[512];
	struct lt_probefile *pf = parse(text, err, sizeof(err));

	assert_null(pf);
	if (!strstr(err, want))
		fail_msg("error \"%s\" lacks \"%s\"", err, want);
}

static void errors_name_line_and_column(void **state)
{
	(void)state;
	expect_error("{\n  \"uprobes\": [\n    {\"library\": \"libcudart.so\", \"symbols\": [\"a\", 42]}\n  ]\n}",
		     "p.json:3:50: uprobes[0].symbols[1]: expected a symbol name");
	expect_error("{\n  \"uprobes\": [\n    {\"library\": \"x\", \"symbols\": []},\n    {\"symbols\": []}\n  ]\n}",
		     "p.json:4:5: uprobes[1]: missing \"library\"");
	expect_error("{\"uprobes\": [{\"library\": \"x\", \"symbols\": [], \"klass\": 1}]}",
		     "p.json:1:55: uprobes[0].klass: unknown key");
	expect_error("{\"uprobes\": [{\"library\": \"x\", \"class\": \"gpu\", \"symbols\": []}]}",
		     "p.json:1:40: uprobes[0].class: expected one of");
	expect_error("{\"uprobes\": [{\"library\": \"x\", \"symbols\": [{\"name\": \"f\", \"args\": [1, 12]}]}]}",
		     "uprobes[0].symbols[0].args[1]: expected an argument index from 0 to 11");
	expect_error("{\"uprobes\": [{\"library\": \"x\",\n \"symbols\": [\"a\"]}\n", "p.json:3:1: invalid JSON");
	expect_error("{\"uprobes\": []} x", "p.json:1:17: invalid JSON: unexpected text");
	expect_error("[1]", "p.json:1:1: expected an object");
	expect_error("", "p.json:1:1: invalid JSON");
}

/* Every prefix and every one-byte corruption of the default file: an error
 * naming a position, or a valid file; never a crash. */
static void truncated_and_corrupted_input(void **state)
{
	static char buf[1 << 16];
	FILE *f = fopen("examples/probes.json", "r");
	size_t n, i;

	(void)state;
	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	/* every cut before the closing brace (the whitespace after it is not needed) */
	size_t end = n;
	while (end > 0 && buf[end - 1] != '}')
		end--;
	for (i = 0; i + 1 < end; i += 7) {
		struct lt_probefile *pf = NULL;
		char err[512] = "", saved = buf[i];
		int rc = lt_probefile_parse(buf, i, "t.json", &pf, err, sizeof(err));

		assert_int_not_equal(rc, 0);
		assert_non_null(strstr(err, "t.json:"));
		buf[i] = "}]\",:x0"[i % 8];
		rc = lt_probefile_parse(buf, n, "t.json", &pf, err, sizeof(err));
		assert_true(rc == 0 ? pf != NULL : strstr(err, "t.json:") != NULL);
		lt_probefile_free(pf);
		pf = NULL;
		buf[i] = saved;
	}
}

static void locate_and_linecol(void **state)
{
	const char *t = "{ \"a\": [1, {\"b\": \"x,]}\"}, 3],\n \"c\": 5 }";
	const char *p1[] = { "a", "#2" }, *p2[] = { "c" }, *p3[] = { "a", "#1", "b" }, *p4[] = { "zz" };
	int line, col;

	(void)state;
	assert_int_equal(lt_json_locate(t, strlen(t), p1, 2), (long)(strstr(t, "3]") - t));
	assert_int_equal(lt_json_locate(t, strlen(t), p3, 3), (long)(strstr(t, "\"x") - t));
	assert_int_equal(lt_json_locate(t, strlen(t), p4, 1), -1);
	lt_text_linecol(t, strlen(t), (size_t)lt_json_locate(t, strlen(t), p2, 1), &line, &col);
	assert_int_equal(line, 2);
	assert_int_equal(col, 7);
}

static void soname_matching(void **state)
{
	struct lt_plib rt = { .spec = "libcudart.so" }, drv = { .spec = "libcuda.so" },
		       nccl = { .spec = "libnccl.so.2" }, g = { .spec = "libcublas*" };

	(void)state;
	assert_true(lt_plib_matches(&rt, "/x/site-packages/nvidia/cu13/lib/libcudart.so.13", NULL));
	assert_true(lt_plib_matches(&rt, "/usr/local/cuda/lib64/libcudart.so.13.0.48", NULL));
	assert_true(lt_plib_matches(&rt, "/x/torch.libs/libcudart-d0da41ae.so.13", NULL)); /* auditwheel */
	assert_false(lt_plib_matches(&rt, "/x/libcudart_static.a", NULL));
	assert_true(lt_plib_matches(&drv, "/usr/local/nvidia/lib64/libcuda.so.580.159.04", NULL));
	assert_false(lt_plib_matches(&drv, "/usr/lib/libcudart.so.13", NULL));
	assert_true(lt_plib_matches(&drv, "/weird/name.so", "libcuda.so.1"));
	assert_true(lt_plib_matches(&nccl, "/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3", NULL));
	assert_false(lt_plib_matches(&nccl, "/usr/lib/libnccl.so.3", NULL));
	assert_true(lt_plib_matches(&g, "/a/libcublasLt.so.13", NULL));
	assert_int_equal(lt_probefile_guess_class("libcublasLt.so.13"), EVLIB_CUBLAS);
	assert_int_equal(lt_probefile_guess_class("/a/libcuda.so.1"), EVLIB_CUDA_DRIVER);
	assert_int_equal(lt_probefile_guess_class("libfoo.so"), EVLIB_OTHER);
}

static void symbol_selection(void **state)
{
	char err[512];
	struct lt_probefile *pf = parse("{\"uprobes\": [{\"library\": \"libnccl.so\", \"symbols\":"
					" [\"nccl*\", \"internalExact\"], \"exclude\": [\"ncclGet*\"]}]}",
					err, sizeof(err));
	const struct lt_plib *l;

	(void)state;
	assert_non_null(pf);
	l = &pf->libs[0];
	assert_non_null(lt_plib_select(l, "ncclAllReduce", true));
	assert_null(lt_plib_select(l, "ncclAllReduce", false)); /* globs: exported only */
	assert_non_null(lt_plib_select(l, "internalExact", false));
	assert_null(lt_plib_select(l, "ncclGetVersion", true));  /* exclusion wins */
	assert_null(lt_plib_select(l, "pncclAllReduce", true));
	lt_probefile_free(pf);
}

static const char *fake_resolve(void *arg, uint64_t addr, char *buf, size_t n)
{
	(void)arg;
	if (addr != 0x1000)
		return NULL;
	snprintf(buf, n, "k(float*)");
	return buf;
}

/* Decode a call into ev, as the collector does. */
static void decode_ev(const char *sym, const uint64_t *a, struct evlog_event *ev,
		      struct lt_decode_buf *b)
{
	const struct lt_decoder *d = lt_cuda_decoder(sym);
	struct lt_decode_ctx cx = { fake_resolve, NULL };

	if (!d)
		fail_msg("no decoder for %s", sym);
	*ev = (struct evlog_event){ .type = EV_LIB_CALL };
	lt_cuda_decode(d, a, &cx, ev, b);
}

/* ... and shown as the converter shows it. */
static void decode(const char *sym, const uint64_t *a, const char *want)
{
	struct evlog_event ev;
	struct lt_decode_buf b;
	char buf[CV_CALL_ARGS_MAX];

	decode_ev(sym, a, &ev, &b);
	cv_call_args(&ev, buf, sizeof(buf));
	if (strcmp(buf, want))
		fail_msg("%s: got \"%s\", want \"%s\"", sym, buf, want);
}

static void argument_decoding(void **state)
{
	(void)state;
	decode("cudaMemcpyAsync_ptsz", (uint64_t[12]){ 1, 2, 4096, 1, 0x77 },
	       "bytes=4096 kind=HtoD stream=0x77");
	decode("cuMemcpyDtoHAsync_v2", (uint64_t[12]){ 1, 2, 64, 0x9 }, "bytes=64 kind=DtoH stream=0x9");
	decode("cudaMemcpy2D", (uint64_t[12]){ 0, 0, 0, 0, 16, 4, 3 }, "bytes=64 kind=DtoD width=16 height=4");
	decode("cudaMemcpy", (uint64_t[12]){ 1, 2, 8, 0 }, "bytes=8 kind=HtoH");
	/* cudaMemcpyDefault: the pointers tell, unknown here */
	decode("cudaMemcpy", (uint64_t[12]){ 1, 2, 8, 4 }, "bytes=8");
	decode("cuMemcpyPeer", (uint64_t[12]){ 1, 2, 3, 4, 8 }, "bytes=8 kind=PtoP");
	decode("cuMemsetD32_v2", (uint64_t[12]){ 0xa, 7, 10 }, "bytes=40 value=7");
	decode("cudaMalloc", (uint64_t[12]){ 0, 1 << 20 }, "bytes=1048576");
	decode("cudaLaunchKernel", (uint64_t[12]){ 0x1000, 2ull << 32 | 8, 1, 1ull << 32 | 128, 1, 0, 256, 0x5 },
	       "kernel=k(float*) grid=8,2,1 block=128,1,1 smem=256 stream=0x5");
	decode("cuLaunchKernel", (uint64_t[12]){ 0x2000, 8, 1, 1, 64, 2, 1, 0, 0x5 },
	       "func=0x2000 grid=8,1,1 block=64,2,1 smem=0 stream=0x5");
	/* the default stream: a launch names it still */
	decode("cuLaunchKernel", (uint64_t[12]){ 0x2000, 8, 1, 1, 64, 2, 1, 0, 0 },
	       "func=0x2000 grid=8,1,1 block=64,2,1 smem=0 stream=0x0");
	/* a config behind the first argument: its first 48 bytes after the registers */
	decode("cudaLaunchKernelExC_ptsz", (uint64_t[12]){ 0x7ff0, 0x1000, 0, 0, 0, 0,
		2ull << 32 | 8, 128ull << 32 | 1, 1ull << 32 | 1, 1ull << 33, 0x5 },
	       "kernel=k(float*) grid=8,2,1 block=128,1,1 smem=8589934592 stream=0x5");
	/* the driver's shared memory is an unsigned int: the padding after it is not */
	decode("cuLaunchKernelEx", (uint64_t[12]){ 0x7ff0, 0x2000, 0, 0, 0, 0,
		1ull << 32 | 4, 64ull << 32 | 1, 1ull << 32 | 1, 0xdead00000000ull | 512, 0x9 },
	       "func=0x2000 grid=4,1,1 block=64,1,1 smem=512 stream=0x9");
	/* the config unread (zeros): the kernel alone */
	decode("cuLaunchKernelEx", (uint64_t[12]){ 0x7ff0, 0x2000 }, "func=0x2000");
	assert_true(lt_cuda_decoder_cfg(lt_cuda_decoder("cuLaunchKernelEx_ptsz")));
	assert_false(lt_cuda_decoder_cfg(lt_cuda_decoder("cuLaunchKernel")));
	assert_int_equal(lt_cuda_decoder_nstack(lt_cuda_decoder("cudaLaunchKernelExC")), 6);
	decode("pncclAllReduce", (uint64_t[12]){ 0, 0, 10, 9, 4, 0xc, 0x5 },
	       "bytes=20 count=10 datatype=bfloat16 op=avg comm=0xc stream=0x5");
	decode("ncclReduce", (uint64_t[12]){ 0, 0, 10, 7, 2, 3, 0xc, 0x5 },
	       "bytes=40 count=10 datatype=float32 op=max root=3 comm=0xc stream=0x5");
	decode("ncclCommInitRank", (uint64_t[12]){ 0, 8, 3 }, "nranks=8 rank=3");
	decode("cublasGemmEx", (uint64_t[12]){ 0, 0, 1, 128, 64, 32 }, "m=128 n=64 k=32 transa=N transb=T");
	decode("cudaStreamSynchronize", (uint64_t[12]){ 0x10 }, "stream=0x10");
	decode("cudaStreamSynchronize", (uint64_t[12]){ 0 }, "");
	decode("cudaEventRecord", (uint64_t[12]){ 0x20, 0x10 }, "event=0x20 stream=0x10");
	assert_null(lt_cuda_decoder("cudaGetDeviceCount"));
	assert_int_equal(lt_cuda_decoder_nstack(lt_cuda_decoder("cudaLaunchKernel")), 2);
	assert_int_equal(lt_cuda_decoder_nstack(lt_cuda_decoder("cuLaunchKernel")), 3);
	assert_int_equal(lt_cuda_decoder_nstack(lt_cuda_decoder("ncclAllReduce")), 1);
	assert_int_equal(lt_cuda_decoder_nstack(lt_cuda_decoder("cudaMemcpy")), 0);
}

/* The typed fields themselves: a named launch keeps no handle, an unnamed
 * one no name; text only where nothing typed holds the argument. */
static void argument_fields(void **state)
{
	struct evlog_event ev;
	struct lt_decode_buf b;
	const typeof(ev.u.lib_call) *c = &ev.u.lib_call;

	(void)state;
	decode_ev("cudaLaunchKernel", (uint64_t[12]){ 0x1000, 2ull << 32 | 8, 1, 1ull << 32 | 128, 1,
		  0, 256, 0x5 }, &ev, &b);
	assert_int_equal(c->kernel.len, strlen("k(float*)"));
	assert_memory_equal(c->kernel.ptr, "k(float*)", c->kernel.len);
	assert_int_equal(c->func, 0);
	assert_int_equal(c->grid[0], 8);
	assert_int_equal(c->grid[1], 2);
	assert_int_equal(c->grid[2], 1);
	assert_int_equal(c->block[0], 128);
	assert_int_equal(c->dynamic_smem, 256);
	assert_int_equal(c->stream, 0x5);
	assert_int_equal(c->bytes, 0);
	assert_int_equal(c->detail.len, 0);
	decode_ev("cuLaunchKernel", (uint64_t[12]){ 0x2000, 8, 1, 1, 64, 2, 1, 0, 0x5 }, &ev, &b);
	assert_int_equal(c->kernel.len, 0);
	assert_int_equal(c->func, 0x2000);
	decode_ev("cudaMemcpyAsync", (uint64_t[12]){ 1, 2, 4096, 2, 0x77 }, &ev, &b);
	assert_int_equal(c->bytes, 4096);
	assert_int_equal(c->copy_kind, EVLOG_COPY_DTOH);
	assert_int_equal(c->stream, 0x77);
	assert_int_equal(c->detail.len, 0);
	decode_ev("ncclAllReduce", (uint64_t[12]){ 0, 0, 10, 7, 0, 0xc, 0x5 }, &ev, &b);
	assert_int_equal(c->bytes, 40);
	assert_int_equal(c->stream, 0x5);
	assert_string_equal(c->detail.ptr, "count=10 datatype=float32 op=sum comm=0xc");
	assert_int_equal(c->detail.len, strlen(c->detail.ptr));

	/* the text cut to the buffer, still a string */
	char small[12];

	decode_ev("cudaLaunchKernel", (uint64_t[12]){ 0x1000, 8, 1, 1, 1 }, &ev, &b);
	assert_int_equal(cv_call_args(&ev, small, sizeof(small)), sizeof(small) - 1);
	assert_string_equal(small, "kernel=k(fl");
	assert_int_equal(cv_call_args(&ev, small, 0), 0);
}

static void elf_on_real_cudart(void **state)
{
	const char *path = "/usr/local/cuda/lib64/libcudart.so.13";
	const struct lt_elfsym *s = NULL, *hit;
	struct lt_elf *e;
	uint64_t off, va;
	char err[256];
	size_t i;

	(void)state;
	if (access(path, R_OK)) {
		skip();
		return;
	}
	assert_int_equal(lt_elf_open(path, &e, err, sizeof(err)), 0);
	assert_string_equal(e->soname, "libcudart.so.13");
	for (i = 0; i < e->n_syms; i++)
		if (!strcmp(e->syms[i].name, "cudaMalloc"))
			s = &e->syms[i];
	assert_non_null(s);
	assert_true(s->exported);
	assert_int_equal(lt_elf_vaddr_to_offset(e, s->vaddr, &off), 0);
	assert_int_equal(lt_elf_offset_to_vaddr(e, off, &va), 0);
	assert_int_equal(va, s->vaddr);
	hit = lt_elf_lookup(e, s->vaddr + 1);
	assert_non_null(hit);
	assert_int_equal(hit->vaddr, s->vaddr);
	lt_elf_free(e);
	assert_int_not_equal(lt_elf_open("/nonexistent/lib.so", &e, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "/nonexistent/lib.so"));
	assert_int_not_equal(lt_elf_open("examples/probes.json", &e, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "not an ELF file"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(default_file_parses),
		cmocka_unit_test(seed_style_and_options),
		cmocka_unit_test(errors_name_line_and_column),
		cmocka_unit_test(truncated_and_corrupted_input),
		cmocka_unit_test(locate_and_linecol),
		cmocka_unit_test(soname_matching),
		cmocka_unit_test(symbol_selection),
		cmocka_unit_test(argument_decoding),
		cmocka_unit_test(argument_fields),
		cmocka_unit_test(elf_on_real_cudart),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
