/* The floor of check_ro_pvc_mounts' work on a mount table (issue 34): what any program that
 * honestly answers "is a PV filesystem of this node read-only or dead?" must do, and no more.
 *
 *     floor_mounts MOUNTINFO KUBELET_ROOT [THREADS]
 *
 * 1. read() the whole table (procfs makes it as it is read);
 * 2. validate and split every line: mount ID, parent ID, major:minor, root, mount point, mount
 *    options, optional fields up to "-", filesystem type, source, super options — a malformed
 *    line is an error (exit 3), as in the check;
 * 3. keep the kubelet volume mounts: under KUBELET_ROOT/, a pod volume of a PV kind
 *    (pods/UID/volumes/PLUGIN/NAME, not secret/configmap/projected/downward-api/empty-dir/
 *    git-repo) or a CSI staging mount (plugins/kubernetes.io/csi/.../globalmount); mount points
 *    with octal escapes are unescaped;
 * 4. group them by device (major:minor, open-addressing hash);
 * 5. check options: `ro` in the super options or in any mount's options;
 * 6. probe each volume once (its staging mount if it has one, else its first mount): stat,
 *    statfs, open(O_DIRECTORY), one getdents64, close — on THREADS threads (default: the online
 *    CPUs; the check uses a pool of 16).
 *
 * Prints "volumes N read-only R failed F". No findings are formatted: the floor of a run that
 * finds every volume healthy is one line.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

struct vol {
    uint64_t dev; /* (major << 32 | minor) + 1; 0 = empty slot */
    const char *first, *staging;
    int ro, failed;
};

static struct vol *vols;
static size_t nslots, nvols;
static struct vol **order;

static void die(const char *what, long line) {
    fprintf(stderr, "floor_mounts: line %ld: %s\n", line, what);
    exit(3);
}

/* Parse a decimal number ending at `end`; -1 if not one. */
static long long num(const char *s, const char *end) {
    if (s == end || end - s > 18)
        return -1;
    long long v = 0;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v;
}

/* `opt` is a comma-separated list (not NUL-terminated, ends at `end`): does it hold "ro"? */
static int has_ro(const char *s, const char *end) {
    while (s < end) {
        const char *c = memchr(s, ',', end - s);
        if (!c)
            c = end;
        if (c - s == 2 && s[0] == 'r' && s[1] == 'o')
            return 1;
        s = c + 1;
    }
    return 0;
}

static int is_non_pv(const char *p, size_t n) {
    static const char *non_pv[] = {"kubernetes.io~configmap", "kubernetes.io~secret",
                                   "kubernetes.io~projected", "kubernetes.io~downward-api",
                                   "kubernetes.io~empty-dir", "kubernetes.io~git-repo"};
    for (size_t i = 0; i < sizeof non_pv / sizeof *non_pv; i++)
        if (strlen(non_pv[i]) == n && !memcmp(non_pv[i], p, n))
            return 1;
    return 0;
}

/* Components of `rel` (the part after "ROOT/"), at most 8; returns the count, 0 if more. */
static int split(const char *rel, const char *end, const char **c, size_t *l) {
    int n = 0;
    while (rel < end) {
        const char *s = memchr(rel, '/', end - rel);
        if (!s)
            s = end;
        if (n == 8)
            return 0;
        c[n] = rel;
        l[n++] = s - rel;
        rel = s + 1;
    }
    return n;
}

#define EQ(i, lit) (l[i] == sizeof lit - 1 && !memcmp(c[i], lit, sizeof lit - 1))

/* 0: not a volume; 1: a pod volume; 2: a CSI staging mount. */
static int classify(const char *rel, const char *end) {
    const char *c[8];
    size_t l[8];
    int n = split(rel, end, c, l);
    if (n >= 5 && n <= 6 && EQ(0, "pods") && EQ(2, "volumes"))
        return is_non_pv(c[3], l[3]) || (n == 6 && !EQ(5, "mount")) ? 0 : 1;
    if (n == 6 && EQ(0, "plugins") && EQ(1, "kubernetes.io") && EQ(2, "csi") && EQ(5, "globalmount"))
        return 2;
    return 0;
}

static char *unescape(const char *s, const char *end) {
    char *o = malloc(end - s + 1), *d = o;
    while (s < end) {
        if (*s == '\\' && end - s >= 4 && s[1] >= '0' && s[1] <= '3') {
            *d++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
            s += 4;
        } else {
            *d++ = *s++;
        }
    }
    *d = 0;
    return o;
}

