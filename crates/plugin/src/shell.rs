//! Text an operator pastes into a shell: hints such as `umount <path>` or `kubectl delete pod`.

/// Quote `s` for a POSIX shell: unchanged when it holds only characters no shell treats
/// specially, else in single quotes (a `'` inside written as `'\''`). Control characters, which
/// the output sanitiser would replace anyway, are left to it.
pub fn shell_quote(s: &str) -> String {
    // `~` expands only at the start of a word (or after `:`/`=` in an assignment, which an
    // argument is not): the kubelet's `kubernetes.io~csi` needs no quotes.
    let plain = !s.is_empty()
        && !s.starts_with('~')
        && !s.contains(":~")
        && !s.contains("=~")
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    '/' | '.' | '_' | '-' | ':' | '=' | '@' | '+' | ',' | '%' | '^' | '~'
                )
        });
    if plain {
        s.to_string()
    } else {
        // `|` and a backtick are written without themselves: `|` cannot cross the plugin
        // protocol (it would be printed `¦`) and a backtick delimits a command in a `next:`
        // line. `"$(printf '\174')"` is the same character to the shell.
        let mut out = String::from("'");
        for c in s.chars() {
            match c {
                '\'' => out.push_str(r"'\''"),
                '|' => out.push_str(r#"'"$(printf '\174')"'"#),
                '`' => out.push_str(r#"'"$(printf '\140')"'"#),
                c => out.push(c),
            }
        }
        out.push('\'');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::shell_quote;

    #[test]
    fn quotes_what_a_shell_would_read() {
        assert_eq!(
            shell_quote("/var/lib/kubelet/pods/3c2b/volumes/kubernetes.io~csi/pvc-1/mount"),
            "/var/lib/kubelet/pods/3c2b/volumes/kubernetes.io~csi/pvc-1/mount"
        );
        assert_eq!(shell_quote("~root"), "'~root'");
        assert_eq!(shell_quote("a:~b"), "'a:~b'");
        assert_eq!(shell_quote("/mnt/with space/x"), "'/mnt/with space/x'");
        assert_eq!(
            shell_quote("/var/lib/kubelet/pods/3c2b/mount"),
            "/var/lib/kubelet/pods/3c2b/mount"
        );
        assert_eq!(shell_quote("media"), "media");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("x'; rm -rf /; '"), r"'x'\''; rm -rf /; '\'''");
        assert_eq!(shell_quote("$(reboot)"), "'$(reboot)'");
        assert_eq!(shell_quote("a\"b`c"), r#"'a"b'"$(printf '\140')"'c'"#);
        assert_eq!(shell_quote("a|b"), r#"'a'"$(printf '\174')"'b'"#);
    }
}
