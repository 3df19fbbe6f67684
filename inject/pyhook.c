// SPDX-License-Identifier: Apache-2.0
/*
 * pyhook: Python calls from inside the target's CPython (3.9-3.13), for
 * interpreters built without USDT probes: a sys.monitoring tool of ours
 * from 3.12 on, a C-level profile function before. See pyhook.h.
 *
 * Hot path (the callback, run by the interpreter under the GIL): the code
 * object (an argument, or PyFrame_GetCode), one hash lookup by code-object
 * address, a timestamp, and one slot of the event ring; the control thread
 * encodes the ring into the log (li_pyhook_drain), off the program's
 * thread. Names are read
 * once per code object, on its first call, and kept with a reference on the
 * code object so that its address cannot be reused by another one while we
 * run. The callback never calls Python code, never leaves an exception set
 * and ignores C calls.
 *
 * Threads: sys.monitoring covers every thread of the interpreter, those
 * made later too. Before 3.12, CPython has no C hook for "a thread state was created". Threads
 * started by the threading module take threading._profile_hook as their
 * profile function before their first call: we put a C function object
 * there (when the program has set none) that swaps itself for the C-level
 * callback on the new thread's first event. Other new thread states (C
 * threads calling into Python) are covered at the next tick (when the
 * process's thread count changed, and every second). A thread that already
 * has a profile function (cProfile, sys.setprofile) is left alone and counted.
 *
 * Pids: events carry the pid the collector passed (the host's view); tids
 * are gettid() in the target, which is the host's tid unless the target runs
 * in another pid namespace, where only the main thread is mapped (to pid).
 */
#include "inject.h"
#include "pyhook.h"
#include "eventlog/eventlog.h"
#include "common/grow.h"
#include "common/hmap.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* CPython's Py_tracefunc `what` values (Include/cpython/pystate.h). */
enum { PYT_CALL = 0, PYT_RETURN = 3 };

typedef int (*pyh_tracefunc)(void *obj, void *frame, int what, void *arg);

/* The C API we use, resolved in the target. */
static struct {
	void *lib;                 /* libpython handle (dlopen NOLOAD), or NULL */
	int (*Py_IsInitialized)(void);
	int (*IsFinalizing)(void);
	int (*PyGILState_Ensure)(void);
	void (*PyGILState_Release)(int);
	void *(*PyGILState_GetThisThreadState)(void);
	void *(*PyThreadState_GetInterpreter)(void *);
	void *(*PyInterpreterState_ThreadHead)(void *);
	void *(*PyThreadState_Next)(void *);
	int (*SetProfile)(void *tstate, pyh_tracefunc f, void *arg);
	void *(*PyFrame_GetCode)(void *);
	void *(*PyObject_GetAttrString)(void *, const char *);
	const char *(*PyUnicode_AsUTF8AndSize)(void *, ssize_t *);
	long (*PyLong_AsLong)(void *);
	void (*Py_IncRef)(void *);
	void (*Py_DecRef)(void *);
	void (*PyErr_Fetch)(void **, void **, void **);
	void (*PyErr_Restore)(void *, void *, void *);
	void (*PyErr_Clear)(void);
	/* optional: the threading-module hook (new threads from their first call) */
	void *(*PySys_GetObject)(const char *);
	void *(*PyDict_GetItemString)(void *, const char *);
	int (*PyObject_SetAttrString)(void *, const char *, void *);
	void *(*PyCFunction_NewEx)(void *, void *, void *);
	void *(*PyTuple_GetItem)(void *, ssize_t);
	void *(*PyThreadState_Get)(void);
	/* 3.12+: sys.monitoring (PEP 669), called through its Python API */
	void *(*PyObject_CallFunction)(void *, const char *, ...);
	void *(*PyObject_Call)(void *, void *, void *);
	void *PyCFunction_Type;
	void *none;
	int major, minor;
} api;

/* CPython's PyMethodDef. */
struct pyh_methoddef {
	const char *name;
	void *(*meth)(void *self, void *args);
	int flags;
	const char *doc;
};
#define PYH_METH_VARARGS 1
#define PYH_METH_KEYWORDS 2
#define PYH_METH_FASTCALL 0x80

/* One code object seen: its names, interned for the hot path. */
struct pyh_code {
	void *code;                /* holds a reference */
	struct evlog_str func, file;
	uint32_t line;
};

#define CACHE_MAX (1u << 20)

static struct pyh_code *codes;   /* in the order seen; the ring points into it */
static size_t codes_n, codes_cap;
static struct lt_hmap code_ix;   /* code object address -> codes index */
static struct pyh_code unknown_code = { NULL, { .ptr = "?", .len = 1 }, { .ptr = "", .len = 0 }, 0 };

struct pyh_tls {
	uint32_t gen;              /* session this state belongs to */
	uint32_t tid;
	uint32_t depth;            /* calls entered while we watched */
};
static __thread struct pyh_tls pyh_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the writer, the ring's tail */
static struct evlog_writer *wr;
static struct li_config cfg;
static atomic_int running;
static atomic_uint gen;
static int installed, pending, removed;
static long slot_off = -1;         /* offset of c_profilefunc in PyThreadState */
static long obj_off = -1;          /* offset of c_profileobj */
static void *hook_obj;             /* our threading._profile_hook function object */
static int hook_set;               /* hook_obj is in threading._profile_hook */
static int via_mon;                /* events from sys.monitoring, not the profile function */
static int mon_stuck;              /* a failed install left callbacks of ours registered */
static int last_tasks, ticks;
static uint64_t n_enter, n_exit, n_dropped;
static uint64_t n_inline; /* events a caller encoded itself: the ring was full */
static unsigned n_threads, n_busy;
static int log_fd = -1;             /* the writer's fd (closed in forked children) */
static int log_failed;              /* the last flush of the log failed */
/* py_hold=1: the collector installs on the held thread (li_pyhook_held);
 * a tick installs only if that never came by then (the collector gave up),
 * never while it may still come: taking the GIL there would wait for the
 * held thread and leave the program's first calls unrecorded. */
#define HOLD_GRACE_NS (15ull * 1000000000ull)
static uint64_t hold_until;
/* Forks: a child of ours records into a log of its own (see "forks"). */
enum { FORK_NONE, FORK_BEGIN, FORK_STARTING, FORK_RUNNING };
static atomic_int fork_state;
static int fork_fd = -1;            /* the collector's fork channel (start key fork=1) */
static void child_begin(void);

