//! The memory of a volume (issue 32): per PV, the spells it spent read-only, degraded or stuck,
//! kept under `--state-dir` across runs, so that a finding can say "read-only 3 times in 30 days
//! (last 2026-11-20)" and a flapping volume reads as the known-bad one it is.
//!
//! **A spell** is one continuous stretch of runs that saw the PV in one kind of trouble: a run
//! that sees it again in the same kind extends the spell that the run before it saw (its `last`
//! is the previous run's time); a run that looked and did not see it ends the spell, and the next
//! sighting opens a new one. So "3 times" is three separate spells, never three runs of one.
//! A run that answered UNKNOWN before judging its volumes records nothing and ends nothing.
//!
//! **One bounded file per check** (`<state-dir>/<check>.volumes.json`), not one file per PV:
//! - each check sees only its own kinds (check_ro_pvc_mounts read-only, the Jiva and Longhorn
//!   checks degraded, the stuck-pod checks stuck), and runs on its own schedule, possibly at the
//!   same time as another: a file of its own is written by that check alone, so the atomic
//!   replace needs no lock and a run never loses another check's spells;
//! - the bound is one number per file (at most [`MAX_PVS`] PVs × [`MAX_SPELLS`] spells, read back
//!   at most [`MAX_BYTES`]), where a file per PV would need a directory listing, a count of
//!   files and a cleanup of PVs long gone, each a place for a planted name;
//! - the file is read and written exactly as the other state files ([`crate::logs::state`]): the
//!   directory reached without following another user's link and refused when another user could
//!   write it, the file opened `O_NOFOLLOW` (a symbolic link is ignored, never followed), owned by
//!   this user with one link, capped in size, and replaced atomically ([`crate::atomic::replace`])
//!   so a run killed mid-write leaves the old memory.
//!
//! What is kept is bounded whatever the file says: spells older than [`WINDOW`] go, at most
//! [`MAX_SPELLS`] per PV (the newest), at most [`MAX_PVS`] PVs (those seen most recently), PV
//! names at most [`MAX_NAME`] bytes of printable ASCII; spells dated after now (a clock set back,
//! or a file not this node's) are dropped with a note. A file that is garbled, over the cap, a
//! link or another user's is a note naming it, the memory starts afresh and is written anew; the
//! check's verdict is never changed by it. Names read from the file are never echoed: a finding
//! only says how many spells the PV it already names had, and when.

use crate::logs::state;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How far back spells are remembered and counted: 30 days.
pub const WINDOW_MS: i64 = 30 * DAY_MS;

/// [`WINDOW_MS`] as a duration.
pub const WINDOW: std::time::Duration = std::time::Duration::from_secs(30 * 86_400);

const DAY_MS: i64 = 86_400_000;

/// At most this many PVs are remembered per check (a node has far fewer; the most recently seen
/// are kept).
pub const MAX_PVS: usize = 1024;

/// At most this many spells are remembered per PV (the newest).
pub const MAX_SPELLS: usize = 32;

/// The longest PV name kept (a Kubernetes object name is at most 253 bytes).
pub const MAX_NAME: usize = 253;

/// The largest memory file read back: [`MAX_PVS`] × ([`MAX_NAME`] + [`MAX_SPELLS`] spells of
/// about 60 bytes) is under 2.3 MiB.
pub const MAX_BYTES: u64 = 4 << 20;

/// The format written (a file of another version is started afresh).
pub const VERSION: u32 = 1;

/// The kind of trouble a spell is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The PV's filesystem could not be written (check_ro_pvc_mounts).
    ReadOnly,
    /// The volume ran with fewer healthy replicas than it should (Jiva, Longhorn).
    Degraded,
    /// A pod using the PV was stuck (never started, or wedged in Terminating).
    Stuck,
}

impl Kind {
    /// How a finding says it: `read-only`, `degraded`, `stuck`.
    pub fn word(self) -> &'static str {
        match self {
            Kind::ReadOnly => "read-only",
            Kind::Degraded => "degraded",
            Kind::Stuck => "stuck",
        }
    }
}

/// One continuous spell: the first and the last run that saw it (epoch ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spell {
    pub kind: Kind,
    pub first: i64,
    pub last: i64,
}

