// SPDX-License-Identifier: GPL-2.0-only
#include <argp.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/args.h"
#include "base/log.h"
#include "base/outfile.h"
#include "daemon/control.h"

static int socket_path(const char *dir, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (snprintf(a->sun_path, sizeof(a->sun_path), "%s/%s", dir, CONTROL_SOCKET) >= (int)sizeof(a->sun_path))
		return -1;
	return 0;
}

/* The runtime directory's lock, held for the daemon's life: one daemon a
 * directory, and the socket in it is the holder's alone. The holder's pid
 * is written in it, for the error another daemon gives. */
static int lock_dir(const char *dir, char *err, size_t errlen)
{
	char path[PATH_MAX], pid[32] = "";
	int fd, n;

	if (snprintf(path, sizeof(path), "%s/%s", dir, CONTROL_LOCK) >= (int)sizeof(path)) {
		snprintf(err, errlen, "--runtime-dir '%s' is too long", dir);
		return -1;
	}
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		n = (int)pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		snprintf(err, errlen,
			 "another daemon%s%s%s serves --runtime-dir %s; hint: stop it, or give this one "
			 "another --runtime-dir",
			 pid[0] ? " (PID " : "", pid, pid[0] ? ")" : "", dir);
		close(fd);
		return -1;
	}
	n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) || pwrite(fd, pid, (size_t)n, 0) != n) {
		/* the pid is for the message only */
	}
	return fd;
}

int control_listen(const char *dir, int *lock_fd, char *err, size_t errlen)
{
	struct sockaddr_un a;
	int fd;

	if (socket_path(dir, &a)) {
		snprintf(err, errlen, "--runtime-dir '%s' is too long for a socket path", dir);
		return -1;
	}
	if (outfile_private_dir(dir, "--runtime-dir", err, errlen))
		return -1;
	if ((*lock_fd = lock_dir(dir, err, errlen)) < 0)
		return -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(err, errlen, "cannot make the control socket: %s", strerror(errno));
		close(*lock_fd);
		*lock_fd = -1;
		return -1;
	}
	/* a daemon before us that did not stop cleanly: it holds the lock no more */
	unlink(a.sun_path);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || chmod(a.sun_path, 0600) || listen(fd, 8)) {
		snprintf(err, errlen, "cannot listen on %s: %s", a.sun_path, strerror(errno));
		close(fd);
		close(*lock_fd);
		*lock_fd = -1;
		return -1;
	}
	return fd;
}

/* A path of a request: "-" (the spool: "") or absolute, no control
 * characters. 0, or -1. */
