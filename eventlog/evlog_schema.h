/* SPDX-License-Identifier: Apache-2.0 */
/*
 * evlog_schema.h: every event type and its fields, declared once. The C
 * struct (eventlog.h's union), the writer, the reader, the column layout,
 * the text dump, the names, the converter's sort records and its generic
 * field access all expand these tables (X-macros); schemas/eventlog.md 3.4
 * is their text. Adding a type: a line in EVLOG_TYPES with a number never
 * used (20 is the column-chunk mark, EVC_MARK; at most 31), its
 * EVLOG_FIELDS_<name> list, and the format's minor version below; how the
 * converter shows it is its line in converter/output/evview.h (docs/ARCHITECTURE.md,
 * "Extending llmtracker").
 *
 * Part of the file format: type numbers, and each type's fields in order
 * (their kinds say how each is coded). Never renumber, reorder or retype.
 */
#ifndef LLMT_EVLOG_SCHEMA_H
#define LLMT_EVLOG_SCHEMA_H

/* The format's version: a new type or field raises the minor one. */
#define EVLOG_VERSION_MAJOR 1
#define EVLOG_VERSION_MINOR 0

/*
 * Field kinds: C type in struct evlog_event, coding on disk, dump style.
 *   U8, U32, U64  unsigned varint (a reader rejects values over the C type)
 *   X64           u64 varint, dumped as 0x hex (addresses, raw arguments)
 *   SRC           u32 varint, an enum evlog_source, dumped by its name
 *   I64           zigzag varint (signed)
 *   CORR          u64 correlation id, zigzag of the difference to the previous
 *                 one of the chunk (any type)
 *   STR           string reference (interned per chunk)
 *   STACK         native stack reference (struct evlog_stack)
 *   PYSTACK       Python stack reference (struct evlog_pystack)
 *   U32X3         three u32 varints, one column each (uint32_t name[3])
 *   ARGS          count (uint32_t n<name>, at most EVLOG_MAX_ARGS), then that
 *                 many u64 values, value i in the i-th of EVLOG_MAX_ARGS
 *                 columns (uint64_t name[EVLOG_MAX_ARGS])
 *
 * F(member, KIND, field): `member` is the type's union member, passed through
 * so an expansion can name u.member.field.
 */
#define EVLOG_FIELDS_process(F, m) \
	F(m, U32, ppid) F(m, STR, name) F(m, STR, cmdline) F(m, STR, exe) F(m, U8, is_exec)
#define EVLOG_FIELDS_process_exit(F, m) F(m, I64, code)
#define EVLOG_FIELDS_thread(F, m) F(m, STR, name) F(m, U8, is_new)
#define EVLOG_FIELDS_thread_exit(F, m)
#define EVLOG_FIELDS_syscall(F, m) \
	F(m, U32, nr) F(m, U64, dur) F(m, I64, ret) F(m, X64, arg0) F(m, X64, arg1) F(m, X64, arg2)
#define EVLOG_FIELDS_cpu_sample(F, m) F(m, U32, cpu) F(m, STACK, stack)
#define EVLOG_FIELDS_py_enter(F, m) F(m, STR, func) F(m, STR, file) F(m, U32, line)
#define EVLOG_FIELDS_py_exit(F, m) F(m, STR, func) /* func may be empty */
#define EVLOG_FIELDS_py_sample(F, m) F(m, PYSTACK, stack)
/* lib_class: enum evlog_lib_class; lib: path or soname; depth: nesting on
 * this thread (0 = outermost); correlation_id: 0 if unknown. What the
 * collector decodes from a CUDA, NCCL or cuBLAS call's arguments
 * (collector/sources/cudadecode.c), 0 or empty where the call has none or
 * it is unknown:
 *   kernel        a launch's kernel, demangled, at most EVLOG_CALL_KERNEL_MAX
 *                 bytes (cut); empty where its host stub or handle has no name
 *   func          a launch's kernel handle or host stub, where kernel is empty
 *   grid, block   a launch's dims (0 where unknown: cuLaunchKernelEx's config unread)
 *   dynamic_smem  a launch's dynamic shared memory, bytes
 *   stream        the stream handle the call names (0: the legacy default stream)
 *   bytes         a copy's, set's or allocation's size; a collective's payload
 *   copy_kind     a copy's direction as CUpti_ActivityMemcpyKind (gpu_memcpy's):
 *                 1 HtoD, 2 DtoH, 8 DtoD, 9 HtoH, 10 PtoP, 0 unknown (cudaMemcpyDefault)
 *   detail        the other arguments as text for display, "value=7",
 *                 "count=1000 datatype=float32 op=sum comm=0x..", "m=64 n=32 k=16 .." */