/* ------------------------------------------------------------ resolving */

static void *sym(const char *name)
{
	void *p = api.lib ? dlsym(api.lib, name) : NULL;
	return p ? p : dlsym(RTLD_DEFAULT, name);
}

/* libpython loaded RTLD_LOCAL (an embedding program): find it in our maps. */
static void *find_libpython(void)
{
	char line[1280];
	void *h = NULL;
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return NULL;
	while (!h && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');
		if (!path || !strstr(path, "libpython"))
			continue;
		path[strcspn(path, "\n")] = 0;
		h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
	}
	fclose(f);
	return h;
}

static int parse_version(void)
{
	const unsigned long *v = sym("Py_Version");
	if (v) {
		api.major = (int)(*v >> 24);
		api.minor = (int)((*v >> 16) & 0xff);
		return 0;
	}
	const char *(*get)(void) = (const char *(*)(void))sym("Py_GetVersion");
	if (!get || sscanf(get(), "%d.%d", &api.major, &api.minor) != 2)
		return -1;
	return 0;
}

#define NEED(field, name) ((*(void **)&api.field = sym(name)) ? 0 : (miss = name, -1))

static int resolve(char *msg, size_t msgsz)
{
	const char *miss = NULL;
	if (!dlsym(RTLD_DEFAULT, "Py_IsInitialized"))
		api.lib = find_libpython();
	if (!sym("Py_IsInitialized")) {
		snprintf(msg, msgsz, "err Python function tracing cannot start: not a CPython process "
			 "(no Py_IsInitialized in it); the process is untouched");
		return -ENOENT;
	}
	if (parse_version() || api.major != 3 || api.minor < 9 || api.minor > 13) {
		snprintf(msg, msgsz, "err Python function tracing cannot start: CPython %d.%d is not "
			 "supported (3.9 to 3.13 are); the process is untouched", api.major, api.minor);
		return -ENOTSUP;
	}
	*(void **)&api.IsFinalizing = sym(api.minor >= 13 ? "Py_IsFinalizing" : "_Py_IsFinalizing");
	if (NEED(Py_IsInitialized, "Py_IsInitialized") || NEED(PyGILState_Ensure, "PyGILState_Ensure") ||
	    NEED(PyGILState_Release, "PyGILState_Release") ||
	    NEED(PyGILState_GetThisThreadState, "PyGILState_GetThisThreadState") ||
	    NEED(PyThreadState_GetInterpreter, "PyThreadState_GetInterpreter") ||
	    NEED(PyInterpreterState_ThreadHead, "PyInterpreterState_ThreadHead") ||
	    NEED(PyThreadState_Next, "PyThreadState_Next") || NEED(SetProfile, "_PyEval_SetProfile") ||
	    NEED(PyFrame_GetCode, "PyFrame_GetCode") ||
	    NEED(PyObject_GetAttrString, "PyObject_GetAttrString") ||
	    NEED(PyUnicode_AsUTF8AndSize, "PyUnicode_AsUTF8AndSize") ||
	    NEED(PyLong_AsLong, "PyLong_AsLong") || NEED(Py_IncRef, "Py_IncRef") ||
	    NEED(Py_DecRef, "Py_DecRef") || NEED(PyErr_Fetch, "PyErr_Fetch") ||
	    NEED(PyErr_Restore, "PyErr_Restore") || NEED(PyErr_Clear, "PyErr_Clear")) {
		snprintf(msg, msgsz, "err Python function tracing cannot start: CPython %d.%d does not "
			 "export %s; the process is untouched", api.major, api.minor, miss);
		return -ENOTSUP;
	}
	if (NEED(PySys_GetObject, "PySys_GetObject") || NEED(PyDict_GetItemString, "PyDict_GetItemString") ||
	    NEED(PyObject_SetAttrString, "PyObject_SetAttrString") ||
	    NEED(PyCFunction_NewEx, "PyCFunction_NewEx") || NEED(PyTuple_GetItem, "PyTuple_GetItem") ||
	    NEED(PyThreadState_Get, "PyThreadState_Get") || !(api.none = sym("_Py_NoneStruct")))
		api.PySys_GetObject = NULL; /* new threads are then covered at ticks only */
	api.PyCFunction_Type = sym("PyCFunction_Type");
	*(void **)&api.PyObject_Call = sym("PyObject_Call"); /* optional: the exit flush */
	if (api.minor < 12 || !api.PySys_GetObject || NEED(PyObject_CallFunction, "PyObject_CallFunction") ||
	    !api.PyCFunction_Type)
		api.PyObject_CallFunction = NULL; /* no sys.monitoring: the profile function */
	return 0;
}

/* ------------------------------------------------------------ code cache */

/* A str attribute of `code` as a malloc'd evlog_str ("?" on failure). */
static struct evlog_str code_str(void *code, const char *attr, const char *alt)
{
	struct evlog_str s = { 0 };
	void *o = api.PyObject_GetAttrString(code, attr);
	if (!o && alt) {
		api.PyErr_Clear();
		o = api.PyObject_GetAttrString(code, alt);
	}
	ssize_t n = 0;
	const char *u = o ? api.PyUnicode_AsUTF8AndSize(o, &n) : NULL;
	char *copy = u && n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (copy) {
		memcpy(copy, u, (size_t)n);
		copy[n] = 0;
		s.ptr = copy;
		s.len = (uint32_t)n;
	}
	if (o)
		api.Py_DecRef(o);
	api.PyErr_Clear();
	return s;
}

static void thread_hook_install(void);

/* First call of a code object: read its names. Saves and restores any
 * exception being raised, so the interpreter sees no change. Also the
 * moment to set threading._profile_hook when the hook went in before the
 * program imported threading (launch): importing it and making a Thread
 * call code objects for the first time, before any new thread runs. */
