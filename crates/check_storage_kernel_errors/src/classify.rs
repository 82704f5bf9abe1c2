//! Kernel storage messages and the device each names, across kernel versions.
//!
//! Sources of the texts: fs/ext4/super.c (`EXT4-fs error (device %s): …`, `Remounting filesystem
//! read-only`), fs/jbd2/journal.c (`Aborting journal on device %s.` with the journal's name
//! `<dev>-<inode>`, e.g. `sdc-8`), fs/xfs/xfs_fsops.c (`Shutting down filesystem`, older
//! `xfs_do_force_shutdown(0x…) called from line …`, very old `xfs_force_shutdown(sdc,0x1)`),
//! block/blk-core.c (`I/O error, dev %s, sector %llu op …`; 4.x `blk_update_request: I/O error,
//! dev sdc, sector N`; 2.6/3.x `end_request: I/O error, dev sdc, sector N`), fs/buffer.c
//! (`Buffer I/O error on dev sdc1, logical block N`; older `on device`), drivers/scsi
//! (`rejecting I/O to offline device`, `Device offlined - not ready after error recovery`),
//! drivers/scsi/scsi_transport_iscsi.c and libiscsi.c (`session3: session recovery timed out
//! after 120 secs`, `connection3:0: detected conn error (1020)`, `ping timeout of 5 secs
//! expired`), kernel/hung_task.c (`INFO: task jbd2/sdc-8:512 blocked for more than 120 seconds.`).
//!
//! Corruption and lost writes (read in the sources of 2.6 to 6.x):
//! - fs/xfs/xfs_error.c `xfs_corruption_error`: `XFS (sdc): Corruption detected. Unmount and run
//!   xfs_repair`; `xfs_verifier_error`: `Metadata corruption detected at <fn>+0x…, <type> block 0x…`
//!   or `Metadata CRC error detected at …` (followed by `Unmount and run xfs_repair` on its own
//!   line); xfs_log_recover.c/xfs_buf_item.c `Corruption warning: Metadata has LSN (4:2729) ahead of
//!   current LSN (4:2727). Please unmount and run xfs_repair (>= v4.3) to resolve.`;
//!   fs/xfs/xfs_fsops.c (`xfs_do_force_shutdown`) `Corruption of in-memory data (0x8) detected at
//!   <fn> (fs/xfs/…:N).  Shutting down filesystem` (≥ 5.x; older `Corruption of in-memory data
//!   detected.  Shutting down filesystem`).
//! - `xfs_error_report`: `XFS (sdc): Internal error xfs_trans_cancel at line 1097 of file
//!   fs/xfs/xfs_trans.c.  Caller …`; 2.6 kernels `Filesystem "sdc": XFS internal error
//!   xfs_da_do_buf(2) at line 2248 of file fs/xfs/xfs_da_btree.c.  Caller 0x…`.
//! - fs/xfs/xfs_log.c `xfs_log_mount`: `XFS (sdc): log mount/recovery failed: error -5` (2.6: no
//!   device, `XFS: log mount/recovery failed: error 5`), then `log mount failed`.
//! - fs/ext4/page-io.c / inode.c `ext4_end_io`: `EXT4-fs (dm-11): failed to convert unwritten extents
//!   to written extents -- potential data loss!  (inode 2754818, error -5)` (3.x: `(inode %lu,
//!   offset %llu, size %zd, error %d)`).
//! - fs/ext4/inode.c `ext4_do_writepages` (6.x; `ext4_writepages` 3.11–6.4, `ext4_da_writepages`
//!   before): `EXT4-fs (sdc): ext4_do_writepages: jbd2_start: 9223372036854775807 pages, ino 12; err
//!   -30` — the page cache's data can no longer be written (-30 EROFS: journal aborted).
//! - fs/jbd2/commit.c: `JBD2: Detected IO errors while flushing file data on sdc1-8` (6.x:
//!   `JBD2: Detected IO errors -5 while flushing file data on sdc1-8`; ext3's jbd: `JBD: …`).
//! - drivers/block/loop.c `lo_write_bvec` (printk_ratelimited, KERN_ERR): `loop: Write error at byte
//!   offset 4096, length 4096.` — the backing file refused a write; the device is not named.

