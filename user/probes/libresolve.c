// SPDX-License-Identifier: GPL-2.0-only
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/procfs.h"
#include "probes/elfsyms.h"
#include "probes/libresolve.h"

/* Run argv with stdout into a stream; env: extra NAME=value or NULL. */
static FILE *run_reading(char *const argv[], const char *env, pid_t *pid)
{
	int pfd[2];

	if (pipe2(pfd, O_CLOEXEC))
		return NULL;
	*pid = fork();
	if (*pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return NULL;
	}
	if (*pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(pfd[1], STDOUT_FILENO);
		if (null >= 0) {
			dup2(null, STDIN_FILENO);
			dup2(null, STDERR_FILENO);
		}
		if (env)
			putenv((char *)env);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	return fdopen(pfd[0], "r");
}

static void end_run(FILE *f, pid_t pid)
{
	int status;

	if (f)
		fclose(f);
	if (pid > 0)
		waitpid(pid, &status, 0);
}

/* A script's interpreter (its #! line; through env, the program env
 * names, found on PATH): true with its path in buf. */
static bool script_interp(const char *path, char *buf, size_t len)
{
	char line[256], *p, *word;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	ssize_t got;

	if (fd < 0)
		return false;
	got = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (got < 3 || line[0] != '#' || line[1] != '!')
		return false;
	line[got] = '\0';
	line[strcspn(line, "\n")] = '\0';
	p = line + 2;
	word = strtok(p, " \t");
	if (!word)
		return false;
	if (!strcmp(word + (strrchr(word, '/') ? strrchr(word, '/') - word + 1 : 0), "env")) {
		while ((word = strtok(NULL, " \t")) && word[0] == '-')
			;
		return word && sbt_which(word, buf, len);
	}
	snprintf(buf, len, "%s", word);
	return true;
}

void libs_of_command(char *const argv[], lib_found_cb cb, void *ctx)
{
	char prog[4096], interp[4096], line[4096];
	char *list[4] = { interp, "--list", prog, NULL };
	pid_t pid = -1;
	FILE *f;

	if (!sbt_which(argv[0], prog, sizeof(prog)))
		return;
	/* a script: what its interpreter links */
	if (!elf_interp(prog, interp, sizeof(interp))) {
		if (!script_interp(prog, line, sizeof(line)))
			return; /* static, or not a program: nothing linked */
		snprintf(prog, sizeof(prog), "%s", line);
		if (!elf_interp(prog, interp, sizeof(interp)))
			return;
	}
	/* the program's own dynamic loader lists what it links and exits,
	 * running nothing of the program (LD_TRACE_LOADED_OBJECTS on the
	 * program itself would run a static one for real) */
	f = run_reading(list, NULL, &pid);
	while (f && fgets(line, sizeof(line), f)) {
		/* "\tlibflex.so => /path/libflex.so (0x...)" or "\t/lib64/ld... (0x...)" */
		char *p = strstr(line, "=> "), *end;

		p = p ? p + 3 : line + strspn(line, " \t");
		if (*p != '/')
			continue;
		end = strstr(p, " (0x");
		if (end)
			*end = '\0';
		p[strcspn(p, "\n")] = '\0';
		cb(p, "linked by the command", ctx);
	}
	end_run(f, pid);
}

static void walk_dir(const char *dir, int depth, const char *why, lib_found_cb cb, void *ctx)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[4096];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path))
			continue;
		if (e->d_type == DT_DIR) {
			if (depth > 0)
				walk_dir(path, depth - 1, why, cb, ctx);
		} else if (e->d_type == DT_REG || e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) {
			cb(path, why, ctx);
		}
	}
	closedir(d);
}

