#!/usr/bin/env python3
"""Benchmarks: the cost of a check run, side by side with peers and limits (issue 8), and with
the floor of the same work (issue 34).

Every scenario runs its commands interleaved (round 1: A B C, round 2: A B C, ...) through
bench/c/launch (a static C launcher: posix_spawn + wait4, no Python start-up in the figures) so
that load on the machine hits all of them alike; the table shows the median wall and CPU times,
each row's ratio to its reference (the floor of the same work: bench/c/*.c, or the peer a goal
names), and peak RSS from wait4(2) (the child and everything it waited for).

    bench/run [--scale S] [--rounds N] [--only NAME,...]

Inputs are generated deterministically under bench/out/; --scale multiplies their sizes
(1.0 = the sizes the issue names, except the kubelet log, 1 GiB at --scale 5).
"""
import argparse, os, platform, shutil, statistics, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
# bench/run sets both from ./build-static, the one place that knows where release binaries are.
BIN = Path(os.environ.get("BENCH_BIN_DIR") or ROOT / "target" / "x86_64-unknown-linux-musl" / "release")
# Static glibc builds of the same checks, when present (bench/run --with-glibc builds them): shown
# beside the musl ones so the choice of libc is measured, not asserted.
GLIBC_BIN = Path(os.environ.get("BENCH_GLIBC_BIN_DIR") or ROOT / "target" / "x86_64-unknown-linux-gnu" / "release")
STDOUT = OUT / "stdout"
# bench/run compiles bench/c/*.c here: the launcher, and the floors (true, floor_lines,
# floor_mounts) and mkmounts.
LAUNCH = OUT / "bin" / "launch"
FLOOR = OUT / "bin"
sys.path.insert(0, str(ROOT / "bench"))


def have(tool):
    return shutil.which(tool) is not None


def resolve(argv0):
    return shutil.which(argv0) or argv0


