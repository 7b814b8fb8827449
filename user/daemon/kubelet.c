// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <fnmatch.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/pb.h"
#include "base/vec.h"
#include "daemon/kubelet.h"

#define LIST_PATH "/v1.PodResourcesLister/List"
#define MAX_REPLY (16 << 20)

/* ---- the answer, on the protobuf reader ------------------------------------------- */

/* The next field: its number, and for a length-delimited one its bytes
 * (else val's p is NULL). 1: a field, 0: the end, -1: damaged. */
static int field(struct pb_reader *r, uint32_t *num, struct pb_reader *val)
{
	struct pb_field f = { 0 };
	int ret = pb_next(r, &f);

	*num = f.num;
	*val = pb_sub(&f); /* empty but for a length-delimited field */
	return ret;
}

static void str(const struct pb_reader *v, char *out, size_t size)
{
	size_t n = v->p ? (size_t)(v->end - v->p) : 0;

	if (n >= size)
		n = size - 1;
	for (size_t i = 0; i < n; i++) /* a label value: printable ASCII only */
		out[i] = v->p[i] >= 0x20 && v->p[i] < 0x7f && v->p[i] != '"' && v->p[i] != '\\' ? (char)v->p[i] : '_';
	out[n] = 0;
}

/* A PCI address as the daemon names cards: with its domain. */
static void device_name(const char *id, char *out, size_t size)
{
	unsigned int bus, dev, fn;
	char tail;

	if (sscanf(id, "%2x:%2x.%1x%c", &bus, &dev, &fn, &tail) == 3 && strlen(id) == 7)
		snprintf(out, size, "0000:%.7s", id);
	else
		snprintf(out, size, "%s", id);
}

static int add(struct allocations *out, const struct allocation *a)
{
	if (vec_reserve((void **)&out->v, &out->cap, out->n + 1, sizeof(*out->v)))
		return -ENOMEM;
	out->v[out->n++] = *a;
	return 0;
}

/* ContainerDevices { resource_name = 1; repeated device_ids = 2; } */
static int container_devices(struct pb_reader d, struct allocation *a, const char *glob, struct allocations *out)
{
	struct pb_reader scan = d, v;
	uint32_t num;
	int r;

	a->resource[0] = 0;
	while ((r = field(&scan, &num, &v)) > 0)
		if (num == 1 && v.p)
			str(&v, a->resource, sizeof(a->resource));
	if (r < 0)
		return -EBADMSG;
	if (fnmatch(glob, a->resource, 0))
		return 0;
	while ((r = field(&d, &num, &v)) > 0) {
		char id[64];

		if (num != 2 || !v.p)
			continue;
		str(&v, id, sizeof(id));
		device_name(id, a->device, sizeof(a->device));
		if (add(out, a))
			return -ENOMEM;
	}
	return r < 0 ? -EBADMSG : 0;
}

/* ContainerResources { name = 1; repeated ContainerDevices devices = 2; ... } */
static int container(struct pb_reader c, struct allocation *a, const char *glob, struct allocations *out)
{
	struct pb_reader scan = c, v;
	uint32_t num;
	int r;

	a->container[0] = 0;
	while ((r = field(&scan, &num, &v)) > 0)
		if (num == 1 && v.p)
			str(&v, a->container, sizeof(a->container));
	if (r < 0)
		return -EBADMSG;
	while ((r = field(&c, &num, &v)) > 0)
		if (num == 2 && v.p && (r = container_devices(v, a, glob, out)))
			return r;
	return r < 0 ? -EBADMSG : 0;
}

/* PodResources { name = 1; namespace = 2; repeated ContainerResources containers = 3; } */
static int pod(struct pb_reader p, const char *glob, struct allocations *out)
{
	struct allocation a = { 0 };
	struct pb_reader scan = p, v;
	uint32_t num;
	int r;

	while ((r = field(&scan, &num, &v)) > 0) {
		if (num == 1 && v.p)
			str(&v, a.pod, sizeof(a.pod));
		else if (num == 2 && v.p)
			str(&v, a.namespace, sizeof(a.namespace));
	}
	if (r < 0)
		return -EBADMSG;
	while ((r = field(&p, &num, &v)) > 0)
		if (num == 3 && v.p && (r = container(v, &a, glob, out)))
			return r;
	return r < 0 ? -EBADMSG : 0;
}

