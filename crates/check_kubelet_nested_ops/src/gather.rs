//! Gather: the failure lines of every source (the journal through journalctl, log files, stdin),
//! resumed from and saved to the state with `--state-dir`. All host reading goes through `node`.

use crate::acc::{Acc, Folded};
use crate::parse::{self, Failure};
use crate::streak::Streak;
use crate::Opts;
use node::logs::{files, journal, scan, state, time, wrap};
use plugin::{Ctx, Unknown};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Events kept per source in the state file.
const STATE_MAX_EVENTS: usize = 5000;

/// Units looked for when no `--journal-unit` is given (those present in the journal are read).
pub const DEFAULT_UNITS: &[&str] = &[
    "kubelet.service",
    "snap.microk8s.daemon-kubelite.service",
    "k3s.service",
    "k3s-agent.service",
];

pub(crate) const CHECK_ID: &str = "kubelet_nested_ops";

/// What one source gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourceInfo {
    pub name: String,
    pub bytes: u64,
    pub hits: u64,
    pub complete: bool,
    /// The source gave nothing at all (an empty file, /dev/null, a pipe that ended at once) and
    /// no earlier run read anything from it: nothing was checked.
    pub empty: bool,
    /// Leading lines shown to the format test (`sampled`) that are no kubelet record in any
    /// shape the check reads.
    pub unread_sampled: u64,
    pub sampled: u64,
    /// Lines naming a retry (`No retries permitted until`) that are no failure record the check
    /// can read (cut, mangled, another program's).
    pub unread_candidates: u64,
    pub notes: Vec<String>,
}

/// Everything gathered: failures (from this run's reading and the kept state) and the sources.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Data {
    /// When it was gathered (epoch ms): the window ends here.
    pub now: i64,
    pub failures: Vec<Failure>,
    pub sources: Vec<SourceInfo>,
    /// Each volume's run of failures as far back as any line read (this run's and, with
    /// --state-dir, earlier runs'): what tells the true age past the window and log rotation.
    pub streaks: Vec<Streak>,
    /// Per volume, its failures of the window not kept as records (memory stays bounded).
    pub folded: BTreeMap<String, Folded>,
    /// Volumes failing in the window past the cap of volumes kept ([`crate::acc::MAX_VOLUMES`]).
    pub over_cap: u64,
}

/// What a source keeps between runs.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct SourceState {
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub file: Option<files::FilePos>,
    #[serde(default)]
    pub failures: Vec<Failure>,
    /// Each volume's run of failures, kept past the lookback while it goes on (log rotation,
    /// runs longer than the window).
    #[serde(default)]
    pub streaks: Vec<Streak>,
    /// When the state was written (epoch ms, the wall clock of that run): a state written
    /// later than now tells a clock set back even when it keeps no failure.
    #[serde(default)]
    pub saved_ms: Option<i64>,
    /// This run re-reads the source from its start (the clock was set back): kept failures the
    /// source still holds come again and are counted once.
    #[serde(skip)]
    pub reread: bool,
}

/// One source read: its failures and runs, and what to say about it.
struct SourceRead {
    failures: Vec<Failure>,
    streaks: Vec<Streak>,
    folded: BTreeMap<String, Folded>,
    over_cap: u64,
    info: SourceInfo,
}

impl Data {
    fn add(&mut self, r: SourceRead) {
        self.failures.extend(r.failures);
        self.streaks.extend(r.streaks);
        for (v, f) in r.folded {
            self.folded.entry(v).or_default().merge(&f);
        }
        self.over_cap += r.over_cap;
        self.sources.push(r.info);
    }
}

/// The failures worth keeping in the state: those of the lookback, none from the future (they
/// are never counted, and kept they would start counting once the clock reaches them).
pub(crate) fn keep(mut failures: Vec<Failure>, since: i64, now: i64) -> Vec<Failure> {
    failures.retain(|f| f.t >= since && !state::from_future(f.t, now));
    if failures.len() > STATE_MAX_EVENTS {
        failures.drain(..failures.len() - STATE_MAX_EVENTS);
    }
    failures
}

