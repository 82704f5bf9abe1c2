//! k8s-storage-checks-textfile: the Prometheus way out of the container.
//!
//! Runs each configured check with `--format prometheus` (and `--host-root DIR` in container
//! mode) every `--interval`, one after the other, and writes its output to `<dir>/<check>.prom`
//! through a temporary file and `rename`, so node_exporter's textfile collector never reads a
//! half-written file. A check that does not end in 0..3 with metrics (crashed, killed after
//! `--kill-after`, binary missing) still gets a file: `k8s_storage_check_status` 3 (UNKNOWN)
//! with the reason as a comment, so a broken check alerts instead of going stale silently.
//!
//! Why a binary and not a shell loop: the plain image is `FROM scratch` (the checks are fully
//! static), so there is no shell to run a loop in; this is ~300 lines with no dependency beyond
//! the suite's own, and it also reaps orphaned probe children and stops on SIGTERM when it runs
//! as the container's PID 1.

use clap::Parser;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub mod exposition;
pub mod serve;
pub mod webconfig;

#[derive(Parser, Debug)]
#[command(
    name = "k8s-storage-checks-textfile",
    version,
    about = "Run the checks on a schedule and write node_exporter textfile-collector files",
    long_about = "Run the checks on a schedule and write node_exporter textfile-collector files.\n\n\
Each --check is a binary name (looked up in --plugin-dir) followed by its arguments, split at \
whitespace. It runs with --format prometheus added (and --host-root DIR when given), and its \
output replaces <dir>/<binary>.prom atomically (temporary file + rename)."
)]
pub struct Opts {
    /// Directory the node_exporter textfile collector reads (--collector.textfile.directory)
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,

    /// Time between the starts of two rounds
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = plugin::args::duration)]
    pub interval: Duration,

    /// Passed to every check as --host-root (container mode, e.g. /host)
    #[arg(long, value_name = "DIR")]
    pub host_root: Option<PathBuf>,

    /// Where the check binaries are
    #[arg(long, value_name = "DIR", default_value = "/usr/lib/nagios/plugins")]
    pub plugin_dir: PathBuf,

    /// A check and its arguments, e.g. "check_ro_pvc_mounts -t 20" (repeatable)
    #[arg(long = "check", value_name = "COMMAND", required = true)]
    pub checks: Vec<String>,

    /// Kill a check still running after this long (its own -t should end it well before)
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = plugin::args::duration)]
    pub kill_after: Duration,

    /// Run one round and exit
    #[arg(long)]
    pub once: bool,
}

/// One check to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Binary name: the file is `<name>.prom`, the metrics' `check` label is the same.
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl Job {
    /// The check's own `-t`/`--timeout` in seconds (the plugins' default, 10, when not given):
    /// the runner gives it that long plus a grace before it kills it.
    pub fn timeout(&self) -> Duration {
        let mut it = self.args.iter();
        let mut secs: Option<f64> = None;
        while let Some(a) = it.next() {
            let v = if a == "-t" || a == "--timeout" {
                it.next().cloned()
            } else {
                a.strip_prefix("--timeout=")
                    .or_else(|| a.strip_prefix("-t").filter(|v| !v.is_empty()))
                    .map(str::to_string)
            };
            if let Some(v) = v {
                secs = v.split(':').next().and_then(|n| n.parse().ok());
            }
        }
        Duration::from_secs_f64(secs.filter(|s| *s > 0.0 && *s < 86400.0).unwrap_or(10.0))
    }
}

/// Turn the `--check` lines into jobs. Errors name the offending line.
pub fn jobs(o: &Opts) -> Result<Vec<Job>, String> {
    jobs_from(&o.checks, &o.plugin_dir, o.host_root.as_deref())
}