#define EVLOG_FIELDS_lib_call(F, m) \
	F(m, U8, lib_class) F(m, STR, lib) F(m, STR, symbol) F(m, U64, dur) F(m, U64, ret) \
	F(m, U32, depth) F(m, ARGS, args) F(m, STR, detail) F(m, CORR, correlation_id) \
	F(m, STR, kernel) F(m, X64, func) F(m, U32X3, grid) F(m, U32X3, block) \
	F(m, U64, dynamic_smem) F(m, X64, stream) F(m, U64, bytes) F(m, U8, copy_kind)
/* name: mangled or demangled; graph_id: 0 if not launched from a graph. */
#define EVLOG_FIELDS_gpu_kernel(F, m) \
	F(m, U64, dur) F(m, U32, device) F(m, U32, context) F(m, U32, stream) \
	F(m, CORR, correlation_id) F(m, STR, name) F(m, U32X3, grid) F(m, U32X3, block) \
	F(m, U32, registers) F(m, U32, static_smem) F(m, U32, dynamic_smem) F(m, U32, graph_id)
/* copy_kind: CUpti_ActivityMemcpyKind; src_kind, dst_kind: CUpti_ActivityMemoryKind. */
#define EVLOG_FIELDS_gpu_memcpy(F, m) \
	F(m, U64, dur) F(m, U32, device) F(m, U32, context) F(m, U32, stream) \
	F(m, CORR, correlation_id) F(m, U64, bytes) F(m, U8, copy_kind) F(m, U8, src_kind) \
	F(m, U8, dst_kind)
#define EVLOG_FIELDS_gpu_memset(F, m) \
	F(m, U64, dur) F(m, U32, device) F(m, U32, context) F(m, U32, stream) \
	F(m, CORR, correlation_id) F(m, U64, bytes) F(m, U32, value)
/* api_class: EVLIB_CUDA_RUNTIME or EVLIB_CUDA_DRIVER. */
#define EVLOG_FIELDS_gpu_api(F, m) \
	F(m, U64, dur) F(m, U8, api_class) F(m, U32, cbid) F(m, CORR, correlation_id) \
	F(m, I64, ret) F(m, STR, name)
/* memory_bandwidth in bytes/s. */
#define EVLOG_FIELDS_gpu_device(F, m) \
	F(m, U32, device) F(m, STR, name) F(m, STR, uuid) F(m, U32, sm_count) \
	F(m, U32, clock_khz) F(m, U64, memory_bytes) F(m, U64, memory_bandwidth) \
	F(m, U32, cc_major) F(m, U32, cc_minor) F(m, U32, max_threads_per_sm) \
	F(m, U32, max_regs_per_sm) F(m, U32, max_smem_per_sm)
#define EVLOG_FIELDS_lost(F, m) F(m, SRC, source) F(m, U64, count)
/* addr: pid 0 = kernel address; name: demangled if possible, empty if
 * unknown; module: object path; offset: addr - symbol start, or the module
 * offset if unknown. */
#define EVLOG_FIELDS_symbol(F, m) \
	F(m, X64, addr) F(m, STR, name) F(m, STR, module) F(m, X64, offset)
/* kind: enum evlog_marker_kind (eventlog/eventlog.h): an annotation, or a
 * fact of llmtracker's own whose meaning the kind gives. */
#define EVLOG_FIELDS_marker(F, m) \
	F(m, STR, name) F(m, STR, text) F(m, U64, dur) F(m, U64, value) F(m, U8, kind)
#define EVLOG_FIELDS_clock(F, m) F(m, U64, realtime_ns) /* ts is the CLOCK_MONOTONIC side */
/* A CUDA synchronization (CUPTI): the host thread waited from ts for dur ns.
 * kind: CUpti_ActivitySynchronizationType (1 event synchronize, 2 stream
 * wait event, 3 stream synchronize, 4 context synchronize, 0 unknown);
 * stream: 0xffffffff where not one stream (context sync); cuda_event: the
 * CUDA event waited on, 0xffffffff if none; correlation_id: the API call's. */