/// A check's memory: the spells of each PV, and when the last run recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    #[serde(default)]
    pub version: u32,
    /// When the last run recorded (epoch ms): a spell whose `last` is this was still going on.
    #[serde(default)]
    pub saved_ms: Option<i64>,
    #[serde(default)]
    pub pvs: BTreeMap<String, Vec<Spell>>,
}

/// What the memory says of one PV in one kind, as of this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recall {
    pub kind: Kind,
    /// Spells within [`WINDOW`], this run's (if it saw the PV so) included.
    pub times: usize,
    /// When the latest spell before the current one was last seen (epoch ms).
    pub last_earlier: Option<i64>,
}

impl Recall {
    /// "read-only 3 times in 30 days (last 2026-11-20)" when there was an earlier spell within
    /// the window; `None` for a first spell.
    pub fn text(&self) -> Option<String> {
        let last = self.last_earlier?;
        if self.times < 2 {
            return None;
        }
        Some(format!(
            "{} {} times in {} days (last {})",
            self.kind.word(),
            self.times,
            WINDOW_MS / DAY_MS,
            date(last)
        ))
    }
}

/// Epoch ms as `2026-11-20` (UTC).
pub fn date(ms: i64) -> String {
    let (y, m, d) = plugin::time::civil_from_days(ms.div_euclid(DAY_MS));
    format!("{y:04}-{m:02}-{d:02}")
}

/// A name worth keeping: non-empty, at most [`MAX_NAME`] bytes, printable ASCII without space.
fn good_name(n: &str) -> bool {
    !n.is_empty() && n.len() <= MAX_NAME && n.bytes().all(|b| b.is_ascii_graphic() && b != b'|')
}

impl Memory {
    /// Drop what cannot be trusted or is no longer needed, as of `now`: spells dated after now
    /// (beyond the clock slack), spells that end before they start, spells older than the
    /// window, unusable names; then the caps. Returns (spells dated after now, other entries
    /// dropped as invalid).
    pub fn prune(&mut self, now: i64) -> (usize, usize) {
        let oldest = now - WINDOW_MS;
        let (mut future, mut invalid) = (0, 0);
        let before = self.pvs.len();
        self.pvs.retain(|n, _| good_name(n));
        invalid += before - self.pvs.len();
        for v in self.pvs.values_mut() {
            future += state::drop_future(v, now, |s| s.last);
            let n = v.len();
            v.retain(|s| s.first <= s.last && s.first >= 0);
            invalid += n - v.len();
            v.retain(|s| s.last >= oldest);
            v.sort_by_key(|s| (s.last, s.first));
            if v.len() > MAX_SPELLS {
                v.drain(..v.len() - MAX_SPELLS);
            }
        }
        self.pvs.retain(|_, v| !v.is_empty());
        if self.saved_ms.is_some_and(|s| state::from_future(s, now)) {
            self.saved_ms = None;
        }
        self.cap();
        (future, invalid)
    }

    /// At most [`MAX_PVS`] PVs: those seen most recently stay.
    fn cap(&mut self) {
        if self.pvs.len() <= MAX_PVS {
            return;
        }
        let mut newest: Vec<(i64, String)> = self
            .pvs
            .iter()
            .map(|(n, v)| (v.iter().map(|s| s.last).max().unwrap_or(0), n.clone()))
            .collect();
        newest.sort_unstable_by(|a, b| b.cmp(a));
        for (_, n) in newest.into_iter().skip(MAX_PVS) {
            self.pvs.remove(&n);
        }
    }

    /// Record one run at `now` that saw `seen` (PV name, kind): a spell the previous run saw is
    /// extended, any other sighting opens a new spell; a spell this run did not see stays ended.
    /// Unusable names are skipped. Then the bounds.
    pub fn record(&mut self, now: i64, seen: &[(String, Kind)]) {
        let prev = self.saved_ms;
        for (pv, kind) in seen {
            if !good_name(pv) {
                continue;
            }
            let v = self.pvs.entry(pv.clone()).or_default();
            match v
                .iter_mut()
                .find(|s| s.kind == *kind && (Some(s.last) == prev || s.last == now))
            {
                Some(s) => s.last = now,
                None => v.push(Spell {
                    kind: *kind,
                    first: now,
                    last: now,
                }),
            }
        }
        self.version = VERSION;
        self.saved_ms = Some(now);
        let _ = self.prune(now);
    }

