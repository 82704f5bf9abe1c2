//! The blocking client: one ureq agent per run, every request bounded by the check's deadline,
//! every failure turned into an UNKNOWN an operator can act on.

use crate::config::{Auth, Config};
use crate::list::{read_list, ListMeta};
use plugin::deadline::{remaining, Reserve};
use plugin::Unknown;
use serde::de::DeserializeOwned;
use std::io::{BufReader, Read};
use std::sync::Arc;
use std::time::{Duration, Instant};
use ureq::tls::{ClientCert, PemItem, RootCerts, TlsConfig};
use ureq::unversioned::transport::{
    ConnectProxyConnector, ConnectionDetails, Connector, RustlsConnector, TcpConnector, Transport,
};

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

/// The cap of a whole list, all pages together: the same as a `--pods-json` document's
/// ([`crate::json::JSON_FILE_MAX`], a 20 000-pod cluster's `kubectl get pods -A -o json`); a node's
/// own pods list in a small part of it. Items are parsed one at a time and the checks keep
/// bounded aggregates, so what this bounds is the time and traffic of a server that keeps
/// paging (issue 27, finding 3: 373 MB at -t 30 with the old 1 GiB cap); reaching it is UNKNOWN
/// naming it.
pub const LIST_MAX: u64 = 256 << 20;

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

/// TLS to the API server under the kubeconfig's `tls-server-name`: the connection to the
/// server's address is wrapped with that name as SNI and as the name its certificate must be
/// valid for (client-go's `ServerName`). Other connections (an `https://` proxy itself) keep
/// their own host name.
#[derive(Debug)]
struct NamedTls {
    inner: RustlsConnector,
    /// The server's authority (`host:port`) as in its URL, and `https://NAME/` to verify as.
    name: Option<(String, ureq::http::Uri)>,
}

impl<In: Transport> Connector<In> for NamedTls {
    type Out = <RustlsConnector as Connector<In>>::Out;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let renamed = self.name.as_ref().filter(|(authority, _)| {
            details.needs_tls()
                && details
                    .uri
                    .authority()
                    .is_some_and(|a| a.as_str().eq_ignore_ascii_case(authority))
        });
        let Some((_, uri)) = renamed else {
            return self.inner.connect(details, chained);
        };
        let named = ConnectionDetails {
            uri,
            addrs: details.addrs.clone(),
            config: details.config,
            request_level: details.request_level,
            resolver: details.resolver,
            now: details.now,
            timeout: details.timeout,
            current_time: details.current_time.clone(),
            run_connector: details.run_connector.clone(),
            register_shutdown: details.register_shutdown.clone(),
        };
        self.inner.connect(&named, chained)
    }
}

/// The kubeconfig's `proxy-url` as ureq takes it: HTTP(S) CONNECT proxies; SOCKS and anything
/// else refused with a message naming the (redacted) URL.
fn proxy_of(url: &str, source: &crate::config::Source) -> Result<ureq::Proxy, Unknown> {
    let shown = redact_url(url);
    let scheme = url
        .split_once("://")
        .map(|(s, _)| s.to_ascii_lowercase())
        .unwrap_or_default();
    match scheme.as_str() {
        "http" | "https" => ureq::Proxy::new(url).map_err(|_| {
            Unknown(format!(
                "proxy-url '{shown}' in {source} is not a valid proxy URL (want http://[user:password@]host:port)"
            ))
        }),
        s if s.starts_with("socks") => Err(Unknown(format!(
            "proxy-url '{shown}' in {source} is a SOCKS proxy, which the checks do not support: \
             use an HTTP CONNECT proxy (http://host:port, e.g. squid or tinyproxy on the bastion) \
             or reach the API server directly"
        ))),
        _ => Err(Unknown(format!(
            "proxy-url '{shown}' in {source} is not an http:// or https:// URL (the checks \
             support HTTP CONNECT proxies only)"
        ))),
    }
}