/// What a log source's format says: UNKNOWN when nothing in it is a kubelet record — it holds
/// complete lines, none of the first ones is a kubelet log line in any shape (also behind an
/// operator's `grep -n` prefix or backtick) and no line anywhere is a failure record (`found`:
/// failure records read from it) — or nothing but a line over the cap (reading it as "no
/// failures" would answer OK after seeing nothing); a note when lines over the cap were cut.
/// Every record recognised anywhere is judged: a first line that is not the kubelet's (a pasted
/// header, a shell prompt) does not reject the rest (issue 31).
pub fn format_verdict(
    name: &str,
    s: &scan::ScanStats,
    found: u64,
) -> Result<Option<String>, Unknown> {
    let cap = plugin::fmt_bytes(scan::LINE_MAX as u64);
    if s.sampled > 0 && s.recognized == 0 && found == 0 {
        return Err(Unknown(format!(
            "{name} is not a kubelet log: none of its first {} lines has the shape of one and no line is a failed volume operation (expected klog text `E0713 20:27:25.123456 2166 file.go:348] ...`, kubelet JSON logging `{{\"ts\":...,\"msg\":...}}`, Talos json_lines `{{\"msg\":...,\"talos-time\":...}}` or journalctl -o json, bare or behind a syslog/journal, CRI, Docker json-file, talosctl `<node>: ` or grep -n prefix)",
            s.sampled
        )));
    }
    if s.overlong > 0 && s.sampled == 0 && found == 0 {
        return Err(Unknown(format!(
            "{name} is not a kubelet log: it holds a line longer than {cap} (the cap of one log line) and no complete line besides"
        )));
    }
    Ok((s.overlong > 0).then(|| {
        format!(
            "{name}: {} longer than {cap} (the cap of one log line) {} cut",
            plugin::count(s.overlong as usize, "line", "lines"),
            if s.overlong == 1 { "was" } else { "were" }
        )
    }))
}

/// The zone of klog/syslog local times: `--tz`, else the host's (its /etc/localtime in container
/// mode), else this process's.
pub fn zone(opts: &Opts) -> Result<Box<dyn time::Tz + Send + Sync>, Unknown> {
    let host = node::Host::from_option(opts.host.host_root.as_deref());
    node::logs::tz::host_zone(&host, opts.tz.as_deref()).map_err(Unknown)
}

/// Gather from every source. `read_deadline` is when reading must stop.
pub fn gather(opts: &Opts, ctx: &Ctx, now: i64, read_deadline: Instant) -> Result<Data, Unknown> {
    let tz = zone(opts)?;
    let g = Gatherer {
        opts,
        ctx,
        now,
        since: now - opts.policy().lookback_ms(),
        deadline: read_deadline,
        tz: tz.as_ref(),
        parsed: Default::default(),
        unparsed: Default::default(),
    };
    let mut data = Data {
        now,
        ..Data::default()
    };
    let journal_dir =
        journal::host_directory(opts.journal_dir.as_deref(), opts.host.host_root.as_deref());
    let units = g.journal_units(journal_dir.as_deref())?;
    if !units.is_empty() {
        data.add(g.journal(journal_dir.as_deref(), &units)?);
    }
    for path in &opts.log_file {
        data.add(if path.as_os_str() == "-" {
            g.stdin()?
        } else {
            g.file(path)?
        });
    }
    Ok(data)
}

/// One run's reading: the options, the clock and the zone every source shares.
struct Gatherer<'a> {
    opts: &'a Opts,
    ctx: &'a Ctx,
    now: i64,
    /// Start of the lookback: older failures are not kept.
    since: i64,
    deadline: Instant,
    tz: &'a dyn time::Tz,
    /// Candidate lines read as failures, and those that were not (counted per source).
    parsed: std::cell::Cell<u64>,
    unparsed: std::cell::Cell<u64>,
}

