// SPDX-License-Identifier: GPL-2.0-only
/* One thread serves one connection at a time: a scrape every few seconds
 * needs no more, and a client that stalls is cut off after REQUEST_MS. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/thread.h"
#include "daemon/http.h"

#define REQUEST_MAX 8192 /* request line and headers */
#define REQUEST_MS 5000	 /* the whole exchange, read and write */

static const char text_plain[] = "text/plain; charset=utf-8";

struct http_server {
	int fd;
	int wake[2]; /* written by http_stop */
	pthread_t thread;
	http_page_fn page;
	void *ctx;
};

static long long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Waits for fd to be ready for ev before the deadline. */
static int wait_fd(int fd, short ev, long long deadline)
{
	struct pollfd p = { fd, ev, 0 };
	long long left = deadline - now_ms();

	if (left <= 0)
		return -1;
	return poll(&p, 1, (int)left) == 1 ? 0 : -1;
}

static int send_all(int fd, const char *buf, size_t len, long long deadline)
{
	while (len) {
		ssize_t n;

		if (wait_fd(fd, POLLOUT, deadline))
			return -1;
		n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static const char *reason(unsigned status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	default: return "Status";
	}
}

static void respond(int fd, unsigned status, const char *type, const char *body, size_t len,
		    int head_only, long long deadline)
{
	char hdr[256];
	int n = snprintf(hdr, sizeof(hdr),
			 "HTTP/1.1 %u %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n", status, reason(status), type, len);

	if (send_all(fd, hdr, (size_t)n, deadline) == 0 && !head_only)
		send_all(fd, body, len, deadline);
}

/* A short plain-text answer of our own (an error). */
static void respond_text(int fd, unsigned status, const char *msg, int head_only,
			 long long deadline)
{
	respond(fd, status, text_plain, msg, strlen(msg), head_only, deadline);
}

/* Reads up to the blank line ending the headers. Length read, or -status. */
static int read_request(int fd, char *buf, size_t size, long long deadline)
{
	size_t got = 0;

	while (got < size - 1) {
		ssize_t n;

		if (wait_fd(fd, POLLIN, deadline))
			return -408;
		n = recv(fd, buf + got, size - 1 - got, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return -400;
		got += (size_t)n;
		buf[got] = 0;
		if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
			return (int)got;
	}
	return -431;
}

static void serve(struct http_server *s, int fd)
{
	long long deadline = now_ms() + REQUEST_MS;
	char req[REQUEST_MAX], *url, *sp, *q;
	const char *type = text_plain; /* unless the page says */
	unsigned status = 200;
	int n = read_request(fd, req, sizeof(req), deadline), head;
	size_t len = 0;
	char *body;

	if (n == -408)
		return; /* gone quiet: nothing to say to it */
	if (n < 0) {
		respond_text(fd, (unsigned)-n, "bad request\n", 0, deadline);
		return;
	}
	/* "METHOD SP URL SP HTTP/x.y" */
	sp = strchr(req, ' ');
	url = sp ? sp + 1 : NULL;
	sp = url ? strpbrk(url, " \r\n") : NULL;
	if (!sp || *sp != ' ' || strncmp(sp + 1, "HTTP/1.", 7) || url[0] != '/') {
		respond_text(fd, 400, "bad request\n", 0, deadline);
		return;
	}
	*sp = 0;
	head = !strncmp(req, "HEAD ", 5);
	if (strncmp(req, "GET ", 4) && !head) {
		respond_text(fd, 405, "only GET\n", 0, deadline);
		return;
	}
	q = strchr(url, '?'); /* the query is not used */
	if (q)
		*q = 0;
	body = s->page(s->ctx, url, &status, &type, &len);
	if (!body) {
		respond_text(fd, 503, "out of memory\n", head, deadline);
		return;
	}
	respond(fd, status, type, body, len, head, deadline);
	free(body);
}

/* Closing with unread bytes would reset the connection and could take the
 * answer with it: say we are done, read what is left for a moment, close. */
static void linger_close(int fd)
{
	long long deadline = now_ms() + 1000;
	char sink[4096];
	size_t drained = 0;

	shutdown(fd, SHUT_WR);
	while (drained < 65536 && !wait_fd(fd, POLLIN, deadline)) {
		ssize_t n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);

		if (n <= 0)
			break;
		drained += (size_t)n;
	}
	close(fd);
}

static void *serve_loop(void *arg)
{
	struct http_server *s = arg;

	for (;;) {
		struct pollfd p[2] = { { s->wake[0], POLLIN, 0 }, { s->fd, POLLIN, 0 } };
		int c;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents)
			break;
		c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue; /* the peer left, or no file left: the next one may do */
		serve(s, c);
		linger_close(c);
	}
	return NULL;
}

int http_parse_listen(const char *listen, struct sockaddr_storage *ss)
{
	const char *colon = strrchr(listen, ':');
	char host[64];
	char *end;
	unsigned long port;
	size_t hl;

	if (!colon)
		return -1;
	port = strtoul(colon + 1, &end, 10);
	if (*end || end == colon + 1 || port > 65535)
		return -1;
	hl = (size_t)(colon - listen);
	if (hl >= sizeof(host))
		return -1;
	memcpy(host, listen, hl);
	host[hl] = 0;
	memset(ss, 0, sizeof(*ss));
	if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		host[hl - 1] = 0;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		return inet_pton(AF_INET6, host + 1, &a->sin6_addr) == 1 ? 0 : -1;
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;

	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	if (!host[0]) {
		a->sin_addr.s_addr = htonl(INADDR_ANY);
		return 0;
	}
	return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

struct http_server *http_start(const char *addr, http_page_fn page, void *ctx, char *err,
			       size_t errlen)
{
	struct http_server *s;
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1, e;

	if (http_parse_listen(addr, &ss)) {
		snprintf(err, errlen, "--listen '%s' is not ADDR:PORT; hint: 127.0.0.1:9464", addr);
		return NULL;
	}
	len = ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->page = page;
	s->ctx = ctx;
	s->wake[0] = s->wake[1] = -1;
	s->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->fd < 0 || setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(s->fd, (struct sockaddr *)&ss, len) || listen(s->fd, 16)) {
		snprintf(err, errlen, "cannot listen on %s: %s; hint: is another daemon there? choose "
			 "another with --listen", addr, strerror(errno));
		goto fail;
	}
	if (pipe2(s->wake, O_CLOEXEC)) {
		snprintf(err, errlen, "cannot make a pipe: %s", strerror(errno));
		goto fail;
	}
	e = thread_start_quiet(&s->thread, serve_loop, s);
	if (e) {
		snprintf(err, errlen, "cannot start the HTTP thread: %s", strerror(-e));
		goto fail;
	}
	return s;
fail:
	if (s->fd >= 0)
		close(s->fd);
	if (s->wake[0] >= 0) {
		close(s->wake[0]);
		close(s->wake[1]);
	}
	free(s);
	return NULL;
}

void http_stop(struct http_server *s)
{
	if (!s)
		return;
	if (write(s->wake[1], "x", 1) != 1) { /* cannot fail on an empty pipe */
	}
	pthread_join(s->thread, NULL);
	close(s->fd);
	close(s->wake[0]);
	close(s->wake[1]);
	free(s);
}