/// The secrets of a configuration, as [`Client::scrub`] replaces them: the token (as sent, and
/// its `Bearer` header), userinfo parts and query values of the server and proxy URLs. Parts of
/// fewer than 4 characters are left (they would blank out ordinary words; the URLs themselves
/// are only ever shown redacted).
fn secrets_of(cfg: &Config, auth_header: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(h) = auth_header {
        out.push(h.to_string());
        if let Some(t) = h.strip_prefix("Bearer ") {
            out.push(t.to_string());
        }
    }
    if let Auth::Token(t) = &cfg.auth {
        out.push(String::from_utf8_lossy(&t.0).trim().to_string());
    }
    for url in std::iter::once(cfg.server.as_str()).chain(cfg.proxy_url.as_deref()) {
        let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            out.push(userinfo.to_string());
            // Sent as `Basic base64(userinfo)` when no token is (ureq's URL userinfo): a server
            // echoing that header must not show it either.
            out.push(base64_encode(userinfo.as_bytes()));
            if let Some(d) = pct_decoded(userinfo) {
                out.push(base64_encode(d.as_bytes()));
            }
            for part in userinfo.split(':') {
                out.push(part.to_string());
                if let Some(d) = pct_decoded(part) {
                    out.push(d);
                }
            }
        }
        if let Some((_, q)) = rest.split_once('?') {
            let q = q.split('#').next().unwrap_or(q);
            out.push(q.to_string());
            for pair in q.split('&') {
                let v = pair.split_once('=').map(|(_, v)| v).unwrap_or(pair);
                out.push(v.to_string());
                if let Some(d) = pct_decoded(v) {
                    out.push(d);
                }
            }
        }
    }
    out.retain(|s| s.chars().count() >= 4);
    // Longest first, so that a secret containing another is replaced whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