use regex::Regex;
use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    RemountRo,
    JournalAbort,
    XfsShutdown,
    ScsiOffline,
    IscsiRecoveryTimeout,
    Ext4Error,
    IoError,
    IscsiConnError,
    HungTask,
    XfsCorruption,
    XfsInternalError,
    XfsLogRecoveryFailed,
    Ext4DataLoss,
    Ext4WritebackRefused,
    Jbd2DataFlushError,
    LoopWriteError,
    CriticalPattern,
    WarningPattern,
}

impl Category {
    pub const ALL: [Category; 18] = [
        Category::Ext4Error,
        Category::JournalAbort,
        Category::RemountRo,
        Category::XfsShutdown,
        Category::IoError,
        Category::ScsiOffline,
        Category::IscsiConnError,
        Category::IscsiRecoveryTimeout,
        Category::HungTask,
        Category::XfsCorruption,
        Category::XfsInternalError,
        Category::XfsLogRecoveryFailed,
        Category::Ext4DataLoss,
        Category::Ext4WritebackRefused,
        Category::Jbd2DataFlushError,
        Category::LoopWriteError,
        Category::CriticalPattern,
        Category::WarningPattern,
    ];

    /// The perfdata label.
    pub fn label(self) -> &'static str {
        match self {
            Category::Ext4Error => "ext4_error",
            Category::JournalAbort => "journal_abort",
            Category::RemountRo => "remount_ro",
            Category::XfsShutdown => "xfs_shutdown",
            Category::IoError => "io_error",
            Category::ScsiOffline => "scsi_offline",
            Category::IscsiConnError => "iscsi_conn_error",
            Category::IscsiRecoveryTimeout => "iscsi_recovery_timeout",
            Category::HungTask => "hung_task",
            Category::XfsCorruption => "xfs_corruption",
            Category::XfsInternalError => "xfs_internal_error",
            Category::XfsLogRecoveryFailed => "xfs_log_recovery_failed",
            Category::Ext4DataLoss => "ext4_data_loss",
            Category::Ext4WritebackRefused => "ext4_writeback_refused",
            Category::Jbd2DataFlushError => "jbd2_data_flush_error",
            Category::LoopWriteError => "loop_write_error",
            Category::CriticalPattern => "critical_pattern",
            Category::WarningPattern => "warning_pattern",
        }
    }

    pub fn from_label(s: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.label() == s)
    }

    /// How an operator says it.
    pub fn human(self) -> &'static str {
        match self {
            Category::Ext4Error => "ext4 error",
            Category::JournalAbort => "journal aborted",
            Category::RemountRo => "remounted read-only",
            Category::XfsShutdown => "XFS shut down",
            Category::IoError => "I/O error",
            Category::ScsiOffline => "SCSI device offline",
            Category::IscsiConnError => "iSCSI connection error",
            Category::IscsiRecoveryTimeout => "iSCSI session recovery timed out",
            Category::HungTask => "hung task",
            Category::XfsCorruption => "XFS corruption",
            Category::XfsInternalError => "XFS internal error",
            Category::XfsLogRecoveryFailed => "XFS log recovery failed",
            Category::Ext4DataLoss => "ext4 data loss (unwritten extents not converted)",
            Category::Ext4WritebackRefused => "ext4 writeback refused (data not written)",
            Category::Jbd2DataFlushError => "file data lost while flushing the journal",
            Category::LoopWriteError => "loop device write error",
            Category::CriticalPattern => "critical pattern",
            Category::WarningPattern => "warning pattern",
        }
    }

    /// CRITICAL for what leaves a filesystem unusable or loses data (corruption, writes that
    /// never reached the disk); WARNING for errors that may recover.
    pub fn status(self) -> plugin::Status {
        match self {
            Category::RemountRo
            | Category::JournalAbort
            | Category::XfsShutdown
            | Category::XfsCorruption
            | Category::XfsInternalError
            | Category::XfsLogRecoveryFailed
            | Category::Ext4DataLoss
            | Category::Ext4WritebackRefused
            | Category::Jbd2DataFlushError
            | Category::LoopWriteError
            | Category::ScsiOffline
            | Category::IscsiRecoveryTimeout
            | Category::CriticalPattern => plugin::Status::Critical,
            _ => plugin::Status::Warning,
        }
    }
}

