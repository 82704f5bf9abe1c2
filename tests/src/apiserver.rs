//! A loopback HTTPS Kubernetes API server for the end-to-end tests — only for what the real
//! `kube-apiserver` (`crate::control_plane`, which every API check's e2e test uses) will not do
//! on demand:
//!
//! - faults: a failing page in the middle of a list, 404/500/503 for a resource it serves,
//!   garbage (an HTML page from a proxy), truncated JSON, bodies that drip or whose length lies,
//!   a dropped connection, a hang, a list that ignores `limit` (10^6 items, hundreds of MiB);
//! - exact request bytes (a patch's content type and body), which the real server's audit log
//!   does not record;
//! - objects dated in the past (an event's `creationTimestamp`: the real server sets it to now);
//! - the incident replay (`k8s-storage-checks-replay`) and tests of other issues that need none
//!   of the real server's behaviour.
//!
//! Anything a real server produces (objects, statuses, selectors, pagination, RBAC refusals, TLS
//! and credential failures, a frozen or lagging watch cache, two API servers of one cluster) is
//! tested against the real one.
//!
//! It generates its own CA, a server certificate for `127.0.0.1`/`localhost` and client
//! certificates (rcgen), serves realistic lists (`…List` with `metadata.resourceVersion`,
//! `limit`/`continue` pagination, `labelSelector` and the `fieldSelector`s the real server accepts
//! for each resource — others are a 400 as in real life), authenticates bearer tokens and client
//! certificates (anything else: 401 `Status`), and injects failures per test: any HTTP status with a
//! realistic `Status` body (403 names user, verb and resource like RBAC does), garbage bodies,
//! truncated JSON, slow answers, dropped connections. [`unused_addr`] gives a port nothing listens
//! on (connection refused).
//!
//! Routing is a table of path patterns (`/api/v1/namespaces/{ns}/pods`) to handlers; later routes
//! win, so a test (or a later issue, e.g. a ConfigMap endpoint with a watch cache) adds its own with
//! [`ApiServer::route`] without touching the server loop. Objects live in a store keyed by
//! resource name ([`ApiServer::set`], [`ApiServer::add`]); handlers see it through [`Ctx`].
//!
//! ConfigMaps with a per-server watch cache (healthy, delayed, frozen RV=0 reads) are in
//! [`watchcache`] ([`ApiServer::configmaps`]).
//!
//! It writes kubeconfig files that point at itself ([`ApiServer::kubeconfig`]) in its own temp dir.

pub mod fixtures;
pub mod watchcache;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// A request as a handler sees it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Query pairs, percent-decoded, in order.
    pub query: Vec<(String, String)>,
    /// Values of `{name}` segments of the matched route.
    pub params: BTreeMap<String, String>,
    /// The authenticated user (token or client certificate), `None` if anonymous.
    pub user: Option<String>,
    /// How the user authenticated: "token", "client-cert" or "".
    pub auth: &'static str,
    /// `Content-Type` of the request body ("" without one).
    pub content_type: String,
    /// The request body (`Content-Length` bytes; empty without one).
    pub body: Vec<u8>,
    /// The server name the client sent in the TLS handshake (SNI; none for an IP address).
    pub sni: Option<String>,
    /// The `Authorization` header as sent ("" without one): for hostile servers that echo it.
    pub authorization: String,
}

impl Request {
    pub fn q(&self, k: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, v)| v.as_str())
    }
    pub fn param(&self, k: &str) -> Option<&str> {
        self.params.get(k).map(|s| s.as_str())
    }
}

/// A response to send. `delay` holds it back (a slow server); `cut` sends only that many body
/// bytes (Content-Length says so too: the JSON just ends); `drop_connection` answers nothing.
#[derive(Debug, Clone, Default)]
pub struct Response {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
    pub delay: Duration,
    pub cut: Option<usize>,
    pub drop_connection: bool,
}

