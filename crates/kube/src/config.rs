//! Finding and reading the credentials: kubeconfig files (flag, `$KUBECONFIG`, the node's own
//! microk8s/k3s/kubeadm files, `~/.kube/config`) and the in-cluster service account.
//!
//! Lookup order (first hit wins), as DESIGN.md "Talking to Kubernetes" says:
//! 1. `--kubeconfig FILE` (must exist);
//! 2. `$KUBECONFIG`: a colon-separated list — the **first existing file** is used (kubectl merges
//!    the files; the checks do not, which only matters for contexts split over several files);
//! 3. the in-cluster service account (`$KUBERNETES_SERVICE_HOST` set and its token readable);
//! 4. the node's own files, the first readable one of: microk8s
//!    `/var/snap/microk8s/current/credentials/client.config`, k3s `/etc/rancher/k3s/k3s.yaml`,
//!    kubeadm `/etc/kubernetes/kubelet.conf` and `/etc/kubernetes/admin.conf`;
//! 5. `~/.kube/config`.

use plugin::Unknown;
use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// How the "nothing found" error of [`Lookup::resolve`] starts (callers that can do without the
/// API, such as the name resolver, tell it apart from a broken configuration by it).
pub const NO_CREDENTIALS: &str = "no Kubernetes credentials found";

/// The in-cluster service account directory.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The node's own kubeconfig files, in lookup order.
pub const NODE_FILES: &[(&str, &str)] = &[
    (
        "microk8s",
        "/var/snap/microk8s/current/credentials/client.config",
    ),
    ("k3s", "/etc/rancher/k3s/k3s.yaml"),
    ("kubeadm kubelet", "/etc/kubernetes/kubelet.conf"),
    ("kubeadm admin", "/etc/kubernetes/admin.conf"),
];

/// Where the configuration came from (shown with `-vv`).
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Flag(PathBuf),
    Env(PathBuf),
    InCluster,
    Node(&'static str, PathBuf),
    Home(PathBuf),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag(p) => write!(f, "--kubeconfig {}", p.display()),
            Source::Env(p) => write!(f, "$KUBECONFIG {}", p.display()),
            Source::InCluster => write!(f, "in-cluster service account {SERVICE_ACCOUNT_DIR}"),
            Source::Node(kind, p) => write!(f, "{kind} node file {}", p.display()),
            Source::Home(p) => write!(f, "~/.kube/config {}", p.display()),
        }
    }
}

/// A secret value: never printed, not even by `{:?}`.
#[derive(Clone, PartialEq)]
pub struct Secret(pub Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// How the client authenticates.
#[derive(Debug, Clone, PartialEq)]
pub enum Auth {
    /// No credentials (anonymous).
    None,
    /// A bearer token given inline in the kubeconfig.
    Token(Secret),
    /// A bearer token read from a file when the client is built (service-account tokens rotate).
    TokenFile(PathBuf),
    /// A client certificate chain and key, PEM.
    ClientCert {
        cert: Vec<u8>,
        key: Secret,
        from: String,
    },
}

impl Auth {
    /// How this authenticates, for `-vv` (no secret).
    pub fn describe(&self) -> String {
        match self {
            Auth::None => "none (anonymous)".into(),
            Auth::Token(_) => "bearer token (inline)".into(),
            Auth::TokenFile(p) => format!("bearer token from {}", p.display()),
            Auth::ClientCert { from, .. } => format!("client certificate ({from})"),
        }
    }
}

/// Everything needed to talk to one API server.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub source: Source,
    /// The context used (kubeconfig only).
    pub context: Option<String>,
    /// Base URL, e.g. `https://127.0.0.1:16443` (no trailing slash).
    pub server: String,
    /// CA bundle (PEM) that signs the server certificate; `None`: no CA given.
    pub ca_pem: Option<Vec<u8>>,
    /// Where the CA came from (for messages).
    pub ca_from: String,
    /// `insecure-skip-tls-verify: true` in the kubeconfig (never set otherwise).
    pub insecure: bool,
    /// The cluster's `tls-server-name`: the name sent as SNI and verified in the server's
    /// certificate instead of the URL's host (a server reached by IP or through a tunnel).
    pub tls_server_name: Option<String>,
    /// The cluster's `proxy-url`: an HTTP CONNECT proxy (`http://[user:pass@]host:port`) the
    /// requests go through. May carry credentials: shown only through `client::redact_url`.
    pub proxy_url: Option<String>,
    pub auth: Auth,
    /// `--allow-insecure-http`: a plain `http://` server is allowed (no credential is ever sent
    /// to one). Never set by a kubeconfig.
    pub allow_http: bool,
    /// `--allow-insecure-tls`: the kubeconfig's `insecure-skip-tls-verify: true` is honoured
    /// (refused otherwise). Never set by a kubeconfig.
    pub allow_insecure_tls: bool,
}