/// What a record names: a block device (`sdc`, `dm-3`, `loop0`), a SCSI address (`3:0:0:0`) or
/// an iSCSI session number.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Device {
    Block(String),
    Scsi(String),
    IscsiSession(u32),
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Block(b) => f.write_str(b),
            Device::Scsi(a) => write!(f, "scsi {a}"),
            Device::IscsiSession(n) => write!(f, "iSCSI session{n}"),
        }
    }
}

/// A jbd2 journal name `<dev>-<journal inode>` (`sdc-8`, `dm-3-8`) → the device.
pub fn strip_jbd2(name: &str) -> String {
    let name = name.trim_end_matches('.');
    match name.rsplit_once('-') {
        Some((dev, ino))
            if !dev.is_empty() && ino.chars().all(|c| c.is_ascii_digit()) && !ino.is_empty() =>
        {
            // `dm-3` alone is a device, not a journal: only strip when what remains is a device
            // name that is not itself just `dm`.
            if dev == "dm" {
                name.to_string()
            } else {
                dev.to_string()
            }
        }
        _ => name.to_string(),
    }
}

struct Rule {
    cat: Category,
    re: Regex,
    kind: Kind,
}

#[derive(Clone, Copy)]
enum Kind {
    Block,
    Jbd2,
    Scsi,
    Session,
    HungTask,
    /// The record names no device.
    NoDevice,
}

/// One of these is in the text of every record a built-in rule matches.
const PREFILTER: &[&str] = &[
    "XFS",
    "EXT",
    "JBD",
    "loop:",
    "Aborting journal",
    "BTRFS",
    "xfs_force_shutdown",
    "I/O error",
    "error, dev",
    "offline",
    "session",
    "connection",
    "blocked for more than",
];

