//! [`PodFilter`]: which pods a check wants, the same for the API and for `--pods-json`.

use crate::selector::Selector;
use crate::types::Pod;

/// Which pods a check wants: applied as API selectors and again locally (so `--pods-json` input
/// is filtered exactly the same way).
#[derive(Debug, Clone, Default)]
pub struct PodFilter {
    /// Namespaces to read (empty: all).
    pub namespaces: Vec<String>,
    /// Only pods bound to this node (`spec.nodeName`).
    pub node: Option<String>,
    /// Only pods whose labels match.
    pub labels: Option<Selector>,
}

impl PodFilter {
    pub fn matches(&self, p: &Pod) -> bool {
        (self.namespaces.is_empty() || self.namespaces.contains(&p.metadata.namespace))
            && self
                .node
                .as_ref()
                .is_none_or(|n| p.spec.node_name.as_deref() == Some(n.as_str()))
            && self
                .labels
                .as_ref()
                .is_none_or(|s| s.matches(&p.metadata.labels))
    }

    /// Human description: "on node k8s03 in namespaces a, b".
    pub fn describe(&self) -> String {
        let mut s = match &self.node {
            Some(n) => format!("on node {n}"),
            None => "on all nodes".to_string(),
        };
        if !self.namespaces.is_empty() {
            s.push_str(&format!(
                " in namespace{} {}",
                if self.namespaces.len() > 1 { "s" } else { "" },
                self.namespaces.join(", ")
            ));
        }
        if let Some(l) = self.labels.as_ref().filter(|l| !l.is_empty()) {
            s.push_str(&format!(" matching {}", l.as_str()));
        }
        s
    }
}
