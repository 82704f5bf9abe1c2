//! The packages (issue 19): `make deb`'s Debian package, built from this build's binaries
//! (packaging/mkdeb with BIN_DIR), is lintian-clean, installs on a fresh Debian root (the
//! debootstrapped bookworm + NRPE the container test caches under target/, seen through an overlay
//! in a private mount namespace, so the cache is never changed), applies the privilege model's
//! capabilities and modes, answers the real `check_nrpe` through its nrpe.d file, and
//! `dpkg --purge` leaves the root exactly as it was. `make dist`'s tarball and checksum too.

use e2e::{bin_dir, need_root, need_tool, workspace_root, Cmd, Ns, Output};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const PLUGINS: &str = "usr/lib/nagios/plugins";
const CHECK_NRPE: &str = "/usr/lib/nagios/plugins/check_nrpe";
/// The privilege model: these get a file capability and root:nagios 0750; all others 0755.
const CAPS: [(&str, &str); 5] = [
    ("check_csi_node_plugins", "cap_dac_read_search"),
    ("check_pv_capacity", "cap_dac_read_search"),
    ("check_ro_pvc_mounts", "cap_dac_read_search"),
    ("check_stale_csi_mounts", "cap_dac_read_search"),
    ("check_storage_kernel_errors", "cap_syslog"),
];

fn build(script: &str, out: &Path) -> PathBuf {
    build_env(script, out, &[])
}

/// A packaging script with this build's binaries and more environment (VERSION, SIGNING_KEY...).
fn build_env(script: &str, out: &Path, env: &[(&str, &str)]) -> PathBuf {
    let mut c = Cmd::new(workspace_root().join("packaging").join(script))
        .env("BIN_DIR", bin_dir())
        .env("OUT_DIR", out);
    for (k, v) in env {
        c = c.env(k, v);
    }
    let o = c.run();
    assert_eq!(o.code, 0, "packaging/{script}: {o:?}");
    PathBuf::from(o.stdout.lines().last().expect("the path it built").trim())
}

fn ok(o: Output, what: &str) -> Output {
    assert_eq!(o.code, 0, "{what}: {o:?}");
    o
}

/// Every path under `root` with its type, mode, owner and size, but what dpkg itself keeps
/// (its database, logs, caches) and the API filesystems.
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let skip = [
        "proc",
        "sys",
        "dev",
        "tmp",
        "var/lib/dpkg",
        "var/log",
        "var/cache",
        "var/lib/apt",
        "var/lib/systemd",
        "etc/ld.so.cache",
    ];
    let mut m = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if skip
                .iter()
                .any(|s| rel == *s || rel.starts_with(&format!("{s}/")))
            {
                continue;
            }
            let md = std::fs::symlink_metadata(&p).unwrap();
            let size = if md.is_file() { md.len() } else { 0 };
            m.insert(
                rel,
                format!("{:o} {}:{} {size}", md.mode(), md.uid(), md.gid()),
            );
            if md.is_dir() {
                stack.push(p);
            }
        }
    }
    m
}

/// A shell command in the root, inside the namespace.
fn chroot(ns: &Ns, root: &Path, cmd: &str) -> Output {
    ns.cmd("chroot")
        .arg(root)
        .args(["/bin/sh", "-c", cmd])
        .run()
}

fn gid_of(root: &Path, group: &str) -> u32 {
    std::fs::read_to_string(root.join("etc/group"))
        .unwrap()
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f[0] == group).then(|| f[2].parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no group {group}"))
}

/// A fresh Debian root: the cached debootstrap (NRPE, systemd, sudo) under an overlay in
/// `work`, mounted in a private namespace (with /proc, /dev, /sys and a tmpfs /run), with
/// libcap2-bin installed (the package depends on it for setcap; debootstrap's minbase lacks it:
/// the host's own bookworm .deb, fetched with apt-get download). Returns the namespace, the
/// root's path in it and the test's view of it (through the namespace holder's root).
fn fresh_root(work: &Path) -> (Ns, PathBuf, PathBuf) {
    let base = e2e::debian_nrpe_base();
    let ns = Ns::new();
    let root = work.join("root");
    for d in ["upper", "work", "root"] {
        std::fs::create_dir_all(work.join(d)).unwrap();
    }
    let r = root.display().to_string();
    ns.sh(&format!(
        "mount -t overlay overlay -o lowerdir='{}',upperdir='{w}/upper',workdir='{w}/work' '{r}' \
         && mount -t proc proc '{r}/proc' && mount --rbind /dev '{r}/dev' && mount --rbind /sys '{r}/sys' \
         && mount -t tmpfs tmpfs '{r}/run'",
        base.display(),
        w = work.display()
    ));
    // The test sees the namespace's mounts through its holder's root.
    let view = PathBuf::from(format!("/proc/{}/root{}", ns.pid(), root.display()));
    let debs = work.join("debs");
    std::fs::create_dir_all(&debs).unwrap();
    ok(
        Cmd::new("apt-get")
            .args(["download", "-qq", "libcap2-bin"])
            .current_dir(&debs)
            .run(),
        "apt-get download libcap2-bin",
    );
    let capbin = std::fs::read_dir(&debs)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    std::fs::copy(&capbin, view.join("tmp/libcap2-bin.deb")).unwrap();
    ok(
        chroot(&ns, &root, "dpkg -i /tmp/libcap2-bin.deb"),
        "dpkg -i libcap2-bin",
    );
    (ns, root, view)
}