fn rules() -> &'static [Rule] {
    static R: OnceLock<Vec<Rule>> = OnceLock::new();
    R.get_or_init(|| {
        let r = |cat, kind, re: &str| Rule {
            cat,
            re: Regex::new(re).expect("builtin regex"),
            kind,
        };
        use Category::*;
        vec![
            // Corruption and lost writes first: their texts also hold words of the general rules
            // (`Shutting down filesystem`, `I/O error`, `JBD2: … on`).
            r(XfsCorruption, Kind::Block, r"^XFS \(([^)\s]+)\): (?:Corruption detected\. Unmount and run xfs_repair|Metadata (?:corruption|CRC error) detected at|Corruption warning: Metadata has LSN|Corruption of in-memory data)"),
            r(XfsInternalError, Kind::Block, r"^XFS \(([^)\s]+)\): Internal error .* at line \d+ of file fs/xfs/"),
            r(XfsInternalError, Kind::Block, r#"^Filesystem "([^"\s]+)": XFS internal error .* at line \d+ of file fs/xfs/"#),
            r(XfsLogRecoveryFailed, Kind::Block, r"^XFS \(([^)\s]+)\): log mount/recovery failed: error -?\d+"),
            r(XfsLogRecoveryFailed, Kind::NoDevice, r"^XFS: log mount/recovery failed: error -?\d+"),
            r(Ext4DataLoss, Kind::Block, r"^EXT4-fs \(([^)\s]+)\): failed to convert unwritten extents to written extents -- potential data loss!"),
            r(Ext4WritebackRefused, Kind::Block, r"^EXT4-fs \(([^)\s]+)\): ext4_(?:do_|da_)?writepages: jbd2_start: -?\d+ pages, ino \d+; err -\d+"),
            r(Jbd2DataFlushError, Kind::Jbd2, r"^JBD2?: Detected IO errors (?:-?\d+ )?while flushing file data on (\S+)"),
            r(LoopWriteError, Kind::NoDevice, r"^loop: Write error at byte offset \d+, length \d+"),
            r(JournalAbort, Kind::Jbd2, r"^Aborting journal on device (\S+)"),
            r(RemountRo, Kind::Block, r"^EXT[234]-fs \(([^)\s]+)\): (?:Remounting filesystem read-only|error: remounting filesystem read-only)"),
            r(RemountRo, Kind::Block, r"^EXT[234]-fs error \(device ([^)\s]+)\).*[Rr]emounting filesystem read-only"),
            r(RemountRo, Kind::Block, r"^BTRFS(?: \w+)? \(device ([^)\s]+)\).*forced readonly"),
            r(XfsShutdown, Kind::Block, r"^XFS \(([^)\s]+)\): .*(?:Shutting down filesystem|[Ff]ilesystem has been shut down|xfs_do_force_shutdown|Log I/O [Ee]rror [Dd]etected)"),
            r(XfsShutdown, Kind::Block, r"xfs_force_shutdown\((\w[\w-]*),0x"),
            r(Ext4Error, Kind::Block, r"^EXT[234]-fs error \(device ([^)\s]+)\)"),
            r(Ext4Error, Kind::Block, r"^EXT[234]-fs \(([^)\s]+)\): (?:I/O error while writing superblock|previous I/O error to superblock detected|ext4_abort called|Detected aborted journal)"),
            r(IoError, Kind::Block, r"(?:^|: )I/O error, dev ([^,\s]+), sector"),
            r(IoError, Kind::Block, r"critical (?:medium|target|nexus|space allocation|protection) error, dev ([^,\s]+), sector"),
            r(IoError, Kind::Block, r"^Buffer I/O error on (?:device|dev) ([^,\s]+), "),
            r(IoError, Kind::Block, r"^EXT4-fs warning \(device ([^)\s]+)\): ext4_end_bio:\d+: I/O error"),
            r(IoError, Kind::Jbd2, r"^JBD2: .*(?:journal superblock for|on device) (\S+?)\.?$"),
            r(IoError, Kind::Block, r"^XFS \(([^)\s]+)\): (?:metadata I/O error|writeback error|log I/O error)"),
            r(ScsiOffline, Kind::Scsi, r"^(?:sd|scsi|st|sr|ses) (\d+:\d+:\d+:\d+): (?:rejecting I/O to offline device|[Dd]evice offlined - not ready after error recovery|(?:\[\w+\] )?.*[Dd]evice offlined)"),
            r(IscsiRecoveryTimeout, Kind::Session, r"^\s*session(\d+): session recovery timed out after \d+ secs"),
            r(IscsiConnError, Kind::Session, r"^\s*connection(\d+):\d+: (?:detected conn error \(\d+\)|ping timeout of \d+ secs expired)"),
            r(HungTask, Kind::HungTask, r"^INFO: task (\S+):\d+ blocked for more than \d+ seconds"),
        ]
    })
}

/// A hung task's name → the device it works for, when its name says (`jbd2/sdc-8`, `xfsaild/sdc`).
fn task_device(task: &str) -> Option<Device> {
    let (kind, arg) = task.split_once('/')?;
    match kind {
        "jbd2" => Some(Device::Block(strip_jbd2(arg))),
        "xfsaild" | "xfs-buf" | "xfs-conv" | "xfs-cil" | "xfs-reclaim" | "xfs-log"
        | "xfs-eofblocks" => Some(Device::Block(arg.to_string())),
        _ => None,
    }
}

