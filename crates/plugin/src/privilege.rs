//! The privilege boundary, process side: who may run a privileged binary, and the thread-level
//! switch between the caller's privilege and the binary's own.
//!
//! A check may run with more privilege than the user who starts it: file capabilities
//! (`cap_dac_read_search`, `cap_syslog`) or, outside the supported installs, a set-id bit. The
//! kernel says so with `AT_SECURE` in the auxiliary vector. Then:
//!
//! - [`gate`] refuses the run unless the real user is root or a member of the group that owns the
//!   binary's file (installs put privileged binaries `root:<agent group> 0750`; the binary
//!   enforces it too, so a wrong mode does not lend its privilege to everyone);
//! - [`lower_process`] drops the effective capabilities (and, for set-id, the filesystem ids) of
//!   the still single-threaded process before any check code runs: everything a check opens is
//!   opened with the caller's own privilege unless it raises privilege explicitly for one of the
//!   node's own sources ([`elevated_if`]), so a new option cannot forget the boundary.
//! - [`open`]/[`read`]/[`as_caller`] open a path a user named at the caller's level even inside an
//!   elevated section; `node` (host sources) and `kube` (`--kubeconfig`, `--pods-json`) share them.
//!
//! Capabilities and filesystem ids are per thread in Linux: [`Level::set`] changes the calling
//! thread only, and threads inherit the level of the thread that spawns them.

use nix::libc;
use std::sync::OnceLock;

/// True when this process runs with more privilege than its real user (`getauxval(AT_SECURE)`):
/// file capabilities or a set-id bit raised it at exec.
pub fn secure() -> bool {
    static SECURE: OnceLock<bool> = OnceLock::new();
    // SAFETY: getauxval only reads the auxiliary vector (nix has no wrapper for it).
    *SECURE.get_or_init(|| unsafe { libc::getauxval(libc::AT_SECURE) } != 0)
}

/// The facts the gate decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateInput {
    /// `AT_SECURE`: more privilege than the real user.
    pub secure: bool,
    pub real_uid: u32,
    pub real_gid: u32,
    /// Supplementary groups of the process.
    pub groups: Vec<u32>,
    /// Group owning the binary's file (`/proc/self/exe`); `None` when it could not be read.
    pub file_gid: Option<u32>,
}

/// The gate's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Refused: the caller is not in this group (the group owning the binary; `None` when the
    /// binary's file could not be examined).
    Deny {
        group: Option<u32>,
    },
}

/// Only the agent may run a privileged binary: allowed when the process is not privileged beyond
/// its real user, or the real user is root, or a member (primary or supplementary) of the group
/// that owns the binary's file. Anything unknown denies.
pub fn decide(i: &GateInput) -> Decision {
    if !i.secure || i.real_uid == 0 {
        return Decision::Allow;
    }
    match i.file_gid {
        Some(g) if i.real_gid == g || i.groups.contains(&g) => Decision::Allow,
        g => Decision::Deny { group: g },
    }
}

fn group_name(gid: u32) -> String {
    match nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)) {
        Ok(Some(g)) => format!("'{}' (gid {gid})", g.name),
        _ => format!("gid {gid}"),
    }
}

fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => format!("'{}' (uid {uid})", u.name),
        _ => format!("uid {uid}"),
    }
}

/// What raised this process's privilege, for messages.
fn how() -> &'static str {
    use nix::unistd::{getegid, geteuid, getgid, getuid};
    if getuid() != geteuid() || getgid() != getegid() {
        "a set-id bit"
    } else {
        "file capabilities"
    }
}