/// NRPE of the root, on a loopback port, with its installed nrpe.cfg (and so the installed
/// nrpe.d file); returns the port and its pid once it listens.
fn start_nrpe(ns: &mut Ns, root: &Path, view: &Path) -> (u16, i32) {
    let r = root.display().to_string();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = std::fs::read_to_string(view.join("etc/nagios/nrpe.cfg")).unwrap();
    assert!(
        cfg.lines()
            .any(|l| l.trim() == "include_dir=/etc/nagios/nrpe.d/"),
        "{cfg}"
    );
    let cfg: String = cfg
        .lines()
        .map(|l| {
            if l.starts_with("server_port=") {
                format!("server_port={port}\nserver_address=127.0.0.1")
            } else if l.starts_with("pid_file=") {
                "pid_file=/run/nrpe-test.pid".into()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(view.join("tmp/nrpe-test.cfg"), cfg + "\n").unwrap();
    let pid: i32 = ns
        .sh(&format!(
            "chroot '{r}' /usr/sbin/nrpe -c /tmp/nrpe-test.cfg -f </dev/null >/dev/null 2>&1 & echo $!"
        ))
        .stdout
        .trim()
        .parse()
        .unwrap();
    ns.own(pid);
    let until = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "nrpe did not listen on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
    (port, pid)
}

/// `check_nrpe -c command` against the NRPE on `port`.
fn nrpe_ask(port: u16, command: &str) -> Output {
    Cmd::new(CHECK_NRPE)
        .args([
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "30",
            "-c",
            command,
        ])
        .run()
}

fn stop(pid: i32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
}

#[test]
fn deb_is_lintian_clean_installs_with_the_privilege_model_answers_nrpe_and_purges_clean() {
    let t = "deb_is_lintian_clean_installs_with_the_privilege_model_answers_nrpe_and_purges_clean";
    let check_nrpe = CHECK_NRPE;
    if !need_root(t)
        || ![
            "dpkg-deb",
            "lintian",
            "debootstrap",
            "unshare",
            "getcap",
            "apt-get",
            check_nrpe,
        ]
        .iter()
        .all(|tool| need_tool(t, tool))
    {
        return;
    }
    let _machine = e2e::exclusive();
    let work = tempfile::tempdir().unwrap();
    let deb = build("mkdeb", work.path());
    assert!(
        deb.file_name()
            .unwrap()
            .to_string_lossy()
            .ends_with("_amd64.deb"),
        "{}",
        deb.display()
    );

    // The project's metadata, from packaging/project.env (issue 29).
    let env = Cmd::new("sh")
        .current_dir(workspace_root())
        .args([
            "-c",
            ". ./packaging/project.env && printf '%s\\n' \"$PROJECT_MAINTAINER\" \"$PROJECT_HOMEPAGE\" \"$PROJECT_REPOSITORY\"",
        ])
        .run();
    let meta: Vec<&str> = env.stdout.lines().collect();
    assert_eq!(meta.len(), 3, "{env:?}");
    for (field, want) in [("Maintainer", meta[0]), ("Homepage", meta[1])] {
        let got = Cmd::new("dpkg-deb").arg("-f").arg(&deb).arg(field).run();
        assert_eq!(got.stdout.trim(), want, "{field}");
    }
    let source = format!("Source: {}", meta[2]);

    // lintian: no error (warnings and info are shown, not fatal).
    let l = Cmd::new("lintian")
        .args(["--tag-display-limit", "0", "--display-info"])
        .arg(&deb)
        .run();
    println!("lintian:\n{}{}", l.stdout, l.stderr);
    let errors: Vec<&str> = l.stdout.lines().filter(|x| x.starts_with("E: ")).collect();
    assert!(errors.is_empty(), "lintian errors: {errors:#?}");
    assert_eq!(l.code, 0, "lintian failed: {l:?}");

    // What it holds.
    let list = ok(
        Cmd::new("dpkg-deb").arg("-c").arg(&deb).run(),
        "dpkg-deb -c",
    )
    .stdout;
    for c in e2e::all_checks() {
        // The program once per capability set; a check's name is a hard link to its copy (in
        // the archive, the first of a file's names holds the data, the others say "link to").
        let name = format!(" ./{PLUGINS}/{c}");
        assert!(
            list.lines()
                .any(|l| l.ends_with(&name) || l.contains(&format!("{name} link to ./{PLUGINS}/"))),
            "{c} missing:\n{list}"
        );
        assert!(
            list.contains(&format!("./usr/share/man/man1/{c}.1.gz\n")),
            "{c}.1 missing"
        );
    }
    for p in [
        "./etc/nagios/nrpe.d/k8s-storage-checks.cfg",
        "./usr/share/icinga2/include/plugins-contrib.d/k8s-storage-checks.conf",
        "./usr/lib/tmpfiles.d/k8s-storage-checks.conf",
        "./usr/share/doc/k8s-storage-checks/copyright",
        "./usr/share/doc/k8s-storage-checks/README.md.gz",
    ] {
        assert!(list.contains(&format!("{p}\n")), "{p} missing:\n{list}");
    }
    let info = ok(
        Cmd::new("dpkg-deb")
            .arg("-I")
            .arg(&deb)
            .arg("conffiles")
            .run(),
        "conffiles",
    );
    assert_eq!(
        info.stdout.trim(),
        "/etc/nagios/nrpe.d/k8s-storage-checks.cfg"
    );

    let (mut ns, root, view) = fresh_root(work.path());
    let v = view.display().to_string();
    std::fs::copy(&deb, view.join("tmp/k8s-storage-checks.deb")).unwrap();
    let before = snapshot(&view);

    let inst = ok(
        chroot(&ns, &root, "dpkg -i /tmp/k8s-storage-checks.deb"),
        "dpkg -i",
    );
    println!("dpkg -i: {}{}", inst.stdout, inst.stderr);

    let copyright =
        std::fs::read_to_string(view.join("usr/share/doc/k8s-storage-checks/copyright")).unwrap();
    assert!(copyright.lines().any(|l| l == source), "{copyright}");

    // Capabilities and modes.
    let nagios = gid_of(&view, "nagios");
    for c in e2e::all_checks() {
        let p = root.join(PLUGINS).join(&c);
        let md = std::fs::metadata(view.join(PLUGINS).join(&c)).unwrap();
        let cap = ns.cmd("getcap").arg(&p).run().stdout;
        let copy = match CAPS.iter().find(|(b, _)| *b == c) {
            Some((_, want)) => format!("k8s-storage-checks-{want}"),
            None => "k8s-storage-checks".to_string(),
        };
        let cm = std::fs::metadata(view.join(PLUGINS).join(&copy)).unwrap();
        assert_eq!(
            (md.dev(), md.ino()),
            (cm.dev(), cm.ino()),
            "{c} is not a hard link to {copy}"
        );
        match CAPS.iter().find(|(b, _)| *b == c) {
            Some((_, want)) => {
                assert_eq!(md.mode() & 0o7777, 0o750, "{c}");
                assert_eq!((md.uid(), md.gid()), (0, nagios), "{c}: root:nagios");
                assert!(cap.contains(&format!("{want}=ep")), "{c}: getcap {cap:?}");
            }
            None => {
                assert_eq!(md.mode() & 0o7777, 0o755, "{c}");
                assert_eq!((md.uid(), md.gid()), (0, 0), "{c}: root:root");
                assert!(cap.trim().is_empty(), "{c} has capabilities: {cap:?}");
            }
        }
    }
    for d in ["run/k8s-storage-checks", "var/lib/k8s-storage-checks"] {
        let md = std::fs::metadata(view.join(d)).unwrap_or_else(|e| panic!("{d}: {e}"));
        assert!(md.is_dir());
        assert_eq!(md.mode() & 0o7777, 0o750, "{d}");
        assert_eq!(md.gid(), nagios, "{d}");
    }
    let man = ok(
        Cmd::new("sh")
            .arg("-c")
            .arg(format!(
                "zcat '{v}/usr/share/man/man1/check_ro_pvc_mounts.1.gz'"
            ))
            .run(),
        "zcat man page",
    );
    // Made by clap_mangen (k8s-storage-checks --generate-man): its title, OPTIONS, EXIT STATUS.
    assert!(
        man.stdout
            .lines()
            .any(|l| l.starts_with(".TH CHECK_RO_PVC_MOUNTS 1"))
            && man.stdout.contains("\n.SH OPTIONS\n")
            && man.stdout.contains("\n.SH \"EXIT STATUS\"\n"),
        "{}",
        man.stdout
    );
    assert!(man.stdout.contains("\\-\\-kubelet\\-root") || man.stdout.contains("--kubelet-root"));

    // NRPE in the root, on a loopback port, with the installed nrpe.d file.
    let (port, pid) = start_nrpe(&mut ns, &root, &view);
    let nrpe = |command: &str| nrpe_ask(port, command);
    // Unprivileged nagios runs the 0750 root:nagios binary, and its file capability reads the
    // kernel log under dmesg_restrict (without it: UNKNOWN naming CAP_SYSLOG).
    let out = nrpe("check_storage_kernel_errors");
    println!("check_nrpe -c check_storage_kernel_errors: {out:?}");
    out.assert_protocol("STORAGE_KERNEL_ERRORS");
    assert!(!out.stdout.contains("CAP_SYSLOG"), "{out:?}");
    assert!(out.perf("records").is_some_and(|n| n > 0.0), "{out:?}");
    let out = nrpe("check_iscsi_sessions");
    out.assert_protocol("ISCSI_SESSIONS");
    // No kubelet on this root: the answer says so, through NRPE, by the protocol.
    let out = nrpe("check_ro_pvc_mounts");
    out.assert_status("RO_PVC_MOUNTS", 3);
    stop(pid);

    // Purge: the root is as it was before the install.
    let p = ok(
        chroot(&ns, &root, "dpkg --purge k8s-storage-checks"),
        "dpkg --purge",
    );
    println!("dpkg --purge: {}{}", p.stdout, p.stderr);
    let after = snapshot(&view);
    let added: Vec<_> = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(v))
        .collect();
    let removed: Vec<_> = before.keys().filter(|k| !after.contains_key(*k)).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "purge left {added:#?} and removed {removed:#?}"
    );
    drop(ns);
}

#[test]
fn dist_tarball_and_checksum_are_what_the_role_takes() {
    let work = tempfile::tempdir().unwrap();
    let tarball = build("mkdist", work.path());
    let name = tarball.file_name().unwrap().to_string_lossy().into_owned();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        name,
        format!("k8s-storage-checks-{version}-x86_64-linux.tar.gz")
    );
    // The checksum file verifies with sha256sum -c, as published.
    let sum = ok(
        Cmd::new("sha256sum")
            .args(["-c", &format!("{name}.sha256")])
            .current_dir(work.path())
            .run(),
        "sha256sum -c",
    );
    assert!(sum.stdout.contains(&format!("{name}: OK")), "{sum:?}");
    // One top directory holding every check (the role's k8s_storage_checks_tarball_strip: 1).
    let list = ok(Cmd::new("tar").arg("-tzf").arg(&tarball).run(), "tar -t").stdout;
    let top = format!("k8s-storage-checks-{version}/");
    assert!(list.lines().all(|l| l.starts_with(&top)), "{list}");
    for c in e2e::all_checks() {
        assert!(
            list.lines().any(|l| l == format!("{top}{c}")),
            "{c}:\n{list}"
        );
    }
    for f in [
        "nrpe.d/k8s-storage-checks.cfg",
        "icinga2/k8s-storage-checks.conf",
        "README.md",
    ] {
        assert!(
            list.lines().any(|l| l == format!("{top}{f}")),
            "{f}:\n{list}"
        );
    }
    // Reproducible: built twice, byte for byte the same.
    let again = tempfile::tempdir().unwrap();
    let second = build("mkdist", again.path());
    assert_eq!(
        std::fs::read(&tarball).unwrap(),
        std::fs::read(&second).unwrap()
    );
}