int kubelet_parse(const uint8_t *msg, size_t len, const char *glob, struct allocations *out)
{
	struct pb_reader b = pb_reader_of(msg, len), v;
	uint32_t num;
	int r;

	/* ListPodResourcesResponse { repeated PodResources pod_resources = 1; } */
	while ((r = field(&b, &num, &v)) > 0)
		if (num == 1 && v.p && (r = pod(v, glob, out)))
			return r;
	return r < 0 ? -EBADMSG : 0;
}

void kubelet_free(struct allocations *a)
{
	free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
}

/* ---- gRPC over HTTP/2 ------------------------------------------------------------ */

struct call {
	int fd;
	int32_t stream;
	uint8_t *reply;
	size_t len;
	bool closed, too_big;
	uint32_t h2_error;
	int grpc_status; /* -1: not said */
	char grpc_message[128];
	size_t sent; /* of the request's 5 bytes */
};

static ssize_t send_cb(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *ud)
{
	struct call *c = ud;
	ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);

	(void)s;
	(void)flags;
	if (n < 0)
		return errno == EAGAIN ? NGHTTP2_ERR_WOULDBLOCK : NGHTTP2_ERR_CALLBACK_FAILURE;
	return n;
}

static int data_cb(nghttp2_session *s, uint8_t flags, int32_t stream, const uint8_t *data, size_t len, void *ud)
{
	struct call *c = ud;
	uint8_t *grown;

	(void)s;
	(void)flags;
	if (stream != c->stream)
		return 0;
	if (c->len + len > MAX_REPLY) {
		c->too_big = true;
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	if (!(grown = realloc(c->reply, c->len + len)))
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	memcpy(grown + c->len, data, len);
	c->reply = grown;
	c->len += len;
	return 0;
}

static int header_cb(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen, const uint8_t *value,
		     size_t vlen, uint8_t flags, void *ud)
{
	struct call *c = ud;

	(void)s;
	(void)flags;
	if (f->hd.stream_id != c->stream)
		return 0;
	if (nlen == 11 && !memcmp(name, "grpc-status", 11))
		c->grpc_status = atoi((const char *)value);
	else if (nlen == 12 && !memcmp(name, "grpc-message", 12))
		snprintf(c->grpc_message, sizeof(c->grpc_message), "%.*s", (int)vlen, value);
	return 0;
}

static int close_cb(nghttp2_session *s, int32_t stream, uint32_t error, void *ud)
{
	struct call *c = ud;

	(void)s;
	if (stream == c->stream) {
		c->closed = true;
		c->h2_error = error;
	}
	return 0;
}

/* The request's body: an empty ListPodResourcesRequest, framed (not
 * compressed, length 0). */
static ssize_t body_cb(nghttp2_session *s, int32_t stream, uint8_t *buf, size_t len, uint32_t *flags,
		       nghttp2_data_source *src, void *ud)
{
	static const uint8_t frame[5] = { 0, 0, 0, 0, 0 };
	struct call *c = ud;
	size_t n = sizeof(frame) - c->sent;

	(void)s;
	(void)stream;
	(void)src;
	if (n > len)
		n = len;
	memcpy(buf, frame + c->sent, n);
	c->sent += n;
	if (c->sent == sizeof(frame))
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

#define HDR(n, v)                                                                                                      \
	{                                                                                                              \
		(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1, NGHTTP2_NV_FLAG_NONE                     \
	}

static int connect_unix(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (snprintf(a.sun_path, sizeof(a.sun_path), "%s", path) >= (int)sizeof(a.sun_path)) {
		snprintf(err, errlen, "kubelet socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		int e = errno;

		snprintf(err, errlen, "cannot reach the kubelet at %s: %s", path, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	return fd;
}

static int exchange(nghttp2_session *s, struct call *c, int timeout_ms, char *err, size_t errlen)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!c->closed) {
		uint8_t buf[16384];
		struct pollfd p = { c->fd, POLLIN, 0 };
		long left;
		ssize_t n;

		if (nghttp2_session_send(s)) {
			snprintf(err, errlen, "kubelet: cannot send the request");
			return -EIO;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		left = timeout_ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
			snprintf(err, errlen, "kubelet: no answer within %d ms", timeout_ms);
			return -ETIMEDOUT;
		}
		n = read(c->fd, buf, sizeof(buf));
		if (n <= 0) {
			snprintf(err, errlen, "kubelet: the connection closed before the answer");
			return -ECONNRESET;
		}
		if (nghttp2_session_mem_recv(s, buf, (size_t)n) < 0) {
			snprintf(err, errlen, "kubelet: %s",
				 c->too_big ? "answer over 16 MiB" : "not HTTP/2 as gRPC speaks it");
			return -EBADMSG;
		}
	}
	return 0;
}

int kubelet_list(const char *sock, const char *glob, int timeout_ms, struct allocations *out, char *err, size_t errlen)
{
	nghttp2_nv hdrs[] = {
		HDR(":method", "POST"),
		HDR(":scheme", "http"),
		HDR(":path", LIST_PATH),
		HDR(":authority", "localhost"),
		HDR("content-type", "application/grpc"),
		HDR("te", "trailers"),
	};
	struct call c = { .grpc_status = -1 };
	nghttp2_session_callbacks *cb = NULL;
	nghttp2_data_provider body = { .read_callback = body_cb };
	nghttp2_session *s = NULL;
	struct allocations got = { 0 };
	int ret;

	if ((c.fd = connect_unix(sock, err, errlen)) < 0)
		return c.fd;
	ret = -ENOMEM;
	snprintf(err, errlen, "out of memory");
	if (nghttp2_session_callbacks_new(&cb))
		goto out;
	nghttp2_session_callbacks_set_send_callback(cb, send_cb);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, data_cb);
	nghttp2_session_callbacks_set_on_header_callback(cb, header_cb);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, close_cb);
	if (nghttp2_session_client_new(&s, cb, &c) || nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, NULL, 0))
		goto out;
	if ((c.stream = nghttp2_submit_request(s, NULL, hdrs, sizeof(hdrs) / sizeof(hdrs[0]), &body, &c)) < 0)
		goto out;
	if ((ret = exchange(s, &c, timeout_ms, err, errlen)))
		goto out;
	ret = -EPROTO;
	if (c.h2_error) {
		snprintf(err, errlen, "kubelet: the stream was reset (HTTP/2 error %u)", c.h2_error);
	} else if (c.grpc_status != 0) {
		snprintf(err, errlen, "kubelet: gRPC status %d%s%s", c.grpc_status, c.grpc_message[0] ? ": " : "",
			 c.grpc_message);
	} else if (c.len < 5 || c.reply[0] != 0 ||
		   ((size_t)c.reply[1] << 24 | (size_t)c.reply[2] << 16 | (size_t)c.reply[3] << 8 | c.reply[4]) !=
			   c.len - 5) {
		snprintf(err, errlen, "kubelet: not one uncompressed gRPC message");
	} else if ((ret = kubelet_parse(c.reply + 5, c.len - 5, glob, &got))) {
		snprintf(err, errlen, "kubelet: %s",
			 ret == -ENOMEM ? "out of memory" : "a damaged ListPodResourcesResponse");
		kubelet_free(&got);
	} else {
		kubelet_free(out);
		*out = got;
	}
out:
	nghttp2_session_del(s);
	nghttp2_session_callbacks_del(cb);
	free(c.reply);
	close(c.fd);
	return ret;
}