/// [`jobs`] from the check lines, the plugin directory and the host root alone (the `serve`
/// mode's lines come from its options or its config file).
pub fn jobs_from(
    lines: &[String],
    plugin_dir: &Path,
    host_root: Option<&Path>,
) -> Result<Vec<Job>, String> {
    let mut out: Vec<Job> = Vec::new();
    for line in lines {
        let mut words = line.split_whitespace().map(str::to_string);
        let Some(first) = words.next() else {
            return Err("empty --check".into());
        };
        let mut args: Vec<String> = words.collect();
        let name = Path::new(&first)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!("--check {line:?}: not a check binary name"));
        }
        if args
            .iter()
            .any(|a| a == "--format" || a.starts_with("--format="))
        {
            return Err(format!(
                "--check {line:?}: --format is set by the runner (prometheus)"
            ));
        }
        if out.iter().any(|j| j.name == name) {
            return Err(format!(
                "--check {line:?}: {name} is configured twice (one file per check)"
            ));
        }
        let program = if first.contains('/') {
            PathBuf::from(&first)
        } else {
            plugin_dir.join(&first)
        };
        args.extend(["--format".to_string(), "prometheus".to_string()]);
        if let Some(h) = host_root {
            if !args
                .iter()
                .any(|a| a == "--host-root" || a.starts_with("--host-root="))
            {
                args.push("--host-root".into());
                args.push(h.display().to_string());
            }
        }
        out.push(Job {
            name,
            program,
            args,
        });
    }
    Ok(out)
}

/// The file written when a check gave no usable answer: status UNKNOWN, and why as a comment.
pub fn unknown_metrics(name: &str, reason: &str) -> String {
    let reason: String = reason
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(400)
        .collect();
    format!(
        "# k8s-storage-checks-textfile: {name} gave no metrics: {reason}\n{}",
        plugin::render::prometheus_status(name, plugin::Status::Unknown)
    )
}

/// Run one check and return the text for its file.
pub fn run_job(job: &Job, kill_after: Duration) -> String {
    run_job_capped(job, kill_after, OUTPUT_MAX)
}

/// [`run_job`] with a cap on the check's output other than the runner's 64 MiB (`serve` keeps
/// every answer in memory and has its own, smaller one).
pub fn run_job_capped(job: &Job, kill_after: Duration, output_max: u64) -> String {
    // stdin: an empty pipe, not /dev/null (works even where /dev is not populated).
    let mut child = match Command::new(&job.program)
        .args(&job.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            return unknown_metrics(
                &job.name,
                &format!("cannot run {}: {e}", job.program.display()),
            )
        }
    };
    drop(child.stdin.take());
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    // One byte past the cap at most; then the pipe is closed (the check gets EPIPE). `None`:
    // more than the cap.
    let reader = std::thread::spawn(move || {
        // A read error keeps what the check's exit code and status series say (none: UNKNOWN).
        plugin::capped::read_capped(&mut stdout, output_max).unwrap_or(Some(Vec::new()))
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stderr).take(4096).read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + kill_after;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break None,
        }
    };
    let Some(status) = status else {
        return unknown_metrics(
            &job.name,
            &format!(
                "killed after {} (its -t watchdog did not end it)",
                plugin::fmt_duration(kill_after)
            ),
        );
    };
    // A killed check's stdout may still be held by nothing else: probes close theirs first.
    let out = reader.join().unwrap_or(Some(Vec::new()));
    let err = err_reader.join().unwrap_or_default();
    let Some(out) = out else {
        return unknown_metrics(
            &job.name,
            &format!(
                "more than {} MiB of output (the cap of one check's metrics)",
                output_max >> 20
            ),
        );
    };
    let text = String::from_utf8_lossy(&out).into_owned();
    match status.code() {
        Some(0..=3) if text.contains(&format!("{}{{", plugin::render::STATUS_METRIC)) => text,
        code => {
            let first_err = String::from_utf8_lossy(&err)
                .lines()
                .next()
                .unwrap_or("")
                .to_string();
            let how = match code {
                Some(c) => format!("exit {c}"),
                None => "killed by a signal".into(),
            };
            let first_out = text.lines().next().unwrap_or("").to_string();
            unknown_metrics(&job.name, &format!("{how}: {first_out} {first_err}"))
        }
    }
}

/// Replace `<dir>/<name>.prom` atomically through [`node::atomic::replace`], the suite's one
/// atomic writer: a dot-file (the collector reads `*.prom` only) with a random name, created new
/// (`O_CREAT|O_EXCL|O_NOFOLLOW`) under a descriptor of the directory, mode 0644 set on the open
/// file, fsynced, renamed over the old file, the directory fsynced. A link planted by whoever else
/// may write the directory (the runner may run as root in container mode) is never written
/// through, at the temporary name or the final one.
pub fn write_atomic(dir: &Path, name: &str, content: &str) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::OpenOptionsExt;
    let d = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY)
        .open(dir)?;
    node::atomic::replace(
        d.as_fd(),
        &format!("{name}.prom"),
        content.as_bytes(),
        0o644,
    )
}

