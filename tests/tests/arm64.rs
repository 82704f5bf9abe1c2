//! Issue 29: arm64 everywhere amd64 is. `./build-static --arch arm64` cross-builds the static
//! aarch64-unknown-linux-musl program (Debian's gcc-aarch64-linux-gnu as C compiler and linker);
//! here it runs for real under qemu-user (Debian's qemu-user-static, `qemu-aarch64-static`: the
//! machine is amd64, and no binfmt_misc handler is registered or needed: each name is a two-line
//! wrapper `exec qemu-aarch64-static <arm64 program's name> "$@"`):
//! - the replay's file scenes (k8s-storage-checks-replay --files, both incidents) give the same
//!   answers as the amd64 program;
//! - the protocol tests (plugin_protocol::, this test binary run again with E2E_BIN_DIR on the
//!   wrappers) pass; the static-and-empty-chroot one is done here on the arm64 file itself;
//! - its .deb (lintian clean, the amd64 package's files) and tarball are built like amd64's.
//!
//! The arm64 build is cached in target/aarch64-unknown-linux-musl like the amd64 one
//! (E2E_ARM64_BIN_DIR: prebuilt binaries instead). Without the target, the cross compiler or
//! qemu the tests say so and skip (with CI=true: fail; .ci/run installs them).

use e2e::{bin_dir, need_tool, workspace_root, Cmd, Output};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

const QEMU: &str = "qemu-aarch64-static";

/// The arm64 release binaries, built once per test process (None: a tool is missing, said).
pub(crate) fn arm_dir(test: &str) -> Option<PathBuf> {
    if !need_tool(test, QEMU) || !need_tool(test, "aarch64-linux-gnu-gcc") {
        return None;
    }
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let r = DIR.get_or_init(|| {
        if let Ok(d) = std::env::var("E2E_ARM64_BIN_DIR") {
            return Ok(PathBuf::from(d));
        }
        // The amd64 program first: every other test waits for it, and the two builds side by
        // side finish together, twice as late (CI time). The arm64 tests use it too.
        let _ = bin_dir();
        let t = Instant::now();
        // The same code as the release, built cheaper: the release profile's fat LTO with one
        // codegen unit costs a cold cross build about 15 minutes on two cores, against 4 here.
        // These settings are the test's only (target/aarch64-unknown-linux-musl); what ships
        // is built by `./build-static --arch arm64` (release.yml) with the release profile.
        let out = Cmd::new("sh")
            .current_dir(workspace_root())
            .env("CARGO_PROFILE_RELEASE_LTO", "false")
            .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
            .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "1")
            .args(["build-static", "--arch", "arm64", "--no-install", "--quiet"])
            .run();
        println!(
            "./build-static --arch arm64: {:.1}s",
            t.elapsed().as_secs_f64()
        );
        if out.code != 0 {
            return Err(format!("./build-static --arch arm64 failed: {out:?}"));
        }
        Ok(PathBuf::from(out.stdout.lines().last().unwrap().trim()))
    });
    match r {
        Ok(d) => Some(d.clone()),
        Err(e) if e.contains("target is not installed") => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{test}: {e}");
            }
            println!("{test}: skipped: {e}");
            None
        }
        Err(e) => panic!("{test}: {e}"),
    }
}