/// The gate for this process: `Err(reason)` when it must refuse to run.
pub fn gate() -> Result<(), String> {
    if !secure() {
        return Ok(());
    }
    let (uid, gid) = (
        nix::unistd::getuid().as_raw(),
        nix::unistd::getgid().as_raw(),
    );
    // None readable: none to allow by (the primary group and root still are).
    let groups = nix::unistd::getgroups()
        .map(|g| g.into_iter().map(nix::unistd::Gid::as_raw).collect())
        .unwrap_or_default();
    let exe = std::fs::metadata("/proc/self/exe");
    let file_gid = exe.as_ref().ok().map(std::os::unix::fs::MetadataExt::gid);
    let input = GateInput {
        secure: true,
        real_uid: uid,
        real_gid: gid,
        groups,
        file_gid,
    };
    match decide(&input) {
        Decision::Allow => Ok(()),
        Decision::Deny { group: Some(g) } => Err(format!(
            "refusing to run with elevated privilege ({}) for user {}: only root and members of \
             group {} (the group owning this binary) may run it; install it root:<agent group> 0750",
            how(),
            user_name(uid),
            group_name(g)
        )),
        Decision::Deny { group: None } => Err(format!(
            "refusing to run with elevated privilege ({}): cannot examine /proc/self/exe to find \
             the group allowed to run it: {}",
            how(),
            exe.err().map(|e| e.to_string()).unwrap_or_default()
        )),
    }
}

// Capability sets through the raw syscalls (no libcap, and nix has no capget/capset): version 3,
// two 32-bit words per set.
const CAP_V3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

fn capget() -> Option<[CapData; 2]> {
    let mut h = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    let mut d = [CapData::default(); 2];
    // SAFETY: header and a two-element data array, as version 3 requires.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) };
    (rc == 0).then_some(d)
}

fn capset(d: &[CapData; 2]) -> bool {
    let mut h = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    // SAFETY: header and a two-element data array; pid 0 = the calling thread.
    unsafe { libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()) == 0 }
}

/// A capability mask (bit n: capability n) as the two 32-bit words of version 3, low first.
fn words(mask: u64) -> [u32; 2] {
    let [a, b, c, d, e, f, g, h] = mask.to_le_bytes();
    [
        u32::from_le_bytes([a, b, c, d]),
        u32::from_le_bytes([e, f, g, h]),
    ]
}

/// The privilege level of the calling thread: its effective capabilities and filesystem ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    effective: u64,
    fsuid: u32,
    fsgid: u32,
}

/// setfsuid on the calling thread; returns the previous value.
fn setfsuid(id: u32) -> u32 {
    nix::unistd::setfsuid(nix::unistd::Uid::from_raw(id)).as_raw()
}
/// setfsgid on the calling thread; returns the previous value.
fn setfsgid(id: u32) -> u32 {
    nix::unistd::setfsgid(nix::unistd::Gid::from_raw(id)).as_raw()
}

impl Level {
    /// The calling thread's level now.
    pub fn current() -> Level {
        let effective = capget().map_or(0, |d| {
            u64::from(d[0].effective) | u64::from(d[1].effective) << 32
        });
        // setfsuid(-1) fails and returns the current value without changing it.
        Level {
            effective,
            fsuid: setfsuid(u32::MAX),
            fsgid: setfsgid(u32::MAX),
        }
    }

    /// The caller's own privilege: no effective capabilities, the real user's ids for file access.
    pub fn caller() -> Level {
        let (uid, gid) = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        Level {
            effective: 0,
            fsuid: uid,
            fsgid: gid,
        }
    }

    /// The binary's own privilege: every permitted capability effective, the effective ids.
    pub fn own() -> Level {
        let permitted = permitted();
        let (uid, gid) = (
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        );
        Level {
            effective: permitted,
            fsuid: uid,
            fsgid: gid,
        }
    }