static bool has_control_char(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

static int request_path(const char *s, char *path, size_t len)
{
	if (has_control_char(s))
		return -1;
	if (!strcmp(s, "-"))
		s = "";
	else if (s[0] != '/')
		return -1;
	return snprintf(path, len, "%s", s) >= (int)len ? -1 : 0;
}

/* A number and the one space after it, the rest of the line in *rest;
 * with rest NULL, a number that ends the line. */
static int number(const char *s, bool integer, double *d, unsigned long long *u, const char **rest)
{
	char *end;

	if (!(s[0] >= '0' && s[0] <= '9'))
		return -1;
	errno = 0;
	if (integer)
		*u = strtoull(s, &end, 10);
	else
		*d = strtod(s, &end);
	if (errno || end == s || *end != (rest ? ' ' : '\0'))
		return -1;
	if (rest)
		*rest = end + 1;
	return 0;
}

int control_parse_request(const char *line, struct control_request *r, char *err, size_t errlen)
{
	unsigned long long from = 0, to = 0;
	const char *rest;

	memset(r, 0, sizeof(*r));
	if (!strcmp(line, "status")) {
		r->verb = CONTROL_STATUS;
		return 0;
	}
	if (!strncmp(line, "record ", 7) && !number(line + 7, false, &r->seconds, NULL, &rest) &&
	    !request_path(rest, r->path, sizeof(r->path))) {
		r->verb = CONTROL_RECORD;
		if (r->seconds > 0 && r->seconds <= CONTROL_MAX_WINDOW_SECONDS)
			return 0;
		snprintf(err, errlen, "error: a window is 0.1 to %d s; hint: ctl record --seconds 10\n",
			 CONTROL_MAX_WINDOW_SECONDS);
		return -1;
	}
	if (!strncmp(line, "snapshot ", 9) && !number(line + 9, true, NULL, &from, &rest) &&
	    !number(rest, true, NULL, &to, &rest) && from <= to && !request_path(rest, r->path, sizeof(r->path))) {
		r->verb = CONTROL_SNAPSHOT;
		r->from = from;
		r->to = to;
		if (to - from <= CONTROL_MAX_SNAPSHOT_SECONDS * 1000000000ull)
			return 0;
		snprintf(err, errlen,
			 "error: a snapshot is at most 24 h; hint: the recorder holds the last "
			 "--recorder-seconds only\n");
		return -1;
	}
	if (!strncmp(line, "cost ", 5) && !number(line + 5, false, &r->seconds, NULL, NULL)) {
		r->verb = CONTROL_COST;
		if (r->seconds >= 0.1 && r->seconds <= CONTROL_MAX_COST_SECONDS)
			return 0;
		snprintf(err, errlen, "error: a cost measure is 0.1 to %d s; hint: ctl cost --seconds 5\n",
			 CONTROL_MAX_COST_SECONDS);
		return -1;
	}
	snprintf(err, errlen,
		 "error: unknown request; hint: status, record SECONDS PATH, snapshot FROM TO PATH, cost SECONDS\n");
	return -1;
}

void control_reply(int cfd, const char *text)
{
	size_t left = strlen(text);

	while (left) {
		ssize_t n = write(cfd, text, left);

		if (n <= 0)
			break;
		text += n;
		left -= (size_t)n;
	}
	close(cfd);
}

bool control_peer_sees_same_dir(int cfd, const char *path)
{
	char dir[PATH_MAX], theirs[PATH_MAX + 32], *slash;
	struct ucred peer;
	socklen_t plen = sizeof(peer);
	struct stat a, b;

	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &peer, &plen) || peer.pid <= 0 ||
	    snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir) || !(slash = strrchr(dir, '/')))
		return true;
	slash[slash == dir] = 0; /* "/x" -> "/" */
	snprintf(theirs, sizeof(theirs), "/proc/%d/root%s", peer.pid, dir);
	if (stat(dir, &a))
		return true; /* the write fails, and says why */
	if (stat(theirs, &b))
		return errno != ENOENT; /* EACCES: cannot tell; ENOENT: they have no such directory */
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

void control_close(int lfd, int lock_fd, const char *dir)
{
	struct sockaddr_un a;

	if (lfd < 0)
		return;
	close(lfd);
	/* ours to remove: the lock says so; then the lock goes */
	if (lock_fd >= 0 && !socket_path(dir, &a))
		unlink(a.sun_path);
	if (lock_fd >= 0)
		close(lock_fd);
}

/* ---- spyre-bpftrace ctl ---------------------------------------------------- */

struct ctl_opts {
	const char *dir, *out, *what;
	double seconds, last; /* record's window; snapshot --last */
	uint64_t from, to; /* snapshot --from/--to: REALTIME ns; 0 unset */
};

enum { OPT_RUNTIME_DIR = 1000, OPT_SECONDS, OPT_LAST, OPT_FROM, OPT_TO };

/* A wall-clock time: seconds since the epoch (fractions allowed), or
 * 2026-12-02T21:30:00 in UTC (a trailing Z allowed). ns, 0 if neither. */
static uint64_t parse_time(const char *s)
{
	struct tm tm = { 0 };
	char *end;
	double v = strtod(s, &end);

	if (end != s && !*end && v > 0)
		return (uint64_t)(v * 1e9);
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end) { /* to the minute */
		memset(&tm, 0, sizeof(tm));
		end = strptime(s, "%Y-%m-%dT%H:%M", &tm);
	}
	if (!end || (*end && strcmp(end, "Z")))
		return 0;
	return (uint64_t)timegm(&tm) * 1000000000ull;
}

