//! Running the checks: every applicable check of the suite at once, each as this program with
//! its name as the first argument and `--format json`, within one deadline. A check that has
//! not answered when the deadline comes is killed (its process group: the check and its probe
//! worker) and named; one stuck in uninterruptible I/O is left behind and named too.

use crate::answer::{self, Answer};
use plugin::Status;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What the caller knows of a check: its name and the long options it takes.
#[derive(Debug, Clone)]
pub struct CheckSpec {
    pub name: &'static str,
    pub longs: Vec<String>,
}

/// The most one check may print before it counts as no answer (its JSON, its findings).
pub const OUTPUT_MAX: u64 = 16 << 20;

/// A check's command line: the options the triage was given that this check takes.
pub fn args_for(spec: &CheckSpec, shared: &[(&str, String)], timeout: Duration) -> Vec<String> {
    let mut v = vec![spec.name.to_string()];
    for (long, value) in shared {
        if spec.longs.iter().any(|l| l == long) {
            v.push(format!("--{long}"));
            v.push(value.clone());
        }
    }
    v.push("--timeout".into());
    v.push(timeout.as_secs().max(1).to_string());
    v.push("--format".into());
    v.push("json".into());
    v
}

/// An answer that did not come: UNKNOWN with why.
pub fn no_answer(check: &str, why: String) -> Answer {
    Answer {
        check: check.to_string(),
        status: Status::Unknown,
        summary: why,
        not_applicable: false,
        findings: Vec::new(),
    }
}

struct Done {
    idx: usize,
    out: std::io::Result<Option<Vec<u8>>>,
    err: Vec<u8>,
    status: Option<std::process::ExitStatus>,
}

/// Run `program NAME ARGS…` for every command line at once; the answers in the same order.
pub fn run_all(program: &Path, lines: &[Vec<String>], deadline: Instant) -> Vec<Answer> {
    let (tx, rx) = mpsc::channel::<Done>();
    let mut answers: Vec<Option<Answer>> = vec![None; lines.len()];
    let mut pids: Vec<Option<i32>> = vec![None; lines.len()];
    for (idx, line) in lines.iter().enumerate() {
        let name = line[0].clone();
        let child = Command::new(program)
            .args(line)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: the deadline kills the check and its probe worker.
            .process_group(0)
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                answers[idx] = Some(no_answer(
                    &name,
                    format!(
                        "cannot run {} {name}: {}",
                        program.display(),
                        plugin::errtext(&e)
                    ),
                ));
                continue;
            }
        };
        pids[idx] = i32::try_from(child.id()).ok();
        let tx = tx.clone();
        let mut stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        std::thread::spawn(move || {
            let err = std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = (&mut stderr).take(4096).read_to_end(&mut buf);
                // The rest is drained so the check never blocks on a full pipe.
                let _ = std::io::copy(&mut stderr, &mut std::io::sink());
                buf
            });
            let out = plugin::capped::read_capped(&mut stdout, OUTPUT_MAX);
            drop(stdout);
            let status = child.wait().ok();
            let err = err.join().unwrap_or_default();
            let _ = tx.send(Done {
                idx,
                out,
                err,
                status,
            });
        });
    }
    drop(tx);
    let mut pending = answers.iter().filter(|a| a.is_none()).count();
    while pending > 0 {
        let left = plugin::deadline::remaining(deadline);
        match rx.recv_timeout(left) {
            Ok(d) => {
                pids[d.idx] = None;
                let idx = d.idx;
                answers[idx] = Some(read_answer(&lines[idx][0], d));
                pending -= 1;
            }
            Err(_) => break,
        }
    }
    // The deadline: what has not answered is killed and named.
    for (idx, pid) in pids.iter().enumerate() {
        if let (Some(pid), None) = (pid, &answers[idx]) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(*pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            answers[idx] = Some(no_answer(
                &lines[idx][0],
                "did not answer within the triage's -t: killed (a check that ignores its own \
                 -t is stuck in the kernel; run it alone with -vvv)"
                    .into(),
            ));
        }
    }
    answers.into_iter().flatten().collect()
}

fn read_answer(name: &str, d: Done) -> Answer {
    let first_err = || {
        String::from_utf8_lossy(&d.err)
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    };
    let out = match d.out {
        Ok(Some(o)) => o,
        Ok(None) => return no_answer(name, format!("printed more than {} MiB", OUTPUT_MAX >> 20)),
        Err(e) => return no_answer(name, format!("its output: {}", plugin::errtext(&e))),
    };
    let text = String::from_utf8_lossy(&out);
    match answer::parse_all(&text) {
        Ok(mut a) if a.len() == 1 => a.remove(0),
        Ok(_) | Err(_) => {
            let how = match d.status.and_then(|s| s.code()) {
                Some(c) => format!("exit {c}"),
                None => "killed by a signal".into(),
            };
            let first = text.lines().next().unwrap_or("").trim().to_string();
            let said = if first.is_empty() { first_err() } else { first };
            no_answer(
                name,
                format!(
                    "no JSON answer ({how}): {}",
                    plugin::render::truncate(&said, 300)
                ),
            )
        }
    }
}