static void code_fill(struct pyh_code *c, void *code)
{
	void *et, *ev, *tb;
	api.PyErr_Fetch(&et, &ev, &tb);
	c->func = code_str(code, api.minor >= 11 ? "co_qualname" : "co_name", "co_name");
	c->file = code_str(code, "co_filename", NULL);
	void *ln = api.PyObject_GetAttrString(code, "co_firstlineno");
	long line = ln ? api.PyLong_AsLong(ln) : 0;
	if (ln)
		api.Py_DecRef(ln);
	api.PyErr_Clear();
	if (!hook_set && hook_obj && obj_off >= 0 && atomic_load(&running))
		thread_hook_install();
	api.PyErr_Restore(et, ev, tb);
	c->line = line > 0 ? (uint32_t)line : 0;
	if (!c->func.ptr)
		c->func = (struct evlog_str){ .ptr = strdup("?"), .len = 1 };
	if (!c->file.ptr)
		c->file = (struct evlog_str){ .ptr = strdup(""), .len = 0 };
	if (c->func.ptr && c->file.ptr) { /* hashed once, not on every call */
		c->func.hash = evlog_str_hash(c->func.ptr, c->func.len);
		c->file.hash = evlog_str_hash(c->file.ptr, c->file.len);
	}
	api.Py_IncRef(code);
	c->code = code;
}

static void ring_drain(void);

/* Under the GIL: our reference to c's code object, and its names, dropped. */
static void code_release(struct pyh_code *c, int decref)
{
	if (decref)
		api.Py_DecRef(c->code);
	free((void *)c->func.ptr);
	free((void *)c->file.ptr);
}

static const struct pyh_code *cache_get(void *code)
{
	struct lt_hmap_pos p = lt_hmap_probe(&code_ix, lt_mix64((uintptr_t)code));
	uint32_t i;

	while (lt_hmap_next(&code_ix, &p, &i))
		if (codes[i].code == code)
			return &codes[i];
	if (codes_n >= CACHE_MAX)
		return &unknown_code;
	if (codes_n == codes_cap) {
		ring_drain(); /* the ring points into the array */
		if (lt_grow((void **)&codes, &codes_cap, codes_n + 1, sizeof(*codes), 4096))
			return &unknown_code;
	}
	struct pyh_code *c = &codes[codes_n];
	code_fill(c, code);
	/* out of memory: not kept, asked again on its next call */
	if (!c->func.ptr || !c->file.ptr || lt_hmap_add(&code_ix, &p, (uint32_t)codes_n)) {
		code_release(c, 1);
		return &unknown_code;
	}
	codes_n++;
	return c;
}

/* Under the GIL: drop our references to code objects. */
static void cache_free(int decref)
{
	for (size_t i = 0; i < codes_n; i++)
		code_release(&codes[i], decref);
	free(codes);
	codes = NULL;
	codes_n = codes_cap = 0;
	lt_hmap_free(&code_ix);
}

/* ------------------------------------------------------------ the event ring
 *
 * A call's event is stamped into a slot here and encoded later by whoever
 * drains the ring under the lock: the control thread every LI_PYHOOK_DRAIN_MS, or a
 * caller that finds the ring full (it drains, then writes its own event:
 * nothing is lost, and the encoding's cost then falls on that caller, as
 * before the ring). A bounded multi-producer queue: a slot's seq is pos
 * while free for the producer of position pos, pos + 1 once written. */
#define RING_SLOTS (1u << 15) /* 1 MiB: LI_PYHOOK_DRAIN_MS (20) of 1.6 M events/s */

struct pyh_rec {
	_Atomic uint64_t seq;
	uint64_t ts;
	const struct pyh_code *c; /* valid until the cache moves: it drains first */
	uint32_t tid;
	uint32_t enter;
};

static struct pyh_rec *ring;
static _Atomic uint64_t ring_head;
static uint64_t ring_tail;