/// Every name of the program (`--list`), as the arm64 program itself says under qemu.
fn names(arm: &Path) -> Vec<String> {
    let out = Cmd::new(QEMU)
        .arg(arm.join("k8s-storage-checks"))
        .arg("--list")
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    out.stdout
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

/// A directory with each of the arm64 program's names (and plugin_selftest, the protocol
/// tests' own binary) as a wrapper that runs it under qemu-user.
fn wrappers(arm: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut all = names(arm);
    all.push("k8s-storage-checks".into());
    all.push("plugin_selftest".into());
    for n in all {
        let target = arm.join(&n);
        assert!(target.exists(), "{} missing", target.display());
        let p = dir.path().join(&n);
        std::fs::write(
            &p,
            format!("#!/bin/sh\nexec {QEMU} '{}' \"$@\"\n", target.display()),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    dir
}

fn elf_machine(p: &Path) -> u16 {
    let b = std::fs::read(p).unwrap();
    assert_eq!(&b[..4], b"\x7fELF", "{}", p.display());
    u16::from_le_bytes([b[18], b[19]])
}

#[test]
fn arm64_program_is_static_aarch64_and_answers_like_amd64() {
    let t = "arm64_program_is_static_aarch64_and_answers_like_amd64";
    let Some(arm) = arm_dir(t) else { return };
    let prog = arm.join("k8s-storage-checks");
    assert_eq!(elf_machine(&prog), 0xb7, "not aarch64");
    let file = Cmd::new("file").arg("-L").arg(&prog).run();
    assert!(
        file.stdout.contains("ARM aarch64")
            && (file.stdout.contains("statically linked") || file.stdout.contains("static-pie")),
        "{file:?}"
    );
    // The same names, copies and capabilities as the amd64 program.
    let list = |p: &Path, emu: bool| -> Output {
        let c = if emu {
            Cmd::new(QEMU).arg(p)
        } else {
            Cmd::new(p)
        };
        c.arg("--list").run()
    };
    let a = list(&bin_dir().join("k8s-storage-checks"), false);
    let b = list(&prog, true);
    assert_eq!(a.stdout, b.stdout, "--list differs");
    // Every check's --help and --version, word for word.
    let w = wrappers(&arm);
    for c in e2e::all_checks() {
        for arg in ["--help", "--version"] {
            let x = Cmd::new(bin_dir().join(&c)).arg(arg).run();
            let y = Cmd::new(w.path().join(&c)).arg(arg).run();
            assert_eq!((x.code, &x.stdout), (y.code, &y.stdout), "{c} {arg}");
        }
    }
    // Nothing but the kernel (and the emulator) needed: an empty chroot with qemu-user in it.
    if !e2e::need_root(t) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let qemu = Cmd::new("sh")
        .args(["-c", &format!("command -v {QEMU}")])
        .run()
        .stdout
        .trim()
        .to_string();
    e2e::copy_executable(Path::new(&qemu), &dir.path().join("qemu"));
    e2e::copy_executable(&prog, &dir.path().join("check_iscsi_sessions"));
    let out = Cmd::new("chroot")
        .arg(dir.path())
        .args(["/qemu", "/check_iscsi_sessions", "--version"])
        .run();
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stdout.contains("check_iscsi_sessions"), "{out:?}");
}

/// A replay line with what differs between two runs by construction taken out: the sandbox's
/// and the kubeconfig's temporary paths, the API server's port, the canary's nonce and how many
/// reads the watch-cache check made before its deadline, absolute times and durations (each run makes its scenes' objects relative to its own start, and the
/// emulated program takes a second longer to get to them: "10m ago" becomes "10m1s ago").
/// Statuses, counts, subjects, next steps and exit codes stay, word for word.
fn normalize(line: &str, sandbox: &str) -> String {
    let l = durations(&times_and_paths(&line.replace(sandbox, "$SANDBOX")));
    let mut l = l;
    while let Some(i) = l.find("127.0.0.1:") {
        let start = i + "127.0.0.1:".len();
        let end = start + l[start..].bytes().take_while(u8::is_ascii_digit).count();
        if end == start {
            break;
        }
        l.replace_range(i..end, "<api>");
    }
    // How many reads the watch-cache check made before its deadline depends on its speed.
    if let Some(i) = l.find(" RV=0 reads") {
        let start = l[..i]
            .rfind(|c: char| !c.is_ascii_digit())
            .map_or(0, |p| p + 1);
        l.replace_range(start..i, "<n>");
    }
    if let Some(i) = l.find("canary-nonce=") {
        let start = i + "canary-nonce=".len();
        let end = start + l[start..].find(')').unwrap_or(l.len() - start);
        l.replace_range(start..end, "<nonce>");
    }
    // The NRPE v2 marker is padded to byte 1023: its padding follows the lengths normalized away.
    l.trim_end().to_string()
}

/// Durations ("10m1s", "1468800s", "3.104s", "250ms") as whole words become `<dur>`.
fn durations(l: &str) -> String {
    let b = l.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        let word_start = i == 0 || !b[i - 1].is_ascii_alphanumeric();
        if word_start && b[i].is_ascii_digit() {
            let mut j = i;
            let mut groups = 0;
            loop {
                let d = j + b[j..].iter().take_while(|c| c.is_ascii_digit()).count();
                if d == j {
                    break;
                }
                let mut k = d;
                if k < b.len() && b[k] == b'.' {
                    k += 1 + b[k + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                }
                let unit = if l[k..].starts_with("ms") {
                    2
                } else if k < b.len() && matches!(b[k], b'd' | b'h' | b'm' | b's') {
                    1
                } else {
                    0
                };
                if unit == 0 {
                    break;
                }
                j = k + unit;
                groups += 1;
            }
            if groups > 0 && (j == b.len() || !b[j].is_ascii_alphanumeric()) {
                out.push_str("<dur>");
                i = j;
                continue;
            }
        }
        let ch = l[i..].chars().next().unwrap();
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// Temporary paths (`/tmp/.tmpXXXX`) and absolute times (`YYYY-MM-DD[T ]HH:MM:SS[.frac][Z]`).
fn times_and_paths(l: &str) -> String {
    let b = l.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    while i < b.len() {
        if l[i..].starts_with("/tmp/.tmp") {
            i += "/tmp/.tmp".len();
            while i < b.len() && b[i].is_ascii_alphanumeric() {
                i += 1;
            }
            out.push_str("$TMP");
            continue;
        }
        // YYYY-MM-DD[T ]HH:MM:SS[.frac][Z]
        if i + 19 <= b.len() {
            let t = &b[i..i + 19];
            if digits(&t[0..4])
                && t[4] == b'-'
                && digits(&t[5..7])
                && t[7] == b'-'
                && digits(&t[8..10])
                && (t[10] == b'T' || t[10] == b' ')
                && digits(&t[11..13])
                && t[13] == b':'
                && digits(&t[14..16])
                && t[16] == b':'
                && digits(&t[17..19])
            {
                i += 19;
                if i < b.len() && b[i] == b'.' {
                    i += 1;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
                if i < b.len() && b[i] == b'Z' {
                    i += 1;
                }
                out.push_str("<time>");
                continue;
            }
        }
        let ch = l[i..].chars().next().unwrap();
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// The replay in file mode with the programs of `bin`: its output and its normalized lines.
fn replay_answers(bin: &Path) -> (Output, Vec<String>) {
    let out = Cmd::new(e2e::bin("k8s-storage-checks-replay"))
        .arg("--bin-dir")
        .arg(bin)
        .arg("--files")
        .run();
    assert_eq!(out.code, 0, "replay --bin-dir {}: {out:?}", bin.display());
    let sandbox = out
        .stdout
        .split_whitespace()
        .find(|w| w.contains("k8s-storage-checks-replay."))
        .expect("the sandbox's path")
        .to_string();
    let lines = out.stdout.lines().map(|l| normalize(l, &sandbox)).collect();
    (out, lines)
}

#[test]
fn replay_file_scenes_answer_the_same_on_arm64_under_qemu() {
    let t = "replay_file_scenes_answer_the_same_on_arm64_under_qemu";
    let Some(arm) = arm_dir(t) else { return };
    let w = wrappers(&arm);
    let started = Instant::now();
    let (amd_out, amd) = replay_answers(&bin_dir());
    let (arm_out, armv) = replay_answers(w.path());
    println!(
        "replay --files, amd64 then arm64 under qemu: {:.1}s",
        started.elapsed().as_secs_f64()
    );
    // Every scene ran (the summary has all twelve) and each answered the same.
    let summary = |s: &str| -> Vec<String> {
        s.lines()
            .skip_while(|l| !l.contains("summary"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .map(str::to_string)
            .collect()
    };
    let sa = summary(&amd_out.stdout);
    assert_eq!(sa.len(), 12, "{}", amd_out.stdout);
    assert_eq!(sa, summary(&arm_out.stdout), "{}", arm_out.stdout);
    assert!(
        sa.iter().all(|l| !l.contains("UNKNOWN")),
        "a scene answered UNKNOWN: {sa:#?}"
    );
    let diff: Vec<_> = amd.iter().zip(&armv).filter(|(a, b)| a != b).collect();
    assert!(
        diff.is_empty() && amd.len() == armv.len(),
        "amd64 and arm64 answered differently: {diff:#?}"
    );
}

#[test]
fn protocol_tests_pass_on_arm64_under_qemu() {
    let t = "protocol_tests_pass_on_arm64_under_qemu";
    let Some(arm) = arm_dir(t) else { return };
    let w = wrappers(&arm);
    // This test binary again, only plugin_protocol::, on the wrappers. The static/empty-chroot
    // test copies the file it is given (here a wrapper script): it is done on the arm64 file in
    // arm64_program_is_static_aarch64_and_answers_like_amd64.
    let started = Instant::now();
    let out = Cmd::new(std::env::current_exe().unwrap())
        .env("E2E_BIN_DIR", w.path())
        .args([
            "plugin_protocol::",
            "--skip",
            "binaries_are_static_and_run_in_an_empty_chroot",
            "--test-threads",
            "2",
        ])
        .run();
    println!(
        "plugin_protocol:: on arm64: {:.1}s\n{}{}",
        started.elapsed().as_secs_f64(),
        out.stdout,
        out.stderr
    );
    assert_eq!(out.code, 0, "{out:?}");
    let passed: usize = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("test result: ok. "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a test result line");
    assert!(passed >= 7, "only {passed} protocol tests ran: {out:?}");
}

fn package(script: &str, arch: &str, bin: &Path, out: &Path) -> PathBuf {
    package_env(script, arch, bin, out, &[])
}

fn package_env(script: &str, arch: &str, bin: &Path, out: &Path, env: &[(&str, &str)]) -> PathBuf {
    let mut c = Cmd::new(workspace_root().join("packaging").join(script))
        .env("ARCH", arch)
        .env("BIN_DIR", bin)
        .env("OUT_DIR", out);
    for (k, v) in env {
        c = c.env(k, v);
    }
    let o = c.run();
    assert_eq!(o.code, 0, "ARCH={arch} packaging/{script}: {o:?}");
    PathBuf::from(o.stdout.lines().last().unwrap().trim())
}

/// Paths in a .deb (`dpkg-deb -c`), without sizes and dates.
fn deb_paths(deb: &Path) -> Vec<String> {
    let o = Cmd::new("dpkg-deb").arg("-c").arg(deb).run();
    assert_eq!(o.code, 0, "{o:?}");
    let mut v: Vec<String> = o
        .stdout
        .lines()
        .map(|l| l.split_whitespace().skip(5).collect::<Vec<_>>().join(" "))
        .collect();
    v.sort();
    v
}

#[test]
fn arm64_deb_is_lintian_clean_and_holds_what_amd64_does_and_tarball_too() {
    let t = "arm64_deb_is_lintian_clean_and_holds_what_amd64_does_and_tarball_too";
    let Some(arm) = arm_dir(t) else { return };
    if !["dpkg-deb", "lintian"].iter().all(|x| need_tool(t, x)) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let deb = package("mkdeb", "arm64", &arm, work.path());
    assert!(
        deb.to_string_lossy().ends_with(&format!(
            "k8s-storage-checks_{}-1_arm64.deb",
            env!("CARGO_PKG_VERSION")
        )),
        "{}",
        deb.display()
    );
    let f = Cmd::new("dpkg-deb")
        .arg("-f")
        .arg(&deb)
        .arg("Architecture")
        .run();
    assert_eq!(f.stdout.trim(), "arm64");
    // The amd64 package to compare with (its file list only: gzip, faster than xz to build).
    let amd = package_env(
        "mkdeb",
        "amd64",
        &bin_dir(),
        &work.path().join("amd64"),
        &[("DEB_COMPRESSION", "gzip")],
    );
    assert_eq!(
        deb_paths(&deb),
        deb_paths(&amd),
        "arm64 and amd64 hold other files"
    );
    let l = Cmd::new("lintian")
        .args(["--tag-display-limit", "0"])
        .arg(&deb)
        .run();
    println!("lintian (arm64):\n{}{}", l.stdout, l.stderr);
    let errors: Vec<&str> = l.stdout.lines().filter(|x| x.starts_with("E: ")).collect();
    assert!(errors.is_empty(), "lintian errors: {errors:#?}");
    assert_eq!(l.code, 0, "{l:?}");
    // The program in it is the arm64 one and answers under qemu.
    let x = work.path().join("x");
    let o = Cmd::new("dpkg-deb").arg("-x").arg(&deb).arg(&x).run();
    assert_eq!(o.code, 0, "{o:?}");
    let p = x.join("usr/lib/nagios/plugins/check_watch_cache");
    assert_eq!(elf_machine(&p), 0xb7);
    let v = Cmd::new(QEMU).arg(&p).arg("--version").run();
    assert_eq!(v.code, 3, "{v:?}");
    assert!(v.stdout.contains("check_watch_cache"), "{v:?}");
    // A wrong ARCH for the binaries is refused, not packaged.
    let wrong = Cmd::new(workspace_root().join("packaging/mkdeb"))
        .env("ARCH", "amd64")
        .env("BIN_DIR", &arm)
        .env("OUT_DIR", work.path())
        .run();
    assert_ne!(wrong.code, 0, "{wrong:?}");
    assert!(
        wrong.stderr.contains("is not an amd64 program"),
        "{wrong:?}"
    );

    // The tarball: the aarch64 name, its checksum, the amd64 tarball's files.
    let tar = package("mkdist", "arm64", &arm, work.path());
    let version = env!("CARGO_PKG_VERSION");
    let name = format!("k8s-storage-checks-{version}-aarch64-linux.tar.gz");
    assert_eq!(tar.file_name().unwrap().to_string_lossy(), name);
    let sum = Cmd::new("sha256sum")
        .args(["-c", &format!("{name}.sha256")])
        .current_dir(work.path())
        .run();
    assert!(sum.stdout.contains(&format!("{name}: OK")), "{sum:?}");
    let amd_tar = package("mkdist", "amd64", &bin_dir(), work.path());
    let list = |p: &Path| {
        Cmd::new("tar")
            .arg("-tzf")
            .arg(p)
            .run()
            .stdout
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(list(&tar), list(&amd_tar));
    let xt = work.path().join("xt");
    std::fs::create_dir(&xt).unwrap();
    let o = Cmd::new("tar")
        .arg("-xzf")
        .arg(&tar)
        .arg("-C")
        .arg(&xt)
        .run();
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(
        elf_machine(&xt.join(format!("k8s-storage-checks-{version}/k8s-storage-checks"))),
        0xb7
    );
}
