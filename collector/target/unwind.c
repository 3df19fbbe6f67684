// SPDX-License-Identifier: Apache-2.0
/*
 * unwind: user stacks from CFI over a copied stack slice; see unwind.h.
 */
#include "unwind.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "bpf/common.h"
#include "bpf/cpusample.h"
#include "debuginfod.h"
#include "sym_table.h"

#define UW_MAX_MODS 8192u   /* objects reported per process */

struct uw_mod {
	int fd;                 /* symbolize.c's, not owned; -1: image below */
	char *image;            /* the vDSO (lt_unwind's copy) */
	size_t image_len;
	int stripped;           /* no .symtab, no .debug_frame: debuginfod may help */
	struct uw_proc *proc;
};

struct uw_proc {
	int pid;                /* 0: a free slot */
	uint64_t generation;    /* lt_sym_generation of the maps it was built from */
	uint64_t used;          /* last use, for eviction */
	Dwfl *dwfl;             /* NULL: could not be built for this generation */
	struct uw_mod *mods;
	size_t n_mods;
	/* the sample being unwound (memory_read, set_initial_registers) */
	const uint64_t *regs;
	const uint8_t *stack;
	size_t stack_len;
	uint64_t *ips;
	unsigned n_ips, max_ips;
	struct lt_dbgd *dbgd;   /* NULL: DEBUGINFOD_URLS unset */
	int dbgd_waits;         /* a module's debug file was being fetched */
	uint64_t dbgd_seen;     /* lt_dbgd_completed when the session was built */
};

struct lt_unwind {
	struct lt_sym *sym;
	struct uw_proc *procs;
	size_t max_procs;
	uint64_t tick;
	struct lt_dbgd *dbgd;   /* lt_sym's; NULL: DEBUGINFOD_URLS unset */
	char *vdso;             /* a copy of our own vDSO: the kernel maps the same
				 * image into every x86-64 process */
	size_t vdso_len;
	struct lt_unwind_stats st;
};

/* ------------------------------------------------------- libdwfl glue */

static int uw_find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
		       char **file_name, Elf **elfp)
{
	struct uw_mod *m = *userdata;
	int fd;

	(void)mod; (void)name; (void)base; (void)file_name;
	if (m && m->image) {
		*elfp = elf_memory(m->image, m->image_len);
		return -1;
	}
	if (!m || m->fd < 0)
		return -1;
	fd = fcntl(m->fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	*elfp = elf_begin(fd, ELF_C_READ, NULL);   /* pread on demand, never mmap */
	if (!*elfp) {
		close(fd);
		return -1;
	}
	return fd; /* libdwfl owns fd and *elfp now */
}

/* .eh_frame, in every loaded object, is what unwinds. libdwfl asks for a
 * separate debug file (its .debug_frame) when a frame has no CFI there.
 * The target's own debug files are not read: libdwfl would map them (a
 * target could truncate one under us). A stripped object's file from
 * debuginfod, when configured, is the node's (its client's cache): asked
 * for without waiting (debuginfod.h), used by the session built once it
 * is there, and only when its build-id is the module's. */
static int uw_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *name,
			     Dwarf_Addr base, const char *file_name, const char *debuglink,
			     GElf_Word crc, char **debuginfo_file_name)
{
	struct uw_mod *m = *userdata;
	const unsigned char *bits;
	char id[41], file_id[41];
	GElf_Addr vaddr;
	int len, fd, k;

	(void)name; (void)base; (void)file_name; (void)debuglink; (void)crc;
	(void)debuginfo_file_name;
	if (!m || !m->stripped || !m->proc->dbgd ||
	    (len = dwfl_module_build_id(mod, &bits, &vaddr)) <= 0)
		return -1;
	for (k = 0; k < len && k < 20; k++)
		snprintf(id + 2 * k, 3, "%02x", bits[k]);
	fd = lt_dbgd_request(m->proc->dbgd, id);
	if (fd == -EINPROGRESS)
		m->proc->dbgd_waits = 1;
	if (fd < 0)
		return -1;
	if (sym_elf_build_id(fd, file_id) || strcmp(file_id, id)) {
		close(fd);
		return -1;
	}
	return fd; /* libdwfl owns it */
}

static const Dwfl_Callbacks uw_callbacks = {
	.find_elf = uw_find_elf,
	.find_debuginfo = uw_find_debuginfo,
};

static pid_t uw_next_thread(Dwfl *dwfl, void *arg, void **thread_arg)
{
	struct uw_proc *p = arg;

	(void)dwfl;
	if (*thread_arg)
		return 0;
	*thread_arg = p;
	return p->pid;
}

static bool uw_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_arg)
{
	(void)dwfl; (void)tid;
	*thread_arg = arg;
	return true;
}