    /// Put the calling thread at this level. Filesystem ids first when lowering (setting fsuid
    /// away from 0 clears the filesystem capabilities), last when raising (going back to 0 would
    /// restore them only from the permitted set anyway). Returns false if the kernel refused.
    pub fn set(&self) -> bool {
        let Some(mut d) = capget() else {
            return false;
        };
        setfsgid(self.fsgid);
        setfsuid(self.fsuid);
        let [low, high] = words(self.effective);
        d[0].effective = low & d[0].permitted;
        d[1].effective = high & d[1].permitted;
        let ok = capset(&d);
        // A change of filesystem ids or capabilities clears this thread's parent-death signal.
        crate::parent::die_with_parent();
        Level::current() == *self && ok
    }
}

/// Before any check code runs, when privileged: put the (single-threaded) process at the
/// caller's level. Errors name what the kernel refused; the runtime then does not run the check.
pub fn lower_process() -> Result<(), String> {
    if !secure() {
        return Ok(());
    }
    if Level::caller().set() {
        Ok(())
    } else {
        Err(format!(
            "cannot lower this process's privilege to its caller's: {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// Root through sudo (the role's sudo mode): `sudo` sets `$SUDO_UID`. The command line is fixed by
/// the sudoers rule, but credentials must not be discovered for the caller either. The variable
/// can only restrict, never grant.
pub fn via_sudo() -> bool {
    let root = nix::unistd::getuid().is_root();
    root && std::env::var_os("SUDO_UID").is_some()
}

/// Undoes a level change on drop.
struct Restore(Option<Level>);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Some(l) = self.0.take() {
            l.set();
        }
    }
}

fn at(level: Level) -> Restore {
    let before = Level::current();
    if before == level {
        return Restore(None);
    }
    level.set();
    Restore(Some(before))
}

/// Run `f` with the binary's own privilege on this thread when `own_source` is true (the check
/// reads a default host source no option redirected) and the process is privileged; otherwise run
/// it as it is.
pub fn elevated_if<T>(own_source: bool, f: impl FnOnce() -> T) -> T {
    if !own_source || !secure() {
        return f();
    }
    let _r = at(Level::own());
    f()
}

/// Run `f` with the caller's own privilege on this thread.
pub fn as_caller<T>(f: impl FnOnce() -> T) -> T {
    if !secure() {
        return f();
    }
    let _r = at(Level::caller());
    f()
}

/// Open a path a user named, read-only, with the caller's privilege.
pub fn open(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    as_caller(|| std::fs::File::open(path))
}

/// Open a path a user named with these options, with the caller's privilege.
pub fn open_with(
    path: &std::path::Path,
    opts: &std::fs::OpenOptions,
) -> std::io::Result<std::fs::File> {
    as_caller(|| opts.open(path))
}

/// The largest file [`read`] takes whole (a kubeconfig with embedded certificates is tens of KiB).
pub const READ_WHOLE_MAX: u64 = 16 << 20;

/// The whole content of a file a user named, read with the caller's privilege; at most
/// [`READ_WHOLE_MAX`] bytes (one more is read to tell, so `/dev/zero` or a FIFO that never ends
/// cannot grow the memory): past it, an `InvalidData` error naming the cap.
pub fn read(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    crate::capped::read_capped(open(path)?, READ_WHOLE_MAX)?.ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than {} MiB (the cap of a file read whole: a kubeconfig, token, certificate or key)",
                READ_WHOLE_MAX >> 20
            ),
        )
    })
}

/// The permitted capabilities of this process, as a mask (bit n: capability n).
pub fn permitted() -> u64 {
    capget().map_or(0, |d| {
        u64::from(d[0].permitted) | u64::from(d[1].permitted) << 32
    })
}

