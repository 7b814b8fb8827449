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

#include "edu.h"
#include "virtio.h"
#include "sim.h"

#define MAX_STREAMS 64
#define MAX_DEVS 8
#define MAX_IOCTLS 65536
#define MAX_CALLNAMES 32
#define QUEUE_LEN 1024
#define MAX_CALLLOG 262144

struct ioctl_log {
	int tid, fd, ret, err;
	const char *card; /* the card the calling stream drives, if any */
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

/* A device: its queue of control blocks and the thread that runs them (and,
 * for vfio, waits on the card's MSI eventfd: the thread that wakes on it). */
struct simdev {
	struct sim_cb queue[QUEUE_LEN];
	unsigned int qhead, qtail;
	pthread_t worker;
	struct edu edu; /* vfio backend */
	int container; /* its own, with --container-per-card; else S.container */
	unsigned long jobs[3], failures;
};

static struct {
	struct sim_config cfg;
	bool vfio;
	int container, group, device;
	struct stream_ctx streams[MAX_STREAMS];
	struct senlib_mapper mapper;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int worker_run;
	struct simdev devs[MAX_DEVS];
	int ndev;
	unsigned long iova_base; /* the next IOVA to map at (sim_iova_base) */
	struct ioctl_log *ioctls;
	unsigned int n_ioctls;
	struct {
		const char *name;
		unsigned long calls, bytes;
	} calls[MAX_CALLNAMES];
	struct call_log {
		int tid;
		const char *name;
		unsigned long bytes;
	} * call_log;
	unsigned int n_call_log;
} S = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .iova_base = 0x100000 };

/* The stream this thread opened: which card its mappings are for. */
static __thread int thread_stream = -1;

static struct simdev *thread_card(void)
{
	return thread_stream >= 0 && S.ndev ? &S.devs[thread_stream % S.ndev] : NULL;
}

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
		S.call_log[S.n_call_log++] = (struct call_log){ (int)syscall(SYS_gettid), name, bytes };
	pthread_mutex_unlock(&S.lock);
}

/* Issue a VFIO ioctl and log it with its arguments and result. */
static int vfio_ioctl(int fd, unsigned long cmd, const char *name, void *arg, const struct ioctl_log *args)
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

/* Run one job on the card (vfio) and check what came back; or, for the
 * mock, take the configured time. 0 or -errno. */
static int run_job(struct simdev *d, const struct sim_cb *cb)
{
	unsigned long n = cb->bytes < EDU_BUF_SIZE ? cb->bytes : EDU_BUF_SIZE;
	uint32_t fact = 0;
	int ret = 0;

	if (!S.vfio) {
		if (S.cfg.delay_us) {
			struct timespec ts = { S.cfg.delay_us / 1000000, (S.cfg.delay_us % 1000000) * 1000 };
			nanosleep(&ts, NULL);
		}
		return 0;
	}
	if (d->edu.stand_in) {
		/* Z's stand-in card only writes: every job is n bytes it puts
		 * into the buffer by DMA, ending with an MSI-X interrupt */
		uint32_t got = 0;

		if (cb->engine != SIM_COMPUTE)
			memset(cb->buf, 0, n);
		ret = virtio_card_fill(&d->edu, cb->engine == SIM_COMPUTE ? 0 : cb->iova, (uint32_t)n, &got);
		return ret ? ret : cb->engine == SIM_COMPUTE || got <= n ? 0 : -EIO;
	}
	switch (cb->engine) {
	case SIM_H2D: return edu_copy_in(&d->edu, cb->iova, n);
	case SIM_COMPUTE: ret = edu_factorial(&d->edu, 10, &fact); return ret ? ret : fact == 3628800 ? 0 : -EIO;
	case SIM_D2H:
		memset(cb->buf, 0, n); /* what comes back must be the device's */
		ret = edu_copy_out(&d->edu, cb->iova, n);
		for (unsigned long i = 0; !ret && i < n; i++)
			if (((unsigned char *)cb->buf)[i] != cb->pattern)
				ret = -EIO;
		if (!ret)
			memcpy(cb->host, cb->buf, n);
		return ret;
	}
	return -EINVAL;
}

