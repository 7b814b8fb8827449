// SPDX-License-Identifier: GPL-2.0-only
/* The daemon's HTTP server and systemd notifications, over real sockets on
 * loopback: what a scraper and a service manager see. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "daemon/http.h"
#include "daemon/sdnotify.h"

static int pages;

static char *page(void *ctx, const char *url, unsigned *status, const char **type, size_t *len)
{
	(void)ctx;
	pages++;
	if (strcmp(url, "/metrics")) {
		*status = 404;
		*len = 10;
		return strdup("not found\n");
	}
	*type = "text/plain; version=0.0.4";
	*len = 12;
	return strdup("spyre_up 1\n\n");
}

/* The port the server got: bind to 0 and read it back is not possible
 * through http_start, so try a few fixed high ports. */
static struct http_server *start(int *port)
{
	char addr[64], err[256];

	for (int p = 39464; p < 39564; p++) {
		struct http_server *s;

		snprintf(addr, sizeof(addr), "127.0.0.1:%d", p);
		s = http_start(addr, page, NULL, err, sizeof(err));
		if (s) {
			*port = p;
			return s;
		}
	}
	fail_msg("no port to listen on");
	return NULL;
}

/* Sends req, reads the whole answer until the server closes. */
static char *exchange(int port, const char *req, size_t reqlen)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	static char buf[65536];
	size_t got = 0;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(send(fd, req, reqlen, MSG_NOSIGNAL), (ssize_t)reqlen);
	while ((n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
		got += (size_t)n;
	buf[got] = 0;
	close(fd);
	return buf;
}

static void test_get_head_and_errors(void **state)
{
	struct http_server *s;
	char big[10000];
	int port;
	char *r;

	(void)state;
	s = start(&port);
	r = exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34);
	assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(r, "Content-Type: text/plain; version=0.0.4\r\n"));
	assert_non_null(strstr(r, "Content-Length: 12\r\n"));
	assert_non_null(strstr(r, "\r\n\r\nspyre_up 1\n\n"));
	/* a query is not part of the page's name */
	r = exchange(port, "GET /metrics?x=1 HTTP/1.0\r\n\r\n", 29);
	assert_non_null(strstr(r, " 200 OK"));
	r = exchange(port, "HEAD /metrics HTTP/1.1\r\n\r\n", 26);
	assert_non_null(strstr(r, "Content-Length: 12\r\n"));
	assert_null(strstr(r, "spyre_up"));
	r = exchange(port, "GET /nope HTTP/1.1\r\n\r\n", 22);
	assert_non_null(strstr(r, "HTTP/1.1 404 Not Found"));
	r = exchange(port, "POST /metrics HTTP/1.1\r\n\r\n", 26);
	assert_non_null(strstr(r, "HTTP/1.1 405 "));
	r = exchange(port, "hello\r\n\r\n", 9);
	assert_non_null(strstr(r, "HTTP/1.1 400 "));
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
	r = exchange(port, big, sizeof(big));
	assert_non_null(strstr(r, "HTTP/1.1 431 "));
	/* the server still answers after all that */
	pages = 0;
	r = exchange(port, "GET /metrics HTTP/1.1\r\n\r\n", 25);
	assert_non_null(strstr(r, " 200 OK"));
	assert_int_equal(pages, 1);
	http_stop(s);
}

