// SPDX-License-Identifier: GPL-2.0-only
/*
 * Simulated senlib: the device layer. Issues the VFIO ioctl sequence a
 * Spyre runtime issues and runs jobs on a backend.
 *
 * mock backend: no device. The VFIO ioctls go to plain files under
 * mock_dir (they fail with ENOTTY, and the log says so); a device thread
 * completes each job after delay_us and signals the stream's eventfd, which
 * ReceiveResponsesSBF reads, as a runtime reads a VFIO MSI eventfd.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/vfio.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sim.h"

#define MAX_STREAMS 64
#define MAX_IOCTLS 65536
#define MAX_CALLNAMES 32
#define QUEUE_LEN 1024
#define MAX_CALLLOG 262144

struct ioctl_log {
	int tid, fd, ret, err;
	unsigned long cmd;
	const char *name;
	uint64_t vaddr, iova, size;
	uint32_t flags, index, start, count;
};

struct senlib_cbi {
	int unused;
};
struct senlib_rbi {
	int unused;
};
struct senlib_mapper {
	int unused;
};

struct stream_ctx {
	struct senlib_cbi cbi;
	struct senlib_rbi rbi;
	int efd; /* completion eventfd, as VFIO signals on MSI */
	int open;
};

static struct {
	struct sim_config cfg;
	int container, group, device;
	struct stream_ctx streams[MAX_STREAMS];
	struct senlib_mapper mapper;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t worker;
	int worker_run;
	struct sim_cb queue[QUEUE_LEN];
	unsigned int qhead, qtail;
	struct ioctl_log *ioctls;
	unsigned int n_ioctls;
	struct {
		const char *name;
		unsigned long calls, bytes;
	} calls[MAX_CALLNAMES];
	unsigned long jobs_done[3];
	struct call_log {
		int tid;
		const char *name;
		unsigned long bytes;
	} *call_log;
	unsigned int n_call_log;
} S = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

void sim_count_call(const char *name, unsigned long bytes)
{
	pthread_mutex_lock(&S.lock);
	for (int i = 0; i < MAX_CALLNAMES; i++) {
		if (!S.calls[i].name)
			S.calls[i].name = name;
		if (S.calls[i].name == name || !strcmp(S.calls[i].name, name)) {
			S.calls[i].calls++;
			S.calls[i].bytes += bytes;
			break;
		}
	}
	if (S.call_log && S.n_call_log < MAX_CALLLOG)
		S.call_log[S.n_call_log++] =
			(struct call_log){ (int)syscall(SYS_gettid), name, bytes };
	pthread_mutex_unlock(&S.lock);
}

/* Issue a VFIO ioctl and log it with its arguments and result. */
static int vfio_ioctl(int fd, unsigned long cmd, const char *name, void *arg,
		      const struct ioctl_log *args)
{
	int ret = ioctl(fd, cmd, arg), err = ret < 0 ? errno : 0;

	pthread_mutex_lock(&S.lock);
	if (S.n_ioctls < MAX_IOCTLS) {
		struct ioctl_log *l = &S.ioctls[S.n_ioctls++];

		*l = args ? *args : (struct ioctl_log){ 0 };
		l->tid = (int)syscall(SYS_gettid);
		l->fd = fd;
		l->cmd = cmd;
		l->name = name;
		l->ret = ret;
		l->err = err;
	}
	pthread_mutex_unlock(&S.lock);
	errno = err;
	return ret;
}

static int open_mock_file(const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", S.cfg.mock_dir, name);
	return open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
}

static void *device_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&S.lock);
	for (;;) {
		while (S.worker_run && S.qhead == S.qtail)
			pthread_cond_wait(&S.cond, &S.lock);
		if (S.qhead == S.qtail)
			break;
		struct sim_cb cb = S.queue[S.qhead++ % QUEUE_LEN];

		pthread_mutex_unlock(&S.lock);
		if (S.cfg.delay_us) {
			struct timespec ts = { S.cfg.delay_us / 1000000,
					       (S.cfg.delay_us % 1000000) * 1000 };
			nanosleep(&ts, NULL);
		}
		uint64_t one = 1;

		if (write(S.streams[cb.stream].efd, &one, sizeof(one)) != sizeof(one))
			abort();
		pthread_mutex_lock(&S.lock);
		S.jobs_done[cb.engine % 3]++;
	}
	pthread_mutex_unlock(&S.lock);
	return NULL;
}