// ------------------------------------------------------------------ kubeconfig file format

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
struct KubeConfig {
    current_context: Option<String>,
    clusters: Option<Vec<Named<Cluster>>>,
    contexts: Option<Vec<Named<Context>>>,
    users: Option<Vec<Named<User>>>,
}

#[derive(Debug, Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "context", alias = "user")]
    #[serde(default = "Option::default")]
    value: Option<T>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
struct Cluster {
    server: Option<String>,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    insecure_skip_tls_verify: Option<bool>,
    tls_server_name: Option<String>,
    proxy_url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Context {
    cluster: Option<String>,
    user: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
struct User {
    token: Option<String>,
    /// The kubeconfig spells this one in camelCase.
    #[serde(rename = "tokenFile", alias = "token-file")]
    token_file: Option<String>,
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    exec: Option<serde_yaml_ng::Value>,
    auth_provider: Option<serde_yaml_ng::Value>,
    username: Option<String>,
}

/// Standard base64 (with or without padding, whitespace ignored), as kubeconfig `*-data` fields use.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' | b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return None,
        };
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Every file the lookup reads (`--kubeconfig`, and the CA, certificate and key files a kubeconfig
/// names) is one the caller may choose: read with the caller's privilege ([`plugin::privilege`]).
fn read(path: &Path, what: &str) -> Result<Vec<u8>, Unknown> {
    plugin::privilege::read(path).map_err(|e| {
        Unknown(format!(
            "cannot read {what} {}: {}",
            path.display(),
            plugin::errtext(&e)
        ))
    })
}

/// Resolve a kubeconfig path field relative to the kubeconfig's directory.
fn rel(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.parent().unwrap_or(Path::new("/")).join(p)
    }
}

fn data(field: &str, v: &str, src: &Path) -> Result<Vec<u8>, Unknown> {
    base64_decode(v)
        .ok_or_else(|| Unknown(format!("{field} in {} is not valid base64", src.display())))
}

/// Parse kubeconfig text (read from `path`) and select a context: `context` if given, else
/// `current-context`, else the only context there is.
pub fn from_kubeconfig(
    text: &[u8],
    path: &Path,
    source: Source,
    context: Option<&str>,
) -> Result<Config, Unknown> {
    // The parser's message can quote the offending value, which may be a token or a key
    // (fuzzing found one, see fuzz/FINDINGS.md): say only where the file is broken.
    let kc: KubeConfig = serde_yaml_ng::from_slice(text).map_err(|e| {
        let at = e
            .location()
            .map(|l| format!(" at line {} column {}", l.line(), l.column()))
            .unwrap_or_default();
        Unknown(format!(
            "cannot parse kubeconfig {}: not a valid kubeconfig{at} (the parser's message is withheld: it may quote a secret)",
            path.display()
        ))
    })?;
    let contexts = kc.contexts.unwrap_or_default();
    let names = || {
        let n: Vec<&str> = contexts.iter().map(|c| c.name.as_str()).collect();
        if n.is_empty() {
            "none".to_string()
        } else {
            n.join(", ")
        }
    };
    let ctx_name = match (
        context,
        kc.current_context.as_deref().filter(|s| !s.is_empty()),
    ) {
        (Some(c), _) => c.to_string(),
        (None, Some(c)) => c.to_string(),
        (None, None) if contexts.len() == 1 => contexts[0].name.clone(),
        (None, None) => {
            return Err(Unknown(format!(
                "kubeconfig {} has no current-context; pick one with --context (contexts: {})",
                path.display(),
                names()
            )))
        }
    };
    let ctx = contexts
        .iter()
        .find(|c| c.name == ctx_name)
        .ok_or_else(|| {
            Unknown(format!(
                "context '{ctx_name}' not found in kubeconfig {} (contexts: {})",
                path.display(),
                names()
            ))
        })?;
    let c = ctx.value.as_ref();
    let cluster_name = c.and_then(|c| c.cluster.clone()).unwrap_or_default();
    let user_name = c.and_then(|c| c.user.clone()).unwrap_or_default();
    let clusters = kc.clusters.unwrap_or_default();
    let cluster = clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.value.as_ref())
        .ok_or_else(|| {
            Unknown(format!(
                "context '{ctx_name}' in kubeconfig {} names cluster '{cluster_name}', which is not defined",
                path.display()
            ))
        })?;
    let server = cluster
        .server
        .as_deref()
        .map(|s| s.trim().trim_end_matches('/').to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            Unknown(format!(
                "cluster '{cluster_name}' in kubeconfig {} has no server",
                path.display()
            ))
        })?;
    let (ca_pem, ca_from) = if let Some(d) = &cluster.certificate_authority_data {
        (
            Some(data("certificate-authority-data", d, path)?),
            format!("certificate-authority-data in {}", path.display()),
        )
    } else if let Some(f) = &cluster.certificate_authority {
        let p = rel(path, f);
        (
            Some(read(&p, "certificate-authority")?),
            p.display().to_string(),
        )
    } else {
        (None, "no certificate-authority".to_string())
    };
    let users = kc.users.unwrap_or_default();
    let user = if user_name.is_empty() {
        None
    } else {
        Some(
            users
                .iter()
                .find(|u| u.name == user_name)
                .ok_or_else(|| {
                    Unknown(format!(
                        "context '{ctx_name}' in kubeconfig {} names user '{user_name}', which is not defined",
                        path.display()
                    ))
                })?
                .value
                .as_ref(),
        )
        .flatten()
    };
    let auth = match user {
        None => Auth::None,
        Some(u) => user_auth(u, &user_name, path)?,
    };
    Ok(Config {
        source,
        context: Some(ctx_name),
        server,
        ca_pem,
        ca_from,
        insecure: cluster.insecure_skip_tls_verify.unwrap_or(false),
        tls_server_name: cluster
            .tls_server_name
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        proxy_url: cluster
            .proxy_url
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        auth,
        allow_http: false,
        allow_insecure_tls: false,
    })
}

