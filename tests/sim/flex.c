// SPDX-License-Identifier: GPL-2.0-only
/*
 * Simulated flex: the runtime API torch-spyre calls. Each entry point
 * counts itself, then goes down to senlib as the real runtime does:
 * allocate maps memory for DMA, launches queue control blocks, synchronize
 * collects the responses (waiting on the completion eventfd).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct flex_stream {
	unsigned int id;
	unsigned int pending; /* jobs queued, not yet received */
	unsigned long seq;
};

struct flex_allocator {
	pthread_mutex_t lock;
	unsigned long next_iova;
	struct alloc {
		void *p;
		unsigned long iova, size;
	} live[4096];
};

static struct flex_allocator allocator = { .lock = PTHREAD_MUTEX_INITIALIZER };
static unsigned int next_stream;

struct flex_allocator *flex_sim_allocator(void)
{
	return &allocator;
}

struct flex_stream *flex_sim_stream_create(void)
{
	struct flex_stream *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->id = __atomic_fetch_add(&next_stream, 1, __ATOMIC_SEQ_CST);
	if (sim_stream_open(s->id)) {
		free(s);
		return NULL;
	}
	return s;
}

void flex_sim_stream_destroy(struct flex_stream *s)
{
	free(s);
}

__attribute__((noinline)) void *flex_allocate(struct flex_allocator *self, unsigned long bytes, int directive)
{
	unsigned long iova;
	void *p;
	int slot = -1;

	(void)directive;
	sim_count_call("flex::FlexAllocator::allocate", bytes);
	if (posix_memalign(&p, 4096, bytes))
		return NULL;
	memset(p, 0, bytes);
	pthread_mutex_lock(&self->lock);
	if (!self->next_iova) /* the card is set up by now */
		self->next_iova = sim_iova_base();
	iova = self->next_iova;
	self->next_iova += (bytes + 4095) & ~4095UL;
	for (int i = 0; i < 4096 && slot < 0; i++)
		if (!self->live[i].p)
			slot = i;
	if (slot >= 0)
		self->live[slot] = (struct alloc){ p, iova, bytes };
	pthread_mutex_unlock(&self->lock);
	if (slot < 0) {
		free(p);
		return NULL;
	}
	senlib_map(sim_mapper(), p, bytes, iova);
	return p;
}

__attribute__((noinline)) void flex_deallocate(struct flex_allocator *self, void *p)
{
	struct alloc a = { 0 };

	pthread_mutex_lock(&self->lock);
	for (int i = 0; i < 4096; i++)
		if (self->live[i].p == p) {
			a = self->live[i];
			self->live[i].p = NULL;
			break;
		}
	pthread_mutex_unlock(&self->lock);
	sim_count_call("flex::FlexAllocator::deallocate", a.size);
	if (!a.p)
		return;
	senlib_unmap(sim_mapper(), a.iova, a.size);
	free(p);
}

/* The DMA-mapped allocation holding p: its iova and size. */
static int find_alloc(struct flex_allocator *a, const void *p, struct alloc *out)
{
	int found = 0;

	pthread_mutex_lock(&a->lock);
	for (int i = 0; i < 4096 && !found; i++)
		if (a->live[i].p == p) {
			*out = a->live[i];
			found = 1;
		}
	pthread_mutex_unlock(&a->lock);
	return found ? 0 : -1;
}

static int queue_job(struct flex_stream *s, unsigned int engine, unsigned long bytes, void *buf, void *host)
{
	struct sim_cb cb = {
		.engine = engine, .stream = s->id, .bytes = bytes, .seq = s->seq++, .buf = buf, .host = host
	};
	struct alloc a;

	if (buf) {
		if (find_alloc(&allocator, buf, &a))
			return -1; /* not memory this runtime mapped for DMA */
		cb.iova = a.iova;
		if (cb.bytes > a.size)
			cb.bytes = a.size;
		cb.pattern = *(unsigned char *)buf;
	}

	s->pending++;
	return senlib_queue_cbs(sim_stream_cbi(s->id), &cb, 1) == 1 ? 0 : -1;
}

__attribute__((noinline)) int flex_launch_h2d(struct flex_stream *self, void *dev, const void *host,
					      unsigned long bytes)
{
	sim_count_call("flex::RuntimeStream::launchH2D", bytes);
	memcpy(dev, host, bytes); /* into the DMA-mapped buffer the card reads */
	return queue_job(self, SIM_H2D, bytes, dev, NULL);
}

__attribute__((noinline)) int flex_launch_d2h(struct flex_stream *self, void *host, const void *dev,
					      unsigned long bytes)
{
	sim_count_call("flex::RuntimeStream::launchD2H", bytes);
	return queue_job(self, SIM_D2H, bytes, (void *)dev, host);
}

__attribute__((noinline)) int flex_launch_operation(struct flex_stream *self, const void *op)
{
	(void)op;
	sim_count_call("flex::RuntimeStream::launchOperation", 0);
	return queue_job(self, SIM_COMPUTE, 0, NULL, NULL);
}

__attribute__((noinline)) int flex_launch_compute(struct flex_stream *self, const void *program, unsigned long n)
{
	sim_count_call("flex::RuntimeStream::launchCompute", 0);
	(void)n;
	return flex_launch_operation(self, program);
}

__attribute__((noinline)) int flex_synchronize(struct flex_stream *self)
{
	unsigned char resp[64];
	int got;

	sim_count_call("flex::RuntimeStream::synchronize", 0);
	if (!self->pending)
		return 0;
	got = senlib_receive(sim_stream_rbi(self->id), resp, self->pending);
	if (got < 0)
		return -1;
	self->pending = 0;
	return 0;
}