/// Standard base64 with padding (for [`secrets_of`]).
pub(crate) fn base64_encode(b: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for ch in b.chunks(3) {
        let n = (ch[0] as u32) << 16
            | (*ch.get(1).unwrap_or(&0) as u32) << 8
            | *ch.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            out.push(if i <= ch.len() {
                A[(n >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

/// `%XX`-decoded `s`, when it has an escape and decodes to UTF-8.
fn pct_decoded(s: &str) -> Option<String> {
    if !s.contains('%') {
        return None;
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).ok()?, 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// `text` with each of `secrets` replaced by `…`.
pub fn scrub_with(secrets: &[String], mut text: String) -> String {
    for s in secrets {
        if text.contains(s.as_str()) {
            text = text.replace(s.as_str(), "…");
        }
    }
    text
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
    /// The kubeconfig's `tls-server-name`, when set.
    tls_server_name: Option<String>,
    /// What no message may carry: the bearer token, the server URL's userinfo and query values,
    /// the proxy URL's userinfo. A server (or proxy) that echoes them back in its error text
    /// gets them replaced by `…` ([`Client::scrub`]).
    secrets: Vec<String>,
    /// The proxy, redacted, when `proxy-url` is set.
    proxy_shown: Option<String>,
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
    Reserve::share(10, Duration::from_millis(50), Duration::from_millis(500))
        .left(remaining(deadline))
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
                 (or insecure-skip-tls-verify: true with --allow-insecure-tls, not recommended)",
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
        if cfg.insecure && !plain && !cfg.allow_insecure_tls {
            // Checked after the credentials are read (a broken token file is said first), before
            // anything is sent: nothing reaches the server.
            return Err(Unknown(format!(
                "the kubeconfig ({}) sets insecure-skip-tls-verify: true for server {}: refused \
                 (the server's certificate would not be checked, so the credentials would go to \
                 whoever answers at that address); give the cluster's CA as \
                 certificate-authority(-data) instead (kubectl config set-cluster NAME \
                 --certificate-authority=CA.crt --embed-certs), or pass --allow-insecure-tls to \
                 accept it as kubectl does",
                cfg.source, shown
            )));
        }
        let proxy = cfg
            .proxy_url
            .as_deref()
            .map(|u| proxy_of(u, &cfg.source))
            .transpose()?;
        let named = match &cfg.tls_server_name {
            Some(name) => {
                let uri: ureq::http::Uri = format!("https://{name}/").parse().map_err(|_| {
                    Unknown(format!(
                        "tls-server-name '{}' in {} is not a host name",
                        plugin::render::truncate(name, 100),
                        cfg.source
                    ))
                })?;
                let authority = cfg
                    .server
                    .parse::<ureq::http::Uri>()
                    .ok()
                    .and_then(|u| {
                        let host = u.host()?.to_string();
                        Some(format!("{host}:{}", u.port_u16().unwrap_or(443)))
                    })
                    .unwrap_or_default();
                Some((authority, uri))
            }
            None => None,
        };
        let config = ureq::Agent::config_builder()
            .tls_config(tls.build())
            .http_status_as_error(false)
            .proxy(proxy)
            .max_redirects(0)
            .user_agent(concat!("k8s-storage-checks/", env!("CARGO_PKG_VERSION")))
            .build();
        // ureq's default chain, less SOCKS (refused above) and native-tls, with TLS under the
        // kubeconfig's tls-server-name.
        let connector =
            ().chain(ConnectProxyConnector::default())
                .chain(TcpConnector::default())
                .chain(NamedTls {
                    inner: RustlsConnector::default(),
                    name: named,
                });
        let agent = ureq::Agent::with_parts(
            config,
            connector,
            ureq::unversioned::resolver::DefaultResolver::default(),
        );
        let proxy_shown = cfg.proxy_url.as_deref().map(redact_url);
        let description = format!(
            "server {} from {}{}, CA {}, auth {}{}{}{}",
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
                ", TLS verification OFF (insecure-skip-tls-verify in the kubeconfig, allowed by --allow-insecure-tls)"
            } else {
                ""
            },
            cfg.tls_server_name
                .as_ref()
                .map(|n| format!(", tls-server-name {n}"))
                .unwrap_or_default(),
            proxy_shown
                .as_ref()
                .map(|p| format!(", through proxy {p}"))
                .unwrap_or_default(),
        );
        let secrets = secrets_of(cfg, auth_header.as_deref());
        Ok(Client {
            secrets,
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
            tls_server_name: cfg.tls_server_name.clone(),
            proxy_shown,
            log: Default::default(),
        })
    }

    /// `text` with every secret of this client replaced by `…`: every message a request can end
    /// in goes through it, whatever the server or proxy put in its answer.
    pub fn scrub(&self, text: String) -> String {
        scrub_with(&self.secrets, text)
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
        self.send_inner(method, path, query, body)
            .map_err(|e| ApiError {
                status: e.status,
                message: self.scrub(e.message),
                error: Unknown(self.scrub(e.error.0)),
            })
    }

    fn send_inner<T: DeserializeOwned>(
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
                self.decode_error(e.into(), &shown, left)
            },
        })
    }

    /// GET one object.
    pub fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<T, Unknown> {
        self.get_inner(path, query)
            .map_err(|e| Unknown(self.scrub(e.0)))
    }

    fn get_inner<T: DeserializeOwned>(
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
                self.decode_error(e.into(), &shown, left)
            }
        })
    }

    /// List `path` (a collection URL such as `/api/v1/pods`), following `continue` pages, calling
    /// `f` for every item as it is parsed. Returns the number of items.
    pub fn list<T, F>(&self, path: &str, params: &ListParams, f: F) -> Result<usize, Unknown>
    where
        T: DeserializeOwned,
        F: FnMut(T),
    {
        self.list_of(path, params, None, f)
    }

    /// [`list`](Self::list), also requiring each page to say it is a `kind` (e.g. `NodeList`):
    /// for lists whose items prove something (a node exists), where another list's items must
    /// not pass for them.
    pub fn list_of<T, F>(
        &self,
        path: &str,
        params: &ListParams,
        kind: Option<&str>,
        f: F,
    ) -> Result<usize, Unknown>
    where
        T: DeserializeOwned,
        F: FnMut(T),
    {
        self.list_inner(path, params, kind, f)
            .map_err(|e| Unknown(self.scrub(e.0)))
    }

    fn list_inner<T, F>(
        &self,
        path: &str,
        params: &ListParams,
        kind: Option<&str>,
        mut f: F,
    ) -> Result<usize, Unknown>
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
                true if cap < PAGE_MAX => Unknown(format!(
                    "API server {} kept paging {path}: {page} pages, {} items, more than {} in all \
                     (LIST_MAX, the cap of a whole list): not read further (a server that never \
                     ends its list, or a list too large for one run: narrow it with --namespace \
                     or --node)",
                    self.shown,
                    total,
                    plugin::fmt_bytes(LIST_MAX)
                )),
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
            if let Some(k) = kind.filter(|k| *k != meta.kind) {
                return Err(Unknown(format!(
                    "API server answered {shown} with {} instead of a {k}",
                    if meta.kind.is_empty() {
                        "a list without kind".to_string()
                    } else {
                        format!("kind {}", plugin::render::truncate(&meta.kind, 80))
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
    /// A discovery path (`/apis/longhorn.io`), which RBAC grants as a non-resource URL.
    pub discovery: Option<String>,
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
            discovery: rest
                .is_empty()
                .then(|| format!("/{}", path.trim_matches('/'))),
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
        if let Some(url) = &self.discovery {
            // Kubernetes grants discovery to every authenticated user (ClusterRole
            // system:discovery): a 403 here means that binding was changed.
            return format!(
                "{{nonResourceURLs: [\"{url}\"], verbs: [\"get\"]}} in a ClusterRole (the default \
                 system:discovery role grants it to every authenticated user: see kubectl get \
                 clusterrolebinding system:discovery -o yaml)"
            );
        }
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
            tls_server_name: None,
            proxy_url: None,
            auth: Auth::TokenFile("/nonexistent/token-never-read".into()),
            allow_http: allow,
            allow_insecure_tls: false,
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
    fn finding_6_insecure_skip_tls_verify_needs_allow_insecure_tls() {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut cfg = http_config(false);
        cfg.server = "https://127.0.0.1:1".into();
        cfg.insecure = true;
        cfg.auth = Auth::Token(crate::config::Secret(b"tok".to_vec()));
        let e = Client::new(&cfg, deadline).err().unwrap();
        assert!(e.0.contains("insecure-skip-tls-verify: true"), "{e}");
        assert!(e.0.contains("refused"), "{e}");
        assert!(e.0.contains("--allow-insecure-tls"), "{e}");
        assert!(e.0.contains("--certificate-authority="), "{e}");
        cfg.allow_insecure_tls = true;
        let c = Client::new(&cfg, deadline).unwrap();
        assert!(
            c.description.contains("TLS verification OFF"),
            "{}",
            c.description
        );
    }

    #[test]
    fn finding_7_proxy_url_kinds() {
        let src = Source::Flag("/tmp/kc".into());
        assert!(proxy_of("http://u:p@127.0.0.1:3128", &src).is_ok());
        assert!(proxy_of("https://proxy.lan:3129", &src).is_ok());
        for (url, want) in [
            ("socks5://u:PXSECRET@127.0.0.1:1080", "is a SOCKS proxy"),
            ("socks5h://127.0.0.1:1080", "is a SOCKS proxy"),
            ("ftp://u:PXSECRET@h:21", "not an http:// or https:// URL"),
        ] {
            let e = proxy_of(url, &src).unwrap_err();
            assert!(e.0.contains(want), "{url}: {e}");
            assert!(!e.0.contains("PXSECRET"), "{e}");
        }
        // Described, redacted, with tls-server-name.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut cfg = http_config(true);
        cfg.proxy_url = Some("http://pxuser:PXSECRET@127.0.0.1:3128".into());
        cfg.tls_server_name = Some("kubernetes".into());
        let c = Client::new(&cfg, deadline).unwrap();
        assert!(
            c.description
                .contains("tls-server-name kubernetes, through proxy http://…@127.0.0.1:3128"),
            "{}",
            c.description
        );
    }

    #[test]
    fn finding_5_secrets_are_scrubbed_from_every_message() {
        let mut cfg = http_config(false);
        cfg.server = "https://USER:PASS%40WORD@k8s:6443/p?token=QSECRET&x=1".into();
        cfg.proxy_url = Some("http://pxuser:PXSECRET@proxy:3128".into());
        cfg.auth = Auth::Token(crate::config::Secret(b"TOKENSECRET".to_vec()));
        let secrets = secrets_of(&cfg, Some("Bearer TOKENSECRET"));
        let text = "server echoed Bearer TOKENSECRET, TOKENSECRET, USER:PASS%40WORD, PASS@WORD, \
                    token=QSECRET&x=1, QSECRET, pxuser:PXSECRET, PXSECRET"
            .to_string();
        let out = scrub_with(&secrets, text);
        for s in ["TOKENSECRET", "PASS", "QSECRET", "PXSECRET", "pxuser"] {
            assert!(!out.contains(s), "{s} in {out}");
        }
        assert!(out.starts_with("server echoed …"), "{out}");
        // Short parts are left (the URL itself is only ever shown redacted).
        assert_eq!(scrub_with(&secrets, "x=1 ok".into()), "x=1 ok");
        // The userinfo as ureq sends it without a token: Basic base64("USER:PASS@WORD").
        assert_eq!(base64_encode(b"martin:secret"), "bWFydGluOnNlY3JldA==");
        let basic = format!("Basic {}", base64_encode(b"USER:PASS@WORD"));
        assert_eq!(scrub_with(&secrets, basic), "Basic …");
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
        // Discovery: a non-resource URL, never a `resources: ["?"]` rule.
        let rule = Resource::of_path("/apis/longhorn.io").rbac_rule();
        assert!(
            rule.starts_with("{nonResourceURLs: [\"/apis/longhorn.io\"], verbs: [\"get\"]}"),
            "{rule}"
        );
        assert!(!rule.contains('?'), "{rule}");
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
