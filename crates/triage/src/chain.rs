//! Findings joined into chains: an edge from a cause to an effect where a rule of
//! [`crate::rules`] allows it and both name the same value of one of its keys; a chain is a set
//! of findings connected by edges, its roots the findings nothing in it causes.

use crate::answer::Finding;
use crate::rules;
use plugin::Status;
use serde::Serialize;

/// An edge: `cause` (an index into the findings) can cause `effect`, both naming `value` of `key`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    pub cause: usize,
    pub effect: usize,
    pub key: &'static str,
    pub value: String,
}

/// A chain: its findings (indices, roots first, then by layer), its roots and its links.
#[derive(Debug, Clone, Serialize)]
pub struct Chain {
    pub status: Status,
    pub roots: Vec<usize>,
    pub members: Vec<usize>,
    pub links: Vec<Link>,
}

/// The findings to join: every non-OK one, each once (a check run twice, or the same finding
/// read from two files, counts once); findings without a node get `node` (the node the
/// node-side checks ran on) when one is known.
pub fn prepare(findings: Vec<Finding>, node: Option<&str>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    for mut f in findings {
        if f.status == Status::Ok {
            continue;
        }
        if let Some(n) = node {
            f.subject
                .entry("node".into())
                .or_insert_with(|| n.to_string());
        }
        if let Some(same) = out
            .iter_mut()
            .find(|o| o.check == f.check && o.signal == f.signal && o.subject == f.subject)
        {
            if f.status.rank() > same.status.rank() {
                *same = f;
            }
            continue;
        }
        out.push(f);
    }
    out
}

/// Every link between the findings.
pub fn links(findings: &[Finding]) -> Vec<Link> {
    let mut out = Vec::new();
    for (i, a) in findings.iter().enumerate() {
        for (j, b) in findings.iter().enumerate() {
            if i == j {
                continue;
            }
            for key in rules::joins(&a.signal, &b.signal) {
                let k = key.name();
                // A device or session name is the node's own: `sdc` on two nodes is two disks.
                let local = matches!(key, rules::Key::Device | rules::Key::Session);
                if local && a.subject.get("node") != b.subject.get("node") {
                    continue;
                }
                if let (Some(x), Some(y)) = (a.key(k), b.key(k)) {
                    if x == y {
                        out.push(Link {
                            cause: i,
                            effect: j,
                            key: k,
                            value: x,
                        });
                        break;
                    }
                }
            }
        }
    }
    out
}

