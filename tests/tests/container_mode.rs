//! Container mode without a container engine: the image's layout, emulated faithfully.
//!
//! What a Kubernetes node gives the DaemonSet's container, and how this file reproduces it:
//!
//! - **The host** is a pid namespace + mount namespace of its own ([`EmuHost`]): its pid 1 is a
//!   holder process, its `/proc` is that pid namespace's procfs, its root mount tree is `rshared`
//!   (as the kubelet makes /var/lib/kubelet), and its kubelet root is at the real path
//!   `/var/lib/kubelet` (a tmpfs over /var/lib *in that namespace only*, with the test's
//!   [`KubeletTree`] bound there). Why not this machine's own init: its pid 1 is not ours to
//!   read (`/proc/1/root` is refused even to root here), and the mounts a test makes must not
//!   leak into the machine. With a pid namespace of its own, `/host/proc/1` *is* the emulated
//!   host's init, exactly as `/host/proc/1` is the node's init in a pod.
//! - **PV filesystems and FUSE daemons** are mounted in the host's namespace *after* the
//!   container started, like the CSI node plugin does.
//! - **The container** ([`EmuContainer`]) is a child mount, pid and UTS namespace of the host
//!   (`unshare --propagation slave`: the copies of the host's mounts receive its later mounts),
//!   with the image as an overlay (the layers staged by deploy/container/stage.sh, the script
//!   the Containerfile uses, plus the debootstrapped Debian base for the NRPE variant), the
//!   DaemonSet's volumes bound in (`/proc` → /host/proc read-only, `/sys` → /host/sys,
//!   `/dev/kmsg` → /host/dev/kmsg, `/var/lib/kubelet` → /host/var/lib/kubelet with slave
//!   propagation, `/var/log` → /host/var/log), its own /proc, a /dev like a runtime's (tmpfs
//!   with null, zero, urandom...), a read-only root, and every process
//!   started with `capsh --chroot` and *only the capabilities the manifest grants* (read from
//!   deploy/daemonset*.yaml: the bounding set is cut to exactly that list, running as uid 0 like
//!   the manifest says).
//! - Not emulated: the network namespace (NRPE listens on a loopback port of the test's network,
//!   where a pod would use hostPort 5666), seccomp and AppArmor.
//!
//! Cleanup: every namespace is held by a process; killing the container's and the host's pid 1
//! ends all their processes and mounts (loop devices detach themselves: autoclear).

use e2e::{bin_dir, need_root, need_tool, Cmd, KubeletTree, Output};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NAME: &str = "RO_PVC_MOUNTS";
const KUBELET: &str = "/var/lib/kubelet";

fn progress(msg: &str) {
    // Straight to the process's stderr: the test harness captures only the print macros.
    let _ = writeln!(std::io::stderr(), "container_mode: {msg}");
}

fn deploy(file: &str) -> PathBuf {
    e2e::workspace_root().join("deploy").join(file)
}

/// The capabilities a manifest's container adds (`add: ["A", "B"]`), as capsh names (`cap_a`).
fn manifest_caps(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(deploy(file)).unwrap();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("add: ["))
        .unwrap_or_else(|| panic!("no capabilities add: [..] in {file}"));
    let inner = line.split_once('[').unwrap().1.split_once(']').unwrap().0;
    inner
        .split(',')
        .map(|c| format!("cap_{}", c.trim().trim_matches('"').to_lowercase()))
        .collect()
}

/// The textfile runner's arguments in a manifest (the `args:` list items starting with `--`).
fn manifest_args(file: &str) -> Vec<String> {
    std::fs::read_to_string(deploy(file))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("- --"))
        .map(|a| format!("--{a}"))
        .collect()
}

/// Every capability of this kernel/process except `keep`, for `capsh --drop=`.
fn drop_list(keep: &[String]) -> String {
    let out = Cmd::new("capsh").arg("--print").run();
    let all = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("Bounding set ="))
        .expect("capsh --print shows the bounding set")
        .to_string();
    all.split(',')
        .filter(|c| !keep.iter().any(|k| k == c))
        .collect::<Vec<_>>()
        .join(",")
}

fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Wait for a condition, polling; panics with `what` after 60 s.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sh_ok(cmd: Cmd, script: &str) -> Output {
    let out = cmd.arg("sh").arg("-ec").arg(script).run();
    assert_eq!(out.code, 0, "script failed:\n{script}\n{out:?}");
    out
}

/// The emulated node: its own pid and mount namespace, /var/lib/kubelet being `tree`.
struct EmuHost {
    unshare: Child,
    init: u32,
    daemons: Vec<Child>,
    pids: Vec<u32>,
}