static error_t ctl_parse(int key, char *arg, struct argp_state *state)
{
	struct ctl_opts *o = state->input;

	switch (key) {
	case OPT_RUNTIME_DIR: o->dir = arg; break;
	case 'o':
		if (o->out)
			argp_error(state, "-o given twice; hint: one output a request");
		o->out = arg;
		break;
	case OPT_SECONDS:
		if (arg_parse_seconds(arg, &o->seconds) || o->seconds > CONTROL_MAX_WINDOW_SECONDS)
			argp_error(state, "invalid --seconds '%s'; hint: 0.1 to %d (cost: to %d)", arg,
				   CONTROL_MAX_WINDOW_SECONDS, CONTROL_MAX_COST_SECONDS);
		break;
	case OPT_LAST:
		if (arg_parse_duration(arg, &o->last))
			argp_error(state, "invalid --last '%s'; hint: 30s, 2m, 1h", arg);
		break;
	case OPT_FROM:
	case OPT_TO:
		if (!(*(key == OPT_FROM ? &o->from : &o->to) = parse_time(arg)))
			argp_error(state,
				   "invalid time '%s'; hint: seconds since the epoch, or "
				   "2026-12-02T21:30:00 (UTC)",
				   arg);
		break;
	case ARGP_KEY_ARG:
		if (o->what)
			argp_error(state, "one request at a time");
		if (strcmp(arg, "status") && strcmp(arg, "record") && strcmp(arg, "snapshot") && strcmp(arg, "cost"))
			argp_error(state, "unknown request '%s'; hint: status, record, snapshot or cost", arg);
		o->what = arg;
		break;
	case ARGP_KEY_END:
		if (!o->what)
			argp_error(state, "no request; hint: ctl status, ctl record --seconds 10");
		if (!strcmp(o->what, "record") && !o->seconds)
			argp_error(state, "record needs --seconds N");
		if (!strcmp(o->what, "cost") && !o->seconds)
			o->seconds = 5;
		if (!strcmp(o->what, "cost") && o->seconds > CONTROL_MAX_COST_SECONDS)
			argp_error(state, "cost measures at most %d s; hint: ctl cost --seconds 10",
				   CONTROL_MAX_COST_SECONDS);
		if (strcmp(o->what, "record") && strcmp(o->what, "snapshot") && o->out)
			argp_error(state, "-o is for record and snapshot");
		if (!strcmp(o->what, "snapshot") && !o->last == !(o->from && o->to))
			argp_error(state, "snapshot needs --last DURATION, or --from T0 and --to T1");
		if (o->from && o->to && o->from > o->to)
			argp_error(state, "--from is after --to");
		break;
	default: return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* The trace's file, absolute (the daemon writes it, from its own cwd);
 * "-" without -o: the daemon puts it in its spool and says where. */
static int out_path(const struct ctl_opts *o, char *path, size_t len)
{
	char cwd[PATH_MAX];

	if (!o->out)
		return snprintf(path, len, "-") >= (int)len ? -1 : 0;
	if (o->out[0] == '/')
		return snprintf(path, len, "%s", o->out) >= (int)len ? -1 : 0;
	if (!getcwd(cwd, sizeof(cwd)))
		return -1;
	return snprintf(path, len, "%s/%s", cwd, o->out) >= (int)len ? -1 : 0;
}

int cmd_ctl(int argc, char **argv)
{
	static const struct argp_option options[] = {
		{ "runtime-dir", OPT_RUNTIME_DIR, "DIR", 0,
		  "the daemon's runtime directory (default " CONTROL_DEFAULT_DIR ")", 0 },
		{ "seconds", OPT_SECONDS, "N", 0, "record: how long the window is; cost: how long to measure (5)", 0 },
		{ "output", 'o', "FILE", 0,
		  "the trace (.pftrace, .json or .sbt; default: in the daemon's spool, STATE_DIR/snapshots)", 0 },
		{ "last", OPT_LAST, "DURATION", 0, "snapshot: the last DURATION (30s, 2m)", 0 },
		{ "from", OPT_FROM, "T0", 0,
		  "snapshot: from this wall-clock time (epoch seconds, 2026-12-02T21:30:00 or 2026-12-02T21:30; UTC)",
		  0 },
		{ "to", OPT_TO, "T1", 0, "snapshot: to this one", 0 },
		{ 0 }
	};
	static const struct argp argp = {
		options,
		ctl_parse,
		"status | record --seconds N [-o FILE] | snapshot --last D | --from T0 --to T1 [-o FILE] | "
		"cost [--seconds N]",
		"Talk to a running spyre-bpftrace daemon: its status; a detailed window "
		"recorded now (runtime calls by uprobes, ioctls, DMA, interrupts, device jobs) of "
		"the processes that hold a Spyre card; or a snapshot of its flight recorder (the "
		"kernel events of the last minutes), each returned as a trace (with a manifest for "
		"a snapshot). The same absolute --from/--to asked of every host of a job gives "
		"traces that merge into one. cost: what the daemon's BPF programs cost, measured now "
		"by the kernel (its statistics on for those seconds only: every BPF program of the "
		"host pays meanwhile).\n\nEXAMPLES:\n"
		"  spyre-bpftrace ctl status\n"
		"  spyre-bpftrace ctl cost --seconds 10\n"
		"  spyre-bpftrace ctl record --seconds 10 -o window.pftrace\n"
		"  spyre-bpftrace ctl snapshot --last 30s   # into the daemon's spool\n"
		"  spyre-bpftrace ctl snapshot --last 2m -o last.pftrace\n"
		"  spyre-bpftrace ctl snapshot --from 2026-12-02T21:30 --to 2026-12-02T21:31",
		NULL,
		NULL,
		NULL
	};
	struct ctl_opts o = { .dir = CONTROL_DEFAULT_DIR };
	char req[CONTROL_LINE + 64], path[CONTROL_LINE - 64], buf[8192];
	struct sockaddr_un a;
	size_t got = 0;
	ssize_t n;
	int fd, werr = 0;

	argp_parse(&argp, argc, argv, 0, NULL, &o);
	bool file = !strcmp(o.what, "record") || !strcmp(o.what, "snapshot");

	if (file && out_path(&o, path, sizeof(path))) {
		sbt_err("cannot name the output file; hint: give -o /ABSOLUTE/PATH");
		return 2;
	}
	if (file && has_control_char(path)) {
		sbt_err("-o '%s' has a control character; hint: name the file without one", o.out);
		return 2;
	}
	if (!strcmp(o.what, "record")) {
		snprintf(req, sizeof(req), "record %.3f %s\n", o.seconds, path);
	} else if (!strcmp(o.what, "snapshot")) {
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		if (o.last) {
			o.to = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
			o.from = o.to - (uint64_t)(o.last * 1e9);
		}
		snprintf(req, sizeof(req), "snapshot %llu %llu %s\n", (unsigned long long)o.from,
			 (unsigned long long)o.to, path);
	} else if (!strcmp(o.what, "cost")) {
		snprintf(req, sizeof(req), "cost %.3f\n", o.seconds);
	} else {
		snprintf(req, sizeof(req), "status\n");
	}
	if (socket_path(o.dir, &a) || (fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		sbt_err("cannot make a socket: %s", strerror(errno));
		return 1;
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		sbt_err("no daemon at %s: %s; hint: is spyre-bpftrace daemon running (--runtime-dir)?", a.sun_path,
			strerror(errno));
		close(fd);
		return 1;
	}
	/* a daemon that refuses may answer and close while we write: its
	 * answer says why, so read it whatever the write did */
	if (send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req))
		werr = errno;
	while (got + 1 < sizeof(buf) && (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = 0;
	close(fd);
	if (!got && werr) {
		sbt_err("cannot talk to the daemon: %s", strerror(werr));
		return 1;
	}
	if (strncmp(buf, "ok", 2)) {
		buf[strcspn(buf, "\n")] = 0;
		sbt_err("%s", !strncmp(buf, "error: ", 7) ? buf + 7 : buf[0] ? buf : "the daemon did not answer");
		return 1;
	}
	fputs(buf, stdout);
	return 0;
}