static struct vol *slot(uint64_t dev) {
    if (2 * (nvols + 1) > nslots) {
        size_t old = nslots;
        struct vol *ov = vols;
        nslots = old ? old * 2 : 4096;
        vols = calloc(nslots, sizeof *vols);
        nvols = 0;
        for (size_t i = 0; i < old; i++)
            if (ov[i].dev) {
                struct vol *v = slot(ov[i].dev);
                *v = ov[i];
            }
        free(ov);
    }
    size_t h = (dev * 0x9E3779B97F4A7C15ULL) >> 20;
    for (;; h++) {
        struct vol *v = &vols[h & (nslots - 1)];
        if (!v->dev) {
            v->dev = dev;
            nvols++;
            return v;
        }
        if (v->dev == dev)
            return v;
    }
}

static void probe(struct vol *v) {
    const char *p = v->staging ? v->staging : v->first;
    struct stat st;
    struct statfs sf;
    char buf[4096];
    if (stat(p, &st) || statfs(p, &sf)) {
        v->failed = 1;
        return;
    }
    if (S_ISDIR(st.st_mode)) {
        int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || syscall(SYS_getdents64, fd, buf, sizeof buf) < 0)
            v->failed = 1;
        if (fd >= 0)
            close(fd);
    }
}

static size_t next_job;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&mu);
        size_t i = next_job++;
        pthread_mutex_unlock(&mu);
        if (i >= nvols)
            return NULL;
        probe(order[i]);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: floor_mounts MOUNTINFO KUBELET_ROOT [THREADS]\n");
        return 2;
    }
    int threads = argc > 3 ? atoi(argv[3]) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    char prefix[4096];
    size_t plen = (size_t)snprintf(prefix, sizeof prefix, "%s/", argv[2]);
    int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        perror(argv[1]);
        return 3;
    }
    size_t cap = 1 << 20, len = 0;
    char *text = malloc(cap);
    for (;;) {
        if (cap - len < 65536)
            text = realloc(text, cap *= 2);
        ssize_t n = read(fd, text + len, cap - len);
        if (n < 0) {
            perror("read");
            return 3;
        }
        if (!n)
            break;
        len += n;
    }
    close(fd);
    long lineno = 0;
    for (char *s = text, *end = text + len; s < end;) {
        char *nl = memchr(s, '\n', end - s);
        if (!nl)
            nl = end;
        lineno++;
        const char *f[64], *fe[64];
        int nf = 0;
        for (char *p = s; p < nl && nf < 64;) {
            char *sp = memchr(p, ' ', nl - p);
            if (!sp)
                sp = nl;
            f[nf] = p;
            fe[nf++] = sp;
            p = sp + 1;
        }
        int sep = -1;
        for (int i = 6; i < nf; i++)
            if (fe[i] - f[i] == 1 && f[i][0] == '-') {
                sep = i;
                break;
            }
        if (nf < 10 || sep < 0 || nf != sep + 4)
            die("not a mountinfo line", lineno);
        const char *colon = memchr(f[2], ':', fe[2] - f[2]);
        long long id = num(f[0], fe[0]), parent = num(f[1], fe[1]);
        long long major = colon ? num(f[2], colon) : -1, minor = colon ? num(colon + 1, fe[2]) : -1;
        if (id < 0 || parent < 0 || major < 0 || minor < 0 || f[3][0] != '/' || f[4][0] != '/')
            die("bad mount ID, parent, device or path", lineno);
        size_t mlen = fe[4] - f[4];
        if (mlen > plen && !memcmp(f[4], prefix, plen)) {
            const char *mp = f[4], *mend = fe[4];
            char *u = NULL;
            if (memchr(mp, '\\', mlen)) {
                u = unescape(mp, mend);
                mp = u;
                mend = u + strlen(u);
            }
            int kind = classify(mp + plen, mend);
            if (kind) {
                if (!u)
                    u = strndup(mp, mend - mp);
                struct vol *v = slot(((uint64_t)major << 32 | (uint64_t)minor) + 1);
                if (!v->first)
                    v->first = u;
                if (kind == 2 && !v->staging)
                    v->staging = u;
                v->ro |= has_ro(f[5], fe[5]) || has_ro(f[sep + 3], fe[sep + 3]);
            } else {
                free(u);
            }
        }
        s = nl + 1;
    }
    order = malloc(sizeof *order * (nvols + 1));
    size_t k = 0;
    for (size_t i = 0; i < nslots; i++)
        if (vols[i].dev)
            order[k++] = &vols[i];
    if (threads <= 1) {
        worker(NULL);
    } else {
        pthread_t t[64];
        if (threads > 64)
            threads = 64;
        for (int i = 0; i < threads; i++)
            pthread_create(&t[i], NULL, worker, NULL);
        for (int i = 0; i < threads; i++)
            pthread_join(t[i], NULL);
    }
    size_t ro = 0, failed = 0;
    for (size_t i = 0; i < nvols; i++) {
        ro += order[i]->ro;
        failed += order[i]->failed;
    }
    printf("volumes %zu read-only %zu failed %zu\n", nvols, ro, failed);
    return 0;
}