impl Response {
    pub fn json(status: u16, v: &Value) -> Response {
        Response {
            status,
            content_type: "application/json".into(),
            body: serde_json::to_vec(v).unwrap(),
            ..Default::default()
        }
    }
    /// A `Status` object as kube-apiserver sends for errors.
    pub fn status(code: u16, reason: &str, message: &str) -> Response {
        Response::json(
            code,
            &json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                    "message":message,"reason":reason,"code":code}),
        )
    }
}

/// A failure to inject.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// An HTTP error with a realistic Status body (401, 403, 404, 500, 503, …).
    Http(u16),
    /// 200 with an HTML error page from some proxy in between.
    Garbage,
    /// The right answer, cut in the middle of the JSON.
    Truncated,
    /// The right answer, after this long.
    Slow(Duration),
    /// Accept, then close the connection without answering.
    Drop,
    /// A hostile server: this HTTP status with a `Status` whose message echoes the request's
    /// `Authorization` header and query string (what a careless proxy or a rogue server does).
    Echo(u16),
    /// 200 with one list of at least this many bytes, whatever was asked: a server (or a proxy
    /// in between) that ignores `limit` and sends everything at once. The items are pods of
    /// another node, padded with a long annotation.
    IgnoresLimit(usize),
}

/// A `PodList` of at least `bytes` bytes, no `continue` (built once per size).
pub fn huge_list(bytes: usize) -> Vec<u8> {
    static CACHE: Mutex<Option<(usize, Arc<Vec<u8>>)>> = Mutex::new(None);
    let mut c = CACHE.lock().unwrap();
    if let Some((n, b)) = c.as_ref() {
        if *n == bytes {
            return b.as_ref().clone();
        }
    }
    let pad = "x".repeat(16 * 1024);
    let mut out =
        br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":["#
            .to_vec();
    let mut i = 0u64;
    while out.len() < bytes {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(
            format!(
                r#"{{"metadata":{{"name":"filler-{i}","namespace":"default","uid":"u-filler-{i}","annotations":{{"pad":"{pad}"}}}},"spec":{{"nodeName":"elsewhere"}},"status":{{"phase":"Running"}}}}"#
            )
            .as_bytes(),
        );
        i += 1;
    }
    out.extend_from_slice(b"]}");
    *c = Some((bytes, Arc::new(out.clone())));
    out
}

/// What handlers can reach: the object store and the server's resource version counter.
pub struct Ctx {
    pub store: RwLock<BTreeMap<String, Vec<Value>>>,
    pub rv: AtomicU64,
}

impl Ctx {
    /// Objects of a resource (`pods`), cloned.
    pub fn objects(&self, resource: &str) -> Vec<Value> {
        self.store
            .read()
            .unwrap()
            .get(resource)
            .cloned()
            .unwrap_or_default()
    }
}

pub type Handler = Arc<dyn Fn(&Request, &Ctx) -> Response + Send + Sync>;
type FaultRule = (
    Arc<dyn Fn(&Request) -> bool + Send + Sync>,
    Fault,
    Option<usize>,
);

struct Shared {
    ctx: Ctx,
    routes: RwLock<Vec<(Vec<String>, Handler)>>,
    faults: Mutex<Vec<FaultRule>>,
    tokens: RwLock<BTreeMap<String, String>>,
    certs: RwLock<Vec<(Vec<u8>, String)>>,
    log: Mutex<Vec<Request>>,
    stop: AtomicBool,
}