/* Only while no callback can run (before `running`, after removal). */
static int ring_reset(void)
{
	if (!ring && !(ring = calloc(RING_SLOTS, sizeof(*ring))))
		return -1;
	for (uint32_t i = 0; i < RING_SLOTS; i++)
		atomic_store_explicit(&ring[i].seq, i, memory_order_relaxed);
	atomic_store(&ring_head, 0);
	ring_tail = 0;
	return 0;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Under the lock: one call's event into the log. */
static void put(const struct pyh_code *c, uint64_t ts, uint32_t tid, int enter)
{
	struct evlog_event ev = { .ts = ts, .pid = cfg.pid, .tid = tid };
	if (enter) {
		ev.type = EV_PY_ENTER;
		ev.u.py_enter.func = c->func;
		ev.u.py_enter.file = c->file;
		ev.u.py_enter.line = c->line;
	} else {
		ev.type = EV_PY_EXIT;
		ev.u.py_exit.func = c->func;
	}
	if (wr && evlog_write(wr, &ev) == 0)
		(*(enter ? &n_enter : &n_exit))++;
	else
		n_dropped++;
}

/* Under the lock: every event written into the ring so far, in its order. */
static void ring_drain_locked(void)
{
	while (ring) {
		struct pyh_rec *r = &ring[ring_tail & (RING_SLOTS - 1)];
		if (atomic_load_explicit(&r->seq, memory_order_acquire) != ring_tail + 1)
			return;
		put(r->c, r->ts, r->tid, (int)r->enter);
		atomic_store_explicit(&r->seq, ring_tail + RING_SLOTS, memory_order_release);
		ring_tail++;
	}
}

static void ring_drain(void)
{
	pthread_mutex_lock(&lock);
	ring_drain_locked();
	pthread_mutex_unlock(&lock);
}

/* 0, or -1 when the ring is full (or was never made). */
static int ring_put(const struct pyh_code *c, uint64_t ts, uint32_t tid, int enter)
{
	if (!ring)
		return -1;
	uint64_t pos = atomic_load_explicit(&ring_head, memory_order_relaxed);
	for (;;) {
		struct pyh_rec *r = &ring[pos & (RING_SLOTS - 1)];
		int64_t d = (int64_t)(atomic_load_explicit(&r->seq, memory_order_acquire) - pos);
		if (d < 0)
			return -1;
		if (d > 0) {
			pos = atomic_load_explicit(&ring_head, memory_order_relaxed);
			continue;
		}
		if (atomic_compare_exchange_weak_explicit(&ring_head, &pos, pos + 1, memory_order_relaxed,
							  memory_order_relaxed)) {
			r->ts = ts;
			r->c = c;
			r->tid = tid;
			r->enter = (uint32_t)enter;
			atomic_store_explicit(&r->seq, pos + 1, memory_order_release);
			return 0;
		}
	}
}

/* ------------------------------------------------------------ hot path */

static void emit(const struct pyh_code *c, uint64_t ts, uint32_t tid, int enter)
{
	if (ring_put(c, ts, tid, enter) == 0)
		return;
	pthread_mutex_lock(&lock);
	n_inline++;
	ring_drain_locked();
	put(c, ts, tid, enter);
	pthread_mutex_unlock(&lock);
}

static struct pyh_tls *tls_get(void)
{
	struct pyh_tls *t = &pyh_t;
	unsigned g = atomic_load_explicit(&gen, memory_order_relaxed);
	if (t->gen != g) {
		t->gen = g;
		t->depth = 0;
		t->tid = (uint32_t)gettid();
		if (cfg.pid != (uint32_t)getpid() && t->tid == (uint32_t)getpid())
			t->tid = cfg.pid; /* another pid namespace: the main thread is known */
	}
	return t;
}

/* One call entered (enter=1) or left by `code`, on this thread. */
static void record(void *code, int enter)
{
	if (atomic_load_explicit(&fork_state, memory_order_relaxed) == FORK_BEGIN)
		child_begin();
	struct pyh_tls *t = tls_get();
	if (!enter && !t->depth)
		return; /* entered before we started watching */
	const struct pyh_code *c = cache_get(code);
	t->depth += enter ? 1 : -1;
	emit(c, mono_ns(), t->tid, enter);
}

/* The profile function (3.9-3.11, and 3.12+ without sys.monitoring). */
static int pyh_profile(void *obj, void *frame, int what, void *arg)
{
	(void)obj;
	(void)arg;
	if ((what != PYT_CALL && what != PYT_RETURN) || !atomic_load_explicit(&running, memory_order_relaxed))
		return 0;
	void *code = api.PyFrame_GetCode(frame);
	if (!code)
		return 0;
	record(code, what == PYT_CALL);
	api.Py_DecRef(code); /* the cache holds its own reference */
	return 0;
}

/* ------------------------------------------------------------ sys.monitoring (3.12+)
 *
 * The profile function costs far more from 3.12 on: CPython runs it through
 * sys.monitoring's legacy layer, which also reports every call of a C
 * function (each torch op) and makes a frame object for each event. As a
 * monitoring tool of our own we take just the events the profile function
 * turned into calls and returns (PY_START, PY_RESUME, PY_THROW; PY_RETURN,
 * PY_YIELD, PY_UNWIND: the same counts), on every thread at once, and leave
 * sys.setprofile and cProfile's tool id to the program. */
/* The events' bits (CPython's PY_MONITORING_EVENT_* numbers, 3.12 and 3.13):
 * enter, then exit. */
#define MON_EVENTS 6
static const long mon_ev[MON_EVENTS] = {
	1L << 0 /* PY_START */, 1L << 1 /* PY_RESUME */, 1L << 13 /* PY_THROW */,
	1L << 2 /* PY_RETURN */, 1L << 3 /* PY_YIELD */, 1L << 12 /* PY_UNWIND */,
};

/* sys.monitoring's functions, held from install to removal, so that a
 * program that deletes or replaces them cannot keep us from unregistering
 * nor make us run its code. */
enum { MF_USE, MF_GET, MF_REGISTER, MF_SET_EVENTS, MF_FREE, MF_N };
static const char *const mon_fn_names[MF_N] = {
	"use_tool_id", "get_tool", "register_callback", "set_events", "free_tool_id",
};

static struct {
	int tool;            /* our tool id, or -1 */
	void *f[MF_N];       /* sys.monitoring's functions (references) */
	void *fn[2];         /* our callbacks (function objects): enter, exit */
} mon = { .tool = -1 };

/* callback(code, offset[, arg]): a new reference to None; never raises. */
static void *mon_call(void *self, void *const *args, ssize_t nargs, int enter)
{
	(void)self;
	if (nargs >= 1 && via_mon && atomic_load_explicit(&running, memory_order_relaxed))
		record(args[0], enter);
	api.Py_IncRef(api.none);
	return api.none;
}
static void *mon_enter(void *self, void *const *args, ssize_t nargs) { return mon_call(self, args, nargs, 1); }
static void *mon_exit(void *self, void *const *args, ssize_t nargs) { return mon_call(self, args, nargs, 0); }

static struct pyh_methoddef mon_defs[2] = {
	{ "llmtracker_enter", (void *(*)(void *, void *))(void (*)(void))mon_enter, PYH_METH_FASTCALL, NULL },
	{ "llmtracker_exit", (void *(*)(void *, void *))(void (*)(void))mon_exit, PYH_METH_FASTCALL, NULL },
};

/* Under the GIL: sys.monitoring.FN(fmt...): a new reference, or NULL with
 * no exception left set. */
#define MON_RAW(fn, ...) mon_raw(api.PyObject_CallFunction(mon.f[fn], __VA_ARGS__))
static void *mon_raw(void *r)
{
	if (!r)
		api.PyErr_Clear();
	return r;
}
/* The same, 0 if it returned. */
static int mon_do(void *r)
{
	if (!r)
		return -1;
	api.Py_DecRef(r);
	return 0;
}
#define MON_CALL(fn, ...) mon_do(MON_RAW(fn, __VA_ARGS__))

/* Under the GIL: a free tool id, not one of the conventional ones
 * (0 debugger, 1 coverage, 2 profiler, 5 optimizer), which the program
 * may claim later. */
static int mon_free_tool(void)
{
	static const int candidates[] = { 4, 3 };
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		void *r = MON_RAW(MF_GET, "i", candidates[i]);
		int is_free = r == api.none;
		if (r)
			api.Py_DecRef(r);
		if (is_free)
			return candidates[i];
	}
	return -1;
}

/* Under the GIL: sys.monitoring's functions, each a builtin (checked by
 * its type, so no code of the program's runs in its place). */
static int mon_functions(void)
{
	void *m = api.PySys_GetObject("monitoring");
	int bad = !m || !api.PyCFunction_Type;
	for (int i = 0; i < MF_N && !bad; i++) {
		mon.f[i] = api.PyObject_GetAttrString(m, mon_fn_names[i]);
		bad = !mon.f[i] || ((void **)mon.f[i])[1] != api.PyCFunction_Type; /* ob_type */
	}
	api.PyErr_Clear();
	return bad ? -1 : 0;
}

/* Under the GIL: unregister what mon_install registered. 1 if no one else
 * holds our callbacks (the library may then be unloaded). */