static void *device_thread(void *arg)
{
	struct simdev *d = arg;

	pthread_mutex_lock(&S.lock);
	for (;;) {
		while (S.worker_run && d->qhead == d->qtail)
			pthread_cond_wait(&S.cond, &S.lock);
		if (d->qhead == d->qtail)
			break;
		struct sim_cb cb = d->queue[d->qhead++ % QUEUE_LEN];

		pthread_mutex_unlock(&S.lock);
		int ret = run_job(d, &cb);
		uint64_t one = 1;

		if (ret)
			fprintf(stderr, "spyre-sim: %s job %lu (engine %u) failed: %s\n", S.vfio ? d->edu.bdf : "mock",
				cb.seq, cb.engine, strerror(-ret));
		if (write(S.streams[cb.stream].efd, &one, sizeof(one)) != sizeof(one))
			abort();
		pthread_mutex_lock(&S.lock);
		d->jobs[cb.engine % 3]++;
		d->failures += ret != 0;
	}
	pthread_mutex_unlock(&S.lock);
	return NULL;
}

/* edu.c's calls, logged with the arguments the tests compare */
static int call_logged(int fd, unsigned long cmd, const char *name, void *arg, const void *log)
{
	struct ioctl_log a = { 0 };

	if (!log && cmd == VFIO_DEVICE_SET_IRQS) {
		const struct vfio_irq_set *set = arg;

		a.flags = set->flags;
		a.index = set->index;
		a.start = set->start;
		a.count = set->count;
		log = &a;
	}
	return vfio_ioctl(fd, cmd, name, arg, log);
}

static int open_container(void)
{
	int fd = open("/dev/vfio/vfio", O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "spyre-sim: /dev/vfio/vfio: %s\n", strerror(errno));
		return -1;
	}
	if (vfio_ioctl(fd, VFIO_GET_API_VERSION, "VFIO_GET_API_VERSION", NULL, NULL) != VFIO_API_VERSION) {
		fprintf(stderr, "spyre-sim: unexpected VFIO API version\n");
		close(fd);
		return -1;
	}
	return fd;
}

/* Z's stand-in card: its queue in a page of its own, DMA-mapped (after the
 * device fd: opening that resets the function) at the next IOVA. */
static int start_stand_in(struct simdev *d)
{
	void *ring;
	struct vfio_iommu_type1_dma_map m = {
		.argsz = sizeof(m),
		.flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
		.iova = S.iova_base,
		.size = 4096,
	};
	struct ioctl_log a = { .iova = m.iova, .size = m.size, .flags = m.flags, .card = d->edu.bdf };
	int ret;

	if (posix_memalign(&ring, 4096, 4096))
		return -1;
	m.vaddr = a.vaddr = (uintptr_t)ring;
	if (vfio_ioctl(d->container, VFIO_IOMMU_MAP_DMA, "VFIO_IOMMU_MAP_DMA", &m, &a)) {
		fprintf(stderr, "spyre-sim: cannot map %s's queue at 0x%llx: %s\n", d->edu.bdf,
			(unsigned long long)m.iova, strerror(errno));
		return -1;
	}
	S.iova_base += 4096;
	ret = virtio_card_start(&d->edu, d->edu.config, ring, m.iova, call_logged);
	if (ret) {
		fprintf(stderr, "spyre-sim: cannot start the stand-in card %s: %s\n", d->edu.bdf, strerror(-ret));
		return -1;
	}
	return 0;
}

unsigned long sim_iova_base(void)
{
	return S.iova_base;
}

/* The cards: every edu device bound to vfio-pci, in one container (what a
 * runtime usually does), or each in its own with --container-per-card. */