int sim_init(const struct sim_config *cfg)
{
	S.cfg = *cfg;
	if (strcmp(cfg->backend, "mock")) {
		fprintf(stderr, "spyre-sim: backend '%s' not built; hint: use --backend mock\n",
			cfg->backend);
		return -1;
	}
	S.ioctls = calloc(MAX_IOCTLS, sizeof(*S.ioctls));
	S.call_log = calloc(MAX_CALLLOG, sizeof(*S.call_log));
	if (!S.ioctls || !S.call_log)
		return -1;
	mkdir(cfg->mock_dir, 0700);
	S.container = open_mock_file("vfio");
	S.group = open_mock_file("0");
	S.device = open_mock_file("device");
	if (S.container < 0 || S.group < 0 || S.device < 0) {
		fprintf(stderr, "spyre-sim: cannot create mock files in %s: %s\n",
			cfg->mock_dir, strerror(errno));
		return -1;
	}
	int32_t container = S.container;

	/* The real sequence; every call fails with ENOTTY on a plain file. */
	vfio_ioctl(S.group, VFIO_GROUP_SET_CONTAINER, "VFIO_GROUP_SET_CONTAINER",
		   &container, NULL);
	vfio_ioctl(S.container, VFIO_SET_IOMMU, "VFIO_SET_IOMMU",
		   (void *)(uintptr_t)VFIO_TYPE1v2_IOMMU, NULL);
	S.worker_run = 1;
	return pthread_create(&S.worker, NULL, device_thread, NULL) ? -1 : 0;
}

int sim_stream_open(unsigned int stream)
{
	struct {
		struct vfio_irq_set set;
		int32_t fd;
	} irq;
	struct ioctl_log a = { 0 };

	if (stream >= MAX_STREAMS)
		return -1;
	S.streams[stream].efd = eventfd(0, EFD_CLOEXEC);
	if (S.streams[stream].efd < 0)
		return -1;
	S.streams[stream].open = 1;
	irq.set.argsz = sizeof(irq);
	irq.set.flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
	irq.set.index = VFIO_PCI_MSI_IRQ_INDEX;
	irq.set.start = stream;
	irq.set.count = 1;
	irq.fd = S.streams[stream].efd;
	a.flags = irq.set.flags;
	a.index = irq.set.index;
	a.start = irq.set.start;
	a.count = irq.set.count;
	vfio_ioctl(S.device, VFIO_DEVICE_SET_IRQS, "VFIO_DEVICE_SET_IRQS", &irq, &a);
	return 0;
}

void sim_shutdown(void)
{
	pthread_mutex_lock(&S.lock);
	S.worker_run = 0;
	pthread_cond_broadcast(&S.cond);
	pthread_mutex_unlock(&S.lock);
	pthread_join(S.worker, NULL);
	for (int i = 0; i < MAX_STREAMS; i++)
		if (S.streams[i].open)
			close(S.streams[i].efd);
	close(S.device);
	close(S.group);
	close(S.container);
}

struct senlib_cbi *sim_stream_cbi(unsigned int stream)
{
	return &S.streams[stream].cbi;
}

struct senlib_rbi *sim_stream_rbi(unsigned int stream)
{
	return &S.streams[stream].rbi;
}

struct senlib_mapper *sim_mapper(void)
{
	return &S.mapper;
}

__attribute__((noinline)) int senlib_queue_cbs(struct senlib_cbi *self,
					       const void *cbs, unsigned int n)
{
	const struct sim_cb *cb = cbs;

	(void)self;
	sim_count_call("senlib::ControlBlockInterface::QueueControlBlocksSBF", 0);
	pthread_mutex_lock(&S.lock);
	for (unsigned int i = 0; i < n; i++)
		S.queue[S.qtail++ % QUEUE_LEN] = cb[i];
	pthread_cond_signal(&S.cond);
	pthread_mutex_unlock(&S.lock);
	return (int)n;
}