static int mon_remove(void)
{
	int gone = 1;
	if (mon.tool >= 0) {
		int bad = MON_CALL(MF_SET_EVENTS, "ii", mon.tool, 0);
		for (int i = 0; i < MON_EVENTS; i++)
			bad |= MON_CALL(MF_REGISTER, "ilO", mon.tool, mon_ev[i], api.none);
		MON_CALL(MF_FREE, "i", mon.tool);
		gone = !bad; /* else our callbacks may still be called: stay loaded */
	}
	mon.tool = -1;
	for (int k = 0; k < 2; k++) {
		if (!mon.fn[k])
			continue;
		if (*(ssize_t *)mon.fn[k] != 1) {
			gone = 0; /* someone kept it (register_callback's return value) */
			continue;
		}
		api.Py_DecRef(mon.fn[k]);
		mon.fn[k] = NULL;
	}
	for (int i = 0; i < MF_N; i++) {
		if (mon.f[i])
			api.Py_DecRef(mon.f[i]);
		mon.f[i] = NULL;
	}
	return gone;
}

/* Under the GIL: become a monitoring tool with our callbacks. 0, or -1
 * with nothing left registered (the profile function is used instead). */
static int mon_install(void)
{
	long all = 0;
	/* after a stuck removal our callbacks are still registered: a second
	 * tool with them would record every call twice */
	int bad = mon_stuck || !api.PyObject_CallFunction || mon_functions() ||
		  (mon.tool = mon_free_tool()) < 0;
	for (int k = 0; k < 2 && !bad; k++)
		if (!mon.fn[k] && !(mon.fn[k] = api.PyCFunction_NewEx(&mon_defs[k], NULL, NULL)))
			api.PyErr_Clear();
	if (!bad && (!mon.fn[0] || !mon.fn[1] || MON_CALL(MF_USE, "is", mon.tool, "llmtracker")))
		bad = 1, mon.tool = -1; /* not ours to free */
	for (int i = 0; i < MON_EVENTS && !bad; i++) {
		bad = MON_CALL(MF_REGISTER, "ilO", mon.tool, mon_ev[i], mon.fn[i >= 3]);
		all |= mon_ev[i];
	}
	if (!bad)
		bad = MON_CALL(MF_SET_EVENTS, "il", mon.tool, all);
	if (bad && !mon_remove())
		mon_stuck = 1; /* callbacks left registered (they record nothing): stay loaded */
	return bad ? -1 : 0;
}

/* ------------------------------------------------------------ threads */

static int gil_take(int *st)
{
	if (!api.Py_IsInitialized() || (api.IsFinalizing && api.IsFinalizing()))
		return -1;
	*st = api.PyGILState_Ensure();
	return 0;
}

static void **slot_of(void *ts)
{
	return (void **)((char *)ts + slot_off);
}

/* threading._profile_hook, called by the profile trampoline on a new
 * thread's first event as hook(frame, event, arg): put the C callback on
 * this thread in its place, and record the call that brought us here. */
static void *thread_hook(void *self, void *args)
{
	(void)self;
	void *ts = api.PyThreadState_Get();
	if (atomic_load(&running) && api.SetProfile(ts, pyh_profile, NULL) < 0)
		api.PyErr_Clear();
	else if (atomic_load(&running))
		n_threads++;
	void *frame = api.PyTuple_GetItem(args, 0), *event = api.PyTuple_GetItem(args, 1);
	ssize_t n = 0;
	const char *e = event ? api.PyUnicode_AsUTF8AndSize(event, &n) : NULL;
	if (frame && e && n == 4 && !memcmp(e, "call", 4))
		pyh_profile(NULL, frame, PYT_CALL, NULL);
	api.PyErr_Clear();
	api.Py_IncRef(api.none);
	return api.none;
}

static struct pyh_methoddef thread_hook_def = {
	"llmtracker_profile_hook", thread_hook, PYH_METH_VARARGS, NULL,
};

/* Under the GIL: the threading module, if the program imported it. */
static void *threading_module(void)
{
	void *mods = api.PySys_GetObject("modules");
	return mods ? api.PyDict_GetItemString(mods, "threading") : NULL;
}

/* Under the GIL: set threading._profile_hook if the program left it None. */
static void thread_hook_install(void)
{
	void *th, *cur;
	if (hook_set || !hook_obj || !(th = threading_module()))
		return;
	cur = api.PyObject_GetAttrString(th, "_profile_hook");
	if (cur == api.none && api.PyObject_SetAttrString(th, "_profile_hook", hook_obj) == 0)
		hook_set = 1;
	if (cur)
		api.Py_DecRef(cur);
	api.PyErr_Clear();
}

/* Under the GIL: put None back where ours still is. 1 if no one but us
 * holds our function object any more (it may then go with the library). */
static int thread_hook_remove(void)
{
	void *th, *cur;
	if (!hook_obj)
		return 1;
	if (hook_set && (th = threading_module())) {
		cur = api.PyObject_GetAttrString(th, "_profile_hook");
		if (cur == hook_obj)
			api.PyObject_SetAttrString(th, "_profile_hook", api.none);
		if (cur)
			api.Py_DecRef(cur);
		api.PyErr_Clear();
	}
	hook_set = 0;
	if (*(ssize_t *)hook_obj != 1)
		return 0; /* someone kept it (threading.getprofile()): we must stay */
	api.Py_DecRef(hook_obj);
	hook_obj = NULL;
	return 1;
}

/* ------------------------------------------------------------ os._exit
 *
 * os._exit ends a process without atexit handlers or library destructors,
 * and every multiprocessing and DataLoader worker ends that way: what the
 * ring and the writer still held was lost. Where posix._exit is the
 * builtin, a builtin of ours takes its place (and os._exit's), under the
 * GIL, that writes both out and calls the original; at stop the original
 * goes back wherever ours still is. */
static void *exit_orig, *exit_obj;

static void flush_now(void)
{
	pthread_mutex_lock(&lock);
	ring_drain_locked();
	if (wr)
		evlog_writer_flush(wr);
	pthread_mutex_unlock(&lock);
}

static void *exit_wrap(void *self, void *args, void *kw)
{
	(void)self;
	flush_now();
	return api.PyObject_Call(exit_orig, args, kw);
}