/// The built-in category of a record's text and the device it names.
pub fn classify(text: &str) -> Option<(Category, Option<Device>)> {
    // Every rule needs one of these words: a record holding none (most of them) is no storage
    // error, told without running a regex, so a log of millions of records is read within -t
    // (issue 27, finding 3). A new rule adds its word here (`every_rule_has_a_prefilter_word`).
    if !PREFILTER.iter().any(|w| text.contains(w)) {
        return None;
    }
    for rule in rules() {
        let Some(c) = rule.re.captures(text) else {
            continue;
        };
        let arg = c.get(1).map(|m| m.as_str()).unwrap_or("");
        let dev = match rule.kind {
            Kind::Block => Some(Device::Block(arg.trim_start_matches("/dev/").to_string())),
            Kind::Jbd2 => Some(Device::Block(strip_jbd2(arg))),
            Kind::Scsi => Some(Device::Scsi(arg.to_string())),
            Kind::Session => arg.parse().ok().map(Device::IscsiSession),
            Kind::HungTask => task_device(arg),
            Kind::NoDevice => None,
        };
        return Some((rule.cat, dev));
    }
    None
}

/// The operator's extra patterns.
#[derive(Debug, Clone, Default)]
pub struct Patterns {
    pub critical: Vec<Regex>,
    pub warning: Vec<Regex>,
    pub exclude: Vec<Regex>,
}

impl Patterns {
    /// Exclusions first; then the built-in categories; then `--critical-pattern`, then
    /// `--warning-pattern` for what no built-in rule knows.
    pub fn classify(&self, text: &str) -> Option<(Category, Option<Device>)> {
        if self.exclude.iter().any(|r| r.is_match(text)) {
            return None;
        }
        if let Some(c) = classify(text) {
            return Some(c);
        }
        if self.critical.iter().any(|r| r.is_match(text)) {
            return Some((Category::CriticalPattern, guess_device(text)));
        }
        if self.warning.iter().any(|r| r.is_match(text)) {
            return Some((Category::WarningPattern, guess_device(text)));
        }
        None
    }
}

/// A device named in free text (`(device sdc)`, `dev sdc,`, `(sdc)`), for custom patterns.
fn guess_device(text: &str) -> Option<Device> {
    static R: OnceLock<Regex> = OnceLock::new();
    let re = R.get_or_init(|| {
        Regex::new(r"(?:\(device |dev |\()((?:sd[a-z]+|vd[a-z]+|xvd[a-z]+|nvme\d+n\d+|dm-\d+|loop\d+|rbd\d+|nbd\d+|md\d+)(?:p?\d+)?)[),\s]").expect("regex")
    });
    re.captures(text)
        .and_then(|c| c.get(1))
        .map(|m| Device::Block(m.as_str().to_string()))
}

#[cfg(test)]
mod tests {
    /// The prefilter never hides a rule: each rule's pattern holds one of its words literally.
    #[test]
    fn every_rule_has_a_prefilter_word() {
        for r in super::rules() {
            assert!(
                super::PREFILTER.iter().any(|w| r.re.as_str().contains(w)),
                "{}",
                r.re.as_str()
            );
        }
    }

    use super::*;
    use Category::*;

    fn c(t: &str) -> (Category, Option<String>) {
        let (cat, d) = classify(t).unwrap_or_else(|| panic!("not classified: {t}"));
        (cat, d.map(|d| d.to_string()))
    }

