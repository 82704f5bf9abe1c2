//! `/proc/<pid>/mountinfo`, parsed exactly (proc(5)):
//!
//! `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`
//!
//! mount id, parent id, major:minor, root, mount point, per-mount options, optional fields
//! ending with `-`, filesystem type, source, super options. Root, mount point and source escape
//! space, tab, newline and backslash as `\040 \011 \012 \134`.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
pub struct Mount {
    pub id: u64,
    pub parent: u64,
    pub major: u32,
    pub minor: u32,
    /// The path inside the filesystem that is mounted here (`/` unless a bind of a subdirectory).
    pub root: String,
    pub mount_point: PathBuf,
    /// Per-mount options as written, comma-separated (`ro` here alone = a read-only bind); see
    /// [`Mount::mount_opts`]. Kept as one string: a 50 000-line table is parsed on every run,
    /// and one allocation per field instead of one per option is most of its cost.
    pub mount_options: String,
    /// The optional fields (`shared:1 master:2`), space-separated; see [`Mount::optional_fields`].
    pub optional: String,
    pub fstype: String,
    pub source: String,
    /// Options of the filesystem itself (the superblock), comma-separated; see
    /// [`Mount::super_opts`].
    pub super_options: String,
}

impl Mount {
    /// The per-mount options, one by one.
    pub fn mount_opts(&self) -> impl Iterator<Item = &str> {
        self.mount_options.split(',').filter(|o| !o.is_empty())
    }
    /// The superblock options, one by one.
    pub fn super_opts(&self) -> impl Iterator<Item = &str> {
        self.super_options.split(',').filter(|o| !o.is_empty())
    }
    /// The optional fields, one by one.
    pub fn optional_fields(&self) -> impl Iterator<Item = &str> {
        self.optional.split(' ').filter(|o| !o.is_empty())
    }
    pub fn mount_ro(&self) -> bool {
        self.mount_opts().any(|o| o == "ro")
    }
    pub fn super_ro(&self) -> bool {
        self.super_opts().any(|o| o == "ro")
    }
    pub fn has_super_option(&self, name: &str) -> bool {
        self.super_opts()
            .any(|o| o == name || o.split_once('=').is_some_and(|(k, _)| k == name))
    }
    pub fn super_option_value(&self, name: &str) -> Option<&str> {
        self.super_opts().find_map(|o| {
            o.split_once('=')
                .filter(|(k, _)| *k == name)
                .map(|(_, v)| v)
        })
    }
    /// `maj:min` of the filesystem.
    pub fn dev(&self) -> String {
        format!("{}:{}", self.major, self.minor)
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: line {line}: {reason}: {excerpt}")]
pub struct ParseError {
    pub path: String,
    pub line: usize,
    pub reason: &'static str,
    pub excerpt: String,
}

/// Undo the kernel's octal escapes (`\040` etc.). Unknown escapes are kept as they are.
pub fn unescape(s: &str) -> String {
    let mut out = String::new();
    unescape_into(s, &mut out);
    out
}

/// [`unescape`], appended to `out` (the device-usage map writes every field into one arena).
pub(crate) fn unescape_into(s: &str, out: &mut String) {
    if !s.contains('\\') {
        out.push_str(s);
        return;
    }
    let b = s.as_bytes();
    let mut bytes = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let oct = &b[i + 1..i + 4];
            if oct.iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = u32::from(oct[0] - b'0') * 64
                    + u32::from(oct[1] - b'0') * 8
                    + u32::from(oct[2] - b'0');
                if v <= 255 {
                    bytes.push(v as u8);
                    i += 4;
                    continue;
                }
            }
        }
        bytes.push(b[i]);
        i += 1;
    }
    out.push_str(&String::from_utf8_lossy(&bytes));
}

/// One line split into its fields, borrowed: validating a line costs no allocation.
pub(crate) struct Raw<'a> {
    pub(crate) id: u64,
    pub(crate) parent: u64,
    pub(crate) major: u32,
    pub(crate) minor: u32,
    pub(crate) root: &'a str,
    pub(crate) mount_point: &'a str,
    pub(crate) mount_options: &'a str,
    pub(crate) optional: &'a str,
    pub(crate) fstype: &'a str,
    pub(crate) source: &'a str,
    pub(crate) super_options: &'a str,
}