/// The CA and a signing key, PEM.
struct Pki {
    ca_pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Pki {
    fn new(cn: &str) -> Pki {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        p.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let cert = p.self_signed(&key).unwrap();
        Pki {
            ca_pem: cert.pem(),
            issuer: rcgen::Issuer::new(p, key),
        }
    }

    /// A leaf certificate and its PKCS#8 key (PEM) signed by this CA.
    fn leaf(&self, cn: &str, sans: &[&str], client: bool) -> (String, String, Vec<u8>) {
        self.leaf_valid(cn, sans, client, false)
    }

    /// Like `leaf`; `expired` makes it valid only during 2020.
    fn leaf_valid(
        &self,
        cn: &str,
        sans: &[&str],
        client: bool,
        expired: bool,
    ) -> (String, String, Vec<u8>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p =
            rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        p.extended_key_usages = vec![if client {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        }];
        if expired {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().to_vec())
    }
}

/// How a written kubeconfig authenticates.
#[derive(Debug, Clone, PartialEq)]
pub enum KubeAuth {
    /// `token:` inline.
    Token(String),
    /// `tokenFile:` pointing at a file holding this token.
    TokenFile(String),
    /// `client-certificate-data`/`client-key-data` of a fresh certificate for this user.
    CertInline(String),
    /// `client-certificate`/`client-key` file paths (relative to the kubeconfig) for this user.
    CertFiles(String),
    /// A client certificate from a CA the server does not trust.
    CertUntrusted,
    /// A client certificate for this user signed by the server's CA but expired (not_after in 2021).
    CertExpired(String),
    /// An exec credential plugin (unsupported by the checks).
    Exec,
    /// No user credentials.
    None,
}

/// How a written kubeconfig trusts the server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KubeCa {
    Inline,
    File,
    /// A CA that did not sign the server certificate.
    Wrong,
    /// `insecure-skip-tls-verify: true`, no CA.
    Insecure,
    /// No CA at all.
    Missing,
}

pub struct ApiServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    pki: Arc<Pki>,
    dir: tempfile::TempDir,
    n: AtomicU64,
}

/// An address on which nothing listens (connection refused).
pub fn unused_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    a
}