class Scenario:
    """Rows timed together, interleaved, by bench/c/launch (posix_spawn + wait4: no Python in
    the figures). Each row's ratio is to its reference row (the floor of the same work, or the
    peer the goal names), by median wall time and by median CPU time (user + system of the
    process and every child it waited for: under load the CPU ratio is the steadier one)."""

    def __init__(self, name, title, goal):
        self.name, self.title, self.goal = name, title, goal
        self.cmds = []  # (label, argv, stdin, reference label)
        self.reference = None
        self.notes = []
        self.wrapper = []  # argv that runs the launcher (e.g. in a mount namespace)
        self.per = {}  # label: (items, "unit"): a note gives the CPU time per item

    def add(self, label, argv, reference=False, stdin=None, ref=None):
        if reference:
            self.reference = label
        self.cmds.append((label, [resolve(argv[0]), *argv[1:]], stdin, ref))

    def run(self, rounds):
        spec = OUT / f"spec-{self.name}"
        spec.write_text("".join(f"{label}\t{stdin or '-'}\t" + "\t".join(argv) + "\n"
                                for label, argv, stdin, _ in self.cmds))
        p = subprocess.run([*self.wrapper, str(LAUNCH), str(rounds), str(STDOUT), str(spec)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"bench: {self.name}: {p.stderr.strip()}")
        if p.stderr.strip():
            self.notes.append(p.stderr.strip())
        res = {}
        for line in p.stdout.splitlines():
            label, code, rss, wall, cpu = line.split("\t")
            res[label] = (statistics.median(int(x) for x in wall[5:].split(",")) / 1e9,
                          statistics.median(int(x) for x in cpu[4:].split(",")) / 1e9,
                          int(rss), int(code))
        rows = []
        for label, _, _, ref in self.cmds:
            wall, cpu, rss, code = res[label]
            r = ref or self.reference
            if r in res and res[r][0] > 0:
                ratio = f"{wall / res[r][0]:.2f}×"
                cratio = f"{cpu / res[r][1]:.2f}×" if res[r][1] > 0 else "–"
            else:
                ratio = cratio = ""
            rows.append((label, wall, cpu, ratio, cratio, rss, code, r))
        self.results = res
        return rows


def fmt_time(s):
    if s != s:
        return "–"
    return f"{s * 1e6:.0f} µs" if s < 0.001 else f"{s * 1000:.2f} ms" if s < 1 else f"{s:.3f} s"


def check(name, *args):
    return [str(BIN / name), *args]


def glibc_row(s, label, name, *args, **kw):
    """Add the static glibc build of `name` to scenario `s`, if it was built."""
    if BIN != GLIBC_BIN and (GLIBC_BIN / name).exists():
        s.add(f"{label} (static glibc build)", [str(GLIBC_BIN / name), *args], **kw)


def extra_row(s, label, name, *args, **kw):
    """BENCH_EXTRA_BIN_DIR (another build of the program, e.g. another [profile.release]): its
    check beside the main one, interleaved, so a build choice is measured on every row."""
    extra = os.environ.get("BENCH_EXTRA_BIN_DIR")
    if extra and (Path(extra) / name).exists():
        s.add(f"{label} ({os.environ.get('BENCH_EXTRA_LABEL', 'extra build')})", [str(Path(extra) / name), *args], **kw)


# ---------------------------------------------------------------------------------------------
# Scenarios


def idle(args):
    s = Scenario("idle", "Idle node, every check: one run", "≤ 3× a static `true`, ≤ 4 MiB peak RSS")
    s.rounds = args.rounds * 4  # runs of a millisecond: more rounds for a steady median under load
    s.add("static true (the floor)", [str(FLOOR / "true")], reference=True)
    s.add("/bin/true (dynamic glibc: the old reference)", ["/bin/true"])
    empty = OUT / "empty-kubelet"
    (empty / "pods").mkdir(parents=True, exist_ok=True)
    idle_args = {
        "check_ro_pvc_mounts": ["--kubelet-root", str(empty)],
        "check_stale_csi_mounts": ["--kubelet-root", str(empty)],
        "check_pv_capacity": ["--kubelet-root", str(empty)],
        "check_csi_node_plugins": ["--kubelet-root", str(empty)],
        "check_iscsi_sessions": [],
        "check_storage_kernel_errors": ["--kmsg", str(OUT / "idle.kmsg")],
        "check_kubelet_nested_ops": ["--log-file", str(OUT / "idle.log")],
        "check_stuck_scheduled": ["--all-nodes", "--pods-json", str(OUT / "empty-pods.json")],
        "check_jiva_rep_crashloop": ["--pods-json", str(OUT / "empty-pods.json")],
        "check_stuck_terminating": ["--all-nodes", "--pods-json", str(OUT / "empty-pods.json")],
        "check_watch_cache": ["--kubeconfig", str(OUT / "no-such-kubeconfig")],
        "check_longhorn_volumes": ["--kubeconfig", str(OUT / "no-such-kubeconfig")],
        "check_volume_attachments": ["--kubeconfig", str(OUT / "no-such-kubeconfig")],
    }
    # An idle node's kernel log and kubelet log: one harmless record each (an empty source is
    # UNKNOWN by design: it checked nothing).
    (OUT / "idle.kmsg").write_text("6,1,1000,-;Linux version 6.1.0 (an idle node)\n")
    (OUT / "idle.log").write_text('I1205 21:00:00.000000    1234 kubelet.go:2453] "SyncLoop ADD" source="api" pods=["default/idle-0"]\n')
    (OUT / "empty-pods.json").write_text('{"apiVersion":"v1","kind":"List","items":[]}')
    for c in sorted(p.name for p in (ROOT / "crates").glob("check_*")):
        if c not in idle_args:
            s.notes.append(f"{c}: no idle arguments in bench.py: not measured (add it to idle_args).")
        elif (BIN / c).exists():
            s.add(c, check(c, *idle_args[c]))
    glibc_row(s, "check_ro_pvc_mounts", "check_ro_pvc_mounts", *idle_args["check_ro_pvc_mounts"])
    extra_row(s, "check_ro_pvc_mounts", "check_ro_pvc_mounts", *idle_args["check_ro_pvc_mounts"])
    s.notes.append("Checks whose sources are missing here answer UNKNOWN (exit 3) after reading their options "
                   "(check_watch_cache, check_longhorn_volumes, check_volume_attachments: no API; "
                   "check_csi_node_plugins: no CSI driver and no API; check_jiva_rep_crashloop: no Jiva replica "
                   "in the empty list, UNKNOWN by design). The kernel and kubelet logs hold one harmless record "
                   "each (an empty source is UNKNOWN by design). Every check forks one worker (the watchdog's safety net), counted in its "
                   "CPU time and peak RSS.")
    if have("perl"):
        s.add("check_ro_mounts.pl (Perl peer)", ["perl", str(ROOT / "bench/peers/check_ro_mounts.pl")])
    venv_py = OUT / "venv" / "bin" / "python3"
    if venv_py.exists():
        s.add("nagiosplugin (Python peer)", [str(venv_py), str(ROOT / "bench/peers/check_ro_nagiosplugin.py")])
    else:
        s.notes.append("Python nagiosplugin peer skipped: bench/run creates bench/out/venv with `pip install nagiosplugin`.")
    for peer in ["/usr/lib/nagios/plugins/check_readonlyfs", "/usr/lib/nagios/plugins/check_disk"]:
        if os.path.exists(peer):
            s.add(f"{os.path.basename(peer)} (C peer)", [peer] + (["-w", "1%", "-c", "1%", "-p", "/"] if "check_disk" in peer else []))
            break
    return s


def mountinfo_scale(args):
    """50 000 real mounts in a private mount namespace (bench/c/mkmounts), read from procfs, and
    the same table copied to a regular file (secondary rows); real directories everywhere."""
    total = int(50_000 * args.scale)
    pv = total // 5
    base = OUT / "ns-node"
    base.mkdir(parents=True, exist_ok=True)
    kroot = str(base / "var/lib/kubelet")
    snap = OUT / f"mountinfo-ns-{total}"
    s = Scenario("mountinfo", f"check_ro_pvc_mounts on {total} real mounts ({pv} PV mounts: {pv // 2} volumes)",
                 "≤ 1.2× the C floor on procfs and on the file")
    if os.geteuid() != 0:
        s.notes.append("skipped: needs root (a private mount namespace)")
        return s
    s.wrapper = [str(FLOOR / "mkmounts"), str(base), str(total), str(pv), str(snap)]
    proc = "/proc/self/mountinfo"
    s.add("C floor (procfs)", [str(FLOOR / "floor_mounts"), proc, kroot], reference=True)
    s.add("grep -c kubelet (procfs)", ["grep", "-c", "kubelet", proc])
    pargs = ["--kubelet-root", kroot, "--no-names", "-t", "60"]
    s.add("check_ro_pvc_mounts (procfs)", check("check_ro_pvc_mounts", *pargs))
    glibc_row(s, "check_ro_pvc_mounts (procfs)", "check_ro_pvc_mounts", *pargs)
    extra_row(s, "check_ro_pvc_mounts (procfs)", "check_ro_pvc_mounts", *pargs)
    fref = "C floor (file)"
    s.add(fref, [str(FLOOR / "floor_mounts"), str(snap), kroot], ref=fref)
    s.add("grep -c kubelet (file)", ["grep", "-c", "kubelet", str(snap)], ref=fref)
    fargs = ["--mountinfo", str(snap), *pargs]
    s.add("check_ro_pvc_mounts --mountinfo (file)", check("check_ro_pvc_mounts", *fargs), ref=fref)
    glibc_row(s, "check_ro_pvc_mounts --mountinfo (file)", "check_ro_pvc_mounts", *fargs, ref=fref)
    extra_row(s, "check_ro_pvc_mounts --mountinfo (file)", "check_ro_pvc_mounts", *fargs, ref=fref)
    s.notes.append("Mounts: a tmpfs per volume on its CSI staging directory, bind-mounted on the pod's volume "
                   "directory; container root filesystems (binds), projected tokens and secrets (a tmpfs each) "
                   "fill the table; the host's own mounts are in it too. The (file) rows read the same table "
                   "copied to a regular file (page cache). The C floor (bench/c/floor_mounts.c) validates and "
                   "splits every line, keeps the kubelet volume mounts, groups them by device, checks `ro`, and "
                   "probes each volume once (stat, statfs, open, getdents64) on as many threads as CPUs.")
    return s


def kubelet_log(args):
    import gen_kubelet_log

    mib = int(200 * args.scale)
    log = OUT / f"kubelet-{mib}MiB.log"
    # The generated lines are dated up to the time of generation: regenerate a stale log so its
    # failures fall in the check's window (the check parses them, as on a sick node).
    if not log.exists() or time.time() - log.stat().st_mtime > 300:
        print(f"generating {log} ...", file=sys.stderr)
        with open(log, "w") as f:
            gen_kubelet_log.main(mib * 1024 * 1024, f)
    s = Scenario("kubelet_log", f"check_kubelet_nested_ops over a {mib} MiB kubelet log (0.1 % volume errors)",
                 "≤ 2× the floor (read() and line split), memory constant in the log size")
    s.rounds = max(3, args.rounds // 3)
    s.add("read() + line split (the floor)", [str(FLOOR / "floor_lines"), str(log)], reference=True)
    s.add("grep -F -c (the old reference)", ["grep", "-F", "-c", "No retries permitted", str(log)])
    s.add("check_kubelet_nested_ops", check("check_kubelet_nested_ops", "--log-file", str(log), "-t", "120"))
    extra_row(s, "check_kubelet_nested_ops", "check_kubelet_nested_ops", "--log-file", str(log), "-t", "120")
    clf = "/usr/lib/nagios/plugins/check_logfiles"
    if os.path.exists(clf):
        d = OUT / "check_logfiles"
        s.add("check_logfiles (Perl peer)", ["sh", "-c",
              f"rm -rf {d}; mkdir -p {d}; exec {clf} --logfile {log} --criticalpattern 'No retries permitted' "
              f"--tag kubelet --seekfilesdir {d} --protocolsdir {d} --allyoucaneat"])
    else:
        s.notes.append("check_logfiles skipped: apt-get install monitoring-plugins-check-logfiles.")
    state = OUT / "state"
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir()
    subprocess.run(check("check_kubelet_nested_ops", "--log-file", str(log), "--state-dir", str(state), "-t", "120"),
                   stdout=subprocess.DEVNULL)
    s.add("check_kubelet_nested_ops --state-dir, log unchanged", check("check_kubelet_nested_ops", "--log-file", str(log), "--state-dir", str(state), "-t", "120"))
    s.notes.append(f"Log size {log.stat().st_size / 1024 / 1024:.0f} MiB. The --state-dir row runs after a priming run, so it reads nothing new.")
    return s


def pods_json(args):
    import gen_pods

    n = int(20_000 * args.scale)
    f = OUT / f"pods-{n}.json"
    if not f.exists():
        print(f"generating {f} ...", file=sys.stderr)
        with open(f, "w") as out:
            gen_pods.main(n, out)
    mib = f.stat().st_size / 1024 / 1024
    s = Scenario("pods_json", f"check_stuck_scheduled on {n} pods ({mib:.0f} MiB): file, stdin, loopback API",
                 "≥ 10× faster than jq and ≤ 5 µs per pod, through stdin and the API")
    s.rounds = max(3, args.rounds // 3)
    rule = ('[.items[] | select(.status.phase == "Pending"'
            ' and ((.status.conditions // []) | any(.type == "PodScheduled" and .status == "True"))'
            ' and ((.status.containerStatuses // []) | length == 0)'
            ' and ((.status.initContainerStatuses // []) | length == 0))] | length')
    if not have("jq"):
        s.notes.append("skipped: jq is the reference (apt-get install jq)")
        return s
    s.add("jq (same rule), stdin", ["jq", rule], stdin=str(f), reference=True)
    s.per["jq (same rule), stdin"] = (n, "pod")
    s.per["check_stuck_scheduled --pods-json - (stdin)"] = (n, "pod")
    s.per["check_stuck_scheduled --pods-json FILE"] = (n, "pod")
    s.per["check_stuck_scheduled --kubeconfig (loopback API, 500 per page)"] = (n, "pod")
    s.add("check_stuck_scheduled --pods-json - (stdin)", check("check_stuck_scheduled", "--pods-json", "-", "--all-nodes", "-t", "120"), stdin=str(f))
    extra_row(s, "check_stuck_scheduled --pods-json - (stdin)", "check_stuck_scheduled", "--pods-json", "-", "--all-nodes", "-t", "120", stdin=str(f))
    s.add("check_stuck_scheduled --pods-json FILE", check("check_stuck_scheduled", "--pods-json", str(f), "--all-nodes", "-t", "120"))
    glibc_row(s, "check_stuck_scheduled --pods-json - (stdin)", "check_stuck_scheduled", "--pods-json", "-", "--all-nodes", "-t", "120", stdin=str(f))
    # The loopback API server (bench/api_pods.py) runs for the scenario's length.
    api = OUT / "api"
    srv = subprocess.Popen([sys.executable, str(ROOT / "bench/api_pods.py"), str(f), str(api)],
                           stdout=subprocess.PIPE, text=True)
    ready = srv.stdout.readline().split()
    if not ready or ready[0] != "ready":
        s.notes.append("API rows skipped: bench/api_pods.py did not start")
        return s
    s.server = srv
    port, pages = ready[1], int(ready[2])
    kc = str(api / "kubeconfig")
    s.add("check_stuck_scheduled --kubeconfig (loopback API, 500 per page)",
          check("check_stuck_scheduled", "--kubeconfig", kc, "--all-nodes", "-t", "120"))
    extra_row(s, "check_stuck_scheduled --kubeconfig (loopback API, 500 per page)", "check_stuck_scheduled",
              "--kubeconfig", kc, "--all-nodes", "-t", "120")
    if have("curl"):
        urls = " ".join(f"'https://127.0.0.1:{port}/api/v1/pods?limit=500" + (f"&continue={i}'" if i else "'")
                        for i in range(pages))
        curl = f"curl -sS --cacert {api}/ca.crt -H 'Authorization: Bearer bench-token' {urls}"
        s.add("curl (every page, one connection: the transfer alone)", ["sh", "-c", curl])
        jq_pages = rule.replace(".items[]", "inputs | .items[]")
        s.add("curl | jq (same rule)", ["sh", "-c", f"{curl} | jq -n '{jq_pages}'"])
    s.notes.append("The API is bench/api_pods.py, a loopback HTTPS server that serves the same pods as PodList pages "
                   "of 500 (it says at its top why not the real kube-apiserver); its own CPU is not in the rows' CPU "
                   "time (it runs on the other core). The file row: a file over 32 MiB is streamed like stdin.")
    return s


def kmsg_patterns_for_records():
    """bench/kmsg_patterns.ere (the check's rules, `^` = start of a record's text) anchored on the
    text of a `prio,seq,usec,flags;text` line, so that grep matches what the check matches."""
    src = (ROOT / "bench" / "kmsg_patterns.ere").read_text().splitlines()
    out = []
    for p in src:
        p = p.replace("(^|: )", "(;|: )")
        if p.startswith("^"):
            p = "^[^;]*;" + p[1:]
        out.append(p)
    f = OUT / "kmsg_patterns_records.ere"
    f.write_text("\n".join(out) + "\n")
    return f


def kmsg(args):
    import gen_kmsg

    pats = kmsg_patterns_for_records()
    big = int(1_000_000 * args.scale)
    s = Scenario("kmsg", f"check_storage_kernel_errors over 10^4 and {big} kmsg records (0.5 % storage errors, 15 % storage noise)",
                 "≤ 3× grep -E over the check's own patterns at 10^6 records; every record in the default window within the default -t 10")
    s.rounds = max(3, args.rounds // 3)
    for n in (10_000, big):
        log = OUT / f"kmsg-{n}.txt"
        # Timestamps are CLOCK_MONOTONIC of the generation: regenerate a log older than 4 minutes so
        # that every record is inside the default 15-minute window of the in-window row.
        if not log.exists() or time.time() - log.stat().st_mtime > 240:
            print(f"generating {log} ...", file=sys.stderr)
            with open(log, "w") as f:
                gen_kmsg.main(n, f)
        ref = f"grep -E -c -f (the check's patterns), {n} records"
        s.add(ref, ["grep", "-E", "-c", "-f", str(pats), str(log)], ref=ref)
        s.add(f"read() + line split, {n} records", [str(FLOOR / "floor_lines"), str(log)], ref=ref)
        kargs = ["--kmsg", str(log), "--no-names"]
        s.per[f"check_storage_kernel_errors --window 0, {n} records"] = (n, "record")
        s.per[ref] = (n, "record")
        s.add(f"check_storage_kernel_errors --window 0, {n} records", check("check_storage_kernel_errors", *kargs, "--window", "0", "-t", "60"), ref=ref)
        extra_row(s, f"check_storage_kernel_errors --window 0, {n} records", "check_storage_kernel_errors", *kargs, "--window", "0", "-t", "60", ref=ref)
        if n == big:
            s.add(f"check_storage_kernel_errors (default --window 15m, -t 10: every record in it), {n} records",
                  check("check_storage_kernel_errors", *kargs), ref=ref)
            glibc_row(s, f"check_storage_kernel_errors --window 0, {n} records", "check_storage_kernel_errors", *kargs, "--window", "0", "-t", "60", ref=ref)
            s.notes.append(f"Log of {n} records: {log.stat().st_size / 1024 / 1024:.0f} MiB, generated by bench/gen_kmsg.py; the grep patterns are "
                           "bench/kmsg_patterns.ere (the check's rule table, a unit test keeps them equal) anchored on each line's text. "
                           "The check rows exit 2: the log holds CRITICAL records.")
    return s


class ScriptScenario(Scenario):
    """Commands that time the check themselves (setup excluded) and print `wall SECONDS`."""

    def run(self, rounds):
        rows = []
        for label, argv, _, _ in self.cmds:
            walls = []
            for _ in range(rounds):
                p = subprocess.run(argv, capture_output=True, text=True)
                for line in p.stdout.splitlines():
                    if line.startswith("wall "):
                        walls.append(float(line.split()[1]))
            if walls:
                rows.append((label, statistics.median(walls), float("nan"), "", "", 0, p.returncode, None))
            else:
                rows.append((label, float("nan"), float("nan"), "failed: " + p.stderr.strip()[-120:], "", 0, p.returncode, None))
        return rows


def stale_mounts(args):
    s = ScriptScenario("stale_mounts", "check_stale_csi_mounts on healthy and hung mounts (--probe-timeout 3s)",
                       "wall time bounded by --probe-timeout, not by the number of mounts")
    s.rounds = 3
    if os.geteuid() != 0 or not have("bindfs") or not (BIN / "check_stale_csi_mounts").exists():
        s.notes.append("skipped: needs root, bindfs and check_stale_csi_mounts")
        return s
    script = str(ROOT / "bench/stale_mounts.sh")
    b = str(BIN / "check_stale_csi_mounts")
    for healthy, hung in [(200, 0), (0, 1), (0, 20), (200, 20)]:
        s.add(f"{healthy} healthy, {hung} hung", ["unshare", "-m", "--propagation", "private", script, b, str(healthy), str(hung), "3s"])
    s.notes.append("Each run builds its mounts first (tmpfs pairs and SIGSTOPped bindfs daemons) in a private mount namespace; "
                   "only the check is timed. Probes run on a pool of threads; a hung probe's thread is abandoned and replaced.")
    return s


SCENARIOS = {"idle": idle, "mountinfo": mountinfo_scale, "kubelet_log": kubelet_log, "kmsg": kmsg, "pods_json": pods_json, "stale_mounts": stale_mounts}


def sizes():
    """(label, MiB, goal MiB or None) rows: the one program and what an install puts on disk."""
    prog = BIN / "k8s-storage-checks"
    if not prog.exists():
        return []
    mib = prog.stat().st_size / 1024 / 1024
    listed = subprocess.run([str(prog), "--list"], capture_output=True, text=True).stdout.split("\n")
    copies = sorted({l.split()[1] for l in listed if len(l.split()) > 1})
    names = [l.split()[0] for l in listed if l.strip()]
    return [
        (f"k8s-storage-checks (every check; {len(names)} names link to it)", mib, 5),
        (f"installed: {len(copies)} copies, one per capability set ({', '.join(copies)})", mib * len(copies), 10),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if not LAUNCH.exists():
        sys.exit("bench: bench/out/bin/launch is missing: run bench/run (it compiles bench/c/*.c)")
    only = [x for x in args.only.split(",") if x]
    lines = []
    lines.append(f"Machine: {platform.node()}, {os.cpu_count()} cores, kernel {platform.release()}, "
                 f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; binaries {BIN.parent.name}; --scale {args.scale}, --rounds {args.rounds}, "
                 f"load average at start {os.getloadavg()[0]:.2f}.")
    lines.append("")
    for name, make in SCENARIOS.items():
        if only and name not in only:
            continue
        s = make(args)
        print(f"== {s.title}", file=sys.stderr)
        rounds = s.__dict__.get("rounds", args.rounds)
        load0 = os.getloadavg()[0]
        try:
            rows = s.run(rounds) if s.cmds else []
        finally:
            if getattr(s, "server", None):
                s.server.terminate()
                s.server.wait()
        load1 = os.getloadavg()[0]
        first = len(lines)
        lines.append(f"### {s.title}")
        lines.append("")
        how = ("each run times the check itself" if isinstance(s, ScriptScenario)
               else "interleaved (after one warm-up round)")
        lines.append(f"Goal: {s.goal}. Rounds: {rounds}, {how}. "
                     f"Load average (1 min) {load0:.2f} at the start, {load1:.2f} at the end.")
        lines.append("")
        lines.append("| command | wall (median) | CPU (median) | vs reference, wall | vs reference, CPU | peak RSS | exit |")
        lines.append("|---|---|---|---|---|---|---|")
        for label, wall, cpu, ratio, cratio, rss, code, ref in rows:
            mem = f"{rss / 1024:.1f} MiB" if rss else "–"
            name = f"**{label}**" if label == ref else label
            lines.append(f"| {name} | {fmt_time(wall)} | {fmt_time(cpu)} | {ratio} | {cratio} | {mem} | {code} |")
        if any(r[7] for r in rows):
            lines.append("")
            lines.append("The reference of each row is the **bold** row above it (for the ratios).")
        per = [f"{label}: {cpu / s.per[label][0] * 1e6:.2f} µs" for label, _, cpu, *_ in rows if label in s.per]
        if per:
            unit = next(iter(s.per.values()))[1]
            lines.append("")
            lines.append(f"CPU time per {unit}: " + "; ".join(per) + ".")
        for n in s.notes:
            lines.append("")
            lines.append(n)
        lines.append("")
        print("\n".join(lines[first:]), file=sys.stderr)
    lines.append(f"### Size (stripped, static, {BIN.parent.name})")
    lines.append("")
    glibc = BIN != GLIBC_BIN and (GLIBC_BIN / "k8s-storage-checks").exists()
    lines.append("| what | size | goal |" + (" static glibc build |" if glibc else ""))
    lines.append("|---|---|---|" + ("---|" if glibc else ""))
    gmib = (GLIBC_BIN / "k8s-storage-checks").stat().st_size / 1024 / 1024 if glibc else 0
    for label, mib, goal in sizes():
        extra = f" {gmib * (mib / sizes()[0][1]):.2f} MiB |" if glibc else ""
        lines.append(f"| {label} | {mib:.2f} MiB | {f'≤ {goal} MiB' if goal else '–'} |{extra}")
    lines.append("")
    lines.append(f"Load average at the end: {os.getloadavg()[0]:.2f} (1 min), {os.getloadavg()[1]:.2f} (5 min).")
    table = "\n".join(lines) + "\n"
    (OUT / "results.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