    /// What the memory says of `pv` in `kind` at `now` (after this run's [`Memory::record`]).
    pub fn recall(&self, pv: &str, kind: Kind, now: i64) -> Recall {
        let oldest = now - WINDOW_MS;
        let spells: Vec<&Spell> = self
            .pvs
            .get(pv)
            .map(|v| {
                v.iter()
                    .filter(|s| s.kind == kind && s.last >= oldest)
                    .collect()
            })
            .unwrap_or_default();
        // The current spell is the one this run extended or opened.
        let earlier = spells.iter().filter(|s| s.last != now).map(|s| s.last);
        Recall {
            kind,
            times: spells.len(),
            last_earlier: earlier.max(),
        }
    }
}

/// The memory's id for a run of `check` whose scope is `scope`: the options that choose which
/// volumes the run looks at, as the operator wrote them (`--include '…'`, `--namespace …`).
/// `check` itself for the usual scope (`scope` empty), else `check.<16 hex digits>` (FNV-1a of
/// `scope`): a run that looks at other volumes keeps its own memory, so that a by-hand run
/// narrowed to one volume does not end the other volumes' spells in the usual run's memory, and
/// no two scopes share a file.
pub fn scoped(check: &str, scope: &str) -> String {
    if scope.is_empty() {
        return check.to_string();
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in scope.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{check}.{h:016x}")
}

/// The memory file of `check` in `dir`: `<dir>/<check>.volumes.json`.
pub fn file(dir: &Path, check: &str) -> PathBuf {
    state::path(dir, check, "volumes")
}

/// Read a memory file: the memory, or a note saying why it was started afresh. `Ok(None)` when
/// there is none yet (nor its directory).
pub fn load(path: &Path) -> Result<Option<Memory>, String> {
    let Some(b) = state::read_bytes(path, MAX_BYTES)? else {
        return Ok(None);
    };
    let m: Memory = serde_json::from_slice(&b).map_err(|e| {
        format!(
            "state file {} is unreadable ({e}): the volumes' earlier spells are forgotten",
            path.display()
        )
    })?;
    if m.version != VERSION {
        return Err(format!(
            "state file {} is of format {} (this check writes {VERSION}): the volumes' earlier spells are forgotten",
            path.display(),
            m.version
        ));
    }
    Ok(Some(m))
}

/// What a run learns from its memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Remembered {
    /// The memory after this run was recorded.
    pub memory: Memory,
    /// When this run recorded (epoch ms).
    pub now: i64,
    /// Why the memory was started afresh, could not be saved, or lost entries.
    pub notes: Vec<String>,
    /// It was saved.
    pub kept: bool,
}

impl Remembered {
    /// The finding's words for `pv` in `kind` ("read-only 3 times in 30 days (last …)"), when
    /// it had an earlier spell.
    pub fn text(&self, pv: &str, kind: Kind) -> Option<String> {
        self.memory.recall(pv, kind, self.now).text()
    }

    /// The words for the first of `pvs` that had an earlier spell in `kind`.
    pub fn text_any<'a>(
        &self,
        pvs: impl IntoIterator<Item = &'a str>,
        kind: Kind,
    ) -> Option<String> {
        pvs.into_iter().find_map(|p| self.text(p, kind))
    }
}

/// The one call a check makes: read `check`'s memory in `dir`, record this run (at `now`, having
/// seen `seen`), save it atomically. Every problem is a note; nothing here fails the check.
pub fn remember(dir: &Path, check: &str, seen: &[(String, Kind)], now: i64) -> Remembered {
    let path = file(dir, check);
    let mut notes = Vec::new();
    let mut m = match load(&path) {
        Ok(m) => m.unwrap_or_default(),
        Err(e) => {
            notes.push(e);
            Memory::default()
        }
    };
    let newest = m.pvs.values().flatten().map(|s| s.last).max();
    let ahead = state::clock_went_back(m.saved_ms, newest, now);
    let (future, invalid) = m.prune(now);
    if let Some(ahead) = ahead {
        notes.push(format!(
            "the clock was set back: state file {} is {} ahead of now ({future} spell{} dated after now forgotten)",
            path.display(),
            plugin::fmt_duration(std::time::Duration::from_millis(
                u64::try_from(ahead).unwrap_or(0)
            )),
            if future == 1 { "" } else { "s" }
        ));
    }
    if invalid > 0 {
        notes.push(format!(
            "state file {}: {invalid} invalid entr{} (a name that is no PV's, a spell ending before it starts) dropped",
            path.display(),
            if invalid == 1 { "y" } else { "ies" }
        ));
    }
    m.record(now, seen);
    let kept = match save(&path, &m) {
        Ok(()) => true,
        Err(e) => {
            if !notes.contains(&e) {
                notes.push(e);
            }
            false
        }
    };
    Remembered {
        memory: m,
        now,
        notes,
        kept,
    }
}