fn b64(b: &[u8]) -> String {
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

fn pct_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
                {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl ApiServer {
    /// Start on a free loopback port with the standard routes and an empty store.
    pub fn start() -> ApiServer {
        ApiServer::start_with(Arc::new(Pki::new("test-kubernetes-ca")))
    }

    /// Another API server of the same "cluster" (an HA control plane): same CA, accepting the
    /// tokens and client certificates this one accepts so far, with its own port, routes, faults
    /// and log. Kubeconfigs written by this server work against it with the URL replaced.
    pub fn start_peer(&self) -> ApiServer {
        let peer = ApiServer::start_with(Arc::clone(&self.pki));
        *peer.shared.tokens.write().unwrap() = self.shared.tokens.read().unwrap().clone();
        *peer.shared.certs.write().unwrap() = self.shared.certs.read().unwrap().clone();
        peer
    }

    fn start_with(pki: Arc<Pki>) -> ApiServer {
        let (srv_pem, srv_key_pem, _) =
            pki.leaf("kube-apiserver", &["127.0.0.1", "localhost"], false);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for c in parse_certs(pki.ca_pem.as_bytes()) {
            roots.add(c).unwrap();
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .allow_unauthenticated()
        .build()
        .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                parse_certs(srv_pem.as_bytes()),
                parse_key(srv_key_pem.as_bytes()),
            )
            .unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            ctx: Ctx {
                store: RwLock::new(BTreeMap::new()),
                rv: AtomicU64::new(1000),
            },
            routes: RwLock::new(Vec::new()),
            faults: Mutex::new(Vec::new()),
            tokens: RwLock::new(BTreeMap::new()),
            certs: RwLock::new(Vec::new()),
            log: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let s2 = Arc::clone(&shared);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s2.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let s3 = Arc::clone(&s2);
                let cfg = Arc::clone(&config);
                std::thread::spawn(move || serve(conn, cfg, s3));
            }
        });
        let server = ApiServer {
            addr,
            shared,
            pki,
            dir: tempfile::tempdir().unwrap(),
            n: AtomicU64::new(0),
        };
        server.standard_routes();
        server
    }

    fn standard_routes(&self) {
        let list = |resource: &'static str,
                    kind: &'static str,
                    fields: &'static [&'static str]|
         -> Handler {
            Arc::new(move |req: &Request, ctx: &Ctx| list_handler(req, ctx, resource, kind, fields))
        };
        const POD_FIELDS: &[&str] = &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ];
        const EVENT_FIELDS: &[&str] = &[
            "metadata.name",
            "metadata.namespace",
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ];
        const META: &[&str] = &["metadata.name", "metadata.namespace"];
        self.route("/api/v1/pods", list("pods", "PodList", POD_FIELDS));
        self.route(
            "/api/v1/namespaces/{ns}/pods",
            list("pods", "PodList", POD_FIELDS),
        );
        self.route("/api/v1/events", list("events", "EventList", EVENT_FIELDS));
        self.route(
            "/api/v1/namespaces/{ns}/events",
            list("events", "EventList", EVENT_FIELDS),
        );
        self.route(
            "/api/v1/persistentvolumes",
            list("persistentvolumes", "PersistentVolumeList", META),
        );
        self.route(
            "/apis/storage.k8s.io/v1/volumeattachments",
            list("volumeattachments", "VolumeAttachmentList", META),
        );
        // Nodes: those set as "nodes", and every node a pod is bound to (a real cluster has a
        // Node object for each).
        self.route(
            "/api/v1/nodes",
            Arc::new(|_req: &Request, ctx: &Ctx| {
                let rv = ctx.rv.load(Ordering::SeqCst).to_string();
                Response::json(
                    200,
                    &serde_json::json!({
                        "kind": "NodeList",
                        "apiVersion": "v1",
                        "metadata": {"resourceVersion": rv},
                        "items": nodes_of(ctx),
                    }),
                )
            }),
        );
        self.route(
            "/api/v1/nodes/{name}",
            Arc::new(|req: &Request, ctx: &Ctx| {
                let name = req.param("name").unwrap();
                nodes_of(ctx)
                    .into_iter()
                    .find(|o| o["metadata"]["name"] == name)
                    .map(|o| Response::json(200, &o))
                    .unwrap_or_else(|| {
                        Response::status(404, "NotFound", &format!("nodes \"{name}\" not found"))
                    })
            }),
        );
        self.route(
            "/api/v1/namespaces/{ns}/{resource}/{name}",
            Arc::new(|req: &Request, ctx: &Ctx| {
                let (ns, res, name) = (
                    req.param("ns").unwrap(),
                    req.param("resource").unwrap(),
                    req.param("name").unwrap(),
                );
                ctx.objects(res)
                    .into_iter()
                    .find(|o| o["metadata"]["namespace"] == ns && o["metadata"]["name"] == name)
                    .map(|o| Response::json(200, &o))
                    .unwrap_or_else(|| {
                        Response::status(404, "NotFound", &format!("{res} \"{name}\" not found"))
                    })
            }),
        );
    }

    /// Add a route; `{x}` segments match anything and land in `Request::params`. Later routes
    /// take precedence over earlier ones (and over the standard ones).
    pub fn route(&self, pattern: &str, h: Handler) {
        let segs = pattern
            .trim_matches('/')
            .split('/')
            .map(|s| s.to_string())
            .collect();
        self.shared.routes.write().unwrap().push((segs, h));
    }

    /// Replace the objects of a resource (`pods`, `events`, `persistentvolumes`, `volumeattachments`, …).
    pub fn set(&self, resource: &str, objects: Vec<Value>) {
        self.shared
            .ctx
            .store
            .write()
            .unwrap()
            .insert(resource.into(), objects);
    }

    /// Add objects to a resource.
    pub fn add(&self, resource: &str, objects: impl IntoIterator<Item = Value>) {
        self.shared
            .ctx
            .store
            .write()
            .unwrap()
            .entry(resource.into())
            .or_default()
            .extend(objects);
    }

    /// Inject a fault into every request from now on.
    pub fn fail(&self, f: Fault) {
        self.fail_when(|_| true, f, None);
    }

    /// Inject a fault into requests `when` matches, at most `times` times (None: always).
    pub fn fail_when(
        &self,
        when: impl Fn(&Request) -> bool + Send + Sync + 'static,
        f: Fault,
        times: Option<usize>,
    ) {
        self.shared
            .faults
            .lock()
            .unwrap()
            .push((Arc::new(when), f, times));
    }

    /// Remove all injected faults.
    pub fn heal(&self) {
        self.shared.faults.lock().unwrap().clear();
    }

    /// Accept this bearer token as `user`.
    pub fn add_token(&self, token: &str, user: &str) {
        self.shared
            .tokens
            .write()
            .unwrap()
            .insert(token.into(), user.into());
    }

    /// The requests served so far.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.log.lock().unwrap().clone()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The CA certificate (PEM) that signed the server certificate.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    /// The server's temp dir (kubeconfigs and credential files live here).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Issue a client certificate for `user` (CN) that the server accepts: (cert PEM, key PEM).
    pub fn client_cert(&self, user: &str) -> (String, String) {
        let (cert, key, der) = self.pki.leaf(user, &[], true);
        self.shared.certs.write().unwrap().push((der, user.into()));
        (cert, key)
    }

    /// Write a kubeconfig for this server and return its path. The credentials a mode needs are
    /// created (tokens registered, certificates issued) as a side effect.
    pub fn kubeconfig(&self, ca: KubeCa, auth: KubeAuth) -> PathBuf {
        self.kubeconfig_for(&self.url(), ca, auth)
    }

    /// Like [`kubeconfig`](Self::kubeconfig) but pointing at `server` (e.g. an unused port).
    pub fn kubeconfig_for(&self, server: &str, ca: KubeCa, auth: KubeAuth) -> PathBuf {
        let n = self.n.fetch_add(1, Ordering::SeqCst);
        let d = self.dir.path().join(format!("kc{n}"));
        std::fs::create_dir_all(&d).unwrap();
        let mut cluster = format!("    server: {server}\n");
        match ca {
            KubeCa::Inline => cluster.push_str(&format!(
                "    certificate-authority-data: {}\n",
                b64(self.pki.ca_pem.as_bytes())
            )),
            KubeCa::File => {
                std::fs::write(d.join("ca.crt"), &self.pki.ca_pem).unwrap();
                cluster.push_str("    certificate-authority: ca.crt\n");
            }
            KubeCa::Wrong => {
                let other = Pki::new("some-other-ca");
                cluster.push_str(&format!(
                    "    certificate-authority-data: {}\n",
                    b64(other.ca_pem.as_bytes())
                ));
            }
            KubeCa::Insecure => cluster.push_str("    insecure-skip-tls-verify: true\n"),
            KubeCa::Missing => {}
        }
        let user = match auth {
            KubeAuth::Token(t) => {
                self.add_token(&t, "system:serviceaccount:monitoring:nagios");
                format!("    token: {t}\n")
            }
            KubeAuth::TokenFile(t) => {
                self.add_token(&t, "system:serviceaccount:monitoring:nagios");
                std::fs::write(d.join("token"), format!("{t}\n")).unwrap();
                format!("    tokenFile: {}\n", d.join("token").display())
            }
            KubeAuth::CertInline(u) => {
                let (c, k) = self.client_cert(&u);
                format!("    client-certificate-data: {}\n    client-key-data: {}\n", b64(c.as_bytes()), b64(k.as_bytes()))
            }
            KubeAuth::CertFiles(u) => {
                let (c, k) = self.client_cert(&u);
                std::fs::create_dir_all(d.join("pki")).unwrap();
                std::fs::write(d.join("pki/client.crt"), c).unwrap();
                std::fs::write(d.join("pki/client.key"), k).unwrap();
                "    client-certificate: pki/client.crt\n    client-key: pki/client.key\n".to_string()
            }
            KubeAuth::CertUntrusted => {
                let other = Pki::new("rogue-ca");
                let (c, k, _) = other.leaf("intruder", &[], true);
                format!("    client-certificate-data: {}\n    client-key-data: {}\n", b64(c.as_bytes()), b64(k.as_bytes()))
            }
            KubeAuth::CertExpired(u) => {
                let (c, k, der) = self.pki.leaf_valid(
                    &u,
                    &[],
                    true,
                    true,
                );
                self.shared.certs.write().unwrap().push((der, u));
                format!("    client-certificate-data: {}\n    client-key-data: {}\n", b64(c.as_bytes()), b64(k.as_bytes()))
            }
            KubeAuth::Exec => "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: aws\n      args: [eks, get-token]\n".to_string(),
            KubeAuth::None => "    {}\n".to_string(),
        };
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n{cluster}contexts:\n- name: test\n  context:\n    cluster: test\n    user: checks\n- name: other\n  context:\n    cluster: test\n    user: nobody\ncurrent-context: test\nusers:\n- name: checks\n  user:\n{user}- name: nobody\n  user: {{}}\n"
        );
        let p = d.join("config");
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

