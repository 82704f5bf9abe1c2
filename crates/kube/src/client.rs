//! The blocking client: one ureq agent per run, every request bounded by the check's deadline,
//! every failure turned into an UNKNOWN an operator can act on.

use crate::config::{Auth, Config};
use crate::list::{read_list, ListMeta};
use plugin::Unknown;
use serde::de::DeserializeOwned;
use std::io::{BufReader, Read};
use std::sync::Arc;
use std::time::{Duration, Instant};
use ureq::tls::{ClientCert, PemItem, RootCerts, TlsConfig};

mod errors;

/// Items per page (kubectl's default chunk size).
pub const DEFAULT_LIMIT: u32 = 500;

/// Bytes of an error body read to explain the failure.
const ERROR_BODY_MAX: u64 = 64 * 1024;

/// The cap of one answer (one page of a list, or one object): a page of 500 pods with their
/// managed fields is about 10 MiB, so this is only reached by a server that ignores `limit`.
/// Items are parsed one at a time, so what one page costs in memory is one item plus what the
/// caller keeps.
pub const PAGE_MAX: u64 = 32 << 20;

/// The cap of a whole list, all pages together (a 150 000-pod cluster lists in well under this).
pub const LIST_MAX: u64 = 1 << 30;

/// A response body that ends with an error once more than `max` bytes came (the error is told
/// apart by [`Capped::exceeded`]).
struct Capped<R> {
    inner: R,
    max: u64,
    read: u64,
    exceeded: bool,
}

impl<R: Read> Capped<R> {
    fn new(inner: R, max: u64) -> Self {
        Capped {
            inner,
            max,
            read: 0,
            exceeded: false,
        }
    }
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.read > self.max {
            self.exceeded = true;
            return Err(std::io::Error::other("answer over its size cap"));
        }
        let want = buf.len().min((self.max + 1 - self.read) as usize);
        let n = self.inner.read(&mut buf[..want])?;
        self.read += n as u64;
        if self.read > self.max {
            self.exceeded = true;
            return Err(std::io::Error::other("answer over its size cap"));
        }
        Ok(n)
    }
}

/// Query of a list request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListParams {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    /// Page size; 0 means [`DEFAULT_LIMIT`].
    pub limit: u32,
}

/// A failed request of [`Client::send`]: the HTTP status (None when there was no complete
/// answer), the server's own message (`Status.message`, may be empty) and the operator's message.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: Option<u16>,
    pub message: String,
    pub error: Unknown,
}

impl From<ApiError> for Unknown {
    fn from(e: ApiError) -> Unknown {
        e.error
    }
}

/// A server URL as it may be printed: userinfo (`user:password@`) becomes `…@` and a query
/// string (which may carry a token) becomes `?…`. Every message, `-vv` line and perfdata label
/// naming a server goes through this; the request itself uses the URL as configured.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, url),
    };
    let (authority, tail) = match rest.find(['/', '?', '#']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("…@{host}"),
        None => authority.to_string(),
    };
    let tail = match tail.split_once(['?', '#']) {
        Some((path, _)) => format!("{path}?…"),
        None => tail.to_string(),
    };
    match scheme {
        Some(s) => format!("{s}://{authority}{tail}"),
        None => format!("{authority}{tail}"),
    }
}

/// A blocking API client bound to a deadline.
pub struct Client {
    agent: ureq::Agent,
    /// The server URL as configured; requests go to it. Never printed.
    url: String,
    /// The server as every message shows it: [`redact_url`] of `url` (no userinfo, no query).
    shown: String,
    host: String,
    auth_header: Option<String>,
    deadline: Instant,
    budget: Duration,
    /// What the client talks to and how, for `-vv` (no secrets).
    pub description: String,
    ca_from: String,
    source: String,
    /// Requests made: `(method path?query, status, items)` for `-vv` and tests.
    log: std::sync::Mutex<Vec<String>>,
}

fn pem_items(pem: &[u8], what: &str) -> Result<Vec<PemItem<'static>>, Unknown> {
    ureq::tls::parse_pem(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Unknown(format!("cannot parse {what} (PEM): {e}")))
}

