// SPDX-License-Identifier: GPL-2.0-only
/*
 * The runtime's probes, per process: entry and return-site uprobes put on
 * each traced process only, on the libraries a search found (libfind.c).
 */
#include <bpf/libbpf.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attach/attach.h"
#include "attach/uprobe_multi.h"
#include "base/clock.h"
#include "base/log.h"
#include "probes/libfind.h"
#include "probes/retsites.h"
#include "spyre.skel.h"

/* ---- runtime probes, per process ------------------------------------------ */

static bool stop_now(struct attacher *a)
{
	if ((a->stop && *a->stop) || (a->deadline_ns && sbt_now_boottime() >= a->deadline_ns))
		a->interrupted = true;
	return a->interrupted;
}

static struct bpf_link *uprobe(struct bpf_program *prog, pid_t pid, const char *lib, uint64_t off, uint64_t cookie)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie, .retprobe = false);

	return bpf_program__attach_uprobe_opts(prog, pid, lib, off, &opts);
}

/* One function on one process: its entry and every return site, or none
 * of them (a function whose returns cannot all be seen is refused). The
 * returns go first: from the moment its entry is live, each call that is
 * seen entering is seen leaving. */
static int attach_function(struct attacher *a, struct attached_proc *ap, struct probe_site *s)
{
	size_t first = ap->links.n;
	uint64_t at = s->offset;
	int err = 0;

	for (int i = 0; !err && i < s->nrets; i++) {
		const struct ret_site *r = &s->rets[i];

		at = r->offset;
		err = link_keep(&ap->links, uprobe(a->skel->progs.call_return, ap->pid, s->attach, r->offset,
						   SBT_COOKIE(s->id, r->kind, r->reg, s->size)));
	}
	if (!err) {
		at = s->offset;
		err = link_keep(&ap->links, uprobe(a->skel->progs.call_enter, ap->pid, s->attach, s->offset,
						   SBT_COOKIE(s->id, SBT_SITE_ENTRY, 0, 0)));
	}
	if (!err) {
		ap->uprobes += 1 + (size_t)s->nrets;
		return 0;
	}
	link_drop_to(&ap->links, first);
	if (err == -ESRCH || err == -ENOMEM)
		return err; /* the process is gone, or we are out of memory: not the function's fault */
	if (asprintf(&s->refused, "the kernel refused a uprobe at +0x%llx: %s", (unsigned long long)(at - s->offset),
		     strerror(-err)) < 0)
		s->refused = NULL;
	a->refused++;
	sbt_info(1, "  refused    -> %s in %s: %s\n", s->name, s->lib, s->refused ? s->refused : strerror(-err));
	return 0;
}

/* The functions [from, to) of one library on one process in two
 * uprobe_multi links, returns first (as attach_function does for one).
 * 0, or -errno with nothing kept (then each is attached alone). */
static int attach_library_multi(struct attacher *a, struct attached_proc *ap, size_t from, size_t to)
{
	size_t nent = 0, nret = 0, first = ap->links.n;
	uint64_t *off = NULL, *cookie = NULL;
	const char *path = a->probes.sites[from].attach;
	int err = -ENOMEM;

	for (size_t i = from; i < to; i++)
		if (!a->probes.sites[i].refused) {
			nent++;
			nret += (size_t)a->probes.sites[i].nrets;
		}
	if (!nent)
		return 0;
	if (!(off = malloc((nent + nret) * sizeof(*off))) || !(cookie = malloc((nent + nret) * sizeof(*cookie))))
		goto out;
	/* the return sites, then the entries, in one array each part */
	for (size_t i = from, r = 0, e = nret; i < to; i++) {
		const struct probe_site *s = &a->probes.sites[i];

		if (s->refused)
			continue;
		for (int k = 0; k < s->nrets; k++, r++) {
			off[r] = s->rets[k].offset;
			cookie[r] = SBT_COOKIE(s->id, s->rets[k].kind, s->rets[k].reg, s->size);
		}
		off[e] = s->offset;
		cookie[e++] = SBT_COOKIE(s->id, SBT_SITE_ENTRY, 0, 0);
	}
	err = nret ? link_keep_fd(&ap->links, uprobe_multi_link(bpf_program__fd(a->skel->progs.call_return_multi), path,
								ap->pid, off, cookie, (uint32_t)nret))
		   : 0;
	if (!err)
		err = link_keep_fd(&ap->links, uprobe_multi_link(bpf_program__fd(a->skel->progs.call_enter_multi), path,
								 ap->pid, off + nret, cookie + nret, (uint32_t)nent));
	if (err)
		link_drop_to(&ap->links, first);
	else
		ap->uprobes += nent + nret;
out:
	free(off);
	free(cookie);
	return err;
}

