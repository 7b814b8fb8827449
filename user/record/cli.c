// SPDX-License-Identifier: GPL-2.0-only
#include <argp.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attach/driver.h"
#include "record/cli.h"

const char *argp_program_version = "spyre-bpftrace " SBT_VERSION;

static const char doc[] = "Trace a Spyre AI accelerator job from the kernel: runtime calls (uprobes), "
			  "VFIO ioctls, IOMMU DMA mappings and interrupts, with no change to the app.\n"
			  "\n"
			  "USAGE: spyre-bpftrace [record] {-p PID | -c CMD} [OPTIONS]\n"
			  "       spyre-bpftrace convert IN.sbt -o OUT.pftrace|OUT.json\n"
			  "       spyre-bpftrace report IN.sbt [--format text|json|csv]\n"
			  "       spyre-bpftrace diff BEFORE AFTER [--fail-if 'p99>+10%']\n"
			  "       spyre-bpftrace inspect TRACE.pftrace\n"
			  "       spyre-bpftrace dump IN.sbt\n"
			  "       spyre-bpftrace list LIB...\n"
			  "       spyre-bpftrace merge TORCH.json CAPTURE.sbt [MORE...] -o OUT\n"
			  "       spyre-bpftrace daemon [--listen ADDR:PORT]\n"
			  "       spyre-bpftrace ctl status | cost [--seconds N]\n"
			  "       spyre-bpftrace ctl record --seconds N [-o FILE]\n"
			  "       spyre-bpftrace ctl snapshot {--last D | --from T0 --to T1} [-o FILE]\n"
			  "\n"
			  "EXAMPLES:\n"
			  "  spyre-bpftrace -p 1234              # trace PID 1234 until Ctrl-C, into\n"
			  "                                      # spyre-bpftrace-1234.pftrace\n"
			  "  spyre-bpftrace -c './serve -m x'    # run and trace a command\n"
			  "  spyre-bpftrace -p 1234 -d 10 -o run.json  # ten seconds, Chrome JSON\n"
			  "  spyre-bpftrace -p 1234 -o run.sbt   # a raw capture, to convert later\n"
			  "  spyre-bpftrace -p 1234 -v           # print the attach plan too\n"
			  "  spyre-bpftrace -c ./app --probe libflex.so:'flex::Runtime*'\n"
			  "  spyre-bpftrace -c 'python3 train.py' -v  # which runtime libraries, why,\n"
			  "                                      # and each function's return sites\n"
			  "  spyre-bpftrace -c ./app --vfio-path '/tmp/mock/*'\n"
			  "  spyre-bpftrace -p 1234 --device 0000:3b:00.0  # one card only\n"
			  "  spyre-bpftrace convert run.sbt -o run.pftrace\n"
			  "  spyre-bpftrace report run.sbt       # the summary of a capture\n"
			  "  spyre-bpftrace diff main.sbt pr.sbt # two runs: what changed beyond noise\n"
			  "  spyre-bpftrace inspect run.pftrace  # check a Perfetto trace\n"
			  "  spyre-bpftrace dump run.sbt         # one event per line\n"
			  "  spyre-bpftrace list ./libflex.so    # what a library's probes would be\n"
			  "  spyre-bpftrace merge torch.json run.sbt -o run.pftrace  # with a PyTorch\n"
			  "                                      # profiler trace, one timeline\n"
			  "  spyre-bpftrace daemon               # always on: Prometheus metrics on\n"
			  "                                      # 127.0.0.1:9464/metrics\n"
			  "  spyre-bpftrace ctl snapshot --last 2m -o last.pftrace  # the daemon's\n"
			  "                                      # flight recorder, its last 2 minutes\n"
			  "\v"
			  "Needs root (or CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN) and a kernel with BTF. "
			  "See spyre-bpftrace(1) and docs/usage.md.";

enum {
	OPT_PROBE = 1000,
	OPT_VFIO_PATH,
	OPT_IRQ,
	OPT_BUFFER,
	OPT_FORMAT,
	OPT_DEVICE,
	OPT_DRIVER,
	OPT_MAX_PROBES,
	OPT_KEEP_COMMAND,
	OPT_NO_WAKE_HOOK,
	OPT_WAKE_HOOK
};

