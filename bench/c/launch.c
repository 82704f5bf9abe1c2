/* launch: time commands interleaved, without a launcher's own start-up in the figures (issue 34).
 *
 *     launch ROUNDS STDOUT_FILE SPEC_FILE
 *
 * SPEC_FILE holds one command per line, fields separated by TABs: LABEL, STDIN (a file, or "-"
 * for /dev/null), then the argv (argv[0] is a path; no PATH search). One untimed warm-up round
 * runs first (page cache, dynamic loader caches), then ROUNDS rounds of every command in order
 * (round 1: A B C, round 2: A B C, ...), so that load on the machine hits all of them alike.
 *
 * Each run: clock_gettime(CLOCK_MONOTONIC), posix_spawn (musl: clone(CLONE_VM|CLONE_VFORK), no
 * copy of this process), wait4, clock_gettime. stdout goes to STDOUT_FILE (a regular file: GNU
 * grep stops at the first match when its stdout is /dev/null), stderr to /dev/null. wait4's
 * rusage gives the CPU time (user+system) and the peak RSS of the child and of every child it
 * waited for (the checks' forked worker).
 *
 * Output, one line per command, TAB-separated: LABEL, last exit code, peak RSS in KiB (the
 * largest of all rounds), then "wall:" and ROUNDS wall times in nanoseconds separated by commas,
 * then "cpu:" and ROUNDS CPU times in nanoseconds. bench/bench.py computes the medians.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct cmd {
    char *label;
    char *in;
    char **argv;
    int code;
    long maxrss;
    long long *wall, *cpu;
};

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void run(struct cmd *c, const char *out, int r) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, c->in, O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    long long t0 = now_ns();
    pid_t pid;
    int e = posix_spawn(&pid, c->argv[0], &fa, NULL, c->argv, environ);
    if (e) {
        fprintf(stderr, "launch: %s: %s\n", c->argv[0], strerror(e));
        exit(2);
    }
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0) {
        perror("launch: wait4");
        exit(2);
    }
    long long t1 = now_ns();
    posix_spawn_file_actions_destroy(&fa);
    c->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (r < 0)
        return;
    c->wall[r] = t1 - t0;
    c->cpu[r] = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
                (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
    if (ru.ru_maxrss > c->maxrss)
        c->maxrss = ru.ru_maxrss;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: launch ROUNDS STDOUT_FILE SPEC_FILE\n");
        return 2;
    }
    int rounds = atoi(argv[1]);
    FILE *f = fopen(argv[3], "r");
    if (!f || rounds < 1) {
        perror("launch: spec");
        return 2;
    }
    struct cmd *cmds = NULL;
    int n = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] == '\n')
            line[--len] = 0;
        if (!len)
            continue;
        char **fields = NULL;
        int nf = 0;
        for (char *s = strdup(line), *tok; (tok = strsep(&s, "\t"));) {
            fields = realloc(fields, sizeof *fields * (nf + 2));
            fields[nf++] = tok;
        }
        fields[nf] = NULL;
        if (nf < 3) {
            fprintf(stderr, "launch: a spec line needs LABEL, STDIN and a command\n");
            return 2;
        }
        cmds = realloc(cmds, sizeof *cmds * (n + 1));
        struct cmd *c = &cmds[n++];
        c->label = fields[0];
        c->in = strcmp(fields[1], "-") ? fields[1] : "/dev/null";
        c->argv = fields + 2;
        c->code = -1;
        c->maxrss = 0;
        c->wall = calloc(rounds, sizeof(long long));
        c->cpu = calloc(rounds, sizeof(long long));
    }
    for (int i = 0; i < n; i++)
        run(&cmds[i], argv[2], -1);
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < n; i++)
            run(&cmds[i], argv[2], r);
    for (int i = 0; i < n; i++) {
        struct cmd *c = &cmds[i];
        printf("%s\t%d\t%ld\twall:", c->label, c->code, c->maxrss);
        for (int r = 0; r < rounds; r++)
            printf("%s%lld", r ? "," : "", c->wall[r]);
        printf("\tcpu:");
        for (int r = 0; r < rounds; r++)
            printf("%s%lld", r ? "," : "", c->cpu[r]);
        printf("\n");
    }
    return 0;
}