/// [`write_atomic`], and when it fails, remove the previous `<name>.prom`: left in place it
/// would be exported on every scrape as if fresh (node_exporter's file mtime metric is all that
/// would tell). Without the file the series go stale and the missing-status alert fires. The
/// error names the file and says what became of the old one.
pub fn publish(dir: &Path, name: &str, content: &str) -> Result<(), String> {
    let Err(e) = write_atomic(dir, name, content) else {
        return Ok(());
    };
    let old = dir.join(format!("{name}.prom"));
    // unlink never follows a link.
    let then = match std::fs::remove_file(&old) {
        Ok(()) => "removed the previous one so its metrics do not look fresh".to_string(),
        Err(r) if r.kind() == std::io::ErrorKind::NotFound => "no previous one".to_string(),
        Err(r) => {
            format!("the previous one could not be removed either ({r}): its metrics are stale")
        }
    };
    Err(format!("writing {}: {e}; {then}", old.display()))
}

/// The most a check's metrics may take (10 000 volumes' series are a few MiB).
const OUTPUT_MAX: u64 = 64 << 20;

pub(crate) static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: nix::libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

pub(crate) fn install_signal_handlers() {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let act = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for s in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores to an atomic.
        let _ = unsafe { sigaction(s, &act) };
    }
}

/// Reap children that are not ours to wait for: probes abandoned by a check that timed out are
/// re-parented to PID 1, which is this process when it is the container's entrypoint.
pub(crate) fn reap_orphans() {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    while let Ok(s) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
        if s == WaitStatus::StillAlive {
            break;
        }
    }
}

pub fn main() -> i32 {
    main_from(std::env::args_os())
}

