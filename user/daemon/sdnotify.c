// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/sdnotify.h"

int sd_notify_send(const char *fmt, ...)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char msg[256];
	socklen_t salen;
	va_list ap;
	size_t len;
	ssize_t n;
	int fd;

	if (!path || !path[0])
		return 0;
	len = strlen(path);
	/* a path, or '@' for the abstract namespace */
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = 0;
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/'));
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(msg))
		return -EMSGSIZE;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	n = sendto(fd, msg, (size_t)n, MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
	if (n < 0)
		n = -errno;
	close(fd);
	return n < 0 ? (int)n : 1;
}

uint64_t sd_notify_watchdog_usec(void)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	unsigned long long v;
	char *end;

	if (!usec)
		return 0;
	/* set for our parent, not us: not ours to answer */
	if (pid && strtol(pid, NULL, 10) != getpid())
		return 0;
	errno = 0;
	v = strtoull(usec, &end, 10);
	if (errno || *end || end == usec)
		return 0;
	return v;
}