    #[test]
    fn ext4_and_jbd2_of_this_kernel_and_old_ones() {
        // Exactly what 6.18 printed here for trigger_fs_error on a loop device.
        assert_eq!(c("EXT4-fs error (device loop0): trigger_test_error:129: comm sh: k8s-storage-checks test"), (Ext4Error, Some("loop0".into())));
        assert_eq!(
            c("Aborting journal on device loop0-8."),
            (JournalAbort, Some("loop0".into()))
        );
        assert_eq!(
            c("EXT4-fs (loop0): Remounting filesystem read-only"),
            (RemountRo, Some("loop0".into()))
        );
        assert_eq!(
            c("Aborting journal on device dm-3-8."),
            (JournalAbort, Some("dm-3".into()))
        );
        assert_eq!(
            c("Aborting journal on device sde-8."),
            (JournalAbort, Some("sde".into()))
        );
        assert_eq!(
            c("EXT4-fs error (device sde): ext4_journal_check_start:61: Detected aborted journal"),
            (Ext4Error, Some("sde".into()))
        );
        assert_eq!(
            c("EXT4-fs (sdc): I/O error while writing superblock"),
            (Ext4Error, Some("sdc".into()))
        );
        // ext3 of 2.6 kernels.
        assert_eq!(
            c("EXT3-fs (sdb1): error: remounting filesystem read-only"),
            (RemountRo, Some("sdb1".into()))
        );
        assert_eq!(
            c("JBD2: Error -5 detected when updating journal superblock for sdc-8."),
            (IoError, Some("sdc".into()))
        );
    }

    #[test]
    fn xfs_all_spellings() {
        // Corruption of in-memory data also shuts the filesystem down; its category names the
        // cause (both CRITICAL).
        assert_eq!(c("XFS (sdc): Corruption of in-memory data (0x8) detected at xfs_trans_cancel+0x100/0x130 (fs/xfs/xfs_trans.c:1097).  Shutting down filesystem."), (XfsCorruption, Some("sdc".into())));
        assert_eq!(
            c("XFS (dm-2): Log I/O Error Detected. Shutting down filesystem"),
            (XfsShutdown, Some("dm-2".into()))
        );
        assert_eq!(c("XFS (sdd1): xfs_do_force_shutdown(0x2) called from line 1271 of file fs/xfs/xfs_log.c.  Return address = 0xffffffffa01f4c3d"), (XfsShutdown, Some("sdd1".into())));
        assert_eq!(
            c("xfs_force_shutdown(sdb1,0x1) called from line 1031 of file fs/xfs/xfs_trans_buf.c"),
            (XfsShutdown, Some("sdb1".into()))
        );
        assert_eq!(
            c("XFS (sdc): metadata I/O error in \"xfs_buf_ioend+0x0\" at daddr 0x2 len 1 error 5"),
            (IoError, Some("sdc".into()))
        );
    }

