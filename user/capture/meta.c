// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capture/meta.h"

void meta_init(struct capture_meta *m)
{
	memset(m, 0, sizeof(*m));
}

const char *meta_string(const char *base, size_t len, int i)
{
	size_t off = 0;

	for (;;) {
		const char *nul = off < len ? memchr(base + off, '\0', len - off) : NULL;

		if (!nul)
			return "";
		if (i-- == 0)
			return base + off;
		off = (size_t)(nul - base) + 1;
	}
}

static int thread_grow(struct capture_meta *m)
{
	size_t cap = m->thread_cap ? m->thread_cap * 2 : 256;
	struct meta_thread *t = calloc(cap, sizeof(*t)), *old = m->threads;

	if (!t)
		return -ENOMEM;
	m->threads = t;
	m->thread_cap = cap;
	m->nthreads = 0;
	for (size_t i = 0; old && i < cap / 2; i++)
		if (old[i].tid) {
			size_t j = old[i].tid & (cap - 1);

			while (t[j].tid)
				j = (j + 1) & (cap - 1);
			t[j] = old[i];
			m->nthreads++;
		}
	free(old);
	return 0;
}

static int set_thread(struct capture_meta *m, uint32_t tid, const char *comm)
{
	size_t j;

	if (!tid)
		return 0;
	if ((m->nthreads + 1) * 2 > m->thread_cap && thread_grow(m))
		return -ENOMEM;
	j = tid & (m->thread_cap - 1);
	while (m->threads[j].tid && m->threads[j].tid != tid)
		j = (j + 1) & (m->thread_cap - 1);
	if (!m->threads[j].tid)
		m->nthreads++;
	m->threads[j].tid = tid;
	memcpy(m->threads[j].comm, comm, SBT_COMM_LEN);
	m->threads[j].comm[SBT_COMM_LEN - 1] = '\0';
	return 0;
}

const char *meta_thread_name(const struct capture_meta *m, uint32_t tid)
{
	if (!m->thread_cap || !tid)
		return "?";
	for (size_t j = tid & (m->thread_cap - 1); m->threads[j].tid; j = (j + 1) & (m->thread_cap - 1))
		if (m->threads[j].tid == tid)
			return m->threads[j].comm;
	return "?";
}

static int add_probe(struct capture_meta *m, const struct sbt_meta_probe *p)
{
	size_t slen = p->h.size - (sizeof(*p) - sizeof(p->h));

	if (p->strings_len < slen)
		slen = p->strings_len;
	if (p->id >= META_MAX_PROBES)
		return 0; /* ids are dense from 0: ignore rather than allocate */
	if (p->id >= m->nprobes) {
		struct meta_probe *np = realloc(m->probes, (p->id + 1) * sizeof(*np));

		if (!np)
			return -ENOMEM;
		memset(np + m->nprobes, 0, (p->id + 1 - m->nprobes) * sizeof(*np));
		m->probes = np;
		m->nprobes = p->id + 1;
	}
	struct meta_probe *mp = &m->probes[p->id];

	if (mp->name)
		return 0; /* a probe id is described once; its name stays put */
	mp->name = strdup(meta_string(p->strings, slen, 0));
	mp->lib = strdup(meta_string(p->strings, slen, 2));
	mp->role = p->role;
	mp->bytes_arg = p->bytes_arg;
	return mp->name && mp->lib ? 0 : -ENOMEM;
}

int meta_add(struct capture_meta *m, const struct sbt_hdr *h)
{
	switch (h->type) {
	case SBT_META_CLOCK:
		memcpy(&m->clock, h, sizeof(m->clock));
		m->has_clock = true;
		return 0;
	case SBT_META_HOST:
		memcpy(&m->host, h, sizeof(m->host));
		m->host.hostname[sizeof(m->host.hostname) - 1] = '\0';
		m->host.release[sizeof(m->host.release) - 1] = '\0';
		m->host.version[sizeof(m->host.version) - 1] = '\0';
		m->has_host = true;
		return 0;
	case SBT_META_PROBE: return add_probe(m, (const struct sbt_meta_probe *)h);
	case SBT_META_PROC: {
		const struct sbt_meta_proc *p = (const void *)h;

		return set_thread(m, p->pid, p->comm);
	}
	case SBT_THREAD_NAME: return set_thread(m, h->tid, ((const struct sbt_thread_name *)h)->comm);
	case SBT_TASK_NEW:
	case SBT_TASK_COMM: return set_thread(m, h->tid, ((const struct sbt_task *)h)->comm);
	default: return 0;
	}
}

void meta_free(struct capture_meta *m)
{
	for (size_t i = 0; i < m->nprobes; i++) {
		free(m->probes[i].name);
		free(m->probes[i].lib);
	}
	free(m->probes);
	free(m->threads);
	memset(m, 0, sizeof(*m));
}
