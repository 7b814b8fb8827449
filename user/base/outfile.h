/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Output files, written safely: as a new file, mode 0600 whatever the
 * umask (traces hold command lines, host names and addresses), created
 * exclusively beside the target under a temporary name, and renamed over
 * the target only when the run is worth keeping. So an existing file is
 * never wiped by a run that fails before it starts, and a symlink at the
 * target is replaced, never written through.
 */
#ifndef SBT_OUTFILE_H
#define SBT_OUTFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct outfile {
	char *path; /* the target */
	char *tmp; /* where it is written until committed; NULL once committed */
};

/* Create the temporary file: a stream on it, or NULL with err filled. */
FILE *outfile_create(struct outfile *of, const char *path, char *err, size_t errlen);
/* Put the file in place (rename over the target). 0 or -errno. */
int outfile_commit(struct outfile *of);
/* Bytes in the file as it is on disk now (after the stream was closed). */
uint64_t outfile_size(const struct outfile *of);
/* Not committed: remove the temporary file. Frees the names either way. */
void outfile_release(struct outfile *of);

/* A directory only we may enter: its parents made as mkdir -p does (0755),
 * itself 0700, and refused if it is not ours (what the daemon writes there
 * holds traces). One of ours that others may enter is made 0700 (a
 * Kubernetes emptyDir is 0777, a hostPath DirectoryOrCreate 0755), said
 * on stderr; one that others could write into is taken only while empty.
 * 0, or -1 with err (what names it: flag, e.g. "--state-dir"). */
int outfile_private_dir(const char *dir, const char *flag, char *err, size_t errlen);

#endif
