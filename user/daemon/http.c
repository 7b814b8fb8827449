// SPDX-License-Identifier: GPL-2.0-only
/*
 * One thread, many connections, multiplexed with poll: a client that is
 * slow or silent holds only its own slot, never the server. Each has 1 s
 * from its connect to send its request's head and 5 s for the whole
 * exchange. Every connection is accepted at once, so no address waits
 * behind another's in the backlog: one address holds at most PEER_MAX
 * (past it, its own oldest that has sent nothing goes, else its oldest
 * still sending, else the newcomer), and past MAX_CONNS in all the
 * address holding the most gives one up. A reconnect storm from one
 * address can slow its own requests, not another's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/thread.h"
#include "daemon/http.h"

#define REQUEST_MAX 8192 /* request line and headers */
#define HEAD_MS 1000 /* from connect to the end of the request's head */
#define EXCHANGE_MS 5000 /* from connect to the last byte of the answer */
#define LINGER_MS 1000 /* reading what the client still sends, after the answer */
#define MAX_CONNS 256
#define PEER_MAX 16 /* connections of one address */
#define BACKLOG 128

static const char text_plain[] = "text/plain; charset=utf-8";

enum conn_state { CONN_READ, CONN_WRITE, CONN_LINGER };

/* A client's address, without its port. */
struct peer {
	int family;
	uint8_t addr[16];
};

struct conn {
	int fd;
	struct peer peer;
	enum conn_state st;
	long long born, deadline; /* ms, CLOCK_MONOTONIC */
	char *in; /* REQUEST_MAX bytes, while reading */
	size_t got;
	char *out; /* the whole answer, while writing */
	size_t len, off, drained;
};

struct http_server {
	int fd;
	int wake[2]; /* written by http_stop */
	pthread_t thread;
	http_page_fn page;
	void *ctx;
	struct conn conns[MAX_CONNS];
	int n;
};

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

int http_parse_request(char *req, const char **url, bool *head)
{
	char *sp, *u, *q;

	/* "METHOD SP URL SP HTTP/x.y" */
	sp = strchr(req, ' ');
	u = sp ? sp + 1 : NULL;
	sp = u ? strpbrk(u, " \r\n") : NULL;
	if (!sp || *sp != ' ' || strncmp(sp + 1, "HTTP/1.", 7) || u[0] != '/')
		return 400;
	*sp = 0;
	*head = !strncmp(req, "HEAD ", 5);
	if (strncmp(req, "GET ", 4) && !*head)
		return 405;
	q = strchr(u, '?'); /* the query is not used */
	if (q)
		*q = 0;
	*url = u;
	return 0;
}

/* The answer, whole, in c->out: a status line, the headers, the body
 * (none for HEAD). */
static void answer(struct conn *c, unsigned status, const char *type, const char *body, size_t len, bool head_only)
{
	char hdr[256];
	int n = snprintf(hdr, sizeof(hdr),
			 "HTTP/1.1 %u %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n",
			 status, reason(status), type, len);
	size_t total = (size_t)n + (head_only ? 0 : len);

	free(c->in);
	c->in = NULL;
	c->out = malloc(total);
	if (!c->out) {
		c->deadline = 0; /* out of memory: closed at once */
		return;
	}
	memcpy(c->out, hdr, (size_t)n);
	if (!head_only)
		memcpy(c->out + n, body, len);
	c->len = total;
	c->off = 0;
	c->st = CONN_WRITE;
	c->deadline = c->born + EXCHANGE_MS;
}

static void answer_text(struct conn *c, unsigned status, const char *msg)
{
	answer(c, status, text_plain, msg, strlen(msg), false);
}

/* A request's head is all there: its answer. */
static void serve(struct http_server *s, struct conn *c)
{
	const char *type = text_plain, *url = NULL; /* the type unless the page says */
	unsigned status = 200;
	bool head = false;
	size_t len = 0;
	char *body;
	int bad = http_parse_request(c->in, &url, &head);

	if (bad) {
		answer_text(c, (unsigned)bad, bad == 405 ? "only GET\n" : "bad request\n");
		return;
	}
	body = s->page(s->ctx, url, &status, &type, &len);
	if (!body) {
		answer(c, 503, text_plain, "out of memory\n", 14, head);
		return;
	}
	answer(c, status, type, body, len, head);
	free(body);
}

