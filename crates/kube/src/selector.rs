//! Label selectors (`app=x,tier!=db,env in (a,b),!legacy`), parsed and matched locally so that
//! `--pods-json` input is filtered exactly as the API server would filter it.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
enum Term {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Selector {
    terms: Vec<Term>,
    text: String,
}

fn split_terms(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(v: &str) -> bool {
    v.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Selector {
    pub fn parse(s: &str) -> Result<Selector, String> {
        let mut terms = Vec::new();
        let bad =
            |t: &str, why: &str| format!("invalid label selector '{s}': '{}' {why}", t.trim());
        for t in split_terms(s) {
            let t = t.trim();
            if t.is_empty() {
                continue;
            }
            let set = |rest: &str| -> Option<Vec<String>> {
                let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
                let vals: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
                vals.iter().all(|v| valid_value(v)).then_some(vals)
            };
            let term = if let Some(k) = t.strip_prefix('!') {
                Term::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = t.split_once("!=") {
                Term::Ne(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                Term::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = t.split_once(" notin ") {
                Term::NotIn(
                    k.trim().into(),
                    set(rest).ok_or_else(|| bad(t, "has a bad value set"))?,
                )
            } else if let Some((k, rest)) = t.split_once(" in ") {
                Term::In(
                    k.trim().into(),
                    set(rest).ok_or_else(|| bad(t, "has a bad value set"))?,
                )
            } else {
                Term::Exists(t.to_string())
            };
            let (k, v) = match &term {
                Term::Eq(k, v) | Term::Ne(k, v) => (k, Some(v)),
                Term::In(k, _) | Term::NotIn(k, _) | Term::Exists(k) | Term::NotExists(k) => {
                    (k, None)
                }
            };
            if !valid_key(k) {
                return Err(bad(t, "has an invalid key"));
            }
            if v.is_some_and(|v| !valid_value(v)) {
                return Err(bad(t, "has an invalid value"));
            }
            terms.push(term);
        }
        Ok(Selector {
            terms,
            text: s.trim().to_string(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The selector as given (what is sent as `labelSelector`).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.terms.iter().all(|t| match t {
            Term::Eq(k, v) => labels.get(k) == Some(v),
            Term::Ne(k, v) => labels.get(k) != Some(v),
            Term::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Term::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Term::Exists(k) => labels.contains_key(k),
            Term::NotExists(k) => !labels.contains_key(k),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn all_operators() {
        let labels = l(&[("openebs.io/component", "jiva-replica"), ("app", "x")]);
        for (s, want) in [
            ("", true),
            ("openebs.io/component=jiva-replica", true),
            ("openebs.io/component==jiva-replica", true),
            ("openebs.io/component!=jiva-replica", false),
            ("app in (x, y)", true),
            ("app notin (x,y)", false),
            ("missing notin (x)", true),
            ("app", true),
            ("!app", false),
            ("!missing,app=x", true),
            ("app=x,openebs.io/component=jiva-controller", false),
        ] {
            assert_eq!(Selector::parse(s).unwrap().matches(&labels), want, "{s}");
        }
    }

    #[test]
    fn rejects_garbage() {
        for s in ["a=b c", "a in x", "=x", "a in (b c)"] {
            assert!(Selector::parse(s).is_err(), "{s}");
        }
    }
}