static struct pyh_methoddef exit_def = {
	"_exit", (void *(*)(void *, void *))(void (*)(void))exit_wrap, PYH_METH_VARARGS | PYH_METH_KEYWORDS, NULL,
};

/* Under the GIL: sys.modules[mod]._exit = to, where it is `from`. */
static void exit_swap(const char *mod, void *from, void *to)
{
	void *mods = api.PySys_GetObject("modules");
	void *m = mods ? api.PyDict_GetItemString(mods, mod) : NULL;
	void *cur = m ? api.PyObject_GetAttrString(m, "_exit") : NULL;
	if (cur && cur == from)
		api.PyObject_SetAttrString(m, "_exit", to);
	if (cur)
		api.Py_DecRef(cur);
	api.PyErr_Clear();
}

static void exit_hook_install(void)
{
	if (exit_obj || !api.PyObject_Call || !api.PySys_GetObject || !api.PyCFunction_Type)
		return;
	void *mods = api.PySys_GetObject("modules");
	void *posix = mods ? api.PyDict_GetItemString(mods, "posix") : NULL;
	void *orig = posix ? api.PyObject_GetAttrString(posix, "_exit") : NULL;
	void *name = posix ? api.PyObject_GetAttrString(posix, "__name__") : NULL;
	if (orig && ((void **)orig)[1] == api.PyCFunction_Type) /* ob_type: never the program's code */
		exit_obj = api.PyCFunction_NewEx(&exit_def, NULL, name);
	if (exit_obj) {
		exit_orig = orig;
		exit_swap("posix", orig, exit_obj);
		exit_swap("os", orig, exit_obj);
	} else if (orig) {
		api.Py_DecRef(orig);
	}
	if (name)
		api.Py_DecRef(name);
	api.PyErr_Clear();
}

/* Under the GIL: the original back. 1 if no one else holds ours. */
static int exit_hook_remove(void)
{
	if (!exit_obj)
		return 1;
	exit_swap("posix", exit_obj, exit_orig);
	exit_swap("os", exit_obj, exit_orig);
	if (*(ssize_t *)exit_obj != 1)
		return 0; /* `from os import _exit` while traced: we stay, and so does the original */
	api.Py_DecRef(exit_obj);
	api.Py_DecRef(exit_orig);
	exit_obj = exit_orig = NULL;
	return 1;
}

/* How far past a thread state its profile function may be looked for. */
#define SLOT_SCAN 1024

/* The first SLOT_SCAN bytes at ts, as far as they can be read: a thread
 * state may end just before an unreadable page (the top of a thread's malloc
 * arena), which a plain scan would fault on. Copied by the kernel, which
 * stops at the first page it cannot read; where that call is refused
 * (seccomp), only to the end of ts's own page. Returns whole pointers. */
static long scan_copy(const void *ts, void **copy)
{
	struct iovec local = { copy, SLOT_SCAN }, remote = { (void *)ts, SLOT_SCAN };
	ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
	if (n < 0) {
		uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
		n = (ssize_t)(page - ((uintptr_t)ts & (page - 1)));
		if (n > SLOT_SCAN)
			n = SLOT_SCAN;
		memcpy(copy, ts, (size_t)n);
	}
	return (long)n / (long)sizeof(void *);
}

/* Under the GIL: where does a thread state keep its profile function?
 * Found on our own (otherwise idle) thread state by setting it and looking,
 * so no struct layout is compiled in. */
static int find_slot(void *self)
{
	if (api.SetProfile(self, pyh_profile, hook_obj) < 0) {
		api.PyErr_Clear();
		return -1;
	}
	void *copy[SLOT_SCAN / sizeof(void *)];
	long n = scan_copy(self, copy), found = -1;
	int hits = 0;
	for (long i = 0; i < n; i++) {
		if (copy[i] == (void *)pyh_profile)
			found = i * (long)sizeof(void *), hits++;
		else if (hook_obj && copy[i] == hook_obj)
			obj_off = i * (long)sizeof(void *);
	}
	if (api.SetProfile(self, NULL, NULL) < 0)
		api.PyErr_Clear();
	if (hits != 1 || *(void **)((char *)self + found) != NULL)
		return -1;
	slot_off = found;
	return 0;
}

/* Under the GIL: put the profile function on every thread state lacking
 * one; on our own too when we run on a program's thread (held install). */
static void cover_threads(int self_too)
{
	void *self = api.PyGILState_GetThisThreadState();
	void *interp = api.PyThreadState_GetInterpreter(self);
	unsigned busy = 0;
	for (void *ts = api.PyInterpreterState_ThreadHead(interp); ts; ts = api.PyThreadState_Next(ts)) {
		if ((ts == self && !self_too) || *slot_of(ts) == (void *)pyh_profile)
			continue;
		if (*slot_of(ts)) {
			busy++;
			continue;
		}
		if (api.SetProfile(ts, pyh_profile, NULL) < 0)
			api.PyErr_Clear(); /* an audit hook said no */
		else
			n_threads++;
	}
	n_busy = busy;
}

/* Under the GIL: take it off every thread that has ours. 1 if all gone. */
static int uncover_threads(void)
{
	void *self = api.PyGILState_GetThisThreadState();
	void *interp = api.PyThreadState_GetInterpreter(self);
	int all = 1;
	for (void *ts = api.PyInterpreterState_ThreadHead(interp); ts; ts = api.PyThreadState_Next(ts)) {
		int ours = *slot_of(ts) == (void *)pyh_profile ||
			   (obj_off >= 0 && hook_obj && *(void **)((char *)ts + obj_off) == hook_obj);
		if (!ours)
			continue;
		if (api.SetProfile(ts, NULL, NULL) < 0) {
			api.PyErr_Clear();
			all = 0;
		}
	}
	return all;
}

/* Under the GIL: the interpreter's thread states (sys.monitoring covers
 * them all, and those made later). */
static unsigned count_thread_states(void)
{
	void *interp = api.PyThreadState_GetInterpreter(api.PyGILState_GetThisThreadState());
	unsigned n = 0;
	for (void *ts = api.PyInterpreterState_ThreadHead(interp); ts; ts = api.PyThreadState_Next(ts))
		n++;
	return n;
}