    /// The spellings of fs/xfs, fs/ext4, fs/jbd2 and drivers/block/loop.c for corruption and
    /// writes that never reached the disk (see the module doc for where each comes from).
    #[test]
    fn corruption_and_lost_writes_across_versions() {
        let cases: &[(&str, Category, Option<&str>)] = &[
            ("XFS (sdc): Corruption detected. Unmount and run xfs_repair", XfsCorruption, Some("sdc")),
            ("XFS (dm-2): Metadata corruption detected at xfs_inode_buf_verify+0x14d/0x160 [xfs], xfs_inode block 0x1b5c1c0 xfs_inode_buf_verify", XfsCorruption, Some("dm-2")),
            ("XFS (dm-4): Metadata CRC error detected at xfs_agf_read_verify+0x7a/0x110 [xfs], xfs_agf block 0x1", XfsCorruption, Some("dm-4")),
            ("XFS (sda3): Corruption warning: Metadata has LSN (4:2729) ahead of current LSN (4:2727). Please unmount and run xfs_repair (>= v4.3) to resolve.", XfsCorruption, Some("sda3")),
            // ≤ 4.x spelling of the in-memory corruption shutdown.
            ("XFS (sdb1): Corruption of in-memory data detected.  Shutting down filesystem", XfsCorruption, Some("sdb1")),
            ("XFS (loop0): Internal error xfs_trans_cancel at line 1097 of file fs/xfs/xfs_trans.c.  Caller xfs_growfs_data+0x691/0xe90", XfsInternalError, Some("loop0")),
            ("XFS (sdc): Internal error !ip->i_nblocks at line 2034 of file fs/xfs/xfs_inode.c.  Caller xfs_inactive_ifree+0x1a3/0x210 [xfs]", XfsInternalError, Some("sdc")),
            ("Filesystem \"sdb\": XFS internal error xfs_da_do_buf(2) at line 2248 of file fs/xfs/xfs_da_btree.c.  Caller 0xc01bc657", XfsInternalError, Some("sdb")),
            ("XFS (dm-0): log mount/recovery failed: error -5", XfsLogRecoveryFailed, Some("dm-0")),
            ("XFS (loop1): log mount/recovery failed: error -117", XfsLogRecoveryFailed, Some("loop1")),
            ("XFS: log mount/recovery failed: error 5", XfsLogRecoveryFailed, None),
            ("EXT4-fs (dm-11): failed to convert unwritten extents to written extents -- potential data loss!  (inode 2754818, error -5)", Ext4DataLoss, Some("dm-11")),
            ("EXT4-fs (sdb1): failed to convert unwritten extents to written extents -- potential data loss!  (inode 1320, offset 0, size 65536, error -30)", Ext4DataLoss, Some("sdb1")),
            ("EXT4-fs (sdc): ext4_do_writepages: jbd2_start: 9223372036854775807 pages, ino 12; err -30", Ext4WritebackRefused, Some("sdc")),
            ("EXT4-fs (vda1): ext4_writepages: jbd2_start: 13 pages, ino 262147; err -30", Ext4WritebackRefused, Some("vda1")),
            ("EXT4-fs (sda1): ext4_da_writepages: jbd2_start: 1024 pages, ino 786433; err -30", Ext4WritebackRefused, Some("sda1")),
            ("JBD2: Detected IO errors while flushing file data on sdc1-8", Jbd2DataFlushError, Some("sdc1")),
            ("JBD2: Detected IO errors while flushing file data on dm-11-45", Jbd2DataFlushError, Some("dm-11")),
            ("JBD2: Detected IO errors -5 while flushing file data on vda1-8", Jbd2DataFlushError, Some("vda1")),
            ("JBD: Detected IO errors while flushing file data on sdc1", Jbd2DataFlushError, Some("sdc1")),
            ("loop: Write error at byte offset 1073741824, length 4096.", LoopWriteError, None),
        ];
        for (text, cat, dev) in cases {
            assert_eq!(c(text), (*cat, dev.map(String::from)), "{text}");
            assert_eq!(cat.status(), plugin::Status::Critical, "{text}");
        }
        // Their neighbours that mean nothing lost.
        for ok in [
            "XFS (sdc): Unmounting Filesystem a488de9e-d346-4098-aff4-84e6ca6936c7",
            "XFS (loop1): Starting recovery (logdev: internal)",
            "XFS (loop1): Ending recovery (logdev: internal)",
            "EXT4-fs (sdc): recovery complete",
        ] {
            assert_eq!(classify(ok), None, "{ok}");
        }
        // Every label is distinct and maps back.
        for c in Category::ALL {
            assert_eq!(Category::from_label(c.label()), Some(c));
        }
    }