int libs_in_dirs_of(pid_t pid, const char *list, const char *why, lib_found_cb cb, bool (*stop)(void *ctx), void *ctx)
{
	char *copy = strdup(list ? list : ""), *save = NULL, path[4096];
	struct {
		dev_t dev;
		ino_t ino;
	} seen[LIBS_MAX_DIRS];
	int nseen = 0, cut = 0, dirs = 0;

	for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir && !stop(ctx);
	     dir = strtok_r(NULL, ":", &save)) {
		int fd, i;
		size_t entries = 0;
		struct stat st;
		struct dirent *e;
		DIR *d;

		if (dir[0] != '/')
			continue;
		if (++dirs > LIBS_MAX_DIRS) {
			cut++; /* the rest of the list */
			break;
		}
		fd = proc_open_in_root(pid, dir, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
		if (fd < 0)
			continue;
		/* one directory named many times is read once */
		for (i = 0; !fstat(fd, &st) && i < nseen && (seen[i].dev != st.st_dev || seen[i].ino != st.st_ino); i++)
			;
		if (i < nseen || !(d = fdopendir(fd))) {
			close(fd);
			continue;
		}
		seen[nseen].dev = st.st_dev;
		seen[nseen++].ino = st.st_ino;
		while ((e = readdir(d))) {
			if (++entries > LIBS_MAX_DIR_ENTRIES || ((entries & 1023) == 0 && stop(ctx))) {
				cut += entries > LIBS_MAX_DIR_ENTRIES;
				break;
			}
			if (e->d_name[0] != '.' && e->d_type != DT_DIR &&
			    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < sizeof(path))
				cb(path, why, ctx);
		}
		closedir(d);
	}
	free(copy);
	return cut;
}

void libs_in_dirs(const char *list, int depth, const char *why, lib_found_cb cb, void *ctx)
{
	char *copy = strdup(list ? list : ""), *save = NULL;

	for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir; dir = strtok_r(NULL, ":", &save))
		if (dir[0] == '/')
			walk_dir(dir, depth, why, cb, ctx);
	free(copy);
}

/* What ldconfig -p listed, kept while /etc/ld.so.cache is the same file:
 * running it at every search costs a fork and an exec, and on a host busy
 * on every core it can take seconds to answer. */
static struct {
	pthread_mutex_t lock;
	bool have;
	uint64_t dev, ino, size, mtime_ns;
	char **paths;
	size_t n;
} ldcache = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void free_paths(char **paths, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}

/* The paths ldconfig -p lists: "\tlibflex.so (libc6,x86-64) => /usr/lib/libflex.so" */
static char **ldconfig_paths(size_t *n)
{
	static const char *const ldconfig[] = { "/sbin/ldconfig", "/usr/sbin/ldconfig" };
	char line[4096], **paths = NULL;

	*n = 0;
	for (size_t i = 0; i < 2; i++) {
		char *argv[] = { (char *)ldconfig[i], "-p", NULL };
		pid_t pid = -1;
		FILE *f;

		if (access(ldconfig[i], X_OK))
			continue;
		f = run_reading(argv, NULL, &pid);
		while (f && fgets(line, sizeof(line), f)) {
			char *p = strstr(line, "=> "), **grown;

			if (!p)
				continue;
			p += 3;
			p[strcspn(p, "\n")] = '\0';
			if (!(grown = realloc(paths, (*n + 1) * sizeof(*paths))) || !(grown[*n] = strdup(p))) {
				paths = grown ? grown : paths;
				break;
			}
			paths = grown;
			(*n)++;
		}
		end_run(f, pid);
		break;
	}
	return paths;
}

