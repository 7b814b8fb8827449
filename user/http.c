// SPDX-License-Identifier: GPL-2.0-only
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

struct http_server {
	struct MHD_Daemon *d;
	http_page_fn page;
	void *ctx;
};

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_len, void **state)
{
	struct http_server *s = cls;
	struct MHD_Response *r;
	const char *type = "text/plain; charset=utf-8";
	unsigned status = MHD_HTTP_OK;
	enum MHD_Result ret;
	size_t len = 0;
	char *body;

	(void)version;
	(void)upload;
	(void)upload_len;
	(void)state;
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		static const char msg[] = "only GET\n";

		r = MHD_create_response_from_buffer(sizeof(msg) - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
		ret = MHD_queue_response(c, MHD_HTTP_METHOD_NOT_ALLOWED, r);
		MHD_destroy_response(r);
		return ret;
	}
	body = s->page(s->ctx, url, &status, &type, &len);
	if (!body)
		return MHD_NO; /* out of memory: the connection is closed */
	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
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

struct http_server *http_start(const char *listen, http_page_fn page, void *ctx, char *err,
			       size_t errlen)
{
	struct http_server *s;
	struct sockaddr_storage ss;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;

	if (http_parse_listen(listen, &ss)) {
		snprintf(err, errlen, "--listen '%s' is not ADDR:PORT; hint: 127.0.0.1:9464", listen);
		return NULL;
	}
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->page = page;
	s->ctx = ctx;
	errno = 0;
	s->d = MHD_start_daemon(flags, 0, NULL, NULL, answer, s, MHD_OPTION_SOCK_ADDR,
				(struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT, 32u,
				MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
	if (!s->d) {
		snprintf(err, errlen, "cannot listen on %s: %s; hint: is another daemon there? choose "
			 "another with --listen", listen, strerror(errno ? errno : EADDRINUSE));
		free(s);
		return NULL;
	}
	return s;
}

void http_stop(struct http_server *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->d);
	free(s);
}