static const struct argp_option options[] = {
	{ "pid", 'p', "PID", 0, "Trace this process (repeatable; a thread id means its process)", 0 },
	{ "command", 'c', "CMD", 0, "Run CMD (split like a shell, no shell) and trace it", 0 },
	{ "duration", 'd', "SECONDS", 0, "Stop after this long", 0 },
	{ "no-wake-hook", OPT_NO_WAKE_HOOK, NULL, 0,
	  "Do not look for the thread a card's interrupt woke (--wake-hook none): a process that "
	  "drives several cards then has its jobs on a card only where a launch's buffer was "
	  "mapped in one card's container",
	  0 },
	{ "wake-hook", OPT_WAKE_HOOK, "HOOK", 0,
	  "How the thread a card's interrupt woke is found: auto (the eventfd's waiters, read at "
	  "the interrupt, and at eventfd_write where fentry or a kprobe can hook it: no other "
	  "wake-up pays), sched_waking (a program on every wake-up of the host: also a thread "
	  "passing the news on where eventfd_write cannot be hooked) or none",
	  0 },
	{ "keep-command", OPT_KEEP_COMMAND, NULL, 0,
	  "When tracing ends before the -c command (-d, Ctrl-C, the tracer killed), leave it "
	  "running untraced (default: it gets SIGTERM, and SIGKILL 5 s later)",
	  0 },
	{ "output", 'o', "FILE", 0,
	  "Output: .pftrace (Perfetto), .json (Chrome JSON) or .sbt (raw capture); default "
	  "spyre-bpftrace-PID.pftrace or spyre-bpftrace-COMMAND.pftrace",
	  0 },
	{ "format", OPT_FORMAT, "FMT", 0, "perfetto, json or sbt, whatever -o's extension", 0 },
	{ "probe", OPT_PROBE, "LIB:PATTERN[=ROLE]", 0,
	  "Also probe functions of LIB (path or library name) whose demangled name "
	  "matches the glob PATTERN (repeatable)",
	  0 },
	{ "vfio-path", OPT_VFIO_PATH, "DIR|GLOB", 0,
	  "Count the files in DIR, or matching GLOB (one '*'), as accelerator files, besides /dev/vfio "
	  "(repeatable)",
	  0 },
	{ "irq", OPT_IRQ, "N", 0, "Also trace interrupt number N (repeatable)", 0 },
	{ "device", OPT_DEVICE, "BDF|VID:DID|all", 0,
	  "Keep driver-level events and interrupts of this card only: a PCI address "
	  "(0000:01:00.0) or vendor:device ids (repeatable; default Spyre's 1014:06a7 and "
	  "1014:06a8; 'all' for every device)",
	  0 },
	{ "driver-probes", OPT_DRIVER, "MODE", 0,
	  "How to attach to vfio's functions: auto (fentry, else kprobes; the default), "
	  "fentry, kprobe or off",
	  0 },
	{ "max-probes", OPT_MAX_PROBES, "N", 0,
	  "At most N uprobes (entries and return sites) per traced process; functions past "
	  "it are refused (default 4096)",
	  0 },
	{ "buffer-size", OPT_BUFFER, "SIZE", 0, "Ring buffer size, e.g. 64M (default 8M; rounded up to a power of two)",
	  0 },
	{ "verbose", 'v', NULL, 0,
	  "Print the attach plan, each runtime library and why, each function's return sites "
	  "or why it was refused, and libbpf warnings (-vv: debug)",
	  0 },
	{ "quiet", 'q', NULL, 0, "No live status line and no summary", 0 },
	{ 0 }
};

struct parse_ctx {
	struct record_opts *o;
	char *err;
	size_t errlen;
	bool every_device; /* --device all */
};

