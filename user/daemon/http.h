/* SPDX-License-Identifier: GPL-2.0-only */
/* A small HTTP/1.1 server for the daemon's /metrics and /healthz: its own
 * thread, many connections at once, none able to hold the others; GET
 * only, a page made per request. No TLS, no authentication (docs/daemon.md). */
#ifndef SBT_HTTP_H
#define SBT_HTTP_H

#include <stdbool.h>
#include <stddef.h>

struct http_server;
struct sockaddr_storage;

/* "ADDR:PORT" to a socket address. 0, or -1. */
int http_parse_listen(const char *listen, struct sockaddr_storage *ss);

/* A request's head (NUL ended; changed in place): 0 with the path (no
 * query) in *url and HEAD or GET in *head, or the status to refuse it
 * with (400, 405). */
int http_parse_request(char *req, const char **url, bool *head);

/* Makes the page for url: malloc'd body (NULL: out of memory), status and
 * content type set. Called on the server's thread. */
typedef char *(*http_page_fn)(void *ctx, const char *url, unsigned *status, const char **type, size_t *len);

/* addr: "127.0.0.1:9464", "[::1]:9464" or ":9464" (all addresses).
 * NULL with err filled when it cannot listen. */
struct http_server *http_start(const char *addr, http_page_fn page, void *ctx, char *err, size_t errlen);
void http_stop(struct http_server *s);

#endif
