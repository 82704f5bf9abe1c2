//! Long output through NRPE v2 packets (issue 33): the real NRPE daemon running the shipped
//! nrpe.d commands in the node's mount namespace, the real `check_nrpe`. An NRPE v2 packet
//! (`check_nrpe -2`: an old client or server) carries 1023 bytes of text; with 40 pods stuck on
//! the node the answer is longer. What arrives over v2 must be the status line with its perfdata,
//! whole finding lines only, and a line saying how many findings follow and how to see them;
//! over v3/v4 packets (check_nrpe's default) every finding still arrives.

use e2e::engines::{free_port, start_nrpe, Node, NODE};
use e2e::{need_root, need_tool, Cmd};

const CHECK_NRPE: &str = "/usr/lib/nagios/plugins/check_nrpe";
const STUCK: usize = 40;

/// A line with its durations and numbers as `#` ("scheduled 11m1s ago" and "11m ago" alike):
/// the two answers are a second apart.
fn norm(l: &str) -> String {
    let mut out = String::new();
    let mut in_num = false;
    for c in l.chars() {
        if c.is_ascii_digit() || (in_num && (c == 'm' || c == 's')) {
            if !in_num {
                out.push('#');
            }
            in_num = true;
        } else {
            in_num = false;
            out.push(c);
        }
    }
    out
}

#[test]
fn nrpe_v2_carries_whole_lines_and_says_how_to_see_the_rest() {
    let t = "nrpe_v2_carries_whole_lines_and_says_how_to_see_the_rest";
    if !need_root(t)
        || !need_tool(t, "/usr/sbin/nrpe")
        || !need_tool(t, CHECK_NRPE)
        || !need_tool(t, "bindfs")
    {
        return;
    }
    let _machine = e2e::exclusive();
    let node = Node::new();
    let port = free_port();
    let mut commands = node.nrpe_commands();
    // The shipped command, with room for every finding (the default --max-output, 4096 bytes,
    // would end the answer with "... and N more" before the 40th): what is tested here is the
    // transport and the layout of the first KiB, not that cap.
    commands
        .get_mut("check_stuck_scheduled")
        .expect("nrpe.d has check_stuck_scheduled")
        .push_str(" --max-output 65536");
    let nrpe = start_nrpe(&node, &commands, port, None);
    let pods: Vec<String> = (0..STUCK)
        .map(|i| format!("ws-{i:04}-0123456789abcdef"))
        .collect();
    node.api.add(
        "pods",
        pods.iter().map(|p| {
            e2e::apiserver::fixtures::scheduled_no_status("llmsafespaces", p, NODE, 11 * 60)
        }),
    );
    let ask = |v2: bool| {
        let mut args = vec![];
        if v2 {
            args.push("-2".to_string());
        }
        args.extend(["-H", "127.0.0.1", "-p"].map(String::from));
        args.push(port.to_string());
        args.extend(["-c".to_string(), "check_stuck_scheduled".into()]);
        Cmd::new(CHECK_NRPE).args(args.iter()).run()
    };
    let finding = |l: &str, p: &str| l.starts_with("[CRITICAL] ") && l.contains(p);

    // v3/v4 packets: the whole answer, every stuck pod named.
    let full = ask(false);
    println!("check_nrpe answered ({} bytes)", full.stdout.len());
    assert_eq!(full.code, 2, "{full:?}");
    assert!(
        full.stdout.len() > 1023,
        "not long enough to test: {full:?}"
    );
    for p in &pods {
        assert!(
            full.stdout.lines().any(|l| finding(l, p)),
            "{p} missing over v3/v4: {full:?}"
        );
    }
    let finding_lines: Vec<String> = full
        .stdout
        .lines()
        .filter(|l| l.starts_with('[') || l.starts_with("    "))
        .map(norm)
        .collect();

    // v2 packets: the first 1023 bytes, whole lines.
    let v2 = ask(true);
    println!(
        "check_nrpe -2 answered ({} bytes):\n{}",
        v2.stdout.len(),
        v2.stdout
    );
    assert_eq!(v2.code, 2, "{v2:?}");
    assert!(v2.stdout.len() <= 1024, "{v2:?}");
    // check_nrpe ends what it received with a newline of its own; nothing else follows.
    assert!(!v2.stdout.ends_with("\n\n"), "an empty last line: {v2:?}");
    let lines: Vec<&str> = v2.stdout.lines().collect();
    let first = lines[0];
    assert!(
        first.starts_with(&format!("STUCK_SCHEDULED CRITICAL - {STUCK} ")) && first.contains(" | "),
        "the status line and perfdata should survive v2: {v2:?}"
    );
    assert_eq!(
        norm(first),
        norm(full.stdout.lines().next().unwrap()),
        "the same status line"
    );
    // Every line between the status line and the marker is a whole line of the full answer.
    let marker = lines
        .iter()
        .position(|l| l.starts_with("... "))
        .unwrap_or_else(|| panic!("no line says how to see the rest: {v2:?}"));
    assert_eq!(
        marker,
        lines.len() - 1,
        "the marker ends what v2 carries: {v2:?}"
    );
    let body = &lines[1..marker];
    let shown = body.iter().filter(|l| l.starts_with("[CRITICAL] ")).count();
    assert!(shown >= 1, "no finding survived v2: {v2:?}");
    for l in body {
        assert!(
            finding_lines.contains(&norm(l)),
            "a line cut or not of the full answer: {l:?} in {v2:?}"
        );
    }
    // The last finding shown has its detail lines, as in the full answer.
    let last_shown = body.iter().rposition(|l| l.starts_with('[')).unwrap();
    let at = finding_lines
        .iter()
        .position(|l| *l == norm(body[last_shown]))
        .unwrap();
    let details = finding_lines[at + 1..]
        .iter()
        .take_while(|l| l.starts_with("    "))
        .count();
    // The marker: how many follow, and how to see them all. When not even one finding fits
    // whole (a long step), the first one is cut between whole lines and the marker says so.
    let m = lines[marker].trim_end();
    let cut = m.starts_with("... the rest of this finding and ");
    if cut {
        assert_eq!(shown, 1, "{v2:?}");
        assert!(
            body.len() - last_shown - 1 < details,
            "a cut finding shown whole: {v2:?}"
        );
        // Its other lines follow the marker, for the clients that receive it all.
        let all: Vec<&str> = full.stdout.lines().collect();
        let i = all
            .iter()
            .position(|l| l.trim_end() == m)
            .unwrap_or_else(|| panic!("the marker is not in the v3 answer: {full:?}"));
        assert!(all[i + 1].starts_with("    "), "{full:?}");
    } else {
        assert_eq!(
            body.len() - last_shown - 1,
            details,
            "the last finding shown lost detail lines: {v2:?}"
        );
    }
    let count = if cut {
        format!("... the rest of this finding and {} more ", STUCK - shown)
    } else {
        format!("... {} more ", STUCK - shown)
    };
    assert!(
        m.starts_with(&count),
        "{m:?} should count the {} findings that follow",
        STUCK - shown
    );
    assert!(
        m.contains("check_nrpe -2") && m.contains("without -2"),
        "{m:?}"
    );
    assert!(
        m.contains("run check_stuck_scheduled on the node") && m.contains("--format json"),
        "{m:?}"
    );
    assert!(!m.contains('|'), "{m:?}");
    drop(nrpe);
}