static int vfio_init(void)
{
	char bdfs[MAX_DEVS][16];
	int n = edu_find(bdfs, MAX_DEVS), ret;

	if (n && S.cfg.card) { /* one card: the others are another process's */
		int i = 0;

		while (i < n && strcmp(bdfs[i], S.cfg.card))
			i++;
		if (i == n) {
			fprintf(stderr, "spyre-sim: no edu device at %s bound to vfio-pci\n", S.cfg.card);
			return -1;
		}
		memmove(bdfs[0], bdfs[i], sizeof(bdfs[0]));
		n = 1;
	}
	if (!n) {
		fprintf(stderr, "spyre-sim: no edu device bound to vfio-pci; hint: run it in the "
				"QEMU guest: scripts/vm.sh --edu 2 -- ...\n");
		return -1;
	}
	S.container = open_container();
	if (S.container < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		bool own = S.cfg.container_per_card && i > 0;

		S.devs[i].container = own ? open_container() : S.container;
		if (S.devs[i].container < 0)
			return -1;
		ret = edu_open(&S.devs[i].edu, S.devs[i].container, i == 0 || own, bdfs[i], call_logged);
		if (!ret && S.cfg.wait_epoll)
			ret = edu_wait_epoll(&S.devs[i].edu);
		if (ret) {
			fprintf(stderr, "spyre-sim: cannot drive %s through VFIO: %s\n", bdfs[i], strerror(-ret));
			return -1;
		}
	}
	S.ndev = n;
	S.group = S.devs[0].edu.group;
	S.device = S.devs[0].edu.device;
	/* where the IOMMU maps: above the IOVA range's start (zPCI: 4 GiB) */
	if (S.devs[0].edu.iova_start > S.iova_base)
		S.iova_base = S.devs[0].edu.iova_start;
	for (int i = 0; i < n; i++)
		if (S.devs[i].edu.stand_in && start_stand_in(&S.devs[i]))
			return -1;
	return 0;
}