/// `line.split(' ')`, by `memchr`: mountinfo fields are short, and the generic searcher's
/// per-field setup was a tenth of the time spent on a 50 000-line table.
struct Fields<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Iterator for Fields<'a> {
    type Item = &'a str;
    fn next(&mut self) -> Option<&'a str> {
        let b = self.s.as_bytes();
        if self.pos > b.len() {
            return None;
        }
        let start = self.pos;
        let end = memchr::memchr(b' ', &b[start..]).map_or(b.len(), |n| start + n);
        self.pos = end + 1;
        // A space is ASCII: both ends are character boundaries.
        Some(&self.s[start..end])
    }
}

pub(crate) fn tokenize(line: &str) -> Result<Raw<'_>, &'static str> {
    // No path holds a NUL byte, so the kernel never writes one, raw or escaped: such a line is
    // garbled, not a mount to stat (which failed with "UnknownErrno" and read as CRITICAL).
    let b = line.as_bytes();
    if memchr::memchr(0, b).is_some()
        || memchr::memchr_iter(b'\\', b).any(|i| b[i + 1..].starts_with(b"000"))
    {
        return Err("NUL byte in the line (the kernel never writes one)");
    }
    let mut f = Fields { s: line, pos: 0 };
    let mut next = |what: &'static str| f.next().filter(|s| !s.is_empty()).ok_or(what);
    let id = next("missing mount id")?
        .parse()
        .map_err(|_| "mount id is not a number")?;
    let parent = next("missing parent id")?
        .parse()
        .map_err(|_| "parent id is not a number")?;
    let (maj, min) = next("missing major:minor")?
        .split_once(':')
        .ok_or("major:minor without ':'")?;
    let major = maj.parse().map_err(|_| "major is not a number")?;
    let minor = min.parse().map_err(|_| "minor is not a number")?;
    let root = next("missing root")?;
    let mount_point = next("missing mount point")?;
    let mount_options = next("missing mount options")?;
    let offset = |s: &str| s.as_ptr() as usize - line.as_ptr() as usize;
    let opt_start = offset(mount_options) + mount_options.len();
    let mut opt_end = opt_start;
    loop {
        let v = next("missing '-' separator")?;
        if v == "-" {
            break;
        }
        opt_end = offset(v) + v.len();
    }
    let optional = line[opt_start..opt_end].trim_start();
    let fstype = next("missing filesystem type")?;
    // The source may be empty on some filesystems; tolerate an empty field and trailing blanks.
    let a = f.next();
    let b = f.next();
    let extra_ok = f.all(str::is_empty);
    let (source, super_options) = match (a, b) {
        (Some(src), Some(opts)) if extra_ok && !opts.is_empty() => (src, opts),
        (Some(opts), None) if !opts.is_empty() => ("", opts),
        (Some(_), Some(_)) if extra_ok => return Err("empty super options"),
        _ => return Err("missing source or super options"),
    };
    Ok(Raw {
        id,
        parent,
        major,
        minor,
        root,
        mount_point,
        mount_options,
        optional,
        fstype,
        source,
        super_options,
    })
}

impl Raw<'_> {
    fn to_mount(&self) -> Mount {
        Mount {
            id: self.id,
            parent: self.parent,
            major: self.major,
            minor: self.minor,
            root: unescape(self.root),
            mount_point: PathBuf::from(unescape(self.mount_point)),
            mount_options: self.mount_options.to_string(),
            optional: self.optional.to_string(),
            fstype: self.fstype.to_string(),
            source: unescape(self.source),
            super_options: self.super_options.to_string(),
        }
    }
}

/// Escape a path the way the kernel writes it in mountinfo (space, tab, newline, backslash).
pub fn escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            ' ' => out.push_str("\\040"),
            '\t' => out.push_str("\\011"),
            '\n' => out.push_str("\\012"),
            '\\' => out.push_str("\\134"),
            c => out.push(c),
        }
    }
    out
}