/// The chains (two findings or more) and the findings that stand alone, most severe first.
pub fn chains(findings: &[Finding]) -> (Vec<Chain>, Vec<usize>) {
    let all = links(findings);
    // Connected components (union-find over the links).
    let mut parent: Vec<usize> = (0..findings.len()).collect();
    fn find(p: &mut [usize], x: usize) -> usize {
        let mut r = x;
        while p[r] != r {
            r = p[r];
        }
        let mut y = x;
        while p[y] != r {
            let next = p[y];
            p[y] = r;
            y = next;
        }
        r
    }
    for l in &all {
        let (a, b) = (find(&mut parent, l.cause), find(&mut parent, l.effect));
        if a != b {
            parent[a] = b;
        }
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of: Vec<Option<usize>> = vec![None; findings.len()];
    for i in 0..findings.len() {
        let r = find(&mut parent, i);
        match group_of[r] {
            Some(g) => groups[g].push(i),
            None => {
                group_of[r] = Some(groups.len());
                groups.push(vec![i]);
            }
        }
    }
    let layer = |i: usize| rules::layer(&findings[i].signal).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    let mut alone = Vec::new();
    for g in groups {
        if g.len() == 1 {
            alone.push(g[0]);
            continue;
        }
        let links: Vec<Link> = all
            .iter()
            .filter(|l| g.contains(&l.cause))
            .cloned()
            .collect();
        let mut roots: Vec<usize> = g
            .iter()
            .copied()
            .filter(|i| !links.iter().any(|l| l.effect == *i))
            .collect();
        // The lowest layer first; in one layer the root that explains most, then the worst,
        // then the signal's place in its layer (journal_abort before the ext4 error it causes).
        let reach = |r: usize| reach(&links, r);
        let place = |i: usize| {
            rules::layer(&findings[i].signal).map_or(usize::MAX, |l| {
                rules::LAYERS[l]
                    .signals
                    .iter()
                    .position(|s| *s == findings[i].signal)
                    .unwrap_or(usize::MAX)
            })
        };
        roots.sort_by_key(|&i| {
            (
                layer(i),
                std::cmp::Reverse(reach(i)),
                std::cmp::Reverse(findings[i].status.rank()),
                place(i),
                i,
            )
        });
        // The roots in their order, then the rest up the stack.
        let mut rest: Vec<usize> = g.iter().copied().filter(|i| !roots.contains(i)).collect();
        rest.sort_by_key(|&i| (layer(i), i));
        let members: Vec<usize> = roots.iter().copied().chain(rest).collect();
        let status = g
            .iter()
            .fold(Status::Ok, |s, &i| s.worst(findings[i].status));
        out.push(Chain {
            status,
            roots,
            members,
            links,
        });
    }
    out.sort_by_key(|c| {
        (
            std::cmp::Reverse(c.status.rank()),
            std::cmp::Reverse(c.members.len()),
        )
    });
    alone.sort_by_key(|&i| (std::cmp::Reverse(findings[i].status.rank()), i));
    (out, alone)
}

/// How many findings `root` explains (reaches through links).
fn reach(links: &[Link], root: usize) -> usize {
    let mut seen = vec![root];
    let mut todo = vec![root];
    while let Some(i) = todo.pop() {
        for l in links.iter().filter(|l| l.cause == i) {
            if !seen.contains(&l.effect) {
                seen.push(l.effect);
                todo.push(l.effect);
            }
        }
    }
    seen.len() - 1
}

impl Chain {
    /// The chain in one line, root cause first: the longest path of links from a root, each step
    /// by its label, and how many more findings the chain holds.
    pub fn headline(&self, findings: &[Finding]) -> String {
        let mut best: Vec<usize> = Vec::new();
        for &r in &self.roots {
            let p = self.longest_from(r, &mut Vec::new());
            if p.len() > best.len() {
                best = p;
            }
        }
        let mut s: Vec<String> = best.iter().map(|&i| findings[i].label()).collect();
        let more = self.members.len() - best.len();
        if self.roots.len() > 1 {
            s[0] = format!("{} (and {} more roots)", s[0], self.roots.len() - 1);
        }
        let mut line = s.join(" → ");
        if more > 0 {
            line.push_str(&format!(" (+{more} more)"));
        }
        line
    }

    fn longest_from(&self, i: usize, seen: &mut Vec<usize>) -> Vec<usize> {
        seen.push(i);
        let mut best = Vec::new();
        for l in self.links.iter().filter(|l| l.cause == i) {
            if seen.contains(&l.effect) {
                continue;
            }
            let p = self.longest_from(l.effect, seen);
            if p.len() > best.len() {
                best = p;
            }
        }
        seen.pop();
        let mut out = vec![i];
        out.extend(best);
        out
    }

    /// The one next step of the chain: its first root's (the first root that has one).
    pub fn next<'a>(&self, findings: &'a [Finding]) -> Option<&'a str> {
        self.roots.iter().find_map(|&r| findings[r].next.as_deref())
    }

    /// The nearest cause of `i` in this chain (the one highest up the stack) and the link to
    /// it: where the text output puts `i`.
    pub fn parent(&self, i: usize, findings: &[Finding]) -> Option<&Link> {
        self.links.iter().filter(|l| l.effect == i).max_by_key(|l| {
            (
                rules::layer(&findings[l.cause].signal),
                std::cmp::Reverse(l.cause),
            )
        })
    }
}
