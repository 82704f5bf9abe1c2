//! What a failed request says: every transport, TLS, HTTP and decoding failure turned into an
//! UNKNOWN an operator can act on.

use super::*;

impl Client {
    pub(super) fn over_cap(&self, shown: &str, cap: u64, what: &str) -> Unknown {
        Unknown(format!(
            "API server {} answered {shown} with more than {} ({what}: the cap; a server that ignores `limit` paging?): not read further",
            self.shown,
            plugin::fmt_bytes(cap)
        ))
    }

    pub(super) fn decode_error(
        &self,
        e: crate::list::Error,
        shown: &str,
        left: Duration,
    ) -> Unknown {
        if e.is_io() {
            let io = e
                .into_io()
                .unwrap_or_else(|| std::io::Error::other("read failed"));
            return self.transport_error(ureq::Error::from(io), shown, left);
        }
        let what = if e.is_eof() {
            "truncated JSON (the answer ended early)"
        } else {
            "invalid JSON"
        };
        Unknown(format!(
            "bad answer from API server {} to {shown}: {what}: {e}",
            self.shown
        ))
    }

    pub(super) fn transport_error(&self, e: ureq::Error, shown: &str, left: Duration) -> Unknown {
        use ureq::Error as E;
        let Some(proxy) = &self.proxy_shown else {
            return self.direct_error(e, shown, left);
        };
        let server = &self.shown;
        match e {
            E::ConnectProxyFailed(why) => Unknown(format!(
                "proxy {proxy} (proxy-url in {}) did not open a tunnel to API server {server} for \
                 {shown}: {} (does the proxy allow CONNECT to that port, and are its credentials right?)",
                self.source,
                plugin::render::truncate(&why, 200)
            )),
            E::Io(io)
                if io.kind() == std::io::ErrorKind::ConnectionRefused
                    && io.get_ref().is_none_or(|i| !i.is::<rustls::Error>()) =>
            {
                Unknown(format!(
                    "cannot connect to proxy {proxy} (proxy-url in {}): connection refused (is the \
                     proxy running, and is this its address?)",
                    self.source
                ))
            }
            E::HostNotFound => Unknown(format!(
                "cannot resolve the host of proxy {proxy} (proxy-url in {})",
                self.source
            )),
            other => {
                let u = self.direct_error(other, shown, left);
                Unknown(format!("{} (through proxy {proxy})", u.0))
            }
        }
    }

    fn direct_error(&self, e: ureq::Error, shown: &str, left: Duration) -> Unknown {
        use ureq::Error as E;
        let server = &self.shown;
        match e {
            E::Timeout(_) => Unknown(format!(
                "API request {shown} to {server} timed out after {} (what was left of the check's -t)",
                plugin::fmt_duration(left)
            )),
            E::HostNotFound => Unknown(format!(
                "cannot resolve API server host {} (server {server} from {})",
                self.host, self.source
            )),
            E::Io(io) => {
                if let Some(r) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                    return self.tls_error(r);
                }
                match io.kind() {
                    std::io::ErrorKind::ConnectionRefused => Unknown(format!(
                        "cannot connect to API server {server}: connection refused (is the API server \
                         running and is this the right address? server from {})",
                        self.source
                    )),
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => Unknown(format!(
                        "API request {shown} to {server} timed out after {} (what was left of the check's -t)",
                        plugin::fmt_duration(left)
                    )),
                    std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe => Unknown(format!(
                        "API server {server} closed the connection during {shown} without a \
                         complete answer (a proxy or load balancer in between, or the server restarting?)"
                    )),
                    _ if io.to_string().contains("lookup address") => Unknown(format!(
                        "cannot resolve API server host {} (server {server} from {}): {io}",
                        self.host, self.source
                    )),
                    _ => Unknown(format!(
                        "API request {shown} to {server} failed: {}",
                        plugin::errtext(&io)
                    )),
                }
            }
            E::Rustls(r) => self.tls_error(&r),
            E::Tls(m) => Unknown(format!("TLS with API server {} failed: {m}", self.host)),
            other => Unknown(format!(
                "API request {shown} to {server} failed: {other}"
            )),
        }
    }

    pub(super) fn tls_error(&self, e: &rustls::Error) -> Unknown {
        use rustls::CertificateError as C;
        let why = match e {
            rustls::Error::InvalidCertificate(c) => match c {
                C::UnknownIssuer => "certificate signed by an unknown authority".to_string(),
                C::NotValidForName | C::NotValidForNameContext { .. } => {
                    match &self.tls_server_name {
                        Some(n) => format!(
                            "certificate is not valid for the name {n} (the kubeconfig's \
                             tls-server-name: set it to a name the certificate carries)"
                        ),
                        None => format!(
                            "certificate is not valid for the name {} (reached by another name or \
                             by IP? set the kubeconfig's tls-server-name to a name the \
                             certificate carries)",
                            self.host
                        ),
                    }
                }
                C::Expired | C::ExpiredContext { .. } => "certificate has expired".to_string(),
                C::NotValidYet | C::NotValidYetContext { .. } => {
                    "certificate is not valid yet (clock skew?)".to_string()
                }
                other => format!("invalid certificate: {other:?}"),
            },
            rustls::Error::AlertReceived(a) => {
                return Unknown(format!(
                    "TLS handshake with API server {} failed: the server sent {a:?} \
                     (client certificate rejected or required?)",
                    self.host
                ))
            }
            other => other.to_string(),
        };
        Unknown(format!(
            "TLS verification of API server {} failed: {why} (CA: {}, from {})",
            self.host, self.ca_from, self.source
        ))
    }

    /// The operator's message for an HTTP error, and the server's own message (for callers).
    pub(super) fn http_error(
        &self,
        status: u16,
        body: &[u8],
        method: &str,
        path: &str,
        shown: &str,
    ) -> (Unknown, String) {
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Status {
            kind: String,
            message: String,
            reason: String,
        }
        let st: Status = serde_json::from_slice(body).unwrap_or_default();
        let msg = if st.kind == "Status" && !st.message.is_empty() {
            plugin::render::truncate(&st.message, 300)
        } else {
            let t = String::from_utf8_lossy(body);
            let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
            if t.is_empty() {
                "empty body".into()
            } else {
                plugin::render::truncate(&t, 200)
            }
        };
        let mut res = Resource::of_path(path);
        res.verb = match method {
            "PATCH" => "patch",
            "PUT" => "update",
            "POST" => "create",
            "DELETE" => "delete",
            _ => res.verb,
        };
        let head = format!(
            "API server {} answered {shown} with HTTP {status}",
            self.shown
        );
        let hint = match status {
            401 => format!(
                "credentials rejected (token expired or revoked, or client certificate not signed \
                 by the cluster CA): check the user in {}",
                self.source
            ),
            403 => format!(
                "the checks' identity lacks RBAC permission: grant {}",
                res.rbac_rule()
            ),
            404 => format!(
                "{} not served by this API server (wrong server URL, or API not enabled?)",
                res.describe()
            ),
            410 => "the list changed too much while paging (continue token expired): run again"
                .to_string(),
            429 => "the API server is throttling requests (429 Too Many Requests)".to_string(),
            s if s >= 500 => {
                "API server error: the control plane is unhealthy or overloaded".to_string()
            }
            _ => st.reason.clone(),
        };
        (Unknown(format!("{head}: {hint} ({msg})")), msg)
    }
}