__attribute__((noinline)) int senlib_receive(struct senlib_rbi *self, void *resp,
					     unsigned int n)
{
	struct stream_ctx *s = (struct stream_ctx *)((char *)self -
						     offsetof(struct stream_ctx, rbi));
	unsigned int got = 0;

	(void)resp;
	sim_count_call("senlib::ResponseBlockInterface::ReceiveResponsesSBF", 0);
	while (got < n) {
		uint64_t v;

		if (read(s->efd, &v, sizeof(v)) != sizeof(v)) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		got += (unsigned int)v;
	}
	return (int)got;
}

__attribute__((noinline)) int senlib_map(struct senlib_mapper *self, void *vaddr,
					 unsigned long size, unsigned long iova)
{
	struct vfio_iommu_type1_dma_map m = {
		.argsz = sizeof(m),
		.flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
		.vaddr = (uintptr_t)vaddr,
		.iova = iova,
		.size = size,
	};
	struct ioctl_log a = { .vaddr = m.vaddr, .iova = iova, .size = size,
			       .flags = m.flags };

	(void)self;
	sim_count_call("senlib::PfIommuMapper::Map", size);
	return vfio_ioctl(S.container, VFIO_IOMMU_MAP_DMA, "VFIO_IOMMU_MAP_DMA", &m, &a);
}

__attribute__((noinline)) int senlib_unmap(struct senlib_mapper *self,
					   unsigned long iova, unsigned long size)
{
	struct vfio_iommu_type1_dma_unmap u = {
		.argsz = sizeof(u), .iova = iova, .size = size,
	};
	struct ioctl_log a = { .iova = iova, .size = size };

	(void)self;
	sim_count_call("senlib::PfIommuMapper::Unmap", size);
	return vfio_ioctl(S.container, VFIO_IOMMU_UNMAP_DMA, "VFIO_IOMMU_UNMAP_DMA", &u, &a);
}

void sim_write_json(FILE *out, const char *extra)
{
	pthread_mutex_lock(&S.lock);
	fprintf(out, "{\n  \"backend\": \"%s\",\n  \"pid\": %d,\n%s", S.cfg.backend,
		(int)getpid(), extra ? extra : "");
	fprintf(out, "  \"jobs_done\": {\"h2d\": %lu, \"compute\": %lu, \"d2h\": %lu},\n",
		S.jobs_done[0], S.jobs_done[1], S.jobs_done[2]);
	fprintf(out, "  \"calls\": {");
	for (int i = 0; i < MAX_CALLNAMES && S.calls[i].name; i++)
		fprintf(out, "%s\n    \"%s\": {\"calls\": %lu, \"bytes\": %lu}", i ? "," : "",
			S.calls[i].name, S.calls[i].calls, S.calls[i].bytes);
	fprintf(out, "\n  },\n  \"ioctls\": [");
	for (unsigned int i = 0; i < S.n_ioctls; i++) {
		struct ioctl_log *l = &S.ioctls[i];

		fprintf(out,
			"%s\n    {\"tid\": %d, \"fd\": %d, \"cmd\": \"%s\", \"cmd_num\": %lu, "
			"\"ret\": %d, \"errno\": %d, \"vaddr\": %llu, \"iova\": %llu, "
			"\"size\": %llu, \"flags\": %u, \"index\": %u, \"start\": %u, "
			"\"count\": %u}",
			i ? "," : "", l->tid, l->fd, l->name, l->cmd, l->ret, l->err,
			(unsigned long long)l->vaddr, (unsigned long long)l->iova,
			(unsigned long long)l->size, l->flags, l->index, l->start, l->count);
	}
	fprintf(out, "\n  ],\n  \"call_log_complete\": %s,\n  \"call_log\": [",
		S.n_call_log < MAX_CALLLOG ? "true" : "false");
	for (unsigned int i = 0; i < S.n_call_log; i++)
		fprintf(out, "%s\n    [%d, \"%s\", %lu]", i ? "," : "", S.call_log[i].tid,
			S.call_log[i].name, S.call_log[i].bytes);
	fprintf(out, "\n  ]\n}\n");
	pthread_mutex_unlock(&S.lock);
}