int attach_runtime(struct attacher *a, pid_t pid)
{
	struct attached_proc *ap = attach_proc_of(a, pid, true);
	size_t before;
	int err;

	if (!ap) {
		sbt_err("out of memory");
		return -ENOMEM;
	}
	before = ap->uprobes;
	while (ap->done < a->probes.n && !stop_now(a)) {
		size_t to = ap->done + 1;

		/* a library's functions at once, where the kernel can */
		while (to < a->probes.n && a->probes.sites[to].attach == a->probes.sites[ap->done].attach)
			to++;
		if (a->uprobe_multi) {
			err = attach_library_multi(a, ap, ap->done, to);
			if (err == -ESRCH)
				return 0; /* exited while we attached: its exit record follows */
			if (!err) {
				ap->done = to;
				continue;
			}
			sbt_info(1, "  uprobe     -> %s: no uprobe_multi link (%s): one uprobe a site\n",
				 a->probes.sites[ap->done].lib, strerror(-err));
		}
		for (; ap->done < to && !stop_now(a); ap->done++) {
			struct probe_site *s = &a->probes.sites[ap->done];

			if (s->refused)
				continue;
			err = attach_function(a, ap, s);
			if (err == -ESRCH)
				return 0;
			if (err) {
				sbt_err("cannot attach %s to PID %d: %s", s->name, pid, strerror(-err));
				return err;
			}
		}
	}
	return (int)(ap->uprobes - before);
}

size_t attach_nuprobes(const struct attacher *a)
{
	size_t n = 0;

	for (size_t i = 0; i < a->nprocs; i++)
		n += a->procs[i].uprobes;
	return n;
}

size_t attach_nfunctions(const struct attacher *a)
{
	size_t n = 0;

	for (size_t i = 0; i < a->probes.n; i++)
		n += !a->probes.sites[i].refused;
	return n;
}

/* ---- what a search found: taken and probed ---------------------------------- */

int attach_found(struct attacher *a, struct lib_search *s)
{
	size_t first = a->probes.n;
	uint64_t t0 = sbt_now_boottime();
	int ret;

	pthread_mutex_lock(&a->probes_lock);
	ret = probe_set_adopt(&a->probes, &s->found);
	pthread_mutex_unlock(&a->probes_lock);
	if (ret < 0) {
		sbt_err("out of memory");
		return ret;
	}
	for (size_t k = first; k < a->probes.n; k++) {
		struct probe_site *ps = &a->probes.sites[k];

		if (ps->refused) {
			a->refused++;
			sbt_info(1, "  refused    -> %s in %s: %s\n", ps->name, ps->lib, ps->refused);
		} else {
			sbt_info(1, "  uprobe     -> %s+0x%llx %s, %d return site%s\n", ps->lib,
				 (unsigned long long)ps->offset, ps->name, ps->nrets, ps->nrets == 1 ? "" : "s");
		}
		if (a->on_function)
			a->on_function(a->ctx, ps);
	}
	for (size_t i = 0; i < a->nprocs && ret > 0; i++) {
		int err = attach_runtime(a, a->procs[i].pid);

		if (err < 0)
			return err;
	}
	if (ret > 0)
		sbt_info(2, "  attached   -> %d function%s in %.2f ms\n", ret, ret == 1 ? "" : "s",
			 (double)(sbt_now_boottime() - t0) / 1e6);
	return ret;
}