/// Issue 29: `make apt-repo`'s repository (packaging/mkrepo: apt-ftparchive, gpg's detached
/// Release.gpg and inline InRelease), signed with a key this test generates, installed the
/// documented way on a fresh Debian root: the public key in /etc/apt/keyrings, a `signed-by=`
/// source (the only one), `apt-get update && apt-get install k8s-storage-checks`; the installed
/// NRPE answers `check_nrpe`. Then the next version, from the same repository, upgrades cleanly
/// without a prompt, keeping the operator's change to the nrpe.d conffile and the capabilities.
#[test]
fn apt_repository_is_signed_installs_with_signed_by_and_upgrades_keeping_conffile_and_caps() {
    let t =
        "apt_repository_is_signed_installs_with_signed_by_and_upgrades_keeping_conffile_and_caps";
    if !need_root(t)
        || ![
            "dpkg-deb",
            "apt-ftparchive",
            "gpg",
            "gpgv",
            "debootstrap",
            "unshare",
            "getcap",
            "apt-get",
            CHECK_NRPE,
        ]
        .iter()
        .all(|tool| need_tool(t, tool))
    {
        return;
    }
    let started = Instant::now();
    let _machine = e2e::exclusive();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // A signing key of this test only (nothing secret is committed).
    let gnupg = w.join("gnupg");
    std::fs::create_dir(&gnupg).unwrap();
    std::fs::set_permissions(&gnupg, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let gpg = |args: &[&str]| {
        ok(
            Cmd::new("gpg")
                .env("GNUPGHOME", &gnupg)
                .arg("--batch")
                .args(args)
                .run(),
            &format!("gpg {args:?}"),
        )
    };
    gpg(&[
        "--passphrase",
        "",
        "--quick-gen-key",
        "k8s-storage-checks test <test@localhost>",
        "ed25519",
        "sign",
        "never",
    ]);
    let fpr = gpg(&["--with-colons", "--list-keys"])
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("fpr:"))
        .and_then(|l| l.split(':').find(|f| f.len() == 40))
        .expect("the key's fingerprint")
        .to_string();
    let gnupg_s = gnupg.display().to_string();

    // This version and the next one (the same binaries; the package version decides).
    let v1 = env!("CARGO_PKG_VERSION");
    let mut parts: Vec<u64> = v1.split('.').map(|p| p.parse().unwrap()).collect();
    *parts.last_mut().unwrap() += 1;
    let v2 = parts
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(".");
    let out1 = w.join("out1");
    let out2 = w.join("out2");
    let deb1 = build_env("mkdeb", &out1, &[("ARCH", "amd64")]);
    std::fs::create_dir_all(&out2).unwrap();
    // (The next version is a throwaway: gzip, faster to build than the release's xz.)
    let deb2 = build_env(
        "mkdeb",
        &out2,
        &[
            ("ARCH", "amd64"),
            ("VERSION", &v2),
            ("DEB_COMPRESSION", "gzip"),
        ],
    );
    let repo = |dir: &str, debs: &[&Path]| {
        let mut c = Cmd::new(workspace_root().join("packaging/mkrepo"))
            .env("GNUPGHOME", &gnupg_s)
            .env("SIGNING_KEY", &fpr)
            .env("OUT_DIR", w)
            .env("REPO_DIR", w.join(dir));
        for d in debs {
            c = c.arg(d);
        }
        let o = ok(c.run(), "packaging/mkrepo");
        PathBuf::from(o.stdout.lines().last().unwrap().trim())
    };
    let r1 = repo("repo1", &[&deb1]);
    // Both signatures verify with the published key alone, and name the Release they sign.
    let key = r1.join("k8s-storage-checks.gpg");
    let release = std::fs::read_to_string(r1.join("dists/stable/Release")).unwrap();
    for l in [
        "Suite: stable",
        "Architectures: amd64 arm64",
        "Components: main",
    ] {
        assert!(release.lines().any(|x| x == l), "{l}:\n{release}");
    }
    ok(
        Cmd::new("gpgv")
            .arg("--keyring")
            .arg(&key)
            .arg(r1.join("dists/stable/InRelease"))
            .run(),
        "gpgv InRelease",
    );
    ok(
        Cmd::new("gpgv")
            .arg("--keyring")
            .arg(&key)
            .arg(r1.join("dists/stable/Release.gpg"))
            .arg(r1.join("dists/stable/Release"))
            .run(),
        "gpgv Release.gpg Release",
    );
    let inrelease = std::fs::read_to_string(r1.join("dists/stable/InRelease")).unwrap();
    assert!(
        inrelease.starts_with("-----BEGIN PGP SIGNED MESSAGE-----") && inrelease.contains(&release),
        "{inrelease}"
    );

    // A fresh Debian root whose only source is the repository, with the key the documented way.
    let (mut ns, root, view) = fresh_root(&w.join("rootfs"));
    let install_repo = |from: &Path| {
        let _ = std::fs::remove_dir_all(view.join("srv/apt"));
        ok(
            Cmd::new("cp")
                .arg("-a")
                .arg(from)
                .arg(view.join("srv/apt"))
                .run(),
            "cp repository",
        );
    };
    install_repo(&r1);
    std::fs::create_dir_all(view.join("etc/apt/keyrings")).unwrap();
    std::fs::copy(&key, view.join("etc/apt/keyrings/k8s-storage-checks.gpg")).unwrap();
    std::fs::write(view.join("etc/apt/sources.list"), "").unwrap();
    std::fs::write(
        view.join("etc/apt/sources.list.d/k8s-storage-checks.list"),
        "deb [signed-by=/etc/apt/keyrings/k8s-storage-checks.gpg] file:///srv/apt stable main\n",
    )
    .unwrap();
    let apt = |ns: &Ns, cmd: &str| {
        let o = chroot(
            ns,
            &root,
            &format!("export DEBIAN_FRONTEND=noninteractive; {cmd} </dev/null"),
        );
        println!("{cmd}:\n{}{}", o.stdout, o.stderr);
        ok(o, cmd)
    };
    let upd = apt(&ns, "apt-get update");
    assert!(
        !upd.stderr.contains("NO_PUBKEY") && !upd.stderr.contains("not signed"),
        "{upd:?}"
    );
    apt(&ns, "apt-get install -y k8s-storage-checks");
    let version = |ns: &Ns| {
        chroot(
            ns,
            &root,
            "dpkg-query -W -f '${Version}' k8s-storage-checks",
        )
        .stdout
        .trim()
        .to_string()
    };
    assert_eq!(version(&ns), format!("{v1}-1"));
    let nagios = gid_of(&view, "nagios");
    let assert_caps = |ns: &Ns, when: &str| {
        for (c, want) in CAPS {
            let md = std::fs::metadata(view.join(PLUGINS).join(c)).unwrap();
            assert_eq!(md.mode() & 0o7777, 0o750, "{when}: {c}");
            assert_eq!((md.uid(), md.gid()), (0, nagios), "{when}: {c}");
            let cap = ns
                .cmd("getcap")
                .arg(root.join(PLUGINS).join(c))
                .run()
                .stdout;
            assert!(cap.contains(&format!("{want}=ep")), "{when}: {c}: {cap:?}");
        }
    };
    assert_caps(&ns, "installed");
    let (port, pid) = start_nrpe(&mut ns, &root, &view);
    let out = nrpe_ask(port, "check_storage_kernel_errors");
    out.assert_protocol("STORAGE_KERNEL_ERRORS");
    assert!(!out.stdout.contains("CAP_SYSLOG"), "{out:?}");
    assert!(out.perf("records").is_some_and(|n| n > 0.0), "{out:?}");
    stop(pid);

    // The operator changes the conffile; the next version is published beside this one.
    let conf = view.join("etc/nagios/nrpe.d/k8s-storage-checks.cfg");
    let local = "command[k8s_local_iscsi]=/usr/lib/nagios/plugins/check_iscsi_sessions -t 20";
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str(&format!("# a local change, kept on upgrade\n{local}\n"));
    std::fs::write(&conf, &text).unwrap();
    let r2 = repo("repo2", &[&deb1, &deb2]);
    install_repo(&r2);
    apt(&ns, "apt-get update");
    let up = apt(&ns, "apt-get install -y k8s-storage-checks");
    assert!(
        up.stdout.contains(&format!("{v2}-1")),
        "the upgrade did not name {v2}-1: {up:?}"
    );
    assert_eq!(version(&ns), format!("{v2}-1"));
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        text,
        "the changed conffile was not kept"
    );
    let leftovers: Vec<_> = std::fs::read_dir(view.join("etc/nagios/nrpe.d"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".dpkg-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_caps(&ns, "upgraded");
    let (port, pid) = start_nrpe(&mut ns, &root, &view);
    // The kept local command and a privileged check answer through the upgraded package.
    nrpe_ask(port, "k8s_local_iscsi").assert_protocol("ISCSI_SESSIONS");
    let out = nrpe_ask(port, "check_storage_kernel_errors");
    out.assert_protocol("STORAGE_KERNEL_ERRORS");
    assert!(out.perf("records").is_some_and(|n| n > 0.0), "{out:?}");
    stop(pid);
    drop(ns);
    println!("{t}: {:.1}s", started.elapsed().as_secs_f64());
}