void libs_in_ldcache(lib_found_cb cb, void *ctx)
{
	struct stat st;
	bool known = !stat("/etc/ld.so.cache", &st);
	uint64_t mtime = known ? (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec : 0;
	char **paths = NULL;
	size_t n = 0;

	pthread_mutex_lock(&ldcache.lock);
	if (known && ldcache.have && ldcache.dev == (uint64_t)st.st_dev && ldcache.ino == (uint64_t)st.st_ino &&
	    ldcache.size == (uint64_t)st.st_size && ldcache.mtime_ns == mtime) {
		/* a copy: the callback runs without the lock */
		if ((paths = calloc(ldcache.n ? ldcache.n : 1, sizeof(*paths))))
			for (; n < ldcache.n && (paths[n] = strdup(ldcache.paths[n])); n++)
				;
		pthread_mutex_unlock(&ldcache.lock);
	} else {
		pthread_mutex_unlock(&ldcache.lock);
		paths = ldconfig_paths(&n);
		if (known) {
			char **keep = calloc(n ? n : 1, sizeof(*keep));
			size_t k = 0;

			for (; keep && k < n && (keep[k] = strdup(paths[k])); k++)
				;
			pthread_mutex_lock(&ldcache.lock);
			free_paths(ldcache.paths, ldcache.n);
			ldcache.paths = keep;
			ldcache.n = keep ? k : 0;
			ldcache.have = keep && k == n;
			ldcache.dev = (uint64_t)st.st_dev;
			ldcache.ino = (uint64_t)st.st_ino;
			ldcache.size = (uint64_t)st.st_size;
			ldcache.mtime_ns = mtime;
			pthread_mutex_unlock(&ldcache.lock);
		}
	}
	for (size_t i = 0; i < n; i++)
		cb(paths[i], "the ld.so cache", ctx);
	free_paths(paths, n);
}

void libs_in_install_tree(lib_found_cb cb, void *ctx)
{
	glob_t g;

	if (glob("/opt/ibm/spyre/*/lib/lib*.so*", 0, NULL, &g))
		return;
	for (size_t i = 0; i < g.gl_pathc; i++)
		cb(g.gl_pathv[i], "the Spyre install tree", ctx);
	globfree(&g);
}

bool sbt_which(const char *cmd, char *path, size_t len)
{
	const char *env = getenv("PATH");
	char *copy, *save = NULL;
	bool found = false;

	if (strchr(cmd, '/')) {
		snprintf(path, len, "%s", cmd);
		return !access(cmd, X_OK);
	}
	copy = strdup(env ? env : "/usr/local/bin:/usr/bin:/bin");
	for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir && !found; dir = strtok_r(NULL, ":", &save)) {
		snprintf(path, len, "%s/%s", dir, cmd);
		found = !access(path, X_OK);
	}
	free(copy);
	return found;
}

/* The interpreter a command runs: argv[0] itself when it is python*, or
 * the one its #! line names. */
static bool python_of(const char *cmd, char *interp, size_t len)
{
	const char *base = strrchr(cmd, '/');
	char path[4096], line[512], *p, *arg;
	FILE *f;

	base = base ? base + 1 : cmd;
	if (!strncmp(base, "python", 6)) {
		snprintf(interp, len, "%s", cmd);
		return true;
	}
	if (!sbt_which(cmd, path, sizeof(path)))
		return false;
	f = fopen(path, "r");
	if (!f)
		return false;
	p = fgets(line, sizeof(line), f);
	fclose(f);
	if (!p || strncmp(line, "#!", 2) || !strstr(line, "python"))
		return false;
	line[strcspn(line, "\n")] = '\0';
	p = line + 2 + strspn(line + 2, " \t");
	arg = p + strcspn(p, " \t");
	if (*arg) {
		*arg++ = '\0';
		arg += strspn(arg, " \t");
	}
	/* "#!/usr/bin/env python3": the interpreter is the argument */
	if (!strcmp(strrchr(p, '/') ? strrchr(p, '/') + 1 : p, "env") && *arg)
		p = arg;
	p[strcspn(p, " \t")] = '\0';
	snprintf(interp, len, "%s", p);
	return true;
}

void libs_in_python_env(char *const argv[], lib_found_cb cb, void *ctx)
{
	static const char code[] = "import site, sys\n"
				   "d = list(getattr(site, 'getsitepackages', lambda: [])())\n"
				   "d.append(site.getusersitepackages())\n"
				   "print('\\n'.join(d + sys.path))\n";
	char interp[512], line[4096];
	char *py[] = { interp, "-c", (char *)code, NULL };
	pid_t pid = -1;
	FILE *f;

	if (!python_of(argv[0], interp, sizeof(interp)))
		return;
	f = run_reading(py, NULL, &pid);
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		/* a package's own directory and one below: torch_spyre/lib/ */
		if (line[0] == '/' && !strstr(line, ".zip"))
			walk_dir(line, 2, "the Python environment's packages", cb, ctx);
	}
	end_run(f, pid);
}

int proc_getenv(int pid, const char *name, char *buf, unsigned long len)
{
	char path[64], env[65536];
	size_t n, nl = strlen(name);
	ssize_t got;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	got = read(fd, env, sizeof(env) - 1);
	close(fd);
	if (got <= 0)
		return -1;
	env[got] = '\0';
	for (size_t i = 0; i < (size_t)got; i += n + 1) {
		n = strlen(env + i);
		if (!strncmp(env + i, name, nl) && env[i + nl] == '=') {
			snprintf(buf, len, "%s", env + i + nl + 1);
			return 0;
		}
	}
	return -1;
}