fn user_auth(u: &User, name: &str, path: &Path) -> Result<Auth, Unknown> {
    if u.exec.is_some() || u.auth_provider.is_some() {
        let kind = if u.exec.is_some() {
            "an exec credential plugin"
        } else {
            "an auth-provider plugin"
        };
        return Err(Unknown(format!(
            "user '{name}' in kubeconfig {} uses {kind}, which the checks do not support (they run no \
             helper programs): give them a kubeconfig with a token, token file or client certificate",
            path.display()
        )));
    }
    let cert = match (&u.client_certificate_data, &u.client_certificate) {
        (Some(d), _) => Some((
            data("client-certificate-data", d, path)?,
            "inline".to_string(),
        )),
        (None, Some(f)) => {
            let p = rel(path, f);
            Some((read(&p, "client-certificate")?, p.display().to_string()))
        }
        _ => None,
    };
    let key = match (&u.client_key_data, &u.client_key) {
        (Some(d), _) => Some((data("client-key-data", d, path)?, "inline".to_string())),
        (None, Some(f)) => {
            let p = rel(path, f);
            Some((read(&p, "client-key")?, p.display().to_string()))
        }
        _ => None,
    };
    match (cert, key) {
        (Some((cert, cf)), Some((key, kf))) => {
            let from = if cf == kf {
                format!("certificate and key {cf}")
            } else {
                format!("certificate {cf}, key {kf}")
            };
            return Ok(Auth::ClientCert {
                cert,
                key: Secret(key),
                from,
            });
        }
        (Some(_), None) | (None, Some(_)) => {
            return Err(Unknown(format!(
                "user '{name}' in kubeconfig {} has a client certificate or key but not both",
                path.display()
            )))
        }
        (None, None) => {}
    }
    if let Some(t) = u.token.as_deref().filter(|t| !t.trim().is_empty()) {
        return Ok(Auth::Token(Secret(t.trim().as_bytes().to_vec())));
    }
    if let Some(f) = &u.token_file {
        return Ok(Auth::TokenFile(rel(path, f)));
    }
    if u.username.is_some() {
        return Err(Unknown(format!(
            "user '{name}' in kubeconfig {} uses basic auth (username/password), which Kubernetes \
             no longer supports: use a token or client certificate",
            path.display()
        )));
    }
    Ok(Auth::None)
}