fn parse_certs(pem: &[u8]) -> Vec<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem)
        .map(|c| c.unwrap())
        .collect()
}

fn parse_key(pem: &[u8]) -> PrivateKeyDer<'static> {
    use rustls::pki_types::pem::PemObject;
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from_pem_slice(pem).unwrap())
}

/// The request line and the headers the server uses: (`METHOD target`, authorization,
/// content type, content length).
fn read_head(r: &mut impl BufRead) -> Option<(String, String, String, usize)> {
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let (mut auth, mut ctype, mut len) = (String::new(), String::new(), 0usize);
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("authorization") {
                auth = v.trim().to_string();
            } else if k.eq_ignore_ascii_case("content-type") {
                ctype = v.trim().to_string();
            } else if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().ok()?;
            }
        }
    }
    Some((format!("{method} {target}"), auth, ctype, len))
}

fn serve(tcp: TcpStream, cfg: Arc<rustls::ServerConfig>, s: Arc<Shared>) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(conn) = rustls::ServerConnection::new(cfg) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    // Finish the handshake to learn the client certificate (if any).
    while tls.conn.is_handshaking() {
        if tls.conn.complete_io(&mut tls.sock).is_err() {
            return;
        }
    }
    let sni = tls.conn.server_name().map(str::to_string);
    let peer = tls
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.as_ref().to_vec());
    let mut reader = BufReader::new(tls);
    // One request per connection (Connection: close): simple and enough for the checks.
    let Some((line, authz, content_type, len)) = read_head(&mut reader) else {
        return;
    };
    let mut body = vec![0u8; len.min(1 << 20)];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let mut tls = reader.into_inner();
    let (method, target) = line.split_once(' ').unwrap_or(("GET", "/"));
    let (path, qs) = target.split_once('?').unwrap_or((target, ""));
    let query: Vec<(String, String)> = qs
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (pct_decode(k), pct_decode(v))
        })
        .collect();
    let authorization = authz.clone();
    let (user, auth) = if let Some(t) = authz.strip_prefix("Bearer ") {
        (s.tokens.read().unwrap().get(t.trim()).cloned(), "token")
    } else if let Some(der) = &peer {
        (
            s.certs
                .read()
                .unwrap()
                .iter()
                .find(|(d, _)| d == der)
                .map(|(_, u)| u.clone()),
            "client-cert",
        )
    } else {
        (None, "")
    };
    let mut req = Request {
        method: method.to_string(),
        path: path.to_string(),
        query,
        params: BTreeMap::new(),
        user,
        auth,
        content_type,
        body,
        sni,
        authorization,
    };
    let resp = respond(&mut req, &s);
    s.log.lock().unwrap().push(req);
    if resp.drop_connection {
        let _ = tls.sock.shutdown(std::net::Shutdown::Both);
        return;
    }
    if !resp.delay.is_zero() {
        std::thread::sleep(resp.delay); // simulating a slow server, not synchronising
    }
    let body = match resp.cut {
        Some(n) => &resp.body[..n.min(resp.body.len())],
        None => &resp.body[..],
    };
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        resp.status,
        reason(resp.status),
        resp.content_type,
        body.len()
    );
    let _ = tls.write_all(head.as_bytes());
    let _ = tls.write_all(body);
    let _ = tls.flush();
    tls.conn.send_close_notify();
    let _ = tls.flush();
    // Drain anything left so the peer sees an orderly close.
    let _ = tls.sock.set_read_timeout(Some(Duration::from_millis(100)));
    let mut sink = [0u8; 512];
    let _ = tls.read(&mut sink);
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        410 => "Gone",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn respond(req: &mut Request, s: &Shared) -> Response {
    // Faults first (a later rule wins, like routes), then authentication, then the route.
    let fault = {
        let mut faults = s.faults.lock().unwrap();
        let mut found = None;
        for (when, f, times) in faults.iter_mut().rev() {
            if times.is_some_and(|t| t == 0) || !when(req) {
                continue;
            }
            if let Some(t) = times {
                *t -= 1;
            }
            found = Some(f.clone());
            break;
        }
        found
    };
    let user = req
        .user
        .clone()
        .unwrap_or_else(|| "system:anonymous".into());
    let res = resource_of(&req.path);
    match &fault {
        Some(Fault::Echo(c)) => {
            let q: Vec<String> = req.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
            return Response::status(
                *c,
                reason(*c),
                &format!(
                    "rejected {} {}?{} with Authorization: {}",
                    req.method,
                    req.path,
                    q.join("&"),
                    req.authorization
                ),
            );
        }
        Some(Fault::Http(401)) => return Response::status(401, "Unauthorized", "Unauthorized"),
        Some(Fault::Http(403)) => {
            let verb = match req.method.as_str() {
                "PATCH" => "patch",
                "POST" => "create",
                "PUT" => "update",
                "DELETE" => "delete",
                _ if names_object(&req.path) => "get",
                _ => "list",
            };
            let scope = match res.1.as_deref() {
                Some(ns) => format!("in the namespace \"{ns}\""),
                None => "at the cluster scope".into(),
            };
            return Response::status(
                403,
                "Forbidden",
                &format!(
                    "{} is forbidden: User \"{user}\" cannot {verb} resource \"{}\" in API group \"{}\" {scope}",
                    res.2, res.2, res.0
                ),
            );
        }
        Some(Fault::Http(404)) => {
            return Response::status(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
        }
        Some(Fault::Http(c)) => {
            return Response::status(*c, reason(*c), "etcdserver: request timed out")
        }
        Some(Fault::Drop) => {
            return Response {
                drop_connection: true,
                ..Default::default()
            }
        }
        Some(Fault::IgnoresLimit(bytes)) if req.user.is_some() => {
            return Response {
                status: 200,
                content_type: "application/json".into(),
                body: huge_list(*bytes),
                ..Default::default()
            }
        }
        Some(Fault::Garbage) => {
            return Response {
                status: 200,
                content_type: "text/html".into(),
                body:
                    b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>\n"
                        .to_vec(),
                ..Default::default()
            }
        }
        _ => {}
    }
    if req.user.is_none() {
        return Response::status(401, "Unauthorized", "Unauthorized");
    }
    let routes = s.routes.read().unwrap();
    let segs: Vec<&str> = req.path.trim_matches('/').split('/').collect();
    let mut resp = None;
    for (pat, h) in routes.iter().rev() {
        if pat.len() != segs.len() {
            continue;
        }
        let mut params = BTreeMap::new();
        let ok = pat.iter().zip(&segs).all(|(p, s)| {
            if p.starts_with('{') && p.ends_with('}') {
                params.insert(p[1..p.len() - 1].to_string(), s.to_string());
                true
            } else {
                p == s
            }
        });
        if ok {
            req.params = params;
            resp = Some(h(req, &s.ctx));
            break;
        }
    }
    let mut resp = resp.unwrap_or_else(|| {
        Response::status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    });
    match fault {
        Some(Fault::Truncated) => resp.cut = Some(resp.body.len() / 2),
        Some(Fault::Slow(d)) => resp.delay = d,
        _ => {}
    }
    resp
}

/// True when a path addresses one object (`…/configmaps/NAME`) rather than a collection.
fn names_object(path: &str) -> bool {
    let p: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match p.first() {
        Some(&"apis") if p.len() > 3 => &p[3..],
        Some(&"api") if p.len() > 2 => &p[2..],
        _ => &p[..],
    };
    match rest {
        ["namespaces", _, _, _, ..] => true,
        ["namespaces", _] => true,
        [_, _, ..] => rest[0] != "namespaces",
        _ => false,
    }
}

/// (group, namespace, resource) of a path.
fn resource_of(path: &str) -> (String, Option<String>, String) {
    let p: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match p.first() {
        Some(&"apis") if p.len() > 3 => (p[1].to_string(), &p[3..]),
        Some(&"api") if p.len() > 2 => (String::new(), &p[2..]),
        _ => (String::new(), &p[..]),
    };
    match rest {
        ["namespaces", ns, r, ..] => (group, Some(ns.to_string()), r.to_string()),
        [r, ..] => (group, None, r.to_string()),
        [] => (group, None, String::new()),
    }
}

fn lookup<'a>(v: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted.split('.').try_fold(v, |v, k| v.get(k))
}

