// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <wordexp.h>

#include "base/log.h"
#include "probes/libresolve.h"
#include "record/spawn.h"

int workload_spawn(struct workload *w, const char *command)
{
	wordexp_t *we = calloc(1, sizeof(*we));
	int pfd[2], ret;
	char path[4096];
	pid_t tracer;

	w->go_fd = -1;
	if (!we) {
		sbt_err("cannot start '%s': out of memory", command);
		return -ENOMEM;
	}
	ret = wordexp(command, we, WRDE_NOCMD);
	if (ret || !we->we_wordc) {
		sbt_err("cannot parse command '%s'%s; hint: quote it as one argument: -c './app --flag'", command,
			ret == WRDE_CMDSUB ? " (no $(...) or `...`)" : "");
		if (!ret)
			wordfree(we);
		free(we);
		return -EINVAL;
	}
	w->we = we;
	w->argv = we->we_wordv;
	w->argc = (int)we->we_wordc;
	if (!sbt_which(w->argv[0], path, sizeof(path))) {
		sbt_err("cannot run '%s': %s; hint: give a path or a command on PATH", w->argv[0],
			strerror(errno ? errno : ENOENT));
		return -ENOENT;
	}
	if (pipe2(pfd, O_CLOEXEC)) {
		ret = -errno;
		sbt_err("cannot start '%s': pipe: %s", command, strerror(errno));
		return ret;
	}
	tracer = getpid();
	w->pid = fork();
	if (w->pid < 0) {
		ret = -errno;
		sbt_err("cannot start '%s': fork: %s", command, strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		w->pid = 0;
		return ret;
	}
	if (w->pid == 0) {
		char c;

		/* dies with the tracer, so it never runs on untraced unasked */
		if (!w->keep && (prctl(PR_SET_PDEATHSIG, SIGTERM) || getppid() != tracer))
			_exit(127);
		close(pfd[1]);
		/* EOF instead of a byte: the tracer gave up; do not run untraced */
		if (read(pfd[0], &c, 1) != 1)
			_exit(127);
		execvp(w->argv[0], w->argv);
		fprintf(stderr, "spyre-bpftrace: cannot run '%s': %s\n", w->argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[0]);
	w->go_fd = pfd[1];
	return 0;
}

void workload_start(struct workload *w)
{
	if (w->go_fd < 0)
		return;
	if (write(w->go_fd, "g", 1) != 1)
		sbt_err("cannot start the command: %s", strerror(errno));
	close(w->go_fd);
	w->go_fd = -1;
}

void workload_reap(struct workload *w, bool wait)
{
	if (w->pid <= 0 || w->reaped)
		return;
	if (waitpid(w->pid, &w->status, wait ? 0 : WNOHANG) == w->pid)
		w->reaped = true;
}

/* A command that ignores or outlives SIGTERM must not hold the tracer
 * (its trace is written already, but the prompt would not come back):
 * it has TERM_GRACE_MS, then SIGKILL. */
#define TERM_GRACE_MS 5000

static void end_or_kill(struct workload *w)
{
	for (int waited = 0; waited < TERM_GRACE_MS; waited += 20) {
		workload_reap(w, false);
		if (w->reaped)
			return;
		usleep(20 * 1000);
	}
	sbt_warn("the command (PID %d) did not end %d s after SIGTERM: killed (SIGKILL); hint: "
		 "--keep-command leaves it running",
		 w->pid, TERM_GRACE_MS / 1000);
	kill(w->pid, SIGKILL);
	workload_reap(w, true);
}

void workload_end(struct workload *w)
{
	if (w->go_fd >= 0) {
		close(w->go_fd); /* an unstarted child sees EOF and exits */
		w->go_fd = -1;
	}
	if (w->pid > 0 && !w->reaped && !w->keep) {
		workload_reap(w, false);
		if (!w->reaped) {
			kill(w->pid, SIGTERM);
			end_or_kill(w);
		}
	}
	if (w->we) {
		wordfree(w->we);
		free(w->we);
		w->we = NULL;
	}
}