/* Searching and attaching at once, on the caller's thread, within the
 * attacher's own stop and deadline (record): each library goes on as soon
 * as it is read. */
struct at_once {
	struct attacher *a;
	int found, err;
};

static void attach_each(struct lib_search *s, void *ctx)
{
	struct at_once *o = ctx;
	int ret;

	if (o->err)
		return; /* kept in the search, dropped with it */
	ret = attach_found(o->a, s);
	if (ret < 0)
		o->err = ret;
	else
		o->found += ret;
}

struct lib_wants attach_lib_wants(struct attacher *a)
{
	return (struct lib_wants){ .specs = a->specs,
				   .nspecs = a->nspecs,
				   .named = a->real_libs,
				   .nnamed = a->o->nprobes,
				   .known = &a->probes,
				   .known_lock = &a->probes_lock,
				   .stop = a->stop };
}

static void search_at_once(struct lib_search *s, struct at_once *o, struct attacher *a)
{
	struct lib_wants w = attach_lib_wants(a);

	*o = (struct at_once){ a, 0, 0 };
	lib_search_init(s, &w, a->deadline_ns, NULL);
	s->on_library = attach_each;
	s->on_library_ctx = o;
}

/* The search's end: its error (-EINTR: stopped early), an attach error,
 * or the new functions. */
static int searched_at_once(struct lib_search *s, struct at_once *o, int err)
{
	if (s->interrupted)
		o->a->interrupted = true;
	lib_search_free(s);
	return o->err ? o->err : err < 0 ? err : o->found;
}

int attach_library(struct attacher *a, const char *path, const char *why)
{
	struct lib_search s;
	struct at_once o;

	search_at_once(&s, &o, a);
	lib_search_path(&s, path, why);
	return searched_at_once(&s, &o, 0);
}

int attach_find_mapped_libraries(struct attacher *a, pid_t pid)
{
	struct lib_search s;
	struct at_once o;
	int err;

	search_at_once(&s, &o, a);
	err = searched_at_once(&s, &o, lib_search_mapped(&s, pid));
	return err < 0 ? err : 0;
}

int attach_find_libraries(struct attacher *a, pid_t pid, char *const *command)
{
	struct lib_search s;
	struct at_once o;
	int err;

	search_at_once(&s, &o, a);
	err = searched_at_once(&s, &o, lib_search_all(&s, pid, command));
	return err < 0 ? err : 0;
}

size_t attach_drop_changed_libraries(struct attacher *a)
{
	size_t changed = 0;

	/* a search on another thread looks at the libraries meanwhile */
	pthread_mutex_lock(&a->probes_lock);
	for (size_t i = 0; i < a->probes.nlibs; i++) {
		const char *lib = a->probes.libs[i].path, *file = a->probes.libs[i].attach;

		if (a->probes.libs[i].stale || probe_lib_unchanged(&a->probes.libs[i]))
			continue;
		a->probes.libs[i].stale = true;
		changed++;
		sbt_warn("%s changed since its symbols were read: its probes are dropped, "
			 "and it is read again when next found",
			 lib);
		for (size_t k = 0; k < a->probes.n; k++) {
			struct probe_site *s = &a->probes.sites[k];

			if (!s->refused && !strcmp(s->attach, file)) {
				s->refused = strdup("the file changed after it was read");
				a->refused++;
			}
		}
	}
	pthread_mutex_unlock(&a->probes_lock);
	return changed;
}

void attach_warn_unmatched(const struct attacher *a, bool later)
{
	for (int i = 0; i < a->o->nprobes; i++) {
		const struct probe_spec *sp = &a->specs[i];
		bool hit = false;

		for (size_t k = 0; k < a->probes.n && !hit; k++)
			hit = a->probes.sites[k].pattern == sp->pattern;
		if (!hit)
			sbt_warn("--probe '%.200s:%.200s' matched no function%s; hint: spyre-bpftrace "
				 "list LIB --probe ... shows what a pattern picks",
				 a->o->probes[i].lib, sp->pattern,
				 later ? " yet (a library loaded later still counts)" : "");
	}
}