/// [`main`] with the arguments given (the first one names the program): the multicall binary's
/// entry point for the runner.
pub fn main_from(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    let o = match Opts::try_parse_from(args) {
        Ok(o) => o,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let jobs = match jobs(&o) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("k8s-storage-checks-textfile: {e}");
            return 2;
        }
    };
    if !o.dir.is_dir() {
        eprintln!(
            "k8s-storage-checks-textfile: {} is not a directory",
            o.dir.display()
        );
        return 1;
    }
    install_signal_handlers();
    eprintln!(
        "k8s-storage-checks-textfile: {} every {} into {}",
        plugin::report::count(jobs.len(), "check", "checks"),
        plugin::fmt_duration(o.interval),
        o.dir.display()
    );
    loop {
        let start = Instant::now();
        let mut failed = false;
        for job in &jobs {
            if STOP.load(Ordering::SeqCst) {
                return 0;
            }
            let text = run_job(job, o.kill_after);
            if let Err(e) = publish(&o.dir, &job.name, &text) {
                eprintln!("k8s-storage-checks-textfile: {e}");
                failed = true;
            }
        }
        reap_orphans();
        if o.once {
            return i32::from(failed);
        }
        let next = start + o.interval;
        while Instant::now() < next {
            if STOP.load(Ordering::SeqCst) {
                return 0;
            }
            std::thread::sleep(
                next.saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(200)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> Opts {
        let mut v = vec!["x", "--dir", "/tmp"];
        v.extend_from_slice(args);
        Opts::try_parse_from(v).unwrap()
    }

    #[test]
    fn jobs_get_format_and_host_root() {
        let o = opts(&[
            "--host-root",
            "/host",
            "--check",
            "check_ro_pvc_mounts -t 20",
            "--check",
            "/opt/x/check_other --host-root /elsewhere",
        ]);
        let j = jobs(&o).unwrap();
        assert_eq!(j[0].name, "check_ro_pvc_mounts");
        assert_eq!(
            j[0].program,
            PathBuf::from("/usr/lib/nagios/plugins/check_ro_pvc_mounts")
        );
        assert_eq!(
            j[0].args,
            ["-t", "20", "--format", "prometheus", "--host-root", "/host"]
        );
        assert_eq!(j[1].program, PathBuf::from("/opt/x/check_other"));
        assert_eq!(
            j[1].args,
            ["--host-root", "/elsewhere", "--format", "prometheus"]
        );
    }

    #[test]
    fn bad_check_lines_are_refused() {
        for bad in [
            vec!["--check", "check_a --format json"],
            vec!["--check", "check_a", "--check", "check_a -v"],
            vec!["--check", "   "],
            vec!["--check", "check_ok;rm -rf"],
        ] {
            assert!(jobs(&opts(&bad)).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn missing_binary_is_unknown_not_silence() {
        let job = Job {
            name: "check_nope".into(),
            program: "/nonexistent/check_nope".into(),
            args: vec![],
        };
        let t = run_job(&job, Duration::from_secs(5));
        assert!(t.contains("k8s_storage_check_status{check=\"check_nope\"} 3\n"));
        assert!(t.contains("cannot run /nonexistent/check_nope"));
    }

    #[test]
    fn output_without_metrics_or_bad_exit_is_unknown() {
        let sh = |script: &str| Job {
            name: "check_sh".into(),
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
        };
        let ok = "echo 'k8s_storage_check_status{check=\"check_sh\"} 2'; exit 2";
        let t = run_job(&sh(ok), Duration::from_secs(5));
        assert_eq!(t, "k8s_storage_check_status{check=\"check_sh\"} 2\n");
        let t = run_job(&sh("echo garbage; exit 0"), Duration::from_secs(5));
        assert!(t.contains("} 3\n") && t.contains("exit 0: garbage"), "{t}");
        let t = run_job(
            &sh("echo 'k8s_storage_check_status{x} 0'; exit 7"),
            Duration::from_secs(5),
        );
        assert!(t.contains("} 3\n") && t.contains("exit 7"), "{t}");
        let t = run_job(&sh("exec sleep 30"), Duration::from_millis(200));
        assert!(t.contains("} 3\n") && t.contains("killed after"), "{t}");
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let d = std::env::temp_dir().join(format!("ksc-textfile-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        write_atomic(&d, "check_a", "one\n").unwrap();
        write_atomic(&d, "check_a", "two\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("check_a.prom")).unwrap(),
            "two\n"
        );
        let names: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["check_a.prom"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_failed_write_leaves_no_stale_prom_behind() {
        let d = std::env::temp_dir().join(format!("ksc-textfile-stale-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        // A name whose `.prom` fits in a directory entry (255 bytes) but whose temporary name
        // does not: every write fails (ENAMETOOLONG), after an earlier one left metrics behind.
        let name = "c".repeat(240);
        let old = d.join(format!("{name}.prom"));
        std::fs::write(&old, "old\n").unwrap();
        let e = publish(&d, &name, "new\n").unwrap_err();
        assert!(
            e.contains(&format!("{name}.prom")) && e.contains("removed the previous one"),
            "{e}"
        );
        assert!(!old.exists(), "stale metrics left in place");
        let e = publish(&d, &name, "new\n").unwrap_err();
        assert!(e.contains("no previous one"), "{e}");
        // Nothing else is left behind either.
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_link_planted_at_a_guessed_or_the_final_name_is_not_written_through() {
        let d = std::env::temp_dir().join(format!("ksc-textfile-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("out")).unwrap();
        let victim = d.join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let out = d.join("out");
        // The temporary name the writer used before it was random.
        std::os::unix::fs::symlink(&victim, out.join(".check_a.prom.tmp")).unwrap();
        write_atomic(&out, "check_a", "metrics\n").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert_eq!(
            std::fs::read_to_string(out.join("check_a.prom")).unwrap(),
            "metrics\n"
        );
        // A link at the final name is replaced, not followed, too.
        std::fs::remove_file(out.join("check_a.prom")).unwrap();
        std::os::unix::fs::symlink(&victim, out.join("check_a.prom")).unwrap();
        write_atomic(&out, "check_a", "metrics\n").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(!std::fs::symlink_metadata(out.join("check_a.prom"))
            .unwrap()
            .file_type()
            .is_symlink());
        // The collector's file is world-readable whatever the umask.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(out.join("check_a.prom"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn output_past_the_cap_is_unknown() {
        let sh = |script: &str| Job {
            name: "check_sh".into(),
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
        };
        // The status series first, then more than the cap: a check gone mad is UNKNOWN.
        let t = run_job(
            &sh("echo 'k8s_storage_check_status{check=\"check_sh\"} 0'; head -c 70000000 /dev/zero | tr '\\0' x; exit 0"),
            Duration::from_secs(20),
        );
        assert!(
            t.contains("} 3\n") && t.contains("more than 64 MiB of output"),
            "{}",
            &t[..t.len().min(400)]
        );
    }
}