/* Only the copied slice is readable: an unwind needing more stops there. */
static bool uw_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct uw_proc *p = arg;
	uint64_t sp = p->regs[LT_CPU_REG_SP];

	(void)dwfl;
	if (addr < sp || addr - sp > p->stack_len || p->stack_len - (addr - sp) < 8)
		return false;
	memcpy(result, p->stack + (addr - sp), 8);
	return true;
}

static bool uw_set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct uw_proc *p = arg;
	Dwarf_Word regs[LT_CPU_NREGS];

	memcpy(regs, p->regs, sizeof(regs));
	if (!dwfl_thread_state_registers(thread, 0, LT_CPU_NREGS, regs))
		return false;
	dwfl_thread_state_register_pc(thread, regs[LT_CPU_REG_IP]);
	return true;
}

static const Dwfl_Thread_Callbacks uw_thread_callbacks = {
	.next_thread = uw_next_thread,
	.get_thread = uw_get_thread,
	.memory_read = uw_memory_read,
	.set_initial_registers = uw_set_initial_registers,
};

/* ------------------------------------------------------ one process */

/* An object's load bias and address range [*low, *high) as libdwfl wants
 * them: low where its first PT_LOAD (aligned) lies, the bias computed from
 * the mapping at start of file offset pgoff. */
static int obj_range(Elf *e, uint64_t start, uint64_t pgoff, uint64_t *low, uint64_t *high)
{
	uint64_t first = 0, end = 0, bias = 0;
	int have_first = 0, have_bias = 0;
	size_t n, i;

	if (elf_getphdrnum(e, &n))
		return -1;
	for (i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (!have_first) {
			first = ph.p_align ? ph.p_vaddr & -ph.p_align : ph.p_vaddr;
			have_first = 1;
		}
		if (ph.p_vaddr + ph.p_memsz > end)
			end = ph.p_vaddr + ph.p_memsz;
		if (!have_bias && (ph.p_flags & PF_X) && pgoff >= (ph.p_offset & ~4095ull) &&
		    pgoff < ph.p_offset + ph.p_filesz) {
			bias = start - (ph.p_vaddr + pgoff - ph.p_offset);
			have_bias = 1;
		}
	}
	if (!have_first || !have_bias || end <= first)
		return -1;
	*low = bias + first;
	*high = bias + end;
	return 0;
}

/* No .symtab and no .debug_frame: what `strip` leaves. */
static int obj_stripped(Elf *e)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(e, &shstrndx))
		return 0;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *sname;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			return 0;
		sname = elf_strptr(e, shstrndx, sh.sh_name);
		if (sname && !strcmp(sname, ".debug_frame"))
			return 0;
	}
	return 1;
}

struct uw_build {
	struct lt_unwind *u;
	struct uw_proc *p;
	uint64_t last_dev, last_ino, high;
};