#define EVLOG_FIELDS_gpu_sync(F, m) \
	F(m, U64, dur) F(m, U8, kind) F(m, U32, context) F(m, U32, stream) \
	F(m, U32, cuda_event) F(m, CORR, correlation_id)
/* Time CUPTI itself spent on a thread or process. kind:
 * CUpti_ActivityOverheadKind (1 driver compiler, 1<<16 buffer flush, 2<<16
 * instrumentation, 3<<16 resource, 0 unknown); object_kind:
 * CUpti_ActivityObjectKind of what it was charged to (1 process, 2 thread,
 * 3 device, 4 context, 5 stream). */
#define EVLOG_FIELDS_cupti_overhead(F, m) \
	F(m, U64, dur) F(m, U32, kind) F(m, U8, object_kind)
/* An injected library's log the collector published (collector/injection/inject_log.c):
 * its file name in the log directory, its size in bytes and its digest
 * ("sha256:" and 64 hex digits). The converter joins a library log to this
 * profile only when one of these names it (converter/input/sessions.c). */
#define EVLOG_FIELDS_lib_log(F, m) F(m, STR, name) F(m, U64, size) F(m, STR, digest)
/* The segment of this log published before the one it opens (schemas/eventlog.md
 * 5.2): the first event of every segment but the first. Its file name in the
 * log's directory, its size in bytes and its digest ("sha256:" and 64 hex
 * digits); that segment's own first event names the one before it, back to
 * the first, so the last segment vouches for them all. */
#define EVLOG_FIELDS_segment(F, m) F(m, STR, name) F(m, U64, size) F(m, STR, digest)
/* A process's place in a distributed job, from its environment when the
 * collector began following it (collector/sources/rank.c): rank, local_rank and
 * world_size (-1 where not set), and source, the variable the rank came
 * from ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"; "" when
 * only LOCAL_RANK was set). One per process image (fork, exec, attach). */
#define EVLOG_FIELDS_rank(F, m) \
	F(m, I64, rank) F(m, I64, local_rank) F(m, I64, world_size) F(m, STR, source)
/* GPU memory allocated or freed (CUPTI's MEMORY2 records). op:
 * CUpti_ActivityMemoryOperationType (1 allocation, 2 release); memory_kind:
 * CUpti_ActivityMemoryKind (1 pageable, 2 pinned, 3 device, 4 array, 5
 * managed, 6 device static, 7 managed static, 0 unknown); stream:
 * 0xffffffff where not stream-ordered; address and bytes: the allocation's
 * (a release's too); pool_type: CUpti_ActivityMemoryPoolType (0 none, 1
 * local, 2 imported) and pool_address the pool's base (0: none). */
#define EVLOG_FIELDS_gpu_memory(F, m) \
	F(m, U8, op) F(m, U8, memory_kind) F(m, U32, device) F(m, U32, context) F(m, U32, stream) \
	F(m, CORR, correlation_id) F(m, X64, address) F(m, U64, bytes) F(m, U8, pool_type) \
	F(m, X64, pool_address)

/*
 * T(NAME, number, member, track, dur, corr): enum EV_<NAME> = number, union
 * member and dump/type name `member`, and its timeline traits:
 *   track  META (no place on a timeline: process, symbol, clock ...),
 *          THREAD (the thread pid/tid), STREAM (the GPU stream of its
 *          fields `device` and `stream`), DEVICE (the process's track of
 *          the GPU of its field `device`: what the device does as a whole);
 *   dur    the field holding its duration in ns, or _ (an instant);
 *   corr   the field holding its CUDA correlation id, or _.
 */
