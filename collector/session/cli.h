/* SPDX-License-Identifier: Apache-2.0 */
/* Command-line parsing of `llmtracker profile` and the other subcommands. */
#ifndef LLMT_CLI_H
#define LLMT_CLI_H

#include <stddef.h>
#include <stdio.h>
#include "session.h"

#define LT_DEFAULT_OUTPUT "/tmp/data.json"
#define LT_DEFAULT_CPU_BUFFER_MB 20
#define LT_DEFAULT_FREQ_HZ 99
#define LT_DEFAULT_CPU_STACK_BYTES 16384
/* The event log's segments (--segment-mb, --segment-seconds). 20 MiB: s3fs
 * renames an object larger than its multipart_threshold (25 MiB unless set)
 * by multipart copy, which not every S3-compatible server has (the tests'
 * does not: EIO); below it, a rename is one server-side copy. */
#define LT_DEFAULT_SEGMENT_MB 20
#define LT_DEFAULT_SEGMENT_S 60
#define LT_SEGMENT_MB_MIN 0.0625
#define LT_SEGMENT_MB_MAX 4096

/* Where lt_log() writes (stderr unless a command prints its result as log lines). */
extern int lt_log_fd;

/* Parse a -t list ("syscall,cpu", "all") into type bits. 0 or -1 with err set. */
int lt_cli_parse_types(const char *s, unsigned *types, bool *all, char *err, size_t errsz);

/* Parse `profile` arguments (argv[0] is "profile"). 0, 1 when help was
 * printed, or -1 with err set. o->launch_argv points into argv. */
int lt_cli_parse_profile(int argc, char **argv, struct lt_options *o, char *err, size_t errsz);

void lt_cli_usage(FILE *f);

/* Subcommands (main.c dispatches). Each returns the process exit status. */
int lt_cmd_profile(int argc, char **argv);
int lt_cmd_export(int argc, char **argv);
int lt_cmd_generate(int argc, char **argv);

#endif
