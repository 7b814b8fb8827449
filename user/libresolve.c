// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libresolve.h"

static int push(char ***paths, int *n, const char *p)
{
	char **grown;

	for (int i = 0; i < *n; i++)
		if (!strcmp((*paths)[i], p))
			return 0;
	grown = realloc(*paths, (*n + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	*paths = grown;
	if (!(grown[*n] = strdup(p)))
		return -ENOMEM;
	(*n)++;
	return 0;
}

int resolve_command_libs(char *const argv[], char ***paths)
{
	int pfd[2], n = 0, status;
	char line[4096];
	pid_t pid;
	FILE *f;

	*paths = NULL;
	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* The loader lists and exits without running the program. */
		dup2(pfd[1], STDOUT_FILENO);
		if (!freopen("/dev/null", "w", stderr))
			_exit(127);
		setenv("LD_TRACE_LOADED_OBJECTS", "1", 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	f = fdopen(pfd[0], "r");
	while (f && fgets(line, sizeof(line), f)) {
		/* "\tlibflex.so => /path/libflex.so (0x...)" or "\t/lib64/ld... (0x...)" */
		char *p = strstr(line, "=> ");
		char *end;

		p = p ? p + 3 : line + strspn(line, " \t");
		if (*p != '/')
			continue;
		end = strstr(p, " (0x");
		if (end)
			*end = '\0';
		p[strcspn(p, "\n")] = '\0';
		if (push(paths, &n, p))
			break;
	}
	if (f)
		fclose(f);
	waitpid(pid, &status, 0);
	return n;
}

int resolve_install_libs(char ***paths)
{
	glob_t g;
	int n = 0;

	*paths = NULL;
	if (glob("/opt/ibm/spyre/*/lib/lib*.so*", 0, NULL, &g))
		return 0;
	for (size_t i = 0; i < g.gl_pathc; i++)
		if (push(paths, &n, g.gl_pathv[i]))
			break;
	globfree(&g);
	return n;
}