static void drop(struct http_server *s, int i)
{
	struct conn *c = &s->conns[i];

	close(c->fd);
	free(c->in);
	free(c->out);
	s->conns[i] = s->conns[--s->n];
}

static bool would_block(ssize_t n)
{
	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

/* One step of a connection that is ready. false: it is done, drop it. */
static bool step(struct http_server *s, struct conn *c)
{
	ssize_t n;

	switch (c->st) {
	case CONN_READ:
		n = recv(c->fd, c->in + c->got, REQUEST_MAX - 1 - c->got, MSG_DONTWAIT);
		if (would_block(n))
			return true;
		if (n <= 0)
			return false; /* gone before asking: nothing to say to it */
		c->got += (size_t)n;
		c->in[c->got] = 0;
		if (strstr(c->in, "\r\n\r\n") || strstr(c->in, "\n\n"))
			serve(s, c);
		else if (c->got == REQUEST_MAX - 1)
			answer_text(c, 431, "bad request\n");
		return c->deadline != 0;
	case CONN_WRITE:
		n = send(c->fd, c->out + c->off, c->len - c->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (would_block(n))
			return true;
		if (n <= 0)
			return false;
		c->off += (size_t)n;
		if (c->off < c->len)
			return true;
		/* closing with unread bytes would reset the connection and could
		 * take the answer with it: say we are done, read what is left
		 * for a moment, then close */
		shutdown(c->fd, SHUT_WR);
		c->st = CONN_LINGER;
		c->deadline = sbt_now_mono_ms() + LINGER_MS;
		return true;
	case CONN_LINGER: {
		char sink[4096];

		n = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (would_block(n))
			return true;
		if (n <= 0)
			return false;
		c->drained += (size_t)n;
		return c->drained < 65536;
	}
	}
	return false;
}

static struct peer peer_of(const struct sockaddr_storage *ss)
{
	struct peer p = { .family = ss->ss_family };

	if (ss->ss_family == AF_INET)
		memcpy(p.addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	else if (ss->ss_family == AF_INET6)
		memcpy(p.addr, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	return p;
}

static bool same_peer(const struct peer *a, const struct peer *b)
{
	return a->family == b->family && !memcmp(a->addr, b->addr, sizeof(a->addr));
}

static int count_of(const struct http_server *s, const struct peer *p)
{
	int n = 0;

	for (int i = 0; i < s->n; i++)
		n += same_peer(&s->conns[i].peer, p);
	return n;
}

/* The connection of p to give up: its oldest that has sent nothing yet,
 * else its oldest still sending its request; -1 when every one of it is
 * being answered. */
static int victim_of(const struct http_server *s, const struct peer *p)
{
	int idle = -1, reading = -1;

	for (int i = 0; i < s->n; i++) {
		const struct conn *c = &s->conns[i];

		if (!same_peer(&c->peer, p) || c->st != CONN_READ)
			continue;
		if (!c->got && (idle < 0 || c->born < s->conns[idle].born))
			idle = i;
		if (reading < 0 || c->born < s->conns[reading].born)
			reading = i;
	}
	return idle >= 0 ? idle : reading;
}

/* The address holding the most connections (one pass: a table of the
 * addresses, open addressing; MAX_CONNS at most), and how many. */
static const struct peer *heaviest(const struct http_server *s, int *most_n)
{
	struct {
		int conn; /* a connection of it, -1: empty */
		int n;
	} t[2 * MAX_CONNS];
	const struct peer *most = NULL;

	for (size_t k = 0; k < 2 * MAX_CONNS; k++)
		t[k].conn = -1;
	*most_n = 0;
	for (int i = 0; i < s->n; i++) {
		const struct peer *p = &s->conns[i].peer;
		uint32_t h = 2166136261u;
		size_t k;

		for (size_t b = 0; b < sizeof(p->addr); b++)
			h = (h ^ p->addr[b]) * 16777619u;
		for (k = h % (2 * MAX_CONNS); t[k].conn >= 0 && !same_peer(&s->conns[t[k].conn].peer, p);
		     k = (k + 1) % (2 * MAX_CONNS))
			;
		if (t[k].conn < 0)
			t[k].conn = i;
		if (++t[k].n > *most_n) {
			*most_n = t[k].n;
			most = p;
		}
	}
	return most;
}

/* A connection given up to make room: what it sent is read first, so
 * that the close is an end (FIN), not a reset, and the client can tell. */
static void evict(struct http_server *s, int i)
{
	char sink[4096];

	for (int k = 0; k < 16 && recv(s->conns[i].fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; k++)
		;
	drop(s, i);
}

/* Room for a newcomer from p: false when the newcomer is the one to go. */
static bool make_room(struct http_server *s, const struct peer *p)
{
	const struct peer *most;
	int v, most_n;

	if (count_of(s, p) >= PEER_MAX) {
		if ((v = victim_of(s, p)) < 0)
			return false; /* all its own are being answered: the newcomer goes */
		evict(s, v);
	}
	if (s->n < MAX_CONNS)
		return true;
	most = heaviest(s, &most_n);
	if (!most || same_peer(most, p) || (v = victim_of(s, most)) < 0)
		return false;
	evict(s, v);
	return true;
}

static void accept_all(struct http_server *s)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(s->fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct peer p;
		struct conn *c;

		if (fd < 0)
			return; /* none waiting, the peer left, or no file left: later */
		p = peer_of(&ss);
		if (!make_room(s, &p)) {
			close(fd);
			continue;
		}
		c = &s->conns[s->n];
		*c = (struct conn){ .fd = fd, .peer = p, .st = CONN_READ, .born = sbt_now_mono_ms() };
		c->deadline = c->born + HEAD_MS;
		if (!(c->in = malloc(REQUEST_MAX))) {
			close(fd);
			return;
		}
		c->in[0] = 0;
		s->n++;
	}
}

static void *serve_loop(void *arg)
{
	struct http_server *s = arg;
	struct pollfd p[MAX_CONNS + 2];

	for (;;) {
		long long now = sbt_now_mono_ms(), next = -1;
		int np = 2, r;

		p[0] = (struct pollfd){ s->wake[0], POLLIN, 0 };
		p[1] = (struct pollfd){ s->fd, POLLIN, 0 };
		for (int i = 0; i < s->n; i++) {
			struct conn *c = &s->conns[i];

			p[np++] = (struct pollfd){ c->fd, c->st == CONN_WRITE ? POLLOUT : POLLIN, 0 };
			if (next < 0 || c->deadline < next)
				next = c->deadline;
		}
		r = poll(p, (nfds_t)np, next < 0 ? -1 : next > now ? (int)(next - now) : 0);
		if (r < 0 && errno != EINTR)
			break;
		if (r > 0 && p[0].revents)
			break;
		now = sbt_now_mono_ms();
		/* connections first, from the end: a dropped one's slot takes
		 * the last, already looked at */
		for (int i = s->n - 1; i >= 0; i--) {
			bool keep = true;

			if (r > 0 && p[i + 2].revents)
				keep = step(s, &s->conns[i]);
			if (!keep || now >= s->conns[i].deadline)
				drop(s, i);
		}
		if (r > 0 && p[1].revents)
			accept_all(s);
	}
	while (s->n)
		drop(s, s->n - 1);
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

struct http_server *http_start(const char *addr, http_page_fn page, void *ctx, char *err, size_t errlen)
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
	s->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->fd < 0 || setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(s->fd, (struct sockaddr *)&ss, len) || listen(s->fd, BACKLOG)) {
		snprintf(err, errlen,
			 "cannot listen on %s: %s; hint: is another daemon there? choose "
			 "another with --listen",
			 addr, strerror(errno));
		goto fail;
	}
	if (pipe2(s->wake, O_CLOEXEC)) {
		snprintf(err, errlen, "cannot make a pipe: %s", strerror(errno));
		goto fail;
	}
	e = thread_start_quiet(&s->thread, "sbt-http", serve_loop, s);
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
