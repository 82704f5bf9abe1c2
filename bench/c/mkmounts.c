/* mkmounts: a busy node's mount table made of real mounts, in a private mount namespace, then
 * run a command in it (issue 34: the mount-table rows on real procfs, not on a page-cached file).
 *
 *     mkmounts BASE TOTAL PV_MOUNTS SNAPSHOT CMD [ARG...]        (root)
 *
 * unshare(CLONE_NEWNS), everything made private, a tmpfs on BASE (so nothing is left on disk),
 * and under BASE/var/lib/kubelet a kubelet-like root with real directories:
 *   - PV_MOUNTS / 2 volumes: a tmpfs (its own device) on the CSI staging directory
 *     plugins/kubernetes.io/csi/driver.longhorn.io/<sha256-like>/globalmount, bind-mounted on the
 *     pod's pods/<uid>/volumes/kubernetes.io~csi/pvc-<hex>/mount;
 *   - then, until the table holds TOTAL lines (the host's own mounts included), a third each:
 *     container root filesystems (bind mounts on BASE/run/containerd/.../<id>/rootfs of a
 *     directory on its own tmpfs), projected
 *     service-account tokens and secrets (a tmpfs each, as the kubelet makes them).
 * The table as the kernel then shows it is copied to SNAPSHOT (a regular file, for the
 * page-cached-file rows), and CMD runs in the namespace; the mounts die with it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng = 42;

static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void hex(char *out, int n) {
    for (int i = 0; i < n; i++)
        out[i] = "0123456789abcdef"[next() & 15];
    out[n] = 0;
}

static void mkdirs(const char *path) {
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0755) && errno != EEXIST)
                goto fail;
            *s = '/';
        }
    if (mkdir(p, 0755) && errno != EEXIST)
        goto fail;
    return;
fail:
    perror(p);
    exit(2);
}

static void mnt(const char *src, const char *dst, const char *type, unsigned long flags,
                const char *data) {
    mkdirs(dst);
    if (mount(src, dst, type, flags, data)) {
        perror(dst);
        exit(2);
    }
}

static long lines_of_mountinfo(void) {
    FILE *f = fopen("/proc/self/mountinfo", "r");
    long n = 0;
    int c;
    while ((c = getc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: mkmounts BASE TOTAL PV_MOUNTS SNAPSHOT CMD [ARG...]\n");
        return 2;
    }
    const char *base = argv[1];
    long total = atol(argv[2]), pv = atol(argv[3]);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
        perror("mkmounts: unshare -m");
        return 2;
    }
    mnt("bench-node", base, "tmpfs", 0, "size=64m");
    char k[1024], a[4096], b[4096], h1[65], h2[33];
    snprintf(k, sizeof k, "%s/var/lib/kubelet", base);
    snprintf(a, sizeof a, "%s/pods", k);
    mkdirs(a);
    /* The container root filesystems are binds of one directory of their own tmpfs: a bind's
     * source is checked against every mount under the source's mount (has_locked_children), so
     * a source on BASE itself, under which all the mounts go, would make this quadratic. */
    snprintf(a, sizeof a, "%s/image-layer", base);
    mnt("image-layer", a, "tmpfs", 0, "size=1m");
    long have = lines_of_mountinfo();
    long made = 0;
    for (long v = 0; v < pv / 2 && have + made + 2 <= total; v++) {
        hex(h1, 64);
        snprintf(a, sizeof a, "%s/plugins/kubernetes.io/csi/driver.longhorn.io/%s/globalmount", k, h1);
        mnt("longhorn", a, "tmpfs", 0, "size=1m");
        hex(h1, 32);
        hex(h2, 32);
        snprintf(b, sizeof b, "%s/pods/%s/volumes/kubernetes.io~csi/pvc-%s/mount", k, h1, h2);
        mnt(a, b, NULL, MS_BIND, NULL);
        made += 2;
    }
    for (long i = 0; have + made < total; i++, made++) {
        hex(h1, 32);
        switch (i % 3) {
        case 0:
            snprintf(b, sizeof b, "%s/run/containerd/io.containerd.runtime.v2.task/k8s.io/%s/rootfs", base, h1);
            snprintf(a, sizeof a, "%s/image-layer", base);
            mnt(a, b, NULL, MS_BIND, NULL);
            break;
        case 1:
            snprintf(b, sizeof b, "%s/pods/%s/volumes/kubernetes.io~projected/kube-api-access-%.5s", k, h1, h1 + 8);
            mnt("tmpfs", b, "tmpfs", 0, "size=4096k");
            break;
        default:
            snprintf(b, sizeof b, "%s/pods/%s/volumes/kubernetes.io~secret/tls", k, h1);
            mnt("tmpfs", b, "tmpfs", 0, "size=1024k");
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* The table as the kernel shows it, for the rows on a regular file. */
    int in = open("/proc/self/mountinfo", O_RDONLY), out = open(argv[4], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0) {
        perror("mkmounts: snapshot");
        return 2;
    }
    static char buf[1 << 16];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, n) != n) {
            perror("mkmounts: snapshot");
            return 2;
        }
    close(in);
    close(out);
    fprintf(stderr, "mkmounts: %ld mounts made (%ld in the table) in %.1f s\n", made, lines_of_mountinfo(),
            (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    execvp(argv[5], argv + 5);
    perror(argv[5]);
    return 2;
}