static int install(int self_too, char *msg, size_t msgsz)
{
	int st;
	if (gil_take(&st)) {
		snprintf(msg, msgsz, "err Python function tracing cannot start: the interpreter is "
			 "shutting down");
		return -ESHUTDOWN;
	}
	if (installed) { /* the held install and a tick both tried */
		api.PyGILState_Release(st);
		return 0;
	}
	atomic_store(&running, 1);
	if (!mon_install()) {
		via_mon = 1;
		n_threads = count_thread_states();
		installed = 1;
		exit_hook_install();
		api.PyGILState_Release(st);
		return 0;
	}
	atomic_store(&running, 0);
	if (api.PySys_GetObject && !hook_obj) {
		hook_obj = api.PyCFunction_NewEx(&thread_hook_def, NULL, NULL);
		api.PyErr_Clear();
	}
	int rc = slot_off >= 0 ? 0 : find_slot(api.PyGILState_GetThisThreadState());
	if (!rc) {
		atomic_store(&running, 1);
		if (obj_off >= 0)
			thread_hook_install();
		cover_threads(self_too);
		installed = 1;
		exit_hook_install();
	}
	api.PyGILState_Release(st);
	if (rc)
		snprintf(msg, msgsz, "err Python function tracing cannot start: CPython %d.%d refused a "
			 "profile function (an audit hook?) or keeps it where it is not expected; "
			 "the process is untouched", api.major, api.minor);
	return rc ? -EPERM : 0;
}

static int count_tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *de; (de = readdir(d));)
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* ------------------------------------------------------------ log */

/* The writer on fd (taken in every case): the collector's file, or a
 * forked child's memfd (`what` says which in the header's options). */
static int writer_open(int fd, const char *what, char *err, size_t errsz)
{
	char cmd[64], opts[96];
	snprintf(cmd, sizeof(cmd), "pid=%u", (unsigned)getpid());
	snprintf(opts, sizeof(opts), "pyhook cpython=%d.%d%s", api.major, api.minor, what);
	struct evlog_header h = {
		.host = evlog_s(cfg.host), .producer = evlog_s("inject"),
		.cmdline = evlog_s(cmd), .options = evlog_s(opts),
		.producer_pid = (uint32_t)getpid(),
	};
	memcpy(h.session, cfg.session, sizeof(h.session));
	if (fd < 0)
		return snprintf(err, errsz, "no log file came from the collector"), -EIO;
	struct evlog_writer *w = NULL;
	if (evlog_writer_open_fd(&w, fd, "the collector's log file", &h, NULL, err, errsz))
		return -EIO;
	pthread_mutex_lock(&lock);
	wr = w;
	log_fd = fd;
	pthread_mutex_unlock(&lock);
	return 0;
}

/* Only the file the collector made for us (no directory, no path); the
 * collector publishes it. Our own copy of the fd: entry.c closes its. */
static int open_log(char *msg, size_t msgsz)
{
	char err[256];
	int fd = cfg.py_fd >= 0 ? fcntl(cfg.py_fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (writer_open(fd, "", err, sizeof(err))) {
		snprintf(msg, msgsz, "err Python function tracing cannot start: cannot create its log: %s", err);
		return -EIO;
	}
	return 0;
}

static void close_log(void)
{
	pthread_mutex_lock(&lock);
	ring_drain_locked();
	log_failed = wr && evlog_writer_close(wr);
	wr = NULL;
	log_fd = -1;
	pthread_mutex_unlock(&lock);
}

/* ------------------------------------------------------------ forks
 *
 * A forked child (multiprocessing, DataLoader workers) inherits the hook
 * (the profile function on the forking thread, the monitoring tool), the
 * ring, the writer and the parent's file, but not the control thread. It
 * must never write the parent's file and must lose none of its own calls,
 * from the first one after the fork: it goes on recording into the ring
 * (the parent's records there dropped) and, at its first call, makes a log
 * of its own in memory (a memfd) and hands it, with one end of a new
 * control socket, to the collector on the fork channel (start key fork=1:
 * a socket the collector gave with the start, inherited by every fork).
 * A control thread of the child's own then drains the ring and answers
 * "stop" like any started library; the collector copies the memfd into a
 * log file of the child's as it grows (inject_mgr.c). Nothing waits for the
 * collector: a send that fails (collector gone, channel full) leaves the
 * child recording nothing. Without fork=1 a child records nothing. */
static void atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	wr = NULL; /* the parent's, caught in any state: never touched again */
	if (log_fd >= 0)
		close(log_fd);
	log_fd = -1;
	int follow = atomic_load(&running) && installed && fork_fd >= 0;
	atomic_store(&fork_state, follow ? FORK_BEGIN : FORK_NONE);
	if (!follow) {
		atomic_store(&running, 0);
		installed = pending = 0;
		return;
	}
	ring_reset();              /* slots the parent's threads held are theirs */
	atomic_fetch_add(&gen, 1); /* this thread's tid, and depth from here on */
	n_enter = n_exit = n_dropped = n_inline = 0;
}

/* "forked" + the memfd and a control socket's end, on the fork channel;
 * never blocks. */