/// The part of the deadline a request may use: the rest, less a margin so that the client's own
/// timeout message (naming the request) wins over the runtime's watchdog.
fn request_budget(deadline: Instant) -> Duration {
    let left = deadline.saturating_duration_since(Instant::now());
    let margin = (left / 10).clamp(Duration::from_millis(50), Duration::from_millis(500));
    left.saturating_sub(margin)
}

impl Client {
    /// Build a client for `cfg`; requests must finish by `deadline`.
    pub fn new(cfg: &Config, deadline: Instant) -> Result<Client, Unknown> {
        let shown = redact_url(&cfg.server);
        let host = shown
            .split_once("://")
            .map(|(_, r)| r)
            .unwrap_or(&shown)
            .split(['/', '?'])
            .next()
            .unwrap_or_default();
        let host = host
            .rsplit_once('@')
            .map(|(_, h)| h)
            .unwrap_or(host)
            .to_string();
        if !cfg.server.starts_with("https://") && !cfg.server.starts_with("http://") {
            return Err(Unknown(format!(
                "server '{}' from {} is not an http(s) URL",
                shown, cfg.source
            )));
        }
        let plain = cfg.server.starts_with("http://");
        if plain && !cfg.allow_http {
            return Err(Unknown(format!(
                "server '{}' from {} is plain http: refused (requests and answers would travel \
                 unencrypted and unauthenticated); use https, or give --allow-insecure-http to \
                 allow it (no credential is ever sent over plain http)",
                shown, cfg.source
            )));
        }
        let mut tls = TlsConfig::builder()
            .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()));
        if cfg.insecure {
            tls = tls.disable_verification(true);
        } else if let Some(ca) = &cfg.ca_pem {
            let certs: Vec<_> = pem_items(ca, &format!("CA {}", cfg.ca_from))?
                .into_iter()
                .filter_map(|i| match i {
                    PemItem::Certificate(c) => Some(c),
                    _ => None,
                })
                .collect();
            if certs.is_empty() {
                return Err(Unknown(format!("no certificate in CA {}", cfg.ca_from)));
            }
            tls = tls.root_certs(RootCerts::new_with_certs(&certs));
        } else if cfg.server.starts_with("https://") {
            // No CA in the config and no system trust store in a static binary: say so now
            // rather than failing every handshake with "unknown issuer".
            return Err(Unknown(format!(
                "no certificate-authority for {} in {}: add certificate-authority(-data) \
                 (or insecure-skip-tls-verify: true, not recommended)",
                shown, cfg.source
            )));
        }
        let mut auth_header = None;
        match &cfg.auth {
            // Plain http (allowed by --allow-insecure-http): no credential is read or sent.
            _ if plain => {}
            Auth::None => {}
            Auth::Token(t) => {
                auth_header = Some(format!("Bearer {}", String::from_utf8_lossy(&t.0).trim()))
            }
            Auth::TokenFile(p) => {
                // The kubeconfig's tokenFile: a path the caller may choose, read as the caller.
                let t = plugin::privilege::read(p).map_err(|e| {
                    Unknown(format!(
                        "cannot read token file {}: {}",
                        p.display(),
                        plugin::errtext(&e)
                    ))
                })?;
                let t = String::from_utf8_lossy(&t).trim().to_string();
                if t.is_empty() {
                    return Err(Unknown(format!("token file {} is empty", p.display())));
                }
                auth_header = Some(format!("Bearer {t}"));
            }
            Auth::ClientCert {
                cert,
                key: key_pem,
                from,
            } => {
                let chain: Vec<_> = pem_items(cert, "client certificate")?
                    .into_iter()
                    .filter_map(|i| match i {
                        PemItem::Certificate(c) => Some(c),
                        _ => None,
                    })
                    .collect();
                let key = pem_items(&key_pem.0, "client key")?
                    .into_iter()
                    .find_map(|i| match i {
                        PemItem::PrivateKey(k) => Some(k),
                        _ => None,
                    });
                let Some(key) = key else {
                    return Err(Unknown(format!("no private key in client key ({from})")));
                };
                if chain.is_empty() {
                    return Err(Unknown(format!(
                        "no certificate in client certificate ({from})"
                    )));
                }
                check_client_cert(cert, &key_pem.0, from)?;
                tls = tls.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
            }
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .tls_config(tls.build())
            .http_status_as_error(false)
            .proxy(None)
            .max_redirects(0)
            .user_agent(concat!("k8s-storage-checks/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        let description = format!(
            "server {} from {}{}, CA {}, auth {}{}",
            shown,
            cfg.source,
            cfg.context
                .as_ref()
                .map(|c| format!(" (context {c})"))
                .unwrap_or_default(),
            cfg.ca_from,
            if plain {
                "none (plain http)".to_string()
            } else {
                cfg.auth.describe()
            },
            if cfg.insecure {
                ", TLS verification OFF (insecure-skip-tls-verify in the kubeconfig)"
            } else {
                ""
            }
        );
        Ok(Client {
            agent,
            url: cfg.server.clone(),
            shown,
            host,
            auth_header,
            deadline,
            budget: deadline.saturating_duration_since(Instant::now()),
            description,
            ca_from: cfg.ca_from.clone(),
            source: cfg.source.to_string(),
            log: Default::default(),
        })
    }

    /// The server as messages show it (credentials in the URL redacted, see [`redact_url`]).
    pub fn server(&self) -> &str {
        &self.shown
    }

    /// The requests made so far, one line each (`GET path?query -> 200, page 1: 500 items`), for
    /// `-vv`. Continue tokens are elided; no credentials are ever part of them.
    pub fn requests(&self) -> Vec<String> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// GET `path` with query pairs; returns the response if it is 2xx, else the mapped error.
    fn get_raw(&self, path: &str, query: &[(&str, &str)]) -> Result<ureq::Body, Unknown> {
        self.call("GET", path, query, None).map_err(|e| e.error)
    }

    /// Send `method path?query` with an optional `(content type, body)`; the response if it is
    /// 2xx, else the HTTP status (None: no answer) and the mapped error.
    fn call(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        body: Option<(&str, &[u8])>,
    ) -> Result<ureq::Body, ApiError> {
        let left = request_budget(self.deadline);
        let shown = format!("{method} {}", show_request(path, query));
        let fail = |error: Unknown| ApiError {
            status: None,
            message: String::new(),
            error,
        };
        if left < Duration::from_millis(20) {
            return Err(fail(Unknown(format!(
                "no time left for API request {shown} (the check's -t {} is used up)",
                plugin::fmt_duration(self.budget)
            ))));
        }
        let url = format!("{}{}", self.url, path);
        // Query, headers and the time budget, the same for both kinds of builder.
        macro_rules! prepare {
            ($b:expr) => {{
                let mut r = $b.header("Accept", "application/json");
                for (k, v) in query {
                    r = r.query(*k, *v);
                }
                if let Some(h) = &self.auth_header {
                    r = r.header("Authorization", h);
                }
                r.config().timeout_global(Some(left)).build()
            }};
        }
        let sent = match (method, body) {
            ("GET", None) => prepare!(self.agent.get(&url)).call(),
            ("DELETE", None) => prepare!(self.agent.delete(&url)).call(),
            (m @ ("PATCH" | "POST" | "PUT"), b) => {
                let (ct, bytes) = b.unwrap_or(("application/json", b"{}"));
                let builder = match m {
                    "PATCH" => self.agent.patch(&url),
                    "POST" => self.agent.post(&url),
                    _ => self.agent.put(&url),
                };
                prepare!(builder.header("Content-Type", ct)).send(bytes)
            }
            _ => {
                return Err(fail(Unknown(format!(
                    "unsupported API request {shown} (internal error)"
                ))))
            }
        };
        let resp = sent.map_err(|e| fail(self.transport_error(e, &shown, left)))?;
        let status = resp.status().as_u16();
        if let Ok(mut l) = self.log.lock() {
            l.push(format!("{shown} -> {status}"));
        }
        if (200..300).contains(&status) {
            return Ok(resp.into_body());
        }
        let mut body = Vec::new();
        let _ = resp
            .into_body()
            .into_reader()
            .take(ERROR_BODY_MAX)
            .read_to_end(&mut body);
        let (error, message) = self.http_error(status, &body, method, path, &shown);
        Err(ApiError {
            status: Some(status),
            message,
            error,
        })
    }

    /// Send a request with an optional JSON-ish body (`(content type, bytes)`, e.g. a
    /// merge-patch) and parse the 2xx answer as `T`. Unlike [`get`](Self::get) the failure keeps
    /// the HTTP status, so a caller can act on it (404 → create, 403 → its own RBAC hint).
    pub fn send<T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        body: Option<(&str, &[u8])>,
    ) -> Result<T, ApiError> {
        let left = request_budget(self.deadline);
        let shown = format!("{method} {}", show_request(path, query));
        let resp = self.call(method, path, query, body)?;
        let mut r = Capped::new(resp.into_reader(), PAGE_MAX);
        serde_json::from_reader(BufReader::with_capacity(64 * 1024, &mut r)).map_err(|e| ApiError {
            status: None,
            message: String::new(),
            error: if r.exceeded {
                self.over_cap(&shown, PAGE_MAX, "one answer")
            } else {
                self.decode_error(e, &shown, left)
            },
        })
    }

    /// GET one object.
    pub fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<T, Unknown> {
        let left = request_budget(self.deadline);
        let shown = format!("GET {}", show_request(path, query));
        let body = self.get_raw(path, query)?;
        let mut r = Capped::new(body.into_reader(), PAGE_MAX);
        serde_json::from_reader(BufReader::with_capacity(64 * 1024, &mut r)).map_err(|e| {
            if r.exceeded {
                self.over_cap(&shown, PAGE_MAX, "one answer")
            } else {
                self.decode_error(e, &shown, left)
            }
        })
    }

    /// List `path` (a collection URL such as `/api/v1/pods`), following `continue` pages, calling
    /// `f` for every item as it is parsed. Returns the number of items.
    pub fn list<T, F>(&self, path: &str, params: &ListParams, mut f: F) -> Result<usize, Unknown>
    where
        T: DeserializeOwned,
        F: FnMut(T),
    {
        let limit = if params.limit == 0 {
            DEFAULT_LIMIT
        } else {
            params.limit
        }
        .to_string();
        let mut cont: Option<String> = None;
        let mut total = 0;
        let mut list_bytes = 0u64;
        for page in 1.. {
            let mut q: Vec<(&str, &str)> = vec![("limit", &limit)];
            if let Some(s) = params.label_selector.as_deref().filter(|s| !s.is_empty()) {
                q.push(("labelSelector", s));
            }
            if let Some(s) = params.field_selector.as_deref().filter(|s| !s.is_empty()) {
                q.push(("fieldSelector", s));
            }
            if let Some(c) = &cont {
                q.push(("continue", c));
            }
            let left = request_budget(self.deadline);
            let shown = format!("GET {}", show_request(path, &q));
            let body = self.get_raw(path, &q)?;
            let cap = PAGE_MAX.min(LIST_MAX.saturating_sub(list_bytes));
            let mut r = Capped::new(body.into_reader(), cap);
            let res = read_list(BufReader::with_capacity(64 * 1024, &mut r), &mut f);
            list_bytes += r.read;
            let meta: ListMeta = res.map_err(|e| match r.exceeded {
                true if cap < PAGE_MAX => self.over_cap(&shown, LIST_MAX, "a whole list"),
                true => self.over_cap(&shown, PAGE_MAX, "one page of a list"),
                false => self.decode_error(e, &shown, left),
            })?;
            if !meta.had_items {
                return Err(Unknown(format!(
                    "API server answered {shown} with {} instead of a list",
                    if meta.kind.is_empty() {
                        "an object without items".to_string()
                    } else {
                        format!("kind {}", meta.kind)
                    }
                )));
            }
            total += meta.items;
            if let Ok(mut l) = self.log.lock() {
                if let Some(last) = l.last_mut() {
                    last.push_str(&format!(", page {page}: {} items", meta.items));
                }
            }
            match meta.continue_token {
                Some(c) if Some(&c) != cont.as_ref() => cont = Some(c),
                Some(_) => {
                    return Err(Unknown(format!(
                        "API server repeated the same continue token for {path}: giving up"
                    )))
                }
                None => break,
            }
        }
        Ok(total)
    }
}

