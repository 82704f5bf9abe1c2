#!/usr/bin/env python3
"""Benchmarks: the cost of a check run, side by side with peers and limits (issue 8).

Every scenario runs its commands interleaved (round 1: A B C, round 2: A B C, ...) so that load
on the machine hits all of them alike; the table shows medians, the ratio to the scenario's
reference, and peak RSS from wait4(2) (the child and everything it waited for).

    bench/run [--scale S] [--rounds N] [--only NAME,...]

Inputs are generated deterministically under bench/out/; --scale multiplies their sizes
(1.0 = the sizes the issue names, except the kubelet log, 1 GiB at --scale 5).
"""
import argparse, json, os, platform, random, shutil, statistics, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
# bench/run sets both from ./build-static, the one place that knows where release binaries are.
BIN = Path(os.environ.get("BENCH_BIN_DIR") or ROOT / "target" / "x86_64-unknown-linux-musl" / "release")
# Static glibc builds of the same checks, when present (bench/run --with-glibc builds them): shown
# beside the musl ones so the choice of libc is measured, not asserted.
GLIBC_BIN = Path(os.environ.get("BENCH_GLIBC_BIN_DIR") or ROOT / "target" / "x86_64-unknown-linux-gnu" / "release")
STDOUT = OUT / "stdout"
sys.path.insert(0, str(ROOT / "bench"))


def have(tool):
    return shutil.which(tool) is not None


