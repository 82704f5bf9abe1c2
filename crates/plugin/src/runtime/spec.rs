//! `--print-spec`: the check's options as JSON, for the test that holds the deployment files to
//! the binary.

use super::*;

/// `--print-spec [ARGS…]` (hidden, first argument only): the check's options as JSON — names,
/// arity, value kind, defaults — for the test that holds the deployment files to the binary;
/// with ARGS, whether they parse (`"parse": {"ok": …, "error": …}`). Exit 0.
pub(super) fn print_spec<C: Check>(args: &[std::ffi::OsString]) -> String {
    let cmd = C::command();
    let mut options = Vec::new();
    for a in cmd.get_arguments() {
        if a.is_positional() {
            continue;
        }
        let takes_value = a.get_action().takes_values();
        let multiple = matches!(
            a.get_action(),
            clap::ArgAction::Append | clap::ArgAction::Count
        );
        let shorts: Vec<String> = a
            .get_short_and_visible_aliases()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.to_string())
            .collect();
        let longs: Vec<String> = a
            .get_long_and_visible_aliases()
            .unwrap_or_default()
            .into_iter()
            .map(str::to_string)
            .collect();
        let defaults: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let possible: Vec<String> = a
            .get_possible_values()
            .iter()
            .map(|p| p.get_name().to_string())
            .collect();
        let value_names: Vec<String> = a
            .get_value_names()
            .unwrap_or_default()
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        let kind = if !takes_value {
            match a.get_action() {
                clap::ArgAction::Count => "count",
                _ => "flag",
            }
        } else {
            value_kind(a, !possible.is_empty())
        };
        options.push(serde_json::json!({
            "id": a.get_id().as_str(),
            "long": longs,
            "short": shorts,
            "takes_value": takes_value,
            "multiple": multiple,
            "value_name": value_names.first(),
            "kind": kind,
            "default": defaults,
            "possible_values": possible,
            "allow_hyphen_values": a.is_allow_hyphen_values_set(),
            "hidden": a.is_hide_set(),
            "help_heading": a.get_help_heading(),
        }));
    }
    let mut spec = serde_json::json!({
        "binary": C::BINARY,
        "name": C::NAME,
        "options": options,
    });
    if args.len() > 2 {
        let mut rest = vec![args[0].clone()];
        rest.extend(args[2..].iter().cloned());
        spec["parse"] = match C::try_parse_from(rest) {
            Ok(_) => serde_json::json!({"ok": true}),
            Err(e) => {
                let text = e.render().to_string();
                let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                serde_json::json!({"ok": false, "error": first.trim_start_matches("error: ")})
            }
        };
    }
    format!("{spec}\n")
}

/// What kind of value an option takes, found by asking its own value parser about samples:
/// `duration_range`, `range`, `duration`, `integer`, `regex`, `enum` or `text`.
fn value_kind(a: &clap::Arg, has_possible: bool) -> &'static str {
    if has_possible {
        return "enum";
    }
    let probe = clap::Command::new("probe").no_binary_name(true).arg(
        clap::Arg::new("v")
            .long("v")
            .action(clap::ArgAction::Set)
            .allow_hyphen_values(true)
            .value_parser(a.get_value_parser().clone()),
    );
    let ok = |v: &str| {
        probe
            .clone()
            .try_get_matches_from([format!("--v={v}")])
            .is_ok()
    };
    if ok("5m:") && ok("@1:2") {
        "duration_range"
    } else if ok("-10:-2") && ok("@1:2") {
        "range"
    } else if ok("5m") && ok("90") && !ok("x") {
        "duration"
    } else if ok("5") && !ok("x") {
        "integer"
    } else if ok("a.b") && !ok("(") {
        "regex"
    } else {
        "text"
    }
}
