// SPDX-License-Identifier: GPL-2.0-only
/*
 * `spyre-bpftrace inspect TRACE`: decode a Perfetto TrackEvent trace (ours
 * or any other) and check what the viewer does not: framing, sequence flags
 * and interning, that every event's track is described, that every slice
 * ends, that slices on a track nest or are disjoint and never partly
 * overlap, that flows connect existing events, and that timestamps are
 * sane. Prints what it found; exits 1 on any violation.
 */
#include <argp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/pb.h"
#include "capture/capture.h"
#include "commands.h"
#include "offline/inspector.h"

/* One top-level field of the file: a packet, or the end of the checks. */
static bool top_field(struct inspector *in, uint32_t f, int t, const uint8_t *d, size_t len, size_t at)
{
	in->packet++;
	if (f != 1 || t != PB_LEN) {
		violation(in, "at byte %zu: field %u of wire type %d where a packet belongs", at, f, t);
		return false;
	}
	in->res->packets++;
	inspect_read_packet(in, d, len);
	return true;
}

int inspect_buffer(const uint8_t *data, size_t len, struct inspect_result *res)
{
	struct inspector in;
	struct pb_reader r = pb_reader_of(data, len);
	struct pb_field f;
	int ret;

	inspect_begin(&in, res);
	while ((ret = pb_next(&r, &f)) > 0)
		if (!top_field(&in, f.num, f.type, f.d, f.len, (size_t)(r.p - data)))
			break;
	return inspect_end(&in, len, ret < 0);
}

#define MAX_PACKET (64u << 20)

/* The framing of a top-level field at p (n bytes there): 1 when it is all
 * there (hdr: the bytes of its key and length; a field without a length is
 * 1 with len 0, for the caller to reject), 0 when more bytes are needed,
 * -1 when it is no protobuf field at all. */
static int top_frame(const uint8_t *p, size_t n, uint32_t *f, int *t, size_t *hdr, uint64_t *len)
{
	uint64_t key, body;
	size_t a, b;
	int r;

	*hdr = 0;
	*len = 0;
	if ((r = pb_peek_varint(p, n, &key, &a)) <= 0)
		return r;
	if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff)
		return -1;
	*f = (uint32_t)(key >> 3);
	*t = (int)(key & 7);
	if (*t != PB_LEN) {
		*hdr = a;
		return 1;
	}
	if ((r = pb_peek_varint(p + a, n - a, &body, &b)) <= 0)
		return r;
	*hdr = a + b;
	*len = body;
	return body <= n - a - b ? 1 : 0; /* 0 with hdr and len set: the body is to come */
}

/* The file read through a window, packet by packet: memory stays bounded
 * whatever its length, and a file cut while read just ends. */
int inspect_fd(int fd, struct inspect_result *res)
{
	size_t cap = 1u << 20, len = 0, off = 0, total = 0;
	uint8_t *buf = malloc(cap);
	struct inspector in;
	bool eof = false, cut = false;

	inspect_begin(&in, res);
	if (!buf) {
		violation(&in, "out of memory");
		return inspect_end(&in, 0, false);
	}
	for (;;) {
		uint32_t f;
		int t, got;
		size_t hdr, need;
		uint64_t plen;

		got = top_frame(buf + off, len - off, &f, &t, &hdr, &plen);
		if (got < 0) {
			violation(&in, "at byte %zu: no packet field (or not a Perfetto trace)", total + off);
			break;
		}
		if (got > 0) { /* a whole field in the window */
			if (!top_field(&in, f, t, buf + off + hdr, (size_t)plen, total + off))
				break;
			off += hdr + (size_t)plen;
			continue;
		}
		if (hdr && plen > MAX_PACKET) {
			violation(&in, "at byte %zu: a packet of %llu bytes (more than %u MiB)", total + off,
				  (unsigned long long)plen, MAX_PACKET >> 20);
			break;
		}
		if (eof) {
			cut = off < len;
			break;
		}
		/* read more: what is left to the front, then the rest of the window,
		 * grown when one packet is larger than it */
		need = len - off;
		memmove(buf, buf + off, need);
		total += off;
		len = need;
		off = 0;
		if (len == cap) {
			uint8_t *grown = cap < MAX_PACKET ? realloc(buf, cap * 2) : NULL;

			if (!grown) {
				violation(&in, "a packet larger than %u MiB", MAX_PACKET >> 20);
				break;
			}
			buf = grown;
			cap *= 2;
		}
		while (len < cap) {
			ssize_t n = read(fd, buf + len, cap - len);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				eof = true;
				break;
			}
			len += (size_t)n;
		}
	}
	free(buf);
	return inspect_end(&in, total + len, cut);
}

