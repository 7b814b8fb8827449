/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Runtime probes: which functions of which libraries to trace, and the
 * sites (library, offset) they resolve to.
 *
 * A spec names a library (a path, or a name matched against the file name,
 * "libflex.so" matching libflex.so.1 too) and a glob on the demangled
 * function name: without '(' it is matched against the name without its
 * parameters, with '(' against the full signature.
 */
#ifndef SBT_PROBES_H
#define SBT_PROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct probe_spec {
	const char *lib;
	const char *pattern;
	int role; /* enum sbt_role */
	int bytes_arg; /* argument index holding a byte count (0 = this), -1 none */
	bool role_set; /* built in, or --probe ...=ROLE: else a built-in role wins */
};

extern const struct probe_spec sbt_builtin_probes[];
extern const size_t sbt_n_builtin_probes;

struct ret_site;

/* One probed function: its entry, and where it returns. */
struct probe_site {
	uint32_t id;
	int role, bytes_arg;
	char *lib; /* path as found (the process's, for a file of another root) */
	const char *attach; /* the path the kernel is given: its library's */
	char *name; /* demangled, without parameters */
	char *symbol; /* as in the ELF file */
	const char *pattern; /* the spec's pattern */
	uint64_t offset; /* of the entry */
	uint64_t size; /* of the body */
	struct ret_site *rets; /* return sites */
	int nrets;
	char *refused; /* why it is not probed, or NULL */
};

/* A library scanned, and which file it was then: a file changed since
 * must not get the old offsets. */
struct probe_lib {
	char *path; /* as found */
	/* what the kernel opens for its uprobes: the path, or /proc/self/fd/N
	 * for a file read from an fd we keep (another root's) */
	char *attach;
	int fd; /* that kept fd, or -1 */
	uint64_t dev, ino, size, mtime_ns;
	bool overlay; /* on overlayfs: dev is the mount's, ino the real file's */
	bool stale; /* changed since: its sites refused, the path free to be read again */
};

struct probe_set {
	struct probe_site *sites;
	size_t n, cap;
	struct probe_lib *libs; /* libraries already scanned */
	size_t nlibs;
	size_t uprobes; /* entries and return sites of the functions taken */
	size_t max_uprobes; /* per process; past it functions are refused (0: no cap) */
	/* asked every few thousand symbols while a library is read: true
	 * stops the read (-EINTR, the library left out, to be read again);
	 * NULL: never */
	bool (*stop)(void *ctx);
	void *stop_ctx;
};

/* Parse --probe LIB:PATTERN[=ROLE] into a spec that owns a copy of the
 * text (free with probe_spec_free). 0, or -1 with err filled. */
int probe_spec_parse(const char *arg, struct probe_spec *out, char *err, size_t errlen);
void probe_spec_free(struct probe_spec *s);
/* The table the scans match against: the n user specs first (a user role
 * wins), then the built-in ones. A user library named by path is matched
 * by its real path: resolved into real[i] (malloc'd, for the caller to
 * free). Returns the table, or NULL when out of memory; *bad is the index
 * of a path that could not be resolved (left as given, errno says why),
 * or -1. */
struct probe_spec *probe_specs_table(const struct probe_spec *user, int n, char **real, int *bad);
bool probe_spec_wants_lib(const struct probe_spec *s, const char *libpath);
/* Scanned already: the same path, or the same file (st, or the path's). */
bool probe_set_has_lib(const struct probe_set *ps, const char *libpath, const struct stat *st);
/* Is the file at l->path still the one scanned? */
bool probe_lib_unchanged(const struct probe_lib *l);
/* Match the specs that want this library against its symbols and add the
 * new functions, with their return sites or the reason they are refused.
 * Returns how many were added (refused ones too), or -errno with err
 * filled. */
int probe_set_scan_lib(struct probe_set *ps, const struct probe_spec *specs, size_t nspecs, const char *libpath,
		       char *err, size_t errlen);
/* The same for a file open as fd (the set keeps it, until freed, even on
 * failure), found as libpath: read from the fd, attached through
 * /proc/self/fd/N, whose target the kernel opens. */
int probe_set_scan_lib_fd(struct probe_set *ps, const struct probe_spec *specs, size_t nspecs, const char *libpath,
			  int fd, char *err, size_t errlen);
/* What src found moved into dst: its libraries (less one dst has read
 * meanwhile, by file) with their functions, numbered on in dst, and one
 * past dst's uprobe cap refused. src is left empty. Returns the functions
 * moved, or -ENOMEM (nothing moved). */
int probe_set_adopt(struct probe_set *dst, struct probe_set *src);
void probe_set_free(struct probe_set *ps);

#endif