/// The mount that holds each of `paths` (absolute host paths, as the mount table writes them): the
/// mount whose mount point is the longest component-wise prefix of the path, the last-listed of
/// equals (the topmost of a stack). Only the mounts on the way to a path are kept from the text.
pub fn holding(
    text: &str,
    label: &str,
    paths: &[PathBuf],
) -> Result<Vec<Option<Mount>>, ParseError> {
    let mut h = Holding::new(paths);
    for_each_line(text, label, |raw| h.offer(&raw))?;
    Ok(h.finish())
}

/// [`holding`], fed line by line: a pass over the table that does something else too (the
/// device-usage map) finds the mounts holding `paths` in the same pass.
pub(crate) struct Holding<'p> {
    paths: &'p [PathBuf],
    wanted: Vec<String>,
    kept: Vec<Mount>,
}

impl<'p> Holding<'p> {
    pub(crate) fn new(paths: &'p [PathBuf]) -> Holding<'p> {
        Holding {
            paths,
            wanted: paths.iter().map(|p| escape(&p.to_string_lossy())).collect(),
            kept: Vec::new(),
        }
    }

    /// Keep the line's mount if its mount point is on the way to one of the paths.
    pub(crate) fn offer(&mut self, raw: &Raw<'_>) {
        let mp = raw.mount_point;
        let on_the_way = mp == "/"
            || self.wanted.iter().any(|w| {
                w == mp || (w.starts_with(mp) && w.as_bytes().get(mp.len()) == Some(&b'/'))
            });
        if on_the_way {
            self.kept.push(raw.to_mount());
        }
    }

    pub(crate) fn finish(self) -> Vec<Option<Mount>> {
        let kept = self.kept;
        self.paths
            .iter()
            .map(|p| {
                let mut best: Option<&Mount> = None;
                for m in &kept {
                    if !p.starts_with(&m.mount_point) {
                        continue;
                    }
                    let depth = m.mount_point.components().count();
                    if best.is_none_or(|b| depth >= b.mount_point.components().count()) {
                        best = Some(m);
                    }
                }
                best.cloned()
            })
            .collect()
    }
}

/// The first `max` bytes of `s` (fewer, to end on a character boundary).
fn head(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Parse a whole mountinfo text. The first garbled line is an error naming it.
pub fn parse(text: &str, path: &str) -> Result<Vec<Mount>, ParseError> {
    parse_with(text, path, |_| true)
}

/// Parse a mountinfo text, keeping only the mounts whose mount point, *as written in the file*
/// (escaped, see [`escape`]), passes `keep`. Every line is still validated; only kept lines are
/// turned into owned [`Mount`]s, so a 50 000-line table with a few hundred interesting mounts
/// costs little more than reading it.
pub fn parse_with(
    text: &str,
    path: &str,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<Mount>, ParseError> {
    let mut out = Vec::new();
    for_each_line(text, path, |raw| {
        if keep(raw.mount_point) {
            out.push(raw.to_mount());
        }
    })?;
    Ok(out)
}

/// Validate every line of a mountinfo text and hand each one, split but borrowed, to `f`. The
/// first garbled line is an error naming it.
pub(crate) fn for_each_line<'a>(
    text: &'a str,
    path: &str,
    mut f: impl FnMut(Raw<'a>),
) -> Result<(), ParseError> {
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match tokenize(line) {
            Ok(raw) => f(raw),
            Err(reason) => {
                return Err(ParseError {
                    path: path.to_string(),
                    line: i + 1,
                    reason,
                    // Only the head of the line is shown: sanitize that, not a garbage line of
                    // hundreds of megabytes.
                    excerpt: plugin::render::truncate(&plugin::sanitize(head(line, 480)), 120),
                });
            }
        }
    }
    Ok(())
}

/// The cap of a mount table: a node with 50 000 mounts has about 10 MiB of mountinfo.
pub const MAX_BYTES: u64 = plugin::mapped::READ_MAX;

/// Read and parse a mountinfo file. Errors are one line an operator understands.
pub fn read(path: &Path) -> Result<Vec<Mount>, String> {
    read_with(path, |_| true)
}

/// [`read`], keeping only mount points (escaped, as in the file) that pass `keep`.
pub fn read_with(path: &Path, keep: impl Fn(&str) -> bool) -> Result<Vec<Mount>, String> {
    with_text(path, |text, label| parse_with(text, label, keep))
}

/// Read a mount table (capped, mapped, not empty) and run `parse` over its text and its name.
/// Errors are one line an operator understands.
pub(crate) fn with_text<T>(
    path: &Path,
    parse: impl FnOnce(&str, &str) -> Result<T, ParseError>,
) -> Result<T, String> {
    let bytes = plugin::mapped::read(path)
        .map_err(|e| format!("cannot read {}: {}", path.display(), plugin::errtext(&e)))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!(
            "{} is larger than {} (the cap of a mount table, about 150 000 mounts): not read",
            path.display(),
            plugin::fmt_bytes(MAX_BYTES)
        ));
    }
    let text = plugin::render::lossy(&bytes);
    if text.trim().is_empty() {
        return Err(format!("{} is empty: not a mount table", path.display()));
    }
    parse(&text, &path.display().to_string()).map_err(|e| format!("garbled mount table: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
1290 29 8:32 / /var/lib/kubelet/plugins/kubernetes.io/csi/jiva.csi.openebs.io/0f3a/globalmount rw,relatime shared:620 - ext4 /dev/sdc rw,emergency_ro,stripe=256
1301 29 8:32 / /var/lib/kubelet/pods/8e1f6a2c-1111-2222-3333-444455556666/volumes/kubernetes.io~csi/pvc-a634b9a3/mount ro,relatime shared:620 - ext4 /dev/sdc rw
77 29 0:44 / /mnt/with\\040space\\011tab rw - fuse.bindfs /src\\134dir rw,user_id=0
";

    #[test]
    fn the_mount_holding_a_path_is_the_deepest_topmost_one() {
        let t = "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
                 2 1 8:2 / /var rw - xfs /dev/sda2 rw\n\
                 3 2 8:3 / /var/lib/kube rw - ext4 /dev/sda3 rw\n\
                 4 2 0:50 / /var/lib/kubelet rw - tmpfs tmpfs rw\n\
                 5 4 0:51 / /var/lib/kubelet ro - tmpfs tmpfs ro\n";
        let paths = [
            PathBuf::from("/var/lib/kubelet"),
            PathBuf::from("/"),
            PathBuf::from("/var/lib/kubelet2"),
            PathBuf::from("/etc"),
        ];
        let got = holding(t, "t", &paths).unwrap();
        let ids: Vec<Option<u64>> = got.iter().map(|m| m.as_ref().map(|m| m.id)).collect();
        assert_eq!(ids, [Some(5), Some(1), Some(2), Some(1)]);
        assert!(got[0].as_ref().unwrap().mount_ro());
        assert_eq!(holding("", "t", &paths).unwrap(), vec![None; 4]);
    }

    #[test]
    fn parses_fields_and_options() {
        let m = parse(SAMPLE, "t").unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].id, 36);
        assert_eq!(m[0].parent, 35);
        assert_eq!((m[0].major, m[0].minor), (98, 0));
        assert_eq!(m[0].root, "/mnt1");
        assert_eq!(m[0].optional_fields().collect::<Vec<_>>(), vec!["master:1"]);
        assert_eq!(m[0].fstype, "ext3");
        assert_eq!(m[0].source, "/dev/root");
        assert_eq!(m[0].super_option_value("errors"), Some("continue"));
        assert!(m[1].has_super_option("emergency_ro"));
        assert!(!m[1].super_ro());
        assert!(m[2].mount_ro() && !m[2].super_ro());
        assert_eq!(m[1].dev(), "8:32");
    }