def run_once(cmd, env=None, stdin=None):
    """Run cmd with posix_spawn (vfork: no copy of this Python process is made, so neither the
    time nor the child's peak RSS carries the launcher's weight). Returns (wall s, exit code)."""
    path = shutil.which(cmd[0]) or cmd[0]
    # stdout goes to a regular file, not /dev/null: GNU grep notices a /dev/null stdout and stops
    # at the first match (it behaves like -q), which would make the reference look ~50× faster.
    fa = [(os.POSIX_SPAWN_OPEN, 1, str(STDOUT), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
          (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0),
          (os.POSIX_SPAWN_OPEN, 0, stdin or "/dev/null", os.O_RDONLY, 0)]
    start = time.perf_counter()
    pid = os.posix_spawn(path, cmd, env if env is not None else os.environ, file_actions=fa)
    _, status = os.waitpid(pid, 0)
    wall = time.perf_counter() - start
    return wall, os.waitstatus_to_exitcode(status)


def peak_rss_kib(cmd, env=None, stdin=None):
    """Peak RSS of one run, as GNU time reports it (the child and what it waited for)."""
    if not os.path.exists("/usr/bin/time"):
        return 0
    fin = open(stdin, "rb") if stdin else subprocess.DEVNULL
    with open(STDOUT, "wb") as out:
        p = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], stdout=out,
                           stderr=subprocess.PIPE, stdin=fin, env=env, text=True)
    if stdin:
        fin.close()
    try:
        return int(p.stderr.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return 0


class Scenario:
    def __init__(self, name, title, goal):
        self.name, self.title, self.goal = name, title, goal
        self.cmds = []  # (label, argv, kwargs)
        self.reference = None
        self.notes = []

    def add(self, label, argv, reference=False, **kw):
        self.cmds.append((label, argv, kw))
        if reference:
            self.reference = label

    def run(self, rounds):
        times = {l: [] for l, _, _ in self.cmds}
        rss = {l: 0 for l, _, _ in self.cmds}
        codes = {}
        for _ in range(rounds):
            for label, argv, kw in self.cmds:
                w, c = run_once(argv, **kw)
                times[label].append(w)
                codes[label] = c
        for label, argv, kw in self.cmds:
            rss[label] = peak_rss_kib(argv, **kw)
        ref = statistics.median(times[self.reference]) if self.reference else None
        rows = []
        for label, _, _ in self.cmds:
            med = statistics.median(times[label])
            ratio = f"{med / ref:.2f}×" if ref else ""
            rows.append((label, med, ratio, rss[label], codes[label]))
        return rows


def fmt_time(s):
    return f"{s * 1000:.2f} ms" if s < 1 else f"{s:.3f} s"


def check(name, *args):
    return [str(BIN / name), *args]


def glibc_row(s, label, name, *args):
    """Add the static glibc build of `name` to scenario `s`, if it was built."""
    if BIN != GLIBC_BIN and (GLIBC_BIN / name).exists():
        s.add(f"{label} (static glibc build)", [str(GLIBC_BIN / name), *args])


# ---------------------------------------------------------------------------------------------
# Scenarios


def idle(args):
    s = Scenario("idle", "Idle node, every check: one run", "within 1.5× of /bin/true, ≤ 4 MiB peak RSS")
    s.add("/bin/true", ["/bin/true"], reference=True)
    empty = OUT / "empty-kubelet"
    empty.mkdir(parents=True, exist_ok=True)
    idle_args = {
        "check_ro_pvc_mounts": ["--kubelet-root", str(empty)],
        "check_stale_csi_mounts": ["--kubelet-root", str(empty)],
        "check_pv_capacity": ["--kubelet-root", str(empty)],
        "check_iscsi_sessions": [],
        "check_storage_kernel_errors": ["--kmsg", str(OUT / "empty.kmsg")],
        "check_kubelet_nested_ops": ["--log-file", str(OUT / "empty.log")],
        "check_stuck_scheduled": ["--all-nodes", "--pods-json", str(OUT / "empty-pods.json")],
        "check_jiva_rep_crashloop": ["--pods-json", str(OUT / "empty-pods.json")],
        "check_stuck_terminating": ["--all-nodes", "--pods-json", str(OUT / "empty-pods.json")],
        "check_watch_cache": ["--kubeconfig", str(OUT / "no-such-kubeconfig")],
    }
    (OUT / "empty.kmsg").write_text("")
    (OUT / "empty.log").write_text("")
    (OUT / "empty-pods.json").write_text('{"apiVersion":"v1","kind":"List","items":[]}')
    for c in sorted(p.name for p in (ROOT / "crates").glob("check_*")):
        if (BIN / c).exists() and c in idle_args:
            s.add(c, check(c, *idle_args[c]))
    glibc_row(s, "check_ro_pvc_mounts", "check_ro_pvc_mounts", *idle_args["check_ro_pvc_mounts"])
    s.notes.append("check_watch_cache has no API to talk to here: it answers UNKNOWN (exit 3) after reading its options; check_jiva_rep_crashloop finds no Jiva replica in the empty list, which is UNKNOWN by design (issue 17: no silent OK).")
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
    import gen_mountinfo

    total = int(50_000 * args.scale)
    mi = OUT / f"mountinfo-{total}"
    kroot = OUT / "node" / "var/lib/kubelet"
    (kroot / "pods").mkdir(parents=True, exist_ok=True)
    if not mi.exists():
        with open(mi, "w") as f:
            gen_mountinfo.main(total, total // 5, f, str(kroot))
    s = Scenario("mountinfo", f"check_ro_pvc_mounts on a mountinfo of {total} mounts ({total // 5} PV mounts)", "≤ 3× grep -c")
    s.add("grep -c kubelet", ["grep", "-c", "kubelet", str(mi)], reference=True)
    margs = ["--mountinfo", str(mi), "--kubelet-root", str(kroot), "--no-names", "-t", "60"]
    s.add("check_ro_pvc_mounts", check("check_ro_pvc_mounts", *margs))
    glibc_row(s, "check_ro_pvc_mounts", "check_ro_pvc_mounts", *margs)
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
                 "≤ 2× grep -F -c (≈ 50× faster than check_logfiles), memory constant in the log size")
    s.rounds = max(3, args.rounds // 3)
    s.add("grep -F -c", ["grep", "-F", "-c", "No retries permitted", str(log)], reference=True)
    s.add("check_kubelet_nested_ops", check("check_kubelet_nested_ops", "--log-file", str(log), "-t", "120"))
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
    s = Scenario("pods_json", f"check_stuck_scheduled --pods-json on {n} pods ({mib:.0f} MiB)",
                 f"≥ 10× faster than jq, peak memory ≤ 1.2× the input ({1.2 * mib:.0f} MiB)")
    s.rounds = max(3, args.rounds // 3)
    rule = ('[.items[] | select(.status.phase == "Pending"'
            ' and ((.status.conditions // []) | any(.type == "PodScheduled" and .status == "True"))'
            ' and ((.status.containerStatuses // []) | length == 0)'
            ' and ((.status.initContainerStatuses // []) | length == 0))] | length')
    if have("jq"):
        s.add("jq (same rule)", ["jq", rule, str(f)], reference=True)
    s.add("check_stuck_scheduled", check("check_stuck_scheduled", "--pods-json", str(f), "--all-nodes", "-t", "120"),
          reference=not have("jq"))
    glibc_row(s, "check_stuck_scheduled", "check_stuck_scheduled", "--pods-json", str(f), "--all-nodes", "-t", "120")
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

    n = int(1_000_000 * args.scale)
    log = OUT / f"kmsg-{n}.txt"
    # Timestamps are CLOCK_MONOTONIC of the generation: regenerate a log older than 4 minutes so
    # that every record is inside the default 15-minute window of the in-window row.
    if not log.exists() or time.time() - log.stat().st_mtime > 240:
        print(f"generating {log} ...", file=sys.stderr)
        with open(log, "w") as f:
            gen_kmsg.main(n, f)
    pats = kmsg_patterns_for_records()
    s = Scenario("kmsg", f"check_storage_kernel_errors over {n} kmsg records (0.5 % storage errors, 15 % storage noise)",
                 "≤ 3× grep -E over the check's own patterns; every record in the default window within the default -t 10")
    s.rounds = max(3, args.rounds // 3)
    s.add("grep -E -c -f (the check's 38 patterns)", ["grep", "-E", "-c", "-f", str(pats), str(log)], reference=True)
    s.add("wc -l (read() and line split: the floor)", ["wc", "-l", str(log)])
    kargs = ["--kmsg", str(log), "--no-names"]
    s.add("check_storage_kernel_errors --window 0", check("check_storage_kernel_errors", *kargs, "--window", "0", "-t", "60"))
    s.add("check_storage_kernel_errors (default --window 15m, -t 10: every record in it)",
          check("check_storage_kernel_errors", *kargs))
    glibc_row(s, "check_storage_kernel_errors --window 0", "check_storage_kernel_errors", *kargs, "--window", "0", "-t", "60")
    s.notes.append(f"Log {log.stat().st_size / 1024 / 1024:.0f} MiB, generated by bench/gen_kmsg.py; the grep patterns are "
                   "bench/kmsg_patterns.ere (the check's rule table, a unit test keeps them equal) anchored on each line's text. "
                   "Both check rows exit 2: the log holds CRITICAL records.")
    return s


class ScriptScenario(Scenario):
    """Commands that time the check themselves (setup excluded) and print `wall SECONDS`."""

    def run(self, rounds):
        rows = []
        for label, argv, kw in self.cmds:
            walls = []
            for _ in range(rounds):
                p = subprocess.run(argv, capture_output=True, text=True)
                for line in p.stdout.splitlines():
                    if line.startswith("wall "):
                        walls.append(float(line.split()[1]))
            if walls:
                rows.append((label, statistics.median(walls), "", 0, p.returncode))
            else:
                rows.append((label, float("nan"), "failed: " + p.stderr.strip()[-120:], 0, p.returncode))
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
        (f"installed: {len(copies)} copies, one per capability set ({', '.join(copies)})", mib * len(copies), None),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
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
        rows = s.run(rounds)
        lines.append(f"### {s.title}")
        lines.append("")
        lines.append(f"Goal: {s.goal}. Rounds: {rounds}, interleaved.")
        lines.append("")
        lines.append("| command | median | vs reference | peak RSS | exit |")
        lines.append("|---|---|---|---|---|")
        for label, med, ratio, rss, code in rows:
            mem = f"{rss / 1024:.1f} MiB" if rss else "–"
            lines.append(f"| {label} | {fmt_time(med)} | {ratio} | {mem} | {code} |")
        for n in s.notes:
            lines.append("")
            lines.append(n)
        lines.append("")
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
