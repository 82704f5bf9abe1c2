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
/// The privilege model: these get a file capability and root:nagios 0750; all others 0755.
const CAPS: [(&str, &str); 3] = [
    ("check_ro_pvc_mounts", "cap_dac_read_search"),
    ("check_stale_csi_mounts", "cap_dac_read_search"),
    ("check_storage_kernel_errors", "cap_syslog"),
];

fn build(script: &str, out: &Path) -> PathBuf {
    let o = Cmd::new(workspace_root().join("packaging").join(script))
        .env("BIN_DIR", bin_dir())
        .env("OUT_DIR", out)
        .run();
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

#[test]
fn deb_is_lintian_clean_installs_with_the_privilege_model_answers_nrpe_and_purges_clean() {
    let t = "deb_is_lintian_clean_installs_with_the_privilege_model_answers_nrpe_and_purges_clean";
    let check_nrpe = "/usr/lib/nagios/plugins/check_nrpe";
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

    // A fresh Debian root: the cached debootstrap under an overlay, in a private namespace.
    let base = e2e::debian_nrpe_base();
    let mut ns = Ns::new();
    let root = work.path().join("root");
    for d in ["upper", "work", "root"] {
        std::fs::create_dir_all(work.path().join(d)).unwrap();
    }
    let r = root.display().to_string();
    ns.sh(&format!(
        "mount -t overlay overlay -o lowerdir='{}',upperdir='{w}/upper',workdir='{w}/work' '{r}' \
         && mount -t proc proc '{r}/proc' && mount --rbind /dev '{r}/dev' && mount --rbind /sys '{r}/sys' \
         && mount -t tmpfs tmpfs '{r}/run'",
        base.display(),
        w = work.path().display()
    ));
    // The test sees the namespace's mounts through its holder's root.
    let view = PathBuf::from(format!("/proc/{}/root{}", ns.pid(), root.display()));
    let v = view.display().to_string();
    // The package depends on libcap2-bin (setcap in postinst), which debootstrap's minbase lacks:
    // the host's own (bookworm) .deb, fetched with apt-get download.
    let debs = work.path().join("debs");
    std::fs::create_dir_all(&debs).unwrap();
    ok(
        Cmd::new("apt-get")
            .args(["download", "-qq", "libcap2-bin"])
            .current_dir(&debs)
            .run(),
        "apt-get download libcap2-bin",
    );
    std::fs::copy(&deb, view.join("tmp/k8s-storage-checks.deb")).unwrap();
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
    let before = snapshot(&view);

    let inst = ok(
        chroot(&ns, &root, "dpkg -i /tmp/k8s-storage-checks.deb"),
        "dpkg -i",
    );
    println!("dpkg -i: {}{}", inst.stdout, inst.stderr);

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
    let nrpe = |command: &str| {
        Cmd::new(check_nrpe)
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
    };
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
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();

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
