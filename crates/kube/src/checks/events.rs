//! Events of pods a check alerts on, looked up once per pod: the stuck-pod checks show the latest
//! event that explains a pod (a FailedMount, a failed teardown) without reading every event of
//! the cluster, and a failing lookup never changes their verdict.

use crate::client::Client;
use crate::types::Event;
use plugin::Ctx;
use std::collections::HashMap;

/// At most this many event lookups per run (one request each); the rest are skipped with a note.
pub const MAX_EVENT_LOOKUPS: usize = 20;

/// What the lookups found: per `namespace/name`, what `pick` chose from the pod's events; and
/// notes on what was not looked up or failed.
#[derive(Debug)]
pub struct PodEvents<T> {
    pub found: HashMap<String, T>,
    pub notes: Vec<String>,
}

/// For each pod of `pods` (`(namespace, name)`, the ones the check alerts on, in its order): the
/// pod's core events, reduced by `pick` (e.g. the latest FailedMount). `client` is `None` when the
/// pods came from `--pods-json` (then nothing is looked up, and a note says so when there was
/// something to look up). At most [`MAX_EVENT_LOOKUPS`] requests; the first failure ends the
/// lookups with a note. `which` names the pods in notes ("stuck", "wedged"). The client's request
/// log goes to `-vv`.
pub fn latest_per_pod<T>(
    client: Option<&Client>,
    pods: &[(String, String)],
    which: &str,
    ctx: &Ctx,
    pick: impl Fn(&[Event]) -> Option<T>,
) -> PodEvents<T> {
    let mut out = PodEvents {
        found: HashMap::new(),
        notes: Vec::new(),
    };
    let Some(client) = client else {
        if !pods.is_empty() {
            out.notes
                .push("events not looked up (pods read from --pods-json)".into());
        }
        return out;
    };
    for (i, (ns, name)) in pods.iter().enumerate() {
        if i >= MAX_EVENT_LOOKUPS {
            out.notes.push(format!(
                "events looked up for the first {MAX_EVENT_LOOKUPS} {which} pods only"
            ));
            break;
        }
        ctx.stage(format!("reading events of {ns}/{name}"));
        match client.events_for(ns, "Pod", name) {
            Ok(ev) => {
                if let Some(e) = pick(&ev) {
                    out.found.insert(format!("{ns}/{name}"), e);
                }
            }
            Err(e) => {
                out.notes.push(format!("events not read: {e}"));
                break;
            }
        }
    }
    out
}

/// The newest event among `events` that `keep` accepts (by [`Event::last_seen`]).
pub fn latest(events: &[Event], keep: impl Fn(&Event) -> bool) -> Option<&Event> {
    events
        .iter()
        .filter(|e| keep(e))
        .max_by_key(|e| e.last_seen())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_takes_the_newest_kept_event() {
        let ev = |reason: &str, t: &str| -> Event {
            serde_json::from_str(&format!(
                r#"{{"reason":"{reason}","message":"{reason} at {t}","lastTimestamp":"{t}"}}"#
            ))
            .unwrap()
        };
        let evs = [
            ev("FailedMount", "2026-07-12T10:00:00Z"),
            ev("FailedMount", "2026-07-12T11:00:00Z"),
            ev("Scheduled", "2026-07-12T11:30:00Z"),
        ];
        let got = latest(&evs, |e| e.reason == "FailedMount").unwrap();
        assert_eq!(got.message, "FailedMount at 2026-07-12T11:00:00Z");
        assert!(latest(&evs, |e| e.reason == "FailedKillPod").is_none());
    }

    #[test]
    fn without_a_client_nothing_is_looked_up_and_a_note_says_why() {
        let ctx = Ctx::for_test(std::time::Duration::from_secs(5));
        let pods = vec![("ns".to_string(), "p".to_string())];
        let r = latest_per_pod(None, &pods, "stuck", &ctx, |_| Some(()));
        assert!(r.found.is_empty());
        assert_eq!(
            r.notes,
            ["events not looked up (pods read from --pods-json)"]
        );
        let r = latest_per_pod(None, &[], "stuck", &ctx, |_| Some(()));
        assert!(r.notes.is_empty());
    }
}