static void report(struct uw_build *b, const char *name, uint64_t low, uint64_t high, int fd,
		   int vdso, int stripped)
{
	struct uw_proc *p = b->p;
	Dwfl_Module *mod;
	void **ud;

	if (p->n_mods >= UW_MAX_MODS || low < b->high)
		return; /* overlaps what was reported (a stale map): skip it */
	mod = dwfl_report_module(p->dwfl, name, low, high);
	if (!mod)
		return;
	dwfl_module_info(mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
	p->mods[p->n_mods].fd = fd;
	p->mods[p->n_mods].proc = p;
	p->mods[p->n_mods].stripped = stripped;
	if (vdso) {
		p->mods[p->n_mods].image = b->u->vdso;
		p->mods[p->n_mods].image_len = b->u->vdso_len;
	}
	*ud = &p->mods[p->n_mods++];
	b->high = high;
}

static int report_mapping(void *arg, const struct lt_sym_mapping *m)
{
	struct uw_build *b = arg;
	uint64_t low, high;
	Elf *e;

	int vdso = m->fd < 0 && b->u->vdso && !strcmp(m->name, "[vdso]");

	if (m->fd < 0 && !vdso)
		return 0; /* anonymous (JIT): frame pointers */
	if (!vdso && m->dev == b->last_dev && m->ino == b->last_ino)
		return 0; /* the same object's next executable mapping */
	b->last_dev = m->dev;
	b->last_ino = m->ino;
	e = vdso ? elf_memory(b->u->vdso, b->u->vdso_len) : elf_begin(m->fd, ELF_C_READ, NULL);
	if (e && elf_kind(e) == ELF_K_ELF && !obj_range(e, m->start, m->pgoff, &low, &high))
		report(b, m->name, low, high, m->fd, vdso, !vdso && b->u->dbgd && obj_stripped(e));
	if (e)
		elf_end(e);
	return 0;
}

static void proc_drop(struct uw_proc *p)
{
	if (p->dwfl)
		dwfl_end(p->dwfl);
	p->dwfl = NULL;
	free(p->mods);
	p->mods = NULL;
	p->n_mods = 0;
}

static int proc_build(struct lt_unwind *u, struct uw_proc *p)
{
	struct uw_build b = { .u = u, .p = p };

	proc_drop(p);
	u->st.sessions++;
	p->dbgd = u->dbgd;
	p->dbgd_waits = 0;
	p->dbgd_seen = u->dbgd ? lt_dbgd_completed(u->dbgd) : 0;
	p->mods = calloc(UW_MAX_MODS, sizeof(*p->mods));
	p->dwfl = p->mods ? dwfl_begin(&uw_callbacks) : NULL;
	if (!p->dwfl)
		goto fail;
	dwfl_report_begin(p->dwfl);
	if (lt_sym_mappings(u->sym, p->pid, NULL, report_mapping, &b))
		goto fail;
	if (dwfl_report_end(p->dwfl, NULL, NULL) || !p->n_mods)
		goto fail;
	if (!dwfl_attach_state(p->dwfl, NULL, p->pid, &uw_thread_callbacks, p))
		goto fail;
	return 0;
fail:
	proc_drop(p);
	return -1;
}

/* The session of pid for its current maps: found, rebuilt, or built in a
 * free (else the least recently used) slot. */
static struct uw_proc *proc_get(struct lt_unwind *u, int pid)
{
	uint64_t gen = lt_sym_generation(u->sym, pid);
	struct uw_proc *p = NULL, *lru = &u->procs[0];
	size_t i;

	if (!gen)
		return NULL;
	for (i = 0; i < u->max_procs && !p; i++) {
		if (u->procs[i].pid == pid)
			p = &u->procs[i];
		else if (u->procs[i].used < lru->used)
			lru = &u->procs[i];
	}
	if (!p) {
		p = lru;
		proc_drop(p);
		p->pid = pid;
		p->generation = 0;
	}
	p->used = ++u->tick;
	/* A debug file its session waited for has come: build it again. */
	if (p->dbgd_waits && lt_dbgd_completed(u->dbgd) != p->dbgd_seen)
		p->generation = 0;
	if (p->generation != gen) {
		p->generation = gen;
		proc_build(u, p);
	}
	return p->dwfl ? p : NULL;
}

/* ------------------------------------------------------------ samples */

static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct uw_proc *p = arg;
	Dwarf_Addr pc;
	bool activation;

	if (!dwfl_frame_pc(state, &pc, &activation) || pc == 0)
		return DWARF_CB_ABORT;
	p->ips[p->n_ips++] = pc;
	return p->n_ips < p->max_ips ? DWARF_CB_OK : DWARF_CB_ABORT;
}

unsigned lt_unwind_sample(struct lt_unwind *u, int pid, const uint64_t *regs,
			  const uint8_t *stack, size_t stack_len, uint64_t *ips, unsigned max,
			  int *complete)
{
	struct uw_proc *p = proc_get(u, pid);

	*complete = 0;
	if (!p) {
		u->st.failed++;
		return 0;
	}
	p->regs = regs;
	p->stack = stack;
	p->stack_len = stack_len;
	p->ips = ips;
	p->n_ips = 0;
	p->max_ips = max;
	/* 0: the outermost frame reached; -1: stopped (memory outside the
	 * copy, no CFI); 1: our callback stopped it (max frames). */
	if (max)
		*complete = dwfl_getthread_frames(p->dwfl, pid, frame_cb, p) == 0;
	u->st.samples++;
	u->st.frames += p->n_ips;
	u->st.outermost += (uint64_t)*complete;
	return p->n_ips;
}

/* ---------------------------------------------------------- lifecycle */

/* Our own vDSO image: its size is where its section headers end. */
static void vdso_copy(struct lt_unwind *u)
{
	const char *base = (const char *)getauxval(AT_SYSINFO_EHDR);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
	size_t len;

	if (!base || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64)
		return;
	len = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	if (len < sizeof(*eh) || len > (1u << 20) || !(u->vdso = malloc(len)))
		return;
	memcpy(u->vdso, base, len);
	u->vdso_len = len;
}

int lt_unwind_new(struct lt_unwind **out, struct lt_sym *sym, unsigned max_procs)
{
	struct lt_unwind *u = calloc(1, sizeof(*u));

	*out = NULL;
	if (!u || !max_procs || !(u->procs = calloc(max_procs, sizeof(*u->procs)))) {
		free(u);
		return -ENOMEM;
	}
	elf_version(EV_CURRENT);
	u->sym = sym;
	u->dbgd = lt_sym_debuginfod(sym);
	u->max_procs = max_procs;
	vdso_copy(u);
	*out = u;
	return 0;
}

void lt_unwind_free(struct lt_unwind *u)
{
	if (!u)
		return;
	for (size_t i = 0; i < u->max_procs; i++)
		proc_drop(&u->procs[i]);
	free(u->procs);
	free(u->vdso);
	free(u);
}

void lt_unwind_stats(const struct lt_unwind *u, struct lt_unwind_stats *st)
{
	*st = u->st;
}
