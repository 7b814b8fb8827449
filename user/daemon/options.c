// SPDX-License-Identifier: GPL-2.0-only
#include <argp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "attach/devfilter.h"
#include "attach/driver.h"
#include "attach/vfio_files.h"
#include "base/args.h"
#include "daemon/control.h"
#include "daemon/http.h"
#include "daemon/kubelet.h"
#include "daemon/options.h"

#define NS 1000000000ull

enum {
	OPT_LISTEN = 1000,
	OPT_DEVICE,
	OPT_RUNTIME_DIR,
	OPT_STATE_DIR,
	OPT_REC_SECONDS,
	OPT_REC_MIB,
	OPT_NO_REC,
	OPT_SPOOL_MIB,
	OPT_WINDOW,
	OPT_SAMPLE_EVERY,
	OPT_NO_SAMPLING,
	OPT_TRIG_ERRORS,
	OPT_TRIG_SLOW,
	OPT_TRIG_EVERY,
	OPT_TRIG_BEFORE,
	OPT_NO_TRIGGERS,
	OPT_KUBELET,
	OPT_KUBELET_RES,
	OPT_NO_KUBELET,
	OPT_DRIVER,
	OPT_VFIO_PATH,
	OPT_REC_SHARE,
	OPT_BUFFER,
	OPT_SAMPLE_IOCTLS
};

/* A duration option: "30s", "10m", "250ms"; within [min, max] seconds. */
static double duration_arg(struct argp_state *state, const char *flag, const char *arg, double min, double max,
			   const char *hint)
{
	double v;

	if (arg_parse_duration(arg, &v) || v < min || v > max)
		argp_error(state, "invalid %s '%s'; hint: %s", flag, arg, hint);
	return v;
}

static unsigned long count_arg(struct argp_state *state, const char *flag, const char *arg, unsigned long min,
			       unsigned long max)
{
	unsigned long v = 0;

	if (arg_parse_count(arg, min, max, &v))
		argp_error(state, "invalid %s '%s'; hint: %lu to %lu", flag, arg, min, max);
	return v;
}

_Static_assert(SBT_MAX_MOCK_DIRS <= SBT_MAX_VFIO_PATHS, "each --vfio-path has its pointer in rec");