static int child_announce(int mfd, int sock)
{
	char msg[64], cbuf[CMSG_SPACE(2 * sizeof(int))];
	int fds[2] = { mfd, sock };
	snprintf(msg, sizeof(msg), "forked pid=%d ppid=%d", (int)getpid(), (int)getppid());
	struct iovec iov = { msg, strlen(msg) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	return sendmsg(fork_fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* The child's first call (under the GIL): its own log and channel. */
static void child_begin(void)
{
	int want = FORK_BEGIN, sv[2] = { -1, -1 };
	char err[256];
	if (!atomic_compare_exchange_strong(&fork_state, &want, FORK_STARTING))
		return;
	cfg.pid = (uint32_t)getpid();
	int mfd = memfd_create("llmtracker-python", MFD_CLOEXEC);
	int ok = mfd >= 0 && !socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) &&
		 !writer_open(fcntl(mfd, F_DUPFD_CLOEXEC, 0), " forked", err, sizeof(err)) &&
		 !child_announce(mfd, sv[1]);
	if (mfd >= 0)
		close(mfd);
	if (sv[1] >= 0)
		close(sv[1]);
	if (ok && !li_chan_forked(sv[0])) {
		atomic_store(&fork_state, FORK_RUNNING);
		return;
	}
	atomic_store(&running, 0); /* nowhere to record to: nothing is recorded */
	pthread_mutex_lock(&lock);
	evlog_writer_abort(wr);
	wr = NULL;
	log_fd = -1;
	pthread_mutex_unlock(&lock);
	if (sv[0] >= 0 && !ok)
		close(sv[0]);
	atomic_store(&fork_state, FORK_NONE);
}

/* ------------------------------------------------------------ control */

/* Launch: the interpreter may still be starting; catch its end quickly. */
static int wait_initialized(int ms)
{
	for (int i = 0; i < ms && !api.Py_IsInitialized(); i++)
		usleep(1000);
	return api.Py_IsInitialized();
}

int li_pyhook_start(const struct li_config *c, char *msg, size_t msgsz)
{
	if (atomic_load(&running) || wr) {
		snprintf(msg, msgsz, "err Python function tracing is already running here");
		return -EBUSY;
	}
	static int atfork_set;
	if (!atfork_set)
		atfork_set = pthread_atfork(NULL, NULL, atfork_child) == 0;
	cfg = *c;
	if (fork_fd >= 0)
		close(fork_fd);
	fork_fd = c->fork && c->fork_fd >= 0 ? fcntl(c->fork_fd, F_DUPFD_CLOEXEC, 0) : -1;
	atomic_store(&fork_state, FORK_NONE);
	n_enter = n_exit = n_dropped = n_inline = 0;
	n_threads = n_busy = 0;
	installed = pending = removed = via_mon = 0;
	int rc = resolve(msg, msgsz);
	if (rc || (rc = open_log(msg, msgsz)))
		return rc;
	atomic_fetch_add(&gen, 1);
	ring_reset(); /* without a ring every event is written at once */
	if (c->py_hold) { /* installed by li_pyhook_held, else by a tick */
		pending = 1;
		hold_until = mono_ns() + HOLD_GRACE_NS;
		snprintf(msg, msgsz, "ok cpython=%d.%d pending=1 held=1", api.major, api.minor);
		return 0;
	}
	if (!wait_initialized(c->py_wait_ms)) {
		pending = 1;
		snprintf(msg, msgsz, "ok cpython=%d.%d pending=1", api.major, api.minor);
		return 0;
	}
	if ((rc = install(0, msg, msgsz))) {
		pthread_mutex_lock(&lock);
		evlog_writer_abort(wr);
		wr = NULL;
		log_fd = -1;
		pthread_mutex_unlock(&lock);
		return rc;
	}
	last_tasks = count_tasks();
	snprintf(msg, msgsz, "ok cpython=%d.%d threads=%u busy=%u events=%s", api.major,
		 api.minor, n_threads, n_busy, via_mon ? "sys.monitoring" : "profile");
	return 0;
}

int li_pyhook_held(void)
{
	char m[256];
	if (!wr || !pending)
		return installed ? 0 : -EINVAL;
	if (!api.Py_IsInitialized())
		return -EAGAIN;
	int rc = install(1, m, sizeof(m));
	if (!rc) {
		pending = 0;
		last_tasks = count_tasks();
	}
	return rc;
}

void li_pyhook_mark_own(void)
{
	struct evlog_event ev = { .type = EV_MARKER, .ts = mono_ns(), .pid = cfg.pid,
				  .tid = (uint32_t)gettid() };
	if (cfg.pid != (uint32_t)getpid() && ev.tid == (uint32_t)getpid())
		ev.tid = cfg.pid; /* as tls_get maps it */
	ev.u.marker.kind = EVLOG_MARK_OWN_THREAD;
	pthread_mutex_lock(&lock);
	if (wr)
		evlog_write(wr, &ev);
	pthread_mutex_unlock(&lock);
}

int li_pyhook_running(void)
{
	return wr != NULL;
}

void li_pyhook_tick(void)
{
	if (!wr)
		return;
	if (pending && api.Py_IsInitialized() && !(cfg.py_hold && mono_ns() < hold_until)) {
		char m[256];
		pending = 0;
		install(0, m, sizeof(m)); /* on failure the log stays empty; stop says so */
		last_tasks = count_tasks();
	} else if (installed && !via_mon) {
		int n = count_tasks();
		int st;
		if ((n != last_tasks || ++ticks % 5 == 0) && !gil_take(&st)) {
			if (obj_off >= 0)
				thread_hook_install(); /* threading imported since */
			cover_threads(0);
			api.PyGILState_Release(st);
		}
		last_tasks = n;
	}
	pthread_mutex_lock(&lock);
	ring_drain_locked();
	if (wr)
		evlog_writer_tick(wr);
	pthread_mutex_unlock(&lock);
}

void li_pyhook_drain(void)
{
	if (wr)
		ring_drain();
}

static void stats_msg(char *msg, size_t msgsz)
{
	snprintf(msg, msgsz, "stopped py_enter=%llu py_exit=%llu threads=%u busy=%u dropped=%llu "
		 "inline=%llu removed=%d log=%s events=%s", (unsigned long long)n_enter,
		 (unsigned long long)n_exit, n_threads, n_busy, (unsigned long long)n_dropped,
		 (unsigned long long)n_inline, removed,
		 log_failed ? "failed" : "ok", via_mon ? "sys.monitoring" : "profile");
}

int li_pyhook_stop(int at_exit, char *msg, size_t msgsz)
{
	int st;
	if (!wr && !installed) {
		stats_msg(msg, msgsz);
		return 1;
	}
	atomic_store(&running, 0);
	atomic_store(&fork_state, FORK_NONE);
	if (fork_fd >= 0)
		close(fork_fd); /* children forked from here on record nothing */
	fork_fd = -1;
	if (installed && !at_exit && !gil_take(&st)) {
		int exit_gone = exit_hook_remove();
		if (via_mon) {
			removed = mon_remove() && exit_gone;
		} else {
			int all = uncover_threads(); /* first: threads may hold our hook object */
			removed = thread_hook_remove() && all && !mon_stuck && exit_gone;
		}
		if (removed) {
			ring_drain(); /* its events point into the cache */
			cache_free(1);
		}
		api.PyGILState_Release(st);
	}
	close_log();
	stats_msg(msg, msgsz);
	if (installed && !removed)
		return 0; /* the interpreter may still call into us: stay loaded */
	free(ring); /* no callback of ours can run any more */
	ring = NULL;
	installed = pending = via_mon = 0;
	if (api.lib) {
		dlclose(api.lib);
		api.lib = NULL;
	}
	return 1;
}