#define EVLOG_TYPES(T) \
	T(PROCESS, 1, process, META, _, _)                /* seen or exec'd: ppid, comm, cmdline, exe */ \
	T(PROCESS_EXIT, 2, process_exit, META, _, _) \
	T(THREAD, 3, thread, META, _, _)                  /* seen, created or renamed */ \
	T(THREAD_EXIT, 4, thread_exit, META, _, _) \
	T(SYSCALL, 5, syscall, THREAD, dur, _)            /* a complete system call */ \
	T(CPU_SAMPLE, 6, cpu_sample, THREAD, _, _)        /* kernel + user frames */ \
	T(PY_ENTER, 7, py_enter, THREAD, _, _) \
	T(PY_EXIT, 8, py_exit, THREAD, _, _) \
	T(PY_SAMPLE, 9, py_sample, THREAD, _, _)          /* frames as strings */ \
	T(LIB_CALL, 10, lib_call, THREAD, dur, correlation_id) /* uprobe entry + return */ \
	T(GPU_KERNEL, 11, gpu_kernel, STREAM, dur, correlation_id) \
	T(GPU_MEMCPY, 12, gpu_memcpy, STREAM, dur, correlation_id) \
	T(GPU_MEMSET, 13, gpu_memset, STREAM, dur, correlation_id) \
	T(GPU_API, 14, gpu_api, THREAD, dur, correlation_id) /* runtime/driver call, by CUPTI */ \
	T(GPU_DEVICE, 15, gpu_device, META, _, _)         /* device properties */ \
	T(LOST, 16, lost, META, _, _)                     /* events a source lost */ \
	T(SYMBOL, 17, symbol, META, _, _)                 /* address -> symbol */ \
	T(MARKER, 18, marker, THREAD, dur, _)             /* annotation (steps, notes) */ \
	T(CLOCK, 19, clock, META, _, _)                   /* a MONOTONIC <-> REALTIME anchor */ \
	T(GPU_SYNC, 21, gpu_sync, THREAD, dur, correlation_id) /* a CUDA synchronization */ \
	T(CUPTI_OVERHEAD, 22, cupti_overhead, THREAD, dur, _)  /* CUPTI's own time */ \
	T(LIB_LOG, 23, lib_log, META, _, _)               /* a library log published */ \
	T(SEGMENT, 24, segment, META, _, _)               /* the segment before this one */ \
	T(RANK, 25, rank, META, _, _)                     /* a process's rank */ \
	T(GPU_MEMORY, 26, gpu_memory, DEVICE, _, correlation_id) /* allocated or freed */

/* The largest type number (the type byte keeps 6 bits; spill records 5):
 * the size of a union of one char array per type, as long as its number. */
#define EVS_TYPE_MAX_MEMBER(N, num, m, track, dur, corr) char m[num];
union evs_type_max {
	EVLOG_TYPES(EVS_TYPE_MAX_MEMBER)
};
#undef EVS_TYPE_MAX_MEMBER
#define EVLOG_TYPE_MAX_NUM ((int)sizeof(union evs_type_max))

/* ------------------------------------------------------- kind properties */

/* Columns a field takes (schemas/eventlog.md 3.5). */
#define EVS_NCOL_U8 1
#define EVS_NCOL_U32 1
#define EVS_NCOL_U64 1
#define EVS_NCOL_X64 1
#define EVS_NCOL_SRC 1
#define EVS_NCOL_I64 1
#define EVS_NCOL_CORR 1
#define EVS_NCOL_STR 1
#define EVS_NCOL_STACK 1
#define EVS_NCOL_PYSTACK 1
#define EVS_NCOL_U32X3 3
#define EVS_NCOL_ARGS (1 + EVLOG_MAX_ARGS)

/* The struct member a field declares. */
#define EVS_MEMBER_U8(f) uint8_t f;
#define EVS_MEMBER_U32(f) uint32_t f;
#define EVS_MEMBER_U64(f) uint64_t f;
#define EVS_MEMBER_X64(f) uint64_t f;
#define EVS_MEMBER_SRC(f) uint32_t f;
#define EVS_MEMBER_I64(f) int64_t f;
#define EVS_MEMBER_CORR(f) uint64_t f; /* 0 if unknown */
#define EVS_MEMBER_STR(f) struct evlog_str f;
#define EVS_MEMBER_STACK(f) struct evlog_stack f;
#define EVS_MEMBER_PYSTACK(f) struct evlog_pystack f;
#define EVS_MEMBER_U32X3(f) uint32_t f[3];
#define EVS_MEMBER_ARGS(f) uint32_t n##f; uint64_t f[EVLOG_MAX_ARGS];

/* Timeline tracks (the `track` trait). */
enum evlog_track {
	EVLOG_TRACK_META = 0,
	EVLOG_TRACK_THREAD = 1,
	EVLOG_TRACK_STREAM = 2,
	EVLOG_TRACK_DEVICE = 3,
};

#endif /* LLMT_EVLOG_SCHEMA_H */