/// The environment the lookup reads; `from_env` for real runs, fields set by hand in tests.
#[derive(Debug, Clone, Default)]
pub struct Lookup {
    /// `--kubeconfig`.
    pub flag: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
    /// `$KUBECONFIG`.
    pub env_kubeconfig: Option<String>,
    /// `$KUBERNETES_SERVICE_HOST` and `$KUBERNETES_SERVICE_PORT`.
    pub service_host: Option<String>,
    pub service_port: Option<String>,
    /// The service-account directory (token, ca.crt).
    pub sa_dir: PathBuf,
    /// Candidate node files, in order.
    pub node_files: Vec<(&'static str, PathBuf)>,
    /// `$HOME`.
    pub home: Option<PathBuf>,
    /// The process runs with more privilege than its caller (`AT_SECURE`, or root through sudo):
    /// only `--kubeconfig`
    /// (read as the caller) and the in-cluster service account are used; `$KUBECONFIG`, `$HOME`
    /// and the node's own credential files (admin.conf, kubelet.conf, k3s.yaml, microk8s
    /// client.config) are never looked at, so the privilege cannot lend the node's credentials.
    pub privileged: bool,
    /// The privilege is root's through sudo (`$SUDO_UID` set), not this file's capabilities or
    /// set-id bits: the message then says so and what to pass.
    pub via_sudo: bool,
}

impl Lookup {
    pub fn from_env(flag: Option<PathBuf>, context: Option<String>) -> Lookup {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let via_sudo = plugin::privilege::via_sudo();
        let privileged = plugin::privilege::secure() || via_sudo;
        if privileged {
            return Lookup {
                flag,
                context,
                service_host: var("KUBERNETES_SERVICE_HOST"),
                service_port: var("KUBERNETES_SERVICE_PORT"),
                sa_dir: PathBuf::from(SERVICE_ACCOUNT_DIR),
                privileged,
                via_sudo,
                ..Lookup::default()
            };
        }
        Lookup {
            flag,
            context,
            env_kubeconfig: var("KUBECONFIG"),
            service_host: var("KUBERNETES_SERVICE_HOST"),
            service_port: var("KUBERNETES_SERVICE_PORT"),
            sa_dir: PathBuf::from(SERVICE_ACCOUNT_DIR),
            node_files: NODE_FILES
                .iter()
                .map(|(k, p)| (*k, PathBuf::from(p)))
                .collect(),
            home: var("HOME").map(PathBuf::from),
            privileged,
            via_sudo: false,
        }
    }