static const char inspect_doc[] =
	"Check a Perfetto trace: framing, sequence flags and interning, track descriptors, "
	"that every slice ends, that slices nest and never partly overlap, flows, timestamps.\n"
	"\n"
	"EXAMPLES:\n"
	"  spyre-bpftrace inspect run.pftrace";

static error_t inspect_parse(int key, char *arg, struct argp_state *state)
{
	const char **file = state->input;

	if (key == ARGP_KEY_ARG) {
		if (*file)
			argp_error(state, "one trace at a time");
		*file = arg;
	} else if (key == ARGP_KEY_END && !*file) {
		argp_error(state, "no trace; hint: spyre-bpftrace inspect FILE.pftrace");
	} else {
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* A capture or a JSON trace given to inspect: said with what to run,
 * rather than checked as a Perfetto trace it is not. (A file that cannot
 * be read from its start, a pipe say, is checked as it comes.) */
static bool not_perfetto(int fd, const char *file)
{
	char head[8];

	if (pread(fd, head, sizeof(head), 0) != (ssize_t)sizeof(head))
		return false;
	if (!memcmp(head, SBT_MAGIC, sizeof(head))) {
		sbt_err("'%s' is a spyre-bpftrace capture, not a Perfetto trace; hint: spyre-bpftrace convert %s "
			"-o trace.pftrace, then inspect trace.pftrace (or report %s)",
			file, file, file);
	} else if (head[0] == '{' || head[0] == '[') {
		sbt_err("'%s' is a JSON trace; inspect checks Perfetto traces; hint: open it in "
			"https://ui.perfetto.dev, or write a .pftrace with -o",
			file);
	} else {
		return false;
	}
	close(fd);
	return true;
}

int cmd_inspect(int argc, char **argv)
{
	static const struct argp_option none[] = { { 0 } };
	static const struct argp argp = { none, inspect_parse, "TRACE", inspect_doc, NULL, NULL, NULL };
	struct inspect_result res = { .out = stdout };
	const char *file = NULL;
	struct stat st;
	int fd;

	argp_parse(&argp, argc, argv, 0, NULL, &file);
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		sbt_err("cannot read '%s': %s", file, strerror(errno));
		return 1;
	}
	if (not_perfetto(fd, file))
		return 1;
	printf("%s:\n", file);
	/* read, not mapped: a file cut while read ends short instead of killing
	 * us with SIGBUS; /proc files (size 0) and devices read too */
	inspect_fd(fd, &res);
	close(fd);
	if (res.violations > MAX_SHOWN)
		printf("  ... and %llu more violations\n", (unsigned long long)(res.violations - MAX_SHOWN));
	printf("  %llu packets, %llu tracks, %llu slices, %llu instants, %llu counter values, "
	       "%llu flows, %llu clock snapshots, %llu lost-data marks\n",
	       (unsigned long long)res.packets, (unsigned long long)res.tracks, (unsigned long long)res.slices,
	       (unsigned long long)res.instants, (unsigned long long)res.counters, (unsigned long long)res.flows,
	       (unsigned long long)res.clock_snapshots, (unsigned long long)res.drop_marks);
	if (res.dangling_flows)
		printf("  note: %llu flows have one end; the trace marks lost data, which explains them\n",
		       (unsigned long long)res.dangling_flows);
	if (res.violations)
		printf("  FAILED: %llu violations\n", (unsigned long long)res.violations);
	else
		printf("  ok: framing, sequence flags and interning, tracks, slice nesting, flows, "
		       "timestamps\n");
	return res.violations ? 1 : 0;
}
