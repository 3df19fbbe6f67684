/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proc.bpf.c <-> collector/sources/proc.c: process and thread lifecycle records.
 * The records themselves (lt_rec_fork/exec/exit/comm) are in common.h; this
 * adds the kinds only proc uses. LT_REC_EXIT is sent for every thread that
 * exits (the group leader included); LT_REC_PROC_EXIT once per process,
 * when its last thread exits, with the process's exit code.
 */
#ifndef LLMT_BPF_PROC_H
#define LLMT_BPF_PROC_H

#include "common.h"

#define LT_REC_PROC_EXIT 5      /* struct lt_rec_exit: the whole process exited */

#endif