fn value_str(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn label_match(obj: &Value, sel: &str) -> bool {
    let labels = &obj["metadata"]["labels"];
    sel.split(',').filter(|t| !t.trim().is_empty()).all(|t| {
        let t = t.trim();
        let get = |k: &str| {
            labels
                .get(k.trim())
                .and_then(|v| v.as_str())
                .map(|s| s.to_string())
        };
        if let Some(k) = t.strip_prefix('!') {
            get(k).is_none()
        } else if let Some((k, v)) = t.split_once("!=") {
            get(k).as_deref() != Some(v.trim())
        } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
            get(k).as_deref() == Some(v.trim())
        } else {
            get(t).is_some()
        }
    })
}

/// A standard list: namespace from the path, labelSelector, fieldSelector (only `fields`),
/// `limit`/`continue` pagination with opaque-looking tokens.
/// The Node objects of the store: those set as `nodes`, plus one per node a pod is bound to.
fn nodes_of(ctx: &Ctx) -> Vec<Value> {
    let mut nodes = ctx.objects("nodes");
    for p in ctx.objects("pods") {
        let Some(n) = p["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) else {
            continue;
        };
        if !nodes.iter().any(|o| o["metadata"]["name"] == n) {
            nodes.push(serde_json::json!({
                "kind": "Node",
                "apiVersion": "v1",
                "metadata": {"name": n, "uid": format!("node-{n}")},
            }));
        }
    }
    nodes
}