static int connect_to(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* 50 clients that connect and send one byte: a scrape is answered at once
 * all the same, and each slow one is cut off, a second after it came or at
 * once to make room (16 an address), with an end, not a reset. */
static void test_slow_clients(void **state)
{
	struct http_server *s;
	int slow[50], port;
	double t0, took;
	char c;
	char *r;

	(void)state;
	s = start(&port);
	for (int i = 0; i < 50; i++) {
		slow[i] = connect_to(port);
		assert_int_equal(send(slow[i], "G", 1, MSG_NOSIGNAL), 1);
	}
	for (int k = 0; k < 5; k++) {
		t0 = now_s();
		r = exchange(port, "GET /metrics HTTP/1.1\r\n\r\n", 25);
		took = now_s() - t0;
		assert_non_null(strstr(r, " 200 OK"));
		/* the bound; a free server answers in about a millisecond */
		assert_true(took < 0.1);
	}
	/* cut off: each reads the end */
	for (int i = 0; i < 50; i++) {
		struct timeval tv = { 5, 0 };

		setsockopt(slow[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		assert_int_equal(recv(slow[i], &c, 1, 0), 0);
		close(slow[i]);
	}
	http_stop(s);
}

static void test_request_parser(void **state)
{
	const char *url;
	bool head;
	char a[] = "GET /metrics?x=1 HTTP/1.1\r\n\r\n", b[] = "HEAD /healthz HTTP/1.0\r\n\r\n";
	char c[] = "POST /metrics HTTP/1.1\r\n\r\n", d[] = "GET metrics HTTP/1.1\r\n\r\n";
	char e[] = "GET /metrics\r\n\r\n", f[] = "GET /x HTTP/2\r\n\r\n", g[] = "";

	(void)state;
	assert_int_equal(http_parse_request(a, &url, &head), 0);
	assert_string_equal(url, "/metrics");
	assert_false(head);
	assert_int_equal(http_parse_request(b, &url, &head), 0);
	assert_string_equal(url, "/healthz");
	assert_true(head);
	assert_int_equal(http_parse_request(c, &url, &head), 405);
	assert_int_equal(http_parse_request(d, &url, &head), 400);
	assert_int_equal(http_parse_request(e, &url, &head), 400);
	assert_int_equal(http_parse_request(f, &url, &head), 400);
	assert_int_equal(http_parse_request(g, &url, &head), 400);
}

static void test_listen_errors(void **state)
{
	struct http_server *s, *again;
	char addr[64], err[256];
	int port;

	(void)state;
	assert_null(http_start("9464", page, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "is not ADDR:PORT; hint:"));
	s = start(&port);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	again = http_start(addr, page, NULL, err, sizeof(err));
	assert_null(again);
	assert_non_null(strstr(err, "cannot listen on"));
	http_stop(s);
}

static void test_sd_notify(void **state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char path[] = "/tmp/sbt-notify-XXXXXX", sock[64], msg[256];
	int fd;
	ssize_t n;

	(void)state;
	unsetenv("NOTIFY_SOCKET");
	assert_int_equal(sd_notify_send("READY=1"), 0);
	assert_non_null(mkdtemp(path));
	snprintf(sock, sizeof(sock), "%s/notify", path);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setenv("NOTIFY_SOCKET", sock, 1);
	assert_int_equal(sd_notify_send("READY=1\nSTATUS=watching %d cards", 2), 1);
	n = recv(fd, msg, sizeof(msg) - 1, 0);
	assert_true(n > 0);
	msg[n] = 0;
	assert_string_equal(msg, "READY=1\nSTATUS=watching 2 cards");
	close(fd);
	unlink(sock);
	rmdir(path);
	/* the abstract namespace, as systemd uses */
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "sbt-notify-%d", getpid());
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sa.sun_path + 1))),
			 0);
	snprintf(sock, sizeof(sock), "@sbt-notify-%d", getpid());
	setenv("NOTIFY_SOCKET", sock, 1);
	assert_int_equal(sd_notify_send("WATCHDOG=1"), 1);
	n = recv(fd, msg, sizeof(msg) - 1, 0);
	assert_int_equal(n, 10);
	close(fd);
	setenv("NOTIFY_SOCKET", "relative", 1);
	assert_true(sd_notify_send("READY=1") < 0);
	unsetenv("NOTIFY_SOCKET");

	unsetenv("WATCHDOG_PID");
	setenv("WATCHDOG_USEC", "20000000", 1);
	assert_int_equal(sd_notify_watchdog_usec(), 20000000);
	setenv("WATCHDOG_PID", "1", 1); /* another process's */
	assert_int_equal(sd_notify_watchdog_usec(), 0);
	snprintf(msg, sizeof(msg), "%d", getpid());
	setenv("WATCHDOG_PID", msg, 1);
	assert_int_equal(sd_notify_watchdog_usec(), 20000000);
	setenv("WATCHDOG_USEC", "soon", 1);
	assert_int_equal(sd_notify_watchdog_usec(), 0);
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_head_and_errors), cmocka_unit_test(test_slow_clients),
		cmocka_unit_test(test_request_parser),	    cmocka_unit_test(test_listen_errors),
		cmocka_unit_test(test_sd_notify),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