impl Gatherer<'_> {
    /// The journal units to read: `--journal-unit`; else, unless only files are named, the known
    /// kubelet units present in the journal (none: UNKNOWN saying what was looked for).
    fn journal_units(&self, dir: Option<&Path>) -> Result<Vec<String>, Unknown> {
        if !self.opts.journal_unit.is_empty() {
            return Ok(self.opts.journal_unit.clone());
        }
        if !self.opts.log_file.is_empty() {
            return Ok(Vec::new());
        }
        self.ctx
            .stage("listing the journal's units (journalctl -F _SYSTEMD_UNIT)");
        let present =
            journal::field_values(&self.opts.journalctl, dir, "_SYSTEMD_UNIT", self.deadline)
                .map_err(Unknown)?;
        let found: Vec<String> = DEFAULT_UNITS
            .iter()
            .filter(|u| present.iter().any(|p| p == *u))
            .map(|u| u.to_string())
            .collect();
        if found.is_empty() {
            return Err(Unknown(format!(
                "no kubelet unit in the journal{} (looked for {}); name it with --journal-unit or read files with --log-file",
                dir.map(|d| format!(" at {}", d.display()))
                    .unwrap_or_default(),
                DEFAULT_UNITS.join(", ")
            )));
        }
        Ok(found)
    }

    /// How a file or stdin is scanned: for the failure lines, until the deadline, the first lines
    /// sampled for the kubelet's log shapes. `to_end`: a last line without its newline counts (a
    /// pipe that ended), else it is left for the next run (a file still being written).
    fn scan(&self, to_end: bool) -> scan::Scan<'static> {
        scan::Scan {
            needles: parse::NEEDLES,
            deadline: Some(self.deadline),
            consume_partial_tail: to_end,
            recognize: Some(parse::is_log_line),
        }
    }

    fn parse(&self, line: &[u8], time_ms: Option<i64>) -> Option<Failure> {
        let f = parse::parse_line_since(line, time_ms, self.now, self.tz, self.since);
        let c = if f.is_some() {
            &self.parsed
        } else {
            &self.unparsed
        };
        c.set(c.get() + 1);
        f
    }

    /// Start counting a source's candidate lines afresh.
    fn reset_counts(&self) {
        self.parsed.set(0);
        self.unparsed.set(0);
    }

    /// The journal of `units`, after the kept cursor (else from the lookback's start).
    fn journal(&self, dir: Option<&Path>, units: &[String]) -> Result<SourceRead, Unknown> {
        let name = format!(
            "journal{} {}",
            dir.map(|d| format!(" {}", d.display())).unwrap_or_default(),
            units.join(",")
        );
        self.ctx.stage(format!("reading {name} (journalctl)"));
        self.reset_counts();
        let mut notes = Vec::new();
        let st = self.load_state(&name, &mut notes);
        let cursor = st.as_ref().and_then(|(_, s)| s.cursor.clone());
        let q = journal::Query {
            journalctl: &self.opts.journalctl,
            directory: dir,
            units,
            after_cursor: cursor.as_deref(),
            since_ms: Some(self.since),
            needles: parse::NEEDLES,
            deadline: self.deadline,
        };
        let mut acc = self.acc(st.as_ref());
        let r = journal::read(&q, |e| {
            if let Some(f) = self.parse(e.message.as_bytes(), Some(e.realtime_ms)) {
                acc.push(f);
            }
        })
        .map_err(|e| Unknown(format!("{name}: {e}")))?;
        notes.extend(r.notes);
        self.ctx.input(format!(
            "read {} bytes of {name}, {} lines about volume operations{}",
            r.stats.bytes_read,
            r.stats.hits,
            if r.last_cursor.is_some() {
                ", its cursor kept for the next run"
            } else {
                ""
            }
        ));
        let pos = SourceState {
            cursor: r.last_cursor,
            ..SourceState::default()
        };
        Ok(self.finish(name, st, acc, pos, &r.stats, notes))
    }

    /// Standard input, read to its end (or the deadline); nothing kept. Stdin is read once, so
    /// the look for a kubelet record past a long preamble (a file's second pass, `has_record`)
    /// happens in the same pass: the record markers are searched beside the failure needle.
    fn stdin(&self) -> Result<SourceRead, Unknown> {
        self.ctx.stage("reading stdin");
        self.reset_counts();
        let needles: Vec<&[u8]> = parse::NEEDLES
            .iter()
            .chain(parse::RECORD_NEEDLES)
            .copied()
            .collect();
        let o = scan::Scan {
            needles: &needles,
            ..self.scan(true)
        };
        let failure: Vec<memchr::memmem::Finder> = parse::NEEDLES
            .iter()
            .map(memchr::memmem::Finder::new)
            .collect();
        let mut acc = self.acc(None);
        let mut joiner = wrap::Joiner::new();
        let mut record = false;
        let mut candidates = 0u64;
        // A line continuing a wrapped failure line goes to the joiner whatever it holds.
        let mut continues = false;
        let stdin = std::io::stdin();
        let mut lock = stdin.lock();
        let s = scan::scan_follow(
            &mut lock,
            &o,
            |l| {
                if !record {
                    record = parse::is_log_line(&l[..l.len().min(4096)]);
                }
                let candidate = failure.iter().any(|f| f.find(l).is_some());
                candidates += u64::from(candidate);
                continues = (continues || candidate) && self.unwrapped(l, &mut joiner, &mut acc);
                continues
            },
            |_| {},
        )
        .map_err(|e| Unknown(format!("cannot read stdin: {}", plugin::errtext(&e))))?;
        // Candidates are the failure needle's lines, not the markers'.
        let s = scan::ScanStats {
            hits: candidates,
            ..s
        };
        joiner.finish(|l| {
            if let Some(f) = self.parse(l.text.as_bytes(), l.time_ms) {
                acc.push(f);
            }
        });
        let verdict = match format_verdict("stdin", &s, self.parsed.get()) {
            // The first lines are no kubelet record, a later one is (a pasted preamble).
            Err(e) if s.sampled >= scan::SAMPLE_LINES && record => {
                self.ctx.debug(format!(
                    "stdin: its first {} lines are no kubelet record, later ones are",
                    s.sampled
                ));
                format_verdict("stdin", &scan::ScanStats { sampled: 0, ..s }, 0).map_err(|_| e)?
            }
            v => v?,
        };
        let notes: Vec<String> = verdict.into_iter().collect();
        let mut r = self.finish("stdin".into(), None, acc, SourceState::default(), &s, notes);
        r.info.empty = s.bytes_read == 0 && s.complete;
        Ok(r)
    }

    /// A log file, from the kept inode+offset (rotation and truncation handled by `node`).
    fn file(&self, path: &Path) -> Result<SourceRead, Unknown> {
        let name = path.display().to_string();
        self.ctx.stage(format!("reading {name}"));
        self.reset_counts();
        let mut notes = Vec::new();
        let st = self.load_state(&format!("file:{name}"), &mut notes);
        let prev = st.as_ref().and_then(|(_, s)| s.file);
        let o = self.scan(false);
        let mut acc = self.acc(st.as_ref());
        let mut joiner = wrap::Joiner::new();
        let r = files::read(path, prev.as_ref(), &o, |l| {
            self.unwrapped(l, &mut joiner, &mut acc)
        })
        .map_err(Unknown)?;
        // A partial piece that ends what is written so far is parsed as far as it goes (the
        // needle and the operation key are in the first piece); its rest comes alone next run.
        joiner.finish(|l| {
            if let Some(f) = self.parse(l.text.as_bytes(), l.time_ms) {
                acc.push(f);
            }
        });
        let verdict = match format_verdict(&name, &r.stats, self.parsed.get()) {
            // The first lines are no kubelet record (a pasted preamble longer than the sample):
            // the file is looked through for one before it is called "not a kubelet log".
            Err(e) if r.stats.sampled >= scan::SAMPLE_LINES && self.has_record(path) => {
                self.ctx.debug(format!(
                    "{name}: its first {} lines are no kubelet record, later ones are",
                    r.stats.sampled
                ));
                format_verdict(
                    &name,
                    &scan::ScanStats {
                        sampled: 0,
                        ..r.stats
                    },
                    0,
                )
                .map_err(|_| e)?
            }
            v => v?,
        };
        notes.extend(verdict);
        notes.extend(r.notes);
        self.ctx.input(format!(
            "read {} bytes of {name}, now at offset {}, {} lines about volume operations",
            r.stats.bytes_read,
            // (after a rotation the bytes consumed include the old file's: no "from" offset)
            r.pos.offset,
            r.stats.hits
        ));
        // Nothing read and nothing consumed, ever (a resumed file at its end has a position).
        let empty = r.stats.bytes_read == 0 && r.stats.complete && r.pos.offset == 0;
        let pos = SourceState {
            file: Some(r.pos),
            ..SourceState::default()
        };
        let mut read = self.finish(name, st, acc, pos, &r.stats, notes);
        read.info.empty = empty;
        Ok(read)
    }

    /// Does the file hold a kubelet record anywhere (a line of one of the shapes
    /// [`parse::is_log_line`] knows, found by their markers at grep speed, until the deadline)?
    fn has_record(&self, path: &Path) -> bool {
        let o = scan::Scan {
            needles: parse::RECORD_NEEDLES,
            deadline: Some(self.deadline),
            consume_partial_tail: true,
            recognize: None,
        };
        let mut found = false;
        let _ = files::read(path, None, &o, |l| {
            found = found || parse::is_log_line(&l[..l.len().min(4096)]);
            false
        });
        found
    }

    /// A candidate line of a file or stdin: lines wrapped by a container runtime (Docker
    /// json-file, CRI) are unwrapped per line, a partial line joined with the next; the runtime's
    /// timestamp is the entry's time. True when the next line continues this one.
    fn unwrapped(&self, line: &[u8], joiner: &mut wrap::Joiner, acc: &mut Acc) -> bool {
        if joiner.passes_through(line) {
            if let Some(f) = self.parse(line, None) {
                acc.push(f);
            }
            return false;
        }
        joiner.feed(line, |l| {
            if let Some(f) = self.parse(l.text.as_bytes(), l.time_ms) {
                acc.push(f);
            }
        })
    }

    /// The aggregates of a source, started from its kept state (runs and failures).
    fn acc(&self, st: Option<&(PathBuf, SourceState)>) -> Acc {
        let window_start = self.now - self.opts.policy().window_ms;
        let runs = st.map(|(_, s)| s.streaks.as_slice()).unwrap_or(&[]);
        let mut acc = Acc::new(runs, self.now, self.since, window_start);
        for f in st.map(|(_, s)| s.failures.as_slice()).unwrap_or(&[]) {
            acc.push(f.clone());
        }
        if st.is_some_and(|(_, s)| s.reread) {
            // The source is read again from its start: a kept failure it still holds counts once.
            acc.skip_again(st.map(|(_, s)| s.failures.as_slice()).unwrap_or(&[]));
        }
        acc
    }

    /// The kept state of a source (`None` without `--state-dir`); an unreadable one is a note and
    /// starts afresh, kept failures from the future are dropped with a note.
    fn load_state(&self, source: &str, notes: &mut Vec<String>) -> Option<(PathBuf, SourceState)> {
        let dir = self.opts.state_dir.as_deref()?;
        let p = state::path(dir, CHECK_ID, source);
        match state::load::<SourceState>(&p) {
            Ok(s) => {
                let mut s = s.unwrap_or_default();
                let newest = s
                    .failures
                    .iter()
                    .map(|f| f.t)
                    .chain(s.streaks.iter().map(|r| r.last))
                    .max();
                if let Some(ahead) = state::clock_went_back(s.saved_ms, newest, self.now) {
                    // The position stays valid whatever the clock says, but what was read
                    // with the clock ahead is dated in the future: drop that and read the
                    // source again from its start (the journal from the lookback's start),
                    // so that every failure it still holds counts now.
                    let dropped = state::drop_future(&mut s.failures, self.now, |f| f.t)
                        + state::drop_future(&mut s.streaks, self.now, |r| r.last);
                    notes.push(state::clock_note(
                        &p,
                        ahead,
                        dropped,
                        source.strip_prefix("file:").unwrap_or(source),
                    ));
                    s.cursor = None;
                    s.file = None;
                    s.reread = true;
                }
                Some((p, s))
            }
            Err(e) => {
                notes.push(e);
                Some((p, SourceState::default()))
            }
        }
    }

    /// The end of reading a source: its aggregates (kept failures and runs, earlier runs' and
    /// this run's) make what is kept; the state (with the new position `pos`) saved when there
    /// is one.
    fn finish(
        &self,
        name: String,
        st: Option<(PathBuf, SourceState)>,
        acc: Acc,
        pos: SourceState,
        stats: &scan::ScanStats,
        mut notes: Vec<String>,
    ) -> SourceRead {
        let g = acc.finish();
        let runs = g.streaks;
        let mut failures = g.failures;
        failures.retain(|f| f.t >= self.since);
        if let Some((p, _)) = st {
            let s = SourceState {
                failures: keep(failures.clone(), self.since, self.now),
                streaks: runs.clone(),
                saved_ms: Some(self.now),
                ..pos
            };
            if let Err(e) = state::save(&p, &s) {
                // A refused directory was already named when loading.
                if !notes.contains(&e) {
                    notes.push(e);
                }
            }
        }
        SourceRead {
            failures,
            streaks: runs,
            folded: g.folded,
            over_cap: g.over_cap,
            info: SourceInfo {
                name,
                bytes: stats.bytes_read,
                hits: stats.hits,
                complete: stats.complete,
                empty: false,
                unread_sampled: stats.sampled - stats.recognized.min(stats.sampled),
                sampled: stats.sampled,
                unread_candidates: self.unparsed.get(),
                notes,
            },
        }
    }
}