/// Write a memory file atomically, creating its directory if needed (as the other state files).
pub fn save(path: &Path, m: &Memory) -> Result<(), String> {
    state::save(path, m)
}

/// The PVs a report's non-OK findings see in trouble: each finding whose signal is listed in
/// `signals` (signal, kind) and whose subject names a `pv`. Pure.
pub fn seen_in(report: &plugin::Report, signals: &[(&str, Kind)]) -> Vec<(String, Kind)> {
    let mut out: Vec<(String, Kind)> = Vec::new();
    for f in report
        .findings
        .iter()
        .filter(|f| f.status != plugin::Status::Ok)
    {
        let Some(pv) = f.subject.pv.as_deref() else {
            continue;
        };
        if let Some((_, k)) = signals.iter().find(|(s, _)| *s == f.signal) {
            if !out.iter().any(|(p, kk)| p == pv && kk == k) {
                out.push((pv.to_string(), *k));
            }
        }
    }
    out
}

/// What the memory says, added to a report: each finding [`seen_in`] counts gains
/// "; degraded 3 times in 30 days (last 2026-11-20)" when its PV had an earlier spell of that
/// kind; the memory's notes become the report's. Pure.
pub fn annotate(report: &mut plugin::Report, signals: &[(&str, Kind)], m: &Remembered) {
    for f in report
        .findings
        .iter_mut()
        .filter(|f| f.status != plugin::Status::Ok)
    {
        let (Some(pv), Some((_, k))) = (
            f.subject.pv.as_deref(),
            signals.iter().find(|(s, _)| *s == f.signal),
        ) else {
            continue;
        };
        if let Some(h) = m.text(pv, *k) {
            f.text.push_str("; ");
            f.text.push_str(&h);
        }
    }
    report.notes.extend(m.notes.iter().cloned());
}

/// `--state-dir`, for the checks that keep only the memory of their volumes there.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct StateDirArg {
    /// Remember each PV's spells here (one file per check; findings then say how often in 30 days, e.g. "read-only 3 times in 30 days (last 2026-11-20)")
    #[arg(long = "state-dir", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

impl StateDirArg {
    /// Remember the PVs `report` sees in trouble (see [`seen_in`]) under `--state-dir` as
    /// `check`'s, and say in the report what the memory tells (see [`annotate`]). Nothing
    /// without `--state-dir`.
    pub fn keep(&self, check: &str, report: &mut plugin::Report, signals: &[(&str, Kind)]) {
        let seen = seen_in(report, signals);
        if let Some(m) = self.remember(check, &seen, plugin::time::now_ms()) {
            annotate(report, signals, &m);
        }
    }