/// Reject a certificate/key pair rustls would refuse (ureq would panic on it).
fn check_client_cert(cert_pem: &[u8], key_pem: &[u8], from: &str) -> Result<(), Unknown> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| Unknown(format!("cannot parse client certificate ({from}): {e:?}")))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| Unknown(format!("cannot parse client key ({from}): {e:?}")))?;
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| Unknown(format!("TLS setup failed: {e}")))?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_client_auth_cert(certs, key)
        .map(|_| ())
        .map_err(|e| Unknown(format!("unusable client certificate/key ({from}): {e}")))
}

fn show_request(path: &str, query: &[(&str, &str)]) -> String {
    if query.is_empty() {
        return path.to_string();
    }
    let q: Vec<String> = query
        .iter()
        .map(|(k, v)| {
            if *k == "continue" {
                format!("{k}=…")
            } else {
                format!("{k}={v}")
            }
        })
        .collect();
    format!("{path}?{}", q.join("&"))
}

/// What an API path addresses, for RBAC hints.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub group: String,
    pub resource: String,
    pub namespace: Option<String>,
    /// `get` for one object, `list` for a collection.
    pub verb: &'static str,
}

impl Resource {
    pub fn of_path(path: &str) -> Resource {
        let path = path.split('?').next().unwrap_or(path);
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, rest) = match parts.first() {
            Some(&"api") => (String::new(), parts.get(2..).unwrap_or(&[])),
            Some(&"apis") => (
                parts.get(1).copied().unwrap_or_default().to_string(),
                parts.get(3..).unwrap_or(&[]),
            ),
            _ => (String::new(), &parts[..]),
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
            _ => (None, rest),
        };
        Resource {
            group,
            resource: rest.first().copied().unwrap_or("?").to_string(),
            namespace,
            verb: if rest.len() >= 2 { "get" } else { "list" },
        }
    }

    fn describe(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// The RBAC rule that allows this request, ready to paste into a (Cluster)Role.
    pub fn rbac_rule(&self) -> String {
        let scope = match &self.namespace {
            Some(ns) => format!("a Role in namespace {ns} (or a ClusterRole)"),
            None => "a ClusterRole (cluster-wide)".to_string(),
        };
        format!(
            "{{apiGroups: [\"{}\"], resources: [\"{}\"], verbs: [\"{}\"]}} in {scope}",
            self.group, self.resource, self.verb
        )
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn capped_reader_stops_one_byte_past_the_cap() {
        let data = vec![7u8; 1000];
        let mut r = Capped::new(&data[..], 999);
        let mut out = Vec::new();
        assert!(r.read_to_end(&mut out).is_err());
        assert!(r.exceeded && out.len() <= 1000);
        let mut r = Capped::new(&data[..], 1000);
        let mut out = Vec::new();
        assert_eq!(r.read_to_end(&mut out).unwrap(), 1000);
        assert!(!r.exceeded);
        // An endless body stops at the cap.
        let mut r = Capped::new(std::io::repeat(b'x'), 1 << 20);
        assert!(std::io::copy(&mut r, &mut std::io::sink()).is_err());
        assert!(r.exceeded && r.read == (1 << 20) + 1);
    }
    use super::*;
    use crate::config::Source;

    fn http_config(allow: bool) -> Config {
        Config {
            source: Source::Flag("/tmp/kc".into()),
            context: None,
            server: "http://127.0.0.1:1".into(),
            ca_pem: None,
            ca_from: "none".into(),
            insecure: false,
            auth: Auth::TokenFile("/nonexistent/token-never-read".into()),
            allow_http: allow,
        }
    }

    #[test]
    fn plain_http_is_refused_unless_allowed_and_then_carries_no_credential() {
        let deadline = Instant::now() + Duration::from_secs(5);
        let e = Client::new(&http_config(false), deadline).err().unwrap();
        assert!(e.0.contains("plain http: refused"), "{e}");
        assert!(e.0.contains("--allow-insecure-http"), "{e}");
        // Allowed: the token file (which does not exist) is not even read.
        let c = Client::new(&http_config(true), deadline).unwrap();
        assert!(c.auth_header.is_none());
        assert!(
            c.description.contains("auth none (plain http)"),
            "{}",
            c.description
        );
    }

    #[test]
    fn a_password_in_the_server_url_is_never_shown() {
        assert_eq!(
            redact_url("https://USER:PASS@127.0.0.1:1"),
            "https://…@127.0.0.1:1"
        );
        assert_eq!(
            redact_url("https://k8s:6443/prefix?token=SECRET#x"),
            "https://k8s:6443/prefix?…"
        );
        assert_eq!(redact_url("https://k8s:6443"), "https://k8s:6443");
        assert_eq!(redact_url("https://a@b@k8s:6443/p"), "https://…@k8s:6443/p");
        let deadline = Instant::now() + Duration::from_secs(5);
        // Refused at once (plain http) and refused at the socket (nothing listens on port 1):
        // neither message, nor -vv's description, carries the password.
        let mut cfg = http_config(false);
        cfg.server = "http://USER:PASS@127.0.0.1:1/?token=QSECRET".into();
        let e = Client::new(&cfg, deadline).err().unwrap();
        assert!(!e.0.contains("PASS") && !e.0.contains("QSECRET"), "{e}");
        assert!(e.0.contains("http://…@127.0.0.1:1"), "{e}");
        cfg.allow_http = true;
        cfg.server = "http://USER:PASS@127.0.0.1:1".into();
        let c = Client::new(&cfg, deadline).unwrap();
        assert!(!c.description.contains("PASS"), "{}", c.description);
        assert_eq!(c.server(), "http://…@127.0.0.1:1");
        assert_eq!(c.host, "127.0.0.1:1");
        let text = c.list_pvs(|_| ()).err().unwrap().0;
        assert!(!text.contains("PASS") && !text.contains("USER"), "{text}");
        assert!(
            text.contains("cannot connect to API server http://…@127.0.0.1:1"),
            "{text}"
        );
    }

    #[test]
    fn resource_of_path() {
        let r = Resource::of_path("/api/v1/pods");
        assert_eq!(
            (r.group.as_str(), r.resource.as_str(), r.namespace, r.verb),
            ("", "pods", None, "list")
        );
        let r = Resource::of_path("/api/v1/namespaces/openebs/pods");
        assert_eq!(r.namespace.as_deref(), Some("openebs"));
        assert_eq!(r.resource, "pods");
        let r = Resource::of_path("/apis/storage.k8s.io/v1/volumeattachments");
        assert_eq!(
            (r.group.as_str(), r.resource.as_str()),
            ("storage.k8s.io", "volumeattachments")
        );
        let r = Resource::of_path("/api/v1/namespaces/kube-system/configmaps/x");
        assert_eq!((r.resource.as_str(), r.verb), ("configmaps", "get"));
        assert_eq!(
            Resource::of_path("/api/v1/namespaces/media/events").rbac_rule(),
            "{apiGroups: [\"\"], resources: [\"events\"], verbs: [\"list\"]} in a Role in namespace media (or a ClusterRole)"
        );
    }

    #[test]
    fn continue_tokens_are_not_shown() {
        assert_eq!(
            show_request(
                "/api/v1/pods",
                &[("limit", "500"), ("continue", "secretish")]
            ),
            "/api/v1/pods?limit=500&continue=…"
        );
    }
}