    #[test]
    fn octal_escapes() {
        let m = parse(SAMPLE, "t").unwrap();
        assert_eq!(m[3].mount_point, PathBuf::from("/mnt/with space\ttab"));
        assert_eq!(m[3].source, "/src\\dir");
        assert_eq!(unescape("a\\012b"), "a\nb");
        assert_eq!(unescape("trailing\\"), "trailing\\");
        assert_eq!(unescape("\\04"), "\\04");
        assert_eq!(unescape("\\777"), "\\777");
    }

    #[test]
    fn filtered_parse_keeps_only_matching_but_validates_all() {
        let kept = parse_with(SAMPLE, "t", |mp| mp.starts_with("/var/lib/kubelet/")).unwrap();
        assert_eq!(kept.len(), 2);
        let bad = format!("{SAMPLE}garbage line\n");
        assert!(parse_with(&bad, "t", |_| false).is_err());
        assert_eq!(escape("/a b\\c"), "/a\\040b\\134c");
        let m = parse_with(SAMPLE, "t", |mp| mp.starts_with(&escape("/mnt/with space"))).unwrap();
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn a_huge_garbled_line_is_named_by_its_head() {
        let line = "é".repeat(5_000_000);
        let e = parse(&line, "t").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(
            e.excerpt.chars().count() <= 120 && e.excerpt.starts_with("éé"),
            "{e}"
        );
        assert_eq!(head("aé", 2), "a");
        assert_eq!(head("ab", 10), "ab");
    }

    #[test]
    fn fields_split_like_str_split() {
        for t in [
            "",
            " ",
            "a",
            "a b",
            "a  b ",
            " a",
            "é b\tc  ",
            "1 2 0:5 / /x rw - t s o",
        ] {
            let got: Vec<&str> = Fields { s: t, pos: 0 }.collect();
            assert_eq!(got, t.split(' ').collect::<Vec<_>>(), "{t:?}");
        }
    }

    #[test]
    fn no_optional_fields() {
        let m = parse("20 1 0:5 / /dev rw - devtmpfs udev rw,size=1k\n", "t").unwrap();
        assert_eq!(m[0].optional_fields().count(), 0);
        assert_eq!(m[0].source, "udev");
    }

    #[test]
    fn many_optional_fields() {
        let m = parse(
            "20 1 0:5 / /x rw shared:1 master:2 propagate_from:3 unbindable - tmpfs tmpfs rw\n",
            "t",
        )
        .unwrap();
        assert_eq!(m[0].optional_fields().count(), 4);
    }

    #[test]
    fn garbled_and_truncated_lines_name_the_line() {
        let text =
            format!("{SAMPLE}1290 29 8:32 / /var/lib/kubelet/pods/x rw,relatime shared:620\n");
        let e = parse(&text, "/proc/self/mountinfo").unwrap_err();
        assert_eq!(e.line, 5);
        assert_eq!(e.reason, "missing '-' separator");
        assert!(e.to_string().contains("/proc/self/mountinfo: line 5"));
        for bad in [
            "x 1 0:5 / /x rw - tmpfs t rw",
            "1 1 05 / /x rw - tmpfs t rw",
            "1 1 a:5 / /x rw - tmpfs t rw",
            "1 1 0:5 / /x rw -",
            "1 1 0:5 / /x rw - tmpfs",
            "1",
            "1 1 0:5 / /x rw - tmpfs src opts extra",
        ] {
            assert!(parse(bad, "t").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_nul_byte_is_a_garbled_line() {
        for bad in [
            "20 1 0:5 / /var/lib/kubelet/pods/x\0y rw - ext4 /dev/sda1 rw\n",
            "20 1 0:5 / /var/lib/kubelet/pods/x\\000y rw - ext4 /dev/sda1 rw\n",
        ] {
            let e = parse(&format!("{SAMPLE}{bad}"), "t").unwrap_err();
            assert_eq!(
                e.reason,
                "NUL byte in the line (the kernel never writes one)"
            );
            assert_eq!(e.line, 5, "{e}");
        }
    }

    #[test]
    fn invalid_utf8_does_not_panic() {
        let bytes = b"20 1 0:5 / /x\xff\xfe rw - tmpfs t rw\n";
        let text = String::from_utf8_lossy(bytes);
        let m = parse(&text, "t").unwrap();
        assert!(m[0].mount_point.to_string_lossy().contains('\u{FFFD}'));
    }
}