int sim_init(const struct sim_config *cfg)
{
	S.cfg = *cfg;
	S.vfio = !strcmp(cfg->backend, "vfio");
	if (!S.vfio && strcmp(cfg->backend, "mock")) {
		fprintf(stderr, "spyre-sim: unknown backend '%s'; hint: --backend mock or vfio\n", cfg->backend);
		return -1;
	}
	S.ioctls = calloc(MAX_IOCTLS, sizeof(*S.ioctls));
	S.call_log = calloc(MAX_CALLLOG, sizeof(*S.call_log));
	if (!S.ioctls || !S.call_log)
		return -1;
	if (S.vfio) {
		if (vfio_init())
			return -1;
	} else {
		mkdir(cfg->mock_dir, 0700);
		S.container = open_mock_file("vfio");
		S.group = open_mock_file("0");
		S.device = open_mock_file("device");
		if (S.container < 0 || S.group < 0 || S.device < 0) {
			fprintf(stderr, "spyre-sim: cannot create mock files in %s: %s\n", cfg->mock_dir,
				strerror(errno));
			return -1;
		}
		int32_t container = S.container;

		/* The real sequence; every call fails with ENOTTY on a plain file. */
		vfio_ioctl(S.group, VFIO_GROUP_SET_CONTAINER, "VFIO_GROUP_SET_CONTAINER", &container, NULL);
		vfio_ioctl(S.container, VFIO_SET_IOMMU, "VFIO_SET_IOMMU", (void *)(uintptr_t)VFIO_TYPE1v2_IOMMU, NULL);
		S.ndev = 1;
	}
	S.worker_run = 1;
	for (int i = 0; i < S.ndev; i++)
		if (pthread_create(&S.devs[i].worker, NULL, device_thread, &S.devs[i]))
			return -1;
	return 0;
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
	thread_stream = (int)stream;
	if (S.vfio)
		return 0; /* the card's MSI is set up once, per device */
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
	for (int i = 0; i < S.ndev; i++)
		pthread_join(S.devs[i].worker, NULL);
	for (int i = 0; i < MAX_STREAMS; i++)
		if (S.streams[i].open)
			close(S.streams[i].efd);
	if (S.vfio) {
		for (int i = 0; i < S.ndev; i++) {
			edu_remove_window(&S.devs[i].edu, S.devs[i].container, call_logged);
			edu_close(&S.devs[i].edu);
			if (S.devs[i].container != S.container)
				close(S.devs[i].container);
		}
	} else {
		close(S.device);
		close(S.group);
	}
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

__attribute__((noinline)) int senlib_queue_cbs(struct senlib_cbi *self, const void *cbs, unsigned int n)
{
	const struct sim_cb *cb = cbs;

	(void)self;
	sim_count_call("senlib::ControlBlockInterface::QueueControlBlocksSBF", 0);
	pthread_mutex_lock(&S.lock);
	for (unsigned int i = 0; i < n; i++) {
		struct simdev *d = &S.devs[cb[i].stream % (unsigned int)S.ndev];

		d->queue[d->qtail++ % QUEUE_LEN] = cb[i];
	}
	pthread_cond_signal(&S.cond);
	pthread_mutex_unlock(&S.lock);
	return (int)n;
}

__attribute__((noinline)) int senlib_receive(struct senlib_rbi *self, void *resp, unsigned int n)
{
	struct stream_ctx *s = (struct stream_ctx *)((char *)self - offsetof(struct stream_ctx, rbi));
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

/* The container a mapping goes to: the calling stream's card's. */
static int mapping_container(struct ioctl_log *a)
{
	struct simdev *d = S.vfio ? thread_card() : NULL;

	if (!d)
		return S.container;
	a->card = d->edu.bdf;
	return d->container;
}

/* sPAPR TCE (Power): memory is registered with the container (its pages
 * pinned) before it is mapped, and unregistered after the unmap. */
static int spapr_register(int container, unsigned long cmd, const char *name, void *vaddr, unsigned long size,
			  struct ioctl_log *a)
{
	struct vfio_iommu_spapr_register_memory r = {
		.argsz = sizeof(r),
		.vaddr = (uintptr_t)vaddr,
		.size = size,
	};
	struct ioctl_log l = { .vaddr = r.vaddr, .size = size, .card = a->card };

	return vfio_ioctl(container, cmd, name, &r, &l);
}

static bool spapr_iommu(void)
{
	return S.vfio && S.devs[0].edu.spapr;
}

/* What was registered at an iova, for the unregister after its unmap. */
static struct {
	pthread_mutex_t lock;
	struct {
		unsigned long iova;
		void *vaddr;
	} at[4096];
} registered = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void remember_vaddr(unsigned long iova, void *vaddr)
{
	pthread_mutex_lock(&registered.lock);
	for (int i = 0; i < 4096; i++)
		if (!registered.at[i].vaddr) {
			registered.at[i].iova = iova;
			registered.at[i].vaddr = vaddr;
			break;
		}
	pthread_mutex_unlock(&registered.lock);
}

static void *forget_vaddr(unsigned long iova)
{
	void *v = NULL;

	pthread_mutex_lock(&registered.lock);
	for (int i = 0; i < 4096 && !v; i++)
		if (registered.at[i].vaddr && registered.at[i].iova == iova) {
			v = registered.at[i].vaddr;
			registered.at[i].vaddr = NULL;
		}
	pthread_mutex_unlock(&registered.lock);
	return v;
}

__attribute__((noinline)) int senlib_map(struct senlib_mapper *self, void *vaddr, unsigned long size,
					 unsigned long iova)
{
	struct vfio_iommu_type1_dma_map m = {
		.argsz = sizeof(m),
		.flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
		.vaddr = (uintptr_t)vaddr,
		.iova = iova,
		.size = size,
	};
	struct ioctl_log a = { .vaddr = m.vaddr, .iova = iova, .size = size, .flags = m.flags };
	int container, ret;

	(void)self;
	sim_count_call("senlib::PfIommuMapper::Map", size);
	container = mapping_container(&a);
	if (spapr_iommu()) {
		ret = spapr_register(container, VFIO_IOMMU_SPAPR_REGISTER_MEMORY, "VFIO_IOMMU_SPAPR_REGISTER_MEMORY",
				     vaddr, size, &a);
		if (ret)
			return ret;
		remember_vaddr(iova, vaddr);
	}
	return vfio_ioctl(container, VFIO_IOMMU_MAP_DMA, "VFIO_IOMMU_MAP_DMA", &m, &a);
}

__attribute__((noinline)) int senlib_unmap(struct senlib_mapper *self, unsigned long iova, unsigned long size)
{
	struct vfio_iommu_type1_dma_unmap u = {
		.argsz = sizeof(u),
		.iova = iova,
		.size = size,
	};
	struct ioctl_log a = { .iova = iova, .size = size };
	int container, ret;

	(void)self;
	sim_count_call("senlib::PfIommuMapper::Unmap", size);
	container = mapping_container(&a);
	ret = vfio_ioctl(container, VFIO_IOMMU_UNMAP_DMA, "VFIO_IOMMU_UNMAP_DMA", &u, &a);
	if (spapr_iommu() && ret >= 0) {
		void *vaddr = forget_vaddr(iova);

		if (vaddr)
			ret = spapr_register(container, VFIO_IOMMU_SPAPR_UNREGISTER_MEMORY,
					     "VFIO_IOMMU_SPAPR_UNREGISTER_MEMORY", vaddr, size, &a);
	}
	return ret;
}

unsigned int sim_ioctl_count(void)
{
	return S.n_ioctls;
}

void sim_write_json(FILE *out, const char *extra)
{
	pthread_mutex_lock(&S.lock);
	fprintf(out, "{\n  \"backend\": \"%s\",\n  \"pid\": %d,\n  \"container_per_card\": %s,\n%s", S.cfg.backend,
		(int)getpid(), S.cfg.container_per_card ? "true" : "false", extra ? extra : "");
	unsigned long done[3] = { 0 }, failures = 0;

	fprintf(out, "  \"devices\": [");
	for (int i = 0; i < S.ndev; i++) {
		struct simdev *d = &S.devs[i];

		for (int e = 0; e < 3; e++)
			done[e] += d->jobs[e];
		failures += d->failures;
		fprintf(out,
			"%s\n    {\"bdf\": \"%s\", \"h2d\": %lu, \"compute\": %lu, "
			"\"d2h\": %lu, \"irqs\": %lu, \"failures\": %lu, \"iommu\": \"%s\", "
			"\"window_start\": %llu, \"window_size\": %llu, \"ddw_start\": %llu, "
			"\"ddw_size\": %llu, \"swapped_regs\": %s}",
			i ? "," : "", S.vfio ? d->edu.bdf : "mock", d->jobs[0], d->jobs[1], d->jobs[2], d->edu.irqs,
			d->failures,
			!S.vfio		? "none"
			: spapr_iommu() ? "spapr"
					: "type1",
			(unsigned long long)S.devs[0].edu.window_start, (unsigned long long)S.devs[0].edu.window_size,
			(unsigned long long)S.devs[0].edu.ddw_start, (unsigned long long)S.devs[0].edu.ddw_size,
			d->edu.swap ? "true" : "false");
	}
	fprintf(out, "\n  ],\n  \"job_failures\": %lu,\n", failures);
	fprintf(out, "  \"jobs_done\": {\"h2d\": %lu, \"compute\": %lu, \"d2h\": %lu},\n", done[0], done[1], done[2]);
	fprintf(out, "  \"calls\": {");
	for (int i = 0; i < MAX_CALLNAMES && S.calls[i].name; i++)
		fprintf(out, "%s\n    \"%s\": {\"calls\": %lu, \"bytes\": %lu}", i ? "," : "", S.calls[i].name,
			S.calls[i].calls, S.calls[i].bytes);
	fprintf(out, "\n  },\n  \"ioctls\": [");
	for (unsigned int i = 0; i < S.n_ioctls; i++) {
		struct ioctl_log *l = &S.ioctls[i];

		fprintf(out,
			"%s\n    {\"tid\": %d, \"fd\": %d, \"cmd\": \"%s\", \"cmd_num\": %lu, "
			"\"ret\": %d, \"errno\": %d, \"vaddr\": %llu, \"iova\": %llu, "
			"\"size\": %llu, \"flags\": %u, \"index\": %u, \"start\": %u, "
			"\"count\": %u, \"card\": \"%s\"}",
			i ? "," : "", l->tid, l->fd, l->name, l->cmd, l->ret, l->err, (unsigned long long)l->vaddr,
			(unsigned long long)l->iova, (unsigned long long)l->size, l->flags, l->index, l->start,
			l->count, l->card ? l->card : "");
	}
	fprintf(out, "\n  ],\n  \"call_log_complete\": %s,\n  \"call_log\": [",
		S.n_call_log < MAX_CALLLOG ? "true" : "false");
	for (unsigned int i = 0; i < S.n_call_log; i++)
		fprintf(out, "%s\n    [%d, \"%s\", %lu]", i ? "," : "", S.call_log[i].tid, S.call_log[i].name,
			S.call_log[i].bytes);
	fprintf(out, "\n  ]\n}\n");
	pthread_mutex_unlock(&S.lock);
}

unsigned long sim_job_failures(void)
{
	unsigned long n = 0;

	pthread_mutex_lock(&S.lock);
	for (int i = 0; i < S.ndev; i++)
		n += S.devs[i].failures;
	pthread_mutex_unlock(&S.lock);
	return n;
}