    /// [`remember`] in the given directory, if one was given.
    pub fn remember(&self, check: &str, seen: &[(String, Kind)], now: i64) -> Option<Remembered> {
        self.state_dir
            .as_deref()
            .map(|d| remember(d, check, seen, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    /// 2026-11-16 00:00:00Z.
    const T0: i64 = 20_773 * DAY_MS;

    fn ro(pv: &str) -> (String, Kind) {
        (pv.to_string(), Kind::ReadOnly)
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("node-history-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    /// Consecutive runs extend one spell; a run without the PV ends it; three spells are
    /// "3 times", the last earlier one dated; another kind is counted apart.
    #[test]
    fn spells_are_separate_stretches_of_runs() {
        let mut m = Memory::default();
        let min = 60_000;
        let mut t = T0;
        // Spell 1: three runs in a row.
        for _ in 0..3 {
            m.record(t, &[ro("pv-a")]);
            t += min;
        }
        assert_eq!(m.pvs["pv-a"].len(), 1);
        assert_eq!(m.recall("pv-a", Kind::ReadOnly, t - min).text(), None);
        // A gap, then spell 2 (a day later), a gap, spell 3 four days later.
        m.record(t, &[]);
        t += DAY_MS;
        m.record(t, &[ro("pv-a"), ("pv-a".into(), Kind::Stuck)]);
        let end2 = t;
        t += min;
        m.record(t, &[]);
        t += 4 * DAY_MS;
        m.record(t, &[ro("pv-a")]);
        let r = m.recall("pv-a", Kind::ReadOnly, t);
        assert_eq!(
            r,
            Recall {
                kind: Kind::ReadOnly,
                times: 3,
                last_earlier: Some(end2)
            }
        );
        assert_eq!(
            r.text().unwrap(),
            format!("read-only 3 times in 30 days (last {})", date(end2))
        );
        assert_eq!(date(end2), "2026-11-17");
        // The stuck spell was one, and ended: a first spell says nothing.
        assert_eq!(m.recall("pv-a", Kind::Stuck, t).times, 1);
        assert_eq!(m.recall("pv-a", Kind::Stuck, t).text(), None);
        // The same run time twice (two findings of one PV) is still one spell.
        m.record(t, &[ro("pv-a"), ro("pv-a")]);
        assert_eq!(m.recall("pv-a", Kind::ReadOnly, t).times, 3);
        // A PV never seen: nothing.
        assert_eq!(m.recall("pv-b", Kind::ReadOnly, t).times, 0);
    }

    /// Spells older than 30 days are forgotten and not counted.
    #[test]
    fn the_window_forgets_old_spells() {
        let mut m = Memory::default();
        m.record(T0, &[ro("pv-a")]);
        m.record(T0 + 1, &[]);
        m.record(T0 + 10 * DAY_MS, &[ro("pv-a")]);
        m.record(T0 + 10 * DAY_MS + 1, &[]);
        let now = T0 + 31 * DAY_MS;
        m.record(now, &[ro("pv-a")]);
        let r = m.recall("pv-a", Kind::ReadOnly, now);
        assert_eq!((r.times, r.last_earlier), (2, Some(T0 + 10 * DAY_MS)));
        assert_eq!(m.pvs["pv-a"].len(), 2, "the 31-day-old spell is pruned");
        // 31 days on, with nothing seen in between: only the current spell.
        m.record(now + 1, &[]);
        let later = now + 31 * DAY_MS;
        m.record(later, &[ro("pv-a")]);
        assert_eq!(m.recall("pv-a", Kind::ReadOnly, later).times, 1);
    }

    /// At most MAX_SPELLS per PV (the newest) and MAX_PVS PVs (the most recently seen).
    #[test]
    fn caps_bound_the_memory() {
        let mut m = Memory::default();
        let mut t = T0;
        for _ in 0..(MAX_SPELLS + 10) {
            m.record(t, &[ro("pv-a")]);
            m.record(t + 1, &[]);
            t += 60_000;
        }
        assert_eq!(m.pvs["pv-a"].len(), MAX_SPELLS);
        assert_eq!(m.pvs["pv-a"].last().unwrap().first, t - 60_000);
        let many: Vec<(String, Kind)> = (0..MAX_PVS + 50).map(|i| ro(&format!("pv-{i}"))).collect();
        m.record(t, &many[..50]);
        m.record(t + 1, &many[50..]);
        assert_eq!(m.pvs.len(), MAX_PVS);
        assert!(
            !m.pvs.contains_key("pv-a"),
            "the least recently seen go first"
        );
        assert!(m.pvs.contains_key(&format!("pv-{}", MAX_PVS + 49)));
        let body = serde_json::to_vec(&m).unwrap();
        assert!((body.len() as u64) < MAX_BYTES);
        // A full memory written at the caps stays under the read cap.
        let mut full = Memory::default();
        let name = "p".repeat(MAX_NAME - 5);
        for i in 0..MAX_PVS {
            let v = (0..MAX_SPELLS as i64)
                .map(|k| Spell {
                    kind: Kind::Degraded,
                    first: T0 + k,
                    last: T0 + k,
                })
                .collect();
            full.pvs.insert(format!("{name}{i:05}"), v);
        }
        full.version = VERSION;
        full.saved_ms = Some(i64::MAX / 2);
        assert!((serde_json::to_vec(&full).unwrap().len() as u64) < MAX_BYTES);
    }

    /// A run of another scope (a by-hand run narrowed with `--include`, another node's or every
    /// node's pods) keeps its own memory: it neither ends nor opens the usual run's spells.
    #[test]
    fn scopes_keep_their_own_memory() {
        assert_eq!(scoped("ro_pvc_mounts", ""), "ro_pvc_mounts");
        // FNV-1a's published test vector for "a".
        assert_eq!(scoped("x", "a"), "x.af63dc4c8601ec8c");
        let narrow = scoped("ro_pvc_mounts", "--include '^/a'");
        assert_ne!(narrow, scoped("ro_pvc_mounts", "--include '^/b'"));
        assert_eq!(narrow, scoped("ro_pvc_mounts", "--include '^/a'"));
        let d = tmp("scopes");
        assert_ne!(file(&d, &narrow), file(&d, "ro_pvc_mounts"));
        assert!(file(&d, &narrow)
            .to_str()
            .unwrap()
            .ends_with(".volumes.json"));
        // pv-a read-only in the usual runs at T0 and T0 + 2, a narrowed run between them that does
        // not look at it: one spell, not two.
        remember(&d, "ro_pvc_mounts", &[ro("pv-a")], T0);
        let r = remember(&d, &narrow, &[ro("pv-b")], T0 + 1);
        assert!(r.kept && r.text("pv-b", Kind::ReadOnly).is_none(), "{r:?}");
        let r = remember(&d, "ro_pvc_mounts", &[ro("pv-a")], T0 + 2);
        assert_eq!(
            r.memory.recall("pv-a", Kind::ReadOnly, T0 + 2).times,
            1,
            "{r:?}"
        );
        assert!(!r.memory.pvs.contains_key("pv-b"), "{r:?}");
    }

    /// Through the state directory: a run remembers, the next reads it back; garbled, hostile,
    /// symlinked and over-size files are notes and a fresh start, never a panic.
    #[test]
    fn files_are_kept_safely() {
        let d = tmp("files");
        let path = file(&d, "ro_pvc_mounts");
        assert_eq!(
            path.file_name().unwrap().to_str(),
            Some("ro_pvc_mounts.volumes.json")
        );
        let r = remember(&d, "ro_pvc_mounts", &[ro("pv-a")], T0);
        assert!(r.kept && r.notes.is_empty(), "{r:?}");
        remember(&d, "ro_pvc_mounts", &[], T0 + 1);
        let r = remember(&d, "ro_pvc_mounts", &[ro("pv-a")], T0 + 2);
        assert_eq!(
            r.text("pv-a", Kind::ReadOnly).unwrap(),
            "read-only 2 times in 30 days (last 2026-11-16)"
        );
        assert_eq!(
            r.text_any(["pv-x", "pv-a"], Kind::ReadOnly),
            r.text("pv-a", Kind::ReadOnly)
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        // Garbled: a note naming the file, a fresh start, the file rewritten.
        std::fs::write(
            &path,
            b"{\"version\":1,\"pvs\":{\"pv-a\":[{\"kind\":\"melted\"",
        )
        .unwrap();
        let r = remember(&d, "ro_pvc_mounts", &[ro("pv-a")], T0 + 3);
        assert_eq!(r.notes.len(), 1, "{r:?}");
        assert!(
            r.notes[0].contains("is unreadable")
                && r.notes[0].contains("ro_pvc_mounts.volumes.json"),
            "{r:?}"
        );
        assert!(r.kept);
        assert_eq!(r.memory.recall("pv-a", Kind::ReadOnly, T0 + 3).times, 1);
        assert!(load(&path).unwrap().is_some());

        // Hostile values: names with control characters or '|', spells ending before they
        // start, spells from the far future, huge counts: dropped with a note, never echoed.
        let hostile = format!(
            r#"{{"version":1,"saved_ms":{},"pvs":{{"evil|`rm -rf /`":[{{"kind":"read_only","first":1,"last":2}}],"pv-a":[{{"kind":"read_only","first":9,"last":3}},{{"kind":"read_only","first":{},"last":{}}}],"{}":[{{"kind":"stuck","first":1,"last":1}}]}}}}"#,
            i64::MAX,
            T0,
            i64::MAX,
            "x".repeat(300)
        );
        std::fs::write(&path, hostile).unwrap();
        let r = remember(&d, "ro_pvc_mounts", &[ro("pv-a")], T0 + 4);
        let all = r.notes.join("\n");
        assert!(all.contains("clock was set back"), "{all}");
        assert!(all.contains("3 invalid entries"), "{all}");
        assert!(!all.contains("rm -rf"), "{all}");
        assert_eq!(r.memory.pvs.len(), 1);
        assert_eq!(r.memory.recall("pv-a", Kind::ReadOnly, T0 + 4).times, 1);

        // Another version: afresh, said.
        std::fs::write(&path, br#"{"version":7,"pvs":{}}"#).unwrap();
        let r = remember(&d, "ro_pvc_mounts", &[], T0 + 5);
        assert!(r.notes[0].contains("of format 7"), "{r:?}");

        // Over the size cap: ignored with a note, not read whole.
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(MAX_BYTES + 1).unwrap();
        let r = remember(&d, "ro_pvc_mounts", &[], T0 + 6);
        assert!(r.notes[0].contains("larger than"), "{r:?}");
        assert!(r.kept);

        // A symbolic link at the file's name: never followed (not read, not written through).
        let victim = d.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::fs::remove_file(&path).unwrap();
        symlink(&victim, &path).unwrap();
        let r = remember(&d, "ro_pvc_mounts", &[ro("pv-a")], T0 + 7);
        assert!(r.notes[0].contains("symbolic link"), "{r:?}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A report's findings: the listed signals' PVs are recorded and annotated, others not.
    #[test]
    fn reports_are_read_and_annotated() {
        use plugin::{Finding, Report, Status, Subject};
        let sig = [("vol_degraded", Kind::Degraded), ("vol_ro", Kind::ReadOnly)];
        let report = || {
            let mut r = Report::new(Status::Warning, "x".to_string());
            r.findings = vec![
                Finding::new(Status::Warning, "pv-a degraded".to_string())
                    .signal("vol_degraded")
                    .subject(Subject::new().pv("pv-a")),
                Finding::new(Status::Warning, "pv-a degraded again".to_string())
                    .signal("vol_degraded")
                    .subject(Subject::new().pv("pv-a")),
                Finding::new(Status::Critical, "pv-b other".to_string())
                    .signal("other")
                    .subject(Subject::new().pv("pv-b")),
                Finding::new(Status::Ok, "pv-c fine".to_string())
                    .signal("vol_ro")
                    .subject(Subject::new().pv("pv-c")),
                Finding::new(Status::Critical, "no pv".to_string()).signal("vol_ro"),
            ];
            r
        };
        assert_eq!(
            seen_in(&report(), &sig),
            [("pv-a".to_string(), Kind::Degraded)]
        );
        let mut m = Memory::default();
        m.record(T0, &seen_in(&report(), &sig));
        m.record(T0 + 1, &[]);
        m.record(T0 + 2, &seen_in(&report(), &sig));
        let mut r = report();
        let rem = Remembered {
            memory: m,
            now: T0 + 2,
            notes: vec!["a note".into()],
            kept: true,
        };
        annotate(&mut r, &sig, &rem);
        let texts: Vec<&str> = r.findings.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "pv-a degraded; degraded 2 times in 30 days (last 2026-11-16)",
                "pv-a degraded again; degraded 2 times in 30 days (last 2026-11-16)",
                "pv-b other",
                "pv-c fine",
                "no pv"
            ]
        );
        assert_eq!(r.notes, ["a note"]);
    }

    /// A directory others can write is refused: nothing read or written, a note says why.
    #[test]
    fn an_unsafe_directory_is_refused() {
        let d = tmp("unsafe");
        let sub = d.join("shared");
        std::fs::create_dir(&sub).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o777)).unwrap();
        // Owned by us and writable by others: refused only when not ours; make it root's when
        // we are not root, or run as root and check a non-root-owned dir.
        let euid = nix::unistd::geteuid().as_raw();
        if euid == 0 {
            nix::unistd::chown(&sub, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        }
        let r = remember(&sub, "ro_pvc_mounts", &[ro("pv-a")], T0);
        if euid == 0 {
            assert!(!r.kept, "{r:?}");
            assert!(r.notes[0].contains("refused"), "{r:?}");
            assert!(!file(&sub, "ro_pvc_mounts").exists());
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}