/// Before any check code runs, when privileged: keep in the permitted, effective and inheritable
/// sets only the capabilities in `needed` (bit n: capability n). A binary file carries one
/// capability set for every name that runs it (links, a first-argument subcommand): this is what
/// keeps a check from borrowing a capability another check of the same file needs. Lowering is
/// always allowed and cannot be undone without another exec. Errors name what the kernel refused.
pub fn keep_only(needed: u64) -> Result<(), String> {
    if !secure() {
        return Ok(());
    }
    let Some(mut d) = capget() else {
        return Err(format!(
            "cannot read this process's capabilities: {}",
            std::io::Error::last_os_error()
        ));
    };
    for (w, keep) in d.iter_mut().zip(words(needed)) {
        w.permitted &= keep;
        w.effective &= keep;
        w.inheritable &= keep;
    }
    if capset(&d) && permitted() & !needed == 0 {
        Ok(())
    } else {
        Err(format!(
            "cannot drop the capabilities this check does not need: {}",
            std::io::Error::last_os_error()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_read_whole_stops_past_its_cap() {
        // `--kubeconfig /dev/zero` (or a tokenFile naming it) grew to gigabytes before -t.
        let e = read(std::path::Path::new("/dev/zero")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(
            crate::errtext(&e).starts_with("larger than 16 MiB (the cap of a file read whole"),
            "{e}"
        );
        let p = std::env::temp_dir().join(format!("plugin-read-{}", std::process::id()));
        std::fs::write(&p, b"token\n").unwrap();
        assert_eq!(read(&p).unwrap(), b"token\n");
        std::fs::remove_file(&p).unwrap();
    }

    fn input(secure: bool, uid: u32, gid: u32, groups: &[u32], file: Option<u32>) -> GateInput {
        GateInput {
            secure,
            real_uid: uid,
            real_gid: gid,
            groups: groups.to_vec(),
            file_gid: file,
        }
    }

    #[test]
    fn unprivileged_runs_are_never_gated() {
        assert_eq!(
            decide(&input(false, 1000, 1000, &[], Some(0))),
            Decision::Allow
        );
        assert_eq!(
            decide(&input(false, 1000, 1000, &[], None)),
            Decision::Allow
        );
    }

    #[test]
    fn root_may_always_run() {
        assert_eq!(decide(&input(true, 0, 0, &[], Some(110))), Decision::Allow);
        assert_eq!(decide(&input(true, 0, 5, &[], None)), Decision::Allow);
    }

    #[test]
    fn members_of_the_files_group_may_run() {
        // primary group
        assert_eq!(
            decide(&input(true, 112, 110, &[], Some(110))),
            Decision::Allow
        );
        // supplementary group
        assert_eq!(
            decide(&input(true, 112, 112, &[4, 110], Some(110))),
            Decision::Allow
        );
    }

    #[test]
    fn others_are_denied_naming_the_group() {
        // root:root 0755 run by nobody: the group is root's.
        assert_eq!(
            decide(&input(true, 65534, 65534, &[], Some(0))),
            Decision::Deny { group: Some(0) }
        );
        assert_eq!(
            decide(&input(true, 1000, 1000, &[24, 27], Some(110))),
            Decision::Deny { group: Some(110) }
        );
        // The binary's group could not be read: deny.
        assert_eq!(
            decide(&input(true, 1000, 110, &[110], None)),
            Decision::Deny { group: None }
        );
    }

    #[test]
    fn unprivileged_process_reads_as_it_is() {
        // The test process is not AT_SECURE: both wrappers are plain calls.
        assert!(!secure());
        assert_eq!(elevated_if(true, || 7), 7);
        assert_eq!(as_caller(|| 8), 8);
        let own = read(std::path::Path::new("/proc/self/status")).unwrap();
        assert!(!own.is_empty());
        assert!(open(std::path::Path::new("/nonexistent/h1")).is_err());
    }

    #[test]
    fn levels_round_trip_on_this_thread() {
        // Runs in a fresh thread so the test thread's own level is never touched.
        std::thread::spawn(|| {
            let before = Level::current();
            let caller = Level::caller();
            // An unprivileged test run cannot raise; root can lower and raise again.
            if before.effective != 0 && before.fsuid == 0 {
                assert!(caller.set());
                assert_eq!(Level::current(), caller);
                assert!(before.set());
                assert_eq!(Level::current(), before);
            }
        })
        .join()
        .unwrap();
    }
}