    #[test]
    fn block_io_errors_across_versions() {
        assert_eq!(c("I/O error, dev sdc, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0"), (IoError, Some("sdc".into())));
        assert_eq!(
            c("blk_update_request: I/O error, dev sdc, sector 12345"),
            (IoError, Some("sdc".into()))
        );
        assert_eq!(
            c("print_req_error: I/O error, dev nvme0n1, sector 8"),
            (IoError, Some("nvme0n1".into()))
        );
        assert_eq!(
            c("end_request: I/O error, dev sdb, sector 0"),
            (IoError, Some("sdb".into()))
        );
        assert_eq!(
            c("Buffer I/O error on dev sdc1, logical block 0, lost async page write"),
            (IoError, Some("sdc1".into()))
        );
        assert_eq!(
            c("Buffer I/O error on device sdc1, logical block 524"),
            (IoError, Some("sdc1".into()))
        );
        assert_eq!(
            c("critical medium error, dev sda, sector 1234 op 0x0:(READ) flags 0x0"),
            (IoError, Some("sda".into()))
        );
    }

    #[test]
    fn scsi_and_iscsi_this_machine_cannot_produce() {
        assert_eq!(
            c("sd 3:0:0:0: rejecting I/O to offline device"),
            (ScsiOffline, Some("scsi 3:0:0:0".into()))
        );
        assert_eq!(
            c("scsi 7:0:0:1: rejecting I/O to offline device"),
            (ScsiOffline, Some("scsi 7:0:0:1".into()))
        );
        assert_eq!(
            c("sd 2:0:0:0: Device offlined - not ready after error recovery"),
            (ScsiOffline, Some("scsi 2:0:0:0".into()))
        );
        assert_eq!(
            c(" session3: session recovery timed out after 120 secs"),
            (IscsiRecoveryTimeout, Some("iSCSI session3".into()))
        );
        assert_eq!(
            c("session22: session recovery timed out after 5 secs"),
            (IscsiRecoveryTimeout, Some("iSCSI session22".into()))
        );
        assert_eq!(
            c(" connection3:0: detected conn error (1020)"),
            (IscsiConnError, Some("iSCSI session3".into()))
        );
        assert_eq!(c("connection23:0: ping timeout of 5 secs expired, recv timeout 5, last rx 4305, last ping 4310, now 4315"), (IscsiConnError, Some("iSCSI session23".into())));
    }

    #[test]
    fn hung_tasks_and_noise() {
        assert_eq!(
            c("INFO: task jbd2/sdc-8:512 blocked for more than 120 seconds."),
            (HungTask, Some("sdc".into()))
        );
        assert_eq!(
            c("INFO: task radarr:4242 blocked for more than 122 seconds."),
            (HungTask, None)
        );
        for ok in [
            "EXT4-fs (loop0): mounted filesystem f8d5 r/w with ordered data mode. Quota mode: none.",
            "EXT4-fs (loop0): unmounting filesystem f8d5.",
            "loop0: detected capacity change from 0 to 32768",
            "sd 3:0:0:0: [sdc] Attached SCSI disk",
            " connection3:0: detected conn error",
            "XFS (sdc): Mounting V5 Filesystem",
        ] {
            assert_eq!(classify(ok), None, "{ok}");
        }
        assert_eq!(strip_jbd2("dm-3"), "dm-3");
    }

    #[test]
    fn operator_patterns() {
        let p = Patterns {
            critical: vec![Regex::new("nfs: server \\S+ not responding").unwrap()],
            warning: vec![Regex::new("blk_update_request").unwrap()],
            exclude: vec![Regex::new("dev loop\\d+").unwrap()],
        };
        assert_eq!(
            p.classify("nfs: server 10.0.0.1 not responding, still trying")
                .map(|x| x.0),
            Some(CriticalPattern)
        );
        // Exclusion wins over a built-in rule.
        assert_eq!(
            p.classify("I/O error, dev loop3, sector 0 op 0x1:(WRITE)"),
            None
        );
        // Built-in rules win over operator patterns.
        assert_eq!(
            p.classify("blk_update_request: I/O error, dev sdc, sector 1")
                .map(|x| x.0),
            Some(IoError)
        );
        assert_eq!(
            p.classify("nfs: server x not responding (dev sdc1)")
                .map(|x| x.1),
            Some(Some(Device::Block("sdc1".into())))
        );
    }
}