__attribute__((format(printf, 3, 4))) static error_t fail(struct argp_state *state, struct parse_ctx *c,
							  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, c->errlen, fmt, ap);
	va_end(ap);
	argp_failure(state, 2, 0, "%s", c->err);
	return EINVAL;
}

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	struct parse_ctx *c = state->input;
	struct record_opts *o = c->o;
	char msg[256];
	size_t pl, sl;
	struct stat dir;
	bool star;

	switch (key) {
	case 'p':
		if (o->npids == SBT_MAX_PIDS)
			return fail(state, c, "too many -p (at most %d)", SBT_MAX_PIDS);
		if (arg_parse_pid(arg, &o->pids[o->npids]))
			return fail(state, c, "invalid PID '%s'; hint: -p takes a process id (see pgrep)", arg);
		o->npids++;
		break;
	case 'c': o->command = arg; break;
	case 'd':
		if (arg_parse_seconds(arg, &o->duration))
			return fail(state, c,
				    "invalid duration '%s'; hint: seconds > 0 and up to a year "
				    "(31536000), e.g. -d 10 or -d 0.5",
				    arg);
		break;
	case 'o':
		if (!*arg)
			return fail(state, c, "empty output file name");
		if (o->output) /* which one was meant is not ours to guess */
			return fail(state, c,
				    "-o given twice; hint: one output a run (convert writes another format later)");
		o->output = arg;
		break;
	case OPT_PROBE: {
		char why[256];

		if (o->nprobes == SBT_MAX_USER_PROBES)
			return fail(state, c, "too many --probe (at most %d)", SBT_MAX_USER_PROBES);
		if (probe_spec_parse(arg, &o->probes[o->nprobes], why, sizeof(why)))
			return fail(state, c, "%s", why);
		o->nprobes++;
		break;
	}
	case OPT_VFIO_PATH:
		if (o->nvfio_paths == SBT_MAX_VFIO_PATHS)
			return fail(state, c, "too many --vfio-path (at most %d)", SBT_MAX_VFIO_PATHS);
		/* a directory means its files, as the daemon takes it */
		if (!strchr(arg, '*') && !stat(arg, &dir) && S_ISDIR(dir.st_mode)) {
			char *g = o->vfio_dir_globs[o->nvfio_paths];
			size_t n = strlen(arg);

			while (n > 1 && arg[n - 1] == '/')
				n--;
			snprintf(g, sizeof(o->vfio_dir_globs[0]), "%.*s/*", (int)n, arg);
			arg = g;
		}
		if (arg_split_glob(arg, SBT_FD_PATTERN_LEN - 1, &pl, &sl, &star))
			return fail(state, c,
				    "--vfio-path '%s': use an absolute directory, or a path with at most one '*' "
				    "(no '?' or '['), at most 63 characters each side",
				    arg);
		o->vfio_paths[o->nvfio_paths++] = arg;
		break;
	case OPT_IRQ: {
		pid_t irq;

		if (o->nirqs == SBT_MAX_IRQS)
			return fail(state, c, "too many --irq (at most %d)", SBT_MAX_IRQS);
		if (!strcmp(arg, "0"))
			irq = 0;
		else if (arg_parse_pid(arg, &irq))
			return fail(state, c, "invalid IRQ '%s'; hint: a number from /proc/interrupts", arg);
		o->irqs[o->nirqs++] = irq;
		break;
	}
	case OPT_FORMAT:
		if (strcmp(arg, "perfetto") && strcmp(arg, "json") && strcmp(arg, "sbt"))
			return fail(state, c, "unknown --format '%s'; hint: perfetto, json or sbt", arg);
		o->format = arg;
		break;
	case OPT_DEVICE:
		if (devfilter_add_arg(&o->devices, &c->every_device, arg, msg, sizeof(msg)))
			return fail(state, c, "%s", msg);
		break;
	case OPT_DRIVER:
		if ((o->driver_mode = driver_mode_parse(arg)) < 0)
			return fail(state, c, "unknown --driver-probes '%s'; hint: auto, fentry, kprobe or off", arg);
		break;
	case OPT_BUFFER:
		if (arg_parse_size(arg, &o->buffer_size) || o->buffer_size < 4096 || o->buffer_size > (1ul << 30))
			return fail(state, c, "invalid --buffer-size '%s'; hint: 4K to 1G, e.g. 64M", arg);
		break;
	case OPT_NO_WAKE_HOOK: o->no_wake_hook = true; break;
	case OPT_WAKE_HOOK:
		if (!strcmp(arg, "none"))
			o->no_wake_hook = true;
		else if (!strcmp(arg, "sched_waking"))
			o->wake_sched = true;
		else if (strcmp(arg, "auto"))
			return fail(state, c, "unknown --wake-hook '%s'; hint: auto, sched_waking or none", arg);
		break;
	case OPT_KEEP_COMMAND: o->keep_command = true; break;
	case OPT_MAX_PROBES: {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(arg, &end, 10);
		if (errno || end == arg || *end || *arg == '-' || !v || v > 1000000)
			return fail(state, c, "invalid --max-probes '%s'; hint: 1 to 1000000", arg);
		o->max_probes = v;
		break;
	}
	case 'v': o->verbose++; break;
	case 'q': o->quiet = true; break;
	case ARGP_KEY_ARG:
		return fail(state, c, "unexpected argument '%s'; hint: quote the command: -c '%s ...'", arg, arg);
	case ARGP_KEY_END:
		if (!o->npids && !o->command)
			return fail(state, c, "nothing to trace; hint: give -p PID or -c CMD (see --help)");
		if (o->npids && o->command)
			return fail(state, c, "-p and -c do not go together; hint: trace one job per run");
		if (devfilter_finish(&o->devices, c->every_device, msg, sizeof(msg)))
			return fail(state, c, "%s", msg);
		break;
	default: return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

void cli_free_record(struct record_opts *o)
{
	for (int i = 0; i < o->nprobes; i++)
		probe_spec_free(&o->probes[i]);
	o->nprobes = 0;
}

int cli_parse_record(int argc, char **argv, struct record_opts *o, unsigned int argp_flags, char *err, size_t errlen)
{
	static const struct argp argp = { options, parse_opt, NULL, doc, NULL, NULL, NULL };
	struct parse_ctx c = { o, err, errlen, false };

	memset(o, 0, sizeof(*o));
	o->buffer_size = SBT_DEFAULT_BUFFER;
	o->max_probes = SBT_DEFAULT_MAX_PROBES;
	err[0] = '\0';
	return argp_parse(&argp, argc, argv, argp_flags, NULL, &c);
}