pub fn list_handler(
    req: &Request,
    ctx: &Ctx,
    resource: &str,
    kind: &str,
    fields: &[&str],
) -> Response {
    let mut items = ctx.objects(resource);
    if let Some(ns) = req.param("ns") {
        items.retain(|o| o["metadata"]["namespace"] == ns);
    }
    if let Some(sel) = req.q("labelSelector") {
        items.retain(|o| label_match(o, sel));
    }
    if let Some(sel) = req.q("fieldSelector") {
        for term in sel.split(',').filter(|t| !t.is_empty()) {
            let (k, v, neg) = if let Some((k, v)) = term.split_once("!=") {
                (k, v, true)
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (k, v, false)
            } else {
                return Response::status(
                    400,
                    "BadRequest",
                    &format!("invalid selector: '{sel}'; can't understand '{term}'"),
                );
            };
            if !fields.contains(&k) {
                return Response::status(
                    400,
                    "BadRequest",
                    &format!("field label not supported: {k}"),
                );
            }
            items.retain(|o| (value_str(lookup(o, k)) == v) != neg);
        }
    }
    let rv = ctx.rv.load(Ordering::SeqCst).to_string();
    let start = match req.q("continue") {
        None => 0,
        Some(c) => match c
            .strip_prefix("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6")
            .and_then(|s| s.split_once('.'))
            .and_then(|(o, _)| o.parse::<usize>().ok())
        {
            Some(o) => o,
            None => {
                return Response::status(
                    400,
                    "BadRequest",
                    "continue key is not valid: illegal base64 data",
                )
            }
        },
    };
    let limit = req
        .q("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let total = items.len();
    let end = limit.map(|l| (start + l).min(total)).unwrap_or(total);
    let page: Vec<Value> = items.get(start.min(total)..end).unwrap_or(&[]).to_vec();
    let mut meta = json!({ "resourceVersion": rv });
    if end < total {
        meta["continue"] = json!(format!("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6{end}.{rv}"));
        meta["remainingItemCount"] = json!(total - end);
    }
    let api_version = if resource == "volumeattachments" {
        "storage.k8s.io/v1"
    } else {
        "v1"
    };
    Response::json(
        200,
        &json!({"kind": kind, "apiVersion": api_version, "metadata": meta, "items": page}),
    )
}