static error_t parse(int key, char *arg, struct argp_state *state)
{
	struct daemon_opts *o = state->input;
	struct record_opts *r = &o->rec;
	char err[256];

	switch (key) {
	case OPT_LISTEN: {
		struct sockaddr_storage ss;

		if (http_parse_listen(arg, &ss))
			argp_error(state, "--listen '%s' is not ADDR:PORT; hint: 127.0.0.1:9464", arg);
		o->listen = arg;
		break;
	}
	case OPT_DEVICE:
		if (devfilter_add_arg(&r->devices, &o->every_device, arg, err, sizeof(err)))
			argp_error(state, "%s", err);
		break;
	case OPT_RUNTIME_DIR:
	case OPT_STATE_DIR:
		if (arg[0] != '/')
			argp_error(state, "%s '%s': give an absolute path",
				   key == OPT_STATE_DIR ? "--state-dir" : "--runtime-dir", arg);
		*(key == OPT_STATE_DIR ? &o->state_dir : &o->runtime_dir) = arg;
		break;
	case OPT_REC_SECONDS:
		o->recorder_seconds =
			duration_arg(state, "--recorder-seconds", arg, 1, 86400, "1 to 86400 (or 2m, 1h)");
		break;
	case OPT_REC_MIB: o->recorder_mib = count_arg(state, "--recorder-mib", arg, 1, 65536); break;
	case OPT_REC_SHARE:
		(void)arg;
		argp_error(state,
			   "--recorder-share is gone: a process or user alone may fill the recorder, and a "
			   "full one evicts the oldest records of the user holding the most; hint: leave it out");
		break;
	case OPT_NO_REC: o->recorder_seconds = 0; break;
	case OPT_BUFFER:
		if (arg_parse_size(arg, &r->buffer_size) || r->buffer_size < 4096 || r->buffer_size > (1ul << 30))
			argp_error(state, "invalid --buffer-size '%s'; hint: 4K to 1G, e.g. 32M", arg);
		break;
	case OPT_SPOOL_MIB: o->spool_mib = count_arg(state, "--spool-mib", arg, 1, 1 << 24); break;
	case OPT_WINDOW:
		o->window_seconds = duration_arg(state, "--window-seconds", arg, 0.1, CONTROL_MAX_WINDOW_SECONDS,
						 "0.1 to 3600 (or 30s, 2m)");
		break;
	case OPT_SAMPLE_EVERY:
		o->sample_every = duration_arg(state, "--sample-every", arg, 1, 7 * 86400, "10m, 1h, 30s");
		break;
	case OPT_NO_SAMPLING: o->sample_every = 0; break;
	case OPT_SAMPLE_IOCTLS: {
		unsigned long n = count_arg(state, "--sample-ioctls", arg, 1, DAEMON_MAX_SAMPLE_IOCTLS);

		if (n & (n - 1))
			argp_error(state, "--sample-ioctls %lu is not a power of two; hint: 1, 2, 4, ... %d", n,
				   DAEMON_MAX_SAMPLE_IOCTLS);
		o->rec.daemon_sample_ioctls = (unsigned)n;
		break;
	}
	case OPT_TRIG_ERRORS: o->trig.errors = count_arg(state, "--trigger-errors", arg, 0, 1ul << 40); break;
	case OPT_TRIG_SLOW:
		o->trig.slow_ns = strcmp(arg, "0") ? (uint64_t)(duration_arg(state, "--trigger-slow", arg, 1e-6, 3600,
									     "1s, 250ms, or 0 for off") *
								1e9)
						   : 0;
		break;
	case OPT_TRIG_EVERY:
		o->trig.interval_ns =
			(uint64_t)(duration_arg(state, "--trigger-every", arg, 1, 7 * 86400, "10m, 1h") * 1e9);
		break;
	case OPT_TRIG_BEFORE:
		o->trigger_before = duration_arg(state, "--trigger-before", arg, 1, 86400, "30s, 2m");
		break;
	case OPT_KUBELET:
		if (arg[0] != '/')
			argp_error(state, "--kubelet-socket '%s': give an absolute path", arg);
		o->kubelet_socket = arg;
		break;
	case OPT_KUBELET_RES: o->kubelet_resource = arg; break;
	case OPT_NO_KUBELET: o->kubelet_socket = NULL; break;
	case OPT_DRIVER:
		if ((r->driver_mode = driver_mode_parse(arg)) < 0)
			argp_error(state, "unknown --driver-probes '%s'; hint: auto, fentry, kprobe or off", arg);
		break;
	case OPT_NO_TRIGGERS:
		o->trig.errors = o->trig.slow_ns = 0;
		o->trig.lost = false;
		break;
	case OPT_VFIO_PATH:
		if (r->nvfio_paths == SBT_MAX_MOCK_DIRS)
			argp_error(state, "too many --vfio-path (at most %d)", SBT_MAX_MOCK_DIRS);
		if (vfio_dir_arg(arg, o->vfio_dirs[r->nvfio_paths], sizeof(o->vfio_dirs[0]), err, sizeof(err)))
			argp_error(state, "%s", err);
		r->vfio_paths[r->nvfio_paths] = o->vfio_dirs[r->nvfio_paths];
		r->nvfio_paths++;
		break;
	case 'v': r->verbose++; break;
	case ARGP_KEY_ARG: argp_error(state, "unexpected argument '%s'", arg); break;
	case ARGP_KEY_END:
		if (devfilter_finish(&r->devices, o->every_device, err, sizeof(err)))
			argp_error(state, "%s", err);
		if (o->sample_every && o->sample_every < o->window_seconds)
			argp_error(state,
				   "--sample-every %g s is shorter than --window-seconds %g s; hint: "
				   "a window at most once a period",
				   o->sample_every, o->window_seconds);
		break;
	default: return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

void daemon_parse_opts(int argc, char **argv, struct daemon_opts *o)
{
	static const struct argp_option options[] = {
		{ "listen", OPT_LISTEN, "ADDR:PORT", 0, "serve /metrics and /healthz here (default " DEFAULT_LISTEN ")",
		  0 },
		{ "device", OPT_DEVICE, "BDF|VID:DID|all", 0,
		  "the cards to watch (repeatable; default Spyre's 1014:06a7, 1014:06a8)", 0 },
		{ "runtime-dir", OPT_RUNTIME_DIR, "DIR", 0,
		  "the control socket's directory (default " CONTROL_DEFAULT_DIR ")", 0 },
		{ "state-dir", OPT_STATE_DIR, "DIR", 0, "snapshots go to DIR/snapshots (default " DEFAULT_STATE_DIR ")",
		  0 },
		{ "spool-mib", OPT_SPOOL_MIB, "M", 0,
		  "the spool holds at most M MiB of snapshots, the oldest removed (default 1024)", 0 },
		{ "recorder-seconds", OPT_REC_SECONDS, "T", 0,
		  "the flight recorder keeps the last T seconds (default 120)", 0 },
		{ "recorder-mib", OPT_REC_MIB, "M", 0,
		  "the flight recorder holds at most M MiB, taken as used (default 64)", 0 },
		{ "recorder-share", OPT_REC_SHARE, "PCT", OPTION_HIDDEN, "gone: said as an error", 0 },
		{ "buffer-size", OPT_BUFFER, "SIZE", 0,
		  "the kernel's ring buffer to the flight recorder, e.g. 32M "
		  "(default 8M; rounded up to a power of two): larger when spyre_bpftrace_ring_buffer_peak_bytes "
		  "nears it",
		  0 },
		{ "no-recorder", OPT_NO_REC, NULL, 0,
		  "no flight recorder, hence no windows, snapshots or triggers: "
		  "nothing per event to user space",
		  0 },
		{ "window-seconds", OPT_WINDOW, "W", 0, "a sampled or triggered detail window lasts W (default 10s)",
		  0 },
		{ "sample-every", OPT_SAMPLE_EVERY, "P", 0,
		  "one detail window at a random time of every P (default 10m)", 0 },
		{ "no-sampling", OPT_NO_SAMPLING, NULL, 0,
		  "no sampled windows: uprobes only on a trigger or ctl record", 0 },
		{ "sample-ioctls", OPT_SAMPLE_IOCTLS, "N", 0,
		  "time and record 1 in N VFIO ioctls (a power of two; default " DAEMON_SAMPLE_IOCTLS_S
		  "; 1: all): counts, errors, DMA bytes and slow ones stay exact; DMA map and unmap, IRQ setup, "
		  "slow ones, failures (up to 256 a second a process) and ioctls in a detail window are always "
		  "recorded",
		  0 },
		{ "trigger-errors", OPT_TRIG_ERRORS, "N", 0,
		  "N failed VFIO ioctls within 5 s trigger a snapshot (default 20; 0: off)", 0 },
		{ "trigger-slow", OPT_TRIG_SLOW, "D", 0, "a VFIO ioctl slower than D triggers one (default 1s; 0: off)",
		  0 },
		{ "trigger-every", OPT_TRIG_EVERY, "D", 0,
		  "the same trigger at most once in D (default 10m); records lost trigger too", 0 },
		{ "trigger-before", OPT_TRIG_BEFORE, "D", 0, "a trigger's snapshot starts D before it (default 30s)",
		  0 },
		{ "no-triggers", OPT_NO_TRIGGERS, NULL, 0, "no automatic snapshots", 0 },
		{ "kubelet-socket", OPT_KUBELET, "PATH", 0,
		  "the kubelet's pod-resources socket, for "
		  "spyre_device_allocation_info (default " KUBELET_DEFAULT_SOCKET ")",
		  0 },
		{ "kubelet-resource", OPT_KUBELET_RES, "GLOB", 0,
		  "the device plugin's resource names that are "
		  "Spyre cards (default ibm.com/*)",
		  0 },
		{ "no-kubelet", OPT_NO_KUBELET, NULL, 0, "do not ask the kubelet", 0 },
		{ "driver-probes", OPT_DRIVER, "MODE", 0,
		  "count vfio's own functions: auto (fentry, else "
		  "kprobes, where the kernel allows), fentry, kprobe or off (default auto)",
		  0 },
		{ "vfio-path", OPT_VFIO_PATH, "DIR", 0,
		  "files below DIR count as VFIO files, by their names "
		  "(the simulator's mock files; repeatable). Otherwise only files whose ioctls go to vfio's "
		  "own handlers count",
		  0 },
		{ "verbose", 'v', NULL, 0, "print the attach plan (why no fentry), the cards, the windows", 0 },
		{ 0 }
	};
	static const struct argp argp = {
		options,
		parse,
		NULL,
		"Watch every Spyre card on this host, always, at a cost nobody notices: VFIO "
		"ioctls by command (counts, errors, latency histograms), DMA mapping bytes, "
		"pinned bytes and interrupts per card, vfio's own functions where the kernel "
		"allows, summed in the kernel and served to "
		"Prometheus on /metrics; the last minutes of those kernel events in a flight "
		"recorder. A detail window (runtime uprobes on the processes that hold a card) "
		"opens for W seconds at a random time of every period, on a trigger (failed or "
		"slow VFIO ioctls, records lost: then a snapshot goes to the spool), and on `ctl "
		"record`; `ctl snapshot` writes any recent window. Runs until SIGTERM; SIGHUP "
		"looks again for cards and processes.\n\nEXAMPLES:\n"
		"  spyre-bpftrace daemon\n"
		"  spyre-bpftrace daemon --listen 127.0.0.1:9464 --device 0000:3b:00.0\n"
		"  spyre-bpftrace daemon --window-seconds 5 --sample-every 30m\n"
		"  curl -s 127.0.0.1:9464/metrics | grep spyre_vfio_ioctls_total\n"
		"  spyre-bpftrace ctl snapshot --last 30s -o last.pftrace",
		NULL,
		NULL,
		NULL
	};
	*o = (struct daemon_opts){
		.listen = DEFAULT_LISTEN,
		.runtime_dir = CONTROL_DEFAULT_DIR,
		.state_dir = DEFAULT_STATE_DIR,
		.recorder_seconds = 120,
		.recorder_mib = 64,
		.spool_mib = 1024,
		.window_seconds = 10,
		.sample_every = 600,
		.trigger_before = 30,
		.trig = { .errors = 20, .slow_ns = NS, .lost = true, .interval_ns = 600 * NS },
		.kubelet_socket = KUBELET_DEFAULT_SOCKET,
		.kubelet_resource = "ibm.com/*",
	};
	o->rec.buffer_size = 8 << 20; /* a few records per job; runtime calls in windows */
	o->rec.max_probes = SBT_DEFAULT_MAX_PROBES;
	o->rec.driver_mode = DRIVER_AUTO;
	o->rec.daemon = true;
	o->rec.daemon_sample_ioctls = DAEMON_SAMPLE_IOCTLS;
	argp_parse(&argp, argc, argv, 0, NULL, o);
	o->rec.daemon_record = o->recorder_seconds > 0;
	o->rec.daemon_slow_ns = o->trig.slow_ns;
}