impl EmuHost {
    fn new(tree: &KubeletTree) -> EmuHost {
        let unshare = Command::new("unshare")
            .args([
                "-m",
                "-p",
                "-f",
                "--propagation",
                "private",
                "--mount-proc",
                "cat",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("unshare (needs root)");
        let mine = std::fs::read_link("/proc/self/ns/mnt").unwrap();
        let mut init = 0;
        wait_for("the host namespace's init", || {
            init = children(unshare.id()).first().copied().unwrap_or(0);
            init != 0
                && std::fs::read_link(format!("/proc/{init}/ns/mnt")).is_ok_and(|m| m != mine)
                && std::fs::read_to_string(format!("/proc/{init}/comm"))
                    .is_ok_and(|c| c.trim() == "cat")
        });
        let host = EmuHost {
            unshare,
            init,
            daemons: Vec::new(),
            pids: Vec::new(),
        };
        host.sh(&format!(
            "mount --make-rshared /
             mount -t tmpfs -o mode=0755 emu-host-var-lib /var/lib
             mkdir -p {KUBELET}
             mount --bind '{}' {KUBELET}",
            tree.root.display()
        ));
        host
    }

    /// A command in the host's mount and pid namespaces (its /proc is that pid namespace's:
    /// `/proc/self` only resolves for a process inside it).
    fn cmd(&self) -> Cmd {
        Cmd::new("nsenter")
            .arg("-t")
            .arg(self.init.to_string())
            .args(["-m", "-p", "--"])
    }

    fn sh(&self, script: &str) -> Output {
        sh_ok(self.cmd(), script)
    }

    fn mountinfo(&self) -> String {
        std::fs::read_to_string(format!("/proc/{}/mountinfo", self.init)).unwrap_or_default()
    }

    /// A background process in the host's namespaces; returns its pid (nsenter's child).
    fn spawn(&mut self, args: &[&str]) -> u32 {
        let child = Command::new("nsenter")
            .arg("-t")
            .arg(self.init.to_string())
            .args(["-m", "-p", "--"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn in host namespace");
        let nsenter = child.id();
        self.daemons.push(child);
        let mut pid = 0;
        wait_for(args[0], || {
            pid = children(nsenter).first().copied().unwrap_or(0);
            pid != 0
                && std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() == args[0])
        });
        self.pids.push(pid);
        pid
    }
}

impl Drop for EmuHost {
    fn drop(&mut self) {
        use nix::sys::signal::{kill, Signal};
        use nix::unistd::Pid;
        for &p in &self.pids {
            let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
        }
        for d in &mut self.daemons {
            let _ = kill(Pid::from_raw(d.id() as i32), Signal::SIGKILL);
            let _ = d.wait();
        }
        // Killing the pid namespace's init ends every process in it, then the namespace.
        let _ = kill(Pid::from_raw(self.init as i32), Signal::SIGKILL);
        drop(self.unshare.stdin.take());
        let _ = self.unshare.wait();
    }
}

/// A path of the test's kubelet tree as the host sees it (under /var/lib/kubelet).
fn host_path(tree: &KubeletTree, p: &Path) -> PathBuf {
    Path::new(KUBELET).join(p.strip_prefix(&tree.root).unwrap())
}

/// A PV as the kubelet lays it out, mounted in the host's namespace: a loop filesystem at its
/// staging globalmount and the pod's publish bind. Returns the loop device name (`loop3`).
fn host_pv(
    host: &EmuHost,
    tree: &KubeletTree,
    work: &Path,
    pv: &str,
    pod: &str,
    opts: &str,
) -> String {
    let handle = format!("{pv}-handle");
    let staging = tree.staging_mount("jiva.csi.openebs.io", &handle, &e2e::sha256_hex(&handle));
    let publish = tree.pod_csi_mount(pod, pv, "jiva.csi.openebs.io");
    let (hs, hp) = (host_path(tree, &staging), host_path(tree, &publish));
    let img = work.join(format!("{pv}.img"));
    let o = if opts.is_empty() {
        String::new()
    } else {
        format!("-o {opts}")
    };
    // `losetup --find` and a plain mount, not `mount -o loop`: that one asks every loop device
    // for its backing file and hangs behind one stuck on a stopped FUSE daemon (e2e::Ns::loop_fs).
    // The device detaches itself when unmounted (`losetup -d` on a busy device sets autoclear).
    let out = host.sh(&format!(
        "truncate -s 64M '{img}'
         mkfs.ext4 -q -F '{img}' >/dev/null
         dev=$(losetup --find --show '{img}')
         mount {o} \"$dev\" '{hs}' || {{ losetup -d \"$dev\"; exit 1; }}
         losetup -d \"$dev\"
         mount --bind '{hs}' '{hp}'
         findmnt -n -o SOURCE --target '{hs}'",
        img = img.display(),
        hs = hs.display(),
        hp = hp.display()
    ));
    out.stdout.trim().trim_start_matches("/dev/").to_string()
}

/// What the container gets besides the host's /proc, /sys, /dev/kmsg, kubelet root and /var/log.
struct Spec {
    /// Image layers, top first (overlay lowerdirs).
    layers: Vec<PathBuf>,
    /// Capabilities (capsh names) of every process started in it.
    caps: Vec<String>,
    /// Extra binds: (source as the host sees it, path in the container, read-only).
    binds: Vec<(PathBuf, &'static str, bool)>,
    /// The entrypoint and its arguments; None: an idle container to exec into.
    main: Option<Vec<String>>,
}

struct EmuContainer {
    holder: Child,
    init: u32,
    root: PathBuf,
    caps: Vec<String>,
    _dirs: tempfile::TempDir,
}

impl EmuContainer {
    fn start(host: &EmuHost, spec: Spec) -> EmuContainer {
        let dirs = tempfile::tempdir().unwrap();
        let (root, upper, work) = (
            dirs.path().join("root"),
            dirs.path().join("upper"),
            dirs.path().join("work"),
        );
        // The writable layer lives on a tmpfs of the container's own (overlayfs refuses an upper
        // directory on overlayfs, which /tmp may be when CI itself runs in a container).
        let lower = spec
            .layers
            .iter()
            .map(|l| l.display().to_string())
            .collect::<Vec<_>>()
            .join(":");
        let mut script = format!(
            "set -e
             R='{r}'
             mount -t tmpfs -o mode=0755 emu-rw '{base}'
             mkdir -p \"$R\" '{u}' '{w}'
             mount -t overlay emu-image -o 'lowerdir={lower},upperdir={u},workdir={w}' \"$R\"
             bind() {{ mkdir -p \"$R$2\"; mount --rbind \"$1\" \"$R$2\"; [ \"$3\" = ro ] && mount -o remount,bind,ro \"$R$2\"; true; }}
             mkdir -p \"$R/dev\"; mount -t tmpfs -o mode=0755,nosuid emu-dev \"$R/dev\"
             for d in null zero full random urandom tty; do touch \"$R/dev/$d\"; mount --bind /dev/$d \"$R/dev/$d\"; done
             bind /proc /host/proc ro
             bind /sys /host/sys ro
             mkdir -p \"$R/host/dev\"; touch \"$R/host/dev/kmsg\"
             mount --bind /dev/kmsg \"$R/host/dev/kmsg\"; mount -o remount,bind,ro \"$R/host/dev/kmsg\"
             bind {KUBELET} /host/var/lib/kubelet ro
             bind /var/log /host/var/log ro
             ",
            r = root.display(),
            base = dirs.path().display(),
            u = upper.display(),
            w = work.display()
        );
        for (src, dst, ro) in &spec.binds {
            script += &format!(
                "bind '{}' '{dst}' {}\n",
                src.display(),
                if *ro { "ro" } else { "rw" }
            );
        }
        let drop = drop_list(&spec.caps);
        script += "mkdir -p \"$R/proc\"; mount -t proc proc \"$R/proc\"\n";
        script += "mount -o remount,bind,ro \"$R\"\n";
        script += "echo k8s-storage-checks-x7k2p > /proc/sys/kernel/hostname\n";
        script += "echo ready\n";
        match &spec.main {
            None => script += "exec cat\n",
            Some(argv) => {
                script += &format!(
                    "exec capsh --chroot=\"$R\" --drop={drop} --shell='{}' -- {}\n",
                    argv[0],
                    argv[1..]
                        .iter()
                        .map(|a| format!("'{a}'"))
                        .collect::<Vec<_>>()
                        .join(" ")
                );
            }
        }
        let mut holder = Command::new("nsenter")
            .arg("-t")
            .arg(host.init.to_string())
            .args(["-m", "-p", "--", "unshare", "-m", "-p", "-u", "-f"])
            .args(["--propagation", "slave", "sh", "-c", &script])
            .env("NODE_NAME", "node-emu")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the container");
        let mut line = String::new();
        let mut out = BufReader::new(holder.stdout.take().unwrap());
        let _ = out.read_line(&mut line);
        if line.trim() != "ready" {
            let _ = holder.kill();
            let o = holder.wait_with_output().unwrap();
            panic!(
                "container setup failed: {line}{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        // Keep draining its stdout so the entrypoint never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut out, &mut sink);
        });
        // nsenter (forks into the host pid ns) → unshare (forks into the container's) → init.
        let unshare = children(holder.id())[0];
        let init = children(unshare)[0];
        EmuContainer {
            holder,
            init,
            root,
            caps: spec.caps,
            _dirs: dirs,
        }
    }

    /// `kubectl exec`: a program of the image, in the container's namespaces, chrooted, with the
    /// container's capabilities (or `caps` instead).
    fn exec_caps(&self, caps: &[String], prog: &str) -> Cmd {
        Cmd::new("nsenter")
            .arg("-t")
            .arg(self.init.to_string())
            .args(["-m", "-p", "-u", "--", "capsh"])
            .arg(format!("--chroot={}", self.root.display()))
            .arg(format!("--drop={}", drop_list(caps)))
            .arg(format!("--shell={prog}"))
            .arg("--")
            .env("NODE_NAME", "node-emu")
    }

    fn exec(&self, prog: &str) -> Cmd {
        self.exec_caps(&self.caps.clone(), prog)
    }

    fn check(&self, name: &str) -> Cmd {
        self.exec(&format!("/usr/lib/nagios/plugins/{name}"))
    }
}

impl EmuContainer {
    /// Send `sig` to the container's init (as the runtime does on pod deletion) and wait for the
    /// container to end; its exit status.
    fn stop(&mut self, sig: nix::sys::signal::Signal) -> std::process::ExitStatus {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.init as i32), sig).unwrap();
        let mut status = None;
        wait_for("the container to stop", || {
            status = self.holder.try_wait().unwrap();
            status.is_some()
        });
        status.unwrap()
    }
}

impl Drop for EmuContainer {
    fn drop(&mut self) {
        use nix::sys::signal::{kill, Signal};
        use nix::unistd::Pid;
        let _ = kill(Pid::from_raw(self.init as i32), Signal::SIGKILL);
        drop(self.holder.stdin.take());
        let _ = self.holder.wait();
    }
}

/// deploy/container/stage.sh VARIANT into a fresh directory (an image layer).
fn stage(variant: &str, nrpe_d: Option<&Path>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Cmd::new("sh")
        .arg(e2e::workspace_root().join("deploy/container/stage.sh"))
        .arg(variant)
        .arg(bin_dir())
        .arg(dir.path());
    if let Some(f) = nrpe_d {
        cmd = cmd.arg(f);
    }
    let out = cmd.run();
    assert_eq!(out.code, 0, "stage.sh {variant}: {out:?}");
    dir
}

fn tools(test: &str, list: &[&str]) -> bool {
    need_root(test) && list.iter().all(|t| need_tool(test, t))
}

#[test]
fn plain_image_sees_the_host_through_host_root() {
    let t = "plain_image_sees_the_host_through_host_root";
    if !tools(t, &["capsh", "nsenter", "unshare", "mkfs.ext4", "bindfs"]) {
        return;
    }
    let _machine = e2e::exclusive();
    let work = tempfile::tempdir().unwrap();
    let textfile = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let layer = stage("plain", None);
    let mut host = EmuHost::new(&tree);
    let caps = manifest_caps("daemonset.yaml");
    assert_eq!(
        {
            let mut c = caps.clone();
            c.sort();
            c
        },
        ["cap_dac_read_search", "cap_sys_ptrace", "cap_syslog"],
        "the plain DaemonSet's capabilities changed: update docs/deploy/container.md and this test"
    );
    let c = EmuContainer::start(
        &host,
        Spec {
            layers: vec![layer.path().to_path_buf()],
            caps: caps.clone(),
            binds: vec![
                (textfile.path().to_path_buf(), "/textfile", false),
                (
                    state.path().to_path_buf(),
                    "/var/lib/k8s-storage-checks",
                    false,
                ),
            ],
            main: None,
        },
    );
    progress("container started; mounting PVs on the host");

    // Mounts made on the host after the container started, like a CSI node plugin's.
    let dev = host_pv(
        &host,
        &tree,
        work.path(),
        "pvc-a634b9a3",
        "8e1f6a2c",
        "errors=remount-ro",
    );
    host_pv(&host, &tree, work.path(), "pvc-owned", "77aa", "");
    // A PV root owned by the application's user: reading it takes CAP_DAC_READ_SEARCH.
    let owned = host_path(
        &tree,
        &tree.staging_mount(
            "jiva.csi.openebs.io",
            "pvc-owned-handle",
            &e2e::sha256_hex("pvc-owned-handle"),
        ),
    );
    host.sh(&format!(
        "chown 1000:1000 '{p}'; chmod 0700 '{p}'",
        p = owned.display()
    ));
    assert!(
        host.mountinfo().contains("pvc-a634b9a3"),
        "the host namespace has the PV mount"
    );
    assert!(
        !std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .contains("pvc-a634b9a3"),
        "the PV must be mounted on the emulated host only, not in the test's namespace"
    );

    // Inside: no --kubelet-root, no --mountinfo: the DaemonSet's defaults through /host.
    let ro = |c: &EmuContainer, caps: &[String]| {
        c.exec_caps(caps, "/usr/lib/nagios/plugins/check_ro_pvc_mounts")
            .args(["--host-root", "/host", "-t", "20", "-v"])
            .run()
    };
    let out = ro(&c, &caps);
    out.assert_status(NAME, 0);
    assert!(
        out.first_line().contains("2 PV filesystems writable"),
        "{out:?}"
    );

    // Each capability is needed: without it the check cannot see what it must.
    for missing in &caps {
        let fewer: Vec<String> = caps.iter().filter(|c| *c != missing).cloned().collect();
        let out = ro(&c, &fewer);
        out.assert_protocol(NAME);
        progress(&format!("without {missing}: {}", out.first_line()));
        if missing == "cap_syslog" {
            // /dev/kmsg: the kernel-log check's need, not this check's.
            if e2e::all_checks()
                .iter()
                .any(|b| b == "check_storage_kernel_errors")
            {
                let k = c
                    .exec_caps(
                        &fewer,
                        "/usr/lib/nagios/plugins/check_storage_kernel_errors",
                    )
                    .args(["--host-root", "/host", "-t", "20"])
                    .run();
                progress(&format!(
                    "  check_storage_kernel_errors: {}",
                    k.first_line()
                ));
                k.assert_protocol("STORAGE_KERNEL_ERRORS");
                assert_ne!(k.code, 0, "still OK without {missing}: {k:?}");
                assert!(
                    ["CAP_SYSLOG", "EPERM", "ermission", "not permitted"]
                        .iter()
                        .any(|w| k.stdout.contains(w)),
                    "without {missing} the failure should say permission: {k:?}"
                );
            }
            continue;
        }
        assert_ne!(out.code, 0, "still OK without {missing}: {out:?}");
        if missing == "cap_sys_ptrace" {
            // /host/proc/1/root refused: what node::Host::access_problem() reports.
            let p = c
                .exec_caps(&fewer, "/usr/lib/nagios/plugins/check_ro_pvc_mounts")
                .args([
                    "--host-root",
                    "/host",
                    "--kubelet-root",
                    KUBELET,
                    "-t",
                    "20",
                ])
                .run();
            progress(&format!("  with --kubelet-root: {}", p.first_line()));
            assert_ne!(p.code, 0, "{p:?}");
            continue;
        }
        assert!(
            out.stdout.contains("EACCES")
                || out.stdout.contains("ermission denied")
                || out.stdout.contains("CAP_DAC_READ_SEARCH"),
            "without {missing} the failure should say permission: {out:?}"
        );
    }

    // A real ext4 error through the kernel's own path, seen from inside.
    std::fs::write(
        format!("/sys/fs/ext4/{dev}/trigger_fs_error"),
        "k8s-storage-checks container test",
    )
    .unwrap();
    let out = ro(&c, &caps);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line()
            .contains("1 of 2 PV filesystems read-only: pvc-a634b9a3"),
        "{out:?}"
    );

    // The textfile runner, as the DaemonSet runs it, writes through the hostPath directory.
    let out = c
        .exec("/usr/local/bin/k8s-storage-checks-textfile")
        .args(["--once", "--dir", "/textfile", "--host-root", "/host"])
        .args(["--check", "check_ro_pvc_mounts -t 20"])
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    let prom = std::fs::read_to_string(textfile.path().join("check_ro_pvc_mounts.prom")).unwrap();
    assert!(
        prom.contains("k8s_storage_check_status{check=\"check_ro_pvc_mounts\"} 2\n"),
        "{prom}"
    );
    assert!(
        prom.contains("k8s_storage_check_ro_volumes{check=\"check_ro_pvc_mounts\"} 1\n"),
        "{prom}"
    );

    // The manifest's own --check lines against the binaries of this tree: every check that
    // exists accepts them (no usage error), and --host-root reaches it.
    let mut args: Vec<String> = manifest_args("daemonset.yaml")
        .into_iter()
        .filter(|a| !a.starts_with("--interval"))
        .map(|a| a.replace("$(NODE_NAME)", "node-emu"))
        .collect();
    args.push("--once".into());
    let out = c
        .exec("/usr/local/bin/k8s-storage-checks-textfile")
        .args(&args)
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    let built = e2e::all_checks();
    let mut refused = Vec::new();
    for a in args.iter().filter_map(|a| a.strip_prefix("--check=")) {
        let name = a.split_whitespace().next().unwrap();
        let prom = std::fs::read_to_string(textfile.path().join(format!("{name}.prom"))).unwrap();
        if !built.iter().any(|b| b == name) {
            progress(&format!(
                "{name}: not in this tree yet ({})",
                prom.lines().next().unwrap_or("")
            ));
            continue;
        }
        assert!(
            prom.contains(&format!("k8s_storage_check_status{{check=\"{name}\"}}")),
            "{prom}"
        );
        if prom.contains("usage error") {
            refused.push(format!(
                "--check={a}: {}",
                prom.lines().next().unwrap_or("")
            ));
        }
    }
    assert!(
        refused.is_empty(),
        "the DaemonSet's --check lines the checks refuse:\n{}",
        refused.join("\n")
    );

    // Every check of the suite takes --host-root and answers by the protocol from inside.
    let mut refused = Vec::new();
    for name in &built {
        let out = c
            .check(name)
            .args(["--host-root", "/host", "-t", "20"])
            .run();
        assert!((0..=3).contains(&out.code), "{name}: {out:?}");
        progress(&format!("{name}: {}", out.first_line()));
        if out.stdout.contains("usage error") {
            refused.push(format!("{name}: {}", out.first_line()));
        }
    }
    assert!(
        refused.is_empty(),
        "every check must take --host-root DIR; these do not:\n{}",
        refused.join("\n")
    );

    // A FUSE mount made on the host whose daemon stops answering.
    let src = work.path().join("fuse-src");
    std::fs::create_dir_all(&src).unwrap();
    let fuse_mp = host_path(
        &tree,
        &tree.pod_csi_mount("5d1e", "pvc-fuse", "fuse.csi.example"),
    );
    let daemon = host.spawn(&[
        "bindfs",
        "-f",
        src.to_str().unwrap(),
        fuse_mp.to_str().unwrap(),
    ]);
    let needle = format!(" {} ", fuse_mp.display());
    wait_for("the FUSE mount on the host", || {
        host.mountinfo()
            .lines()
            .any(|l| l.contains(&needle) && l.contains("fuse"))
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon as i32),
        nix::sys::signal::Signal::SIGSTOP,
    )
    .unwrap();
    let out = c
        .check("check_ro_pvc_mounts")
        .args(["--host-root", "/host", "-t", "15", "--probe-timeout", "2s"])
        .run();
    out.assert_protocol(NAME);
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("pvc-fuse"), "{out:?}");
    assert!(out.stdout.contains("no answer"), "{out:?}");
    // The watchdog's promise, from inside the container too (a loose bound: it is the -t).
    assert!(out.elapsed < Duration::from_secs(15 + 10), "{out:?}");
    if built.iter().any(|b| b == "check_stale_csi_mounts") {
        let out = c
            .check("check_stale_csi_mounts")
            .args(["--host-root", "/host", "-t", "15"])
            .run();
        out.assert_protocol("STALE_CSI_MOUNTS");
        progress(&format!("check_stale_csi_mounts: {}", out.first_line()));
        assert_ne!(out.code, 0, "{out:?}");
        assert!(out.stdout.contains("pvc-fuse"), "{out:?}");
        assert!(out.elapsed < Duration::from_secs(15 + 10), "{out:?}");
    }
    drop(c);

    // The runner as the image's entrypoint, PID 1 of its container, as the DaemonSet starts it:
    // it writes on its own schedule, and a SIGTERM (which PID 1 would ignore without a
    // handler) ends it at once.
    let textfile2 = tempfile::tempdir().unwrap();
    let mut runner = EmuContainer::start(
        &host,
        Spec {
            layers: vec![layer.path().to_path_buf()],
            caps: caps.clone(),
            binds: vec![
                (textfile2.path().to_path_buf(), "/textfile", false),
                (
                    state.path().to_path_buf(),
                    "/var/lib/k8s-storage-checks",
                    false,
                ),
            ],
            main: Some(
                [
                    "/usr/local/bin/k8s-storage-checks-textfile",
                    "--dir=/textfile",
                    "--interval=1h",
                    "--host-root=/host",
                    "--check=check_ro_pvc_mounts -t 20 --probe-timeout 2s",
                ]
                .map(String::from)
                .to_vec(),
            ),
        },
    );
    let prom = textfile2.path().join("check_ro_pvc_mounts.prom");
    wait_for("the runner's first file", || prom.exists());
    let text = std::fs::read_to_string(&prom).unwrap();
    // The errored ext4 PV and the hung FUSE mount, both critical.
    assert!(
        text.contains("k8s_storage_check_status{check=\"check_ro_pvc_mounts\"} 2\n"),
        "{text}"
    );
    assert!(
        text.contains("k8s_storage_check_ro_volumes{check=\"check_ro_pvc_mounts\"} 2\n"),
        "{text}"
    );
    let status = runner.stop(nix::sys::signal::Signal::SIGTERM);
    assert!(status.success(), "runner ended by SIGTERM: {status:?}");
    drop(host);
}

#[test]
fn nrpe_image_answers_check_nrpe() {
    let t = "nrpe_image_answers_check_nrpe";
    let check_nrpe = "/usr/lib/nagios/plugins/check_nrpe";
    if !tools(
        t,
        &[
            "capsh",
            "nsenter",
            "unshare",
            "mkfs.ext4",
            "debootstrap",
            check_nrpe,
        ],
    ) {
        return;
    }
    let _machine = e2e::exclusive();
    let base = e2e::debian_nrpe_base();
    let work = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());

    // The suite's nrpe.d commands (the deployment's file when this tree has it).
    let shipped = e2e::workspace_root().join("nrpe.d/k8s-storage-checks.cfg");
    let fallback = work.path().join("k8s-storage-checks.cfg");
    let nrpe_d = if shipped.exists() {
        shipped
    } else {
        progress(
            "nrpe.d/k8s-storage-checks.cfg not in this tree yet: using a one-command stand-in",
        );
        std::fs::write(
            &fallback,
            "command[check_ro_pvc_mounts]=/usr/lib/nagios/plugins/check_ro_pvc_mounts -t 20\n",
        )
        .unwrap();
        fallback
    };
    let layer = stage("nrpe", Some(&nrpe_d));
    let cfg = std::fs::read_to_string(
        layer
            .path()
            .join("etc/nagios/nrpe.d/k8s-storage-checks.cfg"),
    )
    .unwrap();
    let commands: Vec<&str> = cfg.lines().filter(|l| l.starts_with("command[")).collect();
    assert!(!commands.is_empty(), "no commands: {cfg}");
    // The checks that need the pod's capabilities run through `sudo -n`, with exactly the command
    // lines of the sudoers drop-in; the others run as nagios, without any.
    let privileged = std::fs::read_to_string(
        layer
            .path()
            .join("usr/local/lib/k8s-storage-checks/privileged"),
    )
    .unwrap();
    let privileged: Vec<&str> = privileged.split_whitespace().collect();
    assert!(
        privileged.contains(&"check_ro_pvc_mounts")
            && privileged.contains(&"check_storage_kernel_errors"),
        "{privileged:?}"
    );
    let sudoers =
        std::fs::read_to_string(layer.path().join("etc/sudoers.d/k8s-storage-checks")).unwrap();
    let mut sudo_lines = 0;
    for l in &commands {
        let (_, cmdline) = l.split_once('=').unwrap();
        let mut w = cmdline.split_whitespace().peekable();
        let via_sudo = w.peek() == Some(&"/usr/bin/sudo");
        if via_sudo {
            assert_eq!(w.nth(1), Some("-n"), "{l}");
        }
        let bin = w.next().unwrap();
        assert!(bin.contains("/check_"), "{l}");
        let name = bin.rsplit('/').next().unwrap();
        assert_eq!(via_sudo, privileged.contains(&name), "{l}");
        assert_eq!(w.next(), Some("--host-root"), "{l}");
        assert_eq!(w.next(), Some("/host"), "{l}");
        assert!(
            !l.contains("--kubeconfig"),
            "the pod uses its ServiceAccount: {l}"
        );
        if via_sudo {
            let exact = format!(
                "nagios ALL=(root) NOPASSWD: {}",
                &cmdline["/usr/bin/sudo -n ".len()..]
            );
            assert!(
                sudoers.lines().any(|s| s == exact),
                "{exact}\nnot in\n{sudoers}"
            );
            sudo_lines += 1;
        }
    }
    assert_eq!(
        sudoers.lines().filter(|l| l.contains("NOPASSWD")).count(),
        sudo_lines,
        "the sudoers drop-in allows more than the NRPE commands:\n{sudoers}"
    );
    let visudo = Cmd::new("visudo")
        .args(["-c", "-f"])
        .arg(layer.path().join("etc/sudoers.d/k8s-storage-checks"))
        .run();
    assert_eq!(visudo.code, 0, "{visudo:?}");
    // The image's last stage: deploy/container/harden.sh, with the base's nagios group.
    let hardened = Cmd::new("sh")
        .arg(
            layer
                .path()
                .join("usr/local/lib/k8s-storage-checks/harden.sh"),
        )
        .arg(layer.path())
        .arg(base.join("etc/group"))
        .run();
    assert_eq!(hardened.code, 0, "{hardened:?}");
    let ro_cmd = commands
        .iter()
        .find(|l| l.contains("/check_ro_pvc_mounts "))
        .and_then(|l| l.strip_prefix("command["))
        .and_then(|l| l.split_once(']'))
        .map(|(n, _)| n.to_string())
        .expect("an nrpe command for check_ro_pvc_mounts");

    // The ConfigMap: the image's default nrpe.cfg on a free loopback port, plus a probe command.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let default_cfg =
        std::fs::read_to_string(layer.path().join("etc/k8s-storage-checks/nrpe.cfg")).unwrap();
    let mut nrpe_cfg: String = default_cfg
        .lines()
        .map(|l| {
            if l.starts_with("server_port=") {
                format!("server_port={port}\nserver_address=127.0.0.1")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    // A probe command (a script in the "ConfigMap": NRPE would take `$...$` for its own macros).
    // NRPE clears the environment of its commands: $NODE_NAME does not reach the checks there,
    // which is why node::Host::hostname falls back to the host's /etc/hostname.
    std::fs::write(
        config.path().join("whoami.sh"),
        "echo \"$(id -un) node=$NODE_NAME $(grep CapEff /proc/self/status)\"\n",
    )
    .unwrap();
    nrpe_cfg += "\ncommand[emu_whoami]=/bin/sh /etc/k8s-storage-checks/whoami.sh\n";
    // The agent's account turned attacker: the same sudo-able check with other arguments (a
    // root-only file as the mount table), and the check run directly on that file.
    nrpe_cfg += "command[emu_sudo_other]=/usr/bin/sudo -n /usr/lib/nagios/plugins/check_ro_pvc_mounts --host-root /host --mountinfo /etc/shadow -t 8\n";
    nrpe_cfg += "command[emu_direct]=/usr/lib/nagios/plugins/check_ro_pvc_mounts --host-root /host --mountinfo /etc/shadow -t 8\n";
    std::fs::write(config.path().join("nrpe.cfg"), nrpe_cfg).unwrap();

    let host = EmuHost::new(&tree);
    let caps = manifest_caps("daemonset-nrpe.yaml");
    let c = EmuContainer::start(
        &host,
        Spec {
            layers: vec![layer.path().to_path_buf(), base.clone()],
            caps,
            binds: vec![
                (config.path().to_path_buf(), "/etc/k8s-storage-checks", true),
                (
                    state.path().to_path_buf(),
                    "/var/lib/k8s-storage-checks",
                    false,
                ),
            ],
            main: Some(vec!["/usr/local/bin/nrpe-entrypoint".into()]),
        },
    );
    progress(&format!(
        "nrpe container started; waiting for 127.0.0.1:{port}"
    ));
    wait_for("nrpe to listen", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let nrpe = |command: &str| {
        Cmd::new(check_nrpe)
            .args(["-H", "127.0.0.1", "-p", &port.to_string(), "-t", "40"])
            .args(["-c", command])
            .run()
    };

    // nrpe and what it runs directly hold no capability at all; NRPE keeps the node's name.
    let who = nrpe("emu_whoami");
    assert!(
        who.stdout.starts_with("nagios node=node-emu CapEff:"),
        "{who:?}"
    );
    let eff = who.stdout.split_whitespace().last().unwrap().to_string();
    assert_eq!(
        u64::from_str_radix(&eff, 16),
        Ok(0),
        "nrpe's commands hold capabilities: {who:?}"
    );
    // The binaries with a sudo rule are root:nagios 0750 in the image.
    let nagios_gid = std::fs::read_to_string(base.join("etc/group"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("nagios:"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|g| g.parse::<u32>().ok())
        .expect("the base has a nagios group");
    for name in &privileged {
        use std::os::unix::fs::MetadataExt;
        // The image layer (the container's root is only visible in its own mount namespace).
        let p = layer.path().join("usr/lib/nagios/plugins").join(name);
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(
            (m.uid(), m.gid(), m.mode() & 0o7777),
            (0, nagios_gid, 0o750),
            "{}",
            p.display()
        );
    }
    // ... while the program every other name runs stays root:root 0755.
    {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(
            layer
                .path()
                .join("usr/lib/nagios/plugins/check_stuck_scheduled"),
        )
        .unwrap();
        assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (0, 0, 0o755));
    }
    // sudo refuses any other command line; run directly the check has no privilege: nothing of
    // the root-only file comes out either way.
    let shadow = std::fs::read_to_string(base.join("etc/shadow")).unwrap();
    let secret = shadow.lines().next().unwrap().to_string();
    assert!(secret.starts_with("root:"), "{secret}");
    for probe in ["emu_sudo_other", "emu_direct"] {
        let out = nrpe(probe);
        assert!(
            !out.stdout.contains("root:") && !out.stdout.contains(&secret),
            "{probe}: {out:?}"
        );
        assert_ne!(out.code, 0, "{probe}: {out:?}");
    }
    let direct = nrpe("emu_direct");
    assert!(
        direct.first_line().starts_with("RO_PVC_MOUNTS UNKNOWN"),
        "{direct:?}"
    );

    let dev = host_pv(
        &host,
        &tree,
        work.path(),
        "pvc-0b7e",
        "c0ffee",
        "errors=remount-ro",
    );
    let out = nrpe(&ro_cmd);
    out.assert_status(NAME, 0);
    std::fs::write(
        format!("/sys/fs/ext4/{dev}/trigger_fs_error"),
        "k8s-storage-checks container test",
    )
    .unwrap();
    let out = nrpe(&ro_cmd);
    out.assert_status(NAME, 2);
    assert!(out.first_line().contains("read-only: pvc-0b7e"), "{out:?}");

    // Every shipped command runs in the image and answers by the protocol (no usage error, no
    // missing binary or privilege refusal from NRPE itself).
    let built = e2e::all_checks();
    let mut refused = Vec::new();
    for l in &commands {
        let name = l["command[".len()..].split(']').next().unwrap();
        let binary = l
            .split_once('=')
            .unwrap()
            .1
            .split_whitespace()
            .find(|w| w.contains("/check_"))
            .unwrap();
        if !built.iter().any(|b| binary.ends_with(&format!("/{b}"))) {
            progress(&format!("{name}: {binary} not in this tree yet"));
            continue;
        }
        let out = nrpe(name);
        progress(&format!("check_nrpe -c {name}: {}", out.first_line()));
        assert!((0..=3).contains(&out.code), "{name}: {out:?}");
        let status = ["OK", "WARNING", "CRITICAL", "UNKNOWN"][out.code as usize];
        let mut w = out.first_line().split(' ');
        let (label, word) = (w.next().unwrap_or(""), w.next().unwrap_or(""));
        assert!(
            !label.is_empty()
                && label.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                && word == status,
            "{name}: not a plugin answer: {out:?}"
        );
        if out.stdout.contains("usage error") {
            refused.push(format!("{name}: {}", out.first_line()));
        }
    }
    assert!(
        refused.is_empty(),
        "NRPE commands of the image the checks refuse:\n{}",
        refused.join("\n")
    );
    drop(c);
    drop(host);
}

/// Every manifest in deploy/ as JSON documents (through PyYAML, which kubernetes-validate needs).
fn manifests_json(files: &[PathBuf]) -> Vec<serde_json::Value> {
    let out = Cmd::new("python3")
        .arg("-c")
        .arg(
            "import sys, json, yaml\n\
             print(json.dumps([d for f in sys.argv[1:] for d in yaml.safe_load_all(open(f)) if d]))",
        )
        .args(files)
        .run();
    assert_eq!(
        out.code, 0,
        "python3 with PyYAML (Debian: python3-yaml) reads the manifests: {out:?}"
    );
    serde_json::from_str(&out.stdout).unwrap()
}

#[test]
fn manifests_validate_against_kubernetes_schemas() {
    let t = "manifests_validate_against_kubernetes_schemas";
    if !need_tool(t, "kubernetes-validate") {
        return;
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(e2e::workspace_root().join("deploy"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    assert!(
        files.iter().any(|f| f.ends_with("daemonset.yaml")),
        "{files:?}"
    );
    // Strict: an unknown or misspelt field is an error, not a warning. 1.30 is the oldest
    // Kubernetes with securityContext.appArmorProfile; the tool's default is the newest it knows.
    for version in [Some("1.30.0"), None] {
        let mut cmd = Cmd::new("kubernetes-validate").args(["--strict", "--quiet"]);
        if let Some(v) = version {
            cmd = cmd.args(["-k", v]);
        }
        let out = cmd.args(&files).run();
        assert_eq!(
            out.code, 0,
            "kubernetes-validate {version:?} on {files:?}:\n{}{}",
            out.stdout, out.stderr
        );
        progress(&format!(
            "kubernetes-validate --strict {}: {} manifests valid",
            version.unwrap_or("(newest)"),
            files.len()
        ));
    }

    // The DaemonSets' ServiceAccount and namespace are the ones deploy/rbac.yaml creates.
    let docs = manifests_json(&files);
    let kinds =
        |k: &str| -> Vec<&serde_json::Value> { docs.iter().filter(|d| d["kind"] == k).collect() };
    let daemonsets = kinds("DaemonSet");
    assert!(daemonsets.len() >= 2, "textfile and NRPE DaemonSets");
    if !files.iter().any(|f| f.ends_with("rbac.yaml")) {
        progress("deploy/rbac.yaml not in this tree yet: ServiceAccount cross-check skipped");
        return;
    }
    for ds in daemonsets {
        let ns = ds["metadata"]["namespace"].as_str().unwrap();
        let sa = ds["spec"]["template"]["spec"]["serviceAccountName"]
            .as_str()
            .unwrap();
        assert!(
            kinds("ServiceAccount")
                .iter()
                .any(|s| s["metadata"]["name"] == sa && s["metadata"]["namespace"] == ns),
            "DaemonSet {} uses ServiceAccount {ns}/{sa}, which deploy/rbac.yaml does not create",
            ds["metadata"]["name"]
        );
        // hostPath volumes (and the NRPE variant's hostPort) are refused by Pod Security
        // "baseline", which Talos enforces by default: the namespace must allow them.
        let uses_host_path = ds["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .is_some_and(|v| v.iter().any(|v| v.get("hostPath").is_some()));
        if uses_host_path {
            let nsdoc = kinds("Namespace")
                .into_iter()
                .find(|d| d["metadata"]["name"] == ns)
                .unwrap_or_else(|| panic!("deploy/rbac.yaml does not create namespace {ns}"));
            assert_eq!(
                nsdoc["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "privileged",
                "namespace {ns} must allow the hostPath volumes of DaemonSet {}",
                ds["metadata"]["name"]
            );
        }
    }
}

#[test]
fn docs_document_every_runner_option() {
    let help = Cmd::check("k8s-storage-checks-textfile")
        .arg("--help")
        .run();
    assert_eq!(help.code, 0, "{help:?}");
    let page = e2e::workspace_root().join("docs/deploy/container.md");
    let readme = std::fs::read_to_string(page).unwrap();
    let section = readme
        .split("<!-- container-mode:begin -->")
        .nth(1)
        .and_then(|s| s.split("<!-- container-mode:end -->").next())
        .expect("docs/deploy/container.md has the container-mode section");
    let mut n = 0;
    // Option lines: `  -x, --name <VALUE>` or `      --name <VALUE>`.
    for line in help.stdout.lines().map(str::trim_start) {
        if !line.starts_with('-') {
            continue;
        }
        let Some(opt) = line
            .split_whitespace()
            .map(|w| w.trim_end_matches(','))
            .find(|w| w.starts_with("--"))
        else {
            continue;
        };
        let opt = opt.split(['=', '<', '[']).next().unwrap();
        if ["--help", "--version"].contains(&opt) {
            continue;
        }
        n += 1;
        assert!(
            section.contains(&format!("`{opt}")),
            "docs/deploy/container.md does not mention {opt}"
        );
    }
    assert!(n >= 6, "{help:?}");
}