    /// Find and read the configuration. `notes` receives what was tried (for `-vv`).
    pub fn resolve(&self, notes: &mut Vec<String>) -> Result<Config, Unknown> {
        let ctx = self.context.as_deref();
        // What this call tried, for the final message (the privileged note is said there once,
        // in words of its own, not repeated from the -vv notes).
        let mut first_tried = notes.len();
        if self.privileged {
            notes.push(
                "privileged run: only --kubeconfig (read as the caller) and the in-cluster \
                 service account are used, never $KUBECONFIG, ~/.kube/config or the node's \
                 credential files"
                    .into(),
            );
            first_tried = notes.len();
        }
        if let Some(p) = &self.flag {
            let text = read(p, "kubeconfig")?;
            return from_kubeconfig(&text, p, Source::Flag(p.clone()), ctx);
        }
        if let Some(list) = self.env_kubeconfig.as_ref().filter(|_| !self.privileged) {
            let found = list
                .split(':')
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
                .find(|p| p.is_file());
            match found {
                Some(p) => {
                    let text = read(&p, "kubeconfig ($KUBECONFIG)")?;
                    return from_kubeconfig(&text, &p, Source::Env(p.clone()), ctx);
                }
                None => notes.push(format!("$KUBECONFIG={list}: no existing file")),
            }
        }
        if let Some(host) = &self.service_host {
            let token = self.sa_dir.join("token");
            if token.is_file() {
                if self.context.is_some() {
                    notes.push("--context ignored: in-cluster service account".into());
                }
                let port = self.service_port.as_deref().unwrap_or("443");
                let host = if host.contains(':') && !host.starts_with('[') {
                    format!("[{host}]")
                } else {
                    host.clone()
                };
                let ca = self.sa_dir.join("ca.crt");
                return Ok(Config {
                    source: Source::InCluster,
                    context: None,
                    server: format!("https://{host}:{port}"),
                    ca_pem: Some(read(&ca, "service account CA")?),
                    ca_from: ca.display().to_string(),
                    insecure: false,
                    tls_server_name: None,
                    proxy_url: None,
                    auth: Auth::TokenFile(token),
                    allow_http: false,
                    allow_insecure_tls: false,
                });
            }
            notes.push(format!(
                "$KUBERNETES_SERVICE_HOST set but {} missing",
                token.display()
            ));
        }
        for (kind, p) in self.node_files.iter().filter(|_| !self.privileged) {
            match plugin::privilege::read(p) {
                Ok(text) => return from_kubeconfig(&text, p, Source::Node(kind, p.clone()), ctx),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => notes.push(format!(
                    "{kind} node file {}: {}",
                    p.display(),
                    plugin::errtext(&e)
                )),
            }
        }
        if let Some(home) = self.home.as_ref().filter(|_| !self.privileged) {
            let p = home.join(".kube/config");
            if p.is_file() {
                let text = read(&p, "kubeconfig")?;
                return from_kubeconfig(&text, &p, Source::Home(p.clone()), ctx);
            }
        }
        let tried_notes = notes.get(first_tried..).unwrap_or_default();
        let tried = if tried_notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", tried_notes.join("; "))
        };
        if self.privileged {
            let why = if self.via_sudo {
                "run through sudo ($SUDO_UID is set), the check does not look at $KUBECONFIG, \
                 ~/.kube/config or the node's credential files, so that root's privilege never \
                 lends them to the calling user"
            } else {
                "this copy runs with more privilege than its caller (file capabilities or set-id \
                 bits), so it does not look at $KUBECONFIG, ~/.kube/config or the node's \
                 credential files, which that privilege could otherwise lend to the caller"
            };
            return Err(Unknown(format!(
                "{NO_CREDENTIALS}: {why}; give --kubeconfig FILE, readable by the calling user \
                 (or --pods-json FILE), or run it from the in-cluster service account{tried}"
            )));
        }
        Err(Unknown(format!(
            "{NO_CREDENTIALS}: give --kubeconfig FILE (or --pods-json FILE); looked at \
             $KUBECONFIG, the in-cluster service account, {} and ~/.kube/config{tried}",
            self.node_files
                .iter()
                .map(|(_, p)| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn parse_errors_never_quote_the_file() {
        // Found by fuzzing: serde's message quoted the line holding the token.
        let text =
            b"apiVersion: v1\nusers:\n- name: admin\n  user:\n    token* s3cr3t-token-value\n";
        let p = Path::new("/etc/kubeconfig");
        let e = from_kubeconfig(text, p, Source::Flag(p.to_path_buf()), None).unwrap_err();
        assert!(!e.0.contains("s3cr3t"), "{}", e.0);
        assert!(
            e.0.contains("cannot parse kubeconfig /etc/kubeconfig"),
            "{}",
            e.0
        );
    }

    use super::*;

    fn b64(s: &str) -> String {
        crate::client::base64_encode(s.as_bytes())
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kube-cfg-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn parse(text: &str, ctx: Option<&str>) -> Result<Config, Unknown> {
        let p = Path::new("/etc/test/config");
        from_kubeconfig(text.as_bytes(), p, Source::Flag(p.into()), ctx)
    }

    #[test]
    fn base64_round_trip() {
        for s in ["", "a", "ab", "abc", "-----BEGIN CERTIFICATE-----\nMIIB\n"] {
            assert_eq!(base64_decode(&b64(s)).unwrap(), s.as_bytes());
        }
        assert_eq!(base64_decode("YWJj\nZA==").unwrap(), b"abcd");
        assert!(base64_decode("not*base64").is_none());
    }

    #[test]
    fn microk8s_client_config_with_token() {
        let text = format!(
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: https://127.0.0.1:16443\n  name: microk8s-cluster\ncontexts:\n- context:\n    cluster: microk8s-cluster\n    user: admin\n  name: microk8s\ncurrent-context: microk8s\nkind: Config\npreferences: {{}}\nusers:\n- name: admin\n  user:\n    token: c2VjcmV0LXRva2Vu\n",
            b64("CA PEM")
        );
        let c = parse(&text, None).unwrap();
        assert_eq!(c.server, "https://127.0.0.1:16443");
        assert_eq!(c.context.as_deref(), Some("microk8s"));
        assert_eq!(c.ca_pem.as_deref(), Some(&b"CA PEM"[..]));
        assert_eq!(c.auth, Auth::Token(Secret(b"c2VjcmV0LXRva2Vu".to_vec())));
        assert!(!c.insecure);
        // The secret never shows, not even in Debug.
        assert!(!format!("{c:?}").contains("c2VjcmV0"));
        assert_eq!(c.auth.describe(), "bearer token (inline)");
    }

    #[test]
    fn k3s_yaml_with_inline_client_cert() {
        let text = format!(
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: https://127.0.0.1:6443/\n  name: default\ncontexts:\n- context:\n    cluster: default\n    user: default\n  name: default\ncurrent-context: default\nkind: Config\nusers:\n- name: default\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
            b64("CA"),
            b64("CERT"),
            b64("KEY")
        );
        let c = parse(&text, None).unwrap();
        assert_eq!(c.server, "https://127.0.0.1:6443", "trailing slash dropped");
        match &c.auth {
            Auth::ClientCert { cert, key, from } => {
                assert_eq!(cert, b"CERT");
                assert_eq!(key.0, b"KEY");
                assert_eq!(from, "certificate and key inline");
            }
            a => panic!("{a:?}"),
        }
    }

    #[test]
    fn kubeadm_kubelet_conf_with_cert_files_and_relative_paths() {
        let d = tmp("kubeadm");
        std::fs::create_dir_all(d.join("pki")).unwrap();
        std::fs::write(d.join("pki/kubelet-client-current.pem"), "CERT+KEY").unwrap();
        std::fs::write(d.join("ca.crt"), "CA").unwrap();
        let text = format!(
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority: ca.crt\n    server: https://10.0.0.10:6443\n  name: kubernetes\ncontexts:\n- context:\n    cluster: kubernetes\n    user: system:node:k8s01\n  name: system:node:k8s01@kubernetes\ncurrent-context: system:node:k8s01@kubernetes\nkind: Config\nusers:\n- name: system:node:k8s01\n  user:\n    client-certificate: {0}/pki/kubelet-client-current.pem\n    client-key: pki/kubelet-client-current.pem\n",
            d.display()
        );
        let p = d.join("kubelet.conf");
        std::fs::write(&p, &text).unwrap();
        let c = from_kubeconfig(
            text.as_bytes(),
            &p,
            Source::Node("kubeadm kubelet", p.clone()),
            None,
        )
        .unwrap();
        assert_eq!(c.ca_pem.as_deref(), Some(&b"CA"[..]));
        assert_eq!(c.ca_from, d.join("ca.crt").display().to_string());
        match &c.auth {
            Auth::ClientCert { cert, key, from } => {
                assert_eq!(cert, b"CERT+KEY");
                assert_eq!(key.0, b"CERT+KEY");
                assert!(from.contains("kubelet-client-current.pem"), "{from}");
            }
            a => panic!("{a:?}"),
        }
        // A missing file is named.
        std::fs::remove_file(d.join("ca.crt")).unwrap();
        let e = from_kubeconfig(text.as_bytes(), &p, Source::Flag(p.clone()), None).unwrap_err();
        assert!(e.0.contains("ca.crt") && e.0.contains("ENOENT"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn kubeadm_admin_conf_inline_data() {
        let text = format!(
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: https://k8s-api.lan:6443\n  name: kubernetes\ncontexts:\n- context:\n    cluster: kubernetes\n    user: kubernetes-admin\n  name: kubernetes-admin@kubernetes\ncurrent-context: kubernetes-admin@kubernetes\nkind: Config\npreferences: {{}}\nusers:\n- name: kubernetes-admin\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
            b64("CA"),
            b64("ADMIN CERT"),
            b64("ADMIN KEY")
        );
        let c = parse(&text, None).unwrap();
        assert_eq!(c.context.as_deref(), Some("kubernetes-admin@kubernetes"));
        assert_eq!(c.server, "https://k8s-api.lan:6443");
        assert_eq!(c.ca_from, "certificate-authority-data in /etc/test/config");
        match c.auth {
            Auth::ClientCert { cert, key, .. } => {
                assert_eq!(cert, b"ADMIN CERT");
                assert_eq!(key.0, b"ADMIN KEY");
            }
            a => panic!("{a:?}"),
        }
        let bad = text.replace(&b64("ADMIN KEY"), "not*base64");
        assert!(parse(&bad, None)
            .unwrap_err()
            .0
            .contains("client-key-data in /etc/test/config is not valid base64"));
    }

    const MULTI: &str = "apiVersion: v1\nclusters:\n- cluster:\n    server: https://prod:6443\n    certificate-authority-data: Q0E=\n  name: prod\n- cluster:\n    server: https://lab:6443\n    insecure-skip-tls-verify: true\n  name: lab\ncontexts:\n- context:\n    cluster: prod\n    user: admin\n  name: prod\n- context:\n    cluster: lab\n    user: lab\n  name: lab\ncurrent-context: prod\nusers:\n- name: admin\n  user:\n    tokenFile: /run/token\n- name: lab\n  user:\n    token: abc\n";

    #[test]
    fn multiple_contexts_and_context_flag() {
        let c = parse(MULTI, None).unwrap();
        assert_eq!(c.server, "https://prod:6443");
        assert_eq!(c.auth, Auth::TokenFile("/run/token".into()));
        assert!(!c.insecure);
        let c = parse(MULTI, Some("lab")).unwrap();
        assert_eq!(c.server, "https://lab:6443");
        assert!(c.insecure, "only because the kubeconfig says so");
        assert_eq!(c.ca_pem, None);
        let e = parse(MULTI, Some("nope")).unwrap_err();
        assert!(
            e.0.contains("context 'nope' not found") && e.0.contains("prod, lab"),
            "{e}"
        );
        let no_current = MULTI.replace("current-context: prod\n", "");
        let e = parse(&no_current, None).unwrap_err();
        assert!(
            e.0.contains("no current-context") && e.0.contains("--context"),
            "{e}"
        );
    }

    #[test]
    fn unsupported_auth_is_named() {
        let exec = "clusters:\n- name: c\n  cluster:\n    server: https://x\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: aws\n";
        let e = parse(exec, None).unwrap_err();
        assert!(
            e.0.contains("exec credential plugin") && e.0.contains("not support"),
            "{e}"
        );
        let ap = exec.replace("    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: aws\n", "    auth-provider:\n      name: gcp\n");
        let e = parse(&ap, None).unwrap_err();
        assert!(e.0.contains("auth-provider"), "{e}");
        let half = exec.replace("    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: aws\n", "    client-certificate-data: Q0E=\n");
        assert!(parse(&half, None).unwrap_err().0.contains("not both"));
    }

    #[test]
    fn broken_files_are_unknown_not_panics() {
        for (text, want) in [
            ("{{{", "cannot parse kubeconfig"),
            ("clusters: 5", "cannot parse kubeconfig"),
            (
                "contexts:\n- name: a\n  context:\n    cluster: missing\ncurrent-context: a\n",
                "cluster 'missing'",
            ),
            ("", "no current-context"),
        ] {
            let e = parse(text, None).unwrap_err();
            assert!(e.0.contains(want), "{text:?}: {e}");
        }
    }

    fn lookup(d: &Path) -> Lookup {
        Lookup {
            sa_dir: d.join("sa"),
            node_files: vec![
                ("microk8s", d.join("microk8s/client.config")),
                ("k3s", d.join("k3s.yaml")),
            ],
            home: Some(d.join("home")),
            ..Default::default()
        }
    }

    #[test]
    fn privileged_lookup_uses_only_the_flag_or_in_cluster() {
        let d = tmp("lookup-priv");
        std::fs::create_dir_all(d.join("home/.kube")).unwrap();
        std::fs::write(d.join("home/.kube/config"), MULTI).unwrap();
        std::fs::write(d.join("k3s.yaml"), MULTI.replace("prod:6443", "k3s:6443")).unwrap();
        let mut l = lookup(&d);
        l.env_kubeconfig = Some(d.join("k3s.yaml").display().to_string());
        // Unprivileged, $KUBECONFIG would win; privileged, nothing of it is used.
        assert!(matches!(
            l.clone().resolve(&mut vec![]).unwrap().source,
            Source::Env(_)
        ));
        l.privileged = true;
        let mut notes = vec![];
        let e = l.resolve(&mut notes).unwrap_err();
        assert!(e.0.contains("more privilege than its caller"), "{e}");
        assert!(e.0.contains("--kubeconfig FILE"), "{e}");
        assert!(!e.0.contains("k3s.yaml"), "{e}");
        // Said once: the -vv note is not repeated inside the message (issue 27, finding 10).
        assert!(!e.0.contains("privileged run"), "{e}");
        assert_eq!(e.0.matches("--kubeconfig").count(), 1, "{e}");
        assert!(notes[0].starts_with("privileged run: "), "{notes:?}");
        // Through sudo: the message says sudo is why, and what to pass.
        let mut sudo = l.clone();
        sudo.via_sudo = true;
        let e = sudo.resolve(&mut vec![]).unwrap_err();
        assert!(e.0.contains("run through sudo ($SUDO_UID is set)"), "{e}");
        assert!(
            e.0.contains("give --kubeconfig FILE, readable by the calling user"),
            "{e}"
        );
        assert_eq!(e.0.matches("--kubeconfig").count(), 1, "{e}");
        // An explicit --kubeconfig is used.
        l.flag = Some(d.join("home/.kube/config"));
        let c = l.resolve(&mut notes).unwrap();
        assert!(matches!(c.source, Source::Flag(_)));
        // So is the in-cluster service account.
        l.flag = None;
        std::fs::create_dir_all(d.join("sa")).unwrap();
        std::fs::write(d.join("sa/token"), "tok").unwrap();
        std::fs::write(d.join("sa/ca.crt"), "CA").unwrap();
        l.service_host = Some("10.0.0.1".into());
        assert_eq!(l.resolve(&mut notes).unwrap().source, Source::InCluster);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn lookup_order() {
        let d = tmp("lookup");
        let mut notes = vec![];
        let e = lookup(&d).resolve(&mut notes).unwrap_err();
        assert!(e.0.contains("no Kubernetes credentials found"), "{e}");
        // ~/.kube/config
        std::fs::create_dir_all(d.join("home/.kube")).unwrap();
        std::fs::write(d.join("home/.kube/config"), MULTI).unwrap();
        let c = lookup(&d).resolve(&mut notes).unwrap();
        assert!(matches!(c.source, Source::Home(_)));
        // a node file wins over ~/.kube/config
        std::fs::write(d.join("k3s.yaml"), MULTI.replace("prod:6443", "k3s:6443")).unwrap();
        let c = lookup(&d).resolve(&mut notes).unwrap();
        assert_eq!(c.server, "https://k3s:6443");
        assert_eq!(
            c.source.to_string(),
            format!("k3s node file {}", d.join("k3s.yaml").display())
        );
        // in-cluster wins over node files; the token is read later, at each run
        std::fs::create_dir_all(d.join("sa")).unwrap();
        std::fs::write(d.join("sa/token"), "tok").unwrap();
        std::fs::write(d.join("sa/ca.crt"), "CA").unwrap();
        let mut l = lookup(&d);
        l.service_host = Some("fd00::1".into());
        l.service_port = Some("443".into());
        let c = l.resolve(&mut notes).unwrap();
        assert_eq!(c.server, "https://[fd00::1]:443");
        assert_eq!(c.auth, Auth::TokenFile(d.join("sa/token")));
        // $KUBECONFIG: the first existing file of the list
        l.env_kubeconfig = Some(format!(
            "{}:{}",
            d.join("nope").display(),
            d.join("k3s.yaml").display()
        ));
        let c = l.resolve(&mut notes).unwrap();
        assert!(matches!(c.source, Source::Env(_)));
        assert_eq!(c.server, "https://k3s:6443");
        // --kubeconfig wins over everything, with --context
        l.flag = Some(d.join("home/.kube/config"));
        l.context = Some("lab".into());
        let c = l.resolve(&mut notes).unwrap();
        assert!(matches!(c.source, Source::Flag(_)));
        assert_eq!(c.server, "https://lab:6443");
        l.flag = Some(d.join("missing"));
        assert!(l
            .resolve(&mut notes)
            .unwrap_err()
            .0
            .contains("cannot read kubeconfig"));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
